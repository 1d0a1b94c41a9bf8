/* cast.c: element type conversion between float32, float16, uint8, int8, int16, int32,
 * int64 and bool (portable reference kernel).
 *
 * Semantics (ONNX Cast, with out-of-range cases made definite):
 *   float -> integer  truncates toward zero, then saturates to the target's range;
 *                     NaN becomes 0
 *   integer -> integer keeps the low bits (two's complement wrap)
 *   any -> bool       nonzero (NaN included) is true
 *   bool -> any       0 or 1
 *   -> float16        rounds to nearest even; overflow gives infinity
 *   integer -> float32 rounds to nearest even
 * Parameter word 0 is the target dtype code, which must equal the output's dtype.
 */
#include <math.h>
#include <string.h>

#include "exec.h"
#include "internal.h"

#define CAST_PAR_MIN ((size_t)1 << 16)

/* ---- float16 ------------------------------------------------------------------ */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1Fu) return bits_f32(sign | 0x7F800000u | (mant << 13)); /* inf, NaN */
  if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  /* zero or subnormal: mant * 2^-24, exact in float32 */
  const float v = (float)mant * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

static inline uint16_t float_to_half(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) /* inf or NaN (kept quiet) */
    return (uint16_t)(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u | ((abs >> 13) & 0x3FFu) : 0u));
  if (abs >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds past 65504 */
  if (abs < 0x38800000u) {
    /* below the smallest normal half (2^-14): a multiple of 2^-24, rounded to even */
    const float a = bits_f32(abs) * 16777216.0f; /* exact scaling by 2^24 */
    float r = floorf(a);
    const float d = a - r;
    if (d > 0.5f || (d == 0.5f && fmodf(r, 2.0f) != 0.0f)) r += 1.0f;
    return (uint16_t)(sign | (uint16_t)r); /* r == 1024 is the smallest normal */
  }
  /* normal: drop 13 mantissa bits with round to nearest even */
  uint32_t m = abs + 0xFFFu + ((abs >> 13) & 1u);
  return (uint16_t)(sign | (uint16_t)((m - 0x38000000u) >> 13));
}

/* ---- element conversions ----------------------------------------------------- */

enum { C_F32, C_F16, C_U8, C_I8, C_I16, C_I32, C_I64, C_BOOL, C_COUNT };

/* Integer targets' ranges (C_U8..C_I64), with float bounds chosen so that every value
 * at or above hi_f saturates: the largest float below 2^31 is 2147483520, so hi_f =
 * 2^31 catches exactly the values that do not fit; likewise 2^63 for int64. */
static const float int_lo_f[C_COUNT] = {0, 0, 0.0f, -128.0f, -32768.0f, -2147483648.0f,
                                        -9223372036854775808.0f, 0};
static const float int_hi_f[C_COUNT] = {0, 0, 255.0f, 127.0f, 32767.0f, 2147483648.0f,
                                        9223372036854775808.0f, 0};
static const int64_t int_lo[C_COUNT] = {0, 0, 0, -128, -32768, INT32_MIN, INT64_MIN, 0};
static const int64_t int_hi[C_COUNT] = {0, 0, 255, 127, 32767, INT32_MAX, INT64_MAX, 0};

typedef struct cast_job {
  const void *x;
  void *y;
  int src, dst; /* C_* */
} cast_job;

/* Each element is read as a float (float types) or an int64 (integers and bool, which
 * reads as 0 or 1), then converted to the target. */
static void cast_task(void *arg, size_t begin, size_t end) {
  const cast_job *j = (const cast_job *)arg;
  const int src = j->src, dst = j->dst;
  const bool from_float = src <= C_F16;
  for (size_t i = begin; i < end; i++) {
    float f = 0.0f;
    int64_t v = 0;
    switch (src) {
      case C_F32: f = ((const float *)j->x)[i]; break;
      case C_F16: f = half_to_float(((const uint16_t *)j->x)[i]); break;
      case C_U8: v = ((const uint8_t *)j->x)[i]; break;
      case C_I8: v = ((const int8_t *)j->x)[i]; break;
      case C_I16: v = ((const int16_t *)j->x)[i]; break;
      case C_I32: v = ((const int32_t *)j->x)[i]; break;
      case C_I64: v = ((const int64_t *)j->x)[i]; break;
      default: v = ((const uint8_t *)j->x)[i] != 0; break;
    }
    if (dst <= C_F16 && !from_float) f = (float)v; /* rounds to nearest even */
    if (dst == C_BOOL) {
      ((uint8_t *)j->y)[i] = from_float ? f != 0.0f : v != 0;
      continue;
    }
    if (dst > C_F16 && from_float)
      v = f != f ? 0 : (f <= int_lo_f[dst] ? int_lo[dst] : (f >= int_hi_f[dst] ? int_hi[dst] : (int64_t)f));
    /* integer targets keep the low bits (two's complement wrap) */
    const uint64_t u = (uint64_t)v;
    switch (dst) {
      case C_F32: ((float *)j->y)[i] = f; break;
      case C_F16: ((uint16_t *)j->y)[i] = float_to_half(f); break;
      case C_U8:
      case C_I8: ((uint8_t *)j->y)[i] = (uint8_t)u; break;
      case C_I16: ((uint16_t *)j->y)[i] = (uint16_t)u; break;
      case C_I32: ((uint32_t *)j->y)[i] = (uint32_t)u; break;
      default: ((uint64_t *)j->y)[i] = u; break;
    }
  }
}

static int cast_slot(int32_t dtype) {
  switch (dtype) {
    case EDGERT_FLOAT32: return C_F32;
    case EDGERT_FLOAT16: return C_F16;
    case EDGERT_UINT8: return C_U8;
    case EDGERT_INT8: return C_I8;
    case EDGERT_INT16: return C_I16;
    case EDGERT_INT32: return C_I32;
    case EDGERT_INT64: return C_I64;
    case EDGERT_BOOL: return C_BOOL;
    default: return -1;
  }
}

edgert_status ert_cast_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK) return st;
  st = ert_check_params(node, err, 1);
  if (st != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  const int32_t to = ert_pi(node, 0);
  const char *nm = node->name ? node->name : "";
  if (cast_slot(to) < 0)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nm, " (cast): target dtype %d is not supported",
                         (int)to);
  if (cast_slot(x->dtype) < 0)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nm, " (cast): input dtype %s is not supported",
                         ert_dtype_name(x->dtype));
  st = ert_check_dtype(node, err, y, to);
  if (st != EDGERT_OK) return st;
  st = ert_check_same_shape(node, err, x, y);
  if (st != EDGERT_OK) return st;
  node->opdata[0] = cast_slot(x->dtype);
  node->opdata[1] = cast_slot(to);
  return EDGERT_OK;
}

void ert_cast_eval(const ert_node *node, ert_exec *ex) {
  cast_job j = {node->in[0]->data, node->out[0]->data, (int)node->opdata[0],
                (int)node->opdata[1]};
  const size_t n = node->out[0]->numel;
  if (n >= CAST_PAR_MIN)
    ert_parallel_for(ex, n, cast_task, &j);
  else if (n > 0)
    cast_task(&j, 0, n);
}

ERT_SHAPE_AS(cast, ert_shape_same)
