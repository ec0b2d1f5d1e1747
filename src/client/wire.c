/* client/wire.c: the pure parts of libonce that face the caller (see
 * client.h): the retry decision, argument checks and request bodies (the
 * encode side). The answers are read in wire_read.c (the decode side). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/assert.h"
#include "common/pbwire.h"
#include "rpc/conn.h"

/* Checked identities between once.h and the wire (the proto's enums). */
#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)
SAME(ONCE_STATUS_OK, RPC_STATUS_OK);
SAME(ONCE_STATUS_UNKNOWN, RPC_STATUS_UNKNOWN);
SAME(ONCE_STATUS_INVALID_ARGUMENT, RPC_STATUS_INVALID_ARGUMENT);
SAME(ONCE_STATUS_DEADLINE_EXCEEDED, RPC_STATUS_DEADLINE_EXCEEDED);
SAME(ONCE_STATUS_PERMISSION_DENIED, RPC_STATUS_PERMISSION_DENIED);
SAME(ONCE_STATUS_RESOURCE_EXHAUSTED, RPC_STATUS_RESOURCE_EXHAUSTED);
SAME(ONCE_STATUS_FAILED_PRECONDITION, RPC_STATUS_FAILED_PRECONDITION);
SAME(ONCE_STATUS_UNAVAILABLE, RPC_STATUS_UNAVAILABLE);
SAME(ONCE_ACCEPTED, ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED);
SAME(ONCE_OUT_OF_SPACE, ONCE__RPC__OUTCOME__OUTCOME_RESOURCE_EXHAUSTED);
SAME(ONCE_REFUSED_ARGUMENT, ONCE__RPC__OUTCOME__OUTCOME_INVALID_ARGUMENT);
SAME(ONCE_FOUND, ONCE__RPC__OUTCOME__OUTCOME_FOUND);
SAME(ONCE_FAILED_PRECONDITION, ONCE__RPC__OUTCOME__OUTCOME_FAILED_PRECONDITION);
SAME(ONCE_NONCE, ONCE__RPC__KIND__KIND_NONCE);
SAME(ONCE_IDEMPOTENT, ONCE__RPC__KIND__KIND_IDEMPOTENT);
SAME(ONCE_STATE_SEEN, ONCE__RPC__STATE__STATE_SEEN);
SAME(ONCE_STATE_FAILED, ONCE__RPC__STATE__STATE_FAILED);
SAME(ONCE_ROLE_VOTER, ONCE__RPC__ROLE__ROLE_VOTER);
SAME(ONCE_ROLE_STANDBY, ONCE__RPC__ROLE__ROLE_STANDBY);
SAME(ONCE_ROLE_SPARE, ONCE__RPC__ROLE__ROLE_SPARE);
SAME(ONCE_RAFT_FOLLOWER, ONCE__RPC__RAFT_ROLE__RAFT_ROLE_FOLLOWER);
SAME(ONCE_RAFT_UNAVAILABLE, ONCE__RPC__RAFT_ROLE__RAFT_ROLE_UNAVAILABLE);
SAME(ONCE_ID_LEN, RPC_ID_LEN);
SAME(ONCE_ERROR_MAX, RPC_ERROR_MAX);
SAME(ONCE_ADDR_MAX, RPC_ADDR_MAX);

/* Largest max_inflight accepted (each call in flight holds a result). */
#define CLIENT_INFLIGHT_MAX 65536u

/* ------------------------------------------------------------------------
 * Retry decision
 * ---------------------------------------------------------------------- */

struct client_decision client_decide(int rv,
                                     bool sent,
                                     enum rpc_status status,
                                     enum rpc_applied applied)
{
    struct client_decision d = {false, false};

