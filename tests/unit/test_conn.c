/* test_conn: framed RPC connections (src/rpc/conn.c) over real loopback
 * sockets on 127.0.0.1, ports 7601..7699.
 *
 * Each test owns one uv loop and its own port(s) (Check forks every test).
 * Every wait goes through RUN_UNTIL, which arms a watchdog timer: a wait
 * that never ends fails its test instead of hanging the suite. The peer of
 * conn.c is either conn.c itself (an rpc_server and an rpc_channel in the
 * same loop) or a raw uv_tcp client or listener written here, which sees
 * and sends the exact bytes (error frames, second answers, garbage). The
 * teardown closes everything and requires uv_loop_close to succeed, so a
 * handle left open by conn.c fails the test; ASan (detect_leaks=1) catches
 * leaks, double frees and use after free of calls and channels. */
#include <arpa/inet.h>
#include <check.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "rpc/conn.h"
#include "rpc/frame.h"

Suite *conn_suite(void);

#define PORT_NONE  7699 /* nothing ever listens here */
#define WAIT_MS    3000 /* default bound of one RUN_UNTIL */
#define HELD_MAX   2048
#define SEEN_MAX   256
#define RAW_MAX    8
#define RAW_IN_MAX (4u << 20)
#define ANS_MAX    2048

/* ------------------------------------------------------------------------
 * Fixture
 * ---------------------------------------------------------------------- */

/* One call the handler kept to answer later. */
struct held
{
    struct rpc_call *call;
    uint8_t *body;
    size_t len;
};

/* What the handler saw of one call. */
struct seen
{
    uint64_t call_id;
    enum rpc_method method;
    uint32_t group_id;
    uint64_t deadline_ms;
    uint64_t received_mono_ms;
    uint64_t now;
    bool forwarded;
    bool has_cluster_id;
    uint8_t cluster_id[RPC_ID_LEN];
    size_t body_len;
};

/* A raw TCP peer (client, or a connection accepted by the raw listener). */
struct raw
{
    uv_tcp_t tcp;
    uv_connect_t creq;
    bool used;
    bool connect_done;
    bool connected;
    bool eof;
    bool closing;
    bool closed;
    int connect_status;
    int read_err; /* 0 for a clean EOF */
    int write_err;
    uint64_t connected_at;
    uint64_t eof_at;
    uint64_t data_at; /* uv_now() of the last bytes received */
    uint8_t *in;
    size_t in_len;
    size_t in_cap;
    size_t pos; /* bytes already taken as frames */
    struct envelope_view v;
    int mode; /* accepted connections: what the raw listener does */
    bool listener_side;
    /* Take every OK answer as it arrives (for long streams). */
    bool count_only;
    unsigned nframes;
    uint64_t last_call_id;
};

enum lis_mode {
    LIS_CLOSE,    /* close once a whole request frame arrived */
    LIS_SILENT,   /* read and never answer */
    LIS_ECHO,     /* answer OK with the request's body */
    LIS_GARBAGE,  /* answer with a frame that does not decode */
    LIS_ERRFRAME, /* answer with a connection-level error frame */
    LIS_BIG,      /* answer OK with a 4096-byte body */
    LIS_REQUEST,  /* "answer" with a request-direction frame */
};

struct fx
{
    uv_loop_t loop;
    uv_timer_t watchdog;
    bool timed_out;
    struct rpc_server *srv;
    struct rpc_channel *ch;
    struct rpc_channel *ch_closing; /* being closed (for callbacks) */
    bool srv_closed;
    unsigned srv_close_calls;
    struct rpc_ids ids;
    char srv_addr[32];
    char ch_addr[32];
    /* Handler. */
    unsigned nserved;
    struct seen seen[SEEN_MAX];
    struct held held[HELD_MAX];
    unsigned nheld;   /* held so far (released ones included) */
    size_t big_reply; /* body length of the "big" reply */
    unsigned nlog;
    char last_log[256];
    /* Answers (registered so the teardown frees their bodies). */
    int seq;
    struct ans *answers[ANS_MAX];
    unsigned nanswers;
    /* Raw peers and the raw listener. */
    struct raw raws[RAW_MAX];
    uv_tcp_t lis;
    bool lis_open;
    enum lis_mode lis_mode;
    unsigned accepts;
    unsigned lis_frames;
    uint64_t lis_last_call_id;
    uint64_t lis_last_deadline;
};

static struct fx F;

/* One answer as the channel delivered it. */
struct ans
{
    int n; /* times the callback ran: must end at exactly 1 */
    int rv;
    bool sent;
    int seq; /* order among all answers of the test */
    uint64_t at;
    uint64_t call_id;
    enum rpc_method method;
    enum rpc_direction direction;
    enum rpc_status status;
    enum rpc_applied applied;
    char error[RPC_ERROR_MAX + 1];
    size_t error_len;
    char hint[RPC_ADDR_MAX + 1];
    bool has_cluster_id;
    uint8_t cluster_id[RPC_ID_LEN];
    uint64_t node_id;
    bool has_boot_id;
    uint8_t boot_id[RPC_ID_LEN];
    uint32_t group_id;
    uint8_t *body;
    size_t body_len;
    /* Run from inside the callback (after recording). */
    void (*then)(struct ans *a);
    int chain_left;
};

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    F.timed_out = true;
}

/* Run the loop until @cond holds; fail after @ms. */
#define RUN_UNTIL_MS(cond, ms)                             \
    do {                                                   \
        F.timed_out = false;                               \
        uv_update_time(&F.loop);                           \
        uv_timer_start(&F.watchdog, watchdog_cb, (ms), 0); \
        while (!(cond)) {                                  \
            ck_assert_msg(!F.timed_out,                    \
                          "timed out after %u ms waiting " \
                          "for: %s",                       \
                          (unsigned)(ms), #cond);          \
            uv_run(&F.loop, UV_RUN_ONCE);                  \
        }                                                  \
        uv_timer_stop(&F.watchdog);                        \
    } while (0)
#define RUN_UNTIL(cond) RUN_UNTIL_MS(cond, WAIT_MS)

static void flag_timer_cb(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

static void flag_close_cb(uv_handle_t *h)
{
    *(bool *)h->data = true;
}

/* Let the loop run for @ms (whatever happens meanwhile). */
static void run_for(unsigned ms)
{
    uv_timer_t t;
    bool fired = false;
    bool closed = false;

    ck_assert_int_eq(uv_timer_init(&F.loop, &t), 0);
    t.data = &fired;
    ck_assert_int_eq(uv_timer_start(&t, flag_timer_cb, ms, 0), 0);
    RUN_UNTIL_MS(fired, ms + WAIT_MS);
    t.data = &closed;
    uv_close((uv_handle_t *)&t, flag_close_cb);
    RUN_UNTIL(closed);
}

static uint64_t now_ms(void)
{
    uv_update_time(&F.loop);
    return uv_now(&F.loop);
}

static void log_cb(void *arg, const char *level, const char *msg)
{
    ck_assert_ptr_eq(arg, &F);
    ck_assert_msg(strcmp(level, "info") == 0 || strcmp(level, "warn") == 0 ||
                      strcmp(level, "error") == 0,
                  "bad log level %s", level);
    ck_assert_ptr_nonnull(msg);
    F.nlog++;
    snprintf(F.last_log, sizeof F.last_log, "%s", msg);
}

static void fx_init(void)
{
    memset(&F, 0, sizeof F);
    ck_assert_int_eq(uv_loop_init(&F.loop), 0);
    ck_assert_int_eq(uv_timer_init(&F.loop, &F.watchdog), 0);
    F.ids.has_cluster_id = false;
    F.ids.node_id = 3;
    for (unsigned i = 0; i < RPC_ID_LEN; i++) {
        F.ids.boot_id[i] = (uint8_t)(0xb0 + i);
    }
    F.big_reply = 8000;
}

static void srv_close_cb(void *arg)
{
    ck_assert_ptr_eq(arg, &F);
    F.srv_closed = true;
    F.srv_close_calls++;
}

static unsigned open_handles;
static void count_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h != (uv_handle_t *)&F.watchdog) {
        open_handles++;
    }
}

static unsigned handles_left(void)
{
    open_handles = 0;
    uv_walk(&F.loop, count_handle, NULL);
    return open_handles;
}

static void release_all(void);
static void raw_close(struct raw *r);

/* Close everything, check nothing was left open, free the loop. */
static void fx_close(void)
{
    if (F.ch != NULL) {
        rpc_channel_close(F.ch);
        F.ch = NULL;
    }
    /* The server's close waits for the handler's replies. */
    release_all();
    if (F.srv != NULL) {
        rpc_server_close(F.srv, srv_close_cb, &F);
        F.srv = NULL;
        RUN_UNTIL(F.srv_closed);
    }
    for (unsigned i = 0; i < RAW_MAX; i++) {
        if (F.raws[i].used && !F.raws[i].closing) {
            raw_close(&F.raws[i]);
        }
    }
    if (F.lis_open) {
        uv_close((uv_handle_t *)&F.lis, NULL);
        F.lis_open = false;
    }
    RUN_UNTIL(handles_left() == 0);
    ck_assert_uint_eq(F.srv_close_calls, F.srv_closed ? 1 : 0);
    uv_close((uv_handle_t *)&F.watchdog, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&F.loop), 0);
    for (unsigned i = 0; i < F.nanswers; i++) {
        free(F.answers[i]->body);
        F.answers[i]->body = NULL;
    }
}

/* ------------------------------------------------------------------------
 * Server side: a handler that echoes, holds, or answers as the body says
 * ---------------------------------------------------------------------- */

static bool body_starts(const struct envelope_view *v, const char *p)
{
    size_t n = strlen(p);
    return v->body_len >= n && memcmp(v->body, p, n) == 0;
}

static void reply_ok(struct rpc_call *call, const void *body, size_t len)
{
    struct rpc_reply r = {
        .status = RPC_STATUS_OK,
        .applied = RPC_APPLIED_UNSPECIFIED,
        .body = body,
        .body_len = len,
    };
    rpc_call_reply(call, &r);
}

static void reply_err(struct rpc_call *call,
                      enum rpc_status st,
                      enum rpc_applied ap,
                      const char *error,
                      const char *hint)
{
    struct rpc_reply r = {
        .status = st, .applied = ap, .error = error, .leader_hint = hint};
    rpc_call_reply(call, &r);
}

/* The handler: what it does depends on how the request body starts.
 *   "hold"     keep the call; the test answers it later (release)
 *   "mark"     rpc_call_mark_sent, then hold
 *   "closesrv" rpc_server_close from inside the handler, then answer
 *   "empty"    OK with an empty body
 *   "big"      OK with a body of F.big_reply bytes
 *   "unavail"  UNAVAILABLE, applied FALSE, an error and a leader hint
 *   "badrule"  OK with applied FALSE (breaks an envelope rule)
 *   "longerr"  an error text over RPC_ERROR_MAX
 *   "longhint" a leader hint over RPC_ADDR_MAX
 *   otherwise  OK echoing the body */
static void serve_cb(void *arg,
                     struct rpc_call *call,
                     struct envelope_view *req)
{
    bool mark;

    ck_assert_ptr_eq(arg, &F);
    ck_assert_ptr_nonnull(call);
    ck_assert_ptr_nonnull(req);
    if (F.nserved < SEEN_MAX) {
        struct seen *s = &F.seen[F.nserved];
        s->call_id = call->call_id;
        s->method = call->method;
        s->group_id = call->group_id;
        s->deadline_ms = call->deadline_ms;
        s->received_mono_ms = call->received_mono_ms;
        s->now = uv_now(&F.loop);
        s->forwarded = call->forwarded;
        s->has_cluster_id = call->has_cluster_id;
        memcpy(s->cluster_id, call->cluster_id, RPC_ID_LEN);
        s->body_len = req->body_len;
    }
    F.nserved++;
    /* The call's public fields match the request's. */
    ck_assert_uint_eq(call->call_id, req->call_id);
    ck_assert_int_eq(call->method, req->method);
    ck_assert_int_eq(req->direction, RPC_REQUEST);

