/* http/http.c: the HTTP listener over libmicrohttpd on the loop (http.h).
 *
 * Handles on the loop: `accept_poll` on our listening socket, `mhd_poll`
 * on MHD's epoll descriptor, `timer` for MHD's idle timeouts. After
 * anything that may give MHD work (a readable epoll fd, a new connection,
 * the timer) http_drive() calls MHD_run and re-arms the timer from
 * MHD_get_timeout. MHD itself never blocks and never starts a thread.
 * With TLS, accepted sockets go to the terminator (http_tls.c), which
 * hands the plaintext end of a socketpair back through
 * http_add_tls_connection. */
#include "http/http_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/assert.h"

#define LISTEN_BACKLOG 64

/* One request in progress: MHD's per-request pointer (req_cls). Freed when
 * MHD says the request is done (on_completed). */
struct req_ctx
{
    struct http *h;
    struct MHD_Connection *conn;
    const struct http_route *rt;
    uint8_t *body;
    size_t body_len, body_cap;
    bool too_large;  /* the body grew over the route's body_max */
    bool in_handler; /* the handler is running (an answer now: no resume) */
    bool answered;   /* resp holds the answer to queue */
    bool dead;       /* the listener closed while it was suspended */
    X509 *peer;      /* the connection's client certificate (a reference) */
    struct http_pending *pending; /* while deferred */
    struct http_response resp;
};

/* A deferred request's token: the handler's until http_answer. */
struct http_pending
{
    struct req_ctx *ctx; /* NULL: the listener closed (orphaned) */
    struct http_pending *prev, *next;
};

void http_logf(struct http *h, const char *level, const char *fmt, ...)
{
    char msg[ERR_MSG_SIZE];
    va_list ap;

    if (h->log == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    h->log(h->log_arg, level, msg);
}

/* MHD's own error lines (MHD_USE_ERROR_LOG): at info, because most are
 * about what a peer sent (a header over the limit), which anyone who can
 * reach the port can repeat. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* What MHD says of every connection of a TLS listener: the plaintext
 * socket is a socketpair, where TCP options do not exist (and corking does
 * not matter: nothing waits to be pushed). */
static bool socketpair_noise(const char *msg)
{
    static const char *const noise[] = {
        "Setting TCP_NODELAY option",
        "Setting TCP_CORK option",
        "Failed to push the data from buffers to the network",
    };

    for (size_t i = 0; i < sizeof noise / sizeof noise[0]; i++) {
        if (strncmp(msg, noise[i], strlen(noise[i])) == 0) {
            return true;
        }
    }
    return false;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct http *h = cls;
    char msg[ERR_MSG_SIZE];
    size_t n;

    if (h->log == NULL) {
        return;
    }
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (h->tls != NULL && socketpair_noise(msg)) {
        return;
    }
    n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) {
        msg[--n] = '\0';
    }
    h->log(h->log_arg, "info", msg);
}

void http_text(struct http_response *resp, unsigned status, const char *text)
{
    size_t n = strlen(text);

    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = malloc(n + 1);
    resp->body_len = resp->body != NULL ? n : 0;
    if (resp->body != NULL) {
        memcpy(resp->body, text, n + 1);
    }
}

/* --- requests ------------------------------------------------------------- */

static const char *allow_text(unsigned methods)
{
    switch (methods & (HTTP_GET | HTTP_POST)) {
        case HTTP_POST:
            return "POST";
        case HTTP_GET | HTTP_POST:
            return "GET, POST";
        default:
            return "GET";
    }
}

