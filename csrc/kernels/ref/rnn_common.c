/* rnn_common.c: what the lstm, gru and rnn kernels share beyond one-line helpers (the
 * prepare checks, the matrix product, activations, state and output copies), defined
 * once; rnn_common.h declares and documents them. As static functions in the header,
 * link-time optimization kept one copy per op. */
#include "rnn_common.h"

#include <stdint.h>

#include "exec.h"

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

/* Checks node->scratch_bytes >= 4 * floats, where floats = sum of `count` products
 * of three factors each (terms[3k..3k+2]), computed without overflow. */
static edgert_status check_scratch(const ert_node *n, ert_err *err, const size_t *terms, size_t count) {
  size_t total = 0;
  bool ok = true;
  for (size_t k = 0; k < count && ok; k++) {
    size_t p;
    ok = ert_rnn_mul(terms[3 * k], terms[3 * k + 1], &p) && ert_rnn_mul(p, terms[3 * k + 2], &p);
    ok = ok && total <= SIZE_MAX - p;
    if (ok) total += p;
  }
  ok = ok && ert_rnn_mul(total, sizeof(float), &total);
  if (!ok || n->scratch_bytes < total)
    return ert_fail_node(err, EDGERT_ERR_PARAM, n->name ? n->name : "", ": scratch of %zu bytes is too small",
                         n->scratch_bytes);
  return EDGERT_OK;
}

/* Checks what every recurrent op shares: arity, parameter words and their ranges,
 * dtypes and shapes of X WT RT B initial_h [initial_c P] and of the outputs Y Y_h
 * [Y_c], activation kinds, and the scratch (layout in rnn.py: aux only when gates > 1).
 * n_in_max: 7 (lstm) or 5; n_out: 3 (lstm) or 2; n_act: activation slots per direction. */
