/* tests/sim/sim_world.c: stepping and the nemesis of a simulated run
 * (sim.h): network faults, per-node clocks, pauses, disk faults and
 * membership changes. Every choice comes from rnd(). */
#include <stdlib.h>
#include <string.h>

#include "raft/guard.h"
#include "sim.h"
#include "sim_net.h"
#include "sim_store.h"

/* A server whose disk was told to fail (raft_fixture_io_fault), or that
 * G6b stopped: its fatal hook is expected; any other fatal is a violation.
 * Such a server is out for good, and member_event removes it and grows a
 * replacement. */
static bool disk_doomed[CL_MAX];

/* --- servers --------------------------------------------------------------
 */

bool alive(unsigned i)
{
    return raft_fixture_alive(&C.f, i);
}

/* Not removed and not fail-stopped by a disk fault. */
bool member_live(unsigned i)
{
    return !removed[i] && C.s[i].fatal_hits == 0;
}

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

/* Each node's disk and network (sim_store.h, sim_net.h), crash state. */
static struct sim_store disks[CL_MAX];
static struct sim_net nets[CL_MAX];
static bool disk_made[CL_MAX];
static bool crashed[CL_MAX];     /* down after a crash, not restarted */
static bool fsync_armed[CL_MAX]; /* its disk will fail an fsync */
static bool power_down;          /* the whole cluster lost power */
static uint64_t power_on_at;
static bool power_armed; /* a power loss waits for writes in flight */
static uint64_t power_armed_at;

/* Voters of @conf that are paused, crashed or fail-stopped, or whose disk
 * will fail. */
static unsigned n_down_voters(const struct raft_configuration *conf)
{
    unsigned d = 0;
    for (unsigned i = 0; i < C.n; i++) {
        if (config_role(conf, i) == RAFT_VOTER &&
            (!alive(i) || C.s[i].fatal_hits > 0 || disk_doomed[i] ||
             fsync_armed[i])) {
            d++;
        }
    }
    return d;
}

/* The fixture still names a killed leader (docs/raft-0.15.md §1.7). */
static bool fixture_leader_dead(void)
{
    return C.f.leader_id != 0 && !alive((unsigned)(C.f.leader_id - 1));
}

int ready_leader(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        if (alive(i) && member_live(i) && C.s[i].started &&
            replica_ready(&C.s[i].rep)) {
            return (int)i;
        }
    }
    return -1;
}

int random_live_server(void)
{
    unsigned cand[CL_MAX], n = 0;

    for (unsigned i = 0; i < C.n; i++) {
        if (alive(i) && member_live(i)) {
            cand[n++] = i;
        }
    }
    return n == 0 ? -1 : (int)cand[rnd_below(n)];
}

void randomize_server(unsigned i)
{
    unsigned et = chance(15) ? rnd_range(400, 1000) : rnd_range(1000, 2200);

    raft_fixture_set_network_latency(&C.f, i, rnd_range(1, 80));
    /* A disk is sometimes slow (a loaded device, a long fsync): the window
     * in which a crash loses unsynced writes is then wide. */
    disks[i].latency_ms =
        chance(25) && slow_disks ? rnd_range(60, 300) : rnd_range(1, 40);
    if (chance(10)) { /* a link that sometimes delivers a message twice */
        nets[i].dup_countdown = (int)rnd_range(0, 30);
    }
    raft_fixture_set_randomized_election_timeout(&C.f, i, et);
}

/* --- stepping ---------------------------------------------------------------
 */

static void crash(unsigned i);
static void power_on(void);
static void power_loss(void);
static bool writes_in_flight(void);

