/* conv2d.c (NEON): depthwise 3x3 and 5x5 planes over a padded input, contract in
 * src/cpu.h (dwK_sS; the portable path is dw_run in ref/conv2d.c). */
#include <stddef.h>

#include "neon_f32.h"

/* One tap of the weights held four per vector: acc + x * w[t], w[t] lane t % 4 of
 * wv[t / 4] (t a literal, so the lane is a constant). */
#if defined(__aarch64__)
#define VMLA_W(acc, x, t) vfmaq_laneq_f32((acc), (x), wv[(t) / 4], (t) % 4)
#else
#define VMLA_W(acc, x, t)                                                                   \
  vmlaq_lane_f32((acc), (x), ((t) % 4) < 2 ? vget_low_f32(wv[(t) / 4]) : vget_high_f32(wv[(t) / 4]), \
                 (t) % 2)
#endif

/* Four outputs' inputs at p: stride 1 reads p[0..4), stride 2 de-interleaves p[0..8)
 * and keeps the even floats (so it reads one float past the last one it uses). The
 * stride 2 _END form reads nothing past the last float used: it loads p[-1..7) and keeps
 * the odd lanes (so it reads one float before p). */
#define LOAD_S1(p) vld1q_f32(p)
#define LOAD_S2(p) vld2q_f32(p).val[0]
#if defined(__aarch64__)
#define LOAD_END_S2(p) vuzp2q_f32(vld1q_f32((p) - 1), vld1q_f32((p) + 3))
#else
#define LOAD_END_S2(p) vuzpq_f32(vld1q_f32((p) - 1), vld1q_f32((p) + 3)).val[1]
#endif

/* The taps of a KxK window as literals, row by row: X(t, ky, kx). */
#define TAPS3(X) X(0, 0, 0) X(1, 0, 1) X(2, 0, 2) X(3, 1, 0) X(4, 1, 1) X(5, 1, 2) \
  X(6, 2, 0) X(7, 2, 1) X(8, 2, 2)
#define TAPS5(X)                                                                         \
  X(0, 0, 0) X(1, 0, 1) X(2, 0, 2) X(3, 0, 3) X(4, 0, 4) X(5, 1, 0) X(6, 1, 1) X(7, 1, 2) \
  X(8, 1, 3) X(9, 1, 4) X(10, 2, 0) X(11, 2, 1) X(12, 2, 2) X(13, 2, 3) X(14, 2, 4)       \
  X(15, 3, 0) X(16, 3, 1) X(17, 3, 2) X(18, 3, 3) X(19, 3, 4) X(20, 4, 0) X(21, 4, 1)     \
  X(22, 4, 2) X(23, 4, 3) X(24, 4, 4)

/* Taps of output columns [i, i + 4) (and [i + 4, i + 8) for the two-vector step): row ky
 * of the window starts at r + ky * ts, its tap kx is kx further (constant offsets, so
 * one pointer per window row). */
#define TAP1_S1(t, ky, kx) a = VMLA_W(a, LOAD_S1(r + (ky) * ts + (kx)), t);
#define TAP1_S2(t, ky, kx) a = VMLA_W(a, LOAD_S2(r + (ky) * ts + (kx)), t);
#define TAP1_END_S2(t, ky, kx) a = VMLA_W(a, LOAD_END_S2(r + (ky) * ts + (kx)), t);
#define TAP2_S1(t, ky, kx)                                \
  a = VMLA_W(a, LOAD_S1(r + (ky) * ts + (kx)), t);    \
  b = VMLA_W(b, LOAD_S1(r + 4 + (ky) * ts + (kx)), t);

/* Two output rows at once (stride 1, window rows one pitch apart, rs == ts): input row
 * r of the pair's K + 1 serves tap row r of the first output row and r - 1 of the
 * second, so each is loaded once: (K + 1) K loads for 2 K^2 multiply-adds instead of
 * 2 K^2. X2: both rows, XA: the first only, XB: the second only (r, kx, taps). Used for
 * 5x5 only (DW_PAIRS5): for 3x3 the saving (12 loads instead of 18) did not pay for
 * the loop's extra bookkeeping (measured). */
#define ROWS2_TAPS5(X2, XA, XB) \
  XA(0, 0, 0) XA(0, 1, 1) XA(0, 2, 2) XA(0, 3, 3) XA(0, 4, 4) X2(1, 0, 5, 0) \
  X2(1, 1, 6, 1) X2(1, 2, 7, 2) X2(1, 3, 8, 3) X2(1, 4, 9, 4) X2(2, 0, 10, 5) \
  X2(2, 1, 11, 6) X2(2, 2, 12, 7) X2(2, 3, 13, 8) X2(2, 4, 14, 9) X2(3, 0, 15, 10) \
  X2(3, 1, 16, 11) X2(3, 2, 17, 12) X2(3, 3, 18, 13) X2(3, 4, 19, 14) X2(4, 0, 20, 15) \
  X2(4, 1, 21, 16) X2(4, 2, 22, 17) X2(4, 3, 23, 18) X2(4, 4, 24, 19) XB(5, 0, 20) \
  XB(5, 1, 21) XB(5, 2, 22) XB(5, 3, 23) XB(5, 4, 24)
