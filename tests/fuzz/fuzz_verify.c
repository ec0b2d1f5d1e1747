/* fuzz_verify: libFuzzer target for the webhook header parsers and the
 * verification around them (src/client/verify.c).
 *
 * Input: one byte choosing the scheme (even: Standard Webhooks, odd:
 * Stripe), then the fields id, timestamp and signature header, each ended
 * by '\n', then the body (the rest). Missing fields are absent headers.
 * The verifier holds two HMAC secrets and an Ed25519 public key, so the
 * match loops over every key kind run; tests/fuzz/corpus/verify holds a
 * valid message of each scheme to mutate from.
 *
 * Checked, besides "no crash, no leak, no UB":
 *   - once_verify returns one of its three statuses, a reason with every
 *     refusal, and with OK an id of 1..256 visible bytes and a timestamp
 *     that re-parses;
 *   - each parser alone returns 0 or a VERIFY_E_* code (-2001..-2099), and
 *     what it accepts stays within its bounds (entries, lengths);
 *   - base64 decoding is canonical: an accepted text re-encodes (padded or
 *     not, as given) to itself.
 *
 * Run: ./tests/fuzz/fuzz_verify -max_total_time=60 WORKDIR
 *      tests/fuzz/corpus/verify */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/verify_int.h"
#include "once_verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static once_verifier *verifiers[2];

static once_verifier *make(enum once_scheme s)
{
    static const char *const std[] = {
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_c2VjcmV0LW51bWJlci10d28tMTIzNDU2Nzg=",
        "whpk_TH5UASZnZ9jEu+W+cyIwLq/xR08B0lV8sYzwYYhJM7g="};
    static const char *const stripe[] = {
        "whsec_zUxjcmMSH0Dq3PNbcJ4nLmTRnEzPkFxH",
        "whsec_another_secret_0123456789"};
    const char *const *list = s == ONCE_SCHEME_STANDARD ? std : stripe;
    size_t n = s == ONCE_SCHEME_STANDARD ? 3 : 2;
    once_verifier *v;

    if (once_verifier_new(s, &v, NULL, 0) != 0) {
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        if (once_verifier_add(v, list[i], strlen(list[i]), NULL, 0) != 0) {
            abort();
        }
    }
    return v;
}

static bool is_code(int rv)
{
    return rv == 0 || (rv < -2000 && rv > -2100);
}

/* The next '\n'-ended field, or NULL when none is left. */
static const char *field(const uint8_t **p, size_t *left, size_t *len)
{
    const uint8_t *nl = memchr(*p, '\n', *left);
    const char *f = (const char *)*p;

    if (nl == NULL) {
        return NULL;
    }
    *len = (size_t)(nl - *p);
    *left -= *len + 1;
    *p = nl + 1;
    return f;
}

static void check_b64(const char *s, size_t len)
{
    uint8_t out[128];
    char back[200];
    size_t n;
    size_t stripped = len;
    int rv;

    if (len > 160) {
        return;
    }
    rv = verify_b64_decode(s, len, out, sizeof out, &n);
    if (!is_code(rv)) {
        abort();
    }
    if (rv != 0) {
        return;
    }
    EVP_EncodeBlock((unsigned char *)back, out, (int)n);
    while (stripped > 0 && s[stripped - 1] == '=') {
        stripped--;
    }
    if (memcmp(back, s, stripped) != 0) {
        abort(); /* two texts for one value */
    }
}

static void check_parsers(const char *sig, size_t sig_len)
{
    struct verify_sigs sigs;
    int rv = verify_parse_standard_sigs(sig, sig_len, &sigs);

    if (!is_code(rv) || sigs.n > ONCE_VERIFY_SIGS_MAX) {
        abort();
    }
    rv = verify_parse_stripe_sigs(sig, sig_len, &sigs);
    if (!is_code(rv) || sigs.n > ONCE_VERIFY_SIGS_MAX ||
        (rv == 0 && (!sigs.has_ts || sigs.ts_len == 0 ||
                     sigs.ts_len > ONCE_VERIFY_TIMESTAMP_MAX))) {
        abort();
    }
    check_b64(sig, sig_len);
}

static void check_result(enum once_verify_status st,
                         const struct once_verified *out)
{
    uint64_t ts;
    char text[24];
    int n;

    if (st != ONCE_VERIFY_OK) {
        if ((st != ONCE_VERIFY_MALFORMED && st != ONCE_VERIFY_BAD_SIGNATURE) ||
            out->reason[0] == '\0') {
            abort();
        }
        return;
    }
    if (verify_check_id(out->id, out->id_len, false) != 0 ||
        strlen(out->id) != out->id_len) {
        abort();
    }
    n = snprintf(text, sizeof text, "%llu", (unsigned long long)out->ts_s);
    if (verify_parse_timestamp(text, (size_t)n, &ts) != 0 || ts != out->ts_s) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct once_webhook w = {0};
    struct once_verified out;
    const uint8_t *p = data + 1;
    size_t left;
    once_verifier *v;

    if (size == 0) {
        return 0;
    }
    if (verifiers[0] == NULL) {
        verifiers[0] = make(ONCE_SCHEME_STANDARD);
        verifiers[1] = make(ONCE_SCHEME_STRIPE);
    }
    v = verifiers[data[0] & 1];
    left = size - 1;
    w.id = field(&p, &left, &w.id_len);
    w.timestamp = w.id != NULL ? field(&p, &left, &w.timestamp_len) : NULL;
    w.signature =
        w.timestamp != NULL ? field(&p, &left, &w.signature_len) : NULL;
    w.body = p;
    w.body_len = left;
    if (w.signature != NULL) {
        check_parsers(w.signature, w.signature_len);
    }
    check_result(once_verify(v, &w, &out), &out);
    return 0;
}
