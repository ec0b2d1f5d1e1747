/* server/leader.h: where the current leader is, as this node knows it.
 *
 * A leaf of server/: the answers (reply.c's leader hint), the forwarder
 * (forward.c's target) and Status (admin.c) ask it, and it calls none of
 * them, so none of them depends on the dispatch (service.c) that calls
 * them. It reads the Raft layer's leader id (replica_leader) and the fsm's
 * member directory; it keeps no state. Loop thread only. */
#ifndef ONCE_SERVER_LEADER_H_
#define ONCE_SERVER_LEADER_H_

#include <stdbool.h>
#include <stdint.h>

struct server;

/* The client address of the current leader into @buf (RPC_ADDR_MAX + 1)
 * and its id in *@id: true if known (from the fsm's member directory, or
 * this node's own flags). */
bool leader_addr(struct server *s, uint64_t *id, char *buf);

#endif /* ONCE_SERVER_LEADER_H_ */
