/* conv_transpose2d.c: transposed 2-D convolution (1-D as height 1), NCHW, float32, with
 * fused bias and activation. Parameters, meaning and scratch: edgert/converter/ops/conv_transpose2d.py.
 *
 * Y starts as the bias. Then per batch item, group and chunk of input rows, the GEMM
 * col[Mg*kH*kW, rows*W] = W_g^T X_g[:, rows] fills the column buffer (scratch) and
 * col2im adds each column entry into the output pixel it lands on. When the windows tile
 * the output (kernel == stride, no dilation or padding) every output pixel gets one
 * entry, and col2im writes it with the bias (no bias pass first). */
#include "exec.h"
#include "sgemm.h"
#include "window.h"

enum {
  P_GROUP, P_KH, P_KW, P_SH, P_SW, P_DH, P_DW, P_PT, P_PL, P_PB, P_PR, P_OPH, P_OPW, P_RANK1D,
  P_ACT, P_COUNT = P_ACT + 3
};
enum { COL_BUDGET = 65536 }; /* floats; edgert/converter/ops/conv_transpose2d.py COL_BUDGET */

typedef struct ct_geom {
  int32_t n, c, h, w, m, oh, ow;
  int32_t group, cg, mg;
  int32_t kh, kw, sh, sw, dh, dw, pt, pl;
  int32_t rows;          /* input rows per chunk */
  int tiled;             /* windows tile the output (kernel == stride, no dilation, pads) */
  ert_act_params act;
} ct_geom;

static inline size_t align64(size_t x) { return (x + 63u) & ~(size_t)63u; }

static int32_t chunk_rows(int64_t rows_k, int64_t h, int64_t w) {
  int64_t d = rows_k * w;
  if (d < 1) d = 1;
  int64_t r = COL_BUDGET / d;
  if (r > h) r = h;
  return r < 1 ? 1 : (int32_t)r;
}

static void read_geom(const ert_node *node, ct_geom *g) {
  ERT_WINDOW_READ(node, g, P_KH, ert_pi(node, P_RANK1D));
  g->n = node->in[0]->shape[0];
  g->c = node->in[0]->shape[1];
  g->m = node->out[0]->shape[1];
  g->group = ert_pi(node, P_GROUP);
  g->cg = g->c / g->group;
  g->mg = node->in[1]->shape[1];
  g->rows = chunk_rows((int64_t)g->mg * g->kh * g->kw, g->h, g->w);
  g->tiled = g->kh == g->sh && g->kw == g->sw && g->dh == 1 && g->dw == 1 && g->pt == 0 &&
             g->pl == 0 && g->oh == g->h * g->sh && g->ow == g->w * g->sw;
  g->act.kind = ert_pi(node, P_ACT);
  g->act.a = ert_pf(node, P_ACT + 1);
  g->act.b = ert_pf(node, P_ACT + 2);
}

