/* quant_s8.c (AVX2, and AVX-512 VNNI on 256-bit vectors): the int8 kernels, contracts in
 * src/cpu.h: the convolution's packing (pack_w_s8, quads_s8, taps_s8), products
 * (qgemm_s8, qgemm_rq_s8 with the requantization in registers; the portable path is
 * block in ref/conv2d_s8.c), depthwise taps (dw_taps_s16, dw3_s8), requant_row and
 * quantize_s8. Integer results: equal to the reference's exactly. The __vnni kernels
 * (ERT_VNNI) run only where src/cpu.c found AVX512_VNNI and AVX512VL. */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include <string.h>

#include "x86_avx2.h"

/* row i of the weights from tap t, or 16 zero bytes for rows past `rows` */
ERT_AVX2_INLINE const int8_t *i_row(const int8_t *const *r, int32_t i, int32_t rows, int32_t t) {
  return i < rows ? r[i] + t : r[i];
}

/* Four quads of the four rows at a time: a 4x4 transpose of 32-bit groups, the rows'
 * sums by madd against ones; the last taps (fewer than 16) through zero-padded copies,
 * their quads stored through a buffer. */
ERT_AVX2_INLINE void pack16(int8_t *o, const int8_t *const *r, int32_t t, __m256i *sum) {
  const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(r[0] + t));
  const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(r[1] + t));
  const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(r[2] + t));
  const __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(r[3] + t));
  const __m256i ones = _mm256_set1_epi16(1);
  sum[0] = _mm256_add_epi32(sum[0], _mm256_madd_epi16(_mm256_cvtepi8_epi16(a), ones));
  sum[1] = _mm256_add_epi32(sum[1], _mm256_madd_epi16(_mm256_cvtepi8_epi16(b), ones));
  sum[2] = _mm256_add_epi32(sum[2], _mm256_madd_epi16(_mm256_cvtepi8_epi16(c), ones));
  sum[3] = _mm256_add_epi32(sum[3], _mm256_madd_epi16(_mm256_cvtepi8_epi16(d), ones));
  const __m128i ab0 = _mm_unpacklo_epi32(a, b), ab1 = _mm_unpackhi_epi32(a, b);
  const __m128i cd0 = _mm_unpacklo_epi32(c, d), cd1 = _mm_unpackhi_epi32(c, d);
  __m128i *v = (__m128i *)(void *)o;
  _mm_storeu_si128(v, _mm_unpacklo_epi64(ab0, cd0));
  _mm_storeu_si128(v + 1, _mm_unpackhi_epi64(ab0, cd0));
  _mm_storeu_si128(v + 2, _mm_unpacklo_epi64(ab1, cd1));
  _mm_storeu_si128(v + 3, _mm_unpackhi_epi64(ab1, cd1));
}

ERT_AVX2 void ert_pack_w_s8__avx2(int8_t *wq, int32_t *wsum, const int8_t *w, size_t ld,
                                  int32_t rows, int32_t k) {
  static const int8_t zeros[16] = {0};
  const int8_t *r[4];
  for (int32_t i = 0; i < 4; ++i) r[i] = i < rows ? w + (size_t)i * ld : zeros;
  const int32_t kq = (k + 3) / 4;
  __m256i sum[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  int32_t t = 0;
  for (; t + 16 <= k; t += 16) {
    const int8_t *rt[4] = {i_row(r, 0, rows, t), i_row(r, 1, rows, t), i_row(r, 2, rows, t),
                           i_row(r, 3, rows, t)};
    pack16(wq + 4 * t, rt, 0, sum);
  }
  if (t < k) { /* the last k - t taps, zero-padded to 16 */
    int8_t tail[4][16], out[64];
    memset(tail, 0, sizeof tail);
    for (int32_t i = 0; i < rows; ++i) memcpy(tail[i], r[i] + t, (size_t)(k - t));
    const int8_t *rt[4] = {tail[0], tail[1], tail[2], tail[3]};
    pack16(out, rt, 0, sum);
    memcpy(wq + 4 * t, out, (size_t)(16 * kq - 4 * t));
  }
  const __m256i s4 = _mm256_hadd_epi32(_mm256_hadd_epi32(sum[0], sum[1]),
                                       _mm256_hadd_epi32(sum[2], sum[3]));
  _mm_storeu_si128((__m128i *)(void *)wsum,
                   _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1)));
}

ERT_AVX2 void ert_quads_s8__avx2(int8_t *dst, const int8_t *src, size_t ld, int32_t k, int32_t n,
                                 int32_t np) {
  const int32_t kq = (k + 3) / 4;
  for (int32_t q = 0; q < kq; ++q) {
    int8_t *d = dst + (size_t)4 * (size_t)np * (size_t)q;
    const int8_t *s[4];
    int valid[4];
    for (int j = 0; j < 4; ++j) {
      valid[j] = 4 * q + j < k;
      s[j] = valid[j] ? src + (size_t)(4 * q + j) * ld : src;
    }
    int32_t i = 0;
    if (valid[3]) /* four rows: interleave 16 columns at a time */
      for (; i + 16 <= n; i += 16) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s[0] + i));
        const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s[1] + i));
        const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s[2] + i));
        const __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s[3] + i));
        const __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
        const __m128i ce0 = _mm_unpacklo_epi8(c, e), ce1 = _mm_unpackhi_epi8(c, e);
        _mm_storeu_si128((__m128i *)(void *)(d + 4 * i), _mm_unpacklo_epi16(ab0, ce0));
        _mm_storeu_si128((__m128i *)(void *)(d + 4 * i + 16), _mm_unpackhi_epi16(ab0, ce0));
        _mm_storeu_si128((__m128i *)(void *)(d + 4 * i + 32), _mm_unpacklo_epi16(ab1, ce1));
        _mm_storeu_si128((__m128i *)(void *)(d + 4 * i + 48), _mm_unpackhi_epi16(ab1, ce1));
      }
    for (; i < np; ++i)
      for (int j = 0; j < 4; ++j) d[4 * i + j] = valid[j] && i < n ? s[j][i] : 0;
  }
}

