/* test_fsm_frozen: frozen views (fsm_freeze .. fsm_release) and restore in
 * two steps (fsm_restore_build on any thread, fsm_restore_commit).
 *
 * A deterministic random log (claims of both kinds, completes with results,
 * releases, forgets, lookups, settings, member and retire commands, time
 * steps and jumps that expire records) is fed to several instances. One is
 * frozen at index i and keeps applying; the view's bytes must equal the
 * synchronous snapshot of an instance that stopped at i, and the frozen
 * instance must end equal to one that never froze (copy-on-write loses no
 * write). The concurrent cases run fsm_frozen_write and fsm_restore_build
 * on a real pthread while the main thread applies. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/fsm.h"
#include "fsm_helpers.h"

Suite *frozen_suite(void);

#define LOG_KEYS 1500
#define LOG_CMDS 48

/* The log generator: batch k depends only on the seed and the outcomes of
 * batches before it (the owner tokens it learns), which every instance fed
 * the same log answers identically. */
struct gen
{
    uint64_t rng;
    uint64_t time;
    uint64_t rid;
    uint64_t n_batches;
    struct fsm_token tok[LOG_KEYS];
    bool has_tok[LOG_KEYS];
    size_t n;
    int key_no[LOG_CMDS];
    char keys[LOG_CMDS][16];
    struct fsm_claim claims[LOG_CMDS];
    struct fsm_cmd cmds[LOG_CMDS];
    struct fsm_settings set;
    uint8_t payload[1024];
};

static uint64_t rnd(struct gen *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

static void gen_init(struct gen *g, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->rng = seed * 0x9e3779b97f4a7c15ull + 1;
    g->time = FH_T0 + 1000;
    fh_settings(&g->set);
    for (size_t i = 0; i < sizeof g->payload; i++) {
        g->payload[i] = (uint8_t)(i * 7 + 3);
    }
}

/* One configuration command for slot @i. */
static void gen_config(struct gen *g, size_t i, uint64_t r)
{
    if (r % 3 == 0) {
        g->set.max_window_ms = g->set.max_window_ms == 300000 ? 400000 : 300000;
        g->cmds[i] = fh_cmd_settings(&g->set);
    } else if (r % 3 == 1) {
        g->cmds[i] = fh_cmd_member(1 + r % 5, "127.0.0.1:7001",
                                   "127.0.0.1:8001", FSM_ROLE_VOTER);
    } else {
        g->cmds[i] = fh_cmd_retire(100 + g->n_batches);
    }
}

/* One record command for slot @i on key @k. */
static void gen_record(struct gen *g, size_t i, int k, uint64_t r)
{
    const char *scope = k % 2 ? "s1" : "s0";
    struct fsm_claim *c = &g->claims[i];
    uint64_t op = r % 100;

    if (op < 60) {
        fh_claim(c, op < 35 ? FSM_KIND_NONCE : FSM_KIND_IDEMPOTENT, scope,
                 g->keys[i], ++g->rid);
        c->ttl_ms = 1000 + (r >> 8) % 300000;
        if (op % 7 == 0) {
            fh_claim_ts(c, g->time - (r >> 20) % 1000, 300000);
        }
        g->cmds[i] = fh_cmd_claim(c);
    } else if (op < 75) {
        g->cmds[i] = fh_cmd_complete(scope, g->keys[i], g->tok[k], g->payload,
                                     (r >> 8) % 600);
    } else if (op < 83) {
        g->cmds[i] = fh_cmd_release(scope, g->keys[i], g->tok[k], op % 2,
                                    g->payload, (r >> 8) % 200);
    } else if (op < 90) {
        g->cmds[i] = fh_cmd_forget(scope, g->keys[i]);
    } else {
        g->cmds[i] = fh_cmd_lookup(scope, g->keys[i]);
    }
}

/* Make the next batch in g->cmds[0..g->n). */
static void gen_next(struct gen *g)
{
    g->n_batches++;
    g->time += rnd(g) % 3000;
    if (g->n_batches % 17 == 0) {
        g->time += 200000; /* a jump that expires a share of the records */
    }
    g->n = 1 + rnd(g) % LOG_CMDS;
    for (size_t i = 0; i < g->n; i++) {
        uint64_t r = rnd(g);
        int k = (int)(r % LOG_KEYS);

        g->key_no[i] = k;
        snprintf(g->keys[i], sizeof g->keys[i], "key-%d", k);
        if ((r >> 40) % 64 == 0) {
            gen_config(g, i, r >> 12);
        } else {
            gen_record(g, i, k, r >> 12);
        }
    }
}

/* Learn the owner tokens of accepted IDEMPOTENT claims. */
static void gen_learn(struct gen *g, const struct fh_res *out)
{
    for (size_t i = 0; i < g->n; i++) {
        if (g->cmds[i].type == FSM_CMD_CLAIM &&
            out[i].outcome == FSM_ACCEPTED &&
            out[i].kind == FSM_KIND_IDEMPOTENT) {
            g->tok[g->key_no[i]] = out[i].owner_token;
            g->has_tok[g->key_no[i]] = true;
        }
    }
}

/* Feed @n_batches batches of @g to the @n instances @hs. */
static void feed(struct gen *g, struct fh *const *hs, size_t n, int n_batches)
{
    struct fh_res *out = fh_res_array(LOG_CMDS);

    for (int b = 0; b < n_batches; b++) {
        gen_next(g);
        for (size_t j = 0; j < n; j++) {
            ck_assert_int_eq(
                fh_apply(hs[j], g->time, g->cmds, g->n, j == 0 ? out : NULL),
                0);
        }
        gen_learn(g, out);
    }
    free(out);
}

static void boot_all(struct fh *hs, size_t n)
{
    struct fsm_settings s;

    fh_settings(&s);
    for (size_t j = 0; j < n; j++) {
        fh_init_booted(&hs[j], FH_DIRECT, &s, FH_T0);
    }
}

static void close_all(struct fh *hs, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        fh_close(&hs[j]);
    }
}

