/* server/service.c: the RPC methods of docs/design.md §5 on one node.
 *
 * Every request:
 *   1. its body is decoded (envelope_unpack_body) and every field bound is
 *      checked (convert.h): a failure is INVALID_ARGUMENT, applied FALSE,
 *      with a message naming the field, whichever node received it;
 *   2. Status is answered by this node itself, always;
 *   3. on the ready leader (replica_ready: leader, term-start barrier
 *      applied) the call goes into the Raft layer: Claim, Complete, Release
 *      and Forget through replica_submit, Lookup through replica_lookup
 *      (linearizable: it rides a barrier), membership through
 *      replica_member, SnapshotTake through replica_snapshot, MembersList
 *      from the applied member directory;
 *   4. anywhere else the body is forwarded unchanged to the leader's client
 *      address (from the fsm's member directory) over one kept channel,
 *      marked forwarded; a forwarded call that does not find a ready leader
 *      is answered UNAVAILABLE with the leader hint and never forwarded
 *      again (one hop). The forward's deadline is what remains of the
 *      caller's (5 s when none was given). The leader's answer is relayed as
 *      it is; a channel error is UNAVAILABLE applied FALSE when the request
 *      was not sent, UNKNOWN applied UNKNOWN when it may have been: never a
 *      blind retry.
 *
 * Errors of the Raft layer map to the wire (docs/design.md §5, replica.h):
 *   NOTLEADER        UNAVAILABLE, applied FALSE, leader hint
 *   UNKNOWN          UNKNOWN, applied UNKNOWN
 *   PRECONDITION     FAILED_PRECONDITION, applied FALSE (membership: the
 *                    ConfigResult outcome FAILED_PRECONDITION with status OK)
 *   BUSY             RESOURCE_EXHAUSTED, applied FALSE
 *   INVALID, TOOBIG  INVALID_ARGUMENT, applied FALSE
 *   SHUTDOWN, NOMEM, INTERNAL  UNAVAILABLE, applied FALSE */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "raft/identity.h"
#include "server/convert.h"
#include "server/server.h"

/* Deadline of a forwarded call whose caller gave none (docs/design.md §5). */
#define FORWARD_DEFAULT_MS 5000
/* At most one forwarding error line per this many ms (the rest counted). */
#define FORWARD_LOG_MS 1000
/* The adapter's snapshot header (adapter.c, docs/raft.md). */
#define SNAPSHOT_HEADER_LEN 24

/* One call waiting for the Raft layer or for the leader's answer. */
struct service_op
{
    struct server *s;
    struct rpc_call *call; /* NULL once answered (shutdown) */
    enum rpc_method method;
    bool has_request_id;
    uint8_t request_id[FSM_REQUEST_ID_LEN];
    struct replica_req req;        /* req.data = this */
    struct replica_member_req mem; /* mem.data = this */
};

/* --- replies -------------------------------------------------------------- */

static void reply_error(struct rpc_call *call,
                        enum rpc_status status,
                        enum rpc_applied applied,
                        const char *error,
                        const char *hint)
{
    struct rpc_reply r;

    memset(&r, 0, sizeof r);
    r.status = status;
    r.applied = applied;
    r.error = error;
    r.leader_hint = hint != NULL && hint[0] != '\0' ? hint : NULL;
    rpc_call_reply(call, &r);
}

/* Pack @msg as the OK answer's body. */
static void reply_msg(struct rpc_call *call, const ProtobufCMessage *msg)
{
    struct rpc_reply r;
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len > 0 ? len : 1);

    if (buf == NULL) {
        /* The command may have applied: say so. */
        reply_error(call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                    "out of memory encoding the answer", NULL);
        return;
    }
    protobuf_c_message_pack(msg, buf);
    memset(&r, 0, sizeof r);
    r.status = RPC_STATUS_OK;
    r.applied = RPC_APPLIED_UNSPECIFIED;
    r.body = buf;
    r.body_len = len;
    rpc_call_reply(call, &r);
    free(buf);
}

