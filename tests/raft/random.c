/* tests/raft/random.c: seeded random schedules over the production Raft
 * layer on raft_fixture (tests/raft/cluster.h).
 *
 *   random-schedules [--seeds N] [--first S] [--steps-ms MS] [--off GUARDS]
 *                    [--no-fork] [-v]
 *
 * Each schedule is a function of its seed only (splitmix64, no rand()):
 * 3 or 5 voters, random network and disk latency, randomised election
 * timeouts, partitions (pairs and isolated servers), kills and revivals
 * (never more dead voters than a minority, never anything while the
 * fixture still names a killed leader: docs/raft-0.15.md §1.7),
 * membership changes (add a grown server as voter, remove a non-leader,
 * transfer) and a client workload of NONCE claims over 8 keys, with client
 * retries reusing the request id after an unknown (or not applied) outcome
 * and fresh request ids otherwise (replays).
 *
 * Checked at every fixture step: at most one leader per term (harness) and
 * the same entry at the same index on every server (incremental, plus
 * cl_same_applied now and then). After healing everything: a ready leader,
 * every member applied its last index, cl_same_applied, every acknowledged
 * ACCEPTED key present on every member, and per-key claim linearizability
 * over the history (jepsen/README.md, "Checker rules", R1-R4 with the request
 * id as the label and first_index as the winner's name), including a final
 * fresh probe of every key.
 *
 * Each schedule runs in a forked child (a harness ck_assert or a sanitizer
 * report then fails that seed only, and the parent names it). */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "raft/guard.h"

#define N_KEYS    8
#define OPS_MAX   4096
#define MREQ_MAX  64
#define PAIRS_MAX 64

/* --- PRNG ------------------------------------------------------------------
 */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned rnd_below(unsigned n)
{
    return n == 0 ? 0 : (unsigned)(rnd() % n);
}

static unsigned rnd_range(unsigned lo, unsigned hi) /* inclusive */
{
    return lo + rnd_below(hi - lo + 1);
}

static bool chance(unsigned percent)
{
    return rnd_below(100) < percent;
}

/* --- state of one schedule -------------------------------------------------
 */

enum op_class { OC_PENDING, OC_ACCEPTED, OC_REPLAYED, OC_UNKNOWN, OC_FAIL };

struct hop
{
    struct cl_op op; /* the harness's request and its outcome */
    unsigned server;
    unsigned key;
    uint64_t rid;
    bool client_retry; /* reuses the request id of an earlier op */
    bool probe;        /* final probe */
    int submit_rv;     /* replica_submit's code (not 0: refused) */
    uint64_t inv_seq, ret_seq;
    bool seen_done;
    enum op_class cls;
    unsigned retries_left;
    uint64_t retry_at; /* fixture time of a scheduled retry, 0 = none */
};

struct stats
{
    uint64_t deferred_truncations;
    uint64_t snapshots;         /* taken, all servers */
    uint64_t snapshot_installs; /* restored from a leader's snapshot */
    uint64_t seeds, ops, acked, unknown, refused, elections, kills, partitions,
        members, members_ok, steps;
    int failed_seed_rc;
};

static struct cluster C;
static struct hop *ops;
static size_t n_ops;
static uint64_t seq;
static uint64_t next_rid;
static bool verbose;
static uint64_t cur_seed;
static struct stats *st;

static bool removed[CL_MAX]; /* removal committed: killed for good */
static unsigned n_grown;
static struct
{
    unsigned a, b;
} pairs[PAIRS_MAX];
static unsigned n_pairs;
static uint32_t *ref_applied; /* first checksum seen at each index */
static raft_index seen_max[CL_MAX];
static raft_term last_leader_term;

static struct replica_member_req mreqs[MREQ_MAX];
static bool mreq_busy[MREQ_MAX];
static unsigned n_mreqs;
static raft_id doomed; /* a removal that did not finish */

static const char *const keys[N_KEYS] = {"k0", "k1", "k2", "k3",
                                         "k4", "k5", "k6", "k7"};

