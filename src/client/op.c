/* client/op.c: one libonce call, from its first attempt to its result
 * (client_int.h).
 *
 * Every call is a struct op: its packed request body (kept for retries, so
 * a retry repeats the same request id byte for byte), its deadline, the node
 * it is on and the result of its latest attempt. A synchronous call submits
 * its op and runs the loop until the op is done; an asynchronous one is
 * driven by once_run, and its callback runs from there (never from inside
 * uv_run, so a callback may make synchronous calls).
 *
 * Happy path: the op goes to the preferred node (the last one that answered
 * OK, or the leader a node named), the answer passes the cluster-id pin and
 * the bounds of once.h, and is copied into the op's result.
 *
 * Failure modes, one attempt at a time (client_decide has the table):
 *   - no answer before sending, UNAVAILABLE, RESOURCE_EXHAUSTED: certainly
 *     not applied; the op moves to the hinted node (the leader, at once) or
 *     the next one (after a backoff) and tries again until its deadline;
 *   - no answer after sending, UNKNOWN, DEADLINE_EXCEEDED, a malformed
 *     answer to a write: perhaps applied; the op is retried the same way,
 *     with the same request id, which the state machine makes safe; from
 *     then on the op's applied stays UNKNOWN whatever later attempts say;
 *   - INVALID_ARGUMENT, FAILED_PRECONDITION, PERMISSION_DENIED: final;
 *   - an answer from another cluster than the pinned one: final
 *     FAILED_PRECONDITION, never retried elsewhere (fail closed);
 *   - the deadline passes: the last attempt's error is final, with the
 *     applied rule above.
 * An attempt of a read or of a call with a request id never waits for
 * more than half of what remains of its deadline (CLIENT_ATTEMPT_MIN_MS)
 * when other nodes could answer, so a node that swallows requests cannot
 * take the whole deadline (op_may_split). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_int.h"
#include "common/text.h"

/* Moves to a hinted leader without a backoff, in a row: enough to follow
 * a hint through one stale follower, not enough to spin between nodes that
 * name each other during an election. */
#define HINT_HOPS_MAX 2u

static void attempt(struct op *op);

/* ------------------------------------------------------------------------
 * Results
 * ---------------------------------------------------------------------- */