bool service_leader_addr(struct server *s, uint64_t *id, char *buf)
{
    raft_id lid = 0;
    const char *raddr = NULL;
    const struct fsm *f = s->rep.fsm;

    buf[0] = '\0';
    *id = 0;
    if (s->raft_closed || f == NULL) {
        return false;
    }
    replica_leader(&s->rep, &lid, &raddr);
    *id = lid;
    if (lid == 0) {
        return false;
    }
    if (lid == s->id) {
        snprintf(buf, RPC_ADDR_MAX + 1, "%s", s->cfg.client_addr);
        return true;
    }
    for (size_t i = 0; i < fsm_n_members(f); i++) {
        const struct fsm_member *m = fsm_member(f, i);
        if (m->id == lid && m->client_addr[0] != '\0') {
            snprintf(buf, RPC_ADDR_MAX + 1, "%s", m->client_addr);
            return true;
        }
    }
    return false;
}

/* UNAVAILABLE, not applied, with the leader hint if one is known. */
static void reply_unavailable(struct server *s,
                              struct rpc_call *call,
                              const char *why)
{
    char hint[RPC_ADDR_MAX + 1];
    uint64_t lid;

    service_leader_addr(s, &lid, hint);
    reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE, why, hint);
}

static void reply_replica_error(struct server *s,
                                struct rpc_call *call,
                                int rv,
                                const char *msg)
{
    char text[RPC_ERROR_MAX + 1];

    if (msg != NULL && msg[0] != '\0') {
        snprintf(text, sizeof text, "%s: %s", replica_strerror(rv), msg);
    } else {
        snprintf(text, sizeof text, "%s", replica_strerror(rv));
    }
    switch (rv) {
        case REPLICA_E_NOTLEADER:
        case REPLICA_E_SHUTDOWN:
        case REPLICA_E_NOMEM:
        case REPLICA_E_INTERNAL:
            reply_unavailable(s, call, text);
            return;
        case REPLICA_E_UNKNOWN:
            reply_error(call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN, text,
                        NULL);
            return;
        case REPLICA_E_PRECONDITION:
            reply_error(call, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_FALSE,
                        text, NULL);
            return;
        case REPLICA_E_BUSY:
            reply_error(call, RPC_STATUS_RESOURCE_EXHAUSTED, RPC_APPLIED_FALSE,
                        text, NULL);
            return;
        case REPLICA_E_INVALID:
        case REPLICA_E_TOOBIG:
            reply_error(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE,
                        text, NULL);
            return;
        default:
            /* Not a code of the layer: the safe answer is "unknown". */
            reply_error(call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN, text,
                        NULL);
            return;
    }
}

static void reply_invalid(struct rpc_call *call, const char *why)
{
    reply_error(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE, why,
                NULL);
}

static struct service_op *op_new(struct server *s, struct rpc_call *call)
{
    struct service_op *op = calloc(1, sizeof *op);

    if (op == NULL) {
        return NULL;
    }
    op->s = s;
    op->call = call;
    op->method = call->method;
    op->req.data = op;
    op->mem.data = op;
    return op;
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
    const ProtobufCMessage *msg = NULL;

    if (op->call == NULL) {
        free(op);
        return;
    }
    if (status != 0 || res == NULL) {
        reply_replica_error(op->s, op->call,
                            status != 0 ? status : REPLICA_E_INTERNAL, NULL);
        free(op);
        return;
    }
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
            msg = &lookup.base;
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
    free(op);
}

/* @cmd borrows from the request; the Raft layer copies it on submit. */
static void submit(struct server *s,
                   struct rpc_call *call,
                   const struct fsm_cmd *cmd,
                   const uint8_t *request_id)
{
    struct service_op *op = op_new(s, call);
    int rv;

    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
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
        free(op);
    }
}

/* --- membership and snapshots on the ready leader ------------------------- */

static void reply_config(struct rpc_call *call,
                         enum rpc_method method,
                         enum fsm_outcome outcome,
                         const char *reason)
{
    Once__Rpc__ConfigResult cr = ONCE__RPC__CONFIG_RESULT__INIT;
    Once__Rpc__MembersAddResponse add = ONCE__RPC__MEMBERS_ADD_RESPONSE__INIT;
    Once__Rpc__MembersRemoveResponse rm =
        ONCE__RPC__MEMBERS_REMOVE_RESPONSE__INIT;
    Once__Rpc__MembersAssignResponse as =
        ONCE__RPC__MEMBERS_ASSIGN_RESPONSE__INIT;
    char text[257];

    cr.outcome = (Once__Rpc__Outcome)outcome;
    if (reason != NULL) {
        snprintf(text, sizeof text, "%s", reason);
        cr.reason = text;
    }
    switch (method) {
        case RPC_METHOD_MEMBERS_ADD:
            add.result = &cr;
            reply_msg(call, &add.base);
            break;
        case RPC_METHOD_MEMBERS_REMOVE:
            rm.result = &cr;
            reply_msg(call, &rm.base);
            break;
        default:
            as.result = &cr;
            reply_msg(call, &as.base);
            break;
    }
}

