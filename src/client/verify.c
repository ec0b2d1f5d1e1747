/* client/verify.c: webhook signatures (include/once_verify.h): secrets,
 * the two header grammars, HMAC-SHA256 and Ed25519 over OpenSSL.
 *
 * Every header is checked against its bound and its grammar before any
 * key is used; the message id of a Stripe body is parsed only after its
 * signature matched, so unauthenticated JSON never reaches the parser's
 * deeper paths. Nothing here reads a clock. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/verify_int.h"
#include "common/text.h"
#include "once_verify.h"

#define HMAC_LEN    32
#define ED_KEY_LEN  32
#define ED_SIG_LEN  64
#define KEY_MIN_LEN 16 /* bytes of HMAC key material */

enum key_kind {
    KEY_HMAC = 1,
    KEY_ED25519 = 2,
};

struct verify_key
{
    enum key_kind kind;
    uint8_t bytes[ONCE_VERIFY_SECRET_MAX];
    size_t len;
    EVP_PKEY *pkey; /* KEY_ED25519 */
};

struct once_verifier
{
    enum once_scheme scheme;
    EVP_MAC *hmac; /* fetched once; shared read-only by every call */
    size_t n_keys;
    struct verify_key keys[ONCE_VERIFY_SECRETS_MAX];
};

static void say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------
 * Encodings
 * ---------------------------------------------------------------------- */

/* b64_value's answer for a character outside the alphabet (a value, not
 * an error code: the caller turns it into VERIFY_E_ENCODING). */
#define B64_NOT_IN_ALPHABET (-1)

/* The 6-bit value of @c, or B64_NOT_IN_ALPHABET. */
static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return B64_NOT_IN_ALPHABET;
}

int verify_b64_decode(const char *s,
                      size_t len,
                      uint8_t *out,
                      size_t cap,
                      size_t *out_len)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t n = 0;
    size_t pad = 0;

    while (pad < 2 && len > 0 && s[len - 1] == '=') {
        len--;
        pad++;
    }
    if (len % 4 == 1 || (pad > 0 && (len + pad) % 4 != 0)) {
        return VERIFY_E_ENCODING;
    }
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);

        if (v == B64_NOT_IN_ALPHABET) {
            return VERIFY_E_ENCODING;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap) {
                return VERIFY_E_TOOBIG;
            }
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    /* The leftover bits of the last group must be zero (canonical form):
     * two texts never decode to the same key or signature. */
    if ((acc & ((1u << bits) - 1)) != 0) {
        return VERIFY_E_ENCODING;
    }
    *out_len = n;
    return 0;
}

static bool hex_decode(const char *s, size_t len, uint8_t *out, size_t n)
{
    if (len != 2 * n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int hi = text_hex_digit(s[2 * i]);
        int lo = text_hex_digit(s[2 * i + 1]);

        if (hi == TEXT_NOT_HEX || lo == TEXT_NOT_HEX) {
            return false;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* Header values are visible ASCII and spaces only. */
static bool printable(const char *s, size_t len, bool spaces)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!(c > 0x20 && c < 0x7f) && !(spaces && c == ' ')) {
            return false;
        }
    }
    return true;
}

