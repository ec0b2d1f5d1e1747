/* server/service.c: the RPC methods' dispatch, and the record commands on
 * the ready leader (service.h).
 *
 * Every request:
 *   1. its body is decoded (envelope_unpack_body) and its method's check
 *      (the table below; convert.h) runs: a failure is INVALID_ARGUMENT,
 *      applied FALSE, with a message naming the field, whichever node
 *      received it;
 *   2. the caller is authorized (authz.h): the peer's identity, or the
 *      original caller's that a member forwarded; a refusal is
 *      PERMISSION_DENIED, applied FALSE, naming the missing right;
 *   3. SERVICE_LOCAL methods (Status) are answered by this node itself;
 *   4. on the ready leader (replica_ready: leader, term-start barrier
 *      applied) with a bootstrapped fsm the handler runs: Claim, Complete,
 *      Release and Forget through replica_submit, Lookup through
 *      replica_lookup (linearizable: it rides a barrier), here; the Admin
 *      methods in admin.c; ReadIndex (a follower's read barrier) in
 *      readindex.c;
 *   5. anywhere else a Lookup that did not ask for the leader is read here
 *      after a read barrier (readindex.c), and any other SERVICE_FORWARD
 *      method is forwarded to the leader (forward.c, one hop).
 *
 * Errors of the Raft layer map to the wire in reply.c (docs/server.md). */
#include "server/service.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/spare.h"
#include "server/admin.h"
#include "server/authz.h"
#include "server/backup.h"
#include "server/convert.h"
#include "server/forward.h"
#include "server/readindex.h"
#include "server/reply.h"
#include "server/server.h"
#include "server/service_batch.h"

/* One record command waiting for the Raft layer. */
struct service_op
{
    struct server *s;
    struct rpc_call *call;
    enum rpc_method method;
    enum fsm_kind kind; /* a Claim's, for metrics */
    bool has_request_id;
    uint8_t request_id[FSM_REQUEST_ID_LEN];
    struct replica_req req; /* req.data = this */
};

/* Spare ops kept at most: a busy leader's commands in flight. At 256
 * claims in flight glibc's per-thread cache (7 blocks a size) overflows,
 * and calloc + free cost ~440 instructions per claim (bench/cpu/run). */
#define SERVICE_OP_SPARE_MAX 4096

/* A zeroed op: a spare, or a new one. NULL: out of memory. */
static struct service_op *op_new(struct server *s)
{
    return spare_get(&s->op_spare);
}

/* Give @op back: a spare (poisoned under ASan: a use after this release
 * is reported as a use after free would be), or freed past the bound. */
static void op_free(struct service_op *op)
{
    spare_put(&op->s->op_spare, op);
}

void service_init(struct server *s)
{
    spare_init(&s->op_spare, sizeof(struct service_op), SERVICE_OP_SPARE_MAX);
}

void service_close(struct server *s)
{
    spare_drain(&s->op_spare);
}

/* --- record commands on the ready leader ---------------------------------- */

static void result_cb(struct replica_req *req,
                      int status,
                      const struct fsm_result *res)
{
    struct service_op *op = req->data;
    struct convert_result_buf b;
    Once__Rpc__ClaimResponse claim = ONCE__RPC__CLAIM_RESPONSE__INIT;
    Once__Rpc__CompleteResponse complete = ONCE__RPC__COMPLETE_RESPONSE__INIT;
    Once__Rpc__ReleaseResponse release = ONCE__RPC__RELEASE_RESPONSE__INIT;
    Once__Rpc__LookupResponse lookup = ONCE__RPC__LOOKUP_RESPONSE__INIT;
    Once__Rpc__ForgetResponse forget = ONCE__RPC__FORGET_RESPONSE__INIT;
    Once__Rpc__QuotaSetResponse quota = ONCE__RPC__QUOTA_SET_RESPONSE__INIT;
    Once__Rpc__ConfigResult cr;
    struct convert_config_buf reason;
    const ProtobufCMessage *msg = NULL;

    if (op->call == NULL) {
        op_free(op);
        return;
    }
    if (status != 0 || res == NULL) {
        reply_replica_error(op->s, op->call,
                            status != 0 ? status : REPLICA_E_INTERNAL, NULL);
        op_free(op);
        return;
    }
    metrics_result(&op->s->metrics, op->method, op->kind, res);
    convert_result_out(res, op->has_request_id ? op->request_id : NULL, &b);
    switch (op->method) {
        case RPC_METHOD_CLAIM:
            claim.result = &b.res;
            msg = &claim.base;
            break;
        case RPC_METHOD_COMPLETE:
            complete.result = &b.res;
            msg = &complete.base;
            break;
        case RPC_METHOD_RELEASE:
            release.result = &b.res;
            msg = &release.base;
            break;
        case RPC_METHOD_LOOKUP:
            lookup.result = &b.res;
            lookup.served_by = op->s->id;
            msg = &lookup.base;
            break;
        case RPC_METHOD_QUOTA_SET:
            convert_config_out(res->outcome, res->reason, &cr, &reason);
            quota.result = &cr;
            msg = &quota.base;
            break;
        default:
            forget.result = &b.res;
            msg = &forget.base;
            break;
    }
    if (log_enabled(LOG_DEBUG)) {
        log_kv(LOG_DEBUG, "answered", "method=%s outcome=%s retry=%d",
               rpc_method_name(op->method), fsm_outcome_name(res->outcome),
               res->retry ? 1 : 0);
    }
    reply_msg(op->call, msg);
    op_free(op);
}

