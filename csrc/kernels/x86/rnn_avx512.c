/* rnn_avx512.c (AVX-512F): the recurrent ops' hot loops, contracts in src/cpu.h:
 * rnn_panels (one vector times 16-column weight panels, ref/rnn_common.h) and the gate
 * steps lstm_cell and gru_cell, with the sigmoid and tanh of avx512_f32.h (within 5e-7
 * absolute; NaN stays NaN). Called only where src/cpu.c found AVX512F and the OS saving
 * the zmm and opmask state.
 *
 * rnn_panels keeps one zmm per panel and two (one or two panels: four) partial sums over
 * k, so that the fused multiply-adds of a step do not wait on each other; each panel's
 * rows are read in order (a 64-byte line per row), so the weights stream sequentially
 * from wherever they are (the GRU of docs/host.md reads 1.9 MB per step from L3). */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include <math.h>

#include "avx512_f32.h"
#include "cpu.h"

/* np (<= 4) panels, ks (2 or 4) partial sums per panel. */
ERT_AVX512_INLINE void panels_n(const int np, const int ks, size_t k, const float *w, const float *x,
                                const float *add, float *out) {
  __m512 acc[4][4];
  for (int q = 0; q < np; ++q)
    for (int s = 0; s < ks; ++s)
      acc[s][q] = s == 0 && add ? _mm512_loadu_ps(add + 16 * q) : _mm512_setzero_ps();
  const size_t ps = k * 16;
  size_t i = 0;
  for (; i + (size_t)ks <= k; i += (size_t)ks, w += 16 * ks)
    for (int s = 0; s < ks; ++s) {
      const __m512 xv = _mm512_set1_ps(x[i + (size_t)s]);
      for (int q = 0; q < np; ++q) acc[s][q] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w + q * ps + 16 * s), acc[s][q]);
    }
  for (; i < k; ++i, w += 16) {
    const __m512 xv = _mm512_set1_ps(x[i]);
    for (int q = 0; q < np; ++q) acc[0][q] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w + q * ps), acc[0][q]);
  }
  for (int q = 0; q < np; ++q) {
    __m512 v = acc[0][q];
    for (int s = 1; s < ks; ++s) v = _mm512_add_ps(v, acc[s][q]);
    _mm512_storeu_ps(out + 16 * q, v);
  }
}

ERT_AVX512 void ert_rnn_panels_f32__avx512(size_t k, size_t np, const float *w, const float *vec,
                                           const float *add, float *out) {
  for (size_t q = 0; q < np;) {
    const size_t n = np - q < 4 ? np - q : 4;
    const float *wq = w + q * k * 16, *aq = add ? add + q * 16 : NULL;
    float *oq = out + q * 16;
    if (n == 4)
      panels_n(4, 2, k, wq, vec, aq, oq);
    else if (n == 3)
      panels_n(3, 2, k, wq, vec, aq, oq);
    else if (n == 2)
      panels_n(2, 4, k, wq, vec, aq, oq);
    else
      panels_n(1, 4, k, wq, vec, aq, oq);
    q += n;
  }
}

/* min(max(x, -clip), clip), clip > 0; else x. NaN stays NaN (max and min return their
 * second operand, x's side, when one is NaN). */
typedef struct clip_rng {
  __m512 lo, hi;
} clip_rng;

ERT_AVX512_INLINE clip_rng clip_range(float clip) {
  const float c = clip > 0.0f ? clip : INFINITY;
  return (clip_rng){_mm512_set1_ps(-c), _mm512_set1_ps(c)};
}

ERT_AVX512_INLINE __m512 clipv(__m512 x, clip_rng cr) { return _mm512_min_ps(cr.hi, _mm512_max_ps(cr.lo, x)); }

ERT_AVX512_INLINE __mmask16 tail(size_t left) {
  return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

#define LD(m, p) _mm512_maskz_loadu_ps((m), (p))

ERT_AVX512 void ert_lstm_cell_f32__avx512(const float *g, float *c, float *h, size_t n, const float *p,
                                          float clip) {
  const clip_rng cr = clip_range(clip);
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail(n - j);
    const __m512 cp = LD(m, c + j);
    __m512 gi = LD(m, g + j), go = LD(m, g + n + j), gf = LD(m, g + 2 * n + j);
    if (p) {
      gi = _mm512_fmadd_ps(LD(m, p + j), cp, gi);
      gf = _mm512_fmadd_ps(LD(m, p + 2 * n + j), cp, gf);
    }
    const __m512 i = sigmoid16(clipv(gi, cr)), f = sigmoid16(clipv(gf, cr));
    const __m512 gc = tanh16(clipv(LD(m, g + 3 * n + j), cr));
    const __m512 cn = _mm512_add_ps(_mm512_mul_ps(f, cp), _mm512_mul_ps(i, gc));
    if (p) go = _mm512_fmadd_ps(LD(m, p + n + j), cn, go);
    const __m512 o = sigmoid16(clipv(go, cr));
    _mm512_mask_storeu_ps(c + j, m, cn);
    _mm512_mask_storeu_ps(h + j, m, _mm512_mul_ps(o, tanh16(cn)));
  }
}

ERT_AVX512 void ert_gru_cell_f32__avx512(int phase, float *g, const float *x, const float *rb, float *h,
                                         float *rh, size_t n, float clip) {
  const clip_rng cr = clip_range(clip);
  if (phase == 2) {
    ert_gru_cell_f32__avx512(0, g, x, rb, h, rh, n, clip);
    phase = 1;
  }
  if (phase == 0) {
    for (size_t j = 0; j < 2 * n; j += 16) {
      const __mmask16 m = tail(2 * n - j);
      __m512 v = LD(m, g + j);
      if (x) v = _mm512_add_ps(v, LD(m, x + j));
      _mm512_mask_storeu_ps(g + j, m, sigmoid16(clipv(v, cr)));
    }
    for (size_t j = 0; rh && j < n; j += 16) {
      const __mmask16 m = tail(n - j);
      _mm512_mask_storeu_ps(rh + j, m, _mm512_mul_ps(LD(m, g + n + j), LD(m, h + j)));
    }
    return;
  }
  const __m512 one = _mm512_set1_ps(1.0f);
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail(n - j);
    __m512 pre = LD(m, g + 2 * n + j);
    if (x) {
      if (rb) pre = _mm512_add_ps(pre, LD(m, rb + j));
      pre = _mm512_fmadd_ps(LD(m, g + n + j), pre, LD(m, x + 2 * n + j));
    }
    const __m512 nv = tanh16(clipv(pre, cr)), z = LD(m, g + j), hp = LD(m, h + j);
    _mm512_mask_storeu_ps(h + j, m, _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(one, z), nv), _mm512_mul_ps(z, hp)));
  }
}

#endif
