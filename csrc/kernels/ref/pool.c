/* pool.c: max / average / Lp pooling over NCHW float32 (1-D as height 1), and global
 * average / max pooling over every spatial dimension. Parameters and exact semantics:
 * edgert/converter/ops/pool.py. */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "exec.h"
#include "quant_s8.h"
#include "sgemm.h" /* ERT_SIMD_CLONES */
#include "window.h"

enum {
  P_KH, P_KW, P_SH, P_SW, P_DH, P_DW, P_PT, P_PL, P_PB, P_PR, P_CEIL, P_RANK1D, P_EXTRA,
  P_COUNT
};
enum { KIND_MAX, KIND_AVG, KIND_LP };

typedef struct pool_geom {
  int32_t h, w, oh, ow;
  int32_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int32_t extra;
  size_t planes;
} pool_geom;

static void read_geom(const ert_node *node, pool_geom *g) {
  ERT_WINDOW_READ(node, g, P_KH, ert_pi(node, P_RANK1D));
  g->pb = ert_pi(node, P_PB);
  g->pr = ert_pi(node, P_PR);
  g->extra = ert_pi(node, P_EXTRA);
  g->planes = (size_t)node->in[0]->shape[0] * (size_t)node->in[0]->shape[1];
}

static edgert_status pool_prepare(ert_node *node, ert_err *err, int kind) {
  edgert_status st;
  const char *op = kind == KIND_MAX ? "max_pool2d" : kind == KIND_AVG ? "avg_pool2d" : "lp_pool2d";
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  const int32_t kh = ert_pi(node, P_KH), kw = ert_pi(node, P_KW);
  const int32_t sh = ert_pi(node, P_SH), sw = ert_pi(node, P_SW);
  const int32_t dh = ert_pi(node, P_DH), dw = ert_pi(node, P_DW);
  const int32_t pt = ert_pi(node, P_PT), pl = ert_pi(node, P_PL);
  const int32_t pb = ert_pi(node, P_PB), pr = ert_pi(node, P_PR);
  const int32_t ceil_mode = ert_pi(node, P_CEIL), rank1d = ert_pi(node, P_RANK1D);
  const int32_t extra = ert_pi(node, P_EXTRA);
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || pt < 0 || pl < 0 || pb < 0 ||
      pr < 0 || (ceil_mode != 0 && ceil_mode != 1) || (rank1d != 0 && rank1d != 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "%s '%s': invalid window parameters", op, node->name);
  if (rank1d && (kh != 1 || sh != 1 || dh != 1 || pt != 0 || pb != 0))
    return ert_fail(err, EDGERT_ERR_PARAM, "%s '%s': 1-D form needs a height-1 window", op,
                    node->name);
  if ((kind == KIND_AVG && extra != 0 && extra != 1) || (kind == KIND_LP && extra < 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "%s '%s': invalid count_include_pad or p", op,
                    node->name);
  const int rank = rank1d ? 3 : 4;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (!ert_is_f32(x, rank) || !ert_is_f32(y, rank))
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s '%s': X and Y must be float32 of rank %d", op,
                    node->name, rank);
  const int64_t h = rank1d ? 1 : x->shape[2], w = x->shape[rank - 1];
  const int64_t oh = ert_window_out(h, kh, sh, dh, pt, pb, ceil_mode);
  const int64_t ow = ert_window_out(w, kw, sw, dw, pl, pr, ceil_mode);
  if (oh < 0 || ow < 0) /* 0 windows is an empty Y, as the ONNX formula gives */
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s '%s': window larger than the padded input", op,
                    node->name);
  if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1] || (!rank1d && y->shape[2] != oh) ||
      y->shape[rank - 1] != ow)
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s '%s': Y shape does not match the pooling", op,
                    node->name);
  /* ert_window_out keeps every window start inside [-pad, in + pad_end); int32 offsets below
   * stay in range because shapes are int32 and windows span at most in + pads. */
  if ((int64_t)(oh - 1) * sh + (int64_t)dh * (kh - 1) > INT32_MAX / 2 ||
      (int64_t)(ow - 1) * sw + (int64_t)dw * (kw - 1) > INT32_MAX / 2)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "%s '%s': window too large", op, node->name);
  return EDGERT_OK;
}

