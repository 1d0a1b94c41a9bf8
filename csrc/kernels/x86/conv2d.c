/* conv2d.c (AVX2): depthwise 3x3 and 5x5 planes, over a padded input (dwK_sS) and over
 * the image itself (dw_direct; dw3, 3x3 with the clamp fused), contracts in src/cpu.h
 * (the portable path is dw_run and dw_plane_direct in ref/conv2d.c). */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include "x86_avx2.h"

/* Eight outputs i..i+7 of one row: y = bias + sum over taps of w[ky*K + kx] *
 * x[ky*ts + u*S + kx] (x at the first output's window). A partial sum per window row
 * keeps K independent FMA chains.
 *
 * Loads: `masked` keeps the reads inside [0, lim) floats from x in every window row (a
 * row's last output reads lim - 1), for rows narrower than 8 outputs; otherwise they
 * read 8 floats from each offset, which the caller keeps inside the row.
 *
 * Stride 2: for tap kx the eight values x[kx + 2u] come from the 16 floats at kx (even
 * lanes) or at kx - 1 (odd lanes); the last tap uses kx - 1, so nothing past the last
 * tap's float is read. The even/odd selection (shuffle_ps within 128-bit halves) leaves
 * the outputs in the order 0 1 4 5 2 3 6 7; one 64-bit permute restores it at the end. */
ERT_AVX2_INLINE __m256 load8(const float *p, int masked, int32_t lim) {
  if (!masked) return _mm256_loadu_ps(p);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(lim), lane));
}

ERT_AVX2_INLINE __m256 tap_s2(const float *row, int kx, int K, int masked, int32_t lim) {
  const int odd = (kx & 1) || kx == K - 1;
  const int o = odd ? kx - 1 : kx;
  const __m256 lo = load8(row + o, masked, lim - o), hi = load8(row + o + 8, masked, lim - o - 8);
  return odd ? _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))
             : _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
}

/* The window rows' partial sums added in row order; at stride 2 the outputs put back in
 * order (the even/odd lane selection leaves them as 0 2 1 3 in 64-bit pairs). */
ERT_AVX2_INLINE __m256 sum_rows(const __m256 *part, int K, int S) {
  __m256 s = part[0];
#pragma GCC unroll 5
  for (int ky = 1; ky < K; ++ky) s = _mm256_add_ps(s, part[ky]);
  if (S == 2) s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
  return s;
}

ERT_AVX2_INLINE __m256 dw_vec(const float *x, ptrdiff_t ts, const __m256 *wv, __m256 vb, int K,
                              int S, int masked, int32_t lim) {
  __m256 part[5];
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    const float *row = x + ky * ts;
    __m256 a = ky == 0 ? vb : _mm256_setzero_ps();
#pragma GCC unroll 5
    for (int kx = 0; kx < K; ++kx) {
      const __m256 v = S == 1 ? load8(row + kx, masked, lim - kx) : tap_s2(row, kx, K, masked, lim);
      a = _mm256_fmadd_ps(wv[ky * K + kx], v, a);
    }
    part[ky] = a;
  }
  return sum_rows(part, K, S);
}

/* A plane: per row, steps of 8 outputs while they fit; the outputs left over are
 * recomputed with the ones before them when the row has 8 or more (each output sees the
 * same operations, so the values are the same), else computed with masked loads and
 * stores. */
ERT_AVX2_INLINE void dw_plane(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,
                              ptrdiff_t ts, const float *w, float bias, int K, int S) {
  __m256 wv[25];
  for (int t = 0; t < K * K; ++t) wv[t] = _mm256_set1_ps(w[t]);
  const __m256 vb = _mm256_set1_ps(bias);
  for (int32_t oy = 0; oy < oh; ++oy, y += ow, x += rs) {
    if (ow < 8) {
      const int32_t lim = (ow - 1) * S + K; /* floats of a window row the row reads */
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(ow), lane),
                          dw_vec(x, ts, wv, vb, K, S, 1, lim));
      continue;
    }
    int32_t i = 0;
    for (; i + 8 <= ow; i += 8) _mm256_storeu_ps(y + i, dw_vec(x + (ptrdiff_t)i * S, ts, wv, vb, K, S, 0, 0));
    if (i < ow) {
      i = ow - 8;
      _mm256_storeu_ps(y + i, dw_vec(x + (ptrdiff_t)i * S, ts, wv, vb, K, S, 0, 0));
    }
  }
}