int verify_parse_timestamp(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (s == NULL || len == 0 || len > ONCE_VERIFY_TIMESTAMP_MAX) {
        return VERIFY_E_TIMESTAMP;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return VERIFY_E_TIMESTAMP;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* ------------------------------------------------------------------------
 * Secrets
 * ---------------------------------------------------------------------- */

int once_verifier_new(enum once_scheme scheme,
                      once_verifier **out,
                      char *err,
                      size_t errlen)
{
    once_verifier *v;

    if (scheme != ONCE_SCHEME_STANDARD && scheme != ONCE_SCHEME_STRIPE) {
        say(err, errlen, "unknown signature scheme %d", (int)scheme);
        return -EINVAL;
    }
    v = calloc(1, sizeof *v);
    if (v == NULL) {
        say(err, errlen, "out of memory");
        return -ENOMEM;
    }
    v->scheme = scheme;
    v->hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (v->hmac == NULL) {
        free(v);
        say(err, errlen, "OpenSSL offers no HMAC");
        return -ENOTSUP;
    }
    *out = v;
    return 0;
}

static void trim(const char **s, size_t *len)
{
    while (*len > 0 && isspace((unsigned char)**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && isspace((unsigned char)(*s)[*len - 1])) {
        (*len)--;
    }
}

static bool has_prefix(const char *s, size_t len, const char *p)
{
    size_t n = strlen(p);

    return len >= n && memcmp(s, p, n) == 0;
}

/* A Standard Webhooks secret: whsec_<b64> (or bare b64) is an HMAC key,
 * whpk_<b64> an Ed25519 public key. */
static int parse_standard(const char *s, size_t len, struct verify_key *k)
{
    int rv;

    if (has_prefix(s, len, "whpk_")) {
        rv = verify_b64_decode(s + 5, len - 5, k->bytes, sizeof k->bytes,
                               &k->len);
        if (rv != 0 || k->len != ED_KEY_LEN) {
            return VERIFY_E_SECRET;
        }
        k->pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, k->bytes,
                                              k->len);
        if (k->pkey == NULL) {
            return VERIFY_E_CRYPTO;
        }
        k->kind = KEY_ED25519;
        return 0;
    }
    if (has_prefix(s, len, "whsk_")) {
        return VERIFY_E_SECRET; /* a signing key belongs to the sender */
    }
    if (has_prefix(s, len, "whsec_")) {
        s += 6;
        len -= 6;
    }
    rv = verify_b64_decode(s, len, k->bytes, sizeof k->bytes, &k->len);
    if (rv != 0 || k->len < KEY_MIN_LEN) {
        return VERIFY_E_SECRET;
    }
    k->kind = KEY_HMAC;
    return 0;
}

static bool same_key(const struct verify_key *a, const struct verify_key *b)
{
    return a->kind == b->kind && a->len == b->len &&
           CRYPTO_memcmp(a->bytes, b->bytes, a->len) == 0;
}

static void key_wipe(struct verify_key *k)
{
    EVP_PKEY_free(k->pkey);
    OPENSSL_cleanse(k, sizeof *k);
}

int once_verifier_add(once_verifier *v,
                      const char *secret,
                      size_t len,
                      char *err,
                      size_t errlen)
{
    struct verify_key *k;
    int rv;

    if (v == NULL || secret == NULL) {
        say(err, errlen, "no verifier or no secret");
        return -EINVAL;
    }
    trim(&secret, &len);
    if (v->n_keys == ONCE_VERIFY_SECRETS_MAX) {
        say(err, errlen, "more than %d secrets", ONCE_VERIFY_SECRETS_MAX);
        return -ENOSPC;
    }
    if (len == 0 || len > ONCE_VERIFY_SECRET_MAX ||
        !printable(secret, len, false)) {
        say(err, errlen,
            "secret %zu: empty, over %d bytes, or not printable ASCII",
            v->n_keys + 1, ONCE_VERIFY_SECRET_MAX);
        return -EINVAL;
    }
    k = &v->keys[v->n_keys];
    memset(k, 0, sizeof *k);
    if (v->scheme == ONCE_SCHEME_STANDARD) {
        rv = parse_standard(secret, len, k);
    } else if (len < KEY_MIN_LEN) {
        rv = VERIFY_E_SECRET;
    } else {
        memcpy(k->bytes, secret, len);
        k->len = len;
        k->kind = KEY_HMAC;
        rv = 0;
    }
    for (size_t i = 0; rv == 0 && i < v->n_keys; i++) {
        if (same_key(&v->keys[i], k)) {
            rv = VERIFY_E_DUPLICATE;
        }
    }
    if (rv != 0) {
        key_wipe(k);
        say(err, errlen, "secret %zu: %s", v->n_keys + 1,
            rv == VERIFY_E_DUPLICATE ? "the same key as an earlier one"
            : v->scheme == ONCE_SCHEME_STANDARD
                ? "not whsec_<base64 of at least 16 bytes> nor whpk_<base64 "
                  "of a 32-byte Ed25519 key>"
                : "shorter than 16 bytes");
        return rv == VERIFY_E_DUPLICATE ? -EEXIST : -EINVAL;
    }
    v->n_keys++;
    return 0;
}

size_t once_verifier_count(const once_verifier *v)
{
    return v != NULL ? v->n_keys : 0;
}

enum once_scheme once_verifier_scheme(const once_verifier *v)
{
    return v->scheme;
}

void once_verifier_free(once_verifier *v)
{
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; i < v->n_keys; i++) {
        key_wipe(&v->keys[i]);
    }
    EVP_MAC_free(v->hmac);
    OPENSSL_cleanse(v, sizeof *v);
    free(v);
}

/* ------------------------------------------------------------------------
 * Header grammars
 * ---------------------------------------------------------------------- */

int verify_parse_standard_sigs(const char *s,
                               size_t len,
                               struct verify_sigs *out)
{
    size_t i = 0;

    memset(out, 0, sizeof *out);
    if (s == NULL || len == 0 || len > ONCE_VERIFY_HEADER_MAX ||
        !printable(s, len, true)) {
        return VERIFY_E_HEADER;
    }
    while (i < len) {
        size_t start;
        size_t end;
        const char *comma;
        struct verify_sig *g;

        while (i < len && s[i] == ' ') {
            i++;
        }
        if (i == len) {
            break;
        }
        start = i;
        while (i < len && s[i] != ' ') {
            i++;
        }
        end = i;
        comma = memchr(s + start, ',', end - start);
        if (comma == NULL || comma == s + start) {
            return VERIFY_E_HEADER;
        }
        if (out->n == ONCE_VERIFY_SIGS_MAX) {
            return VERIFY_E_HEADER;
        }
        g = &out->sigs[out->n++];
        if ((size_t)(comma - (s + start)) == 2 &&
            memcmp(s + start, "v1", 2) == 0) {
            g->kind = SIG_V1;
        } else if ((size_t)(comma - (s + start)) == 3 &&
                   memcmp(s + start, "v1a", 3) == 0) {
            g->kind = SIG_V1A;
        } else {
            g->kind = SIG_OTHER; /* a version we do not know: ignored */
            continue;
        }
        /* A signature that does not decode to its length cannot match:
         * kept as unusable rather than refusing the header, so one
         * garbled entry does not hide a valid one next to it. */
        if (verify_b64_decode(comma + 1, (size_t)(s + end - comma - 1),
                              g->bytes, sizeof g->bytes, &g->len) != 0 ||
            g->len != (g->kind == SIG_V1 ? HMAC_LEN : ED_SIG_LEN)) {
            g->kind = SIG_OTHER;
        }
    }
    return out->n > 0 ? 0 : VERIFY_E_HEADER;
}

static int stripe_item(const char *s, size_t len, struct verify_sigs *out)
{
    const char *eq;
    size_t klen;
    struct verify_sig *g;

    trim(&s, &len);
    eq = memchr(s, '=', len);
    if (eq == NULL || eq == s) {
        return VERIFY_E_HEADER;
    }
    klen = (size_t)(eq - s);
    if (klen == 1 && s[0] == 't') {
        if (out->has_ts ||
            verify_parse_timestamp(eq + 1, len - 2, &out->ts) != 0) {
            return VERIFY_E_HEADER;
        }
        out->has_ts = true;
        memcpy(out->ts_text, eq + 1, len - 2);
        out->ts_len = len - 2;
        return 0;
    }
    if (out->n == ONCE_VERIFY_SIGS_MAX) {
        return VERIFY_E_HEADER;
    }
    g = &out->sigs[out->n++];
    g->kind = SIG_OTHER;
    if (klen == 2 && memcmp(s, "v1", 2) == 0 &&
        hex_decode(eq + 1, len - 3, g->bytes, HMAC_LEN)) {
        g->kind = SIG_V1;
        g->len = HMAC_LEN;
    }
    return 0;
}

int verify_parse_stripe_sigs(const char *s, size_t len, struct verify_sigs *out)
{
    size_t i = 0;

    memset(out, 0, sizeof *out);
    if (s == NULL || len == 0 || len > ONCE_VERIFY_HEADER_MAX ||
        !printable(s, len, true)) {
        return VERIFY_E_HEADER;
    }
    while (i <= len) {
        const char *c = memchr(s + i, ',', len - i);
        size_t end = c != NULL ? (size_t)(c - s) : len;
        int rv = stripe_item(s + i, end - i, out);

        if (rv != 0) {
            return rv;
        }
        i = end + 1;
    }
    return out->has_ts ? 0 : VERIFY_E_HEADER;
}

int verify_check_id(const char *s, size_t len, bool no_dot)
{
    if (s == NULL || len == 0 || len > ONCE_KEY_MAX ||
        !printable(s, len, false)) {
        return VERIFY_E_ID;
    }
    if (no_dot && memchr(s, '.', len) != NULL) {
        return VERIFY_E_ID;
    }
    return 0;
}

int verify_stripe_id(const uint8_t *body, size_t len, char *id, size_t *id_len)
{
    json_error_t jerr;
    json_t *root;
    json_t *jid;
    int rv = VERIFY_E_ID;

    root = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        return VERIFY_E_BODY;
    }
    jid = json_is_object(root) ? json_object_get(root, "id") : NULL;
    if (jid != NULL && json_is_string(jid)) {
        const char *s = json_string_value(jid);
        size_t n = json_string_length(jid);

        if (strlen(s) == n && verify_check_id(s, n, false) == 0) {
            memcpy(id, s, n);
            id[n] = '\0';
            *id_len = n;
            rv = 0;
        }
    }
    json_decref(root);
    return rv;
}

