/* binary.c: element-wise ops over broadcast inputs (portable reference kernels).
 *
 * Shapes follow numpy broadcasting: inputs are aligned on their last dimensions and
 * each dimension of an input is either the output's or 1. prepare() turns the shapes
 * into a plan (kept in node->opdata): output dimensions of size 1 are dropped and
 * neighbouring dimensions merged wherever every input is contiguous across them, so
 * that the innermost remaining dimension is, for each input, either contiguous
 * (stride 1) or broadcast (stride 0). The element loops then see whole rows:
 * same-shape operands, a scalar operand, and per-channel patterns such as
 * [N,C,H,W] + [1,C,1,1] (rows of H*W against one value) run as plain loops. Only the
 * common float32 ops have rows of their own; every other op and dtype goes element by
 * element through values widened to int64 (or float), which keeps the library small.
 *
 * Integer arithmetic wraps (two's complement); integer division truncates toward
 * zero, and division or remainder by zero gives 0 (ONNX leaves it undefined).
 * Parameter words are documented in edgert/converter/ops/binary.py.
 *
 * add, sub, mul and div may run in place: the output may be input 0 when both have
 * the same shape, each output element being written after the inputs it is computed
 * from are read.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "exec.h"
#include "internal.h"
#include "quant_s8.h"

#define BIN_PAR_MIN ((size_t)1 << 15)

/* The per-element operations of the rare paths stay out of line (code size). */
#if defined(__GNUC__)
#define ERT_NOINLINE __attribute__((noinline))
#else
#define ERT_NOINLINE
#endif
#define BIN_MAX_IN 3

typedef struct bc_plan {
  int32_t op;    /* B_* code (variant included) */
  int32_t slot;  /* S_* of the inputs; for where, the element size */
  int64_t n_in;
  int64_t rank;  /* >= 1 */
  int64_t dims[EDGERT_MAX_DIMS];
  int64_t strides[BIN_MAX_IN][EDGERT_MAX_DIMS]; /* in elements; 0 where broadcast */
  int64_t esize[BIN_MAX_IN + 1];                /* inputs, then the output */
} bc_plan;

_Static_assert(sizeof(bc_plan) <= sizeof(((ert_node *)0)->opdata), "plan must fit opdata");

enum { S_F32, S_U8, S_I8, S_I16, S_I32, S_I64, S_BOOL, NSLOT };

#define M_F32 (1u << S_F32)
#define M_BOOL (1u << S_BOOL)
#define M_INTS ((1u << S_U8) | (1u << S_I8) | (1u << S_I16) | (1u << S_I32) | (1u << S_I64))
#define M_NUMERIC (M_F32 | M_INTS)
#define M_ALL (M_NUMERIC | M_BOOL)

/* Element operations. The float32 fast rows cover B_ADD..B_PRELU; B_EQ..B_GE give bool
 * outputs; and/or/xor on bool run as the bitwise ops on 0/1 values. Variants (mod's
 * fmod flag, bitshift's direction) are consecutive codes. */
enum {
  B_ADD, B_SUB, B_MUL, B_DIV, B_MIN, B_MAX, B_PRELU,
  B_POW, B_MOD0, B_MOD1,
  B_AND, B_OR, B_XOR, B_SHL, B_SHR,
  B_EQ, B_LT, B_LE, B_GT, B_GE,
  B_WHERE
};

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

