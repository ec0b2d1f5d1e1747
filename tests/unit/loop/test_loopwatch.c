/* server/loopwatch: the loop's busy time per iteration (loopwatch.h). */
#include <check.h>
#include <uv.h>

#include "server/loopwatch.h"

Suite *loopwatch_suite(void);

#define MS 1000000ull

struct run
{
    struct loopwatch w;
    uv_timer_t busy, end;
    uint64_t spin_ns;
    uint64_t observed_max;
    unsigned observed;
};

static void observe(void *arg, uint64_t busy_ns)
{
    struct run *r = arg;

    r->observed++;
    if (busy_ns > r->observed_max) {
        r->observed_max = busy_ns;
    }
}

static void on_busy(uv_timer_t *t)
{
    struct run *r = t->data;
    uint64_t until = uv_hrtime() + r->spin_ns;

    while (uv_hrtime() < until) {
        /* work on the loop: nothing else runs meanwhile */
    }
}

static void on_end(uv_timer_t *t)
{
    struct run *r = t->data;

    uv_close((uv_handle_t *)&r->busy, NULL);
    uv_close((uv_handle_t *)&r->end, NULL);
    loopwatch_close(&r->w);
}

/* A loop that waits @wait_ms in all, with @spin_ms of work in a timer
 * callback after 10 ms. The loop's clock is brought up to date first: it
 * is cached at uv_loop_init, and a timer already due when uv_run starts
 * would run before loopwatch's first prepare and not be seen (it was, on
 * a loaded machine, with a 1 ms timer). */
static void run_loop(struct run *r, uint64_t spin_ms, uint64_t wait_ms)
{
    uv_loop_t loop;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(loopwatch_init(&r->w, &loop), 0);
    r->w.observe = observe;
    r->w.observe_arg = r;
    r->spin_ns = spin_ms * MS;
    uv_timer_init(&loop, &r->busy);
    uv_timer_init(&loop, &r->end);
    r->busy.data = r->end.data = r;
    if (spin_ms > 0) {
        uv_update_time(&loop);
        uv_timer_start(&r->busy, on_busy, 10, 0);
    }
    uv_timer_start(&r->end, on_end, wait_ms, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

START_TEST(work_on_the_loop_is_seen)
{
    struct run r = {0};

    run_loop(&r, 40, 120);
    ck_assert_uint_ge(r.w.max_ns, 40 * MS);
    ck_assert_uint_lt(r.w.max_ns, 1000 * MS);
    ck_assert_uint_eq(r.observed_max, r.w.max_ns);
    ck_assert_uint_ge(r.w.iterations, 1);
    ck_assert_uint_eq(r.observed, r.w.iterations);
}
END_TEST

START_TEST(waiting_is_not_busy)
{
    struct run r = {0};

    /* 150 ms of waiting in epoll: without the idle time subtracted, one
     * iteration would count ~150 ms. */
    run_loop(&r, 0, 150);
    ck_assert_uint_lt(r.w.max_ns, 60 * MS);
}
END_TEST

Suite *loopwatch_suite(void)
{
    Suite *s = suite_create("loopwatch");
    TCase *tc = tcase_create("loopwatch");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, work_on_the_loop_is_seen);
    tcase_add_test(tc, waiting_is_not_busy);
    suite_add_tcase(s, tc);
    return s;
}
