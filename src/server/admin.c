/* server/admin.c: the Admin methods on one node (admin.h).
 *
 * Membership (MembersAdd/Remove/Assign, Transfer) goes through
 * replica_member: the operation is published in s->admin.member_op before
 * the call, because replica_member may finish it (member_cb) before it
 * returns. Refusals of the layer with PRECONDITION are outcomes, not
 * statuses: a ConfigResult FAILED_PRECONDITION with status OK (docs/server.md).
 * SnapshotTake goes through replica_snapshot. Status and MembersList are
 * read from raft and the applied member directory. */
#include "server/admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/identity.h"
#include "server/backup.h"
#include "server/convert.h"
#include "server/leader.h"
#include "server/reply.h"
#include "server/safety.h"
#include "server/server.h"
#include "server/service.h"

/* The adapter's snapshot header (adapter.c, docs/raft.md). */
#define SNAPSHOT_HEADER_LEN 24

/* A membership operation or a snapshot, until the Raft layer answers. */
struct admin_op
{
    struct server *s;
    struct rpc_call *call; /* NULL once answered (shutdown) */
    enum rpc_method method;
    struct replica_member_req mem; /* mem.data = this */
};

static struct admin_op *op_new(struct server *s, struct rpc_call *call)
{
    struct admin_op *op = calloc(1, sizeof *op);

    if (op == NULL) {
        return NULL;
    }
    op->s = s;
    op->call = call;
    op->method = call->method;
    op->mem.data = op;
    return op;
}

/* --- membership and snapshots on the ready leader ------------------------- */