/* Answer a claim the node itself decided (nothing proposed). */
static void reply_claim_result(struct rpc_call *call,
                               const struct fsm_result *res,
                               const uint8_t *request_id)
{
    struct convert_result_buf b;
    Once__Rpc__ClaimResponse claim = ONCE__RPC__CLAIM_RESPONSE__INIT;

    convert_result_out(res, request_id, &b);
    claim.result = &b.res;
    reply_msg(call, &claim.base);
}

/* @cmd borrows from the request; the Raft layer copies it on submit. */
static void submit(struct server *s,
                   struct rpc_call *call,
                   const struct fsm_cmd *cmd,
                   const uint8_t *request_id)
{
    struct service_op *op = op_new(s);
    int rv;

    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    op->s = s;
    op->call = call;
    op->method = call->method;
    op->kind = cmd->type == FSM_CMD_CLAIM ? cmd->u.claim.kind : FSM_KIND_NONCE;
    op->req.data = op;
    if (request_id != NULL) {
        op->has_request_id = true;
        memcpy(op->request_id, request_id, FSM_REQUEST_ID_LEN);
    }
    if (cmd->type == FSM_CMD_LOOKUP) {
        /* A read changes nothing: a passed deadline stays "not applied". */
        rv = replica_lookup(&s->rep, &op->req, &cmd->u.ident, result_cb);
    } else {
        /* From here a passed deadline is "outcome unknown". */
        rpc_call_mark_sent(call);
        rv = replica_submit(&s->rep, &op->req, cmd, result_cb);
    }
    if (rv != 0) {
        reply_replica_error(s, call, rv, NULL);
        op_free(op);
    }
}

/* Claim, Complete, Release, Lookup, Forget: the conversion is the check's;
 * a claim's ttl, window and lease are checked here against the applied
 * settings (only the leader knows them for sure). */
static void serve_record(struct server *s,
                         struct rpc_call *call,
                         const ProtobufCMessage *msg,
                         const struct service_in *in)
{
    char why[CONVERT_WHY_SIZE];
    struct fsm_result refused;

    (void)msg;
    if (in->cmd.type == FSM_CMD_CLAIM &&
        convert_check_claim_settings(&in->cmd.u.claim, fsm_settings(s->rep.fsm),
                                     why) != 0) {
        reply_invalid(call, why);
        return;
    }
    if (in->cmd.type == FSM_CMD_CLAIM &&
        convert_check_claim_schema(
            &in->cmd.u.claim, fsm_schema_version(s->rep.fsm), &refused) != 0) {
        reply_claim_result(call, &refused, in->request_id);
        return;
    }
    submit(s, call, &in->cmd, in->request_id);
}

/* --- checks: the bounds any node checks ----------------------------------- */

static int check_claim(const ProtobufCMessage *msg,
                       struct service_in *in,
                       char *why)
{
    const Once__Rpc__ClaimRequest *r = (const void *)msg;

    in->request_id = r->request_id.data;
    return convert_claim_in(r, &in->cmd, why);
}

static int check_complete(const ProtobufCMessage *msg,
                          struct service_in *in,
                          char *why)
{
    const Once__Rpc__CompleteRequest *r = (const void *)msg;

    in->request_id = r->request_id.data;
    return convert_complete_in(r, &in->cmd, why);
}

static int check_release(const ProtobufCMessage *msg,
                         struct service_in *in,
                         char *why)
{
    const Once__Rpc__ReleaseRequest *r = (const void *)msg;

    in->request_id = r->request_id.data;
    return convert_release_in(r, &in->cmd, why);
}

