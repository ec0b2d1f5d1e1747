/* test_addr: IPv4 "IP:PORT" under each port rule (src/common/addr.c). */
#include <check.h>
#include <string.h>

#include <arpa/inet.h>

#include "common/addr.h"

Suite *addr_suite(void);

static const enum addr_port all_rules[] = {
    ADDR_PORT_DIGITS,
    ADDR_PORT_CANONICAL,
    ADDR_PORT_ZEROS,
    ADDR_PORT_STRTOUL,
};

static bool ok(const char *s, enum addr_port rule)
{
    return addr_parse_ipv4(s, rule, NULL);
}

START_TEST(parses_the_address)
{
    struct sockaddr_in sa;

    memset(&sa, 0xAB, sizeof sa);
    ck_assert(addr_parse_ipv4("127.0.0.1:7101", ADDR_PORT_DIGITS, &sa));
    ck_assert_int_eq(sa.sin_family, AF_INET);
    ck_assert_uint_eq(ntohs(sa.sin_port), 7101);
    ck_assert_uint_eq(ntohl(sa.sin_addr.s_addr), 0x7F000001u);
    /* The rest of the struct is zeroed, not left as it was. */
    for (size_t i = 0; i < sizeof sa.sin_zero; i++) {
        ck_assert_uint_eq((unsigned char)sa.sin_zero[i], 0);
    }
    /* A refusal leaves *out alone. */
    memset(&sa, 0xAB, sizeof sa);
    ck_assert(!addr_parse_ipv4("127.0.0.1:0", ADDR_PORT_DIGITS, &sa));
    ck_assert_uint_eq(((unsigned char *)&sa)[0], 0xAB);
}
END_TEST

/* What every rule refuses or accepts alike: the IP part, the colon, the
 * port's range. */
START_TEST(rules_agree)
{
    for (size_t i = 0; i < sizeof all_rules / sizeof all_rules[0]; i++) {
        enum addr_port r = all_rules[i];

        ck_assert(ok("0.0.0.0:1", r));
        ck_assert(ok("255.255.255.255:65535", r));
        ck_assert(ok("10.1.2.3:80", r));
        /* Port bounds. */
        ck_assert(!ok("127.0.0.1:0", r));
        ck_assert(!ok("127.0.0.1:65536", r));
        ck_assert(!ok("127.0.0.1:99999", r));
        ck_assert(!ok("127.0.0.1:4294967297", r));
        ck_assert(!ok("127.0.0.1:-1", r));
        /* Missing parts. */
        ck_assert(!ok(NULL, r));
        ck_assert(!ok("", r));
        ck_assert(!ok("127.0.0.1", r));
        ck_assert(!ok("127.0.0.1:", r));
        ck_assert(!ok(":7101", r));
        ck_assert(!ok(":", r));
        /* The IP is a dotted-quad literal, as inet_pton takes it. */
        ck_assert(!ok("localhost:7101", r));
        ck_assert(!ok("256.0.0.1:7101", r));
        ck_assert(!ok("127.0.0:7101", r));
        ck_assert(!ok("127.0.0.1.1:7101", r));
        ck_assert(!ok("127.000.0.1:7101", r));
        ck_assert(!ok("01.2.3.4:7101", r));
        ck_assert(!ok(" 127.0.0.1:7101", r));
        ck_assert(!ok("127.0.0.1 :7101", r));
        ck_assert(!ok("[::1]:7101", r));
        ck_assert(!ok("::1:7101", r));
        /* The IP ends at the last colon: one too many is refused. */
        ck_assert(!ok("127.0.0.1:71:01", r));
        ck_assert(!ok("127.0.0.1::7101", r));
        /* Too long: an IP past 15 characters never parses. */
        ck_assert(!ok("127.000000000.0.1:7101", r));
        ck_assert(!ok("1111111111111111111111111111111111111111:1", r));
        /* Nothing after the port. */
        ck_assert(!ok("127.0.0.1:7101 ", r));
        ck_assert(!ok("127.0.0.1:7101x", r));
        ck_assert(!ok("127.0.0.1:0x50", r));
        ck_assert(!ok("127.0.0.1:71.0", r));
    }
}
END_TEST

