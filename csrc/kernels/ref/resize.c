/* resize: separable resampling with per-axis tables computed by the converter
 * (edgert/converter/ops/resize.py holds the ONNX coordinate and coefficient arithmetic).
 *
 * Along axis d, output index o reads T_d input indices with T_d weights; an output
 * element is the sum over all tap combinations of the product of their weights
 * times the input element. Nearest tables have one tap and copy elements (every
 * dtype); weighted tables (linear, cubic, antialiased filters) need float32.
 * Index -1 marks an output index outside the crop (tf_crop_and_resize): every
 * element it touches is the extrapolation value (float32 only).
 *
 * Parameter words:
 *   0 kind (0 nearest, 1 weighted)   1 rank r   2 extrapolation value (float)
 *   3 .. 3+r  taps T_d per axis (0: identity, output index o reads o)
 *   then per axis with T_d > 0: y_d*T_d indices (int), and when weighted y_d*T_d
 *   weights (float).
 * The taps of the axes before the last multiply into at most MAX_COMBOS
 * combinations per output row.
 */
#include <string.h>

#include "exec.h"
#include "internal.h"
#include "cpu.h"

#define PARALLEL_BYTES (1u << 16)
#define MAX_COMBOS 256
#define MAX_TAPS 65536

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

/* opdata: [0] kind, [1] element size, [2 + d] first index word of axis d,
 * [10 + d] first weight word, [18 + d] taps, [26 + d] input stride (elements),
 * [34] 1 when some table index is -1 (extrapolation). */
enum { OD_KIND = 0, OD_ES = 1, OD_IDX = 2, OD_W = 10, OD_TAPS = 18, OD_STRIDE = 26, OD_EXTRA = 34 };

edgert_status ert_resize_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK || (st = ert_check_params(node, err, 3)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if ((st = ert_check_dtype(node, err, y, x->dtype)) != EDGERT_OK) return st;
  const int32_t kind = ert_pi(node, 0), r = ert_pi(node, 1);
  const size_t es = ert_dtype_size(x->dtype);
  if (kind != 0 && kind != 1)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (resize): unknown kind %d", (int)kind);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (resize): unsupported dtype");
  if (kind == 1 && x->dtype != EDGERT_FLOAT32)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (resize): interpolation needs float32, got %s",
                         ert_dtype_name(x->dtype));
  if (r < 1 || r != x->ndim || r != y->ndim || node->n_params < 3u + (uint32_t)r)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (resize): rank word %d does not match", (int)r);
  uint64_t pos = 3u + (uint32_t)r;
  int64_t combos = 1, stride = 1;
  int extrapolates = 0;
  for (int32_t d = r - 1; d >= 0; d--) {
    node->opdata[OD_STRIDE + d] = stride;
    stride *= x->shape[d];
  }
  for (int32_t d = 0; d < r; d++) {
    const int32_t taps = ert_pi(node, 3 + (uint32_t)d);
    node->opdata[OD_TAPS + d] = taps;
    if (taps == 0) {
      if (y->shape[d] != x->shape[d])
        return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (resize): identity axis %d changes size",
                             (int)d);
      continue;
    }
    if (taps < 0 || taps > MAX_TAPS || (kind == 0 && taps != 1))
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (resize): axis %d has %d taps", (int)d,
                           (int)taps);
    const uint64_t count = (uint64_t)y->shape[d] * (uint64_t)taps;
    const uint64_t words = kind == 1 ? 2 * count : count;
    if (words > node->n_params - pos)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (resize): tables exceed the parameter words");
    for (uint64_t k = 0; k < count; k++) {
      const int32_t i = ert_pi(node, (uint32_t)(pos + k));
      const int32_t first = ert_pi(node, (uint32_t)(pos + k - k % (uint64_t)taps));
      if (i == -1 && first == -1) {
        extrapolates = 1;
      } else if (i < 0 || i >= x->shape[d] || first == -1) {
        return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node),
                             " (resize): axis %d table index %d out of range", (int)d, (int)i);
      }
    }
    node->opdata[OD_IDX + d] = (int64_t)pos;
    node->opdata[OD_W + d] = (int64_t)(pos + count);
    pos += words;
    if (d < r - 1) combos *= taps;
    if (combos > MAX_COMBOS)
      return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nm(node),
                           " (resize): more than %d tap combinations per row", MAX_COMBOS);
  }
  if (pos != node->n_params)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (resize): %u parameter words, expected %llu",
                         (unsigned)node->n_params, (unsigned long long)pos);
  if (extrapolates && x->dtype != EDGERT_FLOAT32)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nm(node), " (resize): extrapolation needs float32");
  node->opdata[OD_KIND] = kind;
  node->opdata[OD_ES] = (int64_t)es;
  node->opdata[OD_EXTRA] = extrapolates;
  return EDGERT_OK;
}

