/* conv2d_s8.c: conv2d on int8 tensors (int32 accumulation, per-channel
 * requantization). Parameters, inputs and meaning: edgert/ops/conv2d_s8.py;
 * arithmetic: quant_s8.h.
 *
 * Two paths: depthwise (C/group == 1) accumulates output rows tap by tap (each tap a
 * contiguous run of its valid columns); every other convolution gathers blocks of
 * S8_PB output pixels into an int16 im2col block (x - x_zp, 0 for padding;
 * pixel-major) and widens S8_MR weight rows to int16 beside it in its scratch slot, so
 * that outputs are int16 dot products, two pixels by S8_MR channels at a time (the
 * form compilers turn into multiply-add-pairs instructions).
 */
#include "quant_s8.h"

enum {
  P_GROUP, P_KH, P_KW, P_SH, P_SW, P_DH, P_DW, P_PT, P_PL, P_PB, P_PR, P_RANK1D, P_ACT,
  P_XZP = P_ACT + 3, P_YZP, P_LO, P_HI, P_SHIFT, P_COUNT
};
enum { S8_PB = 64, S8_MR = 4, S8_SLOTS = 4, S8_DW_CHUNK = 256 };
#define TERM_MAX (255 * 128)

typedef struct geom {
  int32_t n, c, h, w, m, oh, ow, group, cg, mg;
  int32_t kh, kw, sh, sw, dh, dw, pt, pl;
  int32_t k; /* taps per output: cg * kh * kw */
  int32_t xzp, yzp, lo, hi, shift;
} geom;

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

static void read_geom(const ert_node *node, geom *g) {
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int rank1d = ert_pi(node, P_RANK1D) != 0;
  g->n = x->shape[0];
  g->c = x->shape[1];
  g->h = rank1d ? 1 : x->shape[2];
  g->w = x->shape[rank1d ? 2 : 3];
  g->m = y->shape[1];
  g->oh = rank1d ? 1 : y->shape[2];
  g->ow = y->shape[rank1d ? 2 : 3];
  g->group = ert_pi(node, P_GROUP);
  g->cg = g->c / g->group;
  g->mg = g->m / g->group;
  g->kh = ert_pi(node, P_KH);
  g->kw = ert_pi(node, P_KW);
  g->sh = ert_pi(node, P_SH);
  g->sw = ert_pi(node, P_SW);
  g->dh = ert_pi(node, P_DH);
  g->dw = ert_pi(node, P_DW);
  g->pt = ert_pi(node, P_PT);
  g->pl = ert_pi(node, P_PL);
  g->k = g->cg * g->kh * g->kw;
  g->xzp = ert_pi(node, P_XZP);
  g->yzp = ert_pi(node, P_YZP);
  g->lo = ert_pi(node, P_LO);
  g->hi = ert_pi(node, P_HI);
  g->shift = ert_pi(node, P_SHIFT);
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  const int64_t span = d * (k - 1) + 1, padded = in + p0 + p1;
  return padded < span ? -1 : (padded - span) / s + 1;
}

static size_t align64(size_t n) { return (n + 63u) & ~(size_t)63u; }

/* One slot: the im2col block, then S8_MR widened weight rows. */
static size_t col_bytes(const geom *g) {
  const int64_t p = (int64_t)g->oh * g->ow;
  const int64_t pb = p < S8_PB ? p : S8_PB;
  return align64((size_t)pb * (size_t)g->k * 2u);
}

static size_t im2col_scratch(const geom *g) {
  return (size_t)S8_SLOTS * (col_bytes(g) + align64((size_t)S8_MR * (size_t)g->k * 2u));
}

