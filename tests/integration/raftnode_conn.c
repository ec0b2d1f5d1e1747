/* tests/integration/raftnode_conn.c: the client connections of raftnode
 * (raftnode.h): lines in, answers out in order of arrival. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "fsm/fsm.h"
#include "raft/identity.h"
#include "raft/replica.h"
#include "raft/uvio.h"
#include "raftnode.h"
#include "store/store.h"

/* --- connections ---------------------------------------------------------- */

void conn_maybe_free(struct conn *c)
{
    struct creq *q, *next;

    if (!c->handle_closed || c->inflight > 0 || c->writes > 0) {
        return;
    }
    for (q = c->head; q != NULL; q = next) {
        next = q->next;
        free(q);
    }
    free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    c->handle_closed = true;
    conn_maybe_free(c);
}

void conn_close(struct conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = true;
    if (c->prev_conn != NULL) {
        c->prev_conn->next_conn = c->next_conn;
    } else {
        g.conns = c->next_conn;
    }
    if (c->next_conn != NULL) {
        c->next_conn->prev_conn = c->prev_conn;
    }
    g.n_conns--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_write(uv_write_t *w, int status)
{
    struct wreq *wr = w->data;
    struct conn *c = wr->c;

    free(wr->buf);
    free(wr);
    c->writes--;
    if (status != 0 && !c->closing) {
        conn_close(c);
    }
    conn_maybe_free(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Write out every answered request at the head of the FIFO. */
void conn_flush(struct conn *c)
{
    struct creq *q;
    struct wreq *wr;
    size_t len = 0, off = 0;
    uv_buf_t b;

    if (c->closing) {
        return;
    }
    for (q = c->head; q != NULL && q->done; q = q->next) {
        len += q->outlen;
    }
    if (len == 0) {
        return;
    }
    wr = malloc(sizeof *wr);
    if (wr == NULL || (wr->buf = malloc(len)) == NULL) {
        free(wr);
        conn_close(c);
        return;
    }
    while (c->head != NULL && c->head->done) {
        q = c->head;
        memcpy(wr->buf + off, q->out, q->outlen);
        off += q->outlen;
        c->head = q->next;
        if (c->head == NULL) {
            c->tail = NULL;
        }
        c->queued--;
        free(q);
    }
    wr->c = c;
    wr->w.data = wr;
    b = uv_buf_init(wr->buf, (unsigned)len);
    if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        free(wr->buf);
        free(wr);
        conn_close(c);
        return;
    }
    c->writes++;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) >
        WRITE_QUEUE_MAX) {
        logf_("warn", "client does not read its answers: closing");
        conn_close(c);
        return;
    }
    if (!c->reading && c->queued < PENDING_LOW) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) {
            c->reading = true;
        }
    }
}

struct creq *creq_new(struct conn *c)
{
    struct creq *q = calloc(1, sizeof *q);

    if (q == NULL) {
        return NULL;
    }
    q->c = c;
    q->req.data = q;
    if (c->tail != NULL) {
        c->tail->next = q;
    } else {
        c->head = q;
    }
    c->tail = q;
    c->queued++;
    return q;
}

void creq_answer(struct creq *q, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(q->out, sizeof q->out - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        n = 0;
    }
    if ((size_t)n > sizeof q->out - 2) {
        n = (int)sizeof q->out - 2;
    }
    q->out[n] = '\n';
    q->outlen = (size_t)n + 1;
    q->done = true;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = malloc(65536);
    buf->len = buf->base != NULL ? 65536 : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    ssize_t i;

    if (nread < 0) {
        free(buf->base);
        conn_close(c);
        return;
    }
    for (i = 0; i < nread && !c->closing; i++) {
        char ch = buf->base[i];

        if (ch == '\n') {
            if (c->discarding) {
                c->discarding = false;
            } else {
                if (c->inlen > 0 && c->in[c->inlen - 1] == '\r') {
                    c->inlen--;
                }
                c->in[c->inlen] = '\0';
                handle_line(c, c->in);
            }
            c->inlen = 0;
        } else if (c->discarding) {
            continue;
        } else if (c->inlen == LINE_MAX_LEN) {
            struct creq *q = creq_new(c);
            if (q == NULL) {
                conn_close(c);
                break;
            }
            creq_answer(q, "ERR INVALID");
            c->discarding = true;
            c->inlen = 0;
        } else {
            c->in[c->inlen++] = ch;
        }
    }
    free(buf->base);
    if (c->closing) {
        return;
    }
    if (c->queued >= PENDING_HIGH && c->reading) {
        uv_read_stop(s);
        c->reading = false;
    }
    conn_flush(c);
}

void on_connection(uv_stream_t *server, int status)
{
    struct conn *c;

    if (status != 0) {
        logf_("warn", "accept: %s", uv_strerror(status));
        return;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return; /* the connection stays in the backlog */
    }
    uv_tcp_init(&g.loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || g.stopping ||
        g.n_conns >= CONNS_MAX) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        return;
    }
    c->next_conn = g.conns;
    if (g.conns != NULL) {
        g.conns->prev_conn = c;
    }
    g.conns = c;
    g.n_conns++;
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    c->reading = true;
}
