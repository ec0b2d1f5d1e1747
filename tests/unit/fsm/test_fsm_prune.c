/* test_fsm_prune: budgeted expiry (FSM_PRUNE_BUDGET wheel visits per batch).
 *
 * A mass expiry is freed over many batches, and meanwhile nothing can tell:
 * expired keys are NOT_FOUND and claim ACCEPTED anew, the counts drop at
 * once, max_records ignores the backlog, and a replica restored from a
 * snapshot taken mid-backlog (which has no backlog) gives the same answers
 * and the same snapshot bytes as the one still freeing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *prune_suite(void);

#define CHUNK 4096

static void key_of(char *buf, size_t len, uint64_t i)
{
    snprintf(buf, len, "k%08llu", (unsigned long long)i);
}

/* Apply NONCE claims of keys [first, first + n) with ttl @ttl (and
 * IDEMPOTENT ones for every @idem_every-th key, 0: none) at @time, in
 * batches of CHUNK; assert each outcome is @want. */
static void claim_range(struct fh *h,
                        uint64_t first,
                        uint64_t n,
                        uint64_t ttl,
                        uint64_t idem_every,
                        uint64_t time,
                        enum fsm_outcome want)
{
    static char keys[CHUNK][16];
    static struct fsm_claim claims[CHUNK];
    static struct fsm_cmd cmds[CHUNK];
    struct fh_res *out = fh_res_array(CHUNK);

    for (uint64_t done = 0; done < n;) {
        size_t k = 0;
        for (; k < CHUNK && done < n; k++, done++) {
            uint64_t i = first + done;
            bool idem = idem_every != 0 && i % idem_every == 0;
            key_of(keys[k], sizeof keys[k], i);
            fh_claim(&claims[k], idem ? FSM_KIND_IDEMPOTENT : FSM_KIND_NONCE,
                     "s", keys[k], 1000000 + i + time);
            claims[k].ttl_ms = ttl + (i % 7) * 1100; /* several ticks */
            cmds[k] = fh_cmd_claim(&claims[k]);
        }
        ck_assert_int_eq(fh_apply(h, time, cmds, k, out), 0);
        for (size_t j = 0; j < k; j++) {
            fh_assert_outcome(&out[j], want);
            ck_assert(!out[j].retry);
        }
    }
    free(out);
}

static void booted(struct fh *h, uint64_t max_records)
{
    struct fsm_settings s;

    fh_settings(&s);
    s.max_records = max_records;
    /* Room for every PENDING record's result reservation: max_records
     * binds, never max_bytes. */
    s.max_bytes = 16ull << 30;
    fh_init_booted(h, FH_DIRECT, &s, FH_T0);
}

/* 10^5 records expire together: freed over many batches, while every
 * lookup of an expired key is NOT_FOUND and every claim ACCEPTED anew. */
START_TEST(mass_expiry_takes_batches)
{
    struct fh h;
    uint64_t t = FH_T0 + 1000, backlog, prev, batches = 0, fresh = 0;
    struct fh_res r;
    char key[16];

    booted(&h, 200000);
    claim_range(&h, 0, 100000, 10000, 0, t, FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 100000);
    ck_assert_uint_eq(fsm_prune_backlog(h.f), 0);
    t += 30000; /* past every retention */
    fh_tick(&h, t);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    backlog = fsm_prune_backlog(h.f);
    ck_assert_uint_ge(backlog, 100000 - FSM_PRUNE_BUDGET);
    while (backlog > 0) {
        /* A lookup and a fresh claim of keys whose records wait. */
        key_of(key, sizeof key, 99999 - batches * 3);
        fh_assert_is(fh_do_lookup(&h, t, "s", key, &r), FSM_NOT_FOUND);
        prev = fsm_prune_backlog(h.f);
        ck_assert_uint_le(backlog - prev, FSM_PRUNE_BUDGET);
        claim_range(&h, 99998 - batches * 3, 1, 10000, 0, t, FSM_ACCEPTED);
        fresh++;
        ck_assert_uint_eq(fsm_n_records(h.f), fresh);
        backlog = fsm_prune_backlog(h.f);
        batches++;
        ck_assert_uint_lt(batches, 200);
    }
    ck_assert_uint_ge(batches, 100000 / (2 * FSM_PRUNE_BUDGET));
    ck_assert_uint_eq(fsm_n_records(h.f), fresh);
    fh_close(&h);
}
END_TEST

/* Apply one mixed batch to both replicas and compare every answer, the
 * counts and the snapshot bytes. */