/* ------------------------------------------------------------------------
 * Signatures
 * ---------------------------------------------------------------------- */

/* HMAC-SHA256 over the concatenation of @n parts. */
static bool hmac_parts(const once_verifier *v,
                       const struct verify_key *k,
                       const struct verify_part *parts,
                       size_t n,
                       uint8_t out[HMAC_LEN])
{
    char digest[] = "SHA256";
    OSSL_PARAM params[2];
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(v->hmac);
    size_t outl = 0;
    bool ok;

    if (ctx == NULL) {
        return false;
    }
    params[0] =
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
    params[1] = OSSL_PARAM_construct_end();
    ok = EVP_MAC_init(ctx, k->bytes, k->len, params) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        ok = EVP_MAC_update(ctx, parts[i].p, parts[i].len) == 1;
    }
    ok =
        ok && EVP_MAC_final(ctx, out, &outl, HMAC_LEN) == 1 && outl == HMAC_LEN;
    EVP_MAC_CTX_free(ctx);
    return ok;
}

static bool ed25519_ok(const struct verify_key *k,
                       const struct verify_sig *g,
                       const uint8_t *msg,
                       size_t len)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok;

    if (md == NULL) {
        return false;
    }
    ok = EVP_DigestVerifyInit(md, NULL, NULL, NULL, k->pkey) == 1 &&
         EVP_DigestVerify(md, g->bytes, g->len, msg, len) == 1;
    EVP_MD_CTX_free(md);
    return ok;
}

