/* tests/raft/test_cluster.c: basic scenarios on raft_fixture clusters. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "fsm_helpers.h"

static struct cluster C;

/* Claims through the pipeline: first ACCEPTED, a fresh request id REPLAYED,
 * the same request id ACCEPTED with retry; every server applied the same. */
START_TEST(claims_on_ready_leader)
{
    struct cl_op a, b, d;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &a, "n1", 1), 0);
    ck_assert(cl_wait_op(&C, &a, 5000));
    ck_assert_int_eq(a.status, 0);
    ck_assert_int_eq(a.outcome, FSM_ACCEPTED);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &b, "n1", 2), 0);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &d, "n1", 1), 0);
    ck_assert(cl_wait_op(&C, &b, 5000));
    ck_assert(cl_wait_op(&C, &d, 5000));
    ck_assert_int_eq(b.outcome, FSM_REPLAYED);
    ck_assert_int_eq(d.outcome, FSM_ACCEPTED);
    ck_assert(d.retry);
    ck_assert(
        cl_wait_applied(&C, raft_last_index(cl_raft(&C, (unsigned)l)), 5000));
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(cl_local_lookup(&C, i, "n1"), FSM_FOUND);
    }
    ck_assert(cl_same_applied(&C));
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    cl_close(&C);
}
END_TEST

/* A group submitted under replica_submit_hold (a ClaimBatch's items) goes
 * into one entry, in order (a key twice: ACCEPTED, then REPLAYED); the
 * same claims without the hold take two (the first alone). */
START_TEST(held_group_shares_one_entry)
{
    enum { N = 256 };
    static struct cl_op ops[N];
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    char key[32];
    uint64_t b0;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    for (int round = 0; round < 2; round++) {
        bool hold = round == 0;

        cl_step_ms(&C, 300); /* nothing in flight */
        b0 = C.s[l].rep.stats.batches;
        if (hold) {
            replica_submit_hold(&C.s[l].rep);
        }
        for (int i = 0; i < N; i++) {
            /* the last item repeats the first key */
            snprintf(key, sizeof key, "r%d-%d", round, i == N - 1 ? 0 : i);
            cmd = cl_claim_cmd(&cl, key, (uint64_t)(round * N + i) + 1);
            ck_assert_int_eq(cl_submit(&C, (unsigned)l, &ops[i], &cmd), 0);
        }
        if (hold) {
            ck_assert_uint_eq(C.s[l].rep.stats.batches, b0);
            replica_submit_release(&C.s[l].rep);
        }
        for (int i = 0; i < N; i++) {
            ck_assert(cl_wait_op(&C, &ops[i], 20000));
            ck_assert_int_eq(ops[i].status, 0);
            ck_assert_int_eq(ops[i].outcome,
                             i == N - 1 ? FSM_REPLAYED : FSM_ACCEPTED);
        }
        ck_assert_uint_eq(C.s[l].rep.stats.batches - b0, hold ? 1 : 2);
    }
    ck_assert(cl_same_applied(&C));
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    cl_close(&C);
}
END_TEST

/* Followers refuse before proposing: not applied, with a leader hint. */
START_TEST(follower_refuses_not_applied)
{
    struct cl_op a;
    uint64_t id;
    const char *addr;
    int l;
    unsigned f;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    f = (unsigned)(l + 1) % 3;
    cl_step_ms(&C, 300);
    ck_assert_int_eq(cl_claim(&C, f, &a, "n1", 1), REPLICA_E_NOTLEADER);
    ck_assert_str_eq(replica_status_applied(REPLICA_E_NOTLEADER), "false");
    replica_leader(&C.s[f].rep, &id, &addr);
    ck_assert_uint_eq(id, (raft_id)l + 1);
    cl_close(&C);
}
END_TEST

/* The observers of raft/replica.h, all the node above the layer reads
 * (status, metrics, membership checks), say what struct raft says, in
 * once's own types. */
