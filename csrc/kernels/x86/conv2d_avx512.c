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

/* Output pixels ox0 .. ox0+NP-1 of row oy (NP <= 4), channels c0 .. c0+15 (cm), stride
 * S across (NP, S constant after inlining): each window row's (NP - 1)*S + 3 input vectors
 * are loaded once for the NP pixels, a column or row outside the image as zeros (a
 * masked load of nothing, at a clamped address); every output sees dw3_narrow's
 * operations in its order. */
ERT_AVX512_INLINE void dwn_tile(const int NP, const int S, float *y, const float *x,
                                const __m512 *wv, __m512 vb, __m512 lo, __m512 hi,
                                const ert_dw3_geom *g, int32_t c, int32_t c0, __mmask16 cm,
                                int32_t oy, int32_t ox0) {
  enum { NCOL_MAX = 9 };
  const int ncol = (NP - 1) * S + 3;
  const int32_t h = g->h, w = g->w, iy0 = oy * g->sh - g->pt, ix0 = ox0 * S - 1;
  float *yo = y + ((ptrdiff_t)oy * g->ow + ox0) * c + c0;
  __m512 part[3][4];
#pragma GCC unroll 3
  for (int ky = 0; ky < 3; ++ky) {
    const int32_t iy = iy0 + ky;
    const int rin = iy >= 0 && iy < h;
    const float *row = x + (ptrdiff_t)(rin ? iy : 0) * w * c + c0;
    __m512 v[NCOL_MAX];
#pragma GCC unroll 9
    for (int t = 0; t < ncol; ++t) {
      const int32_t ix = ix0 + t;
      const int in = rin && ix >= 0 && ix < w;
      v[t] = _mm512_maskz_loadu_ps(in ? cm : 0, row + (ptrdiff_t)(in ? ix : 0) * c);
    }
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) {
      __m512 a = ky == 0 ? vb : _mm512_setzero_ps();
#pragma GCC unroll 3
      for (int kx = 0; kx < 3; ++kx) a = _mm512_fmadd_ps(wv[3 * ky + kx], v[q * S + kx], a);
      part[ky][q] = a;
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) {
    const __m512 s = _mm512_add_ps(_mm512_add_ps(part[0][q], part[1][q]), part[2][q]);
    _mm512_mask_storeu_ps(yo + q * c, cm, _mm512_min_ps(hi, _mm512_max_ps(lo, s)));
  }
}

/* dwn_tile for stride S, n pixels (1 to 4) */
ERT_AVX512_INLINE void dwn_tiles(const int S, int32_t n, float *y, const float *x,
                                 const __m512 *wv, __m512 vb, __m512 lo, __m512 hi,
                                 const ert_dw3_geom *g, int32_t c, int32_t c0, __mmask16 cm,
                                 int32_t oy, int32_t ox0) {
  switch (n) {
    case 4: dwn_tile(4, S, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0); break;
    case 3: dwn_tile(3, S, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0); break;
    case 2: dwn_tile(2, S, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0); break;
    default: dwn_tile(1, S, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0); break;
  }
}

/* dw3_nhwc (cpu.h): along each output row in steps of up to 4 pixels (never past p1),
 * all channels 16 at a time for each step (the input read as runs of channels, the nine
 * tap vectors of a channel block loaded once per step). */
