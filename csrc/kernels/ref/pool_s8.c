/* pool_s8.c: max / average pooling and global average / max pooling on int8 tensors.
 * Parameters and meaning: edgert/converter/ops/pool_s8.py; the window geometry is the float
 * op's (edgert/converter/ops/pool.py). */
#include "cpu.h"
#include "exec.h"
#include "quant_s8.h"
#include "window.h"

enum {
  P_KH, P_KW, P_SH, P_SW, P_DH, P_DW, P_PT, P_PL, P_PB, P_PR, P_CEIL, P_RANK1D, P_EXTRA,
  P_ZP, P_COUNT_AVG
};
enum { KIND_MAX = 0, KIND_AVG = 1 };

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

typedef struct geom {
  int32_t h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad, zp;
  size_t planes;
} geom;

static void read_geom(const ert_node *node, geom *g, int kind) {
  ERT_WINDOW_READ(node, g, P_KH, ert_pi(node, P_RANK1D));
  g->pb = ert_pi(node, P_PB);
  g->pr = ert_pi(node, P_PR);
  g->include_pad = kind == KIND_AVG ? ert_pi(node, P_EXTRA) : 0;
  g->zp = kind == KIND_AVG ? ert_pi(node, P_ZP) : 0;
  g->planes = (size_t)node->in[0]->shape[0] * (size_t)node->in[0]->shape[1];
}

edgert_status ert_pool2d_s8_prepare(ert_node *node, ert_err *err, int kind) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, kind == KIND_AVG ? P_COUNT_AVG : P_ZP)) != EDGERT_OK)
    return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_s8(node, err, x, "X")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, y, "Y")) != EDGERT_OK)
    return st;
  const int32_t rank1d = ert_pi(node, P_RANK1D), ceil_mode = ert_pi(node, P_CEIL);
  const int32_t kh = ert_pi(node, P_KH), kw = ert_pi(node, P_KW);
  const int32_t sh = ert_pi(node, P_SH), sw = ert_pi(node, P_SW);
  const int32_t dh = ert_pi(node, P_DH), dw = ert_pi(node, P_DW);
  const int32_t pt = ert_pi(node, P_PT), pl = ert_pi(node, P_PL);
  const int32_t pb = ert_pi(node, P_PB), pr = ert_pi(node, P_PR);
  const int32_t extra = ert_pi(node, P_EXTRA);
  if ((rank1d != 0 && rank1d != 1) || (ceil_mode != 0 && ceil_mode != 1) || kh < 1 || kw < 1 ||
      sh < 1 || sw < 1 || dh < 1 || dw < 1 || pt < 0 || pl < 0 || pb < 0 || pr < 0 ||
      (rank1d && (kh != 1 || sh != 1 || dh != 1 || pt != 0 || pb != 0)) ||
      (kind == KIND_AVG && extra != 0 && extra != 1) ||
      (int64_t)kh * dh > INT32_MAX / 4 || (int64_t)kw * dw > INT32_MAX / 4 ||
      (int64_t)kh * kw * 255 >= INT32_MAX)
    return ert_fail(err, EDGERT_ERR_PARAM, "pool '%s': bad parameters", nm(node));
  if (kind == KIND_AVG && (ert_pi(node, P_ZP) < -128 || ert_pi(node, P_ZP) > 127))
    return ert_fail(err, EDGERT_ERR_PARAM, "avg_pool2d '%s': zero point outside int8", nm(node));
  const int rank = rank1d ? 3 : 4;
  if (x->ndim != rank || y->ndim != rank || x->shape[0] != y->shape[0] ||
      x->shape[1] != y->shape[1])
    return ert_fail(err, EDGERT_ERR_SHAPE, "pool '%s': X and Y must be [N, C, ...] of rank %d",
                    nm(node), rank);
  const int64_t h = rank1d ? 1 : x->shape[2], w = x->shape[rank - 1];
  if (h + pt + pb > INT32_MAX / 4 || w + pl + pr > INT32_MAX / 4)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "pool '%s': input too large", nm(node));
  const int64_t oh = ert_window_out(h, kh, sh, dh, pt, pb, ceil_mode);
  const int64_t ow = ert_window_out(w, kw, sw, dw, pl, pr, ceil_mode);
  if (oh < 0 || ow < 0 || (!rank1d && y->shape[2] != oh) || y->shape[rank - 1] != ow)
    return ert_fail(err, EDGERT_ERR_SHAPE, "pool '%s': Y shape does not match the window",
                    nm(node));
  return EDGERT_OK;
}

