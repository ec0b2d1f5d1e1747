/* rpc/frame.c: frame headers and envelopes.
 *
 * Happy path: the connection reads 4 bytes, frame_decode_header gives the
 * envelope length (checked against the limit before anything is read or
 * allocated), the connection reads that many bytes and envelope_decode
 * unpacks them through the view's arena under a budget, validates every
 * field and copies the small ones into the view. Answers go the other way
 * through envelope_encode, which applies the same rules, so a node never
 * sends what it would refuse.
 *
 * Failure modes: a frame length of 0 or over the limit, bytes that are not
 * protobuf, an envelope that would take more than ENVELOPE_BUDGET to
 * decode, and any field out of bounds are all negative RPC_E_* values with
 * a message naming the field. Nothing aborts: allocation failure inside
 * protobuf-c is reported (RPC_E_NOMEM) unlike in common/arena's own
 * allocator view, because refusing one client frame is always safe. */
#include "rpc/frame.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/pbwire.h"
#include "once_rpc.pb-c.h"

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)
SAME(RPC_METHOD_CLAIM, ONCE__RPC__METHOD__METHOD_CLAIM);
SAME(RPC_METHOD_COMPLETE, ONCE__RPC__METHOD__METHOD_COMPLETE);
SAME(RPC_METHOD_RELEASE, ONCE__RPC__METHOD__METHOD_RELEASE);
SAME(RPC_METHOD_LOOKUP, ONCE__RPC__METHOD__METHOD_LOOKUP);
SAME(RPC_METHOD_FORGET, ONCE__RPC__METHOD__METHOD_FORGET);
SAME(RPC_METHOD_STATUS, ONCE__RPC__METHOD__METHOD_STATUS);
SAME(RPC_METHOD_MEMBERS_LIST, ONCE__RPC__METHOD__METHOD_MEMBERS_LIST);
SAME(RPC_METHOD_MEMBERS_ADD, ONCE__RPC__METHOD__METHOD_MEMBERS_ADD);
SAME(RPC_METHOD_MEMBERS_REMOVE, ONCE__RPC__METHOD__METHOD_MEMBERS_REMOVE);
SAME(RPC_METHOD_MEMBERS_ASSIGN, ONCE__RPC__METHOD__METHOD_MEMBERS_ASSIGN);
SAME(RPC_METHOD_TRANSFER, ONCE__RPC__METHOD__METHOD_TRANSFER);
SAME(RPC_METHOD_SNAPSHOT_TAKE, ONCE__RPC__METHOD__METHOD_SNAPSHOT_TAKE);
SAME(RPC_METHOD_BACKUP_OPEN, ONCE__RPC__METHOD__METHOD_BACKUP_OPEN);
SAME(RPC_METHOD_BACKUP_READ, ONCE__RPC__METHOD__METHOD_BACKUP_READ);
SAME(RPC_METHOD_BACKUP_CLOSE, ONCE__RPC__METHOD__METHOD_BACKUP_CLOSE);
SAME(RPC_METHOD_QUOTA_SET, ONCE__RPC__METHOD__METHOD_QUOTA_SET);
SAME(RPC_METHOD_QUOTA_LIST, ONCE__RPC__METHOD__METHOD_QUOTA_LIST);
SAME(RPC_METHOD_SCHEMA_UPGRADE, ONCE__RPC__METHOD__METHOD_SCHEMA_UPGRADE);
SAME(RPC_METHOD_READ_INDEX, ONCE__RPC__METHOD__METHOD_READ_INDEX);
SAME(RPC_METHOD_CLAIM_BATCH, ONCE__RPC__METHOD__METHOD_CLAIM_BATCH);
SAME(RPC_REQUEST, ONCE__RPC__DIRECTION__DIRECTION_REQUEST);
SAME(RPC_RESPONSE, ONCE__RPC__DIRECTION__DIRECTION_RESPONSE);
SAME(RPC_STATUS_OK, ONCE__RPC__STATUS__STATUS_OK);
SAME(RPC_STATUS_UNKNOWN, ONCE__RPC__STATUS__STATUS_UNKNOWN);
SAME(RPC_STATUS_INVALID_ARGUMENT, ONCE__RPC__STATUS__STATUS_INVALID_ARGUMENT);
SAME(RPC_STATUS_DEADLINE_EXCEEDED, ONCE__RPC__STATUS__STATUS_DEADLINE_EXCEEDED);
SAME(RPC_STATUS_PERMISSION_DENIED, ONCE__RPC__STATUS__STATUS_PERMISSION_DENIED);
SAME(RPC_STATUS_RESOURCE_EXHAUSTED,
     ONCE__RPC__STATUS__STATUS_RESOURCE_EXHAUSTED);
SAME(RPC_STATUS_FAILED_PRECONDITION,
     ONCE__RPC__STATUS__STATUS_FAILED_PRECONDITION);
SAME(RPC_STATUS_UNAVAILABLE, ONCE__RPC__STATUS__STATUS_UNAVAILABLE);
SAME(RPC_STATUS_WRONG_GROUP, ONCE__RPC__STATUS__STATUS_WRONG_GROUP);
SAME(RPC_STATUS_MOVING, ONCE__RPC__STATUS__STATUS_MOVING);
SAME(RPC_APPLIED_FALSE, ONCE__RPC__APPLIED__APPLIED_FALSE);
SAME(RPC_APPLIED_UNKNOWN, ONCE__RPC__APPLIED__APPLIED_UNKNOWN);

