/* sgemm_avx512.c (AVX-512F): the SGEMM block kernel sgemm_block, contract in src/cpu.h
 * (the reference is the blocked driver's micro_rows and store_tile in ref/sgemm.c).
 *
 * Tiles of up to 12 rows by 32 columns (or 16): two zmm accumulators per row (24 of the
 * 32 registers), per k two loads of B's row and two multiply-adds per row with A's
 * value broadcast once. A last column vector past n is masked (loads, stores), so B
 * may be read in place, a partial panel needs no packing and nothing past column n is
 * read or written. Called only where src/cpu.c found AVX512F and the OS saving the zmm
 * and opmask state. */
#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "cpu.h"

/* the deepest block dot_cols takes (its column buffer) */
#define DOT_KC_MAX 1024

#define ERT_AVX512 __attribute__((target("avx2,fma,avx512f")))
#define ERT_AVX512_INLINE static inline __attribute__((target("avx2,fma,avx512f"), always_inline))

/* The store's clamp-like activations, the formulas and NaN behaviour of ert_act8
 * (x86_avx2.h) on 16 lanes. */
typedef struct act16 {
  int kind;
  __m512 a, b;
} act16;

ERT_AVX512_INLINE act16 act16_of(const ert_act_params *act) {
  act16 r;
  r.kind = act != NULL ? (int)act->kind : ERT_ACT_NONE;
  r.a = _mm512_set1_ps(act != NULL ? act->a : 0.0f);
  r.b = _mm512_set1_ps(act != NULL ? act->b : 0.0f);
  return r;
}

ERT_AVX512_INLINE __m512 act16_apply(const act16 *act, __m512 v) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  switch (act->kind) {
    case ERT_ACT_RELU: /* v > 0 ? v : 0 */
      return _mm512_max_ps(v, zero);
    case ERT_ACT_CLIP: /* t = v < a ? a : v; t > b ? b : t */
      return _mm512_min_ps(act->b, _mm512_max_ps(act->a, v));
    case ERT_ACT_HARD_SIGMOID: {
      const __m512 t = _mm512_fmadd_ps(act->a, v, act->b);
      return _mm512_min_ps(one, _mm512_max_ps(zero, t));
    }
    case ERT_ACT_HARD_SWISH: {
      const __m512 t = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(v, _mm512_min_ps(one, _mm512_max_ps(zero, t)));
    }
    case ERT_ACT_LEAKY_RELU: /* v < 0 ? a v : v */
      return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), act->a, v);
    default:
      return v;
  }
}

/* One tile of R rows (constant after inlining) by V = 1 or 2 vectors of 16 columns, the
 * last vector full or the columns of mask: the rows of A at a + i*lda, B's rows ldb apart
 * from b, the second vector's panel ps floats after the first. Per k, R broadcasts of A
 * and V loads of B feed R * V multiply-adds: with V = 2 (up to 12 rows) 14 loads per 24
 * multiply-adds, where V = 1 needs 17 per 16 (what limits a core with two 512-bit FMA
 * units and fewer load ports for them). PF (B's rows in place, far apart): the next
 * column tile's row k and a line of the next row tile's A (pf) are prefetched each k;
 * packed panels stream on the hardware prefetchers alone. */
