/* partition_test: the partition backend contract of edgert.h, in C, with a tiny
 * backend that adds 1 to every float of its single boundary input.
 *
 *   partition_test MODEL.edgert
 *
 * MODEL (built by tests/test_partitions.py): x f32[2,3] -> partition_0 (onnxruntime
 * kind) -> a -> relu -> b -> partition_1 (litert kind) -> y, so y = relu(x + 1) + 1.
 * Checks: the partition queries; EDGERT_ERR_NO_BACKEND naming the partition and its
 * kind, before any prepare; prepare in execution order, invoke once per run, release
 * in reverse order; no allocation by edgert in run; an invoke failure stopping the run
 * with EDGERT_ERR_BACKEND and the backend's message in last_error; a prepare failure
 * failing session creation with its status and releasing what was prepared.
 * Exit status 0 on success, 1 on the first failed check (with a message). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert.h"

static int failures = 0;

#define CHECK(cond, ...)                                      \
  do {                                                        \
    if (!(cond)) {                                            \
      fprintf(stderr, "partition_test:%d: ", __LINE__);       \
      fprintf(stderr, __VA_ARGS__);                           \
      fprintf(stderr, "\n");                                  \
      failures++;                                             \
      return;                                                 \
    }                                                         \
  } while (0)

/* The backend: logs every call as "P<k> " / "I<k> " / "R<k> " (k = partition number). */
typedef struct add_one {
  char log[512];
  int fail_prepare; /* partition number whose prepare fails, or -1 */
  int fail_invoke;  /* partition number whose invoke fails, or -1 */
  size_t count[2];  /* floats in and out of each partition */
} add_one;

typedef struct add_one_state {
  add_one *b;
  uint32_t index;
  size_t count;
} add_one_state;

static void log_event(add_one *b, char what, uint32_t index) {
  size_t n = strlen(b->log);
  snprintf(b->log + n, sizeof b->log - n, "%c%u ", what, (unsigned)index);
}

static edgert_status ao_prepare(void *user, const edgert_model *model, const edgert_partition_info *p,
                                void **state, char *msg, size_t msg_size) {
  add_one *b = user;
  log_event(b, 'P', p->index);
  if ((int)p->index == b->fail_prepare) {
    snprintf(msg, msg_size, "cannot read the payload of %s (%zu bytes)", p->name, p->payload_bytes);
    return EDGERT_ERR_BACKEND;
  }
  edgert_tensor_info in, out;
  size_t pos = p->index; /* partition numbers follow execution order in this model */
  if (p->n_inputs != 1 || p->n_outputs != 1 || edgert_model_partition_tensor(model, pos, 0, 0, &in) != EDGERT_OK ||
      edgert_model_partition_tensor(model, pos, 1, 0, &out) != EDGERT_OK || in.nbytes != out.nbytes ||
      in.dtype != EDGERT_FLOAT32) {
    snprintf(msg, msg_size, "add_one runs one float input to one output of the same size");
    return EDGERT_ERR_UNSUPPORTED;
  }
  add_one_state *s = malloc(sizeof *s);
  if (s == NULL) return EDGERT_ERR_NO_MEMORY;
  s->b = b;
  s->index = p->index;
  s->count = in.nbytes / sizeof(float);
  *state = s;
  return EDGERT_OK;
}

static edgert_status ao_invoke(void *user, void *state, const void *const *inputs, void *const *outputs, char *msg,
                               size_t msg_size) {
  add_one *b = user;
  add_one_state *s = state;
  log_event(b, 'I', s->index);
  if ((int)s->index == b->fail_invoke) {
    snprintf(msg, msg_size, "boom in partition %u", (unsigned)s->index);
    return EDGERT_ERR_BACKEND;
  }
  /* The run's boundary shapes (a static file: the model's); nothing past the end. */
  edgert_tensor_info t;
  if (edgert_partition_call_tensor(0, 0, &t) != EDGERT_OK || t.nbytes != s->count * sizeof(float) ||
      edgert_partition_call_tensor(1, 0, &t) != EDGERT_OK || t.nbytes != s->count * sizeof(float) ||
      edgert_partition_call_tensor(0, 1, &t) != EDGERT_ERR_INVALID_ARGUMENT) {
    snprintf(msg, msg_size, "edgert_partition_call_tensor disagrees with the model");
    return EDGERT_ERR_BACKEND;
  }
  const float *x = inputs[0];
  float *y = outputs[0];
  for (size_t i = 0; i < s->count; i++) y[i] = x[i] + 1.0f;
  return EDGERT_OK;
}

static void ao_release(void *user, void *state) {
  add_one *b = user;
  add_one_state *s = state;
  log_event(b, 'R', s->index);
  free(s);
}

