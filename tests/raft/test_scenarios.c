/* tests/raft/test_scenarios.c: fixture scenarios of the guarded Raft layer:
 * elections and the G1 ready gate, leader loss, partitions, transfers,
 * membership 3 -> 5 -> 3, adds refused before anything is proposed,
 * removing the leader, InstallSnapshot, snapshots on demand, storage faults
 * (fail-stop), replicated time with wrong leader clocks, configuration
 * checks and linearizable lookups.
 *
 * Each test runs in its own forked Check process on a fresh cluster. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"

static struct cluster C;

/* --- helpers -------------------------------------------------------------- */

#define OPS_MAX 512

static struct cl_op ops[OPS_MAX];
static char keys[OPS_MAX][16];

static const char *key_of(unsigned k)
{
    snprintf(keys[k], sizeof keys[k], "k%u", k);
    return keys[k];
}

/* Submit a claim of key "k<k>" at server i and wait for its answer. */
static void claim_sync(unsigned i, unsigned k, uint64_t rid)
{
    struct cl_op *op = &ops[k];

    ck_assert_uint_lt(k, OPS_MAX);
    ck_assert_int_eq(cl_claim(&C, i, op, key_of(k), rid), 0);
    ck_assert_msg(cl_wait_op(&C, op, 10000), "claim k%u not answered", k);
}

/* As claim_sync, and the claim must be ACCEPTED. */
static void claim_ok(unsigned i, unsigned k)
{
    claim_sync(i, k, 1000 + k);
    ck_assert_msg(ops[k].status == 0, "claim k%u: %s", k,
                  replica_strerror(ops[k].status));
    ck_assert_int_eq(ops[k].outcome, FSM_ACCEPTED);
}

static unsigned alive_count(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < C.n; i++) {
        n += C.f.servers[i].alive ? 1 : 0;
    }
    return n;
}

static void check_invariants(void)
{
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    ck_assert_msg(cl_same_applied(&C), "%s", C.violation_msg);
}

/* Wait until every alive server applied the leader's last index. */
static void sync_all(unsigned l)
{
    ck_assert(cl_wait_applied(&C, raft_last_index(cl_raft(&C, l)), 10000));
}

struct not_arg
{
    int except;
    int out;
};

static bool ready_other_cond(struct cluster *c, void *arg)
{
    struct not_arg *a = arg;
    for (unsigned i = 0; i < c->n; i++) {
        if ((int)i != a->except && c->f.servers[i].alive && c->s[i].started &&
            replica_ready(&c->s[i].rep)) {
            a->out = (int)i;
            return true;
        }
    }
    return false;
}

/* Wait for a ready leader other than server @except. */
static int wait_ready_other(int except, unsigned ms)
{
    struct not_arg a = {except, -1};
    return cl_step_until(&C, ready_other_cond, &a, ms) ? a.out : -1;
}

static bool ready_i_cond(struct cluster *c, void *arg)
{
    return replica_ready(&c->s[*(unsigned *)arg].rep);
}

static bool wait_ready_i(unsigned i, unsigned ms)
{
    return cl_step_until(&C, ready_i_cond, &i, ms);
}

/* Membership operations. */
struct mop
{
    struct replica_member_req m;
    bool done;
    int status;
    char msg[128];
};

static void mop_cb(struct replica_member_req *req, int status, const char *msg)
{
    struct mop *o = req->data;
    o->done = true;
    o->status = status;
    snprintf(o->msg, sizeof o->msg, "%s", msg != NULL ? msg : "");
}

static bool mop_cond(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct mop *)arg)->done;
}

/* Start a membership operation at server @l; returns replica_member's
 * code. On 0 the caller waits with mop_wait. */
static int mop_start(struct mop *o,
                     unsigned l,
                     enum replica_member_op op,
                     raft_id id,
                     enum fsm_role role)
{
    memset(o, 0, sizeof *o);
    o->m.data = o;
    o->m.op = op;
    o->m.id = id;
    o->m.role = role;
    if (op == REPLICA_MEMBER_ADD) {
        snprintf(o->m.raft_addr, sizeof o->m.raft_addr, "%llu",
                 (unsigned long long)id);
        snprintf(o->m.client_addr, sizeof o->m.client_addr, "c%llu",
                 (unsigned long long)id);
    }
    return replica_member(&C.s[l].rep, &o->m, mop_cb);
}

static void mop_wait(struct mop *o, unsigned ms)
{
    ck_assert_msg(cl_step_until(&C, mop_cond, o, ms),
                  "membership operation not answered");
}

/* Run one operation to its end; returns the callback's status. */
static int mop_run(unsigned l,
                   enum replica_member_op op,
                   raft_id id,
                   enum fsm_role role,
                   struct mop *o)
{
    int rv = mop_start(o, l, op, id, role);
    if (rv != 0) {
        return rv;
    }
    mop_wait(o, 60000);
    return o->status;
}

static unsigned n_voters(unsigned l)
{
    const struct raft *r = cl_raft(&C, l);
    unsigned n = 0;
    for (unsigned i = 0; i < r->configuration.n; i++) {
        n += r->configuration.servers[i].role == RAFT_VOTER ? 1 : 0;
    }
    return n;
}

static bool in_config(unsigned l, raft_id id)
{
    const struct raft *r = cl_raft(&C, l);
    for (unsigned i = 0; i < r->configuration.n; i++) {
        if (r->configuration.servers[i].id == id) {
            return true;
        }
    }
    return false;
}

