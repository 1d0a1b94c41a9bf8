/* reshape: the same bytes under another static shape (Reshape, Flatten, Squeeze,
 * Unsqueeze). In-place: the planner may give the output the input's buffer, and the
 * kernel then has nothing to do. No parameter words. */
#include <string.h>

#include "internal.h"

edgert_status ert_reshape_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  if (x->numel != y->numel || x->nbytes != y->nbytes)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, node->name, " (reshape): input has %zu elements, output %zu",
                         x->numel, y->numel);
  return EDGERT_OK;
}

void ert_reshape_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (x->nbytes > 0 && y->data != x->data) memmove(y->data, x->data, x->nbytes);
}

/* The output shape comes from the file; under bounded dimensions the session sets its
 * varying dims by the file's rules (docs/format.md, BOUNDS) and prepare checks it. */
edgert_status ert_reshape_shape(ert_node *node, ert_err *err) {
  (void)node;
  (void)err;
  return EDGERT_OK;
}
