/* loader.c: validates a .edgert file (docs/format.md, "Rules the loader enforces"),
 * builds the model's tensors and nodes, and runs every node's prepare.
 *
 * The file is untrusted: every field is checked before it is used, all arithmetic on
 * file values is done in 64 bits with overflow checks, and records are read with
 * byte-wise little-endian loads so no record needs any alignment. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, fstat */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "edgert uses model constants and parameters in place: little-endian hosts only"
#endif

enum {
  HEADER_SIZE = 64,
  ENTRY_SIZE = 32,
  MAX_SECTIONS = 64,
  TENSOR_REC = 64,
  NODE_REC = 56,
  GRAPH_REC = 64,
  QUANT_REC = 32,
  SPARSE_REC = 32,
  CONST_ALIGN = 64,
};

enum {
  SEC_STRINGS = 1,
  SEC_TENSORS = 2,
  SEC_NODES = 3,
  SEC_INDICES = 4,
  SEC_PARAMS = 5,
  SEC_CONSTANTS = 6,
  SEC_GRAPH = 7,
  SEC_QUANT = 8,
  SEC_METADATA = 9,
  SEC_PARTITIONS = 10,
  SEC_SPARSE = 11,
  SEC_BOUNDS = 12,
  SEC_STATE = 13,
  SEC_KNOWN_MAX = 13,
};

static const uint8_t MAGIC[8] = {0x89, 'E', 'R', 'T', '\r', '\n', 0x1A, '\n'};

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

/* True when [off, off+len) lies inside [0, limit). */
static bool in_range(uint64_t off, uint64_t len, uint64_t limit) {
  return off <= limit && len <= limit - off;
}

typedef struct section {
  uint64_t off, size;
  uint32_t count;
  bool present;
} section;

/* Everything the loader works with while it checks; freed (or handed over to the
 * model) at the end. */
typedef struct loader {
  const uint8_t *buf;
  uint64_t size;
  ert_err *err;
  section sec[SEC_KNOWN_MAX + 1];
  const uint8_t *strings;
  uint64_t strings_size;
  const uint8_t *consts;
  uint64_t consts_size;
  const uint8_t *indices;
  uint64_t n_indices;
  const uint8_t *params;
  uint64_t n_params;
  uint64_t arena_bytes;
  uint16_t minor;
} loader;

static const char *kind_name(uint32_t kind) {
  static const char *const names[] = {"?",      "STRINGS",   "TENSORS", "NODES",
                                      "INDICES", "PARAMS",   "CONSTANTS", "GRAPH",
                                      "QUANT",   "METADATA", "PARTITIONS", "SPARSE",
                                      "BOUNDS",  "STATE"};
  return kind <= SEC_KNOWN_MAX ? names[kind] : "unknown";
}

/* ---- header and section table ---------------------------------------------- */

static edgert_status check_header(loader *L, uint64_t *table_off, uint32_t *n_sec) {
  const uint8_t *h = L->buf;
  if (L->size < HEADER_SIZE)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "file too small for a header: %llu bytes",
                    (unsigned long long)L->size);
  if (memcmp(h, MAGIC, sizeof MAGIC) != 0)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "not an edgert file (bad magic)");
  uint16_t major = rd16(h + 8), minor = rd16(h + 10);
  L->minor = minor;
  if (major != 1)
    return ert_fail(L->err, EDGERT_ERR_VERSION,
                    "file format version %u.%u is not supported (this runtime reads 1.x)",
                    (unsigned)major, (unsigned)minor);
  /* Flags and reserved bytes must be zero. From minor 1 on, the u32 at 48 is the
   * CRC-32 of bytes [0, 48), so that every header byte is checked; 1.0 files have
   * zero there. */
  const uint32_t hcrc = rd32(h + 48);
  for (int k = 12; k < HEADER_SIZE; k = k == 15 ? (minor == 0 ? 48 : 52) : k + 1)
    if (h[k] != 0)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "header byte %d (flags or reserved) is not zero", k);
  bool hcrc_bad = minor >= 1 && hcrc != ert_crc32(0, h, 48);
#if defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
  hcrc_bad = false; /* fuzz builds skip the checksums so mutations reach later checks */
#endif
  if (hcrc_bad)
    return ert_fail(L->err, EDGERT_ERR_CHECKSUM, "header checksum mismatch: file is corrupt");
  uint64_t fsize = rd64(h + 16);
  if (fsize != L->size)
    return ert_fail(L->err, EDGERT_ERR_FORMAT,
                    "file size field says %llu bytes but the buffer holds %llu (truncated?)",
                    (unsigned long long)fsize, (unsigned long long)L->size);
  if (rd32(h + 24) != HEADER_SIZE)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "header size %u, expected 64",
                    (unsigned)rd32(h + 24));
  if (rd32(h + 44) != ENTRY_SIZE)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "section entry size %u, expected 32",
                    (unsigned)rd32(h + 44));
  *n_sec = rd32(h + 28);
  if (*n_sec > MAX_SECTIONS)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "%u sections, at most 64 allowed",
                    (unsigned)*n_sec);
  *table_off = rd64(h + 32);
  if (*table_off % 8 != 0 || *table_off < HEADER_SIZE ||
      !in_range(*table_off, (uint64_t)*n_sec * ENTRY_SIZE, L->size))
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "section table at %llu is misplaced",
                    (unsigned long long)*table_off);
  return EDGERT_OK;
}

