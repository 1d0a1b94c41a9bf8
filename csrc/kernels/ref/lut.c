/* lut.c: int8 -> int8 table lookup, the int8 form of every float unary op
 * (edgert/converter/ops/lut.py). y = table[x + 128]; may run in place. */
#include "cpu.h"
#include "exec.h"
#include "quant_s8.h"

#define LUT_PAR_MIN ((size_t)1 << 16)

edgert_status ert_lut_s8_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 2, 2, 1, 1)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *t = node->in[1], *y = node->out[0];
  if ((st = ert_check_s8(node, err, x, "X")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, y, "Y")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, t, "the table")) != EDGERT_OK)
    return st;
  if ((st = ert_check_const(node, err, 1)) != EDGERT_OK) return st;
  if (t->numel != 256)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, node->name ? node->name : "",
                         ": the table must have 256 entries");
  return ert_check_same_shape(node, err, x, y);
}

static void lut_task(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const int8_t *x = (const int8_t *)node->in[0]->data;
  const int8_t *t = (const int8_t *)node->in[1]->data + 128;
  int8_t *y = (int8_t *)node->out[0]->data;
  if (ert_cpu.lut_s8 != NULL) {
    ert_cpu.lut_s8(t - 128, x + begin, y + begin, end - begin);
    return;
  }
  ERT_IVDEP
  for (size_t i = begin; i < end; i++) y[i] = t[x[i]];
}

void ert_lut_s8__ref(const ert_node *node, ert_exec *ex) {
  const size_t n = node->out[0]->numel;
  if (n >= LUT_PAR_MIN)
    ert_parallel_for(ex, n, lut_task, (void *)node);
  else if (n > 0)
    lut_task((void *)node, 0, n);
}
