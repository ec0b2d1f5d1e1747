/* conn_helpers.c: the unit-conn fixture's loop, server handler and channel
 * answers (conn_helpers.h). */
#include "conn_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fx F;

void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    F.timed_out = true;
}

static void flag_timer_cb(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

static void flag_close_cb(uv_handle_t *h)
{
    *(bool *)h->data = true;
}

/* Let the loop run for @ms (whatever happens meanwhile). */
void run_for(unsigned ms)
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

uint64_t now_ms(void)
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

void fx_init(void)
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

void srv_close_cb(void *arg)
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

/* Close everything, check nothing was left open, free the loop. */
void fx_close(void)
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
void serve_cb(void *arg, struct rpc_call *call, struct envelope_view *req)
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
void release(unsigned i)
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

void release_all(void)
{
    for (unsigned i = 0; i < F.nheld; i++) {
        if (F.held[i].call != NULL) {
            release(i);
        }
    }
}

unsigned held_open(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < F.nheld; i++) {
        n += F.held[i].call != NULL;
    }
    return n;
}

void srv_start_lim(unsigned port, const struct rpc_limits *lim)
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

void srv_start(unsigned port)
{
    srv_start_lim(port, NULL);
}

struct rpc_server_stats stats(void)
{
    struct rpc_server_stats s;

    memset(&s, 0xa5, sizeof s);
    rpc_server_stats(F.srv, &s);
    return s;
}

uint64_t stat_conns_open(void)
{
    return stats().conns_open;
}

/* ------------------------------------------------------------------------
 * Client side: a channel and answers
 * ---------------------------------------------------------------------- */

void ch_open_lim(unsigned port, const struct rpc_limits *lim)
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

void ch_open(unsigned port)
{
    ch_open_lim(port, NULL);
}

void answer_cb(void *arg, int rv, bool sent, struct envelope_view *ans)
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

int call_full(struct ans *a,
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
void call_pinned(struct ans *a, const char *body, const uint8_t *pin)
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
void call_text(struct ans *a, const char *body, uint64_t timeout_ms)
{
    ck_assert_int_eq(call_full(a, RPC_METHOD_STATUS, body, strlen(body), 0,
                               timeout_ms, false, 0),
                     0);
    ck_assert_int_eq(a->n, 0);
}

unsigned n_answered(const struct ans *a, unsigned n)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        k += (unsigned)a[i].n;
    }
    return k;
}

void assert_ok(const struct ans *a, const char *body)
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

void assert_failed(const struct ans *a, int rv, bool sent)
{
    ck_assert_int_eq(a->n, 1);
    ck_assert_msg(a->rv == rv, "rv %d (%s), expected %d (%s)", a->rv,
                  rpc_conn_strerror(a->rv), rv, rpc_conn_strerror(rv));
    ck_assert_int_eq(a->sent, sent);
    ck_assert_ptr_null(a->body);
}

/* An answer made by the layer (or a replaced reply): exact status and
 * applied, some error text, no body. */
void assert_status(const struct ans *a, enum rpc_status st, enum rpc_applied ap)
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
