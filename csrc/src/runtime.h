/* runtime.h: the model and session internals shared by loader.c, session.c and
 * crc32.c. Private to the runtime core; kernels use internal.h only. */
#ifndef EDGERT_RUNTIME_H_
#define EDGERT_RUNTIME_H_

#include "internal.h"

/* Storage value 2 of a tensor record: a constant stored in the SPARSE section. Only
 * the loader sees it; ert_sparse_load turns such tensors into ordinary constants. */
#define ERT_STORAGE_SPARSE 2

/* Checks `count` 32-byte SPARSE records (docs/sparse.md) against the tensors and
 * CONSTANTS, then decodes every sparse tensor into one buffer allocated here
 * (*dense_out, owned by the model; NULL when count is 0) and points its data there. */
edgert_status ert_sparse_load(const uint8_t *recs, uint32_t count, const uint8_t *consts,
                              uint64_t consts_size, ert_tensor *tensors, uint32_t n_tensors,
                              void **dense_out, ert_err *err);

/* CRC-32 with the zlib polynomial (reflected 0xEDB88320); pass 0 to start. */
uint32_t ert_crc32(uint32_t crc, const void *data, size_t size);

/* Bounded dimensions (docs/runtime.md; the BOUNDS section of docs/format.md). */
enum { ERT_MAX_SYMBOLS = 32 };
typedef struct ert_sym {
  const char *name;       /* inside the model */
  int64_t lo, hi;         /* 1 <= lo <= hi <= INT32_MAX */
} ert_sym;
typedef struct ert_bind {
  uint32_t input;         /* graph input position */
  uint32_t dim;
  uint32_t sym;
} ert_bind;
enum {
  ERT_RULE_PARAM = 0, ERT_RULE_OUTDIM = 1, ERT_RULE_INFER = 2, ERT_RULE_PARAM_SYM = 3,
  ERT_RULE_RESIZE_NEAREST = 4, ERT_RULE_SAME = 5, ERT_RULE_STEP = 6, ERT_RULE_RESIZE = 7,
  ERT_RULE_SLICE = 8, ERT_RULE_PARAM_EXPR = 9, ERT_RULE_OUTDIM_EXPR = 10
};
/* Expression programs (docs/format.md): u32 words, opcode in bits 0-7, a signed 24-bit
 * argument in bits 8-31; CONST32 takes the next word. */
enum {
  ERT_X_CONST = 0, ERT_X_SYM = 1, ERT_X_ADD = 2, ERT_X_SUB = 3, ERT_X_MUL = 4, ERT_X_FLOORDIV = 5, ERT_X_MOD = 6,
  ERT_X_MIN = 7, ERT_X_MAX = 8, ERT_X_NEG = 9, ERT_X_CONST32 = 10, ERT_X_DIM = 11,
  ERT_X_MAX_WORDS = 256, ERT_X_MAX_STACK = 16
};
/* RESIZE rule codes (`target`): coordinate mode in bits 0-2, nearest mode in bits 3-5,
 * ERT_RESIZE_FIXED_OUT when the output length is the file's (ONNX sizes). */
enum {
  ERT_RESIZE_HALF_PIXEL = 0, ERT_RESIZE_PYTORCH_HALF_PIXEL = 1, ERT_RESIZE_ASYMMETRIC = 2,
  ERT_RESIZE_ALIGN_CORNERS = 3,
  ERT_RESIZE_ROUND_PREFER_FLOOR = 0, ERT_RESIZE_ROUND_PREFER_CEIL = 1, ERT_RESIZE_FLOOR = 2, ERT_RESIZE_CEIL = 3,
  ERT_RESIZE_SIMPLE = 4,
  ERT_RESIZE_FIXED_OUT = 1u << 6
};
#define ERT_RULE_NO_NODE 0xFFFFFFFFu
/* PARAM: parameter word `target` = in[in].shape[in_dim] + add;
 * OUTDIM: out[target / 8].shape[target % 8] = in[in].shape[in_dim] + add;
 * INFER: out[target / 8].shape[target % 8] = in[in].numel / (the other dims);
 * PARAM_SYM: parameter word `target` = the value of symbol `in` + add;
 * RESIZE_NEAREST: a nearest resize whose axis `in_dim` scales by the integer `add`
 *   (output index o reads o / add); the node's index tables and output shape are
 *   rebuilt from these rules (one per table axis) instead of its shape function;
 * SAME: parameter word `target` = the auto_pad SAME pad of in[in].shape[in_dim], with
 *   add = k_eff | stride << 16 | end << 28 | lower << 29 (docs/format.md);
 * RESIZE: a nearest or linear resize whose axis `in_dim` follows the size: codes in
 *   `target` (below), the float32 scale's bits in `add`; tables rebuilt like
 *   RESIZE_NEAREST's;
 * SLICE: a slice's axis `in_dim` with the ONNX start `add` and end `in` (int32 bits):
 *   its start word `target` and size word target + 2 follow the actual dim (step: word
 *   target + 1);
 * PARAM_EXPR: parameter word `target` = the expression program at code[in], in_dim
 *   words long, over the symbols' values and the node's input dims (add is 0);
 * OUTDIM_EXPR: out[target / 8].shape[target % 8] = such a program;
 * STEP: a constraint, node ERT_RULE_NO_NODE (after every node's rules): the value v of
 *   symbol `in` runs only when bit v % target (target <= 64) of the residue mask
 *   in_dim | (uint32_t)add << 32 is set (checked when an input shape is set). */
