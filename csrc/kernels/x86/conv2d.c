/* conv2d.c (AVX2): depthwise 3x3 and 5x5 planes, over a padded input (dwK_sS) and over
 * the image itself (dw_direct), contracts in src/cpu.h (the portable path is dw_run and
 * dw_plane_direct in ref/conv2d.c). */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include "x86_avx2.h"

/* Eight outputs i..i+7 of one row: y = bias + sum over taps of w[ky*K + kx] *
 * x[ky*ts + u*S + kx] (x at the first output's window). A partial sum per window row
 * keeps K independent FMA chains.
 *
 * Loads: `masked` keeps the reads inside [0, lim) floats from x in every window row (a
 * row's last output reads lim - 1), for rows narrower than 8 outputs; otherwise they
 * read 8 floats from each offset, which the caller keeps inside the row.
 *
 * Stride 2: for tap kx the eight values x[kx + 2u] come from the 16 floats at kx (even
 * lanes) or at kx - 1 (odd lanes); the last tap uses kx - 1, so nothing past the last
 * tap's float is read. The even/odd selection (shuffle_ps within 128-bit halves) leaves
 * the outputs in the order 0 1 4 5 2 3 6 7; one 64-bit permute restores it at the end. */
ERT_AVX2_INLINE __m256 load8(const float *p, int masked, int32_t lim) {
  if (!masked) return _mm256_loadu_ps(p);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(lim), lane));
}

ERT_AVX2_INLINE __m256 tap_s2(const float *row, int kx, int K, int masked, int32_t lim) {
  const int odd = (kx & 1) || kx == K - 1;
  const int o = odd ? kx - 1 : kx;
  const __m256 lo = load8(row + o, masked, lim - o), hi = load8(row + o + 8, masked, lim - o - 8);
  return odd ? _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))
             : _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
}

/* The window rows' partial sums added in row order; at stride 2 the outputs put back in
 * order (the even/odd lane selection leaves them as 0 2 1 3 in 64-bit pairs). */
ERT_AVX2_INLINE __m256 sum_rows(const __m256 *part, int K, int S) {
  __m256 s = part[0];
#pragma GCC unroll 5
  for (int ky = 1; ky < K; ++ky) s = _mm256_add_ps(s, part[ky]);
  if (S == 2) s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
  return s;
}

ERT_AVX2_INLINE __m256 dw_vec(const float *x, ptrdiff_t ts, const __m256 *wv, __m256 vb, int K,
                              int S, int masked, int32_t lim) {
  __m256 part[5];
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    const float *row = x + ky * ts;
    __m256 a = ky == 0 ? vb : _mm256_setzero_ps();
#pragma GCC unroll 5
    for (int kx = 0; kx < K; ++kx) {
      const __m256 v = S == 1 ? load8(row + kx, masked, lim - kx) : tap_s2(row, kx, K, masked, lim);
      a = _mm256_fmadd_ps(wv[ky * K + kx], v, a);
    }
    part[ky] = a;
  }
  return sum_rows(part, K, S);
}

/* A plane: per row, steps of 8 outputs while they fit; the outputs left over are
 * recomputed with the ones before them when the row has 8 or more (each output sees the
 * same operations, so the values are the same), else computed with masked loads and
 * stores. */
ERT_AVX2_INLINE void dw_plane(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                              ptrdiff_t ts, const float *w, float bias, int K, int S) {
  __m256 wv[25];
  for (int t = 0; t < K * K; ++t) wv[t] = _mm256_set1_ps(w[t]);
  const __m256 vb = _mm256_set1_ps(bias);
  for (int32_t oy = 0; oy < oh; ++oy, y += ow, x += rs) {
    if (ow < 8) {
      const int32_t lim = (ow - 1) * S + K; /* floats of a window row the row reads */
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(ow), lane),
                          dw_vec(x, ts, wv, vb, K, S, 1, lim));
      continue;
    }
    int32_t i = 0;
    for (; i + 8 <= ow; i += 8) _mm256_storeu_ps(y + i, dw_vec(x + (ptrdiff_t)i * S, ts, wv, vb, K, S, 0, 0));
    if (i < ow) {
      i = ow - 8;
      _mm256_storeu_ps(y + i, dw_vec(x + (ptrdiff_t)i * S, ts, wv, vb, K, S, 0, 0));
    }
  }
}

