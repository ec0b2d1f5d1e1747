/* http/http.c: the listener's route table, methods, limits and its
 * hand-over (http_add_connection), over socketpairs on a uv loop: no port
 * is opened except by the bind refusal case. once_metrics.py runs it on
 * real TCP in a node. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "http/http.h"

Suite *http_suite(void);

static unsigned calls;

static void get_hello(void *arg,
                      const struct http_request *req,
                      struct http_response *resp)
{
    (void)arg;
    calls++;
    ck_assert_str_eq(req->method, "GET");
    ck_assert_str_eq(req->path, "/hello");
    http_text(resp, 200, "hello\n");
}

static void get_busy(void *arg,
                     const struct http_request *req,
                     struct http_response *resp)
{
    (void)arg;
    (void)req;
    http_text(resp, 503, "not ready: busy\n");
}

/* Deferred answers: /later from a timer on the loop, /now from inside
 * the handler that deferred, /never only when the test says so. */
static uv_timer_t later_timer;
static struct http_pending *later_token, *never_token;
static unsigned echo_calls;

static void on_later(uv_timer_t *t)
{
    struct http_response r;

    (void)t;
    memset(&r, 0, sizeof r);
    http_text(&r, 200, "later\n");
    r.retry_after_s = 7;
    http_answer(later_token, &r);
    later_token = NULL;
    uv_close((uv_handle_t *)&later_timer, NULL);
}

static void get_later(void *arg,
                      const struct http_request *req,
                      struct http_response *resp)
{
    uv_loop_t *loop = arg;

    (void)resp;
    later_token = http_defer(req);
    ck_assert_ptr_nonnull(later_token);
    ck_assert_ptr_null(http_defer(req)); /* one token per request */
    ck_assert_int_eq(uv_timer_init(loop, &later_timer), 0);
    ck_assert_int_eq(uv_timer_start(&later_timer, on_later, 30, 0), 0);
}

static void get_now(void *arg,
                    const struct http_request *req,
                    struct http_response *resp)
{
    struct http_pending *p = http_defer(req);
    struct http_response r;

    (void)arg;
    (void)resp;
    ck_assert_ptr_nonnull(p);
    memset(&r, 0, sizeof r);
    http_text(&r, 200, "now\n");
    http_answer(p, &r);
}

static void get_never(void *arg,
                      const struct http_request *req,
                      struct http_response *resp)
{
    (void)arg;
    (void)resp;
    never_token = http_defer(req);
    ck_assert_ptr_nonnull(never_token);
}

static void post_echo(void *arg,
                      const struct http_request *req,
                      struct http_response *resp)
{
    (void)arg;
    echo_calls++;
    ck_assert_str_eq(req->method, "POST");
    resp->status = 200;
    resp->body = malloc(req->body_len + 1);
    ck_assert_ptr_nonnull(resp->body);
    if (req->body_len > 0) {
        memcpy(resp->body, req->body, req->body_len);
    }
    resp->body_len = req->body_len;
}

static void get_prefix(void *arg,
                       const struct http_request *req,
                       struct http_response *resp)
{
    (void)arg;
    calls++;
    ck_assert_str_eq(req->path, "/p/a%2Fb");
    http_text(resp, 200, "prefix\n");
}

static uv_loop_t *routes_loop; /* the loop of /later's timer */

static struct http_route routes[] = {
    {"/hello", get_hello, NULL, 0, 0},
    {"/busy", get_busy, NULL, 0, 0},
    {"/later", get_later, NULL, HTTP_GET, 0},
    {"/now", get_now, NULL, HTTP_GET, 0},
    {"/never", get_never, NULL, HTTP_GET, 0},
    {"/echo", post_echo, NULL, HTTP_POST, 16},
    {"/p/", get_prefix, NULL, HTTP_GET, 0},
};

struct env
{
    uv_loop_t loop;
    struct http *h;
};

static void env_start(struct env *e, unsigned conns_max)
{
    struct http_config c;
    char errmsg[ERR_MSG_SIZE];

    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    memset(&c, 0, sizeof c);
    routes_loop = &e->loop;
    routes[2].arg = routes_loop;
    c.routes = routes;
    c.n_routes = sizeof routes / sizeof routes[0];
    c.conns_max = conns_max;
    ck_assert_int_eq(http_start(&e->h, &e->loop, &c, errmsg), 0);
    calls = 0;
}

static void env_stop(struct env *e)
{
    http_close(e->h, NULL, NULL);
    ck_assert_int_eq(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&e->loop), 0);
}

/* One end of a new socketpair handed to the listener (the other end is
 * returned), or -1 if the listener refused it. */
