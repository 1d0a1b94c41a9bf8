/* topk: the k largest (or smallest) elements along one axis, best first, with their
 * int64 positions. Equal values come in increasing position order; NaN ranks above
 * every number. Output is always sorted (ONNX leaves the order open when sorted=0).
 * Inputs: float32 or an integer dtype (uint8, int8, int16, int32, int64).
 *
 * Each line along the axis is scanned once while a binary heap of the best k
 * positions so far (worst at the root) lives in scratch; the heap is then emptied
 * worst-first into the outputs from the back: O(n log k) per line.
 *
 * Parameter words (edgert/converter/ops/misc.py): 0 axis, 1 k, 2 largest, 3 sorted.
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
      return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (topk): unsupported dtype %s",
                           ert_dtype_name(x->dtype));
  }
  if ((st = ert_check_dtype(node, err, v, x->dtype)) != EDGERT_OK) return st;
  if ((st = ert_check_dtype(node, err, ix, EDGERT_INT64)) != EDGERT_OK) return st;
  if ((st = ert_check_same_shape(node, err, v, ix)) != EDGERT_OK) return st;
  const int32_t axis = ert_pi(node, 0), k = ert_pi(node, 1);
  if (axis < 0 || axis >= x->ndim || k < 0 || k > x->shape[axis] || v->ndim != x->ndim)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (topk): axis %d / k %d out of range", (int)axis,
                         (int)k);
  for (int32_t d = 0; d < x->ndim; d++)
    if (v->shape[d] != (d == axis ? k : x->shape[d]))
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (topk): output shape mismatch");
  if (node->scratch_bytes < 4 * (size_t)k)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (topk): scratch of %zu bytes, needs %zu",
                         node->scratch_bytes, 4 * (size_t)k);
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= x->shape[d];
  for (int32_t d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
  node->opdata[0] = outer;
  node->opdata[1] = x->shape[axis];
  node->opdata[2] = inner;
  return EDGERT_OK;
}

/* One line along the axis: element t at x + t * s * es. */
typedef struct tk_line {
  const char *x;
  int64_t s;
  size_t es;
  int32_t dtype;
  int largest;
} tk_line;

/* Element a is greater than element b; NaN is greater than every number, two NaNs
 * are equal. */
static int greater(const tk_line *L, int32_t a, int32_t b) {
  const char *pa = L->x + (size_t)((int64_t)a * L->s) * L->es;
  const char *pb = L->x + (size_t)((int64_t)b * L->s) * L->es;
  switch (L->dtype) {
    case EDGERT_FLOAT32: {
      const float va = *(const float *)pa, vb = *(const float *)pb;
      return va != va ? vb == vb : va > vb;
    }
    case EDGERT_UINT8: return *(const uint8_t *)pa > *(const uint8_t *)pb;
    case EDGERT_INT8: return *(const int8_t *)pa > *(const int8_t *)pb;
    case EDGERT_INT16: return *(const int16_t *)pa > *(const int16_t *)pb;
    case EDGERT_INT32: return *(const int32_t *)pa > *(const int32_t *)pb;
    default: return *(const int64_t *)pa > *(const int64_t *)pb;
  }
}

/* Position a ranks strictly before position b. */
static int better(const tk_line *L, int32_t a, int32_t b) {
  if (L->largest ? greater(L, a, b) : greater(L, b, a)) return 1;
  if (L->largest ? greater(L, b, a) : greater(L, a, b)) return 0;
  return a < b;
}

/* Sift-down from the root of a heap of `size` positions (worst at the root). */
static void sift(const tk_line *L, int32_t *heap, int64_t size) {
  int64_t j = 0;
  for (;;) {
    const int64_t l = 2 * j + 1, r = l + 1;
    int64_t w = j;
    if (l < size && better(L, heap[w], heap[l])) w = l;
    if (r < size && better(L, heap[w], heap[r])) w = r;
    if (w == j) return;
    const int32_t tmp = heap[w];
    heap[w] = heap[j];
    heap[j] = tmp;
    j = w;
  }
}

/* One line of n elements into vals/idx (at stride L->s). */
static void topk_line(const tk_line *L, int64_t n, int64_t k, int32_t *heap, char *vals,
                      int64_t *idx) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t j;
    if (m < k) {
      j = m++;
      heap[j] = (int32_t)i;
      while (j > 0) { /* sift up: the root holds the worst */
        const int64_t p = (j - 1) / 2;
        if (!better(L, heap[p], heap[j])) break;
        const int32_t tmp = heap[p];
        heap[p] = heap[j];
        heap[j] = tmp;
        j = p;
      }
      continue;
    }
    if (k == 0 || !better(L, (int32_t)i, heap[0])) continue;
    heap[0] = (int32_t)i;
    sift(L, heap, m);
  }
  for (int64_t t = m - 1; t >= 0; t--) { /* worst first, written from the back */
    memcpy(vals + (size_t)(t * L->s) * L->es, L->x + (size_t)((int64_t)heap[0] * L->s) * L->es,
           L->es);
    idx[t * L->s] = heap[0];
    heap[0] = heap[t];
    sift(L, heap, t);
  }
}

void ert_topk_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *x = node->in[0], *v = node->out[0], *ix = node->out[1];
  const int64_t outer = node->opdata[0], n = node->opdata[1], inner = node->opdata[2];
  const int64_t k = ert_pi(node, 1);
  int32_t *heap = (int32_t *)node->scratch;
  if (v->numel == 0) return;
  tk_line L;
  L.s = inner;
  L.es = ert_dtype_size(x->dtype);
  L.dtype = x->dtype;
  L.largest = ert_pi(node, 2) != 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const int64_t in_at = o * n * inner + i, out_at = o * k * inner + i;
      L.x = (const char *)x->data + (size_t)in_at * L.es;
      topk_line(&L, n, k, heap, (char *)v->data + (size_t)out_at * L.es,
                (int64_t *)ix->data + out_at);
    }
}