/* ---- direct planes: the unpadded input, padding by masked loads ----------------------- */

/* Lanes l with 0 <= c + l < w: the columns of the image among c, c + 1, ..., c + 7. */
ERT_AVX2_INLINE __m256i cols_in(int32_t c, int32_t w) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(-c - 1));
  return _mm256_and_si256(lo, _mm256_cmpgt_epi32(_mm256_set1_epi32(w - c), lane));
}

/* 8 floats of an image row from column c0 + o; with masks (mk[o] = cols_in(c0 + o, w)),
 * 0 for the columns outside the image, whose addresses are formed but not read. */
ERT_AVX2_INLINE __m256 row8(const float *row, int32_t c0, int o, const __m256i *mk) {
  if (mk == NULL) return _mm256_loadu_ps(row + c0 + o);
  return _mm256_maskload_ps(
      (const float *)((uintptr_t)row + (intptr_t)(c0 + o) * (intptr_t)sizeof(float)), mk[o]);
}

/* Outputs of one step (8 columns from column c0 of the window rows iy0..iy0+K-1): window
 * rows outside the image are skipped (zero padding) unless `inside` says none is, columns
 * outside read as 0 through the masks. Stride 2 selects even/odd lanes as tap_s2 does. */
ERT_AVX2_INLINE __m256 direct_vec(const float *x, int32_t h, int32_t w, int32_t iy0, int32_t c0,
                                  const __m256 *wv, __m256 vb, int K, int S, const __m256i *mk,
                                  int inside) {
  __m256 part[5];
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    __m256 a = ky == 0 ? vb : _mm256_setzero_ps();
    const int32_t iy = iy0 + ky;
    if (inside || (iy >= 0 && iy < h)) {
      const float *row = x + (ptrdiff_t)iy * w;
#pragma GCC unroll 5
      for (int kx = 0; kx < K; ++kx) {
        __m256 v;
        if (S == 1) {
          v = row8(row, c0, kx, mk);
        } else {
          const int odd = (kx & 1) || kx == K - 1;
          const int o = odd ? kx - 1 : kx;
          const __m256 lo = row8(row, c0, o, mk), hi = row8(row, c0, o + 8, mk);
          v = odd ? _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))
                  : _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        }
        a = _mm256_fmadd_ps(wv[ky * K + kx], v, a);
      }
    }
    part[ky] = a;
  }
  return sum_rows(part, K, S);
}

enum { DIRECT_EDGE = 4 }; /* masked steps whose masks are kept per plane */

/* One plane. The steps of a row (8 outputs each; a last partial step moves back to end
 * at the row's end when the row has 8 or more outputs, recomputing some with the same
 * operations, else it is stored masked) are the same for every row: the ones whose
 * columns leave the image (the first, the last one or two) get their load masks once per
 * plane, the others load plainly. Rows whose window is inside the image skip the row
 * checks. */
