/* common/prom.c: the metrics registry and the text exposition (prom.h).
 *
 * Families live in one array in registration order, series in one array
 * per family: the output order is the order the program made them, which
 * keeps a scrape stable and readable. Values are doubles (Prometheus'
 * own sample type); histogram bucket counts are integers, cumulated only
 * when written. */
#include "common/prom.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

#define PROM_BUF_DEFAULT_MAX (4u << 20)

struct prom_series
{
    struct prom_family *fam;
    char *values[PROM_LABELS_MAX];
    double v;          /* counter, gauge */
    uint64_t *buckets; /* histogram: n_bounds (+Inf is count) */
    double sum;        /* histogram, summary */
    uint64_t count;    /* histogram, summary */
    double *quantiles; /* summary: n_bounds values */
};

struct prom_family
{
    char *name;
    char *help;
    enum prom_type type;
    unsigned n_labels;
    char *labels[PROM_LABELS_MAX];
    unsigned n_bounds;
    double *bounds; /* histogram: upper bounds; summary: quantiles */
    struct prom_series *series[PROM_SERIES_MAX];
    unsigned n_series;
};

struct prom_registry
{
    struct prom_family *fams[PROM_FAMILIES_MAX];
    unsigned n_fams;
};

/* --- names ---------------------------------------------------------------- */

static bool name_chars(const char *s, bool colon)
{
    size_t n = strlen(s);

    if (n == 0 || n > PROM_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     c == '_' || (colon && c == ':');
        bool digit = c >= '0' && c <= '9';

        if (!alpha && !(digit && i > 0)) {
            return false;
        }
    }
    return true;
}

bool prom_valid_metric_name(const char *name)
{
    return name != NULL && name_chars(name, true);
}

bool prom_valid_label_name(const char *name)
{
    return name != NULL && name_chars(name, false) &&
           strncmp(name, "__", 2) != 0;
}

/* --- registry ------------------------------------------------------------- */

struct prom_registry *prom_new(void)
{
    return calloc(1, sizeof(struct prom_registry));
}

static void series_free(struct prom_series *s)
{
    for (unsigned i = 0; i < PROM_LABELS_MAX; i++) {
        free(s->values[i]);
    }
    free(s->buckets);
    free(s->quantiles);
    free(s);
}

static void family_free(struct prom_family *f)
{
    for (unsigned i = 0; i < f->n_series; i++) {
        series_free(f->series[i]);
    }
    for (unsigned i = 0; i < PROM_LABELS_MAX; i++) {
        free(f->labels[i]);
    }
    free(f->bounds);
    free(f->name);
    free(f->help);
    free(f);
}

void prom_free(struct prom_registry *r)
{
    if (r == NULL) {
        return;
    }
    for (unsigned i = 0; i < r->n_fams; i++) {
        family_free(r->fams[i]);
    }
    free(r);
}

/* NULL if @def's bounds suit its type, else why not. */
static const char *check_bounds(const struct prom_family_def *def)
{
    bool hist = def->type == PROM_HISTOGRAM, sum = def->type == PROM_SUMMARY;

    if (!hist && !sum) {
        return def->n_bounds == 0 ? NULL
                                  : "only histograms and summaries "
                                    "take bounds";
    }
    if (def->n_bounds == 0 || def->bounds == NULL) {
        return "a histogram or summary needs bounds";
    }
    if (def->n_bounds > (hist ? PROM_BUCKETS_MAX : PROM_QUANTILES_MAX)) {
        return "too many bounds";
    }
    for (unsigned i = 0; i < def->n_bounds; i++) {
        double b = def->bounds[i];

        if (!isfinite(b) || (i > 0 && b <= def->bounds[i - 1]) ||
            (sum && (b < 0 || b > 1))) {
            return hist ? "bounds must be finite and strictly increasing"
                        : "quantiles must be increasing, within [0, 1]";
        }
    }
    return NULL;
}

