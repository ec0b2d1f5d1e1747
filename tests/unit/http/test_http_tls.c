/* http/http_tls.c: the HTTP listener's TLS terminator, on a loopback port
 * (run it in a network namespace of its own, as make check's callers do),
 * with certificates scripts/make-certs.sh makes in a temporary directory.
 * The client is tls/tls.c's session over a non-blocking socket, driven in
 * turns with the listener's loop. once_https.py runs the same terminator
 * in a node, with curl-like clients and a real Prometheus. */
#include <check.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cert_dir.h"
#include "http/http.h"

Suite *http_tls_suite(void);

static struct http_pending *held; /* /hold's token */

static void setup(void)
{
    cert_dir_open("https");
    cert_dir_make("ca", "ca %s", cert_dir());
    cert_dir_make("ca", "node %s n1 127.0.0.1", cert_dir());
    cert_dir_make("ca", "client %s ops", cert_dir());
}

static void teardown(void)
{
    cert_dir_close();
}

/* GET /who: "tls CN" of the client's certificate, "tls -" without one. */
static void get_who(void *arg,
                    const struct http_request *req,
                    struct http_response *resp)
{
    char name[64], text[96];

    (void)arg;
    snprintf(text, sizeof text, "%s %s\n", req->tls ? "tls" : "plain",
             tls_cert_name(req->peer, name, sizeof name));
    http_text(resp, 200, text);
}

/* GET /hold: answered never (until the listener closes). */
static void get_hold(void *arg,
                     const struct http_request *req,
                     struct http_response *resp)
{
    (void)arg;
    held = http_defer(req);
    if (held == NULL) {
        http_text(resp, 500, "no token\n");
    }
}

static const struct http_route routes[] = {
    {"/who", get_who, NULL, HTTP_GET, 0},
    {"/hold", get_hold, NULL, HTTP_GET, 0},
};

struct env
{
    uv_loop_t loop;
    struct http *h;
    struct tls_slot slot;
    SSL_CTX *client, *client_ops;
    unsigned port;
};

static unsigned free_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static SSL_CTX *client_ctx(const char *cert)
{
    char c[64], k[64];
    struct tls_files f = {NULL, NULL, cert_dir_path("ca.pem"), NULL};
    SSL_CTX *ctx = NULL;
    char errmsg[ERR_MSG_SIZE];

    if (cert != NULL) {
        snprintf(c, sizeof c, "%s.pem", cert);
        snprintf(k, sizeof k, "%s.key", cert);
        f.cert = cert_dir_path(c);
        f.key = cert_dir_path(k);
    }
    ck_assert_int_eq(tls_ctx_client(&ctx, &f, errmsg), 0);
    return ctx;
}

static void env_start(struct env *e, unsigned conns_max, unsigned hs_ms)
{
    struct tls_files f = {cert_dir_path("n1.pem"), cert_dir_path("n1.key"),
                          cert_dir_path("ca.pem"), NULL};
    struct http_config c;
    char errmsg[ERR_MSG_SIZE], addr[32];
    SSL_CTX *sc = NULL;

    memset(e, 0, sizeof *e);
    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    ck_assert_int_eq(tls_ctx_server(&sc, &f, errmsg), 0);
    tls_slot_set(&e->slot, sc);
    e->client = client_ctx(NULL);
    e->client_ops = client_ctx("ops");
    e->port = free_port();
    snprintf(addr, sizeof addr, "127.0.0.1:%u", e->port);
    memset(&c, 0, sizeof c);
    c.addr = addr;
    c.routes = routes;
    c.n_routes = sizeof routes / sizeof routes[0];
    c.conns_max = conns_max;
    c.tls = &e->slot;
    c.handshake_ms = hs_ms;
    ck_assert_int_eq(http_start(&e->h, &e->loop, &c, errmsg), 0);
}

static void env_stop(struct env *e)
{
    http_close(e->h, NULL, NULL);
    ck_assert_int_eq(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&e->loop), 0);
    tls_slot_set(&e->slot, NULL);
    SSL_CTX_free(e->client);
    SSL_CTX_free(e->client_ops);
}

static int dial(struct env *e)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)e->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ||
              errno == EINPROGRESS);
    return fd;
}

/* A client: its socket and session. */
struct client
{
    int fd;
    struct tls_session t;
    bool eof;
};

/* One turn: the loop, then the client's socket both ways. */
static void turn(struct env *e, struct client *c)
{
    uint8_t buf[TLS_FEED_MAX];
    char err[ERR_MSG_SIZE];
    size_t n;
    ssize_t r;
    struct pollfd p = {c->fd, POLLIN, 0};

    uv_run(&e->loop, UV_RUN_NOWAIT);
    while ((n = tls_session_take(&c->t, buf, sizeof buf)) > 0) {
        ck_assert_int_eq(write(c->fd, buf, n), (ssize_t)n);
    }
    (void)poll(&p, 1, 1);
    r = read(c->fd, buf, sizeof buf);
    if (r > 0) {
        (void)tls_session_feed(&c->t, buf, (size_t)r, err);
    } else if (r == 0 || errno != EAGAIN) {
        c->eof = true;
    }
}

/* A client connected and through its handshake (or the listener's
 * refusal: then c->done is false). */
static void client_open(struct env *e, struct client *c, SSL_CTX *ctx)
{
    char err[ERR_MSG_SIZE];

    c->fd = dial(e);
    c->eof = false;
    ck_assert_int_eq(tls_session_init(&c->t, ctx, false, "127.0.0.1", err), 0);
    for (int i = 0; i < 2000 && !c->t.done && !c->eof; i++) {
        turn(e, c);
    }
}