ERT_AVX2_INLINE void direct_plane(float *y, const float *x, int32_t h, int32_t w, int32_t oh,
                                  int32_t ow, int32_t pt, int32_t pl, const float *wt, float bias,
                                  int K, int S) {
  __m256 wv[25];
  for (int t = 0; t < K * K; ++t) wv[t] = _mm256_set1_ps(wt[t]);
  const __m256 vb = _mm256_set1_ps(bias);
  const int32_t span = S == 1 ? K - 1 + 7 : K + 13; /* last column a step reads, from c0 */
  const int nmask = S == 1 ? K : K + 8;              /* load offsets of a step */
  const int32_t nsteps = ow < 8 ? 1 : (ow + 7) / 8;
  /* step t covers outputs [i, i + 8), i = min(8t, ow - 8) (0 for rows under 8) */
#define STEP_I(t) (ow < 8 ? 0 : ((t) * 8 + 8 > ow ? ow - 8 : (t) * 8))
  int32_t kept_t[DIRECT_EDGE];
  __m256i kept[DIRECT_EDGE][13];
  int nkept = 0;
  for (int32_t t = 0; t < nsteps && nkept < DIRECT_EDGE; ++t) {
    const int32_t c0 = STEP_I(t) * S - pl;
    if (ow < 8 || c0 < 0 || c0 + span >= w) {
      kept_t[nkept] = t;
      for (int o = 0; o < nmask; ++o) kept[nkept][o] = cols_in(c0 + o, w);
      ++nkept;
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ymask = _mm256_cmpgt_epi32(_mm256_set1_epi32(ow), lane);
  for (int32_t oy = 0; oy < oh; ++oy, y += ow) {
    const int32_t iy0 = oy * S - pt;
    const int inside = iy0 >= 0 && iy0 + K <= h;
    int next = 0; /* the next kept step */
    for (int32_t t = 0; t < nsteps; ++t) {
      const int32_t i = STEP_I(t), c0 = i * S - pl;
      __m256 v;
      if (ow < 8 || c0 < 0 || c0 + span >= w) {
        __m256i own[13];
        const __m256i *k = own;
        if (next < nkept && kept_t[next] == t) {
          k = kept[next++];
        } else { /* more masked steps than kept ones (images narrower than the window) */
          for (int o = 0; o < nmask; ++o) own[o] = cols_in(c0 + o, w);
        }
        v = inside ? direct_vec(x, h, w, iy0, c0, wv, vb, K, S, k, 1)
                   : direct_vec(x, h, w, iy0, c0, wv, vb, K, S, k, 0);
      } else {
        v = inside ? direct_vec(x, h, w, iy0, c0, wv, vb, K, S, NULL, 1)
                   : direct_vec(x, h, w, iy0, c0, wv, vb, K, S, NULL, 0);
      }
      if (ow < 8)
        _mm256_maskstore_ps(y, ymask, v);
      else
        _mm256_storeu_ps(y + i, v);
    }
  }
#undef STEP_I
}

#define DIRECT(K, S)                                                                          \
  ERT_AVX2 static void direct_##K##_##S(float *y, const float *x, int32_t h, int32_t w,      \
                                        int32_t oh, int32_t ow, int32_t pt, int32_t pl,      \
                                        const float *wt, float bias) {                       \
    direct_plane(y, x, h, w, oh, ow, pt, pl, wt, bias, K, S);                                \
  }
DIRECT(3, 2)
DIRECT(5, 2)

ERT_AVX2 int ert_conv2d_dw_direct_f32__avx2(float *y, const float *x, int32_t h, int32_t w,
                                            int32_t oh, int32_t ow, int32_t k, int32_t s,
                                            int32_t pt, int32_t pl, const float *wt, float bias) {
  /* Stride 2 only: there the padded copy of the portable path costs more than the masked
   * edge steps; with stride 1 the padded-plane kernels above (dwK_s1) ran fewer
   * instructions for MobileNetV2's planes (callgrind: 6.8 M per inference against
   * 20.7 M), so the direct ones decline it. */
  if (pt < 0 || pl < 0 || pt >= k || pl >= k || s != 2) return 0;
  if (k == 3)
    direct_3_2(y, x, h, w, oh, ow, pt, pl, wt, bias);
  else if (k == 5)
    direct_5_2(y, x, h, w, oh, ow, pt, pl, wt, bias);
  else
    return 0;
  return 1;
}

/* ---- dw3: 3x3 planes straight from the input plane, the clamp fused ------------------ */

/* Eight outputs from column c0 = i*S - 1 of the window rows r[0..3) (rows outside the
 * image are the zero row): the taps of row ky as in dw_vec, the row sums added in order.
 * Loads from c0 (+1, +2 at stride 1; +8, +1, +9 at stride 2, the even/odd selection of
 * tap_s2 with bases c0 and c0 + 1): plain when mk is NULL, else masked by mk (the columns outside
 * [0, w) read as 0, their addresses formed but not read). */
ERT_AVX2_INLINE __m256 dw3_ld(const float *row, int32_t c, const __m256i *mk, int o) {
  if (mk == NULL) return _mm256_loadu_ps(row + c);
  return _mm256_maskload_ps((const float *)((uintptr_t)row + (intptr_t)c * (intptr_t)sizeof(float)),
                            mk[o]);
}

ERT_AVX2_INLINE __m256 dw3_vec(const float *const *r, int32_t c0, const __m256 *wv, __m256 vb,
                               int S, const __m256i *mk) {
  __m256 part[3];
#pragma GCC unroll 3
  for (int ky = 0; ky < 3; ++ky) {
    __m256 a;
    if (S == 1) {
      const __m256 l = dw3_ld(r[ky], c0, mk, 0);
      a = ky == 0 ? _mm256_fmadd_ps(wv[0], l, vb) : _mm256_mul_ps(wv[3 * ky], l);
      a = _mm256_fmadd_ps(wv[3 * ky + 1], dw3_ld(r[ky], c0 + 1, mk, 1), a);
      a = _mm256_fmadd_ps(wv[3 * ky + 2], dw3_ld(r[ky], c0 + 2, mk, 2), a);
    } else {
      a = ky == 0 ? vb : _mm256_setzero_ps();
      const __m256 lo = dw3_ld(r[ky], c0, mk, 0), hi = dw3_ld(r[ky], c0 + 8, mk, 1);
      const __m256 lo1 = dw3_ld(r[ky], c0 + 1, mk, 2), hi1 = dw3_ld(r[ky], c0 + 9, mk, 3);
      a = _mm256_fmadd_ps(wv[3 * ky], _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), a);
      a = _mm256_fmadd_ps(wv[3 * ky + 1], _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), a);
      a = _mm256_fmadd_ps(wv[3 * ky + 2], _mm256_shuffle_ps(lo1, hi1, _MM_SHUFFLE(3, 1, 3, 1)), a);
    }
    part[ky] = a;
  }
  return sum_rows(part, 3, S);
}

