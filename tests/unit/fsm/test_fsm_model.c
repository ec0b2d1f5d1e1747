/* test_fsm_model: randomized tests of the claim state machine.
 *
 * determinism: random batches applied to two instances give identical
 * per-command results and byte-identical snapshots after every batch.
 *
 * reference: 250,000 random commands per settings variant (three of them),
 * each checked against a deliberately simple model of
 * docs/state-machine.md (a flat array of records, one per identity, looked
 * up by index): claims of both kinds with ttl and ts/window, retries,
 * replays, takeovers (which pass the window check), complete/release with
 * current and stale tokens, lookups (direct and in batches, with the
 * attempt lists), forgets, time moving by random steps with big jumps and
 * stamps from the past, a small key space in two scopes so collisions are
 * frequent, and max_records low enough to be reached. Every outcome, retry
 * flag and record fact is compared, and the owner token must appear exactly
 * where the rules give it (the owner's outcomes and Lookup).
 *
 * The one place the model is not exact is pruning: the fsm frees an expired
 * record at most one 1.024 s tick after it expired, so the record count is
 * checked between "live" and "live + expired less than a tick ago", and near
 * max_records either RESOURCE_EXHAUSTED or ACCEPTED is allowed when the
 * difference could decide it (the model then follows the fsm).
 *
 * Failure messages carry the seed; rerun one seed with
 * ONCE_MODEL_SEED=<n> CK_RUN_SUITE=model CK_RUN_CASE=reference.
 *
 * One file past ~1,000 lines on purpose: both tests drive the same model and
 * random command generator (most of the file), which a split would have to
 * export through a header used by nothing else. */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "fsm/fsm.h"

Suite *model_suite(void);

/* ck_assert_msg without Check's per-assertion bookkeeping (a write per
 * passing assertion in fork mode), which would dominate this file's run
 * time. */
#define CHECK(cond, ...)               \
    do {                               \
        if (!(cond)) {                 \
            ck_abort_msg(__VA_ARGS__); \
        }                              \
    } while (0)

/* --- PRNG ----------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [lo, hi] (hi - lo small against 2^64). */
static uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
    return lo + rng_next(s) % (hi - lo + 1);
}

