/* common/ratelimit: the budget of log lines (ratelimit.h). */
#include <check.h>

#include "common/ratelimit.h"

Suite *ratelimit_suite(void);

START_TEST(burst_then_silence_then_count)
{
    struct ratelimit r = {.burst = 3, .window_ms = 1000};
    uint64_t d = 99;

    for (int i = 0; i < 3; i++) {
        ck_assert(ratelimit_allow(&r, 5000 + (uint64_t)i, &d));
        ck_assert_uint_eq(d, 0);
    }
    for (int i = 0; i < 100; i++) { /* a flood inside the window */
        ck_assert(!ratelimit_allow(&r, 5100 + (uint64_t)i, &d));
    }
    ck_assert(!ratelimit_allow(&r, 5999, &d)); /* the window's last ms */
    ck_assert(ratelimit_allow(&r, 6000, &d));  /* a new window */
    ck_assert_uint_eq(d, 101);                 /* says what it left out */
    ck_assert(ratelimit_allow(&r, 6001, &d));
    ck_assert_uint_eq(d, 0);
}
END_TEST

START_TEST(quiet_traffic_is_never_cut)
{
    struct ratelimit r = {.burst = 1, .window_ms = 10000};
    uint64_t d;

    for (uint64_t t = 0; t < 10; t++) {
        ck_assert(ratelimit_allow(&r, t * 10000, &d));
        ck_assert_uint_eq(d, 0);
    }
}
END_TEST

START_TEST(clock_going_back_starts_a_window)
{
    struct ratelimit r = {.burst = 1, .window_ms = 1000};
    uint64_t d;

    ck_assert(ratelimit_allow(&r, 50000, &d));
    ck_assert(!ratelimit_allow(&r, 50001, &d));
    ck_assert(ratelimit_allow(&r, 100, &d));
    ck_assert_uint_eq(d, 1);
}
END_TEST

Suite *ratelimit_suite(void)
{
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("ratelimit");

    tcase_add_test(tc, burst_then_silence_then_count);
    tcase_add_test(tc, quiet_traffic_is_never_cut);
    tcase_add_test(tc, clock_going_back_starts_a_window);
    suite_add_tcase(s, tc);
    return s;
}
