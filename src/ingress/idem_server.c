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
 * expiry policy).
 *
 * TLS (--tls-cert, --tls-key) is libmicrohttpd's, over GnuTLS; with
 * --tls-client-ca it asks each client for a certificate, and this file
 * verifies the chain (gnutls_certificate_verify_peers2) before a CN is
 * ever used as a scope (--scope-from-cert). */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* ------------------------------------------------------------------------
 * TLS
 * ---------------------------------------------------------------------- */

static char *read_pem(const char *path, char *msg)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = fd >= 0 ? malloc(IDEM_PEM_MAX + 1) : NULL;
    size_t n = 0;

    if (fd < 0 || buf == NULL) {
        err_printf(msg, "%s: %s", path, fd < 0 ? strerror(errno) : "no memory");
        if (fd >= 0) {
            close(fd);
        }
        return NULL;
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, IDEM_PEM_MAX + 1 - n);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0 || (n += (size_t)r) > IDEM_PEM_MAX) {
            break;
        }
    }
    close(fd);
    if (n == 0 || n > IDEM_PEM_MAX) {
        err_printf(msg, "%s: empty, unreadable or over %d bytes", path,
                   IDEM_PEM_MAX);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

int idem_tls_load(struct ingress *g, char *msg)
{
    const char *paths[3] = {g->cfg.idem.tls_cert, g->cfg.idem.tls_key,
                            g->cfg.idem.tls_client_ca};

    for (int i = 0; i < 3; i++) {
        if (paths[i][0] != '\0' &&
            (g->tls_pem[i] = read_pem(paths[i], msg)) == NULL) {
            idem_tls_free(g);
            return INGRESS_E_CONFIG;
        }
    }
    return 0;
}

void idem_tls_free(struct ingress *g)
{
    for (int i = 0; i < 3; i++) {
        if (g->tls_pem[i] != NULL) {
            explicit_bzero(g->tls_pem[i], strlen(g->tls_pem[i]));
            free(g->tls_pem[i]);
            g->tls_pem[i] = NULL;
        }
    }
}

unsigned idem_tls_options(const struct ingress *g,
                          bool main,
                          struct MHD_OptionItem *items)
{
    size_t n = 0;

    if (main && g->tls_pem[0] != NULL && g->tls_pem[1] != NULL) {
        items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
                                             g->tls_pem[0]};
        items[n++] =
            (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, g->tls_pem[1]};
        if (g->tls_pem[2] != NULL) {
            items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                                 g->tls_pem[2]};
        }
    }
    items[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return n > 0 ? (unsigned)MHD_USE_TLS : 0u;
}

static bool visible(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) {
            return false;
        }
    }
    return n > 0;
}

/* The CN of the client's certificate into @cn, only if its chain verified
 * against --tls-client-ca; false otherwise. */
static bool cert_scope(struct MHD_Connection *conn, char cn[ONCE_SCOPE_MAX + 1])
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t s = ci != NULL ? (gnutls_session_t)ci->tls_session : NULL;
    const gnutls_datum_t *peers;
    gnutls_x509_crt_t crt;
    unsigned status = 1;
    unsigned n = 0;
    size_t len = ONCE_SCOPE_MAX + 1;
    bool ok;

    if (s == NULL || gnutls_certificate_verify_peers2(s, &status) != 0 ||
        status != 0 || (peers = gnutls_certificate_get_peers(s, &n)) == NULL ||
        n == 0 || gnutls_x509_crt_init(&crt) != 0) {
        return false;
    }
    ok = gnutls_x509_crt_import(crt, &peers[0], GNUTLS_X509_FMT_DER) == 0 &&
         gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0,
                                       cn, &len) == 0 &&
         len <= ONCE_SCOPE_MAX && strlen(cn) == len && visible(cn, len);
    gnutls_x509_crt_deinit(crt);
    return ok;
}

/* ------------------------------------------------------------------------
 * Requests
 * ---------------------------------------------------------------------- */

int idem_serve(struct ingress *g,
               struct ingress_worker *wk,
               struct MHD_Connection *conn,
               const char *method,
               const char *url,
               const uint8_t *body,
               size_t len)
{
    struct collect *c = calloc(1, sizeof *c);
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
            struct idem_http_request rq = {
                method, url, c->has_query ? c->query : NULL, c->h, c->n,
                body,   len};
            char cn[ONCE_SCOPE_MAX + 1];
            bool has_cn = g->cfg.idem.scope_from_cert && cert_scope(conn, cn);

            idem_handle(g, wk, &rq, has_cn ? cn : NULL, &out);
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