static bool rng_pct(uint64_t *s, unsigned pct)
{
    return rng_next(s) % 100 < pct;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* --- identities ----------------------------------------------------------- */

#define N_SCOPES 2
#define N_KEYS   24
#define N_IDS    (N_SCOPES * N_KEYS)

static const uint8_t *const scope_bytes[N_SCOPES] = {
    (const uint8_t *)"a",
    (const uint8_t *)"scope-two",
};
static const size_t scope_lens[N_SCOPES] = {1, 9};
static uint8_t key_bytes[N_KEYS][FSM_KEY_MAX];
static size_t key_lens[N_KEYS];

static void init_keys(void)
{
    for (int i = 0; i < N_KEYS; i++) {
        key_lens[i] = i == 5 ? FSM_KEY_MAX : (size_t)(1 + (i * 5) % 12);
        key_bytes[i][0] = (uint8_t)('A' + i);
        for (size_t j = 1; j < key_lens[i]; j++) {
            key_bytes[i][j] = (uint8_t)(i * 31 + j);
        }
    }
}

static void id_ident(int id,
                     const uint8_t **scope,
                     size_t *scope_len,
                     const uint8_t **key,
                     size_t *key_len)
{
    *scope = scope_bytes[id / N_KEYS];
    *scope_len = scope_lens[id / N_KEYS];
    *key = key_bytes[id % N_KEYS];
    *key_len = key_lens[id % N_KEYS];
}

/* Three payload hashes: none, 32 bytes, 64 bytes. */
#define N_HASHES 3
static uint8_t hash_bytes[N_HASHES][FSM_PAYLOAD_HASH_MAX];
static const size_t hash_lens[N_HASHES] = {0, 32, 64};

static void init_hashes(void)
{
    for (int h = 0; h < N_HASHES; h++) {
        for (int j = 0; j < FSM_PAYLOAD_HASH_MAX; j++) {
            hash_bytes[h][j] = (uint8_t)(h * 77 + j);
        }
    }
}

/* memcpy that accepts NULL with length 0. */
static void copy(void *dst, const void *src, size_t len)
{
    if (len > 0) {
        memcpy(dst, src, len);
    }
}

static bool bytes_eq(const uint8_t *a,
                     size_t a_len,
                     const uint8_t *b,
                     size_t b_len)
{
    return a_len == b_len && (a_len == 0 || memcmp(a, b, a_len) == 0);
}

static bool token_eq(const struct fsm_token *a, const struct fsm_token *b)
{
    return a->group_id == b->group_id && a->index == b->index &&
           a->slot == b->slot;
}

/* --- generated commands --------------------------------------------------- */

#define BATCH_MAX_CMDS 16

/* What the generator knows about an identity (from the model, or from
 * results when there is no model). */
struct hint
{
    bool has;
    enum fsm_kind kind;
    uint8_t rid_a[FSM_REQUEST_ID_LEN]; /* first accepted request id */
    uint8_t rid_b[FSM_REQUEST_ID_LEN]; /* current owner's, or a loser's */
    struct fsm_token tok;              /* current owner token */
    struct fsm_token old_tok;          /* an older one, if has_old */
    bool has_old;
    int hash_sel;
};

/* One command with storage for everything it points to. */
struct gcmd
{
    struct fsm_cmd c;
    int id;      /* identity, -1 for commands without one */
    bool raw;    /* send raw_buf as the command bytes (garbage) */
    bool refuse; /* deliberately invalid: the encoder may refuse it */
    uint8_t raw_buf[24];
    size_t raw_len;
    uint8_t exec[FSM_EXECUTION_ID_MAX];
    uint8_t payload[FSM_RESULT_MAX];
    struct fsm_bootstrap boot;
};

struct gen
{
    uint64_t rng;
    uint64_t rid_counter;
    uint32_t group_id;
    bool config; /* also generate configuration commands */
};

static void fresh_rid(struct gen *g, uint8_t rid[FSM_REQUEST_ID_LEN])
{
    uint64_t c = ++g->rid_counter;

    for (int i = 0; i < 8; i++) {
        rid[i] = (uint8_t)(c >> (8 * i));
        rid[8 + i] = (uint8_t)(0xa0 + i);
    }
}

static uint64_t gen_ttl(struct gen *g, const struct fsm_settings *s)
{
    unsigned r = (unsigned)(rng_next(&g->rng) % 100);

    if (r < 45) {
        return rng_range(&g->rng, 1, min_u64(4000, s->max_ttl_ms));
    }
    if (r < 85) {
        return rng_range(&g->rng, 1, min_u64(90000, s->max_ttl_ms));
    }
    if (r < 92) {
        return s->max_ttl_ms;
    }
    return rng_range(&g->rng, 1, s->max_ttl_ms);
}

/* The ts binding of a claim: a window, then a ts inside it, at either
 * edge, just past one, or far outside. */
static void gen_claim_ts(struct gen *g,
                         struct fsm_claim *c,
                         const struct fsm_settings *s,
                         uint64_t now)
{
    uint64_t lo, hi;
    unsigned r;

    r = (unsigned)(rng_next(&g->rng) % 100);
    if (r < 60) {
        c->window_ms = rng_range(&g->rng, 1, s->max_window_ms);
    } else if (r < 85) {
        c->window_ms = s->max_window_ms;
    } else {
        c->window_ms = rng_range(&g->rng, 1, min_u64(3000, s->max_window_ms));
    }
    r = (unsigned)(rng_next(&g->rng) % 100);
    lo = now - c->window_ms;
    hi = now + s->max_skew_ms;
    if (r < 60) {
        c->ts_ms = rng_range(&g->rng, lo, hi);
    } else if (r < 67) {
        c->ts_ms = lo;
    } else if (r < 74) {
        c->ts_ms = lo - 1;
    } else if (r < 81) {
        c->ts_ms = hi;
    } else if (r < 88) {
        c->ts_ms = hi + 1;
    } else if (r < 94) {
        c->ts_ms = rng_range(&g->rng, lo - 2 * c->window_ms - 5000, lo);
    } else if (r < 99) {
        c->ts_ms = rng_range(&g->rng, hi, hi + 3 * 86400000ull);
    } else {
        c->ts_ms = rng_range(&g->rng, 0, now);
    }
}

/* Make @c invalid in one of the ways fsm_apply refuses. */
static void gen_claim_refuse(struct gen *g,
                             struct fsm_claim *c,
                             const struct fsm_settings *s,
                             uint64_t now)
{
    switch (rng_next(&g->rng) % 8) {
        case 0:
            c->ttl_ms = 0;
            c->has_ts = false;
            c->ts_ms = 0;
            c->window_ms = 0;
            break;
        case 1:
            c->ttl_ms = s->max_ttl_ms + 1 + rng_next(&g->rng) % 3;
            break;
        case 2:
            c->has_ts = true;
            c->ts_ms = now;
            c->window_ms = 0;
            break;
        case 3:
            c->has_ts = true;
            c->ts_ms = now;
            c->window_ms = s->max_window_ms + 1;
            break;
        case 4:
            c->kind = FSM_KIND_NONCE;
            c->payload_hash = hash_bytes[1];
            c->payload_hash_len = hash_lens[1];
            c->lease_ms = 0;
            break;
        case 5:
            c->kind = FSM_KIND_NONCE;
            c->payload_hash = NULL;
            c->payload_hash_len = 0;
            c->lease_ms = 1;
            break;
        default:
            c->kind = FSM_KIND_IDEMPOTENT;
            c->payload_hash = NULL;
            c->payload_hash_len = 0;
            c->lease_ms = s->max_lease_ms + 1;
            break;
    }
}

static void gen_claim(struct gen *g,
                      struct gcmd *gc,
                      const struct hint *h,
                      const struct fsm_settings *s,
                      uint64_t now)
{
    struct fsm_claim *c = &gc->c.u.claim;
    unsigned r;

    gc->c.type = FSM_CMD_CLAIM;
    id_ident(gc->id, &c->scope, &c->scope_len, &c->key, &c->key_len);
    if (h->has && rng_pct(&g->rng, 85)) {
        c->kind = h->kind;
    } else {
        c->kind = rng_pct(&g->rng, 50) ? FSM_KIND_NONCE : FSM_KIND_IDEMPOTENT;
    }
    r = (unsigned)(rng_next(&g->rng) % 100);
    if (h->has && r < 30) {
        memcpy(c->request_id, h->rid_a, FSM_REQUEST_ID_LEN);
    } else if (h->has && r < 45) {
        memcpy(c->request_id, h->rid_b, FSM_REQUEST_ID_LEN);
    } else {
        fresh_rid(g, c->request_id);
    }
    c->execution_id_len = (size_t)(rng_next(&g->rng) % 12);
    if (rng_pct(&g->rng, 2)) {
        c->execution_id_len = FSM_EXECUTION_ID_MAX;
    }
    for (size_t i = 0; i < c->execution_id_len; i++) {
        gc->exec[i] = (uint8_t)rng_next(&g->rng);
    }
    c->execution_id = c->execution_id_len ? gc->exec : NULL;

    r = (unsigned)(rng_next(&g->rng) % 100);
    c->ttl_ms = r < 70 ? gen_ttl(g, s) : 0;
    c->has_ts = r >= 40;
    if (c->has_ts) {
        gen_claim_ts(g, c, s, now);
    }
    if (c->kind == FSM_KIND_IDEMPOTENT) {
        int hs = h->has && rng_pct(&g->rng, 85)
                     ? h->hash_sel
                     : (int)(rng_next(&g->rng) % N_HASHES);

        c->payload_hash = hash_bytes[hs];
        c->payload_hash_len = hash_lens[hs];
        r = (unsigned)(rng_next(&g->rng) % 100);
        if (r < 30) {
            c->lease_ms = 0;
        } else if (r < 75) {
            c->lease_ms = rng_range(&g->rng, 1, min_u64(3000, s->max_lease_ms));
        } else if (r < 90) {
            c->lease_ms = rng_range(&g->rng, 1, s->max_lease_ms);
        } else {
            c->lease_ms = s->max_lease_ms;
        }
    }

    /* A few deliberately invalid claims. */
    if (rng_pct(&g->rng, 4)) {
        gc->refuse = true;
        gen_claim_refuse(g, c, s, now);
    }
}

static void gen_token(struct gen *g,
                      const struct hint *hints,
                      int id,
                      struct fsm_token *t)
{
    const struct hint *h = &hints[id];
    unsigned r = (unsigned)(rng_next(&g->rng) % 100);

    if (h->has && r < 62) {
        *t = h->tok;
    } else if (h->has && h->has_old && r < 77) {
        *t = h->old_tok;
    } else if (h->has && r < 92) {
        *t = h->tok;
        switch (rng_next(&g->rng) % 3) {
            case 0:
                t->slot++;
                break;
            case 1:
                t->index++;
                break;
            default:
                t->group_id++;
                break;
        }
    } else {
        *t = hints[rng_next(&g->rng) % N_IDS].tok;
    }
}

static void gen_payload(struct gen *g,
                        struct gcmd *gc,
                        size_t max,
                        const uint8_t **p,
                        size_t *len)
{
    size_t n = (size_t)(rng_next(&g->rng) % 200);

    if (rng_pct(&g->rng, 2)) {
        n = max;
    } else if (n > max) {
        n = max;
    }
    for (size_t i = 0; i < n; i++) {
        gc->payload[i] = (uint8_t)(i * 13 + n);
    }
    if (n > 0) {
        gc->payload[0] = (uint8_t)rng_next(&g->rng);
        gc->payload[n - 1] = (uint8_t)rng_next(&g->rng);
    }
    *p = n ? gc->payload : NULL;
    *len = n;
}

static void gen_config(struct gen *g,
                       struct gcmd *gc,
                       const struct fsm_settings *cur)
{
    switch (rng_next(&g->rng) % 6) {
        case 0: {
            struct fsm_settings *s = &gc->c.u.settings;

            gc->c.type = FSM_CMD_SET_SETTINGS;
            *s = *cur;
            switch (rng_next(&g->rng) % 8) {
                case 0:
                    s->max_window_ms =
                        rng_range(&g->rng, 1, cur->max_window_ms * 3);
                    break;
                case 1:
                    s->max_skew_ms = rng_range(&g->rng, 1, 10000);
                    break;
                case 2:
                    s->max_ttl_ms = rng_range(&g->rng, 1000, 600000);
                    break;
                case 3:
                    s->max_lease_ms = rng_range(&g->rng, 1, 60000);
                    break;
                case 4:
                    s->max_records = rng_range(&g->rng, 1, 80);
                    break;
                case 5:
                    s->max_bytes = rng_range(&g->rng, 4096, 1 << 20);
                    break;
                case 6:
                    s->max_window_ms = 0; /* refused */
                    break;
                default:
                    s->max_ttl_ms = FSM_MAX_TTL_CEIL + 1; /* refused */
                    break;
            }
            break;
        }
        case 1:
        case 2: {
            struct fsm_member *m = &gc->c.u.member;

            gc->c.type = FSM_CMD_SET_MEMBER;
            m->id = rng_range(&g->rng, 0, 70);
            snprintf(m->raft_addr, sizeof m->raft_addr, "10.1.0.%u:9001",
                     (unsigned)(rng_next(&g->rng) % 256));
            snprintf(m->client_addr, sizeof m->client_addr, "10.2.0.%u:9002",
                     (unsigned)(rng_next(&g->rng) % 256));
            m->role = (enum fsm_role)rng_range(&g->rng, 1, 3);
            break;
        }
        case 3:
            gc->c.type = FSM_CMD_RETIRE_MEMBER;
            gc->c.u.retire_id = rng_range(&g->rng, 0, 70);
            break;
        case 4:
            gc->c.type = FSM_CMD_SET_SCHEMA;
            gc->c.u.schema_version = (uint32_t)rng_range(&g->rng, 0, 1);
            break;
        default:
            gc->c.type = FSM_CMD_BOOTSTRAP; /* refused: already done */
            gc->c.u.bootstrap = &gc->boot;
            memset(&gc->boot, 0, sizeof gc->boot);
            memset(gc->boot.cluster_id, 9, FSM_CLUSTER_ID_LEN);
            memset(gc->boot.hash_key, 8, FSM_HASH_KEY_LEN);
            gc->boot.group_id = 2;
            break;
    }
}

/* Fill @gc with one random command. @now is the batch's log time. */
static void gen_command(struct gen *g,
                        struct gcmd *gc,
                        const struct hint *hints,
                        const struct fsm_settings *s,
                        uint64_t now)
{
    unsigned r = (unsigned)(rng_next(&g->rng) % 100);

    memset(&gc->c, 0, sizeof gc->c);
    gc->raw = false;
    gc->refuse = false;
    gc->id = (int)(rng_next(&g->rng) % N_IDS);
    if (r < 55) {
        gen_claim(g, gc, &hints[gc->id], s, now);
    } else if (r < 69) {
        struct fsm_complete *c = &gc->c.u.complete;

        gc->c.type = FSM_CMD_COMPLETE;
        id_ident(gc->id, &c->scope, &c->scope_len, &c->key, &c->key_len);
        gen_token(g, hints, gc->id, &c->owner_token);
        gen_payload(g, gc, FSM_RESULT_MAX, &c->result, &c->result_len);
    } else if (r < 82) {
        struct fsm_release *c = &gc->c.u.release;

        gc->c.type = FSM_CMD_RELEASE;
        id_ident(gc->id, &c->scope, &c->scope_len, &c->key, &c->key_len);
        gen_token(g, hints, gc->id, &c->owner_token);
        c->terminal = rng_pct(&g->rng, 35);
        gen_payload(g, gc, FSM_ERROR_MAX, &c->error, &c->error_len);
    } else if (r < 92) {
        gc->c.type = FSM_CMD_LOOKUP;
        id_ident(gc->id, &gc->c.u.ident.scope, &gc->c.u.ident.scope_len,
                 &gc->c.u.ident.key, &gc->c.u.ident.key_len);
    } else if (r < 95) {
        gc->c.type = FSM_CMD_FORGET;
        id_ident(gc->id, &gc->c.u.ident.scope, &gc->c.u.ident.scope_len,
                 &gc->c.u.ident.key, &gc->c.u.ident.key_len);
    } else if (r < 97 || !g->config) {
        /* Bytes that do not decode as a command. */
        gc->raw = true;
        gc->id = -1;
        gc->raw_len = (size_t)rng_range(&g->rng, 1, sizeof gc->raw_buf);
        for (size_t i = 0; i < gc->raw_len; i++) {
            gc->raw_buf[i] = (uint8_t)rng_next(&g->rng);
        }
        /* Field 1 claims more bytes than there are: never decodes. */
        gc->raw_buf[0] = 0x0a;
        gc->raw_buf[1] = 0x7f;
        if (gc->raw_len < 2) {
            gc->raw_len = 2;
        }
    } else {
        gc->id = -1;
        gen_config(g, gc, s);
    }
}

/* The batch's log time: mostly small steps, sometimes big jumps, sometimes
 * a stamp from the past (which must not move time back). */
static uint64_t gen_time(struct gen *g, uint64_t now)
{
    unsigned r = (unsigned)(rng_next(&g->rng) % 1000);

    if (r < 250) {
        return now;
    }
    if (r < 750) {
        return now + rng_range(&g->rng, 1, 1500);
    }
    if (r < 900) {
        return now + rng_range(&g->rng, 1500, 15000);
    }
    if (r < 960) {
        return now + rng_range(&g->rng, 15000, 150000);
    }
    if (r < 980) {
        return now + rng_range(&g->rng, 150000, 1200000);
    }
    if (r < 985) {
        return now + rng_range(&g->rng, 86400000, 20 * 86400000ull);
    }
    return now - rng_range(&g->rng, 0, 60000);
}

/* Encode commands [0, n) as one batch (malloc'd). */
static uint8_t *encode_batch(struct gcmd *gcs,
                             size_t n,
                             uint64_t time_ms,
                             size_t *len,
                             uint64_t seed)
{
    uint8_t *cmds[BATCH_MAX_CMDS] = {0};
    size_t lens[BATCH_MAX_CMDS] = {0};
    uint8_t *out = NULL;
    int rv;

    for (size_t i = 0; i < n; i++) {
        struct gcmd *gc = &gcs[i];

        if (!gc->raw) {
            rv = command_encode(&gc->c, &cmds[i], &lens[i]);
            if (rv != 0 && gc->refuse) {
                /* The encoder refused a deliberately invalid command: send
                 * undecodable bytes instead (same INVALID_ARGUMENT). */
                gc->raw = true;
                gc->id = -1;
                gc->raw_buf[0] = 0x0a;
                gc->raw_buf[1] = 0x7f;
                gc->raw_len = 2;
            } else {
                CHECK(rv == 0, "seed %" PRIu64 ": encode type %d: %d", seed,
                      (int)gc->c.type, rv);
                continue;
            }
        }
        cmds[i] = malloc(gc->raw_len);
        CHECK(cmds[i] != NULL, "malloc");
        memcpy(cmds[i], gc->raw_buf, gc->raw_len);
        lens[i] = gc->raw_len;
    }
    rv = command_encode_batch(FSM_SCHEMA_VERSION, time_ms,
                              (const uint8_t *const *)cmds, lens, n, &out, len);
    CHECK(rv == 0, "seed %" PRIu64 ": encode batch: %d", seed, rv);
    for (size_t i = 0; i < n; i++) {
        free(cmds[i]);
    }
    return out;
}

static uint8_t *snapshot(const struct fsm *f, size_t *len)
{
    uint8_t *buf;

    *len = fsm_snapshot_size(f);
    buf = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(buf);
    fsm_snapshot_write(f, buf, *len);
    return buf;
}

static void make_bootstrap(struct fsm_bootstrap *b,
                           const struct fsm_settings *s,
                           uint32_t group_id)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < FSM_CLUSTER_ID_LEN; i++) {
        b->cluster_id[i] = (uint8_t)(0x10 + i);
        b->hash_key[i] = (uint8_t)(0x80 + 3 * i);
    }
    b->group_id = group_id;
    b->settings = *s;
    b->n_members = 3;
    for (size_t i = 0; i < 3; i++) {
        b->members[i].id = i + 1;
        snprintf(b->members[i].raft_addr, sizeof b->members[i].raft_addr,
                 "127.0.0.1:%zu", 7000 + i);
        snprintf(b->members[i].client_addr, sizeof b->members[i].client_addr,
                 "127.0.0.1:%zu", 8000 + i);
        b->members[i].role = FSM_ROLE_VOTER;
    }
}

