/* IDEMPOTENT claims, Complete and Release: docs/state-machine.md "Claim",
 * "Complete", "Release". Loop tests run once per path (_i: FH_DIRECT,
 * FH_PROTOBUF) unless said otherwise.
 *
 * Just past ~1,000 lines on purpose: Claim, Complete and Release of the same
 * record are one life cycle, tested through the same helpers. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *idempotent_suite(void);

#define W     300000ull /* fh_settings() max_window */
#define K     60000ull  /* fh_settings() max_skew */
#define LEASE 10000ull
#define TTL   3600000ull
#define T1    (FH_T0 + 1000ull)
#define SCOPE "shop"

/* A state machine bootstrapped with fh_settings() at FH_T0 (index 1). */
static void boot(struct fh *h, int path)
{
    struct fsm_settings s;

    fh_settings(&s);
    fh_init_booted(h, path, &s, FH_T0);
}

/* An IDEMPOTENT claim of (SCOPE, @key): ttl TTL, payload hash "h1", lease
 * LEASE. */
static void idem(struct fsm_claim *c, const char *key, uint64_t rid)
{
    fh_claim(c, FSM_KIND_IDEMPOTENT, SCOPE, key, rid);
    c->ttl_ms = TTL;
    fh_claim_hash(c, "h1");
    c->lease_ms = LEASE;
}

/* Claim (SCOPE, @key) with fh_rid(@rid) at @time, assert ACCEPTED and
 * return the owner token. */
static struct fsm_token own(struct fh *h,
                            uint64_t time,
                            const char *key,
                            uint64_t rid)
{
    struct fsm_claim c;
    struct fh_res *r = fh_res_array(1);
    struct fsm_token t;

    idem(&c, key, rid);
    fh_assert_is(fh_do_claim(h, time, &c, r), FSM_ACCEPTED);
    t = r->owner_token;
    free(r);
    return t;
}

static enum fsm_outcome complete(struct fh *h,
                                 uint64_t time,
                                 const char *key,
                                 struct fsm_token t,
                                 const char *result,
                                 struct fh_res *out)
{
    struct fsm_cmd cmd =
        fh_cmd_complete(SCOPE, key, t, result, result ? strlen(result) : 0);

    return fh_do(h, time, &cmd, out);
}

static enum fsm_outcome release(struct fh *h,
                                uint64_t time,
                                const char *key,
                                struct fsm_token t,
                                bool terminal,
                                const char *error,
                                struct fh_res *out)
{
    struct fsm_cmd cmd = fh_cmd_release(SCOPE, key, t, terminal, error,
                                        error ? strlen(error) : 0);

    return fh_do(h, time, &cmd, out);
}

static enum fsm_outcome lookup(struct fh *h,
                               uint64_t time,
                               const char *key,
                               struct fh_res *out)
{
    return fh_do_lookup(h, time, SCOPE, key, out);
}

START_TEST(test_idem_first_claim)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res *r = fh_res_array(2);

    boot(&h, _i);
    idem(&c, "order-1", 1);
    fh_claim_exec(&c, "pod-a");
    fh_assert_is(fh_do_claim(&h, T1, &c, &r[0]), FSM_ACCEPTED);
    fh_assert_is(lookup(&h, T1 + 1, "order-1", &r[1]), FSM_FOUND);
    for (int i = 0; i < 2; i++) {
        ck_assert(r[i].has_record);
        ck_assert(!r[i].retry);
        ck_assert_int_eq(r[i].kind, FSM_KIND_IDEMPOTENT);
        ck_assert_int_eq(r[i].state, FSM_STATE_PENDING);
        ck_assert(fh_rid_is(r[i].first_request_id, 1));
        ck_assert_uint_eq(r[i].first_index, 2);
        ck_assert_uint_eq(r[i].first_time_ms, T1);
        fh_assert_token(r[i].owner_token, fh_token(FH_GROUP_ID, 2, 0));
        ck_assert_uint_eq(r[i].owner_attempt, 1);
        ck_assert_uint_eq(r[i].lease_expires_ms, T1 + LEASE);
        ck_assert_uint_eq(r[i].expires_ms, T1 + TTL);
        ck_assert_uint_eq(r[i].attempts, 0);
        ck_assert_uint_eq(r[i].result_len, 0);
    }
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    free(r);
    fh_close(&h);
}
END_TEST

/* Retention includes the lease: a short TTL cannot drop a leased record. */
START_TEST(test_idem_retention_covers_lease)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    idem(&c, "o", 1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + LEASE);
    /* With a ts binding (and no TTL) the nonce rule applies as well. */
    idem(&c, "p", 2);
    c.ttl_ms = 0;
    fh_claim_ts(&c, T1, 60000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + W + K);
    /* And its window is checked like a nonce's. */
    idem(&c, "q", 3);
    fh_claim_ts(&c, T1 - 60001, 60000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_STALE);
    idem(&c, "q", 3);
    fh_claim_ts(&c, T1 + K + 1, 60000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_FUTURE);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    fh_close(&h);
}
END_TEST

