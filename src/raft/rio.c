/* raft/rio.c: the raft_io decorator (see rio.h).
 *
 * Happy path: raft calls a method on rio->io; network/timer/threadpool
 * methods go to rio->inner, storage methods to rio->store. The inner io calls
 * back with itself as argument (inner->data points to the rio), and rio calls
 * raft's callback with &rio->io, whose data is the struct raft.
 *
 * Failure modes: a storage call that fails (synchronously or in its
 * callback) is a G4 fail-stop; raft never sees the error, because 0.15's
 * handling of it can reuse log indexes (B4). Cancellations while closing are
 * not failures. */
#include "raft/rio.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/err.h"
#include "common/sim_mutation.h"
#include "raft/guard.h"

static struct rio *rio_of(struct raft_io *io)
{
    return io->impl;
}

static struct raft *raft_of(struct rio *rio)
{
    return rio->io.data;
}

static void event(struct rio *rio)
{
    if (rio->hooks.event != NULL && !rio->closing) {
        rio->hooks.event(rio->hooks.arg);
    }
}

/* G4. In a node the hook never returns. */
static void fatal(struct rio *rio, const char *what, int status)
{
    const char *msg = rio->store->errmsg;

    rio->stats.storage_errors++;
    if (guard_on(GUARD_G4)) {
        if (rio->hooks.fatal != NULL) {
            rio->hooks.fatal(rio->hooks.arg, what, status, msg);
            return;
        }
        fprintf(stderr,
                "level=fatal msg=\"storage failed, stopping\" call=%s "
                "status=%d error=\"%s\" detail=\"%s\"\n",
                what, status, raft_strerror(status), msg);
        abort();
    }
}

/* Storage failures are fail-stop unless G4 is switched off in a test. */
static bool fail_stop(const struct rio *rio)
{
    (void)rio;
    return guard_on(GUARD_G4);
}

/* err_printf fills ERR_MSG_SIZE bytes: the two buffers it writes here, the
 * store's and raft's, are that size. */
_Static_assert(sizeof((struct raft_io *)0)->errmsg == ERR_MSG_SIZE,
               "raft_io errmsg is not ERR_MSG_SIZE");
_Static_assert(sizeof((struct store *)0)->errmsg == ERR_MSG_SIZE,
               "store errmsg is not ERR_MSG_SIZE");

static void copy_errmsg(struct rio *rio, const char *msg)
{
    err_printf(rio->io.errmsg, "%s", msg);
}

/* --- inner callbacks ------------------------------------------------------ */

static void inner_tick_cb(struct raft_io *inner)
{
    struct rio *rio = inner->data;

    rio->tick_cb(&rio->io);
    event(rio);
}

static bool novote_active(struct rio *rio)
{
    if (rio->novote && rio_novote_index(rio) == 0) {
        rio->novote = false; /* the log has passed the cut index again */
    }
    return rio->novote;
}

static bool is_vote_traffic(const struct raft_message *m)
{
    return m->type == RAFT_IO_REQUEST_VOTE || m->type == RAFT_IO_TIMEOUT_NOW;
}

/* A received AppendEntries' entries belong to whoever handles it: raft
 * frees each distinct batch, then the array. */
static void free_entries(struct raft_entry *entries, unsigned n)
{
    void *batch = NULL;

    for (unsigned i = 0; i < n; i++) {
        if (entries[i].batch != batch) {
            batch = entries[i].batch;
            raft_free(batch);
        }
    }
    raft_free(entries);
}

