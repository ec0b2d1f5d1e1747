/* once-bench: claims against a once cluster through libonce's pipelined
 * interface (once_claim_async + once_run); see bench_usage in
 * bench_args.c for the flags and bench/README.md for how the numbers are
 * used.
 *
 * One thread per connection, each with its own once_client (a client is
 * not thread-safe, and one per thread is the intended pattern) and P slots:
 *   - closed loop: every slot sends, and sends again from the callback
 *     as soon as it is answered, until the end of the run;
 *   - fixed rate (--rate): claim k of a connection is due at
 *     t0 + k/rate_per_connection. It is sent when due, or as soon as a slot
 *     frees if all P are in flight, and its latency is counted from when it
 *     was DUE, not when it was sent: a stalled cluster shows as latency,
 *     not as a pause in the load (coordinated omission).
 * A claim counts when it completes inside the measured window (after
 * --warmup): status OK in ops/s, the latency histogram and its outcome;
 * any other status in the errors. Successful completions also feed the
 * "window without a successful claim": the longest time between two of
 * them over all connections (the failover measurement).
 *
 * --count N (filling a cluster): a shared budget of N measured claims.
 * A slot takes one before sending, a failed claim gives it back (so the
 * closed loop sends it again), and the OK answer that makes N moves the
 * end of the run to that moment: the summary is over the time it took.
 *
 * SIGINT or SIGTERM moves the end to that moment too (a load in the
 * background, stopped by its owner, still prints its summary); the
 * handler is reset by its first call, so a second signal kills. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "once.h"

#define OUTCOMES_N 32 /* > every enum once_outcome */
#define STATUSES_N 16 /* > every enum once_status */
#define GAPS_MAX   1024
#define PLOT_MAX_S 3600u
#define KEY_BUF    96
_Static_assert(KEY_BUF > BENCH_KEY_MAX, "a key fits its buffer");

struct run;
struct worker;

struct slot
{
    struct worker *w;
    uint64_t due_ns; /* latency is counted from here */
    char key[KEY_BUF];
};

struct worker
{
    struct run *run;
    unsigned idx;
    pthread_t thread;
    once_client *c;
    struct slot *slots;
    struct slot **free_slots; /* a stack */
    unsigned n_free;
    uint64_t seq;       /* keys made by this connection */
    uint64_t rng;       /* xorshift64* state */
    uint64_t sent;      /* claims sent (fixed rate: the next one due) */
    double interval_ns; /* fixed rate: between two due times */
    uint64_t t0_ns;
    bool stopping;
    /* Counted inside the measured window. */
    struct hist hist;
    uint64_t ok;
    uint64_t outcomes[OUTCOMES_N];
    uint64_t errors[STATUSES_N];
    uint64_t submit_errors;
    uint64_t calls; /* --batch: batch calls answered in the window */
    char first_error[160];
    /* --batch: the items of the call being made (libonce copies them). */
    struct once_claim *items;
    char (*keys)[KEY_BUF];
};

struct gap
{
    uint64_t at_ns; /* end of the window, from the start of measuring */
    uint64_t len_ns;
};

