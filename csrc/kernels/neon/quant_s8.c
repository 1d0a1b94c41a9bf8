/* quant_s8.c (NEON): the int8 hot loops, contracts in src/cpu.h (int8 entries). They
 * are integer arithmetic, so they must give exactly the reference's results: every sum
 * here is the reference's sum in another order, and int32 addition is associative and
 * commutative modulo 2^32, where the true values (bounded by prepare) lie anyway.
 *
 * The __dot functions use the dot-product instructions (sdot): they are built for
 * armv8.2-a+dotprod whatever the target's flags, and cpu.c selects them only when the
 * CPU reports the feature. */
#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#include "../ref/quant_s8.h"
#include "cpu.h"

/* Channel r's weight of tap j of quad q: wq[16q + 4r + j] (the qgemm layout). */
static int32_t quad_dot(int32_t kq, size_t np4, const int8_t *c, const int8_t *w) {
  int32_t s = 0;
  for (int32_t q = 0; q < kq; ++q, c += np4, w += 16)
    for (int j = 0; j < 4; ++j) s += (int32_t)c[j] * w[j];
  return s;
}

#if !defined(__aarch64__)
/* Stores the first n (< 16) lanes of b. */
static void store_part(int8_t *y, int8x16_t b, int32_t n) {
  int8_t t[16];
  vst1q_s8(t, b);
  for (int32_t i = 0; i < n; ++i) y[i] = t[i];
}
#endif

#if defined(__aarch64__)
/* The first w (<= 16) bytes of v[r] to y + r*ld, r < rows (<= 4): the partial tiles of
 * qgemm_rq_s8. */
static __attribute__((noinline)) void store_rows(int8_t *y, size_t ld, const int8x16_t *v,
                                                 int32_t rows, int32_t w) {
  for (int32_t r = 0; r < rows; ++r, y += ld)
    for (int32_t k = 0; k < w; ++k) y[k] = ((const int8_t *)(const void *)&v[r])[k];
}

/* store_rows of four vectors passed in registers (the caller keeps no copy in memory) */
static __attribute__((noinline)) void store_rows4(int8_t *y, size_t ld, int8x16_t v0, int8x16_t v1,
                                                  int8x16_t v2, int8x16_t v3, int32_t rows,
                                                  int32_t w) {
  const int8x16_t v[4] = {v0, v1, v2, v3};
  store_rows(y, ld, v, rows, w);
}
#endif

/* The tail of qgemm: pixels i0 .. np one at a time. */
static void qgemm_tail(int32_t kq, int32_t np, int32_t i0, const int8_t *col, const int8_t *wq,
                       const int32_t *bias, int32_t *acc, int32_t lda) {
  const size_t np4 = (size_t)np * 4u;
  for (int32_t i = i0; i < np; ++i)
    for (int r = 0; r < 4; ++r)
      acc[(size_t)r * (size_t)lda + (size_t)i] =
          bias[r] + quad_dot(kq, np4, col + (size_t)i * 4u, wq + 4 * r);
}

/* a[v*4 + r] += pixels 4v..4v+3 (of eight) times channel r's tap j (lane j of w_r). */
#define MLA_TAP(a, x, j)                                                        \
  do {                                                                          \
    const int16x4_t xl_ = vget_low_s16(x), xh_ = vget_high_s16(x);             \
    a[0] = vmlal_lane_s16(a[0], xl_, w0, j);                                    \
    a[1] = vmlal_lane_s16(a[1], xl_, w1, j);                                    \
    a[2] = vmlal_lane_s16(a[2], xl_, w2, j);                                    \
    a[3] = vmlal_lane_s16(a[3], xl_, w3, j);                                    \
    a[4] = vmlal_lane_s16(a[4], xh_, w0, j);                                    \
    a[5] = vmlal_lane_s16(a[5], xh_, w1, j);                                    \
    a[6] = vmlal_lane_s16(a[6], xh_, w2, j);                                    \
    a[7] = vmlal_lane_s16(a[7], xh_, w3, j);                                    \
  } while (0)

/* P pixels (a multiple of 8) from i: each quad of eight pixels is de-interleaved by
 * vld4 into its four taps, widened to int16 and multiplied by lane. */
static inline __attribute__((always_inline)) void qgemm_tile(int32_t kq, int32_t np, int32_t i,
                                                             const int8_t *col, const int8_t *wq,
                                                             const int32_t *bias, int32_t *acc,
                                                             int32_t lda, const int P) {
  int32x4_t a[16];
#pragma GCC unroll 16
  for (int v = 0; v < P / 4 * 4; ++v) a[v] = vdupq_n_s32(bias[v % 4]);
  const int8_t *c = col + (size_t)i * 4u;
  const size_t np4 = (size_t)np * 4u;
  for (int32_t q = 0; q < kq; ++q, c += np4) {
    const int8x16_t w8 = vld1q_s8(wq + 16 * q);
    const int16x8_t wl = vmovl_s8(vget_low_s8(w8)), wh = vmovl_s8(vget_high_s8(w8));
    const int16x4_t w0 = vget_low_s16(wl), w1 = vget_high_s16(wl);
    const int16x4_t w2 = vget_low_s16(wh), w3 = vget_high_s16(wh);
#pragma GCC unroll 2
    for (int h = 0; h < P / 8; ++h) {
      const int8x8x4_t x = vld4_s8(c + 32 * h);
      int32x4_t *ah = a + 8 * h;
      MLA_TAP(ah, vmovl_s8(x.val[0]), 0);
      MLA_TAP(ah, vmovl_s8(x.val[1]), 1);
      MLA_TAP(ah, vmovl_s8(x.val[2]), 2);
      MLA_TAP(ah, vmovl_s8(x.val[3]), 3);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < P / 4; ++v)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      vst1q_s32(acc + (size_t)r * (size_t)lda + (size_t)i + 4u * (size_t)v, a[4 * v + r]);
}

void ert_qgemm_s8__neon(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                        const int32_t *bias, int32_t *acc, int32_t lda) {
  int32_t i = 0;
  for (; i + 8 <= np; i += 8) qgemm_tile(kq, np, i, col, wq, bias, acc, lda, 8);
  qgemm_tail(kq, np, i, col, wq, bias, acc, lda);
}

/* The pair-accumulating form, for weights in [-127, 127] (qgemm_s8_p): for quads q and
 * q+1 of two pixels, vmull_s8 + vmlal_s8 put x_q[j] w_q[j] + x_{q+1}[j] w_{q+1}[j] into
 * the int16 lanes (|x| <= 128, |w| <= 127: each product within 16256, the pair within
 * 32512, so the lane holds the exact sum), and vpadalq_s16 adds neighbouring lanes of the
 * same pixel into int32. Accumulator a[r][v][h] holds [pixel p: taps 0+1, taps 2+3, pixel
 * p+1: ...] for the pixels 4v + 2h, 4v + 2h + 1 of the tile; the last pairwise add gives
 * one sum per pixel. V vectors of 4 pixels from i. */
/* a += quads q (at c, w) and, when two, q + 1 (at c + np4, w + 16). */
static inline __attribute__((always_inline)) void qgemm_p_step(int32x4_t a[4][2][2],
                                                               const int8_t *c, size_t np4,
                                                               const int8_t *w, const int V,
                                                               const int two) {
  int8x16_t x0[2], x1[2];
  for (int v = 0; v < V; ++v) {
    x0[v] = vld1q_s8(c + 16 * v);
    x1[v] = two ? vld1q_s8(c + np4 + 16 * v) : vdupq_n_s8(0);
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const int8x16_t w0 = vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(const void *)(w + 4 * r)));
    const int8x16_t w1 =
        two ? vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(const void *)(w + 16 + 4 * r)))
            : vdupq_n_s8(0);
    for (int v = 0; v < V; ++v) {
      int16x8_t l = vmull_s8(vget_low_s8(x0[v]), vget_low_s8(w0));
#if defined(__aarch64__)
      int16x8_t h = vmull_high_s8(x0[v], w0);
      if (two) l = vmlal_s8(l, vget_low_s8(x1[v]), vget_low_s8(w1)), h = vmlal_high_s8(h, x1[v], w1);
#else
      int16x8_t h = vmull_s8(vget_high_s8(x0[v]), vget_high_s8(w0));
      if (two)
        l = vmlal_s8(l, vget_low_s8(x1[v]), vget_low_s8(w1)),
        h = vmlal_s8(h, vget_high_s8(x1[v]), vget_high_s8(w1));
#endif
      a[r][v][0] = vpadalq_s16(a[r][v][0], l);
      a[r][v][1] = vpadalq_s16(a[r][v][1], h);
    }
  }
}

static inline __attribute__((always_inline)) void qgemm_p_tile(int32_t kq, int32_t np, int32_t i,
                                                               const int8_t *col, const int8_t *wq,
                                                               const int32_t *bias, int32_t *acc,
                                                               int32_t lda, const int V) {
  int32x4_t a[4][2][2];
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < V; ++v) a[r][v][0] = a[r][v][1] = vdupq_n_s32(0);
  const size_t np4 = (size_t)np * 4u;
  const int8_t *c = col + (size_t)i * 4u;
  int32_t q = 0;
  for (; q + 2 <= kq; q += 2, c += 2 * np4) qgemm_p_step(a, c, np4, wq + 16 * q, V, 1);
  if (q < kq) qgemm_p_step(a, c, np4, wq + 16 * q, V, 0);
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < V; ++v) {
#if defined(__aarch64__)
      const int32x4_t s = vpaddq_s32(a[r][v][0], a[r][v][1]);
#else
      const int32x4_t s =
          vcombine_s32(vpadd_s32(vget_low_s32(a[r][v][0]), vget_high_s32(a[r][v][0])),
                       vpadd_s32(vget_low_s32(a[r][v][1]), vget_high_s32(a[r][v][1])));
#endif
      vst1q_s32(acc + (size_t)r * (size_t)lda + (size_t)i + 4u * (size_t)v,
                vaddq_s32(s, vdupq_n_s32(bias[r])));
    }
}

#if defined(__aarch64__)
/* The 4x16 tile of qgemm_s8_p in assembly (aarch64). Per quad, the 16 pixels' 64 bytes
 * are read by one ld4 of halfwords, which de-interleaves them into taps 0-1 and taps 2-3
 * of the even pixels (x01, x23: pixel 2p in halfword p) and of the odd ones; the four
 * channels' weights by two ld4r of halfwords (w01 and w23 of channel r replicated).
 * smull(x01, w01) + smlal(x23, w23) leaves x0 w0 + x2 w2 and x1 w1 + x3 w3 of a pixel in
 * two neighbouring int16 lanes (|x| <= 128, |w| <= 127: each within 32512), and sadalp adds
 * them into that pixel's int32 lane. Accumulator [r][v] in v(16 + 4v + r), starting from
 * bias[r] (ld4r): v = 0, 1 the even pixels 0-6 and 8-14 of channel r, v = 2, 3 the odd
 * ones (back in order when stored: zips for int32, st2 for int8). Two quads per loop
 * step, 52 instructions per quad (256 multiply-adds). Tiles at i = 0, 16, ..; the last 8
 * pixels (np = i + 8) as a half tile (ld4 of 32 bytes, the v = 1, 3 accumulators unused),
 * or with q and at most 4 of them left (n - i <= 4), as a quarter tile (ld2 of 16 bytes:
 * taps 0-1 and 2-3 of pixels 0-3 in order, one accumulator per channel, split into even
 * and odd after the loop); otherwise, when np is not a multiple of 16, a last tile at
 * np - 16 (recomputing some pixels: the same values); while i < n; np >= 16. Without q,
 * the sums go to int32 out[r*ld + i]; with q (qgemm_rq_s8: shift q[0] > 31, mult),
 * requantized to int8 out[r*ld + i] for r < rows, i < n: in the assembly, whole tiles
 * straight to out, the others to a stack tile first. */