edgert_status ert_conv_transpose2d_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 2, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  ert_act_params act;
  if ((st = ert_act_read(node, P_ACT, &act, err)) != EDGERT_OK) return st;
  const char *name = node->name;
  int32_t v[P_ACT];
  for (int i = 0; i < P_ACT; ++i) v[i] = ert_pi(node, (uint32_t)i);
  if (v[P_GROUP] < 1 || v[P_KH] < 1 || v[P_KW] < 1 || v[P_SH] < 1 || v[P_SW] < 1 || v[P_DH] < 1 ||
      v[P_DW] < 1 || v[P_PT] < 0 || v[P_PL] < 0 || v[P_PB] < 0 || v[P_PR] < 0 || v[P_OPH] < 0 ||
      v[P_OPW] < 0 || (v[P_RANK1D] != 0 && v[P_RANK1D] != 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "conv_transpose2d '%s': invalid parameters", name);
  const int rank1d = v[P_RANK1D];
  if (rank1d && (v[P_KH] != 1 || v[P_SH] != 1 || v[P_DH] != 1 || v[P_PT] != 0 || v[P_PB] != 0 ||
                 v[P_OPH] != 0))
    return ert_fail(err, EDGERT_ERR_PARAM,
                    "conv_transpose2d '%s': 1-D form needs a height-1 window", name);
  const int rank = rank1d ? 3 : 4;
  const ert_tensor *x = node->in[0], *w = node->in[1], *y = node->out[0];
  const ert_tensor *b = node->n_in > 2 ? node->in[2] : NULL;
  if (!ert_is_f32(x, rank) || !ert_is_f32(w, rank) || !ert_is_f32(y, rank))
    return ert_fail(err, EDGERT_ERR_DTYPE,
                    "conv_transpose2d '%s': X, W and Y must be float32 of rank %d", name, rank);
  if (b != NULL && !ert_is_f32(b, 1))
    return ert_fail(err, EDGERT_ERR_DTYPE, "conv_transpose2d '%s': B must be float32 of rank 1",
                    name);
  const int64_t c = x->shape[1], h = rank1d ? 1 : x->shape[2], wd = x->shape[rank - 1];
  const int64_t mg = w->shape[1], m = mg * v[P_GROUP];
  const int64_t wkh = rank1d ? 1 : w->shape[2], wkw = w->shape[rank - 1];
  if (w->shape[0] != c || c % v[P_GROUP] != 0 || wkh != v[P_KH] || wkw != v[P_KW])
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv_transpose2d '%s': W does not match X and group",
                    name);
  if (b != NULL && b->shape[0] != m)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv_transpose2d '%s': B must have %lld entries", name,
                    (long long)m);
  const int64_t oh = (int64_t)v[P_SH] * (h - 1) + v[P_OPH] + (int64_t)v[P_DH] * (v[P_KH] - 1) + 1 -
                     v[P_PT] - v[P_PB];
  const int64_t ow = (int64_t)v[P_SW] * (wd - 1) + v[P_OPW] + (int64_t)v[P_DW] * (v[P_KW] - 1) + 1 -
                     v[P_PL] - v[P_PR];
  if (y->shape[0] != x->shape[0] || y->shape[1] != m || (!rank1d && y->shape[2] != oh) ||
      y->shape[rank - 1] != ow || oh < 1 || ow < 1 || h < 1 || wd < 1)
    return ert_fail(err, EDGERT_ERR_SHAPE,
                    "conv_transpose2d '%s': Y shape does not match the transposed convolution",
                    name);
  const int64_t rows_k = mg * v[P_KH] * v[P_KW];
  const int32_t rows = chunk_rows(rows_k, h, wd);
  if (rows_k > INT32_MAX || (int64_t)rows * wd > INT32_MAX ||
      (int64_t)v[P_SH] * h + (int64_t)v[P_DH] * v[P_KH] > INT32_MAX / 2 ||
      (int64_t)v[P_SW] * wd + (int64_t)v[P_DW] * v[P_KW] > INT32_MAX / 2)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "conv_transpose2d '%s': tensor too large", name);
  const uint64_t col = ((uint64_t)rows_k * (uint64_t)rows * (uint64_t)wd * sizeof(float) + 63u) &
                      ~(uint64_t)63u;
  const uint64_t need =
      col + ert_sgemm_scratch_bytes(rows_k, (int64_t)rows * wd, c / v[P_GROUP], 0);
  if ((uint64_t)node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_PARAM,
                    "conv_transpose2d '%s': needs %llu scratch bytes, has %zu", name,
                    (unsigned long long)need, node->scratch_bytes);
  return EDGERT_OK;
}

typedef struct ct_job {
  const ct_geom *g;
  const float *x, *w, *bias;
  float *y;
  float *col;        /* [Mg*kh*kw][ncols] */
  int32_t n, grp;    /* current batch item and group */
  int32_t r0, nrows; /* current input rows */
} ct_job;

static void locate(const void *ctx, size_t p, const float **a, const float **b, float **c,
                   const float **bias) {
  const ct_job *j = ctx;
  const ct_geom *g = j->g;
  (void)p;
  *a = j->w + (size_t)j->grp * (size_t)g->cg * (size_t)g->mg * (size_t)g->kh * (size_t)g->kw;
  *b = j->x + ((size_t)j->n * g->c + (size_t)j->grp * g->cg) * (size_t)g->h * g->w +
       (size_t)j->r0 * g->w;
  *c = j->col;
  *bias = NULL;
}

/* Smallest i >= 0 with i*s + off >= 0 and the end of the i range with i*s + off < size,
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

/* col2im for items [begin, end): output channels of the current group, or, when the
 * windows tile the output, (output channel, input row) pairs, each of which writes its
 * own output rows (so a chunk of few channels still splits) and, on x86-64, applies the
 * activation to them (the boards' library keeps a separate pass, within its size budget). */
