/* cpu.h: the hot micro-kernels, chosen once at start-up from the CPU's features.
 *
 * The reference kernels call these through ert_cpu; an entry left NULL means "use the
 * portable code in csrc/kernels/ref", which is always correct. On Linux ARM, NEON
 * entries are filled in when the build has them (ERT_NEON_KERNELS, set by
 * `make NEON=1`) and the kernel reports the feature (getauxval(AT_HWCAP)); setting the
 * environment variable EDGERT_FORCE_REF=1 before the library loads keeps them NULL.
 * On x86-64 the AVX2 + FMA entries (ERT_X86_KERNELS, csrc/kernels/x86) are filled in
 * when CPUID reports both and the OS saves the ymm registers (XGETBV), a few of them
 * replaced by AVX-512F (sgemm_block, dot_rows, dw3) or AVX-512 VNNI versions when CPUID
 * reports those and the OS saves the zmm and opmask state; the same variable keeps them
 * NULL too.
 *
 * Contracts (each NEON kernel is tested against them by csrc/tests/kernel_test.c):
 *   sgemm_rows  r[i][j] = sum over k < kc of rows[i][k] * b[k*16 + j], i < 4, j < 16 (A
 *               read in place from four row pointers, which may repeat; b a packed B
 *               panel, see ref/sgemm.c), stored into C as ert_sgemm_store says. kc >= 1.
 *   sgemm_rows6 the same for six rows (rows[0..6), i < 6). On aarch64 NEON it also reads
 *               B in place and over a window when st->bgap or st->taps is not 0: with
 *               ldb = 16 + bgap/4 and taps = pitch << 32 | (kw-1) << 24 | (kh-1) << 8 |
 *               (kw-1), r[i][j] = sum over ky < kh, kx < kw, k < kc of
 *               rows[i][(ky*kw + kx)*kc + k] * b[ky*pitch + kx + k*ldb + j] (a
 *               convolution's B read straight from the image, a tap's rows a plane apart).
 *   sgemm_rows6_n8 sgemm_rows6 for the first 8 columns only (j < 8; b is still a
 *               16-column panel), stored into C columns 0..7: the partial panels of 8
 *               columns or fewer.
 *   sgemm_rows_ld, sgemm_rows6_ld  sgemm_rows and sgemm_rows6 with B read in place:
 *               b[k*ldb + j] instead of b[k*16 + j] (the full 16-column panels of a B
 *               matrix with contiguous rows, which then needs no packing).
 *   dwK_sS      y[oy*ow + i] = bias + sum over ky, kx < K of
 *               w[ky*K + kx] * x[oy*rs + ky*ts + i*S + kx] for oy < oh, i < ow (K = 3
 *               or 5, S = 1 with ow >= 4 or S = 2 with ow >= 5; K = 3 on x86-64 only,
 *               for the windows dw3 below does not take): one depthwise KxK
 *               output plane over a padded input
 *               (rs: the step of an output row, ts: of a window row; no column
 *               dilation); reads nothing outside the taps' span of each row.
 *   dw3         one depthwise 3x3 output plane read straight from the input plane
 *               (no padded copy): y[oy*ow + ox] = min(max(bias + sum over ky, kx < 3 of
 *               k[3ky + kx] X(oy*sh - pt + ky, ox*sw - 1 + kx), lo), hi) for oy < oh,
 *               ox < ow (a NaN sum stays NaN), the taps added in row order, X(r, c) =
 *               x[r*w + c] inside [0, h) x [0, w) and 0 outside; sw 1 or 2, sh >= 1,
 *               pt >= 0, ow >= 5 and (ow - 1)*sw + 1 <= w (one column of padding left, at
 *               most one right). zero: w floats of 0. Reads nothing outside x[0, h*w).
 *   act_apply   ert_act_apply(act, x, count) for the kinds it handles, returning 1;
 *               returns 0 (x untouched) for the others. sigmoid, tanh and silu are
 *               within 5e-7 absolute of the exact functions (silu: 5e-7 max(1, |x|)).
 *   binary_f32  o[i] = A op B for i < n, op an ERT_BIN_* code, where A is a[i] when sa
 *               else a[0] (B likewise; o may be a or b), then act (NULL: none) as
 *               ert_act_apply; returns 1, or 0 (o untouched) for ops or activation kinds
 *               it does not handle.
 *   softmax_row y[j] = exp(x[j] - max x) / sum over t of exp(x[t] - max x), j < n (n >= 1;
 *               y may be x); each value within 1e-5 relative of the exact softmax.
 *   rnn_mv      out[v*os + j] = (add ? add[v*as + j] : 0) + sum over i < k of
 *               vec[v*vs + i] * mt[i*ld + j], for v < nv and j < nj (a row vector times
 *               row-major B in ref/sgemm.c's matrix-vector path; add may be out).
 *   rnn_panels  out[q*16 + j] = (add ? add[q*16 + j] : 0) + sum over i < k of vec[i] *
 *               w[(q*k + i)*16 + j], for q < np and j < 16 (k >= 1, np >= 1): one vector
 *               times np consecutive 16-column weight panels of k rows (the recurrent
 *               ops' products, ref/rnn_common.h; out may be add).
 *   dot_rows    out[j] = sum over i < k of x[i] * r[j*ld + i], for j < n (k >= 1): dot
 *               products of one vector with rows (matrix-vector products, narrow GEMMs).
 *   lstm_cell   for j < n, with C(x) = clip > 0 ? min(max(x, -clip), clip) : x and the
 *               peepholes pi, po, pf = p[j], p[n + j], p[2n + j] (0 when p is NULL):
 *               i = sigmoid(C(g[j] + pi c[j])), f = sigmoid(C(g[2n + j] + pf c[j])),
 *               c[j] := f c[j] + i tanh(C(g[3n + j])), o = sigmoid(C(g[n + j] + po c[j])),
 *               h[j] = o tanh(c[j]): the LSTM gates (i o f c) with the default activations.
 *   gru_cell    phase 0: g[j] := sigmoid(C(g[j] + (x ? x[j] : 0))) for j < 2n, then
 *               rh[j] = g[n + j] h[j] for j < n when rh is not NULL; phase 1: for j < n,
 *               pre = x ? x[2n + j] + g[n + j] (g[2n + j] + (rb ? rb[j] : 0)) : g[2n + j],
 *               h[j] := (1 - g[j]) tanh(C(pre)) + g[j] h[j] (the GRU gates z r h);
 *               phase 2: phase 0 then phase 1 with the same arguments.
 *               sigmoid and tanh within 1e-6 absolute of the exact functions.
 * The f32 NEON and AVX2 kernels may differ from the reference by rounding only (fused or
 * reassociated multiply-adds); the tests bound that at 1e-5 relative to the operands'
 * magnitude. */