static __attribute__((noinline)) void qgemm_p16(int32_t kq, int32_t np, const int8_t *col,
                                                const int8_t *wq, const int32_t *bias,
                                                const int32_t *mult, const int32_t *q, void *out,
                                                size_t ld, int32_t n, int32_t rows) {
  const size_t np4 = (size_t)np * 4u;
  struct p16_rq {
    int32x4_t m, sh;
    int16x8_t z;
    int8x16_t lo, hi;
    size_t ld, ld4; /* the row stride and 4 ld - 16 */
    int32_t clo, chi; /* lo > -128, hi < 127 (else the int8 narrowing clamps) */
  } rq_v, *rq = &rq_v; /* the vectors reloaded per tile (the loop uses every register) */
  _Static_assert(offsetof(struct p16_rq, ld) == 80 && offsetof(struct p16_rq, clo) == 96,
                 "the tile's assembly reads ld, ld4 and clo, chi with one ldp each");
  /* whole tiles (16 pixels of 4 rows, i + 16 <= n) are requantized and stored by the
   * assembly; the others requantized into t, then stored row by row */
  size_t whole = 0;
  int8x16_t t[4];
  if (q != NULL) {
    rq_v.m = vld1q_s32(mult), rq_v.sh = vdupq_n_s32(31 - q[0]), rq_v.z = vdupq_n_s16((int16_t)q[1]);
    rq_v.lo = vdupq_n_s8((int8_t)q[2]), rq_v.hi = vdupq_n_s8((int8_t)q[3]);
    rq_v.clo = q[2] > -128, rq_v.chi = q[3] < 127;
    whole = rows == 4 ? (size_t)n / 16u : 0;
    rq_v.ld = whole ? ld : 16, rq_v.ld4 = whole ? 4 * ld - 16 : 48;
  }
  for (int32_t i = 0;; i += 16) {
    /* the last 8 pixels: a half tile, or when requantizing at most 4 of them, a quarter */
    const int half = i + 8 == np ? 1 + (q != NULL && n - i <= 4) : 0;
    if (i + 16 > np && !half) i = np - 16;
    const int8_t *c0 = col + 4 * (size_t)i, *w = wq;
    size_t nq = half ? (size_t)kq : (size_t)(kq + 1) / 2u; /* two quads per full step */
    register int32x4_t a00 __asm__("v16"), a01 __asm__("v17"), a02 __asm__("v18"), a03 __asm__("v19");
    register int32x4_t a10 __asm__("v20"), a11 __asm__("v21"), a12 __asm__("v22"), a13 __asm__("v23");
    register int32x4_t a20 __asm__("v24"), a21 __asm__("v25"), a22 __asm__("v26"), a23 __asm__("v27");
    register int32x4_t a30 __asm__("v28"), a31 __asm__("v29"), a32 __asm__("v30"), a33 __asm__("v31");
#define P16_CH(W01, W23, A0, A1, A2, A3)                                                   \
  "smull  v12.8h, v0.8b, " W01 ".8b\n\t"                                                   \
  "smull2 v13.8h, v0.16b, " W01 ".16b\n\t"                                                 \
  "smull  v14.8h, v2.8b, " W01 ".8b\n\t"                                                   \
  "smull2 v15.8h, v2.16b, " W01 ".16b\n\t"                                                 \
  "smlal  v12.8h, v1.8b, " W23 ".8b\n\t"                                                   \
  "smlal2 v13.8h, v1.16b, " W23 ".16b\n\t"                                                 \
  "smlal  v14.8h, v3.8b, " W23 ".8b\n\t"                                                   \
  "smlal2 v15.8h, v3.16b, " W23 ".16b\n\t"                                                 \
  "sadalp " A0 ".4s, v12.8h\n\t"                                                           \
  "sadalp " A1 ".4s, v13.8h\n\t"                                                           \
  "sadalp " A2 ".4s, v14.8h\n\t"                                                           \
  "sadalp " A3 ".4s, v15.8h\n\t"
#define P16_Q /* one quad, 16 pixels */                                                  \
  "ld4 {v0.8h, v1.8h, v2.8h, v3.8h}, [%[c0]], %[st]\n\t"                                  \
  "ld4r {v4.8h, v5.8h, v6.8h, v7.8h}, [%[w]], #8\n\t"                                      \
  "ld4r {v8.8h, v9.8h, v10.8h, v11.8h}, [%[w]], #8\n\t"                                    \
  P16_CH("v4", "v5", "v16", "v20", "v24", "v28") P16_CH("v6", "v7", "v17", "v21", "v25", "v29") \
  P16_CH("v8", "v9", "v18", "v22", "v26", "v30") P16_CH("v10", "v11", "v19", "v23", "v27", "v31")
#define P8_CH(W01, W23, A0, A1)                                                            \
  "smull  v12.8h, v0.8b, " W01 ".8b\n\t"                                                   \
  "smull  v13.8h, v2.8b, " W01 ".8b\n\t"                                                   \
  "smlal  v12.8h, v1.8b, " W23 ".8b\n\t"                                                   \
  "smlal  v13.8h, v3.8b, " W23 ".8b\n\t"                                                   \
  "sadalp " A0 ".4s, v12.8h\n\t"                                                           \
  "sadalp " A1 ".4s, v13.8h\n\t"
#define P4_CH(W01, W23, A) /* pixels 0-3 of channel r, in order (ld2: taps 0-1, 2-3) */ \
  "smull  v12.8h, v0.8b, " W01 ".8b\n\t"                                                   \
  "smlal  v12.8h, v1.8b, " W23 ".8b\n\t"                                                   \
  "sadalp " A ".4s, v12.8h\n\t"
/* channel R of a whole tile: requant_row's shift > 31 steps (rq8_hi) on the even pixels
 * (v16+R, v20+R) into E and the odd ones (v24+R, v28+R) into O, int8 in their low halves */
#define RQ_CH(R, A0, A1, A2, A3, E, O)                                                     \
  "sqdmulh " A0 ".4s, " A0 ".4s, v0.s[" R "]\n\t"                                          \
  "sqdmulh " A1 ".4s, " A1 ".4s, v0.s[" R "]\n\t"                                          \
  "sqdmulh " A2 ".4s, " A2 ".4s, v0.s[" R "]\n\t"                                          \
  "sqdmulh " A3 ".4s, " A3 ".4s, v0.s[" R "]\n\t"                                          \
  "srshl " A0 ".4s, " A0 ".4s, v1.4s\n\t"                                                  \
  "srshl " A1 ".4s, " A1 ".4s, v1.4s\n\t"                                                  \
  "srshl " A2 ".4s, " A2 ".4s, v1.4s\n\t"                                                  \
  "srshl " A3 ".4s, " A3 ".4s, v1.4s\n\t"                                                  \
  "sqxtn  " E ".4h, " A0 ".4s\n\t"                                                         \
  "sqxtn2 " E ".8h, " A1 ".4s\n\t"                                                         \
  "sqxtn  " O ".4h, " A2 ".4s\n\t"                                                         \
  "sqxtn2 " O ".8h, " A3 ".4s\n\t"                                                         \
  "sqadd " E ".8h, " E ".8h, v2.8h\n\t"                                                    \
  "sqadd " O ".8h, " O ".8h, v2.8h\n\t"                                                    \
  "sqxtn " E ".8b, " E ".8h\n\t"                                                           \
  "sqxtn " O ".8b, " O ".8h\n\t"
#define CLAMP8(OP, V) /* the 8 registers of RQ_CH's results against V */                 \
  OP " v5.8b, v5.8b, " V ".8b\n\t" OP " v6.8b, v6.8b, " V ".8b\n\t"                        \
  OP " v7.8b, v7.8b, " V ".8b\n\t" OP " v8.8b, v8.8b, " V ".8b\n\t"                        \
  OP " v9.8b, v9.8b, " V ".8b\n\t" OP " v10.8b, v10.8b, " V ".8b\n\t"                      \
  OP " v11.8b, v11.8b, " V ".8b\n\t" OP " v12.8b, v12.8b, " V ".8b\n\t"
    /* With nt > 0, nt tiles from i, each requantized and stored by st2 (which interleaves
     * the even and odd pixels back in order) to rows of rq->ld bytes from y; x9-x16: the
     * loop state (tile start, rows pointer, steps, tiles, strides, clamp flags). */
    const size_t nt = whole ? whole : q != NULL;
    __asm__ volatile( /* volatile: it stores (GCC drops a plain asm whose outputs go unused) */
        "mov x9, %[c0]\n\t"
        "mov x10, %[y]\n\t"
        "mov x11, %[n]\n\t"
        "mov x12, %[nt]\n\t"
        "ldp x13, x14, [%[rq], #80]\n\t"
        "ldp w15, w16, [%[rq], #96]\n"
        "10:\n\t"
        "ld4r {v16.4s, v17.4s, v18.4s, v19.4s}, [%[b]]\n\t"
        "ld4r {v20.4s, v21.4s, v22.4s, v23.4s}, [%[b]]\n\t"
        "ld4r {v24.4s, v25.4s, v26.4s, v27.4s}, [%[b]]\n\t"
        "ld4r {v28.4s, v29.4s, v30.4s, v31.4s}, [%[b]]\n\t"
        "cbnz %w[h], 5f\n\t"
        "tbnz %w[kq], #0, 4f\n"
        "1:\n\t" P16_Q "4:\n\t" P16_Q
        "subs %[n], %[n], #1\n\t"
        "b.ne 1b\n"
        "3:\n\t"
        "cbz x12, 9f\n\t"
        "ld1 {v0.4s, v1.4s, v2.4s, v3.4s}, [%[rq]]\n\t"
        "ldr q4, [%[rq], #64]\n\t"
        RQ_CH("0", "v16", "v20", "v24", "v28", "v5", "v6")
        RQ_CH("1", "v17", "v21", "v25", "v29", "v7", "v8")
        RQ_CH("2", "v18", "v22", "v26", "v30", "v9", "v10")
        RQ_CH("3", "v19", "v23", "v27", "v31", "v11", "v12")
        "cbz w15, 11f\n\t" CLAMP8("smax", "v3") "11:\n\t"
        "cbz w16, 12f\n\t" CLAMP8("smin", "v4") "12:\n\t"
        "st2 {v5.8b, v6.8b}, [x10], x13\n\t"
        "st2 {v7.8b, v8.8b}, [x10], x13\n\t"
        "st2 {v9.8b, v10.8b}, [x10], x13\n\t"
        "st2 {v11.8b, v12.8b}, [x10], x13\n\t"
        "sub x10, x10, x14\n\t"
        "add x9, x9, #64\n\t"
        "mov %[c0], x9\n\t"
        "sub %[w], %[w], %w[kq], uxtw #4\n\t"
        "mov %[n], x11\n\t"
        "subs x12, x12, #1\n\t"
        "b.ne 10b\n\t"
        "b 9f\n"
        "5:\n\t"
        "tbz %w[h], #1, 2f\n"
        "6:\n\t"
        "ld2 {v0.4h, v1.4h}, [%[c0]], %[st]\n\t"
        "ld4r {v4.8h, v5.8h, v6.8h, v7.8h}, [%[w]], #8\n\t"
        "ld4r {v8.8h, v9.8h, v10.8h, v11.8h}, [%[w]], #8\n\t"
        P4_CH("v4", "v5", "v16") P4_CH("v6", "v7", "v17") P4_CH("v8", "v9", "v18") P4_CH("v10", "v11", "v19")
        "subs %[n], %[n], #1\n\t"
        "b.ne 6b\n\t"
        "uzp2 v24.4s, v16.4s, v16.4s\n\t" /* pixels 0-3 in order: even and odd as above */
        "uzp2 v25.4s, v17.4s, v17.4s\n\t"
        "uzp2 v26.4s, v18.4s, v18.4s\n\t"
        "uzp2 v27.4s, v19.4s, v19.4s\n\t"
        "uzp1 v16.4s, v16.4s, v16.4s\n\t"
        "uzp1 v17.4s, v17.4s, v17.4s\n\t"
        "uzp1 v18.4s, v18.4s, v18.4s\n\t"
        "uzp1 v19.4s, v19.4s, v19.4s\n\t"
        "b 3b\n"
        "2:\n\t"
        "ld4 {v0.4h, v1.4h, v2.4h, v3.4h}, [%[c0]], %[st]\n\t"
        "ld4r {v4.8h, v5.8h, v6.8h, v7.8h}, [%[w]], #8\n\t"
        "ld4r {v8.8h, v9.8h, v10.8h, v11.8h}, [%[w]], #8\n\t"
        P8_CH("v4", "v5", "v16", "v24") P8_CH("v6", "v7", "v17", "v25")
        P8_CH("v8", "v9", "v18", "v26") P8_CH("v10", "v11", "v19", "v27")
        "subs %[n], %[n], #1\n\t"
        "b.ne 2b\n\t"
        "b 3b\n"
        "9:\n"
        : [c0] "+r"(c0), [w] "+r"(w), [n] "+r"(nq), "=w"(a00), "=w"(a01),
          "=w"(a02), "=w"(a03), "=w"(a10), "=w"(a11), "=w"(a12), "=w"(a13), "=w"(a20),
          "=w"(a21), "=w"(a22), "=w"(a23), "=w"(a30), "=w"(a31), "=w"(a32), "=w"(a33)
        : [st] "r"(np4), [b] "r"(bias), [h] "r"(half), [kq] "r"(kq), [rq] "r"(rq),
          [y] "r"(whole ? out : (void *)t), [nt] "r"(nt)
        : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
          "v13", "v14", "v15", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16", "memory", "cc");
#undef P16_CH
#undef P16_Q
#undef P8_CH
#undef P4_CH
#undef RQ_CH
#undef CLAMP8
    if (whole) { /* tiles 0 .. whole - 1 done */
      i = 16 * (int32_t)whole - 16, whole = 0, rq_v.ld = 16, rq_v.ld4 = 48;
      if (i + 16 >= n) return;
      continue;
    }
    if (q != NULL) {
      store_rows((int8_t *)out + i, ld, t, rows, n - i < 16 ? n - i : 16);
    } else {
      const int32x4_t acc[4][4] = {{a00, a10, a20, a30}, {a01, a11, a21, a31},
                                   {a02, a12, a22, a32}, {a03, a13, a23, a33}};
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) { /* pixels 4v .. 4v+3 */
          const int32x4_t e = acc[r][v / 2], o = acc[r][2 + v / 2];
          if (v < 2 || !half)
            vst1q_s32((int32_t *)out + (size_t)r * ld + i + 4 * v, v % 2 ? vzip2q_s32(e, o) : vzip1q_s32(e, o));
        }
    }
    if (i + 16 >= np || i + 16 >= n) return; /* (a half tile ends at np) */
  }
}