ERT_AVX512_INLINE void tile(const int R, const int V, const int PF, const int full, int32_t kc,
                            const float *a, ptrdiff_t lda, const float *b, ptrdiff_t ldb,
                            ptrdiff_t ps, float *c, const ert_sgemm_store *st, const act16 *act,
                            __mmask16 mask, const float *pf) {
  __m512 acc[16][2];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    acc[i][0] = _mm512_setzero_ps();
    if (V == 2) acc[i][1] = _mm512_setzero_ps();
  }
  /* rows 4q + r at base q plus r*lda: four base pointers and three offsets, so that every
     load is one addressing mode */
  const float *q0 = a, *q1 = R > 4 ? a + 4 * lda : a, *q2 = R > 8 ? a + 8 * lda : a;
  const float *q3 = R > 12 ? a + 12 * lda : a;
  const ptrdiff_t l1 = lda, l2 = 2 * lda, l3 = 3 * lda;
  const float *b1 = b + (V == 2 ? ps : 0);
  for (int32_t k = 0; k < kc; ++k, b += ldb, b1 += ldb) {
    __m512 bv0, bv1 = _mm512_setzero_ps();
    if (V == 1) {
      bv0 = full ? _mm512_loadu_ps(b) : _mm512_maskz_loadu_ps(mask, b);
    } else {
      bv0 = _mm512_loadu_ps(b);
      bv1 = full ? _mm512_loadu_ps(b1) : _mm512_maskz_loadu_ps(mask, b1);
    }
    if (PF) {
      /* the next column tile's row k, and one line of the next row tile's A per k (row
         k % 16, columns from k & ~15); addresses past the matrices are only prefetched
         (formed as integers: no pointer leaves its array) */
      _mm_prefetch((const char *)((uintptr_t)b + (uintptr_t)(V * ps) * sizeof(float)), _MM_HINT_T0);
      if (V == 2)
        _mm_prefetch((const char *)((uintptr_t)b + (uintptr_t)(3 * ps) * sizeof(float)), _MM_HINT_T0);
      _mm_prefetch((const char *)((uintptr_t)pf + (uintptr_t)((k & 15) * lda + (k & ~15)) * sizeof(float)),
                   _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const float *q = (i >> 2) == 0 ? q0 : (i >> 2) == 1 ? q1 : (i >> 2) == 2 ? q2 : q3;
      const ptrdiff_t o = (i & 3) == 0 ? 0 : (i & 3) == 1 ? l1 : (i & 3) == 2 ? l2 : l3;
      const __m512 av = _mm512_set1_ps(q[o]);
      acc[i][0] = _mm512_fmadd_ps(av, bv0, acc[i][0]);
      if (V == 2) acc[i][1] = _mm512_fmadd_ps(av, bv1, acc[i][1]);
    }
    ++q0, ++q1, ++q2, ++q3;
  }
  const __m512 alpha = _mm512_set1_ps(st->alpha);
  const ptrdiff_t ldc = st->ldc;
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
    /* vector v's columns: all 16, or mask's for the last one */
    const int whole = full || v + 1 < V;
    const __mmask16 mv = whole ? (__mmask16)0xFFFF : mask;
    const int32_t j = 16 * v;
    /* bias per column (NHWC): one vector for every row */
    const __m512 bcol = st->bias_cols && st->bias != NULL ? _mm512_maskz_loadu_ps(mv, st->bias + j)
                                                          : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      float *ci = c + i * ldc + j;
      const __m512 base = st->init ? (st->bias_cols ? bcol
                                      : _mm512_set1_ps(st->bias != NULL ? st->bias[i] : 0.0f))
                          : whole ? _mm512_loadu_ps(ci)
                                  : _mm512_maskz_loadu_ps(mv, ci);
      __m512 r = _mm512_fmadd_ps(acc[i][v], alpha, base);
      if (st->res != NULL) /* an Add after the layer (NHWC) */
        r = _mm512_add_ps(r, whole ? _mm512_loadu_ps(st->res + i * ldc + j)
                                   : _mm512_maskz_loadu_ps(mv, st->res + i * ldc + j));
      r = act16_apply(act, r);
      if (whole)
        _mm512_storeu_ps(ci, r);
      else
        _mm512_mask_storeu_ps(ci, mv, r);
    }
  }
}

typedef void (*tile_fn)(int32_t, const float *, ptrdiff_t, const float *, ptrdiff_t, ptrdiff_t,
                        float *, const ert_sgemm_store *, const act16 *, __mmask16,
                        const float *);