/* NULL if the name, help and labels of @def are acceptable in @r. */
static const char *check_def(const struct prom_registry *r,
                             const struct prom_family_def *def)
{
    const char *reserved = def->type == PROM_HISTOGRAM ? "le"
                           : def->type == PROM_SUMMARY ? "quantile"
                                                       : NULL;

    if (def->type < PROM_COUNTER || def->type > PROM_SUMMARY) {
        return "unknown type";
    }
    if (!prom_valid_metric_name(def->name)) {
        return "bad metric name";
    }
    if (def->help == NULL || strlen(def->help) > PROM_HELP_MAX) {
        return "help text missing or too long";
    }
    if (def->n_labels > PROM_LABELS_MAX ||
        (def->n_labels > 0 && def->labels == NULL)) {
        return "too many labels";
    }
    for (unsigned i = 0; i < def->n_labels; i++) {
        if (!prom_valid_label_name(def->labels[i]) ||
            (reserved != NULL && strcmp(def->labels[i], reserved) == 0)) {
            return "bad label name";
        }
        for (unsigned j = 0; j < i; j++) {
            if (strcmp(def->labels[i], def->labels[j]) == 0) {
                return "a label given twice";
            }
        }
    }
    for (unsigned i = 0; i < r->n_fams; i++) {
        if (strcmp(r->fams[i]->name, def->name) == 0) {
            return "name already registered";
        }
    }
    if (r->n_fams == PROM_FAMILIES_MAX) {
        return "registry full";
    }
    return check_bounds(def);
}

struct prom_family *prom_family(struct prom_registry *r,
                                const struct prom_family_def *def,
                                char *why)
{
    const char *bad = check_def(r, def);
    struct prom_family *f;
    bool ok;

    if (bad != NULL) {
        err_printf(why, "%s: %s", def->name != NULL ? def->name : "(null)",
                   bad);
        return NULL;
    }
    f = calloc(1, sizeof *f);
    if (f == NULL) {
        err_printf(why, "%s: out of memory", def->name);
        return NULL;
    }
    f->type = def->type;
    f->n_labels = def->n_labels;
    f->n_bounds = def->n_bounds;
    f->name = strdup(def->name);
    f->help = strdup(def->help);
    ok = f->name != NULL && f->help != NULL;
    for (unsigned i = 0; ok && i < def->n_labels; i++) {
        ok = (f->labels[i] = strdup(def->labels[i])) != NULL;
    }
    if (ok && def->n_bounds > 0) {
        f->bounds = malloc(def->n_bounds * sizeof *f->bounds);
        ok = f->bounds != NULL;
        if (ok) {
            memcpy(f->bounds, def->bounds, def->n_bounds * sizeof *f->bounds);
        }
    }
    if (!ok) {
        family_free(f);
        err_printf(why, "%s: out of memory", def->name);
        return NULL;
    }
    r->fams[r->n_fams++] = f;
    return f;
}

static bool same_values(const struct prom_series *s, const char *const *values)
{
    for (unsigned i = 0; i < s->fam->n_labels; i++) {
        if (strcmp(s->values[i], values[i]) != 0) {
            return false;
        }
    }
    return true;
}

static struct prom_series *series_new(struct prom_family *f,
                                      const char *const *values)
{
    struct prom_series *s = calloc(1, sizeof *s);
    bool ok = true;

    if (s == NULL) {
        return NULL;
    }
    s->fam = f;
    for (unsigned i = 0; ok && i < f->n_labels; i++) {
        ok = (s->values[i] = strdup(values[i])) != NULL;
    }
    if (ok && f->type == PROM_HISTOGRAM) {
        ok = (s->buckets = calloc(f->n_bounds, sizeof *s->buckets)) != NULL;
    }
    if (ok && f->type == PROM_SUMMARY) {
        ok = (s->quantiles = calloc(f->n_bounds, sizeof *s->quantiles)) != NULL;
    }
    if (!ok) {
        series_free(s);
        return NULL;
    }
    return s;
}

