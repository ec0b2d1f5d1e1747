/* test_command: the log codec (fsm/command.h).
 *
 * Every command type survives encode -> decode unchanged; every length limit
 * holds at its edge on both sides (the encoder refuses what the decoder would
 * refuse; a hand-built over-limit message decodes to FSM_CMD_INVALID);
 * garbage and truncated input never crash and always come back invalid with a
 * reason; the batch envelope round-trips and refuses what is over
 * FSM_BATCH_MAX bytes or FSM_BATCH_COMMANDS_MAX commands.
 *
 * One file past ~1,000 lines on purpose: it is one topic (the codec), and
 * the round-trip, limit and garbage tests share the builders and the
 * field-by-field comparison that make up half of it. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "fsm/fsm.h"
#include "once_log.pb-c.h"

Suite *command_suite(void);

/* --- helpers -------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static void fill_pattern(uint8_t *buf, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)(seed + i * 7u + (i >> 8));
    }
}

static uint8_t g_scope[FSM_SCOPE_MAX + 1];
static uint8_t g_key[FSM_KEY_MAX + 1];
static uint8_t g_exec[FSM_EXECUTION_ID_MAX + 1];
static uint8_t g_hash[FSM_PAYLOAD_HASH_MAX + 1];
static uint8_t g_result[FSM_RESULT_MAX + 1];
static uint8_t g_error[FSM_ERROR_MAX + 1];

static void fill_globals(void)
{
    fill_pattern(g_scope, sizeof g_scope, 1);
    fill_pattern(g_key, sizeof g_key, 2);
    fill_pattern(g_exec, sizeof g_exec, 3);
    fill_pattern(g_hash, sizeof g_hash, 4);
    fill_pattern(g_result, sizeof g_result, 5);
    fill_pattern(g_error, sizeof g_error, 6);
}

static void make_claim(struct fsm_cmd *c, enum fsm_kind kind)
{
    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_CLAIM;
    c->u.claim.scope = g_scope;
    c->u.claim.scope_len = 3;
    c->u.claim.key = g_key;
    c->u.claim.key_len = 17;
    fill_pattern(c->u.claim.request_id, FSM_REQUEST_ID_LEN, 99);
    c->u.claim.execution_id = g_exec;
    c->u.claim.execution_id_len = 9;
    c->u.claim.kind = kind;
    c->u.claim.ttl_ms = 86400000;
    c->u.claim.has_ts = true;
    c->u.claim.ts_ms = 1700000000123ull;
    c->u.claim.window_ms = 60000;
    if (kind == FSM_KIND_IDEMPOTENT) {
        c->u.claim.payload_hash = g_hash;
        c->u.claim.payload_hash_len = 32;
        c->u.claim.lease_ms = 12345;
        c->u.claim.sliding = true;
    } else {
        c->u.claim.max_uses = 7;
    }
}

static void make_complete(struct fsm_cmd *c)
{
    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_COMPLETE;
    c->u.complete.scope = g_scope;
    c->u.complete.scope_len = 5;
    c->u.complete.key = g_key;
    c->u.complete.key_len = 8;
    c->u.complete.owner_token.group_id = 7;
    c->u.complete.owner_token.index = 0x123456789abcull;
    c->u.complete.owner_token.slot = 4242;
    c->u.complete.result = g_result;
    c->u.complete.result_len = 1000;
}

static void make_release(struct fsm_cmd *c)
{
    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_RELEASE;
    c->u.release.scope = g_scope;
    c->u.release.scope_len = 1;
    c->u.release.key = g_key;
    c->u.release.key_len = 1;
    c->u.release.owner_token.group_id = 1;
    c->u.release.owner_token.index = 5;
    c->u.release.owner_token.slot = 0;
    c->u.release.terminal = true;
    c->u.release.error = g_error;
    c->u.release.error_len = 77;
}

static void make_ident(struct fsm_cmd *c, enum fsm_cmd_type t)
{
    memset(c, 0, sizeof *c);
    c->type = t;
    c->u.ident.scope = g_scope;
    c->u.ident.scope_len = 2;
    c->u.ident.key = g_key;
    c->u.ident.key_len = 40;
}

static void make_member(struct fsm_member *m, uint64_t id)
{
    memset(m, 0, sizeof *m);
    m->id = id;
    snprintf(m->raft_addr, sizeof m->raft_addr, "10.0.0.%u:7000",
             (unsigned)(id % 250));
    snprintf(m->client_addr, sizeof m->client_addr, "10.0.1.%u:7001",
             (unsigned)(id % 250));
    m->role = (enum fsm_role)(1 + id % 3);
}

static void make_settings(struct fsm_settings *s)
{
    s->max_window_ms = 60000;
    s->max_skew_ms = 2000;
    s->max_ttl_ms = 86400000;
    s->max_lease_ms = 600000;
    s->max_records = 123456;
    s->max_bytes = 1ull << 33;
}

/* A bootstrap command; @b is caller storage. */
static void make_bootstrap(struct fsm_cmd *c,
                           struct fsm_bootstrap *b,
                           size_t n_members)
{
    memset(c, 0, sizeof *c);
    memset(b, 0, sizeof *b);
    c->type = FSM_CMD_BOOTSTRAP;
    c->u.bootstrap = b;
    fill_pattern(b->cluster_id, FSM_CLUSTER_ID_LEN, 11);
    fill_pattern(b->hash_key, FSM_HASH_KEY_LEN, 12);
    b->group_id = 3;
    make_settings(&b->settings);
    b->n_members = n_members;
    for (size_t i = 0; i < n_members; i++) {
        make_member(&b->members[i], i + 1);
    }
}

static bool bytes_eq(const uint8_t *a,
                     size_t a_len,
                     const uint8_t *b,
                     size_t b_len)
{
    return a_len == b_len && (a_len == 0 || memcmp(a, b, a_len) == 0);
}

static bool member_eq(const struct fsm_member *a, const struct fsm_member *b)
{
    return a->id == b->id && strcmp(a->raft_addr, b->raft_addr) == 0 &&
           strcmp(a->client_addr, b->client_addr) == 0 && a->role == b->role;
}

static bool settings_eq(const struct fsm_settings *a,
                        const struct fsm_settings *b)
{
    return a->max_window_ms == b->max_window_ms &&
           a->max_skew_ms == b->max_skew_ms && a->max_ttl_ms == b->max_ttl_ms &&
           a->max_lease_ms == b->max_lease_ms &&
           a->max_records == b->max_records && a->max_bytes == b->max_bytes;
}

static bool token_eq(const struct fsm_token *a, const struct fsm_token *b)
{
    return a->group_id == b->group_id && a->index == b->index &&
           a->slot == b->slot;
}