START_TEST(observers_match_raft)
{
    struct replica_server sv;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    cl_step_ms(&C, 300); /* heartbeats answered: the leader heard from all */
    for (unsigned i = 0; i < 3; i++) {
        const struct replica *rep = &C.s[i].rep;
        struct raft *r = cl_raft(&C, i);
        uint64_t lid;
        const char *laddr;

        ck_assert(replica_has_raft(rep));
        ck_assert_int_eq(replica_role(rep), i == (unsigned)l
                                                ? REPLICA_ROLE_LEADER
                                                : REPLICA_ROLE_FOLLOWER);
        replica_leader(rep, &lid, &laddr);
        ck_assert_uint_eq(lid, cl_raft(&C, (unsigned)l)->id);
        ck_assert_uint_eq(replica_term(rep), r->current_term);
        ck_assert_uint_eq(replica_commit_index(rep), r->commit_index);
        ck_assert_uint_eq(replica_last_applied(rep), raft_last_applied(r));
        ck_assert_uint_eq(replica_last_index(rep), raft_last_index(r));
        ck_assert_uint_eq(replica_time_ms(rep), r->io->time(r->io));
        ck_assert_uint_eq(replica_conf_index(rep), r->configuration_index);
        ck_assert_uint_ne(replica_conf_index(rep), 0);
        /* No change in flight: the latest entry is the committed one. */
        ck_assert_uint_eq(replica_conf_latest_index(rep),
                          r->configuration_index);
        ck_assert_uint_eq(replica_conf_n(rep), 3);
        for (unsigned j = 0; j < 3; j++) {
            replica_conf_server(rep, j, &sv);
            ck_assert_uint_eq(sv.id, r->configuration.servers[j].id);
            ck_assert_str_eq(sv.address, r->configuration.servers[j].address);
            ck_assert_int_eq(sv.role, FSM_ROLE_VOTER);
            ck_assert(
                replica_progress_recent(rep, j) ==
                (i == (unsigned)l && r->leader_state.progress[j].recent_recv));
        }
        ck_assert(replica_progress_known(rep) == (i == (unsigned)l));
    }
    /* The roles map by name, not by raft's numbers (RAFT_STANDBY is 0). */
    {
        struct raft *r = cl_raft(&C, 0);
        int was = r->configuration.servers[1].role;

        r->configuration.servers[1].role = RAFT_STANDBY;
        replica_conf_server(&C.s[0].rep, 1, &sv);
        ck_assert_int_eq(sv.role, FSM_ROLE_STANDBY);
        r->configuration.servers[1].role = RAFT_SPARE;
        replica_conf_server(&C.s[0].rep, 1, &sv);
        ck_assert_int_eq(sv.role, FSM_ROLE_SPARE);
        r->configuration.servers[1].role = was;
    }
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    cl_close(&C);
}
END_TEST

/* --- answers after the next proposal (pipeline.c) ------------------------ */

/* What each answer saw when it was delivered. */
struct dl_seen
{
    struct cl_op op;
    unsigned seq;         /* order of delivery, from 1 */
    unsigned calls;       /* exactly one */
    unsigned cb_depth;    /* > 0: answered inside raft's apply */
    int inflight;         /* the leader's proposal in flight then */
    raft_index fl_index;  /* and its index */
    bool points_into_fsm; /* a stored result, error or attempt list */
    struct fsm_token token;
};

static unsigned dl_seq;
static struct replica *dl_rep;

static void dl_cb(struct replica_req *req,
                  int status,
                  const struct fsm_result *res)
{
    struct dl_seen *d = req->data;

    d->calls++;
    d->seq = ++dl_seq;
    d->cb_depth = dl_rep->cb_depth;
    d->inflight = (int)dl_rep->inflight;
    d->fl_index = dl_rep->fl_index;
    d->op.done = true;
    d->op.status = status;
    if (res != NULL) {
        d->op.outcome = res->outcome;
        d->points_into_fsm = res->result != NULL || res->stored_error != NULL ||
                             res->n_attempt_list > 0;
        d->token = res->owner_token;
    }
}

static int dl_submit(unsigned l, struct dl_seen *d, const struct fsm_cmd *cmd)
{
    memset(d, 0, sizeof *d);
    d->op.req.data = d;
    return replica_submit(&C.s[l].rep, &d->op.req, cmd, dl_cb);
}

