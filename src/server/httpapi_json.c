/* server/httpapi_json.c: answers of the HTTP/JSON API (httpapi_json.h).
 * The order and the conditions of the fields follow cli_json_result and
 * cli_json_status (src/cli/json.c). */
#include "server/httpapi_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/json_value.h"
#include "common/text.h"

/* A failed set only leaves the field out: out of memory, and the caller
 * fails the whole answer when it cannot be written. */
static void set(json_t *o, const char *key, json_t *v)
{
    (void)json_object_set_new(o, key, v);
}

/* A string from the wire: itself if UTF-8, else @dflt. */
static json_t *jtext(const char *s, size_t n, const char *dflt)
{
    json_t *v = json_stringn(s, n);

    return v != NULL ? v : json_string(dflt);
}

/* Bytes that should be text: a string when valid UTF-8, else @key_b64. */
static void set_text_bytes(json_t *o, const char *key, ProtobufCBinaryData b)
{
    json_t *v = json_stringn(b.len > 0 ? (const char *)b.data : "", b.len);

    if (v != NULL) {
        set(o, key, v);
        return;
    }
    {
        char name[64];
        char *enc = malloc(4 * ((b.len + 2) / 3) + 1);

        snprintf(name, sizeof name, "%s_b64", key);
        if (enc != NULL) {
            EVP_EncodeBlock((unsigned char *)enc, b.data, (int)b.len);
            set(o, name, json_string(enc));
            free(enc);
        }
    }
}

static json_t *jb64(ProtobufCBinaryData b)
{
    char *enc = malloc(4 * ((b.len + 2) / 3) + 1);
    json_t *v;

    if (enc == NULL) {
        return NULL;
    }
    enc[0] = '\0';
    if (b.len > 0) {
        EVP_EncodeBlock((unsigned char *)enc, b.data, (int)b.len);
    }
    v = json_string(enc);
    free(enc);
    return v;
}

const char *httpapi_enum_name(const ProtobufCEnumDescriptor *d,
                              int v,
                              const char *prefix)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    size_t n = strlen(prefix);

    if (ev == NULL) {
        return "UNKNOWN_VALUE";
    }
    return strncmp(ev->name, prefix, n) == 0 ? ev->name + n : ev->name;
}

static const char *outcome_name(int v)
{
    return httpapi_enum_name(&once__rpc__outcome__descriptor, v, "OUTCOME_");
}

static const char *status_name(int v)
{
    return httpapi_enum_name(&once__rpc__status__descriptor, v, "STATUS_");
}

void httpapi_json_origin(json_t *o, const struct rpc_ids *ids)
{
    set(o, "cluster_id",
        ids->has_cluster_id ? json_value_hex(ids->cluster_id, RPC_ID_LEN)
                            : json_string(""));
    set(o, "node_id", json_value_id(ids->node_id));
    set(o, "boot_id", json_value_hex(ids->boot_id, RPC_ID_LEN));
}

json_t *httpapi_json_error(enum rpc_status status,
                           bool applied_unknown,
                           const char *hint,
                           const char *message,
                           const uint8_t *request_id)
{
    json_t *o = json_object();

    if (o == NULL) {
        return NULL;
    }
    set(o, "error", json_string(status_name((int)status)));
    set(o, "applied", json_string(applied_unknown ? "unknown" : "false"));
    set(o, "leader_hint",
        jtext(hint != NULL ? hint : "", hint != NULL ? strlen(hint) : 0, ""));
    set(o, "message",
        jtext(message != NULL ? message : "",
              message != NULL ? strlen(message) : 0, "(not UTF-8)"));
    /* The request id is what a retry after an unknown outcome needs. */
    if (request_id != NULL) {
        set(o, "request_id", json_value_hex(request_id, 16));
    }
    return o;
}

static json_t *attempts_array(const Once__Rpc__Result *r)
{
    json_t *a = json_array();

    for (size_t i = 0; a != NULL && i < r->n_attempts; i++) {
        const Once__Rpc__Attempt *at = r->attempts[i];
        json_t *e = json_object();

        if (e == NULL) {
            break;
        }
        set(e, "request_id",
            json_value_hex(at->request_id.data, at->request_id.len));
        set_text_bytes(e, "execution_id", at->execution_id);
        set(e, "index", json_value_uint(at->index));
        set(e, "time_ms", json_value_uint(at->time_ms));
        set(e, "outcome", json_string(outcome_name(at->outcome)));
        set(e, "retry", json_boolean(at->retry));
        (void)json_array_append_new(a, e);
    }
    return a;
}

