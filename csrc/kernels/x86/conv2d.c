/* conv2d.c (AVX2): depthwise 3x3 and 5x5 planes over a padded input, contract in
 * src/cpu.h (dwK_sS; the portable path is dw_run in ref/conv2d.c). */
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
  __m256 s = part[0];
#pragma GCC unroll 5
  for (int ky = 1; ky < K; ++ky) s = _mm256_add_ps(s, part[ky]);
  if (S == 2) s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
  return s;
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
