/* kernel_test: every optimized micro-kernel selected in src/cpu.c against its contract
 * (cpu.h), on shapes below, at, above and at multiples of the tiles, and the whole SGEMM
 * driver with the optimized kernels against the same driver with the reference ones.
 *
 *   kernel_test [--expect ISA]     exit 0 when all pass (and ert_cpu.isa == ISA)
 *
 * Inputs of the row kernels end exactly at an inaccessible page, so any read past what
 * the contract allows faults instead of passing silently. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../kernels/ref/sgemm.h"
#include "cpu.h"

static int failures = 0, checks = 0;

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* count floats whose end touches a PROT_NONE page (never freed: a test process). */
static float *guarded(size_t count) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t bytes = count * sizeof(float);
  const size_t span = (bytes + page - 1) / page * page;
  char *m = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  mprotect(m + span, page, PROT_NONE);
  return (float *)(void *)(m + span - bytes);
}

/* |got - want| <= 1e-5 * scale + 1e-30, where scale sums the magnitudes of the products. */
static void expect_close(const char *what, double got, double want, double scale, const char *ctx) {
  ++checks;
  if (fabs(got - want) <= 1e-5 * scale + 1e-30) return;
  if (failures++ < 20) fprintf(stderr, "FAIL %s %s: got %.9g want %.9g\n", what, ctx, got, want);
}

static void test_sgemm_tile(void) {
  if (ert_cpu.sgemm_tile == NULL) return;
  static const int32_t kcs[] = {1, 2, 3, 4, 7, 8, 15, 16, 17, 64, 255, 256};
  unsigned seed = 1;
  for (size_t t = 0; t < sizeof kcs / sizeof kcs[0]; ++t) {
    const int32_t kc = kcs[t];
    float *a = guarded((size_t)kc * 4), *b = guarded((size_t)kc * 16);
    float tile[64];
    for (int32_t i = 0; i < kc * 4; ++i) a[i] = frand(&seed);
    for (int32_t i = 0; i < kc * 16; ++i) b[i] = frand(&seed);
    for (int i = 0; i < 64; ++i) tile[i] = NAN; /* must be overwritten */
    ert_cpu.sgemm_tile(kc, a, b, tile);
    char ctx[64];
    snprintf(ctx, sizeof ctx, "kc=%d", (int)kc);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 16; ++j) {
        double want = 0.0, scale = 0.0;
        for (int32_t k = 0; k < kc; ++k) {
          want += (double)a[k * 4 + i] * b[k * 16 + j];
          scale += fabs((double)a[k * 4 + i] * b[k * 16 + j]);
        }
        expect_close("sgemm_tile", tile[i * 16 + j], want, scale, ctx);
      }
  }
}

static void test_sgemm_rows(void) {
  if (ert_cpu.sgemm_rows == NULL) return;
  static const int32_t kcs[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 64, 255, 256};
  unsigned seed = 5;
  for (size_t t = 0; t < sizeof kcs / sizeof kcs[0]; ++t)
    for (int repeat = 0; repeat < 2; ++repeat) {
      const int32_t kc = kcs[t];
      const float *rows[4];
      for (int i = 0; i < 4; ++i) {
        if (repeat && i >= 2) {
          rows[i] = rows[1]; /* rows past the end repeat the last one */
          continue;
        }
        float *r = guarded((size_t)kc);
        for (int32_t k = 0; k < kc; ++k) r[k] = frand(&seed);
        rows[i] = r;
      }
      float *b = guarded((size_t)kc * 16);
      for (int32_t i = 0; i < kc * 16; ++i) b[i] = frand(&seed);
      float tile[64];
      for (int i = 0; i < 64; ++i) tile[i] = NAN;
      ert_cpu.sgemm_rows(kc, rows, b, tile);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "kc=%d repeat=%d", (int)kc, repeat);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 16; ++j) {
          double want = 0.0, scale = 0.0;
          for (int32_t k = 0; k < kc; ++k) {
            want += (double)rows[i][k] * b[k * 16 + j];
            scale += fabs((double)rows[i][k] * b[k * 16 + j]);
          }
          expect_close("sgemm_rows", tile[i * 16 + j], want, scale, ctx);
        }
    }
}