/* @allow: 0, or the methods to name in an Allow header (a 405). */
static enum MHD_Result queue(struct MHD_Connection *conn,
                             struct http_response *r,
                             unsigned allow)
{
    struct MHD_Response *mr;
    enum MHD_Result rv;

    /* MHD reads body_len bytes from the body (or from ""). */
    ONCE_ASSERT(r->body != NULL || r->body_len == 0,
                "a response's length comes with its body");
    mr = MHD_create_response_from_buffer_with_free_callback(
        r->body_len, r->body != NULL ? r->body : (char *)"",
        r->body != NULL ? free : NULL);
    if (mr == NULL) {
        free(r->body); /* UNTESTED: malloc */
        r->body = NULL;
        return MHD_NO; /* MHD closes the connection */
    }
    r->body = NULL; /* the response owns it now */
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type != NULL
                                ? r->content_type
                                : "text/plain; charset=utf-8");
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow != 0) {
        MHD_add_response_header(mr, MHD_HTTP_HEADER_ALLOW, allow_text(allow));
    }
    if (r->retry_after_s > 0) {
        char ra[16];

        snprintf(ra, sizeof ra, "%u", r->retry_after_s);
        MHD_add_response_header(mr, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    rv = MHD_queue_response(conn, r->status, mr);
    MHD_destroy_response(mr);
    return rv;
}

static const struct http_route *route_of(const struct http *h, const char *path)
{
    for (size_t i = 0; i < h->n_routes; i++) {
        const char *p = h->routes[i].path;
        size_t n = strlen(p);

        ONCE_ASSERT(n > 0, "check_routes took only paths starting with /");
        if (strcmp(p, path) == 0 ||
            (p[n - 1] == '/' && strncmp(p, path, n) == 0)) {
            return &h->routes[i];
        }
    }
    return NULL;
}

static unsigned method_bit(const char *method)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0) {
        return HTTP_GET;
    }
    if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) {
        return HTTP_POST;
    }
    return 0;
}

static unsigned route_methods(const struct http_route *rt)
{
    return rt->methods != 0 ? rt->methods : HTTP_GET;
}

static enum MHD_Result answer_text(struct MHD_Connection *conn,
                                   unsigned status,
                                   const char *text,
                                   unsigned allow)
{
    struct http_response r;

    memset(&r, 0, sizeof r);
    http_text(&r, status, text);
    return queue(conn, &r, allow);
}

/* The handler's answer, checked against HTTP_BODY_MAX, queued. */
static enum MHD_Result queue_answer(struct req_ctx *x)
{
    struct http_response *r = &x->resp;

    if (r->body_len > HTTP_BODY_MAX) {
        free(r->body);
        memset(r, 0, sizeof *r);
        http_text(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "answer too large\n");
    }
    return queue(x->conn, r, 0);
}

static void pending_unlink(struct http *h, struct http_pending *p)
{
    ONCE_ASSERT(p->prev != NULL || h->pending == p,
                "a pending token is on its listener's list");
    if (p->prev != NULL) {
        p->prev->next = p->next;
    } else {
        h->pending = p->next;
    }
    if (p->next != NULL) {
        p->next->prev = p->prev;
    }
    p->prev = p->next = NULL;
}

struct http_pending *http_defer(const struct http_request *req)
{
    struct req_ctx *x = req->ctx;
    struct http_pending *p;

    if (x == NULL || x->pending != NULL || x->answered) {
        return NULL;
    }
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        return NULL;
    }
    p->ctx = x;
    p->next = x->h->pending;
    if (p->next != NULL) {
        p->next->prev = p;
    }
    x->h->pending = p;
    x->pending = p;
    return p;
}

void http_answer(struct http_pending *p, struct http_response *resp)
{
    struct req_ctx *x = p->ctx;

    if (x == NULL) { /* the listener closed meanwhile */
        free(resp->body);
        free(p);
        return;
    }
    ONCE_ASSERT(x->pending == p && !x->answered,
                "a deferred request is answered once, through its token");
    pending_unlink(x->h, p);
    free(p);
    x->pending = NULL;
    if (resp != &x->resp) {
        x->resp = *resp;
        resp->body = NULL;
    }
    x->answered = true;
    if (!x->in_handler) {
        MHD_resume_connection(x->conn);
        http_drive(x->h);
    }
}

/* A POST route's body, kept up to body_max; past it discarded. */
static void take_body(struct req_ctx *x, const char *data, size_t n)
{
    if (x->too_large || x->body_len + n > x->rt->body_max) {
        x->too_large = true;
        return;
    }
    if (x->body_len + n > x->body_cap) {
        size_t cap = x->body_cap != 0 ? x->body_cap : 4096;
        uint8_t *b;

        while (cap < x->body_len + n) {
            cap *= 2;
        }
        if (cap > x->rt->body_max) {
            cap = x->rt->body_max;
        }
        b = realloc(x->body, cap);
        if (b == NULL) {
            x->too_large = true; /* UNTESTED: malloc */
            return;
        }
        x->body = b;
        x->body_cap = cap;
    }
    ONCE_ASSERT(x->body_len + n <= x->body_cap,
                "the body fits the buffer grown for it");
    memcpy(x->body + x->body_len, data, n);
    x->body_len += n;
}

