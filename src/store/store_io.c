/* store/store_io.c: backend "uv", a pass-through to a raft_io's storage.
 *
 * Every call goes to the wrapped raft_io unchanged; only its errmsg is copied
 * back so the decorator can hand it to raft. Callbacks are raft's own and are
 * called by the wrapped io with raft's own request structs. */
#include "store/store.h"

#include <string.h>

static struct raft_io *io_of(struct store *s)
{
    return s->impl;
}

static int pass(struct store *s, int rv)
{
    if (rv != 0) {
        memcpy(s->errmsg, io_of(s)->errmsg, sizeof s->errmsg);
        s->errmsg[sizeof s->errmsg - 1] = '\0';
    }
    return rv;
}

static int io_load(struct store *s,
                   raft_term *term,
                   raft_id *voted_for,
                   struct raft_snapshot **snapshot,
                   raft_index *start_index,
                   struct raft_entry *entries[],
                   size_t *n_entries)
{
    struct raft_io *io = io_of(s);
    return pass(s, io->load(io, term, voted_for, snapshot, start_index, entries,
                            n_entries));
}

static int io_bootstrap(struct store *s, const struct raft_configuration *conf)
{
    return pass(s, io_of(s)->bootstrap(io_of(s), conf));
}

static int io_recover(struct store *s, const struct raft_configuration *conf)
{
    return pass(s, io_of(s)->recover(io_of(s), conf));
}

static int io_set_term(struct store *s, raft_term term)
{
    return pass(s, io_of(s)->set_term(io_of(s), term));
}

static int io_set_vote(struct store *s, raft_id server_id)
{
    return pass(s, io_of(s)->set_vote(io_of(s), server_id));
}

static int io_append(struct store *s,
                     struct raft_io_append *req,
                     const struct raft_entry entries[],
                     unsigned n,
                     raft_io_append_cb cb)
{
    return pass(s, io_of(s)->append(io_of(s), req, entries, n, cb));
}

static int io_truncate(struct store *s, raft_index index)
{
    return pass(s, io_of(s)->truncate(io_of(s), index));
}

static int io_snapshot_put(struct store *s,
                           unsigned trailing,
                           struct raft_io_snapshot_put *req,
                           const struct raft_snapshot *snapshot,
                           raft_io_snapshot_put_cb cb)
{
    return pass(s,
                io_of(s)->snapshot_put(io_of(s), trailing, req, snapshot, cb));
}

static int io_snapshot_get(struct store *s,
                           struct raft_io_snapshot_get *req,
                           raft_io_snapshot_get_cb cb)
{
    return pass(s, io_of(s)->snapshot_get(io_of(s), req, cb));
}

/* The wrapped io drains its own queue when the decorator closes it. */
static void io_close(struct store *s, store_close_cb cb)
{
    cb(s);
}

static const struct store_ops store_io_ops = {
    .load = io_load,
    .bootstrap = io_bootstrap,
    .recover = io_recover,
    .set_term = io_set_term,
    .set_vote = io_set_vote,
    .append = io_append,
    .truncate = io_truncate,
    .snapshot_put = io_snapshot_put,
    .snapshot_get = io_snapshot_get,
    .close = io_close,
};

void store_io_init(struct store *s, struct raft_io *io)
{
    memset(s, 0, sizeof *s);
    s->ops = &store_io_ops;
    s->name = "uv";
    s->impl = io;
}
