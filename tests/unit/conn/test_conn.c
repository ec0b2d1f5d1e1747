/* test_conn: the shared connection of src/rpc (conn.c) end to end, an
 * rpc_server and an rpc_channel in one loop over real loopback sockets on
 * 127.0.0.1: setup errors, calls both ways, and what the read buffer and
 * the write queue must stand (frame limits, garbage, split and coalesced
 * frames, backpressure). The server's limits and deadlines are in
 * test_conn_server.c, the channel's errors in test_conn_channel.c; the
 * fixture (conn_helpers.h) is shared.
 *
 * The peer of conn.c is either conn.c itself or a raw uv_tcp client or
 * listener (conn_raw.c), which sees and sends the exact bytes (error
 * frames, second answers, garbage). The teardown closes everything and
 * requires uv_loop_close to succeed, so a handle left open by conn.c fails
 * the test; ASan (detect_leaks=1) catches leaks, double frees and use after
 * free of calls and channels. */
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
 * Frames: the read buffer and the write queue
 * ---------------------------------------------------------------------- */

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

    tc = tcase_create("frames");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, frame_max_and_empty_frames);
    tcase_add_test(tc, garbage_closes_only_its_connection);
    tcase_add_test(tc, split_and_coalesced_frames);
    tcase_add_test(tc, backpressure_pauses_reading);
    suite_add_tcase(s, tc);
    return s;
}
