/* sgemm.c: the portable blocked SGEMM and matrix-vector kernels (see sgemm.h). */
#include "sgemm.h"

#include "cpu.h"
#include "exec.h"

/* Convolutions with K tap-major (taps_setup, taps_panel) where cpu.h's 6-row tile reads B
 * in place over a window (aarch64 NEON). */
#if defined(ERT_NEON_KERNELS) && defined(__aarch64__)
#define ERT_SGEMM_TAPS 1
#endif

#define MR ERT_SGEMM_MR
#define NR ERT_SGEMM_NR
#define KC ERT_SGEMM_KC

_Static_assert(ERT_SGEMM_MR == 4, "micro_rows is written for 4 rows");
_Static_assert(ERT_SGEMM_MC % ERT_SGEMM_MR == 0 && ERT_SGEMM_NC % ERT_SGEMM_NR == 0,
               "task blocks are whole panels");

/* Helpers of run_task are force-inlined into it, so that they are compiled for each of
 * its targets (ERT_SIMD_CLONES). */
#if defined(__GNUC__)
#define ERT_INLINE static inline __attribute__((always_inline))
#else
#define ERT_INLINE static inline
#endif

/* Not hot (once per column or output, not per multiply-add): compiled for size. */
#if defined(__GNUC__)
#define ERT_COLD __attribute__((noinline, cold))
#else
#define ERT_COLD
#endif

static inline int32_t min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline size_t align64(size_t x) { return (x + 63u) & ~(size_t)63u; }
static inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* ---- scratch layout -------------------------------------------------------------- */

/* Bytes of one slot: packed A block then packed B block, each 64-aligned. */
ERT_INLINE size_t slot_bytes(int64_t m, int64_t n, int64_t k) {
  const int64_t kc = min_i64(k, KC);
  const int64_t mc = round_up(min_i64(m, ERT_SGEMM_MC), MR);
  const int64_t nc = round_up(min_i64(n, ERT_SGEMM_NC), NR);
  return align64((size_t)(mc * kc) * sizeof(float)) + align64((size_t)(kc * nc) * sizeof(float));
}

static int uses_gemv(int64_t m, int64_t n, int im2col) { return !im2col && (m == 1 || n == 1); }

size_t ert_sgemm_scratch_bytes(int64_t m, int64_t n, int64_t k, int im2col) {
  if (m <= 0 || n <= 0 || k <= 0 || uses_gemv(m, n, im2col)) return 0;
  return (size_t)ERT_SGEMM_SLOTS * slot_bytes(m, n, k);
}

/* ---- micro-kernel ------------------------------------------------------------------- */

/* tile[i][j] = sum over k < kc of rows[i][k] * b[k][j], i < MR, j < NR, where b is a
 * packed B panel (NR values per k) and the rows are A's, read in place or packed row by
 * row. Written with one accumulator row per tile row so compilers keep the tile in
 * vector registers. */
ERT_INLINE void micro_rows(int32_t kc, const float *const *rows, const float *restrict b,
                           float *restrict tile) {
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
  float c0[NR] = {0}, c1[NR] = {0}, c2[NR] = {0}, c3[NR] = {0};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 1 /* unrolling k only spills the tile */
#endif
  for (int32_t k = 0; k < kc; ++k) {
    const float *bk = b + (size_t)k * NR;
    const float a0 = r0[k], a1 = r1[k], a2 = r2[k], a3 = r3[k];
    for (int j = 0; j < NR; ++j) {
      const float bj = bk[j];
      c0[j] += a0 * bj;
      c1[j] += a1 * bj;
      c2[j] += a2 * bj;
      c3[j] += a3 * bj;
    }
  }
  for (int j = 0; j < NR; ++j) {
    tile[0 * NR + j] = c0[j];
    tile[1 * NR + j] = c1[j];
    tile[2 * NR + j] = c2[j];
    tile[3 * NR + j] = c3[j];
  }
}

/* ---- epilogue ----------------------------------------------------------------------- */

/* Activations computed inline in the tile epilogue (same formulas as ert_act_apply);
 * the others (exp, tanh, erf based) go through ert_act_apply over whole row runs. */
ERT_INLINE int act_inline(const ert_act_params *act) {
  if (act == NULL) return 1;
  switch ((ert_act)act->kind) {
    case ERT_ACT_NONE:
    case ERT_ACT_RELU:
    case ERT_ACT_CLIP:
    case ERT_ACT_HARD_SIGMOID:
    case ERT_ACT_HARD_SWISH:
    case ERT_ACT_LEAKY_RELU:
      return 1;
    default:
      return 0;
  }
}

ERT_INLINE void finish_row(const ert_act_params *act, float *c, int32_t n) {
  if (act == NULL) return;
#if defined(ERT_NEON_KERNELS) /* the cpu.h kernel of ert_act_apply takes every inline kind */
  ert_act_apply(act, c, (size_t)n);
#else
  const float a = act->a, b = act->b;
  switch ((ert_act)act->kind) {
    case ERT_ACT_NONE:
      break;
    case ERT_ACT_RELU:
      for (int32_t j = 0; j < n; ++j) c[j] = c[j] > 0.0f ? c[j] : 0.0f;
      break;
    case ERT_ACT_CLIP:
      for (int32_t j = 0; j < n; ++j) {
        const float v = c[j] < a ? a : c[j];
        c[j] = v > b ? b : v;
      }
      break;
    case ERT_ACT_HARD_SIGMOID:
      for (int32_t j = 0; j < n; ++j) {
        float v = a * c[j] + b;
        v = v < 0.0f ? 0.0f : v;
        c[j] = v > 1.0f ? 1.0f : v;
      }
      break;
    case ERT_ACT_HARD_SWISH:
      for (int32_t j = 0; j < n; ++j) {
        float v = c[j] / 6.0f + 0.5f;
        v = v < 0.0f ? 0.0f : v;
        v = v > 1.0f ? 1.0f : v;
        c[j] = c[j] * v;
      }
      break;
    case ERT_ACT_LEAKY_RELU:
      for (int32_t j = 0; j < n; ++j) c[j] = c[j] < 0.0f ? a * c[j] : c[j];
      break;
    default:
      ert_act_apply(act, c, (size_t)n);
      break;
  }
#endif
}

/* Merges an MR x NR tile into C rows [0, mr) and columns [0, nr); on the last depth
 * block applies an inline activation (the caller applies the others per row run). */
ERT_INLINE void store_tile(const ert_sgemm *g, const float *tile, float *c, int32_t mr, int32_t nr,
                           const float *bias, int first, int last) {
  const float alpha = g->alpha;
  const int act_here = last && act_inline(g->act);
  for (int32_t i = 0; i < mr; ++i) {
    float *ci = c + (ptrdiff_t)i * g->ldc;
    const float *ti = tile + (size_t)i * NR;
    if (first && !g->accumulate) {
      const float b = bias ? bias[i] : 0.0f;
      for (int32_t j = 0; j < nr; ++j) ci[j] = alpha * ti[j] + b;
    } else {
      for (int32_t j = 0; j < nr; ++j) ci[j] += alpha * ti[j];
    }
    if (act_here) finish_row(g->act, ci, nr);
  }
}

/* ---- packing ------------------------------------------------------------------------ */

/* A rows [i0, i0+mlen), depth [k0, k0+kc) row by row: row i at dst + i*kc (used when
 * A's rows are not contiguous). */
