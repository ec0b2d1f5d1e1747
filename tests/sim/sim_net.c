/* tests/sim/sim_net.c: see sim_net.h. */
#include "sim_net.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"

struct sn_send
{
    struct raft_io_send req; /* what the stub sees */
    struct raft_io_send *orig;
    raft_io_send_cb cb;
    struct sim_net *sn;
    struct raft_message msg; /* our deep copy */
    bool orphan;             /* raft was told; drop the stub's completion */
    bool shadow;             /* the duplicate: no callback of its own */
    struct sn_send *next, **prevp;
};

struct sn_work
{
    struct raft_io_async_work req; /* what the stub sees */
    struct raft_io_async_work *orig;
    struct sim_net *sn;
    bool orphan;
    struct sn_work *next, **prevp;
};

static struct sim_net *sn_of(struct raft_io *io)
{
    return io->impl;
}

/* --- lists ---------------------------------------------------------------- */

#define LIST_PUSH(head, x)              \
    do {                                \
        (x)->next = (head);             \
        if ((head) != NULL) {           \
            (head)->prevp = &(x)->next; \
        }                               \
        (head) = (x);                   \
        (x)->prevp = &(head);           \
    } while (0)

#define LIST_DEL(x)                        \
    do {                                   \
        *(x)->prevp = (x)->next;           \
        if ((x)->next != NULL) {           \
            (x)->next->prevp = (x)->prevp; \
        }                                  \
        (x)->next = NULL;                  \
        (x)->prevp = NULL;                 \
    } while (0)

/* --- message copies ------------------------------------------------------- */

static void msg_free(struct raft_message *m)
{
    if (m->type == RAFT_IO_APPEND_ENTRIES &&
        m->append_entries.entries != NULL) {
        raft_free(m->append_entries.entries[0].batch);
        raft_free(m->append_entries.entries);
    } else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
        raft_configuration_close(&m->install_snapshot.conf);
        raft_free(m->install_snapshot.data.base);
    }
}

/* A copy that owns its entries (one batch) and snapshot data. 0 or
 * RAFT_NOMEM. */
static int msg_copy(struct raft_message *dst, const struct raft_message *src)
{
    *dst = *src;
    if (src->type == RAFT_IO_APPEND_ENTRIES &&
        src->append_entries.n_entries > 0) {
        const struct raft_append_entries *a = &src->append_entries;
        struct raft_entry *e = raft_calloc(a->n_entries, sizeof *e);
        size_t total = 0, at = 0;
        uint8_t *batch;

        for (unsigned k = 0; k < a->n_entries; k++) {
            total += (a->entries[k].buf.len + 7) & ~(size_t)7;
        }
        batch = raft_malloc(total > 0 ? total : 8);
        if (e == NULL || batch == NULL) {
            raft_free(e);
            raft_free(batch);
            return RAFT_NOMEM;
        }
        for (unsigned k = 0; k < a->n_entries; k++) {
            e[k] = a->entries[k];
            e[k].buf.base = batch + at;
            e[k].batch = batch;
            memcpy(batch + at, a->entries[k].buf.base, a->entries[k].buf.len);
            at += (a->entries[k].buf.len + 7) & ~(size_t)7;
        }
        dst->append_entries.entries = e;
    } else if (src->type == RAFT_IO_APPEND_ENTRIES) {
        dst->append_entries.entries = NULL;
    } else if (src->type == RAFT_IO_INSTALL_SNAPSHOT) {
        const struct raft_install_snapshot *s = &src->install_snapshot;
        struct raft_install_snapshot *d = &dst->install_snapshot;

        raft_configuration_init(&d->conf);
        for (unsigned k = 0; k < s->conf.n; k++) {
            const struct raft_server *v = &s->conf.servers[k];
            if (raft_configuration_add(&d->conf, v->id, v->address, v->role) !=
                0) {
                raft_configuration_close(&d->conf);
                return RAFT_NOMEM;
            }
        }
        d->data.base = raft_malloc(s->data.len > 0 ? s->data.len : 8);
        if (d->data.base == NULL) {
            raft_configuration_close(&d->conf);
            return RAFT_NOMEM;
        }
        memcpy(d->data.base, s->data.base, s->data.len);
    }
    return 0;
}

/* --- sends ---------------------------------------------------------------- */

static void send_cb(struct raft_io_send *req, int status)
{
    /* Through void *: req is the first member. */
    struct sn_send *w = (struct sn_send *)(void *)req;
    struct raft_io_send *orig = w->orig;
    raft_io_send_cb cb = w->cb;
    bool tell = !w->orphan && !w->shadow;

    msg_free(&w->msg);
    if (w->prevp != NULL) {
        LIST_DEL(w);
    }
    free(w);
    if (tell && cb != NULL) {
        cb(orig, status);
    }
}

static struct sn_send *send_new(struct sim_net *sn,
                                const struct raft_message *m,
                                int *rv)
{
    struct sn_send *w = calloc(1, sizeof *w);

    *rv = RAFT_NOMEM;
    if (w == NULL) {
        return NULL;
    }
    w->sn = sn;
    if ((*rv = msg_copy(&w->msg, m)) != 0) {
        free(w);
        return NULL;
    }
    return w;
}

