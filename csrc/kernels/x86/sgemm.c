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

#endif
