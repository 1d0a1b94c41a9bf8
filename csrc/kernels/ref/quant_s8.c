/* quant_s8.c: prepare checks shared by the int8 kernels (quant_s8.h). */
#include "quant_s8.h"

#include "cpu.h"

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }


/* The floor shift of ert_requant without a branch: v + 2^62 is non-negative (|acc *
 * mult| < 2^62 and the rounding term is at most 2^61), so an unsigned shift floors it;
 * 2^62 >> shift is then taken back off. */
ERT_S8_CLONES void ert_requant_row(const int32_t *acc, size_t n, int32_t mult, int32_t shift,
                                int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  if (ert_cpu.requant_row != NULL) {
    ert_cpu.requant_row(acc, n, mult, shift, zp, lo, hi, y);
    return;
  }
  const uint64_t bias = (uint64_t)1 << 62, rnd = (uint64_t)1 << (shift - 1);
  const int64_t base = (int64_t)(bias >> shift) - zp;
  for (size_t i = 0; i < n; i++) {
    const uint64_t v = (uint64_t)((int64_t)acc[i] * mult) + rnd + bias;
    int64_t r = (int64_t)(v >> shift) - base;
    r = r < lo ? lo : r;
    y[i] = (int8_t)(r > hi ? hi : r);
  }
}

edgert_status ert_check_qp(const ert_node *node, ert_err *err, uint32_t index, int64_t channels,
                           int64_t max_bias, int32_t shift) {
  edgert_status st = ert_check_const(node, err, index);
  if (st != EDGERT_OK) return st;
  const ert_tensor *t = node->in[index];
  if (t->dtype != EDGERT_INT32 || t->ndim != 2 || t->shape[0] != channels || t->shape[1] != 2)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node),
                         ": requantization table (input %u) must be int32 [%lld, 2]", (unsigned)index,
                         (long long)channels);
  if (shift < ERT_Q_SHIFT_MIN || shift > ERT_Q_SHIFT_MAX)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": shift %d outside [1, 62]", (int)shift);
  const int32_t *qp = (const int32_t *)t->data;
  for (int64_t c = 0; c < channels; c++) {
    const int64_t bias = qp[2 * c];
    if (bias > max_bias || bias < -max_bias)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node),
                           ": bias %lld of channel %lld exceeds the accumulator bound %lld", (long long)bias,
                           (long long)c, (long long)max_bias);
    if (qp[2 * c + 1] < 0)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": channel %lld has a negative multiplier",
                           (long long)c);
  }
  return EDGERT_OK;
}

edgert_status ert_check_qrange(const ert_node *node, ert_err *err, int32_t zp, int32_t lo,
                               int32_t hi) {
  if (lo < -128 || hi > 127 || lo > hi || zp < -128 || zp > 127)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node),
                         ": output zero point %d or range [%d, %d] outside int8", (int)zp, (int)lo, (int)hi);
  return EDGERT_OK;
}

edgert_status ert_check_s8(const ert_node *node, ert_err *err, const ert_tensor *t,
                           const char *what) {
  if (t == NULL || t->dtype != EDGERT_INT8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), ": %s must be int8", what);
  return EDGERT_OK;
}
