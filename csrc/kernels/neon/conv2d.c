/* conv2d.c (NEON): interiors of depthwise 3x3 and 5x5 output rows, contract in
 * src/cpu.h (the reference is DW_INTERIOR in ref/conv2d.c). */
#include <arm_neon.h>
#include <stddef.h>

#include "cpu.h"

#if defined(__aarch64__)
#define VMLA_N(acc, x, s) vfmaq_n_f32((acc), (x), (s))
#else
#define VMLA_N(acc, x, s) vmlaq_n_f32((acc), (x), (s))
#endif

/* Four outputs' inputs at p: stride 1 reads p[0..4), stride 2 de-interleaves p[0..8)
 * and keeps the even floats (so it reads one float past the last one it uses). */
#define LOAD_S1(p) vld1q_f32(p)
#define LOAD_S2(p) vld2q_f32(p).val[0]

/* The vector loops stop where the loads could pass the interior the caller
 * guarantees (last tap: rows[ky][(n-1)*S + (K-1)*d]): with stride 2 a 4-output step
 * starting at i reads up to 2*i + 7 + (K-1)*d, which needs i + 5 <= n. */
#define DW_ROW(NAME, K, S)                                                                    \
  void NAME(float *y, const float *const *rows, const float *w, int32_t n, int32_t d,       \
            float bias) {                                                                     \
    float wk[(K) * (K)];                                                                      \
    for (int t = 0; t < (K) * (K); ++t) wk[t] = w[t];                                         \
    const int32_t tail = (S) == 1 ? 0 : 1;                                                    \
    int32_t i = 0;                                                                            \
    for (; i + 8 + tail <= n; i += 8) {                                                       \
      float32x4_t a = vdupq_n_f32(bias), b = a;                                               \
      _Pragma("GCC unroll 5") for (int ky = 0; ky < (K); ++ky) {                              \
        const float *r = rows[ky] + (ptrdiff_t)i * (S);                                       \
        _Pragma("GCC unroll 5") for (int kx = 0; kx < (K); ++kx) {                            \
          a = VMLA_N(a, LOAD_S##S(r + kx * d), wk[ky * (K) + kx]);                            \
          b = VMLA_N(b, LOAD_S##S(r + 4 * (S) + kx * d), wk[ky * (K) + kx]);                  \
        }                                                                                     \
      }                                                                                       \
      vst1q_f32(y + i, a);                                                                    \
      vst1q_f32(y + i + 4, b);                                                                \
    }                                                                                         \
    for (; i + 4 + tail <= n; i += 4) {                                                       \
      float32x4_t a = vdupq_n_f32(bias);                                                      \
      _Pragma("GCC unroll 5") for (int ky = 0; ky < (K); ++ky) {                              \
        const float *r = rows[ky] + (ptrdiff_t)i * (S);                                       \
        _Pragma("GCC unroll 5") for (int kx = 0; kx < (K); ++kx)                              \
          a = VMLA_N(a, LOAD_S##S(r + kx * d), wk[ky * (K) + kx]);                            \
      }                                                                                       \
      vst1q_f32(y + i, a);                                                                    \
    }                                                                                         \
    for (; i < n; ++i) {                                                                      \
      float acc = bias;                                                                       \
      for (int ky = 0; ky < (K); ++ky)                                                        \
        for (int kx = 0; kx < (K); ++kx) acc += wk[ky * (K) + kx] * rows[ky][i * (S) + kx * d]; \
      y[i] = acc;                                                                             \
    }                                                                                         \
  }

DW_ROW(ert_conv2d_dw3s1_f32__neon, 3, 1)
DW_ROW(ert_conv2d_dw3s2_f32__neon, 3, 2)
DW_ROW(ert_conv2d_dw5s1_f32__neon, 5, 1)
DW_ROW(ert_conv2d_dw5s2_f32__neon, 5, 2)
