/* fuzz_http: arbitrary bytes as one HTTP connection to the node's listener
 * (http/http.c over libmicrohttpd, on a uv loop), through
 * http_add_connection on one end of a socketpair, the same hand-over the
 * TLS terminator (http_tls.c) makes after its handshake. The routes answer
 * like the node's: text, and a Prometheus exposition whose label value is
 * the request path (escaping).
 * Whatever the bytes, the listener answers or closes, never crashes, and
 * the connection ends (the peer half-closes after writing).
 *
 * Limits: inputs over 64 KiB are cut (the listener's request memory is 32
 * KiB); at most 0.4 s of loop per input, 20 ms after the last byte went
 * without an answer: a request MHD still waits on (a line without its end)
 * is left to its idle timeout (1 s here), and a later input gets a new
 * connection. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "common/prom.h"
#include "http/http.h"

#define INPUT_MAX (64u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static struct http *srv;

static void get_text(void *arg,
                     const struct http_request *req,
                     struct http_response *resp)
{
    (void)arg;
    (void)req;
    http_text(resp, 200, "ok\n");
}

static void get_prom(void *arg,
                     const struct http_request *req,
                     struct http_response *resp)
{
    static const char *const labels[] = {"path"};
    struct prom_family_def d = {
        "fuzz_requests_total", "By path.", PROM_COUNTER, labels, 1, NULL, 0};
    struct prom_registry *r = prom_new();
    const char *v[] = {req->path};
    struct prom_buf b;

    (void)arg;
    if (r == NULL) {
        http_text(resp, 500, "oom\n");
        return;
    }
    prom_inc(prom_series(prom_family(r, &d, NULL), v));
    prom_buf_init(&b, 1u << 20);
    if (prom_write(r, &b) == 0) {
        resp->status = 200;
        resp->body = prom_buf_take(&b, &resp->body_len);
    } else {
        prom_buf_free(&b);
        http_text(resp, 500, "cut\n");
    }
    prom_free(r);
}

static const struct http_route routes[] = {
    {"/healthz", get_text, NULL},
    {"/metrics", get_prom, NULL},
};

static void setup(void)
{
    struct http_config c;
    char errmsg[ERR_MSG_SIZE];

    if (uv_loop_init(&loop) != 0) {
        abort();
    }
    memset(&c, 0, sizeof c);
    c.routes = routes;
    c.n_routes = sizeof routes / sizeof routes[0];
    c.timeout_s = 1; /* connections MHD waits on go soon (see exchange) */
    if (http_start(&srv, &loop, &c, errmsg) != 0) {
        abort();
    }
}

/* Write what fits, keep the loop turning so MHD reads; then half-close
 * and read until the listener closes. */
static void exchange(int fd, const uint8_t *data, size_t size)
{
    size_t off = 0;
    char buf[4096];
    int idle = 0;

    /* Until the listener closes, or 20 quiet turns after the last byte:
     * MHD keeps a half-closed, unfinished request until its idle timeout,
     * and this input has shown what it could. */
    for (int turn = 0; turn < 400 && idle < 20; turn++) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t n;

        if (off < size) {
            n = write(fd, data + off, size - off);
            if (n > 0) {
                off += (size_t)n;
            }
            if (off == size) {
                (void)shutdown(fd, SHUT_WR);
            }
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        n = read(fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            return; /* the listener closed the connection */
        }
        if (n < 0) {
            idle += off == size;
            (void)poll(&p, 1, 1);
        } else {
            idle = 0;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sockaddr_in peer;
    int sv[2];

    if (srv == NULL) {
        setup();
    }
    if (size > INPUT_MAX) {
        size = INPUT_MAX;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   sv) != 0) {
        return 0;
    }
    memset(&peer, 0, sizeof peer);
    peer.sin_family = AF_INET;
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)http_add_connection(srv, sv[0], (const struct sockaddr *)&peer,
                              sizeof peer);
    exchange(sv[1], data, size);
    close(sv[1]);
    uv_run(&loop, UV_RUN_NOWAIT); /* MHD notices the close */
    return 0;
}
