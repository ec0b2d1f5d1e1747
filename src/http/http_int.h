/* http/http_int.h: what the listener (http.c) and its TLS terminator
 * (http_tls.c) share. Not for other modules: they use http.h.
 *
 * The listener's loop handles and each terminated connection count in
 * `handles`; the listener is freed (http_handle_done) when the last of
 * them has closed, so a connection never outlives its listener. Loop
 * thread only. */
#ifndef ONCE_HTTP_HTTP_INT_H_
#define ONCE_HTTP_HTTP_INT_H_

#include "common/ratelimit.h"
#include "http/http.h"

#include <microhttpd.h>

struct http_tls_conn;

/* A connection's identity, from the TLS handshake to MHD's close: MHD's
 * socket_context of a connection the terminator handed over. */
struct http_ident
{
    X509 *cert; /* the verified client certificate (one reference), or
                 * NULL: the client sent none */
};

struct http
{
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    int lfd; /* our listening socket */
    uv_poll_t accept_poll;
    uv_poll_t mhd_poll;
    uv_timer_t timer;
    unsigned handles; /* loop handles and TLS connections not closed yet */
    bool mhd_poll_up, accept_up;
    bool closing;
    bool in_run; /* inside MHD_run (drive) */
    void (*close_cb)(void *arg);
    void *close_arg;

    struct http_route routes[HTTP_ROUTES_MAX];
    size_t n_routes;
    unsigned conns_max;
    unsigned timeout_s;
    void (*log)(void *arg, const char *level, const char *msg);
    void *log_arg;
    struct http_stats st;
    struct http_pending *pending; /* deferred requests, suspended */

    /* TLS (http_tls.c); tls NULL: plain HTTP. */
    struct tls_slot *tls;
    unsigned handshake_ms;
    struct ratelimit refusal_log;    /* refused handshakes: lines per window */
    struct http_tls_conn *tls_conns; /* live, for http_close */
    /* The connection http_add_tls_connection is handing to MHD right now:
     * on_notify takes it for the connection whose socket is adding_fd. */
    struct http_ident *adding;
    int adding_fd;
    /* One read buffer for every TLS connection: each read is consumed
     * (fed to OpenSSL or sealed) inside its callback. */
    uint8_t rbuf[TLS_FEED_MAX];
};

void http_logf(struct http *h, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* MHD may have work (new bytes on a socketpair): run it. */
void http_drive(struct http *h);

/* One of the listener's handles, or a TLS connection, has closed. */
void http_handle_done(struct http *h);

/* Serve @fd, the plaintext end of a terminated connection from @peer whose
 * client presented @cert (verified; NULL: none; the caller keeps its own
 * reference). As http_add_connection. */
int http_add_tls_connection(struct http *h,
                            int fd,
                            const struct sockaddr *peer,
                            socklen_t peer_len,
                            X509 *cert);

/* http_tls.c: terminate TLS on the accepted socket @fd (owned from now
 * on) from @peer. */
void http_tls_accept(struct http *h, int fd, const struct sockaddr_in *peer);

/* Close every TLS connection (http_close). */
void http_tls_close_all(struct http *h);

#endif /* ONCE_HTTP_HTTP_INT_H_ */
