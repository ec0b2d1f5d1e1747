/* Capacity bounds, pruning and time: docs/state-machine.md "Claim" (step 2),
 * "Time" and "Memory". Loop tests run once per path (_i: FH_DIRECT,
 * FH_PROTOBUF). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *limits_suite(void);

#define W    300000ull /* fh_settings() max_window */
#define K    60000ull  /* fh_settings() max_skew */
#define T1   (FH_T0 + 1000ull)
#define TICK 1024ull
#define DAY  86400000ull

/* Bounds on fsm_n_records at log time @now for records that expire at
 * @exp[0..n): every live one (exp > now) is counted; every one whose tick
 * has certainly ended (exp + TICK <= now) is gone. */
static void assert_pruned(const struct fsm *f,
                          const uint64_t *exp,
                          size_t n,
                          uint64_t now)
{
    uint64_t lo = 0, hi = 0, got = fsm_n_records(f);

    for (size_t i = 0; i < n; i++) {
        lo += exp[i] > now;
        hi += exp[i] + TICK > now;
    }
    ck_assert_msg(lo <= got && got <= hi,
                  "at %llu: %llu records, want %llu..%llu",
                  (unsigned long long)now, (unsigned long long)got,
                  (unsigned long long)lo, (unsigned long long)hi);
}

static void boot_with(struct fh *h,
                      int path,
                      uint64_t max_records,
                      uint64_t max_bytes,
                      uint64_t time)
{
    struct fsm_settings s;

    fh_settings(&s);
    if (max_records != 0) {
        s.max_records = max_records;
    }
    if (max_bytes != 0) {
        s.max_bytes = max_bytes;
    }
    fh_init_booted(h, path, &s, time);
}

/* A NONCE claim of ("s", @key) with a TTL. */
static void nonce_ttl(struct fsm_claim *c,
                      const char *key,
                      uint64_t rid,
                      uint64_t ttl)
{
    fh_claim(c, FSM_KIND_NONCE, "s", key, rid);
    c->ttl_ms = ttl;
}

START_TEST(test_limits_max_records)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_token t;
    char key[16];
    uint64_t bytes;
    int i;

    boot_with(&h, _i, 10, 0, FH_T0);
    for (i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        nonce_ttl(&c, key, 1 + (uint64_t)i, DAY);
        fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    }
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "idem", 50);
    c.ttl_ms = DAY;
    c.lease_ms = 10000;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    t = r.owner_token;
    ck_assert_uint_eq(fsm_n_records(h.f), 10);
    bytes = fsm_bytes(h.f);

    /* New records are refused, of either kind; nothing is stored. */
    nonce_ttl(&c, "k10", 100, DAY);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_RESOURCE_EXHAUSTED);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "idem2", 101);
    c.ttl_ms = DAY;
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_RESOURCE_EXHAUSTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 10);
    ck_assert_uint_eq(fsm_bytes(h.f), bytes);
    fh_assert_is(fh_do_lookup(&h, T1 + 1, "s", "k10", &r), FSM_NOT_FOUND);

    /* Existing records keep answering. */
    nonce_ttl(&c, "k0", 200, DAY);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_REPLAYED);
    nonce_ttl(&c, "k0", 1, DAY);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_is(fh_do_lookup(&h, T1 + 2, "s", "k0", &r), FSM_FOUND);
    ck_assert_uint_eq(r.attempts, 2);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "idem", 51);
    c.ttl_ms = DAY;
    c.lease_ms = 10000;
    fh_assert_is(fh_do_claim(&h, T1 + 3, &c, &r), FSM_IN_PROGRESS);
    fh_assert_is(fh_do_claim(&h, T1 + 10000, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.owner_attempt, 2);
    {
        struct fsm_cmd cmd =
            fh_cmd_complete("s", "idem", r.owner_token, "done", 4);

        fh_assert_is(fh_do(&h, T1 + 10001, &cmd, &r), FSM_COMPLETED);
        cmd = fh_cmd_complete("s", "idem", t, "late", 4);
        fh_assert_is(fh_do(&h, T1 + 10001, &cmd, &r), FSM_NOT_OWNER);
    }
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "idem", 52);
    c.ttl_ms = DAY;
    fh_assert_is(fh_do_claim(&h, T1 + 10002, &c, &r), FSM_DUPLICATE);
    ck_assert_mem_eq(r.result, "done", 4);
    /* Still full. */
    fh_assert_is(fh_do_claim(&h, T1 + 10003, &c, &r), FSM_DUPLICATE);
    nonce_ttl(&c, "k11", 300, DAY);
    fh_assert_is(fh_do_claim(&h, T1 + 10003, &c, &r), FSM_RESOURCE_EXHAUSTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 10);

    /* Forget makes room. */
    {
        struct fsm_cmd fg = fh_cmd_forget("s", "k3");

        fh_assert_is(fh_do(&h, T1 + 10004, &fg, &r), FSM_FORGOTTEN);
    }
    fh_assert_is(fh_do_claim(&h, T1 + 10005, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 10);
    fh_close(&h);
}
END_TEST