/* Hand leadership to server @t through the replica's TRANSFER operation. */
static void transfer_to(unsigned l, unsigned t)
{
    struct mop o;

    ck_assert_int_eq(mop_run(l, REPLICA_MEMBER_TRANSFER, (raft_id)t + 1, 0, &o),
                     0);
    ck_assert_msg(wait_ready_i(t, 10000), "server %u not ready", t);
}

/* --- 1. election ------------------------------------------------------ */

/* A new leader serves only after its term-start barrier (G1) applied: a
 * claim given to it before is queued, and answered once it is ready. A
 * server that is not leader refuses (not applied). */
START_TEST(election_ready_gate)
{
    struct cl_op pre, early;
    int l, l2;
    unsigned f;
    uint64_t g1;
    bool seen_not_ready = false;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    ck_assert_uint_ge(C.s[l].rep.stats.g1_barriers, 1);
    claim_ok((unsigned)l, 0);

    raft_fixture_kill(&C.f, (unsigned)l);
    ck_assert(cl_wait_no_leader(&C, 5000));
    /* Nobody leads: a claim is refused, not applied. */
    f = (unsigned)(l + 1) % 3;
    ck_assert_int_eq(cl_claim(&C, f, &pre, "pre", 1), REPLICA_E_NOTLEADER);

    /* Step one event at a time until a server turns leader. */
    while ((l2 = cl_leader(&C)) < 0) {
        ck_assert_uint_lt(raft_fixture_time(&C.f), 60000);
        raft_fixture_step(&C.f);
    }
    ck_assert_int_ne(l2, l);
    /* Leader, but the G1 barrier is not applied yet. */
    ck_assert(replica_is_leader(&C.s[l2].rep));
    ck_assert(!replica_ready(&C.s[l2].rep));
    g1 = C.s[l2].rep.stats.g1_barriers;
    ck_assert_uint_ge(g1, 1);
    /* Accepted for the queue while not ready; answered only once ready. */
    ck_assert_int_eq(cl_claim(&C, (unsigned)l2, &early, "early", 7), 0);
    ck_assert(!early.done);
    ck_assert_uint_eq(C.s[l2].rep.q_n, 1); /* queued, not proposed */
    while (!early.done) {
        ck_assert_uint_lt(raft_fixture_time(&C.f), 60000);
        if (!replica_ready(&C.s[l2].rep)) {
            seen_not_ready = true;
        }
        raft_fixture_step(&C.f);
    }
    ck_assert(seen_not_ready);
    ck_assert(replica_ready(&C.s[l2].rep));
    ck_assert_int_eq(early.status, 0);
    ck_assert_int_eq(early.outcome, FSM_ACCEPTED);
    ck_assert_uint_eq(C.s[l2].rep.stats.g1_barriers, g1);
    /* The previous leader's acked claim is there. */
    ck_assert_int_eq(cl_local_lookup(&C, (unsigned)l2, "k0"), FSM_FOUND);
    check_invariants();
    cl_close(&C);
}
END_TEST

/* --- 2. leader kill --------------------------------------------------- */

START_TEST(leader_kill)
{
    struct cl_op rep;
    int l, l2;
    unsigned k;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    for (k = 0; k < 10; k++) {
        claim_ok((unsigned)l, k);
    }
    raft_fixture_kill(&C.f, (unsigned)l);
    /* B14: never elect while the killed leader exists; and right after the
     * kill the fixture still reports it: wait for no leader first. */
    ck_assert(cl_wait_no_leader(&C, 5000));
    l2 = cl_wait_ready(&C, 20000);
    ck_assert_int_ge(l2, 0);
    ck_assert_int_ne(l2, l);
    /* A fresh request id on an acked key is a replay on the new leader. */
    for (k = 0; k < 10; k++) {
        ck_assert_int_eq(cl_claim(&C, (unsigned)l2, &rep, key_of(k), 5000 + k),
                         0);
        ck_assert(cl_wait_op(&C, &rep, 5000));
        ck_assert_int_eq(rep.status, 0);
        ck_assert_int_eq(rep.outcome, FSM_REPLAYED);
    }
    claim_ok((unsigned)l2, 10);
    /* The old leader comes back, steps down and catches up. */
    raft_fixture_revive(&C.f, (unsigned)l);
    cl_step_ms(&C, 2000);
    ck_assert_int_eq(cl_leader(&C), l2);
    ck_assert_int_ne(raft_state(cl_raft(&C, (unsigned)l)), RAFT_LEADER);
    sync_all((unsigned)l2);
    for (k = 0; k <= 10; k++) {
        ck_assert_int_eq(cl_local_lookup(&C, (unsigned)l, key_of(k)),
                         FSM_FOUND);
    }
    ck_assert_uint_eq(raft_last_applied(cl_raft(&C, (unsigned)l)),
                      raft_last_applied(cl_raft(&C, (unsigned)l2)));
    check_invariants();
    cl_close(&C);
}
END_TEST

/* --- 3. partition / check-quorum -------------------------------------- */

