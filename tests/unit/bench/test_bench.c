/* test_bench: once-bench's histogram (bucket layout, precision, quantiles,
 * merge, atomic recording) and its flag parser (defaults, every flag, and
 * the refusals with the flag named), and its key strings against printf's. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/hist.h"

Suite *bench_suite(void);

static struct hist h;

/* Every value's bucket holds it, and buckets tile the range in order. */
START_TEST(test_hist_layout)
{
    size_t i;
    uint64_t v;

    ck_assert_uint_eq(hist_index(0), 0);
    ck_assert_uint_eq(hist_index(255), 255);
    ck_assert_uint_eq(hist_index(256), 256);
    ck_assert_uint_eq(hist_index(HIST_MAX_NS), HIST_BUCKETS - 1);
    ck_assert_uint_eq(hist_index(UINT64_MAX), HIST_BUCKETS - 1);
    for (i = 0; i + 1 < HIST_BUCKETS; i++) {
        ck_assert_uint_eq(hist_bucket_low(i) + hist_bucket_width(i),
                          hist_bucket_low(i + 1));
    }
    ck_assert_uint_eq(hist_bucket_low(HIST_BUCKETS - 1) +
                          hist_bucket_width(HIST_BUCKETS - 1) - 1,
                      HIST_MAX_NS);
    for (v = 1; v < HIST_MAX_NS; v = v * 3 + 7) {
        size_t b = hist_index(v);

        ck_assert_uint_le(hist_bucket_low(b), v);
        ck_assert_uint_gt(hist_bucket_low(b) + hist_bucket_width(b), v);
        /* Relative width under 1/128 above the exact range. */
        if (v >= 256) {
            ck_assert_uint_le(hist_bucket_width(b) * 128, hist_bucket_low(b));
        }
    }
}
END_TEST

START_TEST(test_hist_quantiles)
{
    uint64_t i;
    uint64_t p50, p99, p999;

    hist_init(&h);
    ck_assert_uint_eq(hist_quantile(&h, 0.5), 0);
    /* 1..100000 us: pN is N % of 100 ms, within 0.8 %. */
    for (i = 1; i <= 100000; i++) {
        hist_record(&h, i * 1000);
    }
    ck_assert_uint_eq(h.count, 100000);
    ck_assert_uint_eq(h.min_ns, 1000);
    ck_assert_uint_eq(h.max_ns, 100000000);
    p50 = hist_quantile(&h, 0.5);
    p99 = hist_quantile(&h, 0.99);
    p999 = hist_quantile(&h, 0.999);
    ck_assert_uint_ge(p50, 50000000 - 400000);
    ck_assert_uint_le(p50, 50000000 + 400000);
    ck_assert_uint_ge(p99, 99000000 - 800000);
    ck_assert_uint_le(p99, 99000000 + 800000);
    ck_assert_uint_ge(p999, 99900000 - 800000);
    ck_assert_uint_le(p999, 100000000);
    ck_assert_uint_eq(hist_quantile(&h, 1.0), 100000000);
    ck_assert_uint_eq(hist_quantile(&h, 0.0), 1000);
    ck_assert(hist_mean(&h) > 49.6e6 && hist_mean(&h) < 50.4e6);
}
END_TEST

/* One slow value among many fast ones: p99.9 of 1000 values is the
 * 999th, p100 the slow one (a histogram must not hide the tail). */
START_TEST(test_hist_tail)
{
    int i;

    hist_init(&h);
    for (i = 0; i < 999; i++) {
        hist_record(&h, 200000);
    }
    hist_record(&h, 3000000000ull);
    ck_assert_uint_le(hist_quantile(&h, 0.999), 201000);
    ck_assert_uint_eq(hist_quantile(&h, 1.0), 3000000000ull);
    hist_record(&h, HIST_MAX_NS + 5);
    ck_assert_uint_eq(h.clamped, 1);
    ck_assert_uint_eq(h.counts[HIST_BUCKETS - 1], 1);
}
END_TEST

START_TEST(test_hist_merge)
{
    static struct hist a, b;

    hist_init(&a);
    hist_init(&b);
    hist_record(&a, 10);
    hist_record(&a, 1000000);
    hist_record(&b, 5);
    hist_record(&b, 7000000);
    hist_merge(&a, &b);
    ck_assert_uint_eq(a.count, 4);
    ck_assert_uint_eq(a.min_ns, 5);
    ck_assert_uint_eq(a.max_ns, 7000000);
    ck_assert_uint_eq(a.counts[hist_index(10)], 1);
    ck_assert_uint_eq(a.counts[hist_index(7000000)], 1);
}
END_TEST

