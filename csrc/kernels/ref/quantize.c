/* quantize.c: quantize_linear (float32 -> int8/uint8) and dequantize_linear
 * (int8/uint8/int32 -> float32), per tensor or along one axis.
 *
 * Parameter words (edgert/converter/ops/quantize.py): axis (-1 per tensor), count, count scales
 * (float), count zero points (int). An element's channel is its index along axis.
 */
#include <math.h>

#include "cpu.h"
#include "exec.h"
#include "internal.h"

#define Q_PAR_MIN ((size_t)1 << 15)

enum { OD_INNER = 0, OD_COUNT = 1 };

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

/* Checks the parameter words against x (the quantized side has dtype qtype). */
static edgert_status check_qparams(ert_node *node, ert_err *err, const ert_tensor *x,
                                   int32_t qtype) {
  edgert_status st = ert_check_params(node, err, 2);
  if (st != EDGERT_OK) return st;
  const int32_t axis = ert_pi(node, 0), count = ert_pi(node, 1);
  if (count < 1 || (uint32_t)count > (node->n_params - 2) / 2 ||
      node->n_params != 2 + 2 * (uint32_t)count)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": %u parameter words for %d channels",
                         (unsigned)node->n_params, (int)count);
  if (axis < -1 || axis >= x->ndim || (axis == -1 && count != 1) ||
      (axis >= 0 && x->shape[axis] != count))
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": axis %d does not fit %d channels", (int)axis,
                         (int)count);
  int64_t lo = -128, hi = 127;
  if (qtype == EDGERT_UINT8) lo = 0, hi = 255;
  if (qtype == EDGERT_INT32) lo = INT32_MIN, hi = INT32_MAX;
  for (int32_t c = 0; c < count; c++) {
    const float s = ert_pf(node, 2 + (uint32_t)c);
    const int32_t z = ert_pi(node, 2 + (uint32_t)count + (uint32_t)c);
    if (!(s > 0.0f) || !isfinite(s))
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": scale %d must be finite and > 0", (int)c);
    if (z < lo || z > hi)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": zero point %d out of range", (int)z);
  }
  int64_t inner = 1;
  for (int32_t d = axis + 1; d < x->ndim && axis >= 0; d++) inner *= x->shape[d];
  node->opdata[OD_INNER] = axis >= 0 ? inner : (int64_t)x->numel + 1;
  node->opdata[OD_COUNT] = count;
  return EDGERT_OK;
}

typedef struct q_job {
  const ert_node *node;
  size_t inner, count;
} q_job;

static inline size_t channel_of(const q_job *j, size_t i) {
  return j->count == 1 ? 0 : (i / j->inner) % j->count;
}

/* x / s rounded half to even, plus z, clamped to [qmin, qmax]; NaN gives z. The
 * quotient is first clamped to +-2^22, where adding and subtracting 1.5 * 2^23 rounds
 * it to an integer (half to even, in the default rounding mode, which the library
 * never changes); the clamp does not change the saturated result. */
static inline float quantize_one(float x, float s, float z, float qmin, float qmax) {
  float v = x / s;
  v = v > 4194304.0f ? 4194304.0f : (v < -4194304.0f ? -4194304.0f : v);
  v = (v + 12582912.0f) - 12582912.0f;
  v = v == v ? v + z : z;
  return v < qmin ? qmin : (v > qmax ? qmax : v);
}

/* ---- quantize_linear ------------------------------------------------------- */

edgert_status ert_quantize_linear_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, x, EDGERT_FLOAT32)) != EDGERT_OK) return st;
  if (y->dtype != EDGERT_INT8 && y->dtype != EDGERT_UINT8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), ": output must be int8 or uint8");
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  return check_qparams(node, err, x, y->dtype);
}

