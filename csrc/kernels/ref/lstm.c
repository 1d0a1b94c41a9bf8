/* lstm.c: one ONNX LSTM layer (gate order i o f c), float32, reference kernel.
 * Inputs, parameters, scratch and equations: edgert/converter/ops/rnn.py. */
#include "rnn_common.h"

enum { LSTM_GATES = 4, LSTM_ACTS = 3 };

edgert_status ert_lstm_prepare(ert_node *node, ert_err *err) {
  return ert_rnn_prepare_common(node, err, LSTM_GATES, 7, 3, LSTM_ACTS);
}

void ert_lstm_eval(const ert_node *node, ert_exec *ex) {
  ert_rnn_cfg c;
  ert_rnn_cfg_read(node, LSTM_GATES, &c);
  const size_t H = c.hidden, N = c.batch, GH = LSTM_GATES * H;
  float *bias = (float *)node->scratch;
  float *proj = bias + GH;
  float *gates = proj + c.seq * N * GH;
  float *h = gates + N * GH;
  float *cell = h + N * H;
  const ert_tensor *p = ert_rnn_opt(node, 6);
  const size_t add_stride = c.layout == 0 ? GH : c.seq * GH;
  for (size_t d = 0; d < c.dirs; d++) {
    ert_rnn_act fa, ga, ha;
    ert_rnn_act_get(node, d * LSTM_ACTS + 0, &fa);
    ert_rnn_act_get(node, d * LSTM_ACTS + 1, &ga);
    ert_rnn_act_get(node, d * LSTM_ACTS + 2, &ha);
    const float *RT = (const float *)node->in[2]->data + d * H * GH;
    const float *pi = p ? (const float *)p->data + d * 3 * H : NULL;
    const float *po = pi ? pi + H : NULL, *pf = pi ? pi + 2 * H : NULL;
    /* the optimized gates: default activations, no coupled input and forget gates */
    const ert_lstm_cell_fn cell_fn = fa.kind == ERT_RNN_SIGMOID && ga.kind == ERT_RNN_TANH &&
                                     ha.kind == ERT_RNN_TANH && !c.flag ? ert_cpu.lstm_cell : NULL;
    ert_rnn_input_projection(node, ex, &c, d, GH, bias, proj);
    ert_rnn_load_state(&c, ert_rnn_opt(node, 4), d, h);
    ert_rnn_load_state(&c, ert_rnn_opt(node, 5), d, cell);
    for (size_t step = 0; step < c.seq; step++) {
      const size_t t = ert_rnn_time(&c, d, step);
      ert_rnn_mv mv = {.mt = RT, .k = H, .ld = GH, .vec = h, .vec_stride = H, .nvec = N,
                       .add = proj + ert_rnn_xrow(&c, t, 0) * GH, .add_stride = add_stride,
                       .out = gates, .out_stride = GH};
      ert_rnn_mv_run(ex, &mv, GH);
      if (cell_fn) {
        for (size_t b = 0; b < N; b++)
          cell_fn(gates + b * GH, cell + b * H, h + b * H, H, pi, c.has_clip ? c.clip : 0.0f);
        ert_rnn_store_y(&c, node->out[0], t, d, h);
        continue;
      }
      for (size_t b = 0; b < N; b++) {
        const float *g = gates + b * GH;
        float *hb = h + b * H, *cb = cell + b * H;
        for (size_t j = 0; j < H; j++) {
          const float cprev = cb[j];
          float gi = g[j], go = g[H + j], gf = g[2 * H + j], gc = g[3 * H + j];
          if (pi) {
            gi += pi[j] * cprev;
            gf += pf[j] * cprev;
          }
          const float i = ert_rnn_act_eval(&fa, ert_rnn_clip(&c, gi));
          const float f = c.flag ? 1.0f - i : ert_rnn_act_eval(&fa, ert_rnn_clip(&c, gf));
          const float cn = f * cprev + i * ert_rnn_act_eval(&ga, ert_rnn_clip(&c, gc));
          if (po) go += po[j] * cn;
          const float o = ert_rnn_act_eval(&fa, ert_rnn_clip(&c, go));
          cb[j] = cn;
          hb[j] = o * ert_rnn_act_eval(&ha, cn);
        }
      }
      ert_rnn_store_y(&c, node->out[0], t, d, h);
    }
    ert_rnn_store_state(&c, node->out[1], d, h);
    ert_rnn_store_state(&c, node->out[2], d, cell);
  }
}
