/* unit-transport: the Raft transport (src/raft/transport.c) in plaintext,
 * over loopback sockets, with this test playing raft_uv on one side and a
 * scripted peer on the other.
 *
 * The outbound cases are about direct links (transport.h): raft gets the
 * TCP socket itself, nothing ever reads it, and bytes a peer sends back
 * there (raft_uv's protocol has none) reach neither raft nor the
 * transport. The inbound case checks that an accepted link still goes
 * through the socketpair and its framing check. The scripted peers listen
 * on a port the kernel chooses; the transport's own listener on
 * 127.0.0.1:7351 (in the unit suites' range 7300-7699;
 * once_safety.py's cluster uses 9100 and up). SIGPIPE is
 * ignored, as onced does: a write to a closed socket fails with EPIPE. */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "raft/transport.h"

/* Our Raft address: named in our handshake, and where the transport
 * listens in the inbound case. */
#define OUR_ADDR "127.0.0.1:7351"
#define GARBAGE  (256u * 1024)

/* raft_uv_tcp's handshake as our transport sends it for id 1 at OUR_ADDR:
 * protocol 1, id, the address's padded length, the address. */
static size_t handshake(uint8_t *buf, uint64_t id, const char *addr)
{
    size_t alen = (strlen(addr) + 1 + 7) / 8 * 8;
    const uint64_t v[3] = {1, id, alen};

    memset(buf, 0, 24 + alen);
    for (unsigned i = 0; i < 3; i++) {
        for (unsigned k = 0; k < 8; k++) {
            buf[8 * i + k] = (uint8_t)(v[i] >> (8 * k));
        }
    }
    memcpy(buf + 24, addr, strlen(addr));
    return 24 + alen;
}

/* --- the scripted peer ---------------------------------------------------- */

struct peer
{
    uv_tcp_t listener;
    uv_tcp_t conn;
    bool accepted;
    bool close_at_once; /* close the connection as soon as accepted */
    uint8_t got[4096];  /* what it read, up to its size */
    size_t n_got;
    bool eof;
    uv_write_t wreq;
    uint8_t *garbage;
    int port;
};

static uv_loop_t loop;
static struct peer peer;

static void peer_alloc(uv_handle_t *h, size_t want, uv_buf_t *b)
{
    static uint8_t buf[65536];

    (void)h;
    (void)want;
    *b = uv_buf_init((char *)buf, sizeof buf);
}

static void peer_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s;
    if (n < 0) {
        peer.eof = true;
        return;
    }
    if (n > 0 && peer.n_got < sizeof peer.got) {
        size_t k = (size_t)n < sizeof peer.got - peer.n_got
                       ? (size_t)n
                       : sizeof peer.got - peer.n_got;

        memcpy(peer.got + peer.n_got, b->base, k);
        peer.n_got += k;
    }
}

static void peer_garbage_written(uv_write_t *req, int status)
{
    (void)req;
    (void)status; /* cancelled at the close: the transport never reads */
}

static void peer_accept(uv_stream_t *l, int status)
{
    uv_buf_t b;

    ck_assert_int_eq(status, 0);
    ck_assert(!peer.accepted);
    (void)uv_tcp_init(&loop, &peer.conn);
    ck_assert_int_eq(uv_accept(l, (uv_stream_t *)&peer.conn), 0);
    peer.accepted = true;
    if (peer.close_at_once) {
        uv_close((uv_handle_t *)&peer.conn, NULL);
        return;
    }
    ck_assert_int_eq(
        uv_read_start((uv_stream_t *)&peer.conn, peer_alloc, peer_read), 0);
    /* Garbage at once: a huge AppendEntries preamble, then 0xff. */
    peer.garbage = malloc(GARBAGE);
    ck_assert_ptr_nonnull(peer.garbage);
    memset(peer.garbage, 0xff, GARBAGE);
    b = uv_buf_init((char *)peer.garbage, GARBAGE);
    ck_assert_int_eq(uv_write(&peer.wreq, (uv_stream_t *)&peer.conn, &b, 1,
                              peer_garbage_written),
                     0);
}

