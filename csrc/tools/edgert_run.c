/* edgert-run: runs an .edgert model on .npy inputs and writes .npy outputs.
 *
 *   edgert-run MODEL.edgert --input NAME=FILE.npy ... [--output-dir DIR]
 *              [--repeat N | --stream] [--threads N]
 *              [--fallback-lib PATH/libLiteRt.so [--delegate PATH.so [--delegate-option K=V]...]]
 *
 * --fallback-lib runs the model's litert partitions (docs/partitions.md) with LiteRT's
 * C API from that library (tools/litert_backend.c, loaded with dlopen); --delegate
 * applies a TFLite external delegate (e.g. libedgetpu.so.1) to them, with its options.
 *
 * Every input must be given, with the model's dtype and shape (a bounded dimension:
 * any size within its bounds, docs/runtime.md). Each output is written
 * to DIR/<name>.npy (DIR defaults to "."), with characters other than [A-Za-z0-9._-]
 * in the name replaced by '_'. The mean latency of the N runs goes to stderr. Exit
 * status 0 on success, 1 on any error (with a message), 2 on a usage error.
 *
 * --stream runs a sequence of frames through one session (a streaming model keeps its
 * state in it from frame to frame, docs/runtime.md "State"): every input file holds F
 * frames on axis 0 ([F, *the input's shape], the same F for every input), and every
 * output is written with the frames on axis 0 ([F, *the output's shape]). The mean
 * time per frame goes to stderr. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgert.h"
#include "litert_backend.h"
#include "npy.h"

static void usage(FILE *to) {
  fprintf(to,
          "usage: edgert-run MODEL.edgert --input NAME=FILE.npy ... [--output-dir DIR]\n"
          "                  [--repeat N | --stream] [--threads N]\n"
          "                  [--fallback-lib PATH/libLiteRt.so [--delegate PATH.so [--delegate-option K=V]...]]\n"
          "Runs the model on the given inputs and writes every output to DIR/<name>.npy.\n"
          "--stream: every input holds frames on axis 0; runs them in order through one session and writes\n"
          "every frame's outputs (frames on axis 0).\n"
          "--fallback-lib runs litert partitions with LiteRT (libLiteRt.so of the ai-edge-litert wheel);\n"
          "--delegate applies a TFLite external delegate to them.\n");
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int parse_count(const char *flag, const char *text, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 1 || v > max) {
    fprintf(stderr, "edgert-run: %s needs an integer in [1, %ld], got '%s'\n", flag, max, text);
    return -1;
  }
  *out = v;
  return 0;
}

static void print_shape(FILE *to, int32_t ndim, const int64_t *shape) {
  fputc('[', to);
  for (int32_t d = 0; d < ndim; d++) fprintf(to, d ? ", %lld" : "%lld", (long long)shape[d]);
  fputc(']', to);
}

static const char *dtype_name(int32_t dtype) {
  switch (dtype) {
    case EDGERT_FLOAT32: return "float32";
    case EDGERT_UINT8: return "uint8";
    case EDGERT_INT8: return "int8";
    case EDGERT_INT16: return "int16";
    case EDGERT_INT32: return "int32";
    case EDGERT_INT64: return "int64";
    case EDGERT_BOOL: return "bool";
    case EDGERT_FLOAT16: return "float16";
    default: return "unknown";
  }
}

/* Output file name: unsafe characters become '_', an empty name becomes output_<k>,
 * and a clash with an earlier output gets a _<k> suffix. */
static void output_file_name(const edgert_model *m, size_t k, char *out, size_t size) {
  edgert_tensor_info info;
  edgert_model_output_info(m, k, &info);
  size_t n = 0;
  for (const char *p = info.name; *p && n + 1 < size; p++) {
    char c = *p;
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
             c == '_' || c == '-';
    out[n++] = ok ? c : '_';
  }
  out[n] = '\0';
  if (n == 0 || strcmp(out, ".") == 0 || strcmp(out, "..") == 0) snprintf(out, size, "output_%zu", k);
  for (size_t j = 0; j < k; j++) {
    char prev[256];
    output_file_name(m, j, prev, sizeof prev);
    if (strcmp(prev, out) == 0) {
      size_t len = strlen(out);
      snprintf(out + len, size - len, "_%zu", k);
      break;
    }
  }
}