/* qgemm_rq_s8 for weights in [-127, 127] (qgemm_s8_p's products) on CPUs without sdot:
 * np >= 16, or nothing. */
int32_t ert_qgemm_rq_s8__neon(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                              const int32_t *bias, const int32_t *mult, const int32_t *q, int8_t *y,
                              size_t ldy, int32_t n, int32_t rows) {
  if (np < 16) return 0;
  qgemm_p16(kq, np, col, wq, bias, mult, q, y, ldy, n, rows);
  return n;
}
#endif

void ert_qgemm_s8_p__neon(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                          const int32_t *bias, int32_t *acc, int32_t lda) {
#if defined(__aarch64__) /* under 16 pixels: the widening form (exact for any weights) */
  if (np >= 16)
    qgemm_p16(kq, np, col, wq, bias, NULL, NULL, acc, (size_t)lda, np, 4);
  else
    ert_qgemm_s8__neon(kq, np, col, wq, bias, acc, lda);
#else
  int32_t i = 0;
  for (; i + 4 <= np; i += 4) qgemm_p_tile(kq, np, i, col, wq, bias, acc, lda, 1);
  qgemm_tail(kq, np, i, col, wq, bias, acc, lda);
#endif
}

/* [sum a, sum b, sum c, sum d] (row sums of pack_w_s8, gemv) */
static inline int32x4_t hsum4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
#if defined(__aarch64__)
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
#else
  const int32x2_t ab = vpadd_s32(vadd_s32(vget_low_s32(a), vget_high_s32(a)),
                                 vadd_s32(vget_low_s32(b), vget_high_s32(b)));
  const int32x2_t cd = vpadd_s32(vadd_s32(vget_low_s32(c), vget_high_s32(c)),
                                 vadd_s32(vget_low_s32(d), vget_high_s32(d)));
  return vcombine_s32(ab, cd);
#endif
}

void ert_pack_w_s8__neon(int8_t *wq, int32_t *wsum, const int8_t *w, size_t ld, int32_t rows,
                         int32_t k) {
  const int32_t kq = (k + 3) / 4;
  int32x4_t s = vdupq_n_s32(0);
  int32_t q = 0;
  if (rows == 4) { /* four quads of four rows: a 4x4 transpose of words; row sums beside */
    int32x4_t rs0 = s, rs1 = s, rs2 = s, rs3 = s;
    for (; 4 * q + 16 <= k; q += 4) {
      int32x4x4_t v;
      const int8x16_t x0 = vld1q_s8(w + 4 * q), x1 = vld1q_s8(w + ld + 4 * q);
      const int8x16_t x2 = vld1q_s8(w + 2 * ld + 4 * q), x3 = vld1q_s8(w + 3 * ld + 4 * q);
      v.val[0] = vreinterpretq_s32_s8(x0), v.val[1] = vreinterpretq_s32_s8(x1);
      v.val[2] = vreinterpretq_s32_s8(x2), v.val[3] = vreinterpretq_s32_s8(x3);
      vst4q_s32((int32_t *)(void *)(wq + 16 * q), v);
      rs0 = vpadalq_s16(rs0, vpaddlq_s8(x0)), rs1 = vpadalq_s16(rs1, vpaddlq_s8(x1));
      rs2 = vpadalq_s16(rs2, vpaddlq_s8(x2)), rs3 = vpadalq_s16(rs3, vpaddlq_s8(x3));
    }
    s = hsum4(rs0, rs1, rs2, rs3);
  }
  for (int32_t t = q; t < kq; ++t) /* the rest bytewise: once per layer */
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 4; ++j)
        wq[16 * t + 4 * r + j] = r < rows && 4 * t + j < k ? w[(size_t)r * ld + (size_t)(4 * t + j)] : 0;
  for (; q < kq; ++q) s = vpadalq_s16(s, vpaddlq_s8(vld1q_s8(wq + 16 * q))); /* lane r: channel r's */
  vst1q_s32(wsum, s);
}

/* Whole quads of rows 16 pixels per step, the last step ending at n (rewriting some: the
 * same bytes), after zeros over the last 8 pixels to np (np - n <= 8; the steps rewrite
 * those they reach); a last partial quad, rows under 16 pixels and blocks padded by more
 * than 8 pixels bytewise. */
void ert_quads_s8__neon(int8_t *dst, const int8_t *src, size_t ld, int32_t k, int32_t n,
                        int32_t np) {
  for (int32_t t = 0; t < k; t += 4, src += 4 * ld, dst += (size_t)np * 4u) {
    int32_t i = 0;
    if (t + 4 <= k && n >= 16 && np - n <= 8) {
      vst1q_s8(dst + 4 * (size_t)np - 32, vdupq_n_s8(0)), vst1q_s8(dst + 4 * (size_t)np - 16, vdupq_n_s8(0));
      for (size_t o = 0;; o += 16) {
        if (o + 16 > (size_t)n) o = (size_t)n - 16;
        const int8_t *p = src + o;
        int8x16x4_t v;
        v.val[0] = vld1q_s8(p), v.val[1] = vld1q_s8(p + ld);
        v.val[2] = vld1q_s8(p + 2 * ld), v.val[3] = vld1q_s8(p + 3 * ld);
        vst4q_s8(dst + 4 * o, v);
        if (o + 16 >= (size_t)n) break;
      }
      i = np;
    }
    for (; i < np; ++i)
      for (int32_t j = 0; j < 4; ++j)
        dst[4 * i + j] = t + j < k && i < n ? src[(size_t)j * ld + (size_t)i] : 0;
  }
}

/* Sixteen pixels per step, the last step ending at n (rewriting some: the same bytes); for
 * s = 2 the taps of a step are the even bytes of a vld2, and of the last step the odd
 * bytes of the 32 from one byte before it, so that no byte past the last tap is read.
 * One loop per stride, so that the steps keep the four tap pointers in registers. */
void ert_taps_s8__neon(int8_t *dst, size_t np4, const int8_t *src, const ptrdiff_t *off,
                       int32_t k, int32_t n, int32_t s) {
  const size_t last = (size_t)n - 16u; /* n >= 17 */
  for (int32_t t0 = 0; t0 < k; t0 += 4, dst += np4) {
    const int8_t *p0 = src + off[t0], *p1 = src + off[t0 + 1 < k ? t0 + 1 : 0];
    const int8_t *p2 = src + off[t0 + 2 < k ? t0 + 2 : 0], *p3 = src + off[t0 + 3 < k ? t0 + 3 : 0];
    int8_t *d = dst;
    int8x16x4_t v;
    if (s == 1) {
      for (size_t o = 0; o < last; o += 16, d += 64) {
        v.val[0] = vld1q_s8(p0 + o), v.val[1] = vld1q_s8(p1 + o);
        v.val[2] = vld1q_s8(p2 + o), v.val[3] = vld1q_s8(p3 + o);
        vst4q_s8(d, v);
      }
      v.val[0] = vld1q_s8(p0 + last), v.val[1] = vld1q_s8(p1 + last);
      v.val[2] = vld1q_s8(p2 + last), v.val[3] = vld1q_s8(p3 + last);
    } else {
      for (size_t o = 0; o < 2 * last; o += 32, d += 64) {
        v.val[0] = vld2q_s8(p0 + o).val[0], v.val[1] = vld2q_s8(p1 + o).val[0];
        v.val[2] = vld2q_s8(p2 + o).val[0], v.val[3] = vld2q_s8(p3 + o).val[0];
        vst4q_s8(d, v);
      }
      const size_t o = 2 * last - 1;
      v.val[0] = vld2q_s8(p0 + o).val[1], v.val[1] = vld2q_s8(p1 + o).val[1];
      v.val[2] = vld2q_s8(p2 + o).val[1], v.val[3] = vld2q_s8(p3 + o).val[1];
    }
    vst4q_s8(dst + 4 * last, v);
  }
}

/* 8 (or 4) outputs from i of the row at ro, T taps unrolled (the weights by lane from
 * wv). */
#define DW8_AT(T, i)                                                                     \
  do {                                                                                   \
    int32x4_t a0 = vdupq_n_s32(bias), a1 = a0;                                           \
    _Pragma("GCC unroll 25") for (int t = 0; t < (T); ++t) {                             \
      const int16x8_t x = vld1q_s16(tp[t] + ro + (i));                                \
      a0 = vmlal_lane_s16(a0, vget_low_s16(x), wv[t / 4], t % 4);                        \
      a1 = vmlal_lane_s16(a1, vget_high_s16(x), wv[t / 4], t % 4);                       \
    }                                                                                    \
    vst1q_s32(acc + (i), a0);                                                            \
    vst1q_s32(acc + (i) + 4, a1);                                                        \
  } while (0)
