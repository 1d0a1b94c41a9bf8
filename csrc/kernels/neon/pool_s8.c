/* pool_s8.c (NEON): int8 KxK pooling rows (integer, exact), the contract in src/cpu.h and
 * the reference in ref/pool_s8.c. Compiled for size (csrc/Makefile): under 1 % of the
 * benchmark models' instructions. */
#include <arm_neon.h>
#include <string.h>

#include "cpu.h"

/* ---- int8 KxK rows: column reduction over the rows into tmp, then across the window ---- */

enum { S8_OUT = 64, S8_TMP = 2 * S8_OUT + 48 };

/* t[j] = op over r < rows of x[r*rs + j], j < n (n <= S8_TMP); max in int8, sum in int16;
 * 8 columns a step (the last step ending at n), so that the rows of small maps (8 to 15
 * input columns) take the vector loop too. */
static void s8_cols_max(int8_t *t, const int8_t *x, ptrdiff_t rs, int32_t rows, int32_t n) {
  int32_t j = 0;
  for (;;) {
    if (j + 8 > n) {
      if (n < 8 || j >= n) break;
      j = n - 8; /* the last vector ends at n */
    }
    int8x8_t m = vld1_s8(x + j);
    for (int32_t r = 1; r < rows; ++r) m = vmax_s8(m, vld1_s8(x + r * rs + j));
    vst1_s8(t + j, m);
    j += 8;
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
  for (int32_t o0 = 0; o0 < n; o0 += S8_OUT) {
    const int32_t no = n - o0 < S8_OUT ? n - o0 : S8_OUT;
    const int32_t span = (no - 1) * sw + kw;
    const int8_t *xs = x + (ptrdiff_t)o0 * sw;
    /* 8 outputs per step from tmp, whose last step reads at most 15 elements past span
       (shape 1: up to 2 no + 16): those are zeroed (only outputs >= no read them). Only
       those: a row of a small map is a few outputs, where clearing the whole buffers
       cost more than the row. */
    if (is_avg) {
      s8_cols_sum(ts, xs, rs, rows, span);
      memset(ts + span, 0, 16 * sizeof(int16_t));
    } else {
      s8_cols_max(tb, xs, rs, rows, span);
      memset(tb + span, 0, 16);
    }
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
