/* softmax_s8.c: softmax on int8 through an exp table (edgert/converter/ops/softmax_s8.py).
 * The input is viewed as [outer, n, inner]; lines run along n. May run in place:
 * each output is written after the last read of its input. */
#include "exec.h"
#include "quant_s8.h"

#define E_ONE (1 << 20)

enum { P_AXIS, P_FLATTEN, P_COUNT };
enum { OD_OUTER, OD_N, OD_INNER };

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

edgert_status ert_softmax_s8_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 2, 2, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *e = node->in[1], *y = node->out[0];
  if ((st = ert_check_s8(node, err, x, "X")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, y, "Y")) != EDGERT_OK)
    return st;
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  if ((st = ert_check_const(node, err, 1)) != EDGERT_OK) return st;
  if (e->dtype != EDGERT_INT32 || e->numel != 256)
    return ert_fail(err, EDGERT_ERR_SHAPE, "softmax '%s': E must be int32 [256]", nm(node));
  const int32_t *ev = (const int32_t *)e->data;
  for (int i = 0; i < 256; i++)
    if (ev[i] < 0 || ev[i] > E_ONE || (i == 0 && ev[0] == 0))
      return ert_fail(err, EDGERT_ERR_PARAM, "softmax '%s': E[%d] out of range", nm(node), i);
  const int32_t axis = ert_pi(node, P_AXIS), flatten = ert_pi(node, P_FLATTEN);
  if (x->ndim < 1 || axis < 0 || axis >= x->ndim || (flatten != 0 && flatten != 1))
    return ert_fail(err, EDGERT_ERR_PARAM, "softmax '%s': bad axis or flatten", nm(node));
  int64_t outer = 1, n = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= x->shape[d];
  for (int32_t d = axis; d < x->ndim; d++) {
    if (d == axis || flatten)
      n *= x->shape[d];
    else
      inner *= x->shape[d];
  }
  node->opdata[OD_OUTER] = outer;
  node->opdata[OD_N] = n;
  node->opdata[OD_INNER] = inner;
  return EDGERT_OK;
}

static void line(const int8_t *x, int8_t *y, size_t n, size_t st, const int32_t *e) {
  int32_t m = -128;
  for (size_t j = 0; j < n; j++) m = x[j * st] > m ? x[j * st] : m;
  int64_t s = 0;
  for (size_t j = 0; j < n; j++) s += e[m - x[j * st]];
  for (size_t j = 0; j < n; j++) {
    const int64_t v = -128 + (256 * (int64_t)e[m - x[j * st]] + s / 2) / s;
    y[j * st] = (int8_t)(v > 127 ? 127 : v);
  }
}

static void sm_task(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const size_t n = (size_t)node->opdata[OD_N], inner = (size_t)node->opdata[OD_INNER];
  const int8_t *x = (const int8_t *)node->in[0]->data;
  int8_t *y = (int8_t *)node->out[0]->data;
  const int32_t *e = (const int32_t *)node->in[1]->data;
  for (size_t l = begin; l < end; l++) {
    const size_t base = (l / inner) * n * inner + l % inner;
    line(x + base, y + base, n, inner, e);
  }
}

void ert_softmax_s8__ref(const ert_node *node, ert_exec *ex) {
  const size_t lines = (size_t)node->opdata[OD_OUTER] * (size_t)node->opdata[OD_INNER];
  if (node->out[0]->numel == 0 || lines == 0) return;
  ert_parallel_for(ex, lines, sm_task, (void *)node);
}
