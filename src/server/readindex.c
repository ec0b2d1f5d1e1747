/* server/readindex.c: lookups served by any node after a read barrier
 * (readindex.h).
 *
 * A read is in one of three states: WAITING (for the next ReadIndex call),
 * ASKING (covered by the call in flight), APPLYING (it has an index and
 * waits in the Raft layer until this node applied it). Every read not yet
 * answered is on one list, so the timer finds the ones past their give-up
 * time whatever their state. A read only ever joins a call sent after it
 * arrived: the leader's index must be proven after the read began. */
#include "server/readindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/err.h"
#include "server/convert.h"
#include "server/forward.h"
#include "server/leader.h"
#include "server/reply.h"
#include "server/server.h"

enum read_state { READ_WAITING = 1, READ_ASKING, READ_APPLYING };

struct read_op
{
    struct readindex *ri;
    struct rpc_call *call;
    enum read_state state;
    uint64_t gen;        /* ASKING: the call that covers it */
    uint64_t give_up_ms; /* loop time */
    struct read_op *prev, *next;
    uint8_t scope[FSM_SCOPE_MAX];
    size_t scope_len;
    uint8_t key[FSM_KEY_MAX];
    size_t key_len;
    struct replica_req req; /* req.data = this */
};

static void arm(struct readindex *ri);

void readindex_init(struct readindex *ri, struct server *s)
{
    memset(ri, 0, sizeof *ri);
    ri->s = s;
    uv_timer_init(&s->loop, &ri->timer);
    ri->timer.data = ri;
}

static void unlink_op(struct read_op *op)
{
    struct readindex *ri = op->ri;

    if (op->prev != NULL) {
        op->prev->next = op->next;
    } else {
        ri->head = op->next;
    }
    if (op->next != NULL) {
        op->next->prev = op->prev;
    }
    op->prev = op->next = NULL;
}

/* Answer @op UNAVAILABLE (applied FALSE: a read changes nothing) and free
 * it; it must no longer wait in the Raft layer. */
static void op_unavailable(struct read_op *op, const char *why)
{
    struct readindex *ri = op->ri;

    unlink_op(op);
    ri->unavailable++;
    reply_unavailable(ri->s, op->call, why);
    free(op);
}

/* Answer @op with the read @res of this node's table, and free it. */
static void op_answer(struct read_op *op, const struct fsm_result *res)
{
    struct readindex *ri = op->ri;
    struct convert_result_buf b;
    Once__Rpc__LookupResponse lookup = ONCE__RPC__LOOKUP_RESPONSE__INIT;

    unlink_op(op);
    ri->reads++;
    metrics_result(&ri->s->metrics, RPC_METHOD_LOOKUP, FSM_KIND_NONCE, res);
    convert_result_out(res, NULL, &b);
    lookup.result = &b.res;
    lookup.served_by = ri->s->id;
    reply_msg(op->call, &lookup.base);
    free(op);
}

static void read_cb(struct replica_req *req,
                    int status,
                    const struct fsm_result *res)
{
    struct read_op *op = req->data;

    if (status != 0 || res == NULL) {
        unlink_op(op);
        op->ri->unavailable++;
        reply_replica_error(op->ri->s, op->call,
                            status != 0 ? status : REPLICA_E_INTERNAL, NULL);
        free(op);
        return;
    }
    op_answer(op, res);
}

/* @op has the leader's @index: read now, or wait until it is applied. */
static void op_read_at(struct read_op *op, uint64_t index)
{
    struct fsm_ident id = {op->scope, op->scope_len, op->key, op->key_len};
    struct fsm_result res;
    int rv;

    op->state = READ_APPLYING;
    rv = replica_read_at(&op->ri->s->rep, &op->req, &id, index, &res, read_cb);
    if (rv == 1) {
        op_answer(op, &res);
    } else if (rv != 0) {
        unlink_op(op);
        op->ri->unavailable++;
        reply_replica_error(op->ri->s, op->call, rv, NULL);
        free(op);
    }
}