static const char *op_name(enum replica_member_op op)
{
    switch (op) {
        case REPLICA_MEMBER_ADD:
            return "add";
        case REPLICA_MEMBER_REMOVE:
            return "remove";
        case REPLICA_MEMBER_ASSIGN:
            return "assign";
        case REPLICA_MEMBER_TRANSFER:
            return "transfer";
    }
    return "unknown";
}

/* The reason of a refused add, when the layer refused before starting. */
static const char *add_refusal(struct server *s, uint64_t id)
{
    return fsm_is_retired(s->rep.fsm, id)
               ? "this id was retired and can never be added again"
               : "the id is already in the configuration with another "
                 "address or a higher role";
}

static void answer_member(struct service_op *op, int status, const char *msg)
{
    struct server *s = op->s;
    struct rpc_call *call = op->call;

    if (status == 0) {
        if (op->method == RPC_METHOD_TRANSFER) {
            Once__Rpc__TransferResponse tr = ONCE__RPC__TRANSFER_RESPONSE__INIT;
            raft_id lid = 0;
            const char *addr = NULL;

            replica_leader(&s->rep, &lid, &addr);
            tr.leader_id = lid != s->id ? lid : 0;
            reply_msg(call, &tr.base);
        } else {
            reply_config(call, op->method, FSM_OK, NULL);
        }
        return;
    }
    if (status == REPLICA_E_BUSY && (msg == NULL || msg[0] == '\0')) {
        msg = "another membership operation or a snapshot is running";
    }
    if (status == REPLICA_E_PRECONDITION && op->method != RPC_METHOD_TRANSFER) {
        reply_config(
            call, op->method, FSM_FAILED_PRECONDITION,
            msg != NULL && msg[0] != '\0'
                ? msg
                : (op->mem.op == REPLICA_MEMBER_ADD
                       ? add_refusal(s, op->mem.id)
                       : "the id is not in the configuration, already has "
                         "that role, or is the leader (transfer first)"));
        return;
    }
    reply_replica_error(s, call, status, msg);
}

static void member_cb(struct replica_member_req *m, int status, const char *msg)
{
    struct service_op *op = m->data;
    struct server *s = op->s;
    char idb[IDENTITY_HEX_LEN + 1], q[200], e[80];

    if (s->member_op == op) {
        s->member_op = NULL;
    }
    log_kv(
        status == 0 ? LOG_INFO : LOG_WARN, "membership operation finished",
        "op=%s member=%s status=%s%s%s", op_name(m->op),
        identity_format(m->id, idb),
        status == 0 ? "ok" : log_quote(replica_strerror(status), e, sizeof e),
        msg != NULL && msg[0] != '\0' ? " reason=" : "",
        msg != NULL && msg[0] != '\0' ? log_quote(msg, q, sizeof q) : "");
    if (op->call != NULL) {
        answer_member(op, status, msg);
    }
    free(op);
}

static void start_member(struct server *s,
                         struct rpc_call *call,
                         struct service_op *op)
{
    char idb[IDENTITY_HEX_LEN + 1];
    int rv;

    rpc_call_mark_sent(call);
    /* Published and logged before the call: replica_member may finish the
     * operation (member_cb, which frees @op and clears member_op) before it
     * returns, e.g. a transfer that raft refuses at once. @op is not
     * touched after a 0 return. */
    s->member_op = op;
    log_kv(LOG_INFO, "membership operation started", "op=%s member=%s",
           op_name(op->mem.op), identity_format(op->mem.id, idb));
    rv = replica_member(&s->rep, &op->mem, member_cb);
    if (rv != 0) {
        s->member_op = NULL; /* refused: the callback never runs */
        answer_member(op, rv, NULL);
        free(op);
    }
}

