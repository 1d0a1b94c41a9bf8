/* conv2d.c: 2-D convolution (and 1-D as height 1), NCHW, float32, with fused bias and
 * activation. Parameters and shapes: edgert/converter/ops/conv2d.py.
 *
 * Three paths, chosen in prepare:
 *   depthwise  C/group == 1, group > 1: per output plane, a zero-padded copy of the input plane
 *              (split by stride phase, in scratch) makes every tap a contiguous run
 *              with no bound checks; planes too large for the scratch bound use
 *              direct loops with per-tap column ranges;
 *   pointwise  1x1, stride 1, no padding: per group, Y[Mg, HW] = W[Mg, Cg] X[Cg, HW];
 *   im2col     everything else: per group, W[Mg, Cg*kh*kw] times the im2col matrix of
 *              X, packed block by block inside the GEMM (never materialized).
 */
#include <math.h>

#include "cpu.h"
#include "exec.h"
#include "quant_s8.h"
#include "sgemm.h"
#include "window.h"

enum {
  P_GROUP, P_KH, P_KW, P_SH, P_SW, P_DH, P_DW, P_PT, P_PL, P_PB, P_PR, P_RANK1D, P_ACT,
  P_COUNT = P_ACT + 3
};
enum { PATH_DEPTHWISE = 0, PATH_POINTWISE = 1, PATH_IM2COL = 2 };
enum { OD_PATH = 0 };

typedef struct conv_geom {
  int32_t n, c, h, w;       /* input */
  int32_t m, oh, ow;        /* output */
  int32_t group, cg, mg;
  int32_t kh, kw, sh, sw, dh, dw, pt, pl;
  ert_act_params act;
} conv_geom;

static void read_geom(const ert_node *node, conv_geom *g) {
  ERT_WINDOW_READ(node, g, P_KH, ert_pi(node, P_RANK1D));
  g->n = node->in[0]->shape[0];
  g->c = node->in[0]->shape[1];
  g->m = node->out[0]->shape[1];
  g->group = ert_pi(node, P_GROUP);
  g->cg = g->c / g->group;
  g->mg = g->m / g->group;
  g->act.kind = ert_pi(node, P_ACT);
  g->act.a = ert_pf(node, P_ACT + 1);
  g->act.b = ert_pf(node, P_ACT + 2);
}

static int path_of(const conv_geom *g) {
  /* One input channel per group and several groups: per-plane direct loops. A single
   * group with one input channel (an STFT-like front end) is a plain GEMM instead. */
  if (g->cg == 1 && g->group > 1) return PATH_DEPTHWISE;
  if (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
      g->oh == g->h && g->ow == g->w)
    return PATH_POINTWISE;
  return PATH_IM2COL;
}

static size_t dw_scratch_bytes(const conv_geom *g);

/* Scratch the depthwise path uses: none (the direct loops) when the node has less than
 * its padded planes need, which happens between the sizes a file with bounded
 * dimensions was planned at (the need is not monotonic in the plane size). */
static size_t dw_need(const ert_node *node, const conv_geom *g) {
  const size_t need = node->scratch_bytes == 0 ? 0 : dw_scratch_bytes(g);
  return need <= node->scratch_bytes ? need : 0;
}

edgert_status ert_conv2d_prepare(ert_node *node, ert_err *err) {
  if (node->n_in > 0 && node->in[0] != NULL && node->in[0]->dtype == EDGERT_INT8)
    return ert_conv2d_s8_prepare(node, err); /* conv2d_s8.c */
  edgert_status st;
  if ((st = ert_check_arity(node, err, 2, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  ert_act_params act;
  if ((st = ert_act_read(node, P_ACT, &act, err)) != EDGERT_OK) return st;
  const char *name = node->name;
  const int32_t rank1d = ert_pi(node, P_RANK1D);
  const int32_t group = ert_pi(node, P_GROUP), kh = ert_pi(node, P_KH), kw = ert_pi(node, P_KW);
  const int32_t sh = ert_pi(node, P_SH), sw = ert_pi(node, P_SW);
  const int32_t dh = ert_pi(node, P_DH), dw = ert_pi(node, P_DW);
  const int32_t pt = ert_pi(node, P_PT), pl = ert_pi(node, P_PL);
  const int32_t pb = ert_pi(node, P_PB), pr = ert_pi(node, P_PR);
  if (rank1d != 0 && rank1d != 1)
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': rank1d must be 0 or 1", name);
  if (group < 1 || kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || pt < 0 || pl < 0 ||
      pb < 0 || pr < 0)
    return ert_fail(err, EDGERT_ERR_PARAM,
                    "conv2d '%s': group, kernel, strides and dilations must be >= 1, pads >= 0",
                    name);
  if (rank1d && (kh != 1 || sh != 1 || dh != 1 || pt != 0 || pb != 0))
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': 1-D form needs a height-1 window",
                    name);
  const int rank = rank1d ? 3 : 4;
  const ert_tensor *x = node->in[0], *w = node->in[1], *y = node->out[0];
  const ert_tensor *b = node->n_in > 2 ? node->in[2] : NULL;
  if (!ert_is_f32(x, rank) || !ert_is_f32(w, rank) || !ert_is_f32(y, rank))
    return ert_fail(err, EDGERT_ERR_DTYPE, "conv2d '%s': X, W and Y must be float32 of rank %d",
                    name, rank);
  if (b != NULL && !ert_is_f32(b, 1))
    return ert_fail(err, EDGERT_ERR_DTYPE, "conv2d '%s': B must be float32 of rank 1", name);
  const int64_t n = x->shape[0], c = x->shape[1];
  const int64_t h = rank1d ? 1 : x->shape[2], wd = x->shape[rank - 1];
  const int64_t m = w->shape[0];
  const int64_t wkh = rank1d ? 1 : w->shape[2], wkw = w->shape[rank - 1];
  if (c % group != 0 || m % group != 0 || w->shape[1] != c / group || wkh != kh || wkw != kw)
    return ert_fail(err, EDGERT_ERR_SHAPE,
                    "conv2d '%s': W shape does not match X channels, group %d and kernel %dx%d",
                    name, (int)group, (int)kh, (int)kw);
  if (b != NULL && b->shape[0] != m)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': B must have %lld entries", name,
                    (long long)m);
  const int64_t oh = ert_window_out(h, kh, sh, dh, pt, pb, 0);
  const int64_t ow = ert_window_out(wd, kw, sw, dw, pl, pr, 0);
  if (oh < 1 || ow < 1)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': window larger than the padded input",
                    name);
  if (y->shape[0] != n || y->shape[1] != m || (!rank1d && y->shape[2] != oh) ||
      y->shape[rank - 1] != ow)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': Y shape does not match the convolution",
                    name);
  const int64_t k = (c / group) * kh * kw;
  if (k > INT32_MAX || oh * ow > INT32_MAX || h * wd > INT32_MAX || n * group > INT32_MAX)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "conv2d '%s': tensor too large", name);

  if (h + pt + pb > INT32_MAX / 2 || wd + pl + pr > INT32_MAX / 2)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "conv2d '%s': padded input too large", name);

  conv_geom g;
  read_geom(node, &g);
  const int path = path_of(&g);
  size_t need = 0;
  if (path == PATH_DEPTHWISE) /* no scratch at all: the direct path (files whose converter
                                 planned none for planes this large) */
    need = dw_need(node, &g);
  else if (path == PATH_POINTWISE)
    need = ert_sgemm_scratch_bytes(g.mg, (int64_t)g.oh * g.ow, g.cg, 0);
  else if (path == PATH_IM2COL)
    need = ert_sgemm_scratch_bytes(g.mg, (int64_t)g.oh * g.ow, k, 1);
  if (node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': needs %zu scratch bytes, has %zu", name,
                    need, node->scratch_bytes);
  node->opdata[OD_PATH] = path;
  return EDGERT_OK;
}

