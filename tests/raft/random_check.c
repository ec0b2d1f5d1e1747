/* tests/raft/random_check.c: the final phase of a random schedule (heal,
 * probes) and the checker of its history (random.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "raft/guard.h"
#include "random.h"

/* --- the final phase ------------------------------------------------------ */

static bool ready_cond(void *arg)
{
    (void)arg;
    return ready_leader() >= 0;
}

static bool final_member(unsigned i, const struct raft_configuration *conf)
{
    int role = config_role(conf, i);
    return !removed[i] && alive(i) && C.s[i].started &&
           (role == RAFT_VOTER || role == RAFT_STANDBY);
}

struct applied_arg
{
    raft_index index;
    unsigned l;
};

static bool applied_cond(void *arg)
{
    struct applied_arg *a = arg;
    const struct raft_configuration *conf = &cl_raft(&C, a->l)->configuration;

    for (unsigned i = 0; i < C.n; i++) {
        if (final_member(i, conf) &&
            raft_last_applied(cl_raft(&C, i)) < a->index) {
            return false;
        }
    }
    return true;
}

void heal(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        if (!removed[i] && !alive(i)) {
            revive(i);
        }
    }
    for (unsigned k = 0; k < n_pairs; k++) {
        unsigned a = pairs[k].a, b = pairs[k].b;
        if (!removed[a] && !removed[b]) {
            raft_fixture_reconnect(&C.f, a, b);
            raft_fixture_reconnect(&C.f, b, a);
        }
    }
    n_pairs = 0;
    for (unsigned i = 0; i < C.n; i++) {
        raft_fixture_set_randomized_election_timeout(&C.f, i, 1000 + 150 * i);
        raft_fixture_set_network_latency(&C.f, i, 15);
        raft_fixture_set_disk_latency(&C.f, i, 10);
    }
}

static bool op_done_cond(void *arg)
{
    return ((struct hop *)arg)->seen_done;
}

