/* test_client_net: libonce's public API (src/client/client.c, op.c,
 * admin.c) against scripted servers (a forked child running rpc_servers on
 * 127.0.0.1:7321-7323, stopped by its PID), one scenario per claim scope: a
 * leader hint, an unknown outcome retried with the same request id,
 * unknown staying unknown, final statuses, malformed answers, answers
 * without a cluster id, the cluster-id pin, a server that never answers,
 * max_inflight and once_client_free with calls outstanding. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "client/client.h"
#include "client_helpers.h"
#include "once_rpc.pb-c.h"
#include "rpc/conn.h"
#include "rpc/frame.h"

/* ------------------------------------------------------------------------
 * Scripted servers (a forked child)
 * ---------------------------------------------------------------------- */

#define ADDR_A    "127.0.0.1:7321" /* cluster X, node 1 */
#define ADDR_B    "127.0.0.1:7322" /* cluster X, node 2 */
#define ADDR_C    "127.0.0.1:7323" /* no cluster id yet, node 3 */
#define ADDR_NONE "127.0.0.1:7329" /* nothing listens */
#define CLUSTER_X 0xaa

struct scen
{
    char name[32];
    unsigned calls[3]; /* per server */
    bool has_rid;
    uint8_t rid[16];
};

static struct scen scens[32];

static struct scen *scen_get(const uint8_t *name, size_t len)
{
    for (size_t i = 0; i < 32; i++) {
        if (scens[i].name[0] == '\0' && len < sizeof scens[i].name) {
            memcpy(scens[i].name, name, len);
            return &scens[i];
        }
        if (strlen(scens[i].name) == len &&
            memcmp(scens[i].name, name, len) == 0) {
            return &scens[i];
        }
    }
    return &scens[31];
}

static void reply_error(struct rpc_call *call,
                        enum rpc_status st,
                        enum rpc_applied ap,
                        const char *error,
                        const char *hint)
{
    struct rpc_reply rr = {st, ap, error, hint, NULL, 0};

    rpc_call_reply(call, &rr);
}

/* Every response with a Result packs the same way (field 1): a
 * ClaimResponse serves for Lookup too. */
static void reply_result(struct rpc_call *call, Once__Rpc__Result *res)
{
    Once__Rpc__ClaimResponse cr = ONCE__RPC__CLAIM_RESPONSE__INIT;
    uint8_t buf[4096];
    struct rpc_reply rr = {
        RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED, NULL, NULL, buf, 0};

    cr.result = res;
    rr.body_len = protobuf_c_message_pack(&cr.base, buf);
    rpc_call_reply(call, &rr);
}

/* ClaimBatch, scenario "batch" (every call counted in scen "batch-calls":
 * calls[0] the calls, calls[1] the items of the last one). Per item, by
 * key: "busy" RESOURCE_EXHAUSTED the first time; "lost" UNKNOWN the first
 * time, then ACCEPTED with retry if the request id is the same; "denied"
 * PERMISSION_DENIED; "twice" seen before in this call REPLAYED; others
 * ACCEPTED. */
