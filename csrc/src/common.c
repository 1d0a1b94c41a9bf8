/* common.c: status strings, versions, error formatting, dtype facts, the shared
 * prepare checks, fused activations and the counted allocation wrappers. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "internal.h"

const char *edgert_status_str(edgert_status status) {
  switch (status) {
    case EDGERT_OK: return "ok";
    case EDGERT_ERR_IO: return "i/o error";
    case EDGERT_ERR_FORMAT: return "format error";
    case EDGERT_ERR_CHECKSUM: return "checksum mismatch";
    case EDGERT_ERR_VERSION: return "unsupported format version";
    case EDGERT_ERR_ALIGNMENT: return "misaligned buffer";
    case EDGERT_ERR_UNSUPPORTED_OP: return "unsupported op";
    case EDGERT_ERR_UNSUPPORTED: return "unsupported op configuration";
    case EDGERT_ERR_NO_BACKEND: return "no backend for a fallback partition";
    case EDGERT_ERR_BACKEND: return "fallback partition backend failed";
    case EDGERT_ERR_SHAPE: return "shape error";
    case EDGERT_ERR_DTYPE: return "dtype error";
    case EDGERT_ERR_PARAM: return "parameter error";
    case EDGERT_ERR_NO_MEMORY: return "out of memory";
    case EDGERT_ERR_ARENA_TOO_SMALL: return "arena too small";
    case EDGERT_ERR_THREADS: return "cannot start threads";
    case EDGERT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case EDGERT_ERR_INDEX: return "index out of range";
    case EDGERT_ERR_BUSY: return "session busy";
  }
  return "unknown status";
}

const char *edgert_version(void) { return "0.1.0"; }

uint32_t edgert_format_version(void) { return (1u << 16) | 3u; }

/* EDGERT_BUILD_INFO is set by `edgert build` ("rpi4 aarch64 -mcpu=cortex-a72"); other
 * builds (the host's cffi extension, plain make) name the architecture they target. */
#ifndef EDGERT_BUILD_INFO
#if defined(__aarch64__)
#define EDGERT_BUILD_INFO "aarch64"
#elif defined(__arm__)
#define EDGERT_BUILD_INFO "arm"
#elif defined(__x86_64__)
#define EDGERT_BUILD_INFO "x86_64"
#else
#define EDGERT_BUILD_INFO "generic"
#endif
#endif
#if defined(ERT_NEON_KERNELS)
#define ERT_KERNEL_SETS " kernels=ref,neon"
#elif defined(ERT_X86_KERNELS)
#define ERT_KERNEL_SETS " kernels=ref,avx2"
#else
#define ERT_KERNEL_SETS " kernels=ref"
#endif

const char *edgert_build_info(void) { return EDGERT_BUILD_INFO ERT_KERNEL_SETS; }

const char *edgert_kernels(void) { return ert_cpu.isa; }

edgert_status ert_fail(ert_err *err, edgert_status status, const char *fmt, ...) {
  if (err != NULL && err->msg != NULL && err->size > 0) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, err->size, fmt, ap);
    va_end(ap);
    if (n < 0) err->msg[0] = '\0';
  }
  return status;
}

edgert_status ert_fail_node(ert_err *err, edgert_status status, const char *node, const char *fmt, ...) {
  if (err != NULL && err->msg != NULL && err->size > 0) {
    int n = snprintf(err->msg, err->size, "node '%s'", node);
    if (n < 0) {
      err->msg[0] = '\0';
    } else if ((size_t)n < err->size) {
      va_list ap;
      va_start(ap, fmt);
      if (vsnprintf(err->msg + n, err->size - (size_t)n, fmt, ap) < 0) err->msg[n] = '\0';
      va_end(ap);
    }
  }
  return status;
}

