/* server/service_batch.h: the ClaimBatch method (docs/server.md, "Batch
 * claims"; proto/once_rpc.proto ClaimBatchRequest).
 *
 * The check runs on any node (service.h): 1..RPC_CLAIM_BATCH_MAX items and
 * at most RPC_CLAIM_BATCH_BYTES_MAX bytes encoded; a batch over either is
 * refused whole, INVALID_ARGUMENT, applied FALSE. Everything about one item
 * (its bounds, its scope's right, the settings, the queue's room, its
 * outcome) is that item's answer, never the batch's: the ready leader
 * serves the items as consecutive Claim commands, in order (service_batch.c
 * says how). Elsewhere the call is forwarded whole, as Claim is.
 *
 * Ownership: the batch is the handler's from serve until its answer; the
 * request's bytes are only read during serve (the Raft layer copies each
 * command). Loop thread only. */
#ifndef ONCE_SERVER_SERVICE_BATCH_H_
#define ONCE_SERVER_SERVICE_BATCH_H_

#include "server/service.h"

int service_check_claim_batch(const ProtobufCMessage *msg,
                              struct service_in *in,
                              char *why);

/* On the ready leader; @in->who is the caller the items are authorized
 * as. Answers @call once, after the last item's answer. */
void service_serve_claim_batch(struct server *s,
                               struct rpc_call *call,
                               const ProtobufCMessage *msg,
                               const struct service_in *in);

#endif /* ONCE_SERVER_SERVICE_BATCH_H_ */
