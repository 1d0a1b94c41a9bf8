/* conv2d_s8.c: conv2d on int8 tensors (int32 accumulation, per-channel
 * requantization). Parameters, inputs and meaning: edgert/converter/ops/conv2d_s8.py;
 * arithmetic: quant_s8.h.
 *
 * Two paths: depthwise (C/group == 1) accumulates output rows tap by tap (each tap a
 * contiguous run of its valid columns); every other convolution gathers blocks of
 * S8_PB output pixels into an int16 im2col block (x - x_zp, 0 for padding;
 * pixel-major) and widens S8_MR weight rows to int16 beside it in its scratch slot, so
 * that outputs are int16 dot products, two pixels by S8_MR channels at a time (the
 * form compilers turn into multiply-add-pairs instructions).
 *
 * With the SIMD entries of ert_cpu (cpu.h), the im2col block is gathered as raw int8 in
 * quads of taps (x_zp for padding) and multiplied by ert_cpu.qgemm_s8; since
 * sum (x - x_zp) w = sum x w - x_zp sum w, the bias absorbs -x_zp sum w and the
 * accumulators are the reference's exactly (no intermediate exceeds int32: prepare
 * bounds k * 255 * 128 + |bias|).
 */
#include <string.h>

#include "cpu.h"
#include "exec.h"
#include "quant_s8.h"
#include "window.h"

#if defined(__GNUC__)
#define S8_INLINE static inline __attribute__((always_inline))
#define S8_NOINLINE static __attribute__((noinline))
#else
#define S8_INLINE static inline
#define S8_NOINLINE static
#endif

enum {
  P_GROUP, P_KH, P_KW, P_SH, P_SW, P_DH, P_DW, P_PT, P_PL, P_PB, P_PR, P_RANK1D, P_ACT,
  P_XZP = P_ACT + 3, P_YZP, P_LO, P_HI, P_SHIFT, P_COUNT
};
enum { S8_PB = 64, S8_MR = 4, S8_SLOTS = 4, S8_DW_CHUNK = 256, S8_DW_PAD_MAX = 1 << 20 };
#define TERM_MAX (255 * 128)

typedef struct geom {
  int32_t n, c, h, w, m, oh, ow, group, cg, mg;
  int32_t kh, kw, sh, sw, dh, dw, pt, pl;
  int32_t k; /* taps per output: cg * kh * kw */
  int32_t xzp, yzp, lo, hi, shift;
} geom;

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

static void read_geom(const ert_node *node, geom *g) {
  ERT_WINDOW_READ(node, g, P_KH, ert_pi(node, P_RANK1D));
  g->n = node->in[0]->shape[0];
  g->c = node->in[0]->shape[1];
  g->m = node->out[0]->shape[1];
  g->group = ert_pi(node, P_GROUP);
  g->cg = g->c / g->group;
  g->mg = g->m / g->group;
  g->k = g->cg * g->kh * g->kw;
  g->xzp = ert_pi(node, P_XZP);
  g->yzp = ert_pi(node, P_YZP);
  g->lo = ert_pi(node, P_LO);
  g->hi = ert_pi(node, P_HI);
  g->shift = ert_pi(node, P_SHIFT);
}

static size_t align64(size_t n) { return (n + 63u) & ~(size_t)63u; }

/* One slot: the im2col block, then S8_MR widened weight rows. */
static size_t col_bytes(const geom *g) {
  const int64_t p = (int64_t)g->oh * g->ow;
  const int64_t pb = p < S8_PB ? p : S8_PB;
  return align64((size_t)pb * (size_t)g->k * 2u);
}

static size_t im2col_scratch(const geom *g) {
  return (size_t)S8_SLOTS * (col_bytes(g) + align64((size_t)S8_MR * (size_t)g->k * 2u));
}

/* The SIMD path's layout for maps of more than S8_PB pixels (several blocks): slots
 * whose im2col part also holds the int8 quads of a block of pixels (at least
 * S8_QCOL / 4 quads of taps a block when k is small: fewer blocks, so fewer calls per
 * group of channels), then the packed weights of every group of S8_MR channels, each
 * followed by its 4 biases and 4 multipliers (pack_bytes apart), packed once per run
 * instead of once per block. A file converted before has the plain slots only
 * (scratch_bytes < ext_scratch): its nodes take blocks of 2 * S8_PB pixels (S8_PB when
 * k is not a multiple of 4) and pack per block. edgert/converter/ops/conv2d_s8.py mirrors this. */
enum { S8_QCOL = 16384 };
#if defined(ERT_NEON_KERNELS) || defined(ERT_X86_KERNELS)
#define S8_EXT 1
#else
#define S8_EXT 0 /* (no SIMD entries: the layout is never used) */
#endif
static size_t pack_bytes(const geom *g) { return (size_t)(g->k + 3) / 4u * 16u + 32u; }
/* The layout's bytes; *pixels: pixels a block, *col: bytes of a slot's im2col part. */
static size_t ext_scratch(const geom *g, int32_t *pixels, size_t *col) {
  const int32_t kq4 = (g->k + 3) / 4 * 4, base = g->k % 4 ? S8_PB : 2 * S8_PB;
  const int32_t q = S8_QCOL / kq4 & ~15, px = q > base ? q : base;
  const int64_t p = (int64_t)g->oh * g->ow;
  const size_t quads = (size_t)kq4 * (size_t)(((p < px ? p : px) + 7) & ~7);
  *pixels = px;
  *col = quads > col_bytes(g) ? align64(quads) : col_bytes(g);
  return (size_t)S8_SLOTS * (*col + align64((size_t)S8_MR * (size_t)g->k * 2u)) +
         align64((size_t)g->group * (((size_t)g->mg + S8_MR - 1) / S8_MR) * pack_bytes(g));
}

/* Rows and columns of the input the windows reach, from (-pt, -pl). */
static int64_t dw_rows(const geom *g) {
  return (int64_t)(g->oh - 1) * g->sh + (int64_t)(g->kh - 1) * g->dh + 1;
}
static int64_t dw_cols(const geom *g) {
  return (int64_t)(g->ow - 1) * g->sw + (int64_t)(g->kw - 1) * g->dw + 1;
}

/* Values per phase of a copied row: each row is stored as sw phases (column c at phase
 * c % sw, index c / sw), so that the taps of strided windows read contiguous runs. */
static int64_t dw_plen(const geom *g) { return (dw_cols(g) + g->sw - 1) / g->sw; }

/* Scratch of the depthwise path: S8_SLOTS int16 copies of the reached part of one input
 * plane (x - x_zp, 0 outside the image), or 0 (direct path) when one copy would exceed
 * S8_DW_PAD_MAX bytes. edgert/converter/ops/conv2d_s8.py mirrors this. */
static size_t dw_scratch(const geom *g) {
  const int64_t bytes = dw_rows(g) * g->sw * dw_plen(g) * 2;
  if (bytes > S8_DW_PAD_MAX) return 0;
  return (size_t)S8_SLOTS * align64((size_t)bytes);
}