/* ---- element operations -------------------------------------------------------- */

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
static float fmod_floor_f(float x, float y) {
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

/* float32 ops with a float32 result (B_ADD..B_MOD1). */
ERT_NOINLINE static float f32_op(int op, float x, float y) {
  switch (op) {
    case B_ADD: return x + y;
    case B_SUB: return x - y;
    case B_MUL: return x * y;
    case B_DIV: return x / y;
    case B_MIN: return min_f(x, y);
    case B_MAX: return max_f(x, y);
    case B_PRELU: return x < 0.0f ? x * y : x;
    case B_POW: return powf(x, y);
    case B_MOD0: return fmod_floor_f(x, y);
    default: return fmodf(x, y);
  }
}

/* Integer ops on values widened to int64 (sign- or zero-extended from `bits`); the
 * caller keeps the low `bits` bits, which is the wrapping result of the narrow type.
 * Division and remainder by 0 give 0; by -1 they wrap (x / -1 == -x, x % -1 == 0).
 * Shifts by a negative amount or not below the width leave only the sign fill. */
ERT_NOINLINE static int64_t int_op(int op, int64_t x, int64_t y, int bits) {
  const uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  switch (op) {
    case B_ADD: return (int64_t)(ux + uy);
    case B_SUB: return (int64_t)(ux - uy);
    case B_MUL: return (int64_t)(ux * uy);
    case B_DIV: return y == 0 ? 0 : (y == -1 ? (int64_t)(0 - ux) : x / y);
    case B_MIN: return x < y ? x : y;
    case B_MAX: return x > y ? x : y;
    case B_POW: return ipow(x, y);
    case B_MOD0:
    case B_MOD1: {
      if (y == 0 || y == -1) return 0;
      const int64_t r = x % y;
      return (op == B_MOD0 && r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
    }
    case B_AND: return x & y;
    case B_OR: return x | y;
    case B_XOR: return x ^ y;
    case B_SHL: return (y < 0 || y >= bits) ? 0 : (int64_t)(ux << y);
    default: /* B_SHR */
      if (y < 0 || y >= bits) return x < 0 ? -1 : 0;
      return x < 0 ? ~(~x >> y) : x >> y;
  }
}

/* Comparisons (B_EQ..B_GE); NaN compares false. */
#define CMP(op, x, y)                                                               \
  ((op) == B_EQ ? (x) == (y)                                                        \
   : (op) == B_LT ? (x) < (y)                                                       \
   : (op) == B_LE ? (x) <= (y)                                                      \
   : (op) == B_GT ? (x) > (y) : (x) >= (y))

static int64_t load_int(const void *p, int slot) {
  switch (slot) {
    case S_U8: return *(const uint8_t *)p;
    case S_I8: return *(const int8_t *)p;
    case S_I16: return *(const int16_t *)p;
    case S_I32: return *(const int32_t *)p;
    case S_I64: return *(const int64_t *)p;
    default: return *(const uint8_t *)p != 0; /* bool */
  }
}

/* Stores the low bits of v (two's complement truncation). */
static void store_int(void *p, int slot, int64_t v) {
  const uint64_t u = (uint64_t)v;
  switch (slot) {
    case S_I16: *(uint16_t *)p = (uint16_t)u; break;
    case S_I32: *(uint32_t *)p = (uint32_t)u; break;
    case S_I64: *(uint64_t *)p = u; break;
    default: *(uint8_t *)p = (uint8_t)u; break;
  }
}

static const uint8_t slot_size[NSLOT] = {4, 1, 1, 2, 4, 8, 1};

/* Any op, any dtype, element by element; a, b advance by their flags. */
static void generic_row(int op, int slot, char *o, const char *a, const char *b, size_t n,
                        int sa, int sb) {
  const size_t es = slot_size[slot];
  const size_t ka = sa ? es : 0, kb = sb ? es : 0;
  if (slot == S_F32) {
    uint8_t *ob = (uint8_t *)o;
#define F32_CMP_ROW(OPER)                             \
  for (size_t i = 0; i < n; i++, a += ka, b += kb)    \
    ob[i] = *(const float *)a OPER *(const float *)b; \
  break;
    switch (op) {
      case B_EQ: F32_CMP_ROW(==)
      case B_LT: F32_CMP_ROW(<)
      case B_LE: F32_CMP_ROW(<=)
      case B_GT: F32_CMP_ROW(>)
      case B_GE: F32_CMP_ROW(>=)
#undef F32_CMP_ROW
      default:
        for (size_t i = 0; i < n; i++, a += ka, b += kb)
          ((float *)o)[i] = f32_op(op, *(const float *)a, *(const float *)b);
        break;
    }
    return;
  }
  const size_t ko = op >= B_EQ ? 1 : es;
  const int bits = (int)(8 * es);
  for (size_t i = 0; i < n; i++, a += ka, b += kb, o += ko) {
    const int64_t x = load_int(a, slot), y = load_int(b, slot);
    if (op >= B_EQ)
      *(uint8_t *)o = CMP(op, x, y);
    else
      store_int(o, slot, int_op(op, x, y, bits));
  }
}

/* float32 rows of the common ops, with at least one input contiguous. */
#define F32_ROWS(EXPR)                                             \
  do {                                                             \
    if (sa && sb) {                                                \
      for (size_t i = 0; i < n; i++) {                             \
        const float x = a[i], y = b[i];                            \
        o[i] = (EXPR);                                             \
      }                                                            \
    } else if (sa) {                                               \
      const float y = b[0];                                        \
      for (size_t i = 0; i < n; i++) {                             \
        const float x = a[i];                                      \
        o[i] = (EXPR);                                             \
      }                                                            \
    } else {                                                       \
      const float x = a[0];                                        \
      for (size_t i = 0; i < n; i++) {                             \
        const float y = b[i];                                      \
        o[i] = (EXPR);                                             \
      }                                                            \
    }                                                              \
  } while (0)

static void f32_row(int op, float *o, const float *a, const float *b, size_t n, int sa, int sb) {
  switch (op) {
    case B_ADD: F32_ROWS(x + y); break;
    case B_SUB: F32_ROWS(x - y); break;
    case B_MUL: F32_ROWS(x * y); break;
    case B_DIV: F32_ROWS(x / y); break;
    case B_MIN: F32_ROWS(min_f(x, y)); break;
    case B_MAX: F32_ROWS(max_f(x, y)); break;
    default: F32_ROWS(x < 0.0f ? x * y : x); break; /* B_PRELU */
  }
}

/* where: by element size es; a is the bool condition, b and c the values. */
#define WHERE_ROW(T)                                                                     \
  do {                                                                                   \
    T *oo = (T *)o;                                                                      \
    const T *x = (const T *)b, *y = (const T *)c;                                        \
    for (size_t i = 0; i < n; i++) oo[i] = a[i * ka] ? x[i * kb] : y[i * kc];            \
  } while (0)

static void where_row(size_t es, void *o, const uint8_t *a, const void *b, const void *c,
                      size_t n, size_t ka, size_t kb, size_t kc) {
  switch (es) {
    case 1: WHERE_ROW(uint8_t); break;
    case 2: WHERE_ROW(uint16_t); break;
    case 4: WHERE_ROW(uint32_t); break;
    default: WHERE_ROW(uint64_t); break;
  }
}

/* ---- broadcast plan ---------------------------------------------------------- */

static edgert_status plan_build(const ert_node *node, ert_err *err, bc_plan *p) {
  const ert_tensor *y = node->out[0];
  const int r = y->ndim;
  const uint32_t n_in = node->n_in;
  int64_t st[BIN_MAX_IN][EDGERT_MAX_DIMS];
  if (r < 0 || r > EDGERT_MAX_DIMS)
    return ert_fail_node(err, EDGERT_ERR_SHAPE, nname(node), ": output rank %d", r);
  for (uint32_t k = 0; k < n_in; k++) {
    const ert_tensor *t = node->in[k];
    if (t->ndim < 0 || t->ndim > r)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nname(node),
                           ": input %u has rank %d, more than the output's %d", (unsigned)k, (int)t->ndim, r);
    const int off = r - t->ndim;
    int64_t s = 1;
    for (int d = r - 1; d >= 0; d--) {
      const int64_t dim = d >= off ? t->shape[d - off] : 1;
      if (dim != y->shape[d] && dim != 1)
        return ert_fail_node(err, EDGERT_ERR_SHAPE, nname(node),
                             ": input %u dimension %d (%lld) does not broadcast to the " "output's %lld",
                             (unsigned)k, d - off, (long long)dim, (long long)y->shape[d]);
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
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nname(node),
                           ": output dimension %d (%lld) is not the broadcast of the inputs", d,
                           (long long)y->shape[d]);
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
      return ert_fail_node(err, EDGERT_ERR_SHAPE, nname(node), ": internal broadcast plan error");
  return EDGERT_OK;
}

/* ---- running a plan ------------------------------------------------------------ */

typedef struct bc_job {
  bc_plan plan;
  char *out;
  const char *in[BIN_MAX_IN];
  ert_act_params act;
} bc_job;

/* One row piece of n output elements; each input advances (flag 1) or stays (0). */
static void bc_row(const bc_plan *p, void *o, const void *const *in, size_t n, int sa, int sb,
                   int sc) {
  if (p->op == B_WHERE)
    where_row((size_t)p->slot, o, (const uint8_t *)in[0], in[1], in[2], n, (size_t)sa,
              (size_t)sb, (size_t)sc);
  else if (p->slot == S_F32 && p->op <= B_PRELU && (sa || sb))
    f32_row(p->op, (float *)o, (const float *)in[0], (const float *)in[1], n, sa, sb);
  else
    generic_row(p->op, p->slot, (char *)o, (const char *)in[0], (const char *)in[1], n, sa, sb);
}

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
    const int sa = p->strides[0][r - 1] != 0, sb = n_in > 1 && p->strides[1][r - 1] != 0;
    if (!(p->slot == S_F32 && p->op <= B_DIV && (sa || sb) && ert_cpu.binary_f32 != NULL &&
          ert_cpu.binary_f32(p->op - B_ADD + ERT_BIN_ADD, (float *)o, (const float *)ptr[0],
                             (const float *)ptr[1], n, sa, sb, &j->act))) {
      bc_row(p, o, ptr, n, sa, sb, n_in > 2 && p->strides[2][r - 1] != 0);
      if (j->act.kind != ERT_ACT_NONE) ert_act_apply(&j->act, (float *)o, n);
    }
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

#if defined(ERT_X86_KERNELS)
typedef struct bc_pixels_job {
  bc_job *j;
  size_t px, c, parts;
} bc_pixels_job;

/* Parts [begin, end) of an NHWC output: its pixels as ert_pixel_parts cuts them. */
static void bc_pixels(void *arg, size_t begin, size_t end) {
  const bc_pixels_job *p = arg;
  bc_task(p->j, begin * p->px / p->parts * p->c, end * p->px / p->parts * p->c);
}
#endif

/* act: parameter words 0..2 hold a fused activation (add only). */
static void bc_run(const ert_node *node, ert_exec *ex, bool act) {
  bc_job j;
  memcpy(&j.plan, node->opdata, sizeof j.plan);
  j.out = (char *)node->out[0]->data;
  for (int k = 0; k < BIN_MAX_IN; k++)
    j.in[k] = k < (int)j.plan.n_in ? (const char *)node->in[k]->data : NULL;
  j.act.kind = act ? ert_pi(node, 0) : ERT_ACT_NONE;
  j.act.a = act ? ert_pf(node, 1) : 0.0f;
  j.act.b = act ? ert_pf(node, 2) : 0.0f;
  const size_t n = node->out[0]->numel;
#if defined(ERT_X86_KERNELS)
  if (node->layout & ERT_LAYOUT_SKIP) return; /* done by the layer before (src/layout.c) */
  if (node->layout) { /* NHWC (src/layout.c): cut at the pixels the layers around cut at */
    const ert_tensor *y = node->out[0];
    bc_pixels_job pj = {&j, (size_t)y->shape[2] * (size_t)y->shape[3], (size_t)y->shape[1], 0};
    pj.parts = ert_pixel_parts((int64_t)pj.px, 8);
    ert_parallel_for(ex, pj.parts, bc_pixels, &pj);
    return;
  }
#endif
  if (n >= BIN_PAR_MIN)
    ert_parallel_for(ex, n, bc_task, &j);
  else if (n > 0)
    bc_task(&j, 0, n);
}

/* Two inputs of one dtype among `dtypes` (a mask of 1 << S_*), an output of that dtype
 * or bool, at least n_params parameter words; with n_variants > 1, parameter word 0
 * selects op + word. */
static edgert_status bin_prepare(ert_node *node, ert_err *err, int op, unsigned dtypes,
                                 int n_variants, bool bool_out, uint32_t n_params) {
  edgert_status st = ert_check_arity(node, err, 2, 2, 1, 1);
  if (st != EDGERT_OK) return st;
  st = ert_check_params(node, err, n_params);
  if (st != EDGERT_OK) return st;
  const ert_tensor *a = node->in[0], *b = node->in[1];
  if (a->dtype != b->dtype)
    return ert_fail_node(err, EDGERT_ERR_DTYPE, nname(node), ": inputs have dtypes %s and %s",
                         ert_dtype_name(a->dtype), ert_dtype_name(b->dtype));
  const int slot = slot_of(a->dtype);
  int variant = 0;
  if (n_variants > 1) {
    variant = ert_pi(node, 0);
    if (variant < 0 || variant >= n_variants)
      return ert_fail_node(err, EDGERT_ERR_PARAM, nname(node), ": parameter 0 is %d, must be below %d",
                           variant, n_variants);
  }
  if (slot < 0 || !(dtypes & (1u << slot)))
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nname(node), ": dtype %s is not supported",
                         ert_dtype_name(a->dtype));
  st = ert_check_dtype(node, err, node->out[0], bool_out ? EDGERT_BOOL : a->dtype);
  if (st != EDGERT_OK) return st;
  bc_plan p;
  st = plan_build(node, err, &p);
  if (st != EDGERT_OK) return st;
  p.op = op + variant;
  p.slot = slot;
  memcpy(node->opdata, &p, sizeof p);
  return EDGERT_OK;
}

#define BINARY_OP(name, op, dtypes, n_variants, bool_out, n_params)               \
  edgert_status ert_##name##_prepare(ert_node *node, ert_err *err) {             \
    return bin_prepare(node, err, op, dtypes, n_variants, bool_out, n_params);   \
  }                                                                              \
  void ert_##name##_eval(const ert_node *node, ert_exec *ex) { bc_run(node, ex, false); }

