/* raft/pipeline.c: the proposal pipeline and leadership tracking.
 *
 * At most one proposal is in flight per leader: a batch (raft_apply of one
 * entry), a barrier (lookups, the G1 term-start barrier, an on-demand
 * snapshot), a configuration change or a transfer. Requests arriving
 * meanwhile queue up and go into the next batch entry together (group
 * commit). This also avoids 0.15's commit starvation (B3: the leader only
 * commits last_stored, so a steady stream of appends never commits).
 *
 * New proposals are made only from replica_poll(), which runs after every
 * callback into raft and after every submission, never from inside one of
 * raft's callbacks: 0.15 fails requests from inside its state conversions,
 * where proposing again would append to a log raft is leaving.
 *
 * Leadership: 0.15 has no state-change callback, so replica_poll() compares
 * raft's state with what it saw last. On a new term as leader: anchor log
 * time (ltime.h), propose the G1 barrier, serve nothing until it applied. On
 * losing leadership: queued requests fail "not applied" (NOTLEADER, the
 * caller gets the leader hint); the one in flight is failed by raft
 * (LEADERSHIPLOST), which is "outcome unknown". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "common/assert.h"
#include "fsm/command.h"
#include "raft/entry.h"
#include "raft/guard.h"
#include "raft/replica_int.h"

/* --- queue --------------------------------------------------------------- */

static void q_push(struct replica *rep, struct replica_req *req)
{
    ONCE_ASSERT((rep->q_head == NULL) == (rep->q_tail == NULL),
                "queue head and tail agree");
    req->next = NULL;
    if (rep->q_tail != NULL) {
        rep->q_tail->next = req;
    } else {
        rep->q_head = req;
    }
    rep->q_tail = req;
    rep->q_n++;
    rep->q_bytes += req->cmd_len;
    if (req->lookup) {
        rep->q_lookups++;
    }
}

static struct replica_req *q_pop(struct replica *rep)
{
    struct replica_req *req = rep->q_head;

    if (req == NULL) {
        return NULL;
    }
    ONCE_ASSERTF(rep->q_n > 0 && rep->q_bytes >= req->cmd_len &&
                     (!req->lookup || rep->q_lookups > 0),
                 "popping from a queue that counts %zu requests, %zu bytes",
                 rep->q_n, rep->q_bytes);
    rep->q_head = req->next;
    if (rep->q_head == NULL) {
        rep->q_tail = NULL;
    }
    rep->q_n--;
    rep->q_bytes -= req->cmd_len;
    if (req->lookup) {
        rep->q_lookups--;
    }
    req->next = NULL;
    return req;
}

/* Drop @req's encoded command, freed unless it lives in the request. */
static void cmd_drop(struct replica_req *req)
{
    if (req->cmd != req->cmd_inline) {
        free(req->cmd);
    }
    req->cmd = NULL;
}

static void finish(struct replica_req *req,
                   int status,
                   const struct fsm_result *res)
{
    cmd_drop(req);
    req->cmd_len = 0;
    ONCE_ASSERT(req->cb != NULL, "every queued request has its callback");
    req->cb(req, status, res);
}

static void fail_queue(struct replica *rep, int status)
{
    struct replica_req *req;

    while ((req = q_pop(rep)) != NULL) {
        finish(req, status, NULL);
    }
}

/* --- read indexes (replica.h, "reads served by any node") --------------- */

/* Answer every read index riding the proposal in flight: @status 0 with
 * @index (the proposal applied), else NOTLEADER (a read applies nothing,
 * so the caller may ask again anywhere). */
static void ri_answer(struct replica *rep, int status, uint64_t index)
{
    struct replica_index_req *req = rep->ri_fl;

    rep->ri_fl = NULL;
    while (req != NULL) {
        struct replica_index_req *next = req->next;

        req->next = NULL;
        if (status == 0) {
            rep->stats.read_indexes++;
        }
        req->cb(req, status, status == 0 ? index : 0);
        req = next;
    }
}

/* The proposal just made carries every read index waiting now: they were
 * all requested before it was proposed. */
