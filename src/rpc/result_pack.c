/* rpc/result_pack.c: the record methods' answers packed by hand
 * (result_pack.h).
 *
 * Each message has a size function and a writer that visit the same fields
 * in field-number order, with the rules of common/pbwire.h: the writer's
 * output has the size's length exactly (asserted by the callers), and both
 * equal protobuf-c's (tests/unit/test_codec.c). A sub-message's length is
 * written before its bytes: result_pack_size keeps the sizes of the Result,
 * its owner token and its attempts in a plan that result_pack writes from,
 * so each is measured once (protobuf-c's packer measures them twice). The
 * Result's pair is exported (result_pack_result*) for server/batch_pack.c,
 * which writes a ClaimBatchItem around it. */
#include "rpc/result_pack.h"

#include <string.h>

#include "common/assert.h"
#include "common/pbwire.h"
#include "once_rpc.pb-c.h"

/* Field numbers of proto/once_rpc.proto; test_codec.c checks them, and
 * their types, against the generated descriptors. */
enum {
    TOKEN_GROUP_ID = 1,
    TOKEN_INDEX = 2,
    TOKEN_SLOT = 3,
    TOKEN_FIELDS = 3,

    ATT_REQUEST_ID = 1,
    ATT_EXECUTION_ID = 2,
    ATT_INDEX = 3,
    ATT_TIME_MS = 4,
    ATT_OUTCOME = 5,
    ATT_RETRY = 6,
    ATT_FIELDS = 6,

    RES_OUTCOME = 1,
    RES_RETRY = 2,
    RES_REQUEST_ID = 3,
    RES_FIRST_REQUEST_ID = 4,
    RES_FIRST_INDEX = 5,
    RES_FIRST_TIME_MS = 6,
    RES_ATTEMPTS_TOTAL = 7,
    RES_ATTEMPTS = 8,
    RES_HAS_OWNER_TOKEN = 9,
    RES_OWNER_TOKEN = 10,
    RES_RESULT = 11,
    RES_STORED_ERROR = 12,
    RES_RETRY_AFTER_MS = 13,
    RES_REASON = 14,
    RES_KIND = 15,
    RES_STATE = 16,
    RES_EXPIRES_MS = 17,
    RES_LEASE_EXPIRES_MS = 18,
    RES_OWNER_ATTEMPT = 19,
    RES_LOG_TIME_MS = 20,
    RES_MAX_USES = 21,
    RES_USES = 22,
    RES_USES_LEFT = 23,
    RES_SLIDING = 24,
    RES_FIELDS = 24,

    /* Claim-, Complete-, Release-, Forget- and LookupResponse. */
    RESP_RESULT = 1,
    LOOKUP_SERVED_BY = 2,
};

/* protobuf-c writes a string up to its NUL; NULL and "" are left out. */
static size_t str_len(const char *s)
{
    return s != NULL ? strlen(s) : 0;
}

/* The writers below are forced inline: each is reached from both an
 * answer's and a bare Result's function, and gcc inlines a static function
 * with one caller only; the calls would cost ~3% of an answer (callgrind,
 * a ClaimResponse with one attempt and an owner token). */

/* --- OwnerToken --------------------------------------------------------- */

static inline __attribute__((always_inline)) size_t token_size(
    const Once__Rpc__OwnerToken *t)
{
    return pbw_size_u64_opt(TOKEN_GROUP_ID, t->group_id) +
           pbw_size_u64_opt(TOKEN_INDEX, t->index) +
           pbw_size_u64_opt(TOKEN_SLOT, t->slot);
}

static inline __attribute__((always_inline)) uint8_t *token_write(
    const Once__Rpc__OwnerToken *t,
    uint8_t *p)
{
    p = pbw_put_u64_opt(p, TOKEN_GROUP_ID, t->group_id);
    p = pbw_put_u64_opt(p, TOKEN_INDEX, t->index);
    return pbw_put_u64_opt(p, TOKEN_SLOT, t->slot);
}

