/* concat and split along one axis, for every dtype (bytes are copied).
 *
 * Both view each tensor as [outer, len * inner] with outer the product of the dims
 * before the axis and inner that of the dims after it, and copy one contiguous run
 * per (outer index, part); concat cuts its output into pieces of 64 KB instead.
 *
 * Parameter words (edgert/converter/ops/shape_ops.py): concat: 0 axis. split: 0 axis,
 * 1 count n (= number of outputs), 2.. sizes.
 */
#include <string.h>

#include "exec.h"
#include "internal.h"
#include "quant_s8.h"

#define PARALLEL_BYTES (1u << 16)

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

/* Checks that `part` matches `whole` in dtype and rank, and off `axis` in every dim. */
static edgert_status check_part(const ert_node *node, ert_err *err, const char *op,
                                const ert_tensor *part, const ert_tensor *whole, int32_t axis) {
  edgert_status st = ert_check_dtype(node, err, part, whole->dtype);
  if (st != EDGERT_OK) return st;
  if (part->ndim != whole->ndim)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (%s): ranks differ", op);
  for (int32_t d = 0; d < whole->ndim; d++)
    if (d != axis && part->shape[d] != whole->shape[d])
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (%s): dim %d differs off axis %d", op, (int)d,
                           (int)axis);
  return EDGERT_OK;
}

/* opdata: [0] outer count, [1] bytes of one axis step (inner * element size). */
static void store_geometry(ert_node *node, const ert_tensor *whole, int32_t axis) {
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= whole->shape[d];
  for (int32_t d = axis + 1; d < whole->ndim; d++) inner *= whole->shape[d];
  node->opdata[0] = outer;
  node->opdata[1] = inner * (int64_t)ert_dtype_size(whole->dtype);
}

/* ---- concat -------------------------------------------------------------- */

/* More than one parameter word: the requantizing int8 form (concat_s8.c). */
edgert_status ert_concat_prepare(ert_node *node, ert_err *err) {
  if (node->n_params > 1) return ert_concat_s8_prepare(node, err);
  edgert_status st = ert_check_arity(node, err, 1, 0xFFFFFFFFu, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 1)) != EDGERT_OK) return st;
  const ert_tensor *y = node->out[0];
  const int32_t axis = ert_pi(node, 0);
  if (ert_dtype_size(y->dtype) == 0)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (concat): unknown dtype");
  if (axis < 0 || axis >= y->ndim)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (concat): axis %d out of range", (int)axis);
  int64_t total = 0;
  for (uint32_t k = 0; k < node->n_in; k++) {
    if (node->in[k] == NULL)
      return ert_fail_node(err, EDGERT_ERR_FORMAT, nm(node), " (concat): input %u is absent", (unsigned)k);
    if ((st = check_part(node, err, "concat", node->in[k], y, axis)) != EDGERT_OK) return st;
    total += node->in[k]->shape[axis];
  }
  if (total != y->shape[axis])
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node),
                         " (concat): inputs add up to %lld along axis, output has %d", (long long)total,
                         (int)y->shape[axis]);
  store_geometry(node, y, axis);
  return EDGERT_OK;
}

/* Output bytes [begin, end) * PARALLEL_BYTES (clamped to the output): each output row
 * (one outer index) is the inputs' runs in turn, and a range copies the parts of the
 * runs it covers, so that a single row (batch 1 along the channels) still splits. */
static void concat_task(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const int32_t axis = ert_pi(node, 0);
  const size_t step = (size_t)node->opdata[1];
  const size_t row = (size_t)node->out[0]->shape[axis] * step, total = node->out[0]->nbytes;
  char *dst = (char *)node->out[0]->data;
  size_t at = begin * PARALLEL_BYTES, stop = end * PARALLEL_BYTES;
  if (stop > total) stop = total;
  while (at < stop) {
    const size_t o = at / row;
    size_t off = at % row, k = 0, n = 0;
    for (; k < node->n_in; k++, off -= n) /* the run that holds offset off */
      if (off < (n = (size_t)node->in[k]->shape[axis] * step)) break;
    const size_t len = n - off < stop - at ? n - off : stop - at;
    memcpy(dst + at, (const char *)node->in[k]->data + o * n + off, len);
    at += len;
  }
}