static bool is_record_call(enum rpc_method m)
{
    return m == RPC_METHOD_CLAIM || m == RPC_METHOD_COMPLETE ||
           m == RPC_METHOD_RELEASE;
}

/* The fields before the record's facts: outcome, refusal, retry, ids. */
static void set_head(json_t *o, enum rpc_method m, const Once__Rpc__Result *r)
{
    set(o, "outcome", json_string(outcome_name(r->outcome)));
    /* The state machine's refusals are errors to a caller (nothing was
     * decided about the key): they carry the error fields too. */
    if (r->outcome == ONCE__RPC__OUTCOME__OUTCOME_RESOURCE_EXHAUSTED ||
        r->outcome == ONCE__RPC__OUTCOME__OUTCOME_INVALID_ARGUMENT) {
        set(o, "error",
            json_string(r->outcome ==
                                ONCE__RPC__OUTCOME__OUTCOME_RESOURCE_EXHAUSTED
                            ? "RESOURCE_EXHAUSTED"
                            : "INVALID_ARGUMENT"));
        set(o, "applied", json_string("false"));
        set(o, "leader_hint", json_string(""));
        set(o, "message",
            r->reason != NULL && r->reason[0] != '\0'
                ? jtext(r->reason, strlen(r->reason), "refused")
                : json_string("refused"));
    }
    if (is_record_call(m) || r->retry) {
        set(o, "retry", json_boolean(r->retry));
    }
    if (r->log_time_ms != 0) {
        set(o, "log_time_ms", json_value_uint(r->log_time_ms));
    }
    if (r->request_id.len == 16) {
        set(o, "request_id", json_value_hex(r->request_id.data, 16));
    }
    if (r->first_request_id.len == 16) {
        set(o, "first_request_id",
            json_value_hex(r->first_request_id.data, 16));
        set(o, "first_index", json_value_uint(r->first_index));
        set(o, "first_time_ms", json_value_uint(r->first_time_ms));
        set(o, "attempts_total", json_value_uint(r->attempts_total));
    }
}

json_t *httpapi_json_result(enum rpc_method m, const Once__Rpc__Result *r)
{
    bool lookup = m == RPC_METHOD_LOOKUP;
    bool has_first = r->first_request_id.len == 16;
    json_t *o = json_object();

    if (o == NULL) {
        return NULL;
    }
    set_head(o, m, r);
    if (r->n_attempts > 0 || (lookup && has_first)) {
        set(o, "attempts", attempts_array(r));
    }
    if (r->has_owner_token && r->owner_token != NULL) {
        char tok[48];

        snprintf(tok, sizeof tok, "%u:%llu:%u", r->owner_token->group_id,
                 (unsigned long long)r->owner_token->index,
                 r->owner_token->slot);
        set(o, "owner_token", json_string(tok));
    }
    if (r->owner_attempt != 0) {
        set(o, "owner_attempt", json_value_uint(r->owner_attempt));
    }
    if (r->result.len > 0 ||
        r->outcome == ONCE__RPC__OUTCOME__OUTCOME_DUPLICATE ||
        r->outcome == ONCE__RPC__OUTCOME__OUTCOME_COMPLETED ||
        (lookup && r->state == ONCE__RPC__STATE__STATE_COMPLETED)) {
        set(o, "result_b64", jb64(r->result));
    }
    if (r->stored_error.len > 0 ||
        (r->outcome == ONCE__RPC__OUTCOME__OUTCOME_FAILED &&
         m == RPC_METHOD_CLAIM) ||
        (lookup && r->state == ONCE__RPC__STATE__STATE_FAILED)) {
        set_text_bytes(o, "stored_error", r->stored_error);
    }
    if (r->outcome == ONCE__RPC__OUTCOME__OUTCOME_IN_PROGRESS ||
        r->retry_after_ms != 0) {
        set(o, "retry_after_ms", json_value_uint(r->retry_after_ms));
    }
    if (r->reason != NULL && r->reason[0] != '\0') {
        set(o, "reason", jtext(r->reason, strlen(r->reason), "(not UTF-8)"));
    }
    if (r->kind != ONCE__RPC__KIND__KIND_UNSPECIFIED) {
        set(o, "kind",
            json_string(httpapi_enum_name(&once__rpc__kind__descriptor, r->kind,
                                          "KIND_")));
    }
    if (r->state != ONCE__RPC__STATE__STATE_UNSPECIFIED) {
        set(o, "state",
            json_string(httpapi_enum_name(&once__rpc__state__descriptor,
                                          r->state, "STATE_")));
    }
    if (r->expires_ms != 0) {
        set(o, "expires_ms", json_value_uint(r->expires_ms));
    }
    if (r->lease_expires_ms != 0) {
        set(o, "lease_expires_ms", json_value_uint(r->lease_expires_ms));
    }
    if (r->max_uses != 0) { /* NONCE records (docs/state-machine.md) */
        set(o, "max_uses", json_value_uint(r->max_uses));
        set(o, "uses", json_value_uint(r->uses));
        set(o, "uses_left", json_value_uint(r->uses_left));
    }
    if (r->sliding) {
        set(o, "sliding", json_boolean(true));
    }
    return o;
}

