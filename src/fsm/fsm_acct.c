/* What the counted records cost, by expiry tick, so that passing a tick
 * uncounts its records in O(1) however many there are (budgeted expiry).
 *
 * A record is counted (in fsm_n_records, fsm_bytes, max_records/max_bytes
 * and the snapshot) while its expiry tick has not passed: tick >=
 * wheel.passed. The physical counters f->n_records, f->bytes and
 * f->snap_rec_bytes cover every record still in the tables; f->backlog
 * covers those whose tick has passed but the wheel has not freed yet, and
 * the counted figures are the difference. So answers and snapshots never
 * depend on how far the budgeted wheel got, which differs between a
 * replica that applied the log and one restored from a snapshot.
 *
 * ticks[] maps each tick with counted records to their total: an open
 * addressing table (linear probing, backward-shift deletion), kept at most
 * half full. Entries are added and changed by fsm_acct_in/out around every
 * change of a record, and taken out as log time passes their tick. Each
 * quota (fsm_quota.c) keeps the same kind of map for the records charged
 * to it, changed at the same points. */
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "fsm/fsm_int.h"

#define TICKS_MIN_CAP 64u

static inline uint32_t tick_home(uint64_t tick, uint32_t cap)
{
    return (uint32_t)((tick * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

static void ticks_resize(struct tick_map *m, uint32_t cap)
{
    struct tick_cost *old = m->e;
    uint32_t old_cap = m->cap;
    struct tick_cost *e = calloc(cap, sizeof *e);

    if (e == NULL) {
        fsm_panic("out of memory (expiry ticks)");
    }
    ONCE_ASSERT(cap > 0 && (cap & (cap - 1)) == 0 && m->n * 2 <= cap,
                "a power-of-two table at most half full");
    m->e = e;
    m->cap = cap;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i].n != 0) {
            uint32_t j = tick_home(old[i].tick, cap);
            while (e[j].n != 0) {
                j = (j + 1) & (cap - 1);
            }
            e[j] = old[i];
        }
    }
    free(old);
}

/* Slot of @tick, or of the empty slot where it would go. */
static uint32_t ticks_slot(const struct tick_map *m, uint64_t tick)
{
    uint32_t i = tick_home(tick, m->cap);

    ONCE_ASSERT(m->n < m->cap, "a probe ends at an empty slot");

    while (m->e[i].n != 0 && m->e[i].tick != tick) {
        i = (i + 1) & (m->cap - 1);
    }
    return i;
}

static void ticks_delete(struct tick_map *m, uint32_t i)
{
    uint32_t mask = m->cap - 1, j = i;

    for (;;) {
        uint32_t k;

        j = (j + 1) & mask;
        if (m->e[j].n == 0) {
            break;
        }
        k = tick_home(m->e[j].tick, m->cap);
        /* Entry j may move back to i unless its home lies in (i, j]. */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) {
            continue;
        }
        m->e[i] = m->e[j];
        i = j;
    }
    ONCE_ASSERT(m->n > 0, "deleting from an empty tick map");
    memset(&m->e[i], 0, sizeof m->e[i]);
    m->n--;
}

const struct tick_cost *fsm_ticks_get(const struct tick_map *m, uint64_t tick)
{
    uint32_t i;

    if (m->cap == 0) {
        return NULL;
    }
    i = ticks_slot(m, tick);
    return m->e[i].n != 0 ? &m->e[i] : NULL;
}

void fsm_ticks_close(struct tick_map *m)
{
    free(m->e);
    memset(m, 0, sizeof *m);
}

void fsm_ticks_add(struct tick_map *m,
                   uint64_t tick,
                   const struct tick_cost *c,
                   int sign)
{
    struct tick_cost *e;
    uint32_t i;

    if (m->cap == 0 || (m->n + 1) * 2 > m->cap) {
        ticks_resize(m, m->cap == 0 ? TICKS_MIN_CAP : m->cap * 2);
    }
    i = ticks_slot(m, tick);
    e = &m->e[i];
    ONCE_ASSERTF(sign > 0 || e->n >= c->n,
                 "removing %llu records from tick %llu that has fewer",
                 (unsigned long long)c->n, (unsigned long long)tick);
    if (e->n == 0) {
        e->tick = tick;
        m->n++;
    }
    /* Unsigned wrap-around: a removal never exceeds what was added. */
    e->n += sign > 0 ? c->n : -c->n;
    e->bytes += sign > 0 ? c->bytes : -c->bytes;
    e->snap += sign > 0 ? c->snap : -c->snap;
    e->n_res += sign > 0 ? c->n_res : -c->n_res;
    if (e->n == 0) {
        ticks_delete(m, i);
    }
}

