/* raft/rio.h: our struct raft_io, a decorator over libraft 0.15's own.
 *
 * raft never talks to disk or network directly (docs/design.md §4): it gets
 * this raft_io, which passes init, start, send, time, random, async_work and
 * close to an inner raft_io (raft_uv in a node, the raft_fixture's io in tests)
 * and every storage call to a pluggable store (store/store.h). On those paths
 * it hosts the guards of raft/guard.h that belong to I/O:
 *
 *   G2  drop AppendEntries results at a leader whose last stored entry is of
 *       an older term (recv path);
 *   G4  fail-stop: any storage error calls hooks.fatal, which in a node logs
 *       and aborts (raft's in-process recovery from I/O errors is unsafe in
 *       0.15, B4). A test hook may return; the failed request then never
 *       completes, as on a hung disk;
 *   G7  clamp a follower's synchronous AppendEntries success reply to the
 *       entries that request carried (send path while inside recv, B13);
 *   G9  drop the reply a follower sends when an append completes after its
 *       term changed (0.15 sends it to the new leader with last_stored,
 *       which may hold the old term's unchecked entries: a false match; fixed
 *       upstream by 35479fc);
 *   G10 an AppendEntries whose previous entry this follower compacted into
 *       its snapshot becomes a heartbeat at the snapshot's last entry (0.15
 *       rejects it and the leader may loop for ever);
 *   G11 clamp an AppendEntries' leader_commit to the entries it checked
 *       (prev + n): 0.15 takes min(leader_commit, last_stored), which may
 *       commit and apply unchecked entries of an older term;
 *   G6b fail-stop instead of 0.15's NULL dereference when a membership
 *       rollback would need a configuration entry that an installed snapshot
 *       compacted away (B5 on the InstallSnapshot path);
 *   no-vote: while set, the node neither grants votes nor campaigns (it
 *       drops RequestVote and TimeoutNow in both directions), for a store
 *       that cut a torn tail which may have held an acknowledged entry.
 *
 * After every callback into raft (tick, recv, append, snapshot) it calls
 * hooks.event: 0.15 has no state-change callback, so the pipeline tracks
 * leadership there.
 *
 * Lifecycle, two ways:
 *  - node: rio_init(), then raft_init(r, &rio->io, ...) calls rio's init,
 *    which inits the inner io; raft_close() closes the store, then the inner
 *    io, then calls raft's close callback.
 *  - fixture: raft_fixture_grow() already raft_init'ed the server on its own
 *    io; rio_adopt() puts the decorator between that raft and that io.
 *
 * Everything runs on the raft loop thread. */
#ifndef ONCE_RAFT_RIO_H_
#define ONCE_RAFT_RIO_H_

#include <stdbool.h>
#include <stdint.h>

#include <raft.h>

#include "store/store.h"

struct rio_hooks
{
    void *arg;
    /* After each callback into raft: leadership tracking, G1. May be NULL. */
    void (*event)(void *arg);
    /* G4: storage failed (@what names the call, @status is raft's code).
     * Must not return in a node (log + abort). May be NULL: then abort. */
    void (*fatal)(void *arg, const char *what, int status, const char *msg);
    /* An InstallSnapshot is being stored (snapshot_put with trailing 0):
     * runs on raft's thread pool while the store writes it, and raft is
     * told the put completed only after both finished, so that restore,
     * which raft then calls on the loop, finds the state built. The return
     * value is not raft's business (restore decides). May be NULL. */
    int (*install_work)(void *arg, const struct raft_snapshot *snap);
    /* May raft restore a stored install now? False parks the completion
     * until rio_install_resume. May be NULL (always). */
    bool (*install_ready)(void *arg);
};

struct rio_stats
{
    uint64_t g2_dropped;
    uint64_t g7_clamped;
    uint64_t g9_dropped;
    uint64_t g10_rewritten;
    uint64_t g11_clamped;
    uint64_t g12_refused; /* second votes in one term not granted */
    uint64_t g6_stops;    /* rollback would need a compacted entry */
    uint64_t novote_dropped;
    uint64_t storage_errors;
};

struct rio
{
    struct raft_io io;     /* what raft sees; io.impl points here */
    struct raft_io *inner; /* network, timers, threadpool (borrowed) */
    struct store *store;   /* storage (borrowed) */
    struct rio_hooks hooks;
    struct rio_stats stats;

    raft_io_tick_cb tick_cb;
    raft_io_recv_cb recv_cb;
    raft_io_close_cb close_cb;
    bool closing;
    /* InstallSnapshots being stored (put to raft's callback), and one
     * whose completion waits for install_ready. */
    unsigned installing;
    struct rio_put *parked;

    /* The leader's commit index as its last AppendEntries (heartbeats
     * included) said it, before G11 clamps it; who sent it and when
     * (raft_io time: the loop's uv_now). A follower's readiness compares its
     * applied index with it (server/metrics.c). */
    raft_index seen_leader_commit;
    raft_id seen_leader_id;
    uint64_t seen_leader_ms;

    /* G7: set while raft processes an AppendEntries request. */
    bool in_append;
    raft_index append_last; /* prev_log_index + n_entries of that request */
    /* G9: set while raft handles the completion of an append; the term the
     * entries were appended in. */
    bool in_append_cb;
    raft_term append_cb_term;

    /* G12: the vote persisted for vote_term (0: none), and a second vote
     * raft tried to give in that term, to be sent as not granted. */
    raft_term vote_term;
    raft_id vote_for;
    raft_id vote_refused;

    /* no-vote state: until raft's last_stored reaches novote_until. */
    bool novote;
    raft_index novote_until;
};

/* Set up @rio over @inner (not yet initialised) and @store. raft_init() on
 * &rio->io initialises @inner. Both are borrowed and must outlive raft. */
void rio_init(struct rio *rio,
              struct raft_io *inner,
              struct store *store,
              const struct rio_hooks *hooks);

/* Put @rio between @r and the io @r was raft_init'ed with (the fixture's);
 * call before raft_start. @store usually wraps that same io. */
void rio_adopt(struct rio *rio,
               struct raft *r,
               struct store *store,
               const struct rio_hooks *hooks);

/* Complete a parked install (install_ready said no before). */
void rio_install_resume(struct rio *rio);

/* Neither vote nor campaign until the log has stored @index again. */
void rio_set_novote(struct rio *rio, raft_index index);
bool rio_novote(const struct rio *rio);
/* The index a node in no-vote state waits for its log to hold, 0 when it
 * votes and campaigns: for metrics and logs above src/raft (a plain
 * integer, no raft type). Reads only: it agrees with what the next vote
 * message would find (the state itself clears lazily, on that message). */
uint64_t rio_novote_index(const struct rio *rio);

#endif /* ONCE_RAFT_RIO_H_ */
