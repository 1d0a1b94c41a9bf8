/* edgert.h: the C API of the edgert runtime. The single declaration of the API, kept
 * plain enough to be read by cffi's cdef (no macros in declarations, no bitfields).
 *
 * A short tour
 * ------------
 *   edgert_model *model;
 *   if (edgert_model_load_file("m.edgert", &model, err, sizeof err) != EDGERT_OK) ...
 *   edgert_session_options opts;  edgert_session_options_init(&opts);
 *   edgert_session *s;
 *   if (edgert_session_create(model, &opts, &s) != EDGERT_OK) ...
 *   edgert_session_set_input(s, 0, data, nbytes);
 *   edgert_session_run(s);
 *   const void *y = edgert_session_output_data(s, 0);
 *   edgert_session_destroy(s);  edgert_model_free(model);
 *
 * Trust and phases
 * ----------------
 * A model file is untrusted input. edgert_model_load_* checks everything in it
 * (magic, version, every offset and size against the buffer, indices, enums,
 * alignment, integer overflow, checksum) and then every node's semantics (dtypes,
 * shapes, parameters, arena fit), before it returns EDGERT_OK. After that,
 * edgert_session_run trusts the model and performs no checks and no allocation.
 * No function aborts, asserts or exits on bad input: each returns a status, and the
 * detailed message is kept in the error buffer, model or session that was involved.
 *
 * Memory
 * ------
 * edgert_model_load_memory uses the caller's buffer in place (zero copy): constants
 * are read from it directly, so it must stay valid and unchanged until
 * edgert_model_free, and be aligned to EDGERT_BUFFER_ALIGN bytes. Every session needs
 * one arena of edgert_model_arena_bytes(model) bytes, aligned to EDGERT_ARENA_ALIGN;
 * the caller may provide it (it must outlive the session) or let session creation
 * allocate it once. Session creation fails with EDGERT_ERR_NO_MEMORY when the arena
 * cannot be allocated, and with EDGERT_ERR_ARENA_TOO_SMALL when the caller's arena is
 * smaller than the plan.
 *
 * Threads
 * -------
 * Several sessions may share one model (the model is read-only after loading), and
 * sessions run in parallel on different threads: one session per thread is the way
 * to scale. One session is used by one thread at a time. This is enforced: a call to
 * edgert_session_run, edgert_session_run_io or edgert_session_set_input that overlaps
 * another of these calls on the same session returns EDGERT_ERR_BUSY at once and
 * changes nothing (no input, no output, not last_error). Use edgert_session_run_io
 * to copy inputs in and outputs out within the one guarded call; the pointers of
 * edgert_session_input_data and edgert_session_output_data are not guarded.
 *
 * Run-time data checks
 * --------------------
 * Values that index into tensors at run time (the indices of gather,
 * gather_elements and scatter_elements) are checked before use: an index outside
 * [-n, n) (negative ones count from the end, as in ONNX) stops the run with
 * EDGERT_ERR_INDEX and a message naming the node, e.g.
 * "node 'Gather_12' (gather): index 10 out of range [-10, 10)". one_hot follows
 * ONNX, where an out-of-range index is valid and gives a row of off values. Nothing
 * is read or written out of bounds in either case; outputs are unspecified after a
 * failed run.
 */
#ifndef EDGERT_H_
#define EDGERT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes, grouped in ranges of 100: 1xx the file format, 2xx unsupported
 * content, 3xx shapes and types, 4xx resources, 5xx API misuse. */
