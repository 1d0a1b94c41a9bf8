/* litert_backend.c: edgert's LiteRT partitions through the LiteRT C API (see
 * litert_backend.h). libLiteRt.so is opened with dlopen and the few functions used here
 * are looked up by name; their declarations below follow the public LiteRT C headers
 * (litert/c/litert_*.h, ai-edge-litert 2.x): opaque handles, an int status, and two
 * plain structs whose layout LiteRT declares ABI-stable (LiteRtRankedTensorType,
 * LiteRtEnvOption). */
#define _POSIX_C_SOURCE 200809L
#include "litert_backend.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- LiteRT C API */

typedef int lrt_status; /* LiteRtStatus: 0 is kLiteRtStatusOk */
typedef struct lrt_env_s *lrt_env;
typedef struct lrt_model_s *lrt_model;
typedef struct lrt_sig_s *lrt_sig;
typedef struct lrt_tensor_s *lrt_tensor;
typedef struct lrt_options_s *lrt_options;
typedef struct lrt_compiled_s *lrt_compiled;
typedef struct lrt_buffer_s *lrt_buffer;
typedef struct lrt_accel_s *lrt_accel;
typedef struct lrt_wrapper_s *lrt_wrapper;
typedef struct lrt_runtime_ctx_s lrt_runtime_ctx;

enum {
  LRT_HW_CPU = 1,                     /* kLiteRtHwAcceleratorCpu */
  LRT_ENV_AUTO_REGISTER = 24,         /* kLiteRtEnvOptionTagAutoRegisterAccelerators */
  LRT_ANY_INT = 2,                    /* kLiteRtAnyTypeInt */
  LRT_MAX_RANK = 8,
};

/* LiteRtEnvOption: a tag, then a LiteRtAny (type + 8-byte union) at offset 8. */
typedef struct lrt_any {
  int32_t type;
  int64_t int_value;
} lrt_any;
typedef struct lrt_env_option {
  int32_t tag;
  lrt_any value;
} lrt_env_option;
_Static_assert(sizeof(lrt_env_option) == 24, "LiteRtEnvOption is 24 bytes");

/* LiteRtRankedTensorType: element type, then LiteRtLayout (rank in the low 7 bits of
 * the first word, has_strides in bit 7), 72 bytes. Only read here: it comes from the
 * model and goes back to LiteRT unchanged. */
typedef struct lrt_ranked_type {
  int32_t element_type;
  uint32_t rank_bits;
  int32_t dims[LRT_MAX_RANK];
  uint32_t strides[LRT_MAX_RANK];
} lrt_ranked_type;
_Static_assert(sizeof(lrt_ranked_type) == 72, "LiteRtRankedTensorType is 72 bytes");

typedef struct lrt_api_version {
  int major, minor, patch;
} lrt_api_version;

typedef struct lrt_api {
  lrt_status (*CreateEnvironment)(int n, const lrt_env_option *options, lrt_env *env);
  void (*DestroyEnvironment)(lrt_env env);
  lrt_status (*CreateModelFromBuffer)(lrt_env env, const void *addr, size_t size, lrt_model *model);
  void (*DestroyModel)(lrt_model model);
  lrt_status (*GetNumModelSignatures)(lrt_model model, size_t *n);
  lrt_status (*GetModelSignature)(lrt_model model, size_t index, lrt_sig *sig);
  lrt_status (*GetNumSignatureInputs)(lrt_sig sig, size_t *n);
  lrt_status (*GetNumSignatureOutputs)(lrt_sig sig, size_t *n);
  lrt_status (*GetSignatureInputTensorByIndex)(lrt_sig sig, size_t i, lrt_tensor *t);
  lrt_status (*GetSignatureOutputTensorByIndex)(lrt_sig sig, size_t i, lrt_tensor *t);
  lrt_status (*GetRankedTensorType)(lrt_tensor t, lrt_ranked_type *type);
  lrt_status (*CreateOptions)(lrt_options *options);
  void (*DestroyOptions)(lrt_options options);
  lrt_status (*SetOptionsHardwareAccelerators)(lrt_options options, int accelerators);
  lrt_status (*CreateCompiledModel)(lrt_env env, lrt_model model, lrt_options options, lrt_compiled *out);
  void (*DestroyCompiledModel)(lrt_compiled cm);
  lrt_status (*RunCompiledModel)(lrt_compiled cm, size_t signature, size_t n_in, lrt_buffer *in, size_t n_out,
                                 lrt_buffer *out);
  lrt_status (*CreateTensorBufferFromHostMemory)(const lrt_ranked_type *type, void *addr, size_t size,
                                                 void (*deallocator)(void *), lrt_buffer *out);
  void (*DestroyTensorBuffer)(lrt_buffer buffer);
  /* external delegates: a LiteRT accelerator whose delegate is the plugin's */
  lrt_status (*CreateAccelerator)(lrt_accel *accel);
  lrt_status (*RegisterAccelerator)(lrt_env env, lrt_accel accel, void *data, void (*release)(void *));
  lrt_status (*SetAcceleratorGetName)(lrt_accel accel, lrt_status (*get)(const struct lrt_accel_s *, const char **));
  lrt_status (*SetAcceleratorGetVersion)(lrt_accel accel,
                                         lrt_status (*get)(const struct lrt_accel_s *, lrt_api_version *));
  lrt_status (*SetAcceleratorGetHardwareSupport)(lrt_accel accel, lrt_status (*get)(const struct lrt_accel_s *, int *));
  lrt_status (*SetDelegateFunction)(lrt_accel accel,
                                    lrt_status (*create)(lrt_runtime_ctx *, lrt_env, const struct lrt_accel_s *,
                                                         lrt_options, lrt_wrapper *));
  lrt_status (*WrapDelegate)(void *tflite_delegate, void (*deleter)(void *), lrt_wrapper *out);
  lrt_status (*DestroyAccelerator)(lrt_accel accel);
} lrt_api;