START_TEST(partition_check_quorum)
{
    struct cl_op iso;
    int l, l2;
    raft_time t0;
    enum fsm_outcome o0;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, 0);

    cl_disconnect_all(&C, (unsigned)l);
    t0 = raft_fixture_time(&C.f);
    /* Still leader when the claim arrives: it is proposed but cannot
     * commit. */
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &iso, "iso", 1), 0);
    while (raft_state(cl_raft(&C, (unsigned)l)) == RAFT_LEADER) {
        ck_assert_msg(raft_fixture_time(&C.f) - t0 <= 2 * 1000 + 200,
                      "isolated leader did not step down");
        raft_fixture_step(&C.f);
    }
    cl_step_ms(&C, 50);
    ck_assert(iso.done);
    ck_assert_msg(
        iso.status == REPLICA_E_UNKNOWN || iso.status == REPLICA_E_NOTLEADER,
        "isolated claim ended %d", iso.status);
    ck_assert(!replica_ready(&C.s[l].rep));

    /* The majority elects a ready leader and serves. */
    l2 = wait_ready_other(l, 20000);
    ck_assert_int_ge(l2, 0);
    claim_ok((unsigned)l2, 1);
    claim_ok((unsigned)l2, 2);

    /* Heal. */
    cl_reconnect_all(&C, (unsigned)l);
    cl_step_ms(&C, 3000);
    l2 = cl_wait_ready(&C, 20000);
    ck_assert_int_ge(l2, 0);
    claim_ok((unsigned)l2, 3);
    sync_all((unsigned)l2);
    check_invariants();
    /* The claim of unknown outcome is everywhere or nowhere. */
    o0 = cl_local_lookup(&C, 0, "iso");
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(cl_local_lookup(&C, i, "iso"), o0);
        ck_assert_int_eq(cl_local_lookup(&C, i, "k0"), FSM_FOUND);
        ck_assert_int_eq(cl_local_lookup(&C, i, "k3"), FSM_FOUND);
    }
    cl_close(&C);
}
END_TEST

/* --- 3b. "not applied" means not applied ----------------------------- */

/* Leadership is lost with one batch in flight and claims queued behind it:
 * the queued ones fail NOTLEADER and must then be absent everywhere; the
 * one in flight is UNKNOWN (or succeeded) and is everywhere or nowhere.
 * Once by partition (check-quorum), once by a transfer queued before them. */
START_TEST(notleader_not_applied)
{
    struct cl_op fl, q1, q2, t1, t2;
    struct mop o;
    int l, l2;
    enum fsm_outcome o0;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, 0);

    /* Partition. */
    cl_disconnect_all(&C, (unsigned)l);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &fl, "fl", 1), 0);
    ck_assert_int_eq(C.s[l].rep.inflight, INFLIGHT_BATCH);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &q1, "q1", 1), 0);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &q2, "q2", 1), 0);
    ck_assert_uint_eq(C.s[l].rep.q_n, 2);
    l2 = wait_ready_other(l, 20000);
    ck_assert_int_ge(l2, 0);
    ck_assert(cl_wait_op(&C, &q2, 5000));
    ck_assert(fl.done && q1.done);
    ck_assert_int_eq(q1.status, REPLICA_E_NOTLEADER);
    ck_assert_int_eq(q2.status, REPLICA_E_NOTLEADER);
    ck_assert_str_eq(replica_status_applied(q1.status), "false");
    ck_assert_msg(
        fl.status == REPLICA_E_UNKNOWN || fl.status == REPLICA_E_NOTLEADER,
        "in flight ended %d", fl.status);
    cl_reconnect_all(&C, (unsigned)l);
    cl_step_ms(&C, 2000);
    l2 = cl_wait_ready(&C, 20000);
    ck_assert_int_ge(l2, 0);

    /* Transfer: it is queued before t1/t2 and runs once the claim in flight
     * is done; t1/t2 then fail NOTLEADER. */
    ck_assert_int_eq(cl_claim(&C, (unsigned)l2, &fl, "fl2", 1), 0);
    ck_assert_int_eq(mop_start(&o, (unsigned)l2, REPLICA_MEMBER_TRANSFER, 0, 0),
                     0);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l2, &t1, "t1", 1), 0);
    ck_assert_int_eq(cl_claim(&C, (unsigned)l2, &t2, "t2", 1), 0);
    mop_wait(&o, 10000);
    ck_assert_int_eq(o.status, 0);
    ck_assert(cl_wait_op(&C, &t2, 5000));
    ck_assert(fl.done && t1.done);
    ck_assert_int_eq(fl.status, 0);
    ck_assert_int_eq(fl.outcome, FSM_ACCEPTED);
    ck_assert_int_eq(t1.status, REPLICA_E_NOTLEADER);
    ck_assert_int_eq(t2.status, REPLICA_E_NOTLEADER);
    l = wait_ready_other(l2, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, 1);
    sync_all((unsigned)l);
    check_invariants();

    o0 = cl_local_lookup(&C, 0, "fl");
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(cl_local_lookup(&C, i, "fl"), o0);
        ck_assert_int_eq(cl_local_lookup(&C, i, "fl2"), FSM_FOUND);
        ck_assert_int_eq(cl_local_lookup(&C, i, "q1"), FSM_NOT_FOUND);
        ck_assert_int_eq(cl_local_lookup(&C, i, "q2"), FSM_NOT_FOUND);
        ck_assert_int_eq(cl_local_lookup(&C, i, "t1"), FSM_NOT_FOUND);
        ck_assert_int_eq(cl_local_lookup(&C, i, "t2"), FSM_NOT_FOUND);
    }
    cl_close(&C);
}
END_TEST

/* --- 4. transfer ------------------------------------------------------ */

START_TEST(transfer)
{
    struct mop o;
    int l;
    unsigned t;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, 0);
    t = (unsigned)(l + 2) % 3;
    ck_assert_int_eq(
        mop_run((unsigned)l, REPLICA_MEMBER_TRANSFER, (raft_id)t + 1, 0, &o),
        0);
    ck_assert_msg(wait_ready_i(t, 10000), "target not ready");
    ck_assert_int_eq(cl_leader(&C), (int)t);
    claim_ok(t, 1);
    sync_all(t);
    check_invariants();
    cl_close(&C);
}
END_TEST