static void col2im_worker(void *arg, size_t begin, size_t end) {
  const ct_job *j = arg;
  const ct_geom *g = j->g;
  const size_t ncols = (size_t)j->nrows * g->w, per = g->tiled ? (size_t)j->nrows : 1;
  for (size_t t = begin; t < end; ++t) {
    const size_t mm = t / per;
    const int32_t r0 = g->tiled ? (int32_t)(t % per) : 0, r1 = g->tiled ? r0 + 1 : j->nrows;
    float *yp = j->y + ((size_t)j->n * g->m + (size_t)j->grp * g->mg + mm) * (size_t)g->oh * g->ow;
    /* windows tiling the output: every output once, written with the bias */
    const float bv = g->tiled && j->bias ? j->bias[(size_t)j->grp * g->mg + mm] : 0.0f;
    for (int32_t ky = 0; ky < g->kh; ++ky) {
      const float *c0 = j->col + (mm * g->kh + (size_t)ky) * g->kw * ncols;
#if defined(ERT_X86_KERNELS) /* (the boards' library keeps to its size budget) */
      if (g->tiled && g->kw == 2) { /* the two taps of a row interleaved: one output row */
        float *restrict yr = yp + (size_t)((j->r0 + r0) * g->sh + ky) * g->ow;
        const float *restrict a = c0 + (size_t)r0 * g->w, *restrict b = a + ncols;
        for (int32_t ix = 0; ix < g->w; ++ix) {
          yr[2 * ix] = a[ix] + bv;
          yr[2 * ix + 1] = b[ix] + bv;
        }
        ert_act_apply(&g->act, yr, (size_t)g->ow);
        continue;
      }
#endif
      for (int32_t kx = 0; kx < g->kw; ++kx) {
        const float *cr = c0 + (size_t)kx * ncols;
        const int32_t xoff = kx * g->dw - g->pl;
        int32_t ix_lo, ix_hi;
        valid_range(xoff, g->sw, g->ow, g->w, &ix_lo, &ix_hi);
        for (int32_t r = r0; r < r1; ++r) {
          const int32_t oy = (j->r0 + r) * g->sh - g->pt + ky * g->dh;
          if (oy < 0 || oy >= g->oh) continue;
          float *yr = yp + (size_t)oy * g->ow;
          const float *cc = cr + (size_t)r * g->w;
          if (g->tiled) {
            for (int32_t ix = ix_lo; ix < ix_hi; ++ix) yr[ix * g->sw + xoff] = cc[ix] + bv;
#if defined(ERT_X86_KERNELS)
            if (kx == g->kw - 1) ert_act_apply(&g->act, yr, (size_t)g->ow); /* the row is whole */
#endif
          } else if (g->sw == 1) {
            for (int32_t ix = ix_lo; ix < ix_hi; ++ix) yr[ix + xoff] += cc[ix];
          } else {
            for (int32_t ix = ix_lo; ix < ix_hi; ++ix) yr[ix * g->sw + xoff] += cc[ix];
          }
        }
      }
    }
  }
}

#if defined(ERT_X86_KERNELS) /* (the boards' library keeps to its size budget) */
/* A chunk's GEMM and col2im as one job: piece k of `pieces` (at most ERT_SGEMM_SLOTS)
 * computes the column rows of output channels [k mg / pieces, (k + 1) mg / pieces) on
 * one thread, in scratch slot k, then col2im adds them into the output; a channel's
 * column rows are written and read by one core, and a chunk is one job instead of two. */
typedef struct ct_fused {
  const ct_job *j;
  const ert_sgemm *s; /* the chunk's GEMM (all rows) */
  char *scratch;      /* the GEMM's slots */
  size_t slot, pieces;
  int32_t i0; /* a piece's first row (locate_rows) */
} ct_fused;

static void locate_rows(const void *ctx, size_t p, const float **a, const float **b, float **c,
                        const float **bias) {
  const ct_fused *f = ctx;
  locate(f->j, p, a, b, c, bias);
  *a += f->i0; /* A(i, c) = W[c][i] */
  *c += (size_t)f->i0 * (size_t)f->s->ldc;
}

static void fused_worker(void *arg, size_t begin, size_t end) {
  const ct_fused *f = arg;
  const ct_geom *g = f->j->g;
  const size_t per = g->tiled ? (size_t)f->j->nrows : 1, khw = (size_t)g->kh * (size_t)g->kw;
  for (size_t k = begin; k < end; ++k) {
    const size_t mm0 = k * (size_t)g->mg / f->pieces, mm1 = (k + 1) * (size_t)g->mg / f->pieces;
    ct_fused sub = *f;
    sub.i0 = (int32_t)(mm0 * khw);
    ert_sgemm s = *f->s;
    s.m = (int32_t)((mm1 - mm0) * khw);
    s.locate = locate_rows;
    s.ctx = &sub;
    ert_sgemm_run(&s, f->scratch + k * f->slot, NULL);
    col2im_worker((void *)f->j, mm0 * per, mm1 * per);
  }
}
#endif

typedef struct init_job {
  const ct_geom *g;
  const float *bias;
  float *y;
  int final;
} init_job;

