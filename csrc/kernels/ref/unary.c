/* unary.c: element-wise unary ops (portable reference kernels).
 *
 * Every op maps each element of its single input to one element of its output, of the
 * same shape. Parameter words are documented in edgert/converter/ops/unary.py. All ops except
 * isnan, isinf and copy are in-place capable: each output element is written after
 * the input element at the same index is read, so out->data may equal in[0]->data.
 *
 * float32 math uses the float C functions (expf, tanhf, erff, ...); sigmoid, tanh and
 * silu go through the optimized ert_cpu.act_apply when it takes them (cpu.h). The f32 ops are
 * listed once in UNARY_F32_OPS below and share one task (a loop per op);
 * integer abs, neg, sign and clip share one task over int64 values.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "exec.h"
#include "internal.h"
#include "quant_s8.h"

/* Elements below which work is not split over the session's threads. */
#define UNARY_PAR_MIN ((size_t)1 << 15)

typedef struct unary_job {
  const void *x;
  void *y;
  float a, b;    /* float parameter words 0 and 1 (0 when absent) */
  int32_t k, k2; /* the same words read as ints */
  int64_t lo, hi; /* integer clip bounds, already clamped to the dtype's range */
  int op;         /* U_* */
  int32_t dtype;  /* of the input, for the integer tasks */
} unary_job;

static void run_job(ert_exec *ex, size_t n, ert_task_fn fn, unary_job *job) {
  if (n >= UNARY_PAR_MIN)
    ert_parallel_for(ex, n, fn, job);
  else if (n > 0)
    fn(job, 0, n);
}

static unary_job job_of(const ert_node *node) {
  unary_job j;
  memset(&j, 0, sizeof j);
  j.x = node->in[0]->data;
  j.y = node->out[0]->data;
  if (node->n_params > 0) {
    j.a = ert_pf(node, 0);
    j.k = ert_pi(node, 0);
  }
  if (node->n_params > 1) {
    j.b = ert_pf(node, 1);
    j.k2 = ert_pi(node, 1);
  }
  return j;
}

/* Checks one input, one output, the same shape, the input dtype against `dtypes`
 * (a 0-terminated list), the output dtype (out_dtype, or the input's when 0) and at
 * least n_params parameter words. */
static edgert_status check_unary(ert_node *node, ert_err *err, const int32_t *dtypes,
                                 int32_t out_dtype, uint32_t n_params) {
  edgert_status st = ert_check_arity(node, err, 1, 1, 1, 1);
  if (st != EDGERT_OK) return st;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  bool ok = false;
  for (const int32_t *d = dtypes; *d != 0; d++) ok = ok || x->dtype == *d;
  if (!ok)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, node->name ? node->name : "",
                         ": input dtype %s is not supported", ert_dtype_name(x->dtype));
  st = ert_check_dtype(node, err, y, out_dtype != 0 ? out_dtype : x->dtype);
  if (st != EDGERT_OK) return st;
  st = ert_check_same_shape(node, err, x, y);
  if (st != EDGERT_OK) return st;
  return ert_check_params(node, err, n_params);
}

static const int32_t F32_ONLY[] = {EDGERT_FLOAT32, 0};
static const int32_t SIGNED_NUMERIC[] = {EDGERT_FLOAT32, EDGERT_INT8, EDGERT_INT16,
                                         EDGERT_INT32, EDGERT_INT64, 0};
static const int32_t CLIP_TYPES[] = {EDGERT_FLOAT32, EDGERT_UINT8, EDGERT_INT8, EDGERT_INT16,
                                     EDGERT_INT32, EDGERT_INT64, 0};
static const int32_t F32_F16[] = {EDGERT_FLOAT32, EDGERT_FLOAT16, 0};
static const int32_t BOOL_ONLY[] = {EDGERT_BOOL, 0};
static const int32_t ANY_TYPE[] = {EDGERT_FLOAT32, EDGERT_UINT8, EDGERT_INT8, EDGERT_INT16,
                                   EDGERT_INT32, EDGERT_INT64, EDGERT_BOOL, EDGERT_FLOAT16, 0};

/* ---- float helpers ------------------------------------------------------- */

