/* Strided-view copies, for every dtype (by element size 1, 2, 4 or 8): transpose,
 * depth_to_space, space_to_depth, slice, expand, tile.
 *
 * Each of these ops is one strided copy: the output is written in order, starting
 * at input element `base`, and output dimension k advances the input by stride[k]
 * elements (negative for reversed slices, 0 for broadcast dims of expand and the
 * repeat dims of tile). prepare builds that view (dropping size-1 dims and merging
 * dims that stay adjacent in the input) into node->opdata, after checking that every
 * element it reaches lies inside the input; eval picks a path:
 *   - innermost stride 1: memcpy per output row; stride 0: fill the row;
 *   - the input's contiguous dim is the second-innermost output dim: tiled 2-D
 *     transposes, batched over the outer dims (e.g. NCHW <-> NHWC);
 *   - otherwise an element-wise strided copy per row.
 *
 * Parameter words (edgert/converter/ops/shape_ops.py):
 *   transpose       0 rank, 1.. perm (output dim i is input dim perm[i])
 *   depth_to_space  0 blocksize, 1 mode (0 DCR, 1 CRD)
 *   space_to_depth  0 blocksize, 1 mode (0 DCR, 1 CRD)
 *   slice           0 rank, then per dim d: 1+3d start, 2+3d step, 3+3d size
 *   expand          none (the output shape is the target, from the file or input 1; numpy
 *                   broadcasting)
 *   tile            0 rank, 1.. repeats (none with input 1, the repeats as data)
 */
#include <string.h>

#include "exec.h"
#include "internal.h"

#define TILE 64
#define PARALLEL_BYTES (1u << 16)
#define MAXV (2 * EDGERT_MAX_DIMS) /* tile views have two dims per input dim */

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

/* opdata layout: [0] rank, [1] element size, [2] base, [3 + k] shape, [3 + MAXV + k] stride. */
enum { OD_RANK = 0, OD_ES = 1, OD_BASE = 2, OD_SHAPE = 3, OD_STRIDE = 3 + MAXV };

/* A strided view: output dims (row-major), input strides in elements, start element. */
typedef struct {
  int rank;
  int64_t base;
  int64_t shape[MAXV];
  int64_t stride[MAXV];
} view;

/* Drops size-1 dims and merges neighbours that are contiguous in the input. */
static void simplify(view *v) {
  int r = 0;
  for (int k = 0; k < v->rank; k++) {
    if (v->shape[k] == 1) continue;
    if (r > 0 && v->stride[r - 1] == v->stride[k] * v->shape[k]) {
      v->shape[r - 1] *= v->shape[k];
      v->stride[r - 1] = v->stride[k];
      continue;
    }
    v->shape[r] = v->shape[k];
    v->stride[r] = v->stride[k];
    r++;
  }
  if (r == 0) {
    v->shape[0] = 1;
    v->stride[0] = 1;
    r = 1;
  }
  v->rank = r;
}

/* Checks that every element the view reaches lies in [0, numel) and stores it. */
static edgert_status store_view(ert_node *node, ert_err *err, const char *op, view *v,
                                const ert_tensor *x) {
  int64_t lo = v->base, hi = v->base, count = 1;
  for (int k = 0; k < v->rank; k++) {
    count *= v->shape[k];
    if (v->shape[k] == 0) continue;
    const int64_t span = (v->shape[k] - 1) * v->stride[k];
    if (span < 0) lo += span; else hi += span;
  }
  if (count > 0 && (lo < 0 || hi >= (int64_t)x->numel))
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (%s): reads outside the input", op);
  simplify(v);
  node->opdata[OD_RANK] = v->rank;
  node->opdata[OD_ES] = (int64_t)ert_dtype_size(x->dtype);
  node->opdata[OD_BASE] = v->base;
  for (int k = 0; k < v->rank; k++) {
    node->opdata[OD_SHAPE + k] = v->shape[k];
    node->opdata[OD_STRIDE + k] = v->stride[k];
  }
  return EDGERT_OK;
}

static edgert_status check_es(const ert_node *node, ert_err *err, const char *op) {
  size_t es = ert_dtype_size(node->in[0]->dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nm(node), " (%s): unsupported dtype %d", op,
                         (int)node->in[0]->dtype);
  return ert_check_dtype(node, err, node->out[0], node->in[0]->dtype);
}

