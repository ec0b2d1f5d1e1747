/* fuzz_codec: differential libFuzzer target of the hand-written decoders
 * (common/pbwire.h's reader with the tables of rpc/frame.c and
 * fsm/command.c) against protobuf-c, their oracle.
 *
 * Input: any bytes, read eight ways: as an Envelope, as a ClaimRequest, as
 * the log's Claim, as a log Command holding one Claim (what
 * command_decode tries first), as a ClaimBatchRequest (claim_batch_read),
 * as the log's Batch (command_read_batch), and as libonce reads answers
 * (client/answer_read.c): a Result and a ClaimBatchItem. For each, the
 * hand-written decoder may decline (the node then unpacks the bytes with
 * protobuf-c, as before); when it accepts, checked besides "no crash, no UB":
 *   - protobuf-c accepts the same bytes too, keeping no unknown field;
 *   - every field is equal: integers, enums, bools, and byte strings
 *     (length and contents; NULL data when empty, as protobuf-c leaves it).
 *     Repeated fields: as many elements, each equal.
 * Together with the decoders' callers (which take protobuf-c's path on a
 * decline) this makes accept/reject and the decoded fields the same as
 * protobuf-c's for every input.
 *
 * Run: ./tests/fuzz/fuzz_codec -dict=tests/fuzz/frame.dict
 *      -max_total_time=60 WORKDIR tests/fuzz/corpus/codec */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "fsm/command.h"
#include "once_log.pb-c.h"
#include "once_rpc.pb-c.h"
#include "rpc/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_codec: %s:%d: check failed: %s\n", __FILE__, \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Every field of @spec equal in @a (the reader's) and @b (protobuf-c's). */
static void same_fields(const struct pbr_spec *spec,
                        const void *a,
                        const void *b)
{
    for (uint32_t i = 0; i < spec->n; i++) {
        const struct pbr_field *f = &spec->fields[i];
        const char *pa = (const char *)a + f->offset;
        const char *pb = (const char *)b + f->offset;

        switch (f->kind) {
            case PBR_U64:
                CHECK(memcmp(pa, pb, sizeof(uint64_t)) == 0);
                break;
            case PBR_U32:
                CHECK(memcmp(pa, pb, sizeof(uint32_t)) == 0);
                break;
            case PBR_ENUM:
                CHECK(memcmp(pa, pb, sizeof(int)) == 0);
                break;
            case PBR_BOOL:
                CHECK(memcmp(pa, pb, sizeof(protobuf_c_boolean)) == 0);
                break;
            case PBR_BYTES: {
                ProtobufCBinaryData x, y;

                memcpy(&x, pa, sizeof x);
                memcpy(&y, pb, sizeof y);
                CHECK(x.len == y.len);
                CHECK((x.data == NULL) == (y.data == NULL));
                CHECK(x.len == 0 || memcmp(x.data, y.data, x.len) == 0);
                break;
            }
        }
    }
}

/* The reader's struct: a zeroed copy of the message's __init defaults. */
static void *fresh(const ProtobufCMessageDescriptor *d)
{
    void *m = calloc(1, d->sizeof_message);

    CHECK(m != NULL);
    protobuf_c_message_init(d, m);
    return m;
}

static void differ(const ProtobufCMessageDescriptor *d,
                   const struct pbr_spec *spec,
                   const uint8_t *data,
                   size_t size)
{
    void *fast = fresh(d);

    if (pbr_parse(spec, data, size, fast)) {
        ProtobufCMessage *ref = protobuf_c_message_unpack(d, NULL, size, data);

        CHECK(ref != NULL);
        CHECK(ref->n_unknown_fields == 0);
        same_fields(spec, fast, ref);
        protobuf_c_message_free_unpacked(ref, NULL);
    }
    free(fast);
}

static void differ_command(const uint8_t *data, size_t size)
{
    Once__Log__Claim fast = ONCE__LOG__CLAIM__INIT;
    const uint8_t *inner;
    size_t inner_len;

    if (pbr_only_field(data, size, ONCE__LOG__COMMAND__CMD_CLAIM, &inner,
                       &inner_len) &&
        pbr_parse(&command_claim_pbr_spec, inner, inner_len, &fast)) {
        Once__Log__Command *ref = once__log__command__unpack(NULL, size, data);

        CHECK(ref != NULL);
        CHECK(ref->base.n_unknown_fields == 0);
        CHECK(ref->cmd_case == ONCE__LOG__COMMAND__CMD_CLAIM);
        CHECK(ref->claim->base.n_unknown_fields == 0);
        same_fields(&command_claim_pbr_spec, &fast, ref->claim);
        once__log__command__free_unpacked(ref, NULL);
    }
}

/* malloc as a ProtobufCAllocator, for claim_batch_read's one block. */
static void *heap_alloc(void *arg, size_t size)
{
    (void)arg;
    return malloc(size);
}

static void heap_free(void *arg, void *p)
{
    (void)arg;
    free(p);
}

static void differ_claim_batch(const uint8_t *data, size_t size)
{
    ProtobufCAllocator heap = {heap_alloc, heap_free, NULL};
    Once__Rpc__ClaimBatchRequest fast;
    Once__Rpc__ClaimBatchRequest *ref;
    int rv = claim_batch_read(data, size, &heap, &fast);

    CHECK(rv == 0 || rv == 1);
    if (rv != 0) {
        return;
    }
    ref = once__rpc__claim_batch_request__unpack(NULL, size, data);
    CHECK(ref != NULL);
    CHECK(ref->base.n_unknown_fields == 0);
    CHECK(ref->n_items == fast.n_items);
    for (size_t i = 0; i < ref->n_items; i++) {
        CHECK(ref->items[i]->base.n_unknown_fields == 0);
        same_fields(&claim_request_pbr_spec, fast.items[i], ref->items[i]);
    }
    once__rpc__claim_batch_request__free_unpacked(ref, NULL);
    free(fast.items);
}

