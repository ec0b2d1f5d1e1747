/* tests/raft/random_world.c: the servers, stepping with the per-step
 * checks, the client workload and the nemesis of a random schedule
 * (random.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "raft/guard.h"
#include "random.h"

/* --- servers --------------------------------------------------------------
 */

bool alive(unsigned i)
{
    return raft_fixture_alive(&C.f, i);
}

/* The server with the newest configuration (the leader's if any). */
const struct raft_configuration *newest_config(void)
{
    const struct raft *best = NULL;
    int l = cl_leader(&C);

    if (l >= 0) {
        return &cl_raft(&C, (unsigned)l)->configuration;
    }
    for (unsigned i = 0; i < C.n; i++) {
        const struct raft *r = cl_raft(&C, i);
        if (removed[i]) {
            continue;
        }
        if (best == NULL ||
            r->configuration_index > best->configuration_index) {
            best = r;
        }
    }
    return &best->configuration;
}

int config_role(const struct raft_configuration *conf, unsigned i)
{
    for (unsigned k = 0; k < conf->n; k++) {
        if (conf->servers[k].id == i + 1) {
            return conf->servers[k].role;
        }
    }
    return -1;
}

static unsigned n_voters(const struct raft_configuration *conf)
{
    unsigned v = 0;
    for (unsigned k = 0; k < conf->n; k++) {
        v += conf->servers[k].role == RAFT_VOTER;
    }
    return v;
}

/* The fixture still names a killed leader (§1.7): touch nothing. */
static bool fixture_leader_dead(void)
{
    return C.f.leader_id != 0 && !alive((unsigned)(C.f.leader_id - 1));
}

int ready_leader(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        if (alive(i) && !removed[i] && C.s[i].started &&
            replica_ready(&C.s[i].rep)) {
            return (int)i;
        }
    }
    return -1;
}

void randomize_server(unsigned i)
{
    unsigned et = chance(15) ? rnd_range(400, 1000) : rnd_range(1000, 2200);

    raft_fixture_set_network_latency(&C.f, i, rnd_range(2, 60));
    raft_fixture_set_disk_latency(&C.f, i, rnd_range(1, 40));
    raft_fixture_set_randomized_election_timeout(&C.f, i, et);
}

/* --- stepping and the per-step checks ------------------------------------ */

bool failed;

static void check_applied_incremental(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        struct cl_server *s = &C.s[i];
        for (raft_index k = seen_max[i] + 1; k <= s->applied_max; k++) {
            uint32_t a = s->applied[k];
            if (a == 0) {
                continue;
            }
            if (ref_applied[k] == 0) {
                ref_applied[k] = a;
            } else if (ref_applied[k] != a && !failed) {
                report_fail(
                    "invariant same-applied: server %u applied a different "
                    "entry at index %llu (crc %08x, others %08x)",
                    i + 1, (unsigned long long)k, a, ref_applied[k]);
                failed = true;
            }
        }
        if (s->applied_max > seen_max[i]) {
            seen_max[i] = s->applied_max;
        }
    }
}

void scan_completions(void)
{
    for (size_t k = 0; k < n_ops; k++) {
        struct hop *h = &ops[k];
        if (h->seen_done || h->submit_rv != 0 || !h->op.done) {
            continue;
        }
        h->seen_done = true;
        h->ret_seq = ++seq;
        if (h->op.status == 0) {
            if (h->op.outcome == FSM_ACCEPTED) {
                h->cls = OC_ACCEPTED;
            } else if (h->op.outcome == FSM_REPLAYED) {
                h->cls = OC_REPLAYED;
            } else {
                h->cls = OC_FAIL;
                if (!failed) {
                    report_fail("unexpected outcome %s for a NONCE claim",
                                fsm_outcome_name(h->op.outcome));
                    print_op("op", h);
                    failed = true;
                }
            }
            st->acked++;
        } else if (h->op.status == REPLICA_E_UNKNOWN) {
            h->cls = OC_UNKNOWN;
            h->ret_seq = UINT64_MAX;
            st->unknown++;
        } else {
            h->cls = OC_FAIL; /* "not applied" */
            if (strcmp(replica_status_applied(h->op.status), "false") != 0 &&
                !failed) {
                report_fail(
                    "status %d (%s) is neither ok, unknown nor not-applied",
                    h->op.status, replica_strerror(h->op.status));
                failed = true;
            }
        }
        if ((h->cls == OC_UNKNOWN && chance(70)) ||
            (h->cls == OC_FAIL && chance(25))) {
            if (h->retries_left > 0) {
                h->retry_at = raft_fixture_time(&C.f) + rnd_range(20, 1500);
            }
        }
        vlog("done op#%zu key=%s rid=%llu %s", k, keys[h->key],
             (unsigned long long)h->rid, cls_name(h->cls));
    }
}