static json_t *members_array(const Once__Rpc__StatusResponse *st)
{
    json_t *a = json_array();

    for (size_t i = 0; a != NULL && i < st->n_members; i++) {
        const Once__Rpc__Member *m = st->members[i];
        json_t *e = json_object();

        if (e == NULL) {
            break;
        }
        set(e, "id", json_value_id(m->id));
        set(e, "raft_addr", jtext(m->raft_addr, strlen(m->raft_addr), ""));
        set(e, "client_addr",
            jtext(m->client_addr, strlen(m->client_addr), ""));
        set(e, "role",
            json_string(httpapi_enum_name(&once__rpc__role__descriptor, m->role,
                                          "ROLE_")));
        set(e, "reachable", json_boolean(m->reachable));
        (void)json_array_append_new(a, e);
    }
    return a;
}

json_t *httpapi_json_status(const Once__Rpc__StatusResponse *st)
{
    json_t *o = json_object(), *v;
    char d[17];

    if (o == NULL) {
        return NULL;
    }
    set(o, "outcome", json_string("OK"));
    set(o, "role",
        json_string(httpapi_enum_name(&once__rpc__raft_role__descriptor,
                                      st->role, "RAFT_ROLE_")));
    set(o, "member_role",
        json_string(httpapi_enum_name(&once__rpc__role__descriptor,
                                      st->member_role, "ROLE_")));
    set(o, "term", json_value_uint(st->term));
    set(o, "commit_index", json_value_uint(st->commit_index));
    set(o, "applied_index", json_value_uint(st->applied_index));
    set(o, "applied_digest",
        json_string(text_format_id(st->applied_digest, d)));
    if (st->restored_from.len == 16) {
        set(o, "restored_from", json_value_hex(st->restored_from.data, 16));
        set(o, "restore_time_ms", json_value_uint(st->restore_time_ms));
        set(o, "replay_window_until_ms",
            json_value_uint(st->replay_window_until_ms));
        set(o, "restore_stale_ts_ms", json_value_uint(st->restore_stale_ts_ms));
    }
    if (st->backups_open != 0) {
        set(o, "backups_open", json_value_uint(st->backups_open));
    }
    if (st->no_vote_cut_index != 0) {
        set(o, "no_vote_cut_index", json_value_uint(st->no_vote_cut_index));
    }
    if (st->state_digest != 0) {
        set(o, "state_digest",
            json_string(text_format_id(st->state_digest, d)));
    }
    set(o, "schema", json_value_uint(st->schema));
    set(o, "schema_max", json_value_uint(st->schema_max));
    set(o, "config_index", json_value_uint(st->config_index));
    v = json_array();
    for (size_t i = 0; v != NULL && i < st->n_config_voters; i++) {
        (void)json_array_append_new(v, json_value_id(st->config_voters[i]));
    }
    set(o, "config_voters", v);
    set(o, "leader", json_value_id(st->leader_id));
    set(o, "leader_addr", jtext(st->leader_addr, strlen(st->leader_addr), ""));
    set(o, "store_backend",
        jtext(st->store_backend, strlen(st->store_backend), ""));
    set(o, "members", members_array(st));
    return o;
}

void httpapi_json_served_by(json_t *o, uint64_t id)
{
    if (id != 0) {
        set(o, "served_by", json_value_id(id));
    }
}