static void serve_batch(struct rpc_call *call,
                        const Once__Rpc__ClaimBatchRequest *b)
{
    static struct scen *busy, *lost;
    struct scen *calls = scen_get((const uint8_t *)"batch-calls", 11);
    Once__Rpc__ClaimBatchResponse resp = ONCE__RPC__CLAIM_BATCH_RESPONSE__INIT;
    Once__Rpc__ClaimBatchItem it[16], *ip[16];
    Once__Rpc__Result res[16];
    static uint8_t buf[65536];
    struct rpc_reply rr = {
        RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED, NULL, NULL, buf, 0};
    bool seen_twice = false;

    busy = scen_get((const uint8_t *)"batch-busy", 10);
    lost = scen_get((const uint8_t *)"batch-lost", 10);
    calls->calls[0]++;
    calls->calls[1] = (unsigned)b->n_items;
    for (size_t i = 0; i < b->n_items && i < 16; i++) {
        const Once__Rpc__ClaimRequest *cl = b->items[i];
        char key[32] = {0};

        memcpy(key, cl->key.data, cl->key.len < 31 ? cl->key.len : 31);
        once__rpc__claim_batch_item__init(&it[i]);
        once__rpc__result__init(&res[i]);
        ip[i] = &it[i];
        res[i].outcome = ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED;
        res[i].request_id = cl->request_id;
        if (strcmp(key, "busy") == 0 && busy->calls[0]++ == 0) {
            it[i].status = ONCE__RPC__STATUS__STATUS_RESOURCE_EXHAUSTED;
            it[i].applied = ONCE__RPC__APPLIED__APPLIED_FALSE;
            continue;
        }
        if (strcmp(key, "lost") == 0 && lost->calls[0]++ == 0) {
            lost->has_rid = true;
            memcpy(lost->rid, cl->request_id.data, 16);
            it[i].status = ONCE__RPC__STATUS__STATUS_UNKNOWN;
            it[i].applied = ONCE__RPC__APPLIED__APPLIED_UNKNOWN;
            continue;
        }
        if (strcmp(key, "lost") == 0) {
            res[i].retry = memcmp(lost->rid, cl->request_id.data, 16) == 0;
        }
        if (strcmp(key, "denied") == 0) {
            it[i].status = ONCE__RPC__STATUS__STATUS_PERMISSION_DENIED;
            it[i].applied = ONCE__RPC__APPLIED__APPLIED_FALSE;
            it[i].error.data = (uint8_t *)"no scope";
            it[i].error.len = 8;
            continue;
        }
        if (strcmp(key, "twice") == 0 && seen_twice) {
            res[i].outcome = ONCE__RPC__OUTCOME__OUTCOME_REPLAYED;
        }
        seen_twice = seen_twice || strcmp(key, "twice") == 0;
        it[i].result = &res[i];
    }
    resp.n_items = b->n_items < 16 ? b->n_items : 16;
    resp.items = ip;
    rr.body_len = protobuf_c_message_pack(&resp.base, buf);
    rpc_call_reply(call, &rr);
}