static uint8_t *frozen_bytes(struct fsm_frozen *z, size_t *len)
{
    uint8_t *buf;

    *len = fsm_frozen_size(z);
    buf = malloc(*len);
    ck_assert_ptr_nonnull(buf);
    fsm_frozen_write(z, buf, *len);
    return buf;
}

static void assert_same_bytes(const uint8_t *a,
                              size_t alen,
                              const uint8_t *b,
                              size_t blen)
{
    ck_assert_uint_eq(alen, blen);
    ck_assert_msg(memcmp(a, b, alen) == 0, "snapshots differ");
}

/* Assert two instances encode to the same bytes. */
static void assert_same_state(const struct fsm *a, const struct fsm *b)
{
    size_t alen, blen;
    uint8_t *sa = fh_snapshot(a, &alen);
    uint8_t *sb = fh_snapshot(b, &blen);

    assert_same_bytes(sa, alen, sb, blen);
    free(sa);
    free(sb);
}

/* (a), (e), (f): freeze at i, keep applying, the view still encodes i; the
 * frozen instance ends equal to one that never froze; a restore of the
 * view's bytes encodes to the same bytes. */
START_TEST(frozen_equals_sync_snapshot)
{
    struct fh hs[3]; /* 0 frozen, 1 stops at i, 2 never frozen */
    struct gen g;
    struct fsm_frozen *z;
    uint8_t *ref, *view, *again;
    size_t ref_len, view_len, again_len;
    uint64_t extra0;
    struct fsm *d;
    char msg[ERR_MSG_SIZE];

    boot_all(hs, 3);
    gen_init(&g, 1 + (uint64_t)_i);
    feed(&g, (struct fh *[]){&hs[0], &hs[1], &hs[2]}, 3, 60);
    ck_assert_uint_gt(fsm_n_records(hs[0].f), 100);
    ck_assert_int_eq(fsm_freeze(hs[0].f, &z), 0);
    extra0 = fsm_frozen_extra_bytes(hs[0].f);
    ref = fh_snapshot(hs[1].f, &ref_len);
    ck_assert_uint_eq(fsm_frozen_size(z), ref_len);
    feed(&g, (struct fh *[]){&hs[0], &hs[2]}, 2, 80);
    ck_assert_uint_gt(fsm_frozen_extra_bytes(hs[0].f), extra0);
    view = frozen_bytes(z, &view_len);
    assert_same_bytes(view, view_len, ref, ref_len);
    fsm_release(hs[0].f, z);
    ck_assert_uint_eq(fsm_frozen_extra_bytes(hs[0].f), 0);
    assert_same_state(hs[0].f, hs[2].f);
    /* Applying after the release still matches. */
    feed(&g, (struct fh *[]){&hs[0], &hs[2]}, 2, 20);
    assert_same_state(hs[0].f, hs[2].f);

    d = fsm_new();
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(fsm_restore(d, view, view_len, msg), 0);
    again = fh_snapshot(d, &again_len);
    assert_same_bytes(again, again_len, ref, ref_len);
    fsm_free(d);
    free(again);
    free(view);
    free(ref);
    close_all(hs, 3);
}
END_TEST

struct writer
{
    struct fsm_frozen *z;
    uint8_t *buf;
    size_t len;
};

static void *write_thread(void *arg)
{
    struct writer *w = arg;

    fsm_frozen_write(w->z, w->buf, w->len);
    return NULL;
}

/* (b): the write runs on a pthread while the owner applies. */
START_TEST(frozen_write_on_a_thread)
{
    struct fh hs[3];
    struct gen g;
    struct writer w;
    pthread_t t;
    uint8_t *ref;
    size_t ref_len;

    boot_all(hs, 3);
    gen_init(&g, 7);
    feed(&g, (struct fh *[]){&hs[0], &hs[1], &hs[2]}, 3, 80);
    ck_assert_int_eq(fsm_freeze(hs[0].f, &w.z), 0);
    ref = fh_snapshot(hs[1].f, &ref_len);
    w.len = fsm_frozen_size(w.z);
    w.buf = malloc(w.len);
    ck_assert_ptr_nonnull(w.buf);
    ck_assert_int_eq(pthread_create(&t, NULL, write_thread, &w), 0);
    feed(&g, (struct fh *[]){&hs[0], &hs[2]}, 2, 60);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    assert_same_bytes(w.buf, w.len, ref, ref_len);
    fsm_release(hs[0].f, w.z);
    assert_same_state(hs[0].f, hs[2].f);
    free(w.buf);
    free(ref);
    close_all(hs, 3);
}
END_TEST

