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

Suite *cluster_suite(void);
Suite *cluster_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("basic");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, claims_on_ready_leader);
    tcase_add_test(tc, follower_refuses_not_applied);
    suite_add_tcase(s, tc);
    return s;
}
