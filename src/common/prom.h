/* common/prom.h: a metrics registry and its Prometheus text exposition
 * (format version 0.0.4), with no HTTP in it.
 *
 * A registry holds families (one metric name, its HELP text, its type and
 * its label names), and each family holds series (one value, or one
 * histogram, per set of label values). Families and series are made at
 * start; the hot paths then hold a series pointer and only add to it, so
 * counting costs a few instructions and never allocates.
 *
 *   counter    a value that only goes up (names end in _total);
 *   gauge      a value set by its owner (prom_set), e.g. just before a
 *              scrape is written;
 *   histogram  cumulative buckets of fixed upper bounds given with the
 *              family (strictly increasing, finite; +Inf is implied),
 *              their _sum and _count;
 *   summary    quantiles set by the owner (prom_summary_set) with their
 *              _sum and _count: for distributions computed on demand
 *              rather than observed one event at a time.
 *
 * Names follow Prometheus' rules and are checked at registration:
 * [a-zA-Z_:][a-zA-Z0-9_:]* for metrics, [a-zA-Z_][a-zA-Z0-9_]* not starting
 * with "__" for labels ("le" and "quantile" are reserved for histograms and
 * summaries). Label values are any bytes up to PROM_VALUE_MAX; the writer
 * escapes backslash, double quote and newline. HELP text escapes backslash
 * and newline.
 *
 * Bounds: PROM_FAMILIES_MAX families per registry, PROM_SERIES_MAX series
 * per family, PROM_LABELS_MAX labels, PROM_BUCKETS_MAX buckets,
 * PROM_QUANTILES_MAX quantiles. The text written is bounded by the caller's
 * buffer limit (prom_buf.max): past it the writer stops and says so.
 *
 * Ownership: the registry copies every name, help text, label value and
 * bound array; series pointers stay valid until prom_free. Not thread-safe:
 * one thread (a node's loop) owns a registry. */
#ifndef ONCE_COMMON_PROM_H_
#define ONCE_COMMON_PROM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROM_FAMILIES_MAX  256
#define PROM_SERIES_MAX    256
#define PROM_LABELS_MAX    4
#define PROM_BUCKETS_MAX   32
#define PROM_QUANTILES_MAX 8
#define PROM_NAME_MAX      128
#define PROM_HELP_MAX      512
#define PROM_VALUE_MAX     256

enum prom_type {
    PROM_COUNTER = 1,
    PROM_GAUGE,
    PROM_HISTOGRAM,
    PROM_SUMMARY,
};

struct prom_registry;
struct prom_family;
struct prom_series;

/* A growing text buffer with a hard limit. */
struct prom_buf
{
    char *p; /* malloc'd, NUL-terminated while len < cap */
    size_t len, cap;
    size_t max;     /* longest text allowed (0: 4 MiB) */
    bool truncated; /* an append would have passed max, or malloc failed */
    bool nomem;     /* ... and it was malloc */
};

/* A family's shape: @labels (n_labels names, may be NULL when 0) and, for
 * a histogram, its @bounds (n_bounds upper bounds) or, for a summary, its
 * quantiles in @bounds (each in [0, 1], increasing). */
struct prom_family_def
{
    const char *name;
    const char *help;
    enum prom_type type;
    const char *const *labels;
    unsigned n_labels;
    const double *bounds;
    unsigned n_bounds;
};

struct prom_registry *prom_new(void);
void prom_free(struct prom_registry *r);

/* Register a family. Returns it, or NULL when a name, a label or the bounds
 * break the rules above, the name is taken, or memory ran out; @why (if
 * not NULL, ERR_MSG_SIZE bytes) says which. */
struct prom_family *prom_family(struct prom_registry *r,
                                const struct prom_family_def *def,
                                char *why);

/* The series of @f with label values @values (f's n_labels of them; NULL
 * when it has none), made at 0 if new. NULL when a value is too long, the
 * family is full, or memory ran out. Series are written in the order they
 * were made. */
struct prom_series *prom_series(struct prom_family *f,
                                const char *const *values);

/* Counters: add @v (>= 0; a negative or NaN @v is ignored: counters never
 * go down). */
void prom_inc(struct prom_series *s);
void prom_add(struct prom_series *s, double v);
/* Gauges (and counters kept elsewhere and copied in before a scrape: @v
 * must then never go down). */
void prom_set(struct prom_series *s, double v);
/* Histograms: count @v in the first bucket whose bound is >= @v. */
void prom_observe(struct prom_series *s, double v);
/* Summaries: the quantiles (the family's n_bounds of them), sum and
 * count. */
void prom_summary_set(struct prom_series *s,
                      const double *quantile_values,
                      double sum,
                      uint64_t count);
/* The current value of a counter or gauge, a histogram's count. */
double prom_value(const struct prom_series *s);

/* Append the text exposition of every family to @b: "# HELP", "# TYPE",
 * then one line per sample. Returns 0, or -ENOSPC when the text was cut at
 * b->max (b->truncated) or -ENOMEM. */
int prom_write(const struct prom_registry *r, struct prom_buf *b);

/* Buffers. */
void prom_buf_init(struct prom_buf *b, size_t max);
void prom_buf_free(struct prom_buf *b);
/* Take the text out of @b (the caller frees it); @b is empty after. */
char *prom_buf_take(struct prom_buf *b, size_t *len);

/* Rules, exposed for tests. */
bool prom_valid_metric_name(const char *name);
bool prom_valid_label_name(const char *name);

#endif /* ONCE_COMMON_PROM_H_ */