    if (rv < 0) {
        /* No answer. After sending, the request may be in a log. */
        d.maybe_applied = sent;
        /* CLOSED only happens when the client itself closes. */
        d.final = rv == RPC_E_CLOSED;
        return d;
    }
    d.maybe_applied = applied == RPC_APPLIED_UNKNOWN;
    switch (status) {
        case RPC_STATUS_OK:
        case RPC_STATUS_INVALID_ARGUMENT:
        case RPC_STATUS_FAILED_PRECONDITION:
        case RPC_STATUS_PERMISSION_DENIED:
            d.final = true;
            break;
        case RPC_STATUS_UNKNOWN:
        case RPC_STATUS_DEADLINE_EXCEEDED:
            /* A node that forwarded the call may answer its own deadline
             * with applied FALSE although the leader had it: only the
             * answering layer knows, so a deadline is always unknown. */
            d.maybe_applied = true;
            break;
        case RPC_STATUS_UNAVAILABLE:
        case RPC_STATUS_RESOURCE_EXHAUSTED:
        case RPC_STATUS_WRONG_GROUP:
        case RPC_STATUS_MOVING:
            break;
        default:
            /* Not a value envelope_decode lets through; be safe. */
            d.maybe_applied = true;
            break;
    }
    return d;
}

enum once_status client_status_from_rpc(enum rpc_status s)
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
            return (enum once_status)s;
        case RPC_STATUS_WRONG_GROUP:
        case RPC_STATUS_MOVING:
            return ONCE_STATUS_UNAVAILABLE;
    }
    return ONCE_STATUS_UNKNOWN;
}

enum once_status client_status_of_channel(int rv, bool sent)
{
    if (rv == RPC_E_TIMEOUT) {
        return ONCE_STATUS_DEADLINE_EXCEEDED;
    }
    return sent ? ONCE_STATUS_UNKNOWN : ONCE_STATUS_UNAVAILABLE;
}

unsigned client_backoff_next(unsigned prev_ms)
{
    if (prev_ms == 0) {
        return CLIENT_BACKOFF_FIRST_MS;
    }
    if (prev_ms >= CLIENT_BACKOFF_MAX_MS / 2) {
        return CLIENT_BACKOFF_MAX_MS;
    }
    return prev_ms * 2;
}

uint64_t client_attempt_budget(uint64_t remaining_ms, bool split)
{
    uint64_t half = remaining_ms / 2;

    if (!split || remaining_ms <= 2 * (uint64_t)CLIENT_ATTEMPT_MIN_MS) {
        return remaining_ms;
    }
    return half > CLIENT_ATTEMPT_MIN_MS ? half : CLIENT_ATTEMPT_MIN_MS;
}

/* ------------------------------------------------------------------------
 * Argument checks
 * ---------------------------------------------------------------------- */

static bool check_bytes(const char *name,
                        const uint8_t *p,
                        size_t len,
                        size_t min,
                        size_t max,
                        char *err)
{
    if (len < min || len > max) {
        err_printf(err, "%s: %zu bytes, must be %zu..%zu", name, len, min, max);
        return false;
    }
    if (len > 0 && p == NULL) {
        err_printf(err, "%s: NULL with a length of %zu", name, len);
        return false;
    }
    return true;
}

bool client_check_timeout(uint32_t timeout_ms, char *err)
{
    if (timeout_ms > RPC_DEADLINE_MAX) {
        err_printf(err, "timeout_ms: %u, at most %u", timeout_ms,
                   RPC_DEADLINE_MAX);
        return false;
    }
    return true;
}

bool client_check_options(const struct once_options *o, char *err)
{
    struct sockaddr_in sa;

    if (o == NULL) {
        err_printf(err, "options: NULL");
        return false;
    }
    if (o->addrs == NULL || o->n_addrs == 0) {
        err_printf(err, "addrs: no address given");
        return false;
    }
    if (o->n_addrs > ONCE_ADDRS_MAX) {
        err_printf(err, "addrs: %zu addresses, at most %d", o->n_addrs,
                   ONCE_ADDRS_MAX);
        return false;
    }
    for (size_t i = 0; i < o->n_addrs; i++) {
        const char *a = o->addrs[i];

        if (a == NULL) {
            err_printf(err, "addrs[%zu]: NULL", i);
            return false;
        }
        if (strnlen(a, ONCE_ADDR_MAX + 1) > ONCE_ADDR_MAX) {
            err_printf(err, "addrs[%zu]: longer than %d bytes", i,
                       ONCE_ADDR_MAX);
            return false;
        }
        if (rpc_addr_parse(a, &sa) != 0) {
            err_printf(err, "addrs[%zu]: \"%s\" is not IPv4 IP:PORT", i, a);
            return false;
        }
    }
    if (!client_check_timeout(o->timeout_ms, err)) {
        return false;
    }
    if (o->max_inflight > CLIENT_INFLIGHT_MAX) {
        err_printf(err, "max_inflight: %u, at most %u", o->max_inflight,
                   CLIENT_INFLIGHT_MAX);
        return false;
    }
    return true;
}