/* Stride 1, a step at the edge of the image, from output s: the middle taps C =
 * x[s..s+8) (masked to the image's w < 8 columns with cmask), the left ones x[s-1..s+7)
 * (at s = 0: C moved up a lane, 0 in lane 0) and the right ones x[s+1..s+9) (with
 * rshift, when column s + 8 is outside the image or, in masked rows, 0 already: C moved
 * down a lane, 0 in lane 7). The plain loads stay inside the row. */
ERT_AVX2_INLINE __m256 dw3_s1_edge(const float *const *r, int32_t s, const __m256 *wv, __m256 vb,
                                   int first, int cmask, __m256i cm, int rshift) {
  const __m256i up = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
  const __m256i down = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
  const __m256 z = _mm256_setzero_ps();
  __m256 part[3];
#pragma GCC unroll 3
  for (int ky = 0; ky < 3; ++ky) {
    const float *row = r[ky] + s;
    const __m256 c = cmask ? _mm256_maskload_ps(row, cm) : _mm256_loadu_ps(row);
    const __m256 l = first ? _mm256_blend_ps(_mm256_permutevar8x32_ps(c, up), z, 0x01)
                           : _mm256_loadu_ps(row - 1);
    const __m256 rr = rshift ? _mm256_blend_ps(_mm256_permutevar8x32_ps(c, down), z, 0x80)
                             : _mm256_loadu_ps(row + 1);
    __m256 a = ky == 0 ? _mm256_fmadd_ps(wv[0], l, vb) : _mm256_mul_ps(wv[3 * ky], l);
    a = _mm256_fmadd_ps(wv[3 * ky + 1], c, a);
    part[ky] = _mm256_fmadd_ps(wv[3 * ky + 2], rr, a);
  }
  return sum_rows(part, 3, 1);
}

/* One plane: per output row the three window rows (the zero row outside the image), steps
 * of 8 outputs, the last one moved back to end at the row's end (recomputing some outputs
 * with the same operations) or, in rows under 8 outputs, stored masked. Only the first
 * and the last step can read a column outside the image (the one left of column 0, the
 * ones from w on): they load through masks computed once per plane. */
