/* NONCE claims: docs/state-machine.md "Claim", "Time", "Identity", "Lookup
 * and Forget". Loop tests run once per path (_i: FH_DIRECT, FH_PROTOBUF). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *nonce_suite(void);

/* fh_settings() values, named for the arithmetic below. */
#define W   300000ull /* max_window */
#define K   60000ull  /* max_skew */
#define T1  (FH_T0 + 1000000ull)
#define WIN 60000ull /* the window most claims ask for */

/* A state machine bootstrapped with fh_settings() at FH_T0 (index 1). */
static void boot(struct fh *h, int path)
{
    struct fsm_settings s;

    fh_settings(&s);
    fh_init_booted(h, path, &s, FH_T0);
}

/* A NONCE claim of ("tenant", @key) bound to @ts with window WIN. */
static void nonce_ts(struct fsm_claim *c,
                     const char *key,
                     uint64_t rid,
                     uint64_t ts)
{
    fh_claim(c, FSM_KIND_NONCE, "tenant", key, rid);
    fh_claim_ts(c, ts, WIN);
}

/* A NONCE claim of ("tenant", @key) with only a TTL. */
static void nonce_ttl(struct fsm_claim *c,
                      const char *key,
                      uint64_t rid,
                      uint64_t ttl)
{
    fh_claim(c, FSM_KIND_NONCE, "tenant", key, rid);
    c->ttl_ms = ttl;
}

START_TEST(test_nonce_first_accept)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res *r = fh_res_array(3);

    boot(&h, _i);
    nonce_ts(&c, "n1", 1, T1 - 500);
    fh_claim_exec(&c, "pod-a");
    fh_assert_is(fh_do_claim(&h, T1, &c, &r[0]), FSM_ACCEPTED);
    ck_assert_int_eq(r[0].cmd, FSM_CMD_CLAIM);
    ck_assert(!r[0].retry);
    ck_assert(r[0].has_record);
    ck_assert_int_eq(r[0].kind, FSM_KIND_NONCE);
    ck_assert_int_eq(r[0].state, FSM_STATE_SEEN);
    ck_assert(fh_rid_is(r[0].first_request_id, 1));
    ck_assert_uint_eq(r[0].first_index, 2);
    ck_assert_uint_eq(r[0].first_time_ms, T1);
    /* ts + max_window + max_skew, settings as of the claim. */
    ck_assert_uint_eq(r[0].expires_ms, T1 - 500 + W + K);
    ck_assert_uint_eq(r[0].attempts, 0);
    ck_assert_uint_eq(fsm_now(h.f), T1);
    ck_assert_uint_eq(fsm_last_index(h.f), 2);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    ck_assert_uint_gt(fsm_bytes(h.f), 0);

    /* Lookup through the log and through the read path: the same facts. */
    fh_assert_is(fh_do_lookup(&h, T1 + 1, "tenant", "n1", &r[1]), FSM_FOUND);
    fh_lookup_read(&h, "tenant", "n1", &r[2]);
    fh_assert_outcome(&r[2], FSM_FOUND);
    for (int i = 1; i < 3; i++) {
        ck_assert(r[i].has_record);
        ck_assert_int_eq(r[i].kind, FSM_KIND_NONCE);
        ck_assert_int_eq(r[i].state, FSM_STATE_SEEN);
        ck_assert(fh_rid_is(r[i].first_request_id, 1));
        ck_assert_uint_eq(r[i].first_index, 2);
        ck_assert_uint_eq(r[i].first_time_ms, T1);
        ck_assert_uint_eq(r[i].expires_ms, T1 - 500 + W + K);
        ck_assert_uint_eq(r[i].attempts, 0);
        ck_assert_uint_eq(r[i].n_attempt_list, 0);
    }
    free(r);
    fh_close(&h);
}
END_TEST

/* Retention is the latest of now + ttl and ts + max_window + max_skew. */
START_TEST(test_nonce_retention)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    nonce_ttl(&c, "ttl-only", 1, 10000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + 10000);

    nonce_ts(&c, "ts-wins", 2, T1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + W + K);

    nonce_ts(&c, "ttl-wins", 3, T1);
    c.ttl_ms = 3600000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + 3600000);
    ck_assert_uint_eq(fsm_n_records(h.f), 3);
    fh_close(&h);
}
END_TEST

