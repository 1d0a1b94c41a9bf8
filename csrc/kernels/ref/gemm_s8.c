/* gemm_s8.c: gemm on int8 matrices (int32 accumulation, per-column requantization).
 * Parameters, inputs and meaning: edgert/converter/ops/gemm_s8.py; arithmetic: quant_s8.h.
 *
 * Work is split into tasks of one row of A by a block of GS8_NB columns; each scratch
 * slot holds the current row as int16 (a - a_zp), so that every output is one dot
 * product (contiguous when B is stored [N, K], the layout the quantizer writes). With
 * B [N, K] and ert_cpu.gemv_s8 (cpu.h), a block's dot products are one call on A's row.
 */
#include "cpu.h"
#include "exec.h"
#include "quant_s8.h"

enum { P_TA, P_TB, P_ALPHA, P_BETA, P_ACT, P_AZP = 7, P_YZP, P_LO, P_HI, P_SHIFT, P_COUNT };
enum { GS8_NB = 64, GS8_SLOTS = 4 };
#define TERM_MAX (255 * 128)

static const char *nm(const ert_node *n) { return n->name ? n->name : ""; }

static size_t row_bytes(int64_t k) { return ((size_t)k * 2u + 63u) & ~(size_t)63u; }

edgert_status ert_gemm_s8_prepare(ert_node *node, ert_err *err) {
  edgert_status st;
  if ((st = ert_check_arity(node, err, 3, 3, 1, 1)) != EDGERT_OK) return st;
  if ((st = ert_check_params(node, err, P_COUNT)) != EDGERT_OK) return st;
  const ert_tensor *a = node->in[0], *b = node->in[1], *y = node->out[0];
  if ((st = ert_check_s8(node, err, a, "A")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, b, "B")) != EDGERT_OK ||
      (st = ert_check_s8(node, err, y, "Y")) != EDGERT_OK)
    return st;
  const int32_t tb = ert_pi(node, P_TB);
  if (ert_pi(node, P_TA) != 0 || (tb != 0 && tb != 1) || ert_pf(node, P_ALPHA) != 1.0f ||
      ert_pf(node, P_BETA) != 1.0f || ert_pi(node, P_ACT) != ERT_ACT_NONE)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED,
                    "gemm '%s': the int8 form needs trans_a 0, alpha 1, beta 1, no activation",
                    nm(node));
  if (a->ndim != 2 || b->ndim != 2 || y->ndim != 2)
    return ert_fail(err, EDGERT_ERR_SHAPE, "gemm '%s': A, B and Y must be matrices", nm(node));
  const int64_t m = a->shape[0], k = a->shape[1];
  const int64_t kb = tb ? b->shape[1] : b->shape[0], n = tb ? b->shape[0] : b->shape[1];
  if (kb != k || y->shape[0] != m || y->shape[1] != n)
    return ert_fail(err, EDGERT_ERR_SHAPE, "gemm '%s': shapes do not match", nm(node));
  if (k * TERM_MAX >= INT32_MAX)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED,
                    "gemm '%s': K = %lld could overflow the int32 accumulator", nm(node),
                    (long long)k);
  if ((st = ert_check_qp(node, err, 2, n, INT32_MAX - k * TERM_MAX, ert_pi(node, P_SHIFT))) !=
      EDGERT_OK)
    return st;
  const int32_t azp = ert_pi(node, P_AZP);
  if (azp < -128 || azp > 127)
    return ert_fail(err, EDGERT_ERR_PARAM, "gemm '%s': zero point of A outside int8", nm(node));
  if ((st = ert_check_qrange(node, err, ert_pi(node, P_YZP), ert_pi(node, P_LO),
                             ert_pi(node, P_HI))) != EDGERT_OK)
    return st;
  const size_t need = GS8_SLOTS * row_bytes(k);
  if (node->scratch_bytes < need)
    return ert_fail(err, EDGERT_ERR_PARAM, "gemm '%s': needs %zu scratch bytes, has %zu",
                    nm(node), need, node->scratch_bytes);
  return EDGERT_OK;
}

typedef struct job {
  const ert_node *node;
  int32_t m, n, k, tb, azp, yzp, lo, hi, shift;
  size_t blocks, tasks, nslots;
} job;