/* Eight pixels: per quad, the 32 bytes of their taps widened to int16 in two halves,
 * times each row's four weights (int16, broadcast) by madd: per row two vectors of pair
 * sums, added over the quads; one horizontal add per row at the end gives the pixels'
 * sums in the order 0 1 4 5 2 3 6 7, which a 64-bit permute restores. int16 products of
 * int8 values and their pair sums (at most 2 * 128 * 128) are exact in int32. The
 * weights are widened and broadcast once per chunk of quads, for all pixels. */
enum { QW_CHUNK = 64 }; /* quads of widened weights kept at once (8 KB) */

ERT_AVX2 void ert_qgemm_s8__avx2(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                                 const int32_t *bias, int32_t *acc, int32_t lda) {
  const size_t qstep = (size_t)4 * (size_t)np;
  const int32_t n8 = np & ~7;
  __m256i wv[QW_CHUNK][4];
  for (int32_t q0 = 0; q0 < kq; q0 += QW_CHUNK) {
    const int32_t nq = kq - q0 < QW_CHUNK ? kq - q0 : QW_CHUNK;
    for (int32_t q = 0; q < nq; ++q) {
      const __m256i w = _mm256_cvtepi8_epi16(
          _mm_loadu_si128((const __m128i *)(const void *)(wq + 16 * (q0 + q))));
      wv[q][0] = _mm256_permute4x64_epi64(w, 0x00);
      wv[q][1] = _mm256_permute4x64_epi64(w, 0x55);
      wv[q][2] = _mm256_permute4x64_epi64(w, 0xAA);
      wv[q][3] = _mm256_permute4x64_epi64(w, 0xFF);
    }
    for (int32_t i = 0; i < n8; i += 8) {
      __m256i lo0 = _mm256_setzero_si256(), lo1 = lo0, lo2 = lo0, lo3 = lo0;
      __m256i hi0 = lo0, hi1 = lo0, hi2 = lo0, hi3 = lo0;
      const int8_t *c = col + qstep * (size_t)q0 + (size_t)4 * (size_t)i;
      for (int32_t q = 0; q < nq; ++q, c += qstep) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)c);
        const __m256i xl = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(x));
        const __m256i xh = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(x, 1));
        lo0 = _mm256_add_epi32(lo0, _mm256_madd_epi16(xl, wv[q][0]));
        hi0 = _mm256_add_epi32(hi0, _mm256_madd_epi16(xh, wv[q][0]));
        lo1 = _mm256_add_epi32(lo1, _mm256_madd_epi16(xl, wv[q][1]));
        hi1 = _mm256_add_epi32(hi1, _mm256_madd_epi16(xh, wv[q][1]));
        lo2 = _mm256_add_epi32(lo2, _mm256_madd_epi16(xl, wv[q][2]));
        hi2 = _mm256_add_epi32(hi2, _mm256_madd_epi16(xh, wv[q][2]));
        lo3 = _mm256_add_epi32(lo3, _mm256_madd_epi16(xl, wv[q][3]));
        hi3 = _mm256_add_epi32(hi3, _mm256_madd_epi16(xh, wv[q][3]));
      }
      /* the first chunk starts from the bias, the others add to what is there */
#define ROW_OUT(r)                                                                            \
  do {                                                                                        \
    __m256i *o = (__m256i *)(void *)(acc + (size_t)(r) * (size_t)lda + (size_t)i);            \
    const __m256i base = q0 == 0 ? _mm256_set1_epi32(bias[r]) : _mm256_loadu_si256(o);        \
    _mm256_storeu_si256(o, _mm256_add_epi32(base, _mm256_permute4x64_epi64(                   \
                                                      _mm256_hadd_epi32(lo##r, hi##r),        \
                                                      _MM_SHUFFLE(3, 1, 2, 0))));             \
  } while (0)
      ROW_OUT(0);
      ROW_OUT(1);
      ROW_OUT(2);
      ROW_OUT(3);
#undef ROW_OUT
    }
  }
  int32_t i = n8;
  for (; i < np; ++i) /* the pixels past the last eight */
    for (int32_t r = 0; r < 4; ++r) {
      int32_t s = bias[r];
      for (int32_t q = 0; q < kq; ++q)
        for (int32_t j = 0; j < 4; ++j)
          s += (int32_t)col[qstep * (size_t)q + (size_t)4 * (size_t)i + (size_t)j] * wq[16 * q + 4 * r + j];
      acc[(size_t)r * (size_t)lda + (size_t)i] = s;
    }
}

/* dw_taps_s16: 16 outputs per step (8 for rows of 8 to 15), the taps two at a time: the
 * two runs interleaved (unpack) and multiplied by the weight pair with madd, which sums
 * the two products exactly in int32 (each fits int16: the contract). unpack works within
 * 128-bit halves, so a 16-output step's sums come as outputs 0-3 8-11 and 4-7 12-15, put
 * back in order at the store. A last partial step is recomputed over the outputs before
 * the row's end (the same integers); rows under 8 outputs are summed one by one. */
ERT_AVX2_INLINE void taps16(int32_t *a, const int16_t *b, const ptrdiff_t *off, const __m256i *wp,
                            int32_t taps, __m256i vb) {
  __m256i lo = vb, hi = vb;
  int32_t t = 0;
  for (; t + 2 <= taps; t += 2) {
    const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(b + off[t]));
    const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(b + off[t + 1]));
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1), wp[t / 2]));
    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1), wp[t / 2]));
  }
  if (t < taps) { /* the odd last tap, its pair weight 0 */
    const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(b + off[t]));
    const __m256i z = _mm256_setzero_si256();
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, z), wp[t / 2]));
    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, z), wp[t / 2]));
  }
  _mm256_storeu_si256((__m256i *)(void *)a, _mm256_permute2x128_si256(lo, hi, 0x20));
  _mm256_storeu_si256((__m256i *)(void *)(a + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
}

ERT_AVX2_INLINE void taps8(int32_t *a, const int16_t *b, const ptrdiff_t *off, const __m256i *wp,
                           int32_t taps, __m256i vb) {
  __m128i lo = _mm256_castsi256_si128(vb), hi = lo;
  for (int32_t t = 0; t < taps; t += 2) {
    const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(b + off[t]));
    const __m128i x1 = t + 1 < taps ? _mm_loadu_si128((const __m128i *)(const void *)(b + off[t + 1]))
                                    : _mm_setzero_si128();
    const __m128i w = _mm256_castsi256_si128(wp[t / 2]);
    lo = _mm_add_epi32(lo, _mm_madd_epi16(_mm_unpacklo_epi16(x0, x1), w));
    hi = _mm_add_epi32(hi, _mm_madd_epi16(_mm_unpackhi_epi16(x0, x1), w));
  }
  _mm_storeu_si128((__m128i *)(void *)a, lo);
  _mm_storeu_si128((__m128i *)(void *)(a + 4), hi);
}