/* One ReadIndex call in flight. */
struct ask_rec
{
    struct readindex *ri;
    uint64_t gen;
};

static bool covered(const struct read_op *op, uint64_t gen)
{
    return op->state == READ_ASKING && op->gen == gen;
}

/* Every read covered by the call @gen that just ended, failed with @why. */
static void fail_asking(struct readindex *ri, uint64_t gen, const char *why)
{
    struct read_op *op = ri->head, *next;

    for (; op != NULL; op = next) {
        next = op->next;
        if (covered(op, gen)) {
            op_unavailable(op, why);
        }
    }
}

/* The leader's index out of its answer @ans: 0 with why set if none. */
static uint64_t answer_index(struct envelope_view *ans, char *why)
{
    ProtobufCMessage *msg = NULL;
    char errmsg[ERR_MSG_SIZE];
    uint64_t index;

    if (ans->status != RPC_STATUS_OK) {
        snprintf(why, ERR_MSG_SIZE, "the leader refused a read index: %s: %.*s",
                 rpc_status_name(ans->status), (int)ans->error_len,
                 ans->error != NULL ? ans->error : "");
        return 0;
    }
    if (envelope_unpack_body(ans, &msg, errmsg) != 0) {
        err_printf(why, "the leader's read index: %.200s", errmsg);
        return 0;
    }
    index = ((const Once__Rpc__ReadIndexResponse *)(const void *)msg)->index;
    if (index == 0) {
        snprintf(why, ERR_MSG_SIZE, "the leader's read index is 0");
    }
    return index;
}

static void ask(struct readindex *ri);

static void ask_cb(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct ask_rec *rec = arg;
    struct readindex *ri = rec->ri;
    uint64_t gen = rec->gen;
    char why[ERR_MSG_SIZE];
    struct read_op *op, *next;
    uint64_t index = 0;

    (void)sent;
    free(rec);
    if (gen == ri->gen) {
        ri->asking = false;
    }
    if (ri->closed) {
        return; /* every read was answered by readindex_close */
    }
    if (rv != 0) {
        snprintf(why, sizeof why, "no read index from the leader: %s",
                 rpc_conn_strerror(rv));
    } else {
        index = answer_index(ans, why);
    }
    if (index == 0) {
        fail_asking(ri, gen, why);
    } else {
        for (op = ri->head; op != NULL; op = next) {
            next = op->next;
            if (covered(op, gen)) {
                op_read_at(op, index);
            }
        }
    }
    ask(ri); /* for the reads that arrived meanwhile */
}

/* The budget of the next call: the latest give-up time of its reads. */
static uint64_t ask_budget(struct readindex *ri, uint64_t now)
{
    uint64_t last = now + 1;

    for (struct read_op *op = ri->head; op != NULL; op = op->next) {
        if (op->state == READ_WAITING && op->give_up_ms > last) {
            last = op->give_up_ms;
        }
    }
    return last - now;
}

/* Send one ReadIndex call for every WAITING read, unless one is in flight
 * (its answer sends the next). */
