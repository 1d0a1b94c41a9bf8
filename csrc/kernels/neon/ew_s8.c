/* ew_s8.c (NEON): int8 element-wise rows, contracts in src/cpu.h (binary_s8, lut_s8).
 * Integer arithmetic: the results are the reference's (ref/binary_s8.c, ref/lut.c)
 * byte for byte.
 *
 * binary_s8 computes v = (a - a_zp) ma + (b - b_zp) mb (add) or (a - a_zp)(b - b_zp) m
 * (mul) exactly in int32 lanes (|v| < 2^25 resp. 2^30: 15- and 14-bit multipliers, so
 * no lane wraps), then SRSHL by -shift, which the architecture defines as
 * (v + 2^(shift-1)) >> shift on unbounded integers, i.e. the reference's
 * floor((v + 2^(shift-1)) / 2^shift). The saturating narrowings to int16 and int8 and
 * the saturating add of y_zp in int16 are monotonic and only move values that are
 * beyond [-128, 127] (so beyond [lo, hi]) while keeping them on the same side, so the
 * final clamp to [lo, hi] gives clamp(y_zp + r, lo, hi) exactly. */
#include <arm_neon.h>
#include <stddef.h>

#include "../ref/quant_s8.h"
#include "cpu.h"

/* The reference's element (the tail). */
static int8_t bin1(int op, const int32_t *p, int32_t a, int32_t b) {
  const int64_t v = op == 0 ? (int64_t)(a - p[0]) * p[3] + (int64_t)(b - p[1]) * p[4]
                            : (int64_t)(a - p[0]) * (b - p[1]) * p[3];
  return ert_clamp_s8(p[2] + ert_floor_shift(v + ((int64_t)1 << (p[5] - 1)), p[5]), p[6], p[7]);
}

/* y = clamp(y_zp + (v >> shift, rounded), lo, hi) for 8 lanes v0:v1. */
static inline int8x8_t finish8(int32x4_t v0, int32x4_t v1, int32x4_t nsh, int16x8_t yzp,
                               int8x8_t lo, int8x8_t hi) {
  const int16x8_t h = vcombine_s16(vqmovn_s32(vrshlq_s32(v0, nsh)), vqmovn_s32(vrshlq_s32(v1, nsh)));
  return vmin_s8(vmax_s8(vqmovn_s16(vqaddq_s16(h, yzp)), lo), hi);
}

/* 8 lanes of v from the widened operands da, db (int16). */
static inline __attribute__((always_inline)) void value8(int op, int16x8_t da, int16x8_t db,
                                                         int16_t ma, int16_t mb, int32x4_t m,
                                                         int32x4_t *v0, int32x4_t *v1) {
  if (op == 0) {
    *v0 = vmlal_n_s16(vmull_n_s16(vget_low_s16(da), ma), vget_low_s16(db), mb);
    *v1 = vmlal_n_s16(vmull_n_s16(vget_high_s16(da), ma), vget_high_s16(db), mb);
  } else {
    *v0 = vmulq_s32(vmull_s16(vget_low_s16(da), vget_low_s16(db)), m);
    *v1 = vmulq_s32(vmull_s16(vget_high_s16(da), vget_high_s16(db)), m);
  }
}