/* LiteRT's own CPU accelerator (XNNPACK), as libLiteRt.so exports its definition
 * (LiteRtStaticLinkedAcceleratorCpuDef, a LiteRtAcceleratorDef: an ABI header, then
 * the accelerator's functions). Used to register XNNPACK after an external delegate. */
typedef struct lrt_accel_def {
  uint16_t struct_size, major_version, minor_version, reserved;
  lrt_status (*get_name)(const struct lrt_accel_s *, const char **);
  lrt_status (*get_version)(const struct lrt_accel_s *, lrt_api_version *);
  lrt_status (*get_hardware_support)(const struct lrt_accel_s *, int *);
  lrt_status (*is_jit)(const struct lrt_accel_s *, bool *);
  lrt_status (*create_delegate)(lrt_runtime_ctx *, lrt_env, const struct lrt_accel_s *, lrt_options, lrt_wrapper *);
} lrt_accel_def;
typedef lrt_status (*set_jit_fn)(lrt_accel accel, lrt_status (*get)(const struct lrt_accel_s *, bool *));

/* Symbol names, in the order of lrt_api's members. */
static const char *const k_symbols[] = {
    "LiteRtCreateEnvironment", "LiteRtDestroyEnvironment", "LiteRtCreateModelFromBuffer", "LiteRtDestroyModel",
    "LiteRtGetNumModelSignatures", "LiteRtGetModelSignature", "LiteRtGetNumSignatureInputs",
    "LiteRtGetNumSignatureOutputs", "LiteRtGetSignatureInputTensorByIndex", "LiteRtGetSignatureOutputTensorByIndex",
    "LiteRtGetRankedTensorType", "LiteRtCreateOptions", "LiteRtDestroyOptions",
    "LiteRtSetOptionsHardwareAccelerators", "LiteRtCreateCompiledModel", "LiteRtDestroyCompiledModel",
    "LiteRtRunCompiledModel", "LiteRtCreateTensorBufferFromHostMemory", "LiteRtDestroyTensorBuffer",
    "LiteRtCreateAccelerator", "LiteRtRegisterAccelerator", "LiteRtSetAcceleratorGetName",
    "LiteRtSetAcceleratorGetVersion", "LiteRtSetAcceleratorGetHardwareSupport", "LiteRtSetDelegateFunction",
    "LiteRtWrapDelegate", "LiteRtDestroyAccelerator",
};
enum { N_SYMBOLS = sizeof k_symbols / sizeof k_symbols[0], N_CORE_SYMBOLS = 19 };
_Static_assert(sizeof(lrt_api) == N_SYMBOLS * sizeof(void (*)(void)), "one name per lrt_api member");

/* TFLite external delegate plugin interface (tflite/delegates/external). */
typedef void *(*plugin_create_fn)(char **keys, char **values, size_t n, void (*report_error)(const char *));
typedef void (*plugin_destroy_fn)(void *delegate);

