/* ingress/server.c: once-ingress's HTTP side over libmicrohttpd
 * (ingress.h).
 *
 * A pool of --threads threads, each with its own epoll set, accepts and
 * serves connections; a webhook runs its whole pipeline (cluster calls,
 * the upstream POST) on the thread that read it, with that thread's own
 * once_client and curl handle (thread-specific data, freed when the
 * thread ends). Bounds: the body by --max-body (413 as soon as
 * Content-Length says so, else once the bytes pass it; they are read and
 * dropped, never kept), the request line and headers by libmicrohttpd's
 * per-connection memory (HEADER_MEMORY: a request whose headers do not
 * fit is answered 431 by the library), connections by --max-connections,
 * an idle connection by IDLE_TIMEOUT_S. With --mode idempotency-key any
 * method is read the same way and handed to idem_server.c whole. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/addr.h"
#include "common/log.h"
#include "ingress/ingress.h"

#define HEADER_MEMORY  (64u << 10)
#define IDLE_TIMEOUT_S 30u
#define BACKLOG        1024u
#define METRICS_MAX    (16u << 10)

/* One request being read. */
struct req
{
    uint8_t *body;
    size_t len;
    size_t cap;
    bool too_big;
    bool answered; /* a response is queued */
};

static uint64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void worker_free(void *p)
{
    struct ingress_worker *wk = p;

    once_client_free(wk->client);
    ingress_upstream_free(wk->upstream);
    free(wk);
}

static struct ingress_worker *worker(struct ingress *g)
{
    struct ingress_worker *wk = pthread_getspecific(g->worker_key);
    struct once_options o;
    char err[256];

    if (wk != NULL) {
        return wk;
    }
    wk = calloc(1, sizeof *wk);
    if (wk == NULL) {
        return NULL;
    }
    once_options_init(&o);
    o.addrs = g->cfg.cluster;
    o.n_addrs = g->cfg.n_cluster;
    o.timeout_ms = g->cfg.timeout_ms;
    wk->upstream = ingress_upstream_new();
    if (wk->upstream == NULL ||
        once_client_new(&o, &wk->client, err, sizeof err) != 0 ||
        pthread_setspecific(g->worker_key, wk) != 0) {
        worker_free(wk);
        return NULL;
    }
    return wk;
}

static enum MHD_Result reply(struct MHD_Connection *conn,
                             unsigned code,
                             const char *ctype,
                             const void *body,
                             size_t len,
                             const struct ingress_response *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rv;
    char num[32];

    if (resp == NULL) {
        return MHD_NO;
    }
    if (ctype != NULL && ctype[0] != '\0') {
        MHD_add_response_header(resp, "Content-Type", ctype);
    }
    if (r != NULL) {
        MHD_add_response_header(resp, "Once-Outcome", r->a.outcome);
        if (r->a.retry_after > 0) {
            snprintf(num, sizeof num, "%llu",
                     (unsigned long long)r->a.retry_after);
            MHD_add_response_header(resp, "Retry-After", num);
        }
        if (r->upstream_status != 0) {
            snprintf(num, sizeof num, "%ld", r->upstream_status);
            MHD_add_response_header(resp, "Once-Upstream-Status", num);
        }
    }
    rv = MHD_queue_response(conn, code, resp);
    MHD_destroy_response(resp);
    return rv;
}

static enum MHD_Result plain(struct MHD_Connection *conn,
                             unsigned code,
                             const char *text)
{
    return reply(conn, code, "text/plain; charset=utf-8", text, strlen(text),
                 NULL);
}

/* ------------------------------------------------------------------------
 * /metrics, /healthz, /readyz
 * ---------------------------------------------------------------------- */

static enum MHD_Result readyz(struct ingress *g, struct MHD_Connection *conn)
{
    struct ingress_worker *wk = worker(g);
    struct once_status_info *info;
    struct once_result r;
    bool ready = false;

    if (wk == NULL) {
        return plain(conn, 503, "not ready: out of memory\n");
    }
    info = calloc(1, sizeof *info);
    if (info == NULL) {
        return plain(conn, 503, "not ready: out of memory\n");
    }
    once_result_init(&r);
    /* Ready when a node answers and knows a leader: claims can be
     * decided. */
    if (once_status(wk->client, NULL, 1000, info, &r) == ONCE_STATUS_OK &&
        info->leader_id != 0) {
        ready = true;
    }
    once_result_clear(&r);
    free(info);
    return ready ? plain(conn, 200, "ready\n")
                 : plain(conn, 503, "not ready: no node knows a leader\n");
}

