/* litert_test_delegate.c: a real TFLite external delegate for tests. It claims every
 * float32 ADD node without broadcasting or fused activation, computes it itself, and
 * counts what it claimed and ran, so a test can prove that a delegate given to
 * edgert-run (--delegate) or to ai_edge_litert.interpreter.load_delegate was applied.
 *
 * Build: cc -shared -fPIC -O2 litert_test_delegate.c -o libedgert_test_delegate.so
 * (no link dependency: see "ABI" below).
 *
 * Plugin interface (what libedgetpu and Arm NN's delegate export, and what TFLite's
 * external delegate loader and load_delegate call):
 *   tflite_plugin_create_delegate(keys, values, n, report_error) -> TfLiteDelegate*
 *   tflite_plugin_destroy_delegate(TfLiteDelegate*)
 * Options: counter_file=PATH (the counts are written there, "claimed N ran M", each time
 * a delegate is destroyed); fail_prepare=1 (the delegate's Prepare fails, to test error
 * paths). Any other key is rejected through report_error and creation returns NULL.
 * Counts: edgert_test_delegate_claimed() and edgert_test_delegate_ran(), process-wide.
 *
 * ABI. ai-edge-litert's libraries export none of TFLite's C functions (nm -D finds no
 * TfLite* symbol in libLiteRt.so or the Python extension modules), so the opaque
 * delegate API (TfLiteOpaqueDelegateCreate, TfLiteOpaqueContext*) cannot be linked
 * or resolved against them. This delegate uses the struct ABI instead, as delegates
 * built against the TFLite C headers do: TfLiteDelegate with a Prepare callback, and
 * the TfLiteContext function pointers (GetExecutionPlan, GetNodeAndRegistration,
 * ReplaceNodeSubsetsWithDelegateKernels). The declarations below are written from
 * the public header tflite/core/c/common.h (LP64 layout). */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef enum { TFL_OK = 0, TFL_ERROR = 1 } tfl_status;
enum { TFL_FLOAT32 = 1, TFL_BUILTIN_ADD = 0, TFL_BUILTIN_DELEGATE = 51 };

typedef struct tfl_int_array {
  int size;
  int data[];
} tfl_int_array;

typedef struct tfl_tensor {
  int type;
  union {
    void *raw;
    float *f;
  } data;
  tfl_int_array *dims;
  struct {
    float scale;
    int32_t zero_point;
  } params;
  int allocation_type;
  size_t bytes;
  const void *allocation;
  const char *name;
  void *delegate;
  int buffer_handle;
  bool data_is_stale;
  bool is_variable;
  struct {
    int type;
    void *params;
  } quantization;
  void *sparsity;
  const tfl_int_array *dims_signature;
} tfl_tensor;
_Static_assert(sizeof(void *) != 8 || sizeof(tfl_tensor) == 112, "TfLiteTensor is 112 bytes on LP64");

typedef struct tfl_node {
  tfl_int_array *inputs;
  tfl_int_array *outputs;
  tfl_int_array *intermediates;
  tfl_int_array *temporaries;
  void *user_data;
  void *builtin_data;
  /* further members are not used */
} tfl_node;

struct tfl_context;
struct tfl_delegate;

typedef struct tfl_registration {
  void *(*init)(struct tfl_context *ctx, const char *buffer, size_t length);
  void (*free)(struct tfl_context *ctx, void *buffer);
  tfl_status (*prepare)(struct tfl_context *ctx, tfl_node *node);
  tfl_status (*invoke)(struct tfl_context *ctx, tfl_node *node);
  const char *(*profiling_string)(const struct tfl_context *ctx, const tfl_node *node);
  int32_t builtin_code;
  const char *custom_name;
  int version;
  void *registration_external;
  void *(*async_kernel)(struct tfl_context *ctx, tfl_node *node);
  uint64_t inplace_operator;
} tfl_registration;

typedef struct tfl_context {
  size_t tensors_size;
  tfl_status (*GetExecutionPlan)(struct tfl_context *ctx, tfl_int_array **plan);
  tfl_tensor *tensors;
  void *impl_;
  void *ResizeTensor;
  void (*ReportError)(struct tfl_context *ctx, const char *fmt, ...);
  void *AddTensors;
  tfl_status (*GetNodeAndRegistration)(struct tfl_context *ctx, int node_index, tfl_node **node,
                                       tfl_registration **reg);
  tfl_status (*ReplaceNodeSubsetsWithDelegateKernels)(struct tfl_context *ctx, tfl_registration reg,
                                                      const tfl_int_array *nodes, struct tfl_delegate *d);
  /* further members are not used */
} tfl_context;

