/* tests/raft/fixture_store.c: see fixture_store.h. */
#include "fixture_store.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct fstore_op
{
    bool truncate; /* else an append */
    raft_index index;
    struct raft_io_append req; /* ours, given to the fixture's io */
    struct raft_io_append *orig;
    raft_io_append_cb cb;
    const struct raft_entry *entries;
    unsigned n;
    struct fixture_store *fs;
    struct fstore_op *next;
};

static struct fixture_store *fs_of(struct store *s)
{
    /* The store is the first member; its impl is the io (store_io). */
    return (struct fixture_store *)(void *)s;
}

static int pass(struct fixture_store *fs, int rv)
{
    if (rv != 0) {
        memcpy(fs->store.errmsg, fs->io->errmsg, sizeof fs->store.errmsg);
    }
    return rv;
}

static void drain(struct fixture_store *fs);

static void append_cb(struct raft_io_append *req, int status)
{
    struct fstore_op *op = req->data;
    struct fixture_store *fs = op->fs;
    struct raft_io_append *orig = op->orig;
    raft_io_append_cb cb = op->cb;

    free(op);
    fs->inflight--;
    cb(orig, status);
    drain(fs);
}

static int issue(struct fstore_op *op)
{
    struct fixture_store *fs = op->fs;
    int rv;

    op->req.data = op;
    fs->inflight++;
    rv = fs->io->append(fs->io, &op->req, op->entries, op->n, append_cb);
    if (rv != 0) {
        fs->inflight--;
        pass(fs, rv);
    }
    return rv;
}

static void drain(struct fixture_store *fs)
{
    struct fstore_op *op;

    while ((op = fs->head) != NULL) {
        if (op->truncate && fs->inflight > 0) {
            return;
        }
        fs->head = op->next;
        if (fs->head == NULL) {
            fs->tail = NULL;
        }
        if (op->truncate) {
            (void)fs->io->truncate(fs->io, op->index - fs->offset);
            free(op);
        } else {
            struct raft_io_append *orig = op->orig;
            raft_io_append_cb cb = op->cb;

            if (issue(op) != 0) {
                free(op);
                cb(orig, RAFT_IOERR);
            }
        }
    }
}

static void push(struct fixture_store *fs, struct fstore_op *op)
{
    op->next = NULL;
    if (fs->tail != NULL) {
        fs->tail->next = op;
    } else {
        fs->head = op;
    }
    fs->tail = op;
}

static int fs_append(struct store *s,
                     struct raft_io_append *req,
                     const struct raft_entry entries[],
                     unsigned n,
                     raft_io_append_cb cb)
{
    struct fixture_store *fs = fs_of(s);
    struct fstore_op *op = calloc(1, sizeof *op);
    int rv;

    if (op == NULL) {
        return RAFT_NOMEM;
    }
    op->fs = fs;
    op->orig = req;
    op->cb = cb;
    op->entries = entries;
    op->n = n;
    if (fs->head != NULL) {
        push(fs, op); /* behind a waiting truncation */
        return 0;
    }
    rv = issue(op);
    if (rv != 0) {
        free(op);
    }
    return rv;
}

static int fs_truncate(struct store *s, raft_index index)
{
    struct fixture_store *fs = fs_of(s);
    struct fstore_op *op;

    if (fs->inflight == 0 && fs->head == NULL) {
        return pass(fs, fs->io->truncate(fs->io, index - fs->offset));
    }
    op = calloc(1, sizeof *op);
    if (op == NULL) {
        return RAFT_NOMEM;
    }
    op->fs = fs;
    op->truncate = true;
    op->index = index;
    push(fs, op);
    fs->deferred_truncations++;
    return 0;
}

struct fstore_put
{
    struct raft_io_snapshot_put req; /* ours, given to the fixture's io */
    struct raft_io_snapshot_put *orig;
    raft_io_snapshot_put_cb cb;
    struct fixture_store *fs;
    raft_index index;
    raft_index conf_index;
    bool install; /* trailing 0 */
};