    mark = body_starts(req, "mark");
    if (mark) {
        rpc_call_mark_sent(call);
    }
    if (mark || body_starts(req, "hold")) {
        struct held *h;
        ck_assert_uint_lt(F.nheld, HELD_MAX);
        h = &F.held[F.nheld++];
        h->call = call;
        h->len = req->body_len;
        h->body = malloc(req->body_len + 1);
        ck_assert_ptr_nonnull(h->body);
        if (req->body_len > 0) {
            memcpy(h->body, req->body, req->body_len);
        }
        return;
    }
    if (body_starts(req, "closesrv")) {
        /* A handler that shuts the server down (an admin call), then
         * answers: the answer is dropped, the close completes. */
        rpc_server_close(F.srv, srv_close_cb, &F);
        F.srv = NULL;
        reply_ok(call, req->body, req->body_len);
    } else if (body_starts(req, "empty")) {
        reply_ok(call, NULL, 0);
    } else if (body_starts(req, "big")) {
        uint8_t *b = calloc(1, F.big_reply);
        ck_assert_ptr_nonnull(b);
        reply_ok(call, b, F.big_reply);
        free(b);
    } else if (body_starts(req, "unavail")) {
        reply_err(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                  "not the leader", "127.0.0.1:7001");
    } else if (body_starts(req, "badrule")) {
        /* Status OK with applied FALSE breaks an envelope rule. */
        struct rpc_reply r = {.status = RPC_STATUS_OK,
                              .applied = RPC_APPLIED_FALSE};
        rpc_call_reply(call, &r);
    } else if (body_starts(req, "longhint")) {
        char h[RPC_ADDR_MAX + 2];
        memset(h, '1', sizeof h - 1);
        h[sizeof h - 1] = '\0';
        reply_err(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE, "moved", h);
    } else if (body_starts(req, "longerr")) {
        char e[RPC_ERROR_MAX + 2];
        memset(e, 'e', sizeof e - 1);
        e[sizeof e - 1] = '\0';
        reply_err(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE, e,
                  NULL);
    } else {
        reply_ok(call, req->body, req->body_len);
    }
}

/* Answer the @i-th held call OK with its own body. */
static void release(unsigned i)
{
    struct held *h;

    ck_assert_uint_lt(i, F.nheld);
    h = &F.held[i];
    ck_assert_ptr_nonnull(h->call);
    reply_ok(h->call, h->body, h->len);
    free(h->body);
    h->call = NULL;
    h->body = NULL;
}

static void release_all(void)
{
    for (unsigned i = 0; i < F.nheld; i++) {
        if (F.held[i].call != NULL) {
            release(i);
        }
    }
}

static unsigned held_open(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < F.nheld; i++) {
        n += F.held[i].call != NULL;
    }
    return n;
}

static void srv_start_lim(unsigned port, const struct rpc_limits *lim)
{
    struct rpc_server_config cfg;
    char err[ERR_MSG_SIZE] = "";
    int rv;

    memset(&cfg, 0, sizeof cfg);
    snprintf(F.srv_addr, sizeof F.srv_addr, "127.0.0.1:%u", port);
    cfg.addr = F.srv_addr;
    if (lim != NULL) {
        cfg.limits = *lim;
    } else {
        rpc_limits_default(&cfg.limits);
    }
    cfg.serve = serve_cb;
    cfg.arg = &F;
    cfg.ids = F.ids;
    cfg.log = log_cb;
    F.srv_closed = false;
    rv = rpc_server_start(&F.srv, &F.loop, &cfg, err);
    ck_assert_msg(rv == 0, "rpc_server_start(%s): %d %s", F.srv_addr, rv, err);
    ck_assert_ptr_nonnull(F.srv);
}

static void srv_start(unsigned port)
{
    srv_start_lim(port, NULL);
}

static struct rpc_server_stats stats(void)
{
    struct rpc_server_stats s;

    memset(&s, 0xa5, sizeof s);
    rpc_server_stats(F.srv, &s);
    return s;
}

static uint64_t stat_conns_open(void)
{
    return stats().conns_open;
}

/* ------------------------------------------------------------------------
 * Client side: a channel and answers
 * ---------------------------------------------------------------------- */

static void ch_open_lim(unsigned port, const struct rpc_limits *lim)
{
    struct rpc_limits d;
    char err[ERR_MSG_SIZE] = "";
    int rv;

    if (lim == NULL) {
        rpc_limits_default(&d);
        lim = &d;
    }
    snprintf(F.ch_addr, sizeof F.ch_addr, "127.0.0.1:%u", port);
    rv = rpc_channel_open(&F.ch, &F.loop, F.ch_addr, lim, err);
    ck_assert_msg(rv == 0, "rpc_channel_open(%s): %d %s", F.ch_addr, rv, err);
    ck_assert_ptr_nonnull(F.ch);
    ck_assert_str_eq(rpc_channel_addr(F.ch), F.ch_addr);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
}

static void ch_open(unsigned port)
{
    ch_open_lim(port, NULL);
}

static void answer_cb(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct ans *a = arg;

    a->n++;
    if (a->n == 1) {
        ck_assert_uint_lt(F.nanswers, ANS_MAX);
        F.answers[F.nanswers++] = a;
    }
    a->rv = rv;
    a->sent = sent;
    a->seq = F.seq++;
    a->at = uv_now(&F.loop);
    free(a->body);
    a->body = NULL;
    a->body_len = 0;
    if (rv != 0) {
        ck_assert_msg(ans == NULL, "rv %d with an answer", rv);
    } else {
        ck_assert_ptr_nonnull(ans);
        a->call_id = ans->call_id;
        a->method = ans->method;
        a->direction = ans->direction;
        a->status = ans->status;
        a->applied = ans->applied;
        a->error_len = ans->error_len;
        ck_assert_uint_le(ans->error_len, RPC_ERROR_MAX);
        if (ans->error_len > 0) {
            memcpy(a->error, ans->error, ans->error_len);
        }
        a->error[ans->error_len] = '\0';
        ck_assert_uint_le(ans->leader_hint_len, RPC_ADDR_MAX);
        if (ans->leader_hint_len > 0) {
            memcpy(a->hint, ans->leader_hint, ans->leader_hint_len);
        }
        a->hint[ans->leader_hint_len] = '\0';
        a->has_cluster_id = ans->has_cluster_id;
        memcpy(a->cluster_id, ans->cluster_id, RPC_ID_LEN);
        a->node_id = ans->node_id;
        a->has_boot_id = ans->has_boot_id;
        memcpy(a->boot_id, ans->boot_id, RPC_ID_LEN);
        a->group_id = ans->group_id;
        a->body_len = ans->body_len;
        a->body = malloc(ans->body_len + 1);
        ck_assert_ptr_nonnull(a->body);
        if (ans->body_len > 0) {
            memcpy(a->body, ans->body, ans->body_len);
        }
        a->body[ans->body_len] = '\0';
    }
    if (a->then != NULL) {
        a->then(a);
    }
}

static int call_full(struct ans *a,
                     enum rpc_method m,
                     const void *body,
                     size_t len,
                     uint64_t deadline_ms,
                     uint64_t timeout_ms,
                     bool forwarded,
                     uint32_t group_id)
{
    struct envelope_view req;

    memset(&req, 0, sizeof req);
    req.method = m;
    req.direction = RPC_REQUEST;
    req.deadline_ms = deadline_ms;
    req.status = RPC_STATUS_OK;
    req.applied = RPC_APPLIED_UNSPECIFIED;
    req.body = body;
    req.body_len = len;
    req.forwarded = forwarded;
    req.group_id = group_id;
    return rpc_channel_call(F.ch, &req, timeout_ms, answer_cb, a);
}

/* A STATUS call pinned to cluster @pin (NULL: not pinned). */
static void call_pinned(struct ans *a, const char *body, const uint8_t *pin)
{
    struct envelope_view req;

    memset(&req, 0, sizeof req);
    req.method = RPC_METHOD_STATUS;
    req.direction = RPC_REQUEST;
    req.body = (const uint8_t *)body;
    req.body_len = strlen(body);
    if (pin != NULL) {
        req.has_cluster_id = true;
        memcpy(req.cluster_id, pin, RPC_ID_LEN);
    }
    ck_assert_int_eq(rpc_channel_call(F.ch, &req, 2000, answer_cb, a), 0);
    ck_assert_int_eq(a->n, 0);
}

/* A STATUS call with a text body; the callback never runs from inside. */
static void call_text(struct ans *a, const char *body, uint64_t timeout_ms)
{
    ck_assert_int_eq(call_full(a, RPC_METHOD_STATUS, body, strlen(body), 0,
                               timeout_ms, false, 0),
                     0);
    ck_assert_int_eq(a->n, 0);
}

static unsigned n_answered(const struct ans *a, unsigned n)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        k += (unsigned)a[i].n;
    }
    return k;
}

static void assert_ok(const struct ans *a, const char *body)
{
    ck_assert_int_eq(a->n, 1);
    ck_assert_msg(a->rv == 0, "rv %d (%s)", a->rv, rpc_conn_strerror(a->rv));
    ck_assert_int_eq(a->direction, RPC_RESPONSE);
    ck_assert_msg(a->status == RPC_STATUS_OK, "status %s: %s",
                  rpc_status_name(a->status), a->error);
    ck_assert_int_eq(a->applied, RPC_APPLIED_UNSPECIFIED);
    ck_assert_uint_eq(a->error_len, 0);
    ck_assert_uint_eq(a->body_len, strlen(body));
    ck_assert_str_eq((const char *)a->body, body);
}

static void assert_failed(const struct ans *a, int rv, bool sent)
{
    ck_assert_int_eq(a->n, 1);
    ck_assert_msg(a->rv == rv, "rv %d (%s), expected %d (%s)", a->rv,
                  rpc_conn_strerror(a->rv), rv, rpc_conn_strerror(rv));
    ck_assert_int_eq(a->sent, sent);
    ck_assert_ptr_null(a->body);
}

/* An answer made by the layer (or a replaced reply): exact status and
 * applied, some error text, no body. */
static void assert_status(const struct ans *a,
                          enum rpc_status st,
                          enum rpc_applied ap)
{
    ck_assert_int_eq(a->n, 1);
    ck_assert_msg(a->rv == 0, "rv %d (%s)", a->rv, rpc_conn_strerror(a->rv));
    ck_assert_int_eq(a->direction, RPC_RESPONSE);
    ck_assert_msg(a->status == st, "status %s, expected %s (%s)",
                  rpc_status_name(a->status), rpc_status_name(st), a->error);
    ck_assert_msg(a->applied == ap, "applied %s, expected %s",
                  rpc_applied_name(a->applied), rpc_applied_name(ap));
    ck_assert_uint_gt(a->error_len, 0);
    ck_assert_uint_eq(a->body_len, 0);
}

/* ------------------------------------------------------------------------
 * Raw peers
 * ---------------------------------------------------------------------- */

static struct raw *raw_new(void)
{
    for (unsigned i = 0; i < RAW_MAX; i++) {
        struct raw *r = &F.raws[i];
        if (!r->used) {
            memset(r, 0, sizeof *r);
            r->used = true;
            envelope_view_init(&r->v);
            return r;
        }
    }
    ck_abort_msg("out of raw peers");
    return NULL;
}

static void raw_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base != NULL ? suggested : 0;
}

static void lis_on_data(struct raw *r);
static void raw_count(struct raw *r);

static void raw_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct raw *r = s->data;

    if (n > 0 && r->pos > 0) {
        /* Taken frames are dropped (views hold their own copies). */
        memmove(r->in, r->in + r->pos, r->in_len - r->pos);
        r->in_len -= r->pos;
        r->pos = 0;
    }
    if (n > 0) {
        size_t need = r->in_len + (size_t)n;
        ck_assert_uint_le(need, RAW_IN_MAX);
        if (need > r->in_cap) {
            size_t cap = r->in_cap == 0 ? 4096 : r->in_cap;
            while (cap < need) {
                cap *= 2;
            }
            r->in = realloc(r->in, cap);
            ck_assert_ptr_nonnull(r->in);
            r->in_cap = cap;
        }
        memcpy(r->in + r->in_len, buf->base, (size_t)n);
        r->in_len = need;
        r->data_at = uv_now(&F.loop);
    } else if (n < 0) {
        r->eof = true;
        r->read_err = n == UV_EOF ? 0 : (int)n;
        r->eof_at = uv_now(&F.loop);
        uv_read_stop(s);
    }
    free(buf->base);
    if (n > 0 && r->listener_side) {
        lis_on_data(r);
    }
    if (n > 0 && r->count_only) {
        raw_count(r);
    }
}

static void raw_connect_cb(uv_connect_t *req, int status)
{
    struct raw *r = req->data;

    r->connect_done = true;
    r->connect_status = status;
    if (status == 0) {
        r->connected = true;
        r->connected_at = uv_now(&F.loop);
        ck_assert_int_eq(
            uv_read_start((uv_stream_t *)&r->tcp, raw_alloc_cb, raw_read_cb),
            0);
    }
}

static struct raw *raw_connect_async(unsigned port)
{
    struct raw *r = raw_new();
    struct sockaddr_in sa;

    ck_assert_int_eq(uv_ip4_addr("127.0.0.1", (int)port, &sa), 0);
    ck_assert_int_eq(uv_tcp_init(&F.loop, &r->tcp), 0);
    r->tcp.data = r;
    r->creq.data = r;
    ck_assert_int_eq(
        uv_tcp_connect(&r->creq, &r->tcp, (const struct sockaddr *)&sa,
                       raw_connect_cb),
        0);
    return r;
}

static struct raw *raw_connect(unsigned port)
{
    struct raw *r = raw_connect_async(port);

    RUN_UNTIL(r->connect_done);
    ck_assert_msg(r->connect_status == 0, "connect to %u: %s", port,
                  uv_strerror(r->connect_status));
    return r;
}