struct litert_backend {
  void *lib;
  char *lib_path;
  lrt_api api;
  lrt_env env;
  void *plugin;            /* delegate library, or NULL */
  char *plugin_path;
  plugin_create_fn plugin_create;
  plugin_destroy_fn plugin_destroy;
  char **keys, **values;   /* copies of the delegate options */
  size_t n_options;
  int cpu_after_delegate;  /* XNNPACK registered after the delegate */
};

struct litert_partition {
  litert_backend *lb;
  lrt_model model;
  lrt_options options;
  lrt_compiled compiled;
  size_t n_in, n_out;
  lrt_ranked_type *types;  /* n_in inputs, then n_out outputs (in all the arrays below) */
  size_t *bytes;
  lrt_buffer *buffers;     /* over `host`: the copying path */
  void **host;             /* 64-byte aligned, owned here */
  lrt_buffer *wrapped;     /* over the caller's tensors: the zero-copy path */
  const void **bound;      /* the pointers `wrapped` wraps; bound[0] NULL: none yet */
  int copy_only;           /* EDGERT_LITERT_COPY set, or a pointer was not 64-byte aligned */
};

static void set_msg(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_msg(char *msg, size_t size, const char *fmt, ...) {
  if (msg == NULL || size == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, size, fmt, ap);
  va_end(ap);
}

static const char *status_name(lrt_status s) {
  switch (s) {
    case 1: return "invalid argument";
    case 2: return "memory allocation failure";
    case 3: return "runtime failure";
    case 4: return "missing input tensor";
    case 5: return "unsupported";
    case 6: return "not found";
    case 501: return "invalid flatbuffer";
    case 502: return "dynamic loading";
    case 504: return "compilation";
    default: return "error";
  }
}

/* --------------------------------------------------------------- the delegate */

/* LiteRT's accelerator callbacks carry no user pointer: the one backend with a
 * delegate is found here (set by open, cleared by close). */
static litert_backend *g_delegate_backend;
static _Thread_local char g_plugin_error[512];

static void plugin_report(const char *text) {
  snprintf(g_plugin_error, sizeof g_plugin_error, "%s", text ? text : "");
}

static lrt_status accel_name(const struct lrt_accel_s *a, const char **name) {
  (void)a;
  *name = "edgert-external-delegate";
  return 0;
}

static lrt_status accel_version(const struct lrt_accel_s *a, lrt_api_version *v) {
  (void)a;
  v->major = 1;
  v->minor = v->patch = 0;
  return 0;
}

static lrt_status accel_hardware(const struct lrt_accel_s *a, int *hw) {
  (void)a;
  *hw = LRT_HW_CPU;
  return 0;
}

static lrt_status accel_create_delegate(lrt_runtime_ctx *ctx, lrt_env env, const struct lrt_accel_s *a,
                                        lrt_options options, lrt_wrapper *out) {
  (void)ctx, (void)env, (void)a, (void)options;
  litert_backend *lb = g_delegate_backend;
  if (lb == NULL) return 3;
  g_plugin_error[0] = '\0';
  void *d = lb->plugin_create(lb->keys, lb->values, lb->n_options, plugin_report);
  if (d == NULL) return 3;
  lrt_status st = lb->api.WrapDelegate(d, lb->plugin_destroy, out);
  if (st != 0) lb->plugin_destroy(d);
  return st;
}

/* Registers LiteRT's XNNPACK accelerator after the delegate's, so that the nodes the
 * delegate leaves run on XNNPACK rather than on the built-in kernels. Best effort: when
 * the library does not export its CPU accelerator definition in the layout known here,
 * nothing is registered and those nodes run on the built-in kernels. */
static void register_cpu_after_delegate(litert_backend *lb) {
  const lrt_accel_def *const *defp = dlsym(lb->lib, "LiteRtStaticLinkedAcceleratorCpuDef");
  void *jit_sym = dlsym(lb->lib, "LiteRtSetIsAcceleratorDelegateResponsibleForJitCompilation");
  if (defp == NULL || *defp == NULL || jit_sym == NULL) return;
  const lrt_accel_def *def = *defp;
  if (def->major_version != 1 || def->struct_size < sizeof *def || def->get_name == NULL ||
      def->get_version == NULL || def->get_hardware_support == NULL || def->is_jit == NULL ||
      def->create_delegate == NULL)
    return;
  set_jit_fn set_jit;
  memcpy(&set_jit, &jit_sym, sizeof jit_sym);
  lrt_accel accel = NULL;
  lrt_status st = lb->api.CreateAccelerator(&accel);
  if (st == 0) st = lb->api.SetAcceleratorGetName(accel, def->get_name);
  if (st == 0) st = lb->api.SetAcceleratorGetVersion(accel, def->get_version);
  if (st == 0) st = lb->api.SetAcceleratorGetHardwareSupport(accel, def->get_hardware_support);
  if (st == 0) st = set_jit(accel, def->is_jit);
  if (st == 0) st = lb->api.SetDelegateFunction(accel, def->create_delegate);
  if (st != 0 && accel != NULL) lb->api.DestroyAccelerator(accel);
  /* On failure LiteRtRegisterAccelerator releases the accelerator itself. */
  if (st == 0) st = lb->api.RegisterAccelerator(lb->env, accel, NULL, NULL);
  lb->cpu_after_delegate = st == 0;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c != NULL) memcpy(c, s, n);
  return c;
}