#define TILE_FN(R, V, PF)                                                                     \
  ERT_AVX512 static void tile##R##_##V##_##PF(int32_t kc, const float *a, ptrdiff_t lda,      \
                                              const float *b, ptrdiff_t ldb, ptrdiff_t ps,    \
                                              float *c, const ert_sgemm_store *st,            \
                                              const act16 *act, __mmask16 mask,               \
                                              const float *pf) {                              \
    if (mask == 0xFFFF)                                                                       \
      tile(R, V, PF, 1, kc, a, lda, b, ldb, ps, c, st, act, mask, pf);                        \
    else                                                                                      \
      tile(R, V, PF, 0, kc, a, lda, b, ldb, ps, c, st, act, mask, pf);                        \
  }
#define TILE_FNS(R) TILE_FN(R, 1, 0) TILE_FN(R, 1, 1) TILE_FN(R, 2, 0) TILE_FN(R, 2, 1)
TILE_FNS(1)
TILE_FNS(2)
TILE_FNS(3)
TILE_FNS(4)
TILE_FNS(5)
TILE_FNS(6)
TILE_FNS(7)
TILE_FNS(8)
TILE_FNS(9)
TILE_FNS(10)
TILE_FNS(11)
TILE_FNS(12)
#define TILE_ROW(R) {tile##R##_1_0, tile##R##_1_1, tile##R##_2_0, tile##R##_2_1}
/* tiles[R][2 * (V - 1) + PF] */
static const tile_fn tiles[13][4] = {{NULL, NULL, NULL, NULL}, TILE_ROW(1), TILE_ROW(2), TILE_ROW(3),
                                     TILE_ROW(4), TILE_ROW(5), TILE_ROW(6), TILE_ROW(7), TILE_ROW(8),
                                     TILE_ROW(9), TILE_ROW(10), TILE_ROW(11), TILE_ROW(12)};

/* Lane i of the result: the sum of v[i]'s 16 lanes (a transposing tree of adds). */
ERT_AVX512_INLINE __m512 hsum16(const __m512 *v) {
  __m512 p[8], u[4];
  for (int i = 0; i < 8; ++i) /* per 128-bit lane: (x, y, x, y) partial sums of v[2i], v[2i+1] */
    p[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) /* per 128-bit lane: the sums of rows 4i..4i+3 over that lane */
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Lane i: the dot product of x[0..k) with rows[i][0..k) (k % 16 by masked loads, nothing
 * read past k); pf: prefetch each row that many floats ahead (0: none). */
ERT_AVX512_INLINE __m512 dot16(const float *const *rows, const float *x, int32_t k, const int pf) {
  const int32_t kr = k & 15, k16 = k - kr;
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int32_t t = 0; t < k16; t += 16) {
    const __m512 xv = _mm512_loadu_ps(x + t);
    for (int i = 0; i < 16; ++i) {
      if (pf)
        _mm_prefetch((const char *)((uintptr_t)rows[i] + (uintptr_t)(t + pf) * sizeof(float)),
                     _MM_HINT_T0);
      acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(rows[i] + t), xv, acc[i]);
    }
  }
  if (kr != 0) {
    const __mmask16 km = (__mmask16)((1u << kr) - 1u);
    const __m512 xv = _mm512_maskz_loadu_ps(km, x + k16);
    for (int i = 0; i < 16; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(km, rows[i] + k16), xv, acc[i]);
  }
  return hsum16(acc);
}

/* The last r < 16 columns as dot products, cheaper than a mostly masked tile when r is
 * small: column j of B gathered into col (kc floats), then for each 16 rows (rows past m
 * repeat row m - 1, results dropped) dot16; the store as the tiles' (bias, alpha, C, act). */
