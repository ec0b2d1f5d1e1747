/* test_conn_server: the server side of src/rpc (rpc_server.c) over
 * loopback sockets on 127.0.0.1: its limits (calls per connection,
 * connections, idle time), the deadlines it answers itself, and its close.
 * Fixture: conn_helpers.h. */
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

#include "conn_helpers.h"

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

/* Deadlines that arrive out of order, some calls answered in time: each
 * expired call is answered no earlier than its deadline and not late,
 * earliest first, and a call answered in time never expires (the server
 * keeps one timer over all of them; its earliest deadline moves both
 * ways). The first call sent has the latest deadline, so the timer must
 * be re-armed earlier for those behind it. */
START_TEST(deadlines_out_of_order)
{
    enum { N = 16, GAP = 40, FIRST = 100, LATE = 200 };
    uint64_t dl[N], at[N];
    bool done[N] = {false};
    unsigned expired = 0, ok = 0;
    uint64_t last_dl = 0;
    struct raw *r;

    fx_init();
    srv_start(7360);
    r = raw_connect(7360);
    for (unsigned i = 0; i < N; i++) {
        /* i = 0 the latest; the rest scrambled (7 is prime to N). */
        dl[i] = FIRST + (uint64_t)GAP * ((N - 1 + 7 * i) % N);
        raw_send_req(r, 100 + i, "hold", dl[i]);
    }
    RUN_UNTIL(F.nheld == N);
    for (unsigned i = 0; i < N; i++) {
        ck_assert_uint_eq(F.seen[i].call_id, 100 + i);
        ck_assert_uint_eq(F.seen[i].deadline_ms, dl[i]);
    }
    /* Every fourth answered now, well before any deadline (the earliest
     * among them: its early arm of the timer must expire nothing). */
    for (unsigned i = 3; i < N; i += 4) {
        release(i);
    }
    while (expired + ok < N) {
        unsigned i;

        RUN_UNTIL_MS(raw_has_frame(r), 5000);
        raw_take(r);
        ck_assert_uint_ge(r->v.call_id, 100);
        i = (unsigned)(r->v.call_id - 100);
        ck_assert_uint_lt(i, N);
        ck_assert(!done[i]);
        done[i] = true;
        if (i % 4 == 3) {
            ck_assert_int_eq(r->v.status, RPC_STATUS_OK);
            ok++;
            continue;
        }
        ck_assert_msg(r->v.status == RPC_STATUS_DEADLINE_EXCEEDED,
                      "call %u: status %s", i, rpc_status_name(r->v.status));
        at[i] = r->data_at - F.seen[i].received_mono_ms;
        ck_assert_msg(at[i] >= dl[i] && at[i] < dl[i] + LATE,
                      "call %u: deadline %" PRIu64
                      " ms, answered after "
                      "%" PRIu64 " ms",
                      i, dl[i], at[i]);
        ck_assert_msg(dl[i] > last_dl,
                      "call %u (%" PRIu64
                      " ms) after "
                      "one of %" PRIu64 " ms",
                      i, dl[i], last_dl);
        last_dl = dl[i];
        expired++;
    }
    ck_assert_uint_eq(ok, N / 4);
    ck_assert_uint_eq(stats().calls_expired, N - N / 4);
    /* Nothing more comes: the released calls' deadlines pass quietly. */
    run_for(2 * GAP);
    ck_assert_uint_eq(r->pos, r->in_len);
    release_all();
    ck_assert_uint_eq(stats().calls_in_flight, 0);
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

/* A frame started and never finished is closed after frame_ms, whatever
 * the idle limit; the server goes on serving. */
START_TEST(unfinished_frame_closes)
{
    struct rpc_limits lim;
    struct ans a = {0};
    struct raw *r;
    size_t len;
    uint8_t *fr;
    uint64_t t;

    fx_init();
    rpc_limits_default(&lim);
    lim.frame_ms = 200;
    lim.idle_ms = 0;
    srv_start_lim(7651, &lim);
    r = raw_connect(7651);
    fr = req_frame(1, "half", 4, 0, &len);
    raw_send(r, fr, len / 2);
    t = now_ms();
    RUN_UNTIL(r->eof);
    ck_assert_msg(r->eof_at - t >= 180 && r->eof_at - t < 2000,
                  "closed after %" PRIu64 " ms", r->eof_at - t);
    ck_assert_uint_eq(r->in_len, 0);
    ck_assert_uint_eq(stats().frames_timed_out, 1);
    ck_assert_msg(strstr(F.last_log, "is not complete") != NULL, "%s",
                  F.last_log);
    /* whole frames, however slow between them, are fine */
    ch_open(7651);
    run_for(300);
    call_text(&a, "still", 2000);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "still");
    ck_assert_uint_eq(stats().frames_timed_out, 1);
    free(fr);
    fx_close();
}
END_TEST

