/* Normalisation ops (float32): batch_norm, instance_norm, layer_norm, group_norm, lrn.
 * Parameters and semantics: edgert/converter/ops/norm.py.
 *
 * Means and variances are two-pass (mean, then mean of squared deviations) with
 * eight partial float sums. Work is split over independent rows, planes or groups.
 * batch_norm and layer_norm read each value before writing it, so they work in place. */
#include <math.h>
#include <string.h>

#include "exec.h"
#include "internal.h"

#define PAR_MIN_WORK 16384u

static void run_tasks(ert_exec *ex, size_t n, size_t work, ert_task_fn fn, void *arg) {
  if (n == 0) return;
  if (work < PAR_MIN_WORK || n == 1)
    fn(arg, 0, n);
  else
    ert_parallel_for(ex, n, fn, arg);
}

/* Sum of x[0..n) and sum of (x - m)^2, each with eight partial sums. */
static float sum_f32(const float *x, size_t n) {
  float s[8] = {0};
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) s[k] += x[j + k];
  for (int k = 0; j < n; j++, k++) s[k] += x[j];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float sum_sq_dev_f32(const float *x, size_t n, float m) {
  float s[8] = {0};
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) {
      float d = x[j + k] - m;
      s[k] += d * d;
    }
  for (int k = 0; j < n; j++, k++) {
    float d = x[j] - m;
    s[k] += d * d;
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Mean and 1 / sqrt(var + eps) of x[0..n), n > 0. */
static void moments(const float *x, size_t n, float eps, float *mean, float *inv) {
  float m = sum_f32(x, n) / (float)n;
  float var = sum_sq_dev_f32(x, n, m) / (float)n;
  *mean = m;
  *inv = 1.0f / sqrtf(var + eps);
}

/* y = (x - m) * a + b over n values; y is x (in place) or does not overlap it. The
 * restrict-qualified loops vectorize without run-time overlap checks. */
static void affine_to(const float *restrict x, float *restrict y, size_t n, float m, float a,
                      float b) {
  for (size_t j = 0; j < n; j++) y[j] = (x[j] - m) * a + b;
}

static void affine_inplace(float *y, size_t n, float m, float a, float b) {
  for (size_t j = 0; j < n; j++) y[j] = (y[j] - m) * a + b;
}

static void affine(const float *x, float *y, size_t n, float m, float a, float b) {
  if (x == y)
    affine_inplace(y, n, m, a, b);
  else
    affine_to(x, y, n, m, a, b);
}

/* layer_norm's y = (x - m) * inv * scale + bias (bias may be NULL), as affine. */
static void ln_apply_to(const float *restrict x, float *restrict y, const float *restrict scale,
                        const float *restrict bias, size_t n, float m, float inv) {
  if (bias != NULL)
    for (size_t j = 0; j < n; j++) y[j] = (x[j] - m) * inv * scale[j] + bias[j];
  else
    for (size_t j = 0; j < n; j++) y[j] = (x[j] - m) * inv * scale[j];
}

static void ln_apply_inplace(float *restrict y, const float *restrict scale,
                             const float *restrict bias, size_t n, float m, float inv) {
  if (bias != NULL)
    for (size_t j = 0; j < n; j++) y[j] = (y[j] - m) * inv * scale[j] + bias[j];
  else
    for (size_t j = 0; j < n; j++) y[j] = (y[j] - m) * inv * scale[j];
}

/* Checks the input is float32 of rank >= 2 and that input i (1..last) holds `count`
 * float32 values. */
static edgert_status check_nc(ert_node *node, ert_err *err, uint32_t last) {
  const ert_tensor *x = node->in[0];
  if (!ert_is_f32(x, -1) || x->ndim < 2)
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s: X must be float32 of rank >= 2", node->name);
  if (!ert_is_f32(node->out[0], -1))
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s: output must be float32", node->name);
  edgert_status st = ert_check_same_shape(node, err, x, node->out[0]);
  if (st != EDGERT_OK) return st;
  for (uint32_t i = 1; i <= last; i++)
    if (!ert_is_f32(node->in[i], -1))
      return ert_fail(err, EDGERT_ERR_DTYPE, "%s: input %u must be float32", node->name,
                      (unsigned)i);
  return EDGERT_OK;
}

static size_t spatial(const ert_tensor *x) {
  size_t s = 1;
  for (int32_t i = 2; i < x->ndim; i++) s *= (size_t)x->shape[i];
  return s;
}

static edgert_status check_count(ert_node *node, ert_err *err, uint32_t i, size_t count) {
  if (node->in[i]->numel != count)
    return ert_fail(err, EDGERT_ERR_SHAPE, "%s: input %u has %zu values, expected %zu",
                    node->name, (unsigned)i, node->in[i]->numel, count);
  return EDGERT_OK;
}

/* ---- batch_norm: inputs X, scale, B, mean, var; params [epsilon] ---- */

edgert_status ert_batch_norm_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 5, 5, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 1)) != EDGERT_OK) return st;
  if ((st = check_nc(node, err, 4)) != EDGERT_OK) return st;
  for (uint32_t i = 1; i < 5; i++)
    if ((st = check_count(node, err, i, (size_t)node->in[0]->shape[1])) != EDGERT_OK) return st;
  return EDGERT_OK;
}

