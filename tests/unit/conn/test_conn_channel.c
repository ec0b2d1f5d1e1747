/* test_conn_channel: the client side of src/rpc (rpc_channel.c) over
 * loopback sockets on 127.0.0.1: refused, lost, slow and misbehaving
 * servers (a raw listener, conn_raw.c), the channel's own limit, its close,
 * and callbacks that call again or close. Fixture: conn_helpers.h. */
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
 * Channel limits
 * ---------------------------------------------------------------------- */

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

/* A first call and its retry (test_conn.c's chains have their own). */
static struct ans chain_a[2];

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

Suite *conn_channel_suite(void)
{
    Suite *s = suite_create("conn_channel");
    TCase *tc;

    tc = tcase_create("limits");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, channel_busy);
    tcase_add_test(tc, channel_refused_by_conns_max);
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
    return s;
}