static void ask(struct readindex *ri)
{
    struct server *s = ri->s;
    char addr[RPC_ADDR_MAX + 1];
    struct envelope_view req;
    struct rpc_channel *ch;
    struct ask_rec *rec;
    struct read_op *op;
    uint64_t lid, now;
    bool any = false;

    if (ri->asking || ri->closed) {
        return;
    }
    for (op = ri->head; op != NULL && !any; op = op->next) {
        any = op->state == READ_WAITING;
    }
    if (!any) {
        return;
    }
    if (!leader_addr(s, &lid, addr) || lid == s->id) {
        const char *why = lid == 0       ? "no known leader for a read barrier"
                          : lid == s->id ? "this node is the leader but not "
                                           "ready yet (term start)"
                                         : "the leader's client address is "
                                           "not known yet";
        for (op = ri->head; op != NULL;) {
            struct read_op *next = op->next;
            if (op->state == READ_WAITING) {
                op_unavailable(op, why);
            }
            op = next;
        }
        return;
    }
    ch = forward_channel(&s->fwd, addr);
    now = uv_now(&s->loop);
    memset(&req, 0, sizeof req);
    req.method = RPC_METHOD_READ_INDEX;
    req.direction = RPC_REQUEST;
    req.deadline_ms = ask_budget(ri, now);
    req.has_cluster_id = s->ids_have_cluster;
    memcpy(req.cluster_id, s->ids.cluster_id, RPC_ID_LEN);
    req.body = (const uint8_t *)"";
    req.body_len = 0; /* ReadIndexRequest has no field */
    rec = ch != NULL ? malloc(sizeof *rec) : NULL;
    if (rec != NULL) {
        rec->ri = ri;
        rec->gen = ri->gen + 1;
    }
    if (rec == NULL ||
        rpc_channel_call(ch, &req, req.deadline_ms, ask_cb, rec) != 0) {
        free(rec);
        for (op = ri->head; op != NULL;) {
            struct read_op *next = op->next;
            if (op->state == READ_WAITING) {
                op_unavailable(op, "cannot ask the leader for a read index");
            }
            op = next;
        }
        return;
    }
    ri->gen++;
    ri->asking = true;
    snprintf(ri->asked, sizeof ri->asked, "%s", addr);
    ri->asks++;
    for (op = ri->head; op != NULL; op = op->next) {
        if (op->state == READ_WAITING) {
            op->state = READ_ASKING;
            op->gen = ri->gen;
        }
    }
}

void readindex_tick(struct readindex *ri)
{
    char addr[RPC_ADDR_MAX + 1];
    uint64_t lid;

    if (!ri->asking || ri->closed ||
        (leader_addr(ri->s, &lid, addr) && strcmp(addr, ri->asked) == 0)) {
        return;
    }
    /* The call in flight went to a node that no longer leads (as far as
     * this node knows): its reads wait for a call to the new one. Still
     * sent after they arrived, so its index is as good. */
    for (struct read_op *op = ri->head; op != NULL; op = op->next) {
        if (covered(op, ri->gen)) {
            op->state = READ_WAITING;
        }
    }
    ri->asking = false;
    ask(ri);
}

static void on_timer(uv_timer_t *t)
{
    struct readindex *ri = t->data;
    uint64_t now = uv_now(&ri->s->loop);
    struct read_op *op, *next;

    ri->timer_on = false;
    for (op = ri->head; op != NULL; op = next) {
        next = op->next;
        if (op->give_up_ms > now) {
            continue;
        }
        if (op->state == READ_APPLYING) {
            replica_read_cancel(&ri->s->rep, &op->req);
        }
        op_unavailable(op, op->state == READ_APPLYING
                               ? "this node did not apply the read index "
                                 "in time"
                               : "no read index from the leader in time");
    }
    arm(ri);
}

/* Arm the timer at the earliest give-up time, if any read waits. */
static void arm(struct readindex *ri)
{
    uint64_t now = uv_now(&ri->s->loop), first = UINT64_MAX;

    for (struct read_op *op = ri->head; op != NULL; op = op->next) {
        if (op->give_up_ms < first) {
            first = op->give_up_ms;
        }
    }
    if (first == UINT64_MAX || ri->closed) {
        uv_timer_stop(&ri->timer);
        ri->timer_on = false;
        return;
    }
    uv_timer_start(&ri->timer, on_timer, first > now ? first - now : 0, 0);
    ri->timer_on = true;
}

/* When @call's read gives up: its deadline less a margin, so that the
 * UNAVAILABLE reaches the caller before its own deadline passes. */
static uint64_t give_up_at(const struct rpc_call *call)
{
    uint64_t d = call->deadline_ms != 0 ? call->deadline_ms : READ_DEFAULT_MS;
    uint64_t margin = d / 10 < READ_MARGIN_MAX ? d / 10 : READ_MARGIN_MAX;

    return call->received_mono_ms + d - margin;
}

