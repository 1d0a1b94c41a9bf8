/* runtime.h: the model and session internals shared by loader.c, session.c and
 * crc32.c. Private to the runtime core; kernels use internal.h only. */
#ifndef EDGERT_RUNTIME_H_
#define EDGERT_RUNTIME_H_

#include "internal.h"

/* Storage value 2 of a tensor record: a constant stored in the SPARSE section. Only
 * the loader sees it; ert_sparse_load turns such tensors into ordinary constants. */
#define ERT_STORAGE_SPARSE 2

/* Checks `count` 32-byte SPARSE records (docs/sparse.md) against the tensors and
 * CONSTANTS, then decodes every sparse tensor into one buffer allocated here
 * (*dense_out, owned by the model; NULL when count is 0) and points its data there. */
edgert_status ert_sparse_load(const uint8_t *recs, uint32_t count, const uint8_t *consts,
                              uint64_t consts_size, ert_tensor *tensors, uint32_t n_tensors,
                              void **dense_out, ert_err *err);

/* CRC-32 with the zlib polynomial (reflected 0xEDB88320); pass 0 to start. */
uint32_t ert_crc32(uint32_t crc, const void *data, size_t size);

/* Monotonic clock in nanoseconds (csrc/src/clock.c); 0 when the clock is unavailable. */
uint64_t ert_clock_ns(void);

/* A loaded model: the tensors and nodes prepared once, read-only afterwards.
 * Node in/out pointers point into `tensors`; sessions rebase them by index. */
struct edgert_model {
  const uint8_t *buf;     /* the file, used in place */
  size_t size;
  void *owned;            /* buffer allocated by load_file, or NULL */

  ert_tensor *tensors;
  uint32_t n_tensors;
  ert_quant *quants;
  uint32_t n_quants;
  ert_node *nodes;
  uint32_t n_nodes;
  ert_tensor **ptrs;      /* every node's in/out pointer arrays, back to back */
  size_t n_ptrs;
  void (**evals)(const ert_node *, ert_exec *); /* eval of each node */

  uint32_t *inputs;       /* graph input tensor indices */
  uint32_t n_inputs;
  uint32_t *outputs;      /* graph output tensor indices */
  uint32_t n_outputs;
  size_t arena_bytes;
  void *sparse_dense;     /* decoded sparse constants, or NULL */
};

/* Fills *info from a tensor (loader.c). */
void ert_fill_info(const ert_tensor *t, edgert_tensor_info *info);

/* Fallback partitions (partition.c). */
typedef struct ert_partitions ert_partitions;
/* For a new session whose node copies are `nodes` (tensors bound to the arena): checks
 * that every partition's kind has a backend (else EDGERT_ERR_NO_BACKEND), then calls
 * prepare for each partition in execution order. On failure, partitions already
 * prepared are released, a message is written to msg and the status returned. *out is
 * NULL when the model has no partition. */
edgert_status ert_partitions_start(const edgert_model *m, ert_node *nodes,
                                   const edgert_backend *const backends[3], ert_partitions **out,
                                   char *msg, size_t msg_size);
/* Releases every prepared partition (reverse order) and frees ps; NULL is a no-op. */
void ert_partitions_stop(ert_partitions *ps);

#endif /* EDGERT_RUNTIME_H_ */
