/* bounds.c: bounded dimensions. A file with a BOUNDS section is planned for the upper
 * bounds of its symbols; a session runs it at any sizes within them by recomputing,
 * before a run whose input shapes changed, the output shapes of every node that depends
 * on an input (the op's shape function, then the file's rules) and preparing that node
 * again on the session's own copy. Shape programs: where a shape function reads values
 * (range's operands, expand's target, tile's repeats), the nodes computing those values
 * from constants and tensor shapes (value nodes) also run in that pass. Nothing here
 * allocates after load. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "runtime.h"

enum {
#define ERT_OP(code, name) OP_##name = code,
#include "edgert_ops.def"
#undef ERT_OP
};

void ert_bounds_free(ert_bounds *b) {
  if (b == NULL) return;
  ert_free(b->binds);
  ert_free(b->rules);
  ert_free(b->code);
  ert_free(b->dyn_nodes);
  ert_free(b->param_base);
  ert_free(b->value_nodes);
  ert_free(b);
}

static const char *op_of(const ert_node *n, ert_op_impl *impl) {
  const char *op = ert_op_lookup((uint32_t)n->op, impl);
  return op != NULL ? op : "?";
}

/* ---- expression programs ------------------------------------------------------------- */

static int32_t x_arg(uint32_t w) { return (int32_t)(w & 0xFFFFFF00u) >> 8; }

edgert_status ert_expr_check(const uint32_t *code, uint32_t len, uint32_t n_syms, const ert_node *n, ert_err *err) {
  uint32_t depth = 0;
  if (len == 0 || len > ERT_X_MAX_WORDS)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, ": BOUNDS expression of %u words", (unsigned)len);
  for (uint32_t k = 0; k < len; k++) {
    const uint32_t op = code[k] & 0xFFu;
    const int32_t arg = x_arg(code[k]);
    bool ok = true;
    if (op == ERT_X_CONST || op == ERT_X_SYM || op == ERT_X_DIM || op == ERT_X_CONST32) {
      depth++;
      if (op == ERT_X_SYM) ok = arg >= 0 && (uint32_t)arg < n_syms;
      if (op == ERT_X_DIM) {
        const uint32_t in = (uint32_t)arg >> 3, d = (uint32_t)arg & 7u;
        ok = arg >= 0 && in < n->n_in && n->in[in] != NULL && d < (uint32_t)n->in[in]->ndim;
      }
      if (op == ERT_X_CONST32) ok = ++k < len;
    } else if (op == ERT_X_NEG) {
      ok = depth >= 1;
    } else if (op >= ERT_X_ADD && op <= ERT_X_MAX) {
      ok = depth >= 2;
      depth--;
    } else {
      ok = false;
    }
    if (!ok || depth > ERT_X_MAX_STACK)
      return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, ": BOUNDS expression word %u is invalid", (unsigned)k);
  }
  if (depth != 1)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, ": BOUNDS expression leaves %u values", (unsigned)depth);
  return EDGERT_OK;
}

/* |v| stays below 2^62: sums of two such values cannot overflow int64. */
#define X_LIMIT ((int64_t)1 << 62)

/* Evaluates a checked program over the symbols' values and node n's input dims (floor
 * division and modulo); EDGERT_ERR_SHAPE naming the node on a division by zero or a
 * value beyond 2^62. */