static void inner_recv_cb(struct raft_io *inner, struct raft_message *m)
{
    struct rio *rio = inner->data;
    struct raft *r = raft_of(rio);

    if (guard_g2_drop(r, m)) {
        rio->stats.g2_dropped++;
        return;
    }
    if (is_vote_traffic(m) && novote_active(rio)) {
        rio->stats.novote_dropped++;
        return;
    }
    if (m->type == RAFT_IO_APPEND_ENTRIES && guard_g10_below_snapshot(r, m)) {
        /* G10: 0.15 rejects an AppendEntries whose previous entry it has
         * compacted into its own snapshot ("no entry at index"), and the
         * leader probes further down; a leader that sent an older snapshot
         * than ours then loops between probing and "have more recent
         * snapshot" for ever (found by tests/raft/random.c). Everything up
         * to our snapshot is committed, so it is in the leader's log too:
         * answer as a heartbeat at our snapshot's last entry, which tells
         * the leader we match up to there; it sends the rest again. */
        free_entries(m->append_entries.entries, m->append_entries.n_entries);
        m->append_entries.entries = NULL;
        m->append_entries.n_entries = 0;
        m->append_entries.prev_log_index = r->log.snapshot.last_index;
        m->append_entries.prev_log_term = r->log.snapshot.last_term;
        rio->stats.g10_rewritten++;
    }
    if (m->type == RAFT_IO_APPEND_ENTRIES) {
        rio->seen_leader_commit = m->append_entries.leader_commit;
        rio->seen_leader_id = m->server_id;
        rio->seen_leader_ms = rio->inner->time(rio->inner);
    }
    if (m->type == RAFT_IO_APPEND_ENTRIES && guard_on(GUARD_G11) &&
        m->append_entries.leader_commit >
            m->append_entries.prev_log_index + m->append_entries.n_entries) {
        /* G11: 0.15 sets a follower's commit index to min(leader_commit,
         * last_stored) (replicationAppend for heartbeats, appendFollowerCb
         * after a write), and last_stored may include entries of an older
         * term beyond what this request checked: the follower would apply
         * an entry that conflicts with the committed one (found by
         * tests/raft/random.c: "conflicting terms ... commit index" after
         * the fact). Raft's rule is min(leaderCommit, index of last new
         * entry): only what this request checked is known to match. */
        m->append_entries.leader_commit =
            m->append_entries.prev_log_index + m->append_entries.n_entries;
        rio->stats.g11_clamped++;
    }
    if (m->type == RAFT_IO_APPEND_ENTRIES && guard_g6_rollback_stop(r, m)) {
        rio->stats.g6_stops++;
        err_printf(rio->store->errmsg,
                   "a membership rollback would need configuration entry %llu, "
                   "which an installed snapshot compacted (B5): restarting "
                   "rebuilds the configuration from the log",
                   (unsigned long long)r->configuration_index);
        fatal(rio, "recv", RAFT_INVALID);
        /* (test hook returned) the message is lost; raft would have owned
         * its entries, so free them as raft does (entryBatchesDestroy). */
        free_entries(m->append_entries.entries, m->append_entries.n_entries);
        return;
    }
    ONCE_ASSERT(!rio->in_append, "raft's recv is not re-entered");
    if (m->type == RAFT_IO_APPEND_ENTRIES) {
        rio->in_append = true;
        rio->append_last =
            m->append_entries.prev_log_index + m->append_entries.n_entries;
    }
    rio->recv_cb(&rio->io, m);
    rio->in_append = false;
    event(rio);
}

static void inner_close_cb(struct raft_io *inner)
{
    struct rio *rio = inner->data;

    if (rio->close_cb != NULL) {
        rio->close_cb(&rio->io);
    }
}

/* --- network, timers, threadpool: to the inner io ------------------------- */

static int rio_io_init(struct raft_io *io, raft_id id, const char *address)
{
    struct rio *rio = rio_of(io);
    int rv;

    rv = rio->inner->init(rio->inner, id, address);
    if (rv != 0) {
        copy_errmsg(rio, rio->inner->errmsg);
    }
    return rv;
}

static int rio_io_start(struct raft_io *io,
                        unsigned msecs,
                        raft_io_tick_cb tick,
                        raft_io_recv_cb recv)
{
    struct rio *rio = rio_of(io);
    int rv;

    rio->tick_cb = tick;
    rio->recv_cb = recv;
    rv = rio->inner->start(rio->inner, msecs, inner_tick_cb, inner_recv_cb);
    if (rv != 0) {
        copy_errmsg(rio, rio->inner->errmsg);
    }
    return rv;
}