ERT_AVX2_INLINE void dw3_plane(float *y, const float *x, const float *zero, const float *k,
                               float bias, const ert_dw3_geom *g, int S) {
  const int32_t h = g->h, w = g->w, oh = g->oh, ow = g->ow;
  __m256 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm256_set1_ps(k[t]);
  const __m256 vb = _mm256_set1_ps(bias), lo = _mm256_set1_ps(g->lo), hi = _mm256_set1_ps(g->hi);
  const int nld = S == 1 ? 3 : 4;
  static const int32_t off1[4] = {0, 1, 2, 0}, off2[4] = {0, 8, 1, 9};
  const int32_t last = ow <= 8 ? 0 : ow - 8; /* the last step's first output */
  __m256i mf[4], ml[4];
  for (int o = 0; o < nld; ++o) {
    const int32_t d = S == 1 ? off1[o] : off2[o];
    mf[o] = cols_in(d - 1, w);
    ml[o] = cols_in(last * S - 1 + d, w);
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ymask = _mm256_cmpgt_epi32(_mm256_set1_epi32(ow), lane);
  const __m256i cm = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), lane);
  for (int32_t oy = 0; oy < oh; ++oy, y += ow) {
    const float *r[3];
    for (int ky = 0; ky < 3; ++ky) {
      const int32_t iy = oy * g->sh - g->pt + ky;
      r[ky] = iy >= 0 && iy < h ? x + (ptrdiff_t)iy * w : zero;
    }
#define DW3_OUT(v) _mm256_min_ps(hi, _mm256_max_ps(lo, (v))) /* a NaN sum stays NaN */
    if (S == 1) { /* edges by lane moves (see dw3_s1_edge), no masks but C's in w < 8 */
      if (ow <= 8) {
        _mm256_maskstore_ps(y, ymask, DW3_OUT(dw3_s1_edge(r, 0, wv, vb, 1, w < 8, cm, w < 9)));
        continue;
      }
      _mm256_storeu_ps(y, DW3_OUT(dw3_s1_edge(r, 0, wv, vb, 1, 0, cm, 0)));
      int32_t i = 8;
      for (; i + 8 < ow; i += 8) _mm256_storeu_ps(y + i, DW3_OUT(dw3_vec(r, i - 1, wv, vb, 1, NULL)));
      if (ow == w)
        _mm256_storeu_ps(y + last, DW3_OUT(dw3_s1_edge(r, last, wv, vb, 0, 0, cm, 1)));
      else
        _mm256_storeu_ps(y + last, DW3_OUT(dw3_vec(r, last - 1, wv, vb, 1, NULL)));
      continue;
    }
    if (ow <= 8) { /* the first step is the last (same column, same masks) */
      _mm256_maskstore_ps(y, ymask, DW3_OUT(dw3_vec(r, -1, wv, vb, S, mf)));
      continue;
    }
    _mm256_storeu_ps(y, DW3_OUT(dw3_vec(r, -1, wv, vb, S, mf)));
    int32_t i = 8;
    for (; i + 8 < ow; i += 8) _mm256_storeu_ps(y + i, DW3_OUT(dw3_vec(r, i * S - 1, wv, vb, S, NULL)));
    _mm256_storeu_ps(y + last, DW3_OUT(dw3_vec(r, last * S - 1, wv, vb, S, ml)));
#undef DW3_OUT
  }
}

ERT_AVX2 static void dw3_plane_s1(float *y, const float *x, const float *zero, const float *k,
                                  float bias, const ert_dw3_geom *g) {
  dw3_plane(y, x, zero, k, bias, g, 1);
}
ERT_AVX2 static void dw3_plane_s2(float *y, const float *x, const float *zero, const float *k,
                                  float bias, const ert_dw3_geom *g) {
  dw3_plane(y, x, zero, k, bias, g, 2);
}

ERT_AVX2 void ert_conv2d_dw3_f32__avx2(float *y, const float *x, const float *zero, const float *k,
                                       float bias, const ert_dw3_geom *g) {
  if (g->sw == 1)
    dw3_plane_s1(y, x, zero, k, bias, g);
  else
    dw3_plane_s2(y, x, zero, k, bias, g);
}

/* ---- conv3s2: a 3x3 stride-2 convolution over a few input planes (the stem) -------- */

/* The three taps of one window row for 8 outputs: t[kx] = X(row, c0 + kx + 2u), u < 8,
 * in order (the even/odd selection of tap_s2, then the 64-bit pairs put back). */
ERT_AVX2_INLINE void s2_taps3(const float *row, int32_t c0, const __m256i *mk, __m256 *t) {
  const __m256 lo = dw3_ld(row, c0, mk, 0), hi = dw3_ld(row, c0 + 8, mk, 1);
  const __m256 lo1 = dw3_ld(row, c0 + 1, mk, 2), hi1 = dw3_ld(row, c0 + 9, mk, 3);
  const __m256 v[3] = {_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)),
                       _mm256_shuffle_ps(lo1, hi1, _MM_SHUFFLE(3, 1, 3, 1))};
  for (int kx = 0; kx < 3; ++kx)
    t[kx] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v[kx]), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Output rows [oy0, oy1), 16 outputs per step (the last step moved back to end at the row's
 * end; rows under 16 outputs stored masked): the 9c window values of the step's outputs
 * gathered once into tv (masked loads only in the steps whose columns leave the image,
 * window rows outside it as zeros), then four output planes at a time, each weight
 * broadcast once for both halves. */