static void bootstrap_cb(void *arg, size_t i, const struct fsm_result *r)
{
    (void)i;
    *(enum fsm_outcome *)arg = r->outcome;
}

/* Bootstrap @f at index 1 through the encoded path. */
static void bootstrap(struct fsm *f,
                      const struct fsm_settings *s,
                      uint32_t group_id,
                      uint64_t now)
{
    static struct gcmd gc;
    enum fsm_outcome o = 0;
    uint8_t *batch;
    size_t len;
    const char *why = fsm_settings_check(s);

    CHECK(why == NULL, "test settings refused: %s", why);
    memset(&gc.c, 0, sizeof gc.c);
    gc.raw = false;
    gc.refuse = false;
    gc.c.type = FSM_CMD_BOOTSTRAP;
    gc.c.u.bootstrap = &gc.boot;
    make_bootstrap(&gc.boot, s, group_id);
    batch = encode_batch(&gc, 1, now, &len, 0);
    ck_assert_int_eq(fsm_apply(f, 1, batch, len, bootstrap_cb, &o), 0);
    ck_assert_int_eq(o, FSM_OK);
    free(batch);
}

/* --- result digests (determinism) ----------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    const uint8_t *b = p;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

#define FNV_U(h, v)                     \
    do {                                \
        uint64_t v_ = (uint64_t)(v);    \
        (h) = fnv((h), &v_, sizeof v_); \
    } while (0)

static uint64_t result_digest(const struct fsm_result *r)
{
    uint64_t h = 0xcbf29ce484222325ull;

    FNV_U(h, r->cmd);
    FNV_U(h, r->outcome);
    FNV_U(h, r->retry);
    FNV_U(h, r->has_record);
    if (r->reason != NULL) {
        h = fnv(h, r->reason, strlen(r->reason));
    }
    if (!r->has_record) {
        return h;
    }
    FNV_U(h, r->kind);
    FNV_U(h, r->state);
    h = fnv(h, r->first_request_id, FSM_REQUEST_ID_LEN);
    FNV_U(h, r->first_index);
    FNV_U(h, r->first_time_ms);
    FNV_U(h, r->expires_ms);
    FNV_U(h, r->attempts);
    FNV_U(h, r->has_owner_token);
    FNV_U(h, r->owner_token.group_id);
    FNV_U(h, r->owner_token.index);
    FNV_U(h, r->owner_token.slot);
    FNV_U(h, r->owner_attempt);
    FNV_U(h, r->lease_expires_ms);
    FNV_U(h, r->retry_after_ms);
    FNV_U(h, r->result_len);
    if (r->result_len > 0) {
        h = fnv(h, r->result, r->result_len);
    }
    FNV_U(h, r->stored_error_len);
    if (r->stored_error_len > 0) {
        h = fnv(h, r->stored_error, r->stored_error_len);
    }
    FNV_U(h, r->n_attempt_list);
    for (size_t i = 0; i < r->n_attempt_list && i < 1 + FSM_ATTEMPTS_LAST;
         i++) {
        const struct fsm_attempt *a = r->attempt_list[i];

        h = fnv(h, a->request_id, FSM_REQUEST_ID_LEN);
        FNV_U(h, a->index);
        FNV_U(h, a->time_ms);
        FNV_U(h, a->outcome);
        FNV_U(h, a->retry);
        FNV_U(h, a->execution_id_len);
        h = fnv(h, a->execution_id, a->execution_id_len);
    }
    return h;
}

struct digest_sink
{
    size_t n;
    uint64_t d[BATCH_MAX_CMDS];
    enum fsm_outcome o[BATCH_MAX_CMDS];
    struct hint *hints; /* updated from results when not NULL */
    struct gcmd *gcs;
};

