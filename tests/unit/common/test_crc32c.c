#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/crc32c.h"

Suite *crc32c_suite(void);

/* Check values from RFC 3720 (iSCSI), appendix B.4. */
START_TEST(known_vectors)
{
    uint8_t buf[32];

    ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xE3069283u);
    memset(buf, 0, sizeof buf);
    ck_assert_uint_eq(crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof buf);
    ck_assert_uint_eq(crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) {
        buf[i] = (uint8_t)i;
    }
    ck_assert_uint_eq(crc32c(0, buf, 32), 0x46DD794Eu);
    ck_assert_uint_eq(crc32c_sw(0, buf, 32), 0x46DD794Eu);
}
END_TEST

START_TEST(hardware_matches_table_and_chains)
{
    uint8_t buf[1000];
    uint32_t x = 12345;

    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    for (size_t len = 0; len <= sizeof buf; len += 7) {
        uint32_t whole = crc32c(0, buf, len);
        ck_assert_uint_eq(whole, crc32c_sw(0, buf, len));
        /* Continuing a CRC over a split gives the same value. */
        ck_assert_uint_eq(whole, crc32c(crc32c(0, buf, len / 3), buf + len / 3,
                                        len - len / 3));
    }
}
END_TEST

Suite *crc32c_suite(void)
{
    Suite *s = suite_create("crc32c");
    TCase *tc = tcase_create("values");

    tcase_add_test(tc, known_vectors);
    tcase_add_test(tc, hardware_matches_table_and_chains);
    suite_add_tcase(s, tc);
    return s;
}
