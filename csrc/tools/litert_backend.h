/* litert_backend.h: runs edgert's LiteRT partitions (a .tflite payload per partition
 * node) through the LiteRT C API of libLiteRt.so, loaded at run time with dlopen. The
 * tool that uses it links -ldl; libedgert itself never depends on LiteRT.
 *
 *   litert_backend *lb;
 *   litert_backend_config cfg = {.lib_path = "/x/libLiteRt.so"};
 *   if (litert_backend_open(&cfg, &lb, msg, sizeof msg) != EDGERT_OK) ...
 *   edgert_backend be;  litert_backend_fill(lb, &be);
 *   opts.backends[EDGERT_BACKEND_LITERT] = &be;   (then edgert_session_create ...)
 *   ... destroy the sessions ...;  litert_backend_close(lb);
 *
 * Contracts
 * - Every function returns a status and writes a NUL-terminated message; nothing aborts.
 *   A missing or wrong library, a missing symbol, a payload LiteRT rejects, boundary
 *   sizes that disagree with the payload's signature: all are errors with a message.
 * - A partition runs signature 0 of its payload. Its inputs and outputs must match the
 *   partition's boundary tensors in order and byte size (docs/partitions.md).
 * - LiteRT runs on its CPU path (XNNPACK). With a delegate (`delegate_path`, a TFLite
 *   external delegate exporting tflite_plugin_create_delegate/destroy_delegate, the
 *   interface of libedgetpu and Arm NN's delegate), the delegate is applied to every
 *   partition first and XNNPACK takes the nodes it leaves (LiteRT applies accelerators
 *   in registration order: the environment is created without its built-in ones, then
 *   the delegate and XNNPACK are registered in that order). Should the library not
 *   export its CPU accelerator definition as expected, those nodes run on LiteRT's
 *   built-in CPU kernels instead.
 * - One litert_backend serves any number of models and sessions; sessions may run on
 *   different threads (each partition of each session has its own compiled model).
 *   Only one backend with a delegate may be open per process (LiteRT's accelerator
 *   callbacks carry no user pointer).
 */
#ifndef EDGERT_LITERT_BACKEND_H_
#define EDGERT_LITERT_BACKEND_H_

#include <stddef.h>

#include "edgert.h"

typedef struct litert_backend_config {
  const char *lib_path;                 /* libLiteRt.so (a path, or a name dlopen finds) */
  const char *delegate_path;            /* external delegate .so, or NULL */
  const char *const *delegate_keys;     /* its options, n_delegate_options pairs */
  const char *const *delegate_values;
  size_t n_delegate_options;
} litert_backend_config;

typedef struct litert_backend litert_backend;

/* Loads the library (and the delegate) and creates the LiteRT environment. */
edgert_status litert_backend_open(const litert_backend_config *config, litert_backend **out, char *msg,
                                  size_t msg_size);
/* Frees everything; every partition and session using it must be gone. NULL: no-op. */
void litert_backend_close(litert_backend *lb);

/* The edgert_backend for litert partitions: user = lb, prepare/invoke/release below. */
void litert_backend_fill(litert_backend *lb, edgert_backend *backend);

/* One compiled .tflite (what a partition's state is). in_bytes/out_bytes: the byte size
 * of each boundary tensor, checked against the payload's signature 0. The payload must
 * stay valid until litert_partition_destroy. */
typedef struct litert_partition litert_partition;
edgert_status litert_partition_create(litert_backend *lb, const void *payload, size_t payload_bytes,
                                      size_t n_inputs, const size_t *in_bytes, size_t n_outputs,
                                      const size_t *out_bytes, litert_partition **out, char *msg,
                                      size_t msg_size);
/* Copies the inputs in, runs, copies the outputs out. */
edgert_status litert_partition_run(litert_partition *p, const void *const *inputs, void *const *outputs,
                                   char *msg, size_t msg_size);
void litert_partition_destroy(litert_partition *p);

/* "LiteRT <version of the library file>" is not exported by libLiteRt.so; this is the
 * path that was loaded, for messages. */
const char *litert_backend_lib_path(const litert_backend *lb);

#endif /* EDGERT_LITERT_BACKEND_H_ */
