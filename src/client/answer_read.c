/* client/answer_read.c: the hand reader of the hot answers (client.h): a
 * Claim's (Complete's, Release's, Forget's) Result and a ClaimBatch's
 * items, read from the answer's bytes into the protobuf-c structs that
 * wire_read.c checks and converts, without protobuf-c's reflective
 * unpacker (~3,800 instructions per answer, callgrind on once-bench).
 *
 * It is common/pbwire.h's reader, walked field by field (pbr_field, and
 * pbr_store for the flat fields) because a Result has a sub-message, a
 * string and a repeated field. It declines whatever it cannot decode
 * exactly as protobuf-c would: an unknown field, a singular field seen
 * twice (protobuf-c merges or replaces), more attempts than once.h keeps,
 * a reason longer than once.h's, and what pbwire declines; the caller then
 * unpacks the same bytes with protobuf-c (envelope_unpack_body) and its
 * budget and checks, so every answer protobuf-c refuses is still refused.
 * tests/fuzz/fuzz_codec.c checks that what this accepts, protobuf-c
 * accepts with equal fields. Byte fields borrow from the answer. */
#include <string.h>

#include "client/client.h"

#define F(kind, type, member)          \
    {                                  \
        (kind), offsetof(type, member) \
    }
/* Result's flat fields by number; the others (8 attempts, 10
 * owner_token, 14 reason) are read by hand and only their slots are here. */
static const struct pbr_field result_fields[] = {
    F(PBR_ENUM, Once__Rpc__Result, outcome),
    F(PBR_BOOL, Once__Rpc__Result, retry),
    F(PBR_BYTES, Once__Rpc__Result, request_id),
    F(PBR_BYTES, Once__Rpc__Result, first_request_id),
    F(PBR_U64, Once__Rpc__Result, first_index),
    F(PBR_U64, Once__Rpc__Result, first_time_ms),
    F(PBR_U32, Once__Rpc__Result, attempts_total),
    F(PBR_BYTES, Once__Rpc__Result, attempts), /* by hand */
    F(PBR_BOOL, Once__Rpc__Result, has_owner_token),
    F(PBR_BYTES, Once__Rpc__Result, owner_token), /* by hand */
    F(PBR_BYTES, Once__Rpc__Result, result),
    F(PBR_BYTES, Once__Rpc__Result, stored_error),
    F(PBR_U64, Once__Rpc__Result, retry_after_ms),
    F(PBR_BYTES, Once__Rpc__Result, reason), /* by hand */
    F(PBR_ENUM, Once__Rpc__Result, kind),
    F(PBR_ENUM, Once__Rpc__Result, state),
    F(PBR_U64, Once__Rpc__Result, expires_ms),
    F(PBR_U64, Once__Rpc__Result, lease_expires_ms),
    F(PBR_U32, Once__Rpc__Result, owner_attempt),
    F(PBR_U64, Once__Rpc__Result, log_time_ms),
    F(PBR_U32, Once__Rpc__Result, max_uses),
    F(PBR_U32, Once__Rpc__Result, uses),
    F(PBR_U32, Once__Rpc__Result, uses_left),
    F(PBR_BOOL, Once__Rpc__Result, sliding),
};
enum {
    RESULT_ATTEMPTS = 8,
    RESULT_OWNER_TOKEN = 10,
    RESULT_REASON = 14,
    RESULT_N = sizeof result_fields / sizeof result_fields[0],
};

static const struct pbr_field attempt_fields[] = {
    F(PBR_BYTES, Once__Rpc__Attempt, request_id),
    F(PBR_BYTES, Once__Rpc__Attempt, execution_id),
    F(PBR_U64, Once__Rpc__Attempt, index),
    F(PBR_U64, Once__Rpc__Attempt, time_ms),
    F(PBR_ENUM, Once__Rpc__Attempt, outcome),
    F(PBR_BOOL, Once__Rpc__Attempt, retry),
};
const struct pbr_spec client_attempt_pbr_spec = {
    attempt_fields, sizeof attempt_fields / sizeof attempt_fields[0]};

