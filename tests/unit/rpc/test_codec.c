/* test_codec: the hand-written encoders of the hot messages against
 * protobuf-c, their oracle: the Envelope (rpc/frame.c), the record answers
 * (rpc/result_pack.c), the log's Claim command and Batch (fsm/command.c).
 *
 * Each test builds many randomized messages (a fixed seed, so a failure
 * repeats), every field present or absent, with edge values (0, 1, varint
 * boundaries, the largest uint64 and negative enums, empty and longest
 * byte strings), packs each with both encoders and requires the same size
 * and the same bytes: protobuf-c decodes its own bytes, so equal bytes are
 * equal messages. A schema test pins the fields the encoders know, so a
 * field added to the .proto fails here until the encoder writes it. The
 * hand-written readers (pbwire's reader and its tables, the log Batch's
 * and the ClaimBatchRequest's readers) are compared with protobuf-c's
 * unpack the same way, and must decline what it might read otherwise. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "once_log.pb-c.h"
#include "once_rpc.pb-c.h"
#include "rpc/frame.h"
#include "rpc/result_pack.h"

Suite *codec_suite(void);

#define ROUNDS 3000

/* ------------------------------------------------------------------------
 * Random values with their edges
 * ---------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: deterministic, good enough to spread the cases. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static size_t rnd_below(size_t n)
{
    return n > 0 ? (size_t)(rnd() % n) : 0;
}

/* 0 half of the time (the field left out), else an edge or a value of a
 * random bit length: every varint length from 1 to 10 bytes. */
static uint64_t rnd_u64(void)
{
    static const uint64_t edges[] = {
        1,
        127,
        128,
        16383,
        16384,
        UINT32_MAX,
        1ull << 32,
        1ull << 63,
        UINT64_MAX,
        (1ull << 56) - 1,
        1ull << 56,
        300,
        UINT64_MAX - 1,
    };

    switch (rnd_below(4)) {
        case 0:
        case 1:
            return 0;
        case 2:
            return edges[rnd_below(sizeof edges / sizeof edges[0])];
        default:
            return rnd() >> rnd_below(64);
    }
}

static uint32_t rnd_u32(void)
{
    return (uint32_t)(rnd_below(3) == 0 ? rnd_u64() >> 32 : rnd_u64());
}

/* Enums: 0, known values, unknown ones, and negative (10-byte varints). */
static int32_t rnd_enum(int32_t last)
{
    switch (rnd_below(6)) {
        case 0:
            return 0;
        case 1:
            return -1 - (int32_t)rnd_below(1000);
        case 2:
            return INT32_MIN;
        case 3:
            return INT32_MAX;
        default:
            return (int32_t)rnd_below((size_t)last + 1);
    }
}

static bool rnd_bool(void)
{
    return rnd_below(2) == 0;
}

static uint8_t pool[1u << 20];

/* A length in 0..max: empty, longest, or anything between. */
static size_t rnd_len(size_t max)
{
    switch (rnd_below(4)) {
        case 0:
            return 0;
        case 1:
            return max;
        default:
            return rnd_below(max + 1);
    }
}

/* @len bytes of the pool (random, filled once), somewhere in it. */
static uint8_t *rnd_bytes(size_t len)
{
    return pool + rnd_below(sizeof pool - len + 1);
}

static void setup(void)
{
    rng_state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof pool; i++) {
        pool[i] = (uint8_t)rnd();
    }
}

/* Text without NUL (protobuf-c writes strings up to the NUL). */
static void rnd_text(char *out, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        out[i] = (char)(' ' + rnd_below(95));
    }
    out[len] = '\0';
}

static void same_bytes(const ProtobufCMessage *oracle,
                       const uint8_t *got,
                       size_t got_len)
{
    size_t n = protobuf_c_message_get_packed_size(oracle);
    uint8_t *want = malloc(n + 1);

    ck_assert_ptr_nonnull(want);
    ck_assert_uint_eq(protobuf_c_message_pack(oracle, want), n);
    ck_assert_uint_eq(got_len, n);
    ck_assert_int_eq(memcmp(got, want, n), 0);
    free(want);
}

/* If the hand-written decoder (common/pbwire.h's reader) accepts @buf,
 * it reads every field as protobuf-c does; returns whether it accepted. */
static bool fast_equals_protobuf_c(const ProtobufCMessageDescriptor *d,
                                   const struct pbr_spec *spec,
                                   const uint8_t *buf,
                                   size_t len)
{
    void *fast = calloc(1, d->sizeof_message);
    ProtobufCMessage *ref;

    ck_assert_ptr_nonnull(fast);
    protobuf_c_message_init(d, fast);
    if (!pbr_parse(spec, buf, len, fast)) {
        free(fast);
        return false;
    }
    ref = protobuf_c_message_unpack(d, NULL, len, buf);
    ck_assert_ptr_nonnull(ref);
    for (uint32_t i = 0; i < spec->n; i++) {
        const struct pbr_field *f = &spec->fields[i];
        const char *a = (const char *)fast + f->offset;
        const char *b = (const char *)ref + f->offset;

        if (f->kind == PBR_BYTES) {
            ProtobufCBinaryData x, y;

            memcpy(&x, a, sizeof x);
            memcpy(&y, b, sizeof y);
            ck_assert_uint_eq(x.len, y.len);
            ck_assert(x.len == 0 || memcmp(x.data, y.data, x.len) == 0);
        } else {
            size_t n = f->kind == PBR_U64 ? sizeof(uint64_t) : sizeof(int);

            ck_assert_int_eq(memcmp(a, b, n), 0);
        }
    }
    protobuf_c_message_free_unpacked(ref, NULL);
    free(fast);
    return true;
}

