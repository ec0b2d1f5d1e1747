#include <check.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdint.h>
#include <stdlib.h>

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

/* OpenSSL's SIPHASH (8-byte output) of @a || @b: the oracle. */
static uint64_t openssl_siphash(const uint8_t key[16],
                                const uint8_t *a,
                                size_t a_len,
                                const uint8_t *b,
                                size_t b_len)
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
    EVP_MAC_CTX *ctx;
    size_t size = 8, out_len = 0;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
        OSSL_PARAM_construct_end(),
    };
    unsigned char out[8];
    uint64_t v = 0;

    ck_assert_ptr_nonnull(mac);
    ctx = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_int_eq(EVP_MAC_init(ctx, key, 16, params), 1);
    ck_assert_int_eq(EVP_MAC_update(ctx, a, a_len), 1);
    ck_assert_int_eq(EVP_MAC_update(ctx, b, b_len), 1);
    ck_assert_int_eq(EVP_MAC_final(ctx, out, &out_len, sizeof out), 1);
    ck_assert_uint_eq(out_len, 8);
    EVP_MAC_CTX_free(ctx);
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | out[i];
    }
    return v;
}

/* Our SipHash is the replicated state's hash: it must equal OpenSSL's for
 * every length (0..300, so every tail size and a split at every point of
 * the first 20 bytes) and key. A fixed seed keeps the test repeatable. */
START_TEST(siphash_equals_openssl)
{
    uint8_t key[16], buf[300];
    unsigned seed = 20261207;

    for (int round = 0; round < 40; round++) {
        struct hash_keyed h;

        for (int i = 0; i < 16; i++) {
            key[i] = (uint8_t)rand_r(&seed);
        }
        for (size_t i = 0; i < sizeof buf; i++) {
            buf[i] = (uint8_t)rand_r(&seed);
        }
        ck_assert_int_eq(hash_keyed_init(&h, key), 0);
        for (size_t len = 0; len <= sizeof buf; len += (len < 40 ? 1 : 37)) {
            size_t split = len < 20 ? len : (size_t)rand_r(&seed) % (len + 1);
            uint64_t want =
                openssl_siphash(key, buf, split, buf + split, len - split);

            ck_assert_uint_eq(hash_keyed2(&h, buf, len, "", 0), want);
            ck_assert_uint_eq(
                hash_keyed2(&h, buf, split, buf + split, len - split), want);
        }
        hash_keyed_close(&h);
    }
}
END_TEST

/* The stream is read 8 bytes at a time even when the second part starts
 * off a block boundary (shifted into place): every split of every length
 * up to 80 (each block offset, each tail size on both sides) equals
 * OpenSSL's hash of the whole. */
START_TEST(siphash_every_split)
{
    uint8_t key[16], buf[80];
    unsigned seed = 20261208;

    for (int round = 0; round < 3; round++) {
        struct hash_keyed h;

        for (int i = 0; i < 16; i++) {
            key[i] = (uint8_t)rand_r(&seed);
        }
        for (size_t i = 0; i < sizeof buf; i++) {
            buf[i] = (uint8_t)rand_r(&seed);
        }
        ck_assert_int_eq(hash_keyed_init(&h, key), 0);
        for (size_t len = 0; len <= sizeof buf; len++) {
            uint64_t want = openssl_siphash(key, buf, len, buf, 0);

            for (size_t split = 0; split <= len; split++) {
                ck_assert_msg(hash_keyed2(&h, buf, split, buf + split,
                                          len - split) == want,
                              "length %zu split at %zu", len, split);
            }
        }
        hash_keyed_close(&h);
    }
}
END_TEST

Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *tc = tcase_create("siphash");

    tcase_add_test(tc, siphash_reference_vector);
    tcase_add_test(tc, key_changes_hash);
    tcase_add_test(tc, siphash_equals_openssl);
    tcase_add_test(tc, siphash_every_split);
    suite_add_tcase(s, tc);
    return s;
}