static const struct pbr_field owner_token_fields[] = {
    F(PBR_U32, Once__Rpc__OwnerToken, group_id),
    F(PBR_U64, Once__Rpc__OwnerToken, index),
    F(PBR_U32, Once__Rpc__OwnerToken, slot),
};
const struct pbr_spec client_owner_token_pbr_spec = {
    owner_token_fields,
    sizeof owner_token_fields / sizeof owner_token_fields[0]};

/* ClaimBatchItem's flat fields (4, result, by hand). */
static const struct pbr_field item_fields[] = {
    F(PBR_ENUM, Once__Rpc__ClaimBatchItem, status),
    F(PBR_ENUM, Once__Rpc__ClaimBatchItem, applied),
    F(PBR_BYTES, Once__Rpc__ClaimBatchItem, error),
};
#undef F
enum { ITEM_RESULT = 4 };

_Static_assert(RESULT_N == 24, "Result's fields, numbered 1..24");

/* Field @number's bit in @seen: false if seen before (a repeat, declined). */
static bool first_time(uint32_t *seen, uint32_t number)
{
    uint32_t bit = UINT32_C(1) << (number - 1);

    if ((*seen & bit) != 0) {
        return false;
    }
    *seen |= bit;
    return true;
}

bool client_pb_result(const uint8_t *buf,
                      size_t len,
                      struct client_pb_result *out)
{
    Once__Rpc__Result *res = &out->res;
    uint32_t seen = 0;
    size_t used;

    once__rpc__result__init(res);
    for (size_t at = 0; at < len; at += used) {
        const uint8_t *data;
        uint64_t value;
        uint32_t number;
        unsigned wire;

        used = pbr_field(buf + at, len - at, &number, &wire, &value, &data);
        if (used == 0 || number > RESULT_N) {
            return false;
        }
        if (number == RESULT_ATTEMPTS) {
            /* Repeated: each occurrence is one more attempt. */
            Once__Rpc__Attempt *a = &out->attempts[res->n_attempts];

            if (wire != PBW_LEN || res->n_attempts == ONCE_ATTEMPTS_MAX) {
                return false;
            }
            once__rpc__attempt__init(a);
            if (!pbr_parse(&client_attempt_pbr_spec, data, (size_t)value, a)) {
                return false;
            }
            out->attempt_ptrs[res->n_attempts++] = a;
            res->attempts = out->attempt_ptrs;
            continue;
        }
        if (!first_time(&seen, number)) {
            return false;
        }
        if (number == RESULT_OWNER_TOKEN) {
            if (wire != PBW_LEN) {
                return false;
            }
            once__rpc__owner_token__init(&out->token);
            if (!pbr_parse(&client_owner_token_pbr_spec, data, (size_t)value,
                           &out->token)) {
                return false;
            }
            res->owner_token = &out->token;
        } else if (number == RESULT_REASON) {
            /* protobuf-c copies a string and NUL-terminates it. */
            if (wire != PBW_LEN || value > sizeof out->reason - 1) {
                return false;
            }
            if (value > 0) {
                memcpy(out->reason, data, (size_t)value);
            }
            out->reason[value] = '\0';
            res->reason = out->reason;
        } else if (!pbr_store(&result_fields[number - 1], wire, value, data,
                              res)) {
            return false;
        }
    }
    return true;
}

bool client_pb_item(const uint8_t *buf, size_t len, struct client_pb_item *out)
{
    Once__Rpc__ClaimBatchItem *it = &out->item;
    uint32_t seen = 0;
    size_t used;

    once__rpc__claim_batch_item__init(it);
    for (size_t at = 0; at < len; at += used) {
        const uint8_t *data;
        uint64_t value;
        uint32_t number;
        unsigned wire;

        used = pbr_field(buf + at, len - at, &number, &wire, &value, &data);
        if (used == 0 || number > ITEM_RESULT || !first_time(&seen, number)) {
            return false;
        }
        if (number == ITEM_RESULT) {
            if (wire != PBW_LEN ||
                !client_pb_result(data, (size_t)value, &out->result)) {
                return false;
            }
            it->result = &out->result.res;
        } else if (!pbr_store(&item_fields[number - 1], wire, value, data,
                              it)) {
            return false;
        }
    }
    return true;
}
