/* client/batch.c: once_claim_batch and its asynchronous form (once.h).
 *
 * A batch call is rounds of ClaimBatch ops (op.c) under one deadline. The
 * first round sends every item; each item is packed once, with its request
 * id, so every later round repeats it byte for byte. A round's op is an
 * ordinary write op with request ids: the op engine retries a call-level
 * failure (no leader, a lost connection, an unknown outcome) on other
 * nodes until the deadline, sending the same items. When a round is
 * answered, each item's result is final unless the item alone was refused
 * "not now" (UNAVAILABLE, RESOURCE_EXHAUSTED) or its outcome is unknown
 * (client_decide); those items, only, go into the next round after a
 * backoff. An item that may have applied in any round stays applied
 * UNKNOWN whatever a later round says of it (as op.c does for one call).
 *
 * Ownership: the batch owns its packed items and, for the asynchronous
 * form, its results (what they own freed after the callback); the synchronous
 * form fills the caller's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "client/client_int.h"
#include "common/pbwire.h"
#include "rpc/frame.h"

/* ClaimBatchRequest.items (once_rpc.proto). */
#define REQUEST_ITEMS 1u

_Static_assert(ONCE_BATCH_MAX == RPC_CLAIM_BATCH_MAX,
               "once.h's batch bound is the wire's");
_Static_assert(ONCE_BATCH_BYTES_MAX == RPC_CLAIM_BATCH_BYTES_MAX,
               "once.h's batch byte bound is the wire's");

struct batch
{
    once_client *c;
    size_t n;
    struct once_result *rs; /* [n] */
    bool own_rs;            /* the async form's */
    uint8_t **item;         /* [n] packed ClaimRequests */
    size_t *item_len;       /* [n] */
    uint8_t (*rid)[ONCE_ID_LEN];
    bool *maybe;  /* [n] some round may have applied the item */
    size_t *idx;  /* the current round's items */
    size_t n_idx; /* how many */
    uint64_t deadline;
    unsigned backoff_ms;
    struct client_batch_out out;
    once_batch_cb cb;
    void *arg;
};

static void batch_free(struct batch *b)
{
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (b->item != NULL) {
            free(b->item[i]);
        }
        if (b->own_rs && b->rs != NULL) {
            /* What once_result_clear frees, without zeroing ~3.4 KiB that
             * is freed next. */
            free(b->rs[i].result);
        }
    }
    if (b->own_rs) {
        free(b->rs);
    }
    free(b->item);
    free(b->item_len);
    free(b->rid);
    free(b->maybe);
    free(b->idx);
    free(b);
}

/* True if some item of @items[0..@n) has no request id of the caller's. */
static bool batch_needs_ids(const struct once_claim *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (items[i].request_id == NULL) {
            return true;
        }
    }
    return false;
}

