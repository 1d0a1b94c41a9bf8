/* internal.h: what the loader, the session and the kernels share. Not installed.
 * What eval may do with its ert_exec (the worker pool, run-time errors) is in exec.h.
 *
 * Kernel contract
 * ---------------
 * Every op `name` in edgert_ops.def has, in csrc/kernels/ref/, two functions:
 *
 *   edgert_status ert_<name>_prepare(ert_node *node, ert_err *err);
 *   void          ert_<name>_eval(const ert_node *node, ert_exec *ex);
 *
 * prepare runs once, at model load, on the model's own tensors (data pointers are
 * NULL then, except constants). It must check everything eval will rely on: number
 * of inputs and outputs, dtypes, ranks and shapes (inputs against parameters and
 * outputs), the parameter count and ranges, constant inputs' contents where eval
 * indexes with them, and that node->scratch_bytes covers the scratch eval needs.
 * On failure it calls ert_fail(err, ...) and returns its status. It may fill
 * node->opdata (ERT_OPDATA_WORDS words) with values derived once for eval.
 *
 * eval runs the op on a session's tensors. It trusts prepare: no checks of what
 * prepare checked, no allocation, no I/O. The one exception is data that eval uses
 * as an index (gather-like ops): eval checks every such value before it reads or
 * writes through it, and on a bad one calls ert_run_fail(ex, ...) (exec.h) with a
 * message naming the node, writes nothing out of bounds and returns; the session then
 * stops the run after this node and returns that status. eval may use node->scratch
 * (scratch_bytes, 64-aligned), which the plan gives to this node alone while it
 * runs. Inputs and outputs never alias, except for ops the converter marks in-place
 * (documented per op), where the output may be the first input.
 *
 * Bounded dimensions (docs/runtime.md) add a third, optional function:
 *
 *   edgert_status ert_<name>_shape(ert_node *node, ert_err *err);
 *
 * It sets the output shapes (ert_tensor_set_shape) from the input shapes and the
 * parameter words, without allocation. The session calls it, then prepare again, for
 * every node whose inputs depend on a bounded dimension, whenever an input shape
 * changes; prepare then re-derives opdata for the actual sizes and checks them, so a
 * shape function only has to be right, not defensive. Ops without one (the weak
 * fallback in ops.c) refuse files whose bounded dimensions reach them, at load.
 * A shape function may read input values where the op's output shape follows them
 * (range, expand's target, tile's repeats: listed in bounds.c's value_inputs, which
 * makes the shape pass run the nodes computing them first); with no data yet (at load)
 * it keeps the file's shapes, and the op's eval checks the values still give them.
 */
#ifndef EDGERT_INTERNAL_H_
#define EDGERT_INTERNAL_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "edgert.h"

#define ERT_ABSENT 0xFFFFFFFFu /* index of an absent optional input */
#define ERT_OPDATA_WORDS 64

typedef struct ert_err {
  char *msg;
  size_t size;
} ert_err;

