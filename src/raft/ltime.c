#include "raft/ltime.h"

#include "common/sim_mutation.h"

void ltime_init(struct ltime *t)
{
    t->have_last = false;
    t->last_log_ms = 0;
    t->last_mono_ms = 0;
    t->have_base = false;
    t->base_log_ms = 0;
    t->base_mono_ms = 0;
}

void ltime_applied(struct ltime *t, uint64_t log_ms, uint64_t mono_ms)
{
    t->have_last = true;
    t->last_log_ms = log_ms;
    t->last_mono_ms = mono_ms;
}

void ltime_anchor(struct ltime *t)
{
    t->have_base = t->have_last;
    t->base_log_ms = t->last_log_ms;
    t->base_mono_ms = t->last_mono_ms;
}

uint64_t ltime_stamp(const struct ltime *t,
                     uint64_t fsm_now_ms,
                     uint64_t wall_ms,
                     uint64_t mono_ms,
                     uint64_t max_skew_ms)
{
    uint64_t stamp = wall_ms;

    if (t->have_base && !SIM_MUTANT(SIM_MUT_LTIME_NO_CLAMP)) {
        /* A monotonic clock never goes back; if a caller's does, treat it
         * as no time elapsed rather than wrapping. */
        uint64_t elapsed =
            mono_ms > t->base_mono_ms ? mono_ms - t->base_mono_ms : 0;
        uint64_t est = t->base_log_ms + elapsed;
        uint64_t lo = est > max_skew_ms ? est - max_skew_ms : 0;
        uint64_t hi = est + max_skew_ms;

        if (stamp < lo) {
            stamp = lo;
        } else if (stamp > hi) {
            stamp = hi;
        }
    }
    return stamp > fsm_now_ms ? stamp : fsm_now_ms;
}