typedef struct tfl_delegate {
  void *data_;
  tfl_status (*Prepare)(tfl_context *ctx, struct tfl_delegate *d);
  void *CopyFromBufferHandle;
  void *CopyToBufferHandle;
  void *FreeBufferHandle;
  int64_t flags;
  void *opaque_delegate_builder;
} tfl_delegate;

/* What the runtime passes to a delegate kernel's init (TfLiteDelegateParams). */
typedef struct tfl_delegate_params {
  tfl_delegate *delegate;
  tfl_int_array *nodes_to_replace;
  tfl_int_array *input_tensors;
  tfl_int_array *output_tensors;
} tfl_delegate_params;

typedef struct tfl_add_params {
  int activation; /* 0: none */
  bool pot_scale_int16;
} tfl_add_params;

/* ------------------------------------------------------------------ counts */

static atomic_long g_claimed, g_ran;

EXPORT long edgert_test_delegate_claimed(void) { return atomic_load(&g_claimed); }
EXPORT long edgert_test_delegate_ran(void) { return atomic_load(&g_ran); }

typedef struct delegate_data {
  char *counter_file;
  bool fail_prepare;
} delegate_data;

/* ------------------------------------------------------------------ kernel */

typedef struct add_op {
  int a, b, y;
  float *own_y; /* y lives here when it is internal to the kernel (not a kernel output) */
} add_op;

typedef struct add_kernel {
  int n;
  add_op ops[];
} add_kernel;

static void kernel_free(tfl_context *ctx, void *buffer) {
  (void)ctx;
  add_kernel *k = buffer;
  if (k == NULL) return;
  for (int i = 0; i < k->n; i++) free(k->ops[i].own_y);
  free(k);
}

static bool contains(const tfl_int_array *a, int v) {
  for (int i = 0; i < a->size; i++)
    if (a->data[i] == v) return true;
  return false;
}

/* The kernel's nodes, in execution order. Tensors that only flow between them are not
 * allocated by the runtime (they are internal to the kernel): the kernel owns them. */
static void *kernel_init(tfl_context *ctx, const char *buffer, size_t length) {
  (void)length;
  const tfl_delegate_params *params = (const tfl_delegate_params *)(const void *)buffer;
  int n = params->nodes_to_replace->size;
  add_kernel *k = calloc(1, sizeof *k + (size_t)n * sizeof(add_op));
  if (k == NULL) return NULL;
  k->n = n;
  for (int i = 0; i < n; i++) {
    tfl_node *node;
    tfl_registration *reg;
    if (ctx->GetNodeAndRegistration(ctx, params->nodes_to_replace->data[i], &node, &reg) != TFL_OK) {
      kernel_free(ctx, k);
      return NULL;
    }
    add_op *op = &k->ops[i];
    *op = (add_op){node->inputs->data[0], node->inputs->data[1], node->outputs->data[0], NULL};
    if (!contains(params->output_tensors, op->y) &&
        (op->own_y = malloc(ctx->tensors[op->y].bytes + 1)) == NULL) {
      kernel_free(ctx, k);
      return NULL;
    }
  }
  return k;
}

/* Where tensor t's data is while op `upto` runs: an earlier op's own buffer, or the
 * runtime's tensor. */
static float *data_of(tfl_context *ctx, const add_kernel *k, int upto, int t) {
  for (int i = upto - 1; i >= 0; i--)
    if (k->ops[i].y == t && k->ops[i].own_y != NULL) return k->ops[i].own_y;
  return ctx->tensors[t].data.f;
}

static tfl_status kernel_prepare(tfl_context *ctx, tfl_node *node) {
  (void)ctx;
  return node->user_data != NULL ? TFL_OK : TFL_ERROR;
}

static tfl_status kernel_invoke(tfl_context *ctx, tfl_node *node) {
  const add_kernel *k = node->user_data;
  for (int i = 0; i < k->n; i++) {
    const add_op *op = &k->ops[i];
    const float *a = data_of(ctx, k, i, op->a), *b = data_of(ctx, k, i, op->b);
    float *y = op->own_y != NULL ? op->own_y : ctx->tensors[op->y].data.f;
    size_t n = ctx->tensors[op->y].bytes / sizeof(float);
    for (size_t j = 0; j < n; j++) y[j] = a[j] + b[j];
    atomic_fetch_add(&g_ran, 1);
  }
  return TFL_OK;
}

