/* tests/raft/test_cluster.c: basic scenarios on raft_fixture clusters. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"

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
    suite_add_tcase(s, tc);
    return s;
}
