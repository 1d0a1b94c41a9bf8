/* matmul.c: numpy matmul semantics, float32, fused activation. Parameters and the
 * folding rule: edgert/converter/ops/matmul.py. */
#include "sgemm.h"

enum { P_ACT, P_COUNT = P_ACT + 3 };
enum { MAX_BATCH_DIMS = EDGERT_MAX_DIMS };

/* The GEMM view of one matmul: problems of C[rows, n] = A[rows, k] B[k, n]. */
typedef struct mm_plan {
  int64_t m, n, k, rows;
  int32_t nbd;                       /* output batch dimensions */
  int64_t dims[MAX_BATCH_DIMS];      /* output batch sizes */
  int64_t sa[MAX_BATCH_DIMS], sb[MAX_BATCH_DIMS]; /* element strides, 0 when broadcast */
  int64_t problems;
  int folded;
} mm_plan;

/* Fills p from the operand shapes; returns 0 when they are inconsistent. out_rank and
 * out_shape receive the output shape. */
static int make_plan(const ert_tensor *a, const ert_tensor *b, mm_plan *p, int32_t *out_rank,
                     int64_t out_shape[EDGERT_MAX_DIMS]) {
  const int32_t ra = a->ndim, rb = b->ndim;
  if (ra < 1 || rb < 1) return 0;
  p->m = ra == 1 ? 1 : a->shape[ra - 2];
  p->k = a->shape[ra - 1];
  const int64_t kb = rb == 1 ? b->shape[0] : b->shape[rb - 2];
  p->n = rb == 1 ? 1 : b->shape[rb - 1];
  if (kb != p->k) return 0;
  const int32_t bda = ra > 2 ? ra - 2 : 0, bdb = rb > 2 ? rb - 2 : 0;
  p->nbd = bda > bdb ? bda : bdb;
  int64_t prod_a = 1, prod_b = 1, sta = p->m * p->k, stb = p->k * p->n;
  p->problems = 1;
  for (int32_t d = p->nbd - 1; d >= 0; --d) {
    const int32_t ia = d - (p->nbd - bda), ib = d - (p->nbd - bdb);
    const int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) return 0;
    p->dims[d] = da == 1 ? db : da;
    p->sa[d] = da == 1 ? 0 : sta;
    p->sb[d] = db == 1 ? 0 : stb;
    sta *= da;
    stb *= db;
    prod_a *= da;
    prod_b *= db;
    p->problems *= p->dims[d];
  }
  p->folded = prod_b == 1;
  p->rows = p->folded ? prod_a * p->m : p->m;
  if (p->folded) p->problems = 1;
  int32_t r = 0;
  for (int32_t d = 0; d < p->nbd; ++d) out_shape[r++] = p->dims[d];
  if (ra > 1) out_shape[r++] = p->m;
  if (rb > 1) out_shape[r++] = p->n;
  *out_rank = r;
  return 1;
}

edgert_status ert_matmul_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 2, 2, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  ert_act_params act;
  if ((st = ert_act_read(node, P_ACT, &act, err)) != EDGERT_OK) return st;
  const ert_tensor *a = node->in[0], *b = node->in[1], *y = node->out[0];
  if (!ert_is_f32(a, -1) || !ert_is_f32(b, -1) || !ert_is_f32(y, -1))
    return ert_fail(err, EDGERT_ERR_DTYPE, "matmul '%s': A, B and Y must be float32", node->name);
  mm_plan p;
  int32_t rank = 0;
  int64_t shape[EDGERT_MAX_DIMS];
  if (!make_plan(a, b, &p, &rank, shape))
    return ert_fail(err, EDGERT_ERR_SHAPE, "matmul '%s': operand shapes do not match", node->name);
  if (rank != y->ndim)
    return ert_fail(err, EDGERT_ERR_SHAPE, "matmul '%s': Y has rank %d, expected %d", node->name,
                    (int)y->ndim, (int)rank);
  for (int32_t d = 0; d < rank; ++d)
    if (y->shape[d] != shape[d])
      return ert_fail(err, EDGERT_ERR_SHAPE, "matmul '%s': Y dimension %d is %d, expected %lld",
                      node->name, (int)d, (int)y->shape[d], (long long)shape[d]);
  if (p.rows > INT32_MAX)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "matmul '%s': too many rows", node->name);
  const size_t need = p.rows * p.n == 0 ? 0 : ert_sgemm_scratch_bytes(p.rows, p.n, p.k, 0);
  if (node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_PARAM, "matmul '%s': needs %zu scratch bytes, has %zu",
                    node->name, need, node->scratch_bytes);
  return EDGERT_OK;
}

typedef struct mm_ctx {
  const mm_plan *p;
  const float *a, *b;
  float *y;
} mm_ctx;

static void locate(const void *ctx, size_t idx, const float **a, const float **b, float **c,
                   const float **bias) {
  const mm_ctx *q = ctx;
  const mm_plan *p = q->p;
  int64_t oa = 0, ob = 0;
  if (!p->folded) {
    size_t rest = idx;
    for (int32_t d = p->nbd - 1; d >= 0; --d) {
      const size_t i = rest % (size_t)p->dims[d];
      rest /= (size_t)p->dims[d];
      oa += (int64_t)i * p->sa[d];
      ob += (int64_t)i * p->sb[d];
    }
  }
  *a = q->a + oa;
  *b = q->b + ob;
  *c = q->y + idx * (size_t)(p->rows * p->n);
  *bias = NULL;
}

void ert_matmul_eval(const ert_node *node, ert_exec *ex) {
  const ert_tensor *a = node->in[0], *b = node->in[1], *y = node->out[0];
  const ert_act_params act = {ert_pi(node, P_ACT), ert_pf(node, P_ACT + 1),
                              ert_pf(node, P_ACT + 2)};
  mm_plan p;
  memset(&p, 0, sizeof p);
  int32_t rank;
  int64_t shape[EDGERT_MAX_DIMS];
  make_plan(a, b, &p, &rank, shape);
  mm_ctx q = {&p, a->data, b->data, y->data};
  ert_sgemm s;
  s.bpanels = 0;
#if defined(ERT_X86_KERNELS)
  s.bias_cols = s.rows_first = s.by_rows = 0;
  s.res = NULL;
#endif
  s.m = (int32_t)p.rows;
  s.n = (int32_t)p.n;
  s.k = (int32_t)p.k;
  s.rsa = (ptrdiff_t)p.k;
  s.csa = 1;
  s.rsb = (ptrdiff_t)p.n;
  s.csb = 1;
  s.im2col = NULL;
  s.ldc = (ptrdiff_t)p.n;
  s.alpha = 1.0f;
  s.accumulate = 0;
  s.act = &act;
  s.batch = (size_t)p.problems;
  s.locate = locate;
  s.ctx = &q;
  ert_sgemm_run(&s, node->scratch, ex);
}

edgert_status ert_matmul_shape(ert_node *node, ert_err *err) {
  mm_plan p;
  int32_t rank = 0;
  int64_t shape[EDGERT_MAX_DIMS];
  if (!make_plan(node->in[0], node->in[1], &p, &rank, shape) || rank != node->out[0]->ndim)
    return ert_fail(err, EDGERT_ERR_SHAPE, "matmul '%s': operand shapes do not match", node->name);
  ert_tensor_set_shape(node->out[0], rank, shape);
  return EDGERT_OK;
}