START_TEST(test_idem_in_progress)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    own(&h, T1, "o", 1);
    idem(&c, "o", 2);
    fh_assert_is(fh_do_claim(&h, T1 + 3000, &c, &r), FSM_IN_PROGRESS);
    ck_assert_uint_eq(r.retry_after_ms, LEASE - 3000);
    ck_assert(!r.retry);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    idem(&c, "o", 3);
    fh_assert_is(fh_do_claim(&h, T1 + LEASE - 1, &c, &r), FSM_IN_PROGRESS);
    ck_assert_uint_eq(r.retry_after_ms, 1);

    /* Nothing about the owner changed; both were recorded. */
    fh_assert_is(lookup(&h, T1 + LEASE - 1, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, 2, 0));
    ck_assert_uint_eq(r.owner_attempt, 1);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + LEASE);
    ck_assert(fh_rid_is(r.first_request_id, 1));
    ck_assert_uint_eq(r.attempts, 2);
    ck_assert_uint_eq(r.n_attempt_list, 2);
    ck_assert_int_eq(r.attempt_list[0].outcome, FSM_IN_PROGRESS);
    ck_assert(fh_rid_is(r.attempt_list[1].request_id, 3));
    fh_close(&h);
}
END_TEST

START_TEST(test_idem_retry_same_request_id)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    own(&h, T1, "o", 1);
    idem(&c, "o", 1);
    fh_assert_is(fh_do_claim(&h, T1 + 5000, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, 2, 0));
    ck_assert_uint_eq(r.owner_attempt, 1);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + LEASE); /* unchanged */
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);

    /* Still the owner once the lease ran out, as long as nobody took
     * over: ACCEPTED retry, lease unchanged. */
    fh_assert_is(fh_do_claim(&h, T1 + LEASE + 5, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, 2, 0));
    ck_assert_uint_eq(r.owner_attempt, 1);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + LEASE);

    fh_assert_is(lookup(&h, T1 + LEASE + 5, "o", &r), FSM_FOUND);
    ck_assert_uint_eq(r.attempts, 2);
    ck_assert_int_eq(r.attempt_list[0].outcome, FSM_ACCEPTED);
    ck_assert(r.attempt_list[0].retry);
    fh_close(&h);
}
END_TEST

/* Takeover at lease_expires exactly, and fencing of the old owner. */
START_TEST(test_idem_takeover_and_fencing)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token old_token, new_token;
    uint64_t takeover_index;

    boot(&h, _i);
    old_token = own(&h, T1, "o", 1);
    fh_assert_token(old_token, fh_token(FH_GROUP_ID, 2, 0));

    idem(&c, "o", 2);
    fh_assert_is(fh_do_claim(&h, T1 + LEASE, &c, &r), FSM_ACCEPTED);
    takeover_index = h.index;
    ck_assert(!r.retry);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    new_token = fh_token(FH_GROUP_ID, takeover_index, 0);
    fh_assert_token(r.owner_token, new_token);
    ck_assert_uint_eq(r.owner_attempt, 2);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + LEASE + LEASE);
    ck_assert_uint_ge(r.expires_ms, T1 + LEASE + TTL);
    /* The first accepted claim never changes. */
    ck_assert(fh_rid_is(r.first_request_id, 1));
    ck_assert_uint_eq(r.first_index, 2);
    ck_assert_uint_eq(r.first_time_ms, T1);

    /* The old owner is fenced: nothing changes. */
    fh_assert_is(complete(&h, T1 + LEASE + 1, "o", old_token, "late", &r),
                 FSM_NOT_OWNER);
    fh_assert_is(release(&h, T1 + LEASE + 2, "o", old_token, true, "late", &r),
                 FSM_NOT_OWNER);
    fh_assert_is(release(&h, T1 + LEASE + 2, "o", old_token, false, NULL, &r),
                 FSM_NOT_OWNER);
    fh_assert_is(lookup(&h, T1 + LEASE + 3, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    fh_assert_token(r.owner_token, new_token);
    ck_assert_uint_eq(r.owner_attempt, 2);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + LEASE + LEASE);
    ck_assert_uint_eq(r.result_len, 0);
    ck_assert_uint_eq(r.stored_error_len, 0);

    /* The old owner's request id is no longer the owner's: IN_PROGRESS. */
    idem(&c, "o", 1);
    fh_assert_is(fh_do_claim(&h, T1 + LEASE + 4, &c, &r), FSM_IN_PROGRESS);
    ck_assert_uint_eq(r.retry_after_ms, LEASE - 4);
    /* The new owner's retry is a retry with the new token. */
    idem(&c, "o", 2);
    fh_assert_is(fh_do_claim(&h, T1 + LEASE + 5, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_token(r.owner_token, new_token);

    fh_assert_is(complete(&h, T1 + LEASE + 6, "o", new_token, "done", &r),
                 FSM_COMPLETED);
    fh_assert_is(complete(&h, T1 + LEASE + 7, "o", old_token, "late", &r),
                 FSM_NOT_OWNER);
    fh_assert_is(lookup(&h, T1 + LEASE + 8, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_COMPLETED);
    ck_assert_uint_eq(r.result_len, 4);
    ck_assert_mem_eq(r.result, "done", 4);
    fh_close(&h);
}
END_TEST

/* A takeover extends the record's expiry to at least a fresh claim's. */
START_TEST(test_idem_takeover_extends_expiry)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    idem(&c, "o", 1);
    c.ttl_ms = 20000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + 20000);
    idem(&c, "o", 2);
    c.ttl_ms = 20000;
    fh_assert_is(fh_do_claim(&h, T1 + 15000, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.owner_attempt, 2);
    ck_assert_uint_ge(r.expires_ms, T1 + 15000 + 20000);
    /* Still there after the first claim's retention. */
    fh_assert_is(lookup(&h, T1 + 20000 + 5 * 1024ull, "o", &r), FSM_FOUND);
    ck_assert_uint_eq(r.owner_attempt, 2);
    fh_close(&h);
}
END_TEST

/* A takeover is a new acceptance: a claim with has_ts must pass the window
 * check first; outside it the outcome is STALE or FUTURE and the owner does
 * not change. Retries and IN_PROGRESS are not acceptances. */
START_TEST(test_idem_takeover_window_checked)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    const uint64_t now = T1 + LEASE + 60001; /* ts T1 is now outside 60 s */

    boot(&h, _i);
    idem(&c, "o", 1);
    c.ttl_ms = 0;
    fh_claim_ts(&c, T1, 60000);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, T1 + W + K);

    /* Inside the lease: IN_PROGRESS, whatever the ts. */
    idem(&c, "o", 2);
    c.ttl_ms = 0;
    fh_claim_ts(&c, T1 - 60001, 60000);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_IN_PROGRESS);

    /* Lease expired, stale or future ts: no takeover. */
    idem(&c, "o", 2);
    c.ttl_ms = 0;
    fh_claim_ts(&c, T1, 60000);
    fh_assert_is(fh_do_claim(&h, now, &c, &r), FSM_STALE);
    idem(&c, "o", 3);
    c.ttl_ms = 0;
    fh_claim_ts(&c, now + K + 1, 60000);
    fh_assert_is(fh_do_claim(&h, now, &c, &r), FSM_FUTURE);
    fh_assert_is(lookup(&h, now, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, 2, 0));
    ck_assert_uint_eq(r.owner_attempt, 1);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + LEASE);
    ck_assert_uint_eq(r.expires_ms, T1 + W + K);

    /* The owner's own retry with its (now stale) ts is still a retry. */
    idem(&c, "o", 1);
    c.ttl_ms = 0;
    fh_claim_ts(&c, T1, 60000);
    fh_assert_is(fh_do_claim(&h, now, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, 2, 0));

    /* Inside the window: ACCEPTED takeover. */
    idem(&c, "o", 4);
    c.ttl_ms = 0;
    fh_claim_ts(&c, now - 60000, 60000);
    fh_assert_is(fh_do_claim(&h, now, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert_uint_eq(r.owner_attempt, 2);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, h.index, 0));
    ck_assert_uint_eq(r.lease_expires_ms, now + LEASE);
    ck_assert_uint_ge(r.expires_ms, now - 60000 + W + K);
    fh_close(&h);
}
END_TEST