/* A byte-identical replay is a new call with a new request id: REPLAYED. */
START_TEST(test_nonce_replay_fresh_request_id)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    nonce_ts(&c, "n1", 1, T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);

    nonce_ts(&c, "n1", 2, T1);
    fh_assert_is(fh_do_claim(&h, T1 + 10, &c, &r), FSM_REPLAYED);
    ck_assert(!r.retry);
    ck_assert(r.has_record);
    ck_assert_int_eq(r.kind, FSM_KIND_NONCE);
    ck_assert_int_eq(r.state, FSM_STATE_SEEN);
    ck_assert(fh_rid_is(r.first_request_id, 1));
    ck_assert_uint_eq(r.first_index, 2);
    ck_assert_uint_eq(r.first_time_ms, T1);
    ck_assert_uint_eq(r.expires_ms, T1 + W + K);

    /* A different binding (TTL only) of the same key is still a replay. */
    nonce_ttl(&c, "n1", 3, 5000);
    fh_assert_is(fh_do_claim(&h, T1 + 20, &c, &r), FSM_REPLAYED);

    /* The live record answers before the window is looked at: a replay
     * whose ts is now far outside its window is REPLAYED, not STALE. */
    nonce_ts(&c, "n1", 4, T1);
    fh_assert_is(fh_do_claim(&h, T1 + W + K - 1, &c, &r), FSM_REPLAYED);
    ck_assert_uint_eq(r.first_index, 2);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_retry_same_request_id)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fh_res *l = fh_res_array(1);

    boot(&h, _i);
    nonce_ts(&c, "n1", 1, T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);

    fh_claim_exec(&c, "retrier");
    fh_assert_is(fh_do_claim(&h, T1 + 7, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    ck_assert(fh_rid_is(r.first_request_id, 1));
    ck_assert_uint_eq(r.first_index, 2);
    ck_assert_uint_eq(r.first_time_ms, T1);
    ck_assert_uint_eq(r.expires_ms, T1 + W + K);

    /* The retry is recorded as an attempt. */
    fh_assert_is(fh_do_lookup(&h, T1 + 8, "tenant", "n1", l), FSM_FOUND);
    ck_assert_uint_eq(l->attempts, 1);
    ck_assert_uint_eq(l->n_attempt_list, 1);
    ck_assert(fh_rid_is(l->attempt_list[0].request_id, 1));
    ck_assert_int_eq(l->attempt_list[0].outcome, FSM_ACCEPTED);
    ck_assert(l->attempt_list[0].retry);
    ck_assert_uint_eq(l->attempt_list[0].index, 3);
    ck_assert_uint_eq(l->attempt_list[0].time_ms, T1 + 7);
    ck_assert_uint_eq(l->attempt_list[0].execution_id_len, 7);
    ck_assert_mem_eq(l->attempt_list[0].execution_id, "retrier", 7);
    free(l);
    fh_close(&h);
}
END_TEST

/* now - window <= ts <= now + max_skew, both edges inclusive. */
START_TEST(test_nonce_window_edges)
{
    struct fh h;
    struct fsm_claim c[6];
    struct fsm_cmd cmds[6];
    struct fh_res *r = fh_res_array(6);
    struct fh_res l;
    static const char *const keys[6] = {"a", "b", "c", "d", "e", "f"};
    int i;

    boot(&h, _i);
    nonce_ts(&c[0], keys[0], 1, T1 - WIN);
    nonce_ts(&c[1], keys[1], 2, T1 - WIN - 1);
    nonce_ts(&c[2], keys[2], 3, T1 + K);
    nonce_ts(&c[3], keys[3], 4, T1 + K + 1);
    nonce_ts(&c[4], keys[4], 5, T1 - W);
    c[4].window_ms = W;
    nonce_ts(&c[5], keys[5], 6, T1 - W - 1);
    c[5].window_ms = W;
    for (i = 0; i < 6; i++) {
        cmds[i] = fh_cmd_claim(&c[i]);
    }
    ck_assert_int_eq(fh_apply(&h, T1, cmds, 6, r), 0);
    fh_assert_outcome(&r[0], FSM_ACCEPTED);
    fh_assert_outcome(&r[1], FSM_STALE);
    fh_assert_outcome(&r[2], FSM_ACCEPTED);
    fh_assert_outcome(&r[3], FSM_FUTURE);
    fh_assert_outcome(&r[4], FSM_ACCEPTED);
    fh_assert_outcome(&r[5], FSM_STALE);
    ck_assert_uint_eq(r[2].expires_ms, T1 + K + W + K);

    /* STALE and FUTURE store nothing. */
    ck_assert_uint_eq(fsm_n_records(h.f), 3);
    for (i = 0; i < 6; i++) {
        enum fsm_outcome want = i % 2 == 0 ? FSM_FOUND : FSM_NOT_FOUND;

        fh_assert_is(fh_do_lookup(&h, T1, "tenant", keys[i], &l), want);
    }
    free(r);
    fh_close(&h);
}
END_TEST

/* ts 0 is a valid time and now - window must not wrap around near 0. */
START_TEST(test_nonce_window_near_epoch)
{
    struct fh h;
    struct fsm_settings s;
    struct fsm_claim c;
    struct fh_res r;

    fh_settings(&s);
    fh_init_booted(&h, _i, &s, 5000);
    nonce_ts(&c, "zero", 1, 0);
    fh_assert_is(fh_do_claim(&h, 5000, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, W + K);
    /* A ts far in the future is FUTURE, however large. */
    nonce_ts(&c, "huge", 2, UINT64_MAX);
    fh_assert_is(fh_do_claim(&h, 5000, &c, &r), FSM_FUTURE);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_window_over_max)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    nonce_ts(&c, "n1", 1, T1);
    c.window_ms = W + 1;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    /* window 0 with has_ts is out of range too. */
    c.window_ms = 0;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    /* Exactly max_window is fine. */
    c.window_ms = W;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_ttl_over_max)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    nonce_ttl(&c, "n1", 1, FSM_MAX_TTL_CEIL + 1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    c.ttl_ms = FSM_MAX_TTL_CEIL;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + FSM_MAX_TTL_CEIL);
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_needs_ttl_or_ts)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    fh_claim(&c, FSM_KIND_NONCE, "tenant", "n1", 1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    /* A window without has_ts is not a ts binding. */
    c.ts_ms = T1;
    c.window_ms = WIN;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_assert_is(fh_do_lookup(&h, T1, "tenant", "n1", &r), FSM_NOT_FOUND);
    fh_close(&h);
}
END_TEST

