/* trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of each matrix
 * formed by the last two dims (row i, column j) and zeroes the rest; every dtype.
 *
 * Parameter words (edgert/converter/ops/misc.py): 0 upper (0 | 1), 1 k.
 */
#include <string.h>

#include "internal.h"

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

edgert_status ert_trilu_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  if (ert_dtype_size(x->dtype) == 0)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (trilu): unknown dtype");
  if (x->ndim < 2)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (trilu): rank %d < 2", (int)x->ndim);
  return EDGERT_OK;
}

void ert_trilu_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (y->numel == 0) return;
  const size_t es = ert_dtype_size(x->dtype);
  const int64_t rows = x->shape[x->ndim - 2], cols = x->shape[x->ndim - 1];
  const int64_t mats = (int64_t)(x->numel / (size_t)(rows * cols));
  const int upper = ert_pi(node, 0) != 0;
  const int64_t k = ert_pi(node, 1);
  for (int64_t m = 0; m < mats; m++)
    for (int64_t i = 0; i < rows; i++) {
      const size_t at = (size_t)((m * rows + i) * cols) * es;
      const char *s = (const char *)x->data + at;
      char *d = (char *)y->data + at;
      /* Kept columns [j0, j1): upper keeps j >= i + k, lower keeps j <= i + k. */
      int64_t j0 = upper ? i + k : 0, j1 = upper ? cols : i + k + 1;
      j0 = j0 < 0 ? 0 : (j0 > cols ? cols : j0);
      j1 = j1 < j0 ? j0 : (j1 > cols ? cols : j1);
      memset(d, 0, (size_t)j0 * es);
      memcpy(d + j0 * (int64_t)es, s + j0 * (int64_t)es, (size_t)(j1 - j0) * es);
      memset(d + j1 * (int64_t)es, 0, (size_t)(cols - j1) * es);
    }
}