static void client_close(struct env *e, struct client *c)
{
    tls_session_free(&c->t);
    close(c->fd);
    uv_run(&e->loop, UV_RUN_NOWAIT);
}

/* Send @req, collect the plaintext answer until @want is in it or the
 * listener closes (at most ~2 s): a static buffer. */
static const char *ask(struct env *e,
                       struct client *c,
                       const char *req,
                       const char *want)
{
    static char out[1 << 14];
    size_t got = 0;
    char err[ERR_MSG_SIZE];

    ck_assert_int_eq(tls_session_seal(&c->t, (const uint8_t *)req, strlen(req)),
                     0);
    out[0] = '\0';
    for (int i = 0; i < 2000 && !c->eof && strstr(out, want) == NULL; i++) {
        int n;

        turn(e, c);
        while ((n = tls_session_read(&c->t, (uint8_t *)out + got,
                                     sizeof out - 1 - got, err)) > 0) {
            got += (size_t)n;
            out[got] = '\0';
        }
    }
    return out;
}

START_TEST(identity_of_each_connection)
{
    struct env e;
    struct client a, b;
    struct http_stats st;
    const char *r;

    env_start(&e, 0, 0);
    client_open(&e, &a, e.client);
    ck_assert(a.t.done);
    r = ask(&e, &a, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n", "tls -\n");
    ck_assert_msg(strstr(r, " 200 OK\r\n") != NULL, "%s", r);
    ck_assert_msg(strstr(r, "tls -\n") != NULL, "%s", r);
    client_open(&e, &b, e.client_ops);
    ck_assert(b.t.done);
    r = ask(&e, &b, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n", "tls ops\n");
    ck_assert_msg(strstr(r, "tls ops\n") != NULL, "%s", r);
    /* Keep-alive: the first connection's second request, still anonymous. */
    r = ask(&e, &a, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n", "tls -\n");
    ck_assert_msg(strstr(r, "tls -\n") != NULL, "%s", r);
    http_stats(e.h, &st);
    ck_assert_uint_eq(st.tls_accepted, 2);
    ck_assert_uint_eq(st.tls_open, 2);
    ck_assert_uint_eq(st.tls_refused, 0);
    client_close(&e, &a);
    client_close(&e, &b);
    env_stop(&e);
}
END_TEST

/* Run the loop until the listener closed @fd without a byte (true), or
 * ~2 s passed or it sent something (false). */
static bool closed_silently(struct env *e, int fd)
{
    char buf[64];

    for (int i = 0; i < 2000; i++) {
        ssize_t r;

        uv_run(&e->loop, UV_RUN_NOWAIT);
        r = read(fd, buf, sizeof buf);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
            return true;
        }
        if (r > 0) {
            return false;
        }
        usleep(1000);
    }
    return false;
}

START_TEST(plaintext_and_deadline_refused)
{
    struct env e;
    struct http_stats st;
    int fd;

    env_start(&e, 0, 200);
    /* Plaintext: closed at the first byte, no answer. */
    fd = dial(&e);
    for (int i = 0; i < 50; i++) {
        uv_run(&e.loop, UV_RUN_NOWAIT);
    }
    ck_assert_int_gt(write(fd, "GET /who HTTP/1.0\r\n\r\n", 21), 0);
    ck_assert(closed_silently(&e, fd));
    close(fd);
    /* Silence: closed by the handshake deadline (200 ms here). */
    fd = dial(&e);
    ck_assert(closed_silently(&e, fd));
    http_stats(e.h, &st);
    ck_assert_uint_eq(st.tls_refused, 2);
    ck_assert_uint_eq(st.tls_accepted, 0);
    close(fd);
    env_stop(&e);
}
END_TEST

START_TEST(close_with_connections_open)
{
    struct env e;
    struct client a, b;
    struct http_stats st;
    int silent;

    env_start(&e, 3, 0);
    held = NULL;
    client_open(&e, &a, e.client_ops);
    ck_assert(a.t.done);
    {
        static const char hold[] = "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n";

        ck_assert_int_eq(
            tls_session_seal(&a.t, (const uint8_t *)hold, sizeof hold - 1), 0);
        for (int i = 0; i < 500 && held == NULL; i++) {
            turn(&e, &a);
        }
    }
    ck_assert_ptr_nonnull(held); /* a deferred request over TLS */
    client_open(&e, &b, e.client);
    ck_assert(b.t.done);
    silent = dial(&e); /* mid-handshake when the listener closes */
    for (int i = 0; i < 50; i++) {
        uv_run(&e.loop, UV_RUN_NOWAIT);
    }
    http_stats(e.h, &st);
    ck_assert_uint_eq(st.tls_open, 3);
    /* Closing the listener frees every connection, open, handshaking or
     * deferred; the late answer only frees its token. */
    http_close(e.h, NULL, NULL);
    ck_assert_int_eq(uv_run(&e.loop, UV_RUN_DEFAULT), 0);
    {
        struct http_response r;

        memset(&r, 0, sizeof r);
        http_text(&r, 200, "late\n");
        http_answer(held, &r);
    }
    ck_assert_int_eq(uv_loop_close(&e.loop), 0);
    tls_slot_set(&e.slot, NULL);
    SSL_CTX_free(e.client);
    SSL_CTX_free(e.client_ops);
    tls_session_free(&a.t);
    tls_session_free(&b.t);
    close(a.fd);
    close(b.fd);
    close(silent);
}
END_TEST

Suite *http_tls_suite(void)
{
    Suite *s = suite_create("http_tls");
    TCase *tc = tcase_create("http_tls");

    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, identity_of_each_connection);
    tcase_add_test(tc, plaintext_and_deadline_refused);
    tcase_add_test(tc, close_with_connections_open);
    suite_add_tcase(s, tc);
    return s;
}
