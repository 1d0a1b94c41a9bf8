/* Indexing ops: gather, gather_elements, scatter_elements, one_hot (ONNX semantics).
 *
 * Index tensors are int32 or int64 (one_hot also takes float32, truncated toward
 * zero). Negative indices count from the end of the indexed dim. Index values are
 * data: when they are a constant of the model, prepare rejects out-of-range values;
 * otherwise eval checks all of them before any copy, and an index outside [-n, n)
 * stops the run (gather, gather_elements, scatter_elements: ert_run_fail with
 * EDGERT_ERR_INDEX naming the node and the value, as onnxruntime does). one_hot
 * follows ONNX instead: an out-of-range index is valid and leaves its row at the off
 * value. So the copy loops only ever see indices in range.
 *
 * Parameter words (edgert/converter/ops/gather.py): gather 0 axis; gather_elements 0 axis;
 * scatter_elements 0 axis, 1 reduction (0 none, 1 add, 2 mul, 3 max, 4 min);
 * one_hot 0 axis, 1 depth, 2-3 off value bytes, 4-5 on value bytes.
 */
#include <string.h>

#include "exec.h"
#include "internal.h"

#define PARALLEL_BYTES (1u << 16)

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

static int64_t read_index(const ert_tensor *t, size_t i) {
  if (t->dtype == EDGERT_INT32) {
    int32_t v;
    memcpy(&v, (const char *)t->data + i * 4, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, (const char *)t->data + i * 8, 8);
  return v;
}

/* idx wrapped into [0, n), or -1 when outside [-n, n). */
static int64_t wrap(int64_t idx, int64_t n) {
  if (idx < 0) idx += n;
  return (idx >= 0 && idx < n) ? idx : -1;
}

static edgert_status check_indices(const ert_node *node, ert_err *err, const char *op, uint32_t i,
                                   int64_t n) {
  const ert_tensor *t = node->in[i];
  if (t->dtype != EDGERT_INT32 && t->dtype != EDGERT_INT64)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (%s): indices must be int32 or int64", op);
  if (t->storage == ERT_STORAGE_CONST && t->data != NULL)
    for (size_t k = 0; k < t->numel; k++)
      if (wrap(read_index(t, k), n) < 0)
        return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node),
                             " (%s): constant index %lld outside [%lld, %lld)", op,
                             (long long)read_index(t, k), (long long)-n, (long long)n);
  return EDGERT_OK;
}

/* Run-time check of every index of input i against [-n, n) (constants were checked
 * by prepare); false, after ert_run_fail, at the first bad one. */
static bool indices_ok(const ert_node *node, ert_exec *ex, const char *op, uint32_t i, int64_t n) {
  const ert_tensor *t = node->in[i];
  if (t->storage == ERT_STORAGE_CONST) return true;
  for (size_t k = 0; k < t->numel; k++) {
    const int64_t v = read_index(t, k);
    if (v < -n || v >= n) {
      ert_run_fail(ex, EDGERT_ERR_INDEX, "node '%s' (%s): index %lld out of range [%lld, %lld)", nm(node), op,
                   (long long)v, (long long)-n, (long long)n);
      return false;
    }
  }
  return true;
}

static edgert_status check_axis(const ert_node *node, ert_err *err, const char *op, int32_t axis,
                                int32_t rank) {
  if (axis < 0 || axis >= rank)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (%s): axis %d out of range for rank %d", op,
                         (int)axis, (int)rank);
  return EDGERT_OK;
}

/* ---- gather -------------------------------------------------------------- */

/* opdata: [0] outer, [1] n (axis length), [2] index count, [3] slice bytes. */
edgert_status ert_gather_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 2, 2, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 1)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *ix = node->in[1], *y = node->out[0];
  const int32_t axis = ert_pi(node, 0);
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  if (ert_dtype_size(x->dtype) == 0)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (gather): unknown dtype");
  if ((st = check_axis(node, err, "gather", axis, x->ndim)) != EDGERT_OK) return st;
  int ok = y->ndim == x->ndim + ix->ndim - 1;
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; ok && d < axis; d++) {
    ok = y->shape[d] == x->shape[d];
    outer *= x->shape[d];
  }
  for (int32_t d = 0; ok && d < ix->ndim; d++) ok = y->shape[axis + d] == ix->shape[d];
  for (int32_t d = axis + 1; ok && d < x->ndim; d++) {
    ok = y->shape[d + ix->ndim - 1] == x->shape[d];
    inner *= x->shape[d];
  }
  if (!ok) return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (gather): output shape mismatch");
  if ((st = check_indices(node, err, "gather", 1, x->shape[axis])) != EDGERT_OK) return st;
  node->opdata[0] = outer;
  node->opdata[1] = x->shape[axis];
  node->opdata[2] = (int64_t)ix->numel;
  node->opdata[3] = inner * (int64_t)ert_dtype_size(x->dtype);
  return EDGERT_OK;
}

