/* raft/snap_policy.h: when to snapshot and how much log to keep, in bytes.
 *
 * libraft 0.15 counts both in entries: it snapshots after `threshold`
 * applied entries and keeps `trailing` entries after it. A fixed count fits
 * neither end of once's range: with an empty table a snapshot is a few
 * bytes and could be taken rarely, with 10 M records it is ~800 MB and
 * taking one every 1024 entries rewrites the whole table for a few hundred
 * KiB of log. The rule here is Redis's AOF rule turned around: take a
 * snapshot when the log written since the last one weighs a fraction of
 * that snapshot (it is then as cheap to replay the log as to load the
 * snapshot again), with a floor (small tables do not snapshot every few
 * entries) and a ceiling (0.15 keeps every entry since the last snapshot in
 * memory, so the ceiling bounds that memory). The trailing log is sized the
 * same way, in bytes (dqlite's rule: never keep more log than the snapshot
 * weighs), so that a follower that lagged for a few seconds catches up from
 * the log instead of receiving the whole state.
 *
 * The adapter weighs every applied entry and asks raft for the snapshot
 * when the bytes are reached (snap_policy_due). Raft's own entry threshold
 * is only a backstop, set to the entries the byte target holds at the
 * smallest entry (SNAP_POLICY_MIN_ENTRY), at most SNAP_POLICY_MAX_ENTRIES:
 * an estimate from the average entry would fire early whenever entries
 * shrink, and they do at the end of every bulk load (batches of thousands
 * of claims, then single claims): at 10 M records each replica took a
 * second 750 MB snapshot seconds after the first. The trailing count has
 * no such trigger and comes from the average size of the entries applied
 * since the last decision (an entry is one batch of claims, 40 B to 1 MiB):
 * the entries it keeps are those just before the snapshot.
 * Each node multiplies its threshold by a factor in [1, 1.25) derived from
 * its id, so that the replicas, which cross the same indexes, do not all
 * snapshot in the same instant.
 *
 * The install timeout follows the snapshot too: the leader resends an
 * unanswered InstallSnapshot after it, and an 800 MB snapshot takes longer
 * than raft's default 30 s to send, store and restore on a loaded machine.
 *
 * Pure: no I/O, no clock; the caller (the adapter) feeds sizes in. */
#ifndef ONCE_RAFT_SNAP_POLICY_H_
#define ONCE_RAFT_SNAP_POLICY_H_

#include <stdbool.h>
#include <stdint.h>

/* Defaults of the byte rule (docs/raft.md, "Snapshot policy"). */
#define SNAP_POLICY_LOG_RATIO_PCT   50         /* log vs snapshot bytes */
#define SNAP_POLICY_LOG_FLOOR       (8u << 20) /* bytes */
#define SNAP_POLICY_LOG_CEIL        (256u << 20)
#define SNAP_POLICY_TRAIL_RATIO_PCT 12
#define SNAP_POLICY_TRAIL_FLOOR     (4u << 20)
#define SNAP_POLICY_TRAIL_CEIL      (64u << 20)
#define SNAP_POLICY_MIN_ENTRIES     64u
#define SNAP_POLICY_MIN_ENTRY       40u /* bytes: one claim, wrapped */
#define SNAP_POLICY_MAX_ENTRIES     (1u << 22)
#define SNAP_POLICY_INSTALL_MIN_MS  30000u
/* Conservative rates on a loaded 2-core machine over loopback. */
#define SNAP_POLICY_SEND_BPS    (20u << 20)
#define SNAP_POLICY_RESTORE_BPS (50u << 20)

struct snap_policy
{
    /* Fixed entry counts (operator flags) instead of the byte rule: 0 means
     * "by bytes". */
    unsigned fixed_threshold;
    unsigned fixed_trailing;
    unsigned jitter_pct; /* 0..24: this node's share of the stagger */

    /* Running sums since the last decision, fed by snap_policy_applied. */
    uint64_t log_bytes;
    uint64_t log_entries;
    uint64_t avg_entry; /* bytes, from the previous window; 0: unknown */

    /* The last decision. */
    uint64_t snapshot_bytes;
    uint64_t log_target; /* bytes of log that make the next one due */
    unsigned threshold;
    unsigned trailing;
    unsigned install_timeout_ms;
};

/* @node_id picks the jitter; @fixed_* as above (0: by bytes). Makes a first
 * decision for an empty snapshot. */
void snap_policy_init(struct snap_policy *p,
                      uint64_t node_id,
                      unsigned fixed_threshold,
                      unsigned fixed_trailing);

/* An entry of @len bytes was applied. */
static inline void snap_policy_applied(struct snap_policy *p, uint64_t len)
{
    p->log_bytes += len;
    p->log_entries++;
}

/* A snapshot of @bytes was taken or installed: decide threshold, trailing
 * and install timeout for what follows. */
void snap_policy_decide(struct snap_policy *p, uint64_t bytes);

/* The byte rule says a snapshot is due now: the adapter checks after each
 * apply and asks raft for the snapshot (raft's entry threshold is only the
 * backstop). */
static inline bool snap_policy_due(const struct snap_policy *p)
{
    return p->fixed_threshold == 0 && p->log_bytes >= p->log_target;
}

#endif /* ONCE_RAFT_SNAP_POLICY_H_ */
