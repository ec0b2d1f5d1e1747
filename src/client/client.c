/* client/client.c: libonce (include/once.h) over rpc_channel on a private
 * libuv loop: the client's lifetime (options, channels, the loop, its
 * close, also from inside a callback), the data calls (claim, complete,
 * release, lookup, forget), asynchronous claims and once_run. Each call is
 * an op run by op.c; the admin calls are admin.c's (client_int.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

#include "client/client_int.h"

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

/* ------------------------------------------------------------------------
 * Client
 * ---------------------------------------------------------------------- */

void once_options_init(struct once_options *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    o->max_inflight = DEFAULT_MAX_INFLIGHT;
}

/* Request ids come from a per-thread buffer of RAND_bytes output, filled
 * ID_POOL_IDS ids at a time: one RAND_bytes call costs ~7,000 instructions
 * whatever its length up to a few KiB (its DRBG sets up a cipher per call),
 * which was a quarter of libonce's CPU per claim (callgrind, once-bench
 * --pipeline 128). The bytes are the same generator's; only the call is
 * amortised. Ids must never repeat across processes (a repeat reads as a
 * retry of another call), so a fork discards every buffer: the child
 * handler bumps id_pool_gen and a buffer filled under another generation
 * is refilled before use, as OpenSSL reseeds its own DRBG after a fork. */
#define ID_POOL_IDS 128u

struct id_pool
{
    unsigned gen;  /* id_pool_gen when filled */
    unsigned used; /* ids taken, 0..ID_POOL_IDS */
    uint8_t bytes[ID_POOL_IDS * ONCE_ID_LEN];
};

static _Thread_local struct id_pool id_pool; /* used == 0: empty */
static atomic_uint id_pool_gen = 1;
static pthread_once_t id_pool_once = PTHREAD_ONCE_INIT;

static void id_pool_forked(void)
{
    atomic_fetch_add(&id_pool_gen, 1);
}

static void id_pool_register(void)
{
    /* If registration fails (ENOMEM), ids are drawn one by one. */
    if (pthread_atfork(NULL, NULL, id_pool_forked) != 0) {
        atomic_store(&id_pool_gen, 0);
    }
}

int once_request_id_new(uint8_t out[ONCE_ID_LEN])
{
    struct id_pool *p = &id_pool;
    unsigned gen;

    (void)pthread_once(&id_pool_once, id_pool_register);
    gen = atomic_load_explicit(&id_pool_gen, memory_order_relaxed);
    if (gen == 0) {
        /* RAND_bytes fails only when the generator cannot be seeded. */
        return RAND_bytes(out, ONCE_ID_LEN) == 1 ? 0 : -EIO;
    }
    if (p->gen != gen || p->used == 0 || p->used == ID_POOL_IDS) {
        if (RAND_bytes(p->bytes, (int)sizeof p->bytes) != 1) {
            p->used = 0;
            return -EIO;
        }
        p->gen = gen;
        p->used = 0;
    }
    memcpy(out, p->bytes + (size_t)p->used * ONCE_ID_LEN, ONCE_ID_LEN);
    /* Not kept after use: an id is handed out once. */
    memset(p->bytes + (size_t)p->used * ONCE_ID_LEN, 0, ONCE_ID_LEN);
    p->used++;
    return 0;
}

/* The TLS context of @o's files, or none without tls_ca. 0, or -EINVAL
 * (bad options: the files refused) with @msg (ERR_MSG_SIZE) naming the
 * file. */
