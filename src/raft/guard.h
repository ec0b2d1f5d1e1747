/* raft/guard.h: the guards against libraft 0.15's safety bugs.
 *
 * docs/raft-0.15.md §3 lists the bugs (B1..B14) that Debian's libraft
 * 0.15.0 has and §6 the guards; this module holds the pure decisions, the
 * decorator (rio.c), the FSM adapter (adapter.c) and the pipeline
 * (pipeline.c) apply them at the right places:
 *
 *   G1 term-start barrier: a new leader proposes a barrier first and serves
 *      nothing (claims, reads, membership changes) before it applied (B1, B2).
 *      pipeline.c.
 *   G2 drop AppendEntries results at a leader whose last stored entry is of
 *      an older term: 0.15 commits last_stored by counting replicas, so
 *      without it an old-term entry can commit (Figure 8, B1). rio.c.
 *   G4 fail-stop on any storage error (B4: 0.15's in-process recovery
 *      reuses indexes). rio.c.
 *   G5 refuse a snapshot while a configuration change is uncommitted (B5).
 *      adapter.c.
 *   G6 keep the last committed configuration entry in the log, so a
 *      membership rollback finds it (B5 NULL dereference). adapter.c.
 *   G7 clamp a follower's synchronous AppendEntries success reply to the
 *      entries it checked (B13 false match). rio.c.
 *   G9 drop the reply a follower sends when an append completes after
 *      its term changed: 0.15 sends last_stored to the new leader, a false
 *      match through the asynchronous path (B13; upstream 35479fc). rio.c.
 *   G10 an AppendEntries whose previous entry is below this follower's own
 *      snapshot is answered as a heartbeat at the snapshot's last entry:
 *      0.15 rejects it ("no entry"), and a leader that sent an older
 *      snapshot than ours then loops for ever (a liveness bug found by
 *      tests/raft/random.c). rio.c.
 *   G11 a follower's commit index never covers entries a request did not
 *      check: 0.15 sets it to min(leader_commit, last_stored), so a follower
 *      holding unchecked entries of an older term would apply them (a
 *      divergence found by tests/raft/random.c). The AppendEntries'
 *      leader_commit is clamped to prev + n before raft sees it. rio.c.
 *   G12 at most one vote per term: 0.15 grants a vote to the target of a
 *      leadership transfer even after voting for another candidate in the
 *      same term (electionVote's is_transferee), and a transfer started by
 *      a stale leader stays pending after it stepped down, so two
 *      candidates win the same term (B12, two leaders; found by
 *      tests/raft/random.c, seed 1796120850157). The second vote is neither
 *      persisted nor sent as granted. rio.c.
 *   G6b: where G6 cannot help (the committed configuration entry was
 *      compacted by an installed snapshot, not by our own), a rollback
 *      would dereference NULL (B5): fail-stop before raft sees the
 *      AppendEntries that forces it. rio.c.
 *   G8 (for B6: after a restart 0.15 takes the log's last configuration
 *      entry as committed and never rolls it back): a truncation that
 *      removes that entry is a fail-stop; the restart rebuilds the
 *      configuration from the log. rio.c; docs/raft.md has why the window
 *      before that truncation is safe.
 *   G3 (RequestVote advertises unpersisted entries, B7) is not built: no
 *      test shows it helps; a failing test must come first.
 *
 * All of these read 0.15's public struct raft; they are 0.15-specific and
 * must be deleted, not kept, when the library moves past 0.17.1.
 *
 * Test builds only (-DONCE_GUARD_SWITCHES, never set for the production
 * libraries or binaries) can turn single guards off, so regression tests can
 * show each guard matters. */
#ifndef ONCE_RAFT_GUARD_H_
#define ONCE_RAFT_GUARD_H_

#include <stdbool.h>

#include <raft.h>

enum guard_id {
    GUARD_G1 = 1u << 1,
    GUARD_G2 = 1u << 2,
    GUARD_G4 = 1u << 4,
    GUARD_G5 = 1u << 5,
    GUARD_G6 = 1u << 6,
    GUARD_G7 = 1u << 7,
    GUARD_G8 = 1u << 8,
    GUARD_G9 = 1u << 9,
    GUARD_G10 = 1u << 10,
    GUARD_G11 = 1u << 11,
    GUARD_G12 = 1u << 12,
};

/* Is guard @g on? Always true in production builds. */
bool guard_on(unsigned g);

#ifdef ONCE_GUARD_SWITCHES
/* Turn the guards in @mask off (0 = all on). Test builds only. */
void guard_test_set_off(unsigned mask);
/* Parse "g1,g2,g7" into a mask; returns 0, or -EINVAL on an unknown name. */
int guard_test_parse(const char *list, unsigned *mask);
#endif

/* The term of entry @index in @r's log, 0 if it is not there (0.15's public
 * struct raft_log; the snapshot's last entry counts). */
raft_term guard_term_of(const struct raft *r, raft_index index);

/* G2: should the leader drop this incoming message? */
bool guard_g2_drop(const struct raft *r, const struct raft_message *m);

/* G10: is this AppendEntries' previous entry compacted in our snapshot? */
bool guard_g10_below_snapshot(const struct raft *r,
                              const struct raft_message *m);

/* G6b: would this AppendEntries make raft roll back an uncommitted
 * configuration whose predecessor entry is no longer in the log? */
bool guard_g6_rollback_stop(const struct raft *r, const struct raft_message *m);

/* G5: RAFT_BUSY if a snapshot must not be taken now, else 0. */
int guard_g5_check(const struct raft *r);

/* G8: does truncating the log from @index leave raft with a configuration
 * (taken as committed at start, B6) whose entry is gone? */
bool guard_b6_stale(const struct raft *r, raft_index index);

/* G6: the snapshot trailing to use so that the last committed configuration
 * entry stays in the log (never below @base). */
unsigned guard_g6_trailing(const struct raft *r, unsigned base);

#endif /* ONCE_RAFT_GUARD_H_ */
