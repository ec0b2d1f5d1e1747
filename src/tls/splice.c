/* tls/splice.c: see splice.h. */
#include "tls/splice.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"

/* tls_splice_flush takes the session's output into a stack buffer this
 * large (a 16 KiB record and its overhead, or a handshake flight); only
 * more than that goes through the heap. */
#define FLUSH_STACK (17u * 1024)

/* One queued write, its bytes after it. */
struct splice_write
{
    uv_write_t req;
    struct tls_splice *sp;
    bool to_net;
    size_t len;
    uint8_t data[];
};

void tls_splice_init(struct tls_splice *sp,
                     uv_stream_t *net,
                     uv_alloc_cb alloc,
                     uv_read_cb read,
                     struct tls_session *tls,
                     size_t queue_max,
                     tls_splice_written_cb written,
                     void *data)
{
    ONCE_ASSERT(net != NULL && written != NULL && queue_max > 0,
                "a splice has a network stream, a callback and a bound");
    memset(sp, 0, sizeof *sp);
    sp->net = net;
    sp->net_alloc = alloc;
    sp->net_read = read;
    sp->tls = tls;
    sp->queue_max = queue_max;
    sp->written = written;
    sp->data = data;
}

void tls_splice_local(struct tls_splice *sp,
                      uv_stream_t *local,
                      uv_alloc_cb alloc,
                      uv_read_cb read)
{
    ONCE_ASSERT(sp->local == NULL && local != NULL,
                "the local stream is set once");
    sp->local = local;
    sp->local_alloc = alloc;
    sp->local_read = read;
}

static void on_written(uv_write_t *req, int status)
{
    struct splice_write *w = req->data;
    struct tls_splice *sp = w->sp;
    bool to_net = w->to_net;

    if (to_net) {
        ONCE_ASSERT(sp->net_queued >= w->len,
                    "net_queued counts every write in flight");
        sp->net_queued -= w->len;
        sp->net_written += w->len;
    } else {
        ONCE_ASSERT(sp->local_queued >= w->len,
                    "local_queued counts every write in flight");
        sp->local_queued -= w->len;
    }
    free(w);
    sp->written(sp, to_net, status);
}

static struct splice_write *write_new(struct tls_splice *sp,
                                      bool to_net,
                                      size_t cap)
{
    struct splice_write *w = malloc(sizeof *w + cap);

    if (w != NULL) {
        w->sp = sp;
        w->to_net = to_net;
        w->len = 0;
        w->req.data = w;
    }
    return w;
}

/* Queue @w (w->len bytes). 0, or uv_write's error with @w freed. */
static int write_start(struct tls_splice *sp, struct splice_write *w)
{
    uv_buf_t b;
    int rv;

    /* The callers skip empty writes; a uv_buf holds an unsigned length. */
    ONCE_ASSERT(w->len > 0 && w->len <= UINT_MAX,
                "a write is 1..UINT_MAX bytes");
    b = uv_buf_init((char *)w->data, (unsigned)w->len);
    rv = uv_write(&w->req, w->to_net ? sp->net : sp->local, &b, 1, on_written);
    if (rv != 0) {
        free(w);
        return rv;
    }
    if (w->to_net) {
        sp->net_queued += w->len;
    } else {
        sp->local_queued += w->len;
    }
    return 0;
}

/* Over the bound towards @to_net's stream: stop reading the other one. */
static void pause_if_full(struct tls_splice *sp, bool to_net)
{
    if (to_net) {
        if (sp->net_queued > sp->queue_max && sp->local != NULL &&
            !sp->local_done && !sp->local_paused) {
            sp->local_paused = true;
            (void)uv_read_stop(sp->local);
        }
    } else if (sp->local_queued > sp->queue_max && !sp->net_done &&
               !sp->net_paused) {
        sp->net_paused = true;
        (void)uv_read_stop(sp->net);
    }
}

/* Write @n bytes at @p towards @to_net's stream: first directly (one
 * uv_try_write, no request, no copy), then what the kernel did not take,
 * copied and queued behind it. 0, or libuv's error (a direct write's
 * failure too, e.g. UV_EPIPE). */
