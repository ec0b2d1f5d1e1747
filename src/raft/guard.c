#include "raft/guard.h"

#include <errno.h>
#include <string.h>

#include "common/assert.h"

#ifdef ONCE_GUARD_SWITCHES
static unsigned guards_off;

bool guard_on(unsigned g)
{
    return (guards_off & g) == 0;
}

void guard_test_set_off(unsigned mask)
{
    guards_off = mask;
}

int guard_test_parse(const char *list, unsigned *mask)
{
    static const struct
    {
        const char *name;
        unsigned bit;
    } names[] = {{"g1", GUARD_G1},   {"g2", GUARD_G2},  {"g4", GUARD_G4},
                 {"g5", GUARD_G5},   {"g6", GUARD_G6},  {"g7", GUARD_G7},
                 {"g8", GUARD_G8},   {"g9", GUARD_G9},  {"g10", GUARD_G10},
                 {"g11", GUARD_G11}, {"g12", GUARD_G12}};
    const char *p = list;

    *mask = 0;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        size_t i;

        for (i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strlen(names[i].name) == n &&
                strncmp(p, names[i].name, n) == 0) {
                *mask |= names[i].bit;
                break;
            }
        }
        if (i == sizeof names / sizeof names[0] && n > 0) {
            return -EINVAL;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return 0;
}
#else
bool guard_on(unsigned g)
{
    (void)g;
    return true;
}
#endif

raft_term guard_term_of(const struct raft *r, raft_index index)
{
    const struct raft_log *l = &r->log;
    size_t n;

    if (index == 0) {
        return 0;
    }
    /* 0.15's log is a ring buffer of entries [front, back) holding indexes
     * offset+1 .. offset+n. */
    n = l->back >= l->front ? l->back - l->front : l->size - l->front + l->back;
    if (index > l->offset && index <= l->offset + n) {
        ONCE_ASSERT(l->size > 0 && n <= l->size,
                    "a log holding entries has a ring that fits them");
        return l->entries[(l->front + (index - l->offset - 1)) % l->size].term;
    }
    if (index == l->snapshot.last_index) {
        return l->snapshot.last_term;
    }
    return 0;
}

bool guard_g2_drop(const struct raft *r, const struct raft_message *m)
{
    /* 0.15 only ever commits last_stored (replicationQuorum(r,
     * r->last_stored)); while that entry is of an older term, counting its
     * replicas could commit it by the old-term rule Raft forbids. Dropping
     * the results looks like a lost packet: heartbeats repeat them once the
     * leader stored an entry of its own term (the G1 barrier). */
    /* Only successes of this term can count toward commit: a rejection
     * moves next_index back, a higher term makes the leader step down;
     * both must get through. */
    return guard_on(GUARD_G2) && m->type == RAFT_IO_APPEND_ENTRIES_RESULT &&
           r->state == RAFT_LEADER && m->append_entries_result.rejected == 0 &&
           m->append_entries_result.term <= r->current_term &&
           guard_term_of(r, r->last_stored) != r->current_term;
}

int guard_g5_check(const struct raft *r)
{
    /* Also while the configuration in force is ahead of what is applied:
     * after a restart 0.15 takes the log's last configuration entry as
     * committed (B6), and a snapshot below it would record that possibly
     * uncommitted configuration as the snapshot's. */
    if (guard_on(GUARD_G5) && (r->configuration_uncommitted_index != 0 ||
                               r->configuration_index > r->last_applied)) {
        return RAFT_BUSY; /* raft skips this snapshot and retries later */
    }
    return 0;
}

/* Is entry @index in the in-memory log (not just the snapshot's last)? */
static bool in_log(const struct raft *r, raft_index index)
{
    const struct raft_log *l = &r->log;
    size_t n =
        l->back >= l->front ? l->back - l->front : l->size - l->front + l->back;

    return index > l->offset && index <= l->offset + n;
}

bool guard_g6_rollback_stop(const struct raft *r, const struct raft_message *m)
{
    const struct raft_append_entries *ae = &m->append_entries;
    raft_index index;
    unsigned i;

    if (!guard_on(GUARD_G6) || r->configuration_uncommitted_index == 0 ||
        in_log(r, r->configuration_index) || ae->term < r->current_term) {
        return false;
    }
    if (ae->prev_log_index != 0 &&
        guard_term_of(r, ae->prev_log_index) != ae->prev_log_term) {
        return false; /* raft rejects it without truncating */
    }
    /* 0.15 (deleteConflictingEntries) rolls back when it truncates at or
     * below the uncommitted configuration's index: find the first entry of
     * the request whose term differs from ours. */
    for (i = 0; i < ae->n_entries; i++) {
        raft_term local;

        index = ae->prev_log_index + 1 + i;
        local = guard_term_of(r, index);
        if (local == 0) {
            return false; /* past our log: nothing to truncate */
        }
        if (local != ae->entries[i].term) {
            return index <= r->configuration_uncommitted_index;
        }
    }
    return false;
}

unsigned guard_g6_trailing(const struct raft *r, unsigned base)
{
    raft_index need;

    if (!guard_on(GUARD_G6) || r->configuration_index == 0 ||
        r->last_applied < r->configuration_index) {
        return base;
    }
    /* Raft compacts up to snapshot_index - trailing; keep the committed
     * configuration entry (configuration_index) inside the log. */
    need = r->last_applied - r->configuration_index + 1;
    if (need > (raft_index)base) {
        return need > (raft_index)~0u ? ~0u : (unsigned)need;
    }
    return base;
}

bool guard_b6_stale(const struct raft *r, raft_index index)
{
    /* A configuration entry raft knows to be uncommitted is rolled back by
     * raft itself (with G6 keeping the previous one in the log); committed
     * entries are never truncated. So a truncation at or below
     * configuration_index with nothing uncommitted is only B6. */
    return guard_on(GUARD_G8) && r->configuration_uncommitted_index == 0 &&
           r->configuration_index != 0 && index <= r->configuration_index;
}

bool guard_g10_below_snapshot(const struct raft *r,
                              const struct raft_message *m)
{
    /* Our snapshot holds only committed entries (taken at last_applied, or
     * installed from a leader), which every later leader has too: claiming
     * to match up to its last entry is true whatever the leader sent. A
     * request of an older term is rejected by raft anyway. */
    return guard_on(GUARD_G10) && m->append_entries.term >= r->current_term &&
           m->append_entries.prev_log_index < r->log.snapshot.last_index;
}