ERT_INLINE void pack_a(const ert_sgemm *g, const float *a, int32_t i0, int32_t mlen, int32_t k0,
                       int32_t kc, float *dst) {
  const float *src = a + (ptrdiff_t)i0 * g->rsa + (ptrdiff_t)k0 * g->csa;
  for (int32_t k = 0; k < kc; ++k)
    for (int32_t i = 0; i < mlen; ++i)
      dst[(size_t)i * kc + k] = src[(ptrdiff_t)i * g->rsa + (ptrdiff_t)k * g->csa];
}

/* Row k of a B block, line[0..nlen), into the NR-column panels at dst (depth kc). */
ERT_INLINE void scatter_line(const float *line, int32_t nlen, int32_t k, int32_t kc, float *dst) {
  float *dk = dst + (size_t)k * NR;
  const size_t panel = (size_t)NR * (size_t)kc; /* floats from one panel to the next */
  int32_t jr = 0;
  for (; jr + NR <= nlen; jr += NR, dk += panel) memcpy(dk, line + jr, NR * sizeof(float));
  if (jr < nlen) { /* the last, partial panel: zeros past the columns */
    int32_t jj = 0;
    for (; jj < nlen - jr; ++jj) dk[jj] = line[jr + jj];
    for (; jj < NR; ++jj) dk[jj] = 0.0f;
  }
}

/* B (a strided matrix) rows [k0, k0+kc), columns [j0, j0+nlen) into NR-column panels.
 * 32-bit ARM: out of line, where the 16-float copies get registers of their own (inlined
 * into run_task, Thumb-2's 13 free registers made them go through the stack). */