/* A negative enum is a 10-byte varint that the reader leaves to
 * protobuf-c; everything else we write it must take. */
static void fast_command_equals_protobuf_c(const uint8_t *buf,
                                           size_t len,
                                           bool must_accept)
{
    const uint8_t *inner;
    size_t inner_len;

    ck_assert(pbr_only_field(buf, len, 1, &inner, &inner_len));
    ck_assert(fast_equals_protobuf_c(&once__log__claim__descriptor,
                                     &command_claim_pbr_spec, inner,
                                     inner_len) == must_accept);
    /* A ClaimRequest has the same fields, numbers and types. */
    ck_assert(fast_equals_protobuf_c(&once__rpc__claim_request__descriptor,
                                     &claim_request_pbr_spec, inner,
                                     inner_len) == must_accept);
}

/* ------------------------------------------------------------------------
 * Envelope
 * ---------------------------------------------------------------------- */

/* A view that passes envelope_check, every optional part drawn at random. */
static void rnd_view(struct envelope_view *v, char *err, char *hint)
{
    bool request = rnd_bool();

    memset(v, 0, sizeof *v);
    v->call_id = rnd_u64();
    v->direction = request ? RPC_REQUEST : RPC_RESPONSE;
    v->method = (enum rpc_method)(1 + rnd_below(RPC_METHOD_LAST));
    v->deadline_ms = rnd_below(4) == 0 ? 0 : rnd_below(RPC_DEADLINE_MAX + 1);
    if (rnd_bool()) {
        v->deadline_ms = RPC_DEADLINE_MAX;
    }
    v->status = RPC_STATUS_OK;
    v->applied = RPC_APPLIED_UNSPECIFIED;
    if (!request && rnd_bool()) {
        static const enum rpc_status st[] = {
            RPC_STATUS_UNKNOWN,           RPC_STATUS_INVALID_ARGUMENT,
            RPC_STATUS_DEADLINE_EXCEEDED, RPC_STATUS_PERMISSION_DENIED,
            RPC_STATUS_UNAVAILABLE,       RPC_STATUS_MOVING,
        };
        v->status = st[rnd_below(sizeof st / sizeof st[0])];
        v->applied = rnd_bool() ? RPC_APPLIED_FALSE : RPC_APPLIED_UNKNOWN;
        if (rnd_below(4) == 0) {
            v->method = RPC_METHOD_UNSPECIFIED;
        }
        v->error_len = 1 + rnd_below(RPC_ERROR_MAX);
        if (rnd_bool()) {
            v->error_len = RPC_ERROR_MAX;
        }
        rnd_text(err, v->error_len);
        v->error = err;
        v->leader_hint_len = rnd_len(RPC_ADDR_MAX);
        rnd_text(hint, v->leader_hint_len);
        v->leader_hint = hint;
    }
    v->has_cluster_id = rnd_bool();
    memcpy(v->cluster_id, rnd_bytes(RPC_ID_LEN), RPC_ID_LEN);
    v->node_id = rnd_u64();
    v->has_boot_id = rnd_bool();
    memcpy(v->boot_id, rnd_bytes(RPC_ID_LEN), RPC_ID_LEN);
    v->group_id = rnd_u32();
    /* Bodies up to what the frame limit leaves (the envelope's other
     * fields take at most ~17.3 KiB with a caller certificate). */
    v->body_len =
        rnd_below(50) == 0 ? FRAME_MAX_DEFAULT - (20u << 10) : rnd_len(300);
    v->body = rnd_bytes(v->body_len);
    if (request && rnd_bool()) {
        v->forwarded = true;
        v->caller_cert_len = rnd_len(RPC_CALLER_CERT_MAX);
        v->caller_cert = rnd_bytes(v->caller_cert_len);
    }
}

/* The oracle: the same fields in protobuf-c's struct. */
static void view_to_pb(const struct envelope_view *v, Once__Rpc__Envelope *e)
{
    once__rpc__envelope__init(e);
    e->call_id = v->call_id;
    e->method = (Once__Rpc__Method)v->method;
    e->direction = (Once__Rpc__Direction)v->direction;
    e->deadline_ms = v->deadline_ms;
    e->status = (Once__Rpc__Status)v->status;
    e->applied = (Once__Rpc__Applied)v->applied;
    e->error.data = (uint8_t *)(uintptr_t)v->error;
    e->error.len = v->error_len;
    e->leader_hint.data = (uint8_t *)(uintptr_t)v->leader_hint;
    e->leader_hint.len = v->leader_hint_len;
    if (v->has_cluster_id) {
        e->cluster_id.data = (uint8_t *)(uintptr_t)v->cluster_id;
        e->cluster_id.len = RPC_ID_LEN;
    }
    e->node_id = v->node_id;
    if (v->has_boot_id) {
        e->boot_id.data = (uint8_t *)(uintptr_t)v->boot_id;
        e->boot_id.len = RPC_ID_LEN;
    }
    e->group_id = v->group_id;
    e->body.data = (uint8_t *)(uintptr_t)v->body;
    e->body.len = v->body_len;
    e->forwarded = v->forwarded;
    e->caller_cert.data = (uint8_t *)(uintptr_t)v->caller_cert;
    e->caller_cert.len = v->caller_cert_len;
}