static void reply_config(struct rpc_call *call,
                         enum rpc_method method,
                         enum fsm_outcome outcome,
                         const char *reason)
{
    Once__Rpc__ConfigResult cr;
    Once__Rpc__MembersAddResponse add = ONCE__RPC__MEMBERS_ADD_RESPONSE__INIT;
    Once__Rpc__MembersRemoveResponse rm =
        ONCE__RPC__MEMBERS_REMOVE_RESPONSE__INIT;
    Once__Rpc__MembersAssignResponse as =
        ONCE__RPC__MEMBERS_ASSIGN_RESPONSE__INIT;
    struct convert_config_buf text;

    convert_config_out(outcome, reason, &cr, &text);
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

static void answer_member(struct admin_op *op, int status, const char *msg)
{
    struct server *s = op->s;
    struct rpc_call *call = op->call;

    if (status == 0) {
        if (op->method == RPC_METHOD_TRANSFER) {
            Once__Rpc__TransferResponse tr = ONCE__RPC__TRANSFER_RESPONSE__INIT;
            uint64_t lid = 0;
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
    struct admin_op *op = m->data;
    struct server *s = op->s;
    char idb[IDENTITY_HEX_LEN + 1], q[200], e[80];

    if (s->admin.member_op == op) {
        s->admin.member_op = NULL;
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
                         struct admin_op *op)
{
    char idb[IDENTITY_HEX_LEN + 1];
    int rv;

    rpc_call_mark_sent(call);
    /* Published and logged before the call: replica_member may finish the
     * operation (member_cb, which frees @op and clears member_op) before it
     * returns, e.g. a transfer that raft refuses at once. @op is not
     * touched after a 0 return. */
    s->admin.member_op = op;
    log_kv(LOG_INFO, "membership operation started", "op=%s member=%s",
           op_name(op->mem.op), identity_format(op->mem.id, idb));
    rv = replica_member(&s->rep, &op->mem, member_cb);
    if (rv != 0) {
        s->admin.member_op = NULL; /* refused: the callback never runs */
        answer_member(op, rv, op->mem.msg[0] != '\0' ? op->mem.msg : NULL);
        free(op);
    }
}

static void snapshot_cb(struct replica *rep, int status)
{
    struct server *s = rep->hooks.arg;
    struct admin_op *op = s->admin.snap_op;
    Once__Rpc__SnapshotTakeResponse sr =
        ONCE__RPC__SNAPSHOT_TAKE_RESPONSE__INIT;

    s->admin.snap_op = NULL;
    if (op == NULL) {
        return;
    }
    if (op->call != NULL) {
        if (status == 0) {
            /* Taken: stored, or still being stored (the store writes it
             * asynchronously: then only the pending one has the index). */
            sr.index = replica_snapshot_index(rep);
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

void admin_snapshot_take(struct server *s,
                         struct rpc_call *call,
                         const ProtobufCMessage *msg,
                         const struct service_in *in)
{
    struct admin_op *op;
    int rv;

    (void)msg;
    (void)in;
    if (s->admin.snap_op != NULL) {
        reply_error(call, RPC_STATUS_RESOURCE_EXHAUSTED, RPC_APPLIED_FALSE,
                    "a snapshot is already being taken", NULL);
        return;
    }
    op = op_new(s, call);
    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    s->admin.snap_op = op;
    rv = replica_snapshot(&s->rep, snapshot_cb);
    if (rv != 0) {
        s->admin.snap_op = NULL;
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
    struct replica_server sv;
    uint64_t lid = 0;
    const char *addr = NULL;

    if (id == s->id) {
        return true;
    }
    if (replica_role(&s->rep) == REPLICA_ROLE_LEADER) {
        for (unsigned i = 0; i < replica_conf_n(&s->rep); i++) {
            replica_conf_server(&s->rep, i, &sv);
            if (sv.id == id) {
                return replica_progress_recent(&s->rep, i);
            }
        }
        return false;
    }
    replica_leader(&s->rep, &lid, &addr);
    return lid != 0 && lid == id;
}

static Once__Rpc__RaftRole wire_role(enum replica_role r)
{
    switch (r) {
        case REPLICA_ROLE_FOLLOWER:
            return ONCE__RPC__RAFT_ROLE__RAFT_ROLE_FOLLOWER;
        case REPLICA_ROLE_CANDIDATE:
            return ONCE__RPC__RAFT_ROLE__RAFT_ROLE_CANDIDATE;
        case REPLICA_ROLE_LEADER:
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

/* A restored cluster's fence, the backups this node serves, and the log
 * schema in force and supported. */
static void status_fence(struct server *s, Once__Rpc__StatusResponse *st)
{
    static struct fsm_fence_info fi;

    fsm_fence(s->rep.fsm, &fi);
    if (fi.active) {
        st->restored_from.data = fi.source_cluster_id;
        st->restored_from.len = FSM_CLUSTER_ID_LEN;
        st->restore_time_ms = fi.restore_time_ms;
        st->replay_window_until_ms = fi.until_ms;
        st->restore_stale_ts_ms = fi.stale_ts_ms;
    }
    st->backups_open = backups_open(&s->backups);
    st->schema = fsm_schema_version(s->rep.fsm);
    st->schema_max = admin_schema_max();
    st->no_vote_cut_index = rio_novote_index(&s->rep.rio);
}

/* The status of this node into @st (the static arrays hold what it points
 * at until the reply is packed). */
static void status_fill(struct server *s, Once__Rpc__StatusResponse *st)
{
    static Once__Rpc__Member pm[FSM_MEMBERS_MAX];
    static Once__Rpc__Member *pp[FSM_MEMBERS_MAX];
    static uint64_t voters[FSM_MEMBERS_MAX];
    static char leader[RPC_ADDR_MAX + 1];
    const struct replica *rep = &s->rep;
    struct replica_server sv;
    uint64_t lid = 0;
    const struct fsm *f = s->rep.fsm;

    st->role = wire_role(replica_role(rep));
    st->term = replica_term(rep);
    st->commit_index = replica_commit_index(rep);
    st->applied_index = replica_last_applied(rep);
    st->applied_digest = s->rep.digest; /* at applied_index: same loop turn */
    /* The index of the entry the configuration in force comes from: the
     * uncommitted one while there is one, so that config_index and
     * config_voters always describe the same entry. */
    st->config_index = replica_conf_latest_index(rep);
    st->n_config_voters = 0;
    for (unsigned i = 0;
         i < replica_conf_n(rep) && st->n_config_voters < FSM_MEMBERS_MAX;
         i++) {
        replica_conf_server(rep, i, &sv);
        if (sv.role == FSM_ROLE_VOTER) {
            voters[st->n_config_voters++] = sv.id;
        }
    }
    st->config_voters = voters;
    leader_addr(s, &lid, leader);
    st->leader_id = lid;
    st->leader_addr = leader;
    /* The backend chosen at start (--storage; "uring", "pwrite" or "uv"). */
    st->store_backend = s->rep.store != NULL && s->rep.store->name != NULL
                            ? (char *)s->rep.store->name
                            : "";
    st->n_members = fill_members(s, pm, pp);
    st->members = st->n_members > 0 ? pp : NULL;
    status_fence(s, st);
    for (size_t i = 0; i < fsm_n_members(f); i++) {
        if (fsm_member(f, i)->id == s->id) {
            st->member_role = convert_role_out(fsm_member(f, i)->role);
        }
    }
}

/* A status with the state digest: SHA-256 of the state machine's canonical
 * snapshot (the same on every replica at one applied index), first 8
 * bytes. O(state), so it is computed on raft's pool over a frozen view
 * (replica_state_digest); the reply's applied index and applied digest are
 * the ones of that view, so the three describe one state. */
struct digest_op
{
    struct replica_digest_req req; /* req.data = this */
    struct server *s;
    struct rpc_call *call; /* NULL once answered (shutdown) */
    struct digest_op *next;
};

static void digest_unlink(struct admin *a, struct digest_op *op)
{
    struct digest_op **pp = &a->digest_ops;

    while (*pp != NULL && *pp != op) {
        pp = &(*pp)->next;
    }
    if (*pp == op) {
        *pp = op->next;
    }
}

static void digest_cb(struct replica_digest_req *req, int status)
{
    struct digest_op *op = req->data;
    Once__Rpc__StatusResponse st = ONCE__RPC__STATUS_RESPONSE__INIT;

    digest_unlink(&op->s->admin, op);
    if (op->call != NULL) {
        if (status == 0) {
            status_fill(op->s, &st);
            st.applied_index = req->index;
            st.applied_digest = req->applied_digest;
            st.state_digest = req->state_digest;
            reply_msg(op->call, &st.base);
        } else {
            reply_replica_error(op->s, op->call, status, NULL);
        }
    }
    free(op);
}

static void status_with_digest(struct server *s, struct rpc_call *call)
{
    struct digest_op *op = calloc(1, sizeof *op);
    int rv;

    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    op->s = s;
    op->call = call;
    op->req.data = op;
    /* Listed first: a digest that cannot start calls back (unlinks and
     * frees @op) before replica_state_digest returns. */
    op->next = s->admin.digest_ops;
    s->admin.digest_ops = op;
    rv = replica_state_digest(&s->rep, &op->req, digest_cb);
    if (rv != 0) {
        digest_unlink(&s->admin, op);
        free(op);
        reply_replica_error(s, call, rv, NULL);
    }
}

void admin_status(struct server *s,
                  struct rpc_call *call,
                  const ProtobufCMessage *msg,
                  const struct service_in *in)
{
    const Once__Rpc__StatusRequest *req = (const void *)msg;
    Once__Rpc__StatusResponse st = ONCE__RPC__STATUS_RESPONSE__INIT;

    (void)in;
    if (req != NULL && req->state_digest) {
        status_with_digest(s, call);
        return;
    }
    status_fill(s, &st);
    reply_msg(call, &st.base);
}

void admin_members_list(struct server *s,
                        struct rpc_call *call,
                        const ProtobufCMessage *msg,
                        const struct service_in *in)
{
    static Once__Rpc__Member pm[FSM_MEMBERS_MAX];
    static Once__Rpc__Member *pp[FSM_MEMBERS_MAX];
    Once__Rpc__MembersListResponse ml = ONCE__RPC__MEMBERS_LIST_RESPONSE__INIT;

    (void)msg;
    (void)in;
    ml.n_members = fill_members(s, pm, pp);
    ml.members = ml.n_members > 0 ? pp : NULL;
    reply_msg(call, &ml.base);
}

/* --- membership requests -------------------------------------------------- */

/* Start operation @kind on member @id (@m: the new member of an add, else
 * NULL; @role: of an assign). Out of memory is answered here. */
static void member_request(struct server *s,
                           struct rpc_call *call,
                           enum replica_member_op kind,
                           uint64_t id,
                           const struct fsm_member *m,
                           enum fsm_role role)
{
    struct admin_op *op = op_new(s, call);

    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    op->mem.op = kind;
    op->mem.id = id;
    op->mem.role = role;
    if (m != NULL) {
        memcpy(op->mem.raft_addr, m->raft_addr, sizeof m->raft_addr);
        memcpy(op->mem.client_addr, m->client_addr, sizeof m->client_addr);
    }
    start_member(s, call, op);
}

/* The bodies were checked and converted by the dispatch (service.c): ids
 * non-zero, the member's addresses and the role valid. */
void admin_members_add(struct server *s,
                       struct rpc_call *call,
                       const ProtobufCMessage *msg,
                       const struct service_in *in)
{
    (void)msg;
    member_request(s, call, REPLICA_MEMBER_ADD, in->member.id, &in->member,
                   in->member.role);
}

void admin_tick(struct server *s)
{
    const struct replica *rep = &s->rep;
    struct admin *a = &s->admin;
    uint64_t now = uv_now(&s->loop);

    if (!replica_progress_known(rep)) {
        a->n_seen = 0; /* a new leader starts from raft's own view */
        a->was_leader = false;
        return;
    }
    if (!a->was_leader) {
        a->was_leader = true;
        a->leader_since_ms = now;
    }
    for (unsigned i = 0; i < replica_conf_n(rep); i++) {
        struct replica_server sv;
        uint64_t id;
        unsigned j;

        replica_conf_server(rep, i, &sv);
        id = sv.id;
        if (!replica_progress_recent(rep, i)) {
            continue;
        }
        for (j = 0; j < a->n_seen && a->seen[j].id != id; j++) {
        }
        if (j == a->n_seen) {
            if (a->n_seen == sizeof a->seen / sizeof a->seen[0]) {
                continue; /* UNTESTED: more servers than members */
            }
            a->n_seen++;
        }
        a->seen[j].id = id;
        a->seen[j].ms = now;
    }
}

/* Reachable for membership safety: raft heard from it within the last
 * election timeout (recent_recv now, or a sample of the tick no older
 * than one election timeout, so at most two since the message). */
static bool safety_reachable(struct server *s, uint64_t id)
{
    const struct admin *a = &s->admin;
    uint64_t now = uv_now(&s->loop);

    if (member_reachable(s, id)) {
        return true;
    }
    for (unsigned j = 0; j < a->n_seen; j++) {
        if (a->seen[j].id == id) {
            return now - a->seen[j].ms <= s->cfg.raft.election_ms;
        }
    }
    return false;
}

/* A leader for less than an election timeout may not have heard from a
 * live voter yet (a transfer, then a removal at once): it has no evidence
 * that a voter is gone. */
static bool leader_young(struct server *s)
{
    const struct admin *a = &s->admin;

    return !a->was_leader ||
           uv_now(&s->loop) - a->leader_since_ms < s->cfg.raft.election_ms;
}

/* Whether taking voter @id's vote away leaves a cluster that can still
 * lose a node (safety.h); if not, and @force is not set, @call is answered
 * FAILED_PRECONDITION with the reason and true is returned; a leader too
 * new to know which voters are reachable answers UNAVAILABLE, applied
 * false, so the caller repeats it (libonce does, within its deadline). A
 * forced change that the check would refuse is logged at warn. */
static bool refuse_unsafe(struct server *s,
                          struct rpc_call *call,
                          uint64_t id,
                          bool force)
{
    struct safety_voter v[FSM_MEMBERS_MAX];
    struct replica_server sv;
    char why[ERR_MSG_SIZE], idb[IDENTITY_HEX_LEN + 1], q[300];
    enum safety_verdict verdict;
    size_t n = 0;

    for (unsigned i = 0; i < replica_conf_n(&s->rep) && n < FSM_MEMBERS_MAX;
         i++) {
        replica_conf_server(&s->rep, i, &sv);
        if (sv.role == FSM_ROLE_VOTER) {
            v[n].id = sv.id;
            v[n].reachable = safety_reachable(s, v[n].id);
            n++;
        }
    }
    verdict = safety_refuses(v, n, id, why);
    if (verdict == SAFETY_OK) {
        return false;
    }
    if (verdict == SAFETY_UNREACHABLE && !force && leader_young(s)) {
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "this leader is too new to tell which voters are "
                    "reachable: repeat in a moment",
                    NULL);
        return true;
    }
    log_kv(LOG_WARN,
           force ? "unsafe membership change forced"
                 : "unsafe membership change refused",
           "op=%s member=%s reason=%s", rpc_method_name(call->method),
           identity_format(id, idb), log_quote(why, q, sizeof q));
    if (force) {
        return false;
    }
    reply_config(call, call->method, FSM_FAILED_PRECONDITION, why);
    return true;
}

void admin_members_remove(struct server *s,
                          struct rpc_call *call,
                          const ProtobufCMessage *msg,
                          const struct service_in *in)
{
    const Once__Rpc__MembersRemoveRequest *r = (const void *)msg;

    (void)in;
    if (refuse_unsafe(s, call, r->id, r->force)) {
        return;
    }
    member_request(s, call, REPLICA_MEMBER_REMOVE, r->id, NULL,
                   (enum fsm_role)0);
}

void admin_members_assign(struct server *s,
                          struct rpc_call *call,
                          const ProtobufCMessage *msg,
                          const struct service_in *in)
{
    const Once__Rpc__MembersAssignRequest *r = (const void *)msg;
    enum fsm_role role = convert_role_in(r->role);

    (void)in;
    if (role != FSM_ROLE_VOTER && refuse_unsafe(s, call, r->id, r->force)) {
        return;
    }
    member_request(s, call, REPLICA_MEMBER_ASSIGN, r->id, NULL, role);
}

void admin_transfer(struct server *s,
                    struct rpc_call *call,
                    const ProtobufCMessage *msg,
                    const struct service_in *in)
{
    (void)in;
    member_request(s, call, REPLICA_MEMBER_TRANSFER,
                   ((const Once__Rpc__TransferRequest *)msg)->id, NULL,
                   (enum fsm_role)0);
}

void admin_shutdown(struct admin *a)
{
    if (a->member_op != NULL && a->member_op->call != NULL) {
        reply_error(a->member_op->call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                    "node shutting down during the membership operation", NULL);
        a->member_op->call = NULL;
    }
    if (a->snap_op != NULL && a->snap_op->call != NULL) {
        reply_error(a->snap_op->call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "node shutting down", NULL);
        a->snap_op->call = NULL;
    }
    admin_upgrade_shutdown();
    /* Their replica callbacks still come (and free them). */
    for (struct digest_op *op = a->digest_ops; op != NULL; op = op->next) {
        if (op->call != NULL) {
            reply_error(op->call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                        "node shutting down", NULL);
            op->call = NULL;
        }
    }
}
