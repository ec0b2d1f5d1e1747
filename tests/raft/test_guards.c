/* tests/raft/test_guards.c: the guards' decisions on synthetic raft state,
 * and the decorator's no-vote state and payload check on a cluster. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "cluster.h"
#include "raft/entry.h"
#include "raft/guard.h"

static struct cluster C;

/* A struct raft with a log of @n entries after @offset, terms from @terms. */
static void fake_log(struct raft *r,
                     struct raft_entry *entries,
                     size_t n,
                     raft_index offset,
                     const raft_term *terms)
{
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < n; i++) {
        memset(&entries[i], 0, sizeof entries[i]);
        entries[i].term = terms[i];
    }
    r->log.entries = entries;
    r->log.size = n + 1;
    r->log.front = 0;
    r->log.back = n;
    r->log.offset = offset;
    r->log.snapshot.last_index = offset;
    r->log.snapshot.last_term = offset > 0 ? 1 : 0;
}

START_TEST(term_of_ring_and_snapshot)
{
    struct raft r;
    struct raft_entry e[4];
    const raft_term t[4] = {2, 2, 3, 5};

    fake_log(&r, e, 4, 10, t);
    ck_assert_uint_eq(guard_term_of(&r, 0), 0);
    ck_assert_uint_eq(guard_term_of(&r, 10), 1); /* the snapshot's last */
    ck_assert_uint_eq(guard_term_of(&r, 11), 2);
    ck_assert_uint_eq(guard_term_of(&r, 13), 3);
    ck_assert_uint_eq(guard_term_of(&r, 14), 5);
    ck_assert_uint_eq(guard_term_of(&r, 15), 0);
    ck_assert_uint_eq(guard_term_of(&r, 9), 0);
    /* Wrapped ring: entries start at slot 3 of 4. */
    r.log.size = 4;
    r.log.front = 3;
    r.log.back = 2;
    ck_assert_uint_eq(guard_term_of(&r, 11), 5); /* slot 3 */
    ck_assert_uint_eq(guard_term_of(&r, 12), 2); /* slot 0 */
    ck_assert_uint_eq(guard_term_of(&r, 13), 2); /* slot 1 */
    ck_assert_uint_eq(guard_term_of(&r, 14), 0);
}
END_TEST

START_TEST(g2_drops_only_old_term_results_at_a_leader)
{
    struct raft r;
    struct raft_entry e[3];
    const raft_term t[3] = {2, 2, 4};
    struct raft_message m;

    fake_log(&r, e, 3, 0, t);
    memset(&m, 0, sizeof m);
    m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
    r.state = RAFT_LEADER;
    r.current_term = 4;
    r.last_stored = 2; /* entry of term 2 */
    ck_assert(guard_g2_drop(&r, &m));
    r.last_stored = 3; /* own term stored */
    ck_assert(!guard_g2_drop(&r, &m));
    r.last_stored = 2;
    r.state = RAFT_FOLLOWER;
    ck_assert(!guard_g2_drop(&r, &m));
    r.state = RAFT_LEADER;
    m.type = RAFT_IO_REQUEST_VOTE;
    ck_assert(!guard_g2_drop(&r, &m));
    /* Rejections and results of a higher term must get through. */
    m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
    m.append_entries_result.rejected = 2;
    ck_assert(!guard_g2_drop(&r, &m));
    m.append_entries_result.rejected = 0;
    m.append_entries_result.term = 5;
    ck_assert(!guard_g2_drop(&r, &m));
    m.append_entries_result.term = 4;
    ck_assert(guard_g2_drop(&r, &m));
    guard_test_set_off(GUARD_G2);
    ck_assert(!guard_g2_drop(&r, &m));
    guard_test_set_off(0);
}
END_TEST

/* G6b: an AppendEntries that makes raft roll back an uncommitted
 * configuration whose predecessor entry is gone from the log. */
