/* partition.c: fallback partitions (docs/partitions.md) on the runtime's side: the
 * model's partition queries, and each session's backends (prepare at session creation,
 * release at destroy). The op itself (load-time checks, invoke at run) is the kernel
 * csrc/kernels/ref/partition.c. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

enum { P_BACKEND = 0, P_INDEX = 1 }; /* parameter words (csrc/kernels/ref/partition.c) */

static bool is_partition(const ert_node *n) { return n->op == ERT_OP_PARTITION; }

/* ---- model queries ---------------------------------------------------------------- */

size_t edgert_model_num_partitions(const edgert_model *model) {
  if (model == NULL) return 0;
  size_t count = 0;
  for (uint32_t i = 0; i < model->n_nodes; i++) count += is_partition(&model->nodes[i]);
  return count;
}

/* The node of partition `index` (execution order), or NULL. */
static const ert_node *find(const edgert_model *m, size_t index, uint32_t *node_index) {
  for (uint32_t i = 0; i < m->n_nodes; i++) {
    if (!is_partition(&m->nodes[i])) continue;
    if (index-- == 0) {
      if (node_index != NULL) *node_index = i;
      return &m->nodes[i];
    }
  }
  return NULL;
}

static void fill_partition(const ert_node *n, uint32_t node_index, edgert_partition_info *info) {
  memset(info, 0, sizeof *info);
  const ert_tensor *p = n->in[n->n_in - 1];
  info->node = node_index;
  info->backend = (int32_t)n->params[P_BACKEND];
  info->index = n->params[P_INDEX];
  info->name = n->name;
  info->payload = p->data;
  info->payload_bytes = p->nbytes;
  info->n_inputs = n->n_in - 1;
  info->n_outputs = n->n_out;
}

edgert_status edgert_model_partition_info(const edgert_model *model, size_t index,
                                          edgert_partition_info *info) {
  if (model == NULL || info == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  uint32_t node_index = 0;
  const ert_node *n = find(model, index, &node_index);
  if (n == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  fill_partition(n, node_index, info);
  return EDGERT_OK;
}

edgert_status edgert_model_partition_tensor(const edgert_model *model, size_t index, int is_output, size_t k,
                                            edgert_tensor_info *info) {
  if (model == NULL || info == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  const ert_node *n = find(model, index, NULL);
  if (n == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (is_output) {
    if (k >= n->n_out) return EDGERT_ERR_INVALID_ARGUMENT;
    ert_fill_info(n->out[k], info);
  } else {
    if (k + 1 >= n->n_in) return EDGERT_ERR_INVALID_ARGUMENT;
    ert_fill_info(n->in[k], info);
  }
  return EDGERT_OK;
}

edgert_status edgert_partition_call_tensor(int is_output, size_t k, edgert_tensor_info *info) {
  const ert_node *n = ert_partition_current();
  if (n == NULL || info == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (is_output ? k >= n->n_out : k + 1 >= n->n_in) return EDGERT_ERR_INVALID_ARGUMENT;
  ert_fill_info(is_output ? n->out[k] : n->in[k], info);
  return EDGERT_OK;
}

/* ---- sessions --------------------------------------------------------------------- */

struct ert_partitions {
  size_t count;
  ert_partition_ctx *ctx; /* count entries, then every partition's in and out pointers */
};

void ert_partitions_stop(ert_partitions *ps) {
  if (ps == NULL) return;
  for (size_t k = ps->count; k-- > 0;) {
    ert_partition_ctx *c = &ps->ctx[k];
    if (c->prepared && c->backend->release != NULL) c->backend->release(c->backend->user, c->state);
  }
  ert_free(ps);
}

edgert_status ert_partitions_start(const edgert_model *m, ert_node *nodes,
                                   const edgert_backend *const backends[3], ert_partitions **out, char *msg,
                                   size_t msg_size) {
  *out = NULL;
  size_t count = 0, n_ptrs = 0;
  for (uint32_t i = 0; i < m->n_nodes; i++) {
    const ert_node *n = &m->nodes[i];
    if (!is_partition(n)) continue;
    uint32_t code = n->params[P_BACKEND];
    const edgert_backend *b = backends[code];
    if (b == NULL || b->prepare == NULL || b->invoke == NULL) {
      snprintf(msg, msg_size,
               "node '%s' is fallback partition %u, a %zu-byte %s payload with %u inputs and %u outputs, "
               "and no %s backend was given (edgert_session_options.backends[%u])",
               n->name, (unsigned)n->params[P_INDEX], n->in[n->n_in - 1]->nbytes,
               code == EDGERT_BACKEND_LITERT ? ".tflite" : "ONNX", (unsigned)(n->n_in - 1), (unsigned)n->n_out,
               ert_backend_name(code), (unsigned)code);
      return EDGERT_ERR_NO_BACKEND;
    }
    count++;
    n_ptrs += (size_t)n->n_in - 1 + n->n_out;
  }
  if (count == 0) return EDGERT_OK;

  /* One block: the header, the contexts, then the pointer arrays (all pointer-aligned). */
  ert_partitions *ps = ert_calloc(1, sizeof *ps + count * sizeof(ert_partition_ctx) + n_ptrs * sizeof(void *));
  if (ps == NULL) return EDGERT_ERR_NO_MEMORY;
  ps->ctx = (ert_partition_ctx *)(ps + 1);
  void **ptrs = (void **)(ps->ctx + count);
  for (uint32_t i = 0; i < m->n_nodes; i++) {
    ert_node *n = &nodes[i];
    if (!is_partition(n)) continue;
    ert_partition_ctx *c = &ps->ctx[ps->count++];
    c->backend = backends[n->params[P_BACKEND]];
    c->in = (const void **)ptrs;
    for (uint32_t j = 0; j + 1 < n->n_in; j++) *ptrs++ = n->in[j]->data;
    c->out = ptrs;
    for (uint32_t j = 0; j < n->n_out; j++) *ptrs++ = n->out[j]->data;
    memcpy(&n->opdata[0], &c, sizeof c); /* eval finds its context here */

    edgert_partition_info info;
    fill_partition(&m->nodes[i], i, &info);
    char bmsg[384];
    bmsg[0] = '\0';
    edgert_status st = c->backend->prepare(c->backend->user, m, &info, &c->state, bmsg, sizeof bmsg);
    if (st != EDGERT_OK) {
      bmsg[sizeof bmsg - 1] = '\0';
      snprintf(msg, msg_size, "partition '%s' (%s): %s", n->name, ert_backend_name(n->params[P_BACKEND]),
               bmsg[0] ? bmsg : edgert_status_str(st));
      ert_partitions_stop(ps);
      return st;
    }
    c->prepared = true;
  }
  *out = ps;
  return EDGERT_OK;
}