/* The same for a takeover of a RELEASED record. */
START_TEST(test_idem_takeover_released_window_checked)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t1;

    boot(&h, _i);
    t1 = own(&h, T1, "o", 1);
    fh_assert_is(release(&h, T1 + 1, "o", t1, false, NULL, &r), FSM_RELEASED);
    idem(&c, "o", 2);
    fh_claim_ts(&c, T1 + 2 - 60001, 60000);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_STALE);
    idem(&c, "o", 2);
    fh_claim_ts(&c, T1 + 2 + K + 1, 60000);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_FUTURE);
    fh_assert_is(lookup(&h, T1 + 2, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_RELEASED);
    fh_assert_token(r.owner_token, t1);
    ck_assert_uint_eq(r.owner_attempt, 1);
    idem(&c, "o", 2);
    fh_claim_ts(&c, T1 + 2 + K, 60000);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.owner_attempt, 2);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    fh_close(&h);
}
END_TEST

START_TEST(test_idem_takeover_after_released)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t1;

    boot(&h, _i);
    t1 = own(&h, T1, "o", 1);
    fh_assert_is(release(&h, T1 + 100, "o", t1, false, NULL, &r), FSM_RELEASED);
    ck_assert(!r.retry);
    fh_assert_is(lookup(&h, T1 + 101, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_RELEASED);
    fh_assert_token(r.owner_token, t1);

    /* Well inside the released owner's lease: ACCEPTED takeover. */
    idem(&c, "o", 2);
    fh_assert_is(fh_do_claim(&h, T1 + 200, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, h.index, 0));
    ck_assert_uint_eq(r.owner_attempt, 2);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + 200 + LEASE);
    ck_assert(fh_rid_is(r.first_request_id, 1));

    fh_assert_is(complete(&h, T1 + 300, "o", t1, "x", &r), FSM_NOT_OWNER);
    fh_assert_is(lookup(&h, T1 + 301, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    ck_assert_uint_eq(r.owner_attempt, 2);
    fh_close(&h);
}
END_TEST

/* RELEASED with any request id, the released owner's included. */
START_TEST(test_idem_takeover_after_released_same_request_id)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t1;

    boot(&h, _i);
    t1 = own(&h, T1, "o", 1);
    fh_assert_is(release(&h, T1 + 100, "o", t1, false, NULL, &r), FSM_RELEASED);
    idem(&c, "o", 1);
    fh_assert_is(fh_do_claim(&h, T1 + 200, &c, &r), FSM_ACCEPTED);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, h.index, 0));
    ck_assert_uint_eq(r.owner_attempt, 2);
    fh_close(&h);
}
END_TEST