/* A transfer raft refuses at once is a definite refusal: a one-voter
 * cluster has nobody to hand leadership to (it answered "unknown" with
 * "unknown error" before), and an id that is not a voter is refused. */
START_TEST(transfer_refused_at_once)
{
    struct mop o;
    int l;

    cl_init(&C, 1, 2);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    ck_assert_int_eq(mop_run((unsigned)l, REPLICA_MEMBER_TRANSFER, 0, 0, &o),
                     REPLICA_E_PRECONDITION);
    ck_assert_msg(strstr(o.msg, "no other voter") != NULL, "msg: %s", o.msg);
    ck_assert_int_eq(mop_run((unsigned)l, REPLICA_MEMBER_TRANSFER, 99, 0, &o),
                     REPLICA_E_PRECONDITION);
    ck_assert_int_eq(cl_leader(&C), l);
    claim_ok((unsigned)l, 0);
    cl_close(&C);
}
END_TEST

/* --- 5. 3 -> 5 -> 3 --------------------------------------------------- */

START_TEST(grow_shrink)
{
    struct mop o;
    int l;
    unsigned k = 0, i, removed[2], nr = 0;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    for (; k < 5; k++) {
        claim_ok((unsigned)l, k);
    }
    for (unsigned g = 0; g < 2; g++) {
        unsigned n = cl_grow(&C);
        int rv = mop_run((unsigned)l, REPLICA_MEMBER_ADD, (raft_id)n + 1,
                         FSM_ROLE_VOTER, &o);
        ck_assert_msg(rv == 0, "add %u: %s (%s)", n + 1, replica_strerror(rv),
                      o.msg);
        ck_assert_int_eq(cl_leader(&C), l);
    }
    ck_assert_uint_eq(n_voters((unsigned)l), 5);
    ck_assert_uint_eq(fsm_n_members(C.s[l].rep.fsm), 5);
    for (; k < 10; k++) {
        claim_ok((unsigned)l, k);
    }
    sync_all((unsigned)l);
    for (i = 3; i < 5; i++) {
        for (unsigned j = 0; j < k; j++) {
            ck_assert_int_eq(cl_local_lookup(&C, i, key_of(j)), FSM_FOUND);
        }
    }
    /* Remove two original followers, one at a time. */
    for (i = 0; i < 3 && nr < 2; i++) {
        int rv;
        if ((int)i == l) {
            continue;
        }
        rv = mop_run((unsigned)l, REPLICA_MEMBER_REMOVE, (raft_id)i + 1, 0, &o);
        ck_assert_msg(rv == 0, "remove %u: %s (%s)", i + 1,
                      replica_strerror(rv), o.msg);
        ck_assert(!in_config((unsigned)l, (raft_id)i + 1));
        ck_assert(fsm_is_retired(C.s[l].rep.fsm, (raft_id)i + 1));
        removed[nr++] = i;
    }
    ck_assert_uint_eq(n_voters((unsigned)l), 3);
    cl_step_ms(&C, 500);
    for (i = 0; i < nr; i++) {
        unsigned r = removed[i];
        if (C.f.servers[r].alive) {
            ck_assert_msg(C.s[r].retired_hook, "server %u not told", r + 1);
        }
    }
    /* Re-adding a retired id is refused. */
    {
        int rv = mop_start(&o, (unsigned)l, REPLICA_MEMBER_ADD,
                           (raft_id)removed[0] + 1, FSM_ROLE_VOTER);
        if (rv == 0) {
            mop_wait(&o, 10000);
            rv = o.status;
        }
        ck_assert_int_eq(rv, REPLICA_E_PRECONDITION);
    }
    /* The 3 remaining serve. */
    for (i = 0; i < nr; i++) {
        raft_fixture_kill(&C.f, removed[i]);
    }
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, k++);
    sync_all((unsigned)l);
    check_invariants();
    cl_close(&C);
}
END_TEST

/* --- 5b. an add raft would refuse leaves nothing behind ------------- */

/* Add @id at Raft address @raft_addr on server @l: refused at once, with
 * PRECONDITION and a reason naming @why, before anything is proposed. */
static void add_refused_at_once(unsigned l,
                                raft_id id,
                                const char *raft_addr,
                                const char *why)
{
    struct mop o;
    raft_index last = raft_last_index(cl_raft(&C, l));
    size_t n = fsm_n_members(C.s[l].rep.fsm);
    int rv;

    memset(&o, 0, sizeof o);
    o.m.data = &o;
    o.m.op = REPLICA_MEMBER_ADD;
    o.m.id = id;
    o.m.role = FSM_ROLE_VOTER;
    snprintf(o.m.raft_addr, sizeof o.m.raft_addr, "%s", raft_addr);
    snprintf(o.m.client_addr, sizeof o.m.client_addr, "c%llu",
             (unsigned long long)id);
    rv = replica_member(&C.s[l].rep, &o.m, mop_cb);
    if (rv == 0) {
        mop_wait(&o, 10000);
    }
    ck_assert_msg(rv == REPLICA_E_PRECONDITION,
                  "add of %llx at %s: %s, answered later with %s (%s)",
                  (unsigned long long)id, raft_addr, replica_strerror(rv),
                  replica_strerror(o.status), o.msg);
    ck_assert_msg(strstr(o.m.msg, why) != NULL, "msg: %s", o.m.msg);
    ck_assert(!o.done);
    cl_step_ms(&C, 200);
    ck_assert_uint_eq(raft_last_index(cl_raft(&C, l)), last);
    ck_assert_uint_eq(fsm_n_members(C.s[l].rep.fsm), n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_ne(fsm_member(C.s[l].rep.fsm, i)->id, id);
    }
    ck_assert(!in_config(l, id));
}

