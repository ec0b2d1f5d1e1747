/* ingress/idem_store.c: the stored response of --mode idempotency-key
 * and the problem bodies (pure; idem.h).
 *
 * The encoding is what a replay sends back byte for byte, so decode
 * accepts only what encode can produce: any other record result (one
 * completed by another client of the cluster, a corrupt one) is refused
 * and answered as such, never half-sent. */
#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "common/text.h"
#include "ingress/idem.h"

static const uint8_t magic[4] = {'O', 'I', 'K', '1'};

static bool tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
           (ch >= 'A' && ch <= 'Z') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static bool valid_header(const struct idem_header *h)
{
    if (h->name_len == 0 || h->name_len > IDEM_NAME_MAX ||
        h->value_len > IDEM_STORED_HEADERS_MAX) {
        return false;
    }
    for (size_t i = 0; i < h->name_len; i++) {
        if (!tchar((unsigned char)h->name[i])) {
            return false;
        }
    }
    for (size_t i = 0; i < h->value_len; i++) {
        unsigned char ch = (unsigned char)h->value[i];

        if (ch == '\r' || ch == '\n' || ch == '\0') {
            return false;
        }
    }
    return true;
}

static uint8_t *put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
    return p + bytes;
}

static uint64_t get_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

size_t idem_store_encode(const struct idem_stored *s, uint8_t *out, size_t cap)
{
    size_t hlen = 0;
    size_t need;
    uint8_t *p = out;

    if (s->status < 100 || s->status > 599 || s->flags > 1 ||
        s->n_headers > IDEM_STORED_ENTRIES_MAX || s->body_len > UINT32_MAX) {
        return 0;
    }
    for (size_t i = 0; i < s->n_headers; i++) {
        if (!valid_header(&s->headers[i])) {
            return 0;
        }
        hlen += 3 + s->headers[i].name_len + s->headers[i].value_len;
    }
    if (hlen > IDEM_STORED_HEADERS_MAX) {
        return 0;
    }
    need = sizeof magic + 1 + 2 + 2 + hlen + 4 + s->body_len;
    if (need > cap) {
        return 0;
    }
    memcpy(p, magic, sizeof magic);
    p += sizeof magic;
    *p++ = (uint8_t)s->flags;
    p = put_be(p, s->status, 2);
    p = put_be(p, hlen, 2);
    for (size_t i = 0; i < s->n_headers; i++) {
        const struct idem_header *h = &s->headers[i];

        p = put_be(p, h->name_len, 1);
        memcpy(p, h->name, h->name_len);
        p += h->name_len;
        p = put_be(p, h->value_len, 2);
        if (h->value_len > 0) {
            memcpy(p, h->value, h->value_len);
        }
        p += h->value_len;
    }
    p = put_be(p, s->body_len, 4);
    if (s->body_len > 0) {
        memcpy(p, s->body, s->body_len);
    }
    p += s->body_len;
    ONCE_ASSERT((size_t)(p - out) == need, "the lengths summed above");
    return need;
}

static bool decode_headers(const uint8_t *p, size_t hlen, struct idem_stored *s)
{
    const uint8_t *end = p + hlen;

    while (p < end) {
        struct idem_header *h;

        if (s->n_headers == IDEM_STORED_ENTRIES_MAX) {
            return false;
        }
        h = &s->headers[s->n_headers];
        h->name_len = p[0];
        p++;
        if ((size_t)(end - p) < h->name_len + 2) {
            return false;
        }
        h->name = (const char *)p;
        p += h->name_len;
        h->value_len = (size_t)get_be(p, 2);
        p += 2;
        if ((size_t)(end - p) < h->value_len) {
            return false;
        }
        h->value = (const char *)p;
        p += h->value_len;
        if (!valid_header(h)) {
            return false;
        }
        s->n_headers++;
    }
    return true;
}

bool idem_store_decode(const uint8_t *in, size_t len, struct idem_stored *s)
{
    size_t hlen;
    size_t blen;

    memset(s, 0, sizeof *s);
    if (len < IDEM_ENC_OVERHEAD - 3 || memcmp(in, magic, sizeof magic) != 0) {
        return false;
    }
    s->flags = in[4];
    s->status = (unsigned)get_be(in + 5, 2);
    hlen = (size_t)get_be(in + 7, 2);
    if (s->flags > 1 || s->status < 100 || s->status > 599 ||
        hlen > IDEM_STORED_HEADERS_MAX || len - 9 < hlen + 4) {
        return false;
    }
    if (!decode_headers(in + 9, hlen, s)) {
        return false;
    }
    blen = (size_t)get_be(in + 9 + hlen, 4);
    if (len - 9 - hlen - 4 != blen) {
        return false;
    }
    s->body = in + 9 + hlen + 4;
    s->body_len = blen;
    return true;
}

bool idem_store_pick_headers(const struct idem_names *allow,
                             const char *raw,
                             size_t raw_len,
                             struct idem_stored *s)
{
    const char *p = raw;
    const char *end = raw + raw_len;
    size_t total = 0;

    s->n_headers = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl != NULL ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        struct idem_header h;

        if (colon != NULL && idem_names_has(allow, p, (size_t)(colon - p))) {
            const char *v = colon + 1;

            while (v < le && (*v == ' ' || *v == '\t')) {
                v++;
            }
            h = (struct idem_header){p, (size_t)(colon - p), v,
                                     (size_t)(le - v)};
            while (h.value_len > 0 && (h.value[h.value_len - 1] == '\r' ||
                                       h.value[h.value_len - 1] == ' ')) {
                h.value_len--;
            }
            total += 3 + h.name_len + h.value_len;
            if (s->n_headers == IDEM_STORED_ENTRIES_MAX ||
                total > IDEM_STORED_HEADERS_MAX || !valid_header(&h)) {
                return false;
            }
            s->headers[s->n_headers++] = h;
        }
        p = le + (nl != NULL ? 1 : 0);
    }
    return true;
}

size_t idem_problem(unsigned status,
                    const char *title,
                    const char *detail,
                    char *buf,
                    size_t cap)
{
    char esc[1024];
    int n;

    text_json_escape(detail, esc, sizeof esc);
    n = snprintf(buf, cap,
                 "{\"type\":\"about:blank\",\"title\":\"%s\",\"status\":%u,"
                 "\"detail\":\"%s\"}\n",
                 title, status, esc);
    if (n < 0) {
        return 0;
    }
    return (size_t)n < cap ? (size_t)n : cap > 0 ? cap - 1 : 0;
}