#define DW4_AT(T, i)                                                                     \
  do {                                                                                   \
    int32x4_t a0 = vdupq_n_s32(bias);                                                    \
    _Pragma("GCC unroll 25") for (int t = 0; t < (T); ++t)                               \
      a0 = vmlal_lane_s16(a0, vld1_s16(tp[t] + ro + (i)), wv[t / 4], t % 4);          \
    vst1q_s32(acc + (i), a0);                                                            \
  } while (0)
/* Rows of n >= 4 outputs: whole vectors, the last one ending at n (it may recompute
 * outputs before it: the same values). */
#define DW_ROW(T)                                                                        \
  do {                                                                                   \
    const int32_t step_ = n >= 8 ? 8 : 4;                                                \
    for (int32_t i_ = 0;; i_ += step_) {                                                 \
      const int32_t o_ = i_ + step_ <= n ? i_ : n - step_;                               \
      if (step_ == 8)                                                                    \
        DW8_AT(T, o_);                                                                   \
      else                                                                               \
        DW4_AT(T, o_);                                                                   \
      if (o_ + step_ >= n) break;                                                        \
    }                                                                                    \
  } while (0)

static void dw_taps_row(int32_t *acc, const int16_t *base, const ptrdiff_t *off,
                        const int16_t *w, int32_t n, int32_t taps, int32_t bias) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int32x4_t a = vdupq_n_s32(bias), b = a;
    for (int32_t t = 0; t < taps; ++t) {
      const int16x8_t x = vld1q_s16(base + off[t] + i);
      a = vmlal_n_s16(a, vget_low_s16(x), w[t]);
      b = vmlal_n_s16(b, vget_high_s16(x), w[t]);
    }
    vst1q_s32(acc + i, a);
    vst1q_s32(acc + i + 4, b);
  }
  for (; i + 4 <= n; i += 4) {
    int32x4_t a = vdupq_n_s32(bias);
    for (int32_t t = 0; t < taps; ++t) a = vmlal_n_s16(a, vld1_s16(base + off[t] + i), w[t]);
    vst1q_s32(acc + i, a);
  }
  for (; i < n; ++i) {
    int32_t s = bias;
    for (int32_t t = 0; t < taps; ++t) s += (int32_t)w[t] * base[off[t] + i];
    acc[i] = s;
  }
}

void ert_dw_taps_s16__neon(int32_t *acc, const int16_t *base, const ptrdiff_t *off,
                           const int16_t *w, int32_t n, int32_t taps, int32_t bias, int32_t rows,
                           ptrdiff_t rs) {
  if (taps == 25 && n >= 4) {
    int16_t wp[28] = {0};
    for (int32_t t = 0; t < taps; ++t) wp[t] = w[t];
    int16x4_t wv[7];
    for (int v = 0; v < 7; ++v) wv[v] = vld1_s16(wp + 4 * v);
    const int16_t *tp[25];
    for (int32_t t = 0; t < taps; ++t) tp[t] = base + off[t];
    ptrdiff_t ro = 0; /* the row's offset from base */
    for (int32_t r = 0; r < rows; ++r, acc += n, ro += rs) {
      DW_ROW(25);
    }
    return;
  }
  for (int32_t r = 0; r < rows; ++r, acc += n, base += rs) dw_taps_row(acc, base, off, w, n, taps, bias);
}

/* Zeros first (whole vectors, the last ones overlapping), then the widened run over
 * them; vector tails end exactly at the run's end. */
static inline __attribute__((always_inline)) void widen_row(int16_t *d, const int8_t *s,
                                                            int32_t pre, int32_t n, int32_t len,
                                                            int32_t stride, int32_t zp) {
  const int16x8_t zero = vdupq_n_s16(0);
  const int32_t end = pre + n;
  if (len >= 8) {
    for (int32_t i = 0; i < pre; i += 8) vst1q_s16(d + (i + 8 <= len ? i : len - 8), zero);
    for (int32_t i = len; i > end; i -= 8) vst1q_s16(d + (i - 8 >= 0 ? i - 8 : 0), zero);
  } else {
    for (int32_t i = 0; i < pre; ++i) d[i] = 0;
    for (int32_t i = end; i < len; ++i) d[i] = 0;
  }
  d += pre;
  const int8x8_t z = vdup_n_s8((int8_t)zp);
  int32_t i = 0;
  if (stride == 1 && n >= 8) {
    for (; i + 8 <= n; i += 8) vst1q_s16(d + i, vsubl_s8(vld1_s8(s + i), z));
    if (i < n) vst1q_s16(d + n - 8, vsubl_s8(vld1_s8(s + n - 8), z));
    return;
  }
  if (stride == 2 && n >= 9) { /* vld2 at 2i reads s[2i .. 2i+15]: the last one used is s[2(n-1)] */
    for (; i + 9 <= n; i += 8) vst1q_s16(d + i, vsubl_s8(vld2_s8(s + 2 * i).val[0], z));
    /* the last 8: odd lanes of s[2n-17 .. 2n-2] */
    if (i < n) vst1q_s16(d + n - 8, vsubl_s8(vld2_s8(s + 2 * n - 17).val[1], z));
    return;
  }
  for (; i < n; ++i) d[i] = (int16_t)(s[(size_t)i * (size_t)stride] - zp);
}

void ert_widen_s8__neon(int16_t *d, const int8_t *s, int32_t pre, int32_t n, int32_t len,
                        int32_t stride, int32_t zp, int32_t rows, ptrdiff_t ds, ptrdiff_t ss) {
  for (int32_t r = 0; r < rows; ++r, d += ds, s += ss) widen_row(d, s, pre, n, len, stride, zp);
}

static int32_t gemv_col(int32_t k, int32_t i0, const int8_t *a, int32_t azp, const int8_t *b) {
  int32_t s = 0;
  for (int32_t i = i0; i < k; ++i) s += ((int32_t)a[i] - azp) * b[i];
  return s;
}

/* sum (a - azp) b = sum a b - azp sum b over 16 elements a step: the int8 products by
 * smull (exact in int16) added pairwise into int32 (sadalp), the sum of b likewise;
 * then 8 more, and the last k % 8 elements by gemv_col. */
#define GEMV_COL(s, u, bc)                                                              \
  do {                                                                                  \
    const int8x16_t y_ = vld1q_s8(bc + i);                                              \
    s = vpadalq_s16(vpadalq_s16(s, vmull_s8(vget_low_s8(x), vget_low_s8(y_))),            \
                    vmull_s8(vget_high_s8(x), vget_high_s8(y_)));                       \
    u = vpadalq_s8(u, y_);                                                              \
  } while (0)

void ert_gemv_s8__neon(int32_t k, int32_t n, const int8_t *a, int32_t azp, const int8_t *b,
                       int32_t *acc) {
  const size_t ks = (size_t)k;
  int32_t c = 0;
  for (; c + 4 <= n; c += 4) {
    const int8_t *b0 = b + (size_t)c * ks, *b1 = b0 + ks, *b2 = b1 + ks, *b3 = b2 + ks;
    int32x4_t s0 = vdupq_n_s32(0), s1 = s0, s2 = s0, s3 = s0;
    int16x8_t u0 = vdupq_n_s16(0), u1 = u0, u2 = u0, u3 = u0; /* |lane| <= 256 per step */
    int32x4_t v0 = s0, v1 = s0, v2 = s0, v3 = s0;
    int32_t i = 0;
    while (i + 16 <= k) {
#if defined(__aarch64__) /* the loop in assembly: GCC's copied accumulators every step */
      const int32_t e = (k - i) / 16 < 127 ? (k - i) / 16 : 127;
      const int8_t *pa = a + i, *q0 = b0 + i, *q1 = b1 + i, *q2 = b2 + i, *q3 = b3 + i;
      size_t steps = (size_t)e;
#define GEMV_ASM(Q, S, U)                                                                 \
  "ld1 {v25.16b}, [%[" Q "]], #16\n\t"                                                    \
  "smull v26.8h, v24.8b, v25.8b\n\t"                                                     \
  "smull2 v27.8h, v24.16b, v25.16b\n\t"                                                  \
  "sadalp %[" S "].4s, v26.8h\n\t"                                                        \
  "sadalp %[" S "].4s, v27.8h\n\t"                                                        \
  "sadalp %[" U "].8h, v25.16b\n\t"
      __asm__("1:\n\t"
              "ld1 {v24.16b}, [%[pa]], #16\n\t"
              GEMV_ASM("q0", "s0", "u0") GEMV_ASM("q1", "s1", "u1")
              GEMV_ASM("q2", "s2", "u2") GEMV_ASM("q3", "s3", "u3")
              "subs %[n], %[n], #1\n\t"
              "b.ne 1b\n"
              : [n] "+r"(steps), [pa] "+r"(pa), [q0] "+r"(q0), [q1] "+r"(q1), [q2] "+r"(q2),
                [q3] "+r"(q3), [s0] "+w"(s0), [s1] "+w"(s1), [s2] "+w"(s2), [s3] "+w"(s3),
                [u0] "+w"(u0), [u1] "+w"(u1), [u2] "+w"(u2), [u3] "+w"(u3)
              :
              : "v24", "v25", "v26", "v27", "memory", "cc");
#undef GEMV_ASM
      i += 16 * e;
#else
      for (int32_t e = i + 16 * 127 < k ? i + 16 * 127 : k; i + 16 <= e; i += 16) {
        const int8x16_t x = vld1q_s8(a + i);
        GEMV_COL(s0, u0, b0);
        GEMV_COL(s1, u1, b1);
        GEMV_COL(s2, u2, b2);
        GEMV_COL(s3, u3, b3);
      }
#endif
      v0 = vpadalq_s16(v0, u0), v1 = vpadalq_s16(v1, u1), v2 = vpadalq_s16(v2, u2), v3 = vpadalq_s16(v3, u3);
      u0 = u1 = u2 = u3 = vdupq_n_s16(0);
    }
    if (i + 8 <= k) { /* 8 more: the products and b widened to int16 */
      const int8x8_t x = vld1_s8(a + i);
      const int8x8_t y0 = vld1_s8(b0 + i), y1 = vld1_s8(b1 + i), y2 = vld1_s8(b2 + i), y3 = vld1_s8(b3 + i);
      s0 = vpadalq_s16(s0, vmull_s8(x, y0)), v0 = vpadalq_s16(v0, vmovl_s8(y0));
      s1 = vpadalq_s16(s1, vmull_s8(x, y1)), v1 = vpadalq_s16(v1, vmovl_s8(y1));
      s2 = vpadalq_s16(s2, vmull_s8(x, y2)), v2 = vpadalq_s16(v2, vmovl_s8(y2));
      s3 = vpadalq_s16(s3, vmull_s8(x, y3)), v3 = vpadalq_s16(v3, vmovl_s8(y3));
      i += 8;
    }
    int32x4_t r = vmlsq_n_s32(hsum4(s0, s1, s2, s3), hsum4(v0, v1, v2, v3), azp);
    if (i < k) {
      const int32_t t[4] = {gemv_col(k, i, a, azp, b0), gemv_col(k, i, a, azp, b1),
                            gemv_col(k, i, a, azp, b2), gemv_col(k, i, a, azp, b3)};
      r = vaddq_s32(r, vld1q_s32(t));
    }
    vst1q_s32(acc + c, r);
  }
  for (; c < n; ++c) acc[c] = gemv_col(k, 0, a, azp, b + (size_t)c * ks);
}
#undef GEMV_COL