static void hint_from_result(struct hint *h,
                             const struct fsm_result *r,
                             const struct gcmd *gc)
{
    if (!r->has_record) {
        if (r->outcome == FSM_NOT_FOUND) {
            h->has = false;
        }
        return;
    }
    if (r->has_owner_token) {
        if (h->has && !token_eq(&h->tok, &r->owner_token)) {
            h->old_tok = h->tok;
            h->has_old = true;
        }
        h->tok = r->owner_token;
    }
    h->has = true;
    h->kind = r->kind;
    memcpy(h->rid_a, r->first_request_id, FSM_REQUEST_ID_LEN);
    if (gc->c.type == FSM_CMD_CLAIM) {
        memcpy(h->rid_b, gc->c.u.claim.request_id, FSM_REQUEST_ID_LEN);
        for (int k = 0; k < N_HASHES; k++) {
            if (bytes_eq(hash_bytes[k], hash_lens[k],
                         gc->c.u.claim.payload_hash,
                         gc->c.u.claim.payload_hash_len)) {
                h->hash_sel = k;
            }
        }
    }
}

static void digest_cb(void *arg, size_t i, const struct fsm_result *r)
{
    struct digest_sink *s = arg;

    CHECK(i == s->n && i < BATCH_MAX_CMDS, "emit %zu out of order", i);
    s->d[i] = result_digest(r);
    s->o[i] = r->outcome;
    if (s->hints != NULL && s->gcs[i].id >= 0) {
        hint_from_result(&s->hints[s->gcs[i].id], r, &s->gcs[i]);
    }
    s->n++;
}

/* --- (a) determinism ------------------------------------------------------ */

static struct gcmd g_cmds[BATCH_MAX_CMDS];

START_TEST(determinism)
{
    uint64_t seed = 0x5eed0000ull + (uint64_t)_i * 7919;
    struct gen g = {.rng = seed, .group_id = 1, .config = true};
    struct hint hints[N_IDS];
    struct fsm *f1 = fsm_new(), *f2 = fsm_new();
    struct fsm_settings s = {
        .max_window_ms = 20000,
        .max_skew_ms = 1000,
        .max_ttl_ms = 300000,
        .max_lease_ms = 10000,
        .max_records = 40,
        .max_bytes = 1ull << 30,
    };
    uint64_t now = 1700000000000ull;
    const int n_batches = 4000;

    ck_assert(f1 != NULL && f2 != NULL);
    init_keys();
    init_hashes();
    memset(hints, 0, sizeof hints);
    bootstrap(f1, &s, 1, now);
    bootstrap(f2, &s, 1, now);
    for (int b = 0; b < n_batches; b++) {
        struct digest_sink d1 = {.hints = hints, .gcs = g_cmds};
        struct digest_sink d2 = {0};
        size_t n = (size_t)rng_range(&g.rng, 0, BATCH_MAX_CMDS);
        uint64_t t = gen_time(&g, now);
        uint64_t idx = 2 + (uint64_t)b;
        uint8_t *batch, *s1, *s2;
        size_t len, l1, l2;
        int rv1, rv2;

        now = max_u64(now, t);
        for (size_t i = 0; i < n; i++) {
            gen_command(&g, &g_cmds[i], hints, fsm_settings(f1), now);
        }
        batch = encode_batch(g_cmds, n, t, &len, seed);
        rv1 = fsm_apply(f1, idx, batch, len, digest_cb, &d1);
        rv2 = fsm_apply(f2, idx, batch, len, digest_cb, &d2);
        CHECK(rv1 == 0 && rv2 == 0, "seed %" PRIu64 " batch %d: apply %d / %d",
              seed, b, rv1, rv2);
        CHECK(d1.n == n && d2.n == n,
              "seed %" PRIu64 " batch %d: %zu cmds, %zu/%zu results", seed, b,
              n, d1.n, d2.n);
        for (size_t i = 0; i < n; i++) {
            CHECK(d1.d[i] == d2.d[i],
                  "seed %" PRIu64
                  " batch %d cmd %zu (type %d): "
                  "results differ (%s / %s)",
                  seed, b, i, (int)g_cmds[i].c.type, fsm_outcome_name(d1.o[i]),
                  fsm_outcome_name(d2.o[i]));
        }
        s1 = snapshot(f1, &l1);
        s2 = snapshot(f2, &l2);
        CHECK(l1 == l2 && memcmp(s1, s2, l1) == 0,
              "seed %" PRIu64 " batch %d: snapshots differ (%zu/%zu)", seed, b,
              l1, l2);
        ck_assert_uint_eq(fsm_n_records(f1), fsm_n_records(f2));
        ck_assert_uint_eq(fsm_bytes(f1), fsm_bytes(f2));
        ck_assert_uint_eq(fsm_now(f1), now);
        ck_assert_uint_eq(fsm_now(f2), now);
        ck_assert_uint_le(fsm_n_records(f1), N_IDS);
        free(s1);
        free(s2);
        free(batch);
    }
    fsm_free(f1);
    fsm_free(f2);
}
END_TEST