/* ert_cpu.dwc3_s8 (16 channels per call) takes 3x3 and 5x5 windows, undilated, of strides
 * 1 or 2 (each direction its own), one output channel per input channel, 16 channels or
 * more, planes of 16 outputs or more, shifts from 31; its slot holds bands of dwc_rows
 * output rows: the band's padded input rows and its outputs, 16 channels interleaved
 * (at most about DWC_BUDGET bytes, at least 16 outputs a band).
 * edgert/converter/ops/conv2d_s8.py mirrors this. */
enum { DWC_BUDGET = 32768, DWC_SLACK = 320 };
static int dwc_geom(const geom *g) {
  return (g->kh == 3 || g->kh == 5) && g->kw == g->kh && g->dh == 1 && g->dw == 1 &&
         (g->sh == 1 || g->sh == 2) && (g->sw == 1 || g->sw == 2) && g->cg == 1 && g->mg == 1 &&
         g->m >= 16 && (int64_t)g->oh * g->ow >= 16 && g->shift >= 31 && g->ow <= S8_DW_PAD_MAX / 64;
}
static int32_t dwc_rows(const geom *g) {
  const int64_t s = g->sh, cols = dw_cols(g);
  int64_t r = (DWC_BUDGET - DWC_SLACK - 16 * (g->kh - s) * cols) / (16 * (s * cols + g->ow));
  if (r < (16 + g->ow - 1) / g->ow) r = (16 + g->ow - 1) / g->ow;
  return (int32_t)(r < g->oh ? r : g->oh);
}
static size_t dwc_slot(const geom *g) {
  const int64_t s = g->sh, r = dwc_rows(g);
  return align64((size_t)(16 * (((r - 1) * s + g->kh) * dw_cols(g) + r * g->ow) + DWC_SLACK));
}

edgert_status ert_conv2d_s8_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 3, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  const int32_t rank1d = ert_pi(node, P_RANK1D);
  const int32_t group = ert_pi(node, P_GROUP), kh = ert_pi(node, P_KH), kw = ert_pi(node, P_KW);
  const int32_t sh = ert_pi(node, P_SH), sw = ert_pi(node, P_SW);
  const int32_t dh = ert_pi(node, P_DH), dw = ert_pi(node, P_DW);
  const int32_t pt = ert_pi(node, P_PT), pl = ert_pi(node, P_PL);
  const int32_t pb = ert_pi(node, P_PB), pr = ert_pi(node, P_PR);
  if (ert_pi(node, P_ACT) != ERT_ACT_NONE)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED,
                    "conv2d '%s': int8 form takes no activation (folded into its range)", nm(node));
  if ((rank1d != 0 && rank1d != 1) || group < 1 || kh < 1 || kw < 1 || sh < 1 || sw < 1 ||
      dh < 1 || dw < 1 || pt < 0 || pl < 0 || pb < 0 || pr < 0 ||
      (rank1d && (kh != 1 || sh != 1 || dh != 1 || pt != 0 || pb != 0)))
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': bad geometry parameters", nm(node));
  const int rank = rank1d ? 3 : 4;
  const ert_tensor *x = node->in[0], *w = node->in[1], *y = node->out[0];
  if ((st = ert_check_s8(node, err, x, "X")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, w, "W")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, y, "Y")) != EDGERT_OK)
    return st;
  if (x->ndim != rank || w->ndim != rank || y->ndim != rank)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': X, W and Y must have rank %d", nm(node),
                    rank);
  const int64_t n = x->shape[0], c = x->shape[1];
  const int64_t h = rank1d ? 1 : x->shape[2], wd = x->shape[rank - 1];
  const int64_t m = w->shape[0];
  const int64_t wkh = rank1d ? 1 : w->shape[2], wkw = w->shape[rank - 1];
  if (c % group != 0 || m % group != 0 || w->shape[1] != c / group || wkh != kh || wkw != kw)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': W does not match X, group and kernel",
                    nm(node));
  const int64_t oh = ert_window_out(h, kh, sh, dh, pt, pb, 0);
  const int64_t ow = ert_window_out(wd, kw, sw, dw, pl, pr, 0);
  if (oh < 1 || ow < 1 || y->shape[0] != n || y->shape[1] != m ||
      (!rank1d && y->shape[2] != oh) || y->shape[rank - 1] != ow)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': Y shape does not match the convolution",
                    nm(node));
  if (h + pt + pb > INT32_MAX / 2 || wd + pl + pr > INT32_MAX / 2 || oh * ow > INT32_MAX ||
      (int64_t)dh * kh > INT32_MAX / 2 || (int64_t)dw * kw > INT32_MAX / 2)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "conv2d '%s': tensor too large", nm(node));
  const int64_t k = (c / group) * kh * kw;
  if (k * TERM_MAX >= INT32_MAX)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED,
                    "conv2d '%s': %lld taps per output could overflow the int32 accumulator",
                    nm(node), (long long)k);
  if ((st = ert_check_qp(node, err, 2, m, INT32_MAX - k * TERM_MAX, ert_pi(node, P_SHIFT))) !=
      EDGERT_OK)
    return st;
  const int32_t xzp = ert_pi(node, P_XZP);
  if (xzp < -128 || xzp > 127)
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': input zero point %d outside int8",
                    nm(node), (int)xzp);
  if ((st = ert_check_qrange(node, err, ert_pi(node, P_YZP), ert_pi(node, P_LO),
                             ert_pi(node, P_HI))) != EDGERT_OK)
    return st;
  /* opdata[0]: W is constant and free of -128, so ert_cpu.qgemm_s8_p is exact for it
   * (the scan in a local: a store to opdata each step took 12 M instructions to load
   * ppocr_det) */
  size_t i = 0;
  const int8_t *wv = (const int8_t *)w->data;
  if (w->storage == ERT_STORAGE_CONST && wv != NULL)
    while (i < w->numel && wv[i] != -128) i++;
  node->opdata[0] = w->storage == ERT_STORAGE_CONST && wv != NULL && i == w->numel;
  geom g;
  read_geom(node, &g);
  const size_t need = g.cg == 1 ? dw_scratch(&g) : im2col_scratch(&g);
  if (node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': needs %zu scratch bytes, has %zu",
                    nm(node), need, node->scratch_bytes);
  return EDGERT_OK;
}

/* First o in [0, limit] with o*s + off >= 0, and the end of those with o*s + off < size. */
static void valid_range(int64_t off, int64_t s, int64_t size, int64_t limit, int32_t *lo,
                        int32_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = off <= size - 1 ? (size - 1 - off) / s + 1 : 0;
  if (a > limit) a = limit;
  if (b > limit) b = limit;
  if (b < a) b = a;
  *lo = (int32_t)a;
  *hi = (int32_t)b;
}

/* ---- depthwise -------------------------------------------------------------------- */

typedef struct job {
  const geom *g;
  const int8_t *x, *w;
  const int32_t *qp;
  int8_t *y;
  char *scratch;
  size_t slot_bytes, tasks, nslots, blocks;
  int32_t pbs;  /* pixels per im2col block: S8_PB, or 2 * S8_PB for simd when they fit */
  int simd;     /* im2col blocks by the SIMD entries (block_q) */
  int w_no_min; /* W has no -128 (opdata[0]) */
  int dw3;      /* depthwise planes by ert_cpu.dw3_s8 (dw3_usable) */
  int8_t *packed; /* block_q: the groups' packed weights (ext_scratch), or NULL */
  size_t col;     /* bytes of a slot's im2col part */
  int rq;         /* block_q: blocks requantized by ert_cpu.qgemm_rq_s8 */
  const ptrdiff_t *off; /* block_q: gather_q's tap offsets (cc channels), or NULL */
  int32_t cc;
  size_t msplit; /* tasks per block of pixels: its output channels in that many parts */
  size_t bands;  /* dwc_task: tasks per 16 channels, bands of whole output rows */
} job;

