/* Quotas (docs/state-machine.md, "Quotas"): per scope pattern limits,
 * enforced at apply for new records only, counted like the cluster's
 * figures so that a replica that applied the log and one restored from a
 * snapshot answer alike. Loop tests run once per path (_i: FH_DIRECT,
 * FH_PROTOBUF). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *quota_suite(void);

#define T1  (FH_T0 + 1000ull)
#define DAY 86400000ull

static enum fsm_outcome quota(struct fh *h,
                              const char *pattern,
                              uint64_t max_records,
                              uint64_t max_bytes,
                              bool remove,
                              struct fh_res *r)
{
    struct fsm_cmd cmd = fh_cmd_quota(pattern, max_records, max_bytes, remove);

    return fh_do(h, T1, &cmd, r);
}

/* A claim of (@scope, @key) with @ttl: its outcome; the owner token of an
 * IDEMPOTENT acceptance in *@tok (may be NULL). */
static enum fsm_outcome claim(struct fh *h,
                              uint64_t at,
                              enum fsm_kind kind,
                              const char *scope,
                              const char *key,
                              uint64_t ttl,
                              struct fsm_token *tok,
                              struct fh_res *r)
{
    static uint64_t rid = 1;
    struct fsm_claim c;

    fh_claim(&c, kind, scope, key, rid++);
    c.ttl_ms = ttl;
    fh_do_claim(h, at, &c, r);
    if (tok != NULL) {
        *tok = r->owner_token;
    }
    return r->outcome;
}

/* Quota @i of @f: pattern and usage. */
static struct fsm_quota_info info(const struct fsm *f, size_t i)
{
    struct fsm_quota_info q;

    ck_assert(fsm_quota(f, i, &q));
    return q;
}

START_TEST(test_quota_enforced_per_tenant)
{
    struct fh h;
    struct fh_res r;
    struct fsm_token tok[5];
    char key[16];

    fh_init_booted(&h, _i, NULL, FH_T0);
    ck_assert_uint_eq(fsm_schema_version(h.f), FSM_SCHEMA_VERSION);
    fh_assert_is(quota(&h, "tenant-a*", 5, 0, false, &r), FSM_OK);
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "a%d", i);
        fh_assert_is(claim(&h, T1, FSM_KIND_IDEMPOTENT, "tenant-a1", key, DAY,
                           &tok[i], &r),
                     FSM_ACCEPTED);
    }
    fh_assert_is(
        claim(&h, T1, FSM_KIND_NONCE, "tenant-a2", "sixth", DAY, NULL, &r),
        FSM_RESOURCE_EXHAUSTED);
    ck_assert_str_eq(r.reason, "the quota tenant-a*'s max_records is reached");
    /* Another tenant is unaffected. */
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "b%d", i);
        fh_assert_is(
            claim(&h, T1, FSM_KIND_NONCE, "tenant-b", key, DAY, NULL, &r),
            FSM_ACCEPTED);
    }
    /* A's records still complete and answer; replays still answer. */
    for (int i = 0; i < 5; i++) {
        struct fsm_cmd cmd;
        snprintf(key, sizeof key, "a%d", i);
        cmd = fh_cmd_complete("tenant-a1", key, tok[i], "done", 4);
        fh_assert_is(fh_do(&h, T1, &cmd, NULL), FSM_COMPLETED);
    }
    fh_assert_is(
        claim(&h, T1, FSM_KIND_IDEMPOTENT, "tenant-a1", "a0", DAY, NULL, &r),
        FSM_DUPLICATE);
    ck_assert_uint_eq(fsm_n_quotas(h.f), 1);
    ck_assert_uint_eq(info(h.f, 0).records, 5);
    ck_assert_uint_gt(info(h.f, 0).bytes, 0);
    fh_close(&h);
}
END_TEST

/* Exact beats prefix; the longest prefix wins; a scope matching none is
 * bound only by the cluster's limits. */
