/* fsm_pending.c: the PENDING count and the oldest one's first-claim time
 * follow every transition (accept, complete, release, takeover, terminal
 * failure, forget, expiry) and survive a snapshot restore. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "fsm_helpers.h"

Suite *pending_suite(void);

#define TTL   3600000ull
#define LEASE 10000ull
#define SCOPE "pend"
#define TICK  1024ull /* fsm_pending.c counts by 1.024 s ticks */

static void boot(struct fh *h)
{
    struct fsm_settings s;

    fh_settings(&s);
    fh_init_booted(h, FH_DIRECT, &s, FH_T0);
}

static struct fsm_token own(struct fh *h,
                            uint64_t time,
                            const char *key,
                            uint64_t rid,
                            enum fsm_outcome want)
{
    struct fsm_claim c;
    struct fh_res *r = fh_res_array(1);
    struct fsm_token t;

    fh_claim(&c, FSM_KIND_IDEMPOTENT, SCOPE, key, rid);
    c.ttl_ms = TTL;
    fh_claim_hash(&c, "h1");
    c.lease_ms = LEASE;
    fh_assert_is(fh_do_claim(h, time, &c, r), want);
    t = r->owner_token;
    free(r);
    return t;
}

/* The oldest pending first claim, or 0 if none. */
static uint64_t oldest(struct fh *h)
{
    uint64_t ms = 0;

    return fsm_pending_oldest_ms(h->f, &ms) ? ms : 0;
}

static uint64_t tick_of(uint64_t ms)
{
    return ms / TICK * TICK;
}

START_TEST(count_and_oldest_follow_transitions)
{
    struct fh h;
    struct fh_res *r = fh_res_array(1);
    struct fsm_token ta, tb, tc;
    struct fsm_claim n;
    struct fsm_cmd cmd;
    const uint64_t t1 = FH_T0 + 5000, t2 = FH_T0 + 9000, t3 = FH_T0 + 20000;

    boot(&h);
    ck_assert_uint_eq(fsm_n_pending(h.f), 0);
    ck_assert_uint_eq(oldest(&h), 0);
    ta = own(&h, t1, "a", 1, FSM_ACCEPTED);
    tb = own(&h, t2, "b", 2, FSM_ACCEPTED);
    tc = own(&h, t3, "c", 3, FSM_ACCEPTED);
    fh_claim(&n, FSM_KIND_NONCE, SCOPE, "nonce", 9); /* never pending */
    n.ttl_ms = TTL;
    fh_assert_is(fh_do_claim(&h, t3, &n, r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_pending(h.f), 3);
    ck_assert_uint_eq(oldest(&h), tick_of(t1));

    /* The oldest completes: b is the oldest now. */
    cmd = fh_cmd_complete(SCOPE, "a", ta, "ok", 2);
    fh_assert_is(fh_do(&h, t3, &cmd, r), FSM_COMPLETED);
    ck_assert_uint_eq(fsm_n_pending(h.f), 2);
    ck_assert_uint_eq(oldest(&h), tick_of(t2));

    /* b released: not pending; taken over: pending again, counted from its
     * first claim. */
    cmd = fh_cmd_release(SCOPE, "b", tb, false, NULL, 0);
    fh_assert_is(fh_do(&h, t3, &cmd, r), FSM_RELEASED);
    ck_assert_uint_eq(fsm_n_pending(h.f), 1);
    ck_assert_uint_eq(oldest(&h), tick_of(t3));
    tb = own(&h, t3 + 1000, "b", 4, FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_pending(h.f), 2);
    ck_assert_uint_eq(oldest(&h), tick_of(t2));

    /* A takeover of an expired lease stays one pending record. */
    own(&h, t3 + LEASE + 1, "c", 5, FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_pending(h.f), 2);

    /* Terminal failure and forget leave too. */
    cmd = fh_cmd_release(SCOPE, "b", tb, true, "boom", 4);
    fh_assert_is(fh_do(&h, t3 + LEASE + 2, &cmd, r), FSM_FAILED);
    ck_assert_uint_eq(fsm_n_pending(h.f), 1);
    ck_assert_uint_eq(oldest(&h), tick_of(t3));
    cmd = fh_cmd_forget(SCOPE, "c");
    fh_assert_is(fh_do(&h, t3 + LEASE + 3, &cmd, r), FSM_FORGOTTEN);
    ck_assert_uint_eq(fsm_n_pending(h.f), 0);
    ck_assert_uint_eq(oldest(&h), 0);
    (void)tc;
    free(r);
    fh_close(&h);
}
END_TEST

START_TEST(expiry_and_restore)
{
    struct fh h, g;
    uint8_t *snap;
    size_t len;
    char errmsg[ERR_MSG_SIZE];
    const uint64_t t1 = FH_T0 + 2000, t2 = FH_T0 + 600000;

    boot(&h);
    own(&h, t1, "old", 1, FSM_ACCEPTED);
    for (uint64_t i = 0; i < 50; i++) {
        char key[16];

        snprintf(key, sizeof key, "k%llu", (unsigned long long)i);
        own(&h, t2 + i * 3000, key, 10 + i, FSM_ACCEPTED);
    }
    ck_assert_uint_eq(fsm_n_pending(h.f), 51);
    ck_assert_uint_eq(oldest(&h), tick_of(t1));

    /* The restored state machine counts the same. */
    snap = fh_snapshot(h.f, &len);
    fh_init(&g, FH_DIRECT);
    ck_assert_int_eq(fsm_restore(g.f, snap, len, errmsg), 0);
    ck_assert_uint_eq(fsm_n_pending(g.f), 51);
    ck_assert_uint_eq(oldest(&g), tick_of(t1));
    free(snap);
    fh_close(&g);

    /* "old" expires (ttl): once the wheel has freed it, the oldest is the
     * first of the others. */
    fh_tick(&h, t1 + TTL + 5000);
    ck_assert_uint_eq(fsm_n_pending(h.f), 50);
    ck_assert_uint_eq(oldest(&h), tick_of(t2));
    fh_close(&h);
}
END_TEST

Suite *pending_suite(void)
{
    Suite *s = suite_create("pending");
    TCase *tc = tcase_create("pending");

    tcase_add_test(tc, count_and_oldest_follow_transitions);
    tcase_add_test(tc, expiry_and_restore);
    suite_add_tcase(s, tc);
    return s;
}