/* The batch of @n checked, packed items; NULL with @err (and *@status). */
static struct batch *batch_new(once_client *c,
                               const struct once_claim *items,
                               size_t n,
                               struct once_result *rs,
                               enum once_status *status,
                               char *err)
{
    struct batch *b = calloc(1, sizeof *b);
    size_t bytes = 0;

    *status = ONCE_STATUS_RESOURCE_EXHAUSTED;
    err_printf(err, "out of memory");
    if (b == NULL) {
        return NULL;
    }
    b->c = c;
    b->n = n;
    b->own_rs = rs == NULL;
    /* Not calloc: a once_result is ~3.4 KiB, and zeroing 256 of them was
     * a quarter of the client's instructions per item (callgrind,
     * once-bench --batch 256). Every path that writes a result clears it
     * first (read_batch_item, client_fail_local, round_end), so only what
     * that clear frees must be valid before. */
    b->rs = rs != NULL ? rs : malloc(n * sizeof *b->rs);
    b->item = calloc(n, sizeof *b->item);
    b->item_len = calloc(n, sizeof *b->item_len);
    b->rid = calloc(n, sizeof *b->rid);
    b->maybe = calloc(n, sizeof *b->maybe);
    b->idx = calloc(n, sizeof *b->idx);
    if (b->own_rs && b->rs != NULL) {
        for (size_t i = 0; i < n; i++) {
            b->rs[i].result = NULL;
        }
    }
    if (b->rs == NULL || b->item == NULL || b->item_len == NULL ||
        b->rid == NULL || b->maybe == NULL || b->idx == NULL) {
        batch_free(b);
        return NULL;
    }
    /* Every item's fresh request id from one RAND_bytes call: OpenSSL's
     * per-call cost (its DRBG's parameter lookups, a getpid) was the
     * largest part of packing a batch of 256 (perf, once-bench --batch
     * 256), and 16 * n bytes at once are as random as n draws. The
     * caller's ids overwrite theirs below. */
    if (batch_needs_ids(items, n) &&
        RAND_bytes(b->rid[0], (int)(n * ONCE_ID_LEN)) != 1) {
        *status = ONCE_STATUS_UNAVAILABLE;
        err_printf(err, "cannot make a request id (RAND_bytes failed)");
        batch_free(b);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        char why[ERR_MSG_SIZE];

        if (!client_check_claim(&items[i], why)) {
            *status = ONCE_STATUS_INVALID_ARGUMENT;
            err_printf(err, "items[%zu]: %s", i, why);
            batch_free(b);
            return NULL;
        }
        if (items[i].request_id != NULL) {
            memcpy(b->rid[i], items[i].request_id, ONCE_ID_LEN);
        }
        if (client_pack_claim(&items[i], b->rid[i], &b->item[i],
                              &b->item_len[i]) != 0) {
            batch_free(b);
            return NULL;
        }
        bytes += pbw_size_len_req(REQUEST_ITEMS, b->item_len[i]);
        b->idx[i] = i;
    }
    if (bytes > ONCE_BATCH_BYTES_MAX) {
        *status = ONCE_STATUS_INVALID_ARGUMENT;
        err_printf(err, "items: %zu bytes encoded, at most %d", bytes,
                   ONCE_BATCH_BYTES_MAX);
        batch_free(b);
        return NULL;
    }
    b->n_idx = n;
    return b;
}

/* The argument checks every batch call makes; false: @err says why. */
static bool batch_args_ok(const struct once_claim *items, size_t n, char *err)
{
    if (items == NULL || n < 1 || n > ONCE_BATCH_MAX) {
        err_printf(err, "items: 1..%d claims, got %zu%s", ONCE_BATCH_MAX, n,
                   items == NULL ? " (NULL)" : "");
        return false;
    }
    return true;
}

/* The op of the next round: the items of b->idx, in order; NULL if out of
 * memory. */
static struct op *round_op(struct batch *b)
{
    struct op *op = op_new(b->c, RPC_METHOD_CLAIM_BATCH, true);
    size_t len = 0;
    uint8_t *p;

    if (op == NULL) {
        return NULL;
    }
    for (size_t k = 0; k < b->n_idx; k++) {
        size_t i = b->idx[k];

        len += pbw_size_len_req(REQUEST_ITEMS, b->item_len[i]);
    }
    op->body = malloc(len);
    if (op->body == NULL) {
        op_free(op);
        return NULL;
    }
    p = op->body;
    for (size_t k = 0; k < b->n_idx; k++) {
        size_t i = b->idx[k];

        p = pbw_put_len_req(p, REQUEST_ITEMS, b->item[i], b->item_len[i]);
    }
    op->body_len = (size_t)(p - op->body);
    /* Every item carries its request id: retrying the round is safe. */
    op->has_request_id = true;
    memcpy(op->request_id, b->rid[b->idx[0]], ONCE_ID_LEN);
    b->out.rs = b->rs;
    b->out.idx = b->idx;
    b->out.n = b->n_idx;
    op->out.batch = &b->out;
    return op;
}

