/* act.c (NEON): the fused activations of ert_act_apply (src/common.c) but gelu.
 * Clamp-like kinds match the reference's comparisons, NaN included: relu maps NaN to 0
 * (fmaxnm on aarch64, a compare-and-select on 32-bit ARM), the clamps keep NaN (fmax/fmin
 * return NaN for a NaN operand); zeros may differ in sign only. hard_swish multiplies by
 * 1/6 where the reference divides by 6 (at most one rounding apart). sigmoid, tanh and
 * silu (x sigmoid(x)) use ert_v_sigmoid / ert_v_tanh (neon_f32.h): within 5e-7 absolute
 * (silu: 5e-7 |x|) of the exact functions, where the reference calls expf/tanhf; NaN
 * stays NaN and +-inf give the reference's limits. gelu returns 0: the caller runs the
 * reference code. */
#include <string.h>

#include "neon_f32.h"

/* max(x, lo) then min(., hi): NaN stays NaN, as x < lo ? lo : x then v > hi ? hi : v */
static inline float32x4_t v_clamp(float32x4_t x, float32x4_t lo, float32x4_t hi) {
  return vminq_f32(vmaxq_f32(x, lo), hi);
}

static inline float clamp1(float x, float lo, float hi) {
  const float v = x < lo ? lo : x;
  return v > hi ? hi : v;
}

/* Rows of n floats: VEXPR(v) on eight at a time (two vectors per step), SEXPR(s) on
 * the rest. */
#define ACT_ROWS(VEXPR, SEXPR)                                       \
  for (int32_t r = 0; r < rows; ++r, x += ld) {                      \
    size_t i = 0;                                                    \
    for (; i + 8 <= n; i += 8) {                                     \
      const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4); \
      vst1q_f32(x + i, VEXPR(v0));                                   \
      vst1q_f32(x + i + 4, VEXPR(v1));                               \
    }                                                                \
    for (; i < n; ++i) {                                             \
      const float s = x[i];                                          \
      x[i] = (SEXPR);                                                \
    }                                                                \
  }

/* sigmoid, tanh or silu of four values (the out-of-line copies of rnn_f32.c). */
static inline float32x4_t exp_act(int32_t kind, float32x4_t v) {
  if (kind == ERT_ACT_TANH) return ert_tanh4_f32__neon(v);
  const float32x4_t s = ert_sigmoid4_f32__neon(v);
  return kind == ERT_ACT_SILU ? vmulq_f32(v, s) : s;
}

/* Rows of n floats through exp_act, the last n % 4 of a row through a padded vector
 * (out of line: keeps the clamp-like kinds of the tile epilogues free of its frame). */
static __attribute__((noinline)) void exp_act_rows(int32_t kind, float *x, ptrdiff_t ld,
                                                  int32_t rows, size_t n) {
  for (int32_t r = 0; r < rows; ++r, x += ld) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, exp_act(kind, vld1q_f32(x + i)));
    if (i < n) {
      float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      memcpy(t, x + i, (n - i) * sizeof(float));
      vst1q_f32(t, exp_act(kind, vld1q_f32(t)));
      memcpy(x + i, t, (n - i) * sizeof(float));
    }
  }
}

int ert_act_rows_f32__neon(const ert_act_params *act, float *x, ptrdiff_t ld, int32_t rows,
                           size_t n) {
  const float a = act->a, b = act->b;
  const float32x4_t zero = vdupq_n_f32(0.0f), one = vdupq_n_f32(1.0f);
  const float32x4_t va = vdupq_n_f32(a), vb = vdupq_n_f32(b);
  switch (act->kind) {
    case ERT_ACT_RELU:
#define V(v) ert_v_relu(v)
      ACT_ROWS(V, s > 0.0f ? s : 0.0f)
#undef V
      return 1;
    case ERT_ACT_CLIP:
#define V(v) v_clamp((v), va, vb)
      ACT_ROWS(V, clamp1(s, a, b))
#undef V
      return 1;
    case ERT_ACT_HARD_SIGMOID:
#define V(v) v_clamp(ERT_VMLA(vb, va, (v)), zero, one)
      ACT_ROWS(V, clamp1(a * s + b, 0.0f, 1.0f))
#undef V
      return 1;
    case ERT_ACT_HARD_SWISH:
#define V(v) ert_v_hard_swish(v)
      ACT_ROWS(V, s * clamp1(s / 6.0f + 0.5f, 0.0f, 1.0f))
#undef V
      return 1;
    case ERT_ACT_LEAKY_RELU:
#define V(v) vbslq_f32(vcltq_f32((v), zero), vmulq_f32(va, (v)), (v))
      ACT_ROWS(V, s < 0.0f ? a * s : s)
#undef V
      return 1;
    case ERT_ACT_SIGMOID:
    case ERT_ACT_TANH:
    case ERT_ACT_SILU:
      exp_act_rows(act->kind, x, ld, rows, n);
      return 1;
    default:
      return 0;
  }
}

int ert_act_apply_f32__neon(const ert_act_params *act, float *x, size_t count) {
  return ert_act_rows_f32__neon(act, x, 0, 1, count);
}