/* Ed25519 needs the message in one piece (it hashes it twice). */
static uint8_t *join_parts(const struct verify_part *parts,
                           size_t n,
                           size_t *len)
{
    size_t total = 0;
    uint8_t *buf;

    for (size_t i = 0; i < n; i++) {
        total += parts[i].len;
    }
    buf = malloc(total > 0 ? total : 1);
    if (buf == NULL) {
        return NULL;
    }
    total = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(buf + total, parts[i].p, parts[i].len);
        total += parts[i].len;
    }
    *len = total;
    return buf;
}

static bool has_kind(const struct verify_sigs *sigs, enum sig_kind kind)
{
    for (size_t i = 0; i < sigs->n; i++) {
        if (sigs->sigs[i].kind == kind) {
            return true;
        }
    }
    return false;
}

int verify_match(const once_verifier *v,
                 const struct verify_sigs *sigs,
                 const struct verify_part *parts,
                 size_t n_parts,
                 size_t *key_index,
                 bool *ed25519)
{
    uint8_t mac[HMAC_LEN];
    uint8_t *joined = NULL;
    size_t joined_len = 0;
    int rv = VERIFY_E_SIGNATURE;

    for (size_t i = 0; rv == VERIFY_E_SIGNATURE && i < v->n_keys; i++) {
        const struct verify_key *k = &v->keys[i];

        if (k->kind == KEY_HMAC && has_kind(sigs, SIG_V1)) {
            if (!hmac_parts(v, k, parts, n_parts, mac)) {
                rv = VERIFY_E_CRYPTO;
                break;
            }
            for (size_t j = 0; j < sigs->n; j++) {
                if (sigs->sigs[j].kind == SIG_V1 &&
                    CRYPTO_memcmp(sigs->sigs[j].bytes, mac, HMAC_LEN) == 0) {
                    *key_index = i;
                    *ed25519 = false;
                    rv = 0;
                    break;
                }
            }
            continue;
        }
        if (k->kind != KEY_ED25519 || !has_kind(sigs, SIG_V1A)) {
            continue;
        }
        if (joined == NULL &&
            (joined = join_parts(parts, n_parts, &joined_len)) == NULL) {
            rv = VERIFY_E_NOMEM;
            break;
        }
        for (size_t j = 0; j < sigs->n; j++) {
            if (sigs->sigs[j].kind == SIG_V1A &&
                ed25519_ok(k, &sigs->sigs[j], joined, joined_len)) {
                *key_index = i;
                *ed25519 = true;
                rv = 0;
                break;
            }
        }
    }
    OPENSSL_cleanse(mac, sizeof mac);
    free(joined);
    return rv;
}

