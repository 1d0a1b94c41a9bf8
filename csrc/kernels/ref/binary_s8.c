/* binary_s8.c: add and mul on int8 tensors with numpy broadcasting. Parameters and
 * meaning: edgert/converter/ops/binary_s8.py (narrow multipliers: every sum fits int32).
 *
 * prepare stores a broadcast plan in opdata: the output dims and, per input, the
 * element stride along each (0 where the input is broadcast), with neighbouring dims
 * merged wherever both inputs walk them as one (same-shape operands become one row,
 * [N,C,H,W] + [1,C,1,1] rows of H*W against one value). eval walks the output
 * with an odometer over all dims but the last and runs the last as a row loop, with
 * separate loops for the contiguous and broadcast cases so that they vectorize.
 * add may run in place (the output is input 0, of the same shape).
 */
#include "cpu.h"
#include "exec.h"
#include "quant_s8.h"

enum { OD_RANK = 0, OD_DIMS = 1, OD_SA = OD_DIMS + EDGERT_MAX_DIMS,
       OD_SB = OD_SA + EDGERT_MAX_DIMS, OD_END = OD_SB + EDGERT_MAX_DIMS };
_Static_assert(OD_END <= ERT_OPDATA_WORDS, "plan must fit opdata");

enum { ADD_FIRST = 3 }; /* add: words 0..2 are the (unused) activation */
enum { W_AZP, W_BZP, W_YZP };

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

static edgert_status plan(ert_node *node, ert_err *err) {
  const ert_tensor *a = node->in[0], *b = node->in[1], *y = node->out[0];
  const int32_t r = y->ndim;
  if (a->ndim > r || b->ndim > r)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), ": inputs of higher rank than the output");
  int64_t dims[EDGERT_MAX_DIMS], sta[EDGERT_MAX_DIMS], stb[EDGERT_MAX_DIMS];
  int64_t sa = 1, sb = 1;
  for (int32_t d = r - 1; d >= 0; d--) {
    const int32_t da = d - (r - a->ndim), db = d - (r - b->ndim);
    const int64_t na = da >= 0 ? a->shape[da] : 1, nb = db >= 0 ? b->shape[db] : 1;
    const int64_t n = y->shape[d];
    if ((na != n && na != 1) || (nb != n && nb != 1) || (na == 1 && nb == 1 && n != 1))
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nm(node), ": shapes do not broadcast to the output");
    dims[d] = n;
    sta[d] = na == 1 ? 0 : sa;
    stb[d] = nb == 1 ? 0 : sb;
    sa *= na;
    sb *= nb;
  }
  /* merge dim d into the (merged) dim after it when both inputs continue across */
  int32_t m = 0;
  for (int32_t d = r - 1; d >= 0; d--) {
    if (m > 0) {
      const int32_t k = EDGERT_MAX_DIMS - m; /* the last merged dim written */
      const int64_t *pd = node->opdata + OD_DIMS, *pa = node->opdata + OD_SA;
      const int64_t *pb = node->opdata + OD_SB;
      if (sta[d] == pa[k] * pd[k] && stb[d] == pb[k] * pd[k]) {
        node->opdata[OD_DIMS + k] *= dims[d];
        continue;
      }
    }
    m++;
    node->opdata[OD_DIMS + EDGERT_MAX_DIMS - m] = dims[d];
    node->opdata[OD_SA + EDGERT_MAX_DIMS - m] = sta[d];
    node->opdata[OD_SB + EDGERT_MAX_DIMS - m] = stb[d];
  }
  /* move the m merged dims to the front */
  for (int32_t i = 0; i < m; i++) {
    node->opdata[OD_DIMS + i] = node->opdata[OD_DIMS + EDGERT_MAX_DIMS - m + i];
    node->opdata[OD_SA + i] = node->opdata[OD_SA + EDGERT_MAX_DIMS - m + i];
    node->opdata[OD_SB + i] = node->opdata[OD_SB + EDGERT_MAX_DIMS - m + i];
  }
  node->opdata[OD_RANK] = m;
  return EDGERT_OK;
}

/* Checks arity, dtypes, zero points, range, multipliers below mult_limit and the
 * shift; then plans. Words from `first`: a_zp, b_zp, y_zp, n_mult multipliers, shift,
 * out_min, out_max. */
