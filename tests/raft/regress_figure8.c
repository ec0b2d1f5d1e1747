/* tests/raft/regress_figure8.c: the Figure 8 scenario, B1 (G1, G2) (regress.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "common/crc32c.h"
#include "fsm/command.h"
#include "fsm_helpers.h"
#include "raft/entry.h"
#include "raft/guard.h"
#include "regress.h"

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

/* The state shared by the phases of scenario_figure8. */
static struct
{
    struct raft *s1;
    struct raft *s5;
    bool s1_applied;
    bool s5_leader;
    uint64_t g2_s1;
} F8;

/* Figure 8 (b): the persisted logs; then every server starts. */
static int f8_prepare(void)
{
    struct fsm_bootstrap *b = calloc(1, sizeof *b);
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    char errmsg[256];
    unsigned i;

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
    return 0;
}

/* (c) S5 down, S1 leads term 4 and may commit index 3. */
static int f8_s1_leads(void)
{
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
    F8.s1 = raft_fixture_get(&C.f, 0);
    printf("figure8: S1 leader of term %llu\n",
           (unsigned long long)F8.s1->current_term);
    if (O.window) {
        /* The G2 window: S2 gets S1's election heartbeat (which matches its
         * index 3 and is answered at once) but nothing after it, so S2
         * never stores S1's term-4 barrier; S3 stores 3 and the barrier.
         * While S1's own slow disk has not stored the barrier, last_stored
         * is the term-2 entry 3, and 0.15 commits it by counting S1, S2,
         * S3 (B1), though no term-4 entry is on a majority. */
        raft_time end = raft_fixture_time(&C.f) + 2000;
        bool cut = false;

        F8.s1_applied = false;
        while (raft_fixture_time(&C.f) < end && !F8.s1_applied) {
            raft_fixture_step(&C.f);
            if (!cut && cl_raft(&C, 1)->follower_state.current_leader.id == 1) {
                raft_fixture_disconnect(&C.f, 0, 1);
                cut = true;
            }
            F8.s1_applied = raft_last_applied(F8.s1) >= 3;
        }
    } else {
        F8.s1_applied = raft_fixture_step_until_applied(&C.f, 0, 3, 2000);
    }
    F8.g2_s1 = C.s[0].rep.rio.stats.g2_dropped;
    printf(
        "figure8: S1 %s index 3: commit=%llu last_applied=%llu "
        "last_stored=%llu (G2 dropped %llu, G1 barriers %llu)\n",
        F8.s1_applied ? "applied" : "did not apply",
        (unsigned long long)F8.s1->commit_index,
        (unsigned long long)F8.s1->last_applied,
        (unsigned long long)F8.s1->last_stored, (unsigned long long)F8.g2_s1,
        (unsigned long long)C.s[0].rep.stats.g1_barriers);
    return 0;
}

/* (d) S1 crashes; S5 comes back and campaigns. */
static int f8_s5_campaigns(void)
{
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
    F8.s5_leader =
        raft_fixture_step_until_state_is(&C.f, 4, RAFT_LEADER, 10000);
    cl_reconnect_all(&C, O.window ? 2 : 1);
    cl_reconnect_all(&C, 0);
    F8.s5 = raft_fixture_get(&C.f, 4);
    printf("figure8: S5 %s (term %llu)\n",
           F8.s5_leader ? "became leader" : "did not become leader",
           (unsigned long long)F8.s5->current_term);
    raft_fixture_step_until_elapsed(&C.f, 3000);
    return 0;
}

/* Every server's view, and whether they diverged. */
static int f8_verdict(void)
{
    char extra[256];
    unsigned i;

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
        O.window, O.disk_ms, F8.s1_applied, F8.s5_leader,
        (unsigned long long)sum_g2(),
        (unsigned long long)(C.s[0].rep.stats.g1_barriers +
                             C.s[4].rep.stats.g1_barriers));
    f8_close();
    return finish(extra);
}

/* Persisted state of Figure 8 (b), one index later because index 2 is the
 * FSM Bootstrap everybody has (term 1): S1, S2 hold index 3 from term 2 (a
 * claim of F8_KEY by request 1), S5 holds index 3 from term 3 (the same key
 * claimed by request 2); everybody has seen term 3. Then (c) S1 leads term
 * 4 with S5 down and (d) crashes; S5 comes back and tries to lead. */
int scenario_figure8(void)
{
    int rv;

    memset(&F8, 0, sizeof F8);
    if ((rv = f8_prepare()) != 0) {
        return rv;
    }
    if ((rv = f8_s1_leads()) != 0) {
        return rv;
    }
    if ((rv = f8_s5_campaigns()) != 0) {
        return rv;
    }
    return f8_verdict();
}
