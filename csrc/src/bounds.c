/* bounds.c: bounded dimensions. A file with a BOUNDS section is planned for the upper
 * bounds of its symbols; a session runs it at any sizes within them by recomputing,
 * before a run whose input shapes changed, the output shapes of every node that depends
 * on an input (the op's shape function, then the file's rules) and preparing that node
 * again on the session's own copy. Shape programs: where a shape function reads values
 * (range's operands, expand's target), the nodes computing those values from constants
 * and tensor shapes (value nodes) also run in that pass. Nothing here allocates after
 * load. */
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
  ert_free(b->dyn_nodes);
  ert_free(b->param_base);
  ert_free(b->value_nodes);
  ert_free(b);
}

static const char *op_of(const ert_node *n, ert_op_impl *impl) {
  const char *op = ert_op_lookup((uint32_t)n->op, impl);
  return op != NULL ? op : "?";
}

/* Applies the output rules of node `n` (rules [r0, r1)); the PARAM rules were applied
 * before its shape function ran. */
static edgert_status out_rules(ert_node *n, const ert_rule *r0, const ert_rule *r1, ert_err *err) {
  for (const ert_rule *r = r0; r < r1; r++) {
    if (r->kind != ERT_RULE_OUTDIM && r->kind != ERT_RULE_INFER) continue;
    ert_tensor *y = n->out[r->target / 8];
    const uint32_t d = r->target % 8;
    const ert_tensor *x = n->in[r->in];
    int64_t dims[EDGERT_MAX_DIMS];
    for (int32_t k = 0; k < y->ndim; k++) dims[k] = y->shape[k];
    if (r->kind == ERT_RULE_OUTDIM) {
      dims[d] = (int64_t)x->shape[r->in_dim] + r->add;
    } else {
      size_t rest = 1;
      for (int32_t k = 0; k < y->ndim; k++)
        if ((uint32_t)k != d) rest *= (size_t)dims[k];
      if (rest == 0 || x->numel % rest != 0)
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

/* The value a PARAM, PARAM_SYM or SAME rule gives; sym: the symbols' values. */
static int64_t param_value(const ert_node *n, const ert_rule *r, const int64_t *sym) {
  if (r->kind == ERT_RULE_PARAM_SYM) return sym[r->in] + r->add;
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

static bool is_param(const ert_rule *r) {
  return r->kind == ERT_RULE_PARAM || r->kind == ERT_RULE_PARAM_SYM || r->kind == ERT_RULE_RESIZE_NEAREST ||
         r->kind == ERT_RULE_SAME;
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

/* Nearest resize (rules [r0, r1) include its RESIZE_NEAREST ones; see runtime.h): the
 * output shape and index tables for the input's actual shape. The tables are written to
 * `words` (the session's parameter copy) or, when `words` is NULL, compared with the
 * node's parameter words (at load, on the file's upper-bound shapes). */
static edgert_status resize_rules(ert_node *n, const ert_rule *r0, const ert_rule *r1, uint32_t *words,
                                  uint32_t capacity, ert_err *err) {
  const ert_tensor *x = n->in[0];
  ert_tensor *y = n->out[0];
  const int32_t r = ert_pi(n, 1);
  if (ert_pi(n, 0) != 0 || r != x->ndim || r != y->ndim || capacity < 3u + (uint32_t)r)
    return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, " (resize): BOUNDS rules need a nearest resize");
  int64_t dims[EDGERT_MAX_DIMS];
  uint64_t pos = 3u + (uint32_t)r;
  for (int32_t d = 0; d < r; d++) {
    const int32_t taps = ert_pi(n, 3 + (uint32_t)d);
    int64_t scale = 0;
    for (const ert_rule *q = r0; q < r1; q++)
      if (q->kind == ERT_RULE_RESIZE_NEAREST && q->in_dim == (uint32_t)d) scale = q->add;
    if (taps == 0) {
      dims[d] = x->shape[d];
      continue;
    }
    if (taps != 1 || scale < 1)
      return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name, " (resize): axis %d has no BOUNDS scale", (int)d);
    dims[d] = x->shape[d] * scale;
    if ((uint64_t)dims[d] > capacity - pos)
      return ert_fail_node(err, EDGERT_ERR_SHAPE, n->name, " (resize): tables exceed the parameter words");
    for (int64_t o = 0; o < dims[d]; o++) {
      const uint32_t v = (uint32_t)(o / scale);
      if (words != NULL) {
        words[pos + (uint64_t)o] = v;
      } else if (n->params[pos + (uint64_t)o] != v) {
        return ert_fail_node(err, EDGERT_ERR_FORMAT, n->name,
                             " (resize): axis %d table differs from its BOUNDS scale", (int)d);
      }
    }
    pos += (uint64_t)dims[d];
  }
  ert_tensor_set_shape(y, r, dims);
  if (words != NULL) n->n_params = (uint32_t)pos; /* prepare wants the tables' exact length */
  return EDGERT_OK;
}

/* The node's output shapes: its RESIZE_NEAREST rules, else its op's shape function. */
static edgert_status node_shape(ert_node *n, const ert_op_impl *impl, const ert_rule *r0, const ert_rule *r1,
                                uint32_t *words, uint32_t capacity, ert_err *err) {
  for (const ert_rule *q = r0; q < r1; q++)
    if (q->kind == ERT_RULE_RESIZE_NEAREST) return resize_rules(n, r0, r1, words, capacity, err);
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
    for (uint32_t q = r0; q < r && st == EDGERT_OK; q++)
      if (is_param(&b->rules[q]) && b->rules[q].kind != ERT_RULE_RESIZE_NEAREST &&
          param_value(n, &b->rules[q], hi) != ert_pi(n, b->rules[q].target))
        st = ert_fail_node(err, EDGERT_ERR_FORMAT, n->name,
                           " (%s): BOUNDS rule for parameter %u gives %lld, the file has %d", op,
                           (unsigned)b->rules[q].target, (long long)param_value(n, &b->rules[q], hi),
                           (int)ert_pi(n, b->rules[q].target));
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
    if (st == EDGERT_OK) st = out_rules(n, q0, q1, err);
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
    for (uint32_t q = r0; q < r; q++)
      if (is_param(&b->rules[q]) && b->rules[q].kind != ERT_RULE_RESIZE_NEAREST)
        words[b->rules[q].target] = (uint32_t)(int32_t)param_value(n, &b->rules[q], val);
    ert_op_impl impl;
    const char *op = op_of(n, &impl);
    const ert_rule *q0 = b->rules != NULL ? b->rules + r0 : NULL; /* no rules: NULL, not NULL + 0 */
    const ert_rule *q1 = b->rules != NULL ? b->rules + r : NULL;
    edgert_status st = node_shape(n, &impl, q0, q1, words, m->nodes[i].n_params, err);
    if (st == EDGERT_OK) st = out_rules(n, q0, q1, err);
    if (st != EDGERT_OK) return st;
    for (uint32_t k = 0; k < n->n_out; k++) {
      const ert_tensor *y = n->out[k];
      const ert_tensor *planned = &m->tensors[y - tensors];
      uint64_t count = 1; /* the element count again, without overflow (rules come from the file) */
      bool over = false;
      for (int32_t d = 0; d < y->ndim; d++) {
        const uint64_t v = y->shape[d] < 0 ? UINT64_MAX : (uint64_t)y->shape[d];
        over = over || (v != 0 && count > planned->numel / v) || y->shape[d] < 0;
        count = over ? count : count * v;
      }
      if (over || y->nbytes > planned->nbytes)
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