struct run
{
    const struct bench_cfg *cfg;
    uint64_t run_id;
    uint64_t start_ns;   /* measuring starts (after warmup) */
    uint64_t end_ns;     /* atomic (--count moves it): measuring ends; no
                          * claim is sent after it */
    uint64_t budget;     /* atomic, --count: measured claims still to send */
    uint64_t ok_total;   /* atomic, --count: OK answers so far */
    uint64_t last_ok_ns; /* atomic: the latest successful completion */
    uint64_t max_gap_ns; /* atomic */
    pthread_mutex_t gap_lock;
    struct gap gaps[GAPS_MAX];
    size_t n_gaps;
    size_t gaps_dropped;
    /* --plot: per second of the measured window. */
    size_t n_secs;
    uint64_t *sec_ok;      /* atomic counters */
    struct hist *sec_hist; /* hist_record_atomic */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* The key of the next claim: the run id keeps the keys of separate runs
 * apart (a cluster keeps its records for the ttl). */
static void next_key(struct worker *w, char *buf)
{
    const struct bench_cfg *cfg = w->run->cfg;
    uint64_t n;

    switch (cfg->keys) {
        case BENCH_KEYS_HOT:
            n = rng_next(&w->rng) % cfg->hot_keys;
            bench_key_hot(buf, w->run->run_id, n);
            return;
        case BENCH_KEYS_REPLAY:
            if (w->seq > 0 && rng_next(&w->rng) % 100 < cfg->replay_pct) {
                n = rng_next(&w->rng) % w->seq; /* one sent before */
                break;
            }
            n = w->seq++;
            break;
        case BENCH_KEYS_UNIQUE:
        default:
            n = w->seq++;
            break;
    }
    bench_key_unique(buf, w->run->run_id, w->idx, n);
}

static uint64_t end_of(const struct run *run)
{
    return __atomic_load_n(&run->end_ns, __ATOMIC_RELAXED);
}

/* --count: take one claim of the budget (always true without --count, and
 * for warmup claims, which do not count). */
static bool take_budget(struct run *run, uint64_t due_ns)
{
    uint64_t left;

    if (run->cfg->count == 0 || due_ns < run->start_ns) {
        return true;
    }
    left = __atomic_load_n(&run->budget, __ATOMIC_RELAXED);
    while (left > 0) {
        if (__atomic_compare_exchange_n(&run->budget, &left, left - 1, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            return true;
        }
    }
    return false;
}

static void give_back_budget(struct run *run, uint64_t due_ns)
{
    if (run->cfg->count != 0 && due_ns >= run->start_ns) {
        (void)__atomic_fetch_add(&run->budget, 1, __ATOMIC_RELAXED);
    }
}

/* --count: one more OK answer; the one that makes N ends the run now. */
static void count_ok(struct run *run, uint64_t now)
{
    if (run->cfg->count != 0 &&
        __atomic_add_fetch(&run->ok_total, 1, __ATOMIC_RELAXED) ==
            run->cfg->count) {
        __atomic_store_n(&run->end_ns, now + 1, __ATOMIC_RELAXED);
    }
}

/* The run a stop signal ends (set before the handler is installed). */
static struct run *stop_run;

/* Async-signal-safe: clock_gettime and a lock-free atomic store. The end
 * never moves before the start (the measured time is then empty). */
static void on_stop_signal(int sig)
{
    uint64_t now = now_ns();

    (void)sig;
    if (now < stop_run->start_ns) {
        now = stop_run->start_ns;
    }
    if (now < end_of(stop_run)) {
        __atomic_store_n(&stop_run->end_ns, now, __ATOMIC_RELAXED);
    }
}

static void on_done(void *arg, struct once_result *r);
static void on_batch_done(void *arg,
                          int status,
                          struct once_result *rs,
                          size_t n);

/* --batch: one call of cfg->batch claims on a free slot. */
static bool send_batch(struct worker *w, uint64_t due_ns)
{
    const struct bench_cfg *cfg = w->run->cfg;
    struct slot *s = w->free_slots[--w->n_free];

    s->due_ns = due_ns;
    for (uint32_t i = 0; i < cfg->batch; i++) {
        struct once_claim *a = &w->items[i];

        memset(a, 0, sizeof *a);
        next_key(w, w->keys[i]);
        a->scope = (const uint8_t *)cfg->scope;
        a->scope_len = strlen(cfg->scope);
        a->key = (const uint8_t *)w->keys[i];
        a->key_len = strlen(w->keys[i]);
        a->kind = cfg->kind;
        a->ttl_ms = cfg->ttl_ms;
    }
    if (once_claim_batch_async(w->c, w->items, cfg->batch, cfg->timeout_ms,
                               on_batch_done, s) != 0) {
        w->free_slots[w->n_free++] = s;
        if (due_ns >= w->run->start_ns && due_ns < end_of(w->run)) {
            w->submit_errors++;
        }
        if (w->first_error[0] == '\0') {
            (void)snprintf(w->first_error, sizeof w->first_error, "submit: %s",
                           once_client_last_error(w->c));
        }
        return false;
    }
    return true;
}

/* A refused submission: the slot and the budget back, counted. */
static bool refused(struct worker *w, struct slot *s, uint64_t due_ns)
{
    w->free_slots[w->n_free++] = s;
    give_back_budget(w->run, due_ns);
    if (due_ns >= w->run->start_ns && due_ns < end_of(w->run)) {
        w->submit_errors++;
    }
    if (w->first_error[0] == '\0') {
        (void)snprintf(w->first_error, sizeof w->first_error, "submit: %s",
                       once_client_last_error(w->c));
    }
    return false;
}

/* --op lookup / lookup-leader on slot @s (its key set). */
static bool send_lookup(struct worker *w, struct slot *s, uint64_t due_ns)
{
    const struct bench_cfg *cfg = w->run->cfg;

    if (once_lookup_async(
            w->c, (const uint8_t *)cfg->scope, strlen(cfg->scope),
            (const uint8_t *)s->key, strlen(s->key),
            cfg->op == BENCH_OP_LOOKUP_LEADER ? ONCE_LOOKUP_LEADER : 0,
            cfg->timeout_ms, on_done, s) != 0) {
        return refused(w, s, due_ns);
    }
    return true;
}

/* Send one claim on a free slot, due at @due_ns. False if refused. */
static bool send_claim(struct worker *w, uint64_t due_ns)
{
    const struct bench_cfg *cfg = w->run->cfg;
    struct slot *s;
    struct once_claim a;

    if (cfg->batch != 0) {
        return send_batch(w, due_ns);
    }
    if (!take_budget(w->run, due_ns)) {
        if (cfg->rate != 0) {
            w->stopping = true; /* nothing more to send, ever */
        }
        return false;
    }
    s = w->free_slots[--w->n_free];
    memset(&a, 0, sizeof a);
    next_key(w, s->key);
    s->due_ns = due_ns;
    if (cfg->op != BENCH_OP_CLAIM) {
        return send_lookup(w, s, due_ns);
    }
    a.scope = (const uint8_t *)cfg->scope;
    a.scope_len = strlen(cfg->scope);
    a.key = (const uint8_t *)s->key;
    a.key_len = strlen(s->key);
    a.kind = cfg->kind;
    a.ttl_ms = cfg->ttl_ms;
    a.timeout_ms = cfg->timeout_ms;
    if (once_claim_async(w->c, &a, on_done, s) != 0) {
        return refused(w, s, due_ns);
    }
    return true;
}

/* Fixed rate: the due time of claim number @k. */
static uint64_t due_of(const struct worker *w, uint64_t k)
{
    return w->t0_ns + (uint64_t)((double)k * w->interval_ns);
}

/* Fixed rate: send what is due while slots are free. */
static void send_due(struct worker *w, uint64_t now)
{
    while (w->n_free > 0 && !w->stopping) {
        uint64_t due = due_of(w, w->sent);

        if (due > now) {
            return;
        }
        if (due >= end_of(w->run)) {
            w->stopping = true;
            return;
        }
        if (!send_claim(w, due)) {
            return;
        }
        w->sent++;
    }
}

static void note_success(struct run *run, uint64_t now)
{
    uint64_t prev =
        __atomic_exchange_n(&run->last_ok_ns, now, __ATOMIC_RELAXED);
    uint64_t gap;
    uint64_t seen;

    if (now <= prev) {
        return; /* another thread's later success got there first */
    }
    gap = now - prev;
    seen = __atomic_load_n(&run->max_gap_ns, __ATOMIC_RELAXED);
    while (gap > seen &&
           !__atomic_compare_exchange_n(&run->max_gap_ns, &seen, gap, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    if (gap > run->cfg->gap_ms * 1000000ull) {
        (void)pthread_mutex_lock(&run->gap_lock);
        if (run->n_gaps < GAPS_MAX) {
            run->gaps[run->n_gaps].at_ns = now - run->start_ns;
            run->gaps[run->n_gaps].len_ns = gap;
            run->n_gaps++;
        } else {
            run->gaps_dropped++;
        }
        (void)pthread_mutex_unlock(&run->gap_lock);
    }
}

/* One claim's answer (a single claim, or an item of a batch) at @now. */
static void count_one(struct slot *s, struct once_result *r, uint64_t now)
{
    struct worker *w = s->w;
    struct run *run = w->run;
    uint64_t end = end_of(run);

    if (r->status != ONCE_STATUS_OK) {
        give_back_budget(run, s->due_ns);
    }
    if (now >= run->start_ns && now < end) {
        if (r->status == ONCE_STATUS_OK) {
            uint64_t lat = now > s->due_ns ? now - s->due_ns : 0;

            w->ok++;
            count_ok(run, now);
            hist_record(&w->hist, lat);
            w->outcomes[(unsigned)r->outcome < OUTCOMES_N ? r->outcome : 0]++;
            note_success(run, now);
            if (run->sec_ok != NULL) {
                size_t sec = (size_t)((now - run->start_ns) / 1000000000ull);

                if (sec < run->n_secs) {
                    (void)__atomic_fetch_add(&run->sec_ok[sec], 1,
                                             __ATOMIC_RELAXED);
                    hist_record_atomic(&run->sec_hist[sec], lat);
                }
            }
        } else {
            w->errors[(unsigned)r->status < STATUSES_N ? r->status : 1]++;
            if (w->first_error[0] == '\0') {
                (void)snprintf(w->first_error, sizeof w->first_error,
                               "%s: %.120s", once_status_name(r->status),
                               r->error);
            }
        }
    } else if (r->status == ONCE_STATUS_OK && now < run->start_ns) {
        /* Warmup: the window without success starts at the first one. */
        __atomic_store_n(&run->last_ok_ns, now, __ATOMIC_RELAXED);
    }
}

/* Slot @s is free again at @now: send the next call. */
static void slot_free(struct slot *s, uint64_t now)
{
    struct worker *w = s->w;
    struct run *run = w->run;

    w->free_slots[w->n_free++] = s;
    if (now >= end_of(run)) {
        w->stopping = true;
        return;
    }
    if (run->cfg->rate == 0) {
        (void)send_claim(w, now); /* closed loop: send again at once */
    } else {
        send_due(w, now);
    }
}

static void on_done(void *arg, struct once_result *r)
{
    struct slot *s = arg;
    uint64_t now = now_ns();

    count_one(s, r, now);
    slot_free(s, now);
}

static void on_batch_done(void *arg,
                          int status,
                          struct once_result *rs,
                          size_t n)
{
    struct slot *s = arg;
    struct run *run = s->w->run;
    uint64_t now = now_ns();

    (void)status;
    for (size_t i = 0; i < n; i++) {
        count_one(s, &rs[i], now);
    }
    if (now >= run->start_ns && now < end_of(run)) {
        s->w->calls++;
    }
    slot_free(s, now);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct bench_cfg *cfg = w->run->cfg;
    unsigned i;

    if (cfg->rate == 0) {
        for (i = 0; i < cfg->pipeline; i++) {
            if (!send_claim(w, now_ns())) {
                break;
            }
        }
        while (once_run(w->c, 100) > 0) {
        }
        return NULL;
    }
    for (;;) {
        uint64_t now = now_ns();
        uint64_t due;
        int outstanding;

        send_due(w, now);
        if (w->stopping) {
            break;
        }
        due = due_of(w, w->sent);
        if (w->n_free > 0 && due > now && due - now < 1000000) {
            /* Due within a millisecond, below libuv's timer resolution:
             * poll without blocking and sleep at most 100 us, so a claim
             * is not sent (and its latency not counted) up to 1 ms late. */
            uint64_t n2;

            (void)once_run(w->c, 0);
            n2 = now_ns();
            if (due > n2) {
                struct timespec ts = {
                    0, (long)(due - n2 < 100000 ? due - n2 : 100000)};

                (void)nanosleep(&ts, NULL);
            }
            continue;
        }
        if (w->n_free == 0 || due > now) {
            /* Until the next claim is due (or, with every slot busy, a
             * millisecond: once_run returns only when all are answered,
             * so the loop comes back to send what fell due). */
            uint64_t wait = due > now ? (due - now) / 1000000 : 1;

            if (wait > 100) {
                wait = 100;
            }
            outstanding = once_run(w->c, (int)wait);
            if (outstanding == 0) {
                /* Nothing in flight: once_run returned at once. */
                uint64_t n2 = now_ns();

                if (due > n2) {
                    struct timespec ts = {(time_t)((due - n2) / 1000000000ull),
                                          (long)((due - n2) % 1000000000ull)};

                    (void)nanosleep(&ts, NULL);
                }
            }
        }
    }
    while (once_run(w->c, 100) > 0) {
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Output
 * ---------------------------------------------------------------------- */

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static const char *op_name(enum bench_op op)
{
    return op == BENCH_OP_LOOKUP          ? "lookup"
           : op == BENCH_OP_LOOKUP_LEADER ? "lookup-leader"
                                          : "claim";
}

static const char *keys_text(const struct bench_cfg *cfg, char *buf, size_t len)
{
    switch (cfg->keys) {
        case BENCH_KEYS_REPLAY:
            (void)snprintf(buf, len, "replay:%u", cfg->replay_pct);
            break;
        case BENCH_KEYS_HOT:
            (void)snprintf(buf, len, "hot:%" PRIu64, cfg->hot_keys);
            break;
        case BENCH_KEYS_UNIQUE:
        default:
            (void)snprintf(buf, len, "unique");
            break;
    }
    return buf;
}

struct totals
{
    struct hist hist;
    uint64_t ok;
    uint64_t outcomes[OUTCOMES_N];
    uint64_t errors[STATUSES_N];
    uint64_t submit_errors;
    uint64_t calls; /* --batch */
    double cpu_user_s;
    double cpu_sys_s;
    double seconds;
    const char *first_error;
};

static int cmp_gap(const void *a, const void *b)
{
    const struct gap *x = a;
    const struct gap *y = b;

    return x->at_ns < y->at_ns ? -1 : x->at_ns > y->at_ns;
}

static void print_text(const struct run *run, const struct totals *t)
{
    const struct bench_cfg *cfg = run->cfg;
    char kb[48];
    size_t i;
    bool any = false;

    printf(
        "once-bench: %s, %zu address(es)%s, connections %u, pipeline %u, "
        "batch %u, %s, keys %s, kind %s, %.1f s measured\n",
        op_name(cfg->op), cfg->n_addrs, cfg->spread ? " spread" : "",
        cfg->connections, cfg->pipeline, cfg->batch,
        cfg->rate == 0 ? "closed loop" : "fixed rate",
        keys_text(cfg, kb, sizeof kb),
        cfg->kind == ONCE_NONCE ? "nonce" : "idempotent", t->seconds);
    if (cfg->rate != 0) {
        printf("rate:       %" PRIu64
               " claims/s asked (latency from the "
               "due time)\n",
               cfg->rate);
    }
    if (cfg->count != 0) {
        printf("count:      %" PRIu64 " asked, %" PRIu64
               " answered OK in %.3f s\n",
               cfg->count, t->ok, t->seconds);
    }
    printf("ops/s:      %.1f (%" PRIu64 " answered claims)\n",
           (double)t->ok / t->seconds, t->ok);
    if (cfg->batch != 0) {
        printf(
            "batch:      %u claims per call: %.1f claims/s, %.1f calls/s "
            "(%" PRIu64
            " calls); latency below is per item (its "
            "call's)\n",
            cfg->batch, (double)t->ok / t->seconds,
            (double)t->calls / t->seconds, t->calls);
    }
    printf(
        "latency ms: p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  "
        "mean %.3f\n",
        ms(hist_quantile(&t->hist, 0.5)), ms(hist_quantile(&t->hist, 0.9)),
        ms(hist_quantile(&t->hist, 0.99)), ms(hist_quantile(&t->hist, 0.999)),
        ms(t->hist.max_ns), hist_mean(&t->hist) / 1e6);
    printf("outcomes:  ");
    for (i = 0; i < OUTCOMES_N; i++) {
        if (t->outcomes[i] != 0) {
            printf(" %s %" PRIu64, once_outcome_name((enum once_outcome)i),
                   t->outcomes[i]);
            any = true;
        }
    }
    printf("%s\nerrors:    ", any ? "" : " none");
    any = false;
    for (i = 0; i < STATUSES_N; i++) {
        if (t->errors[i] != 0) {
            printf(" %s %" PRIu64, once_status_name((enum once_status)i),
                   t->errors[i]);
            any = true;
        }
    }
    if (t->submit_errors != 0) {
        printf(" SUBMIT_REFUSED %" PRIu64, t->submit_errors);
        any = true;
    }
    printf("%s\n", any ? "" : " none");
    if (t->first_error != NULL) {
        printf("first error: %s\n", t->first_error);
    }
    printf("longest window without a successful claim: %.1f ms\n",
           ms(run->max_gap_ns));
    if (run->n_gaps > 0) {
        printf("windows over %" PRIu64 " ms (end at s: length ms):",
               cfg->gap_ms);
        for (i = 0; i < run->n_gaps; i++) {
            printf(" %.2f:%.0f", (double)run->gaps[i].at_ns / 1e9,
                   ms(run->gaps[i].len_ns));
        }
        printf("%s\n", run->gaps_dropped ? " (more dropped)" : "");
    }
    printf("client cpu: user %.2f s, sys %.2f s (%.2f cores)\n", t->cpu_user_s,
           t->cpu_sys_s, (t->cpu_user_s + t->cpu_sys_s) / t->seconds);
}

static void print_json(const struct run *run, const struct totals *t)
{
    const struct bench_cfg *cfg = run->cfg;
    char kb[48];
    size_t i;
    const char *sep = "";

    printf("{\"ops_per_sec\":%.1f,\"ops\":%" PRIu64
           ",\"duration_s\":%.3f,"
           "\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"p999_ms\":%.3f,\"max_ms\":%.3f,\"mean_ms\":%.3f,",
           (double)t->ok / t->seconds, t->ok, t->seconds,
           ms(hist_quantile(&t->hist, 0.5)), ms(hist_quantile(&t->hist, 0.9)),
           ms(hist_quantile(&t->hist, 0.99)),
           ms(hist_quantile(&t->hist, 0.999)), ms(t->hist.max_ns),
           hist_mean(&t->hist) / 1e6);
    printf("\"outcomes\":{");
    for (i = 0; i < OUTCOMES_N; i++) {
        if (t->outcomes[i] != 0) {
            printf("%s\"%s\":%" PRIu64, sep,
                   once_outcome_name((enum once_outcome)i), t->outcomes[i]);
            sep = ",";
        }
    }
    printf("},\"errors\":{");
    sep = "";
    for (i = 0; i < STATUSES_N; i++) {
        if (t->errors[i] != 0) {
            printf("%s\"%s\":%" PRIu64, sep,
                   once_status_name((enum once_status)i), t->errors[i]);
            sep = ",";
        }
    }
    if (t->submit_errors != 0) {
        printf("%s\"SUBMIT_REFUSED\":%" PRIu64, sep, t->submit_errors);
    }
    printf("},\"longest_gap_ms\":%.1f,\"gaps\":[", ms(run->max_gap_ns));
    for (i = 0; i < run->n_gaps; i++) {
        printf("%s{\"at_s\":%.3f,\"ms\":%.1f}", i ? "," : "",
               (double)run->gaps[i].at_ns / 1e9, ms(run->gaps[i].len_ns));
    }
    printf(
        "],\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,\"connections\":%u,"
        "\"pipeline\":%u,\"rate\":%" PRIu64 ",\"count\":%" PRIu64
        ",\"batch\":%u,\"calls\":%" PRIu64
        ",\"claims_per_sec\":%.1f,\"keys\":\"%s\","
        "\"kind\":\"%s\",\"op\":\"%s\",\"spread\":%s}\n",
        t->cpu_user_s, t->cpu_sys_s, cfg->connections, cfg->pipeline, cfg->rate,
        cfg->count, cfg->batch, t->calls, (double)t->ok / t->seconds,
        keys_text(cfg, kb, sizeof kb),
        cfg->kind == ONCE_NONCE ? "nonce" : "idempotent", op_name(cfg->op),
        cfg->spread ? "true" : "false");
}

/* gnuplot on PATH? */
static bool have_gnuplot(void)
{
    const char *path = getenv("PATH");
    char buf[4096];

    while (path != NULL && *path != '\0') {
        const char *colon = strchr(path, ':');
        size_t n = colon != NULL ? (size_t)(colon - path) : strlen(path);

        if (n > 0 && n < sizeof buf - 16) {
            memcpy(buf, path, n);
            memcpy(buf + n, "/gnuplot", sizeof "/gnuplot");
            if (access(buf, X_OK) == 0) {
                return true;
            }
        }
        path = colon != NULL ? colon + 1 : NULL;
    }
    return false;
}

/* The PNG: claims/s (left axis) and p50/p99 ms (right, log) per second.
 * 0, or -errno (-ENOEXEC: gnuplot did not start; -EIO: it failed). */
static int plot(const struct run *run, const char *file)
{
    char data[] = "/tmp/once-bench-plot-XXXXXX";
    int fd = mkstemp(data);
    FILE *fp;
    FILE *gp;
    size_t i;
    int rc;

    if (fd < 0) {
        int e = errno;

        fprintf(stderr, "once-bench: --plot: mkstemp: %s\n", strerror(e));
        return -e;
    }
    fp = fdopen(fd, "w");
    if (fp == NULL) {
        int e = errno;

        (void)close(fd);
        (void)unlink(data);
        return -e;
    }
    for (i = 0; i < run->n_secs; i++) {
        fprintf(fp, "%zu %" PRIu64 " %.3f %.3f\n", i + 1, run->sec_ok[i],
                ms(hist_quantile(&run->sec_hist[i], 0.5)),
                ms(hist_quantile(&run->sec_hist[i], 0.99)));
    }
    (void)fclose(fp);
    gp = popen("gnuplot", "w");
    if (gp == NULL) {
        (void)unlink(data);
        fprintf(stderr, "once-bench: --plot: cannot run gnuplot\n");
        return -ENOEXEC;
    }
    /* The file name was checked for quotes and control characters. */
    fprintf(gp,
            "set terminal pngcairo size 1000,500 noenhanced\n"
            "set output '%s'\n"
            "set title 'once-bench: claims/s and latency per second'\n"
            "set xlabel 'second'\nset ylabel 'claims/s'\n"
            "set y2label 'latency ms'\nset logscale y2\nset ytics nomirror\n"
            "set y2tics\nset yrange [0:*]\nset key outside bottom center "
            "horizontal\n"
            "plot '%s' using 1:2 with lines lw 2 title 'claims/s', "
            "'' using 1:($3>0?$3:1/0) axes x1y2 with lines title 'p50 ms', "
            "'' using 1:($4>0?$4:1/0) axes x1y2 with lines title 'p99 ms'\n",
            file, data);
    rc = pclose(gp);
    (void)unlink(data);
    if (rc != 0) {
        fprintf(stderr, "once-bench: --plot: gnuplot failed (status %d)\n", rc);
        return -EIO;
    }
    return 0;
}

static bool plot_name_ok(const char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || *s == '\'' || *s == '"' || *s == '\\') {
            return false;
        }
    }
    return true;
}

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* --plot's preconditions: 0, or the exit code (said on stderr). */
static int check_plot(const struct bench_cfg *cfg)
{
    if (!plot_name_ok(cfg->plot)) {
        fprintf(stderr,
                "once-bench: --plot: the file name may not hold "
                "quotes, backslashes or control characters\n");
        return 2;
    }
    if (cfg->duration_ms > PLOT_MAX_S * 1000ull) {
        fprintf(stderr, "once-bench: --plot: at most %u s of --duration\n",
                PLOT_MAX_S);
        return 2;
    }
    if (!have_gnuplot()) {
        fprintf(stderr,
                "once-bench: --plot needs gnuplot: apt-get install -y "
                "--no-install-recommends gnuplot-nox\n");
        return 1;
    }
    return 0;
}

/* The run's id and, for --plot, its per-second counters. 0 or 1. */
static int setup_run(struct run *run, const struct bench_cfg *cfg)
{
    uint8_t seed[ONCE_ID_LEN];

    if (once_request_id_new(seed) != 0) {
        fprintf(stderr, "once-bench: no random bytes\n");
        return 1;
    }
    memcpy(&run->run_id, seed, sizeof run->run_id);
    run->cfg = cfg;
    (void)pthread_mutex_init(&run->gap_lock, NULL);
    if (cfg->plot != NULL) {
        run->n_secs = (size_t)((cfg->duration_ms + 999) / 1000);
        run->sec_ok = calloc(run->n_secs, sizeof *run->sec_ok);
        run->sec_hist = calloc(run->n_secs, sizeof *run->sec_hist);
        if (run->sec_ok == NULL || run->sec_hist == NULL) {
            fprintf(stderr, "once-bench: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < run->n_secs; i++) {
            hist_init(&run->sec_hist[i]);
        }
    }
    return 0;
}

/* Worker @i: its slots, its client, its share of --rate. 0 or 1. */
/* A --tls-* flag, else its environment variable (empty: unset). */
static const char *flag_or_env(const char *flag, const char *env)
{
    const char *v = flag != NULL ? flag : getenv(env);

    return v != NULL && *v != '\0' ? v : NULL;
}

static int setup_worker(struct run *run, struct worker *w, unsigned i)
{
    const struct bench_cfg *cfg = run->cfg;
    char err[ERR_MSG_SIZE];
    struct once_options o;
    unsigned j;

    once_options_init(&o);
    o.addrs = cfg->addrs;
    o.n_addrs = cfg->n_addrs;
    if (cfg->spread) {
        o.addrs = &cfg->addrs[i % cfg->n_addrs];
        o.n_addrs = 1;
    }
    o.timeout_ms = cfg->timeout_ms;
    o.max_inflight = cfg->pipeline;
    o.tls_ca = flag_or_env(cfg->tls_ca, "ONCE_TLS_CA");
    o.tls_cert = flag_or_env(cfg->tls_cert, "ONCE_TLS_CERT");
    o.tls_key = flag_or_env(cfg->tls_key, "ONCE_TLS_KEY");
    w->run = run;
    w->idx = i;
    w->rng = (run->run_id ^ (0x9E3779B97F4A7C15ull * (i + 1))) | 1;
    hist_init(&w->hist);
    w->slots = calloc(cfg->pipeline, sizeof *w->slots);
    w->free_slots = calloc(cfg->pipeline, sizeof *w->free_slots);
    if (w->slots == NULL || w->free_slots == NULL) {
        fprintf(stderr, "once-bench: out of memory\n");
        return 1;
    }
    for (j = 0; j < cfg->pipeline; j++) {
        w->slots[j].w = w;
        w->free_slots[j] = &w->slots[cfg->pipeline - 1 - j];
    }
    w->n_free = cfg->pipeline;
    if (cfg->batch != 0) {
        w->items = calloc(cfg->batch, sizeof *w->items);
        w->keys = calloc(cfg->batch, sizeof *w->keys);
        if (w->items == NULL || w->keys == NULL) {
            fprintf(stderr, "once-bench: out of memory\n");
            return 1;
        }
    }
    if (once_client_new(&o, &w->c, err, sizeof err) != 0) {
        fprintf(stderr, "once-bench: client: %s\n", err);
        return 1;
    }
    if (cfg->rate != 0) {
        /* The rate split evenly, the remainder to the first ones. */
        uint64_t r = cfg->rate / cfg->connections +
                     (i < cfg->rate % cfg->connections ? 1 : 0);

        w->interval_ns = 1e9 / (double)r;
    }
    return 0;
}

/* Fix the measured window and the schedules, catch SIGINT/SIGTERM, start
 * the threads. 0 or 1. */
static int start_workers(struct run *run, struct worker *ws)
{
    const struct bench_cfg *cfg = run->cfg;
    struct sigaction sa;
    uint64_t t0 = now_ns();
    unsigned i;
    int rc;

    run->start_ns = t0 + cfg->warmup_ms * 1000000ull;
    run->end_ns = run->start_ns + cfg->duration_ms * 1000000ull;
    run->budget = cfg->count;
    run->last_ok_ns = run->start_ns;
    for (i = 0; i < cfg->connections; i++) {
        /* Spread the connections' schedules over one interval. */
        ws[i].t0_ns = t0 + (uint64_t)(ws[i].interval_ns * i / cfg->connections);
    }
    stop_run = run;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    (void)sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGINT, &sa, NULL);
    (void)sigaction(SIGTERM, &sa, NULL);
    for (i = 0; i < cfg->connections; i++) {
        rc = pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
        if (rc != 0) {
            fprintf(stderr, "once-bench: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    return 0;
}

/* Join the threads and add up what each counted. */
static void join_workers(const struct run *run,
                         struct worker *ws,
                         struct totals *t)
{
    hist_init(&t->hist);
    for (unsigned i = 0; i < run->cfg->connections; i++) {
        unsigned j;

        (void)pthread_join(ws[i].thread, NULL);
        hist_merge(&t->hist, &ws[i].hist);
        t->ok += ws[i].ok;
        for (j = 0; j < OUTCOMES_N; j++) {
            t->outcomes[j] += ws[i].outcomes[j];
        }
        for (j = 0; j < STATUSES_N; j++) {
            t->errors[j] += ws[i].errors[j];
        }
        t->submit_errors += ws[i].submit_errors;
        t->calls += ws[i].calls;
        if (t->first_error == NULL && ws[i].first_error[0] != '\0') {
            t->first_error = ws[i].first_error;
        }
    }
}

/* The figures that need the whole run: the last gap, the CPU time, the
 * measured seconds. */
static void finish_totals(struct run *run,
                          const struct rusage *ru0,
                          const struct rusage *ru1,
                          struct totals *t)
{
    /* The window from the last success to the end counts too. */
    uint64_t last = run->last_ok_ns;

    if (run->end_ns > last && run->end_ns - last > run->max_gap_ns) {
        run->max_gap_ns = run->end_ns - last;
    }
    qsort(run->gaps, run->n_gaps, sizeof run->gaps[0], cmp_gap);
    t->cpu_user_s = tv_s(ru1->ru_utime) - tv_s(ru0->ru_utime);
    t->cpu_sys_s = tv_s(ru1->ru_stime) - tv_s(ru0->ru_stime);
    /* --count or a signal may have ended the run early: the time it took
     * (at least 1 ns, so the rates stay defined). */
    t->seconds = (double)(run->end_ns - run->start_ns) / 1e9;
    if (t->seconds <= 0) {
        t->seconds = 1e-9;
    }
}

/* Print the summary (and the plot); the exit code. */
static int report(const struct run *run, const struct totals *t)
{
    const struct bench_cfg *cfg = run->cfg;
    int rc = 0;

    if (cfg->json) {
        print_json(run, t);
    } else {
        print_text(run, t);
    }
    if (t->ok == 0) {
        fprintf(stderr,
                "once-bench: no claim was answered in the measured "
                "time\n");
        rc = 1;
    } else if (cfg->count != 0 && t->ok < cfg->count) {
        fprintf(stderr,
                "once-bench: --count %" PRIu64 " not reached: %" PRIu64
                " answered OK in --duration\n",
                cfg->count, t->ok);
        rc = 1;
    }
    if (cfg->plot != NULL && plot(run, cfg->plot) != 0) {
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    static struct bench_cfg cfg;
    static struct run run;
    static struct totals t;
    char err[ERR_MSG_SIZE];
    struct worker *ws;
    struct rusage ru0, ru1;
    unsigned i;
    int rc;

    rc = bench_parse(argc, argv, &cfg, err);
    if (rc == 1) {
        fputs(bench_usage, stdout);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "once-bench: %s\n", err);
        return 2;
    }
    if (cfg.plot != NULL && (rc = check_plot(&cfg)) != 0) {
        return rc;
    }
    if (setup_run(&run, &cfg) != 0) {
        return 1;
    }
    ws = calloc(cfg.connections, sizeof *ws);
    if (ws == NULL) {
        fprintf(stderr, "once-bench: out of memory\n");
        return 1;
    }
    for (i = 0; i < cfg.connections; i++) {
        if (setup_worker(&run, &ws[i], i) != 0) {
            return 1;
        }
    }
    (void)getrusage(RUSAGE_SELF, &ru0);
    if (start_workers(&run, ws) != 0) {
        return 1;
    }
    join_workers(&run, ws, &t);
    (void)getrusage(RUSAGE_SELF, &ru1);
    finish_totals(&run, &ru0, &ru1, &t);
    rc = report(&run, &t);
    for (i = 0; i < cfg.connections; i++) {
        once_client_free(ws[i].c);
        free(ws[i].slots);
        free(ws[i].free_slots);
        free(ws[i].items);
        free(ws[i].keys);
    }
    free(ws);
    free(run.sec_ok);
    free(run.sec_hist);
    return rc;
}