static edgert_status open_delegate(litert_backend *lb, const litert_backend_config *cfg, char *msg,
                                   size_t msg_size) {
  if (g_delegate_backend != NULL) {
    set_msg(msg, msg_size, "a LiteRT backend with a delegate is already open in this process");
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  lb->plugin_path = dup_str(cfg->delegate_path);
  if (lb->plugin_path == NULL) return EDGERT_ERR_NO_MEMORY;
  lb->plugin = dlopen(cfg->delegate_path, RTLD_NOW | RTLD_LOCAL);
  if (lb->plugin == NULL) {
    const char *e = dlerror();
    set_msg(msg, msg_size, "cannot load delegate '%s': %s", cfg->delegate_path, e ? e : "dlopen failed");
    return EDGERT_ERR_IO;
  }
  /* POSIX: a data pointer from dlsym converts to a function pointer through memcpy. */
  void *c = dlsym(lb->plugin, "tflite_plugin_create_delegate");
  void *d = dlsym(lb->plugin, "tflite_plugin_destroy_delegate");
  if (c == NULL || d == NULL) {
    set_msg(msg, msg_size,
            "'%s' is not a TFLite external delegate: it does not export tflite_plugin_create_delegate "
            "and tflite_plugin_destroy_delegate",
            cfg->delegate_path);
    return EDGERT_ERR_UNSUPPORTED;
  }
  memcpy(&lb->plugin_create, &c, sizeof c);
  memcpy(&lb->plugin_destroy, &d, sizeof d);
  size_t n = cfg->n_delegate_options;
  lb->keys = calloc(n + 1, sizeof *lb->keys);
  lb->values = calloc(n + 1, sizeof *lb->values);
  if (lb->keys == NULL || lb->values == NULL) return EDGERT_ERR_NO_MEMORY;
  lb->n_options = n;
  for (size_t i = 0; i < n; i++) {
    lb->keys[i] = dup_str(cfg->delegate_keys[i]);
    lb->values[i] = dup_str(cfg->delegate_values[i]);
    if (lb->keys[i] == NULL || lb->values[i] == NULL) return EDGERT_ERR_NO_MEMORY;
  }
  /* Create one delegate now so that bad options fail at start-up, with the plugin's
   * own message, not at the first partition. */
  g_plugin_error[0] = '\0';
  void *probe = lb->plugin_create(lb->keys, lb->values, n, plugin_report);
  if (probe == NULL) {
    set_msg(msg, msg_size, "delegate '%s' could not be created%s%s", cfg->delegate_path,
            g_plugin_error[0] ? ": " : " (it reported no reason)", g_plugin_error);
    return EDGERT_ERR_BACKEND;
  }
  lb->plugin_destroy(probe);

  lrt_accel accel = NULL;
  lrt_status st = lb->api.CreateAccelerator(&accel);
  if (st == 0) st = lb->api.SetAcceleratorGetName(accel, accel_name);
  if (st == 0) st = lb->api.SetAcceleratorGetVersion(accel, accel_version);
  if (st == 0) st = lb->api.SetAcceleratorGetHardwareSupport(accel, accel_hardware);
  if (st == 0) st = lb->api.SetDelegateFunction(accel, accel_create_delegate);
  if (st != 0 && accel != NULL) lb->api.DestroyAccelerator(accel);
  /* On failure LiteRtRegisterAccelerator releases the accelerator itself. */
  if (st == 0) st = lb->api.RegisterAccelerator(lb->env, accel, NULL, NULL);
  if (st != 0) {
    set_msg(msg, msg_size, "LiteRT did not accept the delegate as an accelerator (status %d, %s)", st,
            status_name(st));
    return EDGERT_ERR_BACKEND;
  }
  g_delegate_backend = lb;
  register_cpu_after_delegate(lb);
  return EDGERT_OK;
}

/* ---------------------------------------------------------------- the library */

edgert_status litert_backend_open(const litert_backend_config *cfg, litert_backend **out, char *msg,
                                  size_t msg_size) {
  if (out != NULL) *out = NULL;
  if (cfg == NULL || cfg->lib_path == NULL || out == NULL ||
      (cfg->n_delegate_options > 0 && (cfg->delegate_keys == NULL || cfg->delegate_values == NULL))) {
    set_msg(msg, msg_size, "litert_backend_open: NULL argument");
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  litert_backend *lb = calloc(1, sizeof *lb);
  if (lb == NULL) {
    set_msg(msg, msg_size, "out of memory");
    return EDGERT_ERR_NO_MEMORY;
  }
  edgert_status st = EDGERT_OK;
  lb->lib_path = dup_str(cfg->lib_path);
  lb->lib = dlopen(cfg->lib_path, RTLD_NOW | RTLD_LOCAL);
  if (lb->lib == NULL) {
    const char *e = dlerror();
    set_msg(msg, msg_size, "cannot load the LiteRT library '%s': %s", cfg->lib_path, e ? e : "dlopen failed");
    st = EDGERT_ERR_IO;
    goto fail;
  }
  void (**slots)(void) = (void (**)(void)) & lb->api;
  size_t needed = cfg->delegate_path != NULL ? N_SYMBOLS : N_CORE_SYMBOLS;
  for (size_t i = 0; i < needed; i++) {
    void *sym = dlsym(lb->lib, k_symbols[i]);
    if (sym == NULL) {
      set_msg(msg, msg_size,
              "'%s' is not a usable LiteRT library: it does not export %s (libLiteRt.so of "
              "ai-edge-litert >= 2.0 is needed)",
              cfg->lib_path, k_symbols[i]);
      st = EDGERT_ERR_UNSUPPORTED;
      goto fail;
    }
    memcpy(&slots[i], &sym, sizeof sym);
  }
  /* Register only LiteRT's CPU accelerator (not its GPU/NPU ones, which probe for
   * drivers); none when a delegate is given (see litert_backend.h). */
  lrt_env_option opt = {LRT_ENV_AUTO_REGISTER, {LRT_ANY_INT, cfg->delegate_path != NULL ? 0 : LRT_HW_CPU}};
  lrt_status ls = lb->api.CreateEnvironment(1, &opt, &lb->env);
  if (ls != 0) {
    set_msg(msg, msg_size, "LiteRtCreateEnvironment failed (status %d, %s)", ls, status_name(ls));
    st = EDGERT_ERR_BACKEND;
    goto fail;
  }
  if (cfg->delegate_path != NULL) {
    st = open_delegate(lb, cfg, msg, msg_size);
    if (st != EDGERT_OK) goto fail;
  }
  *out = lb;
  return EDGERT_OK;
fail:
  if (st == EDGERT_ERR_NO_MEMORY) set_msg(msg, msg_size, "out of memory");
  litert_backend_close(lb);
  return st;
}

void litert_backend_close(litert_backend *lb) {
  if (lb == NULL) return;
  if (lb->env != NULL) lb->api.DestroyEnvironment(lb->env);
  if (g_delegate_backend == lb) g_delegate_backend = NULL;
  for (size_t i = 0; i < lb->n_options; i++) {
    free(lb->keys[i]);
    free(lb->values[i]);
  }
  free(lb->keys);
  free(lb->values);
  /* The libraries stay loaded: LiteRT keeps thread-local state and atexit handlers
   * whose code must outlive this call. */
  free(lb->plugin_path);
  free(lb->lib_path);
  free(lb);
}

const char *litert_backend_lib_path(const litert_backend *lb) { return lb ? lb->lib_path : ""; }

/* -------------------------------------------------------------- one partition */

static size_t element_bytes(int32_t t) {
  switch (t) {
    case 1: case 2: case 16: return 4;       /* float32, int32, uint32 */
    case 3: case 6: case 9: return 1;        /* uint8, bool, int8 */
    case 4: case 11: case 13: return 8;      /* int64, float64, uint64 */
    case 7: case 10: case 17: case 19: return 2; /* int16, float16, uint16, bfloat16 */
    default: return 0;
  }
}

/* Byte size of a ranked tensor type, 0 when unknown or dynamic. */
static size_t type_bytes(const lrt_ranked_type *t) {
  size_t n = element_bytes(t->element_type);
  unsigned rank = t->rank_bits & 0x7fu;
  if (rank > LRT_MAX_RANK) return 0;
  for (unsigned d = 0; d < rank; d++) {
    if (t->dims[d] < 0) return 0;
    n *= (size_t)t->dims[d];
  }
  return n;
}

edgert_status litert_partition_create(litert_backend *lb, const void *payload, size_t payload_bytes,
                                      size_t n_inputs, const size_t *in_bytes, size_t n_outputs,
                                      const size_t *out_bytes, litert_partition **out, char *msg,
                                      size_t msg_size) {
  if (out != NULL) *out = NULL;
  if (lb == NULL || payload == NULL || out == NULL || (n_inputs && !in_bytes) || (n_outputs && !out_bytes)) {
    set_msg(msg, msg_size, "litert_partition_create: NULL argument");
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  const lrt_api *api = &lb->api;
  litert_partition *p = calloc(1, sizeof *p);
  size_t n = n_inputs + n_outputs;
  if (p == NULL) {
    set_msg(msg, msg_size, "out of memory");
    return EDGERT_ERR_NO_MEMORY;
  }
  p->lb = lb;
  p->n_in = n_inputs;
  p->n_out = n_outputs;
  p->buffers = calloc(n + 1, sizeof *p->buffers);
  p->host = calloc(n + 1, sizeof *p->host);
  p->bytes = calloc(n + 1, sizeof *p->bytes);
  p->types = calloc(n + 1, sizeof *p->types);
  p->wrapped = calloc(n + 1, sizeof *p->wrapped);
  p->bound = calloc(n + 1, sizeof *p->bound);
  const char *copy = getenv("EDGERT_LITERT_COPY");
  p->copy_only = copy != NULL && copy[0] != '\0' && strcmp(copy, "0") != 0;
  if (!p->buffers || !p->host || !p->bytes || !p->types || !p->wrapped || !p->bound) {
    litert_partition_destroy(p);
    set_msg(msg, msg_size, "out of memory");
    return EDGERT_ERR_NO_MEMORY;
  }
  edgert_status st = EDGERT_ERR_BACKEND;
  lrt_status ls = api->CreateModelFromBuffer(lb->env, payload, payload_bytes, &p->model);
  if (ls != 0) {
    set_msg(msg, msg_size, "LiteRT cannot read the .tflite payload (%zu bytes): status %d, %s", payload_bytes, ls,
            status_name(ls));
    goto fail;
  }
  size_t n_sig = 0, n_sig_in = 0, n_sig_out = 0;
  lrt_sig sig = NULL;
  if (api->GetNumModelSignatures(p->model, &n_sig) != 0 || n_sig == 0 ||
      api->GetModelSignature(p->model, 0, &sig) != 0 || api->GetNumSignatureInputs(sig, &n_sig_in) != 0 ||
      api->GetNumSignatureOutputs(sig, &n_sig_out) != 0) {
    set_msg(msg, msg_size, "the .tflite payload has no usable signature 0");
    goto fail;
  }
  if (n_sig_in != n_inputs || n_sig_out != n_outputs) {
    set_msg(msg, msg_size, "the .tflite payload has %zu inputs and %zu outputs, the partition %zu and %zu", n_sig_in,
            n_sig_out, n_inputs, n_outputs);
    st = EDGERT_ERR_SHAPE;
    goto fail;
  }
  for (size_t k = 0; k < n; k++) {
    int is_out = k >= n_inputs;
    size_t i = is_out ? k - n_inputs : k;
    lrt_tensor t = NULL;
    lrt_ranked_type type;
    memset(&type, 0, sizeof type);
    ls = is_out ? api->GetSignatureOutputTensorByIndex(sig, i, &t) : api->GetSignatureInputTensorByIndex(sig, i, &t);
    if (ls == 0) ls = api->GetRankedTensorType(t, &type);
    size_t want = is_out ? out_bytes[i] : in_bytes[i];
    size_t have = ls == 0 ? type_bytes(&type) : 0;
    if (ls != 0 || have != want) {
      set_msg(msg, msg_size, "%s %zu of the .tflite payload holds %zu bytes, the partition's boundary tensor %zu",
              is_out ? "output" : "input", i, have, want);
      st = EDGERT_ERR_SHAPE;
      goto fail;
    }
    p->bytes[k] = want;
    p->types[k] = type;
    /* LiteRT's host buffers want 64-byte alignment; keep at least one byte. */
    size_t alloc = (want + 63) / 64 * 64;
    if (posix_memalign(&p->host[k], 64, alloc ? alloc : 64) != 0) {
      p->host[k] = NULL;
      set_msg(msg, msg_size, "out of memory");
      st = EDGERT_ERR_NO_MEMORY;
      goto fail;
    }
    ls = api->CreateTensorBufferFromHostMemory(&type, p->host[k], want, NULL, &p->buffers[k]);
    if (ls != 0) {
      set_msg(msg, msg_size, "LiteRtCreateTensorBufferFromHostMemory failed for %s %zu: status %d, %s",
              is_out ? "output" : "input", i, ls, status_name(ls));
      goto fail;
    }
  }
  ls = api->CreateOptions(&p->options);
  if (ls == 0) ls = api->SetOptionsHardwareAccelerators(p->options, LRT_HW_CPU);
  if (ls == 0) ls = api->CreateCompiledModel(lb->env, p->model, p->options, &p->compiled);
  if (ls != 0) {
    set_msg(msg, msg_size, "LiteRT cannot compile the .tflite payload%s%s: status %d, %s (LiteRT's log above has the details)",
            lb->plugin_path ? " with delegate " : "", lb->plugin_path ? lb->plugin_path : "", ls, status_name(ls));
    if (lb->plugin_path != NULL && g_plugin_error[0] != '\0') {
      size_t len = strlen(msg);
      set_msg(msg + len, msg_size - len, "; the delegate reported: %s", g_plugin_error);
    }
    goto fail;
  }
  *out = p;
  return EDGERT_OK;
fail:
  litert_partition_destroy(p);
  return st;
}

static void unwrap(litert_partition *p) {
  size_t n = p->n_in + p->n_out;
  for (size_t k = 0; k < n; k++) {
    if (p->wrapped[k] != NULL) p->lb->api.DestroyTensorBuffer(p->wrapped[k]);
    p->wrapped[k] = NULL;
    p->bound[k] = NULL;
  }
}

/* Wraps the caller's tensors in LiteRT buffers (once per set of pointers: a session's
 * boundary pointers stay the same from run to run). 0 when done; -1 when they cannot be
 * wrapped (not 64-byte aligned, or LiteRT refused): then the copying path is used. */
static int bind(litert_partition *p, const void *const *inputs, void *const *outputs) {
  size_t n = p->n_in + p->n_out;
  int same = p->bound[0] != NULL || n == 0;
  for (size_t k = 0; k < n && same; k++)
    same = p->bound[k] == (k < p->n_in ? inputs[k] : outputs[k - p->n_in]);
  if (same) return 0;
  unwrap(p);
  for (size_t k = 0; k < n; k++) {
    void *ptr = k < p->n_in ? (void *)(uintptr_t)inputs[k] : outputs[k - p->n_in];
    if (((uintptr_t)ptr & 63u) != 0 ||
        p->lb->api.CreateTensorBufferFromHostMemory(&p->types[k], ptr, p->bytes[k], NULL, &p->wrapped[k]) != 0) {
      p->wrapped[k] = NULL;
      unwrap(p);
      return -1;
    }
    p->bound[k] = ptr;
  }
  return 0;
}

edgert_status litert_partition_run(litert_partition *p, const void *const *inputs, void *const *outputs, char *msg,
                                   size_t msg_size) {
  const lrt_api *api = &p->lb->api;
  lrt_status ls;
  if (!p->copy_only && bind(p, inputs, outputs) == 0) {
    ls = api->RunCompiledModel(p->compiled, 0, p->n_in, p->wrapped, p->n_out, p->wrapped + p->n_in);
  } else {
    p->copy_only = 1;
    for (size_t k = 0; k < p->n_in; k++) memcpy(p->host[k], inputs[k], p->bytes[k]);
    ls = api->RunCompiledModel(p->compiled, 0, p->n_in, p->buffers, p->n_out, p->buffers + p->n_in);
    if (ls == 0)
      for (size_t o = 0; o < p->n_out; o++) memcpy(outputs[o], p->host[p->n_in + o], p->bytes[p->n_in + o]);
  }
  if (ls != 0) {
    set_msg(msg, msg_size, "LiteRtRunCompiledModel failed: status %d, %s", ls, status_name(ls));
    return EDGERT_ERR_BACKEND;
  }
  return EDGERT_OK;
}

void litert_partition_destroy(litert_partition *p) {
  if (p == NULL) return;
  const lrt_api *api = &p->lb->api;
  if (p->compiled != NULL) api->DestroyCompiledModel(p->compiled);
  if (p->options != NULL) api->DestroyOptions(p->options);
  size_t n = p->n_in + p->n_out;
  if (p->wrapped != NULL && p->bound != NULL) unwrap(p);
  for (size_t k = 0; k < n && p->buffers != NULL && p->host != NULL; k++) {
    if (p->buffers[k] != NULL) api->DestroyTensorBuffer(p->buffers[k]);
    free(p->host[k]);
  }
  if (p->model != NULL) api->DestroyModel(p->model);
  free(p->buffers);
  free(p->host);
  free(p->bytes);
  free(p->types);
  free(p->wrapped);
  free(p->bound);
  free(p);
}

/* ------------------------------------------------------------ edgert_backend */

/* Position of the partition in execution order (what edgert_model_partition_tensor
 * takes; info->index is the converter's partition number, which may differ). */
static size_t position_of(const edgert_model *model, const edgert_partition_info *info) {
  size_t n = edgert_model_num_partitions(model);
  for (size_t k = 0; k < n; k++) {
    edgert_partition_info pi;
    if (edgert_model_partition_info(model, k, &pi) == EDGERT_OK && pi.node == info->node) return k;
  }
  return n;
}

static edgert_status be_prepare(void *user, const edgert_model *model, const edgert_partition_info *info,
                                void **state, char *msg, size_t msg_size) {
  litert_backend *lb = user;
  *state = NULL;
  size_t pos = position_of(model, info);
  size_t n = info->n_inputs + info->n_outputs;
  size_t *bytes = calloc(n + 1, sizeof *bytes);
  if (bytes == NULL) {
    set_msg(msg, msg_size, "out of memory");
    return EDGERT_ERR_NO_MEMORY;
  }
  for (size_t k = 0; k < n; k++) {
    int is_out = k >= info->n_inputs;
    edgert_tensor_info t;
    edgert_status st = edgert_model_partition_tensor(model, pos, is_out, is_out ? k - info->n_inputs : k, &t);
    if (st != EDGERT_OK) {
      set_msg(msg, msg_size, "boundary tensor %zu: %s", k, edgert_status_str(st));
      free(bytes);
      return st;
    }
    bytes[k] = t.nbytes;
  }
  litert_partition *p = NULL;
  edgert_status st = litert_partition_create(lb, info->payload, info->payload_bytes, info->n_inputs, bytes,
                                             info->n_outputs, bytes + info->n_inputs, &p, msg, msg_size);
  free(bytes);
  if (st != EDGERT_OK) return st;
  *state = p;
  return EDGERT_OK;
}

/* Bounded dimensions: the compiled model has the upper bounds' shapes, which this
 * backend does not resize; a run at other sizes is refused rather than run on the
 * wrong bytes (the Python Session's LiteRT backend resizes). */
static edgert_status check_sizes(const litert_partition *p, char *msg, size_t msg_size) {
  for (size_t k = 0; k < p->n_in + p->n_out; k++) {
    const int is_out = k >= p->n_in;
    edgert_tensor_info t;
    if (edgert_partition_call_tensor(is_out, is_out ? k - p->n_in : k, &t) != EDGERT_OK || t.nbytes == p->bytes[k])
      continue;
    set_msg(msg, msg_size,
            "%s %zu is %zu bytes in this run, %zu at the upper bounds: this LiteRT backend runs partitions of a "
            "file with bounded dimensions at the upper bounds only; use the Python edgert.Session for other sizes",
            is_out ? "output" : "input", is_out ? k - p->n_in : k, t.nbytes, p->bytes[k]);
    return EDGERT_ERR_BACKEND;
  }
  return EDGERT_OK;
}

static edgert_status be_invoke(void *user, void *state, const void *const *inputs, void *const *outputs, char *msg,
                               size_t msg_size) {
  (void)user;
  edgert_status st = check_sizes(state, msg, msg_size);
  return st != EDGERT_OK ? st : litert_partition_run(state, inputs, outputs, msg, msg_size);
}

static void be_release(void *user, void *state) {
  (void)user;
  litert_partition_destroy(state);
}

void litert_backend_fill(litert_backend *lb, edgert_backend *backend) {
  memset(backend, 0, sizeof *backend);
  backend->user = lb;
  backend->prepare = be_prepare;
  backend->invoke = be_invoke;
  backend->release = be_release;
}