bool client_check_record(const uint8_t *scope,
                         size_t scope_len,
                         const uint8_t *key,
                         size_t key_len,
                         char *err)
{
    return check_bytes("scope", scope, scope_len, 1, ONCE_SCOPE_MAX, err) &&
           check_bytes("key", key, key_len, 1, ONCE_KEY_MAX, err);
}

bool client_check_claim(const struct once_claim *a, char *err)
{
    if (a == NULL) {
        err_printf(err, "claim: NULL");
        return false;
    }
    if (!client_check_record(a->scope, a->scope_len, a->key, a->key_len, err) ||
        !check_bytes("execution_id", a->execution_id, a->execution_id_len, 0,
                     ONCE_EXECUTION_ID_MAX, err) ||
        !check_bytes("payload_hash", a->payload_hash, a->payload_hash_len, 0,
                     ONCE_PAYLOAD_HASH_MAX, err) ||
        !client_check_timeout(a->timeout_ms, err)) {
        return false;
    }
    if (a->kind != ONCE_NONCE && a->kind != ONCE_IDEMPOTENT) {
        err_printf(err, "kind: %d, must be ONCE_NONCE or ONCE_IDEMPOTENT",
                   (int)a->kind);
        return false;
    }
    if (a->ttl_ms == 0 && !a->has_ts) {
        err_printf(err,
                   "ttl_ms: 0 (none) requires has_ts with ts_ms and window_ms");
        return false;
    }
    if (a->has_ts && a->window_ms == 0) {
        err_printf(err, "window_ms: required (at least 1) with has_ts");
        return false;
    }
    if (!a->has_ts && (a->window_ms != 0 || a->ts_ms != 0)) {
        err_printf(err, "ts_ms/window_ms: given without has_ts");
        return false;
    }
    if (a->kind == ONCE_NONCE && a->payload_hash_len > 0) {
        err_printf(err, "payload_hash: only for ONCE_IDEMPOTENT claims");
        return false;
    }
    if (a->kind == ONCE_NONCE && a->lease_ms != 0) {
        err_printf(err, "lease_ms: only for ONCE_IDEMPOTENT claims");
        return false;
    }
    if (a->max_uses > ONCE_MAX_USES ||
        (a->kind != ONCE_NONCE && a->max_uses > 1)) {
        err_printf(err, "max_uses: 0..%d, ONCE_NONCE claims only",
                   ONCE_MAX_USES);
        return false;
    }
    if (a->sliding && (a->kind != ONCE_IDEMPOTENT || a->ttl_ms == 0)) {
        err_printf(err, "sliding: only ONCE_IDEMPOTENT claims with ttl_ms");
        return false;
    }
    return true;
}

bool client_check_complete(const struct once_complete *a, char *err)
{
    if (a == NULL) {
        err_printf(err, "complete: NULL");
        return false;
    }
    return client_check_record(a->scope, a->scope_len, a->key, a->key_len,
                               err) &&
           check_bytes("result", a->result, a->result_len, 0, ONCE_RESULT_MAX,
                       err) &&
           client_check_timeout(a->timeout_ms, err);
}

bool client_check_release(const struct once_release *a, char *err)
{
    if (a == NULL) {
        err_printf(err, "release: NULL");
        return false;
    }
    if (!client_check_record(a->scope, a->scope_len, a->key, a->key_len, err) ||
        !check_bytes("error", a->error, a->error_len, 0, ONCE_ERROR_MAX, err) ||
        !client_check_timeout(a->timeout_ms, err)) {
        return false;
    }
    if (!a->terminal && a->error_len > 0) {
        err_printf(
            err, "error: only with terminal (a plain release keeps no error)");
        return false;
    }
    return true;
}