static edgert_status prepare(ert_node *node, ert_err *err, uint32_t first, uint32_t n_mult,
                             int32_t mult_limit) {
  edgert_status st;
  const uint32_t words = 6 + n_mult;
  if ((st = ert_check_arity(node, err, 2, 2, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, first + words)) != EDGERT_OK) return st;
  if ((st = ert_check_s8(node, err, node->in[0], "input A")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, node->in[1], "input B")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, node->out[0], "the output")) != EDGERT_OK)
    return st;
  const int32_t azp = ert_pi(node, first + W_AZP), bzp = ert_pi(node, first + W_BZP);
  if (azp < -128 || azp > 127 || bzp < -128 || bzp > 127)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": input zero points outside int8");
  for (uint32_t k = 0; k < n_mult; k++) {
    const int32_t m = ert_pi(node, first + 3 + k);
    if (m < 0 || m >= mult_limit)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": multiplier %d outside [0, %d)", (int)m,
                           (int)mult_limit);
  }
  const int32_t shift = ert_pi(node, first + 3 + n_mult);
  if (shift < 1 || shift > 31)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm(node), ": shift %d outside [1, 31]", (int)shift);
  if ((st = ert_check_qrange(node, err, ert_pi(node, first + W_YZP),
                             ert_pi(node, first + words - 2), ert_pi(node, first + words - 1))) !=
      EDGERT_OK)
    return st;
  return plan(node, err);
}

edgert_status ert_add_s8_prepare(ert_node *node, ert_err *err) {
  edgert_status st = prepare(node, err, ADD_FIRST, 2, 1 << 15);
  if (st != EDGERT_OK) return st;
  if (ert_pi(node, 0) != ERT_ACT_NONE)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nm(node), ": int8 add takes no activation");
  return EDGERT_OK;
}

edgert_status ert_mul_s8_prepare(ert_node *node, ert_err *err) {
  return prepare(node, err, 0, 1, 1 << 14);
}

typedef struct rq {
  int32_t azp, bzp, yzp, ma, mb, shift, lo, hi;
} rq;

/* The constants of one row loop, held in locals: int8 stores may alias any object, so
 * the loops must not read them through a pointer. FINISH is floor(v / 2^s) + y_zp,
 * clamped, for v > -2^31 + 2^30 and 1 <= s <= 31 (the bias 2^31 makes the shifted
 * value non-negative). */
#define ROW_LOCALS(q)                                                   \
  const int32_t azp = (q)->azp, bzp = (q)->bzp, ma = (q)->ma, mb = (q)->mb; \
  const uint32_t sh = (uint32_t)(q)->shift;                             \
  const int32_t rnd = (int32_t)(1u << (sh - 1));                        \
  const int32_t off = (int32_t)(0x80000000u >> sh) - (q)->yzp;          \
  const int32_t lo = (q)->lo, hi = (q)->hi;                             \
  (void)mb
#define FINISH(v)                                                       \
  do {                                                                  \
    int32_t r_ = (int32_t)(((uint32_t)(v) + 0x80000000u) >> sh) - off;  \
    r_ = r_ < lo ? lo : r_;                                             \
    *yp = (int8_t)(r_ > hi ? hi : r_);                                  \
  } while (0)

/* One output row of n elements; a and b advance by sa and sb (0 or 1, or any stride). */
ERT_S8_CLONES
static void add_row(const rq *q, const int8_t *a, const int8_t *b, int8_t *y, int64_t n, int64_t sa,
                    int64_t sb) {
  ROW_LOCALS(q);
  if (sa == 1 && sb == 1) {
    ERT_IVDEP
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((a[i] - azp) * ma + (b[i] - bzp) * mb + rnd);
    }
  } else if (sa == 1 && sb == 0) {
    const int32_t c = (b[0] - bzp) * mb + rnd;
    ERT_IVDEP
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((a[i] - azp) * ma + c);
    }
  } else if (sa == 0 && sb == 1) {
    const int32_t c = (a[0] - azp) * ma + rnd;
    ERT_IVDEP
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((b[i] - bzp) * mb + c);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((a[i * sa] - azp) * ma + (b[i * sb] - bzp) * mb + rnd);
    }
  }
}

ERT_S8_CLONES
static void mul_row(const rq *q, const int8_t *a, const int8_t *b, int8_t *y, int64_t n, int64_t sa,
                    int64_t sb) {
  ROW_LOCALS(q);
  if (sa == 1 && sb == 1) {
    ERT_IVDEP
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((a[i] - azp) * (b[i] - bzp) * ma + rnd);
    }
  } else if (sa == 1 && sb == 0) {
    const int32_t c = (b[0] - bzp) * ma;
    ERT_IVDEP
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((a[i] - azp) * c + rnd);
    }
  } else if (sa == 0 && sb == 1) {
    const int32_t c = (a[0] - azp) * ma;
    ERT_IVDEP
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((b[i] - bzp) * c + rnd);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      int8_t *yp = y + i;
      FINISH((a[i * sa] - azp) * (b[i * sb] - bzp) * ma + rnd);
    }
  }
}

