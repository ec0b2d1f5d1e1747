/* client/wire.c: the pure parts of libonce (see client.h): argument checks,
 * request bodies, answer conversion and the retry decision.
 *
 * Answers come from the network, so every field is checked against
 * once.h's bounds before it is copied into fixed-size result fields; an
 * answer that breaks one is refused whole (the caller makes it UNKNOWN or
 * UNAVAILABLE), never truncated into something that looks valid. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/crc32c.h"
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
#define REASON_MAX          (sizeof(((struct once_result *)0)->reason) - 1)
#define BACKEND_MAX         (sizeof(((struct once_status_info *)0)->store_backend) - 1)

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

int client_pack_claim(const struct once_claim *a,
                      const uint8_t request_id[ONCE_ID_LEN],
                      uint8_t **out,
                      size_t *out_len)
{
    Once__Rpc__ClaimRequest m = ONCE__RPC__CLAIM_REQUEST__INIT;

    m.scope = bin(a->scope, a->scope_len);
    m.key = bin(a->key, a->key_len);
    m.request_id = bin(request_id, ONCE_ID_LEN);
    m.execution_id = bin(a->execution_id, a->execution_id_len);
    m.kind = (Once__Rpc__Kind)a->kind;
    m.ttl_ms = a->ttl_ms;
    m.has_ts = a->has_ts;
    if (a->has_ts) {
        m.ts_ms = a->ts_ms;
        m.window_ms = a->window_ms;
    }
    m.payload_hash = bin(a->payload_hash, a->payload_hash_len);
    m.lease_ms = a->lease_ms;
    return pack(&m.base, out, out_len);
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

/* ------------------------------------------------------------------------
 * Answers
 * ---------------------------------------------------------------------- */

static bool outcome_known(int o)
{
    return o >= ONCE_ACCEPTED && o <= ONCE_FAILED_PRECONDITION;
}

/* A protobuf-c string: NUL-terminated (the decoder adds it), NULL only in
 * a hand-built message; @max bytes at most. */
static bool check_string(const char *name, const char *s, size_t max, char *err)
{
    if (s != NULL && strnlen(s, max + 1) > max) {
        err_printf(err, "%s: longer than %zu bytes", name, max);
        return false;
    }
    return true;
}

static void copy_string(char *dst, const char *s)
{
    /* Checked against the destination's size before. */
    strcpy(dst, s != NULL ? s : "");
}

static bool read_attempt(size_t i,
                         const Once__Rpc__Attempt *a,
                         struct once_attempt *out,
                         char *err)
{
    if (a == NULL) {
        err_printf(err, "result.attempts[%zu]: missing", i);
        return false;
    }
    if (a->request_id.len != ONCE_ID_LEN) {
        err_printf(err,
                   "result.attempts[%zu].request_id: %zu bytes, must be %d", i,
                   a->request_id.len, ONCE_ID_LEN);
        return false;
    }
    if (a->execution_id.len > ONCE_EXECUTION_ID_MAX) {
        err_printf(err,
                   "result.attempts[%zu].execution_id: %zu bytes, at most %d",
                   i, a->execution_id.len, ONCE_EXECUTION_ID_MAX);
        return false;
    }
    if (!outcome_known((int)a->outcome)) {
        err_printf(err, "result.attempts[%zu].outcome: unknown value %d", i,
                   (int)a->outcome);
        return false;
    }
    memset(out, 0, sizeof *out);
    memcpy(out->request_id, a->request_id.data, ONCE_ID_LEN);
    if (a->execution_id.len > 0) {
        memcpy(out->execution_id, a->execution_id.data, a->execution_id.len);
    }
    out->execution_id_len = a->execution_id.len;
    out->index = a->index;
    out->time_ms = a->time_ms;
    out->outcome = (enum once_outcome)a->outcome;
    out->retry = a->retry;
    return true;
}

