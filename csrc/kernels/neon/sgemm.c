/* sgemm.c (NEON): the 4x16 and 6x16 SGEMM micro-kernels, contracts in src/cpu.h
 * (sgemm_rows, sgemm_rows6; the reference is micro_rows and store_tile in ref/sgemm.c): A
 * read from four (six) row pointers, B from a packed panel (the aarch64 6x16 also in place
 * over a convolution's window), the result stored into C with bias, alpha and the
 * clamp-like activations. */
#include <stddef.h>
#include <string.h>

#include "neon_f32.h"

/* C row of 4 vectors at p: alpha*v + (init ? bias : p) */
#define PUT(p, v, base_of) vst1q_f32((p), ERT_VMLA(base_of(p), (v), alpha))

#if defined(__aarch64__)

/* aarch64: the accumulators are scaled by alpha first (when it is not 1), so a C row of 4
 * vectors at p is v + (init ? bias : p), one add (alpha*v + base rounds once more than a
 * fused multiply-add, within the kernels' tolerance; with alpha 1 the same values). */
#define PUTA(p, v, base_of) vst1q_f32((p), vaddq_f32(base_of(p), (v)))
#define SCALE4(x0, x1, x2, x3, a) \
  x0 = vmulq_f32(x0, a), x1 = vmulq_f32(x1, a), x2 = vmulq_f32(x2, a), x3 = vmulq_f32(x3, a);

/* 16 accumulators stay in v16..v31 (the caller-saved registers the assembly loop names),
 * A in v0..v3, B in v4..v7. One step of four k loads four A values per row, and per k
 * the four B quarters with two paired loads; row i, quarter q accumulates B quarter q
 * times lane k of row i's A vector. */
#define FMLA_ROW(C0, C1, C2, C3, A, L)                                                      \
  "fmla " C0 ".4s, v4.4s, " A ".s[" L "]\n\tfmla " C1 ".4s, v5.4s, " A ".s[" L "]\n\t"    \
  "fmla " C2 ".4s, v6.4s, " A ".s[" L "]\n\tfmla " C3 ".4s, v7.4s, " A ".s[" L "]\n\t"
#define FMLA_K(L)                                                                           \
  "ldp q4, q5, [%[b]], #32\n\tldp q6, q7, [%[b]], #32\n\t"                                 \
  FMLA_ROW("v16", "v17", "v18", "v19", "v0", L) FMLA_ROW("v20", "v21", "v22", "v23", "v1", L) \
  FMLA_ROW("v24", "v25", "v26", "v27", "v2", L) FMLA_ROW("v28", "v29", "v30", "v31", "v3", L)