START_TEST(test_quota_charging)
{
    struct fh h;
    struct fh_res r;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(quota(&h, "t*", 100, 0, false, &r), FSM_OK);
    fh_assert_is(quota(&h, "tenant-*", 100, 0, false, &r), FSM_OK);
    fh_assert_is(quota(&h, "tenant-x", 100, 0, false, &r), FSM_OK);
    fh_assert_is(quota(&h, "tenant-x*", 100, 0, false, &r), FSM_OK);
    claim(&h, T1, FSM_KIND_NONCE, "tenant-x", "k", DAY, NULL, &r);  /* exact */
    claim(&h, T1, FSM_KIND_NONCE, "tenant-xy", "k", DAY, NULL, &r); /* x* */
    claim(&h, T1, FSM_KIND_NONCE, "tenant-y", "k", DAY, NULL, &r);  /* - */
    claim(&h, T1, FSM_KIND_NONCE, "tenant-z", "k", DAY, NULL, &r);  /* - */
    claim(&h, T1, FSM_KIND_NONCE, "top", "k", DAY, NULL, &r);       /* t* */
    claim(&h, T1, FSM_KIND_NONCE, "other", "k", DAY, NULL, &r);     /* none */
    /* Sorted by pattern bytes: "t*", "tenant-*", "tenant-x", "tenant-x*". */
    ck_assert_uint_eq(fsm_n_quotas(h.f), 4);
    ck_assert_str_eq(info(h.f, 0).pattern, "t*");
    ck_assert_uint_eq(info(h.f, 0).records, 1);
    ck_assert_str_eq(info(h.f, 1).pattern, "tenant-*");
    ck_assert_uint_eq(info(h.f, 1).records, 2);
    ck_assert_str_eq(info(h.f, 2).pattern, "tenant-x");
    ck_assert_uint_eq(info(h.f, 2).records, 1);
    ck_assert_str_eq(info(h.f, 3).pattern, "tenant-x*");
    ck_assert_uint_eq(info(h.f, 3).records, 1);
    /* Removing the exact pattern moves its record to the prefix. */
    fh_assert_is(quota(&h, "tenant-x", 0, 0, true, &r), FSM_OK);
    ck_assert_uint_eq(fsm_n_quotas(h.f), 3);
    ck_assert_uint_eq(info(h.f, 2).records, 2);
    fh_assert_is(quota(&h, "tenant-x", 0, 0, true, &r), FSM_NOT_FOUND);
    fh_close(&h);
}
END_TEST

/* Bytes: the limit is on counted bytes (records plus PENDING
 * reservations); a quota is refused without limits, beyond 64, or with a
 * bad pattern. */
START_TEST(test_quota_bytes_and_refusals)
{
    struct fh h;
    struct fh_res r;
    char pat[16];

    static uint8_t result[FSM_RESULT_MAX];
    struct fsm_token tok[3];
    char key[8];

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(quota(&h, "big", 0, 200000, false, &r), FSM_OK);
    for (int i = 0; i < 3; i++) { /* each reserves 64 KiB for its result */
        snprintf(key, sizeof key, "%d", i + 1);
        fh_assert_is(
            claim(&h, T1, FSM_KIND_IDEMPOTENT, "big", key, DAY, &tok[i], &r),
            FSM_ACCEPTED);
    }
    fh_assert_is(claim(&h, T1, FSM_KIND_IDEMPOTENT, "big", "4", DAY, NULL, &r),
                 FSM_RESOURCE_EXHAUSTED);
    ck_assert_str_eq(r.reason, "the quota big's max_bytes is reached");
    ck_assert_uint_le(info(h.f, 0).bytes, 200000);
    /* The full quota never refuses its records' completes, largest results
     * included, and stays within its limit. */
    memset(result, 'x', sizeof result);
    for (int i = 0; i < 3; i++) {
        struct fsm_cmd cmd;
        snprintf(key, sizeof key, "%d", i + 1);
        cmd = fh_cmd_complete("big", key, tok[i], result, sizeof result);
        fh_assert_is(fh_do(&h, T1, &cmd, NULL), FSM_COMPLETED);
        ck_assert_uint_le(info(h.f, 0).bytes, 200000);
    }
    /* Raising the limit applies at once. */
    fh_assert_is(quota(&h, "big", 0, 400000, false, &r), FSM_OK);
    fh_assert_is(claim(&h, T1, FSM_KIND_IDEMPOTENT, "big", "4", DAY, NULL, &r),
                 FSM_ACCEPTED);

    fh_assert_is(quota(&h, "x", 0, 0, false, &r), FSM_INVALID_ARGUMENT);
    fh_assert_is(quota(&h, "a*b", 1, 0, false, &r), FSM_INVALID_ARGUMENT);
    fh_assert_is(quota(&h, "a\tb", 1, 0, false, &r), FSM_INVALID_ARGUMENT);
    for (int i = 1; i < FSM_QUOTAS_MAX; i++) {
        snprintf(pat, sizeof pat, "p%02d*", i);
        fh_assert_is(quota(&h, pat, 1, 0, false, &r), FSM_OK);
    }
    ck_assert_uint_eq(fsm_n_quotas(h.f), FSM_QUOTAS_MAX);
    fh_assert_is(quota(&h, "one-too-many", 1, 0, false, &r),
                 FSM_FAILED_PRECONDITION);
    fh_assert_is(quota(&h, "p01*", 2, 0, false, &r), FSM_OK); /* an update */
    fh_close(&h);
}
END_TEST