/* Two claims in one batch against the last free record. */
START_TEST(test_limits_max_records_in_batch)
{
    struct fh h;
    struct fsm_claim c[3];
    struct fsm_cmd cmds[3];
    struct fh_res *r = fh_res_array(3);

    boot_with(&h, _i, 2, 0, FH_T0);
    nonce_ttl(&c[0], "a", 1, DAY);
    fh_assert_is(fh_do_claim(&h, T1, &c[0], r), FSM_ACCEPTED);
    nonce_ttl(&c[0], "b", 2, DAY);
    nonce_ttl(&c[1], "c", 3, DAY);
    nonce_ttl(&c[2], "b", 4, DAY);
    for (int i = 0; i < 3; i++) {
        cmds[i] = fh_cmd_claim(&c[i]);
    }
    ck_assert_int_eq(fh_apply(&h, T1, cmds, 3, r), 0);
    fh_assert_outcome(&r[0], FSM_ACCEPTED);
    fh_assert_outcome(&r[1], FSM_RESOURCE_EXHAUSTED);
    fh_assert_outcome(&r[2], FSM_REPLAYED);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    free(r);
    fh_close(&h);
}
END_TEST

START_TEST(test_limits_max_bytes)
{
    const uint64_t max_bytes = 4096;
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    char key[FSM_KEY_MAX + 1];
    uint64_t bytes, records;
    int accepted = 0;
    int i;

    boot_with(&h, _i, 0, max_bytes, FH_T0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    for (i = 0; i < 100; i++) {
        enum fsm_outcome o;

        memset(key, 'a' + i % 26, 200);
        snprintf(key + 200, sizeof(key) - 200, "%03d", i);
        nonce_ttl(&c, key, 1 + (uint64_t)i, DAY);
        bytes = fsm_bytes(h.f);
        records = fsm_n_records(h.f);
        o = fh_do_claim(&h, T1, &c, &r);
        if (o == FSM_RESOURCE_EXHAUSTED) {
            ck_assert_uint_eq(fsm_bytes(h.f), bytes);
            ck_assert_uint_eq(fsm_n_records(h.f), records);
            break;
        }
        fh_assert_is(o, FSM_ACCEPTED);
        accepted++;
        ck_assert_uint_gt(fsm_bytes(h.f), bytes);
        ck_assert_uint_le(fsm_bytes(h.f), max_bytes);
    }
    ck_assert_int_lt(i, 100);
    ck_assert_int_gt(accepted, 0);
    ck_assert_uint_eq(fsm_n_records(h.f), (uint64_t)accepted);
    /* Every record costs at least its scope and key. */
    ck_assert_uint_ge(fsm_bytes(h.f), (uint64_t)accepted * (1 + 203));

    /* Existing records keep answering, however many attempts pile up. */
    memset(key, 'a', 200);
    snprintf(key + 200, sizeof(key) - 200, "%03d", 0);
    for (i = 0; i < 10; i++) {
        nonce_ttl(&c, key, 1000 + (uint64_t)i, DAY);
        fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_REPLAYED);
    }
    nonce_ttl(&c, key, 1, DAY);
    fh_assert_is(fh_do_claim(&h, T1 + 1, &c, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_is(fh_do_lookup(&h, T1 + 1, "s", key, &r), FSM_FOUND);
    /* Past max_bytes the evidence is not stored: this record had no attempt
     * storage yet, so nothing was added and the counted bytes stayed put. */
    ck_assert_uint_eq(r.attempts, 0);
    ck_assert_uint_eq(r.n_attempt_list, 0);
    ck_assert_uint_le(fsm_bytes(h.f), max_bytes);
    /* And one more new record is still refused. */
    memset(key, 'z', 250);
    key[250] = '\0';
    nonce_ttl(&c, key, 5000, DAY);
    fh_assert_is(fh_do_claim(&h, T1 + 2, &c, &r), FSM_RESOURCE_EXHAUSTED);
    fh_close(&h);
}
END_TEST

/* Capacity comes back once records expire and are pruned. */
START_TEST(test_limits_capacity_frees_after_expiry)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    char key[16];
    int i;

    boot_with(&h, _i, 10, 0, FH_T0);
    for (i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        nonce_ttl(&c, key, 1 + (uint64_t)i, 10000);
        fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    }
    nonce_ttl(&c, "new0", 100, 10000);
    fh_assert_is(fh_do_claim(&h, T1 + 9999, &c, &r), FSM_RESOURCE_EXHAUSTED);

    /* One tick after the expiry they are certainly pruned. */
    fh_tick(&h, T1 + 10000 + TICK);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    for (i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "new%d", i);
        nonce_ttl(&c, key, 100 + (uint64_t)i, 10000);
        fh_assert_is(fh_do_claim(&h, T1 + 10000 + TICK, &c, &r), FSM_ACCEPTED);
    }
    /* Full again: an old key is a new record like any other. */
    nonce_ttl(&c, "k0", 1, 10000);
    fh_assert_is(fh_do_claim(&h, T1 + 10000 + TICK, &c, &r),
                 FSM_RESOURCE_EXHAUSTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 10);
    fh_close(&h);
}
END_TEST

