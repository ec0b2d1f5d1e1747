/* server/safety.c: membership safety (safety.h). */
#include "server/safety.h"

#include "common/err.h"

enum safety_verdict safety_refuses(const struct safety_voter *voters,
                                   size_t n,
                                   uint64_t id,
                                   char *why)
{
    size_t remaining = 0, reachable = 0;
    bool found = false;

    for (size_t i = 0; i < n; i++) {
        if (voters[i].id == id) {
            found = true;
            continue;
        }
        remaining++;
        reachable += voters[i].reachable ? 1 : 0;
    }
    if (!found) {
        return SAFETY_OK;
    }
    if (remaining == 1 && n >= 2) {
        err_printf(why,
                   "this would leave a single voter (%zu -> 1): its disk "
                   "would hold the only copy of the state; add a voter "
                   "first, or repeat with force",
                   n);
        return SAFETY_SINGLE;
    }
    if (remaining > 0 && reachable < remaining / 2 + 1) {
        err_printf(why,
                   "only %zu of the %zu voters that would remain are "
                   "reachable from the leader (a majority is %zu): the new "
                   "configuration could not commit; bring them back, or "
                   "repeat with force",
                   reachable, remaining, remaining / 2 + 1);
        return SAFETY_UNREACHABLE;
    }
    return SAFETY_OK;
}