static void ri_board(struct replica *rep)
{
    ONCE_ASSERT(rep->ri_fl == NULL, "one proposal in flight");
    rep->ri_fl = rep->ri_head;
    rep->ri_head = rep->ri_tail = NULL;
    rep->ri_n = 0;
}

static void ri_fail_queue(struct replica *rep, int status)
{
    struct replica_index_req *req = rep->ri_head;

    rep->ri_head = rep->ri_tail = NULL;
    rep->ri_n = 0;
    while (req != NULL) {
        struct replica_index_req *next = req->next;

        req->next = NULL;
        req->cb(req, status, 0);
        req = next;
    }
}

/* --- the request in flight ---------------------------------------------- */

/* Room for @n requests in flight, and for their commands while the batch
 * is encoded; kept between batches (no allocation per batch). */
static int fl_reserve(struct replica *rep, size_t n)
{
    if (n > rep->fl_cap) {
        size_t cap = rep->fl_cap == 0 ? 64 : rep->fl_cap;
        struct replica_req **reqs;
        const uint8_t **cmds;
        size_t *lens;

        while (cap < n) {
            cap *= 2;
        }
        reqs = realloc(rep->fl_reqs, cap * sizeof *reqs);
        if (reqs == NULL) {
            return REPLICA_E_NOMEM;
        }
        rep->fl_reqs = reqs;
        cmds = realloc(rep->fl_cmds, cap * sizeof *cmds);
        if (cmds == NULL) {
            return REPLICA_E_NOMEM;
        }
        rep->fl_cmds = cmds;
        lens = realloc(rep->fl_lens, cap * sizeof *lens);
        if (lens == NULL) {
            return REPLICA_E_NOMEM;
        }
        rep->fl_lens = lens;
        rep->fl_cap = cap;
    }
    return 0;
}

/* Fail every request of the proposal in flight that has no answer yet. */
static void fl_fail(struct replica *rep, int status)
{
    size_t i, n = rep->fl_n;

    ONCE_ASSERT(n <= rep->fl_cap, "the requests in flight fit fl_reqs");
    rep->fl_n = 0;
    for (i = 0; i < n; i++) {
        if (rep->fl_reqs[i] != NULL) {
            finish(rep->fl_reqs[i], status, NULL);
        }
    }
}

static void fl_clear(struct replica *rep)
{
    rep->inflight = INFLIGHT_NONE;
    rep->fl_n = 0;
    rep->fl_index = 0;
}

void pipeline_emit(struct replica *rep,
                   raft_index index,
                   size_t i,
                   const struct fsm_result *res)
{
    struct replica_req *req;

    /* Results keyed by index: raft's apply result is one pointer per entry.
     * This entry is ours only while raft still holds our request for it:
     * on leadership loss raft fails the request (fl_clear) before any other
     * entry can be applied at that index. */
    if (rep->inflight != INFLIGHT_BATCH || index != rep->fl_index ||
        i >= rep->fl_n || rep->fl_reqs[i] == NULL) {
        return;
    }
    req = rep->fl_reqs[i];
    rep->fl_reqs[i] = NULL;
    finish(req, 0, res);
}

static void apply_cb(struct raft_apply *areq, int status, void *result)
{
    struct replica *rep = areq->data;

    ONCE_ASSERT(areq == &rep->apply_req && rep->inflight == INFLIGHT_BATCH,
                "raft answers the batch in flight");
    (void)result;
    rep->cb_depth++;
    if (status == 0) {
        if (rep->hooks.batch != NULL) {
            rep->hooks.batch(rep->hooks.arg, rep->fl_batch_n,
                             uv_hrtime() - rep->fl_t0_ns);
        }
        /* Every command was answered from apply, unless the entry did not
         * decode (it then did nothing anywhere). */
        fl_fail(rep, REPLICA_E_INTERNAL);
        ri_answer(rep, 0, rep->fl_index);
    } else {
        /* LEADERSHIPLOST or SHUTDOWN: the entry may still commit. */
        fl_fail(rep, REPLICA_E_UNKNOWN);
        ri_answer(rep, REPLICA_E_NOTLEADER, 0);
    }
    fl_clear(rep);
    rep->cb_depth--;
}

