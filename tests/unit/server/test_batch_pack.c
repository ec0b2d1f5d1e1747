/* server/batch_pack: the direct ClaimBatchItem encoder writes exactly
 * protobuf-c's bytes, for every field set or left out, and protobuf-c
 * reads them back, through result_pack's Result writer or, for what it
 * does not take, protobuf-c's; a ClaimBatchRequest's size is protobuf-c's. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "server/batch_pack.h"

Suite *batch_pack_suite(void);

/* Deterministic pseudo-random numbers (xorshift64*): the cases repeat. */
static uint64_t rnd_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return rnd_state * 0x2545f4914f6cdd1du;
}

/* 0 half the time (the field left out), else a value of 1..10 varint
 * bytes. */
static uint64_t rnd_u64(void)
{
    if (rnd() % 2 == 0) {
        return 0;
    }
    return rnd() >> (rnd() % 64);
}

static uint8_t bytes[3][70000];

static ProtobufCBinaryData rnd_bin(int which, size_t max)
{
    ProtobufCBinaryData d = {0, NULL};

    if (rnd() % 2 == 0) {
        return d;
    }
    d.len = rnd() % 3 == 0 ? max : (size_t)(rnd() % (max + 1));
    for (size_t i = 0; i < d.len; i++) {
        bytes[which][i] = (uint8_t)rnd();
    }
    d.data = bytes[which];
    return d;
}

static void check_same(const Once__Rpc__ClaimBatchItem *it)
{
    size_t want = once__rpc__claim_batch_item__get_packed_size(it);
    struct batch_item_plan plan;
    size_t got = batch_item_size(it, &plan);
    uint8_t *a = malloc(want + 1), *b = malloc(got + 1);
    Once__Rpc__ClaimBatchItem *back;

    ck_assert_uint_eq(got, want);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(once__rpc__claim_batch_item__pack(it, a), want);
    ck_assert_uint_eq(batch_item_pack(it, &plan, b), got);
    ck_assert_int_eq(memcmp(a, b, want), 0);
    back = once__rpc__claim_batch_item__unpack(NULL, got, b);
    ck_assert_ptr_nonnull(back);
    ck_assert_int_eq(back->status, it->status);
    once__rpc__claim_batch_item__free_unpacked(back, NULL);
    free(a);
    free(b);
}

START_TEST(empty_item)
{
    Once__Rpc__ClaimBatchItem it = ONCE__RPC__CLAIM_BATCH_ITEM__INIT;
    Once__Rpc__Result res = ONCE__RPC__RESULT__INIT;

    struct batch_item_plan plan;

    check_same(&it); /* every field left out: zero bytes */
    ck_assert_uint_eq(batch_item_size(&it, &plan), 0);
    it.result = &res; /* an empty submessage is still written */
    check_same(&it);
    ck_assert_uint_eq(batch_item_size(&it, &plan), 2);
    ck_assert_uint_eq(plan.result.result, 0);
}
END_TEST

START_TEST(error_item)
{
    Once__Rpc__ClaimBatchItem it = ONCE__RPC__CLAIM_BATCH_ITEM__INIT;
    static const char why[] = "scope: not allowed for this caller";

    it.status = ONCE__RPC__STATUS__STATUS_PERMISSION_DENIED;
    it.applied = ONCE__RPC__APPLIED__APPLIED_FALSE;
    it.error.data = (uint8_t *)(uintptr_t)why;
    it.error.len = sizeof why - 1;
    check_same(&it);
}
END_TEST

/* Every field of Result, each set or not at random, with values of every
 * varint length, attempts 0..5, the owner token, a 64 KiB result. */
