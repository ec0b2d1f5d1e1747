/* server/admin.h: the Admin methods of docs/design.md §5 on one node:
 * Status (any node), and on the ready leader MembersList, MembersAdd,
 * MembersRemove, MembersAssign, Transfer and SnapshotTake (docs/server.md,
 * "Serving a call", "Status").
 *
 * Owns: the membership operation and the snapshot waiting for the Raft
 * layer, one of each at most (replica_member and replica_snapshot run one
 * at a time). Each is a heap record freed by its callback; admin_shutdown
 * answers their calls before the Raft layer closes (the callbacks then run
 * with no call to answer).
 *
 * The handlers have the dispatch's signature (service.h, service_serve_fn):
 * @msg is the decoded request body and @in its conversion, both checked by
 * the method's check and owned by the caller.
 * Loop thread only. */
#ifndef ONCE_SERVER_ADMIN_H_
#define ONCE_SERVER_ADMIN_H_

#include <protobuf-c/protobuf-c.h>

#include "rpc/conn.h"
#include "server/service.h"

struct server;
struct admin_op;

struct digest_op;

/* Voters the leader heard from, sampled by the tick (admin_tick). raft
 * clears recent_recv at every election timeout and sets it again at the
 * next answer, so one look at it right after a clear sees every peer
 * unreachable; the samples keep the last time each one was seen. */
struct admin_seen
{
    uint64_t id;
    uint64_t ms; /* uv_now of the sample */
};

struct admin
{
    struct admin_op *member_op;   /* a membership operation running */
    struct admin_op *snap_op;     /* a snapshot being taken */
    struct digest_op *digest_ops; /* statuses waiting for a state digest */
    struct admin_seen seen[FSM_MEMBERS_MAX];
    unsigned n_seen;
    bool was_leader;          /* the tick saw this node leading */
    uint64_t leader_since_ms; /* since when (uv_now) */
};

/* From the node's tick: on the leader, note the voters raft heard from
 * (membership safety's reachability, safety.h). */
void admin_tick(struct server *s);

/* Any node, always: its own view (role, term, indexes, leader, members). */
void admin_status(struct server *s,
                  struct rpc_call *call,
                  const ProtobufCMessage *msg,
                  const struct service_in *in);

/* On the ready leader. */
void admin_members_list(struct server *s,
                        struct rpc_call *call,
                        const ProtobufCMessage *msg,
                        const struct service_in *in);
void admin_members_add(struct server *s,
                       struct rpc_call *call,
                       const ProtobufCMessage *msg,
                       const struct service_in *in);
void admin_members_remove(struct server *s,
                          struct rpc_call *call,
                          const ProtobufCMessage *msg,
                          const struct service_in *in);
void admin_members_assign(struct server *s,
                          struct rpc_call *call,
                          const ProtobufCMessage *msg,
                          const struct service_in *in);
void admin_transfer(struct server *s,
                    struct rpc_call *call,
                    const ProtobufCMessage *msg,
                    const struct service_in *in);
void admin_snapshot_take(struct server *s,
                         struct rpc_call *call,
                         const ProtobufCMessage *msg,
                         const struct service_in *in);

/* admin_quota.c: QuotaList and SchemaUpgrade on the ready leader (QuotaSet
 * is a command: service.c). */
void admin_quota_list(struct server *s,
                      struct rpc_call *call,
                      const ProtobufCMessage *msg,
                      const struct service_in *in);
void admin_schema_upgrade(struct server *s,
                          struct rpc_call *call,
                          const ProtobufCMessage *msg,
                          const struct service_in *in);
/* Answer a running SchemaUpgrade at shutdown (admin_shutdown calls it). */
void admin_upgrade_shutdown(void);
/* The highest log schema this node applies, as Status reports it
 * (replica_schema_max: a debug build's test hook may lower it). */
uint32_t admin_schema_max(void);

/* Before the Raft layer closes: the waiting membership operation is
 * answered UNKNOWN (it may still commit), the snapshot UNAVAILABLE. */
void admin_shutdown(struct admin *a);

#endif /* ONCE_SERVER_ADMIN_H_ */
