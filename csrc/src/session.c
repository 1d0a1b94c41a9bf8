/* session.c: a session binds a model's tensors to one arena and runs the nodes in
 * order, its kernels' work spread over the session's worker pool (exec.c).
 *
 * Everything a run needs (tensor and node copies, pointer arrays, the arena, the
 * worker pool) is allocated in edgert_session_create; run() allocates nothing. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "exec.h"
#include "runtime.h"

/* ---- session ------------------------------------------------------------------ */

/* Message of the calling thread's last failed edgert_session_create (arena, partitions). */
static _Thread_local char create_error[512];

struct edgert_session {
  edgert_model *model;
  ert_tensor *tensors;
  ert_node *nodes;
  ert_tensor **ptrs;
  uint8_t *arena;
  void *arena_owned;
  ert_exec exec;            /* the worker pool (exec.c) */
  atomic_bool in_use;       /* a guarded call is running (see Threads in edgert.h) */
  ert_partitions *partitions; /* backends' per-session state, NULL when none */
  uint32_t *params;         /* parameter words of nodes with BOUNDS rules, or NULL */
  bool shapes_dirty;        /* an input shape changed since the last shape pass */
#if defined(ERT_X86_KERNELS)
  float *layout_mem;        /* reordered weights of the NHWC layers (layout.c), or NULL */
#endif
  char error[512];
};

/* Every state input of the session holds its initial value (docs/runtime.md, "State"). */
static void reset_state(edgert_session *s) {
  const edgert_model *m = s->model;
  for (uint32_t k = 0; k < m->n_states; k++) {
    ert_tensor *t = &s->tensors[m->states[k].in];
    if (m->states[k].init != NULL) memcpy(t->data, m->states[k].init, t->nbytes);
    else memset(t->data, 0, t->nbytes);
  }
}

/* After a successful run: each state output becomes the next run's input by swapping
 * the two tensors' buffers (both in the state region, read and written only by the
 * run): no bytes move. */
static void swap_state(edgert_session *s) {
  const edgert_model *m = s->model;
  for (uint32_t k = 0; k < m->n_states; k++) {
    ert_tensor *a = &s->tensors[m->states[k].in], *b = &s->tensors[m->states[k].out];
    void *d = a->data;
    a->data = b->data;
    b->data = d;
  }
}

void edgert_session_options_init(edgert_session_options *opts) {
  if (opts == NULL) return;
  memset(opts, 0, sizeof *opts);
  opts->threads = 1;
}

void edgert_session_destroy(edgert_session *s) {
  if (s == NULL) return;
  ert_exec_stop(&s->exec);
  ert_partitions_stop(s->partitions);
  ert_free(s->tensors);
  ert_free(s->nodes);
  ert_free(s->ptrs);
  ert_free(s->params);
#if defined(ERT_X86_KERNELS)
  ert_free(s->layout_mem);
#endif
  ert_free(s->arena_owned);
  ert_free(s);
}