/* Bias (first pass) or activation (final pass) over output planes [begin, end). */
static void plane_worker(void *arg, size_t begin, size_t end) {
  const init_job *j = arg;
  const ct_geom *g = j->g;
  const size_t plane = (size_t)g->oh * g->ow;
  for (size_t p = begin; p < end; ++p) {
    float *y = j->y + p * plane;
    if (j->final) {
      ert_act_apply(&g->act, y, plane);
    } else {
      const float v = j->bias ? j->bias[p % (size_t)g->m] : 0.0f;
      for (size_t i = 0; i < plane; ++i) y[i] = v;
    }
  }
}

void ert_conv_transpose2d_eval(const ert_node *node, ert_exec *ex) {
  ct_geom g;
  read_geom(node, &g);
  const float *bias = node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL;
  float *y = node->out[0]->data;
  const size_t planes = (size_t)g.n * g.m;
  init_job ij = {&g, bias, y, 0};
  if (!g.tiled) ert_parallel_for(ex, planes, plane_worker, &ij);

  const int32_t rows_k = g.mg * g.kh * g.kw;
  const size_t col_bytes = align64((size_t)rows_k * (size_t)g.rows * g.w * sizeof(float));
  ct_job j = {&g, node->in[0]->data, node->in[1]->data, bias, y, node->scratch, 0, 0, 0, 0};
  void *gemm_scratch = (char *)node->scratch + col_bytes;
  for (j.n = 0; j.n < g.n; ++j.n) {
    for (j.grp = 0; j.grp < g.group; ++j.grp) {
      for (j.r0 = 0; j.r0 < g.h; j.r0 += g.rows) {
        j.nrows = g.h - j.r0 < g.rows ? g.h - j.r0 : g.rows;
        ert_sgemm s;
        s.bpanels = 0;
#if defined(ERT_X86_KERNELS)
        s.bias_cols = s.rows_first = s.by_rows = 0;
        s.res = NULL;
#endif
        s.m = rows_k;
        s.n = j.nrows * g.w;
        s.k = g.cg;
        s.rsa = 1;        /* A(i, c) = W[c][i]: W_g is [Cg][Mg*kh*kw] */
        s.csa = rows_k;
        s.rsb = (ptrdiff_t)g.h * g.w;
        s.csb = 1;
        s.im2col = NULL;
        s.ldc = s.n;
        s.alpha = 1.0f;
        s.accumulate = 0;
        s.act = NULL;
        s.batch = 1;
        s.locate = locate;
        s.ctx = &j;
#if defined(ERT_X86_KERNELS)
        const int32_t threads = ert_exec_threads(ex); /* two threads or more, two channels each */
        if (threads > 1 && g.mg >= 2 * threads && s.n > 4) {
          ct_fused f = {&j, &s, gemm_scratch,
                        ert_sgemm_scratch_bytes(s.m, s.n, s.k, 0) / ERT_SGEMM_SLOTS,
                        (size_t)(g.mg < ERT_SGEMM_SLOTS ? g.mg : ERT_SGEMM_SLOTS), 0};
          ert_parallel_for(ex, f.pieces, fused_worker, &f);
          continue;
        }
#endif
        ert_sgemm_run(&s, gemm_scratch, ex);
        ert_parallel_for(ex, (size_t)g.mg * (g.tiled ? (size_t)j.nrows : 1), col2im_worker, &j);
      }
    }
  }
#if defined(ERT_X86_KERNELS)
  if (g.act.kind != ERT_ACT_NONE && !g.tiled) { /* tiling windows: applied in col2im */
#else
  if (g.act.kind != ERT_ACT_NONE) {
#endif
    ij.final = 1;
    ert_parallel_for(ex, planes, plane_worker, &ij);
  }
}

edgert_status ert_conv_transpose2d_shape(ert_node *node, ert_err *err) {
  (void)err;
  const ert_tensor *x = node->in[0], *w = node->in[1];
  ert_tensor *y = node->out[0];
  const int rank1d = ert_pi(node, P_RANK1D) != 0, rank = rank1d ? 3 : 4;
  int64_t dims[4];
  dims[0] = x->shape[0];
  dims[1] = (int64_t)w->shape[1] * ert_pi(node, P_GROUP);
  if (!rank1d)
    dims[2] = (int64_t)ert_pi(node, P_SH) * (x->shape[2] - 1) + ert_pi(node, P_OPH) +
              (int64_t)ert_pi(node, P_DH) * (ert_pi(node, P_KH) - 1) + 1 - ert_pi(node, P_PT) - ert_pi(node, P_PB);
  dims[rank - 1] = (int64_t)ert_pi(node, P_SW) * (x->shape[rank - 1] - 1) + ert_pi(node, P_OPW) +
                   (int64_t)ert_pi(node, P_DW) * (ert_pi(node, P_KW) - 1) + 1 - ert_pi(node, P_PL) -
                   ert_pi(node, P_PR);
  ert_tensor_set_shape(y, rank, dims);
  return EDGERT_OK;
}