ERT_AVX2 void ert_dw_taps_s16__avx2(int32_t *acc, const int16_t *base, const ptrdiff_t *off,
                                    const int16_t *w, int32_t n, int32_t taps, int32_t bias,
                                    int32_t rows, ptrdiff_t rs) {
  __m256i wp[13];
  for (int32_t t = 0; t < taps; t += 2) {
    const uint32_t w1 = t + 1 < taps ? (uint16_t)w[t + 1] : 0u;
    wp[t / 2] = _mm256_set1_epi32((int32_t)(((uint32_t)w1 << 16) | (uint16_t)w[t]));
  }
  const __m256i vb = _mm256_set1_epi32(bias);
  for (int32_t r = 0; r < rows; ++r) {
    const int16_t *b = base + (ptrdiff_t)r * rs;
    int32_t *a = acc + (size_t)r * (size_t)n;
    if (n >= 16) {
      for (int32_t i = 0; i < n; i += 16) {
        if (i + 16 > n) i = n - 16;
        taps16(a + i, b + i, off, wp, taps, vb);
      }
    } else if (n >= 8) {
      taps8(a, b, off, wp, taps, vb);
      taps8(a + n - 8, b + n - 8, off, wp, taps, vb);
    } else {
      for (int32_t i = 0; i < n; ++i) {
        int32_t s = bias;
        for (int32_t t = 0; t < taps; ++t) s += (int32_t)w[t] * b[off[t] + i];
        a[i] = s;
      }
    }
  }
}

/* requant_row: eight accumulators at a time, their 64-bit products in two halves (even
 * and odd lanes, vpmuldq), with the reference's unsigned shift (v + 2^62 is
 * non-negative, ref/quant_s8.c), clamped in 64 bits, then narrowed to int8. */
ERT_AVX2 void ert_requant_row__avx2(const int32_t *acc, size_t n, int32_t mult, int32_t shift,
                                    int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  const uint64_t bias = (uint64_t)1 << 62, rnd = (uint64_t)1 << (shift - 1);
  const int64_t base = (int64_t)(bias >> shift) - zp;
  const __m256i m = _mm256_set1_epi32(mult), add = _mm256_set1_epi64x((long long)(rnd + bias));
  const __m256i vbase = _mm256_set1_epi64x(base), vlo = _mm256_set1_epi64x(lo);
  const __m256i vhi = _mm256_set1_epi64x(hi);
  const __m128i cnt = _mm_cvtsi32_si128(shift);
  const __m256i gather = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(acc + i));
    __m256i e = _mm256_add_epi64(_mm256_mul_epi32(a, m), add);
    __m256i o = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(a, 32), m), add);
    e = _mm256_sub_epi64(_mm256_srl_epi64(e, cnt), vbase);
    o = _mm256_sub_epi64(_mm256_srl_epi64(o, cnt), vbase);
    e = _mm256_blendv_epi8(e, vlo, _mm256_cmpgt_epi64(vlo, e));
    o = _mm256_blendv_epi8(o, vlo, _mm256_cmpgt_epi64(vlo, o));
    e = _mm256_blendv_epi8(e, vhi, _mm256_cmpgt_epi64(e, vhi));
    o = _mm256_blendv_epi8(o, vhi, _mm256_cmpgt_epi64(o, vhi));
    const __m256i r = _mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA); /* 8 int32 */
    const __m256i p16 = _mm256_packs_epi32(r, r);     /* per half: r0..r3 r0..r3 (int16) */
    const __m256i p8 = _mm256_packs_epi16(p16, p16);  /* per half: r0..r3 repeated (int8) */
    _mm_storel_epi64((__m128i *)(void *)(y + i),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(p8, gather)));
  }
  for (; i < n; i++) {
    const uint64_t v = (uint64_t)((int64_t)acc[i] * mult) + rnd + bias;
    int64_t r = (int64_t)(v >> shift) - base;
    r = r < lo ? lo : r;
    y[i] = (int8_t)(r > hi ? hi : r);
  }
}

/* ---- fused requantization (dw3_s8, qgemm_rq_s8) ------------------------------------ */

/* The requantization for shifts of 31 and more, in 32-bit lanes: p = a*m + 2^(s-1)
 * (64-bit, even and odd lanes by vpmuldq; |p| < 2^62) has as high half floor(p / 2^32),
 * and floor(p / 2^32) shifted right arithmetically by s - 32 is floor(p / 2^s) =
 * requant(a, m, s), which fits int32. For s = 31, 2p fits int64 and its high half is
 * floor(p / 2^31). */
typedef struct rq8 {
  __m256i rnd;  /* 2^(s-1), 64-bit lanes */
  __m128i cnt;  /* s - 32, or 0 for s = 31 */
  int s31;      /* s == 31 */
} rq8;

ERT_AVX2_INLINE rq8 rq8_of(int32_t shift) {
  rq8 r;
  r.rnd = _mm256_set1_epi64x((long long)((uint64_t)1 << (shift - 1)));
  r.cnt = _mm_cvtsi32_si128(shift > 32 ? shift - 32 : 0);
  r.s31 = shift == 31;
  return r;
}

/* requant(a[i], m, s) for the eight lanes (m broadcast in 32-bit lanes); s31: q->s31,
 * a constant where the caller inlines it */
