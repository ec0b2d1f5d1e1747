/* server/readindex.h: lookups served by the node that receives them
 * (docs/server.md, "Reads on any node"; docs/design.md §5).
 *
 * A node that is not the ready leader answers a Lookup (not leader_only)
 * from its own state machine after a read barrier:
 *   1. the read waits for the next ReadIndex call to the leader (one in
 *      flight per node: every read that arrives meanwhile shares the next
 *      one, so N reads cost the leader one call and, there, one share of
 *      a barrier; when the leader changes, the reads of the call in flight
 *      to the old one move to a call to the new one);
 *   2. the leader answers an index it proved current after the call
 *      arrived (raft/replica.h, replica_read_index);
 *   3. the read waits until this node has applied that index
 *      (replica_read_at) and reads its own table; the answer's served_by
 *      is this node's id.
 * Every read gives up at its give-up time (its deadline less a margin,
 * READ_MARGIN_MAX at most): then it is answered UNAVAILABLE, applied
 * FALSE, never with a stale read. No known leader, the leader not
 * answering, or answering an error: UNAVAILABLE at once for the reads that
 * call covered.
 *
 * The leader's side, the ReadIndex method: readindex_serve.
 *
 * Owns: a record per waiting read (freed when it is answered), one timer.
 * The reads' calls are answered exactly once, by this module. Loop thread
 * only. */
#ifndef ONCE_SERVER_READINDEX_H_
#define ONCE_SERVER_READINDEX_H_

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "fsm/fsm.h"
#include "rpc/conn.h"

/* Most ms a read gives up before its deadline (the deadline's tenth when
 * that is less), so that its UNAVAILABLE reaches the caller in time. */
#define READ_MARGIN_MAX 100
/* The give-up time of a read whose call has no deadline (ms). */
#define READ_DEFAULT_MS 5000

struct server;
struct read_op;
struct service_in;

struct readindex
{
    struct server *s;
    uv_timer_t timer; /* the earliest give-up time */
    bool timer_on;
    bool closed;
    struct read_op *head; /* every read not answered yet */
    /* The newest ReadIndex call: its generation (the reads it covers carry
     * it), whether it is still in flight, and the address it went to. An
     * older call still in flight covers no read any more: its reads moved
     * to the newest, sent when the leader changed. */
    uint64_t gen;
    bool asking;
    char asked[RPC_ADDR_MAX + 1];
    /* counters (metrics, status) */
    uint64_t reads;        /* lookups answered from this node's table */
    uint64_t asks;         /* ReadIndex calls sent */
    uint64_t unavailable;  /* reads answered UNAVAILABLE */
    uint64_t served_index; /* ReadIndex calls answered as the leader */
};

void readindex_init(struct readindex *ri, struct server *s);

/* Whether this node can read after a read barrier: it is a voter or a
 * standby of the configuration in force (the leader replicates the log to
 * those). A spare, or a node not in the configuration, never applies the
 * leader's index: it forwards its lookups instead. */
bool readindex_can_serve(struct server *s);

/* Serve the Lookup @call (its checked identity @ident, borrowed) here
 * after a read barrier; @call is answered exactly once, later or now. */
void readindex_lookup(struct readindex *ri,
                      struct rpc_call *call,
                      const struct fsm_ident *ident);

/* From the node's tick: if the leader changed while a ReadIndex call is
 * in flight to the old one, ask the new one for the reads it covers. */
void readindex_tick(struct readindex *ri);

/* The leader's side: the ReadIndex method (a service_serve_fn). */
void readindex_serve(struct server *s,
                     struct rpc_call *call,
                     const ProtobufCMessage *msg,
                     const struct service_in *in);

/* Answer every waiting read UNAVAILABLE ("shutting down") and close the
 * timer; a ReadIndex answer that comes later finds nothing. Idempotent. */
void readindex_close(struct readindex *ri);

#endif /* ONCE_SERVER_READINDEX_H_ */
