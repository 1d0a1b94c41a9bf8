/* softmax, log_softmax, hardmax (float32). Parameters and semantics: edgert/converter/ops/softmax.py.
 *
 * The input is viewed as [outer, n, inner]: outer * inner independent lines of n values
 * spaced `inner` apart, computed in parallel (rows when inner == 1, else tiles of up to
 * 64 neighbouring lines). Every value is read before its output is written, at the
 * same position, so the ops work in place. */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "exec.h"
#include "internal.h"
#include "quant_s8.h"

/* Results do not depend on floating-point exception flags, so comparisons may be
 * evaluated speculatively: this lets GCC vectorize the branch-free exp and max loops
 * (other compilers do by default). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

typedef enum smop { SM_SOFTMAX, SM_LOG_SOFTMAX, SM_HARDMAX } smop;

enum { OD_OUTER = 0, OD_N = 1, OD_INNER = 2 };

#define PAR_MIN_WORK 16384u

static edgert_status sm_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (!ert_is_f32(x, -1) || !ert_is_f32(y, -1))
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s: input and output must be float32", node->name);
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  int32_t axis = ert_pi(node, 0), flatten = ert_pi(node, 1);
  if (node->n_params != 2 || axis < 0 || axis >= x->ndim || (flatten != 0 && flatten != 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "%s: bad parameters (axis %d, flatten %d, rank %d)",
                    node->name, (int)axis, (int)flatten, (int)x->ndim);
  int64_t outer = 1, n = 1, inner = 1;
  for (int32_t i = 0; i < x->ndim; i++) {
    if (i < axis) outer *= x->shape[i];
    else if (i == axis || flatten) n *= x->shape[i];
    else inner *= x->shape[i];
  }
  memset(node->opdata, 0, sizeof node->opdata);
  node->opdata[OD_OUTER] = outer;
  node->opdata[OD_N] = n;
  node->opdata[OD_INNER] = inner;
  return EDGERT_OK;
}

/* exp(x) for x <= 0 (positive x give 1, NaN gives NaN), within 2 ulp of expf, 0 below
 * -87.3 (where expf would be subnormal). Branch-free so that loops over it vectorize: x = n ln2 + r with
 * |r| <= ln2 / 2, e^r by its degree-7 Taylor polynomial, 2^n from the exponent bits. */
static inline float exp_neg(float x) {
  const float lo = -87.33654f; /* log(FLT_MIN) */
  float xc = x >= lo ? x : lo;  /* also NaN -> lo: keeps the int conversion defined */
  xc = xc > 0.0f ? 0.0f : xc;
  float t = xc * 1.44269504f + 12582912.0f; /* round to nearest: 1.5 * 2^23 */
  float n = t - 12582912.0f;
  float r = xc - n * 0.693145752f; /* ln2 in two parts */
  r = r - n * 1.42860677e-6f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  union { uint32_t u; float f; } scale;
  scale.u = (uint32_t)((int32_t)n + 127) << 23;
  float e = p * scale.f;
  e = x < lo ? 0.0f : e;
  return x != x ? x : e;
}

/* Sum of x[0..n) with eight partial sums. */
static float sum8(const float *x, size_t n) {
  float s[8] = {0};
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) s[k] += x[j + k];
  for (int k = 0; j < n; j++, k++) s[k] += x[j];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* ---- contiguous lines (inner == 1) ---- */

static float row_max(const float *x, size_t n) {
  float m[8];
  size_t j = 0;
  for (int k = 0; k < 8; k++) m[k] = x[0];
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) m[k] = x[j + k] > m[k] ? x[j + k] : m[k];
  for (int k = 0; j < n; j++, k++) m[k] = x[j] > m[k] ? x[j] : m[k];
  for (int k = 1; k < 8; k++) m[0] = m[k] > m[0] ? m[k] : m[0];
  return m[0];
}

