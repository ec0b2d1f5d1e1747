/* rpc/rpc_server.c: the server side of conn.h over the shared connection
 * (conn_int.h).
 *
 * The server accepts connections up to conns_max (one over gets an error
 * frame and is closed), turns each valid request into a struct call (an
 * rpc_call with what only the layer sees) and hands it to the serve
 * callback. The layer itself answers what the handler must not see: a
 * server closing, another cluster's pin, calls over calls_max, and the
 * deadline passing before the handler replied. The deadlines are one queue
 * per server (deadlines.h) under one timer armed for the earliest: a
 * timer handle per call cost an init, start, stop and close (with a close
 * callback through the loop) on every claim.
 * A sweep timer closes connections that are idle, or whose peer stopped
 * reading, for idle_ms, and those that started a frame and did not finish
 * it within frame_ms. The memory the connections hold (read buffers and
 * queued answers, conn_account) is one account per server: past mem_max a
 * zero-delay timer closes the connections holding the most until it is
 * under again (from a timer, because the account grows inside reads and
 * sends, where a connection must not be closed).
 *
 * Lifetimes: an rpc_call is freed by rpc_call_reply (taken off the
 * deadline queue there, if the layer had not answered it yet; kept as a
 * spare for the next call, poisoned under ASan) and holds a
 * reference on its conn (refs), so a conn outlives its calls; the deadline
 * timer stays open while a call is in flight, also on a closing server,
 * and is closed with the last one; a server is freed when its listener,
 * its timers and every conn have closed and every call was replied. */
#include "common/assert.h"
#include "common/ratelimit.h"
#include "common/spare.h"
#include "rpc/conn_int.h"
#include "rpc/deadlines.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rpc_server
{
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t idle_timer; /* the sweep: idle_ms and frame_ms */
    uv_timer_t mem_timer;  /* over mem_max: close the largest */
    /* The calls' deadlines: dl_timer is armed for dl_armed_at, at or
     * before the earliest queued deadline (a call answered in time leaves
     * it early: it then fires for nothing and re-arms). Open from the
     * start until the server is closing with no call left (dl_open). */
    uv_timer_t dl_timer;
    struct dl_heap dl;
    uint64_t dl_armed_at;
    bool dl_open;
    /* Freed calls kept for the next ones (common/spare.h), at most
     * SPARE_MAX, poisoned under ASan: a use after rpc_call_reply is still
     * reported. calloc + free cost ~390 instructions per call at 256 in
     * flight (bench/cpu/run). Freed with the server. */
    struct spare spare;
    struct conn_mem mem;
    struct rpc_limits lim;
    rpc_serve_fn serve;
    void *arg;
    void (*log)(void *arg, const char *level, const char *msg);
    void (*answered)(void *arg,
                     const struct rpc_call *call,
                     enum rpc_status status);
    struct tls_slot *tls; /* borrowed; NULL or an empty slot: plaintext */
    unsigned handshake_ms;
    bool (*peer_member)(void *arg, X509 *cert, STACK_OF(X509) * chain);
    struct rpc_ids ids;
    struct conn *conns; /* open ones */
    unsigned n_conns;   /* allocated (open or closing) */
    unsigned n_calls;   /* not yet replied by the handler */
    unsigned handles;   /* listener, sweep and memory timers while open */
    struct rpc_server_stats st;
    /* Refused handshakes are what anyone can cause: logged under a
     * budget (counted in st.tls_refused all the same). */
    struct ratelimit refusal_log;
    bool closing;
    void (*close_cb)(void *arg);
    void *close_arg;
};

/* Spare calls a server keeps at most: the calls of a busy node's
 * connections (~200 bytes each). */
#define SPARE_MAX 4096

/* An rpc_call with what only the layer sees. */
struct call
{
    struct rpc_call pub;
    struct rpc_server *srv;
    struct conn *c; /* NULL: a local call (rpc_server_call_local) */
    rpc_local_fn local_cb;
    void *local_arg;
    struct dl_node dl; /* queued while it has a deadline and no answer */
    bool answered;     /* by the handler or the layer */
    bool sent;         /* rpc_call_mark_sent */
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