ERT_AVX2_INLINE __m256i rq8_apply(const rq8 *q, __m256i a, __m256i m, int s31) {
  __m256i e = _mm256_add_epi64(_mm256_mul_epi32(a, m), q->rnd);
  __m256i o = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(a, 32), m), q->rnd);
  if (s31) e = _mm256_add_epi64(e, e), o = _mm256_add_epi64(o, o);
  const __m256i t = _mm256_blend_epi32(_mm256_srli_epi64(e, 32), o, 0xAA); /* high halves */
  return _mm256_sra_epi32(t, q->cnt);
}

/* clamp(zp + v, lo, hi) as int8 of two vectors of requantized values, by saturating
 * steps: v saturated to int16, plus zp saturating, to int8 saturating, then clamped (a
 * value saturated at any step lies beyond [-128, 127] on the same side as the exact one,
 * so it clamps the same). Per 128-bit half: a's 4 lanes, b's 4 lanes; the halves then
 * once more for the 16 bytes' order (the caller's permutation). */
ERT_AVX2_INLINE __m256i rq8_pack(__m256i a, __m256i b, __m256i c, __m256i d, __m256i zp16,
                                 __m256i lo8, __m256i hi8) {
  const __m256i ab = _mm256_adds_epi16(_mm256_packs_epi32(a, b), zp16);
  const __m256i cd = _mm256_adds_epi16(_mm256_packs_epi32(c, d), zp16);
  return _mm256_min_epi8(_mm256_max_epi8(_mm256_packs_epi16(ab, cd), lo8), hi8);
}

/* A depthwise step's 16 output bytes to y: all 16 when n is 16 or the plane has room past
 * the row's end (the next row overwrites them), else its first n through a buffer. */
ERT_AVX2_INLINE void store_step(int8_t *y, __m128i out, int32_t n, int room) {
  if (n == 16 || room) {
    _mm_storeu_si128((__m128i *)(void *)y, out);
  } else {
    int8_t tmp[16];
    _mm_storeu_si128((__m128i *)(void *)tmp, out);
    memcpy(y, tmp, (size_t)n);
  }
}

/* dw3_s8: 16 outputs of a row per step. The window sum is bias - x_zp * sum w plus the
 * raw products, by madd on int16 pairs: a row's two first taps (w0, w1) against the
 * pairs (x[c], x[c+1]) of the widened run starting at an output's first column, the
 * third (w2, 0) against the run two columns on. Stride 2: the pairs of one run are the
 * windows of eight consecutive outputs; stride 1: runs at columns 0 and 1 from the step's
 * start give the even and the odd outputs. A last step shorter than 16 outputs is
 * recomputed over the row's last 16 outputs, or (rows under 16 outputs) stored whole when
 * its excess lands in later rows of the plane (written again later), else through a
 * buffer. */
ERT_AVX2_INLINE __m256i dw_pair(const int8_t *p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p));
}

ERT_AVX2_INLINE void dw3_plane(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w,
                               int32_t bias, const int32_t *q, int32_t oh, int32_t ow,
                               const int32_t s, const int s31) {
  int32_t sumw = 0;
  __m256i w01[3], w2[3];
  for (int32_t ky = 0; ky < 3; ++ky) {
    const int8_t *k = w + 3 * ky;
    sumw += k[0] + k[1] + k[2];
    w01[ky] = _mm256_set1_epi32((int32_t)(((uint32_t)(uint16_t)k[1] << 16) | (uint16_t)k[0]));
    w2[ky] = _mm256_set1_epi32((int32_t)(uint16_t)k[2]);
  }
  const __m256i vb = _mm256_set1_epi32(bias - q[5] * sumw), m = _mm256_set1_epi32(q[0]);
  const rq8 rq = rq8_of(q[1]);
  const __m256i zp16 = _mm256_set1_epi16((int16_t)q[2]);
  const __m256i lo8 = _mm256_set1_epi8((int8_t)q[3]), hi8 = _mm256_set1_epi8((int8_t)q[4]);
  /* the 16 bytes' dwords after the pack: stride 1 (0-3 4-7 | 8-11 12-15) and stride 2
   * (0-3 8-11 | 4-7 12-15) */
  const __m256i order = s == 1 ? _mm256_setr_epi32(0, 1, 4, 5, 0, 0, 0, 0)
                               : _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
  const size_t total = (size_t)oh * (size_t)ow;
  for (int32_t oy = 0; oy < oh; ++oy) {
    const int8_t *r0 = x + (ptrdiff_t)oy * s * ld;
    int8_t *yr = y + (size_t)oy * (size_t)ow;
    for (int32_t ox = 0; ox < ow; ox += 16) {
      if (ox + 16 > ow && ow >= 16) ox = ow - 16;
      __m256i a0 = vb, a1 = vb;
      for (int32_t ky = 0; ky < 3; ++ky) {
        const int8_t *r = r0 + ky * ld + (ptrdiff_t)ox * s;
        if (s == 1) { /* a0: even outputs, a1: odd */
          a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(dw_pair(r), w01[ky]));
          a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(dw_pair(r + 1), w01[ky]));
          a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(dw_pair(r + 2), w2[ky]));
          a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(dw_pair(r + 3), w2[ky]));
        } else { /* a0: outputs 0-7, a1: 8-15 */
          a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(dw_pair(r), w01[ky]));
          a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(dw_pair(r + 16), w01[ky]));
          a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(dw_pair(r + 2), w2[ky]));
          a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(dw_pair(r + 18), w2[ky]));
        }
      }
      __m256i v0 = rq8_apply(&rq, a0, m, s31), v1 = rq8_apply(&rq, a1, m, s31);
      if (s == 1) { /* outputs 0-3 8-11 and 4-7 12-15 */
        const __m256i t = _mm256_unpacklo_epi32(v0, v1);
        v1 = _mm256_unpackhi_epi32(v0, v1);
        v0 = t;
      }
      const __m256i b =
          _mm256_permutevar8x32_epi32(rq8_pack(v0, v1, v0, v1, zp16, lo8, hi8), order);
      store_step(yr + ox, _mm256_castsi256_si128(b), ow - ox < 16 ? ow - ox : 16,
                 (size_t)oy * (size_t)ow + (size_t)ox + 16u <= total);
    }
  }
}