START_TEST(g6b_rollback_needs_a_compacted_entry)
{
    struct raft r;
    struct raft_entry e[4], in[2];
    const raft_term t[4] = {3, 3, 3, 3}; /* entries 11..14 */
    struct raft_message m;

    fake_log(&r, e, 4, 10, t);
    r.current_term = 3;
    r.configuration_index = 8; /* from the installed snapshot: not in log */
    r.configuration_uncommitted_index = 13;
    memset(&m, 0, sizeof m);
    m.type = RAFT_IO_APPEND_ENTRIES;
    m.append_entries.term = 4;
    m.append_entries.prev_log_index = 11;
    m.append_entries.prev_log_term = 3;
    memset(in, 0, sizeof in);
    in[0].term = 3; /* 12 matches */
    in[1].term = 4; /* 13 conflicts: rollback of the uncommitted 13 */
    m.append_entries.entries = in;
    m.append_entries.n_entries = 2;
    ck_assert(guard_g6_rollback_stop(&r, &m));
    /* Conflict above the uncommitted index: no rollback. */
    in[1].term = 3;
    ck_assert(!guard_g6_rollback_stop(&r, &m));
    in[1].term = 4;
    /* prev does not match: raft rejects without truncating. */
    m.append_entries.prev_log_term = 2;
    ck_assert(!guard_g6_rollback_stop(&r, &m));
    m.append_entries.prev_log_term = 3;
    /* A stale leader's request is rejected. */
    m.append_entries.term = 2;
    ck_assert(!guard_g6_rollback_stop(&r, &m));
    m.append_entries.term = 4;
    /* The committed configuration entry still in the log: raft's own
     * rollback finds it (G6 keeps it there). */
    r.configuration_index = 11;
    ck_assert(!guard_g6_rollback_stop(&r, &m));
    r.configuration_index = 8;
    r.configuration_uncommitted_index = 0;
    ck_assert(!guard_g6_rollback_stop(&r, &m));
    r.configuration_uncommitted_index = 13;
    guard_test_set_off(GUARD_G6);
    ck_assert(!guard_g6_rollback_stop(&r, &m));
    guard_test_set_off(0);
}
END_TEST

START_TEST(g5_g6_g8_decisions)
{
    struct raft r;

    memset(&r, 0, sizeof r);
    ck_assert_int_eq(guard_g5_check(&r), 0);
    r.configuration_uncommitted_index = 7;
    ck_assert_int_eq(guard_g5_check(&r), RAFT_BUSY);
    /* After a restart (B6) the configuration in force may be ahead of what
     * is applied: no snapshot may record it. */
    r.configuration_uncommitted_index = 0;
    r.configuration_index = 50;
    r.last_applied = 49;
    ck_assert_int_eq(guard_g5_check(&r), RAFT_BUSY);
    r.last_applied = 50;
    ck_assert_int_eq(guard_g5_check(&r), 0);
    r.configuration_index = 0;
    r.last_applied = 0;
    r.configuration_uncommitted_index = 7;

    /* G6: keep entries down to the committed configuration's. */
    r.configuration_index = 100;
    r.last_applied = 1000;
    ck_assert_uint_eq(guard_g6_trailing(&r, 128), 901);
    r.last_applied = 150;
    ck_assert_uint_eq(guard_g6_trailing(&r, 128), 128);
    guard_test_set_off(GUARD_G6);
    r.last_applied = 1000;
    ck_assert_uint_eq(guard_g6_trailing(&r, 128), 128);
    guard_test_set_off(0);

    /* G8: truncating the configuration taken as committed at start. */
    r.configuration_uncommitted_index = 0;
    r.configuration_index = 42;
    ck_assert(guard_b6_stale(&r, 42));
    ck_assert(guard_b6_stale(&r, 40));
    ck_assert(!guard_b6_stale(&r, 43));
    r.configuration_uncommitted_index = 42; /* raft rolls that back */
    ck_assert(!guard_b6_stale(&r, 42));
}
END_TEST

START_TEST(switch_list_parses)
{
    unsigned mask;

    ck_assert_int_eq(guard_test_parse("g1,g2", &mask), 0);
    ck_assert_uint_eq(mask, GUARD_G1 | GUARD_G2);
    ck_assert_int_eq(guard_test_parse("", &mask), 0);
    ck_assert_uint_eq(mask, 0);
    ck_assert_int_eq(guard_test_parse("g7,g6,g8,g4,g5,g9", &mask), 0);
    ck_assert_uint_eq(
        mask, GUARD_G4 | GUARD_G5 | GUARD_G6 | GUARD_G7 | GUARD_G8 | GUARD_G9);
    ck_assert_int_eq(guard_test_parse("g3", &mask), -EINVAL);
    ck_assert_int_eq(guard_test_parse("g1,bogus", &mask), -EINVAL);
}
END_TEST