/* The client certificate of @conn's TLS session (a new reference), or
 * NULL: none, or not a TLS connection. */
static X509 *conn_peer(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    const struct http_ident *id =
        ci != NULL ? (const struct http_ident *)ci->socket_context : NULL;

    if (id == NULL || id->cert == NULL || X509_up_ref(id->cert) != 1) {
        return NULL;
    }
    return id->cert;
}

/* The first call for a request (headers only): refuse what can be refused
 * before a body is read, or make its context. */
static enum MHD_Result on_headers(struct http *h,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  void **req_cls)
{
    const struct http_route *rt = route_of(h, url);
    unsigned bit = method_bit(method);
    struct req_ctx *x;

    h->st.requests++;
    if (rt == NULL) {
        h->st.not_found++;
        return answer_text(conn, MHD_HTTP_NOT_FOUND, "not found\n", 0);
    }
    if ((route_methods(rt) & bit) == 0) {
        h->st.bad_method++;
        return answer_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                           "method not allowed\n", route_methods(rt));
    }
    if (bit == HTTP_POST) {
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     "Content-Length");
        if (cl != NULL && strtoull(cl, NULL, 10) > rt->body_max) {
            char text[64];

            snprintf(text, sizeof text, "body over %zu bytes\n", rt->body_max);
            return answer_text(conn, MHD_HTTP_CONTENT_TOO_LARGE, text, 0);
        }
    }
    x = calloc(1, sizeof *x);
    if (x == NULL) {
        return MHD_NO; /* UNTESTED: malloc */
    }
    x->h = h;
    x->conn = conn;
    x->rt = rt;
    x->peer = conn_peer(conn);
    *req_cls = x;
    return MHD_YES;
}

/* Every request is routed on its first call, before any body is read; a
 * POST route's body is then read (bounded) and its handler runs once the
 * whole body is in. A handler that defers leaves the connection suspended
 * until http_answer resumes it; MHD then calls here again. */
