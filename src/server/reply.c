/* server/reply.c: the answers of onced's RPC handlers (reply.h). */
#include "server/reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "rpc/result_pack.h"
#include "rpc/status.h"
#include "server/leader.h"
#include "server/server.h"

void reply_error(struct rpc_call *call,
                 enum rpc_status status,
                 enum rpc_applied applied,
                 const char *error,
                 const char *hint)
{
    struct rpc_reply r;

    memset(&r, 0, sizeof r);
    r.status = status;
    r.applied = applied;
    r.error = error;
    r.leader_hint = hint != NULL && hint[0] != '\0' ? hint : NULL;
    rpc_call_reply(call, &r);
}

void reply_msg(struct rpc_call *call, const ProtobufCMessage *msg)
{
    struct rpc_reply r;
    struct result_pack_plan plan;
    /* The record methods' answers (every claim's) are packed by hand, the
     * rest by protobuf-c: the same bytes (rpc/result_pack.h). */
    bool fast = result_pack_known(msg);
    size_t len = fast ? result_pack_size(msg, &plan)
                      : protobuf_c_message_get_packed_size(msg);
    /* A claim's answer is ~100 bytes: no malloc for it (rpc_call_reply
     * copies the body into the frame). */
    uint8_t small[512];
    uint8_t *buf = len <= sizeof small ? small : malloc(len);
    size_t packed;

    if (buf == NULL) {
        /* The command may have applied: say so. */
        reply_error(call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                    "out of memory encoding the answer", NULL);
        return;
    }
    packed =
        fast ? result_pack(msg, &plan, buf) : protobuf_c_message_pack(msg, buf);
    ONCE_ASSERT(packed == len, "the answer packs to its measured size");
    memset(&r, 0, sizeof r);
    r.status = RPC_STATUS_OK;
    r.applied = RPC_APPLIED_UNSPECIFIED;
    r.body = buf;
    r.body_len = len;
    rpc_call_reply(call, &r);
    if (buf != small) {
        free(buf);
    }
}

void reply_invalid(struct rpc_call *call, const char *why)
{
    reply_error(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE, why,
                NULL);
}

void reply_unavailable(struct server *s, struct rpc_call *call, const char *why)
{
    char hint[RPC_ADDR_MAX + 1];
    uint64_t lid;

    leader_addr(s, &lid, hint);
    reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE, why, hint);
}

void reply_replica_error(struct server *s,
                         struct rpc_call *call,
                         int rv,
                         const char *msg)
{
    char text[RPC_ERROR_MAX + 1];
    enum rpc_applied applied;
    enum rpc_status status;

    if (msg != NULL && msg[0] != '\0') {
        snprintf(text, sizeof text, "%s: %s", replica_strerror(rv), msg);
    } else {
        snprintf(text, sizeof text, "%s", replica_strerror(rv));
    }
    status = rpc_status_of(rv, true, &applied);
    if (status == RPC_STATUS_UNAVAILABLE) {
        reply_unavailable(s, call, text); /* with the leader hint */
        return;
    }
    reply_error(call, status, applied, text, NULL);
}