/* The padded copy of one input plane, x - x_zp (int16) inside the image and 0 around
 * it. The zeros are the same for every plane of a node: with `zeroed` (buf holds a copy
 * of this node's geometry already) only the image part is written. */
ERT_S8_CLONES
static void dw_fill(const geom *g, const int8_t *x, int16_t *buf, int zeroed) {
  const int64_t rows = dw_rows(g), cols = dw_cols(g), plen = dw_plen(g), sw = g->sw;
  const int64_t row_len = sw * plen;
  const int16_t zp = (int16_t)g->xzp;
  int32_t lo, hi; /* columns c with 0 <= c - pl < w */
  valid_range(-(int64_t)g->pl, 1, g->w, cols, &lo, &hi);
  int32_t r0, r1; /* rows r with 0 <= r - pt < h */
  valid_range(-(int64_t)g->pt, 1, g->h, rows, &r0, &r1);
  if (r1 < r0) r1 = r0;
  if (!zeroed) {
    memset(buf, 0, (size_t)(r0 * row_len) * sizeof(int16_t));
    memset(buf + r1 * row_len, 0, (size_t)((rows - r1) * row_len) * sizeof(int16_t));
  }
  if (r1 == r0) return;
  const int8_t *src = x + ((int64_t)r0 - g->pt) * g->w - g->pl;
  for (int64_t ph = 0; ph < sw; ph++) { /* columns ph, ph + sw, ... */
    const int64_t i0 = lo > ph ? (lo - ph + sw - 1) / sw : 0;
    int64_t i1 = hi > ph ? (hi - ph + sw - 1) / sw : 0;
    if (i1 < i0) i1 = i0;
    int16_t *dp = buf + r0 * row_len + ph * plen;
    const int8_t *sp = src + ph;
    if (ert_cpu.widen_s8 != NULL) {
      if (zeroed && i1 > i0) /* the image part only: a run of i1 - i0 values at dp + i0 */
        ert_cpu.widen_s8(dp + i0, sp + i0 * sw, 0, (int32_t)(i1 - i0), (int32_t)(i1 - i0),
                         (int32_t)sw, zp, r1 - r0, (ptrdiff_t)row_len, (ptrdiff_t)g->w);
      else if (!zeroed)
        ert_cpu.widen_s8(dp, sp + i0 * sw, (int32_t)i0, (int32_t)(i1 - i0), (int32_t)plen,
                         (int32_t)sw, zp, r1 - r0, (ptrdiff_t)row_len, (ptrdiff_t)g->w);
      continue;
    }
    for (int64_t r = r0; r < r1; r++, dp += row_len, sp += g->w) {
      if (!zeroed)
        for (int64_t i = 0; i < i0; i++) dp[i] = 0;
      for (int64_t i = i0; i < i1; i++) dp[i] = (int16_t)(sp[i * sw] - zp);
      if (!zeroed)
        for (int64_t i = i1; i < plen; i++) dp[i] = 0;
    }
  }
}

/* The aarch64 NEON builds have dwc3_s8 instead of dw3_s8 (the other builds compile no
 * dwc3_s8 path), and take the 3x3 and 5x5 planes it does not by dw_taps_s16 (the
 * forced-reference mode by the per-tap loop, the same sums). */
#if defined(ERT_NEON_KERNELS) && defined(__aarch64__)
#define S8_DW3 0
#else
#define S8_DW3 1
#endif

/* The tap loop fully unrolled, so that the loop over outputs is vectorized. */
#if defined(__GNUC__) && !defined(__clang__)
#define DW_UNROLL _Pragma("GCC unroll 32")
#else
#define DW_UNROLL
#endif

/* acc[i] += sum over T taps of w[t] * tp[t][i], i < n: a whole window per output,
 * for the common 3x3 and 5x5 kernels (|(x - x_zp) * w| <= 255 * 128: 16-bit products,
 * 32-bit sums). */
#define DW_TAPS_S8(NAME, T)                                                             \
  static void NAME(int32_t *acc, const int16_t *const *tp, const int16_t *w, int32_t n) { \
    for (int32_t i = 0; i < n; i++) {                                                   \
      int32_t s = acc[i];                                                               \
      DW_UNROLL                                                                         \
      for (int t = 0; t < (T); t++) s += (int16_t)(w[t] * tp[t][i]);                     \
      acc[i] = s;                                                                       \
    }                                                                                   \
  }
DW_TAPS_S8(dw_taps9, 9)
DW_TAPS_S8(dw_taps25, 25)

/* One output plane from the padded copy: per output row, taps accumulate contiguous
 * runs. */
ERT_S8_CLONES
static void dw_plane_padded(const geom *g, const int16_t *buf, const int8_t *w,
                            const int32_t *qp, int8_t *y) {
  const int64_t plen = dw_plen(g), row_len = g->sw * plen;
  int32_t acc[S8_DW_CHUNK];
  ptrdiff_t off[25]; /* tap offsets from an output row's first input */
  int16_t wk[25];
  for (int32_t t = 0; t < g->kh * g->kw && t < 25; t++) {
    wk[t] = w[t];
    const int64_t c = (int64_t)(t % g->kw) * g->dw; /* column of output 0's tap */
    off[t] = (ptrdiff_t)((int64_t)(t / g->kw) * g->dh * row_len + (c % g->sw) * plen + c / g->sw);
  }
  const int32_t taps = g->kh * g->kw;
  if ((taps == 9 || taps == 25) && ert_cpu.dw_taps_s16 != NULL && g->ow <= S8_DW_CHUNK) {
    /* whole output rows, as many as acc holds per call */
    const int32_t rmax = S8_DW_CHUNK / g->ow;
    for (int32_t oy = 0; oy < g->oh; oy += rmax) {
      const int32_t rows = g->oh - oy < rmax ? g->oh - oy : rmax;
      ert_cpu.dw_taps_s16(acc, buf + (int64_t)oy * g->sh * row_len, off, wk, g->ow, taps, qp[0],
                          rows, (ptrdiff_t)((int64_t)g->sh * row_len));
      ert_requant_row(acc, (size_t)rows * (size_t)g->ow, qp[1], g->shift, g->yzp, g->lo, g->hi,
                      y + (size_t)oy * (size_t)g->ow);
    }
    return;
  }
  for (int32_t oy = 0; oy < g->oh; oy++) {
    for (int32_t ox0 = 0; ox0 < g->ow; ox0 += S8_DW_CHUNK) {
      const int32_t n = g->ow - ox0 < S8_DW_CHUNK ? g->ow - ox0 : S8_DW_CHUNK;
      const int16_t *tp[25];
      if ((taps == 9 || taps == 25) && ert_cpu.dw_taps_s16 != NULL) {
        ert_cpu.dw_taps_s16(acc, buf + (int64_t)oy * g->sh * row_len + ox0, off, wk, n, taps,
                            qp[0], 1, 0);
      } else {
        for (int32_t i = 0; i < n; i++) acc[i] = qp[0];
        for (int32_t ky = 0; ky < g->kh; ky++) {
          const int16_t *row =
              buf + ((int64_t)oy * g->sh + (int64_t)ky * g->dh) * row_len + ox0;
          for (int32_t kx = 0; kx < g->kw; kx++) {
            const int16_t wv = w[ky * g->kw + kx];
            const int64_t c = (int64_t)kx * g->dw; /* column of output 0's tap */
            const int16_t *src = row + (c % g->sw) * plen + c / g->sw;
            if (S8_DW3 && (taps == 9 || taps == 25))
              tp[ky * g->kw + kx] = src;
            else
              for (int32_t i = 0; i < n; i++) acc[i] += (int16_t)(wv * src[i]);
          }
        }
        if (S8_DW3 && taps == 9)
          dw_taps9(acc, tp, wk, n);
        else if (S8_DW3 && taps == 25)
          dw_taps25(acc, tp, wk, n);
      }
      ert_requant_row(acc, (size_t)n, qp[1], g->shift, g->yzp, g->lo, g->hi,
                      y + (size_t)oy * (size_t)g->ow + (size_t)ox0);
    }
  }
}

