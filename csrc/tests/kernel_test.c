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

#include "../kernels/ref/quant_s8.h"
#include "../kernels/ref/sgemm.h"
#include "cpu.h"
#include "runtime.h"

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

/* Releases a guarded(count) buffer (these tests allocate thousands). */
static void unguard(float *p, size_t count) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = count * sizeof(float);
  const size_t span = (bytes + page - 1) / page * page;
  munmap((char *)p - (span - bytes), span + page);
}

/* |got - want| <= 1e-5 * scale + 1e-30, where scale sums the magnitudes of the products. */
static void expect_close(const char *what, double got, double want, double scale, const char *ctx) {
  ++checks;
  if (fabs(got - want) <= 1e-5 * scale + 1e-30) return;
  if (failures++ < 20) fprintf(stderr, "FAIL %s %s: got %.9g want %.9g\n", what, ctx, got, want);
}

/* The activation of the reference (ert_act_apply with the reference table). */
static float ref_act(const ert_act_params *act, float v) {
  if (act == NULL) return v;
  const ert_kernels keep = ert_cpu;
  ert_cpu = (ert_kernels){.isa = "ref"};
  ert_act_apply(act, &v, 1);
  ert_cpu = keep;
  return v;
}

/* sgemm_rows (R = 4), sgemm_rows6 (R = 6) and sgemm_rows6_n8 (R = 6, 8 columns): every
 * store mode (bias or not, alpha, accumulate, each inline activation) into C rows of
 * pitch 19; the columns past the kernel's (16 or 8) must stay untouched. */
static void test_sgemm_rows_b(ert_sgemm_rows_fn fn, ert_sgemm_rows_ld_fn fn_ld, int R, int cols,
                              const char *name) {
  if (fn == NULL && fn_ld == NULL) return;
  const ptrdiff_t ldb = fn_ld ? 21 : 16; /* B's rows in place, 21 floats apart, or a panel */
  static const int32_t kcs[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 64, 255, 256};
  const ert_act_params acts[] = {{ERT_ACT_HARD_SWISH, 0, 0}, {ERT_ACT_RELU, 0, 0},
                                 {ERT_ACT_CLIP, -0.5f, 0.5f}, {ERT_ACT_HARD_SIGMOID, 0.2f, 0.5f},
                                 {ERT_ACT_LEAKY_RELU, 0.1f, 0}};
  enum { LDC = 19 };
  unsigned seed = 5;
  for (size_t t = 0; t < sizeof kcs / sizeof kcs[0]; ++t)
    for (int mode = 0; mode < 8; ++mode) {
      const int32_t kc = kcs[t];
      const int repeat = mode & 1; /* rows past the end repeat the last one */
      const float *rows[6];
      for (int i = 0; i < R; ++i) {
        if (repeat && i >= 2) {
          rows[i] = rows[1];
          continue;
        }
        float *r = guarded((size_t)kc);
        for (int32_t k = 0; k < kc; ++k) r[k] = frand(&seed);
        rows[i] = r;
      }
      float *b = guarded((size_t)kc * (size_t)ldb);
      for (int32_t i = 0; i < kc * ldb; ++i) b[i] = frand(&seed);
      float bias[6], *c = guarded((size_t)R * LDC), c0[6 * LDC];
      for (int i = 0; i < R; ++i) bias[i] = frand(&seed);
      for (int i = 0; i < R * LDC; ++i) c[i] = c0[i] = mode == 0 ? NAN : frand(&seed);
      ert_sgemm_store st = {.ldc = LDC, .alpha = 1.0f, .init = 1};
      if (mode >= 2) {
        st.init = mode % 3 != 0;
        st.bias = mode % 2 ? bias : NULL;
        st.alpha = mode >= 4 ? 0.5f : 1.0f;
        st.act = &acts[(mode + (int)t) % 5]; /* every kind with every mode over the kcs */
      }
      if (fn_ld != NULL)
        fn_ld(kc, rows, b, ldb, c, &st);
      else
        fn(kc, rows, b, c, &st);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "kc=%d mode=%d", (int)kc, mode);
      for (int i = 0; i < R; ++i) {
        for (int j = 0; j < cols; ++j) {
          double r = 0.0, scale = 0.0;
          for (int32_t k = 0; k < kc; ++k) {
            r += (double)rows[i][k] * b[k * ldb + j];
            scale += fabs((double)rows[i][k] * b[k * ldb + j]);
          }
          const double base = st.init ? (st.bias ? st.bias[i] : 0.0) : c0[i * LDC + j];
          const double pre = st.alpha * r + base;
          const float want = ref_act(st.act, (float)pre);
          expect_close(name, c[i * LDC + j], want,
                       2.0 * (fabs(st.alpha) * scale + fabs(base)), ctx);
        }
        for (int j = cols; j < LDC; ++j) {
          ++checks;
          if (memcmp(&c[i * LDC + j], &c0[i * LDC + j], sizeof(float)) != 0 && failures++ < 20)
            fprintf(stderr, "FAIL %s %s: wrote column %d\n", name, ctx, j);
        }
      }
    }
}

static void test_sgemm_rows(ert_sgemm_rows_fn fn, int R, int cols, const char *name) {
  test_sgemm_rows_b(fn, NULL, R, cols, name);
}

#if defined(__aarch64__) && defined(ERT_NEON_KERNELS)
/* aarch64 NEON sgemm_rows6 with B in place (st->bgap) over a window (st->taps), as an
 * sgemm_rows6_ld: kc split into three window rows (two, or one, when kc does not divide),
 * pitch apart. */
static ert_sgemm_rows_fn rows6_fn;
static void rows6_as_ld(int32_t kc, const float *const *rows, const float *b, ptrdiff_t ldb,
                        float *c, const ert_sgemm_store *st) {
  const int32_t nt = kc % 3 == 0 ? 3 : kc % 2 == 0 ? 2 : 1;
  ert_sgemm_store s = *st;
  s.bgap = (ldb - 16) * (ptrdiff_t)sizeof(float);
  s.taps = (uint64_t)(kc / nt * ldb) << 32 | (uint64_t)(nt - 1) << 8;
  rows6_fn(kc / nt, rows, b, c, &s);
}

/* The same over kh x kw windows (taps along a row one float apart) against the contract,
 * B a plane of rows ldb apart, window rows pitch apart. */
static void test_sgemm_taps(ert_sgemm_rows_fn fn) {
  if (fn == NULL) return;
  unsigned seed = 9;
  static const int32_t shapes[][3] = {{3, 3, 5}, {1, 3, 4}, {3, 1, 7}, {2, 5, 8}, {5, 5, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    const int32_t kh = shapes[s][0], kw = shapes[s][1], kc = shapes[s][2];
    const ptrdiff_t pitch = 23, ldb = kh * pitch + 3, span = (kc - 1) * ldb + (kh - 1) * pitch + kw - 1 + 16;
    const int32_t kk = kh * kw * kc;
    float *b = guarded((size_t)span);
    for (ptrdiff_t i = 0; i < span; ++i) b[i] = frand(&seed);
    const float *rows[6];
    for (int i = 0; i < 6; ++i) {
      float *r = guarded((size_t)kk);
      for (int32_t k = 0; k < kk; ++k) r[k] = frand(&seed);
      rows[i] = r;
    }
    float c[6 * 16];
    ert_sgemm_store st = {.ldc = 16, .alpha = 1.0f, .init = 1};
    st.bgap = (ldb - 16) * (ptrdiff_t)sizeof(float);
    st.taps = (uint64_t)pitch << 32 | (uint64_t)(kw - 1) * 0x1000001u | (uint64_t)(kh - 1) << 8;
    fn(kc, rows, b, c, &st);
    char ctx[64];
    snprintf(ctx, sizeof ctx, "kh=%d kw=%d kc=%d", (int)kh, (int)kw, (int)kc);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 16; ++j) {
        double r = 0.0, scale = 0.0;
        for (int32_t ky = 0; ky < kh; ++ky)
          for (int32_t kx = 0; kx < kw; ++kx)
            for (int32_t k = 0; k < kc; ++k) {
              const double v = (double)rows[i][(ky * kw + kx) * kc + k] * b[ky * pitch + kx + k * ldb + j];
              r += v;
              scale += fabs(v);
            }
        expect_close("sgemm_rows6 taps", c[i * 16 + j], (float)r, 2.0 * scale, ctx);
      }
  }
}
#endif

/* Planes of 1 to 3 rows, every width the contract allows up to 40, window rows 1 or 2
 * pitches apart; the plane is one guarded buffer ending at the last tap. */
static void test_dw(ert_dw_plane_fn fn, int K, int32_t stride, const char *name) {
  if (fn == NULL) return;
  unsigned seed = 7;
  float w[25];
  for (int t = 0; t < K * K; ++t) w[t] = frand(&seed);
  for (int32_t dh = 1; dh <= 2; ++dh)
    for (int32_t oh = 1; oh <= 3; ++oh)
      for (int32_t n = 3 + stride; n <= 40; ++n) {
        /* the contract's last read in a row is (n-1)*S + K-1 */
        const ptrdiff_t span = (ptrdiff_t)(n - 1) * stride + K;
        const ptrdiff_t pitch = span + (n % 3);
        const ptrdiff_t ts = dh * pitch, rs = (ptrdiff_t)stride * pitch;
        const size_t len = (size_t)((oh - 1) * rs + (K - 1) * ts + span);
        float *x = guarded(len);
        for (size_t i = 0; i < len; ++i) x[i] = frand(&seed);
        float *y = guarded((size_t)(oh * n));
        const float bias = 0.25f;
        fn(y, oh, n, x, rs, ts, w, bias);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "oh=%d n=%d dh=%d", (int)oh, (int)n, (int)dh);
        for (int32_t oy = 0; oy < oh; ++oy)
          for (int32_t i = 0; i < n; ++i) {
            double want = bias, scale = fabs(bias);
            for (int ky = 0; ky < K; ++ky)
              for (int kx = 0; kx < K; ++kx) {
                const double p = (double)w[ky * K + kx] * x[oy * rs + ky * ts + i * stride + kx];
                want += p;
                scale += fabs(p);
              }
            expect_close(name, y[oy * n + i], want, scale, ctx);
          }
      }
}

#if defined(ERT_X86_KERNELS) /* conv3s2 and conv3s1 are x86-64 entries */
/* conv3s2 (stride 2) and conv3s1 (stride 1): 1 to 4 input planes (stride 1: also 7 and
 * 19), 1 to 9 output planes (stride 1: also 13 and 25, past one 12-plane tile), images 1
 * to 7 rows high and 1 to 40 columns wide (stride 1: also 47, 64 and 70, past 32-column
 * steps), top and left padding 0 to 2, one or two output rows per call, with and without
 * a clamp and a bias; x ends at an inaccessible page. */
static void test_conv3(const ert_kernels *opt, int s) {
  void (*fn)(float *, const float *, const float *, const float *, const ert_conv3s2_geom *,
             int32_t, int32_t) = s == 2 ? opt->conv3s2 : opt->conv3s1;
  if (fn == NULL) return;
  const char *name = s == 2 ? "conv3s2" : "conv3s1";
  static const int32_t cs[] = {1, 2, 3, 4, 7, 19}, ms[] = {1, 2, 3, 4, 5, 9, 13, 25};
  static const int32_t wide[] = {47, 64, 70};
  unsigned seed = 11;
  enum { CMAX = 19, MMAX = 25 };
  static float wt[MMAX * CMAX * 9], bias[MMAX];
  for (int t = 0; t < MMAX * CMAX * 9; ++t) wt[t] = frand(&seed);
  for (int t = 0; t < MMAX; ++t) bias[t] = frand(&seed);
  for (size_t ic = 0; ic < sizeof cs / sizeof cs[0]; ++ic)
    for (size_t im = 0; im < sizeof ms / sizeof ms[0]; ++im)
      for (int32_t h = 1; h <= 7; h += 3)
        for (int32_t wi = 1; wi <= 40 + 3; ++wi)
          for (int32_t pad = 0; pad <= 2; ++pad) {
            const int32_t c = cs[ic], m = ms[im], w = wi <= 40 ? wi : wide[wi - 41];
            if ((s == 2 && (c > 4 || m > 9 || wi > 40)) || (c > 4 && wi % 3 != 0)) continue;
            const int32_t pt = pad, pl = (pad + w) % 3;
            const int32_t oh = (h + 2 * pt - 3) / s + 1, ow = (w + 2 * pl - 3) / s + 1;
            if (h + 2 * pt < 3 || w + 2 * pl < 3) continue;
            const size_t nx = (size_t)c * h * w, ny = (size_t)m * oh * ow;
            float *x = guarded(nx), *y = guarded(ny);
            for (size_t i = 0; i < nx; ++i) x[i] = frand(&seed);
            for (size_t i = 0; i < ny; ++i) y[i] = 1e30f;
            const int clamp = (w + c) % 2, with_bias = (w + m) % 3 != 0;
            const ert_conv3s2_geom g = {c, h, w, m, oh, ow, pt, pl, clamp ? -0.5f : -INFINITY,
                                        clamp ? 0.5f : INFINITY};
            for (int32_t oy = 0; oy < oh; oy += 2)
              fn(y, x, wt, with_bias ? bias : NULL, &g, oy, oy + 2 < oh ? oy + 2 : oh);
            char ctx[96];
            snprintf(ctx, sizeof ctx, "c=%d m=%d h=%d w=%d pt=%d pl=%d", (int)c, (int)m, (int)h,
                     (int)w, (int)pt, (int)pl);
            for (int32_t o = 0; o < m; ++o)
              for (int32_t oy = 0; oy < oh; ++oy)
                for (int32_t ox = 0; ox < ow; ++ox) {
                  double want = with_bias ? bias[o] : 0.0, scale = fabs(want);
                  for (int32_t i = 0; i < c; ++i)
                    for (int ky = 0; ky < 3; ++ky)
                      for (int kx = 0; kx < 3; ++kx) {
                        const int32_t r = oy * s - pt + ky, q = ox * s - pl + kx;
                        if (r < 0 || r >= h || q < 0 || q >= w) continue;
                        const double p = (double)wt[(o * c + i) * 9 + ky * 3 + kx] * x[(i * h + r) * w + q];
                        want += p;
                        scale += fabs(p);
                      }
                  if (want < g.lo) want = g.lo;
                  if (want > g.hi) want = g.hi;
                  expect_close(name, y[(o * oh + oy) * ow + ox], want, scale, ctx);
                }
            unguard(x, nx);
            unguard(y, ny);
          }
}