START_TEST(envelope_matches_protobuf_c)
{
    static char err[RPC_ERROR_MAX + 1], hint[RPC_ADDR_MAX + 1];
    static uint8_t frame[FRAME_MAX_DEFAULT + FRAME_HEADER_LEN];
    struct envelope_view v, d;
    Once__Rpc__Envelope e;
    char msg[ERR_MSG_SIZE];
    size_t need;

    setup();
    envelope_view_init(&d);
    for (int i = 0; i < ROUNDS; i++) {
        rnd_view(&v, err, hint);
        ck_assert_int_eq(envelope_frame_size(&v, FRAME_MAX_DEFAULT, &need, msg),
                         0);
        ck_assert_uint_le(need, sizeof frame);
        ck_assert_uint_eq(envelope_pack(&v, FRAME_MAX_DEFAULT, frame, need),
                          need);
        view_to_pb(&v, &e);
        same_bytes(&e.base, frame + FRAME_HEADER_LEN, need - FRAME_HEADER_LEN);
        /* What we write, the hand-written decoder takes (no protobuf-c on
         * the hot path), with protobuf-c's fields. */
        ck_assert(fast_equals_protobuf_c(
            &once__rpc__envelope__descriptor, &envelope_pbr_spec,
            frame + FRAME_HEADER_LEN, need - FRAME_HEADER_LEN));
        /* And it reads back as what was packed. */
        ck_assert_int_eq(
            envelope_decode(frame + FRAME_HEADER_LEN, need - FRAME_HEADER_LEN,
                            FRAME_MAX_DEFAULT, &d, msg),
            0);
        ck_assert_uint_eq(d.call_id, v.call_id);
        ck_assert_uint_eq(d.body_len, v.body_len);
        ck_assert_uint_eq(d.caller_cert_len, v.caller_cert_len);
        ck_assert_uint_eq(d.group_id, v.group_id);
    }
    envelope_view_close(&d);
}
END_TEST

/* The size alone, for views no rule would let through: unknown and
 * negative enums, every field at its widest. */
