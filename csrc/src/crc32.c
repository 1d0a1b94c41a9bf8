/* crc32.c: CRC-32 (zlib polynomial) of the model file's checked bytes.
 *
 * Eight bytes per step through eight tables built on the stack (8 KB, ~20 thousand
 * instructions per call; nothing static, so concurrent loads share no state), or the
 * CPU's CRC instructions when cpu.h has them (ert_cpu.crc32: aarch64). The byte-at-a-time
 * form took ~8 instructions per byte, which for a 6 MB model was most of a load. */
#include <string.h>

#include "cpu.h"
#include "runtime.h"

uint32_t ert_crc32(uint32_t crc, const void *data, size_t size) {
  if (ert_cpu.crc32 != NULL) return ert_cpu.crc32(crc, data, size);
  uint32_t t[8][256];
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int k = 1; k < 8; k++) t[k][i] = t[0][t[k - 1][i] & 0xFFu] ^ (t[k - 1][i] >> 8);
  const uint8_t *p = (const uint8_t *)data;
  crc = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    /* little-endian words of the bytes, whatever the host's order */
    const uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                               (uint32_t)p[3] << 24);
    const uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                        (uint32_t)p[7] << 24;
    crc = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
          t[3][hi & 0xFFu] ^ t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
  }
  for (; size > 0; size--, p++) crc = t[0][(crc ^ *p) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}
