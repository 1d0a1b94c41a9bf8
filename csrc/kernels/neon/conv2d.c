/* conv2d.c (NEON): depthwise 3x3 planes straight from the input (dw3) and 5x5 planes
 * over a padded input (dwK_sS), contracts in src/cpu.h (the portable path is dw_run in
 * ref/conv2d.c). */
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
 * 2 K^2. X2: both rows, XA: the first only, XB: the second only (r, kx, taps). */
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

/* Pairs of output rows from oy while two remain. */
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

DW_PLANE(ert_conv2d_dw5s1_f32__neon, 5, 1)
DW_PLANE(ert_conv2d_dw5s2_f32__neon, 5, 2)

/* dw3. An output row reads three input rows (the zero row where a window row leaves
 * the image) and takes four outputs per step, [i, i + 4): per window row the left,
 * middle and right taps of the four are three vectors, loaded in place where they lie
 * inside the row (stride 2: two de-interleaving loads, at 2i - 1 and 2i), and built with
 * `ext` where they reach the padding: the first step's left vector from a zero lane, the
 * last step's right vector from the row's last tap column (e: zero, or x[ec] when
 * ec < w). The last step ends at ow (recomputing up to three outputs of the step before
 * it with the same operations). The three taps of a window row are multiply-added in
 * order, rows in order, then the clamp.
 *
 * Stride 1 across: two output rows per step when the stride down is 1 too, their four
 * input rows each loaded once for both (12 loads for 18 multiply-adds instead of 18; an
 * odd last row is recomputed with the one before it); otherwise one row per step, the
 * second row's sums (over the next input row) computed too and stored first at the same
 * place, where the first row's overwrite them. */
#define DW3_TAPS(acc, t) acc = VMLA_W(VMLA_W(VMLA_W(acc, l, t), m, t + 1), r, t + 2);
#define DW3_LMR(P, E, FIRST, LAST)                                                \
  const float32x4_t m = vld1q_f32(P + i);                                         \
  const float32x4_t l = FIRST ? vextq_f32(z, m, 3) : vld1q_f32(P + i - 1);        \
  const float32x4_t r = LAST ? vextq_f32(m, E, 1) : vld1q_f32(P + i + 1);
#define DW3_PAIR(FIRST, LAST)                                                     \
  {                                                                               \
    float32x4_t a = vb, b = vb;                                                   \
    { DW3_LMR(p0, e0, FIRST, LAST) DW3_TAPS(a, 0) }                               \
    { DW3_LMR(p1, e1, FIRST, LAST) DW3_TAPS(a, 3) DW3_TAPS(b, 0) }                \
    { DW3_LMR(p2, e2, FIRST, LAST) DW3_TAPS(a, 6) DW3_TAPS(b, 3) }                \
    { DW3_LMR(p3, e3, FIRST, LAST) DW3_TAPS(b, 6) }                               \
    vst1q_f32(y + yb + i, vminq_f32(vmaxq_f32(b, lo), hi));                       \
    vst1q_f32(y + i, vminq_f32(vmaxq_f32(a, lo), hi));                            \
  }
/* stride 2 across: l, m, r of one window row */
#define DW3_LMR2(P, E, FIRST, LAST)                                               \
  float32x4_t l, m, r;                                                            \
  if (LAST) {                                                                     \
    const float32x4x2_t v = vld2q_f32(P + 2 * i - 1);                             \
    l = v.val[0], m = v.val[1], r = vextq_f32(l, E, 1);                           \
  } else {                                                                        \
    const float32x4x2_t v = vld2q_f32(P + 2 * i);                                 \
    m = v.val[0], r = v.val[1];                                                   \
    l = FIRST ? vextq_f32(z, r, 3) : vld2q_f32(P + 2 * i - 1).val[0];             \
  }
#define DW3_STEP2(FIRST, LAST)                                                    \
  {                                                                               \
    float32x4_t a = vb;                                                           \
    (void)p3, (void)e3; /* a fourth row for the pairs only */                     \
    { DW3_LMR2(p0, e0, FIRST, LAST) DW3_TAPS(a, 0) }                              \
    { DW3_LMR2(p1, e1, FIRST, LAST) DW3_TAPS(a, 3) }                              \
    { DW3_LMR2(p2, e2, FIRST, LAST) DW3_TAPS(a, 6) }                              \
    vst1q_f32(y + i, vminq_f32(vmaxq_f32(a, lo), hi));                            \
  }
/* Output rows oy < oh in steps of `step` rows (the last step ending at oh), the input
 * rows p0..p3 from iy = oy*sh - pt on, the edge columns e0..e3. */
#define DW3_ROWS(STEP)                                                            \
  for (int32_t oy = 0; oy < oh; oy += step) {                                     \
    if (oy + step > oh) oy = oh - step;                                           \
    const int32_t iy = oy * g->sh - g->pt;                                        \
    const float *p0 = ROW3(iy), *p1 = ROW3(iy + 1), *p2 = ROW3(iy + 2), *p3 = ROW3(iy + 3); \
    float32x4_t e0 = z, e1 = z, e2 = z, e3 = z;                                   \
    if (ec < w) {                                                                 \
      e0 = vld1q_dup_f32(p0 + ec);                                                \
      e1 = vld1q_dup_f32(p1 + ec);                                                \
      e2 = vld1q_dup_f32(p2 + ec);                                                \
      e3 = vld1q_dup_f32(p3 + ec);                                                \
    }                                                                             \
    float *y = y0 + (ptrdiff_t)oy * ow;                                           \
    int32_t i = 0;                                                                \
    STEP(1, 0)                                                                    \
    for (i = 4; i < ow - 4; i += 4) STEP(0, 0)                                    \
    i = ow - 4;                                                                   \
    STEP(0, 1)                                                                    \
  }

void ert_conv2d_dw3_f32__neon(float *y0, const float *x, const float *zero, const float *k,
                              float bias, const ert_dw3_geom *g) {
  const float32x4_t wv[3] = {vld1q_f32(k), vld1q_f32(k + 4), vld1q_dup_f32(k + 8)};
  const float32x4_t vb = vdupq_n_f32(bias), z = vdupq_n_f32(0.0f);
  const float32x4_t lo = vdupq_n_f32(g->lo), hi = vdupq_n_f32(g->hi);
  const int32_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  const int32_t ec = (ow - 1) * g->sw + 1; /* the last window's right column */
#define ROW3(r) ((uint32_t)(r) < (uint32_t)h ? x + (ptrdiff_t)(r) * w : zero)
  if (g->sw == 1) {
    const int32_t step = g->sh == 1 && oh >= 2 ? 2 : 1;
    const ptrdiff_t yb = step == 2 ? ow : 0;
    DW3_ROWS(DW3_PAIR)
  } else {
    const int32_t step = 1;
    DW3_ROWS(DW3_STEP2)
  }
#undef ROW3
}
