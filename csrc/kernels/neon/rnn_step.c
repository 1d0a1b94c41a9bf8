/* rnn_step.c (NEON): the recurrent ops' per-step kernels, contracts in src/cpu.h:
 * rnn_panels (one vector times np consecutive 16-column weight panels, ref/rnn_common.h)
 * and the gate steps lstm_cell and gru_cell. Compiled for speed (a hot file of
 * csrc/Makefile): with the rest of a step at its floor, the gates were 9 % of a GRU's
 * instructions as cold code calling the out-of-line sigmoid and tanh.
 *
 * rnn_panels keeps all np*16 outputs in registers (4 per panel) for the whole of k, four
 * k per vector of x, each row of a panel one 64-byte load; the rows are read in order,
 * so the weights stream sequentially. aarch64: the four rows of a panel are an
 * inline-assembly block of post-indexed loads and fmla by lane, 0.32 instructions per
 * multiply-add for four panels (GCC's own code computed an address per load: 0.42);
 * armv7 (16 q registers) two panels at a time in intrinsics.
 *
 * The gates inline ert_v_sigmoid and ert_v_tanh (neon_f32.h; within 5e-7 absolute of the
 * exact functions, NaN stays NaN), their constants loaded once per call; the clip's
 * min/max only when a clip is set. The last n % 4 units go through the same code on
 * 4-wide copies of their inputs. */
#include <math.h>
#include <string.h>

#include "neon_f32.h"

#if defined(__aarch64__)
#define MV_LANE(acc, w, xv, l) vfmaq_laneq_f32((acc), (w), (xv), (l))
#else
#define MV_LANE(acc, w, xv, l) \
  vmlaq_lane_f32((acc), (w), (l) < 2 ? vget_low_f32(xv) : vget_high_f32(xv), (l) & 1)
#endif

#if defined(__aarch64__)
enum { PANELS_MAX = 4 }; /* 16 accumulators */
#define PN_ROW(w4, p) const float32x4x4_t w4 = vld1q_f32_x4(p)
#else
enum { PANELS_MAX = 2 }; /* armv7's 16 q registers: 8 accumulators */
#define PN_ROW(w4, p)                                                                  \
  float32x4x4_t w4;                                                                    \
  w4.val[0] = vld1q_f32(p), w4.val[1] = vld1q_f32((p) + 4), w4.val[2] = vld1q_f32((p) + 8), \
  w4.val[3] = vld1q_f32((p) + 12)
#endif

static inline __attribute__((always_inline)) void panels_n(const int np, size_t k, const float *w,
                                                           const float *x, const float *add,
                                                           float *out) {
  float32x4_t acc[PANELS_MAX][4];
  const float *wq[PANELS_MAX];
  _Pragma("GCC unroll 4") for (int q = 0; q < np; ++q) {
    wq[q] = w + (size_t)q * k * 16;
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c)
        acc[q][c] = add ? vld1q_f32(add + 16 * q + 4 * c) : vdupq_n_f32(0.0f);
  }
  size_t i = 0;
#if defined(__aarch64__)
/* ACC[0..4) += the four rows at PTR (16 floats each; PTR advanced past them) times XV's lanes */
#define PN_QUAD(ACC, PTR, XV)                                                                    \
  __asm__("ld1 {v0.4s-v3.4s}, [%[w]], #64\n\t"                                                \
          "fmla %[a0].4s, v0.4s, %[x].s[0]\n\tfmla %[a1].4s, v1.4s, %[x].s[0]\n\t"             \
          "fmla %[a2].4s, v2.4s, %[x].s[0]\n\tfmla %[a3].4s, v3.4s, %[x].s[0]\n\t"             \
          "ld1 {v0.4s-v3.4s}, [%[w]], #64\n\t"                                                \
          "fmla %[a0].4s, v0.4s, %[x].s[1]\n\tfmla %[a1].4s, v1.4s, %[x].s[1]\n\t"             \
          "fmla %[a2].4s, v2.4s, %[x].s[1]\n\tfmla %[a3].4s, v3.4s, %[x].s[1]\n\t"             \
          "ld1 {v0.4s-v3.4s}, [%[w]], #64\n\t"                                                \
          "fmla %[a0].4s, v0.4s, %[x].s[2]\n\tfmla %[a1].4s, v1.4s, %[x].s[2]\n\t"             \
          "fmla %[a2].4s, v2.4s, %[x].s[2]\n\tfmla %[a3].4s, v3.4s, %[x].s[2]\n\t"             \
          "ld1 {v0.4s-v3.4s}, [%[w]], #64\n\t"                                                \
          "fmla %[a0].4s, v0.4s, %[x].s[3]\n\tfmla %[a1].4s, v1.4s, %[x].s[3]\n\t"             \
          "fmla %[a2].4s, v2.4s, %[x].s[3]\n\tfmla %[a3].4s, v3.4s, %[x].s[3]"                  \
          : [a0] "+w"((ACC)[0]), [a1] "+w"((ACC)[1]), [a2] "+w"((ACC)[2]), [a3] "+w"((ACC)[3]), \
            [w] "+r"(PTR)                                                                       \
          : [x] "w"(XV)                                                                         \
          : "v0", "v1", "v2", "v3", "memory")
  /* eight k per step (one load of x, one loop test); the last k % 8 one by one below */
  for (; i + 8 <= k; i += 8) {
    const float32x4x2_t xv = vld1q_f32_x2(x + i);
    _Pragma("GCC unroll 4") for (int q = 0; q < np; ++q) PN_QUAD(acc[q], wq[q], xv.val[0]);
    _Pragma("GCC unroll 4") for (int q = 0; q < np; ++q) PN_QUAD(acc[q], wq[q], xv.val[1]);
  }