/* the plane kernel specialized by stride and by the shift-31 form */
ERT_AVX2 void ert_dw3_s8__avx2(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w,
                               int32_t bias, const int32_t *q, int32_t oh, int32_t ow, int32_t s) {
  if (s == 1) {
    if (q[1] == 31)
      dw3_plane(y, x, ld, w, bias, q, oh, ow, 1, 1);
    else
      dw3_plane(y, x, ld, w, bias, q, oh, ow, 1, 0);
  } else {
    if (q[1] == 31)
      dw3_plane(y, x, ld, w, bias, q, oh, ow, 2, 1);
    else
      dw3_plane(y, x, ld, w, bias, q, oh, ow, 2, 0);
  }
}

/* qgemm_rq_s8: tiles of two rows by 16 pixels (8 for a last tile of 8), per quad
 * four loads of widened taps against two broadcast rows of weights (each quad's 16
 * weights widened once per call to int16: a row's four are one 64-bit broadcast), so
 * every loaded vector feeds two or four madds; the sums requantized in registers and
 * stored as int8. Past RQ_CHUNK quads, the partial sums of up to 64 pixels wait in a
 * buffer between chunks. The folded sums come in the pixel order 0 1 4 5 2 3 6 7 (per
 * eight); the bytes are put back in order once per tile. */
enum { RQ_CHUNK = 64 }; /* quads per pass over the pixels: 16 KB of taps for 64 pixels */

ERT_AVX2_INLINE __m256i bcast_row(const int16_t *w) {
  int64_t v;
  memcpy(&v, w, sizeof v);
  return _mm256_set1_epi64x(v);
}

/* *acc += madd(x, w), the sum formed in *acc's register (GCC otherwise forms it in a
 * new one and copies it back every step) */
ERT_AVX2_INLINE void acc_madd(__m256i *acc, __m256i x, __m256i w) {
  const __m256i p = _mm256_madd_epi16(x, w);
  __asm__("vpaddd %1, %0, %0" : "+x"(*acc) : "x"(p));
}

/* rows A = r, B = r + 1 over the pixels of c (16 when wide, else 8): s[0], s[1] row A's
 * folded sums of pixels 0-7 and 8-15, s[2], s[3] row B's */
ERT_AVX2_INLINE void rq_tile(int32_t nq, const int8_t *c, size_t qstep, const int16_t *w16,
                             int32_t r, __m256i *s, const int wide) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  __m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const int16_t *w = w16 + 4 * r;
  for (int32_t q = 0; q < nq; ++q, c += qstep, w += 16) {
    const __m256i wa = bcast_row(w), wb = bcast_row(w + 4);
    const __m256i x0 = dw_pair(c), x1 = dw_pair(c + 16);
    acc_madd(&a0, x0, wa);
    acc_madd(&b0, x0, wb);
    acc_madd(&a1, x1, wa);
    acc_madd(&b1, x1, wb);
    if (wide) {
      const __m256i x2 = dw_pair(c + 32), x3 = dw_pair(c + 48);
      acc_madd(&a2, x2, wa);
      acc_madd(&b2, x2, wb);
      acc_madd(&a3, x3, wa);
      acc_madd(&b3, x3, wb);
    }
  }
  s[0] = _mm256_hadd_epi32(a0, a1);
  s[2] = _mm256_hadd_epi32(b0, b1);
  if (wide) {
    s[1] = _mm256_hadd_epi32(a2, a3);
    s[3] = _mm256_hadd_epi32(b2, b3);
  }
}

ERT_AVX2 int32_t ert_qgemm_rq_s8__avx2(int32_t kq, int32_t np, const int8_t *col,
                                       const int8_t *wq, const int32_t *bias,
                                       const int32_t *mult, const int32_t *q, int8_t *y,
                                       size_t ldy, int32_t n, int32_t rows) {
  const size_t qstep = (size_t)4 * (size_t)np;
  const int32_t nd = n < (np & ~7) ? n : (np & ~7);
  const rq8 rq = rq8_of(q[0]);
  const __m256i zp16 = _mm256_set1_epi16((int16_t)q[1]);
  const __m256i lo8 = _mm256_set1_epi8((int8_t)q[2]), hi8 = _mm256_set1_epi8((int8_t)q[3]);
  const __m256i rows_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i px_order = _mm256_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15,
                                            0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  int16_t w16[RQ_CHUNK * 16];
  __m256i part[4][8]; /* partial sums of 64 pixels between chunks: [row][pixels / 8] */
  for (int32_t g0 = 0; g0 < nd; g0 += 64) {
    const int32_t g1 = nd - g0 < 64 ? nd : g0 + 64;
    for (int32_t q0 = 0; q0 < kq; q0 += RQ_CHUNK) {
      const int32_t nq = kq - q0 < RQ_CHUNK ? kq - q0 : RQ_CHUNK;
      const int last = q0 + nq == kq;
      for (int32_t qq = 0; qq < nq; ++qq)
        _mm256_storeu_si256((__m256i *)(void *)(w16 + 16 * qq),
                            _mm256_cvtepi8_epi16(_mm_loadu_si128(
                                (const __m128i *)(const void *)(wq + 16 * (q0 + qq)))));
      for (int32_t r = 0; r < rows; r += 2) {
        const __m256i ma = _mm256_set1_epi32(mult[r]), mb = _mm256_set1_epi32(mult[r + 1]);
        const __m256i ba = _mm256_set1_epi32(bias[r]), bb = _mm256_set1_epi32(bias[r + 1]);
        for (int32_t i = g0; i < g1;) {
          const int wide = i + 16 <= np;
          const int32_t pw = wide ? 16 : 8, t = (i - g0) / 8;
          const int8_t *c = col + qstep * (size_t)q0 + (size_t)4 * (size_t)i;
          __m256i sm[4];
          if (wide)
            rq_tile(nq, c, qstep, w16, r, sm, 1);
          else
            rq_tile(nq, c, qstep, w16, r, sm, 0), sm[1] = sm[0], sm[3] = sm[2];
          sm[0] = _mm256_add_epi32(sm[0], q0 == 0 ? ba : part[r][t]);
          sm[2] = _mm256_add_epi32(sm[2], q0 == 0 ? bb : part[r + 1][t]);
          if (wide) {
            sm[1] = _mm256_add_epi32(sm[1], q0 == 0 ? ba : part[r][t + 1]);
            sm[3] = _mm256_add_epi32(sm[3], q0 == 0 ? bb : part[r + 1][t + 1]);
          }
          if (!last) {
            part[r][t] = sm[0], part[r + 1][t] = sm[2];
            if (wide) part[r][t + 1] = sm[1], part[r + 1][t + 1] = sm[3];
            i += pw;
            continue;
          }
          __m256i b = rq8_pack(rq8_apply(&rq, sm[0], ma, 0), rq8_apply(&rq, sm[1], ma, 0),
                               rq8_apply(&rq, sm[2], mb, 0), rq8_apply(&rq, sm[3], mb, 0), zp16,
                               lo8, hi8);
          b = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(b, rows_order), px_order);
          const __m128i ya = _mm256_castsi256_si128(b), yb = _mm256_extracti128_si256(b, 1);
          int8_t *yo = y + (size_t)r * ldy + (size_t)i;
          if (i + pw <= nd) {
            if (wide) {
              _mm_storeu_si128((__m128i *)(void *)yo, ya);
              if (r + 1 < rows) _mm_storeu_si128((__m128i *)(void *)(yo + ldy), yb);
            } else {
              _mm_storel_epi64((__m128i *)(void *)yo, ya);
              if (r + 1 < rows) _mm_storel_epi64((__m128i *)(void *)(yo + ldy), yb);
            }
          } else {
            int8_t tmp[32];
            _mm256_storeu_si256((__m256i *)(void *)tmp, b);
            memcpy(yo, tmp, (size_t)(nd - i));
            if (r + 1 < rows) memcpy(yo + ldy, tmp + 16, (size_t)(nd - i));
          }
          i += pw;
        }
      }
    }
  }
  return nd;
}