static int sn_send(struct raft_io *io,
                   struct raft_io_send *req,
                   const struct raft_message *m,
                   raft_io_send_cb cb)
{
    struct sim_net *sn = sn_of(io);
    struct sn_send *w, *dup;
    int rv;

    w = send_new(sn, m, &rv);
    if (w == NULL) {
        return rv;
    }
    w->orig = req;
    w->cb = cb;
    req->cb = cb;
    if (sn->dup_countdown >= 0 && sn->dup_countdown-- == 0) {
        dup = send_new(sn, m, &rv);
        if (dup != NULL) {
            dup->shadow = true;
            /* Queued first, due at the same time: the stub completes it
             * first, so raft hears of the send after both went out. */
            if (sn->stub->send(sn->stub, &dup->req, &dup->msg, send_cb) != 0) {
                msg_free(&dup->msg);
                free(dup);
            } else {
                sn->duplicated++;
            }
        }
    }
    rv = sn->stub->send(sn->stub, &w->req, &w->msg, send_cb);
    if (rv != 0) {
        msg_free(&w->msg);
        free(w);
        return rv;
    }
    LIST_PUSH(sn->sends, w);
    return 0;
}

/* --- work ----------------------------------------------------------------- */

static struct sn_work *work_of(struct raft_io_async_work *req)
{
    return (struct sn_work *)(void *)req; /* req is the first member */
}

static int work_fn(struct raft_io_async_work *req)
{
    struct sn_work *w = work_of(req);

    return w->orphan ? 0 : w->orig->work(w->orig);
}

static void work_cb(struct raft_io_async_work *req, int status)
{
    struct sn_work *w = work_of(req);
    struct raft_io_async_work *orig = w->orig;
    bool tell = !w->orphan;

    if (w->prevp != NULL) {
        LIST_DEL(w);
    }
    free(w);
    if (tell) {
        orig->cb(orig, status);
    }
}

static int sn_async_work(struct raft_io *io,
                         struct raft_io_async_work *req,
                         raft_io_async_work_cb cb)
{
    struct sim_net *sn = sn_of(io);
    struct sn_work *w = calloc(1, sizeof *w);
    int rv;

    if (w == NULL) {
        return RAFT_NOMEM;
    }
    req->cb = cb;
    w->orig = req;
    w->sn = sn;
    w->req.work = work_fn;
    rv = sn->stub->async_work(sn->stub, &w->req, work_cb);
    if (rv != 0) {
        free(w);
        return rv;
    }
    LIST_PUSH(sn->works, w);
    return 0;
}

/* --- the rest ------------------------------------------------------------- */

static void stub_tick(struct raft_io *stub)
{
    struct sim_net *sn = stub->data;

    if (!sn->down) {
        sn->tick_cb(&sn->io);
    }
}

/* A message for a crashed node (the nemesis may lift a link's loss while
 * the node is down) is lost, as on a host that is off; it is ours to free
 * (the receiver owns a message's entries and snapshot). */
static void stub_recv(struct raft_io *stub, struct raft_message *m)
{
    struct sim_net *sn = stub->data;

    if (sn->down) {
        msg_free(m);
        return;
    }
    sn->recv_cb(&sn->io, m);
}

static int sn_init(struct raft_io *io, raft_id id, const char *address)
{
    struct sim_net *sn = sn_of(io);

    return sn->stub->init(sn->stub, id, address);
}

static int sn_start(struct raft_io *io,
                    unsigned msecs,
                    raft_io_tick_cb tick,
                    raft_io_recv_cb recv)
{
    struct sim_net *sn = sn_of(io);

    sn->tick_cb = tick;
    sn->recv_cb = recv;
    sn->down = false;
    return sn->stub->start(sn->stub, msecs, stub_tick, stub_recv);
}

static raft_time sn_time(struct raft_io *io)
{
    struct sim_net *sn = sn_of(io);
    return sn->stub->time(sn->stub);
}

static int sn_random(struct raft_io *io, int min, int max)
{
    struct sim_net *sn = sn_of(io);
    return sn->stub->random(sn->stub, min, max);
}

void sim_net_crash(struct sim_net *sn)
{
    sn->down = true; /* until raft starts again on us */
    /* Work first: a snapshot's completion may still send or store. */
    while (sn->works != NULL) {
        struct sn_work *w = sn->works;
        struct raft_io_async_work *orig = w->orig;
        int rv;

        LIST_DEL(w);
        w->orphan = true; /* the stub frees it when it comes due */
        rv = orig->work(orig);
        orig->cb(orig, rv);
    }
    while (sn->sends != NULL) {
        struct sn_send *w = sn->sends;

        LIST_DEL(w);
        w->orphan = true; /* the stub frees it when it comes due */
        if (w->cb != NULL) {
            w->cb(w->orig, RAFT_NOCONNECTION);
        }
    }
}

static void stub_closed(struct raft_io *stub)
{
    struct sim_net *sn = stub->data;

    if (sn->close_cb != NULL) {
        sn->close_cb(&sn->io);
    }
}

static void sn_close(struct raft_io *io, raft_io_close_cb cb)
{
    struct sim_net *sn = sn_of(io);

    sim_net_crash(sn); /* raft_uv cancels what is queued at close */
    sn->close_cb = cb;
    sn->stub->close(sn->stub, stub_closed);
}

void sim_net_wrap(struct sim_net *sn, struct raft *r)
{
    struct raft_io *stub = r->io;

    if (stub == &sn->io) {
        return; /* raft_init'ed on us after a crash */
    }
    memset(sn, 0, sizeof *sn);
    sn->stub = stub;
    sn->dup_countdown = -1;
    sn->io.version = stub->version;
    sn->io.impl = sn;
    sn->io.data = r;
    sn->io.init = sn_init;
    sn->io.close = sn_close;
    sn->io.start = sn_start;
    sn->io.send = sn_send;
    sn->io.time = sn_time;
    sn->io.random = sn_random;
    sn->io.async_work = sn_async_work;
    /* storage: rio routes it to the store; none of it reaches us */
    stub->data = sn;
    r->io = &sn->io;
}
