/* quant_s8.c (AVX2): the int8 convolution's packing and product kernels, contracts in
 * src/cpu.h (pack_w_s8, quads_s8, qgemm_s8; the portable path is block in
 * ref/conv2d_s8.c). Integer results: equal to the reference's exactly. */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include "x86_avx2.h"

/* Four quads of the four rows at a time: a 4x4 transpose of 32-bit groups. */
ERT_AVX2 void ert_pack_w_s8__avx2(int8_t *wq, int32_t *wsum, const int8_t *w, size_t ld,
                                  int32_t rows, int32_t k) {
  static const int8_t zeros[16] = {0};
  const int8_t *r[4];
  for (int32_t i = 0; i < 4; ++i) r[i] = i < rows ? w + (size_t)i * ld : zeros;
  const int32_t kq = (k + 3) / 4;
  int32_t q = 0;
  for (; 4 * q + 16 <= k; q += 4) {
    const int32_t t = 4 * q;
    const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(rows > 0 ? r[0] + t : zeros));
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(rows > 1 ? r[1] + t : zeros));
    const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(rows > 2 ? r[2] + t : zeros));
    const __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(rows > 3 ? r[3] + t : zeros));
    const __m128i ab0 = _mm_unpacklo_epi32(a, b), ab1 = _mm_unpackhi_epi32(a, b);
    const __m128i cd0 = _mm_unpacklo_epi32(c, d), cd1 = _mm_unpackhi_epi32(c, d);
    __m128i *o = (__m128i *)(void *)(wq + 16 * q);
    _mm_storeu_si128(o, _mm_unpacklo_epi64(ab0, cd0));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi64(ab0, cd0));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi64(ab1, cd1));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi64(ab1, cd1));
  }
  for (; q < kq; ++q)
    for (int32_t i = 0; i < 4; ++i)
      for (int32_t j = 0; j < 4; ++j) {
        const int32_t t = 4 * q + j;
        wq[16 * q + 4 * i + j] = i < rows && t < k ? r[i][t] : 0;
      }
  for (int32_t i = 0; i < 4; ++i) {
    int32_t s = 0;
    if (i < rows)
      for (int32_t t = 0; t < k; ++t) s += r[i][t];
    wsum[i] = s;
  }
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

#endif
