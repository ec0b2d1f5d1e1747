/* rpc/status.c: module code -> answer status, answer status -> HTTP. */
#include "rpc/status.h"

/* The Raft layer's codes by name. The numbers are common/err.h's; rpc/ does
 * not include raft/replica.h, which declares the same enum (rpc sits below
 * the Raft layer). */
enum { ERR_REPLICA_CODES(ERR_ENUM) };

enum rpc_status rpc_status_of(int code, bool sent, enum rpc_applied *applied)
{
    *applied = RPC_APPLIED_FALSE;
    switch (code) {
        case REPLICA_E_NOTLEADER:
        case REPLICA_E_SHUTDOWN:
        case REPLICA_E_NOMEM:
        case REPLICA_E_INTERNAL:
        case REPLICA_E_START:
            /* Not proposed (or committed as a no-op): another node, or
             * this one later, can take it. */
            return RPC_STATUS_UNAVAILABLE;
        case REPLICA_E_UNKNOWN:
            *applied = RPC_APPLIED_UNKNOWN;
            return RPC_STATUS_UNKNOWN;
        case REPLICA_E_PRECONDITION:
            return RPC_STATUS_FAILED_PRECONDITION;
        case REPLICA_E_BUSY:
            return RPC_STATUS_RESOURCE_EXHAUSTED;
        case REPLICA_E_INVALID:
        case REPLICA_E_TOOBIG:
            return RPC_STATUS_INVALID_ARGUMENT;
        default:
            break;
    }
    if (sent) {
        *applied = RPC_APPLIED_UNKNOWN;
        return RPC_STATUS_UNKNOWN;
    }
    return RPC_STATUS_UNAVAILABLE;
}

unsigned rpc_status_http(enum rpc_status status, enum rpc_applied applied)
{
    if (applied == RPC_APPLIED_UNKNOWN) {
        return 504;
    }
    /* No default: -Wswitch names a status added without its row. */
    switch (status) {
        case RPC_STATUS_OK:
            return 200;
        case RPC_STATUS_INVALID_ARGUMENT:
            return 400;
        case RPC_STATUS_PERMISSION_DENIED:
            return 403;
        case RPC_STATUS_UNAVAILABLE:
        case RPC_STATUS_RESOURCE_EXHAUSTED:
        case RPC_STATUS_FAILED_PRECONDITION:
        case RPC_STATUS_DEADLINE_EXCEEDED:
        case RPC_STATUS_WRONG_GROUP:
        case RPC_STATUS_MOVING:
            return 503;
        case RPC_STATUS_UNKNOWN:
            return 504;
    }
    return 503;
}
