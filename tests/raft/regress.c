/* tests/raft/regress.c: guard regressions on raft_fixture clusters running
 * the production Raft layer (rio decorator, adapter, pipeline) over the real
 * state machine. Each scenario reproduces one of libraft 0.15's bugs
 * (docs/raft-0.15.md §3) and checks a safety property; with the guard
 * that closes it switched off (test-only switches, raft/guard.h) the
 * property must break, with every guard on it must hold.
 *
 *   regress SCENARIO [--off LIST] [--raw] [--disk-ms N]
 *
 * Exit 0: the scenario ran and found no violation; 1: a violation (printed
 * as "VIOLATION: ..."), including a crash of the scenario (it runs in a
 * forked child, so a segfault inside libraft is reported as "crash: signal
 * N"); 2: usage or setup error (also: the scenario timed out).
 *
 * Scenarios:
 *   figure8     Raft Figure 8 (dissertation fig. 3.7, B1): an entry of an
 *               older term committed by counting replicas, then overwritten.
 *               Guards G1+G2. --disk-ms N slows the first leader's disk;
 *               --window (with --disk-ms 200) adds the partitions under
 *               which G1 alone is not enough and G2 is what closes it.
 *   rollback    B13 false match (G7) and B5 rollback NULL dereference (G6).
 *   stale-reply B13 through the reply to a write that completed after the
 *               term changed (G9): a false match, an acknowledged claim
 *               lost.
 *   install-rollback
 *               B5 after an InstallSnapshot (G6b, off with g6): the
 *               follower must fail-stop (the fatal hook; clean), not crash.
 *   starvation  B3 commit starvation under a command every 5 ms; the guard
 *               is the pipeline (one proposal in flight + batching):
 *               --raw bypasses it with one raft_apply per command. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "common/crc32c.h"
#include "fsm/command.h"
#include "fsm_helpers.h"
#include "raft/entry.h"
#include "raft/guard.h"

#define EXIT_CLEAN     0
#define EXIT_VIOLATION 1
#define EXIT_SETUP     2

/* A scenario must finish well within this (wall clock, seconds). */
#define CHILD_TIMEOUT_S 50

struct opts
{
    const char *scenario;
    const char *off_list; /* as given, "none" if empty */
    unsigned off;
    bool raw;
    bool window;
    unsigned disk_ms;
};

static struct opts O;
static struct cluster C; /* one per process: each scenario is a child */
static char violation_msg[512];
static bool violated;

static void violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
    va_list ap;

    if (violated) {
        return; /* keep the first one */
    }
    violated = true;
    va_start(ap, fmt);
    vsnprintf(violation_msg, sizeof violation_msg, fmt, ap);
    va_end(ap);
}

static void setup_error(const char *what)
{
    printf("setup error: %s\n", what);
    fflush(stdout);
}

/* The summary line; @extra names the scenario's key numbers. */
static int finish(const char *extra)
{
    if (violated) {
        printf("VIOLATION: %s\n", violation_msg);
    }
    printf("regress: scenario=%s off=%s%s result=%s %s\n", O.scenario,
           O.off_list, O.raw ? " mode=raw" : "",
           violated ? "VIOLATION" : "clean", extra);
    fflush(stdout);
    return violated ? EXIT_VIOLATION : EXIT_CLEAN;
}

static uint64_t sum_g2(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < C.n; i++) {
        n += C.s[i].rep.rio.stats.g2_dropped;
    }
    return n;
}

static uint64_t sum_g7(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < C.n; i++) {
        n += C.s[i].rep.rio.stats.g7_clamped;
    }
    return n;
}

/* Servers that applied different entries at the same index (crcs recorded
 * by the applied hook), including servers that are down now. */
static void check_applied(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        for (unsigned j = i + 1; j < C.n; j++) {
            raft_index m = C.s[i].applied_max < C.s[j].applied_max
                               ? C.s[i].applied_max
                               : C.s[j].applied_max;
            for (raft_index k = 1; k <= m; k++) {
                uint32_t a = C.s[i].applied[k], b = C.s[j].applied[k];
                if (a != 0 && b != 0 && a != b) {
                    violation(
                        "S%u and S%u applied different entries at "
                        "index %llu (crc %08x vs %08x)",
                        i + 1, j + 1, (unsigned long long)k, a, b);
                    return;
                }
            }
        }
    }
}

/* --- figure8: own cluster setup (log state before start) ------------------
 */

#define F8_N   5
#define F8_KEY "f8"

static uint64_t f8_wall(void *arg)
{
    (void)arg;
    return raft_fixture_time(&C.f) + CL_WALL0;
}

static uint64_t f8_mono(void *arg)
{
    (void)arg;
    return raft_fixture_time(&C.f);
}

static void f8_fatal(void *arg, const char *what, int status, const char *msg)
{
    struct cl_server *s = arg;
    (void)status;
    (void)msg;
    s->fatal_hits++;
    snprintf(s->fatal_what, sizeof s->fatal_what, "%s", what);
}

static void f8_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    if (getenv("REGRESS_VERBOSE") != NULL) {
        fprintf(stderr, "[%llu] %s %s\n",
                (unsigned long long)raft_fixture_time(&C.f), level, msg);
    }
}

static void f8_applied(void *arg, raft_index index, const void *buf, size_t len)
{
    struct cl_server *s = arg;

    if (index >= CL_APPLY_MAX) {
        return;
    }
    s->applied[index] = crc32c(0, buf, len) | 1u; /* never 0 */
    if (index > s->applied_max) {
        s->applied_max = index;
    }
}

/* A framed log entry (entry_wrap over a batch) holding one command. */
static int make_entry(const struct fsm_cmd *cmd,
                      uint64_t time_ms,
                      raft_term term,
                      struct raft_entry *e)
{
    uint8_t *enc = NULL, *batch = NULL;
    size_t enc_len, batch_len;
    const uint8_t *cmds[1];
    int rv;

    rv = command_encode(cmd, &enc, &enc_len);
    if (rv == 0) {
        cmds[0] = enc;
        rv = command_encode_batch(FSM_SCHEMA_VERSION, time_ms, cmds, &enc_len,
                                  1, &batch, &batch_len);
    }
    if (rv == 0) {
        rv = entry_wrap(batch, batch_len, &e->buf);
    }
    free(enc);
    free(batch);
    e->term = term;
    e->type = RAFT_COMMAND;
    e->batch = NULL;
    return rv;
}

static int add_entry(unsigned i, const struct fsm_cmd *cmd, raft_term term)
{
    struct raft_entry e;

    if (make_entry(cmd, CL_WALL0, term, &e) != 0) {
        return -1;
    }
    raft_fixture_add_entry(&C.f, i, &e); /* takes the buffer */
    return 0;
}