static void serve(void *arg, struct rpc_call *call, struct envelope_view *req)
{
    int who = (int)(intptr_t)arg; /* 0 A, 1 B, 2 C */
    Once__Rpc__Result res = ONCE__RPC__RESULT__INIT;
    ProtobufCMessage *msg;
    const Once__Rpc__ClaimRequest *cl;
    struct scen *s;
    uint8_t bad_rid[3] = {1, 2, 3};

    if (envelope_unpack_body(req, &msg, NULL) != 0) {
        reply_error(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE,
                    "body", NULL);
        return;
    }
    if (call->method == RPC_METHOD_LOOKUP) {
        /* lookup(count, NAME): the calls each server saw for NAME. */
        const Once__Rpc__LookupRequest *lk =
            (const Once__Rpc__LookupRequest *)msg;

        s = scen_get(lk->key.data, lk->key.len);
        res.outcome = ONCE__RPC__OUTCOME__OUTCOME_FOUND;
        res.first_index = s->calls[0];
        res.attempts_total = s->calls[1];
        res.owner_attempt = s->calls[2];
        reply_result(call, &res);
        return;
    }
    if (call->method == RPC_METHOD_CLAIM_BATCH) {
        serve_batch(call, (const Once__Rpc__ClaimBatchRequest *)msg);
        return;
    }
    if (call->method != RPC_METHOD_CLAIM) {
        reply_error(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE,
                    "method", NULL);
        return;
    }
    cl = (const Once__Rpc__ClaimRequest *)msg;
    s = scen_get(cl->scope.data, cl->scope.len);
    s->calls[who]++;
    res.outcome = ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED;
    res.request_id = cl->request_id;
    if (strcmp(s->name, "ok") == 0) {
        reply_result(call, &res);
    } else if (strcmp(s->name, "hint") == 0) {
        if (who == 0) {
            reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                        "not the leader", ADDR_B);
        } else {
            reply_result(call, &res);
        }
    } else if (strcmp(s->name, "busy") == 0 && who == 0) {
        reply_error(call, RPC_STATUS_RESOURCE_EXHAUSTED, RPC_APPLIED_FALSE,
                    "busy", NULL);
    } else if (strcmp(s->name, "unknown") == 0 ||
               strcmp(s->name, "hold") == 0 || strcmp(s->name, "busy") == 0) {
        if (!s->has_rid) {
            s->has_rid = true;
            memcpy(s->rid, cl->request_id.data, 16);
            if (strcmp(s->name, "hold") == 0) {
                /* Never answered: the client's attempt budget ends it. */
                rpc_call_mark_sent(call);
                return;
            }
            if (strcmp(s->name, "unknown") == 0) {
                reply_error(call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN,
                            "leader lost mid-commit", NULL);
                return;
            }
        }
        res.retry = memcmp(s->rid, cl->request_id.data, 16) == 0;
        res.first_request_id.data = s->rid;
        res.first_request_id.len = 16;
        reply_result(call, &res);
    } else if (strcmp(s->name, "holdall") == 0) {
        rpc_call_mark_sent(call);
    } else if (strcmp(s->name, "sticky") == 0) {
        if (s->calls[0] + s->calls[1] + s->calls[2] == 1) {
            reply_error(call, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN, "lost",
                        NULL);
        } else {
            reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE,
                        "no leader", NULL);
        }
    } else if (strcmp(s->name, "invalid") == 0) {
        reply_error(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE,
                    "ttl_ms: over max_ttl", NULL);
    } else if (strcmp(s->name, "malformed") == 0) {
        res.request_id.data = bad_rid;
        res.request_id.len = 3;
        reply_result(call, &res);
    } else {
        reply_error(call, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE,
                    "no such scenario", NULL);
    }
}

static pid_t fake_start(void)
{
    int p[2];
    pid_t pid;
    char x = 0;

    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        static const char *addrs[3] = {ADDR_A, ADDR_B, ADDR_C};
        uv_loop_t loop;
        char errmsg[ERR_MSG_SIZE];

        close(p[0]);
        uv_loop_init(&loop);
        for (int i = 0; i < 3; i++) {
            struct rpc_server_config cfg;
            struct rpc_server *srv;

            memset(&cfg, 0, sizeof cfg);
            cfg.addr = addrs[i];
            rpc_limits_default(&cfg.limits);
            cfg.serve = serve;
            cfg.arg = (void *)(intptr_t)i;
            cfg.ids.has_cluster_id = i < 2;
            memset(cfg.ids.cluster_id, CLUSTER_X, RPC_ID_LEN);
            cfg.ids.node_id = (uint64_t)i + 1;
            memset(cfg.ids.boot_id, 0xb0 + i, RPC_ID_LEN);
            if (rpc_server_start(&srv, &loop, &cfg, errmsg) != 0) {
                _exit(1); /* the parent sees EOF */
            }
        }
        (void)!write(p[1], "x", 1);
        uv_run(&loop, UV_RUN_DEFAULT);
        _exit(0);
    }
    close(p[1]);
    ck_assert_msg(read(p[0], &x, 1) == 1, "scripted servers did not start");
    close(p[0]);
    return pid;
}

static void fake_stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static double now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static once_client *client_of(const char *a,
                              const char *b,
                              uint32_t timeout_ms,
                              const uint8_t *pin)
{
    const char *addrs[2] = {a, b};
    struct once_options o;
    once_client *c = NULL;
    char err[256];

    once_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = b != NULL ? 2 : 1;
    o.timeout_ms = timeout_ms;
    if (pin != NULL) {
        o.pin_cluster_id = true;
        memcpy(o.cluster_id, pin, ONCE_ID_LEN);
    }
    ck_assert_msg(once_client_new(&o, &c, err, sizeof err) == 0, "%s", err);
    return c;
}

