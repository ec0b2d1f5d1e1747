/* common/ratelimit.c: see ratelimit.h. */
#include "common/ratelimit.h"

bool ratelimit_allow(struct ratelimit *r, uint64_t now_ms, uint64_t *dropped)
{
    /* A clock going back (it should not) starts a new window too. */
    if (!r->started || now_ms < r->start_ms ||
        now_ms - r->start_ms >= r->window_ms) {
        r->started = true;
        r->start_ms = now_ms;
        r->used = 0;
    }
    if (r->used >= r->burst) {
        r->dropped++;
        return false;
    }
    r->used++;
    *dropped = r->dropped;
    r->dropped = 0;
    return true;
}