typedef enum edgert_status {
  EDGERT_OK = 0,
  EDGERT_ERR_IO = 100,              /* file cannot be opened or read */
  EDGERT_ERR_FORMAT = 101,          /* malformed file: bad magic, bounds, indices */
  EDGERT_ERR_CHECKSUM = 102,        /* checksum does not match the content */
  EDGERT_ERR_VERSION = 103,         /* file needs a newer runtime */
  EDGERT_ERR_ALIGNMENT = 104,       /* buffer or section not aligned as required */
  EDGERT_ERR_UNSUPPORTED_OP = 200,  /* op code unknown to this runtime */
  EDGERT_ERR_UNSUPPORTED = 201,     /* known op, unsupported dtype or parameters */
  EDGERT_ERR_NO_BACKEND = 202,      /* a fallback partition's backend was not given */
  EDGERT_ERR_BACKEND = 203,         /* a fallback partition's backend failed */
  EDGERT_ERR_SHAPE = 300,           /* shapes inconsistent with the op */
  EDGERT_ERR_DTYPE = 301,           /* dtypes inconsistent with the op */
  EDGERT_ERR_PARAM = 302,           /* op parameters out of range */
  EDGERT_ERR_NO_MEMORY = 400,       /* allocation failed (load or session creation) */
  EDGERT_ERR_ARENA_TOO_SMALL = 401, /* caller's arena smaller than the plan needs */
  EDGERT_ERR_THREADS = 402,         /* worker threads could not be started */
  EDGERT_ERR_INVALID_ARGUMENT = 500,/* NULL pointer, index out of range, size mismatch */
  EDGERT_ERR_INDEX = 501,           /* an input's index value out of range at run time */
  EDGERT_ERR_BUSY = 502,            /* session already in use by another thread */
} edgert_status;

/* Element types; the numbers are ONNX's TensorProto.DataType values. */
typedef enum edgert_dtype {
  EDGERT_FLOAT32 = 1,
  EDGERT_UINT8 = 2,
  EDGERT_INT8 = 3,
  EDGERT_INT16 = 5,
  EDGERT_INT32 = 6,
  EDGERT_INT64 = 7,
  EDGERT_BOOL = 9,    /* one byte, 0 or 1 */
  EDGERT_FLOAT16 = 10,
} edgert_dtype;

enum {
  EDGERT_MAX_DIMS = 8,
  EDGERT_BUFFER_ALIGN = 16, /* model buffers; constants inside are 64-aligned */
  EDGERT_ARENA_ALIGN = 64,
};

typedef struct edgert_model edgert_model;
typedef struct edgert_session edgert_session;

/* Description of one graph input or output. `name` points into the model and lives
 * as long as it. */
typedef struct edgert_tensor_info {
  const char *name;
  int32_t dtype;                    /* edgert_dtype */
  int32_t ndim;
  int64_t shape[8];                 /* EDGERT_MAX_DIMS */
  size_t nbytes;
  float scale;                      /* per-tensor quantization, 0 when none */
  int32_t zero_point;
} edgert_tensor_info;

/* Human-readable name of a status ("format error", ...). Never NULL. */
const char *edgert_status_str(edgert_status status);

/* Runtime version as "MAJOR.MINOR.PATCH" and the newest file format it reads. */
const char *edgert_version(void);
uint32_t edgert_format_version(void);

/* How this library was built: the board and its compiler flags when built by
 * `edgert build` (e.g. "rpi4 aarch64 -mcpu=cortex-a72 kernels=ref,neon"), else the
 * architecture, then the kernel sets compiled in. Static storage, never NULL. */
const char *edgert_build_info(void);

/* The kernels chosen at start-up from the CPU's features: "ref" (portable C), "neon"
 * or "neon+dotprod"; "ref" also when EDGERT_FORCE_REF is set. Static, never NULL. */
const char *edgert_kernels(void);

/* Loads a model from a caller-owned buffer, used in place (see Memory above).
 * On failure *out is NULL and, when err is not NULL, a NUL-terminated message of at
 * most err_size bytes is written to err. */
edgert_status edgert_model_load_memory(const void *buffer, size_t size,
                                       edgert_model **out, char *err,
                                       size_t err_size);

/* Reads a whole file into a buffer owned by the model, then loads it as above. */
edgert_status edgert_model_load_file(const char *path, edgert_model **out,
                                     char *err, size_t err_size);

/* Frees a model. All its sessions must have been destroyed first. NULL is a no-op. */
void edgert_model_free(edgert_model *model);

size_t edgert_model_num_inputs(const edgert_model *model);
size_t edgert_model_num_outputs(const edgert_model *model);
/* Fills *info; EDGERT_ERR_INVALID_ARGUMENT when index is out of range. */
edgert_status edgert_model_input_info(const edgert_model *model, size_t index,
                                      edgert_tensor_info *info);
