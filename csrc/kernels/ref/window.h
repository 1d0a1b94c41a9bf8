/* window.h: the sliding-window geometry shared by conv2d, conv2d_s8, conv_transpose2d,
 * pool and pool_s8. Each packs kh, kw, sh, sw, dh, dw, pt, pl, pb, pr as ten consecutive
 * parameter words and has a rank1d flag (rank-3 X and Y: height 1). */
#ifndef ERT_WINDOW_H_
#define ERT_WINDOW_H_

#include "internal.h"

/* Output length of one spatial dimension for input length in, window k, stride s,
 * dilation d and pads p0, p1: floor((padded - span) / s) + 1, or with ceil_mode
 * (pooling) ceil(...) + 1 less a last window that would start in the end pad. A window
 * longer than the padded input gives 0 or (ceil_mode) 1; a result below 0 means no valid
 * shape, and every caller refuses it (convolutions refuse below 1), as it is for a
 * stride below 1 (which a hostile file's bounds rules could write). */
static inline int64_t ert_window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0,
                                     int64_t p1, int ceil_mode) {
  if (s < 1) return -1;
  /* floor(q / s) for q of either sign, s >= 1; ceil(a / s) is floor((a + s - 1) / s) */
  const int64_t q = in + p0 + p1 - (d * (k - 1) + 1) + (ceil_mode ? s - 1 : 0);
  int64_t out = (q >= 0 ? q / s : -((s - 1 - q) / s)) + 1;
  if (ceil_mode && out > 0 && (out - 1) * s >= in + p0) --out;
  return out;
}

/* Fills the fields h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl of the geometry struct
 * *g from the node's X (in[0]), Y (out[0]) and the parameter words from kh_word on. A
 * macro so that each op keeps its own struct; prepare has validated what it reads. */
#define ERT_WINDOW_READ(node, g, kh_word, rank1d)                  \
  do {                                                             \
    const ert_tensor *wx_ = (node)->in[0], *wy_ = (node)->out[0];  \
    const int w1d_ = (rank1d) != 0;                                \
    (g)->h = w1d_ ? 1 : wx_->shape[2];                             \
    (g)->w = wx_->shape[w1d_ ? 2 : 3];                             \
    (g)->oh = w1d_ ? 1 : wy_->shape[2];                            \
    (g)->ow = wy_->shape[w1d_ ? 2 : 3];                            \
    (g)->kh = ert_pi((node), (kh_word) + 0);                       \
    (g)->kw = ert_pi((node), (kh_word) + 1);                       \
    (g)->sh = ert_pi((node), (kh_word) + 2);                       \
    (g)->sw = ert_pi((node), (kh_word) + 3);                       \
    (g)->dh = ert_pi((node), (kh_word) + 4);                       \
    (g)->dw = ert_pi((node), (kh_word) + 5);                       \
    (g)->pt = ert_pi((node), (kh_word) + 6);                       \
    (g)->pl = ert_pi((node), (kh_word) + 7);                       \
  } while (0)

#endif /* ERT_WINDOW_H_ */
