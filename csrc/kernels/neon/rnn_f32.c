/* rnn_f32.c (NEON): the recurrent ops' hot loops, contracts in src/cpu.h: rnn_mv (the
 * matrix-vector products of ref/rnn_common.h, each output summing its products in order,
 * fused on aarch64) and the element-wise gate steps lstm_cell and gru_cell.
 *
 * sigmoid and tanh are ert_v_sigmoid and ert_v_tanh (neon_f32.h): e = exp(-|x|) or
 * exp(-2|x|) by the softmax kernel's formula, then (x >= 0 ? 1 : e) / (1 + e) and
 * sign(x) (1 - e) / (1 + e) (the reference's Taylor series below |x| = 1/4). kernel_test
 * bounds both at 5e-7 absolute against double precision over [-20, 20] (measured: 8.4e-8
 * aarch64, 1.5e-7 armv7). NaN stays NaN. */
#include <math.h>
#include <string.h>

#include "neon_f32.h"

/* Out of line (neon_f32.h): ~40 instructions each, used here and by act.c. */
__attribute__((noinline)) float32x4_t ert_sigmoid4_f32__neon(float32x4_t x) { return ert_v_sigmoid(x); }

__attribute__((noinline)) float32x4_t ert_tanh4_f32__neon(float32x4_t x) { return ert_v_tanh(x); }

#define v_sigmoid ert_sigmoid4_f32__neon
#define v_tanh ert_tanh4_f32__neon

/* The clip range [lo, hi]: [-clip, clip] for clip > 0, else [-inf, inf]; min(max(x, lo),
 * hi) keeps NaN. */
typedef struct clip_rng {
  float32x4_t lo, hi;
} clip_rng;

static inline clip_rng clip_range(float clip) {
  const float c = clip > 0.0f ? clip : INFINITY;
  return (clip_rng){vdupq_n_f32(-c), vdupq_n_f32(c)};
}

#define v_clip(x, cr) vminq_f32(vmaxq_f32((x), (cr).lo), (cr).hi)

/* Copies `segs` segments of r floats, n apart, from src (may be NULL) into dst, 4 apart. */
static void stage(float *dst, const float *src, size_t n, size_t r, int segs) {
  for (int s = 0; s < segs && src; ++s) memcpy(dst + 4 * s, src + (size_t)s * n, r * sizeof(float));
}

/* The gate steps are compiled for size (`cold`): a few dozen instructions per unit and
 * time step beside rnn_mv's k per unit, so their speed hardly shows (ddddocr's LSTM on
 * the A72: the same count either way) while they are 400 bytes smaller.
 *
 * The last n % 4 outputs go through the same code on 4-wide copies of their inputs. */
__attribute__((cold)) void ert_lstm_cell_f32__neon(const float *g, float *c, float *h, size_t n,
                                                   const float *p, float clip) {
  const size_t body = n & ~(size_t)3, r = n - body;
  const clip_rng cr = clip_range(clip);
  for (size_t j = 0; j < body; j += 4) {
    const float32x4_t cp = vld1q_f32(c + j);
    float32x4_t gi = vld1q_f32(g + j), go = vld1q_f32(g + n + j), gf = vld1q_f32(g + 2 * n + j);
    if (p) {
      gi = ERT_VMLA(gi, vld1q_f32(p + j), cp);
      gf = ERT_VMLA(gf, vld1q_f32(p + 2 * n + j), cp);
    }
    const float32x4_t i = v_sigmoid(v_clip(gi, cr)), f = v_sigmoid(v_clip(gf, cr));
    const float32x4_t gc = v_tanh(v_clip(vld1q_f32(g + 3 * n + j), cr));
    const float32x4_t cn = vaddq_f32(vmulq_f32(f, cp), vmulq_f32(i, gc));
    if (p) go = ERT_VMLA(go, vld1q_f32(p + n + j), cn);
    const float32x4_t o = v_sigmoid(v_clip(go, cr));
    vst1q_f32(c + j, cn);
    vst1q_f32(h + j, vmulq_f32(o, v_tanh(cn)));
  }
  if (r) {
    float sg[16] = {0}, sp[12] = {0}, sc[4] = {0}, sh[4];
    stage(sg, g + body, n, r, 4);
    stage(sp, p ? p + body : NULL, n, r, 3);
    stage(sc, c + body, n, r, 1);
    ert_lstm_cell_f32__neon(sg, sc, sh, 4, p ? sp : NULL, clip);
    memcpy(c + body, sc, r * sizeof(float));
    memcpy(h + body, sh, r * sizeof(float));
  }
}