#endif

/* dw3: strides (sh, sw) in {1, 2}^2, top padding 0 to 2, planes 1 to 5 rows high and 5
 * to 40 outputs wide with zero or one column of padding right, 0 to 2 rows of padding
 * below, with and without a clamp; x and the zero row end at an inaccessible page. */
static void test_dw3(const ert_kernels *opt) {
  if (opt->dw3 == NULL) return;
  unsigned seed = 5;
  float k[9];
  for (int t = 0; t < 9; ++t) k[t] = frand(&seed);
  for (int32_t sh = 1; sh <= 2; ++sh)
    for (int32_t sw = 1; sw <= 2; ++sw)
      for (int32_t pt = 0; pt <= 2; ++pt)
        for (int32_t h = 1; h <= 5; ++h)
          for (int32_t ow = 5; ow <= 40; ++ow)
            for (int32_t pr = 0; pr <= 1; ++pr)
              for (int32_t pb = 0; pb <= 2; ++pb) {
                const int32_t w = (ow - 1) * sw + 2 - pr, oh = (h + pt + pb - 3) / sh + 1;
                if (h + pt + pb < 3) continue;
                float *x = guarded((size_t)h * w), *zero = guarded((size_t)w);
                for (int32_t i = 0; i < h * w; ++i) x[i] = frand(&seed);
                memset(zero, 0, (size_t)w * sizeof(float));
                float *y = guarded((size_t)oh * ow);
                const int clamp = (ow + h) % 2;
                const ert_dw3_geom g = {h, w, oh, ow, sh, sw, pt, clamp ? -0.5f : -INFINITY,
                                        clamp ? 0.5f : INFINITY};
                const float bias = 0.25f;
                opt->dw3(y, x, zero, k, bias, &g);
                char ctx[96];
                snprintf(ctx, sizeof ctx, "s=%dx%d pt=%d h=%d w=%d ow=%d pb=%d", (int)sh, (int)sw,
                         (int)pt, (int)h, (int)w, (int)ow, (int)pb);
                for (int32_t oy = 0; oy < oh; ++oy)
                  for (int32_t ox = 0; ox < ow; ++ox) {
                    double want = bias, scale = fabs(bias);
                    for (int ky = 0; ky < 3; ++ky)
                      for (int kx = 0; kx < 3; ++kx) {
                        const int32_t r = oy * sh - pt + ky, c = ox * sw - 1 + kx;
                        if (r < 0 || r >= h || c < 0 || c >= w) continue;
                        const double p = (double)k[3 * ky + kx] * x[r * w + c];
                        want += p;
                        scale += fabs(p);
                      }
                    if (want < g.lo) want = g.lo;
                    if (want > g.hi) want = g.hi;
                    expect_close("dw3", y[oy * ow + ox], want, scale, ctx);
                  }
                unguard(x, (size_t)h * w);
                unguard(zero, (size_t)w);
                unguard(y, (size_t)oh * ow);
              }
}

/* dw_direct: every k, s it takes, pads 0..k-1, images 1 to 20 wide and 1 to 4 high (the
 * output sizes ONNX's formula gives, pads on both sides), each image a guarded buffer
 * ending at its last float; against the plain sum over the taps inside the image. */
static void test_dw_direct(const ert_kernels *opt) {
  if (opt->dw_direct == NULL) return;
  int direct_taken = 0;
  unsigned seed = 11;
  float wt[25];
  for (int t = 0; t < 25; ++t) wt[t] = frand(&seed);
  for (int k = 3; k <= 5; k += 2)
    for (int s = 1; s <= 2; ++s)
      for (int pad = 0; pad < k; ++pad)
        for (int32_t h = 1; h <= 4; ++h)
          for (int32_t w = 1; w <= 20; ++w) {
            const int32_t oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
            if (h + 2 * pad < k || w + 2 * pad < k || oh < 1 || ow < 1) continue;
            float *x = guarded((size_t)(h * w));
            for (int32_t i = 0; i < h * w; ++i) x[i] = frand(&seed);
            float *y = guarded((size_t)(oh * ow));
            const float bias = -0.125f;
            if (!opt->dw_direct(y, x, h, w, oh, ow, k, s, pad, pad, wt, bias)) continue; /* declined */
            ++direct_taken;
            char ctx[80];
            snprintf(ctx, sizeof ctx, "k=%d s=%d pad=%d h=%d w=%d", k, s, pad, (int)h, (int)w);
            for (int32_t oy = 0; oy < oh; ++oy)
              for (int32_t ox = 0; ox < ow; ++ox) {
                double want = bias, scale = fabs(bias);
                for (int ky = 0; ky < k; ++ky)
                  for (int kx = 0; kx < k; ++kx) {
                    const int32_t r = oy * s + ky - pad, c = ox * s + kx - pad;
                    if (r < 0 || r >= h || c < 0 || c >= w) continue;
                    const double p = (double)wt[ky * k + kx] * x[r * w + c];
                    want += p;
                    scale += fabs(p);
                  }
                expect_close("dw_direct", y[oy * ow + ox], want, scale, ctx);
              }
          }
  ++checks;
  if (direct_taken == 0 && failures++ < 20) fprintf(stderr, "FAIL dw_direct declined every window\n");
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
      {ERT_ACT_TANH, 0, 0},         {ERT_ACT_SILU, 0, 0},
  };
  unsigned seed = 11;
  for (size_t t = 0; t < sizeof acts / sizeof acts[0]; ++t)
    for (size_t count = 0; count <= 42; ++count) {
      float *x0 = guarded(count + 1), *x1 = guarded(count + 1);
      for (size_t i = 0; i < count; ++i) {
        x0[i] = i < sizeof special / sizeof special[0] ? special[(i + t) % 10] : 8.0f * frand(&seed);
        x1[i] = x0[i];
      }
      ert_cpu = (ert_kernels){.isa = "ref"};
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

/* ---- int8 entries: exact equality with the contracts (cpu.h) ---- */

/* bytes whose end touches a PROT_NONE page */
static void *guarded_s8(size_t bytes) {
  return (char *)(void *)guarded((bytes + sizeof(float) - 1) / sizeof(float)) +
         ((sizeof(float) - bytes % sizeof(float)) % sizeof(float));
}

/* Mostly the extremes -128 / 127 (or lo / hi), else random in [lo, hi]. */
static int32_t irand(unsigned *s, int32_t lo, int32_t hi) {
  *s = *s * 1103515245u + 12345u;
  const unsigned v = *s >> 8;
  if (v % 4 == 0) return lo;
  if (v % 4 == 1) return hi;
  return lo + (int32_t)((v >> 2) % (unsigned)(hi - lo + 1));
}

static void expect_eq(const char *what, long long got, long long want, const char *ctx) {
  ++checks;
  if (got == want) return;
  if (failures++ < 20) fprintf(stderr, "FAIL %s %s: got %lld want %lld\n", what, ctx, got, want);
}

typedef void (*qgemm_fn)(int32_t, int32_t, const int8_t *, const int8_t *, const int32_t *, int32_t *,
                         int32_t);

/* qgemm_s8 (weights in [wmin, 127]) */
static void test_qgemm_fn(qgemm_fn fn, int32_t wmin, const char *name) {
  if (fn == NULL) return;
  static const int32_t kqs[] = {1, 2, 3, 4, 7, 64, 65};
  static const int32_t nps[] = {1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 24, 31, 32, 33, 63, 64};
  unsigned seed = 21;
  for (size_t a = 0; a < sizeof kqs / sizeof kqs[0]; ++a)
    for (size_t b = 0; b < sizeof nps / sizeof nps[0]; ++b) {
      const int32_t kq = kqs[a], np = nps[b], lda = np + 3;
      int8_t *col = guarded_s8((size_t)kq * 4u * (size_t)np), *wq = guarded_s8((size_t)kq * 16u);
      for (int32_t i = 0; i < kq * 4 * np; ++i) col[i] = (int8_t)irand(&seed, -128, 127);
      for (int32_t i = 0; i < kq * 16; ++i) wq[i] = (int8_t)irand(&seed, wmin, 127);
      int32_t *acc = malloc(sizeof(int32_t) * (size_t)(4 * lda)), bias[4];
      for (int r = 0; r < 4; ++r) bias[r] = irand(&seed, -(INT32_MAX - kq * 4 * 16384), INT32_MAX - kq * 4 * 16384);
      for (int32_t i = 0; i < 4 * lda; ++i) acc[i] = 0x5a5a5a5a;
      fn(kq, np, col, wq, bias, acc, lda);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "kq=%d np=%d", (int)kq, (int)np);
      for (int r = 0; r < 4; ++r) {
        for (int32_t i = 0; i < np; ++i) {
          long long want = bias[r];
          for (int32_t t = 0; t < 4 * kq; ++t)
            want += (long long)col[(t / 4) * 4 * np + 4 * i + t % 4] * wq[16 * (t / 4) + 4 * r + t % 4];
          expect_eq(name, acc[r * lda + i], want, ctx);
        }
        for (int32_t i = np; i < lda; ++i) expect_eq(name, acc[r * lda + i], 0x5a5a5a5a, ctx);
      }
      free(acc);
    }
}

/* qgemm_rq_s8: the qgemm shapes, every row count, n from np down to np - 5; shifts 32..62;
 * the pixels past its whole tiles untouched (weights in [-127, 127] without sdot) */
static void test_qgemm_rq_s8(const ert_kernels *opt) {
  if (opt->qgemm_rq_s8 == NULL) return;
  const int32_t wmin = opt->qgemm_s8_p != NULL ? -127 : -128; /* no sdot: qgemm_s8_p's weights */
  static const int32_t kqs[] = {1, 2, 6, 7, 64};
  static const int32_t nps[] = {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64};
  static const int32_t mq[][2] = {{1518500250, 38}, {1518500250, 44}, {12345, 32}, {INT32_MAX, 62}, {0, 40}};
  unsigned seed = 32;
  for (size_t a = 0; a < sizeof kqs / sizeof kqs[0]; ++a)
    for (size_t b = 0; b < sizeof nps / sizeof nps[0]; ++b)
      for (int32_t rows = 1; rows <= 4; ++rows) {
        const int32_t kq = kqs[a], np = nps[b], n = np - (int32_t)((a + b + (size_t)rows) % 6 < (size_t)np ? (a + b + (size_t)rows) % 6 : 0);
        const size_t ldy = (size_t)n + 2;
        int8_t *col = guarded_s8((size_t)kq * 4u * (size_t)np), *wq = guarded_s8((size_t)kq * 16u);
        for (int32_t i = 0; i < kq * 4 * np; ++i) col[i] = (int8_t)irand(&seed, -128, 127);
        for (int32_t i = 0; i < kq * 16; ++i) wq[i] = (int8_t)irand(&seed, wmin, 127);
        int32_t bias[4], mult[4];
        const size_t v = (a * 3 + b + (size_t)rows) % (sizeof mq / sizeof mq[0]);
        for (int r = 0; r < 4; ++r) {
          bias[r] = (b % 3 == 0) ? irand(&seed, -(INT32_MAX - kq * 4 * 16384), INT32_MAX - kq * 4 * 16384)
                                 : irand(&seed, -100000, 100000);
          mult[r] = r == 3 ? mq[v][0] / 3 : mq[v][0] - r;
        }
        const int32_t zp = irand(&seed, -128, 127);
        const int32_t q[4] = {mq[v][1], zp, (b % 2) ? zp : -128, (b % 4 == 1) ? zp : 127};
        int8_t *y = guarded_s8((size_t)(rows - 1) * ldy + (size_t)n);
        for (size_t i = 0; i < (size_t)(rows - 1) * ldy + (size_t)n; ++i) y[i] = 0x5a;
        const int32_t nd = opt->qgemm_rq_s8(kq, np, col, wq, bias, mult, q, y, ldy, n, rows);
        char ctx[80];
        snprintf(ctx, sizeof ctx, "kq=%d np=%d n=%d rows=%d shift=%d", (int)kq, (int)np, (int)n, (int)rows, (int)q[0]);
        /* the pixels it did: at least the whole tiles of 8 (all n from 16 pixels on) */
        expect_eq("qgemm_rq_s8 done", nd >= 0 && nd <= n && (np < 16 || nd >= (n < (np & ~7) ? n : (np & ~7))), 1, ctx);
        for (int r = 0; r < rows; ++r) {
          for (int32_t i = 0; i < nd; ++i) {
            long long acc = bias[r];
            for (int32_t t = 0; t < 4 * kq; ++t)
              acc += (long long)col[(t / 4) * 4 * np + 4 * i + t % 4] * wq[16 * (t / 4) + 4 * r + t % 4];
            expect_eq("qgemm_rq_s8", y[(size_t)r * ldy + (size_t)i],
                      ert_clamp_s8(q[1] + ert_requant(acc, mult[r], q[0]), q[2], q[3]), ctx);
          }
          for (size_t i = (size_t)nd; i < (r + 1 < rows ? ldy : (size_t)n); ++i)
            expect_eq("qgemm_rq_s8 untouched", y[(size_t)r * ldy + i], 0x5a, ctx);
        }
      }
}

