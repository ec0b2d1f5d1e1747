/* The restore fence: fsm_rebase and the claim rules of a restored cluster
 * (fsm.h, "Restored clusters"; docs/state-machine.md). Loop tests run once
 * per path (_i: FH_DIRECT, FH_PROTOBUF).
 *
 * Every test builds a "source" cluster, takes its snapshot (what a backup
 * holds), restores and rebases it into a new instance at a later time, and
 * checks the answers there. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *fence_suite(void);

/* fh_settings(): max_window, max_skew, and max_ttl, the longest retention
 * they allow. T1: the source's claims; TR: the restore, 2 minutes later. */
#define W          300000ull
#define K          60000ull
#define TTL        FSM_MAX_TTL_CEIL
#define T1         (FH_T0 + 1000ull)
#define TR         (FH_T0 + 120000ull)
#define NEW_MEMBER 0x99ull

/* The source: a TTL nonce, a signed nonce, a completed and a released
 * IDEMPOTENT key. */
static void fill_source(struct fh *h, int path)
{
    struct fsm_settings s;
    struct fsm_claim c;
    struct fh_res r;
    struct fsm_cmd cmd;

    fh_settings(&s);
    fh_init_booted(h, path, &s, FH_T0);
    fh_claim(&c, FSM_KIND_NONCE, "s", "ttl", 1);
    c.ttl_ms = 3600000;
    fh_assert_is(fh_do_claim(h, T1, &c, NULL), FSM_ACCEPTED);
    fh_claim(&c, FSM_KIND_NONCE, "s", "signed", 2);
    fh_claim_ts(&c, T1, W);
    fh_assert_is(fh_do_claim(h, T1, &c, NULL), FSM_ACCEPTED);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "done", 3);
    c.ttl_ms = 3600000;
    fh_assert_is(fh_do_claim(h, T1, &c, &r), FSM_ACCEPTED);
    cmd = fh_cmd_complete("s", "done", r.owner_token, "res", 3);
    fh_assert_is(fh_do(h, T1, &cmd, NULL), FSM_COMPLETED);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "released", 4);
    c.ttl_ms = 3600000;
    fh_assert_is(fh_do_claim(h, T1, &c, &r), FSM_ACCEPTED);
    cmd = fh_cmd_release("s", "released", r.owner_token, false, NULL, 0);
    fh_assert_is(fh_do(h, T1, &cmd, NULL), FSM_RELEASED);
}

static void new_id(uint8_t id[FSM_CLUSTER_ID_LEN])
{
    memset(id, 0xaa, FSM_CLUSTER_ID_LEN);
}

/* The source's snapshot, restored into @dst and rebased at @at. */
static void restore_into(const struct fh *src,
                         struct fh *dst,
                         int path,
                         bool accept,
                         uint64_t at)
{
    struct fsm_rebase rb;
    char err[ERR_MSG_SIZE];
    size_t len;
    uint8_t *snap = fh_snapshot(src->f, &len);
    struct fsm *g = NULL;

    ck_assert_int_eq(fsm_restore_build(snap, len, &g, err), 0);
    free(snap);
    memset(&rb, 0, sizeof rb);
    new_id(rb.cluster_id);
    rb.member.id = NEW_MEMBER;
    strcpy(rb.member.raft_addr, "127.0.0.1:9100");
    strcpy(rb.member.client_addr, "127.0.0.1:9000");
    rb.member.role = FSM_ROLE_VOTER;
    rb.time_ms = at;
    rb.accept_replay_window = accept;
    ck_assert_msg(fsm_rebase(g, &rb, err) == 0, "rebase: %s", err);
    dst->f = g;
    dst->path = path;
    dst->index = fsm_last_index(g);
}

static enum fsm_outcome claim_at(struct fh *h,
                                 uint64_t t,
                                 enum fsm_kind kind,
                                 const char *key,
                                 uint64_t rid,
                                 const uint64_t *ts,
                                 struct fh_res *out)
{
    struct fsm_claim c;