/* Copies n elements of size es from src (stride s elements) to contiguous dst. */
static void copy_strided(char *dst, const char *src, int64_t n, int64_t s, size_t es) {
#define ERT_COPY_STRIDED(ES)                                                          \
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * (ES), src + i * s * (ES), (ES)); \
  break;
  switch (es) {
    case 1: ERT_COPY_STRIDED(1)
    case 2: ERT_COPY_STRIDED(2)
    case 4: ERT_COPY_STRIDED(4)
    default: ERT_COPY_STRIDED(8)
  }
#undef ERT_COPY_STRIDED
}

/* Fills n elements of size es at dst with the element at src. */
static void fill_elem(char *dst, const char *src, int64_t n, size_t es) {
  if (es == 1) {
    memset(dst, (unsigned char)src[0], (size_t)n);
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * (int64_t)es, src, es);
}

typedef struct {
  const ert_node *node;
  const char *src;
  char *dst;
} job;

/* Rows [begin, end) of the output (all dims but the last). */
static void rows_task(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  const int64_t *od = j->node->opdata;
  const int r = (int)od[OD_RANK];
  const size_t es = (size_t)od[OD_ES];
  const int64_t n = od[OD_SHAPE + r - 1], s = od[OD_STRIDE + r - 1];
  int64_t coord[MAXV] = {0};
  int64_t off = od[OD_BASE];
  size_t rem = begin;
  for (int k = r - 2; k >= 0; k--) {
    coord[k] = (int64_t)(rem % (size_t)od[OD_SHAPE + k]);
    rem /= (size_t)od[OD_SHAPE + k];
    off += coord[k] * od[OD_STRIDE + k];
  }
  for (size_t row = begin; row < end; row++) {
    char *d = j->dst + row * (size_t)n * es;
    const char *p = j->src + off * (int64_t)es;
    if (s == 1)
      memcpy(d, p, (size_t)n * es);
    else if (s == 0)
      fill_elem(d, p, n, es);
    else
      copy_strided(d, p, n, s, es);
    for (int k = r - 2; k >= 0; k--) {
      off += od[OD_STRIDE + k];
      if (++coord[k] < od[OD_SHAPE + k]) break;
      off -= coord[k] * od[OD_STRIDE + k];
      coord[k] = 0;
    }
  }
}

/* Copies the block out[a][b] = in[b*sb + a], a in [a0, a1), b in [b0, b1), of ES-byte
 * elements: 4x4 sub-blocks through registers, then the ragged edges one by one. */
#define ERT_TILE_BLOCK(ES)                                                              \
  do {                                                                                  \
    int64_t a = a0;                                                                     \
    for (; a + 4 <= a1; a += 4) {                                                       \
      int64_t b = b0;                                                                   \
      for (; b + 4 <= b1; b += 4) {                                                     \
        unsigned char t[4][4 * (ES)], row[4 * (ES)];                                    \
        for (int i = 0; i < 4; i++) memcpy(t[i], src + ((b + i) * sb + a) * (ES), 4 * (ES)); \
        for (int j = 0; j < 4; j++) {                                                   \
          for (int i = 0; i < 4; i++) memcpy(row + i * (ES), t[i] + j * (ES), (ES));   \
          memcpy(dst + ((a + j) * B + b) * (ES), row, 4 * (ES));                        \
        }                                                                               \
      }                                                                                 \
      for (; b < b1; b++)                                                               \
        for (int j = 0; j < 4; j++)                                                     \
          memcpy(dst + ((a + j) * B + b) * (ES), src + (b * sb + a + j) * (ES), (ES));  \
    }                                                                                   \
    for (; a < a1; a++)                                                                 \
      for (int64_t b = b0; b < b1; b++)                                                 \
        memcpy(dst + (a * B + b) * (ES), src + (b * sb + a) * (ES), (ES));              \
  } while (0)

/* The bytes of v spread to the even bytes of the result (little-endian order). */
static inline uint64_t spread4(uint32_t v) {
  uint64_t x = v;
  x = (x | x << 16) & 0x0000FFFF0000FFFFull;
  return (x | x << 8) & 0x00FF00FF00FF00FFull;
}
#define ERT_SWAP8(u, d, m)                                   \
  do {                                                       \
    const uint64_t t_ = (((u)[0] >> (8 * (d))) ^ (u)[d]) & (m); \
    (u)[d] ^= t_;                                            \
    (u)[0] ^= t_ << (8 * (d));                               \
  } while (0)