edgert_status edgert_session_create(edgert_model *model, const edgert_session_options *opts,
                                    edgert_session **out) {
  create_error[0] = 0;
  if (out == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (model == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  edgert_session_options defaults;
  if (opts == NULL) {
    edgert_session_options_init(&defaults);
    opts = &defaults;
  }
  if (opts->threads < 1 || opts->threads > 1024) return EDGERT_ERR_INVALID_ARGUMENT;

  uint8_t *arena;
  if (opts->arena != NULL) {
    if ((uintptr_t)opts->arena % EDGERT_ARENA_ALIGN != 0) return EDGERT_ERR_ALIGNMENT;
    if (opts->arena_bytes < model->arena_bytes) {
      snprintf(create_error, sizeof create_error, "arena of %zu bytes given, the model needs %zu",
               opts->arena_bytes, model->arena_bytes);
      return EDGERT_ERR_ARENA_TOO_SMALL;
    }
    arena = (uint8_t *)opts->arena;
  } else {
    arena = NULL;
  }

  edgert_session *s = ert_calloc(1, sizeof *s);
  if (s == NULL) return EDGERT_ERR_NO_MEMORY;
  s->model = model;
  atomic_init(&s->in_use, false);
  if (arena == NULL) {
    s->arena_owned = ert_aligned_alloc(EDGERT_ARENA_ALIGN, model->arena_bytes);
    if (s->arena_owned == NULL) {
      edgert_session_destroy(s);
      snprintf(create_error, sizeof create_error, "cannot allocate the arena: %zu bytes", model->arena_bytes);
      return EDGERT_ERR_NO_MEMORY;
    }
    arena = (uint8_t *)s->arena_owned;
  }
  s->arena = arena;

  s->tensors = ert_calloc(model->n_tensors, sizeof *s->tensors);
  s->nodes = ert_calloc(model->n_nodes, sizeof *s->nodes);
  s->ptrs = ert_calloc(model->n_ptrs, sizeof *s->ptrs);
  if (s->tensors == NULL || s->nodes == NULL || s->ptrs == NULL) {
    edgert_session_destroy(s);
    return EDGERT_ERR_NO_MEMORY;
  }
  if (model->n_tensors > 0) memcpy(s->tensors, model->tensors, model->n_tensors * sizeof *s->tensors);
  for (uint32_t i = 0; i < model->n_tensors; i++)
    if (s->tensors[i].storage == ERT_STORAGE_ARENA) s->tensors[i].data = arena + s->tensors[i].offset;
  reset_state(s);

  /* Node copies keep prepare's opdata; their pointer arrays are rebased by index. */
  if (model->n_nodes > 0) memcpy(s->nodes, model->nodes, model->n_nodes * sizeof *s->nodes);
  for (size_t k = 0; k < model->n_ptrs; k++)
    s->ptrs[k] = model->ptrs[k] ? s->tensors + (model->ptrs[k] - model->tensors) : NULL;
  for (uint32_t i = 0; i < model->n_nodes; i++) {
    ert_node *n = &s->nodes[i];
    const ert_node *mn = &model->nodes[i];
    n->in = mn->in ? s->ptrs + (mn->in - model->ptrs) : NULL;
    n->out = mn->out ? s->ptrs + (mn->out - model->ptrs) : NULL;
    n->scratch = mn->scratch_bytes > 0 ? arena + mn->scratch_offset : NULL;
  }
  /* Bounded dimensions: nodes whose parameter words follow the input sizes get their
   * own copy of them, rewritten by each shape pass. */
  const ert_bounds *b = model->bounds;
  if (b != NULL && b->n_param_words > 0) {
    s->params = ert_calloc(b->n_param_words, sizeof *s->params);
    if (s->params == NULL) {
      edgert_session_destroy(s);
      return EDGERT_ERR_NO_MEMORY;
    }
    for (uint32_t i = 0; i < model->n_nodes; i++) {
      if (b->param_base[i] == ERT_ABSENT) continue;
      uint32_t *copy = s->params + b->param_base[i];
      memcpy(copy, model->nodes[i].params, model->nodes[i].n_params * sizeof *copy);
      s->nodes[i].params = copy;
    }
  }

#if defined(ERT_X86_KERNELS)
  if (ert_layout_plan(model, s->tensors, s->nodes, &s->layout_mem) != EDGERT_OK) {
    edgert_session_destroy(s);
    snprintf(create_error, sizeof create_error, "cannot allocate the NHWC layers' weights");
    return EDGERT_ERR_NO_MEMORY;
  }
#endif
  edgert_status st = ert_exec_start(&s->exec, opts->threads, s->error, sizeof s->error);
  if (st != EDGERT_OK) {
    edgert_session_destroy(s);
    return st;
  }
  st = ert_partitions_start(model, s->nodes, opts->backends, &s->partitions, create_error, sizeof create_error);
  if (st != EDGERT_OK) {
    edgert_session_destroy(s);
    return st;
  }
  *out = s;
  return EDGERT_OK;
}

/* Not inlined: one call with the message, not a copy of it at each caller. */
__attribute__((noinline)) static edgert_status sess_fail(edgert_session *s, edgert_status st,
                                                        const char *what) {
  snprintf(s->error, sizeof s->error, "%s", what);
  return st;
}

/* Takes the session for one guarded call; false when another call holds it. */
static bool acquire(edgert_session *s) { return !atomic_exchange(&s->in_use, true); }
static void release(edgert_session *s) { atomic_store(&s->in_use, false); }

#if defined(ERT_X86_KERNELS) /* the boards' code stays as it was */
/* An input copied by the session's threads: the tensor as `planes` planes of `plane`
 * bytes (N*C planes of H*W values for a 4-D input, else one), each cut into `bands`
 * parts; piece i is band i / planes of plane i % planes, so thread t's share is band t
 * of every plane: the rows a layer that cuts its output rows among the threads (the
 * 3x3 stride-2 stem) reads on that thread's core. */
typedef struct copy_job {
  char *dst;
  const char *src;
  size_t planes, plane, bands;
} copy_job;

static void copy_worker(void *arg, size_t begin, size_t end) {
  const copy_job *j = arg;
  for (size_t i = begin; i < end; ++i) {
    const size_t b = i / j->planes, off = i % j->planes * j->plane;
    const size_t b0 = b * j->plane / j->bands, b1 = (b + 1) * j->plane / j->bands;
    memcpy(j->dst + off + b0, j->src + off + b0, b1 - b0);
  }
}

enum { PARALLEL_COPY_BYTES = 64 * 1024 }; /* smaller inputs: one memcpy */

static void copy_input(edgert_session *s, const ert_tensor *t, const void *data) {
  const int32_t threads = ert_exec_threads(&s->exec);
  if (threads < 2 || t->nbytes < PARALLEL_COPY_BYTES ||
      ert_ranges_overlap((uintptr_t)t->data, t->nbytes, (uintptr_t)data, t->nbytes)) {
    memmove(t->data, data, t->nbytes);
    return;
  }
  copy_job j = {t->data, data, 1, t->nbytes, (size_t)threads};
  if (t->ndim == 4 && t->shape[0] > 0 && t->shape[1] > 0) {
    j.planes = (size_t)t->shape[0] * (size_t)t->shape[1];
    j.plane = t->nbytes / j.planes;
  }
  ert_parallel_for(&s->exec, j.planes * j.bands, copy_worker, &j);
}
#else
#define copy_input(s, t, data) memmove((t)->data, (data), (t)->nbytes)
#endif

static edgert_status set_input(edgert_session *s, size_t index, const void *data, size_t nbytes) {
  if (index >= s->model->n_inputs) {
    snprintf(s->error, sizeof s->error, "input index %zu out of range (%u inputs)", index,
             (unsigned)s->model->n_inputs);
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  ert_tensor *t = &s->tensors[s->model->inputs[index]];
  if (nbytes != t->nbytes) {
    snprintf(s->error, sizeof s->error, "input '%s' needs %zu bytes, got %zu", t->name, t->nbytes,
             nbytes);
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  if (nbytes == 0) return EDGERT_OK;
  if (data == NULL) return sess_fail(s, EDGERT_ERR_INVALID_ARGUMENT, "input data is NULL");
  copy_input(s, t, data);
  return EDGERT_OK;
}

edgert_status edgert_session_set_input(edgert_session *s, size_t index, const void *data,
                                       size_t nbytes) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  edgert_status st = set_input(s, index, data, nbytes);
  release(s);
  return st;
}

void *edgert_session_input_data(edgert_session *s, size_t index) {
  if (s == NULL || index >= s->model->n_inputs) return NULL;
  return s->tensors[s->model->inputs[index]].data;
}

/* Runs every node; when node_ns is not NULL, node i's time goes to node_ns[i]. */
static edgert_status apply_shapes(edgert_session *s) {
  if (!s->shapes_dirty) return EDGERT_OK;
  s->error[0] = '\0';
  ert_err e = {s->error, sizeof s->error};
  s->exec.failed = 0;
  edgert_status st = ert_bounds_apply(s->model, s->tensors, s->nodes, &s->exec, &e);
  if (st == EDGERT_OK) s->shapes_dirty = false;
  return st;
}

edgert_status edgert_session_prepare(edgert_session *s) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  edgert_status st = apply_shapes(s);
  release(s);
  return st;
}

static edgert_status run(edgert_session *s, uint64_t *node_ns) {
  const edgert_model *m = s->model;
  s->exec.failed = 0;
  edgert_status st = apply_shapes(s);
  if (st != EDGERT_OK) return st;
  uint64_t t = node_ns != NULL ? ert_clock_ns() : 0;
  for (uint32_t i = 0; i < m->n_nodes; i++) {
    m->evals[i](&s->nodes[i], &s->exec);
    if (node_ns != NULL) {
      uint64_t now = ert_clock_ns();
      node_ns[i] = now - t;
      t = now;
    }
    if (s->exec.failed) return s->exec.fail_status;
  }
  swap_state(s);
  return EDGERT_OK;
}

edgert_status edgert_session_run(edgert_session *s) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  edgert_status st = run(s, NULL);
  release(s);
  return st;
}

edgert_status edgert_session_run_io(edgert_session *s, const void *const *inputs, size_t n_inputs,
                                    void *const *outputs, size_t n_outputs) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  const edgert_model *m = s->model;
  edgert_status st = EDGERT_OK;
  if (n_inputs != m->n_inputs || n_outputs != m->n_outputs ||
      (n_inputs > 0 && inputs == NULL) || (n_outputs > 0 && outputs == NULL)) {
    st = sess_fail(s, EDGERT_ERR_INVALID_ARGUMENT, "run_io: input or output count differs from the model's");
  }
  for (size_t k = 0; st == EDGERT_OK && k < n_inputs; k++)
    st = set_input(s, k, inputs[k], s->tensors[m->inputs[k]].nbytes);
  if (st == EDGERT_OK) st = run(s, NULL);
  for (size_t k = 0; st == EDGERT_OK && k < n_outputs; k++) {
    const ert_tensor *t = &s->tensors[m->outputs[k]];
    if (outputs[k] != NULL && t->nbytes > 0) memcpy(outputs[k], t->data, t->nbytes);
  }
  release(s);
  return st;
}

