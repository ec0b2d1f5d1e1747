/* The log time in answers: docs/state-machine.md "Time". Every result
 * carries the log time it was decided at (fsm_now as its batch applied, or
 * at the read of fsm_lookup), so a client, and the chaos checker, can judge
 * windows and leases against the time the cluster itself used. Loop tests
 * run once per path (_i: FH_DIRECT, FH_PROTOBUF). */
#include <check.h>
#include <stdlib.h>

#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *log_time_suite(void);

#define W     300000ull /* fh_settings() max_window */
#define K     60000ull  /* fh_settings() max_skew */
#define LEASE 10000ull
#define T1    (FH_T0 + 5000ull)
#define SCOPE "clock"

static void boot(struct fh *h, int path)
{
    struct fsm_settings s;

    fh_settings(&s);
    fh_init_booted(h, path, &s, FH_T0);
}

static void idem(struct fsm_claim *c, const char *key, uint64_t rid)
{
    fh_claim(c, FSM_KIND_IDEMPOTENT, SCOPE, key, rid);
    c->ttl_ms = 3600000;
    c->lease_ms = LEASE;
}

/* One batch of claim, complete, release and lookup: every answer carries
 * the batch's time, whatever its outcome. */
START_TEST(test_log_time_every_command)
{
    struct fh h;
    struct fsm_claim c[2];
    struct fsm_cmd cmds[5];
    struct fh_res *r = fh_res_array(5);
    struct fsm_token t;

    boot(&h, _i);
    idem(&c[0], "a", 1);
    fh_assert_is(fh_do_claim(&h, T1, &c[0], &r[0]), FSM_ACCEPTED);
    ck_assert_uint_eq(r[0].log_time_ms, T1);
    t = r[0].owner_token;

    idem(&c[0], "b", 2);
    idem(&c[1], "a", 3);
    cmds[0] = fh_cmd_claim(&c[0]);                        /* ACCEPTED */
    cmds[1] = fh_cmd_claim(&c[1]);                        /* IN_PROGRESS */
    cmds[2] = fh_cmd_complete(SCOPE, "a", t, "ok", 2);    /* COMPLETED */
    cmds[3] = fh_cmd_release(SCOPE, "b", t, false, 0, 0); /* NOT_OWNER */
    cmds[4] = fh_cmd_lookup(SCOPE, "a");                  /* FOUND */
    ck_assert_int_eq(fh_apply(&h, T1 + 77, cmds, 5, r), 0);
    fh_assert_outcome(&r[0], FSM_ACCEPTED);
    fh_assert_outcome(&r[1], FSM_IN_PROGRESS);
    fh_assert_outcome(&r[2], FSM_COMPLETED);
    fh_assert_outcome(&r[3], FSM_NOT_OWNER);
    fh_assert_outcome(&r[4], FSM_FOUND);
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(r[i].log_time_ms, T1 + 77);
    }
    /* The lease the claimant sees is the answer's time + its lease. */
    ck_assert_uint_eq(r[0].lease_expires_ms, r[0].log_time_ms + LEASE);
    ck_assert_uint_eq(r[1].retry_after_ms + r[1].log_time_ms, T1 + LEASE);
    free(r);
    fh_close(&h);
}
END_TEST

/* Log time never goes back: a batch stamped earlier than fsm_now is decided
 * at fsm_now, and its answers say so (not the stamp). */
START_TEST(test_log_time_is_fsm_now_not_stamp)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    fh_tick(&h, T1 + 1000);
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "n", 1);
    fh_claim_ts(&c, T1 + 900, 100);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.log_time_ms, T1 + 1000);
    ck_assert_uint_eq(r.first_time_ms, T1 + 1000);
    ck_assert_uint_eq(fsm_now(h.f), T1 + 1000);

    /* A replay later: decided at its own batch's time, while the record's
     * first_time_ms stays the acceptance's. */
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "n", 2);
    fh_claim_ts(&c, T1 + 900, 100);
    fh_assert_is(fh_do_claim(&h, T1 + 4000, &c, &r), FSM_REPLAYED);
    ck_assert_uint_eq(r.log_time_ms, T1 + 4000);
    ck_assert_uint_eq(r.first_time_ms, T1 + 1000);
    fh_close(&h);
}
END_TEST

/* STALE and FUTURE are judged against the answer's log time: the
 * inequality a checker re-evaluates from the answer alone. */
START_TEST(test_log_time_window_outcomes)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    const uint64_t now = T1 + 100000;

    boot(&h, _i);
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "old", 1);
    fh_claim_ts(&c, now - 1000 - 1, 1000);
    fh_assert_is(fh_do_claim(&h, now, &c, &r), FSM_STALE);
    ck_assert_uint_eq(r.log_time_ms, now);
    ck_assert_uint_lt(c.ts_ms, r.log_time_ms - c.window_ms);

    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "new", 2);
    fh_claim_ts(&c, now + K + 1, 1000);
    fh_assert_is(fh_do_claim(&h, now, &c, &r), FSM_FUTURE);
    ck_assert_uint_eq(r.log_time_ms, now);
    ck_assert_uint_gt(c.ts_ms, r.log_time_ms + K);

    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "edge", 3);
    fh_claim_ts(&c, now + K, 1000);
    fh_assert_is(fh_do_claim(&h, now, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.log_time_ms, now);
    ck_assert_uint_eq(r.expires_ms, c.ts_ms + W + K);
    fh_close(&h);
}
END_TEST

/* The read path (fsm_lookup after a barrier) answers at fsm_now; refusals
 * before bootstrap and undecodable commands carry the batch time too. */
START_TEST(test_log_time_read_and_refusals)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res r;

    fh_init(&h, _i);
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "n", 1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, FH_T0, &c, &r), FSM_FAILED_PRECONDITION);
    ck_assert_uint_eq(r.log_time_ms, FH_T0);
    fh_close(&h);

    boot(&h, _i);
    cmd = fh_cmd_invalid();
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_INVALID_ARGUMENT);
    ck_assert_uint_eq(r.log_time_ms, T1);
    fh_tick(&h, T1 + 333);
    fh_lookup_read(&h, SCOPE, "absent", &r);
    fh_assert_outcome(&r, FSM_NOT_FOUND);
    ck_assert_uint_eq(r.log_time_ms, T1 + 333);
    fh_close(&h);
}
END_TEST

Suite *log_time_suite(void)
{
    Suite *s = suite_create("log_time");
    TCase *tc = tcase_create("answers");

    tcase_add_loop_test(tc, test_log_time_every_command, 0, 2);
    tcase_add_loop_test(tc, test_log_time_is_fsm_now_not_stamp, 0, 2);
    tcase_add_loop_test(tc, test_log_time_window_outcomes, 0, 2);
    tcase_add_loop_test(tc, test_log_time_read_and_refusals, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
