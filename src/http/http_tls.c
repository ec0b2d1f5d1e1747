/* http/http_tls.c: the HTTP listener's TLS terminator (http.h, "Shape").
 *
 * One struct http_tls_conn per accepted connection, with three loop
 * handles: `tcp` (the client's socket, ciphertext), `plain` (our end of a
 * socketpair whose other end MHD serves, plaintext) and `timer`. The
 * session is tls/tls.h's, over memory BIOs, and the writes both ways go
 * through tls/splice.h (the Raft transport's too):
 *
 *   tcp read   -> tls_session_feed; handshake records back to tcp; once the
 *                 handshake is done, the socketpair is made and handed to
 *                 MHD with the client's certificate, and every plaintext
 *                 byte goes on to `plain`;
 *   plain read -> tls_splice_to_net: sealed, to tcp (MHD's answers).
 *
 * Bounds: the splice's, with HTTP_TLS_QUEUE_MAX: over it the side that
 * fills a queue is not read until the queue is under half of it again,
 * so a connection holds at most that plus one read (TLS_FEED_MAX) each
 * way. The timer is the handshake deadline first
 * (h->handshake_ms), then a check every idle timeout that an answer
 * waiting for the client moved (a client that reads nothing is closed;
 * MHD closes idle connections itself, which ends ours through `plain`).
 *
 * Ends: the client's EOF or close_notify shuts our end's writing down, so
 * MHD sees the end of the request stream; MHD closing its end sends the
 * client a close_notify and closes once every queued byte is written. An
 * error on either side closes both at once. */
#include "http/http_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tls/splice.h"

#define PLAIN_CHUNK (16u << 10) /* one TLS record of plaintext */

struct http_tls_conn
{
    struct http *h;
    struct http_tls_conn *prev, *next; /* h->tls_conns */
    uv_tcp_t tcp;
    uv_pipe_t plain;
    uv_timer_t timer;
    unsigned handles; /* initialised, not closed yet */
    struct tls_session tls;
    struct tls_splice sp; /* net: tcp, local: plain */
    struct sockaddr_in peer;
    bool tcp_up, timer_up;
    bool plain_up;  /* the socketpair is MHD's connection */
    bool shut;      /* plain's writing side shut down (the client ended) */
    bool closing;   /* handles closing; freed when the last one is */
    bool tcp_eof;   /* the client ended its side */
    bool plain_eof; /* MHD ended its side: closing once written */
    uint64_t tcp_written_seen; /* sp.net_written at the last check */
    uv_shutdown_t shut_req;
};

static void conn_close(struct http_tls_conn *c);
static void on_tcp_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void on_plain_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void on_buf(uv_handle_t *hd, size_t want, uv_buf_t *buf);

static const char *peer_text(const struct http_tls_conn *c,
                             char *buf,
                             size_t cap)
{
    char ip[INET_ADDRSTRLEN] = "?";

    (void)inet_ntop(AF_INET, &c->peer.sin_addr, ip, sizeof ip);
    snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(c->peer.sin_port));
    return buf;
}

/* A refused handshake: counted, and said under the budget of such lines
 * (anyone can cause them), as the RPC port says its own. */
static void refuse(struct http_tls_conn *c, const char *why)
{
    char peer[64];
    uint64_t dropped;

    c->h->st.tls_refused++;
    if (ratelimit_allow(&c->h->refusal_log, uv_now(c->h->loop), &dropped)) {
        http_logf(c->h, "warn", "https: TLS refused for %s: %s%s",
                  peer_text(c, peer, sizeof peer), why,
                  dropped > 0 ? RATELIMIT_DROPPED_NOTE
                      "once_http_tls_refused_total)"
                              : "");
    }
    conn_close(c);
}

/* --- writes --------------------------------------------------------------- */

/* What the session has to send (handshake, records, alerts) to the
 * client. */
static void flush_tls(struct http_tls_conn *c)
{
    if (!c->closing && tls_splice_flush(&c->sp) != 0) {
        conn_close(c); /* UNTESTED: malloc, uv_write */
    }
}

static void on_written(struct tls_splice *sp, bool to_tcp, int status)
{
    struct http_tls_conn *c = sp->data;

    if (c->closing) {
        return; /* cancelled by the close */
    }
    if (status != 0) {
        /* The client went away, or MHD closed its end (its idle timeout:
         * an answer it could not write because the client reads nothing
         * ends that way too). */
        char peer[64];

        http_logf(c->h, "info", "https: %s closed: writing to %s failed: %s",
                  peer_text(c, peer, sizeof peer),
                  to_tcp ? "the client" : "the HTTP server",
                  uv_strerror(status));
        conn_close(c);
        return;
    }
    if (c->plain_eof && c->sp.net_queued == 0) {
        conn_close(c); /* MHD is done and the client has every byte */
        return;
    }
    if (tls_splice_resume(&c->sp) != 0) {
        conn_close(c); /* UNTESTED */
    }
}

/* --- the plaintext side (MHD) --------------------------------------------- */

