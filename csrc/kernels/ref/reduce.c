/* Reductions (reduce_*) and argmax / argmin. Parameters and semantics: edgert/converter/ops/reduce.py.
 *
 * prepare drops size-1 dimensions and merges neighbouring dimensions that are both
 * reduced or both kept. When one reduced run remains the input is [outer, R, inner]
 * and output o reduces R elements spaced `inner` apart, starting at
 * (o / inner) * R * inner + o % inner. Work items are outer rows (inner == 1) or
 * (outer, tile of up to 64 neighbouring outputs) pairs, computed in parallel; a float
 * tile walks the R rows of its columns, so every access is to a contiguous run.
 * Otherwise (several reduced runs) each output's R elements are gathered into scratch
 * (R elements) and reduced there, one output at a time.
 *
 * Float sums accumulate in double. */
#include <math.h>
#include <string.h>

#include "exec.h"
#include "internal.h"

/* Results do not depend on floating-point exception flags, so comparisons may be
 * evaluated speculatively: this lets GCC vectorize the max / min loops (other
 * compilers do by default). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

typedef enum rop {
  R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOG_SUM, R_LOG_SUM_EXP, R_SUM_SQUARE
} rop;

/* node->opdata layout */
enum {
  OD_KIND = 0, OD_OUTER = 1, OD_R = 2, OD_INNER = 3, OD_NK = 4, OD_NR = 5,
  OD_KSIZE = 8, OD_KSTRIDE = 16, OD_RSIZE = 24, OD_RSTRIDE = 32
};
enum { KIND_EMPTY = 0, KIND_STRIDED = 1, KIND_GENERAL = 2 };

#define PAR_MIN_WORK 32768u

static void run_tasks(ert_exec *ex, size_t n, size_t work, ert_task_fn fn, void *arg) {
  if (n == 0) return;
  if (work < PAR_MIN_WORK || n == 1)
    fn(arg, 0, n);
  else
    ert_parallel_for(ex, n, fn, arg);
}

/* ---- one reduction over n elements spaced `stride` apart ---- */

static float row_f32(rop op, const float *x, size_t n, size_t stride) {
  size_t k, end = n * stride;
  double acc = 0.0;
  switch (op) {
  case R_SUM:
  case R_MEAN:
  case R_LOG_SUM:
    for (k = 0; k < end; k += stride) acc += x[k];
    if (op == R_MEAN) return (float)(acc / (double)n); /* NaN when n == 0 */
    if (op == R_LOG_SUM) return logf((float)acc);
    return (float)acc;
  case R_L1:
    for (k = 0; k < end; k += stride) acc += fabs((double)x[k]);
    return (float)acc;
  case R_L2:
  case R_SUM_SQUARE:
    for (k = 0; k < end; k += stride) acc += (double)x[k] * (double)x[k];
    return op == R_L2 ? (float)sqrt(acc) : (float)acc;
  case R_PROD: {
    float p = 1.0f;
    for (k = 0; k < end; k += stride) p *= x[k];
    return p;
  }
  case R_MAX: {
    float m = -INFINITY;
    for (k = 0; k < end; k += stride) {
      float v = x[k];
      if (v > m || v != v) m = v;
      if (m != m) break;
    }
    return m;
  }
  case R_MIN: {
    float m = INFINITY;
    for (k = 0; k < end; k += stride) {
      float v = x[k];
      if (v < m || v != v) m = v;
      if (m != m) break;
    }
    return m;
  }
  case R_LOG_SUM_EXP: {
    float m = -INFINITY;
    for (k = 0; k < end; k += stride)
      if (x[k] > m || x[k] != x[k]) m = x[k];
    if (isinf(m) || m != m) return m;
    for (k = 0; k < end; k += stride) acc += expf(x[k] - m);
    return m + logf((float)acc);
  }
  }
  return 0.0f;
}

