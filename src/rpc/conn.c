/* rpc/conn.c: the connection both sides share (conn_int.h), and what
 * conn.h has for both (limits, addresses, error texts). The server is
 * rpc_server.c, the channel rpc_channel.c.
 *
 * One struct conn per TCP stream, on either side. Reading accumulates bytes
 * in a buffer that grows to the frame in hand (never past frame_max + 4)
 * and shrinks back after a large frame; complete frames are decoded in
 * place with one envelope_view per connection and handed to the side.
 * Writing queues one malloc'd frame per uv_write; past out_max queued bytes
 * a server connection stops reading, so a peer that sends calls without
 * reading answers cannot make the node buffer without bound.
 *
 * Frames are corked: every frame made during one loop iteration (a batch
 * commit answers dozens of calls at once; a pipelining client sends many
 * calls) is appended to one buffer, and a prepare handle, which runs just
 * before the loop blocks, hands it to one uv_write. One write syscall per
 * iteration instead of one per frame: those were a quarter of the
 * leader's CPU, and of the benchmark client's, at 256 clients
 * (bench/README.md). Nothing waits longer than the iteration: the prepare
 * phase always runs before the loop polls. Corked bytes count in out_bytes
 * like queued ones (backpressure, close_after_write and the idle timer see
 * them); a closing connection drops them, as uv_close cancels queued
 * writes. A call corked on a channel counts as sent (it may reach the
 * socket at any moment), so a connection lost before the flush reports it
 * "unknown": conservative, never "not applied" for bytes that might leave.
 *
 * TLS (conn_tls_start) wraps the stream here and nowhere else: reads go
 * through one per-thread ciphertext buffer into the session and the
 * plaintext into rbuf as above; frames made before the handshake completed
 * wait in the cork; every write (corked frames, handshake records) is
 * sealed into ciphertext, which the wreq owns until it is written. The
 * handshake has a deadline (hs_timer); a peer that sends bytes that are not
 * a TLS handshake, fails verification or misses the deadline is closed,
 * and its side hears why (tls_failed). */
#include "rpc/conn_int.h"

#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "common/addr.h"
#include "common/assert.h"

#define READ_CHUNK (64u * 1024)
/* The first size of a cork (conn_int.h, chint): twice the last flush's
 * length rounded up to a power of two, within these. */
#define CORK_HINT_MIN ((size_t)256)
#define CORK_HINT_MAX ((size_t)64 * 1024)

struct wreq
{
    uv_write_t req;
    struct conn *c;
    size_t len;      /* plaintext bytes counted in out_bytes */
    uint8_t *ext;    /* corked frames (owned), or NULL: frame[] below */
    uint8_t *sealed; /* TLS: the ciphertext written (owned), or NULL */
    uint8_t frame[]; /* the whole frame */
};

/* Ciphertext is read here and fed to the session at once (libuv calls
 * on_alloc and on_read back to back on the loop's thread): one buffer per
 * thread, not 64 KiB per connection. */
static _Thread_local uint8_t tls_rbuf[TLS_FEED_MAX];

void rpc_limits_default(struct rpc_limits *l)
{
    l->frame_max = FRAME_MAX_DEFAULT;
    l->calls_max = 1024;
    l->conns_max = 4096;
    l->idle_ms = 300000;
    l->out_max = 8u << 20;
    l->frame_ms = 10000;
    l->mem_max = (size_t)1 << 30;
    l->deadline_ms = 5000;
}

int rpc_addr_parse(const char *addr, struct sockaddr_in *out)
{
    return addr_parse_ipv4(addr, ADDR_PORT_DIGITS, out) ? 0 : RPC_E_ADDR;
}

void conn_maybe_free(struct conn *c)
{
    const struct conn_side *side = c->side;
    void *owner = c->owner;

    if (!c->handle_closed || c->refs > 0) {
        return;
    }
    ONCE_ASSERT(c->open_handles == 0 && c->calls == 0,
                "freed with every handle closed and no call unanswered");
    envelope_view_close(&c->view);
    free(c->rbuf);
    tls_session_free(&c->tls);
    X509_free(c->peer_cert);
    free(c);
    side->freed(owner);
}

