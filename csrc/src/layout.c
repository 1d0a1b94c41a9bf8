/* layout.c: which of a session's tensors are stored NHWC (x86-64 with the AVX-512
 * kernels; elsewhere every tensor stays NCHW and this file is empty).
 *
 * Why: when two threads split an NCHW layer's pixels in half, the cut falls inside a
 * cache line of every plane unless half a plane is whole lines (height x width a
 * multiple of 32), and the lines at every plane's cut (and, for planes of 14x14 or 7x7,
 * at its ends) are written by one core and read by the other (docs/host.md, "NHWC
 * between the pointwise layers"). In NHWC a thread's pixels are one contiguous range for
 * all channels.
 *
 * Which: a 4-D float32 arena tensor of batch 1 whose half planes are not whole cache
 * lines (height x width at least 2 and not a multiple of 32: MobileNetV2's 28x28, 14x14
 * and 7x7 maps, not its 56x56 and 112x112 ones), that is not a graph input or
 * output, and whose producer and consumers all take it in NHWC: a pointwise conv2d
 * (either side; NCHW in and NHWC out only with the scratch that needs), a depthwise 3x3
 * conv2d (both sides NHWC or both NCHW), an elementwise unary op, an elementwise
 * binary op whose inputs all have the output's shape (all NHWC or all NCHW), or a
 * global pool (input). Tensors
 * are dropped until every node's rule holds. The plan's offsets and sizes are unchanged:
 * NHWC is another order of the same bytes. EDGERT_LAYOUT=nchw (read at session
 * creation) keeps every tensor NCHW. */
#include <stdlib.h>

#include "cpu.h"
#include "runtime.h"

#if defined(ERT_X86_KERNELS)

/* codes in edgert_ops.def */
enum { OP_CONV2D = 1, OP_GLOBAL_AVG_POOL = 12, OP_GLOBAL_MAX_POOL = 13, OP_ADD = 100 };

/* relu .. clip and copy: elementwise unary ops */
static int unary_op(int32_t op) { return (op >= 40 && op <= 76) || op == 82; }
/* add .. mod: elementwise binary ops (when no input broadcasts) */
static int binary_op(int32_t op) { return op >= 100 && op <= 107; }
/* global pools: any input layout (their output has one pixel) */
static int gpool_op(int32_t op) { return op == OP_GLOBAL_AVG_POOL || op == OP_GLOBAL_MAX_POOL; }

static int candidate(const ert_tensor *t) {
  if (t->storage != ERT_STORAGE_ARENA || t->dtype != EDGERT_FLOAT32 || t->ndim != 4 ||
      t->shape[0] != 1)
    return 0;
  const int64_t px = (int64_t)t->shape[2] * t->shape[3];
  return px >= 2 && px % 32 != 0;
}

static int same_shape(const ert_tensor *a, const ert_tensor *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0;
}

/* Drops tensor t (index into nhwc) from NHWC; returns whether it was there. */
static int drop(uint8_t *nhwc, const ert_tensor *base, const ert_tensor *t) {
  if (t == NULL || t < base) return 0;
  const size_t i = (size_t)(t - base);
  if (!nhwc[i]) return 0;
  nhwc[i] = 0;
  return 1;
}

/* One node's rule; returns whether it dropped a tensor. kinds: ert_conv2d_nhwc_kind. */
static int enforce(const ert_node *n, int kind, uint8_t *nhwc, const ert_tensor *base) {
#define L(t) ((t) != NULL && nhwc[(t) - base])
  int changed = 0;
  if (n->op == OP_CONV2D && kind != 0) {
    const ert_tensor *x = n->in[0], *y = n->out[0];
    if (kind == ERT_NHWC_DEPTHWISE && L(x) != L(y)) changed |= drop(nhwc, base, x) | drop(nhwc, base, y);
    if (kind == ERT_NHWC_POINTWISE_IN && L(y) && !L(x)) changed |= drop(nhwc, base, y);
    return changed;
  }
  if (gpool_op(n->op)) return 0;
  int ok = unary_op(n->op) || binary_op(n->op), any = 0, all = 1;
  for (uint32_t i = 0; i < n->n_in && ok; ++i)
    ok = n->in[i] != NULL && n->in[i]->storage == ERT_STORAGE_ARENA && same_shape(n->in[i], n->out[0]);
  for (uint32_t i = 0; i < n->n_in; ++i) any |= L(n->in[i]), all &= L(n->in[i]);
  for (uint32_t i = 0; i < n->n_out; ++i) any |= L(n->out[i]), all &= L(n->out[i]);
  if (any && (!ok || !all)) {
    for (uint32_t i = 0; i < n->n_in; ++i) changed |= drop(nhwc, base, n->in[i]);
    for (uint32_t i = 0; i < n->n_out; ++i) changed |= drop(nhwc, base, n->out[i]);
  }
  return changed;
#undef L
}