struct wreq
{
    uv_write_t req;
    struct raw *r;
    char data[];
};

static void raw_write_cb(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;

    if (status != 0) {
        w->r->write_err = status;
    }
    free(w);
}

static void raw_send(struct raw *r, const void *data, size_t len)
{
    struct wreq *w = malloc(sizeof *w + len);
    uv_buf_t b;
    int rv;

    ck_assert_ptr_nonnull(w);
    ck_assert(!r->closing);
    w->r = r;
    memcpy(w->data, data, len);
    b = uv_buf_init(w->data, (unsigned)len);
    rv = uv_write(&w->req, (uv_stream_t *)&r->tcp, &b, 1, raw_write_cb);
    if (rv != 0) {
        r->write_err = rv;
        free(w);
    }
}

static void raw_close_cb(uv_handle_t *h)
{
    struct raw *r = h->data;

    r->closed = true;
    free(r->in);
    r->in = NULL;
    envelope_view_close(&r->v);
    r->used = false;
}

static void raw_close(struct raw *r)
{
    if (!r->closing) {
        r->closing = true;
        uv_close((uv_handle_t *)&r->tcp, raw_close_cb);
    }
}

/* Whether a whole frame is buffered and not taken yet. */
static bool raw_has_frame(const struct raw *r)
{
    uint32_t len;
    size_t avail = r->in_len - r->pos;
    int rv = frame_decode_header(r->in + r->pos, avail, FRAME_MAX_CEIL, &len);

    if (rv == 1) {
        return false;
    }
    ck_assert_int_eq(rv, 0);
    return avail >= FRAME_HEADER_LEN + (size_t)len;
}

/* Take the next whole frame into r->v (it must decode). */
static void raw_take(struct raw *r)
{
    uint32_t len = 0;
    char err[ERR_MSG_SIZE] = "";
    int rv;

    ck_assert(raw_has_frame(r));
    ck_assert_int_eq(frame_decode_header(r->in + r->pos, r->in_len - r->pos,
                                         FRAME_MAX_CEIL, &len),
                     0);
    rv = envelope_decode(r->in + r->pos + FRAME_HEADER_LEN, len, FRAME_MAX_CEIL,
                         &r->v, err);
    ck_assert_msg(rv == 0, "peer sent an undecodable frame: %d %s", rv, err);
    r->pos += FRAME_HEADER_LEN + len;
}

/* Count-only peers: every frame is an OK answer, in call id order. */
static void raw_count(struct raw *r)
{
    while (raw_has_frame(r)) {
        raw_take(r);
        ck_assert_int_eq(r->v.status, RPC_STATUS_OK);
        ck_assert_uint_eq(r->v.call_id, r->last_call_id + 1);
        r->last_call_id = r->v.call_id;
        r->nframes++;
    }
}

static void raw_send_env(struct raw *r, const struct envelope_view *e)
{
    uint8_t *out = NULL;
    size_t len = 0;
    char err[ERR_MSG_SIZE] = "";

    ck_assert_msg(
        envelope_encode_alloc(e, FRAME_MAX_CEIL, &out, &len, err) == 0,
        "encode: %s", err);
    raw_send(r, out, len);
    free(out);
}

/* A whole request frame (malloc'd) for a raw client. */
static uint8_t *req_frame(uint64_t call_id,
                          const void *body,
                          size_t body_len,
                          uint64_t deadline_ms,
                          size_t *out_len)
{
    struct envelope_view e;
    uint8_t *out = NULL;
    char err[ERR_MSG_SIZE] = "";

    memset(&e, 0, sizeof e);
    e.call_id = call_id;
    e.method = RPC_METHOD_CLAIM;
    e.direction = RPC_REQUEST;
    e.deadline_ms = deadline_ms;
    e.body = body;
    e.body_len = body_len;
    ck_assert_msg(
        envelope_encode_alloc(&e, FRAME_MAX_CEIL, &out, out_len, err) == 0,
        "encode: %s", err);
    return out;
}

static void raw_send_req(struct raw *r,
                         uint64_t call_id,
                         const char *body,
                         uint64_t deadline_ms)
{
    size_t len;
    uint8_t *f = req_frame(call_id, body, strlen(body), deadline_ms, &len);

    raw_send(r, f, len);
    free(f);
}

/* The next frame is the OK answer to @call_id with @body. */
static void raw_expect_ok(struct raw *r, uint64_t call_id, const char *body)
{
    RUN_UNTIL(raw_has_frame(r));
    ck_assert_msg(r->write_err == 0, "write: %s", uv_strerror(r->write_err));
    raw_take(r);
    ck_assert_uint_eq(r->v.call_id, call_id);
    ck_assert_int_eq(r->v.direction, RPC_RESPONSE);
    ck_assert_int_eq(r->v.method, RPC_METHOD_CLAIM);
    ck_assert_msg(r->v.status == RPC_STATUS_OK, "status %s: %s",
                  rpc_status_name(r->v.status),
                  r->v.error != NULL ? r->v.error : "");
    ck_assert_int_eq(r->v.applied, RPC_APPLIED_UNSPECIFIED);
    ck_assert_uint_eq(r->v.body_len, strlen(body));
    ck_assert(r->v.body_len == 0 ||
              memcmp(r->v.body, body, r->v.body_len) == 0);
}

/* The connection got exactly one connection-level error frame (call id 0,
 * method UNSPECIFIED, @st, applied FALSE, some text) and was closed. */
static void raw_expect_error_then_close(struct raw *r, enum rpc_status st)
{
    RUN_UNTIL(r->eof);
    ck_assert_msg(raw_has_frame(r),
                  "closed without an error frame (%zu bytes, "
                  "read error %s)",
                  r->in_len,
                  r->read_err != 0 ? uv_strerror(r->read_err) : "none");
    raw_take(r);
    ck_assert_uint_eq(r->v.call_id, 0);
    ck_assert_int_eq(r->v.direction, RPC_RESPONSE);
    ck_assert_int_eq(r->v.method, RPC_METHOD_UNSPECIFIED);
    ck_assert_msg(r->v.status == st, "status %s, expected %s (%s)",
                  rpc_status_name(r->v.status), rpc_status_name(st),
                  r->v.error != NULL ? r->v.error : "");
    ck_assert_int_eq(r->v.applied, RPC_APPLIED_FALSE);
    ck_assert_uint_gt(r->v.error_len, 0);
    ck_assert_uint_eq(r->v.body_len, 0);
    /* Nothing after it. */
    ck_assert_uint_eq(r->pos, r->in_len);
}

/* ------------------------------------------------------------------------
 * Raw listener (a hand-made server for the channel)
 * ---------------------------------------------------------------------- */

static void lis_answer(struct raw *r, const struct envelope_view *req)
{
    struct envelope_view e;

    memset(&e, 0, sizeof e);
    e.direction = RPC_RESPONSE;
    e.node_id = 42;
    e.has_boot_id = true;
    memset(e.boot_id, 0x5a, RPC_ID_LEN);
    switch (r->mode) {
        case LIS_ECHO:
            e.call_id = req->call_id;
            e.method = req->method;
            e.group_id = req->group_id;
            e.body = req->body;
            e.body_len = req->body_len;
            raw_send_env(r, &e);
            break;
        case LIS_ERRFRAME:
            e.call_id = 0;
            e.method = RPC_METHOD_UNSPECIFIED;
            e.status = RPC_STATUS_INVALID_ARGUMENT;
            e.applied = RPC_APPLIED_FALSE;
            e.error = "bad frame";
            e.error_len = strlen(e.error);
            raw_send_env(r, &e);
            break;
        case LIS_GARBAGE:
            raw_send(r, "\x00\x00\x00\x04\xff\xff\xff\xff", 8);
            break;
        case LIS_BIG: {
            static uint8_t big[4096];
            e.call_id = req->call_id;
            e.method = req->method;
            e.body = big;
            e.body_len = sizeof big;
            raw_send_env(r, &e);
            break;
        }
        case LIS_REQUEST:
            memset(&e, 0, sizeof e);
            e.call_id = req->call_id;
            e.method = req->method;
            e.direction = RPC_REQUEST;
            raw_send_env(r, &e);
            break;
        case LIS_CLOSE:
            raw_close(r);
            break;
        case LIS_SILENT:
            break;
    }
}

static void lis_on_data(struct raw *r)
{
    while (!r->closing && raw_has_frame(r)) {
        raw_take(r);
        ck_assert_int_eq(r->v.direction, RPC_REQUEST);
        F.lis_frames++;
        F.lis_last_call_id = r->v.call_id;
        F.lis_last_deadline = r->v.deadline_ms;
        lis_answer(r, &r->v);
    }
}

static void lis_conn_cb(uv_stream_t *s, int status)
{
    struct raw *r;

    ck_assert_int_eq(status, 0);
    r = raw_new();
    ck_assert_int_eq(uv_tcp_init(&F.loop, &r->tcp), 0);
    r->tcp.data = r;
    ck_assert_int_eq(uv_accept(s, (uv_stream_t *)&r->tcp), 0);
    r->connected = true;
    r->listener_side = true;
    r->mode = (int)F.lis_mode;
    F.accepts++;
    ck_assert_int_eq(
        uv_read_start((uv_stream_t *)&r->tcp, raw_alloc_cb, raw_read_cb), 0);
}

static void lis_start(unsigned port, enum lis_mode mode)
{
    struct sockaddr_in sa;

    ck_assert_int_eq(uv_ip4_addr("127.0.0.1", (int)port, &sa), 0);
    ck_assert_int_eq(uv_tcp_init(&F.loop, &F.lis), 0);
    F.lis_open = true;
    F.lis_mode = mode;
    ck_assert_int_eq(uv_tcp_bind(&F.lis, (const struct sockaddr *)&sa, 0), 0);
    ck_assert_int_eq(uv_listen((uv_stream_t *)&F.lis, 16, lis_conn_cb), 0);
}

/* ------------------------------------------------------------------------
 * Addresses and setup errors
 * ---------------------------------------------------------------------- */

START_TEST(addr_parse)
{
    static const char *bad[] = {
        "",
        "127.0.0.1",
        "127.0.0.1:",
        ":7601",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "127.0.0.1:99999999999999999999",
        "127.0.0.1:-1",
        "127.0.0.1:+80",
        "127.0.0.1:80x",
        "127.0.0.1:80 ",
        " 127.0.0.1:80",
        "127.0.0.1 :80",
        "127.0.0.1: 80",
        "127.0.0.1:80:81",
        "localhost:80",
        "example.com:80",
        "[::1]:80",
        "::1:80",
        "256.0.0.1:80",
        "1.2.3:80",
        "1.2.3.4.5:80",
        "127.0.0.1:0x50",
    };
    struct sockaddr_in sa;

    memset(&sa, 0, sizeof sa);
    ck_assert_int_eq(rpc_addr_parse("127.0.0.1:7601", &sa), 0);
    ck_assert_int_eq(sa.sin_family, AF_INET);
    ck_assert_uint_eq(ntohs(sa.sin_port), 7601);
    ck_assert_uint_eq(ntohl(sa.sin_addr.s_addr), 0x7f000001u);
    ck_assert_int_eq(rpc_addr_parse("0.0.0.0:1", &sa), 0);
    ck_assert_uint_eq(ntohs(sa.sin_port), 1);
    ck_assert_uint_eq(ntohl(sa.sin_addr.s_addr), 0);
    ck_assert_int_eq(rpc_addr_parse("255.255.255.255:65535", &sa), 0);
    ck_assert_uint_eq(ntohs(sa.sin_port), 65535);
    ck_assert_uint_eq(ntohl(sa.sin_addr.s_addr), 0xffffffffu);
    ck_assert_int_eq(rpc_addr_parse("10.1.2.3:80", &sa), 0);
    ck_assert_uint_eq(ntohs(sa.sin_port), 80);
    ck_assert_uint_eq(ntohl(sa.sin_addr.s_addr), 0x0a010203u);

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(rpc_addr_parse(bad[i], &sa) == RPC_E_ADDR,
                      "\"%s\" was accepted", bad[i]);
    }
}
END_TEST

