/* sgemm.c (AVX2): the 4x16, 6x16 and 6x8 SGEMM micro-kernels, contract in src/cpu.h
 * (sgemm_rows, sgemm_rows6, sgemm_rows6_n8, and sgemm_rows_ld, sgemm_rows6_ld for B's
 * rows in place; the reference is micro_rows and store_tile in ref/sgemm.c):
 * A read from row pointers, B from a packed panel of 16 columns, the result stored into
 * C with bias, alpha and the clamp-like activations. */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include "x86_avx2.h"

/* Row i's tile row as two vectors (columns 0..7, 8..15): C = act(alpha*acc + base),
 * base the bias (init) or C itself. */
ERT_AVX2_INLINE void put_row(float *p, __m256 lo, __m256 hi, const ert_sgemm_store *st,
                             const ert_act8 *act, __m256 alpha, int i) {
  __m256 b0, b1;
  if (st->init) {
    b0 = b1 = _mm256_set1_ps(st->bias != NULL ? st->bias[i] : 0.0f);
  } else {
    b0 = _mm256_loadu_ps(p);
    b1 = _mm256_loadu_ps(p + 8);
  }
  _mm256_storeu_ps(p, ert_act8_apply(act, _mm256_fmadd_ps(lo, alpha, b0)));
  _mm256_storeu_ps(p + 8, ert_act8_apply(act, _mm256_fmadd_ps(hi, alpha, b1)));
}

/* One k step of row i: both halves of its accumulators += A value * B row. */
#define ROW_STEP(i)                                        \
  do {                                                     \
    const __m256 a = _mm256_broadcast_ss(r##i + k);        \
    c##i##0 = _mm256_fmadd_ps(a, b0, c##i##0);             \
    c##i##1 = _mm256_fmadd_ps(a, b1, c##i##1);             \
  } while (0)

/* Row i's first 8 columns: C = act(alpha*acc + base). */
ERT_AVX2_INLINE void put_half(float *p, __m256 v, const ert_sgemm_store *st, const ert_act8 *act,
                              __m256 alpha, int i) {
  const __m256 base = st->init ? _mm256_set1_ps(st->bias != NULL ? st->bias[i] : 0.0f)
                               : _mm256_loadu_ps(p);
  _mm256_storeu_ps(p, ert_act8_apply(act, _mm256_fmadd_ps(v, alpha, base)));
}

#define HALF_STEP(i) c##i = _mm256_fmadd_ps(_mm256_broadcast_ss(r##i + k), b0, c##i)

/* The tile's accumulators stay in registers: 8 (4 rows) or 12 (6 rows) of the 16 ymm,
 * plus the two halves of B's row and the broadcast A value. */
ERT_AVX2_INLINE void rows4(int32_t kc, const float *const *rows, const float *b, ptrdiff_t ldb,
                           float *c, const ert_sgemm_store *st) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
  __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  for (int32_t k = 0; k < kc; ++k, b += ldb) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    ROW_STEP(0);
    ROW_STEP(1);
    ROW_STEP(2);
    ROW_STEP(3);
  }
  const ert_act8 act = ert_act8_of(st->act);
  const __m256 alpha = _mm256_set1_ps(st->alpha);
  const ptrdiff_t ldc = st->ldc;
  put_row(c, c00, c01, st, &act, alpha, 0);
  put_row(c + ldc, c10, c11, st, &act, alpha, 1);
  put_row(c + 2 * ldc, c20, c21, st, &act, alpha, 2);
  put_row(c + 3 * ldc, c30, c31, st, &act, alpha, 3);
}

ERT_AVX2_INLINE void rows6(int32_t kc, const float *const *rows, const float *b, ptrdiff_t ldb,
                           float *c, const ert_sgemm_store *st) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3], *r4 = rows[4];
  const float *r5 = rows[5];
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int32_t k = 0; k < kc; ++k, b += ldb) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    ROW_STEP(0);
    ROW_STEP(1);
    ROW_STEP(2);
    ROW_STEP(3);
    ROW_STEP(4);
    ROW_STEP(5);
  }
  const ert_act8 act = ert_act8_of(st->act);
  const __m256 alpha = _mm256_set1_ps(st->alpha);
  const ptrdiff_t ldc = st->ldc;
  put_row(c, c00, c01, st, &act, alpha, 0);
  put_row(c + ldc, c10, c11, st, &act, alpha, 1);
  put_row(c + 2 * ldc, c20, c21, st, &act, alpha, 2);
  put_row(c + 3 * ldc, c30, c31, st, &act, alpha, 3);
  put_row(c + 4 * ldc, c40, c41, st, &act, alpha, 4);
  put_row(c + 5 * ldc, c50, c51, st, &act, alpha, 5);
}

/* The entries: B a packed panel (16 floats per k), or B's rows in place (ldb apart). */
ERT_AVX2 void ert_sgemm_rows_f32__avx2(int32_t kc, const float *const *rows, const float *b,
                                       float *c, const ert_sgemm_store *st) {
  rows4(kc, rows, b, 16, c, st);
}