static int claim(once_client *c, const char *scope, struct once_result *r)
{
    struct once_claim a = good_claim();

    a.scope = (const uint8_t *)scope;
    a.scope_len = strlen(scope);
    return once_claim(c, &a, r);
}

/* The calls servers A, B, C saw for scenario @name. */
static void counts(once_client *c, const char *name, unsigned out[3])
{
    struct once_result r;

    once_result_init(&r);
    ck_assert_int_eq(once_lookup(c, (const uint8_t *)"count", 5,
                                 (const uint8_t *)name, strlen(name), 0, &r),
                     ONCE_STATUS_OK);
    out[0] = (unsigned)r.first_index;
    out[1] = r.attempts_total;
    out[2] = r.owner_attempt;
    once_result_clear(&r);
}

START_TEST(hint_moves_to_leader)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, NULL, 1000, NULL);
    struct once_result r;
    unsigned n[3];

    once_result_init(&r);
    /* A names B (not in the client's list): B is added and answers. */
    ck_assert_int_eq(claim(c, "hint", &r), ONCE_STATUS_OK);
    ck_assert_int_eq(r.outcome, ONCE_ACCEPTED);
    ck_assert_uint_eq(r.origin.node_id, 2);
    ck_assert(r.origin.has_cluster_id);
    ck_assert(r.origin.has_boot_id);
    ck_assert_uint_eq(r.origin.boot_id[0], 0xb1);
    ck_assert_str_eq(r.error, "");
    counts(c, "hint", n);
    ck_assert_uint_eq(n[0], 1);
    ck_assert_uint_eq(n[1], 1);
    /* The next call goes straight to the leader. */
    ck_assert_int_eq(claim(c, "hint", &r), ONCE_STATUS_OK);
    counts(c, "hint", n);
    ck_assert_uint_eq(n[0], 1);
    ck_assert_uint_eq(n[1], 2);
    once_result_clear(&r);
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

START_TEST(unknown_retried_with_same_id)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, ADDR_B, 1000, NULL);
    struct once_result r;
    unsigned n[3];

    once_result_init(&r);
    ck_assert_int_eq(claim(c, "unknown", &r), ONCE_STATUS_OK);
    ck_assert_int_eq(r.outcome, ONCE_ACCEPTED);
    /* The server saw the same request id twice. */
    ck_assert(r.retry);
    ck_assert(r.has_first);
    ck_assert(memcmp(r.first_request_id, r.request_id, 16) == 0);
    counts(c, "unknown", n);
    ck_assert_uint_eq(n[0] + n[1], 2);
    /* RESOURCE_EXHAUSTED moves on too. */
    ck_assert_int_eq(claim(c, "busy", &r), ONCE_STATUS_OK);
    counts(c, "busy", n);
    ck_assert_uint_eq(n[1], 1);
    once_result_clear(&r);
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

static struct once_claim batch_item(const char *key)
{
    struct once_claim a = good_claim();

    a.scope = (const uint8_t *)"batch";
    a.scope_len = 5;
    a.key = (const uint8_t *)key;
    a.key_len = strlen(key);
    a.request_id = NULL;
    return a;
}

/* once_claim_batch: each item its own result, in order; the items refused
 * "not now" or unknown are sent again alone with their request ids (one
 * more call of two items), the others are final. */
