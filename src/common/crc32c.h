/* common/crc32c.h: CRC-32C (Castagnoli), used to checksum snapshots and, later,
 * log records. SSE4.2 instruction when the CPU has it, a table otherwise;
 * both give the same values (tests compare them). Thread-safe. */
#ifndef ONCE_COMMON_CRC32C_H_
#define ONCE_COMMON_CRC32C_H_

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: start with crc = 0. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable table implementation (exposed for tests). */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif /* ONCE_COMMON_CRC32C_H_ */
