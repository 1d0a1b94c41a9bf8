/* cumsum: running sums along one axis (float32, int32, int64), optionally exclusive
 * (element k holds the sum of the elements before it) and/or reversed (sums run from
 * the end). Sums accumulate sequentially in the element type; integers wrap around.
 *
 * Parameter words (edgert/converter/ops/misc.py): 0 axis, 1 exclusive, 2 reverse.
 */
#include <string.h>

#include "internal.h"

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

edgert_status ert_cumsum_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 3)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  if (x->dtype != EDGERT_FLOAT32 && x->dtype != EDGERT_INT32 && x->dtype != EDGERT_INT64)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (cumsum): unsupported dtype %s",
                         ert_dtype_name(x->dtype));
  const int32_t axis = ert_pi(node, 0);
  if (axis < 0 || axis >= x->ndim)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (cumsum): axis %d out of range", (int)axis);
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= x->shape[d];
  for (int32_t d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
  node->opdata[0] = outer;
  node->opdata[1] = x->shape[axis];
  node->opdata[2] = inner;
  return EDGERT_OK;
}

/* One (outer, inner) line: n elements at stride s, walked forward or backward. */
#define ERT_CUMSUM(T, ACC_T)                                                  \
  for (int64_t o = 0; o < outer; o++)                                         \
    for (int64_t i = 0; i < inner; i++) {                                     \
      const T *src = (const T *)x->data + o * n * inner + i;                  \
      T *dst = (T *)y->data + o * n * inner + i;                              \
      ACC_T acc = 0;                                                          \
      for (int64_t t = 0; t < n; t++) {                                       \
        const int64_t p = (reverse ? n - 1 - t : t) * inner;                  \
        const ACC_T v = (ACC_T)src[p];                                        \
        if (exclusive) {                                                      \
          dst[p] = (T)acc;                                                    \
          acc += v;                                                           \
        } else {                                                              \
          acc += v;                                                           \
          dst[p] = (T)acc;                                                    \
        }                                                                     \
      }                                                                       \
    }

void ert_cumsum_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int64_t outer = node->opdata[0], n = node->opdata[1], inner = node->opdata[2];
  const int exclusive = ert_pi(node, 1) != 0, reverse = ert_pi(node, 2) != 0;
  if (y->numel == 0) return;
  switch (x->dtype) {
    case EDGERT_FLOAT32: ERT_CUMSUM(float, float) break;
    case EDGERT_INT32: ERT_CUMSUM(int32_t, uint32_t) break;
    default: ERT_CUMSUM(int64_t, uint64_t) break;
  }
}
