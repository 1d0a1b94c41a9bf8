/* rnn_common.h: what the lstm, gru and rnn kernels share (inline helpers included by
 * each; the larger shared functions are defined once in rnn_common.c).
 *
 * Inputs, parameter words and scratch layout are documented in edgert/converter/ops/rnn.py.
 * In short: X [S,N,I] (layout 0) or [N,S,I] (layout 1); WT [D,I,G*H] and RT [D,H,G*H]
 * (ONNX's W and R with their last two axes swapped); B [D,2*G*H]; initial_h [D,N,H]
 * (layout 0) or [N,D,H] (layout 1). Params: direction, hidden_size, layout, has_clip,
 * clip, op flag, then (kind, alpha, beta) per activation slot. */
#ifndef ERT_RNN_COMMON_H_
#define ERT_RNN_COMMON_H_

#include <math.h>
#include <string.h>

#include "cpu.h"
#include "internal.h"

enum {
  ERT_RNN_FORWARD = 0,
  ERT_RNN_REVERSE = 1,
  ERT_RNN_BIDIRECTIONAL = 2,
  ERT_RNN_FIXED_PARAMS = 6, /* words before the activation triples */
};

/* Activation kinds of the recurrent ops (their own list, see ACT_KINDS in rnn.py). */
typedef enum ert_rnn_act_kind {
  ERT_RNN_SIGMOID = 0,
  ERT_RNN_TANH = 1,
  ERT_RNN_RELU = 2,
  ERT_RNN_HARD_SIGMOID = 3, /* min(max(a*x + b, 0), 1) */
  ERT_RNN_LEAKY_RELU = 4,   /* x >= 0 ? x : a*x */
  ERT_RNN_AFFINE = 5,       /* a*x + b */
  ERT_RNN_THRESHOLDED_RELU = 6, /* x > a ? x : 0 */
  ERT_RNN_SCALED_TANH = 7,  /* a*tanh(b*x) */
  ERT_RNN_ELU = 8,          /* x >= 0 ? x : a*(exp(x) - 1) */
  ERT_RNN_SOFTSIGN = 9,     /* x / (1 + |x|) */
  ERT_RNN_SOFTPLUS = 10,    /* log(1 + exp(x)) */
  ERT_RNN_ACT_COUNT
} ert_rnn_act_kind;

typedef struct ert_rnn_act {
  int32_t kind;
  float a, b;
} ert_rnn_act;

/* tanh within about 1e-6 relative error, several times faster than libm's tanhf:
 * its Taylor series to x^9 below |x| = 1/4, 1 - 2/(exp(2|x|) + 1) above. */
float ert_rnn_tanh(float x);

float ert_rnn_act_eval(const ert_rnn_act *act, float x);

/* Sizes and parameters of one recurrent node, derived from its tensors and params
 * (valid once the common prepare succeeded). */
typedef struct ert_rnn_cfg {
  size_t seq, batch, input, hidden, dirs, gates;
  int32_t direction, layout, flag;
  int32_t has_clip;
  float clip;
} ert_rnn_cfg;

void ert_rnn_cfg_read(const ert_node *n, size_t gates, ert_rnn_cfg *c);

static inline void ert_rnn_act_get(const ert_node *n, size_t slot, ert_rnn_act *act) {
  uint32_t w = ERT_RNN_FIXED_PARAMS + 3u * (uint32_t)slot;
  act->kind = ert_pi(n, w);
  act->a = ert_pf(n, w + 1);
  act->b = ert_pf(n, w + 2);
}

/* The optional input i, or NULL when absent. */
static inline const ert_tensor *ert_rnn_opt(const ert_node *n, uint32_t i) {
  return i < n->n_in ? n->in[i] : NULL;
}

/* a*b (and *c) in size_t, false on overflow. */
static inline bool ert_rnn_mul(size_t a, size_t b, size_t *out) {
  if (a != 0 && b > SIZE_MAX / a) return false;
  *out = a * b;
  return true;
}

/* Checks what every recurrent op shares: arity, parameter words and their ranges,
 * dtypes and shapes of X WT RT B initial_h [initial_c P] and of the outputs Y Y_h
 * [Y_c], activation kinds, and the scratch (layout in rnn.py: aux only when gates > 1).
 * n_in_max: 7 (lstm) or 5; n_out: 3 (lstm) or 2; n_act: activation slots per direction.
 * (rnn_common.c, once for the three ops) */
