/* server/join.h: --join, a new node asking to be added (docs/server.md,
 * "Start, bootstrap, join, restart", step 4).
 *
 * With --join and an empty Raft configuration the node calls
 * Admin.MembersAdd of itself on the listed members in turn, each call with
 * a 60 s deadline (the add includes the catch-up), until one answers OK;
 * after a full pass over the list a pause that doubles from 250 ms to 5 s.
 * A refusal (FAILED_PRECONDITION, INVALID_ARGUMENT, PERMISSION_DENIED, or a
 * ConfigResult that is not OK) stops the node (node_stop, exit 1).
 *
 * Owns: its channel to the member being asked and its timer; both are
 * released by join_stop. Loop thread only. */
#ifndef ONCE_SERVER_JOIN_H_
#define ONCE_SERVER_JOIN_H_

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "rpc/conn.h"

struct server;

struct join
{
    struct server *s; /* the node: its flags, loop and node_stop */
    bool active;
    bool inflight;
    unsigned next;  /* index into s->cfg.join */
    unsigned round; /* full passes over the list */
    uint64_t backoff_ms;
    struct rpc_channel *ch;
    uv_timer_t timer;
    bool timer_init;
};

/* Start asking (s->cfg.n_join > 0). */
void join_start(struct join *j, struct server *s);

/* Stop asking, close the channel and the timer (idempotent; also on a join
 * that never started). */
void join_stop(struct join *j);

#endif /* ONCE_SERVER_JOIN_H_ */
