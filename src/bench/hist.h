/* bench/hist.h: an HDR-style latency histogram for once-bench.
 *
 * Log-linear buckets over nanoseconds: values below 2^HIST_SUB_BITS are
 * exact; above, each power of two is cut into 2^(HIST_SUB_BITS-1) equal
 * buckets, so a recorded value and the bucket's representative differ by
 * less than 1/2^(HIST_SUB_BITS-1) (0.79 % with 8 bits) whatever the
 * magnitude: 100 us and 10 s have the same relative precision. Values over
 * HIST_MAX_NS are counted in the top bucket (and in `clamped`). The
 * layout is fixed, so histograms merge by adding counts. No allocation
 * beyond hist_new; not thread-safe (one per thread, merged at the end)
 * except hist_record_atomic, which several threads may call on one
 * histogram. */
#ifndef ONCE_BENCH_HIST_H_
#define ONCE_BENCH_HIST_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HIST_SUB_BITS 8
#define HIST_MAX_BITS 40 /* 2^40 ns: about 18 minutes */
#define HIST_MAX_NS   ((1ull << HIST_MAX_BITS) - 1)
#define HIST_BUCKETS         \
    ((1u << HIST_SUB_BITS) + \
     (HIST_MAX_BITS - HIST_SUB_BITS) * (1u << (HIST_SUB_BITS - 1)))

struct hist
{
    uint64_t count;
    uint64_t clamped; /* values over HIST_MAX_NS */
    uint64_t min_ns;  /* UINT64_MAX while empty */
    uint64_t max_ns;
    uint64_t counts[HIST_BUCKETS];
};

/* Zero @h (empty). */
void hist_init(struct hist *h);

/* Bucket of @ns (clamped to HIST_MAX_NS). */
size_t hist_index(uint64_t ns);
/* The lowest value that lands in bucket @i, and the bucket's width. */
uint64_t hist_bucket_low(size_t i);
uint64_t hist_bucket_width(size_t i);

void hist_record(struct hist *h, uint64_t ns);
/* The same from several threads at once (relaxed atomics: totals are
 * exact once the threads have been joined). */
void hist_record_atomic(struct hist *h, uint64_t ns);

/* Add @src's counts to @dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The value at quantile @q (0..1): the representative (the middle) of the
 * bucket holding the ceil(q*count)-th smallest value, bounded by the
 * recorded min and max, so q=1 is the exact maximum. 0 when empty. */
uint64_t hist_quantile(const struct hist *h, double q);

/* Mean of the bucket representatives; 0 when empty. */
double hist_mean(const struct hist *h);

#endif /* ONCE_BENCH_HIST_H_ */