/* A fresh claim of every key at the ready leader (R7). */
static bool probes(void)
{
    for (unsigned key = 0; key < N_KEYS && !failed; key++) {
        bool ok = false;
        for (unsigned attempt = 0; attempt < 5 && !ok && !failed; attempt++) {
            int l;
            struct hop *h;

            if (!step_until(ready_cond, NULL, 30000)) {
                return false;
            }
            l = ready_leader();
            h = invoke((unsigned)l, key, ++next_rid, false, true);
            if (h == NULL) {
                return false;
            }
            step_until(op_done_cond, h, 10000);
            ok = h->cls == OC_ACCEPTED || h->cls == OC_REPLAYED;
        }
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* --- the checker ------------------------------------------------------------
 */

static bool capable(const struct hop *h)
{
    return h->cls == OC_ACCEPTED || h->cls == OC_UNKNOWN ||
           h->cls == OC_PENDING;
}

bool check_history(void)
{
    for (unsigned key = 0; key < N_KEYS; key++) {
        const struct hop *winner = NULL, *named = NULL;

        for (size_t a = 0; a < n_ops; a++) {
            const struct hop *x = &ops[a];
            if (x->key != key) {
                continue;
            }
            /* R1: every ACCEPTED carries the same request id. */
            if (x->cls == OC_ACCEPTED) {
                if (winner != NULL && winner->rid != x->rid) {
                    report_fail(
                        "linearizability: key %s ACCEPTED twice with "
                        "different request ids (double-accept)",
                        keys[key]);
                    print_op("first", winner);
                    print_op("second", x);
                    return false;
                }
                if (winner == NULL) {
                    winner = x;
                }
            }
            /* R2: every ok answer names the same first (winning) entry. */
            if (x->cls == OC_ACCEPTED || x->cls == OC_REPLAYED) {
                if (named != NULL &&
                    named->op.first_index != x->op.first_index) {
                    report_fail(
                        "linearizability: key %s answers name different "
                        "winners (first_index %llu vs %llu: "
                        "conflicting-winner)",
                        keys[key], (unsigned long long)named->op.first_index,
                        (unsigned long long)x->op.first_index);
                    print_op("one", named);
                    print_op("other", x);
                    return false;
                }
                named = x;
            }
        }
        for (size_t a = 0; a < n_ops; a++) {
            const struct hop *x = &ops[a];
            if (x->key != key) {
                continue;
            }
            if (winner != NULL && x->rid == winner->rid &&
                x->cls == OC_REPLAYED) {
                report_fail(
                    "linearizability: key %s: the winner's request id got "
                    "REPLAYED (self-deny)",
                    keys[key]);
                print_op("winner", winner);
                print_op("denied", x);
                return false;
            }
            if (x->cls == OC_ACCEPTED) {
                /* An op invoked after this ACCEPTED completed, with another
                 * request id, must be REPLAYED if it answered. */
                for (size_t b = 0; b < n_ops; b++) {
                    const struct hop *y = &ops[b];
                    if (y->key == key && y->rid != x->rid &&
                        y->inv_seq > x->ret_seq && y->cls == OC_ACCEPTED) {
                        report_fail(
                            "linearizability: key %s ACCEPTED for a new "
                            "request id after an ACCEPTED completed",
                            keys[key]);
                        print_op("accepted", x);
                        print_op("later", y);
                        return false;
                    }
                }
            }
            if (x->cls == OC_REPLAYED) {
                /* R3/R4: some op that could have won, with another request
                 * id, was invoked before this REPLAYED completed. */
                bool found = false;
                for (size_t b = 0; b < n_ops && !found; b++) {
                    const struct hop *y = &ops[b];
                    found = y->key == key && y->rid != x->rid && capable(y) &&
                            y->submit_rv == 0 && y->inv_seq < x->ret_seq;
                }
                if (!found) {
                    report_fail(
                        "linearizability: key %s REPLAYED with no op that "
                        "could have won invoked before it completed "
                        "(phantom winner / deny-before-winner-invoked / "
                        "failed-op-took-effect)",
                        keys[key]);
                    print_op("replayed", x);
                    for (size_t b = 0; b < n_ops; b++) {
                        if (ops[b].key == key && ops[b].inv_seq < x->ret_seq) {
                            print_op("earlier", &ops[b]);
                        }
                    }
                    return false;
                }
            }
        }
    }
    return true;
}

void dump_servers(void)
{
    const struct raft_configuration *conf = newest_config();

    for (unsigned i = 0; i < C.n; i++) {
        struct raft *r = cl_raft(&C, i);
        fprintf(stderr,
                "  server %u: alive=%d removed=%d state=%s term=%llu "
                "applied=%llu last=%llu commit=%llu role=%d ready=%d\n",
                i + 1, alive(i), removed[i],
                (const char *[]){"?", "follower", "candidate",
                                 "leader"}[raft_state(r) & 3],
                (unsigned long long)r->current_term,
                (unsigned long long)raft_last_applied(r),
                (unsigned long long)raft_last_index(r),
                (unsigned long long)r->commit_index, config_role(conf, i),
                replica_ready(&C.s[i].rep));
        fprintf(stderr,
                "    log offset=%llu snapshot=%llu stored=%llu "
                "g2=%llu g7=%llu g9=%llu novote=%llu fatal=%u\n",
                (unsigned long long)r->log.offset,
                (unsigned long long)r->log.snapshot.last_index,
                (unsigned long long)r->last_stored,
                (unsigned long long)C.s[i].rep.rio.stats.g2_dropped,
                (unsigned long long)C.s[i].rep.rio.stats.g7_clamped,
                (unsigned long long)C.s[i].rep.rio.stats.g9_dropped,
                (unsigned long long)C.s[i].rep.rio.stats.novote_dropped,
                C.s[i].fatal_hits);
        if (raft_state(r) == RAFT_LEADER) {
            for (unsigned k = 0; k < r->configuration.n; k++) {
                const struct raft_progress *p = &r->leader_state.progress[k];
                fprintf(stderr,
                        "    progress %llu: state=%u next=%llu match=%llu "
                        "snapshot=%llu recent=%d\n",
                        (unsigned long long)r->configuration.servers[k].id,
                        p->state, (unsigned long long)p->next_index,
                        (unsigned long long)p->match_index,
                        (unsigned long long)p->snapshot_index, p->recent_recv);
            }
        }
    }
}

bool final_phase(void)
{
    struct applied_arg aa;
    const struct raft_configuration *conf;
    int l;

    heal();
    step_ms(500);
    if (!step_until(ready_cond, NULL, 60000)) {
        if (!failed) {
            report_fail("liveness: no ready leader within 60 s after healing");
        }
        return false;
    }
    /* Finish an interrupted removal, and let pending ops drain. */
    for (unsigned t = 0; t < 5 && doomed != 0 && !failed; t++) {
        member_event();
        step_ms(3000);
    }
    step_ms(3000);
    if (!probes()) {
        if (!failed) {
            report_fail("liveness: final probes did not get an answer");
        }
        return false;
    }
    if (!step_until(ready_cond, NULL, 30000)) {
        if (!failed) {
            report_fail("liveness: no ready leader for the final barrier");
        }
        return false;
    }
    l = ready_leader();
    aa.l = (unsigned)l;
    aa.index = raft_last_index(cl_raft(&C, (unsigned)l));
    if (!step_until(applied_cond, &aa, 30000)) {
        if (!failed) {
            report_fail("liveness: members did not apply index %llu",
                        (unsigned long long)aa.index);
            dump_servers();
        }
        return false;
    }
    if (failed) {
        return false;
    }
    scan_completions();
    if (!cl_same_applied(&C)) {
        report_fail("invariant same-applied: %s", C.violation_msg);
        return false;
    }
    if (C.violation) {
        report_fail("invariant (harness): %s", C.violation_msg);
        return false;
    }
    /* Durability: every acknowledged ACCEPTED (and REPLAYED) key is present
     * on every member. */
    conf = &cl_raft(&C, (unsigned)l)->configuration;
    for (size_t k = 0; k < n_ops; k++) {
        const struct hop *h = &ops[k];
        if (h->cls != OC_ACCEPTED && h->cls != OC_REPLAYED) {
            continue;
        }
        for (unsigned i = 0; i < C.n; i++) {
            if (final_member(i, conf) &&
                cl_local_lookup(&C, i, keys[h->key]) != FSM_FOUND) {
                report_fail(
                    "durability: acknowledged %s of key %s missing on "
                    "server %u",
                    cls_name(h->cls), keys[h->key], i + 1);
                print_op("acked", h);
                return false;
            }
        }
    }
    return check_history();
}