static void snapshot_cb(struct replica *rep, int status)
{
    struct server *s = rep->hooks.arg;
    struct service_op *op = s->snap_op;
    Once__Rpc__SnapshotTakeResponse sr =
        ONCE__RPC__SNAPSHOT_TAKE_RESPONSE__INIT;

    s->snap_op = NULL;
    if (op == NULL) {
        return;
    }
    if (op->call != NULL) {
        if (status == 0) {
            /* Taken: stored, or still being stored (raft_uv writes it
             * asynchronously: then only the pending one has the index). */
            sr.index = rep->raft->log.snapshot.last_index;
            if (rep->raft->snapshot.pending.term != 0 &&
                rep->raft->snapshot.pending.index > sr.index) {
                sr.index = rep->raft->snapshot.pending.index;
            }
            /* The layer does not keep the snapshot's size: this is the size
             * of a snapshot of the state now, equal to the one taken unless
             * entries applied since (docs/server.md). */
            sr.size_bytes = SNAPSHOT_HEADER_LEN + fsm_snapshot_size(rep->fsm);
            log_kv(LOG_INFO, "snapshot taken", "index=%" PRIu64,
                   (uint64_t)sr.index);
            reply_msg(op->call, &sr.base);
        } else {
            reply_replica_error(
                s, op->call, status,
                status == REPLICA_E_BUSY
                    ? "no snapshot taken (a configuration change is "
                      "uncommitted)"
                    : NULL);
        }
    }
    free(op);
}

static void do_snapshot(struct server *s, struct rpc_call *call)
{
    struct service_op *op;
    int rv;

    if (s->snap_op != NULL) {
        reply_error(call, RPC_STATUS_RESOURCE_EXHAUSTED, RPC_APPLIED_FALSE,
                    "a snapshot is already being taken", NULL);
        return;
    }
    op = op_new(s, call);
    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    s->snap_op = op;
    rv = replica_snapshot(&s->rep, snapshot_cb);
    if (rv != 0) {
        s->snap_op = NULL;
        reply_replica_error(s, call, rv, NULL);
        free(op);
    }
}

/* --- Status and MembersList ----------------------------------------------- */

/* Reachable, as this node can tell: itself always; on the leader, a member
 * in the Raft configuration that answered within the last election timeout
 * (raft's recent_recv); on a follower, the leader it hears from. Others
 * are reported unreachable because this node cannot tell. */
static bool member_reachable(struct server *s, uint64_t id)
{
    struct raft *r = s->rep.raft;
    raft_id lid = 0;
    const char *addr = NULL;

    if (id == s->id) {
        return true;
    }
    if (raft_state(r) == RAFT_LEADER) {
        for (unsigned i = 0; i < r->configuration.n; i++) {
            if (r->configuration.servers[i].id == id) {
                return r->leader_state.progress != NULL &&
                       r->leader_state.progress[i].recent_recv;
            }
        }
        return false;
    }
    replica_leader(&s->rep, &lid, &addr);
    return lid != 0 && lid == id;
}

static Once__Rpc__RaftRole raft_role(struct raft *r)
{
    switch (raft_state(r)) {
        case RAFT_FOLLOWER:
            return ONCE__RPC__RAFT_ROLE__RAFT_ROLE_FOLLOWER;
        case RAFT_CANDIDATE:
            return ONCE__RPC__RAFT_ROLE__RAFT_ROLE_CANDIDATE;
        case RAFT_LEADER:
            return ONCE__RPC__RAFT_ROLE__RAFT_ROLE_LEADER;
        default:
            return ONCE__RPC__RAFT_ROLE__RAFT_ROLE_UNAVAILABLE;
    }
}

/* Fill @pm/@pp with the member directory (at most FSM_MEMBERS_MAX). */
static size_t fill_members(struct server *s,
                           Once__Rpc__Member *pm,
                           Once__Rpc__Member **pp)
{
    const struct fsm *f = s->rep.fsm;
    size_t n = fsm_n_members(f), i;

    for (i = 0; i < n && i < FSM_MEMBERS_MAX; i++) {
        const struct fsm_member *m = fsm_member(f, i);
        convert_member_out(m, member_reachable(s, m->id), &pm[i]);
        pp[i] = &pm[i];
    }
    return i;
}

/* SHA-256 of the state machine's canonical snapshot (fsm/snapshot.c writes
 * records in table order, the same on every replica at one applied index),
 * first 8 bytes big-endian; 0 when out of memory. O(state): asked for by
 * tests and audits only. */
static uint64_t state_digest(const struct fsm *f)
{
    size_t len = fsm_snapshot_size(f);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    uint8_t md[SHA256_DIGEST_LENGTH];
    uint64_t d = 0;

    if (buf == NULL) {
        return 0;
    }
    fsm_snapshot_write(f, buf, len);
    if (EVP_Digest(buf, len, md, NULL, EVP_sha256(), NULL) == 1) {
        for (int i = 0; i < 8; i++) {
            d = d << 8 | md[i];
        }
    }
    free(buf);
    return d;
}

