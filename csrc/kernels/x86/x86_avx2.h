/* x86_avx2.h: what the AVX2 kernels share (internal to kernels/x86).
 *
 * The library is built for the x86-64 baseline (SSE2); these kernels are compiled for
 * AVX2 + FMA one function at a time (ERT_AVX2, a target attribute), so the object files
 * still run on any x86-64 CPU: src/cpu.c calls them only once CPUID says the CPU and OS
 * support AVX2 and FMA. Every function of these files, static helpers included, carries
 * ERT_AVX2 (a baseline function may not inline one that uses AVX2). */
#ifndef ERT_X86_AVX2_H_
#define ERT_X86_AVX2_H_

#include <immintrin.h>

#include "cpu.h"

#define ERT_AVX2 __attribute__((target("avx2,fma")))
#define ERT_AVX2_INLINE static inline __attribute__((target("avx2,fma"), always_inline))

/* The clamp-like activations of the SGEMM store, in registers, each as the reference's
 * formula (ref/sgemm.c finish_row) with the same NaN behaviour: max_ps/min_ps return
 * their second operand when one is NaN, so the operand order follows the reference's
 * comparisons (relu: x > 0 ? x : 0 gives 0 for NaN; clip keeps NaN). hard_swish divides
 * by 6 as the reference does. */
typedef struct ert_act8 {
  int kind;
  __m256 a, b;
} ert_act8;

ERT_AVX2_INLINE ert_act8 ert_act8_of(const ert_act_params *act) {
  ert_act8 r;
  r.kind = act != NULL ? (int)act->kind : ERT_ACT_NONE;
  r.a = _mm256_set1_ps(act != NULL ? act->a : 0.0f);
  r.b = _mm256_set1_ps(act != NULL ? act->b : 0.0f);
  return r;
}

ERT_AVX2_INLINE __m256 ert_act8_apply(const ert_act8 *act, __m256 v) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  switch (act->kind) {
    case ERT_ACT_RELU: /* v > 0 ? v : 0 */
      return _mm256_max_ps(v, zero);
    case ERT_ACT_CLIP: /* t = v < a ? a : v; t > b ? b : t */
      return _mm256_min_ps(act->b, _mm256_max_ps(act->a, v));
    case ERT_ACT_HARD_SIGMOID: { /* t = a v + b; t < 0 ? 0 : t; then > 1 ? 1 */
      const __m256 t = _mm256_fmadd_ps(act->a, v, act->b);
      return _mm256_min_ps(one, _mm256_max_ps(zero, t));
    }
    case ERT_ACT_HARD_SWISH: {
      const __m256 t = _mm256_add_ps(_mm256_div_ps(v, _mm256_set1_ps(6.0f)), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(v, _mm256_min_ps(one, _mm256_max_ps(zero, t)));
    }
    case ERT_ACT_LEAKY_RELU: /* v < 0 ? a v : v */
      return _mm256_blendv_ps(v, _mm256_mul_ps(act->a, v), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    default:
      return v;
  }
}

#endif /* ERT_X86_AVX2_H_ */