ERT_AVX512 void ert_conv2d_dw3_nhwc_f32__avx512(float *y, const float *x, const float *kt,
                                                const float *bias, const ert_dw3_geom *g,
                                                int32_t c, int32_t p0, int32_t p1) {
  const int32_t ow = g->ow;
  const __m512 lo = _mm512_set1_ps(g->lo), hi = _mm512_set1_ps(g->hi);
  for (int32_t p = p0; p < p1;) {
    const int32_t oy = p / ow, ox0 = p - oy * ow;
    int32_t n = p1 - p < 4 ? p1 - p : 4;
    if (ow - ox0 < n) n = ow - ox0;
    for (int32_t c0 = 0; c0 < c; c0 += 16) {
      const __mmask16 cm = c - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (c - c0)) - 1u);
      __m512 wv[9];
      for (int t = 0; t < 9; ++t) wv[t] = _mm512_maskz_loadu_ps(cm, kt + (ptrdiff_t)t * c + c0);
      const __m512 vb = bias != NULL ? _mm512_maskz_loadu_ps(cm, bias + c0) : _mm512_setzero_ps();
      if (g->sw == 2)
        dwn_tiles(2, n, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0);
      else
        dwn_tiles(1, n, y, x, wv, vb, lo, hi, g, c, c0, cm, oy, ox0);
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


/* ---- conv3s1, conv3s2: 3x3 convolutions read in place -------------------------------- */

/* Output channels o0 <= o < o0 + R, columns ox0 <= ox < ox0 + 16 V of output row oy at
 * stride S (the last vector's stored lanes: sm): per input plane i and window row ky
 * inside the image, each tap's 16 V columns come straight from the row (S = 2: the even
 * lanes of two loads), loads masked by mk where they leave the row (FULL: none do), and
 * each weight is broadcast once for all V vectors: with R = 12 and V = 2, 14 loads per 24
 * multiply-adds at stride 1 (the SGEMM block tile's rate), and no im2col copy. */
ERT_AVX512_INLINE void c3_tile(const int R, const int V, const int FULL, const int S, float *y,
                               const float *x, const float *wt, const float *bias,
                               const ert_conv3s2_geom *g, int32_t o0, int32_t oy, int32_t ox0,
                               const __mmask16 (*mk)[4], __mmask16 sm) {
  const int32_t c = g->c, h = g->h, w = g->w;
  const ptrdiff_t plane = (ptrdiff_t)h * w, taps = 9 * (ptrdiff_t)c;
  const int32_t top = oy * S - g->pt; /* input row of ky = 0 */
  const int32_t ky0 = top < 0 ? -top : 0, ky1 = h - top < 3 ? h - top : 3;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  __m512 acc[12][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  /* weights of rows 4q + u at base q plus u*taps (as the SGEMM tile's A) */
  const float *w0 = wt + (ptrdiff_t)o0 * taps, *q0 = w0, *q1 = R > 4 ? w0 + 4 * taps : w0,
              *q2 = R > 8 ? w0 + 8 * taps : w0;
  const ptrdiff_t l1 = taps, l2 = 2 * taps, l3 = 3 * taps;
  /* column ox0 S - pl of input row `top` of plane 0, formed as an integer: it may lie
     outside x (the loads there are masked) */
  const uintptr_t base =
      (uintptr_t)x + (uintptr_t)((ptrdiff_t)top * w + (ptrdiff_t)ox0 * S - g->pl) * sizeof(float);
  for (int32_t i = 0; i < c; ++i)
    for (int32_t ky = ky0; ky < ky1; ++ky) {
      const uintptr_t row = base + (uintptr_t)((ptrdiff_t)i * plane + (ptrdiff_t)ky * w) * sizeof(float);
      const ptrdiff_t t0 = (ptrdiff_t)i * 9 + ky * 3;
#pragma GCC unroll 3
      for (int kx = 0; kx < 3; ++kx) {
        const float *p = (const float *)(row + (uintptr_t)kx * sizeof(float));
        __m512 b[2];
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) {
          if (S == 1) {
            b[v] = FULL ? _mm512_loadu_ps(p + 16 * v) : _mm512_maskz_loadu_ps(mk[kx][v], p + 16 * v);
          } else {
            const float *pv = p + 32 * v;
            const __m512 lo = FULL ? _mm512_loadu_ps(pv) : _mm512_maskz_loadu_ps(mk[kx][2 * v], pv);
            const __m512 hi = FULL ? _mm512_loadu_ps(pv + 16) : _mm512_maskz_loadu_ps(mk[kx][2 * v + 1], pv + 16);
            b[v] = _mm512_permutex2var_ps(lo, even, hi);
          }
        }
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
          const float *q = (r >> 2) == 0 ? q0 : (r >> 2) == 1 ? q1 : q2;
          const ptrdiff_t o = (r & 3) == 0 ? 0 : (r & 3) == 1 ? l1 : (r & 3) == 2 ? l2 : l3;
          const __m512 a = _mm512_set1_ps(q[o + t0 + kx]);
          acc[r][0] = _mm512_fmadd_ps(a, b[0], acc[r][0]);
          if (V == 2) acc[r][1] = _mm512_fmadd_ps(a, b[1], acc[r][1]);
        }
      }
    }
  const __m512 lo = _mm512_set1_ps(g->lo), hi = _mm512_set1_ps(g->hi);
  const ptrdiff_t oplane = (ptrdiff_t)g->oh * g->ow;
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    const __m512 bv = _mm512_set1_ps(bias != NULL ? bias[o0 + r] : 0.0f);
    float *yr = y + (ptrdiff_t)(o0 + r) * oplane + (ptrdiff_t)oy * g->ow + ox0;
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      /* max and min return their second operand when one is NaN: a NaN sum stays NaN */
      const __m512 out = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(bv, acc[r][v])));
      _mm512_mask_storeu_ps(yr + 16 * v, v + 1 < V ? (__mmask16)0xFFFF : sm, out);
    }
  }
}

typedef void (*c3_fn)(float *, const float *, const float *, const float *, const ert_conv3s2_geom *,
                      int32_t, int32_t, int32_t, const __mmask16 (*)[4], __mmask16);
