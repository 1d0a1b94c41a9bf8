/* rnn_common.c: what the lstm, gru and rnn kernels share beyond one-line helpers (the
 * prepare checks, the input projection, the panel product, the step driver, activations,
 * state copies), defined once; rnn_common.h declares and documents them. */
#include "rnn_common.h"

#include <stdint.h>

#include "exec.h"
#include "sgemm.h"

/* Y's dims [S,D,N,H] (layout 0) or [N,S,D,H], and the states' [D,N,H] or [N,D,H] (Y's
 * without S), for X's actual shape. */
static void out_dims(const ert_node *n, int64_t *y, int64_t *h) {
  const ert_tensor *x = n->in[0];
  const int l = ert_pi(n, 2) != 0;
  y[0] = x->shape[0];
  y[1 + l] = ert_pi(n, 0) == ERT_RNN_BIDIRECTIONAL ? 2 : 1;
  y[2 - l] = x->shape[1];
  y[3] = ert_pi(n, 1);
  for (int k = 0; k < 3; k++) h[k] = y[k + (k >= l)];
}

/* floats = sum of `count` products of four factors each (terms[4k..4k+3]), false on
 * overflow. */
static bool sum_products(const size_t *terms, size_t count, size_t *floats) {
  size_t total = 0;
  for (size_t k = 0; k < count; k++) {
    size_t p = 1;
    for (size_t f = 0; f < 4; f++) {
      if (terms[4 * k + f] != 0 && p > SIZE_MAX / terms[4 * k + f]) return false;
      p *= terms[4 * k + f];
    }
    if (total > SIZE_MAX - p) return false;
    total += p;
  }
  *floats = total;
  return true;
}

edgert_status ert_rnn_prepare_common(ert_node *n, ert_err *err, size_t gates, uint32_t n_in_max,
                                     uint32_t n_out, size_t n_act, size_t aux) {
  edgert_status st = ert_check_arity(n, err, 3, n_in_max, n_out, n_out);
  if (st != EDGERT_OK) return st;
  st = ert_check_params(n, err, ERT_RNN_FIXED_PARAMS);
  if (st != EDGERT_OK) return st;
  const char *nm = n->name ? n->name : "";
  int32_t direction = ert_pi(n, 0), hidden = ert_pi(n, 1), layout = ert_pi(n, 2);
  int32_t has_clip = ert_pi(n, 3), flag = ert_pi(n, 5);
  float clip = ert_pf(n, 4);
  if (direction < 0 || direction > 2 || hidden <= 0 || hidden > INT32_MAX / 8 || layout < 0 ||
      layout > 1 || has_clip < 0 || has_clip > 1 || flag < 0 || flag > 1 ||
      (has_clip && !(clip > 0.0f && isfinite(clip))))
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm,
                         ": bad recurrent parameters (direction %d, hidden_size %d, layout %d, "
                         "clip flag %d, flag %d)", direction, hidden, layout, has_clip, flag);
  size_t dirs = direction == ERT_RNN_BIDIRECTIONAL ? 2 : 1;
  size_t want_params = ERT_RNN_FIXED_PARAMS + 3 * n_act * dirs;
  if (n->n_params != want_params)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm, ": %u parameter words, expected %zu", n->n_params,
                         want_params);
  for (size_t k = 0; k < n_act * dirs; k++) {
    ert_rnn_act act;
    ert_rnn_act_get(n, k, &act);
    if (act.kind < 0 || act.kind >= ERT_RNN_ACT_COUNT || !isfinite(act.a) || !isfinite(act.b))
      return ert_fail_node(err, EDGERT_ERR_PARAM, nm, ": bad activation %zu (kind %d)", k, act.kind);
  }
  for (uint32_t i = 0; i < n->n_in; i++) { /* X, WP and RP are present (the arity check) */
    if (n->in[i] != NULL && (st = ert_check_dtype(n, err, n->in[i], EDGERT_FLOAT32)) != EDGERT_OK) return st;
  }
  for (uint32_t i = 0; i < n->n_out; i++) {
    st = ert_check_dtype(n, err, n->out[i], EDGERT_FLOAT32);
    if (st != EDGERT_OK) return st;
  }
  const ert_tensor *x = n->in[0];
  if (x->ndim != 3 || x->shape[0] <= 0 || x->shape[1] <= 0 || x->shape[2] <= 0)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nm, ": X must be a non-empty rank-3 tensor");
  ert_rnn_cfg c;
  ert_rnn_cfg_read(n, gates, &c);
  const int64_t D = (int64_t)c.dirs, H = (int64_t)c.hidden, G = (int64_t)gates;
  const int64_t PG = (int64_t)c.panels * G, P16 = ERT_RNN_PANEL;
  int64_t y[4], h[3];
  out_dims(n, y, h);
  /* Inputs 1..6 (WP RP B initial_h initial_c P): rank, then dims. */
  const int64_t want[6][5] = {{4, D, PG, (int64_t)c.input, P16}, {4, D, PG, H, P16}, {2, D, 2 * G * H},
                              {3, h[0], h[1], h[2]}, {3, h[0], h[1], h[2]}, {2, D, 3 * H}};
  for (uint32_t i = 1; i < n->n_in && st == EDGERT_OK; i++)
    if (n->in[i] != NULL) st = ert_check_shape(n, err, n->in[i], (int32_t)want[i - 1][0], want[i - 1] + 1);
  for (uint32_t i = 0; i < n_out && st == EDGERT_OK; i++)
    st = ert_check_shape(n, err, n->out[i], i == 0 ? 4 : 3, i == 0 ? y : h);
  if (st != EDGERT_OK) return st;
  /* proj | bias | extra | h[0] h[1] | aux (rnn.py, scratch_floats); the SGEMM's sizes in
     int32_t */
  const size_t terms[] = {c.dirs, c.seq, c.batch, gates * c.hp,  c.dirs, gates + 3, c.hp, 1,
                          c.dirs, c.batch, c.hp, 2 + aux};
  size_t floats = 0;
  if (!sum_products(terms, 3, &floats) || floats > SIZE_MAX / sizeof(float) ||
      n->scratch_bytes < floats * sizeof(float) || c.seq * c.batch > (size_t)INT32_MAX)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm, ": scratch of %zu bytes is too small",
                         n->scratch_bytes);
  return EDGERT_OK;
}