static edgert_status check_sections(loader *L, uint64_t table_off, uint32_t n_sec) {
  const uint8_t *tab = L->buf + table_off;
  uint64_t table_end = table_off + (uint64_t)n_sec * ENTRY_SIZE;
  for (uint32_t i = 0; i < n_sec; i++) {
    const uint8_t *e = tab + (size_t)i * ENTRY_SIZE;
    uint32_t kind = rd32(e), flags = rd32(e + 4), align = rd32(e + 24), count = rd32(e + 28);
    uint64_t off = rd64(e + 8), size = rd64(e + 16);
    if (align == 0 || (align & (align - 1)) != 0)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "section %u: alignment %u is not a power of two",
                      (unsigned)i, (unsigned)align);
    if (off % align != 0)
      return ert_fail(L->err, EDGERT_ERR_ALIGNMENT,
                      "section %u: offset %llu is not a multiple of its alignment %u", (unsigned)i,
                      (unsigned long long)off, (unsigned)align);
    if (!in_range(off, size, L->size))
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "section %u (%s) extends past the end of the file",
                      (unsigned)i, kind_name(kind));
    if (size > 0 && off < table_end)
      return ert_fail(L->err, EDGERT_ERR_FORMAT,
                      "section %u (%s) overlaps the header or the section table", (unsigned)i,
                      kind_name(kind));
    for (uint32_t j = 0; j < i; j++) {
      const uint8_t *f = tab + (size_t)j * ENTRY_SIZE;
      uint64_t o2 = rd64(f + 8), s2 = rd64(f + 16);
      if (rd32(f) == kind)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "section kind %u (%s) appears twice",
                        (unsigned)kind, kind_name(kind));
      if (size > 0 && s2 > 0 && off < o2 + s2 && o2 < off + size)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "sections %u and %u overlap", (unsigned)j,
                        (unsigned)i);
    }
    if (kind == SEC_PARTITIONS) {
      if (flags & 1u)
        return ert_fail(L->err, EDGERT_ERR_UNSUPPORTED_OP,
                        "the file needs partitions for another backend, not available in this runtime");
      continue;
    }
    if (kind == 0 || kind > SEC_KNOWN_MAX) {
      if (flags & 1u)
        return ert_fail(L->err, EDGERT_ERR_VERSION,
                        "required section kind %u is unknown to this runtime", (unsigned)kind);
      continue;
    }
    L->sec[kind].off = off;
    L->sec[kind].size = size;
    L->sec[kind].count = count;
    L->sec[kind].present = true;
  }

  static const uint32_t required[] = {SEC_STRINGS, SEC_TENSORS, SEC_NODES, SEC_INDICES,
                                      SEC_PARAMS,  SEC_CONSTANTS, SEC_GRAPH};
  for (size_t k = 0; k < sizeof required / sizeof required[0]; k++)
    if (!L->sec[required[k]].present)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "required section %s is missing",
                      kind_name(required[k]));

  /* Record sections: count * record size == size (count < 2^32, so no overflow). */
  static const struct { uint32_t kind, rec; } records[] = {
      {SEC_TENSORS, TENSOR_REC}, {SEC_NODES, NODE_REC}, {SEC_QUANT, QUANT_REC},
      {SEC_SPARSE, SPARSE_REC}};
  for (size_t k = 0; k < sizeof records / sizeof records[0]; k++) {
    const section *s = &L->sec[records[k].kind];
    if (s->present && (uint64_t)s->count * records[k].rec != s->size)
      return ert_fail(L->err, EDGERT_ERR_FORMAT,
                      "section %s: %u records of %u bytes do not fill its %llu bytes",
                      kind_name(records[k].kind), (unsigned)s->count, (unsigned)records[k].rec,
                      (unsigned long long)s->size);
  }
  const section *g = &L->sec[SEC_GRAPH];
  if (g->size != GRAPH_REC || (g->count != 1 && g->count != 0))
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "section GRAPH must hold exactly one 64-byte record");
  static const uint32_t words[] = {SEC_INDICES, SEC_PARAMS};
  for (size_t k = 0; k < 2; k++) {
    const section *s = &L->sec[words[k]];
    if (s->size % 4 != 0 || (s->count != 0 && (uint64_t)s->count * 4 != s->size))
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "section %s: size %llu is not a whole number of words",
                      kind_name(words[k]), (unsigned long long)s->size);
    if (s->off % 4 != 0)
      return ert_fail(L->err, EDGERT_ERR_ALIGNMENT, "section %s is not 4-byte aligned",
                      kind_name(words[k]));
  }
  if (L->sec[SEC_CONSTANTS].off % CONST_ALIGN != 0)
    return ert_fail(L->err, EDGERT_ERR_ALIGNMENT, "section CONSTANTS is not 64-byte aligned");

  L->strings = L->buf + L->sec[SEC_STRINGS].off;
  L->strings_size = L->sec[SEC_STRINGS].size;
  L->consts = L->buf + L->sec[SEC_CONSTANTS].off;
  L->consts_size = L->sec[SEC_CONSTANTS].size;
  L->indices = L->buf + L->sec[SEC_INDICES].off;
  L->n_indices = L->sec[SEC_INDICES].size / 4;
  L->params = L->buf + L->sec[SEC_PARAMS].off;
  L->n_params = L->sec[SEC_PARAMS].size / 4;
  return EDGERT_OK;
}

/* True when s[0..n) is well-formed UTF-8 without NUL bytes (no overlong forms, surrogates
 * or code points above U+10FFFF), so every binding can decode names strictly. */
static bool valid_utf8(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) {
      if (c == 0) return false;
      i++;
      continue;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return false;
    for (size_t k = 2; k < len; k++)
      if ((s[i + k] & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

/* A name: (offset, length) inside STRINGS, NUL right after it and none inside, UTF-8. */
static edgert_status get_string(loader *L, uint32_t off, uint32_t len, const char **out,
                                const char *what, uint32_t index) {
  if (!in_range(off, (uint64_t)len + 1, L->strings_size) || L->strings[off + len] != 0 ||
      !valid_utf8(L->strings + off, len))
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "%s %u: name (offset %u, length %u) is not a valid string",
                    what, (unsigned)index, (unsigned)off, (unsigned)len);
  *out = (const char *)L->strings + off;
  return EDGERT_OK;
}

/* ---- the model ------------------------------------------------------------- */

static void model_release(edgert_model *m) {
  if (m == NULL) return;
  ert_free(m->tensors);
  ert_free(m->quants);
  ert_free(m->nodes);
  ert_free(m->ptrs);
  ert_free(m->evals);
  ert_free(m->inputs);
  ert_free(m->outputs);
  ert_free(m->owned);
  ert_free(m->sparse_dense);
  ert_free(m->states);
  ert_bounds_free(m->bounds);
  ert_free(m);
}

void edgert_model_free(edgert_model *model) { model_release(model); }

static edgert_status load_quants(loader *L, edgert_model *m) {
  const section *s = &L->sec[SEC_QUANT];
  if (!s->present || s->count == 0) return EDGERT_OK;
  m->quants = ert_calloc(s->count, sizeof *m->quants);
  if (m->quants == NULL) return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  m->n_quants = s->count;
  for (uint32_t i = 0; i < s->count; i++) {
    const uint8_t *r = L->buf + s->off + (uint64_t)i * QUANT_REC;
    int32_t axis = (int32_t)rd32(r);
    uint32_t count = rd32(r + 4);
    uint64_t so = rd64(r + 8), zo = rd64(r + 16);
    if (axis < -1 || (axis == -1 && count != 1))
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "quant record %u: axis %d with %u values",
                      (unsigned)i, (int)axis, (unsigned)count);
    if (so % 4 != 0 || zo % 4 != 0)
      return ert_fail(L->err, EDGERT_ERR_ALIGNMENT, "quant record %u: values not 4-byte aligned",
                      (unsigned)i);
    if (!in_range(so, (uint64_t)count * 4, L->consts_size) ||
        !in_range(zo, (uint64_t)count * 4, L->consts_size))
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "quant record %u: values outside CONSTANTS",
                      (unsigned)i);
    m->quants[i].axis = axis;
    m->quants[i].count = count;
    m->quants[i].scales = (const float *)(const void *)(L->consts + so);
    m->quants[i].zero_points = (const int32_t *)(const void *)(L->consts + zo);
  }
  return EDGERT_OK;
}