static inline __attribute__((always_inline)) void binary_rows(int op, const int32_t *p,
                                                              const int8_t *pa, const int8_t *pb,
                                                              int8_t *y, size_t n, size_t ia,
                                                              size_t ib, const int8_t *a,
                                                              const int8_t *b) {
  const int8x8_t azp = vdup_n_s8((int8_t)p[0]), bzp = vdup_n_s8((int8_t)p[1]);
  const int16x8_t yzp = vdupq_n_s16((int16_t)p[2]);
  const int16_t ma = (int16_t)p[3], mb = (int16_t)p[4];
  const int32x4_t m = vdupq_n_s32(p[3]), nsh = vdupq_n_s32(-p[5]);
  size_t i = 0;
#if defined(__aarch64__)
  /* the same operations on 16 lanes with the _high forms (no lane moves) */
  const int8x16_t azq = vdupq_n_s8((int8_t)p[0]), bzq = vdupq_n_s8((int8_t)p[1]);
  const int8x16_t loq = vdupq_n_s8((int8_t)p[6]), hiq = vdupq_n_s8((int8_t)p[7]);
  for (; i + 16 <= n; i += 16) {
    const int8x16_t xa = vld1q_s8(pa + i * ia), xb = vld1q_s8(pb + i * ib);
    const int16x8_t al = vsubl_s8(vget_low_s8(xa), azp), ah = vsubl_high_s8(xa, azq);
    const int16x8_t bl = vsubl_s8(vget_low_s8(xb), bzp), bh = vsubl_high_s8(xb, bzq);
    int32x4_t v0, v1, v2, v3;
    if (op == 0) {
      v0 = vmlal_n_s16(vmull_n_s16(vget_low_s16(al), ma), vget_low_s16(bl), mb);
      v1 = vmlal_high_n_s16(vmull_high_n_s16(al, ma), bl, mb);
      v2 = vmlal_n_s16(vmull_n_s16(vget_low_s16(ah), ma), vget_low_s16(bh), mb);
      v3 = vmlal_high_n_s16(vmull_high_n_s16(ah, ma), bh, mb);
    } else {
      v0 = vmulq_s32(vmull_s16(vget_low_s16(al), vget_low_s16(bl)), m);
      v1 = vmulq_s32(vmull_high_s16(al, bl), m);
      v2 = vmulq_s32(vmull_s16(vget_low_s16(ah), vget_low_s16(bh)), m);
      v3 = vmulq_s32(vmull_high_s16(ah, bh), m);
    }
    int16x8_t h0 = vqmovn_high_s32(vqmovn_s32(vrshlq_s32(v0, nsh)), vrshlq_s32(v1, nsh));
    int16x8_t h1 = vqmovn_high_s32(vqmovn_s32(vrshlq_s32(v2, nsh)), vrshlq_s32(v3, nsh));
    h0 = vqaddq_s16(h0, yzp), h1 = vqaddq_s16(h1, yzp);
    const int8x16_t r = vqmovn_high_s16(vqmovn_s16(h0), h1);
    vst1q_s8(y + i, vminq_s8(vmaxq_s8(r, loq), hiq));
  }
#else /* (aarch64: the last 15 or fewer one at a time) */
  const int8x8_t lo = vdup_n_s8((int8_t)p[6]), hi = vdup_n_s8((int8_t)p[7]);
  for (; i + 16 <= n; i += 16) {
    const int8x16_t xa = vld1q_s8(pa + i * ia), xb = vld1q_s8(pb + i * ib);
    int32x4_t v0, v1, v2, v3;
    value8(op, vsubl_s8(vget_low_s8(xa), azp), vsubl_s8(vget_low_s8(xb), bzp), ma, mb, m, &v0, &v1);
    value8(op, vsubl_s8(vget_high_s8(xa), azp), vsubl_s8(vget_high_s8(xb), bzp), ma, mb, m, &v2,
           &v3);
    vst1q_s8(y + i, vcombine_s8(finish8(v0, v1, nsh, yzp, lo, hi), finish8(v2, v3, nsh, yzp, lo, hi)));
  }
  if (i + 8 <= n) {
    int32x4_t v0, v1;
    value8(op, vsubl_s8(vld1_s8(pa + i * ia), azp), vsubl_s8(vld1_s8(pb + i * ib), bzp), ma, mb, m,
           &v0, &v1);
    vst1_s8(y + i, finish8(v0, v1, nsh, yzp, lo, hi));
    i += 8;
  }
#endif
  for (; i < n; ++i) y[i] = bin1(op, p, a[i * ia], b[i * ib]);
}

void ert_binary_s8__neon(int op, const int32_t *p, const int8_t *a, const int8_t *b, int8_t *y,
                         size_t n, int sa, int sb) {
  int8_t abuf[16], bbuf[16]; /* a broadcast operand: 16 copies, read at stride 0 */
  const int8_t *pa = a, *pb = b;
  if (!sa) {
    vst1q_s8(abuf, vdupq_n_s8(a[0]));
    pa = abuf;
  }
  if (!sb) {
    vst1q_s8(bbuf, vdupq_n_s8(b[0]));
    pb = bbuf;
  }
  const size_t ia = sa ? 1 : 0, ib = sb ? 1 : 0;
  if (op == 0)
    binary_rows(0, p, pa, pb, y, n, ia, ib, a, b);
  else
    binary_rows(1, p, pa, pb, y, n, ia, ib, a, b);
}

#if defined(__aarch64__)
/* y[i] = t[x[i] + 128]: the index x + 128 is x ^ 0x80 as a byte; tbl looks it up in
 * entries 0..63 (0 past them), then tbx in 64..127, 128..191 and 192..255 after
 * subtracting 64 each time (indices of the earlier quarters wrap past 191 and are left
 * alone). 32 bytes a step, the table in v0-v15: assembly, so that the table stays in
 * registers (intrinsics reloaded it every step). */