static edgert_status expr_eval(const uint32_t *code, uint32_t len, const int64_t *sym, const ert_node *n,
                               int64_t *out, ert_err *err) {
  int64_t st[ERT_X_MAX_STACK];
  uint32_t top = 0;
  for (uint32_t k = 0; k < len; k++) {
    const uint32_t op = code[k] & 0xFFu;
    const int32_t arg = x_arg(code[k]);
    if (op == ERT_X_CONST) {
      st[top++] = arg;
    } else if (op == ERT_X_CONST32) {
      st[top++] = (int32_t)code[++k];
    } else if (op == ERT_X_SYM) {
      st[top++] = sym[arg];
    } else if (op == ERT_X_DIM) {
      st[top++] = n->in[(uint32_t)arg >> 3]->shape[(uint32_t)arg & 7u];
    } else if (op == ERT_X_NEG) {
      st[top - 1] = -st[top - 1];
    } else {
      const int64_t b = st[--top], a = st[top - 1];
      int64_t v = 0;
      switch (op) {
        case ERT_X_ADD: v = a + b; break;
        case ERT_X_SUB: v = a - b; break;
        case ERT_X_MUL:
          if (a != 0 && (b > X_LIMIT / (a < 0 ? -a : a) || b < -X_LIMIT / (a < 0 ? -a : a)))
            return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, ": a BOUNDS expression overflows");
          v = a * b;
          break;
        case ERT_X_FLOORDIV:
        case ERT_X_MOD: {
          if (b == 0) return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, ": a BOUNDS expression divides by zero");
          int64_t q = a / b, r = a % b;
          if (r != 0 && ((r < 0) != (b < 0))) {
            q--;
            r += b;
          }
          v = op == ERT_X_FLOORDIV ? q : r;
          break;
        }
        case ERT_X_MIN: v = a < b ? a : b; break;
        default: v = a > b ? a : b; break;
      }
      st[top - 1] = v;
    }
    if (st[top - 1] >= X_LIMIT || st[top - 1] <= -X_LIMIT)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, ": a BOUNDS expression overflows");
  }
  *out = st[0];
  return EDGERT_OK;
}

/* Applies the output rules of node `n` (rules [r0, r1)); the PARAM rules were applied
 * before its shape function ran. */
static edgert_status out_rules(const ert_bounds *b, ert_node *n, const ert_rule *r0, const ert_rule *r1,
                               const int64_t *sym, ert_err *err) {
  for (const ert_rule *r = r0; r < r1; r++) {
    if (r->kind != ERT_RULE_OUTDIM && r->kind != ERT_RULE_INFER && r->kind != ERT_RULE_OUTDIM_EXPR) continue;
    ert_tensor *y = n->out[r->target / 8];
    const uint32_t d = r->target % 8;
    const ert_tensor *x = r->kind == ERT_RULE_OUTDIM_EXPR ? NULL : n->in[r->in];
    int64_t dims[EDGERT_MAX_DIMS];
    for (int32_t k = 0; k < y->ndim; k++) dims[k] = y->shape[k];
    if (r->kind == ERT_RULE_OUTDIM_EXPR) {
      const edgert_status st = expr_eval(b->code + r->in, r->in_dim, sym, n, &dims[d], err);
      if (st != EDGERT_OK) return st;
    } else if (r->kind == ERT_RULE_OUTDIM) {
      dims[d] = (int64_t)x->shape[r->in_dim] + r->add;
    } else {
      size_t rest = 1;
      for (int32_t k = 0; k < y->ndim; k++)
        if ((uint32_t)k != d) rest *= (size_t)dims[k];
      if (x == NULL || rest == 0 || x->numel % rest != 0)
        return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name,
                             ": %zu elements do not fill the other dims (%zu)", x->numel, rest);
      dims[d] = (int64_t)(x->numel / rest);
    }
    if (dims[d] < 0 || dims[d] > INT32_MAX)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, ": output dim %u would be %lld", (unsigned)d,
                           (long long)dims[d]);
    ert_tensor_set_shape(y, y->ndim, dims);
  }
  return EDGERT_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The value a PARAM, PARAM_SYM, SAME or SLICE rule gives parameter word `word` (a SLICE
 * rule sets its start word, `target`, and its size word, target + 2); sym: the symbols'
 * values; w: the node's parameter words (a slice's step, target + 1). */