/* An NHWC Add right after the pointwise layer that computes one of its inputs (and
 * nothing else reads): the layer adds the other input in its stores and writes the
 * Add's output, the Add is skipped. Neither may have an activation. Safe when the Add's
 * output is not among the bytes the layer reads (its input, its scratch): any other
 * tensor live while the layer runs is live at the Add too, so the plan keeps it apart,
 * and the residual is either apart or the very same bytes (each element read before the
 * same thread writes it). */
/* True when t is one of the model's state tensors, whose buffers a session swaps after
 * each run (session.c): nothing may keep their data pointers. */
static int is_state(const edgert_model *m, const ert_tensor *tensors, const ert_tensor *t) {
  for (uint32_t k = 0; k < m->n_states; ++k)
    if (t == &tensors[m->states[k].in] || t == &tensors[m->states[k].out]) return 1;
  return 0;
}

static void fuse_residuals(const edgert_model *m, ert_tensor *tensors, ert_node *nodes,
                           const int *kinds) {
  for (uint32_t i = 1; i < m->n_nodes; ++i) {
    ert_node *add = &nodes[i], *pw = &nodes[i - 1];
    if (add->op != OP_ADD || !(add->layout & ERT_LAYOUT_OUT_NHWC) || add->n_in != 2 ||
        (add->n_params > 0 && ert_pi(add, 0) != ERT_ACT_NONE))
      continue;
    if (kinds[i - 1] != ERT_NHWC_POINTWISE && kinds[i - 1] != ERT_NHWC_POINTWISE_IN) continue;
    if (!(pw->layout & ERT_LAYOUT_OUT_NHWC) || ert_conv2d_has_act(pw)) continue;
    const ert_tensor *p = pw->out[0], *y = add->out[0];
    const ert_tensor *r = add->in[0] == p ? add->in[1] : add->in[1] == p ? add->in[0] : NULL;
    if (r == NULL || r == p || is_state(m, tensors, r) || is_state(m, tensors, y) || is_state(m, tensors, p))
      continue;
    int other_readers = 0;
    for (uint32_t o = 0; o < m->n_outputs; ++o) other_readers |= &tensors[m->outputs[o]] == p;
    for (uint32_t k = 0; k < m->n_nodes && !other_readers; ++k)
      for (uint32_t q = 0; q < nodes[k].n_in; ++q)
        other_readers |= k != i && nodes[k].in[q] == p;
    if (other_readers) continue;
    const ert_tensor *x = pw->in[0];
    /* plan offsets (a constant x is never written, whatever its offset says) */
    if (ert_ranges_overlap(y->offset, y->nbytes, x->offset, x->nbytes) ||
        ert_ranges_overlap(y->offset, y->nbytes, pw->scratch_offset, pw->scratch_bytes) ||
        (ert_ranges_overlap(y->offset, y->nbytes, r->offset, r->nbytes) && y->offset != r->offset))
      continue;
    pw->layout |= ERT_LAYOUT_RESIDUAL;
    pw->res = r->data;
    pw->res_y = y->data;
    add->layout |= ERT_LAYOUT_SKIP;
  }
}

/* An NCHW pointwise layer whose output only an NCHW 3x3 depthwise layer reads: at two
 * threads the SGEMM would give each thread half of every plane's pixels and the
 * depthwise layer each thread half of the planes, so half of what a core reads the
 * other core wrote (a round trip per line: MobileNetV2's 112x112 to 28x28 expansions,
 * 2.4 MB each). With ERT_LAYOUT_PLANES the layer's row parts (output planes) go to the
 * threads as the depthwise layer's planes do (ert_sgemm.by_rows). */