static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_data_size,
                                  void **req_cls)
{
    struct http *h = cls;
    struct req_ctx *x = *req_cls;
    struct http_request req;

    (void)version;
    if (x == NULL) {
        return on_headers(h, conn, url, method, req_cls);
    }
    if (x->dead) {
        return MHD_NO; /* the listener is closing */
    }
    if (x->answered) {
        return queue_answer(x); /* resumed with its answer */
    }
    if (*upload_data_size > 0) {
        take_body(x, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (x->too_large) {
        char text[64];

        snprintf(text, sizeof text, "body over %zu bytes\n", x->rt->body_max);
        return answer_text(conn, MHD_HTTP_CONTENT_TOO_LARGE, text, 0);
    }
    memset(&req, 0, sizeof req);
    req.method = method;
    req.path = url;
    req.content_type = MHD_lookup_connection_value(
        conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    req.body = x->body;
    req.body_len = x->body_len;
    req.ctx = x;
    req.tls = h->tls != NULL;
    req.peer = x->peer;
    x->in_handler = true;
    x->rt->fn(x->rt->arg, &req, &x->resp);
    x->in_handler = false;
    ONCE_ASSERT(!(x->answered && x->pending != NULL),
                "an answered request holds no pending token");
    if (x->pending != NULL) {
        MHD_suspend_connection(conn);
        return MHD_YES;
    }
    return queue_answer(x);
}

/* MHD is done with a request (answered, or its connection closed). */
static void on_completed(void *cls,
                         struct MHD_Connection *conn,
                         void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct req_ctx *x = *req_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (x == NULL) {
        return;
    }
    ONCE_ASSERT(!x->in_handler, "MHD ends no request inside its handler");
    if (x->pending != NULL) { /* UNTESTED: close always resumes first */
        pending_unlink(x->h, x->pending);
        x->pending->ctx = NULL;
    }
    free(x->resp.body); /* queue() took it if it was answered */
    free(x->body);
    X509_free(x->peer);
    free(x);
    *req_cls = NULL;
}

/* A connection MHD starts: the identity http_add_tls_connection is handing
 * over becomes its socket_context, if the socket is that one (MHD starts a
 * connection inside MHD_add_connection; any other has no identity, and so
 * no rights that need one). */
static void take_ident(struct http *h,
                       struct MHD_Connection *conn,
                       void **socket_context)
{
    const union MHD_ConnectionInfo *ci;

    if (h->adding == NULL) {
        return;
    }
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL && ci->connect_fd == h->adding_fd) {
        ONCE_ASSERT(*socket_context == NULL,
                    "a connection's identity is set once");
        *socket_context = h->adding;
        h->adding = NULL;
    }
}

static void on_notify(void *cls,
                      struct MHD_Connection *conn,
                      void **socket_context,
                      enum MHD_ConnectionNotificationCode toe)
{
    struct http *h = cls;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        h->st.conns_open++;
        take_ident(h, conn, socket_context);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct http_ident *id = *socket_context;

        if (h->st.conns_open > 0) {
            h->st.conns_open--;
        }
        if (id != NULL) {
            X509_free(id->cert);
            free(id);
            *socket_context = NULL;
        }
    }
}

/* --- driving MHD from the loop -------------------------------------------- */

static void on_timer(uv_timer_t *t);

void http_drive(struct http *h)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;

    if (h->closing || h->in_run) {
        return; /* MHD_run is on the stack: it sees what changed */
    }
    h->in_run = true;
    (void)MHD_run(h->mhd);
    h->in_run = false;
    if (MHD_get_timeout(h->mhd, &ms) == MHD_YES) {
        /* +1: MHD's deadline in ms is rounded down; waking early would
         * spin. */
        (void)uv_timer_start(&h->timer, on_timer, (uint64_t)ms + 1, 0);
    } else {
        (void)uv_timer_stop(&h->timer);
    }
}

static void on_timer(uv_timer_t *t)
{
    http_drive(t->data);
}

static void on_mhd_ready(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    http_drive(p->data);
}

int http_add_connection(struct http *h,
                        int fd,
                        const struct sockaddr *peer,
                        socklen_t peer_len)
{
    if (h->closing || h->st.conns_open >= h->conns_max) {
        h->st.conns_refused++;
        close(fd);
        return HTTP_E_LISTEN;
    }
    /* MHD owns the socket from now on, also when it refuses it. */
    if (MHD_add_connection(h->mhd, fd, peer, peer_len) != MHD_YES) {
        h->st.conns_refused++;
        return HTTP_E_LISTEN;
    }
    http_drive(h);
    return 0;
}

int http_add_tls_connection(struct http *h,
                            int fd,
                            const struct sockaddr *peer,
                            socklen_t peer_len,
                            X509 *cert)
{
    struct http_ident *id = calloc(1, sizeof *id);
    int rv;

    if (id == NULL) {
        close(fd); /* UNTESTED: malloc */
        return HTTP_E_NOMEM;
    }
    if (cert != NULL && X509_up_ref(cert) == 1) {
        id->cert = cert;
    }
    ONCE_ASSERT(h->adding == NULL, "one connection is handed to MHD at a time");
    h->adding = id;
    h->adding_fd = fd;
    rv = http_add_connection(h, fd, peer, peer_len);
    if (h->adding != NULL) { /* not started: refused */
        X509_free(id->cert);
        free(id);
        h->adding = NULL;
    }
    return rv;
}

static void on_accept(uv_poll_t *p, int status, int events)
{
    struct http *h = p->data;

    (void)events;
    if (status != 0 || h->closing) {
        return;
    }
    for (;;) {
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        int fd = accept4(h->lfd, (struct sockaddr *)&peer, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR) {
                http_logf(h, "warn", "http accept: %s", strerror(errno));
            }
            break;
        }
        h->st.conns_accepted++;
        if (h->tls != NULL) {
            http_tls_accept(h, fd, &peer); /* hands MHD the plaintext */
        } else {
            (void)http_add_connection(h, fd, (const struct sockaddr *)&peer,
                                      len);
        }
    }
    http_drive(h);
}