static void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vlog(const char *fmt, ...)
{
    va_list ap;

    if (!verbose) {
        return;
    }
    va_start(ap, fmt);
    fprintf(stderr, "[%llu] ", (unsigned long long)raft_fixture_time(&C.f));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *cls_name(enum op_class c)
{
    switch (c) {
        case OC_ACCEPTED:
            return "ACCEPTED";
        case OC_REPLAYED:
            return "REPLAYED";
        case OC_UNKNOWN:
            return "unknown";
        case OC_FAIL:
            return "not-applied";
        default:
            return "pending";
    }
}

static void print_op(const char *tag, const struct hop *h)
{
    fprintf(stderr,
            "  %s op#%zu key=%s rid=%llu server=%u%s%s inv=%llu(t=%llu) "
            "ret=%llu(t=%llu) status=%d outcome=%s retry=%d "
            "first_index=%llu\n",
            tag, (size_t)(h - ops), keys[h->key], (unsigned long long)h->rid,
            h->server + 1, h->client_retry ? " client-retry" : "",
            h->probe ? " probe" : "", (unsigned long long)h->inv_seq,
            (unsigned long long)h->op.t_invoke, (unsigned long long)h->ret_seq,
            (unsigned long long)h->op.t_done,
            h->submit_rv != 0 ? h->submit_rv : h->op.status,
            h->op.status == 0 && h->op.done ? fsm_outcome_name(h->op.outcome)
                                            : cls_name(h->cls),
            h->op.retry, (unsigned long long)h->op.first_index);
}

static void report_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void report_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "FAIL seed %llu at t=%llu: ", (unsigned long long)cur_seed,
            (unsigned long long)raft_fixture_time(&C.f));
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* --- servers --------------------------------------------------------------
 */

static bool alive(unsigned i)
{
    return raft_fixture_alive(&C.f, i);
}

/* The server with the newest configuration (the leader's if any). */
static const struct raft_configuration *newest_config(void)
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

static int config_role(const struct raft_configuration *conf, unsigned i)
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

static int ready_leader(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        if (alive(i) && !removed[i] && C.s[i].started &&
            replica_ready(&C.s[i].rep)) {
            return (int)i;
        }
    }
    return -1;
}

static void randomize_server(unsigned i)
{
    unsigned et = chance(15) ? rnd_range(400, 1000) : rnd_range(1000, 2200);

    raft_fixture_set_network_latency(&C.f, i, rnd_range(2, 60));
    raft_fixture_set_disk_latency(&C.f, i, rnd_range(1, 40));
    raft_fixture_set_randomized_election_timeout(&C.f, i, et);
}

static void dump_servers(void);

/* --- stepping and the per-step checks ------------------------------------ */

static bool failed;

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

static void scan_completions(void)
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

static unsigned steps_since_full;

static void do_step(void)
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

static bool step_until(bool (*cond)(void *), void *arg, unsigned ms)
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

static void step_ms(unsigned ms)
{
    raft_time end = raft_fixture_time(&C.f) + ms;
    while (raft_fixture_time(&C.f) < end && !failed) {
        do_step();
    }
}

static bool all_stored(void *arg)
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