size_t ert_dtype_size(int32_t dtype) {
  switch (dtype) {
    case EDGERT_FLOAT32: return 4;
    case EDGERT_UINT8: return 1;
    case EDGERT_INT8: return 1;
    case EDGERT_INT16: return 2;
    case EDGERT_INT32: return 4;
    case EDGERT_INT64: return 8;
    case EDGERT_BOOL: return 1;
    case EDGERT_FLOAT16: return 2;
    default: return 0;
  }
}

const char *ert_dtype_name(int32_t dtype) {
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

/* ---- prepare checks ---------------------------------------------------- */

static const char *node_name(const ert_node *n) { return n->name ? n->name : ""; }

static const char *op_name(const ert_node *n) {
  ert_op_impl impl;
  const char *name = ert_op_lookup((uint32_t)n->op, &impl);
  return name ? name : "?";
}

/* Describes where t sits in the node ("input 1", "output 0") into buf. */
static const char *slot_name(const ert_node *n, const ert_tensor *t, char *buf, size_t size) {
  for (uint32_t i = 0; i < n->n_in; i++)
    if (n->in[i] == t) {
      snprintf(buf, size, "input %u", (unsigned)i);
      return buf;
    }
  for (uint32_t i = 0; i < n->n_out; i++)
    if (n->out[i] == t) {
      snprintf(buf, size, "output %u", (unsigned)i);
      return buf;
    }
  snprintf(buf, size, "tensor '%s'", t && t->name ? t->name : "");
  return buf;
}

edgert_status ert_check_arity(const ert_node *n, ert_err *err, uint32_t min_in,
                              uint32_t max_in, uint32_t min_out, uint32_t max_out) {
  if (n->n_in < min_in || n->n_in > max_in)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, node_name(n), " (%s): expects %u to %u inputs, got %u",
                         op_name(n), (unsigned)min_in, (unsigned)max_in, (unsigned)n->n_in);
  if (n->n_out < min_out || n->n_out > max_out)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, node_name(n), " (%s): expects %u to %u outputs, got %u",
                         op_name(n), (unsigned)min_out, (unsigned)max_out, (unsigned)n->n_out);
  for (uint32_t i = 0; i < min_in; i++)
    if (n->in[i] == NULL)
      return ert_fail_node(err, EDGERT_ERR_FORMAT, node_name(n), " (%s): input %u is required", op_name(n),
                           (unsigned)i);
  return EDGERT_OK;
}

edgert_status ert_check_params(const ert_node *n, ert_err *err, uint32_t min_params) {
  if (n->n_params < min_params)
    return ert_fail_node(err, EDGERT_ERR_PARAM, node_name(n), " (%s): expects %u parameter words, got %u",
                         op_name(n), (unsigned)min_params, (unsigned)n->n_params);
  return EDGERT_OK;
}

edgert_status ert_check_dtype(const ert_node *n, ert_err *err, const ert_tensor *t,
                              int32_t dtype) {
  char slot[48];
  if (t == NULL)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, node_name(n), " (%s): a required tensor is absent",
                         op_name(n));
  if (t->dtype != dtype)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, node_name(n), " (%s): %s must be %s, got %s", op_name(n),
                         slot_name(n, t, slot, sizeof slot), ert_dtype_name(dtype), ert_dtype_name(t->dtype));
  return EDGERT_OK;
}

