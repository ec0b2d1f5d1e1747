/* test_fsm_regress: regression tests for bugs found in review.
 *
 * Each test turns one of the reviewer's reproducers into exact assertions of
 * the fixed behaviour (docs/state-machine.md):
 *
 * - lazy_prune: a taken-over IDEMPOTENT record whose expiry moved later is
 *   freed by the timer wheel in the same batch on a replica that moved it
 *   lazily and on one that restored it from a snapshot (freed by tick, not
 *   by millisecond), so max_records answers agree.
 * - skew_fence: a max_window raise after a max_skew cut still fences the ts
 *   values accepted under the old, larger skew: a replay after the record's
 *   retention is STALE.
 * - resbytes: a Complete result or a terminal Release error is never
 *   refused for space (each PENDING record reserved room for the largest
 *   one), fsm_bytes stays within max_bytes, and new claims are what is
 *   refused.
 * - attbytes: past max_bytes replays keep answering REPLAYED and attempts
 *   are only counted (where the record already has attempt storage), never
 *   stored, so fsm_bytes stays within max_bytes.
 * - dupmem: a snapshot whose member directory repeats an id, or holds a
 *   retired id, is refused and the target is left unchanged.
 * - diff: randomized differential test of three replicas (one never
 *   restores, one restores its own snapshot, one restores the first's).
 *
 * One file past ~1,000 lines on purpose: each test is one reviewed bug, and
 * the differential test (diff) that is half the file reuses the others'
 * builders; a file per bug would repeat them. */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *regress_suite(void);

#define MS_MIN  60000ull
#define MS_HOUR (60 * MS_MIN)
#define MS_DAY  (24 * MS_HOUR)

/* Timer wheel tick: 1.024 s (docs/state-machine.md, "Time"). */
#define TICK_MS 1024ull

/* --- shared helpers ------------------------------------------------------- */

/* Keys "%015u" used by the tests that fill max_bytes. */
#define N_FILL 1024
static char fill_key[N_FILL][16];

static void fill_keys_init(void)
{
    for (unsigned i = 0; i < N_FILL; i++) {
        snprintf(fill_key[i], sizeof fill_key[i], "%015u", i);
    }
}

/* A light copy of one result, for batches too large for struct fh_res. */
struct lres
{
    bool emitted;
    enum fsm_outcome outcome;
    bool retry;
    bool has_record;
    enum fsm_state state;
    uint32_t attempts;
    struct fsm_token owner_token;
    size_t result_len;
    size_t stored_error_len;
};

static void lres_emit(void *arg, size_t i, const struct fsm_result *r)
{
    struct lres *o = &((struct lres *)arg)[i];

    ck_assert(!o->emitted);
    o->emitted = true;
    o->outcome = r->outcome;
    o->retry = r->retry;
    o->has_record = r->has_record;
    o->state = r->state;
    o->attempts = r->attempts;
    o->owner_token = r->owner_token;
    o->result_len = r->result_len;
    o->stored_error_len = r->stored_error_len;
}

/* Apply @n commands as the next batch of @h (direct path) at log time
 * @time, outcomes into @out (@n entries, calloc'd by the caller). */
static void apply_light(struct fh *h,
                        uint64_t time,
                        const struct fsm_cmd *cmds,
                        size_t n,
                        struct lres *out)
{
    int rv;

    memset(out, 0, n * sizeof *out);
    h->index++;
    rv = fsm_apply_cmds(h->f, h->index, FSM_SCHEMA_VERSION, time, cmds, n,
                        lres_emit, out);
    ck_assert_msg(rv == 0, "apply: %d (%s)", rv, fsm_strerror(rv));
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(out[i].emitted, "command %zu not emitted", i);
    }
}

/* Make @dst a restored copy of @src (snapshot of src, fsm_restore). */
static void restore_from(struct fh *dst, const struct fh *src)
{
    size_t len;
    uint8_t *buf = fh_snapshot(src->f, &len);
    char err[256] = "";
    int rv = fsm_restore(dst->f, buf, len, err);

    ck_assert_msg(rv == 0, "restore: %d (%s) %s", rv, fsm_strerror(rv), err);
    free(buf);
    dst->index = src->index;
    ck_assert_uint_eq(fsm_last_index(dst->f), src->index);
}

/* Assert that @a and @b have byte-identical snapshots and equal counters. */
static void assert_same_state(const struct fh *a,
                              const struct fh *b,
                              const char *what)
{
    size_t la, lb;
    uint8_t *sa = fh_snapshot(a->f, &la);
    uint8_t *sb = fh_snapshot(b->f, &lb);

    ck_assert_msg(la == lb && memcmp(sa, sb, la) == 0,
                  "%s: snapshots differ (%zu and %zu bytes)", what, la, lb);
    ck_assert_msg(fsm_n_records(a->f) == fsm_n_records(b->f),
                  "%s: n_records %" PRIu64 " and %" PRIu64, what,
                  fsm_n_records(a->f), fsm_n_records(b->f));
    ck_assert_msg(fsm_bytes(a->f) == fsm_bytes(b->f),
                  "%s: fsm_bytes %" PRIu64 " and %" PRIu64, what,
                  fsm_bytes(a->f), fsm_bytes(b->f));
    free(sa);
    free(sb);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

static void fix_crc(uint8_t *buf, size_t len)
{
    put_u32(buf + len - 4, crc32c(0, buf, len - 4));
}

/* --- lazy_prune ----------------------------------------------------------- */

/* With max_records 1, boot @a at @t0, claim IDEMPOTENT "k1" (ttl 3 s, lease
 * 1 s) and take it over at t0 + 2 s with a 4 s lease, which moves its expiry
 * to t0 + 6 s. Then make @b a restored copy of @a. Returns the new expiry. */
static uint64_t lazy_setup(struct fh *a, struct fh *b, uint64_t t0)
{
    struct fsm_settings s;
    struct fsm_claim c;
    struct fh_res *r = fh_res_array(1);

    fh_settings(&s);
    s.max_records = 1;
    fh_init_booted(a, FH_DIRECT, &s, t0);

    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "k1", 1);
    c.ttl_ms = 3000;
    c.lease_ms = 1000;
    fh_assert_is(fh_do_claim(a, t0, &c, r), FSM_ACCEPTED);
    ck_assert_uint_eq(r->expires_ms, t0 + 3000);
    ck_assert_uint_eq(r->lease_expires_ms, t0 + 1000);

    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "k1", 2);
    c.ttl_ms = 3000;
    c.lease_ms = 4000;
    fh_assert_is(fh_do_claim(a, t0 + 2000, &c, r), FSM_ACCEPTED);
    ck_assert(!r->retry);
    ck_assert_uint_eq(r->owner_attempt, 2);
    ck_assert_uint_eq(r->lease_expires_ms, t0 + 6000);
    ck_assert_uint_eq(r->expires_ms, t0 + 6000);
    ck_assert_uint_eq(fsm_n_records(a->f), 1);
    free(r);

    fh_init(b, FH_DIRECT);
    restore_from(b, a);
    assert_same_state(a, b, "after restore");
    return t0 + 6000;
}

