/* server/convert.c: wire messages <-> fsm values (convert.h). */
#include "server/convert.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/addr.h"
#include "common/err.h"
#include "rpc/frame.h"
#include "server/batch_pack.h"

/* Numbers of the wire enums equal the fsm's (once_rpc.proto says so). */
_Static_assert((int)ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED == FSM_ACCEPTED,
               "outcome numbers");
_Static_assert((int)ONCE__RPC__OUTCOME__OUTCOME_FAILED_PRECONDITION ==
                   FSM_FAILED_PRECONDITION,
               "outcome numbers");
_Static_assert((int)ONCE__RPC__KIND__KIND_IDEMPOTENT == FSM_KIND_IDEMPOTENT,
               "kind numbers");
_Static_assert((int)ONCE__RPC__STATE__STATE_FAILED == FSM_STATE_FAILED,
               "state numbers");
_Static_assert((int)ONCE__RPC__ROLE__ROLE_SPARE == FSM_ROLE_SPARE,
               "role numbers");

#define REASON_MAX 256

static int check_ident(const ProtobufCBinaryData *scope,
                       const ProtobufCBinaryData *key,
                       char *why)
{
    if (scope->len < 1 || scope->len > FSM_SCOPE_MAX) {
        err_printf(why, "scope: must be 1..%d bytes (got %zu)", FSM_SCOPE_MAX,
                   scope->len);
        return -EINVAL;
    }
    if (key->len < 1 || key->len > FSM_KEY_MAX) {
        err_printf(why, "key: must be 1..%d bytes (got %zu)", FSM_KEY_MAX,
                   key->len);
        return -EINVAL;
    }
    return 0;
}

static int check_request_id(const ProtobufCBinaryData *rid, char *why)
{
    if (rid->len != FSM_REQUEST_ID_LEN) {
        err_printf(why, "request_id: must be exactly %d bytes (got %zu)",
                   FSM_REQUEST_ID_LEN, rid->len);
        return -EINVAL;
    }
    return 0;
}

/* A token names the accepting claim's entry: index 0 never holds one. */
static int check_token(const Once__Rpc__OwnerToken *t,
                       struct fsm_token *out,
                       char *why)
{
    if (t == NULL) {
        err_printf(why, "owner_token: missing");
        return -EINVAL;
    }
    if (t->index == 0) {
        err_printf(why, "owner_token: index must not be 0");
        return -EINVAL;
    }
    out->group_id = t->group_id;
    out->index = t->index;
    out->slot = t->slot;
    return 0;
}