edgert_status ert_conv2d_s8_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 3, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  const int32_t rank1d = ert_pi(node, P_RANK1D);
  const int32_t group = ert_pi(node, P_GROUP), kh = ert_pi(node, P_KH), kw = ert_pi(node, P_KW);
  const int32_t sh = ert_pi(node, P_SH), sw = ert_pi(node, P_SW);
  const int32_t dh = ert_pi(node, P_DH), dw = ert_pi(node, P_DW);
  const int32_t pt = ert_pi(node, P_PT), pl = ert_pi(node, P_PL);
  const int32_t pb = ert_pi(node, P_PB), pr = ert_pi(node, P_PR);
  if (ert_pi(node, P_ACT) != ERT_ACT_NONE)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED,
                    "conv2d '%s': int8 form takes no activation (folded into its range)", nm(node));
  if ((rank1d != 0 && rank1d != 1) || group < 1 || kh < 1 || kw < 1 || sh < 1 || sw < 1 ||
      dh < 1 || dw < 1 || pt < 0 || pl < 0 || pb < 0 || pr < 0 ||
      (rank1d && (kh != 1 || sh != 1 || dh != 1 || pt != 0 || pb != 0)))
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': bad geometry parameters", nm(node));
  const int rank = rank1d ? 3 : 4;
  const ert_tensor *x = node->in[0], *w = node->in[1], *y = node->out[0];
  if ((st = ert_check_s8(node, err, x, "X")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, w, "W")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, y, "Y")) != EDGERT_OK)
    return st;
  if (x->ndim != rank || w->ndim != rank || y->ndim != rank)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': X, W and Y must have rank %d", nm(node),
                    rank);
  const int64_t n = x->shape[0], c = x->shape[1];
  const int64_t h = rank1d ? 1 : x->shape[2], wd = x->shape[rank - 1];
  const int64_t m = w->shape[0];
  const int64_t wkh = rank1d ? 1 : w->shape[2], wkw = w->shape[rank - 1];
  if (c % group != 0 || m % group != 0 || w->shape[1] != c / group || wkh != kh || wkw != kw)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': W does not match X, group and kernel",
                    nm(node));
  const int64_t oh = out_size(h, kh, sh, dh, pt, pb), ow = out_size(wd, kw, sw, dw, pl, pr);
  if (oh < 1 || ow < 1 || y->shape[0] != n || y->shape[1] != m ||
      (!rank1d && y->shape[2] != oh) || y->shape[rank - 1] != ow)
    return ert_fail(err, EDGERT_ERR_SHAPE, "conv2d '%s': Y shape does not match the convolution",
                    nm(node));
  if (h + pt + pb > INT32_MAX / 2 || wd + pl + pr > INT32_MAX / 2 || oh * ow > INT32_MAX ||
      (int64_t)dh * kh > INT32_MAX / 2 || (int64_t)dw * kw > INT32_MAX / 2)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "conv2d '%s': tensor too large", nm(node));
  const int64_t k = (c / group) * kh * kw;
  if (k * TERM_MAX >= INT32_MAX)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED,
                    "conv2d '%s': %lld taps per output could overflow the int32 accumulator",
                    nm(node), (long long)k);
  if ((st = ert_check_qp(node, err, 2, m, INT32_MAX - k * TERM_MAX, ert_pi(node, P_SHIFT))) !=
      EDGERT_OK)
    return st;
  const int32_t xzp = ert_pi(node, P_XZP);
  if (xzp < -128 || xzp > 127)
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': input zero point %d outside int8",
                    nm(node), (int)xzp);
  if ((st = ert_check_qrange(node, err, ert_pi(node, P_YZP), ert_pi(node, P_LO),
                             ert_pi(node, P_HI))) != EDGERT_OK)
    return st;
  geom g;
  read_geom(node, &g);
  const size_t need = g.cg == 1 ? 0 : im2col_scratch(&g);
  if (node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_PARAM, "conv2d '%s': needs %zu scratch bytes, has %zu",
                    nm(node), need, node->scratch_bytes);
  return EDGERT_OK;
}

/* First o in [0, limit] with o*s + off >= 0, and the end of those with o*s + off < size. */
static void valid_range(int64_t off, int64_t s, int64_t size, int64_t limit, int32_t *lo,
                        int32_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = off <= size - 1 ? (size - 1 - off) / s + 1 : 0;
  if (a > limit) a = limit;
  if (b > limit) b = limit;
  if (b < a) b = a;
  *lo = (int32_t)a;
  *hi = (int32_t)b;
}

/* ---- depthwise -------------------------------------------------------------------- */

typedef struct job {
  const geom *g;
  const int8_t *x, *w;
  const int32_t *qp;
  int8_t *y;
  char *scratch;
  size_t slot_bytes, tasks, nslots, blocks;
} job;

/* Adds w * (x - x_zp) over the valid taps of one kernel row to acc[0..n), the outputs
 * ox0 .. ox0+n of output row oy. */
