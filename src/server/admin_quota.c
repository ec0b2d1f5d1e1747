/* server/admin_quota.c: the Admin methods QuotaSet, QuotaList and
 * SchemaUpgrade on the ready leader (admin.h; docs/server.md, "Quotas and
 * the log schema").
 *
 * QuotaSet is a command like Forget: service.c converts and submits it,
 * and answers with the state machine's ConfigResult. QuotaList reads the
 * leader's applied state (as MembersList does: no barrier, so a quota set
 * an instant ago on another node's behalf may not show yet).
 *
 * SchemaUpgrade: the leader asks every member of the member directory
 * (voters, standbys and spares: every one applies the log, and a node that
 * meets an entry of a newer schema stops) for its Status over a channel of
 * its own (the forwarder's TLS context and limits), and proposes
 * SetSchema{target} only when every one answered schema_max >= target;
 * else FAILED_PRECONDITION names the members that do not, or could not be
 * asked. One upgrade at a time per node. The op owns
 * its channels; each is closed once its call has answered (the channel
 * frees itself after its handles close). At shutdown the call is answered
 * (UNAVAILABLE while still asking, UNKNOWN once SetSchema was proposed)
 * and the op is freed by the last callback still due. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "once_rpc.pb-c.h"
#include "server/admin.h"
#include "server/convert.h"
#include "server/reply.h"
#include "server/server.h"

#define UPGRADE_ASK_MS 3000 /* each member's Status, connect included */
#define UPGRADE_WHY    512

void admin_quota_list(struct server *s,
                      struct rpc_call *call,
                      const ProtobufCMessage *msg,
                      const struct service_in *in)
{
    static Once__Rpc__Quota pq[FSM_QUOTAS_MAX];
    static Once__Rpc__Quota *pp[FSM_QUOTAS_MAX];
    static struct fsm_quota_info qi[FSM_QUOTAS_MAX];
    Once__Rpc__QuotaListResponse ql = ONCE__RPC__QUOTA_LIST_RESPONSE__INIT;
    size_t n = 0;

    (void)msg;
    (void)in;
    while (n < FSM_QUOTAS_MAX && fsm_quota(s->rep.fsm, n, &qi[n])) {
        once__rpc__quota__init(&pq[n]);
        pq[n].pattern = qi[n].pattern;
        pq[n].max_records = qi[n].max_records;
        pq[n].max_bytes = qi[n].max_bytes;
        pq[n].records = qi[n].records;
        pq[n].bytes = qi[n].bytes;
        pp[n] = &pq[n];
        n++;
    }
    ql.n_quotas = n;
    ql.quotas = n > 0 ? pp : NULL;
    reply_msg(call, &ql.base);
}

/* --- SchemaUpgrade -------------------------------------------------------- */

struct upgrade_ask
{
    struct upgrade *up;
    struct rpc_channel *ch;
    uint64_t id;
    char addr[FSM_ADDR_MAX + 1];
};

struct upgrade
{
    struct server *s;
    struct rpc_call *call;
    uint32_t target;
    size_t n_asks;
    size_t n_waiting;
    struct upgrade_ask asks[FSM_MEMBERS_MAX];
    char why[UPGRADE_WHY]; /* the members that fall short */
    struct replica_req req;
};

/* The upgrade running on this node, or NULL: one at a time. */
static struct upgrade *running;

static void reply_upgrade(struct rpc_call *call,
                          enum fsm_outcome outcome,
                          const char *reason,
                          uint32_t schema)
{
    Once__Rpc__ConfigResult cr;
    Once__Rpc__SchemaUpgradeResponse sr =
        ONCE__RPC__SCHEMA_UPGRADE_RESPONSE__INIT;
    struct convert_config_buf text;

    convert_config_out(outcome, reason, &cr, &text);
    sr.result = &cr;
    sr.schema = schema;
    reply_msg(call, &sr.base);
}

static void upgrade_free(struct upgrade *up)
{
    running = NULL;
    free(up);
}

/* Note member @id at @addr as falling short, with @what. */
static void short_of(struct upgrade *up,
                     uint64_t id,
                     const char *addr,
                     const char *what)
{
    size_t len = strlen(up->why);

    snprintf(up->why + len, sizeof up->why - len, "%s%016" PRIx64 " (%s): %s",
             len > 0 ? "; " : "", id, addr, what);
}

static void set_schema_cb(struct replica_req *req,
                          int status,
                          const struct fsm_result *res)
{
    struct upgrade *up = req->data;

    if (up->call == NULL) {
        /* answered at shutdown */
    } else if (status != 0 || res == NULL) {
        reply_replica_error(up->s, up->call,
                            status != 0 ? status : REPLICA_E_INTERNAL, NULL);
    } else {
        reply_upgrade(up->call, res->outcome, res->reason,
                      fsm_schema_version(up->s->rep.fsm));
    }
    upgrade_free(up);
}

/* Every member answered (or failed): propose, or refuse. */
static void upgrade_decide(struct upgrade *up)
{
    struct fsm_cmd cmd;
    char reason[UPGRADE_WHY + 64];
    int rv;

    if (up->why[0] != '\0') {
        snprintf(reason, sizeof reason, "schema %" PRIu32 " not supported: %s",
                 up->target, up->why);
        reply_upgrade(up->call, FSM_FAILED_PRECONDITION, reason,
                      fsm_schema_version(up->s->rep.fsm));
        upgrade_free(up);
        return;
    }
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_SET_SCHEMA;
    cmd.u.schema_version = up->target;
    up->req.data = up;
    rpc_call_mark_sent(up->call);
    rv = replica_submit(&up->s->rep, &up->req, &cmd, set_schema_cb);
    if (rv != 0) {
        reply_replica_error(up->s, up->call, rv, NULL);
        upgrade_free(up);
    }
}

