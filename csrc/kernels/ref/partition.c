/* partition.c: the partition op, a subgraph run by an external backend (onnxruntime,
 * LiteRT; docs/partitions.md). The backend is given by the caller in the session
 * options; csrc/src/partition.c prepares it at session creation and leaves this
 * node's binding (ert_partition_ctx) in the session's node copy.
 *
 * Inputs: the boundary inputs, then LAST the payload (a constant uint8 1-D tensor: an
 * ONNX model or a .tflite flatbuffer). Outputs: the boundary outputs (arena tensors).
 * Parameter words: [backend_code (1 onnxruntime, 2 litert), index (the partition
 * number, informative), n_boundary_inputs (= inputs - 1)]. */
#include "exec.h"
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
  edgert_status st = ert_check_params(n, err, P_COUNT);
  if (st == EDGERT_OK) st = ert_check_arity(n, err, 1, 0xFFFFFFFFu, 1, 0xFFFFFFFFu);
  if (st != EDGERT_OK) return st;
  uint32_t code = n->params[P_BACKEND];
  if (code != EDGERT_BACKEND_ONNXRUNTIME && code != EDGERT_BACKEND_LITERT)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, n->name, " (partition): unknown backend code %u",
                         (unsigned)code);
  /* The payload is read in place from the model (the loader checked its bounds and the
   * CRC); outputs are arena tensors, as the loader requires of every node. */
  const ert_tensor *p = n->in[n->n_in - 1];
  bool ok = n->params[P_N_INPUTS] == n->n_in - 1 && p != NULL && p->storage == ERT_STORAGE_CONST &&
            p->dtype == EDGERT_UINT8 && p->ndim == 1 && p->nbytes > 0;
  for (uint32_t k = 0; ok && k + 1 < n->n_in; k++) ok = n->in[k] != NULL && n->in[k] != p;
  if (!ok)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name,
                         " (partition): inputs must be its %u boundary inputs, then the payload "
                         "(a constant uint8 1-D tensor, not empty)", (unsigned)n->params[P_N_INPUTS]);
  return EDGERT_OK;
}

/* Bounded dimensions: the output shapes are the file's, as far as its BOUNDS rules
 * (csrc/src/bounds.c) do not set them from the boundary inputs' actual shapes; the
 * backend gets those shapes during invoke (edgert_partition_call_tensor). */
edgert_status ert_partition_shape(ert_node *n, ert_err *err) {
  (void)n;
  (void)err;
  return EDGERT_OK;
}

static _Thread_local const ert_node *calling;

const ert_node *ert_partition_current(void) { return calling; }

void ert_partition_eval(const ert_node *n, ert_exec *ex) {
  const ert_partition_ctx *c = ert_partition_binding(n);
  char msg[384];
  msg[0] = '\0';
  calling = n;
  edgert_status st = c->backend->invoke(c->backend->user, c->state, (const void *const *)c->in,
                                        (void *const *)c->out, msg, sizeof msg);
  calling = NULL;
  if (st != EDGERT_OK) {
    msg[sizeof msg - 1] = '\0';
    ert_run_fail(ex, EDGERT_ERR_BACKEND, "partition '%s' (%s): %s", n->name, ert_backend_name(n->params[P_BACKEND]),
                 msg[0] ? msg : edgert_status_str(st));
  }
}