void do_step(void)
{
    raft_fixture_step(&C.f); /* the disks run in its hook (disks_step) */
    st->steps++;
    if (C.violation) {
        sim_fail("invariant (harness): %s", C.violation_msg);
    }
    if (power_down && raft_fixture_time(&C.f) >= power_on_at) {
        power_on();
    }
    if (power_armed && ((writes_in_flight() && chance(5)) ||
                        raft_fixture_time(&C.f) >= power_armed_at + 2000)) {
        power_armed = false;
        power_loss();
    }
    for (unsigned i = 0; i < C.n; i++) {
        if (C.s[i].fatal_hits > 0 && !crashed[i] &&
            strcmp(C.s[i].fatal_what, "truncate") == 0 &&
            strstr(C.s[i].fatal_msg, "(B6)") != NULL) {
            /* G8's designed fail-stop (guard.h): a truncation removed the
             * configuration entry raft 0.15 took as committed at its
             * restart (B6). The restart rebuilds the configuration from
             * the log: crash it, it starts again later. Counted. */
            vlog("server %u: G8 fail-stop (%s)", i + 1, C.s[i].fatal_msg);
            st->g8_stops++;
            crash(i);
            continue;
        }
        if (C.s[i].fatal_hits > 0 && fsync_armed[i] && !crashed[i] &&
            disks[i].fs.failed_fsync) {
            /* G4 fail-stopped the node on its disk's failed fsync (in a
             * node: abort): the log store failed there, and whichever of
             * its calls reported it first (an append, a truncation, a
             * put) hit the hook. It starts again from its disk later. */
            vlog("server %u: G4 fail-stop on a failed fsync (%s)", i + 1,
                 C.s[i].fatal_msg);
            st->fsync_stops++;
            crash(i);
            continue;
        }
        if (C.s[i].fatal_hits > 0 && !disk_doomed[i] &&
            strstr(C.s[i].fatal_msg, "membership rollback") != NULL) {
            /* G6b's designed fail-stop (guard.h): a node restarts from
             * its log, which the fixture cannot do; out for good, and
             * member_event replaces it. Counted, not a violation. */
            disk_doomed[i] = true;
            st->g6b_stops++;
            vlog("server %u: G6b fail-stop (%s)", i + 1, C.s[i].fatal_msg);
        }
        if (C.s[i].fatal_hits > 0 && !disk_doomed[i]) {
            sim_fail(
                "server %u hit the fatal hook without a disk fault "
                "(%s: %s)",
                i + 1, C.s[i].fatal_what, C.s[i].fatal_msg);
        }
    }
    check_step();
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

/* --- network ---------------------------------------------------------------
 * raft_fixture 0.15 has links that are up, down (disconnect: both ways
 * here) or saturated (one way: every message dropped, a lossy link), and a
 * latency per sender; messages of senders with different latencies
 * overtake each other. It has no duplication. */

static void link_down(unsigned a, unsigned b)
{
    if (n_pairs >= SIM_PAIRS_MAX) {
        return;
    }
    raft_fixture_disconnect(&C.f, a, b);
    raft_fixture_disconnect(&C.f, b, a);
    pairs[n_pairs].a = a;
    pairs[n_pairs].b = b;
    n_pairs++;
}

void net_event(void)
{
    unsigned a, b;

    if (n_pairs > 0 && (chance(50) || n_pairs >= SIM_PAIRS_MAX - CL_MAX)) {
        unsigned k = rnd_below(n_pairs);
        a = pairs[k].a;
        b = pairs[k].b;
        if (alive(a) && alive(b)) {
            raft_fixture_reconnect(&C.f, a, b);
            raft_fixture_reconnect(&C.f, b, a);
        }
        pairs[k] = pairs[--n_pairs];
        vlog("heal %u-%u", a + 1, b + 1);
        return;
    }
    a = rnd_below(C.n);
    b = rnd_below(C.n);
    if (a == b) {
        return;
    }
    if (chance(30)) {
        /* a lossy link one way, for a while: every message dropped */
        if (raft_fixture_saturated(&C.f, a, b)) {
            raft_fixture_desaturate(&C.f, a, b);
        } else {
            raft_fixture_saturate(&C.f, a, b);
            st->losses++;
        }
        vlog("saturate %u->%u", a + 1, b + 1);
        return;
    }
    st->partitions++;
    if (chance(40)) {
        int i = random_live_server();
        if (i < 0) {
            return;
        }
        for (unsigned j = 0; j < C.n; j++) {
            if (j != (unsigned)i) {
                link_down((unsigned)i, j);
            }
        }
        vlog("isolate %d", i + 1);
    } else {
        link_down(a, b);
        vlog("disconnect %u-%u", a + 1, b + 1);
    }
}

/* --- clocks ----------------------------------------------------------------
 * Each node's wall clock is fixture time + CL_WALL0 + its offset
 * (cluster.h); its monotonic clock is fixture time. Skews stay small,
 * jumps go past max_skew (60 s) both ways. */

void clock_event(void)
{
    unsigned i = rnd_below(C.n);
    int64_t *off = &C.s[i].wall_offset_ms;

    switch (rnd_below(4)) {
        case 0: /* skew */
            *off = (int64_t)rnd_range(0, 4000) - 2000;
            break;
        case 1: /* a jump: NTP step, VM migration, an operator */
            *off += chance(50) ? (int64_t)rnd_range(1000, 300000)
                               : -(int64_t)rnd_range(1000, 300000);
            st->clock_jumps++;
            break;
        default: /* back to true time */
            *off = 0;
            break;
    }
    vlog("clock %u offset %lld ms", i + 1, (long long)*off);
}

/* --- pauses ------------------------------------------------------------------
 * raft_fixture_kill stops a server's ticks and links; its memory and
 * "disk" stay (a SIGSTOP, or a VM paused): the fixture cannot restart a
 * server from its disk (tests/sim/README.md). revive brings it back with
 * its links up. */

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

void pause_event(void)
{
    const struct raft_configuration *conf;
    unsigned dead[CL_MAX], nd = 0;

    if (fixture_leader_dead()) {
        return;
    }
    if (power_down) {
        return;
    }
    for (unsigned i = 0; i < C.n; i++) {
        if (member_live(i) && !alive(i) && !crashed[i] && !disk_doomed[i]) {
            dead[nd++] = i;
        }
    }
    conf = newest_config();
    if (nd > 0 &&
        (chance(60) || n_down_voters(conf) >= (n_voters(conf) - 1) / 2)) {
        unsigned i = dead[rnd_below(nd)];
        revive(i);
        vlog("resume %u", i + 1);
        return;
    }
    if (n_down_voters(conf) < (n_voters(conf) - 1) / 2) {
        int l = cl_leader(&C);
        int i = (l >= 0 && chance(40)) ? l : random_live_server();
        if (i < 0) {
            return;
        }
        raft_fixture_kill(&C.f, (unsigned)i);
        st->pauses++;
        vlog("pause %d%s", i + 1, i == l ? " (leader)" : "");
    }
}

/* --- disk ------------------------------------------------------------------
 * A failed fsync: the node's disk fails one of its next appends (within 20),
 * reported in the append's completion as a real disk does: the n-th next
 * fdatasync of a segment file returns EIO (sim_fs.h), the log store fails
 * (fail-stop) and its calls fail from then on.
 * rio's G4 fail-stops the node on it (the harness's hook returns where a
 * node aborts); do_step then crashes the node, and it starts again from
 * its disk later. Never more voters down than a minority. */

void disk_event(void)
{
    const struct raft_configuration *conf = newest_config();
    int i;

    if (!disk_faults || power_down || fixture_leader_dead() ||
        n_down_voters(conf) + 1 > (n_voters(conf) - 1) / 2 || chance(50)) {
        return;
    }
    i = random_live_server();
    if (i < 0 || disk_doomed[i] || fsync_armed[i] || !alive((unsigned)i)) {
        return;
    }
    fsync_armed[i] = true;
    disks[i].fs.fail_countdown = (int)rnd_range(0, 20);
    st->io_faults++;
    vlog("failed fsync armed on %d", i + 1);
}

/* --- crashes -----------------------------------------------------------------
 * A crash is a power cut of one node: its process is gone (cl_crash: the
 * replica, raft and the state machine freed), its disk keeps what was
 * synced and what the crash lets through (sim_store.h: store jobs that ran
 * unseen, one that ran part way; sim_fs.h: a seeded part of each file's
 * unsynced writes, sometimes a torn prefix of a write, a seeded prefix of
 * the unsynced directory operations). A restart loads from
 * the disk through the production restart path (raft_start: load, restore
 * the snapshot, replay the log). Before a restart the disk may be
 * corrupted (a byte of a synced record flipped): the load must refuse or
 * cut it (the log store's rules, store_scan.h); a node that refuses stays
 * down and member_event replaces it. Power loss: every node crashes at the
 * same instant and all restart together later, the only time more than a
 * minority of the voters is down. */

static bool crash_torn_ok; /* the crash in progress may tear a segment */

static struct store *sim_adopt(void *arg, unsigned i, struct raft *r)
{
    (void)arg;
    sim_net_wrap(&nets[i], r);
    if (!disk_made[i]) {
        /* Small segments: rolls, preparations and removals are frequent. */
        size_t seg = 8192 * (size_t)rnd_range(1, 4);
        sim_store_init(&disks[i], &C.f.time, seg);
        disk_made[i] = true;
    }
    return sim_store_open(&disks[i]);
}

static void disks_step(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < CL_MAX; i++) {
        if (disk_made[i]) {
            sim_store_run(&disks[i]);
        }
    }
}