    fh_claim(&c, kind, "s", key, rid);
    if (ts != NULL) {
        fh_claim_ts(&c, *ts, W);
    } else {
        c.ttl_ms = 3600000;
    }
    return fh_do_claim(h, t, &c, out);
}

START_TEST(test_fence_rebase_state)
{
    struct fh src, h;
    struct fsm_fence_info fi;
    uint8_t id[FSM_CLUSTER_ID_LEN];

    fill_source(&src, _i);
    restore_into(&src, &h, _i, false, TR);
    new_id(id);
    ck_assert_mem_eq(fsm_cluster_id(h.f), id, FSM_CLUSTER_ID_LEN);
    ck_assert_uint_eq(fsm_n_members(h.f), 1);
    ck_assert_uint_eq(fsm_member(h.f, 0)->id, NEW_MEMBER);
    ck_assert_uint_eq(fsm_n_retired(h.f), 0);
    ck_assert_uint_eq(fsm_now(h.f), TR);
    ck_assert_uint_eq(fsm_last_index(h.f), fsm_last_index(src.f));
    ck_assert_uint_eq(fsm_n_records(h.f), fsm_n_records(src.f));
    fsm_fence(h.f, &fi);
    ck_assert(fi.active);
    ck_assert_mem_eq(fi.source_cluster_id, fsm_cluster_id(src.f),
                     FSM_CLUSTER_ID_LEN);
    ck_assert_uint_eq(fi.source_index, fsm_last_index(src.f));
    ck_assert_uint_eq(fi.restore_time_ms, TR);
    ck_assert_uint_eq(fi.stale_ts_ms, TR + K);
    ck_assert_uint_eq(fi.until_ms, TR + TTL);
    ck_assert_uint_eq(fi.lift_ms, TR + TTL);
    fsm_fence(src.f, &fi);
    ck_assert(!fi.active);
    fh_close(&src);
    fh_close(&h);
}
END_TEST

/* Claims of the backup's keys keep their answers. */
START_TEST(test_fence_backup_keys_answer)
{
    struct fh src, h;
    struct fh_res r;
    uint64_t ts = T1;

    fill_source(&src, _i);
    restore_into(&src, &h, _i, false, TR);
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "ttl", 50, NULL, NULL),
                 FSM_REPLAYED);
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "ttl", 1, NULL, &r),
                 FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "signed", 51, &ts, NULL),
                 FSM_REPLAYED);
    fh_assert_is(
        claim_at(&h, TR + 1, FSM_KIND_IDEMPOTENT, "done", 52, NULL, &r),
        FSM_DUPLICATE);
    ck_assert_uint_eq(r.result_len, 3);
    ck_assert_mem_eq(r.result, "res", 3);
    fh_close(&src);
    fh_close(&h);
}
END_TEST

/* New acceptances while the window is open: refused, or STALE. */
START_TEST(test_fence_refuses)
{
    struct fh src, h;
    struct fh_res r;
    uint64_t ts;

    fill_source(&src, _i);
    restore_into(&src, &h, _i, false, TR);
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "new", 60, NULL, &r),
                 FSM_FAILED_PRECONDITION);
    ck_assert_msg(strstr(r.reason, "replay window open until") != NULL,
                  "reason: %s", r.reason);
    ck_assert_uint_eq(r.retry_after_ms, TTL);
    fh_assert_is(
        claim_at(&h, TR + 1, FSM_KIND_IDEMPOTENT, "new2", 61, NULL, NULL),
        FSM_FAILED_PRECONDITION);
    /* A takeover of a released backup key is a new acceptance too. */
    fh_assert_is(
        claim_at(&h, TR + 1, FSM_KIND_IDEMPOTENT, "released", 62, NULL, &r),
        FSM_FAILED_PRECONDITION);
    ck_assert_uint_eq(r.attempts, 1); /* kept as evidence */
    ts = TR + K;                      /* the last STALE ts */
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "sig", 63, &ts, &r),
                 FSM_STALE);
    ts = TR + K;
    fh_assert_is(
        claim_at(&h, TR + 1, FSM_KIND_IDEMPOTENT, "sig2", 64, &ts, NULL),
        FSM_STALE);
    ts = TR + K + 1; /* younger than anything the source accepted */
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "sig", 65, &ts, NULL),
                 FSM_ACCEPTED);
    /* Signed but IDEMPOTENT: the window rule does not bound its TTL. */
    fh_assert_is(
        claim_at(&h, TR + 1, FSM_KIND_IDEMPOTENT, "sig3", 66, &ts, NULL),
        FSM_FAILED_PRECONDITION);
    fh_close(&src);
    fh_close(&h);
}
END_TEST

