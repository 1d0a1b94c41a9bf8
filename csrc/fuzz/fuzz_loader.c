/* fuzz_loader.c: libFuzzer target for the model loader. Every input must either be
 * rejected with a status or load; a model that loads is run once on zeroed inputs.
 * Build: make -C csrc fuzz; run: build/fuzz/fuzz_loader [corpus dir]. */
#include <stdlib.h>
#include <string.h>

#include "edgert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The loader needs a 16-aligned buffer; give it 64 like load_file does. */
  size_t cap = (size + 63) / 64 * 64;
  uint8_t *buf = aligned_alloc(64, cap ? cap : 64);
  if (buf == NULL) return 0;
  if (size) memcpy(buf, data, size);

  char err[512];
  edgert_model *model = NULL;
  if (edgert_model_load_memory(buf, size, &model, err, sizeof err) == EDGERT_OK) {
    edgert_session *session = NULL;
    edgert_session_options opts;
    edgert_session_options_init(&opts);
    /* Skip runs whose arena would be huge: the fuzzer's memory limit is not a bug. */
    if (edgert_model_arena_bytes(model) <= ((size_t)64 << 20) &&
        edgert_session_create(model, &opts, &session) == EDGERT_OK) {
      for (size_t k = 0; k < edgert_model_num_inputs(model); k++) {
        edgert_tensor_info info;
        edgert_model_input_info(model, k, &info);
        memset(edgert_session_input_data(session, k), 0, info.nbytes);
      }
      edgert_session_run(session);
      for (size_t k = 0; k < edgert_model_num_outputs(model); k++)
        (void)edgert_session_output_data(session, k);
      /* Bounded dimensions: once more at the lower bounds (the run-time shape pass). */
      int bounded = 0;
      for (size_t k = 0; k < edgert_model_num_inputs(model); k++) {
        edgert_tensor_info info;
        edgert_model_input_info(model, k, &info);
        int64_t dims[8];
        for (int32_t d = 0; d < info.ndim; d++) {
          edgert_dim_info di;
          edgert_model_input_dim(model, k, (size_t)d, &di);
          dims[d] = di.lo;
          bounded |= di.lo != di.hi;
        }
        if (edgert_session_set_input_shape(session, k, (size_t)info.ndim, dims) == EDGERT_OK) {
          edgert_session_input_info(session, k, &info);
          memset(edgert_session_input_data(session, k), 0, info.nbytes);
        }
      }
      if (bounded) edgert_session_run(session);
      edgert_session_destroy(session);
    }
    edgert_model_free(model);
  }
  free(buf);
  return 0;
}