#ifndef ERT_CPU_H_
#define ERT_CPU_H_

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* How sgemm_rows stores its 4x16 result r: C(i, j) = c[i*ldc + j] becomes
 * alpha*r[i][j] + (init ? (bias ? bias[i] : 0) : C(i, j)), then act (NULL: none; else
 * one of relu, clip, hard_sigmoid, hard_swish, leaky_relu, as ert_act_apply). */
typedef struct ert_sgemm_store {
  ptrdiff_t ldc;
  const float *bias;
  const ert_act_params *act;
  float alpha;
  int init;
  /* aarch64 NEON sgemm_rows6 only (0 elsewhere): bytes between a B row's 16 floats and
   * the next row, and the window (see sgemm_rows6 above) */
  ptrdiff_t bgap;
  uint64_t taps;
#if defined(ERT_X86_KERNELS)
  int bias_cols; /* bias[j] per column instead of bias[i] per row (the AVX-512 block only) */
  const float *res; /* the AVX-512 block only: res[i*ldc + j] added before act (NULL: none) */
#endif
} ert_sgemm_store;

typedef void (*ert_sgemm_rows_fn)(int32_t kc, const float *const *rows, const float *b, float *c,
                                  const ert_sgemm_store *st);
typedef void (*ert_sgemm_rows_ld_fn)(int32_t kc, const float *const *rows, const float *b,
                                     ptrdiff_t ldb, float *c, const ert_sgemm_store *st);
typedef void (*ert_dw_plane_fn)(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                                ptrdiff_t ts, const float *w, float bias);

typedef struct ert_dw3_geom {
  int32_t h, w, oh, ow, sh, sw, pt;
  float lo, hi;
} ert_dw3_geom;
typedef void (*ert_dw3_fn)(float *y, const float *x, const float *zero, const float *k, float bias,
                           const ert_dw3_geom *g);

typedef struct ert_conv3s2_geom {
  int32_t c, h, w, m, oh, ow, pt, pl;
  float lo, hi;
} ert_conv3s2_geom;

typedef int (*ert_act_fn)(const ert_act_params *act, float *x, size_t count);

enum { ERT_BIN_ADD, ERT_BIN_SUB, ERT_BIN_MUL, ERT_BIN_DIV }; /* binary_f32 ops */
typedef int (*ert_binary_f32_fn)(int op, float *o, const float *a, const float *b, size_t n,
                                 int sa, int sb, const ert_act_params *act);
typedef void (*ert_softmax_row_fn)(const float *x, float *y, size_t n);
typedef void (*ert_rnn_mv_fn)(size_t k, size_t nj, const float *mt, size_t ld, const float *vec,
                              size_t vs, size_t nv, const float *add, size_t as, float *out,
                              size_t os);
typedef void (*ert_rnn_panels_fn)(size_t k, size_t np, const float *w, const float *vec,
                                  const float *add, float *out);
typedef void (*ert_dot_rows_fn)(const float *x, const float *r, ptrdiff_t ld, int32_t k,
                                int32_t n, float *out);
typedef void (*ert_lstm_cell_fn)(const float *g, float *c, float *h, size_t n, const float *p,
                                 float clip);