ERT_AVX2 void ert_conv2d_3x3s2_f32__avx2(float *y, const float *x, const float *wt, const float *bias,
                                    const ert_conv3s2_geom *g, int32_t oy0, int32_t oy1) {
  const int32_t c = g->c, h = g->h, w = g->w, m = g->m, ow = g->ow, taps = 9 * c;
  const size_t plane = (size_t)h * (size_t)w, oplane = (size_t)g->oh * (size_t)ow;
  const __m256 lo = _mm256_set1_ps(g->lo), hi = _mm256_set1_ps(g->hi);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 tv[36][2];
  for (int32_t oy = oy0; oy < oy1; ++oy) {
    for (int32_t s = 0; s < ow; s += 16) {
      if (s + 16 > ow && ow >= 16) s = ow - 16;
      const int32_t c00 = 2 * s - g->pl;
      const int edge = ow < 16 || c00 < 0 || c00 + 16 + 16 >= w;
      __m256i mk[2][4];
      if (edge)
        for (int hh = 0; hh < 2; ++hh) {
          static const int32_t off[4] = {0, 8, 1, 9};
          for (int o = 0; o < 4; ++o) mk[hh][o] = cols_in(c00 + 16 * hh + off[o], w);
        }
      for (int32_t i = 0; i < c; ++i)
        for (int ky = 0; ky < 3; ++ky) {
          const int32_t iy = oy * 2 - g->pt + ky, t = (i * 3 + ky) * 3;
          if (iy < 0 || iy >= h) {
            for (int kx = 0; kx < 3; ++kx) tv[t + kx][0] = tv[t + kx][1] = _mm256_setzero_ps();
            continue;
          }
          const float *row = x + (size_t)i * plane + (size_t)iy * (size_t)w;
          for (int hh = 0; hh < 2; ++hh) {
            __m256 v[3];
            s2_taps3(row, c00 + 16 * hh, edge ? mk[hh] : NULL, v);
            for (int kx = 0; kx < 3; ++kx) tv[t + kx][hh] = v[kx];
          }
        }
      __m256i sm[2]; /* stored lanes, rows under 16 outputs */
      for (int hh = 0; hh < 2; ++hh) sm[hh] = _mm256_cmpgt_epi32(_mm256_set1_epi32(ow - s - 8 * hh), lane);
      for (int32_t o0 = 0; o0 < m; o0 += 4) {
        const float *wr[4];
        __m256 acc[4][2];
        for (int q = 0; q < 4; ++q) {
          const int32_t o = o0 + q < m ? o0 + q : m - 1; /* past m: repeats, not stored */
          wr[q] = wt + (size_t)o * (size_t)taps;
          acc[q][0] = acc[q][1] = _mm256_set1_ps(bias ? bias[o] : 0.0f);
        }
        for (int32_t t = 0; t < taps; ++t)
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            const __m256 wq = _mm256_broadcast_ss(wr[q] + t);
            acc[q][0] = _mm256_fmadd_ps(wq, tv[t][0], acc[q][0]);
            acc[q][1] = _mm256_fmadd_ps(wq, tv[t][1], acc[q][1]);
          }
        for (int q = 0; q < 4 && o0 + q < m; ++q) {
          float *yo = y + (size_t)(o0 + q) * oplane + (size_t)oy * (size_t)ow + s;
          for (int hh = 0; hh < 2 && s + 8 * hh < ow; ++hh) {
            const __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, acc[q][hh])); /* NaN stays */
            if (ow < 16)
              _mm256_maskstore_ps(yo + 8 * hh, sm[hh], v);
            else
              _mm256_storeu_ps(yo + 8 * hh, v);
          }
        }
      }
    }
  }
}

#define DW_PLANE(NAME, K, S)                                                                  \
  ERT_AVX2 void NAME(float *y, int32_t oh, int32_t ow, const float *x, ptrdiff_t rs,         \
                     ptrdiff_t ts, const float *w, float bias) {                             \
    dw_plane(y, oh, ow, x, rs, ts, w, bias, K, S);                                           \
  }

DW_PLANE(ert_conv2d_dw3s1_f32__avx2, 3, 1)
DW_PLANE(ert_conv2d_dw3s2_f32__avx2, 3, 2)
DW_PLANE(ert_conv2d_dw5s1_f32__avx2, 5, 1)
DW_PLANE(ert_conv2d_dw5s2_f32__avx2, 5, 2)

#endif
