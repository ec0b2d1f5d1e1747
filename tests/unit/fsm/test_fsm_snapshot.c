/* test_fsm_snapshot: fsm_snapshot_size/fsm_snapshot_write and fsm_restore.
 *
 * Round trips (snapshot -> restore -> snapshot is byte-identical and every
 * observable is equal), canonical encoding (different histories reaching
 * the same records give the same bytes), a restored instance behaving like
 * the original, and refusal of corrupt input: every truncation, bit flips,
 * newer versions, and byte changes that keep a valid checksum, all with the
 * target's state left exactly as it was.
 *
 * One file past ~1,000 lines on purpose: every test builds its state with
 * build_rich/build_small and compares with check_same_state, the shared
 * half of the file; frozen views and off-loop restore, which need threads,
 * are in test_fsm_frozen.c. */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "fsm/command.h"
#include "fsm/fsm.h"

Suite *snapshot_suite(void);

#define T0 1700000000000ull

/* Snapshot header layout (src/fsm/snapshot.c): "ONCESNAP", u32 format,
 * u32 schema, ..., and a trailing u32 CRC-32C of everything before it, all
 * little-endian. */
#define SNAP_FORMAT_OFF 8
#define SNAP_SCHEMA_OFF 12

/* --- helpers -------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static uint8_t *snap(const struct fsm *f, size_t *len)
{
    uint8_t *buf;

    *len = fsm_snapshot_size(f);
    ck_assert_uint_gt(*len, 0);
    buf = malloc(*len);
    ck_assert_ptr_nonnull(buf);
    fsm_snapshot_write(f, buf, *len);
    return buf;
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

static void fix_crc(uint8_t *buf, size_t len)
{
    put_u32(buf + len - 4, crc32c(0, buf, len - 4));
}

/* Identities: scope "s1"/"scope-two", keys "k<n>". */
#define MAX_IDS 8192
static char key_text[MAX_IDS][16];
static size_t key_text_len[MAX_IDS];
static const char *const scopes[2] = {"s1", "scope-two"};
static uint8_t long_scope[FSM_SCOPE_MAX];
static uint8_t long_key[FSM_KEY_MAX];
static uint8_t big_result[FSM_RESULT_MAX];
static uint8_t big_error[FSM_ERROR_MAX];
static const uint8_t hash32[32] = "0123456789abcdef0123456789abcdef";

static void init_ids(void)
{
    for (int i = 0; i < MAX_IDS; i++) {
        key_text_len[i] =
            (size_t)snprintf(key_text[i], sizeof key_text[i], "k%d", i);
    }
    memset(long_scope, 'S', sizeof long_scope);
    for (size_t i = 0; i < sizeof long_key; i++) {
        long_key[i] = (uint8_t)i;
    }
    for (size_t i = 0; i < sizeof big_result; i++) {
        big_result[i] = (uint8_t)(i * 7 + 1);
    }
    for (size_t i = 0; i < sizeof big_error; i++) {
        big_error[i] = (uint8_t)(i * 5 + 3);
    }
}

/* Identity number -> (scope, key). Odd numbers use the second scope; the
 * same key text therefore appears in both scopes. */
static void ident_of(int n,
                     const uint8_t **scope,
                     size_t *scope_len,
                     const uint8_t **key,
                     size_t *key_len)
{
    const char *s = scopes[n % 2];

    *scope = (const uint8_t *)s;
    *scope_len = strlen(s);
    *key = (const uint8_t *)key_text[n / 2];
    *key_len = key_text_len[n / 2];
}

static void make_rid(uint8_t rid[FSM_REQUEST_ID_LEN], uint64_t a, uint64_t b)
{
    for (int i = 0; i < 8; i++) {
        rid[i] = (uint8_t)(a >> (8 * i));
        rid[8 + i] = (uint8_t)(b >> (8 * i));
    }
}

static void nonce_claim(struct fsm_cmd *c, int n, uint64_t rid, uint64_t ttl)
{
    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_CLAIM;
    ident_of(n, &c->u.claim.scope, &c->u.claim.scope_len, &c->u.claim.key,
             &c->u.claim.key_len);
    make_rid(c->u.claim.request_id, (uint64_t)n, rid);
    c->u.claim.kind = FSM_KIND_NONCE;
    c->u.claim.ttl_ms = ttl;
}

static void idem_claim(struct fsm_cmd *c,
                       int n,
                       uint64_t rid,
                       uint64_t ttl,
                       uint64_t lease)
{
    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_CLAIM;
    ident_of(n, &c->u.claim.scope, &c->u.claim.scope_len, &c->u.claim.key,
             &c->u.claim.key_len);
    make_rid(c->u.claim.request_id, (uint64_t)n, rid);
    c->u.claim.kind = FSM_KIND_IDEMPOTENT;
    c->u.claim.ttl_ms = ttl;
    c->u.claim.payload_hash = hash32;
    c->u.claim.payload_hash_len = sizeof hash32;
    c->u.claim.lease_ms = lease;
    c->u.claim.execution_id = (const uint8_t *)"pod-1234";
    c->u.claim.execution_id_len = 8;
}

static void ident_cmd(struct fsm_cmd *c, enum fsm_cmd_type t, int n)
{
    memset(c, 0, sizeof *c);
    c->type = t;
    ident_of(n, &c->u.ident.scope, &c->u.ident.scope_len, &c->u.ident.key,
             &c->u.ident.key_len);
}

static void complete_cmd(struct fsm_cmd *c,
                         int n,
                         struct fsm_token tok,
                         const uint8_t *res,
                         size_t res_len)
{
    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_COMPLETE;
    ident_of(n, &c->u.complete.scope, &c->u.complete.scope_len,
             &c->u.complete.key, &c->u.complete.key_len);
    c->u.complete.owner_token = tok;
    c->u.complete.result = res;
    c->u.complete.result_len = res_len;
}

static void release_cmd(struct fsm_cmd *c,
                        int n,
                        struct fsm_token tok,
                        bool terminal,
                        const uint8_t *err,
                        size_t err_len)
{
    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_RELEASE;
    ident_of(n, &c->u.release.scope, &c->u.release.scope_len, &c->u.release.key,
             &c->u.release.key_len);
    c->u.release.owner_token = tok;
    c->u.release.terminal = terminal;
    c->u.release.error = err;
    c->u.release.error_len = err_len;
}

/* Results of one batch, with what later commands need. */
#define MAX_CMDS 8192
struct outs
{
    size_t n;
    enum fsm_outcome o[MAX_CMDS];
    struct fsm_token tok[MAX_CMDS];
    uint64_t digest[MAX_CMDS];
};

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

/* Everything a result says, as one number. */
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

static void outs_cb(void *arg, size_t i, const struct fsm_result *r)
{
    struct outs *o = arg;

    ck_assert_uint_eq(i, o->n);
    ck_assert_uint_lt(i, MAX_CMDS);
    o->o[i] = r->outcome;
    o->tok[i] = r->owner_token;
    o->digest[i] = result_digest(r);
    o->n++;
}