#define C3_FN(R, V, FULL, S)                                                                     \
  ERT_AVX512 static void c3_##R##_##V##_##FULL##_##S(                                            \
      float *y, const float *x, const float *wt, const float *bias, const ert_conv3s2_geom *g,  \
      int32_t o0, int32_t oy, int32_t ox0, const __mmask16(*mk)[4], __mmask16 sm) {             \
    c3_tile(R, V, FULL, S, y, x, wt, bias, g, o0, oy, ox0, mk, sm);                             \
  }
#define C3_FNS(R)                                                                                 \
  C3_FN(R, 1, 0, 1) C3_FN(R, 1, 1, 1) C3_FN(R, 2, 0, 1) C3_FN(R, 2, 1, 1) C3_FN(R, 1, 0, 2)       \
  C3_FN(R, 1, 1, 2) C3_FN(R, 2, 0, 2) C3_FN(R, 2, 1, 2)
C3_FNS(1)
C3_FNS(2)
C3_FNS(3)
C3_FNS(4)
C3_FNS(5)
C3_FNS(6)
C3_FNS(7)
C3_FNS(8)
C3_FNS(9)
C3_FNS(10)
C3_FNS(11)
C3_FNS(12)
#define C3_ROW(R)                                                                                  \
  {{c3_##R##_1_0_1, c3_##R##_1_1_1, c3_##R##_2_0_1, c3_##R##_2_1_1},                              \
   {c3_##R##_1_0_2, c3_##R##_1_1_2, c3_##R##_2_0_2, c3_##R##_2_1_2}}
/* c3_tiles[R][S - 1][2 * (V - 1) + FULL] */
static const c3_fn c3_tiles[13][2][4] = {{{NULL}}, C3_ROW(1), C3_ROW(2), C3_ROW(3), C3_ROW(4),
                                         C3_ROW(5), C3_ROW(6), C3_ROW(7), C3_ROW(8), C3_ROW(9),
                                         C3_ROW(10), C3_ROW(11), C3_ROW(12)};

/* Output rows [oy0, oy1) at stride S: for each row, output channels in tiles of up to 12
 * (near-equal) outer, so a tile's weights (12 x 9c floats) stay in L1 across the row's
 * steps of 32 columns; the input rows stream from L2. */
ERT_AVX512_INLINE void conv3(float *y, const float *x, const float *wt, const float *bias,
                             const ert_conv3s2_geom *g, int32_t oy0, int32_t oy1, const int S) {
  const int32_t m = g->m, ow = g->ow, ntiles = (m + 11) / 12;
  for (int32_t oy = oy0; oy < oy1; ++oy)
    for (int32_t q = 0, o0 = 0, rows; q < ntiles; ++q, o0 += rows) {
      rows = (int32_t)((int64_t)(q + 1) * m / ntiles) - o0;
      for (int32_t ox0 = 0; ox0 < ow; ox0 += 32) {
        const int32_t wd = ow - ox0 < 32 ? ow - ox0 : 32, v = wd > 16 ? 2 : 1;
        /* load u of tap kx (16 floats) starts at column ox0 S - pl + kx + 16u; its lanes
           inside [0, w) (the columns of outputs past ow, when inside, are read, not
           stored) */
        __mmask16 mk[3][4];
        int full = 1;
        for (int kx = 0; kx < 3; ++kx)
          for (int u = 0; u < 2 * S; ++u) {
            const int32_t col = ox0 * S - g->pl + kx + 16 * u;
            const int32_t a = col < 0 ? -col : 0, e = g->w - col < 16 ? g->w - col : 16;
            const uint32_t bits = a < e ? ((1u << e) - 1u) & ~((1u << a) - 1u) : 0u;
            mk[kx][u] = (__mmask16)bits;
            if (u < S * v) full &= bits == 0xFFFFu;
          }
        const __mmask16 sm = (__mmask16)((1u << (wd - 16 * (v - 1))) - 1u);
        c3_tiles[rows][S - 1][2 * (v - 1) + full](y, x, wt, bias, g, o0, oy, ox0,
                                                   (const __mmask16(*)[4])mk, sm);
      }
    }
}

ERT_AVX512 void ert_conv2d_3x3s1_f32__avx512(float *y, const float *x, const float *wt,
                                             const float *bias, const ert_conv3s2_geom *g,
                                             int32_t oy0, int32_t oy1) {
  conv3(y, x, wt, bias, g, oy0, oy1, 1);
}

ERT_AVX512 void ert_conv2d_3x3s2_f32__avx512(float *y, const float *x, const float *wt,
                                             const float *bias, const ert_conv3s2_geom *g,
                                             int32_t oy0, int32_t oy1) {
  conv3(y, x, wt, bias, g, oy0, oy1, 2);
}

#endif