/* The idle time counts from the last whole frame: a peer that dribbles
 * the bytes of a frame does not keep its connection. */
START_TEST(idle_counts_from_whole_frames)
{
    struct rpc_limits lim;
    struct raw *r;
    size_t len, i;
    uint8_t *fr;
    uint64_t t;

    fx_init();
    rpc_limits_default(&lim);
    lim.idle_ms = 300;
    lim.frame_ms = 0;
    srv_start_lim(7652, &lim);
    r = raw_connect(7652);
    raw_send_req(r, 1, "one", 0);
    raw_expect_ok(r, 1, "one");
    t = now_ms();
    fr = req_frame(2, "dribble-dribble-dribble-dribble-dribble", 39, 0, &len);
    for (i = 0; i < len - 1 && !r->eof; i++) {
        raw_send(r, fr + i, 1);
        run_for(40);
    }
    RUN_UNTIL(r->eof);
    /* closed while it was still dribbling (~40 ms a byte for 2 s) */
    ck_assert_msg(i < len - 1, "the dribble kept the connection open");
    ck_assert_msg(r->eof_at - t >= 290 && r->eof_at - t < 1500,
                  "closed %" PRIu64 " ms after the last whole frame",
                  r->eof_at - t);
    free(fr);
    fx_close();
}
END_TEST

/* Over mem_max the connection holding the most is closed (here the one
 * growing its buffer to a 1 MiB frame), the others stay. */
START_TEST(memory_over_the_limit_closes_the_largest)
{
    struct rpc_limits lim;
    struct raw *small, *big;
    struct ans a = {0};
    size_t len;
    uint8_t *fr;
    char *body = malloc(900u << 10);

    fx_init();
    rpc_limits_default(&lim);
    lim.mem_max = 512u << 10;
    srv_start_lim(7653, &lim);
    small = raw_connect(7653);
    raw_send_req(small, 1, "small", 0);
    raw_expect_ok(small, 1, "small");
    memset(body, 'b', 900u << 10);
    fr = req_frame(2, body, 900u << 10, 0, &len);
    big = raw_connect(7653);
    raw_send(big, fr, len - 10);
    RUN_UNTIL(big->eof);
    ck_assert_uint_eq(stats().conns_over_memory, 1);
    ck_assert_msg(strstr(F.last_log, "holding the most memory") != NULL, "%s",
                  F.last_log);
    ck_assert(!small->eof);
    raw_send_req(small, 3, "after", 0);
    raw_expect_ok(small, 3, "after");
    ck_assert_uint_le(stats().mem_used, lim.mem_max);
    ch_open(7653);
    call_text(&a, "new", 2000);
    RUN_UNTIL(a.n == 1);
    assert_ok(&a, "new");
    free(fr);
    free(body);
    fx_close();
}
END_TEST

/* Local calls (rpc_server_call_local): the server's own handler, its
 * deadline timer and close rules, the answer to a callback. */
struct local_ans
{
    int n;
    enum rpc_status status;
    enum rpc_applied applied;
    char body[64];
    size_t body_len;
};

static void local_cb(void *arg,
                     const struct rpc_call *call,
                     const struct rpc_reply *r)
{
    struct local_ans *a = arg;

    ck_assert_ptr_nonnull(call);
    a->n++;
    a->status = r->status;
    a->applied = r->applied;
    a->body_len = r->body_len < sizeof a->body ? r->body_len : 0;
    if (a->body_len > 0) {
        memcpy(a->body, r->body, a->body_len);
    }
}

static int local_call(const char *body,
                      uint64_t deadline_ms,
                      struct local_ans *a)
{
    struct envelope_view v;
    int rv;

    envelope_view_init(&v);
    v.method = RPC_METHOD_CLAIM;
    v.direction = RPC_REQUEST;
    v.deadline_ms = deadline_ms;
    v.body = (const uint8_t *)body;
    v.body_len = strlen(body);
    rv = rpc_server_call_local(F.srv, &v, NULL, local_cb, a);
    envelope_view_close(&v);
    return rv;
}