/* Field checks the decoder also makes (so only reachable directly). */
START_TEST(test_nonce_invalid_fields)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    char exec[FSM_EXECUTION_ID_MAX + 2];

    boot(&h, FH_DIRECT);
    memset(exec, 'x', sizeof(exec) - 1);
    exec[sizeof(exec) - 1] = '\0';

    nonce_ttl(&c, "n1", 1, 1000);
    fh_claim_exec(&c, exec); /* 129 bytes */
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);

    nonce_ttl(&c, "n1", 1, 1000);
    c.kind = (enum fsm_kind)0;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    c.kind = (enum fsm_kind)3;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);

    /* A NONCE claim carries no payload hash and no lease. */
    nonce_ttl(&c, "n1", 1, 1000);
    fh_claim_hash(&c, "h");
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    nonce_ttl(&c, "n1", 1, 1000);
    c.lease_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);

    /* 128 bytes of execution id are fine. */
    nonce_ttl(&c, "n1", 1, 1000);
    exec[FSM_EXECUTION_ID_MAX] = '\0';
    fh_claim_exec(&c, exec);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    fh_close(&h);
}
END_TEST

/* Live while expires_ms > now; at expires_ms exactly it is absent. */
START_TEST(test_nonce_expiry_exact)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fh_res *l = fh_res_array(1);

    boot(&h, _i);
    nonce_ttl(&c, "n1", 1, 10000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + 10000);
    nonce_ttl(&c, "n2", 1, 10000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);

    nonce_ttl(&c, "n1", 2, 10000);
    fh_assert_is(fh_do_claim(&h, T1 + 9999, &c, &r), FSM_REPLAYED);
    fh_assert_is(fh_do_lookup(&h, T1 + 9999, "tenant", "n1", l), FSM_FOUND);
    ck_assert_uint_eq(l->attempts, 1);

    fh_assert_is(fh_do_lookup(&h, T1 + 10000, "tenant", "n1", l),
                 FSM_NOT_FOUND);
    nonce_ttl(&c, "n1", 3, 10000);
    fh_assert_is(fh_do_claim(&h, T1 + 10000, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert(fh_rid_is(r.first_request_id, 3));
    ck_assert_uint_eq(r.first_index, h.index);
    ck_assert_uint_eq(r.first_time_ms, T1 + 10000);
    ck_assert_uint_eq(r.expires_ms, T1 + 20000);
    /* A new record: the old one's history is not inherited. */
    fh_assert_is(fh_do_lookup(&h, T1 + 10000, "tenant", "n1", l), FSM_FOUND);
    ck_assert_uint_eq(l->attempts, 0);
    ck_assert_uint_eq(l->n_attempt_list, 0);

    /* The accepted request id of an expired record is a fresh claim, not a
     * retry. */
    nonce_ttl(&c, "n2", 1, 10000);
    fh_assert_is(fh_do_claim(&h, T1 + 10001, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert_uint_eq(r.first_index, h.index);
    ck_assert_uint_eq(r.first_time_ms, T1 + 10001);
    free(l);
    fh_close(&h);
}
END_TEST

/* A ts-bound nonce cannot be accepted again after it was pruned. */
START_TEST(test_nonce_no_resurrection_after_prune)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    const uint64_t expires = T1 + W + K;

    boot(&h, _i);
    nonce_ts(&c, "n1", 1, T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, expires);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);

    /* Expired (maybe not pruned yet): already STALE. */
    nonce_ts(&c, "n1", 2, T1);
    c.window_ms = W;
    fh_assert_is(fh_do_claim(&h, expires, &c, &r), FSM_STALE);

    /* Far past retention: pruned. */
    fh_tick(&h, expires + 10 * 1024ull);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);

    nonce_ts(&c, "n1", 3, T1);
    fh_assert_is(fh_do_claim(&h, expires + 10 * 1024ull, &c, &r), FSM_STALE);
    nonce_ts(&c, "n1", 4, T1);
    c.window_ms = W; /* the largest window allowed */
    fh_assert_is(fh_do_claim(&h, expires + 10 * 1024ull, &c, &r), FSM_STALE);
    /* Even the originally accepted request id. */
    nonce_ts(&c, "n1", 1, T1);
    c.window_ms = W;
    fh_assert_is(fh_do_claim(&h, expires + 10 * 1024ull, &c, &r), FSM_STALE);
    /* And with a long TTL besides the ts. */
    nonce_ts(&c, "n1", 5, T1);
    c.window_ms = W;
    c.ttl_ms = FSM_MAX_TTL_CEIL;
    fh_assert_is(fh_do_claim(&h, expires + 10 * 1024ull, &c, &r), FSM_STALE);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_keys_independent)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    nonce_ts(&c, "k1", 1, T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    nonce_ts(&c, "k2", 2, T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    nonce_ts(&c, "k1", 3, T1);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_REPLAYED);
    nonce_ts(&c, "k2", 2, T1);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    ck_assert(fh_rid_is(r.first_request_id, 2));
    /* Prefixes are other keys. */
    nonce_ts(&c, "k", 4, T1);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_ACCEPTED);
    nonce_ts(&c, "k10", 5, T1);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 4);
    fh_assert_is(fh_do_lookup(&h, T1 + 3, "tenant", "k2", &r), FSM_FOUND);
    ck_assert_uint_eq(r.attempts, 1);
    fh_assert_is(fh_do_lookup(&h, T1 + 3, "tenant", "k1", &r), FSM_FOUND);
    ck_assert_uint_eq(r.attempts, 1);
    ck_assert(fh_rid_is(r.first_request_id, 1));
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_scopes_independent)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    fh_claim(&c, FSM_KIND_NONCE, "t1", "k", 1);
    fh_claim_ts(&c, T1, WIN);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    fh_claim(&c, FSM_KIND_NONCE, "t2", "k", 2);
    fh_claim_ts(&c, T1, WIN);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    /* (scope, key) is not the concatenation: ("ab","c") != ("a","bc"). */
    fh_claim(&c, FSM_KIND_NONCE, "ab", "c", 3);
    fh_claim_ts(&c, T1, WIN);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    fh_claim(&c, FSM_KIND_NONCE, "a", "bc", 4);
    fh_claim_ts(&c, T1, WIN);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 4);

    /* Forgetting in one scope leaves the other alone. */
    struct fsm_cmd fg = fh_cmd_forget("t1", "k");
    fh_assert_is(fh_do(&h, T1 + 1, &fg, &r), FSM_FORGOTTEN);
    fh_assert_is(fh_do_lookup(&h, T1 + 1, "t2", "k", &r), FSM_FOUND);
    ck_assert(fh_rid_is(r.first_request_id, 2));
    fh_assert_is(fh_do_lookup(&h, T1 + 1, "t1", "k", &r), FSM_NOT_FOUND);
    fh_close(&h);
}
END_TEST