static void bn_run(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const ert_tensor *x = node->in[0];
  size_t c = (size_t)x->shape[1], s = spatial(x);
  const float *scale = (const float *)node->in[1]->data, *bias = (const float *)node->in[2]->data;
  const float *mean = (const float *)node->in[3]->data, *var = (const float *)node->in[4]->data;
  float eps = ert_pf(node, 0);
  for (size_t p = begin; p < end; p++) {
    size_t ch = p % c;
    float a = scale[ch] / sqrtf(var[ch] + eps);
    affine((const float *)x->data + p * s, (float *)node->out[0]->data + p * s, s, mean[ch], a,
           bias[ch]);
  }
}

void ert_batch_norm_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *x = node->in[0];
  run_tasks(ex, (size_t)x->shape[0] * (size_t)x->shape[1], x->numel, bn_run, (void *)node);
}

/* ---- instance_norm: inputs X, scale, B; params [epsilon] ---- */

edgert_status ert_instance_norm_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 3, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 1)) != EDGERT_OK) return st;
  if ((st = check_nc(node, err, 2)) != EDGERT_OK) return st;
  for (uint32_t i = 1; i < 3; i++)
    if ((st = check_count(node, err, i, (size_t)node->in[0]->shape[1])) != EDGERT_OK) return st;
  return EDGERT_OK;
}

static void in_run(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const ert_tensor *x = node->in[0];
  size_t c = (size_t)x->shape[1], s = spatial(x);
  const float *scale = (const float *)node->in[1]->data, *bias = (const float *)node->in[2]->data;
  float eps = ert_pf(node, 0);
  for (size_t p = begin; p < end; p++) {
    const float *xp = (const float *)x->data + p * s;
    float m, inv;
    moments(xp, s, eps, &m, &inv);
    affine(xp, (float *)node->out[0]->data + p * s, s, m, inv * scale[p % c], bias[p % c]);
  }
}

void ert_instance_norm_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *x = node->in[0];
  if (spatial(x) == 0) return;
  run_tasks(ex, (size_t)x->shape[0] * (size_t)x->shape[1], x->numel, in_run, (void *)node);
}

/* ---- layer_norm: inputs X, scale, bias?; outputs Y, Mean?, InvStdDev?;
 *      params [axis, epsilon]; opdata [rows, n] ---- */

edgert_status ert_layer_norm_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 2, 3, 1, 3)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (!ert_is_f32(x, -1) || !ert_is_f32(y, -1) || !ert_is_f32(node->in[1], -1) ||
      (node->n_in > 2 && node->in[2] != NULL && !ert_is_f32(node->in[2], -1)))
    return ert_fail(err, EDGERT_ERR_DTYPE, "%s: tensors must be float32", node->name);
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  int32_t axis = ert_pi(node, 0);
  if (node->n_params != 2 || axis < 0 || axis >= x->ndim)
    return ert_fail(err, EDGERT_ERR_PARAM, "%s: bad parameters (axis %d, rank %d)", node->name,
                    (int)axis, (int)x->ndim);
  size_t rows = 1, n = 1;
  for (int32_t i = 0; i < x->ndim; i++) {
    if (i < axis) rows *= (size_t)x->shape[i];
    else n *= (size_t)x->shape[i];
  }
  if ((st = check_count(node, err, 1, n)) != EDGERT_OK) return st;
  if (node->n_in > 2 && node->in[2] != NULL && (st = check_count(node, err, 2, n)) != EDGERT_OK)
    return st;
  for (uint32_t k = 1; k < node->n_out; k++) {
    const ert_tensor *t = node->out[k];
    if (!ert_is_f32(t, x->ndim))
      return ert_fail(err, EDGERT_ERR_DTYPE, "%s: output %u must be float32 of rank %d",
                      node->name, (unsigned)k, (int)x->ndim);
    for (int32_t i = 0; i < x->ndim; i++)
      if (t->shape[i] != (i < axis ? x->shape[i] : 1))
        return ert_fail(err, EDGERT_ERR_SHAPE, "%s: output %u has a wrong shape", node->name,
                        (unsigned)k);
  }
  memset(node->opdata, 0, sizeof node->opdata);
  node->opdata[0] = (int64_t)rows;
  node->opdata[1] = (int64_t)n;
  return EDGERT_OK;
}

static void ln_run(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  size_t n = (size_t)node->opdata[1];
  float eps = ert_pf(node, 1);
  const float *scale = (const float *)node->in[1]->data;
  const float *bias = node->n_in > 2 && node->in[2] != NULL ? (const float *)node->in[2]->data : NULL;
  float *mean_out = node->n_out > 1 ? (float *)node->out[1]->data : NULL;
  float *inv_out = node->n_out > 2 ? (float *)node->out[2]->data : NULL;
  for (size_t r = begin; r < end; r++) {
    const float *x = (const float *)node->in[0]->data + r * n;
    float *y = (float *)node->out[0]->data + r * n;
    float m, inv;
    moments(x, n, eps, &m, &inv);
    if (x == y)
      ln_apply_inplace(y, scale, bias, n, m, inv);
    else
      ln_apply_to(x, y, scale, bias, n, m, inv);
    if (mean_out != NULL) mean_out[r] = m;
    if (inv_out != NULL) inv_out[r] = inv;
  }
}

