/* edgert_backend_api.h: the partition-backend part of the edgert C API, for tools built
 * against an edgert.h that does not declare it yet. When edgert.h declares it (and
 * defines EDGERT_HAS_BACKEND_API), this header adds nothing.
 *
 * Without it, the model queries are weak references (NULL when the library lacks them)
 * and EDGERT_BACKEND_API_MISSING is 1: a tool then reports that this libedgert cannot
 * run partitions instead of failing to link. */
#ifndef EDGERT_BACKEND_API_H_
#define EDGERT_BACKEND_API_H_

#include <stddef.h>
#include <stdint.h>

#include "edgert.h"

#ifdef EDGERT_HAS_BACKEND_API
#define EDGERT_BACKEND_API_MISSING 0
#else
#define EDGERT_BACKEND_API_MISSING 1

enum { EDGERT_BACKEND_ONNXRUNTIME = 1, EDGERT_BACKEND_LITERT = 2 };
#define EDGERT_ERR_NO_BACKEND ((edgert_status)202)
#define EDGERT_ERR_BACKEND ((edgert_status)203)

typedef struct edgert_partition_info {
  uint32_t node;
  int32_t backend;
  uint32_t index;
  const char *name;
  const void *payload;
  size_t payload_bytes;
  size_t n_inputs, n_outputs;
} edgert_partition_info;

typedef struct edgert_backend {
  void *user;
  edgert_status (*prepare)(void *user, const edgert_model *model, const edgert_partition_info *p, void **state,
                           char *msg, size_t msg_size);
  edgert_status (*invoke)(void *user, void *state, const void *const *inputs, void *const *outputs, char *msg,
                          size_t msg_size);
  void (*release)(void *user, void *state);
} edgert_backend;

__attribute__((weak)) size_t edgert_model_num_partitions(const edgert_model *model);
__attribute__((weak)) edgert_status edgert_model_partition_info(const edgert_model *model, size_t index,
                                                                edgert_partition_info *info);
__attribute__((weak)) edgert_status edgert_model_partition_tensor(const edgert_model *model, size_t index,
                                                                  int is_output, size_t k,
                                                                  edgert_tensor_info *info);
#endif

#endif /* EDGERT_BACKEND_API_H_ */