#if defined(__arm__)
static __attribute__((noinline)) void pack_b_matrix(
#else
ERT_INLINE void pack_b_matrix(
#endif
    const ert_sgemm *g, const float *b, int32_t k0, int32_t kc, int32_t j0, int32_t nlen,
    float *dst) {
  if (g->csb == 1) {
    for (int32_t k = 0; k < kc; ++k)
      scatter_line(b + (ptrdiff_t)(k0 + k) * g->rsb + j0, nlen, k, kc, dst);
    return;
  }
  for (int32_t jr = 0; jr < nlen; jr += NR) {
    const int32_t nr = min_i32(NR, nlen - jr);
    float *d = dst + (size_t)jr * kc;
    for (int32_t jj = 0; jj < NR; ++jj) {
      if (jj >= nr) {
        for (int32_t k = 0; k < kc; ++k) d[(size_t)k * NR + jj] = 0.0f;
        continue;
      }
      const float *src = b + (ptrdiff_t)(j0 + jr + jj) * g->csb + (ptrdiff_t)k0 * g->rsb;
      for (int32_t k = 0; k < kc; ++k) d[(size_t)k * NR + jj] = src[(ptrdiff_t)k * g->rsb];
    }
  }
}

/* d[u] = row[(ox + u)*sw + off] for u < n when ox + u is in [lo, hi) (the columns
 * whose tap is inside the row), else 0; row NULL: all 0. */
ERT_INLINE void gather_row(float *d, const float *row, int32_t ox, int32_t n, int32_t lo,
                           int32_t hi,
                       int32_t sw, int32_t off) {
  int32_t a = lo - ox, b = hi - ox;
  if (row == NULL) a = b = n;
  if (a < 0) a = 0;
  if (a > n) a = n;
  if (b > n) b = n;
  if (b < a) b = a;
  int32_t u = 0;
  for (; u < a; ++u) d[u] = 0.0f;
  if (sw == 1) {
    if (b > u) memcpy(d + u, row + (ptrdiff_t)ox + off + u, (size_t)(b - u) * sizeof(float));
    u = b;
  } else {
    const float *s = row ? row + (ptrdiff_t)ox * sw + off : row; /* NULL row: nothing read */
    if (sw == 2) /* four per step: the strided loop costs ~6 instructions per float */
      for (; u + 4 <= b; u += 4) {
        d[u] = s[2 * u];
        d[u + 1] = s[2 * u + 2];
        d[u + 2] = s[2 * u + 4];
        d[u + 3] = s[2 * u + 6];
      }
    for (; u < b; ++u) d[u] = s[(ptrdiff_t)u * sw];
  }
  for (; u < n; ++u) d[u] = 0.0f;
}

/* Output columns ox in [lo, hi) have 0 <= ox*sw + kx*dw - pad_left < width. */
ERT_INLINE void col_range(const ert_im2col *ic, int32_t kx, int32_t *lo, int32_t *hi) {
  const int32_t off = kx * ic->dw - ic->pad_left;
  const int64_t l = off >= 0 ? 0 : (-(int64_t)off + ic->sw - 1) / ic->sw;
  const int64_t h = off <= ic->width - 1 ? ((int64_t)ic->width - 1 - off) / ic->sw + 1 : 0;
  *lo = (int32_t)(l < ic->out_w ? l : ic->out_w);
  *hi = (int32_t)(h < ic->out_w ? h : ic->out_w);
}

#if !defined(ERT_SGEMM_TAPS) /* there the tap-major tile reads these convolutions' B */
/* B as im2col of the image at x, rows [k0, k0+kc), columns [j0, j0+nlen), when every
 * panel lies within one output row (j0 and out_w multiples of NR; stride 1 across,
 * kh <= 32, kw <= 16; lo_kx, hi_kx per col_range), panel by panel: row k of a panel is
 * one run of NR floats where its taps are all inside the image, else zeros and the part
 * that is inside. */
ERT_COLD static void pack_panels(const ert_im2col *ic, const float *x,
                                                  int32_t k0, int32_t kc, int32_t j0,
                                                  int32_t nlen, const int32_t *lo_kx,
                                                  const int32_t *hi_kx, float *d) {
  const int32_t kh = ic->kh, kw = ic->kw, dw = ic->dw, khw = kh * kw;
  const ptrdiff_t rstep = (ptrdiff_t)ic->dh * ic->width;
  const ptrdiff_t plane = (ptrdiff_t)ic->height * ic->width;
  for (int32_t j = j0; j < j0 + nlen; j += NR) {
    const int32_t oy0 = j / ic->out_w, ox0 = j % ic->out_w;
    uint32_t rows = 0, cols = 0; /* bit ky: window row ky inside; bit kx: column kx inside */
    for (int32_t ky = 0; ky < kh; ++ky)
      rows |= (uint32_t)((uint32_t)(oy0 * ic->sh + ky * ic->dh - ic->pad_top) <
                         (uint32_t)ic->height) << ky;
    for (int32_t kx = 0; kx < kw; ++kx)
      cols |= (uint32_t)(lo_kx[kx] <= ox0 && ox0 + NR <= hi_kx[kx]) << kx;
    int32_t c = k0 / khw, ky = k0 % khw / kw, kx = k0 % khw % kw;
    /* x + o: tap (c, ky, kx) of the panel's first column */
    ptrdiff_t o = c * plane + (ptrdiff_t)(oy0 * ic->sh - ic->pad_top) * ic->width + ky * rstep +
                  ox0 - ic->pad_left + kx * dw;
    for (int32_t k = 0; k < kc; ++k, d += NR) {
      if (rows >> ky & cols >> kx & 1u) {
        memcpy(d, x + o, NR * sizeof(float));
      } else {
        /* zeros, then columns [a, b) of the panel, those inside the image */
        int32_t a = lo_kx[kx] - ox0, b = hi_kx[kx] - ox0;
        a = a > 0 ? a : 0;
        b = (rows >> ky & 1u) == 0 ? 0 : b < NR ? b : NR;
        memset(d, 0, NR * sizeof(float));
        if (a < b) memcpy(d + a, x + o + a, (size_t)(b - a) * sizeof(float));
      }
      o += dw;
      if (++kx == kw) {
        kx = 0;
        o += rstep - (ptrdiff_t)kw * dw;
        if (++ky == kh) {
          ky = 0;
          o += plane - kh * rstep;
        }
      }
    }
  }
}
#endif

/* B as im2col of the image at x: rows [k0, k0+kc), columns [j0, j0+nlen) (j0 a multiple
 * of NR). With stride 1 across and output rows of whole panels (every panel then lies
 * within one output row) panel by panel (pack_panels); otherwise row by row (k), by
 * segments of one output row each, through a line of nlen floats scattered into the
 * panels. */
ERT_INLINE void pack_b_im2col(const ert_im2col *ic, const float *x, int32_t k0, int32_t kc,
                              int32_t j0, int32_t nlen, float *dst) {
  const int32_t khw = ic->kh * ic->kw;
  const size_t plane = (size_t)ic->height * (size_t)ic->width;
  enum { KX_CACHE = 16 };
  int32_t lo_kx[KX_CACHE], hi_kx[KX_CACHE]; /* output columns whose tap kx is inside */
  for (int32_t kx = 0; kx < ic->kw && kx < KX_CACHE; ++kx)
    col_range(ic, kx, &lo_kx[kx], &hi_kx[kx]);
#if !defined(ERT_SGEMM_TAPS)
  if (ic->sw == 1 && ic->out_w % NR == 0 && ic->kw <= KX_CACHE && ic->kh <= 32) {
    pack_panels(ic, x, k0, kc, j0, nlen, lo_kx, hi_kx, dst);
    return;
  }
#endif
  const int32_t oy0 = j0 / ic->out_w, ox0 = j0 % ic->out_w;
  float line[ERT_SGEMM_NC];
  int32_t c = k0 / khw, r = k0 % khw;
  int32_t ky = r / ic->kw, kx = r % ic->kw;
  for (int32_t k = 0; k < kc; ++k) {
    const float *xc = x + (size_t)c * plane;
    const int32_t iy_off = ky * ic->dh - ic->pad_top;
    const int32_t ix_off = kx * ic->dw - ic->pad_left;
    int32_t lo, hi;
    if (kx < KX_CACHE) {
      lo = lo_kx[kx];
      hi = hi_kx[kx];
    } else {
      col_range(ic, kx, &lo, &hi);
    }
    int32_t oy = oy0, ox = ox0, t = 0;
    while (t < nlen) {
      const int32_t seg = min_i32(nlen - t, ic->out_w - ox);
      const int32_t iy = oy * ic->sh + iy_off;
      const float *row = (iy >= 0 && iy < ic->height) ? xc + (size_t)iy * ic->width : NULL;
      gather_row(line + t, row, ox, seg, lo, hi, ic->sw, ix_off);
      t += seg;
      ox = 0;
      ++oy;
    }
    scatter_line(line, nlen, k, kc, dst);
    if (++kx == ic->kw) {
      kx = 0;
      if (++ky == ic->kh) {
        ky = 0;
        ++c;
      }
    }
  }
}

/* ---- blocked driver ----------------------------------------------------------------- */

enum { NARROW_N = 4 }; /* see narrow_panel and the narrow products below */

/* A last panel of nr <= NARROW_N columns with the kernels of cpu.h: a 16-column tile
 * would be mostly padding, so each column (gathered from the packed panel) gets the dot
 * products of A's rows [0, mlen) (arows, lda apart) by ert_cpu.dot_rows, stored into C
 * from c on as the tiles store them (st: ldc, bias of row 0, alpha, init, act). */
#if defined(ERT_NEON_KERNELS) || defined(ERT_X86_KERNELS)
ERT_COLD static void narrow_panel(const float *panel, int32_t kc, const float *arows, ptrdiff_t lda,
                                  int32_t mlen, float *c, int32_t nr, const ert_sgemm_store *st) {
  float col[KC], acc[64];
  for (int32_t j = 0; j < nr; ++j, ++c) {
    for (int32_t k = 0; k < kc; ++k) col[k] = panel[(size_t)k * NR + j];
    for (int32_t i0 = 0; i0 < mlen; i0 += 64) {
      const int32_t len = min_i32(64, mlen - i0);
      ert_cpu.dot_rows(col, arows + (ptrdiff_t)i0 * lda, lda, kc, len, acc);
      for (int32_t i = 0; i < len; ++i) {
        const float *ci = c + (ptrdiff_t)(i0 + i) * st->ldc;
        acc[i] = st->alpha * acc[i] + (!st->init ? *ci : st->bias ? st->bias[i0 + i] : 0.0f);
      }
      if (st->act != NULL) ert_act_apply(st->act, acc, (size_t)len);
      for (int32_t i = 0; i < len; ++i) c[(ptrdiff_t)(i0 + i) * st->ldc] = acc[i];
    }
  }
}
#endif

#if defined(ERT_SGEMM_TAPS)
/* Convolutions by ert_cpu.sgemm_rows6 over the window's taps (cpu.h), with A tap-major
 * (column t*C + c of row i is A(i, c*taps + t), packed once per run by taps_setup at the
 * scratch's start). Within a tap the B rows of a panel are a plane apart (channel c's
 * window row ky, column kx), so the tile runs over the taps reading B in place where the
 * panel's windows lie inside the image; for the other panels (edge columns and rows)
 * taps_panel copies the panel's window rows, NR + kw - 1 floats each (zeros outside the
 * image), into pb, and the tile runs over the taps there. Every tile has 6 rows (a last
 * partial one through the tile buffer) and runs over all of K in one pass. */

/* Whether a problem takes the tap-major tile: im2col B (conv2d's: A's rows contiguous, K
 * apart), stride 1 and no dilation across, output rows of whole panels, one problem, A and
 * NR*K floats per slot within the scratch. If so packs A. */
ERT_COLD static int taps_setup(const ert_sgemm *g, size_t bytes, float *at) {
  const ert_im2col *ic = g->im2col;
  if (ic == NULL || ert_cpu.sgemm_rows6 == NULL || ic->sw != 1 || ic->dw != 1 ||
      ic->out_w % NR != 0 || g->batch != 1 ||
      (size_t)(g->m + ERT_SGEMM_SLOTS * NR) * (size_t)g->k * sizeof(float) > bytes)
    return 0;
  const float *a = NULL, *b = NULL, *bias = NULL;
  float *c = NULL;
  g->locate(g->ctx, 0, &a, &b, &c, &bias);
  const int32_t nt = ic->kh * ic->kw;
  for (int32_t i = 0; i < g->m; ++i, a += g->k)
    for (int32_t t = 0; t < nt; ++t)
      for (int32_t ch = 0; ch < ic->channels; ++ch) *at++ = a[ch * nt + t];
  return 1;
}
#endif

/* Tasks are (problem, column block of nc columns, part of the rows). A task packs each
 * depth block of its B columns once and runs all its row blocks over it, packing their
 * A blocks in turn; rows are split into parts only when there are fewer column blocks
 * than slots. */
typedef struct blocked_job {
  const ert_sgemm *g;
  char *scratch;
  size_t slot_bytes, a_bytes;
  int32_t mc, nc;
  size_t nnb, nparts, ntasks, nslots;
#if defined(ERT_SGEMM_TAPS)
  int taps;               /* the tap-major tile: A at the scratch's start, a panel per slot */
#endif
  int even;   /* pieces of near-equal work (run_blocked) */
#if defined(ERT_X86_KERNELS)
  int direct; /* A and B read in place by ert_cpu.sgemm_block: no scratch used */
  int rows_first; /* ert_sgemm.rows_first: task r is row part r / nnb, column block r % nnb */
#endif
} blocked_job;

enum { ROWP_MAX = 256 }; /* row pointers a task keeps per row block */
#if defined(ERT_X86_KERNELS)
enum { ERT_SGEMM_DEEP_KC = 1024 }; /* see kstep in run_task */
#endif

#if defined(ERT_SGEMM_TAPS)
/* Panel j's B for the tap-major tile: in place, or its window rows copied into pb; st's
 * bgap and taps (see sgemm_rows6 in cpu.h) for it. */
static __attribute__((noinline)) const float *taps_panel(const blocked_job *jb, const float *x,
                                                         int32_t j, float *pb,
                                                         ert_sgemm_store *st) {
  const ert_im2col *ic = jb->g->im2col;
  const int32_t kh = ic->kh, w = ic->width, sr = NR + ic->kw - 1;
  const int32_t iy = j / ic->out_w * ic->sh - ic->pad_top, ix = j % ic->out_w - ic->pad_left;
  const ptrdiff_t plane = (ptrdiff_t)ic->height * w;
  if (iy >= 0 && iy + (kh - 1) * ic->dh < ic->height && ix >= 0 && ix + sr <= w) {
    st->bgap = (plane - NR) * (ptrdiff_t)sizeof(float);
    st->taps = (uint64_t)ic->dh * (uint64_t)w << 32 | (uint64_t)(ic->kw - 1) * 0x1000001u |
               (uint64_t)(kh - 1) << 8;
    return x + (ptrdiff_t)iy * w + ix;
  }
  const int32_t lo = ix < 0 ? -ix : 0, hi = w - ix < sr ? w - ix : sr; /* inside: [lo, hi) */
  float *d = pb;
  for (int32_t ch = 0; ch < ic->channels; ++ch)
    for (int32_t ky = 0; ky < kh; ++ky, d += sr) {
      const int32_t y = iy + ky * ic->dh;
      if ((uint32_t)y < (uint32_t)ic->height && sr == NR + 2 && hi - lo > NR) {
        /* 3 taps across, one column of padding at most: fixed sizes, copied inline */
        const float *r = x + ch * plane + (ptrdiff_t)y * w + ix;
        if (lo == 1) {
          d[0] = 0.0f;
          memcpy(d + 1, r + 1, (NR + 1) * sizeof(float));
        } else if (hi == NR + 1) {
          memcpy(d, r, (NR + 1) * sizeof(float));
          d[NR + 1] = 0.0f;
        } else {
          memcpy(d, r, (NR + 2) * sizeof(float));
        }
        continue;
      }
      memset(d, 0, (size_t)sr * sizeof(float));
      if ((uint32_t)y < (uint32_t)ic->height && lo < hi)
        memcpy(d + lo, x + ch * plane + (ptrdiff_t)y * w + ix + lo,
               (size_t)(hi - lo) * sizeof(float));
    }
  st->bgap = ((ptrdiff_t)kh * sr - NR) * (ptrdiff_t)sizeof(float);
  st->taps = (uint64_t)sr << 32 | (uint64_t)(ic->kw - 1) * 0x1000001u | (uint64_t)(kh - 1) << 8;
  return pb;
}
#endif

/* The whole task is one function compiled per target (see ERT_SIMD_CLONES), so that the
 * micro-kernel, packing and epilogue are inlined and vectorized together. */
ERT_SIMD_CLONES
static void run_task(const blocked_job *jb, size_t t, float *ap, float *bp) {
  const ert_sgemm *g = jb->g;
  const size_t per_problem = jb->nnb * jb->nparts;
  const size_t p = t / per_problem, r = t % per_problem;
  int32_t j0 = (int32_t)(r / jb->nparts) * jb->nc;
  int32_t nlen = min_i32(jb->nc, g->n - j0);
  /* rows of this part, in whole row blocks */
  const size_t nmb = (size_t)((g->m + jb->mc - 1) / jb->mc), part = r % jb->nparts;
  int32_t m0 = (int32_t)(part * nmb / jb->nparts) * jb->mc;
  int32_t m1 = min_i32((int32_t)((part + 1) * nmb / jb->nparts) * jb->mc, g->m);
  if (jb->even) { /* the column blocks share the panels out evenly (none over nc columns),
                     the row parts the rows in fours (eights for the block kernel, whose
                     4-row tiles run about 10 % slower than its 8- to 16-row ones) */
#if defined(ERT_X86_KERNELS)
    const int32_t unit = jb->direct ? 8 : 4;
#else
    const int32_t unit = 4;
#endif
    const size_t np = (size_t)((g->n + NR - 1) / NR), cb = r / jb->nparts;
    const size_t mq = (size_t)((g->m + unit - 1) / unit);
    j0 = (int32_t)(cb * np / jb->nnb) * NR;
    nlen = min_i32((int32_t)((cb + 1) * np / jb->nnb) * NR, g->n) - j0;
    m0 = (int32_t)(part * mq / jb->nparts) * unit;
    m1 = min_i32((int32_t)((part + 1) * mq / jb->nparts) * unit, g->m);
  }
#if defined(ERT_X86_KERNELS)
  if (jb->rows_first) { /* whole rows, as ert_pixel_parts says */
    const size_t cb = r % jb->nnb, q = r / jb->nnb;
    j0 = (int32_t)cb * jb->nc;
    nlen = min_i32(jb->nc, g->n - j0);
    if (jb->direct) { /* column blocks of near-equal panels (run_blocked) */
      const size_t np = (size_t)((g->n + NR - 1) / NR);
      j0 = (int32_t)(cb * np / jb->nnb) * NR;
      nlen = min_i32((int32_t)((cb + 1) * np / jb->nnb) * NR, g->n) - j0;
    }
    m0 = (int32_t)(q * (size_t)g->m / jb->nparts);
    m1 = (int32_t)((q + 1) * (size_t)g->m / jb->nparts);
  }
#endif
  const float *a = NULL, *b = NULL, *bias = NULL;
  float *c = NULL;
  g->locate(g->ctx, p, &a, &b, &c, &bias);
#if defined(ERT_SGEMM_TAPS)
  const int taps = jb->taps;
  if (taps) a = ap; /* tap-major, rows K = rsa apart as the weights' */
#else
  const int taps = 0;
#endif
  float tile[6 * NR];
#if defined(ERT_X86_KERNELS)
  /* the AVX-512 block kernel with A's and B's rows in place needs no scratch: depth
     blocks up to ERT_SGEMM_DEEP_KC then (one pass over C instead of several) */
  const int32_t kstep = jb->direct ? g->k : KC;
#else
  const int32_t kstep = taps ? g->k : KC; /* the tap-major tile: one pass */
#endif
  for (int32_t k0 = 0; k0 < g->k; k0 += kstep) {
    const int32_t kc = min_i32(kstep, g->k - k0);
    const int first = k0 == 0, last = k0 + kc >= g->k;
    /* the optimized tiles of cpu.h store whole tiles into C themselves */
    const ert_sgemm_rows_fn opt = ert_cpu.sgemm_rows, opt6 = opt ? ert_cpu.sgemm_rows6 : NULL;
#if defined(ERT_X86_KERNELS) /* only x86-64 has these tiles: the boards' code stays as it was */
    const ert_sgemm_rows_fn half = opt ? ert_cpu.sgemm_rows6_n8 : NULL;
    /* the full panels of a B matrix with contiguous rows read in place, no packing;
       packed when A's rows are short (k <= 24), A is small (at most 32 rows of at most
       96) or B's rows are (n <= 64), where the packed panels measured faster
       (MobileNetV2's first expansion and projections over 112x112 and 56x56 maps, every
       1x1 convolution over 7x7 maps) */
    /* the AVX-512 block kernel: whole blocks, B's rows read in place whenever they are
       contiguous (its masked last column tile needs no padded panel), else packed */
    const int blk = ert_cpu.sgemm_block != NULL,
              blk_direct = blk && !g->im2col && (g->csb == 1 || g->bpanels);
    const int b_direct = !blk && opt && !g->im2col && !g->bpanels && g->csb == 1 && ert_cpu.sgemm_rows_ld &&
                         (!opt6 || ert_cpu.sgemm_rows6_ld) && (g->m > 32 || g->k > 96) &&
                         g->k > 24 && g->n > 64;
#else
    const ert_sgemm_rows_fn half = NULL;
    const int b_direct = 0;
#endif
    const int32_t nfull = b_direct ? nlen / NR * NR : 0; /* columns read in place */
    if (taps || g->bpanels) { /* panel by panel below, or read in place */
    } else if (g->im2col)
      pack_b_im2col(g->im2col, b, k0, kc, j0, nlen, bp);
#if defined(ERT_X86_KERNELS)
    else if (blk_direct) { /* nothing to pack */
    }
    else if (nfull < nlen) /* only the partial panel when the full ones are read in place */
      pack_b_matrix(g, b, k0, kc, j0 + nfull, nlen - nfull, bp);
#else
    else
      pack_b_matrix(g, b, k0, kc, j0, nlen, bp);
#endif
    ert_sgemm_store st = {.ldc = g->ldc, .act = last && act_inline(g->act) ? g->act : NULL,
                          .alpha = g->alpha, .init = first && !g->accumulate};
    if (st.act != NULL && st.act->kind == ERT_ACT_NONE) st.act = NULL;
    ert_sgemm_store raw = {.ldc = NR, .alpha = 1.0f, .init = 1};
    /* A rows in place (all rows of the part as one block), or packed row by row per
     * block of mc rows */
    const int in_place = g->csa == 1;
    const int32_t mstep = in_place && m1 > m0 ? m1 - m0 : jb->mc;
    for (int32_t i0 = m0; i0 < m1; i0 += mstep) {
      const int32_t mlen = min_i32(mstep, m1 - i0);
      const float *arows = in_place ? a + (ptrdiff_t)i0 * g->rsa + k0 : ap;
      const ptrdiff_t lda = in_place ? g->rsa : kc;
#if defined(ERT_X86_KERNELS)
      if (!in_place && g->rsa == 1 && ert_cpu.pack_at != NULL) /* A stored transposed */
        ert_cpu.pack_at(ap, a + i0 + (ptrdiff_t)k0 * g->csa, g->csa, mlen, kc);
      else
#endif
      if (!in_place) pack_a(g, a, i0, mlen, k0, kc, ap);
#if defined(ERT_X86_KERNELS)
      if (blk) { /* the whole block in one call */
        st.bias = bias ? bias + (g->bias_cols ? j0 : i0) : NULL;
        st.bias_cols = g->bias_cols;
        st.res = last && g->res ? g->res + (ptrdiff_t)i0 * g->ldc + j0 : NULL;
        if (g->bpanels) /* panel j0 / NR on, from row k0 */
          ert_cpu.sgemm_block(mlen, nlen, kc, arows, lda, b + ((ptrdiff_t)j0 * g->k + (ptrdiff_t)k0 * NR),
                              NR, (ptrdiff_t)NR * g->k, c + (ptrdiff_t)i0 * g->ldc + j0, &st);
        else if (blk_direct)
          ert_cpu.sgemm_block(mlen, nlen, kc, arows, lda, b + (ptrdiff_t)k0 * g->rsb + j0, g->rsb,
                              NR, c + (ptrdiff_t)i0 * g->ldc + j0, &st);
        else
          ert_cpu.sgemm_block(mlen, nlen, kc, arows, lda, bp, NR, (ptrdiff_t)NR * kc,
                              c + (ptrdiff_t)i0 * g->ldc + j0, &st);
        if (last && !act_inline(g->act))
          for (int32_t i = 0; i < mlen; ++i)
            finish_row(g->act, c + (ptrdiff_t)(i0 + i) * g->ldc + j0, nlen);
        continue;
      }
#endif
      /* the row pointers of the block, rows past the end repeating the last one, set once
       * for all its column panels (per tile they cost ~10 instructions per row) */
      const float *rowp[ROWP_MAX + 6];
      const int pre = mlen <= ROWP_MAX;
      if (pre)
        for (int32_t ii = 0; ii < mlen + 6; ++ii)
          rowp[ii] = arows + (ptrdiff_t)(ii < mlen ? ii : mlen - 1) * lda;
      /* with a 6-row kernel: n6 tiles of 6 rows first, as many as leave whole 4-row tiles */
      int32_t n6 = opt6 ? mlen / 6 : 0;
      for (int32_t t = n6; t >= 0; --t)
        if ((mlen - 6 * t) % MR == 0) {
          n6 = t;
          break;
        }
      if (taps) n6 = (mlen + 5) / 6; /* the tap-major tile has 6 rows only */
      for (int32_t jr = 0; jr < nlen; jr += NR) {
        const int32_t nr = min_i32(NR, nlen - jr);
        /* this panel: B's rows in place, or packed (the panels past nfull) */
        const int inpl = jr < nfull;
        const float *bpan = g->bpanels ? b + (ptrdiff_t)(j0 + jr) * g->k + (ptrdiff_t)k0 * NR
                            : inpl     ? b + (ptrdiff_t)k0 * g->rsb + j0 + jr
                                       : bp + (size_t)(jr - nfull) * kc;
        const int32_t kt = taps ? g->im2col->channels : kc; /* the tile's steps per tap */
#if defined(ERT_SGEMM_TAPS)
        if (taps) {
          bpan = taps_panel(jb, b, j0 + jr, bp, &st);
          raw.bgap = st.bgap, raw.taps = st.taps;
        }
#endif
#if defined(ERT_NEON_KERNELS) || defined(ERT_X86_KERNELS) /* the builds with cpu.h kernels */
        if (nr <= NARROW_N && opt != NULL && ert_cpu.dot_rows != NULL) {
          st.bias = bias ? bias + i0 : NULL;
          narrow_panel(bpan, kc, arows, lda, mlen, c + (ptrdiff_t)i0 * g->ldc + j0 + jr,
                       nr, &st);
          continue;
        }
#endif
        int32_t step;
        for (int32_t ir = 0, t = 0; ir < mlen; ir += step, ++t) {
          step = t < n6 ? 6 : MR;
          const int32_t mr = min_i32(step, mlen - ir);
          /* rows past the end repeat the last row; their results are dropped */
          const float *rows_own[6];
          const float *const *rows = pre ? rowp + ir : rows_own;
          if (!pre)
            for (int32_t ii = 0; ii < 6; ++ii)
              rows_own[ii] = arows + (ptrdiff_t)(ir + (ii < mr ? ii : mr - 1)) * lda;
          float *ct = c + (ptrdiff_t)(i0 + ir) * g->ldc + j0 + jr;
          const ert_sgemm_rows_fn fn = step == 6 ? opt6 : opt;
#if defined(ERT_X86_KERNELS)
          if (inpl) { /* a full panel of B in place (nr == NR) */
            const int whole = fn != NULL && mr == step;
            st.bias = bias ? bias + i0 + ir : NULL;
            (step == 6 ? ert_cpu.sgemm_rows6_ld : ert_cpu.sgemm_rows_ld)(
                kc, rows, bpan, g->rsb, whole ? ct : tile, whole ? &st : &raw);
            if (!whole) store_tile(g, tile, ct, mr, nr, st.bias, first, last);
            continue;
          }
#endif
          if (fn != NULL && mr == step && nr == NR) {
            st.bias = bias ? bias + i0 + ir : NULL;
            fn(kt, rows, bpan, ct, &st);
            continue;
          }
          if (half != NULL && nr <= NR / 2) /* six rows of 8 columns (rows past mr dropped) */
            half(kc, rows, bpan, tile, &raw);
          else if (fn != NULL)
            fn(kt, rows, bpan, tile, &raw);
          else
            micro_rows(kc, rows, bpan, tile);
          store_tile(g, tile, ct, mr, nr, bias ? bias + i0 + ir : NULL, first, last);
        }
      }
      if (last && !act_inline(g->act))
        for (int32_t i = 0; i < mlen; ++i)
          finish_row(g->act, c + (ptrdiff_t)(i0 + i) * g->ldc + j0, nlen);
    }
  }
}

static void blocked_worker(void *arg, size_t begin, size_t end) {
  const blocked_job *jb = arg;
  /* no scratch: the AVX-512 block kernel's direct pieces (more pieces than slots), or
     bpanels with A in place (nothing packed) */
  float *ap = NULL, *bp = NULL;
#if defined(ERT_X86_KERNELS)
  if (!jb->direct && jb->scratch != NULL) {
#else
  if (jb->scratch != NULL) {
#endif
    ap = (float *)(void *)(jb->scratch + begin * jb->slot_bytes);
    bp = (float *)(void *)(jb->scratch + begin * jb->slot_bytes + jb->a_bytes);
  }
#if defined(ERT_SGEMM_TAPS)
  if (jb->taps) { /* the shared tap-major A, this slot's panel after it */
    ap = (float *)(void *)jb->scratch;
    bp = ap + (size_t)(jb->g->m + (int32_t)begin * NR) * (size_t)jb->g->k;
  }
#endif
  const size_t t0 = begin * jb->ntasks / jb->nslots, t1 = end * jb->ntasks / jb->nslots;
  for (size_t t = t0; t < t1; ++t) run_task(jb, t, ap, bp);
}

static void run_blocked(const ert_sgemm *g, void *scratch, ert_exec *ex) {
  blocked_job jb;
  jb.g = g;
  jb.scratch = scratch;
  jb.slot_bytes = slot_bytes(g->m, g->n, g->k);
  jb.a_bytes = align64((size_t)(round_up(min_i64(g->m, ERT_SGEMM_MC), MR) * min_i64(g->k, KC)) *
                       sizeof(float));
  jb.mc = (int32_t)round_up(min_i64(g->m, ERT_SGEMM_MC), MR);
  jb.nc = (int32_t)round_up(min_i64(g->n, ERT_SGEMM_NC), NR);
  jb.nnb = (size_t)((g->n + jb.nc - 1) / jb.nc);
  size_t nmb = (size_t)((g->m + jb.mc - 1) / jb.mc);
#if defined(ERT_X86_KERNELS)
  /* x86-64 with two threads or more: pieces of near-equal work (a thread's last piece
     decides when the job ends), as many column blocks per slot and rows split in fours
     (see run_task); one thread takes the fewest blocks and row parts (each part packs its
     B panels again) */
  jb.even = ert_exec_threads(ex) > 1;
  /* A and B in place for the AVX-512 block kernel (run_task's kstep): no scratch, so
     twice as many pieces as slots at two threads or more (a preempted thread then holds
     up less of the job) */
  jb.direct = ert_cpu.sgemm_block != NULL && !g->im2col && (g->csb == 1 || g->bpanels) && g->csa == 1 &&
              g->k <= ERT_SGEMM_DEEP_KC;
  const size_t slots = jb.even && jb.direct ? 2 * ERT_SGEMM_SLOTS : ERT_SGEMM_SLOTS;
  if (jb.even) {
    const size_t np = (size_t)((g->n + NR - 1) / NR);
    if (g->by_rows) jb.nnb = 1; /* row parts below, as many as slots (multiples of 8 rows) */
    if (g->batch * jb.nnb > slots)
      for (size_t x = jb.nnb; x <= np && x < jb.nnb + slots; ++x)
        if (g->batch * x % slots == 0) {
          jb.nnb = x;
          break;
        }
    nmb = jb.direct ? (size_t)((g->m + 7) / 8) : (size_t)((g->m + 3) / 4);
    /* B packed by every task (im2col, B's rows not contiguous) and fewer column blocks
       than threads: row parts would each pack the whole B again (ppocr_rec's 1x3
       convolution 960 -> 60 over a 1x40 map packs 2880 x 40 floats per part, and did not
       gain from the second thread). Column blocks of whole panels instead, when there is
       a panel per thread; else one row part per thread (each packs B once). */
    const size_t threads = (size_t)ert_exec_threads(ex);
    if ((g->im2col != NULL || (g->csb != 1 && !g->bpanels)) && g->batch * jb.nnb < threads) {
      if (np >= threads) {
        jb.nnb = np < slots ? np : slots;
        nmb = 1;
      } else if (nmb > threads) {
        nmb = threads;
      }
    }
  } else { /* one thread: row parts only to keep them within ROWP_MAX rows */
    nmb = (size_t)((g->m + ROWP_MAX - 1) / ROWP_MAX);
  }
#else
  /* the boards with two threads or more: as many tasks of near-equal work as slots (each
     slot a piece of the pool; threads and slots are both 4 on a Pi 4 or 5), column blocks
     sharing the panels evenly and row parts in fours, where blocks of nc columns and row
     parts of whole 64-row blocks left a quarter to a third of a job to one thread */
  const size_t slots = ERT_SGEMM_SLOTS;
  jb.even = ert_exec_threads(ex) > 1;
  if (jb.even) {
    if (g->batch * jb.nnb > slots)
      for (size_t x = jb.nnb, np = (size_t)((g->n + NR - 1) / NR); x <= np && x < jb.nnb + slots; ++x)
        if (g->batch * x % slots == 0) {
          jb.nnb = x;
          break;
        }
    nmb = (size_t)((g->m + 3) / 4);
  }
#endif
#if defined(ERT_SGEMM_TAPS)
  jb.taps = taps_setup(g, slots * jb.slot_bytes, scratch);
#endif
  const size_t cols = g->batch * jb.nnb;
  jb.nparts = cols >= slots ? 1 : (slots + cols - 1) / cols;
  if (jb.nparts > nmb) jb.nparts = nmb;
#if defined(ERT_X86_KERNELS)
  jb.rows_first = g->rows_first;
  if (jb.rows_first) { /* an NHWC convolution: its pixels over the threads (batch 1) */
    jb.nnb = (size_t)((g->n + jb.nc - 1) / jb.nc);
    jb.nparts = ert_pixel_parts(g->m, slots);
    const size_t threads = (size_t)ert_exec_threads(ex), cut = ert_pixel_parts(g->m, 8);
    if (jb.direct && cut % threads == 0) {
      /* one part per thread, cut where the NHWC layers around it cut, so that a thread
         streams each column block of B once for all of its pixels (small maps: the 7x7
         layers' B is up to 1.6 MB, read once per part); the pieces are the (part, column
         block) tasks, part-major: with a multiple of 4 blocks (the pool's pieces per
         thread) when there are more, thread t's share is part t */
      jb.nparts = threads;
      if (threads > 1 && jb.nnb > 4) jb.nnb = (jb.nnb + 3) / 4 * 4;
      const size_t np = (size_t)((g->n + NR - 1) / NR);
      if (jb.nnb > np) jb.nnb = np;
      jb.ntasks = jb.nslots = jb.nnb * jb.nparts;
      ert_parallel_for(ex, jb.nslots, blocked_worker, &jb);
      return;
    }
    jb.ntasks = jb.nnb * jb.nparts;
    jb.nslots = jb.nparts;
    ert_parallel_for(ex, jb.nslots, blocked_worker, &jb);
    return;
  }
#endif
  jb.ntasks = cols * jb.nparts;
  jb.nslots = jb.ntasks < slots ? jb.ntasks : slots;
  ert_parallel_for(ex, jb.nslots, blocked_worker, &jb);
}

/* ---- matrix-vector paths ------------------------------------------------------------ */

/* y[0..n) += s * x[0..n) */
ERT_INLINE void axpy(int32_t n, float s, const float *restrict x, float *restrict y) {
  for (int32_t j = 0; j < n; ++j) y[j] += s * x[j];
}

/* y[0..n) += s0*x0[..] + s1*x1[..] + s2*x2[..] + s3*x3[..] */
ERT_INLINE void axpy4(int32_t n, const float *s, const float *restrict x0, const float *restrict x1,
                      const float *restrict x2, const float *restrict x3, float *restrict y) {
  const float s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
  for (int32_t j = 0; j < n; ++j) y[j] += (s0 * x0[j] + s1 * x1[j]) + (s2 * x2[j] + s3 * x3[j]);
}

/* sum of x[k]*y[k], k < n, with 16 independent partial sums. */
ERT_INLINE float dot(int32_t n, const float *restrict x, const float *restrict y) {
  float acc[16] = {0};
  int32_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int t = 0; t < 16; ++t) acc[t] += x[k + t] * y[k + t];
  float s = 0.0f;
  for (int t = 0; t < 16; ++t) s += acc[t];
  for (; k < n; ++k) s += x[k] * y[k];
  return s;
}

/* out[j] = dot(x, r + j*ld) for j < n: the kernel of cpu.h or the portable dot. */
static void dot_rows(const float *x, const float *r, ptrdiff_t ld, int32_t k, int32_t n,
                     float *out) {
  if (ert_cpu.dot_rows != NULL) {
    ert_cpu.dot_rows(x, r, ld, k, n, out);
    return;
  }
  for (int32_t j = 0; j < n; ++j) out[j] = dot(k, x, r + (ptrdiff_t)j * ld);
}

typedef struct gemv_job {
  const ert_sgemm *g;
  size_t chunks_per_problem;
  int32_t chunk;            /* outputs per task, <= GEMV_MAX_CHUNK */
} gemv_job;

/* Outputs per task: a quarter of the outputs (so that several threads share the work),
 * rounded to 64, within [GEMV_MIN_CHUNK, GEMV_MAX_CHUNK] (long runs over contiguous B
 * rows stream best). */
enum { GEMV_MIN_CHUNK = 256, GEMV_MAX_CHUNK = 2048 };

/* Merges raw results acc[0..len) into C entries c[0], c[step], ... */
ERT_INLINE void gemv_store(const ert_sgemm *g, const float *acc, float *c, ptrdiff_t step,
                           int32_t len,
                       const float *bias, ptrdiff_t bias_step) {
  for (int32_t t = 0; t < len; ++t) {
    float *ct = c + (ptrdiff_t)t * step;
    const float base = g->accumulate ? *ct : (bias ? bias[(ptrdiff_t)t * bias_step] : 0.0f);
    *ct = base + g->alpha * acc[t];
    if (step != 1 && g->act != NULL) ert_act_apply(g->act, ct, 1);
  }
  if (step == 1 && g->act != NULL) ert_act_apply(g->act, c, (size_t)len);
}

ERT_SIMD_CLONES
static void gemv_worker(void *arg, size_t begin, size_t end) {
  const gemv_job *jb = arg;
  const ert_sgemm *g = jb->g;
  float acc[GEMV_MAX_CHUNK];
  for (size_t w = begin; w < end; ++w) {
    const size_t p = w / jb->chunks_per_problem;
    const int32_t o0 = (int32_t)(w % jb->chunks_per_problem) * jb->chunk;
    const float *a = NULL, *b = NULL, *bias = NULL;
    float *c = NULL;
    g->locate(g->ctx, p, &a, &b, &c, &bias);
    if (g->m == 1) {
      /* c[0, j] for j in [o0, o0+len): sum_k A(0,k) B(k,j); bias[0] for every j */
      const int32_t len = min_i32(jb->chunk, g->n - o0);
      for (int32_t t = 0; t < len; ++t) acc[t] = 0.0f;
      if (g->csb == 1 && g->csa == 1 && ert_cpu.rnn_mv != NULL) {
        ert_cpu.rnn_mv((size_t)g->k, (size_t)len, b + o0, (size_t)g->rsb, a, 0, 1, NULL, 0, acc, 0);
      } else if (g->csb == 1) {
        const float *bk = b + o0;
        int32_t k = 0;
        for (; k + 4 <= g->k; k += 4) {
          const float s4[4] = {a[(ptrdiff_t)k * g->csa], a[(ptrdiff_t)(k + 1) * g->csa],
                               a[(ptrdiff_t)(k + 2) * g->csa], a[(ptrdiff_t)(k + 3) * g->csa]};
          axpy4(len, s4, bk + (ptrdiff_t)k * g->rsb, bk + (ptrdiff_t)(k + 1) * g->rsb,
                bk + (ptrdiff_t)(k + 2) * g->rsb, bk + (ptrdiff_t)(k + 3) * g->rsb, acc);
        }
        for (; k < g->k; ++k) axpy(len, a[(ptrdiff_t)k * g->csa], bk + (ptrdiff_t)k * g->rsb, acc);
      } else if (g->rsb == 1 && g->csa == 1) {
        dot_rows(a, b + (ptrdiff_t)o0 * g->csb, g->csb, g->k, len, acc);
      } else {
        for (int32_t t = 0; t < len; ++t) {
          float s = 0.0f;
          for (int32_t k = 0; k < g->k; ++k)
            s += a[(ptrdiff_t)k * g->csa] * b[(ptrdiff_t)k * g->rsb + (ptrdiff_t)(o0 + t) * g->csb];
          acc[t] = s;
        }
      }
      gemv_store(g, acc, c + o0, 1, len, bias, 0);
    } else {
      /* c[i, 0] for i in [o0, o0+len): sum_k A(i,k) B(k,0) */
      const int32_t len = min_i32(jb->chunk, g->m - o0);
      for (int32_t t = 0; t < len; ++t) acc[t] = 0.0f;
      if (g->csa == 1 && g->rsb == 1) {
        dot_rows(b, a + (ptrdiff_t)o0 * g->rsa, g->rsa, g->k, len, acc);
      } else if (g->rsa == 1) {
        for (int32_t k = 0; k < g->k; ++k)
          axpy(len, b[(ptrdiff_t)k * g->rsb], a + (ptrdiff_t)k * g->csa + o0, acc);
      } else {
        for (int32_t t = 0; t < len; ++t) {
          float s = 0.0f;
          for (int32_t k = 0; k < g->k; ++k)
            s += a[(ptrdiff_t)(o0 + t) * g->rsa + (ptrdiff_t)k * g->csa] * b[(ptrdiff_t)k * g->rsb];
          acc[t] = s;
        }
      }
      gemv_store(g, acc, c + (ptrdiff_t)o0 * g->ldc, g->ldc, len, bias ? bias + o0 : NULL, 1);
    }
  }
}

/* ---- narrow products ---------------------------------------------------------------- */

/* N <= NARROW_N columns (a convolution over a few output pixels, say): the 16-column
 * panels of the blocked path would be mostly padding. Instead each slot gathers B's
 * columns (im2col or strided) into K contiguous floats each, and every output is the
 * dot product of an A row, read in place, with one of them. */
typedef struct narrow_job {
  const ert_sgemm *g;
  char *scratch;
  size_t slot_bytes, chunks, nslots;
  int32_t chunk; /* rows of C per item */
} narrow_job;

/* Column j of B (K values) into dst. */
ERT_COLD static void gather_column(const ert_sgemm *g, const float *b, int32_t j, float *dst) {
  const ert_im2col *ic = g->im2col;
  if (ic == NULL) {
    for (int32_t k = 0; k < g->k; ++k) dst[k] = b[(ptrdiff_t)k * g->rsb + (ptrdiff_t)j * g->csb];
    return;
  }
  const int32_t oy = j / ic->out_w, ox = j % ic->out_w;
  const size_t plane = (size_t)ic->height * (size_t)ic->width;
  int32_t k = 0;
  for (int32_t c = 0; k < g->k; ++c)
    for (int32_t ky = 0; ky < ic->kh; ++ky) {
      const int32_t iy = oy * ic->sh + ky * ic->dh - ic->pad_top;
      const float *row = iy >= 0 && iy < ic->height ? b + c * plane + (size_t)iy * ic->width : NULL;
      for (int32_t kx = 0; kx < ic->kw; ++kx, ++k) {
        const int32_t ix = ox * ic->sw + kx * ic->dw - ic->pad_left;
        dst[k] = row != NULL && ix >= 0 && ix < ic->width ? row[ix] : 0.0f;
      }
    }
}

/* C column j, rows [i0, i0 + len), from the dot products in acc. */
ERT_COLD static void narrow_store(const ert_sgemm *g, const float *acc, float *c, int32_t i0,
                                  int32_t j, int32_t len, const float *bias) {
  gemv_store(g, acc, c + (ptrdiff_t)i0 * g->ldc + j, g->ldc, len, bias ? bias + i0 : NULL, 1);
}

/* Items are (problem, chunk of rows); slot s runs items s, s + nslots, ... */
static void narrow_worker(void *arg, size_t begin, size_t end) {
  const narrow_job *jb = arg;
  const ert_sgemm *g = jb->g;
  float acc[GEMV_MIN_CHUNK];
  for (size_t s = begin; s < end; ++s) {
    float *cols = (float *)(void *)(jb->scratch + s * jb->slot_bytes);
    size_t gathered = (size_t)-1;
    for (size_t w = s; w < g->batch * jb->chunks; w += jb->nslots) {
      const size_t p = w / jb->chunks;
      const int32_t i0 = (int32_t)(w % jb->chunks) * jb->chunk;
      const int32_t len = min_i32(jb->chunk, g->m - i0);
      const float *a = NULL, *b = NULL, *bias = NULL;
      float *c = NULL;
      g->locate(g->ctx, p, &a, &b, &c, &bias);
      if (gathered != p) {
        for (int32_t j = 0; j < g->n; ++j) gather_column(g, b, j, cols + (size_t)j * g->k);
        gathered = p;
      }
      for (int32_t j = 0; j < g->n; ++j) {
        dot_rows(cols + (size_t)j * g->k, a + (ptrdiff_t)i0 * g->rsa, g->rsa, g->k, len, acc);
        narrow_store(g, acc, c, i0, j, len, bias);
      }
    }
  }
}

/* Runs the narrow path when it applies (A rows contiguous, the columns fit a slot). */
static int run_narrow(const ert_sgemm *g, void *scratch, ert_exec *ex) {
  if (g->n > NARROW_N || g->csa != 1 || scratch == NULL) return 0;
#if defined(ERT_X86_KERNELS)
  if (g->bpanels) return 0; /* the block kernel's */
#endif
  narrow_job jb;
  jb.g = g;
  jb.scratch = scratch;
  jb.slot_bytes = slot_bytes(g->m, g->n, g->k);
  if ((size_t)g->n * (size_t)g->k * sizeof(float) > jb.slot_bytes) return 0;
  jb.chunk = GEMV_MIN_CHUNK;
  jb.chunks = (size_t)((g->m + jb.chunk - 1) / jb.chunk);
  const size_t items = g->batch * jb.chunks;
  jb.nslots = items < ERT_SGEMM_SLOTS ? items : ERT_SGEMM_SLOTS;
  ert_parallel_for(ex, jb.nslots, narrow_worker, &jb);
  return 1;
}

/* ---- entry -------------------------------------------------------------------------- */

typedef struct fill_job {
  const ert_sgemm *g;
} fill_job;

/* K == 0: C = bias (or unchanged), then the activation. */
static void fill_worker(void *arg, size_t begin, size_t end) {
  const ert_sgemm *g = ((const fill_job *)arg)->g;
  for (size_t p = begin; p < end; ++p) {
    const float *a = NULL, *b = NULL, *bias = NULL;
    float *c = NULL;
    g->locate(g->ctx, p, &a, &b, &c, &bias);
    for (int32_t i = 0; i < g->m; ++i) {
      float *ci = c + (ptrdiff_t)i * g->ldc;
      if (!g->accumulate)
        for (int32_t j = 0; j < g->n; ++j) ci[j] = bias ? bias[i] : 0.0f;
      finish_row(g->act, ci, g->n);
    }
  }
}

void ert_sgemm_run(const ert_sgemm *g, void *scratch, ert_exec *ex) {
  if (g->m <= 0 || g->n <= 0 || g->batch == 0) return;
  if (g->k <= 0) {
    fill_job fj = {g};
    ert_parallel_for(ex, g->batch, fill_worker, &fj);
    return;
  }
  if (uses_gemv(g->m, g->n, g->im2col != NULL)) {
    gemv_job jb;
    jb.g = g;
    const int32_t len = g->m == 1 ? g->n : g->m;
    int64_t chunk = round_up(((int64_t)len + 3) / 4, 64);
    if (chunk < GEMV_MIN_CHUNK) chunk = GEMV_MIN_CHUNK;
    if (chunk > GEMV_MAX_CHUNK) chunk = GEMV_MAX_CHUNK;
    jb.chunk = (int32_t)chunk;
    jb.chunks_per_problem = (size_t)((len + chunk - 1) / chunk);
    ert_parallel_for(ex, g->batch * jb.chunks_per_problem, gemv_worker, &jb);
    return;
  }
  if (!run_narrow(g, scratch, ex)) run_blocked(g, scratch, ex);
}
