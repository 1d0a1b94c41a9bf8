/* pool.c (NEON): pooling rows, float32 (exact: the reference's operations in its order)
 * and int8 (integer, exact). Contracts in src/cpu.h; references in ref/pool.c and
 * ref/pool_s8.c. */
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

/* ---- int8 KxK rows: column reduction over the rows into tmp, then across the window ---- */

enum { S8_OUT = 64, S8_TMP = 2 * S8_OUT + 48 };

/* t[j] = op over r < rows of x[r*rs + j], j < n (n <= S8_TMP); max in int8, sum in int16. */
static void s8_cols_max(int8_t *t, const int8_t *x, ptrdiff_t rs, int32_t rows, int32_t n) {
  int32_t j = 0;
  for (;;) {
    if (j + 16 > n) {
      if (n < 16 || j >= n) break;
      j = n - 16; /* the last vector ends at n */
    }
    int8x16_t m = vld1q_s8(x + j);
    for (int32_t r = 1; r < rows; ++r) m = vmaxq_s8(m, vld1q_s8(x + r * rs + j));
    vst1q_s8(t + j, m);
    j += 16;
  }
  for (; j < n; ++j) {
    int32_t m = x[j];
    for (int32_t r = 1; r < rows; ++r) m = x[r * rs + j] > m ? x[r * rs + j] : m;
    t[j] = (int8_t)m;
  }
}

static void s8_cols_sum(int16_t *t, const int8_t *x, ptrdiff_t rs, int32_t rows, int32_t n) {
  int32_t j = 0;
  for (;;) {
    if (j + 8 > n) {
      if (n < 8 || j >= n) break;
      j = n - 8;
    }
    int16x8_t s = vmovl_s8(vld1_s8(x + j));
    for (int32_t r = 1; r < rows; ++r) s = vaddw_s8(s, vld1_s8(x + r * rs + j));
    vst1q_s16(t + j, s);
    j += 8;
  }
  for (; j < n; ++j) {
    int32_t s = x[j];
    for (int32_t r = 1; r < rows; ++r) s += x[r * rs + j];
    t[j] = (int16_t)s;
  }
}

int ert_pool_s8_row__neon(int8_t *y, const int8_t *x, ptrdiff_t rs, int32_t rows, int32_t n,
                          int32_t kw, int32_t sw, int32_t zp, int32_t count, int is_avg) {
  const int shape = kw == 2 && sw == 2 ? 0 : kw == 3 && sw == 2 ? 1 : kw == 3 && sw == 1 ? 2 : -1;
  /* avg: |sum (v - zp)| <= 255 * count < 2^14 and the rounded numerator stays below 2^14 */
  if (shape < 0 || (is_avg && (count < rows * kw || count > 64))) return 0;
  /* floor(N / count) = (N * mul) >> sh for N < 2^14 (sh = 14 + ceil(log2 count), mul =
   * ceil(2^sh / count) <= 2^15): the error N * (mul * count - 2^sh) / 2^sh stays below 1. */
  int32_t lg = 0;
  while ((1 << lg) < count) ++lg;
  const int32_t sh = 14 + lg;
  const uint16_t mul = (uint16_t)(((1u << sh) + (uint32_t)count - 1) / (uint32_t)count);
  const int16x8_t sub = vdupq_n_s16((int16_t)(rows * kw * zp)), vzp = vdupq_n_s16((int16_t)zp);
  const uint16x8_t half = vdupq_n_u16((uint16_t)(count / 2));
  const int32x4_t vsh = vdupq_n_s32(-sh);
  int8_t tb[S8_TMP + 32];
  int16_t ts[S8_TMP + 32];
  memset(tb, 0, sizeof tb);
  memset(ts, 0, sizeof ts);
  for (int32_t o0 = 0; o0 < n; o0 += S8_OUT) {
    const int32_t no = n - o0 < S8_OUT ? n - o0 : S8_OUT;
    const int32_t span = (no - 1) * sw + kw;
    const int8_t *xs = x + (ptrdiff_t)o0 * sw;
    if (is_avg)
      s8_cols_sum(ts, xs, rs, rows, span);
    else
      s8_cols_max(tb, xs, rs, rows, span);
    /* 8 outputs per step from tmp (zero past span: only outputs >= no read it) */
    for (int32_t i = 0; i < no; i += 8) {
      int8x8_t out;
      if (is_avg) {
        int16x8_t s;
        if (shape == 0) {
          const int16x8x2_t v = vld2q_s16(ts + 2 * i);
          s = vaddq_s16(v.val[0], v.val[1]);
        } else if (shape == 1) {
          const int16x8x2_t v = vld2q_s16(ts + 2 * i);
          s = vaddq_s16(vaddq_s16(v.val[0], v.val[1]), vld2q_s16(ts + 2 * i + 2).val[0]);
        } else {
          s = vaddq_s16(vaddq_s16(vld1q_s16(ts + i), vld1q_s16(ts + i + 1)), vld1q_s16(ts + i + 2));
        }
        s = vsubq_s16(s, sub); /* sum (v - zp), |s| <= 255 * 64 */
        const uint16x8_t num = vaddq_u16(vreinterpretq_u16_s16(vabsq_s16(s)), half);
        const uint32x4_t lo = vshlq_u32(vmull_n_u16(vget_low_u16(num), mul), vsh);
        const uint32x4_t hi = vshlq_u32(vmull_n_u16(vget_high_u16(num), mul), vsh);
        const int16x8_t q = vreinterpretq_s16_u16(vcombine_u16(vmovn_u32(lo), vmovn_u32(hi)));
        const int16x8_t sq = vbslq_s16(vcltq_s16(s, vdupq_n_s16(0)), vnegq_s16(q), q);
        out = vqmovn_s16(vaddq_s16(sq, vzp));
      } else {
        if (shape == 0) {
          const int8x8x2_t v = vld2_s8(tb + 2 * i);
          out = vmax_s8(v.val[0], v.val[1]);
        } else if (shape == 1) {
          const int8x8x2_t v = vld2_s8(tb + 2 * i);
          out = vmax_s8(vmax_s8(v.val[0], v.val[1]), vld2_s8(tb + 2 * i + 2).val[0]);
        } else {
          out = vmax_s8(vmax_s8(vld1_s8(tb + i), vld1_s8(tb + i + 1)), vld1_s8(tb + i + 2));
        }
      }
      if (i + 8 <= no) {
        vst1_s8(y + o0 + i, out);
      } else {
        int8_t b[8];
        vst1_s8(b, out);
        memcpy(y + o0 + i, b, (size_t)(no - i));
      }
    }
  }
  return 1;
}