static inline float sigmoid_f(float v) {
  if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
  const float e = expf(v);
  return e / (1.0f + e);
}

/* log(1 + exp(v)) without overflow for large v. */
static inline float softplus_f(float v) {
  return v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v));
}

/* Round half to even, independent of the floating-point rounding mode. */
static inline float round_even_f(float v) {
  if (!(fabsf(v) < 8388608.0f)) return v; /* already integral, inf or NaN */
  float r = floorf(v);
  const float d = v - r;
  if (d > 0.5f || (d == 0.5f && fmodf(r, 2.0f) != 0.0f)) r += 1.0f;
  return r;
}

static inline float gelu_f(float v, int32_t approximate) {
  if (approximate) {
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
  }
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

static inline float clampf01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }

/* ---- float32 ops ------------------------------------------------------------- */

/* X(name, parameter words, expression of v (the element), a, b (float words 0, 1) and
 * k (word 0 as int)). abs, neg and sign also take signed integers, clip integers too
 * (further below). */
#define UNARY_F32_OPS(X)                                                        \
  X(relu, 0, v < 0.0f ? 0.0f : v)                                               \
  X(leaky_relu, 1, v < 0.0f ? a * v : v)                                        \
  X(hard_sigmoid, 2, clampf01(a * v + b))                                       \
  X(hard_swish, 0, v * clampf01(v * (1.0f / 6.0f) + 0.5f))                      \
  X(sigmoid, 0, sigmoid_f(v))                                                   \
  X(tanh, 0, tanhf(v))                                                          \
  X(exp, 0, expf(v))                                                            \
  X(log, 0, logf(v))                                                            \
  X(sqrt, 0, sqrtf(v))                                                          \
  X(reciprocal, 0, 1.0f / v)                                                    \
  X(floor, 0, floorf(v))                                                        \
  X(ceil, 0, ceilf(v))                                                          \
  X(round, 0, round_even_f(v))                                                  \
  X(erf, 0, erff(v))                                                            \
  X(sin, 0, sinf(v))                                                            \
  X(cos, 0, cosf(v))                                                            \
  X(tan, 0, tanf(v))                                                            \
  X(asin, 0, asinf(v))                                                          \
  X(acos, 0, acosf(v))                                                          \
  X(atan, 0, atanf(v))                                                          \
  X(sinh, 0, sinhf(v))                                                          \
  X(cosh, 0, coshf(v))                                                          \
  X(asinh, 0, asinhf(v))                                                        \
  X(acosh, 0, acoshf(v))                                                        \
  X(atanh, 0, atanhf(v))                                                        \
  X(softplus, 0, softplus_f(v))                                                 \
  X(softsign, 0, v / (1.0f + fabsf(v)))                                         \
  X(elu, 1, v < 0.0f ? a * expm1f(v) : v)                                       \
  X(selu, 2, v > 0.0f ? b * v : b * a * expm1f(v))                              \
  X(celu, 1, v > 0.0f ? v : a * expm1f(v / a))                                  \
  X(thresholded_relu, 1, v > a ? v : 0.0f)                                      \
  X(gelu, 1, gelu_f(v, k))                                                      \
  X(silu, 0, v * sigmoid_f(v))                                                  \
  X(mish, 0, v * tanhf(softplus_f(v)))                                          \
  X(shrink, 2, v < -a ? v + b : (v > a ? v - b : 0.0f))                         \
  X(abs, 0, fabsf(v))                                                           \
  X(neg, 0, -v)                                                                 \
  X(sign, 0, v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v))

#define U_ENUM(name, nparams, expr) U_##name,
enum { UNARY_F32_OPS(U_ENUM) U_COUNT };
#undef U_ENUM

static const uint8_t f32_nparams[U_COUNT] = {
#define U_NPARAMS(name, nparams, expr) nparams,
    UNARY_F32_OPS(U_NPARAMS)
#undef U_NPARAMS
};

