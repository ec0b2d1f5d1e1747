/* ingress/upstream.c: one POST to the upstream over libcurl (ingress.h).
 *
 * One easy handle per thread, reused so connections to the upstream stay
 * open between deliveries. The reply body is kept up to
 * INGRESS_UPSTREAM_BODY_MAX bytes (what the cluster can store with the
 * record); the rest is read and dropped, so a large answer neither fails
 * the delivery nor grows memory. No signals (CURLOPT_NOSIGNAL): the
 * process has many threads. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingress/ingress.h"

void *ingress_upstream_new(void)
{
    return curl_easy_init();
}

void ingress_upstream_free(void *h)
{
    if (h != NULL) {
        curl_easy_cleanup(h);
    }
}

void ingress_upstream_reply_clear(struct upstream_reply *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct upstream_reply *r = arg;
    size_t len = size * n;
    size_t cap = r->cap != 0 ? r->cap : INGRESS_UPSTREAM_BODY_MAX;
    size_t room = cap - r->body_len;
    size_t take = len < room ? len : room;

    if (take > 0) {
        uint8_t *b = realloc(r->body, r->body_len + take);

        if (b == NULL) {
            return 0; /* curl fails the transfer: a retryable failure */
        }
        r->body = b;
        memcpy(r->body + r->body_len, p, take);
        r->body_len += take;
    }
    // cppcheck-suppress knownConditionTrueFalse ; false positive: room < len
    // once the body reaches INGRESS_UPSTREAM_BODY_MAX
    if (take < len) {
        r->truncated = true;
    }
    return len;
}

int ingress_upstream_post(void *h,
                          const struct upstream_request *rq,
                          struct upstream_reply *reply)
{
    CURL *c = h;
    struct curl_slist *hdrs = NULL;
    char *ct = NULL;
    CURLcode rc;
    int rv = 0;

    memset(reply, 0, sizeof *reply);
    if (c == NULL) {
        snprintf(reply->error, sizeof reply->error, "no curl handle");
        return INGRESS_E_UPSTREAM;
    }
    curl_easy_reset(c);
    for (size_t i = 0; rq->headers != NULL && rq->headers[i] != NULL; i++) {
        struct curl_slist *n = curl_slist_append(hdrs, rq->headers[i]);

        if (n == NULL) {
            curl_slist_free_all(hdrs);
            snprintf(reply->error, sizeof reply->error, "out of memory");
            return INGRESS_E_UPSTREAM;
        }
        hdrs = n;
    }
    curl_easy_setopt(c, CURLOPT_URL, rq->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)rq->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)rq->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)rq->timeout_ms);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, reply);
    rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        snprintf(reply->error, sizeof reply->error, "%s",
                 curl_easy_strerror(rc));
        reply->status = 0;
        rv = INGRESS_E_UPSTREAM;
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply->status);
        if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK &&
            ct != NULL) {
            snprintf(reply->ctype, sizeof reply->ctype, "%s", ct);
        }
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdrs);
    return rv;
}

/* ------------------------------------------------------------------------
 * Any method, the reply's headers kept (--mode idempotency-key)
 * ---------------------------------------------------------------------- */

#define UPSTREAM_HEADERS_MAX (16u << 10)

/* Each header line of the last response (a 1xx's are dropped when the
 * next status line comes), kept as "Name: value\n" up to
 * UPSTREAM_HEADERS_MAX bytes; past that, headers_over. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct upstream_reply *r = arg;
    size_t len = size * n;

    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        r->headers_len = 0; /* a new response begins */
        r->headers_over = false;
        return len;
    }
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r')) {
        len--;
    }
    if (len == 0) {
        return size * n;
    }
    if (r->headers_len + len + 1 > UPSTREAM_HEADERS_MAX) {
        r->headers_over = true;
        return size * n;
    }
    if (r->headers == NULL) {
        r->headers = malloc(UPSTREAM_HEADERS_MAX);
        if (r->headers == NULL) {
            return 0; /* curl fails the transfer */
        }
    }
    memcpy(r->headers + r->headers_len, p, len);
    r->headers[r->headers_len + len] = '\n';
    r->headers_len += len + 1;
    return size * n;
}

static void set_method(CURL *c, const struct upstream_call *rq)
{
    if (strcmp(rq->method, "GET") == 0 && rq->body_len == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(rq->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)rq->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)rq->body_len);
        if (strcmp(rq->method, "POST") != 0) {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
        }
    }
}

int ingress_upstream_call(void *h,
                          const struct upstream_call *rq,
                          struct upstream_reply *reply)
{
    CURL *c = h;
    struct curl_slist *hdrs = NULL;
    CURLcode rc;

    memset(reply, 0, sizeof *reply);
    reply->cap = rq->body_cap;
    if (c == NULL) {
        snprintf(reply->error, sizeof reply->error, "no curl handle");
        return INGRESS_E_UPSTREAM;
    }
    curl_easy_reset(c);
    for (size_t i = 0; rq->headers != NULL && rq->headers[i] != NULL; i++) {
        struct curl_slist *n = curl_slist_append(hdrs, rq->headers[i]);

        if (n == NULL) {
            curl_slist_free_all(hdrs);
            snprintf(reply->error, sizeof reply->error, "out of memory");
            return INGRESS_E_UPSTREAM;
        }
        hdrs = n;
    }
    curl_easy_setopt(c, CURLOPT_URL, rq->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    set_method(c, rq);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)rq->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)rq->timeout_ms);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, reply);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, reply);
    rc = curl_easy_perform(c);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        snprintf(reply->error, sizeof reply->error, "%s",
                 curl_easy_strerror(rc));
        reply->status = 0;
        return INGRESS_E_UPSTREAM;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply->status);
    return 0;
}
