/* act.c (NEON): the clamp-like fused activations of ert_act_apply (src/common.c).
 * Comparisons and selects mirror the reference expressions, so NaN inputs give the same
 * results; hard_swish multiplies by 1/6 where the reference divides by 6 (at most one
 * rounding apart). Kinds that need exp/tanh/erf return 0: the caller runs the
 * reference code. */
#include <arm_neon.h>

#include "cpu.h"

#if defined(__aarch64__)
#define VMLA(acc, x, y) vfmaq_f32((acc), (x), (y))
#else
#define VMLA(acc, x, y) vmlaq_f32((acc), (x), (y))
#endif

/* x < lo ? lo : x, then v > hi ? hi : v (the reference's order of tests) */
static inline float32x4_t clamp(float32x4_t x, float32x4_t lo, float32x4_t hi) {
  const float32x4_t v = vbslq_f32(vcltq_f32(x, lo), lo, x);
  return vbslq_f32(vcgtq_f32(v, hi), hi, v);
}

static inline float clamp1(float x, float lo, float hi) {
  const float v = x < lo ? lo : x;
  return v > hi ? hi : v;
}

int ert_act_apply_f32__neon(const ert_act_params *act, float *x, size_t count) {
  const float a = act->a, b = act->b;
  const float32x4_t zero = vdupq_n_f32(0.0f), one = vdupq_n_f32(1.0f);
  size_t i = 0;
  switch (act->kind) {
    case ERT_ACT_RELU:
      for (; i + 4 <= count; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        vst1q_f32(x + i, vbslq_f32(vcgtq_f32(v, zero), v, zero));
      }
      for (; i < count; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      return 1;
    case ERT_ACT_CLIP: {
      const float32x4_t lo = vdupq_n_f32(a), hi = vdupq_n_f32(b);
      for (; i + 4 <= count; i += 4) vst1q_f32(x + i, clamp(vld1q_f32(x + i), lo, hi));
      for (; i < count; ++i) x[i] = clamp1(x[i], a, b);
      return 1;
    }
    case ERT_ACT_HARD_SIGMOID: {
      const float32x4_t va = vdupq_n_f32(a), vb = vdupq_n_f32(b);
      for (; i + 4 <= count; i += 4)
        vst1q_f32(x + i, clamp(VMLA(vb, va, vld1q_f32(x + i)), zero, one));
      for (; i < count; ++i) x[i] = clamp1(a * x[i] + b, 0.0f, 1.0f);
      return 1;
    }
    case ERT_ACT_HARD_SWISH: {
      const float32x4_t sixth = vdupq_n_f32(1.0f / 6.0f), half = vdupq_n_f32(0.5f);
      for (; i + 4 <= count; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        vst1q_f32(x + i, vmulq_f32(v, clamp(VMLA(half, v, sixth), zero, one)));
      }
      for (; i < count; ++i) x[i] = x[i] * clamp1(x[i] / 6.0f + 0.5f, 0.0f, 1.0f);
      return 1;
    }
    case ERT_ACT_LEAKY_RELU: {
      const float32x4_t va = vdupq_n_f32(a);
      for (; i + 4 <= count; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        vst1q_f32(x + i, vbslq_f32(vcltq_f32(v, zero), vmulq_f32(va, v), v));
      }
      for (; i < count; ++i) x[i] = x[i] < 0.0f ? a * x[i] : x[i];
      return 1;
    }
    default:
      return 0;
  }
}
