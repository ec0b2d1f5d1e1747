/* libonce's webhook verification (include/once_verify.h): the published
 * vectors of each scheme, rotation, tampering, header garbage, bounds. */
#include <check.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/verify_int.h"
#include "once_verify.h"

Suite *verify_suite(void);

/* The Standard Webhooks specification's example (its reference
 * libraries' tests use the same values). */
#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_ID     "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS     "1614265330"
#define SW_BODY   "{\"test\": 2432232314}"
#define SW_SIG    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

/* Stripe documents the computation, not a vector: HMAC-SHA256 keyed with
 * the endpoint secret's text over "t.body", lowercase hex. This one was
 * computed with `openssl dgst -sha256 -hmac SECRET` over "1686090000." and
 * the body, and agrees with Python's hmac module. */
#define ST_SECRET "whsec_zUxjcmMSH0Dq3PNbcJ4nLmTRnEzPkFxH"
#define ST_BODY                                        \
    "{\n  \"id\": \"evt_1NGb8cLkdIwHu7ixHwLi6Rxl\",\n" \
    "  \"object\": \"event\",\n"                       \
    "  \"type\": \"payment_intent.succeeded\"\n}"
#define ST_V1 "75ed459775c91bea1aaa8115f867759724d2fe8aa7a5862e4b5a6ff92cc71716"

/* Ed25519 (v1a): a key made with `openssl genpkey -algorithm ed25519`,
 * the signature made with `openssl pkeyutl -sign -rawin` over
 * "msg_ed25519_1.1700000000.{"type":"ping"}". */
#define ED_PUB "whpk_TH5UASZnZ9jEu+W+cyIwLq/xR08B0lV8sYzwYYhJM7g="
#define ED_SIG                                                             \
    "v1a,V9H7aW2BtmiEgOaRNzkd2DRbDV6g9Kcc9FoWbDjpGJBzpuOnyp/PG2pg0ca4/sd/" \
    "x4WioU/feSJW8sRZ5QVqBg=="

static once_verifier *make(enum once_scheme s, const char *const *secrets)
{
    once_verifier *v;
    char err[256];

    ck_assert_int_eq(once_verifier_new(s, &v, err, sizeof err), 0);
    for (size_t i = 0; secrets[i] != NULL; i++) {
        ck_assert_msg(once_verifier_add(v, secrets[i], strlen(secrets[i]), err,
                                        sizeof err) == 0,
                      "%s", err);
    }
    return v;
}

static struct once_webhook sw_msg(const char *id,
                                  const char *ts,
                                  const char *sig,
                                  const char *body)
{
    struct once_webhook w = {0};

    w.id = id;
    w.id_len = id != NULL ? strlen(id) : 0;
    w.timestamp = ts;
    w.timestamp_len = ts != NULL ? strlen(ts) : 0;
    w.signature = sig;
    w.signature_len = sig != NULL ? strlen(sig) : 0;
    w.body = (const uint8_t *)body;
    w.body_len = body != NULL ? strlen(body) : 0;
    return w;
}

static enum once_verify_status check(const once_verifier *v,
                                     struct once_webhook w,
                                     struct once_verified *out)
{
    return once_verify(v, &w, out);
}

/* "v1,<base64 HMAC>" of id.ts.body with the raw key of @secret_b64. */
static void sw_sign(const char *secret_b64,
                    const char *id,
                    const char *ts,
                    const char *body,
                    char *out,
                    size_t cap)
{
    uint8_t key[128];
    size_t klen;
    uint8_t mac[32];
    unsigned mlen = 32;
    char content[4096];
    char b64[64];
    int n;

    ck_assert_int_eq(verify_b64_decode(secret_b64, strlen(secret_b64), key,
                                       sizeof key, &klen),
                     0);
    n = snprintf(content, sizeof content, "%s.%s.%s", id, ts, body);
    ck_assert(n > 0 && (size_t)n < sizeof content);
    HMAC(EVP_sha256(), key, (int)klen, (const uint8_t *)content, (size_t)n, mac,
         &mlen);
    EVP_EncodeBlock((unsigned char *)b64, mac, 32);
    snprintf(out, cap, "v1,%s", b64);
}

