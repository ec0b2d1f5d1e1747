/* raft/snap_policy.c: the byte rule of snap_policy.h. */
#include "raft/snap_policy.h"

#include "common/assert.h"

static uint64_t clamp64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* The bytes a fraction of the snapshot stands for, as entries. */
static unsigned entries_for(uint64_t bytes, uint64_t avg_entry)
{
    uint64_t n = bytes / (avg_entry != 0 ? avg_entry : 1);

    return (unsigned)clamp64(n, SNAP_POLICY_MIN_ENTRIES,
                             SNAP_POLICY_MAX_ENTRIES);
}

void snap_policy_init(struct snap_policy *p,
                      uint64_t node_id,
                      unsigned fixed_threshold,
                      unsigned fixed_trailing)
{
    /* A multiplicative hash of the id spreads neighbouring ids apart. */
    uint64_t h = node_id * 0x9e3779b97f4a7c15ull;

    p->fixed_threshold = fixed_threshold;
    p->fixed_trailing = fixed_trailing;
    p->jitter_pct = (unsigned)((h >> 32) % 25);
    p->log_bytes = 0;
    p->log_entries = 0;
    p->avg_entry = 0;
    snap_policy_decide(p, 0);
}

void snap_policy_decide(struct snap_policy *p, uint64_t bytes)
{
    uint64_t log_target, trail_target, ms;

    if (p->log_entries != 0) {
        p->avg_entry = p->log_bytes / p->log_entries;
    }
    if (p->avg_entry == 0) {
        /* Nothing applied yet: one claim per entry is the small end. */
        p->avg_entry = 128;
    }
    p->log_bytes = 0;
    p->log_entries = 0;
    p->snapshot_bytes = bytes;

    log_target = clamp64(bytes / 100 * SNAP_POLICY_LOG_RATIO_PCT,
                         SNAP_POLICY_LOG_FLOOR, SNAP_POLICY_LOG_CEIL);
    log_target += log_target / 100 * p->jitter_pct;
    p->log_target = log_target;
    trail_target = clamp64(bytes / 100 * SNAP_POLICY_TRAIL_RATIO_PCT,
                           SNAP_POLICY_TRAIL_FLOOR, SNAP_POLICY_TRAIL_CEIL);
    /* Raft's own count is only the backstop (snap_policy.h): as many
     * entries as the target holds at the smallest entry. */
    p->threshold = p->fixed_threshold != 0
                       ? p->fixed_threshold
                       : entries_for(log_target, SNAP_POLICY_MIN_ENTRY);
    p->trailing = p->fixed_trailing != 0
                      ? p->fixed_trailing
                      : entries_for(trail_target, p->avg_entry);

    /* raft_set_snapshot_threshold and _trailing take these as they are. */
    ONCE_ASSERT(p->threshold > 0 && p->trailing > 0,
                "a snapshot policy always allows some entries");
    ms = bytes * 1000 / SNAP_POLICY_SEND_BPS +
         bytes * 1000 / SNAP_POLICY_RESTORE_BPS;
    p->install_timeout_ms =
        (unsigned)clamp64(ms, SNAP_POLICY_INSTALL_MIN_MS, 3600u * 1000);
}