START_TEST(lazy_prune_restored_agrees)
{
    /* Where the new expiry falls in its tick: FH_T0 as is, then exactly on
     * a tick start, just after it, mid-tick and on the last millisecond. */
    static const int64_t expiry_phase[] = {-1, 0, 1, 512, 1023};
    const uint64_t aligned = (FH_T0 / TICK_MS) * TICK_MS + 16 * TICK_MS;

    for (size_t v = 0; v < sizeof expiry_phase / sizeof expiry_phase[0]; v++) {
        uint64_t t0 = FH_T0;

        if (expiry_phase[v] >= 0) {
            /* t0 + 6000 = aligned + phase (mod TICK_MS). */
            t0 = aligned + (uint64_t)expiry_phase[v] - 6000;
            ck_assert_uint_eq((t0 + 6000) % TICK_MS, (uint64_t)expiry_phase[v]);
        }
        for (int p = 0; p < 6; p++) {
            struct fh a, b;
            struct fsm_claim c;
            struct fsm_cmd cmds[2];
            struct fh_res *ra = fh_res_array(2);
            struct fh_res *rb = fh_res_array(2);
            uint64_t expiry = lazy_setup(&a, &b, t0);
            uint64_t tick_end = (expiry / TICK_MS + 1) * TICK_MS;
            const uint64_t probes[6] = {expiry - 1,   expiry,   expiry + 1,
                                        tick_end - 1, tick_end, tick_end + 1};
            uint64_t at = probes[p];
            /* The record is freed when the tick its expiry falls in has
             * ended; until then it still counts against max_records. */
            enum fsm_outcome want =
                at < tick_end ? FSM_RESOURCE_EXHAUSTED : FSM_ACCEPTED;
            char what[96];

            snprintf(what, sizeof what, "t0 %" PRIu64 " at expiry%+" PRId64, t0,
                     (int64_t)(at - expiry));
            fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "k2", 3);
            c.ttl_ms = 1000;
            c.lease_ms = 1000;
            cmds[0] = fh_cmd_claim(&c);
            cmds[1] = fh_cmd_lookup("s", "k1");
            ck_assert_int_eq(fh_apply(&a, at, cmds, 2, ra), 0);
            ck_assert_int_eq(fh_apply(&b, at, cmds, 2, rb), 0);
            ck_assert_msg(ra[0].outcome == rb[0].outcome,
                          "%s: claim k2: original %s, restored %s", what,
                          fsm_outcome_name(ra[0].outcome),
                          fsm_outcome_name(rb[0].outcome));
            ck_assert_msg(ra[0].outcome == want, "%s: claim k2: %s, want %s",
                          what, fsm_outcome_name(ra[0].outcome),
                          fsm_outcome_name(want));
            /* An expired record behaves as absent even before it is freed. */
            want = at < expiry ? FSM_FOUND : FSM_NOT_FOUND;
            ck_assert_msg(ra[1].outcome == want && rb[1].outcome == want,
                          "%s: lookup k1: %s and %s, want %s", what,
                          fsm_outcome_name(ra[1].outcome),
                          fsm_outcome_name(rb[1].outcome),
                          fsm_outcome_name(want));
            ck_assert_msg(fsm_n_records(a.f) == 1, "%s: n_records %" PRIu64,
                          what, fsm_n_records(a.f));
            assert_same_state(&a, &b, what);

            /* Once the expiry's tick has ended on both, k1 is gone. */
            fh_tick(&a, tick_end + TICK_MS);
            fh_tick(&b, tick_end + TICK_MS);
            assert_same_state(&a, &b, what);
            if (at < tick_end) {
                ck_assert_msg(fsm_n_records(a.f) == 0,
                              "%s: n_records %" PRIu64 " after the tick", what,
                              fsm_n_records(a.f));
            }
            free(ra);
            free(rb);
            fh_close(&a);
            fh_close(&b);
        }
    }
}
END_TEST

/* --- skew_fence ----------------------------------------------------------- */

START_TEST(skew_fence_after_skew_cut)
{
    const uint64_t t0 = FH_T0;
    const uint64_t ts = t0 + MS_HOUR; /* accepted under max_skew 1 h */
    struct fh a, b;
    struct fsm_settings s;
    struct fsm_claim c;
    struct fsm_cmd cmd;
    struct fh_res *r = fh_res_array(1);

    fh_settings(&s);
    s.max_window_ms = 5 * MS_MIN;
    s.max_skew_ms = MS_HOUR;
    fh_init_booted(&a, FH_DIRECT, &s, t0);

    fh_claim(&c, FSM_KIND_NONCE, "webhooks", "nonce-1", 1);
    fh_claim_ts(&c, ts, 5 * MS_MIN);
    fh_assert_is(fh_do_claim(&a, t0, &c, r), FSM_ACCEPTED);
    /* Retention: ts + max_window + max_skew. */
    ck_assert_uint_eq(r->expires_ms, ts + 5 * MS_MIN + MS_HOUR);

    /* Lower max_skew, then raise max_window to 7 days. */
    s = *fsm_settings(a.f);
    s.max_skew_ms = 1000;
    cmd = fh_cmd_settings(&s);
    fh_assert_is(fh_do(&a, t0 + 1, &cmd, r), FSM_OK);
    s.max_window_ms = 7 * MS_DAY;
    cmd = fh_cmd_settings(&s);
    fh_assert_is(fh_do(&a, t0 + 2, &cmd, r), FSM_OK);
    ck_assert_uint_eq(fsm_settings(a.f)->max_window_ms, 7 * MS_DAY);
    ck_assert_uint_eq(fsm_settings(a.f)->max_skew_ms, 1000);

    /* A replica restored now must fence the same way. */
    fh_init(&b, FH_DIRECT);
    restore_from(&b, &a);

    /* Still live just before its retention: REPLAYED. */
    fh_claim(&c, FSM_KIND_NONCE, "webhooks", "nonce-1", 2);
    fh_claim_ts(&c, ts, 7 * MS_DAY);
    fh_assert_is(fh_do_claim(&a, t0 + 2 * MS_HOUR, &c, r), FSM_REPLAYED);
    fh_assert_is(fh_do_claim(&b, t0 + 2 * MS_HOUR, &c, r), FSM_REPLAYED);
    assert_same_state(&a, &b, "replay while live");

    /* After the retention (t0 + 2 h 05) the record is pruned; the same ts
     * with a fresh request id and the largest window is STALE. */
    for (int i = 0; i < 2; i++) {
        struct fh *h = i == 0 ? &a : &b;

        fh_claim(&c, FSM_KIND_NONCE, "webhooks", "nonce-1", 3);
        fh_claim_ts(&c, ts, 7 * MS_DAY);
        fh_do_claim(h, t0 + 2 * MS_HOUR + 10 * MS_MIN, &c, r);
        ck_assert_msg(r->outcome == FSM_STALE,
                      "%s: replay after retention: %s (%s), want STALE",
                      i == 0 ? "original" : "restored",
                      fsm_outcome_name(r->outcome), r->reason);
        ck_assert_uint_eq(fsm_n_records(h->f), 0);
        fh_assert_is(fh_do_lookup(h, t0 + 2 * MS_HOUR + 10 * MS_MIN, "webhooks",
                                  "nonce-1", r),
                     FSM_NOT_FOUND);
    }
    assert_same_state(&a, &b, "replay after retention");

    /* A ts after the fence bound gets the window it asks for. */
    fh_claim(&c, FSM_KIND_NONCE, "webhooks", "nonce-2", 4);
    fh_claim_ts(&c, ts + 1, 7 * MS_DAY);
    fh_assert_is(fh_do_claim(&a, t0 + 2 * MS_HOUR + 11 * MS_MIN, &c, r),
                 FSM_ACCEPTED);
    fh_assert_is(fh_do_claim(&b, t0 + 2 * MS_HOUR + 11 * MS_MIN, &c, r),
                 FSM_ACCEPTED);
    assert_same_state(&a, &b, "claim after the fence bound");

    free(r);
    fh_close(&a);
    fh_close(&b);
}
END_TEST

/* --- resbytes ------------------------------------------------------------- */

/* Boot @h with max_bytes @max_bytes and claim IDEMPOTENT keys fill_key[0..n)
 * in one batch (ttl 1 h) until max_bytes refuses them. Stores the owner
 * tokens in @tok and returns how many were accepted (a prefix). */
/* The log schema fill_idempotent bootstraps at: the schema-1 tests below
 * keep the refusals a schema-1 binary makes (no result reservations). */
static uint32_t fill_schema = FSM_SCHEMA_VERSION;

static size_t fill_idempotent(struct fh *h,
                              uint64_t max_bytes,
                              size_t n,
                              struct fsm_token *tok)
{
    struct fsm_settings s;
    struct fsm_bootstrap b;
    struct fsm_cmd boot;
    struct fh_res br;
    struct fsm_claim *cl = calloc(n, sizeof *cl);
    struct fsm_cmd *cmds = calloc(n, sizeof *cmds);
    struct lres *out = calloc(n, sizeof *out);
    size_t n_acc = 0;

    ck_assert_ptr_nonnull(cl);
    ck_assert_ptr_nonnull(cmds);
    ck_assert_ptr_nonnull(out);
    fill_keys_init();
    fh_settings(&s);
    s.max_bytes = max_bytes;
    fh_init(h, FH_DIRECT);
    fh_bootstrap_cmd(&b, &s);
    boot = fh_cmd_bootstrap(&b);
    ck_assert_int_eq(fh_apply_schema(h, fill_schema, FH_T0, &boot, 1, &br), 0);
    fh_assert_outcome(&br, FSM_OK);
    ck_assert_uint_eq(fsm_schema_version(h->f), fill_schema);
    for (size_t i = 0; i < n; i++) {
        fh_claim(&cl[i], FSM_KIND_IDEMPOTENT, "s", fill_key[i], 100 + i);
        cl[i].ttl_ms = MS_HOUR;
        cmds[i] = fh_cmd_claim(&cl[i]);
    }
    apply_light(h, FH_T0, cmds, n, out);
    while (n_acc < n && out[n_acc].outcome == FSM_ACCEPTED) {
        tok[n_acc] = out[n_acc].owner_token;
        n_acc++;
    }
    for (size_t i = n_acc; i < n; i++) {
        fh_assert_is(out[i].outcome, FSM_RESOURCE_EXHAUSTED);
    }
    ck_assert_uint_gt(n_acc, 2);
    ck_assert_uint_lt(n_acc, n);
    ck_assert_uint_le(fsm_bytes(h->f), max_bytes);
    free(cl);
    free(cmds);
    free(out);
    return n_acc;
}

