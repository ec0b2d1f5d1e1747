/* test_verify_net: once_verify_and_claim against a scripted server (a
 * forked child running an rpc_server on 127.0.0.1:7331, stopped by its
 * PID): the claim it sends (scope, key = the message id, kind, ts = the
 * signed timestamp in ms, window = the tolerance, payload hash = SHA-256
 * of the body, lease) and the mapping of every answer to a typed outcome.
 *
 * The server echoes the request into the answer (first_time_ms = ts_ms,
 * expires_ms = window_ms, lease_expires_ms = lease_ms, reason = key,
 * kind = kind, result = payload hash) and picks the outcome by scope. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "once_rpc.pb-c.h"
#include "once_verify.h"
#include "rpc/conn.h"
#include "rpc/frame.h"

Suite *verify_net_suite(void);

#define ADDR "127.0.0.1:7331"

#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_ID     "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS     "1614265330"
#define SW_BODY   "{\"test\": 2432232314}"
#define SW_SIG    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static const struct
{
    const char *scope;
    int outcome; /* wire number; 0: answer UNAVAILABLE, not applied */
} table[] = {
    {"accepted", 1}, {"replayed", 2}, {"duplicate", 3}, {"in_progress", 4},
    {"conflict", 5}, {"stale", 6},    {"future", 7},    {"failed", 8},
    {"full", 13},    {"refused", 14}, {"down", 0},
};

static void serve(void *arg, struct rpc_call *call, struct envelope_view *req)
{
    Once__Rpc__Result res = ONCE__RPC__RESULT__INIT;
    Once__Rpc__ClaimResponse cr = ONCE__RPC__CLAIM_RESPONSE__INIT;
    const Once__Rpc__ClaimRequest *cl;
    ProtobufCMessage *msg;
    uint8_t buf[4096];
    char reason[257] = "";
    struct rpc_reply rr = {
        RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED, NULL, NULL, buf, 0};
    int outcome = -1;

    (void)arg;
    if (envelope_unpack_body(req, &msg, NULL) != 0 ||
        call->method != RPC_METHOD_CLAIM) {
        struct rpc_reply bad = {RPC_STATUS_INVALID_ARGUMENT,
                                RPC_APPLIED_FALSE,
                                "unexpected",
                                NULL,
                                NULL,
                                0};

        rpc_call_reply(call, &bad);
        return;
    }
    cl = (const Once__Rpc__ClaimRequest *)msg;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].scope) == cl->scope.len &&
            memcmp(table[i].scope, cl->scope.data, cl->scope.len) == 0) {
            outcome = table[i].outcome;
        }
    }
    if (outcome <= 0) {
        struct rpc_reply down = {RPC_STATUS_UNAVAILABLE,
                                 RPC_APPLIED_FALSE,
                                 "no leader",
                                 NULL,
                                 NULL,
                                 0};

        rpc_call_reply(call, &down);
        return;
    }
    res.outcome = (Once__Rpc__Outcome)outcome;
    res.request_id = cl->request_id;
    res.first_time_ms = cl->has_ts ? cl->ts_ms : 0;
    res.expires_ms = cl->window_ms;
    res.lease_expires_ms = cl->lease_ms;
    res.kind = cl->kind;
    if (cl->key.len < sizeof reason) {
        memcpy(reason, cl->key.data, cl->key.len);
    }
    res.reason = reason;
    res.result = cl->payload_hash;
    cr.result = &res;
    rr.body_len = protobuf_c_message_pack(&cr.base, buf);
    rpc_call_reply(call, &rr);
}

static pid_t server_start(void)
{
    int p[2];
    pid_t pid;
    char x = 0;

    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        uv_loop_t loop;
        struct rpc_server_config cfg;
        struct rpc_server *srv;
        char errmsg[ERR_MSG_SIZE];

        close(p[0]);
        uv_loop_init(&loop);
        memset(&cfg, 0, sizeof cfg);
        cfg.addr = ADDR;
        rpc_limits_default(&cfg.limits);
        cfg.serve = serve;
        cfg.ids.has_cluster_id = true;
        memset(cfg.ids.cluster_id, 0xcc, RPC_ID_LEN);
        cfg.ids.node_id = 1;
        memset(cfg.ids.boot_id, 0xb0, RPC_ID_LEN);
        if (rpc_server_start(&srv, &loop, &cfg, errmsg) != 0) {
            _exit(1);
        }
        (void)!write(p[1], "x", 1);
        uv_run(&loop, UV_RUN_DEFAULT);
        _exit(0);
    }
    close(p[1]);
    ck_assert_msg(read(p[0], &x, 1) == 1, "scripted server did not start");
    close(p[0]);
    return pid;
}