static int connect_one(struct env *e)
{
    struct sockaddr_in peer;
    int sv[2];

    ck_assert_int_eq(
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
        0);
    memset(&peer, 0, sizeof peer);
    peer.sin_family = AF_INET;
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (http_add_connection(e->h, sv[0], (const struct sockaddr *)&peer,
                            sizeof peer) != 0) {
        close(sv[1]);
        return -1;
    }
    return sv[1];
}

/* Send @req, half-close, and collect the answer until the listener closes
 * (at most ~3 s): a malloc'd string. */
static char *ask(struct env *e, const char *req, size_t len)
{
    int fd = connect_one(e);
    size_t off = 0, n_out = 0;
    char *out = calloc(1, 1 << 16);

    ck_assert_int_ge(fd, 0);
    for (int turn = 0; turn < 3000; turn++) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t n;

        if (off < len) {
            n = write(fd, req + off, len - off);
            off += n > 0 ? (size_t)n : 0;
            if (off == len) {
                (void)shutdown(fd, SHUT_WR);
            }
        }
        uv_run(&e->loop, UV_RUN_NOWAIT);
        n = read(fd, out + n_out, (1 << 16) - 1 - n_out);
        if (n > 0) {
            n_out += (size_t)n;
            continue;
        }
        if (n == 0 || errno != EAGAIN) {
            break;
        }
        (void)poll(&p, 1, 1);
    }
    close(fd);
    uv_run(&e->loop, UV_RUN_NOWAIT);
    return out;
}

#define ASK(e, s) ask((e), (s), strlen(s))

START_TEST(routes_methods_and_paths)
{
    struct env e;
    char *r;

    env_start(&e, 0);
    r = ASK(&e, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ck_assert_msg(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", r);
    ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nhello\n"));
    ck_assert_ptr_nonnull(strstr(r, "Cache-Control: no-store\r\n"));
    ck_assert_ptr_nonnull(strstr(r, "text/plain; charset=utf-8"));
    free(r);
    /* The query string is not part of the path. */
    r = ASK(&e, "GET /hello?x=1 HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 200 OK\r\n") != NULL, "%s", r);
    free(r);
    r = ASK(&e, "GET /busy HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 503 ") != NULL, "%s", r);
    ck_assert_ptr_nonnull(strstr(r, "not ready: busy\n"));
    free(r);
    r = ASK(&e, "GET /nothing HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 404 ") != NULL, "%s", r);
    free(r);
    r = ASK(&e,
            "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            "\r\nabc");
    ck_assert_msg(strstr(r, " 405 ") != NULL, "%s", r);
    ck_assert_ptr_nonnull(strstr(r, "Allow: GET\r\n"));
    free(r);
    r = ASK(&e, "HEAD /hello HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 405 ") != NULL, "%s", r);
    free(r);
    ck_assert_uint_eq(calls, 2); /* only the two GETs of /hello */
    env_stop(&e);
}
END_TEST

START_TEST(deferred_answers_and_bodies)
{
    struct env e;
    char *r;

    env_start(&e, 0);
    echo_calls = 0;
    r = ASK(&e, "GET /later HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 200 ") != NULL, "%s", r);
    ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nlater\n"));
    ck_assert_ptr_nonnull(strstr(r, "Retry-After: 7\r\n"));
    free(r);
    r = ASK(&e, "GET /now HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, "\r\n\r\nnow\n") != NULL, "%s", r);
    free(r);
    r = ASK(&e,
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            "Connection: close\r\n\r\nabc");
    ck_assert_msg(strstr(r, "\r\n\r\nabc") != NULL, "%s", r);
    free(r);
    /* Over body_max by Content-Length: 413 before the body is read. */
    r = ASK(&e,
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n"
            "Connection: close\r\n\r\n0123456789abcdefg");
    ck_assert_msg(strstr(r, " 413 ") != NULL, "%s", r);
    free(r);
    /* Chunked, growing over it: discarded, 413 at its end. */
    r = ASK(&e,
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n"
            "a\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n");
    ck_assert_msg(strstr(r, " 413 ") != NULL, "%s", r);
    free(r);
    ck_assert_uint_eq(echo_calls, 1);
    r = ASK(&e, "GET /echo HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 405 ") != NULL, "%s", r);
    ck_assert_ptr_nonnull(strstr(r, "Allow: POST\r\n"));
    free(r);
    r = ASK(&e, "POST /later HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    ck_assert_msg(strstr(r, " 405 ") != NULL, "%s", r);
    ck_assert_ptr_nonnull(strstr(r, "Allow: GET\r\n"));
    free(r);
    /* A prefix route; its path reaches the handler still encoded. */
    calls = 0;
    r = ASK(&e, "GET /p/a%2Fb HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 200 ") != NULL, "%s", r);
    free(r);
    ck_assert_uint_eq(calls, 1);
    r = ASK(&e, "GET /p HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 404 ") != NULL, "%s", r);
    free(r);
    env_stop(&e);
}
END_TEST