void fsm_rec_cost(const struct fsm *f, const struct rec *r, struct tick_cost *c)
{
    const struct rec_ext *e = ext_of(f, r);

    c->tick = fsm_rec_expires(f, r) >> WHEEL_TICK_SHIFT;
    c->n = 1;
    c->bytes = slab_size(rec_size(r->scope_len, r->key_len));
    c->snap = fsm_rec_snap_size(f, r);
    c->n_res = 0;
    if (rec_kind(r) == FSM_KIND_IDEMPOTENT && rec_reserves(r)) {
        c->bytes += REC_RESERVE;
        c->n_res = 1;
    }
    if (e != NULL) {
        c->bytes += fsm_ext_bytes(e);
        if (r->flags & REC_F_MULTI) {
            c->bytes += slab_size(rec_uses_size(r, e));
        }
        for (size_t i = 0; i < ext_n_attempts(e); i++) {
            const struct rec_attempt *a = slab_ptr(&f->slab, ext_attempt(e, i));
            c->bytes += slab_size(ATTEMPT_HDR_SIZE + a->execution_id_len);
        }
    }
}

/* A counted record's share of its quota, if it has one. */
static void quota_acct(struct fsm *f,
                       const struct rec *r,
                       const struct tick_cost *c,
                       int sign)
{
    struct quota *q;

    if (f->n_quotas == 0) {
        return;
    }
    q = fsm_quota_of(f, r->id, r->scope_len);
    if (q != NULL) {
        fsm_quota_charge(q, c, sign);
    }
}

void fsm_acct_in(struct fsm *f, const struct rec *r)
{
    struct tick_cost c;

    fsm_rec_cost(f, r, &c);
    if (c.tick >= f->wheel.passed) {
        fsm_ticks_add(&f->ticks, c.tick, &c, 1);
        quota_acct(f, r, &c, 1);
    } else {
        f->backlog.n += c.n;
        f->backlog.bytes += c.bytes;
        f->backlog.snap += c.snap;
        f->backlog.n_res += c.n_res;
    }
}

void fsm_acct_out(struct fsm *f, const struct rec *r)
{
    struct tick_cost c;

    fsm_rec_cost(f, r, &c);
    if (c.tick >= f->wheel.passed) {
        fsm_ticks_add(&f->ticks, c.tick, &c, -1);
        quota_acct(f, r, &c, -1);
    } else {
        f->backlog.n -= c.n;
        f->backlog.bytes -= c.bytes;
        f->backlog.snap -= c.snap;
        f->backlog.n_res -= c.n_res;
    }
}

static void take(struct tick_cost *sum, const struct tick_cost *e)
{
    sum->n += e->n;
    sum->bytes += e->bytes;
    sum->snap += e->snap;
    sum->n_res += e->n_res;
}

void fsm_ticks_pass(struct tick_map *m,
                    uint64_t from,
                    uint64_t to,
                    struct tick_cost *taken)
{
    if (to <= from || m->n == 0) {
        return;
    }
    if (to - from <= m->cap) {
        for (uint64_t t = from; t < to && m->n > 0; t++) {
            uint32_t i = ticks_slot(m, t);
            if (m->e[i].n != 0) {
                take(taken, &m->e[i]);
                ticks_delete(m, i);
            }
        }
    } else {
        /* A jump longer than the table: sweep it once instead. */
        for (uint32_t i = 0; i < m->cap; i++) {
            if (m->e[i].n != 0 && m->e[i].tick < to) {
                take(taken, &m->e[i]);
                m->e[i].n = 0;
                m->n--;
            }
        }
        ticks_resize(m, m->cap); /* rehash without the holes */
    }
    if (m->cap > TICKS_MIN_CAP && m->n * 8 < m->cap) {
        ticks_resize(m, m->cap / 2);
    }
}

void fsm_acct_pass(struct fsm *f, uint64_t to)
{
    uint64_t from = f->wheel.passed;

    if (to <= from) {
        return;
    }
    f->wheel.passed = to;
    fsm_ticks_pass(&f->ticks, from, to, &f->backlog);
    fsm_quota_pass(f, from, to);
}
