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
 * tests/unit/server/test_batch_pack.c compares the two byte for byte. The
 * Result inside is written by rpc/result_pack.h's Result writer, the one
 * the record answers use; an item it cannot write exactly (unknown fields
 * kept from a decode, more than RESULT_PACK_ATTEMPTS_MAX attempts) is
 * packed by protobuf-c instead, through the same two calls.
 * It also sizes a ClaimBatchRequest for its byte bound, the same way.
 *
 * Pure: no allocation; @msg is only read. */
#ifndef ONCE_SERVER_BATCH_PACK_H_
#define ONCE_SERVER_BATCH_PACK_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "once_rpc.pb-c.h"
#include "rpc/result_pack.h"

/* What batch_item_size measures for batch_item_pack: the caller's, on its
 * stack; valid for the item it was measured on, while it is unchanged. */
struct batch_item_plan
{
    size_t total; /* the item's encoded size */
    bool fast;    /* written here; false: by protobuf-c (see above) */
    struct result_pack_plan result; /* the Result's sizes, when fast */
};

/* The encoded size of @msg: what once__rpc__claim_batch_item__get_packed_size
 * answers; fills @plan for batch_item_pack. */
size_t batch_item_size(const Once__Rpc__ClaimBatchItem *msg,
                       struct batch_item_plan *plan);

/* Writes @msg into @out, which has batch_item_size(@msg) bytes, with the
 * @plan batch_item_size made for it; returns that size. */
size_t batch_item_pack(const Once__Rpc__ClaimBatchItem *msg,
                       const struct batch_item_plan *plan,
                       uint8_t *out);

/* The encoded size of a decoded ClaimBatchRequest, unknown fields kept by
 * the decode included: what once__rpc__claim_batch_request__get_packed_size
 * answers, without protobuf-c's reflective walk (~700 instructions per
 * item on the node that checks the batch's byte bound). fuzz_body compares
 * the two on every batch it decodes. */
size_t batch_request_size(const Once__Rpc__ClaimBatchRequest *msg);

#endif /* ONCE_SERVER_BATCH_PACK_H_ */