static void test_dw(ert_dw_row_fn fn, int K, int32_t stride, const char *name) {
  if (fn == NULL) return;
  unsigned seed = 7;
  float w[25];
  for (int t = 0; t < K * K; ++t) w[t] = frand(&seed);
  for (int32_t d = 1; d <= 2; ++d)
    for (int32_t n = 1; n <= 40; ++n) {
      /* the contract's last read is rows[ky][(n-1)*S + (K-1)*d] */
      const size_t len = (size_t)(n - 1) * (size_t)stride + (size_t)(K - 1) * (size_t)d + 1u;
      const float *rows[5];
      for (int ky = 0; ky < K; ++ky) {
        float *r = guarded(len);
        for (size_t i = 0; i < len; ++i) r[i] = frand(&seed);
        rows[ky] = r;
      }
      float *y = guarded((size_t)n);
      const float bias = 0.25f;
      fn(y, rows, w, n, d, bias);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "n=%d d=%d", (int)n, (int)d);
      for (int32_t i = 0; i < n; ++i) {
        double want = bias, scale = fabs(bias);
        for (int ky = 0; ky < K; ++ky)
          for (int kx = 0; kx < K; ++kx) {
            const double p = (double)w[ky * K + kx] * rows[ky][i * stride + kx * d];
            want += p;
            scale += fabs(p);
          }
        expect_close(name, y[i], want, scale, ctx);
      }
    }
}

/* Activations: the optimized entry against ert_act_apply with the reference table, on
 * every length up to two vectors past a multiple of 4, with NaN, infinities and values
 * at the clamp edges; NaN must stay NaN (or become 0) exactly as in the reference. */
static void test_act(const ert_kernels *opt) {
  if (opt->act_apply == NULL) return;
  static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, -3.0f, 6.0f, 1.0f, -1.0f};
  const ert_act_params acts[] = {
      {ERT_ACT_RELU, 0, 0},         {ERT_ACT_CLIP, -1.0f, 6.0f}, {ERT_ACT_HARD_SIGMOID, 0.2f, 0.5f},
      {ERT_ACT_HARD_SWISH, 0, 0},   {ERT_ACT_LEAKY_RELU, 0.1f, 0}, {ERT_ACT_SIGMOID, 0, 0},
      {ERT_ACT_TANH, 0, 0},
  };
  unsigned seed = 11;
  for (size_t t = 0; t < sizeof acts / sizeof acts[0]; ++t)
    for (size_t count = 0; count <= 42; ++count) {
      float *x0 = guarded(count + 1), *x1 = guarded(count + 1);
      for (size_t i = 0; i < count; ++i) {
        x0[i] = i < sizeof special / sizeof special[0] ? special[(i + t) % 10] : 8.0f * frand(&seed);
        x1[i] = x0[i];
      }
      ert_cpu = (ert_kernels){"ref", NULL, NULL, NULL, NULL, NULL, NULL, NULL};
      ert_act_apply(&acts[t], x0, count);
      ert_cpu = *opt;
      if (!opt->act_apply(&acts[t], x1, count)) continue; /* not handled: the reference runs */
      char ctx[64];
      snprintf(ctx, sizeof ctx, "kind=%d count=%zu", (int)acts[t].kind, count);
      for (size_t i = 0; i < count; ++i) {
        ++checks;
        const int same_nan = isnan(x0[i]) && isnan(x1[i]);
        const int close = fabsf(x0[i] - x1[i]) <= 1e-6f * (1.0f + fabsf(x0[i])) || x0[i] == x1[i];
        if (!same_nan && !close && failures++ < 20)
          fprintf(stderr, "FAIL act %s i=%zu: got %.9g want %.9g\n", ctx, i, x1[i], x0[i]);
      }
    }
}

/* ---- the SGEMM driver: optimized tables against the reference table ---- */

typedef struct mat_ctx {
  const float *a, *b, *bias;
  float *c;
} mat_ctx;