/* Expiry frees quota by tick, before pruning gets there. */
START_TEST(test_quota_expiry_frees)
{
    struct fh h;
    struct fh_res r;
    char key[16];

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(quota(&h, "a*", 3, 0, false, &r), FSM_OK);
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "k%d", i);
        fh_assert_is(claim(&h, T1, FSM_KIND_NONCE, "a", key, 5000, NULL, &r),
                     FSM_ACCEPTED);
    }
    fh_assert_is(claim(&h, T1, FSM_KIND_NONCE, "a", "late", 5000, NULL, &r),
                 FSM_RESOURCE_EXHAUSTED);
    fh_assert_is(
        claim(&h, T1 + 10000, FSM_KIND_NONCE, "a", "late", 5000, NULL, &r),
        FSM_ACCEPTED);
    ck_assert_uint_eq(info(h.f, 0).records, 1);
    fh_close(&h);
}
END_TEST

/* A schema-1 cluster refuses QuotaSet and changes nothing; SetSchema 2
 * then lets it apply. */
START_TEST(test_quota_needs_schema_2)
{
    struct fh h, twin;
    struct fsm_bootstrap b;
    struct fsm_cmd cmd;
    struct fh_res r;
    uint8_t *snap;
    size_t len;

    for (int k = 0; k < 2; k++) {
        struct fh *x = k == 0 ? &h : &twin;
        fh_init(x, _i);
        fh_bootstrap_cmd(&b, NULL);
        cmd = fh_cmd_bootstrap(&b);
        ck_assert_int_eq(fh_apply_schema(x, 1, FH_T0, &cmd, 1, &r), 0);
        fh_assert_outcome(&r, FSM_OK);
        ck_assert_uint_eq(fsm_schema_version(x->f), 1);
    }
    /* The refused QuotaSet leaves the state as an empty batch does. */
    cmd = fh_cmd_quota("tenant-a*", 5, 0, false);
    ck_assert_int_eq(fh_apply_schema(&h, 1, T1, &cmd, 1, &r), 0);
    fh_assert_outcome(&r, FSM_FAILED_PRECONDITION);
    ck_assert_str_eq(r.reason, "schema 2 required (oncectl schema upgrade)");
    ck_assert_uint_eq(fsm_n_quotas(h.f), 0);
    ck_assert_int_eq(fh_apply_schema(&twin, 1, T1, NULL, 0, NULL), 0);
    snap = fh_snapshot(twin.f, &len);
    fh_assert_snapshot(&h, snap, len);
    free(snap);
    /* SetSchema 2, then QuotaSet applies. */
    cmd = fh_cmd_schema(2);
    ck_assert_int_eq(fh_apply_schema(&h, 1, T1, &cmd, 1, &r), 0);
    fh_assert_outcome(&r, FSM_OK);
    ck_assert_uint_eq(fsm_schema_version(h.f), 2);
    fh_assert_is(quota(&h, "tenant-a*", 5, 0, false, &r), FSM_OK);
    ck_assert_uint_eq(fsm_n_quotas(h.f), 1);
    fh_close(&h);
    fh_close(&twin);
}
END_TEST

/* A replica that applied the log and one restored from its snapshot (mid
 * backlog) give the same answers and byte-identical snapshots. */
