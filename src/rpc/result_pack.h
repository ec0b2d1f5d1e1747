/* rpc/result_pack.h: the answers of the record methods packed by hand.
 *
 * Every claim, complete, release, lookup and forget is answered with a
 * <Method>Response around one once.rpc.Result (proto/once_rpc.proto). These
 * functions pack those five messages without protobuf-c's reflective
 * packer (common/pbwire.h), to the very bytes protobuf-c would write
 * (tests/unit/test_codec.c compares both on randomized messages).
 *
 * Only messages the code knows completely take this path: the five response
 * types, with no unknown fields kept in them or in their Result, owner token
 * and attempts (a message decoded from a newer peer keeps those). Anything
 * else (the other methods' answers, a ClaimBatchResponse) is the caller's
 * to pack with protobuf-c (result_pack_known says which). A bare Result is
 * exported too (result_pack_result*), for server/batch_pack.c's
 * ClaimBatchItem: one Result writer for every answer that holds one. A schema
 * change that adds a field to one of these messages trips an ONCE_ASSERT on the
 * first answer, and the unit test, until this file writes the new field.
 *
 * Pure: no allocation, no I/O. Reentrant. */
#ifndef ONCE_RPC_RESULT_PACK_H_
#define ONCE_RPC_RESULT_PACK_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "once_rpc.pb-c.h"

/* Attempts a Result may list on this path (the fsm keeps at most 5); a
 * Result with more takes protobuf-c's. */
#define RESULT_PACK_ATTEMPTS_MAX 8

/* The sizes result_pack_size measures for result_pack, so that the
 * Result, its owner token and its attempts are sized once per answer
 * (their lengths precede them on the wire). The caller's, on its stack;
 * valid for the message it was measured on, while it is unchanged. */
struct result_pack_plan
{
    size_t total;
    size_t result;
    size_t token;
    size_t attempts[RESULT_PACK_ATTEMPTS_MAX];
};

/* Whether @m is a Claim-, Complete-, Release-, Lookup- or ForgetResponse
 * that result_pack_size and result_pack handle. */
bool result_pack_known(const ProtobufCMessage *m);

/* protobuf_c_message_get_packed_size(@m), for a message result_pack_known
 * accepts; fills @plan. */
size_t result_pack_size(const ProtobufCMessage *m,
                        struct result_pack_plan *plan);

/* protobuf_c_message_pack(@m, @out) with the @plan result_pack_size made
 * for @m: writes exactly plan->total bytes at @out (the caller's, at least
 * that long) and returns that number. */
size_t result_pack(const ProtobufCMessage *m,
                   const struct result_pack_plan *plan,
                   uint8_t *out);

/* A bare once.rpc.Result, for an encoder of a message that holds one
 * (server/batch_pack.c's ClaimBatchItem): the same writer as the five
 * answers'. The caller writes the Result's tag and length (plan->result)
 * before its bytes. */

/* Whether result_pack_result_size and result_pack_result handle @r: no
 * unknown fields in it, its owner token or its attempts, and at most
 * RESULT_PACK_ATTEMPTS_MAX attempts. Else the caller packs the message
 * that holds @r with protobuf-c. Asserts the schema pins as
 * result_pack_known does. */
bool result_pack_result_known(const Once__Rpc__Result *r);

/* The encoded size of @r alone (no tag, no length), for an @r that
 * result_pack_result_known accepts; fills @plan, with plan->result and
 * plan->total both that size. */
size_t result_pack_result_size(const Once__Rpc__Result *r,
                               struct result_pack_plan *plan);

/* Writes @r with the @plan result_pack_result_size made for it: exactly
 * plan->result bytes at @out (the caller's, at least that long); returns
 * that number. */
size_t result_pack_result(const Once__Rpc__Result *r,
                          const struct result_pack_plan *plan,
                          uint8_t *out);

#endif /* ONCE_RPC_RESULT_PACK_H_ */