START_TEST(batch_items_retried_alone)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, NULL, 2000, NULL);
    const char *keys[6] = {"a", "busy", "lost", "denied", "twice", "twice"};
    struct once_claim items[6];
    struct once_result rs[6];
    unsigned n[3];

    for (int i = 0; i < 6; i++) {
        items[i] = batch_item(keys[i]);
        once_result_init(&rs[i]);
    }
    ck_assert_int_eq(once_claim_batch(c, items, 6, 0, rs),
                     ONCE_STATUS_PERMISSION_DENIED);
    ck_assert_int_eq(rs[0].status, ONCE_STATUS_OK);
    ck_assert_int_eq(rs[0].outcome, ONCE_ACCEPTED);
    ck_assert_int_eq(rs[1].status, ONCE_STATUS_OK);
    ck_assert_int_eq(rs[1].outcome, ONCE_ACCEPTED);
    ck_assert(!rs[1].retry);
    ck_assert_int_eq(rs[2].status, ONCE_STATUS_OK);
    ck_assert(rs[2].retry); /* the same request id the second time */
    ck_assert_int_eq(rs[3].status, ONCE_STATUS_PERMISSION_DENIED);
    ck_assert_int_eq(rs[3].applied, ONCE_APPLIED_FALSE);
    ck_assert_str_eq(rs[3].error, "no scope");
    ck_assert_int_eq(rs[4].outcome, ONCE_ACCEPTED);
    ck_assert_int_eq(rs[5].outcome, ONCE_REPLAYED);
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(rs[i].origin.node_id, 1);
        for (int j = 0; j < i; j++) {
            ck_assert(memcmp(rs[i].request_id, rs[j].request_id, 16) != 0);
        }
    }
    counts(c, "batch-calls", n);
    ck_assert_uint_eq(n[0], 2); /* two calls */
    ck_assert_uint_eq(n[1], 2); /* the second: busy and lost only */
    for (int i = 0; i < 6; i++) {
        once_result_clear(&rs[i]);
    }
    /* bad arguments: no round trip */
    ck_assert_int_eq(once_claim_batch(c, items, 0, 0, rs),
                     ONCE_STATUS_INVALID_ARGUMENT);
    /* a timeout over RPC_DEADLINE_MAX (one hour) fails every item */
    ck_assert_int_eq(once_claim_batch(c, items, 6, 3600u * 1000 + 1, rs),
                     ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(rs[5].status, ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(rs[5].error, "timeout_ms"));
    items[2].key_len = 0;
    ck_assert_int_eq(once_claim_batch(c, items, 6, 0, rs),
                     ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(rs[0].error, "items[2]"));
    counts(c, "batch-calls", n);
    ck_assert_uint_eq(n[0], 2);
    for (int i = 0; i < 6; i++) {
        once_result_clear(&rs[i]);
    }
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

static void on_batch(void *arg, int status, struct once_result *rs, size_t n)
{
    int *got = arg;

    got[0]++;
    got[1] = status;
    got[2] = (int)n;
    got[3] = n == 2 ? (int)rs[1].outcome : -1;
}

START_TEST(batch_async)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, NULL, 2000, NULL);
    struct once_claim items[2] = {batch_item("twice"), batch_item("twice")};
    int got[4] = {0, -1, 0, 0};

    ck_assert_int_eq(once_claim_batch_async(c, items, 2, 0, on_batch, got), 0);
    ck_assert_int_eq(once_claim_batch_async(c, items, 0, 0, on_batch, got),
                     -EINVAL);
    ck_assert_int_eq(once_run(c, 3000), 0);
    ck_assert_int_eq(got[0], 1);
    ck_assert_int_eq(got[1], ONCE_STATUS_OK);
    ck_assert_int_eq(got[2], 2);
    ck_assert_int_eq(got[3], ONCE_REPLAYED);
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

START_TEST(unknown_stays_unknown)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, ADDR_B, 300, NULL);
    struct once_result r;
    double t0 = now_ms();
    unsigned n[3];

    once_result_init(&r);
    /* UNKNOWN once, then UNAVAILABLE until the deadline. */
    ck_assert_int_eq(claim(c, "sticky", &r), ONCE_STATUS_UNAVAILABLE);
    ck_assert_int_eq(r.applied, ONCE_APPLIED_UNKNOWN);
    ck_assert(now_ms() - t0 < 450);
    ck_assert(strstr(r.error, "no leader") != NULL);
    counts(c, "sticky", n);
    ck_assert_uint_ge(n[0] + n[1], 3);
    once_result_clear(&r);
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

