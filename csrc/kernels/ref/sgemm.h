/* sgemm.h: the portable single-precision GEMM shared by conv2d, conv_transpose2d,
 * gemm and matmul. Internal to csrc/kernels/ref.
 *
 * One call computes a batch of independent problems C_p[M,N] = alpha * A_p B_p (+ ...)
 * of the same sizes and strides; `locate` gives each problem's base pointers. A is
 * read through element strides, B either through strides or, for convolutions,
 * directly from an image as its im2col matrix (never materialized).
 *
 * Blocked path: tasks are (problem, column block, part of the rows); per depth block
 * of KC, a task packs its B block into NR-column panels (k-major) once and runs every
 * MR-row panel of its rows over it with an MR x NR register-tiled micro-kernel. A is
 * read in place when its rows are contiguous (csa == 1), else packed row by row per
 * row block. Scratch is ERT_SGEMM_SLOTS slots (packed A block + packed B
 * block); at most that many tasks run at once. When M == 1 or N == 1 (and B is a
 * matrix) a matrix-vector path is used instead and no scratch is needed. Narrow
 * path: when N <= 4 (a convolution over a few output pixels) and A's rows are
 * contiguous, each slot gathers B's columns (K floats each, which must fit the slot)
 * and every output is a dot product of an A row with one of them. Bias, alpha and the
 * fused activation are applied as results are stored.
 *
 * The optimized micro-kernel of csrc/src/cpu.h (ert_cpu.sgemm_rows) replaces the
 * portable one when the CPU has it: it stores whole tiles into C with bias, alpha and
 * the inline activations itself; partial tiles go through a tile buffer.
 *
 * Scratch contract (the converter computes the same number: edgert/converter/ops/gemm.py,
 * sgemm_scratch_bytes): ert_sgemm_scratch_bytes(M, N, K, im2col) bytes, 64-aligned.
 */
#ifndef ERT_SGEMM_H_
#define ERT_SGEMM_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* also defines __GLIBC__ where it applies */

#include "internal.h"

/* Lets GCC fuse a*b+c into FMA where the target has it (GCC's ISO C modes keep them
 * apart otherwise). Only changes rounding, within the kernels' tolerances. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

enum {
  ERT_SGEMM_MR = 4,     /* micro-tile rows */
  ERT_SGEMM_NR = 16,    /* micro-tile columns */
  ERT_SGEMM_KC = 256,   /* depth of one packed block */
  ERT_SGEMM_MC = 64,    /* largest row block of a task (multiple of MR) */
  ERT_SGEMM_NC = 128,   /* largest column block of a task (multiple of NR) */
  ERT_SGEMM_SLOTS = 4,  /* scratch slots, i.e. tasks in flight */
};

/* B as the im2col matrix of one image [channels][height][width]: row
 * k = (c * kh + ky) * kw + kx, column j = oy * out_w + ox holds
 * x[c][oy*sh + ky*dh - pad_top][ox*sw + kx*dw - pad_left], 0 outside the image. */
typedef struct ert_im2col {
  int32_t channels, height, width;
  int32_t kh, kw, sh, sw, dh, dw, pad_top, pad_left;
  int32_t out_w;
} ert_im2col;

typedef void (*ert_sgemm_locate_fn)(const void *ctx, size_t p, const float **a, const float **b,
                                    float **c, const float **bias);

typedef struct ert_sgemm {
  int32_t m, n, k;
  ptrdiff_t rsa, csa;         /* A(i,k) = a[i*rsa + k*csa] */
  ptrdiff_t rsb, csb;         /* B(k,j) = b[k*rsb + j*csb] (when im2col is NULL) */
  const ert_im2col *im2col;   /* B is the im2col matrix of the image at b instead */
  ptrdiff_t ldc;              /* C(i,j) = c[i*ldc + j] */
  float alpha;
  /* accumulate = 0: C = alpha*AB + bias[i] (bias may be NULL: 0);
   * accumulate = 1: C = alpha*AB + C (bias ignored). */
  int accumulate;
  const ert_act_params *act;  /* applied to the final C; NULL: none */
  size_t batch;               /* number of problems */
  ert_sgemm_locate_fn locate; /* base pointers of problem p (bias may be set to NULL) */
  const void *ctx;
  /* bpanels: B stored as 16-column panels of all k rows, B(k, j) = b[(j / 16)*16*k +
   * k*16 + j % 16] (rsb and csb unused; a last partial panel keeps its 16-float rows),
   * read in place. Not with m == 1 or n == 1 (the matrix-vector path reads strides).
   * With bpanels and A's rows contiguous (csa == 1) nothing is packed: scratch may then
   * be NULL (the recurrent ops' input projection, the NHWC pointwise convolutions). */
  int bpanels;
#if defined(ERT_X86_KERNELS)
  /* NHWC convolutions (x86-64 with the AVX-512 block kernel only, see docs/host.md):
   * bias_cols: bias[j] per column instead of bias[i] per row; rows_first: the rows (the
   * pixels) cut into ert_pixel_parts parts of whole rows, each a task with all of
   * its columns, so that thread t gets the same pixels as in the layers around it. */
  int bias_cols, rows_first;
  /* by_rows: at two threads or more, row parts only (a batch-1 B's columns are not cut),
   * so each thread writes whole rows: an NCHW convolution's output planes, which a
   * depthwise layer after it cuts among the threads the same way */
  int by_rows;
  const float *res; /* NULL, or R(i, j) = res[i*ldc + j] added to the final C (before act) */
#endif
} ert_sgemm;


/* Scratch bytes ert_sgemm_run needs for these sizes (0 for the matrix-vector path). */
size_t ert_sgemm_scratch_bytes(int64_t m, int64_t n, int64_t k, int im2col);

/* Runs all problems; scratch holds ert_sgemm_scratch_bytes(...) bytes, 64-aligned.
 * Uses ert_parallel_for on ex. Sizes of 0 are allowed (K == 0 gives C = bias or C). */
void ert_sgemm_run(const ert_sgemm *g, void *scratch, ert_exec *ex);

/* Marks a kernel function to be compiled twice on x86-64 GCC/glibc: for AVX+FMA and
 * for the baseline, chosen at load time. The source stays portable C. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    !defined(ERT_NO_CLONES)
#define ERT_SIMD_CLONES __attribute__((target_clones("fma", "default")))
#else
#define ERT_SIMD_CLONES
#endif

#endif /* ERT_SGEMM_H_ */
