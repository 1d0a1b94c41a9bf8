/* conv2d.c: 2-D convolution (and 1-D as height 1), NCHW, float32, with fused bias and
 * activation. Parameters and shapes: edgert/ops/conv2d.py.
 *
 * Three paths, chosen in prepare:
 *   depthwise  C/group == 1: direct loops per output plane (bound-check-free interior
 *              for 3x3 and 5x5 with stride 1 or 2);
 *   pointwise  1x1, stride 1, no padding: per group, Y[Mg, HW] = W[Mg, Cg] X[Cg, HW];
 *   im2col     everything else: per group, W[Mg, Cg*kh*kw] times the im2col matrix of
 *              X, packed block by block inside the GEMM (never materialized).
 */
#include "sgemm.h"

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
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int rank1d = ert_pi(node, P_RANK1D) != 0;
  g->n = x->shape[0];
  g->c = x->shape[1];
  g->h = rank1d ? 1 : x->shape[2];
  g->w = x->shape[rank1d ? 2 : 3];
  g->m = y->shape[1];
  g->oh = rank1d ? 1 : y->shape[2];
  g->ow = y->shape[rank1d ? 2 : 3];
  g->group = ert_pi(node, P_GROUP);
  g->cg = g->c / g->group;
  g->mg = g->m / g->group;
  g->kh = ert_pi(node, P_KH);
  g->kw = ert_pi(node, P_KW);
  g->sh = ert_pi(node, P_SH);
  g->sw = ert_pi(node, P_SW);
  g->dh = ert_pi(node, P_DH);
  g->dw = ert_pi(node, P_DW);
  g->pt = ert_pi(node, P_PT);
  g->pl = ert_pi(node, P_PL);
  g->act.kind = ert_pi(node, P_ACT);
  g->act.a = ert_pf(node, P_ACT + 1);
  g->act.b = ert_pf(node, P_ACT + 2);
}

/* Output size of one spatial dimension, or -1 when the window does not fit. */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  const int64_t span = d * (k - 1) + 1;
  const int64_t padded = in + p0 + p1;
  if (padded < span) return -1;
  return (padded - span) / s + 1;
}

static int path_of(const conv_geom *g) {
  if (g->cg == 1) return PATH_DEPTHWISE;
  if (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
      g->oh == g->h && g->ow == g->w)
    return PATH_POINTWISE;
  return PATH_IM2COL;
}