static void test_qgemm_s8(const ert_kernels *opt) {
  test_qgemm_fn(opt->qgemm_s8, -128, "qgemm_s8");
  test_qgemm_fn(opt->qgemm_s8_p, -127, "qgemm_s8_p");
}

/* binary_s8: add and mul rows, same shape and either operand broadcast, in place, on
 * lengths around the vector widths, zero points and ranges at the ends, multipliers up to
 * the limits, shifts 1 .. 31. */
static void test_binary_s8(const ert_kernels *opt) {
  if (opt->binary_s8 == NULL) return;
  static const int32_t shifts[] = {1, 2, 7, 13, 15, 16, 20, 24, 29, 30, 31};
  static const int32_t zps[] = {-128, 0, 127};
  static const size_t ns[] = {1, 7, 8, 9, 15, 16, 17, 31, 40, 64, 65};
  unsigned seed = 31;
  for (int op = 0; op < 2; ++op)
    for (size_t si = 0; si < sizeof shifts / sizeof shifts[0]; ++si)
      for (int layout = 0; layout < 4; ++layout) /* same, b scalar, a scalar, in place */
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ++ni) {
          const size_t n = ns[ni];
          const int sa = layout != 2, sb = layout != 1;
          const int32_t mlim = op == 0 ? (1 << 15) - 1 : (1 << 14) - 1;
          int32_t p[8];
          p[0] = zps[irand(&seed, 0, 2)], p[1] = zps[irand(&seed, 0, 2)], p[2] = zps[irand(&seed, 0, 2)];
          p[3] = irand(&seed, 0, mlim), p[4] = irand(&seed, 0, mlim), p[5] = shifts[si];
          if (ni % 3 == 0) p[6] = -128, p[7] = 127;
          else p[6] = p[2], p[7] = p[2] < 120 ? p[2] + 7 : 127;
          int8_t *a = guarded_s8(sa ? n : 1), *b = guarded_s8(sb ? n : 1), *y = guarded_s8(n);
          int8_t a0[80], b0[80];
          for (size_t i = 0; i < (sa ? n : 1); ++i) a[i] = a0[i] = (int8_t)irand(&seed, -128, 127);
          for (size_t i = 0; i < (sb ? n : 1); ++i) b[i] = b0[i] = (int8_t)irand(&seed, -128, 127);
          int8_t *out = layout == 3 ? a : y;
          opt->binary_s8(op, p, a, b, out, n, sa, sb);
          char ctx[112];
          snprintf(ctx, sizeof ctx, "op=%d layout=%d n=%zu zp=%d,%d,%d m=%d,%d shift=%d [%d,%d]", op,
                   layout, n, (int)p[0], (int)p[1], (int)p[2], (int)p[3], (int)p[4], (int)p[5],
                   (int)p[6], (int)p[7]);
          for (size_t i = 0; i < n; ++i) {
            const int64_t da = a0[sa ? i : 0] - p[0], db = b0[sb ? i : 0] - p[1];
            const int64_t v = op == 0 ? da * p[3] + db * p[4] : da * db * p[3];
            const int64_t r = ert_floor_shift(v + ((int64_t)1 << (p[5] - 1)), p[5]);
            expect_eq(op == 0 ? "binary_s8 add" : "binary_s8 mul", out[i], ert_clamp_s8(p[2] + r, p[6], p[7]),
                      ctx);
          }
        }
}

/* quantize_s8 against quantize_one of ref/quantize.c (restated here): values at and
 * around the rounding halves, the clamps, +-2^22, infinities and NaN; scales that make
 * the division inexact. */
static float quantize_ref(float x, float s, float z) {
  float v = x / s;
  v = v > 4194304.0f ? 4194304.0f : (v < -4194304.0f ? -4194304.0f : v);
  v = (v + 12582912.0f) - 12582912.0f;
  v = v == v ? v + z : z;
  return v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
}

static void test_quantize_s8(const ert_kernels *opt) {
  if (opt->quantize_s8 == NULL) return;
  static const float scales[] = {1.0f, 0.1f, 0.0078125f, 3.0f, 1e-30f};
  static const float zs[] = {-128.0f, 0.0f, 5.0f, 127.0f};
  unsigned seed = 41;
  for (size_t a = 0; a < 5; ++a)
    for (size_t b = 0; b < 4; ++b)
      for (size_t n = 1; n <= 41; n += 4) {
        float *x = guarded(n);
        int8_t *y = guarded_s8(n);
        for (size_t i = 0; i < n; ++i) {
          const int32_t r = irand(&seed, -300, 300);
          switch (i % 7) {
            case 0: x[i] = ((float)r + 0.5f) * scales[a]; break;
            case 1: x[i] = (float)r * scales[a] * 1.0001f; break;
            case 2: x[i] = i % 2 ? INFINITY : -INFINITY; break;
            case 3: x[i] = i % 3 ? NAN : 4194305.0f * scales[a]; break;
            case 4: x[i] = (float)r * 0.37f; break;
            default: x[i] = ((float)r - 0.5f) * scales[a];
          }
        }
        opt->quantize_s8(x, y, n, scales[a], zs[b]);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "s=%g z=%g n=%zu", (double)scales[a], (double)zs[b], n);
        for (size_t i = 0; i < n; ++i)
          expect_eq("quantize_s8", y[i], (int32_t)quantize_ref(x[i], scales[a], zs[b]), ctx);
      }
}

/* dequantize_s8: every int8 value, zero points at the ends, a few scales. */
static void test_dequantize_s8(const ert_kernels *opt) {
  if (opt->dequantize_s8 == NULL) return;
  static const float scales[] = {1.0f, 0.1f, 0.0078125f, 3.0e-7f};
  static const float zs[] = {-128.0f, 0.0f, 5.0f, 127.0f};
  for (size_t a = 0; a < 4; ++a)
    for (size_t b = 0; b < 4; ++b)
      for (size_t n = 1; n <= 259; n += (n < 20 ? 1 : 79)) {
        int8_t *x = guarded_s8(n);
        float *y = guarded(n);
        for (size_t i = 0; i < n; ++i) x[i] = (int8_t)(i * 37u + a);
        opt->dequantize_s8(x, y, n, scales[a], zs[b]);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "s=%g z=%g n=%zu", (double)scales[a], (double)zs[b], n);
        for (size_t i = 0; i < n; ++i) {
          const float want = ((float)x[i] - zs[b]) * scales[a];
          ++checks;
          if (memcmp(&y[i], &want, sizeof want) != 0 && failures++ < 20)
            fprintf(stderr, "FAIL dequantize_s8 %s: i=%zu got %a want %a\n", ctx, i, (double)y[i],
                    (double)want);
        }
      }
}

/* lut_s8: every index, lengths around 16, in place. */
static void test_lut_s8(const ert_kernels *opt) {
  if (opt->lut_s8 == NULL) return;
  unsigned seed = 32;
  int8_t t[256];
  for (int i = 0; i < 256; ++i) t[i] = (int8_t)irand(&seed, -128, 127);
  for (size_t n = 1; n <= 300; n += (n < 40 ? 1 : 37))
    for (int inplace = 0; inplace < 2; ++inplace) {
      int8_t *x = guarded_s8(n), *y = inplace ? x : guarded_s8(n), x0[300];
      for (size_t i = 0; i < n; ++i) x[i] = x0[i] = (int8_t)(n > 256 ? (int)i - 128 : irand(&seed, -128, 127));
      opt->lut_s8(t, x, y, n);
      char ctx[48];
      snprintf(ctx, sizeof ctx, "n=%zu inplace=%d", n, inplace);
      for (size_t i = 0; i < n; ++i) expect_eq("lut_s8", y[i], t[x0[i] + 128], ctx);
    }
}

/* upsample2: element sizes 1, 2 and 4, rows of 16 to 80 bytes (whole steps and a last
 * overlapping one), the source ending at a guard page; the bytes around d untouched. */
static void test_upsample2(const ert_kernels *opt) {
  if (opt->upsample2 == NULL) return;
  unsigned seed = 33;
  uint8_t *const s_end = (uint8_t *)guarded_s8(80) + 80, *const d = guarded_s8(161);
  for (size_t es = 1; es <= 4; es *= 2)
    for (size_t bytes = 16; bytes <= 80; bytes += es) {
      const size_t n = bytes / es;
      uint8_t *const s = s_end - bytes;
      for (size_t i = 0; i < bytes; ++i) s[i] = (uint8_t)irand(&seed, 0, 255);
      for (size_t i = 0; i <= 2 * bytes; ++i) d[i] = 0x5a;
      opt->upsample2(d, s, n, es);
      char ctx[48];
      snprintf(ctx, sizeof ctx, "es=%zu n=%zu", es, n);
      for (size_t i = 0; i < 2 * bytes; ++i)
        expect_eq("upsample2", d[i], s[i / (2 * es) * es + i % es], ctx);
      expect_eq("upsample2 (past d)", d[2 * bytes], 0x5a, ctx);
    }
}

static void test_quads_s8(const ert_kernels *opt) {
  if (opt->quads_s8 == NULL) return;
  unsigned seed = 22;
  for (int32_t k = 1; k <= 9; ++k)
    for (int32_t n = 1; n <= 40; n += (n < 18 ? 1 : 7))
      for (int32_t pad = 0; pad <= 7; pad += 7) {
        const int32_t np = n + pad;
        const size_t ld = (size_t)n + 5u, kp = (size_t)(k + 3) / 4u * 4u;
        int8_t *src = guarded_s8((size_t)(k - 1) * ld + (size_t)n); /* the last row ends at the page */
        for (size_t i = 0; i < (size_t)(k - 1) * ld + (size_t)n; ++i) src[i] = (int8_t)irand(&seed, -128, 127);
        int8_t *dst = guarded_s8(kp * (size_t)np);
        memset(dst, 0x5a, kp * (size_t)np);
        opt->quads_s8(dst, src, ld, k, n, np);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "k=%d n=%d np=%d", (int)k, (int)n, (int)np);
        for (size_t t = 0; t < kp; ++t)
          for (int32_t i = 0; i < np; ++i)
            expect_eq("quads_s8", dst[(t / 4) * 4 * (size_t)np + 4 * (size_t)i + t % 4],
                      t < (size_t)k && i < n ? src[t * ld + (size_t)i] : 0, ctx);
      }
}

/* taps_s8: strides 1 and 2, k 1..9 and 27 with offsets apart by up to a row, runs of 17
 * to 70; the last tap's run ends at the page. */
static void test_taps_s8(const ert_kernels *opt) {
  if (opt->taps_s8 == NULL) return;
  unsigned seed = 23;
  static const int32_t ks[] = {1, 2, 3, 4, 5, 8, 9, 27};
  for (int32_t s = 1; s <= 2; ++s)
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; ++a)
      for (int32_t n = 17; n <= 70; n += (n < 34 ? 1 : 9)) {
        const int32_t k = ks[a], kq = (k + 3) / 4, np = n + (n % 3) * 8;
        ptrdiff_t off[27];
        for (int32_t t = 0; t < k; ++t) off[t] = t ? off[t - 1] + irand(&seed, 0, 2 * n) : 0;
        const size_t bytes = (size_t)off[k - 1] + (size_t)(n - 1) * (size_t)s + 1u;
        int8_t *src = guarded_s8(bytes);
        for (size_t i = 0; i < bytes; ++i) src[i] = (int8_t)irand(&seed, -128, 127);
        int8_t *dst = guarded_s8((size_t)kq * 4u * (size_t)np);
        memset(dst, 0x5a, (size_t)kq * 4u * (size_t)np);
        opt->taps_s8(dst, (size_t)np * 4u, src, off, k, n, s);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "s=%d k=%d n=%d np=%d", (int)s, (int)k, (int)n, (int)np);
        for (int32_t t = 0; t < 4 * kq; ++t)
          for (int32_t i = 0; i < np; ++i)
            expect_eq("taps_s8", dst[(size_t)(t / 4) * 4u * (size_t)np + 4u * (size_t)i + (size_t)(t % 4)],
                      i >= n ? 0x5a : src[off[t < k ? t : 0] + (ptrdiff_t)i * s], ctx);
      }
}