/* ---- GEMM paths --------------------------------------------------------------------- */

typedef struct gemm_ctx {
  const conv_geom *g;
  const float *x, *w, *bias;
  float *y;
} gemm_ctx;

static void locate(const void *ctx, size_t p, const float **a, const float **b, float **c,
                   const float **bias) {
  const gemm_ctx *q = ctx;
  const conv_geom *g = q->g;
  const size_t n = p / (size_t)g->group, grp = p % (size_t)g->group;
  const size_t k = (size_t)g->cg * (size_t)g->kh * (size_t)g->kw;
  *a = q->w + grp * (size_t)g->mg * k;
  *b = q->x + (n * (size_t)g->c + grp * (size_t)g->cg) * (size_t)g->h * (size_t)g->w;
  *c = q->y + (n * (size_t)g->m + grp * (size_t)g->mg) * (size_t)g->oh * (size_t)g->ow;
  *bias = q->bias ? q->bias + grp * (size_t)g->mg : NULL;
}

static void run_gemm(const ert_node *node, const conv_geom *g, int path, ert_exec *ex) {
  gemm_ctx q = {g, node->in[0]->data, node->in[1]->data,
                node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL, node->out[0]->data};
  const int32_t k = g->cg * g->kh * g->kw;
  ert_im2col ic = {g->cg, g->h,  g->w,  g->kh, g->kw, g->sh,
                   g->sw, g->dh, g->dw, g->pt, g->pl, g->ow};
  ert_sgemm s;
  s.bpanels = 0;
#if defined(ERT_X86_KERNELS)
  s.bias_cols = s.rows_first = 0;
  s.by_rows = (node->layout & ERT_LAYOUT_PLANES) != 0; /* src/layout.c */
  s.res = NULL;
#endif
  s.m = g->mg;
  s.n = g->oh * g->ow;
  s.k = k;
  s.rsa = k;
  s.csa = 1;
  s.rsb = (ptrdiff_t)g->h * g->w;
  s.csb = 1;
  s.im2col = path == PATH_IM2COL ? &ic : NULL;
  s.ldc = (ptrdiff_t)g->oh * g->ow;
  s.alpha = 1.0f;
  s.accumulate = 0;
  s.act = &g->act;
  s.batch = (size_t)g->n * (size_t)g->group;
  s.locate = locate;
  s.ctx = &q;
  ert_sgemm_run(&s, node->scratch, ex);
}

/* ---- depthwise path ----------------------------------------------------------------- */

/* The portable depthwise loops. With the NEON plane kernels compiled in they only run
 * the windows those do not take (7x7, dilated columns, 3x3 without one column of left
 * padding, rows narrower than 4 or 5, planes too large even for a band), so there they
 * are compiled for size. */
#if defined(ERT_NEON_KERNELS) && defined(__GNUC__)
#define ERT_DW_PORTABLE __attribute__((cold))
#else
#define ERT_DW_PORTABLE
#endif

/* y[i] = (init ? bias : y[i]) + sum over taps t < T of w[t] * (base + toff[t])[i], i < n:
 * (part of) one output row of the padded path, every tap a contiguous run. The taps are
 * summed in three independent chains so that FMA latency does not serialize them. */
#define DW_TAPS(NAME, T)                                                                  \
  ERT_SIMD_CLONES                                                                         \
  static void NAME(float *restrict y, const float *base, const ptrdiff_t *toff,           \
                   const float *restrict w, int32_t n, float bias, int init) {            \
    const float *tp[T];                                                                   \
    float wk[T];                                                                          \
    for (int t = 0; t < (T); ++t) {                                                       \
      tp[t] = base + toff[t];                                                             \
      wk[t] = w[t];                                                                       \
    }                                                                                     \
    for (int32_t i = 0; i < n; ++i) {                                                     \
      float part[3] = {init ? bias : y[i], 0.0f, 0.0f};                                   \
      for (int t = 0; t < (T); ++t) part[t % 3] += wk[t] * tp[t][i];                      \
      y[i] = part[0] + (part[1] + part[2]);                                               \
    }                                                                                     \
  }

DW_TAPS(dw_taps3, 3)
DW_TAPS(dw_taps4, 4)
DW_TAPS(dw_taps5, 5)
DW_TAPS(dw_taps9, 9)

/* y[i] += wv * src[i], i < n */
ERT_SIMD_CLONES
static void dw_axpy(float *restrict y, const float *restrict src, float wv, int32_t n) {
  for (int32_t i = 0; i < n; ++i) y[i] += wv * src[i];
}

/* y[ox] += wv * row[ox*sw + off] for ox in [lo, hi) */
ERT_SIMD_CLONES
static void dw_tap_row(float *restrict y, const float *restrict row, float wv, int32_t lo,
                       int32_t hi, int32_t sw, int32_t off) {
  if (sw == 1) {
    for (int32_t ox = lo; ox < hi; ++ox) y[ox] += wv * row[ox + off];
  } else {
    for (int32_t ox = lo; ox < hi; ++ox) y[ox] += wv * row[(ptrdiff_t)ox * sw + off];
  }
}