static void do_status(struct server *s,
                      struct rpc_call *call,
                      const Once__Rpc__StatusRequest *req)
{
    static Once__Rpc__Member pm[FSM_MEMBERS_MAX];
    static Once__Rpc__Member *pp[FSM_MEMBERS_MAX];
    static uint64_t voters[FSM_MEMBERS_MAX];
    Once__Rpc__StatusResponse st = ONCE__RPC__STATUS_RESPONSE__INIT;
    struct raft *r = s->rep.raft;
    char leader[RPC_ADDR_MAX + 1];
    uint64_t lid = 0;
    const struct fsm *f = s->rep.fsm;

    st.role = raft_role(r);
    st.term = r->current_term;
    st.commit_index = r->commit_index;
    st.applied_index = raft_last_applied(r);
    st.applied_digest = s->rep.digest; /* at applied_index: same loop turn */
    if (req != NULL && req->state_digest) {
        st.state_digest = state_digest(f);
    }
    /* The index of the entry r->configuration comes from: the uncommitted
     * one while there is one (raft.h, "possible scenarios" 3), so that
     * config_index and config_voters always describe the same entry. */
    st.config_index = r->configuration_uncommitted_index != 0
                          ? r->configuration_uncommitted_index
                          : r->configuration_index;
    for (unsigned i = 0;
         i < r->configuration.n && st.n_config_voters < FSM_MEMBERS_MAX; i++) {
        if (r->configuration.servers[i].role == RAFT_VOTER) {
            voters[st.n_config_voters++] = r->configuration.servers[i].id;
        }
    }
    st.config_voters = voters;
    service_leader_addr(s, &lid, leader);
    st.leader_id = lid;
    st.leader_addr = leader;
    /* The backend chosen at start (--storage; "uring", "pwrite" or "uv"). */
    st.store_backend = s->rep.store != NULL && s->rep.store->name != NULL
                           ? (char *)s->rep.store->name
                           : "";
    st.n_members = fill_members(s, pm, pp);
    st.members = st.n_members > 0 ? pp : NULL;
    for (size_t i = 0; i < fsm_n_members(f); i++) {
        if (fsm_member(f, i)->id == s->id) {
            st.member_role = convert_role_out(fsm_member(f, i)->role);
        }
    }
    reply_msg(call, &st.base);
}

static void do_members_list(struct server *s, struct rpc_call *call)
{
    static Once__Rpc__Member pm[FSM_MEMBERS_MAX];
    static Once__Rpc__Member *pp[FSM_MEMBERS_MAX];
    Once__Rpc__MembersListResponse ml = ONCE__RPC__MEMBERS_LIST_RESPONSE__INIT;

    ml.n_members = fill_members(s, pm, pp);
    ml.members = ml.n_members > 0 ? pp : NULL;
    reply_msg(call, &ml.base);
}

/* --- forwarding ------------------------------------------------------------
 */

static void forward_log(struct server *s, const char *addr, int rv, bool sent)
{
    uint64_t now = uv_now(&s->loop);

    if (s->fwd_log_ms != 0 && now - s->fwd_log_ms < FORWARD_LOG_MS) {
        s->fwd_log_suppressed++;
        return;
    }
    log_kv(LOG_WARN, "forwarding to the leader failed",
           "leader=%s error=%s sent=%d suppressed=%u", addr,
           log_quote(rpc_conn_strerror(rv), (char[96]){0}, 96), sent ? 1 : 0,
           s->fwd_log_suppressed);
    s->fwd_log_ms = now;
    s->fwd_log_suppressed = 0;
}

struct forward
{
    struct server *s;
    struct rpc_call *call;
    char addr[RPC_ADDR_MAX + 1];
};

static void forward_cb(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct forward *fw = arg;
    struct rpc_reply r;

    if (rv != 0) {
        forward_log(fw->s, fw->addr, rv, sent);
        if (sent) {
            reply_error(fw->call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                        "forwarded to the leader; no answer (outcome unknown)",
                        NULL);
        } else {
            reply_error(fw->call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                        "could not reach the leader", fw->addr);
        }
        free(fw);
        return;
    }
    /* The leader's answer, as it is. */
    memset(&r, 0, sizeof r);
    r.status = ans->status;
    r.applied = ans->applied;
    r.error = ans->error_len > 0 ? ans->error : NULL;
    r.leader_hint = ans->leader_hint_len > 0 ? ans->leader_hint : NULL;
    r.body = ans->body;
    r.body_len = ans->body_len;
    rpc_call_reply(fw->call, &r);
    free(fw);
}