void conn_account(struct conn *c)
{
    size_t now;

    if (c->mem == NULL) {
        return;
    }
    now = c->closing ? 0 : c->rcap + c->out_bytes;
    ONCE_ASSERT(c->mem->used >= c->mem_held,
                "the account holds what each conn counts in it");
    c->mem->used = c->mem->used - c->mem_held + now;
    if (now > c->mem_held && c->mem->max > 0 && c->mem->used > c->mem->max &&
        c->side->over_memory != NULL) {
        c->mem_held = now;
        c->side->over_memory(c);
        return;
    }
    c->mem_held = now;
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    ONCE_ASSERT(c->open_handles > 0, "one close callback per open handle");
    if (--c->open_handles > 0) {
        return;
    }
    c->handle_closed = true;
    conn_maybe_free(c);
}

/* Room in rbuf for what comes next: unread bytes moved to the front, and
 * the buffer grown to the whole frame in hand (bounded by frame_max), so
 * one large frame is read into place without repeated growth. false: out
 * of memory. */
static bool rbuf_make_room(struct conn *c)
{
    size_t want = READ_CHUNK;
    uint32_t env_len;

    ONCE_ASSERTF(c->rpos <= c->rlen && c->rlen <= c->rcap,
                 "unread bytes [%zu, %zu) of a %zu-byte buffer", c->rpos,
                 c->rlen, c->rcap);
    /* What is left is less than one frame (every whole one was consumed). */
    if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    if (frame_decode_header(c->rbuf, c->rlen, c->lim->frame_max, &env_len) ==
            0 &&
        FRAME_HEADER_LEN + (size_t)env_len > want) {
        want = FRAME_HEADER_LEN + (size_t)env_len;
    }
    if (c->rcap < want) {
        uint8_t *nb = realloc(c->rbuf, want);

        if (nb == NULL) { /* UNTESTED: malloc */
            return false;
        }
        c->rbuf = nb;
        c->rcap = want;
    }
    return true;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;

    (void)suggested;
    if (c->tls_on) {
        buf->base = (char *)tls_rbuf;
        buf->len = sizeof tls_rbuf;
        return;
    }
    if (!rbuf_make_room(c)) { /* UNTESTED: libuv reports UV_ENOBUFS */
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    buf->base = (char *)c->rbuf + c->rlen;
    buf->len = c->rcap - c->rlen;
}

/* After a large frame, give the memory back. */
static void conn_shrink(struct conn *c)
{
    if (c->rcap > 2 * READ_CHUNK && c->rlen - c->rpos <= READ_CHUNK) {
        uint8_t *nb = malloc(READ_CHUNK);

        if (nb == NULL) {
            return; /* UNTESTED: malloc; keep the big one */
        }
        memcpy(nb, c->rbuf + c->rpos, c->rlen - c->rpos);
        free(c->rbuf);
        c->rbuf = nb;
        c->rlen -= c->rpos;
        c->rpos = 0;
        c->rcap = READ_CHUNK;
        /* The view's arena grew with the frame, too. */
        envelope_view_close(&c->view);
        envelope_view_init(&c->view);
    }
}

static void conn_on_frame(struct conn *c, const uint8_t *env, size_t len)
{
    char errmsg[ERR_MSG_SIZE];
    int rv = envelope_decode(env, len, c->lim->frame_max, &c->view, errmsg);

    if (rv != 0) {
        c->side->bad_frame(c, errmsg);
        return;
    }
    c->side->frame(c, &c->view);
}

/* Hand every whole frame in rbuf to the side; true if one was large. */
static bool conn_parse(struct conn *c)
{
    uint64_t now = uv_now(c->tcp.loop), now_ns = 0;
    bool big = false, whole = false;

    while (!c->closing && !c->close_after_write) {
        uint32_t env_len;
        int rv = frame_decode_header(c->rbuf + c->rpos, c->rlen - c->rpos,
                                     c->lim->frame_max, &env_len);

        if (rv == 1) {
            break; /* fewer than 4 bytes */
        }
        if (rv != 0) {
            char errmsg[ERR_MSG_SIZE];

            err_printf(errmsg, "frame: %s (limit %zu bytes)", rpc_strerror(rv),
                       c->lim->frame_max);
            c->side->bad_frame(c, errmsg);
            break;
        }
        if (c->rlen - c->rpos < FRAME_HEADER_LEN + (size_t)env_len) {
            break; /* wait for the rest */
        }
        big = big || env_len > READ_CHUNK;
        c->rpos += FRAME_HEADER_LEN;
        /* Idle time counts from the last whole frame, not from any byte. */
        c->last_active_ms = now;
        whole = true;
        if (now_ns == 0) {
            now_ns = uv_hrtime();
        }
        c->frame_ns = now_ns;
        conn_on_frame(c, c->rbuf + c->rpos, env_len);
        c->rpos += env_len;
    }
    ONCE_ASSERT(c->rpos <= c->rlen, "a frame is consumed only when whole");
    if (c->closing) {
        return big;
    }
    /* What is left is the start of a frame: since now if a frame ended
     * in these bytes (or none was pending), else since it began. */
    if (c->rlen == c->rpos) {
        c->partial_since_ms = 0;
    } else if (whole || c->partial_since_ms == 0) {
        c->partial_since_ms = now;
    }
    return big;
}

static void tls_on_read(struct conn *c, const uint8_t *p, size_t n);

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;

    if (nread < 0) {
        conn_close(c); /* EOF or error */
        return;
    }
    if (nread == 0) {
        return;
    }
    if (c->tls_on) {
        tls_on_read(c, (const uint8_t *)buf->base, (size_t)nread);
        return;
    }
    ONCE_ASSERT((size_t)nread <= c->rcap - c->rlen,
                "libuv reads into the room on_alloc gave");
    c->rlen += (size_t)nread;
    if (conn_parse(c) && !c->closing) {
        conn_shrink(c);
    }
    conn_account(c);
}