/* G7: what a synchronous success reply may claim as matching: the entries
 * the request checked (prev + n), and every entry this follower knows to be
 * committed (its commit index, its snapshot), which are the same in every
 * later leader's log. Without the second part a follower whose own snapshot
 * is ahead of the leader's probe would answer every heartbeat with prev, and
 * a leader waiting in its snapshot state for match >= the snapshot it sent
 * would wait for ever (found by tests/raft/random.c). */
static raft_index g7_bound(const struct rio *rio)
{
    const struct raft *r = rio->io.data;
    raft_index bound = rio->append_last;

    if (r->commit_index > bound) {
        bound = r->commit_index;
    }
    if (r->log.snapshot.last_index > bound) {
        bound = r->log.snapshot.last_index;
    }
    return bound;
}

static void own_send_cb(struct raft_io_send *req, int status)
{
    (void)status;
    raft_free(req);
}

static int rio_io_send(struct raft_io *io,
                       struct raft_io_send *req,
                       const struct raft_message *m,
                       raft_io_send_cb cb)
{
    struct rio *rio = rio_of(io);
    struct raft_message copy;
    int rv;

    if (is_vote_traffic(m) && novote_active(rio)) {
        /* Not sending is what a lost packet looks like. raft's vote send
         * callbacks only free the request (0.15 election.c), and transfer
         * passes none. */
        rio->stats.novote_dropped++;
        if (cb != NULL) {
            cb(req, 0);
        }
        return 0;
    }
    if (guard_on(GUARD_G9) && rio->in_append_cb &&
        m->type == RAFT_IO_APPEND_ENTRIES_RESULT &&
        raft_of(rio)->current_term != rio->append_cb_term) {
        /* 0.15's appendFollowerCb answers a write that completed after the
         * term changed, to the new leader, with last_stored: entries of the
         * old term that the new leader never checked would count as a match
         * (B13 through the asynchronous reply). Lost, as upstream 35479fc
         * does; the new leader's next AppendEntries asks again. The send
         * callback of these results only frees the request. */
        rio->stats.g9_dropped++;
        if (cb != NULL) {
            cb(req, 0);
        }
        return 0;
    }
    if (m->type == RAFT_IO_REQUEST_VOTE_RESULT && rio->vote_refused != 0 &&
        m->server_id == rio->vote_refused &&
        m->request_vote_result.vote_granted &&
        m->request_vote_result.pre_vote != raft_tribool_true &&
        m->request_vote_result.term == rio->vote_term) {
        /* G12: the vote set_vote refused (see there). */
        copy = *m;
        copy.request_vote_result.vote_granted = false;
        m = &copy;
    }
    if (guard_on(GUARD_G7) && rio->in_append &&
        m->type == RAFT_IO_APPEND_ENTRIES_RESULT &&
        m->append_entries_result.rejected == 0 &&
        m->append_entries_result.last_log_index > g7_bound(rio)) {
        /* B13: 0.15 answers a heartbeat (or a request whose entries it
         * already has) with last_stored, which may include unchecked
         * entries that conflict with the leader's; the leader would count
         * them. Report only what this request checked or what is known to
         * be committed. (The reply after a disk write is G9's.) */
        copy = *m;
        copy.append_entries_result.last_log_index = g7_bound(rio);
        rio->stats.g7_clamped++;
        m = &copy;
    }
    if (cb == NULL) {
        /* raft_transfer sends TimeoutNow with the send request embedded in
         * the caller's struct raft_transfer and no callback; raft_uv keeps
         * the request until the write ends, which may be after the transfer
         * callback let the caller free it (upstream c6cfe58). Send a request
         * of ours instead, freed by its own callback. */
        struct raft_io_send *own = raft_malloc(sizeof *own);

        if (own == NULL) {
            return RAFT_NOMEM; /* raft treats a failed send as lost */
        }
        own->data = NULL;
        rv = rio->inner->send(rio->inner, own, m, own_send_cb);
        if (rv != 0) {
            raft_free(own);
            copy_errmsg(rio, rio->inner->errmsg);
        }
        return rv;
    }
    rv = rio->inner->send(rio->inner, req, m, cb);
    if (rv != 0) {
        copy_errmsg(rio, rio->inner->errmsg);
    }
    return rv;
}