static void put_cb(struct raft_io_snapshot_put *req, int status)
{
    struct fstore_put *p = req->data;
    struct fixture_store *fs = p->fs;
    struct raft_io_snapshot_put *orig = p->orig;
    raft_io_snapshot_put_cb cb = p->cb;

    if (status == 0) {
        fs->snap_index = p->index;
        fs->snap_conf_index = p->conf_index;
        if (p->install) {
            /* The fixture emptied its entry array: it now starts after
             * the installed snapshot. */
            fs->offset = p->index;
        }
    }
    free(p);
    cb(orig, status);
}

static int fs_snapshot_put(struct store *s,
                           unsigned trailing,
                           struct raft_io_snapshot_put *req,
                           const struct raft_snapshot *snapshot,
                           raft_io_snapshot_put_cb cb)
{
    struct fixture_store *fs = fs_of(s);
    struct fstore_put *p = calloc(1, sizeof *p);
    int rv;

    if (p == NULL) {
        return RAFT_NOMEM;
    }
    p->orig = req;
    p->cb = cb;
    p->fs = fs;
    p->index = snapshot->index;
    p->conf_index = snapshot->configuration_index;
    p->install = trailing == 0;
    p->req.data = p;
    rv = fs->io->snapshot_put(fs->io, trailing, &p->req, snapshot, put_cb);
    if (rv != 0) {
        free(p);
    }
    return pass(fs, rv);
}

struct fstore_get
{
    struct raft_io_snapshot_get req;
    struct raft_io_snapshot_get *orig;
    raft_io_snapshot_get_cb cb;
    struct fixture_store *fs;
};

static void get_cb(struct raft_io_snapshot_get *req,
                   struct raft_snapshot *snapshot,
                   int status)
{
    struct fstore_get *g = req->data;
    struct fixture_store *fs = g->fs;
    struct raft_io_snapshot_get *orig = g->orig;
    raft_io_snapshot_get_cb cb = g->cb;

    /* 0.15's snapshotCopy (the fixture's) does not copy
     * configuration_index: the leader would send garbage in InstallSnapshot
     * and the follower take it as its committed configuration's index. */
    if (status == 0 && snapshot != NULL && snapshot->index == fs->snap_index) {
        snapshot->configuration_index = fs->snap_conf_index;
    }
    free(g);
    cb(orig, snapshot, status);
}

static int fs_snapshot_get(struct store *s,
                           struct raft_io_snapshot_get *req,
                           raft_io_snapshot_get_cb cb)
{
    struct fixture_store *fs = fs_of(s);
    struct fstore_get *g = calloc(1, sizeof *g);
    int rv;

    if (g == NULL) {
        return RAFT_NOMEM;
    }
    g->orig = req;
    g->cb = cb;
    g->fs = fs;
    g->req.data = g;
    rv = fs->io->snapshot_get(fs->io, &g->req, get_cb);
    if (rv != 0) {
        free(g);
    }
    return pass(fs, rv);
}

/* The fixture completes what is in flight itself (raft_fixture_close). */
static void fs_close(struct store *s, store_close_cb cb)
{
    struct fixture_store *fs = fs_of(s);
    struct fstore_op *op;

    while ((op = fs->head) != NULL) {
        fs->head = op->next;
        if (!op->truncate) {
            op->cb(op->orig, RAFT_CANCELED);
        }
        free(op);
    }
    fs->tail = NULL;
    cb(s);
}

void fixture_store_init(struct fixture_store *fs, struct raft_io *io)
{
    /* Everything but the ordered and translated calls is backend "uv"'s
     * pass-through (store_io.c), whose impl is the io. */
    static struct store_ops ops;

    memset(fs, 0, sizeof *fs);
    fs->io = io;
    store_io_init(&fs->store, io);
    ops = *fs->store.ops;
    ops.append = fs_append;
    ops.truncate = fs_truncate;
    ops.snapshot_put = fs_snapshot_put;
    ops.snapshot_get = fs_snapshot_get;
    ops.close = fs_close;
    fs->store.ops = &ops;
    fs->store.name = "fixture";
}