#else
  for (; i + 4 <= k; i += 4) {
    const float32x4_t xv = vld1q_f32(x + i);
    _Pragma("GCC unroll 4") for (int l = 0; l < 4; ++l) {
      _Pragma("GCC unroll 4") for (int q = 0; q < np; ++q) {
        PN_ROW(w4, wq[q]);
        wq[q] += 16;
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c)
            acc[q][c] = MV_LANE(acc[q][c], w4.val[c], xv, l);
      }
    }
  }
#endif
  for (; i < k; ++i) {
    _Pragma("GCC unroll 4") for (int q = 0; q < np; ++q) {
      PN_ROW(w4, wq[q]);
      wq[q] += 16;
      _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c)
          acc[q][c] = ERT_VMLA_N(acc[q][c], w4.val[c], x[i]);
    }
  }
  _Pragma("GCC unroll 4") for (int q = 0; q < np; ++q)
      _Pragma("GCC unroll 4") for (int c = 0; c < 4; ++c) vst1q_f32(out + 16 * q + 4 * c, acc[q][c]);
}

void ert_rnn_panels_f32__neon(size_t k, size_t np, const float *w, const float *vec,
                              const float *add, float *out) {
  for (size_t q = 0; q < np;) {
    const size_t n = np - q < PANELS_MAX ? np - q : PANELS_MAX;
    const float *wq = w + q * k * 16, *aq = add ? add + q * 16 : NULL;
    float *oq = out + q * 16;
#if defined(__aarch64__) /* 4, 3 or 1 at a time (2 as 1 and 1: only the GRU's z and r
                             with linear_before_reset 0) */
    if (n == 4)
      panels_n(4, k, wq, vec, aq, oq);
    else if (n == 3)
      panels_n(3, k, wq, vec, aq, oq);
    else
      panels_n(1, k, wq, vec, aq, oq);
    q += n == 2 ? 1 : n;
#else
    if (n == 2)
      panels_n(2, k, wq, vec, aq, oq);
    else
      panels_n(1, k, wq, vec, aq, oq);
    q += n;
#endif
  }
}

/* ---- gates ------------------------------------------------------------------------------ */

#define INL static inline __attribute__((always_inline))

#if defined(__aarch64__)
#define LANE_FMA(a, b, v, l) vfmaq_laneq_f32((a), (b), (v), (l))
#define LANE_FMS(a, b, v, l) vfmsq_laneq_f32((a), (b), (v), (l))
#else
#define LANE_FMA(a, b, v, l) vmlaq_lane_f32((a), (b), (l) < 2 ? vget_low_f32(v) : vget_high_f32(v), (l) & 1)
#define LANE_FMS(a, b, v, l) vmlsq_lane_f32((a), (b), (l) < 2 ? vget_low_f32(v) : vget_high_f32(v), (l) & 1)
#endif

/* The gates' sigmoid and tanh: the formulas of ert_v_sigmoid and ert_v_tanh (neon_f32.h)
 * with fewer instructions, as the gates run them on every unit of every step: exp(-a) =
 * 2^n exp(-r) with r = a + n ln2 in [-ln2/2, ln2/2] by a degree-6 minimax polynomial
 * (1.7e-7 relative) in Estrin's form, 2^n from the shifted rounding constant's bits (its
 * shift holds the exponent bias), a clamped at 87.34 instead of a select (exp(-87.34) is
 * 1.2e-38 where the exact sigmoid is 0 or 1 within that). Sigmoid within 9e-8 and tanh
 * within 1.1e-7 absolute of the exact functions over [-20, 20] (tanh 8e-8 relative below
 * 1/4); NaN stays NaN. The constants are one table, loaded once per call. */