START_TEST(test_quota_replay_vs_restore)
{
    struct fh a, b;
    struct fh_res *ra = fh_res_array(64), *rb = fh_res_array(64);
    struct fsm_claim cl[64];
    struct fsm_cmd cmds[64];
    char keys[64][24];
    uint8_t *snap, *sa, *sb;
    size_t len, la, lb;
    uint64_t t = T1;
    char msg[ERR_MSG_SIZE];
    int refused = 0;

    fh_init_booted(&a, _i, NULL, FH_T0);
    fh_assert_is(quota(&a, "q*", 3000, 0, false, ra), FSM_OK);
    fh_assert_is(quota(&a, "q-small", 40, 0, false, ra), FSM_OK);
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 64; i++) {
            snprintf(keys[i], sizeof keys[i], "k%d", round * 64 + i);
            fh_claim(&cl[i], FSM_KIND_NONCE, i % 2 ? "q-small" : "q-big",
                     keys[i], 100000 + (uint64_t)round * 64 + i);
            cl[i].ttl_ms = 2000 + (uint64_t)(i % 8) * 1000;
            cmds[i] = fh_cmd_claim(&cl[i]);
        }
        ck_assert_int_eq(fh_apply(&a, t, cmds, 64, NULL), 0);
        t += 1024;
    }
    snap = fh_snapshot(a.f, &len);
    fh_init(&b, _i);
    ck_assert_int_eq(fsm_restore(b.f, snap, len, msg), 0);
    b.index = a.index;
    free(snap);
    for (size_t i = 0; i < fsm_n_quotas(a.f); i++) {
        ck_assert_uint_eq(info(a.f, i).records, info(b.f, i).records);
        ck_assert_uint_eq(info(a.f, i).bytes, info(b.f, i).bytes);
    }
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 64; i++) {
            snprintf(keys[i], sizeof keys[i], "n%d", round * 64 + i);
            fh_claim(&cl[i], FSM_KIND_NONCE, i % 3 ? "q-small" : "q-big",
                     keys[i], 900000 + (uint64_t)round * 64 + i);
            cl[i].ttl_ms = 3000;
            cmds[i] = fh_cmd_claim(&cl[i]);
        }
        ck_assert_int_eq(fh_apply(&a, t, cmds, 64, ra), 0);
        ck_assert_int_eq(fh_apply(&b, t, cmds, 64, rb), 0);
        for (int i = 0; i < 64; i++) {
            ck_assert_int_eq(ra[i].outcome, rb[i].outcome);
            refused += ra[i].outcome == FSM_RESOURCE_EXHAUSTED;
        }
        sa = fh_snapshot(a.f, &la);
        sb = fh_snapshot(b.f, &lb);
        ck_assert_uint_eq(la, lb);
        ck_assert(memcmp(sa, sb, la) == 0);
        free(sa);
        free(sb);
        t += 300;
    }
    ck_assert_int_gt(refused, 0); /* q-small's quota did bind */
    free(ra);
    free(rb);
    fh_close(&a);
    fh_close(&b);
}
END_TEST

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* @buf with its trailing CRC-32C recomputed: restore refuses it (@what). */
static void refused(uint8_t *buf, size_t len, const char *what)
{
    struct fsm *g = fsm_new();
    char msg[ERR_MSG_SIZE];
    int rv;

    ck_assert_ptr_nonnull(g);
    put_u32(buf + len - 4, crc32c(0, buf, len - 4));
    rv = fsm_restore(g, buf, len, msg);
    ck_assert_msg(rv == FSM_E_MALFORMED, "%s: restore returned %d (%s)", what,
                  rv, msg);
    ck_assert_uint_eq(fsm_n_quotas(g), 0);
    fsm_free(g);
}

/* Quotas live in the snapshot (format 3): a frozen view writes them as the
 * freeze saw them; restore refuses them in a state whose schema does not
 * apply QuotaSet, or under another format. */
START_TEST(test_quota_snapshot_and_view)
{
    struct fh h;
    struct fh_res r;
    struct fsm_frozen *z;
    uint8_t *snap, *view;
    size_t len;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(quota(&h, "a*", 2, 0, false, &r), FSM_OK);
    fh_assert_is(quota(&h, "b", 0, 100000, false, &r), FSM_OK);
    claim(&h, T1, FSM_KIND_NONCE, "a1", "k", DAY, NULL, &r);
    snap = fh_snapshot(h.f, &len);
    ck_assert_uint_eq(snap[8], 3); /* the format */
    ck_assert_int_eq(fsm_freeze(h.f, &z), 0);
    fh_assert_is(quota(&h, "a*", 0, 0, true, &r), FSM_OK);
    fh_assert_is(quota(&h, "c", 1, 0, false, &r), FSM_OK);
    ck_assert_uint_eq(fsm_frozen_size(z), len);
    view = malloc(len);
    ck_assert_ptr_nonnull(view);
    fsm_frozen_write(z, view, len);
    ck_assert(memcmp(view, snap, len) == 0);
    fsm_release(h.f, z);
    put_u32(view + 12, 1); /* schema 1 */
    refused(view, len, "quotas under schema 1");
    memcpy(view, snap, len);
    put_u32(view + 8, 2); /* format 2: a fence expected instead */
    refused(view, len, "quotas read as format 2");
    free(view);
    free(snap);
    fh_close(&h);
}
END_TEST

Suite *quota_suite(void)
{
    Suite *s = suite_create("fsm-quota");
    TCase *tc = tcase_create("quota");

    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_quota_enforced_per_tenant, 0, 2);
    tcase_add_loop_test(tc, test_quota_charging, 0, 2);
    tcase_add_loop_test(tc, test_quota_bytes_and_refusals, 0, 2);
    tcase_add_loop_test(tc, test_quota_expiry_frees, 0, 2);
    tcase_add_loop_test(tc, test_quota_needs_schema_2, 0, 2);
    tcase_add_loop_test(tc, test_quota_replay_vs_restore, 0, 2);
    tcase_add_loop_test(tc, test_quota_snapshot_and_view, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
