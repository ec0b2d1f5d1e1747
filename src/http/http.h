/* http/http.h: the node's HTTP listener (docs/server.md, "The HTTP
 * listener"): libmicrohttpd driven by the node's own libuv loop.
 *
 * Shape:
 *   - this module owns the listening socket: it accepts on the loop (a
 *     uv_poll_t on a non-blocking listener) and hands each accepted
 *     connection to libmicrohttpd with MHD_add_connection;
 *   - with a TLS slot (http_config.tls) every accepted connection goes
 *     through the terminator first (http_tls.c, OpenSSL over tls/tls.h;
 *     MHD's own TLS is GnuTLS in Debian's build, which once does not use):
 *     it keeps the TCP socket, runs the TLS 1.3 handshake on the loop with
 *     the slot's context (a client certificate is asked for, not
 *     required), and only then hands MHD one end of a socketpair carrying
 *     the plain bytes, with the client's verified certificate, which every
 *     request of that connection carries to its handler (http_request.peer);
 *   - MHD runs with MHD_USE_EPOLL and no thread of its own: a uv_poll_t
 *     watches MHD's epoll descriptor and calls MHD_run, and a uv_timer_t
 *     follows MHD_get_timeout (idle connections). So every handler runs
 *     on the loop thread, and an answer from /healthz proves the loop is
 *     turning;
 *   - a route table: exact paths (or prefixes, a path ending in '/'),
 *     each with its handler, the methods it serves (GET unless it says
 *     otherwise: another method gets 405 with an Allow header naming the
 *     route's) and, for POST, the largest body it reads. An unknown path
 *     is 404;
 *   - a body is read whole into memory before the handler runs, at most
 *     the route's body_max: a Content-Length over it is answered 413
 *     before any byte of the body is read; a chunked body that grows over
 *     it is discarded as it arrives and answered 413 at its end;
 *   - a handler may answer later (http_defer, then http_answer): the
 *     connection is suspended (MHD_suspend_connection) until then, the
 *     loop goes on, and the answer resumes it. The handler's owner bounds
 *     how long (the node's call deadline).
 *
 * Limits: connections (HTTP_CONNS_DEFAULT; over it an accepted socket is
 * closed at once; with TLS, handshakes in progress count), the TLS
 * handshake (http_config.handshake_ms; a connection that has not finished
 * it is closed), the bytes a TLS connection queues each way
 * (HTTP_TLS_QUEUE_MAX: over it the side that fills the queue is not read
 * until it drains; a client that reads nothing for the idle timeout while
 * an answer waits is closed), the memory MHD may use per connection, which
 * bounds the
 * request line and headers (HTTP_REQUEST_MAX: beyond it MHD answers 414 or
 * 431), an idle timeout (HTTP_TIMEOUT_S; also what ends a connection
 * whose peer half-closed in the middle of a request: MHD does not close
 * those at EOF), and bodies (per route, body_max; none for GET).
 *
 * Ownership: http_start returns a listener the caller closes with
 * http_close; routes are borrowed (they and their args outlive it). A
 * deferred request's token (struct http_pending) is the handler's until
 * it calls http_answer, exactly once, also after http_close (the answer
 * is then dropped and only the token freed).
 * Threads: the loop thread only. */
#ifndef ONCE_HTTP_HTTP_H_
#define ONCE_HTTP_HTTP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include <uv.h>

#include "common/err.h"
#include "tls/tls.h"

enum { ERR_HTTP_CODES(ERR_ENUM) }; /* common/err.h */

#define HTTP_ROUTES_MAX    16
#define HTTP_CONNS_DEFAULT 64
#define HTTP_REQUEST_MAX   (32u << 10)
#define HTTP_TIMEOUT_S     10
#define HTTP_BODY_MAX      (16u << 20) /* largest answer a handler gives */
/* Bytes a TLS connection queues in either direction before it stops
 * reading the side that fills it: a few TLS records. */
#define HTTP_TLS_QUEUE_MAX (256u << 10)

enum {
    HTTP_GET = 1u << 0,
    HTTP_POST = 1u << 1,
};

/* The largest body_max a route may give. */
#define HTTP_BODY_IN_MAX (1u << 20)

