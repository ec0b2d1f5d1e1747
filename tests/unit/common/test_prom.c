/* common/prom: the registry's rules and the text exposition, byte for
 * byte (escaping, histogram buckets, _sum/_count, HELP/TYPE lines). The
 * integration test once_metrics.py runs promtool over a node's real
 * output. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/prom.h"

Suite *prom_suite(void);

/* The exposition of @r, as a malloc'd string. */
static char *text_of(const struct prom_registry *r)
{
    struct prom_buf b;
    size_t len;
    char *p;

    prom_buf_init(&b, 0);
    ck_assert_int_eq(prom_write(r, &b), 0);
    p = prom_buf_take(&b, &len);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(strlen(p), len);
    return p;
}

START_TEST(names)
{
    ck_assert(prom_valid_metric_name("once_claims_total"));
    ck_assert(prom_valid_metric_name("a:b_c9"));
    ck_assert(prom_valid_metric_name("_x"));
    ck_assert(!prom_valid_metric_name(""));
    ck_assert(!prom_valid_metric_name("9lives"));
    ck_assert(!prom_valid_metric_name("with-dash"));
    ck_assert(!prom_valid_metric_name("sp ace"));
    ck_assert(!prom_valid_metric_name(NULL));
    ck_assert(prom_valid_label_name("kind"));
    ck_assert(!prom_valid_label_name("__reserved"));
    ck_assert(!prom_valid_label_name("a:b"));
    ck_assert(!prom_valid_label_name("0a"));
}
END_TEST

START_TEST(registration_refusals)
{
    struct prom_registry *r = prom_new();
    static const char *const le[] = {"le"};
    static const char *const twice[] = {"a", "a"};
    static const char *const bad[] = {"__x"};
    static const double down[] = {1, 0.5};
    static const double ok[] = {0.5, 1};
    static const double q_out[] = {0.5, 2};
    char why[ERR_MSG_SIZE];
    struct prom_family_def d = {"x_total", "help", PROM_COUNTER, NULL, 0,
                                NULL,      0};

    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(prom_family(r, &d, why));
    ck_assert_ptr_null(prom_family(r, &d, why)); /* taken */
    ck_assert_ptr_nonnull(strstr(why, "already registered"));
    d.name = "bad-name";
    ck_assert_ptr_null(prom_family(r, &d, why));
    d.name = "h";
    d.type = PROM_HISTOGRAM;
    ck_assert_ptr_null(prom_family(r, &d, why)); /* no bounds */
    d.bounds = down;
    d.n_bounds = 2;
    ck_assert_ptr_null(prom_family(r, &d, why));
    ck_assert_ptr_nonnull(strstr(why, "increasing"));
    d.bounds = ok;
    d.labels = le;
    d.n_labels = 1;
    ck_assert_ptr_null(prom_family(r, &d, why)); /* "le" is reserved */
    d.labels = twice;
    d.n_labels = 2;
    ck_assert_ptr_null(prom_family(r, &d, why));
    d.labels = bad;
    d.n_labels = 1;
    ck_assert_ptr_null(prom_family(r, &d, why));
    d.type = PROM_SUMMARY;
    d.labels = NULL;
    d.n_labels = 0;
    d.bounds = q_out;
    ck_assert_ptr_null(prom_family(r, &d, why)); /* quantile 2 */
    d.type = PROM_GAUGE;
    ck_assert_ptr_null(prom_family(r, &d, why)); /* gauges take no bounds */
    prom_free(r);
}
END_TEST