/* Records with many expiries; time advances by 50 ms: a record is counted
 * while it lives and gone at most one tick after it expired. */
START_TEST(test_limits_prune_step_by_step)
{
    enum { N = 200 };
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    uint64_t exp[N];
    uint64_t now, prev;
    char key[16];

    boot_with(&h, _i, 0, 0, FH_T0);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        nonce_ttl(&c, key, 1 + (uint64_t)i, 1000 + 37 * (uint64_t)i);
        fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
        exp[i] = r.expires_ms;
        ck_assert_uint_eq(exp[i], T1 + 1000 + 37 * (uint64_t)i);
    }
    ck_assert_uint_eq(fsm_n_records(h.f), N);
    prev = N;
    for (now = T1; now <= exp[N - 1] + 2 * TICK; now += 50) {
        fh_tick(&h, now);
        assert_pruned(h.f, exp, N, now);
        ck_assert_uint_le(fsm_n_records(h.f), prev);
        prev = fsm_n_records(h.f);
    }
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    fh_close(&h);
}
END_TEST

/* An expired record not yet pruned behaves as absent, and its pruning later
 * does not take the new record of the same key with it. */
START_TEST(test_limits_expired_before_prune)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    /* The first tick boundary + 1 ms at least 10 s after T1. */
    const uint64_t e = ((T1 + 10000) / TICK + 1) * TICK + 1;

    boot_with(&h, _i, 0, 0, FH_T0);
    nonce_ttl(&c, "n", 1, e - T1);
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, e);

    /* At e the record's tick has not ended: still stored, but absent. */
    fh_assert_is(fh_do_lookup(&h, e, "s", "n", &r), FSM_NOT_FOUND);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    fh_lookup_read(&h, "s", "n", &r);
    fh_assert_outcome(&r, FSM_NOT_FOUND);
    {
        struct fsm_cmd fg = fh_cmd_forget("s", "n");

        fh_assert_is(fh_do(&h, e, &fg, &r), FSM_NOT_FOUND);
    }
    nonce_ttl(&c, "n", 2, 60000);
    fh_assert_is(fh_do_claim(&h, e, &c, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert(fh_rid_is(r.first_request_id, 2));
    ck_assert_uint_eq(r.expires_ms, e + 60000);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);

    /* The old expiry's tick passes: the new record stays. */
    fh_tick(&h, e + 2 * TICK);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);
    fh_assert_is(fh_do_lookup(&h, e + 2 * TICK, "s", "n", &r), FSM_FOUND);
    ck_assert(fh_rid_is(r.first_request_id, 2));
    ck_assert_uint_eq(r.attempts, 0);
    nonce_ttl(&c, "n", 3, 60000);
    fh_assert_is(fh_do_claim(&h, e + 2 * TICK, &c, &r), FSM_REPLAYED);
    /* And it goes in its own time. */
    fh_tick(&h, e + 60000 + TICK);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_close(&h);
}
END_TEST