START_TEST(rule_digits)
{
    ck_assert(ok("127.0.0.1:65535", ADDR_PORT_DIGITS));
    ck_assert(ok("127.0.0.1:1", ADDR_PORT_DIGITS));
    /* Leading zeros inside five characters. */
    ck_assert(ok("127.0.0.1:07101", ADDR_PORT_DIGITS));
    ck_assert(ok("127.0.0.1:00080", ADDR_PORT_DIGITS));
    /* Six characters, whatever their value. */
    ck_assert(!ok("127.0.0.1:007101", ADDR_PORT_DIGITS));
    ck_assert(!ok("127.0.0.1:000080", ADDR_PORT_DIGITS));
    ck_assert(!ok("127.0.0.1:00000", ADDR_PORT_DIGITS));
    /* Digits only. */
    ck_assert(!ok("127.0.0.1: 7101", ADDR_PORT_DIGITS));
    ck_assert(!ok("127.0.0.1:+7101", ADDR_PORT_DIGITS));
}
END_TEST

START_TEST(rule_canonical)
{
    ck_assert(ok("127.0.0.1:65535", ADDR_PORT_CANONICAL));
    ck_assert(ok("127.0.0.1:1", ADDR_PORT_CANONICAL));
    ck_assert(ok("127.0.0.1:10", ADDR_PORT_CANONICAL));
    /* One spelling: no leading zero at all. */
    ck_assert(!ok("127.0.0.1:07101", ADDR_PORT_CANONICAL));
    ck_assert(!ok("127.0.0.1:01", ADDR_PORT_CANONICAL));
    ck_assert(!ok("127.0.0.1:0", ADDR_PORT_CANONICAL));
    ck_assert(!ok("127.0.0.1:123456", ADDR_PORT_CANONICAL));
    ck_assert(!ok("127.0.0.1: 7101", ADDR_PORT_CANONICAL));
    ck_assert(!ok("127.0.0.1:+7101", ADDR_PORT_CANONICAL));
}
END_TEST

START_TEST(rule_zeros)
{
    ck_assert(ok("127.0.0.1:65535", ADDR_PORT_ZEROS));
    /* Any number of leading zeros. */
    ck_assert(ok("127.0.0.1:07101", ADDR_PORT_ZEROS));
    ck_assert(ok("127.0.0.1:0000007101", ADDR_PORT_ZEROS));
    ck_assert(ok("127.0.0.1:000000000000000000000000001", ADDR_PORT_ZEROS));
    ck_assert(!ok("127.0.0.1:0000065536", ADDR_PORT_ZEROS));
    ck_assert(!ok("127.0.0.1:000000", ADDR_PORT_ZEROS));
    /* Digits only. */
    ck_assert(!ok("127.0.0.1: 7101", ADDR_PORT_ZEROS));
    ck_assert(!ok("127.0.0.1:+7101", ADDR_PORT_ZEROS));
}
END_TEST

START_TEST(rule_strtoul)
{
    struct sockaddr_in sa;

    ck_assert(ok("127.0.0.1:65535", ADDR_PORT_STRTOUL));
    ck_assert(ok("127.0.0.1:0000007101", ADDR_PORT_STRTOUL));
    /* What strtoul reads: leading white space, a plus sign. */
    ck_assert(addr_parse_ipv4("127.0.0.1: 7101", ADDR_PORT_STRTOUL, &sa));
    ck_assert_uint_eq(ntohs(sa.sin_port), 7101);
    ck_assert(addr_parse_ipv4("127.0.0.1:+80", ADDR_PORT_STRTOUL, &sa));
    ck_assert_uint_eq(ntohs(sa.sin_port), 80);
    ck_assert(ok("127.0.0.1:\t80", ADDR_PORT_STRTOUL));
    /* Not white space alone, nor a sign alone, nor one after the number. */
    ck_assert(!ok("127.0.0.1: ", ADDR_PORT_STRTOUL));
    ck_assert(!ok("127.0.0.1:+", ADDR_PORT_STRTOUL));
    ck_assert(!ok("127.0.0.1:80 ", ADDR_PORT_STRTOUL));
    ck_assert(!ok("127.0.0.1:-0", ADDR_PORT_STRTOUL));
    /* Past unsigned long: ERANGE. */
    ck_assert(!ok("127.0.0.1:99999999999999999999999", ADDR_PORT_STRTOUL));
}
END_TEST

Suite *addr_suite(void)
{
    Suite *s = suite_create("addr");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, parses_the_address);
    tcase_add_test(tc, rules_agree);
    tcase_add_test(tc, rule_digits);
    tcase_add_test(tc, rule_canonical);
    tcase_add_test(tc, rule_zeros);
    tcase_add_test(tc, rule_strtoul);
    suite_add_tcase(s, tc);
    return s;
}
