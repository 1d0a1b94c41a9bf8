/* gru.c: one ONNX GRU layer (gate order z r h), float32, reference kernel, both
 * linear_before_reset modes. Inputs, parameters, scratch and equations:
 * edgert/converter/ops/rnn.py; how it runs: rnn_common.h.
 *
 * linear_before_reset 1: one pass per step, the panel's three products from h at once,
 * then n = g(Xh Wh' + Wbh + r*(h Rh' + Rbh)) with Rbh from scratch (extra).
 * linear_before_reset 0: pass 0 makes z and r*h (aux: rh, then z), pass 1 the h gate's
 * product from r*h (Rbh in the projection's bias) and the new state. */
#include "rnn_common.h"

enum { GRU_GATES = 3, GRU_ACTS = 2, GRU_AUX = 2 /* r*h and z */ };

edgert_status ert_gru_prepare(ert_node *node, ert_err *err) {
  return ert_rnn_prepare_common(node, err, GRU_GATES, 5, 2, GRU_ACTS, GRU_AUX);
}

enum { U = ERT_RNN_PANEL };

/* Items [begin, end) of a step's pass: (direction, panel), every batch item. What the
 * loop reads is copied into locals first (calls through ert_cpu would make the compiler
 * reload it from *r). */
static void gru_task(void *arg, size_t begin, size_t end) {
  const ert_rnn_run *r = (const ert_rnn_run *)arg;
  const ert_rnn_cfg cf = r->c, *c = &cf;
  const size_t H = c->hidden, P = c->panels, GHp = GRU_GATES * c->hp, SN = c->seq * c->batch;
  const size_t DNHp = c->dirs * c->batch * c->hp, step = r->step;
  const bool lbr = c->flag != 0, fast = r->fast != 0, pass1 = r->pass == 1;
  const float clip = r->clip;
  const float *rp = (const float *)r->node->in[2]->data, *proj = r->proj, *extra = r->extra;
  float *y = (float *)r->node->out[0]->data;
  float *hin = r->h[step & 1], *hout = r->h[(step + 1) & 1];
  float *rhb = r->aux, *zb = r->aux + DNHp;
  for (size_t q = 0; q < end - begin; q++) {
    const size_t it = ert_rnn_item(step, begin, end, q);
    const size_t d = it / P, p = it - d * P, t = ert_rnn_time(c, d, step), u0 = p * U;
    const size_t units = fast ? U : ert_rnn_units(c, p);
    const ert_rnn_act *fa = &r->act[d][0], *ga = &r->act[d][1];
    const float *w = rp + (d * P + p) * GRU_GATES * H * U;
    const float *rbh = extra + d * 3 * c->hp + u0; /* lbr: Rb of the h gate */
    for (size_t b = 0; b < c->batch; b++) {
      float g[GRU_GATES * U];
      const float *xp = proj + (d * SN + ert_rnn_xrow(c, t, b)) * GHp + GRU_GATES * u0;
      const float *hv = ert_rnn_vec(c, hin, d, b), *hp = hv + u0;
      float *hn = ert_rnn_vec(c, hout, d, b), *rh = ert_rnn_vec(c, rhb, d, b), *z = ert_rnn_vec(c, zb, d, b) + u0;
      if (!pass1) {
        /* lbr: z r h products from h (the projection added in the gates); else z and r
           with the projection */
        ert_rnn_panels(H, lbr ? 3 : 2, w, hv, lbr ? NULL : xp, g);
        if (fast && lbr) { /* both phases in one call */
          memcpy(hn + u0, hp, U * sizeof(float));
          ert_cpu.gru_cell(2, g, xp, rbh, hn + u0, NULL, U, clip);
          ert_rnn_store_y(c, y, t, d, b, p, hn);
          continue;
        }
        if (fast) {
          ert_cpu.gru_cell(0, g, NULL, NULL, (float *)hp, rh + u0, U, clip);
        } else {
          for (size_t j = 0; j < 2 * U; j++) {
            if (j % U >= units) continue;
            g[j] = ert_rnn_act_eval(fa, ert_rnn_clip(c, lbr ? g[j] + xp[j] : g[j]));
          }
          for (size_t j = 0; !lbr && j < units; j++) rh[u0 + j] = g[U + j] * hp[j];
        }
        if (!lbr) {
          memcpy(z, g, U * sizeof(float));
          continue;
        }
      } else {
        /* pass 1: the h gate's product from r*h */
        ert_rnn_panels(H, 1, w + 2 * H * U, rh, xp + 2 * U, g + 2 * U);
        memcpy(g, z, U * sizeof(float));
      }
      /* the new state of the panel's units: h' = (1 - z) n + z h */
      memcpy(hn + u0, hp, U * sizeof(float));
      if (fast) {
        ert_cpu.gru_cell(1, g, lbr ? xp : NULL, lbr ? rbh : NULL, hn + u0, NULL, U, clip);
      } else {
        for (size_t j = 0; j < units; j++) {
          float pre = g[2 * U + j];
          if (lbr) pre = xp[2 * U + j] + g[U + j] * (pre + rbh[j]);
          const float nval = ert_rnn_act_eval(ga, ert_rnn_clip(c, pre));
          hn[u0 + j] = (1.0f - g[j]) * nval + g[j] * hp[j];
        }
      }
      ert_rnn_store_y(c, y, t, d, b, p, hn);
    }
  }
}

void ert_gru_eval(const ert_node *node, ert_exec *ex) {
  ert_rnn_run r;
  const bool lbr = ert_pi(node, 5) != 0;
  /* Rb of the h gate: in the projection's bias when lbr is 0, inside r*(...) when 1 */
  ert_rnn_begin(node, ex, GRU_GATES, GRU_AUX, lbr ? 2 : 3, &r);
  const ert_rnn_cfg *c = &r.c;
  const ert_tensor *bt = ert_rnn_opt(node, 3);
  bool fast = ert_cpu.gru_cell != NULL;
  for (size_t d = 0; d < c->dirs; d++) {
    fast = fast && r.act[d][0].kind == ERT_RNN_SIGMOID && r.act[d][1].kind == ERT_RNN_TANH;
    float *rbh = r.extra + d * 3 * c->hp;
    const float *src = bt ? (const float *)bt->data + d * 2 * GRU_GATES * c->hidden + (GRU_GATES + 2) * c->hidden : NULL;
    for (size_t j = 0; j < c->hp; j++) rbh[j] = src && j < c->hidden ? src[j] : 0.0f;
  }
  r.fast = fast;
  ert_rnn_steps(ex, &r, gru_task, lbr ? 1 : 2);
  ert_rnn_store_state(&r, node->out[1], r.h[c->seq & 1]);
}
