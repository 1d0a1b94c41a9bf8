/* rnn.c: one ONNX simple RNN layer, float32, reference kernel.
 * Inputs, parameters, scratch and equations: edgert/converter/ops/rnn.py; how it runs:
 * rnn_common.h. */
#include "rnn_common.h"

edgert_status ert_rnn_prepare(ert_node *node, ert_err *err) {
  return ert_rnn_prepare_common(node, err, 1, 5, 2, 1, 0);
}

/* Items [begin, end) of a step: (direction, panel), every batch item. */
static void rnn_task(void *arg, size_t begin, size_t end) {
  const ert_rnn_run *r = (const ert_rnn_run *)arg;
  const ert_rnn_cfg *c = &r->c;
  const size_t H = c->hidden, P = c->panels, SN = c->seq * c->batch;
  const float *rp = (const float *)r->node->in[2]->data;
  float *hin = r->h[r->step & 1], *hout = r->h[(r->step + 1) & 1];
  for (size_t q = 0; q < end - begin; q++) {
    const size_t it = ert_rnn_item(r->step, begin, end, q);
    const size_t d = it / P, p = it % P, t = ert_rnn_time(c, d, r->step), u0 = p * ERT_RNN_PANEL;
    const float *w = rp + (d * P + p) * H * ERT_RNN_PANEL;
    for (size_t b = 0; b < c->batch; b++) {
      float g[ERT_RNN_PANEL];
      const float *xp = r->proj + (d * SN + ert_rnn_xrow(c, t, b)) * c->hp + u0;
      ert_rnn_panels(H, 1, w, ert_rnn_vec(c, hin, d, b), xp, g);
      float *hb = ert_rnn_vec(c, hout, d, b);
      for (size_t j = 0; j < ert_rnn_units(c, p); j++)
        hb[u0 + j] = ert_rnn_act_eval(&r->act[d][0], ert_rnn_clip(c, g[j]));
      ert_rnn_store_y(c, (float *)r->node->out[0]->data, t, d, b, p, hb);
    }
  }
}

void ert_rnn_eval(const ert_node *node, ert_exec *ex) {
  ert_rnn_run r;
  ert_rnn_begin(node, ex, 1, 0, 1, &r);
  ert_rnn_steps(ex, &r, rnn_task, 1);
  ert_rnn_store_state(&r, node->out[1], r.h[r.c.seq & 1]);
}