START_TEST(setup_errors)
{
    struct rpc_server_config cfg;
    struct rpc_server *s2 = NULL;
    struct rpc_channel *ch = NULL;
    struct rpc_limits lim;
    char err[ERR_MSG_SIZE];

    fx_init();
    rpc_limits_default(&lim);
    /* The defaults of docs/design.md §5. */
    ck_assert_uint_eq(lim.frame_max, FRAME_MAX_DEFAULT);
    ck_assert_uint_eq(lim.calls_max, 1024);
    ck_assert_uint_eq(lim.conns_max, 4096);
    ck_assert_uint_eq(lim.idle_ms, 300000);
    ck_assert_uint_eq(lim.out_max, 8u << 20);
    ck_assert_uint_eq(lim.deadline_ms, 5000);

    memset(&cfg, 0, sizeof cfg);
    cfg.limits = lim;
    cfg.serve = serve_cb;
    cfg.arg = &F;
    cfg.addr = "localhost:7601";
    err[0] = '\0';
    ck_assert_int_eq(rpc_server_start(&s2, &F.loop, &cfg, err), RPC_E_ADDR);
    ck_assert_uint_gt(strlen(err), 0);

    /* Limits out of range (RPC_E_LIMIT, frame.h's code for it). */
    {
        struct rpc_limits bad[5];
        for (unsigned i = 0; i < 5; i++) {
            bad[i] = lim;
        }
        bad[0].frame_max = 0;
        bad[1].frame_max = FRAME_MAX_CEIL + 1;
        bad[2].calls_max = 0;
        bad[3].conns_max = 0;
        bad[4].out_max = 0;
        cfg.addr = "127.0.0.1:7601";
        for (unsigned i = 0; i < 5; i++) {
            cfg.limits = bad[i];
            err[0] = '\0';
            s2 = NULL;
            ck_assert_int_eq(rpc_server_start(&s2, &F.loop, &cfg, err),
                             RPC_E_LIMIT);
            ck_assert_ptr_null(s2);
            ck_assert_uint_gt(strlen(err), 0);
        }
        cfg.limits = lim;
    }

    /* A port already in use: RPC_E_LISTEN and a reason. */
    srv_start(7601);
    cfg.addr = "127.0.0.1:7601";
    err[0] = '\0';
    ck_assert_int_eq(rpc_server_start(&s2, &F.loop, &cfg, err), RPC_E_LISTEN);
    ck_assert_uint_gt(strlen(err), 0);

    err[0] = '\0';
    ck_assert_int_eq(rpc_channel_open(&ch, &F.loop, "127.0.0.1", &lim, err),
                     RPC_E_ADDR);
    ck_assert_int_eq(
        rpc_channel_open(&ch, &F.loop, "127.0.0.1:65536", &lim, err),
        RPC_E_ADDR);

    /* Every code of this layer has its own text. */
    {
        static const int codes[] = {RPC_E_ADDR, RPC_E_LISTEN,  RPC_E_CONNECT,
                                    RPC_E_LOST, RPC_E_TIMEOUT, RPC_E_CLOSED,
                                    RPC_E_BUSY, RPC_E_PROTOCOL};
        const size_t n = sizeof codes / sizeof codes[0];
        for (size_t i = 0; i < n; i++) {
            const char *a = rpc_conn_strerror(codes[i]);
            ck_assert_ptr_nonnull(a);
            ck_assert_uint_gt(strlen(a), 0);
            for (size_t j = 0; j < i; j++) {
                ck_assert_str_ne(a, rpc_conn_strerror(codes[j]));
            }
        }
        ck_assert_ptr_nonnull(rpc_conn_strerror(RPC_E_TOOBIG));
        ck_assert_uint_gt(strlen(rpc_conn_strerror(RPC_E_TOOBIG)), 0);
        ck_assert_str_ne(rpc_conn_strerror(RPC_E_TOOBIG),
                         rpc_conn_strerror(RPC_E_LOST));
    }
    fx_close();
}
END_TEST

/* ------------------------------------------------------------------------
 * Calls through a server and a channel
 * ---------------------------------------------------------------------- */

START_TEST(echo)
{
    struct ans a = {0}, b = {0};
    struct rpc_server_stats s;
    uint64_t t0;

    fx_init();
    srv_start(7602);
    ch_open(7602);
    t0 = now_ms();
    call_text(&a, "hello", 2000);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 1);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "hello");
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    ck_assert_int_eq(a.method, RPC_METHOD_STATUS);
    /* What the handler saw. */
    ck_assert_uint_eq(F.nserved, 1);
    ck_assert_int_eq(F.seen[0].method, RPC_METHOD_STATUS);
    ck_assert_uint_eq(F.seen[0].call_id, a.call_id);
    ck_assert_uint_eq(F.seen[0].group_id, 0);
    ck_assert(!F.seen[0].forwarded);
    ck_assert_uint_eq(F.seen[0].body_len, 5);
    /* The timeout doubles as the deadline when none is given. */
    ck_assert_uint_eq(F.seen[0].deadline_ms, 2000);
    ck_assert_uint_ge(F.seen[0].received_mono_ms, t0);
    ck_assert_uint_le(F.seen[0].received_mono_ms, F.seen[0].now);
    /* An empty body, then a second call on the same connection. */
    call_text(&b, "", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "");
    ck_assert_uint_ne(b.call_id, a.call_id);
    s = stats();
    ck_assert_uint_eq(s.conns_open, 1);
    ck_assert_uint_eq(s.conns_accepted, 1);
    ck_assert_uint_eq(s.conns_refused, 0);
    ck_assert_uint_eq(s.calls_in_flight, 0);
    ck_assert_uint_eq(s.calls_served, 2);
    ck_assert_uint_eq(s.calls_busy, 0);
    ck_assert_uint_eq(s.calls_expired, 0);
    ck_assert_uint_eq(s.frames_malformed, 0);
    fx_close();
}
END_TEST

START_TEST(identity_fields)
{
    struct ans a = {0}, b = {0};
    struct rpc_ids ids;

    fx_init();
    srv_start(7603);
    ch_open(7603);
    call_text(&a, "one", 2000);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "one");
    ck_assert(!a.has_cluster_id);
    ck_assert_uint_eq(a.node_id, 3);
    ck_assert(a.has_boot_id);
    ck_assert_mem_eq(a.boot_id, F.ids.boot_id, RPC_ID_LEN);

    /* The cluster id is learned later: answers carry it from then on. */
    memset(&ids, 0, sizeof ids);
    ids.has_cluster_id = true;
    for (unsigned i = 0; i < RPC_ID_LEN; i++) {
        ids.cluster_id[i] = (uint8_t)(0xc0 + i);
        ids.boot_id[i] = (uint8_t)(0xd0 + i);
    }
    ids.node_id = 4;
    rpc_server_set_ids(F.srv, &ids);
    memset(&ids, 0xee, sizeof ids); /* copied, not borrowed */
    call_text(&b, "two", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "two");
    ck_assert(b.has_cluster_id);
    for (unsigned i = 0; i < RPC_ID_LEN; i++) {
        ck_assert_uint_eq(b.cluster_id[i], 0xc0 + i);
        ck_assert_uint_eq(b.boot_id[i], 0xd0 + i);
    }
    ck_assert_uint_eq(b.node_id, 4);
    ck_assert(b.has_boot_id);
    fx_close();
}
END_TEST

START_TEST(cluster_id_pin)
{
    uint8_t x[RPC_ID_LEN], y[RPC_ID_LEN];
    struct ans a = {0}, b = {0}, c = {0}, d = {0}, e = {0};
    struct rpc_ids ids;

    memset(x, 0x11, sizeof x);
    memset(y, 0x22, sizeof y);
    fx_init();
    srv_start(7649);
    ch_open(7649);
    /* The server does not know its cluster yet: a pinned call is served
     * (reading of the header: "differs" needs an id to differ from), and
     * the handler sees the pin. */
    call_pinned(&a, "p1", x);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "p1");
    ck_assert(F.seen[0].has_cluster_id);
    ck_assert_mem_eq(F.seen[0].cluster_id, x, RPC_ID_LEN);
    ck_assert(!a.has_cluster_id);
    /* It learns cluster x. */
    ids = F.ids;
    ids.has_cluster_id = true;
    memcpy(ids.cluster_id, x, RPC_ID_LEN);
    rpc_server_set_ids(F.srv, &ids);
    call_pinned(&b, "p2", x);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "p2");
    ck_assert(b.has_cluster_id);
    ck_assert_mem_eq(b.cluster_id, x, RPC_ID_LEN);
    /* Pinned to another cluster: refused by the layer, not applied, and
     * the handler never sees it. */
    call_pinned(&c, "p3", y);
    RUN_UNTIL(c.n == 1);
    assert_status(&c, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_FALSE);
    ck_assert_int_eq(c.method, RPC_METHOD_STATUS);
    ck_assert(c.has_cluster_id);
    ck_assert_mem_eq(c.cluster_id, x, RPC_ID_LEN);
    ck_assert_uint_eq(F.nserved, 2);
    /* Not pinned: served, and the call says so. */
    call_pinned(&d, "p4", NULL);
    RUN_UNTIL(d.n == 1);
    assert_ok(&d, "p4");
    ck_assert_uint_eq(F.nserved, 3);
    ck_assert(!F.seen[2].has_cluster_id);
    /* The connection survived the refusal. */
    call_pinned(&e, "p5", x);
    RUN_UNTIL(e.n == 1);
    assert_ok(&e, "p5");
    ck_assert_uint_eq(stats().conns_accepted, 1);
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    fx_close();
}
END_TEST

START_TEST(deadline_and_forwarded_reach_the_call)
{
    struct ans a = {0}, b = {0}, c = {0};

    fx_init();
    srv_start(7604);
    ch_open(7604);
    /* An explicit deadline wins over the timeout; forwarded and the group
     * id reach the call. */
    ck_assert_int_eq(
        call_full(&a, RPC_METHOD_LOOKUP, "x", 1, 1234, 5000, true, 9), 0);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "x");
    ck_assert_int_eq(a.method, RPC_METHOD_LOOKUP);
    /* Reading of the header: an answer carries its call's group id. */
    ck_assert_uint_eq(a.group_id, 9);
    ck_assert_int_eq(F.seen[0].method, RPC_METHOD_LOOKUP);
    ck_assert_uint_eq(F.seen[0].deadline_ms, 1234);
    ck_assert(F.seen[0].forwarded);
    ck_assert_uint_eq(F.seen[0].group_id, 9);
    /* No deadline and no timeout: none sent, the server's default (5 s)
     * applies. */
    ck_assert_int_eq(call_full(&b, RPC_METHOD_CLAIM, "y", 1, 0, 0, false, 0),
                     0);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "y");
    ck_assert_uint_eq(F.seen[1].deadline_ms, 5000);
    ck_assert(!F.seen[1].forwarded);
    ck_assert_int_eq(F.seen[1].method, RPC_METHOD_CLAIM);
    /* The timeout as the deadline. */
    ck_assert_int_eq(
        call_full(&c, RPC_METHOD_SNAPSHOT_TAKE, "z", 1, 0, 777, false, 1), 0);
    RUN_UNTIL(c.n == 1);
    assert_ok(&c, "z");
    ck_assert_uint_eq(F.seen[2].deadline_ms, 777);
    ck_assert_int_eq(F.seen[2].method, RPC_METHOD_SNAPSHOT_TAKE);
    ck_assert_uint_eq(F.seen[2].group_id, 1);
    fx_close();
}
END_TEST

#define NOOO 50
START_TEST(out_of_order)
{
    struct ans a[NOOO];
    char body[NOOO][16];

    memset(a, 0, sizeof a);
    fx_init();
    srv_start(7605);
    ch_open(7605);
    for (unsigned i = 0; i < NOOO; i++) {
        snprintf(body[i], sizeof body[i], "hold%02u", i);
        call_text(&a[i], body[i], 5000);
    }
    ck_assert_uint_eq(rpc_channel_pending(F.ch), NOOO);
    RUN_UNTIL(F.nheld == NOOO);
    ck_assert_uint_eq(stats().calls_in_flight, NOOO);
    /* Every call id is distinct. */
    for (unsigned i = 0; i < NOOO; i++) {
        for (unsigned j = 0; j < i; j++) {
            ck_assert_uint_ne(F.seen[i].call_id, F.seen[j].call_id);
        }
    }
    /* Answer in reverse order. */
    for (unsigned i = NOOO; i-- > 0;) {
        release(i);
    }
    RUN_UNTIL(n_answered(a, NOOO) == NOOO);
    for (unsigned i = 0; i < NOOO; i++) {
        assert_ok(&a[i], body[i]);
        /* The handler saw the calls in the order they were made. */
        ck_assert_uint_eq(a[i].call_id, F.seen[i].call_id);
        ck_assert_int_eq(a[i].seq, (int)(NOOO - 1 - i));
    }
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    ck_assert_uint_eq(stats().calls_served, NOOO);
    fx_close();
}
END_TEST

START_TEST(large_body)
{
    enum { LEN = 1000000 };
    struct ans a = {0};
    uint8_t *b = malloc(LEN);

    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < LEN; i++) {
        b[i] = (uint8_t)(i * 7 % 251);
    }
    fx_init();
    srv_start(7615);
    ch_open(7615);
    ck_assert_int_eq(
        call_full(&a, RPC_METHOD_CLAIM, b, LEN, 0, 10000, false, 0), 0);
    RUN_UNTIL_MS(a.n == 1, 10000);
    ck_assert_int_eq(a.rv, 0);
    ck_assert_int_eq(a.status, RPC_STATUS_OK);
    ck_assert_uint_eq(a.body_len, LEN);
    ck_assert_mem_eq(a.body, b, LEN);
    ck_assert_uint_eq(F.seen[0].body_len, LEN);
    free(b);
    fx_close();
}
END_TEST

