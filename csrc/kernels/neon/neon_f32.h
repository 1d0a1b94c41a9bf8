/* neon_f32.h: helpers shared by the float32 NEON kernels (internal to kernels/neon). */
#ifndef ERT_NEON_F32_H_
#define ERT_NEON_F32_H_

#include <arm_neon.h>

#include "cpu.h"

#if defined(__aarch64__)
#define ERT_VMLA(acc, x, y) vfmaq_f32((acc), (x), (y))
#define ERT_VMLA_N(acc, x, s) vfmaq_n_f32((acc), (x), (s))
#else
#define ERT_VMLA(acc, x, y) vmlaq_f32((acc), (x), (y))
#define ERT_VMLA_N(acc, x, s) vmlaq_n_f32((acc), (x), (s))
#endif

/* relu as the reference's x > 0 ? x : 0, NaN to 0 (fmaxnm on aarch64, a compare and
 * select on 32-bit ARM). */
static inline float32x4_t ert_v_relu(float32x4_t v) {
#if defined(__aarch64__)
  return vmaxnmq_f32(v, vdupq_n_f32(0.0f));
#else
  const float32x4_t zero = vdupq_n_f32(0.0f);
  return vbslq_f32(vcgtq_f32(v, zero), v, zero);
#endif
}

/* hard_swish x * min(max(x / 6 + 1/2, 0), 1), the division as a multiply by 1/6 (at
 * most one rounding from the reference); NaN stays NaN. The one form every kernel
 * uses, so that fused and separate activations give the same values. */
static inline float32x4_t ert_v_hard_swish(float32x4_t v) {
  const float32x4_t t = ERT_VMLA(vdupq_n_f32(0.5f), v, vdupq_n_f32(1.0f / 6.0f));
  return vmulq_f32(v, vminq_f32(vmaxq_f32(t, vdupq_n_f32(0.0f)), vdupq_n_f32(1.0f)));
}

/* exp(x) for x <= 0 (NaN stays NaN), 0 below -87.33654: x = n ln2 + r, e^r by its
 * degree-7 Taylor polynomial, 2^n from the exponent bits (within 2 ulp of expf). */
static inline float32x4_t ert_v_exp_neg(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.33654f), shift = vdupq_n_f32(12582912.0f);
  const float32x4_t xc = vmaxq_f32(x, lo);
  const float32x4_t t = ERT_VMLA(shift, xc, vdupq_n_f32(1.44269504f));
  const float32x4_t nf = vsubq_f32(t, shift);
  float32x4_t r = ERT_VMLA(xc, nf, vdupq_n_f32(-0.693145752f));
  r = ERT_VMLA(r, nf, vdupq_n_f32(-1.42860677e-6f));
  float32x4_t p = ERT_VMLA(vdupq_n_f32(1.0f / 720.0f), r, vdupq_n_f32(1.0f / 5040.0f));
  p = ERT_VMLA(vdupq_n_f32(1.0f / 120.0f), p, r);
  p = ERT_VMLA(vdupq_n_f32(1.0f / 24.0f), p, r);
  p = ERT_VMLA(vdupq_n_f32(1.0f / 6.0f), p, r);
  p = ERT_VMLA(vdupq_n_f32(0.5f), p, r);
  p = ERT_VMLA(vdupq_n_f32(1.0f), p, r);
  p = ERT_VMLA(vdupq_n_f32(1.0f), p, r);
  const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(nf), vdupq_n_s32(127)), 23);
  const float32x4_t e = vmulq_f32(p, vreinterpretq_f32_s32(bits));
  return vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0f), e);
}

/* a / b for b in [1, 2] (and NaN): IEEE on aarch64, a reciprocal estimate with three
 * Newton steps on 32-bit ARM. */
static inline float32x4_t ert_v_div12(float32x4_t a, float32x4_t b) {
#if defined(__aarch64__)
  return vdivq_f32(a, b);
#else
  float32x4_t r = vrecpeq_f32(b);
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  return vmulq_f32(a, r);
#endif
}

/* sigmoid(x) = (x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|); within 5e-7 absolute of the
 * exact function (kernel_test: 8.4e-8 aarch64, 1.5e-7 armv7); NaN stays NaN, +-inf give
 * 1 and 0. About 40 instructions: callers keep one out-of-line copy per file. */
static inline float32x4_t ert_v_sigmoid(float32x4_t x) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  const float32x4_t e = ert_v_exp_neg(vnegq_f32(vabsq_f32(x)));
  return ert_v_div12(vbslq_f32(vcgeq_f32(x, vdupq_n_f32(0.0f)), one, e), vaddq_f32(one, e));
}

/* tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|), for |x| >= 1/4, the Taylor series
 * to x^9 below (within 1e-5 relative there); within 5e-7 absolute of the exact function;
 * NaN stays NaN, +-inf give +-1, the sign of zero is kept. */
static inline float32x4_t ert_v_tanh(float32x4_t x) {
  const float32x4_t one = vdupq_n_f32(1.0f), a = vabsq_f32(x);
  const float32x4_t e = ert_v_exp_neg(vmulq_f32(a, vdupq_n_f32(-2.0f)));
  const float32x4_t big = ert_v_div12(vsubq_f32(one, e), vaddq_f32(one, e));
  const float32x4_t a2 = vmulq_f32(a, a);
  float32x4_t p = ERT_VMLA(vdupq_n_f32(-17.0f / 315.0f), a2, vdupq_n_f32(62.0f / 2835.0f));
  p = ERT_VMLA(vdupq_n_f32(2.0f / 15.0f), p, a2);
  p = ERT_VMLA(vdupq_n_f32(-1.0f / 3.0f), p, a2);
  p = ERT_VMLA(one, p, a2);
  const float32x4_t y = vbslq_f32(vcltq_f32(a, vdupq_n_f32(0.25f)), vmulq_f32(a, p), big);
  const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
  return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(y), sign));
}

/* ert_v_sigmoid and ert_v_tanh, out of line (rnn_f32.c): one copy for the library. */
float32x4_t ert_sigmoid4_f32__neon(float32x4_t x);
float32x4_t ert_tanh4_f32__neon(float32x4_t x);

/* The activation act over `rows` rows of n floats at x, ld floats apart, as
 * ert_act_apply does it (returns 1): relu, clip, hard_sigmoid, hard_swish and
 * leaky_relu by the reference's comparisons, sigmoid, silu and tanh by ert_v_sigmoid and
 * ert_v_tanh below; returns 0 with x untouched for the other kinds (gelu). */
int ert_act_rows_f32__neon(const ert_act_params *act, float *x, ptrdiff_t ld, int32_t rows,
                           size_t n);

#endif /* ERT_NEON_F32_H_ */
