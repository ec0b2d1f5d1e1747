/* fuzz_idem_store: libFuzzer target for the stored response encoding of
 * once-ingress --mode idempotency-key (src/ingress/idem_store.c): what a
 * replay decodes from a record's result, which any client of the cluster
 * may have completed.
 *
 * Input: the first byte chooses the use. Even: the rest is a record result
 * to decode. Odd: the rest is an upstream's header lines to pick from
 * (the allow-list Content-Type, Location), then encode and decode.
 *
 * Checked, besides "no crash, no leak, no UB":
 *   - what decodes re-encodes to exactly the input (one spelling);
 *   - every decoded header is a token name and a value without CR, LF or
 *     NUL, within the bounds;
 *   - picked headers encode (within the record's result) and decode to
 *     the same headers.
 *
 * Run: ./tests/fuzz/fuzz_idem_store -max_total_time=60 WORKDIR
 *      tests/fuzz/corpus/idem_store */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingress/idem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "fuzz_idem_store: %s:%d: check failed: %s\n", \
                    __FILE__, __LINE__, #cond);                           \
            abort();                                                      \
        }                                                                 \
    } while (0)

static void check_headers(const struct idem_stored *s)
{
    CHECK(s->n_headers <= IDEM_STORED_ENTRIES_MAX);
    for (size_t i = 0; i < s->n_headers; i++) {
        const struct idem_header *h = &s->headers[i];

        CHECK(h->name_len >= 1 && h->name_len <= IDEM_NAME_MAX);
        CHECK(memchr(h->value, '\r', h->value_len) == NULL);
        CHECK(memchr(h->value, '\n', h->value_len) == NULL);
        CHECK(memchr(h->value, '\0', h->value_len) == NULL);
    }
}

static void decode_use(const uint8_t *in, size_t len)
{
    struct idem_stored s;
    uint8_t *out;
    size_t n;

    if (!idem_store_decode(in, len, &s)) {
        return;
    }
    CHECK(s.status >= 100 && s.status <= 599);
    check_headers(&s);
    out = malloc(len + 1);
    CHECK(out != NULL);
    n = idem_store_encode(&s, out, len + 1);
    CHECK(n == len && memcmp(out, in, len) == 0);
    free(out);
}

static void pick_use(const uint8_t *in, size_t len)
{
    struct idem_names allow = {0};
    struct idem_stored s = {0}, d;
    uint8_t *out = malloc(ONCE_RESULT_MAX);
    size_t n;

    CHECK(out != NULL);
    allow.n = 2;
    snprintf(allow.name[0], IDEM_NAME_MAX, "Content-Type");
    snprintf(allow.name[1], IDEM_NAME_MAX, "Location");
    if (idem_store_pick_headers(&allow, (const char *)in, len, &s)) {
        check_headers(&s);
        s.status = 201;
        s.body = in;
        s.body_len = len > IDEM_RESPONSE_MAX ? IDEM_RESPONSE_MAX : len;
        n = idem_store_encode(&s, out, ONCE_RESULT_MAX);
        CHECK(n > 0 && n <= ONCE_RESULT_MAX);
        CHECK(idem_store_decode(out, n, &d));
        CHECK(d.n_headers == s.n_headers && d.body_len == s.body_len);
        for (size_t i = 0; i < s.n_headers; i++) {
            CHECK(d.headers[i].value_len == s.headers[i].value_len);
            CHECK(memcmp(d.headers[i].value, s.headers[i].value,
                         s.headers[i].value_len) == 0);
        }
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    if (data[0] & 1) {
        pick_use(data + 1, size - 1);
    } else {
        decode_use(data + 1, size - 1);
    }
    return 0;
}
