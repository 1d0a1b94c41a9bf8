/* conv2d_avx512.c (AVX-512F): dw3 for narrow images (w <= 16), contract in src/cpu.h;
 * wider ones go to the AVX2 kernel (conv2d.c).
 *
 * An image row of w <= 16 columns is one zmm (masked load: nothing read past the row);
 * the three taps of a window row are lane moves of it (vpermps by the column each output
 * reads, lanes outside [0, w) zeroed by the mask), so each output row of up to 16 outputs
 * costs three row loads, at most nine lane moves, nine multiply-adds and one masked store,
 * where the 8-lane kernel needs masked loads at both edges of every row. Called only where
 * src/cpu.c found AVX512F and the OS saving the zmm and opmask state. */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "cpu.h"

#define ERT_AVX512 __attribute__((target("avx2,fma,avx512f")))
#define ERT_AVX512_INLINE static inline __attribute__((target("avx2,fma,avx512f"), always_inline))

/* One plane at stride S (1 or 2, constant after inlining). */
ERT_AVX512_INLINE void dw3_narrow(float *y, const float *x, const float *k, float bias,
                                  const ert_dw3_geom *g, const int S) {
  const int32_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  __m512 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(k[t]);
  const __m512 vb = _mm512_set1_ps(bias), lo = _mm512_set1_ps(g->lo), hi = _mm512_set1_ps(g->hi);
  const __mmask16 wm = (__mmask16)((1u << w) - 1u), om = (__mmask16)((1u << ow) - 1u);
  /* tap kx of output lane l reads column l*S - 1 + kx: its index and the lanes where that
     column is inside the image */
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i idx[3];
  __mmask16 in[3];
  for (int kx = 0; kx < 3; ++kx) {
    idx[kx] = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(S)),
                               _mm512_set1_epi32(kx - 1));
    in[kx] = _mm512_cmpge_epi32_mask(idx[kx], _mm512_setzero_si512()) &
             _mm512_cmplt_epi32_mask(idx[kx], _mm512_set1_epi32(w));
  }
  for (int32_t oy = 0; oy < oh; ++oy, y += ow) {
    __m512 part[3];
#pragma GCC unroll 3
    for (int ky = 0; ky < 3; ++ky) {
      const int32_t iy = oy * g->sh - g->pt + ky;
      /* rows outside the image are zeros, multiplied as the reference does */
      const __m512 r = iy >= 0 && iy < h ? _mm512_maskz_loadu_ps(wm, x + (ptrdiff_t)iy * w)
                                         : _mm512_setzero_ps();
      __m512 a = _mm512_fmadd_ps(wv[3 * ky], _mm512_maskz_permutexvar_ps(in[0], idx[0], r),
                                 ky == 0 ? vb : _mm512_setzero_ps());
      a = _mm512_fmadd_ps(wv[3 * ky + 1], S == 1 ? r : _mm512_maskz_permutexvar_ps(in[1], idx[1], r),
                          a);
      part[ky] = _mm512_fmadd_ps(wv[3 * ky + 2], _mm512_maskz_permutexvar_ps(in[2], idx[2], r), a);
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(part[0], part[1]), part[2]);
    _mm512_mask_storeu_ps(y, om, _mm512_min_ps(hi, _mm512_max_ps(lo, s))); /* NaN stays */
  }
}

ERT_AVX512 static void dw3_narrow_s1(float *y, const float *x, const float *k, float bias,
                                     const ert_dw3_geom *g) {
  dw3_narrow(y, x, k, bias, g, 1);
}

ERT_AVX512 static void dw3_narrow_s2(float *y, const float *x, const float *k, float bias,
                                     const ert_dw3_geom *g) {
  dw3_narrow(y, x, k, bias, g, 2);
}

ERT_AVX512 void ert_conv2d_dw3_f32__avx512(float *y, const float *x, const float *zero,
                                           const float *k, float bias, const ert_dw3_geom *g) {
  if (g->w > 16) {
    ert_conv2d_dw3_f32__avx2(y, x, zero, k, bias, g);
  } else if (g->sw == 1) {
    dw3_narrow_s1(y, x, k, bias, g);
  } else {
    dw3_narrow_s2(y, x, k, bias, g);
  }
}

#endif
