/* topk: the k largest (or smallest) elements along one axis, best first, with their
 * int64 positions. Equal values come in increasing position order; NaN ranks above
 * every number. Output is always sorted (ONNX leaves the order open when sorted=0).
 * Inputs: float32 or an integer dtype (uint8, int8, int16, int32, int64).
 *
 * Each line along the axis is scanned once while a binary heap of the best k
 * positions so far (worst at the root) lives in scratch; the heap is then emptied
 * worst-first into the outputs from the back: O(n log k) per line.
 *
 * Parameter words (edgert/ops/misc.py): 0 axis, 1 k, 2 largest, 3 sorted.
 * Scratch: 4*k bytes.
 */
#include <string.h>

#include "internal.h"

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

edgert_status ert_topk_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 2, 2);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 4)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *v = node->out[0], *ix = node->out[1];
  switch (x->dtype) {
    case EDGERT_FLOAT32: case EDGERT_UINT8: case EDGERT_INT8: case EDGERT_INT16:
    case EDGERT_INT32: case EDGERT_INT64:
      break;
    default:
      return ert_fail(err, EDGERT_ERR_DTYPE, "node '%s' (topk): unsupported dtype %s", nm(node),
                      ert_dtype_name(x->dtype));
  }
  if ((st = ert_check_dtype(node, err, v, x->dtype)) != EDGERT_OK) return st;
  if ((st = ert_check_dtype(node, err, ix, EDGERT_INT64)) != EDGERT_OK) return st;
  if ((st = ert_check_same_shape(node, err, v, ix)) != EDGERT_OK) return st;
  const int32_t axis = ert_pi(node, 0), k = ert_pi(node, 1);
  if (axis < 0 || axis >= x->ndim || k < 0 || k > x->shape[axis] || v->ndim != x->ndim)
    return ert_fail(err, EDGERT_ERR_PARAM, "node '%s' (topk): axis %d / k %d out of range", nm(node),
                    (int)axis, (int)k);
  for (int32_t d = 0; d < x->ndim; d++)
    if (v->shape[d] != (d == axis ? k : x->shape[d]))
      return ert_fail(err, EDGERT_ERR_SHAPE, "node '%s' (topk): output shape mismatch", nm(node));
  if (node->scratch_bytes < 4 * (size_t)k)
    return ert_fail(err, EDGERT_ERR_PARAM, "node '%s' (topk): scratch of %zu bytes, needs %zu", nm(node),
                    node->scratch_bytes, 4 * (size_t)k);
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= x->shape[d];
  for (int32_t d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
  node->opdata[0] = outer;
  node->opdata[1] = x->shape[axis];
  node->opdata[2] = inner;
  return EDGERT_OK;
}

/* Defines topk_<NAME>: one line x[t*s], t < n, into vals/idx at stride s.
 * BETTER(a, b): position a ranks strictly before position b. */