typedef void (*row_fn)(const rq *, const int8_t *, const int8_t *, int8_t *, int64_t, int64_t,
                       int64_t);

typedef struct s8_job {
  const ert_node *node;
  const rq *q;
  row_fn row;
  int op;
} s8_job;

/* Output rows [k0, k1) (rows of the innermost dimension), through ert_cpu.binary_s8 (op
 * 0 add, 1 mul) when there is one and the row's strides are 0 or 1. */
static void rows_task(void *arg, size_t k0, size_t k1) {
  const s8_job *j = (const s8_job *)arg;
  const ert_node *node = j->node;
  const rq *q = j->q;
  const int32_t r = (int32_t)node->opdata[OD_RANK];
  const int8_t *a = (const int8_t *)node->in[0]->data, *b = (const int8_t *)node->in[1]->data;
  int8_t *y = (int8_t *)node->out[0]->data;
  const int64_t *dims = node->opdata + OD_DIMS;
  const int64_t *sa = node->opdata + OD_SA, *sb = node->opdata + OD_SB;
  const int64_t inner = dims[r - 1];
  int64_t idx[EDGERT_MAX_DIMS] = {0};
  int64_t oa = 0, ob = 0;
  size_t rest = k0; /* the outer index of row k0 */
  for (int32_t d = r - 2; d >= 0; d--) {
    idx[d] = (int64_t)(rest % (size_t)dims[d]);
    rest /= (size_t)dims[d];
    oa += idx[d] * sa[d];
    ob += idx[d] * sb[d];
  }
  const int64_t ia = sa[r - 1], ib = sb[r - 1];
  const int32_t p[8] = {q->azp, q->bzp, q->yzp, q->ma, q->mb, q->shift, q->lo, q->hi};
  void (*simd)(int, const int32_t *, const int8_t *, const int8_t *, int8_t *, size_t, int, int) =
      (ia | ib) >> 1 == 0 ? ert_cpu.binary_s8 : NULL;
  for (size_t k = k0; k < k1; k++) {
    if (simd != NULL)
      simd(j->op, p, a + oa, b + ob, y + k * (size_t)inner, (size_t)inner, (int)ia, (int)ib);
    else
      j->row(q, a + oa, b + ob, y + k * (size_t)inner, inner, ia, ib);
    for (int32_t d = r - 2; d >= 0; d--) {
      oa += sa[d];
      ob += sb[d];
      if (++idx[d] < dims[d]) break;
      oa -= sa[d] * dims[d];
      ob -= sb[d] * dims[d];
      idx[d] = 0;
    }
  }
}

/* Outputs split by rows over the session's threads when there are enough of them. */
enum { S8_PAR_MIN = 32768 };

static void run(const ert_node *node, ert_exec *ex, const rq *q, row_fn row, int op) {
  const int32_t r = (int32_t)node->opdata[OD_RANK];
  if (node->out[0]->numel == 0) return;
  if (r == 0) {
    row(q, (const int8_t *)node->in[0]->data, (const int8_t *)node->in[1]->data,
        (int8_t *)node->out[0]->data, 1, 0, 0);
    return;
  }
  const s8_job j = {node, q, row, op};
  const size_t rows = node->out[0]->numel / (size_t)node->opdata[OD_DIMS + r - 1];
  if (node->out[0]->numel >= S8_PAR_MIN && rows > 1)
    ert_parallel_for(ex, rows, rows_task, (void *)&j);
  else
    rows_task((void *)&j, 0, rows);
}

void ert_add_s8__ref(const ert_node *node, ert_exec *ex) {
  const uint32_t f = ADD_FIRST;
  rq q = {ert_pi(node, f), ert_pi(node, f + 1), ert_pi(node, f + 2), ert_pi(node, f + 3),
          ert_pi(node, f + 4), ert_pi(node, f + 5), ert_pi(node, f + 6), ert_pi(node, f + 7)};
  run(node, ex, &q, add_row, 0);
}

void ert_mul_s8__ref(const ert_node *node, ert_exec *ex) {
  rq q = {ert_pi(node, 0), ert_pi(node, 1), ert_pi(node, 2), ert_pi(node, 3), 0,
          ert_pi(node, 4), ert_pi(node, 5), ert_pi(node, 6)};
  run(node, ex, &q, mul_row, 1);
}