START_TEST(test_idem_complete_then_duplicate)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t1;

    boot(&h, _i);
    t1 = own(&h, T1, "o", 1);
    fh_assert_is(complete(&h, T1 + 10, "o", t1, "result-1", &r), FSM_COMPLETED);
    ck_assert(!r.retry);
    ck_assert_int_eq(r.cmd, FSM_CMD_COMPLETE);
    fh_assert_is(lookup(&h, T1 + 11, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_COMPLETED);
    ck_assert_uint_eq(r.result_len, 8);
    ck_assert_mem_eq(r.result, "result-1", 8);
    fh_assert_token(r.owner_token, t1);

    /* Every later claim: DUPLICATE with the stored result. */
    for (uint64_t rid = 1; rid <= 3; rid++) {
        idem(&c, "o", rid);
        fh_assert_is(fh_do_claim(&h, T1 + 20 + rid, &c, &r), FSM_DUPLICATE);
        ck_assert_int_eq(r.state, FSM_STATE_COMPLETED);
        ck_assert_uint_eq(r.result_len, 8);
        ck_assert_mem_eq(r.result, "result-1", 8);
        ck_assert(fh_rid_is(r.first_request_id, 1));
    }
    /* Long after the lease, just before expiry. */
    idem(&c, "o", 4);
    fh_assert_is(fh_do_claim(&h, T1 + TTL - 1, &c, &r), FSM_DUPLICATE);
    ck_assert_mem_eq(r.result, "result-1", 8);

    /* The owner's retry of Complete: COMPLETED retry, stored result kept. */
    fh_assert_is(complete(&h, T1 + TTL - 1, "o", t1, "other", &r),
                 FSM_COMPLETED);
    ck_assert(r.retry);
    ck_assert_uint_eq(r.result_len, 8);
    ck_assert_mem_eq(r.result, "result-1", 8);
    fh_assert_is(lookup(&h, T1 + TTL - 1, "o", &r), FSM_FOUND);
    ck_assert_uint_eq(r.result_len, 8);
    ck_assert_mem_eq(r.result, "result-1", 8);
    ck_assert_uint_eq(r.attempts, 4);
    fh_close(&h);
}
END_TEST

