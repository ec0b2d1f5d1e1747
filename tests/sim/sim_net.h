/* tests/sim/sim_net.h: a raft_io decorator over a raft_fixture server's stub
 * io (network, ticks, time, work queue), between it and rio, so that the
 * node on top can crash and be started again in the same fixture slot.
 *
 * The stub io keeps a crashed node's queued requests and would complete
 * them later into freed memory; raft_uv cancels them at close. So every
 * send and every work item goes to the stub as a request of ours:
 *
 *   - a send carries a deep copy of the message (entries, snapshot data),
 *     so that what the stub flushes later never points into a closed raft;
 *   - at sim_net_crash(), raft's callbacks of what is still queued run
 *     now (a send fails with RAFT_NOCONNECTION; a work item runs and
 *     completes, as a thread pool finishes what it started), and the
 *     stub's later completions of those requests are dropped.
 *
 * Duplication: while dup_countdown is armed (>= 0), the send that brings
 * it to zero goes out twice (two copies, the same latency); raft's
 * callback runs after both.
 *
 * Storage is not routed here: rio sends it to the store (sim_store.h). */
#ifndef ONCE_TESTS_SIM_SIM_NET_H_
#define ONCE_TESTS_SIM_SIM_NET_H_

#include <stdbool.h>
#include <stdint.h>

#include <raft.h>

struct sn_send;
struct sn_work;

struct sim_net
{
    struct raft_io io;    /* what rio sees as its inner io */
    struct raft_io *stub; /* the fixture server's io (borrowed) */
    raft_io_tick_cb tick_cb;
    raft_io_recv_cb recv_cb;
    raft_io_close_cb close_cb;
    struct sn_send *sends; /* queued at the stub, raft waiting */
    struct sn_work *works;
    int dup_countdown; /* -1: no duplicate armed */
    bool down;         /* crashed, not started again: ticks and messages
                        * for it are dropped */
    uint64_t duplicated;
};

/* Put @sn between raft @r and the stub io @r was raft_init'ed with; call
 * before rio_adopt (which then wraps @sn). Idempotent: a restarted raft
 * that was raft_init'ed on &sn->io is left as it is. */
void sim_net_wrap(struct sim_net *sn, struct raft *r);

/* The node is crashing (raft still open): finish what raft waits for. */
void sim_net_crash(struct sim_net *sn);

#endif /* ONCE_TESTS_SIM_SIM_NET_H_ */