unsigned steps_since_full;

void do_step(void)
{
    raft_term t;
    int l;

    raft_fixture_step(&C.f);
    st->steps++;
    if (C.violation && !failed) {
        report_fail("invariant (harness): %s", C.violation_msg);
        failed = true;
    }
    for (unsigned i = 0; i < C.n; i++) {
        if (C.s[i].fatal_hits > 0 && !failed) {
            report_fail("server %u hit the fatal hook (%s: %s)", i + 1,
                        C.s[i].fatal_what, C.s[i].fatal_msg);
            dump_servers();
            {
                raft_index k = raft_last_applied(cl_raft(&C, i));
                for (unsigned j = 0; j < C.n; j++) {
                    fprintf(
                        stderr,
                        "  server %u: term of %llu = %llu, applied crc "
                        "%08x\n",
                        j + 1, (unsigned long long)k,
                        (unsigned long long)guard_term_of(cl_raft(&C, j), k),
                        C.s[j].applied[k]);
                }
            }
            (void)cl_same_applied(&C);
            if (C.violation) {
                fprintf(stderr, "  and: %s\n", C.violation_msg);
            }
            failed = true;
        }
    }
    check_applied_incremental();
    if (++steps_since_full >= 2000) {
        steps_since_full = 0;
        if (!cl_same_applied(&C) && !failed) {
            report_fail("invariant same-applied: %s", C.violation_msg);
            failed = true;
        }
    }
    l = cl_leader(&C);
    if (l >= 0) {
        t = cl_raft(&C, (unsigned)l)->current_term;
        if (t != last_leader_term) {
            last_leader_term = t;
            st->elections++;
        }
    }
    scan_completions();
}

bool step_until(bool (*cond)(void *), void *arg, unsigned ms)
{
    raft_time end = raft_fixture_time(&C.f) + ms;

    while (!cond(arg)) {
        if (raft_fixture_time(&C.f) >= end || failed) {
            return false;
        }
        do_step();
    }
    return true;
}

void step_ms(unsigned ms)
{
    raft_time end = raft_fixture_time(&C.f) + ms;
    while (raft_fixture_time(&C.f) < end && !failed) {
        do_step();
    }
}

bool all_stored(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < C.n; i++) {
        struct raft *r = cl_raft(&C, i);
        if (r->last_stored != raft_last_index(r)) {
            return false;
        }
    }
    return true;
}

/* --- client workload ------------------------------------------------------ */

struct hop *invoke(unsigned server,
                   unsigned key,
                   uint64_t rid,
                   bool retry,
                   bool probe)
{
    struct hop *h;

    if (n_ops >= OPS_MAX) {
        return NULL;
    }
    scan_completions(); /* completions before this invocation get lower seq */
    h = &ops[n_ops++];
    memset(h, 0, sizeof *h);
    h->server = server;
    h->key = key;
    h->rid = rid;
    h->client_retry = retry;
    h->probe = probe;
    h->retries_left = 3;
    h->inv_seq = ++seq;
    h->ret_seq = UINT64_MAX;
    h->submit_rv = cl_claim(&C, server, &h->op, keys[key], rid);
    st->ops++;
    if (h->submit_rv != 0) {
        h->cls = OC_FAIL;
        h->seen_done = true;
        h->ret_seq = ++seq;
        st->refused++;
        if (strcmp(replica_status_applied(h->submit_rv), "false") != 0 &&
            !failed) {
            report_fail("replica_submit returned %d, not a not-applied code",
                        h->submit_rv);
            failed = true;
        }
    }
    vlog("invoke op#%zu server=%u key=%s rid=%llu%s -> %d", n_ops - 1,
         server + 1, keys[key], (unsigned long long)rid,
         retry ? " (retry)" : "", h->submit_rv);
    return h;
}

static int random_alive_server(void)
{
    unsigned cand[CL_MAX], n = 0;

    for (unsigned i = 0; i < C.n; i++) {
        if (alive(i) && !removed[i]) {
            cand[n++] = i;
        }
    }
    return n == 0 ? -1 : (int)cand[rnd_below(n)];
}

