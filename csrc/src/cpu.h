/* cpu.h: the hot micro-kernels, chosen once at start-up from the CPU's features.
 *
 * The reference kernels call these through ert_cpu; an entry left NULL means "use the
 * portable code in csrc/kernels/ref", which is always correct. On Linux ARM, NEON
 * entries are filled in when the build has them (ERT_NEON_KERNELS, set by
 * `make NEON=1`) and the kernel reports the feature (getauxval(AT_HWCAP)); setting the
 * environment variable EDGERT_FORCE_REF=1 before the library loads keeps them NULL.
 *
 * Contracts (each NEON kernel is tested against them by csrc/tests/kernel_test.c):
 *   sgemm_tile  tile[4][16] = sum over k < kc of a[k*4 + i] * b[k*16 + j]
 *               (a: packed A panel, b: packed B panel; see ref/sgemm.c). kc >= 1.
 *   sgemm_rows  tile[4][16] = sum over k < kc of rows[i][k] * b[k*16 + j]: the same with
 *               A read in place from four row pointers (which may repeat). kc >= 1.
 *   dwK_sS      y[i] = bias + sum over ky, kx < K of w[ky*K + kx] * rows[ky][i*S + kx*d]
 *               for i < n (K = 3 or 5, S = 1 or 2): the interior of one depthwise KxK
 *               output row; reads nothing outside the taps' span.
 *   act_apply   ert_act_apply(act, x, count) for the kinds it handles, returning 1;
 *               returns 0 (x untouched) for the others.
 * The f32 NEON kernels may differ from the reference by rounding only (fused or
 * reassociated multiply-adds); the tests bound that at 1e-5 relative to the operands'
 * magnitude. */
#ifndef ERT_CPU_H_
#define ERT_CPU_H_

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef void (*ert_sgemm_tile_fn)(int32_t kc, const float *a, const float *b, float *tile);
typedef void (*ert_sgemm_rows_fn)(int32_t kc, const float *const *rows, const float *b,
                                  float *tile);
typedef void (*ert_dw_row_fn)(float *y, const float *const *rows, const float *w, int32_t n,
                              int32_t d, float bias);

typedef int (*ert_act_fn)(const ert_act_params *act, float *x, size_t count);

typedef struct ert_kernels {
  const char *isa;             /* "ref", "neon" or "neon+dotprod": what was selected */
  ert_sgemm_tile_fn sgemm_tile;
  ert_sgemm_rows_fn sgemm_rows;
  ert_dw_row_fn dw3_s1, dw3_s2, dw5_s1, dw5_s2;
  ert_act_fn act_apply;
  /* int8 entries */
} ert_kernels;

/* Filled by a load-time constructor in cpu.c; read-only afterwards. */
extern ert_kernels ert_cpu;

/* Re-runs the selection (the kernel tests use it after changing EDGERT_FORCE_REF). */
void ert_cpu_select(void);

/* NEON kernels (csrc/kernels/neon), present when ERT_NEON_KERNELS is defined. */
void ert_sgemm_tile_f32__neon(int32_t kc, const float *a, const float *b, float *tile);
void ert_sgemm_rows_f32__neon(int32_t kc, const float *const *rows, const float *b, float *tile);
void ert_conv2d_dw3s1_f32__neon(float *y, const float *const *rows, const float *w, int32_t n,
                                int32_t d, float bias);
void ert_conv2d_dw3s2_f32__neon(float *y, const float *const *rows, const float *w, int32_t n,
                                int32_t d, float bias);
void ert_conv2d_dw5s1_f32__neon(float *y, const float *const *rows, const float *w, int32_t n,
                                int32_t d, float bias);
void ert_conv2d_dw5s2_f32__neon(float *y, const float *const *rows, const float *w, int32_t n,
                                int32_t d, float bias);
int ert_act_apply_f32__neon(const ert_act_params *act, float *x, size_t count);

#endif /* ERT_CPU_H_ */