edgert_status ert_rnn_prepare_common(ert_node *n, ert_err *err, size_t gates, uint32_t n_in_max,
                                     uint32_t n_out, size_t n_act);

/* The shape function of the three ops (bounded dimensions): Y [S,D,N,H] (layout 0) or
 * [N,S,D,H] and the states [D,N,H] or [N,D,H] from X's actual S and N. */
edgert_status ert_rnn_shape_common(ert_node *n, ert_err *err);

/* ---- eval helpers ---- */

/* Row of X (and of the input projection) holding time step t of batch item b. */
static inline size_t ert_rnn_xrow(const ert_rnn_cfg *c, size_t t, size_t b) {
  return c->layout == 0 ? t * c->batch + b : b * c->seq + t;
}

/* Offset (in floats) of the H values of (t, d, b) in Y. */
static inline size_t ert_rnn_yoff(const ert_rnn_cfg *c, size_t t, size_t d, size_t b) {
  size_t row = c->layout == 0 ? (t * c->dirs + d) * c->batch + b : (b * c->seq + t) * c->dirs + d;
  return row * c->hidden;
}

/* Offset (in floats) of the H values of (d, b) in Y_h, Y_c, initial_h, initial_c. */
static inline size_t ert_rnn_hoff(const ert_rnn_cfg *c, size_t d, size_t b) {
  return (c->layout == 0 ? d * c->batch + b : b * c->dirs + d) * c->hidden;
}

/* Time step of iteration `step` for direction d. */
static inline size_t ert_rnn_time(const ert_rnn_cfg *c, size_t d, size_t step) {
  bool reverse = c->direction == ERT_RNN_REVERSE ||
                 (c->direction == ERT_RNN_BIDIRECTIONAL && d == 1);
  return reverse ? c->seq - 1 - step : step;
}

static inline float ert_rnn_clip(const ert_rnn_cfg *c, float x) {
  if (!c->has_clip) return x;
  return x < -c->clip ? -c->clip : (x > c->clip ? c->clip : x);
}

/* The product of the recurrent ops, for output columns j of a task range and every
 * vector v < nvec:
 *   out[v*out_stride + j] = (add ? add[v*add_stride + j] : 0)
 *                           + sum over i < k of vec[v*vec_stride + i] * mt[i*ld + j]
 * mt holds the transposed weights (one row per input feature), so the inner loop runs
 * along contiguous outputs: plain C that compilers vectorize without reassociating
 * (each output sums its products in order of i). ert_cpu.rnn_mv, when set, runs it
 * instead. */
typedef struct ert_rnn_mv {
  const float *mt;
  size_t k, ld;
  const float *vec;
  size_t vec_stride, nvec;
  const float *add;
  size_t add_stride;
  float *out;
  size_t out_stride;
} ert_rnn_mv;

enum {
  ERT_RNN_BLOCK = 1024, /* output columns accumulated together (in L1) */
  ERT_RNN_VBLOCK = 4,   /* vectors sharing each pass over a block of weights */
};

/* One task of the product: output columns [begin, end) (rnn_common.c). */
void ert_rnn_mv_task(void *arg, size_t begin, size_t end);

/* Runs the product over output columns [0, cols), across the session's threads when
 * the work is large enough to pay for the hand-off. */
void ert_rnn_mv_run(ert_exec *ex, ert_rnn_mv *a, size_t cols);

/* Fills bias[0..G*H) with Wb + Rb of direction d (Rb left out for outputs >= rb_rows),
 * and proj with X W_d^T + bias for every row of X (in X's row order; WT holds W_d^T). */
void ert_rnn_input_projection(const ert_node *n, ert_exec *ex, const ert_rnn_cfg *c,
                                            size_t d, size_t rb_rows, float *bias, float *proj);

/* Copies initial state (d) of input `t` (or zeros when absent) into st[N*H]. */
void ert_rnn_load_state(const ert_rnn_cfg *c, const ert_tensor *t, size_t d,
                                      float *st);

/* Copies st[N*H] into output `t` at direction d. */
void ert_rnn_store_state(const ert_rnn_cfg *c, ert_tensor *t, size_t d,
                                       const float *st);

/* Copies st[N*H] into Y at time t, direction d. */
void ert_rnn_store_y(const ert_rnn_cfg *c, ert_tensor *y, size_t t, size_t d,
                                   const float *st);

#endif /* ERT_RNN_COMMON_H_ */