/* Field-by-field equality of two valid commands of the same type. */
static bool cmd_eq(const struct fsm_cmd *a, const struct fsm_cmd *b)
{
    if (a->type != b->type) {
        return false;
    }
    switch (a->type) {
        case FSM_CMD_CLAIM: {
            const struct fsm_claim *x = &a->u.claim, *y = &b->u.claim;
            return bytes_eq(x->scope, x->scope_len, y->scope, y->scope_len) &&
                   bytes_eq(x->key, x->key_len, y->key, y->key_len) &&
                   memcmp(x->request_id, y->request_id, FSM_REQUEST_ID_LEN) ==
                       0 &&
                   bytes_eq(x->execution_id, x->execution_id_len,
                            y->execution_id, y->execution_id_len) &&
                   x->kind == y->kind && x->ttl_ms == y->ttl_ms &&
                   x->has_ts == y->has_ts && x->ts_ms == y->ts_ms &&
                   x->window_ms == y->window_ms &&
                   bytes_eq(x->payload_hash, x->payload_hash_len,
                            y->payload_hash, y->payload_hash_len) &&
                   x->lease_ms == y->lease_ms && x->max_uses == y->max_uses &&
                   x->sliding == y->sliding;
        }
        case FSM_CMD_COMPLETE: {
            const struct fsm_complete *x = &a->u.complete, *y = &b->u.complete;
            return bytes_eq(x->scope, x->scope_len, y->scope, y->scope_len) &&
                   bytes_eq(x->key, x->key_len, y->key, y->key_len) &&
                   token_eq(&x->owner_token, &y->owner_token) &&
                   bytes_eq(x->result, x->result_len, y->result, y->result_len);
        }
        case FSM_CMD_RELEASE: {
            const struct fsm_release *x = &a->u.release, *y = &b->u.release;
            return bytes_eq(x->scope, x->scope_len, y->scope, y->scope_len) &&
                   bytes_eq(x->key, x->key_len, y->key, y->key_len) &&
                   token_eq(&x->owner_token, &y->owner_token) &&
                   x->terminal == y->terminal &&
                   bytes_eq(x->error, x->error_len, y->error, y->error_len);
        }
        case FSM_CMD_LOOKUP:
        case FSM_CMD_FORGET: {
            const struct fsm_ident *x = &a->u.ident, *y = &b->u.ident;
            return bytes_eq(x->scope, x->scope_len, y->scope, y->scope_len) &&
                   bytes_eq(x->key, x->key_len, y->key, y->key_len);
        }
        case FSM_CMD_BOOTSTRAP: {
            const struct fsm_bootstrap *x = a->u.bootstrap, *y = b->u.bootstrap;
            if (x == NULL || y == NULL ||
                memcmp(x->cluster_id, y->cluster_id, FSM_CLUSTER_ID_LEN) != 0 ||
                memcmp(x->hash_key, y->hash_key, FSM_HASH_KEY_LEN) != 0 ||
                x->group_id != y->group_id ||
                !settings_eq(&x->settings, &y->settings) ||
                x->n_members != y->n_members) {
                return false;
            }
            for (size_t i = 0; i < x->n_members; i++) {
                if (!member_eq(&x->members[i], &y->members[i])) {
                    return false;
                }
            }
            return true;
        }
        case FSM_CMD_SET_SETTINGS:
            return settings_eq(&a->u.settings, &b->u.settings);
        case FSM_CMD_SET_MEMBER:
            return member_eq(&a->u.member, &b->u.member);
        case FSM_CMD_RETIRE_MEMBER:
            return a->u.retire_id == b->u.retire_id;
        case FSM_CMD_SET_SCHEMA:
            return a->u.schema_version == b->u.schema_version;
        case FSM_CMD_QUOTA_SET: {
            const struct fsm_quota_set *x = &a->u.quota, *y = &b->u.quota;
            return bytes_eq(x->pattern, x->pattern_len, y->pattern,
                            y->pattern_len) &&
                   x->max_records == y->max_records &&
                   x->max_bytes == y->max_bytes && x->remove == y->remove;
        }
        case FSM_CMD_INVALID:
            break;
    }
    return false;
}

/* Encode @c, decode it with a fresh decoder, compare. */
static void check_roundtrip(const struct fsm_cmd *c, const char *what)
{
    struct command_decoder d;
    struct fsm_cmd out;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rv;

    rv = command_encode(c, &buf, &len);
    ck_assert_msg(rv == 0, "%s: encode: %d (%s)", what, rv, fsm_strerror(rv));
    ck_assert_ptr_nonnull(buf);
    command_decoder_init(&d);
    memset(&out, 0xa5, sizeof out);
    command_decode(&d, buf, len, &out);
    ck_assert_msg(out.type == c->type, "%s: decoded type %d (%s), want %d",
                  what, (int)out.type,
                  out.type == FSM_CMD_INVALID && out.invalid_reason != NULL
                      ? out.invalid_reason
                      : "-",
                  (int)c->type);
    ck_assert_msg(cmd_eq(c, &out), "%s: fields differ after round trip", what);
    command_decoder_close(&d);
    free(buf);
}

/* Encoding must be refused with FSM_E_TOOBIG. */
static void check_encode_toobig(const struct fsm_cmd *c, const char *what)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rv = command_encode(c, &buf, &len);

    ck_assert_msg(rv == FSM_E_TOOBIG, "%s: encode returned %d, want %d", what,
                  rv, FSM_E_TOOBIG);
    free(buf); /* NULL unless the encoder misbehaved */
}

/* Decode @buf and require FSM_CMD_INVALID with a reason. */
static void check_decodes_invalid(struct command_decoder *d,
                                  const uint8_t *buf,
                                  size_t len,
                                  const char *what)
{
    struct fsm_cmd out;

    memset(&out, 0x5a, sizeof out);
    command_decode(d, buf, len, &out);
    ck_assert_msg(out.type == FSM_CMD_INVALID,
                  "%s: decoded as type %d, want FSM_CMD_INVALID", what,
                  (int)out.type);
    ck_assert_msg(out.invalid_reason != NULL && out.invalid_reason[0] != '\0',
                  "%s: no invalid_reason", what);
}