/* Grow, adopt and bootstrap F8_N servers; do not start them. */
static int f8_setup(void)
{
    struct raft_configuration conf;
    struct replica_config cfg = {
        .election_ms = 1000,
        .heartbeat_ms = 100,
        .snapshot_threshold = 1024,
        .snapshot_trailing = 2048,
        .max_catch_up_rounds = 10,
        .max_catch_up_round_ms = 5000,
    };
    char errmsg[256];

    memset(&C, 0, sizeof C);
    if (raft_fixture_initialize(&C.f) != 0) {
        return -1;
    }
    for (unsigned i = 0; i < F8_N; i++) {
        struct cl_server *s = &C.s[i];
        struct replica_clock clock = {s, f8_wall, f8_mono};
        struct replica_hooks hooks = {s, f8_fatal, f8_log, NULL, f8_applied};
        struct fsm *fsm = fsm_new();
        struct raft *r;

        s->used = true;
        s->applied = calloc(CL_APPLY_MAX, sizeof *s->applied);
        if (fsm == NULL || s->applied == NULL) {
            fsm_free(fsm);
            return -1;
        }
        replica_prepare(&s->rep, fsm, &clock, &hooks);
        if (raft_fixture_grow(&C.f, &s->rep.raft_fsm) != 0) {
            fsm_free(fsm);
            return -1;
        }
        C.n = i + 1;
        r = raft_fixture_get(&C.f, i);
        fixture_store_init(&s->store, r->io);
        replica_adopt(&s->rep, r, &s->store.store);
        if (replica_configure(&s->rep, &cfg, errmsg) != 0) {
            return -1;
        }
    }
    if (raft_fixture_configuration(&C.f, F8_N, &conf) != 0) {
        return -1;
    }
    if (raft_fixture_bootstrap(&C.f, &conf) != 0) {
        raft_configuration_close(&conf);
        return -1;
    }
    raft_configuration_close(&conf);
    return 0;
}

static void f8_close(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        replica_shutdown(&C.s[i].rep);
    }
    raft_fixture_close(&C.f);
    for (unsigned i = 0; i < C.n; i++) {
        replica_close(&C.s[i].rep);
        free(C.s[i].applied);
    }
}

/* Which request id server i's state machine holds for F8_KEY (0: none). */
static uint64_t f8_owner(unsigned i)
{
    struct fsm_ident id = {(const uint8_t *)CL_SCOPE, strlen(CL_SCOPE),
                           (const uint8_t *)F8_KEY, strlen(F8_KEY)};
    struct fsm_result res;

    if (C.s[i].rep.fsm == NULL) {
        return 0;
    }
    fsm_lookup(C.s[i].rep.fsm, &id, &res);
    if (!res.has_record) {
        return 0;
    }
    for (uint64_t rid = 1; rid <= 2; rid++) {
        if (fh_rid_is(res.first_request_id, rid)) {
            return rid;
        }
    }
    return 99;
}

/* Persisted state of Figure 8 (b), one index later because index 2 is the
 * FSM Bootstrap everybody has (term 1): S1, S2 hold index 3 from term 2 (a
 * claim of F8_KEY by request 1), S5 holds index 3 from term 3 (the same key
 * claimed by request 2); everybody has seen term 3. Then (c) S1 leads term
 * 4 with S5 down and (d) crashes; S5 comes back and tries to lead. */
static int scenario_figure8(void)
{
    struct fsm_bootstrap *b = calloc(1, sizeof *b);
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    struct raft *s1, *s5;
    char errmsg[256];
    char extra[256];
    unsigned i;
    bool s1_applied, s5_leader;
    uint64_t g2_s1;

    if (b == NULL || f8_setup() != 0) {
        free(b);
        setup_error("figure8 cluster");
        return EXIT_SETUP;
    }
    cmd = cl_bootstrap_cmd(b, F8_N);
    for (i = 0; i < F8_N; i++) {
        if (add_entry(i, &cmd, 1) != 0) {
            free(b);
            setup_error("bootstrap entry");
            return EXIT_SETUP;
        }
    }
    free(b);
    cmd = cl_claim_cmd(&cl, F8_KEY, 1);
    if (add_entry(0, &cmd, 2) != 0 || add_entry(1, &cmd, 2) != 0) {
        setup_error("term-2 entry");
        return EXIT_SETUP;
    }
    cmd = cl_claim_cmd(&cl, F8_KEY, 2);
    if (add_entry(4, &cmd, 3) != 0) {
        setup_error("term-3 entry");
        return EXIT_SETUP;
    }
    for (i = 0; i < F8_N; i++) {
        raft_fixture_set_term(&C.f, i, 3);
    }
    for (i = 0; i < F8_N; i++) {
        if (replica_start(&C.s[i].rep, errmsg) != 0) {
            setup_error(errmsg);
            return EXIT_SETUP;
        }
        C.s[i].started = true;
    }
    if (O.disk_ms > 0) {
        raft_fixture_set_disk_latency(&C.f, 0, O.disk_ms);
    }

    /* (c) S5 down, S1 elected in term 4 (no raft_fixture_elect: B14). */
    raft_fixture_kill(&C.f, 4);
    if (O.window) {
        /* S4 hears nothing of S1's term. */
        raft_fixture_disconnect(&C.f, 0, 3);
        raft_fixture_disconnect(&C.f, 3, 0);
    }
    raft_fixture_set_randomized_election_timeout(&C.f, 0, 300);
    if (!raft_fixture_step_until_state_is(&C.f, 0, RAFT_LEADER, 10000)) {
        setup_error("S1 did not become leader");
        f8_close();
        return EXIT_SETUP;
    }
    s1 = raft_fixture_get(&C.f, 0);
    printf("figure8: S1 leader of term %llu\n",
           (unsigned long long)s1->current_term);
    if (O.window) {
        /* The G2 window: S2 gets S1's election heartbeat (which matches its
         * index 3 and is answered at once) but nothing after it, so S2
         * never stores S1's term-4 barrier; S3 stores 3 and the barrier.
         * While S1's own slow disk has not stored the barrier, last_stored
         * is the term-2 entry 3, and 0.15 commits it by counting S1, S2,
         * S3 (B1), though no term-4 entry is on a majority. */
        raft_time end = raft_fixture_time(&C.f) + 2000;
        bool cut = false;

        s1_applied = false;
        while (raft_fixture_time(&C.f) < end && !s1_applied) {
            raft_fixture_step(&C.f);
            if (!cut && cl_raft(&C, 1)->follower_state.current_leader.id == 1) {
                raft_fixture_disconnect(&C.f, 0, 1);
                cut = true;
            }
            s1_applied = raft_last_applied(s1) >= 3;
        }
    } else {
        s1_applied = raft_fixture_step_until_applied(&C.f, 0, 3, 2000);
    }
    g2_s1 = C.s[0].rep.rio.stats.g2_dropped;
    printf(
        "figure8: S1 %s index 3: commit=%llu last_applied=%llu "
        "last_stored=%llu (G2 dropped %llu, G1 barriers %llu)\n",
        s1_applied ? "applied" : "did not apply",
        (unsigned long long)s1->commit_index,
        (unsigned long long)s1->last_applied,
        (unsigned long long)s1->last_stored, (unsigned long long)g2_s1,
        (unsigned long long)C.s[0].rep.stats.g1_barriers);

    /* (d) S1 crashes; S5 comes back and campaigns. S2 is cut off while S5
     * campaigns: with pre-vote on (as in production) S2, S3 and S4 would
     * otherwise race S5 and elect one of themselves; S5 needs the votes of
     * S3 and S4 only, which it gets exactly when they lack a term-4 entry
     * (Raft's election restriction, the part 0.15 gets right). With
     * --window S3 holds the barrier instead: S3 is cut off, S2 and S4 vote. */
    raft_fixture_kill(&C.f, 0);
    cl_disconnect_all(&C, O.window ? 2 : 1);
    raft_fixture_revive(&C.f, 4);
    raft_fixture_step_until_has_no_leader(&C.f, 5000);
    raft_fixture_set_randomized_election_timeout(&C.f, 4, 500);
    s5_leader = raft_fixture_step_until_state_is(&C.f, 4, RAFT_LEADER, 10000);
    cl_reconnect_all(&C, O.window ? 2 : 1);
    cl_reconnect_all(&C, 0);
    s5 = raft_fixture_get(&C.f, 4);
    printf("figure8: S5 %s (term %llu)\n",
           s5_leader ? "became leader" : "did not become leader",
           (unsigned long long)s5->current_term);
    raft_fixture_step_until_elapsed(&C.f, 3000);

    for (i = 0; i < F8_N; i++) {
        struct raft *r = raft_fixture_get(&C.f, i);
        printf(
            "figure8: S%u commit=%llu applied=%llu index-3 term=%llu "
            "claim of %s by request %llu\n",
            i + 1, (unsigned long long)r->commit_index,
            (unsigned long long)r->last_applied,
            (unsigned long long)guard_term_of(r, 3), F8_KEY,
            (unsigned long long)f8_owner(i));
    }
    check_applied();
    if (!violated) {
        /* Same property on the state: who owns the claim. */
        for (i = 1; i < F8_N; i++) {
            uint64_t a = f8_owner(0), o = f8_owner(i);
            if (a != 0 && o != 0 && a != o) {
                violation(
                    "state machines diverged: S1 says request %llu "
                    "claimed %s, S%u says request %llu",
                    (unsigned long long)a, F8_KEY, i + 1,
                    (unsigned long long)o);
            }
        }
    }
    snprintf(
        extra, sizeof extra,
        "window=%d disk_ms=%u s1_applied_idx3=%d s5_leader=%d g2_dropped=%llu "
        "g1_barriers=%llu",
        O.window, O.disk_ms, s1_applied, s5_leader,
        (unsigned long long)sum_g2(),
        (unsigned long long)(C.s[0].rep.stats.g1_barriers +
                             C.s[4].rep.stats.g1_barriers));
    f8_close();
    return finish(extra);
}