static void dw_row(const geom *g, const int8_t *row, const int8_t *wr, int32_t ox0, int32_t n,
                   int32_t *acc) {
  for (int32_t kx = 0; kx < g->kw; kx++) {
    const int64_t off = (int64_t)kx * g->dw - g->pl;
    int32_t lo, hi;
    valid_range(off + (int64_t)ox0 * g->sw, g->sw, g->w, n, &lo, &hi);
    /* |(x - x_zp) * w| <= 255 * 128 fits int16: 16-bit products, 32-bit sums */
    const int16_t wv = wr[kx], zp = (int16_t)g->xzp;
    const int8_t *src = row + off + (int64_t)ox0 * g->sw;
    if (g->sw == 1) {
      for (int32_t i = lo; i < hi; i++) acc[i] += (int16_t)(wv * (int16_t)(src[i] - zp));
    } else {
      for (int32_t i = lo; i < hi; i++)
        acc[i] += (int16_t)(wv * (int16_t)(src[(int64_t)i * g->sw] - zp));
    }
  }
}

static void dw_plane(const geom *g, const int8_t *x, const int8_t *w, const int32_t *qp,
                     int8_t *y) {
  int32_t acc[S8_DW_CHUNK];
  for (int32_t oy = 0; oy < g->oh; oy++) {
    const int64_t iy0 = (int64_t)oy * g->sh - g->pt;
    int32_t ky0, ky1;
    valid_range(iy0, g->dh, g->h, g->kh, &ky0, &ky1);
    for (int32_t ox0 = 0; ox0 < g->ow; ox0 += S8_DW_CHUNK) {
      const int32_t n = g->ow - ox0 < S8_DW_CHUNK ? g->ow - ox0 : S8_DW_CHUNK;
      for (int32_t i = 0; i < n; i++) acc[i] = qp[0];
      for (int32_t ky = ky0; ky < ky1; ky++)
        dw_row(g, x + (size_t)(iy0 + (int64_t)ky * g->dh) * (size_t)g->w,
               w + (size_t)ky * (size_t)g->kw, ox0, n, acc);
      ert_requant_row(acc, (size_t)n, qp[1], g->shift, g->yzp, g->lo, g->hi,
                      y + (size_t)oy * (size_t)g->ow + (size_t)ox0);
    }
  }
}

static void dw_task(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  const geom *g = j->g;
  const size_t plane_in = (size_t)g->h * (size_t)g->w, plane_out = (size_t)g->oh * (size_t)g->ow;
  const size_t khw = (size_t)g->kh * (size_t)g->kw;
  for (size_t p = begin; p < end; p++) {
    const size_t n = p / (size_t)g->m, oc = p % (size_t)g->m;
    const size_t ic = oc / (size_t)g->mg;
    dw_plane(g, j->x + (n * (size_t)g->c + ic) * plane_in, j->w + oc * khw, j->qp + 2 * oc,
             j->y + p * plane_out);
  }
}

/* ---- im2col blocks ------------------------------------------------------------------ */

/* col[p][k] for pixels p0 .. p0+pb of one image and group: x - x_zp, 0 outside. */
static void gather(const geom *g, const int8_t *x, int32_t p0, int32_t pb, int16_t *col) {
  const size_t plane = (size_t)g->h * (size_t)g->w;
  for (int32_t i = 0; i < pb; i++) {
    const int32_t p = p0 + i, oy = p / g->ow, ox = p % g->ow;
    const int64_t iy0 = (int64_t)oy * g->sh - g->pt, ix0 = (int64_t)ox * g->sw - g->pl;
    int16_t *dst = col + (size_t)i * (size_t)g->k;
    for (int32_t ci = 0; ci < g->cg; ci++) {
      const int8_t *xc = x + (size_t)ci * plane;
      for (int32_t ky = 0; ky < g->kh; ky++) {
        const int64_t iy = iy0 + (int64_t)ky * g->dh;
        const int row_ok = iy >= 0 && iy < g->h;
        for (int32_t kx = 0; kx < g->kw; kx++) {
          const int64_t ix = ix0 + (int64_t)kx * g->dw;
          *dst++ = (row_ok && ix >= 0 && ix < g->w)
                       ? (int16_t)((int32_t)xc[(size_t)iy * (size_t)g->w + (size_t)ix] - g->xzp)
                       : 0;
        }
      }
    }
  }
}