START_TEST(random_results)
{
    static const char *reasons[] = {NULL, "", "quota: records over the limit",
                                    "x"};

    for (int round = 0; round < 3000; round++) {
        Once__Rpc__ClaimBatchItem it = ONCE__RPC__CLAIM_BATCH_ITEM__INIT;
        Once__Rpc__Result r = ONCE__RPC__RESULT__INIT;
        Once__Rpc__OwnerToken tok = ONCE__RPC__OWNER_TOKEN__INIT;
        Once__Rpc__Attempt att[5], *attp[5];

        it.status = (Once__Rpc__Status)(rnd() % 2 ? 0 : rnd() % 17);
        it.applied = (Once__Rpc__Applied)(rnd() % 4);
        it.error = rnd_bin(0, 1024);
        r.outcome = (Once__Rpc__Outcome)(rnd() % 12);
        r.retry = rnd() % 2;
        r.request_id = rnd_bin(0, 16);
        r.first_request_id = rnd_bin(1, 16);
        r.first_index = rnd_u64();
        r.first_time_ms = rnd_u64();
        r.attempts_total = (uint32_t)rnd_u64();
        r.n_attempts = (size_t)(rnd() % 6);
        for (size_t i = 0; i < r.n_attempts; i++) {
            once__rpc__attempt__init(&att[i]);
            att[i].request_id = rnd_bin(0, 16);
            att[i].execution_id = rnd_bin(1, 128);
            att[i].index = rnd_u64();
            att[i].time_ms = rnd_u64();
            att[i].outcome = (Once__Rpc__Outcome)(rnd() % 12);
            att[i].retry = rnd() % 2;
            attp[i] = &att[i];
        }
        r.attempts = r.n_attempts > 0 ? attp : NULL;
        r.has_owner_token = rnd() % 2;
        if (rnd() % 2) {
            tok.group_id = (uint32_t)rnd_u64();
            tok.index = rnd_u64();
            tok.slot = (uint32_t)rnd_u64();
            r.owner_token = &tok;
        }
        r.result = rnd_bin(2, rnd() % 8 == 0 ? 65536 : 300);
        r.stored_error = rnd_bin(1, 1024);
        r.retry_after_ms = rnd_u64();
        r.reason = (char *)(uintptr_t)reasons[rnd() % 4];
        r.kind = (Once__Rpc__Kind)(rnd() % 3);
        r.state = (Once__Rpc__State)(rnd() % 6);
        r.expires_ms = rnd_u64();
        r.lease_expires_ms = rnd_u64();
        r.owner_attempt = (uint32_t)rnd_u64();
        r.log_time_ms = rnd_u64();
        r.max_uses = (uint32_t)rnd_u64();
        r.uses = (uint32_t)rnd_u64();
        r.uses_left = (uint32_t)rnd_u64();
        r.sliding = rnd() % 2;
        it.result = rnd() % 8 == 0 ? NULL : &r;
        check_same(&it);
    }
}
END_TEST

/* What result_pack's Result writer does not take (more attempts than its
 * plan holds, unknown fields kept from a newer peer in the item, its
 * Result, owner token or an attempt) is packed by protobuf-c: the same
 * bytes, unknown fields included. */
START_TEST(fallback_items)
{
    static const uint8_t five = 0x05;
    ProtobufCMessageUnknownField unk = {99, PROTOBUF_C_WIRE_TYPE_VARINT, 1,
                                        (uint8_t *)(uintptr_t)&five};
    Once__Rpc__ClaimBatchItem it = ONCE__RPC__CLAIM_BATCH_ITEM__INIT;
    Once__Rpc__Result r = ONCE__RPC__RESULT__INIT;
    Once__Rpc__OwnerToken tok = ONCE__RPC__OWNER_TOKEN__INIT;
    Once__Rpc__Attempt att[RESULT_PACK_ATTEMPTS_MAX + 2];
    Once__Rpc__Attempt *attp[RESULT_PACK_ATTEMPTS_MAX + 2];
    struct batch_item_plan plan;

    for (size_t i = 0; i < RESULT_PACK_ATTEMPTS_MAX + 2; i++) {
        once__rpc__attempt__init(&att[i]);
        att[i].index = 1000 + i;
        att[i].outcome = ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED;
        attp[i] = &att[i];
    }
    it.status = ONCE__RPC__STATUS__STATUS_OK;
    it.result = &r;
    r.outcome = ONCE__RPC__OUTCOME__OUTCOME_DUPLICATE;
    r.attempts = attp;
    tok.index = 7;
    r.owner_token = &tok;

    /* Up to the plan's bound: written here. */
    for (size_t n = 0; n <= RESULT_PACK_ATTEMPTS_MAX; n++) {
        r.n_attempts = n;
        check_same(&it);
        batch_item_size(&it, &plan);
        ck_assert(plan.fast);
    }
    /* Past it: protobuf-c's. */
    for (size_t n = RESULT_PACK_ATTEMPTS_MAX + 1;
         n <= RESULT_PACK_ATTEMPTS_MAX + 2; n++) {
        r.n_attempts = n;
        check_same(&it);
        batch_item_size(&it, &plan);
        ck_assert(!plan.fast);
    }
    r.n_attempts = 2;

    /* One unknown field in each message in turn. */
    {
        ProtobufCMessage *holders[] = {&it.base, &r.base, &tok.base,
                                       &att[1].base};

        for (size_t k = 0; k < sizeof holders / sizeof holders[0]; k++) {
            holders[k]->n_unknown_fields = 1;
            holders[k]->unknown_fields = &unk;
            check_same(&it);
            batch_item_size(&it, &plan);
            ck_assert(!plan.fast);
            ck_assert_uint_eq(
                plan.total, once__rpc__claim_batch_item__get_packed_size(&it));
            holders[k]->n_unknown_fields = 0;
            holders[k]->unknown_fields = NULL;
            batch_item_size(&it, &plan);
            ck_assert(plan.fast);
        }
    }
}
END_TEST