edgert_status edgert_model_output_info(const edgert_model *model, size_t index,
                                       edgert_tensor_info *info);
/* Bounded dimensions
 * ------------------
 * A file converted with bounds (`--input-shape x=1,3,48,32..960`) runs any input size
 * within them from one arena planned for the upper bounds. Model-level infos (input,
 * output) report the upper bounds. Per session: set the actual shape with
 * edgert_session_set_input_shape before set_input (whose nbytes then follows that
 * shape); the next run recomputes every dependent node's shape (no allocation) and
 * edgert_session_output_info gives the actual output shapes after it. Dimension `dim`
 * of input `index`: symbol "" and lo == hi for a fixed dimension. */
typedef struct edgert_dim_info {
  const char *symbol;   /* the dimension's name in the model (lives as long as it) */
  int64_t lo, hi;       /* inclusive bounds */
  int64_t step;         /* the model runs the sizes step * k + r only, for the r whose */
  uint64_t residues;    /* bit is set here (step <= 64; step 1 and residues 1: every size) */
} edgert_dim_info;

edgert_status edgert_model_input_dim(const edgert_model *model, size_t index, size_t dim,
                                     edgert_dim_info *info);

/* Bytes of arena one session needs (planned offline by the converter). */
size_t edgert_model_arena_bytes(const edgert_model *model);
size_t edgert_model_num_nodes(const edgert_model *model);

/* Description of node `index` (execution order). `name` and `op` point into the model
 * and live as long as it; `op` is the op's name as in docs/ops.md ("conv2d"). */
typedef struct edgert_node_info {
  const char *name;
  const char *op;
  uint32_t num_inputs;              /* including absent optional inputs */
  uint32_t num_outputs;
  size_t scratch_bytes;             /* arena scratch the node uses while it runs */
} edgert_node_info;

/* Fills *info; EDGERT_ERR_INVALID_ARGUMENT when index is out of range. */
edgert_status edgert_model_node_info(const edgert_model *model, size_t index,
                                     edgert_node_info *info);

/* Fallback partitions (docs/partitions.md)
 * -----------------------------------------
 * A node with op "partition" holds a subgraph that edgert does not run itself: its
 * last input is a constant uint8 payload (an ONNX model for onnxruntime, a .tflite
 * flatbuffer for LiteRT) that an external backend runs. The library never links to a
 * backend: the caller passes one edgert_backend per kind in the session options, and
 * the session calls it through these function pointers. Boundary tensors (the
 * partition's inputs and outputs, payload excluded) are ordinary tensors of the model,
 * in edgert's layout and dtype; the backend copies bytes in and out.
 */
typedef enum edgert_backend_kind {
  EDGERT_BACKEND_ONNXRUNTIME = 1,
  EDGERT_BACKEND_LITERT = 2,
} edgert_backend_kind;

typedef struct edgert_partition_info {
  uint32_t node;                    /* node index in the model (execution order) */
  int32_t backend;                  /* edgert_backend_kind */
  uint32_t index;                   /* partition number, as in the node name partition_<index> */
  const char *name;                 /* node name, lives as long as the model */
  const void *payload;              /* inside the model buffer */
  size_t payload_bytes;
  size_t n_inputs;                  /* boundary tensors (payload excluded) */
  size_t n_outputs;
} edgert_partition_info;

/* Number of partition nodes in the model (0 for models edgert runs alone). */
size_t edgert_model_num_partitions(const edgert_model *model);
/* Partition `index` (0 .. num_partitions-1, in execution order); EDGERT_ERR_INVALID_ARGUMENT
 * when out of range. */
edgert_status edgert_model_partition_info(const edgert_model *model, size_t index,
                                          edgert_partition_info *info);
/* Boundary tensor k of partition `index`: input k when is_output is 0, else output k. */
edgert_status edgert_model_partition_tensor(const edgert_model *model, size_t index,
                                            int is_output, size_t k,
                                            edgert_tensor_info *info);