void client_event(void)
{
    int s;
    int l = ready_leader();

    /* Mostly at the leader (so claims get through), else anywhere. */
    s = (l >= 0 && chance(70)) ? l : random_alive_server();
    if (s < 0) {
        return;
    }
    invoke((unsigned)s, rnd_below(N_KEYS), ++next_rid, false, false);
}

void retry_events(void)
{
    uint64_t now = raft_fixture_time(&C.f);
    size_t n = n_ops;

    for (size_t k = 0; k < n; k++) {
        struct hop *h = &ops[k];
        if (h->retry_at != 0 && h->retry_at <= now) {
            int l = ready_leader();
            int s = (l >= 0 && chance(60)) ? l : random_alive_server();
            unsigned left = h->retries_left - 1;
            struct hop *r;

            h->retry_at = 0;
            if (s < 0) {
                continue;
            }
            r = invoke((unsigned)s, h->key, h->rid, true, false);
            if (r != NULL) {
                r->retries_left = left;
            }
        }
    }
}

/* --- nemesis --------------------------------------------------------------
 */

void partition_event(void)
{
    if (n_pairs > 0 && (chance(50) || n_pairs >= PAIRS_MAX - CL_MAX)) {
        /* heal one pair */
        unsigned k = rnd_below(n_pairs);
        unsigned a = pairs[k].a, b = pairs[k].b;
        if (alive(a) && alive(b)) {
            raft_fixture_reconnect(&C.f, a, b);
            raft_fixture_reconnect(&C.f, b, a);
        }
        pairs[k] = pairs[--n_pairs];
        vlog("reconnect %u-%u", a + 1, b + 1);
        return;
    }
    st->partitions++;
    if (chance(40)) {
        /* isolate one server */
        int i = random_alive_server();
        if (i < 0) {
            return;
        }
        for (unsigned j = 0; j < C.n; j++) {
            if (j != (unsigned)i && n_pairs < PAIRS_MAX) {
                raft_fixture_disconnect(&C.f, (unsigned)i, j);
                raft_fixture_disconnect(&C.f, j, (unsigned)i);
                pairs[n_pairs].a = (unsigned)i;
                pairs[n_pairs].b = j;
                n_pairs++;
            }
        }
        vlog("isolate %d", i + 1);
    } else {
        unsigned a = rnd_below(C.n), b = rnd_below(C.n);
        if (a == b) {
            return;
        }
        raft_fixture_disconnect(&C.f, a, b);
        raft_fixture_disconnect(&C.f, b, a);
        pairs[n_pairs].a = a;
        pairs[n_pairs].b = b;
        n_pairs++;
        vlog("disconnect %u-%u", a + 1, b + 1);
    }
}

/* raft_fixture_kill disconnects the server and raft_fixture_revive does
 * not reconnect it: a revived server comes back with its links up (its
 * partitions are forgotten). */
void revive(unsigned i)
{
    raft_fixture_revive(&C.f, i);
    for (unsigned j = 0; j < C.n; j++) {
        if (j != i && !removed[j]) {
            raft_fixture_reconnect(&C.f, i, j);
            raft_fixture_reconnect(&C.f, j, i);
        }
    }
    for (unsigned k = 0; k < n_pairs;) {
        if (pairs[k].a == i || pairs[k].b == i) {
            pairs[k] = pairs[--n_pairs];
        } else {
            k++;
        }
    }
}

void kill_event(void)
{
    const struct raft_configuration *conf;
    unsigned dead[CL_MAX], nd = 0;

    if (fixture_leader_dead()) {
        return;
    }
    for (unsigned i = 0; i < C.n; i++) {
        if (!removed[i] && !alive(i)) {
            dead[nd++] = i;
        }
    }
    conf = newest_config();
    if (nd > 0 && (chance(60) || nd >= (n_voters(conf) - 1) / 2)) {
        unsigned i = dead[rnd_below(nd)];
        revive(i);
        vlog("revive %u", i + 1);
        return;
    }
    if (nd < (n_voters(conf) - 1) / 2) {
        int l = cl_leader(&C);
        int i = (l >= 0 && chance(40)) ? l : random_alive_server();
        if (i < 0) {
            return;
        }
        raft_fixture_kill(&C.f, (unsigned)i);
        st->kills++;
        vlog("kill %d%s", i + 1, i == l ? " (leader)" : "");
    }
}

