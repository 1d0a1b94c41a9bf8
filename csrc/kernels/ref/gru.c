/* gru.c: one ONNX GRU layer (gate order z r h), float32, reference kernel, both
 * linear_before_reset modes. Inputs, parameters, scratch and equations:
 * edgert/converter/ops/rnn.py. */
#include "rnn_common.h"

enum { GRU_GATES = 3, GRU_ACTS = 2 };

edgert_status ert_gru_prepare(ert_node *node, ert_err *err) {
  return ert_rnn_prepare_common(node, err, GRU_GATES, 5, 2, GRU_ACTS);
}

void ert_gru_eval(const ert_node *node, ert_exec *ex) {
  ert_rnn_cfg c;
  ert_rnn_cfg_read(node, GRU_GATES, &c);
  const size_t H = c.hidden, N = c.batch, GH = GRU_GATES * H;
  const bool lbr = c.flag != 0;
  float *bias = (float *)node->scratch;
  float *proj = bias + GH;
  float *gates = proj + c.seq * N * GH;
  float *h = gates + N * GH;
  float *rh = h + N * H;
  const ert_tensor *bt = ert_rnn_opt(node, 3);
  const size_t add_stride = c.layout == 0 ? GH : c.seq * GH;
  for (size_t d = 0; d < c.dirs; d++) {
    ert_rnn_act fa, ga;
    ert_rnn_act_get(node, d * GRU_ACTS + 0, &fa);
    ert_rnn_act_get(node, d * GRU_ACTS + 1, &ga);
    const float *RT = (const float *)node->in[2]->data + d * H * GH;
    /* Rb of the h gate: in the projection when lbr is 0, inside r*(...) when 1. */
    const float *rbh = bt ? (const float *)bt->data + d * 2 * GH + GH + 2 * H : NULL;
    ert_rnn_input_projection(node, ex, &c, d, lbr ? 2 * H : GH, bias, proj);
    ert_rnn_load_state(&c, ert_rnn_opt(node, 4), d, h);
    /* the optimized gates: default activations */
    const ert_gru_cell_fn cell_fn =
        fa.kind == ERT_RNN_SIGMOID && ga.kind == ERT_RNN_TANH ? ert_cpu.gru_cell : NULL;
    const float clip = c.has_clip ? c.clip : 0.0f;
    for (size_t step = 0; step < c.seq; step++) {
      const size_t t = ert_rnn_time(&c, d, step);
      const float *xp = proj + ert_rnn_xrow(&c, t, 0) * GH;
      /* z and r columns (all columns when lbr: the h ones then hold h Rh^T without X). */
      ert_rnn_mv mv = {.mt = RT, .k = H, .ld = GH, .vec = h, .vec_stride = H, .nvec = N,
                       .add = lbr ? NULL : xp, .add_stride = add_stride,
                       .out = gates, .out_stride = GH};
      ert_rnn_mv_run(ex, &mv, lbr ? GH : 2 * H);
      for (size_t b = 0; b < N && cell_fn; b++)
        cell_fn(0, gates + b * GH, lbr ? xp + b * add_stride : NULL, NULL, h + b * H,
                lbr ? NULL : rh + b * H, H, clip);
      for (size_t b = 0; b < N && !cell_fn; b++) {
        float *g = gates + b * GH;
        const float *xb = xp + b * add_stride;
        for (size_t j = 0; j < 2 * H; j++) {
          const float pre = lbr ? g[j] + xb[j] : g[j];
          g[j] = ert_rnn_act_eval(&fa, ert_rnn_clip(&c, pre));
        }
        if (!lbr)
          for (size_t j = 0; j < H; j++) rh[b * H + j] = g[H + j] * h[b * H + j];
      }
      if (!lbr) {
        ert_rnn_mv mh = {.mt = RT + 2 * H, .k = H, .ld = GH,
                         .vec = rh, .vec_stride = H, .nvec = N,
                         .add = xp + 2 * H, .add_stride = add_stride,
                         .out = gates + 2 * H, .out_stride = GH};
        ert_rnn_mv_run(ex, &mh, H);
      }
      for (size_t b = 0; b < N && cell_fn; b++)
        cell_fn(1, gates + b * GH, lbr ? xp + b * add_stride : NULL, rbh, h + b * H, NULL, H, clip);
      for (size_t b = 0; b < N && !cell_fn; b++) {
        const float *g = gates + b * GH;
        const float *xb = xp + b * add_stride;
        float *hb = h + b * H;
        for (size_t j = 0; j < H; j++) {
          float pre = g[2 * H + j];
          if (lbr) pre = xb[2 * H + j] + g[H + j] * (pre + (rbh ? rbh[j] : 0.0f));
          const float nval = ert_rnn_act_eval(&ga, ert_rnn_clip(&c, pre));
          const float z = g[j];
          hb[j] = (1.0f - z) * nval + z * hb[j];
        }
      }
      ert_rnn_store_y(&c, node->out[0], t, d, h);
    }
    ert_rnn_store_state(&c, node->out[1], d, h);
  }
}
