/* ingress/idem_server.c: --mode idempotency-key's side of the HTTP server
 * (ingress.h): a request read by server.c turned into an
 * idem_http_request, and the pipeline's answer into a libmicrohttpd
 * response with the mode's headers.
 *
 * server.c keeps the listeners, the body bound (--max-body, 413) and the
 * per-thread resources; libmicrohttpd bounds the request line and headers
 * (431 past HEADER_MEMORY), and this file bounds their count
 * (HEADERS_MAX, 431). Every answer carries Once-Outcome and Once-Retention
 * (the seconds a key and its stored response live: the draft's published
 * expiry policy). */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ingress/ingress.h"

#define HEADERS_MAX 128

struct collect
{
    struct idem_header h[HEADERS_MAX];
    size_t n;
    bool over;
    /* the query rebuilt from libmicrohttpd's argument list */
    char *query;
    size_t qlen;
    size_t qcap;
    bool has_query;
    bool oom;
};

static uint64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

size_t ingress_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    const struct ingress *g = cls;

    (void)conn;
    return g->cfg.mode == INGRESS_MODE_IDEM ? strlen(s) : MHD_http_unescape(s);
}

static enum MHD_Result on_header(void *cls,
                                 enum MHD_ValueKind kind,
                                 const char *key,
                                 size_t key_size,
                                 const char *value,
                                 size_t value_size)
{
    struct collect *c = cls;

    (void)kind;
    if (c->n == HEADERS_MAX) {
        c->over = true;
        return MHD_NO;
    }
    c->h[c->n++] =
        (struct idem_header){key, key_size, value != NULL ? value : "",
                             value != NULL ? value_size : 0};
    return MHD_YES;
}

static bool q_append(struct collect *c, const char *p, size_t n)
{
    if (c->qlen + n + 1 > c->qcap) {
        size_t cap = (c->qlen + n + 1) * 2;
        char *q = realloc(c->query, cap);

        if (q == NULL) {
            c->oom = true;
            return false;
        }
        c->query = q;
        c->qcap = cap;
    }
    memcpy(c->query + c->qlen, p, n);
    c->qlen += n;
    c->query[c->qlen] = '\0';
    return true;
}

/* The raw query again: the unescape callback above left each argument as
 * it came, and libmicrohttpd keeps their order. */
static enum MHD_Result on_arg(void *cls,
                              enum MHD_ValueKind kind,
                              const char *key,
                              size_t key_size,
                              const char *value,
                              size_t value_size)
{
    struct collect *c = cls;

    (void)kind;
    if ((c->has_query && !q_append(c, "&", 1)) || !q_append(c, key, key_size) ||
        (value != NULL &&
         (!q_append(c, "=", 1) || !q_append(c, value, value_size)))) {
        return MHD_NO;
    }
    c->has_query = true;
    return MHD_YES;
}

static enum MHD_Result respond(struct ingress *g,
                               struct MHD_Connection *conn,
                               const struct idem_response *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r->body_len, r->body, MHD_RESPMEM_MUST_COPY);
    const char *p = r->headers;
    const char *end = p != NULL ? p + r->headers_len : p;
    enum MHD_Result rv;
    char num[32];

    if (resp == NULL) {
        return MHD_NO;
    }
    while (p != NULL && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *colon = memchr(p, ':', (size_t)(nl - p));

        if (colon != NULL) {
            char *line = strndup(p, (size_t)(nl - p));

            if (line != NULL) {
                line[colon - p] = '\0';
                MHD_add_response_header(resp, line, line + (colon - p) + 2);
                free(line);
            }
        }
        p = nl + 1;
    }
    MHD_add_response_header(resp, "Once-Outcome", r->outcome);
    snprintf(num, sizeof num, "%llu",
             (unsigned long long)(g->cfg.idem.retention_ms / 1000));
    MHD_add_response_header(resp, "Once-Retention", num);
    if (r->replayed) {
        MHD_add_response_header(resp, "Idempotent-Replayed", "true");
    }
    if (r->retry_after > 0) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)r->retry_after);
        MHD_add_response_header(resp, "Retry-After", num);
    }
    rv = MHD_queue_response(conn, r->status, resp);
    MHD_destroy_response(resp);
    return rv;
}

int idem_too_large(struct ingress *g, struct MHD_Connection *conn)
{
    struct idem_response r = {0};
    enum MHD_Result rv;
    char d[96];

    atomic_fetch_add_explicit(&g->metrics.too_large, 1, memory_order_relaxed);
    snprintf(d, sizeof d, "the body is over --max-body (%zu bytes)",
             g->cfg.max_body);
    idem_answer_problem(&r, 413, "too_large", "Content Too Large", d);
    ingress_metrics_answer(&g->metrics, 413, 0);
    rv = respond(g, conn, &r);
    idem_response_clear(&r);
    return rv;
}

int idem_serve(struct ingress *g,
               struct ingress_worker *wk,
               struct MHD_Connection *conn,
               const char *method,
               const char *url,
               const uint8_t *body,
               size_t len)
{
    struct collect *c = calloc(1, sizeof *c);
    struct idem_http_request rq = {0};
    struct idem_response out = {0};
    uint64_t t0 = now_us();
    enum MHD_Result rv;

    if (c == NULL || wk == NULL) {
        idem_answer_problem(&out, 503, "unavailable", "Service Unavailable",
                            "out of memory");
        out.retry_after = 1;
    } else {
        MHD_get_connection_values_n(conn, MHD_HEADER_KIND, on_header, c);
        MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, on_arg, c);
        if (c->over) {
            idem_answer_problem(&out, 431, "bad_request",
                                "Request Header Fields Too Large",
                                "over 128 header fields");
        } else if (c->oom) {
            idem_answer_problem(&out, 503, "unavailable", "Service Unavailable",
                                "out of memory");
            out.retry_after = 1;
        } else {
            rq = (struct idem_http_request){
                method, url, c->has_query ? c->query : NULL, c->h, c->n,
                body,   len};
            idem_handle(g, wk, &rq, &out);
        }
    }
    if (out.status == 0 || out.outcome == NULL) { /* out of memory on the way */
        idem_answer_problem(&out, 503, "unavailable", "Service Unavailable",
                            "out of memory");
        out.retry_after = 1;
    }
    rv = respond(g, conn, &out);
    ingress_metrics_answer(&g->metrics, out.status, now_us() - t0);
    idem_response_clear(&out);
    if (c != NULL) {
        free(c->query);
        free(c);
    }
    return rv;
}