int convert_claim_in(const Once__Rpc__ClaimRequest *in,
                     struct fsm_cmd *out,
                     char *why)
{
    struct fsm_claim *c = &out->u.claim;

    memset(out, 0, sizeof *out);
    out->type = FSM_CMD_CLAIM;
    if (check_ident(&in->scope, &in->key, why) != 0 ||
        check_request_id(&in->request_id, why) != 0) {
        return -EINVAL;
    }
    if (in->execution_id.len > FSM_EXECUTION_ID_MAX) {
        err_printf(why, "execution_id: must be at most %d bytes (got %zu)",
                   FSM_EXECUTION_ID_MAX, in->execution_id.len);
        return -EINVAL;
    }
    if (in->kind != ONCE__RPC__KIND__KIND_NONCE &&
        in->kind != ONCE__RPC__KIND__KIND_IDEMPOTENT) {
        err_printf(why, "kind: must be NONCE or IDEMPOTENT");
        return -EINVAL;
    }
    if (in->ttl_ms == 0 && !in->has_ts) {
        err_printf(why,
                   "ttl_ms: a claim needs a ttl or has_ts with "
                   "ts_ms and window_ms");
        return -EINVAL;
    }
    if (in->ttl_ms > FSM_MAX_TTL_CEIL) {
        err_printf(why, "ttl_ms: must be at most %llu",
                   (unsigned long long)FSM_MAX_TTL_CEIL);
        return -EINVAL;
    }
    if (in->has_ts) {
        if (in->window_ms < 1 || in->window_ms > FSM_MAX_WINDOW_CEIL) {
            err_printf(why, "window_ms: must be 1..%llu with has_ts",
                       (unsigned long long)FSM_MAX_WINDOW_CEIL);
            return -EINVAL;
        }
        if (in->ts_ms > FSM_TIME_MAX) {
            err_printf(why, "ts_ms: must be at most %llu",
                       (unsigned long long)FSM_TIME_MAX);
            return -EINVAL;
        }
    } else if (in->ts_ms != 0 || in->window_ms != 0) {
        err_printf(why, "has_ts: ts_ms and window_ms need has_ts");
        return -EINVAL;
    }
    if (in->max_uses > FSM_MAX_USES) {
        err_printf(why, "max_uses: must be 0..%d", FSM_MAX_USES);
        return -EINVAL;
    }
    if (in->kind == ONCE__RPC__KIND__KIND_NONCE) {
        if (in->payload_hash.len != 0) {
            err_printf(why, "payload_hash: a NONCE claim takes none");
            return -EINVAL;
        }
        if (in->sliding) {
            err_printf(why, "sliding: a NONCE claim cannot slide");
            return -EINVAL;
        }
        if (in->lease_ms != 0) {
            err_printf(why, "lease_ms: a NONCE claim takes no lease");
            return -EINVAL;
        }
    } else {
        if (in->payload_hash.len > FSM_PAYLOAD_HASH_MAX) {
            err_printf(why, "payload_hash: must be at most %d bytes (got %zu)",
                       FSM_PAYLOAD_HASH_MAX, in->payload_hash.len);
            return -EINVAL;
        }
        if (in->lease_ms > FSM_MAX_LEASE_CEIL) {
            err_printf(why, "lease_ms: must be at most %llu",
                       (unsigned long long)FSM_MAX_LEASE_CEIL);
            return -EINVAL;
        }
        if (in->max_uses > 1) {
            err_printf(why, "max_uses: for NONCE claims only");
            return -EINVAL;
        }
        if (in->sliding && in->ttl_ms == 0) {
            err_printf(why, "sliding: needs ttl_ms");
            return -EINVAL;
        }
    }
    c->scope = in->scope.data;
    c->scope_len = in->scope.len;
    c->key = in->key.data;
    c->key_len = in->key.len;
    memcpy(c->request_id, in->request_id.data, FSM_REQUEST_ID_LEN);
    c->execution_id = in->execution_id.data;
    c->execution_id_len = in->execution_id.len;
    c->kind = (enum fsm_kind)in->kind;
    c->ttl_ms = in->ttl_ms;
    c->has_ts = in->has_ts;
    c->ts_ms = in->ts_ms;
    c->window_ms = in->window_ms;
    c->payload_hash = in->payload_hash.data;
    c->payload_hash_len = in->payload_hash.len;
    c->lease_ms = in->lease_ms;
    c->max_uses = in->max_uses;
    c->sliding = in->sliding;
    return 0;
}

int convert_check_claim_schema(const struct fsm_claim *c,
                               uint32_t schema,
                               struct fsm_result *res)
{
    if ((c->max_uses <= 1 && !c->sliding) || schema >= FSM_SCHEMA_NUSE) {
        return 0;
    }
    memset(res, 0, sizeof *res);
    res->cmd = FSM_CMD_CLAIM;
    res->outcome = FSM_FAILED_PRECONDITION;
    res->reason = "schema 3 required (oncectl schema upgrade)";
    return -EPERM;
}

int convert_check_claim_settings(const struct fsm_claim *c,
                                 const struct fsm_settings *s,
                                 char *why)
{
    if (c->ttl_ms > s->max_ttl_ms) {
        err_printf(why, "ttl_ms: above the cluster's max_ttl (%llu ms)",
                   (unsigned long long)s->max_ttl_ms);
        return -EINVAL;
    }
    if (c->has_ts && c->window_ms > s->max_window_ms) {
        err_printf(why, "window_ms: above the cluster's max_window (%llu ms)",
                   (unsigned long long)s->max_window_ms);
        return -EINVAL;
    }
    if (c->lease_ms > s->max_lease_ms) {
        err_printf(why, "lease_ms: above the cluster's max_lease (%llu ms)",
                   (unsigned long long)s->max_lease_ms);
        return -EINVAL;
    }
    return 0;
}

