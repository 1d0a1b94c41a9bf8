/* cpu.c: start-up selection of the hot micro-kernels (see cpu.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getauxval */
#endif
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && (defined(__aarch64__) || defined(__arm__))
#include <sys/auxv.h>
#define ERT_HAVE_AUXV 1
#endif

/* Bits of AT_HWCAP (Linux uapi asm/hwcap.h), spelled out so that old headers work. */
#if defined(__aarch64__)
#define ERT_HWCAP_NEON (1ul << 1)      /* HWCAP_ASIMD */
#define ERT_HWCAP_DOTPROD (1ul << 20)  /* HWCAP_ASIMDDP */
#define ERT_HWCAP_CRC32 (1ul << 7)     /* HWCAP_CRC32 */
#elif defined(__arm__)
#define ERT_HWCAP_NEON (1ul << 12)     /* HWCAP_NEON */
#define ERT_HWCAP_DOTPROD 0ul
#endif

#if defined(ERT_X86_KERNELS) && defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define ERT_HAVE_X86 1

/* AVX2 and FMA usable: the CPU has them (CPUID leaves 1 and 7) and the OS saves the xmm
 * and ymm state (OSXSAVE, then XCR0 bits 1 and 2). */
static int x86_avx2_fma(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!(c & bit_FMA) || !(c & bit_AVX) || !(c & bit_OSXSAVE)) return 0;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  (void)xhi;
  if ((xlo & 6u) != 6u) return 0;
  if (__get_cpuid_max(0, NULL) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  return (b & bit_AVX2) != 0;
}

/* AVX512F usable (CPUID leaf 7), the OS saving the opmask and zmm state too (XCR0 bits
 * 5 to 7): the 512-bit SGEMM block. Called only after x86_avx2_fma. */
static int x86_avx512f(void) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, NULL) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  if ((b & (1u << 16)) == 0) return 0;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  (void)xhi;
  return (xlo & 0xE6u) == 0xE6u;
}

/* AVX512F, AVX512VL and AVX512_VNNI usable (CPUID leaf 7), the OS saving the opmask and
 * zmm state too (XCR0 bits 5 to 7): the 256-bit vpdpbusd of the int8 kernels. Called
 * only after x86_avx2_fma (which checked OSXSAVE, so XGETBV exists). */
static int x86_avx512_vnni(void) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, NULL) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  if ((b & (1u << 16)) == 0 || (b & (1u << 31)) == 0 || (c & (1u << 11)) == 0) return 0;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  (void)xhi;
  return (xlo & 0xE6u) == 0xE6u;
}
#endif

ert_kernels ert_cpu = {.isa = "ref"};