BINARY_OP(sub, B_SUB, M_NUMERIC, 1, false, 0)
BINARY_OP(div, B_DIV, M_NUMERIC, 1, false, 0)
BINARY_OP(pow, B_POW, M_NUMERIC, 1, false, 0)
BINARY_OP(min, B_MIN, M_NUMERIC, 1, false, 0)
BINARY_OP(max, B_MAX, M_NUMERIC, 1, false, 0)
BINARY_OP(mod, B_MOD0, M_NUMERIC, 2, false, 1)
BINARY_OP(equal, B_EQ, M_ALL, 1, true, 0)
BINARY_OP(less, B_LT, M_NUMERIC, 1, true, 0)
BINARY_OP(less_or_equal, B_LE, M_NUMERIC, 1, true, 0)
BINARY_OP(greater, B_GT, M_NUMERIC, 1, true, 0)
BINARY_OP(greater_or_equal, B_GE, M_NUMERIC, 1, true, 0)
BINARY_OP(and, B_AND, M_BOOL, 1, false, 0)
BINARY_OP(or, B_OR, M_BOOL, 1, false, 0)
BINARY_OP(xor, B_XOR, M_BOOL, 1, false, 0)
BINARY_OP(bitshift, B_SHL, M_INTS, 2, false, 1)
BINARY_OP(bitwise_and, B_AND, M_INTS, 1, false, 0)
BINARY_OP(bitwise_or, B_OR, M_INTS, 1, false, 0)
BINARY_OP(bitwise_xor, B_XOR, M_INTS, 1, false, 0)

