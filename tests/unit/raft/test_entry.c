#include <check.h>
#include <stdint.h>
#include <string.h>

#include "raft/entry.h"

Suite *entry_suite(void);

/* _i is the batch length: every length wraps to a multiple of 8 and back. */
START_TEST(roundtrip_every_length)
{
    uint8_t batch[80];
    struct raft_buffer b;
    const uint8_t *got;
    size_t got_len;

    for (size_t i = 0; i < sizeof batch; i++) {
        batch[i] = (uint8_t)(i * 31 + 7);
    }
    ck_assert_int_eq(entry_wrap(batch, (size_t)_i, &b), 0);
    ck_assert_uint_eq(b.len % 8, 0);
    ck_assert_uint_eq(b.len, entry_size((size_t)_i));
    ck_assert_uint_ge(b.len, ENTRY_HDR_SIZE + (size_t)_i);
    ck_assert_int_eq(entry_unwrap(b.base, b.len, &got, &got_len), 0);
    ck_assert_uint_eq(got_len, (size_t)_i);
    ck_assert_mem_eq(got, batch, (size_t)_i);
    raft_free(b.base);
}
END_TEST

START_TEST(malformed_refused)
{
    uint8_t batch[13] = "hello, world";
    struct raft_buffer b;
    const uint8_t *got;
    size_t got_len;
    uint8_t *p;

    ck_assert_int_eq(entry_wrap(batch, sizeof batch, &b), 0);
    p = b.base;
    /* Every shorter length, and a length that is not a multiple of 8. */
    for (size_t len = 0; len < b.len; len++) {
        ck_assert_int_eq(entry_unwrap(p, len, &got, &got_len),
                         ENTRY_E_MALFORMED);
    }
    /* Wrong magic. */
    p[0] ^= 1;
    ck_assert_int_eq(entry_unwrap(p, b.len, &got, &got_len), ENTRY_E_MALFORMED);
    p[0] ^= 1;
    /* A length that disagrees with the buffer. */
    p[4] = 20;
    ck_assert_int_eq(entry_unwrap(p, b.len, &got, &got_len), ENTRY_E_MALFORMED);
    p[4] = 3;
    ck_assert_int_eq(entry_unwrap(p, b.len, &got, &got_len), ENTRY_E_MALFORMED);
    p[4] = sizeof batch;
    /* Padding that is not zero. */
    p[b.len - 1] = 1;
    ck_assert_int_eq(entry_unwrap(p, b.len, &got, &got_len), ENTRY_E_MALFORMED);
    p[b.len - 1] = 0;
    ck_assert_int_eq(entry_unwrap(p, b.len, &got, &got_len), 0);
    raft_free(b.base);
}
END_TEST

START_TEST(too_big_refused)
{
    static uint8_t big[(1u << 20) + 1];
    struct raft_buffer b;

    ck_assert_int_eq(entry_wrap(big, sizeof big, &b), ENTRY_E_TOOBIG);
    ck_assert_int_eq(entry_wrap(big, sizeof big - 1, &b), 0);
    ck_assert_uint_eq(b.len, entry_size(1u << 20));
    raft_free(b.base);
}
END_TEST

Suite *entry_suite(void)
{
    Suite *s = suite_create("entry");
    TCase *tc = tcase_create("framing");

    tcase_add_loop_test(tc, roundtrip_every_length, 0, 80);
    tcase_add_test(tc, malformed_refused);
    tcase_add_test(tc, too_big_refused);
    suite_add_tcase(s, tc);
    return s;
}