/* Smallest o >= 0 with o*s + off >= 0, and the end of the o range with o*s + off < size,
 * clamped to [0, limit]. */
static void valid_range(int32_t off, int32_t s, int32_t size, int32_t limit, int32_t *lo,
                        int32_t *hi) {
  int64_t a = off >= 0 ? 0 : (-(int64_t)off + s - 1) / s;
  int64_t b = off <= size - 1 ? ((int64_t)size - 1 - off) / s + 1 : 0;
  if (a > limit) a = limit;
  if (b > limit) b = limit;
  if (b < a) b = a;
  *lo = (int32_t)a;
  *hi = (int32_t)b;
}

/* Direct path: one output plane with bound checks folded into per-tap column ranges. */
ERT_DW_PORTABLE static void dw_plane_direct(const conv_geom *g, const float *x, const float *w, float bias,
                            float *y) {
  for (int32_t oy = 0; oy < g->oh; ++oy) {
    float *yr = y + (size_t)oy * g->ow;
    const int32_t iy0 = oy * g->sh - g->pt;
    int32_t ky_lo, ky_hi;
    valid_range(iy0, g->dh, g->h, g->kh, &ky_lo, &ky_hi);
    for (int32_t ox = 0; ox < g->ow; ++ox) yr[ox] = bias;
    for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {
      const float *row = x + (size_t)(iy0 + ky * g->dh) * g->w;
      for (int32_t kx = 0; kx < g->kw; ++kx) {
        const int32_t off = kx * g->dw - g->pl;
        int32_t lo, hi;
        valid_range(off, g->sw, g->w, g->ow, &lo, &hi);
        dw_tap_row(yr, row, w[ky * g->kw + kx], lo, hi, g->sw, off);
      }
    }
  }
}

/* Padded path. The scratch copy of an input plane holds the rows and columns the
 * windows reach, zero outside the image, split by stride phase in both dimensions:
 * padded pixel (r, c) is at plane (r % sh, c % sw), row r / sh, column c / sw, each
 * plane prow x plen with pitch plen (dw_pad.fh, fw = sh, sw). Then tap (ky, kx) of
 * output (oy, ox) is at a fixed offset from oy*plen + ox: every tap of a run of outputs
 * reads a contiguous run. */
typedef struct dw_pad {
  int32_t fh, fw;            /* phases: the copy is split by (fh, fw), the strides or 1 */
  int32_t rows, cols;        /* padded rows and columns the windows reach */
  int32_t prow, plen;        /* rows and columns of one phase plane */
  uint64_t floats;           /* the whole copy: sh*sw planes */
} dw_pad;

/* Extents stay below INT32_MAX / 2: prepare bounds the padded input and the windows
 * never reach past it. */