static void lookups_answer(struct replica *rep)
{
    size_t i, n = rep->fl_n;

    rep->fl_n = 0;
    for (i = 0; i < n; i++) {
        struct replica_req *req = rep->fl_reqs[i];
        struct fsm_ident id;
        struct fsm_result res;

        ONCE_ASSERT(req != NULL && req->lookup,
                    "a barrier carries lookups only");
        id = (struct fsm_ident){req->scope, req->scope_len, req->key,
                                req->key_len};
        fsm_lookup(rep->fsm, &id, &res);
        finish(req, 0, &res);
    }
}

static void barrier_cb(struct raft_barrier *breq, int status)
{
    struct replica *rep = breq->data;
    struct raft *r = rep->raft;

    ONCE_ASSERT(
        breq == &rep->barrier_req && (rep->inflight == INFLIGHT_G1 ||
                                      rep->inflight == INFLIGHT_BARRIER ||
                                      rep->inflight == INFLIGHT_SNAPSHOT),
        "raft answers the barrier in flight");
    rep->cb_depth++;
    switch (rep->inflight) {
        case INFLIGHT_G1:
            if (status == 0 && r->state == RAFT_LEADER &&
                r->current_term == rep->term) {
                rep->ready = true;
                replica_logf(rep, "info",
                             "leader ready: term-start barrier applied");
            }
            break;
        case INFLIGHT_BARRIER:
            if (status == 0) {
                /* Everything before the barrier is applied, and this node
                 * led a majority when it committed: a linearizable read. */
                lookups_answer(rep);
                ri_answer(rep, 0, rep->fl_index);
            } else {
                fl_fail(rep, REPLICA_E_NOTLEADER); /* reads apply nothing */
                ri_answer(rep, REPLICA_E_NOTLEADER, 0);
            }
            break;
        case INFLIGHT_SNAPSHOT:
            /* The snapshot, if any, is taken after this callback returns
             * (replicationApply), so replica_poll() judges it. */
            if (status != 0) {
                rep->snap_barrier_index = 0;
            }
            break;
        default:
            break;
    }
    fl_clear(rep);
    rep->cb_depth--;
}

/* --- proposing ----------------------------------------------------------- */

static int propose_barrier(struct replica *rep, enum replica_inflight kind)
{
    int rv;

    ONCE_ASSERT(rep->inflight == INFLIGHT_NONE, "one proposal in flight");
    rep->barrier_req.data = rep;
    rv = raft_barrier(rep->raft, &rep->barrier_req, barrier_cb);
    if (rv != 0) {
        /* Not proposed (not leader, shutting down, no memory): the next
         * poll tries again; raft's code stops here. */
        return rv == RAFT_NOMEM ? REPLICA_E_NOMEM : REPLICA_E_NOTLEADER;
    }
    rep->inflight = kind;
    rep->fl_index = rep->barrier_req.index;
    rep->stats.barriers++;
    return 0;
}

/* Only lookups (maybe none) and read indexes wait: they ride a barrier. */
static void propose_lookups(struct replica *rep)
{
    size_t n = rep->q_n, i;
    int rv;

    ONCE_ASSERT(rep->q_lookups == n && (n > 0 || rep->ri_n > 0),
                "only reads ride a barrier");
    if (n > 0 && fl_reserve(rep, n) != 0) {
        return; /* retried at the next poll */
    }
    rv = propose_barrier(rep, INFLIGHT_BARRIER);
    if (rv != 0) {
        return; /* NOTLEADER etc.: the next poll notices */
    }
    for (i = 0; i < n; i++) {
        rep->fl_reqs[i] = q_pop(rep);
    }
    rep->fl_n = n;
    ri_board(rep);
}

static size_t batch_take(struct replica *rep)
{
    struct replica_req *req = rep->q_head;
    size_t n = 0, bytes = 32; /* envelope: schema, time, field tags */

    while (req != NULL && n < FSM_BATCH_COMMANDS_MAX) {
        size_t add = req->cmd_len + 6; /* tag + length varint */

        if (n > 0 && bytes + add > FSM_BATCH_MAX) {
            break;
        }
        bytes += add;
        n++;
        req = req->next;
    }
    return n;
}

