/* The PENDING idempotent records, counted by the tick (1.024 s) of their
 * first claim: the pending count and the age of the oldest for metrics
 * (fsm.h, fsm_n_pending / fsm_pending_oldest_ms).
 *
 * A record counts from its first claim, also after takeovers: a key that
 * is taken over again and again without completing has been unfinished
 * since then, which is what an operator wants to see. first_time never
 * changes, so the tick a record entered under is the one it leaves from.
 *
 * Every change of state goes through fsm_set_state (fsm_claim.c), every
 * removal from the tables through fsm_detach, which calls
 * fsm_pending_out; snapshot_read.c rebuilds the map with fsm_pending_in. A
 * record whose retention ended counts until the wheel detaches it (the
 * pruning backlog, normally empty: fsm_prune_backlog).
 *
 * The oldest tick is kept as a lower bound updated in O(1); when the
 * oldest record leaves, the next query looks for the new oldest: tick by
 * tick up from the old one while that is shorter than the map, else one
 * pass over the map's slots. Queries come from metrics scrapes, not from
 * apply.
 *
 * The same hooks count n_reserved, the records holding a result
 * reservation (PENDING or RELEASED, fsm_int.h rec_reserves): exact, and
 * read by apply through fsm_live_bytes. */
#include "common/assert.h"
#include "fsm/fsm_int.h"

static uint64_t start_tick(const struct rec *r)
{
    return get48(r->first_time) >> WHEEL_TICK_SHIFT;
}

static bool counts(const struct rec *r)
{
    return rec_kind(r) == FSM_KIND_IDEMPOTENT &&
           rec_state(r) == FSM_STATE_PENDING;
}

void fsm_pending_in(struct fsm *f, const struct rec *r)
{
    struct tick_cost one = {0, 1, 0, 0, 0};
    uint64_t t;

    if (rec_kind(r) == FSM_KIND_IDEMPOTENT && rec_reserves(r)) {
        f->n_reserved++;
    }
    if (!counts(r)) {
        return;
    }
    t = start_tick(r);
    fsm_ticks_add(&f->pending, t, &one, 1);
    if (f->n_pending == 0 || t < f->pending_min) {
        f->pending_min = t;
        f->pending_dirty = f->n_pending != 0 && f->pending_dirty;
    }
    f->n_pending++;
}

void fsm_pending_out(struct fsm *f, const struct rec *r)
{
    struct tick_cost one = {0, 1, 0, 0, 0};
    uint64_t t;

    if (rec_kind(r) == FSM_KIND_IDEMPOTENT && rec_reserves(r)) {
        ONCE_ASSERT(f->n_reserved > 0, "reservation count underflow");
        f->n_reserved--;
    }
    if (!counts(r)) {
        return;
    }
    t = start_tick(r);
    fsm_ticks_add(&f->pending, t, &one, -1);
    ONCE_ASSERT(f->n_pending > 0, "pending count underflow");
    f->n_pending--;
    if (t == f->pending_min && fsm_ticks_get(&f->pending, t) == NULL) {
        f->pending_dirty = true;
    }
}

void fsm_set_state(struct fsm *f, struct rec *r, enum fsm_state st)
{
    fsm_pending_out(f, r);
    rec_set_state(r, st);
    fsm_pending_in(f, r);
}

uint64_t fsm_n_pending(const struct fsm *f)
{
    return f->n_pending;
}

/* Make pending_min exact (n_pending > 0). */
static void find_oldest(struct fsm *f)
{
    const struct tick_map *m = &f->pending;
    uint64_t best = UINT64_MAX;

    for (uint32_t step = 0; step < m->cap; step++) {
        if (fsm_ticks_get(m, f->pending_min + step) != NULL) {
            f->pending_min += step;
            f->pending_dirty = false;
            return;
        }
    }
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->e[i].n != 0 && m->e[i].tick < best) {
            best = m->e[i].tick;
        }
    }
    f->pending_min = best;
    f->pending_dirty = false;
}

bool fsm_pending_oldest_ms(struct fsm *f, uint64_t *ms)
{
    if (f->n_pending == 0) {
        return false;
    }
    if (f->pending_dirty) {
        find_oldest(f);
    }
    ONCE_ASSERT(f->pending_min != UINT64_MAX,
                "n_pending > 0 but no pending tick found");
    *ms = f->pending_min << WHEEL_TICK_SHIFT;
    return true;
}