/* Pack a hand-built message with the generated code. */
static uint8_t *pack_command(const Once__Log__Command *m, size_t *len)
{
    uint8_t *buf;

    *len = once__log__command__get_packed_size(m);
    buf = malloc(*len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(once__log__command__pack(m, buf), *len);
    return buf;
}

static void check_packed_invalid(const Once__Log__Command *m, const char *what)
{
    struct command_decoder d;
    size_t len;
    uint8_t *buf = pack_command(m, &len);

    command_decoder_init(&d);
    check_decodes_invalid(&d, buf, len, what);
    command_decoder_close(&d);
    free(buf);
}

static void check_packed_valid(const Once__Log__Command *m,
                               enum fsm_cmd_type want,
                               const char *what)
{
    struct command_decoder d;
    struct fsm_cmd out;
    size_t len;
    uint8_t *buf = pack_command(m, &len);

    command_decoder_init(&d);
    command_decode(&d, buf, len, &out);
    ck_assert_msg(out.type == want, "%s: decoded type %d (%s), want %d", what,
                  (int)out.type,
                  out.type == FSM_CMD_INVALID && out.invalid_reason != NULL
                      ? out.invalid_reason
                      : "-",
                  (int)want);
    command_decoder_close(&d);
    free(buf);
}

static ProtobufCBinaryData bin(const uint8_t *p, size_t len)
{
    ProtobufCBinaryData b;

    b.data = (uint8_t *)p;
    b.len = len;
    return b;
}

/* A valid hand-built claim; fields are then broken one at a time. */
static void pb_claim(Once__Log__Claim *cl, uint8_t *rid)
{
    once__log__claim__init(cl);
    fill_pattern(rid, FSM_REQUEST_ID_LEN, 50);
    cl->scope = bin(g_scope, 4);
    cl->key = bin(g_key, 4);
    cl->request_id = bin(rid, FSM_REQUEST_ID_LEN);
    cl->kind = ONCE__LOG__KIND__KIND_IDEMPOTENT;
    cl->ttl_ms = 1000;
}

/* --- encode -> decode ----------------------------------------------------- */

START_TEST(roundtrip_claim_nonce)
{
    struct fsm_cmd c;

    fill_globals();
    make_claim(&c, FSM_KIND_NONCE);
    check_roundtrip(&c, "nonce claim");
    /* ts 0 is a valid time and must survive with has_ts. */
    c.u.claim.ts_ms = 0;
    c.u.claim.ttl_ms = 0;
    check_roundtrip(&c, "nonce claim ts 0");
    /* No ts, no execution id. */
    c.u.claim.has_ts = false;
    c.u.claim.ts_ms = 0;
    c.u.claim.window_ms = 0;
    c.u.claim.ttl_ms = 1;
    c.u.claim.execution_id = NULL;
    c.u.claim.execution_id_len = 0;
    check_roundtrip(&c, "nonce claim ttl only");
    /* Extreme integers. */
    c.u.claim.ttl_ms = UINT64_MAX;
    c.u.claim.has_ts = true;
    c.u.claim.ts_ms = UINT64_MAX;
    c.u.claim.window_ms = UINT64_MAX;
    check_roundtrip(&c, "nonce claim max integers");
}
END_TEST

/* command_encode_claim_into writes command_encode's bytes when they fit,
 * -ENOSPC when they do not (the pipeline then mallocs), and refuses what
 * command_encode refuses. */
START_TEST(claim_into_matches_encode)
{
    struct fsm_cmd c;
    uint8_t *heap, buf[512];
    size_t heap_len, len = 0;

    fill_globals();
    make_claim(&c, FSM_KIND_IDEMPOTENT);
    ck_assert_int_eq(command_encode(&c, &heap, &heap_len), 0);
    ck_assert_uint_le(heap_len, sizeof buf);
    ck_assert_int_eq(command_encode_claim_into(&c.u.claim, buf, heap_len, &len),
                     0);
    ck_assert_uint_eq(len, heap_len);
    ck_assert_mem_eq(buf, heap, heap_len);
    ck_assert_int_eq(
        command_encode_claim_into(&c.u.claim, buf, heap_len - 1, &len),
        -ENOSPC);
    free(heap);
    c.u.claim.key_len = FSM_KEY_MAX + 1;
    ck_assert_int_eq(
        command_encode_claim_into(&c.u.claim, buf, sizeof buf, &len),
        FSM_E_TOOBIG);
}
END_TEST

START_TEST(roundtrip_claim_idempotent)
{
    struct fsm_cmd c;

    fill_globals();
    make_claim(&c, FSM_KIND_IDEMPOTENT);
    check_roundtrip(&c, "idempotent claim");
    c.u.claim.payload_hash = NULL;
    c.u.claim.payload_hash_len = 0;
    c.u.claim.lease_ms = 0;
    c.u.claim.has_ts = false;
    c.u.claim.ts_ms = 0;
    c.u.claim.window_ms = 0;
    check_roundtrip(&c, "idempotent claim, no hash, default lease");
}
END_TEST

START_TEST(roundtrip_complete)
{
    struct fsm_cmd c;

    fill_globals();
    make_complete(&c);
    check_roundtrip(&c, "complete");
    c.u.complete.result = NULL;
    c.u.complete.result_len = 0;
    c.u.complete.owner_token.group_id = UINT32_MAX;
    c.u.complete.owner_token.index = UINT64_MAX;
    c.u.complete.owner_token.slot = UINT32_MAX;
    check_roundtrip(&c, "complete, empty result, max token");
}
END_TEST

START_TEST(roundtrip_release)
{
    struct fsm_cmd c;

    fill_globals();
    make_release(&c);
    check_roundtrip(&c, "release terminal");
    c.u.release.terminal = false;
    c.u.release.error = NULL;
    c.u.release.error_len = 0;
    check_roundtrip(&c, "release not terminal");
}
END_TEST

START_TEST(roundtrip_lookup_forget)
{
    struct fsm_cmd c;

    fill_globals();
    make_ident(&c, FSM_CMD_LOOKUP);
    check_roundtrip(&c, "lookup");
    make_ident(&c, FSM_CMD_FORGET);
    check_roundtrip(&c, "forget");
}
END_TEST

START_TEST(roundtrip_bootstrap)
{
    struct fsm_cmd c;
    struct fsm_bootstrap *b = malloc(sizeof *b);

    ck_assert_ptr_nonnull(b);
    fill_globals();
    make_bootstrap(&c, b, 3);
    check_roundtrip(&c, "bootstrap 3 members");
    make_bootstrap(&c, b, 0);
    memset(&b->settings, 0, sizeof b->settings);
    check_roundtrip(&c, "bootstrap no members, zero settings");
    make_bootstrap(&c, b, FSM_MEMBERS_MAX);
    check_roundtrip(&c, "bootstrap max members");
    free(b);
}
END_TEST

START_TEST(roundtrip_config)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_SETTINGS;
    make_settings(&c.u.settings);
    check_roundtrip(&c, "set settings");

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_MEMBER;
    make_member(&c.u.member, 0xfedcba9876543210ull);
    check_roundtrip(&c, "set member");
    for (int r = FSM_ROLE_VOTER; r <= FSM_ROLE_SPARE; r++) {
        c.u.member.role = (enum fsm_role)r;
        check_roundtrip(&c, "set member, each role");
    }

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_RETIRE_MEMBER;
    c.u.retire_id = 42;
    check_roundtrip(&c, "retire member");
    c.u.retire_id = UINT64_MAX;
    check_roundtrip(&c, "retire member max id");

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_SCHEMA;
    c.u.schema_version = FSM_SCHEMA_VERSION;
    check_roundtrip(&c, "set schema");
    c.u.schema_version = FSM_SCHEMA_VERSION + 1;
    check_roundtrip(&c, "set schema newer (decodes; the fsm refuses)");

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_QUOTA_SET;
    c.u.quota.pattern = (const uint8_t *)"tenant-a*";
    c.u.quota.pattern_len = 9;
    c.u.quota.max_records = 5;
    c.u.quota.max_bytes = UINT64_MAX;
    check_roundtrip(&c, "quota set");
    c.u.quota.remove = true;
    c.u.quota.max_records = 0;
    c.u.quota.max_bytes = 0;
    check_roundtrip(&c, "quota remove");
}
END_TEST

/* One decoder reused across many commands of every type gives the same
 * answers as fresh ones (arenas are reset, nothing leaks between calls). */
START_TEST(decoder_reuse)
{
    struct command_decoder d;
    struct fsm_cmd c[8], out;
    struct fsm_bootstrap *b = malloc(sizeof *b);
    uint8_t *buf[8];
    size_t len[8];

    ck_assert_ptr_nonnull(b);
    fill_globals();
    make_claim(&c[0], FSM_KIND_NONCE);
    make_claim(&c[1], FSM_KIND_IDEMPOTENT);
    make_complete(&c[2]);
    make_release(&c[3]);
    make_ident(&c[4], FSM_CMD_LOOKUP);
    make_ident(&c[5], FSM_CMD_FORGET);
    make_bootstrap(&c[6], b, 5);
    memset(&c[7], 0, sizeof c[7]);
    c[7].type = FSM_CMD_SET_MEMBER;
    make_member(&c[7].u.member, 9);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(command_encode(&c[i], &buf[i], &len[i]), 0);
    }
    command_decoder_init(&d);
    for (int round = 0; round < 200; round++) {
        int i = (round * 5) % 8;
        command_decode(&d, buf[i], len[i], &out);
        ck_assert_msg(cmd_eq(&c[i], &out), "round %d cmd %d differs", round, i);
        if (round % 7 == 0) {
            check_decodes_invalid(&d, buf[i], len[i] / 2, "half command");
        }
        if (round % 13 == 0) {
            command_decoder_reset(&d);
        }
    }
    /* A whole batch is decoded before it is applied: what each decoded
     * command points to stays valid until the reset. */
    for (int round = 0; round < 3; round++) {
        struct fsm_cmd all[8];

        for (int i = 0; i < 8; i++) {
            command_decode(&d, buf[i], len[i], &all[i]);
        }
        for (int i = 0; i < 8; i++) {
            ck_assert_msg(cmd_eq(&c[i], &all[i]),
                          "cmd %d changed by the decodes after it", i);
        }
        command_decoder_reset(&d);
    }
    command_decoder_close(&d);
    for (int i = 0; i < 8; i++) {
        free(buf[i]);
    }
    free(b);
}
END_TEST