void ert_sgemm_rows_f32__neon(int32_t kc, const float *const *rows, const float *b, float *c,
                              const ert_sgemm_store *st) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
  uint64_t n4 = (uint64_t)kc >> 2, n1 = (uint64_t)kc & 3u;
  /* zeroed by the assembly (outputs only: in-out operands would exceed GCC's limit) */
  register float32x4_t c00 __asm__("v16"), c01 __asm__("v17"), c02 __asm__("v18");
  register float32x4_t c03 __asm__("v19"), c10 __asm__("v20"), c11 __asm__("v21");
  register float32x4_t c12 __asm__("v22"), c13 __asm__("v23"), c20 __asm__("v24");
  register float32x4_t c21 __asm__("v25"), c22 __asm__("v26"), c23 __asm__("v27");
  register float32x4_t c30 __asm__("v28"), c31 __asm__("v29"), c32 __asm__("v30");
  register float32x4_t c33 __asm__("v31");
  __asm__(
      "movi v16.4s, #0\n\tmovi v17.4s, #0\n\tmovi v18.4s, #0\n\tmovi v19.4s, #0\n\t"
      "movi v20.4s, #0\n\tmovi v21.4s, #0\n\tmovi v22.4s, #0\n\tmovi v23.4s, #0\n\t"
      "movi v24.4s, #0\n\tmovi v25.4s, #0\n\tmovi v26.4s, #0\n\tmovi v27.4s, #0\n\t"
      "movi v28.4s, #0\n\tmovi v29.4s, #0\n\tmovi v30.4s, #0\n\tmovi v31.4s, #0\n\t"
      "cbz %[n4], 2f\n"
      "1:\n\t"
      "ldr q0, [%[r0]], #16\n\tldr q1, [%[r1]], #16\n\t"
      "ldr q2, [%[r2]], #16\n\tldr q3, [%[r3]], #16\n\t"
      FMLA_K("0") FMLA_K("1") FMLA_K("2") FMLA_K("3")
      "subs %[n4], %[n4], #1\n\t"
      "b.ne 1b\n"
      "2:\n\t"
      "cbz %[n1], 4f\n"
      "3:\n\t"
      "ldr s0, [%[r0]], #4\n\tldr s1, [%[r1]], #4\n\t"
      "ldr s2, [%[r2]], #4\n\tldr s3, [%[r3]], #4\n\t"
      FMLA_K("0")
      "subs %[n1], %[n1], #1\n\t"
      "b.ne 3b\n"
      "4:\n"
      : "=&w"(c00), "=&w"(c01), "=&w"(c02), "=&w"(c03), "=&w"(c10), "=&w"(c11), "=&w"(c12),
        "=&w"(c13), "=&w"(c20), "=&w"(c21), "=&w"(c22), "=&w"(c23), "=&w"(c30), "=&w"(c31),
        "=&w"(c32), "=&w"(c33), [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [r3] "+r"(r3),
        [b] "+r"(b), [n4] "+r"(n4), [n1] "+r"(n1)
      :
      : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "cc", "memory");
  if (st->alpha != 1.0f) { /* alpha*acc first, so the stores add (no copy of the base) */
    const float32x4_t a = vdupq_n_f32(st->alpha);
    SCALE4(c00, c01, c02, c03, a) SCALE4(c10, c11, c12, c13, a)
    SCALE4(c20, c21, c22, c23, a) SCALE4(c30, c31, c32, c33, a)
  }
  const ptrdiff_t ldc = st->ldc;
  float *p0 = c, *p1 = c + ldc, *p2 = c + 2 * ldc, *p3 = c + 3 * ldc;
  if (st->init) {
    const float *bias = st->bias;
    const float32x4_t b0 = vdupq_n_f32(bias ? bias[0] : 0.0f), b1 = vdupq_n_f32(bias ? bias[1] : 0.0f);
    const float32x4_t b2 = vdupq_n_f32(bias ? bias[2] : 0.0f), b3 = vdupq_n_f32(bias ? bias[3] : 0.0f);
#define B0(p) b0
#define B1(p) b1
#define B2(p) b2
#define B3(p) b3
    PUTA(p0, c00, B0), PUTA(p0 + 4, c01, B0), PUTA(p0 + 8, c02, B0), PUTA(p0 + 12, c03, B0);
    PUTA(p1, c10, B1), PUTA(p1 + 4, c11, B1), PUTA(p1 + 8, c12, B1), PUTA(p1 + 12, c13, B1);
    PUTA(p2, c20, B2), PUTA(p2 + 4, c21, B2), PUTA(p2 + 8, c22, B2), PUTA(p2 + 12, c23, B2);
    PUTA(p3, c30, B3), PUTA(p3 + 4, c31, B3), PUTA(p3 + 8, c32, B3), PUTA(p3 + 12, c33, B3);
  } else {
    PUTA(p0, c00, vld1q_f32), PUTA(p0 + 4, c01, vld1q_f32), PUTA(p0 + 8, c02, vld1q_f32);
    PUTA(p0 + 12, c03, vld1q_f32), PUTA(p1, c10, vld1q_f32), PUTA(p1 + 4, c11, vld1q_f32);
    PUTA(p1 + 8, c12, vld1q_f32), PUTA(p1 + 12, c13, vld1q_f32), PUTA(p2, c20, vld1q_f32);
    PUTA(p2 + 4, c21, vld1q_f32), PUTA(p2 + 8, c22, vld1q_f32), PUTA(p2 + 12, c23, vld1q_f32);
    PUTA(p3, c30, vld1q_f32), PUTA(p3 + 4, c31, vld1q_f32), PUTA(p3 + 8, c32, vld1q_f32);
    PUTA(p3 + 12, c33, vld1q_f32);
  }
  if (st->act != NULL) ert_act_rows_f32__neon(st->act, c, ldc, 4, 16);
}