static edgert_status load_tensors(loader *L, edgert_model *m) {
  const section *s = &L->sec[SEC_TENSORS];
  m->n_tensors = s->count;
  m->tensors = ert_calloc(s->count, sizeof *m->tensors);
  if (m->tensors == NULL) return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  for (uint32_t i = 0; i < s->count; i++) {
    const uint8_t *r = L->buf + s->off + (uint64_t)i * TENSOR_REC;
    ert_tensor *t = &m->tensors[i];
    edgert_status st = get_string(L, rd32(r), rd32(r + 4), &t->name, "tensor", i);
    if (st != EDGERT_OK) return st;
    uint8_t dtype = r[8], rank = r[9], storage = r[10];
    uint32_t qidx = rd32(r + 12);
    size_t esize = ert_dtype_size(dtype);
    if (esize == 0)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': unknown dtype %u", t->name,
                      (unsigned)dtype);
    if (rank > EDGERT_MAX_DIMS)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': rank %u exceeds 8", t->name,
                      (unsigned)rank);
    t->dtype = dtype;
    t->ndim = rank;
    uint64_t numel = 1;
    bool empty = false;
    for (int d = 0; d < EDGERT_MAX_DIMS; d++) {
      int32_t dim = (int32_t)rd32(r + 16 + 4 * d);
      if (d >= rank) {
        if (dim != 0)
          return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': shape entry %d past rank %u is not 0",
                          t->name, d, (unsigned)rank);
        continue;
      }
      if (dim < 0)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': negative dimension %d", t->name,
                        (int)dim);
      t->shape[d] = dim;
      if (dim == 0) empty = true;
    }
    if (empty) {
      numel = 0;
    } else {
      for (int d = 0; d < rank; d++) {
        if (numel > UINT64_MAX / (uint64_t)t->shape[d])
          return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': element count overflows", t->name);
        numel *= (uint64_t)t->shape[d];
      }
    }
    uint64_t nbytes = rd64(r + 56), off = rd64(r + 48);
    if (numel > UINT64_MAX / esize || numel * esize != nbytes)
      return ert_fail(L->err, EDGERT_ERR_FORMAT,
                      "tensor '%s': byte size %llu does not match its shape and dtype", t->name,
                      (unsigned long long)nbytes);
    t->offset = off;
    t->storage = storage;
    if (storage == ERT_STORAGE_ARENA) {
      if (!in_range(off, nbytes, L->arena_bytes))
        return ert_fail(L->err, EDGERT_ERR_FORMAT,
                        "tensor '%s': arena range [%llu, +%llu) exceeds the arena of %llu bytes",
                        t->name, (unsigned long long)off, (unsigned long long)nbytes,
                        (unsigned long long)L->arena_bytes);
      if (off % esize != 0)
        return ert_fail(L->err, EDGERT_ERR_ALIGNMENT, "tensor '%s': arena offset %llu is misaligned",
                        t->name, (unsigned long long)off);
      t->data = NULL;
    } else if (storage == ERT_STORAGE_CONST) {
      if (off % CONST_ALIGN != 0)
        return ert_fail(L->err, EDGERT_ERR_ALIGNMENT,
                        "tensor '%s': constant offset %llu is not 64-byte aligned", t->name,
                        (unsigned long long)off);
      if (!in_range(off, nbytes, L->consts_size))
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': constant data outside CONSTANTS",
                        t->name);
      t->data = (void *)(uintptr_t)(L->consts + off);
    } else if (storage == ERT_STORAGE_SPARSE) {
      /* off is the SPARSE record index; checked and decoded by ert_sparse_load. */
      if (!L->sec[SEC_SPARSE].present)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': sparse storage without a SPARSE section",
                        t->name);
      t->data = NULL;
    } else {
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': unknown storage %u", t->name,
                      (unsigned)storage);
    }
    /* Both ranges lie inside a buffer or the arena, so they fit in size_t. */
    t->numel = (size_t)numel;
    t->nbytes = (size_t)nbytes;
    if (qidx != ERT_ABSENT) {
      if (qidx >= m->n_quants)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s': quant record %u does not exist",
                        t->name, (unsigned)qidx);
      const ert_quant *q = &m->quants[qidx];
      if (q->axis >= 0 && (q->axis >= rank || q->count != (uint32_t)t->shape[q->axis]))
        return ert_fail(L->err, EDGERT_ERR_FORMAT,
                        "tensor '%s': quantization along axis %d with %u values does not fit its shape",
                        t->name, (int)q->axis, (unsigned)q->count);
      t->quant = q;
    }
  }
  return EDGERT_OK;
}

/* Reads `count` tensor indices starting at `first` in INDICES into out (absent allowed
 * only when allow_absent). */
static edgert_status read_indices(loader *L, const edgert_model *m, uint32_t first,
                                  uint32_t count, bool allow_absent, uint32_t *out,
                                  const char *what, const char *name) {
  if (!in_range(first, count, L->n_indices))
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "%s '%s': index range [%u, +%u) outside INDICES",
                    what, name, (unsigned)first, (unsigned)count);
  for (uint32_t k = 0; k < count; k++) {
    uint32_t idx = rd32(L->indices + 4 * ((uint64_t)first + k));
    if (idx == ERT_ABSENT && allow_absent) {
      out[k] = idx;
      continue;
    }
    if (idx >= m->n_tensors)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "%s '%s': tensor index %u out of range (%u tensors)",
                      what, name, (unsigned)idx, (unsigned)m->n_tensors);
    out[k] = idx;
  }
  return EDGERT_OK;
}