/* Item @i's final result: the rule of "once unknown, stays unknown". */
static void item_final(struct batch *b, size_t i)
{
    struct once_result *r = &b->rs[i];

    memcpy(r->request_id, b->rid[i], ONCE_ID_LEN);
    if (r->status != ONCE_STATUS_OK && b->maybe[i]) {
        r->applied = ONCE_APPLIED_UNKNOWN;
    }
}

/* After a round's op ended with @res: the items left for another round
 * (b->idx, b->n_idx) and the delay before it; -1: the batch is done. */
static int64_t round_end(struct batch *b, const struct once_result *res)
{
    once_client *c = b->c;
    size_t left = 0;
    uint64_t now;

    for (size_t k = 0; k < b->n_idx; k++) {
        size_t i = b->idx[k];
        struct once_result *r = &b->rs[i];

        if (res->status != ONCE_STATUS_OK) {
            /* The call's own failure is each of its items'. */
            once_result_clear(r);
            r->status = res->status;
            r->applied = res->applied;
            memcpy(r->error, res->error, sizeof r->error);
            memcpy(r->leader_hint, res->leader_hint, sizeof r->leader_hint);
            r->origin = res->origin;
            if (res->applied == ONCE_APPLIED_UNKNOWN) {
                b->maybe[i] = true;
            }
            item_final(b, i);
            continue;
        }
        r->origin = res->origin;
        if (r->status != ONCE_STATUS_OK) {
            struct client_decision d = client_decide(
                0, true, (enum rpc_status)r->status,
                r->applied == ONCE_APPLIED_UNKNOWN ? RPC_APPLIED_UNKNOWN
                                                   : RPC_APPLIED_FALSE);

            if (d.maybe_applied) {
                b->maybe[i] = true;
            }
            if (!d.final) {
                b->idx[left++] = i;
                continue;
            }
        }
        item_final(b, i);
    }
    b->n_idx = left;
    if (left == 0 || c->closing || c->free_pending) {
        for (size_t k = 0; k < left; k++) {
            item_final(b, b->idx[k]);
        }
        b->n_idx = 0;
        return -1;
    }
    b->backoff_ms = client_backoff_next(b->backoff_ms);
    uv_update_time(&c->loop);
    now = uv_now(&c->loop);
    if (now + b->backoff_ms + CLIENT_BACKOFF_FIRST_MS >= b->deadline) {
        /* No time for another round: the items keep this round's error. */
        for (size_t k = 0; k < left; k++) {
            item_final(b, b->idx[k]);
        }
        b->n_idx = 0;
        return -1;
    }
    return (int64_t)b->backoff_ms;
}

/* The batch's status: OK if every item got a decision, else the first
 * other item's. */
static int batch_status(const struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        if (b->rs[i].status != ONCE_STATUS_OK) {
            return b->rs[i].status;
        }
    }
    return ONCE_STATUS_OK;
}

static uint32_t remaining(struct batch *b)
{
    uint64_t now;

    uv_update_time(&b->c->loop);
    now = uv_now(&b->c->loop);
    return b->deadline > now ? (uint32_t)(b->deadline - now) : 1;
}

/* The items left, failed without a round (out of memory). */
static void fail_left(struct batch *b, enum once_status st, const char *msg)
{
    for (size_t k = 0; k < b->n_idx; k++) {
        size_t i = b->idx[k];

        client_fail_local(&b->rs[i], st, msg);
        item_final(b, i);
    }
    b->n_idx = 0;
}

static void start_deadline(struct batch *b, uint32_t timeout_ms)
{
    once_client *c = b->c;

    uv_update_time(&c->loop);
    b->deadline =
        uv_now(&c->loop) + (timeout_ms != 0 ? timeout_ms : c->timeout_ms);
}