static int write_bytes(struct tls_splice *sp,
                       bool to_net,
                       const uint8_t *p,
                       size_t n)
{
    uv_stream_t *s = to_net ? sp->net : sp->local;
    struct splice_write *w;
    int k, rv;

    if (n == 0) {
        return 0;
    }
    ONCE_ASSERT(s != NULL, "bytes go to the local stream only once it exists");
    ONCE_ASSERT(n <= UINT_MAX, "a uv_buf holds an unsigned length");
    /* Why not uv_write alone: libuv 1.44 stops POLLOUT after each completed
     * request (uv__drain), and on a stream that is also being read that is
     * one epoll_ctl per write; a write the kernel takes whole needs none.
     * uv_try_write takes nothing while requests are queued (UV_EAGAIN), so
     * the bytes stay in order. */
    k = uv_try_write(s, &(uv_buf_t){.base = (char *)p, .len = n}, 1);
    if (k < 0 && k != UV_EAGAIN) {
        return k;
    }
    if (k > 0) {
        if (to_net) {
            sp->net_written += (size_t)k;
        }
        p += k;
        n -= (size_t)k;
        if (n == 0) {
            return 0;
        }
    }
    w = write_new(sp, to_net, n);
    if (w == NULL) {
        return UV_ENOMEM; /* UNTESTED: malloc */
    }
    memcpy(w->data, p, n);
    w->len = n;
    rv = write_start(sp, w);
    if (rv == 0) {
        pause_if_full(sp, to_net);
    }
    return rv;
}

int tls_splice_flush(struct tls_splice *sp)
{
    uint8_t buf[FLUSH_STACK];
    uint8_t *p;
    size_t n, got;
    int rv;

    if (sp->tls == NULL || (n = tls_session_pending(sp->tls)) == 0) {
        return 0;
    }
    /* A record or a handshake flight fits the stack; a larger backlog (a
     * whole chunk sealed) is taken into the heap for this call. */
    p = n > sizeof buf ? malloc(n) : buf;
    if (p == NULL) {
        return UV_ENOMEM; /* UNTESTED: malloc */
    }
    got = tls_session_take(sp->tls, p, n);
    ONCE_ASSERT(got == n, "a memory BIO gives all it holds");
    rv = write_bytes(sp, true, p, n);
    if (p != buf) {
        free(p);
    }
    return rv;
}

int tls_splice_to_net(struct tls_splice *sp, const uint8_t *p, size_t n)
{
    if (sp->tls == NULL) {
        return write_bytes(sp, true, p, n);
    }
    if (tls_session_seal(sp->tls, p, n) != 0) {
        return UV_EPROTO; /* UNTESTED: OpenSSL */
    }
    return tls_splice_flush(sp);
}

int tls_splice_to_local(struct tls_splice *sp, const uint8_t *p, size_t n)
{
    return write_bytes(sp, false, p, n);
}

int tls_splice_resume(struct tls_splice *sp)
{
    int rv;

    if (sp->net_paused && !sp->net_done &&
        sp->local_queued <= sp->queue_max / 2) {
        sp->net_paused = false;
        rv = uv_read_start(sp->net, sp->net_alloc, sp->net_read);
        if (rv != 0) {
            return rv; /* UNTESTED */
        }
    }
    ONCE_ASSERT(!sp->local_paused || sp->local != NULL,
                "only an existing local stream is paused");
    if (sp->local_paused && !sp->local_done &&
        sp->net_queued <= sp->queue_max / 2) {
        sp->local_paused = false;
        rv = uv_read_start(sp->local, sp->local_alloc, sp->local_read);
        if (rv != 0) {
            return rv; /* UNTESTED */
        }
    }
    return 0;
}

void tls_splice_net_done(struct tls_splice *sp)
{
    sp->net_done = true;
    (void)uv_read_stop(sp->net);
}

void tls_splice_local_done(struct tls_splice *sp)
{
    sp->local_done = true;
    if (sp->local != NULL) {
        (void)uv_read_stop(sp->local);
    }
}