/* Records around the boundaries of level-0 turns (65536 ticks): counted
 * while live, gone a tick after expiry, whatever the step. */
START_TEST(test_limits_prune_turn_boundaries)
{
    static const int64_t offs[] = {-2049, -1025, -1024, -1,   0,
                                   1,     1023,  1024,  2047, 5000};
    enum { N_OFFS = sizeof(offs) / sizeof(offs[0]), N = 3 * N_OFFS };
    const uint64_t turn = 65536 * TICK;
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    uint64_t exp[N];
    uint64_t first = (T1 / turn + 1) * turn;
    uint64_t now;
    char key[16];
    int n = 0;

    boot_with(&h, _i, 0, 0, FH_T0);
    for (int m = 0; m < 3; m++) {
        for (int j = 0; j < N_OFFS; j++) {
            uint64_t e =
                (uint64_t)((int64_t)(first + (uint64_t)m * turn) + offs[j]);

            snprintf(key, sizeof(key), "t%d-%d", m, j);
            nonce_ttl(&c, key, 1 + (uint64_t)n, e - T1);
            fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
            exp[n++] = r.expires_ms;
            ck_assert_uint_eq(r.expires_ms, e);
        }
    }
    /* A jump to just before each boundary, then 100 ms steps across it. */
    for (int m = 0; m < 3; m++) {
        uint64_t b = first + (uint64_t)m * turn;

        now = b - 5000;
        fh_tick(&h, now);
        assert_pruned(h.f, exp, N, now);
        for (; now <= b + 8000; now += 100) {
            fh_tick(&h, now);
            assert_pruned(h.f, exp, N, now);
        }
    }
    fh_tick(&h, first + 3 * turn);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_close(&h);
}
END_TEST

/* 1000 records with lifetimes up to ~30 days (across level-0 turns and the
 * cascade), time advancing in ~6 h steps. */
START_TEST(test_limits_prune_cascade)
{
    enum { N = 1000, PER_BATCH = 100 };
    const uint64_t unit = 2580000; /* 43 min: N units < 30 days */
    struct fh h;
    struct fsm_claim *c = calloc(PER_BATCH, sizeof(*c));
    struct fsm_cmd *cmds = calloc(PER_BATCH, sizeof(*cmds));
    uint64_t *exp = calloc(N, sizeof(*exp));
    char(*keys)[16] = calloc(N, sizeof(*keys));
    struct fh_res r;
    uint64_t now, prev = N;

    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(cmds);
    ck_assert_ptr_nonnull(exp);
    ck_assert_ptr_nonnull(keys);
    boot_with(&h, _i, 0, 0, FH_T0);
    for (int b = 0; b < N / PER_BATCH; b++) {
        for (int j = 0; j < PER_BATCH; j++) {
            int i = b * PER_BATCH + j;

            snprintf(keys[i], sizeof(keys[i]), "c%d", i);
            nonce_ttl(&c[j], keys[i], 1 + (uint64_t)i,
                      unit * (uint64_t)(i + 1));
            cmds[j] = fh_cmd_claim(&c[j]);
            exp[i] = T1 + unit * (uint64_t)(i + 1);
        }
        ck_assert_int_eq(fh_apply(&h, T1, cmds, PER_BATCH, NULL), 0);
    }
    ck_assert_uint_eq(fsm_n_records(h.f), N);

    for (now = T1; now <= exp[N - 1] + 2 * TICK; now += 6 * 3600000 + 777) {
        int live = -1, dead = -1;

        fh_tick(&h, now);
        assert_pruned(h.f, exp, N, now);
        ck_assert_uint_le(fsm_n_records(h.f), prev);
        prev = fsm_n_records(h.f);
        for (int i = 0; i < N; i++) {
            if (exp[i] > now && live < 0) {
                live = i;
            }
            if (exp[i] <= now) {
                dead = i;
            }
        }
        if (live >= 0) {
            fh_lookup_read(&h, "s", keys[live], &r);
            fh_assert_outcome(&r, FSM_FOUND);
            ck_assert_uint_eq(r.expires_ms, exp[live]);
        }
        if (dead >= 0) {
            fh_lookup_read(&h, "s", keys[dead], &r);
            fh_assert_outcome(&r, FSM_NOT_FOUND);
        }
    }
    fh_tick(&h, exp[N - 1] + 2 * TICK);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    free(c);
    free(cmds);
    free(exp);
    free(keys);
    fh_close(&h);
}
END_TEST

