/* tests/raft/test_reads.c: reads served by any node (raft/replica.h,
 * "reads served by any node"): the leader's read index shared by every
 * read waiting at one moment, a follower's read that waits until it
 * applied the index (never a stale answer), withdrawing a waiting read,
 * and an isolated leader that never answers an index.
 *
 * Each test runs in its own forked Check process on a fresh cluster. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"

static struct cluster C;

struct ri_op
{
    struct replica_index_req req;
    bool done;
    int status;
    uint64_t index;
};

static void ri_cb(struct replica_index_req *req, int status, uint64_t index)
{
    struct ri_op *o = req->data;

    ck_assert(!o->done);
    o->done = true;
    o->status = status;
    o->index = index;
}

static int read_index(unsigned i, struct ri_op *o)
{
    memset(o, 0, sizeof *o);
    o->req.data = o;
    return replica_read_index(&C.s[i].rep, &o->req, ri_cb);
}

static bool ri_done_cond(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct ri_op *)arg)->done;
}

struct rd_op
{
    struct replica_req req;
    bool done;
    int status;
    enum fsm_outcome outcome;
};

static void rd_cb(struct replica_req *req,
                  int status,
                  const struct fsm_result *res)
{
    struct rd_op *o = req->data;

    ck_assert(!o->done);
    o->done = true;
    o->status = status;
    o->outcome = res != NULL ? res->outcome : (enum fsm_outcome)0;
}

/* replica_read_at of (CL_SCOPE, @key) at server i. */
static int read_at(unsigned i, struct rd_op *o, const char *key, uint64_t idx)
{
    struct fsm_ident id = {(const uint8_t *)CL_SCOPE, strlen(CL_SCOPE),
                           (const uint8_t *)key, strlen(key)};
    struct fsm_result res;
    int rv;

    memset(o, 0, sizeof *o);
    o->req.data = o;
    rv = replica_read_at(&C.s[i].rep, &o->req, &id, idx, &res, rd_cb);
    if (rv == 1) {
        o->done = true;
        o->outcome = res.outcome;
    }
    return rv;
}

static bool rd_done_cond(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct rd_op *)arg)->done;
}

static void claim_ok(unsigned i, const char *key, uint64_t rid)
{
    struct cl_op op;

    ck_assert_int_eq(cl_claim(&C, i, &op, key, rid), 0);
    ck_assert(cl_wait_op(&C, &op, 10000));
    ck_assert_int_eq(op.status, 0);
    ck_assert_int_eq(op.outcome, FSM_ACCEPTED);
}

/* The first read index goes out at once in a barrier; every read index
 * and lookup asked while it is in flight shares the next one. Each index
 * covers every write acknowledged before it was asked. */
START_TEST(read_index_shared)
{
    struct ri_op ri[5];
    struct cl_op lk[2];
    struct replica_stats s0;
    uint64_t acked;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, "before", 1);
    acked = raft_last_applied(cl_raft(&C, (unsigned)l));
    s0 = C.s[l].rep.stats;
    for (unsigned k = 0; k < 5; k++) {
        ck_assert_int_eq(read_index((unsigned)l, &ri[k]), 0);
        ck_assert(!ri[k].done); /* never from inside the call */
    }
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &lk[0], "before"), 0);
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &lk[1], "never"), 0);
    ck_assert(cl_step_until(&C, ri_done_cond, &ri[4], 5000));
    ck_assert(cl_wait_op(&C, &lk[1], 5000));
    for (unsigned k = 0; k < 5; k++) {
        ck_assert(ri[k].done);
        ck_assert_int_eq(ri[k].status, 0);
        ck_assert_uint_eq(ri[k].index, ri[k == 0 ? 0 : 1].index);
    }
    ck_assert_uint_gt(ri[0].index, acked);
    ck_assert_uint_gt(ri[1].index, ri[0].index);
    ck_assert_int_eq(lk[0].outcome, FSM_FOUND);
    ck_assert_int_eq(lk[1].outcome, FSM_NOT_FOUND);
    /* Two barriers for the seven reads. */
    ck_assert_uint_eq(C.s[l].rep.stats.barriers, s0.barriers + 2);
    ck_assert_uint_eq(C.s[l].rep.stats.read_indexes, s0.read_indexes + 5);

    /* Asked while a batch is in flight: they ride the next proposal, never
     * the one made before they were asked. */
    {
        struct cl_op w;
        uint64_t batch_index;

        ck_assert_int_eq(cl_claim(&C, (unsigned)l, &w, "during", 2), 0);
        batch_index = C.s[l].rep.fl_index;
        ck_assert_uint_gt(batch_index, 0);
        ck_assert_int_eq(read_index((unsigned)l, &ri[0]), 0);
        ck_assert(cl_wait_op(&C, &w, 5000));
        ck_assert(cl_step_until(&C, ri_done_cond, &ri[0], 5000));
        ck_assert_int_eq(ri[0].status, 0);
        ck_assert_uint_gt(ri[0].index, batch_index);
    }
    /* Not on a follower. */
    ck_assert_int_eq(read_index((unsigned)(l + 1) % 3, &ri[1]),
                     REPLICA_E_NOTLEADER);
    cl_close(&C);
}
END_TEST