/* y = exp(x - m), for distinct buffers and in place. */
static void exp_sub(const float *restrict x, float *restrict y, size_t n, float m) {
  for (size_t j = 0; j < n; j++) y[j] = exp_neg(x[j] - m);
}

static void exp_sub_inplace(float *y, size_t n, float m) {
  for (size_t j = 0; j < n; j++) y[j] = exp_neg(y[j] - m);
}

static void softmax_row(const float *x, float *y, size_t n) {
  if (ert_cpu.softmax_row != NULL) {
    ert_cpu.softmax_row(x, y, n);
    return;
  }
  float m = row_max(x, n);
  if (x == y)
    exp_sub_inplace(y, n, m);
  else
    exp_sub(x, y, n, m);
  float inv = 1.0f / sum8(y, n);
  for (size_t j = 0; j < n; j++) y[j] *= inv;
}

static void log_softmax_row(const float *x, float *y, size_t n) {
  float m = row_max(x, n);
  float s[8] = {0};
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) s[k] += exp_neg(x[j + k] - m);
  for (int k = 0; j < n; j++, k++) s[k] += exp_neg(x[j] - m);
  float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  float off = m + logf(sum);
  if (x == y)
    for (j = 0; j < n; j++) y[j] -= off;
  else
    for (j = 0; j < n; j++) y[j] = x[j] - off;
}

/* hardmax of one contiguous line. */
static void hardmax_row(const float *x, float *y, size_t n) {
  size_t best = 0;
  float m = x[0];
  for (size_t j = 1; j < n; j++)
    if (x[j] > m) { m = x[j]; best = j; }
  for (size_t j = 0; j < n; j++) y[j] = 0.0f;
  y[best] = 1.0f;
}

/* ---- inner > 1: TILE neighbouring lines at a time, so that every access is to a
 * contiguous run of up to TILE values ---- */

#define TILE 64

/* Rows of the tile: y[k] = exp(x[k] - mx[k]), s[k] += y[k]. */
static void tile_exp(const float *restrict x, float *restrict y, const float *restrict mx,
                     float *restrict s, size_t w) {
  for (size_t k = 0; k < w; k++) {
    float e = exp_neg(x[k] - mx[k]);
    y[k] = e;
    s[k] += e;
  }
}

static void tile_exp_inplace(float *restrict y, const float *restrict mx, float *restrict s,
                             size_t w) {
  for (size_t k = 0; k < w; k++) {
    float e = exp_neg(y[k] - mx[k]);
    y[k] = e;
    s[k] += e;
  }
}

/* The w <= TILE lines starting at x and y, of n values spaced `st` apart. */
static void tile_lines(const float *x, float *y, size_t n, size_t st, size_t w, smop op) {
  float mx[TILE], s[TILE];
  size_t arg[TILE];
  size_t j, k;
  for (k = 0; k < w; k++) {
    mx[k] = x[k];
    s[k] = 0.0f;
    arg[k] = 0;
  }
  if (op == SM_HARDMAX) {
    for (j = 1; j < n; j++) {
      const float *xr = x + j * st;
      for (k = 0; k < w; k++)
        if (xr[k] > mx[k]) { mx[k] = xr[k]; arg[k] = j; }
    }
    for (j = 0; j < n; j++)
      for (k = 0; k < w; k++) y[j * st + k] = arg[k] == j ? 1.0f : 0.0f;
    return;
  }
  for (j = 1; j < n; j++) {
    const float *xr = x + j * st;
    for (k = 0; k < w; k++) mx[k] = xr[k] > mx[k] ? xr[k] : mx[k];
  }
  if (op == SM_SOFTMAX) {
    for (j = 0; j < n; j++) {
      if (x == y) tile_exp_inplace(y + j * st, mx, s, w);
      else tile_exp(x + j * st, y + j * st, mx, s, w);
    }
    for (k = 0; k < w; k++) s[k] = 1.0f / s[k];
    for (j = 0; j < n; j++) {
      float *yr = y + j * st;
      for (k = 0; k < w; k++) yr[k] *= s[k];
    }
    return;
  }
  for (j = 0; j < n; j++) {
    const float *xr = x + j * st;
    for (k = 0; k < w; k++) s[k] += exp_neg(xr[k] - mx[k]);
  }
  for (k = 0; k < w; k++) s[k] = mx[k] + logf(s[k]);
  for (j = 0; j < n; j++) {
    const float *xr = x + j * st;
    float *yr = y + j * st;
    for (k = 0; k < w; k++) yr[k] = xr[k] - s[k];
  }
}