static int64_t param_value(const ert_node *n, const ert_rule *r, const int64_t *sym, const uint32_t *w,
                           uint32_t word) {
  if (r->kind == ERT_RULE_PARAM_SYM) return sym[r->in] + r->add;
  if (r->kind == ERT_RULE_SLICE) {
    /* ONNX Slice on the actual dim: start `add`, end `in` (int32, clamped by the converter). */
    const int64_t dim = n->in[0]->shape[r->in_dim], step = (int32_t)w[r->target + 1];
    int64_t start = r->add, end = (int32_t)r->in, count;
    start += start < 0 ? dim : 0;
    end += end < 0 ? dim : 0;
    if (step > 0) {
      start = clamp64(start, 0, dim);
      count = clamp64(end, 0, dim) - start;
      count = count > 0 ? (count + step - 1) / step : 0;
    } else {
      start = clamp64(start, 0, dim - 1);
      count = start - clamp64(end, -1, dim - 1);
      count = count > 0 ? (count - step - 1) / -step : 0;
    }
    return word == r->target ? (count > 0 ? start : 0) : count;
  }
  const int64_t x = n->in[r->in]->shape[r->in_dim];
  if (r->kind != ERT_RULE_SAME) return x + r->add;
  /* ONNX auto_pad SAME: ceil(x / stride) outputs; the odd pad goes at the end (UPPER)
   * or at the beginning (LOWER). */
  const uint32_t a = (uint32_t)r->add, k = a & 0xFFFFu, stride = (a >> 16) & 0xFFFu;
  const int64_t total = ((x + stride - 1) / stride - 1) * stride + k - x;
  if (total <= 0) return 0;
  const bool end = (a >> 28) & 1u, lower = (a >> 29) & 1u;
  return end != lower ? total - total / 2 : total / 2;
}

static bool is_resize(const ert_rule *r) {
  return r->kind == ERT_RULE_RESIZE_NEAREST || r->kind == ERT_RULE_RESIZE;
}

static bool is_param(const ert_rule *r) {
  return r->kind == ERT_RULE_PARAM || r->kind == ERT_RULE_PARAM_SYM || is_resize(r) || r->kind == ERT_RULE_SAME ||
         r->kind == ERT_RULE_SLICE || r->kind == ERT_RULE_PARAM_EXPR;
}

/* The value of parameter word `word` set by rule r: param_value, or an EXPR rule's
 * program (which may fail: division by zero, overflow, a value beyond int32). */
static edgert_status rule_word(const ert_bounds *b, const ert_node *n, const ert_rule *r, const int64_t *sym,
                               const uint32_t *w, uint32_t word, int64_t *out, ert_err *err) {
  if (r->kind != ERT_RULE_PARAM_EXPR) {
    *out = param_value(n, r, sym, w, word);
    return EDGERT_OK;
  }
  const edgert_status st = expr_eval(b->code + r->in, r->in_dim, sym, n, out, err);
  if (st == EDGERT_OK && (*out < INT32_MIN || *out > INT32_MAX))
    return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, ": parameter %u would be %lld", (unsigned)word,
                         (long long)*out);
  return st;
}

/* One past the last parameter word a rule sets through param_value: it sets target
 * (and a SLICE rule target + 2 too); a resize rule (tables) or an output rule none. */
static uint32_t words_end(const ert_rule *r) {
  if (!is_param(r) || is_resize(r)) return r->target;
  return r->target + (r->kind == ERT_RULE_SLICE ? 3u : 1u);
}

uint64_t ert_bounds_residues(const ert_bounds *b, uint32_t sym, uint32_t *step) {
  *step = 1;
  for (uint32_t q = b->n_rules; q-- > 0 && b->rules[q].node == ERT_RULE_NO_NODE;)
    if (b->rules[q].in == sym) {
      *step = b->rules[q].target;
      return b->rules[q].in_dim | (uint64_t)(uint32_t)b->rules[q].add << 32;
    }
  return 1;
}

edgert_status ert_bounds_step(const ert_bounds *b, uint32_t sym, int64_t v, const char *input, size_t dim,
                              ert_err *err) {
  uint32_t step;
  const uint64_t mask = ert_bounds_residues(b, sym, &step);
  if (step < 2 || (mask >> (v % step) & 1u)) return EDGERT_OK;
  char list[160] = "";
  size_t len = 0;
  for (uint32_t r = 0; r < step && len + 12 < sizeof list; r++)
    if (mask >> r & 1u) len += (size_t)snprintf(list + len, sizeof list - len, len ? ", %u" : "%u", (unsigned)r);
  const ert_sym *y = &b->syms[sym];
  return ert_fail(err, EDGERT_ERR_SHAPE,
                  "input '%s' dim %zu is %lld: the model runs '%s' = %u*k + r only, r in {%s} (here r = %u), "
                  "within %lld..%lld",
                  input, dim, (long long)v, y->name, (unsigned)step, list, (unsigned)(v % step), (long long)y->lo,
                  (long long)y->hi);
}

/* Source coordinate of output index o along an axis (ONNX coordinate_transformation_mode,
 * RESIZE rule codes), snapped to a whole number within 1e-9 as the converter does
 * (edgert/converter/ops/resize.py, _x_original). */
