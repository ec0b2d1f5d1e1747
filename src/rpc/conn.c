/* rpc/conn.c: framed RPC connections over libuv TCP. See conn.h.
 *
 * One struct conn per TCP stream, on either side. Reading accumulates bytes
 * in a buffer that grows to the frame in hand (never past frame_max + 4)
 * and shrinks back after a large frame; complete frames are decoded in
 * place with one envelope_view per connection. Writing queues one malloc'd
 * frame per uv_write; past out_max queued bytes the connection stops
 * reading, so a peer that sends calls without reading answers cannot make
 * the node buffer without bound.
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
 * Lifetimes: a conn is freed when its handle has closed and no rpc_call
 * refers to it; an rpc_call is freed by rpc_call_reply (after its deadline
 * timer, if any, has closed); a server is freed when its listener and every
 * conn have closed and every call was replied; a channel when its conn and
 * every pending call's timer have closed. */
#include "rpc/conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#define READ_CHUNK   (64u * 1024)
#define CHANNEL_HASH 1024u /* buckets of the pending-call table */

#define ERRMSG(buf, ...)                                   \
    do {                                                   \
        if ((buf) != NULL) {                               \
            snprintf((buf), RPC_ERRMSG_SIZE, __VA_ARGS__); \
        }                                                  \
    } while (0)

void rpc_limits_default(struct rpc_limits *l)
{
    l->frame_max = FRAME_MAX_DEFAULT;
    l->calls_max = 1024;
    l->conns_max = 4096;
    l->idle_ms = 300000;
    l->out_max = 8u << 20;
    l->deadline_ms = 5000;
}

int rpc_addr_parse(const char *addr, struct sockaddr_in *out)
{
    char ip[INET_ADDRSTRLEN];
    const char *colon;
    size_t n;
    unsigned long port = 0;
    const char *p;

    if (addr == NULL || (colon = strrchr(addr, ':')) == NULL) {
        return RPC_E_ADDR;
    }
    n = (size_t)(colon - addr);
    if (n == 0 || n >= sizeof ip) {
        return RPC_E_ADDR;
    }
    memcpy(ip, addr, n);
    ip[n] = '\0';
    p = colon + 1;
    if (*p == '\0' || strlen(p) > 5) {
        return RPC_E_ADDR;
    }
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return RPC_E_ADDR;
        }
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port == 0 || port > 65535) {
        return RPC_E_ADDR;
    }
    memset(out, 0, sizeof *out);
    /* inet_pton takes exactly dotted-quad IPv4, nothing else. */
    if (inet_pton(AF_INET, ip, &out->sin_addr) != 1) {
        return RPC_E_ADDR;
    }
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    return 0;
}

/* ------------------------------------------------------------------------
 * Connections (both sides)
 * ---------------------------------------------------------------------- */

struct conn
{
    uv_tcp_t tcp;
    struct rpc_server *srv;   /* server side */
    struct rpc_channel *ch;   /* client side */
    struct conn *prev, *next; /* server's list */
    const struct rpc_limits *lim;

    uint8_t *rbuf;
    size_t rpos, rlen, rcap; /* unread bytes are rbuf[rpos..rlen) */
    struct envelope_view view;

    size_t out_bytes;
    bool paused;  /* reading stopped for backpressure */
    bool closing; /* uv_close called or pending after a last write */
    bool close_after_write;
    bool handle_closed;    /* every handle below has closed */
    unsigned open_handles; /* tcp, and flush when corking */
    /* Frames of this iteration, written by on_flush. */
    bool corking;
    uv_prepare_t flush;
    uint8_t *cbuf;
    size_t clen, ccap;
    unsigned calls; /* server: unanswered calls */
    unsigned refs;  /* rpc_calls pointing here (answered or not) */
    uint64_t last_active_ms;
    uint64_t last_write_ms; /* last write completion, or queue start */
};

struct wreq
{
    uv_write_t req;
    struct conn *c;
    size_t len;
    uint8_t *ext;    /* corked frames (owned), or NULL: frame[] below */
    uint8_t frame[]; /* the whole frame */
};

/* The two sides meet in these (defined with their side below). */
static void conn_close(struct conn *c);
static void conn_on_frame(struct conn *c, const uint8_t *env, size_t len);
static void conn_bad_frame(struct conn *c, const char *errmsg);
static void server_conn_closing(struct conn *c);
static void server_conn_freed(struct rpc_server *s);
static void channel_conn_closing(struct conn *c);
static void channel_conn_freed(struct rpc_channel *ch);
static void channel_protocol_error(struct conn *c);
static void channel_answer(struct conn *c, struct envelope_view *v);
static void on_kick(uv_timer_t *t);

