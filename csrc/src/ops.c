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

/* Listed ops only, in the order of edgert_ops.def, whose codes ascend (the binary
 * search relies on it; tests/test_generated.py checks it); no slot for unused codes. */
static const ert_op_impl op_table[] = {
#define ERT_OP(code, name) {code, #name, ert_##name##_prepare, ert_##name##_eval},
#include "edgert_ops.def"
#undef ERT_OP
};

#define ERT_OP_TABLE_SIZE (sizeof op_table / sizeof op_table[0])

/* Names must fit the inline array. */
#define ERT_OP(code, name) _Static_assert(sizeof(#name) <= 24, "op name " #name " too long");
#include "edgert_ops.def"
#undef ERT_OP

const ert_op_impl *ert_op_lookup(uint32_t code) {
  size_t lo = 0, hi = ERT_OP_TABLE_SIZE;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (op_table[mid].code == code) return &op_table[mid];
    if (op_table[mid].code < code) lo = mid + 1; else hi = mid;
  }
  return NULL;
}