/* --- limits at the edge --------------------------------------------------- */

START_TEST(encode_limits_at_edge)
{
    struct fsm_cmd c;
    struct fsm_bootstrap *b = malloc(sizeof *b);

    ck_assert_ptr_nonnull(b);
    fill_globals();
    make_claim(&c, FSM_KIND_IDEMPOTENT);
    c.u.claim.scope_len = FSM_SCOPE_MAX;
    c.u.claim.key_len = FSM_KEY_MAX;
    c.u.claim.execution_id_len = FSM_EXECUTION_ID_MAX;
    c.u.claim.payload_hash_len = FSM_PAYLOAD_HASH_MAX;
    check_roundtrip(&c, "claim, every field at its limit");

    make_complete(&c);
    c.u.complete.scope_len = FSM_SCOPE_MAX;
    c.u.complete.key_len = FSM_KEY_MAX;
    c.u.complete.result_len = FSM_RESULT_MAX;
    check_roundtrip(&c, "complete, result at its limit");

    make_release(&c);
    c.u.release.scope_len = FSM_SCOPE_MAX;
    c.u.release.key_len = FSM_KEY_MAX;
    c.u.release.error_len = FSM_ERROR_MAX;
    check_roundtrip(&c, "release, error at its limit");

    make_ident(&c, FSM_CMD_LOOKUP);
    c.u.ident.scope_len = FSM_SCOPE_MAX;
    c.u.ident.key_len = FSM_KEY_MAX;
    check_roundtrip(&c, "lookup at limits");
    c.type = FSM_CMD_FORGET;
    check_roundtrip(&c, "forget at limits");

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_MEMBER;
    make_member(&c.u.member, 1);
    memset(c.u.member.raft_addr, 'r', FSM_ADDR_MAX);
    c.u.member.raft_addr[FSM_ADDR_MAX] = '\0';
    memset(c.u.member.client_addr, 'c', FSM_ADDR_MAX);
    c.u.member.client_addr[FSM_ADDR_MAX] = '\0';
    check_roundtrip(&c, "member, addresses at their limit");

    make_bootstrap(&c, b, FSM_MEMBERS_MAX);
    for (size_t i = 0; i < FSM_MEMBERS_MAX; i++) {
        memset(b->members[i].raft_addr, 'a' + (int)(i % 26), FSM_ADDR_MAX);
        b->members[i].raft_addr[FSM_ADDR_MAX] = '\0';
    }
    check_roundtrip(&c, "bootstrap, 64 members with 64-byte addresses");
    free(b);
}
END_TEST

START_TEST(encode_over_limit_toobig)
{
    struct fsm_cmd c;
    struct fsm_bootstrap *b = malloc(sizeof *b);

    ck_assert_ptr_nonnull(b);
    fill_globals();
    make_claim(&c, FSM_KIND_IDEMPOTENT);
    c.u.claim.scope_len = FSM_SCOPE_MAX + 1;
    check_encode_toobig(&c, "claim scope 129");
    make_claim(&c, FSM_KIND_IDEMPOTENT);
    c.u.claim.key_len = FSM_KEY_MAX + 1;
    check_encode_toobig(&c, "claim key 257");
    make_claim(&c, FSM_KIND_IDEMPOTENT);
    c.u.claim.execution_id_len = FSM_EXECUTION_ID_MAX + 1;
    check_encode_toobig(&c, "claim execution id 129");
    make_claim(&c, FSM_KIND_IDEMPOTENT);
    c.u.claim.payload_hash_len = FSM_PAYLOAD_HASH_MAX + 1;
    check_encode_toobig(&c, "claim payload hash 65");

    make_complete(&c);
    c.u.complete.scope_len = FSM_SCOPE_MAX + 1;
    check_encode_toobig(&c, "complete scope 129");
    make_complete(&c);
    c.u.complete.key_len = FSM_KEY_MAX + 1;
    check_encode_toobig(&c, "complete key 257");
    make_complete(&c);
    c.u.complete.result_len = FSM_RESULT_MAX + 1;
    check_encode_toobig(&c, "complete result 65537");

    make_release(&c);
    c.u.release.scope_len = FSM_SCOPE_MAX + 1;
    check_encode_toobig(&c, "release scope 129");
    make_release(&c);
    c.u.release.key_len = FSM_KEY_MAX + 1;
    check_encode_toobig(&c, "release key 257");
    make_release(&c);
    c.u.release.error_len = FSM_ERROR_MAX + 1;
    check_encode_toobig(&c, "release error 1025");

    make_ident(&c, FSM_CMD_LOOKUP);
    c.u.ident.scope_len = FSM_SCOPE_MAX + 1;
    check_encode_toobig(&c, "lookup scope 129");
    make_ident(&c, FSM_CMD_LOOKUP);
    c.u.ident.key_len = FSM_KEY_MAX + 1;
    check_encode_toobig(&c, "lookup key 257");
    make_ident(&c, FSM_CMD_FORGET);
    c.u.ident.scope_len = FSM_SCOPE_MAX + 1;
    check_encode_toobig(&c, "forget scope 129");
    make_ident(&c, FSM_CMD_FORGET);
    c.u.ident.key_len = FSM_KEY_MAX + 1;
    check_encode_toobig(&c, "forget key 257");

    /* n_members past the array: the encoder must check before reading (a
     * heap-allocated struct, so ASan sees an overread). */
    make_bootstrap(&c, b, FSM_MEMBERS_MAX);
    b->n_members = FSM_MEMBERS_MAX + 1;
    check_encode_toobig(&c, "bootstrap 65 members");
    free(b);
}
END_TEST

/* Hand-built messages one byte over a limit decode to FSM_CMD_INVALID; the
 * same at the limit decode fine. */
