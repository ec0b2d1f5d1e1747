/* raft/snap_policy: the byte rule for snapshot threshold and trailing. */
#include <check.h>

#include "raft/snap_policy.h"

Suite *snap_policy_suite(void);

static void feed(struct snap_policy *p, unsigned n, uint64_t len)
{
    for (unsigned i = 0; i < n; i++) {
        snap_policy_applied(p, len);
    }
}

/* An empty table: the floors decide. Raft's threshold is the backstop
 * (the target at the smallest entry), the trailing is in entries of the
 * observed size. */
START_TEST(empty_table_uses_the_floors)
{
    struct snap_policy p;

    snap_policy_init(&p, 0, 0, 0);
    ck_assert_uint_eq(p.jitter_pct, 0); /* id 0 hashes to 0 */
    feed(&p, 1000, 4096);
    snap_policy_decide(&p, 1000);
    ck_assert_uint_eq(p.avg_entry, 4096);
    ck_assert_uint_eq(p.threshold,
                      SNAP_POLICY_LOG_FLOOR / SNAP_POLICY_MIN_ENTRY);
    ck_assert_uint_eq(p.trailing, SNAP_POLICY_TRAIL_FLOOR / 4096);
    ck_assert_uint_eq(p.install_timeout_ms, SNAP_POLICY_INSTALL_MIN_MS);
}
END_TEST

/* A large table: the log may weigh half the snapshot, up to the ceiling. */
START_TEST(large_table_scales_then_caps)
{
    struct snap_policy p;
    uint64_t snap = 100ull << 20; /* 100 MiB: under the ceilings */

    snap_policy_init(&p, 0, 0, 0);
    feed(&p, 10, 1024);
    snap_policy_decide(&p, snap);
    ck_assert_uint_eq(p.threshold, snap / 100 * 50 / SNAP_POLICY_MIN_ENTRY);
    ck_assert_uint_eq(p.trailing, snap / 100 * 12 / 1024);

    feed(&p, 10, 1024);
    snap_policy_decide(&p, 800ull << 20);                    /* 10 M records */
    ck_assert_uint_eq(p.threshold, SNAP_POLICY_MAX_ENTRIES); /* clamped */
    ck_assert_uint_eq(p.trailing, SNAP_POLICY_TRAIL_CEIL / 1024);
    /* 800 MiB at 20 MiB/s + 50 MiB/s: 40 s + 16 s. */
    ck_assert_uint_eq(p.install_timeout_ms, 40000 + 16000);
}
END_TEST

/* The byte rule itself: due once the log since the snapshot weighs the
 * target, whatever the entry estimate said; never with a fixed count. */
START_TEST(due_by_bytes)
{
    struct snap_policy p;

    snap_policy_init(&p, 0, 0, 0);
    ck_assert(!snap_policy_due(&p));
    ck_assert_uint_eq(p.log_target, SNAP_POLICY_LOG_FLOOR);
    feed(&p, 1, SNAP_POLICY_LOG_FLOOR - 1);
    ck_assert(!snap_policy_due(&p));
    feed(&p, 1, 1);
    ck_assert(snap_policy_due(&p));
    snap_policy_decide(&p, 100ull << 20);
    ck_assert(!snap_policy_due(&p));
    ck_assert_uint_eq(p.log_target, (100ull << 20) / 100 * 50);
    snap_policy_init(&p, 0, 1024, 0);
    feed(&p, 4, SNAP_POLICY_LOG_CEIL);
    ck_assert(!snap_policy_due(&p));
}
END_TEST