static raft_time rio_io_time(struct raft_io *io)
{
    struct rio *rio = rio_of(io);
    return rio->inner->time(rio->inner);
}

static int rio_io_random(struct raft_io *io, int min, int max)
{
    struct rio *rio = rio_of(io);
    return rio->inner->random(rio->inner, min, max);
}

/* Raft's work, run by the inner io through a wrapper of ours: 0.15's
 * raft_fixture overwrites req->data with its io's data pointer (fixed in
 * 0.18, 540b6cc), which under the decorator is not the raft that set it. */
struct rio_work
{
    struct raft_io_async_work req; /* what the inner io sees */
    struct raft_io_async_work *orig;
    struct rio *rio;
};

static struct rio_work *rio_work_of(struct raft_io_async_work *req)
{
    /* Through void *: req is the first member, so the alignment holds. */
    return (struct rio_work *)(void *)((char *)req -
                                       offsetof(struct rio_work, req));
}

static int rio_work_fn(struct raft_io_async_work *req)
{
    struct raft_io_async_work *orig = rio_work_of(req)->orig;

    return orig->work(orig);
}

static void rio_work_cb(struct raft_io_async_work *req, int status)
{
    struct rio_work *w = rio_work_of(req);
    struct raft_io_async_work *orig = w->orig;
    struct rio *rio = w->rio;

    ONCE_ASSERT(orig->cb != NULL, "rio_io_async_work kept raft's callback");
    raft_free(w);
    orig->cb(orig, status);
    /* As after every callback into raft: the replica polls (a snapshot
     * that ended releases the view a state digest may wait for). */
    event(rio);
}

static int rio_io_async_work(struct raft_io *io,
                             struct raft_io_async_work *req,
                             raft_io_async_work_cb cb)
{
    struct rio *rio = rio_of(io);
    struct rio_work *w = raft_malloc(sizeof *w);
    int rv;

    if (w == NULL) {
        return RAFT_NOMEM;
    }
    req->cb = cb;
    w->orig = req;
    w->rio = rio;
    w->req.work = rio_work_fn;
    rv = rio->inner->async_work(rio->inner, &w->req, rio_work_cb);
    if (rv != 0) {
        raft_free(w);
    }
    return rv;
}

static void store_closed_cb(struct store *s)
{
    struct rio *rio = s->owner;

    ONCE_ASSERT(rio->closing, "the store closes only when raft closes rio");
    rio->inner->close(rio->inner, inner_close_cb);
}

static void rio_io_close(struct raft_io *io, raft_io_close_cb cb)
{
    struct rio *rio = rio_of(io);

    ONCE_ASSERT(!rio->closing, "raft closes its io once");
    rio->closing = true;
    rio->close_cb = cb;
    /* The store drains first (it may still complete appends through
     * callbacks into raft), then the inner io closes. Backends whose close
     * is asynchronous finish through this same order. */
    rio->store->ops->close(rio->store, store_closed_cb);
}

/* --- storage: to the store, with G4 ----------------------------------------
 */

static int rio_io_load(struct raft_io *io,
                       raft_term *term,
                       raft_id *voted_for,
                       struct raft_snapshot **snapshot,
                       raft_index *start_index,
                       struct raft_entry *entries[],
                       size_t *n_entries)
{
    struct rio *rio = rio_of(io);
    int rv;

    /* A load failure is not fail-stop: raft_start fails and the node refuses
     * to start, saying why. */
    rv = rio->store->ops->load(rio->store, term, voted_for, snapshot,
                               start_index, entries, n_entries);
    if (rv != 0) {
        copy_errmsg(rio, rio->store->errmsg);
        return rv;
    }
    if (rio->store->cut_index != 0) {
        rio_set_novote(rio, rio->store->cut_index);
    }
    rio->vote_term = *term;
    rio->vote_for = *voted_for;
    rio->vote_refused = 0;
    return 0;
}

