/* Snapshots through fsm v3 on raft_fixture clusters: raft 0.15 calls
 * snapshot (our freeze) on the loop, snapshot_async on its work queue and
 * snapshot_finalize (our release) back on the loop. The fixture runs the
 * work 0.15-style on the same thread after its work duration, so these
 * tests see apply interleaved with a live view, not real concurrency (the
 * fsm's own tests run the encoder on a thread). What they pin down of
 * libraft's v3 path, which once relies on:
 *   - apply goes on between snapshot and finalize, and the snapshot taken
 *     is the one of the freeze index;
 *   - finalize is called exactly once, releasing the view;
 *   - an InstallSnapshot is restored from the state built beside the
 *     store's put (rio's install_work), and the new member has every key;
 *   - closing while a view is live frees everything (ASan checks);
 *   - the encoding runs at the configured nice value (snapshot_nice). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"

Suite *snapshot_async_suite(void);

static struct cluster C;

#define N_OPS 256

static struct cl_op ops[N_OPS];
static char keys[N_OPS][16];

static const char *key_at(unsigned k)
{
    snprintf(keys[k], sizeof keys[k], "a%u", k);
    return keys[k];
}

/* Claim "a<k>" at server @l and wait for ACCEPTED. */
static void claim_accepted(unsigned l, unsigned k)
{
    ck_assert_uint_lt(k, N_OPS);
    ck_assert_int_eq(cl_claim(&C, l, &ops[k], key_at(k), 5000 + k), 0);
    ck_assert_msg(cl_wait_op(&C, &ops[k], 10000), "claim a%u unanswered", k);
    ck_assert_msg(ops[k].status == 0, "claim a%u: %s", k,
                  replica_strerror(ops[k].status));
    ck_assert_int_eq(ops[k].outcome, FSM_ACCEPTED);
}

static bool view_gone(struct cluster *c, void *arg)
{
    return c->s[*(unsigned *)arg].rep.snap.view == NULL;
}

/* Claims at @l until its replica holds a frozen view; returns the next k. */
static unsigned claim_until_view(unsigned l, unsigned k)
{
    while (C.s[l].rep.snap.view == NULL) {
        ck_assert_msg(k < 64, "no snapshot started after %u claims", k);
        claim_accepted(l, k++);
    }
    return k;
}

START_TEST(apply_goes_on_while_snapshot_encodes)
{
    struct replica *rep;
    raft_index frozen_at, applied_live = 0;
    unsigned k, l;
    int li;

    cl_set_snapshot(&C, 8, 4);
    cl_init(&C, 3, 3);
    li = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(li, 0);
    l = (unsigned)li;
    rep = &C.s[l].rep;
    rep->config.snapshot_nice = 7; /* encoded on a thread at nice 7 */
    k = claim_until_view(l, 0);
    frozen_at = rep->snap.index;
    ck_assert_uint_eq(rep->stats.snapshots_taken, 0);
    /* Claims commit and apply while the view stays frozen at frozen_at. */
    for (unsigned j = 0; j < 3; j++) {
        claim_accepted(l, k++);
        if (rep->snap.view != NULL && rep->snap.index == frozen_at) {
            applied_live = cl_raft(&C, l)->last_applied;
        }
    }
    ck_assert_msg(applied_live > frozen_at,
                  "nothing applied while the view was live (frozen at %llu)",
                  (unsigned long long)frozen_at);
    ck_assert(cl_step_until(&C, view_gone, &l, 10000));
    ck_assert_uint_ge(rep->stats.snapshots_taken, 1);
    ck_assert_uint_eq(rep->stats.snapshot_last_index, frozen_at);
    ck_assert_uint_ge(cl_raft(&C, l)->log.snapshot.last_index, frozen_at);
    ck_assert_uint_gt(rep->stats.snapshot_last_bytes, 0);
    ck_assert_int_eq(rep->stats.snapshot_last_nice, 7);
    ck_assert(cl_wait_applied(&C, raft_last_index(cl_raft(&C, l)), 10000));
    ck_assert_msg(cl_same_applied(&C), "%s", C.violation_msg);
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    cl_set_snapshot(&C, 1024, 2048);
    cl_close(&C);
}
END_TEST

