/* ingress/idem_request.c: one request of --mode idempotency-key routed,
 * its key decoded and its fingerprint computed (pure; idem.h).
 *
 * Everything here reads attacker-controlled bytes: every length is checked
 * before use and nothing is copied past its bound. A request is refused
 * (400) rather than guessed at: two key headers, a key that is empty,
 * longer than IDEM_KEY_MAX, or not printable ASCII, a path or query with
 * bytes a URL cannot carry. */
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>

#include "common/assert.h"
#include "ingress/idem.h"

bool idem_names_has(const struct idem_names *l, const char *name, size_t len)
{
    for (size_t i = 0; i < l->n; i++) {
        if (strlen(l->name[i]) == len &&
            strncasecmp(l->name[i], name, len) == 0) {
            return true;
        }
    }
    return false;
}

bool idem_hop_header(const char *name, size_t len)
{
    static const char *const hop[] = {"Connection",
                                      "Keep-Alive",
                                      "Proxy-Connection",
                                      "TE",
                                      "Trailer",
                                      "Transfer-Encoding",
                                      "Upgrade",
                                      "Host",
                                      "Content-Length",
                                      "Expect",
                                      "Proxy-Authorization"};

    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++) {
        if (strlen(hop[i]) == len && strncasecmp(hop[i], name, len) == 0) {
            return true;
        }
    }
    return false;
}

size_t idem_header_find(const struct idem_http_request *rq,
                        const char *name,
                        struct idem_header *out)
{
    size_t n = 0;
    size_t len = strlen(name);

    for (size_t i = 0; i < rq->n_headers; i++) {
        const struct idem_header *h = &rq->headers[i];

        if (h->name_len == len && strncasecmp(h->name, name, len) == 0) {
            if (n++ == 0 && out != NULL) {
                *out = *h;
            }
        }
    }
    return n;
}

static bool printable(const char *s, size_t n, bool space)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch > 0x7e || ch < (space ? 0x20 : 0x21)) {
            return false;
        }
    }
    return true;
}

/* A bare token-ish key, or an sf-string ("..." with \" and \\ escapes,
 * RFC 8941 3.3.3), decoded into out->key. */
static bool decode_key(const char *v, size_t n, struct idem_parsed *out)
{
    size_t j = 0;

    if (n >= 2 && v[0] == '"') {
        if (v[n - 1] != '"') {
            return false;
        }
        for (size_t i = 1; i + 1 < n; i++) {
            char ch = v[i];

            if (ch == '"') {
                return false;
            }
            if (ch == '\\') {
                if (i + 2 >= n || (v[i + 1] != '"' && v[i + 1] != '\\')) {
                    return false;
                }
                ch = v[++i];
            }
            if (j == IDEM_KEY_MAX || !printable(&ch, 1, true)) {
                return false;
            }
            out->key[j++] = ch;
        }
    } else {
        if (n > IDEM_KEY_MAX || !printable(v, n, false)) {
            return false;
        }
        memcpy(out->key, v, n);
        j = n;
    }
    out->key[j] = '\0';
    out->key_len = j;
    return j > 0;
}

static void hash_field(EVP_MD_CTX *md, const void *p, size_t n, bool present)
{
    uint8_t len[9];
    uint64_t v = n;

    len[0] = present ? 1 : 0;
    for (int i = 8; i >= 1; i--) {
        len[i] = (uint8_t)v;
        v >>= 8;
    }
    EVP_DigestUpdate(md, len, sizeof len);
    if (n > 0) {
        EVP_DigestUpdate(md, p, n);
    }
}

/* Each field length-prefixed with a presence byte, so no two requests
 * that differ in any field share the input. */