static void backend_init(add_one *b, edgert_backend *be) {
  memset(b, 0, sizeof *b);
  b->fail_prepare = -1;
  b->fail_invoke = -1;
  be->user = b;
  be->prepare = ao_prepare;
  be->invoke = ao_invoke;
  be->release = ao_release;
}

static const float X[6] = {-3.0f, -1.0f, -0.5f, 0.0f, 0.25f, 2.0f};

static void test_queries(edgert_model *m) {
  CHECK(edgert_model_num_partitions(m) == 2, "num_partitions %zu", edgert_model_num_partitions(m));
  CHECK(edgert_model_num_partitions(NULL) == 0, "num_partitions(NULL)");
  edgert_partition_info p;
  CHECK(edgert_model_partition_info(m, 0, &p) == EDGERT_OK, "partition_info 0");
  CHECK(p.node == 0 && p.backend == EDGERT_BACKEND_ONNXRUNTIME && p.index == 0 && strcmp(p.name, "partition_0") == 0 &&
            p.n_inputs == 1 && p.n_outputs == 1 && p.payload_bytes == 7 && memcmp(p.payload, "ONNX:p0", 7) == 0,
        "partition 0: node %u backend %d index %u name %s payload %zu", (unsigned)p.node, (int)p.backend,
        (unsigned)p.index, p.name, p.payload_bytes);
  CHECK(edgert_model_partition_info(m, 1, &p) == EDGERT_OK, "partition_info 1");
  CHECK(p.node == 2 && p.backend == EDGERT_BACKEND_LITERT && p.index == 1 && strcmp(p.name, "partition_1") == 0,
        "partition 1: node %u backend %d", (unsigned)p.node, (int)p.backend);
  CHECK(edgert_model_partition_info(m, 2, &p) == EDGERT_ERR_INVALID_ARGUMENT, "partition_info past the end");
  CHECK(edgert_model_partition_info(NULL, 0, &p) == EDGERT_ERR_INVALID_ARGUMENT, "partition_info(NULL)");
  edgert_tensor_info t;
  CHECK(edgert_model_partition_tensor(m, 0, 0, 0, &t) == EDGERT_OK && strcmp(t.name, "x") == 0 && t.nbytes == 24,
        "partition 0 input 0");
  CHECK(edgert_model_partition_tensor(m, 1, 1, 0, &t) == EDGERT_OK && strcmp(t.name, "y") == 0, "partition 1 output");
  CHECK(edgert_model_partition_tensor(m, 0, 0, 1, &t) == EDGERT_ERR_INVALID_ARGUMENT, "the payload is not a boundary");
  CHECK(edgert_model_partition_tensor(m, 0, 1, 1, &t) == EDGERT_ERR_INVALID_ARGUMENT, "output past the end");
  CHECK(edgert_partition_call_tensor(0, 0, &t) == EDGERT_ERR_INVALID_ARGUMENT, "call_tensor outside an invoke");
}

static void test_no_backend(edgert_model *m) {
  add_one b;
  edgert_backend be;
  backend_init(&b, &be);
  edgert_session_options o;
  edgert_session_options_init(&o);
  edgert_session *s = NULL;
  CHECK(edgert_session_create(m, &o, &s) == EDGERT_ERR_NO_BACKEND && s == NULL, "no backends: NO_BACKEND");
  const char *e = edgert_session_last_error(NULL);
  CHECK(strstr(e, "partition_0") && strstr(e, "onnxruntime"), "message: %s", e);
  CHECK(strcmp(edgert_status_str(EDGERT_ERR_NO_BACKEND), "unknown status") != 0 &&
            strcmp(edgert_status_str(EDGERT_ERR_BACKEND), "unknown status") != 0,
        "status names");

  o.backends[EDGERT_BACKEND_ONNXRUNTIME] = &be; /* litert missing: nothing may be prepared */
  CHECK(edgert_session_create(m, &o, &s) == EDGERT_ERR_NO_BACKEND && s == NULL, "one backend: NO_BACKEND");
  e = edgert_session_last_error(NULL);
  CHECK(strstr(e, "partition_1") && strstr(e, "litert") && strstr(e, ".tflite"), "message: %s", e);
  CHECK(b.log[0] == '\0', "backend called although a kind had no backend: %s", b.log);
}