/* ---- helpers of the three ops (declared in rnn_common.h) ---- */

float ert_rnn_act_eval(const ert_rnn_act *act, float x) {
  switch ((ert_rnn_act_kind)act->kind) {
    case ERT_RNN_SIGMOID:
      return 1.0f / (1.0f + expf(-x));
    case ERT_RNN_TANH:
      return ert_rnn_tanh(x);
    case ERT_RNN_RELU:
      return x > 0.0f ? x : 0.0f;
    case ERT_RNN_HARD_SIGMOID: {
      float y = act->a * x + act->b;
      return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    }
    case ERT_RNN_LEAKY_RELU:
      return x >= 0.0f ? x : act->a * x;
    case ERT_RNN_AFFINE:
      return act->a * x + act->b;
    case ERT_RNN_THRESHOLDED_RELU:
      return x > act->a ? x : 0.0f;
    case ERT_RNN_SCALED_TANH:
      return act->a * ert_rnn_tanh(act->b * x);
    case ERT_RNN_ELU:
      return x >= 0.0f ? x : act->a * expm1f(x);
    case ERT_RNN_SOFTSIGN:
      return x / (1.0f + fabsf(x));
    case ERT_RNN_SOFTPLUS:
      return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case ERT_RNN_ACT_COUNT:
      break;
  }
  return x;
}

void ert_rnn_cfg_read(const ert_node *n, size_t gates, ert_rnn_cfg *c) {
  const ert_tensor *x = n->in[0];
  c->direction = ert_pi(n, 0);
  c->hidden = (size_t)ert_pi(n, 1);
  c->layout = ert_pi(n, 2);
  c->has_clip = ert_pi(n, 3);
  c->clip = ert_pf(n, 4);
  c->flag = ert_pi(n, 5);
  c->dirs = c->direction == ERT_RNN_BIDIRECTIONAL ? 2 : 1;
  c->gates = gates;
  c->panels = (c->hidden + ERT_RNN_PANEL - 1) / ERT_RNN_PANEL;
  c->hp = c->panels * ERT_RNN_PANEL;
  c->seq = (size_t)(c->layout == 0 ? x->shape[0] : x->shape[1]);
  c->batch = (size_t)(c->layout == 0 ? x->shape[1] : x->shape[0]);
  c->input = (size_t)x->shape[2];
}