typedef struct pool_job {
  geom g;
  int kind;
  const int8_t *x;
  int8_t *y;
} pool_job;

static int32_t round_div(int32_t num, int32_t den) {
  const int32_t q = ((num < 0 ? -num : num) + den / 2) / den;
  return num < 0 ? -q : q;
}

/* Output columns [*lo, *hi) whose every tap is inside the row (none when dw != 1: the
 * optimized rows take contiguous windows only). */
static void interior(const geom *g, int32_t *lo, int32_t *hi) {
  int64_t a = ((int64_t)g->pl + g->sw - 1) / g->sw;
  int64_t b = g->w - (int64_t)(g->kw - 1) * g->dw + g->pl; /* ox * sw < b */
  b = b > 0 ? (b - 1) / g->sw + 1 : 0;
  if (b > g->ow) b = g->ow;
  if (g->dw != 1 || b < a) a = b = 0;
  *lo = (int32_t)a;
  *hi = (int32_t)b;
}

static void plane(const geom *g, int kind, const int8_t *x, int8_t *y) {
  int32_t in_lo = 0, in_hi = 0;
  if (ert_cpu.pool_s8_row != NULL) interior(g, &in_lo, &in_hi);
  for (int32_t oy = 0; oy < g->oh; oy++) {
    int32_t skip_lo = 0, skip_hi = 0; /* columns done by the optimized row */
    if (in_hi > in_lo) {
      int32_t ky_lo = -1, rows = 0, pad_rows = 0;
      for (int32_t ky = 0; ky < g->kh; ky++) {
        const int64_t iy = (int64_t)oy * g->sh - g->pt + (int64_t)ky * g->dh;
        if (iy >= 0 && iy < g->h) {
          if (ky_lo < 0) ky_lo = ky;
          rows++;
        }
        if (iy < g->h + g->pb) pad_rows++;
      }
      if (rows > 0) {
        const int64_t iy0 = (int64_t)oy * g->sh - g->pt + (int64_t)ky_lo * g->dh;
        const int32_t count = (g->include_pad ? pad_rows : rows) * g->kw;
        if (ert_cpu.pool_s8_row(y + (size_t)oy * (size_t)g->ow + in_lo,
                                x + iy0 * g->w + ((int64_t)in_lo * g->sw - g->pl),
                                (ptrdiff_t)g->dh * g->w, rows, in_hi - in_lo, g->kw, g->sw, g->zp,
                                count, kind == KIND_AVG)) {
          skip_lo = in_lo;
          skip_hi = in_hi;
        }
      }
    }
    for (int32_t ox = 0; ox < g->ow; ox++) {
      if (ox == skip_lo && skip_hi > skip_lo) ox = skip_hi;
      if (ox >= g->ow) break;
      int32_t best = -128, sum = 0, count = 0;
      for (int32_t ky = 0; ky < g->kh; ky++) {
        const int64_t iy = (int64_t)oy * g->sh - g->pt + (int64_t)ky * g->dh;
        for (int32_t kx = 0; kx < g->kw; kx++) {
          const int64_t ix = (int64_t)ox * g->sw - g->pl + (int64_t)kx * g->dw;
          const int inside = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;
          if (inside) {
            const int32_t v = x[iy * g->w + ix];
            best = v > best ? v : best;
            sum += v - g->zp;
          }
          if (g->include_pad ? (iy < g->h + g->pb && ix < g->w + g->pr) : inside) count++;
        }
      }
      int32_t out = best;
      if (kind == KIND_AVG) {
        out = count > 0 ? g->zp + round_div(sum, count) : g->zp;
        out = out < -128 ? -128 : (out > 127 ? 127 : out);
      }
      y[(size_t)oy * (size_t)g->ow + (size_t)ox] = (int8_t)out;
    }
  }
}