static void differ_log_batch(const uint8_t *data, size_t size)
{
    struct command_decoder d;
    struct command_batch fast;
    Once__Log__Batch *ref;

    command_decoder_init(&d);
    if (command_read_batch(&d, data, size, &fast) == 0) {
        ref = once__log__batch__unpack(NULL, size, data);
        CHECK(ref != NULL);
        CHECK(ref->base.n_unknown_fields == 0);
        CHECK(ref->schema_version == fast.schema_version);
        CHECK(ref->leader_time_ms == fast.leader_time_ms);
        CHECK(ref->n_commands == fast.n_commands);
        for (size_t i = 0; i < ref->n_commands; i++) {
            CHECK(ref->commands[i].len == fast.command_lens[i]);
            CHECK((ref->commands[i].data == NULL) ==
                  (fast.commands[i] == NULL));
            CHECK(fast.command_lens[i] == 0 ||
                  memcmp(ref->commands[i].data, fast.commands[i],
                         fast.command_lens[i]) == 0);
        }
        once__log__batch__free_unpacked(ref, NULL);
    }
    command_decoder_close(&d);
}

/* A byte field equal in both. */
static void same_bytes(ProtobufCBinaryData x, ProtobufCBinaryData y)
{
    CHECK(x.len == y.len);
    CHECK((x.data == NULL) == (y.data == NULL));
    CHECK(x.len == 0 || memcmp(x.data, y.data, x.len) == 0);
}

/* Every field of a Result, sub-messages and string included. */
static void same_result(const Once__Rpc__Result *a, const Once__Rpc__Result *b)
{
    CHECK(b->base.n_unknown_fields == 0);
    CHECK(a->outcome == b->outcome && a->retry == b->retry);
    same_bytes(a->request_id, b->request_id);
    same_bytes(a->first_request_id, b->first_request_id);
    CHECK(a->first_index == b->first_index);
    CHECK(a->first_time_ms == b->first_time_ms);
    CHECK(a->attempts_total == b->attempts_total);
    CHECK(a->n_attempts == b->n_attempts);
    CHECK((a->attempts == NULL) == (b->attempts == NULL));
    for (size_t i = 0; i < a->n_attempts; i++) {
        CHECK(b->attempts[i]->base.n_unknown_fields == 0);
        same_fields(&client_attempt_pbr_spec, a->attempts[i], b->attempts[i]);
    }
    CHECK(a->has_owner_token == b->has_owner_token);
    CHECK((a->owner_token == NULL) == (b->owner_token == NULL));
    if (a->owner_token != NULL) {
        CHECK(b->owner_token->base.n_unknown_fields == 0);
        same_fields(&client_owner_token_pbr_spec, a->owner_token,
                    b->owner_token);
    }
    same_bytes(a->result, b->result);
    same_bytes(a->stored_error, b->stored_error);
    CHECK(a->retry_after_ms == b->retry_after_ms);
    CHECK(a->reason != NULL && b->reason != NULL);
    CHECK(strcmp(a->reason, b->reason) == 0);
    CHECK(a->kind == b->kind && a->state == b->state);
    CHECK(a->expires_ms == b->expires_ms);
    CHECK(a->lease_expires_ms == b->lease_expires_ms);
    CHECK(a->owner_attempt == b->owner_attempt);
    CHECK(a->log_time_ms == b->log_time_ms);
    CHECK(a->max_uses == b->max_uses && a->uses == b->uses);
    CHECK(a->uses_left == b->uses_left && a->sliding == b->sliding);
}

static void differ_result(const uint8_t *data, size_t size)
{
    struct client_pb_result fast;
    Once__Rpc__Result *ref;

    if (!client_pb_result(data, size, &fast)) {
        return;
    }
    ref = once__rpc__result__unpack(NULL, size, data);
    CHECK(ref != NULL);
    same_result(&fast.res, ref);
    once__rpc__result__free_unpacked(ref, NULL);
}

static void differ_batch_item(const uint8_t *data, size_t size)
{
    struct client_pb_item fast;
    Once__Rpc__ClaimBatchItem *ref;

    if (!client_pb_item(data, size, &fast)) {
        return;
    }
    ref = once__rpc__claim_batch_item__unpack(NULL, size, data);
    CHECK(ref != NULL);
    CHECK(ref->base.n_unknown_fields == 0);
    CHECK(ref->status == fast.item.status);
    CHECK(ref->applied == fast.item.applied);
    same_bytes(fast.item.error, ref->error);
    CHECK((ref->result == NULL) == (fast.item.result == NULL));
    if (ref->result != NULL) {
        same_result(fast.item.result, ref->result);
    }
    once__rpc__claim_batch_item__free_unpacked(ref, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    differ(&once__rpc__envelope__descriptor, &envelope_pbr_spec, data, size);
    differ(&once__rpc__claim_request__descriptor, &claim_request_pbr_spec, data,
           size);
    differ(&once__log__claim__descriptor, &command_claim_pbr_spec, data, size);
    differ_command(data, size);
    differ_claim_batch(data, size);
    differ_log_batch(data, size);
    differ_result(data, size);
    differ_batch_item(data, size);
    return 0;
}