/* Units [begin, end) of outer * index count; each copies one slice. */
static void gather_task(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const int64_t n = node->opdata[1], count = node->opdata[2];
  const size_t slice = (size_t)node->opdata[3];
  const char *src = (const char *)node->in[0]->data;
  char *dst = (char *)node->out[0]->data;
  for (size_t u = begin; u < end; u++) {
    const size_t o = u / (size_t)count, j = u % (size_t)count;
    int64_t i = read_index(node->in[1], j); /* in [-n, n): checked by eval */
    if (i < 0) i += n;
    memcpy(dst + u * slice, src + (o * (size_t)n + (size_t)i) * slice, slice);
  }
}

void ert_gather_eval(const ert_node *node, ert_exec *ex) {
  const size_t units = (size_t)(node->opdata[0] * node->opdata[2]);
  if (!indices_ok(node, ex, "gather", 1, node->opdata[1])) return;
  if (node->out[0]->nbytes == 0) return;
  if (node->out[0]->nbytes < PARALLEL_BYTES)
    gather_task((void *)node, 0, units);
  else
    ert_parallel_for(ex, units, gather_task, (void *)node);
}

/* ---- gather_elements / scatter_elements ---------------------------------------- */

/* Shared shape rules: same rank >= 1, index dims within data dims off the axis. */
static edgert_status check_elements(const ert_node *node, ert_err *err, const char *op,
                                    const ert_tensor *x, const ert_tensor *ix, int32_t axis) {
  edgert_status st = check_axis(node, err, op, axis, x->ndim);
  if (st != EDGERT_OK) return st;
  if (ix->ndim != x->ndim)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (%s): indices rank differs from data rank", op);
  for (int32_t d = 0; d < x->ndim; d++)
    if (d != axis && ix->shape[d] > x->shape[d])
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (%s): indices dim %d exceeds data", op, (int)d);
  return check_indices(node, err, op, 1, x->shape[axis]);
}

/* Calls visit(ctx, k, data_offset) for each index element k in order, with
 * data_offset the element of data it addresses (indices checked by eval). */
typedef void (*elem_fn)(void *ctx, size_t k, int64_t data_off);

static void walk_elements(const ert_tensor *x, const ert_tensor *ix, int32_t axis, size_t begin,
                          size_t end, elem_fn fn, void *ctx) {
  const int r = x->ndim;
  int64_t xs[EDGERT_MAX_DIMS], coord[EDGERT_MAX_DIMS];
  int64_t acc = 1;
  for (int d = r - 1; d >= 0; d--) {
    xs[d] = acc;
    acc *= x->shape[d];
  }
  size_t rem = begin;
  int64_t base = 0; /* offset of the coordinates, without the axis term */
  for (int d = r - 1; d >= 0; d--) {
    coord[d] = (int64_t)(rem % (size_t)ix->shape[d]);
    rem /= (size_t)ix->shape[d];
    if (d != axis) base += coord[d] * xs[d];
  }
  const int64_t n = x->shape[axis];
  for (size_t k = begin; k < end; k++) {
    int64_t i = read_index(ix, k);
    if (i < 0) i += n;
    fn(ctx, k, base + i * xs[axis]);
    for (int d = r - 1; d >= 0; d--) {
      if (d != axis) base += xs[d];
      if (++coord[d] < ix->shape[d]) break;
      if (d != axis) base -= coord[d] * xs[d];
      coord[d] = 0;
    }
  }
}

edgert_status ert_gather_elements_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 2, 2, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 1)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *ix = node->in[1], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  const size_t es = ert_dtype_size(x->dtype);
  if (es == 0 || es > 8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (gather_elements): unknown dtype");
  if ((st = ert_check_same_shape(node, err, ix, y)) != EDGERT_OK) return st;
  return check_elements(node, err, "gather_elements", x, ix, ert_pi(node, 0));
}

typedef struct {
  const ert_node *node;
  size_t es;
} elem_ctx;