/* The channel to @addr: the kept one, or a new one (the old one drains). */
static struct rpc_channel *channel_for(struct server *s, const char *addr)
{
    struct rpc_channel *ch;
    char errmsg[RPC_ERRMSG_SIZE];
    int rv;

    if (s->fwd != NULL && strcmp(rpc_channel_addr(s->fwd), addr) == 0) {
        return s->fwd;
    }
    rv = rpc_channel_open(&ch, &s->loop, addr, &s->cfg.limits, errmsg);
    if (rv != 0) {
        log_kv(LOG_WARN, "cannot open a channel to the leader",
               "leader=%s error=%s", addr,
               log_quote(errmsg, (char[300]){0}, 300));
        return NULL;
    }
    if (s->fwd != NULL) {
        if (s->n_drain == SERVER_DRAIN_MAX) {
            /* Too many leaders in a row: the oldest one's calls fail
             * (outcome unknown for those sent). */
            rpc_channel_close(s->drain[0]);
            memmove(&s->drain[0], &s->drain[1],
                    (SERVER_DRAIN_MAX - 1) * sizeof s->drain[0]);
            s->n_drain--;
        }
        s->drain[s->n_drain++] = s->fwd;
    }
    s->fwd = ch;
    log_kv(LOG_INFO, "forwarding to a new leader", "leader=%s", addr);
    return ch;
}

static void forward(struct server *s,
                    struct rpc_call *call,
                    const struct envelope_view *req)
{
    char addr[RPC_ADDR_MAX + 1];
    struct envelope_view fv;
    struct rpc_channel *ch;
    struct forward *fw;
    uint64_t lid, budget, now, elapsed;
    int rv;

    if (call->forwarded) {
        reply_unavailable(s, call,
                          "not the ready leader (a forwarded call is never "
                          "forwarded again)");
        return;
    }
    if (!service_leader_addr(s, &lid, addr)) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    lid == 0 ? "no known leader"
                             : "the leader's client address is not known yet",
                    NULL);
        return;
    }
    if (lid == s->id) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "this node is the leader but not ready yet (term start)",
                    addr);
        return;
    }
    budget = FORWARD_DEFAULT_MS;
    if (call->deadline_ms != 0) {
        now = uv_now(&s->loop);
        elapsed =
            now > call->received_mono_ms ? now - call->received_mono_ms : 0;
        if (elapsed >= call->deadline_ms) {
            reply_error(call, RPC_STATUS_DEADLINE_EXCEEDED, RPC_APPLIED_FALSE,
                        "deadline passed before forwarding", NULL);
            return;
        }
        budget = call->deadline_ms - elapsed;
    }
    ch = channel_for(s, addr);
    fw = ch != NULL ? calloc(1, sizeof *fw) : NULL;
    if (fw == NULL) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "cannot forward to the leader", addr);
        return;
    }
    fw->s = s;
    fw->call = call;
    snprintf(fw->addr, sizeof fw->addr, "%s", addr);
    memset(&fv, 0, sizeof fv);
    fv.method = call->method;
    fv.direction = RPC_REQUEST;
    fv.deadline_ms = budget;
    fv.group_id = call->group_id;
    fv.body = req->body;
    fv.body_len = req->body_len;
    fv.forwarded = true;
    fv.has_cluster_id = call->has_cluster_id; /* the caller's pin */
    memcpy(fv.cluster_id, call->cluster_id, RPC_ID_LEN);
    rv = rpc_channel_call(ch, &fv, budget, forward_cb, fw);
    if (rv != 0) {
        free(fw);
        forward_log(s, addr, rv, false);
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "cannot forward to the leader", addr);
        return;
    }
    /* The leader may act on it from now on. */
    rpc_call_mark_sent(call);
}

void service_tick(struct server *s)
{
    unsigned i = 0;

    while (i < s->n_drain) {
        if (rpc_channel_pending(s->drain[i]) == 0) {
            rpc_channel_close(s->drain[i]);
            s->drain[i] = s->drain[--s->n_drain];
        } else {
            i++;
        }
    }
}