ERT_AVX512 static void dot_cols(int32_t m, int32_t r, int32_t kc, const float *a, ptrdiff_t lda,
                                const float *b, ptrdiff_t ldb, float *c,
                                const ert_sgemm_store *st, const act16 *act) {
  float col[DOT_KC_MAX];
  const __m512 alpha = _mm512_set1_ps(st->alpha);
  for (int32_t j = 0; j < r; ++j) {
    for (int32_t k = 0; k < kc; ++k) col[k] = b[(ptrdiff_t)k * ldb + j];
    for (int32_t i0 = 0; i0 < m; i0 += 16) {
      const float *rows[16];
      for (int i = 0; i < 16; ++i) rows[i] = a + (ptrdiff_t)(i0 + i < m ? i0 + i : m - 1) * lda;
      const __m512 sum = dot16(rows, col, kc, 0);
      const int32_t n = m - i0 < 16 ? m - i0 : 16;
      const __mmask16 rm = (__mmask16)((1u << n) - 1u);
      float out[16] __attribute__((aligned(64)));
      float *cj = c + (ptrdiff_t)i0 * st->ldc + j;
      __m512 base;
      if (st->init) {
        base = st->bias == NULL ? _mm512_setzero_ps()
               : st->bias_cols  ? _mm512_set1_ps(st->bias[j])
                                : _mm512_maskz_loadu_ps(rm, st->bias + i0);
      } else {
        for (int32_t i = 0; i < n; ++i) out[i] = cj[(ptrdiff_t)i * st->ldc];
        base = _mm512_maskz_load_ps(rm, out);
      }
      __m512 v = _mm512_fmadd_ps(sum, alpha, base);
      if (st->res != NULL) {
        float r[16] __attribute__((aligned(64)));
        for (int32_t i = 0; i < n; ++i) r[i] = st->res[(ptrdiff_t)(i0 + i) * st->ldc + j];
        v = _mm512_add_ps(v, _mm512_maskz_load_ps(rm, r));
      }
      _mm512_store_ps(out, act16_apply(act, v));
      for (int32_t i = 0; i < n; ++i) cj[(ptrdiff_t)i * st->ldc] = out[i];
    }
  }
}

/* dot_rows (cpu.h): sixteen rows at a time, each prefetched 512 bytes ahead (long rows
 * of a matrix-vector product stream from memory). */
ERT_AVX512 void ert_dot_rows_f32__avx512(const float *x, const float *r, ptrdiff_t ld, int32_t k,
                                         int32_t n, float *out) {
  for (int32_t j0 = 0; j0 < n; j0 += 16) {
    const float *rows[16];
    for (int i = 0; i < 16; ++i) rows[i] = r + (ptrdiff_t)(j0 + i < n ? j0 + i : n - 1) * ld;
    const __m512 sum = dot16(rows, x, k, 128);
    const int32_t len = n - j0 < 16 ? n - j0 : 16;
    _mm512_mask_storeu_ps(out + j0, (__mmask16)((1u << len) - 1u), sum);
  }
}

/* pack_at (cpu.h): 16x16 blocks, each transposed in registers in four steps; step b
 * swaps the b x b blocks above and below the diagonal of every 2b x 2b block (rows i and
 * i + b). Rows and columns past the block's ends are loaded as zeros and not stored. */
ERT_AVX512 void ert_pack_at_f32__avx512(float *dst, const float *src, ptrdiff_t ld, int32_t m,
                                        int32_t kc) {
  __m512i lo[4], hi[4];
  for (int s = 0, b = 8; s < 4; ++s, b >>= 1) {
    int32_t l[16], h[16];
    for (int i = 0; i < 16; ++i) {
      l[i] = (i & b) ? 16 + i - b : i;
      h[i] = (i & b) ? 16 + i : i + b;
    }
    lo[s] = _mm512_loadu_si512(l);
    hi[s] = _mm512_loadu_si512(h);
  }
  for (int32_t k0 = 0; k0 < kc; k0 += 16) {
    const int32_t kn = kc - k0 < 16 ? kc - k0 : 16;
    const __mmask16 km = (__mmask16)((1u << kn) - 1u);
    for (int32_t i0 = 0; i0 < m; i0 += 16) {
      const int32_t in = m - i0 < 16 ? m - i0 : 16;
      const __mmask16 im = (__mmask16)((1u << in) - 1u);
      __m512 r[16];
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) /* r[k][i] = A(i0 + i, k0 + k) */
        r[k] = k < kn ? _mm512_maskz_loadu_ps(im, src + (ptrdiff_t)(k0 + k) * ld + i0) : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s)
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          if (!(i & (8 >> s))) {
            const int b = 8 >> s;
            const __m512 a = r[i], c = r[i + b];
            r[i] = _mm512_permutex2var_ps(a, lo[s], c);
            r[i + b] = _mm512_permutex2var_ps(a, hi[s], c);
          }
      for (int i = 0; i < in; ++i) _mm512_mask_storeu_ps(dst + (ptrdiff_t)(i0 + i) * kc + k0, km, r[i]);
    }
  }
}

