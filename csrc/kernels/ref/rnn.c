/* rnn.c: one ONNX simple RNN layer, float32, reference kernel.
 * Inputs, parameters, scratch and equations: edgert/converter/ops/rnn.py. */
#include "rnn_common.h"

edgert_status ert_rnn_prepare(ert_node *node, ert_err *err) {
  return ert_rnn_prepare_common(node, err, 1, 5, 2, 1);
}

void ert_rnn_eval(const ert_node *node, ert_exec *ex) {
  ert_rnn_cfg c;
  ert_rnn_cfg_read(node, 1, &c);
  const size_t H = c.hidden, N = c.batch;
  float *bias = (float *)node->scratch;
  float *proj = bias + H;
  float *gates = proj + c.seq * N * H;
  float *h = gates + N * H;
  const size_t add_stride = c.layout == 0 ? H : c.seq * H;
  for (size_t d = 0; d < c.dirs; d++) {
    ert_rnn_act fa;
    ert_rnn_act_get(node, d, &fa);
    const float *RT = (const float *)node->in[2]->data + d * H * H;
    ert_rnn_input_projection(node, ex, &c, d, H, bias, proj);
    ert_rnn_load_state(&c, ert_rnn_opt(node, 4), d, h);
    for (size_t step = 0; step < c.seq; step++) {
      const size_t t = ert_rnn_time(&c, d, step);
      ert_rnn_mv mv = {.mt = RT, .k = H, .ld = H, .vec = h, .vec_stride = H, .nvec = N,
                       .add = proj + ert_rnn_xrow(&c, t, 0) * H, .add_stride = add_stride,
                       .out = gates, .out_stride = H};
      ert_rnn_mv_run(ex, &mv, H);
      for (size_t k = 0; k < N * H; k++) h[k] = ert_rnn_act_eval(&fa, ert_rnn_clip(&c, gates[k]));
      ert_rnn_store_y(&c, node->out[0], t, d, h);
    }
    ert_rnn_store_state(&c, node->out[1], d, h);
  }
}