edgert_status ert_rnn_prepare_common(ert_node *n, ert_err *err, size_t gates, uint32_t n_in_max,
                                     uint32_t n_out, size_t n_act) {
  edgert_status st = ert_check_arity(n, err, 3, n_in_max, n_out, n_out);
  if (st != EDGERT_OK) return st;
  st = ert_check_params(n, err, ERT_RNN_FIXED_PARAMS);
  if (st != EDGERT_OK) return st;
  const char *nm = n->name ? n->name : "";
  int32_t direction = ert_pi(n, 0), hidden = ert_pi(n, 1), layout = ert_pi(n, 2);
  int32_t has_clip = ert_pi(n, 3), flag = ert_pi(n, 5);
  float clip = ert_pf(n, 4);
  if (direction < 0 || direction > 2 || hidden <= 0 || layout < 0 || layout > 1 ||
      has_clip < 0 || has_clip > 1 || flag < 0 || flag > 1 ||
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
  for (uint32_t i = 0; i < n->n_in; i++) { /* X, WT and RT are present (the arity check) */
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
  const int64_t D = (int64_t)c.dirs, H = (int64_t)c.hidden, GH = (int64_t)gates * H;
  int64_t y[4], h[3];
  out_dims(n, y, h);
  /* Inputs 1..6 (WT RT B initial_h initial_c P): rank, then dims. */
  const int64_t want[6][4] = {{3, D, (int64_t)c.input, GH}, {3, D, H, GH}, {2, D, 2 * GH},
                              {3, h[0], h[1], h[2]},         {3, h[0], h[1], h[2]}, {2, D, 3 * H}};
  for (uint32_t i = 1; i < n->n_in && st == EDGERT_OK; i++)
    if (n->in[i] != NULL) st = ert_check_shape(n, err, n->in[i], (int32_t)want[i - 1][0], want[i - 1] + 1);
  for (uint32_t i = 0; i < n_out && st == EDGERT_OK; i++)
    st = ert_check_shape(n, err, n->out[i], i == 0 ? 4 : 3, i == 0 ? y : h);
  if (st != EDGERT_OK) return st;
  /* bias | proj | gates | h [| aux] */
  const size_t terms[] = {gates,   c.hidden, 1,        c.seq,    c.batch,  gates * c.hidden,
                          c.batch, gates,    c.hidden, c.batch,  c.hidden, gates > 1 ? 2 : 1};
  return check_scratch(n, err, terms, 4);
}

/* On x86-64 GCC/glibc the product is also compiled for AVX+FMA, chosen at load time
 * (the source stays portable C). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    !defined(ERT_NO_CLONES)
__attribute__((target_clones("fma", "default")))
#endif
void ert_rnn_mv_task(void *arg, size_t begin, size_t end) {
  const ert_rnn_mv *a = (const ert_rnn_mv *)arg;
  if (ert_cpu.rnn_mv) {
    ert_cpu.rnn_mv(a->k, end - begin, a->mt + begin, a->ld, a->vec, a->vec_stride, a->nvec,
                   a->add ? a->add + begin : NULL, a->add_stride, a->out + begin, a->out_stride);
    return;
  }
  float acc[ERT_RNN_VBLOCK][ERT_RNN_BLOCK];
  for (size_t j0 = begin; j0 < end; j0 += ERT_RNN_BLOCK) {
    const size_t nj = end - j0 < ERT_RNN_BLOCK ? end - j0 : ERT_RNN_BLOCK;
    for (size_t v0 = 0; v0 < a->nvec; v0 += ERT_RNN_VBLOCK) {
      const size_t nv = a->nvec - v0 < ERT_RNN_VBLOCK ? a->nvec - v0 : ERT_RNN_VBLOCK;
      for (size_t q = 0; q < nv; q++) {
        if (a->add)
          memcpy(acc[q], a->add + (v0 + q) * a->add_stride + j0, nj * sizeof(float));
        else
          memset(acc[q], 0, nj * sizeof(float));
      }
      for (size_t i = 0; i < a->k; i++) {
        const float *w = a->mt + i * a->ld + j0;
        for (size_t q = 0; q < nv; q++) {
          const float xi = a->vec[(v0 + q) * a->vec_stride + i];
          float *o = acc[q];
          for (size_t j = 0; j < nj; j++) o[j] += xi * w[j];
        }
      }
      for (size_t q = 0; q < nv; q++)
        memcpy(a->out + (v0 + q) * a->out_stride + j0, acc[q], nj * sizeof(float));
    }
  }
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

void ert_rnn_mv_run(ert_exec *ex, ert_rnn_mv *a, size_t cols) {
  if (cols * a->k * a->nvec >= 32768)
    ert_parallel_for(ex, cols, ert_rnn_mv_task, a);
  else
    ert_rnn_mv_task(a, 0, cols);
}

void ert_rnn_input_projection(const ert_node *n, ert_exec *ex, const ert_rnn_cfg *c,
                                            size_t d, size_t rb_rows, float *bias, float *proj) {
  const size_t GH = c->gates * c->hidden;
  const ert_tensor *b = ert_rnn_opt(n, 3);
  if (b) {
    const float *wb = (const float *)b->data + d * 2 * GH, *rb = wb + GH;
    for (size_t j = 0; j < GH; j++) bias[j] = wb[j] + (j < rb_rows ? rb[j] : 0.0f);
  }
  ert_rnn_mv mv = {
      .mt = (const float *)n->in[1]->data + d * GH * c->input,
      .k = c->input,
      .ld = GH,
      .vec = (const float *)n->in[0]->data,
      .vec_stride = c->input,
      .nvec = c->seq * c->batch,
      .add = b ? bias : NULL,
      .add_stride = 0,
      .out = proj,
      .out_stride = GH,
  };
  ert_rnn_mv_run(ex, &mv, GH);
}

void ert_rnn_load_state(const ert_rnn_cfg *c, const ert_tensor *t, size_t d,
                                      float *st) {
  const size_t H = c->hidden;
  for (size_t b = 0; b < c->batch; b++) {
    if (t)
      memcpy(st + b * H, (const float *)t->data + ert_rnn_hoff(c, d, b), H * sizeof(float));
    else
      memset(st + b * H, 0, H * sizeof(float));
  }
}

void ert_rnn_store_state(const ert_rnn_cfg *c, ert_tensor *t, size_t d,
                                       const float *st) {
  const size_t H = c->hidden;
  for (size_t b = 0; b < c->batch; b++)
    memcpy((float *)t->data + ert_rnn_hoff(c, d, b), st + b * H, H * sizeof(float));
}

void ert_rnn_store_y(const ert_rnn_cfg *c, ert_tensor *y, size_t t, size_t d,
                                   const float *st) {
  const size_t H = c->hidden;
  for (size_t b = 0; b < c->batch; b++)
    memcpy((float *)y->data + ert_rnn_yoff(c, t, d, b), st + b * H, H * sizeof(float));
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
