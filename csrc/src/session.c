/* session.c: a session binds a model's tensors to one arena and runs the nodes in
 * order; ert_parallel_for spreads kernel work over the session's worker threads.
 *
 * Everything a run needs (tensor and node copies, pointer arrays, the arena, the
 * worker pool) is allocated in edgert_session_create; run() allocates nothing. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

/* ---- worker pool ------------------------------------------------------------ */

struct ert_exec {
  int32_t threads;          /* including the calling thread */
  int32_t started;          /* workers actually running */
  pthread_t *workers;
  pthread_mutex_t mu;
  pthread_cond_t wake;      /* a new job (or stop) was posted */
  pthread_cond_t done;      /* the last worker in a job left it */
  /* The current job: its number (bits 17 and up), closed (bit 16: the caller is done
   * with it, nobody may join), workers in it (bits 0..15). */
  _Atomic uint64_t job;
#if defined(ERT_X86_KERNELS)
  /* thread t's share of the current job's pieces, (first << 32 | end) in word
     RANGE_STRIDE * t (one cache line each): see run_pieces */
  _Atomic uint64_t *ranges;
#else
  atomic_size_t next;       /* the next piece of the current job to take */
#endif
  atomic_bool stop;
  atomic_bool busy;         /* a job is running: nested calls run serially */
  int failed;               /* ert_run_fail was called during the current run */
  edgert_status fail_status;
  char *error;              /* the session's message buffer */
  size_t error_size;
  ert_task_fn fn;           /* the current job, written before its number is published */
  void *arg;
  size_t n, pieces;
};

#define JOB_SHIFT 17
#define JOB_CLOSED ((uint64_t)1 << 16)
#define JOB_MEMBERS ((uint64_t)0xFFFF)

typedef struct worker_arg {
  ert_exec *ex;
  int32_t id; /* 1 .. threads-1 */
} worker_arg;

/* How jobs run: the caller cuts [0, n) into up to threads * PIECES_PER_THREAD
 * contiguous pieces and publishes the job; every thread that joins it (the caller and
 * the workers that see it in time) takes pieces until none is left. The caller waits
 * only for the workers that joined, then closes the job: a worker descheduled on a
 * busy core neither delays the job nor misses work, it just joins none.
 *
 * On x86-64 the pieces are not dealt from one counter: thread t (0 the caller, t the
 * worker with id t) owns the t-th of `threads` contiguous shares of them, takes its own
 * from the front, then the others' from the back. So, when nobody is held up, thread t
 * runs the same part of every job of the same cut (e.g. the same columns of consecutive
 * 1x1 convolutions over one map size) and finds more of what it reads in its own core's
 * cache, where pieces dealt in turn went to either core from node to node.
 *
 * Waiting: a worker polls for the next job, and the caller for the members' end, up to
 * SPIN_POLLS times (tens of microseconds: the gap between two nodes of a run) before
 * sleeping on a condition variable; a futex wake-up per node costs more than many
 * nodes' share of work. On x86-64 a worker then polls for IDLE_POLL_NS more with a
 * yield of its core between polls (sched_yield: another runnable thread, e.g. the
 * caller's when threads outnumber cores, goes first) before it sleeps: one asleep when
 * a run starts joins its first node late (docs/runtime.md, "Threads": the first layer
 * of back-to-back runs lost a third of its second thread to that). */
enum { SPIN_POLLS = 2000, PIECES_PER_THREAD = 4 };
#define IDLE_POLL_NS 1000000u /* 1 ms */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ volatile("pause" ::: "memory");
#else /* ARM boards' cores run one thread each: nothing to yield to */
  __asm__ volatile("" ::: "memory");
#endif
}

/* Wait number i (0, 1, ...) of a worker's poll for the next job: a pause for the first
 * SPIN_POLLS; on x86-64 then a yield until IDLE_POLL_NS have passed since the first
 * yield (*since); 0 when the worker should sleep instead. The boards keep the short
 * spin: the yield's import and code would take libedgert.so over its 200 KB budget. */
static int keep_polling(int i, uint64_t *since) {
  if (i < SPIN_POLLS) {
    cpu_relax();
    return 1;
  }
#if defined(ERT_X86_KERNELS)
  if (i == SPIN_POLLS) *since = ert_clock_ns();
  if (*since != 0 && ert_clock_ns() - *since < IDLE_POLL_NS) {
    sched_yield();
    return 1;
  }
#else
  (void)since;
#endif
  return 0;
}

/* Chunk k of [0, n) split into `parts` near-equal contiguous pieces. */
static void chunk(size_t n, size_t parts, size_t k, size_t *begin, size_t *end) {
  size_t q = n / parts, r = n % parts;
  *begin = q * k + (k < r ? k : r);
  *end = *begin + q + (k < r ? 1 : 0);
}

#if defined(ERT_X86_KERNELS)
enum { RANGE_STRIDE = 8 }; /* 64-bit words per share: one cache line */

