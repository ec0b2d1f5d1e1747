#include "fsm/command.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/pbwire.h"
#include "once_log.pb-c.h"

void command_decoder_init(struct command_decoder *d)
{
    arena_init(&d->batch_arena);
    arena_init(&d->cmd_arena);
    d->ptrs = NULL;
    d->lens = NULL;
    d->cap = 0;
}

void command_decoder_close(struct command_decoder *d)
{
    arena_close(&d->batch_arena);
    arena_close(&d->cmd_arena);
    free(d->ptrs);
    free(d->lens);
    d->ptrs = NULL;
    d->lens = NULL;
    d->cap = 0;
}

/* Room for @n command pointers and lengths in @d. */
static int reserve_commands(struct command_decoder *d, size_t n)
{
    size_t cap;
    const uint8_t **ptrs;
    size_t *lens;

    if (n <= d->cap) {
        return 0;
    }
    cap = n < 256 ? 256 : n;
    ptrs = realloc(d->ptrs, cap * sizeof *ptrs);
    if (ptrs == NULL) {
        return -ENOMEM;
    }
    d->ptrs = ptrs;
    lens = realloc(d->lens, cap * sizeof *lens);
    if (lens == NULL) {
        return -ENOMEM;
    }
    d->lens = lens;
    d->cap = cap;
    return 0;
}

/* Field numbers of proto/once_log.proto's Batch (the encoder's too). */
enum {
    BATCH_SCHEMA_VERSION = 1,
    BATCH_LEADER_TIME_MS = 2,
    BATCH_COMMANDS = 3,
};

int command_read_batch(struct command_decoder *d,
                       const uint8_t *buf,
                       size_t len,
                       struct command_batch *out)
{
    uint64_t schema = 0, stamp = 0, v;
    const uint8_t *data;
    uint32_t number;
    unsigned wire;
    bool seen_schema = false, seen_stamp = false;
    size_t n = 0, at, used;

    /* One pass; the arrays grow by doubling (kept across batches). */
    for (at = 0; at < len; at += used) {
        used = pbr_field(buf + at, len - at, &number, &wire, &v, &data);
        if (used == 0) {
            return 1;
        }
        if (number == BATCH_COMMANDS && wire == PBW_LEN) {
            if (n == FSM_BATCH_COMMANDS_MAX) {
                return 1;
            }
            if (n == d->cap && reserve_commands(d, 2 * n + 1) != 0) {
                return -ENOMEM;
            }
            d->ptrs[n] = data;
            d->lens[n] = (size_t)v;
            n++;
        } else if (number == BATCH_SCHEMA_VERSION && wire == PBW_VARINT &&
                   !seen_schema && v <= UINT32_MAX) {
            seen_schema = true;
            schema = v;
        } else if (number == BATCH_LEADER_TIME_MS && wire == PBW_VARINT &&
                   !seen_stamp) {
            seen_stamp = true;
            stamp = v;
        } else {
            return 1; /* unknown, repeated, or a type protobuf-c widens */
        }
    }
    out->schema_version = (uint32_t)schema;
    out->leader_time_ms = stamp;
    out->n_commands = n;
    out->commands = d->ptrs;
    out->command_lens = d->lens;
    return 0;
}

int command_decode_batch(struct command_decoder *d,
                         const uint8_t *buf,
                         size_t len,
                         struct command_batch *out)
{
    Once__Log__Batch *b;
    int rv;

    if (len > FSM_BATCH_MAX) {
        return FSM_E_TOOBIG;
    }
    /* Every entry the leader writes is read by hand (command.h); protobuf-c
     * reads what the reader declines, with the same outcome. */
    rv = command_read_batch(d, buf, len, out);
    if (rv <= 0) {
        return rv;
    }
    arena_reset(&d->batch_arena);
    b = once__log__batch__unpack(&d->batch_arena.pb, len, buf);
    if (b == NULL) {
        return FSM_E_MALFORMED;
    }
    if (b->n_commands > FSM_BATCH_COMMANDS_MAX) {
        return FSM_E_TOOBIG;
    }
    if (reserve_commands(d, b->n_commands) != 0) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < b->n_commands; i++) {
        d->ptrs[i] = b->commands[i].data;
        d->lens[i] = b->commands[i].len;
    }
    out->schema_version = b->schema_version;
    out->leader_time_ms = b->leader_time_ms;
    out->n_commands = b->n_commands;
    out->commands = d->ptrs;
    out->command_lens = d->lens;
    return 0;
}