static edgert_status load_graph(loader *L, edgert_model *m, uint8_t *defined) {
  const uint8_t *g = L->buf + L->sec[SEC_GRAPH].off;
  uint32_t in_first = rd32(g + 16), n_in = rd32(g + 20);
  uint32_t out_first = rd32(g + 24), n_out = rd32(g + 28);
  if (!in_range(in_first, n_in, L->n_indices) || !in_range(out_first, n_out, L->n_indices))
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "graph inputs or outputs outside INDICES");
  m->inputs = ert_calloc(n_in, sizeof *m->inputs);
  m->outputs = ert_calloc(n_out, sizeof *m->outputs);
  if (m->inputs == NULL || m->outputs == NULL)
    return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  m->n_inputs = n_in;
  m->n_outputs = n_out;
  edgert_status st = read_indices(L, m, in_first, n_in, false, m->inputs, "graph", "inputs");
  if (st != EDGERT_OK) return st;
  st = read_indices(L, m, out_first, n_out, false, m->outputs, "graph", "outputs");
  if (st != EDGERT_OK) return st;
  for (uint32_t k = 0; k < n_in; k++) {
    const ert_tensor *t = &m->tensors[m->inputs[k]];
    if (t->storage != ERT_STORAGE_ARENA)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "graph input '%s' is a constant", t->name);
    if (defined[m->inputs[k]])
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "graph input '%s' is listed twice", t->name);
    defined[m->inputs[k]] = 2; /* 2: graph input */
  }
  return EDGERT_OK;
}

/* Within one node, outputs must not share arena bytes with inputs, other outputs or the
 * scratch, and the scratch none with inputs, so kernels never see unplanned aliasing.
 * The one exception is output 0 laid exactly over input 0 (same offset and size: the
 * planner's view and in-place aliases), which then also covers any other input with that
 * same range (add(x, x) in place). Ranges are already known to be inside the arena. */
static edgert_status check_node_overlap(loader *L, const ert_node *n) {
  const uint64_t so = n->scratch_offset, sn = n->scratch_bytes;
  for (uint32_t k = 0; k < n->n_out; k++) {
    const ert_tensor *o = n->out[k];
    if (ert_ranges_overlap(o->offset, o->nbytes, so, sn))
      return ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": output '%s' overlaps its scratch", o->name);
    for (uint32_t j = 0; j < k; j++)
      if (ert_ranges_overlap(o->offset, o->nbytes, n->out[j]->offset, n->out[j]->nbytes))
        return ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name,
                             ": outputs '%s' and '%s' overlap in the arena", n->out[j]->name, o->name);
    for (uint32_t j = 0; j < n->n_in; j++) {
      const ert_tensor *t = n->in[j];
      if (t == NULL || t->storage != ERT_STORAGE_ARENA ||
          !ert_ranges_overlap(o->offset, o->nbytes, t->offset, t->nbytes))
        continue;
      const ert_tensor *i0 = n->in[0];
      if (k == 0 && i0 != NULL && i0->storage == ERT_STORAGE_ARENA && o->offset == i0->offset &&
          o->nbytes == i0->nbytes && t->offset == o->offset && t->nbytes == o->nbytes)
        continue;
      return ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name,
                           ": output '%s' overlaps input '%s' in the arena", o->name, t->name);
    }
  }
  for (uint32_t j = 0; j < n->n_in; j++) {
    const ert_tensor *t = n->in[j];
    if (t != NULL && t->storage == ERT_STORAGE_ARENA && ert_ranges_overlap(t->offset, t->nbytes, so, sn))
      return ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": input '%s' overlaps its scratch", t->name);
  }
  return EDGERT_OK;
}

static edgert_status load_nodes(loader *L, edgert_model *m, uint8_t *defined) {
  const section *s = &L->sec[SEC_NODES];
  m->n_nodes = s->count;
  m->nodes = ert_calloc(s->count, sizeof *m->nodes);
  m->evals = ert_calloc(s->count, sizeof *m->evals);
  if (m->nodes == NULL || m->evals == NULL)
    return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");

  /* First pass: ranges, so the pointer arrays can be allocated once. */
  uint64_t total = 0;
  for (uint32_t i = 0; i < s->count; i++) {
    const uint8_t *r = L->buf + s->off + (uint64_t)i * NODE_REC;
    uint32_t n_in = rd32(r + 20), n_out = rd32(r + 28);
    if (!in_range(rd32(r + 16), n_in, L->n_indices) || !in_range(rd32(r + 24), n_out, L->n_indices))
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "node %u: input or output range outside INDICES",
                      (unsigned)i);
    total += (uint64_t)n_in + n_out; /* each <= n_indices < 2^62: no overflow */
  }
  if (total > SIZE_MAX / sizeof(ert_tensor *))
    return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  m->ptrs = ert_calloc((size_t)total, sizeof *m->ptrs);
  uint32_t *idx = ert_calloc((size_t)total, sizeof *idx);
  if (m->ptrs == NULL || idx == NULL) {
    ert_free(idx);
    return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  }
  m->n_ptrs = (size_t)total;

  edgert_status st = EDGERT_OK;
  size_t used = 0;
  for (uint32_t i = 0; i < s->count && st == EDGERT_OK; i++) {
    const uint8_t *r = L->buf + s->off + (uint64_t)i * NODE_REC;
    ert_node *n = &m->nodes[i];
    uint32_t code = rd32(r);
    st = get_string(L, rd32(r + 8), rd32(r + 12), &n->name, "node", i);
    if (st != EDGERT_OK) break;
    ert_op_impl impl;
    if (ert_op_lookup(code, &impl) == NULL) {
      st = ert_fail_node(L->err, EDGERT_ERR_UNSUPPORTED_OP, n->name,
                         ": op code %u is unknown to this runtime", (unsigned)code);
      break;
    }
    n->op = (int32_t)code;
    m->evals[i] = impl.eval;
    n->n_in = rd32(r + 20);
    n->n_out = rd32(r + 28);
    uint32_t *in_idx = idx + used, *out_idx = idx + used + n->n_in;
    n->in = m->ptrs + used;
    n->out = m->ptrs + used + n->n_in;
    used += (size_t)n->n_in + n->n_out;
    st = read_indices(L, m, rd32(r + 16), n->n_in, true, in_idx, "node", n->name);
    if (st != EDGERT_OK) break;
    st = read_indices(L, m, rd32(r + 24), n->n_out, false, out_idx, "node", n->name);
    if (st != EDGERT_OK) break;

    uint32_t p_first = rd32(r + 32), p_count = rd32(r + 36);
    if (!in_range(p_first, p_count, L->n_params)) {
      st = ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": parameter range [%u, +%u) outside PARAMS",
                         (unsigned)p_first, (unsigned)p_count);
      break;
    }
    n->params = (const uint32_t *)(const void *)(L->params + 4 * (uint64_t)p_first);
    n->n_params = p_count;

    uint64_t sc_off = rd64(r + 40), sc_bytes = rd64(r + 48);
    if (sc_bytes > 0 && (sc_off % EDGERT_ARENA_ALIGN != 0 || !in_range(sc_off, sc_bytes, L->arena_bytes))) {
      st = ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name,
                         ": scratch [%llu, +%llu) is misaligned or exceeds the arena of %llu bytes",
                         (unsigned long long)sc_off, (unsigned long long)sc_bytes,
                         (unsigned long long)L->arena_bytes);
      break;
    }
    n->scratch_offset = sc_bytes > 0 ? sc_off : 0;
    n->scratch_bytes = (size_t)sc_bytes;
    n->scratch = NULL;

    for (uint32_t k = 0; k < n->n_in; k++) {
      if (in_idx[k] == ERT_ABSENT) {
        n->in[k] = NULL;
        continue;
      }
      const ert_tensor *t = &m->tensors[in_idx[k]];
      if (t->storage != ERT_STORAGE_CONST && (defined[in_idx[k]] == 0 || defined[in_idx[k]] == 4)) {
        st = ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name,
                           ": input %u ('%s') is used before it is computed", (unsigned)k, t->name);
        break;
      }
      n->in[k] = &m->tensors[in_idx[k]];
    }
    if (st != EDGERT_OK) break;
    for (uint32_t k = 0; k < n->n_out; k++) {
      const ert_tensor *t = &m->tensors[out_idx[k]];
      if (t->storage != ERT_STORAGE_ARENA) {
        st = ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": output '%s' is a constant", t->name);
        break;
      }
      if (defined[out_idx[k]] == 2) {
        st = ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": output '%s' is a graph input", t->name);
        break;
      }
      if (defined[out_idx[k]] == 3) {
        st = ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": output '%s' is a state input", t->name);
        break;
      }
      if (defined[out_idx[k]] == 1) {
        st = ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": output '%s' is written twice", t->name);
        break;
      }
      defined[out_idx[k]] = 1;
      n->out[k] = &m->tensors[out_idx[k]];
    }
    if (st == EDGERT_OK) st = check_node_overlap(L, n);
  }
  ert_free(idx);
  if (st != EDGERT_OK) return st;

  for (uint32_t k = 0; k < m->n_outputs; k++) {
    const ert_tensor *t = &m->tensors[m->outputs[k]];
    if (t->storage != ERT_STORAGE_CONST && !defined[m->outputs[k]])
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "graph output '%s' is never computed", t->name);
  }
  return EDGERT_OK;
}