static void conn_maybe_free(struct conn *c)
{
    if (!c->handle_closed || c->refs > 0) {
        return;
    }
    envelope_view_close(&c->view);
    free(c->rbuf);
    if (c->srv != NULL) {
        struct rpc_server *s = c->srv;

        free(c);
        server_conn_freed(s);
    } else {
        struct rpc_channel *ch = c->ch;

        free(c);
        channel_conn_freed(ch);
    }
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    if (--c->open_handles > 0) {
        return;
    }
    c->handle_closed = true;
    conn_maybe_free(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;
    size_t want = READ_CHUNK;
    uint32_t env_len;

    (void)suggested;
    /* Compact: unread bytes move to the front. What is left is less than
     * one frame (on_read consumed every whole one). */
    if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    /* Room for the whole frame in hand (bounded by frame_max), so one large
     * frame is read into place without repeated growth. */
    if (frame_decode_header(c->rbuf, c->rlen, c->lim->frame_max, &env_len) ==
            0 &&
        FRAME_HEADER_LEN + (size_t)env_len > want) {
        want = FRAME_HEADER_LEN + (size_t)env_len;
    }
    if (c->rcap < want) {
        uint8_t *nb = realloc(c->rbuf, want);

        if (nb == NULL) { /* UNTESTED: malloc; libuv reports UV_ENOBUFS */
            buf->base = NULL;
            buf->len = 0;
            return;
        }
        c->rbuf = nb;
        c->rcap = want;
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

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    bool big = false;

    (void)buf;
    if (nread < 0) {
        conn_close(c); /* EOF or error */
        return;
    }
    if (nread == 0) {
        return;
    }
    c->rlen += (size_t)nread;
    c->last_active_ms = uv_now(s->loop);
    while (!c->closing && !c->close_after_write) {
        uint32_t env_len;
        int rv = frame_decode_header(c->rbuf + c->rpos, c->rlen - c->rpos,
                                     c->lim->frame_max, &env_len);

        if (rv == 1) {
            break; /* fewer than 4 bytes */
        }
        if (rv != 0) {
            char errmsg[RPC_ERRMSG_SIZE];

            snprintf(errmsg, sizeof errmsg, "frame: %s (limit %zu bytes)",
                     rpc_strerror(rv), c->lim->frame_max);
            conn_bad_frame(c, errmsg);
            break;
        }
        if (c->rlen - c->rpos < FRAME_HEADER_LEN + (size_t)env_len) {
            break; /* wait for the rest */
        }
        big = big || env_len > READ_CHUNK;
        c->rpos += FRAME_HEADER_LEN;
        conn_on_frame(c, c->rbuf + c->rpos, env_len);
        c->rpos += env_len;
    }
    if (big && !c->closing) {
        conn_shrink(c);
    }
}

static void on_write(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct conn *c = w->c;

    c->out_bytes -= w->len;
    c->last_write_ms = uv_now(c->tcp.loop);
    free(w->ext);
    free(w);
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
    /* Server side only: a channel keeps reading (its answers are what
     * drains the server, which applies its own limit). */
    if (c->srv != NULL && !c->paused && c->out_bytes > c->lim->out_max) {
        c->paused = true;
        (void)uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* The prepare handle: the corked answers leave in one write. */
static void on_flush(uv_prepare_t *h)
{
    struct conn *c = h->data;
    struct wreq *w;
    uv_buf_t b;
    int rv;

    (void)uv_prepare_stop(h);
    if (c->clen == 0 || c->closing) {
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
    c->cbuf = NULL;
    c->clen = 0;
    c->ccap = 0;
    b = uv_buf_init((char *)w->ext, (unsigned)w->len);
    rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rv != 0) {
        c->out_bytes -= w->len;
        free(w->ext);
        free(w);
        conn_close(c);
    }
}

/* Room for @need more bytes in the cork: where they go, or NULL. */
static uint8_t *cork_reserve(struct conn *c, size_t need)
{
    if (c->ccap - c->clen < need) {
        size_t cap = c->ccap != 0 ? c->ccap : 4096;
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
    size_t len = 0;
    int rv;

    if (dst == NULL) {
        ERRMSG(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    rv = envelope_encode(v, c->lim->frame_max, dst, need, &len, errmsg);
    if (rv != 0) {
        return rv; /* UNTESTED: the first pass checked the same rules */
    }
    cork_commit(c, len);
    return 0;
}

/* Encode @v and queue it. 0, or a negative error (then nothing is queued:
 * an encode error, or a write that failed at once, which closes @c). */
static int conn_send(struct conn *c,
                     const struct envelope_view *v,
                     char *errmsg)
{
    size_t need = 0;
    struct wreq *w;
    uv_buf_t b;
    int rv;

    if (c->closing) {
        ERRMSG(errmsg, "connection closed");
        return RPC_E_LOST;
    }
    rv = envelope_encode(v, c->lim->frame_max, NULL, 0, &need, errmsg);
    if (rv != RPC_E_NOSPACE) {
        return rv; /* a rule broken or too big */
    }
    if (c->corking) {
        return conn_cork(c, v, need, errmsg);
    }
    w = malloc(sizeof *w + need);
    if (w == NULL) {
        ERRMSG(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    rv = envelope_encode(v, c->lim->frame_max, w->frame, need, &w->len, errmsg);
    if (rv != 0) {
        free(w); /* UNTESTED: the first pass checked the same rules */
        return rv;
    }
    w->c = c;
    w->ext = NULL;
    b = uv_buf_init((char *)w->frame, (unsigned)w->len);
    rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rv != 0) {
        free(w);
        ERRMSG(errmsg, "write: %s", uv_strerror(rv));
        conn_close(c);
        return RPC_E_LOST;
    }
    note_queued(c, w->len);
    return 0;
}

static int conn_init(struct conn *c,
                     uv_loop_t *loop,
                     const struct rpc_limits *l)
{
    int rv;

    memset(c, 0, sizeof *c);
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
static void conn_cork_init(struct conn *c, uv_loop_t *loop)
{
    if (uv_prepare_init(loop, &c->flush) == 0) { /* cannot fail in 1.44 */
        c->flush.data = c;
        c->corking = true;
        c->open_handles++;
    }
}

static void conn_close(struct conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = true;
    if (c->srv != NULL) {
        server_conn_closing(c);
    } else {
        channel_conn_closing(c);
    }
    if (c->corking) {
        /* Corked answers never reached the socket: dropped, like the
         * queued writes uv_close cancels. */
        c->out_bytes -= c->clen;
        free(c->cbuf);
        c->cbuf = NULL;
        c->clen = 0;
        c->ccap = 0;
        uv_close((uv_handle_t *)&c->flush, on_conn_closed);
    }
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* ------------------------------------------------------------------------
 * Server
 * ---------------------------------------------------------------------- */

struct rpc_server
{
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t idle_timer;
    struct rpc_limits lim;
    rpc_serve_fn serve;
    void *arg;
    void (*log)(void *arg, const char *level, const char *msg);
    struct rpc_ids ids;
    struct conn *conns; /* open ones */
    unsigned n_conns;   /* allocated (open or closing) */
    unsigned n_calls;   /* not yet replied by the handler */
    unsigned handles;   /* listener + idle timer while open */
    struct rpc_server_stats st;
    bool closing;
    void (*close_cb)(void *arg);
    void *close_arg;
};

/* An rpc_call with what only the layer sees. */
struct call
{
    struct rpc_call pub;
    struct conn *c;
    uv_timer_t timer;
    bool has_timer;
    bool answered; /* by the handler or the layer */
    bool sent;     /* rpc_call_mark_sent */
};

static void srv_logf(struct rpc_server *s,
                     const char *level,
                     const char *fmt,
                     ...) __attribute__((format(printf, 3, 4)));
static void srv_logf(struct rpc_server *s,
                     const char *level,
                     const char *fmt,
                     ...)
{
    char msg[512];
    va_list ap;

    if (s->log == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->log(s->arg, level, msg);
}

static void stamp_ids(const struct rpc_server *s, struct envelope_view *v)
{
    v->has_cluster_id = s->ids.has_cluster_id;
    memcpy(v->cluster_id, s->ids.cluster_id, RPC_ID_LEN);
    v->node_id = s->ids.node_id;
    v->has_boot_id = true;
    memcpy(v->boot_id, s->ids.boot_id, RPC_ID_LEN);
}

/* An error answer from the layer itself. */
static void send_error(struct conn *c,
                       uint64_t call_id,
                       enum rpc_method method,
                       enum rpc_status status,
                       enum rpc_applied applied,
                       const char *error)
{
    struct envelope_view v;
    size_t n = strlen(error);

    memset(&v, 0, sizeof v);
    v.call_id = call_id;
    v.method = method;
    v.direction = RPC_RESPONSE;
    v.status = status;
    v.applied = applied;
    v.error = error;
    v.error_len = n > RPC_ERROR_MAX ? RPC_ERROR_MAX : n;
    stamp_ids(c->srv, &v);
    (void)conn_send(c, &v, NULL);
}

static void server_maybe_done(struct rpc_server *s)
{
    void (*cb)(void *arg);
    void *arg;

    if (!s->closing || s->handles > 0 || s->n_conns > 0 || s->n_calls > 0) {
        return;
    }
    cb = s->close_cb;
    arg = s->close_arg;
    free(s);
    if (cb != NULL) {
        cb(arg);
    }
}

static void server_conn_freed(struct rpc_server *s)
{
    s->n_conns--;
    server_maybe_done(s);
}

static void server_conn_closing(struct conn *c)
{
    struct rpc_server *s = c->srv;

    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    c->prev = c->next = NULL;
    s->st.conns_open--;
}

/* A frame that does not decode: say why, then close once it is written. */
static void conn_bad_frame(struct conn *c, const char *errmsg)
{
    if (c->srv != NULL) {
        c->srv->st.frames_malformed++;
        srv_logf(c->srv, "warn", "closing a client connection: %s", errmsg);
        send_error(c, 0, RPC_METHOD_UNSPECIFIED, RPC_STATUS_INVALID_ARGUMENT,
                   RPC_APPLIED_FALSE, errmsg);
        (void)uv_read_stop((uv_stream_t *)&c->tcp);
        c->close_after_write = true;
        if (c->out_bytes == 0) {
            conn_close(c);
        }
        return;
    }
    channel_protocol_error(c);
}

/* Free an answered call and what it kept alive. The conn (and with its
 * last conn a closing server) may be freed here: nothing of either is
 * touched after. */
static void call_free(struct call *k)
{
    struct conn *c = k->c;
    struct rpc_server *s = c->srv;

    free(k);
    c->refs--;
    /* A call counts against calls_max until the handler lets it go, also
     * after the layer answered it for its deadline: otherwise short
     * deadlines would let one connection pile up calls without bound. */
    c->calls--;
    s->n_calls--;
    if (c->handle_closed && c->refs == 0) {
        conn_maybe_free(c); /* then server_conn_freed -> server_maybe_done */
    } else {
        server_maybe_done(s);
    }
}

static void on_call_timer_closed(uv_handle_t *h)
{
    call_free(h->data);
}

static void call_answered(struct call *k)
{
    /* Idle time counts from the last frame received or answer given. */
    k->c->last_active_ms = uv_now(k->c->tcp.loop);
    k->answered = true;
    k->c->srv->st.calls_in_flight--;
}

static void on_deadline(uv_timer_t *t)
{
    struct call *k = t->data;

    if (k->answered) {
        return; /* UNTESTED: the timer is stopped when answered */
    }
    call_answered(k);
    k->c->srv->st.calls_expired++;
    if (!k->c->closing) {
        send_error(k->c, k->pub.call_id, k->pub.method,
                   RPC_STATUS_DEADLINE_EXCEEDED,
                   k->sent ? RPC_APPLIED_UNKNOWN : RPC_APPLIED_FALSE,
                   k->sent ? "deadline exceeded; the outcome is unknown"
                           : "deadline exceeded before the call was proposed");
    }
}

static void server_request(struct conn *c, struct envelope_view *v)
{
    struct rpc_server *s = c->srv;
    struct call *k;

    if (v->direction != RPC_REQUEST) {
        conn_bad_frame(c, "a response sent to a server");
        return;
    }
    if (s->closing) {
        send_error(c, v->call_id, v->method, RPC_STATUS_UNAVAILABLE,
                   RPC_APPLIED_FALSE, "the node is shutting down");
        return;
    }
    if (v->has_cluster_id && s->ids.has_cluster_id &&
        memcmp(v->cluster_id, s->ids.cluster_id, RPC_ID_LEN) != 0) {
        /* The caller pinned another cluster: refused before the node sees
         * it, so a claim never lands in a cluster its client refuses. */
        send_error(c, v->call_id, v->method, RPC_STATUS_FAILED_PRECONDITION,
                   RPC_APPLIED_FALSE,
                   "cluster id mismatch: the request is for another cluster");
        return;
    }
    if (c->calls >= s->lim.calls_max) {
        s->st.calls_busy++;
        send_error(c, v->call_id, v->method, RPC_STATUS_RESOURCE_EXHAUSTED,
                   RPC_APPLIED_FALSE,
                   "too many calls in flight on this "
                   "connection");
        return;
    }
    k = calloc(1, sizeof *k);
    if (k == NULL) { /* UNTESTED: malloc */
        send_error(c, v->call_id, v->method, RPC_STATUS_RESOURCE_EXHAUSTED,
                   RPC_APPLIED_FALSE, "out of memory");
        return;
    }
    k->pub.call_id = v->call_id;
    k->pub.method = v->method;
    k->pub.group_id = v->group_id;
    k->pub.deadline_ms = v->deadline_ms;
    k->pub.received_mono_ms = uv_now(s->loop);
    k->pub.forwarded = v->forwarded;
    k->pub.has_cluster_id = v->has_cluster_id;
    memcpy(k->pub.cluster_id, v->cluster_id, RPC_ID_LEN);
    k->c = c;
    c->refs++;
    c->calls++;
    s->n_calls++;
    s->st.calls_in_flight++;
    s->st.calls_served++;
    if (k->pub.deadline_ms == 0) {
        k->pub.deadline_ms = s->lim.deadline_ms; /* may stay 0: none */
    }
    if (k->pub.deadline_ms > 0 && uv_timer_init(s->loop, &k->timer) == 0) {
        k->has_timer = true;
        k->timer.data = k;
        (void)uv_timer_start(&k->timer, on_deadline, k->pub.deadline_ms, 0);
    }
    s->serve(s->arg, &k->pub, v);
}

static void conn_on_frame(struct conn *c, const uint8_t *env, size_t len)
{
    char errmsg[RPC_ERRMSG_SIZE];
    int rv = envelope_decode(env, len, c->lim->frame_max, &c->view, errmsg);

    if (rv != 0) {
        conn_bad_frame(c, errmsg);
        return;
    }
    if (c->srv != NULL) {
        server_request(c, &c->view);
    } else {
        channel_answer(c, &c->view);
    }
}

void rpc_call_mark_sent(struct rpc_call *call)
{
    ((struct call *)call)->sent = true;
}

void rpc_call_reply(struct rpc_call *call, const struct rpc_reply *r)
{
    struct call *k = (struct call *)call;
    struct conn *c = k->c;
    struct rpc_server *s = c->srv;

    if (!k->answered) {
        call_answered(k);
        if (!c->closing) {
            struct envelope_view v;
            char errmsg[RPC_ERRMSG_SIZE];
            int rv;

            memset(&v, 0, sizeof v);
            v.call_id = k->pub.call_id;
            v.method = k->pub.method;
            v.direction = RPC_RESPONSE;
            v.status = r->status;
            v.applied = r->applied;
            v.error = r->error;
            v.error_len = r->error != NULL ? strlen(r->error) : 0;
            v.leader_hint = r->leader_hint;
            v.leader_hint_len =
                r->leader_hint != NULL ? strlen(r->leader_hint) : 0;
            v.group_id = k->pub.group_id;
            v.body = r->body;
            v.body_len = r->body_len;
            stamp_ids(s, &v);
            rv = conn_send(c, &v, errmsg);
            if (rv != 0 && rv != RPC_E_LOST) {
                srv_logf(s, "error", "answer to %s call %llu not sent: %s",
                         rpc_method_name(k->pub.method),
                         (unsigned long long)k->pub.call_id, errmsg);
                send_error(c, k->pub.call_id, k->pub.method, RPC_STATUS_UNKNOWN,
                           RPC_APPLIED_UNKNOWN,
                           "the answer could not be encoded");
            }
        }
    }
    if (k->has_timer) {
        (void)uv_timer_stop(&k->timer);
        uv_close((uv_handle_t *)&k->timer, on_call_timer_closed);
        return;
    }
    call_free(k);
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct rpc_server *s = listener->data;
    struct conn *c;

    if (status != 0 || s->closing) {
        return; /* UNTESTED: accept errors (EMFILE) are retried by libuv */
    }
    c = malloc(sizeof *c);
    if (c == NULL || conn_init(c, s->loop, &s->lim) != 0) {
        free(c); /* UNTESTED: malloc */
        return;
    }
    c->srv = s;
    s->n_conns++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        c->closing = true; /* UNTESTED: accept after a successful poll */
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        return;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    conn_cork_init(c, s->loop);
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    s->st.conns_open++;
    s->st.conns_accepted++;
    if (s->st.conns_open > s->lim.conns_max) {
        s->st.conns_refused++;
        send_error(c, 0, RPC_METHOD_UNSPECIFIED, RPC_STATUS_RESOURCE_EXHAUSTED,
                   RPC_APPLIED_FALSE, "too many connections to this node");
        c->close_after_write = true;
        if (c->out_bytes == 0) {
            conn_close(c); /* UNTESTED: the write failed at once */
        }
        return;
    }
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c); /* UNTESTED */
    }
}

static void on_idle_timer(uv_timer_t *t)
{
    struct rpc_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    struct conn *c = s->conns;

    while (c != NULL) {
        struct conn *next = c->next;

        if (c->calls == 0 && c->out_bytes == 0 && !c->close_after_write &&
            now - c->last_active_ms >= s->lim.idle_ms) {
            conn_close(c);
        } else if (c->out_bytes > 0 &&
                   now - c->last_write_ms >= s->lim.idle_ms) {
            /* A peer that stopped reading: its answers cannot leave, and
             * the queue would otherwise stay (up to out_max plus what the
             * calls in flight produce) for as long as it keeps the socket. */
            srv_logf(s, "warn",
                     "closing a client connection that has not read for %u ms "
                     "(%zu bytes queued)",
                     s->lim.idle_ms, c->out_bytes);
            conn_close(c);
        }
        c = next;
    }
}

static void on_server_handle_closed(uv_handle_t *h)
{
    struct rpc_server *s = h->data;

    s->handles--;
    server_maybe_done(s);
}

int rpc_server_start(struct rpc_server **out,
                     uv_loop_t *loop,
                     const struct rpc_server_config *cfg,
                     char *errmsg)
{
    struct rpc_server *s;
    struct sockaddr_in sa;
    int rv;

    *out = NULL;
    if (rpc_addr_parse(cfg->addr, &sa) != 0) {
        ERRMSG(errmsg, "listen address %s: not IPv4 IP:PORT",
               cfg->addr != NULL ? cfg->addr : "(none)");
        return RPC_E_ADDR;
    }
    if (cfg->limits.frame_max == 0 || cfg->limits.frame_max > FRAME_MAX_CEIL ||
        cfg->limits.calls_max == 0 || cfg->limits.conns_max == 0 ||
        cfg->limits.out_max == 0) {
        ERRMSG(errmsg,
               "limits: frame_max 1..%u, calls_max, conns_max and "
               "out_max > 0",
               FRAME_MAX_CEIL);
        return RPC_E_LIMIT;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        ERRMSG(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    s->loop = loop;
    s->lim = cfg->limits;
    s->serve = cfg->serve;
    s->arg = cfg->arg;
    s->log = cfg->log;
    s->ids = cfg->ids;
    (void)uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    rv = uv_tcp_bind(&s->listener, (const struct sockaddr *)&sa, 0);
    if (rv == 0) {
        rv = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    }
    if (rv != 0) {
        ERRMSG(errmsg, "listen on %s: %s", cfg->addr, uv_strerror(rv));
        /* Freed from the close callback: the server is closing with one
         * handle and nothing else. */
        s->closing = true;
        s->handles = 1;
        uv_close((uv_handle_t *)&s->listener, on_server_handle_closed);
        return RPC_E_LISTEN;
    }
    s->handles = 1;
    if (s->lim.idle_ms > 0) {
        uint64_t every = s->lim.idle_ms / 4 > 1000 ? 1000 : s->lim.idle_ms / 4;

        (void)uv_timer_init(loop, &s->idle_timer);
        s->idle_timer.data = s;
        (void)uv_timer_start(&s->idle_timer, on_idle_timer, every ? every : 1,
                             every ? every : 1);
        s->handles++;
    }
    *out = s;
    return 0;
}

void rpc_server_set_ids(struct rpc_server *s, const struct rpc_ids *ids)
{
    s->ids = *ids;
}

void rpc_server_stats(const struct rpc_server *s, struct rpc_server_stats *st)
{
    *st = s->st;
}

void rpc_server_close(struct rpc_server *s, void (*cb)(void *arg), void *arg)
{
    if (s->closing) {
        return;
    }
    s->closing = true;
    s->close_cb = cb;
    s->close_arg = arg;
    uv_close((uv_handle_t *)&s->listener, on_server_handle_closed);
    if (s->lim.idle_ms > 0) {
        uv_close((uv_handle_t *)&s->idle_timer, on_server_handle_closed);
    }
    while (s->conns != NULL) {
        conn_close(s->conns); /* unlinks it */
    }
}

/* ------------------------------------------------------------------------
 * Channel
 * ---------------------------------------------------------------------- */

struct pcall
{
    struct rpc_channel *ch;
    uint64_t id;
    rpc_answer_fn cb;
    void *arg;
    bool sent;
    bool done;      /* cb ran (or is about to) */
    int early_rv;   /* failed before queueing on the wire */
    uint8_t *frame; /* encoded, until written */
    size_t frame_len;
    uv_timer_t timer;
    struct pcall *hnext;       /* bucket chain */
    struct pcall *prev, *next; /* all pending, in call order */
};

struct rpc_channel
{
    uv_loop_t *loop;
    char addr[RPC_ADDR_MAX + 1];
    struct sockaddr_in sa;
    struct rpc_limits lim;
    struct conn *conn; /* current connection, or NULL */
    bool connecting;
    bool connected;
    uv_connect_t creq;
    uv_timer_t kick; /* flush/connect from the loop, never inside a call */
    bool kick_armed;
    uint64_t next_id;
    struct pcall *buckets[CHANNEL_HASH];
    struct pcall *head, *tail; /* pending (not done) */
    unsigned n_pending;
    unsigned n_timers; /* pcall timers not yet closed */
    unsigned n_conns;  /* conns not yet freed */
    bool closing;
};

const char *rpc_channel_addr(const struct rpc_channel *ch)
{
    return ch->addr;
}

unsigned rpc_channel_pending(const struct rpc_channel *ch)
{
    return ch->n_pending;
}

static void channel_maybe_free(struct rpc_channel *ch)
{
    if (ch->closing && ch->n_timers == 0 && ch->n_conns == 0 &&
        !ch->connecting) {
        free(ch);
    }
}

static void channel_unlink(struct rpc_channel *ch, struct pcall *p)
{
    struct pcall **pp = &ch->buckets[p->id % CHANNEL_HASH];

    while (*pp != p) {
        pp = &(*pp)->hnext;
    }
    *pp = p->hnext;
    if (p->prev != NULL) {
        p->prev->next = p->next;
    } else {
        ch->head = p->next;
    }
    if (p->next != NULL) {
        p->next->prev = p->prev;
    } else {
        ch->tail = p->prev;
    }
    ch->n_pending--;
}

static void on_kick_closed(uv_handle_t *h)
{
    struct rpc_channel *ch = h->data;

    ch->n_timers--;
    channel_maybe_free(ch);
}

static void on_pcall_timer_closed(uv_handle_t *h)
{
    struct pcall *p = h->data;
    struct rpc_channel *ch = p->ch;

    free(p->frame);
    free(p);
    ch->n_timers--;
    channel_maybe_free(ch);
}

/* Complete @p: unlink, run its callback, release. */
static void pcall_finish(struct pcall *p, int rv, struct envelope_view *ans)
{
    struct rpc_channel *ch = p->ch;

    if (p->done) {
        return;
    }
    p->done = true;
    channel_unlink(ch, p);
    (void)uv_timer_stop(&p->timer);
    p->cb(p->arg, rv, rv == 0 ? true : p->sent, ans);
    uv_close((uv_handle_t *)&p->timer, on_pcall_timer_closed);
}

enum which { ALL_CALLS, SENT_CALLS, REFUSED_CALLS };

static bool pcall_is(const struct pcall *p, enum which w)
{
    switch (w) {
        case SENT_CALLS:
            return p->sent;
        case REFUSED_CALLS: /* marked by channel_answer */
            return !p->sent && p->early_rv == RPC_E_CONNECT;
        default:
            return true;
    }
}

/* Fail the pending calls of kind @w with @rv, each with its own sent flag.
 * Callbacks may make new calls on this channel: those are not failed here,
 * so the set is taken first. A pcall's memory lives until its timer has
 * closed, so the pointers stay valid even if a callback finishes another
 * call. */
static void channel_fail(struct rpc_channel *ch, int rv, enum which w)
{
    struct pcall **set;
    struct pcall *p;
    size_t n = 0;

    if (ch->n_pending == 0) {
        return;
    }
    set = malloc(ch->n_pending * sizeof *set);
    if (set == NULL) { /* UNTESTED: malloc; fall back to the list walk */
        while ((p = ch->head) != NULL && pcall_is(p, w)) {
            pcall_finish(p, rv, NULL);
        }
        return;
    }
    for (p = ch->head; p != NULL; p = p->next) {
        if (pcall_is(p, w)) {
            set[n++] = p;
        }
    }
    for (size_t i = 0; i < n; i++) {
        pcall_finish(set[i], rv, NULL);
    }
    free(set);
}

static void channel_conn_freed(struct rpc_channel *ch)
{
    ch->n_conns--;
    channel_maybe_free(ch);
}

static void channel_conn_closing(struct conn *c)
{
    struct rpc_channel *ch = c->ch;

    if (ch->conn == c) {
        ch->conn = NULL;
        ch->connected = false;
        /* Everything written may have arrived: unknown. Calls queued but
         * not written (none while connected) stay for the next connect. */
        channel_fail(ch, ch->closing ? RPC_E_CLOSED : RPC_E_LOST, SENT_CALLS);
        /* Calls not yet written (a write that failed at once stopped the
         * flush) go out on a new connection. */
        if (!ch->closing && ch->n_pending > 0 && !ch->kick_armed) {
            ch->kick_armed = true;
            (void)uv_timer_start(&ch->kick, on_kick, 0, 0);
        }
    }
}

static void channel_protocol_error(struct conn *c)
{
    struct rpc_channel *ch = c->ch;

    if (ch->conn == c) {
        channel_fail(ch, RPC_E_PROTOCOL, SENT_CALLS);
    }
    conn_close(c);
}

static void channel_answer(struct conn *c, struct envelope_view *v)
{
    struct rpc_channel *ch = c->ch;
    struct pcall *p;

    if (v->direction == RPC_RESPONSE && v->call_id == 0 &&
        v->status == RPC_STATUS_RESOURCE_EXHAUSTED &&
        v->applied == RPC_APPLIED_FALSE) {
        /* The server refused the connection (conns_max) before reading a
         * byte of it: nothing written on it was seen, so every call on it
         * is definitely not applied. */
        for (p = ch->head; p != NULL; p = p->next) {
            if (p->sent) {
                p->sent = false;
                p->early_rv = RPC_E_CONNECT;
            }
        }
        channel_fail(ch, RPC_E_CONNECT, REFUSED_CALLS);
        conn_close(c);
        return;
    }
    if (v->direction != RPC_RESPONSE || v->call_id == 0) {
        /* A request from a server, or a connection-level error (the server
         * refused the connection or a frame): nothing more comes. */
        channel_protocol_error(c);
        return;
    }
    for (p = ch->buckets[v->call_id % CHANNEL_HASH]; p != NULL; p = p->hnext) {
        if (p->id == v->call_id) {
            pcall_finish(p, 0, v);
            return;
        }
    }
    /* An answer to a call that timed out or was closed: dropped. */
}

static void pcall_write(struct rpc_channel *ch, struct pcall *p)
{
    struct conn *c = ch->conn;
    struct wreq *w;
    uv_buf_t b;
    int rv;

    if (c->corking) {
        uint8_t *dst = cork_reserve(c, p->frame_len);

        if (dst == NULL) { /* UNTESTED: malloc */
            pcall_finish(p, RPC_E_NOMEM, NULL);
            return;
        }
        memcpy(dst, p->frame, p->frame_len);
        cork_commit(c, p->frame_len);
        free(p->frame);
        p->frame = NULL;
        p->sent = true; /* see the top: it may leave at any moment */
        return;
    }
    w = malloc(sizeof *w + p->frame_len);
    if (w == NULL) { /* UNTESTED: malloc */
        pcall_finish(p, RPC_E_NOMEM, NULL);
        return;
    }
    memcpy(w->frame, p->frame, p->frame_len);
    w->len = p->frame_len;
    w->c = c;
    w->ext = NULL;
    free(p->frame);
    p->frame = NULL;
    b = uv_buf_init((char *)w->frame, (unsigned)w->len);
    p->sent = true;
    rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rv != 0) {
        free(w);
        p->sent = false; /* never handed to the socket */
        pcall_finish(p, RPC_E_CONNECT, NULL);
        conn_close(c);
        return;
    }
    c->out_bytes += w->len;
}

static void channel_flush(struct rpc_channel *ch)
{
    struct pcall *p = ch->head;

    while (p != NULL && ch->connected) {
        struct pcall *next = p->next;

        if (!p->sent && p->frame != NULL) {
            pcall_write(ch, p);
        }
        p = next;
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    struct rpc_channel *ch = req->data;
    struct conn *c = ch->conn;

    ch->connecting = false;
    if (status != 0 || ch->closing) {
        /* Nothing was sent: every queued call fails definitely. */
        if (c != NULL) {
            conn_close(c);
        }
        channel_fail(ch, ch->closing ? RPC_E_CLOSED : RPC_E_CONNECT, ALL_CALLS);
        channel_maybe_free(ch);
        return;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c); /* UNTESTED */
        channel_fail(ch, RPC_E_CONNECT, ALL_CALLS);
        return;
    }
    ch->connected = true;
    channel_flush(ch);
}

static void channel_connect(struct rpc_channel *ch)
{
    struct conn *c;
    int rv;

    c = malloc(sizeof *c);
    if (c == NULL || conn_init(c, ch->loop, &ch->lim) != 0) {
        free(c); /* UNTESTED: malloc */
        channel_fail(ch, RPC_E_NOMEM, ALL_CALLS);
        return;
    }
    c->ch = ch;
    conn_cork_init(c, ch->loop);
    ch->n_conns++;
    ch->conn = c;
    ch->creq.data = ch;
    rv = uv_tcp_connect(&ch->creq, &c->tcp, (const struct sockaddr *)&ch->sa,
                        on_connect);
    if (rv != 0) {
        ch->conn = NULL;
        conn_close(c);
        channel_fail(ch, RPC_E_CONNECT, ALL_CALLS);
        return;
    }
    ch->connecting = true;
}

static void on_kick(uv_timer_t *t)
{
    struct rpc_channel *ch = t->data;

    ch->kick_armed = false;
    if (ch->closing) {
        return; /* UNTESTED: close stops the timer */
    }
    if (ch->connected) {
        channel_flush(ch);
    } else if (!ch->connecting && ch->n_pending > 0) {
        channel_connect(ch);
    }
}

static void on_pcall_timer(uv_timer_t *t)
{
    struct pcall *p = t->data;

    pcall_finish(p, p->early_rv != 0 ? p->early_rv : RPC_E_TIMEOUT, NULL);
}

int rpc_channel_open(struct rpc_channel **out,
                     uv_loop_t *loop,
                     const char *addr,
                     const struct rpc_limits *limits,
                     char *errmsg)
{
    struct rpc_channel *ch;
    struct sockaddr_in sa;

    *out = NULL;
    if (rpc_addr_parse(addr, &sa) != 0 || strlen(addr) > RPC_ADDR_MAX) {
        ERRMSG(errmsg, "address %s: not IPv4 IP:PORT",
               addr != NULL ? addr : "(none)");
        return RPC_E_ADDR;
    }
    ch = calloc(1, sizeof *ch);
    if (ch == NULL) {
        ERRMSG(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    ch->loop = loop;
    strcpy(ch->addr, addr);
    ch->sa = sa;
    ch->lim = *limits;
    ch->next_id = 1;
    (void)uv_timer_init(loop, &ch->kick);
    ch->kick.data = ch;
    ch->n_timers = 1; /* the kick timer */
    *out = ch;
    return 0;
}

int rpc_channel_call(struct rpc_channel *ch,
                     const struct envelope_view *req,
                     uint64_t timeout_ms,
                     rpc_answer_fn cb,
                     void *arg)
{
    struct envelope_view v;
    struct pcall *p;
    size_t need = 0;
    int rv;

    if (ch->closing) {
        return RPC_E_CLOSED;
    }
    memset(&v, 0, sizeof v);
    v.call_id = ch->next_id;
    v.method = req->method;
    v.direction = RPC_REQUEST;
    v.deadline_ms = req->deadline_ms;
    if (v.deadline_ms == 0 && timeout_ms > 0) {
        v.deadline_ms =
            timeout_ms > RPC_DEADLINE_MAX ? RPC_DEADLINE_MAX : timeout_ms;
    }
    v.group_id = req->group_id;
    v.forwarded = req->forwarded;
    v.has_cluster_id = req->has_cluster_id; /* the caller's pin, if any */
    memcpy(v.cluster_id, req->cluster_id, RPC_ID_LEN);
    v.body = req->body;
    v.body_len = req->body_len;
    rv = envelope_encode(&v, ch->lim.frame_max, NULL, 0, &need, NULL);
    if (rv != RPC_E_NOSPACE) {
        return rv;
    }
    p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->frame = malloc(need);
    }
    if (p == NULL || p->frame == NULL) {
        free(p); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    rv = envelope_encode(&v, ch->lim.frame_max, p->frame, need, &p->frame_len,
                         NULL);
    if (rv != 0) {
        free(p->frame); /* UNTESTED: checked above */
        free(p);
        return rv;
    }
    (void)uv_timer_init(ch->loop, &p->timer);
    p->timer.data = p;
    p->ch = ch;
    p->id = ch->next_id++;
    p->cb = cb;
    p->arg = arg;
    p->hnext = ch->buckets[p->id % CHANNEL_HASH];
    ch->buckets[p->id % CHANNEL_HASH] = p;
    p->prev = ch->tail;
    if (ch->tail != NULL) {
        ch->tail->next = p;
    } else {
        ch->head = p;
    }
    ch->tail = p;
    ch->n_pending++;
    ch->n_timers++;
    if (ch->n_pending > ch->lim.calls_max) {
        /* Refused, definitely unsent; answered from the loop. */
        p->early_rv = RPC_E_BUSY;
        free(p->frame);
        p->frame = NULL;
        (void)uv_timer_start(&p->timer, on_pcall_timer, 0, 0);
        return 0;
    }
    if (timeout_ms > 0) {
        (void)uv_timer_start(&p->timer, on_pcall_timer, timeout_ms, 0);
    }
    /* Written (or connected) from the loop, so no callback ever runs inside
     * this function, and calls made in one loop turn leave together. */
    if (!ch->kick_armed) {
        ch->kick_armed = true;
        (void)uv_timer_start(&ch->kick, on_kick, 0, 0);
    }
    return 0;
}

void rpc_channel_close(struct rpc_channel *ch)
{
    if (ch->closing) {
        return;
    }
    ch->closing = true;
    (void)uv_timer_stop(&ch->kick);
    uv_close((uv_handle_t *)&ch->kick, on_kick_closed);
    if (ch->conn != NULL) {
        conn_close(ch->conn); /* fails the sent calls: CLOSED */
    }
    channel_fail(ch, RPC_E_CLOSED, ALL_CALLS);
    channel_maybe_free(ch);
}

const char *rpc_conn_strerror(int rv)
{
    switch (rv) {
        case RPC_E_ADDR:
            return "address is not IPv4 IP:PORT";
        case RPC_E_LISTEN:
            return "cannot listen";
        case RPC_E_CONNECT:
            return "cannot connect (not sent)";
        case RPC_E_LOST:
            return "connection lost after sending (outcome unknown)";
        case RPC_E_TIMEOUT:
            return "no answer within the timeout";
        case RPC_E_CLOSED:
            return "channel closed";
        case RPC_E_BUSY:
            return "too many calls in flight (not sent)";
        case RPC_E_PROTOCOL:
            return "the server sent an invalid or connection-level error "
                   "frame";
        default:
            return rpc_strerror(rv);
    }
}