struct prom_series *prom_series(struct prom_family *f,
                                const char *const *values)
{
    struct prom_series *s;

    if (f == NULL || (f->n_labels > 0 && values == NULL)) {
        return NULL;
    }
    for (unsigned i = 0; i < f->n_labels; i++) {
        if (values[i] == NULL || strlen(values[i]) > PROM_VALUE_MAX) {
            return NULL;
        }
    }
    for (unsigned i = 0; i < f->n_series; i++) {
        if (same_values(f->series[i], values)) {
            return f->series[i];
        }
    }
    if (f->n_series == PROM_SERIES_MAX) {
        return NULL;
    }
    s = series_new(f, values);
    if (s != NULL) {
        f->series[f->n_series++] = s;
    }
    return s;
}

/* --- values --------------------------------------------------------------- */

void prom_inc(struct prom_series *s)
{
    prom_add(s, 1);
}

void prom_add(struct prom_series *s, double v)
{
    if (s != NULL && v >= 0) { /* NaN compares false */
        s->v += v;
    }
}

void prom_set(struct prom_series *s, double v)
{
    if (s != NULL) {
        s->v = v;
    }
}

void prom_observe(struct prom_series *s, double v)
{
    const struct prom_family *f;

    if (s == NULL || s->buckets == NULL || isnan(v)) {
        return;
    }
    f = s->fam;
    for (unsigned i = 0; i < f->n_bounds; i++) {
        if (v <= f->bounds[i]) {
            s->buckets[i]++;
            break;
        }
    }
    s->sum += v;
    s->count++;
}

void prom_summary_set(struct prom_series *s,
                      const double *quantile_values,
                      double sum,
                      uint64_t count)
{
    if (s == NULL || s->quantiles == NULL) {
        return;
    }
    memcpy(s->quantiles, quantile_values,
           s->fam->n_bounds * sizeof *s->quantiles);
    s->sum = sum;
    s->count = count;
}

double prom_value(const struct prom_series *s)
{
    if (s == NULL) {
        return 0;
    }
    return s->buckets != NULL || s->quantiles != NULL ? (double)s->count : s->v;
}

/* --- buffer --------------------------------------------------------------- */

void prom_buf_init(struct prom_buf *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max != 0 ? max : PROM_BUF_DEFAULT_MAX;
}