/* (c), (d): a second freeze and a restore commit are refused while a view
 * lives; a view released unwritten leaves nothing behind (ASan). */
START_TEST(busy_and_release_unwritten)
{
    struct fh hs[2];
    struct gen g;
    struct fsm_frozen *z, *z2 = NULL;
    struct fsm *fresh;
    uint8_t *snap;
    size_t len;
    char msg[ERR_MSG_SIZE];

    boot_all(hs, 2);
    gen_init(&g, 3);
    feed(&g, (struct fh *[]){&hs[0], &hs[1]}, 2, 40);
    ck_assert_int_eq(fsm_freeze(hs[0].f, &z), 0);
    ck_assert_int_eq(fsm_freeze(hs[0].f, &z2), FSM_E_BUSY);
    ck_assert_ptr_null(z2);
    snap = fh_snapshot(hs[1].f, &len);
    ck_assert_int_eq(fsm_restore_build(snap, len, &fresh, msg), 0);
    ck_assert_int_eq(fsm_restore_commit(hs[0].f, fresh), FSM_E_BUSY);
    ck_assert_int_eq(fsm_restore(hs[0].f, snap, len, msg), FSM_E_BUSY);
    feed(&g, (struct fh *[]){&hs[0], &hs[1]}, 2, 30);
    fsm_release(hs[0].f, z);
    ck_assert_uint_eq(fsm_frozen_extra_bytes(hs[0].f), 0);
    assert_same_state(hs[0].f, hs[1].f);
    /* The refused instance is still the caller's, and still commits. */
    ck_assert_int_eq(fsm_restore_commit(hs[0].f, fresh), 0);
    fh_assert_snapshot(&hs[0], snap, len);
    /* A new view after the release works, and fsm_free ends a live one. */
    ck_assert_int_eq(fsm_freeze(hs[0].f, &z), 0);
    free(snap);
    close_all(hs, 2);
}
END_TEST

struct builder
{
    const uint8_t *buf;
    size_t len;
    struct fsm *fresh;
    int rv;
    char msg[ERR_MSG_SIZE];
};

static void *build_thread(void *arg)
{
    struct builder *b = arg;

    b->rv = fsm_restore_build(b->buf, b->len, &b->fresh, b->msg);
    return NULL;
}

/* Restore in two steps: build on a pthread while the target applies, then
 * commit on its thread; the target then equals the snapshot's source, and
 * both answer the rest of the log alike. */
START_TEST(restore_build_on_a_thread)
{
    struct fh hs[2];
    struct gen g, g2;
    struct builder b = {0};
    pthread_t t;
    uint8_t *snap, *bad;
    size_t len;

    boot_all(hs, 2);
    gen_init(&g, 11);
    feed(&g, (struct fh *[]){&hs[0], &hs[1]}, 2, 70);
    snap = fh_snapshot(hs[1].f, &len);
    b.buf = snap;
    b.len = len;
    ck_assert_int_eq(pthread_create(&t, NULL, build_thread, &b), 0);
    gen_init(&g2, 12);
    feed(&g2, (struct fh *[]){&hs[0]}, 1,
         30); /* the target moves on meanwhile */
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(b.rv, 0);
    ck_assert_int_eq(fsm_restore_commit(hs[0].f, b.fresh), 0);
    fh_assert_snapshot(&hs[0], snap, len);
    ck_assert_uint_eq(fsm_last_index(hs[0].f), fsm_last_index(hs[1].f));
    hs[0].index = hs[1].index;
    feed(&g, (struct fh *[]){&hs[0], &hs[1]}, 2, 30);
    assert_same_state(hs[0].f, hs[1].f);

    /* A bad snapshot fails in the build step with a message. */
    bad = malloc(len);
    ck_assert_ptr_nonnull(bad);
    memcpy(bad, snap, len);
    bad[len / 2] ^= 0x40;
    b.fresh = NULL;
    b.rv = fsm_restore_build(bad, len, &b.fresh, b.msg);
    ck_assert_int_eq(b.rv, FSM_E_CHECKSUM);
    ck_assert_ptr_null(b.fresh);
    ck_assert_ptr_nonnull(strstr(b.msg, "checksum"));
    free(bad);
    free(snap);
    close_all(hs, 2);
}
END_TEST

Suite *frozen_suite(void)
{
    Suite *s = suite_create("frozen");
    TCase *tc = tcase_create("frozen");

    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, frozen_equals_sync_snapshot, 0, 3);
    tcase_add_test(tc, frozen_write_on_a_thread);
    tcase_add_test(tc, busy_and_release_unwritten);
    tcase_add_test(tc, restore_build_on_a_thread);
    suite_add_tcase(s, tc);
    return s;
}
