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
#include "avx512_f32.h"
#include "cpu.h"

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