ERT_AVX2 void ert_sgemm_rows6_f32__avx2(int32_t kc, const float *const *rows, const float *b,
                                        float *c, const ert_sgemm_store *st) {
  rows6(kc, rows, b, 16, c, st);
}

ERT_AVX2 void ert_sgemm_rows_ld_f32__avx2(int32_t kc, const float *const *rows, const float *b,
                                          ptrdiff_t ldb, float *c, const ert_sgemm_store *st) {
  rows4(kc, rows, b, ldb, c, st);
}

ERT_AVX2 void ert_sgemm_rows6_ld_f32__avx2(int32_t kc, const float *const *rows, const float *b,
                                           ptrdiff_t ldb, float *c, const ert_sgemm_store *st) {
  rows6(kc, rows, b, ldb, c, st);
}

/* Six rows, the panel's first 8 columns: six accumulators. */
ERT_AVX2 void ert_sgemm_rows6_n8_f32__avx2(int32_t kc, const float *const *rows, const float *b,
                                           float *c, const ert_sgemm_store *st) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3], *r4 = rows[4];
  const float *r5 = rows[5];
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  for (int32_t k = 0; k < kc; ++k, b += 16) {
    const __m256 b0 = _mm256_loadu_ps(b);
    HALF_STEP(0);
    HALF_STEP(1);
    HALF_STEP(2);
    HALF_STEP(3);
    HALF_STEP(4);
    HALF_STEP(5);
  }
  const ert_act8 act = ert_act8_of(st->act);
  const __m256 alpha = _mm256_set1_ps(st->alpha);
  const ptrdiff_t ldc = st->ldc;
  put_half(c, c0, st, &act, alpha, 0);
  put_half(c + ldc, c1, st, &act, alpha, 1);
  put_half(c + 2 * ldc, c2, st, &act, alpha, 2);
  put_half(c + 3 * ldc, c3, st, &act, alpha, 3);
  put_half(c + 4 * ldc, c4, st, &act, alpha, 4);
  put_half(c + 5 * ldc, c5, st, &act, alpha, 5);
}

/* dot_rows: four rows at a time, two accumulators of 8 lanes each (x loaded once for the
 * four; 16 k per step, then 8), the k % 8 tail by masked loads (nothing is read past x's
 * or a row's k values), then one horizontal reduction for the four sums. */
static const int32_t tail_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

ERT_AVX2 void ert_dot_rows_f32__avx2(const float *x, const float *r, ptrdiff_t ld, int32_t k,
                                     int32_t n, float *out) {
  const int32_t k8 = k & ~7, rem = k - k8;
  const __m256i m = _mm256_loadu_si256((const __m256i *)(const void *)(tail_mask + 8 - rem));
  const __m256 xt = _mm256_maskload_ps(x + k8, m);
  int32_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *r0 = r + (ptrdiff_t)j * ld, *r1 = r0 + ld, *r2 = r1 + ld, *r3 = r2 + ld;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int32_t i = 0;
    for (; i + 16 <= k8; i += 16) {
      const __m256 xv = _mm256_loadu_ps(x + i), xw = _mm256_loadu_ps(x + i + 8);
      a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r0 + i), a0);
      a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r1 + i), a1);
      a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r2 + i), a2);
      a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r3 + i), a3);
      b0 = _mm256_fmadd_ps(xw, _mm256_loadu_ps(r0 + i + 8), b0);
      b1 = _mm256_fmadd_ps(xw, _mm256_loadu_ps(r1 + i + 8), b1);
      b2 = _mm256_fmadd_ps(xw, _mm256_loadu_ps(r2 + i + 8), b2);
      b3 = _mm256_fmadd_ps(xw, _mm256_loadu_ps(r3 + i + 8), b3);
    }
    for (; i < k8; i += 8) {
      const __m256 xv = _mm256_loadu_ps(x + i);
      a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r0 + i), a0);
      a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r1 + i), a1);
      a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r2 + i), a2);
      a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r3 + i), a3);
    }
    if (rem != 0) {
      a0 = _mm256_fmadd_ps(xt, _mm256_maskload_ps(r0 + k8, m), a0);
      a1 = _mm256_fmadd_ps(xt, _mm256_maskload_ps(r1 + k8, m), a1);
      a2 = _mm256_fmadd_ps(xt, _mm256_maskload_ps(r2 + k8, m), a2);
      a3 = _mm256_fmadd_ps(xt, _mm256_maskload_ps(r3 + k8, m), a3);
    }
    a0 = _mm256_add_ps(a0, b0), a1 = _mm256_add_ps(a1, b1);
    a2 = _mm256_add_ps(a2, b2), a3 = _mm256_add_ps(a3, b3);
    /* lanes 0..3: the low halves' sums of rows 0..3, lanes 4..7 the high halves' */
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    _mm_storeu_ps(out + j, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
  for (; j < n; ++j) {
    const float *rj = r + (ptrdiff_t)j * ld;
    __m256 a = _mm256_setzero_ps();
    for (int32_t i = 0; i < k8; i += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(rj + i), a);
    if (rem != 0) a = _mm256_fmadd_ps(xt, _mm256_maskload_ps(rj + k8, m), a);
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    out[j] = _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
  }
}

#endif