START_TEST(envelope_size_of_any_view)
{
    static char err[RPC_ERROR_MAX + 1], hint[RPC_ADDR_MAX + 1];
    struct envelope_view v;
    Once__Rpc__Envelope e;

    setup();
    for (int i = 0; i < ROUNDS; i++) {
        rnd_view(&v, err, hint);
        v.method = (enum rpc_method)rnd_enum(RPC_METHOD_LAST + 3);
        v.direction = (enum rpc_direction)rnd_enum(3);
        v.status = (enum rpc_status)rnd_enum(102);
        v.applied = (enum rpc_applied)rnd_enum(3);
        v.deadline_ms = rnd_u64();
        view_to_pb(&v, &e);
        ck_assert_uint_eq(envelope_packed_size(&v),
                          once__rpc__envelope__get_packed_size(&e));
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * Record answers
 * ---------------------------------------------------------------------- */

struct rnd_result
{
    Once__Rpc__Result res;
    Once__Rpc__OwnerToken token;
    Once__Rpc__Attempt attempts[8];
    Once__Rpc__Attempt *ptrs[8];
    char reason[257];
};

static ProtobufCBinaryData rnd_bin(size_t max)
{
    ProtobufCBinaryData b;

    b.len = rnd_len(max);
    b.data = rnd_bytes(b.len);
    return b;
}

static void rnd_result(struct rnd_result *r)
{
    Once__Rpc__Result *o = &r->res;

    once__rpc__result__init(o);
    o->outcome = (Once__Rpc__Outcome)rnd_enum(20);
    o->retry = rnd_bool();
    o->request_id = rnd_bin(16);
    o->first_request_id = rnd_bin(16);
    o->first_index = rnd_u64();
    o->first_time_ms = rnd_u64();
    o->attempts_total = rnd_u32();
    o->n_attempts = rnd_below(sizeof r->ptrs / sizeof r->ptrs[0] + 1);
    for (size_t i = 0; i < o->n_attempts; i++) {
        Once__Rpc__Attempt *a = &r->attempts[i];

        once__rpc__attempt__init(a);
        a->request_id = rnd_bin(16);
        a->execution_id = rnd_bin(128);
        a->index = rnd_u64();
        a->time_ms = rnd_u64();
        a->outcome = (Once__Rpc__Outcome)rnd_enum(20);
        a->retry = rnd_bool();
        r->ptrs[i] = a;
    }
    o->attempts = o->n_attempts > 0 ? r->ptrs : NULL;
    o->has_owner_token = rnd_bool();
    if (rnd_bool()) {
        once__rpc__owner_token__init(&r->token);
        r->token.group_id = rnd_u32();
        r->token.index = rnd_u64();
        r->token.slot = rnd_u32();
        o->owner_token = &r->token;
    }
    o->result = rnd_bin(rnd_below(20) == 0 ? 65536 : 200);
    o->stored_error = rnd_bin(rnd_below(10) == 0 ? 1024 : 50);
    o->retry_after_ms = rnd_u64();
    switch (rnd_below(3)) {
        case 0:
            o->reason = NULL;
            break;
        case 1:
            o->reason = (char *)"";
            break;
        default:
            rnd_text(r->reason, rnd_len(256));
            o->reason = r->reason;
            break;
    }
    o->kind = (Once__Rpc__Kind)rnd_enum(3);
    o->state = (Once__Rpc__State)rnd_enum(6);
    o->expires_ms = rnd_u64();
    o->lease_expires_ms = rnd_u64();
    o->owner_attempt = rnd_u32();
    o->log_time_ms = rnd_u64();
    o->max_uses = rnd_u32();
    o->uses = rnd_u32();
    o->uses_left = rnd_u32();
    o->sliding = rnd_bool();
}

static void check_answer(const ProtobufCMessage *m)
{
    static uint8_t buf[1u << 18];
    struct result_pack_plan plan;
    size_t n;

    ck_assert(result_pack_known(m));
    n = result_pack_size(m, &plan);
    ck_assert_uint_le(n, sizeof buf);
    ck_assert_uint_eq(result_pack(m, &plan, buf), n);
    same_bytes(m, buf, n);
}

START_TEST(answers_match_protobuf_c)
{
    struct rnd_result r;

    setup();
    for (int i = 0; i < ROUNDS; i++) {
        Once__Rpc__ClaimResponse claim = ONCE__RPC__CLAIM_RESPONSE__INIT;
        Once__Rpc__CompleteResponse complete =
            ONCE__RPC__COMPLETE_RESPONSE__INIT;
        Once__Rpc__ReleaseResponse release = ONCE__RPC__RELEASE_RESPONSE__INIT;
        Once__Rpc__ForgetResponse forget = ONCE__RPC__FORGET_RESPONSE__INIT;
        Once__Rpc__LookupResponse lookup = ONCE__RPC__LOOKUP_RESPONSE__INIT;
        Once__Rpc__Result *res;

        rnd_result(&r);
        /* Absent too: an empty answer is valid protobuf. */
        res = rnd_below(20) == 0 ? NULL : &r.res;
        claim.result = res;
        complete.result = res;
        release.result = res;
        forget.result = res;
        lookup.result = res;
        lookup.served_by = rnd_u64();
        check_answer(&claim.base);
        check_answer(&complete.base);
        check_answer(&release.base);
        check_answer(&forget.base);
        check_answer(&lookup.base);
    }
}
END_TEST

/* What the fast path does not know takes protobuf-c's: other messages,
 * and messages that kept unknown fields of a newer peer. */
START_TEST(answers_fast_path_only_when_known)
{
    Once__Rpc__StatusResponse st = ONCE__RPC__STATUS_RESPONSE__INIT;
    Once__Rpc__ClaimBatchResponse cb = ONCE__RPC__CLAIM_BATCH_RESPONSE__INIT;
    Once__Rpc__ClaimResponse claim = ONCE__RPC__CLAIM_RESPONSE__INIT;
    Once__Rpc__Result res = ONCE__RPC__RESULT__INIT;
    Once__Rpc__ClaimResponse *dec;
    uint8_t buf[64];
    size_t n;

    ck_assert(!result_pack_known(&st.base));
    ck_assert(!result_pack_known(&cb.base));
    res.outcome = ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED;
    claim.result = &res;
    ck_assert(result_pack_known(&claim.base));
    /* More attempts than a plan holds (the fsm lists at most 5). */
    res.n_attempts = RESULT_PACK_ATTEMPTS_MAX + 1;
    ck_assert(!result_pack_known(&claim.base));
    res.n_attempts = 0;
    /* ClaimResponse { result { outcome 1, field 99 = 5 } }: protobuf-c
     * keeps field 99 as an unknown field of the Result. */
    n = once__rpc__claim_response__pack(&claim, buf);
    ck_assert_uint_eq(n, 4);
    buf[1] += 3;
    buf[n++] = 0x98; /* tag of field 99, varint: (99 << 3) = 792 */
    buf[n++] = 0x06;
    buf[n++] = 0x05;
    dec = once__rpc__claim_response__unpack(NULL, n, buf);
    ck_assert_ptr_nonnull(dec);
    ck_assert_uint_eq(dec->result->base.n_unknown_fields, 1);
    ck_assert(!result_pack_known(&dec->base));
    once__rpc__claim_response__free_unpacked(dec, NULL);
}
END_TEST

/* ------------------------------------------------------------------------
 * The log: a Claim command, a Batch
 * ---------------------------------------------------------------------- */

START_TEST(claim_command_matches_protobuf_c)
{
    setup();
    for (int i = 0; i < ROUNDS; i++) {
        struct fsm_cmd cmd;
        struct fsm_claim *c = &cmd.u.claim;
        Once__Log__Command pc = ONCE__LOG__COMMAND__INIT;
        Once__Log__Claim pm = ONCE__LOG__CLAIM__INIT;
        uint8_t *out = NULL;
        size_t len = 0;

        memset(&cmd, 0, sizeof cmd);
        cmd.type = FSM_CMD_CLAIM;
        c->scope_len = rnd_len(FSM_SCOPE_MAX);
        c->scope = rnd_bytes(c->scope_len);
        c->key_len = rnd_len(FSM_KEY_MAX);
        c->key = rnd_bytes(c->key_len);
        memcpy(c->request_id, rnd_bytes(FSM_REQUEST_ID_LEN),
               FSM_REQUEST_ID_LEN);
        c->execution_id_len = rnd_len(FSM_EXECUTION_ID_MAX);
        c->execution_id = rnd_bytes(c->execution_id_len);
        c->kind = (enum fsm_kind)rnd_enum(3);
        c->ttl_ms = rnd_u64();
        c->has_ts = rnd_bool();
        c->ts_ms = rnd_u64();
        c->window_ms = rnd_u64();
        c->payload_hash_len = rnd_len(FSM_PAYLOAD_HASH_MAX);
        c->payload_hash = rnd_bytes(c->payload_hash_len);
        c->lease_ms = rnd_u64();
        c->max_uses = rnd_below(3) == 0 ? (uint32_t)rnd_below(3) : rnd_u32();
        c->sliding = rnd_bool();
        ck_assert_int_eq(command_encode(&cmd, &out, &len), 0);

        pm.scope.data = (uint8_t *)(uintptr_t)c->scope;
        pm.scope.len = c->scope_len;
        pm.key.data = (uint8_t *)(uintptr_t)c->key;
        pm.key.len = c->key_len;
        pm.request_id.data = c->request_id;
        pm.request_id.len = FSM_REQUEST_ID_LEN;
        pm.execution_id.data = (uint8_t *)(uintptr_t)c->execution_id;
        pm.execution_id.len = c->execution_id_len;
        pm.kind = (Once__Log__Kind)c->kind;
        pm.ttl_ms = c->ttl_ms;
        pm.has_ts = c->has_ts;
        pm.ts_ms = c->ts_ms;
        pm.window_ms = c->window_ms;
        pm.payload_hash.data = (uint8_t *)(uintptr_t)c->payload_hash;
        pm.payload_hash.len = c->payload_hash_len;
        pm.lease_ms = c->lease_ms;
        /* The encoder's rule: 1 is written as 0 (left out). */
        pm.max_uses = c->max_uses > 1 ? c->max_uses : 0;
        pm.sliding = c->sliding;
        pc.cmd_case = ONCE__LOG__COMMAND__CMD_CLAIM;
        pc.claim = &pm;
        same_bytes(&pc.base, out, len);
        fast_command_equals_protobuf_c(out, len, (int)c->kind >= 0);
        free(out);
    }
}
END_TEST

START_TEST(claim_command_bounds)
{
    struct fsm_cmd cmd;
    uint8_t *out = NULL;
    size_t len = 0;

    setup();
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_CLAIM;
    cmd.u.claim.scope = pool;
    cmd.u.claim.key = pool;
    cmd.u.claim.scope_len = FSM_SCOPE_MAX + 1;
    ck_assert_int_eq(command_encode(&cmd, &out, &len), FSM_E_TOOBIG);
    cmd.u.claim.scope_len = FSM_SCOPE_MAX;
    cmd.u.claim.key_len = FSM_KEY_MAX + 1;
    ck_assert_int_eq(command_encode(&cmd, &out, &len), FSM_E_TOOBIG);
    cmd.u.claim.key_len = FSM_KEY_MAX;
    cmd.u.claim.execution_id = pool;
    cmd.u.claim.execution_id_len = FSM_EXECUTION_ID_MAX + 1;
    ck_assert_int_eq(command_encode(&cmd, &out, &len), FSM_E_TOOBIG);
    cmd.u.claim.execution_id_len = FSM_EXECUTION_ID_MAX;
    cmd.u.claim.payload_hash = pool;
    cmd.u.claim.payload_hash_len = FSM_PAYLOAD_HASH_MAX + 1;
    ck_assert_int_eq(command_encode(&cmd, &out, &len), FSM_E_TOOBIG);
    cmd.u.claim.payload_hash_len = FSM_PAYLOAD_HASH_MAX;
    ck_assert_int_eq(command_encode(&cmd, &out, &len), 0);
    free(out);
}
END_TEST

START_TEST(batch_matches_protobuf_c)
{
    enum { N = 600 };
    static const uint8_t *cmds[N];
    static size_t lens[N];
    static ProtobufCBinaryData bins[N];

    setup();
    for (int i = 0; i < ROUNDS / 10; i++) {
        Once__Log__Batch b = ONCE__LOG__BATCH__INIT;
        uint8_t *out = NULL;
        size_t len = 0, n = rnd_len(N);
        uint32_t schema = rnd_u32();
        uint64_t t = rnd_u64();

        for (size_t k = 0; k < n; k++) {
            /* Empty commands are written too (tag and length 0). */
            lens[k] = rnd_below(30) == 0 ? rnd_len(1000) : rnd_len(150);
            cmds[k] = rnd_bytes(lens[k]);
            bins[k].data = (uint8_t *)(uintptr_t)cmds[k];
            bins[k].len = lens[k];
        }
        ck_assert_int_eq(
            command_encode_batch(schema, t, cmds, lens, n, &out, &len), 0);
        b.schema_version = schema;
        b.leader_time_ms = t;
        b.n_commands = n;
        b.commands = n > 0 ? bins : NULL;
        same_bytes(&b.base, out, len);
        /* Every batch the leader writes is read back by hand. */
        {
            struct command_decoder d;
            struct command_batch cb;

            command_decoder_init(&d);
            ck_assert_int_eq(command_read_batch(&d, out, len, &cb), 0);
            ck_assert_uint_eq(cb.schema_version, schema);
            ck_assert_uint_eq(cb.leader_time_ms, t);
            ck_assert_uint_eq(cb.n_commands, n);
            for (size_t k = 0; k < n; k++) {
                ck_assert_uint_eq(cb.command_lens[k], lens[k]);
                ck_assert((cb.commands[k] == NULL) == (lens[k] == 0));
                ck_assert(lens[k] == 0 ||
                          memcmp(cb.commands[k], cmds[k], lens[k]) == 0);
            }
            command_decoder_close(&d);
        }
        free(out);
    }
}
END_TEST

START_TEST(batch_bounds)
{
    static const uint8_t *cmds[2];
    static size_t lens[2];
    uint8_t *out = NULL;
    size_t len = 0;

    setup();
    cmds[0] = cmds[1] = pool;
    /* A batch of FSM_BATCH_MAX bytes exactly: 1 + 3 (length) + data. */
    lens[0] = FSM_BATCH_MAX - 4;
    ck_assert_int_eq(command_encode_batch(0, 0, cmds, lens, 1, &out, &len), 0);
    ck_assert_uint_eq(len, FSM_BATCH_MAX);
    free(out);
    ck_assert_int_eq(command_encode_batch(1, 0, cmds, lens, 1, &out, &len),
                     FSM_E_TOOBIG);
    lens[0] = 10;
    lens[1] = SIZE_MAX; /* a length that would wrap a sum */
    ck_assert_int_eq(command_encode_batch(1, 0, cmds, lens, 2, &out, &len),
                     FSM_E_TOOBIG);
    ck_assert_int_eq(
        command_encode_batch(1, 0, cmds, lens, FSM_BATCH_COMMANDS_MAX + 1, &out,
                             &len),
        FSM_E_TOOBIG);
    /* Nothing at all is an empty message. */
    ck_assert_int_eq(command_encode_batch(0, 0, NULL, NULL, 0, &out, &len), 0);
    ck_assert_uint_eq(len, 0);
    free(out);
}
END_TEST

/* ------------------------------------------------------------------------
 * The schema the encoders know
 * ---------------------------------------------------------------------- */

struct known_field
{
    uint32_t id;
    ProtobufCType type;
    ProtobufCLabel label;
};

#define U64 PROTOBUF_C_TYPE_UINT64
#define U32 PROTOBUF_C_TYPE_UINT32
#define ENM PROTOBUF_C_TYPE_ENUM
#define BOL PROTOBUF_C_TYPE_BOOL
#define BYT PROTOBUF_C_TYPE_BYTES
#define STR PROTOBUF_C_TYPE_STRING
#define MSG PROTOBUF_C_TYPE_MESSAGE
#define ONE PROTOBUF_C_LABEL_NONE
#define REP PROTOBUF_C_LABEL_REPEATED

static void same_schema(const ProtobufCMessageDescriptor *d,
                        const struct known_field *f,
                        size_t n)
{
    ck_assert_msg(d->n_fields == n, "%s has %u fields, the encoder knows %zu",
                  d->name, d->n_fields, n);
    for (size_t i = 0; i < n; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];

        ck_assert_msg(fd->id == f[i].id && fd->type == f[i].type &&
                          fd->label == f[i].label,
                      "%s.%s differs from what the encoder writes", d->name,
                      fd->name);
    }
}

#define SAME_SCHEMA(d, ...)                                   \
    do {                                                      \
        static const struct known_field f_[] = {__VA_ARGS__}; \
        same_schema(&(d), f_, sizeof f_ / sizeof f_[0]);      \
    } while (0)

START_TEST(schema_is_what_the_encoders_write)
{
    SAME_SCHEMA(once__rpc__envelope__descriptor, {1, U64, ONE}, {2, ENM, ONE},
                {3, ENM, ONE}, {4, U64, ONE}, {5, ENM, ONE}, {6, ENM, ONE},
                {7, BYT, ONE}, {8, BYT, ONE}, {9, BYT, ONE}, {10, U64, ONE},
                {11, BYT, ONE}, {12, U32, ONE}, {13, BYT, ONE}, {14, BOL, ONE},
                {15, BYT, ONE});
    SAME_SCHEMA(once__rpc__result__descriptor, {1, ENM, ONE}, {2, BOL, ONE},
                {3, BYT, ONE}, {4, BYT, ONE}, {5, U64, ONE}, {6, U64, ONE},
                {7, U32, ONE}, {8, MSG, REP}, {9, BOL, ONE}, {10, MSG, ONE},
                {11, BYT, ONE}, {12, BYT, ONE}, {13, U64, ONE}, {14, STR, ONE},
                {15, ENM, ONE}, {16, ENM, ONE}, {17, U64, ONE}, {18, U64, ONE},
                {19, U32, ONE}, {20, U64, ONE}, {21, U32, ONE}, {22, U32, ONE},
                {23, U32, ONE}, {24, BOL, ONE});
    SAME_SCHEMA(once__rpc__attempt__descriptor, {1, BYT, ONE}, {2, BYT, ONE},
                {3, U64, ONE}, {4, U64, ONE}, {5, ENM, ONE}, {6, BOL, ONE});
    SAME_SCHEMA(once__rpc__owner_token__descriptor, {1, U32, ONE},
                {2, U64, ONE}, {3, U32, ONE});
    SAME_SCHEMA(once__rpc__claim_response__descriptor, {1, MSG, ONE});
    SAME_SCHEMA(once__rpc__complete_response__descriptor, {1, MSG, ONE});
    SAME_SCHEMA(once__rpc__release_response__descriptor, {1, MSG, ONE});
    SAME_SCHEMA(once__rpc__forget_response__descriptor, {1, MSG, ONE});
    SAME_SCHEMA(once__rpc__lookup_response__descriptor, {1, MSG, ONE},
                {2, U64, ONE});
    SAME_SCHEMA(once__log__claim__descriptor, {1, BYT, ONE}, {2, BYT, ONE},
                {3, BYT, ONE}, {4, BYT, ONE}, {5, ENM, ONE}, {6, U64, ONE},
                {7, BOL, ONE}, {8, U64, ONE}, {9, U64, ONE}, {10, BYT, ONE},
                {11, U64, ONE}, {12, U32, ONE}, {13, BOL, ONE});
    SAME_SCHEMA(once__log__batch__descriptor, {1, U32, ONE}, {2, U64, ONE},
                {3, BYT, REP});
    /* The Command's claim is its field 1, a message in the oneof. */
    ck_assert_uint_eq(once__log__command__descriptor.fields[0].id, 1);
    ck_assert_int_eq(once__log__command__descriptor.fields[0].type, MSG);
    ck_assert_ptr_eq(once__log__command__descriptor.fields[0].descriptor,
                     &once__log__claim__descriptor);
}
END_TEST

/* The reader declines, leaving the bytes to protobuf-c, whatever it could
 * not decode exactly as protobuf-c does. */
START_TEST(reader_declines_the_unusual)
{
    /* ClaimRequest { scope "s" (1), kind 1 (5) } and variations. */
    static const struct
    {
        const char *why;
        uint8_t b[16];
        size_t len;
        bool accepted;
    } cases[] = {
        {"plain", {0x0a, 1, 's', 0x28, 1}, 5, true},
        {"empty", {0}, 0, true},
        {"bool 2 is true", {0x38, 2}, 2, true},
        {"padded varint", {0x28, 0x81, 0x00}, 3, true},
        {"unknown field 99", {0x0a, 1, 's', 0x98, 0x06, 5}, 6, false},
        {"field 14", {0x70, 1}, 2, false},
        {"field 0", {0x00, 1}, 2, false},
        {"field 0, long tag", {0x80, 0x00, 1}, 3, false},
        {"repeated field", {0x28, 1, 0x28, 2}, 4, false},
        {"repeated bytes", {0x0a, 1, 's', 0x0a, 0}, 5, false},
        {"bytes as varint", {0x08, 1}, 2, false},
        {"varint as bytes", {0x2a, 1, 1}, 3, false},
        {"fixed64 wire type", {0x29, 0, 0, 0, 0, 0, 0, 0, 0}, 9, false},
        {"group wire type", {0x2b}, 1, false},
        {"negative enum",
         {0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
         11,
         false},
        {"uint32 over 32 bits", {0x60, 0x80, 0x80, 0x80, 0x80, 0x10}, 6, false},
        {"varint over 64 bits",
         {0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
         11,
         false},
        {"varint unterminated", {0x30, 0xff}, 2, false},
        {"bytes past the end", {0x0a, 5, 's'}, 3, false},
        {"tag unterminated", {0x80}, 1, false},
    };
    Once__Rpc__ClaimRequest m;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        once__rpc__claim_request__init(&m);
        ck_assert_msg(pbr_parse(&claim_request_pbr_spec, cases[i].b,
                                cases[i].len, &m) == cases[i].accepted,
                      "%s", cases[i].why);
        if (cases[i].accepted) {
            ck_assert(fast_equals_protobuf_c(
                &once__rpc__claim_request__descriptor, &claim_request_pbr_spec,
                cases[i].b, cases[i].len));
        }
    }
}
END_TEST

/* The log Batch's reader declines what protobuf-c might read otherwise;
 * what it accepts equals protobuf-c's. */
START_TEST(log_batch_reader_declines_the_unusual)
{
    /* Batch { schema 1 (1), time 2 (2), commands "a", "" (3) }. */
    static const struct
    {
        const char *why;
        uint8_t b[16];
        size_t len;
        bool accepted;
    } cases[] = {
        {"plain", {0x08, 1, 0x10, 2, 0x1a, 1, 'a', 0x1a, 0}, 9, true},
        {"empty", {0}, 0, true},
        {"commands first", {0x1a, 1, 'a', 0x08, 1}, 5, true},
        {"padded varint", {0x08, 0x81, 0x00}, 3, true},
        {"repeated schema", {0x08, 1, 0x08, 2}, 4, false},
        {"repeated time", {0x10, 1, 0x10, 2}, 4, false},
        {"unknown field 4", {0x08, 1, 0x20, 1}, 4, false},
        {"field 0", {0x00, 1}, 2, false},
        {"schema as bytes", {0x0a, 1, 1}, 3, false},
        {"commands as varint", {0x18, 1}, 2, false},
        {"schema over 32 bits", {0x08, 0x80, 0x80, 0x80, 0x80, 0x10}, 6, false},
        {"command past the end", {0x1a, 5, 'a'}, 3, false},
        {"tag unterminated", {0x80}, 1, false},
    };
    struct command_decoder d;

    command_decoder_init(&d);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct command_batch cb;
        Once__Log__Batch *ref;
        int rv = command_read_batch(&d, cases[i].b, cases[i].len, &cb);

        ck_assert_msg(rv == (cases[i].accepted ? 0 : 1), "%s: %d", cases[i].why,
                      rv);
        /* Whichever reader takes it, command_decode_batch agrees with
         * protobuf-c. */
        ref = once__log__batch__unpack(NULL, cases[i].len, cases[i].b);
        rv = command_decode_batch(&d, cases[i].b, cases[i].len, &cb);
        ck_assert_msg((rv == 0) == (ref != NULL), "%s", cases[i].why);
        if (ref == NULL) {
            continue;
        }
        ck_assert_uint_eq(cb.schema_version, ref->schema_version);
        ck_assert_uint_eq(cb.leader_time_ms, ref->leader_time_ms);
        ck_assert_uint_eq(cb.n_commands, ref->n_commands);
        for (size_t k = 0; k < cb.n_commands; k++) {
            ck_assert_uint_eq(cb.command_lens[k], ref->commands[k].len);
            ck_assert(cb.command_lens[k] == 0 ||
                      memcmp(cb.commands[k], ref->commands[k].data,
                             cb.command_lens[k]) == 0);
        }
        once__log__batch__free_unpacked(ref, NULL);
    }
    command_decoder_close(&d);
}
END_TEST

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

/* claim_batch_read: random batches packed by protobuf-c read back equal,
 * and the unusual ones are declined. */
START_TEST(claim_batch_reader_matches_protobuf_c)
{
    static const struct
    {
        const char *why;
        uint8_t b[16];
        size_t len;
        bool accepted;
    } cases[] = {
        {"two items", {0x0a, 3, 0x0a, 1, 's', 0x0a, 0}, 7, true},
        {"no item", {0}, 0, false},
        {"field 2", {0x0a, 0, 0x12, 0}, 4, false},
        {"items as varint", {0x08, 1}, 2, false},
        {"item with field 99", {0x0a, 3, 0x98, 0x06, 5}, 5, false},
        {"item past the end", {0x0a, 5, 0x0a}, 3, false},
    };
    ProtobufCAllocator heap = {heap_alloc, heap_free, NULL};
    Once__Rpc__ClaimBatchRequest fast;

    setup();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rv = claim_batch_read(cases[i].b, cases[i].len, &heap, &fast);

        ck_assert_msg(rv == (cases[i].accepted ? 0 : 1), "%s: %d", cases[i].why,
                      rv);
        if (rv == 0) {
            free(fast.items);
        }
    }
    for (int r = 0; r < ROUNDS / 10; r++) {
        enum { N = 64 };
        Once__Rpc__ClaimRequest items[N], *ptrs[N];
        Once__Rpc__ClaimBatchRequest b = ONCE__RPC__CLAIM_BATCH_REQUEST__INIT;
        size_t n = 1 + rnd_below(N), len;
        uint8_t *buf;

        for (size_t k = 0; k < n; k++) {
            Once__Rpc__ClaimRequest *c = &items[k];

            once__rpc__claim_request__init(c);
            c->scope.len = rnd_len(40);
            c->scope.data = rnd_bytes(c->scope.len);
            c->key.len = rnd_len(100);
            c->key.data = rnd_bytes(c->key.len);
            c->request_id.len = rnd_bool() ? 16 : 0;
            c->request_id.data = rnd_bytes(c->request_id.len);
            c->kind = (Once__Rpc__Kind)rnd_below(4);
            c->ttl_ms = rnd_u64();
            c->has_ts = rnd_bool();
            c->ts_ms = rnd_u64();
            c->lease_ms = rnd_u64();
            c->max_uses = rnd_u32();
            c->sliding = rnd_bool();
            ptrs[k] = c;
        }
        b.n_items = n;
        b.items = ptrs;
        len = once__rpc__claim_batch_request__get_packed_size(&b);
        buf = malloc(len);
        ck_assert_ptr_nonnull(buf);
        once__rpc__claim_batch_request__pack(&b, buf);
        ck_assert_int_eq(claim_batch_read(buf, len, &heap, &fast), 0);
        ck_assert_uint_eq(fast.n_items, n);
        for (size_t k = 0; k < n; k++) {
            /* Equal items pack to equal bytes. */
            size_t m = once__rpc__claim_request__get_packed_size(&items[k]);
            uint8_t *x = malloc(m + 1), *y = malloc(m + 1);

            ck_assert(x != NULL && y != NULL);
            ck_assert_uint_eq(
                once__rpc__claim_request__get_packed_size(fast.items[k]), m);
            once__rpc__claim_request__pack(fast.items[k], x);
            once__rpc__claim_request__pack(&items[k], y);
            ck_assert_int_eq(memcmp(x, y, m), 0);
            free(x);
            free(y);
        }
        free(fast.items);
        free(buf);
    }
}
END_TEST

Suite *codec_suite(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codec");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, envelope_matches_protobuf_c);
    tcase_add_test(tc, envelope_size_of_any_view);
    tcase_add_test(tc, answers_match_protobuf_c);
    tcase_add_test(tc, answers_fast_path_only_when_known);
    tcase_add_test(tc, claim_command_matches_protobuf_c);
    tcase_add_test(tc, claim_command_bounds);
    tcase_add_test(tc, batch_matches_protobuf_c);
    tcase_add_test(tc, batch_bounds);
    tcase_add_test(tc, schema_is_what_the_encoders_write);
    tcase_add_test(tc, reader_declines_the_unusual);
    tcase_add_test(tc, log_batch_reader_declines_the_unusual);
    tcase_add_test(tc, claim_batch_reader_matches_protobuf_c);
    suite_add_tcase(s, tc);
    return s;
}