START_TEST(add_refused_before_proposal)
{
    struct fsm_cmd cmd;
    struct cl_op op;
    struct mop o;
    char addr[16];
    unsigned n;
    int l, rv;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, 0);
    ck_assert_uint_eq(fsm_n_members(C.s[l].rep.fsm), 3);
    /* A new id at a follower's, then at the leader's own Raft address:
     * raft_add would say RAFT_DUPLICATEADDRESS only after SetMember(spare)
     * committed. */
    snprintf(addr, sizeof addr, "%u", (unsigned)(l + 1) % 3 + 1);
    add_refused_at_once((unsigned)l, 90, addr, "is already member");
    snprintf(addr, sizeof addr, "%u", (unsigned)l + 1);
    add_refused_at_once((unsigned)l, 91, addr, "is already member");
    /* The configuration refresh's own id and address. */
    add_refused_at_once((unsigned)l, REPLICA_REFRESH_ID, "77", "reserved");
    add_refused_at_once((unsigned)l, 92, REPLICA_REFRESH_ADDR, "reserved");
    /* What an add cut short leaves (its SetMember(spare) committed, not
     * raft_add): a directory entry the configuration does not hold. Another
     * id at its address is refused; the same id continues the add. */
    n = cl_grow(&C);
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_SET_MEMBER;
    cmd.u.member.id = (raft_id)n + 1;
    snprintf(cmd.u.member.raft_addr, sizeof cmd.u.member.raft_addr, "%u",
             n + 1);
    snprintf(cmd.u.member.client_addr, sizeof cmd.u.member.client_addr, "c%u",
             n + 1);
    cmd.u.member.role = FSM_ROLE_SPARE;
    ck_assert_int_eq(cl_submit(&C, (unsigned)l, &op, &cmd), 0);
    ck_assert(cl_wait_op(&C, &op, 10000));
    ck_assert_int_eq(op.outcome, FSM_OK);
    ck_assert_uint_eq(fsm_n_members(C.s[l].rep.fsm), 4);
    snprintf(addr, sizeof addr, "%u", n + 1);
    add_refused_at_once((unsigned)l, 93, addr, "in the directory");
    rv = mop_run((unsigned)l, REPLICA_MEMBER_ADD, (raft_id)n + 1,
                 FSM_ROLE_VOTER, &o);
    ck_assert_msg(rv == 0, "add: %s (%s)", replica_strerror(rv), o.msg);
    ck_assert(in_config((unsigned)l, (raft_id)n + 1));
    ck_assert_uint_eq(fsm_n_members(C.s[l].rep.fsm), 4);
    ck_assert_uint_eq(n_voters((unsigned)l), 4);
    claim_ok((unsigned)l, 1);
    sync_all((unsigned)l);
    check_invariants();
    cl_close(&C);
}
END_TEST

/* --- 6. remove the leader itself ------------------------------------- */

START_TEST(remove_leader)
{
    struct mop o;
    int l, l2, rv;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, 0);
    rv = mop_run((unsigned)l, REPLICA_MEMBER_REMOVE, (raft_id)l + 1, 0, &o);
    ck_assert_int_eq(rv, REPLICA_E_NOTLEADER);
    ck_assert_msg(strstr(o.msg, "transferred") != NULL, "msg: %s", o.msg);
    l2 = wait_ready_other(l, 10000);
    ck_assert_int_ge(l2, 0);
    /* Still a member: the removal is for the new leader. */
    ck_assert(in_config((unsigned)l2, (raft_id)l + 1));
    rv = mop_run((unsigned)l2, REPLICA_MEMBER_REMOVE, (raft_id)l + 1, 0, &o);
    ck_assert_msg(rv == 0, "remove: %s (%s)", replica_strerror(rv), o.msg);
    ck_assert(!in_config((unsigned)l2, (raft_id)l + 1));
    ck_assert(fsm_is_retired(C.s[l2].rep.fsm, (raft_id)l + 1));
    ck_assert_uint_eq(n_voters((unsigned)l2), 2);
    cl_step_ms(&C, 300);
    ck_assert(C.s[l].retired_hook);
    raft_fixture_kill(&C.f, (unsigned)l);
    claim_ok((unsigned)l2, 1);
    sync_all((unsigned)l2);
    check_invariants();
    cl_close(&C);
}
END_TEST

/* --- 7. InstallSnapshot ---------------------------------------------- */

START_TEST(install_snapshot)
{
    struct mop o;
    int l, rv;
    unsigned k, n;

    cl_set_snapshot(&C, 8, 4);
    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    for (k = 0; k < 60; k++) {
        claim_ok((unsigned)l, k);
    }
    sync_all((unsigned)l);
    /* The log no longer starts at 1. */
    ck_assert_uint_gt(cl_raft(&C, (unsigned)l)->log.snapshot.last_index, 8);
    n = cl_grow(&C);
    rv = mop_run((unsigned)l, REPLICA_MEMBER_ADD, (raft_id)n + 1,
                 FSM_ROLE_VOTER, &o);
    ck_assert_msg(rv == 0, "add: %s (%s)", replica_strerror(rv), o.msg);
    claim_ok((unsigned)l, k++);
    sync_all((unsigned)l);
    ck_assert_uint_gt(C.s[n].rep.stats.snapshots_restored, 0);
    for (unsigned j = 0; j < k; j++) {
        ck_assert_int_eq(cl_local_lookup(&C, n, key_of(j)), FSM_FOUND);
    }
    ck_assert_uint_eq(n_voters((unsigned)l), 4);
    check_invariants();
    cl_set_snapshot(&C, 1024, 2048);
    cl_close(&C);
}
END_TEST

