/* rpc/status.h: what an answer's status means outside the RPC, written
 * once (common/err.h draws the whole chain).
 *
 * rpc_status_of turns a module code into the status and `applied` flag of an
 * answer (onced: the leader's own path, admin operations and forwarding);
 * rpc_status_http turns a status and `applied` into the HTTP status of the
 * JSON API. Both are total: every code and every status has a row, chosen
 * here, never a default. Pure and reentrant. */
#ifndef ONCE_RPC_STATUS_H_
#define ONCE_RPC_STATUS_H_

#include <stdbool.h>

#include "rpc/frame.h"

/* The status and *@applied of an answer that failed with @code (< 0).
 * REPLICA_E_* codes, the Raft layer's, decide the call's fate and have one
 * row each. Any other code (errno, a transport's RPC_E_* when forwarding,
 * another module's) means the deciding layer was not reached: @sent says
 * whether the request may have left (then UNKNOWN, applied unknown) or
 * surely did not (UNAVAILABLE, applied false). */
enum rpc_status rpc_status_of(int code, bool sent, enum rpc_applied *applied);

/* The HTTP status of an error answer (docs/http-api.md): 504 when @applied
 * is unknown whatever the status, else 400 INVALID_ARGUMENT, 403
 * PERMISSION_DENIED, 504 UNKNOWN, 503 for the statuses that say "not now",
 * 200 for OK. A number outside enum rpc_status (not decoded by
 * envelope_decode) is 503. */
unsigned rpc_status_http(enum rpc_status status, enum rpc_applied applied);

#endif /* ONCE_RPC_STATUS_H_ */