__attribute__((cold)) void ert_gru_cell_f32__neon(int phase, float *g, const float *x,
                                                  const float *rb, float *h, float *rh, size_t n,
                                                  float clip) {
  const size_t body = n & ~(size_t)3, r = n - body;
  const clip_rng cr = clip_range(clip);
  for (size_t j = 0; j < body; j += 4) {
    if (phase == 0) {
      float32x4_t z = vld1q_f32(g + j), q = vld1q_f32(g + n + j);
      if (x) {
        z = vaddq_f32(z, vld1q_f32(x + j));
        q = vaddq_f32(q, vld1q_f32(x + n + j));
      }
      z = v_sigmoid(v_clip(z, cr));
      q = v_sigmoid(v_clip(q, cr));
      vst1q_f32(g + j, z);
      vst1q_f32(g + n + j, q);
      if (rh) vst1q_f32(rh + j, vmulq_f32(q, vld1q_f32(h + j)));
      continue;
    }
    float32x4_t pre = vld1q_f32(g + 2 * n + j);
    if (x) {
      if (rb) pre = vaddq_f32(pre, vld1q_f32(rb + j));
      pre = vaddq_f32(vld1q_f32(x + 2 * n + j), vmulq_f32(vld1q_f32(g + n + j), pre));
    }
    const float32x4_t nv = v_tanh(v_clip(pre, cr)), z = vld1q_f32(g + j);
    const float32x4_t hp = vld1q_f32(h + j);
    vst1q_f32(h + j, vaddq_f32(vmulq_f32(vsubq_f32(vdupq_n_f32(1.0f), z), nv), vmulq_f32(z, hp)));
  }
  if (r) {
    float sg[12] = {0}, sx[12] = {0}, sb[4] = {0}, sh[4] = {0}, srh[4];
    stage(sg, g + body, n, r, 3);
    stage(sx, x ? x + body : NULL, n, r, 3);
    stage(sb, rb ? rb + body : NULL, n, r, 1);
    stage(sh, h + body, n, r, 1);
    ert_gru_cell_f32__neon(phase, sg, x ? sx : NULL, rb ? sb : NULL, sh, rh ? srh : NULL, 4, clip);
    for (int s = 0; s < 3; ++s) memcpy(g + body + (size_t)s * n, sg + 4 * s, r * sizeof(float));
    memcpy(h + body, sh, r * sizeof(float));
    if (rh) memcpy(rh + body, srh, r * sizeof(float));
  }
}

/* ---- matrix-vector products ------------------------------------------------------------ */

#if defined(__aarch64__)
enum { MV_CB = 4 }; /* vectors of 4 columns per tile: 16 columns */
#define MV_LANE(acc, w, xv, l) vfmaq_laneq_f32((acc), (w), (xv), (l))
/* w[0..MV_CB) = the 4*MV_CB floats at p (one ld1 of four registers) */
#define MV_LOAD(w, p)                                                        \
  {                                                                          \
    const float32x4x4_t w4 = vld1q_f32_x4(p);                                \
    w[0] = w4.val[0], w[1] = w4.val[1], w[2] = w4.val[2], w[3] = w4.val[3];  \
  }
#else
enum { MV_CB = 2 }; /* 8 columns */
#define MV_LANE(acc, w, xv, l) \
  vmlaq_lane_f32((acc), (w), (l) < 2 ? vget_low_f32(xv) : vget_high_f32(xv), (l) & 1)
#define MV_LOAD(w, p) w[0] = vld1q_f32(p), w[1] = vld1q_f32((p) + 4);
#endif

/* acc[b] += x[i + l] * row i + l of the tile, b < MV_CB */
#define MV_STEP(l)                                                 \
  {                                                                \
    float32x4_t w[MV_CB];                                          \
    MV_LOAD(w, wp + (l) * ld)                                      \
    _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b)        \
        acc[b] = MV_LANE(acc[b], w[b], xv, l);                     \
  }

/* out[j] = (add ? add[j] : 0) + sum over i < k of x[i] mt[i*ld + j], j < 4*MV_CB. */
static void mv_tile(size_t k, const float *mt, size_t ld, const float *x, const float *add,
                    float *out) {
  float32x4_t acc[MV_CB];
  _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b)
      acc[b] = add ? vld1q_f32(add + 4 * b) : vdupq_n_f32(0.0f);
  size_t i = 0;
  for (; i + 4 <= k; i += 4) {
    const float32x4_t xv = vld1q_f32(x + i);
    const float *wp = mt + i * ld;
    MV_STEP(0)
    MV_STEP(1)
    MV_STEP(2)
    MV_STEP(3)
  }
  for (; i < k; ++i) {
    const float *wp = mt + i * ld;
    _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b)
        acc[b] = ERT_VMLA_N(acc[b], vld1q_f32(wp + 4 * b), x[i]);
  }
  _Pragma("GCC unroll 4") for (int b = 0; b < MV_CB; ++b) vst1q_f32(out + 4 * b, acc[b]);
}

/* One vector at a time (each weight is used once per vector either way): whole tiles of
 * 4*MV_CB columns, then the last columns one by one. */
void ert_rnn_mv_f32__neon(size_t k, size_t nj, const float *mt, size_t ld, const float *vec,
                          size_t vs, size_t nv, const float *add, size_t as, float *out,
                          size_t os) {
  for (size_t v = 0; v < nv; ++v) {
    const float *x = vec + v * vs, *a = add ? add + v * as : NULL;
    float *o = out + v * os;
    size_t j = 0;
    for (; j + 4 * MV_CB <= nj; j += 4 * MV_CB) mv_tile(k, mt + j, ld, x, a ? a + j : NULL, o + j);
    for (; j < nj; ++j) {
      float s = a ? a[j] : 0.0f;
      for (size_t i = 0; i < k; ++i) s += x[i] * mt[i * ld + j];
      o[j] = s;
    }
  }
}