edgert_status ert_rnn_shape_common(ert_node *n, ert_err *err) {
  (void)err;
  int64_t y[4], h[3];
  out_dims(n, y, h);
  ert_tensor_set_shape(n->out[0], 4, y);
  for (uint32_t k = 1; k < n->n_out; k++) ert_tensor_set_shape(n->out[k], 3, h);
  return EDGERT_OK;
}

ERT_SHAPE_AS(lstm, ert_rnn_shape_common)
ERT_SHAPE_AS(gru, ert_rnn_shape_common)
ERT_SHAPE_AS(rnn, ert_rnn_shape_common)

/* On x86-64 GCC/glibc the portable product is also compiled for AVX+FMA, chosen at load
 * time (the source stays portable C). */
ERT_SIMD_CLONES
void ert_rnn_panels(size_t k, size_t np, const float *w, const float *vec, const float *add,
                    float *out) {
  if (ert_cpu.rnn_panels) {
    ert_cpu.rnn_panels(k, np, w, vec, add, out);
    return;
  }
  for (size_t q = 0; q < np; q++, w += k * ERT_RNN_PANEL) {
    float acc[ERT_RNN_PANEL];
    for (size_t j = 0; j < ERT_RNN_PANEL; j++) acc[j] = add ? add[q * ERT_RNN_PANEL + j] : 0.0f;
    for (size_t i = 0; i < k; i++) {
      const float xi = vec[i], *wi = w + i * ERT_RNN_PANEL;
      for (size_t j = 0; j < ERT_RNN_PANEL; j++) acc[j] += xi * wi[j];
    }
    memcpy(out + q * ERT_RNN_PANEL, acc, sizeof acc);
  }
}

/* The SGEMM's problem d: X, direction d's WP, direction d's proj. */
typedef struct proj_ctx {
  const float *x, *w;
  float *proj;
  size_t wstride, pstride;
} proj_ctx;

static void proj_locate(const void *ctx, size_t p, const float **a, const float **b, float **c,
                        const float **bias) {
  const proj_ctx *q = ctx;
  *a = q->x;
  *b = q->w + p * q->wstride;
  *c = q->proj + p * q->pstride;
  *bias = NULL;
}

/* proj[d][row] = X[row] W_d^T + bias_d for every row of X and direction d: the rows
 * start as the bias and one batched SGEMM (B in WP's panels, read in place, so no
 * scratch) adds the products; one row (S*N == 1) is one panel product per direction. */
static void project(const ert_node *n, ert_exec *ex, const ert_rnn_run *r) {
  const ert_rnn_cfg *c = &r->c;
  const size_t SN = c->seq * c->batch, GHp = c->gates * c->hp;
  const float *x = (const float *)n->in[0]->data, *wp = (const float *)n->in[1]->data;
  if (SN == 1) {
    for (size_t d = 0; d < c->dirs; d++)
      ert_rnn_panels(c->input, c->gates * c->panels, wp + d * GHp * c->input, x, r->bias + d * GHp,
                     r->proj + d * GHp);
    return;
  }
  for (size_t d = 0; d < c->dirs; d++)
    for (size_t row = 0; row < SN; row++)
      memcpy(r->proj + (d * SN + row) * GHp, r->bias + d * GHp, GHp * sizeof(float));
  proj_ctx q = {x, wp, r->proj, GHp * c->input, SN * GHp};
  ert_sgemm s;
  memset(&s, 0, sizeof s);
  s.m = (int32_t)SN;
  s.n = (int32_t)GHp;
  s.k = (int32_t)c->input;
  s.rsa = (ptrdiff_t)c->input;
  s.csa = 1;
  s.bpanels = 1;
  s.ldc = (ptrdiff_t)GHp;
  s.alpha = 1.0f;
  s.accumulate = 1;
  s.batch = c->dirs;
  s.locate = proj_locate;
  s.ctx = &q;
  ert_sgemm_run(&s, NULL, ex);
}