/* STATE (docs/format.md): pairs of arena tensors carried from run to run, in a region
 * of the arena of their own. Read after the graph inputs (defined[in] = 3: a state input
 * is defined before the first node), checked against the nodes by check_state. */
enum { STATE_HEAD = 16, STATE_REC = 32, STATE_INITIAL = 1 };

static edgert_status load_state(loader *L, edgert_model *m, uint8_t *defined) {
  const section *s = &L->sec[SEC_STATE];
  m->state_offset = m->arena_bytes;
  if (!s->present) return EDGERT_OK;
  if (L->sec[SEC_BOUNDS].present)
    return ert_fail(L->err, EDGERT_ERR_UNSUPPORTED, "state with bounded dimensions is not supported");
  const uint8_t *p = L->buf + s->off;
  if (s->size < STATE_HEAD) return ert_fail(L->err, EDGERT_ERR_FORMAT, "STATE section too small");
  const uint32_t count = rd32(p);
  const uint64_t region = rd64(p + 8);
  if (rd32(p + 4) != 0 || count == 0 || count != s->count || count > m->n_tensors ||
      s->size != STATE_HEAD + (uint64_t)STATE_REC * count)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "STATE section: bad count or size");
  if (region > L->arena_bytes || region % EDGERT_ARENA_ALIGN != 0)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "STATE section: region at %llu is outside the arena or misaligned",
                    (unsigned long long)region);
  m->states = ert_calloc(count, sizeof *m->states);
  if (m->states == NULL) return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  m->n_states = count;
  m->state_offset = (size_t)region;
  for (uint32_t k = 0; k < count; k++) {
    const uint8_t *r = p + STATE_HEAD + (uint64_t)STATE_REC * k;
    const uint32_t in = rd32(r), out = rd32(r + 4), flags = rd32(r + 8);
    const uint64_t init = rd64(r + 16);
    if (in >= m->n_tensors || out >= m->n_tensors || in == out || (flags & ~(uint32_t)STATE_INITIAL) != 0 ||
        rd32(r + 12) != 0 || rd64(r + 24) != 0 || (!(flags & STATE_INITIAL) && init != 0))
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "STATE record %u: bad tensor index or flags", (unsigned)k);
    const ert_tensor *a = &m->tensors[in], *b = &m->tensors[out];
    if (a->storage != ERT_STORAGE_ARENA || b->storage != ERT_STORAGE_ARENA || a->nbytes == 0)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "state '%s': its tensors must be non-empty arena tensors", a->name);
    bool same = a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes;
    for (int32_t d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
    if (same && (a->quant == NULL) != (b->quant == NULL)) same = false;
    if (same && a->quant != NULL)
      same = a->quant->axis == b->quant->axis && a->quant->count == b->quant->count &&
             memcmp(a->quant->scales, b->quant->scales, 4 * (size_t)a->quant->count) == 0 &&
             memcmp(a->quant->zero_points, b->quant->zero_points, 4 * (size_t)a->quant->count) == 0;
    if (!same)
      return ert_fail(L->err, EDGERT_ERR_FORMAT,
                      "state '%s': input and output '%s' differ in dtype, shape or quantization", a->name, b->name);
    if (a->offset < region || b->offset < region)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "state '%s': a tensor lies outside the state region", a->name);
    if (defined[in] != 0 || defined[out] != 0)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "state '%s': a tensor is a graph input or in another state",
                      a->name);
    defined[in] = 3; /* 3: state input */
    defined[out] = 4; /* 4: state output, until its node writes it (load_nodes then marks 1) */
    m->states[k].in = in;
    m->states[k].out = out;
    if (flags & STATE_INITIAL) {
      if (init % CONST_ALIGN != 0 || !in_range(init, a->nbytes, L->consts_size))
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "state '%s': initial value outside CONSTANTS or misaligned",
                        a->name);
      m->states[k].init = L->consts + init;
    }
  }
  return EDGERT_OK;
}

/* After the nodes: every state output written by a node (defined 1; it was 4), every
 * other arena tensor and every scratch below the state region, state tensors apart from
 * each other, no graph output and no partition node touching a state tensor. */