static bool leader_cond(struct cluster *c, void *arg)
{
    (void)arg;
    return cl_leader(c) >= 0;
}

/* Two of three servers in no-vote state: nobody can be elected (neither of
 * them campaigns or votes, the third gets no votes). Lifting it on one
 * (its log reaches the cut index) lets the cluster elect again. */
START_TEST(novote_neither_votes_nor_campaigns)
{
    int l;
    unsigned a, b;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    ck_assert_int_ge(l, 0);
    a = (unsigned)(l + 1) % 3;
    b = (unsigned)(l + 2) % 3;
    rio_set_novote(&C.s[a].rep.rio, 1000000);
    rio_set_novote(&C.s[b].rep.rio, 1000000);
    /* Isolate the leader: it steps down (check-quorum); a and b do not
     * campaign. */
    cl_disconnect_all(&C, (unsigned)l);
    ck_assert(cl_wait_no_leader(&C, 10000));
    cl_reconnect_all(&C, (unsigned)l);
    /* l campaigns, a and b drop its RequestVotes. */
    ck_assert(!cl_step_until(&C, leader_cond, NULL, 15000));
    ck_assert(rio_novote(&C.s[a].rep.rio));
    ck_assert_uint_eq(rio_novote_index(&C.s[a].rep.rio), 1000000);
    ck_assert_uint_gt(C.s[a].rep.rio.stats.novote_dropped, 0);
    ck_assert_uint_gt(C.s[b].rep.rio.stats.novote_dropped, 0);
    /* b's log has passed the cut index: it votes and campaigns again. */
    rio_set_novote(&C.s[b].rep.rio, 1);
    /* What metrics show: 0 at once, before vote traffic clears the state. */
    ck_assert_uint_eq(rio_novote_index(&C.s[b].rep.rio), 0);
    ck_assert(cl_step_until(&C, leader_cond, NULL, 15000));
    ck_assert(cl_leader(&C) != (int)a);
    ck_assert(!rio_novote(&C.s[b].rep.rio));
    ck_assert_msg(!C.violation, "%s", C.violation_msg);
    cl_close(&C);
}
END_TEST

static void raw_cb(struct raft_apply *req, int status, void *result)
{
    (void)req;
    (void)status;
    (void)result;
}

/* B8: a payload whose length is not a multiple of 8 never reaches the
 * store; the decorator fails stop (here: the harness counts it). */
START_TEST(unpadded_payload_is_refused)
{
    static struct raft_apply req;
    struct raft_buffer buf;
    int l, rv;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    buf.len = 12;
    buf.base = raft_malloc(12);
    memset(buf.base, 0, 12);
    rv = raft_apply(cl_raft(&C, (unsigned)l), &req, &buf, 1, raw_cb);
    ck_assert_int_ne(rv, 0);
    raft_free(buf.base); /* refused: still ours */
    ck_assert_uint_eq(C.s[l].fatal_hits, 1);
    ck_assert_str_eq(C.s[l].fatal_what, "append");
    cl_close(&C);
}
END_TEST

static bool op_done_cond(struct cluster *c, void *arg)
{
    (void)c;
    return ((struct cl_op *)arg)->done;
}

/* G6 pins the committed configuration entry in the log; the leader
 * refreshes the configuration (a spare added and removed) so the log stays
 * compactable. With threshold 8 and trailing 4 the limit is 36 entries. */
START_TEST(g6_refresh_keeps_the_log_compactable)
{
    struct cl_op op;
    struct raft *r;
    char key[32];
    int l;

    cl_set_snapshot(&C, 8, 4);
    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    r = cl_raft(&C, (unsigned)l);
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(cl_claim(&C, (unsigned)l, &op, key, (uint64_t)i + 1),
                         0);
        ck_assert(cl_step_until(&C, op_done_cond, &op, 5000));
        ck_assert_int_eq(op.outcome, FSM_ACCEPTED);
    }
    cl_step_ms(&C, 1000);
    ck_assert_uint_gt(C.s[l].rep.config_refreshes, 0);
    /* The committed configuration is recent, the log was compacted, and the
     * spare is gone again. */
    ck_assert_uint_le(r->last_applied - r->configuration_index, 36 + 8);
    ck_assert_uint_gt(r->log.snapshot.last_index, 100);
    ck_assert_uint_eq(r->configuration.n, 3);
    ck_assert(cl_same_applied(&C));
    cl_close(&C);
}
END_TEST

