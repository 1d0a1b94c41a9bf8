/* binary.c: element-wise ops over broadcast inputs (portable reference kernels).
 *
 * Shapes follow numpy broadcasting: inputs are aligned on their last dimensions and
 * each dimension of an input is either the output's or 1. prepare() turns the shapes
 * into a plan (kept in node->opdata): output dimensions of size 1 are dropped and
 * neighbouring dimensions merged wherever every input is contiguous across them, so
 * that the innermost remaining dimension is, for each input, either contiguous
 * (stride 1) or broadcast (stride 0). The element loops then see whole rows:
 * same-shape operands, a scalar operand, and per-channel patterns such as
 * [N,C,H,W] + [1,C,1,1] (rows of H*W against one value) run as plain loops.
 *
 * Integer arithmetic wraps (two's complement); integer division truncates toward
 * zero, and division or remainder by zero gives 0 (ONNX leaves it undefined).
 * Parameter words are documented in edgert/ops/binary.py.
 *
 * add, sub, mul and div may run in place: the output may be input 0 when both have
 * the same shape, each output element being written after the inputs it is computed
 * from are read.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "quant_s8.h"

#define BIN_PAR_MIN ((size_t)1 << 15)
#define BIN_MAX_IN 3

/* Inner loop over n output elements: each input pointer advances by its flag (1) or
 * stays (0). */
typedef void (*ew_fn)(void *o, const void *a, const void *b, const void *c, size_t n, int sa,
                      int sb, int sc);

typedef struct bc_plan {
  int64_t fn;    /* index in the op's kernel table */
  int64_t n_in;
  int64_t rank;  /* >= 1 */
  int64_t dims[EDGERT_MAX_DIMS];
  int64_t strides[BIN_MAX_IN][EDGERT_MAX_DIMS]; /* in elements; 0 where broadcast */
  int64_t esize[BIN_MAX_IN + 1];                /* inputs, then the output */
} bc_plan;

_Static_assert(sizeof(bc_plan) <= sizeof(((ert_node *)0)->opdata), "plan must fit opdata");

enum { S_F32, S_U8, S_I8, S_I16, S_I32, S_I64, S_BOOL, NSLOT };

static int slot_of(int32_t dtype) {
  switch (dtype) {
    case EDGERT_FLOAT32: return S_F32;
    case EDGERT_UINT8: return S_U8;
    case EDGERT_INT8: return S_I8;
    case EDGERT_INT16: return S_I16;
    case EDGERT_INT32: return S_I32;
    case EDGERT_INT64: return S_I64;
    case EDGERT_BOOL: return S_BOOL;
    default: return -1;
  }
}

static const char *nname(const ert_node *n) { return n->name ? n->name : ""; }

/* ---- element loops ----------------------------------------------------------- */

/* Defines fname computing EXPR (of x, y; elem_t is the input type, uelem_t an unsigned
 * type at least as wide, for wrapping arithmetic) into TO. */
#define EW_LOOP(fname, T, U, TO, EXPR)                                                  \
  static void fname(void *o_, const void *a_, const void *b_, const void *c_, size_t n,  \
                    int sa, int sb, int sc) {                                           \
    typedef T elem_t;                                                                   \
    typedef U uelem_t;                                                                  \
    (void)sizeof(elem_t);                                                               \
    (void)sizeof(uelem_t);                                                              \
    (void)c_;                                                                           \
    (void)sc;                                                                           \
    TO *o = (TO *)o_;                                                                   \
    const T *pa = (const T *)a_, *pb = (const T *)b_;                                   \
    if (sa && sb) {                                                                     \
      for (size_t i = 0; i < n; i++) {                                                  \
        const T x = pa[i], y = pb[i];                                                   \
        o[i] = (TO)(EXPR);                                                              \
      }                                                                                 \
    } else if (sa) {                                                                    \
      const T y = pb[0];                                                                \
      for (size_t i = 0; i < n; i++) {                                                  \
        const T x = pa[i];                                                              \
        o[i] = (TO)(EXPR);                                                              \
      }                                                                                 \
    } else if (sb) {                                                                    \
      const T x = pa[0];                                                                \
      for (size_t i = 0; i < n; i++) {                                                  \
        const T y = pb[i];                                                              \
        o[i] = (TO)(EXPR);                                                              \
      }                                                                                 \
    } else {                                                                            \
      const T x = pa[0], y = pb[0];                                                     \
      const TO r = (TO)(EXPR);                                                          \
      for (size_t i = 0; i < n; i++) o[i] = r;                                          \
    }                                                                                   \
  }