typedef struct gate_k {
  float32x4_t ka, kb;                /* lanes: -log2e ln2hi ln2lo c3 | c5 c6 62/2835 0 */
  float32x4_t shift, amax, one, c2, c4, quarter, t7, t5, t3;
} gate_k;

static const float gate_table[44] __attribute__((aligned(16))) = {
    -1.44269504f, 0.693145752f, 1.42860677e-6f, 0.16666419804096222f,
    0.008374815806746483f, 0.001383684459142387f, 62.0f / 2835.0f, 0.0f,
#define REP4(v) v, v, v, v
    REP4(12583039.0f), REP4(87.33654f), REP4(1.0f), REP4(0.49999991059303284f),
    REP4(0.04166822507977486f), REP4(0.25f), REP4(-17.0f / 315.0f), REP4(2.0f / 15.0f),
    REP4(-1.0f / 3.0f)
#undef REP4
};

INL gate_k gate_consts(void) {
  gate_k k;
  const float *t = gate_table;
  __asm__("" : "+r"(t)); /* one base register for all loads (not an address per constant) */
  k.ka = vld1q_f32(t), k.kb = vld1q_f32(t + 4), k.shift = vld1q_f32(t + 8), k.amax = vld1q_f32(t + 12);
  k.one = vld1q_f32(t + 16), k.c2 = vld1q_f32(t + 20), k.c4 = vld1q_f32(t + 24), k.quarter = vld1q_f32(t + 28);
  k.t7 = vld1q_f32(t + 32), k.t5 = vld1q_f32(t + 36), k.t3 = vld1q_f32(t + 40);
  return k;
}

/* exp(-a), a >= 0 (or NaN) */
INL float32x4_t g_exp_neg(const gate_k *k, float32x4_t a) {
  a = vminq_f32(a, k->amax);
  const float32x4_t t = LANE_FMA(k->shift, a, k->ka, 0);
  const float32x4_t nf = vsubq_f32(t, k->shift);
  float32x4_t r = LANE_FMA(a, nf, k->ka, 1);
  r = LANE_FMA(r, nf, k->ka, 2); /* exp(-a) = 2^n exp(-r) */
  const float32x4_t r2 = vmulq_f32(r, r), r4 = vmulq_f32(r2, r2);
  const float32x4_t q0 = vsubq_f32(k->one, r), q1 = LANE_FMS(k->c2, r, k->ka, 3);
  float32x4_t q2 = LANE_FMS(k->c4, r, k->kb, 0);
  q2 = LANE_FMA(q2, r2, k->kb, 1);
  float32x4_t p = ERT_VMLA(q0, r2, q1);
  p = ERT_VMLA(p, r4, q2);
  const int32x4_t bits = vshlq_n_s32(vreinterpretq_s32_f32(t), 23);
  return vmulq_f32(p, vreinterpretq_f32_s32(bits));
}

/* (x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|) */
INL float32x4_t g_sigmoid(const gate_k *k, float32x4_t x) {
  const float32x4_t e = g_exp_neg(k, vabsq_f32(x));
  return ert_v_div12(vbslq_f32(vcgeq_f32(x, vdupq_n_f32(0.0f)), k->one, e), vaddq_f32(k->one, e));
}

/* sign(x) (1 - e) / (1 + e), e = exp(-2|x|); the Taylor series to x^9 below |x| = 1/4 */
INL float32x4_t g_tanh(const gate_k *k, float32x4_t x) {
  const float32x4_t a = vabsq_f32(x), e = g_exp_neg(k, vaddq_f32(a, a));
  const float32x4_t big = ert_v_div12(vsubq_f32(k->one, e), vaddq_f32(k->one, e));
  const float32x4_t a2 = vmulq_f32(a, a);
  float32x4_t p = LANE_FMA(k->t7, a2, k->kb, 2);
  p = ERT_VMLA(k->t5, p, a2);
  p = ERT_VMLA(k->t3, p, a2);
  p = ERT_VMLA(k->one, p, a2);
  const float32x4_t y = vbslq_f32(vcltq_f32(a, k->quarter), vmulq_f32(a, p), big);
  return vbslq_f32(vdupq_n_u32(0x80000000u), x, y); /* x's sign bit */
}

/* min(max(x, -clip), clip) when has_clip (keeps NaN), else x */
INL float32x4_t clipv(const int has_clip, float32x4_t x, float32x4_t lo, float32x4_t hi) {
  return has_clip ? vminq_f32(vmaxq_f32(x, lo), hi) : x;
}