static void test_pack_w_s8(const ert_kernels *opt) {
  if (opt->pack_w_s8 == NULL) return;
  unsigned seed = 27;
  for (int32_t k = 1; k <= 70; k += (k < 20 ? 1 : 7))
    for (int32_t rows = 1; rows <= 4; ++rows) {
      const size_t ld = (size_t)k + 3u, kq = (size_t)(k + 3) / 4u;
      int8_t *w = guarded_s8((size_t)(rows - 1) * ld + (size_t)k); /* the last row ends at the page */
      for (size_t i = 0; i < (size_t)(rows - 1) * ld + (size_t)k; ++i) w[i] = (int8_t)irand(&seed, -128, 127);
      int8_t *wq = guarded_s8(16u * kq);
      int32_t wsum[4];
      memset(wq, 0x5a, 16u * kq);
      opt->pack_w_s8(wq, wsum, w, ld, rows, k);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "k=%d rows=%d", (int)k, (int)rows);
      for (int32_t r = 0; r < 4; ++r) {
        long long sum = 0;
        for (size_t t = 0; t < 4u * kq; ++t) {
          const int want = r < rows && t < (size_t)k ? w[(size_t)r * ld + t] : 0;
          sum += want;
          expect_eq("pack_w_s8", wq[16u * (t / 4) + 4u * (size_t)r + t % 4], want, ctx);
        }
        expect_eq("pack_w_s8 sum", wsum[r], sum, ctx);
      }
    }
}

static void test_dw_taps_s16(const ert_kernels *opt) {
  if (opt->dw_taps_s16 == NULL) return;
  static const int32_t tapss[] = {9, 25, 4};
  unsigned seed = 23;
  for (size_t ti = 0; ti < 3; ++ti)
    for (int32_t rows = 1; rows <= 3; rows += 2)
      for (int32_t n = 1; n <= 40; ++n) {
        /* taps at scattered offsets of one buffer that ends at the page (the last tap of
         * the last row last); rows rs = n + 2 apart */
        const int32_t taps = tapss[ti];
        const ptrdiff_t rs = n + 2;
        const size_t span = (size_t)taps * (size_t)(n + 3) + (size_t)(rows - 1) * (size_t)rs;
        int16_t *buf = guarded_s8(sizeof(int16_t) * span);
        for (size_t i = 0; i < span; ++i) buf[i] = (int16_t)irand(&seed, -255, 255);
        ptrdiff_t off[25];
        int16_t w[25];
        for (int32_t t = 0; t < taps; ++t) {
          off[t] = (ptrdiff_t)(((size_t)t * 7u) % (size_t)taps) * (n + 3) + (n + 3 - n);
          w[t] = (int16_t)irand(&seed, -128, 127);
        }
        const int32_t bias =
            irand(&seed, -(INT32_MAX - taps * 255 * 128), INT32_MAX - taps * 255 * 128);
        int32_t *acc = guarded_s8(sizeof(int32_t) * (size_t)n * (size_t)rows);
        opt->dw_taps_s16(acc, buf, off, w, n, taps, bias, rows, rs);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "taps=%d n=%d rows=%d", (int)taps, (int)n, (int)rows);
        for (int32_t r = 0; r < rows; ++r)
          for (int32_t i = 0; i < n; ++i) {
            long long want = bias;
            for (int32_t t = 0; t < taps; ++t) want += (long long)w[t] * buf[r * rs + off[t] + i];
            expect_eq("dw_taps_s16", acc[r * n + i], want, ctx);
          }
      }
}

/* dw3_s8: strides 1 and 2, planes 1..40 wide and 1..5 high (rows ld >= the windows'
 * span apart), multipliers and shifts of both requantization forms (31 and above); the input ends
 * where the contract's overread ends, the output at the page. */
static void test_dw3_s8(const ert_kernels *opt) {
  if (opt->dw3_s8 == NULL) return;
  static const int32_t mq[][2] = {{1518500250, 38}, {1518500250, 42}, {12345, 32},
                                  {1 << 30, 31}, {INT32_MAX, 45}, {0, 33}, {INT32_MAX, 62},
                                  {1518500250, 31}, {INT32_MAX, 31}};
  static const int32_t ohs[] = {1, 2, 3, 5};
  unsigned seed = 31;
  for (int32_t s = 1; s <= 2; ++s)
    for (size_t hi_ = 0; hi_ < 4; ++hi_)
      for (int32_t ow = 1; ow <= 40; ++ow) {
        const int32_t oh = ohs[hi_], rows = (oh - 1) * s + 3;
        const ptrdiff_t ld = (ptrdiff_t)(ow - 1) * s + 3 + (ow % 3);
        const size_t last = (size_t)(rows - 1) * (size_t)ld;
        const size_t over = last + (size_t)(ow * s) + 48u;
        const size_t bytes = over > last + (size_t)ld ? over : last + (size_t)ld;
        int8_t *x = guarded_s8(bytes);
        for (size_t i = 0; i < bytes; ++i) x[i] = (int8_t)irand(&seed, -128, 127);
        int8_t w[9];
        for (int t = 0; t < 9; ++t) w[t] = (int8_t)irand(&seed, -127, 127);
        const size_t v = (size_t)(ow * 7 + oh + s) % (sizeof mq / sizeof mq[0]);
        const int32_t zp = irand(&seed, -128, 127), lo = (ow % 2) ? -128 : zp, hi = (ow % 4 == 3) ? zp : 127;
        const int32_t xzp = (ow % 3 == 0) ? 0 : irand(&seed, -128, 127);
        const int32_t q[6] = {mq[v][0], mq[v][1], zp, lo < hi ? lo : hi, lo < hi ? hi : lo, xzp};
        const int32_t span = 2 * 9 * 128 * 127;
        const int32_t bias = (ow % 5 == 0) ? irand(&seed, -(INT32_MAX - span), INT32_MAX - span)
                                           : irand(&seed, -2000, 2000);
        int8_t *y = guarded_s8((size_t)oh * (size_t)ow);
        opt->dw3_s8(y, x, ld, w, bias, q, oh, ow, s);
        char ctx[96];
        snprintf(ctx, sizeof ctx, "s=%d oh=%d ow=%d mult=%d shift=%d xzp=%d", (int)s, (int)oh, (int)ow,
                 (int)q[0], (int)q[1], (int)xzp);
        for (int32_t oy = 0; oy < oh; ++oy)
          for (int32_t ox = 0; ox < ow; ++ox) {
            int64_t a = bias;
            for (int t = 0; t < 9; ++t) a += (int64_t)w[t] * (x[(oy * s + t / 3) * ld + ox * s + t % 3] - xzp);
            expect_eq("dw3_s8", y[oy * ow + ox], ert_clamp_s8(q[2] + ert_requant(a, q[0], q[1]), q[3], q[4]),
                      ctx);
          }
      }
}

/* dwc3_s8: 3x3 and 5x5, strides 1 and 2 in each direction, planes from 4x4 to 40 wide, pads of 0 to 2 on each side,
 * bands of the fewest rows allowed, of half the plane and of the whole plane, both
 * requantization forms; the 16 input planes end at the page (rows under 16 bytes read
 * 16). */
static void test_dwc3_s8(const ert_kernels *opt) {
  if (opt->dwc3_s8 == NULL) return;
  static const int32_t mq[][2] = {{1518500250, 38}, {12345, 32}, {1 << 30, 31}, {INT32_MAX, 45},
                                  {INT32_MAX, 62}, {1518500250, 31}};
  static const int32_t dims[][2] = {{4, 4}, {7, 7}, {14, 14}, {3, 17}, {2, 40}, {20, 5},
                                    {16, 16}, {9, 30}, {8, 8}, {28, 28}, {7, 9}, {5, 33}};
  static const int32_t pads[][4] = {{1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 1, 1}, {2, 1, 0, 2}, {2, 2, 2, 2}};
  unsigned seed = 47;
  int variant = 0;
  for (int32_t kw = 3; kw <= 5; kw += 2)
  for (int32_t s = 1; s <= 2; ++s)
  for (int32_t sy = 1; sy <= 2; ++sy)
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; ++di)
      for (size_t pi = 0; pi < sizeof pads / sizeof pads[0]; ++pi) {
        const int32_t ih = dims[di][0], iw = dims[di][1], pt = pads[pi][0], pl = pads[pi][1];
        if (ih + pt + pads[pi][2] < kw || iw + pl + pads[pi][3] < kw) continue;
        const int32_t oh = (ih + pt + pads[pi][2] - kw) / sy + 1, ow = (iw + pl + pads[pi][3] - kw) / s + 1;
        if (oh * ow < 16) continue;
        const size_t plane = (size_t)ih * (size_t)iw, pout = (size_t)oh * (size_t)ow;
        int8_t *x = guarded_s8(16 * plane);
        for (size_t i = 0; i < 16 * plane; ++i) x[i] = (int8_t)irand(&seed, -128, 127);
        const int32_t kk = kw * kw;
        int8_t *w = guarded_s8(16 * (size_t)kk);
        for (int t = 0; t < 16 * kk; ++t) w[t] = (int8_t)irand(&seed, -127, 127);
        const int32_t rmin = (16 + ow - 1) / ow < oh ? (16 + ow - 1) / ow : oh;
        const int32_t rs[3] = {rmin, (rmin + oh + 1) / 2, oh};
        for (int ri = 0; ri < 3; ++ri, ++variant) {
          const int32_t R = rs[ri];
          const size_t v = (size_t)variant % (sizeof mq / sizeof mq[0]);
          const int32_t zp = irand(&seed, -128, 127), lo = variant % 2 ? -128 : zp, hi = variant % 4 == 3 ? zp : 127;
          const int32_t xzp = variant % 3 == 0 ? 0 : irand(&seed, -128, 127);
          const int32_t g[15] = {ih, iw, oh, ow, s, pt, pl, xzp, zp, lo < hi ? lo : hi, lo < hi ? hi : lo,
                                 mq[v][1], R, kw, sy};
          int32_t qp[32];
          const int32_t span = 2 * kk * 128 * 127;
          for (int c = 0; c < 16; ++c) {
            qp[2 * c] = c % 5 == 0 ? irand(&seed, -(INT32_MAX - span), INT32_MAX - span) : irand(&seed, -2000, 2000);
            qp[2 * c + 1] = c == 7 ? 0 : mq[v][0] - c;
          }
          const size_t cols = (size_t)(ow - 1) * (size_t)s + (size_t)kw;
          int8_t *buf = guarded_s8(16u * ((size_t)(R - 1) * (size_t)sy + (size_t)kw) * cols + 320u + 16u * (size_t)R * (size_t)ow);
          int8_t *y = guarded_s8(16 * pout);
          opt->dwc3_s8(y, pout, x, plane, x + 16 * plane, w, qp, g, buf);
          char ctx[128];
          snprintf(ctx, sizeof ctx, "k=%d s=%d sy=%d ih=%d iw=%d pads=%zu R=%d mult=%d shift=%d xzp=%d", (int)kw, (int)s, (int)sy, (int)ih,
                   (int)iw, pi, (int)R, (int)mq[v][0], (int)mq[v][1], (int)xzp);
          for (int c = 0; c < 16; ++c)
            for (int32_t oy = 0; oy < oh; ++oy)
              for (int32_t ox = 0; ox < ow; ++ox) {
                int64_t a = qp[2 * c];
                for (int t = 0; t < kk; ++t) {
                  const int32_t r = oy * sy + t / kw - pt, k = ox * s + t % kw - pl;
                  const int32_t xv = r >= 0 && r < ih && k >= 0 && k < iw ? x[(size_t)c * plane + (size_t)(r * iw + k)] : xzp;
                  a += (int64_t)w[kk * c + t] * (xv - xzp);
                }
                expect_eq("dwc3_s8", y[(size_t)c * pout + (size_t)(oy * ow + ox)],
                          ert_clamp_s8(g[8] + ert_requant((int32_t)a, qp[2 * c + 1], g[11]), g[9], g[10]), ctx);
              }
        }
      }
}

static void test_widen_s8(const ert_kernels *opt) {
  if (opt->widen_s8 == NULL) return;
  static const int32_t zps[] = {-128, 0, 127};
  static const int32_t pres[] = {0, 1, 2, 9};
  unsigned seed = 24;
  for (int32_t stride = 1; stride <= 3; ++stride)
    for (int32_t n = 0; n <= 40; ++n)
      for (size_t pi = 0; pi < 4; ++pi)
        for (int32_t post = 0; post <= 9; post += 3) {
          /* two rows: rows ss = bytes + 1 apart in s, ds = len + 3 apart in d */
          const int32_t pre = pres[pi], len = pre + n + post, rows = 2;
          const int32_t zp = zps[(size_t)(n + post) % 3u];
          const size_t bytes = n ? (size_t)(n - 1) * (size_t)stride + 1u : 1u;
          const ptrdiff_t ss = (ptrdiff_t)bytes + 1, ds = len + 3;
          int8_t *src = guarded_s8((size_t)ss + bytes);
          for (size_t i = 0; i < (size_t)ss + bytes; ++i) src[i] = (int8_t)irand(&seed, -128, 127);
          int16_t *d = guarded_s8(sizeof(int16_t) * (size_t)(ds + len + 1));
          for (int32_t i = 0; i < ds + len + 1; ++i) d[i] = 0x5a5a;
          opt->widen_s8(d, src, pre, n, len, stride, zp, rows, ds, ss);
          char ctx[80];
          snprintf(ctx, sizeof ctx, "stride=%d pre=%d n=%d len=%d zp=%d", (int)stride, (int)pre,
                   (int)n, (int)len, (int)zp);
          for (int32_t r = 0; r < rows; ++r) {
            for (int32_t i = 0; i < len; ++i)
              expect_eq("widen_s8", d[r * ds + i],
                        i >= pre && i < pre + n
                            ? src[r * ss + (ptrdiff_t)(i - pre) * stride] - zp
                            : 0,
                        ctx);
            for (int32_t i = len; i < ds && r * ds + i < ds + len + 1; ++i)
              expect_eq("widen_s8 (outside)", d[r * ds + i], 0x5a5a, ctx);
          }
        }
}