/* The byte form of ERT_TILE_BLOCK: 8x8 sub-blocks as eight 64-bit words (word i holds
 * input run b + i), transposed in registers by three rounds of masked swaps between
 * words 4, 2 and 1 apart (bytes 4, 2 and 1 apart within them); for B = 2, 8 bytes of
 * each run spread to the even and odd bytes of 16. Little-endian byte order. */
static void tile_bytes(char *dst, const char *src, int64_t a0, int64_t a1, int64_t b0,
                       int64_t b1, int64_t B, int64_t sb) {
  int64_t a = a0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (B == 2) /* two runs interleaved (a 2x depth_to_space): 8 bytes of each a step */
    for (; a + 8 <= a1; a += 8) {
      uint64_t u, v;
      memcpy(&u, src + a, 8);
      memcpy(&v, src + sb + a, 8);
      const uint64_t lo = spread4((uint32_t)u) | spread4((uint32_t)v) << 8;
      const uint64_t hi = spread4((uint32_t)(u >> 32)) | spread4((uint32_t)(v >> 32)) << 8;
      memcpy(dst + a * 2, &lo, 8);
      memcpy(dst + a * 2 + 8, &hi, 8);
    }
  for (; a + 8 <= a1; a += 8) {
    int64_t b = b0;
    for (; b + 8 <= b1; b += 8) {
      uint64_t u[8];
      for (int i = 0; i < 8; i++) memcpy(&u[i], src + (b + i) * sb + a, 8);
      for (int i = 0; i < 4; i++) ERT_SWAP8(u + i, 4, 0x00000000FFFFFFFFull);
      for (int i = 0; i < 8; i += 4) {
        ERT_SWAP8(u + i, 2, 0x0000FFFF0000FFFFull);
        ERT_SWAP8(u + i + 1, 2, 0x0000FFFF0000FFFFull);
      }
      for (int i = 0; i < 8; i += 2) ERT_SWAP8(u + i, 1, 0x00FF00FF00FF00FFull);
      for (int j = 0; j < 8; j++) memcpy(dst + (a + j) * B + b, &u[j], 8);
    }
    for (; b < b1; b++)
      for (int j = 0; j < 8; j++) dst[(a + j) * B + b] = src[b * sb + a + j];
  }
#endif
  for (; a < a1; a++)
    for (int64_t b = b0; b < b1; b++) dst[a * B + b] = src[b * sb + a];
}
#undef ERT_SWAP8

/* Tiled path: output [..., A, B] with stride 1 along A (so output row a gathers one
 * element from each of B input runs). Work items are (batch, tile of A); the batch
 * walks the dims before the last two. */
static void tiles_task(void *arg, size_t begin, size_t end) {
  const job *jb = (const job *)arg;
  const int64_t *od = jb->node->opdata;
  const int r = (int)od[OD_RANK];
  const size_t es = (size_t)od[OD_ES];
  const int64_t A = od[OD_SHAPE + r - 2], B = od[OD_SHAPE + r - 1];
  const int64_t sb = od[OD_STRIDE + r - 1];
  const int64_t a_tiles = (A + TILE - 1) / TILE;
  for (size_t item = begin; item < end; item++) {
    const int64_t batch = (int64_t)item / a_tiles, a0 = ((int64_t)item % a_tiles) * TILE;
    int64_t off = od[OD_BASE], rem = batch;
    for (int k = r - 3; k >= 0; k--) {
      off += (rem % od[OD_SHAPE + k]) * od[OD_STRIDE + k];
      rem /= od[OD_SHAPE + k];
    }
    const char *src = jb->src + off * (int64_t)es;
    char *dst = jb->dst + (size_t)batch * (size_t)(A * B) * es;
    const int64_t a1 = a0 + TILE < A ? a0 + TILE : A;
    for (int64_t b0 = 0; b0 < B; b0 += TILE) {
      const int64_t b1 = b0 + TILE < B ? b0 + TILE : B;
      switch (es) {
        case 1: tile_bytes(dst, src, a0, a1, b0, b1, B, sb); break;
        case 2: ERT_TILE_BLOCK(2); break;
        case 4: ERT_TILE_BLOCK(4); break;
        default: ERT_TILE_BLOCK(8); break;
      }
    }
  }
}
#undef ERT_TILE_BLOCK