/* --- 8. snapshot on demand ------------------------------------------- */

static bool snap_done;
static int snap_status;

static void snap_cb(struct replica *rep, int status)
{
    (void)rep;
    snap_done = true;
    snap_status = status;
}

static bool snap_cond(struct cluster *c, void *arg)
{
    (void)c;
    (void)arg;
    return snap_done;
}

static raft_index snap_leader_index(struct cluster *c)
{
    int l = cl_leader(c);

    return l < 0 ? 0 : cl_raft(c, (unsigned)l)->log.snapshot.last_index;
}

static bool snapshot_past(struct cluster *c, void *arg)
{
    return snap_leader_index(c) > *(raft_index *)arg;
}

START_TEST(snapshot_on_demand)
{
    struct raft *r;
    raft_index before;
    int l;
    unsigned k;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    for (k = 0; k < 5; k++) {
        claim_ok((unsigned)l, k);
    }
    r = cl_raft(&C, (unsigned)l);
    before = r->log.snapshot.last_index;
    ck_assert_uint_eq(r->snapshot.threshold, 1024);
    snap_done = false;
    ck_assert_int_eq(replica_snapshot(&C.s[l].rep, snap_cb), 0);
    /* One at a time. */
    ck_assert_int_eq(replica_snapshot(&C.s[l].rep, snap_cb), REPLICA_E_BUSY);
    ck_assert(cl_step_until(&C, snap_cond, NULL, 10000));
    ck_assert_int_eq(snap_status, 0);
    /* The snapshot is encoded off the loop (the fixture's work duration),
     * then put: wait for both. */
    cl_step_until(&C, snapshot_past, &before, 2000);
    ck_assert_uint_gt(r->log.snapshot.last_index, before);
    ck_assert_uint_eq(r->snapshot.threshold, 1024);
    ck_assert_uint_gt(C.s[l].rep.stats.snapshots_taken, 0);
    /* Business as usual afterwards, and no further snapshot per entry. */
    before = r->log.snapshot.last_index;
    for (; k < 10; k++) {
        claim_ok((unsigned)l, k);
    }
    cl_step_ms(&C, 200);
    ck_assert_uint_eq(r->log.snapshot.last_index, before);
    sync_all((unsigned)l);
    check_invariants();
    cl_close(&C);
}
END_TEST

/* --- 9. storage fault -> fail-stop ----------------------------------- */

/* Claims flow while server @victim's storage fails; returns the number of
 * claims submitted. Every acked claim must survive. */
static void storage_fault(bool on_leader)
{
    int l;
    unsigned victim, k = 0, acked = 0, j;
    bool fault_set = false;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    victim = on_leader ? (unsigned)l : (unsigned)(l + 1) % 3;
    for (k = 0; k < 5; k++) {
        claim_ok((unsigned)l, k);
    }
    while (k < 120) {
        /* The fixture's fault hits the server's next I/O request of any
         * kind (a failed send is not fatal): re-arm it until a storage
         * request failed and the server fail-stopped. */
        if (C.s[victim].fatal_hits == 0 && C.f.servers[victim].alive) {
            raft_fixture_io_fault(&C.f, victim, fault_set ? 0 : 2, 1);
            fault_set = true;
        }
        l = cl_leader(&C);
        if (l < 0 || !replica_ready(&C.s[l].rep)) {
            if (C.s[victim].fatal_hits > 0 && on_leader) {
                ck_assert(cl_wait_no_leader(&C, 5000));
            }
            l = cl_wait_ready(&C, 20000);
            ck_assert_int_ge(l, 0);
        }
        /* Several claims per batch, answered or not. */
        for (j = 0; j < 4 && k < OPS_MAX; j++, k++) {
            ck_assert_int_eq(cl_claim(&C, (unsigned)l, &ops[k], key_of(k), k),
                             0);
        }
        cl_step_ms(&C, 100);
    }
    cl_step_ms(&C, 3000);
    ck_assert_msg(C.s[victim].fatal_hits > 0, "no fatal hook on %u", victim);
    ck_assert_msg(C.s[victim].fatal_what[0] != '\0', "fatal without a cause");
    ck_assert(!C.f.servers[victim].alive);
    ck_assert_uint_eq(alive_count(), 2);
    l = cl_wait_ready(&C, 20000);
    ck_assert_int_ge(l, 0);
    ck_assert_uint_ne((unsigned)l, victim);
    claim_ok((unsigned)l, k);
    sync_all((unsigned)l);
    for (j = 0; j <= k; j++) {
        if (ops[j].done && ops[j].status == 0) {
            ck_assert_int_eq(ops[j].outcome, FSM_ACCEPTED);
            acked++;
            for (unsigned i = 0; i < 3; i++) {
                if (i != victim) {
                    ck_assert_int_eq(cl_local_lookup(&C, i, key_of(j)),
                                     FSM_FOUND);
                }
            }
        } else if (ops[j].done) {
            /* A failure is "not applied" or "unknown", never a fake ok. */
            ck_assert(replica_status_applied(ops[j].status) != NULL);
        }
    }
    ck_assert_uint_gt(acked, 50);
    check_invariants();
    cl_close(&C);
}