/* taps_s8: 16 windows at a time per quad: each of its four taps' 16 bytes (stride 2: the
 * even bytes of two overlapping 16-byte loads, which end at the last byte used), then
 * interleaved into the windows' quads as quads_s8 does. A last step shorter than 16 is
 * recomputed over the run's last 16 windows (n >= 17). */
ERT_AVX2_INLINE __m128i run16(const int8_t *p, int32_t s) {
  if (s == 1) return _mm_loadu_si128((const __m128i *)(const void *)p);
  const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i odd = _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i a = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), even);
  const __m128i b = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 15)), odd);
  return _mm_unpacklo_epi64(a, b);
}

ERT_AVX2 void ert_taps_s8__avx2(int8_t *dst, size_t np4, const int8_t *src, const ptrdiff_t *off,
                                int32_t k, int32_t n, int32_t s) {
  const int32_t kq = (k + 3) / 4;
  for (int32_t q = 0; q < kq; ++q) {
    const int8_t *p[4];
    for (int32_t j = 0; j < 4; ++j) p[j] = src + off[4 * q + j < k ? 4 * q + j : 0];
    int8_t *d = dst + np4 * (size_t)q;
    for (int32_t i = 0; i < n; i += 16) {
      if (i + 16 > n) i = n - 16;
      const ptrdiff_t o = (ptrdiff_t)i * s;
      const __m128i a = run16(p[0] + o, s), b = run16(p[1] + o, s);
      const __m128i c = run16(p[2] + o, s), e = run16(p[3] + o, s);
      const __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
      const __m128i ce0 = _mm_unpacklo_epi8(c, e), ce1 = _mm_unpackhi_epi8(c, e);
      int8_t *o4 = d + 4 * (size_t)i;
      _mm_storeu_si128((__m128i *)(void *)o4, _mm_unpacklo_epi16(ab0, ce0));
      _mm_storeu_si128((__m128i *)(void *)(o4 + 16), _mm_unpackhi_epi16(ab0, ce0));
      _mm_storeu_si128((__m128i *)(void *)(o4 + 32), _mm_unpacklo_epi16(ab1, ce1));
      _mm_storeu_si128((__m128i *)(void *)(o4 + 48), _mm_unpackhi_epi16(ab1, ce1));
    }
  }
}

/* quantize_s8: the reference's float steps (ref/quantize.c quantize_one) eight at a time:
 * IEEE division, the clamp to +-2^22 keeping NaN (min/max return their second operand for
 * NaN), the rounding by adding and subtracting 1.5 * 2^23, NaN to z, then the int8 clamp;
 * the integral result converts exactly. */
ERT_AVX2 void ert_quantize_s8__avx2(const float *x, int8_t *y, size_t n, float s, float z) {
  const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z);
  const __m256 big = _mm256_set1_ps(4194304.0f), nbig = _mm256_set1_ps(-4194304.0f);
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  const __m256 qmin = _mm256_set1_ps(-128.0f), qmax = _mm256_set1_ps(127.0f);
  const __m256i gather = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), vs);
    v = _mm256_max_ps(nbig, _mm256_min_ps(big, v));
    v = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
    v = _mm256_blendv_ps(vz, _mm256_add_ps(v, vz), _mm256_cmp_ps(v, v, _CMP_EQ_OQ));
    v = _mm256_min_ps(qmax, _mm256_max_ps(qmin, v));
    const __m256i r = _mm256_cvttps_epi32(v);
    const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(r, r), _mm256_packs_epi32(r, r));
    _mm_storel_epi64((__m128i *)(void *)(y + i),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(p8, gather)));
  }
  for (; i < n; ++i) {
    float v = x[i] / s;
    v = v > 4194304.0f ? 4194304.0f : (v < -4194304.0f ? -4194304.0f : v);
    v = (v + 12582912.0f) - 12582912.0f;
    v = v == v ? v + z : z;
    y[i] = (int8_t)(int32_t)(v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v));
  }
}

/* ---- AVX-512 VNNI (256-bit vectors) -------------------------------------------------- */