static struct outs g_outs;

/* Encode @cmds as one batch and apply it at @index; returns the outcomes
 * (static storage, overwritten by the next call). */
static const struct outs *apply(struct fsm *f,
                                uint64_t index,
                                uint64_t time,
                                const struct fsm_cmd *cmds,
                                size_t n)
{
    uint8_t **enc = calloc(n + 1, sizeof *enc);
    size_t *lens = calloc(n + 1, sizeof *lens);
    uint8_t *batch;
    size_t batch_len;
    int rv;

    ck_assert(enc != NULL && lens != NULL);
    for (size_t i = 0; i < n; i++) {
        rv = command_encode(&cmds[i], &enc[i], &lens[i]);
        ck_assert_msg(rv == 0, "encode cmd %zu (type %d): %d", i,
                      (int)cmds[i].type, rv);
    }
    rv = command_encode_batch(FSM_SCHEMA_VERSION, time,
                              (const uint8_t *const *)enc, lens, n, &batch,
                              &batch_len);
    ck_assert_int_eq(rv, 0);
    g_outs.n = 0;
    rv = fsm_apply(f, index, batch, batch_len, outs_cb, &g_outs);
    ck_assert_msg(rv == 0, "apply at index %" PRIu64 ": %d", index, rv);
    ck_assert_uint_eq(g_outs.n, n);
    for (size_t i = 0; i < n; i++) {
        free(enc[i]);
    }
    free(enc);
    free(lens);
    free(batch);
    return &g_outs;
}

static void make_settings(struct fsm_settings *s)
{
    s->max_window_ms = 60000;
    s->max_skew_ms = 2000;
    s->max_ttl_ms = 86400000;
    s->max_lease_ms = 600000;
    s->max_records = 1000000;
    s->max_bytes = 1ull << 32;
}

static void bootstrap_with(struct fsm *f,
                           uint64_t time,
                           const struct fsm_settings *s)
{
    struct fsm_bootstrap *b = calloc(1, sizeof *b);
    struct fsm_cmd c;
    const struct outs *o;

    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 16; i++) {
        b->cluster_id[i] = (uint8_t)(0xc0 + i);
        b->hash_key[i] = (uint8_t)(0x31 * i + 5);
    }
    b->group_id = 5;
    b->settings = *s;
    b->n_members = 3;
    for (size_t i = 0; i < 3; i++) {
        b->members[i].id = 10 + i;
        snprintf(b->members[i].raft_addr, sizeof b->members[i].raft_addr,
                 "192.0.2.%zu:7000", i + 1);
        snprintf(b->members[i].client_addr, sizeof b->members[i].client_addr,
                 "192.0.2.%zu:7001", i + 1);
        b->members[i].role = (enum fsm_role)(1 + i);
    }
    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_BOOTSTRAP;
    c.u.bootstrap = b;
    o = apply(f, 1, time, &c, 1);
    ck_assert_int_eq(o->o[0], FSM_OK);
    free(b);
}

static void bootstrap(struct fsm *f, uint64_t time)
{
    struct fsm_settings s;

    make_settings(&s);
    bootstrap_with(f, time, &s);
}

/* A state with a bit of everything: members added and retired, a settling
 * max_window raise, NONCE records in two scopes (one with the longest scope
 * and key), IDEMPOTENT records in every state with results (one of 64 KiB),
 * errors, and attempt histories long enough to wrap the ring. Indexes
 * 1..8, times T0..T0+700. Returns the number of identities used. */
/* build_rich's index 2: member changes. */
static void rich_members(struct fsm *f, struct fsm_cmd *c)
{
    const struct outs *o;

    memset(c, 0, 5 * sizeof c[0]);
    c[0].type = FSM_CMD_SET_MEMBER;
    c[0].u.member.id = 20;
    strcpy(c[0].u.member.raft_addr, "198.51.100.7:7000");
    strcpy(c[0].u.member.client_addr, "198.51.100.7:7001");
    c[0].u.member.role = FSM_ROLE_SPARE;
    c[1] = c[0];
    c[1].u.member.id = 21;
    c[2].type = FSM_CMD_RETIRE_MEMBER;
    c[2].u.retire_id = 11;
    c[3].type = FSM_CMD_RETIRE_MEMBER;
    c[3].u.retire_id = 21;
    c[4].type = FSM_CMD_RETIRE_MEMBER;
    c[4].u.retire_id = 999999;
    o = apply(f, 2, T0 + 100, c, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(o->o[i], FSM_OK);
    }
}

/* build_rich's index 5: complete, release, fail; replays and retries. */
static void rich_outcomes(struct fsm *f,
                          struct fsm_cmd *c,
                          int base,
                          const struct fsm_token *tok)
{
    const struct outs *o;
    size_t k;

    k = 0;
    for (int i = 0; i < 10; i++) {
        complete_cmd(&c[k++], base + i, tok[i], big_result,
                     i == 0 ? FSM_RESULT_MAX : (size_t)(i * 13));
    }
    for (int i = 10; i < 15; i++) {
        release_cmd(&c[k++], base + i, tok[i], false, NULL, 0);
    }
    for (int i = 15; i < 20; i++) {
        release_cmd(&c[k++], base + i, tok[i], true, big_error,
                    i == 15 ? FSM_ERROR_MAX : (size_t)i);
    }
    for (int r = 0; r < 7; r++) {
        nonce_claim(&c[k++], 0, 100 + (uint64_t)r, 3600000); /* REPLAYED */
    }
    nonce_claim(&c[k++], 2, 1, 3600000);                /* ACCEPTED retry */
    idem_claim(&c[k++], 4, 1, 3600000, 0);              /* CONFLICT kind */
    idem_claim(&c[k++], base + 20, 1, 3600000, 60000);  /* retry */
    idem_claim(&c[k++], base + 21, 77, 3600000, 60000); /* IN_PROGRESS */
    idem_claim(&c[k++], base + 0, 77, 3600000, 60000);  /* DUPLICATE */
    idem_claim(&c[k++], base + 15, 77, 3600000, 60000); /* FAILED */
    idem_claim(&c[k++], base + 22, 77, 3600000, 60000); /* hash CONFLICT */
    c[k - 1].u.claim.payload_hash_len = 31;
    o = apply(f, 5, T0 + 400, c, k);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(o->o[i], FSM_COMPLETED);
    }
    for (int i = 10; i < 15; i++) {
        ck_assert_int_eq(o->o[i], FSM_RELEASED);
    }
    for (int i = 15; i < 20; i++) {
        ck_assert_int_eq(o->o[i], FSM_FAILED);
    }
    for (int i = 20; i < 27; i++) {
        ck_assert_int_eq(o->o[i], FSM_REPLAYED);
    }
    ck_assert_int_eq(o->o[27], FSM_ACCEPTED);
    ck_assert_int_eq(o->o[28], FSM_CONFLICT);
    ck_assert_int_eq(o->o[29], FSM_ACCEPTED);
    ck_assert_int_eq(o->o[30], FSM_IN_PROGRESS);
    ck_assert_int_eq(o->o[31], FSM_DUPLICATE);
    ck_assert_int_eq(o->o[32], FSM_FAILED);
    ck_assert_int_eq(o->o[33], FSM_CONFLICT);
}

