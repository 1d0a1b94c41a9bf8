/* quant_s8.h: the integer arithmetic of edgert's int8 ops and the entry points of
 * the int8 kernels that the float op files dispatch to.
 *
 * Specification: docs/quantization.md; numpy twin: edgert/converter/quant/fixedpoint.py. Every
 * implementation of an int8 op (portable, NEON, ...) must produce the same bytes.
 *
 * Requantization
 * --------------
 * A real multiplier is given by the converter as (mult, shift): mult an int32 in
 * [0, 2^31), shift in [1, 62], meaning mult * 2^-shift. An integer accumulator is
 * rescaled with one 64-bit product and one rounding shift (half up, toward +inf):
 *
 *     requant(acc, mult, shift) = floor((acc * mult + 2^(shift-1)) / 2^shift)
 *
 * Callers keep |acc| below 2^31 (prepare bounds the accumulators), so that the sum
 * stays inside int64. The result is then offset by the output zero point and clamped
 * to the output range [lo, hi] (a subrange of [-128, 127] when an activation such as
 * relu is folded into it).
 *
 * Per-channel table
 * -----------------
 * conv2d and gemm on int8 take a constant int32 input QP of shape [channels, 2]:
 * (bias, mult) per output channel, the bias in accumulator units (scale = input scale
 * * weight scale of the channel), and one shift for the layer (a parameter word).
 */
#ifndef EDGERT_QUANT_S8_H_
#define EDGERT_QUANT_S8_H_

#include "internal.h"

/* Placed before a loop whose iteration i reads inputs at i and writes the output at i
 * (in-place allowed): tells GCC there is no loop-carried dependence, so the loop is
 * vectorized even when the output is the input. */
#if defined(__GNUC__) && !defined(__clang__)
#define ERT_IVDEP _Pragma("GCC ivdep")
#else
#define ERT_IVDEP
#endif

/* Marks a hot int8 loop to be built twice on x86-64 with GCC and glibc, for AVX2 and the
 * baseline, the variant chosen at load time (the integer results are the same). Empty
 * elsewhere, or when ERT_NO_CLONES is defined. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    !defined(ERT_NO_CLONES)
#define ERT_S8_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ERT_S8_CLONES
#endif

#define ERT_Q_SHIFT_MIN 1
#define ERT_Q_SHIFT_MAX 62

/* floor(v / 2^s) for 0 <= s <= 62, without relying on the implementation-defined
 * right shift of negative values. */
static inline int64_t ert_floor_shift(int64_t v, int32_t s) {
  return v >= 0 ? (v >> s) : ~((~v) >> s);
}

static inline int64_t ert_requant(int64_t acc, int32_t mult, int32_t shift) {
  return ert_floor_shift(acc * (int64_t)mult + ((int64_t)1 << (shift - 1)), shift);
}

static inline int8_t ert_clamp_s8(int64_t v, int32_t lo, int32_t hi) {
  return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* True when (mult, shift) is a valid requantization pair. */
static inline bool ert_q_valid(int32_t mult, int32_t shift) {
  return mult >= 0 && shift >= ERT_Q_SHIFT_MIN && shift <= ERT_Q_SHIFT_MAX;
}

/* y[i] = clamp(zp + requant(acc[i], mult, shift), lo, hi) for i < n: one channel's
 * outputs (built for AVX2 and the baseline on x86-64 with GCC, chosen at load time). */
void ert_requant_row(const int32_t *acc, size_t n, int32_t mult, int32_t shift, int32_t zp,
                     int32_t lo, int32_t hi, int8_t *y);

/* Checks a per-channel table: constant int32 [channels, 2] with multipliers >= 0 and
 * |bias| <= max_bias, and the layer's shift. */
edgert_status ert_check_qp(const ert_node *node, ert_err *err, uint32_t index, int64_t channels,
                           int64_t max_bias, int32_t shift);
/* Checks an output range [lo, hi] inside [-128, 127] and a zero point inside it. */
edgert_status ert_check_qrange(const ert_node *node, ert_err *err, int32_t zp, int32_t lo,
                               int32_t hi);
/* Checks that t is int8 (when present). */
edgert_status ert_check_s8(const ert_node *node, ert_err *err, const ert_tensor *t,
                           const char *what);

/* ---- int8 forms of float ops (prepare validates; the __ref functions run) ---- */
edgert_status ert_conv2d_s8_prepare(ert_node *node, ert_err *err);
void ert_conv2d_s8__ref(const ert_node *node, ert_exec *ex);
edgert_status ert_gemm_s8_prepare(ert_node *node, ert_err *err);
void ert_gemm_s8__ref(const ert_node *node, ert_exec *ex);
edgert_status ert_add_s8_prepare(ert_node *node, ert_err *err);
void ert_add_s8__ref(const ert_node *node, ert_exec *ex);
edgert_status ert_mul_s8_prepare(ert_node *node, ert_err *err);
void ert_mul_s8__ref(const ert_node *node, ert_exec *ex);
/* kind: 0 max, 1 avg */
edgert_status ert_pool2d_s8_prepare(ert_node *node, ert_err *err, int kind);
void ert_pool2d_s8__ref(const ert_node *node, ert_exec *ex, int kind);
/* kind: 0 avg, 1 max */
edgert_status ert_global_pool_s8_prepare(ert_node *node, ert_err *err, int kind);
void ert_global_pool_s8__ref(const ert_node *node, ert_exec *ex, int kind);
edgert_status ert_concat_s8_prepare(ert_node *node, ert_err *err);
void ert_concat_s8__ref(const ert_node *node, ert_exec *ex);
/* Table lookup y = table[x + 128] (int8 -> int8): every unary op on int8 with a
 * second input, the constant 256-entry table. */
edgert_status ert_lut_s8_prepare(ert_node *node, ert_err *err);
void ert_lut_s8__ref(const ert_node *node, ert_exec *ex);
edgert_status ert_softmax_s8_prepare(ert_node *node, ert_err *err);
void ert_softmax_s8__ref(const ert_node *node, ert_exec *ex);

#endif /* EDGERT_QUANT_S8_H_ */