#define SAME(T) T
#define BOOLOUT(T) uint8_t

#define FOR_SIGNED(name, OUT, EXPR)                      \
  EW_LOOP(name##_i8, int8_t, unsigned, OUT(int8_t), EXPR)    \
  EW_LOOP(name##_i16, int16_t, unsigned, OUT(int16_t), EXPR) \
  EW_LOOP(name##_i32, int32_t, uint32_t, OUT(int32_t), EXPR) \
  EW_LOOP(name##_i64, int64_t, uint64_t, OUT(int64_t), EXPR)
#define FOR_UNSIGNED(name, OUT, EXPR) EW_LOOP(name##_u8, uint8_t, unsigned, OUT(uint8_t), EXPR)
#define FOR_F32(name, OUT, EXPR) EW_LOOP(name##_f32, float, float, OUT(float), EXPR)
#define FOR_BOOL(name, EXPR) EW_LOOP(name##_bool, uint8_t, unsigned, uint8_t, EXPR)

/* Tables indexed by slot (S_F32 ...). */
#define TABLE_NUMERIC(name) {name##_f32, name##_u8, name##_i8, name##_i16, name##_i32, name##_i64, NULL}
#define TABLE_ALL(name) \
  {name##_f32, name##_u8, name##_i8, name##_i16, name##_i32, name##_i64, name##_bool}
#define TABLE_INTS(name) {NULL, name##_u8, name##_i8, name##_i16, name##_i32, name##_i64, NULL}
#define TABLE_F32(name) {name##_f32, NULL, NULL, NULL, NULL, NULL, NULL}
#define TABLE_BOOL(name) {NULL, NULL, NULL, NULL, NULL, NULL, name##_bool}

/* x ** e for integers, wrapping; negative exponents truncate 1/x^-e toward zero. */
static int64_t ipow(int64_t x, int64_t e) {
  if (e < 0) return x == 1 ? 1 : (x == -1 ? ((e & 1) ? -1 : 1) : 0);
  uint64_t r = 1, b = (uint64_t)x;
  uint64_t k = (uint64_t)e;
  while (k) {
    if (k & 1) r *= b;
    b *= b;
    k >>= 1;
  }
  int64_t out;
  memcpy(&out, &r, sizeof out);
  return out;
}

/* Remainder with the sign of the divisor (x - floor(x / y) * y), as ONNX Mod fmod=0. */
static inline float fmod_floor_f(float x, float y) {
  float r = fmodf(x, y);
  if (r != 0.0f) {
    if ((r < 0.0f) != (y < 0.0f)) r += y;
  } else {
    r = copysignf(0.0f, y);
  }
  return r;
}

static inline float max_f(float x, float y) { return (x > y || x != x) ? x : y; }
static inline float min_f(float x, float y) { return (x < y || x != x) ? x : y; }

/* Arithmetic. */
FOR_F32(add, SAME, x + y)
FOR_SIGNED(add, SAME, (uelem_t)x + (uelem_t)y)
FOR_UNSIGNED(add, SAME, (uelem_t)x + (uelem_t)y)
FOR_F32(sub, SAME, x - y)
FOR_SIGNED(sub, SAME, (uelem_t)x - (uelem_t)y)
FOR_UNSIGNED(sub, SAME, (uelem_t)x - (uelem_t)y)
FOR_F32(mul, SAME, x * y)
FOR_SIGNED(mul, SAME, (uelem_t)x * (uelem_t)y)
FOR_UNSIGNED(mul, SAME, (uelem_t)x * (uelem_t)y)
FOR_F32(div, SAME, x / y)
FOR_SIGNED(div, SAME, y == 0 ? 0 : (y == -1 ? (elem_t)((uelem_t)0 - (uelem_t)x) : x / y))
FOR_UNSIGNED(div, SAME, y == 0 ? 0 : x / y)
FOR_F32(pow, SAME, powf(x, y))
FOR_SIGNED(pow, SAME, ipow((int64_t)x, (int64_t)y))
FOR_UNSIGNED(pow, SAME, ipow((int64_t)x, (int64_t)y))
FOR_F32(min, SAME, min_f(x, y))
FOR_SIGNED(min, SAME, x < y ? x : y)
FOR_UNSIGNED(min, SAME, x < y ? x : y)
FOR_F32(max, SAME, max_f(x, y))
FOR_SIGNED(max, SAME, x > y ? x : y)
FOR_UNSIGNED(max, SAME, x > y ? x : y)
/* mod: variant 0 (fmod=0) takes the divisor's sign, variant 1 (fmod=1) the dividend's. */
FOR_F32(mod0, SAME, fmod_floor_f(x, y))
FOR_SIGNED(mod0, SAME,
           (y == 0 || y == -1) ? 0
           : ((x % y != 0 && ((x % y < 0) != (y < 0))) ? x % y + y : x % y))
FOR_UNSIGNED(mod0, SAME, y == 0 ? 0 : x % y)
FOR_F32(mod1, SAME, fmodf(x, y))
FOR_SIGNED(mod1, SAME, (y == 0 || y == -1) ? 0 : x % y)
FOR_UNSIGNED(mod1, SAME, y == 0 ? 0 : x % y)
FOR_F32(prelu, SAME, x < 0.0f ? x * y : x)

/* Comparisons (bool output). */
FOR_F32(equal, BOOLOUT, x == y)
FOR_SIGNED(equal, BOOLOUT, x == y)
FOR_UNSIGNED(equal, BOOLOUT, x == y)
FOR_BOOL(equal, (x != 0) == (y != 0))
#define COMPARISON(name, OPER)               \
  FOR_F32(name, BOOLOUT, x OPER y)           \
  FOR_SIGNED(name, BOOLOUT, x OPER y)        \
  FOR_UNSIGNED(name, BOOLOUT, x OPER y)
COMPARISON(less, <)
COMPARISON(less_or_equal, <=)
COMPARISON(greater, >)
COMPARISON(greater_or_equal, >=)

/* Logic on bool, bitwise on integers. */
FOR_BOOL(and, (x != 0) & (y != 0))
FOR_BOOL(or, (x != 0) | (y != 0))
FOR_BOOL(xor, (x != 0) ^ (y != 0))
FOR_SIGNED(bitwise_and, SAME, x & y)
FOR_UNSIGNED(bitwise_and, SAME, x & y)
FOR_SIGNED(bitwise_or, SAME, x | y)
FOR_UNSIGNED(bitwise_or, SAME, x | y)
FOR_SIGNED(bitwise_xor, SAME, x ^ y)
FOR_UNSIGNED(bitwise_xor, SAME, x ^ y)

/* Shifts: variant 0 left, 1 right (arithmetic for signed types). A shift amount that
 * is negative or not below the bit width leaves only the sign fill: -1 for a right
 * shift of a negative value, else 0. */
#define WIDTH ((int64_t)(8 * sizeof(elem_t)))
FOR_SIGNED(shl, SAME, (y < 0 || y >= WIDTH) ? 0 : (elem_t)((uelem_t)x << y))
FOR_UNSIGNED(shl, SAME, (y >= WIDTH) ? 0 : (elem_t)((uelem_t)x << y))
FOR_SIGNED(shr, SAME,
           (y < 0 || y >= WIDTH) ? (x < 0 ? -1 : 0) : (x < 0 ? ~(elem_t)(~x >> y) : x >> y))
FOR_UNSIGNED(shr, SAME, (y >= WIDTH) ? 0 : x >> y)

static const ew_fn add_fns[] = TABLE_NUMERIC(add);
static const ew_fn sub_fns[] = TABLE_NUMERIC(sub);
static const ew_fn mul_fns[] = TABLE_NUMERIC(mul);
static const ew_fn div_fns[] = TABLE_NUMERIC(div);
static const ew_fn pow_fns[] = TABLE_NUMERIC(pow);
static const ew_fn min_fns[] = TABLE_NUMERIC(min);
static const ew_fn max_fns[] = TABLE_NUMERIC(max);
static const ew_fn mod_fns[] = {mod0_f32, mod0_u8, mod0_i8, mod0_i16, mod0_i32, mod0_i64, NULL,
                                mod1_f32, mod1_u8, mod1_i8, mod1_i16, mod1_i32, mod1_i64, NULL};
static const ew_fn prelu_fns[] = TABLE_F32(prelu);
static const ew_fn equal_fns[] = TABLE_ALL(equal);
static const ew_fn less_fns[] = TABLE_NUMERIC(less);
static const ew_fn less_or_equal_fns[] = TABLE_NUMERIC(less_or_equal);
static const ew_fn greater_fns[] = TABLE_NUMERIC(greater);
static const ew_fn greater_or_equal_fns[] = TABLE_NUMERIC(greater_or_equal);
static const ew_fn and_fns[] = TABLE_BOOL(and);
static const ew_fn or_fns[] = TABLE_BOOL(or);
static const ew_fn xor_fns[] = TABLE_BOOL(xor);
static const ew_fn bitwise_and_fns[] = TABLE_INTS(bitwise_and);
static const ew_fn bitwise_or_fns[] = TABLE_INTS(bitwise_or);
static const ew_fn bitwise_xor_fns[] = TABLE_INTS(bitwise_xor);
static const ew_fn bitshift_fns[] = {NULL, shl_u8, shl_i8, shl_i16, shl_i32, shl_i64, NULL,
                                     NULL, shr_u8, shr_i8, shr_i16, shr_i32, shr_i64, NULL};

/* where: by element size; a is the bool condition, b and c the values. */
#define WHERE_LOOP(fname, T)                                                             \
  static void fname(void *o_, const void *a_, const void *b_, const void *c_, size_t n,  \
                    int sa, int sb, int sc) {                                           \
    T *o = (T *)o_;                                                                     \
    const uint8_t *cond = (const uint8_t *)a_;                                          \
    const T *x = (const T *)b_, *y = (const T *)c_;                                     \
    const size_t ka = (size_t)sa, kb = (size_t)sb, kc = (size_t)sc;                     \
    for (size_t i = 0; i < n; i++) o[i] = cond[i * ka] ? x[i * kb] : y[i * kc];         \
  }
WHERE_LOOP(where_1, uint8_t)
WHERE_LOOP(where_2, uint16_t)
WHERE_LOOP(where_4, uint32_t)
WHERE_LOOP(where_8, uint64_t)
static const ew_fn where_fns[] = {where_1, where_2, NULL, where_4, NULL, NULL, NULL, where_8};

/* ---- broadcast plan ---------------------------------------------------------- */

static edgert_status plan_build(const ert_node *node, ert_err *err, bc_plan *p) {
  const ert_tensor *y = node->out[0];
  const int r = y->ndim;
  const uint32_t n_in = node->n_in;
  int64_t st[BIN_MAX_IN][EDGERT_MAX_DIMS];
  if (r < 0 || r > EDGERT_MAX_DIMS)
    return ert_fail(err, EDGERT_ERR_SHAPE, "node '%s': output rank %d", nname(node), r);
  for (uint32_t k = 0; k < n_in; k++) {
    const ert_tensor *t = node->in[k];
    if (t->ndim < 0 || t->ndim > r)
      return ert_fail(err, EDGERT_ERR_SHAPE,
                      "node '%s': input %u has rank %d, more than the output's %d", nname(node),
                      (unsigned)k, (int)t->ndim, r);
    const int off = r - t->ndim;
    int64_t s = 1;
    for (int d = r - 1; d >= 0; d--) {
      const int64_t dim = d >= off ? t->shape[d - off] : 1;
      if (dim != y->shape[d] && dim != 1)
        return ert_fail(err, EDGERT_ERR_SHAPE,
                        "node '%s': input %u dimension %d (%lld) does not broadcast to the "
                        "output's %lld",
                        nname(node), (unsigned)k, d - off, (long long)dim,
                        (long long)y->shape[d]);
      st[k][d] = dim == 1 ? 0 : s;
      s *= dim;
    }
  }
  for (int d = 0; d < r; d++) {
    if (y->shape[d] == 1) continue;
    bool found = false;
    for (uint32_t k = 0; k < n_in; k++) {
      const int off = r - node->in[k]->ndim;
      found = found || (d >= off && node->in[k]->shape[d - off] == y->shape[d]);
    }
    if (!found)
      return ert_fail(err, EDGERT_ERR_SHAPE,
                      "node '%s': output dimension %d (%lld) is not the broadcast of the inputs",
                      nname(node), d, (long long)y->shape[d]);
  }

  memset(p, 0, sizeof *p);
  p->n_in = n_in;
  for (uint32_t k = 0; k < n_in; k++) p->esize[k] = (int64_t)ert_dtype_size(node->in[k]->dtype);
  p->esize[BIN_MAX_IN] = (int64_t)ert_dtype_size(y->dtype);
  int rank = 0;
  for (int d = 0; d < r; d++) {
    if (y->shape[d] == 1) continue;
    bool merge = rank > 0;
    for (uint32_t k = 0; merge && k < n_in; k++)
      merge = p->strides[k][rank - 1] == st[k][d] * y->shape[d];
    if (merge) {
      p->dims[rank - 1] *= y->shape[d];
      for (uint32_t k = 0; k < n_in; k++) p->strides[k][rank - 1] = st[k][d];
    } else {
      p->dims[rank] = y->shape[d];
      for (uint32_t k = 0; k < n_in; k++) p->strides[k][rank] = st[k][d];
      rank++;
    }
  }
  if (rank == 0) {
    p->dims[0] = 1;
    rank = 1;
  }
  p->rank = rank;
  for (uint32_t k = 0; k < n_in; k++)
    if (p->strides[k][rank - 1] != 0 && p->strides[k][rank - 1] != 1)
      return ert_fail(err, EDGERT_ERR_SHAPE, "node '%s': internal broadcast plan error",
                      nname(node));
  return EDGERT_OK;
}

/* ---- running a plan ------------------------------------------------------------ */

typedef struct bc_job {
  bc_plan plan;
  ew_fn fn;
  char *out;
  const char *in[BIN_MAX_IN];
  ert_act_params act;
} bc_job;

/* Computes output elements [begin, end) row piece by row piece. */
static void bc_task(void *arg, size_t begin, size_t end) {
  const bc_job *j = (const bc_job *)arg;
  const bc_plan *p = &j->plan;
  const int r = (int)p->rank, n_in = (int)p->n_in;
  const size_t inner = (size_t)p->dims[r - 1];
  int64_t idx[EDGERT_MAX_DIMS] = {0};
  int64_t base[BIN_MAX_IN] = {0, 0, 0};
  size_t rest = begin / inner, col = begin % inner;
  for (int d = r - 2; d >= 0; d--) {
    idx[d] = (int64_t)(rest % (size_t)p->dims[d]);
    rest /= (size_t)p->dims[d];
    for (int k = 0; k < n_in; k++) base[k] += idx[d] * p->strides[k][d];
  }
  const size_t osz = (size_t)p->esize[BIN_MAX_IN];
  size_t pos = begin;
  while (pos < end) {
    size_t n = inner - col;
    if (n > end - pos) n = end - pos;
    const void *ptr[BIN_MAX_IN] = {NULL, NULL, NULL};
    for (int k = 0; k < n_in; k++)
      ptr[k] = j->in[k] + (size_t)(base[k] + (int64_t)col * p->strides[k][r - 1]) *
                              (size_t)p->esize[k];
    void *o = j->out + pos * osz;
    j->fn(o, ptr[0], ptr[1], ptr[2], n, p->strides[0][r - 1] != 0,
          n_in > 1 && p->strides[1][r - 1] != 0, n_in > 2 && p->strides[2][r - 1] != 0);
    if (j->act.kind != ERT_ACT_NONE) ert_act_apply(&j->act, (float *)o, n);
    pos += n;
    col = 0;
    for (int d = r - 2; d >= 0; d--) {
      if (++idx[d] < p->dims[d]) {
        for (int k = 0; k < n_in; k++) base[k] += p->strides[k][d];
        break;
      }
      idx[d] = 0;
      for (int k = 0; k < n_in; k++) base[k] -= (p->dims[d] - 1) * p->strides[k][d];
    }
  }
}

static void bc_run(const ert_node *node, ert_exec *ex, const ew_fn *table,
                   const ert_act_params *act) {
  bc_job j;
  memcpy(&j.plan, node->opdata, sizeof j.plan);
  j.fn = table[j.plan.fn];
  j.out = (char *)node->out[0]->data;
  for (int k = 0; k < BIN_MAX_IN; k++)
    j.in[k] = k < (int)j.plan.n_in ? (const char *)node->in[k]->data : NULL;
  if (act != NULL) {
    j.act = *act;
  } else {
    j.act.kind = ERT_ACT_NONE;
    j.act.a = j.act.b = 0.0f;
  }
  const size_t n = node->out[0]->numel;
  if (n >= BIN_PAR_MIN)
    ert_parallel_for(ex, n, bc_task, &j);
  else if (n > 0)
    bc_task(&j, 0, n);
}

/* Two inputs of one dtype with a kernel in `table` (n_variants blocks of NSLOT
 * entries, the block chosen by parameter word 0 when n_variants > 1), an output of
 * that dtype or bool, at least n_params parameter words. */
static edgert_status bin_prepare(ert_node *node, ert_err *err, const ew_fn *table,
                                 int n_variants, bool bool_out, uint32_t n_params) {
  edgert_status st = ert_check_arity(node, err, 2, 2, 1, 1);
  if (st != EDGERT_OK) return st;
  st = ert_check_params(node, err, n_params);
  if (st != EDGERT_OK) return st;
  const ert_tensor *a = node->in[0], *b = node->in[1];
  if (a->dtype != b->dtype)
    return ert_fail(err, EDGERT_ERR_DTYPE, "node '%s': inputs have dtypes %s and %s",
                    nname(node), ert_dtype_name(a->dtype), ert_dtype_name(b->dtype));
  const int slot = slot_of(a->dtype);
  int variant = 0;
  if (n_variants > 1) {
    variant = ert_pi(node, 0);
    if (variant < 0 || variant >= n_variants)
      return ert_fail(err, EDGERT_ERR_PARAM, "node '%s': parameter 0 is %d, must be below %d",
                      nname(node), variant, n_variants);
  }
  if (slot < 0 || table[variant * NSLOT + slot] == NULL)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "node '%s': dtype %s is not supported",
                    nname(node), ert_dtype_name(a->dtype));
  st = ert_check_dtype(node, err, node->out[0], bool_out ? EDGERT_BOOL : a->dtype);
  if (st != EDGERT_OK) return st;
  bc_plan p;
  st = plan_build(node, err, &p);
  if (st != EDGERT_OK) return st;
  p.fn = variant * NSLOT + slot;
  memcpy(node->opdata, &p, sizeof p);
  return EDGERT_OK;
}

#define BINARY_OP(name, table, n_variants, bool_out, n_params)                 \
  edgert_status ert_##name##_prepare(ert_node *node, ert_err *err) {           \
    return bin_prepare(node, err, table, n_variants, bool_out, n_params);      \
  }                                                                            \
  void ert_##name##_eval(const ert_node *node, ert_exec *ex) { bc_run(node, ex, table, NULL); }

BINARY_OP(sub, sub_fns, 1, false, 0)
BINARY_OP(div, div_fns, 1, false, 0)
BINARY_OP(pow, pow_fns, 1, false, 0)
BINARY_OP(min, min_fns, 1, false, 0)
BINARY_OP(max, max_fns, 1, false, 0)
BINARY_OP(mod, mod_fns, 2, false, 1)
BINARY_OP(equal, equal_fns, 1, true, 0)
BINARY_OP(less, less_fns, 1, true, 0)
BINARY_OP(less_or_equal, less_or_equal_fns, 1, true, 0)
BINARY_OP(greater, greater_fns, 1, true, 0)
BINARY_OP(greater_or_equal, greater_or_equal_fns, 1, true, 0)
BINARY_OP(and, and_fns, 1, false, 0)
BINARY_OP(or, or_fns, 1, false, 0)
BINARY_OP(xor, xor_fns, 1, false, 0)
BINARY_OP(bitshift, bitshift_fns, 2, false, 1)
BINARY_OP(bitwise_and, bitwise_and_fns, 1, false, 0)
BINARY_OP(bitwise_or, bitwise_or_fns, 1, false, 0)
BINARY_OP(bitwise_xor, bitwise_xor_fns, 1, false, 0)

/* mul: with parameter words, the quantized int8 form (binary_s8.c). */
edgert_status ert_mul_prepare(ert_node *node, ert_err *err) {
  if (node->n_params > 0) return ert_mul_s8_prepare(node, err);
  return bin_prepare(node, err, mul_fns, 1, false, 0);
}

void ert_mul_eval(const ert_node *node, ert_exec *ex) {
  if (node->n_params > 0) {
    ert_mul_s8__ref(node, ex);
    return;
  }
  bc_run(node, ex, mul_fns, NULL);
}

/* add: parameter words 0..2 are a fused activation (float32 only); more words make
 * the quantized int8 form (binary_s8.c). */
edgert_status ert_add_prepare(ert_node *node, ert_err *err) {
  if (node->n_params > 3) return ert_add_s8_prepare(node, err);
  edgert_status st = bin_prepare(node, err, add_fns, 1, false, 3);
  if (st != EDGERT_OK) return st;
  ert_act_params act;
  st = ert_act_read(node, 0, &act, err);
  if (st != EDGERT_OK) return st;
  if (act.kind != ERT_ACT_NONE && node->out[0]->dtype != EDGERT_FLOAT32)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED,
                    "node '%s': a fused activation needs float32, got %s", nname(node),
                    ert_dtype_name(node->out[0]->dtype));
  return EDGERT_OK;
}

void ert_add_eval(const ert_node *node, ert_exec *ex) {
  if (node->n_params > 3) {
    ert_add_s8__ref(node, ex);
    return;
  }
  ert_act_params act;
  act.kind = ert_pi(node, 0);
  act.a = ert_pf(node, 1);
  act.b = ert_pf(node, 2);
  bc_run(node, ex, add_fns, &act);
}

/* prelu: the slope broadcasts to x (the output has x's shape). */
edgert_status ert_prelu_prepare(ert_node *node, ert_err *err) {
  edgert_status st = bin_prepare(node, err, prelu_fns, 1, false, 0);
  if (st != EDGERT_OK) return st;
  return ert_check_same_shape(node, err, node->in[0], node->out[0]);
}

void ert_prelu_eval(const ert_node *node, ert_exec *ex) { bc_run(node, ex, prelu_fns, NULL); }

/* where: condition (bool), x, y (one dtype, any) broadcast together. */
edgert_status ert_where_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 3, 3, 1, 1);
  if (st != EDGERT_OK) return st;
  st = ert_check_dtype(node, err, node->in[0], EDGERT_BOOL);
  if (st != EDGERT_OK) return st;
  const int32_t dt = node->in[1]->dtype;
  const size_t es = ert_dtype_size(dt);
  if (es == 0 || es > 8 || where_fns[es - 1] == NULL)
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED, "node '%s': dtype %s is not supported",
                    nname(node), ert_dtype_name(dt));
  st = ert_check_dtype(node, err, node->in[2], dt);
  if (st != EDGERT_OK) return st;
  st = ert_check_dtype(node, err, node->out[0], dt);
  if (st != EDGERT_OK) return st;
  bc_plan p;
  st = plan_build(node, err, &p);
  if (st != EDGERT_OK) return st;
  p.fn = (int64_t)es - 1;
  memcpy(node->opdata, &p, sizeof p);
  return EDGERT_OK;
}

void ert_where_eval(const ert_node *node, ert_exec *ex) { bc_run(node, ex, where_fns, NULL); }