/* Tiny entries and huge ones stay inside the entry bounds. */
START_TEST(entry_bounds)
{
    struct snap_policy p;

    snap_policy_init(&p, 0, 0, 0);
    feed(&p, 100, 1);
    snap_policy_decide(&p, 0);
    ck_assert_uint_eq(p.trailing, SNAP_POLICY_MAX_ENTRIES);
    feed(&p, 100, 1u << 20);
    snap_policy_decide(&p, 0);
    ck_assert_uint_eq(p.trailing, SNAP_POLICY_MIN_ENTRIES);
    /* Large entries do not lower the backstop (they would fire it early
     * once entries shrink again). */
    ck_assert_uint_eq(p.threshold,
                      SNAP_POLICY_LOG_FLOOR / SNAP_POLICY_MIN_ENTRY);
    /* No entry since: the previous average is kept. */
    snap_policy_decide(&p, 0);
    ck_assert_uint_eq(p.avg_entry, 1u << 20);
}
END_TEST

/* A bulk load (large entries) then single claims: the byte rule, not an
 * entry count made from the load's entry size, decides when the next
 * snapshot is due (at 10 M records every replica took a second 750 MB
 * snapshot seconds after the load, when the threshold came from the
 * load's average entry). */
START_TEST(small_entries_after_a_load_wait_for_the_bytes)
{
    struct snap_policy p;
    uint64_t target;
    unsigned n = 0;

    snap_policy_init(&p, 0, 0, 0);
    feed(&p, 5000, 50000); /* batches of ~500 claims */
    snap_policy_decide(&p, 750ull << 20);
    target = p.log_target;
    ck_assert_uint_eq(target, SNAP_POLICY_LOG_CEIL);
    while (!snap_policy_due(&p)) {
        snap_policy_applied(&p, 1000); /* a few claims each */
        n++;
    }
    ck_assert_uint_eq(n, (target + 999) / 1000);
    /* Raft's own count did not fire before the bytes were there. */
    ck_assert_uint_lt(n, p.threshold);
}
END_TEST

/* Operator flags win over the rule; the timeout still follows the size. */
START_TEST(fixed_counts_win)
{
    struct snap_policy p;

    snap_policy_init(&p, 7, 1024, 2048);
    feed(&p, 10, 100);
    snap_policy_decide(&p, 800ull << 20);
    ck_assert_uint_eq(p.threshold, 1024);
    ck_assert_uint_eq(p.trailing, 2048);
    ck_assert_uint_gt(p.install_timeout_ms, SNAP_POLICY_INSTALL_MIN_MS);
}
END_TEST

/* Node ids spread the thresholds over [1, 1.25) of the rule. */
START_TEST(jitter_spreads_nodes)
{
    struct snap_policy a, b;
    unsigned seen[25] = {0}, distinct = 0;

    for (uint64_t id = 1; id <= 200; id++) {
        snap_policy_init(&a, id, 0, 0);
        ck_assert_uint_lt(a.jitter_pct, 25);
        if (seen[a.jitter_pct]++ == 0) {
            distinct++;
        }
    }
    ck_assert_uint_ge(distinct, 15);
    snap_policy_init(&a, 0, 0, 0);
    snap_policy_init(&b, 0, 0, 0);
    b.jitter_pct = 24;
    feed(&a, 1, 1024);
    feed(&b, 1, 1024);
    snap_policy_decide(&a, 0);
    snap_policy_decide(&b, 0);
    ck_assert_uint_gt(b.threshold, a.threshold);
    ck_assert_uint_lt(b.threshold, a.threshold * 125 / 100 + 1);
}
END_TEST

Suite *snap_policy_suite(void)
{
    Suite *s = suite_create("snap_policy");
    TCase *tc = tcase_create("rule");

    tcase_add_test(tc, empty_table_uses_the_floors);
    tcase_add_test(tc, large_table_scales_then_caps);
    tcase_add_test(tc, entry_bounds);
    tcase_add_test(tc, small_entries_after_a_load_wait_for_the_bytes);
    tcase_add_test(tc, due_by_bytes);
    tcase_add_test(tc, fixed_counts_win);
    tcase_add_test(tc, jitter_spreads_nodes);
    suite_add_tcase(s, tc);
    return s;
}
