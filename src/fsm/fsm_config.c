/* The replicated cluster state: Bootstrap, settings (and the max_window
 * raise fence), the member directory and the retired ids. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/fsm_int.h"

void fsm_settings_default(struct fsm_settings *s)
{
    s->max_window_ms = 5 * 60 * 1000;
    s->max_skew_ms = 30 * 1000;
    s->max_ttl_ms = 7ull * 86400 * 1000;
    s->max_lease_ms = 3600ull * 1000;
    s->max_records = 20000000;
    s->max_bytes = 4ull << 30;
}

const char *fsm_settings_check(const struct fsm_settings *s)
{
    if (s->max_window_ms < 1 || s->max_window_ms > FSM_MAX_WINDOW_CEIL) {
        return "max_window must be 1 ms..7 days";
    }
    if (s->max_skew_ms < 1 || s->max_skew_ms > FSM_MAX_SKEW_CEIL) {
        return "max_skew must be 1 ms..1 hour";
    }
    if (s->max_ttl_ms < 1 || s->max_ttl_ms > FSM_MAX_TTL_CEIL) {
        return "max_ttl must be 1 ms..30 days";
    }
    if (s->max_lease_ms < 1 || s->max_lease_ms > FSM_MAX_LEASE_CEIL) {
        return "max_lease must be 1 ms..1 day";
    }
    /* The slab addresses 32 GiB; these ceilings keep the counted bytes at
     * half of that, leaving room for size-class fragmentation. */
    if (s->max_records < 1 || s->max_records > (1ull << 28)) {
        return "max_records must be 1..268435456";
    }
    if (s->max_bytes < 4096 || s->max_bytes > (16ull << 30)) {
        return "max_bytes must be 4 KiB..16 GiB";
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Configuration
 * ---------------------------------------------------------------------- */

const char *fsm_check_member(const struct fsm_member *m)
{
    size_t rl = strnlen(m->raft_addr, sizeof m->raft_addr);
    size_t cl = strnlen(m->client_addr, sizeof m->client_addr);

    if (m->id == 0) {
        return "member id must not be 0";
    }
    if (rl < 1 || rl > FSM_ADDR_MAX || cl < 1 || cl > FSM_ADDR_MAX) {
        return "member addresses must be 1..64 bytes";
    }
    if (m->role != FSM_ROLE_VOTER && m->role != FSM_ROLE_STANDBY &&
        m->role != FSM_ROLE_SPARE) {
        return "member role must be voter, standby or spare";
    }
    return NULL;
}

static size_t retired_pos(const struct fsm *f, uint64_t id)
{
    size_t lo = 0, hi = f->n_retired;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->retired[mid] < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

bool fsm_is_retired(const struct fsm *f, uint64_t id)
{
    size_t pos = retired_pos(f, id);
    return pos < f->n_retired && f->retired[pos] == id;
}

static void set_hash_key(struct fsm *f, const uint8_t key[FSM_HASH_KEY_LEN])
{
    int rv;

    memcpy(f->hash_key, key, FSM_HASH_KEY_LEN);
    if (f->hash_ready) {
        rv = hash_keyed_rekey(&f->hash, key);
    } else {
        rv = hash_keyed_init(&f->hash, key);
        f->hash_ready = rv == 0;
    }
    if (rv != 0) {
        fsm_panic("cannot initialise SipHash");
    }
}

void fsm_do_bootstrap(struct fsm *f,
                      const struct fsm_bootstrap *b,
                      uint32_t schema_version,
                      struct fsm_result *res)
{
    static const uint8_t zero[FSM_CLUSTER_ID_LEN];
    struct fsm_settings s = b->settings;
    struct fsm_settings d;
    const char *why;

    if (f->bootstrapped) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the cluster is already bootstrapped";
        return;
    }
    res->outcome = FSM_INVALID_ARGUMENT;
    if (memcmp(b->cluster_id, zero, sizeof zero) == 0) {
        res->reason = "cluster id must not be zero";
        return;
    }
    if (b->group_id == 0) {
        res->reason = "group id must not be 0";
        return;
    }
    fsm_settings_default(&d);
    s.max_window_ms = s.max_window_ms ? s.max_window_ms : d.max_window_ms;
    s.max_skew_ms = s.max_skew_ms ? s.max_skew_ms : d.max_skew_ms;
    s.max_ttl_ms = s.max_ttl_ms ? s.max_ttl_ms : d.max_ttl_ms;
    s.max_lease_ms = s.max_lease_ms ? s.max_lease_ms : d.max_lease_ms;
    s.max_records = s.max_records ? s.max_records : d.max_records;
    s.max_bytes = s.max_bytes ? s.max_bytes : d.max_bytes;
    why = fsm_settings_check(&s);
    if (why != NULL) {
        res->reason = why;
        return;
    }
    if (b->n_members > FSM_MEMBERS_MAX) {
        res->reason = "at most 64 members";
        return;
    }
    for (size_t i = 0; i < b->n_members; i++) {
        why = fsm_check_member(&b->members[i]);
        if (why != NULL) {
            res->reason = why;
            return;
        }
        for (size_t j = 0; j < i; j++) {
            if (b->members[j].id == b->members[i].id) {
                res->reason = "member ids must be unique";
                return;
            }
        }
    }
    set_hash_key(f, b->hash_key);
    memcpy(f->cluster_id, b->cluster_id, FSM_CLUSTER_ID_LEN);
    f->group_id = b->group_id;
    f->settings = s;
    f->schema_version = schema_version;
    f->n_members = b->n_members;
    memcpy(f->members, b->members, b->n_members * sizeof b->members[0]);
    f->bootstrapped = true;
    res->outcome = FSM_OK;
    res->reason = NULL;
}

void fsm_do_set_settings(struct fsm *f,
                         const struct fsm_settings *s,
                         struct fsm_result *res)
{
    const char *why = fsm_settings_check(s);

    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    if (s->max_window_ms > f->settings.max_window_ms) {
        if (f->fence_active) {
            res->outcome = FSM_FAILED_PRECONDITION;
            res->reason = "a max_window raise is still settling";
            return;
        }
        /* Records accepted so far kept ts + old window + skew. Claims with
         * a ts they could have carried keep the old window until no such
         * ts can be inside any window (docs/state-machine.md). */
        f->fence_active = true;
        f->fence_ts = f->now + f->settings.max_skew_ms;
        if (f->ts_hwm > f->fence_ts) {
            /* A ts accepted under an earlier, larger max_skew. */
            f->fence_ts = f->ts_hwm;
        }
        f->fence_prev_window = f->settings.max_window_ms;
        f->fence_until = f->fence_ts + s->max_window_ms;
    }
    f->settings = *s;
    res->outcome = FSM_OK;
}

void fsm_do_set_member(struct fsm *f,
                       const struct fsm_member *m,
                       struct fsm_result *res)
{
    const char *why = fsm_check_member(m);

    if (why != NULL) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = why;
        return;
    }
    if (fsm_is_retired(f, m->id)) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "this id was retired and can never be added again";
        return;
    }
    for (size_t i = 0; i < f->n_members; i++) {
        if (f->members[i].id == m->id) {
            f->members[i] = *m;
            res->outcome = FSM_OK;
            return;
        }
    }
    if (f->n_members == FSM_MEMBERS_MAX) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the member directory is full (64)";
        return;
    }
    f->members[f->n_members++] = *m;
    res->outcome = FSM_OK;
}