/* One loop per op (a switch per element would cost more than the cheap ops). */
static void f32_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  const float *x = (const float *)j->x;
  float *y = (float *)j->y;
  const float a = j->a, b = j->b;
  const int32_t k = j->k;
  (void)k;
  /* sigmoid, tanh, silu: the optimized activation hook when it takes the kind (cpu.h) */
  if ((j->op == U_sigmoid || j->op == U_tanh || j->op == U_silu) && ert_cpu.act_apply != NULL) {
    const ert_act_params act = {j->op == U_sigmoid ? ERT_ACT_SIGMOID
                                : j->op == U_tanh  ? ERT_ACT_TANH
                                                   : ERT_ACT_SILU, 0.0f, 0.0f};
    if (y != x) memcpy(y + begin, x + begin, (end - begin) * sizeof(float));
    if (ert_cpu.act_apply(&act, y + begin, end - begin)) return;
  }
  switch (j->op) {
#define U_LOOP(name, nparams, expr)           \
  case U_##name:                              \
    for (size_t i = begin; i < end; i++) {    \
      const float v = x[i];                   \
      y[i] = (expr);                          \
    }                                         \
    break;
    UNARY_F32_OPS(U_LOOP)
#undef U_LOOP
  }
}

/* Op-specific parameter ranges of the f32 ops. */
static edgert_status check_f32_params(const ert_node *node, ert_err *err, int op) {
  const char *nm = node->name ? node->name : "";
  if (op == U_gelu && ert_pi(node, 0) != 0 && ert_pi(node, 0) != 1)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm, " (gelu): approximate must be 0 or 1, got %d",
                         (int)ert_pi(node, 0));
  if (op == U_celu && ert_pf(node, 0) == 0.0f)
    return ert_fail_node(err, EDGERT_ERR_PARAM, nm, " (celu): alpha must not be 0");
  return EDGERT_OK;
}

/* float32 ops; with a second input, the int8 table form (lut.c). */
static edgert_status f32_prepare(ert_node *node, ert_err *err, int op) {
  if (node->n_in == 2) return ert_lut_s8_prepare(node, err);
  edgert_status st = check_unary(node, err, F32_ONLY, EDGERT_FLOAT32, f32_nparams[op]);
  if (st != EDGERT_OK) return st;
  return check_f32_params(node, err, op);
}

static void f32_eval(const ert_node *node, ert_exec *ex, int op) {
  if (node->n_in == 2) {
    ert_lut_s8__ref(node, ex);
    return;
  }
  unary_job j = job_of(node);
  j.op = op;
  run_job(ex, node->out[0]->numel, f32_task, &j);
}

#define UNARY_F32_DEFINE(name, nparams, expr)                          \
  edgert_status ert_##name##_prepare(ert_node *node, ert_err *err) {   \
    return f32_prepare(node, err, U_##name);                           \
  }                                                                    \
  void ert_##name##_eval(const ert_node *node, ert_exec *ex) { f32_eval(node, ex, U_##name); }

#define UNARY_F32_ONLY(X)                                                                   \
  X(relu) X(leaky_relu) X(hard_sigmoid) X(hard_swish) X(sigmoid) X(tanh) X(exp) X(log)    \
  X(sqrt) X(reciprocal) X(floor) X(ceil) X(round) X(erf) X(sin) X(cos) X(tan) X(asin)      \
  X(acos) X(atan) X(sinh) X(cosh) X(asinh) X(acosh) X(atanh) X(softplus) X(softsign)       \
  X(elu) X(selu) X(celu) X(thresholded_relu) X(gelu) X(silu) X(mish) X(shrink)
#define UNARY_F32_WRAP(name) UNARY_F32_DEFINE(name, 0, 0)
UNARY_F32_ONLY(UNARY_F32_WRAP)

/* ---- abs, neg, sign: float32 and signed integers; clip: float32 and integers ---- */

static int64_t load_int(const void *x, int32_t dtype, size_t i) {
  switch (dtype) {
    case EDGERT_UINT8: return ((const uint8_t *)x)[i];
    case EDGERT_INT8: return ((const int8_t *)x)[i];
    case EDGERT_INT16: return ((const int16_t *)x)[i];
    case EDGERT_INT32: return ((const int32_t *)x)[i];
    default: return ((const int64_t *)x)[i];
  }
}

