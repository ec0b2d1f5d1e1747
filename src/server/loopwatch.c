/* server/loopwatch.c: the loop's busy time per iteration (loopwatch.h). */
#include "server/loopwatch.h"

#include <inttypes.h>
#include <string.h>

#include "common/log.h"

static void on_prepare(uv_prepare_t *h)
{
    struct loopwatch *w = h->data;
    uint64_t now = uv_hrtime();
    uint64_t idle = uv_metrics_idle_time(w->loop);
    uint64_t busy, dropped;

    if (w->last_ns != 0 && now >= w->last_ns && idle >= w->last_idle_ns) {
        uint64_t wall = now - w->last_ns, slept = idle - w->last_idle_ns;

        busy = wall > slept ? wall - slept : 0;
        w->iterations++;
        if (busy > w->max_ns) {
            w->max_ns = busy;
        }
        if (w->observe != NULL) {
            w->observe(w->observe_arg, busy);
        }
        if (busy >= (uint64_t)LOOPWATCH_LOG_MS * 1000000u &&
            ratelimit_allow(&w->lines, now / 1000000u, &dropped)) {
            log_kv(LOG_WARN, "event loop busy",
                   "ms=%" PRIu64 " dropped_lines=%" PRIu64
                   " (nothing answered meanwhile; see "
                   "once_loop_busy_seconds)",
                   busy / 1000000u, dropped);
        }
    }
    w->last_ns = now;
    w->last_idle_ns = idle;
}

int loopwatch_init(struct loopwatch *w, uv_loop_t *loop)
{
    int rv;

    memset(w, 0, sizeof *w);
    w->loop = loop;
    w->lines.burst = LOOPWATCH_LOG_BURST;
    w->lines.window_ms = LOOPWATCH_LOG_WINDOW_MS;
    rv = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rv != 0) {
        return rv;
    }
    rv = uv_prepare_init(loop, &w->prepare);
    if (rv != 0) {
        return rv;
    }
    w->prepare.data = w;
    w->on = 1;
    uv_unref((uv_handle_t *)&w->prepare);
    return uv_prepare_start(&w->prepare, on_prepare);
}

void loopwatch_close(struct loopwatch *w)
{
    if (w->on) {
        w->on = 0;
        uv_close((uv_handle_t *)&w->prepare, NULL);
    }
}