struct add_op
{
    struct replica_member_req m;
    bool done;
    int status;
};

static void add_cb(struct replica_member_req *req, int status, const char *msg)
{
    struct add_op *o = req->data;

    (void)msg;
    o->done = true;
    o->status = status;
}

static bool add_done(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct add_op *)arg)->done;
}

/* A 3-voter cluster with snapshots every 8 entries and @n claims made;
 * returns the leader. */
static unsigned start_filled(unsigned n)
{
    int li;

    cl_set_snapshot(&C, 8, 4);
    cl_init(&C, 3, 3);
    li = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(li, 0);
    for (unsigned k = 0; k < n; k++) {
        claim_accepted((unsigned)li, k);
    }
    ck_assert(
        cl_wait_applied(&C, raft_last_index(cl_raft(&C, (unsigned)li)), 10000));
    return (unsigned)li;
}

/* Add server @n as a voter through leader @l; it catches up by snapshot. */
static void add_voter(unsigned l, unsigned n)
{
    struct add_op o;

    memset(&o, 0, sizeof o);
    o.m.data = &o;
    o.m.op = REPLICA_MEMBER_ADD;
    o.m.id = (raft_id)n + 1;
    o.m.role = FSM_ROLE_VOTER;
    snprintf(o.m.raft_addr, sizeof o.m.raft_addr, "%u", n + 1);
    snprintf(o.m.client_addr, sizeof o.m.client_addr, "c%u", n + 1);
    ck_assert_int_eq(replica_member(&C.s[l].rep, &o.m, add_cb), 0);
    ck_assert(cl_step_until(&C, add_done, &o, 60000));
    ck_assert_int_eq(o.status, 0);
}

/* The new member @n restored the state built off its loop and has every
 * key "a0".."a<k-1>" (and one more claimed now). */
static void check_new_member(unsigned l, unsigned n, unsigned k)
{
    claim_accepted(l, k++);
    ck_assert(cl_wait_applied(&C, raft_last_index(cl_raft(&C, l)), 10000));
    ck_assert_uint_eq(C.s[n].fatal_hits, 0);
    ck_assert_uint_ge(C.s[n].rep.stats.snapshots_restored, 1);
    ck_assert_uint_ge(C.s[n].rep.stats.restores_prepared, 1);
    ck_assert_ptr_null(C.s[n].rep.snap.prepared);
    for (unsigned j = 0; j < k; j++) {
        ck_assert_int_eq(cl_local_lookup(&C, n, key_at(j)), FSM_FOUND);
    }
    ck_assert_msg(cl_same_applied(&C), "%s", C.violation_msg);
}

START_TEST(install_restores_the_state_built_beside_the_put)
{
    unsigned l = start_filled(40), n;

    ck_assert_uint_gt(cl_raft(&C, l)->log.snapshot.last_index, 8);
    n = cl_grow(&C);
    add_voter(l, n);
    check_new_member(l, n, 40);
    cl_set_snapshot(&C, 1024, 2048);
    cl_close(&C);
}
END_TEST

/* The fixture flushes the queued work at close: finalize then runs after
 * shutdown began; nothing may leak or touch freed state. */
START_TEST(close_while_a_view_is_live)
{
    unsigned l;
    int li;

    cl_set_snapshot(&C, 8, 4);
    cl_init(&C, 3, 3);
    li = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(li, 0);
    l = (unsigned)li;
    claim_until_view(l, 0);
    ck_assert_ptr_nonnull(C.s[l].rep.snap.view);
    cl_set_snapshot(&C, 1024, 2048);
    cl_close(&C);
}
END_TEST

struct digest_op
{
    struct replica_digest_req req;
    bool done;
    int status;
};

static void digest_cb(struct replica_digest_req *req, int status)
{
    struct digest_op *o = req->data;

    o->done = true;
    o->status = status;
}

static bool digest_done(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct digest_op *)arg)->done;
}