static void both(struct fh *a,
                 struct fh *b,
                 uint64_t time,
                 const struct fsm_cmd *cmds,
                 size_t n)
{
    struct fh_res *ra = fh_res_array(n), *rb = fh_res_array(n);
    uint8_t *sa, *sb;
    size_t la, lb;

    ck_assert_int_eq(fh_apply(a, time, cmds, n, ra), 0);
    ck_assert_int_eq(fh_apply(b, time, cmds, n, rb), 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(ra[i].outcome, rb[i].outcome);
        ck_assert_int_eq(ra[i].retry, rb[i].retry);
        ck_assert_uint_eq(ra[i].expires_ms, rb[i].expires_ms);
        ck_assert_uint_eq(ra[i].attempts, rb[i].attempts);
    }
    ck_assert_uint_eq(fsm_n_records(a->f), fsm_n_records(b->f));
    ck_assert_uint_eq(fsm_bytes(a->f), fsm_bytes(b->f));
    sa = fh_snapshot(a->f, &la);
    sb = fh_snapshot(b->f, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_msg(memcmp(sa, sb, la) == 0, "snapshots differ");
    free(sa);
    free(sb);
    free(ra);
    free(rb);
}

/* A replica restored from a snapshot mid-backlog agrees with the one that
 * keeps freeing its backlog, batch after batch, including at max_records. */
START_TEST(restored_mid_backlog_agrees)
{
    struct fh a, b;
    uint64_t t = FH_T0 + 1000;
    uint8_t *snap;
    size_t len;
    char msg[ERR_MSG_SIZE];
    char keys[64][16];
    struct fsm_claim claims[64];
    struct fsm_cmd cmds[64];
    struct fsm_settings set;
    struct fh_res *out = fh_res_array(64);
    int refused = 0;

    booted(&a, 40000);
    claim_range(&a, 0, 30000, 5000, 5, t, FSM_ACCEPTED);
    claim_range(&a, 30000, 5000, 600000, 3, t, FSM_ACCEPTED);
    t += 40000; /* the first 30000 expire (leases too), over several ticks */
    fh_tick(&a, t);
    ck_assert_uint_eq(fsm_n_records(a.f), 5000);
    ck_assert_uint_gt(fsm_prune_backlog(a.f), 20000);
    /* Below what the tables hold with the backlog, above what counts. */
    fh_settings(&set);
    set.max_records = 6000;
    set.max_bytes = 16ull << 30;
    cmds[0] = fh_cmd_settings(&set);
    fh_assert_is(fh_do(&a, t, &cmds[0], NULL), FSM_OK);

    snap = fh_snapshot(a.f, &len);
    fh_init(&b, FH_DIRECT);
    ck_assert_int_eq(fsm_restore(b.f, snap, len, msg), 0);
    b.index = a.index;
    ck_assert_uint_eq(fsm_prune_backlog(b.f), 0);
    fh_assert_snapshot(&b, snap, len);
    free(snap);

    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 64; i++) {
            /* Expired keys, live keys and new keys, both kinds. */
            uint64_t k = (uint64_t)(round * 977 + i * 613) % 45000;
            key_of(keys[i], sizeof keys[i], k);
            fh_claim(&claims[i],
                     i % 4 == 0 ? FSM_KIND_IDEMPOTENT : FSM_KIND_NONCE, "s",
                     keys[i], 5000000 + (uint64_t)round * 64 + i);
            claims[i].ttl_ms = 3000 + (uint64_t)i * 700;
            cmds[i] = i % 5 == 4 ? fh_cmd_lookup("s", keys[i])
                                 : fh_cmd_claim(&claims[i]);
        }
        both(&a, &b, t, cmds, 64);
        t += 1500;
    }
    /* Fill to max_records: both refuse at the same claim. */
    for (int round = 0; round < 30; round++) {
        for (int i = 0; i < 64; i++) {
            key_of(keys[i], sizeof keys[i],
                   200000 + (uint64_t)round * 64 + (uint64_t)i);
            fh_claim(&claims[i], FSM_KIND_NONCE, "s", keys[i],
                     9000000 + (uint64_t)round * 64 + i);
            claims[i].ttl_ms = 600000;
            cmds[i] = fh_cmd_claim(&claims[i]);
        }
        both(&a, &b, t, cmds, 64);
    }
    /* Reached: one more claim is refused on both. */
    key_of(keys[0], sizeof keys[0], 300000);
    fh_claim(&claims[0], FSM_KIND_NONCE, "s", keys[0], 99999999);
    claims[0].ttl_ms = 600000;
    cmds[0] = fh_cmd_claim(&claims[0]);
    ck_assert_int_eq(fh_apply(&a, t, cmds, 1, out), 0);
    refused += out[0].outcome == FSM_RESOURCE_EXHAUSTED;
    ck_assert_int_eq(fh_apply(&b, t, cmds, 1, out), 0);
    refused += out[0].outcome == FSM_RESOURCE_EXHAUSTED;
    ck_assert_int_eq(refused, 2);
    ck_assert_uint_eq(fsm_n_records(a.f), 6000);
    free(out);
    fh_close(&a);
    fh_close(&b);
}
END_TEST

Suite *prune_suite(void)
{
    Suite *s = suite_create("prune");
    TCase *tc = tcase_create("prune");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mass_expiry_takes_batches);
    tcase_add_test(tc, restored_mid_backlog_agrees);
    suite_add_tcase(s, tc);
    return s;
}