static void run_view(const ert_node *node, ert_exec *ex) {
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (y->numel == 0) return;
  const int64_t *od = node->opdata;
  const int r = (int)od[OD_RANK];
  job j = {node, (const char *)x->data, (char *)y->data};
  const int64_t last = od[OD_STRIDE + r - 1];
  if (r >= 2 && last != 1 && last != 0 && od[OD_STRIDE + r - 2] == 1) {
    int64_t batches = 1;
    for (int k = 0; k < r - 2; k++) batches *= od[OD_SHAPE + k];
    const int64_t a_tiles = (od[OD_SHAPE + r - 2] + TILE - 1) / TILE;
    const size_t items = (size_t)(batches * a_tiles);
    if (y->nbytes < PARALLEL_BYTES)
      tiles_task(&j, 0, items);
    else
      ert_parallel_for(ex, items, tiles_task, &j);
    return;
  }
  int64_t rows = 1;
  for (int k = 0; k < r - 1; k++) rows *= od[OD_SHAPE + k];
  if (y->nbytes < PARALLEL_BYTES)
    rows_task(&j, 0, (size_t)rows);
  else
    ert_parallel_for(ex, (size_t)rows, rows_task, &j);
}

/* Row-major element strides of x. */
static void strides_of(const ert_tensor *x, int64_t *st) {
  int64_t acc = 1;
  for (int k = x->ndim - 1; k >= 0; k--) {
    st[k] = acc;
    acc *= x->shape[k];
  }
}

/* Fills v with input dims `dims` (rank r, row-major, contiguous) permuted by perm. */
static void permuted_view(view *v, int r, const int64_t *dims, const int *perm) {
  int64_t st[MAXV];
  int64_t acc = 1;
  for (int k = r - 1; k >= 0; k--) {
    st[k] = acc;
    acc *= dims[k];
  }
  v->rank = r;
  v->base = 0;
  for (int k = 0; k < r; k++) {
    v->shape[k] = dims[perm[k]];
    v->stride[k] = st[perm[k]];
  }
}

/* Common start of every prepare here: one input, one output, same dtype, enough words. */
static edgert_status start(ert_node *node, ert_err *err, const char *op, uint32_t min_params) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK || (st = check_es(node, err, op)) != EDGERT_OK) return st;
  return ert_check_params(node, err, min_params);
}

static edgert_status rank_param(const ert_node *node, ert_err *err, const char *op, uint32_t per_dim) {
  const int32_t r = ert_pi(node, 0);
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (r < 0 || r > EDGERT_MAX_DIMS || r != x->ndim || r != y->ndim ||
      node->n_params != 1u + per_dim * (uint32_t)r)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (%s): rank word %d does not match the tensors",
                         op, (int)r);
  return EDGERT_OK;
}

/* ---- transpose ----------------------------------------------------------- */