/* Complete after the lease ran out but before anyone took over. */
START_TEST(test_idem_complete_after_lease_expired)
{
    struct fh h;
    struct fh_res r;
    struct fsm_token t1;

    boot(&h, _i);
    t1 = own(&h, T1, "o", 1);
    fh_assert_is(complete(&h, T1 + LEASE + 500, "o", t1, "", &r),
                 FSM_COMPLETED);
    fh_assert_is(lookup(&h, T1 + LEASE + 501, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_COMPLETED);
    ck_assert_uint_eq(r.result_len, 0);
    fh_close(&h);
}
END_TEST

START_TEST(test_idem_release_terminal)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t1;

    boot(&h, _i);
    t1 = own(&h, T1, "o", 1);
    fh_assert_is(release(&h, T1 + 10, "o", t1, true, "boom", &r), FSM_FAILED);
    ck_assert(!r.retry);
    ck_assert_int_eq(r.cmd, FSM_CMD_RELEASE);
    fh_assert_is(lookup(&h, T1 + 11, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_FAILED);
    ck_assert_uint_eq(r.stored_error_len, 4);
    ck_assert_mem_eq(r.stored_error, "boom", 4);

    for (uint64_t rid = 1; rid <= 2; rid++) {
        idem(&c, "o", rid);
        fh_assert_is(fh_do_claim(&h, T1 + LEASE + rid, &c, &r), FSM_FAILED);
        ck_assert_int_eq(r.state, FSM_STATE_FAILED);
        ck_assert_uint_eq(r.stored_error_len, 4);
        ck_assert_mem_eq(r.stored_error, "boom", 4);
    }
    /* FAILED + same token: FAILED retry; the stored error is kept. */
    fh_assert_is(release(&h, T1 + LEASE + 5, "o", t1, true, "again", &r),
                 FSM_FAILED);
    ck_assert(r.retry);
    fh_assert_is(release(&h, T1 + LEASE + 6, "o", t1, false, NULL, &r),
                 FSM_FAILED);
    ck_assert(r.retry);
    /* Complete with this token on a FAILED record: CONFLICT. */
    fh_assert_is(complete(&h, T1 + LEASE + 7, "o", t1, "late", &r),
                 FSM_CONFLICT);
    fh_assert_is(lookup(&h, T1 + LEASE + 8, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_FAILED);
    ck_assert_uint_eq(r.stored_error_len, 4);
    ck_assert_mem_eq(r.stored_error, "boom", 4);
    ck_assert_uint_eq(r.result_len, 0);
    fh_close(&h);
}
END_TEST

/* RELEASED + not terminal: retry; RELEASED + terminal: FAILED; COMPLETED +
 * Release: CONFLICT; RELEASED + Complete: CONFLICT. */
START_TEST(test_idem_release_transitions)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t1, t2;

    boot(&h, _i);
    t1 = own(&h, T1, "a", 1);
    fh_assert_is(release(&h, T1 + 1, "a", t1, false, NULL, &r), FSM_RELEASED);
    fh_assert_is(release(&h, T1 + 2, "a", t1, false, NULL, &r), FSM_RELEASED);
    ck_assert(r.retry);
    fh_assert_is(complete(&h, T1 + 3, "a", t1, "x", &r), FSM_CONFLICT);
    fh_assert_is(lookup(&h, T1 + 3, "a", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_RELEASED);
    fh_assert_is(release(&h, T1 + 4, "a", t1, true, "gave up", &r), FSM_FAILED);
    fh_assert_is(lookup(&h, T1 + 5, "a", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_FAILED);
    ck_assert_uint_eq(r.stored_error_len, 7);
    ck_assert_mem_eq(r.stored_error, "gave up", 7);
    idem(&c, "a", 9);
    fh_assert_is(fh_do_claim(&h, T1 + 6, &c, &r), FSM_FAILED);
    ck_assert_mem_eq(r.stored_error, "gave up", 7);

    t2 = own(&h, T1, "b", 2);
    fh_assert_is(complete(&h, T1 + 7, "b", t2, "ok", &r), FSM_COMPLETED);
    fh_assert_is(release(&h, T1 + 8, "b", t2, false, NULL, &r), FSM_CONFLICT);
    fh_assert_is(release(&h, T1 + 8, "b", t2, true, "no", &r), FSM_CONFLICT);
    fh_assert_is(lookup(&h, T1 + 9, "b", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_COMPLETED);
    ck_assert_mem_eq(r.result, "ok", 2);
    ck_assert_uint_eq(r.stored_error_len, 0);
    fh_close(&h);
}
END_TEST

/* Bring (SCOPE, "o") into @state (PENDING, COMPLETED, RELEASED or FAILED)
 * with owner request id 1 and hash "h1". */
static void make_state(struct fh *h, enum fsm_state state)
{
    struct fh_res *r = fh_res_array(1);
    struct fsm_token t = own(h, T1, "o", 1);

    switch (state) {
        case FSM_STATE_PENDING:
            break;
        case FSM_STATE_COMPLETED:
            fh_assert_is(complete(h, T1 + 1, "o", t, "res", r), FSM_COMPLETED);
            break;
        case FSM_STATE_RELEASED:
            fh_assert_is(release(h, T1 + 1, "o", t, false, NULL, r),
                         FSM_RELEASED);
            break;
        case FSM_STATE_FAILED:
            fh_assert_is(release(h, T1 + 1, "o", t, true, "err", r),
                         FSM_FAILED);
            break;
        default:
            ck_abort_msg("bad state %d", (int)state);
    }
    free(r);
}

static const enum fsm_state conflict_states[4] = {
    FSM_STATE_PENDING, FSM_STATE_COMPLETED, FSM_STATE_RELEASED,
    FSM_STATE_FAILED};

/* A different payload hash is CONFLICT in every state; _i / 2 picks the
 * state, _i % 2 the path. */
START_TEST(test_idem_conflict_hash)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    enum fsm_state state = conflict_states[_i / 2];
    static const char *const hashes[3] = {"h2", "h1x", "H1"};

    boot(&h, _i % 2);
    make_state(&h, state);
    for (int j = 0; j < 3; j++) {
        idem(&c, "o", 10 + (uint64_t)j);
        fh_claim_hash(&c, hashes[j]);
        fh_assert_is(fh_do_claim(&h, T1 + 2 + (uint64_t)j, &c, &r),
                     FSM_CONFLICT);
    }
    /* Also with the owner's own request id. */
    idem(&c, "o", 1);
    fh_claim_hash(&c, "h2");
    fh_assert_is(fh_do_claim(&h, T1 + 5, &c, &r), FSM_CONFLICT);
    /* No hash at all is different from "h1". */
    idem(&c, "o", 20);
    fh_claim_hash(&c, NULL);
    fh_assert_is(fh_do_claim(&h, T1 + 6, &c, &r), FSM_CONFLICT);

    /* The record is untouched; the conflicts are recorded as attempts. */
    fh_assert_is(lookup(&h, T1 + 7, "o", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, state);
    ck_assert_uint_eq(r.owner_attempt, 1);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, 2, 0));
    ck_assert_uint_eq(r.attempts, 5);
    ck_assert_int_eq(r.attempt_list[0].outcome, FSM_CONFLICT);
    ck_assert(fh_rid_is(r.attempt_list[0].request_id, 10));
    fh_close(&h);
}
END_TEST

/* none vs some, in both directions; none vs none matches. */
START_TEST(test_idem_conflict_none_vs_some)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    idem(&c, "none", 1);
    fh_claim_hash(&c, NULL);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    idem(&c, "none", 2);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_CONFLICT);
    idem(&c, "none", 3);
    fh_claim_hash(&c, NULL);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_IN_PROGRESS);

    idem(&c, "some", 4);
    fh_assert_is(fh_do_claim(&h, T1 + 3, &c, &r), FSM_ACCEPTED);
    idem(&c, "some", 5);
    fh_claim_hash(&c, NULL);
    fh_assert_is(fh_do_claim(&h, T1 + 4, &c, &r), FSM_CONFLICT);
    /* The owner's retry without its hash is a conflict too. */
    idem(&c, "some", 4);
    fh_claim_hash(&c, NULL);
    fh_assert_is(fh_do_claim(&h, T1 + 5, &c, &r), FSM_CONFLICT);
    fh_close(&h);
}
END_TEST

