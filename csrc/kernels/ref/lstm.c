/* lstm.c: one ONNX LSTM layer (gate order i o f c), float32, reference kernel.
 * Inputs, parameters, scratch and equations: edgert/converter/ops/rnn.py; how it runs:
 * rnn_common.h. */
#include "rnn_common.h"

enum { LSTM_GATES = 4, LSTM_ACTS = 3, LSTM_AUX = 1 /* the cell state */ };

edgert_status ert_lstm_prepare(ert_node *node, ert_err *err) {
  return ert_rnn_prepare_common(node, err, LSTM_GATES, 7, 3, LSTM_ACTS, LSTM_AUX);
}

/* The gates of units j < units of one panel, any activations: g [4][16] the
 * pre-activations (projection and product), c and h the panel's units, pk the
 * peepholes [3][16] (NULL: none). */
static void gates(const ert_rnn_run *r, size_t d, const float *g, float *c, float *h, const float *pk,
                  size_t units) {
  const ert_rnn_cfg *cf = &r->c;
  const ert_rnn_act *fa = &r->act[d][0], *ga = &r->act[d][1], *ha = &r->act[d][2];
  for (size_t j = 0; j < units; j++) {
    const float cprev = c[j];
    float gi = g[j], go = g[16 + j], gf = g[32 + j], gc = g[48 + j];
    if (pk) {
      gi += pk[j] * cprev;
      gf += pk[32 + j] * cprev;
    }
    const float i = ert_rnn_act_eval(fa, ert_rnn_clip(cf, gi));
    const float f = cf->flag ? 1.0f - i : ert_rnn_act_eval(fa, ert_rnn_clip(cf, gf));
    const float cn = f * cprev + i * ert_rnn_act_eval(ga, ert_rnn_clip(cf, gc));
    if (pk) go += pk[16 + j] * cn;
    const float o = ert_rnn_act_eval(fa, ert_rnn_clip(cf, go));
    c[j] = cn;
    h[j] = o * ert_rnn_act_eval(ha, cn);
  }
}

/* Items [begin, end) of a step: (direction, panel), every batch item (what the loop
 * reads copied into locals first, as in gru.c). */
static void lstm_task(void *arg, size_t begin, size_t end) {
  const ert_rnn_run *r = (const ert_rnn_run *)arg;
  const ert_rnn_cfg cf = r->c, *c = &cf;
  const size_t H = c->hidden, P = c->panels, GHp = LSTM_GATES * c->hp, SN = c->seq * c->batch;
  const size_t step = r->step;
  const bool fast = r->fast != 0;
  const float clip = r->clip;
  const float *rp = (const float *)r->node->in[2]->data, *proj = r->proj;
  const float *peep = ert_rnn_opt(r->node, 6) != NULL ? r->extra : NULL;
  float *y = (float *)r->node->out[0]->data, *cell = r->aux;
  float *hin = r->h[step & 1], *hout = r->h[(step + 1) & 1];
  for (size_t q = 0; q < end - begin; q++) {
    const size_t it = ert_rnn_item(step, begin, end, q);
    const size_t d = it / P, p = it - d * P, t = ert_rnn_time(c, d, step), u0 = p * ERT_RNN_PANEL;
    const float *w = rp + (d * P + p) * LSTM_GATES * H * ERT_RNN_PANEL;
    const float *pk = peep ? peep + d * 3 * c->hp + 3 * u0 : NULL;
    for (size_t b = 0; b < c->batch; b++) {
      float g[LSTM_GATES * ERT_RNN_PANEL];
      const float *xp = proj + (d * SN + ert_rnn_xrow(c, t, b)) * GHp + LSTM_GATES * u0;
      ert_rnn_panels(H, LSTM_GATES, w, ert_rnn_vec(c, hin, d, b), xp, g);
      float *cb = ert_rnn_vec(c, cell, d, b) + u0, *hb = ert_rnn_vec(c, hout, d, b);
      if (fast)
        ert_cpu.lstm_cell(g, cb, hb + u0, ERT_RNN_PANEL, pk, clip);
      else
        gates(r, d, g, cb, hb + u0, pk, ert_rnn_units(c, p));
      ert_rnn_store_y(c, y, t, d, b, p, hb);
    }
  }
}

void ert_lstm_eval(const ert_node *node, ert_exec *ex) {
  ert_rnn_run r;
  ert_rnn_begin(node, ex, LSTM_GATES, LSTM_AUX, LSTM_GATES, &r);
  const ert_rnn_cfg *c = &r.c;
  ert_rnn_load_state(&r, ert_rnn_opt(node, 5), r.aux);
  const ert_tensor *pt = ert_rnn_opt(node, 6);
  bool fast = ert_cpu.lstm_cell != NULL && !c->flag;
  for (size_t d = 0; d < c->dirs; d++) {
    fast = fast && r.act[d][0].kind == ERT_RNN_SIGMOID && r.act[d][1].kind == ERT_RNN_TANH &&
           r.act[d][2].kind == ERT_RNN_TANH;
    /* peepholes [3][H] (i o f) as [P][3][16], zeros past H */
    for (size_t q = 0; pt && q < 3 * c->hp; q++) {
      const size_t p = q / 48, k = q / 16 % 3, j = p * 16 + q % 16;
      r.extra[d * 3 * c->hp + q] = j < c->hidden ? ((const float *)pt->data)[(d * 3 + k) * c->hidden + j] : 0.0f;
    }
  }
  r.fast = fast;
  ert_rnn_steps(ex, &r, lstm_task, 1);
  ert_rnn_store_state(&r, node->out[1], r.h[c->seq & 1]);
  ert_rnn_store_state(&r, node->out[2], r.aux);
}