static void test_gemv_s8(const ert_kernels *opt) {
  if (opt->gemv_s8 == NULL) return;
  /* 4100: sums of b past int16 (all b = -128 there) */
  static const int32_t ks[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 100, 120, 256, 257, 4100};
  static const int32_t zps[] = {-128, 0, 5, 127};
  unsigned seed = 25;
  for (size_t a = 0; a < sizeof ks / sizeof ks[0]; ++a)
    for (int32_t n = 1; n <= 9; n += (n < 9 ? 1 : 0) + (n == 9)) {
      const int32_t k = ks[a], azp = zps[(a + (size_t)n) % 4];
      int8_t *x = guarded_s8((size_t)k), *b = guarded_s8((size_t)k * (size_t)n);
      for (int32_t i = 0; i < k; ++i) x[i] = (int8_t)irand(&seed, -128, 127);
      for (int32_t i = 0; i < k * n; ++i) b[i] = k > 4096 ? -128 : (int8_t)irand(&seed, -128, 127);
      int32_t *acc = guarded_s8(sizeof(int32_t) * (size_t)n);
      opt->gemv_s8(k, n, x, azp, b, acc);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "k=%d n=%d azp=%d", (int)k, (int)n, (int)azp);
      for (int32_t c = 0; c < n; ++c) {
        long long want = 0;
        for (int32_t i = 0; i < k; ++i) want += (long long)(x[i] - azp) * b[c * k + i];
        expect_eq("gemv_s8", acc[c], want, ctx);
      }
    }
}

static void test_requant_row(const ert_kernels *opt) {
  if (opt->requant_row == NULL) return;
  static const int32_t mults[] = {0, 1, 12345, 1 << 30, 1518500250, INT32_MAX};
  static const int32_t shifts[] = {1, 2, 15, 30, 31, 32, 33, 40, 47, 61, 62};
  static const int32_t zps[] = {-128, 0, 127};
  unsigned seed = 26;
  for (size_t a = 0; a < sizeof mults / sizeof mults[0]; ++a)
    for (size_t b = 0; b < sizeof shifts / sizeof shifts[0]; ++b)
      for (size_t z = 0; z < 3; ++z)
        for (int range = 0; range < 2; ++range)
          for (size_t n = 1; n <= 40; n += (n < 16 ? 3 : 7)) {
            const int32_t zp = zps[z], lo = range ? zp : -128, hi = range ? (zp < 120 ? zp + 7 : 127) : 127;
            int32_t *acc = guarded_s8(sizeof(int32_t) * n);
            for (size_t i = 0; i < n; ++i) {
              const int32_t e = 1 << (i % 31);
              acc[i] = (i % 5 == 0) ? (i % 2 ? INT32_MAX : -INT32_MAX)
                       : (i % 5 == 1) ? ((i % 2 ? 1 : -1) * e + (i % 3 == 0 ? 1 : 0))
                                      : irand(&seed, -INT32_MAX, INT32_MAX) >> (i % 24);
            }
            int8_t *y = guarded_s8(n);
            opt->requant_row(acc, n, mults[a], shifts[b], zp, lo, hi, y);
            char ctx[96];
            snprintf(ctx, sizeof ctx, "mult=%d shift=%d zp=%d [%d,%d] n=%zu", (int)mults[a], (int)shifts[b],
                     (int)zp, (int)lo, (int)hi, n);
            for (size_t i = 0; i < n; ++i)
              expect_eq("requant_row", y[i], ert_clamp_s8(zp + ert_requant(acc[i], mults[a], shifts[b]), lo, hi),
                        ctx);
          }
}

/* binary_f32: each op and operand layout (row, scalar A, scalar B, in place) on lengths
 * around the vector width and the 512-element chunks, plain and with an activation; the
 * result must be the IEEE operation (then the reference activation), nothing written
 * past n, and unhandled activations refused with the output untouched. */
static void test_binary(const ert_kernels *opt) {
  if (opt->binary_f32 == NULL) return;
  static const size_t lens[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 511, 512, 513, 1100};
  const ert_act_params acts[] = {{ERT_ACT_NONE, 0, 0}, {ERT_ACT_HARD_SWISH, 0, 0},
                                 {ERT_ACT_CLIP, -0.25f, 0.25f}, {ERT_ACT_SIGMOID, 0, 0}};
  unsigned seed = 13;
  for (int op = ERT_BIN_ADD; op <= ERT_BIN_DIV; ++op)
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; ++t)
      for (int layout = 0; layout < 4; ++layout)
        for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ++ai) {
          const size_t n = lens[t];
          const int sa = layout != 1, sb = layout != 2;
          float *a = guarded(n + 1), *b = guarded(n + 1), *o = guarded(n + 1);
          for (size_t i = 0; i <= n; ++i) {
            a[i] = frand(&seed);
            b[i] = frand(&seed) + 1.5f;
            o[i] = NAN;
          }
          float *out = layout == 3 ? a : o; /* in place over A */
          float want[1200], mag[1200];
          for (size_t i = 0; i < n; ++i) {
            const float x = a[sa ? i : 0], y = b[sb ? i : 0];
            const float v = op == ERT_BIN_ADD ? x + y : op == ERT_BIN_SUB ? x - y
                          : op == ERT_BIN_MUL ? x * y : x / y;
            want[i] = ref_act(&acts[ai], v);
            mag[i] = fabsf(v) + fabsf(want[i]);
          }
          const float keep = out[n];
          const int handled = opt->binary_f32(op, out, a, b, n, sa, sb, ai ? &acts[ai] : NULL);
          char ctx[64];
          snprintf(ctx, sizeof ctx, "op=%d n=%zu layout=%d act=%d", op, n, layout,
                   (int)acts[ai].kind);
          ++checks;
          if (acts[ai].kind == ERT_ACT_SIGMOID ? handled != 0 : (handled == 0 && op != ERT_BIN_DIV)) {
            if (failures++ < 20) fprintf(stderr, "FAIL binary %s: returned %d\n", ctx, handled);
            continue;
          }
          if (!handled) continue;
          for (size_t i = 0; i < n; ++i) expect_close("binary", out[i], want[i], mag[i], ctx);
          ++checks;
          if (memcmp(&keep, &out[n], sizeof keep) != 0 && failures++ < 20)
            fprintf(stderr, "FAIL binary %s: wrote past n\n", ctx);
        }
}

/* softmax_row against a double-precision softmax, in place and not, on lengths around
 * the vector width, with -inf entries and large spreads. */
static void test_softmax(const ert_kernels *opt) {
  if (opt->softmax_row == NULL) return;
  static const size_t lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 40, 101, 1000, 6625};
  unsigned seed = 17;
  static double want[6625];
  for (size_t t = 0; t < sizeof lens / sizeof lens[0]; ++t)
    for (int mode = 0; mode < 3; ++mode) {
      const size_t n = lens[t];
      float *x = guarded(n), *y = guarded(n);
      for (size_t i = 0; i < n; ++i) x[i] = (mode == 2 ? 60.0f : 6.0f) * frand(&seed);
      if (mode == 2 && n > 2) x[n / 2] = -INFINITY;
      double mx = x[0], sum = 0.0;
      for (size_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
      for (size_t i = 0; i < n; ++i) sum += want[i] = exp((double)x[i] - mx);
      float *out = mode == 1 ? x : y;
      opt->softmax_row(x, out, n);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "n=%zu mode=%d", n, mode);
      for (size_t i = 0; i < n; ++i) expect_close("softmax", out[i], want[i] / sum, want[i] / sum + 1e-20, ctx);
    }
}

/* ---- pooling rows: the same operations as the reference, so bit-identical ---- */

static float fold_ref(float t, float v, int op) { return op ? (v > t ? v : t) : t + v; }

static void expect_same(const char *what, float got, float want, const char *ctx) {
  ++checks;
  if (memcmp(&got, &want, sizeof got) == 0) return;
  if (failures++ < 20) fprintf(stderr, "FAIL %s %s: got %.9g want %.9g\n", what, ctx, got, want);
}

/* pool_vred, pool_hred and gpool with NaN, -0 / +0 and infinities among the inputs. */
static void test_pool_f32(const ert_kernels *opt) {
  unsigned seed = 41;
  char ctx[80];
  for (int op = 0; op < 2; ++op) {
    if (opt->pool_vred != NULL)
      for (int32_t rows = 1; rows <= 5; ++rows)
        for (int32_t n = 1; n <= 40; ++n) {
          const ptrdiff_t rs = n + 3;
          float *x = guarded((size_t)((rows - 1) * rs + n)), *t = guarded((size_t)n);
          for (ptrdiff_t i = 0; i < (rows - 1) * rs + n; ++i) {
            const unsigned k = (seed = seed * 1103515245u + 12345u) >> 24;
            x[i] = op && k < 20 ? NAN : k < 40 ? -0.0f : k < 60 ? 0.0f : frand(&seed);
          }
          opt->pool_vred(t, x, rs, rows, n, op);
          snprintf(ctx, sizeof ctx, "op=%d rows=%d n=%d", op, (int)rows, (int)n);
          for (int32_t j = 0; j < n; ++j) {
            float want = x[j];
            for (int32_t r = 1; r < rows; ++r) want = fold_ref(want, x[r * rs + j], op);
            expect_same("pool_vred", t[j], want, ctx);
          }
        }
    if (opt->pool_hred != NULL) {
      static const int32_t shapes[][2] = {{2, 2}, {3, 1}, {3, 2}, {2, 1}, {5, 1}};
      for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
        for (int32_t n = 1; n <= 40; ++n) {
          const int32_t kw = shapes[sh][0], sw = shapes[sh][1], len = (n - 1) * sw + kw;
          float *t = guarded((size_t)len), *y = guarded((size_t)n);
          for (int32_t i = 0; i < len; ++i) {
            const unsigned k = (seed = seed * 1103515245u + 12345u) >> 24;
            t[i] = op && k < 20 ? NAN : k < 40 ? -0.0f : k < 60 ? 0.0f : frand(&seed);
          }
          for (int32_t i = 0; i < n; ++i) y[i] = 7.0f;
          const int done = opt->pool_hred(y, t, n, kw, sw, op);
          snprintf(ctx, sizeof ctx, "op=%d kw=%d sw=%d n=%d", op, (int)kw, (int)sw, (int)n);
          expect_eq("pool_hred handled", done, sh < 3, ctx);
          for (int32_t i = 0; i < n; ++i) {
            const float *p = t + (ptrdiff_t)i * sw;
            float want = op ? (p[0] > p[1] ? p[0] : p[1]) : p[0] + p[1]; /* a > b ? a : b */
            if (kw == 3) want = fold_ref(want, p[2], op);
            expect_same("pool_hred", y[i], done ? want : 7.0f, ctx);
          }
        }
    }
    if (opt->gpool != NULL)
      for (size_t n = 1; n <= 300; n += n < 40 ? 1 : 37) {
        float *x = guarded(n);
        for (size_t i = 0; i < n; ++i) {
          const unsigned k = (seed = seed * 1103515245u + 12345u) >> 24;
          x[i] = op && k < 30 ? NAN : k < 60 ? -0.0f : k < 90 ? 0.0f : op && k < 95 ? -INFINITY : frand(&seed);
        }
        float p[4] = {op ? -INFINITY : 0.0f, op ? -INFINITY : 0.0f, op ? -INFINITY : 0.0f,
                      op ? -INFINITY : 0.0f};
        size_t i = 0;
        for (; i + 4 <= n; ++i) p[i % 4] = fold_ref(p[i % 4], x[i], op);
        for (; i < n; ++i) p[0] = fold_ref(p[0], x[i], op);
        const float want = op ? fold_ref(fold_ref(p[0], p[1], 1), fold_ref(p[2], p[3], 1), 1)
                              : (p[0] + p[1]) + (p[2] + p[3]);
        snprintf(ctx, sizeof ctx, "op=%d n=%zu", op, n);
        expect_same("gpool", opt->gpool(x, n, op), want, ctx);
      }
  }
}

static int32_t round_div_ref(int32_t num, int32_t den) {
  const int32_t q = ((num < 0 ? -num : num) + den / 2) / den;
  return num < 0 ? -q : q;
}

/* gpool_s8 and pool_s8_row (max and average; zero points at the ends, counts up to 64
 * and beyond, rows crossing the 64-output chunks) against their contracts. */
