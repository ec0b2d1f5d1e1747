#include <check.h>
#include <stdint.h>

#include "common/hash.h"

Suite *hash_suite(void);

/* The SipHash-2-4 paper's test vector: key 00..0f, message 00..0e. */
START_TEST(siphash_reference_vector)
{
    struct hash_keyed h;
    uint8_t key[16], msg[15];

    for (int i = 0; i < 16; i++) {
        key[i] = (uint8_t)i;
    }
    for (int i = 0; i < 15; i++) {
        msg[i] = (uint8_t)i;
    }
    ck_assert_int_eq(hash_keyed_init(&h, key), 0);
    ck_assert_uint_eq(hash_keyed2(&h, msg, 15, "", 0), 0xa129ca6149be45e5ull);
    /* Split input and repeated use give the same value (re-init works). */
    ck_assert_uint_eq(hash_keyed2(&h, msg, 7, msg + 7, 8),
                      0xa129ca6149be45e5ull);
    ck_assert_uint_eq(hash_keyed2(&h, msg, 15, "", 0), 0xa129ca6149be45e5ull);
    hash_keyed_close(&h);
}
END_TEST

START_TEST(key_changes_hash)
{
    struct hash_keyed h;
    uint8_t k1[16] = {1}, k2[16] = {2};
    uint64_t a, b;

    ck_assert_int_eq(hash_keyed_init(&h, k1), 0);
    a = hash_keyed2(&h, "scope", 5, "key", 3);
    ck_assert_int_eq(hash_keyed_rekey(&h, k2), 0);
    b = hash_keyed2(&h, "scope", 5, "key", 3);
    ck_assert_uint_ne(a, b);
    ck_assert_int_eq(hash_keyed_rekey(&h, k1), 0);
    ck_assert_uint_eq(hash_keyed2(&h, "scope", 5, "key", 3), a);
    hash_keyed_close(&h);
}
END_TEST

Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *tc = tcase_create("siphash");

    tcase_add_test(tc, siphash_reference_vector);
    tcase_add_test(tc, key_changes_hash);
    suite_add_tcase(s, tc);
    return s;
}
