/* crc32_arm.c: CRC-32 (zlib polynomial) by the ARMv8 CRC instructions (aarch64), contract
 * in src/cpu.h (crc32). */
#include <stdint.h>
#include <string.h>

#include "cpu.h"

#if defined(__aarch64__)
#include <arm_acle.h>

__attribute__((target("arch=armv8-a+crc"))) uint32_t ert_crc32__arm(uint32_t crc, const void *data,
                                                                     size_t size) {
  const uint8_t *p = (const uint8_t *)data;
  crc = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t v;
    memcpy(&v, p, sizeof v); /* aarch64 Linux is little-endian: the bytes in order */
    crc = __crc32d(crc, v);
  }
  for (; size > 0; size--, p++) crc = __crc32b(crc, *p);
  return ~crc;
}
#endif
