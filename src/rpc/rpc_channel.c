/* rpc/rpc_channel.c: the client side of conn.h over the shared connection
 * (conn_int.h).
 *
 * A channel keeps its pending calls (struct pcall) in call order and in a
 * hash by call id; each has a timer for its timeout. A call is encoded
 * when it is made, and written from a zero-delay "kick" timer (never from
 * inside rpc_channel_call, so no callback runs there, and calls made in one
 * loop turn leave together), connecting first if there is no connection.
 * A lost connection fails the calls written on it (they may have arrived);
 * the calls not yet written wait for the next connection. A server that
 * refuses the connection over its conns_max answers call id 0 before it
 * reads anything: the calls on that connection fail as not sent.
 *
 * Lifetimes: a pcall's memory lives until its timer has closed (after its
 * callback ran); a channel is freed when it is closing, its conns are freed
 * and every pcall timer (and the kick timer) has closed. */
#include "rpc/conn_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "common/assert.h"

#define CHANNEL_HASH 1024u /* buckets of the pending-call table */

static void on_kick(uv_timer_t *t);

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
    bool handshaking; /* TLS: connected, the handshake not yet done */
    bool connected;
    struct tls_slot *tls;       /* borrowed; NULL or empty: plaintext */
    char host[INET_ADDRSTRLEN]; /* the name the server's cert must have */
    char last_error[ERR_MSG_SIZE];
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
        /* Every pending call holds an open timer, every conn a count. */
        ONCE_ASSERT(ch->n_pending == 0 && ch->conn == NULL,
                    "a channel is freed with no call and no connection");
        free(ch);
    }
}

static void channel_unlink(struct rpc_channel *ch, struct pcall *p)
{
    struct pcall **pp = &ch->buckets[p->id % CHANNEL_HASH];

    ONCE_ASSERT(ch->n_pending > 0, "n_pending counts the pending calls");
    while (*pp != p) {
        ONCE_ASSERT(*pp != NULL, "a pending call is in its bucket");
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

    ONCE_ASSERT(ch->n_timers > 0, "n_timers counts the open timers");
    ch->n_timers--;
    channel_maybe_free(ch);
}

static void on_pcall_timer_closed(uv_handle_t *h)
{
    struct pcall *p = h->data;
    struct rpc_channel *ch = p->ch;

    free(p->frame);
    free(p);
    ONCE_ASSERT(ch->n_timers > 0, "n_timers counts the open timers");
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
            ONCE_ASSERT(n < ch->n_pending, "the list holds n_pending calls");
            set[n++] = p;
        }
    }
    for (size_t i = 0; i < n; i++) {
        pcall_finish(set[i], rv, NULL);
    }
    free(set);
}

static void channel_conn_freed(void *owner)
{
    struct rpc_channel *ch = owner;

    ONCE_ASSERT(ch->n_conns > 0, "n_conns counts the conns not yet freed");
    ch->n_conns--;
    channel_maybe_free(ch);
}

