/* resize.c (NEON): nearest upsampling by 2 along a row, contract in src/cpu.h
 * (upsample2). */
#include <arm_neon.h>

#include "cpu.h"

/* 16 bytes from s, each element of es bytes twice in a row: 32 bytes to d (st2 of the
 * same vector twice interleaves each lane with its copy). */
static inline void up16(uint8_t *d, const uint8_t *s, size_t es) {
  const uint8x16_t v = vld1q_u8(s);
  if (es == 1) {
    const uint8x16x2_t t = {{v, v}};
    vst2q_u8(d, t);
  } else if (es == 2) {
    const uint16x8_t h = vreinterpretq_u16_u8(v);
    const uint16x8x2_t t = {{h, h}};
    vst2q_u16((uint16_t *)(void *)d, t);
  } else {
    const uint32x4_t w = vreinterpretq_u32_u8(v);
    const uint32x4x2_t t = {{w, w}};
    vst2q_u32((uint32_t *)(void *)d, t);
  }
}

/* 16 bytes a step, the last step ending at the row's end (rewriting some: the same bytes;
 * 16 is a multiple of es). */
void ert_upsample2__neon(void *dst, const void *src, size_t n, size_t es) {
  uint8_t *d = (uint8_t *)dst;
  const uint8_t *s = (const uint8_t *)src;
  const size_t bytes = n * es;
  for (size_t i = 0;; i += 16) {
    if (i + 16 > bytes) i = bytes - 16;
    up16(d + 2 * i, s + i, es);
    if (i + 16 >= bytes) break;
  }
}