/* qgemm_rq_s8 by vpdpbusd (AVX512_VNNI + AVX512VL, 256-bit): each 32-bit lane adds four
 * products of unsigned by signed bytes to its accumulator, without saturation. The taps
 * go in as x + 128 (x xor 0x80, in [0, 255]), so the sums are sum w (x + 128); the bias
 * starts at bias - 128 sum w (the row's packed weights summed by the same instruction
 * against bytes of 1). Every step wraps modulo 2^32 and the true sum fits int32, so the
 * result is exact. Tiles of four rows by 16 pixels (8 for a last tile of 8): per quad two
 * loads of taps, four broadcasts of a row's four weights, eight vpdpbusd. */
#define ERT_VNNI __attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni")))
#define ERT_VNNI_INLINE \
  static inline __attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni"), always_inline))

ERT_VNNI_INLINE __m256i bcast_w4(const int8_t *w) {
  int32_t v;
  memcpy(&v, w, sizeof v);
  return _mm256_set1_epi32(v);
}

/* the requantized bytes of four rows' eight pixels (s[r]), stored as row r's bytes i..i+7
 * (n of them: 8, or fewer through a buffer) */
ERT_VNNI_INLINE void rq_store4(const rq8 *rq, const __m256i *s, const __m256i *m, __m256i zp16,
                               __m256i lo8, __m256i hi8, int8_t *yo, size_t ldy, int32_t rows,
                               int32_t n) {
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i b = _mm256_permutevar8x32_epi32(
      rq8_pack(rq8_apply(rq, s[0], m[0], 0), rq8_apply(rq, s[1], m[1], 0),
               rq8_apply(rq, s[2], m[2], 0), rq8_apply(rq, s[3], m[3], 0), zp16, lo8, hi8),
      order); /* qword r: row r's eight bytes */
  if (n == 8) {
    const __m128i r01 = _mm256_castsi256_si128(b), r23 = _mm256_extracti128_si256(b, 1);
    _mm_storel_epi64((__m128i *)(void *)yo, r01);
    if (rows > 1) _mm_storeh_pd((double *)(void *)(yo + ldy), _mm_castsi128_pd(r01));
    if (rows > 2) _mm_storel_epi64((__m128i *)(void *)(yo + 2 * ldy), r23);
    if (rows > 3) _mm_storeh_pd((double *)(void *)(yo + 3 * ldy), _mm_castsi128_pd(r23));
    return;
  }
  int8_t tmp[32];
  _mm256_storeu_si256((__m256i *)(void *)tmp, b);
  for (int32_t r = 0; r < rows; ++r) memcpy(yo + (size_t)r * ldy, tmp + 8 * r, (size_t)n);
}

ERT_VNNI int32_t ert_qgemm_rq_s8__vnni(int32_t kq, int32_t np, const int8_t *col,
                                       const int8_t *wq, const int32_t *bias,
                                       const int32_t *mult, const int32_t *q, int8_t *y,
                                       size_t ldy, int32_t n, int32_t rows) {
  const size_t qstep = (size_t)4 * (size_t)np;
  const int32_t nd = n < (np & ~7) ? n : (np & ~7);
  const rq8 rq = rq8_of(q[0]);
  const __m256i zp16 = _mm256_set1_epi16((int16_t)q[1]);
  const __m256i lo8 = _mm256_set1_epi8((int8_t)q[2]), hi8 = _mm256_set1_epi8((int8_t)q[3]);
  const __m256i flip = _mm256_set1_epi8((char)0x80);
  __m128i ws = _mm_setzero_si128(); /* lane r: the sum of row r's weights */
  for (int32_t qq = 0; qq < kq; ++qq)
    ws = _mm_dpbusd_epi32(ws, _mm_set1_epi8(1),
                          _mm_loadu_si128((const __m128i *)(const void *)(wq + 16 * qq)));
  int32_t wsum[4];
  _mm_storeu_si128((__m128i *)(void *)wsum, ws);
  __m256i b0[4], m[4];
  for (int32_t r = 0; r < 4; ++r) {
    b0[r] = _mm256_set1_epi32((int32_t)((uint32_t)bias[r] - ((uint32_t)wsum[r] << 7)));
    m[r] = _mm256_set1_epi32(mult[r]);
  }
  int32_t i = 0;
  for (; i + 16 <= np && i < nd; i += 16) {
    __m256i a0 = b0[0], a1 = b0[1], a2 = b0[2], a3 = b0[3];
    __m256i c0 = b0[0], c1 = b0[1], c2 = b0[2], c3 = b0[3];
    const int8_t *c = col + (size_t)4 * (size_t)i;
    const int8_t *w = wq;
    for (int32_t qq = 0; qq < kq; ++qq, c += qstep, w += 16) {
      const __m256i x0 =
          _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)c), flip);
      const __m256i x1 =
          _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(c + 32)), flip);
      const __m256i w0 = bcast_w4(w), w1 = bcast_w4(w + 4);
      const __m256i w2 = bcast_w4(w + 8), w3 = bcast_w4(w + 12);
      a0 = _mm256_dpbusd_epi32(a0, x0, w0);
      c0 = _mm256_dpbusd_epi32(c0, x1, w0);
      a1 = _mm256_dpbusd_epi32(a1, x0, w1);
      c1 = _mm256_dpbusd_epi32(c1, x1, w1);
      a2 = _mm256_dpbusd_epi32(a2, x0, w2);
      c2 = _mm256_dpbusd_epi32(c2, x1, w2);
      a3 = _mm256_dpbusd_epi32(a3, x0, w3);
      c3 = _mm256_dpbusd_epi32(c3, x1, w3);
    }
    const __m256i s0[4] = {a0, a1, a2, a3}, s1[4] = {c0, c1, c2, c3};
    rq_store4(&rq, s0, m, zp16, lo8, hi8, y + i, ldy, rows, nd - i < 8 ? nd - i : 8);
    if (i + 8 < nd)
      rq_store4(&rq, s1, m, zp16, lo8, hi8, y + i + 8, ldy, rows, nd - i - 8 < 8 ? nd - i - 8 : 8);
  }
  for (; i < nd; i += 8) { /* a last tile of eight */
    __m256i a0 = b0[0], a1 = b0[1], a2 = b0[2], a3 = b0[3];
    const int8_t *c = col + (size_t)4 * (size_t)i;
    const int8_t *w = wq;
    for (int32_t qq = 0; qq < kq; ++qq, c += qstep, w += 16) {
      const __m256i x0 =
          _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)c), flip);
      a0 = _mm256_dpbusd_epi32(a0, x0, bcast_w4(w));
      a1 = _mm256_dpbusd_epi32(a1, x0, bcast_w4(w + 4));
      a2 = _mm256_dpbusd_epi32(a2, x0, bcast_w4(w + 8));
      a3 = _mm256_dpbusd_epi32(a3, x0, bcast_w4(w + 12));
    }
    const __m256i s0[4] = {a0, a1, a2, a3};
    rq_store4(&rq, s0, m, zp16, lo8, hi8, y + i, ldy, rows, nd - i < 8 ? nd - i : 8);
  }
  return nd;
}