void command_decoder_reset(struct command_decoder *d)
{
    arena_reset(&d->cmd_arena);
}

/* ------------------------------------------------------------------------
 * Decoding: protobuf message -> struct fsm_cmd, with every bound checked.
 * ---------------------------------------------------------------------- */

#define INVALID(out, why)              \
    do {                               \
        (out)->type = FSM_CMD_INVALID; \
        (out)->invalid_reason = (why); \
        return;                        \
    } while (0)

static const char *ident_bounds(const ProtobufCBinaryData *scope,
                                const ProtobufCBinaryData *key)
{
    return fsm_check_ident(scope->len, key->len);
}

static void token_from_pb(const Once__Log__OwnerToken *t, struct fsm_token *out)
{
    if (t == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    out->group_id = t->group_id;
    out->index = t->index;
    out->slot = t->slot;
}

static void decode_claim(const Once__Log__Claim *m, struct fsm_cmd *out)
{
    struct fsm_claim *c = &out->u.claim;
    const char *why = ident_bounds(&m->scope, &m->key);

    if (why != NULL) {
        INVALID(out, why);
    }
    if (m->request_id.len != FSM_REQUEST_ID_LEN) {
        INVALID(out, "request id must be 16 bytes");
    }
    if (m->execution_id.len > FSM_EXECUTION_ID_MAX) {
        INVALID(out, "execution id must be at most 128 bytes");
    }
    if (m->payload_hash.len > FSM_PAYLOAD_HASH_MAX) {
        INVALID(out, "payload hash must be at most 64 bytes");
    }
    switch (m->kind) {
        case ONCE__LOG__KIND__KIND_NONCE:
            c->kind = FSM_KIND_NONCE;
            break;
        case ONCE__LOG__KIND__KIND_IDEMPOTENT:
            c->kind = FSM_KIND_IDEMPOTENT;
            break;
        default:
            INVALID(out, "kind must be NONCE or IDEMPOTENT");
    }
    out->type = FSM_CMD_CLAIM;
    c->scope = m->scope.data;
    c->scope_len = m->scope.len;
    c->key = m->key.data;
    c->key_len = m->key.len;
    memcpy(c->request_id, m->request_id.data, FSM_REQUEST_ID_LEN);
    c->execution_id = m->execution_id.data;
    c->execution_id_len = m->execution_id.len;
    c->ttl_ms = m->ttl_ms;
    c->has_ts = m->has_ts;
    c->ts_ms = m->ts_ms;
    c->window_ms = m->window_ms;
    c->payload_hash = m->payload_hash.data;
    c->payload_hash_len = m->payload_hash.len;
    c->lease_ms = m->lease_ms;
    /* Range checked at apply, after the schema rule: a schema-2 state
     * ignores both fields, whatever they hold. */
    c->max_uses = m->max_uses;
    c->sliding = m->sliding;
}

static bool settings_from_pb(const Once__Log__Settings *m,
                             struct fsm_settings *s)
{
    if (m == NULL) {
        return false;
    }
    s->max_window_ms = m->max_window_ms;
    s->max_skew_ms = m->max_skew_ms;
    s->max_ttl_ms = m->max_ttl_ms;
    s->max_lease_ms = m->max_lease_ms;
    s->max_records = m->max_records;
    s->max_bytes = m->max_bytes;
    return true;
}

static const char *member_from_pb(const Once__Log__Member *m,
                                  struct fsm_member *out)
{
    size_t rl, cl;

    if (m == NULL) {
        return "member missing";
    }
    rl = strlen(m->raft_addr);
    cl = strlen(m->client_addr);
    if (rl < 1 || rl > FSM_ADDR_MAX || cl < 1 || cl > FSM_ADDR_MAX) {
        return "member addresses must be 1..64 bytes";
    }
    memset(out, 0, sizeof *out);
    out->id = m->id;
    memcpy(out->raft_addr, m->raft_addr, rl);
    memcpy(out->client_addr, m->client_addr, cl);
    switch (m->role) {
        case ONCE__LOG__ROLE__ROLE_VOTER:
            out->role = FSM_ROLE_VOTER;
            break;
        case ONCE__LOG__ROLE__ROLE_STANDBY:
            out->role = FSM_ROLE_STANDBY;
            break;
        case ONCE__LOG__ROLE__ROLE_SPARE:
            out->role = FSM_ROLE_SPARE;
            break;
        default:
            return "member role must be voter, standby or spare";
    }
    return NULL;
}

static void decode_bootstrap(struct command_decoder *d,
                             const Once__Log__Bootstrap *m,
                             struct fsm_cmd *out)
{
    struct fsm_bootstrap *b;
    const char *why;

    if (m->cluster_id.len != FSM_CLUSTER_ID_LEN) {
        INVALID(out, "cluster id must be 16 bytes");
    }
    if (m->hash_key.len != FSM_HASH_KEY_LEN) {
        INVALID(out, "hash key must be 16 bytes");
    }
    if (m->n_members > FSM_MEMBERS_MAX) {
        INVALID(out, "at most 64 members");
    }
    b = d->cmd_arena.pb.alloc(d->cmd_arena.pb.allocator_data, sizeof *b);
    memset(b, 0, sizeof *b);
    memcpy(b->cluster_id, m->cluster_id.data, FSM_CLUSTER_ID_LEN);
    memcpy(b->hash_key, m->hash_key.data, FSM_HASH_KEY_LEN);
    b->group_id = m->group_id;
    (void)settings_from_pb(m->settings, &b->settings); /* absent: defaults */
    b->n_members = m->n_members;
    for (size_t i = 0; i < m->n_members; i++) {
        why = member_from_pb(m->members[i], &b->members[i]);
        if (why != NULL) {
            INVALID(out, why);
        }
    }
    out->type = FSM_CMD_BOOTSTRAP;
    out->u.bootstrap = b;
}

/* A Command holding one Claim, every claim of the log, is read by
 * common/pbwire.h's reader straight into a Once__Log__Claim (its bytes
 * borrowed from @buf), several times cheaper than protobuf-c's unpacker;
 * decode_claim then checks it as any other. The reader declines what it
 * cannot decode exactly as protobuf-c does (unknown or repeated fields,
 * wrong wire types, values a type would truncate, malformed bytes), and
 * those commands are unpacked by protobuf-c as before
 * (tests/fuzz/fuzz_codec.c compares the two). */
#define F(kind, member)                            \
    {                                              \
        (kind), offsetof(Once__Log__Claim, member) \
    }
static const struct pbr_field claim_fields[] = {
    F(PBR_BYTES, scope),        F(PBR_BYTES, key),    F(PBR_BYTES, request_id),
    F(PBR_BYTES, execution_id), F(PBR_ENUM, kind),    F(PBR_U64, ttl_ms),
    F(PBR_BOOL, has_ts),        F(PBR_U64, ts_ms),    F(PBR_U64, window_ms),
    F(PBR_BYTES, payload_hash), F(PBR_U64, lease_ms), F(PBR_U32, max_uses),
    F(PBR_BOOL, sliding),
};
#undef F
const struct pbr_spec command_claim_pbr_spec = {
    claim_fields, sizeof claim_fields / sizeof claim_fields[0]};

static bool decode_claim_fast(const uint8_t *buf,
                              size_t len,
                              struct fsm_cmd *out)
{
    Once__Log__Claim m;
    const uint8_t *inner;
    size_t inner_len;

    if (!pbr_only_field(buf, len, ONCE__LOG__COMMAND__CMD_CLAIM, &inner,
                        &inner_len)) {
        return false;
    }
    once__log__claim__init(&m);
    if (!pbr_parse(&command_claim_pbr_spec, inner, inner_len, &m)) {
        return false;
    }
    decode_claim(&m, out);
    return true;
}

void command_decode(struct command_decoder *d,
                    const uint8_t *buf,
                    size_t len,
                    struct fsm_cmd *out)
{
    Once__Log__Command *m;
    const char *why;

    memset(out, 0, sizeof *out);
    if (decode_claim_fast(buf, len, out)) {
        return; /* (it writes @out only when it decodes) */
    }
    m = once__log__command__unpack(&d->cmd_arena.pb, len, buf);
    if (m == NULL) {
        INVALID(out, "command does not decode");
    }
    switch (m->cmd_case) {
        case ONCE__LOG__COMMAND__CMD_CLAIM:
            decode_claim(m->claim, out);
            return;
        case ONCE__LOG__COMMAND__CMD_COMPLETE: {
            const Once__Log__Complete *c = m->complete;
            why = ident_bounds(&c->scope, &c->key);
            if (why != NULL) {
                INVALID(out, why);
            }
            if (c->result.len > FSM_RESULT_MAX) {
                INVALID(out, "result must be at most 64 KiB");
            }
            out->type = FSM_CMD_COMPLETE;
            out->u.complete.scope = c->scope.data;
            out->u.complete.scope_len = c->scope.len;
            out->u.complete.key = c->key.data;
            out->u.complete.key_len = c->key.len;
            token_from_pb(c->owner_token, &out->u.complete.owner_token);
            out->u.complete.result = c->result.data;
            out->u.complete.result_len = c->result.len;
            return;
        }
        case ONCE__LOG__COMMAND__CMD_RELEASE: {
            const Once__Log__Release *c = m->release;
            why = ident_bounds(&c->scope, &c->key);
            if (why != NULL) {
                INVALID(out, why);
            }
            if (c->error.len > FSM_ERROR_MAX) {
                INVALID(out, "error must be at most 1 KiB");
            }
            out->type = FSM_CMD_RELEASE;
            out->u.release.scope = c->scope.data;
            out->u.release.scope_len = c->scope.len;
            out->u.release.key = c->key.data;
            out->u.release.key_len = c->key.len;
            token_from_pb(c->owner_token, &out->u.release.owner_token);
            out->u.release.terminal = c->terminal;
            out->u.release.error = c->error.data;
            out->u.release.error_len = c->error.len;
            return;
        }
        case ONCE__LOG__COMMAND__CMD_LOOKUP:
        case ONCE__LOG__COMMAND__CMD_FORGET: {
            bool lookup = m->cmd_case == ONCE__LOG__COMMAND__CMD_LOOKUP;
            const ProtobufCBinaryData *scope =
                lookup ? &m->lookup->scope : &m->forget->scope;
            const ProtobufCBinaryData *key =
                lookup ? &m->lookup->key : &m->forget->key;
            why = ident_bounds(scope, key);
            if (why != NULL) {
                INVALID(out, why);
            }
            out->type = lookup ? FSM_CMD_LOOKUP : FSM_CMD_FORGET;
            out->u.ident.scope = scope->data;
            out->u.ident.scope_len = scope->len;
            out->u.ident.key = key->data;
            out->u.ident.key_len = key->len;
            return;
        }
        case ONCE__LOG__COMMAND__CMD_BOOTSTRAP:
            decode_bootstrap(d, m->bootstrap, out);
            return;
        case ONCE__LOG__COMMAND__CMD_SET_SETTINGS:
            if (!settings_from_pb(m->set_settings->settings,
                                  &out->u.settings)) {
                INVALID(out, "settings missing");
            }
            out->type = FSM_CMD_SET_SETTINGS;
            return;
        case ONCE__LOG__COMMAND__CMD_SET_MEMBER:
            why = member_from_pb(m->set_member->member, &out->u.member);
            if (why != NULL) {
                INVALID(out, why);
            }
            out->type = FSM_CMD_SET_MEMBER;
            return;
        case ONCE__LOG__COMMAND__CMD_RETIRE_MEMBER:
            out->type = FSM_CMD_RETIRE_MEMBER;
            out->u.retire_id = m->retire_member->id;
            return;
        case ONCE__LOG__COMMAND__CMD_SET_SCHEMA:
            out->type = FSM_CMD_SET_SCHEMA;
            out->u.schema_version = m->set_schema->version;
            return;
        case ONCE__LOG__COMMAND__CMD_QUOTA_SET: {
            const Once__Log__QuotaSet *q = m->quota_set;
            /* The pattern's syntax is checked at apply, on both paths. */
            if (q->pattern.len < 1 || q->pattern.len > FSM_PATTERN_MAX) {
                INVALID(out, "quota pattern must be 1..129 bytes");
            }
            out->type = FSM_CMD_QUOTA_SET;
            out->u.quota.pattern = q->pattern.data;
            out->u.quota.pattern_len = q->pattern.len;
            out->u.quota.max_records = q->max_records;
            out->u.quota.max_bytes = q->max_bytes;
            out->u.quota.remove = q->remove;
            return;
        }
        default:
            INVALID(out, "empty or unknown command");
    }
}

/* ------------------------------------------------------------------------
 * Encoding
 * ---------------------------------------------------------------------- */

static ProtobufCBinaryData bin(const uint8_t *p, size_t len)
{
    ProtobufCBinaryData b = {len, (uint8_t *)p};
    return b;
}

static int pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n > 0 ? n : 1);

    if (buf == NULL) {
        return -ENOMEM;
    }
    *len = protobuf_c_message_pack(m, buf);
    *out = buf;
    return 0;
}

