/* client/client.c: libonce (include/once.h) over rpc_channel on a private
 * libuv loop.
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
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>
#include <uv.h>

#include "client/client.h"
#include "common/text.h"
#include "rpc/conn.h"

#define DEFAULT_TIMEOUT_MS   5000u
#define DEFAULT_MAX_INFLIGHT 1024u
/* Moves to a hinted leader without a backoff, in a row: enough to follow
 * a hint through one stale follower, not enough to spin between nodes that
 * name each other during an election. */
#define HINT_HOPS_MAX 2u

struct node
{
    char addr[ONCE_ADDR_MAX + 1];
    struct rpc_channel *ch;
};

struct op;

struct once_client
{
    uv_loop_t loop;
    uv_timer_t timer;     /* wakes ops waiting for their next attempt */
    uv_timer_t run_timer; /* wakes once_run at its timeout */
    struct rpc_limits limits;
    struct node nodes[ONCE_ADDRS_MAX];
    size_t n_nodes;
    size_t preferred; /* first node of a new call */
    uint32_t timeout_ms;
    uint32_t max_inflight;
    bool pinned;
    uint8_t cluster_id[ONCE_ID_LEN];
    unsigned outstanding; /* async ops whose callback has not run */
    struct op *waiting;   /* ops between attempts */
    struct op *done_head; /* async ops done, callback not yet run */
    struct op *done_tail;
    struct op *async_ops; /* every async op not yet delivered */
    bool closing;
    unsigned in_callback; /* depth of async callbacks running */
    bool free_pending;    /* once_client_free from inside a callback */
    char last_error[CLIENT_ERR_SIZE];
};

struct op
{
    struct once_client *c;
    enum rpc_method method;
    bool write;    /* may change state: an outcome may be unknown */
    bool one_node; /* status at a given address: never elsewhere */
    bool no_hint;  /* status: served by each node itself */
    uint8_t *body;
    size_t body_len;
    bool has_request_id;
    uint8_t request_id[ONCE_ID_LEN];
    uint32_t timeout_ms;
    uint64_t deadline; /* loop time, ms */
    size_t node;
    unsigned attempts;
    unsigned backoff_ms;
    unsigned hint_hops;
    bool maybe_applied; /* some attempt may have taken effect */
    bool done;
    uint64_t wake_at;
    struct op *wprev, *wnext; /* c->waiting */
    struct op *dnext;         /* c->done_head */
    struct op *aprev, *anext; /* c->async_ops */
    bool async;
    once_cb cb;
    void *arg;
    struct client_outputs out;
    struct once_result res; /* the latest attempt's, then the call's */
};

static void attempt(struct op *op);

/* ------------------------------------------------------------------------
 * Results
 * ---------------------------------------------------------------------- */

void once_result_init(struct once_result *r)
{
    memset(r, 0, sizeof *r);
}

void once_result_clear(struct once_result *r)
{
    if (r == NULL) {
        return;
    }
    free(r->result);
    memset(r, 0, sizeof *r);
}

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