/* command_buf_fn: the batch is encoded straight into the raft entry. */
static uint8_t *entry_buf(void *arg, size_t len)
{
    return entry_alloc(len, arg);
}

static void propose_batch(struct replica *rep)
{
    size_t n = batch_take(rep), i, batch_len;
    struct replica_req *req;
    struct raft_buffer buf = {NULL, 0};
    uint32_t schema;
    uint64_t stamp;
    int rv;

    ONCE_ASSERT(rep->inflight == INFLIGHT_NONE && n > 0 && n <= rep->q_n,
                "one proposal in flight, made of queued requests");
    if (fl_reserve(rep, n) != 0) {
        return;
    }
    for (i = 0, req = rep->q_head; i < n; i++, req = req->next) {
        rep->fl_cmds[i] = req->cmd;
        rep->fl_lens[i] = req->cmd_len;
    }
    /* docs/design.md §1.7: max(fsm_now, clamp(wall, est - K, est + K)). */
    stamp = ltime_stamp(&rep->ltime, fsm_now(rep->fsm),
                        rep->clock.wall_ms(rep->clock.arg),
                        rep->clock.mono_ms(rep->clock.arg),
                        fsm_settings(rep->fsm)->max_skew_ms);
    /* The schema in force; before the Bootstrap command applied there is
     * none yet, and the Bootstrap batch sets this code's newest. */
    schema = fsm_schema_version(rep->fsm);
    if (schema == 0) {
        schema = replica_schema_max();
    }
    rv = command_encode_batch_with(schema, stamp, rep->fl_cmds, rep->fl_lens, n,
                                   entry_buf, &buf, &batch_len);
    if (rv != 0) {
        /* Nothing was proposed; the queue stays and the next poll retries
         * (or fails it, if leadership is gone). */
        raft_free(buf.base);
        return;
    }
    ONCE_ASSERT(buf.len == entry_size(batch_len),
                "the entry holds the encoded batch");
    rep->apply_req.data = rep;
    rv = raft_apply(rep->raft, &rep->apply_req, &buf, 1, apply_cb);
    if (rv != 0) {
        raft_free(buf.base);
        return;
    }
    rep->inflight = INFLIGHT_BATCH;
    rep->fl_index = rep->apply_req.index;
    for (i = 0; i < n; i++) {
        rep->fl_reqs[i] = q_pop(rep);
    }
    ONCE_ASSERT(rep->fl_reqs[n - 1] != NULL,
                "batch_take counted queued requests");
    rep->fl_n = n;
    rep->fl_batch_n = n;
    rep->fl_t0_ns = uv_hrtime();
    ri_board(rep);
    rep->stats.batches++;
    rep->stats.batch_commands += n;
}

static void dispatch(struct replica *rep)
{
    struct raft *r = rep->raft;

    /* Never propose from inside one of raft's callbacks (see the top), nor
     * in the middle of a group of submissions (replica_submit_hold). */
    if (rep->cb_depth > 0 || rep->held > 0 || rep->inflight != INFLIGHT_NONE ||
        !rep->leader || r->transfer != NULL) {
        return;
    }
    if (rep->g1_due) {
        if (propose_barrier(rep, INFLIGHT_G1) == 0) {
            rep->g1_due = false;
            rep->stats.g1_barriers++;
        }
        return;
    }
    if (!rep->ready) {
        return;
    }
    if (rep->snap_wanted) {
        /* Lower the threshold so that applying the barrier triggers the
         * snapshot; replica_poll() restores it. */
        raft_set_snapshot_threshold(r, 1);
        if (propose_barrier(rep, INFLIGHT_SNAPSHOT) == 0) {
            rep->snap_wanted = false;
            rep->snap_barrier_index = rep->fl_index;
        } else {
            raft_set_snapshot_threshold(r, rep->config.snapshot_threshold);
        }
        return;
    }
    member_poll(rep);
    if (rep->inflight != INFLIGHT_NONE || (rep->q_n == 0 && rep->ri_n == 0)) {
        return;
    }
    if (rep->q_lookups == rep->q_n) {
        propose_lookups(rep);
    } else {
        propose_batch(rep);
    }
}

