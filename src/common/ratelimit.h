/* common/ratelimit.h: a budget of log lines per time window.
 *
 * What a peer can trigger at will (a refused TLS handshake, on any port
 * that takes connections) is logged under a budget, so that a flood of bad
 * connections costs counters, not a disk full of lines: at most @burst
 * lines per window of @window_ms, and the first line of a later window
 * says how many were left out before it. The caller owns the struct (zero
 * it, then set burst and window_ms) and passes its own monotonic clock: no
 * clock, no allocation, not thread-safe (one per loop). */
#ifndef ONCE_COMMON_RATELIMIT_H_
#define ONCE_COMMON_RATELIMIT_H_

#include <stdbool.h>
#include <stdint.h>

/* The budget of refused-handshake lines, on every port (docs/server.md). */
#define RATELIMIT_REFUSALS_BURST     100u
#define RATELIMIT_REFUSALS_WINDOW_MS 10000u

/* What a line allowed after some were left out adds (then name the
 * counter that has them all). */
#define RATELIMIT_DROPPED_NOTE " (and more refusals not logged: see "

struct ratelimit
{
    unsigned burst;     /* lines per window, > 0 */
    uint64_t window_ms; /* > 0 */
    uint64_t start_ms;  /* the current window's start */
    unsigned used;      /* lines in the current window */
    uint64_t dropped;   /* left out since the last line that was allowed */
    bool started;
};

/* True if a line may be written at @now_ms. Then *@dropped is the number
 * of lines left out since the previous allowed one (0 mostly), for the
 * line to say. False: the line is counted as left out. */
bool ratelimit_allow(struct ratelimit *r, uint64_t now_ms, uint64_t *dropped);

#endif