typedef void (*ert_gru_cell_fn)(int phase, float *g, const float *x, const float *rb, float *h,
                                float *rh, size_t n, float clip);
/* Pooling rows (ref/pool.c, separable form; op 0 sum, 1 max), exact (same operations in
 * the same order as the reference, so NaN handling is identical):
 *   pool_vred   t[j] = x[j], then for r = 1 .. rows-1 in order t[j] = t[j] + v (sum) or
 *               v > t[j] ? v : t[j] (max) with v = x[r*rs + j], for j < n (rows >= 1).
 *   pool_hred   y[i] = t[i*sw] + t[i*sw+1] (+ t[i*sw+2]) left to right (sum), or for max
 *               m = a > b ? a : b, then (kw 3) c > m ? c : m, with a, b, c = t[i*sw + 0..2],
 *               i < n, for (kw, sw) = (2, 2), (3, 1), (3, 2): returns 1; else 0 (y untouched).
 *   gpool       over x[0..n) (n >= 1) in four partials (x[i] into partial i % 4 for
 *               i < n - n % 4, the rest into partial 0, in order; max by v > m ? v : m from
 *               -inf), combined as (p0 op p1) op (p2 op p3) (max: p1 > p0 ? p1 : p0, p3 > p2 ?
 *               p3 : p2, then the second > the first ? ...). global_avg_pool calls it with
 *               op 0 only: global_max_pool needs a NaN to stick, which this max skips. */
typedef void (*ert_pool_vred_fn)(float *t, const float *x, ptrdiff_t rs, int32_t rows, int32_t n,
                                 int op);
typedef int (*ert_pool_hred_fn)(float *y, const float *t, int32_t n, int32_t kw, int32_t sw,
                                int op);
typedef float (*ert_gpool_fn)(const float *x, size_t n, int op);