/* clamp(zp + requant(a, mult, shift), lo, hi) for four lanes: the exact 64-bit product,
 * then SRSHL by -shift, which adds 2^(shift-1) and shifts right arithmetically without
 * intermediate overflow, i.e. floor((a*mult + 2^(shift-1)) / 2^shift). The saturating
 * narrowing to int32 and the saturating add of zp are monotonic and keep values beyond
 * int32 beyond [lo, hi] on the same side, so the clamp gives the reference's value. */
static inline int32x4_t rq4(int32x4_t a, int32x2_t m, int64x2_t sh, int32x4_t z, int32x4_t lo,
                            int32x4_t hi) {
  const int64x2_t p0 = vrshlq_s64(vmull_s32(vget_low_s32(a), m), sh);
  const int64x2_t p1 = vrshlq_s64(vmull_s32(vget_high_s32(a), m), sh);
  const int32x4_t r = vqaddq_s32(vcombine_s32(vqmovn_s64(p0), vqmovn_s64(p1)), z);
  return vminq_s32(vmaxq_s32(r, lo), hi);
}

/* Shifts >= 31 in 32-bit lanes. With P = a*mult = H*2^31 + L (0 <= L < 2^31), SQDMULH gives
 * H = floor(P / 2^31) (it saturates only for two operands of -2^31, and mult >= 0); for
 * shift s >= 32, floor((P + 2^(s-1)) / 2^s) = floor((H + 2^(s-32)) / 2^(s-31)) (adding
 * L / 2^31 < 1 to an integer numerator leaves the floor), which is SRSHL of H by -(s-31).
 * For s = 31 it is SQRDMULH: (2 a mult + 2^31) >> 32 = floor((P + 2^30) / 2^31). The
 * result then saturates to int16, gets zp added (saturating), saturates to int8 and is
 * clamped: every step is monotonic and exact on values that end inside [lo, hi], so the
 * result is the reference's. */
static inline int16x8_t rq8_hi(int32x4_t a0, int32x4_t a1, int32x4_t m, int32x4_t sh, int is31,
                               int16x8_t z) {
  int32x4_t r0, r1;
  if (is31) {
    r0 = vqrdmulhq_s32(a0, m), r1 = vqrdmulhq_s32(a1, m);
  } else {
    r0 = vrshlq_s32(vqdmulhq_s32(a0, m), sh), r1 = vrshlq_s32(vqdmulhq_s32(a1, m), sh);
  }
  return vqaddq_s16(vcombine_s16(vqmovn_s32(r0), vqmovn_s32(r1)), z);
}

static inline __attribute__((always_inline)) void rq16_hi(const int32_t *acc, int8_t *y,
                                                          int32x4_t m, int32x4_t sh, int is31,
                                                          int16x8_t z, int8x16_t vl, int8x16_t vh) {
  const int16x8_t r0 = rq8_hi(vld1q_s32(acc), vld1q_s32(acc + 4), m, sh, is31, z);
  const int16x8_t r1 = rq8_hi(vld1q_s32(acc + 8), vld1q_s32(acc + 12), m, sh, is31, z);
  const int8x16_t b = vcombine_s8(vqmovn_s16(r0), vqmovn_s16(r1));
  vst1q_s8(y, vminq_s8(vmaxq_s8(b, vl), vh));
}

static void requant_row_hi(const int32_t *acc, size_t n, int32_t mult, int32_t shift, int32_t zp,
                           int32_t lo, int32_t hi, int8_t *y) {
  const int32x4_t m = vdupq_n_s32(mult), sh = vdupq_n_s32(31 - shift);
  const int16x8_t z = vdupq_n_s16((int16_t)zp);
  const int8x16_t vl = vdupq_n_s8((int8_t)lo), vh = vdupq_n_s8((int8_t)hi);
  const int is31 = shift == 31;
  size_t i = 0;
  if (n >= 16) { /* the last 16 end at n (recomputing some: the same bytes) */
    for (; i + 16 <= n; i += 16) rq16_hi(acc + i, y + i, m, sh, is31, z, vl, vh);
    if (i < n) rq16_hi(acc + n - 16, y + n - 16, m, sh, is31, z, vl, vh);
    return;
  }
  for (; i < n; ++i) y[i] = ert_clamp_s8(zp + ert_requant(acc[i], mult, shift), lo, hi);
}

void ert_requant_row__neon(const int32_t *acc, size_t n, int32_t mult, int32_t shift, int32_t zp,
                           int32_t lo, int32_t hi, int8_t *y) {
  if (shift >= 31) {
    requant_row_hi(acc, n, mult, shift, zp, lo, hi, y);
    return;
  }
  const int32x2_t m = vdup_n_s32(mult);
  const int64x2_t sh = vdupq_n_s64(-(int64_t)shift);
  const int32x4_t z = vdupq_n_s32(zp), vl = vdupq_n_s32(lo), vh = vdupq_n_s32(hi);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int32x4_t r0 = rq4(vld1q_s32(acc + i), m, sh, z, vl, vh);
    const int32x4_t r1 = rq4(vld1q_s32(acc + i + 4), m, sh, z, vl, vh);
    vst1_s8(y + i, vmovn_s16(vcombine_s16(vmovn_s32(r0), vmovn_s32(r1))));
  }
  for (; i < n; ++i) y[i] = ert_clamp_s8(zp + ert_requant(acc[i], mult, shift), lo, hi);
}

#if !defined(__aarch64__)
/* dw3_s8 (armv7; aarch64 has dwc3_s8) */
/* The requantization of dw3_s8, set up once per plane: rq8_hi's SQDMULH + SRSHL form for
 * shifts above 31, SQRDMULH for 31 (is31). */
typedef struct rq_set {
  int32x4_t m, sh;
  int16x8_t z;
  int8x8_t lo, hi;
  int is31;
} rq_set;

static rq_set rq_setup(const int32_t *q) {
  rq_set r;
  r.m = vdupq_n_s32(q[0]);
  r.sh = vdupq_n_s32(31 - q[1]);
  r.z = vdupq_n_s16((int16_t)q[2]);
  r.lo = vdup_n_s8((int8_t)q[3]);
  r.hi = vdup_n_s8((int8_t)q[4]);
  r.is31 = q[1] == 31;
  return r;
}

/* b = eight outputs: as in rq8_hi, the requantized values saturate to int16, get zp added (saturating), saturate to int8 and are clamped, every step
 * monotonic and exact on values that end inside [lo, hi]. (A macro: the dotprod
 * functions cannot inline functions built for the base target.) */
#define RQ8(b, a0, a1, r)                                                                \
  do {                                                                                   \
    int32x4_t c0_, c1_;                                                                  \
    if (__builtin_expect((r)->is31, 0))                                                  \
      c0_ = vqrdmulhq_s32(a0, (r)->m), c1_ = vqrdmulhq_s32(a1, (r)->m);                  \
    else                                                                                 \
      c0_ = vrshlq_s32(vqdmulhq_s32(a0, (r)->m), (r)->sh),                               \
      c1_ = vrshlq_s32(vqdmulhq_s32(a1, (r)->m), (r)->sh);                               \
    const int16x8_t v_ = vqaddq_s16(vcombine_s16(vqmovn_s32(c0_), vqmovn_s32(c1_)), (r)->z); \
    b = vmin_s8(vmax_s8(vqmovn_s16(v_), (r)->lo), (r)->hi);                              \
  } while (0)

/* Output rows in steps of eight, the last step ending at ow (recomputing outputs before
 * it: the same bytes); rows narrower than 8 store eight bytes (the next rows rewrite the
 * extra ones) while eight remain in the plane. STEP gives int32x4_t a0, a1 for the eight
 * outputs whose windows start at p0, p1, p2 (the three input rows). */
#define DW3_PLANE(STEP)                                                                  \
  do {                                                                                   \
    const rq_set rq_ = rq_setup(q);                                                      \
    int8_t *yp = y;                                                                      \
    const ptrdiff_t last8 = (ptrdiff_t)oh * ow - 8; /* the last 8-byte store's start */ \
    for (int32_t oy = 0; oy < oh; ++oy) {                                                \
      const int8_t *p0 = x + (ptrdiff_t)oy * s * ld, *p1 = p0 + ld, *p2 = p1 + ld;       \
      for (int32_t left = ow;;) {                                                        \
        int32x4_t a0 = vdupq_n_s32(bias), a1 = a0;                                       \
        STEP;                                                                            \
        int8x8_t b;                                                                      \
        RQ8(b, a0, a1, &rq_);                                                            \
        if (yp - y <= last8)                                                             \
          vst1_s8(yp, b);                                                                \
        else                                                                             \
          store_part(yp, vcombine_s8(b, b), left);                                       \
        if (left <= 8) {                                                                 \
          yp += left;                                                                    \
          break;                                                                         \
        }                                                                                \
        int32_t d = 8; /* the next step starts 8 further, or ends at the row's end */    \
        if ((left -= 8) < 8) d = left, left = 8;                                         \
        yp += d, p0 += d * s, p1 += d * s, p2 += d * s;                                  \
      }                                                                                  \
    }                                                                                    \
  } while (0)

/* Pairs of taps: x_a w_a + x_b w_b in int16 lanes (|x| <= 128, |w| <= 127: within 32512),
 * then widened into the sums. */
#define DW3_PAIR(xa, wa, xb, wb)                                                         \
  do {                                                                                   \
    const int16x8_t p_ = vmlal_s8(vmull_s8(xa, wa), xb, wb);                             \
    a0 = vaddw_s16(a0, vget_low_s16(p_)), a1 = vaddw_s16(a1, vget_high_s16(p_));         \
  } while (0)

/* sum (x - x_zp) w = sum x w - x_zp sum w: the bias with the zero point's part */
static int32_t dw3_bias(int32_t bias, const int8_t *w, int32_t xzp) {
  const int64x1_t s = vpaddl_s32(vpaddl_s16(vpaddl_s8(vld1_s8(w))));
  return bias - xzp * ((int32_t)vget_lane_s64(s, 0) + w[8]);
}

void ert_dw3_s8__neon(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w, int32_t bias,
                      const int32_t *q, int32_t oh, int32_t ow, int32_t s) {
  bias = dw3_bias(bias, w, q[5]);
  const int8x8_t w8 = vld1_s8(w);
  const int8x8_t wv[9] = {vdup_lane_s8(w8, 0), vdup_lane_s8(w8, 1), vdup_lane_s8(w8, 2),
                          vdup_lane_s8(w8, 3), vdup_lane_s8(w8, 4), vdup_lane_s8(w8, 5),
                          vdup_lane_s8(w8, 6), vdup_lane_s8(w8, 7), vdup_n_s8(w[8])};
  if (s == 1) {
#define STEP1                                                                            \
  do {                                                                                   \
    const int8x8_t x0 = vld1_s8(p0), x1 = vld1_s8(p0 + 1), x2 = vld1_s8(p0 + 2);         \
    const int8x8_t x3 = vld1_s8(p1), x4 = vld1_s8(p1 + 1), x5 = vld1_s8(p1 + 2);         \
    const int8x8_t x6 = vld1_s8(p2), x7 = vld1_s8(p2 + 1), x8 = vld1_s8(p2 + 2);         \
    DW3_PAIR(x0, wv[0], x1, wv[1]);                                                      \
    DW3_PAIR(x2, wv[2], x3, wv[3]);                                                      \
    DW3_PAIR(x4, wv[4], x5, wv[5]);                                                      \
    DW3_PAIR(x6, wv[6], x7, wv[7]);                                                      \
    const int16x8_t p8 = vmull_s8(x8, wv[8]);                                            \
    a0 = vaddw_s16(a0, vget_low_s16(p8)), a1 = vaddw_s16(a1, vget_high_s16(p8));         \
  } while (0)
    DW3_PLANE(STEP1);
#undef STEP1
    return;
  }
#define STEP2                                                                            \
  do {                                                                                   \
    const int8x8x2_t u0 = vld2_s8(p0), v0 = vld2_s8(p0 + 2);                             \
    const int8x8x2_t u1 = vld2_s8(p1), v1 = vld2_s8(p1 + 2);                             \
    const int8x8x2_t u2 = vld2_s8(p2), v2 = vld2_s8(p2 + 2);                             \
    DW3_PAIR(u0.val[0], wv[0], u0.val[1], wv[1]);                                        \
    DW3_PAIR(v0.val[0], wv[2], u1.val[0], wv[3]);                                        \
    DW3_PAIR(u1.val[1], wv[4], v1.val[0], wv[5]);                                        \
    DW3_PAIR(u2.val[0], wv[6], u2.val[1], wv[7]);                                        \
    const int16x8_t p8 = vmull_s8(v2.val[0], wv[8]);                                     \
    a0 = vaddw_s16(a0, vget_low_s16(p8)), a1 = vaddw_s16(a1, vget_high_s16(p8));         \
  } while (0)
  DW3_PLANE(STEP2);
#undef STEP2
}

