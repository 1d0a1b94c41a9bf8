/* sgemm.c (NEON): the 4x16 SGEMM micro-kernel, contract in src/cpu.h and ref/sgemm.c. */
#include <arm_neon.h>

#include "cpu.h"

#if defined(__aarch64__)

/* 16 accumulators (4 rows x 4 column quarters) stay in registers; each k is one A load
 * and four B loads feeding 16 fused multiply-adds by lane. */
void ert_sgemm_tile_f32__neon(int32_t kc, const float *a, const float *b, float *tile) {
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c02 = c00, c03 = c00;
  float32x4_t c10 = c00, c11 = c00, c12 = c00, c13 = c00;
  float32x4_t c20 = c00, c21 = c00, c22 = c00, c23 = c00;
  float32x4_t c30 = c00, c31 = c00, c32 = c00, c33 = c00;
  for (int32_t k = 0; k < kc; ++k, a += 4, b += 16) {
    const float32x4_t av = vld1q_f32(a);
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    const float32x4_t b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
    c00 = vfmaq_laneq_f32(c00, b0, av, 0);
    c01 = vfmaq_laneq_f32(c01, b1, av, 0);
    c02 = vfmaq_laneq_f32(c02, b2, av, 0);
    c03 = vfmaq_laneq_f32(c03, b3, av, 0);
    c10 = vfmaq_laneq_f32(c10, b0, av, 1);
    c11 = vfmaq_laneq_f32(c11, b1, av, 1);
    c12 = vfmaq_laneq_f32(c12, b2, av, 1);
    c13 = vfmaq_laneq_f32(c13, b3, av, 1);
    c20 = vfmaq_laneq_f32(c20, b0, av, 2);
    c21 = vfmaq_laneq_f32(c21, b1, av, 2);
    c22 = vfmaq_laneq_f32(c22, b2, av, 2);
    c23 = vfmaq_laneq_f32(c23, b3, av, 2);
    c30 = vfmaq_laneq_f32(c30, b0, av, 3);
    c31 = vfmaq_laneq_f32(c31, b1, av, 3);
    c32 = vfmaq_laneq_f32(c32, b2, av, 3);
    c33 = vfmaq_laneq_f32(c33, b3, av, 3);
  }
  vst1q_f32(tile + 0, c00);
  vst1q_f32(tile + 4, c01);
  vst1q_f32(tile + 8, c02);
  vst1q_f32(tile + 12, c03);
  vst1q_f32(tile + 16, c10);
  vst1q_f32(tile + 20, c11);
  vst1q_f32(tile + 24, c12);
  vst1q_f32(tile + 28, c13);
  vst1q_f32(tile + 32, c20);
  vst1q_f32(tile + 36, c21);
  vst1q_f32(tile + 40, c22);
  vst1q_f32(tile + 44, c23);
  vst1q_f32(tile + 48, c30);
  vst1q_f32(tile + 52, c31);
  vst1q_f32(tile + 56, c32);
  vst1q_f32(tile + 60, c33);
}

#else /* 32-bit ARM: 16 q registers, so the tile is done as two 4x8 halves */

void ert_sgemm_tile_f32__neon(int32_t kc, const float *a, const float *b, float *tile) {
  for (int half = 0; half < 2; ++half) {
    const float *ak = a, *bk = b + 8 * half;
    float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00;
    float32x4_t c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int32_t k = 0; k < kc; ++k, ak += 4, bk += 16) {
      const float32x4_t av = vld1q_f32(ak);
      const float32x2_t alo = vget_low_f32(av), ahi = vget_high_f32(av);
      const float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4);
      c00 = vmlaq_lane_f32(c00, b0, alo, 0);
      c01 = vmlaq_lane_f32(c01, b1, alo, 0);
      c10 = vmlaq_lane_f32(c10, b0, alo, 1);
      c11 = vmlaq_lane_f32(c11, b1, alo, 1);
      c20 = vmlaq_lane_f32(c20, b0, ahi, 0);
      c21 = vmlaq_lane_f32(c21, b1, ahi, 0);
      c30 = vmlaq_lane_f32(c30, b0, ahi, 1);
      c31 = vmlaq_lane_f32(c31, b1, ahi, 1);
    }
    float *t = tile + 8 * half;
    vst1q_f32(t + 0, c00);
    vst1q_f32(t + 4, c01);
    vst1q_f32(t + 16, c10);
    vst1q_f32(t + 20, c11);
    vst1q_f32(t + 32, c20);
    vst1q_f32(t + 36, c21);
    vst1q_f32(t + 48, c30);
    vst1q_f32(t + 52, c31);
  }
}

#endif