bool client_check_role(enum once_role role, char *err)
{
    if (role != ONCE_ROLE_VOTER && role != ONCE_ROLE_STANDBY &&
        role != ONCE_ROLE_SPARE) {
        err_printf(err,
                   "role: %d, must be ONCE_ROLE_VOTER, ONCE_ROLE_STANDBY or "
                   "ONCE_ROLE_SPARE",
                   (int)role);
        return false;
    }
    return true;
}

static bool check_addr_field(const char *name,
                             const char *a,
                             size_t size,
                             char *err)
{
    struct sockaddr_in sa;

    if (memchr(a, '\0', size) == NULL) {
        err_printf(err, "%s: not NUL-terminated within %zu bytes", name, size);
        return false;
    }
    if (rpc_addr_parse(a, &sa) != 0) {
        err_printf(err, "%s: \"%s\" is not IPv4 IP:PORT", name, a);
        return false;
    }
    return true;
}

bool client_check_member(const struct once_member *m, char *err)
{
    if (m == NULL) {
        err_printf(err, "member: NULL");
        return false;
    }
    if (m->id == 0) {
        err_printf(err, "id: must not be 0");
        return false;
    }
    return check_addr_field("raft_addr", m->raft_addr, sizeof m->raft_addr,
                            err) &&
           check_addr_field("client_addr", m->client_addr,
                            sizeof m->client_addr, err) &&
           client_check_role(m->role, err);
}

/* ------------------------------------------------------------------------
 * Request bodies
 * ---------------------------------------------------------------------- */

static ProtobufCBinaryData bin(const uint8_t *p, size_t len)
{
    ProtobufCBinaryData b;

    b.len = len;
    b.data = len > 0 ? (uint8_t *)p : NULL;
    return b;
}

static int pack(const ProtobufCMessage *m, uint8_t **out, size_t *out_len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    /* An empty message packs to 0 bytes: keep a valid pointer anyway. */
    uint8_t *buf = malloc(n > 0 ? n : 1);

    *out = NULL;
    *out_len = 0;
    if (buf == NULL) {
        return -ENOMEM;
    }
    *out_len = protobuf_c_message_pack(m, buf);
    *out = buf;
    return 0;
}

/* ClaimRequest's field numbers (proto/once_rpc.proto). */
enum {
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
    CLAIM_FIELDS = 13,
};

/* A claim is packed by hand, protobuf-c's bytes exactly (fields in number
 * order, proto3 defaults left out; test_client.c compares the two on
 * random claims): protobuf-c's reflective pack cost ~1,900 instructions
 * per item of a batch (callgrind, once-bench --batch 256). */