/* Row tiles outer, column tiles inner: a tile's rows of A (up to 12 x kc floats) stay in
 * L1 across the columns; the caller keeps the columns few enough for B's block to stay in
 * L2 across the row tiles. Columns go two vectors at a time, the last 16 or fewer as one;
 * a last partial column tile of few columns goes to dot_cols. */
ERT_AVX512 void ert_sgemm_block_f32__avx512(int32_t m, int32_t n, int32_t kc, const float *a,
                                            ptrdiff_t lda, const float *b, ptrdiff_t ldb,
                                            ptrdiff_t ps, float *c, const ert_sgemm_store *st) {
  const act16 act = act16_of(st->act);
  const int32_t r = n & 15;
  /* dot products for the last r columns when they cost less than a 16-column tile */
  const int dots = r != 0 && kc <= DOT_KC_MAX && r * (kc + 64) < 16 * kc; /* kc <= 1024 */
  const int32_t nt = dots ? n - r : n;
  const int pfb = ldb != 16; /* B's rows in place: prefetched (see tile) */
  ert_sgemm_store s = *st;
  /* row tiles of near-equal height, at most 12 (49 rows: 12, 12, 12, 13 would not fit:
     10, 10, 10, 10, 9) */
  const int32_t ntiles = (m + 11) / 12;
  for (int32_t q = 0, i0 = 0, rows; q < ntiles; ++q, i0 += rows) {
    rows = (int32_t)((int64_t)(q + 1) * m / ntiles) - i0;
    if (!st->bias_cols) s.bias = st->bias != NULL ? st->bias + i0 : NULL;
    const float *res_i = st->res != NULL ? st->res + (ptrdiff_t)i0 * st->ldc : NULL;
    const float *ai = a + (ptrdiff_t)i0 * lda;
    float *ci = c + (ptrdiff_t)i0 * st->ldc;
    for (int32_t j0 = 0, t = 0, v; j0 < nt; j0 += 16 * v, t += v) {
      v = nt - j0 > 16 ? 2 : 1;
      const int32_t last = nt - j0 - 16 * (v - 1); /* the last vector's columns */
      const __mmask16 mask = last >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << last) - 1u);
      if (st->bias_cols) s.bias = st->bias != NULL ? st->bias + j0 : NULL;
      s.res = res_i != NULL ? res_i + j0 : NULL;
      /* the first column tile prefetches the next row tile's A (the last its own rows) */
      const float *pf = t == 0 && i0 + rows < m ? ai + (ptrdiff_t)rows * lda : ai;
      tiles[rows][2 * (v - 1) + pfb](kc, ai, lda, b + (ptrdiff_t)t * ps, ldb, ps, ci + j0, &s, &act,
                                    mask, pf);
    }
  }
  if (dots) {
    s.bias = st->bias != NULL ? st->bias + (st->bias_cols ? nt : 0) : NULL;
    s.res = st->res != NULL ? st->res + nt : NULL;
    dot_cols(m, r, kc, a, lda, b + (ptrdiff_t)(nt / 16) * ps, ldb, c + nt, &s, &act);
  }
}

#endif