/* A backend for one kind of partition. prepare is called once per partition node at
 * edgert_session_create, in execution order, and stores the backend's per-session state
 * in *state; release is called for each prepared partition (reverse order) at
 * edgert_session_destroy or when session creation fails later. invoke runs at each run:
 * inputs[i] / outputs[o] point at the boundary tensors in the session's arena (their
 * nbytes from edgert_model_partition_tensor, or, in a file with bounded dimensions, for
 * this run from edgert_partition_call_tensor); the pointers are the same for every run
 * of one session. On failure prepare and invoke write a NUL-terminated message of at most
 * msg_size bytes to msg and return a status other than EDGERT_OK. Several sessions call
 * the same backend from different threads at once, each with its own state. */
typedef struct edgert_backend {
  void *user;
  edgert_status (*prepare)(void *user, const edgert_model *model, const edgert_partition_info *p,
                           void **state, char *msg, size_t msg_size);
  edgert_status (*invoke)(void *user, void *state, const void *const *inputs,
                          void *const *outputs, char *msg, size_t msg_size);
  void (*release)(void *user, void *state);
} edgert_backend;

/* Inside a backend's invoke, on the thread edgert called it from: boundary tensor k
 * of the partition being run (input k when is_output is 0, else output k) with its
 * shape and nbytes for this run. In a file with bounded dimensions these follow the
 * input sizes of the run (the outputs' from the file's BOUNDS rules, which the backend
 * must produce exactly); elsewhere they are the model's. EDGERT_ERR_INVALID_ARGUMENT
 * outside an invoke or when k is out of range. */
edgert_status edgert_partition_call_tensor(int is_output, size_t k, edgert_tensor_info *info);

typedef struct edgert_session_options {
  void *arena;          /* caller's arena or NULL to allocate one at creation */
  size_t arena_bytes;   /* size of `arena` when given */
  int32_t threads;      /* worker threads including the caller, >= 1 */
  int32_t reserved;     /* 0 */
  /* Partition backends indexed by edgert_backend_kind (entry 0 unused); NULL: none.
   * They must outlive every session created with them. On 64-bit targets the struct
   * keeps the size (48 bytes) it had when these words were reserved. */
  const edgert_backend *backends[3];
} edgert_session_options;

void edgert_session_options_init(edgert_session_options *opts);

/* Creates a session: binds every tensor to the arena or the model's constants,
 * starts worker threads and prepares every partition node with the backend of its kind
 * (opts->backends). Allocates (once) unless the caller provided the arena.
 * EDGERT_ERR_NO_BACKEND when a partition's kind has no backend; a failing prepare's own
 * status otherwise. The message: edgert_session_last_error(NULL). */
edgert_status edgert_session_create(edgert_model *model,
                                    const edgert_session_options *opts,
                                    edgert_session **out);
void edgert_session_destroy(edgert_session *session);

/* Copies one input into the arena; nbytes must equal the input's size. */
edgert_status edgert_session_set_input(edgert_session *session, size_t index,
                                       const void *data, size_t nbytes);
/* Sets the shape of input `index` for the following runs (ndim must equal the input's
 * rank). Fixed dimensions must keep their value and bounded ones stay within their
 * bounds; else EDGERT_ERR_SHAPE and a message naming the input, the dimension and the
 * bound, e.g. "input 'x' dim 3 is 1000, outside the bounds 32..960 of 'W'". Inputs that
 * share a symbol must agree by the next run (else that run fails with
 * EDGERT_ERR_SHAPE). Guarded like set_input; allocates nothing. */
edgert_status edgert_session_set_input_shape(edgert_session *session, size_t index,
                                             size_t ndim, const int64_t *dims);
/* Applies the input shapes set since the last run now, without running: the shape
 * pass and the prepare of every node that follows them, as the next run would. Gives
 * that run's shape error (EDGERT_ERR_SHAPE, EDGERT_ERR_PARAM) early, and the actual
 * output shapes (edgert_session_output_info) before a run. Allocates nothing. */
edgert_status edgert_session_prepare(edgert_session *session);
/* The actual shapes in this session: an input's as last set, an output's as computed
 * by the last successful run (before any run: the upper bounds). */