int client_pack_claim(const struct once_claim *a,
                      const uint8_t request_id[ONCE_ID_LEN],
                      uint8_t **out,
                      size_t *out_len)
{
    uint64_t ts = a->has_ts ? a->ts_ms : 0;
    uint64_t window = a->has_ts ? a->window_ms : 0;
    uint32_t uses = a->max_uses > 1 ? a->max_uses : 0;
    size_t n;
    uint8_t *buf, *p;

    /* A field added to the schema must be written here first. */
    ONCE_ASSERT(once__rpc__claim_request__descriptor.n_fields == CLAIM_FIELDS,
                "client_pack_claim writes every field of the schema");
    n = pbw_size_len_opt(CLAIM_SCOPE, a->scope_len) +
        pbw_size_len_opt(CLAIM_KEY, a->key_len) +
        pbw_size_len_req(CLAIM_REQUEST_ID, ONCE_ID_LEN) +
        pbw_size_len_opt(CLAIM_EXECUTION_ID, a->execution_id_len) +
        pbw_size_i32_opt(CLAIM_KIND, (int32_t)a->kind) +
        pbw_size_u64_opt(CLAIM_TTL_MS, a->ttl_ms) +
        pbw_size_u64_opt(CLAIM_HAS_TS, a->has_ts) +
        pbw_size_u64_opt(CLAIM_TS_MS, ts) +
        pbw_size_u64_opt(CLAIM_WINDOW_MS, window) +
        pbw_size_len_opt(CLAIM_PAYLOAD_HASH, a->payload_hash_len) +
        pbw_size_u64_opt(CLAIM_LEASE_MS, a->lease_ms) +
        pbw_size_u64_opt(CLAIM_MAX_USES, uses) +
        pbw_size_u64_opt(CLAIM_SLIDING, a->sliding);
    *out = NULL;
    *out_len = 0;
    buf = malloc(n);
    if (buf == NULL) {
        return -ENOMEM;
    }
    p = pbw_put_len_opt(buf, CLAIM_SCOPE, a->scope, a->scope_len);
    p = pbw_put_len_opt(p, CLAIM_KEY, a->key, a->key_len);
    p = pbw_put_len_req(p, CLAIM_REQUEST_ID, request_id, ONCE_ID_LEN);
    p = pbw_put_len_opt(p, CLAIM_EXECUTION_ID, a->execution_id,
                        a->execution_id_len);
    p = pbw_put_i32_opt(p, CLAIM_KIND, (int32_t)a->kind);
    p = pbw_put_u64_opt(p, CLAIM_TTL_MS, a->ttl_ms);
    p = pbw_put_bool_opt(p, CLAIM_HAS_TS, a->has_ts);
    p = pbw_put_u64_opt(p, CLAIM_TS_MS, ts);
    p = pbw_put_u64_opt(p, CLAIM_WINDOW_MS, window);
    p = pbw_put_len_opt(p, CLAIM_PAYLOAD_HASH, a->payload_hash,
                        a->payload_hash_len);
    p = pbw_put_u64_opt(p, CLAIM_LEASE_MS, a->lease_ms);
    p = pbw_put_u64_opt(p, CLAIM_MAX_USES, uses);
    p = pbw_put_bool_opt(p, CLAIM_SLIDING, a->sliding);
    ONCE_ASSERT((size_t)(p - buf) == n, "the claim packs to its size");
    *out = buf;
    *out_len = n;
    return 0;
}

int client_pack_complete(const struct once_complete *a,
                         const uint8_t request_id[ONCE_ID_LEN],
                         uint8_t **out,
                         size_t *out_len)
{
    Once__Rpc__CompleteRequest m = ONCE__RPC__COMPLETE_REQUEST__INIT;
    Once__Rpc__OwnerToken t = ONCE__RPC__OWNER_TOKEN__INIT;

    t.group_id = a->owner_token.group_id;
    t.index = a->owner_token.index;
    t.slot = a->owner_token.slot;
    m.scope = bin(a->scope, a->scope_len);
    m.key = bin(a->key, a->key_len);
    m.owner_token = &t;
    m.result = bin(a->result, a->result_len);
    m.request_id = bin(request_id, ONCE_ID_LEN);
    return pack(&m.base, out, out_len);
}

int client_pack_release(const struct once_release *a,
                        const uint8_t request_id[ONCE_ID_LEN],
                        uint8_t **out,
                        size_t *out_len)
{
    Once__Rpc__ReleaseRequest m = ONCE__RPC__RELEASE_REQUEST__INIT;
    Once__Rpc__OwnerToken t = ONCE__RPC__OWNER_TOKEN__INIT;

    t.group_id = a->owner_token.group_id;
    t.index = a->owner_token.index;
    t.slot = a->owner_token.slot;
    m.scope = bin(a->scope, a->scope_len);
    m.key = bin(a->key, a->key_len);
    m.owner_token = &t;
    m.terminal = a->terminal;
    m.error = bin(a->error, a->error_len);
    m.request_id = bin(request_id, ONCE_ID_LEN);
    return pack(&m.base, out, out_len);
}

int client_pack_record(enum rpc_method method,
                       const uint8_t *scope,
                       size_t scope_len,
                       const uint8_t *key,
                       size_t key_len,
                       uint8_t **out,
                       size_t *out_len)
{
    if (method == RPC_METHOD_FORGET) {
        Once__Rpc__ForgetRequest m = ONCE__RPC__FORGET_REQUEST__INIT;

        m.scope = bin(scope, scope_len);
        m.key = bin(key, key_len);
        return pack(&m.base, out, out_len);
    } else {
        Once__Rpc__LookupRequest m = ONCE__RPC__LOOKUP_REQUEST__INIT;

        m.scope = bin(scope, scope_len);
        m.key = bin(key, key_len);
        return pack(&m.base, out, out_len);
    }
}

