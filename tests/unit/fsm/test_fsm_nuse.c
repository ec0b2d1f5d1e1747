/* N-use nonces and sliding idempotency records (docs/state-machine.md,
 * "N-use nonces" and "Sliding retention"): the use count, exact retries of
 * every use, CONFLICT on another max_uses, the sliding expiry and its cap,
 * the snapshot round trip, frozen views, and schema 2, under which apply
 * ignores both fields as a schema-2 binary does. Loop tests run once per
 * path (_i: FH_DIRECT, FH_PROTOBUF). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *nuse_suite(void);

#define T1  (FH_T0 + 1000ull)
#define SEC 1000ull

/* A NONCE claim of ("s", @key) with ttl 60 s, @max_uses and request id
 * fh_rid(@rid) at log time @at. */
static enum fsm_outcome use(struct fh *h,
                            uint64_t at,
                            const char *key,
                            uint32_t max_uses,
                            uint64_t rid,
                            struct fh_res *r)
{
    struct fsm_claim c;

    fh_claim(&c, FSM_KIND_NONCE, "s", key, rid);
    c.ttl_ms = 60 * SEC;
    c.max_uses = max_uses;
    return fh_do_claim(h, at, &c, r);
}

/* An IDEMPOTENT claim of ("s", @key) with @ttl, @sliding, request id
 * fh_rid(@rid) at @at. */
static enum fsm_outcome idem(struct fh *h,
                             uint64_t at,
                             const char *key,
                             uint64_t ttl,
                             bool sliding,
                             uint64_t rid,
                             struct fh_res *r)
{
    struct fsm_claim c;

    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", key, rid);
    c.ttl_ms = ttl;
    c.sliding = sliding;
    c.lease_ms = 1000;
    return fh_do_claim(h, at, &c, r);
}

static void boot_at_schema(struct fh *h, int path, uint32_t schema)
{
    struct fsm_bootstrap b;
    struct fsm_cmd cmd;
    struct fh_res r;

    fh_init(h, path);
    fh_bootstrap_cmd(&b, NULL);
    cmd = fh_cmd_bootstrap(&b);
    ck_assert_int_eq(fh_apply_schema(h, schema, FH_T0, &cmd, 1, &r), 0);
    fh_assert_outcome(&r, FSM_OK);
    ck_assert_uint_eq(fsm_schema_version(h->f), schema);
}

/* max_uses 3: three request ids ACCEPTED with their counts, retries of any
 * of them ACCEPTED retry without counting, the fourth REPLAYED naming the
 * first; another max_uses is CONFLICT, on either kind of record. */
