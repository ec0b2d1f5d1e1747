/* server/batch_pack.c: one ClaimBatchItem's wire encoding (batch_pack.h).
 *
 * The item's own three scalar fields are written with common/pbwire.h's
 * writers; its Result, the big part, by rpc/result_pack.c's Result writer,
 * the one the five record answers use, so one encoder of Result,
 * OwnerToken and Attempt exists. An item result_pack cannot write exactly
 * (its Result kept unknown fields or lists more attempts than a plan
 * holds, or the item kept unknown fields) is packed by protobuf-c: the same
 * bytes, the slow way. Fields go in number order, proto3 defaults left out
 * (pbwire.h's rules), as protobuf-c packs them. */
#include "server/batch_pack.h"

#include "common/assert.h"
#include "common/pbwire.h"

/* Field numbers of proto/once_rpc.proto; test_batch_pack.c pins the
 * field counts. */
enum {
    ITEM_STATUS = 1,
    ITEM_APPLIED = 2,
    ITEM_ERROR = 3,
    ITEM_RESULT = 4,
    ITEM_FIELDS = 4,

    REQ_SCOPE = 1,
    REQ_KEY = 2,
    REQ_REQUEST_ID = 3,
    REQ_EXECUTION_ID = 4,
    REQ_KIND = 5,
    REQ_TTL_MS = 6,
    REQ_HAS_TS = 7,
    REQ_TS_MS = 8,
    REQ_WINDOW_MS = 9,
    REQ_PAYLOAD_HASH = 10,
    REQ_LEASE_MS = 11,
    REQ_MAX_USES = 12,
    REQ_SLIDING = 13,
    REQ_FIELDS = 13,

    BATCH_ITEMS = 1,
    BATCH_FIELDS = 1,
};

size_t batch_item_size(const Once__Rpc__ClaimBatchItem *msg,
                       struct batch_item_plan *plan)
{
    size_t n;

    /* A field added to the item must be written here first: fail loudly
     * (every batch answer) rather than drop it silently. */
    ONCE_ASSERT(once__rpc__claim_batch_item__descriptor.n_fields == ITEM_FIELDS,
                "batch_pack.c writes every field of the schema");
    plan->fast = msg->base.n_unknown_fields == 0 &&
                 (msg->result == NULL || result_pack_result_known(msg->result));
    if (!plan->fast) {
        plan->total = once__rpc__claim_batch_item__get_packed_size(msg);
        return plan->total;
    }
    n = pbw_size_i32_opt(ITEM_STATUS, (int32_t)msg->status) +
        pbw_size_i32_opt(ITEM_APPLIED, (int32_t)msg->applied) +
        pbw_size_len_opt(ITEM_ERROR, msg->error.len);
    if (msg->result != NULL) {
        n += pbw_size_len_req(
            ITEM_RESULT, result_pack_result_size(msg->result, &plan->result));
    }
    plan->total = n;
    return n;
}

size_t batch_item_pack(const Once__Rpc__ClaimBatchItem *msg,
                       const struct batch_item_plan *plan,
                       uint8_t *out)
{
    uint8_t *p = out;

    ONCE_ASSERT(out != NULL, "a buffer of batch_item_size bytes");
    if (!plan->fast) {
        return once__rpc__claim_batch_item__pack(msg, out);
    }
    p = pbw_put_i32_opt(p, ITEM_STATUS, (int32_t)msg->status);
    p = pbw_put_i32_opt(p, ITEM_APPLIED, (int32_t)msg->applied);
    p = pbw_put_len_opt(p, ITEM_ERROR, msg->error.data, msg->error.len);
    if (msg->result != NULL) {
        p = pbw_put_len_head(p, ITEM_RESULT, plan->result.result);
        p += result_pack_result(msg->result, &plan->result, p);
    }
    ONCE_ASSERT((size_t)(p - out) == plan->total, "written as sized");
    return plan->total;
}

static size_t request_size(const Once__Rpc__ClaimRequest *c)
{
    return pbw_size_len_opt(REQ_SCOPE, c->scope.len) +
           pbw_size_len_opt(REQ_KEY, c->key.len) +
           pbw_size_len_opt(REQ_REQUEST_ID, c->request_id.len) +
           pbw_size_len_opt(REQ_EXECUTION_ID, c->execution_id.len) +
           pbw_size_i32_opt(REQ_KIND, (int32_t)c->kind) +
           pbw_size_u64_opt(REQ_TTL_MS, c->ttl_ms) +
           pbw_size_u64_opt(REQ_HAS_TS, c->has_ts != 0) +
           pbw_size_u64_opt(REQ_TS_MS, c->ts_ms) +
           pbw_size_u64_opt(REQ_WINDOW_MS, c->window_ms) +
           pbw_size_len_opt(REQ_PAYLOAD_HASH, c->payload_hash.len) +
           pbw_size_u64_opt(REQ_LEASE_MS, c->lease_ms) +
           pbw_size_u64_opt(REQ_MAX_USES, c->max_uses) +
           pbw_size_u64_opt(REQ_SLIDING, c->sliding != 0) +
           pbw_size_unknown(&c->base);
}

size_t batch_request_size(const Once__Rpc__ClaimBatchRequest *msg)
{
    size_t n = pbw_size_unknown(&msg->base);

    ONCE_ASSERT(
        once__rpc__claim_request__descriptor.n_fields == REQ_FIELDS &&
            once__rpc__claim_batch_request__descriptor.n_fields == BATCH_FIELDS,
        "batch_pack.c sizes every field of the schema");
    for (size_t i = 0; i < msg->n_items; i++) {
        ONCE_ASSERT(msg->items[i] != NULL, "repeated elements are set");
        n += pbw_size_len_req(BATCH_ITEMS, request_size(msg->items[i]));
    }
    return n;
}