static int build_rich(struct fsm *f, int n_nonce)
{
    static struct fsm_cmd c[MAX_CMDS];
    struct fsm_token tok[64];
    const struct outs *o;
    int base = n_nonce; /* identities of the IDEMPOTENT records */

    ck_assert_int_le(n_nonce + 64, MAX_IDS * 2);
    bootstrap(f, T0);

    rich_members(f, c); /* index 2 */

    /* index 3: NONCE records; the last one has the longest identity */
    for (int i = 0; i < n_nonce; i++) {
        nonce_claim(&c[i], i, 1, 3600000);
    }
    c[n_nonce] = c[0];
    c[n_nonce].u.claim.scope = long_scope;
    c[n_nonce].u.claim.scope_len = FSM_SCOPE_MAX;
    c[n_nonce].u.claim.key = long_key;
    c[n_nonce].u.claim.key_len = FSM_KEY_MAX;
    c[n_nonce].u.claim.has_ts = true;
    c[n_nonce].u.claim.ts_ms = T0 + 150;
    c[n_nonce].u.claim.window_ms = 1000;
    c[n_nonce].u.claim.ttl_ms = 0;
    o = apply(f, 3, T0 + 200, c, (size_t)n_nonce + 1);
    for (int i = 0; i <= n_nonce; i++) {
        ck_assert_int_eq(o->o[i], FSM_ACCEPTED);
    }

    /* index 4: IDEMPOTENT records */
    for (int i = 0; i < 40; i++) {
        idem_claim(&c[i], base + i, 1, 3600000, 60000);
    }
    o = apply(f, 4, T0 + 300, c, 40);
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(o->o[i], FSM_ACCEPTED);
        tok[i] = o->tok[i];
    }

    rich_outcomes(f, c, base, tok); /* index 5 */

    /* index 6: raise max_window (starts the settling fence) */
    memset(&c[0], 0, sizeof c[0]);
    c[0].type = FSM_CMD_SET_SETTINGS;
    make_settings(&c[0].u.settings);
    c[0].u.settings.max_window_ms = 120000;
    c[0].u.settings.max_records = 900000;
    o = apply(f, 6, T0 + 500, c, 1);
    ck_assert_int_eq(o->o[0], FSM_OK);

    /* index 7: take over a released record; stale token afterwards */
    idem_claim(&c[0], base + 10, 55, 7200000, 1000);
    complete_cmd(&c[1], base + 10, tok[10], NULL, 0); /* NOT_OWNER */
    o = apply(f, 7, T0 + 600, c, 2);
    ck_assert_int_eq(o->o[0], FSM_ACCEPTED);
    ck_assert_int_eq(o->o[1], FSM_NOT_OWNER);

    /* index 8: a short-lived record that will be expired but not pruned
     * when the snapshot is taken (same tick), and a forget */
    nonce_claim(&c[0], base + 40, 9, 1);
    ident_cmd(&c[1], FSM_CMD_FORGET, 3);
    o = apply(f, 8, T0 + 700, c, 2);
    ck_assert_int_eq(o->o[0], FSM_ACCEPTED);
    ck_assert_int_eq(o->o[1], FSM_FORGOTTEN);
    return base + 41;
}

/* Compare every observable of @a and @b, including a lookup of each of the
 * identities 0..@n_ids-1 and the long one. */
static void check_same_state(struct fsm *a, struct fsm *b, int n_ids)
{
    const struct fsm_settings *sa = fsm_settings(a), *sb = fsm_settings(b);

    ck_assert_int_eq(fsm_bootstrapped(a), fsm_bootstrapped(b));
    ck_assert_uint_eq(fsm_now(a), fsm_now(b));
    ck_assert_uint_eq(fsm_last_index(a), fsm_last_index(b));
    ck_assert_uint_eq(fsm_group_id(a), fsm_group_id(b));
    ck_assert_uint_eq(fsm_schema_version(a), fsm_schema_version(b));
    ck_assert(
        memcmp(fsm_cluster_id(a), fsm_cluster_id(b), FSM_CLUSTER_ID_LEN) == 0);
    ck_assert(memcmp(sa, sb, sizeof *sa) == 0);
    ck_assert_uint_eq(fsm_n_members(a), fsm_n_members(b));
    for (size_t i = 0; i < fsm_n_members(a); i++) {
        const struct fsm_member *ma = fsm_member(a, i), *mb = fsm_member(b, i);

        ck_assert_uint_eq(ma->id, mb->id);
        ck_assert_str_eq(ma->raft_addr, mb->raft_addr);
        ck_assert_str_eq(ma->client_addr, mb->client_addr);
        ck_assert_int_eq(ma->role, mb->role);
    }
    ck_assert_uint_eq(fsm_n_retired(a), fsm_n_retired(b));
    for (uint64_t id = 0; id < 64; id++) {
        ck_assert_int_eq(fsm_is_retired(a, id), fsm_is_retired(b, id));
    }
    ck_assert_int_eq(fsm_is_retired(a, 999999), fsm_is_retired(b, 999999));
    ck_assert_uint_eq(fsm_n_records(a), fsm_n_records(b));
    ck_assert_uint_eq(fsm_bytes(a), fsm_bytes(b));
    if (!fsm_bootstrapped(a)) {
        return;
    }
    for (int n = -1; n < n_ids; n++) {
        struct fsm_ident id;
        struct fsm_result ra, rb;
        uint64_t da;

        if (n < 0) {
            id.scope = long_scope;
            id.scope_len = FSM_SCOPE_MAX;
            id.key = long_key;
            id.key_len = FSM_KEY_MAX;
        } else {
            ident_of(n, &id.scope, &id.scope_len, &id.key, &id.key_len);
        }
        fsm_lookup(a, &id, &ra);
        da = result_digest(&ra);
        fsm_lookup(b, &id, &rb);
        ck_assert_msg(
            da == result_digest(&rb), "identity %d: lookups differ (%s / %s)",
            n, fsm_outcome_name(ra.outcome), fsm_outcome_name(rb.outcome));
    }
}

/* Restore @buf into @f and require the result to re-encode to @buf. */
static void restore_ok(struct fsm *f, const uint8_t *buf, size_t len)
{
    char errmsg[256] = "";
    uint8_t *again;
    size_t again_len;
    int rv = fsm_restore(f, buf, len, errmsg);

    ck_assert_msg(rv == 0, "restore: %d (%s)", rv, errmsg);
    again = snap(f, &again_len);
    ck_assert_uint_eq(again_len, len);
    ck_assert_msg(memcmp(again, buf, len) == 0,
                  "snapshot of the restored fsm differs");
    free(again);
}

