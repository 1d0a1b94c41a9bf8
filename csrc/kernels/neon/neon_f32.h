/* neon_f32.h: helpers shared by the float32 NEON kernels (internal to kernels/neon). */
#ifndef ERT_NEON_F32_H_
#define ERT_NEON_F32_H_

#include <arm_neon.h>

#include "cpu.h"

#if defined(__aarch64__)
#define ERT_VMLA(acc, x, y) vfmaq_f32((acc), (x), (y))
#define ERT_VMLA_N(acc, x, s) vfmaq_n_f32((acc), (x), (s))
#else
#define ERT_VMLA(acc, x, y) vmlaq_f32((acc), (x), (y))
#define ERT_VMLA_N(acc, x, s) vmlaq_n_f32((acc), (x), (s))
#endif

/* The activation act over `rows` rows of n floats at x, ld floats apart, as
 * ert_act_apply does it, for relu, clip, hard_sigmoid, hard_swish and leaky_relu
 * (returns 1); returns 0 with x untouched for the other kinds. */
int ert_act_rows_f32__neon(const ert_act_params *act, float *x, ptrdiff_t ld, int32_t rows,
                           size_t n);

#endif /* ERT_NEON_F32_H_ */