/* ---------------------------------------------------------------- delegate */

static bool claimable(tfl_context *ctx, const tfl_node *node, const tfl_registration *reg) {
  if (reg->builtin_code != TFL_BUILTIN_ADD || node->inputs->size != 2 || node->outputs->size != 1) return false;
  const tfl_add_params *p = node->builtin_data;
  if (p != NULL && p->activation != 0) return false;
  const tfl_tensor *y = &ctx->tensors[node->outputs->data[0]];
  if (y->type != TFL_FLOAT32) return false;
  for (int i = 0; i < 2; i++) {
    int t = node->inputs->data[i];
    if (t < 0 || ctx->tensors[t].type != TFL_FLOAT32 || ctx->tensors[t].bytes != y->bytes) return false;
  }
  return true;
}

static tfl_status delegate_prepare(tfl_context *ctx, tfl_delegate *d) {
  const delegate_data *dd = d->data_;
  if (dd->fail_prepare) {
    ctx->ReportError(ctx, "edgert test delegate: Prepare fails as asked (fail_prepare=1)");
    return TFL_ERROR;
  }
  tfl_int_array *plan;
  if (ctx->GetExecutionPlan(ctx, &plan) != TFL_OK) return TFL_ERROR;
  tfl_int_array *claim = malloc(sizeof *claim + (size_t)plan->size * sizeof(int));
  if (claim == NULL) return TFL_ERROR;
  claim->size = 0;
  for (int i = 0; i < plan->size; i++) {
    tfl_node *node;
    tfl_registration *reg;
    if (ctx->GetNodeAndRegistration(ctx, plan->data[i], &node, &reg) != TFL_OK) continue;
    if (claimable(ctx, node, reg)) claim->data[claim->size++] = plan->data[i];
  }
  tfl_status st = TFL_OK;
  if (claim->size > 0) {
    tfl_registration kr;
    memset(&kr, 0, sizeof kr);
    kr.init = kernel_init;
    kr.free = kernel_free;
    kr.prepare = kernel_prepare;
    kr.invoke = kernel_invoke;
    kr.builtin_code = TFL_BUILTIN_DELEGATE;
    kr.custom_name = "EdgertTestAddDelegate";
    kr.version = 1;
    st = ctx->ReplaceNodeSubsetsWithDelegateKernels(ctx, kr, claim, d);
    if (st == TFL_OK) atomic_fetch_add(&g_claimed, claim->size);
  }
  free(claim);
  return st;
}

EXPORT tfl_delegate *tflite_plugin_create_delegate(char **keys, char **values, size_t n,
                                                   void (*report_error)(const char *));
EXPORT void tflite_plugin_destroy_delegate(tfl_delegate *d);

tfl_delegate *tflite_plugin_create_delegate(char **keys, char **values, size_t n,
                                            void (*report_error)(const char *)) {
  tfl_delegate *d = calloc(1, sizeof *d);
  delegate_data *dd = calloc(1, sizeof *dd);
  if (d == NULL || dd == NULL) {
    free(d);
    free(dd);
    if (report_error) report_error("edgert test delegate: out of memory");
    return NULL;
  }
  d->data_ = dd;
  d->Prepare = delegate_prepare;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(keys[i], "counter_file") == 0) {
      free(dd->counter_file);
      dd->counter_file = strdup(values[i]);
    } else if (strcmp(keys[i], "fail_prepare") == 0) {
      dd->fail_prepare = strcmp(values[i], "1") == 0;
    } else {
      char msg[256];
      snprintf(msg, sizeof msg, "edgert test delegate: unknown option '%s' (known: counter_file, fail_prepare)",
               keys[i]);
      if (report_error) report_error(msg);
      tflite_plugin_destroy_delegate(d);
      return NULL;
    }
  }
  return d;
}

void tflite_plugin_destroy_delegate(tfl_delegate *d) {
  if (d == NULL) return;
  delegate_data *dd = d->data_;
  if (dd->counter_file != NULL) {
    FILE *f = fopen(dd->counter_file, "w");
    if (f != NULL) {
      fprintf(f, "claimed %ld ran %ld\n", edgert_test_delegate_claimed(), edgert_test_delegate_ran());
      fclose(f);
    }
  }
  free(dd->counter_file);
  free(dd);
  free(d);
}
