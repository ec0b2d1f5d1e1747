/* test_text: durations, integers, ids and hex (src/common/text.c). */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/text.h"

Suite *text_suite(void);

START_TEST(durations)
{
    uint64_t v = 7;

    ck_assert(text_parse_duration_ms("250ms", UINT64_MAX, &v));
    ck_assert_uint_eq(v, 250);
    ck_assert(text_parse_duration_ms("5s", UINT64_MAX, &v));
    ck_assert_uint_eq(v, 5000);
    ck_assert(text_parse_duration_ms("10m", UINT64_MAX, &v));
    ck_assert_uint_eq(v, 600000);
    ck_assert(text_parse_duration_ms("24h", UINT64_MAX, &v));
    ck_assert_uint_eq(v, 86400000);
    ck_assert(text_parse_duration_ms("0s", UINT64_MAX, &v));
    ck_assert_uint_eq(v, 0);
    /* The unit is required and whole; no sign, space or fraction. */
    v = 7;
    ck_assert(!text_parse_duration_ms("5", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("s", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("-5s", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("5 s", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("1.5s", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("5sec", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("5d", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms(NULL, UINT64_MAX, &v));
    ck_assert_uint_eq(v, 7);
    /* Bounds: the limit is in ms, whatever the unit. */
    ck_assert(text_parse_duration_ms("3600s", 3600000, &v));
    ck_assert(!text_parse_duration_ms("3601s", 3600000, &v));
    ck_assert(!text_parse_duration_ms("2h", 3600000, &v));
    ck_assert(!text_parse_duration_ms("99999999999999999999h", UINT64_MAX, &v));
    ck_assert(!text_parse_duration_ms("5124095576030432h", UINT64_MAX, &v));
}
END_TEST

START_TEST(integers)
{
    uint64_t v = 7;

    ck_assert(text_parse_u64("0", 10, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert(text_parse_u64("18446744073709551615", UINT64_MAX, &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert(!text_parse_u64("18446744073709551616", UINT64_MAX, &v));
    ck_assert(!text_parse_u64("11", 10, &v));
    ck_assert(text_parse_u64("10", 10, &v));
    ck_assert(!text_parse_u64("", 10, &v));
    ck_assert(!text_parse_u64("+1", 10, &v));
    ck_assert(!text_parse_u64("1x", 10, &v));
}
END_TEST

START_TEST(ids)
{
    uint64_t v = 7;
    char buf[17];

    ck_assert(text_parse_id("1", &v));
    ck_assert_uint_eq(v, 1);
    ck_assert(text_parse_id("0xDEADbeef", &v));
    ck_assert_uint_eq(v, 0xdeadbeef);
    ck_assert(text_parse_id("ffffffffffffffff", &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    v = 7;
    ck_assert(!text_parse_id("0", &v));
    ck_assert(!text_parse_id("0000", &v));
    ck_assert(!text_parse_id("", &v));
    ck_assert(!text_parse_id("0x", &v));
    ck_assert(!text_parse_id("1ffffffffffffffff", &v));
    ck_assert(!text_parse_id("12g", &v));
    ck_assert_uint_eq(v, 7);
    ck_assert_str_eq(text_format_id(0xabc, buf), "0000000000000abc");
    ck_assert(text_parse_id(text_format_id(UINT64_MAX - 1, buf), &v));
    ck_assert_uint_eq(v, UINT64_MAX - 1);
}
END_TEST

START_TEST(hex)
{
    uint8_t b[4] = {0};
    uint8_t in[3] = {0x00, 0xab, 0xff};
    char buf[7];
    size_t n = 9;

    ck_assert(text_parse_hex("00aBff", b, 3));
    ck_assert(memcmp(b, in, 3) == 0);
    ck_assert(!text_parse_hex("00abf", b, 3));
    ck_assert(!text_parse_hex("00abff00", b, 3));
    ck_assert(!text_parse_hex("00abfg", b, 3));
    ck_assert_str_eq(text_format_hex(in, 3, buf), "00abff");
    ck_assert(text_parse_hex_var("", b, 4, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert(text_parse_hex_var("0102", b, 4, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert(!text_parse_hex_var("0102030405", b, 4, &n));
    ck_assert(!text_parse_hex_var("010", b, 4, &n));
}
END_TEST

/* JSON string escaping: quotes, backslashes, control and non-ASCII bytes;
 * truncation only between characters; NULL is empty. */
START_TEST(json_escape)
{
    char buf[64];

    ck_assert_uint_eq(text_json_escape("a\"b\\c", buf, sizeof buf), 7);
    ck_assert_str_eq(buf, "a\\\"b\\\\c");
    ck_assert_uint_eq(text_json_escape("x\ny\x7f", buf, sizeof buf), 14);
    ck_assert_str_eq(buf, "x\\u000ay\\u007f");
    ck_assert_uint_eq(text_json_escape(NULL, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "");
    /* 8 bytes of room: "ab" fits, the escape of \n (6) would not. */
    ck_assert_uint_eq(text_json_escape("ab\ncd", buf, 8), 2);
    ck_assert_str_eq(buf, "ab");
    ck_assert_uint_eq(text_json_escape("abcdefgh", buf, 1), 0);
    ck_assert_str_eq(buf, "");
}
END_TEST

Suite *text_suite(void)
{
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("parse");

    tcase_add_test(tc, durations);
    tcase_add_test(tc, integers);
    tcase_add_test(tc, ids);
    tcase_add_test(tc, hex);
    tcase_add_test(tc, json_escape);
    suite_add_tcase(s, tc);
    return s;
}