#define NCHAIN 20
static struct ans chain_a[NCHAIN];
static char chain_body[NCHAIN][8];

/* Make the next call from inside the previous one's answer callback. */
static void chain_then(struct ans *x)
{
    size_t i = (size_t)(x - chain_a);

    if (i + 1 < NCHAIN) {
        chain_a[i + 1].then = chain_then;
        call_text(&chain_a[i + 1], chain_body[i + 1], 2000);
    }
}

START_TEST(server_without_log_hook)
{
    struct rpc_server_config cfg;
    struct ans a = {0}, b = {0};
    char err[ERR_MSG_SIZE] = "";

    fx_init();
    memset(&cfg, 0, sizeof cfg);
    rpc_limits_default(&cfg.limits);
    cfg.limits.frame_max = 4096;
    cfg.addr = "127.0.0.1:7646";
    cfg.serve = serve_cb;
    cfg.arg = &F;
    cfg.ids = F.ids;
    cfg.log = NULL; /* silent */
    ck_assert_int_eq(rpc_server_start(&F.srv, &F.loop, &cfg, err), 0);
    ch_open(7646);
    /* What would be logged (a replaced reply, a bad frame) is not. */
    call_text(&a, "big", 2000);
    RUN_UNTIL(a.n == 1);
    assert_status(&a, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN);
    {
        struct raw *r = raw_connect(7646);
        raw_send(r, "\x00\x00\x00\x00", 4);
        raw_expect_error_then_close(r, RPC_STATUS_INVALID_ARGUMENT);
    }
    call_text(&b, "ok", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "ok");
    ck_assert_uint_eq(F.nlog, 0);
    fx_close();
}
END_TEST

#define NMANY 1100
static struct ans many_a[NMANY];
static char many_body[NMANY][16];

START_TEST(many_pending_calls)
{
    struct rpc_limits lim;

    memset(many_a, 0, sizeof many_a);
    fx_init();
    rpc_limits_default(&lim);
    lim.calls_max = 2 * NMANY;
    srv_start_lim(7647, &lim);
    ch_open_lim(7647, &lim);
    /* More calls pending than a power-of-two table has buckets, answered
     * in reverse order: ids that share a bucket are told apart. */
    for (unsigned i = 0; i < NMANY; i++) {
        snprintf(many_body[i], sizeof many_body[i], "hold%u", i);
        call_text(&many_a[i], many_body[i], 20000);
    }
    ck_assert_uint_eq(rpc_channel_pending(F.ch), NMANY);
    RUN_UNTIL_MS(F.nheld == NMANY, 10000);
    for (unsigned i = NMANY; i-- > 0;) {
        release(i);
    }
    RUN_UNTIL_MS(n_answered(many_a, NMANY) == NMANY, 10000);
    for (unsigned i = 0; i < NMANY; i++) {
        assert_ok(&many_a[i], many_body[i]);
        ck_assert_int_eq(many_a[i].seq, (int)(NMANY - 1 - i));
    }
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

static int call_in_closed_rv = 1;
static struct ans call_in_closed_ans;

static void call_after_close_then(struct ans *x)
{
    (void)x;
    /* From inside an RPC_E_CLOSED callback the channel is closing: a new
     * call is refused at once and its callback never runs. */
    if (call_in_closed_rv == 1 && F.ch_closing != NULL) {
        struct envelope_view req;
        memset(&req, 0, sizeof req);
        req.method = RPC_METHOD_STATUS;
        req.direction = RPC_REQUEST;
        call_in_closed_rv = rpc_channel_call(F.ch_closing, &req, 1000,
                                             answer_cb, &call_in_closed_ans);
    }
}

START_TEST(channel_call_inside_closed_callback)
{
    struct ans a = {0};

    memset(&call_in_closed_ans, 0, sizeof call_in_closed_ans);
    call_in_closed_rv = 1;
    fx_init();
    srv_start(7648);
    ch_open(7648);
    a.then = call_after_close_then;
    call_text(&a, "hold", 5000);
    RUN_UNTIL(F.nheld == 1);
    F.ch_closing = F.ch;
    rpc_channel_close(F.ch);
    F.ch = NULL;
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_CLOSED, true);
    ck_assert_int_eq(call_in_closed_rv, RPC_E_CLOSED);
    F.ch_closing = NULL;
    run_for(50);
    ck_assert_int_eq(call_in_closed_ans.n, 0);
    ck_assert_int_eq(a.n, 1);
    RUN_UNTIL(stat_conns_open() == 0);
    release_all();
    run_for(20);
    fx_close();
}
END_TEST

START_TEST(chained_calls_from_the_callback)
{
    memset(chain_a, 0, sizeof chain_a);
    fx_init();
    srv_start(7629);
    ch_open(7629);
    for (unsigned i = 0; i < NCHAIN; i++) {
        snprintf(chain_body[i], sizeof chain_body[i], "c%u", i);
    }
    chain_a[0].then = chain_then;
    call_text(&chain_a[0], chain_body[0], 2000);
    RUN_UNTIL(chain_a[NCHAIN - 1].n == 1);
    for (unsigned i = 0; i < NCHAIN; i++) {
        assert_ok(&chain_a[i], chain_body[i]);
        ck_assert_int_eq(chain_a[i].seq, (int)i);
    }
    ck_assert_uint_eq(F.nserved, NCHAIN);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

START_TEST(error_replies_and_replaced_replies)
{
    struct rpc_limits lim;
    struct ans a = {0}, b = {0}, c = {0}, d = {0}, e = {0}, f = {0};
    unsigned logs;

    fx_init();
    rpc_limits_default(&lim);
    lim.frame_max = 4096;
    srv_start_lim(7616, &lim);
    ch_open(7616);
    /* An error answer's fields arrive as given. */
    call_text(&a, "unavail", 2000);
    RUN_UNTIL(a.n == 1);
    ck_assert_int_eq(a.rv, 0);
    ck_assert_int_eq(a.status, RPC_STATUS_UNAVAILABLE);
    ck_assert_int_eq(a.applied, RPC_APPLIED_FALSE);
    ck_assert_str_eq(a.error, "not the leader");
    ck_assert_str_eq(a.hint, "127.0.0.1:7001");
    ck_assert_uint_eq(a.body_len, 0);
    /* A reply over the server's frame_max: UNKNOWN / UNKNOWN, logged. */
    logs = F.nlog;
    call_text(&b, "big", 2000);
    RUN_UNTIL(b.n == 1);
    assert_status(&b, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN);
    ck_assert_uint_gt(F.nlog, logs);
    ck_assert_msg(strstr(F.last_log, "STATUS") != NULL,
                  "the log does not name the method: %s", F.last_log);
    /* A reply breaking a rule (OK with applied FALSE): the same. */
    logs = F.nlog;
    call_text(&c, "badrule", 2000);
    RUN_UNTIL(c.n == 1);
    assert_status(&c, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN);
    ck_assert_uint_gt(F.nlog, logs);
    /* An error text over RPC_ERROR_MAX: the same. */
    call_text(&d, "longerr", 2000);
    RUN_UNTIL(d.n == 1);
    assert_status(&d, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN);
    /* A leader hint over RPC_ADDR_MAX: the same. */
    call_text(&f, "longhint", 2000);
    RUN_UNTIL(f.n == 1);
    assert_status(&f, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN);
    ck_assert_str_eq(f.hint, "");
    /* The connection is still good. */
    call_text(&e, "fine", 2000);
    RUN_UNTIL(e.n == 1);
    assert_ok(&e, "fine");
    ck_assert_uint_eq(stats().conns_accepted, 1);
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    fx_close();
}
END_TEST

/* ------------------------------------------------------------------------
 * Limits
 * ---------------------------------------------------------------------- */

START_TEST(calls_max_per_connection)
{
    enum { N = 10, MAX = 4 };
    struct rpc_limits lim;
    struct ans a[N], more[MAX];
    struct rpc_server_stats s;

    memset(a, 0, sizeof a);
    memset(more, 0, sizeof more);
    fx_init();
    rpc_limits_default(&lim);
    lim.calls_max = MAX;
    srv_start_lim(7606, &lim);
    ch_open(7606); /* the channel's own limit stays 1024 */
    for (unsigned i = 0; i < N; i++) {
        call_text(&a[i], "hold", 5000);
    }
    /* The calls over the limit are answered by the layer. */
    RUN_UNTIL(n_answered(a, N) == N - MAX);
    run_for(50);
    ck_assert_uint_eq(n_answered(a, N), N - MAX);
    ck_assert_uint_eq(F.nserved, MAX); /* the handler never saw them */
    for (unsigned i = 0; i < MAX; i++) {
        ck_assert_int_eq(a[i].n, 0);
    }
    for (unsigned i = MAX; i < N; i++) {
        assert_status(&a[i], RPC_STATUS_RESOURCE_EXHAUSTED, RPC_APPLIED_FALSE);
        ck_assert_int_eq(a[i].method, RPC_METHOD_STATUS);
    }
    s = stats();
    ck_assert_uint_eq(s.calls_busy, N - MAX);
    ck_assert_uint_eq(s.calls_in_flight, MAX);
    ck_assert_uint_eq(s.conns_open, 1);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), MAX);
    release_all();
    RUN_UNTIL(n_answered(a, N) == N);
    for (unsigned i = 0; i < MAX; i++) {
        assert_ok(&a[i], "hold");
    }
    /* Slots freed: the handler gets calls again. */
    for (unsigned i = 0; i < MAX; i++) {
        call_text(&more[i], "hold", 5000);
    }
    RUN_UNTIL(F.nheld == 2 * MAX);
    release_all();
    RUN_UNTIL(n_answered(more, MAX) == MAX);
    for (unsigned i = 0; i < MAX; i++) {
        assert_ok(&more[i], "hold");
    }
    ck_assert_uint_eq(stats().calls_busy, N - MAX);
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    fx_close();
}
END_TEST

START_TEST(channel_busy)
{
    struct rpc_limits lim;
    struct ans a = {0}, b = {0}, c = {0};

    fx_init();
    srv_start(7607);
    rpc_limits_default(&lim);
    lim.calls_max = 2;
    ch_open_lim(7607, &lim);
    call_text(&a, "hold", 5000);
    call_text(&b, "hold", 5000);
    call_text(&c, "hold", 5000); /* over the channel's limit */
    RUN_UNTIL(c.n == 1);
    assert_failed(&c, RPC_E_BUSY, false);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 2);
    RUN_UNTIL(F.nheld == 2);
    run_for(50);
    ck_assert_uint_eq(F.nserved, 2);
    release_all();
    RUN_UNTIL(a.n == 1 && b.n == 1);
    assert_ok(&a, "hold");
    assert_ok(&b, "hold");
    ck_assert_int_eq(c.n, 1);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

START_TEST(bad_request_is_refused_before_queueing)
{
    struct rpc_limits lim;
    struct ans a = {0}, b = {0}, c = {0};
    uint8_t body[2000];
    int rv;

    fx_init();
    srv_start(7608);
    rpc_limits_default(&lim);
    lim.frame_max = 1024;
    ch_open_lim(7608, &lim);
    /* An unknown method and a deadline over the bound: envelope_check
     * errors, returned; the callback never runs. */
    ck_assert_int_eq(
        call_full(&a, (enum rpc_method)99, "x", 1, 0, 1000, false, 0),
        RPC_E_ENUM);
    ck_assert_int_eq(call_full(&b, RPC_METHOD_CLAIM, "x", 1,
                               RPC_DEADLINE_MAX + 1, 1000, false, 0),
                     RPC_E_DEADLINE);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    /* A request over the channel's frame_max: either refused at once, or
     * failed through the callback as not sent (the header leaves it
     * open); it never reaches the server. */
    memset(body, 'b', sizeof body);
    rv = call_full(&c, RPC_METHOD_CLAIM, body, sizeof body, 0, 1000, false, 0);
    if (rv == 0) {
        RUN_UNTIL(c.n == 1);
        ck_assert_int_lt(c.rv, 0);
        ck_assert(!c.sent);
    } else {
        ck_assert_int_eq(rv, RPC_E_TOOBIG);
    }
    run_for(100);
    ck_assert_int_eq(a.n, 0);
    ck_assert_int_eq(b.n, 0);
    ck_assert_int_eq(c.n, rv == 0 ? 1 : 0);
    ck_assert_uint_eq(F.nserved, 0);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

START_TEST(conns_max_per_server)
{
    struct rpc_limits lim;
    struct ans a = {0}, b = {0};
    struct raw *r2, *r3, *r4;

    fx_init();
    rpc_limits_default(&lim);
    lim.conns_max = 2;
    srv_start_lim(7609, &lim);
    ch_open(7609);
    call_text(&a, "first", 2000);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "first");
    r2 = raw_connect(7609);
    RUN_UNTIL(stat_conns_open() == 2);
    /* The third connection: one error frame, then closed. Reading of the
     * header: the status is RESOURCE_EXHAUSTED, like the other limits. */
    r3 = raw_connect(7609);
    raw_expect_error_then_close(r3, RPC_STATUS_RESOURCE_EXHAUSTED);
    ck_assert_uint_eq(stats().conns_refused, 1);
    ck_assert_uint_eq(stats().conns_open, 2);
    /* The first two still work. */
    call_text(&b, "second", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "second");
    raw_send_req(r2, 5, "y", 0);
    raw_expect_ok(r2, 5, "y");
    /* A slot freed is a slot taken. */
    raw_close(r2);
    RUN_UNTIL(stat_conns_open() == 1);
    r4 = raw_connect(7609);
    raw_send_req(r4, 6, "z", 0);
    raw_expect_ok(r4, 6, "z");
    ck_assert(!r4->eof);
    ck_assert_uint_eq(stats().conns_refused, 1);
    ck_assert_uint_eq(stats().conns_open, 2);
    fx_close();
}
END_TEST