static void settings_to_pb(const struct fsm_settings *s, Once__Log__Settings *m)
{
    once__log__settings__init(m);
    m->max_window_ms = s->max_window_ms;
    m->max_skew_ms = s->max_skew_ms;
    m->max_ttl_ms = s->max_ttl_ms;
    m->max_lease_ms = s->max_lease_ms;
    m->max_records = s->max_records;
    m->max_bytes = s->max_bytes;
}

static int member_to_pb(const struct fsm_member *s, Once__Log__Member *m)
{
    size_t rl = strnlen(s->raft_addr, sizeof s->raft_addr);
    size_t cl = strnlen(s->client_addr, sizeof s->client_addr);

    if (rl > FSM_ADDR_MAX || cl > FSM_ADDR_MAX) {
        return FSM_E_TOOBIG;
    }
    once__log__member__init(m);
    m->id = s->id;
    m->raft_addr = (char *)s->raft_addr;
    m->client_addr = (char *)s->client_addr;
    m->role = (Once__Log__Role)s->role;
    return 0;
}

static bool ident_too_big(size_t scope_len, size_t key_len)
{
    return scope_len > FSM_SCOPE_MAX || key_len > FSM_KEY_MAX;
}

static void token_to_pb(const struct fsm_token *t, Once__Log__OwnerToken *m)
{
    once__log__owner_token__init(m);
    m->group_id = t->group_id;
    m->index = t->index;
    m->slot = t->slot;
}