/* The 6x16 tile: 24 accumulators in v8..v31, A in v0..v5 (four k per load), B in v6, v7
 * (half a k step per load: the first half's load steps 32 bytes, the second's x6 = 32 +
 * st->bgap on to the next B row, so a packed panel and rows in place cost the same). The
 * window of st->taps (0: one tap) after each tap, in x7: x15 back to the tap's first row,
 * then on to the next tap along the window row (low byte: taps left in the row) or to
 * the next window row's first tap (bits 8-15: rows left; bits 24-31: kw - 1; bits 32-63:
 * the pitch in floats); A's rows run on across the taps. The operands are the row array,
 * b, kc and st (the accumulators use up most of GCC's operand limit), so the assembly
 * loads the row pointers into x9..x14 itself. */
#define FMLA6(A, L)                                                                        \
  "ldp q6, q7, [x15], #32\n\t"                                                             \
  "fmla v8.4s, v6.4s, " A "0.s[" L "]\n\tfmla v9.4s, v7.4s, " A "0.s[" L "]\n\t"          \
  "fmla v12.4s, v6.4s, " A "1.s[" L "]\n\tfmla v13.4s, v7.4s, " A "1.s[" L "]\n\t"        \
  "fmla v16.4s, v6.4s, " A "2.s[" L "]\n\tfmla v17.4s, v7.4s, " A "2.s[" L "]\n\t"        \
  "fmla v20.4s, v6.4s, " A "3.s[" L "]\n\tfmla v21.4s, v7.4s, " A "3.s[" L "]\n\t"        \
  "fmla v24.4s, v6.4s, " A "4.s[" L "]\n\tfmla v25.4s, v7.4s, " A "4.s[" L "]\n\t"        \
  "fmla v28.4s, v6.4s, " A "5.s[" L "]\n\tfmla v29.4s, v7.4s, " A "5.s[" L "]\n\t"        \
  "ld1 {v6.4s, v7.4s}, [x15], x6\n\t"                                                     \
  "fmla v10.4s, v6.4s, " A "0.s[" L "]\n\tfmla v11.4s, v7.4s, " A "0.s[" L "]\n\t"        \
  "fmla v14.4s, v6.4s, " A "1.s[" L "]\n\tfmla v15.4s, v7.4s, " A "1.s[" L "]\n\t"        \
  "fmla v18.4s, v6.4s, " A "2.s[" L "]\n\tfmla v19.4s, v7.4s, " A "2.s[" L "]\n\t"        \
  "fmla v22.4s, v6.4s, " A "3.s[" L "]\n\tfmla v23.4s, v7.4s, " A "3.s[" L "]\n\t"        \
  "fmla v26.4s, v6.4s, " A "4.s[" L "]\n\tfmla v27.4s, v7.4s, " A "4.s[" L "]\n\t"        \
  "fmla v30.4s, v6.4s, " A "5.s[" L "]\n\tfmla v31.4s, v7.4s, " A "5.s[" L "]\n\t"
#define ZERO8(a, b, c, d, e, f, g, h)                                                      \
  "movi v" a ".4s, #0\n\tmovi v" b ".4s, #0\n\tmovi v" c ".4s, #0\n\tmovi v" d ".4s, #0\n\t" \
  "movi v" e ".4s, #0\n\tmovi v" f ".4s, #0\n\tmovi v" g ".4s, #0\n\tmovi v" h ".4s, #0\n\t"