START_TEST(channel_refused_by_conns_max)
{
    struct rpc_limits lim;
    struct ans a = {0}, b = {0};
    struct raw *r;

    fx_init();
    rpc_limits_default(&lim);
    lim.conns_max = 1;
    srv_start_lim(7645, &lim);
    r = raw_connect(7645);
    RUN_UNTIL(stat_conns_open() == 1);
    /* The channel's connection is refused with a connection-level error
     * frame (RESOURCE_EXHAUSTED, applied FALSE) sent before the server read
     * anything: RPC_E_CONNECT, definitely not sent, and the handler never
     * saw the call. */
    ch_open(7645);
    call_text(&a, "x", 2000);
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_CONNECT, false);
    ck_assert_uint_eq(F.nserved, 0);
    ck_assert_uint_eq(stats().conns_refused, 1);
    /* Once the slot is free the channel reconnects. */
    raw_close(r);
    RUN_UNTIL(stat_conns_open() == 0);
    call_text(&b, "y", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "y");
    ck_assert_uint_eq(F.nserved, 1);
    fx_close();
}
END_TEST

START_TEST(many_connections_closed_in_any_order)
{
    enum { N = 6 };
    struct raw *r[N];
    static const unsigned order[] = {2, 4, 0, 5};

    fx_init();
    srv_start(7644);
    for (unsigned i = 0; i < N; i++) {
        r[i] = raw_connect(7644);
    }
    RUN_UNTIL(stat_conns_open() == N);
    for (unsigned i = 0; i < N; i++) {
        raw_send_req(r[i], 100 + i, "m", 0);
    }
    for (unsigned i = 0; i < N; i++) {
        raw_expect_ok(r[i], 100 + i, "m");
    }
    /* Closed from the middle, the head and the tail of the server's list:
     * the others keep being served. */
    for (unsigned k = 0; k < sizeof order / sizeof order[0]; k++) {
        raw_close(r[order[k]]);
        RUN_UNTIL(stat_conns_open() == N - 1 - k);
        for (unsigned i = 0; i < N; i++) {
            if (!r[i]->closing) {
                raw_send_req(r[i], 200 + 10 * k + i, "n", 0);
                raw_expect_ok(r[i], 200 + 10 * k + i, "n");
            }
        }
    }
    ck_assert_uint_eq(stats().conns_accepted, N);
    ck_assert_uint_eq(stats().calls_served, N + 5 + 4 + 3 + 2);
    fx_close();
}
END_TEST

START_TEST(idle_connections_close)
{
    struct rpc_limits lim;
    struct ans a = {0}, b = {0};
    struct raw *r;
    uint64_t t;

    fx_init();
    rpc_limits_default(&lim);
    lim.idle_ms = 100;
    srv_start_lim(7610, &lim);
    /* A connection that never sends is closed after idle_ms. */
    r = raw_connect(7610);
    RUN_UNTIL(r->eof);
    ck_assert_msg(
        r->eof_at - r->connected_at >= 90 && r->eof_at - r->connected_at < 1000,
        "idle close after %" PRIu64 " ms", r->eof_at - r->connected_at);
    ck_assert_uint_eq(r->in_len, 0); /* closed without a frame */
    RUN_UNTIL(stat_conns_open() == 0);
    /* Not while a call is in flight (three times idle_ms). */
    ch_open(7610);
    call_text(&a, "hold", 0);
    RUN_UNTIL(F.nheld == 1);
    run_for(300);
    ck_assert_int_eq(a.n, 0);
    ck_assert_uint_eq(stats().conns_open, 1);
    release(0);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "hold");
    /* Idle again: closed idle_ms after the answer. */
    t = now_ms();
    RUN_UNTIL(stat_conns_open() == 0);
    ck_assert_uint_ge(now_ms() - t, 90);
    run_for(50); /* let the channel see it */
    /* The channel reconnects for its next call. */
    call_text(&b, "again", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "again");
    ck_assert_uint_eq(stats().conns_accepted, 3);
    fx_close();
}
END_TEST

START_TEST(idle_timer_restarts_on_frames)
{
    struct rpc_limits lim;
    struct raw *r;
    uint64_t last;

    fx_init();
    rpc_limits_default(&lim);
    lim.idle_ms = 300;
    srv_start_lim(7611, &lim);
    r = raw_connect(7611);
    /* A call every 60 ms for 360 ms: never idle for 300 ms (the margin
     * is for a loaded machine, where a 60 ms wait can take much longer). */
    for (unsigned i = 1; i <= 6; i++) {
        char b[8];
        snprintf(b, sizeof b, "t%u", i);
        run_for(60);
        ck_assert(!r->eof);
        raw_send_req(r, i, b, 0);
        raw_expect_ok(r, i, b);
    }
    last = now_ms();
    RUN_UNTIL(r->eof);
    ck_assert_uint_ge(r->eof_at - last, 290);
    ck_assert_uint_eq(r->pos, r->in_len);
    fx_close();
}
END_TEST

/* Frames the layer answers itself (no call is made: here a cluster id
 * mismatch) count as activity too. */
START_TEST(idle_timer_restarts_on_refused_frames)
{
    struct rpc_limits lim;
    struct raw *r;
    uint64_t last;

    fx_init();
    F.ids.has_cluster_id = true;
    memset(F.ids.cluster_id, 0x11, RPC_ID_LEN);
    rpc_limits_default(&lim);
    lim.idle_ms = 100;
    srv_start_lim(7650, &lim);
    r = raw_connect(7650);
    for (unsigned i = 1; i <= 6; i++) {
        struct envelope_view e;
        run_for(60);
        ck_assert(!r->eof);
        memset(&e, 0, sizeof e);
        e.call_id = i;
        e.method = RPC_METHOD_CLAIM;
        e.direction = RPC_REQUEST;
        e.has_cluster_id = true;
        memset(e.cluster_id, 0x22, RPC_ID_LEN); /* another cluster */
        raw_send_env(r, &e);
        RUN_UNTIL(raw_has_frame(r));
        raw_take(r);
        ck_assert_uint_eq(r->v.call_id, i);
        ck_assert_int_eq(r->v.status, RPC_STATUS_FAILED_PRECONDITION);
        ck_assert_int_eq(r->v.applied, RPC_APPLIED_FALSE);
    }
    ck_assert_uint_eq(F.nserved, 0);
    last = now_ms();
    RUN_UNTIL(r->eof);
    ck_assert_uint_ge(r->eof_at - last, 90);
    fx_close();
}
END_TEST

/* A request envelope of exactly @size bytes (without the header). */
static uint8_t *frame_of_size(size_t size, size_t *flen)
{
    for (size_t bl = size > 64 ? size - 64 : 0; bl < size; bl++) {
        uint8_t *body = malloc(bl + 1);
        uint8_t *f;
        ck_assert_ptr_nonnull(body);
        memset(body, 'p', bl);
        memcpy(body, "empty", bl < 5 ? bl : 5);
        f = req_frame(1, body, bl, 0, flen);
        free(body);
        if (*flen == size + FRAME_HEADER_LEN) {
            return f;
        }
        free(f);
    }
    ck_abort_msg("no frame of %zu bytes", size);
    return NULL;
}

START_TEST(frame_max_and_empty_frames)
{
    struct rpc_limits lim;
    struct raw *r1, *r2, *r3, *r4;
    uint8_t *f;
    size_t flen;

    fx_init();
    rpc_limits_default(&lim);
    lim.frame_max = 1024;
    srv_start_lim(7612, &lim);
    /* A header announcing more than frame_max. */
    r1 = raw_connect(7612);
    raw_send(r1, "\x00\x00\x07\xd0", 4); /* 2000 */
    raw_expect_error_then_close(r1, RPC_STATUS_INVALID_ARGUMENT);
    /* A frame of length 0. */
    r2 = raw_connect(7612);
    raw_send(r2, "\x00\x00\x00\x00", 4);
    raw_expect_error_then_close(r2, RPC_STATUS_INVALID_ARGUMENT);
    /* Exactly frame_max is served. */
    r3 = raw_connect(7612);
    f = frame_of_size(1024, &flen);
    raw_send(r3, f, flen);
    free(f);
    raw_expect_ok(r3, 1, "");
    run_for(50);
    ck_assert(!r3->eof);
    /* One byte more is not. */
    r4 = raw_connect(7612);
    f = frame_of_size(1025, &flen);
    raw_send(r4, f, flen);
    free(f);
    raw_expect_error_then_close(r4, RPC_STATUS_INVALID_ARGUMENT);
    ck_assert_uint_eq(F.nserved, 1);
    ck_assert_uint_eq(stats().frames_malformed, 3);
    RUN_UNTIL(stat_conns_open() == 1);
    fx_close();
}
END_TEST

START_TEST(garbage_closes_only_its_connection)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    /* Protobuf that decodes, with an unknown method (99). */
    static const uint8_t bad_enum[] = {0,    0,    0,    6,    0x08,
                                       0x09, 0x10, 0x63, 0x18, 0x01};
    struct ans a = {0}, b = {0};
    struct raw *r1, *r2, *r3, *r4;

    fx_init();
    srv_start(7613);
    ch_open(7613);
    call_text(&a, "hold", 5000); /* in flight meanwhile */
    RUN_UNTIL(F.nheld == 1);
    r1 = raw_connect(7613);
    raw_send(r1, http, sizeof http - 1);
    raw_expect_error_then_close(r1, RPC_STATUS_INVALID_ARGUMENT);
    r2 = raw_connect(7613);
    raw_send(r2, "\x00\x00\x00\x05\xff\xff\xff\xff\xff", 9);
    raw_expect_error_then_close(r2, RPC_STATUS_INVALID_ARGUMENT);
    r3 = raw_connect(7613);
    raw_send(r3, bad_enum, sizeof bad_enum);
    raw_expect_error_then_close(r3, RPC_STATUS_INVALID_ARGUMENT);
    /* A well-formed answer sent to a server: not a request. */
    r4 = raw_connect(7613);
    {
        struct envelope_view e;
        memset(&e, 0, sizeof e);
        e.call_id = 4;
        e.method = RPC_METHOD_CLAIM;
        e.direction = RPC_RESPONSE;
        raw_send_env(r4, &e);
    }
    raw_expect_error_then_close(r4, RPC_STATUS_INVALID_ARGUMENT);
    ck_assert_uint_eq(F.nserved, 1);
    ck_assert_uint_eq(stats().frames_malformed, 4);
    /* The well-behaved connection was never disturbed. */
    ck_assert_int_eq(a.n, 0);
    release(0);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "hold");
    call_text(&b, "next", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "next");
    RUN_UNTIL(stat_conns_open() == 1);
    ck_assert_uint_eq(stats().conns_accepted, 5);
    fx_close();
}
END_TEST

START_TEST(split_and_coalesced_frames)
{
    struct raw *r;
    uint8_t *fa, *fb, *both;
    size_t la, lb;

    fx_init();
    srv_start(7614);
    r = raw_connect(7614);
    fa = req_frame(1, "a1", 2, 0, &la);
    fb = req_frame(2, "b2", 2, 0, &lb);
    /* Frame A in three pieces, its tail in one write with frame B. */
    raw_send(r, fa, 2);
    run_for(20);
    raw_send(r, fa + 2, 5);
    run_for(20);
    ck_assert_uint_eq(F.nserved, 0);
    both = malloc(la - 7 + lb);
    ck_assert_ptr_nonnull(both);
    memcpy(both, fa + 7, la - 7);
    memcpy(both + la - 7, fb, lb);
    raw_send(r, both, la - 7 + lb);
    raw_expect_ok(r, 1, "a1");
    raw_expect_ok(r, 2, "b2");
    ck_assert_uint_eq(F.nserved, 2);
    free(fa);
    free(fb);
    free(both);
    fx_close();
}
END_TEST

/* ------------------------------------------------------------------------
 * Deadlines
 * ---------------------------------------------------------------------- */

/* The layer answers an expired call, once; the handler's late reply is
 * only a free. A raw client sees every frame, so a second answer would
 * show. */