/* The protobuf messages command_encode builds on its stack: @cmd points
 * into them until pack() has copied them out. One command kind uses one
 * member of @u (and @token, @settings or the member arrays beside it). */
struct encoding
{
    Once__Log__Command cmd;
    union {
        Once__Log__Complete complete;
        Once__Log__Release release;
        Once__Log__Lookup lookup;
        Once__Log__Forget forget;
        Once__Log__Bootstrap boot;
        Once__Log__SetSettings set_settings;
        Once__Log__SetMember set_member;
        Once__Log__RetireMember retire;
        Once__Log__SetSchema schema;
        Once__Log__QuotaSet quota;
    } u;
    Once__Log__OwnerToken token;
    Once__Log__Settings settings;
    Once__Log__Member member;
    Once__Log__Member members[FSM_MEMBERS_MAX];
    Once__Log__Member *member_ptrs[FSM_MEMBERS_MAX];
};

static int encode_complete(const struct fsm_complete *c, struct encoding *e)
{
    Once__Log__Complete *m = &e->u.complete;

    if (ident_too_big(c->scope_len, c->key_len) ||
        c->result_len > FSM_RESULT_MAX) {
        return FSM_E_TOOBIG;
    }
    once__log__complete__init(m);
    m->scope = bin(c->scope, c->scope_len);
    m->key = bin(c->key, c->key_len);
    token_to_pb(&c->owner_token, &e->token);
    m->owner_token = &e->token;
    m->result = bin(c->result, c->result_len);
    e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_COMPLETE;
    e->cmd.complete = m;
    return 0;
}