/* --- rollback: B13 false match and B5 rollback ---------------------------
 */

#define RB_N 5

static bool rb_change_done;

static void rb_change_cb(struct raft_change *req, int status)
{
    (void)req;
    (void)status;
    rb_change_done = true;
}

/* Leader @l must not count follower @j as matching an entry @j does not
 * have (B13). */
static void rb_check_match(unsigned l, unsigned j)
{
    struct raft *lr = cl_raft(&C, l), *fr = cl_raft(&C, j);
    raft_index m, k, from;

    if (lr->state != RAFT_LEADER || !C.f.servers[j].alive) {
        return;
    }
    m = lr->leader_state.progress[j].match_index;
    if (m > raft_last_index(fr)) {
        violation(
            "leader S%u counts S%u as matching up to index %llu, "
            "beyond S%u's last index %llu",
            l + 1, j + 1, (unsigned long long)m, j + 1,
            (unsigned long long)raft_last_index(fr));
        return;
    }
    from = lr->log.offset > fr->log.offset ? lr->log.offset : fr->log.offset;
    for (k = from + 1; k <= m; k++) {
        raft_term tl = guard_term_of(lr, k), tf = guard_term_of(fr, k);
        if (tl != 0 && tf != 0 && tl != tf) {
            violation(
                "false match: leader S%u counts S%u as matching up to "
                "index %llu, but S%u's entry %llu is of term %llu, "
                "the leader's of term %llu",
                l + 1, j + 1, (unsigned long long)m, j + 1,
                (unsigned long long)k, (unsigned long long)tf,
                (unsigned long long)tl);
            return;
        }
    }
}

/* Index of the first server of [from, to) in RAFT_LEADER within @ms. */
static int rb_wait_leader_among(unsigned from, unsigned to, unsigned ms)
{
    raft_time end = raft_fixture_time(&C.f) + ms;

    while (raft_fixture_time(&C.f) < end) {
        for (unsigned i = from; i < to; i++) {
            if (C.f.servers[i].alive &&
                raft_state(cl_raft(&C, i)) == RAFT_LEADER) {
                return (int)i;
            }
        }
        raft_fixture_step(&C.f);
    }
    return -1;
}

/* As rollback_probe: 40 entries (snapshots every 16, trailing 4, so the
 * bootstrap configuration entry gets compacted unless G6 keeps it), then S1,
 * cut off from S3..S5, appends a configuration change that only S2 gets;
 * S1 dies and S3 leads. S3's first heartbeat matches S2 at S3's last index;
 * 0.15 answers it with S2's last_stored, the uncommitted config entry (B13,
 * G7 clamps it). Then S3's G1 barrier conflicts with that entry: S2
 * truncates it and rolls its configuration back, which reads the committed
 * configuration entry (B5: NULL if compacted, G6 keeps it). */