static double resize_x(uint32_t coord, double o, double scale, int64_t n_in, int64_t n_out) {
  double x;
  if (coord == ERT_RESIZE_ALIGN_CORNERS) {
    x = n_out == 1 ? 0.0 : o * (double)(n_in - 1) / (double)(n_out - 1);
  } else if (coord == ERT_RESIZE_ASYMMETRIC) {
    x = o / scale;
  } else {
    x = coord == ERT_RESIZE_PYTORCH_HALF_PIXEL && n_out == 1 ? 0.0 : (o + 0.5) / scale - 0.5;
  }
  const double r = floor(x + 0.5);
  return fabs(x - r) < 1e-9 ? r : x;
}

/* A resize with RESIZE or RESIZE_NEAREST rules (rules [r0, r1)): the output shape and,
 * for the input's actual shape, the index (and, linear, weight) tables of every resized
 * axis, as the converter computes them. The tables are written to `words` (the
 * session's parameter copy) or, when `words` is NULL, compared with the node's
 * parameter words (at load, on the file's upper-bound shapes). */
static edgert_status resize_rules(ert_node *n, const ert_rule *r0, const ert_rule *r1, uint32_t *words,
                                  uint32_t capacity, ert_err *err) {
  const ert_tensor *x = n->in[0];
  ert_tensor *y = n->out[0];
  const int32_t r = ert_pi(n, 1);
  const bool linear = ert_pi(n, 0) == 1;
  if (ert_pi(n, 0) > 1 || r != x->ndim || r != y->ndim || capacity < 3u + (uint32_t)r)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, " (resize): BOUNDS rules need a nearest or linear resize");
  int64_t dims[EDGERT_MAX_DIMS];
  uint64_t pos = 3u + (uint32_t)r;
  for (int32_t d = 0; d < r; d++) {
    const uint32_t taps = (uint32_t)ert_pi(n, 3 + (uint32_t)d);
    const ert_rule *rule = NULL;
    for (const ert_rule *q = r0; q < r1; q++)
      if ((q->kind == ERT_RULE_RESIZE_NEAREST || q->kind == ERT_RULE_RESIZE) && q->in_dim == (uint32_t)d) rule = q;
    dims[d] = x->shape[d];
    if (taps == 0) continue;
    if (taps != (linear ? 2u : 1u) || rule == NULL)
      return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, " (resize): axis %d has no BOUNDS rule", (int)d);
    /* RESIZE_NEAREST: asymmetric, floor, by the integer `add`. RESIZE: `target` codes,
     * `add` the float32 scale's bits, or the output length fixed (scale = out / in). */
    uint32_t code = ERT_RESIZE_ASYMMETRIC | ERT_RESIZE_FLOOR << 3;
    double scale = (double)rule->add;
    if (rule->kind == ERT_RULE_RESIZE) {
      code = rule->target;
      float f;
      memcpy(&f, &rule->add, sizeof f);
      scale = (double)f;
    }
    const int64_t n_in = x->shape[d];
    const double len = code & ERT_RESIZE_FIXED_OUT ? (double)y->shape[d] : scale * (double)n_in;
    if (code & ERT_RESIZE_FIXED_OUT) scale = n_in > 0 ? len / (double)n_in : 0.0;
    dims[d] = len >= 0.0 && len < 2147483648.0 ? (int64_t)len : -1; /* no cast of an out-of-range double */
    if (n_in == 0 || !(scale > 0.0) || dims[d] < 0 || (uint64_t)dims[d] * taps * (linear ? 2u : 1u) > capacity - pos)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, " (resize): axis %d cannot be resized to %lld", (int)d,
                           (long long)dims[d]);
    const uint32_t coord = code & 7u, mode = (code >> 3) & 7u;
    for (int64_t o = 0; o < dims[d]; o++) {
      const double xo = resize_x(coord, (double)o, scale, n_in, dims[d]);
      const double fl = floor(xo);
      const double ratio = xo == fl ? 1.0 : xo - fl;
      const int64_t i0 = (int64_t)fl - (xo == fl);
      uint32_t v[4] = {(uint32_t)clamp64(i0, 0, n_in - 1), (uint32_t)clamp64(i0 + 1, 0, n_in - 1), 0, 0};
      if (linear) {
        const float w[2] = {(float)(1.0 - ratio), (float)ratio};
        memcpy(&v[2], w, sizeof w);
      } else {
        const uint32_t m = mode == ERT_RESIZE_SIMPLE ? (scale >= 1.0 ? ERT_RESIZE_FLOOR : ERT_RESIZE_CEIL) : mode;
        const bool second = ratio == 1.0 || (m == ERT_RESIZE_ROUND_PREFER_FLOOR && ratio > 0.5) ||
                            (m == ERT_RESIZE_ROUND_PREFER_CEIL && ratio >= 0.5) || m == ERT_RESIZE_CEIL;
        v[0] = second ? v[1] : v[0];
      }
      /* Layout: the axis's indices (taps each), then its weights (linear). */
      const uint64_t ix = pos + (uint64_t)o * taps, wx = ix + (uint64_t)dims[d] * taps;
      const uint64_t at[4] = {ix, ix + 1, wx, wx + 1};
      for (uint32_t k = 0; k < (linear ? 4u : 1u); k++) {
        const uint64_t p = at[k];
        if (words != NULL) {
          words[p] = v[k];
        } else if (n->params[p] != v[k]) {
          return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name,
                               " (resize): axis %d table differs from its BOUNDS rule", (int)d);
        }
      }
    }
    pos += (uint64_t)dims[d] * taps * (linear ? 2u : 1u);
  }
  ert_tensor_set_shape(y, r, dims);
  if (words != NULL) n->n_params = (uint32_t)pos; /* prepare wants the tables' exact length */
  return EDGERT_OK;
}

