/* session_test: the thread contract of one session, in C.
 *
 *   session_test MODEL.edgert [THREADS] [RUNS]
 *
 * Computes the outputs of RUNS distinct inputs (deterministic pseudo-random floats)
 * one by one, then lets THREADS threads call edgert_session_run_io on the same session
 * with those inputs, mixed with bare edgert_session_run and edgert_session_set_input
 * calls. Every call must return EDGERT_OK or EDGERT_ERR_BUSY, and every run_io that
 * returns EDGERT_OK must give exactly the one-by-one outputs of its input: an
 * overlapping call fails, it never corrupts a result. Float32 inputs only.
 * Exit status 0 on success, 1 on a wrong result or status (with a message). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert.h"

typedef struct shared {
  edgert_model *model;
  edgert_session *session;
  size_t n_in, n_out, runs;
  size_t in_bytes, out_bytes;  /* of all inputs (outputs) of one run, back to back */
  size_t in_size[8], out_size[8];
  unsigned char *inputs;       /* runs * in_bytes */
  unsigned char *want;         /* runs * out_bytes */
  atomic_long ok, busy, wrong, other;
} shared;

typedef struct worker {
  shared *sh;
  int id;
} worker;

static void fill(float *x, size_t n, unsigned seed) {
  uint32_t s = 2463534242u ^ (seed * 2654435761u);
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x[i] = (float)((int32_t)(s % 2001u) - 1000) / 250.0f;
  }
}

/* Pointers to run r's inputs (outputs) inside a back-to-back buffer. */
static void split(const shared *sh, unsigned char *base, const size_t *sizes, size_t n,
                  void **ptrs) {
  for (size_t k = 0; k < n; k++) {
    ptrs[k] = base;
    base += sizes[k];
  }
  (void)sh;
}

static void *work(void *p) {
  worker *w = (worker *)p;
  shared *sh = w->sh;
  unsigned char *out = malloc(sh->out_bytes ? sh->out_bytes : 1);
  if (out == NULL) {
    atomic_fetch_add(&sh->other, 1);
    return NULL;
  }
  for (size_t k = 0; k < 4 * sh->runs; k++) {
    const size_t r = (k * 7 + (size_t)w->id * 13) % sh->runs;
    void *in[8], *outs[8];
    split(sh, sh->inputs + r * sh->in_bytes, sh->in_size, sh->n_in, in);
    split(sh, out, sh->out_size, sh->n_out, outs);
    edgert_status st = edgert_session_run_io(sh->session, (const void *const *)in, sh->n_in,
                                             (void *const *)outs, sh->n_out);
    if (st == EDGERT_OK) {
      if (memcmp(out, sh->want + r * sh->out_bytes, sh->out_bytes) == 0)
        atomic_fetch_add(&sh->ok, 1);
      else
        atomic_fetch_add(&sh->wrong, 1);
    } else if (st == EDGERT_ERR_BUSY) {
      atomic_fetch_add(&sh->busy, 1);
    } else {
      atomic_fetch_add(&sh->other, 1);
    }
    /* Intruding calls: they may run or be refused, but never break a run_io. */
    st = (k % 2) ? edgert_session_run(sh->session)
                 : edgert_session_set_input(sh->session, 0, in[0], sh->in_size[0]);
    if (st != EDGERT_OK && st != EDGERT_ERR_BUSY) atomic_fetch_add(&sh->other, 1);
  }
  free(out);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: session_test MODEL.edgert [THREADS] [RUNS]\n");
    return 2;
  }
  const int threads = argc > 2 ? atoi(argv[2]) : 4;
  shared sh;
  memset(&sh, 0, sizeof sh);
  sh.runs = argc > 3 ? (size_t)atol(argv[3]) : 64;
  if (threads < 1 || threads > 64 || sh.runs < 1) return 2;
  char err[256];
  if (edgert_model_load_file(argv[1], &sh.model, err, sizeof err) != EDGERT_OK) {
    fprintf(stderr, "session_test: %s\n", err);
    return 1;
  }
  sh.n_in = edgert_model_num_inputs(sh.model);
  sh.n_out = edgert_model_num_outputs(sh.model);
  if (sh.n_in < 1 || sh.n_in > 8 || sh.n_out > 8) {
    fprintf(stderr, "session_test: needs 1 to 8 inputs and at most 8 outputs\n");
    return 1;
  }
  edgert_tensor_info info;
  for (size_t k = 0; k < sh.n_in; k++) {
    edgert_model_input_info(sh.model, k, &info);
    if (info.dtype != EDGERT_FLOAT32) {
      fprintf(stderr, "session_test: input %zu is not float32\n", k);
      return 1;
    }
    sh.in_size[k] = info.nbytes;
    sh.in_bytes += info.nbytes;
  }
  for (size_t k = 0; k < sh.n_out; k++) {
    edgert_model_output_info(sh.model, k, &info);
    sh.out_size[k] = info.nbytes;
    sh.out_bytes += info.nbytes;
  }
  sh.inputs = malloc(sh.runs * sh.in_bytes);
  sh.want = malloc(sh.runs * sh.out_bytes + 1);
  if (sh.inputs == NULL || sh.want == NULL) return 1;
  for (size_t r = 0; r < sh.runs; r++)
    fill((float *)(sh.inputs + r * sh.in_bytes), sh.in_bytes / 4, (unsigned)r + 1);
  if (edgert_session_create(sh.model, NULL, &sh.session) != EDGERT_OK) {
    fprintf(stderr, "session_test: %s\n", edgert_session_last_error(NULL));
    return 1;
  }
  for (size_t r = 0; r < sh.runs; r++) { /* one by one: the expected outputs */
    void *in[8], *outs[8];
    split(&sh, sh.inputs + r * sh.in_bytes, sh.in_size, sh.n_in, in);
    split(&sh, sh.want + r * sh.out_bytes, sh.out_size, sh.n_out, outs);
    edgert_status st = edgert_session_run_io(sh.session, (const void *const *)in, sh.n_in,
                                             (void *const *)outs, sh.n_out);
    if (st != EDGERT_OK) {
      fprintf(stderr, "session_test: %s: %s\n", edgert_status_str(st), edgert_session_last_error(sh.session));
      return 1;
    }
  }
  pthread_t tid[64];
  worker w[64];
  for (int t = 0; t < threads; t++) {
    w[t].sh = &sh;
    w[t].id = t;
    if (pthread_create(&tid[t], NULL, work, &w[t]) != 0) return 1;
  }
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  printf("session_test: %d threads, %ld ok, %ld busy, %ld wrong, %ld other\n", threads,
         atomic_load(&sh.ok), atomic_load(&sh.busy), atomic_load(&sh.wrong), atomic_load(&sh.other));
  const int fail = atomic_load(&sh.wrong) != 0 || atomic_load(&sh.other) != 0 || atomic_load(&sh.ok) == 0;
  edgert_session_destroy(sh.session);
  edgert_model_free(sh.model);
  free(sh.inputs);
  free(sh.want);
  return fail;
}