START_TEST(decode_over_limit_invalid)
{
    Once__Log__Command m;
    Once__Log__Claim cl;
    Once__Log__Complete co;
    Once__Log__Release re;
    Once__Log__Lookup lo;
    Once__Log__Forget fo;
    Once__Log__OwnerToken tok;
    uint8_t rid[FSM_REQUEST_ID_LEN + 1];

    fill_globals();
    once__log__command__init(&m);
    m.cmd_case = ONCE__LOG__COMMAND__CMD_CLAIM;
    m.claim = &cl;

    pb_claim(&cl, rid);
    check_packed_valid(&m, FSM_CMD_CLAIM, "hand-built claim");
    cl.scope = bin(g_scope, FSM_SCOPE_MAX);
    cl.key = bin(g_key, FSM_KEY_MAX);
    cl.execution_id = bin(g_exec, FSM_EXECUTION_ID_MAX);
    cl.payload_hash = bin(g_hash, FSM_PAYLOAD_HASH_MAX);
    check_packed_valid(&m, FSM_CMD_CLAIM, "hand-built claim at limits");

    pb_claim(&cl, rid);
    cl.scope = bin(g_scope, FSM_SCOPE_MAX + 1);
    check_packed_invalid(&m, "claim scope 129");
    pb_claim(&cl, rid);
    cl.key = bin(g_key, FSM_KEY_MAX + 1);
    check_packed_invalid(&m, "claim key 257");
    pb_claim(&cl, rid);
    cl.request_id = bin(rid, FSM_REQUEST_ID_LEN + 1);
    check_packed_invalid(&m, "claim request id 17");
    pb_claim(&cl, rid);
    cl.request_id = bin(rid, FSM_REQUEST_ID_LEN - 1);
    check_packed_invalid(&m, "claim request id 15");
    pb_claim(&cl, rid);
    cl.request_id = bin(NULL, 0);
    check_packed_invalid(&m, "claim request id missing");
    pb_claim(&cl, rid);
    cl.execution_id = bin(g_exec, FSM_EXECUTION_ID_MAX + 1);
    check_packed_invalid(&m, "claim execution id 129");
    pb_claim(&cl, rid);
    cl.payload_hash = bin(g_hash, FSM_PAYLOAD_HASH_MAX + 1);
    check_packed_invalid(&m, "claim payload hash 65");
    pb_claim(&cl, rid);
    cl.kind = (Once__Log__Kind)3;
    check_packed_invalid(&m, "claim kind 3");
    pb_claim(&cl, rid);
    cl.kind = (Once__Log__Kind)1000000;
    check_packed_invalid(&m, "claim kind 1000000");

    once__log__owner_token__init(&tok);
    tok.group_id = 1;
    tok.index = 2;
    once__log__complete__init(&co);
    co.scope = bin(g_scope, 1);
    co.key = bin(g_key, 1);
    co.owner_token = &tok;
    co.result = bin(g_result, FSM_RESULT_MAX);
    m.cmd_case = ONCE__LOG__COMMAND__CMD_COMPLETE;
    m.complete = &co;
    check_packed_valid(&m, FSM_CMD_COMPLETE, "complete result 65536");
    co.result = bin(g_result, FSM_RESULT_MAX + 1);
    check_packed_invalid(&m, "complete result 65537");
    co.result = bin(g_result, 1);
    co.scope = bin(g_scope, FSM_SCOPE_MAX + 1);
    check_packed_invalid(&m, "complete scope 129");
    co.scope = bin(g_scope, 1);
    co.key = bin(g_key, FSM_KEY_MAX + 1);
    check_packed_invalid(&m, "complete key 257");

    once__log__release__init(&re);
    re.scope = bin(g_scope, 1);
    re.key = bin(g_key, 1);
    re.owner_token = &tok;
    re.terminal = 1;
    re.error = bin(g_error, FSM_ERROR_MAX);
    m.cmd_case = ONCE__LOG__COMMAND__CMD_RELEASE;
    m.release = &re;
    check_packed_valid(&m, FSM_CMD_RELEASE, "release error 1024");
    re.error = bin(g_error, FSM_ERROR_MAX + 1);
    check_packed_invalid(&m, "release error 1025");
    re.error = bin(g_error, 1);
    re.scope = bin(g_scope, FSM_SCOPE_MAX + 1);
    check_packed_invalid(&m, "release scope 129");
    re.scope = bin(g_scope, 1);
    re.key = bin(g_key, FSM_KEY_MAX + 1);
    check_packed_invalid(&m, "release key 257");

    once__log__lookup__init(&lo);
    lo.scope = bin(g_scope, FSM_SCOPE_MAX);
    lo.key = bin(g_key, FSM_KEY_MAX);
    m.cmd_case = ONCE__LOG__COMMAND__CMD_LOOKUP;
    m.lookup = &lo;
    check_packed_valid(&m, FSM_CMD_LOOKUP, "lookup at limits");
    lo.scope = bin(g_scope, FSM_SCOPE_MAX + 1);
    check_packed_invalid(&m, "lookup scope 129");
    lo.scope = bin(g_scope, 1);
    lo.key = bin(g_key, FSM_KEY_MAX + 1);
    check_packed_invalid(&m, "lookup key 257");

    once__log__forget__init(&fo);
    fo.scope = bin(g_scope, FSM_SCOPE_MAX);
    fo.key = bin(g_key, FSM_KEY_MAX);
    m.cmd_case = ONCE__LOG__COMMAND__CMD_FORGET;
    m.forget = &fo;
    check_packed_valid(&m, FSM_CMD_FORGET, "forget at limits");
    fo.scope = bin(g_scope, FSM_SCOPE_MAX + 1);
    check_packed_invalid(&m, "forget scope 129");
    fo.scope = bin(g_scope, 1);
    fo.key = bin(g_key, FSM_KEY_MAX + 1);
    check_packed_invalid(&m, "forget key 257");
}
END_TEST

START_TEST(decode_config_over_limit_invalid)
{
    Once__Log__Command m;
    Once__Log__Bootstrap bs;
    Once__Log__Settings st;
    Once__Log__Member mem[FSM_MEMBERS_MAX + 1];
    Once__Log__Member *memp[FSM_MEMBERS_MAX + 1];
    Once__Log__SetMember sm;
    char addr_ok[FSM_ADDR_MAX + 1], addr_long[FSM_ADDR_MAX + 2];
    uint8_t cid[FSM_CLUSTER_ID_LEN + 1], hk[FSM_HASH_KEY_LEN + 1];

    memset(addr_ok, 'x', FSM_ADDR_MAX);
    addr_ok[FSM_ADDR_MAX] = '\0';
    memset(addr_long, 'y', FSM_ADDR_MAX + 1);
    addr_long[FSM_ADDR_MAX + 1] = '\0';
    fill_pattern(cid, sizeof cid, 1);
    fill_pattern(hk, sizeof hk, 2);
    once__log__settings__init(&st);
    for (size_t i = 0; i <= FSM_MEMBERS_MAX; i++) {
        once__log__member__init(&mem[i]);
        mem[i].id = i + 1;
        mem[i].raft_addr = addr_ok;
        mem[i].client_addr = addr_ok;
        mem[i].role = ONCE__LOG__ROLE__ROLE_VOTER;
        memp[i] = &mem[i];
    }
    once__log__bootstrap__init(&bs);
    bs.cluster_id = bin(cid, FSM_CLUSTER_ID_LEN);
    bs.hash_key = bin(hk, FSM_HASH_KEY_LEN);
    bs.group_id = 1;
    bs.settings = &st;
    bs.n_members = FSM_MEMBERS_MAX;
    bs.members = memp;
    once__log__command__init(&m);
    m.cmd_case = ONCE__LOG__COMMAND__CMD_BOOTSTRAP;
    m.bootstrap = &bs;
    check_packed_valid(&m, FSM_CMD_BOOTSTRAP, "bootstrap 64 members");
    bs.n_members = FSM_MEMBERS_MAX + 1;
    check_packed_invalid(&m, "bootstrap 65 members");
    bs.n_members = 1;
    bs.cluster_id = bin(cid, FSM_CLUSTER_ID_LEN + 1);
    check_packed_invalid(&m, "bootstrap cluster id 17");
    bs.cluster_id = bin(cid, FSM_CLUSTER_ID_LEN - 1);
    check_packed_invalid(&m, "bootstrap cluster id 15");
    bs.cluster_id = bin(cid, FSM_CLUSTER_ID_LEN);
    bs.hash_key = bin(hk, FSM_HASH_KEY_LEN + 1);
    check_packed_invalid(&m, "bootstrap hash key 17");
    bs.hash_key = bin(hk, 0);
    check_packed_invalid(&m, "bootstrap hash key missing");
    bs.hash_key = bin(hk, FSM_HASH_KEY_LEN);
    mem[0].raft_addr = addr_long;
    check_packed_invalid(&m, "bootstrap member raft addr 65");
    mem[0].raft_addr = addr_ok;
    mem[0].client_addr = addr_long;
    check_packed_invalid(&m, "bootstrap member client addr 65");
    mem[0].client_addr = addr_ok;
    mem[0].role = (Once__Log__Role)4;
    check_packed_invalid(&m, "bootstrap member role 4");
    mem[0].role = ONCE__LOG__ROLE__ROLE_VOTER;
    check_packed_valid(&m, FSM_CMD_BOOTSTRAP, "bootstrap restored");

    once__log__set_member__init(&sm);
    sm.member = &mem[1];
    m.cmd_case = ONCE__LOG__COMMAND__CMD_SET_MEMBER;
    m.set_member = &sm;
    check_packed_valid(&m, FSM_CMD_SET_MEMBER, "set member 64-byte addrs");
    mem[1].raft_addr = addr_long;
    check_packed_invalid(&m, "set member raft addr 65");
    mem[1].raft_addr = addr_ok;
    mem[1].client_addr = addr_long;
    check_packed_invalid(&m, "set member client addr 65");
    mem[1].client_addr = addr_ok;
    mem[1].role = (Once__Log__Role)77;
    check_packed_invalid(&m, "set member role 77");
}
END_TEST