/* Takes piece *k from the front (back = 0) or the back of a share; 0 when it is empty. */
static int take(_Atomic uint64_t *share, int back, size_t *k) {
  uint64_t v = atomic_load_explicit(share, memory_order_relaxed);
  for (;;) {
    const uint32_t first = (uint32_t)(v >> 32), end = (uint32_t)v;
    if (first >= end) return 0;
    const uint64_t taken = back ? v - 1 : v + ((uint64_t)1 << 32);
    if (atomic_compare_exchange_weak(share, &v, taken)) {
      *k = back ? end - 1 : first;
      return 1;
    }
  }
}

/* Deals the pieces of a new job out as `threads` contiguous shares. */
static void deal(ert_exec *ex) {
  for (int32_t t = 0; t < ex->threads; ++t) {
    size_t b, e;
    chunk(ex->pieces, (size_t)ex->threads, (size_t)t, &b, &e);
    atomic_store_explicit(&ex->ranges[RANGE_STRIDE * t], (uint64_t)b << 32 | e,
                          memory_order_relaxed);
  }
}

/* Thread `id` runs pieces of the current job until none is left: its own share from the
 * front, then the others' from the back. */
static void run_pieces(ert_exec *ex, int32_t id) {
  for (int32_t d = 0; d < ex->threads; ++d) {
    _Atomic uint64_t *share = &ex->ranges[RANGE_STRIDE * ((id + d) % ex->threads)];
    size_t k, b, e;
    while (take(share, d > 0, &k)) {
      chunk(ex->n, ex->pieces, k, &b, &e); /* never empty: pieces <= n */
      ex->fn(ex->arg, b, e);
    }
  }
}
#else
/* Takes pieces of the current job until none is left. */
static void run_pieces(ert_exec *ex, int32_t id) {
  (void)id;
  for (;;) {
    const size_t k = atomic_fetch_add(&ex->next, 1);
    if (k >= ex->pieces) return;
    size_t b, e;
    chunk(ex->n, ex->pieces, k, &b, &e); /* never empty: pieces <= n */
    ex->fn(ex->arg, b, e);
  }
}
#endif

static void *worker_main(void *p) {
  worker_arg *wa = (worker_arg *)p;
  ert_exec *ex = wa->ex;
  uint64_t seen = 0; /* the last job number this worker looked at */
  for (;;) {
    uint64_t j = atomic_load(&ex->job), since = 0;
    for (int i = 0; (j >> JOB_SHIFT) == seen && !atomic_load(&ex->stop) && keep_polling(i, &since); ++i)
      j = atomic_load(&ex->job);
    if ((j >> JOB_SHIFT) == seen) {
      pthread_mutex_lock(&ex->mu);
      while (!atomic_load(&ex->stop) && ((j = atomic_load(&ex->job)) >> JOB_SHIFT) == seen)
        pthread_cond_wait(&ex->wake, &ex->mu);
      pthread_mutex_unlock(&ex->mu);
    }
    if (atomic_load(&ex->stop)) break;
    /* join the current job unless the caller closed it already */
    while (!(j & JOB_CLOSED) && !atomic_compare_exchange_weak(&ex->job, &j, j + 1)) {
    }
    seen = j >> JOB_SHIFT;
    if (j & JOB_CLOSED) continue;
    run_pieces(ex, wa->id);
    if ((atomic_fetch_sub(&ex->job, 1) & JOB_MEMBERS) == 1) { /* the last member left */
      pthread_mutex_lock(&ex->mu);
      pthread_cond_broadcast(&ex->done); /* its one waiter, the caller (one import less) */
      pthread_mutex_unlock(&ex->mu);
    }
  }
  return NULL;
}

void ert_parallel_for(ert_exec *ex, size_t n, ert_task_fn fn, void *arg) {
  if (n == 0) return;
  if (ex == NULL || ex->started == 0 || n == 1 || atomic_load(&ex->busy)) {
    fn(arg, 0, n);
    return;
  }
  atomic_store(&ex->busy, true);
  const size_t most = (size_t)ex->threads * PIECES_PER_THREAD;
  ex->fn = fn;
  ex->arg = arg;
  ex->n = n;
  ex->pieces = n < most ? n : most;
#if defined(ERT_X86_KERNELS)
  deal(ex);
#else
  atomic_store(&ex->next, 0);
#endif
  pthread_mutex_lock(&ex->mu);
  const uint64_t number = (atomic_load(&ex->job) >> JOB_SHIFT) + 1;
  atomic_store(&ex->job, number << JOB_SHIFT);
  pthread_cond_broadcast(&ex->wake); /* no waiter: returns at once */
  pthread_mutex_unlock(&ex->mu);

  run_pieces(ex, 0);

  /* close the job once no worker is in it */
  const uint64_t open = number << JOB_SHIFT;
  for (int i = 0;; ++i) {
    uint64_t j = open;
    if (atomic_compare_exchange_strong(&ex->job, &j, open | JOB_CLOSED)) break;
    if (i < SPIN_POLLS) {
      cpu_relax();
      continue;
    }
    pthread_mutex_lock(&ex->mu);
    while ((atomic_load(&ex->job) & JOB_MEMBERS) != 0) pthread_cond_wait(&ex->done, &ex->mu);
    pthread_mutex_unlock(&ex->mu);
  }
  atomic_store(&ex->busy, false);
}