void ert_rnn_begin(const ert_node *n, ert_exec *ex, size_t gates, size_t aux, size_t rb_gates,
                   ert_rnn_run *r) {
  memset(r, 0, sizeof *r);
  r->node = n;
  ert_rnn_cfg_read(n, gates, &r->c);
  const ert_rnn_cfg *c = &r->c;
  const size_t D = c->dirs, H = c->hidden, GHp = gates * c->hp, NHp = c->batch * c->hp;
  float *s = (float *)n->scratch;
  r->proj = s;
  s += D * c->seq * c->batch * GHp;
  r->bias = s;
  s += D * GHp;
  r->extra = s;
  s += D * 3 * c->hp;
  r->h[0] = s;
  r->h[1] = s + D * NHp;
  r->aux = s + 2 * D * NHp;
  r->aux_count = aux;
  memset(r->h[1], 0, (1 + aux) * D * NHp * sizeof(float)); /* padding units stay 0 (finite) */
  r->clip = c->has_clip ? c->clip : 0.0f;
  const size_t n_act = gates == 4 ? 3 : gates == 3 ? 2 : 1;
  for (size_t d = 0; d < D; d++)
    for (size_t k = 0; k < n_act; k++) ert_rnn_act_get(n, d * n_act + k, &r->act[d][k]);
  /* bias in panel column order: (p*G + g)*16 + u holds output g*H + p*16 + u */
  const ert_tensor *bt = ert_rnn_opt(n, 3);
  for (size_t d = 0; d < D; d++) {
    const float *wb = bt ? (const float *)bt->data + d * 2 * gates * H : NULL, *rb = wb ? wb + gates * H : NULL;
    float *bd = r->bias + d * GHp;
    for (size_t p = 0; p < c->panels; p++)
      for (size_t g = 0; g < gates; g++)
        for (size_t u = 0; u < ERT_RNN_PANEL; u++) {
          const size_t j = p * ERT_RNN_PANEL + u, o = g * H + j;
          bd[(p * gates + g) * ERT_RNN_PANEL + u] =
              wb && j < H ? wb[o] + (g < rb_gates ? rb[o] : 0.0f) : 0.0f;
        }
  }
  project(n, ex, r);
  ert_rnn_load_state(r, ert_rnn_opt(n, 4), r->h[0]);
}

void ert_rnn_steps(ert_exec *ex, ert_rnn_run *r, ert_task_fn task, int passes) {
  const ert_rnn_cfg *c = &r->c;
  const size_t items = c->dirs * c->panels;
  /* a step's multiply-adds: worth the hand-off to the other threads from 32768 on */
  const bool par = items > 1 && c->dirs * c->batch * c->hidden * c->gates * c->hp >= 32768;
  for (size_t step = 0; step < c->seq; step++)
    for (int pass = 0; pass < passes; pass++) {
      r->step = step;
      r->pass = pass;
      if (par)
        ert_parallel_for(ex, items, task, r);
      else
        task(r, 0, items);
    }
}

void ert_rnn_load_state(const ert_rnn_run *r, const ert_tensor *in, float *buf) {
  const ert_rnn_cfg *c = &r->c;
  for (size_t d = 0; d < c->dirs; d++)
    for (size_t b = 0; b < c->batch; b++) {
      float *v = ert_rnn_vec(c, buf, d, b);
      if (in)
        memcpy(v, (const float *)in->data + ert_rnn_hoff(c, d, b), c->hidden * sizeof(float));
      else
        memset(v, 0, c->hidden * sizeof(float));
      memset(v + c->hidden, 0, (c->hp - c->hidden) * sizeof(float));
    }
}

void ert_rnn_store_state(const ert_rnn_run *r, ert_tensor *out, const float *buf) {
  const ert_rnn_cfg *c = &r->c;
  for (size_t d = 0; d < c->dirs; d++)
    for (size_t b = 0; b < c->batch; b++)
      memcpy((float *)out->data + ert_rnn_hoff(c, d, b), buf + (d * c->batch + b) * c->hp,
             c->hidden * sizeof(float));
}

float ert_rnn_tanh(float x) {
  const float a = fabsf(x);
  if (a < 0.25f) {
    const float x2 = x * x;
    return x * (1.0f + x2 * (-1.0f / 3.0f +
                             x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f + x2 * (62.0f / 2835.0f)))));
  }
  const float y = 1.0f - 2.0f / (expf(2.0f * a) + 1.0f); /* exp overflow gives 1 */
  return x < 0.0f ? -y : y;
}