/* --- (b) the reference model ---------------------------------------------- */

struct m_att
{
    uint8_t rid[FSM_REQUEST_ID_LEN];
    uint8_t exec[FSM_EXECUTION_ID_MAX];
    size_t exec_len;
    uint64_t index;
    uint64_t time_ms;
    enum fsm_outcome outcome;
    bool retry;
};

struct m_rec
{
    bool present; /* stored; may have expired and not been pruned yet */
    enum fsm_kind kind;
    enum fsm_state state;
    uint8_t first_rid[FSM_REQUEST_ID_LEN];
    uint64_t first_index;
    uint64_t first_time;
    uint64_t expires;
    uint32_t n_att;
    struct m_att att_first;
    struct m_att att_ring[FSM_ATTEMPTS_LAST]; /* attempt k >= 2 at (k-2)%4 */
    /* IDEMPOTENT */
    int hash_sel;
    uint8_t owner_rid[FSM_REQUEST_ID_LEN];
    struct fsm_token tok;
    struct fsm_token old_tok;
    bool has_old;
    uint32_t owner_attempt;
    uint64_t lease_expires;
    size_t result_len;
    uint8_t result[FSM_RESULT_MAX];
    size_t error_len;
    uint8_t error[FSM_ERROR_MAX];
    /* a request id that lost (for the generator) */
    uint8_t loser_rid[FSM_REQUEST_ID_LEN];
};

struct model
{
    struct m_rec rec[N_IDS];
    struct fsm_settings s;
    uint32_t group_id;
    uint64_t now;
    /* counters, for the report */
    uint64_t n_outcome[FSM_FAILED_PRECONDITION + 1];
    uint64_t n_band;
};

static bool m_live(const struct model *m, const struct m_rec *x)
{
    return x->present && x->expires > m->now;
}

static int hash_index(const uint8_t *p, size_t len)
{
    for (int k = 0; k < N_HASHES; k++) {
        if (bytes_eq(hash_bytes[k], hash_lens[k], p, len)) {
            return k;
        }
    }
    return -1;
}

/* Expected answer for one command. */
struct expect
{
    enum fsm_outcome outcome;
    bool retry;
    int has_record; /* 1: must, 0: must not, -1: check facts if present */
    bool attempts_list;
    bool skip_stored;        /* FORGOTTEN: result/error not reported */
    bool token_visible;      /* the owner token is given (owner, Lookup) */
    const struct m_rec *rec; /* facts after the command */
    uint64_t retry_after;
};

static void m_record_attempt(struct model *m,
                             struct m_rec *x,
                             const struct fsm_claim *c,
                             uint64_t index,
                             enum fsm_outcome o,
                             bool retry)
{
    struct m_att *a;

    x->n_att++;
    a = x->n_att == 1 ? &x->att_first
                      : &x->att_ring[(x->n_att - 2) % FSM_ATTEMPTS_LAST];
    memcpy(a->rid, c->request_id, FSM_REQUEST_ID_LEN);
    copy(a->exec, c->execution_id, c->execution_id_len);
    a->exec_len = c->execution_id_len;
    a->index = index;
    a->time_ms = m->now;
    a->outcome = o;
    a->retry = retry;
}

/* Retention a fresh claim would get (lease expiry included by caller). */
static uint64_t m_fresh_expiry(const struct model *m, const struct fsm_claim *c)
{
    uint64_t e = 0;

    if (c->ttl_ms > 0) {
        e = m->now + c->ttl_ms;
    }
    if (c->has_ts) {
        e = max_u64(e, c->ts_ms + m->s.max_window_ms + m->s.max_skew_ms);
    }
    return e;
}

/* True if @c breaks a rule fsm_apply checks before any record is read. */
static bool m_claim_invalid(const struct fsm_settings *s,
                            const struct fsm_claim *c)
{
    return (c->ttl_ms == 0 && !c->has_ts) || c->ttl_ms > s->max_ttl_ms ||
           (c->has_ts &&
            (c->window_ms < 1 || c->window_ms > s->max_window_ms)) ||
           (c->kind == FSM_KIND_NONCE &&
            (c->payload_hash_len > 0 || c->lease_ms > 0)) ||
           (c->kind == FSM_KIND_IDEMPOTENT && c->lease_ms > s->max_lease_ms);
}

/* A claim of a live record: conflict, retry, replay, IN_PROGRESS or a
 * terminal answer, or a takeover that makes the claimant the owner. */
static void m_claim_live(struct model *m,
                         struct m_rec *x,
                         const struct fsm_claim *c,
                         uint64_t index,
                         uint32_t slot,
                         uint64_t lease,
                         struct expect *e)
{
    const struct fsm_settings *s = &m->s;
    bool takeover = false;

    e->has_record = 1;
    e->rec = x;
    if (x->kind != c->kind ||
        (x->kind == FSM_KIND_IDEMPOTENT &&
         hash_index(c->payload_hash, c->payload_hash_len) != x->hash_sel)) {
        e->outcome = FSM_CONFLICT;
        e->has_record = -1;
    } else if (x->kind == FSM_KIND_NONCE) {
        if (memcmp(c->request_id, x->first_rid, FSM_REQUEST_ID_LEN) == 0) {
            e->outcome = FSM_ACCEPTED;
            e->retry = true;
        } else {
            e->outcome = FSM_REPLAYED;
        }
    } else {
        switch (x->state) {
            case FSM_STATE_PENDING:
                if (memcmp(c->request_id, x->owner_rid, FSM_REQUEST_ID_LEN) ==
                    0) {
                    e->outcome = FSM_ACCEPTED;
                    e->retry = true;
                } else if (x->lease_expires > m->now) {
                    e->outcome = FSM_IN_PROGRESS;
                    e->retry_after = x->lease_expires - m->now;
                } else {
                    takeover = true;
                }
                break;
            case FSM_STATE_RELEASED:
                takeover = true;
                break;
            case FSM_STATE_COMPLETED:
                e->outcome = FSM_DUPLICATE;
                break;
            case FSM_STATE_FAILED:
                e->outcome = FSM_FAILED;
                break;
            default:
                ck_abort_msg("model: bad state %d", (int)x->state);
        }
    }
    /* A takeover is a new acceptance: a claim with a timestamp must be
     * inside the window first (the model has no max_window fence). */
    if (takeover && c->has_ts && c->ts_ms < m->now - c->window_ms) {
        takeover = false;
        e->outcome = FSM_STALE;
    } else if (takeover && c->has_ts && c->ts_ms > m->now + s->max_skew_ms) {
        takeover = false;
        e->outcome = FSM_FUTURE;
    }
    if (takeover) {
        e->outcome = FSM_ACCEPTED;
        x->old_tok = x->tok;
        x->has_old = true;
        x->tok.group_id = m->group_id;
        x->tok.index = index;
        x->tok.slot = slot;
        x->owner_attempt++;
        x->lease_expires = m->now + lease;
        memcpy(x->owner_rid, c->request_id, FSM_REQUEST_ID_LEN);
        x->state = FSM_STATE_PENDING;
        x->result_len = 0;
        x->error_len = 0;
        x->expires = max_u64(x->expires,
                             max_u64(m_fresh_expiry(m, c), x->lease_expires));
    }
    if (e->outcome != FSM_ACCEPTED) {
        memcpy(x->loser_rid, c->request_id, FSM_REQUEST_ID_LEN);
    }
    m_record_attempt(m, x, c, index, e->outcome, e->retry);
}