/* The node's output shapes: its RESIZE_NEAREST rules, else its op's shape function. */
static edgert_status node_shape(ert_node *n, const ert_op_impl *impl, const ert_rule *r0, const ert_rule *r1,
                                uint32_t *words, uint32_t capacity, ert_err *err) {
  for (const ert_rule *q = r0; q < r1; q++)
    if (q->kind == ERT_RULE_RESIZE_NEAREST || q->kind == ERT_RULE_RESIZE)
      return resize_rules(n, r0, r1, words, capacity, err);
  return impl->shape(n, err);
}

/* The inputs whose values node n's shape function reads, as bits. */
static uint32_t value_inputs(const ert_node *n) {
  return n->op == OP_range ? 7u : n->op == OP_expand || n->op == OP_tile ? 2u : 0u;
}

/* Marks the value nodes (backwards: a node is one when a shape function or another value
 * node reads its output's values; shape reads no value of its input) and checks that
 * their values come from constants and shapes alone, and that their outputs, which the
 * shape pass writes before a run, share no arena bytes with a graph input. */
static edgert_status mark_values(edgert_model *m, uint8_t *need, ert_err *err) {
  ert_bounds *b = m->bounds;
  for (uint32_t i = m->n_nodes; i-- > 0;) {
    const ert_node *n = &m->nodes[i];
    for (uint32_t k = 0; k < n->n_out; k++) b->value_nodes[i] |= need[n->out[k] - m->tensors];
    const bool all = b->value_nodes[i] && n->op != OP_shape;
    for (uint32_t k = 0; k < n->n_in; k++)
      if (n->in[k] != NULL && (all || (k < 32 && (value_inputs(n) >> k & 1u)))) need[n->in[k] - m->tensors] = 1;
  }
  for (uint32_t j = 0; j < m->n_inputs; j++) {
    const ert_tensor *x = &m->tensors[m->inputs[j]];
    if (need[m->inputs[j]])
      return ert_fail(err, EDGERT_ERR_FORMAT, "BOUNDS: a shape follows the values of input '%s'", x->name);
    for (uint32_t i = 0; i < m->n_nodes; i++)
      for (uint32_t k = 0; b->value_nodes[i] && k < m->nodes[i].n_out; k++) {
        const ert_tensor *y = m->nodes[i].out[k];
        if (ert_ranges_overlap(y->offset, y->nbytes, x->offset, x->nbytes))
          return ert_fail_node(err, EDGERT_ERR_FORMAT, m->nodes[i].name,
                               ": its output '%s' is computed before a run, over input '%s'", y->name, x->name);
      }
  }
  return EDGERT_OK;
}

