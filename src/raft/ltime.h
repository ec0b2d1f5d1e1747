/* raft/ltime.h: the leader's rule for stamping log time (docs/design.md §1.7).
 *
 * Each batch carries a time stamped by the leader as
 *   max(fsm_now, clamp(wall, est - K, est + K)),
 * where K is the cluster's max_skew and est is the log time of a batch this
 * node applied plus the monotonic time elapsed since it applied it.
 *
 * Which batch: the last one applied before this node's leadership began,
 * frozen for the whole term (ltime_anchor). Following the leader's own
 * batches instead, as docs/design.md §1.7's wording allows, is a ratchet: each
 * stamp may be K ahead of the previous one, so a fast wall clock drags log time
 * K further per batch (tests/unit/raft/test_ltime.c). Frozen at the start
 * of the term, a wrong wall clock moves log time at most K from real elapsed
 * time; a later leader with a right clock stamps real time again (log time
 * waits, never goes back, until real time catches up).
 *
 * Only batches applied live count (the raft adapter does not report entries
 * replayed from the local log at start, whose apply time says nothing about
 * their log time). A restarted node is seeded with the pair it kept on disk
 * before the restart (raft/anchor.h: valid within one boot of the host);
 * with neither (a reboot, a new host, a full-cluster restart of such nodes)
 * the wall clock is all there is: tests/integration/once_skew.py saw a
 * leader 5 min fast, elected right after its restart, move log time 300 s
 * ahead, and one 5 min slow freeze it.
 *
 * Bounds, as measured by tests/raft/test_scenarios.c: one leader with a wrong
 * clock keeps log time within K plus one commit latency of real time (est
 * counts from when the base batch was applied, not when it was stamped).
 * Successive leaders whose clocks are all wrong in the same direction can
 * each move it up to K further; a leader with a right clock stops the drift
 * (log time waits, or catches up by up to K per term). Pure: callers pass
 * the clocks in; not thread-safe.
 */
#ifndef ONCE_RAFT_LTIME_H_
#define ONCE_RAFT_LTIME_H_

#include <stdbool.h>
#include <stdint.h>

struct ltime
{
    bool have_last; /* a batch was applied live */
    uint64_t last_log_ms;
    uint64_t last_mono_ms;
    bool have_base; /* anchored for the current term */
    uint64_t base_log_ms;
    uint64_t base_mono_ms;
};

void ltime_init(struct ltime *t);

/* A batch with log time @log_ms was applied live at monotonic @mono_ms. */
void ltime_applied(struct ltime *t, uint64_t log_ms, uint64_t mono_ms);

/* This node's leadership term begins: freeze the last live batch as the
 * base for every stamp of the term (no base if there was none). */
void ltime_anchor(struct ltime *t);

/* The stamp for the next batch. */
uint64_t ltime_stamp(const struct ltime *t,
                     uint64_t fsm_now_ms,
                     uint64_t wall_ms,
                     uint64_t mono_ms,
                     uint64_t max_skew_ms);

#endif /* ONCE_RAFT_LTIME_H_ */