void sim_world_backend(void)
{
    struct cl_backend b = {NULL, sim_adopt, disks_step};

    cl_set_backend(&b);
}

void sim_world_free(void)
{
    for (unsigned i = 0; i < CL_MAX; i++) {
        if (disk_made[i]) {
            st->torn += disks[i].fs.stats.torn;
            st->cuts += disks[i].stats.cuts;
            st->kept_unsynced += disks[i].stats.ran_at_crash;
            st->lost_unsynced += disks[i].stats.lost_at_crash;
            st->duplicated += nets[i].duplicated;
            sim_store_free(&disks[i]);
            disk_made[i] = false;
        }
    }
}

static void before_close(void *arg, unsigned i)
{
    (void)arg;
    sim_store_crash(&disks[i], rnd, crash_torn_ok);
    sim_net_crash(&nets[i]);
}

/* Another node holds a cut it has not passed again (it will not vote), or
 * is down for good until replaced: one more node that will not vote could
 * leave no majority that votes, for good (README, "Found"). */
static bool other_cut(unsigned i)
{
    for (unsigned j = 0; j < C.n; j++) {
        if (j == i || !disk_made[j] || removed[j]) {
            continue;
        }
        if (disk_doomed[j] || /* down for good until replaced */
            (C.s[j].started
                 ? rio_novote(&C.s[j].rep.rio)
                 : disks[j].novote_pending || disks[j].fs.torn_pending)) {
            return true;
        }
    }
    return false;
}