/* From log time 0 to 1.7e12 ms and far beyond (2.5e14 ms, year ~9900) in
 * a few batches. */
START_TEST(test_limits_time_jumps)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    static const uint64_t ttls[5] = {1000, 3600000, DAY, 20 * DAY, 30 * DAY};
    const uint64_t j0 = FH_T0;
    const uint64_t decade = 3652ull * DAY;
    const uint64_t far = 250000000000000ull;
    char key[16];

    boot_with(&h, _i, 0, 0, 0);
    ck_assert_uint_eq(fsm_now(h.f), 0);
    fh_claim(&c, FSM_KIND_NONCE, "s", "epoch", 1);
    fh_claim_ts(&c, 0, 1000);
    fh_assert_is(fh_do_claim(&h, 0, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, W + K);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "epoch-idem", 2);
    c.ttl_ms = 30 * DAY;
    fh_assert_is(fh_do_claim(&h, 0, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);

    /* 0 -> 1.7e12. */
    fh_tick(&h, j0);
    ck_assert_uint_eq(fsm_now(h.f), j0);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    fh_claim(&c, FSM_KIND_NONCE, "s", "epoch", 3);
    fh_claim_ts(&c, 0, W);
    fh_assert_is(fh_do_claim(&h, j0, &c, &r), FSM_STALE);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "epoch-idem", 4);
    c.ttl_ms = 30 * DAY;
    fh_assert_is(fh_do_claim(&h, j0, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.owner_attempt, 1);
    ck_assert(fh_rid_is(r.first_request_id, 4));
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "r%d", i);
        fh_claim(&c, FSM_KIND_NONCE, "s", key, 10 + (uint64_t)i);
        c.ttl_ms = ttls[i];
        fh_assert_is(fh_do_claim(&h, j0, &c, &r), FSM_ACCEPTED);
    }
    ck_assert_uint_eq(fsm_n_records(h.f), 6);

    /* +29 days: only the 30-day records remain. */
    fh_tick(&h, j0 + 29 * DAY);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    fh_assert_is(fh_do_lookup(&h, j0 + 29 * DAY, "s", "r4", &r), FSM_FOUND);
    fh_assert_is(fh_do_lookup(&h, j0 + 29 * DAY, "s", "r3", &r), FSM_NOT_FOUND);
    fh_assert_is(fh_do_lookup(&h, j0 + 29 * DAY, "s", "epoch-idem", &r),
                 FSM_FOUND);
    fh_tick(&h, j0 + 30 * DAY + TICK);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);

    /* A decade later. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "r4", 20);
    c.ttl_ms = 30 * DAY;
    fh_assert_is(fh_do_claim(&h, j0 + decade, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, j0 + decade + 30 * DAY);
    ck_assert_uint_eq(fsm_n_records(h.f), 1);

    /* And to 2^60 ms. */
    fh_tick(&h, far);
    ck_assert_uint_eq(fsm_now(h.f), far);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_claim(&c, FSM_KIND_NONCE, "s", "far", 30);
    fh_claim_ts(&c, far, 1000);
    fh_assert_is(fh_do_claim(&h, far, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.expires_ms, far + W + K);
    ck_assert_uint_eq(r.first_time_ms, far);
    fh_claim(&c, FSM_KIND_NONCE, "s", "far-stale", 31);
    fh_claim_ts(&c, far - 1001, 1000);
    fh_assert_is(fh_do_claim(&h, far, &c, &r), FSM_STALE);
    fh_claim(&c, FSM_KIND_NONCE, "s", "far", 32);
    fh_claim_ts(&c, far, 1000);
    fh_assert_is(fh_do_claim(&h, far + W + K - 1, &c, &r), FSM_REPLAYED);
    fh_tick(&h, far + W + K + TICK);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_close(&h);
}
END_TEST

