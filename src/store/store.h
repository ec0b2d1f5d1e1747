/* store/store.h: the storage half of a raft_io, as a pluggable interface.
 *
 * The raft_io decorator (raft/rio.h) gives raft its network, timers and
 * threadpool from an inner raft_uv instance and routes every storage method
 * here. The methods mirror struct raft_io's storage methods one for one, with
 * the same contracts (raft.h): load/bootstrap/recover/set_term/set_vote/
 * truncate are synchronous and durable before they return; append,
 * snapshot_put and snapshot_get complete through their callbacks, append
 * callbacks strictly in order. Ownership of entries, snapshots and buffers is
 * exactly raft's. (truncate: raft_uv, and the log store, return at once and
 * order the truncation behind the appends queued before it, with every
 * later append behind it; no acknowledgement can depend on it before it is
 * durable.)
 *
 * Backends: "uv" (store_io.c: pass-through to a raft_io's own storage, i.e.
 * raft_uv's, or the raft_fixture's in tests); "uring" and "pwrite"
 * (store_log.h, docs/store.md).
 *
 * A store is used from the raft loop thread only. */
#ifndef ONCE_STORE_STORE_H_
#define ONCE_STORE_STORE_H_

#include <stddef.h>

#include <raft.h>

struct store;

typedef void (*store_close_cb)(struct store *s);

struct store_ops
{
    int (*load)(struct store *s,
                raft_term *term,
                raft_id *voted_for,
                struct raft_snapshot **snapshot,
                raft_index *start_index,
                struct raft_entry *entries[],
                size_t *n_entries);
    int (*bootstrap)(struct store *s, const struct raft_configuration *conf);
    int (*recover)(struct store *s, const struct raft_configuration *conf);
    int (*set_term)(struct store *s, raft_term term);
    int (*set_vote)(struct store *s, raft_id server_id);
    int (*append)(struct store *s,
                  struct raft_io_append *req,
                  const struct raft_entry entries[],
                  unsigned n,
                  raft_io_append_cb cb);
    int (*truncate)(struct store *s, raft_index index);
    int (*snapshot_put)(struct store *s,
                        unsigned trailing,
                        struct raft_io_snapshot_put *req,
                        const struct raft_snapshot *snapshot,
                        raft_io_snapshot_put_cb cb);
    int (*snapshot_get)(struct store *s,
                        struct raft_io_snapshot_get *req,
                        raft_io_snapshot_get_cb cb);
    /* Finish or cancel what is queued, then call @cb (may be synchronous).
     * Called by the decorator before it closes the inner raft_io. */
    void (*close)(struct store *s, store_close_cb cb);
};

struct store
{
    const struct store_ops *ops;
    const char *name; /* backend name for logs and status: "uv", ... */
    void *impl;
    void *owner; /* the decorator using it (set by rio) */
    /* Set by load when it cut a torn tail at this index: the cut record may
     * have been acknowledged, so the decorator keeps the node from voting
     * or campaigning until its log has passed this index again. 0: none. */
    raft_index cut_index;
    /* Why the last failing call failed; the decorator copies it into the
     * raft_io's errmsg, where raft reads it. */
    char errmsg[RAFT_ERRMSG_BUF_SIZE];
};

/* Backend "uv": forward every storage call to @io (borrowed; must outlive the
 * store), whose own storage does the work: a raft_uv instance in production,
 * a raft_fixture server's io in tests. Never fails. */
void store_io_init(struct store *s, struct raft_io *io);

#endif /* ONCE_STORE_STORE_H_ */
