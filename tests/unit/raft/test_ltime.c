#include <check.h>
#include <stdint.h>

#include "raft/ltime.h"

Suite *ltime_suite(void);

#define K      30000ull /* max_skew */
#define REAL0  1700000000000ull
#define FIVE_M (5ull * 60 * 1000)

/* One leadership term: the leader anchors, then stamps a batch every 7 ms
 * of real time; every batch is applied live at once. Returns the largest
 * distance between log time and real time seen. */
static uint64_t run(struct ltime *t,
                    uint64_t *fsm_now,
                    uint64_t *real,
                    uint64_t *mono,
                    int64_t wall_offset,
                    int n)
{
    uint64_t worst = 0;

    ltime_anchor(t);
    for (int i = 0; i < n; i++) {
        uint64_t wall = (uint64_t)((int64_t)*real + wall_offset);
        uint64_t stamp = ltime_stamp(t, *fsm_now, wall, *mono, K);
        uint64_t d;

        ck_assert_uint_ge(stamp, *fsm_now); /* never backwards */
        *fsm_now = stamp;
        ltime_applied(t, stamp, *mono);
        d = stamp > *real ? stamp - *real : *real - stamp;
        if (d > worst) {
            worst = d;
        }
        *real += 7;
        *mono += 7;
    }
    return worst;
}

/* Before any batch was applied (full-cluster restart) the wall clock is all
 * there is. */
START_TEST(first_stamp_is_wall)
{
    struct ltime t;

    ltime_init(&t);
    ck_assert_uint_eq(ltime_stamp(&t, 0, REAL0, 5, K), REAL0);
    ck_assert_uint_eq(ltime_stamp(&t, REAL0 + 9, REAL0, 5, K), REAL0 + 9);
}
END_TEST

/* A leader whose wall clock is 5 minutes fast or slow keeps log time within
 * K of real elapsed time, however many batches it stamps; a leader with a
 * right clock afterwards brings log time back to real time. */
START_TEST(wrong_wall_clock_is_clamped)
{
    int64_t offsets[] = {(int64_t)FIVE_M, -(int64_t)FIVE_M};

    for (size_t k = 0; k < 2; k++) {
        struct ltime t;
        uint64_t fsm_now = 0, real = REAL0, mono = 1000;

        ltime_init(&t);
        ltime_anchor(&t); /* nothing applied live: a full restart */
        fsm_now = ltime_stamp(&t, 0, real, mono, K);
        ck_assert_uint_eq(fsm_now, real);
        ltime_applied(&t, fsm_now, mono);
        /* A correct leader first, so log time starts right. */
        ck_assert_uint_eq(run(&t, &fsm_now, &real, &mono, 0, 100), 0);
        /* Then the bad one takes over for a long stretch. */
        ck_assert_uint_le(run(&t, &fsm_now, &real, &mono, offsets[k], 10000),
                          K);
        /* A good leader again: within K at once, exact once real time has
         * caught up with a log time the fast leader pushed ahead. */
        ck_assert_uint_le(run(&t, &fsm_now, &real, &mono, 0, 10), K);
        real += K;
        mono += K;
        ck_assert_uint_eq(run(&t, &fsm_now, &real, &mono, 0, 10), 0);
    }
}
END_TEST

/* The ratchet the per-term anchor prevents: re-anchoring after every batch
 * on the leader's own stamps lets a fast clock gain K per batch. */
START_TEST(reanchoring_every_batch_would_ratchet)
{
    struct ltime t;
    uint64_t fsm_now = REAL0, real = REAL0, mono = 0;

    ltime_init(&t);
    for (int i = 0; i < 20; i++) {
        ltime_applied(&t, fsm_now, mono);
        ltime_anchor(&t);
        fsm_now = ltime_stamp(&t, fsm_now, real + FIVE_M, mono, K);
        real += 7;
        mono += 7;
    }
    ck_assert_uint_gt(fsm_now - real, K); /* why ltime.h anchors per term */
}
END_TEST

/* An idle cluster: the last batch is old, but est counts the time elapsed
 * since it was applied, so a right wall clock is stamped as it is. */
START_TEST(idle_gap_is_real_time)
{
    struct ltime t;
    uint64_t ten_min = 600000;

    ltime_init(&t);
    ltime_applied(&t, REAL0, 1000);
    ltime_anchor(&t);
    ck_assert_uint_eq(
        ltime_stamp(&t, REAL0, REAL0 + ten_min, 1000 + ten_min, K),
        REAL0 + ten_min);
}
END_TEST

/* A slow wall clock cannot move log time backwards, and a monotonic clock
 * that goes back counts as no time elapsed. */
START_TEST(never_backwards)
{
    struct ltime t;

    ltime_init(&t);
    ltime_applied(&t, REAL0, 500);
    ltime_anchor(&t);
    ck_assert_uint_eq(ltime_stamp(&t, REAL0, REAL0 - FIVE_M, 500, K), REAL0);
    ck_assert_uint_eq(ltime_stamp(&t, REAL0, REAL0 - FIVE_M, 100, K), REAL0);
    /* Fast wall: at most est + K. */
    ck_assert_uint_eq(ltime_stamp(&t, REAL0, REAL0 + FIVE_M, 600, K),
                      REAL0 + 100 + K);
}
END_TEST

Suite *ltime_suite(void)
{
    Suite *s = suite_create("ltime");
    TCase *tc = tcase_create("stamp");

    tcase_add_test(tc, first_stamp_is_wall);
    tcase_add_test(tc, idle_gap_is_real_time);
    tcase_add_test(tc, wrong_wall_clock_is_clamped);
    tcase_add_test(tc, reanchoring_every_batch_would_ratchet);
    tcase_add_test(tc, never_backwards);
    suite_add_tcase(s, tc);
    return s;
}