edgert_status edgert_session_run_profiled(edgert_session *s, uint64_t *node_ns, size_t count) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  const edgert_model *m = s->model;
  if (count != m->n_nodes || (node_ns == NULL && count > 0)) {
    snprintf(s->error, sizeof s->error, "profile needs %u node times, got %zu%s", (unsigned)m->n_nodes,
             count, node_ns == NULL ? " (NULL)" : "");
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  edgert_status st = run(s, node_ns);
  release(s);
  return st;
}

static edgert_status set_input_shape(edgert_session *s, size_t index, size_t ndim, const int64_t *dims) {
  const edgert_model *m = s->model;
  if (index >= m->n_inputs) {
    snprintf(s->error, sizeof s->error, "input index %zu out of range (%u inputs)", index,
             (unsigned)m->n_inputs);
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  ert_tensor *t = &s->tensors[m->inputs[index]];
  const ert_tensor *planned = &m->tensors[m->inputs[index]];
  if (ndim != (size_t)planned->ndim || (ndim > 0 && dims == NULL)) {
    snprintf(s->error, sizeof s->error, "input '%s' has %d dims, got %zu", t->name, (int)planned->ndim, ndim);
    return EDGERT_ERR_SHAPE;
  }
  const ert_bounds *b = m->bounds;
  for (size_t d = 0; d < ndim; d++) {
    const ert_sym *y = NULL;
    for (uint32_t k = 0; b != NULL && k < b->n_binds; k++)
      if (b->binds[k].input == index && b->binds[k].dim == d) y = &b->syms[b->binds[k].sym];
    if (y == NULL && dims[d] != planned->shape[d]) {
      snprintf(s->error, sizeof s->error, "input '%s' dim %zu is fixed at %d, got %lld", t->name, d,
               (int)planned->shape[d], (long long)dims[d]);
      return EDGERT_ERR_SHAPE;
    }
    if (y != NULL && (dims[d] < y->lo || dims[d] > y->hi)) {
      snprintf(s->error, sizeof s->error, "input '%s' dim %zu is %lld, outside the bounds %lld..%lld of '%s'",
               t->name, d, (long long)dims[d], (long long)y->lo, (long long)y->hi, y->name);
      return EDGERT_ERR_SHAPE;
    }
    ert_err e = {s->error, sizeof s->error};
    if (y != NULL && ert_bounds_step(b, (uint32_t)(y - b->syms), dims[d], t->name, d, &e) != EDGERT_OK)
      return EDGERT_ERR_SHAPE;
  }
  bool same = true;
  for (size_t d = 0; d < ndim; d++) same = same && t->shape[d] == dims[d];
  if (!same) {
    ert_tensor_set_shape(t, (int32_t)ndim, dims);
    s->shapes_dirty = true;
  }
  return EDGERT_OK;
}

edgert_status edgert_session_set_input_shape(edgert_session *s, size_t index, size_t ndim,
                                             const int64_t *dims) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  edgert_status st = set_input_shape(s, index, ndim, dims);
  release(s);
  return st;
}