/* ------------------------------------------------------------------------
 * Header
 * ---------------------------------------------------------------------- */

static int check_len(size_t len, size_t frame_max)
{
    if (frame_max == 0 || frame_max > FRAME_MAX_CEIL) {
        return RPC_E_LIMIT;
    }
    if (len == 0) {
        return RPC_E_EMPTY;
    }
    if (len > frame_max) {
        return RPC_E_TOOBIG;
    }
    return 0;
}

int frame_decode_header(const uint8_t *buf,
                        size_t len,
                        size_t frame_max,
                        uint32_t *out_len)
{
    uint32_t n;
    int rv;

    if (frame_max == 0 || frame_max > FRAME_MAX_CEIL) {
        return RPC_E_LIMIT;
    }
    if (len < FRAME_HEADER_LEN) {
        return 1;
    }
    n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 |
        (uint32_t)buf[2] << 8 | (uint32_t)buf[3];
    rv = check_len(n, frame_max);
    if (rv != 0) {
        return rv;
    }
    *out_len = n;
    return 0;
}

int frame_encode_header(size_t env_len, size_t frame_max, uint8_t *out)
{
    int rv = check_len(env_len, frame_max);

    if (rv != 0) {
        return rv;
    }
    out[0] = (uint8_t)(env_len >> 24);
    out[1] = (uint8_t)(env_len >> 16);
    out[2] = (uint8_t)(env_len >> 8);
    out[3] = (uint8_t)env_len;
    return 0;
}

/* ------------------------------------------------------------------------
 * Budgeted allocator: protobuf-c allocates through the view's arena, at
 * most v->budget bytes in total (rounded as the arena rounds).
 * ---------------------------------------------------------------------- */

static void *budget_alloc(void *data, size_t size)
{
    struct envelope_view *v = data;
    size_t need = size > 16 ? (size + 15) & ~(size_t)15 : 16;
    void *p;

    if (size > v->budget || need > v->budget - v->used) {
        v->over_budget = true;
        return NULL;
    }
    p = arena_alloc(&v->arena, size);
    if (p == NULL) {
        v->nomem = true; /* UNTESTED: needs a failing malloc */
        return NULL;
    }
    v->used += need;
    return p;
}

static void budget_free(void *data, void *ptr)
{
    /* Released wholesale by the next decode (arena_reset). */
    (void)data;
    (void)ptr;
}

void envelope_view_init(struct envelope_view *v)
{
    memset(v, 0, sizeof *v);
    arena_init(&v->arena);
    v->pb.alloc = budget_alloc;
    v->pb.free = budget_free;
    v->pb.allocator_data = v;
}

void envelope_view_clear(struct envelope_view *v)
{
    memset(v, 0, offsetof(struct envelope_view, arena));
}

void envelope_view_close(struct envelope_view *v)
{
    arena_close(&v->arena);
}

/* ------------------------------------------------------------------------
 * Validation
 * ---------------------------------------------------------------------- */

static bool method_known(enum rpc_method m)
{
    return (int)m >= RPC_METHOD_UNSPECIFIED && (int)m <= RPC_METHOD_LAST;
}

static bool status_known(enum rpc_status s)
{
    switch (s) {
        case RPC_STATUS_OK:
        case RPC_STATUS_UNKNOWN:
        case RPC_STATUS_INVALID_ARGUMENT:
        case RPC_STATUS_DEADLINE_EXCEEDED:
        case RPC_STATUS_PERMISSION_DENIED:
        case RPC_STATUS_RESOURCE_EXHAUSTED:
        case RPC_STATUS_FAILED_PRECONDITION:
        case RPC_STATUS_UNAVAILABLE:
        case RPC_STATUS_WRONG_GROUP:
        case RPC_STATUS_MOVING:
            return true;
    }
    return false;
}

/* Inline, with the empty text first: every envelope checks two texts
 * (sent and received, twice per claim) and they are almost always empty,
 * which passes every rule below. */
static inline int check_text(const char *name,
                             const char *s,
                             size_t len,
                             size_t max,
                             char *errmsg)
{
    if (len == 0) {
        return 0;
    }
    if (len > max) {
        err_printf(errmsg, "%s: %zu bytes, at most %zu allowed", name, len,
                   max);
        return RPC_E_STRING;
    }
    if (s == NULL) {
        err_printf(errmsg, "%s: NULL with length %zu", name, len);
        return RPC_E_STRING;
    }
    if (memchr(s, '\0', len) != NULL) {
        err_printf(errmsg, "%s: contains a NUL byte", name);
        return RPC_E_STRING;
    }
    return 0;
}