/* --- garbage and truncation ----------------------------------------------- */

/* Every proper prefix of an encoded command is invalid: the command is one
 * length-delimited field, so a cut anywhere breaks it (or leaves nothing). */
START_TEST(decode_truncated_invalid)
{
    struct command_decoder d;
    struct fsm_cmd c[11];
    struct fsm_bootstrap *b = malloc(sizeof *b);
    char what[96];

    ck_assert_ptr_nonnull(b);
    fill_globals();
    make_claim(&c[0], FSM_KIND_NONCE);
    make_claim(&c[1], FSM_KIND_IDEMPOTENT);
    make_complete(&c[2]);
    c[2].u.complete.result_len = 300;
    make_release(&c[3]);
    make_ident(&c[4], FSM_CMD_LOOKUP);
    make_ident(&c[5], FSM_CMD_FORGET);
    make_bootstrap(&c[6], b, 2);
    memset(&c[7], 0, sizeof c[7]);
    c[7].type = FSM_CMD_SET_SETTINGS;
    make_settings(&c[7].u.settings);
    memset(&c[8], 0, sizeof c[8]);
    c[8].type = FSM_CMD_SET_MEMBER;
    make_member(&c[8].u.member, 77);
    memset(&c[9], 0, sizeof c[9]);
    c[9].type = FSM_CMD_RETIRE_MEMBER;
    c[9].u.retire_id = 77;
    memset(&c[10], 0, sizeof c[10]);
    c[10].type = FSM_CMD_SET_SCHEMA;
    c[10].u.schema_version = 1;

    command_decoder_init(&d);
    for (int i = 0; i < 11; i++) {
        uint8_t *buf;
        size_t len;

        ck_assert_int_eq(command_encode(&c[i], &buf, &len), 0);
        for (size_t n = 0; n < len; n++) {
            /* A fresh copy of exactly n bytes so ASan sees any overread. */
            uint8_t *p = malloc(n ? n : 1);

            ck_assert_ptr_nonnull(p);
            memcpy(p, buf, n);
            snprintf(what, sizeof what, "cmd type %d cut to %zu of %zu",
                     (int)c[i].type, n, len);
            check_decodes_invalid(&d, p, n, what);
            free(p);
        }
        free(buf);
    }
    command_decoder_close(&d);
    free(b);
}
END_TEST

START_TEST(decode_garbage_no_crash)
{
    struct command_decoder d;
    struct fsm_cmd out;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint8_t ff[64];
    /* Field 1 (claim) says 200 bytes follow; 2 do. */
    static const uint8_t short_len[] = {0x0a, 0xc8, 0x01, 0x0a, 0x00};
    /* Field 11: not in the oneof. */
    static const uint8_t unknown_only[] = {0x58, 0x01};
    /* Field 1 with wire type 0 (varint) instead of length-delimited. */
    static const uint8_t wrong_wire[] = {0x08, 0x01};
    /* A 10-byte varint that overflows 64 bits. */
    static const uint8_t long_varint[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0x7f};

    memset(ff, 0xff, sizeof ff);
    command_decoder_init(&d);
    check_decodes_invalid(&d, (const uint8_t *)"", 0, "empty command");
    check_decodes_invalid(&d, ff, sizeof ff, "0xff bytes");
    check_decodes_invalid(&d, short_len, sizeof short_len, "short length");
    check_decodes_invalid(&d, unknown_only, sizeof unknown_only,
                          "only an unknown field");
    check_decodes_invalid(&d, wrong_wire, sizeof wrong_wire, "wrong wire type");
    check_decodes_invalid(&d, long_varint, sizeof long_varint,
                          "overlong varint");
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)(rng_next(&seed) % 96);
        uint8_t *p = malloc(len ? len : 1);

        ck_assert_ptr_nonnull(p);
        for (size_t j = 0; j < len; j++) {
            p[j] = (uint8_t)rng_next(&seed);
        }
        /* Bias towards plausible starts: a valid oneof tag. */
        if (len > 0 && (i & 1)) {
            p[0] = (uint8_t)(((1 + rng_next(&seed) % 10) << 3) | 2);
        }
        memset(&out, 0, sizeof out);
        command_decode(&d, p, len, &out);
        ck_assert_msg(out.type <= FSM_CMD_SET_SCHEMA, "seed iter %d: type %d",
                      i, (int)out.type);
        if (out.type == FSM_CMD_INVALID) {
            ck_assert_msg(out.invalid_reason != NULL,
                          "iter %d: invalid without reason", i);
        }
        free(p);
    }
    command_decoder_close(&d);
}
END_TEST

/* Every command of a batch decodes on its own: garbage in slot 1 gets
 * INVALID_ARGUMENT alone and the rest of the batch applies. */
struct outcomes
{
    size_t n;
    enum fsm_outcome o[16];
    const char *reason[16];
};

static void outcomes_cb(void *arg, size_t i, const struct fsm_result *r)
{
    struct outcomes *oc = arg;

    ck_assert_uint_eq(i, oc->n);
    if (oc->n < 16) {
        oc->o[oc->n] = r->outcome;
        oc->reason[oc->n] = r->reason;
    }
    oc->n++;
}

static void bootstrap_fsm(struct fsm *f)
{
    struct fsm_cmd c;
    struct fsm_bootstrap *b = malloc(sizeof *b);
    struct outcomes oc = {0};

    ck_assert_ptr_nonnull(b);
    make_bootstrap(&c, b, 1);
    ck_assert_int_eq(fsm_apply_cmds(f, 1, FSM_SCHEMA_VERSION, 1000000, &c, 1,
                                    outcomes_cb, &oc),
                     0);
    ck_assert_uint_eq(oc.n, 1);
    ck_assert_int_eq(oc.o[0], FSM_OK);
    free(b);
}