/* dw3_s8 by vpdpbusd: per window row, each output's three taps and a fourth byte (weight
 * 0) are one 32-bit lane, gathered by a byte shuffle within 128-bit halves (stride 1:
 * one 16-byte load in both halves, columns 0-6 and 4-10 from the step's start for
 * outputs 0-3 and 4-7; stride 2: columns 0-15 and 8-23 of one 32-byte load), offset by
 * 128 as in qgemm_rq_s8 (the bias corrected by -128 sum w); eight outputs per vpdpbusd,
 * 16 per step (the partial steps as dw3_s8). */
ERT_VNNI_INLINE __m256i dw_load2(const int8_t *p, ptrdiff_t d) {
  if (d == 4) /* stride 1: both halves from the same 16 bytes (the shuffle picks 4 on) */
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p));
  /* stride 2 (d = 8): bytes 0-15 and 8-23 of one 32-byte load */
  return _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)(const void *)p), 0x94);
}

ERT_VNNI_INLINE void dw3_plane_vnni(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w,
                                    int32_t bias, const int32_t *q, int32_t oh, int32_t ow,
                                    const int32_t s, const int s31) {
  int32_t sumw = 0;
  __m256i wr[3];
  for (int32_t ky = 0; ky < 3; ++ky) {
    const int8_t *k = w + 3 * ky;
    sumw += k[0] + k[1] + k[2];
    wr[ky] = _mm256_set1_epi32((int32_t)((uint32_t)(uint8_t)k[0] | (uint32_t)(uint8_t)k[1] << 8 |
                                         (uint32_t)(uint8_t)k[2] << 16));
  }
  /* bias - (x_zp + 128) sum w, modulo 2^32 */
  const uint32_t b0 = (uint32_t)bias - (uint32_t)(q[5] + 128) * (uint32_t)sumw;
  const __m256i vb = _mm256_set1_epi32((int32_t)b0);
  const __m256i m = _mm256_set1_epi32(q[0]), flip = _mm256_set1_epi8((char)0x80);
  const rq8 rq = rq8_of(q[1]);
  const __m256i zp16 = _mm256_set1_epi16((int16_t)q[2]);
  const __m256i lo8 = _mm256_set1_epi8((int8_t)q[3]), hi8 = _mm256_set1_epi8((int8_t)q[4]);
  const __m256i win = s == 1 ? _mm256_setr_epi8(0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6,
                                                4, 5, 6, 7, 5, 6, 7, 8, 6, 7, 8, 9, 7, 8, 9, 10)
                             : _mm256_setr_epi8(0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9,
                                                0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9);
  const ptrdiff_t half = 4 * s; /* columns between outputs 0 and 4 */
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
  const size_t total = (size_t)oh * (size_t)ow;
  const int narrow = ow <= 8; /* rows of 8 outputs or fewer: one vector of outputs per step */
  for (int32_t oy = 0; oy < oh; ++oy) {
    const int8_t *r0 = x + (ptrdiff_t)oy * s * ld;
    int8_t *yr = y + (size_t)oy * (size_t)ow;
    for (int32_t ox = 0; ox < ow; ox += 16) {
      if (ox + 16 > ow && ow >= 16) ox = ow - 16;
      __m256i a0 = vb, a1 = vb; /* outputs 0-7, 8-15 */
      for (int32_t ky = 0; ky < 3; ++ky) {
        const int8_t *r = r0 + ky * ld + (ptrdiff_t)ox * s;
        const __m256i x0 = _mm256_xor_si256(_mm256_shuffle_epi8(dw_load2(r, half), win), flip);
        a0 = _mm256_dpbusd_epi32(a0, x0, wr[ky]);
        if (!narrow) {
          const __m256i x1 =
              _mm256_xor_si256(_mm256_shuffle_epi8(dw_load2(r + 8 * s, half), win), flip);
          a1 = _mm256_dpbusd_epi32(a1, x1, wr[ky]);
        }
      }
      const __m256i v0 = rq8_apply(&rq, a0, m, s31);
      const __m256i v1 = narrow ? v0 : rq8_apply(&rq, a1, m, s31);
      const __m256i b =
          _mm256_permutevar8x32_epi32(rq8_pack(v0, v1, v0, v1, zp16, lo8, hi8), order);
      store_step(yr + ox, _mm256_castsi256_si128(b), ow - ox < 16 ? ow - ox : 16,
                 (size_t)oy * (size_t)ow + (size_t)ox + 16u <= total);
    }
  }
}

ERT_VNNI void ert_dw3_s8__vnni(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w,
                               int32_t bias, const int32_t *q, int32_t oh, int32_t ow, int32_t s) {
  if (s == 1) {
    if (q[1] == 31)
      dw3_plane_vnni(y, x, ld, w, bias, q, oh, ow, 1, 1);
    else
      dw3_plane_vnni(y, x, ld, w, bias, q, oh, ow, 1, 0);
  } else {
    if (q[1] == 31)
      dw3_plane_vnni(y, x, ld, w, bias, q, oh, ow, 2, 1);
    else
      dw3_plane_vnni(y, x, ld, w, bias, q, oh, ow, 2, 0);
  }
}

#endif