/* Restoring @buf into @f must fail with one of @want (bitmask of
 * 1 << -(rv + 1100)) and leave @f exactly as @before says. */
static void restore_refused(struct fsm *f,
                            const uint8_t *buf,
                            size_t len,
                            const uint8_t *before,
                            size_t before_len,
                            unsigned want,
                            const char *what,
                            size_t pos)
{
    char errmsg[256];
    uint8_t *after;
    size_t after_len;
    int rv;

    memset(errmsg, 0, sizeof errmsg);
    rv = fsm_restore(f, buf, len, errmsg);
    ck_assert_msg(rv <= -1101 && rv >= -1104 && (want & (1u << -(rv + 1100))),
                  "%s at %zu (of %zu): restore returned %d (%s) %s", what, pos,
                  len, rv, fsm_strerror(rv), errmsg);
    ck_assert_msg(errmsg[0] != '\0', "%s at %zu: no errmsg", what, pos);
    after = snap(f, &after_len);
    ck_assert_msg(
        after_len == before_len && memcmp(after, before, after_len) == 0,
        "%s at %zu: the target changed after a refused restore", what, pos);
    free(after);
}

#define W_MALFORMED (1u << 1) /* -1101 */
#define W_SCHEMA    (1u << 2) /* -1102 */
#define W_CHECKSUM  (1u << 3) /* -1103 */

/* A small snapshot for the corruption sweeps: bootstrapped, members, a
 * retired id, a few records with ext (result, error, attempts). */
static void build_small(struct fsm *f)
{
    struct fsm_cmd c[8];
    struct fsm_token tok[2];
    const struct outs *o;

    bootstrap(f, T0);
    nonce_claim(&c[0], 0, 1, 60000);
    nonce_claim(&c[1], 1, 1, 60000);
    idem_claim(&c[2], 2, 1, 60000, 5000);
    idem_claim(&c[3], 3, 1, 60000, 5000);
    o = apply(f, 2, T0 + 10, c, 4);
    tok[0] = o->tok[2];
    tok[1] = o->tok[3];
    complete_cmd(&c[0], 2, tok[0], (const uint8_t *)"result", 6);
    release_cmd(&c[1], 3, tok[1], true, (const uint8_t *)"boom", 4);
    nonce_claim(&c[2], 0, 2, 60000); /* REPLAYED: an attempt */
    memset(&c[3], 0, sizeof c[3]);
    c[3].type = FSM_CMD_RETIRE_MEMBER;
    c[3].u.retire_id = 12;
    o = apply(f, 3, T0 + 20, c, 4);
    ck_assert_int_eq(o->o[0], FSM_COMPLETED);
    ck_assert_int_eq(o->o[1], FSM_FAILED);
    ck_assert_int_eq(o->o[2], FSM_REPLAYED);
    ck_assert_int_eq(o->o[3], FSM_OK);
}

/* A target with different content, to see that a refused restore leaves
 * it alone. */
static struct fsm *make_target(void)
{
    struct fsm *t = fsm_new();
    struct fsm_cmd c[3];

    ck_assert_ptr_nonnull(t);
    bootstrap(t, T0 + 5000);
    nonce_claim(&c[0], 100, 1, 600000);
    idem_claim(&c[1], 101, 1, 600000, 1000);
    nonce_claim(&c[2], 102, 1, 600000);
    apply(t, 2, T0 + 6000, c, 3);
    return t;
}

/* --- round trips ---------------------------------------------------------- */

START_TEST(roundtrip_rich)
{
    struct fsm *f = fsm_new(), *g = fsm_new();
    uint8_t *buf;
    size_t len;
    int n_ids;

    ck_assert(f != NULL && g != NULL);
    init_ids();
    n_ids = build_rich(f, 300);
    buf = snap(f, &len);
    restore_ok(g, buf, len);
    check_same_state(f, g, n_ids);
    /* The snapshot is deterministic: writing it twice gives the same. */
    {
        size_t len2;
        uint8_t *buf2 = snap(f, &len2);

        ck_assert(len2 == len && memcmp(buf, buf2, len) == 0);
        free(buf2);
    }
    /* Restoring over a populated instance replaces everything. */
    {
        struct fsm *t = make_target();

        restore_ok(t, buf, len);
        check_same_state(f, t, n_ids);
        fsm_free(t);
    }
    /* A second generation round-trips too. */
    {
        struct fsm *h = fsm_new();
        size_t len2;
        uint8_t *buf2 = snap(g, &len2);

        ck_assert_ptr_nonnull(h);
        restore_ok(h, buf2, len2);
        check_same_state(f, h, n_ids);
        free(buf2);
        fsm_free(h);
    }
    free(buf);
    fsm_free(f);
    fsm_free(g);
}
END_TEST

START_TEST(roundtrip_empty)
{
    struct fsm *f = fsm_new(), *g = fsm_new();
    struct fsm *t;
    uint8_t *buf;
    size_t len;
    struct fsm_cmd c;
    const struct outs *o;

    ck_assert(f != NULL && g != NULL);
    init_ids();
    buf = snap(f, &len);
    ck_assert_mem_eq(buf, "ONCESNAP", 8);
    restore_ok(g, buf, len);
    check_same_state(f, g, 0);
    ck_assert(!fsm_bootstrapped(g));
    ck_assert_uint_eq(fsm_n_records(g), 0);

    /* Over a bootstrapped instance with records: back to nothing, and it
     * can be bootstrapped again (Bootstrap is accepted once per state). */
    t = make_target();
    restore_ok(t, buf, len);
    check_same_state(f, t, 0);
    ck_assert(!fsm_bootstrapped(t));
    ck_assert_uint_eq(fsm_n_records(t), 0);
    ck_assert_uint_eq(fsm_n_members(t), 0);
    ck_assert_uint_eq(fsm_n_retired(t), 0);
    bootstrap(t, T0);
    nonce_claim(&c, 0, 1, 1000);
    o = apply(t, 2, T0, &c, 1);
    ck_assert_int_eq(o->o[0], FSM_ACCEPTED);
    fsm_free(t);
    free(buf);
    fsm_free(f);
    fsm_free(g);
}
END_TEST

/* Not bootstrapped, but batches went through (all refused): time and index
 * moved and must survive. */
