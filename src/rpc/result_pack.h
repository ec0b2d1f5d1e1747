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
 * to pack with protobuf-c (result_pack_known says which). A schema change
 * that adds a field to one of these messages trips an ONCE_ASSERT on the
 * first answer, and the unit test, until this file writes the new field.
 *
 * Pure: no allocation, no I/O. Reentrant. */
#ifndef ONCE_RPC_RESULT_PACK_H_
#define ONCE_RPC_RESULT_PACK_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Whether @m is a Claim-, Complete-, Release-, Lookup- or ForgetResponse
 * that result_pack_size and result_pack handle. */
bool result_pack_known(const ProtobufCMessage *m);

/* protobuf_c_message_get_packed_size(@m), for a message result_pack_known
 * accepts. */
size_t result_pack_size(const ProtobufCMessage *m);

/* protobuf_c_message_pack(@m, @out): writes exactly result_pack_size(@m)
 * bytes at @out (the caller's, at least that long) and returns that
 * number. Same precondition. */
size_t result_pack(const ProtobufCMessage *m, uint8_t *out);

#endif /* ONCE_RPC_RESULT_PACK_H_ */
