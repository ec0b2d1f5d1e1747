/* tests/raft/regress_stale_reply.c: the stale-reply scenario, B13 through the
 * asynchronous append reply (G9) (regress.h). */
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

/* The state shared by the phases of scenario_stale_reply. */
static struct
{
    struct cl_op op;
    struct raft *s1;
    struct raft *s2;
    struct raft *lr;
    raft_index n_idx;
    raft_index ack_idx;
    raft_term t_old;
    unsigned lf;
    unsigned xf;
    unsigned fl;
    int nl;
    bool acked;
    bool lost;
    bool s2_wrote;
} SR;

/* N entries committed everywhere (three claims on S1). */
static int sr_commit_n(void)
{
    unsigned i;
    int l;

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
        if (cl_claim(&C, 0, &SR.op, key, i + 1) != 0 ||
            !cl_wait_op(&C, &SR.op, 5000) || SR.op.status != 0) {
            setup_error("claims on S1");
            cl_close(&C);
            return EXIT_SETUP;
        }
    }
    SR.s1 = cl_raft(&C, 0);
    SR.s2 = cl_raft(&C, 1);
    SR.n_idx = raft_last_index(SR.s1);
    if (!cl_wait_applied(&C, SR.n_idx, 5000)) {
        setup_error("N not applied everywhere");
        cl_close(&C);
        return EXIT_SETUP;
    }
    SR.t_old = SR.s1->current_term;
    return 0;
}

/* S1 leads term T with only S2 and sends it SR_OLD entries that
 * S2's slow disk writes; S1 dies. */