#define R2_BOTH(r, kx, ta, tb)                         \
  {                                                    \
    const float32x4_t v = vld1q_f32(p + (r) * ts + (kx)); \
    a = VMLA_W(a, v, ta);                              \
    b = VMLA_W(b, v, tb);                              \
  }
#define R2_FIRST(r, kx, ta) a = VMLA_W(a, vld1q_f32(p + (r) * ts + (kx)), ta);
#define R2_SECOND(r, kx, tb) b = VMLA_W(b, vld1q_f32(p + (r) * ts + (kx)), tb);

/* Pairs of output rows from oy while two remain (5x5; 3x3 has none). */
#define DW_PAIRS3 ((void)0)
#define DW_PAIRS5                                                                            \
  for (; oy + 2 <= oh; oy += 2, y += 2 * ow, x += 2 * rs)                                    \
    for (int32_t i = 0; i < ow; i += 4) {                                                    \
      if (i + 4 > ow) i = ow - 4;                                                            \
      float32x4_t a = vb, b = vb;                                                            \
      const float *p = x + i;                                                                \
      ROWS2_TAPS5(R2_BOTH, R2_FIRST, R2_SECOND)                                              \
      vst1q_f32(y + i, a);                                                                   \
      vst1q_f32(y + ow + i, b);                                                              \
    }

/* A plane: rows oy < oh of ow outputs (pairs of rows as above when they apply), in steps
 * of 4 outputs (and 8 for stride 1) while the loads stay inside the row's span (last
 * tap: (ow-1)*S + K-1; with stride 2 a step at i reads up to 2*i + 7 + K-1, which needs
 * i + 5 <= ow). The outputs left over are
 * recomputed with the four before them (stride 2: by the _END loads, which need i >= 1),
 * which gives the same values, as every output sees the same operations in the same
 * order. Rows are at least 4 outputs wide (5 for stride 2): the caller's contract. */
#define DW_STEP4(K, S, TAP)                      \
  do {                                           \
    float32x4_t a = vb;                          \
    const float *r = x + (ptrdiff_t)i * (S);     \
    TAPS##K(TAP)                                 \
    vst1q_f32(y + i, a);                         \
  } while (0)

#define DW_PLANE(NAME, K, S)                                                                 \
  void NAME(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs, ptrdiff_t ts,    \
            const float *w, float bias) {                                                    \
    float wk[28] = {0};                                                                      \
    for (int t = 0; t < (K) * (K); ++t) wk[t] = w[t];                                        \
    float32x4_t wv[7];                                                                       \
    for (int q = 0; q < ((K) * (K) + 3) / 4; ++q) wv[q] = vld1q_f32(wk + 4 * q);             \
    const float32x4_t vb = vdupq_n_f32(bias);                                                \
    int32_t oy = 0;                                                                          \
    if ((S) == 1 && rs == ts) DW_PAIRS##K;                                                   \
    for (; oy < oh; ++oy, y += ow, x += rs) {                                                \
      int32_t i = 0;                                                                         \
      if ((S) == 1) {                                                                        \
        for (; i + 8 <= ow; i += 8) {                                                        \
          float32x4_t a = vb, b = vb;                                                        \
          const float *r = x + i;                                                            \
          TAPS##K(TAP2_S1)                                                                   \
          vst1q_f32(y + i, a);                                                               \
          vst1q_f32(y + i + 4, b);                                                           \
        }                                                                                    \
        for (; i < ow; i += 4) {                                                             \
          if (i + 4 > ow) i = ow - 4;                                                        \
          DW_STEP4(K, 1, TAP1_S1);                                                           \
        }                                                                                    \
      } else {                                                                               \
        for (; i + 5 <= ow; i += 4) DW_STEP4(K, 2, TAP1_S2);                                 \
        if (i < ow) {                                                                        \
          i = ow - 4;                                                                        \
          DW_STEP4(K, 2, TAP1_END_S2);                                                       \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }

DW_PLANE(ert_conv2d_dw3s1_f32__neon, 3, 1)
DW_PLANE(ert_conv2d_dw3s2_f32__neon, 3, 2)
DW_PLANE(ert_conv2d_dw5s1_f32__neon, 5, 1)
DW_PLANE(ert_conv2d_dw5s2_f32__neon, 5, 2)