int client_read_result(const Once__Rpc__Result *res,
                       struct once_result *r,
                       char *err)
{
    if (res == NULL) {
        err_printf(err, "answer without a result");
        return RPC_E_PROTOCOL;
    }
    if (!outcome_known((int)res->outcome)) {
        err_printf(err, "result.outcome: unknown value %d", (int)res->outcome);
        return RPC_E_PROTOCOL;
    }
    if (res->request_id.len != 0 && res->request_id.len != ONCE_ID_LEN) {
        err_printf(err, "result.request_id: %zu bytes, must be %d",
                   res->request_id.len, ONCE_ID_LEN);
        return RPC_E_PROTOCOL;
    }
    if (res->first_request_id.len != 0 &&
        res->first_request_id.len != ONCE_ID_LEN) {
        err_printf(err, "result.first_request_id: %zu bytes, must be %d",
                   res->first_request_id.len, ONCE_ID_LEN);
        return RPC_E_PROTOCOL;
    }
    if (res->n_attempts > ONCE_ATTEMPTS_MAX) {
        err_printf(err, "result.attempts: %zu, at most %d", res->n_attempts,
                   ONCE_ATTEMPTS_MAX);
        return RPC_E_PROTOCOL;
    }
    if (res->has_owner_token && res->owner_token == NULL) {
        err_printf(err, "result.owner_token: missing with has_owner_token");
        return RPC_E_PROTOCOL;
    }
    if (res->result.len > ONCE_RESULT_MAX) {
        err_printf(err, "result.result: %zu bytes, at most %d", res->result.len,
                   ONCE_RESULT_MAX);
        return RPC_E_PROTOCOL;
    }
    if (res->stored_error.len > ONCE_ERROR_MAX) {
        err_printf(err, "result.stored_error: %zu bytes, at most %d",
                   res->stored_error.len, ONCE_ERROR_MAX);
        return RPC_E_PROTOCOL;
    }
    if (!check_string("result.reason", res->reason, REASON_MAX, err)) {
        return RPC_E_PROTOCOL;
    }
    if ((int)res->kind < 0 || (int)res->kind > ONCE_IDEMPOTENT) {
        err_printf(err, "result.kind: unknown value %d", (int)res->kind);
        return RPC_E_PROTOCOL;
    }
    if ((int)res->state < 0 || (int)res->state > ONCE_STATE_FAILED) {
        err_printf(err, "result.state: unknown value %d", (int)res->state);
        return RPC_E_PROTOCOL;
    }
    for (size_t i = 0; i < res->n_attempts; i++) {
        if (!read_attempt(i, res->attempts[i], &r->attempts[i], err)) {
            return RPC_E_PROTOCOL;
        }
    }
    r->n_attempts = res->n_attempts;
    r->outcome = (enum once_outcome)res->outcome;
    r->retry = res->retry;
    r->log_time_ms = res->log_time_ms;
    r->has_first = res->first_request_id.len == ONCE_ID_LEN;
    if (r->has_first) {
        memcpy(r->first_request_id, res->first_request_id.data, ONCE_ID_LEN);
    }
    r->first_index = res->first_index;
    r->first_time_ms = res->first_time_ms;
    r->attempts_total = res->attempts_total;
    r->has_owner_token = res->has_owner_token;
    if (res->has_owner_token) {
        r->owner_token.group_id = res->owner_token->group_id;
        r->owner_token.index = res->owner_token->index;
        r->owner_token.slot = res->owner_token->slot;
    }
    if (res->result.len > 0) {
        uint8_t *copy = malloc(res->result.len);

        if (copy == NULL) {
            err_printf(err, "out of memory copying a %zu-byte result",
                       res->result.len);
            return RPC_E_NOMEM;
        }
        memcpy(copy, res->result.data, res->result.len);
        free(r->result);
        r->result = copy;
        r->result_len = res->result.len;
    }
    if (res->stored_error.len > 0) {
        memcpy(r->stored_error, res->stored_error.data, res->stored_error.len);
    }
    r->stored_error[res->stored_error.len] = '\0';
    r->stored_error_len = res->stored_error.len;
    r->retry_after_ms = res->retry_after_ms;
    copy_string(r->reason, res->reason);
    r->kind = (enum once_kind)res->kind;
    r->state = (enum once_state)res->state;
    r->expires_ms = res->expires_ms;
    r->lease_expires_ms = res->lease_expires_ms;
    r->owner_attempt = res->owner_attempt;
    return 0;
}