static void fill_f32(float *d, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++) d[i] = v;
}

/* Splits output row `row` into the coordinates of the dims before the last. */
static void row_coords(const ert_tensor *y, size_t row, int64_t *coord) {
  for (int d = y->ndim - 2; d >= 0; d--) {
    coord[d] = (int64_t)(row % (size_t)y->shape[d]);
    row /= (size_t)y->shape[d];
  }
}

static void nearest_rows(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int64_t *od = node->opdata;
  const int r = x->ndim;
  const size_t es = (size_t)od[OD_ES];
  const int64_t n = y->shape[r - 1];
  const size_t row_bytes = (size_t)n * es;
  const int32_t *xt = od[OD_TAPS + r - 1] ? (const int32_t *)(node->params + od[OD_IDX + r - 1]) : NULL;
  const float extra = ert_pf(node, 2);
  /* the table o -> o / 2 (n even, rows of 32 bytes or more): ert_cpu.upsample2 */
  int up2 = xt != NULL && ert_cpu.upsample2 != NULL && es <= 4 && n % 2 == 0 && row_bytes >= 32;
  for (int64_t o = 0; up2 && o < n; o++) up2 = xt[o] == o / 2;
  int64_t prev = -2;
  for (size_t row = begin; row < end; row++) {
    char *d = (char *)y->data + row * row_bytes;
    int64_t coord[EDGERT_MAX_DIMS];
    row_coords(y, row, coord);
    int64_t off = 0;
    for (int k = 0; k < r - 1 && off >= 0; k++) {
      const int64_t i = od[OD_TAPS + k] ? ((const int32_t *)(node->params + od[OD_IDX + k]))[coord[k]] : coord[k];
      off = i < 0 ? -1 : off + i * od[OD_STRIDE + k];
    }
    if (off < 0) {
      fill_f32((float *)(void *)d, n, extra);
    } else if (off == prev) {
      memcpy(d, d - row_bytes, row_bytes); /* same source row as the row above */
    } else {
      const char *s = (const char *)x->data + (size_t)off * es;
      if (xt == NULL) {
        memcpy(d, s, row_bytes);
      } else if (up2) {
        ert_cpu.upsample2(d, s, (size_t)n / 2u, es);
      } else {
#define ERT_NEAREST_ROW(ES)                                                     \
  for (int64_t o = 0; o < n; o++) memcpy(d + o * (ES), s + (int64_t)xt[o] * (ES), (ES)); \
  break;
        switch (es) {
          case 1: ERT_NEAREST_ROW(1)
          case 2: ERT_NEAREST_ROW(2)
          case 4: /* (only float32 tables extrapolate: index -1) */
            for (int64_t o = 0; o < n; o++)
              memcpy(d + o * 4, xt[o] < 0 ? (const char *)&extra : s + (int64_t)xt[o] * 4, 4);
            break;
          default: ERT_NEAREST_ROW(8)
        }
#undef ERT_NEAREST_ROW
      }
    }
    prev = off;
  }
}