START_TEST(storage_fault_follower)
{
    storage_fault(false);
}
END_TEST

START_TEST(storage_fault_leader)
{
    storage_fault(true);
}
END_TEST

/* --- 10. replicated time ---------------------------------------------- */

static uint64_t real_now(void)
{
    return raft_fixture_time(&C.f) + CL_WALL0;
}

static uint64_t prev_log_time;

/* Log time is within K of real time and never goes back. The leader
 * stamps a batch between the claim's invocation and its answer, from an
 * estimate based on a batch it applied, which was stamped up to one
 * replication round trip earlier: real time is taken at the invocation and
 * LAG_MS of slack allows for that round trip (the fixture's network and disk
 * latencies are 15 and 10 ms). */
#define LAG_MS 200
static void check_log_time(unsigned l, const struct cl_op *op)
{
    uint64_t now = fsm_now(C.s[l].rep.fsm);
    uint64_t lo = op->t_invoke + CL_WALL0, hi = op->t_done + CL_WALL0;
    uint64_t k = fsm_settings(C.s[l].rep.fsm)->max_skew_ms;

    ck_assert_uint_ge(now, prev_log_time);
    prev_log_time = now;
    ck_assert_msg(now <= hi + k && now + k + LAG_MS >= lo,
                  "log time %llu vs real %llu..%llu (K %llu)",
                  (unsigned long long)now, (unsigned long long)lo,
                  (unsigned long long)hi, (unsigned long long)k);
}

static void wrong_clock(int64_t offset)
{
    int l;
    unsigned w, good, k = 0, b;
    uint64_t t0, kk, now, real;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    prev_log_time = 0;
    /* The first leader of a fresh cluster has no anchor and stamps its own
     * wall clock, so it must be a correct one: the wrong clock is given to
     * a follower, which becomes leader (by transfer) only after this correct
     * leader ran for a while and everyone applied its batches live. */
    for (; k < 20; k++) {
        claim_ok((unsigned)l, k);
        cl_step_ms(&C, 100);
        check_log_time((unsigned)l, &ops[k]);
    }
    kk = fsm_settings(C.s[l].rep.fsm)->max_skew_ms;
    w = (unsigned)(l + 1) % 3;
    good = (unsigned)(l + 2) % 3;
    C.s[w].wall_offset_ms = offset;
    sync_all((unsigned)l);
    transfer_to((unsigned)l, w);
    t0 = raft_fixture_time(&C.f);
    for (b = 0; b < 200 || raft_fixture_time(&C.f) - t0 < 60000; b++, k++) {
        ck_assert_uint_lt(k, 300);
        claim_ok(w, k);
        check_log_time(w, &ops[k]);
        cl_step_ms(&C, 300);
    }
    ck_assert_int_eq(cl_leader(&C), (int)w);
    ck_assert_uint_ge(b, 200);
    /* The wrong clock pulled log time at most K away: it is at the bound
     * (fast) or at it (slow), not at the wrong wall clock. */
    now = fsm_now(C.s[w].rep.fsm);
    real = real_now();
    if (offset > 0) {
        ck_assert_uint_gt(now, real + kk / 2);
    } else {
        ck_assert_uint_lt(now + kk / 2, real);
    }
    /* A correct leader brings log time back to real time: at once when it
     * lagged, and once real time caught up when it ran ahead (log time
     * never goes back). */
    sync_all(w);
    transfer_to(w, good);
    t0 = raft_fixture_time(&C.f);
    for (b = 0; raft_fixture_time(&C.f) - t0 < kk + 5000; b++) {
        unsigned j = 300 + b % 200;

        /* Keys of this phase are reused: REPLAYED is fine too. */
        claim_sync(good, j, 900000 + b);
        ck_assert_int_eq(ops[j].status, 0);
        check_log_time(good, &ops[j]);
        if (offset < 0) {
            /* It lagged: back at real time at once. */
            now = fsm_now(C.s[good].rep.fsm);
            real = real_now();
            ck_assert_msg(now <= real + 1000 && now + 1000 >= real,
                          "log time %llu not back at real %llu",
                          (unsigned long long)now, (unsigned long long)real);
        }
        cl_step_ms(&C, 300);
    }
    now = fsm_now(C.s[good].rep.fsm);
    real = real_now();
    ck_assert_msg(now <= real + 1000 && now + 1000 >= real,
                  "log time %llu not back at real %llu",
                  (unsigned long long)now, (unsigned long long)real);
    check_invariants();
    cl_close(&C);
}

START_TEST(time_fast_leader)
{
    wrong_clock(300000);
}
END_TEST

START_TEST(time_slow_leader)
{
    wrong_clock(-300000);
}
END_TEST

/* --- 11. configure ---------------------------------------------------- */

