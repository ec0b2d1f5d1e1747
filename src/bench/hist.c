/* bench/hist.c: see hist.h. */
#include "bench/hist.h"

#include <string.h>

#define SUB  (1ull << HIST_SUB_BITS)
#define HALF (1ull << (HIST_SUB_BITS - 1))

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min_ns = UINT64_MAX;
}

size_t hist_index(uint64_t ns)
{
    unsigned msb;
    unsigned shift;

    if (ns > HIST_MAX_NS) {
        ns = HIST_MAX_NS;
    }
    if (ns < SUB) {
        return (size_t)ns;
    }
    msb = 63u - (unsigned)__builtin_clzll(ns); /* >= HIST_SUB_BITS */
    shift = msb - HIST_SUB_BITS + 1;           /* >= 1 */
    /* ns >> shift is in [HALF, SUB): its low bits pick the sub-bucket. */
    return (size_t)(SUB + (uint64_t)(shift - 1) * HALF +
                    ((ns >> shift) - HALF));
}

uint64_t hist_bucket_low(size_t i)
{
    uint64_t shift;

    if (i < SUB) {
        return i;
    }
    shift = (i - SUB) / HALF + 1;
    return (HALF + (i - SUB) % HALF) << shift;
}

uint64_t hist_bucket_width(size_t i)
{
    if (i < SUB) {
        return 1;
    }
    return 1ull << ((i - SUB) / HALF + 1);
}

void hist_record(struct hist *h, uint64_t ns)
{
    if (ns > HIST_MAX_NS) {
        h->clamped++;
    }
    h->counts[hist_index(ns)]++;
    h->count++;
    if (ns < h->min_ns) {
        h->min_ns = ns;
    }
    if (ns > h->max_ns) {
        h->max_ns = ns;
    }
}

void hist_record_atomic(struct hist *h, uint64_t ns)
{
    uint64_t seen;

    if (ns > HIST_MAX_NS) {
        (void)__atomic_fetch_add(&h->clamped, 1, __ATOMIC_RELAXED);
    }
    (void)__atomic_fetch_add(&h->counts[hist_index(ns)], 1, __ATOMIC_RELAXED);
    (void)__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
    seen = __atomic_load_n(&h->min_ns, __ATOMIC_RELAXED);
    while (ns < seen &&
           !__atomic_compare_exchange_n(&h->min_ns, &seen, ns, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    seen = __atomic_load_n(&h->max_ns, __ATOMIC_RELAXED);
    while (ns > seen &&
           !__atomic_compare_exchange_n(&h->max_ns, &seen, ns, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    size_t i;

    for (i = 0; i < HIST_BUCKETS; i++) {
        dst->counts[i] += src->counts[i];
    }
    dst->count += src->count;
    dst->clamped += src->clamped;
    if (src->min_ns < dst->min_ns) {
        dst->min_ns = src->min_ns;
    }
    if (src->max_ns > dst->max_ns) {
        dst->max_ns = src->max_ns;
    }
}

static uint64_t bucket_mid(size_t i)
{
    return hist_bucket_low(i) + hist_bucket_width(i) / 2;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
    uint64_t rank;
    uint64_t seen = 0;
    size_t i;

    if (h->count == 0) {
        return 0;
    }
    if (q <= 0.0) {
        return h->min_ns;
    }
    if (q >= 1.0) {
        return h->max_ns;
    }
    /* The ceil(q*count)-th value, 1-based. */
    rank = (uint64_t)(q * (double)h->count);
    if ((double)rank < q * (double)h->count) {
        rank++;
    }
    if (rank == 0) {
        rank = 1;
    }
    for (i = 0; i < HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = bucket_mid(i);

            if (v < h->min_ns) {
                v = h->min_ns;
            }
            if (v > h->max_ns) {
                v = h->max_ns;
            }
            return v;
        }
    }
    return h->max_ns;
}

double hist_mean(const struct hist *h)
{
    double sum = 0.0;
    size_t i;

    if (h->count == 0) {
        return 0.0;
    }
    for (i = 0; i < HIST_BUCKETS; i++) {
        if (h->counts[i] != 0) {
            sum += (double)h->counts[i] * (double)bucket_mid(i);
        }
    }
    return sum / (double)h->count;
}