static void crash(unsigned i)
{
    struct sim_store *d = &disks[i];

    /* rio's no-vote after a cut (the record may have been acknowledged)
     * on a majority stalls the cluster for good: tests/sim/README.md,
     * "Found". One node at a time here. */
    crash_torn_ok = torn_any || !other_cut(i);
    d->novote_pending = C.s[i].started && rio_novote(&C.s[i].rep.rio);
    trace_mix(0xc4a5000000000000ull ^ ((uint64_t)i << 40) ^
              ((uint64_t)d->queued << 20) ^ (uint64_t)crash_torn_ok);
    vlog("crash %u (queued %u)", i + 1, d->queued);
    cl_crash(&C, i, before_close, NULL);
    d->fs.fail_countdown = -1;
    crashed[i] = true;
    fsync_armed[i] = false;
    check_restarted(i);
    st->crashes++;
}

static void restart(unsigned i)
{
    char err[256];
    int rv = cl_restart(&C, i, err);

    crashed[i] = false;
    /* Loaded: a torn tail is cut (rio's no-vote shows it from now on). */
    disks[i].fs.torn_pending = false;
    disks[i].novote_pending = false;
    trace_mix(0x5e57000000000000ull ^ ((uint64_t)i << 40) ^ (uint64_t)rv);
    if (rv != 0) {
        /* The production decision: a log that does not check refuses to
         * start. Out for good; member_event replaces it. */
        disk_doomed[i] = true;
        st->refused++;
        vlog("restart %u refused: %s", i + 1, err);
        return;
    }
    st->restarts++;
    revive(i);
    vlog("restart %u (cut index %llu)", i + 1,
         (unsigned long long)disks[i].store.cut_index);
}