typedef struct sm_task {
  const ert_node *node;
  smop op;
  size_t tiles; /* tiles per outer index (inner > 1) */
} sm_task;

static void sm_run(void *arg, size_t begin, size_t end) {
  const sm_task *t = (const sm_task *)arg;
  const ert_node *node = t->node;
  const float *x = (const float *)node->in[0]->data;
  float *y = (float *)node->out[0]->data;
  size_t n = (size_t)node->opdata[OD_N], inner = (size_t)node->opdata[OD_INNER];
  if (inner == 1) {
    for (size_t o = begin; o < end; o++) {
      if (t->op == SM_SOFTMAX) softmax_row(x + o * n, y + o * n, n);
      else if (t->op == SM_LOG_SOFTMAX) log_softmax_row(x + o * n, y + o * n, n);
      else hardmax_row(x + o * n, y + o * n, n);
    }
    return;
  }
  for (size_t l = begin; l < end; l++) {
    size_t i0 = (l % t->tiles) * TILE;
    size_t w = inner - i0 < TILE ? inner - i0 : TILE;
    size_t base = (l / t->tiles) * n * inner + i0;
    tile_lines(x + base, y + base, n, inner, w, t->op);
  }
}

/* Work items: outer rows when inner == 1, else (outer, tile) pairs. */
static void sm_eval(const ert_node *node, ert_exec *ex, smop op) {
  size_t n = (size_t)node->opdata[OD_N], inner = (size_t)node->opdata[OD_INNER];
  size_t outer = (size_t)node->opdata[OD_OUTER];
  if (n == 0 || inner == 0 || outer == 0) return;
  sm_task t = {node, op, (inner + TILE - 1) / TILE};
  size_t items = inner == 1 ? outer : outer * t.tiles;
  if (node->in[0]->numel < PAR_MIN_WORK || items == 1)
    sm_run(&t, 0, items);
  else
    ert_parallel_for(ex, items, sm_run, &t);
}

edgert_status ert_softmax_prepare(ert_node *node, ert_err *err) {
  if (node->n_in > 0 && node->in[0] != NULL && node->in[0]->dtype == EDGERT_INT8)
    return ert_softmax_s8_prepare(node, err); /* softmax_s8.c */
  return sm_prepare(node, err);
}
edgert_status ert_log_softmax_prepare(ert_node *node, ert_err *err) { return sm_prepare(node, err); }
edgert_status ert_hardmax_prepare(ert_node *node, ert_err *err) { return sm_prepare(node, err); }

void ert_softmax_eval(const ert_node *node, ert_exec *ex) {
  if (node->in[0]->dtype == EDGERT_INT8) {
    ert_softmax_s8__ref(node, ex);
    return;
  }
  sm_eval(node, ex, SM_SOFTMAX);
}
void ert_log_softmax_eval(const ert_node *node, ert_exec *ex) { sm_eval(node, ex, SM_LOG_SOFTMAX); }
void ert_hardmax_eval(const ert_node *node, ert_exec *ex) { sm_eval(node, ex, SM_HARDMAX); }

ERT_SHAPE_AS(softmax, ert_shape_same)
ERT_SHAPE_AS(log_softmax, ert_shape_same)
ERT_SHAPE_AS(hardmax, ert_shape_same)
