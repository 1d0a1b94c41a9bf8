/* exec.c: the worker pool behind ert_exec (exec.h): ert_parallel_for spreads kernel
 * work over a session's worker threads; ert_run_fail records a kernel's run-time error.
 *
 * Everything the pool needs is allocated in ert_exec_start; ert_parallel_for allocates
 * nothing. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "clock.h"
#include "exec.h"
#include "internal.h" /* ert_calloc, ert_aligned_alloc, ert_free */

#define JOB_SHIFT 17
#define JOB_CLOSED ((uint64_t)1 << 16)
#define JOB_MEMBERS ((uint64_t)0xFFFF)

struct ert_worker {
  ert_exec *ex;
  int32_t id; /* 1 .. threads-1 */
};

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
  ert_worker *wa = (ert_worker *)p;
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

int32_t ert_exec_threads(const ert_exec *ex) {
  return ex == NULL || ex->started == 0 ? 1 : ex->threads;
}

void ert_run_fail(ert_exec *ex, edgert_status status, const char *fmt, ...) {
  if (ex == NULL || ex->failed) return; /* the first failure of a run keeps its message */
  ex->failed = 1;
  ex->fail_status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ex->error, ex->error_size, fmt, ap);
  va_end(ap);
}

edgert_status ert_exec_start(ert_exec *ex, int32_t threads, char *error, size_t error_size) {
  ex->threads = threads;
  atomic_init(&ex->busy, false);
  atomic_init(&ex->stop, false);
  atomic_init(&ex->job, 0);
#if !defined(ERT_X86_KERNELS)
  atomic_init(&ex->next, 0);
#endif
  ex->error = error;
  ex->error_size = error_size;
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
  ex->sync_ready = true;
  if (threads <= 1) return EDGERT_OK;
  ex->workers = ert_calloc((size_t)threads - 1, sizeof *ex->workers);
  ex->wargs = ert_calloc((size_t)threads - 1, sizeof *ex->wargs);
  if (ex->workers == NULL || ex->wargs == NULL) return EDGERT_ERR_NO_MEMORY;
#if defined(ERT_X86_KERNELS)
  ex->ranges = ert_aligned_alloc(64, (size_t)threads * RANGE_STRIDE * sizeof *ex->ranges);
  if (ex->ranges == NULL) return EDGERT_ERR_NO_MEMORY;
#endif
  for (int32_t i = 0; i < threads - 1; i++) {
    ex->wargs[i].ex = ex;
    ex->wargs[i].id = i + 1;
    if (pthread_create(&ex->workers[i], NULL, worker_main, &ex->wargs[i]) != 0)
      return EDGERT_ERR_THREADS;
    ex->started++;
  }
  return EDGERT_OK;
}

void ert_exec_stop(ert_exec *ex) {
  if (ex->sync_ready) {
    if (ex->started > 0) {
      pthread_mutex_lock(&ex->mu);
      atomic_store(&ex->stop, true);
      pthread_cond_broadcast(&ex->wake);
      pthread_mutex_unlock(&ex->mu);
      for (int32_t i = 0; i < ex->started; i++) pthread_join(ex->workers[i], NULL);
      ex->started = 0;
    }
    pthread_cond_destroy(&ex->done);
    pthread_cond_destroy(&ex->wake);
    pthread_mutex_destroy(&ex->mu);
    ex->sync_ready = false;
  }
  ert_free(ex->workers);
#if defined(ERT_X86_KERNELS)
  ert_free((void *)ex->ranges);
#endif
  ert_free(ex->wargs);
  ex->workers = NULL;
#if defined(ERT_X86_KERNELS)
  ex->ranges = NULL;
#endif
  ex->wargs = NULL;
}