typedef struct ert_kernels {
  const char *isa; /* what was selected: "ref", "neon", "neon+dotprod", "avx2", "avx2+avx512f" or
                    * "avx2+avx512f+vnni" */
  ert_sgemm_rows_fn sgemm_rows, sgemm_rows6, sgemm_rows6_n8;
  ert_sgemm_rows_ld_fn sgemm_rows_ld, sgemm_rows6_ld;
  ert_dw_plane_fn dw3_s1, dw3_s2, dw5_s1, dw5_s2;
  ert_dw3_fn dw3;
  ert_act_fn act_apply;
  ert_binary_f32_fn binary_f32;
  ert_softmax_row_fn softmax_row;
  ert_rnn_mv_fn rnn_mv;
  ert_rnn_panels_fn rnn_panels;
  ert_dot_rows_fn dot_rows;
  ert_lstm_cell_fn lstm_cell;
  ert_gru_cell_fn gru_cell;
  /*   dw_direct   one depthwise KxK output plane of an unpadded h x w image, zero padded:
   *               y[oy*ow + ox] = bias + sum over ky, kx < k of wt[ky*k + kx] *
   *               X(oy*s + ky - pt, ox*s + kx - pl), X(r, c) = x[r*w + c] inside the
   *               image, 0 outside (dilation 1; ow >= 1); reads only the image's floats.
   *               Returns 1, or 0 (y untouched) for the k, s and pads it does not handle;
   *               with oh == 0 it only answers. */
  int (*dw_direct)(float *y, const float *x, int32_t h, int32_t w, int32_t oh, int32_t ow,
                   int32_t k, int32_t s, int32_t pt, int32_t pl, const float *wt, float bias);
  /*   conv3s2     output rows oy0 <= oy < oy1 of a 3x3, stride-2, undilated convolution of
   *               one image of c <= 4 planes of h x w (h*w floats apart), zero padded (pt
   *               rows above, pl columns left): for o < m and ox < ow (ow >= 1),
   *               y[o*oh*ow + oy*ow + ox] = min(max(b + sum over i < c, ky, kx < 3 of
   *               wt[(o*c + i)*9 + ky*3 + kx] X(i, oy*2 - pt + ky, ox*2 - pl + kx), lo), hi)
   *               (a NaN sum stays NaN), b = bias ? bias[o] : 0, X(i, r, q) = x[i*h*w +
   *               r*w + q] inside the image, 0 outside; reads only the image's floats. */
#if defined(ERT_X86_KERNELS) /* x86-64 only: the boards' table stays as it was */
  /*   sgemm_block C(i, j) = sum over k < kc of a[i*lda + k] * B(k, j) for i < m, j < n
   *               (m, n, kc >= 1), B(k, j) = b[(j / 16)*ps + k*ldb + j % 16]: B's rows in
   *               place (ps = 16, ldb their step) or packed 16-column panels (ps = 16*kc,
   *               ldb = 16); stored into C(i, j) = c[i*ldc + j] as ert_sgemm_store says
   *               (bias[i], or bias[j] when st->bias_cols; with st->res, res[i*ldc + j]
   *               added before act). Reads and writes no column past n. AVX-512F only. */
  void (*sgemm_block)(int32_t m, int32_t n, int32_t kc, const float *a, ptrdiff_t lda,
                      const float *b, ptrdiff_t ldb, ptrdiff_t ps, float *c,
                      const ert_sgemm_store *st);
  void (*conv3s2)(float *y, const float *x, const float *wt, const float *bias,
                  const ert_conv3s2_geom *g, int32_t oy0, int32_t oy1);
  /*   conv3s1     conv3s2's contract for a 3x3, stride-1, undilated convolution of c >= 1
   *               planes: y[o*oh*ow + oy*ow + ox] = min(max(b + sum over i < c, ky, kx < 3
   *               of wt[(o*c + i)*9 + ky*3 + kx] X(i, oy - pt + ky, ox - pl + kx), lo), hi)
   *               for o < m, ox < ow, oy0 <= oy < oy1. AVX-512F only. */
  void (*conv3s1)(float *y, const float *x, const float *wt, const float *bias,
                  const ert_conv3s2_geom *g, int32_t oy0, int32_t oy1);
  /*   dw3_nhwc    output pixels p0 <= p < p1 (p = oy*ow + ox) of a depthwise 3x3 layer in
   *               NHWC: y[p*c + ch] = min(max(s, lo), hi) for ch < c, with s = (P0 + P1) +
   *               P2 (a NaN sum stays NaN), Pky = b + sum over kx < 3, in order, of
   *               kt[(3ky + kx)*c + ch] * X(oy*sh - pt + ky, ox*sw - 1 + kx) by fused
   *               multiply-adds (b = bias ? bias[ch] : 0 for ky = 0, else 0; dw3's
   *               arithmetic, so the results equal dw3's bit for bit), X(r, q) = x[(r*w +
   *               q)*c + ch] inside [0, h) x [0, w) and 0 outside; sw 1 or 2. kt: the
   *               weights tap-major. Reads nothing outside x[0, h*w*c). AVX-512F only. */
  void (*dw3_nhwc)(float *y, const float *x, const float *kt, const float *bias,
                   const ert_dw3_geom *g, int32_t c, int32_t p0, int32_t p1);
  /*   pack_at     dst[i*kc + k] = src[k*ld + i] for i < m, k < kc: a block of a GEMM's A
   *               stored transposed (an NCHW input of an NHWC pointwise layer), packed
   *               row by row. AVX-512F only. */
  void (*pack_at)(float *dst, const float *src, ptrdiff_t ld, int32_t m, int32_t kc);
#endif
  ert_pool_vred_fn pool_vred;
  ert_pool_hred_fn pool_hred;
  ert_gpool_fn gpool;
  /* crc32       ert_crc32 (runtime.h): the zlib CRC-32 of data[0..size) continuing from crc */
  uint32_t (*crc32)(uint32_t crc, const void *data, size_t size);
  /* int8 entries (integer results: the kernels must match the reference exactly)
   *   qgemm_s8    acc[r*lda + i] = bias[r] + sum over q < kq, j < 4 of
   *               col[4*np*q + 4*i + j] * wq[16*q + 4*r + j], for r < 4 and i < np: the
   *               conv2d_s8 im2col block in quads of taps (ref/conv2d_s8.c); sdot when the
   *               CPU has dotprod.
   *   pack_w_s8   wq[16*q + 4*r + j] = r < rows && t < k ? w[r*ld + t] : 0 with t = 4q + j,
   *               for q < ceil(k/4), r < 4; wsum[r] = sum over t of those (rows <= 4).
   *   quads_s8    dst[4*np*q + 4*i + j] = t < k && i < n ? src[t*ld + i] : 0 with t = 4q + j,
   *               for q < ceil(k/4) and i < np (n <= np): rows in that quad layout.
   *   dw_taps_s16 acc[r*n + i] = bias + sum over t < taps of w[t] * base[r*rs + off[t] + i],
   *               i < n, r < rows (the taps' products fit int16; rows >= 1).
   *   widen_s8    for r < rows, in row r (d + r*ds, s + r*ss): d[pre + i] = s[i*stride] - zp
   *               for i < n, d[i] = 0 for the other i < len (pre + n <= len, stride >= 1,
   *               rows >= 1; reads only those bytes of s).
   *   gemv_s8     acc[c] = sum over i < k of (a[i] - azp) * b[c*k + i], c < n; sdot when the
   *               CPU has dotprod.
   *   requant_row ert_requant_row (quant_s8.h).
 *   qgemm_s8_p  qgemm_s8 for weights wq in [-127, 127] only (pairs of int8 products
 *               summed in int16, exact only then): conv2d_s8 uses it for nodes whose
 *               constant W prepare found free of -128 (no dotprod: sdot is faster).
 *   binary_s8   one row of int8 add (op 0) or mul (op 1), ref/binary_s8.c: p = {a_zp, b_zp,
 *               y_zp, ma, mb, shift, lo, hi} (mul: ma is the multiplier), for i < n with
 *               A = a[sa ? i : 0], B = b[sb ? i : 0] (sa, sb in {0, 1}; y may be a or b).
 *   lut_s8      y[i] = t[x[i] + 128], i < n (y may be x); aarch64 only.
 *   upsample2   d[2i] = d[2i + 1] = s[i], i < n, elements of es bytes (1, 2 or 4; n * es
 *               >= 16; d and s apart): resize's nearest table o -> o / 2 along a row.
 *   quantize_s8 y[i] = the per-tensor int8 quantize_linear of x[i] by scale s and zero point z
 *               (ref/quantize.c, quantize_one), i < n: IEEE division, the same float steps;
 *               aarch64 and x86-64 only.
 *   dequantize_s8 y[i] = ((float)x[i] - z) * s, i < n (two IEEE operations, not fused).
 *   gpool_s8    sum (is_max 0) or max (1; -128 when n = 0) of x[0..n).
 *   pool_s8_row y[i] for i < n over the window v = x[r*rs + i*sw + kx], r < rows, kx < kw
 *               (rows >= 1): max of v (is_avg 0), or clamp to int8 of zp + round_div(sum
 *               (v - zp), count) (ref/pool_s8.c); returns 1, or 0 (y untouched) for window
 *               shapes or counts it does not handle. */
  void (*qgemm_s8)(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                   const int32_t *bias, int32_t *acc, int32_t lda);
  void (*pack_w_s8)(int8_t *wq, int32_t *wsum, const int8_t *w, size_t ld, int32_t rows,
                    int32_t k);
  void (*quads_s8)(int8_t *dst, const int8_t *src, size_t ld, int32_t k, int32_t n, int32_t np);
  void (*dw_taps_s16)(int32_t *acc, const int16_t *base, const ptrdiff_t *off, const int16_t *w,
                      int32_t n, int32_t taps, int32_t bias, int32_t rows, ptrdiff_t rs);
  void (*widen_s8)(int16_t *d, const int8_t *s, int32_t pre, int32_t n, int32_t len, int32_t stride,
                   int32_t zp, int32_t rows, ptrdiff_t ds, ptrdiff_t ss);
  void (*gemv_s8)(int32_t k, int32_t n, const int8_t *a, int32_t azp, const int8_t *b,
                  int32_t *acc);
  void (*requant_row)(const int32_t *acc, size_t n, int32_t mult, int32_t shift, int32_t zp,
                      int32_t lo, int32_t hi, int8_t *y);
  void (*qgemm_s8_p)(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                     const int32_t *bias, int32_t *acc, int32_t lda);
  void (*binary_s8)(int op, const int32_t *p, const int8_t *a, const int8_t *b, int8_t *y,
                    size_t n, int sa, int sb);
  void (*lut_s8)(const int8_t *t, const int8_t *x, int8_t *y, size_t n);
  void (*upsample2)(void *d, const void *s, size_t n, size_t es);
  void (*quantize_s8)(const float *x, int8_t *y, size_t n, float s, float z);
  void (*dequantize_s8)(const int8_t *x, float *y, size_t n, float s, float z);
  int32_t (*gpool_s8)(const int8_t *x, size_t n, int is_max);
  int (*pool_s8_row)(int8_t *y, const int8_t *x, ptrdiff_t rs, int32_t rows, int32_t n,
                     int32_t kw, int32_t sw, int32_t zp, int32_t count, int is_avg);
  /*   dw3_s8      one depthwise 3x3 output plane, requantized: for oy < oh, ox < ow,
   *               y[oy*ow + ox] = clamp(q[2] + requant(a, q[0], q[1]), q[3], q[4]) with
   *               a = bias + sum over ky, kx < 3 of w[3*ky + kx] * (x[(oy*s + ky)*ld +
   *               ox*s + kx] - q[5]) (raw int8 x, zero point q[5]; s is 1 or 2; w in
   *               [-127, 127]; shift q[1] >= 31; the caller keeps a and bias - q[5] *
   *               sum w within int32). Reads x[r*ld + c] for c < ow*s + 48 in every
   *               row r it uses; armv7 only (aarch64 has dwc3_s8). */
  void (*dw3_s8)(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w, int32_t bias,
                 const int32_t *q, int32_t oh, int32_t ow, int32_t s);
  /*   dwc3_s8     16 output planes of a depthwise kxk convolution (channels c < 16, k =
   *               g[13], 3 or 5), requantized: y[c*ys + oy*ow + ox] = clamp(g[8] +
   *               requant(a, qp[2c+1], g[11]), g[9], g[10]) for oy < oh, ox < ow, with a =
   *               qp[2c] + sum over ky, kx < k of w[k*k*c + k*ky + kx] * (X(c, oy*sy + ky -
   *               pt, ox*s + kx - pl) - xzp), X(c, r, j) = x[c*xs + r*iw + j] inside [0, ih)
   *               x [0, iw), xzp outside; g = {ih, iw, oh, ow, s, pt, pl, xzp, y_zp, lo,
   *               hi, shift, R, k, sy}: strides s (along rows) and sy (down) 1 or 2, w in
   *               [-127, 127], shift >= 31, oh*ow >= 16, at most R output rows per band
   *               (R <= oh, R*ow >= 16); the caller keeps a and qp[2c] - xzp sum w within
   *               int32. buf: 16*((R-1)*sy + k)*cols + 320 + 16*R*ow bytes, cols = (ow-1)*s
   *               + k; reads x only below xend; aarch64 only. */
  void (*dwc3_s8)(int8_t *y, size_t ys, const int8_t *x, size_t xs, const int8_t *xend,
                  const int8_t *w, const int32_t *qp, const int32_t *g, int8_t *buf);
  /*   qgemm_rq_s8 qgemm_s8's accumulators, requantized: y[r*ldy + i] = clamp(q[1] +
   *               requant(acc[r][i], mult[r], q[0]), q[2], q[3]) for r < rows (<= 4),
   *               i < d, shift q[0] > 31 (bias and mult: 4 entries); returns d <= n, the
   *               pixels done: min(n, np - np % 8) on x86-64, at least that with sdot
   *               (its last tile may be 4 pixels wide), n when np >= 16 (else 0)
   *               without sdot; y untouched past d. When qgemm_s8_p is
   *               set (no sdot), for weights in [-127, 127] only, as qgemm_s8_p; aarch64
   *               and x86-64 only. */
  int32_t (*qgemm_rq_s8)(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                         const int32_t *bias, const int32_t *mult, const int32_t *q, int8_t *y,
                         size_t ldy, int32_t n, int32_t rows);
  /*   taps_s8     dst[np4*q + 4*i + j] = src[off[t < k ? t : 0] + i*s] with t = 4q + j, for
   *               q < ceil(k/4), i < n (s is 1 or 2, n >= 17): the quads of a run of
   *               conv2d_s8 windows along an output row (taps past k repeat tap 0: their
   *               weights are 0); reads only those bytes of src. */
  void (*taps_s8)(int8_t *dst, size_t np4, const int8_t *src, const ptrdiff_t *off, int32_t k,
                  int32_t n, int32_t s);
} ert_kernels;

