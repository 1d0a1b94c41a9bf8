/* npy.c: .npy reading and writing for edgert-run. Files are untrusted: the header is
 * parsed with bounds checks and the data size is checked against the shape. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert.h"

static int fail(char *err, size_t size, const char *fmt, ...) {
  if (err != NULL && size > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static const struct {
  int32_t dtype;
  const char *descr; /* without the byte-order character */
  size_t size;
} DTYPES[] = {
    {EDGERT_FLOAT32, "f4", 4}, {EDGERT_FLOAT16, "f2", 2}, {EDGERT_INT8, "i1", 1},
    {EDGERT_UINT8, "u1", 1},   {EDGERT_INT16, "i2", 2},   {EDGERT_INT32, "i4", 4},
    {EDGERT_INT64, "i8", 8},   {EDGERT_BOOL, "b1", 1},
};
enum { N_DTYPES = sizeof DTYPES / sizeof DTYPES[0] };

const char *npy_descr(int32_t dtype) {
  static const char *const full[] = {"<f4", "<f2", "|i1", "|u1", "<i2", "<i4", "<i8", "|b1"};
  for (int k = 0; k < N_DTYPES; k++)
    if (DTYPES[k].dtype == dtype) return full[k];
  return NULL;
}

/* A cursor over the header text, a Python dict literal. */
typedef struct cursor {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool take(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted string ('...' or "...") copied into out (truncated reads fail). */
static bool quoted(cursor *c, char *out, size_t size) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (n + 1 >= size) return false;
    out[n++] = *c->p++;
  }
  if (c->p >= c->end) return false;
  c->p++;
  out[n] = '\0';
  return true;
}

static bool word(cursor *c, const char *w) {
  skip_ws(c);
  size_t n = strlen(w);
  if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
    c->p += n;
    return true;
  }
  return false;
}

/* A shape tuple: "()", "(3,)", "(2, 3)"; every entry a non-negative integer. */
static bool shape_tuple(cursor *c, npy_array *a) {
  if (!take(c, '(')) return false;
  a->ndim = 0;
  for (;;) {
    if (take(c, ')')) return true;
    skip_ws(c);
    int64_t v = 0;
    bool digits = false;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (*c->p++ - '0');
      digits = true;
    }
    if (c->p < c->end && *c->p == 'L') c->p++;
    if (!digits || a->ndim >= EDGERT_MAX_DIMS) return false;
    a->shape[a->ndim++] = v;
    if (!take(c, ',')) return take(c, ')');
  }
}