static const char *kind_op(const ert_node *n);
static edgert_status check_state(loader *L, edgert_model *m, const uint8_t *defined, uint8_t *mark) {
  if (m->n_states == 0) return EDGERT_OK;
  const uint64_t region = m->state_offset;
  for (uint32_t k = 0; k < m->n_states; k++) {
    const ert_tensor *o = &m->tensors[m->states[k].out];
    if (defined[m->states[k].out] != 1)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "state output '%s' is never computed", o->name);
    mark[m->states[k].in] = mark[m->states[k].out] = 1;
  }
  for (uint32_t i = 0; i < m->n_tensors; i++) {
    const ert_tensor *t = &m->tensors[i];
    if (t->storage != ERT_STORAGE_ARENA) continue;
    if (!mark[i]) {
      if (t->nbytes > 0 && t->offset + t->nbytes > region)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "tensor '%s' reaches into the state region", t->name);
      continue;
    }
    for (uint32_t j = 0; j < i; j++)
      if (mark[j] && ert_ranges_overlap(t->offset, t->nbytes, m->tensors[j].offset, m->tensors[j].nbytes))
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "state tensors '%s' and '%s' overlap", m->tensors[j].name,
                        t->name);
  }
  for (uint32_t k = 0; k < m->n_outputs; k++)
    if (mark[m->outputs[k]])
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "graph output '%s' is a state tensor", m->tensors[m->outputs[k]].name);
  for (uint32_t i = 0; i < m->n_nodes; i++) {
    const ert_node *n = &m->nodes[i];
    if (n->scratch_bytes > 0 && n->scratch_offset + n->scratch_bytes > region)
      return ert_fail_node(L->err, EDGERT_ERR_FORMAT, n->name, ": scratch reaches into the state region");
    if (strcmp(kind_op(n), "partition") != 0) continue;
    for (uint32_t k = 0; k < n->n_in + n->n_out; k++) {
      const ert_tensor *t = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
      if (t != NULL && mark[t - m->tensors])
        return ert_fail_node(L->err, EDGERT_ERR_UNSUPPORTED, n->name, ": a fallback partition cannot hold state '%s'",
                             t->name);
    }
  }
  return EDGERT_OK;
}

static const char *kind_op(const ert_node *n) {
  ert_op_impl impl;
  const char *op = ert_op_lookup((uint32_t)n->op, &impl);
  return op != NULL ? op : "";
}

/* BOUNDS (docs/format.md): symbols, input dims bound to them, and the rules that set
 * parameter words and output dims from input dims. Read here; ert_bounds_check
 * (bounds.c) checks them against the prepared graph. */
static edgert_status load_bounds(loader *L, edgert_model *m) {
  const section *s = &L->sec[SEC_BOUNDS];
  if (!s->present) return EDGERT_OK;
  const uint8_t *p = L->buf + s->off;
  if (s->size < 16) return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS section too small");
  /* From minor 3 on, the u32 at 12 counts the expression program words after the rules. */
  const uint32_t ns = rd32(p), nb = rd32(p + 4), nr = rd32(p + 8), nc = rd32(p + 12);
  if ((nc != 0 && L->minor < 3) || nc > 1u << 20 || ns == 0 || ns > ERT_MAX_SYMBOLS || nb == 0 || nb > 64 * 8 ||
      nr > 1u << 24 || s->size != 16 + 24ull * ns + 12ull * nb + 24ull * nr + 4ull * nc)
    return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS section: bad counts or size");
  ert_bounds *b = ert_calloc(1, sizeof *b);
  if (b == NULL) return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  m->bounds = b;
  b->binds = ert_calloc(nb, sizeof *b->binds);
  b->rules = nr > 0 ? ert_calloc(nr, sizeof *b->rules) : NULL;
  b->code = nc > 0 ? ert_calloc(nc, sizeof *b->code) : NULL;
  if (b->binds == NULL || (nr > 0 && b->rules == NULL) || (nc > 0 && b->code == NULL))
    return ert_fail(L->err, EDGERT_ERR_NO_MEMORY, "out of memory");
  b->n_code = nc;
  for (uint32_t i = 0; i < nc; i++) b->code[i] = rd32(p + 16 + 24ull * ns + 12ull * nb + 24ull * nr + 4ull * i);
  b->n_syms = ns;
  b->n_binds = nb;
  b->n_rules = nr;
  p += 16;
  for (uint32_t i = 0; i < ns; i++, p += 24) {
    ert_sym *y = &b->syms[i];
    edgert_status st = get_string(L, rd32(p), rd32(p + 4), &y->name, "symbol", i);
    if (st != EDGERT_OK) return st;
    y->lo = (int64_t)rd64(p + 8);
    y->hi = (int64_t)rd64(p + 16);
    if (y->lo < 1 || y->lo > y->hi || y->hi > INT32_MAX)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "symbol '%s': bounds %lld..%lld are invalid", y->name,
                      (long long)y->lo, (long long)y->hi);
  }
  for (uint32_t i = 0; i < nb; i++, p += 12) {
    ert_bind *d = &b->binds[i];
    d->input = rd32(p);
    d->dim = rd32(p + 4);
    d->sym = rd32(p + 8);
    if (d->input >= m->n_inputs || d->sym >= ns ||
        d->dim >= (uint32_t)m->tensors[m->inputs[d->input]].ndim)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS binding %u: input, dim or symbol out of range",
                      (unsigned)i);
    const ert_tensor *t = &m->tensors[m->inputs[d->input]];
    if (t->shape[d->dim] != b->syms[d->sym].hi)
      return ert_fail(L->err, EDGERT_ERR_FORMAT,
                      "input '%s' dim %u is %d in the file, not the upper bound %lld of '%s'", t->name,
                      (unsigned)d->dim, (int)t->shape[d->dim], (long long)b->syms[d->sym].hi,
                      b->syms[d->sym].name);
    for (uint32_t j = 0; j < i; j++)
      if (b->binds[j].input == d->input && b->binds[j].dim == d->dim)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS binding %u repeats an input dim", (unsigned)i);
  }
  for (uint32_t i = 0; i < nr; i++, p += 24) {
    ert_rule *r = &b->rules[i];
    r->node = rd32(p);
    r->kind = rd32(p + 4);
    r->in = rd32(p + 8);
    r->in_dim = rd32(p + 12);
    r->target = rd32(p + 16);
    r->add = (int32_t)rd32(p + 20);
    const bool step = r->kind == ERT_RULE_STEP;
    const uint64_t mask = r->in_dim | (uint64_t)(uint32_t)r->add << 32;
    if ((step ? r->node != ERT_RULE_NO_NODE || r->in >= ns || r->target < 2 || r->target > 64 || mask == 0 ||
                    (r->target < 64 && mask >> r->target != 0)
              : r->node >= m->n_nodes) ||
        (i > 0 && r->node < b->rules[i - 1].node) || r->kind > ERT_RULE_OUTDIM_EXPR)
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS rule %u: node out of range or order, or kind unknown",
                      (unsigned)i);
    if (step) continue;
    const ert_node *n = &m->nodes[r->node];
    if (r->kind == ERT_RULE_PARAM_EXPR || r->kind == ERT_RULE_OUTDIM_EXPR) {
      const bool param = r->kind == ERT_RULE_PARAM_EXPR;
      if (L->minor < 3 || r->add != 0 || r->in_dim == 0 || r->in >= nc || r->in_dim > nc - r->in ||
          (param ? r->target >= n->n_params
                 : r->target / 8 >= n->n_out || r->target % 8 >= (uint32_t)n->out[r->target / 8]->ndim))
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS rule %u (node '%s'): operand out of range",
                        (unsigned)i, n->name);
      edgert_status st = ert_expr_check(b->code + r->in, r->in_dim, ns, n, L->err);
      if (st != EDGERT_OK) return st;
      continue;
    }
    if (r->kind == ERT_RULE_SLICE) {
      if (strcmp(kind_op(n), "slice") != 0 || n->n_in < 1 || n->in[0] == NULL || r->in_dim >= (uint32_t)n->in[0]->ndim ||
          r->target + 2u >= n->n_params || r->target != 1u + 3u * r->in_dim || ert_pi(n, r->target + 1) == 0)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS rule %u (node '%s'): operand out of range",
                        (unsigned)i, n->name);
      continue;
    }
    if (r->kind == ERT_RULE_PARAM_SYM) {
      if (r->in >= ns || r->target >= n->n_params)
        return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS rule %u (node '%s'): operand out of range",
                        (unsigned)i, n->name);
      continue;
    }
    if (r->in >= n->n_in || n->in[r->in] == NULL || r->in_dim >= (uint32_t)n->in[r->in]->ndim ||
        ((r->kind == ERT_RULE_PARAM || r->kind == ERT_RULE_SAME) && r->target >= n->n_params) ||
        (r->kind == ERT_RULE_SAME && ((r->add & 0xFFFF) == 0 || ((r->add >> 16) & 0xFFF) == 0)) ||
        (r->kind == ERT_RULE_RESIZE_NEAREST && (r->in != 0 || r->add < 1 || strcmp(kind_op(n), "resize") != 0)) ||
        (r->kind == ERT_RULE_RESIZE && (r->in != 0 || (r->target & 7u) > ERT_RESIZE_ALIGN_CORNERS ||
                                        ((r->target >> 3) & 7u) > ERT_RESIZE_SIMPLE || r->target >> 7 != 0 ||
                                        strcmp(kind_op(n), "resize") != 0)) ||
        (r->kind != ERT_RULE_PARAM && r->kind != ERT_RULE_SAME && r->kind != ERT_RULE_RESIZE &&
         (r->target / 8 >= n->n_out || r->target % 8 >= (uint32_t)n->out[r->target / 8]->ndim)))
      return ert_fail(L->err, EDGERT_ERR_FORMAT, "BOUNDS rule %u (node '%s'): operand out of range",
                      (unsigned)i, n->name);
  }
  return ert_bounds_check(m, L->err);
}

