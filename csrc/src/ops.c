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