static int dl_claim(unsigned l,
                    struct dl_seen *d,
                    const char *key,
                    uint64_t rid)
{
    struct fsm_claim cl;
    struct fsm_cmd cmd = cl_claim_cmd(&cl, key, rid);

    return dl_submit(l, d, &cmd);
}

static int dl_lookup(unsigned l, struct dl_seen *d, const char *key)
{
    struct fsm_ident id = {(const uint8_t *)CL_SCOPE, strlen(CL_SCOPE),
                           (const uint8_t *)key, strlen(key)};

    memset(d, 0, sizeof *d);
    d->op.req.data = d;
    return replica_lookup(&C.s[l].rep, &d->op.req, &id, dl_cb);
}

static bool dl_done(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct dl_seen *)arg)->op.done;
}

/* The leader proposes nothing and has nothing queued or under way. */
static bool dl_idle(struct cluster *c, void *arg)
{
    (void)c;
    (void)arg;
    return dl_rep->inflight == INFLIGHT_NONE && dl_rep->q_n == 0 &&
           dl_rep->member == NULL;
}

/* A batch's claims are answered outside raft's apply, once the next batch
 * (queued meanwhile) is proposed: the proposal is not delayed by them. */
START_TEST(answers_follow_next_proposal)
{
    static struct dl_seen a[4], b;
    raft_index a_index;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    dl_rep = &C.s[l].rep;
    ck_assert(cl_step_until(&C, dl_idle, NULL, 5000));
    replica_submit_hold(dl_rep);
    for (int i = 0; i < 4; i++) {
        char key[16];

        snprintf(key, sizeof key, "a%d", i);
        ck_assert_int_eq(dl_claim((unsigned)l, &a[i], key, (uint64_t)i + 1), 0);
    }
    replica_submit_release(dl_rep); /* one entry of four claims */
    ck_assert(dl_rep->inflight == INFLIGHT_BATCH && dl_rep->q_n == 0);
    ck_assert_int_eq(dl_rep->inflight, INFLIGHT_BATCH);
    a_index = dl_rep->fl_index;
    ck_assert_int_eq(dl_claim((unsigned)l, &b, "b", 100), 0); /* queued */
    ck_assert(cl_step_until(&C, dl_done, &b, 5000));
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(a[i].calls, 1);
        ck_assert_int_eq(a[i].op.status, 0);
        ck_assert_int_eq(a[i].op.outcome, FSM_ACCEPTED);
        ck_assert_uint_eq(a[i].seq, (unsigned)i + 1); /* in order */
        ck_assert_uint_eq(a[i].cb_depth, 0);
        ck_assert_int_eq(a[i].inflight, INFLIGHT_BATCH);
        ck_assert_uint_gt(a[i].fl_index, a_index); /* b's batch proposed */
    }
    ck_assert_uint_eq(b.calls, 1);
    ck_assert_int_eq(b.op.outcome, FSM_ACCEPTED);
    ck_assert_uint_eq(dl_rep->dl_n, 0);
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    cl_close(&C);
}
END_TEST

/* An outcome that points into the fsm (a Lookup of a completed record
 * carries its stored result) is answered inside the apply, after the
 * deferred answers before it: one batch's answers keep the commands'
 * order. */