static void locate(const void *ctx, size_t p, const float **a, const float **b, float **c,
                   const float **bias) {
  const mat_ctx *q = ctx;
  (void)p;
  *a = q->a;
  *b = q->b;
  *c = q->c;
  *bias = q->bias;
}

/* A is row-major [m][k] (read in place by the driver) or, with a_t, column-major (packed). */
static void run_sgemm(int32_t m, int32_t n, int32_t k, int a_t, const float *a, const float *b,
                      const float *bias, float *c, void *scratch) {
  mat_ctx q = {a, b, bias, c};
  ert_sgemm g;
  memset(&g, 0, sizeof g);
  g.m = m;
  g.n = n;
  g.k = k;
  g.rsa = a_t ? 1 : k;
  g.csa = a_t ? m : 1;
  g.rsb = n;
  g.csb = 1;
  g.ldc = n;
  g.alpha = 1.0f;
  g.batch = 1;
  g.locate = locate;
  g.ctx = &q;
  ert_sgemm_run(&g, scratch, NULL);
}

static void test_sgemm_driver(const ert_kernels *opt) {
  if (opt->sgemm_tile == NULL && opt->sgemm_rows == NULL) return;
  static const int32_t ms[] = {2, 3, 4, 5, 8, 17, 64, 65};
  static const int32_t ns[] = {2, 15, 16, 17, 33, 128, 129};
  static const int32_t ks[] = {1, 3, 16, 255, 256, 257};
  unsigned seed = 3;
  for (size_t im = 0; im < sizeof ms / sizeof ms[0]; ++im)
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; ++in)
      for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ++ik)
        for (int a_t = 0; a_t < 2; ++a_t) {
          const int32_t m = ms[im], n = ns[in], k = ks[ik];
          float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
          float *bias = malloc(sizeof(float) * (size_t)m);
          float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c1 = malloc(sizeof(float) * (size_t)(m * n));
          const size_t sb = ert_sgemm_scratch_bytes(m, n, k, 0);
          void *scratch = NULL;
          if (sb && posix_memalign(&scratch, 64, sb) != 0) exit(2);
          for (int32_t i = 0; i < m * k; ++i) a[i] = frand(&seed);
          for (int32_t i = 0; i < k * n; ++i) b[i] = frand(&seed);
          for (int32_t i = 0; i < m; ++i) bias[i] = frand(&seed);
          ert_cpu = (ert_kernels){"ref", NULL, NULL, NULL, NULL, NULL, NULL, NULL};
          run_sgemm(m, n, k, a_t, a, b, bias, c0, scratch);
          ert_cpu = *opt;
          run_sgemm(m, n, k, a_t, a, b, bias, c1, scratch);
          char ctx[64];
          snprintf(ctx, sizeof ctx, "m=%d n=%d k=%d a_t=%d", (int)m, (int)n, (int)k, a_t);
          for (int32_t i = 0; i < m * n; ++i) expect_close("sgemm", c1[i], c0[i], (double)k + 1.0, ctx);
          free(a), free(b), free(bias), free(c0), free(c1), free(scratch);
        }
}

int main(int argc, char **argv) {
  const char *expect = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) {
      expect = argv[++i];
    } else {
      fprintf(stderr, "usage: kernel_test [--expect ISA]\n");
      return 2;
    }
  }
  const ert_kernels opt = ert_cpu;
  printf("kernels: %s\n", opt.isa);
  test_sgemm_tile();
  test_sgemm_rows();
  test_dw(opt.dw3_s1, 3, 1, "dw3_s1");
  test_dw(opt.dw3_s2, 3, 2, "dw3_s2");
  test_dw(opt.dw5_s1, 5, 1, "dw5_s1");
  test_dw(opt.dw5_s2, 5, 2, "dw5_s2");
  test_sgemm_driver(&opt);
  test_act(&opt);
  ert_cpu = opt;
  printf("%d checks, %d failures\n", checks, failures);
  if (expect != NULL && strcmp(expect, opt.isa) != 0) {
    fprintf(stderr, "FAIL expected kernels %s, selected %s\n", expect, opt.isa);
    return 1;
  }
  return failures ? 1 : 0;
}
