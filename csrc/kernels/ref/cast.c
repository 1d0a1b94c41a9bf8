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

/* float to integer: trunc toward zero, saturate, NaN -> 0. lo/hi are the target's range
 * as floats chosen so that every value at or above hi is saturated. */
static inline int64_t f2i(float v, float lo_f, float hi_f, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v <= lo_f) return lo;
  if (v >= hi_f) return hi;
  return (int64_t)v; /* in range: the conversion truncates */
}

/* Read one element as float (float types) or int64 (integer types and bool). */
#define LOAD_f32(p, i) ((float)((const float *)(p))[i])
#define LOAD_f16(p, i) half_to_float(((const uint16_t *)(p))[i])
#define LOAD_u8(p, i) ((int64_t)((const uint8_t *)(p))[i])
#define LOAD_i8(p, i) ((int64_t)((const int8_t *)(p))[i])
#define LOAD_i16(p, i) ((int64_t)((const int16_t *)(p))[i])
#define LOAD_i32(p, i) ((int64_t)((const int32_t *)(p))[i])
#define LOAD_i64(p, i) ((int64_t)((const int64_t *)(p))[i])
#define LOAD_b8(p, i) ((int64_t)(((const uint8_t *)(p))[i] != 0))

static inline int64_t wrap_i8(int64_t v) { return (int8_t)(uint8_t)(uint64_t)v; }
static inline int64_t wrap_i16(int64_t v) { return (int16_t)(uint16_t)(uint64_t)v; }
static inline int64_t wrap_i32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

/* Conversions of a loaded value (float or int64) to each target type. */
#define TO_f32(v) _Generic((v), float: (v), default: (float)(v))
#define TO_f16(v) float_to_half(TO_f32(v))
#define TO_b8(v) ((uint8_t)((v) != 0))
#define TO_u8(v) _Generic((v), float: (uint8_t)f2i_u8(v), default: (uint8_t)(uint64_t)(v))
#define TO_i8(v) _Generic((v), float: (int8_t)f2i_i8(v), default: (int8_t)wrap_i8(v))
#define TO_i16(v) _Generic((v), float: (int16_t)f2i_i16(v), default: (int16_t)wrap_i16(v))
#define TO_i32(v) _Generic((v), float: (int32_t)f2i_i32(v), default: (int32_t)wrap_i32(v))
#define TO_i64(v) _Generic((v), float: f2i_i64(v), default: (int64_t)(v))

/* Float bounds: the largest float below 2^31 is 2147483520, so hi_f = 2^31 catches
 * exactly the values that do not fit; likewise 2^63 for int64. */
static inline int64_t f2i_u8(float v) { return f2i(v, 0.0f, 255.0f, 0, 255); }
static inline int64_t f2i_i8(float v) { return f2i(v, -128.0f, 127.0f, -128, 127); }
static inline int64_t f2i_i16(float v) { return f2i(v, -32768.0f, 32767.0f, -32768, 32767); }
static inline int64_t f2i_i32(float v) {
  return f2i(v, -2147483648.0f, 2147483648.0f, INT32_MIN, INT32_MAX);
}
static inline int64_t f2i_i64(float v) {
  return f2i(v, -9223372036854775808.0f, 9223372036854775808.0f, INT64_MIN, INT64_MAX);
}

typedef struct cast_job {
  const void *x;
  void *y;
} cast_job;

typedef void (*cast_fn)(void *arg, size_t begin, size_t end);

/* One task per (source, target) pair. */
#define CAST_TASK(src, dst, DT)                                               \
  static void cast_##src##_##dst(void *arg, size_t begin, size_t end) {        \
    const cast_job *j = (const cast_job *)arg;                                 \
    DT *y = (DT *)j->y;                                                        \
    for (size_t i = begin; i < end; i++) y[i] = TO_##dst(LOAD_##src(j->x, i)); \
  }

#define CAST_FROM(src)              \
  CAST_TASK(src, f32, float)        \
  CAST_TASK(src, f16, uint16_t)     \
  CAST_TASK(src, u8, uint8_t)       \
  CAST_TASK(src, i8, int8_t)        \
  CAST_TASK(src, i16, int16_t)      \
  CAST_TASK(src, i32, int32_t)      \
  CAST_TASK(src, i64, int64_t)      \
  CAST_TASK(src, b8, uint8_t)

CAST_FROM(f32)
CAST_FROM(f16)
CAST_FROM(u8)
CAST_FROM(i8)
CAST_FROM(i16)
CAST_FROM(i32)
CAST_FROM(i64)
CAST_FROM(b8)

#define CAST_ROW(src)                                                                 \
  {cast_##src##_f32, cast_##src##_f16, cast_##src##_u8, cast_##src##_i8, cast_##src##_i16, \
   cast_##src##_i32, cast_##src##_i64, cast_##src##_b8}

enum { C_F32, C_F16, C_U8, C_I8, C_I16, C_I32, C_I64, C_BOOL, C_COUNT };

static const cast_fn cast_table[C_COUNT][C_COUNT] = {
    CAST_ROW(f32), CAST_ROW(f16), CAST_ROW(u8),  CAST_ROW(i8),
    CAST_ROW(i16), CAST_ROW(i32), CAST_ROW(i64), CAST_ROW(b8),
};

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
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "node '%s' (cast): target dtype %d is not supported",
                    nm, (int)to);
  if (cast_slot(x->dtype) < 0)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "node '%s' (cast): input dtype %s is not supported",
                    nm, ert_dtype_name(x->dtype));
  st = ert_check_dtype(node, err, y, to);
  if (st != EDGERT_OK) return st;
  st = ert_check_same_shape(node, err, x, y);
  if (st != EDGERT_OK) return st;
  node->opdata[0] = cast_slot(x->dtype);
  node->opdata[1] = cast_slot(to);
  return EDGERT_OK;
}

void ert_cast_eval(const ert_node *node, ert_exec *ex) {
  cast_job j = {node->in[0]->data, node->out[0]->data};
  const cast_fn fn = cast_table[node->opdata[0]][node->opdata[1]];
  const size_t n = node->out[0]->numel;
  if (n >= CAST_PAR_MIN)
    ert_parallel_for(ex, n, fn, &j);
  else if (n > 0)
    fn(&j, 0, n);
}