START_TEST(configure_rejects)
{
    struct replica_config cfg = {
        .election_ms = 1000,
        .heartbeat_ms = 1000,
        .snapshot_threshold = 1024,
        .snapshot_trailing = 2048,
        .max_catch_up_rounds = 10,
        .max_catch_up_round_ms = 5000,
    };
    char errmsg[256] = "";
    struct raft *r;

    cl_init(&C, 3, 3);
    r = cl_raft(&C, 0);
    ck_assert_int_eq(replica_configure(&C.s[0].rep, &cfg, errmsg),
                     REPLICA_E_INVALID);
    ck_assert_msg(strstr(errmsg, "heartbeat") != NULL &&
                      strstr(errmsg, "election") != NULL,
                  "errmsg: %s", errmsg);
    cfg.heartbeat_ms = 1500;
    errmsg[0] = '\0';
    ck_assert_int_eq(replica_configure(&C.s[0].rep, &cfg, errmsg),
                     REPLICA_E_INVALID);
    ck_assert_ptr_nonnull(strstr(errmsg, "heartbeat"));
    cfg.heartbeat_ms = 0;
    ck_assert_int_eq(replica_configure(&C.s[0].rep, &cfg, errmsg),
                     REPLICA_E_INVALID);
    /* Nothing was changed. */
    ck_assert_uint_eq(r->election_timeout, 1000);
    ck_assert_uint_eq(r->heartbeat_timeout, 100);
    ck_assert_uint_eq(C.s[0].rep.config.heartbeat_ms, 100);
    /* A valid one is taken. */
    cfg.heartbeat_ms = 150;
    ck_assert_int_eq(replica_configure(&C.s[0].rep, &cfg, errmsg), 0);
    ck_assert_uint_eq(r->heartbeat_timeout, 150);
    cl_close(&C);
}
END_TEST

/* --- 12. lookups ------------------------------------------------------ */

START_TEST(lookups)
{
    struct cl_op la, lb, lc, ld, lz, busy, cd;
    struct replica_stats s0;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    claim_ok((unsigned)l, 0); /* "k0" */

    /* Only lookups: they ride barriers, no batch. */
    s0 = C.s[l].rep.stats;
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &la, "k0"), 0);
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &lb, "nope"), 0);
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &lc, "k0"), 0);
    ck_assert(cl_wait_op(&C, &la, 5000));
    ck_assert(cl_wait_op(&C, &lb, 5000));
    ck_assert(cl_wait_op(&C, &lc, 5000));
    ck_assert_int_eq(la.status, 0);
    ck_assert_int_eq(la.outcome, FSM_FOUND);
    ck_assert_int_eq(lb.status, 0);
    ck_assert_int_eq(lb.outcome, FSM_NOT_FOUND);
    ck_assert_int_eq(lc.outcome, FSM_FOUND);
    ck_assert_uint_gt(C.s[l].rep.stats.barriers, s0.barriers);
    ck_assert_uint_le(C.s[l].rep.stats.barriers, s0.barriers + 2);
    ck_assert_uint_eq(C.s[l].rep.stats.batches, s0.batches);

    /* Mixed: while a batch is in flight, a claim and lookups queue up and
     * go into the next batch together, answered in order. */
    s0 = C.s[l].rep.stats;
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &busy, "busy", 1), 0);
    ck_assert_int_eq(C.s[l].rep.inflight, INFLIGHT_BATCH);
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &ld, "d"), 0); /* before */
    ck_assert_int_eq(cl_claim(&C, (unsigned)l, &cd, "d", 2), 0);
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &la, "d"), 0); /* after */
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &lb, "busy"), 0);
    ck_assert_int_eq(cl_lookup(&C, (unsigned)l, &lz, "zz"), 0);
    ck_assert(cl_wait_op(&C, &lz, 5000));
    ck_assert(busy.done && cd.done && ld.done && la.done && lb.done);
    ck_assert_int_eq(busy.outcome, FSM_ACCEPTED);
    ck_assert_int_eq(cd.outcome, FSM_ACCEPTED);
    ck_assert_int_eq(ld.status, 0);
    ck_assert_int_eq(ld.outcome, FSM_NOT_FOUND);
    ck_assert_int_eq(la.status, 0);
    ck_assert_int_eq(la.outcome, FSM_FOUND);
    ck_assert_int_eq(lb.outcome, FSM_FOUND);
    ck_assert_int_eq(lz.outcome, FSM_NOT_FOUND);
    ck_assert_uint_eq(C.s[l].rep.stats.batches, s0.batches + 2);
    ck_assert_uint_eq(C.s[l].rep.stats.batch_commands, s0.batch_commands + 6);
    ck_assert_uint_eq(C.s[l].rep.stats.barriers, s0.barriers);

    /* Lookups on a follower are refused (not applied). */
    ck_assert_int_eq(cl_lookup(&C, (unsigned)(l + 1) % 3, &la, "k0"),
                     REPLICA_E_NOTLEADER);
    sync_all((unsigned)l);
    check_invariants();
    cl_close(&C);
}
END_TEST

/* --- suite ---------------------------------------------------------------- */

Suite *scenarios_suite(void);
Suite *scenarios_suite(void)
{
    Suite *s = suite_create("scenarios");
    struct
    {
        const char *name;
        const TTest *t;
    } cases[] = {
        {"election", election_ready_gate},
        {"leader_kill", leader_kill},
        {"partition", partition_check_quorum},
        {"notleader_not_applied", notleader_not_applied},
        {"transfer", transfer},
        {"transfer_refused_at_once", transfer_refused_at_once},
        {"grow_shrink", grow_shrink},
        {"add_refused_before_proposal", add_refused_before_proposal},
        {"remove_leader", remove_leader},
        {"install_snapshot", install_snapshot},
        {"snapshot_on_demand", snapshot_on_demand},
        {"storage_fault_follower", storage_fault_follower},
        {"storage_fault_leader", storage_fault_leader},
        {"time_fast_leader", time_fast_leader},
        {"time_slow_leader", time_slow_leader},
        {"configure", configure_rejects},
        {"lookups", lookups},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, cases[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}
