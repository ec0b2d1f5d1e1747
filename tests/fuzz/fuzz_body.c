/* fuzz_body: libFuzzer target for the server's request bodies
 * (src/server/convert.c), the layer between a client's bytes and the log.
 *
 * Input: one selector byte, then the body. The selector (mod 7) names the
 * message: ClaimRequest, CompleteRequest, ReleaseRequest, LookupRequest,
 * ForgetRequest, MembersAddRequest, ClaimBatchRequest (selectors 0..5
 * kept their meaning when the batch was added: the seeds stay valid). The body
 * is unpacked as that message (protobuf-c, like envelope_unpack_body),
 * converted with convert_*_in, and, besides "no crash, no leak, no UB",
 * checked:
 *   - a refusal says why (a non-empty message that names a field);
 *   - an accepted request is one the state machine's own decoder accepts:
 *     encoded with command_encode and decoded with command_decode it is not
 *     FSM_CMD_INVALID and has the same type, identity and request id. A
 *     node therefore never proposes a command that every replica would turn
 *     into INVALID_ARGUMENT after paying for its replication;
 *   - an accepted claim converts back (convert_claim_out) to a request that
 *     is accepted again with the same values;
 *   - every ClaimBatchRequest's size by batch_request_size (the check's
 *     fast measure) is protobuf-c's get_packed_size;
 *   - a ClaimBatchRequest accepted by convert_claim_batch_check has
 *     1..RPC_CLAIM_BATCH_MAX items and packs within
 *     RPC_CLAIM_BATCH_BYTES_MAX; each of its items is then judged alone,
 *     as a ClaimRequest above (the leader's per-item path).
 *
 * Run: ./tests/fuzz/fuzz_body -max_total_time=60 WORKDIR
 * tests/fuzz/corpus/body */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "fsm/fsm.h"
#include "once_rpc.pb-c.h"
#include "rpc/frame.h"
#include "server/batch_pack.h"
#include "server/convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                  \
            abort();                                                         \
        }                                                                    \
    } while (0)

static const ProtobufCMessageDescriptor *const descs[] = {
    &once__rpc__claim_request__descriptor,
    &once__rpc__complete_request__descriptor,
    &once__rpc__release_request__descriptor,
    &once__rpc__lookup_request__descriptor,
    &once__rpc__forget_request__descriptor,
    &once__rpc__members_add_request__descriptor,
    &once__rpc__claim_batch_request__descriptor,
};