int client_pack_lookup(const uint8_t *scope,
                       size_t scope_len,
                       const uint8_t *key,
                       size_t key_len,
                       bool leader_only,
                       uint8_t **out,
                       size_t *out_len)
{
    Once__Rpc__LookupRequest m = ONCE__RPC__LOOKUP_REQUEST__INIT;

    m.scope = bin(scope, scope_len);
    m.key = bin(key, key_len);
    m.leader_only = leader_only;
    return pack(&m.base, out, out_len);
}

int client_pack_member_add(const struct once_member *m,
                           uint8_t **out,
                           size_t *out_len)
{
    Once__Rpc__MembersAddRequest req = ONCE__RPC__MEMBERS_ADD_REQUEST__INIT;
    Once__Rpc__Member mm = ONCE__RPC__MEMBER__INIT;

    mm.id = m->id;
    mm.raft_addr = (char *)m->raft_addr;
    mm.client_addr = (char *)m->client_addr;
    mm.role = (Once__Rpc__Role)m->role;
    req.member = &mm;
    return pack(&req.base, out, out_len);
}

int client_pack_status(bool state_digest, uint8_t **out, size_t *out_len)
{
    Once__Rpc__StatusRequest m = ONCE__RPC__STATUS_REQUEST__INIT;

    m.state_digest = state_digest;
    return pack(&m.base, out, out_len);
}

int client_pack_quota_set(const char *pattern,
                          size_t len,
                          uint64_t max_records,
                          uint64_t max_bytes,
                          bool remove,
                          uint8_t **out,
                          size_t *out_len)
{
    Once__Rpc__QuotaSetRequest m = ONCE__RPC__QUOTA_SET_REQUEST__INIT;

    m.pattern.data = (uint8_t *)pattern;
    m.pattern.len = len;
    m.max_records = max_records;
    m.max_bytes = max_bytes;
    m.remove = remove;
    return pack(&m.base, out, out_len);
}

int client_pack_schema_upgrade(uint32_t target, uint8_t **out, size_t *out_len)
{
    Once__Rpc__SchemaUpgradeRequest m = ONCE__RPC__SCHEMA_UPGRADE_REQUEST__INIT;

    m.target = target;
    return pack(&m.base, out, out_len);
}

int client_pack_backup(enum rpc_method method,
                       uint64_t backup_id,
                       uint64_t offset,
                       uint32_t max_bytes,
                       uint8_t **out,
                       size_t *out_len)
{
    if (method == RPC_METHOD_BACKUP_READ) {
        Once__Rpc__BackupReadRequest m = ONCE__RPC__BACKUP_READ_REQUEST__INIT;

        m.backup_id = backup_id;
        m.offset = offset;
        m.max_bytes = max_bytes;
        return pack(&m.base, out, out_len);
    }
    Once__Rpc__BackupCloseRequest m = ONCE__RPC__BACKUP_CLOSE_REQUEST__INIT;

    m.backup_id = backup_id;
    return pack(&m.base, out, out_len);
}

int client_pack_id(enum rpc_method method,
                   uint64_t id,
                   enum once_role role,
                   bool force,
                   uint8_t **out,
                   size_t *out_len)
{
    switch (method) {
        case RPC_METHOD_MEMBERS_REMOVE: {
            Once__Rpc__MembersRemoveRequest m =
                ONCE__RPC__MEMBERS_REMOVE_REQUEST__INIT;

            m.id = id;
            m.force = force;
            return pack(&m.base, out, out_len);
        }
        case RPC_METHOD_MEMBERS_ASSIGN: {
            Once__Rpc__MembersAssignRequest m =
                ONCE__RPC__MEMBERS_ASSIGN_REQUEST__INIT;

            m.id = id;
            m.role = (Once__Rpc__Role)role;
            m.force = force;
            return pack(&m.base, out, out_len);
        }
        default: {
            Once__Rpc__TransferRequest m = ONCE__RPC__TRANSFER_REQUEST__INIT;

            m.id = id;
            return pack(&m.base, out, out_len);
        }
    }
}
