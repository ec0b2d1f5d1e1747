/* Quotas: per scope pattern limits on counted records and bytes
 * (docs/state-machine.md, "Quotas").
 *
 * The patterns and limits are replicated state (QuotaSet, schema 2, and
 * the snapshot); the usage beside them is derived. A record is charged to
 * one quota: the exact pattern equal to its scope if there is one, else
 * the longest prefix pattern its scope starts with. Usage counts exactly
 * what the cluster's figures count (fsm_acct.c: a record counts while its
 * expiry tick has not passed), through the same fsm_acct_in/out calls, so
 * it never depends on how far budgeted pruning got: a replica that applied
 * the log and one restored from a snapshot answer alike.
 *
 * Which quota a record belongs to depends on the set of patterns, so
 * setting or removing one rebuilds every quota's usage with a walk over
 * the records: O(records) inside that one apply (docs/state-machine.md
 * gives a measured figure). Restore charges records as they are read, the
 * patterns coming first in the snapshot. At most FSM_QUOTAS_MAX quotas:
 * finding a record's quota is a scan of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "fsm/fsm_int.h"

const char *fsm_pattern_check(const uint8_t *p, size_t len)
{
    size_t scope_len = len;

    if (len < 1 || len > FSM_PATTERN_MAX) {
        return "quota pattern must be 1..129 bytes";
    }
    if (p[len - 1] == '*') {
        scope_len--;
    }
    if (scope_len > FSM_SCOPE_MAX || (scope_len == 0 && p[len - 1] != '*')) {
        return "quota pattern must be a scope of 1..128 bytes, or a prefix "
               "of 0..128 bytes then '*'";
    }
    for (size_t i = 0; i < scope_len; i++) {
        if (p[i] == '*') {
            return "quota pattern may hold '*' only at its end";
        }
        if (p[i] < 0x20 || p[i] == 0x7f) {
            return "quota pattern has a control character";
        }
    }
    return NULL;
}

/* Byte order of patterns: the canonical order of the list. */
static int pattern_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);

    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn;
}

struct quota *fsm_quota_of(struct fsm *f,
                           const uint8_t *scope,
                           size_t scope_len)
{
    struct quota *best = NULL;
    size_t best_len = 0;

    for (size_t i = 0; i < f->n_quotas; i++) {
        struct quota *q = &f->quotas[i];

        if (!q->prefix) {
            if (q->len == scope_len && memcmp(q->pattern, scope, q->len) == 0) {
                return q; /* an exact pattern beats every prefix */
            }
            continue;
        }
        if ((size_t)q->len - 1 <= scope_len &&
            memcmp(q->pattern, scope, (size_t)q->len - 1) == 0 &&
            (best == NULL || (size_t)q->len - 1 > best_len)) {
            best = q;
            best_len = (size_t)q->len - 1;
        }
    }
    return best;
}

void fsm_quota_charge(struct quota *q, const struct tick_cost *c, int sign)
{
    ONCE_ASSERTF(sign > 0 || (q->n >= c->n && q->bytes >= c->bytes),
                 "quota %s uncharged %llu records, holds %llu", q->pattern,
                 (unsigned long long)c->n, (unsigned long long)q->n);
    fsm_ticks_add(&q->ticks, c->tick, c, sign);
    q->n += sign > 0 ? c->n : -c->n;
    q->bytes += sign > 0 ? c->bytes : -c->bytes;
}

bool fsm_quota_refuses(struct fsm *f,
                       const uint8_t *scope,
                       size_t scope_len,
                       uint64_t need,
                       struct fsm_result *res)
{
    const struct quota *q;
    const char *what;

    if (f->n_quotas == 0) {
        return false;
    }
    q = fsm_quota_of(f, scope, scope_len);
    if (q == NULL) {
        return false;
    }
    if (q->max_records != 0 && q->n + 1 > q->max_records) {
        what = "max_records";
    } else if (q->max_bytes != 0 && q->bytes + need > q->max_bytes) {
        what = "max_bytes";
    } else {
        return false;
    }
    snprintf(f->quota_reason, sizeof f->quota_reason,
             "the quota %s's %s is reached", q->pattern, what);
    res->outcome = FSM_RESOURCE_EXHAUSTED;
    res->reason = f->quota_reason;
    return true;
}

bool fsm_quota_rec_fits(struct fsm *f, const struct rec *r, uint64_t n)
{
    const struct quota *q;
    struct tick_cost own;

    if (f->n_quotas == 0) {
        return true;
    }
    q = fsm_quota_of(f, r->id, r->scope_len);
    if (q == NULL || q->max_bytes == 0) {
        return true;
    }
    fsm_rec_cost(f, r, &own);
    return q->bytes + own.bytes + n <= q->max_bytes;
}

void fsm_quota_pass(struct fsm *f, uint64_t from, uint64_t to)
{
    for (size_t i = 0; i < f->n_quotas; i++) {
        struct quota *q = &f->quotas[i];
        struct tick_cost gone = {0, 0, 0, 0, 0};

        fsm_ticks_pass(&q->ticks, from, to, &gone);
        q->n -= gone.n;
        q->bytes -= gone.bytes;
    }
}

/* Drop every quota's usage and charge each counted record again: the walk
 * the set of patterns changing costs. */