static int check_lookup(const ProtobufCMessage *msg,
                        struct service_in *in,
                        char *why)
{
    const Once__Rpc__LookupRequest *r = (const void *)msg;

    in->leader_only = r->leader_only;
    return convert_ident_in(&r->scope, &r->key, FSM_CMD_LOOKUP, &in->cmd, why);
}

static int check_forget(const ProtobufCMessage *msg,
                        struct service_in *in,
                        char *why)
{
    const Once__Rpc__ForgetRequest *r = (const void *)msg;

    return convert_ident_in(&r->scope, &r->key, FSM_CMD_FORGET, &in->cmd, why);
}

/* The pattern's syntax is the state machine's to check (fsm_pattern_check,
 * also on the leader's apply); here only what the command can carry. */
static int check_quota_set(const ProtobufCMessage *msg,
                           struct service_in *in,
                           char *why)
{
    const Once__Rpc__QuotaSetRequest *r = (const void *)msg;
    const char *bad = fsm_pattern_check(r->pattern.data, r->pattern.len);

    if (bad != NULL) {
        err_printf(why, "pattern: %s", bad);
        return -EINVAL;
    }
    memset(&in->cmd, 0, sizeof in->cmd);
    in->cmd.type = FSM_CMD_QUOTA_SET;
    in->cmd.u.quota.pattern = r->pattern.data;
    in->cmd.u.quota.pattern_len = r->pattern.len;
    in->cmd.u.quota.max_records = r->max_records;
    in->cmd.u.quota.max_bytes = r->max_bytes;
    in->cmd.u.quota.remove = r->remove;
    return 0;
}

static int check_members_add(const ProtobufCMessage *msg,
                             struct service_in *in,
                             char *why)
{
    const Once__Rpc__MembersAddRequest *r = (const void *)msg;

    return convert_member_in(r->member, true, &in->member, why);
}

static int check_id(uint64_t id, char *why)
{
    if (id == 0) {
        err_printf(why, "id: must not be 0");
        return -EINVAL;
    }
    return 0;
}

static int check_members_remove(const ProtobufCMessage *msg,
                                struct service_in *in,
                                char *why)
{
    (void)in;
    return check_id(((const Once__Rpc__MembersRemoveRequest *)msg)->id, why);
}

static int check_members_assign(const ProtobufCMessage *msg,
                                struct service_in *in,
                                char *why)
{
    const Once__Rpc__MembersAssignRequest *r = (const void *)msg;

    (void)in;
    if (check_id(r->id, why) != 0) {
        return -EINVAL;
    }
    if (convert_role_in(r->role) == 0) {
        err_printf(why, "role: must be VOTER, STANDBY or SPARE");
        return -EINVAL;
    }
    return 0;
}

static int check_backup_read(const ProtobufCMessage *msg,
                             struct service_in *in,
                             char *why)
{
    const Once__Rpc__BackupReadRequest *r = (const void *)msg;

    (void)in;
    if (check_id(r->backup_id, why) != 0) {
        return -EINVAL;
    }
    if (r->max_bytes < 1 || r->max_bytes > BACKUP_READ_MAX) {
        err_printf(why, "max_bytes: must be 1..%u", BACKUP_READ_MAX);
        return -EINVAL;
    }
    return 0;
}

static int check_backup_close(const ProtobufCMessage *msg,
                              struct service_in *in,
                              char *why)
{
    (void)in;
    return check_id(((const Once__Rpc__BackupCloseRequest *)msg)->backup_id,
                    why);
}

/* --- dispatch ------------------------------------------------------------- */

#define ON_LEADER (SERVICE_LEADER | SERVICE_FORWARD)