int convert_complete_in(const Once__Rpc__CompleteRequest *in,
                        struct fsm_cmd *out,
                        char *why)
{
    struct fsm_complete *c = &out->u.complete;

    memset(out, 0, sizeof *out);
    out->type = FSM_CMD_COMPLETE;
    if (check_ident(&in->scope, &in->key, why) != 0 ||
        check_request_id(&in->request_id, why) != 0 ||
        check_token(in->owner_token, &c->owner_token, why) != 0) {
        return -EINVAL;
    }
    if (in->result.len > FSM_RESULT_MAX) {
        err_printf(why, "result: must be at most %d bytes (got %zu)",
                   FSM_RESULT_MAX, in->result.len);
        return -EINVAL;
    }
    c->scope = in->scope.data;
    c->scope_len = in->scope.len;
    c->key = in->key.data;
    c->key_len = in->key.len;
    c->result = in->result.data;
    c->result_len = in->result.len;
    return 0;
}

int convert_release_in(const Once__Rpc__ReleaseRequest *in,
                       struct fsm_cmd *out,
                       char *why)
{
    struct fsm_release *c = &out->u.release;

    memset(out, 0, sizeof *out);
    out->type = FSM_CMD_RELEASE;
    if (check_ident(&in->scope, &in->key, why) != 0 ||
        check_request_id(&in->request_id, why) != 0 ||
        check_token(in->owner_token, &c->owner_token, why) != 0) {
        return -EINVAL;
    }
    if (in->error.len > FSM_ERROR_MAX) {
        err_printf(why, "error: must be at most %d bytes (got %zu)",
                   FSM_ERROR_MAX, in->error.len);
        return -EINVAL;
    }
    c->scope = in->scope.data;
    c->scope_len = in->scope.len;
    c->key = in->key.data;
    c->key_len = in->key.len;
    c->terminal = in->terminal;
    c->error = in->error.data;
    c->error_len = in->error.len;
    return 0;
}

int convert_ident_in(const ProtobufCBinaryData *scope,
                     const ProtobufCBinaryData *key,
                     enum fsm_cmd_type type,
                     struct fsm_cmd *out,
                     char *why)
{
    memset(out, 0, sizeof *out);
    out->type = type;
    if (check_ident(scope, key, why) != 0) {
        return -EINVAL;
    }
    out->u.ident.scope = scope->data;
    out->u.ident.scope_len = scope->len;
    out->u.ident.key = key->data;
    out->u.ident.key_len = key->len;
    return 0;
}

/* "A.B.C.D:PORT", PORT 1..65535 without leading zeros, 1..FSM_ADDR_MAX
 * bytes. */
static bool valid_addr(const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;

    return n >= 1 && n <= FSM_ADDR_MAX &&
           addr_parse_ipv4(s, ADDR_PORT_CANONICAL, NULL);
}

enum fsm_role convert_role_in(Once__Rpc__Role r)
{
    switch (r) {
        case ONCE__RPC__ROLE__ROLE_VOTER:
            return FSM_ROLE_VOTER;
        case ONCE__RPC__ROLE__ROLE_STANDBY:
            return FSM_ROLE_STANDBY;
        case ONCE__RPC__ROLE__ROLE_SPARE:
            return FSM_ROLE_SPARE;
        default:
            return 0;
    }
}

Once__Rpc__Role convert_role_out(enum fsm_role r)
{
    switch (r) {
        case FSM_ROLE_VOTER:
            return ONCE__RPC__ROLE__ROLE_VOTER;
        case FSM_ROLE_STANDBY:
            return ONCE__RPC__ROLE__ROLE_STANDBY;
        case FSM_ROLE_SPARE:
            return ONCE__RPC__ROLE__ROLE_SPARE;
    }
    return ONCE__RPC__ROLE__ROLE_UNSPECIFIED;
}

int convert_member_in(const Once__Rpc__Member *in,
                      bool for_add,
                      struct fsm_member *out,
                      char *why)
{
    enum fsm_role role;

    memset(out, 0, sizeof *out);
    if (in == NULL) {
        err_printf(why, "member: missing");
        return -EINVAL;
    }
    if (in->id == 0) {
        err_printf(why, "member.id: must not be 0");
        return -EINVAL;
    }
    if (!valid_addr(in->raft_addr)) {
        err_printf(why, "member.raft_addr: must be IPv4 IP:PORT");
        return -EINVAL;
    }
    if (!valid_addr(in->client_addr)) {
        err_printf(why, "member.client_addr: must be IPv4 IP:PORT");
        return -EINVAL;
    }
    role = convert_role_in(in->role);
    if (role == 0 ||
        (for_add && role != FSM_ROLE_VOTER && role != FSM_ROLE_STANDBY)) {
        err_printf(why, for_add ? "member.role: must be VOTER or STANDBY"
                                : "member.role: unknown");
        return -EINVAL;
    }
    out->id = in->id;
    snprintf(out->raft_addr, sizeof out->raft_addr, "%s", in->raft_addr);
    snprintf(out->client_addr, sizeof out->client_addr, "%s", in->client_addr);
    out->role = role;
    return 0;
}