/* Stores the low bits of v (two's complement truncation: integer negation wraps). */
static void store_int(void *y, int32_t dtype, size_t i, int64_t v) {
  const uint64_t u = (uint64_t)v;
  switch (dtype) {
    case EDGERT_UINT8:
    case EDGERT_INT8: ((uint8_t *)y)[i] = (uint8_t)u; break;
    case EDGERT_INT16: ((uint16_t *)y)[i] = (uint16_t)u; break;
    case EDGERT_INT32: ((uint32_t *)y)[i] = (uint32_t)u; break;
    default: ((uint64_t *)y)[i] = u; break;
  }
}

/* j->op: U_abs, U_neg, U_sign, or U_COUNT for clip to [j->lo, j->hi]. */
static void int_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  for (size_t i = begin; i < end; i++) {
    const int64_t v = load_int(j->x, j->dtype, i);
    int64_t r;
    switch (j->op) {
      case U_abs: r = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; break;
      case U_neg: r = (int64_t)(0 - (uint64_t)v); break;
      case U_sign: r = v > 0 ? 1 : (v < 0 ? -1 : 0); break;
      default: /* clip: lo first, then hi (hi wins when lo > hi) */
        r = v < j->lo ? j->lo : v;
        r = r > j->hi ? j->hi : r;
        break;
    }
    store_int(j->y, j->dtype, i, r);
  }
}

#define SIGNED_DEFINE(name)                                                         \
  edgert_status ert_##name##_prepare(ert_node *node, ert_err *err) {                \
    return check_unary(node, err, SIGNED_NUMERIC, 0, 0);                            \
  }                                                                                 \
  void ert_##name##_eval(const ert_node *node, ert_exec *ex) {                      \
    unary_job j = job_of(node);                                                     \
    j.op = U_##name;                                                                \
    j.dtype = node->in[0]->dtype;                                                   \
    run_job(ex, node->out[0]->numel, j.dtype == EDGERT_FLOAT32 ? f32_task : int_task, \
            &j);                                                                    \
  }

SIGNED_DEFINE(abs)
SIGNED_DEFINE(neg)
SIGNED_DEFINE(sign)

static void clip_f32_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  const float *x = (const float *)j->x;
  float *y = (float *)j->y;
  const float lo = j->a, hi = j->b;
  for (size_t i = begin; i < end; i++) {
    float v = x[i];
    v = v < lo ? lo : v;
    y[i] = v > hi ? hi : v;
  }
}

static int64_t word_pair_i64(const ert_node *node, uint32_t k) {
  const uint64_t u = (uint64_t)node->params[k] | ((uint64_t)node->params[k + 1] << 32);
  int64_t v;
  memcpy(&v, &u, sizeof v);
  return v;
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

edgert_status ert_clip_prepare(ert_node *node, ert_err *err) {
  return check_unary(node, err, CLIP_TYPES, 0, 6);
}

void ert_clip_eval(const ert_node *node, ert_exec *ex) {
  unary_job j = job_of(node);
  int64_t tmin = 0, tmax = 0;
  j.op = U_COUNT;
  j.dtype = node->in[0]->dtype;
  switch (j.dtype) {
    case EDGERT_FLOAT32:
      run_job(ex, node->out[0]->numel, clip_f32_task, &j);
      return;
    case EDGERT_UINT8: tmin = 0; tmax = UINT8_MAX; break;
    case EDGERT_INT8: tmin = INT8_MIN; tmax = INT8_MAX; break;
    case EDGERT_INT16: tmin = INT16_MIN; tmax = INT16_MAX; break;
    case EDGERT_INT32: tmin = INT32_MIN; tmax = INT32_MAX; break;
    default: tmin = INT64_MIN; tmax = INT64_MAX; break;
  }
  j.lo = clamp_i64(word_pair_i64(node, 2), tmin, tmax);
  j.hi = clamp_i64(word_pair_i64(node, 4), tmin, tmax);
  run_job(ex, node->out[0]->numel, int_task, &j);
}

/* ---- not, isnan, isinf, copy ---------------------------------------------- */

static void not_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  const uint8_t *x = (const uint8_t *)j->x;
  uint8_t *y = (uint8_t *)j->y;
  for (size_t i = begin; i < end; i++) y[i] = x[i] == 0;
}

edgert_status ert_not_prepare(ert_node *node, ert_err *err) {
  return check_unary(node, err, BOOL_ONLY, EDGERT_BOOL, 0);
}