static int check_fields(const struct envelope_view *v, char *errmsg)
{
    bool ok = v->status == RPC_STATUS_OK;

    if (v->direction == RPC_REQUEST) {
        if (v->method == RPC_METHOD_UNSPECIFIED) {
            err_printf(errmsg, "request without a method");
            return RPC_E_FIELDS;
        }
        if (!ok || v->applied != RPC_APPLIED_UNSPECIFIED || v->error_len > 0 ||
            v->leader_hint_len > 0) {
            err_printf(errmsg, "request with status, applied, error or hint");
            return RPC_E_FIELDS;
        }
        if (v->caller_cert_len > 0 && !v->forwarded) {
            err_printf(errmsg, "caller_cert in a request not forwarded");
            return RPC_E_FIELDS;
        }
        return 0;
    }
    if (v->caller_cert_len > 0) {
        err_printf(errmsg, "response with caller_cert");
        return RPC_E_FIELDS;
    }
    if (v->forwarded) {
        err_printf(errmsg, "response marked forwarded");
        return RPC_E_FIELDS;
    }
    if (ok && v->method == RPC_METHOD_UNSPECIFIED) {
        err_printf(errmsg, "OK response without a method");
        return RPC_E_FIELDS;
    }
    if (ok && (v->applied != RPC_APPLIED_UNSPECIFIED || v->error_len > 0)) {
        err_printf(errmsg, "OK response with applied or error set");
        return RPC_E_FIELDS;
    }
    if (!ok && v->applied == RPC_APPLIED_UNSPECIFIED) {
        err_printf(errmsg, "%s response without applied false|unknown",
                   rpc_status_name(v->status));
        return RPC_E_FIELDS;
    }
    return 0;
}

int envelope_check(const struct envelope_view *v, char *errmsg)
{
    int rv;

    if (!method_known(v->method)) {
        err_printf(errmsg, "method: unknown value %d", (int)v->method);
        return RPC_E_ENUM;
    }
    if (v->direction != RPC_REQUEST && v->direction != RPC_RESPONSE) {
        err_printf(errmsg, "direction: unknown value %d", (int)v->direction);
        return RPC_E_ENUM;
    }
    if (!status_known(v->status)) {
        err_printf(errmsg, "status: unknown value %d", (int)v->status);
        return RPC_E_ENUM;
    }
    if (v->applied != RPC_APPLIED_UNSPECIFIED &&
        v->applied != RPC_APPLIED_FALSE && v->applied != RPC_APPLIED_UNKNOWN) {
        err_printf(errmsg, "applied: unknown value %d", (int)v->applied);
        return RPC_E_ENUM;
    }
    if (v->deadline_ms > RPC_DEADLINE_MAX) {
        err_printf(errmsg, "deadline_ms: %llu, at most %u allowed",
                   (unsigned long long)v->deadline_ms, RPC_DEADLINE_MAX);
        return RPC_E_DEADLINE;
    }
    rv = check_text("error", v->error, v->error_len, RPC_ERROR_MAX, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = check_text("leader_hint", v->leader_hint, v->leader_hint_len,
                    RPC_ADDR_MAX, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (v->caller_cert_len > RPC_CALLER_CERT_MAX ||
        (v->caller_cert_len > 0 && v->caller_cert == NULL)) {
        err_printf(errmsg, "caller_cert: %zu bytes, at most %u allowed",
                   v->caller_cert_len, RPC_CALLER_CERT_MAX);
        return RPC_E_FIELDS;
    }
    if (v->body_len > 0 && v->body == NULL) {
        err_printf(errmsg, "body: NULL with length %zu", v->body_len);
        return RPC_E_FIELDS;
    }
    return check_fields(v, errmsg);
}

/* ------------------------------------------------------------------------
 * Decode
 * ---------------------------------------------------------------------- */

static int copy_id(const char *name,
                   const ProtobufCBinaryData *b,
                   bool *has,
                   uint8_t *out,
                   char *errmsg)
{
    if (b->len == 0) {
        *has = false;
        memset(out, 0, RPC_ID_LEN);
        return 0;
    }
    if (b->len != RPC_ID_LEN) {
        err_printf(errmsg, "%s: %zu bytes, must be empty or %d", name, b->len,
                   RPC_ID_LEN);
        return RPC_E_ID;
    }
    *has = true;
    memcpy(out, b->data, RPC_ID_LEN);
    return 0;
}

static void budget_reset(struct envelope_view *v, size_t budget)
{
    arena_reset(&v->arena);
    v->pb.alloc = budget_alloc;
    v->pb.free = budget_free;
    v->pb.allocator_data = v; /* the view may have moved since init */
    v->budget = budget;
    v->used = 0;
    v->over_budget = false;
    v->nomem = false;
}

static int unpack_failed(const struct envelope_view *v,
                         const char *what,
                         char *errmsg)
{
    if (v->nomem) {
        err_printf(errmsg, "%s: out of memory", what); /* UNTESTED: malloc */
        return RPC_E_NOMEM;
    }
    if (v->over_budget) {
        err_printf(errmsg, "%s: decoding needs over %zu bytes", what,
                   v->budget);
        return RPC_E_BUDGET;
    }
    err_printf(errmsg, "%s: does not decode", what);
    return RPC_E_MALFORMED;
}

/* protobuf-c takes an over-long tag such as 0x80 0x00 as field number 0 and
 * keeps it as an unknown field, which it then re-encodes as the byte 0x00
 * that no decoder accepts. Field 0 is invalid protobuf, so a message holding
 * one (at any depth) is refused as malformed: whatever we accept must
 * survive being re-encoded. */
static bool tags_valid(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    unsigned i;

    for (i = 0; i < m->n_unknown_fields; i++) {
        if (m->unknown_fields[i].tag == 0) {
            return false;
        }
    }
    for (i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *at = (const char *)m + f->offset;

        if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
            continue;
        }
        /* Fields are reached by offset, as protobuf-c itself does; memcpy
         * keeps that free of alignment-changing casts. */
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n;
            ProtobufCMessage **sub;

            memcpy(&n, (const char *)m + f->quantifier_offset, sizeof n);
            memcpy(&sub, at, sizeof sub);
            for (size_t j = 0; j < n; j++) {
                if (!tags_valid(sub[j])) {
                    return false;
                }
            }
        } else {
            const ProtobufCMessage *sub;
            uint32_t which;

            if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                memcpy(&which, (const char *)m + f->quantifier_offset,
                       sizeof which);
                if (which != f->id) {
                    continue; /* another member of the oneof owns it */
                }
            }
            memcpy(&sub, at, sizeof sub);
            if (sub != NULL && !tags_valid(sub)) {
                return false;
            }
        }
    }
    return true;
}

