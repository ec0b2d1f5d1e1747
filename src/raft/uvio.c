/* raft/uvio.c: see uvio.h. */
#include "raft/uvio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "raft/replica.h"

struct uvio_connect
{
    struct raft_uv_connect req; /* given to raft_uv_tcp */
    struct raft_uv_connect *orig;
};

static struct uvio *uvio_of(struct raft_uv_transport *t)
{
    return t->impl;
}

static void nodelay(struct uv_stream_s *stream)
{
    /* Best effort: a failure leaves Nagle on, nothing worse. */
    if (stream != NULL && stream->type == UV_TCP) {
        (void)uv_tcp_nodelay((uv_tcp_t *)stream, 1);
    }
}

static int t_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    struct uvio *u = uvio_of(t);
    int rv = u->tcp.init(&u->tcp, id, address);

    if (rv != 0) {
        memcpy(t->errmsg, u->tcp.errmsg, sizeof t->errmsg);
    }
    return rv;
}

static void accept_cb(struct raft_uv_transport *tcp,
                      raft_id id,
                      const char *address,
                      struct uv_stream_s *stream)
{
    struct uvio *u = tcp->data;

    nodelay(stream);
    u->accept_cb(&u->transport, id, address, stream);
}

static int t_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    struct uvio *u = uvio_of(t);
    int rv;

    u->accept_cb = cb;
    rv = u->tcp.listen(&u->tcp, accept_cb);
    if (rv != 0) {
        memcpy(t->errmsg, u->tcp.errmsg, sizeof t->errmsg);
    }
    return rv;
}

static void connect_cb(struct raft_uv_connect *req,
                       struct uv_stream_s *stream,
                       int status)
{
    struct uvio_connect *c = req->data;
    struct raft_uv_connect *orig = c->orig;

    free(c);
    if (status == 0) {
        nodelay(stream);
    }
    orig->cb(orig, stream, status);
}

static int t_connect(struct raft_uv_transport *t,
                     struct raft_uv_connect *req,
                     raft_id id,
                     const char *address,
                     raft_uv_connect_cb cb)
{
    struct uvio *u = uvio_of(t);
    struct uvio_connect *c = malloc(sizeof *c);
    int rv;

    if (c == NULL) {
        return RAFT_NOMEM;
    }
    c->orig = req;
    c->req.data = c;
    req->cb = cb;
    rv = u->tcp.connect(&u->tcp, &c->req, id, address, connect_cb);
    if (rv != 0) {
        free(c);
        memcpy(t->errmsg, u->tcp.errmsg, sizeof t->errmsg);
    }
    return rv;
}

static void tcp_closed_cb(struct raft_uv_transport *tcp)
{
    struct uvio *u = tcp->data;

    /* raft_uv's callback finds itself through the transport it knows. */
    u->close_cb(&u->transport);
}

static void t_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    struct uvio *u = uvio_of(t);

    u->close_cb = cb;
    u->tcp.close(&u->tcp, tcp_closed_cb);
}

int uvio_init(struct uvio *u, uv_loop_t *loop, const char *dir, char *errmsg)
{
    int rv;

    memset(u, 0, sizeof *u);
    rv = raft_uv_tcp_init(&u->tcp, loop);
    if (rv != 0) {
        err_printf(errmsg, "raft_uv_tcp_init: %s", raft_strerror(rv));
        return rv == RAFT_NOMEM ? REPLICA_E_NOMEM : REPLICA_E_START;
    }
    u->tcp.data = u;
    u->transport.impl = u;
    u->transport.init = t_init;
    u->transport.listen = t_listen;
    u->transport.connect = t_connect;
    u->transport.close = t_close;
    rv = raft_uv_init(&u->io, loop, dir, &u->transport);
    if (rv != 0) {
        err_printf(errmsg, "raft_uv_init: %.200s", u->io.errmsg);
        raft_uv_tcp_close(&u->tcp);
        return rv == RAFT_NOMEM ? REPLICA_E_NOMEM : REPLICA_E_START;
    }
    raft_uv_set_auto_recovery(&u->io, false);
    store_io_init(&u->store, &u->io);
    return 0;
}

void uvio_close(struct uvio *u)
{
    raft_uv_close(&u->io);
    raft_uv_tcp_close(&u->tcp);
}