static void *record_many(void *arg)
{
    uint64_t i;

    (void)arg;
    for (i = 1; i <= 20000; i++) {
        hist_record_atomic(&h, i * 100);
    }
    return NULL;
}

START_TEST(test_hist_atomic)
{
    pthread_t t[4];
    int i;

    hist_init(&h);
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_create(&t[i], NULL, record_many, NULL), 0);
    }
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    }
    ck_assert_uint_eq(h.count, 80000);
    ck_assert_uint_eq(h.min_ns, 100);
    ck_assert_uint_eq(h.max_ns, 2000000);
    ck_assert_uint_eq(h.counts[hist_index(100)], 4);
}
END_TEST

/* ---- flags ---- */

static struct bench_cfg cfg;
static char err[ERR_MSG_SIZE];

static int parse(const char *first, ...)
{
    char *argv[40];
    int argc = 1;
    va_list ap;
    const char *w;

    argv[0] = (char *)"once-bench";
    va_start(ap, first);
    for (w = first; w != NULL && argc < 39; w = va_arg(ap, const char *)) {
        argv[argc++] = (char *)w;
    }
    va_end(ap);
    argv[argc] = NULL;
    err[0] = '\0';
    return bench_parse(argc, argv, &cfg, err);
}

START_TEST(test_args_defaults)
{
    ck_assert_int_eq(parse(NULL), 0);
    ck_assert_uint_eq(cfg.n_addrs, 3);
    ck_assert_str_eq(cfg.addrs[0], "127.0.0.1:7101");
    ck_assert_str_eq(cfg.addrs[2], "127.0.0.1:7103");
    ck_assert_uint_eq(cfg.connections, 1);
    ck_assert_uint_eq(cfg.pipeline, 1);
    ck_assert_uint_eq(cfg.duration_ms, 10000);
    ck_assert_int_eq(cfg.keys, BENCH_KEYS_UNIQUE);
    ck_assert_int_eq(cfg.kind, ONCE_NONCE);
    ck_assert_uint_eq(cfg.rate, 0);
    ck_assert(!cfg.json);
    ck_assert_ptr_null(cfg.plot);
    ck_assert_int_eq(parse("--help", NULL), 1);
}
END_TEST

START_TEST(test_args_all)
{
    ck_assert_int_eq(
        parse("--cluster", "127.0.0.2:1,127.0.0.3:65535", "--connections=16",
              "--pipeline", "64", "--duration", "2m", "--warmup", "500ms",
              "--keys", "replay:50", "--kind", "idempotent", "--rate", "1000",
              "--ttl", "1h", "--timeout=3s", "--gap", "50ms", "--scope", "s1",
              "--json", "--plot", "x.png", NULL),
        0);
    ck_assert_uint_eq(cfg.n_addrs, 2);
    ck_assert_str_eq(cfg.addrs[1], "127.0.0.3:65535");
    ck_assert_uint_eq(cfg.connections, 16);
    ck_assert_uint_eq(cfg.pipeline, 64);
    ck_assert_uint_eq(cfg.duration_ms, 120000);
    ck_assert_uint_eq(cfg.warmup_ms, 500);
    ck_assert_int_eq(cfg.keys, BENCH_KEYS_REPLAY);
    ck_assert_uint_eq(cfg.replay_pct, 50);
    ck_assert_int_eq(cfg.kind, ONCE_IDEMPOTENT);
    ck_assert_uint_eq(cfg.rate, 1000);
    ck_assert_uint_eq(cfg.ttl_ms, 3600000);
    ck_assert_uint_eq(cfg.timeout_ms, 3000);
    ck_assert_uint_eq(cfg.gap_ms, 50);
    ck_assert_str_eq(cfg.scope, "s1");
    ck_assert(cfg.json);
    ck_assert_str_eq(cfg.plot, "x.png");
    ck_assert_int_eq(parse("--keys", "hot:10", NULL), 0);
    ck_assert_int_eq(cfg.keys, BENCH_KEYS_HOT);
    ck_assert_uint_eq(cfg.hot_keys, 10);
    ck_assert_int_eq(parse("--keys", "replay:0", "--keys", "unique", NULL), 0);
    ck_assert_int_eq(cfg.keys, BENCH_KEYS_UNIQUE);
}
END_TEST