/* A follower cut off from the leader has an index it has not applied: its
 * read waits (never answers from the older state) and is served once the
 * follower catches up; a read withdrawn meanwhile is never called back. */
START_TEST(read_at_waits_for_applied)
{
    struct ri_op ri;
    struct rd_op rd, gone, now;
    unsigned f;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    f = (unsigned)(l + 1) % 3;
    claim_ok((unsigned)l, "old", 1);
    ck_assert(
        cl_wait_applied(&C, raft_last_applied(cl_raft(&C, (unsigned)l)), 5000));
    /* Applied already: answered at once, no callback. */
    ck_assert_int_eq(read_at(f, &now, "old", 1), 1);
    ck_assert_int_eq(now.outcome, FSM_FOUND);

    cl_disconnect_all(&C, f);
    claim_ok((unsigned)l, "new", 2); /* acknowledged by the other two */
    ck_assert_int_eq(read_index((unsigned)l, &ri), 0);
    ck_assert(cl_step_until(&C, ri_done_cond, &ri, 5000));
    ck_assert_int_eq(ri.status, 0);
    ck_assert_uint_gt(ri.index, raft_last_applied(cl_raft(&C, f)));

    /* The follower's own table does not have "new" yet: a read at the
     * leader's index must wait rather than answer NOT_FOUND. */
    ck_assert_int_eq(cl_local_lookup(&C, f, "new"), FSM_NOT_FOUND);
    ck_assert_int_eq(read_at(f, &rd, "new", ri.index), 0);
    ck_assert_int_eq(read_at(f, &gone, "new", ri.index), 0);
    cl_step_ms(&C, 1500);
    ck_assert(!rd.done && !gone.done);
    replica_read_cancel(&C.s[f].rep, &gone.req);
    replica_read_cancel(&C.s[f].rep, &gone.req); /* a no-op now */

    cl_reconnect_all(&C, f);
    ck_assert(cl_step_until(&C, rd_done_cond, &rd, 10000));
    ck_assert_int_eq(rd.status, 0);
    ck_assert_int_eq(rd.outcome, FSM_FOUND);
    ck_assert_uint_ge(raft_last_applied(cl_raft(&C, f)), ri.index);
    cl_step_ms(&C, 200);
    ck_assert(!gone.done);
    ck_assert_uint_eq(C.s[f].rep.rd_n, 0);
    cl_close(&C);
}
END_TEST

/* A leader cut off from its followers cannot prove any index: its read
 * indexes fail NOTLEADER when it steps down (nothing applied; the caller
 * answers UNAVAILABLE), never an index. */
START_TEST(read_index_isolated_leader)
{
    struct ri_op ri[2];
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, "k", 1);
    cl_disconnect_all(&C, (unsigned)l);
    ck_assert_int_eq(read_index((unsigned)l, &ri[0]), 0);
    ck_assert_int_eq(read_index((unsigned)l, &ri[1]), 0);
    ck_assert(cl_step_until(&C, ri_done_cond, &ri[1], 5000));
    for (unsigned k = 0; k < 2; k++) {
        ck_assert(ri[k].done);
        ck_assert_int_eq(ri[k].status, REPLICA_E_NOTLEADER);
        ck_assert_uint_eq(ri[k].index, 0);
    }
    ck_assert(!replica_ready(&C.s[l].rep));
    cl_close(&C);
}
END_TEST

Suite *reads_suite(void);
Suite *reads_suite(void)
{
    Suite *s = suite_create("reads");
    struct
    {
        const char *name;
        const TTest *t;
    } cases[] = {
        {"read_index_shared", read_index_shared},
        {"read_at_waits_for_applied", read_at_waits_for_applied},
        {"read_index_isolated_leader", read_index_isolated_leader},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, cases[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}