/* --- Attempt ------------------------------------------------------------ */

static inline __attribute__((always_inline)) size_t attempt_size(
    const Once__Rpc__Attempt *a)
{
    return pbw_size_len_opt(ATT_REQUEST_ID, a->request_id.len) +
           pbw_size_len_opt(ATT_EXECUTION_ID, a->execution_id.len) +
           pbw_size_u64_opt(ATT_INDEX, a->index) +
           pbw_size_u64_opt(ATT_TIME_MS, a->time_ms) +
           pbw_size_i32_opt(ATT_OUTCOME, (int32_t)a->outcome) +
           pbw_size_u64_opt(ATT_RETRY, a->retry != 0);
}

static inline __attribute__((always_inline)) uint8_t *attempt_write(
    const Once__Rpc__Attempt *a,
    uint8_t *p)
{
    p = pbw_put_len_opt(p, ATT_REQUEST_ID, a->request_id.data,
                        a->request_id.len);
    p = pbw_put_len_opt(p, ATT_EXECUTION_ID, a->execution_id.data,
                        a->execution_id.len);
    p = pbw_put_u64_opt(p, ATT_INDEX, a->index);
    p = pbw_put_u64_opt(p, ATT_TIME_MS, a->time_ms);
    p = pbw_put_i32_opt(p, ATT_OUTCOME, (int32_t)a->outcome);
    return pbw_put_bool_opt(p, ATT_RETRY, a->retry != 0);
}

/* --- Result ------------------------------------------------------------- */

static inline __attribute__((always_inline)) size_t result_size(
    const Once__Rpc__Result *r,
    struct result_pack_plan *plan)
{
    size_t n = pbw_size_i32_opt(RES_OUTCOME, (int32_t)r->outcome) +
               pbw_size_u64_opt(RES_RETRY, r->retry != 0) +
               pbw_size_len_opt(RES_REQUEST_ID, r->request_id.len) +
               pbw_size_len_opt(RES_FIRST_REQUEST_ID, r->first_request_id.len) +
               pbw_size_u64_opt(RES_FIRST_INDEX, r->first_index) +
               pbw_size_u64_opt(RES_FIRST_TIME_MS, r->first_time_ms) +
               pbw_size_u64_opt(RES_ATTEMPTS_TOTAL, r->attempts_total);

    for (size_t i = 0; i < r->n_attempts; i++) {
        plan->attempts[i] = attempt_size(r->attempts[i]);
        n += pbw_size_len_req(RES_ATTEMPTS, plan->attempts[i]);
    }
    n += pbw_size_u64_opt(RES_HAS_OWNER_TOKEN, r->has_owner_token != 0);
    plan->token = 0;
    if (r->owner_token != NULL) {
        plan->token = token_size(r->owner_token);
        n += pbw_size_len_req(RES_OWNER_TOKEN, plan->token);
    }
    return n + pbw_size_len_opt(RES_RESULT, r->result.len) +
           pbw_size_len_opt(RES_STORED_ERROR, r->stored_error.len) +
           pbw_size_u64_opt(RES_RETRY_AFTER_MS, r->retry_after_ms) +
           pbw_size_len_opt(RES_REASON, str_len(r->reason)) +
           pbw_size_i32_opt(RES_KIND, (int32_t)r->kind) +
           pbw_size_i32_opt(RES_STATE, (int32_t)r->state) +
           pbw_size_u64_opt(RES_EXPIRES_MS, r->expires_ms) +
           pbw_size_u64_opt(RES_LEASE_EXPIRES_MS, r->lease_expires_ms) +
           pbw_size_u64_opt(RES_OWNER_ATTEMPT, r->owner_attempt) +
           pbw_size_u64_opt(RES_LOG_TIME_MS, r->log_time_ms) +
           pbw_size_u64_opt(RES_MAX_USES, r->max_uses) +
           pbw_size_u64_opt(RES_USES, r->uses) +
           pbw_size_u64_opt(RES_USES_LEFT, r->uses_left) +
           pbw_size_u64_opt(RES_SLIDING, r->sliding != 0);
}

