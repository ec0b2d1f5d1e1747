/* server/join.c: --join, a new node asking to be added (join.h). */
#include "server/join.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "once_rpc.pb-c.h"
#include "server/server.h"

#define JOIN_CALL_MS        60000 /* a MembersAdd includes the catch-up */
#define JOIN_BACKOFF_MS     250
#define JOIN_BACKOFF_MAX_MS 5000

static void join_try(struct join *j);

static void join_timer_cb(uv_timer_t *t)
{
    join_try(t->data);
}

static void join_done(struct join *j)
{
    j->active = false;
    if (j->ch != NULL) {
        rpc_channel_close(j->ch);
        j->ch = NULL;
    }
}

/* After a failed attempt: the next address now, or after a full pass over
 * the list a pause that doubles up to JOIN_BACKOFF_MAX_MS. @same: try the
 * same address again (its answer was "unknown" or "busy"). */
static void join_again(struct join *j, bool same)
{
    bool pause = same;

    if (!same) {
        j->next++;
        if (j->next >= j->s->cfg.n_join) {
            j->next = 0;
            j->round++;
            pause = true;
        }
    }
    if (!pause) {
        join_try(j);
        return;
    }
    uv_timer_start(&j->timer, join_timer_cb, j->backoff_ms, 0);
    j->backoff_ms = j->backoff_ms * 2 > JOIN_BACKOFF_MAX_MS
                        ? JOIN_BACKOFF_MAX_MS
                        : j->backoff_ms * 2;
}

static void join_cb(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct join *j = arg;
    struct server *s = j->s;
    const char *addr = s->cfg.join[j->next];
    ProtobufCMessage *msg = NULL;
    const Once__Rpc__MembersAddResponse *resp;
    char errmsg[ERR_MSG_SIZE], q[300];

    j->inflight = false;
    if (s->stopping || !j->active) {
        return;
    }
    if (rv != 0) {
        log_kv(j->round == 0 ? LOG_INFO : LOG_WARN,
               "join: member did not answer", "member=%s error=%s sent=%d",
               addr, log_quote(rpc_conn_strerror(rv), q, sizeof q),
               sent ? 1 : 0);
        /* A MembersAdd is resumable: repeating it continues the steps. */
        join_again(j, false);
        return;
    }
    if (ans->status != RPC_STATUS_OK) {
        log_kv(LOG_INFO, "join: not added yet", "member=%s status=%s error=%s",
               addr, rpc_status_name(ans->status),
               log_quote_n(ans->error != NULL ? ans->error : "", ans->error_len,
                           q, sizeof q));
        switch (ans->status) {
            case RPC_STATUS_INVALID_ARGUMENT:
            case RPC_STATUS_FAILED_PRECONDITION:
            case RPC_STATUS_PERMISSION_DENIED:
                log_kv(LOG_ERROR, "join refused: stopping", "member=%s", addr);
                join_done(j);
                node_stop(s, "join refused", SERVER_EXIT_FAIL);
                return;
            case RPC_STATUS_UNKNOWN:
            case RPC_STATUS_DEADLINE_EXCEEDED:
            case RPC_STATUS_RESOURCE_EXHAUSTED:
                join_again(j, true);
                return;
            default:
                join_again(j, false);
                return;
        }
    }
    if (envelope_unpack_body(ans, &msg, errmsg) != 0) {
        log_kv(LOG_WARN, "join: answer does not decode", "member=%s error=%s",
               addr, log_quote(errmsg, q, sizeof q));
        join_again(j, false);
        return;
    }
    resp = (const Once__Rpc__MembersAddResponse *)msg;
    if (resp->result != NULL &&
        resp->result->outcome == ONCE__RPC__OUTCOME__OUTCOME_OK) {
        log_kv(LOG_INFO, "joined the cluster", "member=%s role=%s", addr,
               s->cfg.role == FSM_ROLE_STANDBY ? "standby" : "voter");
        join_done(j);
        return;
    }
    log_kv(LOG_ERROR, "join refused: stopping", "member=%s reason=%s", addr,
           log_quote(resp->result != NULL ? resp->result->reason : "", q,
                     sizeof q));
    join_done(j);
    node_stop(s, "join refused", SERVER_EXIT_FAIL);
}

static void join_try(struct join *j)
{
    struct server *s = j->s;
    const char *addr = s->cfg.join[j->next];
    Once__Rpc__Member m = ONCE__RPC__MEMBER__INIT;
    Once__Rpc__MembersAddRequest req = ONCE__RPC__MEMBERS_ADD_REQUEST__INIT;
    struct envelope_view v;
    uint8_t body[512];
    char errmsg[ERR_MSG_SIZE];
    size_t len;
    int rv;

    if (s->stopping || !j->active || j->inflight) {
        return;
    }
    if (j->ch != NULL && strcmp(rpc_channel_addr(j->ch), addr) != 0) {
        rpc_channel_close(j->ch);
        j->ch = NULL;
    }
    if (j->ch == NULL) {
        rv = rpc_channel_open(&j->ch, &s->loop, addr, &s->cfg.limits, errmsg);
        if (rv != 0) {
            log_kv(LOG_WARN, "join: cannot open a channel", "member=%s", addr);
            j->ch = NULL;
            join_again(j, false);
            return;
        }
        if (s->tls.on) {
            rpc_channel_set_tls(j->ch, &s->tls.out);
        }
    }
    m.id = s->id;
    m.raft_addr = (char *)s->cfg.raft_addr;
    m.client_addr = (char *)s->cfg.client_addr;
    m.role = s->cfg.role == FSM_ROLE_STANDBY ? ONCE__RPC__ROLE__ROLE_STANDBY
                                             : ONCE__RPC__ROLE__ROLE_VOTER;
    req.member = &m;
    len = once__rpc__members_add_request__get_packed_size(&req);
    if (len > sizeof body) {
        /* Addresses are at most 64 bytes each: cannot happen. */
        node_stop(s, "join request too big", SERVER_EXIT_FAIL);
        return;
    }
    once__rpc__members_add_request__pack(&req, body);
    memset(&v, 0, sizeof v);
    v.method = RPC_METHOD_MEMBERS_ADD;
    v.direction = RPC_REQUEST;
    v.deadline_ms = JOIN_CALL_MS;
    v.body = body;
    v.body_len = len;
    rv = rpc_channel_call(j->ch, &v, JOIN_CALL_MS, join_cb, j);
    if (rv != 0) {
        log_kv(LOG_WARN, "join: call not sent", "member=%s", addr);
        join_again(j, false);
        return;
    }
    j->inflight = true;
    /* Every address once at info; the retries that follow at debug. */
    log_kv(j->round == 0 ? LOG_INFO : LOG_DEBUG, "join: asking to be added",
           "member=%s", addr);
}

void join_start(struct join *j, struct server *s)
{
    memset(j, 0, sizeof *j);
    j->s = s;
    j->active = true;
    j->backoff_ms = JOIN_BACKOFF_MS;
    uv_timer_init(&s->loop, &j->timer);
    j->timer.data = j;
    j->timer_init = true;
    join_try(j);
}

void join_stop(struct join *j)
{
    if (j->timer_init) {
        uv_timer_stop(&j->timer);
        uv_close((uv_handle_t *)&j->timer, NULL);
        j->timer_init = false;
    }
    join_done(j);
}
