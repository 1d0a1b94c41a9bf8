/* partition.c: the partition op, a subgraph run by an external backend (onnxruntime,
 * LiteRT; docs/partitions.md). The backend is given by the caller in the session
 * options; csrc/src/partition.c prepares it at session creation and leaves this
 * node's binding (ert_partition_ctx) in the session's node copy.
 *
 * Inputs: the boundary inputs, then LAST the payload (a constant uint8 1-D tensor: an
 * ONNX model or a .tflite flatbuffer). Outputs: the boundary outputs (arena tensors).
 * Parameter words: [backend_code (1 onnxruntime, 2 litert), index (the partition
 * number), n_boundary_inputs (= inputs - 1)]. */
#include <string.h>

#include "internal.h"

enum { P_BACKEND = 0, P_INDEX = 1, P_N_INPUTS = 2, P_COUNT = 3 };

const char *ert_backend_name(uint32_t code) {
  switch (code) {
    case EDGERT_BACKEND_ONNXRUNTIME: return "onnxruntime";
    case EDGERT_BACKEND_LITERT: return "litert";
    default: return "unknown";
  }
}

edgert_status ert_partition_prepare(ert_node *n, ert_err *err) {
  if (n->n_params != P_COUNT)
    return ert_fail(err, EDGERT_ERR_PARAM, "node '%s' (partition): %u parameters, expected 3", n->name,
                    (unsigned)n->n_params);
  uint32_t code = n->params[P_BACKEND];
  if (code != EDGERT_BACKEND_ONNXRUNTIME && code != EDGERT_BACKEND_LITERT)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "node '%s' (partition): backend code %u is unknown to this runtime",
                    n->name, (unsigned)code);
  if (n->params[P_INDEX] > 0x7FFFFFFFu)
    return ert_fail(err, EDGERT_ERR_PARAM, "node '%s' (partition): partition number %u out of range", n->name,
                    (unsigned)n->params[P_INDEX]);
  if (n->n_in < 1 || n->n_out < 1)
    return ert_fail(err, EDGERT_ERR_FORMAT, "node '%s' (partition): needs a payload input and at least one output",
                    n->name);
  if (n->params[P_N_INPUTS] != n->n_in - 1)
    return ert_fail(err, EDGERT_ERR_PARAM,
                    "node '%s' (partition): says %u boundary inputs but has %u inputs besides the payload", n->name,
                    (unsigned)n->params[P_N_INPUTS], (unsigned)(n->n_in - 1));
  const ert_tensor *p = n->in[n->n_in - 1];
  if (p == NULL || p->storage != ERT_STORAGE_CONST || p->dtype != EDGERT_UINT8 || p->ndim != 1 ||
      p->nbytes == 0 || p->data == NULL)
    return ert_fail(err, EDGERT_ERR_FORMAT,
                    "node '%s' (partition): the last input must be the payload, a non-empty constant uint8 1-D tensor",
                    n->name);
  for (uint32_t k = 0; k + 1 < n->n_in; k++) {
    const ert_tensor *t = n->in[k];
    if (t == NULL)
      return ert_fail(err, EDGERT_ERR_FORMAT, "node '%s' (partition): boundary input %u is absent", n->name,
                      (unsigned)k);
    if (t == p)
      return ert_fail(err, EDGERT_ERR_FORMAT, "node '%s' (partition): the payload is also a boundary input",
                      n->name);
  }
  /* Outputs are arena tensors (the loader checks every node's outputs). */
  return EDGERT_OK;
}

void ert_partition_eval(const ert_node *n, ert_exec *ex) {
  const ert_partition_ctx *c = ert_partition_binding(n);
  char msg[384];
  msg[0] = '\0';
  edgert_status st = c->backend->invoke(c->backend->user, c->state, (const void *const *)c->in,
                                        (void *const *)c->out, msg, sizeof msg);
  if (st != EDGERT_OK) {
    msg[sizeof msg - 1] = '\0';
    ert_run_fail(ex, EDGERT_ERR_BACKEND, "partition '%s' (%s): %s", n->name, ert_backend_name(n->params[P_BACKEND]),
                 msg[0] ? msg : edgert_status_str(st));
  }
}