_Static_assert(offsetof(ert_sgemm_store, bgap) == 32 && offsetof(ert_sgemm_store, taps) == 40,
               "the tile's assembly reads st->bgap and st->taps with one ldp");

void ert_sgemm_rows6_f32__neon(int32_t kc, const float *const *rows, const float *b, float *c,
                               const ert_sgemm_store *st) {
  register float32x4_t c00 __asm__("v8"), c01 __asm__("v9"), c02 __asm__("v10");
  register float32x4_t c03 __asm__("v11"), c10 __asm__("v12"), c11 __asm__("v13");
  register float32x4_t c12 __asm__("v14"), c13 __asm__("v15"), c20 __asm__("v16");
  register float32x4_t c21 __asm__("v17"), c22 __asm__("v18"), c23 __asm__("v19");
  register float32x4_t c30 __asm__("v20"), c31 __asm__("v21"), c32 __asm__("v22");
  register float32x4_t c33 __asm__("v23"), c40 __asm__("v24"), c41 __asm__("v25");
  register float32x4_t c42 __asm__("v26"), c43 __asm__("v27"), c50 __asm__("v28");
  register float32x4_t c51 __asm__("v29"), c52 __asm__("v30"), c53 __asm__("v31");
  __asm__(
      ZERO8("8", "9", "10", "11", "12", "13", "14", "15")
      ZERO8("16", "17", "18", "19", "20", "21", "22", "23")
      ZERO8("24", "25", "26", "27", "28", "29", "30", "31")
      "ldp x9, x10, [%[rows]]\n\tldp x11, x12, [%[rows], #16]\n\tldp x13, x14, [%[rows], #32]\n\t"
      "ldp x6, x7, [%[st], #32]\n\t"
      "add x6, x6, #32\n\t"
      "mov x15, %[b]\n"
      "5:\n\t"
      "lsr x16, %[kc], #2\n\t"
      "and x17, %[kc], #3\n\t"
      "cbz x16, 2f\n"
      "1:\n\t"
      "ldr q0, [x9], #16\n\tldr q1, [x10], #16\n\tldr q2, [x11], #16\n\t"
      "ldr q3, [x12], #16\n\tldr q4, [x13], #16\n\tldr q5, [x14], #16\n\t"
      FMLA6("v", "0") FMLA6("v", "1") FMLA6("v", "2") FMLA6("v", "3")
      "subs x16, x16, #1\n\t"
      "b.ne 1b\n"
      "2:\n\t"
      "cbz x17, 4f\n"
      "3:\n\t"
      "ldr s0, [x9], #4\n\tldr s1, [x10], #4\n\tldr s2, [x11], #4\n\t"
      "ldr s3, [x12], #4\n\tldr s4, [x13], #4\n\tldr s5, [x14], #4\n\t"
      FMLA6("v", "0")
      "subs x17, x17, #1\n\t"
      "b.ne 3b\n"
      "4:\n\t"
      "cbz x7, 9f\n\t"
      "add x8, x6, #32\n\t"
      "mul x8, x8, %[kc]\n\t"
      "sub x15, x15, x8\n\t"
      "tst x7, #0xff\n\t"
      "b.eq 6f\n\t"
      "sub x7, x7, #1\n\t"
      "add x15, x15, #4\n\t"
      "b 5b\n"
      "6:\n\t"
      "tst x7, #0xff00\n\t"
      "b.eq 9f\n\t"
      "sub x7, x7, #0x100\n\t"
      "ubfx x8, x7, #24, #8\n\t"
      "orr x7, x7, x8\n\t"
      "sub x15, x15, x8, lsl #2\n\t"
      "lsr x8, x7, #32\n\t"
      "add x15, x15, x8, lsl #2\n\t"
      "b 5b\n"
      "9:\n"
      : "=&w"(c00), "=&w"(c01), "=&w"(c02), "=&w"(c03), "=&w"(c10), "=&w"(c11), "=&w"(c12),
        "=&w"(c13), "=&w"(c20), "=&w"(c21), "=&w"(c22), "=&w"(c23), "=&w"(c30), "=&w"(c31),
        "=&w"(c32), "=&w"(c33), "=&w"(c40), "=&w"(c41), "=&w"(c42), "=&w"(c43), "=&w"(c50),
        "=&w"(c51), "=&w"(c52), "=&w"(c53)
      : [rows] "r"(rows), [b] "r"(b), [kc] "r"((uint64_t)(uint32_t)kc), [st] "r"(st)
      : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "x6", "x7", "x8", "x9", "x10", "x11", "x12",
        "x13", "x14", "x15", "x16", "x17", "cc", "memory");
  if (st->alpha != 1.0f) {
    const float32x4_t a = vdupq_n_f32(st->alpha);
    SCALE4(c00, c01, c02, c03, a) SCALE4(c10, c11, c12, c13, a)
    SCALE4(c20, c21, c22, c23, a) SCALE4(c30, c31, c32, c33, a)
    SCALE4(c40, c41, c42, c43, a) SCALE4(c50, c51, c52, c53, a)
  }
  const ptrdiff_t ldc = st->ldc;
  float *p0 = c, *p1 = c + ldc, *p2 = p1 + ldc, *p3 = p2 + ldc, *p4 = p3 + ldc, *p5 = p4 + ldc;
  if (st->init) {
    const float *bias = st->bias;
    const float32x4_t b0 = vdupq_n_f32(bias ? bias[0] : 0.0f), b1 = vdupq_n_f32(bias ? bias[1] : 0.0f);
    const float32x4_t b2 = vdupq_n_f32(bias ? bias[2] : 0.0f), b3 = vdupq_n_f32(bias ? bias[3] : 0.0f);
    const float32x4_t b4 = vdupq_n_f32(bias ? bias[4] : 0.0f), b5 = vdupq_n_f32(bias ? bias[5] : 0.0f);
#define B4(p) b4
#define B5(p) b5
#define PUT24(P)                                                                              \
  P(p0, c00, B0); P(p0 + 4, c01, B0); P(p0 + 8, c02, B0); P(p0 + 12, c03, B0);               \
  P(p1, c10, B1); P(p1 + 4, c11, B1); P(p1 + 8, c12, B1); P(p1 + 12, c13, B1);               \
  P(p2, c20, B2); P(p2 + 4, c21, B2); P(p2 + 8, c22, B2); P(p2 + 12, c23, B2);               \
  P(p3, c30, B3); P(p3 + 4, c31, B3); P(p3 + 8, c32, B3); P(p3 + 12, c33, B3);               \
  P(p4, c40, B4); P(p4 + 4, c41, B4); P(p4 + 8, c42, B4); P(p4 + 12, c43, B4);               \
  P(p5, c50, B5); P(p5 + 4, c51, B5); P(p5 + 8, c52, B5); P(p5 + 12, c53, B5);
    /* hard_swish, relu and clip (the common kinds) in registers, by the helpers of
     * ert_act_rows_f32__neon (act.c), so the values are the same as its pass over C */
    const int kind = st->act != NULL ? (int)st->act->kind : ERT_ACT_NONE;
    if (kind == ERT_ACT_HARD_SWISH) {
#define PUT_HS(p, v, base_of) vst1q_f32((p), ert_v_hard_swish(vaddq_f32(base_of(p), (v))))
      PUT24(PUT_HS)
      return;
    }
    if (kind == ERT_ACT_RELU) {
#define PUT_RELU(p, v, base_of) vst1q_f32((p), ert_v_relu(vaddq_f32(base_of(p), (v))))
      PUT24(PUT_RELU)
      return;
    }
    if (kind == ERT_ACT_CLIP) { /* max then min: act.c's v_clamp */
      const float32x4_t lo = vdupq_n_f32(st->act->a), hi = vdupq_n_f32(st->act->b);
#define PUT_CLIP(p, v, base_of) \
  vst1q_f32((p), vminq_f32(vmaxq_f32(vaddq_f32(base_of(p), (v)), lo), hi))
      PUT24(PUT_CLIP)
      return;
    }
    PUT24(PUTA)
  } else {
#define LD(p) vld1q_f32(p)
    PUTA(p0, c00, LD), PUTA(p0 + 4, c01, LD), PUTA(p0 + 8, c02, LD), PUTA(p0 + 12, c03, LD);
    PUTA(p1, c10, LD), PUTA(p1 + 4, c11, LD), PUTA(p1 + 8, c12, LD), PUTA(p1 + 12, c13, LD);
    PUTA(p2, c20, LD), PUTA(p2 + 4, c21, LD), PUTA(p2 + 8, c22, LD), PUTA(p2 + 12, c23, LD);
    PUTA(p3, c30, LD), PUTA(p3 + 4, c31, LD), PUTA(p3 + 8, c32, LD), PUTA(p3 + 12, c33, LD);
    PUTA(p4, c40, LD), PUTA(p4 + 4, c41, LD), PUTA(p4 + 8, c42, LD), PUTA(p4 + 12, c43, LD);
    PUTA(p5, c50, LD), PUTA(p5 + 4, c51, LD), PUTA(p5 + 8, c52, LD), PUTA(p5 + 12, c53, LD);
  }
  if (st->act != NULL) ert_act_rows_f32__neon(st->act, c, ldc, 6, 16);
}