/* Writes "[2, 3, 4]" into buf (size >= 2). */
static const char *shape_str(const ert_tensor *t, char *buf, size_t size) {
  size_t used = 1; /* size >= 2 */
  buf[0] = '[';
  buf[1] = '\0';
  for (int32_t i = 0; i < t->ndim && i < EDGERT_MAX_DIMS && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %d" : "%d", (int)t->shape[i]);
  if (used + 1 < size) {
    buf[used] = ']';
    buf[used + 1] = '\0';
  }
  return buf;
}

edgert_status ert_check_same_shape(const ert_node *n, ert_err *err, const ert_tensor *a,
                                   const ert_tensor *b) {
  if (a == NULL || b == NULL)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, node_name(n), " (%s): a required tensor is absent",
                         op_name(n));
  bool same = a->ndim == b->ndim;
  for (int32_t i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
  if (!same) {
    char sa[48], sb[48], sha[120], shb[120];
    return ert_fail_node(err, EDGERT_ERR_SHAPE, node_name(n), " (%s): %s has shape %s but %s has shape %s",
                         op_name(n), slot_name(n, a, sa, sizeof sa), shape_str(a, sha, sizeof sha),
                         slot_name(n, b, sb, sizeof sb), shape_str(b, shb, sizeof shb));
  }
  return EDGERT_OK;
}

edgert_status ert_check_shape(const ert_node *n, ert_err *err, const ert_tensor *t, int32_t ndim,
                              const int64_t *dims) {
  bool same = t->ndim == ndim;
  for (int32_t i = 0; same && i < ndim; i++) same = t->shape[i] == dims[i];
  if (same) return EDGERT_OK;
  ert_tensor want = {.ndim = ndim};
  for (int32_t i = 0; i < ndim; i++) want.shape[i] = (int32_t)dims[i];
  char st[48], sh[120], sw[120];
  return ert_fail_node(err, EDGERT_ERR_SHAPE, node_name(n), " (%s): %s has shape %s, expected %s", op_name(n),
                       slot_name(n, t, st, sizeof st), shape_str(t, sh, sizeof sh), shape_str(&want, sw, sizeof sw));
}

bool ert_is_f32(const ert_tensor *t, int ndim) {
  return t != NULL && t->dtype == EDGERT_FLOAT32 && (ndim < 0 || t->ndim == ndim);
}

edgert_status ert_check_const(const ert_node *n, ert_err *err, uint32_t i) {
  if (i >= n->n_in || n->in[i] == NULL)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, node_name(n), " (%s): input %u is required", op_name(n),
                         (unsigned)i);
  if (n->in[i]->storage != ERT_STORAGE_CONST || n->in[i]->data == NULL)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, node_name(n), " (%s): input %u must be a constant",
                         op_name(n), (unsigned)i);
  return EDGERT_OK;
}

/* ---- fused activations ------------------------------------------------- */

edgert_status ert_act_read(const ert_node *n, uint32_t first_word, ert_act_params *act,
                           ert_err *err) {
  if (first_word > n->n_params || n->n_params - first_word < 3)
    return ert_fail_node(err, EDGERT_ERR_PARAM, node_name(n),
                         " (%s): activation needs parameter words %u..%u, got %u words", op_name(n),
                         (unsigned)first_word, (unsigned)first_word + 2, (unsigned)n->n_params);
  int32_t kind = ert_pi(n, first_word);
  if (kind < 0 || kind >= ERT_ACT_COUNT)
    return ert_fail_node(err, EDGERT_ERR_PARAM, node_name(n), " (%s): unknown activation kind %d", op_name(n),
                         (int)kind);
  act->kind = kind;
  act->a = ert_pf(n, first_word + 1);
  act->b = ert_pf(n, first_word + 2);
  return EDGERT_OK;
}