/* --- reads at an index (any node) ----------------------------------------- */

static void read_now(struct replica *rep,
                     const struct replica_req *req,
                     struct fsm_result *res)
{
    struct fsm_ident id = {req->scope, req->scope_len, req->key, req->key_len};

    fsm_lookup(rep->fsm, &id, res);
    rep->stats.reads_at++;
}

/* Serve the reads whose index is applied now (the list is sorted). */
static void reads_poll(struct replica *rep)
{
    uint64_t applied;

    if (rep->rd_head == NULL) {
        return;
    }
    applied = raft_last_applied(rep->raft);
    while (rep->rd_head != NULL && rep->rd_head->read_at <= applied) {
        struct replica_req *req = rep->rd_head;
        struct fsm_result res;

        ONCE_ASSERT(rep->rd_n > 0 && (req->next == NULL ||
                                      req->next->read_at >= req->read_at),
                    "waiting reads are counted and sorted by index");
        rep->rd_head = req->next;
        rep->rd_n--;
        req->next = NULL;
        read_now(rep, req, &res);
        req->cb(req, 0, &res);
    }
}

static void reads_fail(struct replica *rep, int status)
{
    while (rep->rd_head != NULL) {
        struct replica_req *req = rep->rd_head;

        rep->rd_head = req->next;
        rep->rd_n--;
        req->next = NULL;
        req->cb(req, status, NULL);
    }
}

static void snapshot_poll(struct replica *rep)
{
    struct raft *r = rep->raft;
    void (*cb)(struct replica *, int);
    int status;

    if (rep->snap_cb == NULL || rep->snap_wanted ||
        rep->inflight == INFLIGHT_SNAPSHOT) {
        return;
    }
    raft_set_snapshot_threshold(r, rep->config.snapshot_threshold);
    if (rep->snap_barrier_index == 0) {
        status = REPLICA_E_NOTLEADER;
    } else if (r->log.snapshot.last_index >= rep->snap_barrier_index ||
               (r->snapshot.pending.term != 0 &&
                r->snapshot.pending.index >= rep->snap_barrier_index)) {
        status = 0; /* taken (stored, or being stored) */
    } else {
        status = REPLICA_E_BUSY; /* G5 refused it, or one was running */
    }
    cb = rep->snap_cb;
    rep->snap_cb = NULL;
    rep->snap_barrier_index = 0;
    cb(rep, status);
}

void replica_poll(struct replica *rep)
{
    struct raft *r = rep->raft;

    if (rep->closing || !rep->started) {
        return;
    }
    if (r->state == RAFT_UNAVAILABLE) {
        /* 0.15 converts to unavailable on any error inside its recv and
         * tick paths (among them "conflicting terms" at the commit index, a
         * safety alarm) and never recovers: stop loudly instead of lingering
         * as a node that answers nothing. */
        rep->closing = true;
        replica_fatal(rep, "raft", RAFT_SHUTDOWN,
                      raft_errmsg(r)[0] != '\0' ? raft_errmsg(r)
                                                : "raft became unavailable");
        return;
    }
    if (r->state == RAFT_LEADER &&
        (!rep->leader || rep->term != r->current_term)) {
        rep->leader = true;
        rep->term = r->current_term;
        rep->ready = !guard_on(GUARD_G1);
        rep->g1_due = guard_on(GUARD_G1);
        ltime_anchor(&rep->ltime);
        replica_logf(rep, "info", "became leader of term %llu",
                     (unsigned long long)r->current_term);
    } else if (r->state != RAFT_LEADER && rep->leader) {
        rep->leader = false;
        rep->ready = false;
        rep->g1_due = false;
        replica_logf(rep, "info", "lost leadership of term %llu",
                     (unsigned long long)rep->term);
        fail_queue(rep, REPLICA_E_NOTLEADER);
        ri_fail_queue(rep, REPLICA_E_NOTLEADER);
        if (rep->snap_wanted) {
            rep->snap_wanted = false;
            rep->snap_barrier_index = 0;
        }
        member_fail(rep, REPLICA_E_NOTLEADER, "leadership lost");
    }
    snapshot_poll(rep);
    reads_poll(rep);
    /* A digest waiting for the view (an install or a snapshot had it). */
    replica_digest_poll(rep);
    dispatch(rep);
}