void ert_not_eval(const ert_node *node, ert_exec *ex) {
  unary_job j = job_of(node);
  run_job(ex, node->out[0]->numel, not_task, &j);
}

/* Binary16 classification from the bits: exponent all ones is inf (mantissa 0) or
 * NaN (mantissa non-zero). */
static inline bool f16_isnan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }
static inline int f16_inf_sign(uint16_t h) {
  if ((h & 0x7FFFu) != 0x7C00u) return 0;
  return (h & 0x8000u) ? -1 : 1;
}

static void isnan_f32_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  const float *x = (const float *)j->x;
  uint8_t *y = (uint8_t *)j->y;
  for (size_t i = begin; i < end; i++) y[i] = isnan(x[i]) ? 1 : 0;
}

static void isnan_f16_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  const uint16_t *x = (const uint16_t *)j->x;
  uint8_t *y = (uint8_t *)j->y;
  for (size_t i = begin; i < end; i++) y[i] = f16_isnan(x[i]) ? 1 : 0;
}

edgert_status ert_isnan_prepare(ert_node *node, ert_err *err) {
  return check_unary(node, err, F32_F16, EDGERT_BOOL, 0);
}

void ert_isnan_eval(const ert_node *node, ert_exec *ex) {
  unary_job j = job_of(node);
  run_job(ex, node->out[0]->numel,
          node->in[0]->dtype == EDGERT_FLOAT16 ? isnan_f16_task : isnan_f32_task, &j);
}

/* k: detect_positive, k2: detect_negative. */
static void isinf_f32_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  const float *x = (const float *)j->x;
  uint8_t *y = (uint8_t *)j->y;
  for (size_t i = begin; i < end; i++) {
    const float v = x[i];
    y[i] = isinf(v) && ((v > 0.0f && j->k) || (v < 0.0f && j->k2)) ? 1 : 0;
  }
}

static void isinf_f16_task(void *arg, size_t begin, size_t end) {
  const unary_job *j = (const unary_job *)arg;
  const uint16_t *x = (const uint16_t *)j->x;
  uint8_t *y = (uint8_t *)j->y;
  for (size_t i = begin; i < end; i++) {
    const int s = f16_inf_sign(x[i]);
    y[i] = (s > 0 && j->k) || (s < 0 && j->k2) ? 1 : 0;
  }
}

edgert_status ert_isinf_prepare(ert_node *node, ert_err *err) {
  edgert_status st = check_unary(node, err, F32_F16, EDGERT_BOOL, 2);
  if (st != EDGERT_OK) return st;
  for (uint32_t k = 0; k < 2; k++)
    if (ert_pi(node, k) != 0 && ert_pi(node, k) != 1)
      return ert_fail_node(err, EDGERT_ERR_PARAM, node->name ? node->name : "",
                           " (isinf): parameter %u must be 0 or 1", (unsigned)k);
  return EDGERT_OK;
}

void ert_isinf_eval(const ert_node *node, ert_exec *ex) {
  unary_job j = job_of(node);
  run_job(ex, node->out[0]->numel,
          node->in[0]->dtype == EDGERT_FLOAT16 ? isinf_f16_task : isinf_f32_task, &j);
}

edgert_status ert_copy_prepare(ert_node *node, ert_err *err) {
  return check_unary(node, err, ANY_TYPE, 0, 0);
}

void ert_copy_eval(const ert_node *node, ert_exec *ex) {
  (void)ex;
  const ert_tensor *x = node->in[0], *y = node->out[0];
  if (x->data != y->data && y->nbytes > 0) memcpy(y->data, x->data, y->nbytes);
}

/* ---- shapes (bounded dimensions): every unary op keeps its input's shape ---- */
#define UNARY_SHAPE(name) ERT_SHAPE_AS(name, ert_shape_same)
UNARY_F32_ONLY(UNARY_SHAPE)
UNARY_SHAPE(abs)
UNARY_SHAPE(neg)
UNARY_SHAPE(sign)
UNARY_SHAPE(clip)
UNARY_SHAPE(not)
UNARY_SHAPE(isnan)
UNARY_SHAPE(isinf)
UNARY_SHAPE(copy)