/* scope 1..128 bytes, key 1..256 bytes. */
START_TEST(test_nonce_scope_key_lengths)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    char scope[FSM_SCOPE_MAX + 2];
    char key[FSM_KEY_MAX + 2];

    boot(&h, FH_DIRECT);
    memset(scope, 's', sizeof(scope) - 1);
    scope[sizeof(scope) - 1] = '\0'; /* 129 */
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0'; /* 257 */

    fh_claim(&c, FSM_KIND_NONCE, "", "k", 1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    fh_claim(&c, FSM_KIND_NONCE, scope, "k", 1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    fh_claim(&c, FSM_KIND_NONCE, "s", "", 1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    fh_claim(&c, FSM_KIND_NONCE, "s", key, 1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);

    /* The maximum lengths, directly and through the codec. */
    scope[FSM_SCOPE_MAX] = '\0';
    key[FSM_KEY_MAX] = '\0';
    for (int path = FH_DIRECT; path <= FH_PROTOBUF; path++) {
        h.path = (enum fh_path)path;
        fh_claim(&c, FSM_KIND_NONCE, scope, key, 10 + (uint64_t)path);
        c.ttl_ms = 1000;
        fh_assert_is(fh_do_claim(&h, T1, &c, &r),
                     path == FH_DIRECT ? FSM_ACCEPTED : FSM_REPLAYED);
    }
    fh_assert_is(fh_do_lookup(&h, T1, scope, key, &r), FSM_FOUND);
    ck_assert(fh_rid_is(r.first_request_id, 10));
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    fh_close(&h);
}
END_TEST

/* The encoder refuses what the decoder would refuse. */
START_TEST(test_nonce_encode_refuses_long_ident)
{
    struct fsm_claim c;
    struct fsm_cmd cmd;
    char scope[FSM_SCOPE_MAX + 2];
    char key[FSM_KEY_MAX + 2];
    uint8_t *buf = NULL;
    size_t len = 0;

    memset(scope, 's', sizeof(scope) - 1);
    scope[sizeof(scope) - 1] = '\0';
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';

    fh_claim(&c, FSM_KIND_NONCE, scope, "k", 1);
    c.ttl_ms = 1000;
    cmd = fh_cmd_claim(&c);
    ck_assert_int_eq(command_encode(&cmd, &buf, &len), FSM_E_TOOBIG);
    fh_claim(&c, FSM_KIND_NONCE, "s", key, 1);
    c.ttl_ms = 1000;
    cmd = fh_cmd_claim(&c);
    ck_assert_int_eq(command_encode(&cmd, &buf, &len), FSM_E_TOOBIG);
    cmd = fh_cmd_lookup(scope, "k");
    ck_assert_int_eq(command_encode(&cmd, &buf, &len), FSM_E_TOOBIG);
    cmd = fh_cmd_forget("s", key);
    ck_assert_int_eq(command_encode(&cmd, &buf, &len), FSM_E_TOOBIG);
}
END_TEST

/* An empty scope or key sent through the log: either the encoder refuses it
 * or the state machine answers INVALID_ARGUMENT; never a record. */
START_TEST(test_nonce_empty_ident_protobuf)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res r;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rv;

    boot(&h, FH_PROTOBUF);
    for (int which = 0; which < 2; which++) {
        fh_claim(&c, FSM_KIND_NONCE, which == 0 ? "" : "s",
                 which == 0 ? "k" : "", 1);
        c.ttl_ms = 1000;
        cmd = fh_cmd_claim(&c);
        rv = command_encode(&cmd, &buf, &len);
        if (rv != 0) {
            ck_assert_int_eq(rv, FSM_E_TOOBIG);
            continue;
        }
        {
            const uint8_t *const cmds[1] = {buf};
            const size_t lens[1] = {len};

            ck_assert_int_eq(
                fh_apply_encoded(&h, FSM_SCHEMA_VERSION, T1, cmds, lens, 1, &r),
                0);
        }
        free(buf);
        buf = NULL;
        fh_assert_outcome(&r, FSM_INVALID_ARGUMENT);
    }
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_close(&h);
}
END_TEST

/* Attempts: a total count, the first for ever, the last 4, oldest first. */
START_TEST(test_nonce_attempts_bounded)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fh_res *l = fh_res_array(2);
    char exec[20][16];
    uint64_t first_attempt_index = 0;
    uint64_t idx[20];
    int j;

    boot(&h, _i);
    nonce_ts(&c, "n1", 1, T1);
    fh_claim_exec(&c, "first");
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);

    for (j = 0; j < 20; j++) {
        snprintf(exec[j], sizeof(exec[j]), "exec-%d", j);
        if (j < 19) {
            nonce_ts(&c, "n1", 100 + (uint64_t)j, T1);
        } else {
            nonce_ts(&c, "n1", 1, T1); /* the last one is a retry */
        }
        fh_claim_exec(&c, exec[j]);
        fh_assert_is(fh_do_claim(&h, T1 + 1 + (uint64_t)j, &c, &r),
                     j < 19 ? FSM_REPLAYED : FSM_ACCEPTED);
        idx[j] = h.index;
        if (j == 0) {
            first_attempt_index = h.index;
        }
    }

    fh_assert_is(fh_do_lookup(&h, T1 + 100, "tenant", "n1", &l[0]), FSM_FOUND);
    ck_assert_uint_eq(l[0].attempts, 20);
    ck_assert_uint_eq(l[0].n_attempt_list, 1 + FSM_ATTEMPTS_LAST);
    /* The first attempt. */
    ck_assert(fh_rid_is(l[0].attempt_list[0].request_id, 100));
    ck_assert_uint_eq(l[0].attempt_list[0].index, first_attempt_index);
    ck_assert_uint_eq(l[0].attempt_list[0].time_ms, T1 + 1);
    ck_assert_int_eq(l[0].attempt_list[0].outcome, FSM_REPLAYED);
    ck_assert(!l[0].attempt_list[0].retry);
    ck_assert_uint_eq(l[0].attempt_list[0].execution_id_len, 6);
    ck_assert_mem_eq(l[0].attempt_list[0].execution_id, "exec-0", 6);
    /* The last 4: attempts 16..19, oldest first. */
    for (j = 16; j < 20; j++) {
        const struct fsm_attempt *a = &l[0].attempt_list[1 + j - 16];

        ck_assert(fh_rid_is(a->request_id, j < 19 ? 100 + (uint64_t)j : 1));
        ck_assert_uint_eq(a->index, idx[j]);
        ck_assert_uint_eq(a->time_ms, T1 + 1 + (uint64_t)j);
        ck_assert_int_eq(a->outcome, j < 19 ? FSM_REPLAYED : FSM_ACCEPTED);
        ck_assert(a->retry == (j == 19));
        ck_assert_uint_eq(a->execution_id_len, strlen(exec[j]));
        ck_assert_mem_eq(a->execution_id, exec[j], strlen(exec[j]));
    }

    /* Lookups record nothing. */
    fh_assert_is(fh_do_lookup(&h, T1 + 101, "tenant", "n1", &l[1]), FSM_FOUND);
    ck_assert_uint_eq(l[1].attempts, 20);
    fh_lookup_read(&h, "tenant", "n1", &l[1]);
    fh_assert_outcome(&l[1], FSM_FOUND);
    ck_assert_uint_eq(l[1].attempts, 20);
    ck_assert_uint_eq(l[1].n_attempt_list, 1 + FSM_ATTEMPTS_LAST);
    ck_assert(fh_rid_is(l[1].attempt_list[4].request_id, 1));
    free(l);
    fh_close(&h);
}
END_TEST