/* Log time is clamped to FSM_TIME_MAX (2^48 - 1 ms, year 10889): a leader
 * stamp of 2^60 ms (a broken clock) moves fsm_now to FSM_TIME_MAX, and
 * records accepted there carry exact facts. */
START_TEST(test_limits_time_clamped)
{
    struct fh h;
    struct fsm_claim c;
    struct fh_res r;
    const uint64_t far = 1ull << 60;
    const uint64_t end = FSM_TIME_MAX;

    boot_with(&h, _i, 0, 0, FH_T0);
    fh_claim(&c, FSM_KIND_NONCE, "s", "old", 1);
    c.ttl_ms = DAY;
    fh_assert_is(fh_do_claim(&h, FH_T0, &c, &r), FSM_ACCEPTED);
    fh_tick(&h, far);
    ck_assert_uint_eq(fsm_now(h.f), end);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);

    fh_claim(&c, FSM_KIND_NONCE, "s", "end", 2);
    fh_claim_ts(&c, end, 1000);
    fh_assert_is(fh_do_claim(&h, far, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.first_time_ms, end);
    ck_assert_uint_eq(r.expires_ms, end + W + K);
    /* A ts of 2^60 is in the future of the clamped clock. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "far", 3);
    fh_claim_ts(&c, far, 1000);
    fh_assert_is(fh_do_claim(&h, far, &c, &r), FSM_FUTURE);
    fh_claim(&c, FSM_KIND_NONCE, "s", "end", 4);
    fh_claim_ts(&c, end, 1000);
    fh_assert_is(fh_do_claim(&h, UINT64_MAX, &c, &r), FSM_REPLAYED);
    ck_assert_uint_eq(fsm_now(h.f), end);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "end-idem", 5);
    c.ttl_ms = DAY;
    fh_assert_is(fh_do_claim(&h, far, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.first_time_ms, end);
    ck_assert_uint_eq(r.expires_ms, end + DAY);
    ck_assert_uint_eq(r.lease_expires_ms, end + FSM_DEFAULT_LEASE_MS);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    /* Time stops there: nothing expires any more. */
    fh_tick(&h, UINT64_MAX);
    ck_assert_uint_eq(fsm_now(h.f), end);
    ck_assert_uint_eq(fsm_n_records(h.f), 2);
    fh_close(&h);
}
END_TEST

Suite *limits_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("capacity");

    tcase_add_loop_test(tc, test_limits_max_records, 0, 2);
    tcase_add_loop_test(tc, test_limits_max_records_in_batch, 0, 2);
    tcase_add_loop_test(tc, test_limits_max_bytes, 0, 2);
    tcase_add_loop_test(tc, test_limits_capacity_frees_after_expiry, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("prune");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_limits_prune_step_by_step, 0, 2);
    tcase_add_loop_test(tc, test_limits_expired_before_prune, 0, 2);
    tcase_add_loop_test(tc, test_limits_prune_turn_boundaries, 0, 2);
    tcase_add_loop_test(tc, test_limits_prune_cascade, 0, 2);
    suite_add_tcase(s, tc);

    /* Jumps of years must cost what expires, not what time passed. */
    tc = tcase_create("time_jumps");
    tcase_set_timeout(tc, 10);
    tcase_add_loop_test(tc, test_limits_time_jumps, 0, 2);
    tcase_add_loop_test(tc, test_limits_time_clamped, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