static void on_shut(uv_shutdown_t *req, int status)
{
    (void)req; /* MHD reads the end of its stream; nothing more to do */
    (void)status;
}

/* The client ended its side (EOF or close_notify): so does MHD's stream,
 * once what is queued for it is written. */
static void client_ended(struct http_tls_conn *c)
{
    /* Nothing after its end is read: bytes past a close_notify would only
     * pile up in the session. */
    c->tcp_eof = true;
    tls_splice_net_done(&c->sp);
    if (!c->shut) {
        c->shut = true;
        (void)uv_shutdown(&c->shut_req, (uv_stream_t *)&c->plain, on_shut);
    }
}

/* Every plaintext byte the session holds, on to MHD. */
static void pump_plain(struct http_tls_conn *c)
{
    char why[ERR_MSG_SIZE];
    uint8_t buf[PLAIN_CHUNK];

    while (!c->closing && !c->tcp_eof) {
        int n = tls_session_read(&c->tls, buf, sizeof buf, why);

        if (n <= 0) {
            if (n == TLS_E_CLOSED) {
                client_ended(c); /* close_notify */
            } else if (n < 0) {
                conn_close(c); /* a bad record */
            }
            return;
        }
        if (tls_splice_to_local(&c->sp, buf, (size_t)n) != 0) {
            conn_close(c); /* UNTESTED: malloc, uv_write */
            return;
        }
    }
}

static void on_plain_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct http_tls_conn *c = st->data;

    (void)buf;
    if (n == 0 || c->closing) {
        return;
    }
    if (n < 0) {
        /* MHD closed (or broke) its end: tell the client, then close
         * once it has every byte. */
        c->plain_eof = true;
        tls_splice_local_done(&c->sp);
        if (n == UV_EOF && !c->tcp_eof) {
            tls_session_close_notify(&c->tls);
            flush_tls(c);
        }
        if (!c->closing && c->sp.net_queued == 0) {
            conn_close(c);
        }
        return;
    }
    if (tls_splice_to_net(&c->sp, (const uint8_t *)buf->base, (size_t)n) != 0) {
        conn_close(c); /* UNTESTED: OpenSSL, malloc, uv_write */
    }
}

/* The handshake is done: the socketpair, one end to MHD with the client's
 * certificate. 0, or a negated errno (socketpair, libuv) or an HTTP_E_*
 * code (MHD refused it); then the caller closes. */
static int start_plain(struct http_tls_conn *c)
{
    /* MHD is told the truth, a local socket: it then does not try TCP
     * options on it (and log each failure). The client's address is in our
     * log lines. */
    struct sockaddr_un local = {.sun_family = AF_UNIX};
    int sv[2];
    X509 *cert;
    int rv;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   sv) != 0) {
        rv = -errno;
        http_logf(c->h, "warn", "https: socketpair: %s", strerror(-rv));
        return rv;
    }
    if ((rv = uv_pipe_init(c->h->loop, &c->plain, 0)) != 0) {
        close(sv[0]); /* UNTESTED */
        close(sv[1]);
        return rv;
    }
    c->plain.data = c;
    c->handles++;
    c->plain_up = true;
    tls_splice_local(&c->sp, (uv_stream_t *)&c->plain, on_buf, on_plain_read);
    if ((rv = uv_pipe_open(&c->plain, sv[0])) != 0) {
        close(sv[0]); /* UNTESTED */
        close(sv[1]);
        return rv;
    }
    cert = tls_session_peer(&c->tls);
    rv = http_add_tls_connection(c->h, sv[1], (struct sockaddr *)&local,
                                 sizeof local, cert);
    X509_free(cert);
    if (rv != 0) {
        return rv; /* MHD refused it (its limit) and closed its end */
    }
    return uv_read_start((uv_stream_t *)&c->plain, on_buf, on_plain_read);
}

/* --- the ciphertext side (the client) ------------------------------------- */

static void on_timer(uv_timer_t *t);

static void handshake_done(struct http_tls_conn *c)
{
    unsigned ms = c->h->timeout_s * 1000u;

    c->h->st.tls_accepted++;
    (void)uv_timer_start(&c->timer, on_timer, ms, ms); /* the write check */
    if (start_plain(c) != 0) {
        conn_close(c);
    }
}

static void on_tcp_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct http_tls_conn *c = st->data;
    char why[ERR_MSG_SIZE];
    bool was_done = c->tls.done;
    int rv;

    if (n == 0 || c->closing) {
        return;
    }
    if (n < 0) {
        if (n != UV_EOF || !c->plain_up) {
            conn_close(c); /* an error, or gone before it was served */
            return;
        }
        client_ended(c); /* MHD answers what it has, then closes */
        return;
    }
    rv = tls_session_feed(&c->tls, (const uint8_t *)buf->base, (size_t)n, why);
    flush_tls(c); /* handshake records, or the alert of a refusal */
    if (rv != 0) {
        refuse(c, why);
        return;
    }
    if (c->tls.done && !was_done) {
        handshake_done(c);
    }
    if (c->plain_up && !c->closing) {
        pump_plain(c);
        flush_tls(c); /* what reading made the session send */
    }
}

