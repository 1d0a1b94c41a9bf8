/* concat_s8.c: concat of int8 tensors, requantizing the inputs whose quantization
 * differs from the output's. Parameters and meaning: edgert/converter/ops/concat_s8.py. */
#include <string.h>

#include "quant_s8.h"

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

edgert_status ert_concat_s8_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 0xFFFFFFFFu, 1, 1);
  if (st != EDGERT_OK) return st;
  if (node->n_in > (0xFFFFFFFFu - 2) / 3 || node->n_params != 2 + 3 * node->n_in)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": %u parameter words for %u inputs",
                         (unsigned)node->n_params, (unsigned)node->n_in);
  const ert_tensor *y = node->out[0];
  const int32_t axis = ert_pi(node, 0);
  if ((st = ert_check_s8(node, err, y, "the output")) != EDGERT_OK) return st;
  if (axis < 0 || axis >= y->ndim)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": axis %d out of range", (int)axis);
  int64_t total = 0;
  for (uint32_t k = 0; k < node->n_in; k++) {
    const ert_tensor *x = node->in[k];
    if ((st = ert_check_s8(node, err, x, "every input")) != EDGERT_OK) return st;
    if (x->ndim != y->ndim)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), ": ranks differ");
    for (int32_t d = 0; d < y->ndim; d++)
      if (d != axis && x->shape[d] != y->shape[d])
        return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), ": dim %d differs off the axis", (int)d);
    total += x->shape[axis];
    const int32_t zp = ert_pi(node, 1 + 3 * k), mult = ert_pi(node, 2 + 3 * k);
    const int32_t shift = ert_pi(node, 3 + 3 * k);
    if (zp < -128 || zp > 127 || (shift != 0 && !ert_q_valid(mult, shift)))
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": bad requantization of input %u", (unsigned)k);
  }
  const int32_t yzp = ert_pi(node, 1 + 3 * node->n_in);
  if ((st = ert_check_qrange(node, err, yzp, -128, 127)) != EDGERT_OK) return st;
  if (total != y->shape[axis])
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), ": inputs do not add up to the output");
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= y->shape[d];
  for (int32_t d = axis + 1; d < y->ndim; d++) inner *= y->shape[d];
  node->opdata[0] = outer;
  node->opdata[1] = inner;
  return EDGERT_OK;
}

void ert_concat_s8__ref(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const int32_t axis = ert_pi(node, 0), yzp = ert_pi(node, 1 + 3 * node->n_in);
  const size_t outer = (size_t)node->opdata[0], inner = (size_t)node->opdata[1];
  const size_t row = (size_t)node->out[0]->shape[axis] * inner;
  int8_t *dst = (int8_t *)node->out[0]->data;
  for (size_t o = 0; o < outer; o++) {
    int8_t *d = dst + o * row;
    for (uint32_t k = 0; k < node->n_in; k++) {
      const size_t n = (size_t)node->in[k]->shape[axis] * inner;
      const int8_t *s = (const int8_t *)node->in[k]->data + o * n;
      const int32_t zp = ert_pi(node, 1 + 3 * k), mult = ert_pi(node, 2 + 3 * k);
      const int32_t shift = ert_pi(node, 3 + 3 * k);
      if (shift == 0) {
        if (n) memcpy(d, s, n);
      } else {
        for (size_t i = 0; i < n; i++)
          d[i] = ert_clamp_s8(yzp + ert_requant((int64_t)s[i] - zp, mult, shift), -128, 127);
      }
      d += n;
    }
  }
}