static void channel_conn_closing(struct conn *c)
{
    struct rpc_channel *ch = c->ch;

    if (ch->conn == c && ch->handshaking) {
        /* The TLS handshake failed: nothing was written; like a failed
         * connect, every queued call fails, definitely not applied
         * (retrying at once would only fail the same way). */
        ch->conn = NULL;
        ch->handshaking = false;
        channel_fail(ch, ch->closing ? RPC_E_CLOSED : RPC_E_CONNECT, ALL_CALLS);
        return;
    }
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

/* A frame that does not decode: the server cannot be trusted any more
 * (@errmsg is for a server's log; a channel's calls get RPC_E_PROTOCOL). */
static void channel_bad_frame(struct conn *c, const char *errmsg)
{
    (void)errmsg;
    channel_protocol_error(c);
}

static void channel_flush(struct rpc_channel *ch);

static void channel_tls_ready(struct conn *c)
{
    struct rpc_channel *ch = c->ch;

    if (ch->conn != c) {
        return; /* UNTESTED: a conn the channel let go of */
    }
    ch->handshaking = false;
    ch->connected = true;
    ch->last_error[0] = '\0';
    channel_flush(ch);
}

static void channel_tls_failed(struct conn *c, int rv, const char *errmsg)
{
    struct rpc_channel *ch = c->ch;

    (void)rv;
    err_printf(ch->last_error, "%s: TLS: %s", ch->addr, errmsg);
}

static const struct conn_side channel_side = {
    .frame = channel_answer,
    .bad_frame = channel_bad_frame,
    .closing = channel_conn_closing,
    .freed = channel_conn_freed,
    .pause_reads = false,
    .ready = channel_tls_ready,
    .tls_failed = channel_tls_failed,
};

static void pcall_write(struct rpc_channel *ch, struct pcall *p)
{
    struct conn *c = ch->conn;
    int rv;

    ONCE_ASSERT(c != NULL && ch->connected && !p->sent && p->frame != NULL,
                "a call is written once, on the connected conn");
    rv = conn_send_copy(c, p->frame, p->frame_len);

    if (rv == RPC_E_NOMEM) { /* UNTESTED: malloc */
        pcall_finish(p, RPC_E_NOMEM, NULL);
        return;
    }
    free(p->frame);
    p->frame = NULL;
    if (rv != 0) {
        /* Never handed to the socket: not sent. */
        pcall_finish(p, RPC_E_CONNECT, NULL);
        conn_close(c);
        return;
    }
    /* Corked or queued, it may leave at any moment (conn.c's top). */
    p->sent = true;
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
    if (ch->tls != NULL && ch->tls->ctx != NULL) {
        char errmsg[ERR_MSG_SIZE];

        if (conn_tls_start(c, ch->tls->ctx, false, ch->host,
                           TLS_HANDSHAKE_MS_DEFAULT, errmsg) != 0) {
            err_printf(ch->last_error, "%s: TLS: %s", ch->addr, errmsg);
            conn_close(c);
            channel_fail(ch, RPC_E_CONNECT, ALL_CALLS);
            return;
        }
        ch->handshaking = true;
    }
    if (conn_read_start(c) != 0) {
        ch->handshaking = false;
        conn_close(c); /* UNTESTED */
        channel_fail(ch, RPC_E_CONNECT, ALL_CALLS);
        return;
    }
    if (ch->handshaking) {
        return; /* channel_tls_ready goes on */
    }
    ch->connected = true;
    channel_flush(ch);
}

static void channel_connect(struct rpc_channel *ch)
{
    struct conn *c;
    int rv;

    /* The reason of the last failure is about the last connection only. */
    ch->last_error[0] = '\0';
    c = malloc(sizeof *c);
    if (c == NULL || conn_init(c, ch->loop, &ch->lim, &channel_side, ch) != 0) {
        free(c); /* UNTESTED: malloc */
        channel_fail(ch, RPC_E_NOMEM, ALL_CALLS);
        return;
    }
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
        err_printf(errmsg, "address %s: not IPv4 IP:PORT",
                   addr != NULL ? addr : "(none)");
        return RPC_E_ADDR;
    }
    ch = calloc(1, sizeof *ch);
    if (ch == NULL) {
        err_printf(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    ch->loop = loop;
    strcpy(ch->addr, addr);
    snprintf(ch->host, sizeof ch->host, "%.*s",
             (int)(strrchr(addr, ':') - addr), addr);
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

    ONCE_ASSERT(cb != NULL, "every call is answered through its callback");
    if (ch->closing) {
        return RPC_E_CLOSED;
    }
    envelope_view_clear(&v);
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
    v.caller_cert = req->caller_cert;
    v.caller_cert_len = req->caller_cert_len;
    v.has_cluster_id = req->has_cluster_id; /* the caller's pin, if any */
    memcpy(v.cluster_id, req->cluster_id, RPC_ID_LEN);
    v.body = req->body;
    v.body_len = req->body_len;
    rv = envelope_frame_size(&v, ch->lim.frame_max, &need, NULL);
    if (rv != 0) {
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
    p->frame_len = envelope_pack(&v, ch->lim.frame_max, p->frame, need);
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

void rpc_channel_set_tls(struct rpc_channel *ch, struct tls_slot *slot)
{
    ch->tls = slot;
}

const char *rpc_channel_last_error(const struct rpc_channel *ch)
{
    return ch->last_error;
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