/* Messages are for people: truncated at their buffer's size, on purpose. */
static void text_put(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void text_put(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

/* A result made by the library itself (no round trip). */
static int fail_local(struct once_result *r,
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
 * room; -1 if it is not a valid address or the list is full. */
static int node_find_or_add(struct once_client *c, const char *addr, size_t len)
{
    char buf[ONCE_ADDR_MAX + 1];
    char errmsg[RPC_ERRMSG_SIZE];
    struct sockaddr_in sa;
    struct node *n;

    if (len == 0 || len > ONCE_ADDR_MAX) {
        return -1;
    }
    memcpy(buf, addr, len);
    buf[len] = '\0';
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (strcmp(c->nodes[i].addr, buf) == 0) {
            return (int)i;
        }
    }
    if (c->n_nodes == ONCE_ADDRS_MAX || rpc_addr_parse(buf, &sa) != 0) {
        return -1;
    }
    n = &c->nodes[c->n_nodes];
    if (rpc_channel_open(&n->ch, &c->loop, buf, &c->limits, errmsg) != 0) {
        return -1;
    }
    strcpy(n->addr, buf);
    return (int)c->n_nodes++;
}

/* ------------------------------------------------------------------------
 * Ops: lifetime, waiting, completion
 * ---------------------------------------------------------------------- */

static struct op *op_new(struct once_client *c, enum rpc_method m, bool write)
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

static void op_free(struct op *op)
{
    free(op->body);
    once_result_clear(&op->res);
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
            if (op->wprev != NULL) {
                op->wprev->wnext = op->wnext;
            } else {
                c->waiting = op->wnext;
            }
            if (op->wnext != NULL) {
                op->wnext->wprev = op->wprev;
            }
            op->wprev = NULL;
            op->wnext = due;
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

static void unwait(struct op *op)
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
static void finish_closing(struct op *op, bool sent)
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
        text_put(r->error, sizeof r->error,
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
        int i = node_find_or_add(c, hint, hint_len);

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

static void on_answer(void *arg, int rv, bool sent, struct envelope_view *ans)
{
    struct op *op = arg;
    struct once_client *c = op->c;
    const char *addr = c->nodes[op->node].addr;
    struct once_result *r = &op->res;
    char who[ONCE_ADDR_MAX + 64];
    char err[CLIENT_ERR_SIZE];
    ProtobufCMessage *body = NULL;
    struct client_decision d;

    if (c->closing) {
        finish_closing(op, rv == 0 || sent);
        return;
    }
    res_reset(op);
    if (rv < 0) {
        d = client_decide(rv, sent, RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED);
        set_error(r,
                  rv == RPC_E_TIMEOUT ? ONCE_STATUS_DEADLINE_EXCEEDED
                  : sent              ? ONCE_STATUS_UNKNOWN
                                      : ONCE_STATUS_UNAVAILABLE,
                  sent ? ONCE_APPLIED_UNKNOWN : ONCE_APPLIED_FALSE, "%s: %s",
                  addr, rpc_conn_strerror(rv));
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
    describe_node(who, sizeof who, ans, addr);

    if (ans->has_cluster_id && c->pinned &&
        memcmp(ans->cluster_id, c->cluster_id, ONCE_ID_LEN) != 0) {
        char pinned[2 * ONCE_ID_LEN + 1];
        char answered[2 * ONCE_ID_LEN + 1];

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
        (void)snprintf(err, sizeof err, "answered OK without a cluster id");
    } else if (envelope_unpack_body(ans, &body, err) != 0 ||
               client_read_body(op->method, body, r, &op->out, err) != 0) {
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
    {
        struct once_origin origin = r->origin;

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
        finish_closing(op, false);
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

static void op_start(struct op *op, uint32_t timeout_ms)
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

/* Run @op to its end and move its result into @r. */
static int run_sync(struct op *op, uint32_t timeout_ms, struct once_result *r)
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
static bool sync_begin(once_client *c, struct once_result *r)
{
    once_result_clear(r);
    if (c == NULL) {
        fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, "client: NULL");
        return false;
    }
    if (c->closing || c->free_pending) {
        fail_local(r, ONCE_STATUS_UNAVAILABLE, "client is closing");
        return false;
    }
    return true;
}

static int take_request_id(struct op *op, const uint8_t *given)
{
    op->has_request_id = true;
    if (given != NULL) {
        memcpy(op->request_id, given, ONCE_ID_LEN);
        return 0;
    }
    return once_request_id_new(op->request_id);
}

/* ------------------------------------------------------------------------
 * Client
 * ---------------------------------------------------------------------- */

void once_options_init(struct once_options *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    o->max_inflight = DEFAULT_MAX_INFLIGHT;
}

int once_request_id_new(uint8_t out[ONCE_ID_LEN])
{
    return RAND_bytes(out, ONCE_ID_LEN) == 1 ? 0 : -1;
}

static void put_err(char *err, size_t errlen, const char *msg)
{
    if (err != NULL && errlen > 0) {
        (void)snprintf(err, errlen, "%s", msg);
    }
}

/* Close the channels and the loop of a client that has no op left. */
static void close_loop(struct once_client *c)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        rpc_channel_close(c->nodes[i].ch);
        c->nodes[i].ch = NULL;
    }
    uv_close((uv_handle_t *)&c->timer, NULL);
    uv_close((uv_handle_t *)&c->run_timer, NULL);
    (void)uv_run(&c->loop, UV_RUN_DEFAULT);
}

/* libuv writes with write(2): a write to a connection the peer has reset
 * raises SIGPIPE, whose default action kills the process. Ignore it, unless
 * the application chose a disposition of its own (then it is kept). */
static void ignore_sigpipe(void)
{
    struct sigaction sa;

    if (sigaction(SIGPIPE, NULL, &sa) != 0 || sa.sa_handler != SIG_DFL ||
        (sa.sa_flags & SA_SIGINFO) != 0) {
        return;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGPIPE, &sa, NULL);
}

int once_client_new(const struct once_options *o,
                    once_client **out,
                    char *err,
                    size_t errlen)
{
    struct once_client *c;
    char msg[CLIENT_ERR_SIZE];

    if (out == NULL) {
        put_err(err, errlen, "out: NULL");
        return -1;
    }
    *out = NULL;
    if (!client_check_options(o, msg)) {
        put_err(err, errlen, msg);
        return -1;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        put_err(err, errlen, "out of memory");
        return -1;
    }
    ignore_sigpipe();
    if (uv_loop_init(&c->loop) != 0) {
        free(c);
        put_err(err, errlen, "cannot make an event loop");
        return -1;
    }
    (void)uv_timer_init(&c->loop, &c->timer);
    (void)uv_timer_init(&c->loop, &c->run_timer);
    c->timer.data = c;
    c->run_timer.data = c;
    rpc_limits_default(&c->limits);
    c->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    c->max_inflight =
        o->max_inflight != 0 ? o->max_inflight : DEFAULT_MAX_INFLIGHT;
    c->pinned = o->pin_cluster_id;
    if (o->pin_cluster_id) {
        memcpy(c->cluster_id, o->cluster_id, ONCE_ID_LEN);
    }
    for (size_t i = 0; i < o->n_addrs; i++) {
        /* Checked above; duplicates are kept once. */
        if (node_find_or_add(c, o->addrs[i], strlen(o->addrs[i])) < 0) {
            close_loop(c);
            (void)uv_loop_close(&c->loop);
            free(c);
            put_err(err, errlen, "out of memory opening a channel");
            return -1;
        }
    }
    *out = c;
    return 0;
}

static void deliver(struct once_client *c)
{
    /* A callback that frees the client stops the others here; the free
     * itself happens once no callback is running (in once_run), and then
     * fails what is left. While closing, every callback runs. */
    while (c->done_head != NULL && (c->closing || !c->free_pending)) {
        struct op *op = c->done_head;

        c->done_head = op->dnext;
        if (c->done_head == NULL) {
            c->done_tail = NULL;
        }
        if (op->aprev != NULL) {
            op->aprev->anext = op->anext;
        } else {
            c->async_ops = op->anext;
        }
        if (op->anext != NULL) {
            op->anext->aprev = op->aprev;
        }
        /* Counted out first: the callback may submit the next call. */
        c->outstanding--;
        c->in_callback++;
        op->cb(op->arg, &op->res);
        c->in_callback--;
        op_free(op);
    }
}

static void client_free_now(once_client *c);

void once_client_free(once_client *c)
{
    if (c == NULL) {
        return;
    }
    if (c->in_callback > 0) {
        /* From inside a callback: the caller's once_run is still using
         * the client. It frees it on its way out. */
        c->free_pending = true;
        return;
    }
    client_free_now(c);
}

static void client_free_now(once_client *c)
{
    c->closing = true;
    /* Ops between attempts end here; ops in flight end as their channel
     * fails them (RPC_E_CLOSED, with their sent flag). */
    while (c->waiting != NULL) {
        struct op *op = c->waiting;

        unwait(op);
        finish_closing(op, false);
    }
    close_loop(c);
    deliver(c);
    (void)uv_loop_close(&c->loop);
    free(c);
}

bool once_client_cluster_id(const once_client *c, uint8_t out[ONCE_ID_LEN])
{
    if (c == NULL || !c->pinned) {
        return false;
    }
    memcpy(out, c->cluster_id, ONCE_ID_LEN);
    return true;
}

const char *once_client_last_error(const once_client *c)
{
    return c != NULL ? c->last_error : "client: NULL";
}

/* ------------------------------------------------------------------------
 * Calls
 * ---------------------------------------------------------------------- */

/* A write op with its request id (@rid, or fresh); NULL with @r filled. */
static struct op *write_op(once_client *c,
                           enum rpc_method method,
                           const uint8_t *rid,
                           struct once_result *r)
{
    struct op *op = op_new(c, method, true);

    if (op == NULL) {
        fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    if (take_request_id(op, rid) != 0) {
        op_free(op);
        fail_local(r, ONCE_STATUS_UNAVAILABLE,
                   "cannot make a request id (RAND_bytes failed)");
        return NULL;
    }
    return op;
}

/* Make a claim op (checked arguments); NULL with @r filled. */
static struct op *claim_op(once_client *c,
                           const struct once_claim *a,
                           struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct op *op;

    if (!client_check_claim(a, err)) {
        fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
        return NULL;
    }
    op = write_op(c, RPC_METHOD_CLAIM, a->request_id, r);
    if (op == NULL) {
        return NULL;
    }
    if (client_pack_claim(a, op->request_id, &op->body, &op->body_len) != 0) {
        op_free(op);
        fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    memcpy(op->res.request_id, op->request_id, ONCE_ID_LEN);
    return op;
}

int once_claim(once_client *c,
               const struct once_claim *a,
               struct once_result *r)
{
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    op = claim_op(c, a, r);
    if (op == NULL) {
        return r->status;
    }
    return run_sync(op, a->timeout_ms, r);
}

int once_complete(once_client *c,
                  const struct once_complete *a,
                  struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_complete(a, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    op = write_op(c, RPC_METHOD_COMPLETE, a->request_id, r);
    if (op == NULL) {
        return r->status;
    }
    if (client_pack_complete(a, op->request_id, &op->body, &op->body_len) !=
        0) {
        op_free(op);
        return fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    return run_sync(op, a->timeout_ms, r);
}

int once_release(once_client *c,
                 const struct once_release *a,
                 struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_release(a, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    op = write_op(c, RPC_METHOD_RELEASE, a->request_id, r);
    if (op == NULL) {
        return r->status;
    }
    if (client_pack_release(a, op->request_id, &op->body, &op->body_len) != 0) {
        op_free(op);
        return fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    return run_sync(op, a->timeout_ms, r);
}

static int record_call(once_client *c,
                       enum rpc_method method,
                       const uint8_t *scope,
                       size_t scope_len,
                       const uint8_t *key,
                       size_t key_len,
                       uint32_t timeout_ms,
                       struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_record(scope, scope_len, key, key_len, err) ||
        !client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    /* Forget deletes: a write. Lookup only reads. */
    op = op_new(c, method, method == RPC_METHOD_FORGET);
    if (op == NULL || client_pack_record(method, scope, scope_len, key, key_len,
                                         &op->body, &op->body_len) != 0) {
        if (op != NULL) {
            op_free(op);
        }
        return fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    return run_sync(op, timeout_ms, r);
}

int once_lookup(once_client *c,
                const uint8_t *scope,
                size_t scope_len,
                const uint8_t *key,
                size_t key_len,
                uint32_t timeout_ms,
                struct once_result *r)
{
    return record_call(c, RPC_METHOD_LOOKUP, scope, scope_len, key, key_len,
                       timeout_ms, r);
}

int once_forget(once_client *c,
                const uint8_t *scope,
                size_t scope_len,
                const uint8_t *key,
                size_t key_len,
                uint32_t timeout_ms,
                struct once_result *r)
{
    return record_call(c, RPC_METHOD_FORGET, scope, scope_len, key, key_len,
                       timeout_ms, r);
}

/* ------------------------------------------------------------------------
 * Asynchronous calls
 * ---------------------------------------------------------------------- */

int once_claim_async(once_client *c,
                     const struct once_claim *a,
                     once_cb cb,
                     void *arg)
{
    struct once_result r;
    struct op *op;

    if (c == NULL) {
        return -1;
    }
    if (cb == NULL) {
        (void)snprintf(c->last_error, sizeof c->last_error, "cb: NULL");
        return -1;
    }
    if (c->closing || c->free_pending) {
        (void)snprintf(c->last_error, sizeof c->last_error,
                       "client is closing");
        return -1;
    }
    if (c->outstanding >= c->max_inflight) {
        (void)snprintf(c->last_error, sizeof c->last_error,
                       "max_inflight: %u calls already outstanding",
                       c->max_inflight);
        return -1;
    }
    once_result_init(&r);
    op = claim_op(c, a, &r);
    if (op == NULL) {
        text_put(c->last_error, sizeof c->last_error, "%s", r.error);
        once_result_clear(&r);
        return -1;
    }
    op->async = true;
    op->cb = cb;
    op->arg = arg;
    op->aprev = NULL;
    op->anext = c->async_ops;
    if (c->async_ops != NULL) {
        c->async_ops->aprev = op;
    }
    c->async_ops = op;
    c->outstanding++;
    op_start(op, a->timeout_ms);
    return 0;
}

static void on_run_timer(uv_timer_t *t)
{
    /* Only wakes uv_run: once_run compares the time itself (a nested
     * once_run, from a callback, restarts the timer for its own end). */
    (void)t;
}

/* Free a client whose free was asked for from a callback; true if so. */
static bool free_if_pending(once_client *c)
{
    if (c->free_pending && c->in_callback == 0) {
        client_free_now(c);
        return true;
    }
    return false;
}

int once_run(once_client *c, int timeout_ms)
{
    uint64_t end = 0;

    if (c == NULL || c->closing) {
        return 0;
    }
    deliver(c);
    if (free_if_pending(c)) {
        return 0;
    }
    if (timeout_ms == 0) {
        (void)uv_run(&c->loop, UV_RUN_NOWAIT);
        deliver(c);
        return free_if_pending(c) ? 0 : (int)c->outstanding;
    }
    uv_update_time(&c->loop);
    if (timeout_ms > 0) {
        end = uv_now(&c->loop) + (uint64_t)timeout_ms;
    }
    while (c->outstanding > 0 && !c->free_pending) {
        uint64_t now = uv_now(&c->loop);

        if (timeout_ms > 0) {
            if (now >= end) {
                break;
            }
            (void)uv_timer_start(&c->run_timer, on_run_timer, end - now, 0);
        }
        /* Every outstanding op has a deadline, so a timer is active and
         * uv_run returns. */
        (void)uv_run(&c->loop, UV_RUN_ONCE);
        deliver(c);
    }
    (void)uv_timer_stop(&c->run_timer);
    return free_if_pending(c) ? 0 : (int)c->outstanding;
}

/* ------------------------------------------------------------------------
 * Admin
 * ---------------------------------------------------------------------- */

/* An admin op with an optional body already packed. */
static int admin_call(once_client *c,
                      enum rpc_method method,
                      bool write,
                      int (*packer)(struct op *op, const void *arg),
                      const void *arg,
                      const struct client_outputs *out,
                      uint32_t timeout_ms,
                      struct once_result *r)
{
    struct op *op = op_new(c, method, write);

    if (op == NULL || (packer != NULL && packer(op, arg) != 0)) {
        if (op != NULL) {
            op_free(op);
        }
        return fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (out != NULL) {
        op->out = *out;
    }
    return run_sync(op, timeout_ms, r);
}

static int status_call(once_client *c,
                       const char *addr,
                       uint32_t timeout_ms,
                       bool digest,
                       struct once_status_info *out,
                       struct once_result *r);

int once_status(once_client *c,
                const char *addr,
                uint32_t timeout_ms,
                struct once_status_info *out,
                struct once_result *r)
{
    return status_call(c, addr, timeout_ms, false, out, r);
}

int once_status_digest(once_client *c,
                       const char *addr,
                       uint32_t timeout_ms,
                       struct once_status_info *out,
                       struct once_result *r)
{
    return status_call(c, addr, timeout_ms, true, out, r);
}

static int status_call(once_client *c,
                       const char *addr,
                       uint32_t timeout_ms,
                       bool digest,
                       struct once_status_info *out,
                       struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct client_outputs o = {0};
    struct op *op;
    size_t node = 0;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (out == NULL) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, "out: NULL");
    }
    memset(out, 0, sizeof *out);
    if (!client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    if (addr != NULL) {
        size_t len = strnlen(addr, ONCE_ADDR_MAX + 1);

        for (node = 0; node < c->n_nodes; node++) {
            if (len <= ONCE_ADDR_MAX &&
                strcmp(c->nodes[node].addr, addr) == 0) {
                break;
            }
        }
        if (node == c->n_nodes) {
            return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                              "addr: not one of the client's addresses");
        }
    }
    op = op_new(c, RPC_METHOD_STATUS, false);
    if (op == NULL ||
        (digest && client_pack_status(true, &op->body, &op->body_len) != 0)) {
        if (op != NULL) {
            op_free(op);
        }
        return fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    op->no_hint = true;
    if (addr != NULL) {
        op->one_node = true;
        op->node = node;
    }
    o.status = out;
    op->out = o;
    return run_sync(op, timeout_ms, r);
}

int once_members_list(once_client *c,
                      uint32_t timeout_ms,
                      struct once_member *out,
                      size_t *n_out,
                      struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct client_outputs o = {0};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (out == NULL || n_out == NULL) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                          out == NULL ? "out: NULL" : "n_out: NULL");
    }
    *n_out = 0;
    if (!client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    o.members = out;
    o.n_members = n_out;
    return admin_call(c, RPC_METHOD_MEMBERS_LIST, false, NULL, NULL, &o,
                      timeout_ms, r);
}

static int pack_member_add(struct op *op, const void *arg)
{
    return client_pack_member_add(arg, &op->body, &op->body_len);
}

int once_members_add(once_client *c,
                     const struct once_member *m,
                     uint32_t timeout_ms,
                     struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_member(m, err) ||
        !client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    return admin_call(c, RPC_METHOD_MEMBERS_ADD, true, pack_member_add, m, NULL,
                      timeout_ms, r);
}

struct id_args
{
    enum rpc_method method;
    uint64_t id;
    enum once_role role;
};

static int pack_id(struct op *op, const void *arg)
{
    const struct id_args *a = arg;

    return client_pack_id(a->method, a->id, a->role, &op->body, &op->body_len);
}

int once_members_remove(once_client *c,
                        uint64_t id,
                        uint32_t timeout_ms,
                        struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct id_args a = {RPC_METHOD_MEMBERS_REMOVE, id, ONCE_ROLE_NONE};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (id == 0) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, "id: must not be 0");
    }
    if (!client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    return admin_call(c, a.method, true, pack_id, &a, NULL, timeout_ms, r);
}

int once_members_assign(once_client *c,
                        uint64_t id,
                        enum once_role role,
                        uint32_t timeout_ms,
                        struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct id_args a = {RPC_METHOD_MEMBERS_ASSIGN, id, role};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (id == 0) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, "id: must not be 0");
    }
    if (!client_check_role(role, err) ||
        !client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    return admin_call(c, a.method, true, pack_id, &a, NULL, timeout_ms, r);
}

int once_transfer(once_client *c,
                  uint64_t id,
                  uint32_t timeout_ms,
                  uint64_t *new_leader,
                  struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct id_args a = {RPC_METHOD_TRANSFER, id, ONCE_ROLE_NONE};
    struct client_outputs o = {0};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (new_leader != NULL) {
        *new_leader = 0;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    o.u64_a = new_leader;
    return admin_call(c, a.method, true, pack_id, &a, &o, timeout_ms, r);
}

int once_snapshot_take(once_client *c,
                       uint32_t timeout_ms,
                       uint64_t *index,
                       uint64_t *size_bytes,
                       struct once_result *r)
{
    char err[CLIENT_ERR_SIZE];
    struct client_outputs o = {0};

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (index != NULL) {
        *index = 0;
    }
    if (size_bytes != NULL) {
        *size_bytes = 0;
    }
    if (!sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_timeout(timeout_ms, err)) {
        return fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    o.u64_a = index;
    o.u64_b = size_bytes;
    return admin_call(c, RPC_METHOD_SNAPSHOT_TAKE, true, NULL, NULL, &o,
                      timeout_ms, r);
}