/* At restore_until the refusal ends; after restore_lift the fence is gone
 * and the snapshot is format 1 again. */
START_TEST(test_fence_lifts)
{
    struct fh src, h;
    struct fsm_fence_info fi;
    size_t len;
    uint8_t *snap;

    fill_source(&src, _i);
    restore_into(&src, &h, _i, false, TR);
    snap = fh_snapshot(h.f, &len);
    ck_assert_uint_eq(snap[8], 2);
    free(snap);
    fh_assert_is(claim_at(&h, TR + TTL, FSM_KIND_NONCE, "a", 70, NULL, NULL),
                 FSM_FAILED_PRECONDITION);
    fsm_fence(h.f, &fi);
    ck_assert(fi.active);
    fh_assert_is(
        claim_at(&h, TR + TTL + 1, FSM_KIND_NONCE, "a", 71, NULL, NULL),
        FSM_ACCEPTED);
    fsm_fence(h.f, &fi);
    ck_assert(!fi.active);
    snap = fh_snapshot(h.f, &len);
    ck_assert_uint_eq(snap[8], 1);
    free(snap);
    fh_close(&src);
    fh_close(&h);
}
END_TEST

/* --accept-replay-window: only the nonce rule stays. */
START_TEST(test_fence_accepted_window)
{
    struct fh src, h;
    struct fsm_fence_info fi;
    uint64_t ts = TR;

    fill_source(&src, _i);
    restore_into(&src, &h, _i, true, TR);
    fsm_fence(h.f, &fi);
    ck_assert(fi.active);
    ck_assert_uint_eq(fi.until_ms, 0);
    ck_assert_uint_eq(fi.lift_ms, TR + K + W);
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "new", 80, NULL, NULL),
                 FSM_ACCEPTED);
    fh_assert_is(
        claim_at(&h, TR + 1, FSM_KIND_IDEMPOTENT, "released", 81, NULL, NULL),
        FSM_ACCEPTED);
    fh_assert_is(claim_at(&h, TR + 1, FSM_KIND_NONCE, "sig", 82, &ts, NULL),
                 FSM_STALE);
    /* Past lift the window rule alone makes those STALE. */
    fh_tick(&h, TR + K + W + 1);
    fsm_fence(h.f, &fi);
    ck_assert(!fi.active);
    fh_assert_is(
        claim_at(&h, TR + K + W + 2, FSM_KIND_NONCE, "sig", 83, &ts, NULL),
        FSM_STALE);
    fh_close(&src);
    fh_close(&h);
}
END_TEST

/* Replicated state: a replica restored from the rebased state's snapshot
 * answers and snapshots byte-identically through the same batches. */
START_TEST(test_fence_deterministic)
{
    struct fh src, a, b;
    struct fh_res ra, rb;
    char err[ERR_MSG_SIZE];
    size_t len;
    uint8_t *snap;
    uint64_t t = TR;

    fill_source(&src, _i);
    restore_into(&src, &a, _i, false, TR);
    snap = fh_snapshot(a.f, &len);
    b.f = fsm_new();
    b.path = _i;
    b.index = a.index;
    ck_assert_int_eq(fsm_restore(b.f, snap, len, err), 0);
    free(snap);
    for (uint64_t i = 0; i < 40; i++) {
        char key[16];
        uint64_t ts = TR + K - 20 + i; /* across the STALE edge */

        t += 250;
        snprintf(key, sizeof key, "k%llu", (unsigned long long)(i % 7));
        fh_assert_is(
            claim_at(&a, t, i % 3 == 0 ? FSM_KIND_IDEMPOTENT : FSM_KIND_NONCE,
                     key, 100 + i, i % 2 ? &ts : NULL, &ra),
            claim_at(&b, t, i % 3 == 0 ? FSM_KIND_IDEMPOTENT : FSM_KIND_NONCE,
                     key, 100 + i, i % 2 ? &ts : NULL, &rb));
        ck_assert_str_eq(ra.reason, rb.reason);
    }
    snap = fh_snapshot(a.f, &len);
    fh_assert_snapshot(&b, snap, len);
    free(snap);
    fh_close(&src);
    fh_close(&a);
    fh_close(&b);
}
END_TEST

