/* conv2d.c (NEON): interiors of depthwise 3x3 output rows, contract in src/cpu.h. */
#include <arm_neon.h>

#include "cpu.h"

#if defined(__aarch64__)
#define VMLA_N(acc, x, s) vfmaq_n_f32((acc), (x), (s))
#else
#define VMLA_N(acc, x, s) vmlaq_n_f32((acc), (x), (s))
#endif

/* Stride 1: eight outputs per step with two accumulators, then four, then scalars. */
void ert_conv2d_dw3s1_f32__neon(float *y, const float *const *rows, const float *w, int32_t n,
                                int32_t d, float bias) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2];
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
  const float w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
  const int32_t d2 = 2 * d;
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t a = vdupq_n_f32(bias), b = a;
    a = VMLA_N(a, vld1q_f32(r0 + i), w0);
    b = VMLA_N(b, vld1q_f32(r0 + i + 4), w0);
    a = VMLA_N(a, vld1q_f32(r0 + i + d), w1);
    b = VMLA_N(b, vld1q_f32(r0 + i + 4 + d), w1);
    a = VMLA_N(a, vld1q_f32(r0 + i + d2), w2);
    b = VMLA_N(b, vld1q_f32(r0 + i + 4 + d2), w2);
    a = VMLA_N(a, vld1q_f32(r1 + i), w3);
    b = VMLA_N(b, vld1q_f32(r1 + i + 4), w3);
    a = VMLA_N(a, vld1q_f32(r1 + i + d), w4);
    b = VMLA_N(b, vld1q_f32(r1 + i + 4 + d), w4);
    a = VMLA_N(a, vld1q_f32(r1 + i + d2), w5);
    b = VMLA_N(b, vld1q_f32(r1 + i + 4 + d2), w5);
    a = VMLA_N(a, vld1q_f32(r2 + i), w6);
    b = VMLA_N(b, vld1q_f32(r2 + i + 4), w6);
    a = VMLA_N(a, vld1q_f32(r2 + i + d), w7);
    b = VMLA_N(b, vld1q_f32(r2 + i + 4 + d), w7);
    a = VMLA_N(a, vld1q_f32(r2 + i + d2), w8);
    b = VMLA_N(b, vld1q_f32(r2 + i + 4 + d2), w8);
    vst1q_f32(y + i, a);
    vst1q_f32(y + i + 4, b);
  }
  for (; i + 4 <= n; i += 4) {
    float32x4_t a = vdupq_n_f32(bias);
    a = VMLA_N(a, vld1q_f32(r0 + i), w0);
    a = VMLA_N(a, vld1q_f32(r0 + i + d), w1);
    a = VMLA_N(a, vld1q_f32(r0 + i + d2), w2);
    a = VMLA_N(a, vld1q_f32(r1 + i), w3);
    a = VMLA_N(a, vld1q_f32(r1 + i + d), w4);
    a = VMLA_N(a, vld1q_f32(r1 + i + d2), w5);
    a = VMLA_N(a, vld1q_f32(r2 + i), w6);
    a = VMLA_N(a, vld1q_f32(r2 + i + d), w7);
    a = VMLA_N(a, vld1q_f32(r2 + i + d2), w8);
    vst1q_f32(y + i, a);
  }
  for (; i < n; ++i)
    y[i] = bias + w0 * r0[i] + w1 * r0[i + d] + w2 * r0[i + d2] + w3 * r1[i] + w4 * r1[i + d] +
           w5 * r1[i + d2] + w6 * r2[i] + w7 * r2[i + d] + w8 * r2[i + d2];
}

/* Stride 2: vld2q de-interleaves 8 floats and keeps the even ones. The load reads one
 * float past the last tap it uses, so the vector loop stops while i + 5 <= n, where
 * that float is still inside the interior the caller guarantees. */
void ert_conv2d_dw3s2_f32__neon(float *y, const float *const *rows, const float *w, int32_t n,
                                int32_t d, float bias) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2];
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
  const float w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
  const int32_t d2 = 2 * d;
  int32_t i = 0;
  for (; i + 5 <= n; i += 4) {
    const int32_t x = 2 * i;
    float32x4_t a = vdupq_n_f32(bias);
    a = VMLA_N(a, vld2q_f32(r0 + x).val[0], w0);
    a = VMLA_N(a, vld2q_f32(r0 + x + d).val[0], w1);
    a = VMLA_N(a, vld2q_f32(r0 + x + d2).val[0], w2);
    a = VMLA_N(a, vld2q_f32(r1 + x).val[0], w3);
    a = VMLA_N(a, vld2q_f32(r1 + x + d).val[0], w4);
    a = VMLA_N(a, vld2q_f32(r1 + x + d2).val[0], w5);
    a = VMLA_N(a, vld2q_f32(r2 + x).val[0], w6);
    a = VMLA_N(a, vld2q_f32(r2 + x + d).val[0], w7);
    a = VMLA_N(a, vld2q_f32(r2 + x + d2).val[0], w8);
    vst1q_f32(y + i, a);
  }
  for (; i < n; ++i) {
    const int32_t x = 2 * i;
    y[i] = bias + w0 * r0[x] + w1 * r0[x + d] + w2 * r0[x + d2] + w3 * r1[x] + w4 * r1[x + d] +
           w5 * r1[x + d2] + w6 * r2[x] + w7 * r2[x + d] + w8 * r2[x + d2];
  }
}