edgert_status ert_bounds_check(edgert_model *m, ert_err *err) {
  ert_bounds *b = m->bounds;
  uint8_t *dyn = ert_calloc(m->n_tensors > 0 ? m->n_tensors : 1, 1);
  b->param_base = ert_calloc(m->n_nodes > 0 ? m->n_nodes : 1, sizeof *b->param_base);
  b->dyn_nodes = ert_calloc(m->n_nodes > 0 ? m->n_nodes : 1, sizeof *b->dyn_nodes);
  b->value_nodes = ert_calloc(m->n_nodes > 0 ? m->n_nodes : 1, 1);
  if (dyn == NULL || b->param_base == NULL || b->dyn_nodes == NULL || b->value_nodes == NULL) {
    ert_free(dyn);
    return ert_fail(err, EDGERT_ERR_NO_MEMORY, "out of memory");
  }
  edgert_status st = mark_values(m, dyn, err);
  memset(dyn, 0, m->n_tensors);
  if (st != EDGERT_OK) {
    ert_free(dyn);
    return st;
  }
  for (uint32_t i = 0; i < b->n_binds; i++) dyn[m->inputs[b->binds[i].input]] = 1;
  int64_t hi[ERT_MAX_SYMBOLS];
  for (uint32_t k = 0; k < b->n_syms; k++) hi[k] = b->syms[k].hi;
  uint32_t r = 0;
  for (uint32_t i = 0; i < m->n_nodes && st == EDGERT_OK; i++) {
    ert_node *n = &m->nodes[i];
    const uint32_t r0 = r;
    bool has_param = false;
    while (r < b->n_rules && b->rules[r].node == i) has_param |= is_param(&b->rules[r++]);
    bool is_dyn = r > r0 || b->value_nodes[i];
    for (uint32_t k = 0; k < n->n_in; k++) is_dyn |= n->in[k] != NULL && dyn[n->in[k] - m->tensors];
    b->param_base[i] = ERT_ABSENT;
    if (!is_dyn) continue;
    b->dyn_nodes[b->n_dyn++] = i;
    if (has_param) {
      b->param_base[i] = (uint32_t)b->n_param_words;
      b->n_param_words += n->n_params;
    }
    for (uint32_t k = 0; k < n->n_out; k++) dyn[n->out[k] - m->tensors] = 1;

    /* At the upper bounds, the rules and the shape function must give the file's values. */
    ert_op_impl impl;
    const char *op = op_of(n, &impl);
    for (uint32_t q = r0; q < r && st == EDGERT_OK; q++) {
      const ert_rule *rule = &b->rules[q];
      for (uint32_t w = rule->target; st == EDGERT_OK && w < words_end(rule); w += 2) {
        int64_t v = 0;
        st = rule_word(b, n, rule, hi, n->params, w, &v, err);
        if (st == EDGERT_OK && v != ert_pi(n, w))
          st = ert_fail_node(err, EDGERT_ERR_FORMAT, n->name,
                             " (%s): BOUNDS rule for parameter %u gives %lld, the file has %d", op, (unsigned)w,
                             (long long)v, (int)ert_pi(n, w));
      }
    }
    if (st != EDGERT_OK) break;
    if (n->n_out > 8) {
      st = ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, n->name,
                         " (%s): too many outputs for bounded dimensions", op);
      break;
    }
    ert_tensor saved[8];
    for (uint32_t k = 0; k < n->n_out; k++) saved[k] = *n->out[k];
    const ert_rule *q0 = b->rules != NULL ? b->rules + r0 : NULL; /* no rules: NULL, not NULL + 0 */
    const ert_rule *q1 = b->rules != NULL ? b->rules + r : NULL;
    st = node_shape(n, &impl, q0, q1, NULL, n->n_params, err);
    if (st == EDGERT_OK) st = out_rules(b, n, q0, q1, hi, err);
    for (uint32_t k = 0; k < n->n_out; k++) {
      ert_tensor *y = n->out[k];
      if (st == EDGERT_OK && (y->ndim != saved[k].ndim || y->nbytes != saved[k].nbytes ||
                              memcmp(y->shape, saved[k].shape, sizeof y->shape) != 0))
        st = ert_fail_node(err, EDGERT_ERR_FORMAT, n->name,
                           " (%s): output '%s' computes to another shape than the file's at the upper bounds",
                           op, y->name);
      *y = saved[k];
    }
  }
  ert_free(dyn);
  return st;
}