void ert_act_apply(const ert_act_params *act, float *x, size_t count) {
  if (ert_cpu.act_apply != NULL && ert_cpu.act_apply(act, x, count)) return; /* cpu.h */
  const float a = act->a, b = act->b;
  switch ((ert_act)act->kind) {
    case ERT_ACT_NONE:
    case ERT_ACT_COUNT:
      break;
    case ERT_ACT_RELU:
      for (size_t i = 0; i < count; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case ERT_ACT_CLIP:
      for (size_t i = 0; i < count; i++) {
        float v = x[i] < a ? a : x[i];
        x[i] = v > b ? b : v;
      }
      break;
    case ERT_ACT_HARD_SIGMOID:
      for (size_t i = 0; i < count; i++) {
        float v = a * x[i] + b;
        v = v < 0.0f ? 0.0f : v;
        x[i] = v > 1.0f ? 1.0f : v;
      }
      break;
    case ERT_ACT_HARD_SWISH:
      for (size_t i = 0; i < count; i++) {
        float v = x[i] / 6.0f + 0.5f;
        v = v < 0.0f ? 0.0f : v;
        v = v > 1.0f ? 1.0f : v;
        x[i] = x[i] * v;
      }
      break;
    case ERT_ACT_SIGMOID:
      for (size_t i = 0; i < count; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
      break;
    case ERT_ACT_SILU:
      for (size_t i = 0; i < count; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
      break;
    case ERT_ACT_LEAKY_RELU:
      for (size_t i = 0; i < count; i++) x[i] = x[i] < 0.0f ? a * x[i] : x[i];
      break;
    case ERT_ACT_TANH:
      for (size_t i = 0; i < count; i++) x[i] = tanhf(x[i]);
      break;
    case ERT_ACT_GELU:
      for (size_t i = 0; i < count; i++)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
      break;
  }
}

/* ---- counted allocation -------------------------------------------------- */

static _Atomic uint64_t alloc_count;

uint64_t edgert_alloc_count(void) { return atomic_load(&alloc_count); }

void *ert_malloc(size_t size) {
  atomic_fetch_add(&alloc_count, 1);
  return malloc(size ? size : 1);
}

void *ert_calloc(size_t n, size_t size) {
  atomic_fetch_add(&alloc_count, 1);
  if (n == 0 || size == 0) n = size = 1;
  return calloc(n, size);
}

void *ert_aligned_alloc(size_t align, size_t size) {
  atomic_fetch_add(&alloc_count, 1);
  if (align < sizeof(void *)) align = sizeof(void *);
  if (size == 0) size = 1;
  /* C11 aligned_alloc wants a size that is a multiple of the alignment. */
  if (size > SIZE_MAX - (align - 1)) return NULL;
  size = (size + align - 1) / align * align;
  return aligned_alloc(align, size);
}

void ert_free(void *p) { free(p); }

/* ---- shape functions for bounded dimensions ---- */

void ert_tensor_set_shape(ert_tensor *t, int32_t ndim, const int64_t *dims) {
  size_t numel = 1;
  t->ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) {
    t->shape[d] = (int32_t)dims[d];
    numel *= (size_t)dims[d];
  }
  t->numel = numel;
  t->nbytes = numel * ert_dtype_size(t->dtype);
}

edgert_status ert_shape_same(ert_node *n, ert_err *err) {
  const ert_tensor *x = n->in[0];
  if (x == NULL) return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, ": input 0 is absent");
  int64_t dims[EDGERT_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) dims[d] = x->shape[d];
  for (uint32_t k = 0; k < n->n_out; k++)
    if (n->out[k]->ndim == x->ndim) ert_tensor_set_shape(n->out[k], x->ndim, dims);
  return EDGERT_OK;
}

edgert_status ert_shape_broadcast(ert_node *n, ert_err *err) {
  ert_tensor *y = n->out[0];
  const int32_t r = y->ndim;
  int64_t dims[EDGERT_MAX_DIMS];
  for (int32_t d = 0; d < r; d++) dims[d] = 1;
  for (uint32_t k = 0; k < n->n_in; k++) {
    const ert_tensor *x = n->in[k];
    if (x == NULL) continue;
    if (x->ndim > r)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, ": input %u has more dims than the output",
                           (unsigned)k);
    for (int32_t d = 0; d < x->ndim; d++) {
      const int64_t v = x->shape[d];
      int64_t *o = &dims[r - x->ndim + d];
      if (v == *o || v == 1) continue;
      if (*o != 1)
        return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, ": input %u does not broadcast (%lld vs %lld)",
                             (unsigned)k, (long long)v, (long long)*o);
      *o = v;
    }
  }
  ert_tensor_set_shape(y, r, dims);
  return EDGERT_OK;
}