void ert_concat_eval(const ert_node *node, ert_exec *ex) {
  if (node->n_params > 1) {
    ert_concat_s8__ref(node, ex);
    return;
  }
  const size_t bytes = node->out[0]->nbytes;
  if (bytes == 0) return;
  ert_parallel_for(ex, (bytes + PARALLEL_BYTES - 1) / PARALLEL_BYTES, concat_task, (void *)node);
}

/* ---- split --------------------------------------------------------------- */

edgert_status ert_split_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 0xFFFFFFFFu);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0];
  const int32_t axis = ert_pi(node, 0), n = ert_pi(node, 1);
  if (ert_dtype_size(x->dtype) == 0)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (split): unknown dtype");
  if (axis < 0 || axis >= x->ndim)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (split): axis %d out of range", (int)axis);
  if (n < 1 || (uint32_t)n != node->n_out || node->n_params != 2u + (uint32_t)n)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (split): %d parts for %u outputs", (int)n,
                         (unsigned)node->n_out);
  int64_t total = 0;
  for (uint32_t k = 0; k < node->n_out; k++) {
    if ((st = check_part(node, err, "split", node->out[k], x, axis)) != EDGERT_OK) return st;
    if (node->out[k]->shape[axis] != ert_pi(node, 2 + k))
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (split): output %u does not match its size",
                           (unsigned)k);
    total += node->out[k]->shape[axis];
  }
  if (total != x->shape[axis])
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (split): sizes add up to %lld, input has %d",
                         (long long)total, (int)x->shape[axis]);
  store_geometry(node, x, axis);
  return EDGERT_OK;
}

static void split_task(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const int32_t axis = ert_pi(node, 0);
  const size_t step = (size_t)node->opdata[1];
  const size_t row = (size_t)node->in[0]->shape[axis] * step;
  const char *src = (const char *)node->in[0]->data;
  for (size_t o = begin; o < end; o++) {
    const char *s = src + o * row;
    for (uint32_t k = 0; k < node->n_out; k++) {
      const size_t n = (size_t)node->out[k]->shape[axis] * step;
      if (n) memcpy((char *)node->out[k]->data + o * n, s, n);
      s += n;
    }
  }
}

void ert_split_eval(const ert_node *node, ert_exec *ex) {
  const size_t outer = (size_t)node->opdata[0];
  if (node->in[0]->nbytes == 0) return;
  if (node->in[0]->nbytes < PARALLEL_BYTES || outer < 2)
    split_task((void *)node, 0, outer);
  else
    ert_parallel_for(ex, outer, split_task, (void *)node);
}

/* Bounded dimensions: the output is input 0's shape with the axis summed. */
edgert_status ert_concat_shape(ert_node *node, ert_err *err) {
  ert_tensor *y = node->out[0];
  const int32_t axis = ert_pi(node, 0); /* a hostile file's rules may rewrite it */
  if (axis < 0 || axis >= y->ndim)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (concat): axis %d out of range", (int)axis);
  int64_t dims[EDGERT_MAX_DIMS];
  for (int32_t d = 0; d < y->ndim; d++) dims[d] = node->in[0]->shape[d];
  int64_t total = 0;
  for (uint32_t k = 0; k < node->n_in; k++) total += node->in[k]->shape[axis];
  dims[axis] = total;
  ert_tensor_set_shape(y, y->ndim, dims);
  return EDGERT_OK;
}

/* Output k is the input's shape with the axis at its size (parameter word 2 + k, which
 * the file's rules rewrite when it follows a size). */
edgert_status ert_split_shape(ert_node *node, ert_err *err) {
  const ert_tensor *x = node->in[0];
  const int32_t axis = ert_pi(node, 0); /* a hostile file's rules may rewrite it */
  if (axis < 0 || axis >= x->ndim)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (split): axis %d out of range", (int)axis);
  int64_t dims[EDGERT_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) dims[d] = x->shape[d];
  for (uint32_t k = 0; k < node->n_out; k++) {
    dims[axis] = ert_pi(node, 2 + k);
    ert_tensor_set_shape(node->out[k], x->ndim, dims);
  }
  return EDGERT_OK;
}