void pipeline_fail_all(struct replica *rep, int status)
{
    fail_queue(rep, status);
    ri_fail_queue(rep, status);
    reads_fail(rep, status);
}

/* --- submitting ----------------------------------------------------------- */

static int admit(struct replica *rep, size_t cmd_len)
{
    if (rep->closing) {
        return REPLICA_E_SHUTDOWN;
    }
    if (rep->raft->state != RAFT_LEADER || !rep->leader) {
        return REPLICA_E_NOTLEADER;
    }
    if (entry_size(cmd_len + 64) > ENTRY_MAX) {
        return REPLICA_E_TOOBIG;
    }
    if (rep->q_n >= REPLICA_QUEUE_MAX ||
        rep->q_bytes + cmd_len > REPLICA_QUEUE_BYTES_MAX) {
        return REPLICA_E_BUSY;
    }
    return 0;
}

static int encode(const struct fsm_cmd *cmd, struct replica_req *req)
{
    int rv = -ENOSPC;

    if (cmd->type == FSM_CMD_CLAIM) {
        rv = command_encode_claim_into(&cmd->u.claim, req->cmd_inline,
                                       sizeof req->cmd_inline, &req->cmd_len);
        if (rv == 0) {
            req->cmd = req->cmd_inline;
        }
    }
    if (rv == -ENOSPC) {
        rv = command_encode(cmd, &req->cmd, &req->cmd_len);
    }

    if (rv == FSM_E_TOOBIG) {
        return REPLICA_E_TOOBIG;
    }
    if (rv == -ENOMEM) {
        return REPLICA_E_NOMEM;
    }
    return rv == 0 ? 0 : REPLICA_E_INVALID;
}

static int enqueue(struct replica *rep,
                   struct replica_req *req,
                   const struct fsm_cmd *cmd,
                   const struct fsm_ident *lookup,
                   replica_cb cb)
{
    int rv;

    req->cmd = NULL;
    req->cmd_len = 0;
    req->lookup = lookup != NULL;
    rv = admit(rep, 0);
    if (rv == 0) {
        rv = encode(cmd, req);
    }
    if (rv == 0) {
        rv = admit(rep, req->cmd_len);
    }
    if (rv != 0) {
        cmd_drop(req);
        return rv;
    }
    if (lookup != NULL) {
        /* Queued as a Lookup command (rides a batch if one goes next), and
         * answerable from a barrier when only lookups are queued. */
        ONCE_ASSERT(lookup->scope_len <= sizeof req->scope &&
                        lookup->key_len <= sizeof req->key,
                    "replica_lookup checked the identity");
        memcpy(req->scope, lookup->scope, lookup->scope_len);
        req->scope_len = lookup->scope_len;
        memcpy(req->key, lookup->key, lookup->key_len);
        req->key_len = lookup->key_len;
    }
    ONCE_ASSERT(cb != NULL, "a request needs a callback");
    req->cb = cb;
    q_push(rep, req);
    dispatch(rep);
    return 0;
}

int replica_submit(struct replica *rep,
                   struct replica_req *req,
                   const struct fsm_cmd *cmd,
                   replica_cb cb)
{
    return enqueue(rep, req, cmd, NULL, cb);
}

void replica_submit_hold(struct replica *rep)
{
    rep->held++;
}

void replica_submit_release(struct replica *rep)
{
    ONCE_ASSERT(rep->held > 0, "a release follows its hold");
    rep->held--;
    dispatch(rep);
}

