/* fuzz_idem_request: libFuzzer target for once-ingress --mode
 * idempotency-key's request parser (src/ingress/idem_request.c), which
 * reads every covered request's method, path, query, headers and body.
 *
 * Input: a flags byte (bit 0 --require-key, bit 1 --scope-header
 * X-Tenant, bit 2 --fingerprint-headers X-Tenant,Authorization, bit 3 no
 * default scope: --scope-from-cert without a certificate), then
 * lines: method, path, query ("-" for none), "Name: value" headers up to
 * an empty line, and the rest is the body.
 *
 * Checked, besides "no crash, no leak, no UB":
 *   - the route is one of the three; a refusal has a status and reason;
 *   - a claim's key is 1..255 printable ASCII bytes and its scope 1..128;
 *   - the same request parses to the same fingerprint.
 *
 * Run: ./tests/fuzz/fuzz_idem_request -max_total_time=60 WORKDIR
 *      tests/fuzz/corpus/idem_request */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingress/idem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz_idem_request: %s:%d: check failed: %s\n", \
                    __FILE__, __LINE__, #cond);                             \
            abort();                                                        \
        }                                                                   \
    } while (0)

#define HEADERS_MAX 64

/* The next line of [*p, end) as a NUL-terminated copy. */
static char *line(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    size_t n = nl != NULL ? (size_t)(nl - *p) : (size_t)(end - *p);
    char *s = malloc(n + 1);

    if (s != NULL) {
        memcpy(s, *p, n);
        s[n] = '\0';
    }
    *p += n + (nl != NULL ? 1 : 0);
    return s;
}

static void check_parsed(const struct idem_parsed *o)
{
    CHECK(o->route == IDEM_PASS || o->route == IDEM_CLAIM ||
          o->route == IDEM_REFUSE);
    if (o->route == IDEM_REFUSE) {
        CHECK(o->status >= 400 && o->status <= 599 && o->reason != NULL);
    }
    if (o->route == IDEM_CLAIM) {
        CHECK(o->key_len >= 1 && o->key_len <= IDEM_KEY_MAX);
        CHECK(strlen(o->key) == o->key_len);
        for (size_t i = 0; i < o->key_len; i++) {
            CHECK(o->key[i] >= 0x20 && o->key[i] <= 0x7e);
        }
        CHECK(o->scope_len >= 1 && o->scope_len <= ONCE_SCOPE_MAX);
        CHECK(strlen(o->scope) == o->scope_len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data + (size > 0 ? 1 : 0);
    const uint8_t *end = data + size;
    struct idem_config c;
    struct idem_header h[HEADERS_MAX];
    char *lines[HEADERS_MAX];
    size_t nh = 0;
    char *method, *path, *query;
    struct idem_http_request rq;
    struct idem_parsed a, b;

    if (size == 0) {
        return 0;
    }
    idem_config_defaults(&c);
    c.require_key = (data[0] & 1) != 0;
    if (data[0] & 2) {
        snprintf(c.scope_header, sizeof c.scope_header, "X-Tenant");
    }
    if (data[0] & 4) {
        c.fingerprint_headers.n = 2;
        snprintf(c.fingerprint_headers.name[0], IDEM_NAME_MAX, "X-Tenant");
        snprintf(c.fingerprint_headers.name[1], IDEM_NAME_MAX, "Authorization");
    }
    method = line(&p, end);
    path = line(&p, end);
    query = line(&p, end);
    while (p < end && nh < HEADERS_MAX) {
        char *l = line(&p, end);
        char *colon;

        if (l == NULL || l[0] == '\0') {
            free(l);
            break;
        }
        colon = strchr(l, ':');
        lines[nh] = l;
        h[nh] = colon != NULL
                    ? (struct idem_header){l, (size_t)(colon - l), colon + 1,
                                           strlen(colon + 1)}
                    : (struct idem_header){l, strlen(l), "", 0};
        nh++;
    }
    if (method != NULL && path != NULL && query != NULL) {
        rq = (struct idem_http_request){method,
                                        path,
                                        strcmp(query, "-") == 0 ? NULL : query,
                                        h,
                                        nh,
                                        p,
                                        (size_t)(end - p)};
        const char *scope = (data[0] & 8) ? NULL : "fuzz";

        idem_parse(&c, scope, &rq, &a);
        check_parsed(&a);
        idem_parse(&c, scope, &rq, &b);
        CHECK(a.route == b.route);
        if (a.route == IDEM_CLAIM) {
            CHECK(memcmp(a.fingerprint, b.fingerprint, IDEM_FINGERPRINT_LEN) ==
                  0);
        }
    }
    for (size_t i = 0; i < nh; i++) {
        free(lines[i]);
    }
    free(method);
    free(path);
    free(query);
    return 0;
}
