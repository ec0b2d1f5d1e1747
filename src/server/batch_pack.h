/* server/batch_pack.h: one ClaimBatchItem's wire encoding, written
 * directly (proto/once_rpc.proto ClaimBatchItem, Result, OwnerToken,
 * Attempt).
 *
 * Why not protobuf-c's pack: a ClaimBatch answer packs one item per claim,
 * and protobuf-c's descriptor-driven get_packed_size + pack cost ~3,700
 * instructions per item on the leader (callgrind, bench/batch), a quarter
 * of a batch item's leader CPU. These functions write exactly the bytes
 * once__rpc__claim_batch_item__pack writes for the same message (fields
 * in number order, proto3 defaults left out, enums as int32 varints):
 * tests/unit/server/test_batch_pack.c compares the two byte for byte.
 * It also sizes a ClaimBatchRequest for its byte bound, the same way.
 *
 * Pure: no allocation; @msg is only read. */
#ifndef ONCE_SERVER_BATCH_PACK_H_
#define ONCE_SERVER_BATCH_PACK_H_

#include <stddef.h>
#include <stdint.h>

#include "once_rpc.pb-c.h"

/* The encoded size of @msg: what once__rpc__claim_batch_item__get_packed_size
 * answers; *@result_len is its Result's, for batch_item_pack. */
size_t batch_item_size(const Once__Rpc__ClaimBatchItem *msg,
                       size_t *result_len);

/* Writes @msg into @out, which has batch_item_size(@msg) bytes; returns
 * that size. @result_len: what batch_item_size said. */
size_t batch_item_pack(const Once__Rpc__ClaimBatchItem *msg,
                       size_t result_len,
                       uint8_t *out);

/* The encoded size of a decoded ClaimBatchRequest, unknown fields kept by
 * the decode included: what once__rpc__claim_batch_request__get_packed_size
 * answers, without protobuf-c's reflective walk (~700 instructions per
 * item on the node that checks the batch's byte bound). fuzz_body compares
 * the two on every batch it decodes. */
size_t batch_request_size(const Once__Rpc__ClaimBatchRequest *msg);

#endif /* ONCE_SERVER_BATCH_PACK_H_ */