void convert_member_out(const struct fsm_member *m,
                        bool reachable,
                        Once__Rpc__Member *out)
{
    once__rpc__member__init(out);
    out->id = m->id;
    /* protobuf-c's packer only reads them. */
    out->raft_addr = (char *)m->raft_addr;
    out->client_addr = (char *)m->client_addr;
    out->role = convert_role_out(m->role);
    out->reachable = reachable;
}

void convert_result_out(const struct fsm_result *r,
                        const uint8_t *request_id,
                        struct convert_result_buf *b)
{
    Once__Rpc__Result *o = &b->res;
    size_t i;

    once__rpc__result__init(o);
    o->outcome = (Once__Rpc__Outcome)r->outcome;
    o->retry = r->retry;
    o->log_time_ms = r->log_time_ms;
    if (request_id != NULL) {
        memcpy(b->request_id, request_id, FSM_REQUEST_ID_LEN);
        o->request_id.data = b->request_id;
        o->request_id.len = FSM_REQUEST_ID_LEN;
    }
    if (r->reason != NULL) {
        /* Static text of the fsm, shorter than the schema's 256 bytes;
         * the packer only reads it. */
        o->reason = (char *)r->reason;
    }
    if (r->has_record) {
        o->first_request_id.data = (uint8_t *)r->first_request_id;
        o->first_request_id.len = FSM_REQUEST_ID_LEN;
        o->first_index = r->first_index;
        o->first_time_ms = r->first_time_ms;
        o->attempts_total = r->attempts;
        o->kind = (Once__Rpc__Kind)r->kind;
        o->state = (Once__Rpc__State)r->state;
        o->expires_ms = r->expires_ms;
        o->lease_expires_ms = r->lease_expires_ms;
        o->owner_attempt = r->owner_attempt;
        o->max_uses = r->max_uses;
        o->uses = r->uses;
        o->uses_left = r->max_uses > r->uses ? r->max_uses - r->uses : 0;
        o->sliding = r->sliding;
    }
    if (r->has_owner_token) {
        once__rpc__owner_token__init(&b->token);
        b->token.group_id = r->owner_token.group_id;
        b->token.index = r->owner_token.index;
        b->token.slot = r->owner_token.slot;
        o->has_owner_token = true;
        o->owner_token = &b->token;
    }
    o->retry_after_ms = r->retry_after_ms;
    if (r->result != NULL) {
        o->result.data = (uint8_t *)r->result;
        o->result.len = r->result_len;
    }
    if (r->stored_error != NULL) {
        o->stored_error.data = (uint8_t *)r->stored_error;
        o->stored_error.len = r->stored_error_len;
    }
    for (i = 0; i < r->n_attempt_list && i < 1 + FSM_ATTEMPTS_LAST; i++) {
        const struct fsm_attempt *a = r->attempt_list[i];
        Once__Rpc__Attempt *pa = &b->attempts[i];

        once__rpc__attempt__init(pa);
        pa->request_id.data = (uint8_t *)a->request_id;
        pa->request_id.len = FSM_REQUEST_ID_LEN;
        pa->execution_id.data = (uint8_t *)a->execution_id;
        pa->execution_id.len = a->execution_id_len;
        pa->index = a->index;
        pa->time_ms = a->time_ms;
        pa->outcome = (Once__Rpc__Outcome)a->outcome;
        pa->retry = a->retry;
        b->attempt_ptrs[i] = pa;
    }
    o->n_attempts = i;
    o->attempts = i > 0 ? b->attempt_ptrs : NULL;
}

static bool outcome_known(int o)
{
    return o >= FSM_ACCEPTED && o <= FSM_FAILED_PRECONDITION;
}