edgert_status ert_bounds_apply(const edgert_model *m, ert_tensor *tensors, ert_node *nodes, ert_exec *ex,
                               ert_err *err) {
  const ert_bounds *b = m->bounds;
  int64_t val[ERT_MAX_SYMBOLS];
  uint32_t from[ERT_MAX_SYMBOLS];
  for (uint32_t k = 0; k < b->n_syms; k++) val[k] = -1;
  for (uint32_t i = 0; i < b->n_binds; i++) {
    const ert_bind *d = &b->binds[i];
    const ert_tensor *t = &tensors[m->inputs[d->input]];
    const int64_t v = t->shape[d->dim];
    if (val[d->sym] < 0) {
      val[d->sym] = v;
      from[d->sym] = i;
      continue;
    }
    if (v != val[d->sym]) {
      const ert_bind *f = &b->binds[from[d->sym]];
      return ert_fail(err, EDGERT_ERR_SHAPE,
                      "input '%s' dim %u is %lld but input '%s' dim %u is %lld: both are '%s'", t->name,
                      (unsigned)d->dim, (long long)v, tensors[m->inputs[f->input]].name, (unsigned)f->dim,
                      (long long)val[d->sym], b->syms[d->sym].name);
    }
  }
  uint32_t r = 0;
  for (uint32_t j = 0; j < b->n_dyn; j++) {
    const uint32_t i = b->dyn_nodes[j];
    ert_node *n = &nodes[i];
    while (r < b->n_rules && b->rules[r].node < i) r++;
    const uint32_t r0 = r;
    while (r < b->n_rules && b->rules[r].node == i) r++;
    uint32_t *words = (uint32_t *)(uintptr_t)n->params; /* the session's copy when rules write it */
    for (uint32_t q = r0; q < r; q++) {
      const ert_rule *rule = &b->rules[q];
      for (uint32_t w = rule->target; w < words_end(rule); w += 2) {
        int64_t v = 0;
        const edgert_status st = rule_word(b, n, rule, val, words, w, &v, err);
        if (st != EDGERT_OK) return st;
        words[w] = (uint32_t)(int32_t)v;
      }
    }
    ert_op_impl impl;
    const char *op = op_of(n, &impl);
    const ert_rule *q0 = b->rules != NULL ? b->rules + r0 : NULL; /* no rules: NULL, not NULL + 0 */
    const ert_rule *q1 = b->rules != NULL ? b->rules + r : NULL;
    edgert_status st = node_shape(n, &impl, q0, q1, words, m->nodes[i].n_params, err);
    if (st == EDGERT_OK) st = out_rules(b, n, q0, q1, val, err);
    if (st != EDGERT_OK) return st;
    for (uint32_t k = 0; k < n->n_out; k++) {
      const ert_tensor *y = n->out[k];
      const ert_tensor *planned = &m->tensors[y - tensors];
      uint64_t count = 1; /* the element count again, without overflow (rules come from the file) */
      bool over = false, empty = false, neg = false; /* a partial product may pass numel when a later dim is 0 */
      for (int32_t d = 0; d < y->ndim; d++) {
        const uint64_t v = y->shape[d] < 0 ? UINT64_MAX : (uint64_t)y->shape[d];
        over = over || (v != 0 && count > planned->numel / v);
        empty = empty || y->shape[d] == 0;
        neg = neg || y->shape[d] < 0;
        count = over ? count : count * v;
      }
      if (neg || (over && !empty) || y->nbytes > planned->nbytes)
        return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name,
                             " (%s): output '%s' needs %zu bytes, more than the %zu planned for the "
                             "upper bounds",
                             op, y->name, y->nbytes, planned->nbytes);
    }
    st = impl.prepare(n, err);
    if (st != EDGERT_OK) {
      if (err->msg != NULL && err->size > 0 && err->msg[0] == '\0')
        ert_fail_node(err, st, n->name, " (%s): %s", op, edgert_status_str(st));
      return st;
    }
    if (b->value_nodes[i]) {
      m->evals[i](n, ex);
      if (ex->failed) return ex->fail_status;
    }
  }
  return EDGERT_OK;
}