/* mul: with parameter words, the quantized int8 form (binary_s8.c). */
edgert_status ert_mul_prepare(ert_node *node, ert_err *err) {
  if (node->n_params > 0) return ert_mul_s8_prepare(node, err);
  return bin_prepare(node, err, B_MUL, M_NUMERIC, 1, false, 0);
}

void ert_mul_eval(const ert_node *node, ert_exec *ex) {
  if (node->n_params > 0) {
    ert_mul_s8__ref(node, ex);
    return;
  }
  bc_run(node, ex, false);
}

/* add: parameter words 0..2 are a fused activation (float32 only); more words make
 * the quantized int8 form (binary_s8.c). */
edgert_status ert_add_prepare(ert_node *node, ert_err *err) {
  if (node->n_params > 3) return ert_add_s8_prepare(node, err);
  edgert_status st = bin_prepare(node, err, B_ADD, M_NUMERIC, 1, false, 3);
  if (st != EDGERT_OK) return st;
  ert_act_params act;
  st = ert_act_read(node, 0, &act, err);
  if (st != EDGERT_OK) return st;
  if (act.kind != ERT_ACT_NONE && node->out[0]->dtype != EDGERT_FLOAT32)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nname(node),
                         ": a fused activation needs float32, got %s", ert_dtype_name(node->out[0]->dtype));
  return EDGERT_OK;
}