static void ask_cb(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct upgrade_ask *a = arg;
    struct upgrade *up = a->up;
    ProtobufCMessage *body = NULL;
    char err[ERR_MSG_SIZE], what[96];

    (void)sent;
    if (rv != 0) {
        snprintf(what, sizeof what, "not reached (%s)", rpc_conn_strerror(rv));
        short_of(up, a->id, a->addr, what);
    } else if (ans->status != RPC_STATUS_OK ||
               envelope_unpack_body(ans, &body, err) != 0) {
        short_of(up, a->id, a->addr, "no status answer");
    } else {
        const Once__Rpc__StatusResponse *st = (const void *)body;
        if (st->schema_max < up->target) {
            snprintf(what, sizeof what, "schema_max %" PRIu32, st->schema_max);
            short_of(up, a->id, a->addr, what);
        }
    }
    rpc_channel_close(a->ch); /* freed once its handles have closed */
    a->ch = NULL;
    if (--up->n_waiting > 0) {
        return;
    }
    if (up->call == NULL) {
        upgrade_free(up); /* answered at shutdown: nothing is proposed */
    } else {
        upgrade_decide(up);
    }
}

/* Ask member @m for its Status; false (noted in up->why) if it cannot. */
static bool ask_member(struct upgrade *up, const struct fsm_member *m)
{
    struct server *s = up->s;
    struct upgrade_ask *a = &up->asks[up->n_asks];
    struct envelope_view req;
    char err[ERR_MSG_SIZE];

    a->up = up;
    a->id = m->id;
    snprintf(a->addr, sizeof a->addr, "%s", m->client_addr);
    if (rpc_channel_open(&a->ch, &s->loop, m->client_addr, s->fwd.limits,
                         err) != 0) {
        short_of(up, m->id, m->client_addr, "bad address");
        return false;
    }
    if (s->fwd.tls != NULL) {
        rpc_channel_set_tls(a->ch, s->fwd.tls);
    }
    memset(&req, 0, sizeof req);
    req.method = RPC_METHOD_STATUS;
    req.direction = RPC_REQUEST;
    if (rpc_channel_call(a->ch, &req, UPGRADE_ASK_MS, ask_cb, a) != 0) {
        rpc_channel_close(a->ch);
        short_of(up, m->id, m->client_addr, "cannot send");
        return false;
    }
    up->n_asks++;
    up->n_waiting++;
    return true;
}

/* This node's own answer, and the other members' questions. */
static void upgrade_start(struct upgrade *up)
{
    struct server *s = up->s;
    const struct fsm *f = s->rep.fsm;

    for (size_t i = 0; i < fsm_n_members(f); i++) {
        const struct fsm_member *m = fsm_member(f, i);

        if (m->id == s->id) {
            if (admin_schema_max() < up->target) {
                char what[64];
                snprintf(what, sizeof what, "schema_max %" PRIu32,
                         admin_schema_max());
                short_of(up, m->id, m->client_addr, what);
            }
            continue;
        }
        (void)ask_member(up, m);
    }
    if (up->n_waiting == 0) {
        upgrade_decide(up);
    }
}

void admin_schema_upgrade(struct server *s,
                          struct rpc_call *call,
                          const ProtobufCMessage *msg,
                          const struct service_in *in)
{
    const Once__Rpc__SchemaUpgradeRequest *r = (const void *)msg;
    uint32_t now = fsm_schema_version(s->rep.fsm);
    uint32_t target = r->target != 0 ? r->target : FSM_SCHEMA_VERSION;
    struct upgrade *up;

    (void)in;
    if (target <= now) {
        reply_upgrade(call, FSM_OK, "the schema is already in force", now);
        return;
    }
    if (target > FSM_SCHEMA_VERSION) {
        reply_upgrade(call, FSM_FAILED_PRECONDITION,
                      "the leader's binary does not know that schema", now);
        return;
    }
    if (running != NULL) {
        reply_upgrade(call, FSM_FAILED_PRECONDITION,
                      "another schema upgrade is running", now);
        return;
    }
    up = calloc(1, sizeof *up);
    if (up == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    running = up;
    up->s = s;
    up->call = call;
    up->target = target;
    upgrade_start(up);
}

void admin_upgrade_shutdown(void)
{
    struct upgrade *up = running;

    if (up == NULL || up->call == NULL) {
        return;
    }
    if (up->n_waiting > 0) {
        /* Still asking: nothing was proposed. The channels' callbacks
         * (RPC_E_CLOSED) free the op once the last one has run. */
        reply_error(up->call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                    "node shutting down during the schema upgrade", NULL);
        up->call = NULL;
        for (size_t i = 0; i < up->n_asks; i++) {
            if (up->asks[i].ch != NULL) {
                rpc_channel_close(up->asks[i].ch);
            }
        }
        return;
    }
    /* SetSchema was proposed: its replica callback still comes (and frees
     * the op); whether it applied is not known. */
    reply_error(up->call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                "node shutting down during the schema upgrade", NULL);
    up->call = NULL;
}

uint32_t admin_schema_max(void)
{
    return replica_schema_max();
}
