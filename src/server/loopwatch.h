/* server/loopwatch.h: how long the node's event loop is busy at a stretch.
 *
 * Every claim, heartbeat and append completion of a node goes through its
 * one libuv loop, so the longest time the loop spends between two waits
 * for events is the longest time the node answers nothing. That is the
 * figure the snapshot design bounds (docs/raft.md, "Snapshots off the
 * loop"), and the one an operator needs when claims time out without a
 * slow disk: a stretch of work on the loop (a freeze, a restore, a burst
 * of requests) shows here and nowhere else.
 *
 * An iteration's busy time is the wall time from one entry into the poll
 * phase to the next, less the time libuv spent blocked in epoll in
 * between (uv_metrics_idle_time, libuv >= 1.39, turned on by
 * loopwatch_init before the loop first runs). A uv_prepare handle, run
 * right before each poll, measures it; the handle is unref'd and does not
 * keep the loop alive.
 *
 * Ownership: struct loopwatch lives in struct server; loopwatch_init
 * starts the handle, loopwatch_close closes it through the loop. Loop
 * thread only. */
#ifndef ONCE_SERVER_LOOPWATCH_H_
#define ONCE_SERVER_LOOPWATCH_H_

#include <stdint.h>
#include <uv.h>

#include "common/ratelimit.h"

/* A busy stretch this long or longer is logged (under a budget of
 * LOOPWATCH_LOG_BURST lines per LOOPWATCH_LOG_WINDOW_MS). */
#define LOOPWATCH_LOG_MS        100u
#define LOOPWATCH_LOG_BURST     10u
#define LOOPWATCH_LOG_WINDOW_MS 60000u

struct loopwatch
{
    uv_prepare_t prepare;
    uv_loop_t *loop;
    uint64_t last_ns;      /* uv_hrtime at the previous prepare; 0: none */
    uint64_t last_idle_ns; /* uv_metrics_idle_time then */
    uint64_t max_ns;       /* the longest busy iteration since the start */
    uint64_t iterations;
    /* Called with every iteration's busy time (the metrics' histogram);
     * NULL: none. */
    void (*observe)(void *arg, uint64_t busy_ns);
    void *observe_arg;
    struct ratelimit lines;
    int on; /* the handle is initialized */
};

/* Turn on idle-time accounting for @loop (before its first uv_run) and
 * start watching. 0, or a libuv error code (the watch is then off and the
 * node runs without it). */
int loopwatch_init(struct loopwatch *w, uv_loop_t *loop);
void loopwatch_close(struct loopwatch *w);

#endif