static void test_pool_s8(const ert_kernels *opt) {
  unsigned seed = 43;
  char ctx[96];
  if (opt->gpool_s8 != NULL)
    for (size_t n = 1; n <= 5000; n += n < 40 ? 1 : 331) {
      int8_t *x = guarded_s8(n);
      long long sum = 0, mx = -128;
      for (size_t i = 0; i < n; ++i) {
        x[i] = (int8_t)irand(&seed, n % 3 ? -128 : -100, n % 2 ? 127 : 100);
        sum += x[i];
        mx = x[i] > mx ? x[i] : mx;
      }
      snprintf(ctx, sizeof ctx, "n=%zu", n);
      expect_eq("gpool_s8 sum", opt->gpool_s8(x, n, 0), sum, ctx);
      expect_eq("gpool_s8 max", opt->gpool_s8(x, n, 1), mx, ctx);
    }
  if (opt->pool_s8_row == NULL) return;
  static const int32_t shapes[][2] = {{2, 2}, {3, 1}, {3, 2}, {2, 1}};
  static const int32_t ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 33, 63, 64, 65, 130, 200};
  static const int32_t zps[] = {-128, 0, 127, -5};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
    for (int32_t rows = 1; rows <= 4; rows += rows == 3 ? 17 : 1) /* 1, 2, 3, 20 */
      for (size_t in = 0; in < sizeof ns / sizeof ns[0]; ++in)
        for (int mode = 0; mode < 6; ++mode) {
          const int32_t kw = shapes[sh][0], sw = shapes[sh][1], n = ns[in];
          const int is_avg = mode > 0, zp = zps[mode % 4];
          /* count: the taps, or more (padding counted), or past the kernel's limit */
          const int32_t count = rows * kw + (mode == 2 ? 3 : mode == 5 ? 64 - rows * kw + 1 : 0);
          const int32_t len = (n - 1) * sw + kw;
          const ptrdiff_t rs = len + 5;
          int8_t *x = guarded_s8((size_t)((rows - 1) * rs + len)), *y = guarded_s8((size_t)n);
          for (ptrdiff_t i = 0; i < (rows - 1) * rs + len; ++i) x[i] = (int8_t)irand(&seed, -128, 127);
          memset(y, 0x55, (size_t)n);
          const int done = opt->pool_s8_row(y, x, rs, rows, n, kw, sw, zp, count, is_avg);
          snprintf(ctx, sizeof ctx, "kw=%d sw=%d rows=%d n=%d avg=%d zp=%d count=%d", (int)kw,
                   (int)sw, (int)rows, (int)n, is_avg, (int)zp, (int)count);
          for (int32_t i = 0; i < n; ++i) {
            int32_t best = -128, s = 0;
            for (int32_t r = 0; r < rows; ++r)
              for (int32_t k = 0; k < kw; ++k) {
                const int32_t v = x[r * rs + (ptrdiff_t)i * sw + k];
                best = v > best ? v : best;
                s += v - zp;
              }
            int32_t want = best;
            if (is_avg) {
              want = zp + round_div_ref(s, count);
              want = want < -128 ? -128 : want > 127 ? 127 : want;
            }
            expect_eq("pool_s8_row", y[i], done ? want : 0x55, ctx);
          }
        }
}

/* ---- recurrent ops: rnn_mv, lstm_cell, gru_cell ---- */

static double sigm_d(double x) { return 1.0 / (1.0 + exp(-x)); }

static double clip_d(double x, float clip) {
  return clip > 0.0f ? (x < -clip ? -clip : (x > clip ? clip : x)) : x;
}

/* rnn_mv against a double-precision product: vector counts around the 4-vector tile,
 * columns around the 8/16-column tiles, depths around the 4-step unroll, with and without
 * the added rows (stride 0: one row for all vectors); weights end at an unmapped page. */
static void test_rnn_mv(const ert_kernels *opt) {
  if (opt->rnn_mv == NULL) return;
  static const size_t ks[] = {1, 3, 4, 5, 17, 64}, njs[] = {1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 48};
  static const size_t nvs[] = {1, 2, 3, 4, 5, 9};
  unsigned seed = 29;
  for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ++ik)
    for (size_t ij = 0; ij < sizeof njs / sizeof njs[0]; ++ij)
      for (size_t iv = 0; iv < sizeof nvs / sizeof nvs[0]; ++iv)
        for (int mode = 0; mode < 3; ++mode) {
          const size_t k = ks[ik], nj = njs[ij], nv = nvs[iv], ld = nj + 3, vs = k + 1, os = nj + 2;
          const size_t as = mode == 2 ? 0 : nj + 1;
          float *mt = guarded((k - 1) * ld + nj), *vec = guarded((nv - 1) * vs + k);
          float *add = guarded((nv - 1) * as + nj), *out = guarded(nv * os);
          for (size_t i = 0; i < (k - 1) * ld + nj; ++i) mt[i] = frand(&seed);
          for (size_t i = 0; i < (nv - 1) * vs + k; ++i) vec[i] = frand(&seed);
          for (size_t i = 0; i < (nv - 1) * as + nj; ++i) add[i] = frand(&seed);
          for (size_t i = 0; i < nv * os; ++i) out[i] = NAN;
          const float *a = mode == 0 ? NULL : add;
          opt->rnn_mv(k, nj, mt, ld, vec, vs, nv, a, as, out, os);
          char ctx[80];
          snprintf(ctx, sizeof ctx, "k=%zu nj=%zu nv=%zu mode=%d", k, nj, nv, mode);
          for (size_t v = 0; v < nv; ++v) {
            for (size_t j = 0; j < nj; ++j) {
              double want = a ? a[v * as + j] : 0.0, mag = fabs(want);
              for (size_t i = 0; i < k; ++i) {
                want += (double)vec[v * vs + i] * mt[i * ld + j];
                mag += fabs((double)vec[v * vs + i] * mt[i * ld + j]);
              }
              expect_close("rnn_mv", out[v * os + j], want, mag, ctx);
            }
            ++checks;
            if (v + 1 < nv && !(isnan(out[v * os + nj]) && isnan(out[v * os + nj + 1])) &&
                failures++ < 20)
              fprintf(stderr, "FAIL rnn_mv %s: wrote between rows\n", ctx);
          }
          unguard(mt, (k - 1) * ld + nj), unguard(vec, (nv - 1) * vs + k);
          unguard(add, (nv - 1) * as + nj), unguard(out, nv * os);
        }
}

/* rnn_panels against a double-precision product: panel counts around the kernels' groups
 * (4 on aarch64 NEON and AVX-512, 2 on armv7), depths around their k steps, with and
 * without the added values, out in place of add; the panels end at an unmapped page. */
static void test_rnn_panels(const ert_kernels *opt) {
  if (opt->rnn_panels == NULL) return;
  static const size_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 17, 64}, nps[] = {1, 2, 3, 4, 5, 7, 9};
  unsigned seed = 43;
  for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ++ik)
    for (size_t ip = 0; ip < sizeof nps / sizeof nps[0]; ++ip)
      for (int mode = 0; mode < 3; ++mode) {
        const size_t k = ks[ik], np = nps[ip], nw = np * k * 16, no = np * 16;
        float *w = guarded(nw), *vec = guarded(k), *add = guarded(no), *out = guarded(no);
        for (size_t i = 0; i < nw; ++i) w[i] = frand(&seed);
        for (size_t i = 0; i < k; ++i) vec[i] = frand(&seed);
        for (size_t i = 0; i < no; ++i) add[i] = frand(&seed), out[i] = mode == 2 ? add[i] : NAN;
        double want[9 * 16], mag[9 * 16];
        for (size_t q = 0; q < np; ++q)
          for (size_t j = 0; j < 16; ++j) {
            double v = mode ? add[q * 16 + j] : 0.0, m = fabs(v);
            for (size_t i = 0; i < k; ++i) {
              v += (double)vec[i] * w[(q * k + i) * 16 + j];
              m += fabs((double)vec[i] * w[(q * k + i) * 16 + j]);
            }
            want[q * 16 + j] = v, mag[q * 16 + j] = m;
          }
        opt->rnn_panels(k, np, w, vec, mode == 0 ? NULL : mode == 1 ? add : out, out);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "k=%zu np=%zu mode=%d", k, np, mode);
        for (size_t j = 0; j < no; ++j) expect_close("rnn_panels", out[j], want[j], mag[j], ctx);
        unguard(w, nw), unguard(vec, k), unguard(add, no), unguard(out, no);
      }
}

/* crc32: the portable CRC (run with the reference table) on the check string, then the
 * optimized entry against it on every length up to 100 at every alignment mod 8. */
static void test_crc32(const ert_kernels *opt) {
  const ert_kernels keep = ert_cpu;
  ert_cpu = (ert_kernels){.isa = "ref"};
  ++checks;
  if (ert_crc32(0, "123456789", 9) != 0xCBF43926u && failures++ < 20)
    fprintf(stderr, "FAIL crc32: portable check value\n");
  uint8_t buf[128];
  unsigned seed = 37;
  for (size_t i = 0; i < sizeof buf; ++i) buf[i] = (uint8_t)(frand(&seed) * 97.0f);
  uint32_t want[8][101];
  for (int a = 0; a < 8; ++a)
    for (size_t n = 0; n <= 100; ++n) want[a][n] = ert_crc32(0x12345678u, buf + a, n);
  ert_cpu = keep;
  if (opt->crc32 == NULL) return;
  for (int a = 0; a < 8; ++a)
    for (size_t n = 0; n <= 100; ++n) {
      ++checks;
      if (opt->crc32(0x12345678u, buf + a, n) != want[a][n] && failures++ < 20)
        fprintf(stderr, "FAIL crc32: offset %d length %zu\n", a, n);
    }
}

/* dot_rows against double-precision sums: k around the 4-float step, rows around the
 * 4-row step, a row pitch past k; out is guarded and must hold exactly n values. */
static void test_dot_rows(const ert_kernels *opt) {
  if (opt->dot_rows == NULL) return;
  static const int32_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 63, 387};
  unsigned seed = 31;
  for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ++ik)
    for (int32_t n = 1; n <= 11; ++n) {
      const int32_t k = ks[ik];
      const ptrdiff_t ld = k + (n % 3);
      const size_t rlen = (size_t)((n - 1) * ld + k);
      float *x = guarded((size_t)k), *r = guarded(rlen), *out = guarded((size_t)n);
      for (int32_t i = 0; i < k; ++i) x[i] = frand(&seed);
      for (size_t i = 0; i < rlen; ++i) r[i] = frand(&seed);
      opt->dot_rows(x, r, ld, k, n, out);
      char ctx[48];
      snprintf(ctx, sizeof ctx, "k=%d n=%d", (int)k, (int)n);
      for (int32_t j = 0; j < n; ++j) {
        double want = 0.0, mag = 0.0;
        for (int32_t i = 0; i < k; ++i) {
          want += (double)x[i] * r[j * ld + i];
          mag += fabs((double)x[i] * r[j * ld + i]);
        }
        expect_close("dot_rows", out[j], want, mag, ctx);
      }
      unguard(x, (size_t)k), unguard(r, rlen), unguard(out, (size_t)n);
    }
}

/* |got - want| <= tol (absolute), NaN only where want is NaN. */
static double gate_err_max = 0.0, act_err_max = 0.0;
static void expect_abs(const char *what, float got, double want, double tol, const char *ctx) {
  ++checks;
  if (isnan(want) ? isnan(got) : fabs(got - want) <= tol) {
    if (!isnan(want) && fabs(got - want) > gate_err_max) gate_err_max = fabs(got - want);
    return;
  }
  if (failures++ < 20) fprintf(stderr, "FAIL %s %s: got %.9g want %.9g\n", what, ctx, got, want);
}

/* act_apply's sigmoid, tanh and silu over [-20, 20] (and values around 87, where exp
 * leaves the normal range) against double precision: 5e-7 absolute (silu: 5e-7 max(1,
 * |x|)), tanh also 1e-5 relative below 1/4. NaN and infinities are in test_act. */
static double exp_act_err_max = 0.0;
static void test_act_sweep(const ert_kernels *opt) {
  if (opt->act_apply == NULL) return;
  enum { NS = 4099 };
  static float x[NS], y[NS];
  static const int32_t kinds[] = {ERT_ACT_SIGMOID, ERT_ACT_TANH, ERT_ACT_SILU};
  for (size_t t = 0; t < 3; ++t) {
    for (int j = 0; j < NS; ++j)
      x[j] = y[j] = j < NS - 8 ? -20.0f + 40.0f * (float)j / (NS - 9)
                              : (float[]){-88.0f, -87.0f, 87.0f, 88.0f, 1e-6f, -1e-6f, 1e-30f, -0.0f}[j - (NS - 8)];
    const ert_act_params act = {kinds[t], 0.0f, 0.0f};
    if (!opt->act_apply(&act, y, NS)) continue;
    for (int j = 0; j < NS; ++j) {
      const double v = x[j];
      const double want = t == 0 ? sigm_d(v) : t == 1 ? tanh(v) : v * sigm_d(v);
      const double scale = t == 2 && fabs(v) > 1.0 ? fabs(v) : 1.0;
      ++checks;
      const double err = fabs(y[j] - want);
      if (err / scale > exp_act_err_max && fabs(v) <= 20.0) exp_act_err_max = err / scale;
      if (!(err <= 5e-7 * scale) && failures++ < 20)
        fprintf(stderr, "FAIL act sweep kind=%d x=%.9g: got %.9g want %.9g\n", (int)kinds[t], v, y[j], want);
      if (t == 1 && fabs(v) < 0.25 && v != 0.0) expect_close("act tanh (relative)", y[j], want, fabs(want), "small");
    }
  }
}

/* lstm_cell: sigmoid and tanh alone over [-20, 20] (c = 0 and a saturated partner gate
 * make c' one of them exactly), NaN and infinities, then every option (peepholes, clip)
 * on lengths around the vector width against double precision. */
