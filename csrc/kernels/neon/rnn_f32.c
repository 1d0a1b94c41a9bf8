/* rnn_f32.c (NEON), compiled for size: rnn_mv (cpu.h; sgemm.c's matrix-vector path,
 * each output summing its products in order, fused on aarch64) and the out-of-line
 * sigmoid and tanh of four floats that act.c calls. The recurrent ops' per-step kernels
 * (rnn_panels, lstm_cell, gru_cell) are rnn_step.c, compiled for speed. */
#include "neon_f32.h"

/* Out of line (neon_f32.h): ~40 instructions each, used by act.c. */
__attribute__((noinline)) float32x4_t ert_sigmoid4_f32__neon(float32x4_t x) { return ert_v_sigmoid(x); }

__attribute__((noinline)) float32x4_t ert_tanh4_f32__neon(float32x4_t x) { return ert_v_tanh(x); }

/* ---- matrix-vector products ------------------------------------------------------------ */

#if defined(__aarch64__)
enum { MV_CB = 4 }; /* vectors of 4 columns per tile: 16 columns */
#define MV_LANE(acc, w, xv, l) vfmaq_laneq_f32((acc), (w), (xv), (l))
/* w[0..MV_CB) = the 4*MV_CB floats at p (one ld1 of four registers) */
#define MV_LOAD(w, p)                                                        \
  {                                                                          \
    const float32x4x4_t w4 = vld1q_f32_x4(p);                                \
    w[0] = w4.val[0], w[1] = w4.val[1], w[2] = w4.val[2], w[3] = w4.val[3];  \
  }
#else
enum { MV_CB = 2 }; /* 8 columns */
#define MV_LANE(acc, w, xv, l) \
  vmlaq_lane_f32((acc), (w), (l) < 2 ? vget_low_f32(xv) : vget_high_f32(xv), (l) & 1)
#define MV_LOAD(w, p) w[0] = vld1q_f32(p), w[1] = vld1q_f32((p) + 4);
#endif

/* acc[b] += x[i + l] * row i + l of the tile, b < MV_CB */
#define MV_STEP(l)                                                 \
  {                                                                \
    float32x4_t w[MV_CB];                                          \
    MV_LOAD(w, wp + (l) * ld)                                      \
    _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b)        \
        acc[b] = MV_LANE(acc[b], w[b], xv, l);                     \
  }

/* out[j] = (add ? add[j] : 0) + sum over i < k of x[i] mt[i*ld + j], j < 4*MV_CB. */
static void mv_tile(size_t k, const float *mt, size_t ld, const float *x, const float *add,
                    float *out) {
  float32x4_t acc[MV_CB];
  _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b)
      acc[b] = add ? vld1q_f32(add + 4 * b) : vdupq_n_f32(0.0f);
  size_t i = 0;
  for (; i + 4 <= k; i += 4) {
    const float32x4_t xv = vld1q_f32(x + i);
    const float *wp = mt + i * ld;
    MV_STEP(0)
    MV_STEP(1)
    MV_STEP(2)
    MV_STEP(3)
  }
  for (; i < k; ++i) {
    const float *wp = mt + i * ld;
    _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b)
        acc[b] = ERT_VMLA_N(acc[b], vld1q_f32(wp + 4 * b), x[i]);
  }
  _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b) vst1q_f32(out + 4 * b, acc[b]);
}

/* One vector at a time (each weight is used once per vector either way): whole tiles of
 * 4*MV_CB columns, then the last columns one by one. */
void ert_rnn_mv_f32__neon(size_t k, size_t nj, const float *mt, size_t ld, const float *vec,
                          size_t vs, size_t nv, const float *add, size_t as, float *out,
                          size_t os) {
  for (size_t v = 0; v < nv; ++v) {
    const float *x = vec + v * vs, *a = add ? add + v * as : NULL;
    float *o = out + v * os;
    size_t j = 0;
    for (; j + 4 * MV_CB <= nj; j += 4 * MV_CB) mv_tile(k, mt + j, ld, x, a ? a + j : NULL, o + j);
    for (; j < nj; ++j) {
      float s = a ? a[j] : 0.0f;
      for (size_t i = 0; i < k; ++i) s += x[i] * mt[i * ld + j];
      o[j] = s;
    }
  }
}