static struct hop *invoke(unsigned server,
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

static void client_event(void)
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

static void retry_events(void)
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

static void partition_event(void)
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
static void revive(unsigned i)
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

static void kill_event(void)
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

static bool member_event(void)
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

static void heal(void)
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

static bool check_history(void)
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

static void dump_servers(void)
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

static bool final_phase(void)
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

/* --- one schedule ----------------------------------------------------------
 */

static int run_schedule(uint64_t seed, unsigned steps_ms)
{
    unsigned voters, lat_every;
    uint64_t t_end, next_client, next_net, next_kill, next_member, next_lat;
    bool ok;

    cur_seed = seed;
    rng_state = seed;
    failed = false;
    n_ops = 0;
    seq = 0;
    next_rid = 1000;
    n_grown = 0;
    n_pairs = 0;
    n_mreqs = 0;
    doomed = 0;
    last_leader_term = 0;
    steps_since_full = 0;
    memset(removed, 0, sizeof removed);
    memset(seen_max, 0, sizeof seen_max);
    memset(mreq_busy, 0, sizeof mreq_busy);
    ops = calloc(OPS_MAX, sizeof *ops);
    ref_applied = calloc(CL_APPLY_MAX, sizeof *ref_applied);
    if (ops == NULL || ref_applied == NULL) {
        return 2;
    }

    voters = chance(50) ? 3 : 5;
    /* Half the schedules snapshot often, so InstallSnapshot, compaction
     * and G5/G6 run under faults too. */
    if (chance(50)) {
        cl_set_snapshot(&C, rnd_range(16, 64), 8);
    } else {
        cl_set_snapshot(&C, 1024, 2048);
    }
    C.quiet = !verbose;
    cl_init(&C, voters, voters);
    step_until(all_stored, NULL, 5000);
    for (unsigned i = 0; i < C.n; i++) {
        randomize_server(i);
    }
    vlog("seed %llu: %u voters", (unsigned long long)seed, voters);

    t_end = raft_fixture_time(&C.f) + steps_ms;
    next_client = raft_fixture_time(&C.f) + rnd_range(10, 100);
    next_net = raft_fixture_time(&C.f) + rnd_range(500, 4000);
    next_kill = raft_fixture_time(&C.f) + rnd_range(1000, 6000);
    next_member = raft_fixture_time(&C.f) + rnd_range(2000, 8000);
    lat_every = rnd_range(3000, 10000);
    next_lat = raft_fixture_time(&C.f) + lat_every;

    while (raft_fixture_time(&C.f) < t_end && !failed) {
        uint64_t now = raft_fixture_time(&C.f);

        if (now >= next_client) {
            client_event();
            if (chance(20)) { /* a burst: contention in one batch */
                client_event();
            }
            next_client = now + rnd_range(5, 150);
        }
        retry_events();
        if (now >= next_net) {
            partition_event();
            next_net = now + rnd_range(300, 4000);
        }
        if (now >= next_kill) {
            kill_event();
            next_kill = now + rnd_range(800, 6000);
        }
        if (now >= next_member) {
            member_event();
            next_member = now + rnd_range(2000, 9000);
        }
        if (now >= next_lat) {
            unsigned i = rnd_below(C.n);
            if (!removed[i]) {
                randomize_server(i);
            }
            next_lat = now + lat_every;
        }
        do_step();
    }
    ok = !failed && final_phase();
    if (ok && getenv("ONCE_RS_MUTATE") != NULL) {
        /* Checker self-test: a wrong history must be caught. 1: a REPLAYED
         * turned ACCEPTED; 2: a REPLAYED naming another winner. */
        int kind = atoi(getenv("ONCE_RS_MUTATE"));
        for (size_t k = 0; k < n_ops; k++) {
            if (ops[k].cls == OC_REPLAYED && !ops[k].probe) {
                if (kind == 1) {
                    ops[k].cls = OC_ACCEPTED;
                } else {
                    ops[k].op.first_index++;
                }
                break;
            }
        }
        ok = !check_history();
        fprintf(stderr, "self-test %d: %s\n", kind,
                ok ? "caught" : "NOT CAUGHT");
    }
    if (!ok && verbose) {
        for (size_t k = 0; k < n_ops; k++) {
            print_op("history", &ops[k]);
        }
    }
    for (unsigned i = 0; i < C.n; i++) {
        st->deferred_truncations += C.s[i].store.deferred_truncations;
        st->snapshots += C.s[i].rep.stats.snapshots_taken;
        st->snapshot_installs += C.s[i].rep.stats.snapshots_restored;
    }
    cl_close(&C);
    free(ops);
    free(ref_applied);
    ops = NULL;
    ref_applied = NULL;
    return ok ? 0 : 1;
}

/* --- Check plumbing --------------------------------------------------------
 * The harness uses ck_assert, which only works inside a Check runner: run
 * each schedule as a one-test suite in CK_NOFORK mode (we fork ourselves). */

static uint64_t ck_seed;
static unsigned ck_steps_ms;
static int ck_rc = 3;

START_TEST(one_schedule)
{
    ck_rc = run_schedule(ck_seed, ck_steps_ms);
}
END_TEST

static int run_checked(uint64_t seed, unsigned steps_ms)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("schedule");
    SRunner *sr;
    int nf;

    ck_seed = seed;
    ck_steps_ms = steps_ms;
    ck_rc = 3;
    tcase_add_test(tc, one_schedule);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    nf = srunner_ntests_failed(sr);
    if (nf > 0) {
        TestResult **tr = srunner_failures(sr);
        for (int k = 0; k < nf; k++) {
            fprintf(stderr, "FAIL seed %llu: harness assertion %s:%d: %s\n",
                    (unsigned long long)seed, tr_lfile(tr[k]), tr_lno(tr[k]),
                    tr_msg(tr[k]));
        }
        free(tr);
        if (ck_rc == 0) {
            ck_rc = 3;
        }
    }
    srunner_free(sr);
    return ck_rc;
}

