/* spmm.c: constant sparse weights (CSR) times a dense float32 tensor. Parameters and
 * layout: edgert/converter/ops/spmm.py. With X viewed as [N, K, P] and Y as [N, R, P]:
 *   Y[n, r, p] = act(bias[r] + sum over j in row r of values[j] * X[n, cols[j], p]).
 * Only the stored weights are visited, so work scales with the nonzero count. Rows of
 * the result are independent and split across threads. */
#include "exec.h"
#include "sgemm.h" /* ERT_SIMD_CLONES, fp-contract */

enum { P_K, P_P, P_ACT, P_COUNT = P_ACT + 3 };
enum { IN_X, IN_VALUES, IN_COLS, IN_ROWS, IN_BIAS };

edgert_status ert_spmm_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 4, 5, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  ert_act_params act;
  if ((st = ert_act_read(node, P_ACT, &act, err)) != EDGERT_OK) return st;
  for (uint32_t i = IN_VALUES; i < node->n_in; i++)
    if (node->in[i] != NULL && (st = ert_check_const(node, err, i)) != EDGERT_OK) return st;
  if ((st = ert_check_const(node, err, IN_ROWS)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[IN_X], *vals = node->in[IN_VALUES], *cols = node->in[IN_COLS];
  const ert_tensor *rows = node->in[IN_ROWS], *bias = node->n_in > IN_BIAS ? node->in[IN_BIAS] : NULL;
  const ert_tensor *y = node->out[0];
  if (x == NULL || !ert_is_f32(x, -1) || !ert_is_f32(y, -1) || !ert_is_f32(vals, 1) ||
      cols == NULL || cols->dtype != EDGERT_INT32 || cols->ndim != 1 || rows->dtype != EDGERT_INT32 ||
      rows->ndim != 1 || (bias != NULL && !ert_is_f32(bias, 1)))
    return ert_fail(err, EDGERT_ERR_DTYPE,
                    "spmm '%s': X, Y, values and bias must be float32, columns and row offsets int32 "
                    "vectors", node->name);
  const int32_t k = ert_pi(node, P_K), p = ert_pi(node, P_P);
  if (k < 1 || p < 1 || rows->shape[0] < 1)
    return ert_fail(err, EDGERT_ERR_PARAM, "spmm '%s': K = %d, P = %d and the row count must be >= 1",
                    node->name, (int)k, (int)p);
  /* 64-bit arithmetic: K*P and N*R*P may not fit a 32-bit size_t. */
  const uint64_t r = (uint64_t)rows->shape[0] - 1, kp = (uint64_t)k * (uint64_t)p;
  if ((uint64_t)x->numel % kp != 0)
    return ert_fail(err, EDGERT_ERR_SHAPE, "spmm '%s': X has %zu elements, not a multiple of K*P = %llu",
                    node->name, x->numel, (unsigned long long)kp);
  const uint64_t n = (uint64_t)x->numel / kp;
  if (r == 0 || (uint64_t)y->numel / r / (uint64_t)p != n || (uint64_t)y->numel != n * r * (uint64_t)p)
    return ert_fail(err, EDGERT_ERR_SHAPE, "spmm '%s': Y has %zu elements, expected N*R*P = %llu*%llu*%d",
                    node->name, y->numel, (unsigned long long)n, (unsigned long long)r, (int)p);
  if (bias != NULL && (uint64_t)bias->shape[0] != r)
    return ert_fail(err, EDGERT_ERR_SHAPE, "spmm '%s': bias has %d values for %llu rows", node->name,
                    (int)bias->shape[0], (unsigned long long)r);
  /* The CSR structure: offsets start at 0, never decrease, end at the nonzero count;
   * every column index is inside [0, K). */
  const int32_t *ro = rows->data, *co = cols->data;
  const size_t nnz = vals->numel;
  if (cols->numel != nnz || ro[0] != 0 || (size_t)ro[r] != nnz)
    return ert_fail(err, EDGERT_ERR_PARAM,
                    "spmm '%s': %zu values, %zu columns and row offsets ending at %d disagree",
                    node->name, nnz, cols->numel, (int)ro[r]);
  for (size_t i = 0; i < (size_t)r; i++)
    if (ro[i + 1] < ro[i])
      return ert_fail(err, EDGERT_ERR_PARAM, "spmm '%s': row offsets decrease at row %zu", node->name, i);
  for (size_t j = 0; j < nnz; j++)
    if (co[j] < 0 || co[j] >= k)
      return ert_fail(err, EDGERT_ERR_PARAM, "spmm '%s': column index %d at %zu is outside [0, %d)",
                      node->name, (int)co[j], j, (int)k);
  return EDGERT_OK;
}

typedef struct spmm_task {
  const float *x, *vals, *bias;
  const int32_t *cols, *rows;
  float *y;
  size_t r, k, p;
  ert_act_params act;
} spmm_task;

/* Rows [begin, end) of the flattened [N, R] output rows. */
ERT_SIMD_CLONES
static void spmm_rows(void *arg, size_t begin, size_t end) {
  const spmm_task *t = arg;
  const size_t p = t->p;
  for (size_t q = begin; q < end; q++) {
    const size_t n = q / t->r, r = q % t->r;
    const float *x = t->x + n * t->k * p;
    float *y = t->y + q * p;
    const float b = t->bias != NULL ? t->bias[r] : 0.0f;
    int32_t j = t->rows[r];
    const int32_t stop = t->rows[r + 1];
    if (p == 1) {
      float s0 = 0.0f, s1 = 0.0f;
      for (; j + 1 < stop; j += 2) {
        s0 += t->vals[j] * x[t->cols[j]];
        s1 += t->vals[j + 1] * x[t->cols[j + 1]];
      }
      if (j < stop) s0 += t->vals[j] * x[t->cols[j]];
      y[0] = b + (s0 + s1);
    } else {
      for (size_t i = 0; i < p; i++) y[i] = b;
      for (; j + 3 < stop; j += 4) {
        const float w0 = t->vals[j], w1 = t->vals[j + 1], w2 = t->vals[j + 2], w3 = t->vals[j + 3];
        const float *x0 = x + (size_t)t->cols[j] * p, *x1 = x + (size_t)t->cols[j + 1] * p;
        const float *x2 = x + (size_t)t->cols[j + 2] * p, *x3 = x + (size_t)t->cols[j + 3] * p;
        for (size_t i = 0; i < p; i++) y[i] += w0 * x0[i] + w1 * x1[i] + w2 * x2[i] + w3 * x3[i];
      }
      for (; j < stop; j++) {
        const float w = t->vals[j];
        const float *xj = x + (size_t)t->cols[j] * p;
        for (size_t i = 0; i < p; i++) y[i] += w * xj[i];
      }
    }
    ert_act_apply(&t->act, y, p);
  }
}

void ert_spmm_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *rows = node->in[IN_ROWS];
  const ert_tensor *bias = node->n_in > IN_BIAS ? node->in[IN_BIAS] : NULL;
  spmm_task t;
  t.x = node->in[IN_X]->data;
  t.vals = node->in[IN_VALUES]->data;
  t.cols = node->in[IN_COLS]->data;
  t.rows = rows->data;
  t.bias = bias != NULL ? bias->data : NULL;
  t.y = node->out[0]->data;
  t.r = (size_t)rows->shape[0] - 1;
  t.k = (size_t)ert_pi(node, P_K);
  t.p = (size_t)ert_pi(node, P_P);
  t.act.kind = ert_pi(node, P_ACT);
  t.act.a = ert_pf(node, P_ACT + 1);
  t.act.b = ert_pf(node, P_ACT + 2);
  const size_t total = node->out[0]->numel / t.p;
  ert_parallel_for(ex, total, spmm_rows, &t);
}