edgert_status edgert_session_input_info(const edgert_session *s, size_t index, edgert_tensor_info *info) {
  if (s == NULL || info == NULL || index >= s->model->n_inputs) return EDGERT_ERR_INVALID_ARGUMENT;
  ert_fill_info(&s->tensors[s->model->inputs[index]], info);
  return EDGERT_OK;
}

edgert_status edgert_session_output_info(const edgert_session *s, size_t index, edgert_tensor_info *info) {
  if (s == NULL || info == NULL || index >= s->model->n_outputs) return EDGERT_ERR_INVALID_ARGUMENT;
  ert_fill_info(&s->tensors[s->model->outputs[index]], info);
  return EDGERT_OK;
}

const void *edgert_session_output_data(edgert_session *s, size_t index) {
  if (s == NULL || index >= s->model->n_outputs) return NULL;
  return s->tensors[s->model->outputs[index]].data;
}

const char *edgert_session_last_error(const edgert_session *s) {
  return s == NULL ? create_error : s->error;
}

/* ---- state (docs/runtime.md, "State") --------------------------------------------- */

size_t edgert_model_num_states(const edgert_model *model) { return model ? model->n_states : 0; }

edgert_status edgert_model_state_info(const edgert_model *model, size_t index, int which,
                                      edgert_tensor_info *info) {
  if (model == NULL || info == NULL || index >= model->n_states || (which != 0 && which != 1))
    return EDGERT_ERR_INVALID_ARGUMENT;
  ert_fill_info(&model->tensors[which ? model->states[index].out : model->states[index].in], info);
  return EDGERT_OK;
}