void ert_add_eval(const ert_node *node, ert_exec *ex) {
  if (node->n_params > 3) {
    ert_add_s8__ref(node, ex);
    return;
  }
  bc_run(node, ex, true);
}

/* prelu: the slope broadcasts to x (the output has x's shape). */
edgert_status ert_prelu_prepare(ert_node *node, ert_err *err) {
  edgert_status st = bin_prepare(node, err, B_PRELU, M_F32, 1, false, 0);
  if (st != EDGERT_OK) return st;
  return ert_check_same_shape(node, err, node->in[0], node->out[0]);
}

void ert_prelu_eval(const ert_node *node, ert_exec *ex) { bc_run(node, ex, false); }

/* where: condition (bool), x, y (one dtype, any of 1, 2, 4 or 8 bytes) broadcast
 * together. */
edgert_status ert_where_prepare(ert_node *node, ert_err *err) {
  edgert_status st = ert_check_arity(node, err, 3, 3, 1, 1);
  if (st != EDGERT_OK) return st;
  st = ert_check_dtype(node, err, node->in[0], EDGERT_BOOL);
  if (st != EDGERT_OK) return st;
  const int32_t dt = node->in[1]->dtype;
  const size_t es = ert_dtype_size(dt);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, nname(node), ": dtype %s is not supported",
                         ert_dtype_name(dt));
  st = ert_check_dtype(node, err, node->in[2], dt);
  if (st != EDGERT_OK) return st;
  st = ert_check_dtype(node, err, node->out[0], dt);
  if (st != EDGERT_OK) return st;
  bc_plan p;
  st = plan_build(node, err, &p);
  if (st != EDGERT_OK) return st;
  p.op = B_WHERE;
  p.slot = (int32_t)es;
  memcpy(node->opdata, &p, sizeof p);
  return EDGERT_OK;
}

void ert_where_eval(const ert_node *node, ert_exec *ex) { bc_run(node, ex, false); }

/* ---- shapes (bounded dimensions): numpy broadcasting of the inputs ---- */
#define BINARY_SHAPE(name) ERT_SHAPE_AS(name, ert_shape_broadcast)
BINARY_SHAPE(add) BINARY_SHAPE(sub) BINARY_SHAPE(mul) BINARY_SHAPE(div) BINARY_SHAPE(pow)
BINARY_SHAPE(min) BINARY_SHAPE(max) BINARY_SHAPE(mod) BINARY_SHAPE(equal) BINARY_SHAPE(less)
BINARY_SHAPE(less_or_equal) BINARY_SHAPE(greater) BINARY_SHAPE(greater_or_equal)
BINARY_SHAPE(and) BINARY_SHAPE(or) BINARY_SHAPE(xor) BINARY_SHAPE(bitshift)
BINARY_SHAPE(bitwise_and) BINARY_SHAPE(bitwise_or) BINARY_SHAPE(bitwise_xor) BINARY_SHAPE(where)
ERT_SHAPE_AS(prelu, ert_shape_same)