static int rio_io_bootstrap(struct raft_io *io,
                            const struct raft_configuration *conf)
{
    struct rio *rio = rio_of(io);
    int rv = rio->store->ops->bootstrap(rio->store, conf);

    if (rv != 0) {
        copy_errmsg(rio, rio->store->errmsg); /* CANTBOOTSTRAP is normal */
    }
    return rv;
}

static int rio_io_recover(struct raft_io *io,
                          const struct raft_configuration *conf)
{
    struct rio *rio = rio_of(io);
    int rv = rio->store->ops->recover(rio->store, conf);

    if (rv != 0) {
        copy_errmsg(rio, rio->store->errmsg);
    }
    return rv;
}

/* Synchronous storage calls: a failure is fail-stop. */
static int sync_result(struct rio *rio, const char *what, int rv)
{
    if (rv != 0) {
        copy_errmsg(rio, rio->store->errmsg);
        fatal(rio, what, rv);
    }
    return rv;
}

static int rio_io_set_term(struct raft_io *io, raft_term term)
{
    /* A new term has no vote yet (raft_io: set_term resets it). */
    rio_of(io)->vote_term = term;
    rio_of(io)->vote_for = 0;
    rio_of(io)->vote_refused = 0;
    struct rio *rio = rio_of(io);
    return sync_result(rio, "set_term",
                       rio->store->ops->set_term(rio->store, term));
}

static int rio_io_set_vote(struct raft_io *io, raft_id server_id)
{
    struct rio *rio = rio_of(io);
    int rv;

    if (guard_on(GUARD_G12) && server_id != 0 && rio->vote_for != 0 &&
        rio->vote_for != server_id &&
        rio->vote_term == raft_of(rio)->current_term) {
        /* G12: a second vote in this term (0.15 grants one to a transfer's
         * target whatever it voted before). Keep the first on disk and
         * send the answer to this candidate as not granted (rio_io_send);
         * raft's memory says it voted for @server_id, which only makes it
         * refuse further candidates of this term. */
        rio->vote_refused = server_id;
        rio->stats.g12_refused++;
        return 0;
    }
    rv = sync_result(rio, "set_vote",
                     rio->store->ops->set_vote(rio->store, server_id));
    if (rv == 0) {
        rio->vote_term = raft_of(rio)->current_term;
        rio->vote_for = server_id;
    }
    return rv;
}

static int rio_io_truncate(struct raft_io *io, raft_index index)
{
    struct rio *rio = rio_of(io);
    struct raft *r = raft_of(rio);
    int rv;

    rv = sync_result(rio, "truncate",
                     rio->store->ops->truncate(rio->store, index));
    if (rv == 0 && guard_b6_stale(r, index)) {
        /* B6: after a restart 0.15 takes the last configuration entry of
         * the log as committed. This truncation removes it, and 0.15 rolls
         * back only an entry it knows to be uncommitted, so its in-memory
         * configuration is now one the log no longer has. Stop: the restart
         * rebuilds the configuration from the log as it is now. */
        err_printf(rio->store->errmsg,
                   "truncation at %llu removed the configuration entry %llu "
                   "raft took as committed after a restart (B6)",
                   (unsigned long long)index,
                   (unsigned long long)r->configuration_index);
        fatal(rio, "truncate", RAFT_INVALID);
    }
    return rv;
}

/* Asynchronous storage calls go to the store with a request of ours, so the
 * completion passes through G4 before raft sees it. */