static edgert_status prepare_nodes(loader *L, edgert_model *m) {
  for (uint32_t i = 0; i < m->n_nodes; i++) {
    ert_node *n = &m->nodes[i];
    ert_op_impl impl;
    const char *op = ert_op_lookup((uint32_t)n->op, &impl);
    edgert_status st = impl.prepare(n, L->err);
    if (st != EDGERT_OK) {
      /* A prepare that forgot to write a message still leaves a useful one. */
      if (L->err->msg != NULL && L->err->size > 0 && L->err->msg[0] == '\0')
        ert_fail_node(L->err, st, n->name, " (%s): %s", op, edgert_status_str(st));
      return st;
    }
  }
  return EDGERT_OK;
}

static edgert_status load(const uint8_t *buf, size_t size, void *owned, edgert_model **out,
                          ert_err *err) {
  loader L;
  memset(&L, 0, sizeof L);
  L.buf = buf;
  L.size = size;
  L.err = err;

  uint64_t table_off = 0;
  uint32_t n_sec = 0;
  edgert_status st = check_header(&L, &table_off, &n_sec);
  if (st == EDGERT_OK) st = check_sections(&L, table_off, n_sec);
  if (st == EDGERT_OK) {
    uint32_t stored = rd32(buf + 40);
    uint32_t crc = ert_crc32(0, buf + HEADER_SIZE, size - HEADER_SIZE);
#if defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
    /* Fuzz builds skip the checksum so mutations reach the structural checks. */
    stored = crc;
#endif
    if (crc != stored)
      st = ert_fail(err, EDGERT_ERR_CHECKSUM, "checksum mismatch (stored %08x, computed %08x): file is corrupt",
                    (unsigned)stored, (unsigned)crc);
  }
  if (st != EDGERT_OK) {
    ert_free(owned);
    return st;
  }

  edgert_model *m = ert_calloc(1, sizeof *m);
  if (m == NULL) {
    ert_free(owned);
    return ert_fail(err, EDGERT_ERR_NO_MEMORY, "out of memory");
  }
  m->buf = buf;
  m->size = size;
  m->owned = owned;

  const uint8_t *g = buf + L.sec[SEC_GRAPH].off;
  L.arena_bytes = rd64(g);
  if (L.arena_bytes > SIZE_MAX - EDGERT_ARENA_ALIGN) {
    st = ert_fail(err, EDGERT_ERR_FORMAT, "arena of %llu bytes is too large for this machine",
                  (unsigned long long)L.arena_bytes);
  }
  m->arena_bytes = (size_t)L.arena_bytes;

  uint8_t *defined = NULL;
  if (st == EDGERT_OK) st = load_quants(&L, m);
  if (st == EDGERT_OK) st = load_tensors(&L, m);
  if (st == EDGERT_OK && L.sec[SEC_SPARSE].present)
    st = ert_sparse_load(buf + L.sec[SEC_SPARSE].off, L.sec[SEC_SPARSE].count, L.consts, L.consts_size,
                         m->tensors, m->n_tensors, &m->sparse_dense, err);
  if (st == EDGERT_OK) {
    defined = ert_calloc(m->n_tensors, 1);
    if (defined == NULL) st = ert_fail(err, EDGERT_ERR_NO_MEMORY, "out of memory");
  }
  if (st == EDGERT_OK) st = load_graph(&L, m, defined);
  if (st == EDGERT_OK) st = load_state(&L, m, defined);
  if (st == EDGERT_OK) st = load_nodes(&L, m, defined);
  if (st == EDGERT_OK && m->n_states > 0) {
    memset(defined, 0, m->n_tensors);
    for (uint32_t i = 0; i < m->n_nodes; i++)
      for (uint32_t k = 0; k < m->nodes[i].n_out; k++) defined[m->nodes[i].out[k] - m->tensors] = 1;
    uint8_t *mark = ert_calloc(m->n_tensors, 1);
    st = mark == NULL ? ert_fail(err, EDGERT_ERR_NO_MEMORY, "out of memory") : check_state(&L, m, defined, mark);
    ert_free(mark);
  }
  ert_free(defined);
  if (st == EDGERT_OK) st = prepare_nodes(&L, m);
  if (st == EDGERT_OK) st = load_bounds(&L, m);
  if (st != EDGERT_OK) {
    model_release(m);
    return st;
  }
  *out = m;
  return EDGERT_OK;
}