int convert_result_in(const Once__Rpc__Result *in,
                      struct fsm_result *out,
                      struct fsm_attempt attempts[1 + FSM_ATTEMPTS_LAST],
                      char *why)
{
    size_t i;

    memset(out, 0, sizeof *out);
    if (!outcome_known((int)in->outcome)) {
        err_printf(why, "result.outcome: unknown (%d)", (int)in->outcome);
        return -EINVAL;
    }
    if (in->request_id.len != 0 && in->request_id.len != FSM_REQUEST_ID_LEN) {
        err_printf(why, "result.request_id: must be 16 bytes");
        return -EINVAL;
    }
    if (in->first_request_id.len != 0 &&
        in->first_request_id.len != FSM_REQUEST_ID_LEN) {
        err_printf(why, "result.first_request_id: must be 16 bytes");
        return -EINVAL;
    }
    if (in->result.len > FSM_RESULT_MAX) {
        err_printf(why, "result.result: over 64 KiB");
        return -EINVAL;
    }
    if (in->stored_error.len > FSM_ERROR_MAX) {
        err_printf(why, "result.stored_error: over 1 KiB");
        return -EINVAL;
    }
    if (in->reason != NULL && strlen(in->reason) > REASON_MAX) {
        err_printf(why, "result.reason: over %d bytes", REASON_MAX);
        return -EINVAL;
    }
    if (in->n_attempts > 1 + FSM_ATTEMPTS_LAST) {
        err_printf(why, "result.attempts: more than %d", 1 + FSM_ATTEMPTS_LAST);
        return -EINVAL;
    }
    if (in->has_owner_token && in->owner_token == NULL) {
        err_printf(why, "result.owner_token: missing");
        return -EINVAL;
    }
    if (in->kind > ONCE__RPC__KIND__KIND_IDEMPOTENT ||
        in->state > ONCE__RPC__STATE__STATE_FAILED) {
        err_printf(why, "result.kind/state: unknown");
        return -EINVAL;
    }
    out->outcome = (enum fsm_outcome)in->outcome;
    out->retry = in->retry;
    out->log_time_ms = in->log_time_ms;
    out->reason =
        in->reason != NULL && in->reason[0] != '\0' ? in->reason : NULL;
    out->has_record = in->first_request_id.len == FSM_REQUEST_ID_LEN;
    if (out->has_record) {
        memcpy(out->first_request_id, in->first_request_id.data,
               FSM_REQUEST_ID_LEN);
        out->kind = (enum fsm_kind)in->kind;
        out->state = (enum fsm_state)in->state;
        out->first_index = in->first_index;
        out->first_time_ms = in->first_time_ms;
        out->expires_ms = in->expires_ms;
        out->attempts = in->attempts_total;
        out->lease_expires_ms = in->lease_expires_ms;
        out->owner_attempt = in->owner_attempt;
        if (in->max_uses > FSM_MAX_USES || in->uses > in->max_uses) {
            err_printf(why, "result.uses: out of bounds");
            return -EINVAL;
        }
        out->max_uses = in->max_uses;
        out->uses = in->uses;
        out->sliding = in->sliding;
    }
    if (in->has_owner_token) {
        out->has_owner_token = true;
        out->owner_token.group_id = in->owner_token->group_id;
        out->owner_token.index = in->owner_token->index;
        out->owner_token.slot = in->owner_token->slot;
    }
    out->retry_after_ms = in->retry_after_ms;
    if (in->result.len > 0) {
        out->result = in->result.data;
        out->result_len = in->result.len;
    }
    if (in->stored_error.len > 0) {
        out->stored_error = in->stored_error.data;
        out->stored_error_len = in->stored_error.len;
    }
    for (i = 0; i < in->n_attempts; i++) {
        const Once__Rpc__Attempt *a = in->attempts[i];

        if (a == NULL || a->request_id.len != FSM_REQUEST_ID_LEN ||
            a->execution_id.len > FSM_EXECUTION_ID_MAX ||
            !outcome_known((int)a->outcome)) {
            err_printf(why, "result.attempts[%zu]: out of bounds", i);
            return -EINVAL;
        }
        memset(&attempts[i], 0, sizeof attempts[i]);
        memcpy(attempts[i].request_id, a->request_id.data, FSM_REQUEST_ID_LEN);
        attempts[i].index = a->index;
        attempts[i].time_ms = a->time_ms;
        attempts[i].outcome = (enum fsm_outcome)a->outcome;
        attempts[i].retry = a->retry;
        attempts[i].execution_id_len = (uint8_t)a->execution_id.len;
        if (a->execution_id.len > 0) {
            memcpy(attempts[i].execution_id, a->execution_id.data,
                   a->execution_id.len);
        }
        out->attempt_list[i] = &attempts[i];
    }
    out->n_attempt_list = in->n_attempts;
    return 0;
}