void service_shutdown(struct server *s)
{
    if (s->member_op != NULL && s->member_op->call != NULL) {
        reply_error(s->member_op->call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                    "node shutting down during the membership operation", NULL);
        s->member_op->call = NULL;
    }
    if (s->snap_op != NULL && s->snap_op->call != NULL) {
        reply_error(s->snap_op->call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "node shutting down", NULL);
        s->snap_op->call = NULL;
    }
    if (s->fwd != NULL) {
        rpc_channel_close(s->fwd);
        s->fwd = NULL;
    }
    for (unsigned i = 0; i < s->n_drain; i++) {
        rpc_channel_close(s->drain[i]);
    }
    s->n_drain = 0;
}

/* --- dispatch --------------------------------------------------------------
 */

/* Handle a validated request on the ready leader. */
static void serve_leader(struct server *s,
                         struct rpc_call *call,
                         ProtobufCMessage *msg)
{
    const struct fsm *f = s->rep.fsm;
    struct fsm_cmd cmd;
    char why[CONVERT_WHY_SIZE];
    struct service_op *op;
    struct fsm_member m;

    if (!fsm_bootstrapped(f)) {
        /* The FSM bootstrap command is on its way (node.c). */
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "the cluster is not bootstrapped yet", NULL);
        return;
    }
    switch (call->method) {
        case RPC_METHOD_CLAIM: {
            const Once__Rpc__ClaimRequest *in = (void *)msg;
            if (convert_claim_in(in, &cmd, why) != 0 ||
                convert_check_claim_settings(&cmd.u.claim, fsm_settings(f),
                                             why) != 0) {
                reply_invalid(call, why);
                return;
            }
            submit(s, call, &cmd, in->request_id.data);
            return;
        }
        case RPC_METHOD_COMPLETE: {
            const Once__Rpc__CompleteRequest *in = (void *)msg;
            if (convert_complete_in(in, &cmd, why) != 0) {
                reply_invalid(call, why);
                return;
            }
            submit(s, call, &cmd, in->request_id.data);
            return;
        }
        case RPC_METHOD_RELEASE: {
            const Once__Rpc__ReleaseRequest *in = (void *)msg;
            if (convert_release_in(in, &cmd, why) != 0) {
                reply_invalid(call, why);
                return;
            }
            submit(s, call, &cmd, in->request_id.data);
            return;
        }
        case RPC_METHOD_LOOKUP: {
            const Once__Rpc__LookupRequest *in = (void *)msg;
            if (convert_ident_in(&in->scope, &in->key, FSM_CMD_LOOKUP, &cmd,
                                 why) != 0) {
                reply_invalid(call, why);
                return;
            }
            submit(s, call, &cmd, NULL);
            return;
        }
        case RPC_METHOD_FORGET: {
            const Once__Rpc__ForgetRequest *in = (void *)msg;
            if (convert_ident_in(&in->scope, &in->key, FSM_CMD_FORGET, &cmd,
                                 why) != 0) {
                reply_invalid(call, why);
                return;
            }
            submit(s, call, &cmd, NULL);
            return;
        }
        case RPC_METHOD_MEMBERS_LIST:
            do_members_list(s, call);
            return;
        case RPC_METHOD_SNAPSHOT_TAKE:
            do_snapshot(s, call);
            return;
        default:
            break;
    }
    /* Membership. */
    op = op_new(s, call);
    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    switch (call->method) {
        case RPC_METHOD_MEMBERS_ADD: {
            const Once__Rpc__MembersAddRequest *in = (void *)msg;
            if (convert_member_in(in->member, true, &m, why) != 0) {
                break;
            }
            op->mem.op = REPLICA_MEMBER_ADD;
            op->mem.id = m.id;
            memcpy(op->mem.raft_addr, m.raft_addr, sizeof m.raft_addr);
            memcpy(op->mem.client_addr, m.client_addr, sizeof m.client_addr);
            op->mem.role = m.role;
            start_member(s, call, op);
            return;
        }
        case RPC_METHOD_MEMBERS_REMOVE: {
            const Once__Rpc__MembersRemoveRequest *in = (void *)msg;
            if (in->id == 0) {
                snprintf(why, sizeof why, "id: must not be 0");
                break;
            }
            op->mem.op = REPLICA_MEMBER_REMOVE;
            op->mem.id = in->id;
            start_member(s, call, op);
            return;
        }
        case RPC_METHOD_MEMBERS_ASSIGN: {
            const Once__Rpc__MembersAssignRequest *in = (void *)msg;
            if (in->id == 0) {
                snprintf(why, sizeof why, "id: must not be 0");
                break;
            }
            op->mem.op = REPLICA_MEMBER_ASSIGN;
            op->mem.id = in->id;
            op->mem.role = convert_role_in(in->role);
            if (op->mem.role == 0) {
                snprintf(why, sizeof why,
                         "role: must be VOTER, STANDBY or SPARE");
                break;
            }
            start_member(s, call, op);
            return;
        }
        case RPC_METHOD_TRANSFER: {
            const Once__Rpc__TransferRequest *in = (void *)msg;
            op->mem.op = REPLICA_MEMBER_TRANSFER;
            op->mem.id = in->id;
            start_member(s, call, op);
            return;
        }
        default:
            snprintf(why, sizeof why, "method: not served");
            break;
    }
    free(op);
    reply_invalid(call, why);
}