/* ------------------------------------------------------------------------
 * once_verify
 * ---------------------------------------------------------------------- */

static enum once_verify_status refuse(struct once_verified *out,
                                      enum once_verify_status st,
                                      const char *reason)
{
    snprintf(out->reason, sizeof out->reason, "%s", reason);
    return st;
}

static enum once_verify_status verify_standard(const once_verifier *v,
                                               const struct once_webhook *w,
                                               struct verify_sigs *sigs,
                                               struct once_verified *out)
{
    static const uint8_t dot = '.';
    struct verify_part parts[5];
    uint64_t ts;
    int rv;

    if (verify_check_id(w->id, w->id_len, true) != 0) {
        return refuse(out, ONCE_VERIFY_MALFORMED,
                      "webhook-id missing, over 256 bytes, not printable "
                      "ASCII, or with a '.'");
    }
    if (verify_parse_timestamp(w->timestamp, w->timestamp_len, &ts) != 0) {
        return refuse(out, ONCE_VERIFY_MALFORMED,
                      "webhook-timestamp missing or not 1..12 digits");
    }
    if (verify_parse_standard_sigs(w->signature, w->signature_len, sigs) != 0) {
        return refuse(out, ONCE_VERIFY_MALFORMED,
                      "webhook-signature missing, over its bound, or not "
                      "space-separated version,base64 entries");
    }
    parts[0] = (struct verify_part){(const uint8_t *)w->id, w->id_len};
    parts[1] = (struct verify_part){&dot, 1};
    parts[2] =
        (struct verify_part){(const uint8_t *)w->timestamp, w->timestamp_len};
    parts[3] = (struct verify_part){&dot, 1};
    parts[4] = (struct verify_part){w->body, w->body_len};
    rv = verify_match(v, sigs, parts, 5, &out->secret_index, &out->ed25519);
    if (rv != 0) {
        return refuse(out, ONCE_VERIFY_BAD_SIGNATURE,
                      rv == VERIFY_E_SIGNATURE
                          ? "no signature matches any secret"
                          : "signature check failed (OpenSSL or memory)");
    }
    memcpy(out->id, w->id, w->id_len);
    out->id[w->id_len] = '\0';
    out->id_len = w->id_len;
    out->ts_s = ts;
    return ONCE_VERIFY_OK;
}

