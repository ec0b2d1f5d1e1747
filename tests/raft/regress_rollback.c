/* tests/raft/regress_rollback.c: the rollback scenarios, B13 false match (G7)
 * and B5 (G6, G6b) (regress.h). */
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

static bool rb_change_done;

static void rb_change_cb(struct raft_change *req, int status)
{
    (void)req;
    (void)status;
    rb_change_done = true;
}

/* --- rollback: B13 false match and B5 rollback ---------------------------
 */

#define RB_N 5

/* The state shared by the phases of scenario_rollback. */
static struct
{
    struct cl_op op;
    struct raft *s1;
    struct raft *s2;
    struct raft *s3;
    raft_index s2_cfg;
    raft_index s2_offset;
    raft_index cfg_idx;
    int nl;
} RB;

/* 40 claims on S1 (snapshots every 16, trailing 4). */
static int rb_fill(void)
{
    int l;
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
        if (cl_claim(&C, 0, &RB.op, key, i + 1) != 0 ||
            !cl_wait_op(&C, &RB.op, 5000) || RB.op.status != 0) {
            setup_error("claims on S1");
            cl_close(&C);
            return EXIT_SETUP;
        }
    }
    RB.s1 = cl_raft(&C, 0);
    RB.s2 = cl_raft(&C, 1);
    cl_wait_applied(&C, raft_last_index(RB.s1), 5000);
    cl_step_ms(&C, 500);
    RB.s2_cfg = RB.s2->configuration_index;
    RB.s2_offset = RB.s2->log.offset;
    printf(
        "rollback: S2 configuration_index=%llu log offset=%llu "
        "(committed config entry %s in the log), snapshots taken %llu\n",
        (unsigned long long)RB.s2_cfg, (unsigned long long)RB.s2_offset,
        RB.s2_offset < RB.s2_cfg ? "still" : "NOT",
        (unsigned long long)C.s[1].rep.stats.snapshots_taken);
    return 0;
}

/* S1, cut off from S3..S5, appends a configuration change only S2
 * gets. */
static int rb_change_on_s2(void)
{
    static struct raft_change chg;
    int rv;
    unsigned i;

    for (i = 2; i < RB_N; i++) {
        raft_fixture_disconnect(&C.f, 0, i);
        raft_fixture_disconnect(&C.f, i, 0);
    }
    rv = raft_add(RB.s1, &chg, 6, "6", rb_change_cb);
    if (rv != 0) {
        setup_error("raft_add on S1");
        cl_close(&C);
        return EXIT_SETUP;
    }
    cl_step_ms(&C, 200);
    RB.cfg_idx = RB.s2->configuration_uncommitted_index;
    printf("rollback: S2 uncommitted config index=%llu (S1 commit=%llu)\n",
           (unsigned long long)RB.cfg_idx,
           (unsigned long long)RB.s1->commit_index);
    if (RB.cfg_idx == 0) {
        setup_error("S2 did not get the configuration change");
        cl_close(&C);
        return EXIT_SETUP;
    }
    return 0;
}