/* The bounds a follower can check before forwarding (those that do not
 * depend on the cluster's settings): the leader checks everything again. */
static int check_any(enum rpc_method method, ProtobufCMessage *msg, char *why)
{
    struct fsm_cmd cmd;
    struct fsm_member m;

    switch (method) {
        case RPC_METHOD_CLAIM:
            return convert_claim_in((void *)msg, &cmd, why);
        case RPC_METHOD_COMPLETE:
            return convert_complete_in((void *)msg, &cmd, why);
        case RPC_METHOD_RELEASE:
            return convert_release_in((void *)msg, &cmd, why);
        case RPC_METHOD_LOOKUP: {
            const Once__Rpc__LookupRequest *in = (void *)msg;
            return convert_ident_in(&in->scope, &in->key, FSM_CMD_LOOKUP, &cmd,
                                    why);
        }
        case RPC_METHOD_FORGET: {
            const Once__Rpc__ForgetRequest *in = (void *)msg;
            return convert_ident_in(&in->scope, &in->key, FSM_CMD_FORGET, &cmd,
                                    why);
        }
        case RPC_METHOD_MEMBERS_ADD: {
            const Once__Rpc__MembersAddRequest *in = (void *)msg;
            return convert_member_in(in->member, true, &m, why);
        }
        case RPC_METHOD_MEMBERS_REMOVE: {
            const Once__Rpc__MembersRemoveRequest *in = (void *)msg;
            if (in->id == 0) {
                snprintf(why, CONVERT_WHY_SIZE, "id: must not be 0");
                return -1;
            }
            return 0;
        }
        case RPC_METHOD_MEMBERS_ASSIGN: {
            const Once__Rpc__MembersAssignRequest *in = (void *)msg;
            if (in->id == 0) {
                snprintf(why, CONVERT_WHY_SIZE, "id: must not be 0");
                return -1;
            }
            if (convert_role_in(in->role) == 0) {
                snprintf(why, CONVERT_WHY_SIZE,
                         "role: must be VOTER, STANDBY or SPARE");
                return -1;
            }
            return 0;
        }
        default:
            return 0;
    }
}

void service_serve(void *arg, struct rpc_call *call, struct envelope_view *req)
{
    struct server *s = arg;
    ProtobufCMessage *msg = NULL;
    char errmsg[RPC_ERRMSG_SIZE + 16];
    char why[CONVERT_WHY_SIZE];
    int rv;

    if (s->stopping) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "node shutting down", NULL);
        return;
    }
    rv = envelope_unpack_body(req, &msg, errmsg);
    if (rv != 0) {
        char text[RPC_ERRMSG_SIZE + 32];
        snprintf(text, sizeof text, "body: %s", errmsg);
        reply_invalid(call, text);
        return;
    }
    if (check_any(call->method, msg, why) != 0) {
        reply_invalid(call, why);
        return;
    }
    if (call->method == RPC_METHOD_STATUS) {
        do_status(s, call, (const Once__Rpc__StatusRequest *)msg);
        return;
    }
    node_sync_ids(s);
    if (call->has_cluster_id && s->ids_have_cluster &&
        memcmp(call->cluster_id, s->ids.cluster_id, RPC_ID_LEN) != 0) {
        /* The RPC layer checks this too, with the ids it was given; this
         * covers a request that arrived in the same loop turn as the
         * bootstrap's apply. */
        reply_error(call, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_FALSE,
                    "cluster id mismatch: the request is for another cluster",
                    NULL);
        return;
    }
    if (replica_ready(&s->rep)) {
        serve_leader(s, call, msg);
        return;
    }
    forward(s, call, req);
}