START_TEST(resbytes_complete_over_max_bytes)
{
    const uint64_t max_bytes = 1u << 20;
    struct fh h, twin;
    struct fsm_token *tok = calloc(N_FILL, sizeof *tok);
    struct fsm_cmd *cmds = calloc(N_FILL, sizeof *cmds);
    struct lres *out = calloc(N_FILL, sizeof *out);
    uint8_t *result = malloc(FSM_RESULT_MAX);
    struct fh_res *r = fh_res_array(1);
    struct fsm_claim c;
    size_t n_acc, n_twin;

    ck_assert_ptr_nonnull(tok);
    ck_assert_ptr_nonnull(cmds);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(result);
    for (size_t i = 0; i < FSM_RESULT_MAX; i++) {
        result[i] = (uint8_t)(i * 7 + 3);
    }
    n_acc = fill_idempotent(&h, max_bytes, N_FILL, tok);
    n_twin = fill_idempotent(&twin, max_bytes, N_FILL, tok);
    ck_assert_uint_eq(n_acc, n_twin);
    /* Each accepted claim reserved room for a 64 KiB result. */
    ck_assert_uint_ge(fsm_bytes(h.f), n_acc * (uint64_t)FSM_RESULT_MAX);

    /* Every owner completes with a 64 KiB result: all stored, within
     * max_bytes, whatever filled the table. */
    for (size_t i = 0; i < n_acc; i++) {
        cmds[i] =
            fh_cmd_complete("s", fill_key[i], tok[i], result, FSM_RESULT_MAX);
    }
    apply_light(&h, FH_T0 + 1, cmds, n_acc, out);
    apply_light(&twin, FH_T0 + 1, cmds, n_acc, out);
    for (size_t i = 0; i < n_acc; i++) {
        ck_assert_msg(out[i].outcome == FSM_COMPLETED, "complete %zu: %s", i,
                      fsm_outcome_name(out[i].outcome));
        fh_lookup_read(&h, "s", fill_key[i], r);
        ck_assert_int_eq(r->state, FSM_STATE_COMPLETED);
        ck_assert_uint_eq(r->result_len, FSM_RESULT_MAX);
        ck_assert(memcmp(r->result, result, FSM_RESULT_MAX) == 0);
    }
    ck_assert_uint_le(fsm_bytes(h.f), max_bytes);
    assert_same_state(&h, &twin, "after the Completes");

    /* New records are what is refused. */
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "one-more", 99999);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0 + 2, &c, r), FSM_RESOURCE_EXHAUSTED);
    ck_assert_uint_le(fsm_bytes(h.f), max_bytes);

    free(tok);
    free(cmds);
    free(out);
    free(result);
    free(r);
    fh_close(&h);
    fh_close(&twin);
}
END_TEST

START_TEST(resbytes_release_over_max_bytes)
{
    const uint64_t max_bytes = 1u << 20;
    struct fh h;
    struct fsm_token tok[64];
    struct fsm_cmd cmds[64];
    struct lres out[64];
    uint8_t error[FSM_ERROR_MAX];
    struct fh_res *r = fh_res_array(1);
    struct fsm_claim c;
    struct fsm_cmd cmd;
    size_t n_acc;
    uint64_t full;

    for (size_t i = 0; i < sizeof error; i++) {
        error[i] = (uint8_t)(i * 13 + 1);
    }
    n_acc = fill_idempotent(&h, max_bytes, 64, tok);
    ck_assert_uint_ge(n_acc, 4);
    full = fsm_bytes(h.f);

    /* A non-terminal release keeps the reservation (the owner may still
     * fail it, a taker complete it); the takeover needs no new room. */
    cmd = fh_cmd_release("s", fill_key[0], tok[0], false, NULL, 0);
    fh_assert_is(fh_do(&h, FH_T0 + 1, &cmd, r), FSM_RELEASED);
    ck_assert_uint_eq(fsm_bytes(h.f), full);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "no-room", 7776);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0 + 1, &c, r), FSM_RESOURCE_EXHAUSTED);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", fill_key[0], 7777);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0 + 2, &c, r), FSM_ACCEPTED);
    tok[0] = r->owner_token;
    ck_assert_uint_ge(fsm_bytes(h.f), full); /* plus the attempt kept */
    ck_assert_uint_le(fsm_bytes(h.f), max_bytes);

    /* Every owner fails terminally with a 1 KiB error: all stored. */
    for (size_t i = 0; i < n_acc; i++) {
        cmds[i] = fh_cmd_release("s", fill_key[i], tok[i], true, error,
                                 FSM_ERROR_MAX);
    }
    apply_light(&h, FH_T0 + 3, cmds, n_acc, out);
    for (size_t i = 0; i < n_acc; i++) {
        ck_assert_msg(out[i].outcome == FSM_FAILED, "release %zu: %s", i,
                      fsm_outcome_name(out[i].outcome));
        fh_lookup_read(&h, "s", fill_key[i], r);
        ck_assert_int_eq(r->state, FSM_STATE_FAILED);
        ck_assert_uint_eq(r->stored_error_len, FSM_ERROR_MAX);
    }
    /* The 1 KiB errors took less than the reservations they replace: room
     * for new claims again. */
    ck_assert_uint_lt(fsm_bytes(h.f), full);
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "s", "after-failures", 8888);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0 + 4, &c, r), FSM_ACCEPTED);
    ck_assert_uint_le(fsm_bytes(h.f), max_bytes);

    free(r);
    fh_close(&h);
}
END_TEST

static void assert_pending(struct fh *h, size_t i, struct fh_res *r)
{
    fh_lookup_read(h, "s", fill_key[i], r);
    fh_assert_outcome(r, FSM_FOUND);
    ck_assert_msg(r->state == FSM_STATE_PENDING, "%s: state %s", fill_key[i],
                  fsm_state_name(r->state));
    ck_assert_uint_eq(r->result_len, 0);
    ck_assert_uint_eq(r->stored_error_len, 0);
}

/* Under log schema 1 (a cluster not yet upgraded) apply decides as a
 * schema-1 binary does: no result reservation, so a Complete or a terminal
 * Release that does not fit max_bytes is refused. The two tests as they
 * were before schema 2, on a schema-1 state. */