/* Direct path (planes too large to copy): valid taps only. */
static void dw_plane_direct(const geom *g, const int8_t *x, const int8_t *w, const int32_t *qp,
                            int8_t *y) {
  int32_t acc[S8_DW_CHUNK];
  for (int32_t oy = 0; oy < g->oh; oy++) {
    const int64_t iy0 = (int64_t)oy * g->sh - g->pt;
    int32_t ky0, ky1;
    valid_range(iy0, g->dh, g->h, g->kh, &ky0, &ky1);
    for (int32_t ox0 = 0; ox0 < g->ow; ox0 += S8_DW_CHUNK) {
      const int32_t n = g->ow - ox0 < S8_DW_CHUNK ? g->ow - ox0 : S8_DW_CHUNK;
      for (int32_t i = 0; i < n; i++) acc[i] = qp[0];
      for (int32_t ky = ky0; ky < ky1; ky++) {
        const int8_t *row = x + (size_t)(iy0 + (int64_t)ky * g->dh) * (size_t)g->w;
        for (int32_t kx = 0; kx < g->kw; kx++) {
          const int64_t off = (int64_t)kx * g->dw - g->pl + (int64_t)ox0 * g->sw;
          int32_t lo, hi;
          valid_range(off, g->sw, g->w, n, &lo, &hi);
          const int16_t wv = w[ky * g->kw + kx], zp = (int16_t)g->xzp;
          for (int32_t i = lo; i < hi; i++)
            acc[i] += (int16_t)(wv * (int16_t)(row[off + (int64_t)i * g->sw] - zp));
        }
      }
      ert_requant_row(acc, (size_t)n, qp[1], g->shift, g->yzp, g->lo, g->hi,
                      y + (size_t)oy * (size_t)g->ow + (size_t)ox0);
    }
  }
}

/* ert_cpu.dw3_s8 takes 3x3 windows, undilated, of equal strides 1 or 2, weights in
 * [-127, 127], shifts from 31; its padded copy is raw int8 (x_zp outside the image),
 * dw_rows rows of dw_cols bytes, in the slot of the int16 copy: at least twice that size,
 * so when the copy has 48 bytes or more the slot also holds the kernel's reads past the
 * last row (under 48 bytes). */
static int dw3_usable(const geom *g, int w_no_min) {
  return S8_DW3 && ert_cpu.dw3_s8 != NULL && w_no_min && g->kh == 3 && g->kw == 3 && g->dh == 1 &&
         g->dw == 1 && g->sh == g->sw && (g->sw == 1 || g->sw == 2) && g->shift >= 31 &&
         dw_scratch(g) != 0 && dw_rows(g) * dw_cols(g) >= 48;
}

/* The raw int8 padded copy of one plane for dw3_s8. rng = {lo, hi, r0, r1}, the image's
 * columns and rows in the copy: rng[0] < 0 on the first call (buf is then set to x_zp and
 * rng filled), later calls (buf holds a copy of this node's geometry) write the image
 * part only. */
static void dw_fill8(const geom *g, const int8_t *x, int8_t *buf, int32_t rng[4]) {
  const int64_t rows = dw_rows(g), cols = dw_cols(g);
  if (rng[0] < 0) {
    valid_range(-(int64_t)g->pl, 1, g->w, cols, &rng[0], &rng[1]);
    valid_range(-(int64_t)g->pt, 1, g->h, rows, &rng[2], &rng[3]);
    memset(buf, (int8_t)g->xzp, (size_t)(rows * cols));
  }
  const int32_t lo = rng[0], hi = rng[1], r0 = rng[2], r1 = rng[3];
  if (hi <= lo) return;
  const size_t n = (size_t)(hi - lo);
  for (int64_t r = r0; r < r1; r++) {
    int8_t *d = buf + r * cols + lo;
    const int8_t *src = x + (r - g->pt) * g->w + (lo - g->pl);
    /* rows of 4 .. 32 bytes (small planes): fixed-size copies, the last one ending at n */
    if (n >= 8 && n <= 32) {
      for (size_t i = 0; i + 8 < n; i += 8) memcpy(d + i, src + i, 8);
      memcpy(d + n - 8, src + n - 8, 8);
    } else if (n >= 4 && n < 8) {
      memcpy(d, src, 4), memcpy(d + n - 4, src + n - 4, 4);
    } else {
      memcpy(d, src, n);
    }
  }
}

/* Planes p0 .. p1 (image, output channel); buf: a padded copy slot, or NULL. */
static void dw_planes(const job *j, size_t p0, size_t p1, int16_t *buf) {
  const geom *g = j->g;
  const size_t plane_in = (size_t)g->h * (size_t)g->w, plane_out = (size_t)g->oh * (size_t)g->ow;
  const size_t khw = (size_t)g->kh * (size_t)g->kw;
  size_t filled = (size_t)-1;
  int32_t rng[4] = {-1, 0, 0, 0}; /* dw_fill8's */
  for (size_t p = p0; p < p1; p++) {
    const size_t n = p / (size_t)g->m, oc = p % (size_t)g->m;
    const size_t in_plane = n * (size_t)g->c + oc / (size_t)g->mg;
    const int8_t *x = j->x + in_plane * plane_in;
    if (buf == NULL) {
      dw_plane_direct(g, x, j->w + oc * khw, j->qp + 2 * oc, j->y + p * plane_out);
      continue;
    }
    if (S8_DW3 && j->dw3) {
      const int32_t *qp = j->qp + 2 * oc;
      if (filled != in_plane) {
        dw_fill8(g, x, (int8_t *)(void *)buf, rng);
        filled = in_plane;
      }
      const int32_t q[6] = {qp[1], g->shift, g->yzp, g->lo, g->hi, g->xzp};
      ert_cpu.dw3_s8(j->y + p * plane_out, (const int8_t *)(const void *)buf, (ptrdiff_t)dw_cols(g),
                     j->w + oc * khw, qp[0], q, g->oh, g->ow, g->sw);
      continue;
    }
    if (filled != in_plane) { /* a channel multiplier > 1 reuses the copy */
      dw_fill(g, x, buf, filled != (size_t)-1);
      filled = in_plane;
    }
    dw_plane_padded(g, buf, j->w + oc * khw, j->qp + 2 * oc, j->y + p * plane_out);
  }
}