struct rio_append
{
    struct raft_io_append req; /* given to the store */
    struct raft_io_append *orig;
    struct rio *rio;
    raft_term term; /* raft's term when it appended (G9) */
    bool early;     /* mutant ack-before-fsync: raft was told at submission */
};

static void append_cb(struct raft_io_append *req, int status)
{
    struct rio_append *a = req->data;
    struct rio *rio = a->rio;
    struct raft_io_append *orig = a->orig;
    raft_term term = a->term;
    bool early = a->early;

    raft_free(a);
    if (status != 0 && !(rio->closing && status == RAFT_CANCELED)) {
        fatal(rio, "append", status);
        if (fail_stop(rio)) {
            return; /* (test hook returned) the request never completes */
        }
    }
    if (early) {
        return; /* the simulator's seeded bug told raft already */
    }
    rio->in_append_cb = true;
    rio->append_cb_term = term;
    orig->cb(orig, status);
    rio->in_append_cb = false;
    event(rio);
}

static int rio_io_append(struct raft_io *io,
                         struct raft_io_append *req,
                         const struct raft_entry entries[],
                         unsigned n,
                         raft_io_append_cb cb)
{
    struct rio *rio = rio_of(io);
    struct rio_append *a;
    unsigned i;
    int rv;

    for (i = 0; i < n; i++) {
        /* B8: Debian's NDEBUG build writes a payload whose length is not a
         * multiple of 8 as an unreadable segment. Every payload of ours is
         * padded (entry.h); anything else is a bug: refuse it loudly. */
        if (entries[i].buf.len % 8 != 0) {
            err_printf(io->errmsg,
                       "entry payload of %zu bytes is not a multiple of 8",
                       entries[i].buf.len);
            err_printf(rio->store->errmsg, "%s", io->errmsg);
            fatal(rio, "append", RAFT_INVALID);
            return RAFT_INVALID;
        }
    }
    a = raft_malloc(sizeof *a);
    if (a == NULL) {
        /* raft 0.15's handling of a failed append is unsafe too (a config
         * change's error path double-frees, B4): stop. */
        err_printf(rio->store->errmsg, "out of memory");
        fatal(rio, "append", RAFT_NOMEM);
        return RAFT_NOMEM;
    }
    a->orig = req;
    a->rio = rio;
    a->term = raft_of(rio)->current_term;
    a->early = false;
    a->req.data = a;
    req->cb = cb;
    rv = rio->store->ops->append(rio->store, &a->req, entries, n, append_cb);
    if (rv != 0) {
        raft_free(a);
        copy_errmsg(rio, rio->store->errmsg);
        fatal(rio, "append", rv);
    } else if (SIM_MUTANT(SIM_MUT_ACK_BEFORE_FSYNC)) {
        /* The simulator's seeded bug "ack-before-fsync": raft hears that
         * the entries are stored as soon as they are handed to the store,
         * before the write is durable; a power loss then loses entries a
         * follower acknowledged and the leader committed. */
        a->early = true;
        rio->in_append_cb = true;
        rio->append_cb_term = a->term;
        cb(req, 0);
        rio->in_append_cb = false;
    }
    return rv;
}

/* A snapshot put. For an InstallSnapshot (trailing 0) the adapter's
 * install_work runs on the pool at the same time, and raft's callback waits
 * for both: @pending counts what is still to finish. */
struct rio_put
{
    struct raft_io_snapshot_put req;
    struct raft_io_snapshot_put *orig;
    struct rio *rio;
    struct raft_io_async_work work;
    const struct raft_snapshot *snapshot;
    int pending;
    int status;   /* the store's */
    bool install; /* trailing 0: raft restores it in the callback */
};

static void put_finish(struct rio_put *p)
{
    struct rio *rio = p->rio;
    struct raft_io_snapshot_put *orig = p->orig;
    int status = p->status;

    ONCE_ASSERT(!p->install || rio->installing > 0,
                "installing counts the installs being stored");
    if (p->install) {
        rio->installing--;
    }
    raft_free(p);
    if (status != 0 && !(rio->closing && status == RAFT_CANCELED)) {
        fatal(rio, "snapshot_put", status);
        if (fail_stop(rio)) {
            return;
        }
    }
    orig->cb(orig, status);
    event(rio);
}

