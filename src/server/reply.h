/* server/reply.h: the answers every RPC handler of onced gives (service.c,
 * admin.c, forward.c).
 *
 * Each function answers @call exactly once (rpc_call_reply); the call must
 * not be used afterwards. The Raft layer's codes become wire statuses
 * through rpc_status_of (rpc/status.h) only, so that the leader's own path,
 * the admin operations and the forwarding agree (docs/server.md, "Serving a
 * call"). Loop thread only. */
#ifndef ONCE_SERVER_REPLY_H_
#define ONCE_SERVER_REPLY_H_

#include <protobuf-c/protobuf-c.h>

#include "rpc/conn.h"

struct server;

/* A status other than OK, with @error (may be NULL) and the leader hint
 * @hint (NULL or "" for none). */
void reply_error(struct rpc_call *call,
                 enum rpc_status status,
                 enum rpc_applied applied,
                 const char *error,
                 const char *hint);

/* OK with @msg packed as the body; out of memory packing it is UNKNOWN,
 * applied unknown (the command may have applied). */
void reply_msg(struct rpc_call *call, const ProtobufCMessage *msg);

/* INVALID_ARGUMENT, applied false: a field failed its bound. */
void reply_invalid(struct rpc_call *call, const char *why);

/* UNAVAILABLE, applied false, with this node's leader hint if known. */
void reply_unavailable(struct server *s,
                       struct rpc_call *call,
                       const char *why);

/* A REPLICA_E_* code (raft/replica.h) as its wire status and applied flag
 * (rpc_status_of); @msg (may be NULL) is appended to the code's text. */
void reply_replica_error(struct server *s,
                         struct rpc_call *call,
                         int rv,
                         const char *msg);

#endif /* ONCE_SERVER_REPLY_H_ */
