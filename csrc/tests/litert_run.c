/* litert_run: runs one .tflite file through the LiteRT backend of edgert-run
 * (tools/litert_backend.c) exactly as a partition node runs it: boundary tensors given
 * as .npy files, copied in and out of LiteRT's buffers. Tests use it to check the
 * backend on its own (host and QEMU) and to time one boundary crossing.
 *
 *   litert_run --lib PATH/libLiteRt.so [--delegate PATH.so [--delegate-option K=V]...]
 *              MODEL.tflite --input FILE.npy... --output FILE.npy... [--repeat N]
 *
 * Outputs are written as float32/int8/... with the shapes of the --output files given
 * as templates: each --output names an existing .npy whose dtype and shape the output
 * has; it is overwritten with the result. The mean time of one run (copy in, LiteRT,
 * copy out) goes to stderr as "litert_run: N run(s), mean X us". Exit status 0, or 1
 * with the backend's message. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tools/litert_backend.h"
#include "../tools/npy.h"

enum { MAX_TENSORS = 64 };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int read_file(const char *path, void **data, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  int rc = -1;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (*data = malloc((size_t)n)) != NULL) {
      if (fread(*data, 1, (size_t)n, f) == (size_t)n) {
        *size = (size_t)n;
        rc = 0;
      } else {
        free(*data);
      }
    }
  }
  fclose(f);
  return rc;
}

int main(int argc, char **argv) {
  litert_backend_config cfg = {0};
  const char *model_path = NULL, *ins[MAX_TENSORS], *outs[MAX_TENSORS];
  const char *keys[MAX_TENSORS], *values[MAX_TENSORS];
  char kv[MAX_TENSORS][256];
  size_t n_in = 0, n_out = 0, n_opt = 0;
  long repeat = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--lib") == 0 && v) cfg.lib_path = argv[++i];
    else if (strcmp(a, "--delegate") == 0 && v) cfg.delegate_path = argv[++i];
    else if (strcmp(a, "--delegate-option") == 0 && v && n_opt < MAX_TENSORS) {
      snprintf(kv[n_opt], sizeof kv[n_opt], "%s", argv[++i]);
      char *eq = strchr(kv[n_opt], '=');
      if (eq == NULL) {
        fprintf(stderr, "litert_run: --delegate-option needs KEY=VALUE\n");
        return 2;
      }
      *eq = '\0';
      keys[n_opt] = kv[n_opt];
      values[n_opt++] = eq + 1;
    } else if (strcmp(a, "--input") == 0 && v && n_in < MAX_TENSORS) ins[n_in++] = argv[++i];
    else if (strcmp(a, "--output") == 0 && v && n_out < MAX_TENSORS) outs[n_out++] = argv[++i];
    else if (strcmp(a, "--repeat") == 0 && v) repeat = strtol(argv[++i], NULL, 10);
    else if (a[0] != '-' && model_path == NULL) model_path = a;
    else {
      fprintf(stderr, "litert_run: bad argument '%s'\n", a);
      return 2;
    }
  }
  if (cfg.lib_path == NULL || model_path == NULL || repeat < 1) {
    fprintf(stderr, "usage: litert_run --lib LIB [--delegate SO [--delegate-option K=V]...] MODEL.tflite "
                    "--input X.npy... --output Y.npy... [--repeat N]\n");
    return 2;
  }
  cfg.delegate_keys = keys;
  cfg.delegate_values = values;
  cfg.n_delegate_options = n_opt;

  int rc = 1;
  char msg[1024];
  void *payload = NULL;
  size_t payload_bytes = 0;
  npy_array in[MAX_TENSORS], out[MAX_TENSORS];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  size_t in_bytes[MAX_TENSORS], out_bytes[MAX_TENSORS];
  const void *in_ptr[MAX_TENSORS];
  void *out_ptr[MAX_TENSORS];
  litert_backend *lb = NULL;
  litert_partition *p = NULL;

  if (read_file(model_path, &payload, &payload_bytes) != 0) {
    fprintf(stderr, "litert_run: cannot read '%s'\n", model_path);
    goto done;
  }
  for (size_t k = 0; k < n_in; k++) {
    if (npy_read(ins[k], &in[k], msg, sizeof msg) != 0) {
      fprintf(stderr, "litert_run: %s\n", msg);
      goto done;
    }
    in_bytes[k] = in[k].nbytes;
    in_ptr[k] = in[k].data;
  }
  for (size_t k = 0; k < n_out; k++) {
    if (npy_read(outs[k], &out[k], msg, sizeof msg) != 0) {
      fprintf(stderr, "litert_run: %s\n", msg);
      goto done;
    }
    out_bytes[k] = out[k].nbytes;
    out_ptr[k] = out[k].data;
  }
  edgert_status st = litert_backend_open(&cfg, &lb, msg, sizeof msg);
  if (st == EDGERT_OK)
    st = litert_partition_create(lb, payload, payload_bytes, n_in, in_bytes, n_out, out_bytes, &p, msg, sizeof msg);
  if (st != EDGERT_OK) {
    fprintf(stderr, "litert_run: %s (%s)\n", msg, edgert_status_str(st));
    goto done;
  }
  /* one warm-up run, then the timed ones */
  double total = 0;
  for (long r = 0; r <= repeat; r++) {
    double t0 = now_us();
    st = litert_partition_run(p, in_ptr, out_ptr, msg, sizeof msg);
    if (r > 0) total += now_us() - t0;
    if (st != EDGERT_OK) {
      fprintf(stderr, "litert_run: %s\n", msg);
      goto done;
    }
  }
  fprintf(stderr, "litert_run: %ld run(s), mean %.3f us\n", repeat, total / (double)repeat);
  for (size_t k = 0; k < n_out; k++) {
    if (npy_write(outs[k], out[k].dtype, out[k].ndim, out[k].shape, out[k].data, out[k].nbytes, msg, sizeof msg)) {
      fprintf(stderr, "litert_run: %s\n", msg);
      goto done;
    }
  }
  rc = 0;
done:
  litert_partition_destroy(p);
  litert_backend_close(lb);
  for (size_t k = 0; k < n_in; k++) npy_free(&in[k]);
  for (size_t k = 0; k < n_out; k++) npy_free(&out[k]);
  free(payload);
  return rc;
}