static void peer_start(bool close_at_once)
{
    struct sockaddr_in sa;
    struct sockaddr_storage ss;
    int len = sizeof ss;

    memset(&peer, 0, sizeof peer);
    peer.close_at_once = close_at_once;
    ck_assert_int_eq(uv_ip4_addr("127.0.0.1", 0, &sa), 0);
    (void)uv_tcp_init(&loop, &peer.listener);
    ck_assert_int_eq(
        uv_tcp_bind(&peer.listener, (const struct sockaddr *)&sa, 0), 0);
    ck_assert_int_eq(uv_listen((uv_stream_t *)&peer.listener, 4, peer_accept),
                     0);
    ck_assert_int_eq(
        uv_tcp_getsockname(&peer.listener, (struct sockaddr *)&ss, &len), 0);
    peer.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void peer_stop(void)
{
    uv_close((uv_handle_t *)&peer.listener, NULL);
    if (peer.accepted && !peer.close_at_once) {
        uv_close((uv_handle_t *)&peer.conn, NULL);
    }
}

/* --- this test as raft_uv ------------------------------------------------- */

static struct raft_uv_transport rt;
static struct raft_uv_connect creq;
static uv_stream_t *raft_stream; /* what the transport handed */
static int connect_status = 1;   /* 1: no callback yet */
static bool transport_closed;
static int write_status = 1;
static unsigned writes_done;
static uv_stream_t *accepted;
static uint8_t raft_got[4096];
static size_t raft_n_got;
static bool raft_eof;

static void on_connect(struct raft_uv_connect *req,
                       struct uv_stream_s *s,
                       int status)
{
    (void)req;
    connect_status = status;
    raft_stream = s;
    if (s != NULL) {
        s->data = &rt; /* as raft_uv does: the stream's data is raft's */
    }
}

static void on_transport_closed(struct raft_uv_transport *t)
{
    (void)t;
    transport_closed = true;
}

static void on_raft_closed(uv_handle_t *h)
{
    raft_free(h);
}

static void on_raft_write(uv_write_t *req, int status)
{
    write_status = status;
    writes_done++;
    free(req);
}

static int raft_write(const void *p, size_t n)
{
    uv_write_t *req = malloc(sizeof *req);
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);

    ck_assert_ptr_nonnull(req);
    return uv_write(req, raft_stream, &b, 1, on_raft_write);
}

static void raft_alloc(uv_handle_t *h, size_t want, uv_buf_t *b)
{
    static uint8_t buf[4096];

    (void)h;
    (void)want;
    *b = uv_buf_init((char *)buf, sizeof buf);
}

static void raft_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s;
    if (n < 0) {
        raft_eof = true;
        return;
    }
    if (n > 0 && raft_n_got + (size_t)n <= sizeof raft_got) {
        memcpy(raft_got + raft_n_got, b->base, (size_t)n);
        raft_n_got += (size_t)n;
    }
}

static void on_accepted(struct raft_uv_transport *t,
                        raft_id id,
                        const char *address,
                        struct uv_stream_s *s)
{
    (void)t;
    ck_assert_uint_eq(id, 2);
    ck_assert_str_eq(address, "127.0.0.1:9112");
    accepted = s;
    s->data = &rt;
    ck_assert_int_eq(uv_read_start(s, raft_alloc, raft_read), 0);
}

/* Run the loop until *@flag or 10 s. */
static bool run_until(const bool *flag)
{
    uint64_t deadline = uv_now(&loop) + 10000;

    while (!*flag && uv_now(&loop) < deadline) {
        (void)uv_run(&loop, UV_RUN_ONCE);
    }
    return *flag;
}

static bool connected, written, got_message, accepted_yet, refused_yet;

static void check_progress(uv_idle_t *idle)
{
    struct transport_stats st;

    (void)idle;
    transport_stats(&rt, &st);
    connected = connect_status != 1;
    written = writes_done > 0;
    accepted_yet = accepted != NULL;
    refused_yet = st.refused > 0 && raft_eof;
    got_message = peer.n_got >= 24 + 16 + 8 || peer.eof;
}

static uv_idle_t idle;

static void setup(void)
{
    struct transport_config cfg;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    memset(&cfg, 0, sizeof cfg);
    cfg.limits.message_max = RFRAME_MESSAGE_MAX_DEFAULT;
    cfg.limits.snapshot_max = RFRAME_SNAPSHOT_MAX_DEFAULT;
    cfg.handshake_ms = 5000;
    ck_assert_int_eq(transport_init(&rt, &loop, &cfg), 0);
    ck_assert_int_eq(rt.init(&rt, 1, OUR_ADDR), 0);
    raft_stream = NULL;
    accepted = NULL;
    connect_status = 1;
    transport_closed = false;
    write_status = 1;
    writes_done = 0;
    raft_n_got = 0;
    raft_eof = false;
    connected = written = got_message = accepted_yet = refused_yet = false;
    (void)uv_idle_init(&loop, &idle);
    (void)uv_idle_start(&idle, check_progress);
}

static void teardown(void)
{
    if (raft_stream != NULL) {
        uv_close((uv_handle_t *)raft_stream, on_raft_closed);
    }
    if (accepted != NULL) {
        uv_close((uv_handle_t *)accepted, on_raft_closed);
    }
    rt.close(&rt, on_transport_closed);
    ck_assert(run_until(&transport_closed));
    uv_close((uv_handle_t *)&idle, NULL);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    transport_free(&rt);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    free(peer.garbage);
    peer.garbage = NULL;
}

/* A plaintext outbound link is the TCP socket itself; the peer's garbage
 * (sent before and after our handshake) is read by nobody: raft's message
 * still reaches the peer whole, the stream is idle once written, and
 * nothing is counted refused or checked. */