/* ---- direct planes: the unpadded input, padding by masked loads ----------------------- */

/* Lanes l with 0 <= c + l < w: the columns of the image among c, c + 1, ..., c + 7. */
ERT_AVX2_INLINE __m256i cols_in(int32_t c, int32_t w) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(-c - 1));
  return _mm256_and_si256(lo, _mm256_cmpgt_epi32(_mm256_set1_epi32(w - c), lane));
}

/* 8 floats of an image row from column c0 + o; with masks (mk[o] = cols_in(c0 + o, w)),
 * 0 for the columns outside the image, whose addresses are formed but not read. */
ERT_AVX2_INLINE __m256 row8(const float *row, int32_t c0, int o, const __m256i *mk) {
  if (mk == NULL) return _mm256_loadu_ps(row + c0 + o);
  return _mm256_maskload_ps(
      (const float *)((uintptr_t)row + (intptr_t)(c0 + o) * (intptr_t)sizeof(float)), mk[o]);
}

/* Outputs of one step (8 columns from column c0 of the window rows iy0..iy0+K-1): window
 * rows outside the image are skipped (zero padding) unless `inside` says none is, columns
 * outside read as 0 through the masks. Stride 2 selects even/odd lanes as tap_s2 does. */
ERT_AVX2_INLINE __m256 direct_vec(const float *x, int32_t h, int32_t w, int32_t iy0, int32_t c0,
                                  const __m256 *wv, __m256 vb, int K, int S, const __m256i *mk,
                                  int inside) {
  __m256 part[5];
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    __m256 a = ky == 0 ? vb : _mm256_setzero_ps();
    const int32_t iy = iy0 + ky;
    if (inside || (iy >= 0 && iy < h)) {
      const float *row = x + (ptrdiff_t)iy * w;
#pragma GCC unroll 5
      for (int kx = 0; kx < K; ++kx) {
        __m256 v;
        if (S == 1) {
          v = row8(row, c0, kx, mk);
        } else {
          const int odd = (kx & 1) || kx == K - 1;
          const int o = odd ? kx - 1 : kx;
          const __m256 lo = row8(row, c0, o, mk), hi = row8(row, c0, o + 8, mk);
          v = odd ? _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))
                  : _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        }
        a = _mm256_fmadd_ps(wv[ky * K + kx], v, a);
      }
    }
    part[ky] = a;
  }
  return sum_rows(part, K, S);
}

enum { DIRECT_EDGE = 4 }; /* masked steps whose masks are kept per plane */

/* One plane. The steps of a row (8 outputs each; a last partial step moves back to end
 * at the row's end when the row has 8 or more outputs, recomputing some with the same
 * operations, else it is stored masked) are the same for every row: the ones whose
 * columns leave the image (the first, the last one or two) get their load masks once per
 * plane, the others load plainly. Rows whose window is inside the image skip the row
 * checks. */