/* False if a new record cannot fit under max_records. Near the limit the
 * answer depends on what the fsm has pruned, so the model follows @act. */
static bool m_claim_room(struct model *m, const struct fsm_result *act)
{
    const struct fsm_settings *s = &m->s;
    uint64_t live = 0, maybe = 0;

    for (int i = 0; i < N_IDS; i++) {
        const struct m_rec *y = &m->rec[i];

        if (m_live(m, y)) {
            live++;
        } else if (y->present && y->expires + 1024 > m->now) {
            maybe++;
        }
    }
    if (live >= s->max_records) {
        return false;
    }
    if (live + maybe >= s->max_records) {
        /* Depends on what has been pruned: follow the fsm. */
        m->n_band++;
        if (act->outcome == FSM_RESOURCE_EXHAUSTED) {
            return false;
        }
    }
    return true;
}

static void m_claim(struct model *m,
                    int id,
                    const struct fsm_claim *c,
                    uint64_t index,
                    uint32_t slot,
                    const struct fsm_result *act,
                    struct expect *e)
{
    struct m_rec *x = &m->rec[id];
    const struct fsm_settings *s = &m->s;
    uint64_t lease;

    e->has_record = 0;
    if (m_claim_invalid(s, c)) {
        e->outcome = FSM_INVALID_ARGUMENT;
        return;
    }
    lease = c->lease_ms > 0 ? c->lease_ms
                            : min_u64(FSM_DEFAULT_LEASE_MS, s->max_lease_ms);

    if (m_live(m, x)) {
        m_claim_live(m, x, c, index, slot, lease, e);
        return;
    }

    /* Absent or expired. */
    if (c->has_ts) {
        if (c->ts_ms < m->now - c->window_ms) {
            e->outcome = FSM_STALE;
            return;
        }
        if (c->ts_ms > m->now + s->max_skew_ms) {
            e->outcome = FSM_FUTURE;
            return;
        }
    }
    if (!m_claim_room(m, act)) {
        e->outcome = FSM_RESOURCE_EXHAUSTED;
        return;
    }
    memset(x, 0, sizeof *x);
    x->present = true;
    x->kind = c->kind;
    memcpy(x->first_rid, c->request_id, FSM_REQUEST_ID_LEN);
    x->first_index = index;
    x->first_time = m->now;
    x->expires = m_fresh_expiry(m, c);
    if (c->kind == FSM_KIND_NONCE) {
        x->state = FSM_STATE_SEEN;
    } else {
        x->state = FSM_STATE_PENDING;
        x->hash_sel = hash_index(c->payload_hash, c->payload_hash_len);
        memcpy(x->owner_rid, c->request_id, FSM_REQUEST_ID_LEN);
        x->tok.group_id = m->group_id;
        x->tok.index = index;
        x->tok.slot = slot;
        x->owner_attempt = 1;
        x->lease_expires = m->now + lease;
        x->expires = max_u64(x->expires, x->lease_expires);
    }
    e->outcome = FSM_ACCEPTED;
    e->has_record = 1;
    e->rec = x;
}

static void m_complete(struct model *m,
                       int id,
                       const struct fsm_complete *c,
                       struct expect *e)
{
    struct m_rec *x = &m->rec[id];

    if (!m_live(m, x)) {
        e->outcome = FSM_NOT_FOUND;
        e->has_record = 0;
        return;
    }
    e->rec = x;
    e->has_record = -1;
    if (x->kind == FSM_KIND_NONCE) {
        e->outcome = FSM_CONFLICT;
    } else if (!token_eq(&c->owner_token, &x->tok)) {
        e->outcome = FSM_NOT_OWNER;
    } else if (x->state == FSM_STATE_PENDING) {
        e->outcome = FSM_COMPLETED;
        e->has_record = 1;
        x->state = FSM_STATE_COMPLETED;
        copy(x->result, c->result, c->result_len);
        x->result_len = c->result_len;
    } else if (x->state == FSM_STATE_COMPLETED) {
        e->outcome = FSM_COMPLETED;
        e->retry = true;
        e->has_record = 1;
    } else {
        e->outcome = FSM_CONFLICT; /* RELEASED or FAILED */
    }
}

static void m_release(struct model *m,
                      int id,
                      const struct fsm_release *c,
                      struct expect *e)
{
    struct m_rec *x = &m->rec[id];

    if (!m_live(m, x)) {
        e->outcome = FSM_NOT_FOUND;
        e->has_record = 0;
        return;
    }
    e->rec = x;
    e->has_record = -1;
    if (x->kind == FSM_KIND_NONCE) {
        e->outcome = FSM_CONFLICT;
        return;
    }
    if (!token_eq(&c->owner_token, &x->tok)) {
        e->outcome = FSM_NOT_OWNER;
        return;
    }
    e->has_record = 1;
    switch (x->state) {
        case FSM_STATE_PENDING:
        case FSM_STATE_RELEASED:
            if (c->terminal) {
                e->outcome = FSM_FAILED;
                x->state = FSM_STATE_FAILED;
                copy(x->error, c->error, c->error_len);
                x->error_len = c->error_len;
            } else {
                e->outcome = FSM_RELEASED;
                e->retry = x->state == FSM_STATE_RELEASED;
                x->state = FSM_STATE_RELEASED;
            }
            break;
        case FSM_STATE_FAILED:
            e->outcome = FSM_FAILED;
            e->retry = true;
            break;
        default: /* COMPLETED */
            e->outcome = FSM_CONFLICT;
            e->has_record = -1;
            break;
    }
}