/* --- start and close ------------------------------------------------------ */

static int listen_on(const char *addr, int *out, char *errmsg)
{
    struct sockaddr_in sa;
    int fd, one = 1;

    if (!addr_parse_ipv4(addr, ADDR_PORT_STRTOUL, &sa)) {
        err_printf(errmsg, "bad address \"%s\": want IPv4 IP:PORT", addr);
        return HTTP_E_ADDR;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err_printf(errmsg, "socket: %s", strerror(errno));
        return HTTP_E_LISTEN;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(fd, LISTEN_BACKLOG) != 0) {
        err_printf(errmsg, "listen on %s: %s", addr, strerror(errno));
        close(fd);
        return HTTP_E_LISTEN;
    }
    *out = fd;
    return 0;
}

/* Paths reach the handlers as sent, still percent-encoded: a handler that
 * takes a value from its path decodes it itself, after splitting it (an
 * encoded '/' belongs to its part). Query strings are not used. */
static size_t no_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    return strlen(s);
}

static int start_mhd(struct http *h, char *errmsg)
{
    const union MHD_DaemonInfo *info;

    h->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG |
            MHD_ALLOW_SUSPEND_RESUME,
        0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_notify, h, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, h,
        MHD_OPTION_CONNECTION_LIMIT, h->conns_max,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_REQUEST_MAX,
        MHD_OPTION_CONNECTION_TIMEOUT, h->timeout_s, MHD_OPTION_END);
    if (h->mhd == NULL) {
        err_printf(errmsg, "MHD_start_daemon failed");
        return HTTP_E_MHD;
    }
    info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (info == NULL || info->epoll_fd < 0) {
        err_printf(errmsg, "libmicrohttpd has no epoll descriptor");
        return HTTP_E_MHD;
    }
    if (uv_poll_init(h->loop, &h->mhd_poll, info->epoll_fd) != 0) {
        err_printf(errmsg, "uv_poll_init on MHD's epoll descriptor failed");
        return HTTP_E_MHD;
    }
    h->handles++;
    h->mhd_poll_up = true;
    h->mhd_poll.data = h;
    (void)uv_poll_start(&h->mhd_poll, UV_READABLE, on_mhd_ready);
    return 0;
}

static int check_routes(const struct http_config *cfg, char *errmsg)
{
    if (cfg->n_routes > HTTP_ROUTES_MAX ||
        (cfg->n_routes > 0 && cfg->routes == NULL)) {
        err_printf(errmsg, "at most %d routes", HTTP_ROUTES_MAX);
        return HTTP_E_ROUTES;
    }
    for (size_t i = 0; i < cfg->n_routes; i++) {
        const struct http_route *r = &cfg->routes[i];

        if (r->path == NULL || r->path[0] != '/' || r->fn == NULL ||
            (r->methods & ~(unsigned)(HTTP_GET | HTTP_POST)) != 0 ||
            ((r->methods & HTTP_POST) != 0 &&
             (r->body_max == 0 || r->body_max > HTTP_BODY_IN_MAX))) {
            err_printf(errmsg,
                       "route %zu: want a path starting with /, a "
                       "handler, GET or POST, and for POST a body_max "
                       "of 1..%u",
                       i, HTTP_BODY_IN_MAX);
            return HTTP_E_ROUTES;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cfg->routes[j].path, r->path) == 0) {
                err_printf(errmsg, "route %s given twice", r->path);
                return HTTP_E_ROUTES;
            }
        }
    }
    return 0;
}

static void resume_all(struct http *h);

static void on_handle_closed(uv_handle_t *hd)
{
    http_handle_done(hd->data);
}

void http_handle_done(struct http *h)
{
    void (*cb)(void *) = h->close_cb;
    void *arg = h->close_arg;

    ONCE_ASSERT(h->handles > 0, "one close per counted handle");
    if (--h->handles > 0) {
        return;
    }
    /* Only http_close closes the loop handles counted from the start. */
    ONCE_ASSERT(h->closing, "the last handle closes after http_close");
    /* The polls are gone: MHD may close its epoll descriptor and every
     * connection now, and our listener goes with them. */
    resume_all(h);
    if (h->mhd != NULL) {
        MHD_stop_daemon(h->mhd);
    }
    if (h->lfd >= 0) {
        close(h->lfd);
    }
    free(h);
    if (cb != NULL) {
        cb(arg);
    }
}