edgert_status edgert_model_load_memory(const void *buffer, size_t size, edgert_model **out,
                                       char *err, size_t err_size) {
  ert_err e = {err, err_size};
  if (err != NULL && err_size > 0) err[0] = '\0';
  if (out == NULL) return ert_fail(&e, EDGERT_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (buffer == NULL) return ert_fail(&e, EDGERT_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if ((uintptr_t)buffer % EDGERT_BUFFER_ALIGN != 0)
    return ert_fail(&e, EDGERT_ERR_ALIGNMENT, "model buffer must be %d-byte aligned",
                    (int)EDGERT_BUFFER_ALIGN);
  return load((const uint8_t *)buffer, size, NULL, out, &e);
}

edgert_status edgert_model_load_file(const char *path, edgert_model **out, char *err,
                                     size_t err_size) {
  ert_err e = {err, err_size};
  if (err != NULL && err_size > 0) err[0] = '\0';
  if (out == NULL) return ert_fail(&e, EDGERT_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (path == NULL) return ert_fail(&e, EDGERT_ERR_INVALID_ARGUMENT, "path is NULL");
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return ert_fail(&e, EDGERT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    int code = errno;
    fclose(f);
    return ert_fail(&e, EDGERT_ERR_IO, "cannot read '%s': %s", path,
                    code ? strerror(code) : "not a regular file");
  }
  if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX - 64) {
    fclose(f);
    return ert_fail(&e, EDGERT_ERR_NO_MEMORY, "'%s' is too large for this machine", path);
  }
  size_t len = (size_t)sb.st_size;
  uint8_t *buf = ert_aligned_alloc(64, len);
  if (buf == NULL) {
    fclose(f);
    return ert_fail(&e, EDGERT_ERR_NO_MEMORY, "cannot allocate %zu bytes for '%s'", len, path);
  }
  errno = 0;
  size_t got = len > 0 ? fread(buf, 1, len, f) : 0;
  int code = ferror(f) ? errno : 0;
  uint8_t past; /* a byte after the size fstat gave: the file grew while being read */
  size_t extra = (got == len) ? fread(&past, 1, 1, f) : 0;
  fclose(f);
  if (got != len || extra != 0) {
    ert_free(buf);
    return ert_fail(&e, EDGERT_ERR_IO, "cannot read '%s': %s", path,
                    code ? strerror(code) : "file changed size while reading");
  }
  edgert_status st = load(buf, len, buf, out, &e);
  if (st != EDGERT_OK && err != NULL && err_size > 0) {
    /* Name the file in front of the loader's message. */
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", err);
    snprintf(err, err_size, "%s: %s", path, tmp);
  }
  return st;
}

/* ---- accessors ------------------------------------------------------------- */

size_t edgert_model_num_inputs(const edgert_model *model) { return model ? model->n_inputs : 0; }
size_t edgert_model_num_outputs(const edgert_model *model) { return model ? model->n_outputs : 0; }
size_t edgert_model_arena_bytes(const edgert_model *model) { return model ? model->arena_bytes : 0; }
size_t edgert_model_num_nodes(const edgert_model *model) { return model ? model->n_nodes : 0; }

void ert_fill_info(const ert_tensor *t, edgert_tensor_info *info) {
  memset(info, 0, sizeof *info);
  info->name = t->name;
  info->dtype = t->dtype;
  info->ndim = t->ndim;
  for (int32_t d = 0; d < t->ndim; d++) info->shape[d] = t->shape[d];
  info->nbytes = t->nbytes;
  if (t->quant != NULL && t->quant->axis < 0 && t->quant->count == 1) {
    memcpy(&info->scale, t->quant->scales, sizeof info->scale);
    memcpy(&info->zero_point, t->quant->zero_points, sizeof info->zero_point);
  }
}

edgert_status edgert_model_input_info(const edgert_model *model, size_t index,
                                      edgert_tensor_info *info) {
  if (model == NULL || info == NULL || index >= model->n_inputs) return EDGERT_ERR_INVALID_ARGUMENT;
  ert_fill_info(&model->tensors[model->inputs[index]], info);
  return EDGERT_OK;
}

edgert_status edgert_model_output_info(const edgert_model *model, size_t index,
                                       edgert_tensor_info *info) {
  if (model == NULL || info == NULL || index >= model->n_outputs) return EDGERT_ERR_INVALID_ARGUMENT;
  ert_fill_info(&model->tensors[model->outputs[index]], info);
  return EDGERT_OK;
}

edgert_status edgert_model_input_dim(const edgert_model *model, size_t index, size_t dim,
                                     edgert_dim_info *info) {
  if (model == NULL || info == NULL || index >= model->n_inputs) return EDGERT_ERR_INVALID_ARGUMENT;
  const ert_tensor *t = &model->tensors[model->inputs[index]];
  if (dim >= (size_t)t->ndim) return EDGERT_ERR_INVALID_ARGUMENT;
  memset(info, 0, sizeof *info);
  info->symbol = "";
  info->lo = info->hi = t->shape[dim];
  info->step = 1;
  info->residues = 1;
  const ert_bounds *b = model->bounds;
  for (uint32_t k = 0; b != NULL && k < b->n_binds; k++) {
    if (b->binds[k].input != index || b->binds[k].dim != dim) continue;
    const ert_sym *y = &b->syms[b->binds[k].sym];
    info->symbol = y->name;
    info->lo = y->lo;
    info->hi = y->hi;
    uint32_t step;
    info->residues = ert_bounds_residues(b, b->binds[k].sym, &step);
    info->step = step;
  }
  return EDGERT_OK;
}

edgert_status edgert_model_node_info(const edgert_model *model, size_t index, edgert_node_info *info) {
  if (model == NULL || info == NULL || index >= model->n_nodes) return EDGERT_ERR_INVALID_ARGUMENT;
  const ert_node *n = &model->nodes[index];
  ert_op_impl impl;
  const char *op = ert_op_lookup((uint32_t)n->op, &impl);
  memset(info, 0, sizeof *info);
  info->name = n->name;
  info->op = op != NULL ? op : "?";
  info->num_inputs = n->n_in;
  info->num_outputs = n->n_out;
  info->scratch_bytes = n->scratch_bytes;
  return EDGERT_OK;
}