#define ERT_TOPK_IMPL(NAME, T, GREATER)                                                 \
  static int better_##NAME(const T *x, int64_t s, int largest, int32_t a, int32_t b) { \
    const T va = x[a * s], vb = x[b * s];                                               \
    if (largest ? GREATER(va, vb) : GREATER(vb, va)) return 1;                          \
    if (largest ? GREATER(vb, va) : GREATER(va, vb)) return 0;                          \
    return a < b;                                                                       \
  }                                                                                     \
  static void topk_##NAME(const T *x, int64_t s, int64_t n, int64_t k, int largest,    \
                          int32_t *heap, T *vals, int64_t *idx) {                      \
    int64_t m = 0;                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                   \
      int64_t j;                                                                        \
      if (m < k) {                                                                      \
        j = m++;                                                                        \
        heap[j] = (int32_t)i;                                                           \
        while (j > 0) { /* sift up: the root holds the worst */                         \
          const int64_t p = (j - 1) / 2;                                                \
          if (!better_##NAME(x, s, largest, heap[p], heap[j])) break;                   \
          const int32_t tmp = heap[p];                                                  \
          heap[p] = heap[j];                                                            \
          heap[j] = tmp;                                                                \
          j = p;                                                                        \
        }                                                                               \
        continue;                                                                       \
      }                                                                                 \
      if (k == 0 || !better_##NAME(x, s, largest, (int32_t)i, heap[0])) continue;       \
      heap[0] = (int32_t)i;                                                             \
      sift_##NAME(x, s, largest, heap, m);                                              \
    }                                                                                   \
    for (int64_t t = m - 1; t >= 0; t--) { /* worst first, written from the back */     \
      vals[t * s] = x[(int64_t)heap[0] * s];                                            \
      idx[t * s] = heap[0];                                                             \
      heap[0] = heap[t];                                                                \
      sift_##NAME(x, s, largest, heap, t);                                              \
    }                                                                                   \
  }

/* Sift-down from the root of a heap of `size` positions (worst at the root). */
#define ERT_TOPK_SIFT(NAME, T)                                                              \
  static int better_##NAME(const T *x, int64_t s, int largest, int32_t a, int32_t b);      \
  static void sift_##NAME(const T *x, int64_t s, int largest, int32_t *heap, int64_t size) { \
    int64_t j = 0;                                                                          \
    for (;;) {                                                                              \
      const int64_t l = 2 * j + 1, r = l + 1;                                               \
      int64_t w = j;                                                                        \
      if (l < size && better_##NAME(x, s, largest, heap[w], heap[l])) w = l;                \
      if (r < size && better_##NAME(x, s, largest, heap[w], heap[r])) w = r;                \
      if (w == j) return;                                                                   \
      const int32_t tmp = heap[w];                                                          \
      heap[w] = heap[j];                                                                    \
      heap[j] = tmp;                                                                        \
      j = w;                                                                                \
    }                                                                                       \
  }

#define ERT_NUM_GREATER(a, b) ((a) > (b))
/* NaN is greater than every number; two NaNs are equal. */
#define ERT_F32_GREATER(a, b) (((a) != (a)) ? ((b) == (b)) : ((a) > (b)))

ERT_TOPK_SIFT(f32, float)
ERT_TOPK_IMPL(f32, float, ERT_F32_GREATER)
ERT_TOPK_SIFT(u8, uint8_t)
ERT_TOPK_IMPL(u8, uint8_t, ERT_NUM_GREATER)
ERT_TOPK_SIFT(i8, int8_t)
ERT_TOPK_IMPL(i8, int8_t, ERT_NUM_GREATER)
ERT_TOPK_SIFT(i16, int16_t)
ERT_TOPK_IMPL(i16, int16_t, ERT_NUM_GREATER)
ERT_TOPK_SIFT(i32, int32_t)
ERT_TOPK_IMPL(i32, int32_t, ERT_NUM_GREATER)
ERT_TOPK_SIFT(i64, int64_t)
ERT_TOPK_IMPL(i64, int64_t, ERT_NUM_GREATER)

void ert_topk_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *x = node->in[0], *v = node->out[0], *ix = node->out[1];
  const int64_t outer = node->opdata[0], n = node->opdata[1], inner = node->opdata[2];
  const int64_t k = ert_pi(node, 1);
  const int largest = ert_pi(node, 2) != 0;
  int32_t *heap = (int32_t *)node->scratch;
  if (v->numel == 0) return;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const int64_t in_at = o * n * inner + i, out_at = o * k * inner + i;
      int64_t *idx = (int64_t *)ix->data + out_at;
      switch (x->dtype) {
#define ERT_TOPK_CASE(CODE, NAME, T)                                                       \
  case CODE:                                                                               \
    topk_##NAME((const T *)x->data + in_at, inner, n, k, largest, heap, (T *)v->data + out_at, \
                idx);                                                                      \
    break;
        ERT_TOPK_CASE(EDGERT_FLOAT32, f32, float)
        ERT_TOPK_CASE(EDGERT_UINT8, u8, uint8_t)
        ERT_TOPK_CASE(EDGERT_INT8, i8, int8_t)
        ERT_TOPK_CASE(EDGERT_INT16, i16, int16_t)
        ERT_TOPK_CASE(EDGERT_INT32, i32, int32_t)
        default:
          ERT_TOPK_CASE(EDGERT_INT64, i64, int64_t)
#undef ERT_TOPK_CASE
      }
    }
}