int once_claim_batch(once_client *c,
                     const struct once_claim *items,
                     size_t n,
                     uint32_t timeout_ms,
                     struct once_result *rs)
{
    char err[ERR_MSG_SIZE];
    /* A bad timeout's status; batch_new sets its own when it fails. */
    enum once_status st = ONCE_STATUS_INVALID_ARGUMENT;
    struct batch *b;
    int64_t delay = 0;
    int status;

    if (rs == NULL || !batch_args_ok(items, n, err)) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if (!client_sync_begin(c, &rs[i])) {
            return rs[i].status;
        }
    }
    if (!client_check_timeout(timeout_ms, err) ||
        (b = batch_new(c, items, n, rs, &st, err)) == NULL) {
        for (size_t i = 0; i < n; i++) {
            client_fail_local(&rs[i], st, err);
        }
        return st;
    }
    start_deadline(b, timeout_ms);
    while (b->n_idx > 0) {
        struct op *op = round_op(b);

        if (op == NULL) {
            fail_left(b, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            break;
        }
        op_start_after(op, remaining(b), (uint64_t)delay);
        while (!op->done) {
            if (uv_run(&c->loop, UV_RUN_ONCE) == 0 && !op->done) {
                /* UNTESTED: an op in flight or waiting keeps a timer. */
                client_fail_local(&op->res, ONCE_STATUS_UNKNOWN,
                                  "internal error: the client loop stopped");
                op->res.applied = ONCE_APPLIED_UNKNOWN;
                break;
            }
        }
        delay = round_end(b, &op->res);
        op_free(op);
        if (delay < 0) {
            break;
        }
    }
    status = batch_status(b);
    batch_free(b);
    return status;
}

static void on_round(void *arg, struct once_result *r);

/* Register @op as an async call of @c for @b's next round. */
static void async_start(struct batch *b, struct op *op, uint64_t delay)
{
    once_client *c = b->c;

    client_async_link(c, op, on_round, b);
    op_start_after(op, remaining(b), delay);
}

static void batch_deliver(struct batch *b)
{
    b->cb(b->arg, batch_status(b), b->rs, b->n);
    batch_free(b);
}

static void on_round(void *arg, struct once_result *r)
{
    struct batch *b = arg;
    int64_t delay = round_end(b, r);
    struct op *op;

    if (delay < 0) {
        batch_deliver(b);
        return;
    }
    op = round_op(b);
    if (op == NULL) {
        fail_left(b, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        batch_deliver(b);
        return;
    }
    async_start(b, op, (uint64_t)delay);
}

int once_claim_batch_async(once_client *c,
                           const struct once_claim *items,
                           size_t n,
                           uint32_t timeout_ms,
                           once_batch_cb cb,
                           void *arg)
{
    char err[ERR_MSG_SIZE];
    enum once_status st;
    struct batch *b;
    struct op *op;
    int rv;

    if (c == NULL) {
        return -EINVAL;
    }
    if (cb == NULL || !batch_args_ok(items, n, err) ||
        !client_check_timeout(timeout_ms, err)) {
        client_text_put(c->last_error, sizeof c->last_error, "%s",
                        cb == NULL ? "cb: NULL" : err);
        return -EINVAL;
    }
    rv = client_async_admit(c);
    if (rv != 0) {
        return rv;
    }
    b = batch_new(c, items, n, NULL, &st, err);
    if (b == NULL) {
        client_text_put(c->last_error, sizeof c->last_error, "%s", err);
        return st == ONCE_STATUS_INVALID_ARGUMENT ? -EINVAL
               : st == ONCE_STATUS_UNAVAILABLE    ? -EIO
                                                  : -ENOMEM;
    }
    b->cb = cb;
    b->arg = arg;
    op = round_op(b);
    if (op == NULL) {
        batch_free(b);
        err_printf(c->last_error, "out of memory");
        return -ENOMEM;
    }
    start_deadline(b, timeout_ms);
    async_start(b, op, 0);
    return 0;
}