static bool fingerprint(const struct idem_config *c,
                        const struct idem_http_request *rq,
                        uint8_t out[IDEM_FINGERPRINT_LEN])
{
    static const char tag[] = "once-idempotency-key-v1";
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned len = 0;
    bool ok;

    if (md == NULL) {
        return false;
    }
    ok = EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    if (ok) {
        hash_field(md, tag, sizeof tag - 1, true);
        hash_field(md, rq->method, strlen(rq->method), true);
        hash_field(md, rq->path, strlen(rq->path), true);
        hash_field(md, rq->query, rq->query != NULL ? strlen(rq->query) : 0,
                   rq->query != NULL);
        for (size_t i = 0; i < c->fingerprint_headers.n; i++) {
            struct idem_header h;
            size_t k = idem_header_find(rq, c->fingerprint_headers.name[i], &h);

            hash_field(md, k > 0 ? h.value : NULL, k > 0 ? h.value_len : 0,
                       k > 0);
        }
        hash_field(md, rq->body, rq->body_len, true);
        ok = EVP_DigestFinal_ex(md, out, &len) == 1 &&
             len == IDEM_FINGERPRINT_LEN;
    }
    EVP_MD_CTX_free(md);
    return ok;
}

static void refuse(struct idem_parsed *out, unsigned status, const char *why)
{
    out->route = IDEM_REFUSE;
    out->status = status;
    out->reason = why;
}

static bool take_scope(const struct idem_config *c,
                       const char *default_scope,
                       const struct idem_http_request *rq,
                       struct idem_parsed *out)
{
    struct idem_header h;

    if (c->scope_header[0] == '\0' && default_scope == NULL) {
        refuse(out, 403,
               "the scope is the client certificate's CN: a verified "
               "certificate whose CN is 1..128 visible ASCII bytes is "
               "required");
        return false;
    }
    if (c->scope_header[0] == '\0') {
        size_t n = strlen(default_scope);

        ONCE_ASSERT(n > 0 && n <= ONCE_SCOPE_MAX, "config.c checks --scope");
        memcpy(out->scope, default_scope, n + 1);
        out->scope_len = n;
        return true;
    }
    if (idem_header_find(rq, c->scope_header, &h) != 1 || h.value_len == 0 ||
        h.value_len > ONCE_SCOPE_MAX ||
        !printable(h.value, h.value_len, false)) {
        refuse(out, 400,
               "the scope header is missing, repeated, empty, over 128 bytes "
               "or not printable ASCII");
        return false;
    }
    memcpy(out->scope, h.value, h.value_len);
    out->scope[h.value_len] = '\0';
    out->scope_len = h.value_len;
    return true;
}

void idem_parse(const struct idem_config *c,
                const char *default_scope,
                const struct idem_http_request *rq,
                struct idem_parsed *out)
{
    struct idem_header h;
    size_t nkeys;

    memset(out, 0, sizeof *out);
    if (!idem_names_has(&c->methods, rq->method, strlen(rq->method))) {
        out->route = IDEM_PASS;
        return;
    }
    nkeys = idem_header_find(rq, c->key_header, &h);
    if (nkeys == 0) {
        if (c->require_key) {
            refuse(out, 400, "this request needs an idempotency key header");
        } else {
            out->route = IDEM_PASS;
        }
        return;
    }
    if (nkeys > 1) {
        refuse(out, 400, "more than one idempotency key header");
        return;
    }
    if (!decode_key(h.value, h.value_len, out)) {
        refuse(out, 400,
               "the idempotency key must be 1..255 bytes of printable ASCII "
               "(a token or a quoted string)");
        return;
    }
    if (rq->path[0] != '/' || !printable(rq->path, strlen(rq->path), false) ||
        (rq->query != NULL &&
         !printable(rq->query, strlen(rq->query), false))) {
        refuse(out, 400, "the path or query has bytes a URL cannot carry");
        return;
    }
    if (!take_scope(c, default_scope, rq, out)) {
        return;
    }
    if (!fingerprint(c, rq, out->fingerprint)) {
        refuse(out, 500, "the fingerprint could not be computed");
        return;
    }
    out->route = IDEM_CLAIM;
}