/* Range [lo, hi) of k in [0, kcount) with 0 <= i0 + k*d < size. */
static void tap_range(int32_t i0, int32_t d, int32_t size, int32_t kcount, int32_t *lo,
                      int32_t *hi) {
  int64_t a, b;
  if (d == 1) { /* the common case, without the divisions */
    a = i0 >= 0 ? 0 : -(int64_t)i0;
    b = (int64_t)size - i0;
  } else {
    a = i0 >= 0 ? 0 : (-(int64_t)i0 + d - 1) / d;
    b = i0 <= size - 1 ? ((int64_t)size - 1 - i0) / d + 1 : 0;
  }
  if (a > kcount) a = kcount;
  if (b > kcount) b = kcount;
  if (b < a) b = a;
  *lo = (int32_t)a;
  *hi = (int32_t)b;
}

/* One window tap over output columns [lo, hi) of a row: y[ox] op= f(row[ox*sw + off]). */
static inline void tap_max(float *restrict y, const float *restrict row, int32_t lo, int32_t hi,
                           int32_t sw,
                    int32_t off) {
  if (sw == 1) {
    for (int32_t ox = lo; ox < hi; ++ox) {
      const float v = row[ox + off];
      y[ox] = v > y[ox] ? v : y[ox];
    }
  } else if (sw == 2) {
    for (int32_t ox = lo; ox < hi; ++ox) {
      const float v = row[2 * (ptrdiff_t)ox + off];
      y[ox] = v > y[ox] ? v : y[ox];
    }
  } else {
    for (int32_t ox = lo; ox < hi; ++ox) {
      const float v = row[(ptrdiff_t)ox * sw + off];
      y[ox] = v > y[ox] ? v : y[ox];
    }
  }
}

static inline void tap_sum(float *restrict y, const float *restrict row, int32_t lo, int32_t hi,
                           int32_t sw,
                    int32_t off, int32_t p) {
  if (p == 0) {
    for (int32_t ox = lo; ox < hi; ++ox) y[ox] += row[(ptrdiff_t)ox * sw + off];
  } else if (p == 1) {
    for (int32_t ox = lo; ox < hi; ++ox) y[ox] += fabsf(row[(ptrdiff_t)ox * sw + off]);
  } else if (p == 2) {
    for (int32_t ox = lo; ox < hi; ++ox) {
      const float v = row[(ptrdiff_t)ox * sw + off];
      y[ox] += v * v;
    }
  } else {
    for (int32_t ox = lo; ox < hi; ++ox)
      y[ox] += powf(fabsf(row[(ptrdiff_t)ox * sw + off]), (float)p);
  }
}

/* Taps of output column ox (or row) inside [0, size) and, for count_include_pad, inside
 * the explicitly padded extent [-p0, size + p1). */
static int32_t taps_inside(int32_t o, int32_t s, int32_t d, int32_t k, int32_t p0, int32_t p1,
                           int32_t size, int include_pad) {
  int32_t lo, hi;
  if (include_pad)
    tap_range(o * s, d, size + p0 + p1, k, &lo, &hi);
  else
    tap_range(o * s - p0, d, size, k, &lo, &hi);
  return hi - lo;
}

enum { KX_CACHE = 64 };

/* Output row yr: every valid tap row [ky_lo, ky_hi) of the window rows starting at
 * input row iy0, every kx; lo/hi[kx] are the output columns whose tap kx is inside. */
ERT_SIMD_CLONES
static void pool_row(const pool_geom *g, int kind, const float *x, int32_t iy0, int32_t ky_lo,
                     int32_t ky_hi, const int32_t *lo, const int32_t *hi, float *restrict yr) {
  const float init = kind == KIND_MAX ? -INFINITY : 0.0f;
  const int32_t p = kind == KIND_LP ? g->extra : 0;
  for (int32_t ox = 0; ox < g->ow; ++ox) yr[ox] = init;
  for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {
    const float *row = x + (size_t)(iy0 + ky * g->dh) * g->w;
    for (int32_t kx = 0; kx < g->kw; ++kx) {
      const int32_t off = kx * g->dw - g->pl;
      int32_t a, b;
      if (kx < KX_CACHE) {
        a = lo[kx];
        b = hi[kx];
      } else {
        tap_range(off, g->sw, g->w, g->ow, &a, &b);
      }
      if (kind == KIND_MAX)
        tap_max(yr, row, a, b, g->sw, off);
      else
        tap_sum(yr, row, a, b, g->sw, off, p);
    }
  }
}

/* Separable form for windows up to SEP_SPAN columns wide: per output row, the taps of
 * every window row are first reduced down the rows into tmp (one value per input column
 * of the span the outputs reach, `init` outside the image), then across the columns. */