START_TEST(counter_gauge_and_escaping)
{
    struct prom_registry *r = prom_new();
    static const char *const labels[] = {"kind", "outcome"};
    struct prom_family_def c = {"t_claims_total",
                                "Claims \\ by \"kind\"\nand outcome.",
                                PROM_COUNTER,
                                labels,
                                2,
                                NULL,
                                0};
    struct prom_family_def g = {"t_term", "Term.", PROM_GAUGE, NULL,
                                0,        NULL,    0};
    const char *v1[] = {"nonce", "ACCEPTED"};
    const char *v2[] = {"a\"b\\c\nd", "X"};
    struct prom_series *s1, *s2, *gs;
    char *t;

    s1 = prom_series(prom_family(r, &c, NULL), v1);
    ck_assert_ptr_nonnull(s1);
    s2 = prom_series(prom_family(r, &c, NULL) /* taken: NULL */, v2);
    ck_assert_ptr_null(s2);
    gs = prom_series(prom_family(r, &g, NULL), NULL);
    ck_assert_ptr_nonnull(gs);
    prom_inc(s1);
    prom_add(s1, 2);
    prom_add(s1, -5);  /* counters never go down */
    prom_add(s1, NAN); /* nor become NaN */
    prom_set(gs, 7);
    prom_set(gs, 3.25);
    t = text_of(r);
    ck_assert_str_eq(t,
                     "# HELP t_claims_total Claims \\\\ by \"kind\"\\nand "
                     "outcome.\n"
                     "# TYPE t_claims_total counter\n"
                     "t_claims_total{kind=\"nonce\",outcome=\"ACCEPTED\"} 3\n"
                     "# HELP t_term Term.\n"
                     "# TYPE t_term gauge\n"
                     "t_term 3.25\n");
    free(t);
    prom_free(r);
}
END_TEST

START_TEST(label_value_escaping)
{
    struct prom_registry *r = prom_new();
    static const char *const labels[] = {"v"};
    struct prom_family_def d = {"t_info", "i", PROM_GAUGE, labels, 1, NULL, 0};
    struct prom_family *f = prom_family(r, &d, NULL);
    const char *v[] = {"a\"b\\c\nd"};
    const char *same[] = {"a\"b\\c\nd"};
    char *t;

    prom_set(prom_series(f, v), 1);
    ck_assert_ptr_eq(prom_series(f, v), prom_series(f, same));
    t = text_of(r);
    ck_assert_ptr_nonnull(strstr(t, "t_info{v=\"a\\\"b\\\\c\\nd\"} 1\n"));
    free(t);
    prom_free(r);
}
END_TEST

START_TEST(histogram_buckets)
{
    struct prom_registry *r = prom_new();
    static const char *const labels[] = {"method"};
    static const double bounds[] = {0.005, 0.1, 1};
    struct prom_family_def d = {
        "t_seconds", "Latency.", PROM_HISTOGRAM, labels, 1, bounds, 3};
    const char *v[] = {"Claim"};
    struct prom_series *s = prom_series(prom_family(r, &d, NULL), v);
    char *t;

    ck_assert_ptr_nonnull(s);
    prom_observe(s, 0.001); /* first bucket */
    prom_observe(s, 0.005); /* on the bound: still the first */
    prom_observe(s, 0.05);
    prom_observe(s, 3);   /* only +Inf */
    prom_observe(s, NAN); /* ignored */
    ck_assert(prom_value(s) == 4);
    t = text_of(r);
    ck_assert_str_eq(t,
                     "# HELP t_seconds Latency.\n"
                     "# TYPE t_seconds histogram\n"
                     "t_seconds_bucket{method=\"Claim\",le=\"0.005\"} 2\n"
                     "t_seconds_bucket{method=\"Claim\",le=\"0.1\"} 3\n"
                     "t_seconds_bucket{method=\"Claim\",le=\"1\"} 3\n"
                     "t_seconds_bucket{method=\"Claim\",le=\"+Inf\"} 4\n"
                     "t_seconds_sum{method=\"Claim\"} 3.056\n"
                     "t_seconds_count{method=\"Claim\"} 4\n");
    free(t);
    prom_free(r);
}
END_TEST

/* prom_observe bisects the bounds: every value lands in the first bucket
 * whose bound holds it, at, between and beyond the bounds (odd count). */
START_TEST(histogram_bisection)
{
    struct prom_registry *r = prom_new();
    static const double bounds[] = {1, 2, 3, 4, 5, 6, 7};
    static const double obs[] = {0.5, 1, 1.5, 2, 4, 4.5, 7, 7.5, 100};
    static const char *const want[] = {
        "t_b_bucket{le=\"1\"} 2\n",
        "t_b_bucket{le=\"2\"} 4\n",
        "t_b_bucket{le=\"3\"} 4\n",
        "t_b_bucket{le=\"4\"} 5\n",
        "t_b_bucket{le=\"5\"} 6\n",
        "t_b_bucket{le=\"6\"} 6\n",
        "t_b_bucket{le=\"7\"} 7\n",
        "t_b_bucket{le=\"+Inf\"} 9\n",
        "t_b_sum 128\n",
    };
    struct prom_family_def d = {"t_b",  "B.", PROM_HISTOGRAM, NULL, 0,
                                bounds, 7};
    struct prom_series *s = prom_series(prom_family(r, &d, NULL), NULL);
    char *t;

    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++) {
        prom_observe(s, obs[i]);
    }
    t = text_of(r);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_msg(strstr(t, want[i]) != NULL, "%s not in\n%s", want[i], t);
    }
    free(t);
    prom_free(r);
}
END_TEST

