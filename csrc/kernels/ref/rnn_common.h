/* rnn_common.h: what the lstm, gru and rnn kernels share (inline helpers included by
 * each; the larger shared functions are defined once in rnn_common.c).
 *
 * Inputs, parameter words and scratch layout are documented in edgert/converter/ops/rnn.py.
 * In short: X [S,N,I] (layout 0) or [N,S,I] (layout 1); WP [D,P*G,I,16] and RP
 * [D,P*G,H,16]: ONNX's W and R in 16-column panels, column (p*G + g)*16 + u of a
 * direction's matrix being output g*H + p*16 + u (P = ceil(H/16) panels of 16 hidden
 * units, zeros past H); B [D,2*G*H]; initial_h [D,N,H] (layout 0) or [N,D,H] (layout 1).
 * Params: direction, hidden_size, layout, has_clip, clip, op flag, then (kind, alpha,
 * beta) per activation slot.
 *
 * How a layer runs (the reference is the spec; cpu.h's rnn_panels, lstm_cell and
 * gru_cell replace its loops where the CPU has them):
 *   1. the input projection of every time step and direction, X W^T + bias, as one
 *      batched SGEMM reading WP's panels in place (one panel product per direction
 *      when S*N is 1), into proj [D][S*N][G*Hp] in panel column order;
 *   2. per time step, per (direction, panel) item, over the session's threads when the
 *      step is large enough: the recurrent product of the panel's G gates (h times G
 *      panels of RP, read sequentially) added to the projection, then the gates with
 *      their activations on those 16 units, writing the next state and Y. The state
 *      is double-buffered (h[step & 1] read, the other written). The GRU with
 *      linear_before_reset 0 takes two passes per step (z and r, then h with r*h). */
#ifndef ERT_RNN_COMMON_H_
#define ERT_RNN_COMMON_H_

#include <math.h>
#include <string.h>

#include "cpu.h"
#include "exec.h"
#include "internal.h"

enum {
  ERT_RNN_FORWARD = 0,
  ERT_RNN_REVERSE = 1,
  ERT_RNN_BIDIRECTIONAL = 2,
  ERT_RNN_FIXED_PARAMS = 6, /* words before the activation triples */
  ERT_RNN_PANEL = 16,       /* hidden units (columns) per weight panel */
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
  size_t panels, hp; /* P = ceil(H / 16) panels, Hp = 16 P padded hidden units */
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

/* Checks what every recurrent op shares: arity, parameter words and their ranges,
 * dtypes and shapes of X WP RP B initial_h [initial_c P] and of the outputs Y Y_h
 * [Y_c], activation kinds, and the scratch (layout in rnn.py). n_in_max: 7 (lstm) or 5;
 * n_out: 3 (lstm) or 2; n_act: activation slots per direction; aux: state vectors of
 * N*Hp floats per direction beside h (lstm 1, gru 2, rnn 0). (rnn_common.c) */
edgert_status ert_rnn_prepare_common(ert_node *n, ert_err *err, size_t gates, uint32_t n_in_max,
                                     uint32_t n_out, size_t n_act, size_t aux);

/* The shape function of the three ops (bounded dimensions): Y [S,D,N,H] (layout 0) or
 * [N,S,D,H] and the states [D,N,H] or [N,D,H] from X's actual S and N. */
edgert_status ert_rnn_shape_common(ert_node *n, ert_err *err);

/* ---- eval ---- */

/* The scratch of one run (rnn.py): proj [D][S*N][G*Hp], bias [D][G*Hp] (the summed
 * biases in panel column order), extra [D][3*Hp] (gru: Rb of the h gate, padded; lstm:
 * the peepholes as [P][3][16]), h[0], h[1] [D][N*Hp] each, aux [D][aux][N*Hp]. */
typedef struct ert_rnn_run {
  const ert_node *node;
  ert_rnn_cfg c;
  float *proj, *bias, *extra, *h[2], *aux;
  size_t aux_count;
  float clip;  /* the cells' clip argument: 0 for none */
  size_t step; /* the current iteration (time step t = ert_rnn_time(c, d, step)) */
  int pass;    /* the current pass of the step (gru, linear_before_reset 0) */
  int fast;    /* default activations and the op's cpu.h cell present */
  ert_rnn_act act[2][3]; /* per direction */
} ert_rnn_run;

/* Sets up a run: sizes, scratch pointers, activations; fills bias (Rb left out for
 * gates >= rb_gates: the GRU's h gate with linear_before_reset) and proj (step 1 above),
 * and loads initial_h into h[0] (zeros when absent; padding units 0). */
void ert_rnn_begin(const ert_node *n, ert_exec *ex, size_t gates, size_t aux, size_t rb_gates,
                   ert_rnn_run *r);

/* Runs task over the D*P items (direction d = item / P, panel p = item % P) for every
 * step and each of `passes` passes, across the session's threads when a step is large
 * enough. */
void ert_rnn_steps(ert_exec *ex, ert_rnn_run *r, ert_task_fn task, int passes);

/* out[q*16 + j] = (add ? add[q*16 + j] : 0) + sum over i < k of vec[i] * w[(q*k + i)*16 + j]
 * for q < np, j < 16: np consecutive panels of k rows times one vector (cpu.h's
 * rnn_panels when present; the reference sums each output in order of i). */
void ert_rnn_panels(size_t k, size_t np, const float *w, const float *vec, const float *add,
                    float *out);

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

/* The q-th item a task over [begin, end) runs: in order on even steps, in reverse on odd
 * ones, so that a step starts with the panels the previous one read last, still in
 * cache when the weights are larger than it (the GRU of docs/host.md: 1.9 MB of R per
 * step against a 1 MB L2). */
static inline size_t ert_rnn_item(size_t step, size_t begin, size_t end, size_t q) {
  return step & 1 ? end - 1 - q : begin + q;
}

/* Units of panel p that exist (16, or fewer in the last panel). */
static inline size_t ert_rnn_units(const ert_rnn_cfg *c, size_t p) {
  const size_t u = c->hidden - p * ERT_RNN_PANEL;
  return u < ERT_RNN_PANEL ? u : ERT_RNN_PANEL;
}

/* State vector (d, b) of a [D][N*Hp] buffer. */
static inline float *ert_rnn_vec(const ert_rnn_cfg *c, float *buf, size_t d, size_t b) {
  return buf + (d * c->batch + b) * c->hp;
}

/* Copies units [p*16, p*16 + units) of src (the whole state vector of (d, b)) into Y (its
 * data y) at time t. */
static inline void ert_rnn_store_y(const ert_rnn_cfg *c, float *y, size_t t, size_t d, size_t b,
                                   size_t p, const float *src) {
  const size_t u0 = p * ERT_RNN_PANEL, units = ert_rnn_units(c, p);
  float *dst = y + ert_rnn_yoff(c, t, d, b) + u0;
  if (units == ERT_RNN_PANEL) /* a copy of fixed size, inlined */
    memcpy(dst, src + u0, ERT_RNN_PANEL * sizeof(float));
  else
    memcpy(dst, src + u0, units * sizeof(float));
}

/* Copies initial state input `in` (zeros when absent) into buf [D][N*Hp]. */
void ert_rnn_load_state(const ert_rnn_run *r, const ert_tensor *in, float *buf);

/* Copies buf [D][N*Hp] into state output `out` [D,N,H] / [N,D,H]. */
void ert_rnn_store_state(const ert_rnn_run *r, ert_tensor *out, const float *buf);

#endif /* ERT_RNN_COMMON_H_ */