int replica_lookup(struct replica *rep,
                   struct replica_req *req,
                   const struct fsm_ident *ident,
                   replica_cb cb)
{
    struct fsm_cmd cmd;

    if (fsm_check_ident(ident->scope_len, ident->key_len) != NULL) {
        return REPLICA_E_INVALID;
    }
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_LOOKUP;
    cmd.u.ident = *ident;
    return enqueue(rep, req, &cmd, ident, cb);
}

int replica_read_index(struct replica *rep,
                       struct replica_index_req *req,
                       replica_index_cb cb)
{
    int rv = admit(rep, 0);

    if (rv == 0 && rep->ri_n >= REPLICA_QUEUE_MAX) {
        rv = REPLICA_E_BUSY;
    }
    if (rv != 0) {
        return rv;
    }
    ONCE_ASSERT(cb != NULL, "a read index needs a callback");
    req->cb = cb;
    req->next = NULL;
    if (rep->ri_tail != NULL) {
        rep->ri_tail->next = req;
    } else {
        rep->ri_head = req;
    }
    rep->ri_tail = req;
    rep->ri_n++;
    dispatch(rep);
    return 0;
}

int replica_read_at(struct replica *rep,
                    struct replica_req *req,
                    const struct fsm_ident *ident,
                    uint64_t index,
                    struct fsm_result *res,
                    replica_cb cb)
{
    struct replica_req **at;

    if (fsm_check_ident(ident->scope_len, ident->key_len) != NULL) {
        return REPLICA_E_INVALID;
    }
    if (rep->closing) {
        return REPLICA_E_SHUTDOWN;
    }
    memcpy(req->scope, ident->scope, ident->scope_len);
    req->scope_len = ident->scope_len;
    memcpy(req->key, ident->key, ident->key_len);
    req->key_len = ident->key_len;
    req->read_at = index;
    req->lookup = true;
    req->cmd = NULL;
    req->cmd_len = 0;
    if (raft_last_applied(rep->raft) >= index) {
        read_now(rep, req, res);
        return 1;
    }
    if (rep->rd_n >= REPLICA_QUEUE_MAX) {
        return REPLICA_E_BUSY;
    }
    ONCE_ASSERT(cb != NULL, "a waiting read needs a callback");
    req->cb = cb;
    /* Sorted by index; indexes mostly grow, but a scan is bounded. */
    at = &rep->rd_head;
    while (*at != NULL && (*at)->read_at <= index) {
        at = &(*at)->next;
    }
    req->next = *at;
    *at = req;
    rep->rd_n++;
    return 0;
}

void replica_read_cancel(struct replica *rep, struct replica_req *req)
{
    struct replica_req **at = &rep->rd_head;

    ONCE_ASSERT(req != NULL, "the caller's request, not NULL");
    while (*at != NULL && *at != req) {
        at = &(*at)->next;
    }
    if (*at == req) {
        ONCE_ASSERT(rep->rd_n > 0, "a waiting read is counted");
        *at = req->next;
        req->next = NULL;
        rep->rd_n--;
    }
}

int replica_snapshot(struct replica *rep,
                     void (*cb)(struct replica *rep, int status))
{
    if (rep->closing) {
        return REPLICA_E_SHUTDOWN;
    }
    if (!replica_ready(rep)) {
        return REPLICA_E_NOTLEADER;
    }
    if (rep->snap_cb != NULL) {
        return REPLICA_E_BUSY;
    }
    rep->snap_cb = cb;
    rep->snap_wanted = true;
    dispatch(rep);
    return 0;
}

uint32_t replica_schema_max(void)
{
#ifndef NDEBUG
    /* Debug builds only (docs/server.md, "Quotas and the log schema"): a
     * node may act as a binary whose newest schema is lower, so tests can
     * run a cluster that bootstraps at an older schema, or whose voters do
     * not all support the newest one. */
    const char *v = getenv("ONCE_TEST_SCHEMA_MAX");

    if (v != NULL && v[0] >= '1' && v[0] <= '9' && v[1] == '\0' &&
        (uint32_t)(v[0] - '0') < FSM_SCHEMA_VERSION) {
        return (uint32_t)(v[0] - '0');
    }
#endif
    return FSM_SCHEMA_VERSION;
}