START_TEST(summary_and_numbers)
{
    struct prom_registry *r = prom_new();
    static const double q[] = {0, 0.5, 1};
    struct prom_family_def d = {
        "t_shard", "Per shard.", PROM_SUMMARY, NULL, 0, q, 3};
    struct prom_family_def g = {"t_g", "g", PROM_GAUGE, NULL, 0, NULL, 0};
    struct prom_series *s = prom_series(prom_family(r, &d, NULL), NULL);
    struct prom_series *gs = prom_series(prom_family(r, &g, NULL), NULL);
    const double vals[] = {1, 2.5, 9};
    char *t;

    prom_summary_set(s, vals, 40, 12);
    prom_set(gs, INFINITY);
    t = text_of(r);
    ck_assert_str_eq(t,
                     "# HELP t_shard Per shard.\n"
                     "# TYPE t_shard summary\n"
                     "t_shard{quantile=\"0\"} 1\n"
                     "t_shard{quantile=\"0.5\"} 2.5\n"
                     "t_shard{quantile=\"1\"} 9\n"
                     "t_shard_sum 40\n"
                     "t_shard_count 12\n"
                     "# HELP t_g g\n"
                     "# TYPE t_g gauge\n"
                     "t_g +Inf\n");
    free(t);
    prom_set(gs, NAN);
    t = text_of(r);
    ck_assert_ptr_nonnull(strstr(t, "t_g NaN\n"));
    free(t);
    prom_set(gs, 0.1 + 0.2); /* shortest text that reads back the same */
    t = text_of(r);
    ck_assert_ptr_nonnull(strstr(t, "t_g 0.30000000000000004\n"));
    free(t);
    prom_set(gs, 12345678901234.0);
    t = text_of(r);
    ck_assert_ptr_nonnull(strstr(t, "t_g 12345678901234\n"));
    free(t);
    prom_free(r);
}
END_TEST

START_TEST(limits)
{
    struct prom_registry *r = prom_new();
    static const char *const labels[] = {"v"};
    struct prom_family_def d = {"t_many", "m", PROM_GAUGE, labels, 1, NULL, 0};
    struct prom_family *f = prom_family(r, &d, NULL);
    char longv[PROM_VALUE_MAX + 2], name[16];
    const char *v[] = {longv};
    struct prom_buf b;

    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    ck_assert_ptr_null(prom_series(f, v)); /* value over its bound */
    for (int i = 0; i < PROM_SERIES_MAX; i++) {
        snprintf(name, sizeof name, "s%d", i);
        v[0] = name;
        ck_assert_ptr_nonnull(prom_series(f, v));
    }
    v[0] = "one-more";
    ck_assert_ptr_null(prom_series(f, v)); /* the family is full */
    prom_buf_init(&b, 100);                /* far too small: cut, and said */
    ck_assert_int_eq(prom_write(r, &b), -ENOSPC);
    ck_assert(b.truncated);
    ck_assert_uint_lt(b.len, 100);
    prom_buf_free(&b);
    prom_free(r);
}
END_TEST

Suite *prom_suite(void)
{
    Suite *s = suite_create("prom");
    TCase *tc = tcase_create("prom");

    tcase_add_test(tc, names);
    tcase_add_test(tc, registration_refusals);
    tcase_add_test(tc, counter_gauge_and_escaping);
    tcase_add_test(tc, label_value_escaping);
    tcase_add_test(tc, histogram_buckets);
    tcase_add_test(tc, histogram_bisection);
    tcase_add_test(tc, summary_and_numbers);
    tcase_add_test(tc, limits);
    suite_add_tcase(s, tc);
    return s;
}