/* A claim of the other kind is CONFLICT, whatever its request id. */
START_TEST(test_idem_conflict_kind)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    /* IDEMPOTENT record, NONCE claims. */
    own(&h, T1, "idem", 1);
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "idem", 2);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_CONFLICT);
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "idem", 1);
    c.ttl_ms = 1000;
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_CONFLICT);

    /* NONCE record, IDEMPOTENT claims. */
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "nonce", 3);
    c.ttl_ms = 100000;
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_ACCEPTED);
    idem(&c, "nonce", 4);
    fh_assert_is(fh_do_claim(&h, T1 + 3, &c, &r), FSM_CONFLICT);
    idem(&c, "nonce", 3);
    fh_claim_hash(&c, NULL);
    fh_assert_is(fh_do_claim(&h, T1 + 3, &c, &r), FSM_CONFLICT);

    fh_assert_is(lookup(&h, T1 + 4, "idem", &r), FSM_FOUND);
    ck_assert_int_eq(r.kind, FSM_KIND_IDEMPOTENT);
    ck_assert_int_eq(r.state, FSM_STATE_PENDING);
    fh_assert_is(lookup(&h, T1 + 4, "nonce", &r), FSM_FOUND);
    ck_assert_int_eq(r.kind, FSM_KIND_NONCE);
    ck_assert_int_eq(r.state, FSM_STATE_SEEN);
    fh_close(&h);
}
END_TEST

START_TEST(test_idem_complete_release_absent_or_nonce)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t = fh_token(FH_GROUP_ID, 2, 0);
    struct fsm_token t2;

    boot(&h, _i);
    fh_assert_is(complete(&h, T1, "absent", t, "x", &r), FSM_NOT_FOUND);
    fh_assert_is(release(&h, T1, "absent", t, false, NULL, &r), FSM_NOT_FOUND);
    fh_assert_is(release(&h, T1, "absent", t, true, "e", &r), FSM_NOT_FOUND);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);

    /* A NONCE record: CONFLICT, even with a token that looks right. */
    fh_claim(&c, FSM_KIND_NONCE, SCOPE, "nonce", 1);
    c.ttl_ms = 100000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    t = fh_token(FH_GROUP_ID, h.index, 0);
    fh_assert_is(complete(&h, T1 + 1, "nonce", t, "x", &r), FSM_CONFLICT);
    fh_assert_is(release(&h, T1 + 1, "nonce", t, false, NULL, &r),
                 FSM_CONFLICT);
    fh_assert_is(release(&h, T1 + 1, "nonce", t, true, "e", &r), FSM_CONFLICT);
    fh_assert_is(lookup(&h, T1 + 2, "nonce", &r), FSM_FOUND);
    ck_assert_int_eq(r.state, FSM_STATE_SEEN);

    /* An expired IDEMPOTENT record is absent. */
    idem(&c, "short", 2);
    c.ttl_ms = 1000; /* retention: the lease, which is longer */
    fh_assert_is(fh_do_claim(&h, T1 + 3, &c, &r), FSM_ACCEPTED);
    t2 = r.owner_token;
    ck_assert_uint_eq(r.expires_ms, T1 + 3 + LEASE);
    fh_assert_is(complete(&h, T1 + 3 + LEASE, "short", t2, "x", &r),
                 FSM_NOT_FOUND);
    fh_assert_is(release(&h, T1 + 3 + LEASE, "short", t2, false, NULL, &r),
                 FSM_NOT_FOUND);
    fh_close(&h);
}
END_TEST

/* An expired PENDING record is absent for a claim: a fresh first claim. */
START_TEST(test_idem_expired_is_absent)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;

    boot(&h, _i);
    idem(&c, "o", 1);
    c.ttl_ms = 20000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    idem(&c, "o", 2);
    fh_claim_hash(&c, "other-payload");
    fh_assert_is(fh_do_claim(&h, T1 + 20000, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert_uint_eq(r.owner_attempt, 1);
    ck_assert(fh_rid_is(r.first_request_id, 2));
    ck_assert_uint_eq(r.first_index, h.index);
    fh_assert_token(r.owner_token, fh_token(FH_GROUP_ID, h.index, 0));
    fh_close(&h);
}
END_TEST

/* The codec carries a 64 KiB result and refuses one byte more. */
START_TEST(test_idem_result_limit_protobuf)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res *r = fh_res_array(1);
    uint8_t *big = malloc(FSM_RESULT_MAX + 1);
    uint8_t *buf = NULL;
    size_t len = 0;
    struct fsm_token t;

    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < FSM_RESULT_MAX + 1; i++) {
        big[i] = (uint8_t)(i * 131 + 7);
    }
    boot(&h, FH_PROTOBUF);
    t = own(&h, T1, "o", 1);

    cmd = fh_cmd_complete(SCOPE, "o", t, big, FSM_RESULT_MAX + 1);
    ck_assert_int_eq(command_encode(&cmd, &buf, &len), FSM_E_TOOBIG);

    cmd = fh_cmd_complete(SCOPE, "o", t, big, FSM_RESULT_MAX);
    fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_COMPLETED);
    idem(&c, "o", 2);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, r), FSM_DUPLICATE);
    ck_assert_uint_eq(r->result_len, FSM_RESULT_MAX);
    ck_assert_mem_eq(r->result, big, FSM_RESULT_MAX);
    free(big);
    free(r);
    fh_close(&h);
}
END_TEST