START_TEST(apply_invalid_command_alone)
{
    struct fsm *f = fsm_new();
    struct fsm_cmd c0, c2;
    uint8_t *cmd[4], *batch;
    size_t len[4], batch_len;
    struct outcomes oc = {0};
    static const uint8_t garbage[] = {0x0a, 0x05, 0x01};
    uint8_t over[FSM_SCOPE_MAX + 8];
    Once__Log__Command m;
    Once__Log__Lookup lo;

    ck_assert_ptr_nonnull(f);
    fill_globals();
    bootstrap_fsm(f);
    make_claim(&c0, FSM_KIND_NONCE);
    c0.u.claim.ts_ms = 1000000;
    make_claim(&c2, FSM_KIND_IDEMPOTENT);
    c2.u.claim.ts_ms = 1000000;
    c2.u.claim.key_len = 18;
    ck_assert_int_eq(command_encode(&c0, &cmd[0], &len[0]), 0);
    cmd[1] = (uint8_t *)garbage;
    len[1] = sizeof garbage;
    ck_assert_int_eq(command_encode(&c2, &cmd[2], &len[2]), 0);
    /* Slot 3: a lookup whose scope is over the limit. */
    memset(over, 's', sizeof over);
    once__log__lookup__init(&lo);
    lo.scope = bin(over, FSM_SCOPE_MAX + 1);
    lo.key = bin(over, 1);
    once__log__command__init(&m);
    m.cmd_case = ONCE__LOG__COMMAND__CMD_LOOKUP;
    m.lookup = &lo;
    cmd[3] = pack_command(&m, &len[3]);
    ck_assert_int_eq(command_encode_batch(FSM_SCHEMA_VERSION, 1000500,
                                          (const uint8_t *const *)cmd, len, 4,
                                          &batch, &batch_len),
                     0);
    ck_assert_int_eq(fsm_apply(f, 2, batch, batch_len, outcomes_cb, &oc), 0);
    ck_assert_uint_eq(oc.n, 4);
    ck_assert_int_eq(oc.o[0], FSM_ACCEPTED);
    ck_assert_int_eq(oc.o[1], FSM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(oc.reason[1]);
    ck_assert_int_eq(oc.o[2], FSM_ACCEPTED);
    ck_assert_int_eq(oc.o[3], FSM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(oc.reason[3]);
    ck_assert_uint_eq(fsm_n_records(f), 2);
    ck_assert_uint_eq(fsm_last_index(f), 2);
    ck_assert_uint_eq(fsm_now(f), 1000500);
    free(cmd[0]);
    free(cmd[2]);
    free(cmd[3]);
    free(batch);
    fsm_free(f);
}
END_TEST

/* --- batch envelope ------------------------------------------------------- */

START_TEST(batch_roundtrip)
{
    struct command_decoder d;
    struct command_batch cb;
    uint8_t *cmds[40], *batch;
    size_t lens[40], batch_len;
    uint64_t seed = 12345;

    for (int i = 0; i < 40; i++) {
        lens[i] = (size_t)(rng_next(&seed) % 300);
        if (i == 3) {
            lens[i] = 0; /* an empty command survives as empty */
        }
        cmds[i] = malloc(lens[i] + 1);
        ck_assert_ptr_nonnull(cmds[i]);
        for (size_t j = 0; j < lens[i]; j++) {
            cmds[i][j] = (uint8_t)rng_next(&seed);
        }
    }
    command_decoder_init(&d);
    for (size_t n = 0; n <= 40; n += 5) {
        uint64_t t = n == 0 ? 0 : UINT64_MAX - n;

        ck_assert_int_eq(command_encode_batch(FSM_SCHEMA_VERSION + (n == 40), t,
                                              (const uint8_t *const *)cmds,
                                              lens, n, &batch, &batch_len),
                         0);
        ck_assert_int_eq(command_decode_batch(&d, batch, batch_len, &cb), 0);
        ck_assert_uint_eq(cb.schema_version, FSM_SCHEMA_VERSION + (n == 40));
        ck_assert_uint_eq(cb.leader_time_ms, t);
        ck_assert_uint_eq(cb.n_commands, n);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(
                bytes_eq(cb.commands[i], cb.command_lens[i], cmds[i], lens[i]),
                "batch of %zu: command %zu differs", n, i);
        }
        /* Every prefix: either a clean error or a batch whose commands are
         * a prefix of the original ones. */
        for (size_t cut = 0; cut < batch_len; cut++) {
            uint8_t *p = malloc(cut ? cut : 1);
            int rv;

            ck_assert_ptr_nonnull(p);
            memcpy(p, batch, cut);
            rv = command_decode_batch(&d, p, cut, &cb);
            ck_assert_msg(rv == 0 || rv == FSM_E_MALFORMED,
                          "batch cut at %zu: rv %d", cut, rv);
            if (rv == 0) {
                ck_assert_uint_le(cb.n_commands, n);
                for (size_t i = 0; i < cb.n_commands; i++) {
                    ck_assert(bytes_eq(cb.commands[i], cb.command_lens[i],
                                       cmds[i], lens[i]));
                }
            }
            free(p);
        }
        free(batch);
    }
    command_decoder_close(&d);
    for (int i = 0; i < 40; i++) {
        free(cmds[i]);
    }
}
END_TEST

START_TEST(batch_garbage_no_crash)
{
    struct command_decoder d;
    struct command_batch cb;
    uint64_t seed = 777;
    static const uint8_t bad_len[] = {0x1a, 0xff, 0xff, 0x03, 0x00};

    command_decoder_init(&d);
    ck_assert_int_eq(command_decode_batch(&d, bad_len, sizeof bad_len, &cb),
                     FSM_E_MALFORMED);
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)(rng_next(&seed) % 64);
        uint8_t *p = malloc(len ? len : 1);
        int rv;

        ck_assert_ptr_nonnull(p);
        for (size_t j = 0; j < len; j++) {
            p[j] = (uint8_t)rng_next(&seed);
        }
        if (len > 0 && (i & 1)) {
            p[0] = 0x1a; /* field 3, length-delimited */
        }
        rv = command_decode_batch(&d, p, len, &cb);
        ck_assert_msg(rv == 0 || rv == FSM_E_MALFORMED, "iter %d: rv %d", i,
                      rv);
        if (rv == 0) {
            for (size_t k = 0; k < cb.n_commands; k++) {
                /* Borrowed from the input or the arena: readable. */
                ck_assert_uint_le(cb.command_lens[k], len);
                if (cb.command_lens[k] > 0) {
                    volatile uint8_t x = cb.commands[k][cb.command_lens[k] - 1];
                    (void)x;
                }
            }
        }
        free(p);
    }
    command_decoder_close(&d);
}
END_TEST

START_TEST(batch_commands_limit)
{
    struct command_decoder d;
    struct command_batch cb;
    const size_t n = FSM_BATCH_COMMANDS_MAX + 1;
    const uint8_t **cmds = malloc(n * sizeof *cmds);
    size_t *lens = malloc(n * sizeof *lens);
    ProtobufCBinaryData *pbc = malloc(n * sizeof *pbc);
    static const uint8_t one[1] = {0};
    uint8_t *batch = NULL;
    size_t batch_len = 0;
    Once__Log__Batch mb;

    ck_assert(cmds != NULL && lens != NULL && pbc != NULL);
    for (size_t i = 0; i < n; i++) {
        cmds[i] = one;
        lens[i] = 0;
        pbc[i] = bin(one, 0);
    }
    command_decoder_init(&d);
    /* At the limit: fine both ways. */
    ck_assert_int_eq(command_encode_batch(FSM_SCHEMA_VERSION, 5,
                                          (const uint8_t *const *)cmds, lens,
                                          n - 1, &batch, &batch_len),
                     0);
    ck_assert_int_eq(command_decode_batch(&d, batch, batch_len, &cb), 0);
    ck_assert_uint_eq(cb.n_commands, FSM_BATCH_COMMANDS_MAX);
    free(batch);
    batch = NULL;
    /* One over: the encoder refuses. */
    ck_assert_int_eq(command_encode_batch(FSM_SCHEMA_VERSION, 5,
                                          (const uint8_t *const *)cmds, lens, n,
                                          &batch, &batch_len),
                     FSM_E_TOOBIG);
    free(batch);
    /* Hand-built one over: the decoder refuses. */
    once__log__batch__init(&mb);
    mb.schema_version = FSM_SCHEMA_VERSION;
    mb.leader_time_ms = 5;
    mb.n_commands = n;
    mb.commands = pbc;
    batch_len = once__log__batch__get_packed_size(&mb);
    batch = malloc(batch_len);
    ck_assert_ptr_nonnull(batch);
    once__log__batch__pack(&mb, batch);
    ck_assert_int_eq(command_decode_batch(&d, batch, batch_len, &cb),
                     FSM_E_TOOBIG);
    free(batch);
    command_decoder_close(&d);
    free(cmds);
    free(lens);
    free(pbc);
}
END_TEST