static dw_pad dw_pad_split(const conv_geom *g, int32_t fh, int32_t fw) {
  dw_pad p;
  p.fh = fh;
  p.fw = fw;
  p.rows = (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1;
  p.cols = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw + 1;
  p.prow = (p.rows + fh - 1) / fh;
  p.plen = (p.cols + fw - 1) / fw;
  p.floats = (uint64_t)fh * (uint64_t)fw * (uint64_t)p.prow * (uint64_t)p.plen;
  return p;
}

/* The layout the portable path uses (split by the strides); the optimized row kernels
 * of cpu.h read the unsplit copy (fh = fw = 1), never larger. */
static dw_pad dw_pad_of(const conv_geom *g) { return dw_pad_split(g, g->sh, g->sw); }

/* Narrow outputs are computed as one run over the whole plane at pitch plen, output
 * (oy, ox) at flat[oy*plen + ox] (columns past OW discarded), then copied out; wide ones
 * row by row straight into Y. */
enum { DW_FLAT_BELOW = 64 };
static int dw_flat(const conv_geom *g) { return g->ow < DW_FLAT_BELOW; }
static size_t dw_flat_len(const conv_geom *g, const dw_pad *p) {
  return (size_t)(g->oh - 1) * (size_t)p->plen + (size_t)g->ow;
}

/* Scratch of the depthwise path: DW_SLOTS slots of a plane copy (and the flat run), or
 * 0 (direct path) when a slot would exceed DW_PAD_MAX bytes. edgert/converter/ops/conv2d.py
 * mirrors this. */
enum { DW_SLOTS = ERT_SGEMM_SLOTS, DW_PAD_MAX = 256 * 1024 };
enum { DW_MAX_TAPS = 25 }; /* tap offsets precomputed up to this many taps */

static size_t dw_pad_bytes(const conv_geom *g) {
  return ((size_t)dw_pad_of(g).floats * sizeof(float) + 63u) & ~(size_t)63u;
}

/* Whether a slot holds the whole padded plane (and the flat run): the full mode. */
static size_t dw_full_slot_bytes(const conv_geom *g) {
  const dw_pad p = dw_pad_of(g);
  if (p.floats > DW_PAD_MAX / sizeof(float)) return 0;
  size_t one = dw_pad_bytes(g);
  if (dw_flat(g)) one += (dw_flat_len(g, &p) * sizeof(float) + 63u) & ~(size_t)63u;
  return one > DW_PAD_MAX ? 0 : one;
}

/* Band mode, for planes whose padded copy exceeds DW_PAD_MAX: windows that the plane
 * kernels of cpu.h take (see dw_hook; decided from the geometry alone, so that files do
 * not depend on the CPU) run over bands of output rows, each band's padded rows copied
 * (unsplit) into a slot of at most DW_PAD_MAX bytes. Output rows per band, or 0 when not
 * even one fits or the window is not one of those. edgert/converter/ops/conv2d.py mirrors this. */
static int32_t dw_band_rows(const conv_geom *g) {
  if (g->kh != g->kw || (g->kh != 3 && g->kh != 5) || (g->sw != 1 && g->sw != 2) || g->dw != 1 ||
      g->ow < 3 + g->sw)
    return 0;
  const int64_t cols = (int64_t)(g->ow - 1) * g->sw + g->kw;
  const int64_t fit = (int64_t)(DW_PAD_MAX / sizeof(float)) / cols; /* padded rows a slot holds */
  const int64_t span = (int64_t)(g->kh - 1) * g->dh + 1;
  if (fit < span) return 0;
  const int64_t b = (fit - span) / g->sh + 1;
  return (int32_t)(b < g->oh ? b : g->oh);
}

static size_t dw_band_slot_bytes(const conv_geom *g, int32_t band) {
  const int64_t cols = (int64_t)(g->ow - 1) * g->sw + g->kw;
  const int64_t rows = (int64_t)(band - 1) * g->sh + (int64_t)(g->kh - 1) * g->dh + 1;
  return ((size_t)(rows * cols) * sizeof(float) + 63u) & ~(size_t)63u;
}

static size_t dw_scratch_bytes(const conv_geom *g) {
  const size_t full = dw_full_slot_bytes(g);
  if (full) return DW_SLOTS * full;
  const int32_t band = dw_band_rows(g);
  return band ? DW_SLOTS * dw_band_slot_bytes(g, band) : 0;
}

/* Offset of tap (ky, kx) in the copy, relative to output (0, 0). */
static ptrdiff_t dw_tap_offset(const conv_geom *g, const dw_pad *p, int32_t ky, int32_t kx) {
  const int32_t r = ky * g->dh, c = kx * g->dw;
  const size_t plane = (size_t)p->prow * (size_t)p->plen;
  return (ptrdiff_t)(((size_t)(r % p->fh) * (size_t)p->fw + (size_t)(c % p->fw)) * plane +
                     (size_t)(r / p->fh) * (size_t)p->plen + (size_t)(c / p->fw));
}

/* Copies one input plane into the padded layout. The zeros of the copy are the same for
 * every plane of a node, so with `zeroed` (a copy of this node's geometry was filled
 * before into dst) only the image part is written. */
/* Padded rows [r0, r1) of the unsplit copy (image rows at pt, columns at pl) into dst,
 * row r0 first. With `zeroed` the pad columns of every dst row are zero already; rows
 * outside the image are always written (in band mode a slot row holds image data in one
 * band and padding in another). */
#if defined(ERT_X86_KERNELS)
/* d[0..n) = s[0..n) (s NULL: zeros). Short runs (the rows of small planes, 4 to 63
 * floats) in 4-float moves, the last one ending at n (overlapping the one before when n
 * is not a multiple of 4), on x86-64, where a library call per row would cost more than
 * the copy; the boards' size-bound builds keep the calls (FILL_COPY, FILL_ZERO). */
static inline void copy_run(float *restrict d, const float *restrict s, size_t n) {
  static const float zeros[4] = {0};
  if (n >= 64) {
    if (s != NULL)
      memcpy(d, s, n * sizeof(float));
    else
      memset(d, 0, n * sizeof(float));
    return;
  }
  if (n < 4) {
    for (size_t i = 0; i < n; ++i) d[i] = s ? s[i] : 0.0f;
    return;
  }
  size_t i = 0;
  for (; i + 4 <= n; i += 4) memcpy(d + i, s ? s + i : zeros, 4 * sizeof(float));
  if (i < n) memcpy(d + n - 4, s ? s + n - 4 : zeros, 4 * sizeof(float));
}
#define FILL_COPY(d, s, n) copy_run((d), (s), (n))
#define FILL_ZERO(d, n) copy_run((d), NULL, (n))
#else
#define FILL_COPY(d, s, n) memcpy((d), (s), (n) * sizeof(float))
#define FILL_ZERO(d, n) memset((d), 0, (n) * sizeof(float))
#endif

static void dw_fill_rows(const conv_geom *g, const dw_pad *p, const float *x, float *restrict dst,
                         int32_t r0, int32_t r1, int zeroed) {
  int32_t a, b;
  valid_range(-g->pl, 1, g->w, p->plen, &a, &b);
  for (int32_t r = r0; r < r1; ++r) {
    const int32_t iy = r - g->pt;
    float *dp = dst + (size_t)(r - r0) * (size_t)p->plen;
    if (iy < 0 || iy >= g->h) {
      FILL_ZERO(dp, (size_t)p->plen);
      continue;
    }
    if (!zeroed) {
      FILL_ZERO(dp, (size_t)a);
      FILL_ZERO(dp + b, (size_t)(p->plen - b));
    }
    FILL_COPY(dp + a, x + (size_t)iy * (size_t)g->w + (a - g->pl), (size_t)(b - a));
  }
}

static void dw_fill(const conv_geom *g, const dw_pad *p, const float *x, float *restrict dst,
                    int zeroed) {
  if (p->fh == 1 && p->fw == 1) { /* the unsplit copy: rows of the image at (pt, pl) */
    dw_fill_rows(g, p, x, dst, 0, p->rows, zeroed);
    return;
  }
  const int32_t sh = p->fh, sw = p->fw, pl = g->pl, plen = p->plen, h = g->h, w = g->w;
  const size_t plane = (size_t)p->prow * (size_t)plen;
  /* per column phase, the range of i with 0 <= i*sw + ph - pl < w (the same for every row) */
  int32_t lo[2], hi[2];
  for (int32_t ph = 0; ph < 2 && ph < sw; ++ph) valid_range(ph - pl, sw, w, plen, &lo[ph], &hi[ph]);
  for (int32_t r = 0; r < sh * p->prow; ++r) {
    const int32_t iy = r - g->pt;
    const float *src = iy >= 0 && iy < h && r < p->rows ? x + (size_t)iy * w : NULL;
    for (int32_t ph = 0; ph < sw; ++ph) {
      float *dp = dst + ((size_t)(r % sh) * (size_t)sw + (size_t)ph) * plane +
                  (size_t)(r / sh) * plen;
      int32_t a = plen, b = plen;
      if (src != NULL) {
        if (ph < 2) {
          a = lo[ph];
          b = hi[ph];
        } else {
          valid_range(ph - pl, sw, w, plen, &a, &b);
        }
      }
      const ptrdiff_t off = (ptrdiff_t)ph - pl;
      if (zeroed && src == NULL) continue;
      int32_t i = zeroed ? a : 0;
      for (; i < a; ++i) dp[i] = 0.0f;
      if (sw == 1) {
        if (b > i) memcpy(dp + i, src + i + off, (size_t)(b - i) * sizeof(float));
        i = b > i ? b : i;
      } else if (sw == 2) {
        for (; i < b; ++i) dp[i] = src[2 * (ptrdiff_t)i + off];
      } else {
        for (; i < b; ++i) dp[i] = src[(ptrdiff_t)i * sw + off];
      }
      if (!zeroed)
        for (; i < plen; ++i) dp[i] = 0.0f;
    }
  }
}

/* n outputs y[i] = bias + sum over taps of w[t] * base[toff[t] + i]. */
ERT_DW_PORTABLE static void dw_run(const conv_geom *g, const dw_pad *p, const ptrdiff_t *toff, const float *w,
                   float bias, const float *base, float *y, int32_t n) {
  const int32_t taps = g->kh * g->kw;
  if (taps == 9) {
    dw_taps9(y, base, toff, w, n, bias, 1);
  } else if (taps == 4) {
    dw_taps4(y, base, toff, w, n, bias, 1);
  } else if (g->kw == 5 && taps <= DW_MAX_TAPS) {
    for (int32_t ky = 0; ky < g->kh; ++ky)
      dw_taps5(y, base, toff + 5 * ky, w + 5 * ky, n, bias, ky == 0);
  } else if (g->kw == 3 && taps <= DW_MAX_TAPS) {
    for (int32_t ky = 0; ky < g->kh; ++ky)
      dw_taps3(y, base, toff + 3 * ky, w + 3 * ky, n, bias, ky == 0);
  } else {
    for (int32_t i = 0; i < n; ++i) y[i] = bias;
    for (int32_t t = 0; t < taps; ++t)
      dw_axpy(y, base + dw_tap_offset(g, p, t / g->kw, t % g->kw), w[t], n);
  }
}

/* Whether cpu.h's dw3 takes this window (straight from the input plane): 3x3,
 * undilated, strides 1 or 2 across, one column of padding left and at most one right,
 * rows of 5 outputs or more. */
#if defined(ERT_NEON_KERNELS) || defined(ERT_X86_KERNELS) /* the builds with a dw3 kernel */
static int dw3_fits(const conv_geom *g) {
  return ert_cpu.dw3 != NULL && g->kh == 3 && g->kw == 3 && g->dh == 1 && g->dw == 1 &&
         (g->sw == 1 || g->sw == 2) && g->pl == 1 && g->ow >= 5 &&
         (int64_t)(g->ow - 1) * g->sw + 1 <= g->w;
}
#define DW3_USED(j) ((j)->dw3)
#else
#define dw3_fits(g) 0
#define DW3_USED(j) 0
#endif

/* Optimized plane kernel of cpu.h for this window, or NULL. */
static ert_dw_plane_fn dw_hook(const conv_geom *g) {
  if (g->kh != g->kw || (g->sw != 1 && g->sw != 2) || g->dw != 1 || g->ow < 3 + g->sw) return NULL;
#if defined(ERT_X86_KERNELS) /* the NEON builds take 3x3 by dw3 (dw3_fits) */
  if (g->kh == 3) return g->sw == 1 ? ert_cpu.dw3_s1 : ert_cpu.dw3_s2;
#endif
  if (g->kh == 5) return g->sw == 1 ? ert_cpu.dw5_s1 : ert_cpu.dw5_s2;
  return NULL;
}

static void dw_plane_padded(const conv_geom *g, const dw_pad *p, const ptrdiff_t *toff,
                            const float *x, const float *w, float bias, float *buf, float *flat,
                            float *y, int zeroed) {
  dw_fill(g, p, x, buf, zeroed);
  if (dw_flat(g)) {
    dw_run(g, p, toff, w, bias, buf, flat, (int32_t)dw_flat_len(g, p));
    for (int32_t oy = 0; oy < g->oh; ++oy) {
      const float *src = flat + (size_t)oy * p->plen;
      float *yr = y + (size_t)oy * g->ow;
      for (int32_t ox = 0; ox < g->ow; ++ox) yr[ox] = src[ox];
    }
    return;
  }
  for (int32_t oy = 0; oy < g->oh; ++oy)
    dw_run(g, p, toff, w, bias, buf + (size_t)oy * p->plen, y + (size_t)oy * g->ow, g->ow);
}

/* The activation over a plane: the cheap kinds inline (same formulas as
 * ert_act_apply), the others through it. Builds with the NEON kernels call
 * ert_act_apply alone (its cpu.h kernel takes every cheap kind). */
#if defined(ERT_NEON_KERNELS)
static void finish(const ert_act_params *act, float *y, size_t count) {
  ert_act_apply(act, y, count);
}
#else
ERT_SIMD_CLONES
static void finish(const ert_act_params *act, float *y, size_t count) {
  const float a = act->a, b = act->b;
  if (act->kind != ERT_ACT_NONE && ert_cpu.act_apply != NULL && ert_cpu.act_apply(act, y, count))
    return; /* the optimized kernel of cpu.h */
  switch ((ert_act)act->kind) {
    case ERT_ACT_NONE:
      break;
    case ERT_ACT_RELU:
      for (size_t i = 0; i < count; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      break;
    case ERT_ACT_CLIP:
      for (size_t i = 0; i < count; ++i) {
        const float v = y[i] < a ? a : y[i];
        y[i] = v > b ? b : v;
      }
      break;
    case ERT_ACT_HARD_SWISH:
      for (size_t i = 0; i < count; ++i) {
        float v = y[i] / 6.0f + 0.5f;
        v = v < 0.0f ? 0.0f : v;
        v = v > 1.0f ? 1.0f : v;
        y[i] = y[i] * v;
      }
      break;
    default:
      ert_act_apply(act, y, count);
      break;
  }
}
#endif

typedef struct dw_job {
  const conv_geom *g;
  const float *x, *w, *bias;
  float *y;
  char *scratch;    /* NULL: direct path */
  dw_pad pad;
  size_t slot_bytes, planes, nslots;
  ert_dw_plane_fn hook; /* optimized plane kernel (pad is then unsplit), or NULL */
  ert_dw3_geom d3;      /* with dw3: its geometry and the fused clamp */
  int dw3, act_after;   /* planes by ert_cpu.dw3 (the zero row in the slot); the
                           activation then as a pass after each plane */
  int32_t band;         /* with hook: output rows per band (the whole plane when it fits) */
  ptrdiff_t toff[DW_MAX_TAPS];
} dw_job;

static void dw_run_planes(const dw_job *j, size_t p0, size_t p1, float *buf) {
  const conv_geom *g = j->g;
  const size_t plane_in = (size_t)g->h * g->w, plane_out = (size_t)g->oh * g->ow;
  const size_t khw = (size_t)g->kh * g->kw;
  for (size_t p = p0; p < p1; ++p) {
    const size_t n = p / (size_t)g->m, oc = p % (size_t)g->m;
    const size_t ic = oc / (size_t)g->mg; /* one input channel per group */
    const float *x = j->x + (n * (size_t)g->c + ic) * plane_in;
    const float bias = j->bias ? j->bias[oc] : 0.0f;
    float *y = j->y + p * plane_out;
    if (DW3_USED(j)) {
      ert_cpu.dw3(y, x, buf, j->w + oc * khw, bias, &j->d3);
      if (j->act_after) finish(&g->act, y, plane_out);
      continue;
    }
    if (buf && j->hook) { /* the plane kernel over bands of output rows (one: the plane) */
      const dw_pad *pd = &j->pad;
      for (int32_t oy = 0; oy < g->oh; oy += j->band) {
        const int32_t rows = g->oh - oy < j->band ? g->oh - oy : j->band;
        const int32_t r0 = oy * g->sh, r1 = (oy + rows - 1) * g->sh + (g->kh - 1) * g->dh + 1;
        dw_fill_rows(g, pd, x, buf, r0, r1, p != p0 || oy != 0);
        j->hook(y + (size_t)oy * g->ow, rows, g->ow, buf, (ptrdiff_t)g->sh * pd->plen,
                (ptrdiff_t)g->dh * pd->plen, j->w + oc * khw, bias);
      }
    } else if (buf)
      dw_plane_padded(g, &j->pad, j->toff, x, j->w + oc * khw, bias, buf,
                      buf + dw_pad_bytes(g) / sizeof(float), y, p != p0);
    else
      dw_plane_direct(g, x, j->w + oc * khw, bias, y);
    finish(&g->act, y, plane_out);
  }
}

static void dw_worker(void *arg, size_t begin, size_t end) {
  const dw_job *j = arg;
  if (j->scratch == NULL) {
    dw_run_planes(j, begin, end, NULL);
    return;
  }
  float *buf = (float *)(void *)(j->scratch + begin * j->slot_bytes);
  if (DW3_USED(j)) memset(buf, 0, (size_t)j->g->w * sizeof(float)); /* the zero row */
  dw_run_planes(j, begin * j->planes / j->nslots, end * j->planes / j->nslots, buf);
}

#if defined(ERT_X86_KERNELS) /* only x86-64 has dw_direct: the boards' code stays as it was */
/* dw3 planes on x86-64: one zero row for all of them (read only), the planes as the
 * pieces of the job (more and smaller than one per slot: the threads share them out
 * evenly). */
static void dw3_worker(void *arg, size_t begin, size_t end) {
  const dw_job *j = arg;
  dw_run_planes(j, begin, end, (float *)(void *)j->scratch);
}

/* The image-direct plane kernel of cpu.h (no padded copy), when the CPU has one and dw3
 * does not take the window: planes over the threads, each plane then its activation. */
typedef struct dw_direct_job {
  const conv_geom *g;
  const float *x, *w, *bias;
  float *y;
} dw_direct_job;

static void dw_direct_worker(void *arg, size_t begin, size_t end) {
  const dw_direct_job *j = arg;
  const conv_geom *g = j->g;
  const size_t plane_in = (size_t)g->h * g->w, plane_out = (size_t)g->oh * g->ow;
  for (size_t p = begin; p < end; ++p) {
    const size_t n = p / (size_t)g->m, oc = p % (size_t)g->m, ic = oc / (size_t)g->mg;
    float *y = j->y + p * plane_out;
    ert_cpu.dw_direct(y, j->x + (n * (size_t)g->c + ic) * plane_in, g->h, g->w, g->oh, g->ow, g->kh,
                      g->sh, g->pt, g->pl, j->w + oc * (size_t)g->kh * g->kw, j->bias ? j->bias[oc] : 0.0f);
    finish(&g->act, y, plane_out);
  }
}

static int run_depthwise_direct(const ert_node *node, const conv_geom *g, ert_exec *ex) {
  if (dw_need(node, g) && dw3_fits(g)) return 0; /* dw3 takes it, the clamp fused */
  if (ert_cpu.dw_direct == NULL || g->kh != g->kw || g->sh != g->sw || g->dh != 1 || g->dw != 1)
    return 0;
  dw_direct_job j = {g, node->in[0]->data, node->in[1]->data,
                     node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL, node->out[0]->data};
  if (g->ow < 1 || !ert_cpu.dw_direct(j.y, j.x, g->h, g->w, 0, g->ow, g->kh, g->sh, g->pt, g->pl, j.w, 0.0f))
    return 0; /* the kernel does not take this window (oh = 0: it only answers) */
  ert_parallel_for(ex, (size_t)g->n * (size_t)g->m, dw_direct_worker, &j);
  return 1;
}
#else
#define run_depthwise_direct(node, g, ex) 0
#endif

static void run_depthwise(const ert_node *node, const conv_geom *g, ert_exec *ex) {
  if (run_depthwise_direct(node, g, ex)) return;
  dw_job j;
  j.g = g;
  j.x = node->in[0]->data;
  j.w = node->in[1]->data;
  j.bias = node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL;
  j.y = node->out[0]->data;
  j.planes = (size_t)g->n * (size_t)g->m;
  size_t need = dw_need(node, g); /* as prepare */
  /* dw3 uses only a zero row of w floats from the slot: every slot (a padded plane or
     band of at least 3 rows of (ow - 1)*sw + 3 >= w floats) holds one */
  j.dw3 = need && dw3_fits(g);
  j.act_after = g->act.kind != ERT_ACT_NONE && g->act.kind != ERT_ACT_CLIP;
  j.d3 = (ert_dw3_geom){g->h, g->w, g->oh, g->ow, g->sh, g->sw, g->pt, -INFINITY, INFINITY};
  if (g->act.kind == ERT_ACT_CLIP) j.d3.lo = g->act.a, j.d3.hi = g->act.b;
  j.hook = need && !j.dw3 ? dw_hook(g) : NULL;
  j.band = g->oh;
  if (need && !j.dw3 && !dw_full_slot_bytes(g)) { /* band mode: only with the plane kernels */
    j.band = j.hook ? dw_band_rows(g) : 0;
    if (j.band == 0) need = 0, j.hook = NULL; /* the direct path */
  }
  j.pad = j.hook ? dw_pad_split(g, 1, 1) : dw_pad_of(g);
  j.scratch = need ? node->scratch : NULL;
  j.slot_bytes = need / DW_SLOTS;
  j.nslots = j.planes < DW_SLOTS ? j.planes : DW_SLOTS;
  const int32_t taps = g->kh * g->kw;
  if (taps <= DW_MAX_TAPS)
    for (int32_t t = 0; t < taps; ++t) j.toff[t] = dw_tap_offset(g, &j.pad, t / g->kw, t % g->kw);
#if defined(ERT_X86_KERNELS)
  if (j.scratch && j.dw3) {
    memset(j.scratch, 0, (size_t)g->w * sizeof(float)); /* the zero row */
    ert_parallel_for(ex, j.planes, dw3_worker, &j);
    return;
  }
#endif
  ert_parallel_for(ex, j.scratch ? j.nslots : j.planes, dw_worker, &j);
}

#if defined(ERT_X86_KERNELS) /* only x86-64 has conv3s2 and conv3s1: the boards' code stays as it was */
/* A 3x3 convolution by cpu.h's conv3s2 (stride 2, at most 4 input planes: an image
 * network's stem) or conv3s1 (stride 1, AVX-512), without the im2col packing: the output
 * rows of every image and group over the threads; the clamp fused, the other activations
 * as a pass over each piece's rows. */
typedef struct conv3_job {
  const conv_geom *g;
  const float *x, *w, *bias;
  float *y;
  ert_conv3s2_geom k;
  void (*fn)(float *, const float *, const float *, const float *, const ert_conv3s2_geom *,
             int32_t, int32_t);
} conv3_job;

static void conv3_worker(void *arg, size_t begin, size_t end) {
  const conv3_job *j = arg;
  const conv_geom *g = j->g;
  const size_t oplane = (size_t)g->oh * (size_t)g->ow, plane = (size_t)g->h * (size_t)g->w;
  for (size_t r = begin; r < end;) {
    const size_t img = r / (size_t)g->oh, oy0 = r % (size_t)g->oh; /* img: batch * group + group */
    const size_t oy1 = end - img * (size_t)g->oh < (size_t)g->oh ? end - img * (size_t)g->oh : (size_t)g->oh;
    const size_t grp = img % (size_t)g->group;
    float *y = j->y + img * (size_t)g->mg * oplane;
    j->fn(y, j->x + img * (size_t)g->cg * plane, j->w + grp * (size_t)g->mg * (size_t)g->cg * 9,
          j->bias != NULL ? j->bias + grp * (size_t)g->mg : NULL, &j->k, (int32_t)oy0, (int32_t)oy1);
    if (g->act.kind != ERT_ACT_NONE && g->act.kind != ERT_ACT_CLIP)
      for (int32_t o = 0; o < g->mg; ++o)
        finish(&g->act, y + (size_t)o * oplane + oy0 * (size_t)g->ow, (oy1 - oy0) * (size_t)g->ow);
    r = img * (size_t)g->oh + oy1;
  }
}

static int run_conv3(const ert_node *node, const conv_geom *g, ert_exec *ex) {
  if (g->kh != 3 || g->kw != 3 || g->dh != 1 || g->dw != 1 || g->ow < 1 || g->oh < 1) return 0;
  conv3_job j = {g, node->in[0]->data, node->in[1]->data,
                 node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL, node->out[0]->data,
                 {g->cg, g->h, g->w, g->mg, g->oh, g->ow, g->pt, g->pl, -INFINITY, INFINITY}, NULL};
  if (ert_cpu.conv3s2 != NULL && g->group == 1 && g->c <= 4 && g->sh == 2 && g->sw == 2)
    j.fn = ert_cpu.conv3s2;
  else if (ert_cpu.conv3s1 != NULL && g->sh == 1 && g->sw == 1)
    j.fn = ert_cpu.conv3s1;
  else
    return 0;
  if (g->act.kind == ERT_ACT_CLIP) j.k.lo = g->act.a, j.k.hi = g->act.b;
  ert_parallel_for(ex, (size_t)g->n * (size_t)g->group * (size_t)g->oh, conv3_worker, &j);
  return 1;
}
#else
#define run_conv3(node, g, ex) 0
#endif

#if defined(ERT_X86_KERNELS) /* NHWC layers: x86-64 with AVX-512 only (src/layout.c) */
/* ---- NHWC ----------------------------------------------------------------------------- *
 * A session may store some tensors NHWC (docs/host.md, "NHWC between the pointwise
 * layers"); a node's layout bits say which of its input and output are. The pointwise
 * layers are the same GEMM with other strides: NHWC out, C[pixel][channel] = X . W^T with
 * the weights in 16-column panels (wt) and the bias per column, cut by pixels; NHWC in, NCHW
 * out, B(k, pixel) = x[pixel*K + k]. The depthwise 3x3 layers run dw3_nhwc. */

int ert_conv2d_nhwc_kind(const ert_node *node, size_t *wt_floats) {
  if (node->in[0]->dtype != EDGERT_FLOAT32 || ert_pi(node, P_RANK1D) != 0) return 0;
  conv_geom g;
  read_geom(node, &g);
  if (g.n != 1) return 0;
  const int path = (int)node->opdata[OD_PATH];
  const int64_t px = (int64_t)g.oh * g.ow;
  if (path == PATH_POINTWISE && g.group == 1 && px >= 2 && g.m >= 2 && ert_cpu.sgemm_block) {
    *wt_floats = (size_t)g.c * (size_t)((g.m + 15) / 16 * 16); /* whole 16-column panels */
    return node->scratch_bytes >= ert_sgemm_scratch_bytes(px, g.m, g.c, 0)
               ? ERT_NHWC_POINTWISE
               : ERT_NHWC_POINTWISE_IN; /* NHWC out would pack A: no room */
  }
  if (path == PATH_DEPTHWISE && g.c == g.m && g.kh == 3 && g.kw == 3 && g.dh == 1 &&
      g.dw == 1 && g.pl == 1 && (g.sw == 1 || g.sw == 2) && ert_cpu.dw3_nhwc) {
    *wt_floats = 9 * (size_t)g.c;
    return ERT_NHWC_DEPTHWISE;
  }
  return 0;
}

int ert_conv2d_has_act(const ert_node *node) { return ert_pi(node, P_ACT) != ERT_ACT_NONE; }

void ert_conv2d_nhwc_weights(const ert_node *node, float *wt) {
  const float *w = node->in[1]->data;
  const int32_t m = node->out[0]->shape[1];
  if ((int)node->opdata[OD_PATH] == PATH_DEPTHWISE) { /* [c][9] -> [9][c] */
    for (int32_t ch = 0; ch < m; ++ch)
      for (int t = 0; t < 9; ++t) wt[(size_t)t * (size_t)m + (size_t)ch] = w[(size_t)ch * 9 + (size_t)t];
  } else { /* [m][k] -> panels of 16 outputs, [m / 16][k][16] (ert_sgemm.bpanels) */
    const size_t k = (size_t)node->in[0]->shape[1], mp = (size_t)(m + 15) / 16 * 16;
    for (size_t o = 0; o < mp; ++o)
      for (size_t i = 0; i < k; ++i)
        wt[o / 16 * 16 * k + i * 16 + o % 16] = o < (size_t)m ? w[o * k + i] : 0.0f;
  }
}

typedef struct nhwc_ctx {
  const float *a, *b, *bias;
  float *c;
} nhwc_ctx;

static void nhwc_locate(const void *ctx, size_t p, const float **a, const float **b, float **c,
                        const float **bias) {
  const nhwc_ctx *q = ctx;
  (void)p;
  *a = q->a, *b = q->b, *c = q->c, *bias = q->bias;
}

static void run_pointwise_nhwc(const ert_node *node, const conv_geom *g, ert_exec *ex) {
  const int32_t px = g->oh * g->ow;
  const float *x = node->in[0]->data;
  const float *bias = node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL;
  ert_sgemm s;
  memset(&s, 0, sizeof s);
  nhwc_ctx q = {x, node->wt, bias, node->out[0]->data};
  s.k = g->c;
  if (node->layout & ERT_LAYOUT_OUT_NHWC) { /* C[pixel][m] = X^T W^T: A the input */
    s.m = px;
    s.n = g->m;
    s.rsa = (node->layout & ERT_LAYOUT_IN_NHWC) ? g->c : 1;
    s.csa = (node->layout & ERT_LAYOUT_IN_NHWC) ? 1 : px;
    s.bpanels = 1; /* node->wt: the weights in 16-column panels */
    s.ldc = g->m;
    s.bias_cols = 1;
    s.rows_first = 1;
    if (node->layout & ERT_LAYOUT_RESIDUAL) { /* the Add after it, in the stores */
      q.c = node->res_y;
      s.res = node->res;
    }
  } else { /* NCHW out from an NHWC input: B(k, pixel) = x[pixel*K + k] */
    q.a = node->in[1]->data;
    q.b = x;
    s.m = g->m;
    s.n = px;
    s.rsa = g->c;
    s.csa = 1;
    s.rsb = 1;
    s.csb = g->c;
    s.ldc = px;
  }
  s.alpha = 1.0f;
  s.act = &g->act;
  s.batch = 1;
  s.locate = nhwc_locate;
  s.ctx = &q;
  ert_sgemm_run(&s, node->scratch, ex);
}

typedef struct dwn_job {
  const conv_geom *g;
  const float *x, *kt, *bias;
  float *y;
  ert_dw3_geom d3;
  size_t parts;
} dwn_job;

static void dwn_worker(void *arg, size_t begin, size_t end) {
  const dwn_job *j = arg;
  const conv_geom *g = j->g;
  const size_t px = (size_t)g->oh * (size_t)g->ow;
  const int32_t p0 = (int32_t)(begin * px / j->parts), p1 = (int32_t)(end * px / j->parts);
  ert_cpu.dw3_nhwc(j->y, j->x, j->kt, j->bias, &j->d3, g->c, p0, p1);
  if (g->act.kind != ERT_ACT_NONE && g->act.kind != ERT_ACT_CLIP)
    finish(&g->act, j->y + (size_t)p0 * (size_t)g->c, (size_t)(p1 - p0) * (size_t)g->c);
}

static void run_depthwise_nhwc(const ert_node *node, const conv_geom *g, ert_exec *ex) {
  dwn_job j = {g, node->in[0]->data, node->wt,
               node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL, node->out[0]->data,
               {g->h, g->w, g->oh, g->ow, g->sh, g->sw, g->pt, -INFINITY, INFINITY},
               ert_pixel_parts((int64_t)g->oh * g->ow, 8)};
  if (g->act.kind == ERT_ACT_CLIP) j.d3.lo = g->act.a, j.d3.hi = g->act.b;
  ert_parallel_for(ex, j.parts, dwn_worker, &j);
}
#endif

void ert_conv2d_eval(const ert_node *node, ert_exec *ex) {
  if (node->in[0]->dtype == EDGERT_INT8) {
    ert_conv2d_s8__ref(node, ex);
    return;
  }
  conv_geom g;
  read_geom(node, &g);
  const int path = (int)node->opdata[OD_PATH];
#if defined(ERT_X86_KERNELS)
  if (node->layout & (ERT_LAYOUT_IN_NHWC | ERT_LAYOUT_OUT_NHWC)) {
    if (path == PATH_DEPTHWISE)
      run_depthwise_nhwc(node, &g, ex);
    else
      run_pointwise_nhwc(node, &g, ex);
    return;
  }
#endif
  if (path == PATH_DEPTHWISE)
    run_depthwise(node, &g, ex);
  else if (path != PATH_IM2COL || !run_conv3(node, &g, ex))
    run_gemm(node, &g, path, ex);
}

edgert_status ert_conv2d_shape(ert_node *node, ert_err *err) {
  const ert_tensor *x = node->in[0], *w = node->in[1];
  ert_tensor *y = node->out[0];
  const int rank1d = ert_pi(node, P_RANK1D) != 0;
  const int rank = rank1d ? 3 : 4;
  if (x->ndim != rank || y->ndim != rank)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': rank changed", node->name);
  int64_t dims[4];
  dims[0] = x->shape[0];
  dims[1] = w->shape[0];
  if (!rank1d)
    dims[2] = ert_window_out(x->shape[2], ert_pi(node, P_KH), ert_pi(node, P_SH), ert_pi(node, P_DH),
                             ert_pi(node, P_PT), ert_pi(node, P_PB), 0);
  dims[rank - 1] = ert_window_out(x->shape[rank - 1], ert_pi(node, P_KW), ert_pi(node, P_SW),
                                  ert_pi(node, P_DW), ert_pi(node, P_PL), ert_pi(node, P_PR), 0);
  ert_tensor_set_shape(y, rank, dims);
  return EDGERT_OK;
}