static void st_sign(const char *secret,
                    const char *t,
                    const char *body,
                    char *out,
                    size_t cap)
{
    uint8_t mac[32];
    unsigned mlen = 32;
    char content[4096];
    char hex[65];
    int n = snprintf(content, sizeof content, "%s.%s", t, body);

    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const uint8_t *)content,
         (size_t)n, mac, &mlen);
    for (int i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    }
    snprintf(out, cap, "t=%s,v1=%s", t, hex);
}

START_TEST(standard_published_vector)
{
    const char *secrets[] = {SW_SECRET, NULL};
    once_verifier *v = make(ONCE_SCHEME_STANDARD, secrets);
    struct once_verified out;
    char sig[128];

    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_OK);
    ck_assert_str_eq(out.id, SW_ID);
    ck_assert_uint_eq(out.ts_s, 1614265330u);
    ck_assert(!out.ed25519);
    /* Our own signer (the test's) reproduces the published signature. */
    sw_sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", SW_ID, SW_TS, SW_BODY, sig,
            sizeof sig);
    ck_assert_str_eq(sig, SW_SIG);
    once_verifier_free(v);

    /* The prefix is optional, as in the reference libraries. */
    const char *bare[] = {"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", NULL};
    v = make(ONCE_SCHEME_STANDARD, bare);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_OK);
    once_verifier_free(v);
}
END_TEST

START_TEST(standard_tampering)
{
    const char *secrets[] = {SW_SECRET, NULL};
    once_verifier *v = make(ONCE_SCHEME_STANDARD, secrets);
    struct once_verified out;

    ck_assert_int_eq(
        check(v, sw_msg(SW_ID, SW_TS, SW_SIG, "{\"test\": 2432232315}"), &out),
        ONCE_VERIFY_BAD_SIGNATURE);
    ck_assert_str_eq(out.id, ""); /* nothing leaks out of a refusal */
    ck_assert_int_eq(
        check(v, sw_msg("msg_p5jXN8AQM9LWM0D4loKWxJel", SW_TS, SW_SIG, SW_BODY),
              &out),
        ONCE_VERIFY_BAD_SIGNATURE);
    ck_assert_int_eq(
        check(v, sw_msg(SW_ID, "1614265331", SW_SIG, SW_BODY), &out),
        ONCE_VERIFY_BAD_SIGNATURE);
    /* One flipped character of the signature. */
    ck_assert_int_eq(
        check(
            v,
            sw_msg(SW_ID, SW_TS,
                   "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=", SW_BODY),
            &out),
        ONCE_VERIFY_BAD_SIGNATURE);
    /* The right bytes under another version are not a v1 signature. */
    ck_assert_int_eq(
        check(
            v,
            sw_msg(SW_ID, SW_TS,
                   "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SW_BODY),
            &out),
        ONCE_VERIFY_BAD_SIGNATURE);
    once_verifier_free(v);
}
END_TEST

START_TEST(standard_rotation)
{
    /* The wrong secret alone fails; with the right one added (rotation),
     * the same message passes and says which secret matched. */
    const char *wrong[] = {"whsec_c2VjcmV0LW51bWJlci10d28tMTIzNDU2Nzg=", NULL};
    const char *both[] = {
        "whsec_c2VjcmV0LW51bWJlci10d28tMTIzNDU2Nzg=", SW_SECRET, NULL};
    once_verifier *v = make(ONCE_SCHEME_STANDARD, wrong);
    struct once_verified out;
    char sig_new[128];
    char header[512];

    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_BAD_SIGNATURE);
    once_verifier_free(v);
    v = make(ONCE_SCHEME_STANDARD, both);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_OK);
    ck_assert_uint_eq(out.secret_index, 1);
    /* A sender signing with two secrets: several signatures, one valid
     * for us, garbage and unknown versions around it. */
    sw_sign("c2VjcmV0LW51bWJlci10d28tMTIzNDU2Nzg=", SW_ID, SW_TS, SW_BODY,
            sig_new, sizeof sig_new);
    snprintf(header, sizeof header, "v9,abc  v1,bm9wZQ== v1,!!!! %s", sig_new);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, header, SW_BODY), &out),
                     ONCE_VERIFY_OK);
    ck_assert_uint_eq(out.secret_index, 0);
    snprintf(header, sizeof header, "v1,bm9wZQ== %s", SW_SIG);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, header, SW_BODY), &out),
                     ONCE_VERIFY_OK);
    ck_assert_uint_eq(out.secret_index, 1);
    once_verifier_free(v);
}
END_TEST