/* A few attempts: all kept, in order. */
START_TEST(test_nonce_attempts_few)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    int j;

    boot(&h, _i);
    nonce_ts(&c, "n1", 1, T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    for (j = 0; j < 3; j++) {
        nonce_ts(&c, "n1", 50 + (uint64_t)j, T1);
        fh_assert_is(fh_do_claim(&h, T1 + (uint64_t)j, &c, &r), FSM_REPLAYED);
    }
    fh_assert_is(fh_do_lookup(&h, T1 + 5, "tenant", "n1", &r), FSM_FOUND);
    ck_assert_uint_eq(r.attempts, 3);
    ck_assert_uint_eq(r.n_attempt_list, 3);
    for (j = 0; j < 3; j++) {
        ck_assert(fh_rid_is(r.attempt_list[j].request_id, 50 + (uint64_t)j));
        ck_assert_uint_eq(r.attempt_list[j].index, 3 + (uint64_t)j);
        ck_assert_uint_eq(r.attempt_list[j].execution_id_len, 0);
    }
    fh_close(&h);
}
END_TEST

/* fsm_now = max(fsm_now, leader_time): an older batch does not move it
 * back, and its commands run at the newer time. */
START_TEST(test_nonce_time_never_backwards)
{
    struct fh h;
    struct fsm_claim c[2];
    struct fsm_cmd cmds[2];
    struct fh_res *r = fh_res_array(2);

    boot(&h, _i);
    ck_assert_uint_eq(fsm_now(h.f), FH_T0);
    nonce_ttl(&c[0], "a", 1, 1000);
    fh_assert_is(fh_do_claim(&h, FH_T0 + 5000, &c[0], r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_now(h.f), FH_T0 + 5000);

    nonce_ttl(&c[0], "b", 2, 10000);
    /* FUTURE if now were FH_T0 + 1000; accepted at FH_T0 + 5000. */
    nonce_ts(&c[1], "c", 3, FH_T0 + 5000 + K);
    cmds[0] = fh_cmd_claim(&c[0]);
    cmds[1] = fh_cmd_claim(&c[1]);
    ck_assert_int_eq(fh_apply(&h, FH_T0 + 1000, cmds, 2, r), 0);
    ck_assert_uint_eq(fsm_now(h.f), FH_T0 + 5000);
    fh_assert_outcome(&r[0], FSM_ACCEPTED);
    ck_assert_uint_eq(r[0].first_time_ms, FH_T0 + 5000);
    ck_assert_uint_eq(r[0].expires_ms, FH_T0 + 15000);
    fh_assert_outcome(&r[1], FSM_ACCEPTED);

    /* "a" expired at FH_T0 + 6000; a batch stamped 0 does not revive it. */
    fh_tick(&h, FH_T0 + 6000);
    fh_tick(&h, 0);
    ck_assert_uint_eq(fsm_now(h.f), FH_T0 + 6000);
    fh_assert_is(fh_do_lookup(&h, FH_T0 + 1, "tenant", "a", r), FSM_NOT_FOUND);
    ck_assert_uint_eq(fsm_now(h.f), FH_T0 + 6000);
    free(r);
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_lookup)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    uint64_t claim_index;

    boot(&h, _i);
    fh_assert_is(fh_do_lookup(&h, T1, "tenant", "n1", &r), FSM_NOT_FOUND);
    ck_assert(!r.has_record);
    fh_lookup_read(&h, "tenant", "n1", &r);
    fh_assert_outcome(&r, FSM_NOT_FOUND);
    ck_assert(!r.has_record);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);

    nonce_ttl(&c, "n1", 9, 4000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    claim_index = h.index;
    fh_assert_is(fh_do_lookup(&h, T1 + 1, "tenant", "n1", &r), FSM_FOUND);
    ck_assert_int_eq(r.cmd, FSM_CMD_LOOKUP);
    ck_assert(r.has_record);
    ck_assert(!r.retry);
    ck_assert_int_eq(r.kind, FSM_KIND_NONCE);
    ck_assert_int_eq(r.state, FSM_STATE_SEEN);
    ck_assert(fh_rid_is(r.first_request_id, 9));
    ck_assert_uint_eq(r.first_index, claim_index);
    ck_assert_uint_eq(r.first_time_ms, T1);
    ck_assert_uint_eq(r.expires_ms, T1 + 4000);
    ck_assert_uint_eq(r.attempts, 0);
    /* A lookup never creates a record. */
    fh_assert_is(fh_do_lookup(&h, T1 + 1, "tenant", "other", &r),
                 FSM_NOT_FOUND);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    fh_close(&h);
}
END_TEST

