/* tests/sim/sim_disk.h: a simulated disk as a store backend (store/store.h)
 * for the whole-node simulator: the state a node finds again after a crash.
 *
 * What survives a crash lives here, not in the node: the term and the vote
 * (synchronous, durable on return, as store.h requires), the log as one
 * segment in the log store's own format (store/store_format.h: a 64-byte
 * header, then CRC'd records), the newest snapshot, and the cut index of a
 * torn tail cut at an earlier start (the log store's meta "cut").
 *
 * Appends, truncations, snapshot puts and gets go into one queue, completed
 * strictly in order by sim_disk_run() once simulated time has reached their
 * due time (submission + the disk's latency): an append is "unsynced" until
 * then, and its callback runs only then. A truncation waits behind the
 * appends before it, as raft_uv's and the log store's do. A failed fsync is
 * reported in an append's completion (RAFT_IOERR), never synchronously.
 *
 * sim_disk_crash(): the node is gone; its queue is dropped without
 * callbacks (the node's memory went with it), except that the first @keep
 * queued operations reached the disk before the power went (as unsynced
 * writes may), and, if @torn, a prefix of @torn_bytes of the next append's
 * bytes did: a partial record at the tail.
 *
 * Load decodes the segment with store_scan_segment, the production loader's
 * rules: a torn tail is cut (store.cut_index set, as store_load.c does, and
 * kept in the cut index until the log holds it again), anything else that
 * does not check refuses with RAFT_CORRUPT. The log against the snapshot
 * follows store_load.c's rule 6.
 *
 * Single-threaded, deterministic: no clock but *now, no randomness (the
 * simulator draws every choice and passes it in). */
#ifndef ONCE_TESTS_SIM_SIM_DISK_H_
#define ONCE_TESTS_SIM_SIM_DISK_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "store/store.h"

struct sd_op;

struct sim_disk_stats
{
    uint64_t appends, truncations, puts, failed_fsyncs, crashes, torn,
        kept_unsynced, lost_unsynced, cuts, refusals, corrupted;
};

struct sim_disk
{
    struct store store;   /* first: the ops find the sim_disk from it */
    const raft_time *now; /* the simulated clock (borrowed) */
    unsigned latency_ms;  /* from submission to completion */
    /* The append that completes this many appends from now fails its
     * fsync (RAFT_IOERR in its callback); -1: none armed. */
    int fail_countdown;
    bool stopped; /* closed or crashed: nothing runs until the next load */
    bool hung;    /* an fsync failed: nothing after it completes */

    /* --- durable: what a restart finds ----------------------------------- */
    raft_term term;
    raft_id vote;
    raft_index meta_cut; /* a cut not yet passed again (store_format.h) */
    bool torn_pending;   /* a crash left a torn tail the next load cuts */
    uint8_t *seg;        /* header + records + zeros to seg_cap */
    size_t seg_len, seg_cap;
    raft_index first; /* the segment header's first index */
    size_t *offs;     /* offset of record first + k, k < n_recs */
    size_t n_recs, offs_cap;
    bool has_snap;
    raft_term snap_term;
    raft_index snap_index, snap_conf_index;
    uint8_t *snap_conf; /* sf_conf_encode'd */
    size_t snap_conf_len;
    uint8_t *snap_data;
    size_t snap_data_len;

    /* --- volatile: the node's queue --------------------------------------- */
    struct sd_op *head, *tail;
    unsigned queued;

    struct sim_disk_stats stats;
};

/* A fresh, empty disk (the node was never started). */
void sim_disk_init(struct sim_disk *d, const raft_time *now);
/* Free everything, the durable state too (the end of a run). Drops the
 * queue without callbacks. */
void sim_disk_free(struct sim_disk *d);

/* Complete every queued operation due at or before *now, in order. */
void sim_disk_run(struct sim_disk *d);

/* The power went (see above). @keep and @torn_bytes are the simulator's
 * draws; a torn prefix is at least 1 byte and short of the whole append. */
void sim_disk_crash(struct sim_disk *d,
                    unsigned keep,
                    bool torn,
                    size_t torn_bytes);
/* Bytes the first queued append would write (0: none queued first after
 * @keep operations): for the simulator's draw of a torn prefix. */
size_t sim_disk_pending_bytes(const struct sim_disk *d, unsigned keep);

/* Flip one byte of a synced record: at offset @pick % (records' bytes)
 * after the header. Returns false when the log holds no record. */
bool sim_disk_corrupt(struct sim_disk *d, uint64_t pick);

#endif /* ONCE_TESTS_SIM_SIM_DISK_H_ */