static void power_on(void)
{
    power_down = false;
    for (unsigned i = 0; i < C.n; i++) {
        if (crashed[i] && !removed[i]) {
            restart(i);
        }
    }
}

/* A majority of the live nodes have writes queued, not yet durable: the
 * moment a power loss can lose what a correct node never acknowledged
 * and a buggy one did. */
static bool writes_in_flight(void)
{
    unsigned live = 0, busy = 0;

    for (unsigned i = 0; i < C.n; i++) {
        if (!crashed[i] && !removed[i] && disk_made[i] && C.s[i].started) {
            live++;
            busy += disks[i].queued > 0;
        }
    }
    return busy > 0 && busy > live / 2;
}

static void power_loss(void)
{
    vlog("power loss");
    for (unsigned i = 0; i < C.n; i++) {
        if (!removed[i] && !crashed[i] && !disk_doomed[i] &&
            C.s[i].fatal_hits == 0 && C.s[i].started) {
            crash(i);
        }
    }
    power_down = true;
    power_on_at = raft_fixture_time(&C.f) + rnd_range(100, 4000);
    st->power_losses++;
}

void crash_event(void)
{
    const struct raft_configuration *conf;
    unsigned down[CL_MAX], nd = 0;
    int i, l;

    if (!crash_faults || power_down || power_armed) {
        return;
    }
    for (unsigned k = 0; k < C.n; k++) {
        if (crashed[k] && !removed[k]) {
            down[nd++] = k;
        }
    }
    conf = newest_config();
    if (nd > 0 && chance(60)) {
        unsigned k = down[rnd_below(nd)];
        bool doomed_other = false;

        for (unsigned j = 0; j < C.n; j++) {
            doomed_other |= disk_doomed[j] && !removed[j];
        }
        /* A corrupted disk may be refused: only while the others can
         * still form a majority without it. */
        if (chance(15) && !doomed_other && (torn_any || !other_cut(k)) &&
            n_down_voters(conf) <= (n_voters(conf) - 1) / 2 &&
            sim_fs_corrupt(&disks[k].fs, rnd())) {
            st->corruptions++;
            vlog("corrupt the disk of %u", k + 1);
        }
        restart(k);
        return;
    }
    if (chance(power_loss_percent)) {
        /* The cut comes at a step while a majority has writes in
         * flight (one in ten such steps; else after 2 s): a power loss
         * between idle disks loses nothing. */
        power_armed = true;
        power_armed_at = raft_fixture_time(&C.f);
        return;
    }
    if (fixture_leader_dead() ||
        n_down_voters(conf) >= (n_voters(conf) - 1) / 2) {
        return;
    }
    l = cl_leader(&C);
    i = (l >= 0 && chance(40)) ? l : random_live_server();
    if (i < 0 || disk_doomed[i] || fsync_armed[i]) {
        return;
    }
    crash((unsigned)i);
}

/* --- membership ------------------------------------------------------------
 */

static struct replica_member_req mreqs[SIM_MREQ_MAX];
static bool mreq_busy[SIM_MREQ_MAX];
static unsigned n_mreqs;