START_TEST(test_nonce_forget)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd fg = fh_cmd_forget("tenant", "n1");
    struct fh_res r;

    boot(&h, _i);
    fh_assert_is(fh_do(&h, T1, &fg, &r), FSM_NOT_FOUND);

    nonce_ts(&c, "n1", 1, T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    nonce_ts(&c, "n1", 2, T1);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_REPLAYED);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);

    fh_assert_is(fh_do(&h, T1 + 2, &fg, &r), FSM_FORGOTTEN);
    ck_assert_int_eq(r.cmd, FSM_CMD_FORGET);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    fh_assert_is(fh_do_lookup(&h, T1 + 2, "tenant", "n1", &r), FSM_NOT_FOUND);
    fh_assert_is(fh_do(&h, T1 + 2, &fg, &r), FSM_NOT_FOUND);

    /* The key is open again, with no history. */
    nonce_ts(&c, "n1", 2, T1);
    fh_assert_is(fh_do_claim(&h, T1 + 3, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert(fh_rid_is(r.first_request_id, 2));
    ck_assert_uint_eq(r.first_index, h.index);
    ck_assert_uint_eq(r.first_time_ms, T1 + 3);
    fh_assert_is(fh_do_lookup(&h, T1 + 4, "tenant", "n1", &r), FSM_FOUND);
    ck_assert_uint_eq(r.attempts, 0);
    ck_assert_uint_eq(r.n_attempt_list, 0);
    fh_close(&h);
}
END_TEST

/* Forget of an expired record answers NOT_FOUND (it behaves as absent). */
START_TEST(test_nonce_forget_expired)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd fg = fh_cmd_forget("tenant", "n1");
    struct fh_res r;

    boot(&h, _i);
    nonce_ttl(&c, "n1", 1, 3000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    fh_assert_is(fh_do(&h, T1 + 3000, &fg, &r), FSM_NOT_FOUND);
    fh_close(&h);
}
END_TEST

Suite *nonce_suite(void)
{
    Suite *s = suite_create("nonce");
    TCase *tc = tcase_create("claim");

    tcase_add_loop_test(tc, test_nonce_first_accept, 0, 2);
    tcase_add_loop_test(tc, test_nonce_retention, 0, 2);
    tcase_add_loop_test(tc, test_nonce_replay_fresh_request_id, 0, 2);
    tcase_add_loop_test(tc, test_nonce_retry_same_request_id, 0, 2);
    tcase_add_loop_test(tc, test_nonce_window_edges, 0, 2);
    tcase_add_loop_test(tc, test_nonce_window_near_epoch, 0, 2);
    tcase_add_loop_test(tc, test_nonce_window_over_max, 0, 2);
    tcase_add_loop_test(tc, test_nonce_ttl_over_max, 0, 2);
    tcase_add_loop_test(tc, test_nonce_needs_ttl_or_ts, 0, 2);
    tcase_add_test(tc, test_nonce_invalid_fields);
    tcase_add_loop_test(tc, test_nonce_expiry_exact, 0, 2);
    tcase_add_loop_test(tc, test_nonce_no_resurrection_after_prune, 0, 2);
    tcase_add_loop_test(tc, test_nonce_keys_independent, 0, 2);
    tcase_add_loop_test(tc, test_nonce_scopes_independent, 0, 2);
    tcase_add_test(tc, test_nonce_scope_key_lengths);
    tcase_add_test(tc, test_nonce_encode_refuses_long_ident);
    tcase_add_test(tc, test_nonce_empty_ident_protobuf);
    suite_add_tcase(s, tc);

    tc = tcase_create("attempts");
    tcase_add_loop_test(tc, test_nonce_attempts_bounded, 0, 2);
    tcase_add_loop_test(tc, test_nonce_attempts_few, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("time");
    tcase_add_loop_test(tc, test_nonce_time_never_backwards, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("lookup_forget");
    tcase_add_loop_test(tc, test_nonce_lookup, 0, 2);
    tcase_add_loop_test(tc, test_nonce_forget, 0, 2);
    tcase_add_loop_test(tc, test_nonce_forget_expired, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
