/* pad: constant / reflect / edge / wrap padding with static pads, for every dtype.
 *
 * Along each dim the input is first cropped by the negative pads, leaving an extent m,
 * then padded by the positive ones. With c the coordinate inside the cropped extent:
 * constant: outside [0, m) is the fill value; edge: clamp to [0, m); wrap: c mod m;
 * reflect: c mod 2(m-1), folded back (the border element is not repeated; m == 1
 * always reads element 0).
 *
 * Parameter words (edgert/converter/ops/shape_ops.py): 0 mode (0 constant, 1 reflect, 2 edge,
 * 3 wrap), 1 rank r, 2.. begins[r], ends[r], then 2 words holding the fill value's
 * bytes in the tensor's dtype (little endian, low word first).
 */
#include <string.h>

#include "exec.h"
#include "internal.h"

#define PARALLEL_BYTES (1u << 16)

enum { PAD_CONSTANT = 0, PAD_REFLECT = 1, PAD_EDGE = 2, PAD_WRAP = 3 };

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

/* opdata: [0] mode, [1] es, [2 + d] output offset of the kept data (max(begin, 0)),
 * [10 + d] input offset of the cropped extent (max(-begin, 0)), [18 + d] extent m,
 * [26] fill value bytes (8, as one word). */
enum { OD_MODE = 0, OD_ES = 1, OD_PRE = 2, OD_LO = 10, OD_M = 18, OD_FILL = 26 };

edgert_status ert_pad_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 2)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  const size_t es = ert_dtype_size(x->dtype);
  const int32_t mode = ert_pi(node, 0), r = ert_pi(node, 1);
  if (es == 0 || es > 8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (pad): unsupported dtype");
  if (mode < PAD_CONSTANT || mode > PAD_WRAP)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (pad): unknown mode %d", (int)mode);
  if (r != x->ndim || r != y->ndim || r < 0 || node->n_params != 4u + 2u * (uint32_t)r)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (pad): rank word does not match");
  for (int32_t d = 0; d < r; d++) {
    const int64_t b = ert_pi(node, 2 + (uint32_t)d), e = ert_pi(node, 2 + (uint32_t)(r + d));
    const int64_t lo = b < 0 ? -b : 0, hi = e < 0 ? -e : 0;
    const int64_t m = (int64_t)x->shape[d] - lo - hi;
    const int64_t n = m + (b > 0 ? b : 0) + (e > 0 ? e : 0);
    if (m < 0 || n != y->shape[d])
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (pad): dim %d: pads do not give output size %d",
                           (int)d, (int)y->shape[d]);
    if (mode != PAD_CONSTANT && m == 0 && n > 0)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (pad): cannot pad an empty extent in dim %d",
                           (int)d);
    node->opdata[OD_PRE + d] = b > 0 ? b : 0;
    node->opdata[OD_LO + d] = lo;
    node->opdata[OD_M + d] = m;
  }
  const uint32_t w0 = node->params[2 + 2 * r], w1 = node->params[3 + 2 * r];
  unsigned char fill[8];
  for (int i = 0; i < 4; i++) {
    fill[i] = (unsigned char)(w0 >> (8 * i));
    fill[4 + i] = (unsigned char)(w1 >> (8 * i));
  }
  memcpy(&node->opdata[OD_FILL], fill, 8);
  node->opdata[OD_MODE] = mode;
  node->opdata[OD_ES] = (int64_t)es;
  return EDGERT_OK;
}

/* Bounded dimensions: each output dim is the input's plus its two pads (the file's
 * rules rewrite pads that follow a size before this runs). */
edgert_status ert_pad_shape(ert_node *node, ert_err *err) {
  (void)err;
  const ert_tensor *x = node->in[0];
  const uint32_t r = (uint32_t)x->ndim;
  int64_t dims[EDGERT_MAX_DIMS];
  for (uint32_t d = 0; d < r; d++) dims[d] = (int64_t)x->shape[d] + ert_pi(node, 2 + d) + ert_pi(node, 2 + r + d);
  ert_tensor_set_shape(node->out[0], x->ndim, dims);
  return EDGERT_OK;
}

/* Input index along one dim for output index o, or -1 for the fill value. */
static int64_t src_index(int64_t mode, int64_t o, int64_t pre, int64_t lo, int64_t m) {
  int64_t c = o - pre;
  switch (mode) {
    case PAD_CONSTANT:
      return (c >= 0 && c < m) ? c + lo : -1;
    case PAD_EDGE:
      c = c < 0 ? 0 : (c >= m ? m - 1 : c);
      break;
    case PAD_WRAP:
      c %= m;
      if (c < 0) c += m;
      break;
    default: /* reflect */
      if (m == 1) {
        c = 0;
      } else {
        const int64_t p = 2 * (m - 1);
        c %= p;
        if (c < 0) c += p;
        if (c >= m) c = p - c;
      }
      break;
  }
  return c + lo;
}

static void pad_rows(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int64_t *od = node->opdata;
  const int64_t mode = od[OD_MODE];
  const size_t es = (size_t)od[OD_ES];
  const int r = x->ndim;
  const int64_t n = y->shape[r - 1], xn = x->shape[r - 1];
  const int64_t pre = od[OD_PRE + r - 1], lo = od[OD_LO + r - 1], m = od[OD_M + r - 1];
  const char *fill = (const char *)&od[OD_FILL];
  const char *src = (const char *)x->data;
  for (size_t row = begin; row < end; row++) {
    char *d = (char *)y->data + row * (size_t)n * es;
    /* Source row: walk the outer dims from the innermost. */
    int64_t off = 0, mul = xn, rem = (int64_t)row;
    int outside = 0;
    for (int k = r - 2; k >= 0; k--) {
      const int64_t o = rem % y->shape[k];
      rem /= y->shape[k];
      const int64_t s = src_index(mode, o, od[OD_PRE + k], od[OD_LO + k], od[OD_M + k]);
      if (s < 0) {
        outside = 1;
        break;
      }
      off += s * mul;
      mul *= x->shape[k];
    }
    if (outside) {
      for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)es, fill, es);
      continue;
    }
    const char *s = src + off * (int64_t)es;
    const int64_t kept_end = pre + m < n ? pre + m : n;
    for (int64_t i = 0; i < pre && i < n; i++) {
      const int64_t j = src_index(mode, i, pre, lo, m);
      memcpy(d + i * (int64_t)es, j < 0 ? fill : s + j * (int64_t)es, es);
    }
    if (kept_end > pre) memcpy(d + pre * (int64_t)es, s + lo * (int64_t)es, (size_t)(kept_end - pre) * es);
    for (int64_t i = kept_end > pre ? kept_end : pre; i < n; i++) {
      const int64_t j = src_index(mode, i, pre, lo, m);
      memcpy(d + i * (int64_t)es, j < 0 ? fill : s + j * (int64_t)es, es);
    }
  }
}

void ert_pad_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *y = node->out[0];
  if (y->numel == 0) return;
  if (y->ndim == 0) {
    memcpy(y->data, node->in[0]->data, y->nbytes);
    return;
  }
  const size_t rows = y->numel / (size_t)y->shape[y->ndim - 1];
  if (y->nbytes < PARALLEL_BYTES)
    pad_rows((void *)node, 0, rows);
  else
    ert_parallel_for(ex, rows, pad_rows, (void *)node);
}