static inline __attribute__((always_inline)) uint8_t *result_write(
    const Once__Rpc__Result *r,
    const struct result_pack_plan *plan,
    uint8_t *p)
{
    p = pbw_put_i32_opt(p, RES_OUTCOME, (int32_t)r->outcome);
    p = pbw_put_bool_opt(p, RES_RETRY, r->retry != 0);
    p = pbw_put_len_opt(p, RES_REQUEST_ID, r->request_id.data,
                        r->request_id.len);
    p = pbw_put_len_opt(p, RES_FIRST_REQUEST_ID, r->first_request_id.data,
                        r->first_request_id.len);
    p = pbw_put_u64_opt(p, RES_FIRST_INDEX, r->first_index);
    p = pbw_put_u64_opt(p, RES_FIRST_TIME_MS, r->first_time_ms);
    p = pbw_put_u64_opt(p, RES_ATTEMPTS_TOTAL, r->attempts_total);
    for (size_t i = 0; i < r->n_attempts; i++) {
        p = pbw_put_len_head(p, RES_ATTEMPTS, plan->attempts[i]);
        p = attempt_write(r->attempts[i], p);
    }
    p = pbw_put_bool_opt(p, RES_HAS_OWNER_TOKEN, r->has_owner_token != 0);
    if (r->owner_token != NULL) {
        p = pbw_put_len_head(p, RES_OWNER_TOKEN, plan->token);
        p = token_write(r->owner_token, p);
    }
    p = pbw_put_len_opt(p, RES_RESULT, r->result.data, r->result.len);
    p = pbw_put_len_opt(p, RES_STORED_ERROR, r->stored_error.data,
                        r->stored_error.len);
    p = pbw_put_u64_opt(p, RES_RETRY_AFTER_MS, r->retry_after_ms);
    p = pbw_put_len_opt(p, RES_REASON, r->reason, str_len(r->reason));
    p = pbw_put_i32_opt(p, RES_KIND, (int32_t)r->kind);
    p = pbw_put_i32_opt(p, RES_STATE, (int32_t)r->state);
    p = pbw_put_u64_opt(p, RES_EXPIRES_MS, r->expires_ms);
    p = pbw_put_u64_opt(p, RES_LEASE_EXPIRES_MS, r->lease_expires_ms);
    p = pbw_put_u64_opt(p, RES_OWNER_ATTEMPT, r->owner_attempt);
    p = pbw_put_u64_opt(p, RES_LOG_TIME_MS, r->log_time_ms);
    p = pbw_put_u64_opt(p, RES_MAX_USES, r->max_uses);
    p = pbw_put_u64_opt(p, RES_USES, r->uses);
    p = pbw_put_u64_opt(p, RES_USES_LEFT, r->uses_left);
    return pbw_put_bool_opt(p, RES_SLIDING, r->sliding != 0);
}

/* --- the responses ------------------------------------------------------ */

/* The five responses share their first field; only Lookup has a second.
 * Reached through their own structs, not by offset. */
static const Once__Rpc__Result *response_result(const ProtobufCMessage *m,
                                                uint64_t *served_by)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;

    *served_by = 0;
    if (d == &once__rpc__claim_response__descriptor) {
        return ((const Once__Rpc__ClaimResponse *)m)->result;
    }
    if (d == &once__rpc__complete_response__descriptor) {
        return ((const Once__Rpc__CompleteResponse *)m)->result;
    }
    if (d == &once__rpc__release_response__descriptor) {
        return ((const Once__Rpc__ReleaseResponse *)m)->result;
    }
    if (d == &once__rpc__forget_response__descriptor) {
        return ((const Once__Rpc__ForgetResponse *)m)->result;
    }
    *served_by = ((const Once__Rpc__LookupResponse *)m)->served_by;
    return ((const Once__Rpc__LookupResponse *)m)->result;
}