/* Filled by a load-time constructor in cpu.c; read-only afterwards. */
extern ert_kernels ert_cpu;

/* Re-runs the selection (the kernel tests use it after changing EDGERT_FORCE_REF). */
void ert_cpu_select(void);

/* NEON kernels (csrc/kernels/neon), present when ERT_NEON_KERNELS is defined. */
void ert_sgemm_rows_f32__neon(int32_t kc, const float *const *rows, const float *b, float *c,
                              const ert_sgemm_store *st);
void ert_sgemm_rows6_f32__neon(int32_t kc, const float *const *rows, const float *b, float *c,
                               const ert_sgemm_store *st); /* aarch64 only */
void ert_conv2d_dw3_f32__neon(float *y, const float *x, const float *zero, const float *k,
                              float bias, const ert_dw3_geom *g);
void ert_conv2d_dw5s1_f32__neon(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                                ptrdiff_t ts, const float *w, float bias);
void ert_conv2d_dw5s2_f32__neon(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                                ptrdiff_t ts, const float *w, float bias);
int ert_act_apply_f32__neon(const ert_act_params *act, float *x, size_t count);
int ert_binary_f32__neon(int op, float *o, const float *a, const float *b, size_t n, int sa, int sb,
                         const ert_act_params *act);
void ert_softmax_row_f32__neon(const float *x, float *y, size_t n);
/* kernels/neon/rnn_f32.c */
uint32_t ert_crc32__arm(uint32_t crc, const void *data, size_t size); /* aarch64 only */
void ert_dot_rows_f32__neon(const float *x, const float *r, ptrdiff_t ld, int32_t k, int32_t n,
                            float *out);