enum { SEP_TMP = 1024, SEP_SPAN = SEP_TMP / 2 };

static inline float pool_f(float v, int32_t p) {
  return p == 0 ? v : p == 1 ? fabsf(v) : p == 2 ? v * v : powf(fabsf(v), (float)p);
}

ERT_SIMD_CLONES
static void pool_row_separable(const pool_geom *g, int kind, const float *x, int32_t iy0,
                               int32_t ky_lo, int32_t ky_hi, float *restrict yr) {
  float tmp[SEP_TMP];
  const int is_max = kind == KIND_MAX;
  const float init = is_max ? -INFINITY : 0.0f;
  const int32_t p = kind == KIND_LP ? g->extra : 0;
  const int32_t sw = g->sw, dw = g->dw, kw = g->kw, span_k = (kw - 1) * dw;
  const int32_t oc = sw == 1 ? SEP_TMP - span_k : (SEP_TMP - 1 - span_k) / sw + 1; /* per chunk */
  for (int32_t o0 = 0; o0 < g->ow; o0 += oc) {
    const int32_t o1 = o0 + oc < g->ow ? o0 + oc : g->ow;
    const int32_t c0 = o0 * sw - g->pl, span = (o1 - 1 - o0) * sw + span_k + 1;
    int32_t tl = c0 < 0 ? -c0 : 0, th = g->w - c0; /* tmp entries inside the image */
    if (tl > span) tl = span;
    if (th > span) th = span;
    if (th < tl || ky_lo >= ky_hi) th = tl;
    int32_t t = 0;
    for (; t < tl; ++t) tmp[t] = init;
    if (th > tl) {
      /* r[t] below is input column c0 + t of the row, inside it for t in [tl, th) */
      const float *r0 = x + (size_t)(iy0 + ky_lo * g->dh) * g->w + c0 + tl;
      float *tt = tmp + tl;
      const int32_t nt = th - tl;
      if ((is_max || p == 0) && ert_cpu.pool_vred != NULL) {
        ert_cpu.pool_vred(tt, r0, (ptrdiff_t)g->dh * g->w, ky_hi - ky_lo, nt, is_max);
      } else if (is_max || p == 0) {
        /* rows folded two per pass, in order (the first pass starts from row ky_lo) */
        const ptrdiff_t rs = (ptrdiff_t)g->dh * g->w;
        int32_t ky = ky_lo + 1;
        const float *a = r0;
        for (; ky < ky_hi; ky += 2) {
          const float *r = r0 + (ptrdiff_t)(ky - ky_lo) * rs;
          if (ky + 1 < ky_hi) {
            if (is_max) {
              for (t = 0; t < nt; ++t) {
                const float m = r[t] > a[t] ? r[t] : a[t];
                tt[t] = r[t + rs] > m ? r[t + rs] : m;
              }
            } else {
              for (t = 0; t < nt; ++t) tt[t] = (a[t] + r[t]) + r[t + rs];
            }
          } else if (is_max) {
            for (t = 0; t < nt; ++t) tt[t] = r[t] > a[t] ? r[t] : a[t];
          } else {
            for (t = 0; t < nt; ++t) tt[t] = a[t] + r[t];
          }
          a = tt;
        }
        if (a != tt) memcpy(tt, r0, (size_t)nt * sizeof(float));
      } else { /* lp_pool2d */
        for (t = 0; t < nt; ++t) tt[t] = pool_f(r0[t], p);
        for (int32_t ky = ky_lo + 1; ky < ky_hi; ++ky) {
          const float *r = x + (size_t)(iy0 + ky * g->dh) * g->w + c0 + tl;
          for (t = 0; t < nt; ++t) tt[t] += pool_f(r[t], p);
        }
      }
    }
    for (t = th; t < span; ++t) tmp[t] = init;
    float *y = yr + o0;
    const int32_t n = o1 - o0;
    if (dw == 1 && ert_cpu.pool_hred != NULL && ert_cpu.pool_hred(y, tmp, n, kw, sw, is_max)) {
      /* done by the optimized row */
    } else if (kw == 3 && sw == 1 && dw == 1) {
      for (int32_t i = 0; i < n; ++i) {
        const float a = tmp[i], b = tmp[i + 1], c = tmp[i + 2];
        if (is_max) {
          const float m = a > b ? a : b;
          y[i] = c > m ? c : m;
        } else {
          y[i] = a + b + c;
        }
      }
    } else if (kw == 3 && sw == 2 && dw == 1) {
      for (int32_t i = 0; i < n; ++i) {
        const float a = tmp[2 * i], b = tmp[2 * i + 1], c = tmp[2 * i + 2];
        if (is_max) {
          const float m = a > b ? a : b;
          y[i] = c > m ? c : m;
        } else {
          y[i] = a + b + c;
        }
      }
    } else if (kw == 2 && sw == 2 && dw == 1) {
      for (int32_t i = 0; i < n; ++i) {
        const float a = tmp[2 * i], b = tmp[2 * i + 1];
        y[i] = is_max ? (a > b ? a : b) : a + b;
      }
    } else if (sw == 1) {
      /* contiguous taps: the form compilers vectorize */
      memcpy(y, tmp, (size_t)n * sizeof(float));
      for (int32_t kx = 1; kx < kw; ++kx) {
        const float *tk = tmp + (ptrdiff_t)kx * dw;
        if (is_max) {
          for (int32_t i = 0; i < n; ++i) y[i] = tk[i] > y[i] ? tk[i] : y[i];
        } else {
          for (int32_t i = 0; i < n; ++i) y[i] += tk[i];
        }
      }
    } else {
      for (int32_t i = 0; i < n; ++i) y[i] = tmp[(ptrdiff_t)i * sw];
      for (int32_t kx = 1; kx < kw; ++kx) {
        const float *tk = tmp + (ptrdiff_t)kx * dw;
        if (is_max) {
          for (int32_t i = 0; i < n; ++i) {
            const float v = tk[(ptrdiff_t)i * sw];
            y[i] = v > y[i] ? v : y[i];
          }
        } else {
          for (int32_t i = 0; i < n; ++i) y[i] += tk[(ptrdiff_t)i * sw];
        }
      }
    }
  }
}