START_TEST(standard_ed25519)
{
    const char *secrets[] = {SW_SECRET, ED_PUB, NULL};
    once_verifier *v = make(ONCE_SCHEME_STANDARD, secrets);
    struct once_verified out;
    char header[512];

    ck_assert_int_eq(check(v,
                           sw_msg("msg_ed25519_1", "1700000000", ED_SIG,
                                  "{\"type\":\"ping\"}"),
                           &out),
                     ONCE_VERIFY_OK);
    ck_assert(out.ed25519);
    ck_assert_uint_eq(out.secret_index, 1);
    ck_assert_int_eq(check(v,
                           sw_msg("msg_ed25519_1", "1700000000", ED_SIG,
                                  "{\"type\":\"pong\"}"),
                           &out),
                     ONCE_VERIFY_BAD_SIGNATURE);
    snprintf(header, sizeof header, "v1,bm9wZQ== %s", ED_SIG);
    ck_assert_int_eq(check(v,
                           sw_msg("msg_ed25519_1", "1700000000", header,
                                  "{\"type\":\"ping\"}"),
                           &out),
                     ONCE_VERIFY_OK);
    once_verifier_free(v);
}
END_TEST

START_TEST(standard_garbage)
{
    const char *secrets[] = {SW_SECRET, NULL};
    once_verifier *v = make(ONCE_SCHEME_STANDARD, secrets);
    struct once_verified out;
    char *big = malloc(ONCE_VERIFY_HEADER_MAX + 2);
    char many[2048] = "";

    /* Missing headers. */
    ck_assert_int_eq(check(v, sw_msg(NULL, SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, NULL, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, NULL, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_str_ne(out.reason, "");
    /* Timestamps: not digits, signs, too many digits. */
    ck_assert_int_eq(
        check(v, sw_msg(SW_ID, "-1614265330", SW_SIG, SW_BODY), &out),
        ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(
        check(v, sw_msg(SW_ID, "16142.5330", SW_SIG, SW_BODY), &out),
        ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(
        check(v, sw_msg(SW_ID, "1234567890123", SW_SIG, SW_BODY), &out),
        ONCE_VERIFY_MALFORMED);
    /* Ids: with a '.', with a control byte, too long. */
    ck_assert_int_eq(check(v, sw_msg("msg.1", SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(check(v, sw_msg("msg\t1", SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    memset(big, 'a', 257);
    big[257] = '\0';
    ck_assert_int_eq(check(v, sw_msg(big, SW_TS, SW_SIG, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    /* Signature headers: no comma, only blanks, non-ASCII, oversize, too
     * many entries. */
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, "v1", SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, "   ", SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(
        check(v, sw_msg(SW_ID, SW_TS, "v1,\xc3\xa9", SW_BODY), &out),
        ONCE_VERIFY_MALFORMED);
    memset(big, 'v', ONCE_VERIFY_HEADER_MAX + 1);
    memcpy(big, SW_SIG " ", strlen(SW_SIG) + 1);
    big[ONCE_VERIFY_HEADER_MAX + 1] = '\0';
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, big, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    for (int i = 0; i < ONCE_VERIFY_SIGS_MAX; i++) {
        strcat(many, "v1,bm9wZQ== ");
    }
    strcat(many, SW_SIG);
    ck_assert_int_eq(check(v, sw_msg(SW_ID, SW_TS, many, SW_BODY), &out),
                     ONCE_VERIFY_MALFORMED);
    free(big);
    once_verifier_free(v);
}
END_TEST

START_TEST(stripe_documented_computation)
{
    const char *secrets[] = {ST_SECRET, NULL};
    once_verifier *v = make(ONCE_SCHEME_STRIPE, secrets);
    struct once_verified out;
    struct once_webhook w = {0};
    char mine[200];

    w.signature =
        "t=1686090000,v1=" ST_V1
        ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39";
    w.signature_len = strlen(w.signature);
    w.body = (const uint8_t *)ST_BODY;
    w.body_len = strlen(ST_BODY);
    ck_assert_int_eq(once_verify(v, &w, &out), ONCE_VERIFY_OK);
    ck_assert_str_eq(out.id, "evt_1NGb8cLkdIwHu7ixHwLi6Rxl");
    ck_assert_uint_eq(out.ts_s, 1686090000u);
    st_sign(ST_SECRET, "1686090000", ST_BODY, mine, sizeof mine);
    ck_assert_str_eq(mine, "t=1686090000,v1=" ST_V1);
    /* Spaces after commas (as Stripe's documentation prints the header). */
    w.signature = "t=1686090000, v1=" ST_V1;
    w.signature_len = strlen(w.signature);
    ck_assert_int_eq(once_verify(v, &w, &out), ONCE_VERIFY_OK);
    /* Uppercase hex is the same bytes. */
    w.signature =
        "t=1686090000,v1="
        "75ED459775C91BEA1AAA8115F867759724D2FE8AA7A5862E4B5A6FF92CC71716";
    w.signature_len = strlen(w.signature);
    ck_assert_int_eq(once_verify(v, &w, &out), ONCE_VERIFY_OK);
    once_verifier_free(v);
}
END_TEST

static enum once_verify_status stripe(const once_verifier *v,
                                      const char *header,
                                      const char *body)
{
    struct once_webhook w = {0};
    struct once_verified out;

    w.signature = header;
    w.signature_len = header != NULL ? strlen(header) : 0;
    w.body = (const uint8_t *)body;
    w.body_len = strlen(body);
    return once_verify(v, &w, &out);
}

START_TEST(stripe_edges)
{
    const char *secrets[] = {"whsec_another_secret_0123456789", ST_SECRET,
                             NULL};
    const char *wrong[] = {"whsec_another_secret_0123456789", NULL};
    once_verifier *v = make(ONCE_SCHEME_STRIPE, secrets);
    once_verifier *w = make(ONCE_SCHEME_STRIPE, wrong);
    char h[512];
    const char *good = "t=1686090000,v1=" ST_V1;

    ck_assert_int_eq(stripe(v, good, ST_BODY), ONCE_VERIFY_OK);
    ck_assert_int_eq(stripe(w, good, ST_BODY), ONCE_VERIFY_BAD_SIGNATURE);
    /* Tampered body and timestamp. */
    ck_assert_int_eq(stripe(v, good, ST_BODY " "), ONCE_VERIFY_BAD_SIGNATURE);
    ck_assert_int_eq(stripe(v, "t=1686090001,v1=" ST_V1, ST_BODY),
                     ONCE_VERIFY_BAD_SIGNATURE);
    /* Several v1 (Stripe signs with every active secret): one valid. */
    st_sign("whsec_another_secret_0123456789", "1686090000", ST_BODY, h,
            sizeof h);
    ck_assert_int_eq(stripe(v, h, ST_BODY), ONCE_VERIFY_OK);
    snprintf(h, sizeof h, "t=1686090000,v1=%064d,v1=zz,v1=%s", 0, ST_V1);
    ck_assert_int_eq(stripe(v, h, ST_BODY), ONCE_VERIFY_OK);
    /* No v1 at all: nothing can match. */
    ck_assert_int_eq(stripe(v, "t=1686090000,v0=" ST_V1, ST_BODY),
                     ONCE_VERIFY_BAD_SIGNATURE);
    /* Garbage: no t, two t, empty item, no '=', bad digits. */
    ck_assert_int_eq(stripe(v, "v1=" ST_V1, ST_BODY), ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(stripe(v, "t=1,t=1686090000,v1=" ST_V1, ST_BODY),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(stripe(v, "t=1686090000,,v1=" ST_V1, ST_BODY),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(stripe(v, "t=1686090000,v1", ST_BODY),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(stripe(v, "t=16860x0000,v1=" ST_V1, ST_BODY),
                     ONCE_VERIFY_MALFORMED);
    ck_assert_int_eq(stripe(v, NULL, ST_BODY), ONCE_VERIFY_MALFORMED);
    once_verifier_free(v);
    once_verifier_free(w);
}
END_TEST

START_TEST(stripe_body_id)
{
    const char *secrets[] = {ST_SECRET, NULL};
    once_verifier *v = make(ONCE_SCHEME_STRIPE, secrets);
    const char *bodies[] = {"not json",         "[1,2]",
                            "{\"type\":\"x\"}", "{\"id\":7}",
                            "{\"id\":\"\"}",    "{\"id\":\"a\\u0000b\"}",
                            "{\"id\":\"a b\"}", "{\"id\":\"x\",\"id\":\"y\"}"};
    char h[200];
    char id[ONCE_KEY_MAX + 1];
    size_t n;

    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        st_sign(ST_SECRET, "1686090000", bodies[i], h, sizeof h);
        ck_assert_msg(stripe(v, h, bodies[i]) == ONCE_VERIFY_MALFORMED, "%s",
                      bodies[i]);
    }
    ck_assert_int_eq(
        verify_stripe_id((const uint8_t *)"{\"id\":\"evt_1\"}", 14, id, &n), 0);
    ck_assert_str_eq(id, "evt_1");
    once_verifier_free(v);
}
END_TEST

START_TEST(secrets_refused)
{
    once_verifier *v;
    char err[256];
    const char *bad_std[] = {
        "whsec_",         "whsec_!!!!",
        "whsec_c2hvcnQ=", "whsk_TH5UASZnZ9jEu+W+cyIwLq/xR08B0lV8sYzwYYhJM7g=",
        "whpk_c2hvcnQ=",  "white space"};

    ck_assert_int_eq(
        once_verifier_new(ONCE_SCHEME_STANDARD, &v, err, sizeof err), 0);
    for (size_t i = 0; i < sizeof bad_std / sizeof bad_std[0]; i++) {
        ck_assert_msg(once_verifier_add(v, bad_std[i], strlen(bad_std[i]), err,
                                        sizeof err) == -EINVAL,
                      "%s", bad_std[i]);
        /* The message never quotes the secret ("whsec_" alone is part
         * of the message's own text). */
        if (strlen(bad_std[i]) > 6) {
            ck_assert_ptr_null(strstr(err, bad_std[i]));
        }
    }
    ck_assert_int_eq(once_verifier_add(v, " " SW_SECRET "\n",
                                       strlen(SW_SECRET) + 2, err, sizeof err),
                     0);
    ck_assert_int_eq(
        once_verifier_add(v, SW_SECRET, strlen(SW_SECRET), err, sizeof err),
        -EEXIST); /* the same key twice */
    ck_assert_uint_eq(once_verifier_count(v), 1);
    for (int i = 1; i < ONCE_VERIFY_SECRETS_MAX; i++) {
        char raw[25];
        char s[64] = "whsec_";

        snprintf(raw, sizeof raw, "secret-number-%02d-abcdefg", i);
        EVP_EncodeBlock((unsigned char *)s + 6, (const uint8_t *)raw, 24);
        ck_assert_msg(once_verifier_add(v, s, strlen(s), err, sizeof err) == 0,
                      "%s", err);
    }
    ck_assert_int_eq(
        once_verifier_add(v, ED_PUB, strlen(ED_PUB), err, sizeof err),
        -ENOSPC); /* over ONCE_VERIFY_SECRETS_MAX */
    once_verifier_free(v);
    ck_assert_int_eq(once_verifier_new(ONCE_SCHEME_STRIPE, &v, err, sizeof err),
                     0);
    ck_assert_int_eq(once_verifier_add(v, "short", 5, err, sizeof err),
                     -EINVAL);
    once_verifier_free(v);
    ck_assert_int_eq(
        once_verifier_new((enum once_scheme)9, &v, err, sizeof err), -EINVAL);
}
END_TEST

START_TEST(base64_canonical)
{
    uint8_t out[8];
    size_t n;

    ck_assert_int_eq(verify_b64_decode("bm9wZQ==", 8, out, sizeof out, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(memcmp(out, "nope", 4), 0);
    ck_assert_int_eq(verify_b64_decode("bm9wZQ", 6, out, sizeof out, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(verify_b64_decode("bm9wZR==", 8, out, sizeof out, &n),
                     VERIFY_E_ENCODING); /* non-zero leftover bits */
    ck_assert_int_eq(verify_b64_decode("bm9wZQ=", 7, out, sizeof out, &n),
                     VERIFY_E_ENCODING);
    ck_assert_int_eq(verify_b64_decode("b", 1, out, sizeof out, &n),
                     VERIFY_E_ENCODING);
    ck_assert_int_eq(verify_b64_decode("bm9w-Q==", 8, out, sizeof out, &n),
                     VERIFY_E_ENCODING);
    ck_assert_int_eq(verify_b64_decode("bm9wZWJtOXdaUT09", 16, out, 8, &n),
                     VERIFY_E_TOOBIG);
    ck_assert_int_eq(verify_b64_decode("", 0, out, sizeof out, &n), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(window_boundaries)
{
    const uint64_t now = 1700000000000u;
    const uint64_t tol = 300000u;

    ck_assert_int_eq(once_verify_window(now - tol, now, tol), 0);
    ck_assert_int_eq(once_verify_window(now - tol - 1, now, tol), -1);
    ck_assert_int_eq(once_verify_window(now + tol, now, tol), 0);
    ck_assert_int_eq(once_verify_window(now + tol + 1, now, tol), 1);
    ck_assert_int_eq(once_verify_window(now, now, 0), 0);
    ck_assert_int_eq(once_verify_window(0, now, tol), -1);
}
END_TEST

START_TEST(names_and_hash)
{
    uint8_t h[32];
    static const uint8_t abc_sha256[32] = {
        0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
        0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
        0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};

    once_body_hash((const uint8_t *)"abc", 3, h);
    ck_assert_int_eq(memcmp(h, abc_sha256, 32), 0);
    ck_assert_str_eq(once_vc_outcome_name(ONCE_VC_ACCEPTED), "ACCEPTED");
    ck_assert_str_eq(once_vc_outcome_name(ONCE_VC_REFUSED), "REFUSED");
    ck_assert_str_eq(once_vc_outcome_name((enum once_vc_outcome)0), "?");
    ck_assert_str_eq(once_vc_outcome_name((enum once_vc_outcome)99), "?");
}
END_TEST

START_TEST(claim_needs_a_signature)
{
    /* A forged message is refused before any round trip: the client
     * points at a port nobody listens on, so a claim would be
     * UNAVAILABLE, not BAD_SIGNATURE / MALFORMED. */
    const char *secrets[] = {SW_SECRET, NULL};
    once_verifier *v = make(ONCE_SCHEME_STANDARD, secrets);
    const char *addrs[] = {"127.0.0.1:1"};
    struct once_options o;
    once_client *c;
    struct once_result r;
    struct once_verified ver;
    struct once_vc_args a = {
        .scope = (const uint8_t *)"t", .scope_len = 1, .timeout_ms = 300};
    struct once_webhook w = sw_msg(SW_ID, SW_TS, SW_SIG, "{\"forged\": 1}");
    char err[256];

    once_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    ck_assert_int_eq(once_client_new(&o, &c, err, sizeof err), 0);
    once_result_init(&r);
    ck_assert_int_eq(once_verify_and_claim(c, v, &w, &a, &ver, &r),
                     ONCE_VC_BAD_SIGNATURE);
    w = sw_msg(SW_ID, "x", SW_SIG, SW_BODY);
    ck_assert_int_eq(once_verify_and_claim(c, v, &w, &a, &ver, &r),
                     ONCE_VC_MALFORMED);
    w = sw_msg(SW_ID, SW_TS, SW_SIG, SW_BODY);
    ck_assert_int_eq(once_verify_and_claim(c, v, &w, &a, &ver, &r),
                     ONCE_VC_UNAVAILABLE);
    ck_assert_int_ne(r.status, ONCE_STATUS_OK);
    once_result_clear(&r);
    once_client_free(c);
    once_verifier_free(v);
}
END_TEST

Suite *verify_suite(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("verify");

    tcase_add_test(tc, standard_published_vector);
    tcase_add_test(tc, standard_tampering);
    tcase_add_test(tc, standard_rotation);
    tcase_add_test(tc, standard_ed25519);
    tcase_add_test(tc, standard_garbage);
    tcase_add_test(tc, stripe_documented_computation);
    tcase_add_test(tc, stripe_edges);
    tcase_add_test(tc, stripe_body_id);
    tcase_add_test(tc, secrets_refused);
    tcase_add_test(tc, base64_canonical);
    tcase_add_test(tc, window_boundaries);
    tcase_add_test(tc, names_and_hash);
    tcase_add_test(tc, claim_needs_a_signature);
    suite_add_tcase(s, tc);
    return s;
}