void fsm_do_retire(struct fsm *f, uint64_t id, struct fsm_result *res)
{
    size_t pos;

    if (id == 0) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = "member id must not be 0";
        return;
    }
    if (fsm_is_retired(f, id)) {
        res->outcome = FSM_OK;
        res->retry = true;
        return;
    }
    if (f->n_retired == FSM_RETIRED_MAX) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the retired id list is full";
        return;
    }
    if (f->n_retired == f->cap_retired) {
        size_t cap = f->cap_retired == 0 ? 16 : f->cap_retired * 2;
        uint64_t *p = realloc(f->retired, cap * sizeof *p);
        if (p == NULL) {
            fsm_panic("out of memory (retired ids)");
        }
        f->retired = p;
        f->cap_retired = cap;
    }
    pos = retired_pos(f, id);
    memmove(f->retired + pos + 1, f->retired + pos,
            (f->n_retired - pos) * sizeof *f->retired);
    f->retired[pos] = id;
    f->n_retired++;
    for (size_t i = 0; i < f->n_members; i++) {
        if (f->members[i].id == id) {
            memmove(f->members + i, f->members + i + 1,
                    (f->n_members - i - 1) * sizeof f->members[0]);
            f->n_members--;
            break;
        }
    }
    res->outcome = FSM_OK;
}