edgert_status ert_transpose_prepare(ert_node *node, ert_err *err) {
  edgert_status st = start(node, err, "transpose", 1);
  if (st != EDGERT_OK || (st = rank_param(node, err, "transpose", 1)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int r = x->ndim;
  int perm[EDGERT_MAX_DIMS];
  int seen[EDGERT_MAX_DIMS] = {0};
  int64_t dims[EDGERT_MAX_DIMS];
  for (int k = 0; k < r; k++) {
    const int32_t p = ert_pi(node, 1 + (uint32_t)k);
    if (p < 0 || p >= r || seen[p])
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (transpose): perm is not a permutation");
    seen[p] = 1;
    perm[k] = p;
    dims[k] = x->shape[k];
  }
  for (int k = 0; k < r; k++)
    if (y->shape[k] != x->shape[perm[k]])
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (transpose): output dim %d is %d, expected %d",
                           k, (int)y->shape[k], (int)x->shape[perm[k]]);
  view v;
  permuted_view(&v, r, dims, perm);
  return store_view(node, err, "transpose", &v, x);
}

void ert_transpose_eval(const ert_node *node, ert_exec *ex) { run_view(node, ex); }

/* ---- depth_to_space / space_to_depth --------------------------------------- */

/* The input reshaped to 6-D and permuted:
 * depth_to_space DCR: x [N, b, b, C', H, W] perm (0, 3, 4, 1, 5, 2)
 *                CRD: x [N, C', b, b, H, W] perm (0, 1, 4, 2, 5, 3)
 * space_to_depth DCR: x [N, C, H', b, W', b] perm (0, 3, 5, 1, 2, 4)
 *                CRD: x [N, C, H', b, W', b] perm (0, 1, 3, 5, 2, 4) */
static edgert_status block_prepare(ert_node *node, ert_err *err, int to_space, const char *op) {
  edgert_status st = start(node, err, op, 2);
  if (st != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int32_t b = ert_pi(node, 0), mode = ert_pi(node, 1);
  if (b < 1 || b > 65535 || (mode != 0 && mode != 1))
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (%s): bad blocksize %d or mode %d", op, (int)b,
                         (int)mode);
  if (x->ndim != 4 || y->ndim != 4)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (%s): tensors must have rank 4", op);
  const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  const int64_t bb = (int64_t)b * b;
  int ok;
  view v;
  if (to_space) {
    const int64_t c2 = C / bb;
    ok = C % bb == 0 && y->shape[0] == N && y->shape[1] == c2 && y->shape[2] == H * b &&
         y->shape[3] == W * b;
    const int64_t d0[6] = {N, b, b, c2, H, W}, d1[6] = {N, c2, b, b, H, W};
    const int p0[6] = {0, 3, 4, 1, 5, 2}, p1[6] = {0, 1, 4, 2, 5, 3};
    permuted_view(&v, 6, mode == 0 ? d0 : d1, mode == 0 ? p0 : p1);
  } else {
    ok = H % b == 0 && W % b == 0 && y->shape[0] == N && y->shape[1] == C * bb &&
         y->shape[2] == H / b && y->shape[3] == W / b;
    const int64_t d[6] = {N, C, H / b, b, W / b, b};
    const int p0[6] = {0, 3, 5, 1, 2, 4}, p1[6] = {0, 1, 3, 5, 2, 4};
    permuted_view(&v, 6, d, mode == 0 ? p0 : p1);
  }
  if (!ok)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (%s): shapes do not match blocksize %d", op,
                         (int)b);
  return store_view(node, err, op, &v, x);
}

edgert_status ert_depth_to_space_prepare(ert_node *node, ert_err *err) {
  return block_prepare(node, err, 1, "depth_to_space");
}

void ert_depth_to_space_eval(const ert_node *node, ert_exec *ex) { run_view(node, ex); }

edgert_status ert_space_to_depth_prepare(ert_node *node, ert_err *err) {
  return block_prepare(node, err, 0, "space_to_depth");
}

void ert_space_to_depth_eval(const ert_node *node, ert_exec *ex) { run_view(node, ex); }

/* ---- slice --------------------------------------------------------------- */

edgert_status ert_slice_prepare(ert_node *node, ert_err *err) {
  edgert_status st = start(node, err, "slice", 1);
  if (st != EDGERT_OK || (st = rank_param(node, err, "slice", 3)) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  int64_t xs[EDGERT_MAX_DIMS];
  strides_of(x, xs);
  view v;
  v.rank = x->ndim;
  v.base = 0;
  for (int d = 0; d < x->ndim; d++) {
    const int64_t start_d = ert_pi(node, 1 + 3 * (uint32_t)d), step = ert_pi(node, 2 + 3 * (uint32_t)d),
                  size = ert_pi(node, 3 + 3 * (uint32_t)d);
    if (size != y->shape[d] || step == 0)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node),
                           " (slice): dim %d: size %lld or step %lld invalid", d, (long long)size,
                           (long long)step);
    if (size > 0) {
      const int64_t last = start_d + (size - 1) * step;
      if (start_d < 0 || start_d >= x->shape[d] || last < 0 || last >= x->shape[d])
        return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (slice): dim %d reads outside the input", d);
    }
    v.base += (size > 0 ? start_d : 0) * xs[d];
    v.shape[d] = size;
    v.stride[d] = step * xs[d];
  }
  return store_view(node, err, "slice", &v, x);
}

void ert_slice_eval(const ert_node *node, ert_exec *ex) { run_view(node, ex); }

/* ---- expand -------------------------------------------------------------- */

/* The output dims of expand to the values of target t (int32 or int64, aligned to the
 * right, numpy broadcasting) into dims[0..r); false when they do not broadcast or their
 * rank is not r. */