/* Each refusal: -EINVAL and a message that names the flag. */
static void refused(const char *flag, const char *val, const char *needle)
{
    ck_assert_int_eq(val != NULL ? parse(flag, val, NULL) : parse(flag, NULL),
                     -EINVAL);
    ck_assert_msg(strstr(err, needle) != NULL, "%s %s: \"%s\" lacks \"%s\"",
                  flag, val != NULL ? val : "", err, needle);
}

START_TEST(test_args_refused)
{
    refused("--connections", "0", "--connections");
    refused("--connections", "1025", "--connections");
    refused("--connections", "-1", "--connections");
    refused("--connections", NULL, "needs a value");
    refused("--pipeline", "0", "--pipeline");
    refused("--pipeline", "1x", "--pipeline");
    refused("--duration", "10", "--duration");
    refused("--duration", "0s", "--duration");
    refused("--duration", "25h", "--duration");
    refused("--warmup", "x", "--warmup");
    refused("--keys", "random", "--keys");
    refused("--keys", "replay:101", "replay:PCT");
    refused("--keys", "replay:", "replay:PCT");
    refused("--keys", "hot:0", "hot:K");
    refused("--keys", "hot:100000001", "hot:K");
    refused("--kind", "NONCE", "--kind");
    refused("--rate", "0", "--rate");
    refused("--rate", "10000001", "--rate");
    refused("--ttl", "169h", "--ttl");
    refused("--timeout", "0ms", "--timeout");
    refused("--gap", "0ms", "--gap");
    refused("--scope", "", "--scope");
    refused("--plot", "", "--plot");
    refused("--cluster", "", "--cluster");
    refused("--cluster", "localhost:7101", "bad address");
    refused("--cluster", "127.0.0.1:0", "bad address");
    refused("--cluster", "127.0.0.1:7101,", "bad address");
    refused("--cluster", "127.0.0.1", "bad address");
    refused("--frobnicate", NULL, "unknown flag");
    refused("--jsonx", NULL, "unknown flag");
    ck_assert_int_eq(parse("--connections", "4", "--rate", "3", NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--rate"));
}
END_TEST

/* --batch: 1..4096 claims per call (ONCE_BATCH_MAX), closed loop only. */
START_TEST(test_args_batch)
{
    ck_assert_int_eq(parse(NULL), 0);
    ck_assert_uint_eq(cfg.batch, 0);
    ck_assert_int_eq(parse("--batch", "256", NULL), 0);
    ck_assert_uint_eq(cfg.batch, 256);
    ck_assert_int_eq(parse("--batch=4096", "--pipeline", "2", NULL), 0);
    ck_assert_uint_eq(cfg.batch, 4096);
    refused("--batch", "0", "--batch");
    refused("--batch", "4097", "--batch");
    ck_assert_int_eq(parse("--batch", "8", "--rate", "100", NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--batch: not with --rate or --count"));
    ck_assert_int_eq(parse("--count", "10", "--batch", "8", NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--batch"));
}
END_TEST

/* --count: the bound, its refusals, and the duration it implies (24h
 * unless --duration says otherwise, in either order). */
START_TEST(test_args_count)
{
    ck_assert_int_eq(parse(NULL), 0);
    ck_assert_uint_eq(cfg.count, 0);
    ck_assert_int_eq(parse("--count", "200000", NULL), 0);
    ck_assert_uint_eq(cfg.count, 200000);
    ck_assert_uint_eq(cfg.duration_ms, BENCH_DURATION_MAX_MS);
    ck_assert_int_eq(parse("--count=5", "--duration", "30s", NULL), 0);
    ck_assert_uint_eq(cfg.count, 5);
    ck_assert_uint_eq(cfg.duration_ms, 30000);
    ck_assert_int_eq(parse("--duration", "30s", "--count", "5", NULL), 0);
    ck_assert_uint_eq(cfg.duration_ms, 30000);
    ck_assert_int_eq(parse("--count", "1000000000000", NULL), 0);
    ck_assert_uint_eq(cfg.count, BENCH_COUNT_MAX);
    refused("--count", "0", "--count");
    refused("--count", "1000000000001", "--count");
    refused("--count", "1M", "--count");
    refused("--count", NULL, "needs a value");
    ck_assert_ptr_nonnull(strstr(bench_usage, "--count N"));
}
END_TEST

/* --op and --spread: claims by default; lookups the node reaches reads, or
 * the leader; the names refused otherwise. */
START_TEST(test_args_op_spread)
{
    ck_assert_int_eq(parse(NULL), 0);
    ck_assert_int_eq(cfg.op, BENCH_OP_CLAIM);
    ck_assert(!cfg.spread);
    ck_assert_int_eq(parse("--op", "lookup", "--spread", NULL), 0);
    ck_assert_int_eq(cfg.op, BENCH_OP_LOOKUP);
    ck_assert(cfg.spread);
    ck_assert_int_eq(parse("--op=lookup-leader", NULL), 0);
    ck_assert_int_eq(cfg.op, BENCH_OP_LOOKUP_LEADER);
    ck_assert_int_eq(parse("--op", "claim", NULL), 0);
    ck_assert_int_eq(cfg.op, BENCH_OP_CLAIM);
    refused("--op", "read", "--op");
    refused("--op", NULL, "needs a value");
    refused("--spread=1", NULL, "unknown flag");
    ck_assert_ptr_nonnull(strstr(bench_usage, "--op lookup"));
    ck_assert_ptr_nonnull(strstr(bench_usage, "--spread"));
}
END_TEST

START_TEST(test_args_cluster_bounds)
{
    char big[ONCE_ADDRS_MAX * 20];
    size_t i, n = 0;

    for (i = 0; i < ONCE_ADDRS_MAX + 1; i++) {
        n += (size_t)snprintf(big + n, sizeof big - n, "%s127.0.0.1:%zu",
                              i ? "," : "", 1000 + i);
    }
    ck_assert_int_eq(parse("--cluster", big, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "more than"));
    /* Exactly the maximum is fine. */
    *strrchr(big, ',') = '\0';
    ck_assert_int_eq(parse("--cluster", big, NULL), 0);
    ck_assert_uint_eq(cfg.n_addrs, ONCE_ADDRS_MAX);
}
END_TEST

/* The hand-written keys are printf's strings: edge values, then random
 * ones of every magnitude. */
START_TEST(test_keys_as_printf)
{
    static const uint64_t edge[] = {
        0, 1, 9, 10, 99, 100, UINT32_MAX, UINT64_MAX / 10, UINT64_MAX};
    char got[BENCH_KEY_MAX + 1], want[BENCH_KEY_MAX + 2];
    uint64_t x = 0x9e3779b97f4a7c15ull;

    for (size_t i = 0; i < 20000; i++) {
        uint64_t run_id, n;
        unsigned idx;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        run_id = i < 9 ? edge[i] : x;
        n = i < 9 ? edge[8 - i] : x >> (x % 64);
        idx = i < 9 ? (unsigned)edge[i] : (unsigned)(x >> (x % 61));
        bench_key_unique(got, run_id, idx, n);
        snprintf(want, sizeof want, "%016" PRIx64 "-%u-%" PRIu64, run_id, idx,
                 n);
        ck_assert_str_eq(got, want);
        bench_key_hot(got, run_id, n);
        snprintf(want, sizeof want, "%016" PRIx64 "-hot-%" PRIu64, run_id, n);
        ck_assert_str_eq(got, want);
    }
}
END_TEST

Suite *bench_suite(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("hist");

    tcase_add_test(tc, test_hist_layout);
    tcase_add_test(tc, test_hist_quantiles);
    tcase_add_test(tc, test_hist_tail);
    tcase_add_test(tc, test_hist_merge);
    tcase_add_test(tc, test_hist_atomic);
    suite_add_tcase(s, tc);
    tc = tcase_create("args");
    tcase_add_test(tc, test_args_defaults);
    tcase_add_test(tc, test_args_all);
    tcase_add_test(tc, test_args_refused);
    tcase_add_test(tc, test_args_count);
    tcase_add_test(tc, test_args_op_spread);
    tcase_add_test(tc, test_args_batch);
    tcase_add_test(tc, test_args_cluster_bounds);
    tcase_add_test(tc, test_keys_as_printf);
    suite_add_tcase(s, tc);
    return s;
}