static void check_expiry(unsigned port, const char *body, enum rpc_applied ap)
{
    struct raw *r;
    uint64_t got;

    fx_init();
    srv_start(port);
    r = raw_connect(port);
    raw_send_req(r, 11, body, 100);
    RUN_UNTIL(F.nheld == 1);
    ck_assert_uint_eq(F.seen[0].deadline_ms, 100);
    RUN_UNTIL(raw_has_frame(r));
    got = r->data_at;
    raw_take(r);
    ck_assert_uint_eq(r->v.call_id, 11);
    ck_assert_int_eq(r->v.direction, RPC_RESPONSE);
    ck_assert_int_eq(r->v.method, RPC_METHOD_CLAIM);
    ck_assert_msg(r->v.status == RPC_STATUS_DEADLINE_EXCEEDED, "status %s",
                  rpc_status_name(r->v.status));
    ck_assert_msg(r->v.applied == ap, "applied %s, expected %s",
                  rpc_applied_name(r->v.applied), rpc_applied_name(ap));
    ck_assert_uint_gt(r->v.error_len, 0);
    ck_assert_uint_eq(r->v.node_id, 3);
    ck_assert_msg(got - F.seen[0].received_mono_ms >= 100 &&
                      got - F.seen[0].received_mono_ms < 1000,
                  "expired after %" PRIu64 " ms",
                  got - F.seen[0].received_mono_ms);
    ck_assert_uint_eq(stats().calls_expired, 1);
    /* The handler replies late: nothing is sent. */
    run_for(20);
    release(0);
    raw_send_req(r, 12, "x", 0);
    raw_expect_ok(r, 12, "x");
    run_for(50);
    ck_assert_uint_eq(r->pos, r->in_len);
    ck_assert(!r->eof);
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    ck_assert_uint_eq(stats().calls_expired, 1);
}

START_TEST(deadline_before_sent)
{
    check_expiry(7617, "hold", RPC_APPLIED_FALSE);
    fx_close();
}
END_TEST

START_TEST(deadline_after_mark_sent)
{
    struct raw *r;

    check_expiry(7618, "mark", RPC_APPLIED_UNKNOWN);
    /* Replied in time after mark_sent: the answer, and no expiry later. */
    r = &F.raws[0];
    ck_assert(r->used);
    raw_send_req(r, 13, "mark13", 200);
    RUN_UNTIL(F.nheld == 2);
    run_for(50);
    release(1);
    raw_expect_ok(r, 13, "mark13");
    run_for(250);
    ck_assert_uint_eq(r->pos, r->in_len);
    ck_assert_uint_eq(stats().calls_expired, 1);
    fx_close();
}
END_TEST

START_TEST(server_default_deadline)
{
    struct rpc_limits lim;
    struct ans a = {0}, b = {0};
    struct raw *r;

    fx_init();
    rpc_limits_default(&lim);
    lim.deadline_ms = 100;
    srv_start_lim(7640, &lim);
    ch_open(7640);
    /* A request without a deadline gets the server's. */
    ck_assert_int_eq(call_full(&a, RPC_METHOD_CLAIM, "hold", 4, 0, 0, false, 0),
                     0);
    RUN_UNTIL(a.n == 1);
    ck_assert_uint_eq(F.seen[0].deadline_ms, 100);
    assert_status(&a, RPC_STATUS_DEADLINE_EXCEEDED, RPC_APPLIED_FALSE);
    ck_assert_uint_ge(a.at - F.seen[0].received_mono_ms, 100);
    ck_assert_uint_eq(stats().calls_expired, 1);
    /* Its own deadline wins (long enough that a loaded machine's slow
     * 150 ms below cannot reach it). */
    ck_assert_int_eq(
        call_full(&b, RPC_METHOD_CLAIM, "hold", 4, 2000, 0, false, 0), 0);
    RUN_UNTIL(F.nheld == 2);
    ck_assert_uint_eq(F.seen[1].deadline_ms, 2000);
    run_for(150);
    ck_assert_int_eq(b.n, 0);
    release_all();
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "hold");
    fx_close();

    /* deadline_ms 0: no deadline at all. */
    fx_init();
    rpc_limits_default(&lim);
    lim.deadline_ms = 0;
    srv_start_lim(7641, &lim);
    r = raw_connect(7641);
    raw_send_req(r, 1, "hold", 0);
    RUN_UNTIL(F.nheld == 1);
    ck_assert_uint_eq(F.seen[0].deadline_ms, 0);
    run_for(200);
    ck_assert_uint_eq(r->in_len, 0);
    release_all();
    raw_expect_ok(r, 1, "hold");
    ck_assert_uint_eq(stats().calls_expired, 0);
    fx_close();
}
END_TEST

START_TEST(deadline_through_the_channel)
{
    struct ans a = {0}, b = {0};

    fx_init();
    srv_start(7619);
    ch_open(7619);
    ck_assert_int_eq(
        call_full(&a, RPC_METHOD_CLAIM, "hold", 4, 100, 2000, false, 0), 0);
    RUN_UNTIL(a.n == 1);
    assert_status(&a, RPC_STATUS_DEADLINE_EXCEEDED, RPC_APPLIED_FALSE);
    ck_assert_uint_eq(a.call_id, F.seen[0].call_id);
    ck_assert_uint_ge(a.at - F.seen[0].received_mono_ms, 100);
    release(0);
    call_text(&b, "after", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "after");
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

/* ------------------------------------------------------------------------
 * Channel errors
 * ---------------------------------------------------------------------- */

START_TEST(channel_connect_refused)
{
    struct ans a = {0}, b = {0};

    fx_init();
    ch_open(PORT_NONE); /* lazy: opening does not connect */
    call_text(&a, "x", 2000);
    call_text(&b, "y", 2000);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 2);
    RUN_UNTIL(a.n == 1 && b.n == 1);
    assert_failed(&a, RPC_E_CONNECT, false);
    assert_failed(&b, RPC_E_CONNECT, false);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(b.n, 1);
    fx_close();
}
END_TEST

START_TEST(channel_lost_then_reconnects)
{
    struct ans a = {0}, b = {0};

    fx_init();
    lis_start(7621, LIS_CLOSE);
    ch_open(7621);
    call_text(&a, "x", 2000);
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_LOST, true);
    ck_assert_uint_eq(F.lis_frames, 1);
    ck_assert_uint_eq(F.lis_last_deadline, 2000);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    /* The next call reconnects. */
    F.lis_mode = LIS_ECHO;
    call_text(&b, "y", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "y");
    ck_assert_uint_eq(F.accepts, 2);
    ck_assert_uint_eq(b.call_id, F.lis_last_call_id);
    ck_assert_uint_eq(b.node_id, 42);
    ck_assert(b.has_boot_id);
    ck_assert_uint_eq(b.boot_id[0], 0x5a);
    ck_assert_int_eq(a.n, 1);
    fx_close();
}
END_TEST

START_TEST(channel_timeout)
{
    struct ans a = {0};
    uint64_t t0;

    fx_init();
    lis_start(7622, LIS_SILENT);
    ch_open(7622);
    t0 = now_ms();
    ck_assert_int_eq(
        call_full(&a, RPC_METHOD_CLAIM, "x", 1, 5000, 100, false, 0), 0);
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_TIMEOUT, true);
    ck_assert_msg(a.at - t0 >= 100 && a.at - t0 < 1000,
                  "timed out after %" PRIu64 " ms", a.at - t0);
    ck_assert_uint_eq(F.lis_last_deadline, 5000); /* explicit one kept */
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    fx_close();
}
END_TEST

START_TEST(channel_timeout_then_late_answer)
{
    struct ans a = {0}, b = {0};

    fx_init();
    srv_start(7623);
    ch_open(7623);
    ck_assert_int_eq(
        call_full(&a, RPC_METHOD_CLAIM, "hold", 4, 5000, 100, false, 0), 0);
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_TIMEOUT, true);
    /* The server's answer comes after the timeout: dropped, and the
     * channel goes on working. */
    release(0);
    call_text(&b, "later", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "later");
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

static void check_protocol(unsigned port, enum lis_mode mode)
{
    struct ans a = {0}, b = {0};
    struct rpc_limits lim;

    fx_init();
    lis_start(port, mode);
    rpc_limits_default(&lim);
    lim.frame_max = 1024; /* LIS_BIG's answer is over it */
    ch_open_lim(port, &lim);
    call_text(&a, "x", 2000);
    call_text(&b, "y", 2000);
    RUN_UNTIL(a.n == 1 && b.n == 1);
    assert_failed(&a, RPC_E_PROTOCOL, true);
    assert_failed(&b, RPC_E_PROTOCOL, true);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(b.n, 1);
    fx_close();
}

START_TEST(channel_protocol_garbage)
{
    check_protocol(7624, LIS_GARBAGE);
}
END_TEST

START_TEST(channel_protocol_error_frame)
{
    check_protocol(7625, LIS_ERRFRAME);
}
END_TEST

START_TEST(channel_protocol_answer_over_frame_max)
{
    check_protocol(7642, LIS_BIG);
}
END_TEST

START_TEST(channel_protocol_request_from_server)
{
    check_protocol(7643, LIS_REQUEST);
}
END_TEST

START_TEST(channel_close_fails_pending)
{
    struct ans a[3];

    memset(a, 0, sizeof a);
    fx_init();
    srv_start(7626);
    ch_open(7626);
    for (unsigned i = 0; i < 3; i++) {
        call_text(&a[i], "hold", 5000);
    }
    RUN_UNTIL(F.nheld == 3);
    rpc_channel_close(F.ch);
    F.ch = NULL;
    RUN_UNTIL(n_answered(a, 3) == 3);
    for (unsigned i = 0; i < 3; i++) {
        assert_failed(&a[i], RPC_E_CLOSED, true);
    }
    RUN_UNTIL(stat_conns_open() == 0);
    /* The handler's replies for a closed connection are only frees. */
    release_all();
    run_for(50);
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(a[i].n, 1);
    }
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    fx_close();
}
END_TEST

START_TEST(channel_close_before_connect)
{
    struct ans a = {0};

    fx_init();
    srv_start(7627);
    ch_open(7627);
    call_text(&a, "x", 2000);
    rpc_channel_close(F.ch);
    F.ch = NULL;
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_CLOSED, false);
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(F.nserved, 0);
    fx_close();
}
END_TEST

static void close_channel_then(struct ans *x)
{
    (void)x;
    rpc_channel_close(F.ch);
    F.ch = NULL;
}

START_TEST(channel_close_inside_answer)
{
    struct ans a = {0}, b = {0};

    fx_init();
    srv_start(7628);
    ch_open(7628);
    call_text(&b, "hold", 5000);
    RUN_UNTIL(F.nheld == 1);
    a.then = close_channel_then;
    call_text(&a, "x", 5000);
    RUN_UNTIL(a.n == 1 && b.n == 1);
    assert_ok(&a, "x");
    assert_failed(&b, RPC_E_CLOSED, true);
    ck_assert_ptr_null(F.ch);
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(b.n, 1);
    /* The held call is replied once its connection is gone, while the
     * server is open (server_close_* cover a close with calls held). */
    RUN_UNTIL(stat_conns_open() == 0);
    release_all();
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    run_for(20); /* the call's deadline timer closes */
    fx_close();
}
END_TEST

/* ------------------------------------------------------------------------
 * Server close
 * ---------------------------------------------------------------------- */

/* rpc_server_close with three calls held by the handler: the channel's
 * calls are lost at once, the close callback runs only after the last
 * reply. With @deadlines every call has a deadline timer (150 ms, passing
 * while the server is closing); without, none has. */
static void check_server_close(unsigned port, bool deadlines)
{
    struct ans a[3];
    struct raw *r;

    struct rpc_limits lim;

    memset(a, 0, sizeof a);
    fx_init();
    rpc_limits_default(&lim);
    lim.deadline_ms = 0; /* no default deadline: no timer without one */
    srv_start_lim(port, &lim);
    ch_open(port);
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(call_full(&a[i], RPC_METHOD_CLAIM, "hold", 4,
                                   deadlines ? 150 : 0, 0, false, 0),
                         0);
    }
    RUN_UNTIL(F.nheld == 3);
    ck_assert_uint_eq(F.seen[0].deadline_ms, deadlines ? 150 : 0);
    ck_assert_uint_eq(stats().calls_in_flight, 3);
    rpc_server_close(F.srv, srv_close_cb, &F);
    F.srv = NULL;
    /* The connection is gone: the channel's calls are lost. */
    RUN_UNTIL(n_answered(a, 3) == 3);
    for (unsigned i = 0; i < 3; i++) {
        assert_failed(&a[i], RPC_E_LOST, true);
    }
    run_for(300);
    ck_assert(!F.srv_closed);
    release(0);
    release(1);
    run_for(50);
    ck_assert(!F.srv_closed);
    ck_assert_uint_eq(held_open(), 1);
    release(2);
    RUN_UNTIL(F.srv_closed);
    ck_assert_uint_eq(F.srv_close_calls, 1);
    /* Nobody listens any more. */
    r = raw_connect_async(port);
    RUN_UNTIL(r->connect_done);
    ck_assert_int_eq(r->connect_status, UV_ECONNREFUSED);
    fx_close();
}