static int force_ref(void) {
  const char *v = getenv("EDGERT_FORCE_REF");
  return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

void ert_cpu_select(void) {
  ert_kernels k = {.isa = "ref"};
#if defined(ERT_NEON_KERNELS) && defined(ERT_HAVE_AUXV)
  const unsigned long hw = getauxval(AT_HWCAP);
  if (!force_ref() && (hw & ERT_HWCAP_NEON)) {
    k.isa = (ERT_HWCAP_DOTPROD != 0 && (hw & ERT_HWCAP_DOTPROD)) ? "neon+dotprod" : "neon";
    k.sgemm_rows = ert_sgemm_rows_f32__neon;
#if defined(__aarch64__)
    k.sgemm_rows6 = ert_sgemm_rows6_f32__neon;
#endif
    k.dw3 = ert_conv2d_dw3_f32__neon;
    k.dw5_s1 = ert_conv2d_dw5s1_f32__neon;
    k.dw5_s2 = ert_conv2d_dw5s2_f32__neon;
    k.act_apply = ert_act_apply_f32__neon;
    k.binary_f32 = ert_binary_f32__neon;
    k.softmax_row = ert_softmax_row_f32__neon;
    k.rnn_mv = ert_rnn_mv_f32__neon;
    k.rnn_panels = ert_rnn_panels_f32__neon;
    k.dot_rows = ert_dot_rows_f32__neon;
    k.lstm_cell = ert_lstm_cell_f32__neon;
    k.gru_cell = ert_gru_cell_f32__neon;
    k.pool_vred = ert_pool_vred_f32__neon;
    k.pool_hred = ert_pool_hred_f32__neon;
    k.gpool = ert_gpool_f32__neon;
    k.gpool_s8 = ert_gpool_s8__neon;
    k.pool_s8_row = ert_pool_s8_row__neon;
    /* int8 kernels */
    k.qgemm_s8 = ert_qgemm_s8__neon;
    k.pack_w_s8 = ert_pack_w_s8__neon;
    k.quads_s8 = ert_quads_s8__neon;
    k.dw_taps_s16 = ert_dw_taps_s16__neon;
    k.widen_s8 = ert_widen_s8__neon;
    k.gemv_s8 = ert_gemv_s8__neon;
    k.requant_row = ert_requant_row__neon;
    k.qgemm_s8_p = ert_qgemm_s8_p__neon;
#if !defined(__aarch64__)
    k.dw3_s8 = ert_dw3_s8__neon;
#endif
    k.taps_s8 = ert_taps_s8__neon;
    k.binary_s8 = ert_binary_s8__neon;
    k.upsample2 = ert_upsample2__neon;
    k.dequantize_s8 = ert_dequantize_s8__neon;
#if defined(__aarch64__)
    if (hw & ERT_HWCAP_CRC32) k.crc32 = ert_crc32__arm;
    k.lut_s8 = ert_lut_s8__neon;
    k.quantize_s8 = ert_quantize_s8__neon;
    k.qgemm_rq_s8 = ert_qgemm_rq_s8__neon;
    k.dwc3_s8 = ert_dwc3_s8__neon;
#endif
    if (ERT_HWCAP_DOTPROD != 0 && (hw & ERT_HWCAP_DOTPROD)) {
      /* dot-product (sdot) int8 kernels */
#if defined(__aarch64__)
      k.qgemm_s8 = ert_qgemm_s8__dot;
      k.gemv_s8 = ert_gemv_s8__dot;
      k.qgemm_rq_s8 = ert_qgemm_rq_s8__dot;
      k.qgemm_s8_p = NULL; /* sdot does four products per lane */
#endif
    }
  }
#elif defined(ERT_HAVE_X86)
  if (!force_ref() && x86_avx2_fma()) {
    k.isa = "avx2";
    k.sgemm_rows = ert_sgemm_rows_f32__avx2;
    k.sgemm_rows6 = ert_sgemm_rows6_f32__avx2;
    k.sgemm_rows6_n8 = ert_sgemm_rows6_n8_f32__avx2;
    k.sgemm_rows_ld = ert_sgemm_rows_ld_f32__avx2;
    k.sgemm_rows6_ld = ert_sgemm_rows6_ld_f32__avx2;
    k.dot_rows = ert_dot_rows_f32__avx2;
    k.dw3_s1 = ert_conv2d_dw3s1_f32__avx2;
    k.dw3_s2 = ert_conv2d_dw3s2_f32__avx2;
    k.dw5_s1 = ert_conv2d_dw5s1_f32__avx2;
    k.dw5_s2 = ert_conv2d_dw5s2_f32__avx2;
    k.dw_direct = ert_conv2d_dw_direct_f32__avx2;
    k.dw3 = ert_conv2d_dw3_f32__avx2;
    k.conv3s2 = ert_conv2d_3x3s2_f32__avx2;
    /* int8: the convolution's products with madd (exact) */
    k.pack_w_s8 = ert_pack_w_s8__avx2;
    k.quads_s8 = ert_quads_s8__avx2;
    k.qgemm_s8 = ert_qgemm_s8__avx2;
    k.requant_row = ert_requant_row__avx2;
    k.dw_taps_s16 = ert_dw_taps_s16__avx2;
    /* int8 with the requantization in registers */
    k.qgemm_rq_s8 = ert_qgemm_rq_s8__avx2;
    k.dw3_s8 = ert_dw3_s8__avx2;
    k.taps_s8 = ert_taps_s8__avx2;
    k.quantize_s8 = ert_quantize_s8__avx2;
    if (x86_avx512f()) { /* 16 x 16 tiles; dot products sixteen rows at a time */
      k.isa = "avx2+avx512f";
      k.sgemm_block = ert_sgemm_block_f32__avx512;
      k.dot_rows = ert_dot_rows_f32__avx512;
      k.dw3 = ert_conv2d_dw3_f32__avx512; /* images of 16 columns or fewer; wider: AVX2 */
      k.dw3_nhwc = ert_conv2d_dw3_nhwc_f32__avx512; /* NHWC layers (src/layout.c) */
      k.pack_at = ert_pack_at_f32__avx512;
      k.conv3s1 = ert_conv2d_3x3s1_f32__avx512; /* 3x3 stride 1 without im2col */
      k.conv3s2 = ert_conv2d_3x3s2_f32__avx512; /* the stem: 32 outputs per step */
      k.act_apply = ert_act_apply_f32__avx512; /* sigmoid, tanh, silu; the reference the rest */
      /* the recurrent ops' panel products and gates */
      k.rnn_panels = ert_rnn_panels_f32__avx512;
      k.lstm_cell = ert_lstm_cell_f32__avx512;
      k.gru_cell = ert_gru_cell_f32__avx512;
    }
    if (x86_avx512_vnni()) { /* four products per 32-bit lane */
      k.isa = "avx2+avx512f+vnni";
      k.qgemm_rq_s8 = ert_qgemm_rq_s8__vnni;
      k.dw3_s8 = ert_dw3_s8__vnni;
    }
  }
#else
  (void)force_ref;
#endif
  ert_cpu = k;
}

#if defined(__GNUC__)
__attribute__((constructor)) static void select_at_load(void) { ert_cpu_select(); }
#endif