static const struct service_method methods[] = {
    {RPC_METHOD_CLAIM, ON_LEADER, check_claim, serve_record},
    {RPC_METHOD_COMPLETE, ON_LEADER, check_complete, serve_record},
    {RPC_METHOD_RELEASE, ON_LEADER, check_release, serve_record},
    {RPC_METHOD_LOOKUP, ON_LEADER, check_lookup, serve_record},
    {RPC_METHOD_FORGET, ON_LEADER, check_forget, serve_record},
    {RPC_METHOD_STATUS, SERVICE_LOCAL | SERVICE_ADMIN, NULL, admin_status},
    {RPC_METHOD_MEMBERS_LIST, ON_LEADER | SERVICE_ADMIN, NULL,
     admin_members_list},
    {RPC_METHOD_MEMBERS_ADD, ON_LEADER | SERVICE_ADMIN, check_members_add,
     admin_members_add},
    {RPC_METHOD_MEMBERS_REMOVE, ON_LEADER | SERVICE_ADMIN, check_members_remove,
     admin_members_remove},
    {RPC_METHOD_MEMBERS_ASSIGN, ON_LEADER | SERVICE_ADMIN, check_members_assign,
     admin_members_assign},
    {RPC_METHOD_TRANSFER, ON_LEADER | SERVICE_ADMIN, NULL, admin_transfer},
    {RPC_METHOD_SNAPSHOT_TAKE, ON_LEADER | SERVICE_ADMIN, NULL,
     admin_snapshot_take},
    {RPC_METHOD_BACKUP_OPEN, ON_LEADER | SERVICE_ADMIN, NULL,
     admin_backup_open},
    {RPC_METHOD_BACKUP_READ, ON_LEADER | SERVICE_ADMIN, check_backup_read,
     admin_backup_read},
    {RPC_METHOD_BACKUP_CLOSE, ON_LEADER | SERVICE_ADMIN, check_backup_close,
     admin_backup_close},
    {RPC_METHOD_QUOTA_SET, ON_LEADER | SERVICE_ADMIN, check_quota_set,
     serve_record},
    {RPC_METHOD_QUOTA_LIST, ON_LEADER | SERVICE_ADMIN, NULL, admin_quota_list},
    {RPC_METHOD_SCHEMA_UPGRADE, ON_LEADER | SERVICE_ADMIN, NULL,
     admin_schema_upgrade},
    /* Not forwarded: a follower asks the leader it knows, itself. */
    {RPC_METHOD_READ_INDEX, SERVICE_LEADER, NULL, readindex_serve},
    {RPC_METHOD_CLAIM_BATCH, ON_LEADER, service_check_claim_batch,
     service_serve_claim_batch},
};

static const struct service_method *method_of(enum rpc_method m)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        if (methods[i].method == m) {
            return &methods[i];
        }
    }
    return NULL;
}

/* Why a pinned request must not be served here, or NULL. The RPC layer
 * checks this too, with the ids it was given; this covers a request that
 * arrived in the same loop turn as the bootstrap's apply. */
static bool cluster_mismatch(struct server *s, const struct rpc_call *call)
{
    node_sync_ids(s);
    return call->has_cluster_id && s->ids_have_cluster &&
           memcmp(call->cluster_id, s->ids.cluster_id, RPC_ID_LEN) != 0;
}

/* The scope a record command names (NULL for the other methods). */
static const uint8_t *cmd_scope(const struct fsm_cmd *cmd, size_t *len)
{
    switch (cmd->type) {
        case FSM_CMD_CLAIM:
            *len = cmd->u.claim.scope_len;
            return cmd->u.claim.scope;
        case FSM_CMD_COMPLETE:
            *len = cmd->u.complete.scope_len;
            return cmd->u.complete.scope;
        case FSM_CMD_RELEASE:
            *len = cmd->u.release.scope_len;
            return cmd->u.release.scope;
        case FSM_CMD_LOOKUP:
        case FSM_CMD_FORGET:
            *len = cmd->u.ident.scope_len;
            return cmd->u.ident.scope;
        default:
            *len = 0;
            return NULL;
    }
}

/* A member (not an admin) adds only the member its certificate is
 * (node_tls_bind_join): the caller's certificate is the forwarded
 * caller_cert, else the peer's. 0, or ACCESS_E_DENIED with @why (answered
 * PERMISSION_DENIED, which once_permission_denied_total counts). */
static int bind_join(struct server *s,
                     const struct rpc_call *call,
                     const struct envelope_view *req,
                     const struct service_in *in,
                     char *why)
{
    X509 *cert = call->peer_cert, *orig = NULL;
    char sub[ERR_MSG_SIZE];
    int rv;

    if (req->caller_cert_len > 0) {
        if (access_cert_from_der(req->caller_cert, req->caller_cert_len, &orig,
                                 why) != 0) {
            return ACCESS_E_DENIED; /* UNTESTED: authz_resolve decoded it */
        }
        cert = orig;
    }
    rv = node_tls_bind_join(s, cert, &in->member, sub);
    X509_free(orig);
    if (rv != 0) {
        err_printf(why, "permission denied: a member adds only itself: %s",
                   sub);
    }
    return rv;
}

/* Whether the caller may make this call; false: answered PERMISSION_DENIED
 * (applied FALSE) and logged at debug (a tenant probing other scopes must
 * not fill the log; the refusals are counted). */