#else /* 32-bit ARM: 16 q registers, so the tile is done as two 4x8 halves */

#define DECLARE_HALF                                                  \
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00; \
  float32x4_t c20 = c00, c21 = c00, c30 = c00, c31 = c00

/* row i's A value is lane Li of the d register Di */
#define STEP_HALF(bk, D0, L0, D1, L1, D2, L2, D3, L3)                  \
  do {                                                                \
    const float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32((bk) + 4);   \
    c00 = vmlaq_lane_f32(c00, b0, D0, L0);                            \
    c01 = vmlaq_lane_f32(c01, b1, D0, L0);                            \
    c10 = vmlaq_lane_f32(c10, b0, D1, L1);                            \
    c11 = vmlaq_lane_f32(c11, b1, D1, L1);                            \
    c20 = vmlaq_lane_f32(c20, b0, D2, L2);                            \
    c21 = vmlaq_lane_f32(c21, b1, D2, L2);                            \
    c30 = vmlaq_lane_f32(c30, b0, D3, L3);                            \
    c31 = vmlaq_lane_f32(c31, b1, D3, L3);                            \
  } while (0)

void ert_sgemm_rows_f32__neon(int32_t kc, const float *const *rows, const float *b, float *c,
                              const ert_sgemm_store *st) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
  const float32x4_t alpha = vdupq_n_f32(st->alpha);
  const ptrdiff_t ldc = st->ldc;
  for (int half = 0; half < 2; ++half) {
    const float *bk = b + 8 * half;
    DECLARE_HALF;
    int32_t k = 0;
    for (; k + 2 <= kc; k += 2, bk += 32) {
      const float32x2_t a0 = vld1_f32(r0 + k), a1 = vld1_f32(r1 + k);
      const float32x2_t a2 = vld1_f32(r2 + k), a3 = vld1_f32(r3 + k);
      STEP_HALF(bk, a0, 0, a1, 0, a2, 0, a3, 0);
      STEP_HALF(bk + 16, a0, 1, a1, 1, a2, 1, a3, 1);
    }
    for (; k < kc; ++k, bk += 16) {
      const float ak[4] = {r0[k], r1[k], r2[k], r3[k]};
      const float32x4_t av = vld1q_f32(ak);
      const float32x2_t lo = vget_low_f32(av), hi = vget_high_f32(av);
      STEP_HALF(bk, lo, 0, lo, 1, hi, 0, hi, 1);
    }
    float *p0 = c + 8 * half, *p1 = p0 + ldc, *p2 = p1 + ldc, *p3 = p2 + ldc;
    if (st->init) {
      const float *bias = st->bias;
#define BI(i) vdupq_n_f32(bias ? bias[i] : 0.0f)
#define B0(p) BI(0)
#define B1(p) BI(1)
#define B2(p) BI(2)
#define B3(p) BI(3)
      PUT(p0, c00, B0), PUT(p0 + 4, c01, B0), PUT(p1, c10, B1), PUT(p1 + 4, c11, B1);
      PUT(p2, c20, B2), PUT(p2 + 4, c21, B2), PUT(p3, c30, B3), PUT(p3 + 4, c31, B3);
    } else {
      PUT(p0, c00, vld1q_f32), PUT(p0 + 4, c01, vld1q_f32), PUT(p1, c10, vld1q_f32);
      PUT(p1 + 4, c11, vld1q_f32), PUT(p2, c20, vld1q_f32), PUT(p2 + 4, c21, vld1q_f32);
      PUT(p3, c30, vld1q_f32), PUT(p3 + 4, c31, vld1q_f32);
    }
  }
  if (st->act != NULL) ert_act_rows_f32__neon(st->act, c, ldc, 4, 16);
}