static bool same_bytes(const uint8_t *a,
                       size_t alen,
                       const uint8_t *b,
                       size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* The fsm's decoder takes what convert accepted. */
static void check_decodes(const struct fsm_cmd *cmd)
{
    struct command_decoder d;
    struct fsm_cmd back;
    uint8_t *buf = NULL;
    size_t len = 0;

    CHECK(command_encode(cmd, &buf, &len) == 0);
    command_decoder_init(&d);
    command_decode(&d, buf, len, &back);
    if (back.type == FSM_CMD_INVALID) {
        fprintf(stderr, "accepted by convert, refused by the fsm: %s\n",
                back.invalid_reason);
    }
    CHECK(back.type == cmd->type);
    switch (cmd->type) {
        case FSM_CMD_CLAIM:
            CHECK(same_bytes(back.u.claim.scope, back.u.claim.scope_len,
                             cmd->u.claim.scope, cmd->u.claim.scope_len));
            CHECK(same_bytes(back.u.claim.key, back.u.claim.key_len,
                             cmd->u.claim.key, cmd->u.claim.key_len));
            CHECK(memcmp(back.u.claim.request_id, cmd->u.claim.request_id,
                         FSM_REQUEST_ID_LEN) == 0);
            break;
        case FSM_CMD_COMPLETE:
            CHECK(same_bytes(back.u.complete.key, back.u.complete.key_len,
                             cmd->u.complete.key, cmd->u.complete.key_len));
            break;
        case FSM_CMD_RELEASE:
            CHECK(same_bytes(back.u.release.key, back.u.release.key_len,
                             cmd->u.release.key, cmd->u.release.key_len));
            break;
        default:
            CHECK(same_bytes(back.u.ident.key, back.u.ident.key_len,
                             cmd->u.ident.key, cmd->u.ident.key_len));
            break;
    }
    command_decoder_close(&d);
    free(buf);
}

static void check_claim_round_trip(const struct fsm_claim *c)
{
    Once__Rpc__ClaimRequest out = ONCE__RPC__CLAIM_REQUEST__INIT;
    struct fsm_cmd again;
    char why[CONVERT_WHY_SIZE];

    convert_claim_out(c, &out);
    CHECK(convert_claim_in(&out, &again, why) == 0);
    CHECK(same_bytes(again.u.claim.scope, again.u.claim.scope_len, c->scope,
                     c->scope_len));
    CHECK(same_bytes(again.u.claim.key, again.u.claim.key_len, c->key,
                     c->key_len));
    CHECK(again.u.claim.kind == c->kind);
    CHECK(again.u.claim.ttl_ms == c->ttl_ms);
}

/* One claim as the leader judges a batch item: accepted ones decode in the
 * fsm and round-trip; refusals say why. */
static void check_claim(const Once__Rpc__ClaimRequest *r)
{
    struct fsm_cmd cmd;
    char why[CONVERT_WHY_SIZE];
    int rv;

    why[0] = '\0';
    rv = r == NULL ? -EINVAL : convert_claim_in(r, &cmd, why);
    if (r == NULL) {
        return; /* protobuf-c never leaves a NULL item */
    }
    if (rv == 0) {
        check_decodes(&cmd);
        check_claim_round_trip(&cmd.u.claim);
    } else {
        CHECK(rv == -EINVAL && why[0] != '\0');
    }
}

static void check_batch(const Once__Rpc__ClaimBatchRequest *b)
{
    char why[CONVERT_WHY_SIZE];
    int rv;

    /* The byte bound's fast measure is protobuf-c's, unknown fields and
     * all. */
    CHECK(batch_request_size(b) ==
          once__rpc__claim_batch_request__get_packed_size(b));
    why[0] = '\0';
    rv = convert_claim_batch_check(b, why);
    if (rv != 0) {
        CHECK(rv == -EINVAL && why[0] != '\0');
        return;
    }
    CHECK(b->n_items >= 1 && b->n_items <= RPC_CLAIM_BATCH_MAX);
    CHECK(once__rpc__claim_batch_request__get_packed_size(b) <=
          RPC_CLAIM_BATCH_BYTES_MAX);
    for (size_t i = 0; i < b->n_items; i++) {
        check_claim(b->items[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ProtobufCMessageDescriptor *d;
    ProtobufCMessage *m;
    struct fsm_cmd cmd;
    struct fsm_member member;
    char why[CONVERT_WHY_SIZE];
    unsigned sel;
    int rv;

    if (size < 1) {
        return 0;
    }
    sel = data[0] % (sizeof descs / sizeof descs[0]);
    d = descs[sel];
    m = protobuf_c_message_unpack(d, NULL, size - 1, data + 1);
    if (m == NULL) {
        return 0;
    }
    memset(&cmd, 0, sizeof cmd);
    why[0] = '\0';
    if (sel == 6) {
        check_batch((Once__Rpc__ClaimBatchRequest *)m);
        protobuf_c_message_free_unpacked(m, NULL);
        return 0;
    }
    switch (sel) {
        case 0:
            rv = convert_claim_in((Once__Rpc__ClaimRequest *)m, &cmd, why);
            break;
        case 1:
            rv =
                convert_complete_in((Once__Rpc__CompleteRequest *)m, &cmd, why);
            break;
        case 2:
            rv = convert_release_in((Once__Rpc__ReleaseRequest *)m, &cmd, why);
            break;
        case 3: {
            Once__Rpc__LookupRequest *l = (Once__Rpc__LookupRequest *)m;

            rv =
                convert_ident_in(&l->scope, &l->key, FSM_CMD_LOOKUP, &cmd, why);
            break;
        }
        case 4: {
            Once__Rpc__ForgetRequest *f = (Once__Rpc__ForgetRequest *)m;

            rv =
                convert_ident_in(&f->scope, &f->key, FSM_CMD_FORGET, &cmd, why);
            break;
        }
        default: {
            Once__Rpc__MembersAddRequest *a = (Once__Rpc__MembersAddRequest *)m;

            rv = a->member == NULL
                     ? -EINVAL
                     : convert_member_in(a->member, true, &member, why);
            if (a->member == NULL) {
                snprintf(why, sizeof why, "member: missing");
            }
            if (rv == 0) {
                CHECK(member.id != 0);
                CHECK(member.role == FSM_ROLE_VOTER ||
                      member.role == FSM_ROLE_STANDBY);
            }
            protobuf_c_message_free_unpacked(m, NULL);
            CHECK(rv == 0 || (rv == -EINVAL && why[0] != '\0'));
            return 0;
        }
    }
    if (rv == 0) {
        check_decodes(&cmd);
        if (cmd.type == FSM_CMD_CLAIM) {
            check_claim_round_trip(&cmd.u.claim);
        }
    } else {
        CHECK(rv == -EINVAL && why[0] != '\0' &&
              strlen(why) < CONVERT_WHY_SIZE);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