/* The codec carries a 1 KiB error and refuses one byte more. */
START_TEST(test_idem_error_limit_protobuf)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res *r = fh_res_array(1);
    uint8_t big[FSM_ERROR_MAX + 1];
    uint8_t *buf = NULL;
    size_t len = 0;
    struct fsm_token t;

    memset(big, 'e', sizeof(big));
    big[FSM_ERROR_MAX - 1] = 'z';
    boot(&h, FH_PROTOBUF);
    t = own(&h, T1, "o", 1);
    cmd = fh_cmd_release(SCOPE, "o", t, true, big, FSM_ERROR_MAX + 1);
    ck_assert_int_eq(command_encode(&cmd, &buf, &len), FSM_E_TOOBIG);
    cmd = fh_cmd_release(SCOPE, "o", t, true, big, FSM_ERROR_MAX);
    fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_FAILED);
    idem(&c, "o", 2);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, r), FSM_FAILED);
    ck_assert_uint_eq(r->stored_error_len, FSM_ERROR_MAX);
    ck_assert_mem_eq(r->stored_error, big, FSM_ERROR_MAX);
    free(r);
    fh_close(&h);
}
END_TEST

/* Straight to fsm_apply_cmds, a result or error over the limit is out of
 * range: INVALID_ARGUMENT, nothing stored. */
START_TEST(test_idem_result_over_limit_direct)
{
    struct fh h;
    struct fsm_cmd cmd;
    struct fh_res *r = fh_res_array(1);
    uint8_t *big = calloc(1, FSM_RESULT_MAX + 1);
    struct fsm_token t;

    ck_assert_ptr_nonnull(big);
    boot(&h, FH_DIRECT);
    t = own(&h, T1, "o", 1);
    cmd = fh_cmd_complete(SCOPE, "o", t, big, FSM_RESULT_MAX + 1);
    fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_INVALID_ARGUMENT);
    cmd = fh_cmd_release(SCOPE, "o", t, true, big, FSM_ERROR_MAX + 1);
    fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_INVALID_ARGUMENT);
    fh_assert_is(lookup(&h, T1 + 2, "o", r), FSM_FOUND);
    ck_assert_int_eq(r->state, FSM_STATE_PENDING);
    ck_assert_uint_eq(r->result_len, 0);
    ck_assert_uint_eq(r->stored_error_len, 0);
    /* The exact limit is fine. */
    cmd = fh_cmd_complete(SCOPE, "o", t, big, FSM_RESULT_MAX);
    fh_assert_is(fh_do(&h, T1 + 3, &cmd, r), FSM_COMPLETED);
    free(big);
    free(r);
    fh_close(&h);
}
END_TEST

START_TEST(test_idem_lease_limits)
{
    struct fh h;
    struct fsm_claim c;
    struct fsm_settings s;
    struct fsm_cmd cmd;
    struct fh_res r;

    boot(&h, _i);
    idem(&c, "a", 1);
    c.lease_ms = 60001; /* max_lease + 1 */
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert(r.has_reason);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    c.lease_ms = 60000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + 60000);

    /* 0: min(30 s, max_lease). */
    idem(&c, "b", 2);
    c.lease_ms = 0;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + FSM_DEFAULT_LEASE_MS);

    fh_settings(&s);
    s.max_lease_ms = 10000;
    cmd = fh_cmd_settings(&s);
    fh_assert_is(fh_do(&h, T1 + 1, &cmd, &r), FSM_OK);
    idem(&c, "c", 3);
    c.lease_ms = 0;
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.lease_expires_ms, T1 + 2 + 10000);
    idem(&c, "d", 4);
    c.lease_ms = 10001;
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_INVALID_ARGUMENT);
    fh_close(&h);
}
END_TEST

/* Payload hash up to 64 bytes (direct: the decoder refuses more too). */
START_TEST(test_idem_hash_length)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    char hash[FSM_PAYLOAD_HASH_MAX + 2];

    boot(&h, FH_DIRECT);
    memset(hash, 'h', sizeof(hash) - 1);
    hash[sizeof(hash) - 1] = '\0';
    idem(&c, "o", 1);
    fh_claim_hash(&c, hash);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    hash[FSM_PAYLOAD_HASH_MAX] = '\0';
    idem(&c, "o", 1);
    fh_claim_hash(&c, hash);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    /* A hash differing in its last byte conflicts. */
    hash[FSM_PAYLOAD_HASH_MAX - 1] = 'x';
    idem(&c, "o", 2);
    fh_claim_hash(&c, hash);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_CONFLICT);
    fh_close(&h);
}
END_TEST

