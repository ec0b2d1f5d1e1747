#include "common/crc32c.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t table[8][256];
static bool table_ready;

static void make_table(void)
{
    /* Reflected polynomial 0x1EDC6F41 -> 0x82F63B78. Slicing-by-8 tables. */
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            table[t][i] =
                (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
        }
    }
    table_ready = true;
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    if (!table_ready) {
        make_table(); /* idempotent: racing threads write equal values */
    }
    crc = ~crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
              table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
              table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len-- > 0) {
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    }
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc,
                                                            const void *buf,
                                                            size_t len)
{
    const unsigned char *p = buf;
    uint64_t c = ~crc;

    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    while (len-- > 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
    }
    return ~(uint32_t)c;
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) {
        return crc32c_hw(crc, buf, len);
    }
#endif
    return crc32c_sw(crc, buf, len);
}