static void member_cb(struct replica_member_req *m, int status, const char *msg)
{
    size_t k = (size_t)(m - mreqs);

    mreq_busy[k] = false;
    vlog("member op %d id %llu: %d %s", m->op, (unsigned long long)m->id,
         status, msg != NULL ? msg : "");
    if (status == 0) {
        st->member_ok++;
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
    if (n_mreqs < SIM_MREQ_MAX) {
        memset(&mreqs[n_mreqs], 0, sizeof mreqs[n_mreqs]);
        return &mreqs[n_mreqs++];
    }
    return NULL;
}

/* One step of a membership change: finish a removal, remove a server a
 * disk fault stopped (replace: a new one is grown next time), add a grown
 * server as voter (resize up), remove a voter (resize down), or transfer
 * leadership. */
bool member_event(void)
{
    int l = ready_leader();
    struct replica *rep;
    struct replica_member_req *m;
    const struct raft_configuration *conf;
    unsigned pick = rnd_below(3), voters;
    int half = -1, broken = -1;
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
        if (!member_live(i) || disk_doomed[i]) {
            if (!removed[i] && config_role(conf, i) >= 0 && (int)i != l) {
                broken = (int)i;
            }
            continue;
        }
        if (config_role(conf, i) != RAFT_VOTER && (raft_id)i + 1 != doomed) {
            half = (int)i; /* grown, not (yet) a voter */
        }
    }
    if (doomed != 0) {
        m->op = REPLICA_MEMBER_REMOVE;
        m->id = doomed;
    } else if (broken >= 0) {
        m->op = REPLICA_MEMBER_REMOVE;
        m->id = (raft_id)broken + 1;
        doomed = m->id;
    } else if (pick == 0 && half >= 0) {
        m->id = (raft_id)half + 1;
        m->op = config_role(conf, (unsigned)half) < 0 ? REPLICA_MEMBER_ADD
                                                      : REPLICA_MEMBER_ASSIGN;
        m->role = FSM_ROLE_VOTER;
    } else if ((pick == 0 || voters < 3) && n_grown < 4 && C.n < CL_MAX) {
        unsigned i = cl_grow(&C);
        randomize_server(i);
        n_grown++;
        m->op = REPLICA_MEMBER_ADD;
        m->id = i + 1;
        m->role = FSM_ROLE_VOTER;
    } else if (pick == 1 && voters > 3) {
        unsigned cand[CL_MAX], n = 0;
        for (unsigned i = 0; i < C.n; i++) {
            if (member_live(i) && (int)i != l &&
                config_role(conf, i) == RAFT_VOTER) {
                cand[n++] = i;
            }
        }
        if (n == 0) {
            return false;
        }
        m->op = REPLICA_MEMBER_REMOVE;
        m->id = cand[rnd_below(n)] + 1;
        doomed = m->id;
    } else {
        m->op = REPLICA_MEMBER_TRANSFER;
        m->id = 0;
        if (chance(70)) {
            unsigned cand[CL_MAX], n = 0;
            for (unsigned i = 0; i < C.n; i++) {
                if (member_live(i) && !disk_doomed[i] && alive(i) &&
                    (int)i != l && config_role(conf, i) == RAFT_VOTER) {
                    cand[n++] = i;
                }
            }
            if (n > 0) {
                m->id = cand[rnd_below(n)] + 1;
            }
        }
    }
    if ((int)m->id - 1 == l && m->op == REPLICA_MEMBER_REMOVE) {
        return false; /* the leader is removed after a transfer */
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
        st->member_ops++;
    }
    return rv == 0;
}

/* --- healing -----------------------------------------------------------------
 */

void heal(void)
{
    power_down = false;
    power_armed = false;
    for (unsigned i = 0; i < C.n; i++) {
        disks[i].fs.fail_countdown = -1;
        fsync_armed[i] = false;
        nets[i].dup_countdown = -1;
        if (crashed[i] && !removed[i]) {
            restart(i);
        } else if (member_live(i) && !disk_doomed[i] && !alive(i)) {
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
        for (unsigned j = 0; j < C.n; j++) {
            if (i != j && raft_fixture_saturated(&C.f, i, j)) {
                raft_fixture_desaturate(&C.f, i, j);
            }
        }
        raft_fixture_set_randomized_election_timeout(&C.f, i, 1000 + 150 * i);
        raft_fixture_set_network_latency(&C.f, i, 15);
        disks[i].latency_ms = 10;
    }
}

bool sim_disk_doomed(unsigned i)
{
    return disk_doomed[i];
}

void sim_world_reset(void)
{
    memset(disk_doomed, 0, sizeof disk_doomed);
    memset(crashed, 0, sizeof crashed);
    memset(fsync_armed, 0, sizeof fsync_armed);
    power_down = false;
    power_armed = false;
    memset(mreq_busy, 0, sizeof mreq_busy);
    n_mreqs = 0;
}