/* Two claims of one key in one batch: the first owns it. */
START_TEST(test_idem_same_key_one_batch)
{
    struct fh h;
    struct fsm_claim c[2];
    struct fsm_cmd cmds[2];
    struct fh_res *r = fh_res_array(2);

    boot(&h, _i);
    idem(&c[0], "o", 1);
    idem(&c[1], "o", 2);
    cmds[0] = fh_cmd_claim(&c[0]);
    cmds[1] = fh_cmd_claim(&c[1]);
    ck_assert_int_eq(fh_apply(&h, T1, cmds, 2, r), 0);
    fh_assert_outcome(&r[0], FSM_ACCEPTED);
    fh_assert_token(r[0].owner_token, fh_token(FH_GROUP_ID, h.index, 0));
    fh_assert_outcome(&r[1], FSM_IN_PROGRESS);
    ck_assert_uint_eq(r[1].retry_after_ms, LEASE);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    free(r);
    fh_close(&h);
}
END_TEST

/* The slot is the command's position in its batch. */
START_TEST(test_idem_slots_distinct)
{
    struct fh h;
    struct fsm_claim c[3];
    struct fsm_cmd cmds[4];
    struct fh_res *r = fh_res_array(4);

    boot(&h, _i);
    idem(&c[0], "a", 1);
    idem(&c[1], "b", 2);
    idem(&c[2], "a", 1);
    cmds[0] = fh_cmd_lookup(SCOPE, "a");
    cmds[1] = fh_cmd_claim(&c[0]);
    cmds[2] = fh_cmd_claim(&c[1]);
    cmds[3] = fh_cmd_claim(&c[2]);
    ck_assert_int_eq(fh_apply(&h, T1, cmds, 4, r), 0);
    fh_assert_outcome(&r[0], FSM_NOT_FOUND);
    fh_assert_outcome(&r[1], FSM_ACCEPTED);
    fh_assert_outcome(&r[2], FSM_ACCEPTED);
    fh_assert_outcome(&r[3], FSM_ACCEPTED);
    fh_assert_token(r[1].owner_token, fh_token(FH_GROUP_ID, h.index, 1));
    fh_assert_token(r[2].owner_token, fh_token(FH_GROUP_ID, h.index, 2));
    ck_assert(!r[1].retry);
    ck_assert(!r[2].retry);
    /* The retry in the same batch keeps the first token. */
    ck_assert(r[3].retry);
    fh_assert_token(r[3].owner_token, fh_token(FH_GROUP_ID, h.index, 1));
    ck_assert_uint_eq(fsm_n_records(h.f), 2);

    /* Tokens are per claim: b's token does not complete a. */
    {
        struct fsm_cmd cmd = fh_cmd_complete(
            SCOPE, "a", fh_token(FH_GROUP_ID, h.index, 2), "x", 1);

        fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_NOT_OWNER);
        cmd = fh_cmd_complete(SCOPE, "a", fh_token(FH_GROUP_ID + 1, 2, 1), "x",
                              1);
        fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_NOT_OWNER);
        cmd = fh_cmd_complete(SCOPE, "a", fh_token(FH_GROUP_ID, 2, 1), "x", 1);
        fh_assert_is(fh_do(&h, T1 + 1, &cmd, r), FSM_COMPLETED);
    }
    free(r);
    fh_close(&h);
}
END_TEST

Suite *idempotent_suite(void)
{
    Suite *s = suite_create("idempotent");
    TCase *tc = tcase_create("claim");

    tcase_add_loop_test(tc, test_idem_first_claim, 0, 2);
    tcase_add_loop_test(tc, test_idem_retention_covers_lease, 0, 2);
    tcase_add_loop_test(tc, test_idem_in_progress, 0, 2);
    tcase_add_loop_test(tc, test_idem_retry_same_request_id, 0, 2);
    tcase_add_loop_test(tc, test_idem_takeover_and_fencing, 0, 2);
    tcase_add_loop_test(tc, test_idem_takeover_extends_expiry, 0, 2);
    tcase_add_loop_test(tc, test_idem_takeover_window_checked, 0, 2);
    tcase_add_loop_test(tc, test_idem_takeover_released_window_checked, 0, 2);
    tcase_add_loop_test(tc, test_idem_takeover_after_released, 0, 2);
    tcase_add_loop_test(tc, test_idem_takeover_after_released_same_request_id,
                        0, 2);
    tcase_add_loop_test(tc, test_idem_expired_is_absent, 0, 2);
    tcase_add_loop_test(tc, test_idem_lease_limits, 0, 2);
    tcase_add_test(tc, test_idem_hash_length);
    tcase_add_loop_test(tc, test_idem_same_key_one_batch, 0, 2);
    tcase_add_loop_test(tc, test_idem_slots_distinct, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("complete_release");
    tcase_add_loop_test(tc, test_idem_complete_then_duplicate, 0, 2);
    tcase_add_loop_test(tc, test_idem_complete_after_lease_expired, 0, 2);
    tcase_add_loop_test(tc, test_idem_release_terminal, 0, 2);
    tcase_add_loop_test(tc, test_idem_release_transitions, 0, 2);
    tcase_add_loop_test(tc, test_idem_complete_release_absent_or_nonce, 0, 2);
    tcase_add_test(tc, test_idem_result_limit_protobuf);
    tcase_add_test(tc, test_idem_error_limit_protobuf);
    tcase_add_test(tc, test_idem_result_over_limit_direct);
    suite_add_tcase(s, tc);

    tc = tcase_create("conflict");
    tcase_add_loop_test(tc, test_idem_conflict_hash, 0, 8);
    tcase_add_loop_test(tc, test_idem_conflict_none_vs_some, 0, 2);
    tcase_add_loop_test(tc, test_idem_conflict_kind, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