START_TEST(resbytes_complete_over_max_bytes_schema1)
{
    const uint64_t max_bytes = 64u << 10;
    struct fh h, twin;
    struct fsm_token *tok = calloc(N_FILL, sizeof *tok);
    struct fsm_cmd *cmds = calloc(N_FILL, sizeof *cmds);
    struct lres *out = calloc(N_FILL, sizeof *out);
    uint8_t *result = malloc(FSM_RESULT_MAX);
    struct fh_res *r = fh_res_array(1);
    struct fsm_cmd cmd;
    size_t n_acc, n_twin;
    uint64_t full, left;

    ck_assert_ptr_nonnull(tok);
    ck_assert_ptr_nonnull(cmds);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(result);
    for (size_t i = 0; i < FSM_RESULT_MAX; i++) {
        result[i] = (uint8_t)(i * 7 + 3);
    }
    fill_schema = 1;
    n_acc = fill_idempotent(&h, max_bytes, N_FILL, tok);
    n_twin = fill_idempotent(&twin, max_bytes, N_FILL, tok);
    fill_schema = FSM_SCHEMA_VERSION;
    ck_assert_uint_eq(n_acc, n_twin);
    full = fsm_bytes(h.f);

    /* Every owner completes with a 64 KiB result: all refused, nothing
     * stored (the twin applies an empty batch instead). */
    for (size_t i = 0; i < n_acc; i++) {
        cmds[i] =
            fh_cmd_complete("s", fill_key[i], tok[i], result, FSM_RESULT_MAX);
    }
    apply_light(&h, FH_T0 + 1, cmds, n_acc, out);
    fh_tick(&twin, FH_T0 + 1);
    for (size_t i = 0; i < n_acc; i++) {
        ck_assert_msg(out[i].outcome == FSM_RESOURCE_EXHAUSTED,
                      "complete %zu: %s", i, fsm_outcome_name(out[i].outcome));
        ck_assert_msg(out[i].has_record && out[i].state == FSM_STATE_PENDING,
                      "complete %zu: state %s", i,
                      fsm_state_name(out[i].state));
        assert_pending(&h, i, r);
    }
    ck_assert_uint_eq(fsm_bytes(h.f), full);
    assert_same_state(&h, &twin, "after refused Completes");

    /* The limit is exact: one byte over is refused, the rest fits. */
    left = max_bytes - full;
    ck_assert_uint_lt(left, FSM_RESULT_MAX);
    cmd = fh_cmd_complete("s", fill_key[0], tok[0], result, left + 1);
    fh_assert_is(fh_do(&h, FH_T0 + 2, &cmd, r), FSM_RESOURCE_EXHAUSTED);
    ck_assert_int_eq(r->state, FSM_STATE_PENDING);
    assert_pending(&h, 0, r);
    ck_assert_uint_eq(fsm_bytes(h.f), full);
    cmd = fh_cmd_complete("s", fill_key[0], tok[0], result, left);
    fh_assert_is(fh_do(&h, FH_T0 + 3, &cmd, r), FSM_COMPLETED);
    ck_assert(!r->retry);
    ck_assert_uint_eq(fsm_bytes(h.f), max_bytes);
    fh_lookup_read(&h, "s", fill_key[0], r);
    fh_assert_outcome(r, FSM_FOUND);
    ck_assert_int_eq(r->state, FSM_STATE_COMPLETED);
    ck_assert_uint_eq(r->result_len, left);
    ck_assert(memcmp(r->result, result, left) == 0);

    /* Full: the next owner cannot store a byte, but an empty result fits. */
    cmd = fh_cmd_complete("s", fill_key[1], tok[1], result, 1);
    fh_assert_is(fh_do(&h, FH_T0 + 4, &cmd, r), FSM_RESOURCE_EXHAUSTED);
    assert_pending(&h, 1, r);
    cmd = fh_cmd_complete("s", fill_key[1], tok[1], result, 0);
    fh_assert_is(fh_do(&h, FH_T0 + 5, &cmd, r), FSM_COMPLETED);
    ck_assert_uint_eq(fsm_bytes(h.f), max_bytes);

    /* A refused owner can still release (nothing stored). */
    cmd = fh_cmd_release("s", fill_key[2], tok[2], false, result, 10);
    fh_assert_is(fh_do(&h, FH_T0 + 6, &cmd, r), FSM_RELEASED);
    ck_assert_uint_eq(fsm_bytes(h.f), max_bytes);

    free(tok);
    free(cmds);
    free(out);
    free(result);
    free(r);
    fh_close(&h);
    fh_close(&twin);
}
END_TEST

START_TEST(resbytes_release_over_max_bytes_schema1)
{
    const uint64_t max_bytes = 4096;
    struct fh h, twin;
    struct fsm_token tok[64];
    struct fsm_cmd cmds[64];
    struct lres out[64];
    uint8_t error[FSM_ERROR_MAX];
    struct fh_res *r = fh_res_array(1);
    struct fsm_cmd cmd;
    size_t n_acc, n_twin;
    uint64_t full, left;

    for (size_t i = 0; i < sizeof error; i++) {
        error[i] = (uint8_t)(i * 13 + 1);
    }
    fill_schema = 1;
    n_acc = fill_idempotent(&h, max_bytes, 64, tok);
    n_twin = fill_idempotent(&twin, max_bytes, 64, tok);
    fill_schema = FSM_SCHEMA_VERSION;
    ck_assert_uint_eq(n_acc, n_twin);
    ck_assert_uint_ge(n_acc, 4);
    full = fsm_bytes(h.f);
    left = max_bytes - full;
    ck_assert_uint_lt(left, FSM_ERROR_MAX);

    /* Every owner fails terminally with a 1 KiB error: all refused. */
    for (size_t i = 0; i < n_acc; i++) {
        cmds[i] = fh_cmd_release("s", fill_key[i], tok[i], true, error,
                                 FSM_ERROR_MAX);
    }
    apply_light(&h, FH_T0 + 1, cmds, n_acc, out);
    fh_tick(&twin, FH_T0 + 1);
    for (size_t i = 0; i < n_acc; i++) {
        ck_assert_msg(out[i].outcome == FSM_RESOURCE_EXHAUSTED,
                      "release %zu: %s", i, fsm_outcome_name(out[i].outcome));
        ck_assert_int_eq(out[i].state, FSM_STATE_PENDING);
        assert_pending(&h, i, r);
    }
    ck_assert_uint_eq(fsm_bytes(h.f), full);
    assert_same_state(&h, &twin, "after refused Releases");

    /* One byte over the limit: refused, the record stays PENDING. */
    cmd = fh_cmd_release("s", fill_key[0], tok[0], true, error, left + 1);
    fh_assert_is(fh_do(&h, FH_T0 + 2, &cmd, r), FSM_RESOURCE_EXHAUSTED);
    ck_assert_int_eq(r->state, FSM_STATE_PENDING);
    assert_pending(&h, 0, r);
    ck_assert_uint_eq(fsm_bytes(h.f), full);

    /* A RELEASED record stays RELEASED when the terminal error is too big;
     * a non-terminal release stores nothing and is never refused. */
    cmd = fh_cmd_release("s", fill_key[1], tok[1], false, error, FSM_ERROR_MAX);
    fh_assert_is(fh_do(&h, FH_T0 + 3, &cmd, r), FSM_RELEASED);
    ck_assert_uint_eq(fsm_bytes(h.f), full);
    cmd = fh_cmd_release("s", fill_key[1], tok[1], true, error, left + 1);
    fh_assert_is(fh_do(&h, FH_T0 + 4, &cmd, r), FSM_RESOURCE_EXHAUSTED);
    ck_assert_int_eq(r->state, FSM_STATE_RELEASED);
    fh_lookup_read(&h, "s", fill_key[1], r);
    ck_assert_int_eq(r->state, FSM_STATE_RELEASED);
    ck_assert_uint_eq(r->stored_error_len, 0);
    ck_assert_uint_eq(fsm_bytes(h.f), full);

    /* Exactly what is left fits. */
    cmd = fh_cmd_release("s", fill_key[0], tok[0], true, error, left);
    fh_assert_is(fh_do(&h, FH_T0 + 5, &cmd, r), FSM_FAILED);
    ck_assert(!r->retry);
    ck_assert_uint_eq(fsm_bytes(h.f), max_bytes);
    fh_lookup_read(&h, "s", fill_key[0], r);
    ck_assert_int_eq(r->state, FSM_STATE_FAILED);
    ck_assert_uint_eq(r->stored_error_len, left);
    ck_assert(memcmp(r->stored_error, error, left) == 0);

    /* Full: a one-byte error is refused, an empty one fits. */
    cmd = fh_cmd_release("s", fill_key[2], tok[2], true, error, 1);
    fh_assert_is(fh_do(&h, FH_T0 + 6, &cmd, r), FSM_RESOURCE_EXHAUSTED);
    assert_pending(&h, 2, r);
    cmd = fh_cmd_release("s", fill_key[2], tok[2], true, error, 0);
    fh_assert_is(fh_do(&h, FH_T0 + 7, &cmd, r), FSM_FAILED);
    ck_assert_uint_eq(fsm_bytes(h.f), max_bytes);

    free(r);
    fh_close(&h);
    fh_close(&twin);
}
END_TEST

/* --- attbytes ------------------------------------------------------------- */

/* Apply NONCE claims of fill_key[0..n) to @h in one batch at @time (ttl
 * 1 h), request id @rid, execution id @exec (@exec_len bytes). */
static void nonce_batch(struct fh *h,
                        uint64_t time,
                        size_t n,
                        uint64_t rid,
                        const uint8_t *exec,
                        size_t exec_len,
                        struct lres *out)
{
    struct fsm_claim c;
    struct fsm_cmd *cmds = calloc(n, sizeof *cmds);

    ck_assert_ptr_nonnull(cmds);
    for (size_t i = 0; i < n; i++) {
        fh_claim(&c, FSM_KIND_NONCE, "s", fill_key[i], rid);
        c.ttl_ms = MS_HOUR;
        c.execution_id = exec;
        c.execution_id_len = exec_len;
        cmds[i] = fh_cmd_claim(&c);
    }
    apply_light(h, time, cmds, n, out);
    free(cmds);
}