static void test_run(edgert_model *m) {
  add_one b;
  edgert_backend be;
  backend_init(&b, &be);
  edgert_session_options o;
  edgert_session_options_init(&o);
  o.backends[EDGERT_BACKEND_ONNXRUNTIME] = &be;
  o.backends[EDGERT_BACKEND_LITERT] = &be;
  edgert_session *s = NULL;
  CHECK(edgert_session_create(m, &o, &s) == EDGERT_OK, "create: %s", edgert_session_last_error(NULL));
  CHECK(strcmp(b.log, "P0 P1 ") == 0, "after create: %s", b.log);
  for (int r = 0; r < 3; r++) {
    CHECK(edgert_session_set_input(s, 0, X, sizeof X) == EDGERT_OK, "set_input");
    uint64_t before = edgert_alloc_count();
    edgert_status st = edgert_session_run(s);
    CHECK(st == EDGERT_OK, "run: %s", edgert_session_last_error(s));
    CHECK(edgert_alloc_count() == before, "run allocated");
    const float *y = edgert_session_output_data(s, 0);
    for (int i = 0; i < 6; i++) {
      float want = (X[i] + 1.0f > 0.0f ? X[i] + 1.0f : 0.0f) + 1.0f;
      CHECK(y[i] == want, "y[%d] = %g, want %g", i, (double)y[i], (double)want);
    }
  }
  CHECK(strcmp(b.log, "P0 P1 I0 I1 I0 I1 I0 I1 ") == 0, "after runs: %s", b.log);
  float y[6];
  const void *ins[1] = {X};
  void *outs[1] = {y};
  CHECK(edgert_session_run_io(s, ins, 1, outs, 1) == EDGERT_OK && y[0] == 1.0f && y[5] == 4.0f, "run_io");

  /* An invoke failure stops the run after that node, with the backend's message. */
  b.fail_invoke = 0;
  b.log[0] = '\0';
  CHECK(edgert_session_set_input(s, 0, X, sizeof X) == EDGERT_OK, "set_input");
  edgert_status st = edgert_session_run(s);
  const char *e = edgert_session_last_error(s);
  CHECK(st == EDGERT_ERR_BACKEND, "failed invoke: status %d", (int)st);
  CHECK(strstr(e, "partition_0") && strstr(e, "onnxruntime") && strstr(e, "boom in partition 0"), "message: %s", e);
  CHECK(strcmp(b.log, "I0 ") == 0, "the run went on after a failed invoke: %s", b.log);
  b.fail_invoke = 1;
  st = edgert_session_run_io(s, ins, 1, outs, 1);
  e = edgert_session_last_error(s);
  CHECK(st == EDGERT_ERR_BACKEND && strstr(e, "partition_1") && strstr(e, "litert") && strstr(e, "boom in partition 1"),
        "run_io failed invoke: %d %s", (int)st, e);
  b.fail_invoke = -1;
  CHECK(edgert_session_run_io(s, ins, 1, outs, 1) == EDGERT_OK && y[5] == 4.0f, "run after a failure");

  b.log[0] = '\0';
  edgert_session_destroy(s);
  CHECK(strcmp(b.log, "R1 R0 ") == 0, "destroy: %s", b.log);
}

static void test_prepare_failure(edgert_model *m) {
  add_one b;
  edgert_backend be;
  backend_init(&b, &be);
  b.fail_prepare = 1;
  edgert_session_options o;
  edgert_session_options_init(&o);
  o.backends[EDGERT_BACKEND_ONNXRUNTIME] = &be;
  o.backends[EDGERT_BACKEND_LITERT] = &be;
  edgert_session *s = NULL;
  edgert_status st = edgert_session_create(m, &o, &s);
  const char *e = edgert_session_last_error(NULL);
  CHECK(st == EDGERT_ERR_BACKEND && s == NULL, "failed prepare: status %d", (int)st);
  CHECK(strstr(e, "partition_1") && strstr(e, "cannot read the payload of partition_1 (7 bytes)"), "message: %s", e);
  CHECK(strcmp(b.log, "P0 P1 R0 ") == 0, "prepared partitions must be released: %s", b.log);

  /* Two sessions on one model: each has its own state. */
  b.fail_prepare = -1;
  b.log[0] = '\0';
  edgert_session *s1 = NULL, *s2 = NULL;
  CHECK(edgert_session_create(m, &o, &s1) == EDGERT_OK && edgert_session_create(m, &o, &s2) == EDGERT_OK, "two sessions");
  float y[6];
  const void *ins[1] = {X};
  void *outs[1] = {y};
  CHECK(edgert_session_run_io(s2, ins, 1, outs, 1) == EDGERT_OK && y[5] == 4.0f, "second session");
  edgert_session_destroy(s1);
  edgert_session_destroy(s2);
  CHECK(strcmp(b.log, "P0 P1 P0 P1 I0 I1 R1 R0 R1 R0 ") == 0, "two sessions: %s", b.log);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: partition_test MODEL.edgert\n");
    return 2;
  }
  char err[512];
  edgert_model *m = NULL;
  if (edgert_model_load_file(argv[1], &m, err, sizeof err) != EDGERT_OK) {
    fprintf(stderr, "partition_test: %s\n", err);
    return 1;
  }
  test_queries(m);
  test_no_backend(m);
  test_run(m);
  test_prepare_failure(m);
  edgert_model_free(m);
  if (failures == 0) printf("partition_test: ok\n");
  return failures ? 1 : 0;
}