START_TEST(final_statuses)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, ADDR_B, 1000, NULL);
    struct once_result r;
    unsigned n[3];

    once_result_init(&r);
    ck_assert_int_eq(claim(c, "invalid", &r), ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(r.applied, ONCE_APPLIED_FALSE);
    ck_assert(strncmp(r.error, "ttl_ms: over max_ttl (node 0000000000000001",
                      43) == 0);
    counts(c, "invalid", n);
    ck_assert_uint_eq(n[0] + n[1], 1);
    once_result_clear(&r);
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

START_TEST(malformed_and_no_cluster_id)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, ADDR_B, 300, NULL);
    once_client *nc = client_of(ADDR_C, NULL, 300, NULL);
    struct once_result r;
    uint8_t id[ONCE_ID_LEN];

    once_result_init(&r);
    /* A write: perhaps applied. */
    ck_assert_int_eq(claim(c, "malformed", &r), ONCE_STATUS_UNKNOWN);
    ck_assert_int_eq(r.applied, ONCE_APPLIED_UNKNOWN);
    ck_assert(strstr(r.error, "malformed answer") != NULL);
    ck_assert(strstr(r.error, "result.request_id: 3 bytes") != NULL);
    /* A malformed answer pins nothing. */
    ck_assert(!once_client_cluster_id(c, id));
    /* OK without a cluster id: never a decision. */
    ck_assert_int_eq(claim(nc, "ok", &r), ONCE_STATUS_UNKNOWN);
    ck_assert_int_eq(r.applied, ONCE_APPLIED_UNKNOWN);
    ck_assert(strstr(r.error, "without a cluster id") != NULL);
    ck_assert_int_eq(once_lookup(nc, (const uint8_t *)"count", 5,
                                 (const uint8_t *)"ok", 2, 0, &r),
                     ONCE_STATUS_UNAVAILABLE);
    ck_assert_int_eq(r.applied, ONCE_APPLIED_FALSE);
    ck_assert(!once_client_cluster_id(nc, id));
    once_result_clear(&r);
    once_client_free(c);
    once_client_free(nc);
    fake_stop(pid);
}
END_TEST