#endif

#if defined(__aarch64__)
/* ---- dwc3_s8: 16 channels at once ------------------------------------------------ */

/* d[i*ds + j] = s[j*ss + i] for i, j < 16: four stages, the stage of distance k swapping
 * bit k of the vector index with bit k of the lane index (trn1/trn2 on elements of k
 * bytes). */
static __attribute__((noinline)) void tr16(int8_t *d, ptrdiff_t ds, const int8_t *s, ptrdiff_t ss) {
  int8x16_t v[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) /* ld1 with the stride as post-increment: one instruction */
    __asm__("ld1 {%0.16b}, [%1], %2" : "=w"(v[i]), "+r"(s) : "r"(ss) : "memory");
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    const int8x16_t a = v[i], b = v[i + 1];
    v[i] = vtrn1q_s8(a, b), v[i + 1] = vtrn2q_s8(a, b);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    if (!(i & 2)) {
      const int16x8_t a = vreinterpretq_s16_s8(v[i]), b = vreinterpretq_s16_s8(v[i + 2]);
      v[i] = vreinterpretq_s8_s16(vtrn1q_s16(a, b)), v[i + 2] = vreinterpretq_s8_s16(vtrn2q_s16(a, b));
    }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    if (!(i & 4)) {
      const int32x4_t a = vreinterpretq_s32_s8(v[i]), b = vreinterpretq_s32_s8(v[i + 4]);
      v[i] = vreinterpretq_s8_s32(vtrn1q_s32(a, b)), v[i + 4] = vreinterpretq_s8_s32(vtrn2q_s32(a, b));
    }
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    const int64x2_t a = vreinterpretq_s64_s8(v[i]), b = vreinterpretq_s64_s8(v[i + 8]);
    v[i] = vreinterpretq_s8_s64(vtrn1q_s64(a, b)), v[i + 8] = vreinterpretq_s8_s64(vtrn2q_s64(a, b));
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    __asm__ volatile("st1 {%1.16b}, [%0], %2" : "+r"(d) : "w"(v[i]), "r"(ds) : "memory");
}

/* x_a w_a + x_b w_b per channel in int16 (|x| <= 128, |w| <= 127: within 32512), widened
 * into the four sums of 4 channels. */
#define DWC_PAIR(xa, wa, xb, wb)                                                         \
  do {                                                                                   \
    const int16x8_t l_ = vmlal_s8(vmull_s8(vget_low_s8(xa), vget_low_s8(wa)), vget_low_s8(xb), vget_low_s8(wb)); \
    const int16x8_t h_ = vmlal_high_s8(vmull_high_s8(xa, wa), xb, wb);                    \
    a0 = vaddw_s16(a0, vget_low_s16(l_)), a1 = vaddw_high_s16(a1, l_);                   \
    a2 = vaddw_s16(a2, vget_low_s16(h_)), a3 = vaddw_high_s16(a3, h_);                   \
  } while (0)

/* x_a w_a per channel, widened into the four sums. */
#define DWC_ONE(xa, wa)                                                                  \
  do {                                                                                   \
    const int16x8_t l_ = vmull_s8(vget_low_s8(xa), vget_low_s8(wa));                     \
    const int16x8_t h_ = vmull_high_s8(xa, wa);                                          \
    a0 = vaddw_s16(a0, vget_low_s16(l_)), a1 = vaddw_high_s16(a1, l_);                   \
    a2 = vaddw_s16(a2, vget_low_s16(h_)), a3 = vaddw_high_s16(a3, h_);                   \
  } while (0)

/* The per-block constants of dwc3_s8: the taps (lane c: channel c), the biases and
 * multipliers of channels 4k .. 4k+3 in b[k], m[k], and the requantization's. */
typedef struct dwc_k {
  int8x16_t w[25];
  int32x4x4_t b, m;
  int32x4_t sh;
  int16x8_t z;
  int8x16_t lo, hi;
  int is31;
} dwc_k;

/* The outputs of rows oy < R (ow each, strides s along a row and sy down) from the band's
 * padded copy (cols pixels a row) into out, 16 bytes a pixel, of 3x3 windows or (k5) 5x5. A function of
 * its own, so that the taps and the requantization's constants stay in registers. 3x3
 * in assembly: per pixel one ld1 of the three pixels of each window row (48 bytes, for
 * stride 1 and 2 alike), DWC_PAIR's products and widening adds, the bias from one ld1 and
 * requant_row's shift >= 31 steps (rq8_hi; sqrdmulh for shift 31, whose srshl is by 0):
 * 64 instructions per pixel of 16 channels. 5x5: a loop over the window's rows, its taps
 * loaded. */
static __attribute__((noinline)) void dwc_band(int8_t *out, const int8_t *in, int32_t R, int32_t ow,
                                               int32_t s, int32_t sy, int32_t cols, const dwc_k *k,
                                               int k5) {
  const size_t rs = (size_t)cols * 16u, ps = 16u * (size_t)s;
  if (!k5) {
    const int8_t *p0, *p1, *p2;
    size_t cnt, rows = (size_t)R;
    /* v0-v8 taps, v9-v12 sh z lo hi, v13-v16 multipliers, v17-v20 sums, v21-v26 two window
     * rows, v27-v28 products */
#define DWC_AP(XA, WA, XB, WB)                                                             \
  "smull  v27.8h, " XA ".8b, " WA ".8b\n\t"                                                \
  "smull2 v28.8h, " XA ".16b, " WA ".16b\n\t"                                              \
  "smlal  v27.8h, " XB ".8b, " WB ".8b\n\t"                                                \
  "smlal2 v28.8h, " XB ".16b, " WB ".16b\n\t"                                              \
  "saddw  v17.4s, v17.4s, v27.4h\n\t"                                                      \
  "saddw2 v18.4s, v18.4s, v27.8h\n\t"                                                      \
  "saddw  v19.4s, v19.4s, v28.4h\n\t"                                                      \
  "saddw2 v20.4s, v20.4s, v28.8h\n\t"
    __asm__ volatile(
        "ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%[kw]], #64\n\t"
        "ld1 {v4.16b, v5.16b, v6.16b, v7.16b}, [%[kw]], #64\n\t"
        "ld1 {v8.16b}, [%[kw]]\n\t"
        "ld1 {v9.16b, v10.16b, v11.16b, v12.16b}, [%[kc]]\n\t"
        "ld1 {v13.4s, v14.4s, v15.4s, v16.4s}, [%[km]]\n"
        "0:\n\t"
        "mov %[p0], %[in]\n\t"
        "add %[p1], %[in], %[rs]\n\t"
        "add %[p2], %[p1], %[rs]\n\t"
        "add %[in], %[in], %[srs]\n\t"
        "mov %[cnt], %[ow]\n"
        "1:\n\t"
        "ld1 {v17.4s, v18.4s, v19.4s, v20.4s}, [%[kb]]\n\t"
        "ld1 {v21.16b, v22.16b, v23.16b}, [%[p0]], %[ps]\n\t"
        "ld1 {v24.16b, v25.16b, v26.16b}, [%[p1]], %[ps]\n\t"
        DWC_AP("v21", "v0", "v22", "v1") DWC_AP("v23", "v2", "v24", "v3")
        DWC_AP("v25", "v4", "v26", "v5")
        "ld1 {v21.16b, v22.16b, v23.16b}, [%[p2]], %[ps]\n\t"
        DWC_AP("v21", "v6", "v22", "v7")
        "smull  v27.8h, v23.8b, v8.8b\n\t"
        "smull2 v28.8h, v23.16b, v8.16b\n\t"
        "saddw  v17.4s, v17.4s, v27.4h\n\t"
        "saddw2 v18.4s, v18.4s, v27.8h\n\t"
        "saddw  v19.4s, v19.4s, v28.4h\n\t"
        "saddw2 v20.4s, v20.4s, v28.8h\n\t"
        "cbnz %w[is31], 4f\n\t"
        "sqdmulh v17.4s, v17.4s, v13.4s\n\t"
        "sqdmulh v18.4s, v18.4s, v14.4s\n\t"
        "sqdmulh v19.4s, v19.4s, v15.4s\n\t"
        "sqdmulh v20.4s, v20.4s, v16.4s\n"
        "3:\n\t"
        "srshl v17.4s, v17.4s, v9.4s\n\t"
        "srshl v18.4s, v18.4s, v9.4s\n\t"
        "srshl v19.4s, v19.4s, v9.4s\n\t"
        "srshl v20.4s, v20.4s, v9.4s\n\t"
        "sqxtn  v17.4h, v17.4s\n\t"
        "sqxtn2 v17.8h, v18.4s\n\t"
        "sqxtn  v19.4h, v19.4s\n\t"
        "sqxtn2 v19.8h, v20.4s\n\t"
        "sqadd v17.8h, v17.8h, v10.8h\n\t"
        "sqadd v19.8h, v19.8h, v10.8h\n\t"
        "sqxtn  v17.8b, v17.8h\n\t"
        "sqxtn2 v17.16b, v19.8h\n\t"
        "smax v17.16b, v17.16b, v11.16b\n\t"
        "smin v17.16b, v17.16b, v12.16b\n\t"
        "st1 {v17.16b}, [%[o]], #16\n\t"
        "subs %[cnt], %[cnt], #1\n\t"
        "b.ne 1b\n\t"
        "subs %[rows], %[rows], #1\n\t"
        "b.ne 0b\n\t"
        "b 5f\n"
        "4:\n\t"
        "sqrdmulh v17.4s, v17.4s, v13.4s\n\t"
        "sqrdmulh v18.4s, v18.4s, v14.4s\n\t"
        "sqrdmulh v19.4s, v19.4s, v15.4s\n\t"
        "sqrdmulh v20.4s, v20.4s, v16.4s\n\t"
        "b 3b\n"
        "5:\n"
        : [o] "+r"(out), [in] "+r"(in), [rows] "+r"(rows), [kw] "+r"(k), [p0] "=&r"(p0),
          [p1] "=&r"(p1), [p2] "=&r"(p2), [cnt] "=&r"(cnt)
        : [rs] "r"(rs), [ps] "r"(ps), [srs] "r"(rs * (size_t)sy), [ow] "r"((size_t)ow),
          [kb] "r"(&k->b), [km] "r"(&k->m), [kc] "r"(&k->sh), [is31] "r"(k->is31)
        : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
          "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24",
          "v25", "v26", "v27", "v28", "memory", "cc");
#undef DWC_AP
    return;
  }
  const int32x4_t shv = k->sh;
  const int16x8_t zo = k->z;
  const int8x16_t vlo = k->lo, vhi = k->hi;
  const int is31 = k->is31;
  for (int32_t oy = 0; oy < R; ++oy) {
    const int8_t *p0 = in + (size_t)(oy * sy) * rs;
    for (int32_t ox = 0; ox < ow; ++ox, out += 16, p0 += ps) {
      int32x4x4_t acc = vld1q_s32_x4((const int32_t *)(const void *)&k->b);
      int32x4_t a0 = acc.val[0], a1 = acc.val[1], a2 = acc.val[2], a3 = acc.val[3];
      const int8_t *p = p0;
      const int8x16_t *wr = k->w;
#pragma GCC unroll 1
      for (int ky = 0; ky < 5; ++ky, p += rs, wr += 5) {
        const int8x16_t x0 = vld1q_s8(p), x1 = vld1q_s8(p + 16), x2 = vld1q_s8(p + 32);
        const int8x16_t x3 = vld1q_s8(p + 48), x4 = vld1q_s8(p + 64);
        DWC_PAIR(x0, wr[0], x1, wr[1]);
        DWC_PAIR(x2, wr[2], x3, wr[3]);
        DWC_ONE(x4, wr[4]);
      }
      /* requant_row's shift >= 31 steps (rq8_hi), a multiplier per channel */
      const int32x4x4_t m = vld1q_s32_x4((const int32_t *)(const void *)&k->m);
      if (__builtin_expect(is31, 0)) {
        a0 = vqrdmulhq_s32(a0, m.val[0]), a1 = vqrdmulhq_s32(a1, m.val[1]);
        a2 = vqrdmulhq_s32(a2, m.val[2]), a3 = vqrdmulhq_s32(a3, m.val[3]);
      } else {
        a0 = vrshlq_s32(vqdmulhq_s32(a0, m.val[0]), shv), a1 = vrshlq_s32(vqdmulhq_s32(a1, m.val[1]), shv);
        a2 = vrshlq_s32(vqdmulhq_s32(a2, m.val[2]), shv), a3 = vrshlq_s32(vqdmulhq_s32(a3, m.val[3]), shv);
      }
      const int16x8_t r0 = vqaddq_s16(vqmovn_high_s32(vqmovn_s32(a0), a1), zo);
      const int16x8_t r1 = vqaddq_s16(vqmovn_high_s32(vqmovn_s32(a2), a3), zo);
      vst1q_s8(out, vminq_s8(vmaxq_s8(vqmovn_high_s16(vqmovn_s16(r0), r1), vlo), vhi));
    }
  }
}