static bool read_member(const char *what,
                        size_t i,
                        const Once__Rpc__Member *m,
                        struct once_member *out,
                        char *err)
{
    char name[64];

    if (m == NULL) {
        err_printf(err, "%s[%zu]: missing", what, i);
        return false;
    }
    if (m->id == 0) {
        err_printf(err, "%s[%zu].id: 0", what, i);
        return false;
    }
    snprintf(name, sizeof name, "%s[%zu].raft_addr", what, i);
    if (!check_string(name, m->raft_addr, ONCE_ADDR_MAX, err)) {
        return false;
    }
    snprintf(name, sizeof name, "%s[%zu].client_addr", what, i);
    if (!check_string(name, m->client_addr, ONCE_ADDR_MAX, err)) {
        return false;
    }
    if ((int)m->role < 0 || (int)m->role > ONCE_ROLE_SPARE) {
        err_printf(err, "%s[%zu].role: unknown value %d", what, i,
                   (int)m->role);
        return false;
    }
    memset(out, 0, sizeof *out);
    out->id = m->id;
    copy_string(out->raft_addr, m->raft_addr);
    copy_string(out->client_addr, m->client_addr);
    out->role = (enum once_role)m->role;
    out->reachable = m->reachable;
    return true;
}

static int read_members(const char *what,
                        size_t n,
                        Once__Rpc__Member *const *ms,
                        struct once_member *out,
                        size_t *n_out,
                        char *err)
{
    if (n > ONCE_MEMBERS_MAX) {
        err_printf(err, "%s: %zu members, at most %d", what, n,
                   ONCE_MEMBERS_MAX);
        return RPC_E_PROTOCOL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!read_member(what, i, ms[i], &out[i], err)) {
            return RPC_E_PROTOCOL;
        }
    }
    *n_out = n;
    return 0;
}

static int read_status(const Once__Rpc__StatusResponse *s,
                       struct once_status_info *out,
                       char *err)
{
    if ((int)s->role < 0 || (int)s->role > ONCE_RAFT_UNAVAILABLE) {
        err_printf(err, "status.role: unknown value %d", (int)s->role);
        return RPC_E_PROTOCOL;
    }
    if ((int)s->member_role < 0 || (int)s->member_role > ONCE_ROLE_SPARE) {
        err_printf(err, "status.member_role: unknown value %d",
                   (int)s->member_role);
        return RPC_E_PROTOCOL;
    }
    if (!check_string("status.leader_addr", s->leader_addr, ONCE_ADDR_MAX,
                      err) ||
        !check_string("status.store_backend", s->store_backend, BACKEND_MAX,
                      err)) {
        return RPC_E_PROTOCOL;
    }
    if (s->n_config_voters > ONCE_MEMBERS_MAX) {
        err_printf(err, "status.config_voters: %zu ids, at most %d",
                   s->n_config_voters, ONCE_MEMBERS_MAX);
        return RPC_E_PROTOCOL;
    }
    memset(out, 0, sizeof *out);
    if (read_members("status.members", s->n_members, s->members, out->members,
                     &out->n_members, err) != 0) {
        return RPC_E_PROTOCOL;
    }
    out->role = (enum once_raft_role)s->role;
    out->term = s->term;
    out->commit_index = s->commit_index;
    out->applied_index = s->applied_index;
    out->applied_digest = s->applied_digest;
    out->config_index = s->config_index;
    out->leader_id = s->leader_id;
    copy_string(out->leader_addr, s->leader_addr);
    copy_string(out->store_backend, s->store_backend);
    out->member_role = (enum once_role)s->member_role;
    out->state_digest = s->state_digest;
    if (s->restored_from.len != 0 && s->restored_from.len != ONCE_ID_LEN) {
        err_printf(err, "status.restored_from: %zu bytes, not %d",
                   s->restored_from.len, ONCE_ID_LEN);
        return RPC_E_PROTOCOL;
    }
    out->restored = s->restored_from.len == ONCE_ID_LEN;
    if (out->restored) {
        memcpy(out->restored_from, s->restored_from.data, ONCE_ID_LEN);
    }
    out->restore_time_ms = s->restore_time_ms;
    out->replay_window_until_ms = s->replay_window_until_ms;
    out->restore_stale_ts_ms = s->restore_stale_ts_ms;
    out->backups_open = s->backups_open;
    out->schema = s->schema;
    out->schema_max = s->schema_max;
    out->n_config_voters = s->n_config_voters;
    for (size_t i = 0; i < s->n_config_voters; i++) {
        out->config_voters[i] = s->config_voters[i];
    }
    return 0;
}