static void gather_elem(void *arg, size_t k, int64_t off) {
  const elem_ctx *c = (const elem_ctx *)arg;
  char *d = (char *)c->node->out[0]->data + k * c->es;
  memcpy(d, (const char *)c->node->in[0]->data + (size_t)off * c->es, c->es);
}

static void gather_elements_task(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  elem_ctx c = {node, ert_dtype_size(node->in[0]->dtype)};
  walk_elements(node->in[0], node->in[1], ert_pi(node, 0), begin, end, gather_elem, &c);
}

void ert_gather_elements_eval(const ert_node *node, ert_exec *ex) {
  const size_t n = node->out[0]->numel;
  if (!indices_ok(node, ex, "gather_elements", 1, node->in[0]->shape[ert_pi(node, 0)])) return;
  if (n == 0) return;
  if (node->out[0]->nbytes < PARALLEL_BYTES)
    gather_elements_task((void *)node, 0, n);
  else
    ert_parallel_for(ex, n, gather_elements_task, (void *)node);
}

enum { RED_NONE = 0, RED_ADD = 1, RED_MUL = 2, RED_MAX = 3, RED_MIN = 4 };

edgert_status ert_scatter_elements_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 3, 3, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *ix = node->in[1], *u = node->in[2], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  if ((st = ert_check_dtype(node, err, u, x->dtype)) != EDGERT_OK) return st;
  if ((st = ert_check_same_shape(node, err, x, y)) != EDGERT_OK) return st;
  if ((st = ert_check_same_shape(node, err, ix, u)) != EDGERT_OK) return st;
  const int32_t red = ert_pi(node, 1);
  const size_t es = ert_dtype_size(x->dtype);
  if (es == 0 || es > 8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (scatter_elements): unknown dtype");
  if (red < RED_NONE || red > RED_MIN)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (scatter_elements): unknown reduction %d",
                         (int)red);
  if (red != RED_NONE) {
    switch (x->dtype) {
      case EDGERT_FLOAT32: case EDGERT_UINT8: case EDGERT_INT8: case EDGERT_INT16:
      case EDGERT_INT32: case EDGERT_INT64:
        break;
      default:
        return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nm(node), " (scatter_elements): reduction on %s",
                             ert_dtype_name(x->dtype));
    }
  }
  return check_elements(node, err, "scatter_elements", x, ix, ert_pi(node, 0));
}

/* Combines update u into element *d by reduction red (integers wrap around). */
#define ERT_REDUCE(T, UT)                                         \
  do {                                                            \
    T a, b;                                                       \
    memcpy(&a, d, sizeof a);                                      \
    memcpy(&b, u, sizeof b);                                      \
    switch (red) {                                                \
      case RED_ADD: a = (T)((UT)a + (UT)b); break;                \
      case RED_MUL: a = (T)((UT)a * (UT)b); break;                \
      case RED_MAX: a = b > a ? b : a; break;                     \
      default: a = b < a ? b : a; break;                          \
    }                                                             \
    memcpy(d, &a, sizeof a);                                      \
  } while (0)

typedef struct {
  const ert_node *node;
  size_t es;
  int32_t red;
} scatter_ctx;

static void scatter_elem(void *arg, size_t k, int64_t off) {
  const scatter_ctx *c = (const scatter_ctx *)arg;
  char *d = (char *)c->node->out[0]->data + (size_t)off * c->es;
  const char *u = (const char *)c->node->in[2]->data + k * c->es;
  const int32_t red = c->red;
  if (red == RED_NONE) {
    memcpy(d, u, c->es);
    return;
  }
  switch (c->node->out[0]->dtype) {
    case EDGERT_FLOAT32: {
      float a, b;
      memcpy(&a, d, 4);
      memcpy(&b, u, 4);
      switch (red) {
        case RED_ADD: a = a + b; break;
        case RED_MUL: a = a * b; break;
        case RED_MAX: a = b > a ? b : a; break;
        default: a = b < a ? b : a; break;
      }
      memcpy(d, &a, 4);
      break;
    }
    case EDGERT_UINT8: ERT_REDUCE(uint8_t, uint32_t); break;
    case EDGERT_INT8: ERT_REDUCE(int8_t, uint32_t); break;
    case EDGERT_INT16: ERT_REDUCE(int16_t, uint32_t); break;
    case EDGERT_INT32: ERT_REDUCE(int32_t, uint32_t); break;
    default: ERT_REDUCE(int64_t, uint64_t); break;
  }
}