static void pool_plane(const pool_geom *g, int kind, const float *x, float *y) {
  const int include_pad = kind == KIND_AVG && g->extra;
  const int32_t p = kind == KIND_LP ? g->extra : 0;
  int32_t lo[KX_CACHE], hi[KX_CACHE];
  for (int32_t kx = 0; kx < g->kw && kx < KX_CACHE; ++kx)
    tap_range(kx * g->dw - g->pl, g->sw, g->w, g->ow, &lo[kx], &hi[kx]);
  /* output columns every tap of which is inside the row (and so counted) */
  int32_t in_lo, in_hi;
  {
    int32_t a0, b0, a1, b1;
    tap_range(-g->pl, g->sw, g->w, g->ow, &a0, &b0);
    tap_range((g->kw - 1) * g->dw - g->pl, g->sw, g->w, g->ow, &a1, &b1);
    in_lo = a0 > a1 ? a0 : a1;
    in_hi = b0 < b1 ? b0 : b1;
    if (in_hi < in_lo) in_lo = in_hi = 0;
  }
  for (int32_t oy = 0; oy < g->oh; ++oy) {
    const int32_t iy0 = oy * g->sh - g->pt;
    int32_t ky_lo, ky_hi;
    tap_range(iy0, g->dh, g->h, g->kh, &ky_lo, &ky_hi);
    float *yr = y + (size_t)oy * g->ow;
    if ((g->kw - 1) * g->dw < SEP_SPAN)
      pool_row_separable(g, kind, x, iy0, ky_lo, ky_hi, yr);
    else
      pool_row(g, kind, x, iy0, ky_lo, ky_hi, lo, hi, yr);
    if (kind == KIND_AVG) {
      const int32_t ny = include_pad ? taps_inside(oy, g->sh, g->dh, g->kh, g->pt, g->pb, g->h, 1)
                                     : ky_hi - ky_lo;
      const float full = ny * g->kw > 0 ? 1.0f / (float)(ny * g->kw) : 0.0f;
      for (int32_t ox = 0; ox < g->ow; ++ox) {
        if (ox >= in_lo && ox < in_hi) {
          yr[ox] *= full;
        } else {
          const int32_t count =
              ny * taps_inside(ox, g->sw, g->dw, g->kw, g->pl, g->pr, g->w, include_pad);
          yr[ox] = count > 0 ? yr[ox] / (float)count : 0.0f;
        }
      }
    } else if (kind == KIND_LP && p != 1) {
      for (int32_t ox = 0; ox < g->ow; ++ox)
        yr[ox] = p == 2 ? sqrtf(yr[ox]) : powf(yr[ox], 1.0f / (float)p);
    }
  }
}