/* S1 dies; one of S3..S5 leads (S2 must lose). */
static int rb_new_leader(void)
{
    unsigned i;

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
    RB.nl = rb_wait_leader_among(2, RB_N, 10000);
    for (i = 2; i < RB_N; i++) {
        raft_fixture_reconnect(&C.f, 1, i);
    }
    if (RB.nl < 0) {
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
    return 0;
}

/* S2 must truncate the change and roll back: the checks. */
static int rb_verdict(void)
{
    raft_time end;
    char extra[256];
    unsigned i;

    RB.s3 = cl_raft(&C, (unsigned)RB.nl); /* the new leader, usually S3 */
    printf(
        "rollback: S%d leader of term %llu, last index %llu; stepping "
        "(S2 must truncate index %llu and roll back)\n",
        RB.nl + 1, (unsigned long long)RB.s3->current_term,
        (unsigned long long)raft_last_index(RB.s3),
        (unsigned long long)RB.cfg_idx);
    fflush(stdout); /* a crash in the rollback comes next */
    end = raft_fixture_time(&C.f) + 3000;
    while (raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
        for (i = 1; i < RB_N; i++) {
            if (i != (unsigned)RB.nl) {
                rb_check_match((unsigned)RB.nl, i);
            }
        }
    }
    printf(
        "rollback: S2 config n=%u uncommitted=%llu applied=%llu "
        "last_index=%llu, entry %llu term %llu (leader's: %llu); leader "
        "thinks S2 match_index=%llu, leader commit=%llu\n",
        RB.s2->configuration.n,
        (unsigned long long)RB.s2->configuration_uncommitted_index,
        (unsigned long long)RB.s2->last_applied,
        (unsigned long long)raft_last_index(RB.s2),
        (unsigned long long)RB.cfg_idx,
        (unsigned long long)guard_term_of(RB.s2, RB.cfg_idx),
        (unsigned long long)guard_term_of(RB.s3, RB.cfg_idx),
        (unsigned long long)RB.s3->leader_state.progress[1].match_index,
        (unsigned long long)RB.s3->commit_index);
    if (!violated && RB.s3->state == RAFT_LEADER &&
        guard_term_of(RB.s2, RB.cfg_idx) != guard_term_of(RB.s3, RB.cfg_idx) &&
        RB.s3->commit_index >= RB.cfg_idx) {
        violation(
            "S2 keeps a conflicting entry at index %llu (term %llu, "
            "leader's term %llu) after it was committed",
            (unsigned long long)RB.cfg_idx,
            (unsigned long long)guard_term_of(RB.s2, RB.cfg_idx),
            (unsigned long long)guard_term_of(RB.s3, RB.cfg_idx));
    }
    if (!violated && RB.s2->configuration.n != RB_N) {
        violation(
            "S2's configuration has %u servers after the rollback, "
            "want %u",
            RB.s2->configuration.n, RB_N);
    }
    if (!violated && C.violation) {
        violation("%s", C.violation_msg);
    }
    check_applied();
    snprintf(extra, sizeof extra,
             "cfg_idx=%llu s2_match=%llu g7_clamped=%llu g2_dropped=%llu",
             (unsigned long long)RB.cfg_idx,
             (unsigned long long)RB.s3->leader_state.progress[1].match_index,
             (unsigned long long)sum_g7(), (unsigned long long)sum_g2());
    cl_close(&C);
    return finish(extra);
}

/* As rollback_probe: 40 entries (snapshots every 16, trailing 4, so the
 * bootstrap configuration entry gets compacted unless G6 keeps it), then S1,
 * cut off from S3..S5, appends a configuration change that only S2 gets;
 * S1 dies and S3 leads. S3's first heartbeat matches S2 at S3's last index;
 * 0.15 answers it with S2's last_stored, the uncommitted config entry (B13,
 * G7 clamps it). Then S3's G1 barrier conflicts with that entry: S2
 * truncates it and rolls its configuration back, which reads the committed
 * configuration entry (B5: NULL if compacted, G6 keeps it). */
int scenario_rollback(void)
{
    int rv;

    memset(&RB, 0, sizeof RB);
    if ((rv = rb_fill()) != 0) {
        return rv;
    }
    if ((rv = rb_change_on_s2()) != 0) {
        return rv;
    }
    if ((rv = rb_new_leader()) != 0) {
        return rv;
    }
    return rb_verdict();
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

/* The state shared by the phases of scenario_install_rollback. */
static struct
{
    struct cl_op op;
    struct raft *s1;
    struct raft *s2;
    struct raft *nr;
    raft_index s2_last;
    raft_index cfg_idx;
    int nl;
    bool ready;
} IR;

/* S2 cut off while S1 compacts past S2's log. */
static int ir_compact(void)
{
    unsigned k;
    int l;

    cl_set_snapshot(&C, 16, 4);
    C.quiet = getenv("REGRESS_VERBOSE") == NULL;
    cl_init(&C, IR_N, IR_N);
    l = cl_wait_ready(&C, 10000);
    if (l != 0) {
        setup_error("S1 is not the first leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    IR.s1 = cl_raft(&C, 0);
    IR.s2 = cl_raft(&C, 1);
    cl_disconnect_all(&C, 1);
    raft_fixture_set_randomized_election_timeout(&C.f, 1, 60000);
    IR.s2_last = raft_last_index(IR.s2);
    /* Claims until S1's committed configuration is past S2's log, S1 took
     * a snapshot after it, and its log starts after S2's last entry. */
    for (k = 0; k < 400 && !IR.ready; k++) {
        char key[16];
        snprintf(key, sizeof key, "i%u", k);
        if (cl_claim(&C, 0, &IR.op, key, k + 1) != 0 ||
            !cl_wait_op(&C, &IR.op, 5000) || IR.op.status != 0) {
            setup_error("claims on S1");
            cl_close(&C);
            return EXIT_SETUP;
        }
        IR.ready =
            IR.s1->configuration_uncommitted_index == 0 &&
            !ir_in_config(IR.s1, REPLICA_REFRESH_ID) &&
            IR.s1->configuration_index > IR.s2_last &&
            IR.s1->log.snapshot.last_index > IR.s1->configuration_index &&
            IR.s1->log.offset > IR.s2_last && C.s[0].rep.member == NULL;
    }
    if (!IR.ready) {
        setup_error("S1 did not compact past S2's log");
        cl_close(&C);
        return EXIT_SETUP;
    }
    printf(
        "install-rollback: S1 configuration_index=%llu snapshot=%llu log "
        "offset=%llu (refreshes %llu); S2 cut off at last index %llu\n",
        (unsigned long long)IR.s1->configuration_index,
        (unsigned long long)IR.s1->log.snapshot.last_index,
        (unsigned long long)IR.s1->log.offset,
        (unsigned long long)C.s[0].rep.config_refreshes,
        (unsigned long long)IR.s2_last);
    return 0;
}

/* S2 comes back and installs a snapshot past its configuration. */
static int ir_install(void)
{
    cl_reconnect_all(&C, 1);
    raft_fixture_set_randomized_election_timeout(&C.f, 1, 1100);
    if (!cl_wait_applied(&C, raft_last_index(IR.s1), 10000)) {
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
        (unsigned long long)IR.s2->configuration_index,
        (unsigned long long)IR.s2->log.offset,
        (unsigned long long)raft_last_index(IR.s2),
        IR.s2->configuration_index > IR.s2->log.offset ? "in" : "NOT in");
    if (C.s[1].rep.stats.snapshots_restored == 0 ||
        IR.s2->configuration_index > IR.s2->log.offset) {
        setup_error("S2 did not install a snapshot past its configuration");
        cl_close(&C);
        return EXIT_SETUP;
    }
    return 0;
}

/* A configuration change only S2 gets. */
static int ir_change_on_s2(void)
{
    static struct raft_change chg;
    unsigned i;

    /* A configuration change only S2 gets. */
    for (i = 2; i < IR_N; i++) {
        raft_fixture_disconnect(&C.f, 0, i);
        raft_fixture_disconnect(&C.f, i, 0);
    }
    if (raft_add(IR.s1, &chg, 7, "7", rb_change_cb) != 0) {
        setup_error("raft_add on S1");
        cl_close(&C);
        return EXIT_SETUP;
    }
    cl_step_ms(&C, 200);
    IR.cfg_idx = IR.s2->configuration_uncommitted_index;
    printf(
        "install-rollback: S2 uncommitted config index=%llu "
        "(configuration_index %llu, log offset %llu)\n",
        (unsigned long long)IR.cfg_idx,
        (unsigned long long)IR.s2->configuration_index,
        (unsigned long long)IR.s2->log.offset);
    if (IR.cfg_idx == 0 || IR.s2->configuration_index > IR.s2->log.offset) {
        setup_error("S2 did not get the change (or has its predecessor)");
        cl_close(&C);
        return EXIT_SETUP;
    }
    return 0;
}

/* S1 dies; one of S3..S5 leads. */
static int ir_new_leader(void)
{
    unsigned i;

    /* As rollback: S1 dies, S2 must lose the election. */
    raft_fixture_kill(&C.f, 0);
    for (i = 2; i < IR_N; i++) {
        raft_fixture_disconnect(&C.f, 1, i);
    }
    cl_wait_no_leader(&C, 5000);
    IR.nl = rb_wait_leader_among(2, IR_N, 10000);
    for (i = 2; i < IR_N; i++) {
        raft_fixture_reconnect(&C.f, 1, i);
    }
    if (IR.nl < 0) {
        setup_error("none of S3..S5 became leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    return 0;
}

/* S2 must fail-stop (G6b) or roll back: the checks. */
static int ir_verdict(void)
{
    raft_time end;
    char extra[320];
    unsigned i;

    IR.nr = cl_raft(&C, (unsigned)IR.nl);
    printf(
        "install-rollback: S%d leader of term %llu, last index %llu; "
        "stepping (S2 must truncate index %llu and roll back)\n",
        IR.nl + 1, (unsigned long long)IR.nr->current_term,
        (unsigned long long)raft_last_index(IR.nr),
        (unsigned long long)IR.cfg_idx);
    fflush(stdout); /* a crash in the rollback comes next */
    end = raft_fixture_time(&C.f) + 3000;
    while (raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
        for (i = 1; i < IR_N; i++) {
            if (i != (unsigned)IR.nl) {
                rb_check_match((unsigned)IR.nl, i);
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
            IR.s2->configuration.n,
            (unsigned long long)IR.s2->configuration_uncommitted_index,
            (unsigned long long)raft_last_index(IR.s2),
            (unsigned long long)IR.cfg_idx,
            (unsigned long long)guard_term_of(IR.s2, IR.cfg_idx),
            (unsigned long long)guard_term_of(IR.nr, IR.cfg_idx));
    }
    for (i = 0; i < IR_N; i++) {
        if (i != 1 && C.s[i].fatal_hits > 0) {
            violation("S%u fail-stopped too: %s: %s", i + 1, C.s[i].fatal_what,
                      C.s[i].fatal_msg);
        }
    }
    if (!violated && IR.nr->state != RAFT_LEADER) {
        violation("S%d lost leadership", IR.nl + 1);
    }
    if (!violated && C.s[1].fatal_hits == 0 && C.f.servers[1].alive &&
        ir_in_config(IR.s2, 7)) {
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
             (unsigned long long)IR.cfg_idx,
             (unsigned long long)C.s[1].rep.stats.snapshots_restored,
             C.s[1].fatal_hits,
             (unsigned long long)C.s[1].rep.rio.stats.g6_stops);
    cl_close(&C);
    return finish(extra);
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
int scenario_install_rollback(void)
{
    int rv;

    memset(&IR, 0, sizeof IR);
    if ((rv = ir_compact()) != 0) {
        return rv;
    }
    if ((rv = ir_install()) != 0) {
        return rv;
    }
    if ((rv = ir_change_on_s2()) != 0) {
        return rv;
    }
    if ((rv = ir_new_leader()) != 0) {
        return rv;
    }
    return ir_verdict();
}