static void put_done(struct rio_put *p)
{
    struct rio *rio = p->rio;

    ONCE_ASSERTF(p->pending > 0 && p->pending <= 2,
                 "a put has %d parts left: each finishes once", p->pending);
    if (--p->pending > 0) {
        return;
    }
    /* raft restores an install inside this callback: not while something
     * (a state digest) holds the state machine's one frozen view. */
    if (p->install && rio->hooks.install_ready != NULL &&
        !rio->hooks.install_ready(rio->hooks.arg)) {
        ONCE_ASSERT(rio->parked == NULL, "one install parked at a time");
        rio->parked = p;
        return;
    }
    put_finish(p);
}

void rio_install_resume(struct rio *rio)
{
    struct rio_put *p = rio->parked;

    if (p != NULL) {
        rio->parked = NULL;
        put_finish(p);
    }
}

static void snapshot_put_cb(struct raft_io_snapshot_put *req, int status)
{
    struct rio_put *p = req->data;

    p->status = status;
    put_done(p);
}

/* The put that holds @w. Not through w->data: 0.15's raft_fixture
 * overwrites it with the raft pointer (fixed in 0.18, 540b6cc). */
static struct rio_put *put_of_work(struct raft_io_async_work *w)
{
    /* Through void *: w is a member of a struct rio_put, which is aligned. */
    return (struct rio_put *)(void *)((char *)w -
                                      offsetof(struct rio_put, work));
}

static int install_work_fn(struct raft_io_async_work *w)
{
    struct rio_put *p = put_of_work(w);

    return p->rio->hooks.install_work(p->rio->hooks.arg, p->snapshot);
}

static void install_work_cb(struct raft_io_async_work *w, int status)
{
    (void)status; /* restore reads the outcome */
    put_done(put_of_work(w));
}

/* Queue install_work beside the store's put (which holds p->pending's
 * second count for it). If it cannot be queued, restore builds the state
 * on the loop, as with no hook. */
static void start_install_work(struct rio *rio, struct rio_put *p)
{
    p->work.work = install_work_fn;
    if (rio->inner->async_work(rio->inner, &p->work, install_work_cb) != 0) {
        put_done(p);
    }
}

static int rio_io_snapshot_put(struct raft_io *io,
                               unsigned trailing,
                               struct raft_io_snapshot_put *req,
                               const struct raft_snapshot *snapshot,
                               raft_io_snapshot_put_cb cb)
{
    struct rio *rio = rio_of(io);
    struct rio_put *p;
    bool with_work;
    int rv;

    /* A snapshot taken asynchronously can finish while the node closes,
     * after the store closed: raft frees it on an error (raft_uv's own put
     * also answers RAFT_CANCELED once closing). */
    if (rio->closing) {
        return RAFT_CANCELED;
    }
    p = raft_malloc(sizeof *p);
    if (p == NULL) {
        err_printf(rio->store->errmsg, "out of memory");
        fatal(rio, "snapshot_put", RAFT_NOMEM);
        return RAFT_NOMEM;
    }
    p->orig = req;
    p->rio = rio;
    p->req.data = p;
    p->snapshot = snapshot;
    /* The put, and for an install the state built beside it. */
    with_work = trailing == 0 && rio->hooks.install_work != NULL;
    p->pending = with_work ? 2 : 1;
    p->status = 0;
    p->install = trailing == 0;
    req->cb = cb;
    rv = rio->store->ops->snapshot_put(rio->store, trailing, &p->req, snapshot,
                                       snapshot_put_cb);
    if (rv != 0) {
        raft_free(p);
        copy_errmsg(rio, rio->store->errmsg);
        fatal(rio, "snapshot_put", rv);
        return rv;
    }
    if (p->install) {
        rio->installing++;
    }
    if (with_work) {
        /* Queued after the put, so that a put refused above leaves no work
         * running that would need p. */
        start_install_work(rio, p);
    }
    return 0;
}