#endif

/* dot_rows: four rows at a time, each with its own accumulator over four k per step
 * (the x vector loaded once for the four), then one pairwise reduction for the four
 * sums; a row left over runs alone; k % 4 in scalar. */
static inline float32x4_t sum4(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3) {
#if defined(__aarch64__)
  return vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3));
#else
  const float32x2_t s01 = vpadd_f32(vadd_f32(vget_low_f32(a0), vget_high_f32(a0)),
                                    vadd_f32(vget_low_f32(a1), vget_high_f32(a1)));
  const float32x2_t s23 = vpadd_f32(vadd_f32(vget_low_f32(a2), vget_high_f32(a2)),
                                    vadd_f32(vget_low_f32(a3), vget_high_f32(a3)));
  return vcombine_f32(s01, s23);
#endif
}

void ert_dot_rows_f32__neon(const float *x, const float *r, ptrdiff_t ld, int32_t k, int32_t n,
                            float *out) {
  const int32_t k4 = k & ~3;
  int32_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *r0 = r + (ptrdiff_t)j * ld, *r1 = r0 + ld, *r2 = r1 + ld, *r3 = r2 + ld;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (int32_t i = 0; i < k4; i += 4) {
      const float32x4_t xv = vld1q_f32(x + i);
      a0 = ERT_VMLA(a0, xv, vld1q_f32(r0 + i));
      a1 = ERT_VMLA(a1, xv, vld1q_f32(r1 + i));
      a2 = ERT_VMLA(a2, xv, vld1q_f32(r2 + i));
      a3 = ERT_VMLA(a3, xv, vld1q_f32(r3 + i));
    }
    float s[4];
    vst1q_f32(s, sum4(a0, a1, a2, a3));
    for (int32_t i = k4; i < k; ++i) {
      s[0] += x[i] * r0[i];
      s[1] += x[i] * r1[i];
      s[2] += x[i] * r2[i];
      s[3] += x[i] * r3[i];
    }
    memcpy(out + j, s, sizeof s);
  }
  for (; j < n; ++j) {
    const float *rj = r + (ptrdiff_t)j * ld;
    float32x4_t a = vdupq_n_f32(0.0f);
    for (int32_t i = 0; i < k4; i += 4) a = ERT_VMLA(a, vld1q_f32(x + i), vld1q_f32(rj + i));
    float s[4];
    vst1q_f32(s, a);
    float t = (s[0] + s[1]) + (s[2] + s[3]);
    for (int32_t i = k4; i < k; ++i) t += x[i] * rj[i];
    out[j] = t;
  }
}