START_TEST(attbytes_replay_flood)
{
    const uint64_t max_bytes = 64u << 10;
    const size_t n = 256;
    struct fh h;
    struct fsm_settings s;
    struct lres *out = calloc(n, sizeof *out);
    struct fh_res *r = fh_res_array(1);
    uint8_t exec[FSM_EXECUTION_ID_MAX];
    size_t n_ext = 0;
    uint64_t prev;

    ck_assert_ptr_nonnull(out);
    memset(exec, 'x', sizeof exec);
    fill_keys_init();
    fh_settings(&s);
    s.max_bytes = max_bytes;
    fh_init_booted(&h, FH_DIRECT, &s, FH_T0);
    nonce_batch(&h, FH_T0, n, 1, NULL, 0, out);
    for (size_t i = 0; i < n; i++) {
        fh_assert_is(out[i].outcome, FSM_ACCEPTED);
    }
    prev = fsm_bytes(h.f);
    ck_assert_uint_le(prev, max_bytes / 2);

    /* Round 1 stores attempts until max_bytes is reached: the records that
     * got attempt storage are a prefix of the batch. */
    for (uint32_t round = 1; round <= 4; round++) {
        nonce_batch(&h, FH_T0 + round, n, 1 + round, exec, sizeof exec, out);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(out[i].outcome == FSM_REPLAYED,
                          "round %u key %zu: %s", round, i,
                          fsm_outcome_name(out[i].outcome));
        }
        if (round == 1) {
            while (n_ext < n && out[n_ext].attempts == 1) {
                n_ext++;
            }
            ck_assert_uint_gt(n_ext, 0);
            ck_assert_uint_lt(n_ext, n);
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t want = i < n_ext ? round : 0;

            ck_assert_msg(out[i].attempts == want,
                          "round %u key %zu: attempts %u, want %u", round, i,
                          out[i].attempts, want);
        }
        ck_assert_msg(fsm_bytes(h.f) <= max_bytes,
                      "round %u: fsm_bytes %" PRIu64 " > max_bytes", round,
                      fsm_bytes(h.f));
        ck_assert_uint_ge(fsm_bytes(h.f), prev);
        prev = fsm_bytes(h.f);
    }
    for (size_t i = 0; i < n; i++) {
        fh_lookup_read(&h, "s", fill_key[i], r);
        fh_assert_outcome(r, FSM_FOUND);
        ck_assert_uint_eq(r->attempts, i < n_ext ? 4 : 0);
        if (i < n_ext) {
            ck_assert_uint_ge(r->n_attempt_list, 1);
            ck_assert(fh_rid_is(r->attempt_list[0].request_id, 2));
        } else {
            ck_assert_uint_eq(r->n_attempt_list, 0);
        }
    }
    free(out);
    free(r);
    fh_close(&h);
}
END_TEST

START_TEST(attbytes_counted_when_full)
{
    const uint64_t max_bytes = 64u << 10;
    struct fh h, b;
    struct fsm_settings s;
    struct fsm_claim c;
    struct lres *out = calloc(N_FILL, sizeof *out);
    struct fh_res *r = fh_res_array(1);
    uint8_t exec[FSM_EXECUTION_ID_MAX];
    size_t n_acc = 0;
    uint64_t full;

    ck_assert_ptr_nonnull(out);
    memset(exec, 'y', sizeof exec);
    fill_keys_init();
    fh_settings(&s);
    s.max_bytes = max_bytes;
    fh_init_booted(&h, FH_DIRECT, &s, FH_T0);

    /* "a" gets attempt storage while there is room. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 1);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0, &c, r), FSM_ACCEPTED);
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 2);
    c.ttl_ms = MS_HOUR;
    fh_claim_exec(&c, "e2");
    fh_assert_is(fh_do_claim(&h, FH_T0, &c, r), FSM_REPLAYED);
    ck_assert_uint_eq(r->attempts, 1);

    /* Fill max_bytes with records. */
    nonce_batch(&h, FH_T0 + 1, N_FILL, 1, NULL, 0, out);
    while (n_acc < N_FILL && out[n_acc].outcome == FSM_ACCEPTED) {
        n_acc++;
    }
    ck_assert_uint_gt(n_acc, 0);
    ck_assert_uint_lt(n_acc, N_FILL);
    fh_assert_is(out[N_FILL - 1].outcome, FSM_RESOURCE_EXHAUSTED);
    full = fsm_bytes(h.f);
    ck_assert_uint_le(full, max_bytes);

    /* Replays of "a": REPLAYED, counted, not stored. */
    for (uint64_t k = 1; k <= 8; k++) {
        fh_claim(&c, FSM_KIND_NONCE, "s", "a", 2 + k);
        c.ttl_ms = MS_HOUR;
        c.execution_id = exec;
        c.execution_id_len = sizeof exec;
        fh_assert_is(fh_do_claim(&h, FH_T0 + 1 + k, &c, r), FSM_REPLAYED);
        ck_assert_uint_eq(r->attempts, 1 + k);
        ck_assert_uint_eq(fsm_bytes(h.f), full);
    }
    /* A retry of the accepted request id is counted too. */
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 1);
    c.ttl_ms = MS_HOUR;
    c.execution_id = exec;
    c.execution_id_len = sizeof exec;
    fh_assert_is(fh_do_claim(&h, FH_T0 + 20, &c, r), FSM_ACCEPTED);
    ck_assert(r->retry);
    ck_assert_uint_eq(r->attempts, 10);
    ck_assert_uint_eq(fsm_bytes(h.f), full);

    fh_lookup_read(&h, "s", "a", r);
    fh_assert_outcome(r, FSM_FOUND);
    ck_assert_uint_eq(r->attempts, 10);
    ck_assert_uint_eq(r->n_attempt_list, 1);
    ck_assert(fh_rid_is(r->attempt_list[0].request_id, 2));
    ck_assert_uint_eq(r->attempt_list[0].execution_id_len, 2);
    ck_assert(memcmp(r->attempt_list[0].execution_id, "e2", 2) == 0);

    /* A filled record without attempt storage answers, counts nothing. */
    fh_claim(&c, FSM_KIND_NONCE, "s", fill_key[0], 77);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0 + 21, &c, r), FSM_REPLAYED);
    ck_assert_uint_eq(fsm_bytes(h.f), full);
    fh_lookup_read(&h, "s", fill_key[0], r);
    ck_assert_uint_eq(r->attempts, 0);
    ck_assert_uint_eq(r->n_attempt_list, 0);

    /* The count survives a snapshot round trip. */
    fh_init(&b, FH_DIRECT);
    restore_from(&b, &h);
    assert_same_state(&h, &b, "restored");
    fh_lookup_read(&b, "s", "a", r);
    ck_assert_uint_eq(r->attempts, 10);
    fh_claim(&c, FSM_KIND_NONCE, "s", "a", 50);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0 + 22, &c, r), FSM_REPLAYED);
    ck_assert_uint_eq(r->attempts, 11);
    fh_assert_is(fh_do_claim(&b, FH_T0 + 22, &c, r), FSM_REPLAYED);
    ck_assert_uint_eq(r->attempts, 11);
    assert_same_state(&h, &b, "replay after restore");

    free(out);
    free(r);
    fh_close(&h);
    fh_close(&b);
}
END_TEST

/* --- dupmem --------------------------------------------------------------- */

#define DUP_N_MEMBERS 3
static const uint64_t dup_member_id[DUP_N_MEMBERS] = {11, 12, 15};
#define DUP_RETIRED_ID 13
#define DUP_RAFT_ADDR  "10.0.0.1:1"
#define DUP_CLI_ADDR   "10.0.0.1:2"
/* Bytes of one member in a snapshot: u64 id, u8 role, u8 len, raft_addr,
 * u8 len, client_addr. */
#define DUP_MEMBER_SIZE \
    (8 + 1 + 1 + (sizeof DUP_RAFT_ADDR - 1) + 1 + (sizeof DUP_CLI_ADDR - 1))

/* A snapshot of a cluster with members 11, 12, 15 and retired id 13; sets
 * the offsets of the member ids and of the retired id. */