START_TEST(local_calls)
{
    struct local_ans now = {0}, hold = {0}, mark = {0}, later = {0};
    struct local_ans closing = {0};

    fx_init();
    srv_start(7655);
    /* Answered by the handler at once: before the call returns. */
    ck_assert_int_eq(local_call("x1", 0, &now), 0);
    ck_assert_int_eq(now.n, 1);
    ck_assert_int_eq(now.status, RPC_STATUS_OK);
    ck_assert_uint_eq(now.body_len, 2);
    ck_assert_int_eq(memcmp(now.body, "x1", 2), 0);
    /* Held past its deadline: DEADLINE_EXCEEDED, applied false before
     * rpc_call_mark_sent and unknown after; the late reply is dropped. */
    ck_assert_int_eq(local_call("hold", 50, &hold), 0);
    ck_assert_int_eq(local_call("mark", 50, &mark), 0);
    ck_assert_uint_eq(F.seen[1].deadline_ms, 50);
    RUN_UNTIL(hold.n == 1 && mark.n == 1);
    ck_assert_int_eq(hold.status, RPC_STATUS_DEADLINE_EXCEEDED);
    ck_assert_int_eq(hold.applied, RPC_APPLIED_FALSE);
    ck_assert_int_eq(mark.status, RPC_STATUS_DEADLINE_EXCEEDED);
    ck_assert_int_eq(mark.applied, RPC_APPLIED_UNKNOWN);
    ck_assert_uint_eq(stats().calls_expired, 2);
    release(0);
    release(1);
    run_for(20);
    ck_assert_int_eq(hold.n, 1);
    ck_assert_int_eq(mark.n, 1);
    /* No deadline given: the server's default; answered when released. */
    ck_assert_int_eq(local_call("hold-later", 0, &later), 0);
    ck_assert_uint_eq(F.seen[3].deadline_ms, 5000);
    run_for(20);
    ck_assert_int_eq(later.n, 0);
    release(2);
    ck_assert_int_eq(later.n, 1);
    ck_assert_int_eq(later.status, RPC_STATUS_OK);
    ck_assert_uint_eq(stats().calls_in_flight, 0);
    /* A held local call keeps a closing server open; a new one is
     * refused (and its callback never runs). */
    ck_assert_int_eq(local_call("hold-close", 0, &later), 0);
    rpc_server_close(F.srv, srv_close_cb, &F);
    ck_assert_int_eq(local_call("x2", 0, &closing), RPC_E_CLOSED);
    run_for(30);
    ck_assert(!F.srv_closed);
    release(3);
    RUN_UNTIL(F.srv_closed);
    F.srv = NULL;
    ck_assert_int_eq(closing.n, 0);
    ck_assert_int_eq(later.n, 2);
    fx_close();
}
END_TEST

Suite *conn_server_suite(void)
{
    Suite *s = suite_create("conn_server");
    TCase *tc;

    tc = tcase_create("limits");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, calls_max_per_connection);
    tcase_add_test(tc, bad_request_is_refused_before_queueing);
    tcase_add_test(tc, conns_max_per_server);
    tcase_add_test(tc, many_connections_closed_in_any_order);
    tcase_add_test(tc, idle_connections_close);
    tcase_add_test(tc, idle_timer_restarts_on_frames);
    tcase_add_test(tc, idle_timer_restarts_on_refused_frames);
    tcase_add_test(tc, unfinished_frame_closes);
    tcase_add_test(tc, idle_counts_from_whole_frames);
    tcase_add_test(tc, memory_over_the_limit_closes_the_largest);
    suite_add_tcase(s, tc);

    tc = tcase_create("deadlines");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, deadline_before_sent);
    tcase_add_test(tc, deadline_after_mark_sent);
    tcase_add_test(tc, deadline_through_the_channel);
    tcase_add_test(tc, server_default_deadline);
    tcase_add_test(tc, deadlines_out_of_order);
    suite_add_tcase(s, tc);

    tc = tcase_create("server_close");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, server_close_waits_for_replies);
    tcase_add_test(tc, server_close_waits_for_replies_with_deadlines);
    tcase_add_test(tc, server_restart_channel_reconnects);
    tcase_add_test(tc, server_close_inside_handler);
    tcase_add_test(tc, local_calls);
    suite_add_tcase(s, tc);
    return s;
}