edgert_status edgert_session_input_info(const edgert_session *session, size_t index,
                                        edgert_tensor_info *info);
edgert_status edgert_session_output_info(const edgert_session *session, size_t index,
                                         edgert_tensor_info *info);

/* Where input `index` lives in the arena: callers may write it directly instead of
 * calling set_input. NULL when index is out of range. */
void *edgert_session_input_data(edgert_session *session, size_t index);

/* Runs the graph. Performs no allocation (partition backends may allocate in their
 * own code; edgert_alloc_count counts edgert's allocations only). Inputs must have been
 * set since the previous run (the arena space of an input may be reused by later
 * tensors). EDGERT_ERR_BUSY when another call is using the session (see Threads
 * above); EDGERT_ERR_INDEX when input data indexes out of range (see Run-time data
 * checks); EDGERT_ERR_BACKEND when a partition's invoke failed (last_error names the
 * partition and carries the backend's message). */
edgert_status edgert_session_run(edgert_session *session);

/* Runs the graph like edgert_session_run and writes the time node i took, in
 * nanoseconds of the monotonic clock, to node_ns[i]. `count` must equal
 * edgert_model_num_nodes (else EDGERT_ERR_INVALID_ARGUMENT and nothing runs); node_ns
 * is caller-owned. Performs no allocation; the clock is read once before the first node
 * and once after each node, so the times add up to the whole run. Outputs are the same
 * as after edgert_session_run. */
edgert_status edgert_session_run_profiled(edgert_session *session, uint64_t *node_ns,
                                          size_t count);

/* set_input for every input, run, and a copy of every output, as one call guarded as
 * run is: inputs[i] holds input i (its nbytes), outputs[o] receives output o (its
 * nbytes; a NULL entry is skipped). n_inputs and n_outputs must equal the model's
 * counts. */
edgert_status edgert_session_run_io(edgert_session *session, const void *const *inputs,
                                    size_t n_inputs, void *const *outputs,
                                    size_t n_outputs);

/* Output `index` after a run; valid until the next run or destroy. NULL when out of
 * range. */
const void *edgert_session_output_data(edgert_session *session, size_t index);

/* Message of the last failure in this session ("" when none). For a NULL session:
 * the message of the calling thread's last edgert_session_create when it failed for
 * its arena (EDGERT_ERR_NO_MEMORY, EDGERT_ERR_ARENA_TOO_SMALL: the byte counts) or a
 * partition (EDGERT_ERR_NO_BACKEND, or a backend's prepare: the partition and the
 * backend's message). */
const char *edgert_session_last_error(const edgert_session *session);

/* State (docs/runtime.md, "State")
 * -----
 * A streaming model converted with `--state OUT=IN` keeps IN in the session: the pair is
 * not among the model's inputs and outputs; each successful run reads the state and
 * leaves the value of OUT as the next run's state, in place (no copy, no allocation; a
 * failed run leaves the state as it was). A new session starts from the initial values
 * (the file's, or zeros). One session is one stream: to run several streams, create one
 * session per stream (they share the model). The calls below are guarded like run:
 * EDGERT_ERR_BUSY when another call is using the session.
 *
 * Number of state pairs of the model; 0 for a stateless model. */
size_t edgert_model_num_states(const edgert_model *model);
/* State `index`: which = 0 its input side (the name the state goes by), 1 its output. */
edgert_status edgert_model_state_info(const edgert_model *model, size_t index, int which,
                                      edgert_tensor_info *info);
/* Restores every state's initial value. */
edgert_status edgert_session_reset_state(edgert_session *session);
/* Copies state `index` out of / into the session (nbytes must be its size): checkpoint a
 * stream, or move it to another session. */
edgert_status edgert_session_get_state(edgert_session *session, size_t index, void *data,
                                       size_t nbytes);
edgert_status edgert_session_set_state(edgert_session *session, size_t index, const void *data,
                                       size_t nbytes);

/* Counts of heap allocations made by the library since start (tests use it to show
 * that run() allocates nothing). Allocations made by partition backends are not counted. */
uint64_t edgert_alloc_count(void);

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_H_ */