static enum MHD_Result ops(struct ingress *g,
                           struct MHD_Connection *conn,
                           const char *url,
                           bool *handled)
{
    *handled = true;
    if (strcmp(url, "/healthz") == 0) {
        return plain(conn, 200, "ok\n");
    }
    if (strcmp(url, "/readyz") == 0) {
        return readyz(g, conn);
    }
    if (strcmp(url, "/metrics") == 0) {
        char *buf = malloc(METRICS_MAX);
        size_t n;
        enum MHD_Result rv;

        if (buf == NULL) {
            return plain(conn, 503, "out of memory\n");
        }
        n = ingress_metrics_text(&g->metrics, buf, METRICS_MAX);
        rv = reply(conn, 200, "text/plain; version=0.0.4", buf, n, NULL);
        free(buf);
        return rv;
    }
    *handled = false;
    return MHD_NO;
}

/* ------------------------------------------------------------------------
 * Webhooks
 * ---------------------------------------------------------------------- */

static const char *header(struct MHD_Connection *conn,
                          const char *name,
                          size_t *len)
{
    const char *v = NULL;

    if (MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, name, strlen(name),
                                      &v, len) != MHD_YES) {
        *len = 0;
        return NULL;
    }
    return v;
}

static enum MHD_Result too_large(struct ingress *g, struct MHD_Connection *conn)
{
    struct ingress_response r = {.a = {413, "too_large", 0}};

    atomic_fetch_add_explicit(&g->metrics.too_large, 1, memory_order_relaxed);
    ingress_metrics_answer(&g->metrics, 413, 0);
    return reply(conn, 413, "text/plain; charset=utf-8", "body too large\n", 15,
                 &r);
}

static bool append(struct ingress *g, struct req *q, const char *p, size_t n)
{
    if (q->too_big || n > g->cfg.max_body - q->len) {
        q->too_big = true; /* keep reading, keep nothing */
        return true;
    }
    if (q->len + n > q->cap) {
        size_t cap = q->cap == 0 ? 4096 : q->cap;
        uint8_t *b;

        while (cap < q->len + n) {
            cap *= 2;
        }
        if (cap > g->cfg.max_body) {
            cap = g->cfg.max_body;
        }
        b = realloc(q->body, cap);
        if (b == NULL) {
            return false;
        }
        q->body = b;
        q->cap = cap;
    }
    memcpy(q->body + q->len, p, n);
    q->len += n;
    return true;
}

static enum MHD_Result webhook(struct ingress *g,
                               struct MHD_Connection *conn,
                               struct req *q)
{
    struct ingress_worker *wk = worker(g);
    struct ingress_request rq = {0};
    struct ingress_response out;
    size_t n;
    uint64_t t0 = now_us();
    enum MHD_Result rv;

    if (wk == NULL) {
        struct ingress_response r = {.a = {503, "unavailable", 1}};

        return reply(conn, 503, "text/plain", "out of memory\n", 14, &r);
    }
    if (g->cfg.scheme == ONCE_SCHEME_STANDARD) {
        rq.w.id = header(conn, "webhook-id", &rq.w.id_len);
        rq.w.timestamp = header(conn, "webhook-timestamp", &rq.w.timestamp_len);
        rq.w.signature = header(conn, "webhook-signature", &rq.w.signature_len);
    } else {
        rq.w.signature = header(conn, "Stripe-Signature", &rq.w.signature_len);
    }
    rq.w.body = q->body;
    rq.w.body_len = q->len;
    rq.ctype = header(conn, "Content-Type", &n);
    ingress_handle(g, wk, &rq, &out);
    rv = reply(conn, out.a.http, out.ctype, out.body, out.body_len, &out);
    ingress_metrics_answer(&g->metrics, out.a.http, now_us() - t0);
    ingress_response_clear(&out);
    return rv;
}