static void test_lstm_cell(const ert_kernels *opt) {
  if (opt->lstm_cell == NULL) return;
  enum { NS = 4096 };
  static float g[4 * NS], c[NS], h[NS];
  for (int fn = 0; fn < 2; ++fn) {
    for (int j = 0; j < NS; ++j) {
      const float x = j < NS - 4 ? -20.0f + 40.0f * (float)j / (NS - 5) : (float[]){NAN, INFINITY, -INFINITY, 1e-6f}[j - (NS - 4)];
      g[j] = fn == 0 ? x : 30.0f;          /* i */
      g[NS + j] = 0.0f;                    /* o */
      g[2 * NS + j] = 0.0f;                /* f (c = 0) */
      g[3 * NS + j] = fn == 0 ? 30.0f : x; /* c: c' = i tanh(gc) */
      c[j] = 0.0f;
    }
    opt->lstm_cell(g, c, h, NS, NULL, 0.0f);
    for (int j = 0; j < NS; ++j) {
      const double x = fn == 0 ? g[j] : g[3 * NS + j];
      const double want = fn == 0 ? sigm_d(x) : tanh(x);
      expect_abs(fn == 0 ? "sigmoid" : "tanh", c[j], want, 5e-7, "sweep");
      if (fn == 1 && fabs(x) < 0.25 && x != 0.0) expect_close("tanh (relative)", c[j], want, fabs(want), "small");
    }
  }
  act_err_max = gate_err_max;
  static const size_t lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 130};
  unsigned seed = 31;
  for (size_t t = 0; t < sizeof lens / sizeof lens[0]; ++t)
    for (int mode = 0; mode < 4; ++mode) {
      const size_t n = lens[t];
      const int peep = mode & 1;
      const float clip = mode & 2 ? 1.5f : 0.0f;
      float *gg = guarded(4 * n), *cc = guarded(n), *hh = guarded(n), *pp = guarded(3 * n);
      for (size_t j = 0; j < 4 * n; ++j) gg[j] = 6.0f * frand(&seed);
      for (size_t j = 0; j < n; ++j) cc[j] = 3.0f * frand(&seed);
      for (size_t j = 0; j < 3 * n; ++j) pp[j] = frand(&seed);
      double wc[130], wh[130];
      for (size_t j = 0; j < n; ++j) {
        const double cp = cc[j];
        const double i = sigm_d(clip_d(gg[j] + (peep ? (double)pp[j] * cp : 0.0), clip));
        const double f = sigm_d(clip_d(gg[2 * n + j] + (peep ? (double)pp[2 * n + j] * cp : 0.0), clip));
        wc[j] = f * cp + i * tanh(clip_d(gg[3 * n + j], clip));
        const double o = sigm_d(clip_d(gg[n + j] + (peep ? (double)pp[n + j] * wc[j] : 0.0), clip));
        wh[j] = o * tanh(wc[j]);
      }
      opt->lstm_cell(gg, cc, hh, n, peep ? pp : NULL, clip);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "n=%zu peep=%d clip=%g", n, peep, (double)clip);
      for (size_t j = 0; j < n; ++j) {
        expect_abs("lstm c", cc[j], wc[j], 4e-6, ctx);
        expect_abs("lstm h", hh[j], wh[j], 4e-6, ctx);
      }
      unguard(gg, 4 * n), unguard(cc, n), unguard(hh, n), unguard(pp, 3 * n);
    }
}

/* gru_cell: both phases, with and without x, rb and rh, clip, lengths around the vector
 * width, against double precision. */
static void test_gru_cell(const ert_kernels *opt) {
  if (opt->gru_cell == NULL) return;
  static const size_t lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 130};
  unsigned seed = 37;
  for (size_t t = 0; t < sizeof lens / sizeof lens[0]; ++t)
    for (int mode = 0; mode < 8; ++mode) {
      const size_t n = lens[t];
      const int hx = mode & 1, hrb = (mode >> 1) & 1;
      const float clip = mode & 4 ? 2.0f : 0.0f;
      float *g = guarded(3 * n), *x = guarded(3 * n), *rb = guarded(n), *h = guarded(n), *rh = guarded(n);
      float *g2 = guarded(3 * n), *h2 = guarded(n), *rh2 = guarded(n);
      for (size_t j = 0; j < 3 * n; ++j) g[j] = 6.0f * frand(&seed), x[j] = 3.0f * frand(&seed);
      for (size_t j = 0; j < n; ++j) rb[j] = frand(&seed), h[j] = frand(&seed);
      memcpy(g2, g, 3 * n * sizeof(float));
      memcpy(h2, h, n * sizeof(float));
      double wg[390], wrh[130], wh[130];
      for (size_t j = 0; j < 2 * n; ++j) wg[j] = sigm_d(clip_d(g[j] + (hx ? (double)x[j] : 0.0), clip));
      for (size_t j = 0; j < n; ++j) {
        wrh[j] = wg[n + j] * h[j];
        const double r = wg[n + j], z = wg[j];
        const double pre = hx ? x[2 * n + j] + r * (g[2 * n + j] + (hrb ? (double)rb[j] : 0.0)) : g[2 * n + j];
        wh[j] = (1.0 - z) * tanh(clip_d(pre, clip)) + z * h[j];
      }
      char ctx[64];
      snprintf(ctx, sizeof ctx, "n=%zu x=%d rb=%d clip=%g", n, hx, hrb, (double)clip);
      /* phase 2 (both phases, unit by unit) against the exact gates and state */
      opt->gru_cell(2, g2, hx ? x : NULL, hrb ? rb : NULL, h2, hrb ? rh2 : NULL, n, clip);
      for (size_t j = 0; j < 2 * n; ++j) expect_abs("gru2 gates", g2[j], wg[j], 1e-6, ctx);
      for (size_t j = 0; j < n && hrb; ++j) expect_abs("gru2 r*h", rh2[j], wrh[j], 2e-6, ctx);
      for (size_t j = 0; j < n; ++j) expect_abs("gru2 h", h2[j], wh[j], 8e-6, ctx);
      unguard(g2, 3 * n), unguard(h2, n), unguard(rh2, n);
      opt->gru_cell(0, g, hx ? x : NULL, NULL, h, hrb ? rh : NULL, n, clip);
      for (size_t j = 0; j < 2 * n; ++j) expect_abs("gru gates", g[j], wg[j], 1e-6, ctx);
      for (size_t j = 0; j < n && hrb; ++j) expect_abs("gru r*h", rh[j], wrh[j], 2e-6, ctx);
      for (size_t j = 0; j < 2 * n; ++j) g[j] = (float)wg[j]; /* phase 1 from exact gates */
      for (size_t j = 0; j < n; ++j) {
        const double r = g[n + j], z = g[j];
        const double pre = hx ? x[2 * n + j] + r * (g[2 * n + j] + (hrb ? (double)rb[j] : 0.0)) : g[2 * n + j];
        wh[j] = (1.0 - z) * tanh(clip_d(pre, clip)) + z * h[j];
      }
      opt->gru_cell(1, g, hx ? x : NULL, hrb ? rb : NULL, h, NULL, n, clip);
      for (size_t j = 0; j < n; ++j) expect_abs("gru h", h[j], wh[j], 4e-6, ctx);
      unguard(g, 3 * n), unguard(x, 3 * n), unguard(rb, n), unguard(h, n), unguard(rh, n);
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
                      const float *bias, float *c, void *scratch, int variant) {
  mat_ctx q = {a, b, bias, c};
  ert_sgemm g;
  g.bpanels = 0;
#if defined(ERT_X86_KERNELS)
  g.bias_cols = g.rows_first = g.by_rows = 0;
  g.res = NULL;
#endif
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
  /* variants: 1 alpha and hard_swish, 2 accumulate and relu, 3 sigmoid (not inline) */
  static const ert_act_params hswish = {ERT_ACT_HARD_SWISH, 0, 0}, relu = {ERT_ACT_RELU, 0, 0},
                              sigm = {ERT_ACT_SIGMOID, 0, 0};
  if (variant == 1) g.alpha = 0.75f, g.act = &hswish;
  if (variant == 2) g.accumulate = 1, g.act = &relu;
  if (variant == 3) g.act = &sigm;
  g.batch = 1;
  g.locate = locate;
  g.ctx = &q;
  ert_sgemm_run(&g, scratch, NULL);
}

static void test_sgemm_driver_on(const ert_kernels *opt, const int32_t *ms, size_t nms,
                                 const int32_t *ns, size_t nns, const int32_t *ks, size_t nks) {
  unsigned seed = 3;
  for (size_t im = 0; im < nms; ++im)
    for (size_t in = 0; in < nns; ++in)
      for (size_t ik = 0; ik < nks; ++ik)
        for (int mode = 0; mode < 5; ++mode) {
          const int a_t = mode == 1, variant = mode < 2 ? 0 : mode - 1;
          if (variant && (ik % 2 == 0 || im % 2 == 0)) continue; /* a subset suffices */
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
          for (int32_t i = 0; i < m * n; ++i) c0[i] = c1[i] = frand(&seed);
          ert_cpu = (ert_kernels){.isa = "ref"};
          run_sgemm(m, n, k, a_t, a, b, bias, c0, scratch, variant);
          ert_cpu = *opt;
          run_sgemm(m, n, k, a_t, a, b, bias, c1, scratch, variant);
          char ctx[80];
          snprintf(ctx, sizeof ctx, "m=%d n=%d k=%d a_t=%d variant=%d", (int)m, (int)n, (int)k,
                   a_t, variant);
          for (int32_t i = 0; i < m * n; ++i) expect_close("sgemm", c1[i], c0[i], (double)k + 1.0, ctx);
          free(a), free(b), free(bias), free(c0), free(c1), free(scratch);
        }
}

static void test_sgemm_driver(const ert_kernels *opt) {
  if (opt->sgemm_rows == NULL) return;
  static const int32_t ms[] = {2, 3, 4, 5, 6, 7, 8, 12, 17, 32, 64, 65};
  static const int32_t ns[] = {2, 15, 16, 17, 20, 33, 49, 128, 129};
  static const int32_t ks[] = {1, 3, 16, 255, 256, 257};
  test_sgemm_driver_on(opt, ms, sizeof ms / sizeof ms[0], ns, sizeof ns / sizeof ns[0], ks,
                       sizeof ks / sizeof ks[0]);
#if defined(ERT_X86_KERNELS)
  if (opt->sgemm_block != NULL) { /* depth blocks past 256 in one pass (A, B in place) */
    static const int32_t dm[] = {5, 16, 40}, dn[] = {3, 17, 49, 130}, dk[] = {300, 1024, 1100};
    test_sgemm_driver_on(opt, dm, 3, dn, 4, dk, 3);
  }
#endif
}

#if defined(ERT_X86_KERNELS)
/* sgemm_block against its contract: row counts around the 12-row tile, column counts
 * around the 16- and 32-column tiles and the dot-product tail, depths around 16 and past 256; B's
 * rows in place (ending at an inaccessible page right after column n of the last row) or
 * packed panels; A's last row and C's last row end at inaccessible pages too; every store
 * mode; C's columns past n must stay untouched. */