static int read_config(const Once__Rpc__ConfigResult *c,
                       struct once_result *r,
                       char *err)
{
    if (c == NULL) {
        err_printf(err, "answer without a configuration result");
        return RPC_E_PROTOCOL;
    }
    if (!outcome_known((int)c->outcome)) {
        err_printf(err, "result.outcome: unknown value %d", (int)c->outcome);
        return RPC_E_PROTOCOL;
    }
    if (!check_string("result.reason", c->reason, REASON_MAX, err)) {
        return RPC_E_PROTOCOL;
    }
    r->outcome = (enum once_outcome)c->outcome;
    copy_string(r->reason, c->reason);
    return 0;
}

static int read_quotas(const Once__Rpc__QuotaListResponse *m,
                       const struct client_outputs *out,
                       char *err)
{
    if (m->n_quotas > ONCE_QUOTAS_MAX) {
        err_printf(err, "quotas: %zu, at most %d", m->n_quotas,
                   ONCE_QUOTAS_MAX);
        return RPC_E_PROTOCOL;
    }
    for (size_t i = 0; i < m->n_quotas; i++) {
        const Once__Rpc__Quota *q = m->quotas[i];
        if (!check_string("quota.pattern", q->pattern, ONCE_PATTERN_MAX, err)) {
            return RPC_E_PROTOCOL;
        }
        if (out == NULL || out->quotas == NULL) {
            continue;
        }
        copy_string(out->quotas[i].pattern, q->pattern);
        out->quotas[i].max_records = q->max_records;
        out->quotas[i].max_bytes = q->max_bytes;
        out->quotas[i].records = q->records;
        out->quotas[i].bytes = q->bytes;
    }
    if (out != NULL && out->n_quotas != NULL) {
        *out->n_quotas = m->n_quotas;
    }
    return 0;
}

/* A chunk goes into the caller's buffer only when it fits and its CRC-32C
 * is the leader's. */
static int read_backup_chunk(const Once__Rpc__BackupReadResponse *m,
                             const struct client_outputs *out,
                             struct once_result *r,
                             char *err)
{
    if (out == NULL || out->buf == NULL || out->buf_n == NULL ||
        out->ready == NULL || out->u64_a == NULL) {
        err_printf(err, "backup read without a buffer");
        return -EINVAL;
    }
    *out->ready = m->ready;
    *out->u64_a = m->total_bytes;
    *out->buf_n = 0;
    if (!m->ready && m->data.len != 0) {
        err_printf(err, "backup data before it is ready");
        return RPC_E_PROTOCOL;
    }
    if (m->data.len > out->buf_cap) {
        err_printf(err, "backup chunk of %zu bytes over the %zu asked",
                   m->data.len, out->buf_cap);
        return RPC_E_PROTOCOL;
    }
    if (m->data.len > 0 && crc32c(0, m->data.data, m->data.len) != m->crc32c) {
        err_printf(err, "backup chunk checksum mismatch");
        return RPC_E_PROTOCOL;
    }
    if (m->data.len > 0) {
        memcpy(out->buf, m->data.data, m->data.len);
    }
    *out->buf_n = m->data.len;
    r->outcome = ONCE_OK;
    return 0;
}