START_TEST(cluster_id_pin)
{
    pid_t pid = fake_start();
    uint8_t y[ONCE_ID_LEN];
    uint8_t got[ONCE_ID_LEN];
    once_client *c;
    struct once_result r;
    unsigned n[3];
    char want[200];

    memset(y, 0xbb, sizeof y);
    c = client_of(ADDR_A, ADDR_B, 1000, y);
    once_result_init(&r);
    ck_assert_int_eq(claim(c, "ok", &r), ONCE_STATUS_FAILED_PRECONDITION);
    ck_assert_int_eq(r.applied, ONCE_APPLIED_FALSE);
    snprintf(want, sizeof want,
             "cluster id mismatch: pinned %s, answered %s by node "
             "0000000000000001 at " ADDR_A,
             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    ck_assert_str_eq(r.error, want);
    ck_assert(once_client_cluster_id(c, got));
    ck_assert(memcmp(got, y, 16) == 0);
    once_client_free(c);

    /* The pin travels with the request: the other cluster's nodes refused
     * it in their RPC layer, so their handler never saw it (not on A, and
     * not retried on B). An unpinned client pins the first answer. */
    c = client_of(ADDR_A, ADDR_B, 1000, NULL);
    ck_assert(!once_client_cluster_id(c, got));
    counts(c, "ok", n);
    ck_assert_uint_eq(n[0] + n[1], 0);
    ck_assert(once_client_cluster_id(c, got));
    ck_assert_uint_eq(got[0], CLUSTER_X);
    ck_assert_int_eq(claim(c, "ok", &r), ONCE_STATUS_OK);
    once_result_clear(&r);
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

START_TEST(silent_node_does_not_take_the_deadline)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, ADDR_B, 3000, NULL);
    struct once_result r;
    double t0 = now_ms();
    double ms;

    once_result_init(&r);
    /* A holds the call: after half the deadline the same request goes to
     * B, which sees the same id. */
    ck_assert_int_eq(claim(c, "hold", &r), ONCE_STATUS_OK);
    ms = now_ms() - t0;
    ck_assert(r.retry);
    ck_assert_msg(ms > 1300 && ms < 2500, "took %.0f ms", ms);
    once_result_clear(&r);
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

START_TEST(nothing_listens)
{
    once_client *c = client_of(ADDR_NONE, NULL, 200, NULL);
    struct once_result r;
    struct once_claim a = good_claim();
    double t0 = now_ms();
    double ms;

    once_result_init(&r);
    ck_assert_int_eq(once_claim(c, &a, &r), ONCE_STATUS_UNAVAILABLE);
    ms = now_ms() - t0;
    ck_assert_int_eq(r.applied, ONCE_APPLIED_FALSE);
    ck_assert(strstr(r.error, "cannot connect") != NULL);
    ck_assert_msg(ms >= 150 && ms < 400, "took %.0f ms", ms);
    /* Bad arguments: no round trip, a message naming the field. */
    t0 = now_ms();
    a.key_len = 0;
    ck_assert_int_eq(once_claim(c, &a, &r), ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(r.applied, ONCE_APPLIED_FALSE);
    ck_assert_str_eq(r.error, "key: 0 bytes, must be 1..256");
    ck_assert(now_ms() - t0 < 50);
    ck_assert_int_eq(once_claim(NULL, &a, &r), ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(
        once_status(c, "127.0.0.1:1", 0, &(struct once_status_info){0}, &r),
        ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(r.error, "addr: not one of the client's addresses");
    once_result_clear(&r);
    once_client_free(c);
    once_client_free(NULL);
}
END_TEST

struct cb_log
{
    int n;
    int ok;
    int unknown;
    once_client *c;
    bool nested_ok;
};

static void on_claim(void *arg, struct once_result *r)
{
    struct cb_log *l = arg;

    l->n++;
    if (r->status == ONCE_STATUS_OK && r->outcome == ONCE_ACCEPTED) {
        l->ok++;
    }
    if (r->status == ONCE_STATUS_UNKNOWN &&
        r->applied == ONCE_APPLIED_UNKNOWN) {
        l->unknown++;
    }
    if (l->n == 1 && l->c != NULL) {
        /* A callback may make a synchronous call (it runs outside
         * uv_run). */
        struct once_result s;

        once_result_init(&s);
        l->nested_ok = claim(l->c, "ok", &s) == ONCE_STATUS_OK;
        once_result_clear(&s);
    }
}

START_TEST(async_calls)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, ADDR_B, 1000, NULL);
    struct cb_log log = {0};
    struct once_claim a = good_claim();

    a.scope = (const uint8_t *)"ok";
    a.scope_len = 2;
    log.c = c;
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(once_claim_async(c, &a, on_claim, &log), 0);
    }
    /* Callbacks run only from once_run. */
    ck_assert_int_eq(log.n, 0);
    ck_assert_int_eq(once_run(c, -1), 0);
    ck_assert_int_eq(log.n, 100);
    ck_assert_int_eq(log.ok, 100);
    ck_assert(log.nested_ok);
    a.key_len = 0;
    ck_assert_int_eq(once_claim_async(c, &a, on_claim, &log), -EINVAL);
    ck_assert_str_eq(once_client_last_error(c), "key: 0 bytes, must be 1..256");
    once_client_free(c);
    fake_stop(pid);
}
END_TEST

START_TEST(async_bound_and_free)
{
    pid_t pid = fake_start();
    const char *addrs[1] = {ADDR_A};
    struct once_options o;
    once_client *c;
    struct cb_log log = {0};
    struct once_claim a = good_claim();
    char err[256];

    once_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    o.max_inflight = 2;
    ck_assert_int_eq(once_client_new(&o, &c, err, sizeof err), 0);
    a.scope = (const uint8_t *)"holdall";
    a.scope_len = 7;
    ck_assert_int_eq(once_claim_async(c, &a, on_claim, &log), 0);
    ck_assert_int_eq(once_claim_async(c, &a, on_claim, &log), 0);
    ck_assert_int_eq(once_claim_async(c, &a, on_claim, &log), -EBUSY);
    ck_assert(strstr(once_client_last_error(c), "max_inflight") != NULL);
    /* Sent, never answered: still outstanding after 200 ms. */
    ck_assert_int_eq(once_run(c, 200), 2);
    ck_assert_int_eq(log.n, 0);
    once_client_free(c);
    ck_assert_int_eq(log.n, 2);
    ck_assert_int_eq(log.unknown, 2);
    fake_stop(pid);
}
END_TEST

struct free_log
{
    once_client *c;
    int n;
    int unknown;
    bool freed;
};

static void on_claim_free(void *arg, struct once_result *r)
{
    struct free_log *l = arg;

    l->n++;
    if (r->status == ONCE_STATUS_UNKNOWN &&
        r->applied == ONCE_APPLIED_UNKNOWN) {
        l->unknown++;
    }
    if (r->status == ONCE_STATUS_OK && !l->freed) {
        /* Freeing from a callback is deferred to once_run's return. */
        l->freed = true;
        once_client_free(l->c);
    }
}

START_TEST(free_from_callback)
{
    pid_t pid = fake_start();
    once_client *c = client_of(ADDR_A, NULL, 5000, NULL);
    struct free_log log = {c, 0, 0, false};
    struct once_claim a = good_claim();

    a.scope = (const uint8_t *)"holdall";
    a.scope_len = 7;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(once_claim_async(c, &a, on_claim_free, &log), 0);
    }
    a.scope = (const uint8_t *)"ok";
    a.scope_len = 2;
    ck_assert_int_eq(once_claim_async(c, &a, on_claim_free, &log), 0);
    /* The OK answer's callback frees the client: once_run returns at once
     * (not after the held calls' 5 s), and the held calls are failed as
     * sent, outcome unknown. */
    ck_assert_int_eq(once_run(c, -1), 0);
    ck_assert(log.freed);
    ck_assert_int_eq(log.n, 4);
    ck_assert_int_eq(log.unknown, 3);
    fake_stop(pid);
}
END_TEST

