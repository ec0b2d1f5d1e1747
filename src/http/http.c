/* http/http.c: the HTTP listener over libmicrohttpd on the loop (http.h).
 *
 * Handles on the loop: `accept_poll` on our listening socket, `mhd_poll`
 * on MHD's epoll descriptor, `timer` for MHD's idle timeouts. After
 * anything that may give MHD work (a readable epoll fd, a new connection,
 * the timer) drive() calls MHD_run and re-arms the timer from
 * MHD_get_timeout. MHD itself never blocks and never starts a thread. */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#define LISTEN_BACKLOG 64

struct http
{
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    int lfd; /* our listening socket */
    uv_poll_t accept_poll;
    uv_poll_t mhd_poll;
    uv_timer_t timer;
    unsigned handles; /* initialised loop handles, not closed yet */
    bool mhd_poll_up, accept_up;
    bool closing;
    void (*close_cb)(void *arg);
    void *close_arg;

    struct http_route routes[HTTP_ROUTES_MAX];
    size_t n_routes;
    unsigned conns_max;
    unsigned timeout_s;
    void (*log)(void *arg, const char *level, const char *msg);
    void *log_arg;
    struct http_stats st;
};

static void logf_(struct http *h, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(struct http *h, const char *level, const char *fmt, ...)
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

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct http *h = cls;
    char msg[ERR_MSG_SIZE];
    size_t n;

    if (h->log == NULL) {
        return;
    }
    vsnprintf(msg, sizeof msg, fmt, ap);
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

static enum MHD_Result queue(struct MHD_Connection *conn,
                             struct http_response *r,
                             bool allow_get)
{
    struct MHD_Response *mr;
    enum MHD_Result rv;

    mr = MHD_create_response_from_buffer_with_free_callback(
        r->body_len, r->body != NULL ? r->body : (char *)"",
        r->body != NULL ? free : NULL);
    if (mr == NULL) {
        free(r->body);
        return MHD_NO; /* MHD closes the connection */
    }
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type != NULL
                                ? r->content_type
                                : "text/plain; charset=utf-8");
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow_get) {
        MHD_add_response_header(mr, MHD_HTTP_HEADER_ALLOW, "GET");
    }
    rv = MHD_queue_response(conn, r->status, mr);
    MHD_destroy_response(mr);
    return rv;
}

static const struct http_route *route_of(const struct http *h, const char *path)
{
    for (size_t i = 0; i < h->n_routes; i++) {
        if (strcmp(h->routes[i].path, path) == 0) {
            return &h->routes[i];
        }
    }
    return NULL;
}

/* Every request is answered on its first call, before any body is read:
 * no route takes a body, so none is ever buffered. */
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
    struct http_response r;
    struct http_request req;
    const struct http_route *rt;

    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    h->st.requests++;
    memset(&r, 0, sizeof r);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0) {
        h->st.bad_method++;
        http_text(&r, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET is served\n");
        return queue(conn, &r, true);
    }
    rt = route_of(h, url);
    if (rt == NULL) {
        h->st.not_found++;
        http_text(&r, MHD_HTTP_NOT_FOUND, "not found\n");
        return queue(conn, &r, false);
    }
    req.method = method;
    req.path = url;
    rt->fn(rt->arg, &req, &r);
    if (r.body_len > HTTP_BODY_MAX) {
        free(r.body);
        memset(&r, 0, sizeof r);
        http_text(&r, MHD_HTTP_INTERNAL_SERVER_ERROR, "answer too large\n");
    }
    return queue(conn, &r, false);
}

static void on_notify(void *cls,
                      struct MHD_Connection *conn,
                      void **socket_context,
                      enum MHD_ConnectionNotificationCode toe)
{
    struct http *h = cls;

    (void)conn;
    (void)socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        h->st.conns_open++;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && h->st.conns_open > 0) {
        h->st.conns_open--;
    }
}

/* --- driving MHD from the loop -------------------------------------------- */

static void on_timer(uv_timer_t *t);

static void drive(struct http *h)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;

    if (h->closing) {
        return;
    }
    (void)MHD_run(h->mhd);
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
    drive(t->data);
}

static void on_mhd_ready(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    drive(p->data);
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
    drive(h);
    return 0;
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
                logf_(h, "warn", "http accept: %s", strerror(errno));
            }
            break;
        }
        h->st.conns_accepted++;
        /* Here is where a TLS terminator would take @fd and hand its
         * plaintext end on instead (http.h). */
        (void)http_add_connection(h, fd, (const struct sockaddr *)&peer, len);
    }
    drive(h);
}

/* --- start and close ------------------------------------------------------ */

static int listen_on(const char *addr, int *out, char *errmsg)
{
    struct sockaddr_in sa;
    char host[64];
    const char *colon = strrchr(addr, ':');
    char *end = NULL;
    unsigned long port;
    int fd, one = 1;

    if (colon == NULL || (size_t)(colon - addr) >= sizeof host) {
        err_printf(errmsg, "bad address \"%s\": want IPv4 IP:PORT", addr);
        return HTTP_E_ADDR;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    if (colon[1] == '\0' || *end != '\0' || errno != 0 || port == 0 ||
        port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        err_printf(errmsg, "bad address \"%s\": want IPv4 IP:PORT", addr);
        return HTTP_E_ADDR;
    }
    sa.sin_port = htons((uint16_t)port);
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

static int start_mhd(struct http *h, char *errmsg)
{
    const union MHD_DaemonInfo *info;

    h->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL,
        NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_notify, h, MHD_OPTION_CONNECTION_LIMIT,
        h->conns_max, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_REQUEST_MAX, MHD_OPTION_CONNECTION_TIMEOUT, h->timeout_s,
        MHD_OPTION_END);
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

        if (r->path == NULL || r->path[0] != '/' || r->fn == NULL) {
            err_printf(errmsg,
                       "route %zu: want a path starting with / and "
                       "a handler",
                       i);
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

static void on_handle_closed(uv_handle_t *hd)
{
    struct http *h = hd->data;
    void (*cb)(void *) = h->close_cb;
    void *arg = h->close_arg;

    if (--h->handles > 0) {
        return;
    }
    /* The polls are gone: MHD may close its epoll descriptor and every
     * connection now, and our listener goes with them. */
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

void http_close(struct http *h, void (*cb)(void *arg), void *arg)
{
    if (h == NULL || h->closing) {
        return;
    }
    h->closing = true;
    h->close_cb = cb;
    h->close_arg = arg;
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
    h->lfd = -1;
    memcpy(h->routes, cfg->routes, cfg->n_routes * sizeof *cfg->routes);
    h->n_routes = cfg->n_routes;
    h->conns_max = cfg->conns_max != 0 ? cfg->conns_max : HTTP_CONNS_DEFAULT;
    h->timeout_s = cfg->timeout_s != 0 ? cfg->timeout_s : HTTP_TIMEOUT_S;
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
}