void prom_buf_free(struct prom_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

char *prom_buf_take(struct prom_buf *b, size_t *len)
{
    char *p = b->p;

    *len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

static bool buf_room(struct prom_buf *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->truncated) {
        return false;
    }
    if (b->len + n + 1 > b->max) {
        b->truncated = true;
        return false;
    }
    if (b->len + n + 1 <= b->cap) {
        return true;
    }
    cap = b->cap != 0 ? b->cap : 4096;
    while (cap < b->len + n + 1) {
        cap *= 2;
    }
    p = realloc(b->p, cap);
    if (p == NULL) {
        b->truncated = true;
        b->nomem = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void buf_put(struct prom_buf *b, const char *s, size_t n)
{
    if (buf_room(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
    }
}

static void buf_puts(struct prom_buf *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

static void buf_printf(struct prom_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void buf_printf(struct prom_buf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) {
        buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
    }
}

/* --- the exposition ------------------------------------------------------- */

/* @s with backslash and newline escaped, and double quote too in a label
 * value (the format's two escaping rules). */
static void put_escaped(struct prom_buf *b, const char *s, bool quote)
{
    for (; *s != '\0'; s++) {
        if (*s == '\\') {
            buf_puts(b, "\\\\");
        } else if (*s == '\n') {
            buf_puts(b, "\\n");
        } else if (quote && *s == '"') {
            buf_puts(b, "\\\"");
        } else {
            buf_put(b, s, 1);
        }
    }
}

/* The shortest text that reads back as the same double ("0.005", not
 * "0.0050000000000000001"). */
static void put_shortest(struct prom_buf *b, double v)
{
    char tmp[40];

    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) {
            break;
        }
    }
    buf_puts(b, tmp);
}

/* A sample value: integers exactly, others in their shortest form, and
 * the format's spellings of the infinities and NaN. */
static void put_number(struct prom_buf *b, double v)
{
    if (isnan(v)) {
        buf_puts(b, "NaN");
    } else if (isinf(v)) {
        buf_puts(b, v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        buf_printf(b, "%.0f", v);
    } else {
        put_shortest(b, v);
    }
}

/* {a="x",b="y"[,extra="v"]}, nothing when there are no labels at all. */
static void put_labels(struct prom_buf *b,
                       const struct prom_series *s,
                       const char *extra,
                       double extra_v,
                       bool extra_inf)
{
    const struct prom_family *f = s->fam;

    if (f->n_labels == 0 && extra == NULL) {
        return;
    }
    buf_puts(b, "{");
    for (unsigned i = 0; i < f->n_labels; i++) {
        buf_puts(b, i > 0 ? "," : "");
        buf_puts(b, f->labels[i]);
        buf_puts(b, "=\"");
        put_escaped(b, s->values[i], true);
        buf_puts(b, "\"");
    }
    if (extra != NULL) {
        buf_puts(b, f->n_labels > 0 ? "," : "");
        buf_puts(b, extra);
        buf_puts(b, "=\"");
        if (extra_inf) {
            buf_puts(b, "+Inf");
        } else {
            put_shortest(b, extra_v);
        }
        buf_puts(b, "\"");
    }
    buf_puts(b, "}");
}

static void put_sample(struct prom_buf *b,
                       const struct prom_series *s,
                       const char *suffix,
                       double v)
{
    buf_puts(b, s->fam->name);
    buf_puts(b, suffix);
    put_labels(b, s, NULL, 0, false);
    buf_puts(b, " ");
    put_number(b, v);
    buf_puts(b, "\n");
}

static void put_histogram(struct prom_buf *b, const struct prom_series *s)
{
    const struct prom_family *f = s->fam;
    uint64_t cum = 0;

    for (unsigned i = 0; i <= f->n_bounds; i++) {
        bool inf = i == f->n_bounds;

        cum = inf ? s->count : cum + s->buckets[i];
        buf_puts(b, f->name);
        buf_puts(b, "_bucket");
        put_labels(b, s, "le", inf ? 0 : f->bounds[i], inf);
        buf_puts(b, " ");
        put_number(b, (double)cum);
        buf_puts(b, "\n");
    }
    put_sample(b, s, "_sum", s->sum);
    put_sample(b, s, "_count", (double)s->count);
}

static void put_summary(struct prom_buf *b, const struct prom_series *s)
{
    const struct prom_family *f = s->fam;

    for (unsigned i = 0; i < f->n_bounds; i++) {
        buf_puts(b, f->name);
        put_labels(b, s, "quantile", f->bounds[i], false);
        buf_puts(b, " ");
        put_number(b, s->quantiles[i]);
        buf_puts(b, "\n");
    }
    put_sample(b, s, "_sum", s->sum);
    put_sample(b, s, "_count", (double)s->count);
}

static const char *type_name(enum prom_type t)
{
    switch (t) {
        case PROM_COUNTER:
            return "counter";
        case PROM_GAUGE:
            return "gauge";
        case PROM_HISTOGRAM:
            return "histogram";
        case PROM_SUMMARY:
            return "summary";
    }
    return "untyped";
}

int prom_write(const struct prom_registry *r, struct prom_buf *b)
{
    for (unsigned i = 0; i < r->n_fams && !b->truncated; i++) {
        const struct prom_family *f = r->fams[i];

        buf_puts(b, "# HELP ");
        buf_puts(b, f->name);
        buf_puts(b, " ");
        put_escaped(b, f->help, false);
        buf_puts(b, "\n# TYPE ");
        buf_puts(b, f->name);
        buf_puts(b, " ");
        buf_puts(b, type_name(f->type));
        buf_puts(b, "\n");
        for (unsigned j = 0; j < f->n_series; j++) {
            const struct prom_series *s = f->series[j];

            if (f->type == PROM_HISTOGRAM) {
                put_histogram(b, s);
            } else if (f->type == PROM_SUMMARY) {
                put_summary(b, s);
            } else {
                put_sample(b, s, "", s->v);
            }
        }
    }
    if (b->truncated) {
        return b->nomem ? -ENOMEM : -ENOSPC;
    }
    return 0;
}