bool readindex_can_serve(struct server *s)
{
    struct replica_server sv;

    for (unsigned i = 0; i < replica_conf_n(&s->rep); i++) {
        replica_conf_server(&s->rep, i, &sv);
        if (sv.id == s->id) {
            return sv.role == FSM_ROLE_VOTER || sv.role == FSM_ROLE_STANDBY;
        }
    }
    return false;
}

void readindex_lookup(struct readindex *ri,
                      struct rpc_call *call,
                      const struct fsm_ident *ident)
{
    struct read_op *op;
    uint64_t due;

    ONCE_ASSERT(
        ident->scope_len <= FSM_SCOPE_MAX && ident->key_len <= FSM_KEY_MAX,
        "the Lookup's check bounded the identity");
    if (ri->closed) {
        reply_unavailable(ri->s, call, "node shutting down");
        return;
    }
    op = calloc(1, sizeof *op);
    if (op == NULL) {
        reply_replica_error(ri->s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    op->ri = ri;
    op->call = call;
    op->state = READ_WAITING;
    op->give_up_ms = give_up_at(call);
    memcpy(op->scope, ident->scope, ident->scope_len);
    op->scope_len = ident->scope_len;
    memcpy(op->key, ident->key, ident->key_len);
    op->key_len = ident->key_len;
    op->req.data = op;
    op->next = ri->head;
    if (ri->head != NULL) {
        ri->head->prev = op;
    }
    ri->head = op;
    due = op->give_up_ms;
    if (!ri->timer_on ||
        due < uv_now(&ri->s->loop) + uv_timer_get_due_in(&ri->timer)) {
        arm(ri);
    }
    ask(ri);
}

/* --- the leader's side ---------------------------------------------------- */

struct index_op
{
    struct server *s;
    struct rpc_call *call;
    struct replica_index_req req; /* req.data = this */
};

static void index_cb(struct replica_index_req *req, int status, uint64_t index)
{
    struct index_op *op = req->data;
    Once__Rpc__ReadIndexResponse m = ONCE__RPC__READ_INDEX_RESPONSE__INIT;

    if (status != 0) {
        reply_replica_error(op->s, op->call, status, NULL);
    } else {
        m.index = index;
        m.term = replica_term(&op->s->rep);
        op->s->reads.served_index++;
        reply_msg(op->call, &m.base);
    }
    free(op);
}

void readindex_serve(struct server *s,
                     struct rpc_call *call,
                     const ProtobufCMessage *msg,
                     const struct service_in *in)
{
    struct index_op *op = calloc(1, sizeof *op);
    int rv;

    (void)msg;
    (void)in;
    if (op == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    op->s = s;
    op->call = call;
    op->req.data = op;
    rv = replica_read_index(&s->rep, &op->req, index_cb);
    if (rv != 0) {
        reply_replica_error(s, call, rv, NULL);
        free(op);
    }
}

void readindex_close(struct readindex *ri)
{
    if (ri->closed) {
        return;
    }
    ri->closed = true;
    while (ri->head != NULL) {
        struct read_op *op = ri->head;

        /* op_unavailable unlinks it from this list: the loop ends. */
        ONCE_ASSERT(op->ri == ri && op->prev == NULL, "the head of ri's list");
#ifdef __clang_analyzer__
        /* The same pointer (asserted), but clang 14 keeps the memory behind
         * two equal pointers apart: only read through op->ri, which
         * unlink_op writes through, does it see the head move on. */
        ri = op->ri;
#endif
        if (op->state == READ_APPLYING) {
            replica_read_cancel(&ri->s->rep, &op->req);
        }
        op_unavailable(op, "node shutting down");
    }
    uv_timer_stop(&ri->timer);
    uv_close((uv_handle_t *)&ri->timer, NULL);
}