/* Bands of R output rows (the last band ending at oh, recomputing some rows: the same
 * bytes). Pixel (r, c) of the band's padded copy at in[16 (r cols + c) + channel]: image
 * rows by 16x16 transposes of 16 bytes of each channel's row (rows under 16 bytes: the
 * transposed 16 pixels run past the row and the bytes past it are set back to x_zp; the
 * next rows are written after). Outputs at out[16 (oy ow + ox) + channel], then
 * transposed back into the channels' planes 16 pixels at a time, the last 16 ending at
 * the band's end. */
void ert_dwc3_s8__neon(int8_t *y, size_t ys, const int8_t *x, size_t xs, const int8_t *xend,
                       const int8_t *w, const int32_t *qp, const int32_t *g, int8_t *buf) {
  const int32_t ih = g[0], iw = g[1], oh = g[2], ow = g[3], s = g[4], pt = g[5], pl = g[6];
  const int32_t sy = g[14]; /* the stride down */
  const int32_t xzp = g[7], nb = (oh + g[12] - 1) / g[12], rmin = (ow + 15) / ow; /* R*ow >= 16 */
  const int32_t R = (oh + nb - 1) / nb > rmin ? (oh + nb - 1) / nb : rmin; /* bands of equal size */
  const int32_t kw = g[13], kk = kw * kw, cols = (ow - 1) * s + kw, rin = (R - 1) * sy + kw;
  const int32_t lo = pl < cols ? pl : cols, hi = pl + iw < cols ? pl + iw : cols;
  const int32_t n = hi - lo; /* image columns in a row, from image column lo - pl */
  int8_t *const in = buf, *const out = buf + (size_t)rin * (size_t)cols * 16u + 320u;
  memset(in, xzp, (size_t)rin * (size_t)cols * 16u);
  dwc_k k;
  { /* k.w[kw ky + kx] lane c = w[kk c + kw ky + kx]: 5x5 by two transposes (taps 0 .. 15
     * and 9 .. 24), 3x3 from three de-interleaving loads of 16 triples (channel t / 3,
     * kernel row t % 3) and one lookup per tap */
    if (kw == 5) {
      tr16((int8_t *)(void *)k.w, 16, w, 25);
      tr16((int8_t *)(void *)(k.w + 9), 16, w + 9, 25);
    } else {
    static const uint8_t tri[16] = {0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45};
    const int8x16x3_t t0 = vld3q_s8(w), t1 = vld3q_s8(w + 48), t2 = vld3q_s8(w + 96);
    const uint8x16_t i0 = vld1q_u8(tri);
    for (int ky = 0; ky < 3; ++ky)
      for (int kx = 0; kx < 3; ++kx) {
        const int8x16x3_t t = {{t0.val[kx], t1.val[kx], t2.val[kx]}};
        k.w[3 * ky + kx] = vqtbl3q_s8(t, vaddq_u8(i0, vdupq_n_u8((uint8_t)ky)));
      }
    }
    /* bias - x_zp * sum w (sum (x - x_zp) w = sum x w - x_zp sum w) */
    int16x8_t sl = vmovl_s8(vget_low_s8(k.w[0])), sh = vmovl_high_s8(k.w[0]);
    for (int t = 1; t < kk; ++t) sl = vaddw_s8(sl, vget_low_s8(k.w[t])), sh = vaddw_high_s8(sh, k.w[t]);
    for (int j = 0; j < 4; ++j) {
      const int32x4x2_t b = vld2q_s32(qp + 8 * j);
      const int16x8_t sj = j < 2 ? sl : sh;
      k.b.val[j] = vmlsl_n_s16(b.val[0], (j & 1) ? vget_high_s16(sj) : vget_low_s16(sj), (int16_t)xzp);
      k.m.val[j] = b.val[1];
    }
  }
  k.sh = vdupq_n_s32(31 - g[11]), k.z = vdupq_n_s16((int16_t)g[8]);
  k.lo = vdupq_n_s8((int8_t)g[9]), k.hi = vdupq_n_s8((int8_t)g[10]), k.is31 = g[11] == 31;
  for (int32_t oy0 = 0;; oy0 += R) {
    if (oy0 > oh - R) oy0 = oh - R;
    for (int32_t br = 0; br < rin; ++br) {
      const int32_t iy = oy0 * sy + br - pt;
      int8_t *d = in + (size_t)(br * cols + lo) * 16u;
      if (iy < 0 || iy >= ih || n <= 0) {
        memset(in + (size_t)br * (size_t)cols * 16u, xzp, (size_t)cols * 16u);
        continue;
      }
      const int8_t *src = x + (size_t)iy * (size_t)iw + (size_t)(lo - pl);
      for (int32_t c0 = 0;; c0 += 16) {
        const int32_t o = n < 16 ? 0 : c0 + 16 <= n ? c0 : n - 16;
        const int8_t *p = src + o;
        int8_t *dp = d + (size_t)o * 16u;
        if (n < 16 && xend - (p + 15 * xs) < 16) { /* 16 bytes would read past x's end */
          int8_t t[16][16] = {{0}};
          for (int c = 0; c < 16; ++c) memcpy(t[c], p + c * xs, (size_t)n);
          tr16(dp, 16, t[0], 16);
        } else {
          tr16(dp, 16, p, (ptrdiff_t)xs);
        }
        if (n < 16) { /* x_zp back from pixel hi to lo + 16 */
          const int8x16_t zv = vdupq_n_s8((int8_t)xzp);
          const int8x16x4_t z4 = {{zv, zv, zv, zv}};
          for (int8_t *e = d + (size_t)n * 16u; e < d + 256; e += 64) vst1q_s8_x4(e, z4);
          break;
        }
        if (o + 16 >= n) break;
      }
    }
    dwc_band(out, in, R, ow, s, sy, cols, &k, kw == 5);
    const int32_t np = R * ow; /* >= 16 */
    for (int32_t i = 0;; i += 16) {
      const int32_t o = i + 16 <= np ? i : np - 16;
      tr16(y + (size_t)oy0 * (size_t)ow + (size_t)o, (ptrdiff_t)ys, out + (size_t)o * 16u, 16);
      if (o + 16 >= np) break;
    }
    if (oy0 + R >= oh) break;
  }
}
#endif

#if defined(__aarch64__)
#define DOT __attribute__((target("arch=armv8.2-a+dotprod")))

/* Four pixels at a time, a_r += the pixels' quads dotted with channel r's taps (conv2d_s8
 * uses it for shifts up to 31; qgemm_rq_s8 has the wide tiles). */
DOT void ert_qgemm_s8__dot(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                           const int32_t *bias, int32_t *acc, int32_t lda) {
  const size_t np4 = (size_t)np * 4u;
  int32_t i = 0;
  for (; i + 4 <= np; i += 4) {
    int32x4_t a0 = vdupq_n_s32(bias[0]), a1 = vdupq_n_s32(bias[1]);
    int32x4_t a2 = vdupq_n_s32(bias[2]), a3 = vdupq_n_s32(bias[3]);
    const int8_t *c = col + (size_t)i * 4u;
    for (int32_t q = 0; q < kq; ++q, c += np4) {
      const int8x16_t w = vld1q_s8(wq + 16 * q), x = vld1q_s8(c);
      a0 = vdotq_laneq_s32(a0, x, w, 0);
      a1 = vdotq_laneq_s32(a1, x, w, 1);
      a2 = vdotq_laneq_s32(a2, x, w, 2);
      a3 = vdotq_laneq_s32(a3, x, w, 3);
    }
    vst1q_s32(acc + i, a0);
    vst1q_s32(acc + (size_t)lda + (size_t)i, a1);
    vst1q_s32(acc + 2 * (size_t)lda + (size_t)i, a2);
    vst1q_s32(acc + 3 * (size_t)lda + (size_t)i, a3);
  }
  qgemm_tail(kq, np, i, col, wq, bias, acc, lda);
}

/* qgemm_rq_s8: tiles of 16 pixels as in qgemm_s8__dot, requantized in registers (rq8_hi's
 * SQDMULH + SRSHL form, shift > 31; the steps after it as in RQ8) and stored as int8. */
#define RQ16(out, a0, a1, a2, a3, r)                                                     \
  do {                                                                                   \
    const int16x8_t l_ = vqaddq_s16(vcombine_s16(vqmovn_s32(vrshlq_s32(vqdmulhq_laneq_s32(a0, mv, r), sh)), \
                                                 vqmovn_s32(vrshlq_s32(vqdmulhq_laneq_s32(a1, mv, r), sh))), z); \
    const int16x8_t h_ = vqaddq_s16(vcombine_s16(vqmovn_s32(vrshlq_s32(vqdmulhq_laneq_s32(a2, mv, r), sh)), \
                                                 vqmovn_s32(vrshlq_s32(vqdmulhq_laneq_s32(a3, mv, r), sh))), z); \
    out = vcombine_s8(vqmovn_s16(l_), vqmovn_s16(h_));                                  \
  } while (0)