void ert_rnn_mv_f32__neon(size_t k, size_t nj, const float *mt, size_t ld, const float *vec,
                          size_t vs, size_t nv, const float *add, size_t as, float *out,
                          size_t os);
void ert_rnn_panels_f32__neon(size_t k, size_t np, const float *w, const float *vec,
                              const float *add, float *out);
void ert_lstm_cell_f32__neon(const float *g, float *c, float *h, size_t n, const float *p,
                             float clip);
void ert_gru_cell_f32__neon(int phase, float *g, const float *x, const float *rb, float *h,
                            float *rh, size_t n, float clip);

/* AVX2 + FMA kernels (csrc/kernels/x86), present when ERT_X86_KERNELS is defined (x86-64
 * builds); compiled per function for AVX2, called only when CPUID reports AVX2 and FMA
 * and the OS saves the ymm registers. */
void ert_sgemm_rows_f32__avx2(int32_t kc, const float *const *rows, const float *b, float *c,
                              const ert_sgemm_store *st);
void ert_sgemm_rows6_f32__avx2(int32_t kc, const float *const *rows, const float *b, float *c,
                               const ert_sgemm_store *st);
void ert_sgemm_rows_ld_f32__avx2(int32_t kc, const float *const *rows, const float *b,
                                 ptrdiff_t ldb, float *c, const ert_sgemm_store *st);