static int scenario_rollback(void)
{
    static struct raft_change chg;
    struct cl_op op;
    struct raft *s1, *s2, *s3;
    raft_index s2_cfg, s2_offset, cfg_idx;
    raft_time end;
    char extra[256];
    int l, nl, rv;
    unsigned i;

    cl_set_snapshot(&C, 16, 4);
    C.quiet = getenv("REGRESS_VERBOSE") == NULL;
    cl_init(&C, RB_N, RB_N);
    l = cl_wait_ready(&C, 10000);
    if (l != 0) {
        /* cl_init elects the first server to time out: S1. */
        setup_error("S1 is not the first leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    for (i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof key, "r%u", i);
        if (cl_claim(&C, 0, &op, key, i + 1) != 0 ||
            !cl_wait_op(&C, &op, 5000) || op.status != 0) {
            setup_error("claims on S1");
            cl_close(&C);
            return EXIT_SETUP;
        }
    }
    s1 = cl_raft(&C, 0);
    s2 = cl_raft(&C, 1);
    cl_wait_applied(&C, raft_last_index(s1), 5000);
    cl_step_ms(&C, 500);
    s2_cfg = s2->configuration_index;
    s2_offset = s2->log.offset;
    printf(
        "rollback: S2 configuration_index=%llu log offset=%llu "
        "(committed config entry %s in the log), snapshots taken %llu\n",
        (unsigned long long)s2_cfg, (unsigned long long)s2_offset,
        s2_offset < s2_cfg ? "still" : "NOT",
        (unsigned long long)C.s[1].rep.stats.snapshots_taken);

    for (i = 2; i < RB_N; i++) {
        raft_fixture_disconnect(&C.f, 0, i);
        raft_fixture_disconnect(&C.f, i, 0);
    }
    rv = raft_add(s1, &chg, 6, "6", rb_change_cb);
    if (rv != 0) {
        setup_error("raft_add on S1");
        cl_close(&C);
        return EXIT_SETUP;
    }
    cl_step_ms(&C, 200);
    cfg_idx = s2->configuration_uncommitted_index;
    printf("rollback: S2 uncommitted config index=%llu (S1 commit=%llu)\n",
           (unsigned long long)cfg_idx, (unsigned long long)s1->commit_index);
    if (cfg_idx == 0) {
        setup_error("S2 did not get the configuration change");
        cl_close(&C);
        return EXIT_SETUP;
    }

    /* S1 dies. With pre-vote on (as in production) S2, whose log is
     * longer, would win the election; it must lose, so its messages to
     * S3..S5 are dropped until one of them leads. That leader's first
     * heartbeat (sent on election, before its G1 barrier) reaches S2, and
     * S2's answer goes through again. */
    raft_fixture_kill(&C.f, 0);
    for (i = 2; i < RB_N; i++) {
        raft_fixture_disconnect(&C.f, 1, i);
    }
    cl_wait_no_leader(&C, 5000);
    nl = rb_wait_leader_among(2, RB_N, 10000);
    for (i = 2; i < RB_N; i++) {
        raft_fixture_reconnect(&C.f, 1, i);
    }
    if (nl < 0) {
        for (i = 0; i < RB_N; i++) {
            struct raft *r = cl_raft(&C, i);
            printf(
                "rollback: S%u state=%d term=%llu last_index=%llu "
                "alive=%d\n",
                i + 1, r->state, (unsigned long long)r->current_term,
                (unsigned long long)raft_last_index(r), C.f.servers[i].alive);
        }
        setup_error("none of S3..S5 became leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    s3 = cl_raft(&C, (unsigned)nl); /* the new leader, usually S3 */
    printf(
        "rollback: S%d leader of term %llu, last index %llu; stepping "
        "(S2 must truncate index %llu and roll back)\n",
        nl + 1, (unsigned long long)s3->current_term,
        (unsigned long long)raft_last_index(s3), (unsigned long long)cfg_idx);
    fflush(stdout); /* a crash in the rollback comes next */
    end = raft_fixture_time(&C.f) + 3000;
    while (raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
        for (i = 1; i < RB_N; i++) {
            if (i != (unsigned)nl) {
                rb_check_match((unsigned)nl, i);
            }
        }
    }
    printf(
        "rollback: S2 config n=%u uncommitted=%llu applied=%llu "
        "last_index=%llu, entry %llu term %llu (leader's: %llu); leader "
        "thinks S2 match_index=%llu, leader commit=%llu\n",
        s2->configuration.n,
        (unsigned long long)s2->configuration_uncommitted_index,
        (unsigned long long)s2->last_applied,
        (unsigned long long)raft_last_index(s2), (unsigned long long)cfg_idx,
        (unsigned long long)guard_term_of(s2, cfg_idx),
        (unsigned long long)guard_term_of(s3, cfg_idx),
        (unsigned long long)s3->leader_state.progress[1].match_index,
        (unsigned long long)s3->commit_index);
    if (!violated && s3->state == RAFT_LEADER &&
        guard_term_of(s2, cfg_idx) != guard_term_of(s3, cfg_idx) &&
        s3->commit_index >= cfg_idx) {
        violation(
            "S2 keeps a conflicting entry at index %llu (term %llu, "
            "leader's term %llu) after it was committed",
            (unsigned long long)cfg_idx,
            (unsigned long long)guard_term_of(s2, cfg_idx),
            (unsigned long long)guard_term_of(s3, cfg_idx));
    }
    if (!violated && s2->configuration.n != RB_N) {
        violation(
            "S2's configuration has %u servers after the rollback, "
            "want %u",
            s2->configuration.n, RB_N);
    }
    if (!violated && C.violation) {
        violation("%s", C.violation_msg);
    }
    check_applied();
    snprintf(extra, sizeof extra,
             "cfg_idx=%llu s2_match=%llu g7_clamped=%llu g2_dropped=%llu",
             (unsigned long long)cfg_idx,
             (unsigned long long)s3->leader_state.progress[1].match_index,
             (unsigned long long)sum_g7(), (unsigned long long)sum_g2());
    cl_close(&C);
    return finish(extra);
}

/* --- stale-reply: B13 through the asynchronous append reply (G9) -----------
 */

#define SR_N       5
#define SR_OLD     10  /* entries of the old term only S2 gets */
#define SR_DISK_MS 800 /* S2's write of them */
#define SR_ACK_KEY "ack"

static void sr_apply_cb(struct raft_apply *req, int status, void *result)
{
    (void)status;
    (void)result;
    free(req);
}

/* One raft_apply of SR_OLD framed claims at server @l (bypassing the
 * pipeline, so that they go out as one AppendEntries and one write). */
static int sr_apply_old(unsigned l)
{
    struct raft_buffer bufs[SR_OLD];
    struct raft_apply *req = calloc(1, sizeof *req);
    unsigned k;

    if (req == NULL) {
        return -1;
    }
    for (k = 0; k < SR_OLD; k++) {
        struct raft_entry e;
        struct fsm_claim cl;
        struct fsm_cmd cmd;
        char key[16];

        snprintf(key, sizeof key, "old%u", k);
        cmd = cl_claim_cmd(&cl, key, 100 + k);
        if (make_entry(&cmd, raft_fixture_time(&C.f) + CL_WALL0, 0, &e) != 0) {
            break;
        }
        bufs[k] = e.buf;
    }
    if (k == SR_OLD &&
        raft_apply(cl_raft(&C, l), req, bufs, SR_OLD, sr_apply_cb) == 0) {
        return 0; /* raft owns the buffers */
    }
    while (k-- > 0) {
        raft_free(bufs[k].base);
    }
    free(req);
    return -1;
}

static uint64_t sum_g9(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < C.n; i++) {
        n += C.s[i].rep.rio.stats.g9_dropped;
    }
    return n;
}

/* Server i's election timeout from now on: the fixture's value takes
 * effect only when raft draws a new one, so also set the one running. */
static void sr_set_timeout(unsigned i, unsigned ms)
{
    struct raft *r = cl_raft(&C, i);

    raft_fixture_set_randomized_election_timeout(&C.f, i, ms);
    if (r->state == RAFT_FOLLOWER) {
        r->follower_state.randomized_election_timeout = ms;
    } else if (r->state == RAFT_CANDIDATE) {
        r->candidate_state.randomized_election_timeout = ms;
    }
}

/* None of S3..S5 follows a leader any more (S1 is cut off from them). */
static bool sr_all_lost_leader(void)
{
    for (unsigned i = 2; i < SR_N; i++) {
        struct raft *r = cl_raft(&C, i);
        if (r->state == RAFT_FOLLOWER &&
            r->follower_state.current_leader.id != 0) {
            return false;
        }
    }
    return true;
}

static bool sr_has_claim(unsigned i, const char *key)
{
    return C.f.servers[i].alive && C.s[i].rep.fsm != NULL &&
           cl_local_lookup(&C, i, key) == FSM_FOUND;
}

/* The reviewer's schedule. Entries up to N are committed everywhere. S1
 * leads term T, cut off from S3..S5, and sends N+1..N+10 (term T) to S2,
 * whose disk is slow; S1 dies. L (one of S3..S5) wins term T+1; its first
 * heartbeat (prev N) moves S2 to term T+1, then L's messages to S2 are cut,
 * so S2 never sees L's entries. L's G1 barrier (N+1) commits with F and X
 * (the other two of S3..S5), X is cut off, and a claim at N+2 reaches L and
 * F only. Then S2's old write completes: 0.15 answers it, to L, with
 * last_log_index N+10 (B13), L counts S2 as matching N+2 and commits and
 * acknowledges the claim with L, F and S2. G9 drops that answer. Then L
 * and F die, S1 comes back and X is reconnected: X (log ends N+1, term
 * T+1) is the only one that can win and overwrites N+2; without G9 that
 * loses the acknowledged claim, with G9 the claim was never acknowledged.
 * (Had L reached S2 again first, 0.15 would have repaired S2's log: the
 * false match is a window, the loss needs L and F to fail in it.) */
static int scenario_stale_reply(void)
{
    struct cl_op op;
    struct raft *s1, *s2, *lr;
    raft_index n_idx, ack_idx = 0;
    raft_term t_old;
    raft_time end;
    char extra[320];
    unsigned i, lf, xf, fl;
    int l, nl;
    bool acked, lost, s2_wrote = false;

    C.quiet = getenv("REGRESS_VERBOSE") == NULL;
    cl_init(&C, SR_N, SR_N);
    l = cl_wait_ready(&C, 10000);
    if (l != 0) {
        setup_error("S1 is not the first leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    for (i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof key, "c%u", i);
        if (cl_claim(&C, 0, &op, key, i + 1) != 0 ||
            !cl_wait_op(&C, &op, 5000) || op.status != 0) {
            setup_error("claims on S1");
            cl_close(&C);
            return EXIT_SETUP;
        }
    }
    s1 = cl_raft(&C, 0);
    s2 = cl_raft(&C, 1);
    n_idx = raft_last_index(s1);
    if (!cl_wait_applied(&C, n_idx, 5000)) {
        setup_error("N not applied everywhere");
        cl_close(&C);
        return EXIT_SETUP;
    }
    t_old = s1->current_term;

    /* S1 leads term T with only S2; S2's disk is slow for this write. S2
     * must not campaign (its log is the longest, B7), nor time out while it
     * waits: that would leave the follower state the reply needs. */
    for (i = 2; i < SR_N; i++) {
        raft_fixture_disconnect(&C.f, 0, i);
        raft_fixture_disconnect(&C.f, i, 0);
    }
    sr_set_timeout(1, 60000);
    /* The old write must end while the new leader still counts S2 and X as
     * in contact (0.15's leader steps down after an election timeout
     * without a majority): so S1 sends the old entries only when S3..S5
     * all lost S1 and the next pre-vote among them wins. */
    end = raft_fixture_time(&C.f) + 5000;
    while (!sr_all_lost_leader() && raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    if (!sr_all_lost_leader() || s1->state != RAFT_LEADER) {
        setup_error("S3..S5 did not time out (or S1 lost leadership)");
        cl_close(&C);
        return EXIT_SETUP;
    }
    raft_fixture_set_disk_latency(&C.f, 1, SR_DISK_MS);
    if (sr_apply_old(0) != 0) {
        setup_error("raft_apply on S1");
        cl_close(&C);
        return EXIT_SETUP;
    }
    end = raft_fixture_time(&C.f) + 1000;
    while (raft_last_index(s2) < n_idx + SR_OLD &&
           raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    raft_fixture_set_disk_latency(&C.f, 1, 10);
    if (raft_last_index(s2) != n_idx + SR_OLD || s2->last_stored != n_idx) {
        setup_error("S2 did not get the old entries (or stored them)");
        cl_close(&C);
        return EXIT_SETUP;
    }
    raft_fixture_kill(&C.f, 0);
    printf(
        "stale-reply: N=%llu; S1 (term %llu) sent %llu..%llu to S2 only, "
        "S2 writing them for %u ms; S1 killed\n",
        (unsigned long long)n_idx, (unsigned long long)t_old,
        (unsigned long long)n_idx + 1, (unsigned long long)n_idx + SR_OLD,
        SR_DISK_MS);

    nl = rb_wait_leader_among(2, SR_N, 10000);
    if (nl < 0) {
        setup_error("none of S3..S5 became leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    lf = (unsigned)nl;
    lr = cl_raft(&C, lf);
    fl = lf == 2 ? 3 : 2;     /* F: stays with L */
    xf = 2 + 3 + 4 - lf - fl; /* X: cut off after the barrier */
    /* L's first heartbeat reaches S2; then L's messages to S2 are cut
     * (its barrier goes out only once S2's answer arrived: probe mode). */
    end = raft_fixture_time(&C.f) + 1000;
    while (!(s2->current_term == lr->current_term &&
             s2->follower_state.current_leader.id == lr->id) &&
           raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    if (s2->current_term != lr->current_term) {
        setup_error("S2 did not hear the new leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    raft_fixture_disconnect(&C.f, lf, 1);
    sr_set_timeout(xf, 60000);
    printf(
        "stale-reply: S%u leader of term %llu (F=S%u, X=S%u); S2 moved to "
        "term %llu with last_stored %llu, last index %llu\n",
        lf + 1, (unsigned long long)lr->current_term, fl + 1, xf + 1,
        (unsigned long long)s2->current_term,
        (unsigned long long)s2->last_stored,
        (unsigned long long)raft_last_index(s2));
    end = raft_fixture_time(&C.f) + 2000;
    while (!replica_ready(&C.s[lf].rep) && raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    if (!replica_ready(&C.s[lf].rep) ||
        cl_raft(&C, xf)->last_stored < n_idx + 1) {
        setup_error("the new leader's barrier did not commit with F and X");
        cl_close(&C);
        return EXIT_SETUP;
    }
    raft_fixture_disconnect(&C.f, lf, xf);
    raft_fixture_disconnect(&C.f, xf, lf);
    if (cl_claim(&C, lf, &op, SR_ACK_KEY, 7) != 0) {
        setup_error("claim on the new leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    end = raft_fixture_time(&C.f) + 1000;
    while (!(lr->last_stored >= n_idx + 2 &&
             cl_raft(&C, fl)->last_stored >= n_idx + 2) &&
           raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    ack_idx = raft_last_index(lr);
    if (ack_idx < n_idx + 2 || cl_raft(&C, fl)->last_stored < n_idx + 2 ||
        s2->last_stored != n_idx) {
        setup_error("the claim did not reach L and F before S2's write ended");
        cl_close(&C);
        return EXIT_SETUP;
    }
    printf(
        "stale-reply: claim at index %llu on S%u and S%u (commit %llu); "
        "waiting for S2's old write\n",
        (unsigned long long)ack_idx, lf + 1, fl + 1,
        (unsigned long long)lr->commit_index);

    /* S2's old write completes; its answer reaches L (S2 -> L is up). */
    end = raft_fixture_time(&C.f) + SR_DISK_MS + 1000;
    while (raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
        if (!s2_wrote && s2->last_stored >= n_idx + SR_OLD) {
            s2_wrote = true;
            end = raft_fixture_time(&C.f) + 300;
        }
        rb_check_match(lf, 1);
    }
    acked = op.done && op.status == 0 && op.outcome == FSM_ACCEPTED;
    printf(
        "stale-reply: S2's old write %s (last_stored %llu, term %llu); "
        "S%u thinks S2 matches %llu, commit %llu, claim %s\n",
        s2_wrote ? "completed" : "did not complete",
        (unsigned long long)s2->last_stored,
        (unsigned long long)s2->current_term, lf + 1,
        (unsigned long long)(lr->state == RAFT_LEADER
                                 ? lr->leader_state.progress[1].match_index
                                 : 0),
        (unsigned long long)lr->commit_index,
        acked ? "acknowledged" : "not acknowledged");

    /* L and F fail; S1 comes back, X is reconnected. */
    raft_fixture_kill(&C.f, lf);
    raft_fixture_kill(&C.f, fl);
    raft_fixture_revive(&C.f, 0);
    for (i = 2; i < SR_N; i++) {
        if (i != lf && i != fl) {
            raft_fixture_reconnect(&C.f, 0, i);
            raft_fixture_reconnect(&C.f, i, 0);
        }
    }
    cl_reconnect_all(&C, xf);
    sr_set_timeout(0, 2000);
    sr_set_timeout(1, 1100);
    sr_set_timeout(xf, 1300);
    nl = -1;
    end = raft_fixture_time(&C.f) + 15000;
    while (raft_fixture_time(&C.f) < end && nl < 0) {
        raft_fixture_step(&C.f);
        for (i = 0; i < SR_N; i++) {
            /* (S1, revived, still thinks it leads term T at first) */
            if (C.f.servers[i].alive && replica_ready(&C.s[i].rep) &&
                cl_raft(&C, i)->current_term > lr->current_term) {
                nl = (int)i;
            }
        }
    }
    if (nl < 0) {
        for (i = 0; i < SR_N; i++) {
            struct raft *r = cl_raft(&C, i);
            printf(
                "stale-reply: S%u state=%d term=%llu last_index=%llu "
                "last term=%llu alive=%d ready=%d\n",
                i + 1, r->state, (unsigned long long)r->current_term,
                (unsigned long long)raft_last_index(r),
                (unsigned long long)guard_term_of(r, raft_last_index(r)),
                C.f.servers[i].alive, replica_ready(&C.s[i].rep));
        }
        setup_error("no ready leader among S1, S2, X");
        cl_close(&C);
        return EXIT_SETUP;
    }
    cl_step_ms(&C, 1000);
    printf(
        "stale-reply: S%d leads term %llu; claim of %s on: S1 %d, S2 %d, "
        "S%u %d\n",
        nl + 1, (unsigned long long)cl_raft(&C, (unsigned)nl)->current_term,
        SR_ACK_KEY, sr_has_claim(0, SR_ACK_KEY), sr_has_claim(1, SR_ACK_KEY),
        xf + 1, sr_has_claim(xf, SR_ACK_KEY));
    lost = acked && !sr_has_claim((unsigned)nl, SR_ACK_KEY);
    if (lost) {
        violation(
            "acknowledged claim of %s (index %llu) lost: the leader S%d "
            "of term %llu does not have it",
            SR_ACK_KEY, (unsigned long long)ack_idx, nl + 1,
            (unsigned long long)cl_raft(&C, (unsigned)nl)->current_term);
    }
    if (!violated && C.violation) {
        violation("%s", C.violation_msg);
    }
    check_applied();
    snprintf(extra, sizeof extra,
             "claim_idx=%llu acked=%d lost=%d s2_wrote=%d g9_dropped=%llu "
             "g7_clamped=%llu g2_dropped=%llu",
             (unsigned long long)ack_idx, acked, lost, s2_wrote,
             (unsigned long long)sum_g9(), (unsigned long long)sum_g7(),
             (unsigned long long)sum_g2());
    cl_close(&C);
    return finish(extra);
}

/* --- install-rollback: B5 on the InstallSnapshot path (G6b) ---------------
 */

#define IR_N 5

static bool ir_in_config(const struct raft *r, raft_id id)
{
    for (unsigned k = 0; k < r->configuration.n; k++) {
        if (r->configuration.servers[k].id == id) {
            return true;
        }
    }
    return false;
}

/* S2 is cut off while S1 runs claims (snapshots every 16, trailing 4): the
 * leader's own refresh of the configuration (member.c: add and remove a
 * spare) moves the committed configuration entry forward, so G6 lets S1
 * compact past S2's log. S2 comes back and gets an InstallSnapshot: its
 * configuration_index is now the snapshot's, an entry its log does not
 * have. Then as in rollback: a configuration change only S2 gets, S1 dies,
 * a leader among S3..S5 overwrites it, and 0.15's membershipRollback reads
 * the committed configuration entry from the log (B5: NULL). G6b fail-stops
 * S2 (the fatal hook; the harness kills it) before raft sees that
 * AppendEntries. */
static int scenario_install_rollback(void)
{
    static struct raft_change chg;
    struct cl_op op;
    struct raft *s1, *s2, *nr;
    raft_index s2_last, cfg_idx;
    raft_time end;
    char extra[320];
    unsigned i, k;
    int l, nl;
    bool ready = false;

    cl_set_snapshot(&C, 16, 4);
    C.quiet = getenv("REGRESS_VERBOSE") == NULL;
    cl_init(&C, IR_N, IR_N);
    l = cl_wait_ready(&C, 10000);
    if (l != 0) {
        setup_error("S1 is not the first leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    s1 = cl_raft(&C, 0);
    s2 = cl_raft(&C, 1);
    cl_disconnect_all(&C, 1);
    raft_fixture_set_randomized_election_timeout(&C.f, 1, 60000);
    s2_last = raft_last_index(s2);
    /* Claims until S1's committed configuration is past S2's log, S1 took
     * a snapshot after it, and its log starts after S2's last entry. */
    for (k = 0; k < 400 && !ready; k++) {
        char key[16];
        snprintf(key, sizeof key, "i%u", k);
        if (cl_claim(&C, 0, &op, key, k + 1) != 0 ||
            !cl_wait_op(&C, &op, 5000) || op.status != 0) {
            setup_error("claims on S1");
            cl_close(&C);
            return EXIT_SETUP;
        }
        ready = s1->configuration_uncommitted_index == 0 &&
                !ir_in_config(s1, REPLICA_REFRESH_ID) &&
                s1->configuration_index > s2_last &&
                s1->log.snapshot.last_index > s1->configuration_index &&
                s1->log.offset > s2_last && C.s[0].rep.member == NULL;
    }
    if (!ready) {
        setup_error("S1 did not compact past S2's log");
        cl_close(&C);
        return EXIT_SETUP;
    }
    printf(
        "install-rollback: S1 configuration_index=%llu snapshot=%llu log "
        "offset=%llu (refreshes %llu); S2 cut off at last index %llu\n",
        (unsigned long long)s1->configuration_index,
        (unsigned long long)s1->log.snapshot.last_index,
        (unsigned long long)s1->log.offset,
        (unsigned long long)C.s[0].rep.config_refreshes,
        (unsigned long long)s2_last);

    cl_reconnect_all(&C, 1);
    raft_fixture_set_randomized_election_timeout(&C.f, 1, 1100);
    if (!cl_wait_applied(&C, raft_last_index(s1), 10000)) {
        setup_error("S2 did not catch up");
        cl_close(&C);
        return EXIT_SETUP;
    }
    cl_step_ms(&C, 300);
    printf(
        "install-rollback: S2 restored %llu snapshot(s); configuration_index"
        "=%llu, log offset=%llu, last index %llu (configuration entry %s "
        "the log)\n",
        (unsigned long long)C.s[1].rep.stats.snapshots_restored,
        (unsigned long long)s2->configuration_index,
        (unsigned long long)s2->log.offset,
        (unsigned long long)raft_last_index(s2),
        s2->configuration_index > s2->log.offset ? "in" : "NOT in");
    if (C.s[1].rep.stats.snapshots_restored == 0 ||
        s2->configuration_index > s2->log.offset) {
        setup_error("S2 did not install a snapshot past its configuration");
        cl_close(&C);
        return EXIT_SETUP;
    }

    /* A configuration change only S2 gets. */
    for (i = 2; i < IR_N; i++) {
        raft_fixture_disconnect(&C.f, 0, i);
        raft_fixture_disconnect(&C.f, i, 0);
    }
    if (raft_add(s1, &chg, 7, "7", rb_change_cb) != 0) {
        setup_error("raft_add on S1");
        cl_close(&C);
        return EXIT_SETUP;
    }
    cl_step_ms(&C, 200);
    cfg_idx = s2->configuration_uncommitted_index;
    printf(
        "install-rollback: S2 uncommitted config index=%llu "
        "(configuration_index %llu, log offset %llu)\n",
        (unsigned long long)cfg_idx,
        (unsigned long long)s2->configuration_index,
        (unsigned long long)s2->log.offset);
    if (cfg_idx == 0 || s2->configuration_index > s2->log.offset) {
        setup_error("S2 did not get the change (or has its predecessor)");
        cl_close(&C);
        return EXIT_SETUP;
    }

    /* As rollback: S1 dies, S2 must lose the election. */
    raft_fixture_kill(&C.f, 0);
    for (i = 2; i < IR_N; i++) {
        raft_fixture_disconnect(&C.f, 1, i);
    }
    cl_wait_no_leader(&C, 5000);
    nl = rb_wait_leader_among(2, IR_N, 10000);
    for (i = 2; i < IR_N; i++) {
        raft_fixture_reconnect(&C.f, 1, i);
    }
    if (nl < 0) {
        setup_error("none of S3..S5 became leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    nr = cl_raft(&C, (unsigned)nl);
    printf(
        "install-rollback: S%d leader of term %llu, last index %llu; "
        "stepping (S2 must truncate index %llu and roll back)\n",
        nl + 1, (unsigned long long)nr->current_term,
        (unsigned long long)raft_last_index(nr), (unsigned long long)cfg_idx);
    fflush(stdout); /* a crash in the rollback comes next */
    end = raft_fixture_time(&C.f) + 3000;
    while (raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
        for (i = 1; i < IR_N; i++) {
            if (i != (unsigned)nl) {
                rb_check_match((unsigned)nl, i);
            }
        }
    }
    if (C.s[1].fatal_hits > 0) {
        printf("install-rollback: S2 fail-stopped (G6b): %s: %s\n",
               C.s[1].fatal_what, C.s[1].fatal_msg);
    } else {
        printf(
            "install-rollback: S2 config n=%u uncommitted=%llu last index "
            "%llu, entry %llu term %llu (leader's %llu)\n",
            s2->configuration.n,
            (unsigned long long)s2->configuration_uncommitted_index,
            (unsigned long long)raft_last_index(s2),
            (unsigned long long)cfg_idx,
            (unsigned long long)guard_term_of(s2, cfg_idx),
            (unsigned long long)guard_term_of(nr, cfg_idx));
    }
    for (i = 0; i < IR_N; i++) {
        if (i != 1 && C.s[i].fatal_hits > 0) {
            violation("S%u fail-stopped too: %s: %s", i + 1, C.s[i].fatal_what,
                      C.s[i].fatal_msg);
        }
    }
    if (!violated && nr->state != RAFT_LEADER) {
        violation("S%d lost leadership", nl + 1);
    }
    if (!violated && C.s[1].fatal_hits == 0 && C.f.servers[1].alive &&
        ir_in_config(s2, 7)) {
        /* Without the stop (and no crash), S2 must have rolled back. */
        violation("S2 still has the rolled-back configuration change");
    }
    if (!violated && C.violation) {
        violation("%s", C.violation_msg);
    }
    check_applied();
    snprintf(extra, sizeof extra,
             "cfg_idx=%llu s2_snapshots_restored=%llu s2_fatal=%u "
             "g6_stops=%llu",
             (unsigned long long)cfg_idx,
             (unsigned long long)C.s[1].rep.stats.snapshots_restored,
             C.s[1].fatal_hits,
             (unsigned long long)C.s[1].rep.rio.stats.g6_stops);
    cl_close(&C);
    return finish(extra);
}

/* --- starvation: B3 ---------------------------------------------------------
 */

#define ST_PERIOD_MS 5
#define ST_LOAD_MS   3000
#define ST_MAX       (ST_LOAD_MS / ST_PERIOD_MS + 16)
/* In pipeline mode every command must be acknowledged within this. */
#define ST_LATENCY_MAX_MS 1000

struct st_raw
{
    struct raft_apply req;
    raft_time t_invoke;
};

static unsigned st_acked, st_acked_load;
static raft_time st_lat_max, st_first_ack;
static bool st_in_load;

static void st_ack(raft_time t_invoke)
{
    raft_time now = raft_fixture_time(&C.f);

    st_acked++;
    if (st_in_load) {
        st_acked_load++;
    }
    if (st_first_ack == 0) {
        st_first_ack = now;
    }
    if (now - t_invoke > st_lat_max) {
        st_lat_max = now - t_invoke;
    }
}

static void st_raw_cb(struct raft_apply *req, int status, void *result)
{
    struct st_raw *a = req->data;

    (void)result;
    if (status == 0) {
        st_ack(a->t_invoke);
    }
    free(a);
}

/* One raft_apply per command, bypassing the pipeline (what B3 starves). */
static int st_raw_submit(unsigned l, unsigned k)
{
    struct st_raw *a = calloc(1, sizeof *a);
    struct raft_entry e;
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    char key[16];
    int rv;

    if (a == NULL) {
        return -1;
    }
    snprintf(key, sizeof key, "s%u", k);
    cmd = cl_claim_cmd(&cl, key, k + 1);
    if (make_entry(&cmd, raft_fixture_time(&C.f) + CL_WALL0, 0, &e) != 0) {
        free(a);
        return -1;
    }
    a->req.data = a;
    a->t_invoke = raft_fixture_time(&C.f);
    rv = raft_apply(cl_raft(&C, l), &a->req, &e.buf, 1, st_raw_cb);
    if (rv != 0) {
        raft_free(e.buf.base);
        free(a);
        return -1;
    }
    return 0;
}

static int scenario_starvation(void)
{
    static struct cl_op ops[ST_MAX];
    raft_time start, next;
    raft_index commit_load, stored_load;
    unsigned submitted = 0, k, in_pipe_acked = 0;
    char extra[256];
    struct raft *r;
    int l;

    C.quiet = getenv("REGRESS_VERBOSE") == NULL;
    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    if (l < 0) {
        setup_error("no ready leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    r = cl_raft(&C, (unsigned)l);
    start = raft_fixture_time(&C.f);
    next = start;
    st_in_load = true;
    while (raft_fixture_time(&C.f) - start < ST_LOAD_MS) {
        while (raft_fixture_time(&C.f) >= next && submitted < ST_MAX) {
            char key[16];
            int rv;

            if (O.raw) {
                rv = st_raw_submit((unsigned)l, submitted);
            } else {
                snprintf(key, sizeof key, "s%u", submitted);
                rv = cl_claim(&C, (unsigned)l, &ops[submitted], key,
                              submitted + 1);
            }
            if (rv != 0) {
                setup_error("submit refused");
                cl_close(&C);
                return EXIT_SETUP;
            }
            submitted++;
            next += ST_PERIOD_MS;
        }
        raft_fixture_step(&C.f);
        if (!O.raw) {
            /* Pipeline acks: count them as they arrive. */
            for (k = in_pipe_acked; k < submitted && ops[k].done; k++) {
                if (ops[k].status == 0) {
                    st_ack(ops[k].t_invoke);
                }
            }
            in_pipe_acked = k;
        }
    }
    st_in_load = false;
    commit_load = r->commit_index;
    stored_load = r->last_stored;
    printf(
        "starvation: load done: submitted=%u acked=%u last_stored=%llu "
        "commit=%llu\n",
        submitted, st_acked_load, (unsigned long long)r->last_stored,
        (unsigned long long)r->commit_index);
    /* Let it drain. */
    for (raft_time t0 = raft_fixture_time(&C.f);
         raft_fixture_time(&C.f) - t0 < 2000 && st_acked < submitted;) {
        raft_fixture_step(&C.f);
        if (!O.raw) {
            for (k = in_pipe_acked; k < submitted && ops[k].done; k++) {
                if (ops[k].status == 0) {
                    st_ack(ops[k].t_invoke);
                }
            }
            in_pipe_acked = k;
        }
    }
    if (st_acked_load == 0) {
        violation(
            "commit starvation: no command acknowledged during %u ms "
            "of load (%u submitted, one every %u ms); leader commit "
            "was %llu at its end, last_stored %llu",
            ST_LOAD_MS, submitted, ST_PERIOD_MS,
            (unsigned long long)commit_load, (unsigned long long)stored_load);
    } else if (st_lat_max > ST_LATENCY_MAX_MS) {
        violation(
            "commit starvation: a command waited %llu ms for its "
            "acknowledgement (limit %u ms)",
            (unsigned long long)st_lat_max, ST_LATENCY_MAX_MS);
    } else if (st_acked < submitted) {
        violation("only %u of %u commands acknowledged after the load",
                  st_acked, submitted);
    }
    if (!violated && C.violation) {
        violation("%s", C.violation_msg);
    }
    if (!violated && !cl_same_applied(&C)) {
        violation("%s", C.violation_msg);
    }
    snprintf(extra, sizeof extra,
             "submitted=%u acked_during_load=%u acked_total=%u "
             "max_latency_ms=%llu batches=%llu",
             submitted, st_acked_load, st_acked, (unsigned long long)st_lat_max,
             (unsigned long long)C.s[l].rep.stats.batches);
    cl_close(&C);
    return finish(extra);
}

/* --- driver ------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: regress SCENARIO [--off LIST] [--raw] [--disk-ms N] "
            "[--window]\n"
            "  SCENARIO    figure8 | rollback | stale-reply | "
            "install-rollback |\n"
            "              starvation\n"
            "  --off LIST  guards to switch off, e.g. g1,g2 (g1 g2 g4 g5 g6 "
            "g7 g8 g9)\n"
            "  --raw       starvation: one raft_apply per command, bypassing "
            "the\n"
            "              pipeline (the guard against B3 is the pipeline)\n"
            "  --disk-ms N figure8: disk latency of the first leader S1\n"
            "  --window    figure8: the schedule where G1 alone is not "
            "enough\n"
            "              (use with --disk-ms 200): S4 cut off from S1, S2 "
            "cut\n"
            "              off right after S1's first heartbeat\n"
            "exit: 0 no violation, 1 violation (or crash), 2 usage/setup "
            "error\n");
}

static int scenario_rc = EXIT_SETUP;

static int run_scenario(void)
{
    if (strcmp(O.scenario, "figure8") == 0) {
        return scenario_figure8();
    }
    if (strcmp(O.scenario, "rollback") == 0) {
        return scenario_rollback();
    }
    if (strcmp(O.scenario, "stale-reply") == 0) {
        return scenario_stale_reply();
    }
    if (strcmp(O.scenario, "install-rollback") == 0) {
        return scenario_install_rollback();
    }
    return scenario_starvation();
}

START_TEST(scenario_test)
{
    scenario_rc = run_scenario();
}
END_TEST

/* cluster.c asserts with Check (even a passing ck_assert reports to the
 * runner), so the scenario runs as a Check test, in this (already forked)
 * process: CK_NOFORK. A failing harness assertion is a setup error. */
static int run_child(void)
{
    Suite *s;
    TCase *tc;
    SRunner *sr;
    int failed;

    guard_test_set_off(O.off);
    alarm(CHILD_TIMEOUT_S);
    /* No TAP/log output from this inner runner (the test environment sets
     * CK_TAP_LOG_FILE_NAME=-, which would print TAP to stdout). */
    unsetenv("CK_TAP_LOG_FILE_NAME");
    unsetenv("CK_LOG_FILE_NAME");
    unsetenv("CK_XML_LOG_FILE_NAME");
    unsetenv("CK_VERBOSITY");
    s = suite_create("regress");
    tc = tcase_create(O.scenario);
    tcase_add_test(tc, scenario_test);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    failed = srunner_ntests_failed(sr);
    if (failed > 0) {
        TestResult **tr = srunner_failures(sr);
        printf("setup error: harness assertion failed: %s:%d: %s\n",
               tr_lfile(tr[0]), tr_lno(tr[0]), tr_msg(tr[0]));
        fflush(stdout);
        free(tr);
        scenario_rc = EXIT_SETUP;
    }
    srunner_free(sr);
    return scenario_rc;
}

int main(int argc, char **argv)
{
    int status, rc;
    pid_t pid;

    O.off_list = "none";
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--off") == 0 && a + 1 < argc) {
            O.off_list = argv[++a];
            if (guard_test_parse(O.off_list, &O.off) != 0) {
                fprintf(stderr, "regress: unknown guard in \"%s\"\n",
                        O.off_list);
                return EXIT_SETUP;
            }
        } else if (strcmp(argv[a], "--raw") == 0) {
            O.raw = true;
        } else if (strcmp(argv[a], "--window") == 0) {
            O.window = true;
        } else if (strcmp(argv[a], "--disk-ms") == 0 && a + 1 < argc) {
            O.disk_ms = (unsigned)strtoul(argv[++a], NULL, 10);
        } else if (strcmp(argv[a], "--help") == 0 ||
                   strcmp(argv[a], "-h") == 0) {
            usage(stdout);
            return EXIT_CLEAN;
        } else if (argv[a][0] != '-' && O.scenario == NULL) {
            O.scenario = argv[a];
        } else {
            usage(stderr);
            return EXIT_SETUP;
        }
    }
    if (O.scenario == NULL || (strcmp(O.scenario, "figure8") != 0 &&
                               strcmp(O.scenario, "rollback") != 0 &&
                               strcmp(O.scenario, "stale-reply") != 0 &&
                               strcmp(O.scenario, "install-rollback") != 0 &&
                               strcmp(O.scenario, "starvation") != 0)) {
        usage(stderr);
        return EXIT_SETUP;
    }
    if (O.off_list[0] == '\0') {
        O.off_list = "none";
    }

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        perror("regress: fork");
        return EXIT_SETUP;
    }
    if (pid == 0) {
        /* exit(), not _exit(): the sanitizers' leak check runs at exit. */
        exit(run_child());
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("regress: waitpid");
            return EXIT_SETUP;
        }
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (sig == SIGALRM) {
            printf("regress: scenario=%s off=%s result=TIMEOUT (over %d s)\n",
                   O.scenario, O.off_list, CHILD_TIMEOUT_S);
            return EXIT_SETUP;
        }
        /* Under ASan a SIGSEGV is reported by its handler, which aborts
         * (abort_on_error=1): signal 6 then stands for the segfault. */
        printf("VIOLATION: crash: signal %d (%s)\n", sig, strsignal(sig));
        printf("regress: scenario=%s off=%s%s result=VIOLATION crash=%d\n",
               O.scenario, O.off_list, O.raw ? " mode=raw" : "", sig);
        return EXIT_VIOLATION;
    }
    rc = WEXITSTATUS(status);
    if (rc != EXIT_CLEAN && rc != EXIT_VIOLATION) {
        printf("regress: scenario=%s off=%s result=ERROR exit=%d\n", O.scenario,
               O.off_list, rc);
        return EXIT_SETUP;
    }
    return rc;
}
