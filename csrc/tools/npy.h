/* npy.h: reading and writing NumPy .npy files (format versions 1, 2 and 3) for the
 * edgert command-line tools. Little-endian, C-order arrays of the dtypes edgert
 * knows (f4, f2, i1, u1, i2, i4, i8, b1). */
#ifndef EDGERT_NPY_H_
#define EDGERT_NPY_H_

#include <stddef.h>
#include <stdint.h>

typedef struct npy_array {
  int32_t dtype;      /* edgert_dtype */
  int32_t ndim;       /* 0..8 */
  int64_t shape[8];
  size_t nbytes;
  void *data;         /* malloc'ed, nbytes long (at least 1 byte) */
} npy_array;

/* Reads path into *out. Returns 0, or -1 with a message in err. */
int npy_read(const char *path, npy_array *out, char *err, size_t err_size);

/* Parses a whole .npy image held in memory (used by npy_read and by tests). */
int npy_parse(const uint8_t *buf, size_t size, npy_array *out, char *err, size_t err_size);

/* Writes a version 1.0 file. Returns 0, or -1 with a message in err. */
int npy_write(const char *path, int32_t dtype, int32_t ndim, const int64_t *shape,
              const void *data, size_t nbytes, char *err, size_t err_size);

void npy_free(npy_array *a);

/* numpy's descr string for an edgert dtype ("<f4"), NULL when unknown. */
const char *npy_descr(int32_t dtype);

#endif /* EDGERT_NPY_H_ */