static void digest_run(unsigned i, struct digest_op *o)
{
    memset(o, 0, sizeof *o);
    o->req.data = o;
    ck_assert_int_eq(replica_state_digest(&C.s[i].rep, &o->req, digest_cb), 0);
    ck_assert_msg(cl_step_until(&C, digest_done, o, 10000),
                  "digest of %u not answered", i);
    ck_assert_int_eq(o->status, 0);
}

/* A digest asked for while a snapshot holds the view waits for it, then
 * runs; every replica at one applied index has the same digest. */
START_TEST(state_digest_off_the_loop)
{
    struct digest_op o, d[3];
    unsigned k, l;
    int li;

    cl_set_snapshot(&C, 8, 4);
    cl_init(&C, 3, 3);
    li = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(li, 0);
    l = (unsigned)li;
    k = claim_until_view(l, 0);
    memset(&o, 0, sizeof o);
    o.req.data = &o;
    ck_assert_int_eq(replica_state_digest(&C.s[l].rep, &o.req, digest_cb), 0);
    ck_assert(!o.done); /* never from inside the call */
    ck_assert(cl_step_until(&C, digest_done, &o, 10000));
    ck_assert_int_eq(o.status, 0);
    ck_assert_uint_ne(o.req.state_digest, 0);
    ck_assert_uint_ge(o.req.index, C.s[l].rep.stats.snapshot_last_index);
    /* Quiet cluster: all replicas at the same index, same digests. */
    claim_accepted(l, k);
    ck_assert(cl_wait_applied(&C, raft_last_index(cl_raft(&C, l)), 10000));
    cl_step_ms(&C, 500);
    for (unsigned i = 0; i < 3; i++) {
        digest_run(i, &d[i]);
    }
    for (unsigned i = 1; i < 3; i++) {
        ck_assert_uint_eq(d[i].req.index, d[0].req.index);
        ck_assert_uint_eq(d[i].req.applied_digest, d[0].req.applied_digest);
        ck_assert_uint_eq(d[i].req.state_digest, d[0].req.state_digest);
    }
    /* A different state has a different digest. */
    claim_accepted(l, k + 1);
    digest_run(l, &o);
    ck_assert_uint_ne(o.req.state_digest, d[0].req.state_digest);
    cl_set_snapshot(&C, 1024, 2048);
    cl_close(&C);
}
END_TEST

/* Digests asked for again and again on one server while it is added: an
 * install then arrives while a digest holds the view, and must wait for
 * it (rio parks the put's completion) instead of failing to restore. */
static struct digest_op again;
static unsigned again_server, again_done;
static bool again_on;

static void again_cb(struct replica_digest_req *req, int status)
{
    (void)req;
    if (status == 0) {
        again_done++;
    }
    if (again_on && status == 0) {
        memset(&again, 0, sizeof again);
        again.req.data = &again;
        replica_state_digest(&C.s[again_server].rep, &again.req, again_cb);
    }
}

START_TEST(install_waits_for_a_running_digest)
{
    unsigned l = start_filled(40), n;

    n = cl_grow(&C);
    again_server = n;
    again_on = true;
    again_done = 0;
    memset(&again, 0, sizeof again);
    again.req.data = &again;
    ck_assert_int_eq(replica_state_digest(&C.s[n].rep, &again.req, again_cb),
                     0);
    add_voter(l, n);
    again_on = false;
    ck_assert_uint_ge(again_done, 2);
    check_new_member(l, n, 40);
    cl_step_ms(&C, 500); /* the last digest ends before close */
    cl_set_snapshot(&C, 1024, 2048);
    cl_close(&C);
}
END_TEST

Suite *snapshot_async_suite(void)
{
    Suite *s = suite_create("snapshot_async");
    TCase *tc = tcase_create("v3");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, apply_goes_on_while_snapshot_encodes);
    tcase_add_test(tc, install_restores_the_state_built_beside_the_put);
    tcase_add_test(tc, close_while_a_view_is_live);
    tcase_add_test(tc, state_digest_off_the_loop);
    tcase_add_test(tc, install_waits_for_a_running_digest);
    suite_add_tcase(s, tc);
    return s;
}