/* A request still deferred when the listener closes: the close completes
 * (MHD refuses to stop with a suspended connection), and the late answer
 * only frees its token. */
START_TEST(close_while_deferred)
{
    struct env e;
    struct http_response r;
    const char *req = "GET /never HTTP/1.0\r\n\r\n";
    int fd;

    env_start(&e, 0);
    never_token = NULL;
    fd = connect_one(&e);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    for (int i = 0; i < 200 && never_token == NULL; i++) {
        struct pollfd p = {fd, POLLIN, 0};

        uv_run(&e.loop, UV_RUN_NOWAIT);
        (void)poll(&p, 1, 1);
    }
    ck_assert_ptr_nonnull(never_token);
    env_stop(&e);
    memset(&r, 0, sizeof r);
    http_text(&r, 200, "too late\n");
    http_answer(never_token, &r); /* freed, body too (ASan: no leak) */
    close(fd);
}
END_TEST

START_TEST(oversized_headers_refused)
{
    struct env e;
    size_t n = 40000;
    char *req = malloc(n + 64), *r;

    env_start(&e, 0);
    strcpy(req, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + strlen(req), 'a', n);
    strcpy(req + 37 + n, "\r\n\r\n"); /* 37: the text before the value */
    r = ask(&e, req, strlen(req));
    ck_assert_msg(strstr(r, " 431 ") != NULL || r[0] == '\0', "%.80s", r);
    ck_assert_uint_eq(calls, 0);
    free(r);
    free(req);
    /* And the listener goes on serving. */
    r = ASK(&e, "GET /hello HTTP/1.0\r\n\r\n");
    ck_assert_msg(strstr(r, " 200 OK\r\n") != NULL, "%s", r);
    free(r);
    env_stop(&e);
}
END_TEST

START_TEST(connection_limit)
{
    struct env e;
    struct http_stats st;
    int a, b, c;

    env_start(&e, 2);
    a = connect_one(&e);
    b = connect_one(&e);
    uv_run(&e.loop, UV_RUN_NOWAIT);
    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(b, 0);
    c = connect_one(&e); /* the third: refused, closed */
    ck_assert_int_eq(c, -1);
    http_stats(e.h, &st);
    ck_assert_uint_eq(st.conns_open, 2);
    ck_assert_uint_eq(st.conns_refused, 1);
    /* Closing the listener with connections open frees everything. */
    env_stop(&e);
    close(a);
    close(b);
}
END_TEST

START_TEST(bad_configs_refused)
{
    uv_loop_t loop;
    struct http *h = NULL;
    struct http_config c;
    char errmsg[ERR_MSG_SIZE];
    struct http_route dup[] = {{"/a", get_hello, NULL}, {"/a", get_busy, NULL}};
    struct http_route rel[] = {{"a", get_hello, NULL}};
    struct http_route nofn[] = {{"/a", NULL, NULL}};
    struct http_route nobody[] = {{"/a", post_echo, NULL, HTTP_POST, 0}};
    struct http_route huge[] = {
        {"/a", post_echo, NULL, HTTP_POST, HTTP_BODY_IN_MAX + 1}};
    struct http_route put[] = {{"/a", get_hello, NULL, 1u << 5, 0}};

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    memset(&c, 0, sizeof c);
    c.routes = dup;
    c.n_routes = 2;
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ROUTES);
    ck_assert_ptr_nonnull(strstr(errmsg, "twice"));
    c.routes = rel;
    c.n_routes = 1;
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ROUTES);
    c.routes = nofn;
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ROUTES);
    c.routes = nobody; /* POST without a body bound */
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ROUTES);
    c.routes = huge;
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ROUTES);
    c.routes = put; /* a method the listener does not know */
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ROUTES);
    c.routes = routes;
    c.n_routes = HTTP_ROUTES_MAX + 1;
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ROUTES);
    c.n_routes = 2;
    c.addr = "127.0.0.1";
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ADDR);
    c.addr = "::1:80";
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ADDR);
    c.addr = "127.0.0.1:0";
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_ADDR);
    c.addr = "192.0.2.1:8080"; /* not an address of this host */
    ck_assert_int_eq(http_start(&h, &loop, &c, errmsg), HTTP_E_LISTEN);
    ck_assert_ptr_null(h);
    /* The refused listeners free themselves through the loop. */
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("http");

    tcase_add_test(tc, routes_methods_and_paths);
    tcase_add_test(tc, deferred_answers_and_bodies);
    tcase_add_test(tc, close_while_deferred);
    tcase_add_test(tc, oversized_headers_refused);
    tcase_add_test(tc, connection_limit);
    tcase_add_test(tc, bad_configs_refused);
    suite_add_tcase(s, tc);
    return s;
}