START_TEST(batch_bytes_limit)
{
    struct command_decoder d;
    struct command_batch cb;
    struct fsm *f;
    Once__Log__Batch mb;
    ProtobufCBinaryData one;
    uint8_t *big = malloc(FSM_BATCH_MAX + 16);
    const uint8_t *cmds[1];
    size_t lens[1], l, packed, batch_len, snap_len;
    uint8_t *batch = NULL, *snap_before, *snap_after;
    int rv;

    ck_assert_ptr_nonnull(big);
    memset(big, 0x42, FSM_BATCH_MAX + 16);
    once__log__batch__init(&mb);
    mb.schema_version = FSM_SCHEMA_VERSION;
    mb.leader_time_ms = 123456789;
    mb.n_commands = 1;
    mb.commands = &one;
    /* Find the command length that makes the envelope exactly
     * FSM_BATCH_MAX bytes. */
    l = FSM_BATCH_MAX;
    for (;;) {
        one = bin(big, l);
        packed = once__log__batch__get_packed_size(&mb);
        if (packed <= FSM_BATCH_MAX) {
            break;
        }
        l -= packed - FSM_BATCH_MAX;
    }
    ck_assert_uint_eq(packed, FSM_BATCH_MAX);

    command_decoder_init(&d);
    cmds[0] = big;
    lens[0] = l;
    rv = command_encode_batch(FSM_SCHEMA_VERSION, 123456789, cmds, lens, 1,
                              &batch, &batch_len);
    ck_assert_msg(rv == 0, "batch of exactly FSM_BATCH_MAX: %d", rv);
    ck_assert_uint_eq(batch_len, FSM_BATCH_MAX);
    ck_assert_int_eq(command_decode_batch(&d, batch, batch_len, &cb), 0);
    ck_assert_uint_eq(cb.n_commands, 1);
    ck_assert_uint_eq(cb.command_lens[0], l);
    free(batch);
    batch = NULL;

    lens[0] = l + 1;
    rv = command_encode_batch(FSM_SCHEMA_VERSION, 123456789, cmds, lens, 1,
                              &batch, &batch_len);
    ck_assert_msg(rv == FSM_E_TOOBIG, "batch of FSM_BATCH_MAX + 1: %d", rv);
    free(batch);

    one = bin(big, l + 1);
    batch_len = once__log__batch__get_packed_size(&mb);
    ck_assert_uint_eq(batch_len, FSM_BATCH_MAX + 1);
    batch = malloc(batch_len);
    ck_assert_ptr_nonnull(batch);
    once__log__batch__pack(&mb, batch);
    ck_assert_int_eq(command_decode_batch(&d, batch, batch_len, &cb),
                     FSM_E_TOOBIG);

    /* fsm_apply skips it: the header promises MALFORMED for an envelope it
     * cannot decode, and nothing changes. */
    f = fsm_new();
    ck_assert_ptr_nonnull(f);
    fill_globals();
    bootstrap_fsm(f);
    snap_len = fsm_snapshot_size(f);
    snap_before = malloc(snap_len);
    ck_assert_ptr_nonnull(snap_before);
    fsm_snapshot_write(f, snap_before, snap_len);
    rv = fsm_apply(f, 2, batch, batch_len, NULL, NULL);
    ck_assert_msg(rv == FSM_E_MALFORMED, "apply of an oversized batch: %d (%s)",
                  rv, fsm_strerror(rv));
    ck_assert_uint_eq(fsm_snapshot_size(f), snap_len);
    snap_after = malloc(snap_len);
    ck_assert_ptr_nonnull(snap_after);
    fsm_snapshot_write(f, snap_after, snap_len);
    ck_assert(memcmp(snap_before, snap_after, snap_len) == 0);
    ck_assert_uint_eq(fsm_now(f), 1000000);
    free(snap_before);
    free(snap_after);
    fsm_free(f);
    free(batch);
    command_decoder_close(&d);
    free(big);
}
END_TEST

/* Envelope versions: 0 is MALFORMED and newer is SCHEMA; neither changes
 * anything (not even fsm_now). */
START_TEST(batch_schema_versions)
{
    struct fsm *f = fsm_new();
    struct fsm_cmd c;
    uint8_t *cmd, *batch;
    size_t len, batch_len;
    struct outcomes oc = {0};

    ck_assert_ptr_nonnull(f);
    fill_globals();
    bootstrap_fsm(f);
    make_claim(&c, FSM_KIND_NONCE);
    c.u.claim.ts_ms = 1000000;
    ck_assert_int_eq(command_encode(&c, &cmd, &len), 0);

    ck_assert_int_eq(
        command_encode_batch(0, 2000000, (const uint8_t *const *)&cmd, &len, 1,
                             &batch, &batch_len),
        0);
    ck_assert_int_eq(fsm_apply(f, 2, batch, batch_len, outcomes_cb, &oc),
                     FSM_E_MALFORMED);
    ck_assert_uint_eq(oc.n, 0);
    ck_assert_uint_eq(fsm_now(f), 1000000);
    ck_assert_uint_eq(fsm_n_records(f), 0);
    free(batch);

    ck_assert_int_eq(command_encode_batch(FSM_SCHEMA_VERSION + 1, 2000000,
                                          (const uint8_t *const *)&cmd, &len, 1,
                                          &batch, &batch_len),
                     0);
    ck_assert_int_eq(fsm_apply(f, 2, batch, batch_len, outcomes_cb, &oc),
                     FSM_E_SCHEMA);
    ck_assert_uint_eq(oc.n, 0);
    ck_assert_uint_eq(fsm_now(f), 1000000);
    ck_assert_uint_eq(fsm_n_records(f), 0);
    free(batch);

    ck_assert_int_eq(command_encode_batch(FSM_SCHEMA_VERSION, 1000001,
                                          (const uint8_t *const *)&cmd, &len, 1,
                                          &batch, &batch_len),
                     0);
    ck_assert_int_eq(fsm_apply(f, 2, batch, batch_len, outcomes_cb, &oc), 0);
    ck_assert_uint_eq(oc.n, 1);
    ck_assert_int_eq(oc.o[0], FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_records(f), 1);
    free(batch);
    free(cmd);
    fsm_free(f);
}
END_TEST

Suite *command_suite(void)
{
    Suite *s = suite_create("command");
    TCase *tc;

    tc = tcase_create("roundtrip");
    tcase_add_test(tc, roundtrip_claim_nonce);
    tcase_add_test(tc, claim_into_matches_encode);
    tcase_add_test(tc, roundtrip_claim_idempotent);
    tcase_add_test(tc, roundtrip_complete);
    tcase_add_test(tc, roundtrip_release);
    tcase_add_test(tc, roundtrip_lookup_forget);
    tcase_add_test(tc, roundtrip_bootstrap);
    tcase_add_test(tc, roundtrip_config);
    tcase_add_test(tc, decoder_reuse);
    suite_add_tcase(s, tc);

    tc = tcase_create("limits");
    tcase_add_test(tc, encode_limits_at_edge);
    tcase_add_test(tc, encode_over_limit_toobig);
    tcase_add_test(tc, decode_over_limit_invalid);
    tcase_add_test(tc, decode_config_over_limit_invalid);
    suite_add_tcase(s, tc);

    tc = tcase_create("garbage");
    tcase_add_test(tc, decode_truncated_invalid);
    tcase_add_test(tc, decode_garbage_no_crash);
    tcase_add_test(tc, apply_invalid_command_alone);
    suite_add_tcase(s, tc);

    tc = tcase_create("batch");
    tcase_add_test(tc, batch_roundtrip);
    tcase_add_test(tc, batch_garbage_no_crash);
    tcase_add_test(tc, batch_commands_limit);
    tcase_add_test(tc, batch_bytes_limit);
    tcase_add_test(tc, batch_schema_versions);
    suite_add_tcase(s, tc);
    return s;
}
