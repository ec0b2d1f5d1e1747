/* server/node_anchor.c: the node's log-time anchor file (raft/anchor.h).
 *
 * At start, before replica_start, this boot's pair seeds the replica's
 * ltime; from the tick the newest pair is written as soon as there is
 * one, then at most once every ANCHOR_EVERY_MS, on the thread pool, one write
 * at a time: never a filesystem wait on the loop. Nothing is written at the
 * stop: any pair kept earlier in this boot is as good as the last one
 * (anchor.h), and the stop should not wait on the filesystem either. Nothing
 * here can stop the node: without a boot id or a readable file a restarted node
 * is where it was before anchors existed (the wall clock until a batch
 * arrives), and a write that fails is logged once and tried again next period.
 */
#include <inttypes.h>
#include <string.h>

#include "common/log.h"
#include "raft/anchor.h"
#include "server/server.h"

/* Any pair of this boot seeds as well as the last one (anchor.h): the
 * first is written as soon as there is one, later ones only refresh it. */
#define ANCHOR_EVERY_MS 60000

/* The replica's own monotonic clock: the pair's M must be on it. */
static uint64_t mono_now_ms(const struct server *s)
{
    return s->rep.clock.mono_ms(s->rep.clock.arg);
}

void node_anchor_load(struct server *s)
{
    char why[256], q[300];
    struct anchor a;
    int rv;

    memset(&s->anchor, 0, sizeof s->anchor);
    if (anchor_boot_id(NULL, s->anchor.boot_id, why, sizeof why) != 0) {
        s->anchor.boot_id[0] = '\0';
        log_kv(LOG_WARN,
               "no log-time anchor: a restart stamps the wall clock "
               "until a batch arrives",
               "error=%s", log_quote(why, q, sizeof q));
        return;
    }
    rv = anchor_load(s->cfg.data_dir, s->anchor.boot_id, mono_now_ms(s), &a,
                     why, sizeof why);
    if (rv < 0) {
        log_kv(LOG_INFO, "log-time anchor not used", "reason=%s",
               log_quote(why, q, sizeof q));
        return;
    }
    if (rv == 1) {
        replica_ltime_seed(&s->rep, a.log_ms, a.mono_ms);
        s->anchor.log_ms = a.log_ms;
        s->anchor.mono_ms = a.mono_ms;
        log_kv(LOG_INFO, "log-time anchor loaded",
               "log_time_ms=%" PRIu64 " age_ms=%" PRIu64, a.log_ms,
               mono_now_ms(s) - a.mono_ms);
    }
}

/* The pool thread: a rename may wait on the filesystem's journal behind
 * other writes (the store's snapshot writeback among them), and the loop
 * does no filesystem waits. */
static void write_work(uv_work_t *w)
{
    struct server *s = w->data;

    s->anchor_rv = anchor_write(s->cfg.data_dir, &s->anchor_next, s->anchor_why,
                                sizeof s->anchor_why);
}

static void write_done(uv_work_t *w, int status)
{
    struct server *s = w->data;
    const char *why = status == 0 ? s->anchor_why : uv_strerror(status);
    char q[300];

    s->anchor_busy = false;
    if (status != 0 || s->anchor_rv != 0) {
        if (!s->anchor_failed) {
            log_kv(LOG_WARN, "cannot write the log-time anchor", "error=%s",
                   log_quote(why, q, sizeof q));
        }
        s->anchor_failed = true;
        return;
    }
    s->anchor_failed = false;
    s->anchor.log_ms = s->anchor_next.log_ms;
    s->anchor.mono_ms = s->anchor_next.mono_ms;
}

void node_anchor_tick(struct server *s, uint64_t now_ms)
{
    struct anchor a;

    if (s->anchor.boot_id[0] == '\0' || s->anchor_busy ||
        (s->anchor_at_ms != 0 && now_ms - s->anchor_at_ms < ANCHOR_EVERY_MS)) {
        return;
    }
    memcpy(a.boot_id, s->anchor.boot_id, sizeof a.boot_id);
    if (!replica_ltime_last(&s->rep, &a.log_ms, &a.mono_ms) ||
        (a.log_ms == s->anchor.log_ms && a.mono_ms == s->anchor.mono_ms)) {
        return;
    }
    s->anchor_at_ms = now_ms;
    s->anchor_next = a;
    s->anchor_work.data = s;
    if (uv_queue_work(&s->loop, &s->anchor_work, write_work, write_done) == 0) {
        s->anchor_busy = true;
    }
}