void ert_scatter_elements_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (!indices_ok(node, ex, "scatter_elements", 1, x->shape[ert_pi(node, 0)])) return;
  if (x->nbytes > 0 && y->data != x->data) memmove(y->data, x->data, x->nbytes);
  if (node->in[1]->numel == 0) return;
  /* Sequential: later updates of one element win (or combine) in index order. */
  scatter_ctx c = {node, ert_dtype_size(x->dtype), ert_pi(node, 1)};
  walk_elements(x, node->in[1], ert_pi(node, 0), 0, node->in[1]->numel, scatter_elem, &c);
}

/* ---- one_hot ------------------------------------------------------------- */

/* opdata: [0] outer, [1] inner, [2] off bytes, [3] on bytes. */
edgert_status ert_one_hot_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 6)) != EDGERT_OK) return st;
  const ert_tensor *ix = node->in[0], *y = node->out[0];
  const int32_t axis = ert_pi(node, 0), depth = ert_pi(node, 1);
  if (ix->dtype != EDGERT_INT32 && ix->dtype != EDGERT_INT64 && ix->dtype != EDGERT_FLOAT32)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node),
                         " (one_hot): indices must be int32, int64 or float32");
  const size_t es = ert_dtype_size(y->dtype);
  if (es == 0 || es > 8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (one_hot): unknown output dtype");
  if (axis < 0 || axis > ix->ndim || depth < 1 || y->ndim != ix->ndim + 1 || y->shape[axis] != depth)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node),
                         " (one_hot): axis %d / depth %d do not match the output", (int)axis, (int)depth);
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < ix->ndim; d++) {
    const int32_t yd = d < axis ? d : d + 1;
    if (y->shape[yd] != ix->shape[d])
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (one_hot): output shape mismatch");
    if (d < axis) outer *= ix->shape[d]; else inner *= ix->shape[d];
  }
  node->opdata[0] = outer;
  node->opdata[1] = inner;
  for (int v = 0; v < 2; v++) {
    unsigned char b[8];
    const uint32_t w0 = node->params[2 + 2 * v], w1 = node->params[3 + 2 * v];
    for (int i = 0; i < 4; i++) {
      b[i] = (unsigned char)(w0 >> (8 * i));
      b[4 + i] = (unsigned char)(w1 >> (8 * i));
    }
    memcpy(&node->opdata[2 + v], b, 8);
  }
  return EDGERT_OK;
}

void ert_one_hot_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *ix = node->in[0], *y = node->out[0];
  const size_t es = ert_dtype_size(y->dtype);
  const int64_t outer = node->opdata[0], inner = node->opdata[1], depth = ert_pi(node, 1);
  const char *off = (const char *)&node->opdata[2], *on = (const char *)&node->opdata[3];
  char *dst = (char *)y->data;
  for (size_t i = 0; i < y->numel; i++) memcpy(dst + i * es, off, es);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const size_t k = (size_t)(o * inner + i);
      int64_t v;
      if (ix->dtype == EDGERT_FLOAT32) {
        float f;
        memcpy(&f, (const char *)ix->data + k * 4, 4);
        if (!(f > -2147483648.0f && f < 2147483648.0f)) continue; /* NaN, huge: no hot entry */
        v = (int64_t)f;
      } else {
        v = read_index(ix, k);
      }
      v = wrap(v, depth);
      if (v >= 0) memcpy(dst + ((size_t)(o * depth + v) * (size_t)inner + (size_t)i) * es, on, es);
    }
}

/* Bounded dimensions: data dims before the axis, the indices' dims, data dims after. */
edgert_status ert_gather_shape(ert_node *node, ert_err *err) {
  const ert_tensor *x = node->in[0], *ix = node->in[1];
  ert_tensor *y = node->out[0];
  const int32_t axis = ert_pi(node, 0);
  if (axis < 0 || axis >= x->ndim || x->ndim - 1 + ix->ndim != y->ndim)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, node->name, " (gather): ranks do not match");
  int64_t dims[EDGERT_MAX_DIMS];
  int32_t r = 0;
  for (int32_t d = 0; d < axis; d++) dims[r++] = x->shape[d];
  for (int32_t d = 0; d < ix->ndim; d++) dims[r++] = ix->shape[d];
  for (int32_t d = axis + 1; d < x->ndim; d++) dims[r++] = x->shape[d];
  ert_tensor_set_shape(y, r, dims);
  return EDGERT_OK;
}
