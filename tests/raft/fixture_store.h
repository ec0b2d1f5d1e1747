/* tests/raft/fixture_store.h: the store the cluster harness gives each
 * replica over a raft_fixture server's io.
 *
 * It forwards everything to the fixture's io, but orders a truncation
 * behind the appends still in flight, as real stores do (raft_uv queues it
 * behind a barrier; docs/raft-0.15.md §4.2). raft 0.15 truncates
 * conflicting entries on a follower while earlier appends are still being
 * written, and 0.15's fixture io truncates at once: it then copies entries
 * out of a shorter array (a heap overflow found by tests/raft/random.c) and
 * lets the pending append land after the truncation. While appends are in
 * flight, a truncation and everything submitted after it wait.
 *
 * It also translates truncation indexes: 0.15's fixture io keeps entries as
 * if they started at index 1 (truncate(i) keeps i - 1 of them), but after it
 * installed a snapshot (snapshot_put with trailing 0) its array starts after
 * the snapshot's index, so a later truncate overflowed it too. And it
 * restores the configuration_index of the snapshot it hands raft, which
 * 0.15's snapshotCopy (used only by the fixture) does not copy. */
#ifndef ONCE_TESTS_RAFT_FIXTURE_STORE_H_
#define ONCE_TESTS_RAFT_FIXTURE_STORE_H_

#include <stdint.h>

#include "store/store.h"

struct fstore_op;

struct fixture_store
{
    struct store store; /* first: the ops find the fixture_store from it */
    struct raft_io *io; /* the fixture server's io (borrowed) */
    unsigned inflight;  /* appends issued to the io, not completed */
    struct fstore_op *head, *tail; /* waiting behind a truncation */
    raft_index offset;             /* index of the fixture's entries[0] - 1 */
    raft_index snap_index;         /* of the last snapshot put */
    raft_index snap_conf_index;    /* its configuration_index */
    uint64_t deferred_truncations;
};

void fixture_store_init(struct fixture_store *fs, struct raft_io *io);

#endif /* ONCE_TESTS_RAFT_FIXTURE_STORE_H_ */