static bool content_length_over(struct ingress *g, struct MHD_Connection *conn)
{
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    char *end;
    unsigned long long n;

    if (cl == NULL) {
        return false;
    }
    n = strtoull(cl, &end, 10);
    return *end == '\0' && n > g->cfg.max_body;
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *data,
                                  size_t *data_size,
                                  void **con_cls)
{
    struct ingress *g = cls;
    struct req *q = *con_cls;
    bool handled;
    enum MHD_Result rv;

    (void)version;
    if (q == NULL) {
        if (strcmp(method, "GET") == 0 && g->cfg.http_addr[0] == '\0') {
            rv = ops(g, conn, url, &handled);
            if (handled) {
                return rv;
            }
        }
        if (g->cfg.mode != INGRESS_MODE_IDEM && strcmp(method, "POST") != 0) {
            return plain(conn, 405, "POST a webhook\n");
        }
        if (content_length_over(g, conn)) {
            return g->cfg.mode == INGRESS_MODE_IDEM
                       ? (enum MHD_Result)idem_too_large(g, conn)
                       : too_large(g, conn);
        }
        q = calloc(1, sizeof *q);
        if (q == NULL) {
            return MHD_NO;
        }
        *con_cls = q;
        return MHD_YES;
    }
    if (*data_size > 0) {
        if (!append(g, q, data, *data_size)) {
            return MHD_NO;
        }
        *data_size = 0;
        return MHD_YES;
    }
    if (q->answered) {
        return MHD_YES;
    }
    q->answered = true;
    if (g->cfg.mode == INGRESS_MODE_IDEM) {
        return q->too_big
                   ? (enum MHD_Result)idem_too_large(g, conn)
                   : (enum MHD_Result)idem_serve(g, worker(g), conn, method,
                                                 url, q->body, q->len);
    }
    return q->too_big ? too_large(g, conn) : webhook(g, conn, q);
}

static enum MHD_Result on_ops(void *cls,
                              struct MHD_Connection *conn,
                              const char *url,
                              const char *method,
                              const char *version,
                              const char *data,
                              size_t *data_size,
                              void **con_cls)
{
    bool handled;
    enum MHD_Result rv;

    (void)version, (void)data, (void)data_size, (void)con_cls;
    if (strcmp(method, "GET") != 0) {
        return plain(conn, 405, "GET /metrics, /healthz or /readyz\n");
    }
    rv = ops(cls, conn, url, &handled);
    return handled ? rv : plain(conn, 404, "not found\n");
}

static void on_completed(void *cls,
                         struct MHD_Connection *conn,
                         void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct req *q = *con_cls;

    (void)cls, (void)conn, (void)toe;
    if (q != NULL) {
        free(q->body);
        free(q);
        *con_cls = NULL;
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    char q[600];
    size_t n;

    (void)cls;
    vsnprintf(buf, sizeof buf, fmt, ap);
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\n') {
        buf[--n] = '\0';
    }
    log_kv(LOG_WARN, "http", "detail=%s", log_quote(buf, q, sizeof q));
}

static struct MHD_Daemon *start_one(struct ingress *g,
                                    const char *addr,
                                    MHD_AccessHandlerCallback h,
                                    unsigned threads)
{
    struct sockaddr_in sa;
    struct MHD_OptionItem tls[4]; /* --mode idempotency-key: HTTPS */
    unsigned tls_flags = idem_tls_options(g, h == on_request, tls);

    /* The flags' check (config.c) took the port as sscanf's %5u does:
     * strtoul's rule reads every such port to the same number. */
    if (!addr_parse_ipv4(addr, ADDR_PORT_STRTOUL, &sa)) {
        return NULL;
    }
    return MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | tls_flags, 0, NULL,
        NULL, h, g,
        /* The logger first: else MHD complains through its own logger. */
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, g, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, g->cfg.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEMORY,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, BACKLOG, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, g, MHD_OPTION_UNESCAPE_CALLBACK, ingress_unescape, g,
        MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
}

int ingress_server_start(struct ingress *g, char *msg)
{
    if (pthread_key_create(&g->worker_key, worker_free) != 0) {
        err_printf(msg, "pthread_key_create failed");
        return INGRESS_E_NOMEM;
    }
    g->http_main = start_one(g, g->cfg.listen, on_request, g->cfg.threads);
    if (g->http_main == NULL) {
        err_printf(msg, "could not listen on %s", g->cfg.listen);
        return INGRESS_E_LISTEN;
    }
    if (g->cfg.http_addr[0] != '\0') {
        g->http_ops = start_one(g, g->cfg.http_addr, on_ops, 1);
        if (g->http_ops == NULL) {
            MHD_stop_daemon(g->http_main);
            g->http_main = NULL;
            err_printf(msg, "could not listen on %s", g->cfg.http_addr);
            return INGRESS_E_LISTEN;
        }
    }
    return 0;
}

void ingress_server_stop(struct ingress *g)
{
    if (g->http_ops != NULL) {
        MHD_stop_daemon(g->http_ops);
        g->http_ops = NULL;
    }
    if (g->http_main != NULL) {
        MHD_stop_daemon(g->http_main);
        g->http_main = NULL;
    }
    pthread_key_delete(g->worker_key);
}