typedef struct ert_rule {
  uint32_t node;
  uint32_t kind, in, in_dim, target;
  int32_t add;
} ert_rule;
typedef struct ert_bounds {
  ert_sym syms[ERT_MAX_SYMBOLS];
  uint32_t n_syms;
  ert_bind *binds;
  uint32_t n_binds;
  ert_rule *rules;        /* sorted by node */
  uint32_t n_rules;
  uint32_t *code;         /* expression programs of the EXPR rules */
  uint32_t n_code;
  uint32_t *dyn_nodes;    /* nodes whose shapes follow the inputs, in execution order */
  uint32_t n_dyn;
  uint32_t *param_base;   /* per node: where its parameter words start in a session's
                             copy, or ERT_ABSENT when the node has no PARAM rule */
  size_t n_param_words;
  uint8_t *value_nodes;   /* per node: 1 when a shape function reads its output's values
                             (directly or through other value nodes): the shape pass runs it */
} ert_bounds;

/* Checks the parsed bounds against the model (dynamic nodes, shape functions and rules
 * reproduce the file's shapes at the upper bounds) and fills dyn_nodes / param_base. */
/* EDGERT_ERR_SHAPE with a message naming the input, dim and rule when value v of symbol
 * `sym` breaks one of its STEP constraints. */
/* Symbol `sym`'s residue mask and its step (1 and mask 1 without a STEP rule). */
uint64_t ert_bounds_residues(const ert_bounds *b, uint32_t sym, uint32_t *step);
edgert_status ert_bounds_step(const ert_bounds *b, uint32_t sym, int64_t v, const char *input, size_t dim,
                              ert_err *err);
edgert_status ert_bounds_check(struct edgert_model *m, ert_err *err);
/* Recomputes the shapes of every dynamic node of a session from its input shapes
 * (tensors, nodes: the session's copies; params: its parameter copy), prepares those
 * nodes again and runs the value nodes on ex (their run-time errors end the pass with
 * ex's status and message). No allocation. */
edgert_status ert_bounds_apply(const struct edgert_model *m, ert_tensor *tensors, ert_node *nodes,
                               ert_exec *ex, ert_err *err);
void ert_bounds_free(ert_bounds *b);
/* Checks an expression program (bounded length and stack, known opcodes, symbols below
 * n_syms, input dims of node n): EDGERT_ERR_FORMAT naming what is wrong. */
edgert_status ert_expr_check(const uint32_t *code, uint32_t len, uint32_t n_syms, const ert_node *n, ert_err *err);

/* State (docs/runtime.md, "State"; the STATE section of docs/format.md): a pair of arena
 * tensors in the state region [state_offset, arena_bytes) that no other tensor or
 * scratch touches. A run reads `in` and writes `out`; a session then swaps the two
 * tensors' data pointers, so the next run reads what this one wrote (no copy). */
typedef struct ert_state {
  uint32_t in, out;       /* tensor indices */
  const void *init;       /* initial value inside CONSTANTS, or NULL for zeros */
} ert_state;

/* A loaded model: the tensors and nodes prepared once, read-only afterwards.
 * Node in/out pointers point into `tensors`; sessions rebase them by index. */
struct edgert_model {
  const uint8_t *buf;     /* the file, used in place */
  size_t size;
  void *owned;            /* buffer allocated by load_file, or NULL */

  ert_tensor *tensors;
  uint32_t n_tensors;
  ert_quant *quants;
  uint32_t n_quants;
  ert_node *nodes;
  uint32_t n_nodes;
  ert_tensor **ptrs;      /* every node's in/out pointer arrays, back to back */
  size_t n_ptrs;
  void (**evals)(const ert_node *, ert_exec *); /* eval of each node */

  uint32_t *inputs;       /* graph input tensor indices */
  uint32_t n_inputs;
  uint32_t *outputs;      /* graph output tensor indices */
  uint32_t n_outputs;
  size_t arena_bytes;
  void *sparse_dense;     /* decoded sparse constants, or NULL */
  ert_bounds *bounds;     /* bounded dimensions, or NULL for a static model */
  ert_state *states;      /* state pairs, or NULL */
  uint32_t n_states;
  size_t state_offset;    /* start of the state region in the arena (arena_bytes when none) */
};

/* True when the arena ranges [a, a + an) and [b, b + bn) share a byte. */
static inline bool ert_ranges_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
  return an > 0 && bn > 0 && a < b + bn && b < a + an;
}

/* Fills *info from a tensor (loader.c). */
void ert_fill_info(const ert_tensor *t, edgert_tensor_info *info);

#if defined(ERT_X86_KERNELS)
/* NHWC tensors for a new session (layout.c): sets the layout bits and reordered weights
 * of the session's node copies; the weights go into *mem (the session frees it; NULL
 * when none). Leaves every tensor NCHW where the CPU lacks the kernels, the model has
 * bounded dimensions or EDGERT_LAYOUT=nchw. */
edgert_status ert_layout_plan(const edgert_model *m, ert_tensor *tensors, ert_node *nodes,
                              float **mem);
#endif

/* Fallback partitions (partition.c). */
typedef struct ert_partitions ert_partitions;
/* For a new session whose node copies are `nodes` (tensors bound to the arena): checks
 * that every partition's kind has a backend (else EDGERT_ERR_NO_BACKEND), then calls
 * prepare for each partition in execution order. On failure, partitions already
 * prepared are released, a message is written to msg and the status returned. *out is
 * NULL when the model has no partition. */
edgert_status ert_partitions_start(const edgert_model *m, ert_node *nodes,
                                   const edgert_backend *const backends[3], ert_partitions **out,
                                   char *msg, size_t msg_size);
/* Releases every prepared partition (reverse order) and frees ps; NULL is a no-op. */
void ert_partitions_stop(ert_partitions *ps);

#endif /* EDGERT_RUNTIME_H_ */