void ert_lut_s8__neon(const int8_t *t, const int8_t *x, int8_t *y, size_t n) {
  size_t i = n & ~(size_t)31;
  if (i != 0) {
    const int8_t *pt = t, *px = x;
    int8_t *py = y;
    size_t cnt = i / 32;
    __asm__ volatile(
        "ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%[t]], #64\n\t"
        "ld1 {v4.16b, v5.16b, v6.16b, v7.16b}, [%[t]], #64\n\t"
        "ld1 {v8.16b, v9.16b, v10.16b, v11.16b}, [%[t]], #64\n\t"
        "ld1 {v12.16b, v13.16b, v14.16b, v15.16b}, [%[t]]\n\t"
        "movi v16.16b, #0x80\n\t"
        "movi v17.16b, #0x40\n"
        "1:\n\t"
        "ld1 {v18.16b, v19.16b}, [%[x]], #32\n\t"
        "eor v18.16b, v18.16b, v16.16b\n\t"
        "eor v19.16b, v19.16b, v16.16b\n\t"
        "tbl v20.16b, {v0.16b, v1.16b, v2.16b, v3.16b}, v18.16b\n\t"
        "tbl v21.16b, {v0.16b, v1.16b, v2.16b, v3.16b}, v19.16b\n\t"
        "sub v18.16b, v18.16b, v17.16b\n\t"
        "sub v19.16b, v19.16b, v17.16b\n\t"
        "tbx v20.16b, {v4.16b, v5.16b, v6.16b, v7.16b}, v18.16b\n\t"
        "tbx v21.16b, {v4.16b, v5.16b, v6.16b, v7.16b}, v19.16b\n\t"
        "sub v18.16b, v18.16b, v17.16b\n\t"
        "sub v19.16b, v19.16b, v17.16b\n\t"
        "tbx v20.16b, {v8.16b, v9.16b, v10.16b, v11.16b}, v18.16b\n\t"
        "tbx v21.16b, {v8.16b, v9.16b, v10.16b, v11.16b}, v19.16b\n\t"
        "sub v18.16b, v18.16b, v17.16b\n\t"
        "sub v19.16b, v19.16b, v17.16b\n\t"
        "tbx v20.16b, {v12.16b, v13.16b, v14.16b, v15.16b}, v18.16b\n\t"
        "tbx v21.16b, {v12.16b, v13.16b, v14.16b, v15.16b}, v19.16b\n\t"
        "st1 {v20.16b, v21.16b}, [%[y]], #32\n\t"
        "subs %[cnt], %[cnt], #1\n\t"
        "b.ne 1b\n"
        : [t] "+r"(pt), [x] "+r"(px), [y] "+r"(py), [cnt] "+r"(cnt)
        :
        : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13",
          "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "memory", "cc");
  }
  for (; i < n; ++i) y[i] = t[x[i] + 128];
}
#endif

/* dequantize_s8: exact int8 -> float conversion, then the subtraction and the
 * multiplication as two separate IEEE operations, as the reference does. */
void ert_dequantize_s8__neon(const int8_t *x, float *y, size_t n, float s, float z) {
  const float32x4_t vs = vdupq_n_f32(s), vz = vdupq_n_f32(z);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int16x8_t h = vmovl_s8(vld1_s8(x + i));
    const float32x4_t a = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
    const float32x4_t b = vcvtq_f32_s32(vmovl_s16(vget_high_s16(h)));
    vst1q_f32(y + i, vmulq_f32(vsubq_f32(a, vz), vs));
    vst1q_f32(y + i + 4, vmulq_f32(vsubq_f32(b, vz), vs));
  }
  for (; i < n; ++i) y[i] = ((float)x[i] - z) * s;
}

#if defined(__aarch64__)
/* quantize_one of ref/quantize.c, eight lanes at a time, for z an integer in [-128, 127]
 * (the int8 zero point): the same IEEE division, then FCVTNS rounds to nearest even as
 * the scalar 1.5 * 2^23 steps do (NaN to 0, so z after adding it; values beyond int32
 * saturate); the saturating narrowings to int16, the saturating add of z and the
 * narrowing to int8 are monotonic and exact on values that end inside [-128, 127], so
 * they give the scalar clamps' result. */
void ert_quantize_s8__neon(const float *x, int8_t *y, size_t n, float s, float z) {
  const float32x4_t vs = vdupq_n_f32(s);
  const int16x8_t vz = vdupq_n_s16((int16_t)z);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int32x4_t a = vcvtnq_s32_f32(vdivq_f32(vld1q_f32(x + i), vs));
    const int32x4_t b = vcvtnq_s32_f32(vdivq_f32(vld1q_f32(x + i + 4), vs));
    vst1_s8(y + i, vqmovn_s16(vqaddq_s16(vqmovn_high_s32(vqmovn_s32(a), b), vz)));
  }
  for (; i < n; ++i) { /* the same steps on one value (|r| > 256 ends beyond int8 too) */
    int32_t r = vcvtns_s32_f32(x[i] / s);
    r = (r < -256 ? -256 : r > 256 ? 256 : r) + (int32_t)z;
    y[i] = (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
  }
}
#endif
