/* ops.c: the op dispatch, built from edgert_ops.def, and the fallback
 * definitions used for ops whose kernel is not compiled into this build.
 *
 * Each fallback is a weak symbol: a kernel file in csrc/kernels/ref/ that defines
 * ert_<name>_prepare / ert_<name>_eval replaces it at link time. Static archives
 * must therefore be linked whole (the Makefile prelinks libedgert.a into a single
 * object for that reason). */
#include "internal.h"

#if defined(__GNUC__)
#define ERT_WEAK __attribute__((weak))
#else
#error "ops.c needs weak symbols (GCC or Clang)"
#endif

/* The shape fallback: a bounded dimension reaching an op without a shape function. */
static edgert_status no_shape(const ert_node *n, ert_err *err, const char *op) {
  return ert_fail_node(err, EDGERT_ERR_UNSUPPORTED, n->name,
                       ": op %s does not support bounded dimensions yet", op);
}

#define ERT_OP(code, name)                                                          \
  ERT_WEAK edgert_status ert_##name##_prepare(ert_node *node, ert_err *err) {       \
    (void)node;                                                                     \
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED_OP, "op '%s' has no kernel in this build", \
                    #name);                                                         \
  }                                                                                 \
  ERT_WEAK void ert_##name##_eval(const ert_node *node, ert_exec *ex) {             \
    (void)node;                                                                     \
    (void)ex;                                                                       \
  }                                                                                 \
  ERT_WEAK edgert_status ert_##name##_shape(ert_node *node, ert_err *err) {         \
    return no_shape(node, err, #name);                                              \
  }
#include "edgert_ops.def"
#undef ERT_OP

#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__)
/* Dispatch on aarch64 (GCC): a table of 32-bit offsets from the table's own address,
 * which the static linker resolves (no dynamic relocation, 12 bytes per op), written by
 * the assembler since C has no constant expression for the distance between two
 * functions; op codes map to table rows through a byte array, names through the
 * offsets of a struct holding every name. */
enum {
#define ERT_OP(code, name) OP_ROW_##name,
#include "edgert_ops.def"
#undef ERT_OP
  OP_ROWS
};

static const uint8_t op_row[] = {
#define ERT_OP(code, name) [code] = OP_ROW_##name + 1,
#include "edgert_ops.def"
#undef ERT_OP
};

static const struct {
#define ERT_OP(code, name) char name[sizeof #name];
#include "edgert_ops.def"
#undef ERT_OP
} op_names = {
#define ERT_OP(code, name) #name,
#include "edgert_ops.def"
#undef ERT_OP
};

static const uint16_t op_name_at[] = {
#define ERT_OP(code, name) offsetof(__typeof__(op_names), name),
#include "edgert_ops.def"
#undef ERT_OP
};

/* The table: per op its prepare, eval and shape, each as its offset from the table.
 * noinline and noclone: the table's label is defined once. */
__attribute__((noinline, noclone)) static const int32_t *op_table(void) {
  const int32_t *t;
  __asm__ volatile(".pushsection .rodata.ert_op_table,\"a\"\n\t.balign 4\n.Lert_op_table:\n\t.popsection\n\t"
                   "adrp %0, .Lert_op_table\n\tadd %0, %0, :lo12:.Lert_op_table"
                   : "=r"(t));
#define ERT_OP(code, name)                                                                          \
  __asm__ volatile(".pushsection .rodata.ert_op_table,\"a\"\n\t.4byte %c0 - .Lert_op_table, "      \
                   "%c1 - .Lert_op_table, %c2 - .Lert_op_table\n\t.popsection" ::"S"(ert_##name##_prepare), \
                   "S"(ert_##name##_eval), "S"(ert_##name##_shape));
#include "edgert_ops.def"
#undef ERT_OP
  return t;
}

const char *ert_op_lookup(uint32_t code, ert_op_impl *impl) {
  if (code >= sizeof op_row || op_row[code] == 0) return NULL;
  const uint32_t row = op_row[code] - 1u;
  const int32_t *t = op_table();
  const char *base = (const char *)t;
  const int32_t *r = t + 3 * row;
  impl->prepare = (edgert_status(*)(ert_node *, ert_err *))(uintptr_t)(base + r[0]);
  impl->eval = (void (*)(const ert_node *, ert_exec *))(uintptr_t)(base + r[1]);
  impl->shape = (edgert_status(*)(ert_node *, ert_err *))(uintptr_t)(base + r[2]);
  return (const char *)&op_names + op_name_at[row];
}
#else
/* Dispatch is a switch, not a table of function pointers: in a shared library every
 * pointer in a table costs a dynamic relocation (24 bytes on 64-bit targets) on top of
 * its own bytes, while the switch reaches each (hidden) function PC-relative. */
const char *ert_op_lookup(uint32_t code, ert_op_impl *impl) {
  switch (code) {
#define ERT_OP(c, name)                    \
  case c:                                  \
    impl->prepare = ert_##name##_prepare;  \
    impl->eval = ert_##name##_eval;        \
    impl->shape = ert_##name##_shape;      \
    return #name;
#include "edgert_ops.def"
#undef ERT_OP
    default:
      return NULL;
  }
}
#endif