START_TEST(test_nuse_counts)
{
    struct fh h;
    struct fh_res r;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(use(&h, T1, "k", 3, 1, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert_uint_eq(r.max_uses, 3);
    ck_assert_uint_eq(r.uses, 1);
    fh_assert_is(use(&h, T1, "k", 3, 2, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert_uint_eq(r.uses, 2);
    ck_assert(fh_rid_is(r.first_request_id, 1));
    fh_assert_is(use(&h, T1, "k", 3, 1, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    ck_assert_uint_eq(r.uses, 2);
    fh_assert_is(use(&h, T1, "k", 3, 2, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    ck_assert_uint_eq(r.uses, 2);
    fh_assert_is(use(&h, T1 + SEC, "k", 3, 3, &r), FSM_ACCEPTED);
    ck_assert(!r.retry);
    ck_assert_uint_eq(r.uses, 3);
    fh_assert_is(use(&h, T1 + SEC, "k", 3, 4, &r), FSM_REPLAYED);
    ck_assert(fh_rid_is(r.first_request_id, 1));
    ck_assert_uint_eq(r.uses, 3);
    fh_assert_is(use(&h, T1 + SEC, "k", 3, 3, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    /* The first claim fixed max_uses. */
    fh_assert_is(use(&h, T1, "k", 2, 5, &r), FSM_CONFLICT);
    ck_assert_str_eq(r.reason, "the key was claimed with another max_uses");
    fh_assert_is(use(&h, T1, "k", 0, 5, &r), FSM_CONFLICT);
    /* A retry of any use is recognised before the comparison. */
    fh_assert_is(use(&h, T1, "k", 2, 2, &r), FSM_ACCEPTED);
    ck_assert(r.retry);
    fh_assert_is(use(&h, T1, "single", 0, 10, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.max_uses, 1);
    ck_assert_uint_eq(r.uses, 1);
    fh_assert_is(use(&h, T1, "single", 4, 11, &r), FSM_CONFLICT);
    fh_assert_is(use(&h, T1, "single", 1, 11, &r), FSM_REPLAYED);
    fh_assert_is(use(&h, T1, "single", 4, 10, &r), FSM_ACCEPTED);
    ck_assert(r.retry); /* a retry is recognised before the comparison */
    /* Lookup shows the count. */
    fh_assert_is(fh_do_lookup(&h, T1 + SEC, "s", "k", &r), FSM_FOUND);
    ck_assert_uint_eq(r.max_uses, 3);
    ck_assert_uint_eq(r.uses, 3);
    fh_close(&h);
}
END_TEST

START_TEST(test_nuse_refused)
{
    struct fh h;
    struct fh_res r;
    struct fsm_claim c;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(use(&h, T1, "k", FSM_MAX_USES + 1, 1, &r),
                 FSM_INVALID_ARGUMENT);
    ck_assert_str_eq(r.reason, "max_uses must be 1..64");
    fh_assert_is(use(&h, T1, "k", FSM_MAX_USES, 1, &r), FSM_ACCEPTED);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "i", 2);
    c.ttl_ms = 60 * SEC;
    c.max_uses = 2;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert_str_eq(r.reason, "max_uses applies to NONCE claims only");
    fh_claim(&c, FSM_KIND_NONCE, "s", "n", 3);
    c.ttl_ms = 60 * SEC;
    c.sliding = true;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert_str_eq(r.reason, "a NONCE claim cannot slide");
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "i", 4);
    fh_claim_ts(&c, T1, 1000);
    c.sliding = true;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_INVALID_ARGUMENT);
    ck_assert_str_eq(r.reason, "a sliding claim needs a ttl");
    fh_close(&h);
}
END_TEST

/* The uses are charged at the first claim (max_bytes and quotas), in
 * full, and freed with the record. */
START_TEST(test_nuse_bytes)
{
    struct fh h;
    struct fh_res r;
    uint64_t one, many;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(use(&h, T1, "a", 1, 1, &r), FSM_ACCEPTED);
    one = fsm_bytes(h.f);
    fh_assert_is(use(&h, T1, "b", FSM_MAX_USES, 2, &r), FSM_ACCEPTED);
    many = fsm_bytes(h.f) - one;
    /* record + ext (160) + 63 ids (1008 bytes), in 8-byte slab classes */
    ck_assert_uint_eq(many, one + 160 + 1008);
    fh_assert_is(use(&h, T1, "b", FSM_MAX_USES, 3, &r), FSM_ACCEPTED);
    /* A use adds an attempt (evidence), never room for its id. */
    ck_assert_uint_le(fsm_bytes(h.f) - one, many + 64);
    fh_tick(&h, T1 + 120 * SEC);
    ck_assert_uint_eq(fsm_bytes(h.f), 0);
    ck_assert_uint_eq(fsm_n_records(h.f), 0);
    fh_close(&h);
}
END_TEST

/* The uses are charged to the scope's quota at the first claim: a quota
 * with room for one 64-use record refuses the second, and a later use of
 * the first still fits. */
START_TEST(test_nuse_quota)
{
    struct fh h;
    struct fh_res r;
    struct fsm_cmd cmd;
    struct fsm_quota_info q;
    uint64_t one;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(use(&h, T1, "probe", FSM_MAX_USES, 1, &r), FSM_ACCEPTED);
    one = fsm_bytes(h.f);
    cmd = fh_cmd_quota("s", 0, one + one / 2, false);
    fh_assert_is(fh_do(&h, T1, &cmd, &r), FSM_OK);
    ck_assert(fsm_quota(h.f, 0, &q));
    ck_assert_uint_eq(q.bytes, one);
    fh_assert_is(use(&h, T1, "second", FSM_MAX_USES, 2, &r),
                 FSM_RESOURCE_EXHAUSTED);
    fh_assert_is(use(&h, T1, "single", 0, 3, &r), FSM_ACCEPTED);
    fh_assert_is(use(&h, T1, "probe", FSM_MAX_USES, 4, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.uses, 2);
    fh_close(&h);
}
END_TEST

/* A new use is a new acceptance: a signed one outside its window is
 * STALE, and the record then lives as long as the latest use needs. */
START_TEST(test_nuse_window)
{
    struct fh h;
    struct fh_res r;
    struct fsm_claim c;
    uint64_t first_exp;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_claim(&c, FSM_KIND_NONCE, "s", "w", 1);
    fh_claim_ts(&c, T1, 10 * SEC);
    c.max_uses = 2;
    fh_assert_is(fh_do_claim(&h, T1, &c, &r), FSM_ACCEPTED);
    first_exp = r.expires_ms;
    fh_claim(&c, FSM_KIND_NONCE, "s", "w", 2);
    fh_claim_ts(&c, T1, 10 * SEC);
    c.max_uses = 2;
    fh_assert_is(fh_do_claim(&h, T1 + 20 * SEC, &c, &r), FSM_STALE);
    ck_assert_uint_eq(r.uses, 1);
    fh_claim_ts(&c, T1 + 20 * SEC, 10 * SEC);
    fh_assert_is(fh_do_claim(&h, T1 + 20 * SEC, &c, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(r.uses, 2);
    ck_assert_uint_eq(r.expires_ms, first_exp + 20 * SEC);
    fh_close(&h);
}
END_TEST

/* Sliding: DUPLICATE, IN_PROGRESS and FAILED answers move the expiry to
 * log time + ttl, capped at first claim + max_ttl; without the flag it
 * stays. */
START_TEST(test_sliding)
{
    struct fsm_settings s;
    struct fh h;
    struct fh_res r;
    struct fsm_token tok, tok2;
    struct fsm_cmd cmd;

    fh_settings(&s);
    s.max_ttl_ms = 25 * SEC;
    fh_init_booted(&h, _i, &s, FH_T0);
    fh_assert_is(idem(&h, T1, "k", 10 * SEC, true, 1, &r), FSM_ACCEPTED);
    ck_assert(r.sliding);
    ck_assert_uint_eq(r.expires_ms, T1 + 10 * SEC);
    tok = r.owner_token;
    /* IN_PROGRESS (lease 1 s) slides. */
    fh_assert_is(idem(&h, T1 + 500, "k", 10 * SEC, false, 2, &r),
                 FSM_IN_PROGRESS);
    ck_assert_uint_eq(r.expires_ms, T1 + 500 + 10 * SEC);
    cmd = fh_cmd_complete("s", "k", tok, "ok", 2);
    fh_assert_is(fh_do(&h, T1 + 600, &cmd, &r), FSM_COMPLETED);
    fh_assert_is(idem(&h, T1 + 8 * SEC, "k", 10 * SEC, true, 3, &r),
                 FSM_DUPLICATE);
    ck_assert_uint_eq(r.expires_ms, T1 + 18 * SEC);
    /* Still there past the first claim's ttl. */
    fh_assert_is(idem(&h, T1 + 17 * SEC, "k", 10 * SEC, true, 4, &r),
                 FSM_DUPLICATE);
    /* The cap: first claim + max_ttl. */
    ck_assert_uint_eq(r.expires_ms, T1 + 25 * SEC);
    fh_tick(&h, T1 + 26 * SEC);
    fh_assert_is(fh_do_lookup(&h, T1 + 26 * SEC, "s", "k", &r), FSM_NOT_FOUND);
    /* FAILED slides too; a record without the flag does not. */
    fh_assert_is(idem(&h, T1 + 30 * SEC, "f", 10 * SEC, true, 5, &r),
                 FSM_ACCEPTED);
    tok = r.owner_token;
    cmd = fh_cmd_release("s", "f", tok, true, "no", 2);
    fh_assert_is(fh_do(&h, T1 + 30 * SEC, &cmd, &r), FSM_FAILED);
    fh_assert_is(idem(&h, T1 + 35 * SEC, "f", 10 * SEC, true, 6, &r),
                 FSM_FAILED);
    ck_assert_uint_eq(r.expires_ms, T1 + 45 * SEC);
    fh_assert_is(idem(&h, T1 + 36 * SEC, "p", 10 * SEC, false, 7, &r),
                 FSM_ACCEPTED);
    ck_assert(!r.sliding);
    tok2 = r.owner_token;
    cmd = fh_cmd_complete("s", "p", tok2, "ok", 2);
    fh_assert_is(fh_do(&h, T1 + 36 * SEC, &cmd, &r), FSM_COMPLETED);
    /* A later claim asking to slide does not change the record. */
    fh_assert_is(idem(&h, T1 + 40 * SEC, "p", 10 * SEC, true, 8, &r),
                 FSM_DUPLICATE);
    ck_assert_uint_eq(r.expires_ms, T1 + 46 * SEC);
    fh_close(&h);
}
END_TEST

/* Snapshot and restore keep uses and sliding: the restored state encodes
 * alike, and answers alike afterwards. */
START_TEST(test_nuse_snapshot)
{
    struct fh h, g;
    struct fh_res r, q;
    uint8_t *snap, *snap2;
    size_t len, len2;
    char err[256];

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(use(&h, T1, "k", 4, 1, &r), FSM_ACCEPTED);
    fh_assert_is(use(&h, T1, "k", 4, 2, &r), FSM_ACCEPTED);
    fh_assert_is(use(&h, T1, "k", 4, 3, &r), FSM_ACCEPTED);
    fh_assert_is(idem(&h, T1, "i", 10 * SEC, true, 9, &r), FSM_ACCEPTED);
    snap = fh_snapshot(h.f, &len);
    fh_init(&g, _i);
    ck_assert_int_eq(fsm_restore(g.f, snap, len, err), 0);
    g.index = h.index;
    fh_assert_snapshot(&g, snap, len);
    ck_assert_uint_eq(fsm_bytes(g.f), fsm_bytes(h.f));
    fh_assert_is(idem(&h, T1 + 500, "i", 10 * SEC, false, 10, &r),
                 FSM_IN_PROGRESS);
    fh_assert_is(idem(&g, T1 + 500, "i", 10 * SEC, false, 10, &q),
                 FSM_IN_PROGRESS);
    ck_assert_uint_eq(q.expires_ms, T1 + 500 + 10 * SEC);
    fh_assert_is(use(&h, T1 + SEC, "k", 4, 2, &r), FSM_ACCEPTED);
    fh_assert_is(use(&g, T1 + SEC, "k", 4, 2, &q), FSM_ACCEPTED);
    ck_assert(r.retry && q.retry);
    fh_assert_is(use(&h, T1 + SEC, "k", 4, 5, &r), FSM_ACCEPTED);
    fh_assert_is(use(&g, T1 + SEC, "k", 4, 5, &q), FSM_ACCEPTED);
    ck_assert_uint_eq(q.uses, 4);
    fh_assert_is(use(&g, T1 + SEC, "k", 4, 6, &q), FSM_REPLAYED);
    fh_assert_is(use(&h, T1 + SEC, "k", 4, 6, &r), FSM_REPLAYED);
    snap2 = fh_snapshot(h.f, &len2);
    fh_assert_snapshot(&g, snap2, len2);
    /* The same bits under schema 2 are refused. */
    snap[12] = 2;
    memset(snap + len - 4, 0, 4);
    {
        uint32_t crc = crc32c(0, snap, len - 4);
        for (int i = 0; i < 4; i++) {
            snap[len - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
        }
    }
    fh_close(&g);
    fh_init(&g, _i);
    ck_assert_int_eq(fsm_restore(g.f, snap, len, err), FSM_E_MALFORMED);
    ck_assert_msg(strstr(err, "bad record kind or state") != NULL, "%s", err);
    free(snap);
    free(snap2);
    fh_close(&g);
    fh_close(&h);
}
END_TEST

/* A frozen view does not see later uses; its bytes are the freeze's. */
START_TEST(test_nuse_frozen)
{
    struct fh h;
    struct fh_res r;
    struct fsm_frozen *z;
    uint8_t *snap, *view;
    size_t len;

    fh_init_booted(&h, _i, NULL, FH_T0);
    fh_assert_is(use(&h, T1, "k", 3, 1, &r), FSM_ACCEPTED);
    snap = fh_snapshot(h.f, &len);
    ck_assert_int_eq(fsm_freeze(h.f, &z), 0);
    fh_assert_is(use(&h, T1, "k", 3, 2, &r), FSM_ACCEPTED);
    fh_assert_is(use(&h, T1, "k", 3, 3, &r), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_frozen_size(z), len);
    view = malloc(len);
    ck_assert_ptr_nonnull(view);
    fsm_frozen_write(z, view, len);
    ck_assert_mem_eq(view, snap, len);
    fsm_release(h.f, z);
    /* A record of one use so far restores alike. */
    {
        struct fh g;
        char err[256];

        fh_init(&g, _i);
        ck_assert_int_eq(fsm_restore(g.f, view, len, err), 0);
        fh_assert_snapshot(&g, view, len);
        g.index = fsm_last_index(g.f);
        fh_assert_is(use(&g, T1, "k", 3, 1, &r), FSM_ACCEPTED);
        ck_assert(r.retry);
        ck_assert_uint_eq(r.uses, 1);
        fh_close(&g);
    }
    free(view);
    free(snap);
    fh_close(&h);
}
END_TEST

/* Under schema 2 apply ignores max_uses and sliding, exactly as a
 * schema-2 binary that cannot decode them: a replica of each kind ends in
 * the same state (a mixed-version cluster cannot diverge). SetSchema 3
 * then enables them; an old snapshot still loads. */
START_TEST(test_nuse_schema_2)
{
    struct fh h, twin, g;
    struct fsm_claim c;
    struct fsm_cmd cmd[3];
    struct fh_res r[3];
    uint8_t *snap;
    size_t len;
    char err[256];

    boot_at_schema(&h, _i, 2);
    boot_at_schema(&twin, _i, 2);
    for (int k = 0; k < 2; k++) {
        struct fh *x = k == 0 ? &h : &twin;
        struct fsm_claim n, d;

        fh_claim(&n, FSM_KIND_NONCE, "s", "n", 1);
        n.ttl_ms = 60 * SEC;
        n.max_uses = k == 0 ? 3 : 0;
        fh_claim(&d, FSM_KIND_IDEMPOTENT, "s", "d", 2);
        d.ttl_ms = 10 * SEC;
        d.sliding = k == 0;
        fh_claim(&c, FSM_KIND_NONCE, "s", "n", 3);
        c.ttl_ms = 60 * SEC;
        c.max_uses = k == 0 ? 3 : 0;
        cmd[0] = fh_cmd_claim(&n);
        cmd[1] = fh_cmd_claim(&d);
        cmd[2] = fh_cmd_claim(&c);
        ck_assert_int_eq(fh_apply_schema(x, 2, T1, cmd, 3, r), 0);
        fh_assert_outcome(&r[0], FSM_ACCEPTED);
        fh_assert_outcome(&r[1], FSM_ACCEPTED);
        fh_assert_outcome(&r[2], FSM_REPLAYED); /* single use */
        ck_assert(!r[1].sliding);
        /* Out-of-range values too: ignored, not refused. */
        n.max_uses = k == 0 ? 1000 : 0;
        fh_claim(&n, FSM_KIND_NONCE, "s", "m", 4);
        n.ttl_ms = 60 * SEC;
        n.max_uses = k == 0 ? 1000 : 0;
        cmd[0] = fh_cmd_claim(&n);
        ck_assert_int_eq(fh_apply_schema(x, 2, T1, cmd, 1, r), 0);
        fh_assert_outcome(&r[0], FSM_ACCEPTED);
    }
    snap = fh_snapshot(twin.f, &len);
    fh_assert_snapshot(&h, snap, len);
    /* A schema-2 snapshot loads. */
    fh_init(&g, _i);
    ck_assert_int_eq(fsm_restore(g.f, snap, len, err), 0);
    ck_assert_uint_eq(fsm_schema_version(g.f), 2);
    free(snap);
    fh_close(&g);
    /* SetSchema 3: the fields apply. */
    cmd[0] = fh_cmd_schema(FSM_SCHEMA_NUSE);
    ck_assert_int_eq(fh_apply_schema(&h, 2, T1, cmd, 1, r), 0);
    fh_assert_outcome(&r[0], FSM_OK);
    fh_claim(&c, FSM_KIND_NONCE, "s", "x", 5);
    c.ttl_ms = 60 * SEC;
    c.max_uses = 2;
    cmd[0] = fh_cmd_claim(&c);
    ck_assert_int_eq(fh_apply_schema(&h, FSM_SCHEMA_NUSE, T1, cmd, 1, r), 0);
    ck_assert_uint_eq(r[0].max_uses, 2);
    fh_close(&h);
    fh_close(&twin);
}
END_TEST

/* Against a model: random N-use claims of four keys (request ids from a
 * small pool, sometimes another max_uses, log time moving past the ttl),
 * each answer as the model says; every 100 steps the state restored from
 * its snapshot encodes alike. */
#define M_KEYS  4
#define M_RIDS  12
#define M_STEPS 1500

struct m_rec
{
    bool live;
    uint32_t max_uses;
    uint64_t expires;
    uint64_t first;
    size_t n;
    uint64_t rids[FSM_MAX_USES];
};

static bool m_has(const struct m_rec *m, uint64_t rid)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->rids[i] == rid) {
            return true;
        }
    }
    return false;
}

START_TEST(test_nuse_model)
{
    static const uint32_t uses_of[M_KEYS] = {0, 2, 3, 5};
    struct m_rec model[M_KEYS];
    uint64_t now = T1;
    unsigned seed = 12345u + (unsigned)_i;
    struct fh h;

    memset(model, 0, sizeof model);
    fh_init_booted(&h, _i, NULL, FH_T0);
    for (int step = 0; step < M_STEPS; step++) {
        size_t k = (size_t)(rand_r(&seed) % M_KEYS);
        uint64_t rid = 1000u * k + 1u + (uint64_t)(rand_r(&seed) % M_RIDS);
        uint32_t want = uses_of[k];
        struct m_rec *m = &model[k];
        enum fsm_outcome o, exp;
        bool retry = false;
        char key[8];
        struct fh_res r;

        if (rand_r(&seed) % 10 == 0) {
            want = uses_of[(k + 1) % M_KEYS]; /* another max_uses */
        }
        now += (uint64_t)(rand_r(&seed) % 200);
        snprintf(key, sizeof key, "k%zu", k);
        if (m->live && m->expires <= now) {
            m->live = false;
        }
        if (!m->live) {
            exp = FSM_ACCEPTED;
            memset(m, 0, sizeof *m);
            m->live = true;
            m->max_uses = want > 1 ? want : 1;
            m->first = rid;
            m->rids[m->n++] = rid;
            m->expires = now + 60 * SEC;
        } else if (m_has(m, rid)) {
            exp = FSM_ACCEPTED;
            retry = true;
        } else if ((want > 1 ? want : 1) != m->max_uses) {
            exp = FSM_CONFLICT;
        } else if (m->n < m->max_uses) {
            exp = FSM_ACCEPTED;
            m->rids[m->n++] = rid;
            m->expires = now + 60 * SEC; /* this use's own retention */
        } else {
            exp = FSM_REPLAYED;
        }
        o = use(&h, now, key, want, rid, &r);
        ck_assert_msg(o == exp && r.retry == retry,
                      "step %d key %zu rid %llu: %s retry %d, want %s %d", step,
                      k, (unsigned long long)rid, fsm_outcome_name(o), r.retry,
                      fsm_outcome_name(exp), retry);
        ck_assert_uint_eq(r.uses, m->n);
        ck_assert_uint_eq(r.max_uses, m->max_uses);
        ck_assert(fh_rid_is(r.first_request_id, m->first));
        ck_assert_uint_eq(r.expires_ms, m->expires);
        if (step % 100 == 99) {
            struct fh g;
            uint8_t *snap;
            size_t len;
            char err[256];

            snap = fh_snapshot(h.f, &len);
            fh_init(&g, _i);
            ck_assert_int_eq(fsm_restore(g.f, snap, len, err), 0);
            fh_assert_snapshot(&g, snap, len);
            ck_assert_uint_eq(fsm_bytes(g.f), fsm_bytes(h.f));
            free(snap);
            fh_close(&g);
        }
    }
    fh_close(&h);
}
END_TEST

/* A single-use claim encodes as before schema 3, whether it says 0 or 1. */
START_TEST(test_nuse_encoding)
{
    struct fsm_claim c;
    struct fsm_cmd cmd;
    uint8_t *a, *b, *m;
    size_t la, lb, lm;

    fh_claim(&c, FSM_KIND_NONCE, "s", "k", 1);
    c.ttl_ms = 60 * SEC;
    cmd = fh_cmd_claim(&c);
    a = fh_encode(&cmd, &la);
    c.max_uses = 1;
    cmd = fh_cmd_claim(&c);
    b = fh_encode(&cmd, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_mem_eq(a, b, la);
    c.max_uses = 2;
    cmd = fh_cmd_claim(&c);
    m = fh_encode(&cmd, &lm);
    ck_assert_uint_eq(lm, la + 2); /* field 12, varint 2 */
    free(a);
    free(b);
    free(m);
}
END_TEST

Suite *nuse_suite(void)
{
    Suite *s = suite_create("fsm-nuse");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, test_nuse_counts, 0, 2);
    tcase_add_loop_test(tc, test_nuse_refused, 0, 2);
    tcase_add_loop_test(tc, test_nuse_bytes, 0, 2);
    tcase_add_loop_test(tc, test_nuse_window, 0, 2);
    tcase_add_loop_test(tc, test_nuse_quota, 0, 2);
    tcase_add_loop_test(tc, test_sliding, 0, 2);
    tcase_add_loop_test(tc, test_nuse_snapshot, 0, 2);
    tcase_add_loop_test(tc, test_nuse_frozen, 0, 2);
    tcase_add_loop_test(tc, test_nuse_schema_2, 0, 2);
    tcase_add_test(tc, test_nuse_encoding);
    tcase_add_loop_test(tc, test_nuse_model, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
