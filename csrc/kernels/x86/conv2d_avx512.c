/* conv2d_avx512.c (AVX-512F): dw3 for narrow images (w <= 16), contract in src/cpu.h;
 * wider ones go to the AVX2 kernel (conv2d.c). Also dw3_nhwc, the same layer in NHWC.
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

/* Output pixels ox0 .. ox0+NP-1 of row oy, channels c0 .. c0+15 (cm): dw3_narrow's
 * operations per output; a tap outside the image reads zeros (a masked load of nothing,
 * at a clamped address). */
ERT_AVX512_INLINE void dwn_pixels(const int NP, float *y, const float *x, const __m512 *wv,
                                  __m512 vb, __m512 lo, __m512 hi, const ert_dw3_geom *g,
                                  int32_t c, int32_t c0, __mmask16 cm, int32_t oy, int32_t ox0) {
  const int32_t h = g->h, w = g->w;
  const int32_t iy0 = oy * g->sh - g->pt;
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) {
    const int32_t ix0 = (ox0 + q) * g->sw - 1;
    __m512 part[3];
#pragma GCC unroll 3
    for (int ky = 0; ky < 3; ++ky) {
      const int32_t iy = iy0 + ky;
      const int rin = iy >= 0 && iy < h;
      const float *row = x + (ptrdiff_t)(rin ? iy : 0) * w * c + c0;
      __m512 a = ky == 0 ? vb : _mm512_setzero_ps();
#pragma GCC unroll 3
      for (int kx = 0; kx < 3; ++kx) {
        const int32_t ix = ix0 + kx;
        const int in = rin && ix >= 0 && ix < w;
        const __m512 v = _mm512_maskz_loadu_ps(in ? cm : 0, row + (ptrdiff_t)(in ? ix : 0) * c);
        a = _mm512_fmadd_ps(wv[3 * ky + kx], v, a);
      }
      part[ky] = a;
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(part[0], part[1]), part[2]);
    _mm512_mask_storeu_ps(y + ((ptrdiff_t)oy * g->ow + ox0 + q) * c + c0, cm,
                          _mm512_min_ps(hi, _mm512_max_ps(lo, s)));
  }
}

/* dwn_pixels for windows wholly inside the image: the taps at fixed offsets from each
 * pixel's window, no masks but the channels' (the same operations). */
ERT_AVX512_INLINE void dwn_inside(const int NP, float *y, const float *x, const __m512 *wv,
                                  __m512 vb, __m512 lo, __m512 hi, const ert_dw3_geom *g,
                                  int32_t c, int32_t c0, __mmask16 cm, int32_t oy, int32_t ox0) {
  const ptrdiff_t rs = (ptrdiff_t)g->w * c, ps = (ptrdiff_t)g->sw * c;
  const float *b = x + ((ptrdiff_t)(oy * g->sh - g->pt) * g->w + (ox0 * g->sw - 1)) * c + c0;
  float *yo = y + ((ptrdiff_t)oy * g->ow + ox0) * c + c0;
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) {
    const float *bq = b + q * ps;
    __m512 part[3];
#pragma GCC unroll 3
    for (int ky = 0; ky < 3; ++ky) {
      __m512 a = ky == 0 ? vb : _mm512_setzero_ps();
#pragma GCC unroll 3
      for (int kx = 0; kx < 3; ++kx)
        a = _mm512_fmadd_ps(wv[3 * ky + kx], _mm512_maskz_loadu_ps(cm, bq + ky * rs + kx * c), a);
      part[ky] = a;
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(part[0], part[1]), part[2]);
    _mm512_mask_storeu_ps(yo + q * c, cm, _mm512_min_ps(hi, _mm512_max_ps(lo, s)));
  }
}

/* dw3_nhwc (cpu.h): along each output row in steps of 4 pixels, all channels 16 at a
 * time for each step (the input read as contiguous runs of channels, the nine tap
 * vectors of a channel block loaded once per step). */
ERT_AVX512 void ert_conv2d_dw3_nhwc_f32__avx512(float *y, const float *x, const float *kt,
                                                const float *bias, const ert_dw3_geom *g,
                                                int32_t c, int32_t p0, int32_t p1) {
  const int32_t ow = g->ow;
  const __m512 lo = _mm512_set1_ps(g->lo), hi = _mm512_set1_ps(g->hi);
  for (int32_t p = p0; p < p1;) {
    const int32_t oy = p / ow, ox0 = p - oy * ow;
    const int32_t np = p1 - p < 4 ? p1 - p : 4, n = ow - ox0 < np ? ow - ox0 : np;
    const int32_t iy0 = oy * g->sh - g->pt, ix0 = ox0 * g->sw - 1;
    const int inside = n == 4 && iy0 >= 0 && iy0 + 2 < g->h && ix0 >= 0 &&
                       ix0 + 3 * g->sw + 2 < g->w;
    for (int32_t c0 = 0; c0 < c; c0 += 16) {
      const __mmask16 cm = c - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (c - c0)) - 1u);
      __m512 wv[9];
      for (int t = 0; t < 9; ++t) wv[t] = _mm512_maskz_loadu_ps(cm, kt + (ptrdiff_t)t * c + c0);
      const __m512 vb = bias != NULL ? _mm512_maskz_loadu_ps(cm, bias + c0) : _mm512_setzero_ps();
      if (inside)
        dwn_inside(4, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0);
      else if (n == 4)
        dwn_pixels(4, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0);
      else
        for (int32_t q = 0; q < n; ++q) dwn_pixels(1, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0 + q);
    }
    p += n;
  }
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