/* --- main -------------------------------------------------------------------
 */

static void usage(void)
{
    fprintf(stderr,
            "usage: random-schedules [--seeds N] [--first S] [--steps-ms MS] "
            "[--off GUARDS] [--sync-snapshots] [--no-fork] [-v]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    unsigned long long n_seeds = 20, first = 1;
    unsigned steps_ms = 25000;
    bool do_fork = true;
    struct timespec t0, t1;
    struct stats *shared;
    struct stats total;
    unsigned long long failures = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            n_seeds = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--steps-ms") == 0 && i + 1 < argc) {
            steps_ms = (unsigned)strtoul(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--off") == 0 && i + 1 < argc) {
            unsigned mask;

            /* Test-only guard switches (raft/guard.h): a kept failing seed
             * shows what a guard prevents. */
            if (guard_test_parse(argv[++i], &mask) != 0) {
                usage();
            }
            guard_test_set_off(mask);
        } else if (strcmp(argv[i], "--sync-snapshots") == 0) {
            /* fsm v2 timing: the kept guard seeds were found with it. */
            cl_set_sync_snapshots(true);
        } else if (strcmp(argv[i], "--no-fork") == 0) {
            do_fork = false;
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = true;
        } else {
            usage();
        }
    }
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memset(&total, 0, sizeof total);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long long k = 0; k < n_seeds; k++) {
        uint64_t seed = first + k;
        int rc;

        memset(shared, 0, sizeof *shared);
        st = shared;
        if (do_fork) {
            pid_t pid;
            int wst;

            fflush(stdout);
            fflush(stderr);
            pid = fork();
            if (pid < 0) {
                perror("fork");
                return 2;
            }
            if (pid == 0) {
                exit(run_checked(seed, steps_ms));
            }
            while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
            }
            rc = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
        } else {
            rc = run_checked(seed, steps_ms);
        }
        total.seeds++;
        total.ops += shared->ops;
        total.acked += shared->acked;
        total.unknown += shared->unknown;
        total.refused += shared->refused;
        total.elections += shared->elections;
        total.kills += shared->kills;
        total.partitions += shared->partitions;
        total.members += shared->members;
        total.members_ok += shared->members_ok;
        total.steps += shared->steps;
        total.deferred_truncations += shared->deferred_truncations;
        total.snapshots += shared->snapshots;
        total.snapshot_installs += shared->snapshot_installs;
        if (rc != 0) {
            failures++;
            fprintf(stderr,
                    "seed %llu FAILED (exit %d); reproduce: random-schedules "
                    "--seeds 1 --first %llu --steps-ms %u -v\n",
                    (unsigned long long)seed, rc, (unsigned long long)seed,
                    steps_ms);
        } else if (verbose) {
            fprintf(stderr, "seed %llu ok\n", (unsigned long long)seed);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf(
        "random-schedules: seeds %llu (first %llu), failed %llu, ops %llu, "
        "acked %llu, unknown %llu, refused %llu, elections %llu, kills "
        "%llu, partitions %llu, membership changes %llu (%llu ok), steps "
        "%llu, deferred truncations %llu, snapshots %llu (installed %llu), "
        "elapsed %.1f s\n",
        (unsigned long long)total.seeds, first, failures,
        (unsigned long long)total.ops, (unsigned long long)total.acked,
        (unsigned long long)total.unknown, (unsigned long long)total.refused,
        (unsigned long long)total.elections, (unsigned long long)total.kills,
        (unsigned long long)total.partitions, (unsigned long long)total.members,
        (unsigned long long)total.members_ok, (unsigned long long)total.steps,
        (unsigned long long)total.deferred_truncations,
        (unsigned long long)total.snapshots,
        (unsigned long long)total.snapshot_installs,
        (double)(t1.tv_sec - t0.tv_sec) +
            (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    munmap(shared, sizeof *shared);
    return failures == 0 ? 0 : 1;
}