/* Integer sums and products wrap around (computed unsigned). */
#define DEFINE_ROW_INT(NAME, T, UT, TMIN, TMAX)                            \
  static T NAME(rop op, const T *x, size_t n, size_t stride) {             \
    size_t k, end = n * stride;                                            \
    switch (op) {                                                          \
    case R_SUM: {                                                          \
      UT s = 0;                                                            \
      for (k = 0; k < end; k += stride) s += (UT)x[k];                     \
      return (T)s;                                                         \
    }                                                                      \
    case R_PROD: {                                                         \
      UT p = 1;                                                            \
      for (k = 0; k < end; k += stride) p *= (UT)x[k];                     \
      return (T)p;                                                         \
    }                                                                      \
    case R_MAX: {                                                          \
      T m = TMIN;                                                          \
      for (k = 0; k < end; k += stride) m = x[k] > m ? x[k] : m;           \
      return m;                                                            \
    }                                                                      \
    case R_MIN: {                                                          \
      T m = TMAX;                                                          \
      for (k = 0; k < end; k += stride) m = x[k] < m ? x[k] : m;           \
      return m;                                                            \
    }                                                                      \
    default:                                                               \
      return 0;                                                            \
    }                                                                      \
  }

DEFINE_ROW_INT(row_i32, int32_t, uint32_t, INT32_MIN, INT32_MAX)
DEFINE_ROW_INT(row_i64, int64_t, uint64_t, INT64_MIN, INT64_MAX)

/* bool: max is "any", min is "all". */
static uint8_t row_bool(rop op, const uint8_t *x, size_t n, size_t stride) {
  size_t k, end = n * stride;
  if (op == R_MAX) {
    for (k = 0; k < end; k += stride)
      if (x[k]) return 1;
    return 0;
  }
  for (k = 0; k < end; k += stride)
    if (!x[k]) return 0;
  return 1;
}

/* ---- float32 fast paths ---- */

/* One contiguous row (stride 1): eight partial sums / extremes. */
static float row_f32_contig(rop op, const float *x, size_t n) {
  size_t j = 0;
  switch (op) {
  case R_SUM:
  case R_MEAN:
  case R_LOG_SUM:
  case R_L1:
  case R_L2:
  case R_SUM_SQUARE: {
    double s[8] = {0};
    if (op == R_L1) {
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) s[k] += fabsf(x[j + k]);
      for (int k = 0; j < n; j++, k++) s[k] += fabsf(x[j]);
    } else if (op == R_L2 || op == R_SUM_SQUARE) {
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) s[k] += (double)x[j + k] * (double)x[j + k];
      for (int k = 0; j < n; j++, k++) s[k] += (double)x[j] * (double)x[j];
    } else {
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) s[k] += x[j + k];
      for (int k = 0; j < n; j++, k++) s[k] += x[j];
    }
    double acc = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    if (op == R_MEAN) return (float)(acc / (double)n);
    if (op == R_LOG_SUM) return logf((float)acc);
    if (op == R_L2) return (float)sqrt(acc);
    return (float)acc;
  }
  case R_MAX:
  case R_MIN: {
    float m[8];
    int nan = 0;
    for (int k = 0; k < 8; k++) m[k] = op == R_MAX ? -INFINITY : INFINITY;
    if (op == R_MAX) {
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) {
          float v = x[j + k];
          m[k] = v > m[k] ? v : m[k];
          nan |= v != v;
        }
    } else {
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) {
          float v = x[j + k];
          m[k] = v < m[k] ? v : m[k];
          nan |= v != v;
        }
    }
    if (nan) return NAN;
    float r = row_f32(op, x + j, n - j, 1);
    for (int k = 0; k < 8; k++) r = op == R_MAX ? (m[k] > r ? m[k] : r) : (m[k] < r ? m[k] : r);
    return r;
  }
  default:
    return row_f32(op, x, n, 1);
  }
}

#define TILE 64

/* Reduces the w <= TILE neighbouring columns at x (r rows `inner` apart) into y[0..w).
 * log_sum_exp goes column by column. */