void ert_layer_norm_eval(const ert_node *node, ert_exec *ex) {
  if (node->opdata[1] == 0) return;
  run_tasks(ex, (size_t)node->opdata[0], node->in[0]->numel, ln_run, (void *)node);
}

/* ---- group_norm: inputs X, scale, bias; params [num_groups, epsilon, per_group] ---- */

edgert_status ert_group_norm_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 3, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 3)) != EDGERT_OK) return st;
  if ((st = check_nc(node, err, 2)) != EDGERT_OK) return st;
  int32_t groups = ert_pi(node, 0), per_group = ert_pi(node, 2);
  int32_t c = node->in[0]->shape[1];
  if (node->n_params != 3 || groups <= 0 || c % groups != 0 || (per_group != 0 && per_group != 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "%s: bad parameters (%d groups, %d channels)",
                    node->name, (int)groups, (int)c);
  size_t count = per_group ? (size_t)groups : (size_t)c;
  for (uint32_t i = 1; i < 3; i++)
    if ((st = check_count(node, err, i, count)) != EDGERT_OK) return st;
  return EDGERT_OK;
}

static void gn_run(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const ert_tensor *x = node->in[0];
  size_t groups = (size_t)ert_pi(node, 0), cpg = (size_t)x->shape[1] / groups, s = spatial(x);
  bool per_group = ert_pi(node, 2) != 0;
  float eps = ert_pf(node, 1);
  const float *scale = (const float *)node->in[1]->data, *bias = (const float *)node->in[2]->data;
  for (size_t b = begin; b < end; b++) {
    const float *xb = (const float *)x->data + b * cpg * s;
    float *yb = (float *)node->out[0]->data + b * cpg * s;
    float m, inv;
    moments(xb, cpg * s, eps, &m, &inv);
    size_t g = b % groups;
    for (size_t k = 0; k < cpg; k++) {
      size_t i = per_group ? g : g * cpg + k;
      affine(xb + k * s, yb + k * s, s, m, inv * scale[i], bias[i]);
    }
  }
}

void ert_group_norm_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *x = node->in[0];
  if (spatial(x) == 0 || x->shape[1] == 0) return;
  run_tasks(ex, (size_t)x->shape[0] * (size_t)ert_pi(node, 0), x->numel, gn_run, (void *)node);
}

/* ---- lrn: params [size, alpha, beta, bias] ---- */

edgert_status ert_lrn_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 1, 1, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, 4)) != EDGERT_OK) return st;
  if ((st = check_nc(node, err, 0)) != EDGERT_OK) return st;
  if (node->n_params != 4 || ert_pi(node, 0) < 1)
    return ert_fail(err, EDGERT_ERR_PARAM, "%s: size must be >= 1", node->name);
  return EDGERT_OK;
}

static void lrn_run(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const ert_tensor *x = node->in[0];
  int64_t c = x->shape[1], size = ert_pi(node, 0);
  size_t s = spatial(x);
  float alpha = ert_pf(node, 1), beta = ert_pf(node, 2), bias = ert_pf(node, 3);
  float k = alpha / (float)size;
  int64_t lo = (size - 1) / 2, hi = (size - 1) - lo;
  for (size_t p = begin; p < end; p++) {
    int64_t ch = (int64_t)(p % (size_t)c);
    const float *xp = (const float *)x->data + p * s;
    const float *xn = xp - ch * (int64_t)s; /* channel 0 of this batch item */
    float *y = (float *)node->out[0]->data + p * s;
    int64_t a = ch - lo < 0 ? 0 : ch - lo, b = ch + hi >= c ? c - 1 : ch + hi;
    memset(y, 0, s * sizeof(float));
    for (int64_t q = a; q <= b; q++) {
      const float *xq = xn + q * (int64_t)s;
      for (size_t j = 0; j < s; j++) y[j] += xq[j] * xq[j];
    }
    for (size_t j = 0; j < s; j++) y[j] = xp[j] / powf(bias + k * y[j], beta);
  }
}

void ert_lrn_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *x = node->in[0];
  if (spatial(x) == 0) return;
  run_tasks(ex, (size_t)x->shape[0] * (size_t)x->shape[1], x->numel, lrn_run, (void *)node);
}

/* Normalizations keep their input's shape (bounded dimensions). */
ERT_SHAPE_AS(batch_norm, ert_shape_same)
ERT_SHAPE_AS(instance_norm, ert_shape_same)
ERT_SHAPE_AS(layer_norm, ert_shape_same)
ERT_SHAPE_AS(group_norm, ert_shape_same)
ERT_SHAPE_AS(lrn, ert_shape_same)
