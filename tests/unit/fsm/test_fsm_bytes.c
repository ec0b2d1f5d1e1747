/* Per-shard record bytes (fsm_vp_bytes): the shares of the 4096 virtual
 * partitions always add up to the state machine's physical record bytes
 * (fsm_bytes plus the pruning backlog), through every change of a record
 * and across a snapshot restore. White-box: reads the physical counter
 * from fsm_int.h, since the public fsm_bytes leaves the backlog out.
 * Loop tests run once per path (_i: FH_DIRECT, FH_PROTOBUF). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/fsm.h"
#include "fsm/fsm_int.h"
#include "fsm_helpers.h"

Suite *bytes_suite(void);

#define T1  (FH_T0 + 1000ull)
#define DAY 86400000ull

/* Sum of the shares, asserted equal to the physical bytes; returns it. */
static uint64_t assert_shares(const struct fsm *f)
{
    uint64_t sum = 0;

    for (uint32_t v = 0; v < FSM_N_VPS; v++) {
        sum += fsm_vp_bytes(f, v);
    }
    ck_assert_uint_eq(fsm_vp_bytes(f, FSM_N_VPS), 0);
    ck_assert_uint_eq(sum, f->bytes);
    ck_assert_uint_ge(sum, fsm_bytes(f));
    return sum;
}

/* Claim @n idempotent keys "k<i>" of scope "s" (ttl @ttl) and complete the
 * even ones with a result, release the odd ones terminally with an error. */
static void claim_and_finish(struct fh *h, int n, uint64_t ttl, uint64_t at)
{
    static const char result[] = "a result of some length";
    static const char error[] = "failed";
    struct fsm_claim c;
    struct fh_res r;
    char key[16];

    for (int i = 0; i < n; i++) {
        struct fsm_cmd cmd;

        snprintf(key, sizeof key, "k%d", i);
        fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", key, 1 + (uint64_t)i);
        c.ttl_ms = ttl;
        fh_assert_is(fh_do_claim(h, at, &c, &r), FSM_ACCEPTED);
        cmd = i % 2 == 0 ? fh_cmd_complete("s", key, r.owner_token, result,
                                           sizeof result)
                         : fh_cmd_release("s", key, r.owner_token, true, error,
                                          sizeof error);
        fh_assert_is(fh_do(h, at, &cmd, NULL),
                     i % 2 == 0 ? FSM_COMPLETED : FSM_FAILED);
        assert_shares(h->f);
    }
}

START_TEST(test_bytes_shards_sum)
{
    struct fh h, g;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_cmd cmd;
    uint8_t *snap;
    size_t len;
    uint64_t before;
    char key[16];
    int nonzero = 0;

    fh_init_booted(&h, _i, NULL, FH_T0);
    ck_assert_uint_eq(assert_shares(h.f), 0);
    claim_and_finish(&h, 200, DAY, T1);
    /* Nonces with repeated claims (kept attempts) on a short TTL. */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "n%d", i);
        for (uint64_t rid = 0; rid < 7; rid++) {
            fh_claim(&c, FSM_KIND_NONCE, "t", key, 1000 + 10 * i + rid);
            fh_claim_exec(&c, "exec-id");
            c.ttl_ms = 5000;
            fh_do_claim(&h, T1, &c, &r);
        }
        assert_shares(h.f);
    }
    for (uint32_t v = 0; v < FSM_N_VPS; v++) {
        nonzero += fsm_vp_bytes(h.f, v) != 0;
    }
    ck_assert_int_gt(nonzero, 100); /* spread over many shards */
    /* Forget takes a record's bytes out of its shard. */
    before = assert_shares(h.f);
    cmd = fh_cmd_forget("s", "k0");
    fh_assert_is(fh_do(&h, T1, &cmd, NULL), FSM_FORGOTTEN);
    ck_assert_uint_lt(assert_shares(h.f), before);
    /* Expiry: the nonces' tick passes and pruning (4096 visits a batch,
     * enough here) frees them from their shards in the same batch. */
    before = assert_shares(h.f);
    fh_tick(&h, T1 + 10000);
    ck_assert_uint_eq(fsm_prune_backlog(h.f), 0);
    ck_assert_uint_lt(assert_shares(h.f), before);
    ck_assert_uint_eq(assert_shares(h.f), fsm_bytes(h.f));
    /* Restore rebuilds the shares, equal shard by shard. */
    snap = fh_snapshot(h.f, &len);
    fh_init(&g, _i);
    ck_assert_int_eq(fsm_restore(g.f, snap, len, NULL), 0);
    for (uint32_t v = 0; v < FSM_N_VPS; v++) {
        ck_assert_uint_eq(fsm_vp_bytes(g.f, v), fsm_vp_bytes(h.f, v));
    }
    assert_shares(g.f);
    free(snap);
    fh_close(&g);
    fh_close(&h);
}
END_TEST

/* A restore taken while a backlog exists holds only counted records: its
 * shares are the counted bytes. */
START_TEST(test_bytes_restore_drops_backlog)
{
    struct fh h, g;
    struct fsm_claim c;
    struct fh_res r;
    uint8_t *snap;
    size_t len;
    char key[16];

    fh_init_booted(&h, _i, NULL, FH_T0);
    for (int i = 0; i < 9000; i++) {
        snprintf(key, sizeof key, "e%d", i);
        fh_claim(&c, FSM_KIND_NONCE, "s", key, 1 + (uint64_t)i);
        c.ttl_ms = i % 3 == 0 ? DAY : 2000;
        fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    }
    fh_tick(&h, T1 + 5000); /* 6000 expire; one batch frees at most 4096 */
    ck_assert_uint_gt(fsm_prune_backlog(h.f), 0);
    assert_shares(h.f);
    snap = fh_snapshot(h.f, &len);
    fh_init(&g, _i);
    ck_assert_int_eq(fsm_restore(g.f, snap, len, NULL), 0);
    ck_assert_uint_eq(assert_shares(g.f), fsm_bytes(h.f));
    free(snap);
    fh_close(&g);
    fh_close(&h);
}
END_TEST

Suite *bytes_suite(void)
{
    Suite *s = suite_create("fsm-bytes");
    TCase *tc = tcase_create("shards");

    tcase_add_loop_test(tc, test_bytes_shards_sum, 0, 2);
    tcase_add_loop_test(tc, test_bytes_restore_drops_backlog, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