static enum once_verify_status verify_stripe(const once_verifier *v,
                                             const struct once_webhook *w,
                                             struct verify_sigs *sigs,
                                             struct once_verified *out)
{
    static const uint8_t dot = '.';
    struct verify_part parts[3];
    int rv;

    if (verify_parse_stripe_sigs(w->signature, w->signature_len, sigs) != 0) {
        return refuse(out, ONCE_VERIFY_MALFORMED,
                      "Stripe-Signature missing, over its bound, or not "
                      "t=<digits>,v1=<hex>,... (one t)");
    }
    parts[0] =
        (struct verify_part){(const uint8_t *)sigs->ts_text, sigs->ts_len};
    parts[1] = (struct verify_part){&dot, 1};
    parts[2] = (struct verify_part){w->body, w->body_len};
    rv = verify_match(v, sigs, parts, 3, &out->secret_index, &out->ed25519);
    if (rv != 0) {
        return refuse(out, ONCE_VERIFY_BAD_SIGNATURE,
                      rv == VERIFY_E_SIGNATURE
                          ? "no v1 signature matches any secret"
                          : "signature check failed (OpenSSL or memory)");
    }
    if (verify_stripe_id(w->body, w->body_len, out->id, &out->id_len) != 0) {
        return refuse(out, ONCE_VERIFY_MALFORMED,
                      "the body is not a JSON object with an \"id\" string "
                      "of 1..256 printable ASCII bytes");
    }
    out->ts_s = sigs->ts;
    return ONCE_VERIFY_OK;
}

enum once_verify_status once_verify(const once_verifier *v,
                                    const struct once_webhook *w,
                                    struct once_verified *out)
{
    struct verify_sigs sigs;
    enum once_verify_status st;

    memset(out, 0, sizeof *out);
    if (v == NULL || w == NULL) {
        return refuse(out, ONCE_VERIFY_MALFORMED, "no verifier or no message");
    }
    if (w->body == NULL && w->body_len > 0) {
        return refuse(out, ONCE_VERIFY_MALFORMED, "body length without body");
    }
    if (w->body_len > ONCE_VERIFY_BODY_MAX) {
        return refuse(out, ONCE_VERIFY_MALFORMED, "body over 16 MiB");
    }
    if (v->n_keys == 0) {
        return refuse(out, ONCE_VERIFY_BAD_SIGNATURE, "no secret configured");
    }
    st = v->scheme == ONCE_SCHEME_STANDARD ? verify_standard(v, w, &sigs, out)
                                           : verify_stripe(v, w, &sigs, out);
    OPENSSL_cleanse(&sigs, sizeof sigs);
    return st;
}

int once_verify_window(uint64_t ts_ms, uint64_t now_ms, uint64_t tolerance_ms)
{
    /* -1 / 0 / 1: a comparison, as memcmp's, not an error (once_verify.h). */
    if (ts_ms < now_ms && now_ms - ts_ms > tolerance_ms) {
        return -1;
    }
    if (ts_ms > now_ms && ts_ms - now_ms > tolerance_ms) {
        return 1;
    }
    return 0;
}

void once_body_hash(const uint8_t *body, size_t len, uint8_t out[32])
{
    unsigned int n = 32;
    static const uint8_t empty = 0;

    EVP_Digest(body != NULL ? body : &empty, len, out, &n, EVP_sha256(), NULL);
}