static int encode_release(const struct fsm_release *c, struct encoding *e)
{
    Once__Log__Release *m = &e->u.release;

    if (ident_too_big(c->scope_len, c->key_len) ||
        c->error_len > FSM_ERROR_MAX) {
        return FSM_E_TOOBIG;
    }
    once__log__release__init(m);
    m->scope = bin(c->scope, c->scope_len);
    m->key = bin(c->key, c->key_len);
    token_to_pb(&c->owner_token, &e->token);
    m->owner_token = &e->token;
    m->terminal = c->terminal;
    m->error = bin(c->error, c->error_len);
    e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_RELEASE;
    e->cmd.release = m;
    return 0;
}

/* LOOKUP and FORGET: the same two fields in two message types. */
static int encode_ident(bool lookup,
                        const struct fsm_ident *c,
                        struct encoding *e)
{
    if (ident_too_big(c->scope_len, c->key_len)) {
        return FSM_E_TOOBIG;
    }
    if (lookup) {
        once__log__lookup__init(&e->u.lookup);
        e->u.lookup.scope = bin(c->scope, c->scope_len);
        e->u.lookup.key = bin(c->key, c->key_len);
        e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_LOOKUP;
        e->cmd.lookup = &e->u.lookup;
    } else {
        once__log__forget__init(&e->u.forget);
        e->u.forget.scope = bin(c->scope, c->scope_len);
        e->u.forget.key = bin(c->key, c->key_len);
        e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_FORGET;
        e->cmd.forget = &e->u.forget;
    }
    return 0;
}

