/* avx512_f32.h: the AVX-512F exp, sigmoid and tanh of 16 floats shared by act_avx512.c
 * and rnn_avx512.c (formulas: act_avx512.c's header comment). Include only from files
 * compiled under ERT_X86_KERNELS on x86-64 GCC-compatible compilers. */
#ifndef ERT_AVX512_F32_H_
#define ERT_AVX512_F32_H_

#include <immintrin.h>

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

#endif /* ERT_AVX512_F32_H_ */