static bool target_dims(const ert_tensor *x, const ert_tensor *t, int32_t r, int64_t *dims) {
  const int32_t len = (int32_t)t->numel;
  if (x->ndim > r || len > r || (x->ndim != r && len != r)) return false;
  for (int32_t d = 0; d < r; d++) {
    const int64_t a = d >= r - x->ndim ? x->shape[d - (r - x->ndim)] : 1;
    int64_t b = 1;
    if (d >= r - len) {
      const size_t k = (size_t)(d - (r - len));
      if (t->dtype == EDGERT_INT32) {
        int32_t v;
        memcpy(&v, (const char *)t->data + 4 * k, 4);
        b = v;
      } else {
        memcpy(&b, (const char *)t->data + 8 * k, 8);
      }
    }
    dims[d] = a == b || b == 1 ? a : a == 1 ? b : -1;
    if (dims[d] < 0 || dims[d] > INT32_MAX) return false;
  }
  return true;
}

/* Input 1, when present, is the target shape as data (a shape program computes it under
 * bounded dimensions: the shape function reads it, eval checks the output still
 * matches it); without it the target is the output's shape from the file. */
edgert_status ert_expand_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 2, 1, 1);
  if (st != EDGERT_OK || (st = check_es(node, err, "expand")) != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0], *t = node->n_in > 1 ? node->in[1] : NULL;
  if (x->ndim > y->ndim)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (expand): input rank exceeds output rank");
  if (t != NULL) {
    int64_t dims[EDGERT_MAX_DIMS];
    if ((t->dtype != EDGERT_INT32 && t->dtype != EDGERT_INT64) || t->ndim != 1 || t->numel > (size_t)y->ndim)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node),
                           " (expand): the target must be int32 or int64 [k], k <= the output rank");
    bool same = t->data == NULL || target_dims(x, t, y->ndim, dims);
    for (int32_t d = 0; same && t->data != NULL && d < y->ndim; d++) same = dims[d] == y->shape[d];
    if (!same)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (expand): the target does not give the output shape");
  }
  int64_t xs[EDGERT_MAX_DIMS];
  strides_of(x, xs);
  const int lead = y->ndim - x->ndim;
  view v;
  v.rank = y->ndim;
  v.base = 0;
  for (int d = 0; d < y->ndim; d++) {
    v.shape[d] = y->shape[d];
    v.stride[d] = 0;
    if (d < lead) continue;
    const int32_t xd = x->shape[d - lead];
    if (xd != y->shape[d] && xd != 1)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node),
                           " (expand): input dim %d (%d) does not broadcast to %d", d - lead, (int)xd,
                           (int)y->shape[d]);
    if (xd != 1) v.stride[d] = xs[d - lead];
  }
  return store_view(node, err, "expand", &v, x);
}

void ert_expand_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *y = node->out[0];
  if (node->n_in > 1 && node->in[1] != NULL) {
    int64_t dims[EDGERT_MAX_DIMS];
    bool same = target_dims(node->in[0], node->in[1], y->ndim, dims);
    for (int32_t d = 0; same && d < y->ndim; d++) same = dims[d] == y->shape[d];
    if (!same) {
      ert_run_fail(ex, EDGERT_ERR_SHAPE, "node '%s' (expand): its target no longer gives the output shape",
                   nm(node));
      return;
    }
  }
  run_view(node, ex);
}

/* ---- tile ---------------------------------------------------------------- */

/* The repeats of dim d: parameter word 1 + d, or, with the repeats input (int32/int64
 * data computed by a shape program), its value d; before that value exists (at load),
 * what the planned shapes give (y / x). */