START_TEST(server_close_waits_for_replies)
{
    check_server_close(7630, false);
}
END_TEST

START_TEST(server_close_waits_for_replies_with_deadlines)
{
    check_server_close(7638, true);
}
END_TEST

START_TEST(server_restart_channel_reconnects)
{
    struct ans a = {0}, b = {0}, c = {0};

    fx_init();
    srv_start(7631);
    ch_open(7631);
    call_text(&a, "one", 2000);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "one");
    rpc_server_close(F.srv, srv_close_cb, &F);
    F.srv = NULL;
    RUN_UNTIL(F.srv_closed);
    run_for(50);
    /* Nobody there: not sent. */
    call_text(&b, "two", 2000);
    RUN_UNTIL(b.n == 1);
    assert_failed(&b, RPC_E_CONNECT, false);
    /* Back again: the channel reconnects. */
    F.srv_close_calls = 0;
    srv_start(7631);
    call_text(&c, "three", 2000);
    RUN_UNTIL(c.n == 1);
    assert_ok(&c, "three");
    ck_assert_uint_eq(stats().conns_accepted, 1);
    fx_close();
}
END_TEST

/* ------------------------------------------------------------------------
 * More channel edges: synchronous connect errors, a connect that hangs,
 * callbacks that close or call again
 * ---------------------------------------------------------------------- */

START_TEST(channel_connect_fails_at_once)
{
    struct ans a = {0};

    fx_init();
    /* A valid IPv4 address that connect() refuses synchronously
     * (ENETUNREACH): the callback still must not run from inside
     * rpc_channel_call. */
    snprintf(F.ch_addr, sizeof F.ch_addr, "255.255.255.255:7633");
    {
        char err[ERR_MSG_SIZE] = "";
        struct rpc_limits lim;
        rpc_limits_default(&lim);
        ck_assert_int_eq(rpc_channel_open(&F.ch, &F.loop, F.ch_addr, &lim, err),
                         0);
    }
    ck_assert_int_eq(
        call_full(&a, RPC_METHOD_STATUS, "x", 1, 0, 2000, false, 0), 0);
    ck_assert_msg(a.n == 0,
                  "the answer callback ran inside rpc_channel_call (rv %d)",
                  a.rv);
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_CONNECT, false);
    fx_close();
}
END_TEST

START_TEST(channel_timeout_while_connecting)
{
    struct sockaddr_in sa;
    struct raw *f1, *f2, *probe;
    struct ans a = {0};
    int fd, one = 1;

    fx_init();
    /* A listener that never accepts, with a backlog of 1: two connections
     * fill its queue, and the kernel drops the SYN of the next, whose
     * connect then hangs. */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one),
                     0);
    ck_assert_int_eq(uv_ip4_addr("127.0.0.1", 7634, &sa), 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    f1 = raw_connect(7634);
    f2 = raw_connect(7634);
    probe = raw_connect_async(7634);
    run_for(200);
    ck_assert_msg(!probe->connect_done, "precondition: connect did not hang");
    raw_close(probe);
    /* The channel's connect hangs too: the timeout fires before anything
     * was handed to a socket, so not sent. */
    ch_open(7634);
    call_text(&a, "x", 150);
    RUN_UNTIL(a.n == 1);
    assert_failed(&a, RPC_E_TIMEOUT, false);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    raw_close(f1);
    raw_close(f2);
    fx_close();
    close(fd);
}
END_TEST

static void retry_then(struct ans *x)
{
    /* chain_left is the index of the answer to use for the retry. */
    if (x->chain_left > 0) {
        call_text(&chain_a[x->chain_left], "retry", 2000);
    }
}

START_TEST(channel_retry_inside_error_callback)
{
    memset(chain_a, 0, sizeof chain_a);
    fx_init();
    ch_open(PORT_NONE);
    chain_a[0].then = retry_then;
    chain_a[0].chain_left = 1;
    call_text(&chain_a[0], "x", 2000);
    RUN_UNTIL(chain_a[0].n == 1 && chain_a[1].n == 1);
    assert_failed(&chain_a[0], RPC_E_CONNECT, false);
    assert_failed(&chain_a[1], RPC_E_CONNECT, false);
    run_for(50);
    ck_assert_int_eq(chain_a[0].n, 1);
    ck_assert_int_eq(chain_a[1].n, 1);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

START_TEST(channel_retry_inside_protocol_callback)
{
    memset(chain_a, 0, sizeof chain_a);
    fx_init();
    lis_start(7639, LIS_GARBAGE);
    ch_open(7639);
    chain_a[0].then = retry_then;
    chain_a[0].chain_left = 1;
    call_text(&chain_a[0], "x", 2000);
    RUN_UNTIL(chain_a[0].n == 1 && chain_a[1].n == 1);
    assert_failed(&chain_a[0], RPC_E_PROTOCOL, true);
    /* The retry goes out on a fresh connection (the bad one is dropped),
     * so it meets the same garbage: PROTOCOL again, not LOST from being
     * written to the connection that was being closed. */
    assert_failed(&chain_a[1], RPC_E_PROTOCOL, true);
    ck_assert_uint_eq(F.accepts, 2);
    ck_assert_uint_eq(F.lis_frames, 2);
    ck_assert_uint_eq(rpc_channel_pending(F.ch), 0);
    fx_close();
}
END_TEST

START_TEST(channel_close_inside_error_callback)
{
    struct ans a = {0}, b = {0};

    fx_init();
    ch_open(PORT_NONE);
    a.then = close_channel_then;
    call_text(&a, "x", 2000);
    call_text(&b, "y", 2000);
    RUN_UNTIL(a.n == 1 && b.n == 1);
    assert_failed(&a, RPC_E_CONNECT, false);
    /* Failed by the close (or by the connect): once, not sent. */
    ck_assert_int_eq(b.n, 1);
    ck_assert_msg(b.rv == RPC_E_CLOSED || b.rv == RPC_E_CONNECT, "rv %d", b.rv);
    ck_assert(!b.sent);
    ck_assert_ptr_null(F.ch);
    run_for(50);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(b.n, 1);
    fx_close();
}
END_TEST

START_TEST(channel_answer_then_close_by_peer)
{
    struct ans a = {0}, b = {0};

    fx_init();
    lis_start(7636, LIS_ECHO);
    ch_open(7636);
    call_text(&a, "x", 2000);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "x");
    /* The peer closes right after answering: nothing pending is lost and
     * the next call reconnects. */
    for (unsigned i = 0; i < RAW_MAX; i++) {
        if (F.raws[i].used && F.raws[i].listener_side) {
            raw_close(&F.raws[i]);
        }
    }
    run_for(50);
    call_text(&b, "y", 2000);
    RUN_UNTIL(b.n == 1);
    assert_ok(&b, "y");
    ck_assert_uint_eq(F.accepts, 2);
    ck_assert_int_eq(a.n, 1);
    fx_close();
}
END_TEST

/* ------------------------------------------------------------------------
 * Server edges
 * ---------------------------------------------------------------------- */

START_TEST(server_close_inside_handler)
{
    struct ans a = {0};

    fx_init();
    srv_start(7635);
    ch_open(7635);
    call_text(&a, "closesrv", 2000);
    RUN_UNTIL(F.srv_closed && a.n == 1);
    ck_assert_ptr_null(F.srv);
    ck_assert_uint_eq(F.srv_close_calls, 1);
    /* The reply came after the close: dropped, so the call is lost. */
    assert_failed(&a, RPC_E_LOST, true);
    fx_close();
}
END_TEST

START_TEST(backpressure_pauses_reading)
{
    enum { BATCH1 = 40, BATCH2 = 5 };
    struct rpc_limits lim;
    struct raw *r;
    unsigned served;

    fx_init();
    F.big_reply = 256 * 1024;
    rpc_limits_default(&lim);
    lim.out_max = 64 * 1024;
    srv_start_lim(7637, &lim);
    r = raw_connect(7637);
    r->count_only = true;
    /* The client does not read: 11 MiB of answers fill the socket buffers
     * and the server's queue passes out_max, so it stops reading and
     * serving (how many it served before depends on how the requests
     * were split into reads). */
    ck_assert_int_eq(uv_read_stop((uv_stream_t *)&r->tcp), 0);
    for (unsigned i = 1; i <= BATCH1 + BATCH2; i++) {
        raw_send_req(r, i, "big", 0);
    }
    run_for(300);
    served = F.nserved;
    run_for(300);
    ck_assert_msg(F.nserved == served, "served %u then %u while over out_max",
                  served, F.nserved);
    ck_assert_msg(served > 0 && served < BATCH1 + BATCH2, "served %u of %u",
                  served, BATCH1 + BATCH2);
    ck_assert_uint_eq(r->nframes, 0);
    /* The client reads again: the queue drains, reading resumes, every
     * answer arrives once and in order. */
    ck_assert_int_eq(
        uv_read_start((uv_stream_t *)&r->tcp, raw_alloc_cb, raw_read_cb), 0);
    RUN_UNTIL_MS(r->nframes == BATCH1 + BATCH2, 10000);
    ck_assert_uint_eq(F.nserved, BATCH1 + BATCH2);
    ck_assert_uint_eq(r->last_call_id, BATCH1 + BATCH2);
    ck_assert(!r->eof);
    fx_close();
}
END_TEST

Suite *conn_suite(void)
{
    Suite *s = suite_create("conn");
    TCase *tc;

    tc = tcase_create("setup");
    tcase_add_test(tc, addr_parse);
    tcase_add_test(tc, setup_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("calls");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, echo);
    tcase_add_test(tc, identity_fields);
    tcase_add_test(tc, deadline_and_forwarded_reach_the_call);
    tcase_add_test(tc, cluster_id_pin);
    tcase_add_test(tc, out_of_order);
    tcase_add_test(tc, large_body);
    tcase_add_test(tc, chained_calls_from_the_callback);
    tcase_add_test(tc, server_without_log_hook);
    tcase_add_test(tc, many_pending_calls);
    tcase_add_test(tc, error_replies_and_replaced_replies);
    suite_add_tcase(s, tc);

    tc = tcase_create("limits");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, calls_max_per_connection);
    tcase_add_test(tc, channel_busy);
    tcase_add_test(tc, bad_request_is_refused_before_queueing);
    tcase_add_test(tc, conns_max_per_server);
    tcase_add_test(tc, many_connections_closed_in_any_order);
    tcase_add_test(tc, channel_refused_by_conns_max);
    tcase_add_test(tc, idle_connections_close);
    tcase_add_test(tc, idle_timer_restarts_on_frames);
    tcase_add_test(tc, idle_timer_restarts_on_refused_frames);
    tcase_add_test(tc, frame_max_and_empty_frames);
    tcase_add_test(tc, garbage_closes_only_its_connection);
    tcase_add_test(tc, split_and_coalesced_frames);
    tcase_add_test(tc, backpressure_pauses_reading);
    suite_add_tcase(s, tc);

    tc = tcase_create("deadlines");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, deadline_before_sent);
    tcase_add_test(tc, deadline_after_mark_sent);
    tcase_add_test(tc, deadline_through_the_channel);
    tcase_add_test(tc, server_default_deadline);
    suite_add_tcase(s, tc);

    tc = tcase_create("channel");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, channel_connect_refused);
    tcase_add_test(tc, channel_lost_then_reconnects);
    tcase_add_test(tc, channel_timeout);
    tcase_add_test(tc, channel_timeout_then_late_answer);
    tcase_add_test(tc, channel_protocol_garbage);
    tcase_add_test(tc, channel_protocol_error_frame);
    tcase_add_test(tc, channel_protocol_answer_over_frame_max);
    tcase_add_test(tc, channel_protocol_request_from_server);
    tcase_add_test(tc, channel_close_fails_pending);
    tcase_add_test(tc, channel_close_before_connect);
    tcase_add_test(tc, channel_close_inside_answer);
    tcase_add_test(tc, channel_call_inside_closed_callback);
    tcase_add_test(tc, channel_connect_fails_at_once);
    tcase_add_test(tc, channel_timeout_while_connecting);
    tcase_add_test(tc, channel_retry_inside_error_callback);
    tcase_add_test(tc, channel_retry_inside_protocol_callback);
    tcase_add_test(tc, channel_close_inside_error_callback);
    tcase_add_test(tc, channel_answer_then_close_by_peer);
    suite_add_tcase(s, tc);

    tc = tcase_create("server_close");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, server_close_waits_for_replies);
    tcase_add_test(tc, server_close_waits_for_replies_with_deadlines);
    tcase_add_test(tc, server_restart_channel_reconnects);
    tcase_add_test(tc, server_close_inside_handler);
    suite_add_tcase(s, tc);
    return s;
}