/* Facts of @r against the model record @x. */
static void check_facts(const struct fsm_result *r,
                        const struct m_rec *x,
                        bool attempts_list,
                        bool skip_stored,
                        bool token_visible,
                        const char *ctx)
{
    CHECK(r->kind == x->kind, "%s: kind %d, model %d", ctx, (int)r->kind,
          (int)x->kind);
    CHECK(r->state == x->state, "%s: state %s, model %s", ctx,
          fsm_state_name(r->state), fsm_state_name(x->state));
    CHECK(memcmp(r->first_request_id, x->first_rid, FSM_REQUEST_ID_LEN) == 0,
          "%s: first request id differs", ctx);
    CHECK(r->first_index == x->first_index,
          "%s: first_index %" PRIu64 ", model %" PRIu64, ctx, r->first_index,
          x->first_index);
    CHECK(r->first_time_ms == x->first_time,
          "%s: first_time %" PRIu64 ", model %" PRIu64, ctx, r->first_time_ms,
          x->first_time);
    CHECK(r->expires_ms == x->expires,
          "%s: expires %" PRIu64 ", model %" PRIu64, ctx, r->expires_ms,
          x->expires);
    CHECK(r->attempts == x->n_att, "%s: attempts %u, model %u", ctx,
          (unsigned)r->attempts, (unsigned)x->n_att);
    if (x->kind == FSM_KIND_NONCE || !token_visible) {
        static const struct fsm_token zero;

        CHECK(!r->has_owner_token && token_eq(&r->owner_token, &zero),
              "%s: %s shows the owner token (%u,%" PRIu64 ",%u)", ctx,
              fsm_outcome_name(r->outcome), (unsigned)r->owner_token.group_id,
              r->owner_token.index, (unsigned)r->owner_token.slot);
    }
    if (x->kind == FSM_KIND_IDEMPOTENT && token_visible) {
        CHECK(r->has_owner_token, "%s: %s without the owner token", ctx,
              fsm_outcome_name(r->outcome));
        CHECK(token_eq(&r->owner_token, &x->tok),
              "%s: owner token (%u,%" PRIu64 ",%u), model (%u,%" PRIu64 ",%u)",
              ctx, (unsigned)r->owner_token.group_id, r->owner_token.index,
              (unsigned)r->owner_token.slot, (unsigned)x->tok.group_id,
              x->tok.index, (unsigned)x->tok.slot);
    }
    if (x->kind == FSM_KIND_IDEMPOTENT) {
        CHECK(r->owner_attempt == x->owner_attempt,
              "%s: owner_attempt %u, model %u", ctx, (unsigned)r->owner_attempt,
              (unsigned)x->owner_attempt);
        CHECK(r->lease_expires_ms == x->lease_expires,
              "%s: lease_expires %" PRIu64 ", model %" PRIu64, ctx,
              r->lease_expires_ms, x->lease_expires);
        CHECK(skip_stored ||
                  bytes_eq(r->result, r->result_len, x->result, x->result_len),
              "%s: result (%zu bytes) differs from model (%zu)", ctx,
              r->result_len, x->result_len);
        CHECK(skip_stored || bytes_eq(r->stored_error, r->stored_error_len,
                                      x->error, x->error_len),
              "%s: stored error (%zu bytes) differs from model (%zu)", ctx,
              r->stored_error_len, x->error_len);
    }
    if (attempts_list) {
        uint32_t n = x->n_att;
        size_t want = n <= 1 + FSM_ATTEMPTS_LAST ? n : 1 + FSM_ATTEMPTS_LAST;
        uint32_t k = 1;

        CHECK(r->n_attempt_list == want, "%s: %zu attempts listed, model %zu",
              ctx, r->n_attempt_list, want);
        for (size_t i = 0; i < want; i++) {
            const struct fsm_attempt *a = r->attempt_list[i];
            const struct m_att *b;

            /* 1, then the last min(n - 1, 4). */
            if (i == 1) {
                k = n > 1 + FSM_ATTEMPTS_LAST ? n - FSM_ATTEMPTS_LAST + 1 : 2;
            }
            b = k == 1 ? &x->att_first
                       : &x->att_ring[(k - 2) % FSM_ATTEMPTS_LAST];
            CHECK(a != NULL, "%s: attempt %zu is NULL", ctx, i);
            CHECK(memcmp(a->request_id, b->rid, FSM_REQUEST_ID_LEN) == 0 &&
                      a->index == b->index && a->time_ms == b->time_ms &&
                      a->outcome == b->outcome && a->retry == b->retry &&
                      bytes_eq(a->execution_id, a->execution_id_len, b->exec,
                               b->exec_len),
                  "%s: attempt %zu (#%u) differs: got %s%s idx %" PRIu64
                  " t %" PRIu64 ", model %s%s idx %" PRIu64 " t %" PRIu64,
                  ctx, i, (unsigned)k, fsm_outcome_name(a->outcome),
                  a->retry ? " retry" : "", a->index, a->time_ms,
                  fsm_outcome_name(b->outcome), b->retry ? " retry" : "",
                  b->index, b->time_ms);
            k++;
        }
    }
}

static void check_result(const struct fsm_result *r,
                         const struct expect *e,
                         const char *ctx)
{
    CHECK(r->outcome == e->outcome, "%s: outcome %s (%s), model %s", ctx,
          fsm_outcome_name(r->outcome),
          r->reason != NULL ? r->reason : "no reason",
          fsm_outcome_name(e->outcome));
    CHECK(r->retry == e->retry, "%s: %s retry %d, model %d", ctx,
          fsm_outcome_name(r->outcome), (int)r->retry, (int)e->retry);
    if (e->outcome == FSM_INVALID_ARGUMENT) {
        CHECK(r->reason != NULL, "%s: INVALID_ARGUMENT without reason", ctx);
    }
    if (e->has_record == 0) {
        CHECK(!r->has_record, "%s: %s has a record", ctx,
              fsm_outcome_name(r->outcome));
        return;
    }
    if (e->has_record == 1) {
        CHECK(r->has_record, "%s: %s without record facts", ctx,
              fsm_outcome_name(r->outcome));
    }
    if (r->has_record) {
        check_facts(r, e->rec, e->attempts_list, e->skip_stored,
                    e->token_visible, ctx);
    }
    if (e->outcome == FSM_IN_PROGRESS) {
        CHECK(r->retry_after_ms == e->retry_after,
              "%s: retry_after %" PRIu64 ", model %" PRIu64, ctx,
              r->retry_after_ms, e->retry_after);
    }
}

struct model_run
{
    struct model *m;
    struct gcmd *gcs;
    uint64_t seed;
    uint64_t index;
    int batch;
    size_t n;
    uint64_t n_checked;
};

static void model_cb(void *arg, size_t i, const struct fsm_result *r)
{
    struct model_run *run = arg;
    struct model *m = run->m;
    const struct gcmd *gc = &run->gcs[i];
    struct expect e;
    struct m_rec gone;
    char ctx[160];

    snprintf(ctx, sizeof ctx,
             "seed %" PRIu64 " batch %d index %" PRIu64
             " slot %zu type %d "
             "id %d now %" PRIu64,
             run->seed, run->batch, run->index, i, (int)gc->c.type, gc->id,
             m->now);
    CHECK(i == run->n, "%s: emit out of order", ctx);
    run->n++;
    memset(&e, 0, sizeof e);
    if (gc->raw) {
        e.outcome = FSM_INVALID_ARGUMENT;
        check_result(r, &e, ctx);
        run->n_checked++;
        m->n_outcome[r->outcome]++;
        return;
    }
    CHECK(r->cmd == gc->c.type, "%s: result for cmd %d", ctx, (int)r->cmd);
    switch (gc->c.type) {
        case FSM_CMD_CLAIM:
            m_claim(m, gc->id, &gc->c.u.claim, run->index, (uint32_t)i, r, &e);
            break;
        case FSM_CMD_COMPLETE:
            m_complete(m, gc->id, &gc->c.u.complete, &e);
            break;
        case FSM_CMD_RELEASE:
            m_release(m, gc->id, &gc->c.u.release, &e);
            break;
        case FSM_CMD_LOOKUP:
            if (m_live(m, &m->rec[gc->id])) {
                e.outcome = FSM_FOUND;
                e.has_record = 1;
                e.attempts_list = true;
                e.rec = &m->rec[gc->id];
            } else {
                e.outcome = FSM_NOT_FOUND;
            }
            break;
        case FSM_CMD_FORGET:
            if (m_live(m, &m->rec[gc->id])) {
                e.outcome = FSM_FORGOTTEN;
                e.skip_stored = true;
                e.has_record = -1;
                gone = m->rec[gc->id];
                e.rec = &gone;
                m->rec[gc->id].present = false;
            } else {
                e.outcome = FSM_NOT_FOUND;
            }
            break;
        default:
            ck_abort_msg("%s: unexpected command", ctx);
    }
    /* The owner token goes to its owner and to Lookup only. */
    e.token_visible =
        (gc->c.type == FSM_CMD_CLAIM && e.outcome == FSM_ACCEPTED) ||
        (gc->c.type == FSM_CMD_COMPLETE && e.outcome == FSM_COMPLETED) ||
        (gc->c.type == FSM_CMD_RELEASE &&
         (e.outcome == FSM_RELEASED || e.outcome == FSM_FAILED)) ||
        e.outcome == FSM_FOUND;
    check_result(r, &e, ctx);
    run->n_checked++;
    m->n_outcome[r->outcome]++;
}

