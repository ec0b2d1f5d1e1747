/* The restore fence of a cluster started from a backup (fsm.h, "Restored
 * clusters"; docs/state-machine.md).
 *
 * Pure like the rest of the fsm: fsm_rebase takes the time it moves to from
 * its caller (the restoring node's clock, drawn once, like the cluster id),
 * and every rule reads log time only. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fsm/fsm_int.h"

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;

    return m > c ? m : c;
}

void fsm_fence_expire(struct fsm *f)
{
    if (f->restore_fence && f->now > f->restore_lift) {
        f->restore_fence = false;
        memset(f->restore_source, 0, sizeof f->restore_source);
        f->restore_source_index = 0;
        f->restore_time = 0;
        f->restore_ts = 0;
        f->restore_until = 0;
        f->restore_lift = 0;
    }
}

/* "2026-12-01T23:59:59Z": gmtime_r reads no clock and no time zone. */
static void format_utc(uint64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL ||
        strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        snprintf(buf, cap, "%llu ms", (unsigned long long)ms);
    }
}

enum fsm_outcome fsm_fence_check(struct fsm *f,
                                 const struct fsm_claim *c,
                                 struct fsm_result *res)
{
    char when[40];

    if (!f->restore_fence) {
        return 0;
    }
    if (c->has_ts && c->ts_ms <= f->restore_ts) {
        res->reason = "restored cluster: timestamp at or before the restore";
        return FSM_STALE;
    }
    if ((c->has_ts && c->kind == FSM_KIND_NONCE) || f->now > f->restore_until) {
        return 0;
    }
    format_utc(f->restore_until, when, sizeof when);
    snprintf(f->reason_buf, sizeof f->reason_buf,
             "restored cluster: replay window open until %s", when);
    res->reason = f->reason_buf;
    res->retry_after_ms = f->restore_until - f->now + 1;
    return FSM_FAILED_PRECONDITION;
}

int fsm_rebase(struct fsm *f, const struct fsm_rebase *rb, char *errmsg)
{
    const struct fsm_settings *s = &f->settings;
    static const uint8_t zero[FSM_CLUSTER_ID_LEN];
    const char *why = fsm_check_member(&rb->member);
    int rv;

    if (!f->bootstrapped || f->frozen != NULL || f->restore_fence) {
        err_printf(errmsg, "rebase: %s",
                   !f->bootstrapped ? "the backup holds no cluster"
                   : f->frozen != NULL
                       ? "a frozen view is live"
                       : "the backup is of a restored cluster whose fence "
                         "is still up: restore from a later backup");
        return FSM_E_MALFORMED;
    }
    if (why != NULL || rb->member.role != FSM_ROLE_VOTER ||
        memcmp(rb->cluster_id, zero, sizeof zero) == 0 ||
        memcmp(rb->cluster_id, f->cluster_id, FSM_CLUSTER_ID_LEN) == 0) {
        err_printf(errmsg, "rebase: %s",
                   why != NULL ? why : "bad new cluster id or member role");
        return FSM_E_MALFORMED;
    }
    /* Move log time as a batch would: expiry and the counters follow, and
     * records that expired since the backup are no longer counted. */
    rv = fsm_apply_cmds(f, f->last_index, f->schema_version, rb->time_ms, NULL,
                        0, NULL, NULL);
    if (rv != 0) {
        err_printf(errmsg, "rebase: %s", fsm_strerror(rv));
        return rv;
    }
    memcpy(f->restore_source, f->cluster_id, FSM_CLUSTER_ID_LEN);
    memcpy(f->cluster_id, rb->cluster_id, FSM_CLUSTER_ID_LEN);
    f->n_members = 1;
    f->members[0] = rb->member;
    f->n_retired = 0;
    f->restore_fence = true;
    f->restore_source_index = f->last_index;
    f->restore_time = f->now;
    f->restore_ts = f->now + s->max_skew_ms;
    f->restore_until =
        rb->accept_replay_window
            ? 0
            : f->now + max3(s->max_ttl_ms,
                            s->max_window_ms + 2 * s->max_skew_ms,
                            s->max_lease_ms);
    f->restore_lift = f->restore_ts + s->max_window_ms;
    if (f->restore_until > f->restore_lift) {
        f->restore_lift = f->restore_until;
    }
    return 0;
}

void fsm_fence(const struct fsm *f, struct fsm_fence_info *out)
{
    memset(out, 0, sizeof *out);
    if (!f->restore_fence) {
        return;
    }
    out->active = true;
    memcpy(out->source_cluster_id, f->restore_source, FSM_CLUSTER_ID_LEN);
    out->source_index = f->restore_source_index;
    out->restore_time_ms = f->restore_time;
    out->stale_ts_ms = f->restore_ts;
    out->until_ms = f->restore_until;
    out->lift_ms = f->restore_lift;
}