static void set_error(struct once_result *r,
                      enum once_status status,
                      enum once_applied applied,
                      const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void set_error(struct once_result *r,
                      enum once_status status,
                      enum once_applied applied,
                      const char *fmt,
                      ...)
{
    va_list ap;

    r->status = status;
    r->applied = applied;
    va_start(ap, fmt);
    /* Truncation is fine: the text is for people, bounded by once.h. */
    (void)vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
}

void client_text_put(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

/* A result made by the library itself (no round trip). */
int client_fail_local(struct once_result *r,
                      enum once_status status,
                      const char *msg)
{
    once_result_clear(r);
    set_error(r, status, ONCE_APPLIED_FALSE, "%s", msg);
    return r->status;
}

/* Reset @op's result for a new answer, keeping what is the call's. */
static void res_reset(struct op *op)
{
    once_result_clear(&op->res);
    if (op->has_request_id) {
        memcpy(op->res.request_id, op->request_id, ONCE_ID_LEN);
    }
}

/* ------------------------------------------------------------------------
 * Nodes
 * ---------------------------------------------------------------------- */

/* Index of @addr (@len bytes, no NUL needed), added if new and there is
 * room; else -EINVAL (not a valid address), -ENOSPC (the list is full) or
 * rpc_channel_open's code. */
int client_node_find_or_add(struct once_client *c, const char *addr, size_t len)
{
    char buf[ONCE_ADDR_MAX + 1];
    char errmsg[ERR_MSG_SIZE];
    struct sockaddr_in sa;
    struct node *n;
    int rv;

    if (len == 0 || len > ONCE_ADDR_MAX) {
        return -EINVAL;
    }
    memcpy(buf, addr, len);
    buf[len] = '\0';
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (strcmp(c->nodes[i].addr, buf) == 0) {
            return (int)i;
        }
    }
    if (c->n_nodes == ONCE_ADDRS_MAX) {
        return -ENOSPC;
    }
    if (rpc_addr_parse(buf, &sa) != 0) {
        return -EINVAL;
    }
    n = &c->nodes[c->n_nodes];
    rv = rpc_channel_open(&n->ch, &c->loop, buf, &c->limits, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (c->tls.ctx != NULL) {
        rpc_channel_set_tls(n->ch, &c->tls);
    }
    strcpy(n->addr, buf);
    return (int)c->n_nodes++;
}

/* ------------------------------------------------------------------------
 * Ops: lifetime, waiting, completion
 * ---------------------------------------------------------------------- */

struct op *op_new(struct once_client *c, enum rpc_method m, bool write)
{
    struct op *op = calloc(1, sizeof *op);

    if (op == NULL) {
        return NULL;
    }
    op->c = c;
    op->method = m;
    op->write = write;
    return op;
}

void op_free(struct op *op)
{
    free(op->body);
    free(op->res.result); /* once_result_clear's free; no zeroing to free */
    free(op);
}

static void rearm(struct once_client *c);

static void on_timer(uv_timer_t *t)
{
    struct once_client *c = t->data;
    uint64_t now = uv_now(&c->loop);
    struct op *due = NULL;
    struct op *op = c->waiting;

    /* Take the due ops out first: an attempt may put its op back. */
    while (op != NULL) {
        struct op *next = op->wnext;

        if (op->wake_at <= now) {
            op_unwait(op);
            op->wnext = due; /* the due list reuses wnext */
            due = op;
        }
        op = next;
    }
    while (due != NULL) {
        op = due;
        due = op->wnext;
        op->wnext = NULL;
        attempt(op);
    }
    rearm(c);
}

static void rearm(struct once_client *c)
{
    uint64_t now = uv_now(&c->loop);
    uint64_t first = UINT64_MAX;

    if (c->closing) {
        return;
    }
    for (struct op *op = c->waiting; op != NULL; op = op->wnext) {
        if (op->wake_at < first) {
            first = op->wake_at;
        }
    }
    if (first == UINT64_MAX) {
        (void)uv_timer_stop(&c->timer);
        return;
    }
    (void)uv_timer_start(&c->timer, on_timer, first > now ? first - now : 0, 0);
}

static void wait_then_attempt(struct op *op, uint64_t delay_ms)
{
    struct once_client *c = op->c;

    op->wake_at = uv_now(&c->loop) + delay_ms;
    op->wprev = NULL;
    op->wnext = c->waiting;
    if (c->waiting != NULL) {
        c->waiting->wprev = op;
    }
    c->waiting = op;
    rearm(c);
}

void op_unwait(struct op *op)
{
    struct once_client *c = op->c;

    if (op->wprev != NULL) {
        op->wprev->wnext = op->wnext;
    } else {
        c->waiting = op->wnext;
    }
    if (op->wnext != NULL) {
        op->wnext->wprev = op->wprev;
    }
    op->wprev = op->wnext = NULL;
}

static void finish(struct op *op)
{
    struct once_client *c = op->c;

    op->done = true;
    if (op->async) {
        op->dnext = NULL;
        if (c->done_tail != NULL) {
            c->done_tail->dnext = op;
        } else {
            c->done_head = op;
        }
        c->done_tail = op;
    }
}

/* The client closes under @op (its attempt in flight was @sent or not). */
void op_finish_closing(struct op *op, bool sent)
{
    res_reset(op);
    if (op->write && (sent || op->maybe_applied)) {
        set_error(&op->res, ONCE_STATUS_UNKNOWN, ONCE_APPLIED_UNKNOWN,
                  "client closed with the call in flight (outcome unknown)");
    } else {
        set_error(&op->res, ONCE_STATUS_UNAVAILABLE, ONCE_APPLIED_FALSE,
                  "client closed before the call was sent");
    }
    finish(op);
}

/* The deadline passed between attempts: the last error stands. */
static void finish_deadline(struct op *op)
{
    struct once_result *r = &op->res;
    char last[sizeof r->error];

    if (op->attempts == 0) {
        set_error(r, ONCE_STATUS_DEADLINE_EXCEEDED, ONCE_APPLIED_FALSE,
                  "deadline of %" PRIu32 " ms passed before any attempt",
                  op->timeout_ms);
    } else {
        memcpy(last, r->error, sizeof last);
        client_text_put(r->error, sizeof r->error,
                        "deadline of %" PRIu32
                        " ms: %u attempts, no decision; "
                        "last error: %s",
                        op->timeout_ms, op->attempts, last);
    }
    finish(op);
}

/* ------------------------------------------------------------------------
 * Attempts
 * ---------------------------------------------------------------------- */

/* After a failed attempt: final, or the next node and when to go. */
static void after_attempt(struct op *op,
                          struct client_decision d,
                          const char *hint,
                          size_t hint_len)
{
    struct once_client *c = op->c;
    bool hinted = false;
    uint64_t delay;
    uint64_t now;

    if (d.maybe_applied && op->write) {
        op->maybe_applied = true;
    }
    /* Once unknown, never back to false; a read never applies anything. */
    op->res.applied = op->maybe_applied ? ONCE_APPLIED_UNKNOWN
                      : op->write       ? op->res.applied
                                        : ONCE_APPLIED_FALSE;
    if (op->res.applied == ONCE_APPLIED_NONE) {
        op->res.applied = ONCE_APPLIED_FALSE;
    }
    /* A write without a request id (forget, admin calls) that may have
     * applied is final: resending it would be a blind retry, and its second
     * answer (NOT_FOUND, FAILED_PRECONDITION) would hide the first apply. */
    if (d.final || op->one_node ||
        (op->write && !op->has_request_id && op->maybe_applied)) {
        finish(op);
        return;
    }
    if (hint_len > 0 && !op->no_hint) {
        int i = client_node_find_or_add(c, hint, hint_len);

        if (i >= 0) {
            /* The node named the leader: so will every later call. */
            c->preferred = (size_t)i;
            /* Hinted at itself: the leader is not ready yet; wait there. */
            hinted = (size_t)i != op->node;
            op->node = (size_t)i;
        } else {
            op->node = (op->node + 1) % c->n_nodes;
        }
    } else {
        op->node = (op->node + 1) % c->n_nodes;
    }
    if (hinted && op->hint_hops < HINT_HOPS_MAX) {
        op->hint_hops++;
        delay = 0;
    } else {
        op->hint_hops = 0;
        op->backoff_ms = client_backoff_next(op->backoff_ms);
        delay = op->backoff_ms;
    }
    now = uv_now(&c->loop);
    if (now + delay >= op->deadline) {
        uint64_t left = op->deadline > now ? op->deadline - now : 0;

        /* Keep trying into the deadline's last moments (a leader may just
         * have been elected), but not with a sliver of time. */
        if (left < 2 * CLIENT_BACKOFF_FIRST_MS) {
            finish_deadline(op);
            return;
        }
        delay = left / 2;
    }
    wait_then_attempt(op, delay);
}

static void describe_node(char *buf,
                          size_t size,
                          const struct envelope_view *ans,
                          const char *addr)
{
    char id[17];

    (void)snprintf(buf, size, "node %s at %s", text_format_id(ans->node_id, id),
                   addr);
}

/* An OK answer that is no decision (@err says why): perhaps applied (a
 * write), certainly nothing changed (a read); retried like an error. */
static void refuse_answer(struct op *op, const char *who, const char *err)
{
    struct once_result *r = &op->res;
    struct once_origin origin = r->origin;
    struct client_decision d;

    /* Nothing of a refused answer stays, in the result or outputs. */
    res_reset(op);
    r->origin = origin;
    if (op->out.status != NULL) {
        memset(op->out.status, 0, sizeof *op->out.status);
    }
    if (op->out.n_members != NULL) {
        *op->out.n_members = 0;
    }
    if (op->write) {
        set_error(r, ONCE_STATUS_UNKNOWN, ONCE_APPLIED_UNKNOWN,
                  "malformed answer from %s: %s", who, err);
    } else {
        set_error(r, ONCE_STATUS_UNAVAILABLE, ONCE_APPLIED_FALSE,
                  "malformed answer from %s: %s", who, err);
    }
    d.final = false;
    d.maybe_applied = op->write;
    after_attempt(op, d, NULL, 0);
}

/* Why the node's last connection failed before anything was sent (a
 * refused TLS handshake names the certificate problem), or "". */
static const char *tls_error(const struct once_client *c, size_t node)
{
    return rpc_channel_last_error(c->nodes[node].ch);
}

/* The body of an OK answer into @op's result and outputs: by the hand
 * reader (answer_read.c) if it takes the bytes, else by protobuf-c. */
static int read_answer(struct op *op, struct envelope_view *ans, char *err)
{
    ProtobufCMessage *body = NULL;
    int rv = client_read_body_fast(op->method, ans->body, ans->body_len,
                                   &op->res, &op->out, err);

    if (rv != 1) {
        return rv;
    }
    rv = envelope_unpack_body(ans, &body, err);
    if (rv != 0) {
        return rv;
    }
    return client_read_body(op->method, body, &op->res, &op->out, err);
}

static void on_answer(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct op *op = arg;
    struct once_client *c = op->c;
    const char *addr = c->nodes[op->node].addr;
    struct once_result *r = &op->res;
    char who[ONCE_ADDR_MAX + 64];
    char err[ERR_MSG_SIZE];
    struct client_decision d;

    if (c->closing) {
        op_finish_closing(op, rv == 0 || sent);
        return;
    }
    res_reset(op);
    if (rv < 0) {
        d = client_decide(rv, sent, RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED);
        set_error(r, client_status_of_channel(rv, sent),
                  sent ? ONCE_APPLIED_UNKNOWN : ONCE_APPLIED_FALSE,
                  "%s: %s%s%s", addr, rpc_conn_strerror(rv),
                  rv == RPC_E_CONNECT && tls_error(c, op->node)[0] != '\0'
                      ? "; "
                      : "",
                  rv == RPC_E_CONNECT ? tls_error(c, op->node) : "");
        if (c->preferred == op->node && !op->one_node) {
            /* Later calls should not start at a node that just failed
             * (perhaps a stale hint's dead leader). */
            c->preferred = (op->node + 1) % c->n_nodes;
        }
        after_attempt(op, d, NULL, 0);
        return;
    }

    r->origin.has_cluster_id = ans->has_cluster_id;
    memcpy(r->origin.cluster_id, ans->cluster_id, ONCE_ID_LEN);
    r->origin.node_id = ans->node_id;
    r->origin.has_boot_id = ans->has_boot_id;
    memcpy(r->origin.boot_id, ans->boot_id, ONCE_ID_LEN);
    /* "node ID at ADDR" is for error texts only: formatted on those paths
     * (a printf per answer was ~1,000 instructions of every claim). */

    if (ans->has_cluster_id && c->pinned &&
        memcmp(ans->cluster_id, c->cluster_id, ONCE_ID_LEN) != 0) {
        char pinned[2 * ONCE_ID_LEN + 1];
        char answered[2 * ONCE_ID_LEN + 1];

        describe_node(who, sizeof who, ans, addr);
        /* Another cluster (restored, re-bootstrapped, or a wrong address)
         * must never decide for this one: fail closed, no retry. */
        set_error(r, ONCE_STATUS_FAILED_PRECONDITION,
                  op->write && op->maybe_applied ? ONCE_APPLIED_UNKNOWN
                                                 : ONCE_APPLIED_FALSE,
                  "cluster id mismatch: pinned %s, answered %s by %s",
                  text_format_hex(c->cluster_id, ONCE_ID_LEN, pinned),
                  text_format_hex(ans->cluster_id, ONCE_ID_LEN, answered), who);
        finish(op);
        return;
    }

    if (ans->status != RPC_STATUS_OK) {
        describe_node(who, sizeof who, ans, addr);
        set_error(r, client_status_from_rpc(ans->status),
                  ans->applied == RPC_APPLIED_UNKNOWN ? ONCE_APPLIED_UNKNOWN
                                                      : ONCE_APPLIED_FALSE,
                  "%s (%s)", ans->error_len > 0 ? ans->error : "no message",
                  who);
        if (ans->leader_hint_len > 0) {
            memcpy(r->leader_hint, ans->leader_hint, ans->leader_hint_len);
            r->leader_hint[ans->leader_hint_len] = '\0';
        }
        d = client_decide(0, true, ans->status, ans->applied);
        after_attempt(op, d, ans->leader_hint, ans->leader_hint_len);
        return;
    }

    /* An OK answer is a decision only from a node that knows its cluster,
     * and only if it is well formed. Otherwise: perhaps applied (a write),
     * certainly nothing changed (a read). */
    if (!ans->has_cluster_id) {
        err_printf(err, "answered OK without a cluster id");
    } else if (read_answer(op, ans, err) != 0) {
        /* err says why. */
    } else {
        r->status = ONCE_STATUS_OK;
        r->applied = ONCE_APPLIED_NONE;
        if (!c->pinned) {
            c->pinned = true;
            memcpy(c->cluster_id, ans->cluster_id, ONCE_ID_LEN);
        }
        if (!op->no_hint && !op->one_node) {
            c->preferred = op->node;
        }
        finish(op);
        return;
    }
    describe_node(who, sizeof who, ans, addr);
    refuse_answer(op, who, err);
}

/* Whether an attempt may stop at half the remaining deadline to try
 * another node. Only where a second copy of the call is harmless: reads,
 * and the calls that carry a request id (the state machine recognises the
 * repeat). An admin write (a membership change, a transfer) runs on one
 * node for as long as the deadline allows. */
static bool op_may_split(const struct op *op)
{
    if (op->one_node || op->c->n_nodes < 2) {
        return false;
    }
    return !op->write || op->has_request_id;
}

static void attempt(struct op *op)
{
    struct once_client *c = op->c;
    struct node *n = &c->nodes[op->node];
    uint64_t now = uv_now(&c->loop);
    struct envelope_view req;
    uint64_t budget;
    int rv;

    if (c->closing) {
        op_finish_closing(op, false);
        return;
    }
    if (now >= op->deadline) {
        finish_deadline(op);
        return;
    }
    budget = client_attempt_budget(op->deadline - now, op_may_split(op));
    memset(&req, 0, sizeof req);
    req.method = op->method;
    req.direction = RPC_REQUEST;
    req.status = RPC_STATUS_OK;
    req.applied = RPC_APPLIED_UNSPECIFIED;
    req.body = op->body;
    req.body_len = op->body_len;
    /* The pin travels with the request, so a node of another cluster
     * refuses it before Raft instead of applying it. */
    req.has_cluster_id = c->pinned;
    memcpy(req.cluster_id, c->cluster_id, ONCE_ID_LEN);
    op->attempts++;
    /* The answer callback may run before this returns (a connect that
     * fails at once): nothing touches @op after a successful call. */
    rv = rpc_channel_call(n->ch, &req, budget, on_answer, op);
    if (rv != 0) {
        /* Nothing was queued: definitely not sent. */
        on_answer(op, rv == RPC_E_CLOSED ? RPC_E_CLOSED : RPC_E_CONNECT, false,
                  NULL);
    }
}

void op_start(struct op *op, uint32_t timeout_ms)
{
    struct once_client *c = op->c;

    op->timeout_ms = timeout_ms != 0 ? timeout_ms : c->timeout_ms;
    /* The loop's clock is only as fresh as its last iteration. */
    uv_update_time(&c->loop);
    op->deadline = uv_now(&c->loop) + op->timeout_ms;
    if (!op->one_node) {
        op->node = c->preferred;
    }
    attempt(op);
}

void op_start_after(struct op *op, uint32_t timeout_ms, uint64_t delay_ms)
{
    struct once_client *c = op->c;

    if (delay_ms == 0) {
        op_start(op, timeout_ms);
        return;
    }
    op->timeout_ms = timeout_ms != 0 ? timeout_ms : c->timeout_ms;
    uv_update_time(&c->loop);
    op->deadline = uv_now(&c->loop) + op->timeout_ms;
    if (!op->one_node) {
        op->node = c->preferred;
    }
    wait_then_attempt(op, delay_ms);
}

/* Run @op to its end and move its result into @r. */
int op_run_sync(struct op *op, uint32_t timeout_ms, struct once_result *r)
{
    struct once_client *c = op->c;

    op_start(op, timeout_ms);
    while (!op->done) {
        if (uv_run(&c->loop, UV_RUN_ONCE) == 0 && !op->done) {
            /* UNTESTED: an op in flight or waiting keeps a timer active. */
            set_error(&op->res, ONCE_STATUS_UNKNOWN,
                      op->write ? ONCE_APPLIED_UNKNOWN : ONCE_APPLIED_FALSE,
                      "internal error: the client loop stopped");
            break;
        }
    }
    *r = op->res; /* the result's memory moves to the caller */
    memset(&op->res, 0, sizeof op->res);
    op_free(op);
    return r->status;
}

/* Common checks of a synchronous call; false: @r is filled. */
bool client_sync_begin(once_client *c, struct once_result *r)
{
    once_result_clear(r);
    if (c == NULL) {
        client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, "client: NULL");
        return false;
    }
    if (c->closing || c->free_pending) {
        client_fail_local(r, ONCE_STATUS_UNAVAILABLE, "client is closing");
        return false;
    }
    return true;
}

int op_take_request_id(struct op *op, const uint8_t *given)
{
    op->has_request_id = true;
    if (given != NULL) {
        memcpy(op->request_id, given, ONCE_ID_LEN);
        return 0;
    }
    return once_request_id_new(op->request_id);
}