int client_read_body(enum rpc_method method,
                     const ProtobufCMessage *body,
                     struct once_result *r,
                     const struct client_outputs *out,
                     char *err)
{
    if (body == NULL ||
        body->descriptor != envelope_body_descriptor(method, RPC_RESPONSE)) {
        err_printf(err, "answer body is not a %s response",
                   rpc_method_name(method));
        return RPC_E_PROTOCOL;
    }
    switch (method) {
        case RPC_METHOD_CLAIM:
            return client_read_result(
                ((const Once__Rpc__ClaimResponse *)body)->result, r, err);
        case RPC_METHOD_COMPLETE:
            return client_read_result(
                ((const Once__Rpc__CompleteResponse *)body)->result, r, err);
        case RPC_METHOD_RELEASE:
            return client_read_result(
                ((const Once__Rpc__ReleaseResponse *)body)->result, r, err);
        case RPC_METHOD_LOOKUP:
            return client_read_result(
                ((const Once__Rpc__LookupResponse *)body)->result, r, err);
        case RPC_METHOD_FORGET:
            return client_read_result(
                ((const Once__Rpc__ForgetResponse *)body)->result, r, err);
        case RPC_METHOD_STATUS: {
            struct once_status_info scratch;

            if (read_status(
                    (const Once__Rpc__StatusResponse *)body,
                    out != NULL && out->status != NULL ? out->status : &scratch,
                    err) != 0) {
                return RPC_E_PROTOCOL;
            }
            r->outcome = ONCE_OK;
            return 0;
        }
        case RPC_METHOD_MEMBERS_LIST: {
            const Once__Rpc__MembersListResponse *m =
                (const Once__Rpc__MembersListResponse *)body;
            struct once_member scratch[ONCE_MEMBERS_MAX];
            size_t n_scratch;
            bool have =
                out != NULL && out->members != NULL && out->n_members != NULL;

            if (read_members("members", m->n_members, m->members,
                             have ? out->members : scratch,
                             have ? out->n_members : &n_scratch, err) != 0) {
                return RPC_E_PROTOCOL;
            }
            r->outcome = ONCE_OK;
            return 0;
        }
        case RPC_METHOD_MEMBERS_ADD:
            return read_config(
                ((const Once__Rpc__MembersAddResponse *)body)->result, r, err);
        case RPC_METHOD_MEMBERS_REMOVE:
            return read_config(
                ((const Once__Rpc__MembersRemoveResponse *)body)->result, r,
                err);
        case RPC_METHOD_MEMBERS_ASSIGN:
            return read_config(
                ((const Once__Rpc__MembersAssignResponse *)body)->result, r,
                err);
        case RPC_METHOD_TRANSFER:
            if (out != NULL && out->u64_a != NULL) {
                *out->u64_a =
                    ((const Once__Rpc__TransferResponse *)body)->leader_id;
            }
            r->outcome = ONCE_OK;
            return 0;
        case RPC_METHOD_SNAPSHOT_TAKE: {
            const Once__Rpc__SnapshotTakeResponse *s =
                (const Once__Rpc__SnapshotTakeResponse *)body;

            if (out != NULL && out->u64_a != NULL) {
                *out->u64_a = s->index;
            }
            if (out != NULL && out->u64_b != NULL) {
                *out->u64_b = s->size_bytes;
            }
            r->outcome = ONCE_OK;
            return 0;
        }
        case RPC_METHOD_BACKUP_OPEN:
            if (out != NULL && out->u64_a != NULL) {
                *out->u64_a =
                    ((const Once__Rpc__BackupOpenResponse *)body)->backup_id;
            }
            r->outcome = ONCE_OK;
            return 0;
        case RPC_METHOD_BACKUP_READ:
            return read_backup_chunk(
                (const Once__Rpc__BackupReadResponse *)body, out, r, err);
        case RPC_METHOD_BACKUP_CLOSE:
            r->outcome = ONCE_OK;
            return 0;
        case RPC_METHOD_QUOTA_SET:
            return read_config(
                ((const Once__Rpc__QuotaSetResponse *)body)->result, r, err);
        case RPC_METHOD_QUOTA_LIST:
            if (read_quotas((const Once__Rpc__QuotaListResponse *)body, out,
                            err) != 0) {
                return RPC_E_PROTOCOL;
            }
            r->outcome = ONCE_OK;
            return 0;
        case RPC_METHOD_SCHEMA_UPGRADE: {
            const Once__Rpc__SchemaUpgradeResponse *u =
                (const Once__Rpc__SchemaUpgradeResponse *)body;
            if (out != NULL && out->schema != NULL) {
                *out->schema = u->schema;
            }
            return read_config(u->result, r, err);
        }
        case RPC_METHOD_UNSPECIFIED:
            break;
    }
    err_printf(err, "no answer body for method %d", (int)method);
    return RPC_E_PROTOCOL;
}