ERT_AVX2_INLINE void direct_plane(float *y, const float *x, int32_t h, int32_t w, int32_t oh,
                                  int32_t ow, int32_t pt, int32_t pl, const float *wt, float bias,
                                  int K, int S) {
  __m256 wv[25];
  for (int t = 0; t < K * K; ++t) wv[t] = _mm256_set1_ps(wt[t]);
  const __m256 vb = _mm256_set1_ps(bias);
  const int32_t span = S == 1 ? K - 1 + 7 : K + 13; /* last column a step reads, from c0 */
  const int nmask = S == 1 ? K : K + 8;              /* load offsets of a step */
  const int32_t nsteps = ow < 8 ? 1 : (ow + 7) / 8;
  /* step t covers outputs [i, i + 8), i = min(8t, ow - 8) (0 for rows under 8) */
#define STEP_I(t) (ow < 8 ? 0 : ((t) * 8 + 8 > ow ? ow - 8 : (t) * 8))
  int32_t kept_t[DIRECT_EDGE];
  __m256i kept[DIRECT_EDGE][13];
  int nkept = 0;
  for (int32_t t = 0; t < nsteps && nkept < DIRECT_EDGE; ++t) {
    const int32_t c0 = STEP_I(t) * S - pl;
    if (ow < 8 || c0 < 0 || c0 + span >= w) {
      kept_t[nkept] = t;
      for (int o = 0; o < nmask; ++o) kept[nkept][o] = cols_in(c0 + o, w);
      ++nkept;
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ymask = _mm256_cmpgt_epi32(_mm256_set1_epi32(ow), lane);
  for (int32_t oy = 0; oy < oh; ++oy, y += ow) {
    const int32_t iy0 = oy * S - pt;
    const int inside = iy0 >= 0 && iy0 + K <= h;
    int next = 0; /* the next kept step */
    for (int32_t t = 0; t < nsteps; ++t) {
      const int32_t i = STEP_I(t), c0 = i * S - pl;
      __m256 v;
      if (ow < 8 || c0 < 0 || c0 + span >= w) {
        __m256i own[13];
        const __m256i *k = own;
        if (next < nkept && kept_t[next] == t) {
          k = kept[next++];
        } else { /* more masked steps than kept ones (images narrower than the window) */
          for (int o = 0; o < nmask; ++o) own[o] = cols_in(c0 + o, w);
        }
        v = inside ? direct_vec(x, h, w, iy0, c0, wv, vb, K, S, k, 1)
                   : direct_vec(x, h, w, iy0, c0, wv, vb, K, S, k, 0);
      } else {
        v = inside ? direct_vec(x, h, w, iy0, c0, wv, vb, K, S, NULL, 1)
                   : direct_vec(x, h, w, iy0, c0, wv, vb, K, S, NULL, 0);
      }
      if (ow < 8)
        _mm256_maskstore_ps(y, ymask, v);
      else
        _mm256_storeu_ps(y + i, v);
    }
  }
#undef STEP_I
}

#define DIRECT(K, S)                                                                          \
  ERT_AVX2 static void direct_##K##_##S(float *y, const float *x, int32_t h, int32_t w,      \
                                        int32_t oh, int32_t ow, int32_t pt, int32_t pl,      \
                                        const float *wt, float bias) {                       \
    direct_plane(y, x, h, w, oh, ow, pt, pl, wt, bias, K, S);                                \
  }
DIRECT(3, 2)
DIRECT(5, 2)

ERT_AVX2 int ert_conv2d_dw_direct_f32__avx2(float *y, const float *x, int32_t h, int32_t w,
                                            int32_t oh, int32_t ow, int32_t k, int32_t s,
                                            int32_t pt, int32_t pl, const float *wt, float bias) {
  /* Stride 2 only: there the padded copy of the portable path costs more than the masked
   * edge steps; with stride 1 the padded-plane kernels above (dwK_s1) ran fewer
   * instructions for MobileNetV2's planes (callgrind: 6.8 M per inference against
   * 20.7 M), so the direct ones decline it. */
  if (pt < 0 || pl < 0 || pt >= k || pl >= k || s != 2) return 0;
  if (k == 3)
    direct_3_2(y, x, h, w, oh, ow, pt, pl, wt, bias);
  else if (k == 5)
    direct_5_2(y, x, h, w, oh, ow, pt, pl, wt, bias);
  else
    return 0;
  return 1;
}

#define DW_PLANE(NAME, K, S)                                                                  \
  ERT_AVX2 void NAME(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,         \
                     ptrdiff_t ts, const float *w, float bias) {                             \
    dw_plane(y, oh, ow, x, rs, ts, w, bias, K, S);                                           \
  }

DW_PLANE(ert_conv2d_dw3s1_f32__avx2, 3, 1)
DW_PLANE(ert_conv2d_dw3s2_f32__avx2, 3, 2)
DW_PLANE(ert_conv2d_dw5s1_f32__avx2, 5, 1)
DW_PLANE(ert_conv2d_dw5s2_f32__avx2, 5, 2)

#endif
