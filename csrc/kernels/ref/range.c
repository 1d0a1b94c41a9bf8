/* range: start, limit, delta (one value each, of one dtype: float32, int32 or int64)
 * -> the 1-D sequence start, start + delta, ... short of limit (ONNX Range). Its length
 * is max(ceil((limit - start) / delta), 0), with limit - start taken in the dtype and
 * the division in double for float32 (as onnxruntime computes it); each value is the
 * previous one plus delta in the dtype, as the loop of the ONNX definition accumulates.
 *
 * The length follows the operands' values. Under bounded dimensions the session's
 * shape pass runs the nodes that compute them (docs/runtime.md, "Shape programs"),
 * then this shape function reads them; eval checks that the operands still give the
 * output's length and otherwise stops the run (EDGERT_ERR_SHAPE), so a length that
 * does not follow its operands is an error, never a wrong sequence. No parameter words.
 */
#include <math.h>
#include <string.h>

#include "exec.h"
#include "internal.h"

static int64_t int_value(const ert_tensor *t) {
  if (t->dtype == EDGERT_INT32) {
    int32_t v;
    memcpy(&v, t->data, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, t->data, 8);
  return v;
}

static float float_value(const ert_tensor *t) {
  float v;
  memcpy(&v, t->data, 4);
  return v;
}

/* The length the operands give, or -1 when delta is 0, the length is not a number or
 * it is above INT32_MAX. */
static int64_t range_length(const ert_node *node) {
  ert_tensor *const *in = node->in;
  if (in[0]->dtype == EDGERT_FLOAT32) {
    const float start = float_value(in[0]), delta = float_value(in[2]);
    const double q = (double)(float_value(in[1]) - start) / (double)delta;
    if (delta == 0.0f || q != q || q > (double)INT32_MAX) return -1;
    return q <= 0.0 ? 0 : (int64_t)ceil(q);
  }
  const int64_t start = int_value(in[0]), limit = int_value(in[1]), delta = int_value(in[2]);
  if (delta == 0) return -1;
  if (delta > 0 ? limit <= start : limit >= start) return 0;
  /* |limit - start| and |delta| in unsigned arithmetic: no overflow at the extremes */
  const uint64_t span = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
  const uint64_t step = delta > 0 ? (uint64_t)delta : 0 - (uint64_t)delta;
  const uint64_t n = span / step + (span % step != 0);
  return n > (uint64_t)INT32_MAX ? -1 : (int64_t)n;
}

edgert_status ert_range_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 3, 3, 1, 1);
  if (st != EDGERT_OK) return st;
  const int32_t dt = node->in[0]->dtype;
  if (dt != EDGERT_FLOAT32 && dt != EDGERT_INT32 && dt != EDGERT_INT64)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, node->name, " (range): operands must be float32, int32 or int64");
  bool known = true;
  for (uint32_t k = 0; k < 3; k++) {
    const ert_tensor *t = node->in[k];
    if ((st = ert_check_dtype(node, err, t, dt)) != EDGERT_OK) return st;
    if (t->numel != 1)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, node->name, " (range): operand %u holds %zu values, not one",
                           (unsigned)k, t->numel);
    known = known && t->data != NULL;
  }
  const ert_tensor *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, dt)) != EDGERT_OK) return st;
  if (y->ndim != 1)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, node->name, " (range): the output has %d dims, not 1", (int)y->ndim);
  const int64_t n = known ? range_length(node) : y->shape[0];
  if (n != y->shape[0])
    return ert_fail_node(err, EDGERT_ERR_PARAM, node->name,
                         " (range): its operands give %lld values (-1: delta 0 or too many), the output holds %d",
                         (long long)n, (int)y->shape[0]);
  return EDGERT_OK;
}

void ert_range_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *y = node->out[0];
  const int64_t n = range_length(node);
  if (n != (int64_t)y->numel) {
    ert_run_fail(ex, EDGERT_ERR_SHAPE, "node '%s' (range): its operands give %lld values, the output holds %zu",
                 node->name, (long long)n, y->numel);
    return;
  }
  if (y->dtype == EDGERT_FLOAT32) {
    float v = float_value(node->in[0]);
    const float delta = float_value(node->in[2]);
    for (int64_t i = 0; i < n; i++, v += delta) memcpy((char *)y->data + 4 * (size_t)i, &v, 4);
    return;
  }
  /* wrapping unsigned steps: every value lies between start and limit, so none wraps */
  uint64_t v = (uint64_t)int_value(node->in[0]);
  const uint64_t delta = (uint64_t)int_value(node->in[2]);
  for (int64_t i = 0; i < n; i++, v += delta) {
    if (y->dtype == EDGERT_INT32) {
      const int32_t w = (int32_t)(uint32_t)v;
      memcpy((char *)y->data + 4 * (size_t)i, &w, 4);
    } else {
      memcpy((char *)y->data + 8 * (size_t)i, &v, 8);
    }
  }
}

/* The length from the operands' values; at load (arena operands without data yet) the
 * file's length stays, and the shape pass computes it. */
edgert_status ert_range_shape(ert_node *node, ert_err *err) {
  for (uint32_t k = 0; k < 3; k++)
    if (node->in[k]->data == NULL) return EDGERT_OK;
  const int64_t n = range_length(node);
  if (n < 0)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, node->name,
                         " (range): delta is 0 or the length is not below 2^31");
  ert_tensor_set_shape(node->out[0], 1, &n);
  return EDGERT_OK;
}