static int encode_bootstrap(const struct fsm_bootstrap *b, struct encoding *e)
{
    Once__Log__Bootstrap *m = &e->u.boot;
    int rv;

    if (b->n_members > FSM_MEMBERS_MAX) {
        return FSM_E_TOOBIG;
    }
    once__log__bootstrap__init(m);
    m->cluster_id = bin(b->cluster_id, FSM_CLUSTER_ID_LEN);
    m->hash_key = bin(b->hash_key, FSM_HASH_KEY_LEN);
    m->group_id = b->group_id;
    settings_to_pb(&b->settings, &e->settings);
    m->settings = &e->settings;
    for (size_t i = 0; i < b->n_members; i++) {
        rv = member_to_pb(&b->members[i], &e->members[i]);
        if (rv != 0) {
            return rv;
        }
        e->member_ptrs[i] = &e->members[i];
    }
    m->n_members = b->n_members;
    m->members = e->member_ptrs;
    e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_BOOTSTRAP;
    e->cmd.bootstrap = m;
    return 0;
}

static int encode_set_member(const struct fsm_member *s, struct encoding *e)
{
    int rv;

    once__log__set_member__init(&e->u.set_member);
    rv = member_to_pb(s, &e->member);
    if (rv != 0) {
        return rv;
    }
    e->u.set_member.member = &e->member;
    e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_SET_MEMBER;
    e->cmd.set_member = &e->u.set_member;
    return 0;
}

/* The kinds without a size to check here: they cannot fail. */
static void encode_small(const struct fsm_cmd *c, struct encoding *e)
{
    switch (c->type) {
        case FSM_CMD_SET_SETTINGS:
            once__log__set_settings__init(&e->u.set_settings);
            settings_to_pb(&c->u.settings, &e->settings);
            e->u.set_settings.settings = &e->settings;
            e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_SET_SETTINGS;
            e->cmd.set_settings = &e->u.set_settings;
            break;
        case FSM_CMD_RETIRE_MEMBER:
            once__log__retire_member__init(&e->u.retire);
            e->u.retire.id = c->u.retire_id;
            e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_RETIRE_MEMBER;
            e->cmd.retire_member = &e->u.retire;
            break;
        case FSM_CMD_QUOTA_SET:
            once__log__quota_set__init(&e->u.quota);
            e->u.quota.pattern =
                bin(c->u.quota.pattern, c->u.quota.pattern_len);
            e->u.quota.max_records = c->u.quota.max_records;
            e->u.quota.max_bytes = c->u.quota.max_bytes;
            e->u.quota.remove = c->u.quota.remove;
            e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_QUOTA_SET;
            e->cmd.quota_set = &e->u.quota;
            break;
        default: /* FSM_CMD_SET_SCHEMA */
            once__log__set_schema__init(&e->u.schema);
            e->u.schema.version = c->u.schema_version;
            e->cmd.cmd_case = ONCE__LOG__COMMAND__CMD_SET_SCHEMA;
            e->cmd.set_schema = &e->u.schema;
            break;
    }
}

/* A claim, the one command of the hot path, is packed by hand
 * (common/pbwire.h) to the bytes protobuf-c would write for it
 * (tests/unit/test_codec.c compares both): Command { claim = 1 } around the
 * Claim's fields in number order. Its fields are struct fsm_claim's, so none
 * can be missed; test_codec.c checks the schema still has exactly these. */
enum {
    CMD_CLAIM = 1,
    CLAIM_SCOPE = 1,
    CLAIM_KEY = 2,
    CLAIM_REQUEST_ID = 3,
    CLAIM_EXECUTION_ID = 4,
    CLAIM_KIND = 5,
    CLAIM_TTL_MS = 6,
    CLAIM_HAS_TS = 7,
    CLAIM_TS_MS = 8,
    CLAIM_WINDOW_MS = 9,
    CLAIM_PAYLOAD_HASH = 10,
    CLAIM_LEASE_MS = 11,
    CLAIM_MAX_USES = 12,
    CLAIM_SLIDING = 13,
};

/* 1 means what 0 does: left out, so a single-use claim encodes as it did
 * before schema 3. */
static uint32_t wire_max_uses(const struct fsm_claim *c)
{
    return c->max_uses > 1 ? c->max_uses : 0;
}