static void recount(struct fsm *f)
{
    for (size_t i = 0; i < f->n_quotas; i++) {
        fsm_ticks_close(&f->quotas[i].ticks);
        f->quotas[i].n = 0;
        f->quotas[i].bytes = 0;
    }
    if (f->n_quotas == 0) {
        return;
    }
    for (uint32_t v = 0; v < FSM_N_VPS; v++) {
        const struct table *t = &f->vps[v];

        for (uint32_t s = 0; s < t->cap; s++) {
            const struct rec *r;
            struct quota *q;
            struct tick_cost c;

            if (t->slots[s] == 0) {
                continue;
            }
            r = rec_at(f, (uint32_t)t->slots[s]);
            if (fsm_rec_gone(f, r)) {
                continue; /* uncounted: the backlog */
            }
            q = fsm_quota_of(f, r->id, r->scope_len);
            if (q != NULL) {
                fsm_rec_cost(f, r, &c);
                fsm_quota_charge(q, &c, 1);
            }
        }
    }
}

static void quota_init(struct quota *q,
                       const uint8_t *p,
                       size_t len,
                       uint64_t max_records,
                       uint64_t max_bytes)
{
    ONCE_ASSERTF(len >= 1 && len <= FSM_PATTERN_MAX, "pattern of %zu bytes",
                 len);
    memset(q, 0, sizeof *q);
    memcpy(q->pattern, p, len);
    q->len = (uint8_t)len;
    q->prefix = p[len - 1] == '*';
    q->max_records = max_records;
    q->max_bytes = max_bytes;
}

int fsm_quota_append(struct fsm *f,
                     const uint8_t *p,
                     size_t len,
                     uint64_t max_records,
                     uint64_t max_bytes)
{
    const struct quota *last =
        f->n_quotas > 0 ? &f->quotas[f->n_quotas - 1] : NULL;

    if (f->n_quotas == FSM_QUOTAS_MAX) {
        return FSM_E_TOOBIG;
    }
    if (last != NULL &&
        pattern_cmp((const uint8_t *)last->pattern, last->len, p, len) >= 0) {
        return FSM_E_MALFORMED;
    }
    ONCE_ASSERT(fsm_pattern_check(p, len) == NULL,
                "callers check a pattern before appending it");
    quota_init(&f->quotas[f->n_quotas++], p, len, max_records, max_bytes);
    return 0;
}

void fsm_quota_clear(struct fsm *f)
{
    for (size_t i = 0; i < f->n_quotas; i++) {
        fsm_ticks_close(&f->quotas[i].ticks);
    }
    f->n_quotas = 0;
}

/* Position of @p in the sorted list; *@found says whether it is there. */
static size_t quota_find(const struct fsm *f,
                         const uint8_t *p,
                         size_t len,
                         bool *found)
{
    size_t i = 0;

    *found = false;
    while (i < f->n_quotas) {
        const struct quota *q = &f->quotas[i];
        int c = pattern_cmp((const uint8_t *)q->pattern, q->len, p, len);
        if (c == 0) {
            *found = true;
            break;
        }
        if (c > 0) {
            break;
        }
        i++;
    }
    return i;
}

/* 0 if the command may apply, else its refusal (reason in @res). */
static enum fsm_outcome quota_refusal(const struct fsm *f,
                                      const struct fsm_quota_set *c,
                                      bool found,
                                      struct fsm_result *res)
{
    if (c->remove && !found) {
        res->reason = "no quota has that pattern";
        return FSM_NOT_FOUND;
    }
    if (!c->remove && c->max_records == 0 && c->max_bytes == 0) {
        res->reason =
            "a quota needs max_records or max_bytes (remove drops "
            "one)";
        return FSM_INVALID_ARGUMENT;
    }
    if (!c->remove && !found && f->n_quotas == FSM_QUOTAS_MAX) {
        res->reason = "there are 64 quotas already";
        return FSM_FAILED_PRECONDITION;
    }
    return 0;
}

void fsm_do_quota_set(struct fsm *f,
                      const struct fsm_quota_set *c,
                      struct fsm_result *res)
{
    const char *why;
    bool found;
    size_t i;

    if (f->schema_version < FSM_SCHEMA_QUOTAS) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "schema 2 required (oncectl schema upgrade)";
        return;
    }
    why = fsm_pattern_check(c->pattern, c->pattern_len);
    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    i = quota_find(f, c->pattern, c->pattern_len, &found);
    res->outcome = quota_refusal(f, c, found, res);
    if (res->outcome != 0) {
        return;
    }
    if (c->remove) {
        fsm_ticks_close(&f->quotas[i].ticks);
        memmove(&f->quotas[i], &f->quotas[i + 1],
                (f->n_quotas - i - 1) * sizeof f->quotas[0]);
        f->n_quotas--;
    } else if (found) {
        f->quotas[i].max_records = c->max_records;
        f->quotas[i].max_bytes = c->max_bytes;
        res->outcome = FSM_OK; /* same pattern, same records: no recount */
        return;
    } else {
        memmove(&f->quotas[i + 1], &f->quotas[i],
                (f->n_quotas - i) * sizeof f->quotas[0]);
        f->n_quotas++;
        quota_init(&f->quotas[i], c->pattern, c->pattern_len, c->max_records,
                   c->max_bytes);
    }
    recount(f);
    res->outcome = FSM_OK;
}

size_t fsm_n_quotas(const struct fsm *f)
{
    return f->n_quotas;
}

bool fsm_quota(const struct fsm *f, size_t i, struct fsm_quota_info *out)
{
    const struct quota *q;

    if (i >= f->n_quotas) {
        return false;
    }
    q = &f->quotas[i];
    memcpy(out->pattern, q->pattern, sizeof out->pattern);
    out->max_records = q->max_records;
    out->max_bytes = q->max_bytes;
    out->records = q->n;
    out->bytes = q->bytes;
    return true;
}