/* Copies `segs` segments of r floats, n apart, from src (may be NULL) into dst, 4 apart. */
static void stage(float *dst, const float *src, size_t n, size_t r, int segs) {
  for (int s = 0; s < segs && src; ++s) memcpy(dst + 4 * s, src + (size_t)s * n, r * sizeof(float));
}

/* units j < count (a multiple of 4) of an LSTM step whose gates are n apart */
INL void lstm_units(const int has_clip, const float *g, float *c, float *h, size_t n, size_t count,
                    const float *p, float clip) {
  const gate_k k = gate_consts();
  const float32x4_t lo = vdupq_n_f32(-clip), hi = vdupq_n_f32(clip);
  for (size_t j = 0; j < count; j += 4) {
    const float32x4_t cp = vld1q_f32(c + j);
    float32x4_t gi = vld1q_f32(g + j), go = vld1q_f32(g + n + j), gf = vld1q_f32(g + 2 * n + j);
    if (p) {
      gi = ERT_VMLA(gi, vld1q_f32(p + j), cp);
      gf = ERT_VMLA(gf, vld1q_f32(p + 2 * n + j), cp);
    }
    const float32x4_t i = g_sigmoid(&k, clipv(has_clip, gi, lo, hi));
    const float32x4_t f = g_sigmoid(&k, clipv(has_clip, gf, lo, hi));
    const float32x4_t gc = g_tanh(&k, clipv(has_clip, vld1q_f32(g + 3 * n + j), lo, hi));
    const float32x4_t cn = vaddq_f32(vmulq_f32(f, cp), vmulq_f32(i, gc));
    if (p) go = ERT_VMLA(go, vld1q_f32(p + n + j), cn);
    const float32x4_t o = g_sigmoid(&k, clipv(has_clip, go, lo, hi));
    vst1q_f32(c + j, cn);
    vst1q_f32(h + j, vmulq_f32(o, g_tanh(&k, cn)));
  }
}

void ert_lstm_cell_f32__neon(const float *g, float *c, float *h, size_t n, const float *p, float clip) {
  const size_t body = n & ~(size_t)3, r = n - body;
  if (clip > 0.0f)
    lstm_units(1, g, c, h, n, body, p, clip);
  else
    lstm_units(0, g, c, h, n, body, p, clip);
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

/* units j < count (a multiple of 4) of a GRU step whose gates are n apart: phase 0, 1, or
 * 2 (both, unit by unit: each unit's z and r are its own) */
INL void gru_units(const int has_clip, int phase, float *g, const float *x, const float *rb, float *h,
                   float *rh, size_t n, size_t count, float clip) {
  const gate_k k = gate_consts();
  const float32x4_t lo = vdupq_n_f32(-clip), hi = vdupq_n_f32(clip);
  for (size_t j = 0; j < count; j += 4) {
    float32x4_t z, q;
    if (phase != 1) {
      z = vld1q_f32(g + j), q = vld1q_f32(g + n + j);
      if (x) {
        z = vaddq_f32(z, vld1q_f32(x + j));
        q = vaddq_f32(q, vld1q_f32(x + n + j));
      }
      z = g_sigmoid(&k, clipv(has_clip, z, lo, hi));
      q = g_sigmoid(&k, clipv(has_clip, q, lo, hi));
      vst1q_f32(g + j, z);
      vst1q_f32(g + n + j, q);
      if (rh) vst1q_f32(rh + j, vmulq_f32(q, vld1q_f32(h + j)));
      if (phase == 0) continue;
    } else {
      z = vld1q_f32(g + j), q = vld1q_f32(g + n + j);
    }
    float32x4_t pre = vld1q_f32(g + 2 * n + j);
    if (x) {
      if (rb) pre = vaddq_f32(pre, vld1q_f32(rb + j));
      pre = vaddq_f32(vld1q_f32(x + 2 * n + j), vmulq_f32(q, pre));
    }
    const float32x4_t nv = g_tanh(&k, clipv(has_clip, pre, lo, hi));
    const float32x4_t hp = vld1q_f32(h + j);
    vst1q_f32(h + j, ERT_VMLA(nv, z, vsubq_f32(hp, nv))); /* (1 - z) n + z h */
  }
}

void ert_gru_cell_f32__neon(int phase, float *g, const float *x, const float *rb, float *h, float *rh,
                            size_t n, float clip) {
  const size_t body = n & ~(size_t)3, r = n - body;
  if (clip > 0.0f)
    gru_units(1, phase, g, x, rb, h, rh, n, body, clip);
  else
    gru_units(0, phase, g, x, rb, h, rh, n, body, clip);
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