static void tile_f32(rop op, const float *x, size_t r, size_t inner, size_t w, float *y) {
  size_t j, k;
  switch (op) {
  case R_SUM:
  case R_MEAN:
  case R_LOG_SUM:
  case R_L1:
  case R_L2:
  case R_SUM_SQUARE: {
    double acc[TILE] = {0};
    for (j = 0; j < r; j++) {
      const float *xr = x + j * inner;
      if (op == R_L1)
        for (k = 0; k < w; k++) acc[k] += fabsf(xr[k]);
      else if (op == R_L2 || op == R_SUM_SQUARE)
        for (k = 0; k < w; k++) acc[k] += (double)xr[k] * (double)xr[k];
      else
        for (k = 0; k < w; k++) acc[k] += xr[k];
    }
    for (k = 0; k < w; k++) {
      double a = acc[k];
      y[k] = (float)(op == R_MEAN ? a / (double)r : op == R_LOG_SUM ? log(a) : op == R_L2 ? sqrt(a) : a);
    }
    return;
  }
  case R_MAX:
  case R_MIN:
  case R_PROD: {
    float acc[TILE];
    int nan[TILE];
    float init = op == R_MAX ? -INFINITY : op == R_MIN ? INFINITY : 1.0f;
    for (k = 0; k < w; k++) {
      acc[k] = init;
      nan[k] = 0;
    }
    for (j = 0; j < r; j++) {
      const float *xr = x + j * inner;
      if (op == R_PROD) {
        for (k = 0; k < w; k++) acc[k] *= xr[k];
      } else if (op == R_MAX) {
        for (k = 0; k < w; k++) {
          acc[k] = xr[k] > acc[k] ? xr[k] : acc[k];
          nan[k] |= xr[k] != xr[k];
        }
      } else {
        for (k = 0; k < w; k++) {
          acc[k] = xr[k] < acc[k] ? xr[k] : acc[k];
          nan[k] |= xr[k] != xr[k];
        }
      }
    }
    for (k = 0; k < w; k++) y[k] = nan[k] ? NAN : acc[k];
    return;
  }
  default:
    for (k = 0; k < w; k++) y[k] = row_f32(op, x + k, r, inner);
    return;
  }
}

/* Reduces n elements of dtype spaced `stride` apart from x into *y. */
static void reduce_one(rop op, int32_t dtype, const void *x, size_t n, size_t stride, void *y) {
  switch (dtype) {
  case EDGERT_FLOAT32: *(float *)y = row_f32(op, (const float *)x, n, stride); break;
  case EDGERT_INT32: *(int32_t *)y = row_i32(op, (const int32_t *)x, n, stride); break;
  case EDGERT_INT64: *(int64_t *)y = row_i64(op, (const int64_t *)x, n, stride); break;
  default: *(uint8_t *)y = row_bool(op, (const uint8_t *)x, n, stride); break;
  }
}

/* ---- prepare ---- */

static bool dtype_allowed(rop op, int32_t dt) {
  if (dt == EDGERT_FLOAT32) return true;
  switch (op) {
  case R_SUM:
  case R_PROD: return dt == EDGERT_INT32 || dt == EDGERT_INT64;
  case R_MAX:
  case R_MIN: return dt == EDGERT_INT32 || dt == EDGERT_INT64 || dt == EDGERT_BOOL;
  default: return false;
  }
}