static void hints_from_model(const struct model *m, struct hint *hints)
{
    for (int i = 0; i < N_IDS; i++) {
        const struct m_rec *x = &m->rec[i];
        struct hint *h = &hints[i];

        h->has = x->present;
        if (!x->present) {
            continue;
        }
        h->kind = x->kind;
        memcpy(h->rid_a, x->first_rid, FSM_REQUEST_ID_LEN);
        memcpy(h->rid_b,
               x->kind == FSM_KIND_IDEMPOTENT ? x->owner_rid : x->loser_rid,
               FSM_REQUEST_ID_LEN);
        h->tok = x->tok;
        h->old_tok = x->old_tok;
        h->has_old = x->has_old;
        h->hash_sel = x->hash_sel < 0 ? 0 : x->hash_sel;
    }
}

/* Record counts: live <= n_records <= live + expired less than a tick ago. */
static void check_counts(const struct fsm *f,
                         const struct model *m,
                         const char *ctx)
{
    uint64_t live = 0, upper = 0, n = fsm_n_records(f);

    for (int i = 0; i < N_IDS; i++) {
        const struct m_rec *x = &m->rec[i];

        if (m_live(m, x)) {
            live++;
        }
        if (x->present && x->expires + 1024 > m->now) {
            upper++;
        }
    }
    CHECK(n >= live && n <= upper,
          "%s: fsm_n_records %" PRIu64 ", model live %" PRIu64
          " upper %" PRIu64,
          ctx, n, live, upper);
}

static void direct_lookup(struct fsm *f,
                          const struct model *m,
                          int id,
                          const char *ctx)
{
    struct fsm_ident ident;
    struct fsm_result r;
    struct expect e;

    id_ident(id, &ident.scope, &ident.scope_len, &ident.key, &ident.key_len);
    memset(&r, 0, sizeof r);
    fsm_lookup(f, &ident, &r);
    memset(&e, 0, sizeof e);
    if (m_live(m, &m->rec[id])) {
        e.outcome = FSM_FOUND;
        e.has_record = 1;
        e.attempts_list = true;
        e.token_visible = true;
        e.rec = &m->rec[id];
    } else {
        e.outcome = FSM_NOT_FOUND;
    }
    check_result(&r, &e, ctx);
}

struct model_cfg
{
    struct fsm_settings s;
    uint32_t group_id;
    size_t n_commands;
};

static const struct model_cfg model_cfgs[] = {
    /* Tight: short windows and leases, max_records under the key space. */
    {{.max_window_ms = 20000,
      .max_skew_ms = 1000,
      .max_ttl_ms = 300000,
      .max_lease_ms = 10000,
      .max_records = 36,
      .max_bytes = 1ull << 30},
     1,
     250000},
    /* Roomy: defaults-like, leases default to 30 s, no record limit. */
    {{.max_window_ms = 120000,
      .max_skew_ms = 5000,
      .max_ttl_ms = 3600000,
      .max_lease_ms = 120000,
      .max_records = 1000000,
      .max_bytes = 1ull << 30},
     7,
     250000},
    /* Extreme: millisecond windows and skew, tiny limits, the largest
     * group id. */
    {{.max_window_ms = 5,
      .max_skew_ms = 1,
      .max_ttl_ms = 5000,
      .max_lease_ms = 2000,
      .max_records = 8,
      .max_bytes = 1ull << 30},
     UINT32_MAX,
     250000},
};

static struct model g_model;

START_TEST(reference)
{
    const struct model_cfg *cfg = &model_cfgs[_i];
    const char *env = getenv("ONCE_MODEL_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0)
                                : 0xc0ffee00ull + (uint64_t)_i * 104729;
    struct gen g = {.rng = seed, .group_id = cfg->group_id, .config = false};
    struct model *m = &g_model;
    struct hint hints[N_IDS];
    struct fsm *f = fsm_new();
    size_t done = 0;
    int b = 0;
    char ctx[128];

    ck_assert_ptr_nonnull(f);
    init_keys();
    init_hashes();
    memset(m, 0, sizeof *m);
    m->s = cfg->s;
    m->group_id = cfg->group_id;
    m->now = 1700000000000ull;
    bootstrap(f, &m->s, m->group_id, m->now);

    while (done < cfg->n_commands) {
        struct model_run run = {.m = m, .gcs = g_cmds, .seed = seed};
        size_t n = (size_t)rng_range(&g.rng, 1, BATCH_MAX_CMDS);
        uint64_t t = gen_time(&g, m->now);
        uint8_t *batch;
        size_t len;
        int rv;

        m->now = max_u64(m->now, min_u64(t, FSM_TIME_MAX));
        hints_from_model(m, hints);
        for (size_t i = 0; i < n; i++) {
            gen_command(&g, &g_cmds[i], hints, &m->s, m->now);
        }
        batch = encode_batch(g_cmds, n, t, &len, seed);
        run.index = 2 + (uint64_t)b;
        run.batch = b;
        rv = fsm_apply(f, run.index, batch, len, model_cb, &run);
        snprintf(ctx, sizeof ctx, "seed %" PRIu64 " batch %d now %" PRIu64,
                 seed, b, m->now);
        CHECK(rv == 0, "%s: apply %d", ctx, rv);
        CHECK(run.n == n, "%s: %zu results for %zu commands", ctx, run.n, n);
        CHECK(fsm_now(f) == m->now, "%s: fsm_now %" PRIu64, ctx, fsm_now(f));
        CHECK(fsm_last_index(f) == run.index, "%s: last index", ctx);
        check_counts(f, m, ctx);
        for (int k = 0; k < 2; k++) {
            direct_lookup(f, m, (int)(rng_next(&g.rng) % N_IDS), ctx);
        }
        free(batch);
        done += n;
        b++;
    }

    /* Every identity, then a jump past every expiry: nothing is left. */
    snprintf(ctx, sizeof ctx, "seed %" PRIu64 " end", seed);
    for (int id = 0; id < N_IDS; id++) {
        direct_lookup(f, m, id, ctx);
    }
    {
        uint64_t last = 0, t;
        uint8_t *batch;
        size_t len;
        struct digest_sink d = {0};

        for (int id = 0; id < N_IDS; id++) {
            if (m->rec[id].present) {
                last = max_u64(last, m->rec[id].expires);
            }
        }
        t = max_u64(m->now, last) + 2048;
        batch = encode_batch(g_cmds, 0, t, &len, seed);
        ck_assert_int_eq(
            fsm_apply(f, 2 + (uint64_t)b, batch, len, digest_cb, &d), 0);
        m->now = t;
        check_counts(f, m, ctx);
        CHECK(fsm_n_records(f) == 0,
              "%s: %" PRIu64 " records after every expiry", ctx,
              fsm_n_records(f));
        free(batch);
    }

    /* The run must have exercised every outcome a claim can have. */
    {
        static const enum fsm_outcome must[] = {
            FSM_ACCEPTED,  FSM_REPLAYED,  FSM_DUPLICATE,        FSM_IN_PROGRESS,
            FSM_CONFLICT,  FSM_STALE,     FSM_FUTURE,           FSM_FAILED,
            FSM_NOT_OWNER, FSM_NOT_FOUND, FSM_COMPLETED,        FSM_RELEASED,
            FSM_FOUND,     FSM_FORGOTTEN, FSM_INVALID_ARGUMENT,
        };

        for (size_t k = 0; k < sizeof must / sizeof must[0]; k++) {
            CHECK(m->n_outcome[must[k]] > 0, "seed %" PRIu64 ": no %s seen",
                  seed, fsm_outcome_name(must[k]));
        }
        if (cfg->s.max_records < N_IDS) {
            CHECK(m->n_outcome[FSM_RESOURCE_EXHAUSTED] > 0,
                  "seed %" PRIu64 ": no RESOURCE_EXHAUSTED seen", seed);
        }
    }
    fsm_free(f);
}
END_TEST

Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc;

    tc = tcase_create("determinism");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, determinism, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, reference, 0,
                        (int)(sizeof model_cfgs / sizeof model_cfgs[0]));
    suite_add_tcase(s, tc);
    return s;
}