struct fixture
{
    pid_t pid;
    once_client *c;
    once_verifier *v;
};

static void setup(struct fixture *f)
{
    const char *addrs[] = {ADDR};
    struct once_options o;
    char err[256];

    f->pid = server_start();
    once_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    o.timeout_ms = 500;
    ck_assert_int_eq(once_client_new(&o, &f->c, err, sizeof err), 0);
    ck_assert_int_eq(
        once_verifier_new(ONCE_SCHEME_STANDARD, &f->v, err, sizeof err), 0);
    ck_assert_int_eq(
        once_verifier_add(f->v, SW_SECRET, strlen(SW_SECRET), err, sizeof err),
        0);
}

static void teardown(struct fixture *f)
{
    once_client_free(f->c);
    once_verifier_free(f->v);
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
}

static enum once_vc_outcome vc(struct fixture *f,
                               const char *scope,
                               enum once_kind kind,
                               struct once_verified *ver,
                               struct once_result *r)
{
    struct once_webhook w = {SW_ID,
                             strlen(SW_ID),
                             SW_TS,
                             strlen(SW_TS),
                             SW_SIG,
                             strlen(SW_SIG),
                             (const uint8_t *)SW_BODY,
                             strlen(SW_BODY)};
    struct once_vc_args a = {0};

    a.scope = (const uint8_t *)scope;
    a.scope_len = strlen(scope);
    a.kind = kind;
    a.lease_ms = 7000;
    return once_verify_and_claim(f->c, f->v, &w, &a, ver, r);
}

START_TEST(claim_carries_the_message)
{
    struct fixture f;
    struct once_verified ver;
    struct once_result r;
    uint8_t hash[32];

    setup(&f);
    once_result_init(&r);
    ck_assert_int_eq(vc(&f, "accepted", 0, &ver, &r), ONCE_VC_ACCEPTED);
    ck_assert_str_eq(r.reason, SW_ID);                  /* key = message id */
    ck_assert_uint_eq(r.first_time_ms, 1614265330000u); /* ts in ms */
    ck_assert_uint_eq(r.expires_ms, ONCE_VERIFY_TOLERANCE_DEF); /* window */
    ck_assert_uint_eq(r.lease_expires_ms, 7000);
    ck_assert_int_eq(r.kind, ONCE_IDEMPOTENT); /* the default kind */
    once_body_hash((const uint8_t *)SW_BODY, strlen(SW_BODY), hash);
    ck_assert_uint_eq(r.result_len, 32);
    ck_assert_int_eq(memcmp(r.result, hash, 32), 0);
    /* NONCE: no payload hash, no lease. */
    ck_assert_int_eq(vc(&f, "replayed", ONCE_NONCE, &ver, &r),
                     ONCE_VC_REPLAYED);
    ck_assert_int_eq(r.kind, ONCE_NONCE);
    ck_assert_uint_eq(r.result_len, 0);
    ck_assert_uint_eq(r.lease_expires_ms, 0);
    once_result_clear(&r);
    teardown(&f);
}
END_TEST

START_TEST(every_answer_has_its_outcome)
{
    static const enum once_vc_outcome want[] = {
        ONCE_VC_ACCEPTED,    ONCE_VC_REPLAYED,    ONCE_VC_DUPLICATE,
        ONCE_VC_IN_PROGRESS, ONCE_VC_CONFLICT,    ONCE_VC_STALE,
        ONCE_VC_FUTURE,      ONCE_VC_FAILED,      ONCE_VC_UNAVAILABLE,
        ONCE_VC_REFUSED,     ONCE_VC_UNAVAILABLE,
    };
    struct fixture f;
    struct once_verified ver;
    struct once_result r;

    setup(&f);
    once_result_init(&r);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        enum once_vc_outcome o = vc(&f, table[i].scope, 0, &ver, &r);

        ck_assert_msg(o == want[i], "%s: %s", table[i].scope,
                      once_vc_outcome_name(o));
    }
    ck_assert_int_ne(r.status, ONCE_STATUS_OK); /* "down": no decision */
    once_result_clear(&r);
    teardown(&f);
}
END_TEST

Suite *verify_net_suite(void)
{
    Suite *s = suite_create("verify_net");
    TCase *tc = tcase_create("verify_net");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, claim_carries_the_message);
    tcase_add_test(tc, every_answer_has_its_outcome);
    suite_add_tcase(s, tc);
    return s;
}