static edgert_status reduce_prepare(ert_node *node, ert_err *err, rop op) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (x == NULL) return ert_fail(err, EDGERT_ERR_FORMAT, "%s: input X is absent", node->name);
  if (!dtype_allowed(op, x->dtype))
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s: dtype %s is not supported", node->name,
                    ert_dtype_name(x->dtype));
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;

  int32_t keep = ert_pi(node, 0), n = ert_pi(node, 1);
  if ((keep != 0 && keep != 1) || n < 0 || n > x->ndim || node->n_params != (uint32_t)(2 + n))
    return ert_fail(err, EDGERT_ERR_PARAM, "%s: bad parameters (keepdims %d, %d axes, %u words)",
                    node->name, (int)keep, (int)n, (unsigned)node->n_params);
  bool red[EDGERT_MAX_DIMS] = {false};
  int32_t prev = -1;
  for (int32_t k = 0; k < n; k++) {
    int32_t a = ert_pi(node, 2 + (uint32_t)k);
    if (a <= prev || a >= x->ndim)
      return ert_fail(err, EDGERT_ERR_PARAM, "%s: axes must be increasing and in [0, %d)",
                      node->name, (int)x->ndim);
    red[a] = true;
    prev = a;
  }
  if (y->ndim != (keep ? x->ndim : x->ndim - n))
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s: output rank %d does not match", node->name,
                    (int)y->ndim);
  for (int32_t i = 0, j = 0; i < x->ndim; i++) {
    if (red[i] && !keep) continue;
    int32_t want = red[i] ? 1 : x->shape[i];
    if (y->shape[j++] != want)
      return ert_fail(err, EDGERT_ERR_SHAPE, "%s: output dimension %d is %d, expected %d",
                      node->name, (int)(j - 1), (int)y->shape[j - 1], (int)want);
  }

  /* Runs of merged dimensions. */
  int64_t gs[EDGERT_MAX_DIMS];
  bool gr[EDGERT_MAX_DIMS];
  int ng = 0, nred = 0;
  for (int32_t i = 0; i < x->ndim; i++) {
    if (x->shape[i] == 1) continue;
    if (ng > 0 && gr[ng - 1] == red[i]) {
      gs[ng - 1] *= x->shape[i];
    } else {
      gs[ng] = x->shape[i];
      gr[ng] = red[i];
      nred += red[i];
      ng++;
    }
  }
  int64_t *od = node->opdata;
  memset(od, 0, sizeof node->opdata);
  if (y->numel == 0) {
    od[OD_KIND] = KIND_EMPTY;
    return EDGERT_OK;
  }
  if (nred <= 1) {
    int64_t outer = 1, r = 1, inner = 1;
    bool seen = false;
    for (int g = 0; g < ng; g++) {
      if (gr[g]) { r = gs[g]; seen = true; }
      else if (seen) inner *= gs[g];
      else outer *= gs[g];
    }
    od[OD_KIND] = KIND_STRIDED;
    od[OD_OUTER] = outer;
    od[OD_R] = r;
    od[OD_INNER] = inner;
    return EDGERT_OK;
  }
  int64_t stride = 1, r = 1;
  int nk = 0, nr = 0;
  int64_t gstride[EDGERT_MAX_DIMS];
  for (int g = ng - 1; g >= 0; g--) {
    gstride[g] = stride;
    stride *= gs[g];
  }
  for (int g = 0; g < ng; g++) {
    if (gr[g]) {
      od[OD_RSIZE + nr] = gs[g];
      od[OD_RSTRIDE + nr] = gstride[g];
      nr++;
      r *= gs[g];
    } else {
      od[OD_KSIZE + nk] = gs[g];
      od[OD_KSTRIDE + nk] = gstride[g];
      nk++;
    }
  }
  od[OD_KIND] = KIND_GENERAL;
  od[OD_R] = r;
  od[OD_NK] = nk;
  od[OD_NR] = nr;
  size_t need = (size_t)r * ert_dtype_size(x->dtype);
  if (node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_FORMAT, "%s: scratch of %zu bytes, %zu needed", node->name,
                    node->scratch_bytes, need);
  return EDGERT_OK;
}

/* ---- eval ---- */

typedef struct reduce_task {
  const ert_node *node;
  rop op;
  size_t tiles; /* tiles per outer index (inner > 1) */
} reduce_task;

static void strided_task(void *arg, size_t begin, size_t end) {
  const reduce_task *t = (const reduce_task *)arg;
  const ert_node *node = t->node;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  size_t es = ert_dtype_size(x->dtype);
  size_t r = (size_t)node->opdata[OD_R], inner = (size_t)node->opdata[OD_INNER];
  const char *xd = (const char *)x->data;
  char *yd = (char *)y->data;
  for (size_t l = begin; l < end; l++) {
    if (inner == 1) {
      if (x->dtype == EDGERT_FLOAT32)
        ((float *)yd)[l] = row_f32_contig(t->op, (const float *)xd + l * r, r);
      else
        reduce_one(t->op, x->dtype, xd + l * r * es, r, 1, yd + l * es);
      continue;
    }
    size_t o = l / t->tiles, i0 = (l % t->tiles) * TILE;
    size_t w = inner - i0 < TILE ? inner - i0 : TILE;
    size_t base = o * r * inner + i0;
    if (x->dtype == EDGERT_FLOAT32) {
      tile_f32(t->op, (const float *)xd + base, r, inner, w, (float *)yd + o * inner + i0);
    } else {
      for (size_t k = 0; k < w; k++)
        reduce_one(t->op, x->dtype, xd + (base + k) * es, r, inner, yd + (o * inner + i0 + k) * es);
    }
  }
}

