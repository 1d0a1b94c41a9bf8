/* exec.h: the execution context a kernel's eval receives (ert_exec) and the worker pool
 * behind it (exec.c). Not installed.
 *
 * Contract
 * --------
 * Kernels use the first part only and treat ert_exec as opaque: ert_parallel_for,
 * ert_exec_threads, ert_pixel_parts and ert_run_fail. They never read its fields.
 *
 * Ownership: the owner of an ert_exec (a session, session.c) embeds it zeroed, calls
 * ert_exec_start once and ert_exec_stop once (also after a failed start); the pool's
 * threads, their arrays and its mutex and condition variables belong to the ert_exec
 * from start to stop. The message buffer given to ert_exec_start stays the owner's and
 * must outlive the ert_exec.
 *
 * Threading: one thread drives an ert_exec at a time (the session's guarded call):
 * ert_parallel_for, ert_run_fail and the owner's reads of `failed` / `fail_status` run
 * on that thread. Tasks given to ert_parallel_for run on it and on the workers, over
 * disjoint ranges; they must not call ert_run_fail. A call of ert_parallel_for from
 * inside a task runs its range serially on the calling thread. */
#ifndef ERT_EXEC_H_
#define ERT_EXEC_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgert.h"

/* ---- what kernels use ------------------------------------------------------------ */

/* Execution context handed to eval: the session's worker pool. */
typedef struct ert_exec ert_exec;
typedef void (*ert_task_fn)(void *arg, size_t begin, size_t end);
/* Runs fn over [0, n) split into contiguous chunks across the session's threads
 * (the calling thread takes part); returns when all chunks are done. */
void ert_parallel_for(ert_exec *ex, size_t n, ert_task_fn fn, void *arg);
/* The threads ert_parallel_for runs on (1 without a started pool). */
int32_t ert_exec_threads(const ert_exec *ex);
#if defined(ERT_X86_KERNELS)
/* The parts the NHWC layers cut their m pixels into (part q: pixels q*m/parts to
 * (q+1)*m/parts, src/layout.c): up to `most`, of 8 pixels or more. The GEMMs, the
 * depthwise layers and the binary ops cut the same way, so at two threads every NHWC
 * layer splits its pixels at m / 2 and a thread reads what its own core wrote. */
static inline size_t ert_pixel_parts(int64_t m, size_t most) {
  const int64_t p = m / 8;
  return p < 1 ? 1 : (size_t)p < most ? (size_t)p : most;
}
#endif

/* Reports bad run-time data from eval (see the kernel contract in internal.h): the
 * first call of a run keeps its status and message (the session's last_error). Called
 * by eval itself, on the session's calling thread (check before ert_parallel_for, not
 * inside tasks); a no-op when ex is NULL. */
void ert_run_fail(ert_exec *ex, edgert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- the owner's side (session.c) ------------------------------------------------ */

typedef struct ert_worker ert_worker; /* one worker's start argument (exec.c) */

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
  int failed;               /* ert_run_fail was called during the current run; the owner
                               clears it before a run */
  edgert_status fail_status;
  char *error;              /* the owner's message buffer */
  size_t error_size;
  ert_task_fn fn;           /* the current job, written before its number is published */
  void *arg;
  size_t n, pieces;
  ert_worker *wargs;        /* the workers' start arguments */
  bool sync_ready;          /* mu, wake and done initialised */
};

/* Starts the pool of a zeroed ert_exec: threads in all (the caller's included, so
 * threads - 1 workers), messages of ert_run_fail into error[0, error_size). On failure
 * (EDGERT_ERR_THREADS, EDGERT_ERR_NO_MEMORY) the workers already started keep running
 * until ert_exec_stop. */
edgert_status ert_exec_start(ert_exec *ex, int32_t threads, char *error, size_t error_size);
/* Stops and joins the workers and frees what ert_exec_start allocated; fine on a zeroed
 * or partly started ert_exec. */
void ert_exec_stop(ert_exec *ex);

#endif /* ERT_EXEC_H_ */
