/* sparse.c: the SPARSE section (docs/sparse.md). Validates every sparse record and
 * materializes each sparse constant densely, once, into one model-owned buffer, so
 * kernels see an ordinary constant. Called by the loader after the tensor records are
 * checked and before any prepare runs. */
#include <string.h>

#include "runtime.h"

enum { SPARSE_REC = 32, SPARSE_BITMAP = 0, DENSE_ALIGN = 64 };

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

static bool in_range(uint64_t off, uint64_t len, uint64_t limit) {
  return off <= limit && len <= limit - off;
}

static unsigned popcount8(uint8_t b) {
  unsigned n = 0;
  for (; b != 0; b &= (uint8_t)(b - 1)) n++;
  return n;
}

edgert_status ert_sparse_load(const uint8_t *recs, uint32_t count, const uint8_t *consts,
                              uint64_t consts_size, ert_tensor *tensors, uint32_t n_tensors,
                              void **dense_out, ert_err *err) {
  *dense_out = NULL;
  /* Pass 1: every record against the tensor it names and the CONSTANTS bounds; the
   * dense buffer's size. A tensor's record index (its offset field) must name this very
   * record, so each sparse tensor has exactly one record and each record one tensor. */
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *r = recs + (uint64_t)i * SPARSE_REC;
    uint32_t ti = rd32(r), enc = rd32(r + 4);
    uint64_t bm_off = rd64(r + 8), val_off = rd64(r + 16), nnz = rd64(r + 24);
    if (ti >= n_tensors)
      return ert_fail(err, EDGERT_ERR_FORMAT, "sparse record %u: tensor index %u out of range",
                      (unsigned)i, (unsigned)ti);
    const ert_tensor *t = &tensors[ti];
    if (t->storage != ERT_STORAGE_SPARSE || t->offset != i)
      return ert_fail(err, EDGERT_ERR_FORMAT, "sparse record %u: tensor '%s' does not refer to it",
                      (unsigned)i, t->name);
    if (enc != SPARSE_BITMAP)
      return ert_fail(err, EDGERT_ERR_FORMAT, "sparse record %u ('%s'): unknown encoding %u",
                      (unsigned)i, t->name, (unsigned)enc);
    const size_t esize = ert_dtype_size(t->dtype);
    const uint64_t bm_bytes = ((uint64_t)t->numel + 7) / 8;
    if (nnz > t->numel)
      return ert_fail(err, EDGERT_ERR_FORMAT, "sparse record %u ('%s'): %llu values for %zu elements",
                      (unsigned)i, t->name, (unsigned long long)nnz, t->numel);
    if (val_off % esize != 0)
      return ert_fail(err, EDGERT_ERR_ALIGNMENT, "sparse record %u ('%s'): values offset %llu misaligned",
                      (unsigned)i, t->name, (unsigned long long)val_off);
    if (!in_range(bm_off, bm_bytes, consts_size) || !in_range(val_off, nnz * esize, consts_size))
      return ert_fail(err, EDGERT_ERR_FORMAT, "sparse record %u ('%s'): data outside CONSTANTS",
                      (unsigned)i, t->name);
    const uint8_t *bm = consts + bm_off;
    uint64_t bits = 0;
    for (uint64_t b = 0; b < bm_bytes; b++) bits += popcount8(bm[b]);
    if (t->numel % 8 != 0 && (bm[bm_bytes - 1] >> (t->numel % 8)) != 0)
      return ert_fail(err, EDGERT_ERR_FORMAT, "sparse record %u ('%s'): bitmap bits set past the tensor",
                      (unsigned)i, t->name);
    if (bits != nnz)
      return ert_fail(err, EDGERT_ERR_FORMAT,
                      "sparse record %u ('%s'): bitmap has %llu bits set, record says %llu values",
                      (unsigned)i, t->name, (unsigned long long)bits, (unsigned long long)nnz);
    /* t->nbytes fits in size_t and the loader's buffer; the sum is checked anyway. */
    const uint64_t padded = ((uint64_t)t->nbytes + DENSE_ALIGN - 1) / DENSE_ALIGN * DENSE_ALIGN;
    if (padded > SIZE_MAX - total)
      return ert_fail(err, EDGERT_ERR_NO_MEMORY, "sparse constants are too large for this machine");
    total += padded;
  }
  for (uint32_t k = 0; k < n_tensors; k++)
    if (tensors[k].storage == ERT_STORAGE_SPARSE &&
        (tensors[k].offset >= count || rd32(recs + tensors[k].offset * SPARSE_REC) != k))
      return ert_fail(err, EDGERT_ERR_FORMAT, "tensor '%s': no sparse record %llu names it",
                      tensors[k].name, (unsigned long long)tensors[k].offset);
  if (count == 0) return EDGERT_OK;

  uint8_t *dense = ert_aligned_alloc(DENSE_ALIGN, total > 0 ? (size_t)total : DENSE_ALIGN);
  if (dense == NULL)
    return ert_fail(err, EDGERT_ERR_NO_MEMORY, "cannot allocate %llu bytes for sparse constants",
                    (unsigned long long)total);
  memset(dense, 0, total > 0 ? (size_t)total : DENSE_ALIGN);

  /* Pass 2: scatter the stored values; all ranges were checked above. */
  uint64_t pos = 0;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *r = recs + (uint64_t)i * SPARSE_REC;
    ert_tensor *t = &tensors[rd32(r)];
    const uint8_t *bm = consts + rd64(r + 8), *val = consts + rd64(r + 16);
    const size_t esize = ert_dtype_size(t->dtype);
    uint8_t *out = dense + pos;
    for (size_t e = 0; e < t->numel; e++) {
      if (bm[e / 8] & (1u << (e % 8))) {
        memcpy(out + e * esize, val, esize);
        val += esize;
      }
    }
    t->data = out;
    t->storage = ERT_STORAGE_CONST;
    pos += ((uint64_t)t->nbytes + DENSE_ALIGN - 1) / DENSE_ALIGN * DENSE_ALIGN;
  }
  *dense_out = dense;
  return EDGERT_OK;
}