/* A damaged fence field is refused by restore; so is a rebase that cannot
 * make a new cluster. */
START_TEST(test_fence_refusals)
{
    struct fh src, h, empty;
    struct fsm_rebase rb;
    char err[ERR_MSG_SIZE];
    size_t len;
    uint8_t *snap;
    struct fsm *g = NULL;

    fill_source(&src, 0);
    restore_into(&src, &h, 0, false, TR);
    memset(&rb, 0, sizeof rb);
    new_id(rb.cluster_id);
    rb.member = *fsm_member(h.f, 0);
    ck_assert_int_eq(fsm_rebase(h.f, &rb, err), FSM_E_MALFORMED); /* fenced */
    ck_assert_msg(strstr(err, "fence") != NULL, "%s", err);
    memcpy(rb.cluster_id, fsm_cluster_id(src.f), FSM_CLUSTER_ID_LEN);
    ck_assert_int_eq(fsm_rebase(src.f, &rb, err), FSM_E_MALFORMED); /* same */
    memset(rb.cluster_id, 0, FSM_CLUSTER_ID_LEN);
    ck_assert_int_eq(fsm_rebase(src.f, &rb, err), FSM_E_MALFORMED); /* zero */
    new_id(rb.cluster_id);
    rb.member.role = FSM_ROLE_STANDBY;
    ck_assert_int_eq(fsm_rebase(src.f, &rb, err), FSM_E_MALFORMED);
    fh_init(&empty, 0);
    rb.member.role = FSM_ROLE_VOTER;
    ck_assert_int_eq(fsm_rebase(empty.f, &rb, err), FSM_E_MALFORMED);
    /* The source is unchanged by the refusals. */
    ck_assert_uint_eq(fsm_now(src.f), T1);
    /* Corrupt restore_lift (the last fence field) and fix the checksum:
     * restore_lift below restore_until is refused. */
    snap = fh_snapshot(h.f, &len);
    {
        size_t off = 8 + 4 + 4 + 8 + 8 + 1 + 16 + 16 + 4 + 48 + 1 + 24 + 8 + 1 +
                     16 + 8 + 8 + 8 + 8;
        memset(snap + off, 0, 8);
        le_put32(snap + len - 4, crc32c(0, snap, len - 4));
    }
    ck_assert_int_eq(fsm_restore_build(snap, len, &g, err), FSM_E_MALFORMED);
    ck_assert_msg(strstr(err, "restore fence") != NULL, "%s", err);
    free(snap);
    fh_close(&empty);
    fh_close(&src);
    fh_close(&h);
}
END_TEST

Suite *fence_suite(void)
{
    Suite *s = suite_create("fence");
    TCase *tc = tcase_create("fence");

    tcase_add_loop_test(tc, test_fence_rebase_state, 0, 2);
    tcase_add_loop_test(tc, test_fence_backup_keys_answer, 0, 2);
    tcase_add_loop_test(tc, test_fence_refuses, 0, 2);
    tcase_add_loop_test(tc, test_fence_lifts, 0, 2);
    tcase_add_loop_test(tc, test_fence_accepted_window, 0, 2);
    tcase_add_loop_test(tc, test_fence_deterministic, 0, 2);
    tcase_add_test(tc, test_fence_refusals);
    suite_add_tcase(s, tc);
    return s;
}