static void planes_for_depthwise(const edgert_model *m, ert_tensor *tensors, ert_node *nodes,
                                 const int *kinds) {
  for (uint32_t i = 0; i < m->n_nodes; ++i) {
    ert_node *pw = &nodes[i];
    if ((kinds[i] != ERT_NHWC_POINTWISE && kinds[i] != ERT_NHWC_POINTWISE_IN) || pw->layout) continue;
    const ert_tensor *y = pw->out[0];
    int readers = 0, depthwise = 0;
    for (uint32_t o = 0; o < m->n_outputs; ++o) readers += &tensors[m->outputs[o]] == y;
    for (uint32_t k = 0; k < m->n_nodes; ++k)
      for (uint32_t q = 0; q < nodes[k].n_in; ++q)
        if (nodes[k].in[q] == y) {
          ++readers;
          depthwise = kinds[k] == ERT_NHWC_DEPTHWISE && nodes[k].layout == 0 && q == 0;
        }
    if (readers == 1 && depthwise) pw->layout = ERT_LAYOUT_PLANES;
  }
}

edgert_status ert_layout_plan(const edgert_model *m, ert_tensor *tensors, ert_node *nodes,
                              float **mem) {
  *mem = NULL;
  const char *env = getenv("EDGERT_LAYOUT");
  if (ert_cpu.sgemm_block == NULL || ert_cpu.dw3_nhwc == NULL || m->bounds != NULL ||
      m->n_tensors == 0 || (env != NULL && strcmp(env, "nchw") == 0))
    return EDGERT_OK;
  uint8_t *nhwc = ert_calloc(m->n_tensors, 1);
  int *kinds = ert_calloc(m->n_nodes + 1, sizeof *kinds);
  size_t *floats = ert_calloc(m->n_nodes + 1, sizeof *floats);
  if (nhwc == NULL || kinds == NULL || floats == NULL) {
    ert_free(nhwc), ert_free(kinds), ert_free(floats);
    return EDGERT_ERR_NO_MEMORY;
  }
  for (uint32_t i = 0; i < m->n_tensors; ++i) nhwc[i] = (uint8_t)candidate(&tensors[i]);
  for (uint32_t i = 0; i < m->n_inputs; ++i) nhwc[m->inputs[i]] = 0;
  for (uint32_t i = 0; i < m->n_outputs; ++i) nhwc[m->outputs[i]] = 0;
  for (uint32_t i = 0; i < m->n_states; ++i) nhwc[m->states[i].in] = nhwc[m->states[i].out] = 0;
  for (uint32_t i = 0; i < m->n_nodes; ++i)
    if (nodes[i].op == OP_CONV2D) kinds[i] = ert_conv2d_nhwc_kind(&nodes[i], &floats[i]);
  for (int changed = 1; changed;) {
    changed = 0;
    for (uint32_t i = 0; i < m->n_nodes; ++i) changed |= enforce(&nodes[i], kinds[i], nhwc, tensors);
  }
  /* the conv2d nodes' bits, and their reordered weights in one block */
  size_t total = 0;
  for (uint32_t i = 0; i < m->n_nodes; ++i) {
    ert_node *n = &nodes[i];
    /* binary ops cut their elements at the pixels the layers around them cut at */
    if ((binary_op(n->op) || gpool_op(n->op)) && nhwc[n->in[0] - tensors])
      n->layout = ERT_LAYOUT_IN_NHWC | (binary_op(n->op) ? ERT_LAYOUT_OUT_NHWC : 0);
    if (kinds[i] == 0) continue;
    n->layout = (uint8_t)((nhwc[n->in[0] - tensors] ? ERT_LAYOUT_IN_NHWC : 0) |
                          (nhwc[n->out[0] - tensors] ? ERT_LAYOUT_OUT_NHWC : 0));
    if (n->layout & ERT_LAYOUT_OUT_NHWC) total += (floats[i] + 15) / 16 * 16;
  }
  fuse_residuals(m, tensors, nodes, kinds);
  planes_for_depthwise(m, tensors, nodes, kinds);
  float *w = total > 0 ? ert_aligned_alloc(64, total * sizeof(float)) : NULL;
  if (total > 0 && w == NULL) {
    for (uint32_t i = 0; i < m->n_nodes; ++i) nodes[i].layout = 0;
    ert_free(nhwc), ert_free(kinds), ert_free(floats);
    return EDGERT_ERR_NO_MEMORY;
  }
  for (uint32_t i = 0, at = 0; i < m->n_nodes; ++i) {
    ert_node *n = &nodes[i];
    if (kinds[i] == 0 || !(n->layout & ERT_LAYOUT_OUT_NHWC)) continue; /* conv2d only */
    ert_conv2d_nhwc_weights(n, w + at);
    n->wt = w + at;
    at += (uint32_t)((floats[i] + 15) / 16 * 16);
  }
  *mem = w;
  ert_free(nhwc), ert_free(kinds), ert_free(floats);
  return EDGERT_OK;
}

#endif