/* Closing: every suspended request is orphaned (its token answers into
 * nothing) and resumed, and MHD runs so that it takes them off its
 * suspended list: MHD_stop_daemon refuses to stop with any there. The
 * resumed requests close their connections (on_request: dead). */
static void resume_all(struct http *h)
{
    bool any = h->pending != NULL;

    while (h->pending != NULL) {
        struct http_pending *p = h->pending;
        struct req_ctx *x = p->ctx;

        ONCE_ASSERT(x != NULL && x->pending == p,
                    "a listed token points at its request");
        pending_unlink(h, p);
        p->ctx = NULL;
        x->pending = NULL;
        x->dead = true;
        MHD_resume_connection(x->conn);
    }
    if (any && h->mhd != NULL) {
        (void)MHD_run(h->mhd);
        (void)MHD_run(h->mhd);
    }
}

void http_close(struct http *h, void (*cb)(void *arg), void *arg)
{
    if (h == NULL || h->closing) {
        return;
    }
    resume_all(h);
    h->closing = true;
    h->close_cb = cb;
    h->close_arg = arg;
    http_tls_close_all(h); /* each counts in h->handles until it closed */
    /* Every handle that was initialised, each counted in h->handles. */
    uv_close((uv_handle_t *)&h->timer, on_handle_closed);
    if (h->mhd_poll_up) {
        uv_close((uv_handle_t *)&h->mhd_poll, on_handle_closed);
    }
    if (h->accept_up) {
        uv_close((uv_handle_t *)&h->accept_poll, on_handle_closed);
    }
}

int http_start(struct http **out,
               uv_loop_t *loop,
               const struct http_config *cfg,
               char *errmsg)
{
    struct http *h;
    int rv = check_routes(cfg, errmsg);

    if (rv != 0) {
        return rv;
    }
    h = calloc(1, sizeof *h);
    if (h == NULL) {
        err_printf(errmsg, "out of memory");
        return HTTP_E_NOMEM;
    }
    h->loop = loop;
    h->refusal_log.burst = RATELIMIT_REFUSALS_BURST;
    h->refusal_log.window_ms = RATELIMIT_REFUSALS_WINDOW_MS;
    h->lfd = -1;
    memcpy(h->routes, cfg->routes, cfg->n_routes * sizeof *cfg->routes);
    h->n_routes = cfg->n_routes;
    h->conns_max = cfg->conns_max != 0 ? cfg->conns_max : HTTP_CONNS_DEFAULT;
    h->timeout_s = cfg->timeout_s != 0 ? cfg->timeout_s : HTTP_TIMEOUT_S;
    h->tls = cfg->tls;
    h->handshake_ms =
        cfg->handshake_ms != 0 ? cfg->handshake_ms : TLS_HANDSHAKE_MS_DEFAULT;
    h->log = cfg->log;
    h->log_arg = cfg->log_arg;
    (void)uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    h->handles = 1;
    rv = cfg->addr != NULL ? listen_on(cfg->addr, &h->lfd, errmsg) : 0;
    if (rv == 0) {
        rv = start_mhd(h, errmsg);
    }
    if (rv == 0 && h->lfd >= 0 &&
        uv_poll_init(loop, &h->accept_poll, h->lfd) != 0) {
        err_printf(errmsg, "uv_poll_init on the listener failed");
        rv = HTTP_E_LISTEN;
    }
    if (rv != 0) {
        http_close(h, NULL, NULL); /* freed by the loop */
        return rv;
    }
    if (h->lfd >= 0) {
        h->handles++;
        h->accept_up = true;
        h->accept_poll.data = h;
        (void)uv_poll_start(&h->accept_poll, UV_READABLE, on_accept);
    }
    *out = h;
    return 0;
}

void http_stats(const struct http *h, struct http_stats *st)
{
    *st = h->st;
    st->tls = h->tls != NULL;
}