typedef struct pool_job {
  pool_geom g;
  int kind;
  const float *x;
  float *y;
} pool_job;

static void pool_worker(void *arg, size_t begin, size_t end) {
  const pool_job *j = arg;
  const size_t in_plane = (size_t)j->g.h * j->g.w, out_plane = (size_t)j->g.oh * j->g.ow;
  for (size_t p = begin; p < end; ++p)
    pool_plane(&j->g, j->kind, j->x + p * in_plane, j->y + p * out_plane);
}

static void pool_eval(const ert_node *node, ert_exec *ex, int kind) {
  pool_job j;
  read_geom(node, &j.g);
  j.kind = kind;
  j.x = node->in[0]->data;
  j.y = node->out[0]->data;
  ert_parallel_for(ex, j.g.planes, pool_worker, &j);
}

/* int8 inputs run the kernels of pool_s8.c. */
static int is_s8(const ert_node *node) {
  return node->n_in > 0 && node->in[0] != NULL && node->in[0]->dtype == EDGERT_INT8;
}

edgert_status ert_max_pool2d_prepare(ert_node *node, ert_err *err) {
  return is_s8(node) ? ert_pool2d_s8_prepare(node, err, 0) : pool_prepare(node, err, KIND_MAX);
}
void ert_max_pool2d_eval(const ert_node *node, ert_exec *ex) {
  if (is_s8(node))
    ert_pool2d_s8__ref(node, ex, 0);
  else
    pool_eval(node, ex, KIND_MAX);
}
edgert_status ert_avg_pool2d_prepare(ert_node *node, ert_err *err) {
  return is_s8(node) ? ert_pool2d_s8_prepare(node, err, 1) : pool_prepare(node, err, KIND_AVG);
}
void ert_avg_pool2d_eval(const ert_node *node, ert_exec *ex) {
  if (is_s8(node))
    ert_pool2d_s8__ref(node, ex, 1);
  else
    pool_eval(node, ex, KIND_AVG);
}
edgert_status ert_lp_pool2d_prepare(ert_node *node, ert_err *err) {
  return pool_prepare(node, err, KIND_LP);
}
void ert_lp_pool2d_eval(const ert_node *node, ert_exec *ex) { pool_eval(node, ex, KIND_LP); }

/* ---- global pooling ----------------------------------------------------------------- */

static edgert_status global_prepare(ert_node *node, ert_err *err, const char *op) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (!ert_is_f32(x, -1) || !ert_is_f32(y, x->ndim) || x->ndim < 3)
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s '%s': X and Y must be float32 of one rank >= 3",
                    op, node->name);
  if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1])
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s '%s': Y must be [N, C, 1, ...]", op, node->name);
  for (int32_t d = 2; d < x->ndim; ++d) {
    if (y->shape[d] != 1)
      return ert_fail(err, EDGERT_ERR_SHAPE, "%s '%s': Y must be [N, C, 1, ...]", op, node->name);
    if (x->shape[d] == 0)
      return ert_fail(err, EDGERT_ERR_SHAPE, "%s '%s': empty spatial dimension", op, node->name);
  }
  return EDGERT_OK;
}

typedef struct global_job {
  const float *x;
  float *y;
  size_t size;
  int is_max;
} global_job;

static void global_worker(void *arg, size_t begin, size_t end) {
  const global_job *j = arg;
  for (size_t p = begin; p < end; ++p) {
    const float *x = j->x + p * j->size;
    const size_t n = j->size;
    size_t i = 0;
    if (j->is_max) {
      /* one running max in which a NaN sticks: a NaN anywhere is the result (ONNX's max,
       * numpy's; onnxruntime agrees), so not the optimized gpool, whose v > m ? v : m skips it */
      float m = -INFINITY;
      for (; i < n; ++i) m = x[i] > m || x[i] != x[i] ? x[i] : m;
      j->y[p] = m;
    } else if (ert_cpu.gpool != NULL) {
      j->y[p] = ert_cpu.gpool(x, n, 0) / (float)n;
    } else {
      /* four independent partial sums, kept in registers (the gpool contract's order) */
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
      }
      for (; i < n; ++i) s0 += x[i];
      j->y[p] = ((s0 + s1) + (s2 + s3)) / (float)n;
    }
  }
}

#if defined(ERT_X86_KERNELS)
/* An NHWC input (src/layout.c): channels [begin, end) of pixel-major x, in pixel order. */
typedef struct global_nhwc_job {
  const float *x;
  float *y;
  size_t px, c;
  int is_max;
} global_nhwc_job;

