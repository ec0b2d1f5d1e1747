/* client/wire_read.c: the pure parts of libonce that face the server (see
 * client.h): answers converted into once.h's results (the decode side;
 * wire.c encodes the requests).
 *
 * Answers come from the network, so every field is checked against
 * once.h's bounds before it is copied into fixed-size result fields; an
 * answer that breaks one is refused whole (the caller makes it UNKNOWN or
 * UNAVAILABLE), never truncated into something that looks valid. The hot
 * answers (a claim's, a batch's) are read by answer_read.c's hand reader
 * first (client_read_body_fast), by protobuf-c if it declines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/assert.h"
#include "common/crc32c.h"
#include "rpc/conn.h"

#define REASON_MAX  (sizeof(((struct once_result *)0)->reason) - 1)
#define BACKEND_MAX (sizeof(((struct once_status_info *)0)->store_backend) - 1)
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
    if (res->max_uses > ONCE_MAX_USES || res->uses > res->max_uses ||
        res->uses_left > res->max_uses) {
        err_printf(err, "result.uses: out of bounds");
        return RPC_E_PROTOCOL;
    }
    r->max_uses = res->max_uses;
    r->uses = res->uses;
    r->uses_left = res->uses_left;
    r->sliding = res->sliding;
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
    out->no_vote_cut_index = s->no_vote_cut_index;
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

static bool rpc_status_known(int st)
{
    switch (st) {
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
        default:
            return false;
    }
}

/* One item of a ClaimBatch answer into @r (cleared first). */
int client_read_batch_item(size_t k,
                           const Once__Rpc__ClaimBatchItem *it,
                           struct once_result *r,
                           char *err)
{
    char why[ERR_MSG_SIZE];

    once_result_clear(r);
    if (it == NULL) {
        err_printf(err, "items[%zu]: missing", k);
        return RPC_E_PROTOCOL;
    }
    if (it->status == ONCE__RPC__STATUS__STATUS_OK) {
        if (it->applied != ONCE__RPC__APPLIED__APPLIED_UNSPECIFIED ||
            it->result == NULL) {
            err_printf(err, "items[%zu]: OK needs a result and no applied", k);
            return RPC_E_PROTOCOL;
        }
        if (client_read_result(it->result, r, why) != 0) {
            err_printf(err, "items[%zu].%s", k, why);
            return RPC_E_PROTOCOL;
        }
        r->status = ONCE_STATUS_OK;
        r->applied = ONCE_APPLIED_NONE;
        return 0;
    }
    if (!rpc_status_known((int)it->status) ||
        (it->applied != ONCE__RPC__APPLIED__APPLIED_FALSE &&
         it->applied != ONCE__RPC__APPLIED__APPLIED_UNKNOWN) ||
        it->error.len > ONCE_ERROR_MAX ||
        (it->error.len > 0 &&
         memchr(it->error.data, 0, it->error.len) != NULL)) {
        err_printf(err, "items[%zu]: status, applied or error out of bounds",
                   k);
        return RPC_E_PROTOCOL;
    }
    r->status = client_status_from_rpc((enum rpc_status)it->status);
    r->applied = it->applied == ONCE__RPC__APPLIED__APPLIED_UNKNOWN
                     ? ONCE_APPLIED_UNKNOWN
                     : ONCE_APPLIED_FALSE;
    if (it->error.len > 0) {
        memcpy(r->error, it->error.data, it->error.len);
    }
    r->error[it->error.len] = '\0';
    return 0;
}

static int read_batch(const Once__Rpc__ClaimBatchResponse *m,
                      const struct client_outputs *out,
                      struct once_result *r,
                      char *err)
{
    const struct client_batch_out *b = out != NULL ? out->batch : NULL;

    if (b == NULL) {
        err_printf(err, "ClaimBatch answer without a place for its items");
        return -EINVAL;
    }
    if (m->n_items != b->n) {
        err_printf(err, "items: %zu answered for %zu sent", m->n_items, b->n);
        return RPC_E_PROTOCOL;
    }
    for (size_t k = 0; k < b->n; k++) {
        int rv = client_read_batch_item(k, m->items[k], &b->rs[b->idx[k]], err);

        if (rv != 0) {
            return rv;
        }
    }
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
            r->served_by = ((const Once__Rpc__LookupResponse *)body)->served_by;
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
        case RPC_METHOD_CLAIM_BATCH:
            return read_batch((const Once__Rpc__ClaimBatchResponse *)body, out,
                              r, err);
        case RPC_METHOD_READ_INDEX: /* node to node: libonce never asks */
        case RPC_METHOD_UNSPECIFIED:
            break;
    }
    err_printf(err, "no answer body for method %d", (int)method);
    return RPC_E_PROTOCOL;
}

/* The hot answers by answer_read.c's hand reader (client.h). */

/* ClaimBatchResponse.items, each straight into its result. Any item the
 * reader declines or the checks refuse declines the whole answer, so that
 * the protobuf-c path gives the exact verdict and message (it decodes
 * every item before it checks any); the results written so far are
 * rewritten there, each cleared first. */
static int read_batch_fast(const uint8_t *buf,
                           size_t len,
                           const struct client_outputs *out,
                           struct once_result *r,
                           char *err)
{
    const struct client_batch_out *b = out != NULL ? out->batch : NULL;
    struct client_pb_item item;
    const uint8_t *data;
    uint64_t value;
    uint32_t number;
    unsigned wire;
    size_t n = 0, at, used;

    if (b == NULL) {
        return 1;
    }
    for (at = 0; at < len; at += used) {
        used = pbr_field(buf + at, len - at, &number, &wire, &value, &data);
        if (used == 0 || number != 1 || wire != PBW_LEN || ++n > b->n) {
            return 1;
        }
    }
    if (n != b->n) {
        return 1; /* protobuf-c's path names the count */
    }
    n = 0;
    for (at = 0; at < len; at += used) {
        used = pbr_field(buf + at, len - at, &number, &wire, &value, &data);
        ONCE_ASSERT(used > 0, "the first pass read it");
        if (!client_pb_item(data, (size_t)value, &item) ||
            client_read_batch_item(n, &item.item, &b->rs[b->idx[n]], err) !=
                0) {
            return 1;
        }
        n++;
    }
    r->outcome = ONCE_OK;
    return 0;
}

int client_read_body_fast(enum rpc_method method,
                          const uint8_t *body,
                          size_t len,
                          struct once_result *r,
                          const struct client_outputs *out,
                          char *err)
{
    struct client_pb_result res;
    const uint8_t *inner;
    size_t inner_len;

    switch (method) {
        case RPC_METHOD_CLAIM:
        case RPC_METHOD_COMPLETE:
        case RPC_METHOD_RELEASE:
        case RPC_METHOD_FORGET:
            /* <Method>Response { Result result = 1; }: one field. The
             * Result decoded, protobuf-c would give these very fields, so
             * the checks' verdict is final. */
            if (!pbr_only_field(body, len, 1, &inner, &inner_len) ||
                !client_pb_result(inner, inner_len, &res)) {
                return 1;
            }
            return client_read_result(&res.res, r, err);
        case RPC_METHOD_CLAIM_BATCH:
            return read_batch_fast(body, len, out, r, err);
        default:
            return 1;
    }
}