static void quantize_task(void *arg, size_t begin, size_t end) {
  const q_job *j = (const q_job *)arg;
  const ert_node *node = j->node;
  const float *x = (const float *)node->in[0]->data;
  const int u8 = node->out[0]->dtype == EDGERT_UINT8;
  const float qmin = u8 ? 0.0f : -128.0f, qmax = u8 ? 255.0f : 127.0f;
  const uint32_t count = (uint32_t)j->count;
  if (count == 1 && !u8) { /* per tensor, int8: a loop compilers vectorize */
    const float s = ert_pf(node, 2), z = (float)ert_pi(node, 3);
    int8_t *y = (int8_t *)node->out[0]->data;
    if (ert_cpu.quantize_s8 != NULL) {
      ert_cpu.quantize_s8(x + begin, y + begin, end - begin, s, z);
      return;
    }
    for (size_t i = begin; i < end; i++)
      y[i] = (int8_t)(int32_t)quantize_one(x[i], s, z, qmin, qmax);
    return;
  }
  for (size_t i = begin; i < end; i++) {
    const uint32_t c = (uint32_t)channel_of(j, i);
    const float v = quantize_one(x[i], ert_pf(node, 2 + c), (float)ert_pi(node, 2 + count + c),
                                 qmin, qmax);
    if (u8)
      ((uint8_t *)node->out[0]->data)[i] = (uint8_t)(int32_t)v;
    else
      ((int8_t *)node->out[0]->data)[i] = (int8_t)(int32_t)v;
  }
}

void ert_quantize_linear_eval(const ert_node *node, ert_exec *ex) {
  q_job j = {node, (size_t)node->opdata[OD_INNER], (size_t)node->opdata[OD_COUNT]};
  const size_t n = node->out[0]->numel;
  if (n >= Q_PAR_MIN)
    ert_parallel_for(ex, n, quantize_task, &j);
  else if (n > 0)
    quantize_task(&j, 0, n);
}

/* ---- dequantize_linear ----------------------------------------------------- */

edgert_status ert_dequantize_linear_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (x->dtype != EDGERT_INT8 && x->dtype != EDGERT_UINT8 && x->dtype != EDGERT_INT32)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), ": input must be int8, uint8 or int32");
  if ((st = ert_check_dtype(node, err, y, EDGERT_FLOAT32)) != EDGERT_OK) return st;
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  return check_qparams(node, err, x, x->dtype);
}

static void dequantize_task(void *arg, size_t begin, size_t end) {
  const q_job *j = (const q_job *)arg;
  const ert_node *node = j->node;
  const ert_tensor *x = node->in[0];
  float *y = (float *)node->out[0]->data;
  const uint32_t count = (uint32_t)j->count;
  if (count == 1 && x->dtype == EDGERT_INT8 && ert_cpu.dequantize_s8 != NULL) {
    ert_cpu.dequantize_s8((const int8_t *)x->data + begin, y + begin, end - begin,
                          ert_pf(node, 2), (float)ert_pi(node, 3));
    return;
  }
  for (size_t i = begin; i < end; i++) {
    const uint32_t c = (uint32_t)channel_of(j, i);
    const float s = ert_pf(node, 2 + c);
    const float z = (float)ert_pi(node, 2 + count + c);
    float v;
    switch (x->dtype) {
      case EDGERT_INT8: v = (float)((const int8_t *)x->data)[i]; break;
      case EDGERT_UINT8: v = (float)((const uint8_t *)x->data)[i]; break;
      default: v = (float)((const int32_t *)x->data)[i]; break;
    }
    y[i] = (v - z) * s;
  }
}

void ert_dequantize_linear_eval(const ert_node *node, ert_exec *ex) {
  q_job j = {node, (size_t)node->opdata[OD_INNER], (size_t)node->opdata[OD_COUNT]};
  const size_t n = node->out[0]->numel;
  if (n >= Q_PAR_MIN)
    ert_parallel_for(ex, n, dequantize_task, &j);
  else if (n > 0)
    dequantize_task(&j, 0, n);
}

ERT_SHAPE_AS(quantize_linear, ert_shape_same)
ERT_SHAPE_AS(dequantize_linear, ert_shape_same)
