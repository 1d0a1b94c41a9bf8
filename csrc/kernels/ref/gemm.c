/* gemm.c: ONNX Gemm, Y = act(alpha * A' B' + beta * C), float32. Parameters:
 * edgert/converter/ops/gemm.py. Y is first set to beta*C (broadcast) when C is present and beta
 * is not 0, then the SGEMM accumulates alpha * A' B' into it. */
#include "sgemm.h"
#include "quant_s8.h"

enum { P_TRANS_A, P_TRANS_B, P_ALPHA, P_BETA, P_ACT, P_COUNT = P_ACT + 3 };

static const ert_tensor *c_input(const ert_node *node) {
  return node->n_in > 2 ? node->in[2] : NULL;
}

edgert_status ert_gemm_prepare(ert_node *node, ert_err *err) {
  if (node->n_in > 0 && node->in[0] != NULL && node->in[0]->dtype == EDGERT_INT8)
    return ert_gemm_s8_prepare(node, err); /* gemm_s8.c */
  edgert_status st;
  if ((st = ert_check_arity(node, err, 2, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  ert_act_params act;
  if ((st = ert_act_read(node, P_ACT, &act, err)) != EDGERT_OK) return st;
  const ert_tensor *a = node->in[0], *b = node->in[1], *c = c_input(node), *y = node->out[0];
  const int32_t ta = ert_pi(node, P_TRANS_A), tb = ert_pi(node, P_TRANS_B);
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "gemm '%s': trans_a and trans_b must be 0 or 1",
                    node->name);
  if (!ert_is_f32(a, 2) || !ert_is_f32(b, 2) || !ert_is_f32(y, 2))
    return ert_fail(err, EDGERT_ERR_DTYPE, "gemm '%s': A, B and Y must be float32 of rank 2",
                    node->name);
  const int32_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
  const int32_t kb = tb ? b->shape[1] : b->shape[0], n = tb ? b->shape[0] : b->shape[1];
  if (k != kb || y->shape[0] != m || y->shape[1] != n)
    return ert_fail(err, EDGERT_ERR_SHAPE, "gemm '%s': shapes of A, B and Y do not match",
                    node->name);
  if (c != NULL) {
    if (!ert_is_f32(c, -1) || c->ndim > 2)
      return ert_fail(err, EDGERT_ERR_DTYPE, "gemm '%s': C must be float32 of rank <= 2",
                      node->name);
    const int32_t cm = c->ndim == 2 ? c->shape[0] : 1;
    const int32_t cn = c->ndim >= 1 ? c->shape[c->ndim - 1] : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n))
      return ert_fail(err, EDGERT_ERR_SHAPE, "gemm '%s': C does not broadcast to [%d, %d]",
                      node->name, (int)m, (int)n);
  }
  const size_t need = ert_sgemm_scratch_bytes(m, n, k, 0);
  if (node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_PARAM, "gemm '%s': needs %zu scratch bytes, has %zu",
                    node->name, need, node->scratch_bytes);
  return EDGERT_OK;
}

typedef struct gemm_ctx {
  const float *a, *b;
  float *y;
} gemm_ctx;

static void locate(const void *ctx, size_t p, const float **a, const float **b, float **c,
                   const float **bias) {
  const gemm_ctx *q = ctx;
  (void)p;
  *a = q->a;
  *b = q->b;
  *c = q->y;
  *bias = NULL;
}

void ert_gemm_eval(const ert_node *node, ert_exec *ex) {
  if (node->in[0]->dtype == EDGERT_INT8) {
    ert_gemm_s8__ref(node, ex);
    return;
  }
  const ert_tensor *a = node->in[0], *b = node->in[1], *c = c_input(node), *y = node->out[0];
  const int ta = ert_pi(node, P_TRANS_A) != 0, tb = ert_pi(node, P_TRANS_B) != 0;
  const float alpha = ert_pf(node, P_ALPHA), beta = ert_pf(node, P_BETA);
  const ert_act_params act = {ert_pi(node, P_ACT), ert_pf(node, P_ACT + 1),
                              ert_pf(node, P_ACT + 2)};
  const int32_t m = y->shape[0], n = y->shape[1];
  const int32_t k = ta ? a->shape[0] : a->shape[1];
  float *yd = y->data;
  int accumulate = 0;
  if (c != NULL && beta != 0.0f) {
    const float *cd = c->data;
    const int32_t cm = c->ndim == 2 ? c->shape[0] : 1;
    const int32_t cn = c->ndim >= 1 ? c->shape[c->ndim - 1] : 1;
    const ptrdiff_t si = cm == 1 ? 0 : cn, sj = cn == 1 ? 0 : 1;
    for (int32_t i = 0; i < m; ++i) {
      float *yi = yd + (size_t)i * n;
      const float *ci = cd + (ptrdiff_t)i * si;
      for (int32_t j = 0; j < n; ++j) yi[j] = beta * ci[(ptrdiff_t)j * sj];
    }
    accumulate = 1;
  }
  gemm_ctx q = {a->data, b->data, yd};
  ert_sgemm s;
  s.bpanels = 0;
#if defined(ERT_X86_KERNELS)
  s.bias_cols = s.rows_first = s.by_rows = 0;
  s.res = NULL;
#endif
  s.m = m;
  s.n = n;
  s.k = k;
  s.rsa = ta ? 1 : k;
  s.csa = ta ? m : 1;
  s.rsb = tb ? 1 : n;
  s.csb = tb ? k : 1;
  s.im2col = NULL;
  s.ldc = n;
  s.alpha = alpha;
  s.accumulate = accumulate;
  s.act = &act;
  s.batch = 1;
  s.locate = locate;
  s.ctx = &q;
  ert_sgemm_run(&s, node->scratch, ex);
}

/* Bounded dimensions: Y is [M, N] of A' B' (the int8 form has the same first words). */
edgert_status ert_gemm_shape(ert_node *node, ert_err *err) {
  (void)err;
  const ert_tensor *a = node->in[0], *b = node->in[1];
  const int32_t ta = ert_pi(node, P_TRANS_A), tb = ert_pi(node, P_TRANS_B);
  int64_t dims[2] = {ta ? a->shape[1] : a->shape[0], tb ? b->shape[0] : b->shape[1]};
  ert_tensor_set_shape(node->out[0], 2, dims);
  return EDGERT_OK;
}