/* The hand-written decoders: an Envelope and a ClaimRequest are read
 * straight into protobuf-c's structs by common/pbwire.h's reader, several
 * times cheaper than protobuf-c's reflective unpacker. The reader declines
 * whatever it cannot decode exactly as protobuf-c does (unknown or repeated
 * fields, wrong wire types, values a type would truncate, malformed
 * bytes), and those bytes then go through protobuf-c as before, with the
 * same budget and checks: the fast path accepts a subset of what protobuf-c
 * accepts, with equal fields (tests/fuzz/fuzz_codec.c). */
#define F(kind, type, member)          \
    {                                  \
        (kind), offsetof(type, member) \
    }
static const struct pbr_field envelope_fields[] = {
    F(PBR_U64, Once__Rpc__Envelope, call_id),
    F(PBR_ENUM, Once__Rpc__Envelope, method),
    F(PBR_ENUM, Once__Rpc__Envelope, direction),
    F(PBR_U64, Once__Rpc__Envelope, deadline_ms),
    F(PBR_ENUM, Once__Rpc__Envelope, status),
    F(PBR_ENUM, Once__Rpc__Envelope, applied),
    F(PBR_BYTES, Once__Rpc__Envelope, error),
    F(PBR_BYTES, Once__Rpc__Envelope, leader_hint),
    F(PBR_BYTES, Once__Rpc__Envelope, cluster_id),
    F(PBR_U64, Once__Rpc__Envelope, node_id),
    F(PBR_BYTES, Once__Rpc__Envelope, boot_id),
    F(PBR_U32, Once__Rpc__Envelope, group_id),
    F(PBR_BYTES, Once__Rpc__Envelope, body),
    F(PBR_BOOL, Once__Rpc__Envelope, forwarded),
    F(PBR_BYTES, Once__Rpc__Envelope, caller_cert),
};
const struct pbr_spec envelope_pbr_spec = {
    envelope_fields, sizeof envelope_fields / sizeof envelope_fields[0]};

static const struct pbr_field claim_request_fields[] = {
    F(PBR_BYTES, Once__Rpc__ClaimRequest, scope),
    F(PBR_BYTES, Once__Rpc__ClaimRequest, key),
    F(PBR_BYTES, Once__Rpc__ClaimRequest, request_id),
    F(PBR_BYTES, Once__Rpc__ClaimRequest, execution_id),
    F(PBR_ENUM, Once__Rpc__ClaimRequest, kind),
    F(PBR_U64, Once__Rpc__ClaimRequest, ttl_ms),
    F(PBR_BOOL, Once__Rpc__ClaimRequest, has_ts),
    F(PBR_U64, Once__Rpc__ClaimRequest, ts_ms),
    F(PBR_U64, Once__Rpc__ClaimRequest, window_ms),
    F(PBR_BYTES, Once__Rpc__ClaimRequest, payload_hash),
    F(PBR_U64, Once__Rpc__ClaimRequest, lease_ms),
    F(PBR_U32, Once__Rpc__ClaimRequest, max_uses),
    F(PBR_BOOL, Once__Rpc__ClaimRequest, sliding),
};
const struct pbr_spec claim_request_pbr_spec = {
    claim_request_fields,
    sizeof claim_request_fields / sizeof claim_request_fields[0]};
#undef F

/* Copy a decoded byte field into the view's arena (under its budget), as
 * protobuf-c's unpacker does: the view must not point into the caller's
 * read buffer. */
static int own_bytes(struct envelope_view *v,
                     ProtobufCBinaryData *b,
                     char *errmsg)
{
    uint8_t *p;

    if (b->len == 0) {
        return 0;
    }
    p = v->pb.alloc(v->pb.allocator_data, b->len);
    if (p == NULL) {
        return unpack_failed(v, "envelope", errmsg); /* UNTESTED: budget */
    }
    memcpy(p, b->data, b->len);
    b->data = p;
    return 0;
}

/* The Envelope of @buf into @fast (fast path) or into the arena by
 * protobuf-c; *e points to whichever holds it. */
static int unpack_envelope(struct envelope_view *v,
                           const uint8_t *buf,
                           size_t len,
                           Once__Rpc__Envelope *fast,
                           Once__Rpc__Envelope **e,
                           char *errmsg)
{
    int rv;

    once__rpc__envelope__init(fast);
    if (pbr_parse(&envelope_pbr_spec, buf, len, fast)) {
        rv = own_bytes(v, &fast->body, errmsg);
        if (rv == 0) {
            rv = own_bytes(v, &fast->caller_cert, errmsg);
        }
        *e = fast;
        return rv;
    }
    *e = once__rpc__envelope__unpack(&v->pb, len, buf);
    if (*e == NULL) {
        return unpack_failed(v, "envelope", errmsg);
    }
    if (!tags_valid(&(*e)->base)) {
        err_printf(errmsg, "envelope: field number 0");
        return RPC_E_MALFORMED;
    }
    return 0;
}

