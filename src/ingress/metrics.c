/* ingress/metrics.c: once-ingress's counters and their Prometheus text
 * exposition (format 0.0.4). Written here in a few lines rather than
 * through a library: the names are the interface, the writer is small
 * enough to replace by a shared one without changing them.
 *
 * Counters are relaxed atomics: a scrape may see one request's counters
 * half-updated, never torn values. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ingress/ingress.h"

/* Answer latency bucket bounds, microseconds (the last bucket is +Inf). */
static const uint64_t lat_le_us[INGRESS_LAT_BUCKETS] = {
    500,   1000,   2500,   5000,   10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 5000000};

void ingress_metrics_answer(struct ingress_metrics *m,
                            unsigned http,
                            uint64_t elapsed_us)
{
    size_t b = 0;
    unsigned cls = http / 100;

    atomic_fetch_add_explicit(&m->http[cls >= 2 && cls <= 5 ? cls : 0], 1,
                              memory_order_relaxed);
    while (b < INGRESS_LAT_BUCKETS && elapsed_us > lat_le_us[b]) {
        b++;
    }
    atomic_fetch_add_explicit(&m->lat_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->lat_sum_us, elapsed_us, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->lat_count, 1, memory_order_relaxed);
}

struct out
{
    char *buf;
    size_t cap;
    size_t len;
};

static void put(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->len >= o->cap) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        o->len += (size_t)n < o->cap - o->len ? (size_t)n : o->cap - o->len - 1;
    }
}

static unsigned long long get(atomic_uint_fast64_t *a)
{
    return (unsigned long long)atomic_load_explicit(a, memory_order_relaxed);
}

static void counter(struct out *o,
                    const char *name,
                    const char *help,
                    atomic_uint_fast64_t *a)
{
    put(o, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
        get(a));
}

static void outcomes(struct out *o, struct ingress_metrics *m)
{
    put(o,
        "# HELP once_ingress_outcomes_total Verify-and-claim outcomes.\n"
        "# TYPE once_ingress_outcomes_total counter\n");
    for (int i = ONCE_VC_ACCEPTED; i <= ONCE_VC_REFUSED; i++) {
        put(o, "once_ingress_outcomes_total{outcome=\"%s\"} %llu\n",
            once_vc_outcome_name((enum once_vc_outcome)i), get(&m->outcome[i]));
    }
    put(o,
        "# HELP once_ingress_responses_total Answers by HTTP class.\n"
        "# TYPE once_ingress_responses_total counter\n");
    for (int c = 2; c <= 5; c++) {
        put(o, "once_ingress_responses_total{class=\"%dxx\"} %llu\n", c,
            get(&m->http[c]));
    }
    put(o,
        "# HELP once_ingress_upstream_total Deliveries by result.\n"
        "# TYPE once_ingress_upstream_total counter\n"
        "once_ingress_upstream_total{result=\"ok\"} %llu\n"
        "once_ingress_upstream_total{result=\"terminal\"} %llu\n"
        "once_ingress_upstream_total{result=\"retryable\"} %llu\n",
        get(&m->upstream_ok), get(&m->upstream_terminal),
        get(&m->upstream_retryable));
}

static void latency(struct out *o, struct ingress_metrics *m)
{
    unsigned long long cum = 0;

    put(o,
        "# HELP once_ingress_answer_seconds Time from a webhook's last "
        "body byte to its answer.\n"
        "# TYPE once_ingress_answer_seconds histogram\n");
    for (size_t b = 0; b < INGRESS_LAT_BUCKETS; b++) {
        cum += get(&m->lat_bucket[b]);
        put(o, "once_ingress_answer_seconds_bucket{le=\"%g\"} %llu\n",
            (double)lat_le_us[b] / 1e6, cum);
    }
    cum += get(&m->lat_bucket[INGRESS_LAT_BUCKETS]);
    put(o,
        "once_ingress_answer_seconds_bucket{le=\"+Inf\"} %llu\n"
        "once_ingress_answer_seconds_sum %.6f\n"
        "once_ingress_answer_seconds_count %llu\n",
        cum, (double)get(&m->lat_sum_us) / 1e6, get(&m->lat_count));
}

/* --mode idempotency-key (docs/ingress.md lists them). */
static void idem_counters(struct out *o, struct ingress_metrics *m)
{
    counter(o, "once_ingress_idem_forwarded_total",
            "Covered requests forwarded by their key's owner.",
            &m->idem_forwarded);
    counter(o, "once_ingress_idem_replays_total",
            "Stored responses replayed (Idempotent-Replayed).",
            &m->idem_replays);
    counter(o, "once_ingress_idem_conflicts_total",
            "A key reused with another request: 422.", &m->idem_conflicts);
    counter(o, "once_ingress_idem_in_flight_total",
            "A key's first request still in flight: 409.", &m->idem_in_flight);
    counter(o, "once_ingress_idem_waits_total",
            "Requests that waited (--wait) for a key in flight.",
            &m->idem_waits);
    counter(o, "once_ingress_idem_upstream_failures_total",
            "Upstream calls that failed (no answer or a --fail-on status).",
            &m->idem_upstream_failures);
    counter(o, "once_ingress_idem_stored_total",
            "Responses completed into their key's record.", &m->idem_stored);
    counter(o, "once_ingress_idem_stored_bytes_total",
            "Bytes of the encoded responses completed.", &m->idem_stored_bytes);
    counter(o, "once_ingress_idem_not_stored_total",
            "Responses over --max-response: completed without their body.",
            &m->idem_not_stored);
    counter(o, "once_ingress_idem_not_recorded_total",
            "Forwarded requests whose complete failed (503).",
            &m->idem_not_recorded);
    counter(o, "once_ingress_idem_pass_through_total",
            "Requests forwarded without a claim.", &m->idem_pass_through);
    counter(o, "once_ingress_idem_bad_requests_total",
            "Covered requests refused before a claim (400).",
            &m->idem_bad_request);
    counter(o, "once_ingress_idem_unavailable_total",
            "Claims the cluster gave no decision for.", &m->idem_unavailable);
}

size_t ingress_metrics_text(struct ingress_metrics *m, char *buf, size_t cap)
{
    struct out o = {buf, cap, 0};

    if (cap == 0) {
        return 0;
    }
    buf[0] = '\0';
    outcomes(&o, m);
    latency(&o, m);
    counter(&o, "once_ingress_complete_failures_total",
            "Delivered messages whose complete got no COMPLETED answer.",
            &m->completes_failed);
    counter(&o, "once_ingress_release_failures_total",
            "Releases that got no answer (the lease frees the message).",
            &m->releases_failed);
    counter(&o, "once_ingress_too_large_total", "Requests refused with 413.",
            &m->too_large);
    counter(&o, "once_ingress_secret_reloads_total",
            "SIGHUP reloads that took effect.", &m->reloads_ok);
    counter(&o, "once_ingress_secret_reload_failures_total",
            "SIGHUP reloads refused (the old secrets stay).",
            &m->reloads_failed);
    idem_counters(&o, m);
    put(&o,
        "# HELP once_ingress_secrets Secrets in force.\n"
        "# TYPE once_ingress_secrets gauge\nonce_ingress_secrets %llu\n",
        get(&m->secrets));
    return o.len;
}
