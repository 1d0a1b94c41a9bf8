/* act_avx512.c (AVX-512F): act_apply's sigmoid, tanh and silu (x sigmoid(x)), contract in
 * src/cpu.h; the other kinds return 0 and the reference (src/common.c) runs them, which
 * the compiler vectorizes. The reference calls expf or tanhf per value, which made a
 * sigmoid over a 640x640 map cost more than the layer before it.
 *
 * The formulas are those of the NEON kernels (neon_f32.h): exp(x) for x <= 0 as 2^n times
 * a degree-7 polynomial of the remainder, sigmoid(x) = (x >= 0 ? 1 : e) / (1 + e) with
 * e = exp(-|x|), tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|) for |x| >= 1/4
 * and the Taylor series to x^9 below. NaN stays NaN (max and min return their second
 * operand when one is NaN, so it is always x's side), +-inf give the limits, the sign of
 * a zero is kept by tanh. Called only where src/cpu.c found AVX512F and the OS saving the
 * zmm and opmask state. */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "cpu.h"

#define ERT_AVX512 __attribute__((target("avx2,fma,avx512f")))
#define ERT_AVX512_INLINE static inline __attribute__((target("avx2,fma,avx512f"), always_inline))

/* exp(x) for x <= 0; 0 below -87.34 (where the result leaves the normal range). */
ERT_AVX512_INLINE __m512 exp_neg(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f), shift = _mm512_set1_ps(12582912.0f);
  const __m512 xc = _mm512_max_ps(lo, x);
  const __m512 nf = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504f), shift), shift);
  __m512 r = _mm512_fmadd_ps(nf, _mm512_set1_ps(-0.693145752f), xc);
  r = _mm512_fmadd_ps(nf, _mm512_set1_ps(-1.42860677e-6f), r);
  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 5040.0f), _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(nf), _mm512_set1_epi32(127)), 23);
  const __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
  return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), _mm512_setzero_ps());
}

ERT_AVX512_INLINE __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp_neg(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
  const __m512 num = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), one);
  return _mm512_div_ps(num, _mm512_add_ps(one, e));
}

ERT_AVX512_INLINE __m512 tanh16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f), a = _mm512_abs_ps(x);
  const __m512 e = exp_neg(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));
  const __m512 big = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512 a2 = _mm512_mul_ps(a, a);
  __m512 p = _mm512_fmadd_ps(a2, _mm512_set1_ps(62.0f / 2835.0f), _mm512_set1_ps(-17.0f / 315.0f));
  p = _mm512_fmadd_ps(p, a2, _mm512_set1_ps(2.0f / 15.0f));
  p = _mm512_fmadd_ps(p, a2, _mm512_set1_ps(-1.0f / 3.0f));
  p = _mm512_fmadd_ps(p, a2, one);
  const __m512 y = _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.25f), _CMP_LT_OQ),
                                      _mm512_mul_ps(a, p));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sign));
}

ERT_AVX512_INLINE __m512 exp_act16(const int kind, __m512 v) {
  if (kind == ERT_ACT_TANH) return tanh16(v);
  const __m512 s = sigmoid16(v);
  return kind == ERT_ACT_SILU ? _mm512_mul_ps(v, s) : s;
}

/* count floats, 16 at a time, the last count % 16 by masked loads and stores */
ERT_AVX512_INLINE void exp_act_run(const int kind, float *x, size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) _mm512_storeu_ps(x + i, exp_act16(kind, _mm512_loadu_ps(x + i)));
  if (i < count) {
    const __mmask16 m = (__mmask16)((1u << (count - i)) - 1u);
    _mm512_mask_storeu_ps(x + i, m, exp_act16(kind, _mm512_maskz_loadu_ps(m, x + i)));
  }
}

ERT_AVX512 int ert_act_apply_f32__avx512(const ert_act_params *act, float *x, size_t count) {
  switch (act->kind) {
    case ERT_ACT_SIGMOID:
      exp_act_run(ERT_ACT_SIGMOID, x, count);
      return 1;
    case ERT_ACT_TANH:
      exp_act_run(ERT_ACT_TANH, x, count);
      return 1;
    case ERT_ACT_SILU:
      exp_act_run(ERT_ACT_SILU, x, count);
      return 1;
    default:
      return 0;
  }
}

#endif