static int sr_old_term(void)
{
    raft_time end;
    unsigned i;

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
     * all SR.lost S1 and the next pre-vote among them wins. */
    end = raft_fixture_time(&C.f) + 5000;
    while (!sr_all_lost_leader() && raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    if (!sr_all_lost_leader() || SR.s1->state != RAFT_LEADER) {
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
    while (raft_last_index(SR.s2) < SR.n_idx + SR_OLD &&
           raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    raft_fixture_set_disk_latency(&C.f, 1, 10);
    if (raft_last_index(SR.s2) != SR.n_idx + SR_OLD ||
        SR.s2->last_stored != SR.n_idx) {
        setup_error("S2 did not get the old entries (or stored them)");
        cl_close(&C);
        return EXIT_SETUP;
    }
    raft_fixture_kill(&C.f, 0);
    printf(
        "stale-reply: N=%llu; S1 (term %llu) sent %llu..%llu to S2 only, "
        "S2 writing them for %u ms; S1 killed\n",
        (unsigned long long)SR.n_idx, (unsigned long long)SR.t_old,
        (unsigned long long)SR.n_idx + 1, (unsigned long long)SR.n_idx + SR_OLD,
        SR_DISK_MS);
    return 0;
}

/* L leads term T+1: S2 hears it once and is cut off from it; L's
 * barrier commits with F and X; a claim reaches L and F only. */
static int sr_new_leader(void)
{
    raft_time end;

    SR.nl = rb_wait_leader_among(2, SR_N, 10000);
    if (SR.nl < 0) {
        setup_error("none of S3..S5 became leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    SR.lf = (unsigned)SR.nl;
    SR.lr = cl_raft(&C, SR.lf);
    SR.fl = SR.lf == 2 ? 3 : 2;        /* F: stays with L */
    SR.xf = 2 + 3 + 4 - SR.lf - SR.fl; /* X: cut off after the barrier */
    /* L's first heartbeat reaches S2; then L's messages to S2 are cut
     * (its barrier goes out only once S2's answer arrived: probe mode). */
    end = raft_fixture_time(&C.f) + 1000;
    while (!(SR.s2->current_term == SR.lr->current_term &&
             SR.s2->follower_state.current_leader.id == SR.lr->id) &&
           raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    if (SR.s2->current_term != SR.lr->current_term) {
        setup_error("S2 did not hear the new leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    raft_fixture_disconnect(&C.f, SR.lf, 1);
    sr_set_timeout(SR.xf, 60000);
    printf(
        "stale-reply: S%u leader of term %llu (F=S%u, X=S%u); S2 moved to "
        "term %llu with last_stored %llu, last index %llu\n",
        SR.lf + 1, (unsigned long long)SR.lr->current_term, SR.fl + 1,
        SR.xf + 1, (unsigned long long)SR.s2->current_term,
        (unsigned long long)SR.s2->last_stored,
        (unsigned long long)raft_last_index(SR.s2));
    end = raft_fixture_time(&C.f) + 2000;
    while (!replica_ready(&C.s[SR.lf].rep) && raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    if (!replica_ready(&C.s[SR.lf].rep) ||
        cl_raft(&C, SR.xf)->last_stored < SR.n_idx + 1) {
        setup_error("the new leader's barrier did not commit with F and X");
        cl_close(&C);
        return EXIT_SETUP;
    }
    raft_fixture_disconnect(&C.f, SR.lf, SR.xf);
    raft_fixture_disconnect(&C.f, SR.xf, SR.lf);
    if (cl_claim(&C, SR.lf, &SR.op, SR_ACK_KEY, 7) != 0) {
        setup_error("claim on the new leader");
        cl_close(&C);
        return EXIT_SETUP;
    }
    end = raft_fixture_time(&C.f) + 1000;
    while (!(SR.lr->last_stored >= SR.n_idx + 2 &&
             cl_raft(&C, SR.fl)->last_stored >= SR.n_idx + 2) &&
           raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
    }
    SR.ack_idx = raft_last_index(SR.lr);
    if (SR.ack_idx < SR.n_idx + 2 ||
        cl_raft(&C, SR.fl)->last_stored < SR.n_idx + 2 ||
        SR.s2->last_stored != SR.n_idx) {
        setup_error("the claim did not reach L and F before S2's write ended");
        cl_close(&C);
        return EXIT_SETUP;
    }
    printf(
        "stale-reply: claim at index %llu on S%u and S%u (commit %llu); "
        "waiting for S2's old write\n",
        (unsigned long long)SR.ack_idx, SR.lf + 1, SR.fl + 1,
        (unsigned long long)SR.lr->commit_index);
    return 0;
}

/* S2's old write completes and its (stale) answer reaches L. */
static int sr_old_write(void)
{
    raft_time end;

    /* S2's old write completes; its answer reaches L (S2 -> L is up). */
    end = raft_fixture_time(&C.f) + SR_DISK_MS + 1000;
    while (raft_fixture_time(&C.f) < end) {
        raft_fixture_step(&C.f);
        if (!SR.s2_wrote && SR.s2->last_stored >= SR.n_idx + SR_OLD) {
            SR.s2_wrote = true;
            end = raft_fixture_time(&C.f) + 300;
        }
        rb_check_match(SR.lf, 1);
    }
    SR.acked = SR.op.done && SR.op.status == 0 && SR.op.outcome == FSM_ACCEPTED;
    printf(
        "stale-reply: S2's old write %s (last_stored %llu, term %llu); "
        "S%u thinks S2 matches %llu, commit %llu, claim %s\n",
        SR.s2_wrote ? "completed" : "did not complete",
        (unsigned long long)SR.s2->last_stored,
        (unsigned long long)SR.s2->current_term, SR.lf + 1,
        (unsigned long long)(SR.lr->state == RAFT_LEADER
                                 ? SR.lr->leader_state.progress[1].match_index
                                 : 0),
        (unsigned long long)SR.lr->commit_index,
        SR.acked ? "acknowledged" : "not acknowledged");
    return 0;
}

/* L and F fail; S1 and X come back: a ready leader among S1, S2, X. */
static int sr_failover(void)
{
    raft_time end;
    unsigned i;

    /* L and F fail; S1 comes back, X is reconnected. */
    raft_fixture_kill(&C.f, SR.lf);
    raft_fixture_kill(&C.f, SR.fl);
    raft_fixture_revive(&C.f, 0);
    for (i = 2; i < SR_N; i++) {
        if (i != SR.lf && i != SR.fl) {
            raft_fixture_reconnect(&C.f, 0, i);
            raft_fixture_reconnect(&C.f, i, 0);
        }
    }
    cl_reconnect_all(&C, SR.xf);
    sr_set_timeout(0, 2000);
    sr_set_timeout(1, 1100);
    sr_set_timeout(SR.xf, 1300);
    SR.nl = -1;
    end = raft_fixture_time(&C.f) + 15000;
    while (raft_fixture_time(&C.f) < end && SR.nl < 0) {
        raft_fixture_step(&C.f);
        for (i = 0; i < SR_N; i++) {
            /* (S1, revived, still thinks it leads term T at first) */
            if (C.f.servers[i].alive && replica_ready(&C.s[i].rep) &&
                cl_raft(&C, i)->current_term > SR.lr->current_term) {
                SR.nl = (int)i;
            }
        }
    }
    if (SR.nl < 0) {
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
    return 0;
}

/* Whether the acknowledged claim survived. */
static int sr_verdict(void)
{
    char extra[320];

    cl_step_ms(&C, 1000);
    printf(
        "stale-reply: S%d leads term %llu; claim of %s on: S1 %d, S2 %d, "
        "S%u %d\n",
        SR.nl + 1,
        (unsigned long long)cl_raft(&C, (unsigned)SR.nl)->current_term,
        SR_ACK_KEY, sr_has_claim(0, SR_ACK_KEY), sr_has_claim(1, SR_ACK_KEY),
        SR.xf + 1, sr_has_claim(SR.xf, SR_ACK_KEY));
    SR.lost = SR.acked && !sr_has_claim((unsigned)SR.nl, SR_ACK_KEY);
    if (SR.lost) {
        violation(
            "acknowledged claim of %s (index %llu) lost: the leader S%d "
            "of term %llu does not have it",
            SR_ACK_KEY, (unsigned long long)SR.ack_idx, SR.nl + 1,
            (unsigned long long)cl_raft(&C, (unsigned)SR.nl)->current_term);
    }
    if (!violated && C.violation) {
        violation("%s", C.violation_msg);
    }
    check_applied();
    snprintf(extra, sizeof extra,
             "claim_idx=%llu acked=%d lost=%d s2_wrote=%d g9_dropped=%llu "
             "g7_clamped=%llu g2_dropped=%llu",
             (unsigned long long)SR.ack_idx, SR.acked, SR.lost, SR.s2_wrote,
             (unsigned long long)sum_g9(), (unsigned long long)sum_g7(),
             (unsigned long long)sum_g2());
    cl_close(&C);
    return finish(extra);
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
int scenario_stale_reply(void)
{
    int rv;

    memset(&SR, 0, sizeof SR);
    if ((rv = sr_commit_n()) != 0) {
        return rv;
    }
    if ((rv = sr_old_term()) != 0) {
        return rv;
    }
    if ((rv = sr_new_leader()) != 0) {
        return rv;
    }
    if ((rv = sr_old_write()) != 0) {
        return rv;
    }
    if ((rv = sr_failover()) != 0) {
        return rv;
    }
    return sr_verdict();
}