static int parse_header(const char *text, size_t len, npy_array *a, char *err, size_t err_size) {
  cursor c = {text, text + len};
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  char descr[16];
  if (!take(&c, '{')) return fail(err, err_size, "header is not a dict");
  for (;;) {
    if (take(&c, '}')) break;
    char key[32];
    if (!quoted(&c, key, sizeof key) || !take(&c, ':')) return fail(err, err_size, "malformed header");
    if (strcmp(key, "descr") == 0) {
      if (!quoted(&c, descr, sizeof descr)) return fail(err, err_size, "malformed descr (structured arrays are not supported)");
      have_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (word(&c, "True")) fortran = true;
      else if (word(&c, "False")) fortran = false;
      else return fail(err, err_size, "malformed fortran_order");
      have_order = true;
    } else if (strcmp(key, "shape") == 0) {
      if (!shape_tuple(&c, a)) return fail(err, err_size, "malformed shape (or rank above 8)");
      have_shape = true;
    } else {
      return fail(err, err_size, "unexpected header key '%s'", key);
    }
    if (!take(&c, ',')) {
      if (!take(&c, '}')) return fail(err, err_size, "malformed header");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) return fail(err, err_size, "header lacks descr, fortran_order or shape");
  if (fortran) return fail(err, err_size, "Fortran-ordered arrays are not supported; save a C-contiguous array");
  size_t dlen = strlen(descr);
  if (dlen != 3) return fail(err, err_size, "unsupported dtype '%s'", descr);
  for (int k = 0; k < N_DTYPES; k++) {
    if (strcmp(descr + 1, DTYPES[k].descr) != 0) continue;
    char order = descr[0];
    bool little = order == '<' || order == '|' || (order == '=' && 1 == *(const uint8_t *)&(uint16_t){1});
    if (!little && !(DTYPES[k].size == 1 && order == '>'))
      return fail(err, err_size, "dtype '%s' is not little-endian", descr);
    a->dtype = DTYPES[k].dtype;
    uint64_t n = DTYPES[k].size;
    for (int32_t d = 0; d < a->ndim; d++) {
      if (a->shape[d] != 0 && n > UINT64_MAX / (uint64_t)a->shape[d])
        return fail(err, err_size, "shape too large");
      n *= (uint64_t)a->shape[d];
    }
    if (n > SIZE_MAX) return fail(err, err_size, "shape too large");
    a->nbytes = (size_t)n;
    return 0;
  }
  return fail(err, err_size, "unsupported dtype '%s' (edgert reads f4, f2, i1, u1, i2, i4, i8, b1)", descr);
}

int npy_parse(const uint8_t *buf, size_t size, npy_array *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) return fail(err, err_size, "not a .npy file (bad magic)");
  uint8_t major = buf[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)buf[8] | ((size_t)buf[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return fail(err, err_size, "truncated .npy header");
    hlen = (size_t)buf[8] | ((size_t)buf[9] << 8) | ((size_t)buf[10] << 16) | ((size_t)buf[11] << 24);
    hstart = 12;
  } else {
    return fail(err, err_size, ".npy version %u is not supported", (unsigned)major);
  }
  if (hlen > size - hstart) return fail(err, err_size, "truncated .npy header");
  if (parse_header((const char *)buf + hstart, hlen, out, err, err_size) != 0) return -1;
  size_t data_off = hstart + hlen;
  if (size - data_off != out->nbytes)
    return fail(err, err_size, "data is %zu bytes, shape and dtype need %zu", size - data_off, out->nbytes);
  out->data = malloc(out->nbytes ? out->nbytes : 1);
  if (out->data == NULL) return fail(err, err_size, "out of memory");
  if (out->nbytes) memcpy(out->data, buf + data_off, out->nbytes);
  return 0;
}

int npy_read(const char *path, npy_array *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return fail(err, err_size, "cannot open '%s': %s", path, strerror(errno));
  uint8_t *buf = NULL;
  size_t size = 0, cap = 0;
  for (;;) {
    if (size == cap) {
      size_t ncap = cap ? cap * 2 : 1 << 16;
      uint8_t *nb = ncap > cap ? realloc(buf, ncap) : NULL;
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return fail(err, err_size, "'%s': out of memory", path);
      }
      buf = nb;
      cap = ncap;
    }
    size_t got = fread(buf + size, 1, cap - size, f);
    size += got;
    if (got == 0) break;
  }
  bool bad = ferror(f) != 0;
  fclose(f);
  if (bad) {
    free(buf);
    return fail(err, err_size, "cannot read '%s'", path);
  }
  char msg[256];
  int r = npy_parse(buf, size, out, msg, sizeof msg);
  free(buf);
  if (r != 0) return fail(err, err_size, "'%s': %s", path, msg);
  return 0;
}

int npy_write(const char *path, int32_t dtype, int32_t ndim, const int64_t *shape,
              const void *data, size_t nbytes, char *err, size_t err_size) {
  const char *descr = npy_descr(dtype);
  if (descr == NULL) return fail(err, err_size, "cannot write dtype %d to .npy", (int)dtype);
  char dims[256] = "";
  size_t used = 0;
  for (int32_t d = 0; d < ndim && used < sizeof dims; d++)
    used += (size_t)snprintf(dims + used, sizeof dims - used, d == 0 ? "%lld" : ", %lld", (long long)shape[d]);
  if (ndim == 1 && used < sizeof dims) snprintf(dims + used, sizeof dims - used, ",");
  char header[512];
  int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
  if (n < 0 || (size_t)n >= sizeof header - 64) return fail(err, err_size, "shape too long for a header");
  /* Pad with spaces so data starts at a multiple of 64, then end with a newline. */
  size_t total = 10 + (size_t)n + 1;
  size_t pad = (64 - total % 64) % 64;
  memset(header + n, ' ', pad);
  header[(size_t)n + pad] = '\n';
  size_t hlen = (size_t)n + pad + 1;
  uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xFF), (uint8_t)(hlen >> 8)};
  FILE *f = fopen(path, "wb");
  if (f == NULL) return fail(err, err_size, "cannot create '%s': %s", path, strerror(errno));
  bool ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(header, 1, hlen, f) == hlen &&
            (nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes);
  ok = (fclose(f) == 0) && ok;
  if (!ok) return fail(err, err_size, "cannot write '%s'", path);
  return 0;
}

void npy_free(npy_array *a) {
  if (a == NULL) return;
  free(a->data);
  a->data = NULL;
}