struct http_request
{
    const char *method;       /* "GET", "POST" */
    const char *path;         /* without the query string */
    const char *content_type; /* the header as sent, or NULL */
    const uint8_t *body;      /* POST: the whole body (borrowed; valid
                               * while the handler runs); else NULL */
    size_t body_len;
    void *ctx; /* the listener's; for http_defer */
    /* The listener speaks TLS. Then @peer is the client's verified
     * certificate (borrowed: valid while the handler runs; a handler that
     * answers later takes its own reference), or NULL: the client sent
     * none. Without TLS @peer is NULL. */
    bool tls;
    X509 *peer;
};

/* What a handler answers. @body is malloc'd by the handler (or NULL with
 * body_len 0); the listener frees it. */
struct http_response
{
    unsigned status;          /* 200, 503, ... */
    const char *content_type; /* static text; NULL: text/plain */
    char *body;
    size_t body_len;
    unsigned retry_after_s; /* > 0: a Retry-After header with it */
};

typedef void (*http_handler_fn)(void *arg,
                                const struct http_request *req,
                                struct http_response *resp);

struct http_route
{
    const char *path; /* exact, e.g. "/metrics"; ending in '/': a prefix */
    http_handler_fn fn;
    void *arg;
    unsigned methods; /* HTTP_GET | HTTP_POST; 0: HTTP_GET */
    size_t body_max;  /* POST: largest body, 1..HTTP_BODY_IN_MAX */
};

struct http_config
{
    const char *addr; /* IPv4 "IP:PORT"; NULL: no listener, connections
                       * come only through http_add_connection */
    const struct http_route *routes;
    size_t n_routes;    /* <= HTTP_ROUTES_MAX */
    unsigned conns_max; /* 0: HTTP_CONNS_DEFAULT */
    unsigned timeout_s; /* idle timeout; 0: HTTP_TIMEOUT_S */
    /* TLS: the slot of the server context (borrowed; outlives the
     * listener; a context swapped into it serves the connections accepted
     * after, e.g. on SIGHUP); NULL: plain HTTP. */
    struct tls_slot *tls;
    unsigned handshake_ms; /* 0: TLS_HANDSHAKE_MS_DEFAULT */
    /* Log hook (level "info"|"warn"|"error"); NULL: silent. */
    void (*log)(void *arg, const char *level, const char *msg);
    void *log_arg;
};

struct http_stats
{
    uint64_t conns_open;
    uint64_t conns_accepted;
    uint64_t conns_refused; /* over conns_max */
    uint64_t requests;
    uint64_t not_found;
    uint64_t bad_method;
    uint64_t tls_open;     /* TLS connections, handshaking ones included */
    uint64_t tls_accepted; /* handshakes completed */
    uint64_t tls_refused;  /* not TLS, failed, or not finished in time */
    bool tls;              /* the listener is HTTPS */
};

struct http;

/* Listen on cfg->addr and serve on @loop. Returns 0 and *@out, or
 * HTTP_E_ADDR, HTTP_E_LISTEN, HTTP_E_ROUTES, HTTP_E_MHD, HTTP_E_NOMEM with
 * @errmsg (ERR_MSG_SIZE) saying why. */
int http_start(struct http **out,
               uv_loop_t *loop,
               const struct http_config *cfg,
               char *errmsg);

void http_stats(const struct http *h, struct http_stats *st);

/* Serve the connected stream socket @fd (non-blocking; owned by the
 * listener from now on, closed by it also on failure), from @peer, as
 * plain HTTP. A plain listener's own accepts come through here, and the
 * fuzz target's socketpair; on a TLS listener such a connection has no
 * certificate (its requests see tls true, peer NULL). Returns 0, or
 * HTTP_E_LISTEN when it was refused (over the connection limit). */
int http_add_connection(struct http *h,
                        int fd,
                        const struct sockaddr *peer,
                        socklen_t peer_len);

/* Stop listening, close every connection; @cb (may be NULL) runs once the
 * loop handles have closed, and @h is freed just before it. */
void http_close(struct http *h, void (*cb)(void *arg), void *arg);

/* A request answered later. */
struct http_pending;

/* Called by a handler that will answer later instead of filling @resp
 * now: returns the token to give http_answer, or NULL when out of memory
 * (then the handler answers now). */
struct http_pending *http_defer(const struct http_request *req);

/* The answer to a deferred request: @resp's body is taken (freed by the
 * listener). Exactly once per token; the token is freed. May be called
 * from inside the handler that deferred. */
void http_answer(struct http_pending *p, struct http_response *resp);

/* Small helper for handlers: a malloc'd copy of @text as the body. */
void http_text(struct http_response *resp, unsigned status, const char *text);

#endif /* ONCE_HTTP_HTTP_H_ */