/* out[r] = a . w_r and out[4 + r] = b . w_r for the S8_MR rows w_r of w (k apart). */
static void dot_2x4(const int16_t *a, const int16_t *b, const int16_t *w, int32_t k,
                    int32_t *out) {
  const int16_t *w0 = w, *w1 = w + k, *w2 = w + 2 * (size_t)k, *w3 = w + 3 * (size_t)k;
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, t0 = 0, t1 = 0, t2 = 0, t3 = 0;
  for (int32_t i = 0; i < k; i++) {
    const int32_t u = a[i], v = b[i];
    s0 += u * w0[i];
    s1 += u * w1[i];
    s2 += u * w2[i];
    s3 += u * w3[i];
    t0 += v * w0[i];
    t1 += v * w1[i];
    t2 += v * w2[i];
    t3 += v * w3[i];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
  out[4] = t0, out[5] = t1, out[6] = t2, out[7] = t3;
}

static void block(const job *j, size_t t, int16_t *col, int16_t *wbuf) {
  const geom *g = j->g;
  const size_t per_image = (size_t)g->group * j->blocks;
  const size_t n = t / per_image, grp = (t % per_image) / j->blocks, b = t % j->blocks;
  const int32_t p_total = g->oh * g->ow;
  const int32_t p0 = (int32_t)b * S8_PB;
  const int32_t pb = p_total - p0 < S8_PB ? p_total - p0 : S8_PB;
  const size_t plane = (size_t)g->h * (size_t)g->w, k = (size_t)g->k;
  gather(g, j->x + (n * (size_t)g->c + grp * (size_t)g->cg) * plane, p0, pb, col);
  for (int32_t m0 = 0; m0 < g->mg; m0 += S8_MR) {
    const int32_t mr = g->mg - m0 < S8_MR ? g->mg - m0 : S8_MR;
    const size_t oc0 = grp * (size_t)g->mg + (size_t)m0;
    for (int32_t r = 0; r < S8_MR; r++) {
      const int8_t *wr = j->w + (oc0 + (size_t)r) * k;
      for (size_t i = 0; i < k; i++) wbuf[(size_t)r * k + i] = r < mr ? wr[i] : 0;
    }
    int32_t acc[S8_MR][S8_PB + 1];
    for (int32_t i = 0; i < pb; i += 2) {
      int32_t out[8];
      const int16_t *a = col + (size_t)i * k;
      dot_2x4(a, i + 1 < pb ? a + k : a, wbuf, g->k, out);
      for (int32_t r = 0; r < S8_MR; r++) {
        acc[r][i] = out[r];
        acc[r][i + 1] = out[4 + r];
      }
    }
    for (int32_t r = 0; r < mr; r++) {
      const int32_t *qp = j->qp + 2 * (oc0 + (size_t)r);
      for (int32_t i = 0; i < pb; i++) acc[r][i] += qp[0];
      ert_requant_row(acc[r], (size_t)pb, qp[1], g->shift, g->yzp, g->lo, g->hi,
                      j->y + (n * (size_t)g->m + oc0 + (size_t)r) * (size_t)p_total + (size_t)p0);
    }
  }
}

static void im2col_task(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  for (size_t s = begin; s < end; s++) {
    char *slot = j->scratch + s * j->slot_bytes;
    int16_t *col = (int16_t *)(void *)slot;
    int16_t *wbuf = (int16_t *)(void *)(slot + col_bytes(j->g));
    const size_t t0 = s * j->tasks / j->nslots, t1 = (s + 1) * j->tasks / j->nslots;
    for (size_t t = t0; t < t1; t++) block(j, t, col, wbuf);
  }
}

void ert_conv2d_s8__ref(const ert_node *node, ert_exec *ex) {
  geom g;
  read_geom(node, &g);
  job j;
  j.g = &g;
  j.x = (const int8_t *)node->in[0]->data;
  j.w = (const int8_t *)node->in[1]->data;
  j.qp = (const int32_t *)node->in[2]->data;
  j.y = (int8_t *)node->out[0]->data;
  if ((size_t)g.n * (size_t)g.m * (size_t)g.oh * (size_t)g.ow == 0) return;
  if (g.cg == 1) {
    ert_parallel_for(ex, (size_t)g.n * (size_t)g.m, dw_task, &j);
    return;
  }
  j.scratch = (char *)node->scratch;
  j.slot_bytes = im2col_scratch(&g) / S8_SLOTS;
  j.blocks = ((size_t)g.oh * (size_t)g.ow + S8_PB - 1) / S8_PB;
  j.tasks = (size_t)g.n * (size_t)g.group * j.blocks;
  j.nslots = j.tasks < S8_SLOTS ? j.tasks : S8_SLOTS;
  ert_parallel_for(ex, j.nslots, im2col_task, &j);
}