static void on_write(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct conn *c = w->c;

    ONCE_ASSERT(c->out_bytes >= w->len, "out_bytes counts what is queued");
    c->out_bytes -= w->len;
    c->last_write_ms = uv_now(c->tcp.loop);
    free(w->ext);
    free(w->sealed);
    free(w);
    conn_account(c);
    if (status != 0) {
        conn_close(c);
        return;
    }
    if (c->close_after_write && c->out_bytes == 0) {
        conn_close(c);
        return;
    }
    if (c->paused && !c->closing && c->out_bytes <= c->lim->out_max / 2) {
        c->paused = false;
        (void)uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    }
}

static void note_queued(struct conn *c, size_t len)
{
    if (c->out_bytes == 0) {
        c->last_write_ms = uv_now(c->tcp.loop);
    }
    c->out_bytes += len;
    conn_account(c);
    /* Server side only: a channel keeps reading (its answers are what
     * drains the server, which applies its own limit). */
    if (c->side->pause_reads && !c->paused && c->out_bytes > c->lim->out_max) {
        c->paused = true;
        (void)uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* Write @w: its @len plaintext bytes at @plain, sealed first with TLS
 * (into w->sealed, owned by @w). 0, or libuv's error / TLS_E_IO: then
 * nothing was queued and @w is the caller's to free. */
static int wreq_write(struct conn *c,
                      struct wreq *w,
                      const uint8_t *plain,
                      size_t len)
{
    uv_buf_t b = uv_buf_init((char *)plain, (unsigned)len);

    w->sealed = NULL;
    if (c->tls_on) {
        size_t n;

        if (tls_session_seal(&c->tls, plain, len) != 0) {
            return TLS_E_IO;
        }
        n = tls_session_pending(&c->tls);
        w->sealed = malloc(n);
        if (w->sealed == NULL) {
            return TLS_E_NOMEM; /* UNTESTED: malloc */
        }
        b = uv_buf_init((char *)w->sealed,
                        (unsigned)tls_session_take(&c->tls, w->sealed, n));
    }
    return uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
}

/* The prepare handle: the corked answers leave in one write (with TLS, once
 * the handshake completed: ready restarts it). */
static void on_flush(uv_prepare_t *h)
{
    struct conn *c = h->data;
    struct wreq *w;
    int rv;

    (void)uv_prepare_stop(h);
    if (c->clen == 0 || c->closing || (c->tls_on && !c->tls.done)) {
        return;
    }
    w = malloc(sizeof *w);
    if (w == NULL) { /* UNTESTED: malloc; the answers are lost with c */
        conn_close(c);
        return;
    }
    w->c = c;
    w->len = c->clen;
    w->ext = c->cbuf;
    c->chint = CORK_HINT_MIN;
    while (c->chint < 2 * c->clen && c->chint < CORK_HINT_MAX) {
        c->chint *= 2;
    }
    c->cbuf = NULL;
    c->clen = 0;
    c->ccap = 0;
    rv = wreq_write(c, w, w->ext, w->len);
    if (rv != 0) {
        c->out_bytes -= w->len;
        free(w->ext);
        free(w->sealed);
        free(w);
        conn_close(c);
    }
}

/* Room for @need more bytes in the cork: where they go, or NULL. */
static uint8_t *cork_reserve(struct conn *c, size_t need)
{
    if (c->ccap - c->clen < need) {
        size_t cap = c->ccap != 0 ? c->ccap : c->chint > 0 ? c->chint : 4096;
        uint8_t *nb;

        /* need <= frame_max + 4, and clen stays under out_max plus one
         * iteration's answers: no overflow. */
        while (cap - c->clen < need) {
            cap *= 2;
        }
        nb = realloc(c->cbuf, cap);
        if (nb == NULL) {
            return NULL; /* UNTESTED: malloc */
        }
        c->cbuf = nb;
        c->ccap = cap;
    }
    return c->cbuf + c->clen;
}

/* @len bytes were appended at cork_reserve's pointer. */
static void cork_commit(struct conn *c, size_t len)
{
    ONCE_ASSERT(len <= c->ccap - c->clen,
                "a commit fits the room cork_reserve made");
    c->clen += len;
    (void)uv_prepare_start(&c->flush, on_flush);
    note_queued(c, len);
}

/* Append the frame of @v (@need bytes) to the cork. */
static int conn_cork(struct conn *c,
                     const struct envelope_view *v,
                     size_t need,
                     char *errmsg)
{
    uint8_t *dst = cork_reserve(c, need);

    if (dst == NULL) {
        err_printf(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    cork_commit(c, envelope_pack(v, c->lim->frame_max, dst, need));
    return 0;
}

/* Hand @w (w->len bytes at w->frame) to the socket. 0, or libuv's error:
 * then @w is freed and nothing is queued. (Only connections that do not
 * cork get here; TLS connections always cork.) */
static int wreq_submit(struct conn *c, struct wreq *w)
{
    int rv;

    w->c = c;
    w->ext = NULL;
    rv = wreq_write(c, w, w->frame, w->len);
    if (rv != 0) {
        free(w->sealed);
        free(w);
        return rv;
    }
    note_queued(c, w->len);
    return 0;
}

/* Encode @v and queue it. 0, or a negative error (then nothing is queued:
 * an encode error, or a write that failed at once, which closes @c). */
int conn_send(struct conn *c, const struct envelope_view *v, char *errmsg)
{
    size_t need = 0;
    struct wreq *w;
    int rv;

    if (c->closing) {
        err_printf(errmsg, "connection closed");
        return RPC_E_LOST;
    }
    /* Measure, allocate the exact size, pack: one validation and one size
     * computation per frame (this runs for every answer). */
    rv = envelope_frame_size(v, c->lim->frame_max, &need, errmsg);
    if (rv != 0) {
        return rv; /* a rule broken or too big */
    }
    if (c->corking) {
        return conn_cork(c, v, need, errmsg);
    }
    w = malloc(sizeof *w + need);
    if (w == NULL) {
        err_printf(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    w->len = envelope_pack(v, c->lim->frame_max, w->frame, need);
    rv = wreq_submit(c, w);
    if (rv != 0) {
        err_printf(errmsg, "write: %s", uv_strerror(rv));
        conn_close(c);
        return RPC_E_LOST;
    }
    return 0;
}

int conn_send_copy(struct conn *c, const uint8_t *frames, size_t len)
{
    struct wreq *w;

    if (c->corking) {
        uint8_t *dst = cork_reserve(c, len);

        if (dst == NULL) { /* UNTESTED: malloc */
            return RPC_E_NOMEM;
        }
        memcpy(dst, frames, len);
        cork_commit(c, len);
        return 0;
    }
    w = malloc(sizeof *w + len);
    if (w == NULL) { /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    memcpy(w->frame, frames, len);
    w->len = len;
    return wreq_submit(c, w) == 0 ? 0 : RPC_E_LOST;
}

/* --- TLS ------------------------------------------------------------------ */

/* Write what the session produced by itself (handshake records, alerts):
 * no plaintext, so nothing counts in out_bytes. 0, or a negative error. */
static int tls_flush_raw(struct conn *c)
{
    size_t n = tls_session_pending(&c->tls);
    struct wreq *w;
    uv_buf_t b;
    int rv;

    if (n == 0) {
        return 0;
    }
    w = malloc(sizeof *w);
    if (w == NULL) {
        return TLS_E_NOMEM; /* UNTESTED: malloc */
    }
    w->c = c;
    w->len = 0;
    w->ext = NULL;
    w->sealed = malloc(n);
    if (w->sealed == NULL) {
        free(w); /* UNTESTED: malloc */
        return TLS_E_NOMEM;
    }
    b = uv_buf_init((char *)w->sealed,
                    (unsigned)tls_session_take(&c->tls, w->sealed, n));
    rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rv != 0) {
        free(w->sealed);
        free(w);
    }
    return rv;
}

/* The session failed: tell the side, try to get the alert out (best
 * effort: the close would cancel a queued write), close. */
static void tls_fail(struct conn *c, int rv, const char *errmsg)
{
    uint8_t alert[256];
    size_t n = tls_session_take(&c->tls, alert, sizeof alert);

    if (n > 0) {
        uv_buf_t b = uv_buf_init((char *)alert, (unsigned)n);

        (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    }
    if (c->side->tls_failed != NULL) {
        c->side->tls_failed(c, rv, errmsg);
    }
    conn_close(c);
}

static void on_hs_timer(uv_timer_t *t)
{
    struct conn *c = t->data;
    char errmsg[ERR_MSG_SIZE];

    if (c->closing || c->tls.done) {
        return; /* UNTESTED: the timer is stopped at the handshake's end */
    }
    err_printf(errmsg, "no TLS handshake within %llu ms",
               (unsigned long long)uv_timer_get_repeat(t));
    tls_fail(c, TLS_E_HANDSHAKE, errmsg);
}

static void tls_handshake_done(struct conn *c)
{
    (void)uv_timer_stop(&c->hs_timer);
    c->peer_cert = tls_session_peer(&c->tls);
    if (c->side->ready != NULL) {
        c->side->ready(c);
    }
    if (!c->closing && c->clen > 0) {
        (void)uv_prepare_start(&c->flush, on_flush);
    }
}

/* Drain the session's plaintext into rbuf and hand on whole frames. */
static void tls_drain(struct conn *c)
{
    bool big = false;

    while (!c->closing) {
        char errmsg[ERR_MSG_SIZE];
        int n;

        if (!rbuf_make_room(c)) {
            conn_close(c); /* UNTESTED: malloc */
            return;
        }
        n = tls_session_read(&c->tls, c->rbuf + c->rlen, c->rcap - c->rlen,
                             errmsg);
        if (n == TLS_E_CLOSED) {
            conn_close(c); /* as EOF */
            return;
        }
        if (n < 0) {
            tls_fail(c, n, errmsg);
            return;
        }
        if (n == 0) {
            break;
        }
        ONCE_ASSERT((size_t)n <= c->rcap - c->rlen,
                    "the session reads into the room given");
        c->rlen += (size_t)n;
        big = conn_parse(c) || big;
        if (c->close_after_write) {
            break; /* the side reads nothing more */
        }
    }
    if (big && !c->closing) {
        conn_shrink(c);
    }
    conn_account(c);
}

static void tls_on_read(struct conn *c, const uint8_t *p, size_t n)
{
    char errmsg[ERR_MSG_SIZE];
    bool was_done = c->tls.done;
    int rv = tls_session_feed(&c->tls, p, n, errmsg);

    if (rv != 0) {
        tls_fail(c, rv, errmsg);
        return;
    }
    if (tls_flush_raw(c) != 0) {
        conn_close(c);
        return;
    }
    if (!c->tls.done) {
        return;
    }
    if (!was_done) {
        tls_handshake_done(c);
    }
    tls_drain(c);
}

int conn_tls_start(struct conn *c,
                   SSL_CTX *ctx,
                   bool server,
                   const char *host,
                   unsigned handshake_ms,
                   char *errmsg)
{
    int rv;

    if (!c->corking) {
        err_printf(errmsg, "TLS needs a corked connection"); /* UNTESTED */
        return TLS_E_CONFIG;
    }
    ONCE_ASSERT(!c->tls_on, "TLS starts once per connection");
    rv = tls_session_init(&c->tls, ctx, server, host, errmsg);
    if (rv != 0) {
        return rv;
    }
    c->tls_on = true;
    (void)uv_timer_init(c->tcp.loop, &c->hs_timer);
    c->hs_timer.data = c;
    c->open_handles++;
    if (handshake_ms > 0) {
        (void)uv_timer_start(&c->hs_timer, on_hs_timer, handshake_ms,
                             handshake_ms);
    }
    rv = tls_flush_raw(c); /* a client's hello */
    if (rv != 0) {
        err_printf(errmsg, "write: %s", uv_strerror(rv));
        return TLS_E_HANDSHAKE;
    }
    return 0;
}

X509 *conn_peer_cert(const struct conn *c)
{
    return c->peer_cert;
}

int conn_init(struct conn *c,
              uv_loop_t *loop,
              const struct rpc_limits *l,
              const struct conn_side *side,
              void *owner)
{
    int rv;

    memset(c, 0, sizeof *c);
    c->side = side;
    c->owner = owner;
    c->lim = l;
    envelope_view_init(&c->view);
    rv = uv_tcp_init(loop, &c->tcp);
    if (rv != 0) {
        return rv; /* UNTESTED: uv_tcp_init only fails on bad flags */
    }
    c->tcp.data = c;
    c->open_handles = 1;
    c->last_active_ms = uv_now(loop);
    return 0;
}

/* Frames go through the cork (see the top). */
void conn_cork_init(struct conn *c, uv_loop_t *loop)
{
    ONCE_ASSERT(!c->corking, "conn_cork_init is called once");
    if (uv_prepare_init(loop, &c->flush) == 0) { /* cannot fail in 1.44 */
        c->flush.data = c;
        c->corking = true;
        c->open_handles++;
    }
}

int conn_read_start(struct conn *c)
{
    return uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

void conn_discard(struct conn *c)
{
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

void conn_close(struct conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = true;
    conn_account(c); /* a closing conn counts nothing */
    c->side->closing(c);
    if (c->corking) {
        /* Corked answers never reached the socket: dropped, like the
         * queued writes uv_close cancels. */
        ONCE_ASSERT(c->out_bytes >= c->clen, "corked bytes count in out_bytes");
        c->out_bytes -= c->clen;
        free(c->cbuf);
        c->cbuf = NULL;
        c->clen = 0;
        c->ccap = 0;
        uv_close((uv_handle_t *)&c->flush, on_conn_closed);
    }
    if (c->tls_on) {
        uv_close((uv_handle_t *)&c->hs_timer, on_conn_closed);
    }
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

const char *rpc_conn_strerror(int rv)
{
    return err_str(rv);
}