START_TEST(roundtrip_unbootstrapped)
{
    struct fsm *f = fsm_new(), *g = fsm_new();
    struct fsm_cmd c[2];
    const struct outs *o;
    uint8_t *buf;
    size_t len;

    ck_assert(f != NULL && g != NULL);
    init_ids();
    nonce_claim(&c[0], 0, 1, 1000);
    ident_cmd(&c[1], FSM_CMD_LOOKUP, 0);
    o = apply(f, 1, T0, c, 2);
    ck_assert_int_eq(o->o[0], FSM_FAILED_PRECONDITION);
    ck_assert_int_eq(o->o[1], FSM_FAILED_PRECONDITION);
    o = apply(f, 2, T0 + 99, c, 1);
    ck_assert_int_eq(o->o[0], FSM_FAILED_PRECONDITION);
    buf = snap(f, &len);
    restore_ok(g, buf, len);
    check_same_state(f, g, 0);
    ck_assert_uint_eq(fsm_now(g), T0 + 99);
    ck_assert_uint_eq(fsm_last_index(g), 2);
    /* Both still accept the bootstrap, identically. */
    bootstrap(f, T0 + 100);
    bootstrap(g, T0 + 100);
    free(buf);
    {
        size_t l2;
        uint8_t *b1 = snap(f, &len), *b2 = snap(g, &l2);

        ck_assert(len == l2 && memcmp(b1, b2, len) == 0);
        free(b1);
        free(b2);
    }
    fsm_free(f);
    fsm_free(g);
}
END_TEST

/* --- canonical encoding --------------------------------------------------- */

#define N_MAIN   400
#define N_IDEM   60
#define N_EXTRA  48000
#define N_SHORT  2000
#define CHUNK    4000
#define EXTRA_ID 10000 /* identities of B's extra records start here */

/* Extra identities live beyond key_text: build them on the fly. */
static char extra_key[N_EXTRA + N_SHORT][16];

static void extra_claim(struct fsm_cmd *c, int n, uint64_t ttl)
{
    size_t len = (size_t)snprintf(extra_key[n], sizeof extra_key[n], "x%d", n);

    memset(c, 0, sizeof *c);
    c->type = FSM_CMD_CLAIM;
    c->u.claim.scope = (const uint8_t *)scopes[n % 2];
    c->u.claim.scope_len = strlen(scopes[n % 2]);
    c->u.claim.key = (const uint8_t *)extra_key[n];
    c->u.claim.key_len = len;
    make_rid(c->u.claim.request_id, (uint64_t)(EXTRA_ID + n), 1);
    c->u.claim.kind = FSM_KIND_NONCE;
    c->u.claim.ttl_ms = ttl;
}

/* canonical_histories: B gets N_EXTRA extra records (its tables grow),
 * A the same indexes with nothing in them. */
static void histories_grow_b(struct fsm *a,
                             struct fsm *b,
                             struct fsm_cmd *c,
                             uint64_t *idx,
                             uint64_t *t)
{
    const struct outs *o;

    *t += 1000;
    for (int base = 0; base < N_EXTRA; base += CHUNK) {
        (*idx)++;
        for (int i = 0; i < CHUNK; i++) {
            extra_claim(&c[i], base + i, 3600000);
        }
        o = apply(b, *idx, *t, c, CHUNK);
        ck_assert_int_eq(o->o[CHUNK - 1], FSM_ACCEPTED);
        apply(a, *idx, *t, c, 0);
    }
    ck_assert_uint_eq(fsm_n_records(b), N_EXTRA);
}

/* canonical_histories: B forgets every extra record again. */
static void histories_forget_b(struct fsm *a,
                               struct fsm *b,
                               struct fsm_cmd *c,
                               uint64_t *idx,
                               uint64_t *t)
{
    const struct outs *o;

    *t += 1000;
    for (int base = 0; base < N_EXTRA; base += CHUNK) {
        (*idx)++;
        for (int i = 0; i < CHUNK; i++) {
            extra_claim(&c[i], base + i, 3600000);
            c[i].type = FSM_CMD_FORGET;
            c[i].u.ident.scope = c[i].u.claim.scope;
            c[i].u.ident.scope_len = c[i].u.claim.scope_len;
            c[i].u.ident.key = c[i].u.claim.key;
            c[i].u.ident.key_len = c[i].u.claim.key_len;
        }
        o = apply(b, *idx, *t, c, CHUNK);
        ck_assert_int_eq(o->o[0], FSM_FORGOTTEN);
        ck_assert_int_eq(o->o[CHUNK - 1], FSM_FORGOTTEN);
        apply(a, *idx, *t, c, 0);
    }
    ck_assert_uint_eq(fsm_n_records(b), N_MAIN);
}