static void general_eval(const ert_node *node, rop op) {
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int64_t *od = node->opdata;
  size_t es = ert_dtype_size(x->dtype);
  size_t r = (size_t)od[OD_R];
  int nk = (int)od[OD_NK], nr = (int)od[OD_NR];
  const char *xd = (const char *)x->data;
  char *yd = (char *)y->data, *buf = (char *)node->scratch;
  size_t kidx[EDGERT_MAX_DIMS] = {0}, base = 0;
  for (size_t o = 0; o < y->numel; o++) {
    size_t ridx[EDGERT_MAX_DIMS] = {0}, off = 0;
    for (size_t k = 0; k < r; k++) {
      memcpy(buf + k * es, xd + (base + off) * es, es);
      for (int g = nr - 1; g >= 0; g--) {
        off += (size_t)od[OD_RSTRIDE + g];
        if (++ridx[g] < (size_t)od[OD_RSIZE + g]) break;
        off -= (size_t)od[OD_RSTRIDE + g] * (size_t)od[OD_RSIZE + g];
        ridx[g] = 0;
      }
    }
    reduce_one(op, x->dtype, buf, r, 1, yd + o * es);
    for (int g = nk - 1; g >= 0; g--) {
      base += (size_t)od[OD_KSTRIDE + g];
      if (++kidx[g] < (size_t)od[OD_KSIZE + g]) break;
      base -= (size_t)od[OD_KSTRIDE + g] * (size_t)od[OD_KSIZE + g];
      kidx[g] = 0;
    }
  }
}

static void reduce_eval(const ert_node *node, ert_exec *ex, rop op) {
  switch (node->opdata[OD_KIND]) {
  case KIND_STRIDED: {
    size_t inner = (size_t)node->opdata[OD_INNER], outer = (size_t)node->opdata[OD_OUTER];
    reduce_task t = {node, op, (inner + TILE - 1) / TILE};
    size_t items = inner == 1 ? outer : outer * t.tiles;
    run_tasks(ex, items, node->in[0]->numel, strided_task, &t);
    break;
  }
  case KIND_GENERAL: general_eval(node, op); break;
  default: break;
  }
}

#define DEFINE_REDUCE(NAME, OP)                                                       \
  edgert_status ert_##NAME##_prepare(ert_node *node, ert_err *err) {                \
    return reduce_prepare(node, err, OP);                                           \
  }                                                                                 \
  void ert_##NAME##_eval(const ert_node *node, ert_exec *ex) { reduce_eval(node, ex, OP); }

DEFINE_REDUCE(reduce_sum, R_SUM)
DEFINE_REDUCE(reduce_mean, R_MEAN)
DEFINE_REDUCE(reduce_max, R_MAX)
DEFINE_REDUCE(reduce_min, R_MIN)
DEFINE_REDUCE(reduce_prod, R_PROD)
DEFINE_REDUCE(reduce_l1, R_L1)
DEFINE_REDUCE(reduce_l2, R_L2)
DEFINE_REDUCE(reduce_log_sum, R_LOG_SUM)
DEFINE_REDUCE(reduce_log_sum_exp, R_LOG_SUM_EXP)
DEFINE_REDUCE(reduce_sum_square, R_SUM_SQUARE)

/* ---- argmax / argmin: params [axis, keepdims, select_last_index] ---- */

static edgert_status arg_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 3)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (x == NULL) return ert_fail(err, EDGERT_ERR_FORMAT, "%s: input X is absent", node->name);
  if (x->dtype != EDGERT_FLOAT32 && x->dtype != EDGERT_INT32 && x->dtype != EDGERT_INT64)
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s: dtype %s is not supported", node->name,
                    ert_dtype_name(x->dtype));
  if ((st = ert_check_dtype(node, err, y, EDGERT_INT64)) != EDGERT_OK) return st;
  int32_t axis = ert_pi(node, 0), keep = ert_pi(node, 1), last = ert_pi(node, 2);
  if (node->n_params != 3 || axis < 0 || axis >= x->ndim || (keep != 0 && keep != 1) ||
      (last != 0 && last != 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "%s: bad parameters", node->name);
  if (y->ndim != (keep ? x->ndim : x->ndim - 1))
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s: output rank %d does not match", node->name,
                    (int)y->ndim);
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0, j = 0; i < x->ndim; i++) {
    if (i < axis) outer *= x->shape[i];
    if (i > axis) inner *= x->shape[i];
    if (i == axis && !keep) continue;
    int32_t want = i == axis ? 1 : x->shape[i];
    if (y->shape[j++] != want)
      return ert_fail(err, EDGERT_ERR_SHAPE, "%s: output dimension %d does not match",
                      node->name, (int)(j - 1));
  }
  if (x->shape[axis] == 0 && y->numel > 0)
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s: reduced dimension is empty", node->name);
  memset(node->opdata, 0, sizeof node->opdata);
  node->opdata[OD_OUTER] = outer;
  node->opdata[OD_R] = x->shape[axis];
  node->opdata[OD_INNER] = inner;
  return EDGERT_OK;
}

