/* ew_f32.c (NEON): float32 element-wise rows, contracts in src/cpu.h: binary_f32 (add,
 * sub, mul and, on aarch64, div, exact as IEEE operations; 32-bit NEON flushes
 * subnormals to zero) and softmax_row (the reference's exp formula with fused or
 * reassociated operations). */
#include <math.h>
#include <string.h>

#include "neon_f32.h"

/* Elements per chunk: the activation runs over each chunk while it is in L1. */
enum { EW_CHUNK = 512 };

/* o[i] = A op B for i < n; pa/pb advance by ia/ib floats per element (0 or 1: a scalar
 * operand is read from a buffer of 8 copies). */
#define BIN_LOOP(VOP, SOP)                                                          \
  do {                                                                              \
    size_t i = 0;                                                                   \
    for (; i + 8 <= n; i += 8) {                                                    \
      const float32x4_t x0 = vld1q_f32(pa + i * ia), x1 = vld1q_f32(pa + i * ia + 4 * ia); \
      const float32x4_t y0 = vld1q_f32(pb + i * ib), y1 = vld1q_f32(pb + i * ib + 4 * ib); \
      vst1q_f32(o + i, VOP(x0, y0));                                                \
      vst1q_f32(o + i + 4, VOP(x1, y1));                                            \
    }                                                                               \
    for (; i < n; ++i) o[i] = pa[i * ia] SOP pb[i * ib];                            \
  } while (0)

int ert_binary_f32__neon(int op, float *o, const float *a, const float *b, size_t n, int sa, int sb,
                         const ert_act_params *act) {
  if (act != NULL && act->kind == ERT_ACT_NONE) act = NULL;
  if (act != NULL && act->kind != ERT_ACT_RELU && act->kind != ERT_ACT_CLIP &&
      act->kind != ERT_ACT_HARD_SIGMOID && act->kind != ERT_ACT_HARD_SWISH &&
      act->kind != ERT_ACT_LEAKY_RELU)
    return 0;
#if defined(__aarch64__)
  if (op < ERT_BIN_ADD || op > ERT_BIN_DIV) return 0;
#else
  if (op < ERT_BIN_ADD || op > ERT_BIN_MUL) return 0; /* no vector division */
#endif
  float abuf[8], bbuf[8];
  const float *pa = a, *pb = b;
  const size_t ia = sa ? 1 : 0, ib = sb ? 1 : 0;
  if (!sa) {
    for (int t = 0; t < 8; ++t) abuf[t] = a[0];
    pa = abuf;
  }
  if (!sb) {
    for (int t = 0; t < 8; ++t) bbuf[t] = b[0];
    pb = bbuf;
  }
  const size_t total = n;
  for (size_t done = 0; done < total; done += EW_CHUNK) {
    n = total - done < EW_CHUNK ? total - done : EW_CHUNK;
    switch (op) {
      case ERT_BIN_ADD: BIN_LOOP(vaddq_f32, +); break;
      case ERT_BIN_SUB: BIN_LOOP(vsubq_f32, -); break;
      case ERT_BIN_MUL: BIN_LOOP(vmulq_f32, *); break;
#if defined(__aarch64__)
      default: BIN_LOOP(vdivq_f32, /); break;
#else
      default: break;
#endif
    }
    if (act != NULL) ert_act_rows_f32__neon(act, o, 0, 1, n);
    o += n;
    pa += n * ia;
    pb += n * ib;
  }
  return 1;
}

/* ---- softmax ------------------------------------------------------------------------ */

/* exp of x - max (<= 0, or NaN) is ert_v_exp_neg (neon_f32.h), which follows the
 * reference's exp_neg (ref/softmax.c). */
void ert_softmax_row_f32__neon(const float *x, float *y, size_t n) {
  /* the last n % 4 values go through a padded vector: -inf gives exp 0 */
  const size_t body = n & ~(size_t)3, rest = n - body;
  float tail[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  if (rest) memcpy(tail, x + body, rest * sizeof(float));
  float32x4_t m = vdupq_n_f32(x[0]);
  for (size_t i = 0; i < body; i += 4) m = vmaxq_f32(m, vld1q_f32(x + i));
  if (rest) m = vmaxq_f32(m, vld1q_f32(tail));
#if defined(__aarch64__)
  const float mx = vmaxvq_f32(m);
#else
  float32x2_t m2 = vpmax_f32(vget_low_f32(m), vget_high_f32(m));
  m2 = vpmax_f32(m2, m2);
  const float mx = vget_lane_f32(m2, 0);
#endif
  const float32x4_t vm = vdupq_n_f32(mx);
  float32x4_t s0 = vdupq_n_f32(0.0f);
  for (size_t i = 0; i < body; i += 4) {
    const float32x4_t e = ert_v_exp_neg(vsubq_f32(vld1q_f32(x + i), vm));
    vst1q_f32(y + i, e);
    s0 = vaddq_f32(s0, e);
  }
  float32x4_t et = vdupq_n_f32(0.0f);
  if (rest) {
    et = ert_v_exp_neg(vsubq_f32(vld1q_f32(tail), vm));
    s0 = vaddq_f32(s0, et);
  }
  const float sum = (vgetq_lane_f32(s0, 0) + vgetq_lane_f32(s0, 1)) +
                    (vgetq_lane_f32(s0, 2) + vgetq_lane_f32(s0, 3));
  const float inv = 1.0f / sum;
  const float32x4_t vinv = vdupq_n_f32(inv);
  for (size_t i = 0; i < body; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), vinv));
  if (rest) {
    vst1q_f32(tail, vmulq_f32(et, vinv));
    memcpy(y + body, tail, rest * sizeof(float));
  }
}