edgert_status edgert_session_reset_state(edgert_session *s) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  reset_state(s);
  release(s);
  return EDGERT_OK;
}

/* The session's state tensor `index` for a copy of nbytes bytes; NULL (and the message)
 * when the index or the size is wrong. */
static ert_tensor *state_tensor(edgert_session *s, size_t index, const void *data, size_t nbytes) {
  const edgert_model *m = s->model;
  if (index >= m->n_states) {
    snprintf(s->error, sizeof s->error, "state index %zu out of range (%u states)", index, (unsigned)m->n_states);
    return NULL;
  }
  ert_tensor *t = &s->tensors[m->states[index].in];
  if (nbytes != t->nbytes || data == NULL) {
    snprintf(s->error, sizeof s->error, "state '%s' needs %zu bytes, got %zu%s", t->name, t->nbytes, nbytes,
             data == NULL ? " (NULL)" : "");
    return NULL;
  }
  return t;
}

edgert_status edgert_session_get_state(edgert_session *s, size_t index, void *data, size_t nbytes) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  const ert_tensor *t = state_tensor(s, index, data, nbytes);
  if (t != NULL) memcpy(data, t->data, nbytes);
  release(s);
  return t != NULL ? EDGERT_OK : EDGERT_ERR_INVALID_ARGUMENT;
}

edgert_status edgert_session_set_state(edgert_session *s, size_t index, const void *data, size_t nbytes) {
  if (s == NULL) return EDGERT_ERR_INVALID_ARGUMENT;
  if (!acquire(s)) return EDGERT_ERR_BUSY;
  ert_tensor *t = state_tensor(s, index, data, nbytes);
  if (t != NULL) memcpy(t->data, data, nbytes);
  release(s);
  return t != NULL ? EDGERT_OK : EDGERT_ERR_INVALID_ARGUMENT;
}