static bool in_config_cond(struct cluster *c, void *arg)
{
    struct raft *r = arg;
    (void)c;
    return r->configuration.n == 2;
}

/* An interrupted removal (the id retired, raft_remove never ran) is
 * finished by the ready leader. */
START_TEST(retired_member_is_removed_by_the_leader)
{
    struct fsm_cmd cmd;
    struct cl_op op;
    unsigned f;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    f = (unsigned)(l + 1) % 3;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_RETIRE_MEMBER;
    cmd.u.retire_id = f + 1;
    ck_assert_int_eq(cl_submit(&C, (unsigned)l, &op, &cmd), 0);
    ck_assert(cl_step_until(&C, op_done_cond, &op, 5000));
    ck_assert_int_eq(op.outcome, FSM_OK);
    ck_assert(
        cl_step_until(&C, in_config_cond, cl_raft(&C, (unsigned)l), 10000));
    ck_assert_uint_eq(C.s[l].rep.reconcile_removals, 1);
    ck_assert(C.s[f].retired_hook);
    cl_close(&C);
}
END_TEST

/* Group commit: everything queued while a batch is in flight goes into the
 * next entry, and no entry is over 1 MiB (docs/design.md §4): 4,000 claims with
 * 256-byte keys (~1.2 MB of commands) need at least two entries. */
START_TEST(batches_group_and_stay_under_1mib)
{
    enum { N = 4000 };
    static struct cl_op ops[N];
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    char key[257];
    uint64_t b0;
    int l;

    cl_init(&C, 3, 3);
    l = cl_wait_ready(&C, 10000);
    b0 = C.s[l].rep.stats.batches;
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "%0256d", i);
        cmd = cl_claim_cmd(&cl, key, (uint64_t)i + 1);
        ck_assert_int_eq(cl_submit(&C, (unsigned)l, &ops[i], &cmd), 0);
    }
    for (int i = 0; i < N; i++) {
        ck_assert(cl_wait_op(&C, &ops[i], 20000));
        ck_assert_int_eq(ops[i].status, 0);
        ck_assert_int_eq(ops[i].outcome, FSM_ACCEPTED);
    }
    /* One entry went out when the first claim arrived; the rest queued
     * behind it and were split only by the size bound. */
    ck_assert_uint_ge(C.s[l].rep.stats.batches - b0, 3);
    ck_assert_uint_le(C.s[l].rep.stats.batches - b0, 4);
    ck_assert_uint_le(C.s[l].max_entry_len, ENTRY_MAX);
    ck_assert_uint_gt(C.s[l].max_entry_len, 900u * 1024);
    ck_assert_uint_eq(C.s[l].rep.stats.malformed_entries, 0);
    ck_assert(cl_same_applied(&C));
    cl_close(&C);
}
END_TEST

Suite *guards_suite(void);
Suite *guards_suite(void)
{
    Suite *s = suite_create("guards");
    TCase *tc = tcase_create("decisions");
    TCase *tn = tcase_create("decorator");

    tcase_add_test(tc, term_of_ring_and_snapshot);
    tcase_add_test(tc, g2_drops_only_old_term_results_at_a_leader);
    tcase_add_test(tc, g5_g6_g8_decisions);
    tcase_add_test(tc, g6b_rollback_needs_a_compacted_entry);
    tcase_add_test(tc, switch_list_parses);
    suite_add_tcase(s, tc);
    tcase_set_timeout(tn, 120);
    tcase_add_test(tn, novote_neither_votes_nor_campaigns);
    tcase_add_test(tn, unpadded_payload_is_refused);
    tcase_add_test(tn, g6_refresh_keeps_the_log_compactable);
    tcase_add_test(tn, retired_member_is_removed_by_the_leader);
    tcase_add_test(tn, batches_group_and_stay_under_1mib);
    suite_add_tcase(s, tn);
    return s;
}