/* Formats a message into err (if any) and returns status. */
edgert_status ert_fail(ert_err *err, edgert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ert_fail with the message "node '<node>'" followed by fmt: the many messages about a
 * node share that prefix instead of each repeating it. */
edgert_status ert_fail_node(ert_err *err, edgert_status status, const char *node, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

typedef enum ert_storage { ERT_STORAGE_ARENA = 0, ERT_STORAGE_CONST = 1 } ert_storage;

typedef struct ert_quant {
  int32_t axis;          /* -1: per tensor */
  uint32_t count;        /* 1, or the size of dimension `axis` */
  const float *scales;   /* count values, inside the model buffer */
  const int32_t *zero_points;
} ert_quant;

typedef struct ert_tensor {
  void *data;            /* arena + offset, or inside the model buffer; NULL in prepare for arena tensors */
  const char *name;
  int32_t dtype;         /* edgert_dtype */
  int32_t ndim;
  int32_t shape[EDGERT_MAX_DIMS];
  size_t numel;
  size_t nbytes;
  uint8_t storage;       /* ert_storage */
  uint64_t offset;       /* arena offset, or constant offset in the file */
  const ert_quant *quant; /* NULL when not quantized */
} ert_tensor;

typedef struct ert_node {
  int32_t op;
  uint32_t n_in, n_out;
  ert_tensor **in;       /* n_in entries, NULL for an absent optional input */
  ert_tensor **out;      /* n_out entries, never NULL */
  const uint32_t *params;
  uint32_t n_params;
  void *scratch;         /* NULL in prepare */
  size_t scratch_bytes;
  uint64_t scratch_offset;
  const char *name;
  int64_t opdata[ERT_OPDATA_WORDS];
#if defined(ERT_X86_KERNELS)
  /* A session's layout choice (csrc/src/layout.c; x86-64 only): input 0 and/or output 0
   * stored NHWC, and the weights that layout reads, reordered by the session (NULL when
   * none). */
  uint8_t layout;
  const float *wt;
  /* ERT_LAYOUT_RESIDUAL: the Add after this pointwise layer is done in its stores, y =
   * (its result) + res, written to res_y (the Add's output); the Add is skipped. */
  const float *res;
  float *res_y;
#endif
} ert_node;

#if defined(ERT_X86_KERNELS)
enum { /* ert_node.layout bits */
  ERT_LAYOUT_IN_NHWC = 1,
  ERT_LAYOUT_OUT_NHWC = 2,
  ERT_LAYOUT_RESIDUAL = 4, /* a pointwise conv2d adds an Add's other input (res) */
  ERT_LAYOUT_SKIP = 8,     /* that Add: nothing left to do */
  ERT_LAYOUT_PLANES = 16   /* an NCHW pointwise conv2d read by one NCHW depthwise layer
                              alone: its output planes over the threads (see planes_for_depthwise) */
};
/* What a conv2d node can run in NHWC (ref/conv2d.c), and the floats of its reordered
 * weights (*wt_floats): ERT_NHWC_POINTWISE either side in either layout;
 * ERT_NHWC_POINTWISE_IN only its input NHWC (NHWC out would need scratch the plan did
 * not give it); ERT_NHWC_DEPTHWISE input and output both NHWC; 0 neither. */
enum { ERT_NHWC_POINTWISE = 1, ERT_NHWC_POINTWISE_IN = 2, ERT_NHWC_DEPTHWISE = 3 };
int ert_conv2d_nhwc_kind(const ert_node *node, size_t *wt_floats);
/* Writes the weights in the order the NHWC kernels read (16-output panels [m / 16][k][16], or [9][c] depthwise). */
void ert_conv2d_nhwc_weights(const ert_node *node, float *wt);
/* Whether a conv2d node has a fused activation. */
int ert_conv2d_has_act(const ert_node *node);
#endif

/* Execution context handed to eval (exec.h: what a kernel may do with it). */
typedef struct ert_exec ert_exec;

typedef struct ert_op_impl {
  edgert_status (*prepare)(ert_node *node, ert_err *err);
  void (*eval)(const ert_node *node, ert_exec *ex);
  edgert_status (*shape)(ert_node *node, ert_err *err);
} ert_op_impl;

/* Op dispatch (csrc/src/ops.c): fills *impl and returns the op's name for codes in
 * edgert_ops.def; NULL (impl untouched) for any other code. */
const char *ert_op_lookup(uint32_t code, ert_op_impl *impl);

/* ---- helpers for kernels ---- */

static inline int32_t ert_pi(const ert_node *n, uint32_t k) { return (int32_t)n->params[k]; }
static inline float ert_pf(const ert_node *n, uint32_t k) {
  union { uint32_t u; float f; } v;
  v.u = n->params[k];
  return v.f;
}
size_t ert_dtype_size(int32_t dtype); /* 0 for unknown dtypes */
const char *ert_dtype_name(int32_t dtype);

/* Common prepare checks; each reports a message naming the node. */
edgert_status ert_check_arity(const ert_node *n, ert_err *err, uint32_t min_in,
                              uint32_t max_in, uint32_t min_out, uint32_t max_out);
edgert_status ert_check_params(const ert_node *n, ert_err *err, uint32_t min_params);
edgert_status ert_check_dtype(const ert_node *n, ert_err *err, const ert_tensor *t,
                              int32_t dtype);
edgert_status ert_check_same_shape(const ert_node *n, ert_err *err,
                                   const ert_tensor *a, const ert_tensor *b);
/* t (present) has the shape dims[0..ndim) (ndim <= EDGERT_MAX_DIMS); else a message
 * naming its slot, its shape and the expected one. */
edgert_status ert_check_shape(const ert_node *n, ert_err *err, const ert_tensor *t, int32_t ndim,
                              const int64_t *dims);
/* True when t is present, f32, has ndim dims (any ndim when ndim < 0). */
bool ert_is_f32(const ert_tensor *t, int ndim);
/* Inputs i that prepare requires to be constants (with data readable now). */
edgert_status ert_check_const(const ert_node *n, ert_err *err, uint32_t i);

/* Sets t's shape to dims[0..ndim) and recomputes numel and nbytes. */
void ert_tensor_set_shape(ert_tensor *t, int32_t ndim, const int64_t *dims);
/* Shape functions shared by many ops: out[0] takes in[0]'s shape; out[0] takes the
 * numpy broadcast of every present input (an error when they do not broadcast). */
edgert_status ert_shape_same(ert_node *n, ert_err *err);
edgert_status ert_shape_broadcast(ert_node *n, ert_err *err);

/* Defines op `name`'s shape function as one of the shared ones above. */
#define ERT_SHAPE_AS(name, fn) \
  edgert_status ert_##name##_shape(ert_node *node, ert_err *err) { return fn(node, err); }

/* Fused activation shared by conv2d, gemm, matmul, add (param words: kind, a, b). */
typedef enum ert_act {
  ERT_ACT_NONE = 0,
  ERT_ACT_RELU = 1,
  ERT_ACT_CLIP = 2,        /* min(max(x, a), b) */
  ERT_ACT_HARD_SIGMOID = 3,/* max(0, min(1, a*x + b)) */
  ERT_ACT_HARD_SWISH = 4,  /* x * max(0, min(1, x/6 + 1/2)) */
  ERT_ACT_SIGMOID = 5,
  ERT_ACT_SILU = 6,        /* x * sigmoid(x) */
  ERT_ACT_LEAKY_RELU = 7,  /* x < 0 ? a*x : x */
  ERT_ACT_TANH = 8,
  ERT_ACT_GELU = 9,        /* exact, erf form */
  ERT_ACT_COUNT
} ert_act;

typedef struct ert_act_params {
  int32_t kind;
  float a, b;
} ert_act_params;

edgert_status ert_act_read(const ert_node *n, uint32_t first_word, ert_act_params *act,
                           ert_err *err);
/* Applies the activation in place to x[0..count). */
void ert_act_apply(const ert_act_params *act, float *x, size_t count);

/* Allocation counted by edgert_alloc_count(). */
void *ert_malloc(size_t size);
void *ert_calloc(size_t n, size_t size);
void *ert_aligned_alloc(size_t align, size_t size);
void ert_free(void *p);

/* ---- fallback partitions (docs/partitions.md) ---- */

#define ERT_OP_PARTITION 230 /* its code in edgert_ops.def */

/* One partition node of one session: its backend, the backend's state and the boundary
 * tensors' addresses in this session's arena (fixed for the session's lifetime). Set by
 * csrc/src/partition.c at session creation; its address is kept in opdata[0] of the
 * session's copy of the node. */
typedef struct ert_partition_ctx {
  const edgert_backend *backend;
  void *state;
  bool prepared;
  const void **in;
  void **out;
} ert_partition_ctx;

static inline const ert_partition_ctx *ert_partition_binding(const ert_node *n) {
  const ert_partition_ctx *c;
  memcpy(&c, &n->opdata[0], sizeof c);
  return c;
}

/* The partition node whose backend invoke is running on this thread (set by the
 * partition kernel around the call), or NULL: edgert_partition_call_tensor reads it. */
const ert_node *ert_partition_current(void);

/* "onnxruntime", "litert" or "unknown" for an edgert_backend_kind value. */
const char *ert_backend_name(uint32_t code);

/* Declarations of every op's prepare and eval, from the op list. */
#if defined(__GNUC__)
#define ERT_HIDDEN __attribute__((visibility("hidden"))) /* never preempted: no GOT */
/* prepare and shape run at load and when a bounded dimension changes, never per
 * inference: optimized for size even in the files compiled for speed (OPT_HOT). */
#define ERT_ONCE __attribute__((cold))
#else
#define ERT_HIDDEN
#define ERT_ONCE
#endif
#define ERT_OP(code, name)                                                                \
  ERT_HIDDEN ERT_ONCE edgert_status ert_##name##_prepare(ert_node *node, ert_err *err); \
  ERT_HIDDEN void ert_##name##_eval(const ert_node *node, ert_exec *ex);                \
  ERT_HIDDEN ERT_ONCE edgert_status ert_##name##_shape(ert_node *node, ert_err *err);
#include "edgert_ops.def"
#undef ERT_OP

#endif /* EDGERT_INTERNAL_H_ */