void ert_sgemm_rows6_ld_f32__avx2(int32_t kc, const float *const *rows, const float *b,
                                  ptrdiff_t ldb, float *c, const ert_sgemm_store *st);
void ert_sgemm_rows6_n8_f32__avx2(int32_t kc, const float *const *rows, const float *b, float *c,
                                  const ert_sgemm_store *st);
/* AVX-512F (csrc/kernels/x86/sgemm_avx512.c): called only when CPUID reports AVX512F and
 * the OS saves the zmm and opmask state. */
void ert_sgemm_block_f32__avx512(int32_t m, int32_t n, int32_t kc, const float *a, ptrdiff_t lda,
                                 const float *b, ptrdiff_t ldb, ptrdiff_t ps, float *c,
                                 const ert_sgemm_store *st);
void ert_conv2d_dw3_f32__avx512(float *y, const float *x, const float *zero, const float *k,
                                float bias, const ert_dw3_geom *g);
int ert_act_apply_f32__avx512(const ert_act_params *act, float *x, size_t count);
void ert_rnn_panels_f32__avx512(size_t k, size_t np, const float *w, const float *vec,
                                const float *add, float *out);
void ert_lstm_cell_f32__avx512(const float *g, float *c, float *h, size_t n, const float *p,
                               float clip);
void ert_gru_cell_f32__avx512(int phase, float *g, const float *x, const float *rb, float *h,
                              float *rh, size_t n, float clip);
void ert_conv2d_3x3s2_f32__avx512(float *y, const float *x, const float *wt, const float *bias,
                                  const ert_conv3s2_geom *g, int32_t oy0, int32_t oy1);
void ert_conv2d_3x3s1_f32__avx512(float *y, const float *x, const float *wt, const float *bias,
                                  const ert_conv3s2_geom *g, int32_t oy0, int32_t oy1);
void ert_pack_at_f32__avx512(float *dst, const float *src, ptrdiff_t ld, int32_t m, int32_t kc);
void ert_conv2d_dw3_nhwc_f32__avx512(float *y, const float *x, const float *kt, const float *bias,
                                     const ert_dw3_geom *g, int32_t c, int32_t p0, int32_t p1);
void ert_dot_rows_f32__avx512(const float *x, const float *r, ptrdiff_t ld, int32_t k, int32_t n,
                              float *out);
void ert_dot_rows_f32__avx2(const float *x, const float *r, ptrdiff_t ld, int32_t k, int32_t n,
                            float *out);
void ert_conv2d_dw3_f32__avx2(float *y, const float *x, const float *zero, const float *k,
                              float bias, const ert_dw3_geom *g);
void ert_conv2d_3x3s2_f32__avx2(float *y, const float *x, const float *wt, const float *bias,
                          const ert_conv3s2_geom *g, int32_t oy0, int32_t oy1);
int ert_conv2d_dw_direct_f32__avx2(float *y, const float *x, int32_t h, int32_t w, int32_t oh,
                                   int32_t ow, int32_t k, int32_t s, int32_t pt, int32_t pl,
                                   const float *wt, float bias);
void ert_pack_w_s8__avx2(int8_t *wq, int32_t *wsum, const int8_t *w, size_t ld, int32_t rows,
                         int32_t k);
void ert_quads_s8__avx2(int8_t *dst, const int8_t *src, size_t ld, int32_t k, int32_t n,
                        int32_t np);
void ert_dw_taps_s16__avx2(int32_t *acc, const int16_t *base, const ptrdiff_t *off,
                           const int16_t *w, int32_t n, int32_t taps, int32_t bias, int32_t rows,
                           ptrdiff_t rs);
void ert_requant_row__avx2(const int32_t *acc, size_t n, int32_t mult, int32_t shift, int32_t zp,
                           int32_t lo, int32_t hi, int8_t *y);
void ert_qgemm_s8__avx2(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                        const int32_t *bias, int32_t *acc, int32_t lda);
int32_t ert_qgemm_rq_s8__avx2(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                              const int32_t *bias, const int32_t *mult, const int32_t *q,
                              int8_t *y, size_t ldy, int32_t n, int32_t rows);
void ert_dw3_s8__avx2(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w, int32_t bias,
                      const int32_t *q, int32_t oh, int32_t ow, int32_t s);
void ert_taps_s8__avx2(int8_t *dst, size_t np4, const int8_t *src, const ptrdiff_t *off,
                       int32_t k, int32_t n, int32_t s);
void ert_quantize_s8__avx2(const float *x, int8_t *y, size_t n, float s, float z);
/* AVX-512 VNNI (256-bit vectors) int8 kernels, called only when CPUID reports AVX512F,
 * AVX512VL and AVX512_VNNI and the OS saves the AVX-512 state. */