static void dw_task(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  const size_t planes = (size_t)j->g->n * (size_t)j->g->m;
  if (j->scratch == NULL) {
    dw_planes(j, begin, end, NULL);
    return;
  }
  for (size_t s = begin; s < end; s++)
    dw_planes(j, s * planes / j->nslots, (s + 1) * planes / j->nslots,
              (int16_t *)(void *)(j->scratch + s * j->slot_bytes));
}

/* Slots begin .. end of the blocks of 16 channels (the last block of an image ending at
 * its last channel, recomputing some: the same bytes). */
static void dwc_task(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  const geom *g = j->g;
  const size_t nb = ((size_t)g->m + 15u) / 16u, tasks = (size_t)g->n * nb * j->bands;
  const size_t plane_in = (size_t)g->h * (size_t)g->w, plane_out = (size_t)g->oh * (size_t)g->ow;
  int32_t gv[15] = {g->h,   g->w,   g->oh, g->ow, g->sw,    g->pt,       g->pl,    g->xzp,
                    g->yzp, g->lo,  g->hi, g->shift, dwc_rows(g), g->kw, g->sh};
  const int8_t *xend = j->x + (size_t)g->n * (size_t)g->c * plane_in;
  for (size_t s = begin; s < end; s++)
    for (size_t t = s * tasks / j->nslots; t < (s + 1) * tasks / j->nslots; t++) {
      /* output rows r0 .. r1 of the band: the kernel's rows from 0, the top padding
         moved up by r0 input strides (negative past the image's first rows) */
      const size_t band = t % j->bands, tc = t / j->bands;
      const int32_t r0 = (int32_t)(band * (size_t)g->oh / j->bands);
      const int32_t r1 = (int32_t)((band + 1) * (size_t)g->oh / j->bands);
      gv[2] = r1 - r0, gv[5] = g->pt - r0 * g->sh;
      const size_t n = tc / nb, c0 = 16u * (tc % nb) + 16u <= (size_t)g->m ? 16u * (tc % nb) : (size_t)g->m - 16u;
      ert_cpu.dwc3_s8(j->y + (n * (size_t)g->m + c0) * plane_out + (size_t)r0 * (size_t)g->ow, plane_out,
                      j->x + (n * (size_t)g->c + c0) * plane_in, plane_in, xend, j->w + (size_t)(g->kh * g->kw) * c0,
                      j->qp + 2u * c0, gv, (int8_t *)(void *)(j->scratch + s * j->slot_bytes));
    }
}

/* ---- im2col blocks ------------------------------------------------------------------ */

/* col[p][k] for pixels p0 .. p0+pb of one image and group: x - x_zp, 0 outside. */
static void gather(const geom *g, const int8_t *x, int32_t p0, int32_t pb, int16_t *col) {
  const size_t plane = (size_t)g->h * (size_t)g->w, k = (size_t)g->k;
  const int16_t zp = (int16_t)g->xzp;
  if (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
      g->oh == g->h && g->ow == g->w) { /* pointwise: pixel p is input position p */
    for (int32_t ci = 0; ci < g->cg; ci++) {
      const int8_t *src = x + (size_t)ci * plane + (size_t)p0;
      for (int32_t i = 0; i < pb; i++) col[(size_t)i * k + (size_t)ci] = (int16_t)(src[i] - zp);
    }
    return;
  }
  for (int32_t i = 0; i < pb; i++) {
    const int32_t p = p0 + i, oy = p / g->ow, ox = p % g->ow;
    const int64_t iy0 = (int64_t)oy * g->sh - g->pt, ix0 = (int64_t)ox * g->sw - g->pl;
    int16_t *dst = col + (size_t)i * k;
    if (iy0 >= 0 && iy0 + (int64_t)(g->kh - 1) * g->dh < g->h && ix0 >= 0 &&
        ix0 + (int64_t)(g->kw - 1) * g->dw < g->w) { /* the window is inside the image */
      for (int32_t ci = 0; ci < g->cg; ci++) {
        const int8_t *xc = x + (size_t)ci * plane + (size_t)iy0 * (size_t)g->w + (size_t)ix0;
        for (int32_t ky = 0; ky < g->kh; ky++) {
          const int8_t *r = xc + (size_t)ky * (size_t)g->dh * (size_t)g->w;
          for (int32_t kx = 0; kx < g->kw; kx++)
            *dst++ = (int16_t)(r[(size_t)kx * (size_t)g->dw] - zp);
        }
      }
      continue;
    }
    for (int32_t ci = 0; ci < g->cg; ci++) {
      const int8_t *xc = x + (size_t)ci * plane;
      for (int32_t ky = 0; ky < g->kh; ky++) {
        const int64_t iy = iy0 + (int64_t)ky * g->dh;
        const int row_ok = iy >= 0 && iy < g->h;
        for (int32_t kx = 0; kx < g->kw; kx++) {
          const int64_t ix = ix0 + (int64_t)kx * g->dw;
          *dst++ = (row_ok && ix >= 0 && ix < g->w)
                       ? (int16_t)((int32_t)xc[(size_t)iy * (size_t)g->w + (size_t)ix] - g->xzp)
                       : 0;
        }
      }
    }
  }
}

/* out[r] = a . w_r and out[4 + r] = b . w_r for the S8_MR rows w_r of w (k apart).
 * Always inlined, so that it is built for the instruction set of block's clone. */