static size_t claim_size(const struct fsm_claim *c)
{
    return pbw_size_len_opt(CLAIM_SCOPE, c->scope_len) +
           pbw_size_len_opt(CLAIM_KEY, c->key_len) +
           pbw_size_len_req(CLAIM_REQUEST_ID, FSM_REQUEST_ID_LEN) +
           pbw_size_len_opt(CLAIM_EXECUTION_ID, c->execution_id_len) +
           pbw_size_i32_opt(CLAIM_KIND, (int32_t)c->kind) +
           pbw_size_u64_opt(CLAIM_TTL_MS, c->ttl_ms) +
           pbw_size_u64_opt(CLAIM_HAS_TS, c->has_ts) +
           pbw_size_u64_opt(CLAIM_TS_MS, c->ts_ms) +
           pbw_size_u64_opt(CLAIM_WINDOW_MS, c->window_ms) +
           pbw_size_len_opt(CLAIM_PAYLOAD_HASH, c->payload_hash_len) +
           pbw_size_u64_opt(CLAIM_LEASE_MS, c->lease_ms) +
           pbw_size_u64_opt(CLAIM_MAX_USES, wire_max_uses(c)) +
           pbw_size_u64_opt(CLAIM_SLIDING, c->sliding);
}

static uint8_t *claim_write(const struct fsm_claim *c, uint8_t *p)
{
    p = pbw_put_len_opt(p, CLAIM_SCOPE, c->scope, c->scope_len);
    p = pbw_put_len_opt(p, CLAIM_KEY, c->key, c->key_len);
    p = pbw_put_len_req(p, CLAIM_REQUEST_ID, c->request_id, FSM_REQUEST_ID_LEN);
    p = pbw_put_len_opt(p, CLAIM_EXECUTION_ID, c->execution_id,
                        c->execution_id_len);
    p = pbw_put_i32_opt(p, CLAIM_KIND, (int32_t)c->kind);
    p = pbw_put_u64_opt(p, CLAIM_TTL_MS, c->ttl_ms);
    p = pbw_put_bool_opt(p, CLAIM_HAS_TS, c->has_ts);
    p = pbw_put_u64_opt(p, CLAIM_TS_MS, c->ts_ms);
    p = pbw_put_u64_opt(p, CLAIM_WINDOW_MS, c->window_ms);
    p = pbw_put_len_opt(p, CLAIM_PAYLOAD_HASH, c->payload_hash,
                        c->payload_hash_len);
    p = pbw_put_u64_opt(p, CLAIM_LEASE_MS, c->lease_ms);
    p = pbw_put_u64_opt(p, CLAIM_MAX_USES, wire_max_uses(c));
    return pbw_put_bool_opt(p, CLAIM_SLIDING, c->sliding);
}

/* The Claim's size (*inner) and its Command's (*size), or FSM_E_TOOBIG
 * when a field is over its limit. */
static int claim_sizes(const struct fsm_claim *c, size_t *inner, size_t *size)
{
    if (ident_too_big(c->scope_len, c->key_len) ||
        c->execution_id_len > FSM_EXECUTION_ID_MAX ||
        c->payload_hash_len > FSM_PAYLOAD_HASH_MAX) {
        return FSM_E_TOOBIG;
    }
    *inner = claim_size(c);
    *size = pbw_size_len_req(CMD_CLAIM, *inner);
    return 0;
}

/* Write the Command around @c, @size bytes (claim_sizes), into @buf. */
static void claim_put(const struct fsm_claim *c,
                      size_t inner,
                      size_t size,
                      uint8_t *buf)
{
    uint8_t *end = claim_write(c, pbw_put_len_head(buf, CMD_CLAIM, inner));

    ONCE_ASSERT((size_t)(end - buf) == size, "the claim packs to its size");
}

static int pack_claim(const struct fsm_claim *c, uint8_t **out, size_t *len)
{
    size_t inner, size;
    uint8_t *buf;
    int rv = claim_sizes(c, &inner, &size);

    if (rv != 0) {
        return rv;
    }
    buf = malloc(size);
    if (buf == NULL) {
        return -ENOMEM;
    }
    claim_put(c, inner, size, buf);
    *out = buf;
    *len = size;
    return 0;
}

int command_encode_claim_into(const struct fsm_claim *c,
                              uint8_t *buf,
                              size_t cap,
                              size_t *len)
{
    size_t inner, size;
    int rv = claim_sizes(c, &inner, &size);

    if (rv != 0) {
        return rv;
    }
    if (size > cap) {
        return -ENOSPC;
    }
    claim_put(c, inner, size, buf);
    *len = size;
    return 0;
}