/* A request's size as protobuf-c measures it, unknown fields included
 * (a decode keeps them, and get_packed_size counts them). */
START_TEST(random_requests)
{
    static Once__Rpc__ClaimRequest reqs[40];
    static Once__Rpc__ClaimRequest *ptrs[40];
    static ProtobufCMessageUnknownField unk[3];
    static const uint32_t tags[] = {
        14, 15, 16, 2047, 2048, 1u << 20, (1u << 29) - 1};

    for (int round = 0; round < 500; round++) {
        Once__Rpc__ClaimBatchRequest b = ONCE__RPC__CLAIM_BATCH_REQUEST__INIT;

        b.n_items = (size_t)(rnd() % 40);
        b.items = ptrs;
        for (size_t i = 0; i < b.n_items; i++) {
            Once__Rpc__ClaimRequest *c = &reqs[i];

            once__rpc__claim_request__init(c);
            c->scope = rnd_bin(0, 128);
            c->key = rnd_bin(1, 256);
            c->request_id = rnd_bin(0, 16);
            c->execution_id = rnd_bin(1, 128);
            c->kind = (Once__Rpc__Kind)(rnd() % 4 == 0 ? -1 : (int)(rnd() % 3));
            c->ttl_ms = rnd_u64();
            c->has_ts = rnd() % 2;
            c->ts_ms = rnd_u64();
            c->window_ms = rnd_u64();
            c->payload_hash = rnd_bin(2, 64);
            c->lease_ms = rnd_u64();
            c->max_uses = (uint32_t)rnd_u64();
            c->sliding = rnd() % 2;
            if (rnd() % 4 == 0) {
                c->base.n_unknown_fields = 1 + (unsigned)(rnd() % 3);
                c->base.unknown_fields = unk;
            }
            ptrs[i] = c;
        }
        for (size_t k = 0; k < 3; k++) {
            unk[k].tag = tags[rnd() % 7];
            unk[k].wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
            unk[k].len = (size_t)(rnd() % 300);
            unk[k].data = bytes[0];
        }
        if (rnd() % 4 == 0) {
            b.base.n_unknown_fields = 1 + (unsigned)(rnd() % 3);
            b.base.unknown_fields = unk;
        }
        ck_assert_uint_eq(batch_request_size(&b),
                          once__rpc__claim_batch_request__get_packed_size(&b));
    }
}
END_TEST

/* The encoder writes the fields the schema has today; a field added to
 * one of these messages fails here until batch_pack.c writes it (and
 * random_results sets it). */
START_TEST(schema_pinned)
{
    ck_assert_uint_eq(once__rpc__claim_batch_item__descriptor.n_fields, 4);
    ck_assert_uint_eq(once__rpc__result__descriptor.n_fields, 24);
    ck_assert_uint_eq(once__rpc__attempt__descriptor.n_fields, 6);
    ck_assert_uint_eq(once__rpc__owner_token__descriptor.n_fields, 3);
    ck_assert_uint_eq(once__rpc__claim_request__descriptor.n_fields, 13);
    ck_assert_uint_eq(once__rpc__claim_batch_request__descriptor.n_fields, 1);
}
END_TEST

Suite *batch_pack_suite(void)
{
    Suite *s = suite_create("batch_pack");
    TCase *tc = tcase_create("pack");

    tcase_add_test(tc, empty_item);
    tcase_add_test(tc, error_item);
    tcase_add_test(tc, random_results);
    tcase_add_test(tc, fallback_items);
    tcase_add_test(tc, random_requests);
    tcase_add_test(tc, schema_pinned);
    suite_add_tcase(s, tc);
    return s;
}