static void pool_task(void *arg, size_t begin, size_t end) {
  const pool_job *j = (const pool_job *)arg;
  const size_t in = (size_t)j->g.h * (size_t)j->g.w, out = (size_t)j->g.oh * (size_t)j->g.ow;
  for (size_t p = begin; p < end; p++) plane(&j->g, j->kind, j->x + p * in, j->y + p * out);
}

void ert_pool2d_s8__ref(const ert_node *node, ert_exec *ex, int kind) {
  pool_job j;
  read_geom(node, &j.g, kind);
  j.kind = kind;
  j.x = (const int8_t *)node->in[0]->data;
  j.y = (int8_t *)node->out[0]->data;
  ert_parallel_for(ex, j.g.planes, pool_task, &j);
}

/* ---- global pooling (kind 0 avg, 1 max) ---------------------------------------------- */

enum { G_XZP, G_YZP, G_MULT, G_SHIFT, G_COUNT };

edgert_status ert_global_pool_s8_prepare(ert_node *node, ert_err *err, int kind) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, kind == 0 ? G_COUNT : 0)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_s8(node, err, x, "X")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, y, "Y")) != EDGERT_OK)
    return st;
  if (x->ndim < 3 || y->ndim != x->ndim || y->shape[0] != x->shape[0] ||
      y->shape[1] != x->shape[1])
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), ": X must have rank >= 3, Y [N, C, 1, ...]");
  int64_t size = 1;
  for (int32_t d = 2; d < x->ndim; d++) {
    if (y->shape[d] != 1 || x->shape[d] == 0)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), ": Y must be [N, C, 1, ...], X non-empty");
    size *= x->shape[d];
  }
  if (kind == 0) {
    if (size * 255 >= INT32_MAX)
      return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nm(node), ": spatial size too large");
    const int32_t xzp = ert_pi(node, G_XZP), yzp = ert_pi(node, G_YZP);
    if (xzp < -128 || xzp > 127 || yzp < -128 || yzp > 127 ||
        !ert_q_valid(ert_pi(node, G_MULT), ert_pi(node, G_SHIFT)))
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": bad zero points or multiplier");
  }
  return EDGERT_OK;
}

typedef struct global_job {
  const ert_node *node;
  size_t size;
  int kind;
} global_job;

static void global_task(void *arg, size_t begin, size_t end) {
  const global_job *j = (const global_job *)arg;
  const ert_node *node = j->node;
  const int8_t *x = (const int8_t *)node->in[0]->data;
  int8_t *y = (int8_t *)node->out[0]->data;
  for (size_t p = begin; p < end; p++) {
    const int8_t *xp = x + p * j->size;
    if (ert_cpu.gpool_s8 != NULL && j->kind == 1) {
      y[p] = (int8_t)ert_cpu.gpool_s8(xp, j->size, 1);
    } else if (j->kind == 1) {
      int32_t m = -128;
      for (size_t i = 0; i < j->size; i++) m = xp[i] > m ? xp[i] : m;
      y[p] = (int8_t)m;
    } else {
      int32_t s = 0;
      if (ert_cpu.gpool_s8 != NULL)
        s = ert_cpu.gpool_s8(xp, j->size, 0);
      else
        for (size_t i = 0; i < j->size; i++) s += xp[i];
      s -= (int32_t)j->size * ert_pi(node, G_XZP);
      y[p] = ert_clamp_s8(ert_pi(node, G_YZP) + ert_requant(s, ert_pi(node, G_MULT),
                                                           ert_pi(node, G_SHIFT)),
                          -128, 127);
    }
  }
}

void ert_global_pool_s8__ref(const ert_node *node, ert_exec *ex, int kind) {
  const ert_tensor *x = node->in[0];
  global_job j = {node, 1, kind};
  for (int32_t d = 2; d < x->ndim; d++) j.size *= (size_t)x->shape[d];
  ert_parallel_for(ex, (size_t)x->shape[0] * (size_t)x->shape[1], global_task, &j);
}