static void member_cb(struct replica_member_req *m, int status, const char *msg)
{
    size_t k = (size_t)(m - mreqs);

    mreq_busy[k] = false;
    vlog("member op %d id %llu: %d %s", m->op, (unsigned long long)m->id,
         status, msg != NULL ? msg : "");
    if (status == 0) {
        st->members_ok++;
    }
    if (m->op == REPLICA_MEMBER_REMOVE && status == 0) {
        unsigned i = (unsigned)(m->id - 1);
        if (doomed == m->id) {
            doomed = 0;
        }
        removed[i] = true; /* the node stops (it writes its tombstone) */
        if (alive(i) && raft_state(cl_raft(&C, i)) != RAFT_LEADER) {
            raft_fixture_kill(&C.f, i);
        }
    }
}

static struct replica_member_req *mreq_get(void)
{
    for (unsigned k = 0; k < n_mreqs; k++) {
        if (!mreq_busy[k]) {
            memset(&mreqs[k], 0, sizeof mreqs[k]);
            return &mreqs[k];
        }
    }
    if (n_mreqs < MREQ_MAX) {
        memset(&mreqs[n_mreqs], 0, sizeof mreqs[n_mreqs]);
        return &mreqs[n_mreqs++];
    }
    return NULL;
}

bool member_event(void)
{
    int l = ready_leader();
    struct replica *rep;
    struct replica_member_req *m;
    const struct raft_configuration *conf;
    unsigned pick = rnd_below(3), voters;
    int half = -1;
    int rv;

    if (l < 0 || fixture_leader_dead()) {
        return false;
    }
    rep = &C.s[l].rep;
    conf = &rep->raft->configuration;
    voters = n_voters(conf);
    m = mreq_get();
    if (m == NULL) {
        return false;
    }
    for (unsigned i = 0; i < C.n; i++) {
        if (!removed[i] && config_role(conf, i) != RAFT_VOTER &&
            (unsigned)i + 1 != doomed) {
            half = (int)i; /* grown, not (yet) a voter */
        }
    }
    if (doomed != 0) {
        pick = 1;
    }
    if (pick == 0 && half >= 0) {
        m->id = (raft_id)half + 1;
        if (config_role(conf, (unsigned)half) < 0) {
            m->op = REPLICA_MEMBER_ADD;
        } else {
            m->op = REPLICA_MEMBER_ASSIGN;
        }
        m->role = FSM_ROLE_VOTER;
    } else if (pick == 0 && n_grown < 2 && C.n < CL_MAX) {
        unsigned i = cl_grow(&C);
        randomize_server(i);
        n_grown++;
        m->op = REPLICA_MEMBER_ADD;
        m->id = i + 1;
        m->role = FSM_ROLE_VOTER;
    } else if (pick == 1 && (doomed != 0 || voters > 3)) {
        unsigned cand[CL_MAX], n = 0;
        if (doomed != 0) {
            cand[n++] = (unsigned)(doomed - 1);
        } else {
            for (unsigned i = 0; i < C.n; i++) {
                if (!removed[i] && (int)i != l &&
                    config_role(conf, i) == RAFT_VOTER) {
                    cand[n++] = i;
                }
            }
        }
        if (n == 0 || (int)cand[0] == l) {
            return false;
        }
        m->op = REPLICA_MEMBER_REMOVE;
        m->id = cand[rnd_below(n)] + 1;
        doomed = m->id; /* until it succeeds */
    } else {
        m->op = REPLICA_MEMBER_TRANSFER;
        m->id = 0;
        if (chance(70)) {
            unsigned cand[CL_MAX], n = 0;
            for (unsigned i = 0; i < C.n; i++) {
                if (!removed[i] && alive(i) && (int)i != l &&
                    config_role(conf, i) == RAFT_VOTER) {
                    cand[n++] = i;
                }
            }
            if (n > 0) {
                m->id = cand[rnd_below(n)] + 1;
            }
        }
    }
    if (m->op == REPLICA_MEMBER_ADD || m->op == REPLICA_MEMBER_ASSIGN) {
        snprintf(m->raft_addr, sizeof m->raft_addr, "%llu",
                 (unsigned long long)m->id);
        snprintf(m->client_addr, sizeof m->client_addr, "c%llu",
                 (unsigned long long)m->id);
    }
    rv = replica_member(rep, m, member_cb);
    vlog("member op %d id %llu at %d -> %d", m->op, (unsigned long long)m->id,
         l + 1, rv);
    if (rv == 0) {
        mreq_busy[m - mreqs] = true;
        st->members++;
    }
    return rv == 0;
}
