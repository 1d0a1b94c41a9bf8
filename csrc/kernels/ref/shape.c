/* shape: the dims start..end of the input as int64 data (ONNX Shape). The input's
 * data is never read, only its shape; under bounded dimensions the session's shape
 * pass runs this node when a value-driven shape (range, expand) needs its output
 * (docs/runtime.md, "Shape programs").
 *
 * Parameter words (edgert/converter/ops/shape.py): 0 start, 1 end
 * (0 <= start <= end <= input rank); the output is int64 [end - start].
 */
#include <string.h>

#include "internal.h"

edgert_status ert_shape_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int32_t start = ert_pi(node, 0), end = ert_pi(node, 1);
  if ((st = ert_check_dtype(node, err, y, EDGERT_INT64)) != EDGERT_OK) return st;
  if (node->n_params != 2 || start < 0 || start > end || end > x->ndim || y->ndim != 1 ||
      y->shape[0] != end - start)
    return ert_fail_node(err, EDGERT_ERR_PARAM, node->name,
                         " (shape): dims %d..%d of a rank-%d input do not give output [%d]", (int)start, (int)end,
                         (int)x->ndim, y->ndim == 1 ? (int)y->shape[0] : -1);
  return EDGERT_OK;
}

void ert_shape_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  for (int32_t k = 0; k < y->shape[0]; k++) {
    const int64_t d = x->shape[ert_pi(node, 0) + k];
    memcpy((char *)y->data + 8 * (size_t)k, &d, 8);
  }
}

/* The output's length is the parameters' (the input's rank never changes). */
edgert_status ert_shape_shape(ert_node *node, ert_err *err) {
  (void)node;
  (void)err;
  return EDGERT_OK;
}