struct rio_get
{
    struct raft_io_snapshot_get req;
    struct raft_io_snapshot_get *orig;
    struct rio *rio;
};

static void snapshot_get_cb(struct raft_io_snapshot_get *req,
                            struct raft_snapshot *snapshot,
                            int status)
{
    struct rio_get *g = req->data;
    struct rio *rio = g->rio;
    struct raft_io_snapshot_get *orig = g->orig;

    raft_free(g);
    if (status != 0 && !(rio->closing && status == RAFT_CANCELED)) {
        fatal(rio, "snapshot_get", status);
        if (fail_stop(rio)) {
            return;
        }
    }
    orig->cb(orig, snapshot, status);
    event(rio);
}

static int rio_io_snapshot_get(struct raft_io *io,
                               struct raft_io_snapshot_get *req,
                               raft_io_snapshot_get_cb cb)
{
    struct rio *rio = rio_of(io);
    struct rio_get *g = raft_malloc(sizeof *g);
    int rv;

    if (g == NULL) {
        err_printf(rio->store->errmsg, "out of memory");
        fatal(rio, "snapshot_get", RAFT_NOMEM);
        return RAFT_NOMEM;
    }
    g->orig = req;
    g->rio = rio;
    g->req.data = g;
    req->cb = cb;
    rv = rio->store->ops->snapshot_get(rio->store, &g->req, snapshot_get_cb);
    if (rv != 0) {
        raft_free(g);
        copy_errmsg(rio, rio->store->errmsg);
        fatal(rio, "snapshot_get", rv);
    }
    return rv;
}

/* --- setup ------------------------------------------------------------------
 */

static void setup(struct rio *rio,
                  struct raft_io *inner,
                  struct store *store,
                  const struct rio_hooks *hooks)
{
    struct raft_io *io = &rio->io;
    void *data = io->data;

    memset(rio, 0, sizeof *rio);
    io->data = data;
    rio->inner = inner;
    rio->store = store;
    if (hooks != NULL) {
        rio->hooks = *hooks;
    }
    inner->data = rio;
    store->owner = rio;
    /* Version 2: async_work is there (raft_uv 0.15 says 1, B9). */
    io->version = 2;
    io->impl = rio;
    io->init = rio_io_init;
    io->close = rio_io_close;
    io->load = rio_io_load;
    io->start = rio_io_start;
    io->bootstrap = rio_io_bootstrap;
    io->recover = rio_io_recover;
    io->set_term = rio_io_set_term;
    io->set_vote = rio_io_set_vote;
    io->send = rio_io_send;
    io->append = rio_io_append;
    io->truncate = rio_io_truncate;
    io->snapshot_put = rio_io_snapshot_put;
    io->snapshot_get = rio_io_snapshot_get;
    io->time = rio_io_time;
    io->random = rio_io_random;
    io->async_work = rio_io_async_work;
}

void rio_init(struct rio *rio,
              struct raft_io *inner,
              struct store *store,
              const struct rio_hooks *hooks)
{
    setup(rio, inner, store, hooks);
}

void rio_adopt(struct rio *rio,
               struct raft *r,
               struct store *store,
               const struct rio_hooks *hooks)
{
    struct raft_io *inner = r->io;

    setup(rio, inner, store, hooks);
    rio->io.data = r;
    r->io = &rio->io;
}

void rio_set_novote(struct rio *rio, raft_index index)
{
    rio->novote = true;
    rio->novote_until = index;
}

bool rio_novote(const struct rio *rio)
{
    return rio->novote;
}

uint64_t rio_novote_index(const struct rio *rio)
{
    const struct raft *r = rio->io.data;

    if (!rio->novote || r == NULL || r->last_stored >= rio->novote_until) {
        return 0;
    }
    return rio->novote_until;
}