static void weighted_rows(void *arg, size_t begin, size_t end) {
  const ert_node *node = (const ert_node *)arg;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int64_t *od = node->opdata;
  const int r = x->ndim;
  const int64_t n = y->shape[r - 1];
  const int64_t tl = od[OD_TAPS + r - 1];
  const int32_t *xt = tl ? (const int32_t *)(node->params + od[OD_IDX + r - 1]) : NULL;
  const uint32_t xw = (uint32_t)od[OD_W + r - 1];
  const float extra = ert_pf(node, 2);
  const float *src = (const float *)x->data;
  int64_t offs[2][MAX_COMBOS];
  float ws[2][MAX_COMBOS];
  for (size_t row = begin; row < end; row++) {
    float *d = (float *)y->data + row * (size_t)n;
    int64_t coord[EDGERT_MAX_DIMS];
    row_coords(y, row, coord);
    int cur = 0, nc = 1, outside = 0;
    offs[0][0] = 0;
    ws[0][0] = 1.0f;
    for (int k = 0; k < r - 1 && !outside; k++) {
      const int64_t taps = od[OD_TAPS + k], stride = od[OD_STRIDE + k];
      if (taps == 0) {
        for (int c = 0; c < nc; c++) offs[cur][c] += coord[k] * stride;
        continue;
      }
      const int32_t *it = (const int32_t *)(node->params + od[OD_IDX + k]) + coord[k] * taps;
      const uint32_t wt = (uint32_t)(od[OD_W + k] + coord[k] * taps);
      int m = 0;
      for (int64_t t = 0; t < taps && !outside; t++) {
        if (it[t] < 0) {
          outside = 1;
          break;
        }
        const float w = ert_pf(node, wt + (uint32_t)t);
        for (int c = 0; c < nc; c++) {
          offs[1 - cur][m] = offs[cur][c] + it[t] * stride;
          ws[1 - cur][m] = ws[cur][c] * w;
          m++;
        }
      }
      cur = 1 - cur;
      nc = m;
    }
    if (outside) {
      fill_f32(d, n, extra);
      continue;
    }
    const int64_t *off = offs[cur];
    const float *w = ws[cur];
    if (xt == NULL) { /* last axis untouched: weighted sum of whole rows */
      for (int c = 0; c < nc; c++) {
        const float *p = src + off[c], wc = w[c];
        if (c == 0)
          for (int64_t o = 0; o < n; o++) d[o] = wc * p[o];
        else
          for (int64_t o = 0; o < n; o++) d[o] += wc * p[o];
      }
      continue;
    }
    if (tl == 2 && !od[OD_EXTRA]) { /* linear along the last axis, no crop: row by row */
      for (int c = 0; c < nc; c++) {
        const float *p = src + off[c], wc = w[c];
        for (int64_t o = 0; o < n; o++) {
          const float v = ert_pf(node, xw + 2 * (uint32_t)o) * p[xt[2 * o]] +
                          ert_pf(node, xw + 2 * (uint32_t)o + 1) * p[xt[2 * o + 1]];
          d[o] = c == 0 ? wc * v : d[o] + wc * v;
        }
      }
      continue;
    }
    for (int64_t o = 0; o < n; o++) {
      const int32_t *it = xt + o * tl;
      const uint32_t wt = xw + (uint32_t)(o * tl);
      if (it[0] < 0) {
        d[o] = extra;
        continue;
      }
      float acc = 0.0f;
      for (int c = 0; c < nc; c++) {
        const float *p = src + off[c];
        float s = 0.0f;
        for (int64_t t = 0; t < tl; t++) s += ert_pf(node, wt + (uint32_t)t) * p[it[t]];
        acc += w[c] * s;
      }
      d[o] = acc;
    }
  }
}

void ert_resize_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *y = node->out[0];
  if (y->numel == 0) return;
  const size_t rows = y->numel / (size_t)y->shape[y->ndim - 1];
  ert_task_fn fn = node->opdata[OD_KIND] ? weighted_rows : nearest_rows;
  if (y->nbytes < PARALLEL_BYTES)
    fn((void *)node, 0, rows);
  else
    ert_parallel_for(ex, rows, fn, (void *)node);
}