int32_t ert_qgemm_rq_s8__vnni(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                              const int32_t *bias, const int32_t *mult, const int32_t *q,
                              int8_t *y, size_t ldy, int32_t n, int32_t rows);
void ert_dw3_s8__vnni(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w, int32_t bias,
                      const int32_t *q, int32_t oh, int32_t ow, int32_t s);
void ert_conv2d_dw3s1_f32__avx2(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                                ptrdiff_t ts, const float *w, float bias);
void ert_conv2d_dw3s2_f32__avx2(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                                ptrdiff_t ts, const float *w, float bias);
void ert_conv2d_dw5s1_f32__avx2(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                                ptrdiff_t ts, const float *w, float bias);
void ert_conv2d_dw5s2_f32__avx2(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                                ptrdiff_t ts, const float *w, float bias);

/* int8 NEON kernels (kernels/neon/quant_s8.c); the __dot ones on aarch64 only. */
void ert_qgemm_s8__neon(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                        const int32_t *bias, int32_t *acc, int32_t lda);
void ert_qgemm_s8__dot(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                       const int32_t *bias, int32_t *acc, int32_t lda);
void ert_pack_w_s8__neon(int8_t *wq, int32_t *wsum, const int8_t *w, size_t ld, int32_t rows,
                         int32_t k);
void ert_quads_s8__neon(int8_t *dst, const int8_t *src, size_t ld, int32_t k, int32_t n,
                        int32_t np);
void ert_dw_taps_s16__neon(int32_t *acc, const int16_t *base, const ptrdiff_t *off,
                           const int16_t *w, int32_t n, int32_t taps, int32_t bias, int32_t rows,
                           ptrdiff_t rs);
void ert_widen_s8__neon(int16_t *d, const int8_t *s, int32_t pre, int32_t n, int32_t len,
                        int32_t stride, int32_t zp, int32_t rows, ptrdiff_t ds, ptrdiff_t ss);
void ert_gemv_s8__neon(int32_t k, int32_t n, const int8_t *a, int32_t azp, const int8_t *b,
                       int32_t *acc);
void ert_gemv_s8__dot(int32_t k, int32_t n, const int8_t *a, int32_t azp, const int8_t *b,
                      int32_t *acc);
void ert_requant_row__neon(const int32_t *acc, size_t n, int32_t mult, int32_t shift, int32_t zp,
                           int32_t lo, int32_t hi, int8_t *y);
void ert_qgemm_s8_p__neon(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                          const int32_t *bias, int32_t *acc, int32_t lda);
void ert_dw3_s8__neon(int8_t *y, const int8_t *x, ptrdiff_t ld, const int8_t *w, int32_t bias,
                      const int32_t *q, int32_t oh, int32_t ow, int32_t s);
void ert_taps_s8__neon(int8_t *dst, size_t np4, const int8_t *src, const ptrdiff_t *off,
                       int32_t k, int32_t n, int32_t s);
int32_t ert_qgemm_rq_s8__neon(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                              const int32_t *bias, const int32_t *mult, const int32_t *q, int8_t *y,
                              size_t ldy, int32_t n, int32_t rows);
int32_t ert_qgemm_rq_s8__dot(int32_t kq, int32_t np, const int8_t *col, const int8_t *wq,
                             const int32_t *bias, const int32_t *mult, const int32_t *q, int8_t *y,
                             size_t ldy, int32_t n, int32_t rows);
void ert_dwc3_s8__neon(int8_t *y, size_t ys, const int8_t *x, size_t xs, const int8_t *xend,
                       const int8_t *w, const int32_t *qp, const int32_t *g, int8_t *buf);
/* kernels/neon/ew_s8.c; lut_s8 on aarch64 only. */
void ert_binary_s8__neon(int op, const int32_t *p, const int8_t *a, const int8_t *b, int8_t *y,
                         size_t n, int sa, int sb);
void ert_lut_s8__neon(const int8_t *t, const int8_t *x, int8_t *y, size_t n);
void ert_quantize_s8__neon(const float *x, int8_t *y, size_t n, float s, float z);
void ert_dequantize_s8__neon(const int8_t *x, float *y, size_t n, float s, float z);
/* kernels/neon/resize.c */
void ert_upsample2__neon(void *d, const void *s, size_t n, size_t es);
/* kernels/neon/pool.c */
void ert_pool_vred_f32__neon(float *t, const float *x, ptrdiff_t rs, int32_t rows, int32_t n,
                             int op);
int ert_pool_hred_f32__neon(float *y, const float *t, int32_t n, int32_t kw, int32_t sw, int op);
float ert_gpool_f32__neon(const float *x, size_t n, int op);
int32_t ert_gpool_s8__neon(const int8_t *x, size_t n, int is_max);
int ert_pool_s8_row__neon(int8_t *y, const int8_t *x, ptrdiff_t rs, int32_t rows, int32_t n,
                          int32_t kw, int32_t sw, int32_t zp, int32_t count, int is_avg);

#endif /* ERT_CPU_H_ */