S8_INLINE void dot_2x4(const int16_t *a, const int16_t *b, const int16_t *w, int32_t k,
                       int32_t *out) {
  const int16_t *w0 = w, *w1 = w + k, *w2 = w + 2 * (size_t)k, *w3 = w + 3 * (size_t)k;
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, t0 = 0, t1 = 0, t2 = 0, t3 = 0;
  for (int32_t i = 0; i < k; i++) {
    const int32_t u = a[i], v = b[i];
    s0 += u * w0[i];
    s1 += u * w1[i];
    s2 += u * w2[i];
    s3 += u * w3[i];
    t0 += v * w0[i];
    t1 += v * w1[i];
    t2 += v * w2[i];
    t3 += v * w3[i];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
  out[4] = t0, out[5] = t1, out[6] = t2, out[7] = t3;
}

ERT_S8_CLONES
static void block(const job *j, size_t t, int16_t *col, int16_t *wbuf) {
  const geom *g = j->g;
  const size_t per_image = (size_t)g->group * j->blocks;
  const size_t n = t / per_image, grp = (t % per_image) / j->blocks, b = t % j->blocks;
  const int32_t p_total = g->oh * g->ow;
  const int32_t p0 = (int32_t)b * S8_PB;
  const int32_t pb = p_total - p0 < S8_PB ? p_total - p0 : S8_PB;
  const size_t plane = (size_t)g->h * (size_t)g->w, k = (size_t)g->k;
  gather(g, j->x + (n * (size_t)g->c + grp * (size_t)g->cg) * plane, p0, pb, col);
  for (int32_t m0 = 0; m0 < g->mg; m0 += S8_MR) {
    const int32_t mr = g->mg - m0 < S8_MR ? g->mg - m0 : S8_MR;
    const size_t oc0 = grp * (size_t)g->mg + (size_t)m0;
    for (int32_t r = 0; r < S8_MR; r++) {
      const int8_t *wr = j->w + (oc0 + (size_t)r) * k;
      for (size_t i = 0; i < k; i++) wbuf[(size_t)r * k + i] = r < mr ? wr[i] : 0;
    }
    int32_t acc[S8_MR][S8_PB + 1];
    for (int32_t i = 0; i < pb; i += 2) {
      int32_t out[8];
      const int16_t *a = col + (size_t)i * k;
      dot_2x4(a, i + 1 < pb ? a + k : a, wbuf, g->k, out);
      for (int32_t r = 0; r < S8_MR; r++) {
        acc[r][i] = out[r];
        acc[r][i + 1] = out[4 + r];
      }
    }
    for (int32_t r = 0; r < mr; r++) {
      const int32_t *qp = j->qp + 2 * (oc0 + (size_t)r);
      for (int32_t i = 0; i < pb; i++) acc[r][i] += qp[0];
      ert_requant_row(acc[r], (size_t)pb, qp[1], g->shift, g->yzp, g->lo, g->hi,
                      j->y + (n * (size_t)g->m + oc0 + (size_t)r) * (size_t)p_total + (size_t)p0);
    }
  }
}

/* The SIMD block: col[4*np*q + 4*i + j] = tap 4q + j of pixel i < pb (raw x, x_zp
 * outside the image, 0 past k, or for runs gathered by taps_s8 a copy of tap 0: the
 * packed weights are 0 there; pixels pb .. np are 0), in the slot's im2col part
 * (ceil(k/4)*4*pb <= 2*k*pb bytes for k >= 2; np rounds pb up to 8 when that fits); the
 * packed weights wq (16*ceil(k/4) <= 8*k bytes) in its weight part. */

/* The taps of one pixel (window corner iy0, ix0) into its quads from dst, through lin
 * (k + 3 bytes): window position by window position, each channel's byte kk apart in lin
 * (x_zp where the position is outside the image), then 0 to the quad and the quads to
 * dst. For windows that cross the image's edge, or runs too short for taps_s8. (Not
 * inlined: in its caller the loops had too few registers.) */
S8_NOINLINE void gather_px(const geom *g, const int8_t *x, int64_t iy0, int64_t ix0,
                           int8_t *dst, size_t np4, int8_t *lin) {
  /* (geom's fields in locals: the int8 stores may alias them) */
  const int32_t h = g->h, w = g->w, kh = g->kh, kw = g->kw, dh = g->dh, dw = g->dw;
  const int32_t k = g->k, kq = (k + 3) / 4;
  const int8_t zp = (int8_t)g->xzp;
  const size_t plane = (size_t)h * (size_t)w, kk = (size_t)kh * (size_t)kw;
  int8_t *l = lin, *const end = lin + (size_t)k;
  for (int32_t ky = 0; ky < kh; ky++) {
    const int64_t iy = iy0 + (int64_t)ky * dh;
    for (int32_t kx = 0; kx < kw; kx++, l++) {
      const int64_t ix = ix0 + (int64_t)kx * dw;
      int8_t *o = l;
      if (iy >= 0 && iy < h && ix >= 0 && ix < w) { /* (cg >= 1: one step at least) */
        const int8_t *s = x + (size_t)iy * (size_t)w + (size_t)ix;
        do *o = *s, o += kk, s += plane; while (o < end);
      } else {
        do *o = zp, o += kk; while (o < end);
      }
    }
  }
  memset(end, 0, 3);
  const int8_t *q = lin;
  int8_t *d = dst, *const dend = dst + (size_t)kq * np4;
  do memcpy(d, q, 4), d += np4, q += 4; while (d != dend);
}

/* The offsets of gather_q's runs: tap t of a window inside the image is src[off[t]] from
 * the window's corner, for the taps of cc channels (all of them, or a multiple of 4
 * channels when k > S8_TAPS: a window is then gathered cc channels at a time, each part
 * starting on a quad); 0 when no part fits (gather_px takes every pixel). */
enum { S8_TAPS = 1024 };
static int32_t run_offsets(const geom *g, ptrdiff_t *off) {
  const int32_t kk = g->kh * g->kw;
  const int32_t cc = g->k <= S8_TAPS ? g->cg : S8_TAPS / kk & ~3;
  if (cc <= 0 || ert_cpu.taps_s8 == NULL || g->sw > 2) return 0;
  const size_t plane = (size_t)g->h * (size_t)g->w;
  for (int32_t ci = 0; ci < cc; ci++)
    for (int32_t ky = 0; ky < g->kh; ky++)
      for (int32_t kx = 0; kx < g->kw; kx++)
        *off++ = (ptrdiff_t)((size_t)ci * plane + (size_t)(ky * g->dh) * (size_t)g->w +
                             (size_t)(kx * g->dw));
  return cc;
}

/* Runs of at least 17 windows inside the image along a row go to taps_s8 (with the
 * offsets of run_offsets, cc channels a call), the other pixels to gather_px. */
static void gather_q(const geom *g, const int8_t *x, int32_t p0, int32_t pb, int32_t np,
                     int8_t *col, int8_t *lin, const ptrdiff_t *off, int32_t cc) {
  const int32_t h = g->h, w = g->w, kh = g->kh, kw = g->kw, dh = g->dh, dw = g->dw, cg = g->cg;
  const int32_t ow = g->ow, sh = g->sh, sw = g->sw, pt = g->pt, pl = g->pl, kk = kh * kw;
  const size_t plane = (size_t)h * (size_t)w, np4 = (size_t)np * 4u;
  const int32_t kp = (g->k + 3) & ~3;
  if (kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && g->oh == h && ow == w) {
    ert_cpu.quads_s8(col, x + p0, plane, cg, pb, np);
    return;
  }
  for (int32_t q = 0; q < kp / 4; q++)
    memset(col + (size_t)q * np4 + (size_t)pb * 4u, 0, (size_t)(np - pb) * 4u);
  for (int32_t i = 0; i < pb; i++) {
    const int32_t p = p0 + i, oy = p / ow, ox = p % ow;
    const int64_t iy0 = (int64_t)oy * sh - pt, ix0 = (int64_t)ox * sw - pl;
    int8_t *dst = col + (size_t)i * 4u;
    if (cc > 0 && iy0 >= 0 && iy0 + (int64_t)(kh - 1) * dh < h && ix0 >= 0 &&
        ix0 + (int64_t)(kw - 1) * dw < w) { /* the window is inside the image */
      int32_t run = (w - 1 - (kw - 1) * dw - (int32_t)ix0) / sw + 1;
      if (run > ow - ox) run = ow - ox;
      if (run > pb - i) run = pb - i;
      if (run >= 17) {
        const int8_t *src = x + (size_t)iy0 * (size_t)w + (size_t)ix0;
        for (int32_t c0 = 0; c0 < cg; c0 += cc) {
          const int32_t kc = (cg - c0 < cc ? cg - c0 : cc) * kk;
          ert_cpu.taps_s8(dst + (size_t)(c0 * kk / 4) * np4, np4, src + (size_t)c0 * plane, off,
                          kc, run, sw);
        }
        i += run - 1;
        continue;
      }
    }
    gather_px(g, x, iy0, ix0, dst, np4, lin);
  }
}

/* Blocks of fewer than 4 pixels (1x1 outputs): per pixel, the raw input column
 * (x_zp outside the image) times every weight row by ert_cpu.gemv_s8, which subtracts
 * x_zp itself. col holds k bytes (the slot's im2col part). */
static void block_v(const job *j, size_t n, size_t grp, int32_t p0, int32_t pb, int8_t *col) {
  const geom *g = j->g;
  const size_t plane = (size_t)g->h * (size_t)g->w, k = (size_t)g->k;
  const int32_t p_total = g->oh * g->ow;
  const int8_t *x = j->x + (n * (size_t)g->c + grp * (size_t)g->cg) * plane;
  for (int32_t i = 0; i < pb; i++) {
    const int32_t p = p0 + i, oy = p / g->ow, ox = p % g->ow;
    const int64_t iy0 = (int64_t)oy * g->sh - g->pt, ix0 = (int64_t)ox * g->sw - g->pl;
    int8_t *dst = col;
    for (int32_t ci = 0; ci < g->cg; ci++)
      for (int32_t ky = 0; ky < g->kh; ky++) {
        const int64_t iy = iy0 + (int64_t)ky * g->dh;
        const int8_t *r = x + (size_t)ci * plane + (size_t)iy * (size_t)g->w;
        for (int32_t kx = 0; kx < g->kw; kx++) {
          const int64_t ix = ix0 + (int64_t)kx * g->dw;
          *dst++ = (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w) ? r[ix] : (int8_t)g->xzp;
        }
      }
    enum { CH = 4 * (S8_PB + 1) };
    int32_t acc[CH];
    for (int32_t m0 = 0; m0 < g->mg; m0 += CH) {
      const int32_t mc = g->mg - m0 < CH ? g->mg - m0 : CH;
      const size_t oc0 = grp * (size_t)g->mg + (size_t)m0;
      ert_cpu.gemv_s8(g->k, mc, col, g->xzp, j->w + oc0 * k, acc);
      for (int32_t r = 0; r < mc; r++) {
        const int32_t *qp = j->qp + 2 * (oc0 + (size_t)r);
        const int32_t a = acc[r] + qp[0];
        j->y[(n * (size_t)g->m + oc0 + (size_t)r) * (size_t)p_total + (size_t)p] =
            ert_clamp_s8(g->yzp + ert_requant(a, qp[1], g->shift), g->lo, g->hi);
      }
    }
  }
}

/* Channels m0 .. m0 + 3 of group grp (those below mg): the packed weights at wq, then
 * (qgemm_s8's) bias and mult, 0 past mg. */
static void pack_group(const job *j, size_t grp, int32_t m0, int8_t *wq) {
  const geom *g = j->g;
  const size_t k = (size_t)g->k, oc0 = grp * (size_t)g->mg + (size_t)m0;
  const int32_t mr = g->mg - m0 < S8_MR ? g->mg - m0 : S8_MR;
  int32_t wsum[S8_MR], *bias = (int32_t *)(void *)(wq + pack_bytes(g) - 32u), *mult = bias + S8_MR;
  ert_cpu.pack_w_s8(wq, wsum, j->w + oc0 * k, k, mr, g->k);
  const int32_t *qp = j->qp + 2 * oc0;
  for (int32_t r = 0; r < S8_MR; r++)
    bias[r] = r < mr ? qp[2 * r] - g->xzp * wsum[r] : 0, mult[r] = r < mr ? qp[2 * r + 1] : 0;
}

/* Groups i of S8_MR channels into j->packed. */
static void pack_task(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  const size_t per = ((size_t)j->g->mg + S8_MR - 1) / S8_MR;
  for (size_t i = begin; i < end; i++)
    pack_group(j, i / per, (int32_t)(i % per) * S8_MR, j->packed + i * pack_bytes(j->g));
}

static void block_q(const job *j, size_t t, int8_t *col, int8_t *wq) {
  const geom *g = j->g;
  /* task t: part t % msplit of block t / msplit's channels */
  const size_t part = t % j->msplit, parts = j->msplit;
  t /= j->msplit;
  const size_t per_image = (size_t)g->group * j->blocks;
  const size_t n = t / per_image, grp = (t % per_image) / j->blocks, b = t % j->blocks;
  const int32_t p_total = g->oh * g->ow, p0 = (int32_t)b * j->pbs;
  const int32_t pb = p_total - p0 < j->pbs ? p_total - p0 : j->pbs;
  const size_t plane = (size_t)g->h * (size_t)g->w;
  if (pb < 4 && ert_cpu.gemv_s8 != NULL) {
    if (part != 0) return; /* the whole block in part 0 */
    block_v(j, n, grp, p0, pb, col);
    return;
  }
  const int32_t kq = (g->k + 3) / 4, np8 = (pb + 7) & ~7;
  const int32_t np = (size_t)kq * 4u * (size_t)np8 <= j->col ? np8 : pb;
  /* (the slot's weight part is free until the first pack_group) */
  gather_q(g, j->x + (n * (size_t)g->c + grp * (size_t)g->cg) * plane, p0, pb, np, col, wq,
           j->off, j->cc);
  const int32_t q[4] = {g->shift, g->yzp, g->lo, g->hi};
  const int rq = j->rq;
  const size_t mgroups = ((size_t)g->mg + S8_MR - 1) / S8_MR, pbytes = pack_bytes(g);
  const int8_t *pk = j->packed != NULL ? j->packed + grp * mgroups * pbytes : NULL;
  const int32_t m_end = (int32_t)((part + 1) * mgroups / parts) * S8_MR;
  for (int32_t m0 = (int32_t)(part * mgroups / parts) * S8_MR; m0 < m_end && m0 < g->mg;
       m0 += S8_MR) {
    const int32_t mr = g->mg - m0 < S8_MR ? g->mg - m0 : S8_MR;
    const size_t oc0 = grp * (size_t)g->mg + (size_t)m0;
    const int8_t *w = wq;
    if (pk != NULL)
      w = pk + (size_t)m0 / S8_MR * pbytes;
    else
      pack_group(j, grp, m0, wq);
    const int32_t *bias = (const int32_t *)(const void *)(w + pbytes - 32u), *mult = bias + S8_MR;
    int8_t *y0 = j->y + (n * (size_t)g->m + oc0) * (size_t)p_total + (size_t)p0;
    int32_t done = 0; /* pixels requantized by qgemm_rq_s8 */
    if (rq) {
      done = ert_cpu.qgemm_rq_s8(kq, np, col, w, bias, mult, q, y0, (size_t)p_total, pb, mr);
      if (done == pb) continue;
    }
    int32_t acc[S8_MR][2 * S8_PB + 1];
    (j->w_no_min && ert_cpu.qgemm_s8_p != NULL ? ert_cpu.qgemm_s8_p : ert_cpu.qgemm_s8)(
        kq, np, col, w, bias, &acc[0][0], 2 * S8_PB + 1);
    for (int32_t r = 0; r < mr; r++)
      ert_requant_row(acc[r] + done, (size_t)(pb - done), mult[r], g->shift, g->yzp, g->lo, g->hi,
                      y0 + (size_t)r * (size_t)p_total + (size_t)done);
  }
}

static void im2col_task(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  for (size_t s = begin; s < end; s++) {
    char *slot = j->scratch + s * j->slot_bytes;
    int16_t *col = (int16_t *)(void *)slot;
    int16_t *wbuf = (int16_t *)(void *)(slot + j->col);
    const size_t t0 = s * j->tasks / j->nslots, t1 = (s + 1) * j->tasks / j->nslots;
    for (size_t t = t0; t < t1; t++) {
      if (j->simd)
        block_q(j, t, (int8_t *)(void *)col, (int8_t *)(void *)wbuf);
      else
        block(j, t, col, wbuf);
    }
  }
}

void ert_conv2d_s8__ref(const ert_node *node, ert_exec *ex) {
  geom g;
  read_geom(node, &g);
  job j;
  j.g = &g;
  j.x = (const int8_t *)node->in[0]->data;
  j.w = (const int8_t *)node->in[1]->data;
  j.qp = (const int32_t *)node->in[2]->data;
  j.y = (int8_t *)node->out[0]->data;
  j.w_no_min = node->opdata[0] != 0;
  j.dw3 = g.cg == 1 && dw3_usable(&g, j.w_no_min);
  if ((size_t)g.n * (size_t)g.m * (size_t)g.oh * (size_t)g.ow == 0) return;
  if (!S8_DW3 && g.cg == 1 && ert_cpu.dwc3_s8 != NULL && j.w_no_min && dwc_geom(&g) &&
      (size_t)S8_SLOTS * dwc_slot(&g) <= node->scratch_bytes) {
    size_t tasks = (size_t)g.n * (((size_t)g.m + 15u) / 16u);
    /* with two threads or more, bands of rows until the tasks are a multiple of the slots
       (the pool's pieces), each band at least 16 pixels (the kernel's least) */
    j.bands = 1;
    if (ert_exec_threads(ex) > 1)
      for (size_t b = 2; tasks * j.bands % S8_SLOTS != 0 && b <= S8_SLOTS; ++b)
        if ((size_t)(g.oh / (int32_t)b) * (size_t)g.ow >= 16u) j.bands = b;
    tasks *= j.bands;
    j.scratch = (char *)node->scratch;
    j.slot_bytes = dwc_slot(&g);
    j.nslots = tasks < S8_SLOTS ? tasks : S8_SLOTS;
    ert_parallel_for(ex, j.nslots, dwc_task, &j);
    return;
  }
  if (g.cg == 1) {
    const size_t planes = (size_t)g.n * (size_t)g.m, need = dw_scratch(&g);
    j.scratch = need ? (char *)node->scratch : NULL;
    j.slot_bytes = need / S8_SLOTS;
    j.nslots = planes < S8_SLOTS ? planes : S8_SLOTS;
    ert_parallel_for(ex, j.scratch ? j.nslots : planes, dw_task, &j);
    return;
  }
  j.scratch = (char *)node->scratch;
  j.slot_bytes = im2col_scratch(&g) / S8_SLOTS;
  j.col = col_bytes(&g);
  /* The int8 quads of a block take ceil(k/4)*4 bytes per pixel, the int16 block 2k: when k
   * is a multiple of 4, twice as many pixels fit in the slot (fewer weight packings). */
  j.simd = ert_cpu.qgemm_s8 != NULL && ert_cpu.quads_s8 != NULL && ert_cpu.pack_w_s8 != NULL;
  j.pbs = j.simd && (size_t)(g.k + 3) / 4u * 8u * S8_PB <= j.col ? 2 * S8_PB : S8_PB;
  j.rq = ert_cpu.qgemm_rq_s8 != NULL && g.shift > 31 &&
         (j.w_no_min || ert_cpu.qgemm_s8_p == NULL); /* qgemm_s8_p: no sdot */
  j.packed = NULL;
  ptrdiff_t off[S8_TAPS];
  j.off = off;
  j.cc = j.simd ? run_offsets(&g, off) : 0;
  int32_t px;
  size_t col;
  if (S8_EXT && j.simd && (int64_t)g.oh * g.ow > S8_PB &&
      node->scratch_bytes >= ext_scratch(&g, &px, &col)) {
    j.slot_bytes = col + align64((size_t)S8_MR * (size_t)g.k * 2u);
    j.col = col;
    if (j.rq) /* (the int32 path's accumulators hold 2 * S8_PB + 1 pixels) */
      j.pbs = px;
    j.packed = (int8_t *)node->scratch + S8_SLOTS * j.slot_bytes;
    ert_parallel_for(ex, (size_t)g.group * (((size_t)g.mg + S8_MR - 1) / S8_MR), pack_task, &j);
  }
  j.msplit = 1;
#if !defined(ERT_X86_KERNELS)
  /* The boards with two threads or more: maps of fewer than 4 * S8_SLOTS blocks cut into a
   * multiple of S8_SLOTS near-equal blocks (each slot a piece of the pool: four on a Pi 4
   * or 5), and fewer blocks than slots each split into parts of whole S8_MR channel groups
   * that gather the block again: MobileNetV2's 7x7 and 14x14 layers were one or two tasks,
   * run by one thread while the others waited. */
  if (j.simd && ert_exec_threads(ex) > 1 && g.n * g.group == 1) {
    const size_t pixels = (size_t)g.oh * (size_t)g.ow;
    size_t blocks = (pixels + (size_t)j.pbs - 1) / (size_t)j.pbs;
    if (blocks < 4 * S8_SLOTS) {
      const size_t want = (blocks + S8_SLOTS - 1) / S8_SLOTS * S8_SLOTS;
      const size_t pbs = ((pixels + want - 1) / want + 7u) & ~(size_t)7u;
      if (pbs < (size_t)j.pbs) j.pbs = (int32_t)pbs;
      blocks = (pixels + (size_t)j.pbs - 1) / (size_t)j.pbs;
    }
    const size_t mgroups = ((size_t)g.mg + S8_MR - 1) / S8_MR;
    while (blocks * j.msplit % S8_SLOTS != 0 && j.msplit < S8_SLOTS && j.msplit < mgroups) j.msplit++;
  }
#endif
  j.blocks = ((size_t)g.oh * (size_t)g.ow + (size_t)j.pbs - 1) / (size_t)j.pbs;
  j.tasks = (size_t)g.n * (size_t)g.group * j.blocks * j.msplit;
#if defined(ERT_X86_KERNELS)
  /* A single block (maps of 64 pixels or fewer): its output channels in two parts of
   * whole S8_MR groups, each gathering the block itself, so that two threads share the
   * node (more parts cost one thread more gathers than they save: about 10 % on the
   * 7x7 layers with k = 960 at four parts). */
  if (ert_cpu.qgemm_s8 != NULL && ert_cpu.quads_s8 != NULL && ert_cpu.pack_w_s8 != NULL &&
      j.tasks == 1 && g.mg > S8_MR) {
    j.msplit = 2;
    j.tasks = 2;
  }
#endif
  j.nslots = j.tasks < S8_SLOTS ? j.tasks : S8_SLOTS;
  ert_parallel_for(ex, j.nslots, im2col_task, &j);
}