static void on_timer(uv_timer_t *t)
{
    struct http_tls_conn *c = t->data;

    if (c->closing) {
        return;
    }
    if (!c->tls.done) {
        refuse(c, "the handshake did not finish in time");
        return;
    }
    if (c->sp.net_queued > 0 && c->sp.net_written == c->tcp_written_seen) {
        char peer[64];

        http_logf(c->h, "info",
                  "https: %s read nothing of its answer for %u s: closed",
                  peer_text(c, peer, sizeof peer), c->h->timeout_s);
        conn_close(c);
        return;
    }
    c->tcp_written_seen = c->sp.net_written;
}

static void on_buf(uv_handle_t *hd, size_t want, uv_buf_t *buf)
{
    struct http_tls_conn *c = hd->data;

    (void)want;
    /* Each read is consumed inside its callback: one buffer serves all. */
    buf->base = (char *)c->h->rbuf;
    buf->len = hd->type == UV_TCP ? sizeof c->h->rbuf : PLAIN_CHUNK;
}

/* --- open and close ------------------------------------------------------- */

static void on_closed(uv_handle_t *hd)
{
    struct http_tls_conn *c = hd->data;
    struct http *h = c->h;

    if (--c->handles > 0) {
        return;
    }
    tls_session_free(&c->tls);
    free(c);
    h->st.tls_open--;
    http_handle_done(h);
}

static void conn_close(struct http_tls_conn *c)
{
    struct http *h = c->h;

    if (c->closing) {
        return;
    }
    c->closing = true;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        h->tls_conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    if (c->tcp_up) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
    }
    if (c->timer_up) {
        uv_close((uv_handle_t *)&c->timer, on_closed);
    }
    if (c->plain_up) {
        uv_close((uv_handle_t *)&c->plain, on_closed);
    }
    http_drive(h); /* MHD sees its end's peer gone */
}

void http_tls_close_all(struct http *h)
{
    while (h->tls_conns != NULL) {
        conn_close(h->tls_conns);
    }
}

/* A new connection's handles and session. 0, or a negated errno (libuv)
 * or a TLS_E_* code (TLS_E_CONFIG: the slot has no context; a session's
 * error), with @fd still the caller's
 * (nothing was made: c->handles 0) or closed (then c->handles > 0 and the
 * caller closes the connection). */
static int conn_open(struct http_tls_conn *c, int fd)
{
    char why[ERR_MSG_SIZE];
    int rv;

    if ((rv = uv_timer_init(c->h->loop, &c->timer)) != 0) {
        return rv; /* UNTESTED */
    }
    c->timer.data = c;
    c->timer_up = true;
    c->handles++;
    if ((rv = uv_tcp_init(c->h->loop, &c->tcp)) != 0) {
        close(fd); /* UNTESTED */
        return rv;
    }
    c->tcp.data = c;
    c->tcp_up = true;
    c->handles++;
    if ((rv = uv_tcp_open(&c->tcp, fd)) != 0) {
        close(fd); /* UNTESTED */
        return rv;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    if (c->h->tls->ctx == NULL) {
        return TLS_E_CONFIG; /* UNTESTED: TLS turned off under us */
    }
    if ((rv = tls_session_init(&c->tls, c->h->tls->ctx, true, NULL, why)) !=
        0) {
        return rv; /* UNTESTED: malloc */
    }
    tls_session_cert_optional(&c->tls);
    tls_splice_init(&c->sp, (uv_stream_t *)&c->tcp, on_buf, on_tcp_read,
                    &c->tls, HTTP_TLS_QUEUE_MAX, on_written, c);
    if ((rv = uv_timer_start(&c->timer, on_timer, c->h->handshake_ms, 0)) !=
        0) {
        return rv; /* UNTESTED */
    }
    return uv_read_start((uv_stream_t *)&c->tcp, on_buf, on_tcp_read);
}

void http_tls_accept(struct http *h, int fd, const struct sockaddr_in *peer)
{
    struct http_tls_conn *c;

    if (h->closing || h->st.tls_open >= h->conns_max ||
        (c = calloc(1, sizeof *c)) == NULL) {
        h->st.conns_refused++;
        close(fd);
        return;
    }
    c->h = h;
    c->peer = *peer;
    c->next = h->tls_conns;
    if (c->next != NULL) {
        c->next->prev = c;
    }
    h->tls_conns = c;
    h->st.tls_open++;
    h->handles++; /* until on_closed: the listener waits for us */
    if (conn_open(c, fd) != 0) {
        if (c->handles == 0) {
            close(fd); /* UNTESTED: nothing took it */
            h->tls_conns = c->next;
            if (c->next != NULL) {
                c->next->prev = NULL;
            }
            free(c);
            h->st.tls_open--;
            h->handles--;
            return;
        }
        conn_close(c);
    }
}