static int64_t tile_reps(const ert_node *node, int d) {
  const ert_tensor *t = node->n_in > 1 ? node->in[1] : NULL;
  if (t == NULL) return ert_pi(node, 1 + (uint32_t)d);
  if (t->data == NULL) return node->in[0]->shape[d] > 0 ? node->out[0]->shape[d] / node->in[0]->shape[d] : 0;
  if (t->dtype == EDGERT_INT32) {
    int32_t v;
    memcpy(&v, (const char *)t->data + 4 * (size_t)d, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, (const char *)t->data + 8 * (size_t)d, 8);
  return v;
}

/* The output viewed as [r0, d0, r1, d1, ...]: repeat dims have stride 0. */
edgert_status ert_tile_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 2, 1, 1);
  if (st != EDGERT_OK || (st = check_es(node, err, "tile")) != EDGERT_OK ||
      (st = ert_check_params(node, err, 1)) != EDGERT_OK)
    return st;
  const ert_tensor *x = node->in[0], *y = node->out[0], *t = node->n_in > 1 ? node->in[1] : NULL;
  if (t != NULL && ((t->dtype != EDGERT_INT32 && t->dtype != EDGERT_INT64) || t->ndim != 1 ||
                    t->numel != (size_t)x->ndim))
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (tile): repeats must be int32 or int64 [rank]");
  if ((st = rank_param(node, err, "tile", t != NULL ? 0 : 1)) != EDGERT_OK) return st;
  int64_t xs[EDGERT_MAX_DIMS];
  strides_of(x, xs);
  view v;
  v.rank = 2 * x->ndim;
  v.base = 0;
  for (int d = 0; d < x->ndim; d++) {
    const int64_t reps = tile_reps(node, d);
    if (reps < 0 || reps > INT32_MAX || (int64_t)x->shape[d] * reps != y->shape[d])
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (tile): dim %d: %d * %lld != %d", d,
                           (int)x->shape[d], (long long)reps, (int)y->shape[d]);
    v.shape[2 * d] = reps;
    v.stride[2 * d] = 0;
    v.shape[2 * d + 1] = x->shape[d];
    v.stride[2 * d + 1] = xs[d];
  }
  return store_view(node, err, "tile", &v, x);
}

void ert_tile_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *x = node->in[0], *y = node->out[0];
  for (int d = 0; node->n_in > 1 && d < x->ndim; d++) {
    const int64_t reps = tile_reps(node, d);
    if (reps < 0 || reps > INT32_MAX || x->shape[d] * reps != y->shape[d]) {
      ert_run_fail(ex, EDGERT_ERR_SHAPE, "node '%s' (tile): its repeats no longer give the output shape", nm(node));
      return;
    }
  }
  run_view(node, ex);
}

/* ---- shapes (bounded dimensions) ----------------------------------------- */

edgert_status ert_transpose_shape(ert_node *node, ert_err *err) {
  const ert_tensor *x = node->in[0];
  ert_tensor *y = node->out[0];
  int64_t dims[EDGERT_MAX_DIMS];
  for (int32_t k = 0; k < y->ndim; k++) {
    const int32_t p = ert_pi(node, 1 + (uint32_t)k);
    if (p < 0 || p >= x->ndim)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), " (transpose): perm is not a permutation");
    dims[k] = x->shape[p];
  }
  ert_tensor_set_shape(y, y->ndim, dims);
  return EDGERT_OK;
}

/* The sizes are parameter words; the file's rules rewrite those that follow a bounded
 * dimension before this runs. */
edgert_status ert_slice_shape(ert_node *node, ert_err *err) {
  (void)err;
  ert_tensor *y = node->out[0];
  int64_t dims[EDGERT_MAX_DIMS];
  for (int32_t d = 0; d < y->ndim; d++) dims[d] = ert_pi(node, 3 + 3 * (uint32_t)d);
  ert_tensor_set_shape(y, y->ndim, dims);
  return EDGERT_OK;
}

/* tile's output shape: each input dim times its repeats (parameter words, which the file's
 * rules rewrite when they follow a size, or the repeats input's values once they exist). */
edgert_status ert_tile_shape(ert_node *node, ert_err *err) {
  const ert_tensor *x = node->in[0];
  int64_t dims[EDGERT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) {
    const int64_t reps = tile_reps(node, d);
    dims[d] = reps < 0 || reps > INT32_MAX ? -1 : x->shape[d] * reps;
    if (dims[d] < 0 || dims[d] > INT32_MAX)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (tile): dim %d repeats %lld times", d, (long long)reps);
  }
  ert_tensor_set_shape(node->out[0], x->ndim, dims);
  return EDGERT_OK;
}

/* expand's output shape: from its target input's values when it has one (at load, before
 * any value exists, the file's shape stays); else the file's, whose bounded dims follow
 * its rules. */
edgert_status ert_expand_shape(ert_node *node, ert_err *err) {
  const ert_tensor *t = node->n_in > 1 ? node->in[1] : NULL;
  if (t == NULL || t->data == NULL) return EDGERT_OK;
  int64_t dims[EDGERT_MAX_DIMS];
  ert_tensor *y = node->out[0];
  if (!target_dims(node->in[0], t, y->ndim, dims))
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), " (expand): the input does not broadcast to the target");
  ert_tensor_set_shape(y, y->ndim, dims);
  return EDGERT_OK;
}
