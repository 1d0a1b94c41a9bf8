/* classify.c: run an image classifier converted to a .edgert file, from C.
 *
 *   classify MODEL.edgert INPUT.bin [LABEL...]
 *
 * INPUT.bin is the model's input tensor as raw bytes (for a float32 input: little-endian
 * floats in C order), already preprocessed; `python examples/classify.py IMAGE
 * --save-input INPUT.bin` writes it for the orientation model. The program prints the
 * first output's values and the top class (named by LABEL number k when given).
 *
 * Every edgert call that returns a status is checked: on failure the program prints the
 * status and the library's message, frees what it made, and exits with 1.
 *
 * Build: see CMakeLists.txt (find_package(edgert)) and Makefile (pkg-config) beside it.
 */
#include <edgert.h>

#include <stdio.h>
#include <stdlib.h>

/* Reads the whole of `path` into a new buffer, which must hold exactly `want` bytes. */
static void *read_input(const char *path, size_t want) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return NULL;
  }
  void *data = malloc(want + 1);
  size_t got = data ? fread(data, 1, want + 1, f) : 0;
  fclose(f);
  if (data && got != want) {
    fprintf(stderr, "%s: %zu bytes, the model's input takes %zu\n", path, got, want);
    free(data);
    data = NULL;
  }
  return data;
}

/* Value k of an output as a float: float32 as is, int8 and uint8 dequantized. */
static float output_value(const edgert_tensor_info *info, const void *data, size_t k) {
  switch (info->dtype) {
    case EDGERT_FLOAT32: return ((const float *)data)[k];
    case EDGERT_INT8: return info->scale * (float)(((const int8_t *)data)[k] - info->zero_point);
    case EDGERT_UINT8: return info->scale * (float)(((const uint8_t *)data)[k] - info->zero_point);
    default: return 0.0f;
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.edgert INPUT.bin [LABEL...]\n", argv[0]);
    return 2;
  }
  int rc = 1;
  char err[256];
  edgert_model *model = NULL;
  edgert_session *session = NULL;
  void *input = NULL;

  /* Load: the whole file is checked here (format, checksum, every node), nowhere later. */
  edgert_status st = edgert_model_load_file(argv[1], &model, err, sizeof err);
  if (st != EDGERT_OK) {
    fprintf(stderr, "%s: %s: %s\n", argv[1], edgert_status_str(st), err);
    return 1;
  }
  edgert_tensor_info in, out;
  if ((st = edgert_model_input_info(model, 0, &in)) != EDGERT_OK ||
      (st = edgert_model_output_info(model, 0, &out)) != EDGERT_OK) {
    fprintf(stderr, "%s: %s: a classifier has one input and an output\n", argv[1], edgert_status_str(st));
    goto done;
  }
  if (out.dtype != EDGERT_FLOAT32 && out.dtype != EDGERT_INT8 && out.dtype != EDGERT_UINT8) {
    fprintf(stderr, "%s: output '%s' has dtype %d, not a score type\n", argv[1], out.name, (int)out.dtype);
    goto done;
  }
  if (!(input = read_input(argv[2], in.nbytes))) goto done;

  /* A session: its arena (edgert_model_arena_bytes) is allocated once, here. */
  edgert_session_options opts;
  edgert_session_options_init(&opts);
  opts.threads = 1;
  if ((st = edgert_session_create(model, &opts, &session)) != EDGERT_OK) {
    fprintf(stderr, "session: %s: %s\n", edgert_status_str(st), edgert_session_last_error(NULL));
    goto done;
  }
  /* Input in, run (no allocation, no checks: the model was checked at load). */
  if ((st = edgert_session_set_input(session, 0, input, in.nbytes)) != EDGERT_OK ||
      (st = edgert_session_run(session)) != EDGERT_OK) {
    fprintf(stderr, "run: %s: %s\n", edgert_status_str(st), edgert_session_last_error(session));
    goto done;
  }
  const void *scores = edgert_session_output_data(session, 0);
  if (!scores) {
    fprintf(stderr, "run: no output 0\n");
    goto done;
  }

  size_t n = 1, best = 0;
  for (int32_t d = 0; d < out.ndim; d++) n *= (size_t)out.shape[d];
  printf("%s:", out.name);
  for (size_t k = 0; k < n; k++) {
    float v = output_value(&out, scores, k);
    printf(" %.6f", v);
    if (v > output_value(&out, scores, best)) best = k;
  }
  printf("\ntop: %zu", best);
  if (best + 3 < (size_t)argc) printf(" (%s)", argv[best + 3]);
  printf(" %.6f\n", output_value(&out, scores, best));
  rc = 0;

done:
  edgert_session_destroy(session); /* NULL is fine for both */
  edgert_model_free(model);
  free(input);
  return rc;
}