ERT_S8_CLONES
static void run_slot(void *arg, size_t begin, size_t end) {
  const job *j = (const job *)arg;
  const ert_node *node = j->node;
  const int8_t *a = (const int8_t *)node->in[0]->data;
  const int8_t *b = (const int8_t *)node->in[1]->data;
  const int32_t *qp = (const int32_t *)node->in[2]->data;
  int8_t *y = (int8_t *)node->out[0]->data;
  const size_t k = (size_t)j->k;
  for (size_t s = begin; s < end; s++) {
    int16_t *row = (int16_t *)(void *)((char *)node->scratch + s * row_bytes(j->k));
    size_t cur = (size_t)-1;
    const size_t t0 = s * j->tasks / j->nslots, t1 = (s + 1) * j->tasks / j->nslots;
    for (size_t t = t0; t < t1; t++) {
      const size_t r = t / j->blocks, c0 = (t % j->blocks) * GS8_NB;
      const size_t c1 = c0 + GS8_NB < (size_t)j->n ? c0 + GS8_NB : (size_t)j->n;
      if (j->tb && ert_cpu.gemv_s8 != NULL) {
        int32_t acc[GS8_NB];
        ert_cpu.gemv_s8(j->k, (int32_t)(c1 - c0), a + r * k, j->azp, b + c0 * k, acc);
        for (size_t c = c0; c < c1; c++) {
          const int32_t *q = qp + 2 * c;
          y[r * (size_t)j->n + c] = ert_clamp_s8(
              j->yzp + ert_requant((int64_t)q[0] + acc[c - c0], q[1], j->shift), j->lo, j->hi);
        }
        continue;
      }
      if (r != cur) {
        for (size_t i = 0; i < k; i++) row[i] = (int16_t)((int32_t)a[r * k + i] - j->azp);
        cur = r;
      }
      int32_t acc[GS8_NB];
      size_t c = c0;
      if (j->tb) /* four columns per pass: one read of the row, one reduction per four */
        for (; c + 4 <= c1; c += 4) {
          const int8_t *b0 = b + c * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
          int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (size_t i = 0; i < k; i++) {
            const int32_t u = row[i];
            s0 += u * b0[i];
            s1 += u * b1[i];
            s2 += u * b2[i];
            s3 += u * b3[i];
          }
          acc[c - c0] = s0, acc[c - c0 + 1] = s1, acc[c - c0 + 2] = s2, acc[c - c0 + 3] = s3;
        }
      for (; c < c1; c++) {
        int32_t s = 0;
        if (j->tb) {
          const int8_t *bc = b + c * k;
          for (size_t i = 0; i < k; i++) s += (int32_t)row[i] * (int32_t)bc[i];
        } else {
          for (size_t i = 0; i < k; i++) s += (int32_t)row[i] * (int32_t)b[i * (size_t)j->n + c];
        }
        acc[c - c0] = s;
      }
      for (c = c0; c < c1; c++) {
        const int32_t *q = qp + 2 * c;
        y[r * (size_t)j->n + c] = ert_clamp_s8(
            j->yzp + ert_requant((int64_t)q[0] + acc[c - c0], q[1], j->shift), j->lo, j->hi);
      }
    }
  }
}

void ert_gemm_s8__ref(const ert_node *node, ert_exec *ex) {
  job j;
  j.node = node;
  j.m = node->out[0]->shape[0];
  j.n = node->out[0]->shape[1];
  j.k = node->in[0]->shape[1];
  j.tb = ert_pi(node, P_TB);
  j.azp = ert_pi(node, P_AZP);
  j.yzp = ert_pi(node, P_YZP);
  j.lo = ert_pi(node, P_LO);
  j.hi = ert_pi(node, P_HI);
  j.shift = ert_pi(node, P_SHIFT);
  if (j.m == 0 || j.n == 0) return;
  j.blocks = ((size_t)j.n + GS8_NB - 1) / GS8_NB;
  j.tasks = (size_t)j.m * j.blocks;
  j.nslots = j.tasks < GS8_SLOTS ? j.tasks : GS8_SLOTS;
  ert_parallel_for(ex, j.nslots, run_slot, &j);
}
