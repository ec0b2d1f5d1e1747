/* ingress/decide.c: what once-ingress answers, and how a delivered
 * message's answer is stored (pure; ingress.h).
 *
 * The HTTP codes follow one rule: 2xx only when the message is delivered
 * and recorded; 4xx when retrying the same bytes can never help (bad
 * signature, malformed, outside the window, refused for good) or must
 * wait for another owner (409); 5xx when it can (503, Retry-After). */
#include <stdio.h>
#include <string.h>

#include "ingress/ingress.h"

enum upstream_class ingress_upstream_class(long s)
{
    if (s >= 200 && s <= 299) {
        return UPSTREAM_OK;
    }
    /* 408 and 429 say "not now", not "never". */
    if (s >= 400 && s <= 499 && s != 408 && s != 429) {
        return UPSTREAM_TERMINAL;
    }
    return UPSTREAM_RETRYABLE;
}

static uint64_t ceil_s(uint64_t ms)
{
    return ms == 0 ? 1 : (ms + 999) / 1000;
}

struct ingress_answer ingress_answer_for(enum once_vc_outcome o,
                                         uint64_t retry_after_ms,
                                         uint64_t unavailable_ms)
{
    switch (o) {
        case ONCE_VC_ACCEPTED:
            return (struct ingress_answer){200, "accepted", 0};
        case ONCE_VC_DUPLICATE:
            return (struct ingress_answer){200, "duplicate", 0};
        case ONCE_VC_REPLAYED:
            return (struct ingress_answer){409, "replayed", 0};
        case ONCE_VC_IN_PROGRESS:
            return (struct ingress_answer){409, "in_progress",
                                           ceil_s(retry_after_ms)};
        case ONCE_VC_CONFLICT:
            return (struct ingress_answer){409, "conflict", 0};
        case ONCE_VC_FAILED:
            return (struct ingress_answer){422, "failed", 0};
        case ONCE_VC_STALE:
            return (struct ingress_answer){400, "stale", 0};
        case ONCE_VC_FUTURE:
            return (struct ingress_answer){400, "future", 0};
        case ONCE_VC_BAD_SIGNATURE:
            return (struct ingress_answer){401, "bad_signature", 0};
        case ONCE_VC_MALFORMED:
            return (struct ingress_answer){400, "malformed", 0};
        case ONCE_VC_REFUSED:
            /* The cluster refused what this ingress asked (a --tolerance over
             * its max_window, a --lease over its max_lease): configuration. */
            return (struct ingress_answer){500, "refused", 0};
        case ONCE_VC_UNAVAILABLE:
        default:
            return (struct ingress_answer){503, "unavailable",
                                           ceil_s(unavailable_ms)};
    }
}

/* Encoding: "once-ingress/1 <status> <ctype>\n" then the body. */
#define RESULT_MAGIC "once-ingress/1 "

size_t ingress_result_encode(long status,
                             const char *ctype,
                             const uint8_t *body,
                             size_t body_len,
                             uint8_t *out,
                             size_t cap)
{
    char ct[INGRESS_CTYPE_MAX + 1];
    int n;
    size_t i;

    /* Only visible bytes and spaces of the content type are kept: it is
     * given back as a header. */
    for (i = 0; ctype != NULL && ctype[i] != '\0' && i < INGRESS_CTYPE_MAX;
         i++) {
        unsigned char c = (unsigned char)ctype[i];

        ct[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    ct[i] = '\0';
    n = snprintf((char *)out, cap, RESULT_MAGIC "%ld %s\n", status, ct);
    if (n < 0 || (size_t)n >= cap) {
        return 0;
    }
    if (body_len > cap - (size_t)n) {
        body_len = cap - (size_t)n;
    }
    if (body_len > 0) {
        memcpy(out + n, body, body_len);
    }
    return (size_t)n + body_len;
}

bool ingress_result_decode(const uint8_t *in,
                           size_t len,
                           long *status,
                           char ctype[INGRESS_CTYPE_MAX + 1],
                           const uint8_t **body,
                           size_t *body_len)
{
    const size_t m = sizeof RESULT_MAGIC - 1;
    const uint8_t *nl;
    const uint8_t *p;
    long s = 0;
    size_t digits = 0;
    size_t ct;

    if (in == NULL || len < m || memcmp(in, RESULT_MAGIC, m) != 0) {
        return false;
    }
    nl = memchr(in, '\n', len);
    if (nl == NULL) {
        return false;
    }
    for (p = in + m; p < nl && *p >= '0' && *p <= '9' && digits < 3;
         p++, digits++) {
        s = s * 10 + (*p - '0');
    }
    if (digits != 3 || p == nl || *p != ' ') {
        return false;
    }
    p++;
    ct = (size_t)(nl - p);
    if (ct > INGRESS_CTYPE_MAX) {
        return false;
    }
    memcpy(ctype, p, ct);
    ctype[ct] = '\0';
    *status = s;
    *body = nl + 1;
    *body_len = len - (size_t)(nl + 1 - in);
    return true;
}