int command_encode(const struct fsm_cmd *cmd, uint8_t **out, size_t *len)
{
    struct encoding e;
    int rv;

    once__log__command__init(&e.cmd);
    switch (cmd->type) {
        case FSM_CMD_CLAIM:
            return pack_claim(&cmd->u.claim, out, len);
        case FSM_CMD_COMPLETE:
            rv = encode_complete(&cmd->u.complete, &e);
            break;
        case FSM_CMD_RELEASE:
            rv = encode_release(&cmd->u.release, &e);
            break;
        case FSM_CMD_LOOKUP:
        case FSM_CMD_FORGET:
            rv = encode_ident(cmd->type == FSM_CMD_LOOKUP, &cmd->u.ident, &e);
            break;
        case FSM_CMD_BOOTSTRAP:
            rv = encode_bootstrap(cmd->u.bootstrap, &e);
            break;
        case FSM_CMD_SET_MEMBER:
            rv = encode_set_member(&cmd->u.member, &e);
            break;
        case FSM_CMD_SET_SETTINGS:
        case FSM_CMD_RETIRE_MEMBER:
        case FSM_CMD_SET_SCHEMA:
            encode_small(cmd, &e);
            rv = 0;
            break;
        case FSM_CMD_QUOTA_SET:
            if (cmd->u.quota.pattern_len > FSM_PATTERN_MAX) {
                return FSM_E_TOOBIG;
            }
            encode_small(cmd, &e);
            rv = 0;
            break;
        default:
            return -EINVAL;
    }
    if (rv != 0) {
        return rv;
    }
    return pack(&e.cmd.base, out, len);
}

/* The Batch is packed by hand too (the leader packs one per log entry, up
 * to FSM_BATCH_COMMANDS_MAX commands): schema_version, leader_time_ms, then
 * every command, each written even if empty, as protobuf-c does. */

int command_encode_batch_with(uint32_t schema_version,
                              uint64_t leader_time_ms,
                              const uint8_t *const *cmds,
                              const size_t *cmd_lens,
                              size_t n,
                              command_buf_fn get_buf,
                              void *arg,
                              size_t *len)
{
    uint8_t *buf, *p;
    size_t size;

    if (n > FSM_BATCH_COMMANDS_MAX) {
        return FSM_E_TOOBIG;
    }
    size = pbw_size_u64_opt(BATCH_SCHEMA_VERSION, schema_version) +
           pbw_size_u64_opt(BATCH_LEADER_TIME_MS, leader_time_ms);
    for (size_t i = 0; i < n; i++) {
        /* Each term is bounded by FSM_BATCH_MAX below before it is added,
         * so the sum cannot wrap. */
        if (cmd_lens[i] > FSM_BATCH_MAX) {
            return FSM_E_TOOBIG;
        }
        size += pbw_size_len_req(BATCH_COMMANDS, cmd_lens[i]);
        if (size > FSM_BATCH_MAX) {
            return FSM_E_TOOBIG;
        }
    }
    buf = get_buf(arg, size);
    if (buf == NULL) {
        return -ENOMEM;
    }
    p = pbw_put_u64_opt(buf, BATCH_SCHEMA_VERSION, schema_version);
    p = pbw_put_u64_opt(p, BATCH_LEADER_TIME_MS, leader_time_ms);
    for (size_t i = 0; i < n; i++) {
        p = pbw_put_len_req(p, BATCH_COMMANDS, cmds[i], cmd_lens[i]);
    }
    ONCE_ASSERT((size_t)(p - buf) == size, "the batch packs to its size");
    *len = size;
    return 0;
}

struct malloc_out
{
    uint8_t *buf;
};

static uint8_t *malloc_buf(void *arg, size_t len)
{
    struct malloc_out *o = arg;

    o->buf = malloc(len > 0 ? len : 1);
    return o->buf;
}

int command_encode_batch(uint32_t schema_version,
                         uint64_t leader_time_ms,
                         const uint8_t *const *cmds,
                         const size_t *cmd_lens,
                         size_t n,
                         uint8_t **out,
                         size_t *len)
{
    struct malloc_out o = {NULL};
    int rv = command_encode_batch_with(schema_version, leader_time_ms, cmds,
                                       cmd_lens, n, malloc_buf, &o, len);

    if (rv == 0) {
        *out = o.buf;
    }
    return rv;
}
