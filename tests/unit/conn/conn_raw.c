/* conn_raw.c: raw TCP peers and a raw listener for the unit-conn tests
 * (conn_helpers.h): they see and send the exact bytes conn.c must handle
 * (error frames, second answers, garbage). */
#include "conn_helpers.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

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

void raw_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base != NULL ? suggested : 0;
}

static void lis_on_data(struct raw *r);
static void raw_count(struct raw *r);

void raw_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
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

struct raw *raw_connect_async(unsigned port)
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

struct raw *raw_connect(unsigned port)
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

void raw_send(struct raw *r, const void *data, size_t len)
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

void raw_close(struct raw *r)
{
    if (!r->closing) {
        r->closing = true;
        uv_close((uv_handle_t *)&r->tcp, raw_close_cb);
    }
}

/* Whether a whole frame is buffered and not taken yet. */
bool raw_has_frame(const struct raw *r)
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
void raw_take(struct raw *r)
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

void raw_send_env(struct raw *r, const struct envelope_view *e)
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
uint8_t *req_frame(uint64_t call_id,
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

void raw_send_req(struct raw *r,
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
void raw_expect_ok(struct raw *r, uint64_t call_id, const char *body)
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
void raw_expect_error_then_close(struct raw *r, enum rpc_status st)
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

void lis_start(unsigned port, enum lis_mode mode)
{
    struct sockaddr_in sa;

    ck_assert_int_eq(uv_ip4_addr("127.0.0.1", (int)port, &sa), 0);
    ck_assert_int_eq(uv_tcp_init(&F.loop, &F.lis), 0);
    F.lis_open = true;
    F.lis_mode = mode;
    ck_assert_int_eq(uv_tcp_bind(&F.lis, (const struct sockaddr *)&sa, 0), 0);
    ck_assert_int_eq(uv_listen((uv_stream_t *)&F.lis, 16, lis_conn_cb), 0);
}
