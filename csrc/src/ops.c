/* ops.c: the op dispatch table, built from edgert_ops.def, and the fallback
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

#define ERT_OP(code, name)                                                          \
  ERT_WEAK edgert_status ert_##name##_prepare(ert_node *node, ert_err *err) {       \
    (void)node;                                                                     \
    return ert_fail(err, EDGERT_ERR_UNSUPPORTED_OP, "op '%s' has no kernel in this build", \
                    #name);                                                         \
  }                                                                                 \
  ERT_WEAK void ert_##name##_eval(const ert_node *node, ert_exec *ex) {             \
    (void)node;                                                                     \
    (void)ex;                                                                       \
  }
#include "edgert_ops.def"
#undef ERT_OP

static const ert_op_impl op_table[] = {
#define ERT_OP(code, name) [code] = {#name, ert_##name##_prepare, ert_##name##_eval},
#include "edgert_ops.def"
#undef ERT_OP
};

#define ERT_OP_TABLE_SIZE (sizeof op_table / sizeof op_table[0])

/* Every code is an index of the table (the designated initializers size it; a code
 * listed twice is an initializer override, an error under -Wextra -Werror). */
#define ERT_OP(code, name) \
  _Static_assert((code) >= 0 && (code) < ERT_OP_TABLE_SIZE, "op code of " #name " outside the table");
#include "edgert_ops.def"
#undef ERT_OP

const ert_op_impl *ert_op_lookup(uint32_t code) {
  if (code >= ERT_OP_TABLE_SIZE || op_table[code].name == NULL) return NULL;
  return &op_table[code];
}