START_TEST(new_refuses_bad_options)
{
    const char *addrs[1] = {"1.2.3.4"};
    struct once_options o;
    once_client *c = (once_client *)1;
    char err[256];

    once_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    ck_assert_int_eq(once_client_new(&o, &c, err, sizeof err), -EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(err, "addrs[0]: \"1.2.3.4\" is not IPv4 IP:PORT");
    ck_assert_int_eq(once_client_new(NULL, &c, err, sizeof err), -EINVAL);
    ck_assert_int_eq(once_client_new(&o, NULL, NULL, 0), -EINVAL);
}
END_TEST

Suite *client_net_suite(void)
{
    Suite *s = suite_create("client-net");
    TCase *tc = tcase_create("net");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, hint_moves_to_leader);
    tcase_add_test(tc, unknown_retried_with_same_id);
    tcase_add_test(tc, unknown_stays_unknown);
    tcase_add_test(tc, final_statuses);
    tcase_add_test(tc, malformed_and_no_cluster_id);
    tcase_add_test(tc, cluster_id_pin);
    tcase_add_test(tc, silent_node_does_not_take_the_deadline);
    tcase_add_test(tc, nothing_listens);
    tcase_add_test(tc, async_calls);
    tcase_add_test(tc, async_bound_and_free);
    tcase_add_test(tc, free_from_callback);
    tcase_add_test(tc, new_refuses_bad_options);
    tcase_add_test(tc, batch_items_retried_alone);
    tcase_add_test(tc, batch_async);
    suite_add_tcase(s, tc);
    return s;
}