void convert_claim_out(const struct fsm_claim *c, Once__Rpc__ClaimRequest *out)
{
    once__rpc__claim_request__init(out);
    out->scope.data = (uint8_t *)c->scope;
    out->scope.len = c->scope_len;
    out->key.data = (uint8_t *)c->key;
    out->key.len = c->key_len;
    out->request_id.data = (uint8_t *)c->request_id;
    out->request_id.len = FSM_REQUEST_ID_LEN;
    out->execution_id.data = (uint8_t *)c->execution_id;
    out->execution_id.len = c->execution_id_len;
    out->kind = (Once__Rpc__Kind)c->kind;
    out->ttl_ms = c->ttl_ms;
    out->has_ts = c->has_ts;
    out->ts_ms = c->ts_ms;
    out->window_ms = c->window_ms;
    out->payload_hash.data = (uint8_t *)c->payload_hash;
    out->payload_hash.len = c->payload_hash_len;
    out->lease_ms = c->lease_ms;
    out->max_uses = c->max_uses > 1 ? c->max_uses : 0;
    out->sliding = c->sliding;
}

static void token_out(const struct fsm_token *t, Once__Rpc__OwnerToken *out)
{
    once__rpc__owner_token__init(out);
    out->group_id = t->group_id;
    out->index = t->index;
    out->slot = t->slot;
}

void convert_complete_out(const struct fsm_complete *c,
                          const uint8_t request_id[FSM_REQUEST_ID_LEN],
                          Once__Rpc__CompleteRequest *out,
                          Once__Rpc__OwnerToken *token)
{
    once__rpc__complete_request__init(out);
    out->scope.data = (uint8_t *)c->scope;
    out->scope.len = c->scope_len;
    out->key.data = (uint8_t *)c->key;
    out->key.len = c->key_len;
    token_out(&c->owner_token, token);
    out->owner_token = token;
    out->result.data = (uint8_t *)c->result;
    out->result.len = c->result_len;
    out->request_id.data = (uint8_t *)request_id;
    out->request_id.len = FSM_REQUEST_ID_LEN;
}

void convert_release_out(const struct fsm_release *c,
                         const uint8_t request_id[FSM_REQUEST_ID_LEN],
                         Once__Rpc__ReleaseRequest *out,
                         Once__Rpc__OwnerToken *token)
{
    once__rpc__release_request__init(out);
    out->scope.data = (uint8_t *)c->scope;
    out->scope.len = c->scope_len;
    out->key.data = (uint8_t *)c->key;
    out->key.len = c->key_len;
    token_out(&c->owner_token, token);
    out->owner_token = token;
    out->terminal = c->terminal;
    out->error.data = (uint8_t *)c->error;
    out->error.len = c->error_len;
    out->request_id.data = (uint8_t *)request_id;
    out->request_id.len = FSM_REQUEST_ID_LEN;
}

void convert_config_out(enum fsm_outcome outcome,
                        const char *reason,
                        Once__Rpc__ConfigResult *out,
                        struct convert_config_buf *b)
{
    once__rpc__config_result__init(out);
    out->outcome = (Once__Rpc__Outcome)outcome;
    if (reason != NULL) {
        snprintf(b->reason, sizeof b->reason, "%s", reason);
        out->reason = b->reason;
    }
}

int convert_claim_batch_check(const Once__Rpc__ClaimBatchRequest *in, char *why)
{
    size_t bytes;

    if (in->n_items < 1 || in->n_items > RPC_CLAIM_BATCH_MAX) {
        err_printf(why, "items: must be 1..%u claims, got %zu",
                   RPC_CLAIM_BATCH_MAX, in->n_items);
        return -EINVAL;
    }
    bytes = batch_request_size(in); /* protobuf-c's size, measured faster */
    if (bytes > RPC_CLAIM_BATCH_BYTES_MAX) {
        err_printf(why, "items: %zu bytes encoded, over %u", bytes,
                   RPC_CLAIM_BATCH_BYTES_MAX);
        return -EINVAL;
    }
    return 0;
}