static bool authorized(struct server *s,
                       struct rpc_call *call,
                       const struct envelope_view *req,
                       const ProtobufCMessage *msg,
                       struct service_in *in)
{
    struct authz_caller who;
    struct authz_req ar;
    char why[ERR_MSG_SIZE];
    int rv;

    rv = authz_resolve(s->access, s->tls.on, call->peer_cert, req->caller_cert,
                       req->caller_cert_len, &who, why);
    if (rv == 0) {
        memset(&ar, 0, sizeof ar);
        ar.method = call->method;
        ar.scope = cmd_scope(&in->cmd, &ar.scope_len);
        ar.state_digest =
            call->method == RPC_METHOD_STATUS && msg != NULL &&
            ((const Once__Rpc__StatusRequest *)(const void *)msg)->state_digest;
        rv = authz_check(&who, &ar, why);
    }
    if (rv == 0 && call->method == RPC_METHOD_MEMBERS_ADD && who.id != NULL &&
        who.id->role == ACCESS_ROLE_MEMBER) {
        rv = bind_join(s, call, req, in, why);
    }
    if (rv == 0) {
        in->who = who;
        return true;
    }
    if (log_enabled(LOG_DEBUG)) {
        log_kv(LOG_DEBUG, "permission denied", "method=%s reason=%s",
               rpc_method_name(call->method),
               log_quote(why, (char[300]){0}, 300));
    }
    reply_error(call, RPC_STATUS_PERMISSION_DENIED, RPC_APPLIED_FALSE, why,
                NULL);
    return false;
}

/* Where a checked call goes: here, on the ready leader, or forwarded. */
static void route(struct server *s,
                  struct rpc_call *call,
                  struct envelope_view *req,
                  const struct service_method *m,
                  const ProtobufCMessage *msg,
                  const struct service_in *in)
{
    if (m->flags & SERVICE_LOCAL) {
        m->serve(s, call, msg, in);
        return;
    }
    if (cluster_mismatch(s, call)) {
        reply_error(call, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_FALSE,
                    "cluster id mismatch: the request is for another cluster",
                    NULL);
        return;
    }
    if (replica_ready(&s->rep)) {
        if (!fsm_bootstrapped(s->rep.fsm)) {
            /* The FSM bootstrap command is on its way (node.c). */
            reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                        "the cluster is not bootstrapped yet", NULL);
            return;
        }
        m->serve(s, call, msg, in);
        return;
    }
    if (call->method == RPC_METHOD_LOOKUP && !in->leader_only &&
        !call->forwarded && readindex_can_serve(s)) {
        /* Read here after a read barrier (readindex.h); a forwarded one
         * came from a node that chose the leader's read, and a spare does
         * not replicate the log. */
        readindex_lookup(&s->reads, call, &in->cmd.u.ident);
        return;
    }
    if (m->flags & SERVICE_FORWARD) {
        forward_call(s, call, req);
        return;
    }
    reply_unavailable(s, call, "not the ready leader");
}

void service_serve(void *arg, struct rpc_call *call, struct envelope_view *req)
{
    struct server *s = arg;
    const struct service_method *m;
    ProtobufCMessage *msg = NULL;
    struct service_in in;
    char errmsg[ERR_MSG_SIZE];
    char why[CONVERT_WHY_SIZE];

    if (s->stopping) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "node shutting down", NULL);
        return;
    }
    if (call->forwarded && s->tls.on && !call->peer_member) {
        /* Only a member may hand on another caller's call (and it is
         * refused before its body is even read). */
        reply_error(call, RPC_STATUS_PERMISSION_DENIED, RPC_APPLIED_FALSE,
                    "forwarded calls are taken from members only: this "
                    "connection's certificate has no member role",
                    NULL);
        return;
    }
    if (envelope_unpack_body(req, &msg, errmsg) != 0) {
        char text[ERR_MSG_SIZE + 32];
        snprintf(text, sizeof text, "body: %s", errmsg);
        reply_invalid(call, text);
        return;
    }
    m = method_of(call->method);
    if (m == NULL) {
        /* envelope_unpack_body knows no other method: not reached. */
        reply_invalid(call, "method: not served");
        return;
    }
    memset(&in, 0, sizeof in);
    if (m->check != NULL && m->check(msg, &in, why) != 0) {
        reply_invalid(call, why);
        return;
    }
    if (!authorized(s, call, req, msg, &in)) {
        return;
    }
    route(s, call, req, m, msg, &in);
}