static void test_sgemm_block(const ert_kernels *opt) {
  if (opt->sgemm_block == NULL) return;
  static const int32_t ms[] = {1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 16, 17, 24, 25, 33};
  static const int32_t ns[] = {1, 2, 3, 4, 5, 8, 15, 16, 17, 20, 31, 33, 49};
  static const int32_t kcs[] = {1, 5, 16, 17, 24, 160, 300};
  const ert_act_params acts[] = {{ERT_ACT_HARD_SWISH, 0, 0}, {ERT_ACT_RELU, 0, 0},
                                 {ERT_ACT_CLIP, -0.5f, 0.5f}, {ERT_ACT_HARD_SIGMOID, 0.2f, 0.5f},
                                 {ERT_ACT_LEAKY_RELU, 0.1f, 0}};
  unsigned seed = 11;
  int idx = 0;
  for (size_t im = 0; im < sizeof ms / sizeof ms[0]; ++im)
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; ++in)
      for (size_t ik = 0; ik < sizeof kcs / sizeof kcs[0]; ++ik)
        for (int packed = 0; packed < 2; ++packed, ++idx) {
          const int32_t m = ms[im], n = ns[in], kc = kcs[ik];
          const int mode = idx % 8;
          const ptrdiff_t lda = kc + (m % 2), ldc = n + 3;
          const int32_t np = (n + 15) / 16;
          const ptrdiff_t ldb = packed ? 16 : n + (kc % 3), ps = packed ? 16 * (ptrdiff_t)kc : 16;
          const size_t na = (size_t)((m - 1) * lda + kc), nc = (size_t)((m - 1) * ldc + n);
          const size_t nb = packed ? (size_t)(np * 16 * kc) : (size_t)((kc - 1) * ldb + n);
          float *a = guarded(na), *b = guarded(nb), *c = guarded(nc);
          const size_t nbias = (size_t)(m > n ? m : n);
          float *c0 = malloc(sizeof(float) * nc), *bias = malloc(sizeof(float) * nbias);
          float *res = guarded(nc);
          for (size_t i = 0; i < nc; ++i) res[i] = frand(&seed);
          for (size_t i = 0; i < na; ++i) a[i] = frand(&seed);
          for (size_t i = 0; i < nb; ++i) b[i] = frand(&seed);
          for (size_t i = 0; i < nbias; ++i) bias[i] = frand(&seed);
          for (size_t i = 0; i < nc; ++i) c[i] = c0[i] = mode == 0 ? NAN : frand(&seed);
          ert_sgemm_store st = {.ldc = ldc, .alpha = 1.0f, .init = 1};
          if (mode >= 2) {
            st.init = mode % 3 != 0;
            st.bias = mode % 2 ? bias : NULL;
            st.alpha = mode >= 4 ? 0.5f : 1.0f;
            st.act = &acts[(mode + (int)ik) % 5];
            st.bias_cols = (idx / 8) % 2; /* bias[j] per column (NHWC) */
            st.res = (idx / 16) % 2 ? res : NULL; /* an Add after the layer */
          }
          opt->sgemm_block(m, n, kc, a, lda, b, ldb, ps, c, &st);
          char ctx[96];
          snprintf(ctx, sizeof ctx, "m=%d n=%d kc=%d packed=%d mode=%d cols=%d res=%d", (int)m,
                   (int)n, (int)kc, packed, mode, st.bias_cols, st.res != NULL);
          for (int32_t i = 0; i < m; ++i) {
            for (int32_t j = 0; j < n; ++j) {
              double r = 0.0, scale = 0.0;
              for (int32_t k = 0; k < kc; ++k) {
                const double p = (double)a[i * lda + k] * b[(j / 16) * ps + k * ldb + j % 16];
                r += p;
                scale += fabs(p);
              }
              const double base = st.init ? (st.bias ? st.bias[st.bias_cols ? j : i] : 0.0)
                                          : c0[i * ldc + j];
              const double rv = st.res ? st.res[i * ldc + j] : 0.0;
              const float want = ref_act(st.act, (float)(st.alpha * r + base + rv));
              expect_close("sgemm_block", c[i * ldc + j], want,
                           2.0 * (fabs(st.alpha) * scale + fabs(base) + fabs(rv)), ctx);
            }
            for (int32_t j = n; j < ldc && i < m - 1; ++j) {
              ++checks;
              if (memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)) != 0 && failures++ < 20)
                fprintf(stderr, "FAIL sgemm_block %s: wrote column %d\n", ctx, (int)j);
            }
          }
          unguard(a, na), unguard(b, nb), unguard(c, nc), unguard(res, nc);
          free(c0), free(bias);
        }
}

/* pack_at: blocks of 1 to 40 rows by 1 to 40 depths (around the 16x16 blocks), read from a
 * transposed matrix with a longer row step; exact. */
static void test_pack_at(const ert_kernels *opt) {
  if (opt->pack_at == NULL) return;
  unsigned seed = 13;
  for (int32_t m = 1; m <= 40; m += 3)
    for (int32_t kc = 1; kc <= 40; kc += 3) {
      const ptrdiff_t ld = m + 5;
      const size_t ns = (size_t)((kc - 1) * ld + m), nd = (size_t)m * (size_t)kc;
      float *src = guarded(ns), *dst = guarded(nd);
      for (size_t i = 0; i < ns; ++i) src[i] = frand(&seed);
      opt->pack_at(dst, src, ld, m, kc);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "m=%d kc=%d", (int)m, (int)kc);
      for (int32_t i = 0; i < m; ++i)
        for (int32_t k = 0; k < kc; ++k) expect_same("pack_at", dst[i * kc + k], src[k * ld + i], ctx);
      unguard(src, ns), unguard(dst, nd);
    }
}

/* dw3_nhwc: strides (sh, sw) in {1, 2}^2, top padding 0 to 2, images 1 to 5 rows high and
 * 1 to 20 outputs wide with zero or one column of padding right, 1 to 40 channels, with
 * and without a clamp and a bias, every output pixel range [p0, p1) of a few; against the
 * sum over the taps inside the image, and bit for bit against dw3 per channel where dw3
 * takes the plane (its narrow kernel: rows of 5 to 16 outputs). Pixels outside [p0, p1)
 * must stay untouched; x ends at an inaccessible page. */
static void test_dw3_nhwc(const ert_kernels *opt) {
  if (opt->dw3_nhwc == NULL) return;
  static const int32_t cs[] = {1, 5, 16, 17, 40};
  unsigned seed = 17;
  for (int32_t sh = 1; sh <= 2; ++sh)
    for (int32_t sw = 1; sw <= 2; ++sw)
      for (int32_t pt = 0; pt <= 2; ++pt)
        for (int32_t h = 1; h <= 5; h += 2)
          for (int32_t ow = 1; ow <= 20; ow += (ow < 8 ? 1 : 4))
            for (int32_t pr = 0; pr <= 1; ++pr)
              for (size_t ic = 0; ic < sizeof cs / sizeof cs[0]; ++ic) {
                const int32_t c = cs[ic], w = (ow - 1) * sw + 2 - pr, pb = (int32_t)ic % 3;
                if (h + pt + pb < 3 || w < 1) continue;
                const int32_t oh = (h + pt + pb - 3) / sh + 1, px = oh * ow;
                const size_t nx = (size_t)h * w * c, ny = (size_t)px * c;
                float *x = guarded(nx), *y = guarded(ny), *kt = malloc(sizeof(float) * 9 * (size_t)c);
                float *bias = malloc(sizeof(float) * (size_t)c);
                for (size_t i = 0; i < nx; ++i) x[i] = frand(&seed);
                for (int32_t i = 0; i < 9 * c; ++i) kt[i] = frand(&seed);
                for (int32_t i = 0; i < c; ++i) bias[i] = frand(&seed);
                const int clamp = (ow + h + c) % 2, with_bias = (ow + c) % 3 != 0;
                const ert_dw3_geom g = {h, w, oh, ow, sh, sw, pt, clamp ? -0.5f : -INFINITY,
                                        clamp ? 0.5f : INFINITY};
                const int32_t p0 = px > 3 ? px / 3 : 0, p1 = px > 3 ? px - px / 4 : px;
                for (size_t i = 0; i < ny; ++i) y[i] = NAN;
                opt->dw3_nhwc(y, x, kt, with_bias ? bias : NULL, &g, c, p0, p1);
                char ctx[112];
                snprintf(ctx, sizeof ctx, "s=%dx%d pt=%d h=%d w=%d ow=%d c=%d p=%d..%d", (int)sh,
                         (int)sw, (int)pt, (int)h, (int)w, (int)ow, (int)c, (int)p0, (int)p1);
                /* dw3's planes for the bit-exact comparison */
                const int narrow = opt->dw3 != NULL && ow >= 5 && w <= 16;
                float *xp = malloc(sizeof(float) * (size_t)h * w), *yp = malloc(sizeof(float) * (size_t)px);
                float *zero = calloc((size_t)w, sizeof(float)), k9[9];
                for (int32_t ch = 0; ch < c; ++ch) {
                  if (narrow) {
                    for (int32_t i = 0; i < h * w; ++i) xp[i] = x[(size_t)i * c + ch];
                    for (int t = 0; t < 9; ++t) k9[t] = kt[t * c + ch];
                    opt->dw3(yp, xp, zero, k9, with_bias ? bias[ch] : 0.0f, &g);
                  }
                  for (int32_t p = 0; p < px; ++p) {
                    const float got = y[(size_t)p * c + ch];
                    if (p < p0 || p >= p1) {
                      ++checks;
                      if (!isnan(got) && failures++ < 20)
                        fprintf(stderr, "FAIL dw3_nhwc %s: wrote pixel %d\n", ctx, (int)p);
                      continue;
                    }
                    const int32_t oy = p / ow, ox = p % ow;
                    double want = with_bias ? bias[ch] : 0.0, scale = fabs(want);
                    for (int ky = 0; ky < 3; ++ky)
                      for (int kx = 0; kx < 3; ++kx) {
                        const int32_t r = oy * sh - pt + ky, q = ox * sw - 1 + kx;
                        if (r < 0 || r >= h || q < 0 || q >= w) continue;
                        const double v = (double)kt[(3 * ky + kx) * c + ch] * x[((size_t)r * w + q) * c + ch];
                        want += v;
                        scale += fabs(v);
                      }
                    if (want < g.lo) want = g.lo;
                    if (want > g.hi) want = g.hi;
                    expect_close("dw3_nhwc", got, want, scale, ctx);
                    if (narrow) expect_same("dw3_nhwc = dw3", got, yp[p], ctx);
                  }
                }
                free(xp), free(yp), free(zero), free(kt), free(bias);
                unguard(x, nx), unguard(y, ny);
              }
}
#endif

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
  test_sgemm_rows(opt.sgemm_rows, 4, 16, "sgemm_rows");
  test_sgemm_rows(opt.sgemm_rows6, 6, 16, "sgemm_rows6");
  test_sgemm_rows(opt.sgemm_rows6_n8, 6, 8, "sgemm_rows6_n8");
  test_sgemm_rows_b(NULL, opt.sgemm_rows_ld, 4, 16, "sgemm_rows_ld");
  test_sgemm_rows_b(NULL, opt.sgemm_rows6_ld, 6, 16, "sgemm_rows6_ld");
#if defined(__aarch64__) && defined(ERT_NEON_KERNELS)
  rows6_fn = opt.sgemm_rows6;
  test_sgemm_rows_b(NULL, rows6_fn ? rows6_as_ld : NULL, 6, 16, "sgemm_rows6 in place");
  test_sgemm_taps(rows6_fn);
#endif
  test_dw(opt.dw3_s1, 3, 1, "dw3_s1");
  test_dw(opt.dw3_s2, 3, 2, "dw3_s2");
  test_dw3(&opt);
#if defined(ERT_X86_KERNELS)
  test_conv3(&opt, 2);
  test_conv3(&opt, 1);
#endif
  test_dw(opt.dw5_s1, 5, 1, "dw5_s1");
  test_dw(opt.dw5_s2, 5, 2, "dw5_s2");
  test_dw_direct(&opt);
  test_sgemm_driver(&opt);
#if defined(ERT_X86_KERNELS)
  test_sgemm_block(&opt);
  test_pack_at(&opt);
  test_dw3_nhwc(&opt);
  if (opt.sgemm_block != NULL) { /* the AVX2 ones as well (CPUs without AVX-512) */
    ert_kernels avx2 = opt;
    avx2.sgemm_block = NULL;
    avx2.dot_rows = ert_dot_rows_f32__avx2;
    avx2.dw3 = ert_conv2d_dw3_f32__avx2;
    test_sgemm_driver(&avx2);
    test_dot_rows(&avx2);
    test_dw3(&avx2);
  }
#endif
  test_act(&opt);
  test_binary(&opt);
  test_softmax(&opt);
  test_rnn_mv(&opt);
  test_rnn_panels(&opt);
  test_dot_rows(&opt);
  test_crc32(&opt);
  test_act_sweep(&opt);
  if (opt.act_apply) printf("act_apply: sigmoid/tanh/silu max abs error %.3g (silu: / max(1, |x|))\n", exp_act_err_max);
  test_lstm_cell(&opt);
  test_gru_cell(&opt);
  if (opt.lstm_cell)
    printf("rnn gates: sigmoid/tanh max abs error %.3g, gates %.3g\n", act_err_max, gate_err_max);
  test_pool_f32(&opt);
  ert_cpu = opt;
  test_qgemm_s8(&opt);
  test_quads_s8(&opt);
  test_taps_s8(&opt);
  test_pack_w_s8(&opt);
  test_dw_taps_s16(&opt);
  test_dw3_s8(&opt);
  test_dwc3_s8(&opt);
  test_qgemm_rq_s8(&opt);
#if defined(ERT_X86_KERNELS) && defined(__x86_64__)
  if (opt.qgemm_rq_s8 == ert_qgemm_rq_s8__vnni) { /* the AVX2 ones as well (CPUs without VNNI) */
    ert_kernels avx2 = opt;
    avx2.qgemm_rq_s8 = ert_qgemm_rq_s8__avx2;
    avx2.dw3_s8 = ert_dw3_s8__avx2;
    test_qgemm_rq_s8(&avx2);
    test_dw3_s8(&avx2);
  }
#endif
  test_widen_s8(&opt);
  test_gemv_s8(&opt);
  test_requant_row(&opt);
  test_binary_s8(&opt);
  test_lut_s8(&opt);
  test_upsample2(&opt);
  test_quantize_s8(&opt);
  test_dequantize_s8(&opt);
  test_pool_s8(&opt);
#if defined(ERT_NEON_KERNELS) && defined(__aarch64__)
  printf("int8 dot products: %s\n", opt.qgemm_s8 == ert_qgemm_s8__dot && opt.gemv_s8 == ert_gemv_s8__dot
                                          ? "sdot" : "no sdot");
#endif
#if defined(ERT_X86_KERNELS) && defined(__x86_64__)
  if (opt.qgemm_rq_s8 != NULL)
    printf("int8 convolution tile: %s\n", opt.qgemm_rq_s8 == ert_qgemm_rq_s8__vnni ? "avx512-vnni" : "avx2");
#endif
  printf("%d checks, %d failures\n", checks, failures);
  if (expect != NULL && strcmp(expect, opt.isa) != 0) {
    fprintf(stderr, "FAIL expected kernels %s, selected %s\n", expect, opt.isa);
    return 1;
  }
  return failures ? 1 : 0;
}