static bool is_response(const ProtobufCMessageDescriptor *d)
{
    return d == &once__rpc__claim_response__descriptor ||
           d == &once__rpc__complete_response__descriptor ||
           d == &once__rpc__release_response__descriptor ||
           d == &once__rpc__forget_response__descriptor ||
           d == &once__rpc__lookup_response__descriptor;
}

/* A field added to the schema must be written here first: fail loudly
 * (every test that answers a claim) rather than drop it silently. */
static void assert_schema_pinned(void)
{
    ONCE_ASSERT(once__rpc__result__descriptor.n_fields == RES_FIELDS &&
                    once__rpc__attempt__descriptor.n_fields == ATT_FIELDS &&
                    once__rpc__owner_token__descriptor.n_fields == TOKEN_FIELDS,
                "result_pack.c writes every field of the schema");
}

/* result_pack_result_known without the pins, which each caller asserts
 * once. */
static inline __attribute__((always_inline)) bool result_known(
    const Once__Rpc__Result *r)
{
    if (r->base.n_unknown_fields != 0 ||
        r->n_attempts > RESULT_PACK_ATTEMPTS_MAX ||
        (r->owner_token != NULL &&
         r->owner_token->base.n_unknown_fields != 0)) {
        return false;
    }
    for (size_t i = 0; i < r->n_attempts; i++) {
        ONCE_ASSERT(r->attempts[i] != NULL, "repeated elements are set");
        if (r->attempts[i]->base.n_unknown_fields != 0) {
            return false;
        }
    }
    return true;
}

bool result_pack_result_known(const Once__Rpc__Result *r)
{
    assert_schema_pinned();
    return result_known(r);
}

bool result_pack_known(const ProtobufCMessage *m)
{
    const Once__Rpc__Result *r;
    uint64_t served_by;

    if (!is_response(m->descriptor) || m->n_unknown_fields != 0) {
        return false;
    }
    assert_schema_pinned();
    ONCE_ASSERT(
        m->descriptor->n_fields ==
            (m->descriptor == &once__rpc__lookup_response__descriptor ? 2u
                                                                      : 1u),
        "result_pack.c writes every field of the schema");
    r = response_result(m, &served_by);
    return r == NULL || result_known(r);
}

size_t result_pack_result_size(const Once__Rpc__Result *r,
                               struct result_pack_plan *plan)
{
    plan->result = result_size(r, plan);
    plan->total = plan->result;
    return plan->result;
}

size_t result_pack_result(const Once__Rpc__Result *r,
                          const struct result_pack_plan *plan,
                          uint8_t *out)
{
    return (size_t)(result_write(r, plan, out) - out);
}

size_t result_pack_size(const ProtobufCMessage *m,
                        struct result_pack_plan *plan)
{
    uint64_t served_by;
    const Once__Rpc__Result *r = response_result(m, &served_by);
    size_t n = pbw_size_u64_opt(LOOKUP_SERVED_BY, served_by);

    plan->result = 0;
    if (r != NULL) {
        plan->result = result_size(r, plan);
        n += pbw_size_len_req(RESP_RESULT, plan->result);
    }
    plan->total = n;
    return n;
}

size_t result_pack(const ProtobufCMessage *m,
                   const struct result_pack_plan *plan,
                   uint8_t *out)
{
    uint64_t served_by;
    const Once__Rpc__Result *r = response_result(m, &served_by);
    uint8_t *p = out;

    if (r != NULL) {
        p = pbw_put_len_head(p, RESP_RESULT, plan->result);
        p = result_write(r, plan, p);
    }
    p = pbw_put_u64_opt(p, LOOKUP_SERVED_BY, served_by);
    return (size_t)(p - out);
}