#if defined(ERT_X86_KERNELS) /* its only callers: the boards' code stays as it was */
int32_t ert_exec_threads(const ert_exec *ex) {
  return ex == NULL || ex->started == 0 ? 1 : ex->threads;
}
#endif

void ert_run_fail(ert_exec *ex, edgert_status status, const char *fmt, ...) {
  if (ex == NULL || ex->failed) return; /* the first failure of a run keeps its message */
  ex->failed = 1;
  ex->fail_status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ex->error, ex->error_size, fmt, ap);
  va_end(ap);
}

static void pool_stop(ert_exec *ex) {
  if (ex->started > 0) {
    pthread_mutex_lock(&ex->mu);
    atomic_store(&ex->stop, true);
    pthread_cond_broadcast(&ex->wake);
    pthread_mutex_unlock(&ex->mu);
    for (int32_t i = 0; i < ex->started; i++) pthread_join(ex->workers[i], NULL);
    ex->started = 0;
  }
}

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
  ert_exec exec;
  bool sync_ready;          /* mutex and condition variables initialised */
  atomic_bool in_use;       /* a guarded call is running (see Threads in edgert.h) */
  worker_arg *wargs;
  ert_partitions *partitions; /* backends' per-session state, NULL when none */
  uint32_t *params;         /* parameter words of nodes with BOUNDS rules, or NULL */
  bool shapes_dirty;        /* an input shape changed since the last shape pass */
#if defined(ERT_X86_KERNELS)
  float *layout_mem;        /* reordered weights of the NHWC layers (layout.c), or NULL */
#endif
  char error[512];
};

void edgert_session_options_init(edgert_session_options *opts) {
  if (opts == NULL) return;
  memset(opts, 0, sizeof *opts);
  opts->threads = 1;
}

void edgert_session_destroy(edgert_session *s) {
  if (s == NULL) return;
  if (s->sync_ready) {
    pool_stop(&s->exec);
    pthread_cond_destroy(&s->exec.done);
    pthread_cond_destroy(&s->exec.wake);
    pthread_mutex_destroy(&s->exec.mu);
  }
  ert_partitions_stop(s->partitions);
  ert_free(s->exec.workers);
#if defined(ERT_X86_KERNELS)
  ert_free((void *)s->exec.ranges);
#endif
  ert_free(s->wargs);
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

static edgert_status start_pool(edgert_session *s, int32_t threads) {
  ert_exec *ex = &s->exec;
  ex->threads = threads;
  atomic_init(&ex->busy, false);
  atomic_init(&ex->stop, false);
  atomic_init(&ex->job, 0);
#if !defined(ERT_X86_KERNELS)
  atomic_init(&ex->next, 0);
#endif
  ex->error = s->error;
  ex->error_size = sizeof s->error;
  if (pthread_mutex_init(&ex->mu, NULL) != 0) return EDGERT_ERR_THREADS;
  if (pthread_cond_init(&ex->wake, NULL) != 0) {
    pthread_mutex_destroy(&ex->mu);
    return EDGERT_ERR_THREADS;
  }
  if (pthread_cond_init(&ex->done, NULL) != 0) {
    pthread_cond_destroy(&ex->wake);
    pthread_mutex_destroy(&ex->mu);
    return EDGERT_ERR_THREADS;
  }
  s->sync_ready = true;
  if (threads <= 1) return EDGERT_OK;
  ex->workers = ert_calloc((size_t)threads - 1, sizeof *ex->workers);
  s->wargs = ert_calloc((size_t)threads - 1, sizeof *s->wargs);
  if (ex->workers == NULL || s->wargs == NULL) return EDGERT_ERR_NO_MEMORY;
#if defined(ERT_X86_KERNELS)
  ex->ranges = ert_aligned_alloc(64, (size_t)threads * RANGE_STRIDE * sizeof *ex->ranges);
  if (ex->ranges == NULL) return EDGERT_ERR_NO_MEMORY;
#endif
  for (int32_t i = 0; i < threads - 1; i++) {
    s->wargs[i].ex = ex;
    s->wargs[i].id = i + 1;
    if (pthread_create(&ex->workers[i], NULL, worker_main, &s->wargs[i]) != 0)
      return EDGERT_ERR_THREADS;
    ex->started++;
  }
  return EDGERT_OK;
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
  edgert_status st = start_pool(s, opts->threads);
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
static edgert_status run(edgert_session *s, uint64_t *node_ns) {
  const edgert_model *m = s->model;
  s->exec.failed = 0;
  if (s->shapes_dirty) {
    s->error[0] = '\0';
    ert_err e = {s->error, sizeof s->error};
    edgert_status st = ert_bounds_apply(m, s->tensors, s->nodes, &e);
    if (st != EDGERT_OK) return st;
    s->shapes_dirty = false;
  }
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