START_TEST(test_direct_outbound_garbage_back)
{
    char addr[32];
    uint8_t want[512];
    static const uint8_t msg[16 + 8] = {3,   0,   0,   0,   0,   0,   0,   0,
                                        8,   0,   0,   0,   0,   0,   0,   0,
                                        'r', 'a', 'f', 't', 'm', 's', 'g', '!'};
    struct transport_stats st;
    size_t hn = handshake(want, 1, OUR_ADDR);

    setup();
    peer_start(false);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", peer.port);
    ck_assert_int_eq(rt.connect(&rt, &creq, 2, addr, on_connect), 0);
    ck_assert(run_until(&connected));
    ck_assert_int_eq(connect_status, 0);
    ck_assert_int_eq(uv_handle_get_type((uv_handle_t *)raft_stream), UV_TCP);
    /* The peer's garbage is on its way (written at its accept). */
    ck_assert(peer.accepted);

    ck_assert_int_eq(raft_write(msg, sizeof msg), 0);
    ck_assert(run_until(&written));
    ck_assert_int_eq(write_status, 0);
    memcpy(want + hn, msg, sizeof msg);
    ck_assert(run_until(&got_message));
    ck_assert(!peer.eof);
    ck_assert_uint_eq(peer.n_got, hn + sizeof msg);
    ck_assert_mem_eq(peer.got, want, hn + sizeof msg);
    /* Let the garbage arrive: it stays unread, and raft's stream is not
     * active (no read started on it, no write left). */
    for (int i = 0; i < 50; i++) {
        (void)uv_run(&loop, UV_RUN_NOWAIT);
    }
    ck_assert(!uv_is_active((uv_handle_t *)raft_stream));
    transport_stats(&rt, &st);
    ck_assert_uint_eq(st.connected, 1);
    ck_assert_uint_eq(st.refused, 0);
    ck_assert_uint_eq(st.messages, 0);
    peer_stop();
    teardown();
}
END_TEST

/* A peer that closes a direct link: raft hears it from a failed write (as
 * with raft_uv_tcp), never from a read. */
START_TEST(test_direct_outbound_peer_gone)
{
    char addr[32];
    static const uint8_t msg[64];

    setup();
    peer_start(true);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", peer.port);
    ck_assert_int_eq(rt.connect(&rt, &creq, 2, addr, on_connect), 0);
    ck_assert(run_until(&connected));
    /* The handshake may race the peer's close: either raft got the socket
     * or the connect failed, never a crash. */
    if (connect_status == 0) {
        write_status = 0;
        for (int i = 0; i < 200 && write_status == 0; i++) {
            int rv = raft_write(msg, sizeof msg);

            if (rv != 0) {
                write_status = rv; /* refused at once: as good */
                break;
            }
            written = false;
            writes_done = 0;
            ck_assert(run_until(&written));
            uv_sleep(10);
        }
        ck_assert_int_ne(write_status, 0);
    } else {
        ck_assert_int_eq(connect_status, RAFT_NOCONNECTION);
        ck_assert_ptr_null(raft_stream);
    }
    peer_stop();
    teardown();
}
END_TEST

static void on_dialled(uv_connect_t *req, int status)
{
    (void)req;
    ck_assert_int_eq(status, 0);
}

static void on_sent(uv_write_t *req, int status)
{
    (void)req;
    (void)status; /* the link may be closed before it completes */
}

/* An accepted link still goes through the socketpair and its check: a
 * message of an unknown type after a good handshake closes the link,
 * counted, and raft's end sees only its end. */
START_TEST(test_inbound_checked)
{
    uv_tcp_t c;
    uv_connect_t cr;
    struct sockaddr_in sa;
    uint8_t buf[512];
    size_t n = handshake(buf, 2, "127.0.0.1:9112");
    struct transport_stats st;
    uv_write_t w;
    uv_buf_t b;

    setup();
    memset(&peer, 0, sizeof peer);
    ck_assert_int_eq(rt.listen(&rt, on_accepted), 0);
    ck_assert_int_eq(uv_ip4_addr("127.0.0.1", 7351, &sa), 0);
    (void)uv_tcp_init(&loop, &c);
    ck_assert_int_eq(
        uv_tcp_connect(&cr, &c, (const struct sockaddr *)&sa, on_dialled), 0);
    memset(buf + n, 0xee, 16); /* preamble: type 0xeeee..., no such type */
    b = uv_buf_init((char *)buf, (unsigned)(n + 16));
    ck_assert_int_eq(uv_write(&w, (uv_stream_t *)&c, &b, 1, on_sent), 0);
    ck_assert(run_until(&accepted_yet));
    ck_assert_int_eq(uv_handle_get_type((uv_handle_t *)accepted),
                     UV_NAMED_PIPE);
    ck_assert(run_until(&refused_yet));
    ck_assert_uint_eq(raft_n_got, 0);
    transport_stats(&rt, &st);
    ck_assert_uint_eq(st.accepted, 1);
    ck_assert_uint_eq(st.refused, 1);
    ck_assert_uint_eq(st.messages, 0);
    uv_close((uv_handle_t *)&c, NULL);
    teardown();
}
END_TEST

Suite *transport_suite(void);

Suite *transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc = tcase_create("plaintext");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_direct_outbound_garbage_back);
    tcase_add_test(tc, test_direct_outbound_peer_gone);
    tcase_add_test(tc, test_inbound_checked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(transport_suite());
    int failed;

    signal(SIGPIPE, SIG_IGN);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