typedef struct arg_task {
  const ert_node *node;
  bool is_max;
} arg_task;

/* Index of the first (or last, with `last`) extreme of n values spaced `stride` apart. */
#define DEFINE_ARG(NAME, T)                                                        \
  static int64_t NAME(const T *x, size_t n, size_t stride, bool is_max, bool last) { \
    size_t best = 0;                                                               \
    T b = x[0];                                                                    \
    for (size_t k = 1; k < n; k++) {                                               \
      T v = x[k * stride];                                                         \
      bool take = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);      \
      if (take) { b = v; best = k; }                                               \
    }                                                                              \
    return (int64_t)best;                                                          \
  }

DEFINE_ARG(arg_f32, float)
DEFINE_ARG(arg_i32, int32_t)
DEFINE_ARG(arg_i64, int64_t)

static void arg_run(void *arg, size_t begin, size_t end) {
  const arg_task *t = (const arg_task *)arg;
  const ert_node *node = t->node;
  const ert_tensor *x = node->in[0];
  int64_t *y = (int64_t *)node->out[0]->data;
  size_t r = (size_t)node->opdata[OD_R], inner = (size_t)node->opdata[OD_INNER];
  bool last = ert_pi(node, 2) != 0;
  for (size_t o = begin; o < end; o++) {
    size_t base = (o / inner) * r * inner + o % inner;
    switch (x->dtype) {
    case EDGERT_FLOAT32: y[o] = arg_f32((const float *)x->data + base, r, inner, t->is_max, last); break;
    case EDGERT_INT32: y[o] = arg_i32((const int32_t *)x->data + base, r, inner, t->is_max, last); break;
    default: y[o] = arg_i64((const int64_t *)x->data + base, r, inner, t->is_max, last); break;
    }
  }
}

edgert_status ert_argmax_prepare(ert_node *node, ert_err *err) { return arg_prepare(node, err); }
edgert_status ert_argmin_prepare(ert_node *node, ert_err *err) { return arg_prepare(node, err); }

void ert_argmax_eval(const ert_node *node, ert_exec *ex) {
  arg_task t = {node, true};
  run_tasks(ex, node->out[0]->numel, node->in[0]->numel, arg_run, &t);
}

void ert_argmin_eval(const ert_node *node, ert_exec *ex) {
  arg_task t = {node, false};
  run_tasks(ex, node->out[0]->numel, node->in[0]->numel, arg_run, &t);
}

/* ---- shapes (bounded dimensions) ---- */

/* Reduced dims become 1 (keepdims) or disappear. */
static edgert_status reduce_shape(ert_node *node, ert_err *err) {
  const ert_tensor *x = node->in[0];
  const int32_t keep = ert_pi(node, 0), n = ert_pi(node, 1);
  bool red[EDGERT_MAX_DIMS] = {false};
  for (int32_t k = 0; k < n; k++) {
    const int32_t a = ert_pi(node, 2 + (uint32_t)k);
    if (a < 0 || a >= x->ndim)
      return ert_fail_node(err, EDGERT_ERR_PARAM, node->name, ": reduce axis %d out of range", (int)a);
    red[a] = true;
  }
  int64_t dims[EDGERT_MAX_DIMS];
  int32_t r = 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    const bool all = n == 0; /* no axes: every dim */
    if (red[d] || all) {
      if (keep) dims[r++] = 1;
    } else {
      dims[r++] = x->shape[d];
    }
  }
  if (r != node->out[0]->ndim)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, node->name, ": reduced rank does not match");
  ert_tensor_set_shape(node->out[0], r, dims);
  return EDGERT_OK;
}

#define REDUCE_SHAPE(NAME) ERT_SHAPE_AS(NAME, reduce_shape)
REDUCE_SHAPE(reduce_sum) REDUCE_SHAPE(reduce_mean) REDUCE_SHAPE(reduce_max) REDUCE_SHAPE(reduce_min)
REDUCE_SHAPE(reduce_prod) REDUCE_SHAPE(reduce_l1) REDUCE_SHAPE(reduce_l2) REDUCE_SHAPE(reduce_log_sum)
REDUCE_SHAPE(reduce_log_sum_exp) REDUCE_SHAPE(reduce_sum_square)