static int client_tls_init(struct once_client *c,
                           const struct once_options *o,
                           char *msg)
{
    struct tls_files f = {o->tls_cert, o->tls_key, o->tls_ca, NULL};
    SSL_CTX *ctx = NULL;

    if (o->tls_ca == NULL) {
        if (o->tls_cert != NULL || o->tls_key != NULL) {
            err_printf(msg, "tls_cert/tls_key: need tls_ca too");
            return -EINVAL;
        }
        return 0;
    }
    if (tls_ctx_client(&ctx, &f, msg) != 0) {
        err_wrapf(msg, "TLS");
        return -EINVAL;
    }
    tls_slot_set(&c->tls, ctx);
    return 0;
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
    char msg[ERR_MSG_SIZE];
    int rv;

    if (out == NULL) {
        put_err(err, errlen, "out: NULL");
        return -EINVAL;
    }
    *out = NULL;
    if (!client_check_options(o, msg)) {
        put_err(err, errlen, msg);
        return -EINVAL;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        put_err(err, errlen, "out of memory");
        return -ENOMEM;
    }
    ignore_sigpipe();
    rv = uv_loop_init(&c->loop);
    if (rv != 0) {
        free(c);
        put_err(err, errlen, "cannot make an event loop");
        return rv; /* a negated errno, as libuv's codes are on Unix */
    }
    (void)uv_timer_init(&c->loop, &c->timer);
    (void)uv_timer_init(&c->loop, &c->run_timer);
    c->timer.data = c;
    c->run_timer.data = c;
    rpc_limits_default(&c->limits);
    c->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    c->max_inflight =
        o->max_inflight != 0 ? o->max_inflight : DEFAULT_MAX_INFLIGHT;
    rv = client_tls_init(c, o, msg);
    if (rv != 0) {
        close_loop(c);
        (void)uv_loop_close(&c->loop);
        free(c);
        put_err(err, errlen, msg);
        return rv;
    }
    c->pinned = o->pin_cluster_id;
    if (o->pin_cluster_id) {
        memcpy(c->cluster_id, o->cluster_id, ONCE_ID_LEN);
    }
    for (size_t i = 0; i < o->n_addrs; i++) {
        /* Checked above; duplicates are kept once. */
        if (client_node_find_or_add(c, o->addrs[i], strlen(o->addrs[i])) < 0) {
            close_loop(c);
            (void)uv_loop_close(&c->loop);
            tls_slot_set(&c->tls, NULL);
            free(c);
            put_err(err, errlen, "out of memory opening a channel");
            return -ENOMEM;
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

        op_unwait(op);
        op_finish_closing(op, false);
    }
    close_loop(c);
    deliver(c);
    (void)uv_loop_close(&c->loop);
    tls_slot_set(&c->tls, NULL);
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
        client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    if (op_take_request_id(op, rid) != 0) {
        op_free(op);
        client_fail_local(r, ONCE_STATUS_UNAVAILABLE,
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
    char err[ERR_MSG_SIZE];
    struct op *op;

    if (!client_check_claim(a, err)) {
        client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
        return NULL;
    }
    op = write_op(c, RPC_METHOD_CLAIM, a->request_id, r);
    if (op == NULL) {
        return NULL;
    }
    if (client_pack_claim(a, op->request_id, &op->body, &op->body_len) != 0) {
        op_free(op);
        client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
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
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    op = claim_op(c, a, r);
    if (op == NULL) {
        return r->status;
    }
    return op_run_sync(op, a->timeout_ms, r);
}

int once_complete(once_client *c,
                  const struct once_complete *a,
                  struct once_result *r)
{
    char err[ERR_MSG_SIZE];
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_complete(a, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    op = write_op(c, RPC_METHOD_COMPLETE, a->request_id, r);
    if (op == NULL) {
        return r->status;
    }
    if (client_pack_complete(a, op->request_id, &op->body, &op->body_len) !=
        0) {
        op_free(op);
        return client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED,
                                 "out of memory");
    }
    return op_run_sync(op, a->timeout_ms, r);
}

int once_release(once_client *c,
                 const struct once_release *a,
                 struct once_result *r)
{
    char err[ERR_MSG_SIZE];
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_release(a, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    op = write_op(c, RPC_METHOD_RELEASE, a->request_id, r);
    if (op == NULL) {
        return r->status;
    }
    if (client_pack_release(a, op->request_id, &op->body, &op->body_len) != 0) {
        op_free(op);
        return client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED,
                                 "out of memory");
    }
    return op_run_sync(op, a->timeout_ms, r);
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
    char err[ERR_MSG_SIZE];
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    if (!client_check_record(scope, scope_len, key, key_len, err) ||
        !client_check_timeout(timeout_ms, err)) {
        return client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
    }
    /* Forget deletes: a write. Lookup only reads. */
    op = op_new(c, method, method == RPC_METHOD_FORGET);
    if (op == NULL || client_pack_record(method, scope, scope_len, key, key_len,
                                         &op->body, &op->body_len) != 0) {
        if (op != NULL) {
            op_free(op);
        }
        return client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED,
                                 "out of memory");
    }
    return op_run_sync(op, timeout_ms, r);
}

int once_lookup(once_client *c,
                const uint8_t *scope,
                size_t scope_len,
                const uint8_t *key,
                size_t key_len,
                uint32_t timeout_ms,
                struct once_result *r)
{
    return once_lookup_flags(c, scope, scope_len, key, key_len, 0, timeout_ms,
                             r);
}

/* A lookup's op, or NULL with @r failed (a bad argument, out of memory). */
static struct op *lookup_op(once_client *c,
                            const uint8_t *scope,
                            size_t scope_len,
                            const uint8_t *key,
                            size_t key_len,
                            unsigned flags,
                            uint32_t timeout_ms,
                            struct once_result *r)
{
    char err[ERR_MSG_SIZE];
    struct op *op;

    if (!client_check_record(scope, scope_len, key, key_len, err) ||
        !client_check_timeout(timeout_ms, err)) {
        client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT, err);
        return NULL;
    }
    if ((flags & ~ONCE_LOOKUP_LEADER) != 0) {
        client_fail_local(r, ONCE_STATUS_INVALID_ARGUMENT,
                          "flags: unknown bits");
        return NULL;
    }
    op = op_new(c, RPC_METHOD_LOOKUP, false); /* a read: never "unknown" */
    if (op == NULL || client_pack_lookup(scope, scope_len, key, key_len,
                                         (flags & ONCE_LOOKUP_LEADER) != 0,
                                         &op->body, &op->body_len) != 0) {
        if (op != NULL) {
            op_free(op);
        }
        client_fail_local(r, ONCE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    return op;
}

int once_lookup_flags(once_client *c,
                      const uint8_t *scope,
                      size_t scope_len,
                      const uint8_t *key,
                      size_t key_len,
                      unsigned flags,
                      uint32_t timeout_ms,
                      struct once_result *r)
{
    struct op *op;

    if (r == NULL) {
        return ONCE_STATUS_INVALID_ARGUMENT;
    }
    if (!client_sync_begin(c, r)) {
        return r->status;
    }
    op = lookup_op(c, scope, scope_len, key, key_len, flags, timeout_ms, r);
    if (op == NULL) {
        return r->status;
    }
    return op_run_sync(op, timeout_ms, r);
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

int client_async_admit(once_client *c)
{
    if (c->closing || c->free_pending) {
        err_printf(c->last_error, "client is closing");
        return -ESHUTDOWN;
    }
    if (c->outstanding >= c->max_inflight) {
        err_printf(c->last_error, "max_inflight: %u calls already outstanding",
                   c->max_inflight);
        return -EBUSY;
    }
    return 0;
}

void client_async_link(once_client *c, struct op *op, once_cb cb, void *arg)
{
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
}

int once_claim_async(once_client *c,
                     const struct once_claim *a,
                     once_cb cb,
                     void *arg)
{
    struct once_result r;
    struct op *op;
    int rv;

    if (c == NULL) {
        return -EINVAL;
    }
    if (cb == NULL) {
        err_printf(c->last_error, "cb: NULL");
        return -EINVAL;
    }
    rv = client_async_admit(c);
    if (rv != 0) {
        return rv;
    }
    /* @r is filled only if claim_op fails, by client_fail_local, which
     * clears it first (frees r.result): zeroing all ~3.4 KiB of it for
     * every claim bought nothing. */
    r.result = NULL;
    op = claim_op(c, a, &r);
    if (op == NULL) {
        /* claim_op's statuses: a refused argument, out of memory, or no
         * request id (RAND_bytes). */
        rv = r.status == ONCE_STATUS_RESOURCE_EXHAUSTED ? -ENOMEM
             : r.status == ONCE_STATUS_UNAVAILABLE      ? -EIO
                                                        : -EINVAL;

        client_text_put(c->last_error, sizeof c->last_error, "%s", r.error);
        once_result_clear(&r);
        return rv;
    }
    client_async_link(c, op, cb, arg);
    op_start(op, a->timeout_ms);
    return 0;
}

int once_lookup_async(once_client *c,
                      const uint8_t *scope,
                      size_t scope_len,
                      const uint8_t *key,
                      size_t key_len,
                      unsigned flags,
                      uint32_t timeout_ms,
                      once_cb cb,
                      void *arg)
{
    struct once_result r;
    struct op *op;
    int rv;

    if (c == NULL) {
        return -EINVAL;
    }
    if (cb == NULL) {
        err_printf(c->last_error, "cb: NULL");
        return -EINVAL;
    }
    rv = client_async_admit(c);
    if (rv != 0) {
        return rv;
    }
    once_result_init(&r);
    op = lookup_op(c, scope, scope_len, key, key_len, flags, timeout_ms, &r);
    if (op == NULL) {
        rv = r.status == ONCE_STATUS_RESOURCE_EXHAUSTED ? -ENOMEM : -EINVAL;

        client_text_put(c->last_error, sizeof c->last_error, "%s", r.error);
        once_result_clear(&r);
        return rv;
    }
    client_async_link(c, op, cb, arg);
    op_start(op, timeout_ms);
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