    envelope_view_clear(&v);
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

static void on_server_handle_closed(uv_handle_t *h);

static void server_maybe_done(struct rpc_server *s)
{
    void (*cb)(void *arg);
    void *arg;

    if (!s->closing || s->n_conns > 0 || s->n_calls > 0) {
        return;
    }
    if (s->dl_open) {
        /* The last call is gone, and a closing server takes no new one:
         * no deadline can come any more. */
        ONCE_ASSERT(dl_peek(&s->dl) == NULL, "no deadline without a call");
        s->dl_open = false;
        uv_close((uv_handle_t *)&s->dl_timer, on_server_handle_closed);
        return; /* freed from its close callback */
    }
    if (s->handles > 0) {
        return;
    }
    dl_free(&s->dl);
    spare_drain(&s->spare);
    cb = s->close_cb;
    arg = s->close_arg;
    free(s);
    if (cb != NULL) {
        cb(arg);
    }
}

static void server_conn_freed(void *owner)
{
    struct rpc_server *s = owner;

    ONCE_ASSERT(s->n_conns > 0, "n_conns counts the conns not yet freed");
    s->n_conns--;
    server_maybe_done(s);
}

static void server_conn_closing(struct conn *c)
{
    struct rpc_server *s = c->srv;

    ONCE_ASSERT(s->st.conns_open > 0 && (c->prev != NULL || s->conns == c),
                "a closing conn is on the server's list");
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
static void server_bad_frame(struct conn *c, const char *errmsg)
{
    c->srv->st.frames_malformed++;
    srv_logf(c->srv, "warn", "closing a client connection: %s", errmsg);
    send_error(c, 0, RPC_METHOD_UNSPECIFIED, RPC_STATUS_INVALID_ARGUMENT,
               RPC_APPLIED_FALSE, errmsg);
    (void)uv_read_stop((uv_stream_t *)&c->tcp);
    c->close_after_write = true;
    if (c->out_bytes == 0) {
        conn_close(c);
    }
}

/* A zeroed call: a spare, or a new one. NULL: out of memory. */
static struct call *call_new(struct rpc_server *s)
{
    return spare_get(&s->spare);
}

/* Give @k back: a spare, or freed past SPARE_MAX. */
static void call_recycle(struct rpc_server *s, struct call *k)
{
    spare_put(&s->spare, k);
}

/* Free an answered call and what it kept alive. The conn (and with its
 * last conn a closing server) may be freed here: nothing of either is
 * touched after. */
static void call_free(struct call *k)
{
    struct conn *c = k->c;
    struct rpc_server *s = k->srv;

    ONCE_ASSERT(s->n_calls > 0 && (c == NULL || (c->refs > 0 && c->calls > 0)),
                "a call counts in its server and holds its conn");
    if (c == NULL) {
        X509_free(k->pub.peer_cert); /* a local call's own reference */
    }
    call_recycle(s, k);
    if (c == NULL) {
        s->n_calls--;
        server_maybe_done(s);
        return;
    }
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

static void call_answered(struct call *k)
{
    /* Idle time counts from the last frame received or answer given. */
    ONCE_ASSERT(!k->answered && k->srv->st.calls_in_flight > 0,
                "a call is answered once");
    if (k->c != NULL) {
        k->c->last_active_ms = uv_now(k->c->tcp.loop);
    }
    k->answered = true;
    k->srv->st.calls_in_flight--;
}

/* A local call's answer goes to its callback instead of a connection. */
static void local_answer(struct call *k, const struct rpc_reply *r)
{
    k->local_cb(k->local_arg, &k->pub, r);
}

/* A call whose deadline passed (already off the queue): answered
 * DEADLINE_EXCEEDED by the layer; the handler's reply later only frees it. */
static void call_expire(struct call *k)
{
    ONCE_ASSERT(!k->answered, "an answered call is off the deadline queue");
    call_answered(k);
    k->srv->st.calls_expired++;
    if (k->srv->answered != NULL) {
        k->srv->answered(k->srv->arg, &k->pub, RPC_STATUS_DEADLINE_EXCEEDED);
    }
    if (k->c == NULL) {
        struct rpc_reply r = {
            .status = RPC_STATUS_DEADLINE_EXCEEDED,
            .applied = k->sent ? RPC_APPLIED_UNKNOWN : RPC_APPLIED_FALSE,
            .error = k->sent ? "deadline exceeded; the outcome is unknown"
                             : "deadline exceeded before the call was proposed",
        };
        local_answer(k, &r);
    } else if (!k->c->closing) {
        send_error(k->c, k->pub.call_id, k->pub.method,
                   RPC_STATUS_DEADLINE_EXCEEDED,
                   k->sent ? RPC_APPLIED_UNKNOWN : RPC_APPLIED_FALSE,
                   k->sent ? "deadline exceeded; the outcome is unknown"
                           : "deadline exceeded before the call was proposed");
    }
}

static void on_deadlines(uv_timer_t *t);

/* The call a deadline node is embedded in. */
static struct call *call_of(struct dl_node *x)
{
    char *p = (char *)x - offsetof(struct call, dl);

    return (struct call *)(void *)p;
}

/* Arm the deadline timer for the earliest deadline, unless it is armed
 * for that or earlier already. It is not stopped when the queue empties or
 * its earliest call is answered: in a steady flow of calls the next
 * deadline is later than the armed one, so a call costs no libuv timer
 * operation at all, only a spurious wake-up per deadline's length. */
static void dl_arm(struct rpc_server *s)
{
    const struct dl_node *x = dl_peek(&s->dl);
    uint64_t now;

    if (x == NULL || !s->dl_open) {
        return;
    }
    if (uv_is_active((uv_handle_t *)&s->dl_timer) && s->dl_armed_at <= x->at) {
        return;
    }
    now = uv_now(s->loop);
    s->dl_armed_at = x->at;
    (void)uv_timer_start(&s->dl_timer, on_deadlines,
                         x->at > now ? x->at - now : 0, 0);
}

/* Every call whose deadline is at or before the loop's time, earliest
 * first (in arrival order for equal deadlines), as per-call timers did. */
static void on_deadlines(uv_timer_t *t)
{
    struct rpc_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    struct dl_node *x;

    while ((x = dl_pop_due(&s->dl, now)) != NULL) {
        call_expire(call_of(x));
    }
    dl_arm(s);
}

/* Queue @k's deadline, received_mono_ms + deadline_ms (the time a timer
 * started at receipt would have fired): 0 or -ENOMEM. */
static int call_track(struct rpc_server *s, struct call *k)
{
    uint64_t at = k->pub.received_mono_ms + k->pub.deadline_ms;
    int rv;

    dl_node_init(&k->dl);
    if (k->pub.deadline_ms == 0) {
        return 0;
    }
    if (at < k->pub.received_mono_ms) {
        at = UINT64_MAX; /* UNTESTED: envelope_check bounds deadline_ms */
    }
    ONCE_ASSERT(s->dl_open, "calls are taken only while the timer is open");
    rv = dl_push(&s->dl, &k->dl, at);
    if (rv == 0) {
        dl_arm(s);
    }
    return rv;
}

static void server_request(struct conn *c, struct envelope_view *v)
{
    struct rpc_server *s = c->srv;
    struct call *k;

    if (v->direction != RPC_REQUEST) {
        server_bad_frame(c, "a response sent to a server");
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
    k = call_new(s);
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
    k->pub.received_ns = c->frame_ns; /* read with its frame (conn_parse) */
    k->pub.forwarded = v->forwarded;
    k->pub.has_cluster_id = v->has_cluster_id;
    memcpy(k->pub.cluster_id, v->cluster_id, RPC_ID_LEN);
    k->pub.peer_cert = c->peer_cert; /* the call holds a ref on c */
    k->pub.peer_member = c->peer_member;
    k->srv = s;
    k->c = c;
    if (k->pub.deadline_ms == 0) {
        k->pub.deadline_ms = s->lim.deadline_ms; /* may stay 0: none */
    }
    if (call_track(s, k) != 0) { /* UNTESTED: malloc */
        call_recycle(s, k);
        send_error(c, v->call_id, v->method, RPC_STATUS_RESOURCE_EXHAUSTED,
                   RPC_APPLIED_FALSE, "out of memory");
        return;
    }
    c->refs++;
    c->calls++;
    s->n_calls++;
    s->st.calls_in_flight++;
    s->st.calls_served++;
    s->serve(s->arg, &k->pub, v);
}

static void on_mem_timer(uv_timer_t *t)
{
    struct rpc_server *s = t->data;

    while (s->mem.max > 0 && s->mem.used > s->mem.max) {
        struct conn *big = NULL;

        for (struct conn *c = s->conns; c != NULL; c = c->next) {
            if (big == NULL || c->mem_held > big->mem_held) {
                big = c;
            }
        }
        if (big == NULL || big->mem_held == 0) {
            break; /* UNTESTED: what is left is not the connections' */
        }
        s->st.conns_over_memory++;
        srv_logf(s, "warn",
                 "closing the client connection holding the most memory "
                 "(%zu bytes of read buffer and queued answers): the "
                 "connections hold %zu bytes, over the limit of %zu",
                 big->mem_held, s->mem.used, s->mem.max);
        conn_close(big); /* unlinks it and takes its bytes off */
    }
}

/* The account went over mem_max: close the largest holders from the
 * memory timer, on the next loop iteration. */
static void server_over_memory(struct conn *c)
{
    struct rpc_server *s = c->srv;

    if (!s->closing && !uv_is_active((uv_handle_t *)&s->mem_timer)) {
        (void)uv_timer_start(&s->mem_timer, on_mem_timer, 0, 0);
    }
}

/* The peer's address for log lines. */
static const char *peer_name(struct conn *c, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;

    snprintf(buf, cap, "?");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0 &&
        ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        char ip[INET_ADDRSTRLEN];

        uv_ip4_name(in, ip, sizeof ip);
        snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(in->sin_port));
    }
    return buf;
}

/* A verified handshake: ask once whether this peer is a member. */
static void server_tls_ready(struct conn *c)
{
    struct rpc_server *s = c->srv;

    if (s->peer_member != NULL && c->peer_cert != NULL) {
        c->peer_member = s->peer_member(s->arg, c->peer_cert,
                                        SSL_get_peer_cert_chain(c->tls.ssl));
    }
}

static void server_tls_failed(struct conn *c, int rv, const char *errmsg)
{
    char peer[64];

    uint64_t dropped;

    (void)rv;
    c->srv->st.tls_refused++;
    if (!ratelimit_allow(&c->srv->refusal_log, uv_now(c->srv->loop),
                         &dropped)) {
        return;
    }
    srv_logf(c->srv, "warn", "TLS refused for %s: %s%s",
             peer_name(c, peer, sizeof peer), errmsg,
             dropped > 0 ? RATELIMIT_DROPPED_NOTE "once_rpc_tls_refused_total)"
                         : "");
}

static const struct conn_side server_side = {
    .frame = server_request,
    .bad_frame = server_bad_frame,
    .closing = server_conn_closing,
    .freed = server_conn_freed,
    .pause_reads = true,
    .ready = server_tls_ready,
    .tls_failed = server_tls_failed,
    .over_memory = server_over_memory,
};

void rpc_call_mark_sent(struct rpc_call *call)
{
    ((struct call *)call)->sent = true;
}

int rpc_server_call_local(struct rpc_server *s,
                          struct envelope_view *req,
                          X509 *peer,
                          rpc_local_fn cb,
                          void *arg)
{
    struct call *k;

    ONCE_ASSERT(cb != NULL, "a local call is answered through its callback");
    if (s->closing) {
        return RPC_E_CLOSED;
    }
    k = call_new(s);
    if (k == NULL) {
        return RPC_E_NOMEM;
    }
    k->pub.method = req->method;
    k->pub.group_id = req->group_id;
    k->pub.deadline_ms =
        req->deadline_ms != 0 ? req->deadline_ms : s->lim.deadline_ms;
    k->pub.received_mono_ms = uv_now(s->loop);
    k->pub.received_ns = uv_hrtime();
    /* The caller's pin: the service refuses a call for another cluster
     * before proposing it (service.c), as for a connection's call. */
    k->pub.has_cluster_id = req->has_cluster_id;
    memcpy(k->pub.cluster_id, req->cluster_id, RPC_ID_LEN);
    k->srv = s;
    k->local_cb = cb;
    k->local_arg = arg;
    if (call_track(s, k) != 0) { /* UNTESTED: malloc */
        call_recycle(s, k);
        return RPC_E_NOMEM;
    }
    if (peer != NULL && X509_up_ref(peer) == 1) {
        k->pub.peer_cert = peer;
    }
    s->n_calls++;
    s->st.calls_in_flight++;
    s->st.calls_served++;
    s->serve(s->arg, &k->pub, req);
    return 0;
}

void rpc_call_reply(struct rpc_call *call, const struct rpc_reply *r)
{
    struct call *k = (struct call *)call;
    struct conn *c = k->c;
    struct rpc_server *s = k->srv;

    if (!k->answered) {
        call_answered(k);
        if (s->answered != NULL) {
            s->answered(s->arg, &k->pub, r->status);
        }
        if (c == NULL) {
            local_answer(k, r);
        } else if (!c->closing) {
            struct envelope_view v;
            char errmsg[ERR_MSG_SIZE];
            int rv;

            envelope_view_clear(&v);
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
    dl_remove(&s->dl, &k->dl); /* if the layer has not answered it */
    call_free(k);
}

/* A TLS connection: over conns_max it is closed before the handshake (no
 * frame can be sent before one, and the client's calls are then "not
 * sent" either way); else the handshake starts, and frames are read once it
 * completed. */
static void server_accept_tls(struct rpc_server *s, struct conn *c)
{
    char errmsg[ERR_MSG_SIZE];

    if (s->st.conns_open > s->lim.conns_max) {
        s->st.conns_refused++;
        conn_close(c);
        return;
    }
    if (conn_tls_start(
            c, s->tls->ctx, true, NULL,
            s->handshake_ms != 0 ? s->handshake_ms : TLS_HANDSHAKE_MS_DEFAULT,
            errmsg) != 0) {
        srv_logf(s, "error", "TLS: %s", errmsg); /* UNTESTED: malloc */
        conn_close(c);
        return;
    }
    if (conn_read_start(c) != 0) {
        conn_close(c); /* UNTESTED */
    }
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct rpc_server *s = listener->data;
    struct conn *c;

    if (status != 0 || s->closing) {
        return; /* UNTESTED: accept errors (EMFILE) are retried by libuv */
    }
    c = malloc(sizeof *c);
    if (c == NULL || conn_init(c, s->loop, &s->lim, &server_side, s) != 0) {
        free(c); /* UNTESTED: malloc */
        return;
    }
    s->n_conns++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_discard(c); /* UNTESTED: accept after a successful poll */
        return;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    conn_cork_init(c, s->loop);
    c->mem = &s->mem;
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    s->st.conns_open++;
    s->st.conns_accepted++;
    if (s->tls != NULL && s->tls->ctx != NULL) {
        server_accept_tls(s, c);
        return;
    }
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
    if (conn_read_start(c) != 0) {
        conn_close(c); /* UNTESTED */
    }
}

/* A frame started and not finished in frame_ms: a slow or stuck sender
 * would otherwise hold its buffer (up to frame_max) for as long as it
 * likes. Not while reads are paused: then the wait is this node's. */
static bool frame_overdue(const struct rpc_server *s,
                          const struct conn *c,
                          uint64_t now)
{
    return s->lim.frame_ms > 0 && c->partial_since_ms != 0 && !c->paused &&
           !c->close_after_write &&
           now - c->partial_since_ms >= s->lim.frame_ms;
}

static void on_idle_timer(uv_timer_t *t)
{
    struct rpc_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    struct conn *c = s->conns;

    while (c != NULL) {
        struct conn *next = c->next;

        if (frame_overdue(s, c, now)) {
            s->st.frames_timed_out++;
            srv_logf(s, "warn",
                     "closing a client connection: a frame started %llu ms "
                     "ago is not complete (%zu of its bytes received; limit "
                     "%u ms)",
                     (unsigned long long)(now - c->partial_since_ms),
                     c->rlen - c->rpos, s->lim.frame_ms);
            conn_close(c);
        } else if (s->lim.idle_ms == 0) {
            /* no idle limit */
        } else if (c->calls == 0 && c->out_bytes == 0 &&
                   !c->close_after_write &&
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

    ONCE_ASSERT(s->handles > 0, "one close callback per open handle");
    s->handles--;
    server_maybe_done(s);
}

/* How often the sweep runs: a quarter of the shorter limit, at most 1 s. */
static uint64_t sweep_period(const struct rpc_limits *l)
{
    uint64_t every = 1000;

    if (l->idle_ms > 0 && l->idle_ms / 4 < every) {
        every = l->idle_ms / 4;
    }
    if (l->frame_ms > 0 && l->frame_ms / 4 < every) {
        every = l->frame_ms / 4;
    }
    return every > 0 ? every : 1;
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
        err_printf(errmsg, "listen address %s: not IPv4 IP:PORT",
                   cfg->addr != NULL ? cfg->addr : "(none)");
        return RPC_E_ADDR;
    }
    if (cfg->limits.frame_max == 0 || cfg->limits.frame_max > FRAME_MAX_CEIL ||
        cfg->limits.calls_max == 0 || cfg->limits.conns_max == 0 ||
        cfg->limits.out_max == 0) {
        err_printf(errmsg,
                   "limits: frame_max 1..%u, calls_max, conns_max and "
                   "out_max > 0",
                   FRAME_MAX_CEIL);
        return RPC_E_LIMIT;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        err_printf(errmsg, "out of memory"); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    s->loop = loop;
    spare_init(&s->spare, sizeof(struct call), SPARE_MAX);
    dl_init(&s->dl);
    s->refusal_log.burst = RATELIMIT_REFUSALS_BURST;
    s->refusal_log.window_ms = RATELIMIT_REFUSALS_WINDOW_MS;
    s->lim = cfg->limits;
    s->serve = cfg->serve;
    s->arg = cfg->arg;
    s->answered = cfg->answered;
    s->log = cfg->log;
    s->tls = cfg->tls;
    s->handshake_ms = cfg->handshake_ms;
    s->peer_member = cfg->peer_member;
    s->ids = cfg->ids;
    (void)uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    rv = uv_tcp_bind(&s->listener, (const struct sockaddr *)&sa, 0);
    if (rv == 0) {
        rv = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    }
    if (rv != 0) {
        err_printf(errmsg, "listen on %s: %s", cfg->addr, uv_strerror(rv));
        /* Freed from the close callback: the server is closing with one
         * handle and nothing else. */
        s->closing = true;
        s->handles = 1;
        uv_close((uv_handle_t *)&s->listener, on_server_handle_closed);
        return RPC_E_LISTEN;
    }
    s->handles = 1;
    s->mem.max = s->lim.mem_max;
    (void)uv_timer_init(loop, &s->mem_timer);
    s->mem_timer.data = s;
    /* Started by server_over_memory. */
    s->handles++;
    (void)uv_timer_init(loop, &s->dl_timer);
    s->dl_timer.data = s;
    s->dl_open = true;
    s->handles++; /* closed by server_maybe_done, with the last call */
    if (s->lim.idle_ms > 0 || s->lim.frame_ms > 0) {
        uint64_t every = sweep_period(&s->lim);

        (void)uv_timer_init(loop, &s->idle_timer);
        s->idle_timer.data = s;
        (void)uv_timer_start(&s->idle_timer, on_idle_timer, every, every);
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
    st->mem_used = s->mem.used;
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
    uv_close((uv_handle_t *)&s->mem_timer, on_server_handle_closed);
    if (s->lim.idle_ms > 0 || s->lim.frame_ms > 0) {
        uv_close((uv_handle_t *)&s->idle_timer, on_server_handle_closed);
    }
    while (s->conns != NULL) {
        conn_close(s->conns); /* unlinks it */
    }
}
