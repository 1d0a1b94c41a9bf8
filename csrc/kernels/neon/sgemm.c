/* sgemm.c (NEON): the 4x16 SGEMM micro-kernels, contracts in src/cpu.h (the reference is
 * micro_body in ref/sgemm.c): A from a packed panel, or from four rows read in place. */
#include <arm_neon.h>

#include "cpu.h"

#if defined(__aarch64__)

/* 16 accumulators c<row><quarter> stay in registers (24 of 32 with A and B). One step k
 * loads the four B quarters and adds row i's A value, lane Li of vector Ai, times them. */
#define DECLARE_ACC                                                         \
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c02 = c00, c03 = c00;     \
  float32x4_t c10 = c00, c11 = c00, c12 = c00, c13 = c00;                   \
  float32x4_t c20 = c00, c21 = c00, c22 = c00, c23 = c00;                   \
  float32x4_t c30 = c00, c31 = c00, c32 = c00, c33 = c00

#define STEP(bk, A0, L0, A1, L1, A2, L2, A3, L3)                            \
  do {                                                                      \
    const float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32((bk) + 4);         \
    const float32x4_t b2 = vld1q_f32((bk) + 8), b3 = vld1q_f32((bk) + 12);  \
    c00 = vfmaq_laneq_f32(c00, b0, A0, L0);                                 \
    c01 = vfmaq_laneq_f32(c01, b1, A0, L0);                                 \
    c02 = vfmaq_laneq_f32(c02, b2, A0, L0);                                 \
    c03 = vfmaq_laneq_f32(c03, b3, A0, L0);                                 \
    c10 = vfmaq_laneq_f32(c10, b0, A1, L1);                                 \
    c11 = vfmaq_laneq_f32(c11, b1, A1, L1);                                 \
    c12 = vfmaq_laneq_f32(c12, b2, A1, L1);                                 \
    c13 = vfmaq_laneq_f32(c13, b3, A1, L1);                                 \
    c20 = vfmaq_laneq_f32(c20, b0, A2, L2);                                 \
    c21 = vfmaq_laneq_f32(c21, b1, A2, L2);                                 \
    c22 = vfmaq_laneq_f32(c22, b2, A2, L2);                                 \
    c23 = vfmaq_laneq_f32(c23, b3, A2, L2);                                 \
    c30 = vfmaq_laneq_f32(c30, b0, A3, L3);                                 \
    c31 = vfmaq_laneq_f32(c31, b1, A3, L3);                                 \
    c32 = vfmaq_laneq_f32(c32, b2, A3, L3);                                 \
    c33 = vfmaq_laneq_f32(c33, b3, A3, L3);                                 \
  } while (0)

#define STORE_ACC(t)                                                          \
  do {                                                                        \
    vst1q_f32((t) + 0, c00), vst1q_f32((t) + 4, c01), vst1q_f32((t) + 8, c02); \
    vst1q_f32((t) + 12, c03), vst1q_f32((t) + 16, c10), vst1q_f32((t) + 20, c11); \
    vst1q_f32((t) + 24, c12), vst1q_f32((t) + 28, c13), vst1q_f32((t) + 32, c20); \
    vst1q_f32((t) + 36, c21), vst1q_f32((t) + 40, c22), vst1q_f32((t) + 44, c23); \
    vst1q_f32((t) + 48, c30), vst1q_f32((t) + 52, c31), vst1q_f32((t) + 56, c32); \
    vst1q_f32((t) + 60, c33);                                                 \
  } while (0)

void ert_sgemm_tile_f32__neon(int32_t kc, const float *a, const float *b, float *tile) {
  DECLARE_ACC;
  for (int32_t k = 0; k < kc; ++k, a += 4, b += 16) {
    const float32x4_t av = vld1q_f32(a);
    STEP(b, av, 0, av, 1, av, 2, av, 3);
  }
  STORE_ACC(tile);
}