/* Writes output k (its info with `shape` of `ndim` dims, `nbytes` of data) to
 * OUT_DIR/<name>.npy and prints where; 0, or -1 after printing why. */
static int save_output(const edgert_model *m, size_t k, const char *out_dir, const edgert_tensor_info *info,
                       int32_t ndim, const int64_t *shape, const void *data, size_t nbytes) {
  char fname[256], path[4096], err[256];
  output_file_name(m, k, fname, sizeof fname);
  int n = snprintf(path, sizeof path, "%s/%s.npy", out_dir, fname);
  if (n < 0 || (size_t)n >= sizeof path) {
    fprintf(stderr, "edgert-run: output path too long\n");
    return -1;
  }
  if (npy_write(path, info->dtype, ndim, shape, data, nbytes, err, sizeof err) != 0) {
    fprintf(stderr, "edgert-run: output '%s': %s\n", info->name, err);
    return -1;
  }
  printf("%s: %s ", info->name, dtype_name(info->dtype));
  print_shape(stdout, ndim, shape);
  printf(" -> %s\n", path);
  return 0;
}


/* One model input (index j) of F frames: the .npy array a must be [F, *info's shape]. */
static int stream_frames(const edgert_tensor_info *info, const npy_array *a, int64_t *frames) {
  if (a->ndim != info->ndim + 1 || a->shape[0] < 1) return 0;
  for (int32_t d = 0; d < info->ndim; d++)
    if (a->shape[d + 1] != info->shape[d]) return 0;
  if (*frames != 0 && *frames != a->shape[0]) return 0;
  *frames = a->shape[0];
  return 1;
}

static void free_args(const char **input_args, char **opt_copies, const char **opt_keys, const char **opt_values) {
  for (size_t i = 0; opt_copies != NULL && opt_copies[i] != NULL; i++) free(opt_copies[i]);
  free(input_args);
  free(opt_copies);
  free(opt_keys);
  free(opt_values);
}
#define FREE_ARGS() free_args(input_args, opt_copies, opt_keys, opt_values)

