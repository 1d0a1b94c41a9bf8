/* pool.c (NEON): pooling rows, float32 (exact: the reference's operations in its order),
 * and int8 global pooling (integer, exact; the int8 rows are in pool_s8.c). Contracts in
 * src/cpu.h; references in ref/pool.c and ref/pool_s8.c. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "cpu.h"

/* v > t ? v : t per lane (NaN in v never wins; NaN in t stays), as the C comparison. */
static inline float32x4_t gt_pick(float32x4_t v, float32x4_t t) {
  return vbslq_f32(vcgtq_f32(v, t), v, t);
}

static inline float32x4_t fold(float32x4_t t, float32x4_t v, int op) {
  return op ? gt_pick(v, t) : vaddq_f32(t, v);
}

/* The first step across a window: a > b ? a : b (max), a + b (sum). */
static inline float32x4_t first(float32x4_t a, float32x4_t b, int op) {
  return op ? gt_pick(a, b) : vaddq_f32(a, b);
}

void ert_pool_vred_f32__neon(float *t, const float *x, ptrdiff_t rs, int32_t rows, int32_t n,
                             int op) {
  int32_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float32x4_t a = vld1q_f32(x + j), b = vld1q_f32(x + j + 4);
    for (int32_t r = 1; r < rows; ++r) {
      const float *p = x + r * rs + j;
      a = fold(a, vld1q_f32(p), op);
      b = fold(b, vld1q_f32(p + 4), op);
    }
    vst1q_f32(t + j, a);
    vst1q_f32(t + j + 4, b);
  }
  for (; j < n; ++j) {
    float a = x[j];
    for (int32_t r = 1; r < rows; ++r) {
      const float v = x[r * rs + j];
      a = op ? (v > a ? v : a) : a + v;
    }
    t[j] = a;
  }
}

int ert_pool_hred_f32__neon(float *y, const float *t, int32_t n, int32_t kw, int32_t sw, int op) {
  int32_t i = 0;
  if (kw == 2 && sw == 2) {
    for (; i + 4 <= n; i += 4) {
      const float32x4x2_t v = vld2q_f32(t + 2 * i);
      vst1q_f32(y + i, first(v.val[0], v.val[1], op));
    }
  } else if (kw == 3 && sw == 2) {
    /* c is the even lanes of the pair load two floats on: reads up to t[2i + 9] */
    for (; i + 5 <= n; i += 4) {
      const float32x4x2_t v = vld2q_f32(t + 2 * i);
      const float32x4_t c = vld2q_f32(t + 2 * i + 2).val[0];
      vst1q_f32(y + i, fold(first(v.val[0], v.val[1], op), c, op));
    }
  } else if (kw == 3 && sw == 1) {
    for (; i + 4 <= n; i += 4) {
      const float32x4_t a = vld1q_f32(t + i), b = vld1q_f32(t + i + 1), c = vld1q_f32(t + i + 2);
      vst1q_f32(y + i, fold(first(a, b, op), c, op));
    }
  } else {
    return 0;
  }
  for (; i < n; ++i) {
    const float *p = t + (ptrdiff_t)i * sw;
    float m = op ? (p[0] > p[1] ? p[0] : p[1]) : p[0] + p[1];
    if (kw == 3) m = op ? (p[2] > m ? p[2] : m) : m + p[2];
    y[i] = m;
  }
  return 1;
}

float ert_gpool_f32__neon(const float *x, size_t n, int op) {
  float32x4_t m = vdupq_n_f32(op ? -INFINITY : 0.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) m = fold(fold(m, vld1q_f32(x + i), op), vld1q_f32(x + i + 4), op);
  if (i + 4 <= n) {
    m = fold(m, vld1q_f32(x + i), op);
    i += 4;
  }
  float p[4];
  vst1q_f32(p, m);
  for (; i < n; ++i) p[0] = op ? (x[i] > p[0] ? x[i] : p[0]) : p[0] + x[i];
  if (!op) return (p[0] + p[1]) + (p[2] + p[3]);
  p[0] = p[1] > p[0] ? p[1] : p[0];
  p[2] = p[3] > p[2] ? p[3] : p[2];
  return p[2] > p[0] ? p[2] : p[0];
}

int32_t ert_gpool_s8__neon(const int8_t *x, size_t n, int is_max) {
  size_t i = 0;
  if (is_max) {
    int8x16_t m = vdupq_n_s8(-128);
    for (; i + 16 <= n; i += 16) m = vmaxq_s8(m, vld1q_s8(x + i));
    int8x8_t h = vmax_s8(vget_low_s8(m), vget_high_s8(m));
    h = vpmax_s8(h, h);
    h = vpmax_s8(h, h);
    h = vpmax_s8(h, h);
    int32_t r = vget_lane_s8(h, 0);
    for (; i < n; ++i) r = x[i] > r ? x[i] : r;
    return r;
  }
  int32x4_t acc = vdupq_n_s32(0);
  while (i + 16 <= n) {
    /* 64 steps of pairs: each int16 lane stays within 64 * 2 * 128 */
    int16x8_t s = vdupq_n_s16(0);
    for (int k = 0; k < 64 && i + 16 <= n; ++k, i += 16) s = vpadalq_s8(s, vld1q_s8(x + i));
    acc = vpadalq_s16(acc, s);
  }
  int32x2_t h = vadd_s32(vget_low_s32(acc), vget_high_s32(acc));
  int32_t r = vget_lane_s32(vpadd_s32(h, h), 0);
  for (; i < n; ++i) r += x[i];
  return r;
}