static uint8_t *dup_source(size_t *len, size_t member_off[], size_t *ret_off)
{
    struct fh h;
    struct fsm_bootstrap *bs = malloc(sizeof *bs);
    struct fsm_settings s;
    struct fsm_cmd cmd;
    struct fsm_claim c;
    uint8_t pattern[4 + DUP_MEMBER_SIZE];
    uint8_t *buf;
    size_t at = 0, found = 0, n_found = 0;

    ck_assert_ptr_nonnull(bs);
    fh_init(&h, FH_DIRECT);
    fh_settings(&s);
    fh_bootstrap_cmd(bs, &s);
    bs->n_members = DUP_N_MEMBERS;
    for (size_t i = 0; i < DUP_N_MEMBERS; i++) {
        bs->members[i].id = dup_member_id[i];
        strcpy(bs->members[i].raft_addr, DUP_RAFT_ADDR);
        strcpy(bs->members[i].client_addr, DUP_CLI_ADDR);
        bs->members[i].role = FSM_ROLE_VOTER;
    }
    cmd = fh_cmd_bootstrap(bs);
    fh_assert_is(fh_do(&h, FH_T0, &cmd, NULL), FSM_OK);
    cmd = fh_cmd_retire(DUP_RETIRED_ID);
    fh_assert_is(fh_do(&h, FH_T0, &cmd, NULL), FSM_OK);
    fh_claim(&c, FSM_KIND_NONCE, "s", "k", 1);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&h, FH_T0, &c, NULL), FSM_ACCEPTED);
    ck_assert_uint_eq(fsm_n_members(h.f), DUP_N_MEMBERS);
    ck_assert(fsm_is_retired(h.f, DUP_RETIRED_ID));
    buf = fh_snapshot(h.f, len);
    free(bs);
    fh_close(&h);

    /* Find the member directory: u32 count, then the first member. */
    put_u32(pattern, DUP_N_MEMBERS);
    put_u64(pattern + 4, dup_member_id[0]);
    pattern[12] = FSM_ROLE_VOTER;
    pattern[13] = sizeof DUP_RAFT_ADDR - 1;
    memcpy(pattern + 14, DUP_RAFT_ADDR, sizeof DUP_RAFT_ADDR - 1);
    pattern[14 + sizeof DUP_RAFT_ADDR - 1] = sizeof DUP_CLI_ADDR - 1;
    memcpy(pattern + 15 + sizeof DUP_RAFT_ADDR - 1, DUP_CLI_ADDR,
           sizeof DUP_CLI_ADDR - 1);
    for (at = 0; at + sizeof pattern <= *len; at++) {
        if (memcmp(buf + at, pattern, sizeof pattern) == 0) {
            found = at;
            n_found++;
        }
    }
    ck_assert_msg(n_found == 1, "member directory found %zu times", n_found);
    for (size_t i = 0; i < DUP_N_MEMBERS; i++) {
        member_off[i] = found + 4 + i * DUP_MEMBER_SIZE;
        ck_assert_uint_eq(get_u64(buf + member_off[i]), dup_member_id[i]);
    }
    at = found + 4 + DUP_N_MEMBERS * DUP_MEMBER_SIZE;
    ck_assert_uint_eq(get_u32(buf + at), 1); /* n_retired */
    *ret_off = at + 4;
    ck_assert_uint_eq(get_u64(buf + *ret_off), DUP_RETIRED_ID);
    return buf;
}

START_TEST(dupmem_restore_refused)
{
    struct mutation
    {
        bool retired;  /* patch the retired id, else a member id */
        size_t member; /* which member */
        uint64_t id;   /* new id */
        int want;      /* fsm_restore result */
    };
    static const struct mutation muts[] = {
        {false, 1, 14, 0}, /* control: a fresh id is fine */
        {false, 0, 16, 0},
        {false, 1, 11, FSM_E_MALFORMED}, /* duplicates */
        {false, 2, 11, FSM_E_MALFORMED},
        {false, 2, 12, FSM_E_MALFORMED},
        {false, 0, 15, FSM_E_MALFORMED},
        {false, 0, 13, FSM_E_MALFORMED}, /* a retired id */
        {false, 1, 13, FSM_E_MALFORMED},
        {false, 2, 13, FSM_E_MALFORMED},
        {true, 0, 11, FSM_E_MALFORMED}, /* retire a member's id */
        {true, 0, 12, FSM_E_MALFORMED},
        {true, 0, 15, FSM_E_MALFORMED},
        {true, 0, 14, 0}, /* control */
    };
    size_t len, member_off[DUP_N_MEMBERS], ret_off;
    uint8_t *src = dup_source(&len, member_off, &ret_off);
    uint8_t *buf = malloc(len);
    struct fh target;
    struct fsm_settings s;
    struct fsm_claim c;
    uint8_t *before;
    size_t before_len;
    char err[256];
    int rv;

    ck_assert_ptr_nonnull(buf);

    /* A target with state of its own: another cluster, one member, one
     * record. */
    fh_settings(&s);
    fh_init_booted(&target, FH_DIRECT, &s, FH_T0 + 5000);
    {
        struct fsm_cmd cmd =
            fh_cmd_member(99, "10.9.9.9:1", "10.9.9.9:2", FSM_ROLE_STANDBY);

        fh_assert_is(fh_do(&target, FH_T0 + 5000, &cmd, NULL), FSM_OK);
    }
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "t", "own", 5);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&target, FH_T0 + 5000, &c, NULL), FSM_ACCEPTED);
    before = fh_snapshot(target.f, &before_len);

    /* The untouched snapshot with a recomputed CRC restores. */
    memcpy(buf, src, len);
    fix_crc(buf, len);
    ck_assert(memcmp(buf, src, len) == 0);

    for (size_t m = 0; m < sizeof muts / sizeof muts[0]; m++) {
        const struct mutation *mu = &muts[m];
        size_t off = mu->retired ? ret_off : member_off[mu->member];

        memcpy(buf, src, len);
        put_u64(buf + off, mu->id);
        fix_crc(buf, len);
        err[0] = '\0';
        if (mu->want == 0) {
            struct fh fresh;

            fh_init(&fresh, FH_DIRECT);
            rv = fsm_restore(fresh.f, buf, len, err);
            ck_assert_msg(rv == 0, "mutation %zu: %d (%s) %s", m, rv,
                          fsm_strerror(rv), err);
            ck_assert_uint_eq(fsm_n_members(fresh.f), DUP_N_MEMBERS);
            ck_assert_uint_eq(fsm_n_retired(fresh.f), 1);
            if (mu->retired) {
                ck_assert(fsm_is_retired(fresh.f, mu->id));
            } else {
                ck_assert_uint_eq(fsm_member(fresh.f, mu->member)->id, mu->id);
            }
            fh_close(&fresh);
            continue;
        }
        rv = fsm_restore(target.f, buf, len, err);
        ck_assert_msg(rv == mu->want,
                      "mutation %zu (%s %zu := %" PRIu64
                      "): restore %d (%s), "
                      "want %d",
                      m, mu->retired ? "retired" : "member", mu->member, mu->id,
                      rv, fsm_strerror(rv), mu->want);
        ck_assert_msg(err[0] != '\0', "mutation %zu: no error message", m);
        fh_assert_snapshot(&target, before, before_len);
        ck_assert_uint_eq(fsm_n_members(target.f), 1);
        ck_assert_uint_eq(fsm_member(target.f, 0)->id, 99);
    }

    /* The target still works. */
    fh_claim(&c, FSM_KIND_IDEMPOTENT, "t", "own", 6);
    c.ttl_ms = MS_HOUR;
    fh_assert_is(fh_do_claim(&target, FH_T0 + 6000, &c, NULL), FSM_IN_PROGRESS);

    free(before);
    free(src);
    free(buf);
    fh_close(&target);
}
END_TEST

/* --- diff: randomized differential test ----------------------------------- */

/* Replica A never restores, B restores from its own snapshot about every
 * fifth batch, C from A's about every tenth; after every batch the results,
 * snapshot bytes, fsm_bytes and n_records of all three must agree. Sized
 * for about 8 s under ASan on an idle 2-core machine (each seed is one
 * forked run of about 0.1 s plus about 4 ms per batch). */
#define DIFF_SEEDS   24
#define DIFF_BATCHES 60
#define DIFF_NK      40
#define DIFF_MAXCMD  12

struct diff_ctx
{
    uint64_t rng;
    uint64_t seed;
    char keys[DIFF_NK][8];
    struct fsm_token toks[2][DIFF_NK];
    uint8_t payload[3][40];
};