edgert_status ert_conv2d_prepare(ert_node *node, ert_err *err) {
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
  const int64_t oh = out_size(h, kh, sh, dh, pt, pb);
  const int64_t ow = out_size(wd, kw, sw, dw, pl, pr);
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

  conv_geom g;
  read_geom(node, &g);
  const int path = path_of(&g);
  size_t need = 0;
  if (path == PATH_POINTWISE)
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
  ert_im2col ic = {g->cg, g->h, g->w, g->kh, g->kw, g->sh, g->sw, g->dh, g->dw, g->pt, g->pl, g->ow};
  ert_sgemm s;
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

/* y[i] = bias + sum over the K x K taps of w * r_ky[i*S + kx*d], i < n: the interior of
 * one output row, where every tap is inside the image. */
#define DW_INTERIOR(NAME, K, S)                                                              \
  ERT_SIMD_CLONES                                                                            \
  static void NAME(float *restrict y, const float *const *rows, const float *restrict w,   \
                   int32_t n, int32_t d, float bias) {                                       \
    float wk[(K) * (K)];                                                                     \
    for (int t = 0; t < (K) * (K); ++t) wk[t] = w[t];                                        \
    const float *r[K];                                                                       \
    for (int t = 0; t < (K); ++t) r[t] = rows[t];                                            \
    for (int32_t i = 0; i < n; ++i) {                                                        \
      float acc = bias;                                                                      \
      for (int ky = 0; ky < (K); ++ky)                                                       \
        for (int kx = 0; kx < (K); ++kx) acc += wk[ky * (K) + kx] * r[ky][i * (S) + kx * d]; \
      y[i] = acc;                                                                            \
    }                                                                                        \
  }

DW_INTERIOR(dw_k3_s1, 3, 1)
DW_INTERIOR(dw_k3_s2, 3, 2)
DW_INTERIOR(dw_k5_s1, 5, 1)
DW_INTERIOR(dw_k5_s2, 5, 2)

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

typedef struct dw_job {
  const conv_geom *g;
  const float *x, *w, *bias;
  float *y;
} dw_job;

static void dw_plane(const conv_geom *g, const float *x, const float *w, float bias, float *y) {
  const int32_t k = g->kh == g->kw ? g->kh : 0;
  const int fast = (k == 3 || k == 5) && (g->sw == 1 || g->sw == 2);
  /* output columns whose every kx tap is inside the row */
  int32_t in_lo = 0, in_hi = 0;
  {
    int32_t a0, b0, a1, b1;
    valid_range(-g->pl, g->sw, g->w, g->ow, &a0, &b0);
    valid_range((g->kw - 1) * g->dw - g->pl, g->sw, g->w, g->ow, &a1, &b1);
    in_lo = a0 > a1 ? a0 : a1;
    in_hi = b0 < b1 ? b0 : b1;
    if (in_hi < in_lo) in_hi = in_lo;
  }
  for (int32_t oy = 0; oy < g->oh; ++oy) {
    float *yr = y + (size_t)oy * g->ow;
    const int32_t iy0 = oy * g->sh - g->pt;
    int32_t ky_lo, ky_hi;
    valid_range(iy0, g->dh, g->h, g->kh, &ky_lo, &ky_hi);
    if (fast && ky_lo == 0 && ky_hi == g->kh && in_hi > in_lo) {
      const float *rows[5];
      for (int32_t ky = 0; ky < k; ++ky)
        rows[ky] = x + (size_t)(iy0 + ky * g->dh) * g->w + ((ptrdiff_t)in_lo * g->sw - g->pl);
      const int32_t n = in_hi - in_lo;
      if (k == 3)
        (g->sw == 1 ? dw_k3_s1 : dw_k3_s2)(yr + in_lo, rows, w, n, g->dw, bias);
      else
        (g->sw == 1 ? dw_k5_s1 : dw_k5_s2)(yr + in_lo, rows, w, n, g->dw, bias);
      /* border columns, with checks */
      for (int32_t ox = 0; ox < g->ow; ++ox) {
        if (ox == in_lo) ox = in_hi;
        if (ox >= g->ow) break;
        float acc = bias;
        for (int32_t ky = 0; ky < k; ++ky) {
          const float *row = x + (size_t)(iy0 + ky * g->dh) * g->w;
          for (int32_t kx = 0; kx < k; ++kx) {
            const int32_t ix = ox * g->sw - g->pl + kx * g->dw;
            if (ix >= 0 && ix < g->w) acc += w[ky * k + kx] * row[ix];
          }
        }
        yr[ox] = acc;
      }
      continue;
    }
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

static void finish(const ert_act_params *act, float *y, size_t count) {
  if (act->kind == ERT_ACT_NONE) return;
  if (act->kind == ERT_ACT_RELU) {
    for (size_t i = 0; i < count; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
  } else {
    ert_act_apply(act, y, count);
  }
}

static void dw_worker(void *arg, size_t begin, size_t end) {
  const dw_job *j = arg;
  const conv_geom *g = j->g;
  const size_t plane_in = (size_t)g->h * g->w, plane_out = (size_t)g->oh * g->ow;
  const size_t khw = (size_t)g->kh * g->kw;
  for (size_t p = begin; p < end; ++p) {
    const size_t n = p / (size_t)g->m, oc = p % (size_t)g->m;
    const size_t ic = oc / (size_t)g->mg; /* one input channel per group */
    float *y = j->y + p * plane_out;
    dw_plane(g, j->x + (n * (size_t)g->c + ic) * plane_in, j->w + oc * khw,
             j->bias ? j->bias[oc] : 0.0f, y);
    finish(&g->act, y, plane_out);
  }
}

void ert_conv2d_eval(const ert_node *node, ert_exec *ex) {
  conv_geom g;
  read_geom(node, &g);
  const int path = (int)node->opdata[OD_PATH];
  if (path != PATH_DEPTHWISE) {
    run_gemm(node, &g, path, ex);
    return;
  }
  dw_job j = {&g, node->in[0]->data, node->in[1]->data,
              node->n_in > 2 && node->in[2] ? node->in[2]->data : NULL, node->out[0]->data};
  ert_parallel_for(ex, (size_t)g.n * (size_t)g.m, dw_worker, &j);
}