/* Four k at a time: one load per row gives four steps' A values. */
void ert_sgemm_rows_f32__neon(int32_t kc, const float *const *rows, const float *b, float *tile) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
  DECLARE_ACC;
  int32_t k = 0;
  for (; k + 4 <= kc; k += 4, b += 64) {
    const float32x4_t a0 = vld1q_f32(r0 + k), a1 = vld1q_f32(r1 + k);
    const float32x4_t a2 = vld1q_f32(r2 + k), a3 = vld1q_f32(r3 + k);
    STEP(b, a0, 0, a1, 0, a2, 0, a3, 0);
    STEP(b + 16, a0, 1, a1, 1, a2, 1, a3, 1);
    STEP(b + 32, a0, 2, a1, 2, a2, 2, a3, 2);
    STEP(b + 48, a0, 3, a1, 3, a2, 3, a3, 3);
  }
  for (; k < kc; ++k, b += 16) {
    const float ak[4] = {r0[k], r1[k], r2[k], r3[k]};
    const float32x4_t av = vld1q_f32(ak);
    STEP(b, av, 0, av, 1, av, 2, av, 3);
  }
  STORE_ACC(tile);
}

#else /* 32-bit ARM: 16 q registers, so the tile is done as two 4x8 halves */

#define DECLARE_HALF                                                  \
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00; \
  float32x4_t c20 = c00, c21 = c00, c30 = c00, c31 = c00

/* row i's A value is lane Li of the d register Di */
#define STEP_HALF(bk, D0, L0, D1, L1, D2, L2, D3, L3)                  \
  do {                                                                \
    const float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32((bk) + 4);   \
    c00 = vmlaq_lane_f32(c00, b0, D0, L0);                            \
    c01 = vmlaq_lane_f32(c01, b1, D0, L0);                            \
    c10 = vmlaq_lane_f32(c10, b0, D1, L1);                            \
    c11 = vmlaq_lane_f32(c11, b1, D1, L1);                            \
    c20 = vmlaq_lane_f32(c20, b0, D2, L2);                            \
    c21 = vmlaq_lane_f32(c21, b1, D2, L2);                            \
    c30 = vmlaq_lane_f32(c30, b0, D3, L3);                            \
    c31 = vmlaq_lane_f32(c31, b1, D3, L3);                            \
  } while (0)

#define STORE_HALF(t)                                                      \
  do {                                                                     \
    vst1q_f32((t) + 0, c00), vst1q_f32((t) + 4, c01);                      \
    vst1q_f32((t) + 16, c10), vst1q_f32((t) + 20, c11);                    \
    vst1q_f32((t) + 32, c20), vst1q_f32((t) + 36, c21);                    \
    vst1q_f32((t) + 48, c30), vst1q_f32((t) + 52, c31);                    \
  } while (0)

void ert_sgemm_tile_f32__neon(int32_t kc, const float *a, const float *b, float *tile) {
  for (int half = 0; half < 2; ++half) {
    const float *ak = a, *bk = b + 8 * half;
    DECLARE_HALF;
    for (int32_t k = 0; k < kc; ++k, ak += 4, bk += 16) {
      const float32x4_t av = vld1q_f32(ak);
      const float32x2_t lo = vget_low_f32(av), hi = vget_high_f32(av);
      STEP_HALF(bk, lo, 0, lo, 1, hi, 0, hi, 1);
    }
    STORE_HALF(tile + 8 * half);
  }
}

void ert_sgemm_rows_f32__neon(int32_t kc, const float *const *rows, const float *b, float *tile) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
  for (int half = 0; half < 2; ++half) {
    const float *bk = b + 8 * half;
    DECLARE_HALF;
    int32_t k = 0;
    for (; k + 2 <= kc; k += 2, bk += 32) {
      const float32x2_t a0 = vld1_f32(r0 + k), a1 = vld1_f32(r1 + k);
      const float32x2_t a2 = vld1_f32(r2 + k), a3 = vld1_f32(r3 + k);
      STEP_HALF(bk, a0, 0, a1, 0, a2, 0, a3, 0);
      STEP_HALF(bk + 16, a0, 1, a1, 1, a2, 1, a3, 1);
    }
    for (; k < kc; ++k, bk += 16) {
      const float ak[4] = {r0[k], r1[k], r2[k], r3[k]};
      const float32x4_t av = vld1q_f32(ak);
      const float32x2_t lo = vget_low_f32(av), hi = vget_high_f32(av);
      STEP_HALF(bk, lo, 0, lo, 1, hi, 0, hi, 1);
    }
    STORE_HALF(tile + 8 * half);
  }
}

#endif