START_TEST(canonical_histories)
{
    static struct fsm_cmd c[MAX_CMDS];
    struct fsm *a = fsm_new(), *b = fsm_new(), *r = fsm_new();
    struct fsm_token tok_a[N_IDEM], tok_b[N_IDEM];
    const struct outs *o;
    uint64_t idx = 1, t = T0;
    uint8_t *sa, *sb, *sr;
    size_t la, lb, lr, k;

    ck_assert(a != NULL && b != NULL && r != NULL);
    init_ids();
    bootstrap(a, t);
    bootstrap(b, t);

    /* B: tens of thousands of extra records first (tables grow); A: the
     * same indexes with nothing in them. */
    histories_grow_b(a, b, c, &idx, &t);

    /* The same NONCE records, in opposite orders. */
    idx++;
    t += 1000;
    for (int i = 0; i < N_MAIN; i++) {
        nonce_claim(&c[i], i, 1, 3600000);
    }
    o = apply(a, idx, t, c, N_MAIN);
    for (int i = 0; i < N_MAIN; i++) {
        ck_assert_int_eq(o->o[i], FSM_ACCEPTED);
    }
    for (int i = 0; i < N_MAIN; i++) {
        nonce_claim(&c[i], N_MAIN - 1 - i, 1, 3600000);
    }
    o = apply(b, idx, t, c, N_MAIN);
    for (int i = 0; i < N_MAIN; i++) {
        ck_assert_int_eq(o->o[i], FSM_ACCEPTED);
    }

    /* B forgets every extra record. */
    histories_forget_b(a, b, c, &idx, &t);

    /* IDEMPOTENT records at the same slots in both; B adds short-lived
     * records behind them, which expire and are pruned later. */
    idx++;
    t += 1000;
    for (int i = 0; i < N_IDEM; i++) {
        idem_claim(&c[i], N_MAIN + i, 1, 3600000, 60000);
    }
    o = apply(a, idx, t, c, N_IDEM);
    for (int i = 0; i < N_IDEM; i++) {
        tok_a[i] = o->tok[i];
    }
    for (int i = 0; i < N_SHORT; i++) {
        extra_claim(&c[N_IDEM + i], N_EXTRA + i, 1 + (uint64_t)i % 3000);
    }
    o = apply(b, idx, t, c, N_IDEM + N_SHORT);
    for (int i = 0; i < N_IDEM; i++) {
        tok_b[i] = o->tok[i];
        ck_assert(memcmp(&tok_a[i], &tok_b[i], sizeof tok_a[i]) == 0);
    }

    /* The same later history in both. */
    idx++;
    t += 500;
    k = 0;
    for (int i = 0; i < 10; i++) {
        complete_cmd(&c[k++], N_MAIN + i, tok_a[i], big_result,
                     (size_t)i * 100);
    }
    for (int i = 10; i < 20; i++) {
        release_cmd(&c[k++], N_MAIN + i, tok_a[i], i % 2 == 0, big_error,
                    (size_t)i);
    }
    for (int i = 0; i < 30; i++) {
        nonce_claim(&c[k++], i % 5, 50 + (uint64_t)i, 3600000);
    }
    for (int i = 20; i < 30; i++) {
        idem_claim(&c[k++], N_MAIN + i, 99, 3600000, 60000);
    }
    o = apply(a, idx, t, c, k);
    ck_assert_int_eq(o->o[0], FSM_COMPLETED);
    o = apply(b, idx, t, c, k);
    ck_assert_int_eq(o->o[0], FSM_COMPLETED);

    /* Time passes beyond the short records (and a tick): both prune. */
    idx++;
    t += 10000;
    apply(a, idx, t, c, 0);
    apply(b, idx, t, c, 0);
    ck_assert_uint_eq(fsm_n_records(a), N_MAIN + N_IDEM);
    ck_assert_uint_eq(fsm_n_records(b), N_MAIN + N_IDEM);
    ck_assert_uint_eq(fsm_bytes(a), fsm_bytes(b));

    sa = snap(a, &la);
    sb = snap(b, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_msg(memcmp(sa, sb, la) == 0,
                  "equal record sets, different histories: snapshots differ");
    check_same_state(a, b, N_MAIN + N_IDEM);

    /* A restore (tables sized from scratch) is a third history. */
    restore_ok(r, sb, lb);
    sr = snap(r, &lr);
    ck_assert(lr == la && memcmp(sr, sa, la) == 0);
    free(sa);
    free(sb);
    free(sr);
    fsm_free(a);
    fsm_free(b);
    fsm_free(r);
}
END_TEST

/* A max_window raise that has finished settling leaves nothing behind: an
 * instance that went through one and an instance bootstrapped with the
 * raised value, with the same records, time and index, give the same
 * bytes. */
START_TEST(canonical_after_fence_lifts)
{
    struct fsm *a = fsm_new(), *b = fsm_new();
    struct fsm_settings raised;
    struct fsm_cmd c;
    const struct outs *o;
    uint8_t *sa, *sb;
    size_t la, lb;
    uint64_t t = T0;

    ck_assert(a != NULL && b != NULL);
    init_ids();
    make_settings(&raised);
    raised.max_window_ms = 120000;
    bootstrap(a, t);
    bootstrap_with(b, t, &raised);
    /* index 2: A raises max_window (a fence starts); B has it already. */
    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_SETTINGS;
    c.u.settings = raised;
    o = apply(a, 2, t, &c, 1);
    ck_assert_int_eq(o->o[0], FSM_OK);
    apply(b, 2, t, &c, 0);
    ck_assert(memcmp(fsm_settings(a), fsm_settings(b), sizeof raised) == 0);
    /* index 3, past the fence (now > T + max_skew + new window). */
    t += raised.max_skew_ms + raised.max_window_ms + 1;
    nonce_claim(&c, 0, 1, 3600000);
    o = apply(a, 3, t, &c, 1);
    ck_assert_int_eq(o->o[0], FSM_ACCEPTED);
    o = apply(b, 3, t, &c, 1);
    ck_assert_int_eq(o->o[0], FSM_ACCEPTED);
    /* index 4: both behave alike (a ts at the old fence, old window
     * exceeded, new window not). */
    memset(&c, 0, sizeof c);
    nonce_claim(&c, 1, 1, 0);
    c.u.claim.has_ts = true;
    c.u.claim.window_ms = raised.max_window_ms;
    c.u.claim.ts_ms = t - 90000;
    o = apply(a, 4, t, &c, 1);
    ck_assert_int_eq(o->o[0], FSM_ACCEPTED);
    o = apply(b, 4, t, &c, 1);
    ck_assert_int_eq(o->o[0], FSM_ACCEPTED);
    sa = snap(a, &la);
    sb = snap(b, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_msg(memcmp(sa, sb, la) == 0,
                  "a lifted max_window fence still shows in the snapshot");
    free(sa);
    free(sb);
    fsm_free(a);
    fsm_free(b);
}
END_TEST

/* --- a restored instance behaves like the original ------------------------ */

struct known
{
    bool has;
    struct fsm_token tok;
};

START_TEST(restored_behaves_identically)
{
    static struct fsm_cmd c[64];
    static struct outs oa;
    struct fsm *f = fsm_new(), *g = fsm_new();
    struct known known[512];
    uint64_t rng = 0xabad1deaull, idx, t;
    uint8_t *buf, *s1, *s2;
    size_t len, l1, l2;
    int n_ids;

    ck_assert(f != NULL && g != NULL);
    init_ids();
    n_ids = build_rich(f, 200);
    ck_assert_int_le(n_ids, 512);
    memset(known, 0, sizeof known);
    buf = snap(f, &len);
    restore_ok(g, buf, len);
    free(buf);
    idx = fsm_last_index(f);
    t = fsm_now(f);

    for (int b = 0; b < 400; b++) {
        size_t n = (size_t)(rng_next(&rng) % 40);
        unsigned step = (unsigned)(rng_next(&rng) % 100);
        const struct outs *o;

        if (step < 30) {
            t += 0;
        } else if (step < 80) {
            t += rng_next(&rng) % 3000;
        } else if (step < 97) {
            t += rng_next(&rng) % 120000;
        } else {
            t += 1800000 + rng_next(&rng) % 3600000;
        }
        for (size_t i = 0; i < n; i++) {
            int id = (int)(rng_next(&rng) % (uint64_t)n_ids);
            unsigned r = (unsigned)(rng_next(&rng) % 100);
            uint64_t rid = rng_next(&rng) % 4;

            if (r < 30) {
                nonce_claim(&c[i], id, rid, 1 + rng_next(&rng) % 200000);
                if (rng_next(&rng) % 4 == 0) {
                    c[i].u.claim.has_ts = true;
                    c[i].u.claim.ts_ms = t - rng_next(&rng) % 150000;
                    c[i].u.claim.window_ms = 1 + rng_next(&rng) % 120000;
                }
            } else if (r < 55) {
                idem_claim(&c[i], id, rid, 1 + rng_next(&rng) % 200000,
                           rng_next(&rng) % 20000);
            } else if (r < 68) {
                complete_cmd(&c[i], id, known[id].tok, big_result,
                             (size_t)(rng_next(&rng) % 100));
            } else if (r < 80) {
                release_cmd(&c[i], id, known[id].tok, rng_next(&rng) % 2,
                            big_error, (size_t)(rng_next(&rng) % 50));
            } else if (r < 92) {
                ident_cmd(&c[i], FSM_CMD_LOOKUP, id);
            } else if (r < 96) {
                ident_cmd(&c[i], FSM_CMD_FORGET, id);
            } else {
                memset(&c[i], 0, sizeof c[i]);
                c[i].type = FSM_CMD_SET_SETTINGS;
                make_settings(&c[i].u.settings);
                c[i].u.settings.max_window_ms = 30000 + rng_next(&rng) % 200000;
                c[i].u.settings.max_records = 150 + rng_next(&rng) % 300;
            }
        }
        idx++;
        o = apply(f, idx, t, c, n);
        memcpy(&oa, o, sizeof oa);
        for (size_t i = 0; i < n; i++) {
            int id = -1;

            if (c[i].type == FSM_CMD_CLAIM) {
                /* identities are recovered from the key text */
                for (int k = 0; k < n_ids; k++) {
                    const uint8_t *sc, *ky;
                    size_t sl, kl;

                    ident_of(k, &sc, &sl, &ky, &kl);
                    if (sl == c[i].u.claim.scope_len &&
                        kl == c[i].u.claim.key_len &&
                        memcmp(sc, c[i].u.claim.scope, sl) == 0 &&
                        memcmp(ky, c[i].u.claim.key, kl) == 0) {
                        id = k;
                        break;
                    }
                }
            }
            if (id >= 0 && oa.o[i] == FSM_ACCEPTED) {
                known[id].has = true;
                known[id].tok = oa.tok[i];
            }
        }
        o = apply(g, idx, t, c, n);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(oa.digest[i] == o->digest[i],
                          "batch %d cmd %zu (type %d): original %s, "
                          "restored %s",
                          b, i, (int)c[i].type, fsm_outcome_name(oa.o[i]),
                          fsm_outcome_name(o->o[i]));
        }
        s1 = snap(f, &l1);
        s2 = snap(g, &l2);
        ck_assert_msg(l1 == l2 && memcmp(s1, s2, l1) == 0,
                      "batch %d: snapshots differ", b);
        free(s1);
        free(s2);
    }
    check_same_state(f, g, n_ids);
    fsm_free(f);
    fsm_free(g);
}
END_TEST

/* --- corrupt snapshots ---------------------------------------------------- */

START_TEST(truncated_refused)
{
    struct fsm *f = fsm_new(), *t;
    uint8_t *buf, *before;
    size_t len, before_len;

    ck_assert_ptr_nonnull(f);
    init_ids();
    build_small(f);
    buf = snap(f, &len);
    t = make_target();
    before = snap(t, &before_len);
    for (size_t n = 0; n < len; n++) {
        /* An exact-size copy, so that ASan sees any read past the end. */
        uint8_t *p = malloc(n ? n : 1);

        ck_assert_ptr_nonnull(p);
        memcpy(p, buf, n);
        restore_refused(t, p, n, before, before_len, W_MALFORMED | W_CHECKSUM,
                        "truncated", n);
        free(p);
    }
    /* And the whole thing still restores. */
    restore_ok(t, buf, len);
    free(before);
    free(buf);
    fsm_free(t);
    fsm_free(f);
}
END_TEST

/* A single flipped bit anywhere is caught (CRC-32C detects every one-bit
 * error). Inside the two version words the implementation reports the
 * version first when the corrupted header names a newer one, so SCHEMA is
 * allowed there, and only when the flipped value is newer. */
START_TEST(bitflip_refused)
{
    struct fsm *f = fsm_new(), *t;
    uint8_t *buf, *before;
    size_t len, before_len;

    ck_assert_ptr_nonnull(f);
    init_ids();
    build_small(f);
    buf = snap(f, &len);
    t = make_target();
    before = snap(t, &before_len);
    for (size_t pos = 0; pos < len; pos++) {
        int bits = pos < 64 || pos + 64 >= len ? 8 : 1;

        for (int k = 0; k < bits; k++) {
            int bit = bits == 8 ? k : (int)(pos % 8);
            unsigned want = W_MALFORMED | W_CHECKSUM;

            buf[pos] ^= (uint8_t)(1u << bit);
            if (pos >= SNAP_FORMAT_OFF && pos < SNAP_FORMAT_OFF + 4 &&
                get_u32(buf + SNAP_FORMAT_OFF) > 1) {
                want |= W_SCHEMA;
            }
            if (pos >= SNAP_SCHEMA_OFF && pos < SNAP_SCHEMA_OFF + 4 &&
                get_u32(buf + SNAP_SCHEMA_OFF) > FSM_SCHEMA_VERSION) {
                want |= W_SCHEMA;
            }
            restore_refused(t, buf, len, before, before_len, want, "bit flip",
                            pos);
            buf[pos] ^= (uint8_t)(1u << bit);
        }
    }
    restore_ok(t, buf, len);
    free(before);
    free(buf);
    fsm_free(t);
    fsm_free(f);
}
END_TEST

START_TEST(newer_version_refused)
{
    struct fsm *f = fsm_new(), *t;
    uint8_t *buf, *before;
    size_t len, before_len;
    uint32_t format, schema;

    ck_assert_ptr_nonnull(f);
    init_ids();
    build_small(f);
    buf = snap(f, &len);
    format = get_u32(buf + SNAP_FORMAT_OFF);
    schema = get_u32(buf + SNAP_SCHEMA_OFF);
    ck_assert_uint_eq(schema, FSM_SCHEMA_VERSION);
    ck_assert_uint_ge(format, 1);
    t = make_target();
    before = snap(t, &before_len);

    /* Sanity: recomputing the CRC of unchanged bytes is a no-op. */
    fix_crc(buf, len);
    {
        struct fsm *u = fsm_new();

        ck_assert_ptr_nonnull(u);
        restore_ok(u, buf, len);
        fsm_free(u);
    }

    /* Formats 2 (a restore fence) and 3 (quotas) are known; 4 is the first
     * unknown one. A format-1 state read as format 2 or 3 lacks their
     * fields: malformed. */
    ck_assert_uint_eq(format, 1);
    put_u32(buf + SNAP_FORMAT_OFF, 4);
    fix_crc(buf, len);
    restore_refused(t, buf, len, before, before_len, W_SCHEMA, "newer format",
                    SNAP_FORMAT_OFF);
    put_u32(buf + SNAP_FORMAT_OFF, 2);
    fix_crc(buf, len);
    restore_refused(t, buf, len, before, before_len, W_MALFORMED,
                    "format 2 without a fence", SNAP_FORMAT_OFF);
    put_u32(buf + SNAP_FORMAT_OFF, 3);
    fix_crc(buf, len);
    restore_refused(t, buf, len, before, before_len, W_MALFORMED,
                    "format 3 without its fence flag and quotas",
                    SNAP_FORMAT_OFF);
    put_u32(buf + SNAP_FORMAT_OFF, UINT32_MAX);
    fix_crc(buf, len);
    restore_refused(t, buf, len, before, before_len, W_SCHEMA, "format 2^32-1",
                    SNAP_FORMAT_OFF);
    put_u32(buf + SNAP_FORMAT_OFF, 0);
    fix_crc(buf, len);
    restore_refused(t, buf, len, before, before_len, W_MALFORMED, "format 0",
                    SNAP_FORMAT_OFF);
    put_u32(buf + SNAP_FORMAT_OFF, format);

    put_u32(buf + SNAP_SCHEMA_OFF, FSM_SCHEMA_VERSION + 1);
    fix_crc(buf, len);
    restore_refused(t, buf, len, before, before_len, W_SCHEMA, "newer schema",
                    SNAP_SCHEMA_OFF);
    put_u32(buf + SNAP_SCHEMA_OFF, FSM_SCHEMA_VERSION);

    /* A newer version behind a stale CRC is still a version problem. */
    put_u32(buf + SNAP_SCHEMA_OFF, FSM_SCHEMA_VERSION + 7);
    restore_refused(t, buf, len, before, before_len, W_SCHEMA | W_CHECKSUM,
                    "newer schema, old crc", SNAP_SCHEMA_OFF);
    put_u32(buf + SNAP_SCHEMA_OFF, FSM_SCHEMA_VERSION);

    /* Back to the original: accepted. */
    fix_crc(buf, len);
    restore_ok(t, buf, len);
    free(before);
    free(buf);
    fsm_free(t);
    fsm_free(f);
}
END_TEST

/* Whether any byte within @d of @pos (in [0, @len)) is non-zero. */
static bool near_nonzero(const uint8_t *buf, size_t len, size_t pos, size_t d)
{
    size_t lo = pos > d ? pos - d : 0, hi = pos + d < len ? pos + d : len - 1;

    for (size_t i = lo; i <= hi; i++) {
        if (buf[i] != 0) {
            return true;
        }
    }
    return false;
}

/* Byte changes behind a recomputed CRC: restore either refuses (MALFORMED,
 * or SCHEMA for a newer version, target unchanged) or accepts, and then
 * the bytes it accepted must be canonical, i.e. exactly what a snapshot of
 * the restored state gives. */
START_TEST(valid_crc_mutations)
{
    struct fsm *f = fsm_new(), *t;
    uint8_t *buf, *before;
    size_t len, before_len;
    uint64_t n_ok = 0;

    ck_assert_ptr_nonnull(f);
    init_ids();
    build_small(f);
    buf = snap(f, &len);
    t = make_target();
    before = snap(t, &before_len);
    for (size_t pos = 0; pos + 4 < len; pos++) {
        /* Most of a small snapshot is the 4096 empty partition counts; a
         * restore that parses costs a whole instance, so sample those
         * zeros and take every byte near anything else. */
        if (!near_nonzero(buf, len - 4, pos, 2) && pos % 127 != 0) {
            continue;
        }
        for (int m = 0; m < 2; m++) {
            uint8_t orig = buf[pos];
            uint8_t v = m == 0 ? (uint8_t)(orig ^ (1u << (pos % 8))) : 0;
            char errmsg[256] = "";
            int rv;

            if (v == orig) {
                continue;
            }
            buf[pos] = v;
            fix_crc(buf, len);
            rv = fsm_restore(t, buf, len, errmsg);
            if (rv == 0) {
                size_t l2;
                uint8_t *again = snap(t, &l2);

                ck_assert_msg(l2 == len && memcmp(again, buf, len) == 0,
                              "byte %zu = 0x%02x: accepted (%zu bytes) but "
                              "not canonical (re-encodes to %zu bytes)",
                              pos, v, len, l2);
                n_ok++;
                /* The target now holds this state: refusals from here on
                 * must leave it as it is. */
                free(before);
                before = again;
                before_len = l2;
            } else {
                ck_assert_msg(rv == FSM_E_MALFORMED || rv == FSM_E_SCHEMA,
                              "byte %zu = 0x%02x: %d (%s)", pos, v, rv, errmsg);
                if (rv == FSM_E_SCHEMA) {
                    ck_assert(pos >= SNAP_FORMAT_OFF &&
                              pos < SNAP_SCHEMA_OFF + 4);
                }
                {
                    size_t l2;
                    uint8_t *after = snap(t, &l2);

                    ck_assert_msg(
                        l2 == before_len && memcmp(after, before, l2) == 0,
                        "byte %zu: target changed", pos);
                    free(after);
                }
            }
            buf[pos] = orig;
        }
    }
    fix_crc(buf, len);
    restore_ok(t, buf, len);
    /* Some changes are legitimate states (a time, an address byte). */
    ck_assert_uint_gt(n_ok, 0);
    free(before);
    free(buf);
    fsm_free(t);
    fsm_free(f);
}
END_TEST

/* Garbage of every small length: never a crash, never accepted. */
START_TEST(garbage_refused)
{
    struct fsm *t;
    uint8_t *before;
    size_t before_len;
    uint64_t rng = 42;

    init_ids();
    t = make_target();
    before = snap(t, &before_len);
    for (size_t n = 0; n < 2000; n += 1 + n / 16) {
        uint8_t *p = malloc(n ? n : 1);

        ck_assert_ptr_nonnull(p);
        for (size_t i = 0; i < n; i++) {
            p[i] = (uint8_t)rng_next(&rng);
        }
        if (n >= 8) {
            memcpy(p, "ONCESNAP", 8);
        }
        restore_refused(t, p, n, before, before_len,
                        W_MALFORMED | W_CHECKSUM | W_SCHEMA, "garbage", n);
        if (n >= 8) {
            fix_crc(p, n);
            restore_refused(t, p, n, before, before_len, W_MALFORMED | W_SCHEMA,
                            "garbage, valid crc", n);
        }
        free(p);
    }
    free(before);
    fsm_free(t);
}
END_TEST

Suite *snapshot_suite(void)
{
    Suite *s = suite_create("snapshot");
    TCase *tc;

    tc = tcase_create("roundtrip");
    tcase_add_test(tc, roundtrip_rich);
    tcase_add_test(tc, roundtrip_empty);
    tcase_add_test(tc, roundtrip_unbootstrapped);
    suite_add_tcase(s, tc);

    tc = tcase_create("canonical");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, canonical_histories);
    tcase_add_test(tc, canonical_after_fence_lifts);
    tcase_add_test(tc, restored_behaves_identically);
    suite_add_tcase(s, tc);

    tc = tcase_create("corrupt");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, truncated_refused);
    tcase_add_test(tc, bitflip_refused);
    tcase_add_test(tc, newer_version_refused);
    tcase_add_test(tc, valid_crc_mutations);
    tcase_add_test(tc, garbage_refused);
    suite_add_tcase(s, tc);
    return s;
}