/* The tiles of qgemm_rq_s8 in assembly: accumulator [v][r] (pixels 4v .. 4v+3 from i,
 * channel r) in v(16 + 4v + r), started from bias[r] by ld4r; per quad one ld1 of the
 * pixels' V registers (post-incremented by np4) and 4V sdot by lane of the quad's
 * weights; two quads per loop step (one ldp of their weights), an odd count entering at
 * the second. V = 4 (16 pixels), or for the last pixels 2 (8, a half tile) or 1 (4,
 * when no more are left). */
#define SD4(X, W, A0, A1, A2, A3)                                                       \
  "sdot " A0 ".4s, " X ".16b, " W ".4b[0]\n\t"                                            \
  "sdot " A1 ".4s, " X ".16b, " W ".4b[1]\n\t"                                            \
  "sdot " A2 ".4s, " X ".16b, " W ".4b[2]\n\t"                                            \
  "sdot " A3 ".4s, " X ".16b, " W ".4b[3]\n\t"
#define SD16(W)                                                                          \
  "ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%[c]], %[st]\n\t"                              \
  SD4("v0", W, "v16", "v17", "v18", "v19") SD4("v1", W, "v20", "v21", "v22", "v23")      \
  SD4("v2", W, "v24", "v25", "v26", "v27") SD4("v3", W, "v28", "v29", "v30", "v31")
#define SD8(W)                                                                           \
  "ld1 {v0.16b, v1.16b}, [%[c]], %[st]\n\t"                                              \
  SD4("v0", W, "v16", "v17", "v18", "v19") SD4("v1", W, "v20", "v21", "v22", "v23")
#define SDQ(W) "ld1 {v0.16b}, [%[c]], %[st]\n\t" SD4("v0", W, "v16", "v17", "v18", "v19")

DOT int32_t ert_qgemm_rq_s8__dot(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                              const int32_t *bias, const int32_t *mult, const int32_t *q,
                              int8_t *y, size_t ldy, int32_t n, int32_t rows) {
  const size_t np4 = (size_t)np * 4u;
  const int32x4_t mv = vld1q_s32(mult); /* lane r: channel r's */
  const int32x4_t sh = vdupq_n_s32(31 - q[0]);
  const int16x8_t z = vdupq_n_s16((int16_t)q[1]);
  const int8x16_t lo = vdupq_n_s8((int8_t)q[2]), hi = vdupq_n_s8((int8_t)q[3]);
  const int clo = q[2] > -128, chi = q[3] < 127;
  const int32_t whole = rows == 4 ? n : 0;
  const int32_t end = (np < n + 15 ? np : n + 15) & ~15; /* tiles of 16 from i < n, by np */
  int32_t i = 0;
  for (;; i += 16) {
    /* width 16, or the last tile's: 4 when n - i <= 4, else 8 */
    const int32_t width = i < end ? 16 : n - i <= 4 ? 4 : 8;
    if (width < 16 && (i + width > np || i >= n)) break;
    const int8_t *c = col + (size_t)i * 4u, *w = wq;
    size_t steps = (size_t)(kq + 1) / 2u;
    register int32x4_t a00 __asm__("v16"), a01 __asm__("v17"), a02 __asm__("v18"), a03 __asm__("v19");
    register int32x4_t a10 __asm__("v20"), a11 __asm__("v21"), a12 __asm__("v22"), a13 __asm__("v23");
    register int32x4_t a20 __asm__("v24"), a21 __asm__("v25"), a22 __asm__("v26"), a23 __asm__("v27");
    register int32x4_t a30 __asm__("v28"), a31 __asm__("v29"), a32 __asm__("v30"), a33 __asm__("v31");
    __asm__("ld4r {v16.4s, v17.4s, v18.4s, v19.4s}, [%[b]]\n\t"
            "tbnz %w[h], #2, 10f\n\t"
            "ld4r {v20.4s, v21.4s, v22.4s, v23.4s}, [%[b]]\n\t"
            "tbnz %w[h], #3, 5f\n\t"
            "ld4r {v24.4s, v25.4s, v26.4s, v27.4s}, [%[b]]\n\t"
            "ld4r {v28.4s, v29.4s, v30.4s, v31.4s}, [%[b]]\n\t"
            "tbnz %w[kq], #0, 4f\n"
            "1:\n\t"
            "ldp q4, q5, [%[w]], #32\n\t" SD16("v4") "3:\n\t" SD16("v5")
            "subs %[n], %[n], #1\n\t"
            "b.ne 1b\n\t"
            "b 9f\n"
            "4:\n\t"
            "ldr q5, [%[w]], #16\n\t"
            "b 3b\n"
            "5:\n\t"
            "tbnz %w[kq], #0, 7f\n"
            "6:\n\t"
            "ldp q4, q5, [%[w]], #32\n\t" SD8("v4") "8:\n\t" SD8("v5")
            "subs %[n], %[n], #1\n\t"
            "b.ne 6b\n\t"
            "b 9f\n"
            "7:\n\t"
            "ldr q5, [%[w]], #16\n\t"
            "b 8b\n"
            "10:\n\t"
            "tbnz %w[kq], #0, 12f\n"
            "11:\n\t"
            "ldp q4, q5, [%[w]], #32\n\t" SDQ("v4") "13:\n\t" SDQ("v5")
            "subs %[n], %[n], #1\n\t"
            "b.ne 11b\n\t"
            "b 9f\n"
            "12:\n\t"
            "ldr q5, [%[w]], #16\n\t"
            "b 13b\n"
            "9:\n"
            : [c] "+r"(c), [w] "+r"(w), [n] "+r"(steps), "=w"(a00), "=w"(a01), "=w"(a02),
              "=w"(a03), "=w"(a10), "=w"(a11), "=w"(a12), "=w"(a13), "=w"(a20), "=w"(a21),
              "=w"(a22), "=w"(a23), "=w"(a30), "=w"(a31), "=w"(a32), "=w"(a33)
            : [st] "r"(np4), [b] "r"(bias), [h] "r"(width), [kq] "r"(kq)
            : "v0", "v1", "v2", "v3", "v4", "v5", "memory", "cc");
    const int32x4_t a[4][4] = {{a00, a10, a20, a30}, {a01, a11, a21, a31},
                               {a02, a12, a22, a32}, {a03, a13, a23, a33}}; /* [r][v] */
    int8x16_t b[4]; /* all four channels (of a narrower tile the first bytes); rows stored */
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) RQ16(b[r], a[r][0], a[r][1], a[r][2], a[r][3], r);
    if (clo) /* lo = -128 and hi = 127 clamp nothing */
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) b[r] = vmaxq_s8(b[r], lo);
    if (chi)
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) b[r] = vminq_s8(b[r], hi);
    int8_t *yr = y + (size_t)i;
    if (i + width <= whole) { /* whole: 0 when rows < 4 */
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r, yr += ldy) {
        if (width == 16)
          vst1q_s8(yr, b[r]);
        else if (width == 8)
          vst1_s8(yr, vget_low_s8(b[r]));
        else
          vst1q_lane_s32((int32_t *)(void *)yr, vreinterpretq_s32_s8(b[r]), 0);
      }
    } else {
      store_rows4(yr, ldy, b[0], b[1], b[2], b[3], rows, n - i < width ? n - i : width);
    }
    if (width < 16) {
      i += width;
      break;
    }
  }
  return i < n ? i : n;
}
#undef SD4
#undef SD8
#undef SDQ
#undef SD16

/* sum (a - azp) b = sum a b - azp sum b: both sums by sdot (sum b against ones). The
 * last k % 16 elements (k >= 16): the 16 bytes ending at k with the lanes already counted
 * masked off (in a and in the ones), so each product is counted once. */
static const int8_t tail_mask[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                     -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

DOT void ert_gemv_s8__dot(int32_t k, int32_t n, const int8_t *a, int32_t azp, const int8_t *b,
                          int32_t *acc) {
  const int8x16_t ones = vdupq_n_s8(1);
  const size_t ks = (size_t)k;
  const int32_t kv = k & ~15, rem = k - kv;
  const int tail = rem > 0 && k >= 16;
  const int8x16_t mask = vld1q_s8(tail_mask + rem);
  const int8x16_t xt = tail ? vandq_s8(vld1q_s8(a + k - 16), mask) : vdupq_n_s8(0);
  const int8x16_t ot = vandq_s8(ones, mask);
  int32_t c = 0;
  for (; c + 4 <= n; c += 4) {
    const int8_t *b0 = b + (size_t)c * ks, *b1 = b0 + ks, *b2 = b1 + ks, *b3 = b2 + ks;
    int32x4_t s0 = vdupq_n_s32(0), s1 = s0, s2 = s0, s3 = s0, u0 = s0, u1 = s0, u2 = s0, u3 = s0;
    int32_t i = 0;
    for (; i < kv; i += 16) {
      const int8x16_t x = vld1q_s8(a + i);
      const int8x16_t y0 = vld1q_s8(b0 + i), y1 = vld1q_s8(b1 + i);
      const int8x16_t y2 = vld1q_s8(b2 + i), y3 = vld1q_s8(b3 + i);
      s0 = vdotq_s32(s0, x, y0), u0 = vdotq_s32(u0, ones, y0);
      s1 = vdotq_s32(s1, x, y1), u1 = vdotq_s32(u1, ones, y1);
      s2 = vdotq_s32(s2, x, y2), u2 = vdotq_s32(u2, ones, y2);
      s3 = vdotq_s32(s3, x, y3), u3 = vdotq_s32(u3, ones, y3);
    }
    if (tail) {
      const int32_t o = k - 16;
      const int8x16_t y0 = vld1q_s8(b0 + o), y1 = vld1q_s8(b1 + o);
      const int8x16_t y2 = vld1q_s8(b2 + o), y3 = vld1q_s8(b3 + o);
      s0 = vdotq_s32(s0, xt, y0), u0 = vdotq_s32(u0, ot, y0);
      s1 = vdotq_s32(s1, xt, y1), u1 = vdotq_s32(u1, ot, y1);
      s2 = vdotq_s32(s2, xt, y2), u2 = vdotq_s32(u2, ot, y2);
      s3 = vdotq_s32(s3, xt, y3), u3 = vdotq_s32(u3, ot, y3);
    }
    int32x4_t r = vmlsq_n_s32(hsum4(s0, s1, s2, s3), hsum4(u0, u1, u2, u3), azp);
    if (rem > 0 && !tail) {
      const int32_t t[4] = {gemv_col(k, kv, a, azp, b0), gemv_col(k, kv, a, azp, b1),
                            gemv_col(k, kv, a, azp, b2), gemv_col(k, kv, a, azp, b3)};
      r = vaddq_s32(r, vld1q_s32(t));
    }
    vst1q_s32(acc + c, r);
  }
  for (; c < n; ++c) { /* one column: the same sums */
    const int8_t *bc = b + (size_t)c * ks;
    int32x4_t s0 = vdupq_n_s32(0), u0 = s0;
    for (int32_t i = 0; i < kv; i += 16) {
      const int8x16_t y = vld1q_s8(bc + i);
      s0 = vdotq_s32(s0, vld1q_s8(a + i), y), u0 = vdotq_s32(u0, ones, y);
    }
    if (tail) {
      const int8x16_t y = vld1q_s8(bc + k - 16);
      s0 = vdotq_s32(s0, xt, y), u0 = vdotq_s32(u0, ot, y);
    }
    acc[c] = vaddvq_s32(s0) - azp * vaddvq_s32(u0) + (rem > 0 && !tail ? gemv_col(k, kv, a, azp, bc) : 0);
  }
}
#endif