int main(int argc, char **argv) {
  const char *model_path = NULL, *out_dir = ".";
  long repeat = 1, threads = 1;
  int stream = 0;
  const char **input_args = calloc((size_t)argc + 1, sizeof *input_args);
  size_t n_input_args = 0;
  litert_backend_config litert_cfg = {0};
  /* --delegate-option K=V: keys and values point into copies of the arguments */
  char **opt_copies = calloc((size_t)argc + 1, sizeof *opt_copies);
  const char **opt_keys = calloc((size_t)argc + 1, sizeof *opt_keys);
  const char **opt_values = calloc((size_t)argc + 1, sizeof *opt_values);
  size_t n_opts = 0;
  litert_backend *litert = NULL;
  if (input_args == NULL || opt_copies == NULL || opt_keys == NULL || opt_values == NULL) {
    FREE_ARGS();
    return 1;
  }

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      FREE_ARGS();
      return 0;
    }
    if (strcmp(a, "--stream") == 0) {
      stream = 1;
      continue;
    }
    int takes_value = strcmp(a, "--input") == 0 || strcmp(a, "-i") == 0 || strcmp(a, "--output-dir") == 0 ||
                      strcmp(a, "-o") == 0 || strcmp(a, "--repeat") == 0 || strcmp(a, "--threads") == 0 ||
                      strcmp(a, "--fallback-lib") == 0 || strcmp(a, "--delegate") == 0 ||
                      strcmp(a, "--delegate-option") == 0;
    if (takes_value) {
      if (i + 1 >= argc) {
        fprintf(stderr, "edgert-run: %s needs a value\n", a);
        FREE_ARGS();
        return 2;
      }
      const char *v = argv[++i];
      int bad = 0;
      if (strcmp(a, "--input") == 0 || strcmp(a, "-i") == 0) input_args[n_input_args++] = v;
      else if (strcmp(a, "--output-dir") == 0 || strcmp(a, "-o") == 0) out_dir = v;
      else if (strcmp(a, "--fallback-lib") == 0) litert_cfg.lib_path = v;
      else if (strcmp(a, "--delegate") == 0) litert_cfg.delegate_path = v;
      else if (strcmp(a, "--delegate-option") == 0) {
        char *eq = strchr(v, '=');
        if (eq == NULL || eq == v) {
          fprintf(stderr, "edgert-run: --delegate-option needs KEY=VALUE, got '%s'\n", v);
          bad = 1;
        } else if ((opt_copies[n_opts] = malloc(strlen(v) + 1)) == NULL) {
          bad = 1;
        } else {
          strcpy(opt_copies[n_opts], v);
          opt_copies[n_opts][eq - v] = '\0';
          opt_keys[n_opts] = opt_copies[n_opts];
          opt_values[n_opts] = opt_copies[n_opts] + (eq - v) + 1;
          n_opts++;
        }
      }
      else if (strcmp(a, "--repeat") == 0) bad = parse_count(a, v, 1000000000L, &repeat);
      else bad = parse_count(a, v, 1024, &threads);
      if (bad) {
        FREE_ARGS();
        return 2;
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "edgert-run: unknown option '%s'\n", a);
      usage(stderr);
      FREE_ARGS();
      return 2;
    } else if (model_path == NULL) {
      model_path = a;
    } else {
      fprintf(stderr, "edgert-run: unexpected argument '%s' (inputs are given as --input NAME=FILE.npy)\n", a);
      FREE_ARGS();
      return 2;
    }
  }
  if (model_path == NULL) {
    usage(stderr);
    FREE_ARGS();
    return 2;
  }

  if (stream && repeat != 1) {
    fprintf(stderr, "edgert-run: --stream runs every frame once; it takes no --repeat\n");
    FREE_ARGS();
    return 2;
  }
  int rc = 1;
  char err[1024];
  edgert_model *model = NULL;
  edgert_session *session = NULL;
  npy_array *arrays = NULL;
  size_t n_in = 0, n_out = 0;
  int64_t frames = 0;
  void **streamed = NULL; /* --stream: each output's frames */

  edgert_status st = edgert_model_load_file(model_path, &model, err, sizeof err);
  if (st != EDGERT_OK) {
    fprintf(stderr, "edgert-run: cannot load model: %s (%s)\n", err, edgert_status_str(st));
    goto done;
  }
  n_in = edgert_model_num_inputs(model);
  arrays = calloc(n_in + 1, sizeof *arrays);
  if (arrays == NULL) goto done;

  edgert_session_options opts;
  edgert_session_options_init(&opts);
  opts.threads = (int32_t)threads;
  if (litert_cfg.delegate_path != NULL && litert_cfg.lib_path == NULL) {
    fprintf(stderr, "edgert-run: --delegate applies to LiteRT partitions and needs --fallback-lib PATH/libLiteRt.so\n");
    goto done;
  }
  edgert_backend litert_be;
  if (litert_cfg.lib_path != NULL) {
    litert_cfg.delegate_keys = opt_keys;
    litert_cfg.delegate_values = opt_values;
    litert_cfg.n_delegate_options = n_opts;
    st = litert_backend_open(&litert_cfg, &litert, err, sizeof err);
    if (st != EDGERT_OK) {
      fprintf(stderr, "edgert-run: LiteRT backend: %s\n", err);
      goto done;
    }
    litert_backend_fill(litert, &litert_be);
    opts.backends[EDGERT_BACKEND_LITERT] = &litert_be;
  }
  st = edgert_session_create(model, &opts, &session);
  if (st != EDGERT_OK) {
    const char *why = edgert_session_last_error(NULL);
    fprintf(stderr, "edgert-run: cannot create a session: %s%s%s\n", edgert_status_str(st),
            why && why[0] ? ": " : "", why ? why : "");
    if (st == EDGERT_ERR_NO_BACKEND && litert_cfg.lib_path == NULL)
      fprintf(stderr, "edgert-run: litert partitions run with --fallback-lib PATH/libLiteRt.so "
                      "(from `pip install ai-edge-litert`, in site-packages/ai_edge_litert/)\n");
    goto done;
  }

  /* Match each --input to a model input: NAME=FILE, choosing the longest model input
   * name that prefixes the argument (names and paths may both contain '='). A bare
   * FILE is accepted when the model has exactly one input. */
  for (size_t k = 0; k < n_input_args; k++) {
    const char *arg = input_args[k];
    size_t best = n_in, best_len = 0;
    for (size_t j = 0; j < n_in; j++) {
      edgert_tensor_info info;
      edgert_model_input_info(model, j, &info);
      size_t len = strlen(info.name);
      if (strncmp(arg, info.name, len) == 0 && arg[len] == '=' && (best == n_in || len > best_len)) {
        best = j;
        best_len = len;
      }
    }
    const char *file;
    if (best < n_in) {
      file = arg + best_len + 1;
    } else if (n_in == 1 && strchr(arg, '=') == NULL) {
      best = 0;
      file = arg;
    } else {
      fprintf(stderr, "edgert-run: --input '%s' names no model input; the inputs are:", arg);
      for (size_t j = 0; j < n_in; j++) {
        edgert_tensor_info info;
        edgert_model_input_info(model, j, &info);
        fprintf(stderr, " '%s'", info.name);
      }
      fprintf(stderr, "\n");
      goto done;
    }
    edgert_tensor_info info;
    edgert_model_input_info(model, best, &info);
    if (arrays[best].data != NULL) {
      fprintf(stderr, "edgert-run: input '%s' is given twice\n", info.name);
      goto done;
    }
    if (npy_read(file, &arrays[best], err, sizeof err) != 0) {
      fprintf(stderr, "edgert-run: input '%s': %s\n", info.name, err);
      goto done;
    }
    const npy_array *a = &arrays[best];
    if (stream) {
      if (!stream_frames(&info, a, &frames) || a->dtype != info.dtype) {
        fprintf(stderr, "edgert-run: --stream input '%s': file '%s' holds %s ", info.name, file,
                dtype_name(a->dtype));
        print_shape(stderr, a->ndim, a->shape);
        fprintf(stderr, ", expected %s [frames, ", dtype_name(info.dtype));
        for (int32_t d = 0; d < info.ndim; d++) fprintf(stderr, d ? ", %lld" : "%lld", (long long)info.shape[d]);
        fprintf(stderr, "] with the same number of frames as the other inputs\n");
        goto done;
      }
      continue;
    }
    int same = a->ndim == info.ndim;
    for (int32_t d = 0; same && d < a->ndim; d++) {
      edgert_dim_info dim; /* a bounded dimension takes any size within its bounds */
      edgert_model_input_dim(model, best, (size_t)d, &dim);
      same = dim.lo != dim.hi ? a->shape[d] >= dim.lo && a->shape[d] <= dim.hi : a->shape[d] == info.shape[d];
    }
    if (a->dtype != info.dtype || !same) {
      fprintf(stderr, "edgert-run: input '%s': file '%s' holds %s ", info.name, file, dtype_name(a->dtype));
      print_shape(stderr, a->ndim, a->shape);
      fprintf(stderr, ", the model expects %s ", dtype_name(info.dtype));
      print_shape(stderr, info.ndim, info.shape);
      fprintf(stderr, "\n");
      goto done;
    }
  }
  for (size_t j = 0; j < n_in; j++) {
    edgert_tensor_info info;
    edgert_model_input_info(model, j, &info);
    if (arrays[j].data == NULL) {
      fprintf(stderr, "edgert-run: input '%s' (%s ", info.name, dtype_name(info.dtype));
      print_shape(stderr, info.ndim, info.shape);
      fprintf(stderr, ") is not given: use --input '%s=FILE.npy'\n", info.name);
      goto done;
    }
  }

  n_out = edgert_model_num_outputs(model);
  if (stream) {
    for (size_t j = 0; j < n_in; j++) {
      edgert_dim_info dim;
      edgert_tensor_info info;
      edgert_model_input_info(model, j, &info);
      for (int32_t d = 0; d < info.ndim; d++)
        if (edgert_model_input_dim(model, j, (size_t)d, &dim) == EDGERT_OK && dim.lo != dim.hi) {
          fprintf(stderr, "edgert-run: --stream needs fixed input shapes; '%s' has bounded dimensions\n",
                  info.name);
          goto done;
        }
    }
    if (n_in == 0) frames = 1;
    streamed = calloc(n_out + 1, sizeof *streamed);
    if (streamed == NULL) goto done;
    for (size_t k = 0; k < n_out; k++) {
      edgert_tensor_info info;
      edgert_model_output_info(model, k, &info);
      streamed[k] = malloc(info.nbytes * (size_t)frames + 1);
      if (streamed[k] == NULL) {
        fprintf(stderr, "edgert-run: cannot hold %lld frames of output '%s'\n", (long long)frames, info.name);
        goto done;
      }
    }
    double t0 = now_ms();
    for (int64_t f = 0; f < frames; f++) {
      for (size_t j = 0; j < n_in; j++) {
        const size_t bytes = arrays[j].nbytes / (size_t)frames;
        st = edgert_session_set_input(session, j, (const char *)arrays[j].data + bytes * (size_t)f, bytes);
        if (st != EDGERT_OK) break;
      }
      if (st == EDGERT_OK) st = edgert_session_run(session);
      if (st != EDGERT_OK) {
        fprintf(stderr, "edgert-run: frame %lld: %s\n", (long long)f, edgert_session_last_error(session));
        goto done;
      }
      for (size_t k = 0; k < n_out; k++) {
        edgert_tensor_info info;
        edgert_model_output_info(model, k, &info);
        memcpy((char *)streamed[k] + info.nbytes * (size_t)f, edgert_session_output_data(session, k), info.nbytes);
      }
    }
    fprintf(stderr, "edgert-run: %lld frame(s), mean %.4f ms per frame (threads %ld)\n", (long long)frames,
            (now_ms() - t0) / (double)frames, threads);
    for (size_t k = 0; k < n_out; k++) {
      edgert_tensor_info info;
      edgert_model_output_info(model, k, &info);
      int64_t shape[9];
      shape[0] = frames;
      for (int32_t d = 0; d < info.ndim; d++) shape[d + 1] = info.shape[d];
      if (save_output(model, k, out_dir, &info, info.ndim + 1, shape, streamed[k], info.nbytes * (size_t)frames) != 0)
        goto done;
    }
    rc = 0;
    goto done;
  }
  /* Inputs are set before every run: the arena space of an input may be reused. */
  double total_ms = 0.0;
  for (long r = 0; r < repeat; r++) {
    for (size_t j = 0; j < n_in; j++) {
      st = edgert_session_set_input_shape(session, j, (size_t)arrays[j].ndim, arrays[j].shape);
      if (st == EDGERT_OK) st = edgert_session_set_input(session, j, arrays[j].data, arrays[j].nbytes);
      if (st != EDGERT_OK) {
        fprintf(stderr, "edgert-run: %s\n", edgert_session_last_error(session));
        goto done;
      }
    }
    double t0 = now_ms();
    st = edgert_session_run(session);
    total_ms += now_ms() - t0;
    if (st != EDGERT_OK) {
      fprintf(stderr, "edgert-run: run failed: %s\n", edgert_session_last_error(session));
      goto done;
    }
  }
  fprintf(stderr, "edgert-run: %ld run(s), mean latency %.4f ms (threads %ld)\n", repeat,
          total_ms / (double)repeat, threads);

  for (size_t k = 0; k < n_out; k++) {
    edgert_tensor_info info; /* the shape of this run (bounded dimensions) */
    edgert_session_output_info(session, k, &info);
    if (save_output(model, k, out_dir, &info, info.ndim, info.shape, edgert_session_output_data(session, k),
                    info.nbytes) != 0)
      goto done;
  }
  rc = 0;

done:
  for (size_t k = 0; streamed != NULL && k < n_out; k++) free(streamed[k]);
  free(streamed);
  if (arrays != NULL)
    for (size_t j = 0; j < n_in; j++) npy_free(&arrays[j]);
  free(arrays);
  FREE_ARGS();
  edgert_session_destroy(session);
  litert_backend_close(litert);
  edgert_model_free(model);
  return rc;
}