START_TEST(deferred_answers_keep_order)
{
    static struct dl_seen first, done, x, k, y;
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    dl_rep = &C.s[l].rep;
    fh_claim(&cl, FSM_KIND_IDEMPOTENT, CL_SCOPE, "k", 1);
    cl.ttl_ms = 3600 * 1000;
    cmd = fh_cmd_claim(&cl);
    ck_assert_int_eq(dl_submit((unsigned)l, &first, &cmd), 0);
    ck_assert(cl_step_until(&C, dl_done, &first, 5000));
    ck_assert_int_eq(first.op.outcome, FSM_ACCEPTED);
    cmd = fh_cmd_complete(CL_SCOPE, "k", first.token, "r", 1);
    ck_assert_int_eq(dl_submit((unsigned)l, &done, &cmd), 0);
    ck_assert(cl_step_until(&C, dl_done, &done, 5000));
    ck_assert_int_eq(done.op.outcome, FSM_COMPLETED);
    ck_assert(cl_step_until(&C, dl_idle, NULL, 5000));
    dl_seq = 0;
    replica_submit_hold(dl_rep);
    ck_assert_int_eq(dl_claim((unsigned)l, &x, "x", 2), 0);
    ck_assert_int_eq(dl_lookup((unsigned)l, &k, "k"), 0);
    ck_assert_int_eq(dl_claim((unsigned)l, &y, "y", 3), 0);
    replica_submit_release(dl_rep); /* one entry of three commands */
    ck_assert(dl_rep->inflight == INFLIGHT_BATCH && dl_rep->q_n == 0);
    ck_assert(cl_step_until(&C, dl_done, &y, 5000));
    ck_assert_int_eq(k.op.outcome, FSM_FOUND);
    ck_assert(k.points_into_fsm); /* the premise: not self-contained */
    ck_assert(!x.points_into_fsm && !y.points_into_fsm);
    ck_assert_uint_eq(x.seq, 1);
    ck_assert_uint_eq(k.seq, 2);
    ck_assert_uint_eq(y.seq, 3);
    ck_assert_uint_gt(x.cb_depth, 0); /* delivered before k, in the apply */
    ck_assert_uint_gt(k.cb_depth, 0);
    ck_assert_uint_eq(y.cb_depth, 0); /* deferred */
    ck_assert(x.calls == 1 && k.calls == 1 && y.calls == 1);
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    cl_close(&C);
}
END_TEST

/* Shutting down while answers wait: they are answered as applied (status
 * 0), once; what was queued gets SHUTDOWN. */
static void dl_shutdown_hook(void *arg, size_t n, uint64_t ns)
{
    (void)arg;
    (void)ns;
    ck_assert_uint_eq(dl_rep->dl_n, n); /* every claim waits */
    replica_shutdown(dl_rep);
    ck_assert_uint_eq(dl_rep->dl_n, 0);
}

START_TEST(deferred_answers_at_shutdown)
{
    static struct dl_seen a[3], b;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    dl_rep = &C.s[l].rep;
    ck_assert(cl_step_until(&C, dl_idle, NULL, 5000));
    replica_submit_hold(dl_rep);
    for (int i = 0; i < 3; i++) {
        char key[16];

        snprintf(key, sizeof key, "s%d", i);
        ck_assert_int_eq(dl_claim((unsigned)l, &a[i], key, (uint64_t)i + 1), 0);
    }
    replica_submit_release(dl_rep); /* one entry of three claims */
    ck_assert(dl_rep->inflight == INFLIGHT_BATCH && dl_rep->q_n == 0);
    ck_assert_int_eq(dl_claim((unsigned)l, &b, "sb", 9), 0); /* queued */
    dl_rep->hooks.batch = dl_shutdown_hook;
    ck_assert(cl_step_until(&C, dl_done, &b, 5000));
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(a[i].calls, 1);
        ck_assert_int_eq(a[i].op.status, 0);
        ck_assert_int_eq(a[i].op.outcome, FSM_ACCEPTED);
    }
    ck_assert_uint_eq(b.calls, 1);
    ck_assert_int_eq(b.op.status, REPLICA_E_SHUTDOWN);
    cl_step_ms(&C, 500);
    ck_assert(a[0].calls == 1 && b.calls == 1);
    cl_close(&C);
}
END_TEST

Suite *cluster_suite(void);
Suite *cluster_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("basic");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, claims_on_ready_leader);
    tcase_add_test(tc, follower_refuses_not_applied);
    tcase_add_test(tc, observers_match_raft);
    tcase_add_test(tc, held_group_shares_one_entry);
    tcase_add_test(tc, answers_follow_next_proposal);
    tcase_add_test(tc, deferred_answers_keep_order);
    tcase_add_test(tc, deferred_answers_at_shutdown);
    suite_add_tcase(s, tc);
    return s;
}