static void global_nhwc_worker(void *arg, size_t begin, size_t end) {
  const global_nhwc_job *j = arg;
  for (size_t ch = begin; ch < end; ++ch) j->y[ch] = j->is_max ? -INFINITY : 0.0f;
  for (size_t p = 0; p < j->px; ++p) {
    const float *xp = j->x + p * j->c;
    for (size_t ch = begin; ch < end; ++ch) /* max: a NaN sticks, as in global_worker */
      j->y[ch] = j->is_max ? (xp[ch] > j->y[ch] || xp[ch] != xp[ch] ? xp[ch] : j->y[ch]) : j->y[ch] + xp[ch];
  }
  if (!j->is_max)
    for (size_t ch = begin; ch < end; ++ch) j->y[ch] /= (float)j->px;
}
#endif

static void global_eval(const ert_node *node, ert_exec *ex, int is_max) {
  const ert_tensor *x = node->in[0];
#if defined(ERT_X86_KERNELS)
  if (node->layout) {
    global_nhwc_job nj = {x->data, node->out[0]->data, (size_t)x->shape[2] * (size_t)x->shape[3],
                          (size_t)x->shape[1], is_max};
    ert_parallel_for(ex, nj.c, global_nhwc_worker, &nj);
    return;
  }
#endif
  global_job j = {x->data, node->out[0]->data, 1, is_max};
  for (int32_t d = 2; d < x->ndim; ++d) j.size *= (size_t)x->shape[d];
  ert_parallel_for(ex, (size_t)x->shape[0] * (size_t)x->shape[1], global_worker, &j);
}

edgert_status ert_global_avg_pool_prepare(ert_node *node, ert_err *err) {
  if (is_s8(node)) return ert_global_pool_s8_prepare(node, err, 0);
  return global_prepare(node, err, "global_avg_pool");
}
void ert_global_avg_pool_eval(const ert_node *node, ert_exec *ex) {
  if (is_s8(node))
    ert_global_pool_s8__ref(node, ex, 0);
  else
    global_eval(node, ex, 0);
}
edgert_status ert_global_max_pool_prepare(ert_node *node, ert_err *err) {
  if (is_s8(node)) return ert_global_pool_s8_prepare(node, err, 1);
  return global_prepare(node, err, "global_max_pool");
}
void ert_global_max_pool_eval(const ert_node *node, ert_exec *ex) {
  if (is_s8(node))
    ert_global_pool_s8__ref(node, ex, 1);
  else
    global_eval(node, ex, 1);
}

/* ---- shapes (bounded dimensions) ---- */

static edgert_status window_shape(ert_node *node, ert_err *err) {
  const ert_tensor *x = node->in[0];
  ert_tensor *y = node->out[0];
  const int rank1d = ert_pi(node, P_RANK1D) != 0, ceil_mode = ert_pi(node, P_CEIL) != 0;
  const int rank = rank1d ? 3 : 4;
  int64_t dims[4];
  dims[0] = x->shape[0];
  dims[1] = x->shape[1];
  if (!rank1d)
    dims[2] = ert_window_out(x->shape[2], ert_pi(node, P_KH), ert_pi(node, P_SH), ert_pi(node, P_DH),
                             ert_pi(node, P_PT), ert_pi(node, P_PB), ceil_mode);
  dims[rank - 1] = ert_window_out(x->shape[rank - 1], ert_pi(node, P_KW), ert_pi(node, P_SW),
                                  ert_pi(node, P_DW), ert_pi(node, P_PL), ert_pi(node, P_PR), ceil_mode);
  if ((!rank1d && dims[2] < 0) || dims[rank - 1] < 0)
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s '%s': window larger than the padded input", "pool", node->name);
  ert_tensor_set_shape(y, rank, dims);
  return EDGERT_OK;
}

static edgert_status global_shape(ert_node *node, ert_err *err) {
  (void)err;
  const ert_tensor *x = node->in[0];
  int64_t dims[EDGERT_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) dims[d] = d < 2 ? x->shape[d] : 1;
  ert_tensor_set_shape(node->out[0], x->ndim, dims);
  return EDGERT_OK;
}

ERT_SHAPE_AS(max_pool2d, window_shape)
ERT_SHAPE_AS(avg_pool2d, window_shape)
ERT_SHAPE_AS(lp_pool2d, window_shape)
ERT_SHAPE_AS(global_avg_pool, global_shape)
ERT_SHAPE_AS(global_max_pool, global_shape)