int envelope_decode(const uint8_t *buf,
                    size_t len,
                    size_t frame_max,
                    struct envelope_view *v,
                    char *errmsg)
{
    Once__Rpc__Envelope fast, *e;
    int rv;

    rv = check_len(len, frame_max);
    if (rv != 0) {
        err_printf(errmsg, "envelope: %s", rpc_strerror(rv));
        return rv;
    }
    budget_reset(v, ENVELOPE_BUDGET(len));
    rv = unpack_envelope(v, buf, len, &fast, &e, errmsg);
    if (rv != 0) {
        return rv;
    }
    /* Enums are open in proto3: protobuf-c stores any number. */
    v->call_id = e->call_id;
    v->method = (enum rpc_method)e->method;
    v->direction = (enum rpc_direction)e->direction;
    v->deadline_ms = e->deadline_ms;
    v->status = (enum rpc_status)e->status;
    v->applied = (enum rpc_applied)e->applied;
    v->error = (const char *)e->error.data;
    v->error_len = e->error.len;
    v->leader_hint = (const char *)e->leader_hint.data;
    v->leader_hint_len = e->leader_hint.len;
    v->node_id = e->node_id;
    v->group_id = e->group_id;
    v->forwarded = e->forwarded;
    v->caller_cert = e->caller_cert.data;
    v->caller_cert_len = e->caller_cert.len;
    v->body = e->body.data;
    v->body_len = e->body.len;
    rv = copy_id("cluster_id", &e->cluster_id, &v->has_cluster_id,
                 v->cluster_id, errmsg);
    if (rv == 0) {
        rv = copy_id("boot_id", &e->boot_id, &v->has_boot_id, v->boot_id,
                     errmsg);
    }
    if (rv == 0) {
        rv = envelope_check(v, errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    /* Texts are handed out NUL-terminated: copy them (bounded above). */
    if (v->error_len > 0) {
        memcpy(v->error_buf, v->error, v->error_len);
    }
    v->error_buf[v->error_len] = '\0';
    v->error = v->error_buf;
    if (v->leader_hint_len > 0) {
        memcpy(v->leader_hint_buf, v->leader_hint, v->leader_hint_len);
    }
    v->leader_hint_buf[v->leader_hint_len] = '\0';
    v->leader_hint = v->leader_hint_buf;
    /* e itself lives in the arena until the next decode: no free needed. */
    return 0;
}

/* ------------------------------------------------------------------------
 * Encode
 * ---------------------------------------------------------------------- */

/* The Envelope is packed by hand (common/pbwire.h), byte-identical to
 * protobuf-c's packer (tests/unit/test_codec.c compares both on randomized
 * views): it runs for every answer and every call, and protobuf-c's
 * reflective packer cost several times more. The fields are the view's, so
 * there is no field the encoder could miss; test_codec.c also checks that
 * the schema's Envelope still has exactly the fields written here. */
enum {
    ENV_CALL_ID = 1,
    ENV_METHOD = 2,
    ENV_DIRECTION = 3,
    ENV_DEADLINE_MS = 4,
    ENV_STATUS = 5,
    ENV_APPLIED = 6,
    ENV_ERROR = 7,
    ENV_LEADER_HINT = 8,
    ENV_CLUSTER_ID = 9,
    ENV_NODE_ID = 10,
    ENV_BOOT_ID = 11,
    ENV_GROUP_ID = 12,
    ENV_BODY = 13,
    ENV_FORWARDED = 14,
    ENV_CALLER_CERT = 15,
};

size_t envelope_packed_size(const struct envelope_view *v)
{
    return pbw_size_u64_opt(ENV_CALL_ID, v->call_id) +
           pbw_size_i32_opt(ENV_METHOD, (int32_t)v->method) +
           pbw_size_i32_opt(ENV_DIRECTION, (int32_t)v->direction) +
           pbw_size_u64_opt(ENV_DEADLINE_MS, v->deadline_ms) +
           pbw_size_i32_opt(ENV_STATUS, (int32_t)v->status) +
           pbw_size_i32_opt(ENV_APPLIED, (int32_t)v->applied) +
           pbw_size_len_opt(ENV_ERROR, v->error_len) +
           pbw_size_len_opt(ENV_LEADER_HINT, v->leader_hint_len) +
           pbw_size_len_opt(ENV_CLUSTER_ID,
                            v->has_cluster_id ? RPC_ID_LEN : 0) +
           pbw_size_u64_opt(ENV_NODE_ID, v->node_id) +
           pbw_size_len_opt(ENV_BOOT_ID, v->has_boot_id ? RPC_ID_LEN : 0) +
           pbw_size_u64_opt(ENV_GROUP_ID, v->group_id) +
           pbw_size_len_opt(ENV_BODY, v->body_len) +
           pbw_size_u64_opt(ENV_FORWARDED, v->forwarded ? 1 : 0) +
           pbw_size_len_opt(ENV_CALLER_CERT, v->caller_cert_len);
}

/* Write @v's fields at @p in field-number order; returns the end. */
static uint8_t *pack_fields(const struct envelope_view *v, uint8_t *p)
{
    p = pbw_put_u64_opt(p, ENV_CALL_ID, v->call_id);
    p = pbw_put_i32_opt(p, ENV_METHOD, (int32_t)v->method);
    p = pbw_put_i32_opt(p, ENV_DIRECTION, (int32_t)v->direction);
    p = pbw_put_u64_opt(p, ENV_DEADLINE_MS, v->deadline_ms);
    p = pbw_put_i32_opt(p, ENV_STATUS, (int32_t)v->status);
    p = pbw_put_i32_opt(p, ENV_APPLIED, (int32_t)v->applied);
    p = pbw_put_len_opt(p, ENV_ERROR, v->error, v->error_len);
    p = pbw_put_len_opt(p, ENV_LEADER_HINT, v->leader_hint, v->leader_hint_len);
    if (v->has_cluster_id) {
        p = pbw_put_len_req(p, ENV_CLUSTER_ID, v->cluster_id, RPC_ID_LEN);
    }
    p = pbw_put_u64_opt(p, ENV_NODE_ID, v->node_id);
    if (v->has_boot_id) {
        p = pbw_put_len_req(p, ENV_BOOT_ID, v->boot_id, RPC_ID_LEN);
    }
    p = pbw_put_u64_opt(p, ENV_GROUP_ID, v->group_id);
    p = pbw_put_len_opt(p, ENV_BODY, v->body, v->body_len);
    p = pbw_put_bool_opt(p, ENV_FORWARDED, v->forwarded);
    p = pbw_put_len_opt(p, ENV_CALLER_CERT, v->caller_cert, v->caller_cert_len);
    return p;
}

/* Validate @v and compute its envelope size (header excluded). */
static int prepare(const struct envelope_view *v,
                   size_t frame_max,
                   size_t *env_len,
                   char *errmsg)
{
    int rv = envelope_check(v, errmsg);

    if (rv != 0) {
        return rv;
    }
    *env_len = envelope_packed_size(v);
    rv = check_len(*env_len, frame_max);
    if (rv != 0) {
        err_printf(errmsg, "envelope of %zu bytes: %s", *env_len,
                   rpc_strerror(rv));
    }
    return rv;
}

int envelope_frame_size(const struct envelope_view *v,
                        size_t frame_max,
                        size_t *need,
                        char *errmsg)
{
    size_t env_len;
    int rv = prepare(v, frame_max, &env_len, errmsg);

    if (rv != 0) {
        return rv;
    }
    *need = FRAME_HEADER_LEN + env_len;
    return 0;
}

size_t envelope_pack(const struct envelope_view *v,
                     size_t frame_max,
                     uint8_t *buf,
                     size_t need)
{
    size_t packed;
    int rv;

    ONCE_ASSERT(need > FRAME_HEADER_LEN, "envelope_frame_size measured @v");
    rv = frame_encode_header(need - FRAME_HEADER_LEN, frame_max, buf);
    ONCE_ASSERT(rv == 0, "envelope_frame_size checked the length");
    packed = (size_t)(pack_fields(v, buf + FRAME_HEADER_LEN) -
                      (buf + FRAME_HEADER_LEN));
    /* The caller's buffer holds what envelope_frame_size said, no more. */
    ONCE_ASSERT(packed == need - FRAME_HEADER_LEN,
                "the envelope packs to its measured size");
    return need;
}

int envelope_encode(const struct envelope_view *v,
                    size_t frame_max,
                    uint8_t *buf,
                    size_t cap,
                    size_t *out_len,
                    char *errmsg)
{
    int rv = envelope_frame_size(v, frame_max, out_len, errmsg);

    if (rv != 0) {
        return rv;
    }
    if (cap < *out_len) {
        err_printf(errmsg, "frame of %zu bytes, buffer of %zu", *out_len, cap);
        return RPC_E_NOSPACE;
    }
    envelope_pack(v, frame_max, buf, *out_len);
    return 0;
}

int envelope_encode_alloc(const struct envelope_view *v,
                          size_t frame_max,
                          uint8_t **out,
                          size_t *out_len,
                          char *errmsg)
{
    size_t env_len, packed;
    uint8_t *buf;
    int rv;

    *out = NULL;
    rv = prepare(v, frame_max, &env_len, errmsg);
    if (rv != 0) {
        return rv;
    }
    buf = malloc(FRAME_HEADER_LEN + env_len);
    if (buf == NULL) {
        err_printf(errmsg, "frame of %zu bytes: out of memory", env_len);
        return RPC_E_NOMEM; /* UNTESTED: needs a failing malloc */
    }
    rv = frame_encode_header(env_len, frame_max, buf);
    if (rv != 0) {
        free(buf); /* UNTESTED: prepare checked the same length */
        return rv;
    }
    packed = (size_t)(pack_fields(v, buf + FRAME_HEADER_LEN) -
                      (buf + FRAME_HEADER_LEN));
    /* The buffer holds what envelope_packed_size said, and no more. */
    ONCE_ASSERT(packed == env_len, "the envelope packs to its packed size");
    *out = buf;
    *out_len = FRAME_HEADER_LEN + env_len;
    return 0;
}

/* ------------------------------------------------------------------------
 * Bodies
 * ---------------------------------------------------------------------- */

#define BODY(m, req, resp) \
    case RPC_METHOD_##m:   \
        return direction == RPC_REQUEST ? &(req) : &(resp)

const ProtobufCMessageDescriptor *envelope_body_descriptor(
    enum rpc_method method,
    enum rpc_direction direction)
{
    switch (method) {
        BODY(CLAIM, once__rpc__claim_request__descriptor,
             once__rpc__claim_response__descriptor);
        BODY(COMPLETE, once__rpc__complete_request__descriptor,
             once__rpc__complete_response__descriptor);
        BODY(RELEASE, once__rpc__release_request__descriptor,
             once__rpc__release_response__descriptor);
        BODY(LOOKUP, once__rpc__lookup_request__descriptor,
             once__rpc__lookup_response__descriptor);
        BODY(FORGET, once__rpc__forget_request__descriptor,
             once__rpc__forget_response__descriptor);
        BODY(STATUS, once__rpc__status_request__descriptor,
             once__rpc__status_response__descriptor);
        BODY(MEMBERS_LIST, once__rpc__members_list_request__descriptor,
             once__rpc__members_list_response__descriptor);
        BODY(MEMBERS_ADD, once__rpc__members_add_request__descriptor,
             once__rpc__members_add_response__descriptor);
        BODY(MEMBERS_REMOVE, once__rpc__members_remove_request__descriptor,
             once__rpc__members_remove_response__descriptor);
        BODY(MEMBERS_ASSIGN, once__rpc__members_assign_request__descriptor,
             once__rpc__members_assign_response__descriptor);
        BODY(TRANSFER, once__rpc__transfer_request__descriptor,
             once__rpc__transfer_response__descriptor);
        BODY(SNAPSHOT_TAKE, once__rpc__snapshot_take_request__descriptor,
             once__rpc__snapshot_take_response__descriptor);
        BODY(BACKUP_OPEN, once__rpc__backup_open_request__descriptor,
             once__rpc__backup_open_response__descriptor);
        BODY(BACKUP_READ, once__rpc__backup_read_request__descriptor,
             once__rpc__backup_read_response__descriptor);
        BODY(BACKUP_CLOSE, once__rpc__backup_close_request__descriptor,
             once__rpc__backup_close_response__descriptor);
        BODY(QUOTA_SET, once__rpc__quota_set_request__descriptor,
             once__rpc__quota_set_response__descriptor);
        BODY(QUOTA_LIST, once__rpc__quota_list_request__descriptor,
             once__rpc__quota_list_response__descriptor);
        BODY(SCHEMA_UPGRADE, once__rpc__schema_upgrade_request__descriptor,
             once__rpc__schema_upgrade_response__descriptor);
        BODY(READ_INDEX, once__rpc__read_index_request__descriptor,
             once__rpc__read_index_response__descriptor);
        BODY(CLAIM_BATCH, once__rpc__claim_batch_request__descriptor,
             once__rpc__claim_batch_response__descriptor);
        case RPC_METHOD_UNSPECIFIED:
            break;
    }
    return NULL;
}

/* A ClaimBatch holds up to RPC_CLAIM_BATCH_MAX messages, each unpacked
 * into a struct several times the size of its few encoded bytes: what
 * ENVELOPE_BUDGET's slack does not cover, bounded by the item count. */
static size_t batch_budget(enum rpc_method method, enum rpc_direction direction)
{
    if (method != RPC_METHOD_CLAIM_BATCH) {
        return 0;
    }
    if (direction == RPC_REQUEST) {
        return RPC_CLAIM_BATCH_MAX *
               (sizeof(Once__Rpc__ClaimRequest) + sizeof(void *) + 64);
    }
    return RPC_CLAIM_BATCH_MAX *
           (sizeof(Once__Rpc__ClaimBatchItem) + sizeof(Once__Rpc__Result) +
            sizeof(Once__Rpc__OwnerToken) + sizeof(void *) + 128);
}

/* ClaimBatchRequest.items (proto/once_rpc.proto). */
#define BATCH_ITEMS 1u

int claim_batch_read(const uint8_t *buf,
                     size_t len,
                     ProtobufCAllocator *pb,
                     Once__Rpc__ClaimBatchRequest *out)
{
    Once__Rpc__ClaimRequest **ptrs, *items;
    const uint8_t *data;
    uint64_t v;
    uint32_t number;
    unsigned wire;
    size_t n = 0, at, used;
    void *block;

    /* Pass 1: only items, well formed, counted. Nothing else is declined
     * here that protobuf-c reads: an empty body (no items) is declined, so
     * that every batch this returns has a non-NULL array. */
    for (at = 0; at < len; at += used) {
        used = pbr_field(buf + at, len - at, &number, &wire, &v, &data);
        if (used == 0 || number != BATCH_ITEMS || wire != PBW_LEN ||
            ++n > RPC_CLAIM_BATCH_MAX) {
            return 1;
        }
    }
    if (n == 0) {
        return 1;
    }
    /* One block: the pointer array, then the items (what protobuf-c
     * allocates one by one). */
    block = pb->alloc(pb->allocator_data, n * (sizeof *ptrs + sizeof *items));
    if (block == NULL) {
        return -1;
    }
    ptrs = block;
    items = (Once__Rpc__ClaimRequest *)(void *)(ptrs + n);
    n = 0;
    for (at = 0; at < len; at += used) {
        used = pbr_field(buf + at, len - at, &number, &wire, &v, &data);
        ONCE_ASSERT(used > 0, "pass 1 read it");
        once__rpc__claim_request__init(&items[n]);
        if (!pbr_parse(&claim_request_pbr_spec, data, (size_t)v, &items[n])) {
            pb->free(pb->allocator_data, block);
            return 1;
        }
        ptrs[n] = &items[n];
        n++;
    }
    once__rpc__claim_batch_request__init(out);
    out->n_items = n;
    out->items = ptrs;
    return 0;
}

/* A ClaimBatchRequest by claim_batch_read into the view's arena; false if
 * declined, with the budget as it was (protobuf-c then gets all of it). */
static bool unpack_batch_fast(struct envelope_view *v, ProtobufCMessage **out)
{
    size_t used = v->used;
    Once__Rpc__ClaimBatchRequest *m =
        v->pb.alloc(v->pb.allocator_data, sizeof *m);

    if (m != NULL && claim_batch_read(v->body, v->body_len, &v->pb, m) == 0) {
        *out = &m->base;
        return true;
    }
    /* The arena keeps the declined bytes until the next decode: at most
     * once more what protobuf-c may take, outside the budget's count. */
    v->used = used;
    v->over_budget = false;
    v->nomem = false;
    return false;
}

int envelope_unpack_body(struct envelope_view *v,
                         ProtobufCMessage **out,
                         char *errmsg)
{
    const ProtobufCMessageDescriptor *d =
        envelope_body_descriptor(v->method, v->direction);

    *out = NULL;
    if (d == NULL) {
        err_printf(errmsg, "body: no message type for method %d",
                   (int)v->method);
        return RPC_E_ENUM;
    }
    /* The envelope's allocations stay (the body points into them). */
    v->budget = v->used + ENVELOPE_BUDGET(v->body_len) +
                batch_budget(v->method, v->direction);
    v->over_budget = false;
    v->nomem = false;
    if (d == &once__rpc__claim_request__descriptor) {
        /* Every claim: the hand-written decoder first (see above), on the
         * stack, so that a decline costs the budget nothing. */
        Once__Rpc__ClaimRequest fast, *m;

        once__rpc__claim_request__init(&fast);
        if (pbr_parse(&claim_request_pbr_spec, v->body, v->body_len, &fast)) {
            m = v->pb.alloc(v->pb.allocator_data, sizeof *m);
            if (m == NULL) {
                return unpack_failed(v, d->short_name, errmsg); /* UNTESTED */
            }
            *m = fast;
            *out = &m->base;
            return 0;
        }
    }
    if (d == &once__rpc__claim_batch_request__descriptor &&
        unpack_batch_fast(v, out)) {
        return 0; /* the leader's largest decode (claim_batch_read) */
    }
    *out = protobuf_c_message_unpack(d, &v->pb, v->body_len, v->body);
    if (*out == NULL) {
        return unpack_failed(v, d->short_name, errmsg);
    }
    if (!tags_valid(*out)) {
        err_printf(errmsg, "%s: field number 0", d->short_name);
        *out = NULL; /* the arena owns it */
        return RPC_E_MALFORMED;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Names
 * ---------------------------------------------------------------------- */

const char *rpc_method_name(enum rpc_method m)
{
    static const char *const names[] = {
        "UNSPECIFIED",   "CLAIM",          "COMPLETE",       "RELEASE",
        "LOOKUP",        "FORGET",         "STATUS",         "MEMBERS_LIST",
        "MEMBERS_ADD",   "MEMBERS_REMOVE", "MEMBERS_ASSIGN", "TRANSFER",
        "SNAPSHOT_TAKE", "BACKUP_OPEN",    "BACKUP_READ",    "BACKUP_CLOSE",
        "QUOTA_SET",     "QUOTA_LIST",     "SCHEMA_UPGRADE", "READ_INDEX",
        "CLAIM_BATCH",
    };

    return method_known(m) ? names[m] : "unknown";
}

const char *rpc_status_name(enum rpc_status s)
{
    switch (s) {
        case RPC_STATUS_OK:
            return "OK";
        case RPC_STATUS_UNKNOWN:
            return "UNKNOWN";
        case RPC_STATUS_INVALID_ARGUMENT:
            return "INVALID_ARGUMENT";
        case RPC_STATUS_DEADLINE_EXCEEDED:
            return "DEADLINE_EXCEEDED";
        case RPC_STATUS_PERMISSION_DENIED:
            return "PERMISSION_DENIED";
        case RPC_STATUS_RESOURCE_EXHAUSTED:
            return "RESOURCE_EXHAUSTED";
        case RPC_STATUS_FAILED_PRECONDITION:
            return "FAILED_PRECONDITION";
        case RPC_STATUS_UNAVAILABLE:
            return "UNAVAILABLE";
        case RPC_STATUS_WRONG_GROUP:
            return "WRONG_GROUP";
        case RPC_STATUS_MOVING:
            return "MOVING";
    }
    return "unknown";
}

const char *rpc_applied_name(enum rpc_applied a)
{
    switch (a) {
        case RPC_APPLIED_UNSPECIFIED:
            return "";
        case RPC_APPLIED_FALSE:
            return "false";
        case RPC_APPLIED_UNKNOWN:
            return "unknown";
    }
    return "invalid";
}

const char *rpc_strerror(int rv)
{
    return err_str(rv);
}
