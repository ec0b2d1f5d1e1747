/* server/safety.h: whether a membership change leaves a cluster that can
 * still lose a node (docs/server.md, "Membership safety").
 *
 * The leader asks before it removes a member or changes its role. Taking
 * a voter's vote away (MembersRemove, or MembersAssign to standby or
 * spare) is refused, unless the request says force, when
 *   - it would leave a single voter where there were more: that node's
 *     disk would then hold the only copy of the state (a 2-voter cluster
 *     going to 1; 3 -> 2 stays allowed, as replacing a node goes through
 *     it);
 *   - a majority of the voters that would remain is unreachable from the
 *     leader: the new configuration could not commit anything, the change
 *     itself included, and the cluster would stop.
 * Anything else (adding, promoting, removing a non-voter) is never
 * refused here.
 *
 * Pure: the caller gives the voters of the configuration and which of them
 * it heard from recently. */
#ifndef ONCE_SERVER_SAFETY_H_
#define ONCE_SERVER_SAFETY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct safety_voter
{
    uint64_t id;
    bool reachable; /* the leader itself, or heard from recently */
};

enum safety_verdict {
    SAFETY_OK = 0,      /* safe, or @id is not a voter */
    SAFETY_SINGLE,      /* it would leave a single voter */
    SAFETY_UNREACHABLE, /* no reachable majority would remain */
};

/* Whether taking voter @id's vote away is unsafe, and why into @why
 * (ERR_MSG_SIZE) when it is. */
enum safety_verdict safety_refuses(const struct safety_voter *voters,
                                   size_t n,
                                   uint64_t id,
                                   char *why);

#endif /* ONCE_SERVER_SAFETY_H_ */