static uint64_t diff_rnd(struct diff_ctx *d)
{
    uint64_t x = d->rng;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    d->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform-ish in [lo, hi]. */
static uint64_t diff_rr(struct diff_ctx *d, uint64_t lo, uint64_t hi)
{
    return lo + diff_rnd(d) % (hi - lo + 1);
}

/* One result, every field that is part of the outcome. */
struct dres
{
    bool emitted;
    enum fsm_cmd_type cmd;
    enum fsm_outcome outcome;
    bool retry;
    bool has_record;
    enum fsm_kind kind;
    enum fsm_state state;
    uint8_t first_request_id[FSM_REQUEST_ID_LEN];
    uint64_t first_index;
    uint64_t first_time_ms;
    uint64_t expires_ms;
    uint32_t attempts;
    bool has_owner_token;
    struct fsm_token owner_token;
    uint32_t owner_attempt;
    uint64_t lease_expires_ms;
    uint64_t retry_after_ms;
    size_t result_len;
    uint8_t result[40];
    size_t stored_error_len;
    uint8_t stored_error[40];
    size_t n_att;
    struct fsm_attempt att[1 + FSM_ATTEMPTS_LAST];
};

static void dres_emit(void *arg, size_t i, const struct fsm_result *r)
{
    struct dres *o = &((struct dres *)arg)[i];

    ck_assert(!o->emitted);
    ck_assert_uint_le(r->result_len, sizeof o->result);
    ck_assert_uint_le(r->stored_error_len, sizeof o->stored_error);
    ck_assert_uint_le(r->n_attempt_list, 1 + FSM_ATTEMPTS_LAST);
    o->emitted = true;
    o->cmd = r->cmd;
    o->outcome = r->outcome;
    o->retry = r->retry;
    o->has_record = r->has_record;
    o->kind = r->kind;
    o->state = r->state;
    memcpy(o->first_request_id, r->first_request_id, FSM_REQUEST_ID_LEN);
    o->first_index = r->first_index;
    o->first_time_ms = r->first_time_ms;
    o->expires_ms = r->expires_ms;
    o->attempts = r->attempts;
    o->has_owner_token = r->has_owner_token;
    o->owner_token = r->owner_token;
    o->owner_attempt = r->owner_attempt;
    o->lease_expires_ms = r->lease_expires_ms;
    o->retry_after_ms = r->retry_after_ms;
    o->result_len = r->result_len;
    if (r->result_len > 0) {
        memcpy(o->result, r->result, r->result_len);
    }
    o->stored_error_len = r->stored_error_len;
    if (r->stored_error_len > 0) {
        memcpy(o->stored_error, r->stored_error, r->stored_error_len);
    }
    o->n_att = r->n_attempt_list;
    for (size_t k = 0; k < r->n_attempt_list; k++) {
        o->att[k] = *r->attempt_list[k];
    }
}

/* NULL if @a and @b are the same outcome, else the first field that
 * differs. */
static const char *dres_diff(const struct dres *a, const struct dres *b)
{
#define DIFF_FIELD(f)   \
    if (a->f != b->f) { \
        return #f;      \
    }
    DIFF_FIELD(emitted)
    DIFF_FIELD(cmd)
    DIFF_FIELD(outcome)
    DIFF_FIELD(retry)
    DIFF_FIELD(has_record)
    DIFF_FIELD(kind)
    DIFF_FIELD(state)
    DIFF_FIELD(first_index)
    DIFF_FIELD(first_time_ms)
    DIFF_FIELD(expires_ms)
    DIFF_FIELD(attempts)
    DIFF_FIELD(has_owner_token)
    DIFF_FIELD(owner_attempt)
    DIFF_FIELD(lease_expires_ms)
    DIFF_FIELD(retry_after_ms)
    DIFF_FIELD(result_len)
    DIFF_FIELD(stored_error_len)
    DIFF_FIELD(n_att)
#undef DIFF_FIELD
    if (memcmp(a->first_request_id, b->first_request_id, FSM_REQUEST_ID_LEN)) {
        return "first_request_id";
    }
    if (!fh_token_eq(a->owner_token, b->owner_token)) {
        return "owner_token";
    }
    if (memcmp(a->result, b->result, a->result_len) != 0) {
        return "result";
    }
    if (memcmp(a->stored_error, b->stored_error, a->stored_error_len) != 0) {
        return "stored_error";
    }
    for (size_t k = 0; k < a->n_att; k++) {
        const struct fsm_attempt *x = &a->att[k], *y = &b->att[k];

        if (memcmp(x->request_id, y->request_id, FSM_REQUEST_ID_LEN) != 0 ||
            x->index != y->index || x->time_ms != y->time_ms ||
            x->outcome != y->outcome || x->retry != y->retry ||
            x->execution_id_len != y->execution_id_len ||
            memcmp(x->execution_id, y->execution_id, x->execution_id_len)) {
            return "attempt_list";
        }
    }
    return NULL;
}

/* Fill @c with a random command (the reviewer's distribution). */
static void diff_cmd(struct diff_ctx *d,
                     uint64_t now,
                     const struct fsm_settings *base,
                     struct fsm_cmd *c)
{
    static const char *const scopes[2] = {"s0", "s1"};
    int s = (int)diff_rr(d, 0, 1);
    int k = (int)diff_rr(d, 0, DIFF_NK - 1);
    const uint8_t *scope = (const uint8_t *)scopes[s];
    const uint8_t *key = (const uint8_t *)d->keys[k];
    size_t key_len = strlen(d->keys[k]);
    uint64_t q = diff_rr(d, 0, 99);

    memset(c, 0, sizeof *c);
    if (q < 55) {
        struct fsm_claim *cl = &c->u.claim;

        c->type = FSM_CMD_CLAIM;
        cl->scope = scope;
        cl->scope_len = 2;
        cl->key = key;
        cl->key_len = key_len;
        memset(cl->request_id, (int)diff_rr(d, 0, 5) + 1, FSM_REQUEST_ID_LEN);
        cl->kind = (k % 3 == 0) ? FSM_KIND_NONCE : FSM_KIND_IDEMPOTENT;
        if (diff_rr(d, 0, 30) == 0) {
            cl->kind = cl->kind == FSM_KIND_NONCE ? FSM_KIND_IDEMPOTENT
                                                  : FSM_KIND_NONCE;
        }
        cl->execution_id = (const uint8_t *)"execid-abcdefghijklmnop";
        cl->execution_id_len = diff_rr(d, 0, 20);
        if (diff_rr(d, 0, 1)) {
            cl->ttl_ms = diff_rr(d, 0, 9) == 0 ? diff_rr(d, 1, FSM_MAX_TTL_CEIL)
                                               : diff_rr(d, 1, 20000);
        }
        if (cl->ttl_ms == 0 || diff_rr(d, 0, 2) == 0) {
            cl->has_ts = true;
            cl->ts_ms = now + diff_rr(d, 0, 8000) - 5000;
            cl->window_ms = diff_rr(d, 1, 5000);
        }
        if (cl->kind == FSM_KIND_IDEMPOTENT) {
            cl->lease_ms = diff_rr(d, 0, 4000);
            if (diff_rr(d, 0, 3) == 0) {
                cl->payload_hash = (const uint8_t *)"hashhashhash";
                cl->payload_hash_len = diff_rr(d, 0, 3);
            }
        }
    } else if (q < 70) {
        c->type = FSM_CMD_COMPLETE;
        c->u.complete.scope = scope;
        c->u.complete.scope_len = 2;
        c->u.complete.key = key;
        c->u.complete.key_len = key_len;
        c->u.complete.owner_token = d->toks[s][k];
        c->u.complete.result = d->payload[0];
        c->u.complete.result_len = diff_rr(d, 0, 40);
    } else if (q < 82) {
        c->type = FSM_CMD_RELEASE;
        c->u.release.scope = scope;
        c->u.release.scope_len = 2;
        c->u.release.key = key;
        c->u.release.key_len = key_len;
        c->u.release.owner_token = d->toks[s][k];
        c->u.release.terminal = diff_rr(d, 0, 2) == 0;
        c->u.release.error = d->payload[1];
        c->u.release.error_len = diff_rr(d, 0, 40);
    } else if (q < 95) {
        c->type = q < 90 ? FSM_CMD_LOOKUP : FSM_CMD_FORGET;
        c->u.ident.scope = scope;
        c->u.ident.scope_len = 2;
        c->u.ident.key = key;
        c->u.ident.key_len = key_len;
    } else {
        c->type = FSM_CMD_SET_SETTINGS;
        c->u.settings = *base;
        c->u.settings.max_window_ms = diff_rr(d, 1000, 8000);
        c->u.settings.max_skew_ms = diff_rr(d, 500, 3000);
        c->u.settings.max_records = diff_rr(d, 10, 40);
    }
}

/* Move the log time @now before a batch. */
static void diff_step(struct diff_ctx *d, uint64_t *now)
{
    uint64_t p = diff_rr(d, 0, 999);
    uint64_t step;

    if (p < 600) {
        step = diff_rr(d, 0, 2000);
    } else if (p < 900) {
        step = diff_rr(d, 0, 20000);
    } else if (p < 990) {
        step = diff_rr(d, 0, 3 * MS_DAY);
    } else {
        step = diff_rr(d, 0, 9) == 0 ? diff_rr(d, 0, 20 * 365 * MS_DAY)
                                     : diff_rr(d, 0, 200 * MS_DAY);
    }
    if (diff_rr(d, 0, 20) == 0) {
        step = 0;
        *now -= diff_rr(d, 0, 5000); /* a stamp from the past */
    }
    *now += step;
}

static void diff_reload(struct fsm *dst, const struct fsm *src, uint64_t seed)
{
    size_t len;
    uint8_t *buf = fh_snapshot(src, &len);
    char err[256] = "";
    int rv = fsm_restore(dst, buf, len, err);

    ck_assert_msg(rv == 0, "seed %" PRIu64 ": restore %d (%s) %s", seed, rv,
                  fsm_strerror(rv), err);
    free(buf);
}

static const char *const diff_name = "ABC";

/* The context's keys, payloads and the bootstrap of the three replicas. */
static void diff_setup(struct diff_ctx *d,
                       struct fsm_bootstrap *bs,
                       uint64_t seed)
{
    d->seed = seed;
    d->rng = seed * 2654435761u + 1;
    for (int i = 0; i < DIFF_NK; i++) {
        snprintf(d->keys[i], sizeof d->keys[i], "k%d", i);
    }
    for (int i = 0; i < 3; i++) {
        memset(d->payload[i], 'a' + i, sizeof d->payload[i]);
    }
    for (int i = 0; i < FSM_CLUSTER_ID_LEN; i++) {
        bs->cluster_id[i] = (uint8_t)(i + 1);
        bs->hash_key[i] = (uint8_t)(0xa0 + i);
    }
    bs->group_id = FH_GROUP_ID;
    bs->settings.max_window_ms = 5000;
    bs->settings.max_skew_ms = 2000;
    bs->settings.max_ttl_ms = FSM_MAX_TTL_CEIL;
    bs->settings.max_lease_ms = 4000;
    bs->settings.max_records = 30;
    bs->settings.max_bytes = 1 << 20;
}

/* Every replica answered every command of the batch alike. */
static void diff_check_results(uint64_t seed,
                               int it,
                               const struct fsm_cmd *cmds,
                               size_t n,
                               struct dres *res[3])
{
    const char *const name = diff_name;

    for (size_t i = 0; i < n; i++) {
        for (int j = 1; j < 3; j++) {
            const char *field = dres_diff(&res[0][i], &res[j][i]);

            ck_assert_msg(field == NULL,
                          "seed %" PRIu64
                          " batch %d cmd %zu (type %d): "
                          "A and %c differ in %s: outcome %s / %s, "
                          "attempts %u / %u",
                          seed, it, i, (int)cmds[i].type, name[j], field,
                          fsm_outcome_name(res[0][i].outcome),
                          fsm_outcome_name(res[j][i].outcome),
                          res[0][i].attempts, res[j][i].attempts);
        }
    }
}

/* The replicas' snapshots and counters are identical after the batch. */
static void diff_check_states(uint64_t seed,
                              int it,
                              struct fsm *rep[3],
                              const struct fsm_settings *settings)
{
    const char *const name = diff_name;
    size_t len[3];
    uint8_t *snap[3];

    for (int j = 0; j < 3; j++) {
        snap[j] = fh_snapshot(rep[j], &len[j]);
    }
    for (int j = 1; j < 3; j++) {
        size_t first = 0;

        while (first < len[0] && first < len[j] &&
               snap[0][first] == snap[j][first]) {
            first++;
        }
        ck_assert_msg(len[0] == len[j] && first == len[0],
                      "seed %" PRIu64
                      " batch %d: snapshots of A and %c "
                      "differ (%zu / %zu bytes, first at %zu)",
                      seed, it, name[j], len[0], len[j], first);
        ck_assert_msg(fsm_bytes(rep[0]) == fsm_bytes(rep[j]),
                      "seed %" PRIu64 " batch %d: fsm_bytes A %" PRIu64
                      " %c %" PRIu64,
                      seed, it, fsm_bytes(rep[0]), name[j], fsm_bytes(rep[j]));
        ck_assert_msg(
            fsm_n_records(rep[0]) == fsm_n_records(rep[j]),
            "seed %" PRIu64 " batch %d: n_records A %" PRIu64 " %c %" PRIu64,
            seed, it, fsm_n_records(rep[0]), name[j], fsm_n_records(rep[j]));
    }
    ck_assert_msg(fsm_bytes(rep[0]) <= settings->max_bytes,
                  "seed %" PRIu64 " batch %d: fsm_bytes %" PRIu64
                  " over max_bytes",
                  seed, it, fsm_bytes(rep[0]));
    for (int j = 0; j < 3; j++) {
        free(snap[j]);
    }
}

START_TEST(diff_replicas_agree)
{
    struct diff_ctx *d = calloc(1, sizeof *d);
    struct fsm *rep[3];
    struct fsm_bootstrap *bs = calloc(1, sizeof *bs);
    struct fsm_cmd cmds[DIFF_MAXCMD];
    struct dres *res[3];
    uint64_t now = FH_T0, idx = 1;
    const uint64_t seed = (uint64_t)_i + 1;
    const char *const name = diff_name;

    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(bs);
    diff_setup(d, bs, seed);
    memset(&cmds[0], 0, sizeof cmds[0]);
    cmds[0].type = FSM_CMD_BOOTSTRAP;
    cmds[0].u.bootstrap = bs;
    for (int j = 0; j < 3; j++) {
        rep[j] = fsm_new();
        ck_assert_ptr_nonnull(rep[j]);
        res[j] = calloc(DIFF_MAXCMD, sizeof *res[j]);
        ck_assert_ptr_nonnull(res[j]);
        ck_assert_int_eq(fsm_apply_cmds(rep[j], idx, FSM_SCHEMA_VERSION, now,
                                        cmds, 1, NULL, NULL),
                         0);
    }

    for (int it = 0; it < DIFF_BATCHES; it++) {
        size_t n = diff_rr(d, 1, DIFF_MAXCMD);

        diff_step(d, &now);
        for (size_t i = 0; i < n; i++) {
            diff_cmd(d, now, &bs->settings, &cmds[i]);
        }
        idx++;
        for (int j = 0; j < 3; j++) {
            int rv;

            memset(res[j], 0, DIFF_MAXCMD * sizeof *res[j]);
            rv = fsm_apply_cmds(rep[j], idx, FSM_SCHEMA_VERSION, now, cmds, n,
                                dres_emit, res[j]);
            ck_assert_msg(rv == 0, "seed %" PRIu64 " batch %d: %c: apply %d",
                          seed, it, name[j], rv);
        }
        diff_check_results(seed, it, cmds, n, res);
        /* Learn most of the owner tokens handed out. */
        for (size_t i = 0; i < n; i++) {
            if (res[0][i].has_owner_token && cmds[i].type == FSM_CMD_CLAIM &&
                diff_rr(d, 0, 3) != 0) {
                const struct fsm_claim *cl = &cmds[i].u.claim;
                int s = cl->scope[1] - '0';
                int k = atoi((const char *)cl->key + 1);

                d->toks[s][k] = res[0][i].owner_token;
            }
        }
        diff_check_states(seed, it, rep, &bs->settings);
        if (diff_rr(d, 0, 4) == 0) {
            diff_reload(rep[1], rep[1], seed);
        }
        if (diff_rr(d, 0, 9) == 0) {
            diff_reload(rep[2], rep[0], seed);
        }
    }

    for (int j = 0; j < 3; j++) {
        fsm_free(rep[j]);
        free(res[j]);
    }
    free(bs);
    free(d);
}
END_TEST

Suite *regress_suite(void)
{
    Suite *s = suite_create("regress");
    TCase *tc;

    tc = tcase_create("lazy_prune");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, lazy_prune_restored_agrees);
    suite_add_tcase(s, tc);

    tc = tcase_create("skew_fence");
    tcase_add_test(tc, skew_fence_after_skew_cut);
    suite_add_tcase(s, tc);

    tc = tcase_create("max_bytes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, resbytes_complete_over_max_bytes);
    tcase_add_test(tc, resbytes_release_over_max_bytes);
    tcase_add_test(tc, resbytes_complete_over_max_bytes_schema1);
    tcase_add_test(tc, resbytes_release_over_max_bytes_schema1);
    tcase_add_test(tc, attbytes_replay_flood);
    tcase_add_test(tc, attbytes_counted_when_full);
    suite_add_tcase(s, tc);

    tc = tcase_create("dupmem");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dupmem_restore_refused);
    suite_add_tcase(s, tc);

    tc = tcase_create("diff");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, diff_replicas_agree, 0, DIFF_SEEDS);
    suite_add_tcase(s, tc);
    return s;
}
