/* make_corpus: writes the seed corpus of fuzz_batch (tests/fuzz/corpus/batch).
 *
 * Not part of the build. From a configured build tree without sanitizers
 * ($B below; `make libonce_core.la` there first):
 *
 *   gcc -std=c11 -O1 -I src -I $B/proto tests/fuzz/make_corpus.c \
 *       $B/.libs/libonce_core.a $(pkg-config --libs libprotobuf-c openssl) \
 *       -o /tmp/make_corpus
 *   /tmp/make_corpus tests/fuzz/corpus/batch
 *
 * (run from the top of the source tree). With a sanitizer build, add the
 * same -fsanitize flags to the gcc line.
 *
 * Each seed is in fuzz_batch's input format: one flag byte (bit 0:
 * bootstrap first; bits 1-2: settings variant), then batches, each a
 * little-endian u16 length and the bytes of a Batch made with
 * command_encode/command_encode_batch. fuzz_batch bootstraps with group id
 * 1 and applies the first batch at index 2, so the owner token of a claim
 * accepted in the k-th batch (k from 0) at slot s is (1, 2 + k, s). The
 * seeds are deterministic: rerunning the program rewrites the same files. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"
#include "fsm/fsm.h"

#define T0       1700000000000ull
#define MAX_CMDS 64

/* Flag byte values. */
#define BOOT_SMALL_RECORDS 0x01 /* max_records 16 */
#define BOOT_SMALL_BYTES   0x03 /* max_bytes 4 KiB */
#define BOOT_TINY          0x05 /* ms windows, short ttl and lease */
#define BOOT_DEFAULTS      0x07
#define NO_BOOT            0x00

struct seed
{
    uint8_t buf[1 << 16];
    size_t len;
    /* the batch being built */
    uint8_t *cmds[MAX_CMDS];
    size_t lens[MAX_CMDS];
    size_t n;
    uint64_t time;
};

static void die(const char *what, int rv)
{
    fprintf(stderr, "make_corpus: %s: %d\n", what, rv);
    exit(1);
}

static void seed_begin(struct seed *s, uint8_t flags)
{
    s->buf[0] = flags;
    s->len = 1;
    s->n = 0;
    s->time = T0;
}

static void add_raw(struct seed *s, const uint8_t *p, size_t len)
{
    if (s->n == MAX_CMDS) {
        die("too many commands", 0);
    }
    s->cmds[s->n] = malloc(len ? len : 1);
    if (s->cmds[s->n] == NULL) {
        die("malloc", -ENOMEM);
    }
    memcpy(s->cmds[s->n], p, len);
    s->lens[s->n] = len;
    s->n++;
}

static void add(struct seed *s, const struct fsm_cmd *c)
{
    int rv;

    if (s->n == MAX_CMDS) {
        die("too many commands", 0);
    }
    rv = command_encode(c, &s->cmds[s->n], &s->lens[s->n]);
    if (rv != 0) {
        die("command_encode", rv);
    }
    s->n++;
}

static void put_chunk(struct seed *s, const uint8_t *p, size_t len)
{
    if (s->len + 2 + len > sizeof s->buf || len > 0xffff) {
        die("seed too big", 0);
    }
    s->buf[s->len++] = (uint8_t)len;
    s->buf[s->len++] = (uint8_t)(len >> 8);
    memcpy(s->buf + s->len, p, len);
    s->len += len;
}

/* Close the current batch with @schema at log time s->time. */
static void end_batch_schema(struct seed *s, uint32_t schema)
{
    uint8_t *out;
    size_t len;
    int rv =
        command_encode_batch(schema, s->time, (const uint8_t *const *)s->cmds,
                             s->lens, s->n, &out, &len);

    if (rv != 0) {
        die("command_encode_batch", rv);
    }
    put_chunk(s, out, len);
    free(out);
    for (size_t i = 0; i < s->n; i++) {
        free(s->cmds[i]);
    }
    s->n = 0;
}

static void end_batch(struct seed *s)
{
    end_batch_schema(s, FSM_SCHEMA_VERSION);
}

static void seed_write(struct seed *s, const char *dir, const char *name)
{
    char path[512];
    FILE *fp;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    fp = fopen(path, "wb");
    if (fp == NULL || fwrite(s->buf, 1, s->len, fp) != s->len ||
        fclose(fp) != 0) {
        perror(path);
        exit(1);
    }
}

/* --- command builders ----------------------------------------------------- */

static const char *g_scope = "orders";
static const char *g_scope2 = "b";

static void rid(uint8_t out[FSM_REQUEST_ID_LEN], unsigned n)
{
    for (int i = 0; i < FSM_REQUEST_ID_LEN; i++) {
        out[i] = (uint8_t)(n * 31 + i);
    }
}

static struct fsm_cmd claim(const char *scope,
                            const char *key,
                            unsigned r,
                            enum fsm_kind kind,
                            uint64_t ttl)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_CLAIM;
    c.u.claim.scope = (const uint8_t *)scope;
    c.u.claim.scope_len = strlen(scope);
    c.u.claim.key = (const uint8_t *)key;
    c.u.claim.key_len = strlen(key);
    rid(c.u.claim.request_id, r);
    c.u.claim.kind = kind;
    c.u.claim.ttl_ms = ttl;
    c.u.claim.execution_id = (const uint8_t *)"job-7";
    c.u.claim.execution_id_len = 5;
    if (kind == FSM_KIND_IDEMPOTENT) {
        c.u.claim.payload_hash = (const uint8_t *)"sha256:payload-digest";
        c.u.claim.payload_hash_len = 21;
    }
    return c;
}

static struct fsm_cmd with_ts(struct fsm_cmd c, uint64_t ts, uint64_t window)
{
    c.u.claim.has_ts = true;
    c.u.claim.ts_ms = ts;
    c.u.claim.window_ms = window;
    return c;
}

static struct fsm_token tok(uint64_t index, uint32_t slot)
{
    struct fsm_token t = {1, index, slot};

    return t;
}

static struct fsm_cmd complete(const char *key,
                               struct fsm_token t,
                               const char *result)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_COMPLETE;
    c.u.complete.scope = (const uint8_t *)g_scope;
    c.u.complete.scope_len = strlen(g_scope);
    c.u.complete.key = (const uint8_t *)key;
    c.u.complete.key_len = strlen(key);
    c.u.complete.owner_token = t;
    c.u.complete.result = (const uint8_t *)result;
    c.u.complete.result_len = strlen(result);
    return c;
}

static struct fsm_cmd release(const char *key,
                              struct fsm_token t,
                              bool terminal,
                              const char *error)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_RELEASE;
    c.u.release.scope = (const uint8_t *)g_scope;
    c.u.release.scope_len = strlen(g_scope);
    c.u.release.key = (const uint8_t *)key;
    c.u.release.key_len = strlen(key);
    c.u.release.owner_token = t;
    c.u.release.terminal = terminal;
    c.u.release.error = (const uint8_t *)error;
    c.u.release.error_len = strlen(error);
    return c;
}

static struct fsm_cmd ident(enum fsm_cmd_type type,
                            const char *scope,
                            const char *key)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = type;
    c.u.ident.scope = (const uint8_t *)scope;
    c.u.ident.scope_len = strlen(scope);
    c.u.ident.key = (const uint8_t *)key;
    c.u.ident.key_len = strlen(key);
    return c;
}

static struct fsm_cmd settings(uint64_t window,
                               uint64_t skew,
                               uint64_t ttl,
                               uint64_t lease,
                               uint64_t records,
                               uint64_t bytes)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_SETTINGS;
    c.u.settings.max_window_ms = window;
    c.u.settings.max_skew_ms = skew;
    c.u.settings.max_ttl_ms = ttl;
    c.u.settings.max_lease_ms = lease;
    c.u.settings.max_records = records;
    c.u.settings.max_bytes = bytes;
    return c;
}

static struct fsm_cmd member(uint64_t id, enum fsm_role role)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_MEMBER;
    c.u.member.id = id;
    snprintf(c.u.member.raft_addr, sizeof c.u.member.raft_addr,
             "10.0.0.%u:7000", (unsigned)id);
    snprintf(c.u.member.client_addr, sizeof c.u.member.client_addr,
             "10.0.0.%u:7001", (unsigned)id);
    c.u.member.role = role;
    return c;
}

static struct fsm_cmd retire(uint64_t id)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_RETIRE_MEMBER;
    c.u.retire_id = id;
    return c;
}

static struct fsm_cmd schema(uint32_t v)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_SET_SCHEMA;
    c.u.schema_version = v;
    return c;
}

static struct fsm_cmd bootstrap_cmd(struct fsm_bootstrap *b)
{
    struct fsm_cmd c;

    memset(b, 0, sizeof *b);
    for (int i = 0; i < FSM_CLUSTER_ID_LEN; i++) {
        b->cluster_id[i] = (uint8_t)(0xa0 + i);
        b->hash_key[i] = (uint8_t)(0x11 * i);
    }
    b->group_id = 1;
    b->n_members = 1;
    b->members[0].id = 1;
    strcpy(b->members[0].raft_addr, "127.0.0.1:7000");
    strcpy(b->members[0].client_addr, "127.0.0.1:7001");
    b->members[0].role = FSM_ROLE_VOTER;
    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_BOOTSTRAP;
    c.u.bootstrap = b;
    return c;
}

/* --- the seeds ------------------------------------------------------------ */

/* 01: an empty batch. */
static void seed_empty_batch(struct seed *s, const char *dir)
{
    seed_begin(s, BOOT_DEFAULTS);
    end_batch(s);
    seed_write(s, dir, "01-empty-batch");
}

/* 02: NONCE claims with a ttl, then their replays and retries. */
static void seed_nonce_ttl(struct seed *s, const char *dir)
{
    char key[32];
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    for (unsigned i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "nonce-%u", i);
        c = claim(g_scope, key, i, FSM_KIND_NONCE, 60000);
        add(s, &c);
    }
    end_batch(s);
    s->time += 1000;
    c = claim(g_scope, "nonce-0", 0, FSM_KIND_NONCE, 60000); /* retry */
    add(s, &c);
    c = claim(g_scope, "nonce-1", 99, FSM_KIND_NONCE, 60000); /* replay */
    add(s, &c);
    c = claim(g_scope2, "nonce-1", 99, FSM_KIND_NONCE, 60000); /* other scope */
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "02-nonce-ttl");
}

/* 03: NONCE claims with ts and window: inside, at both edges, stale,
 * future. */
static void seed_nonce_window(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    s->time = T0 + 60000;
    c = with_ts(claim(g_scope, "ts-in", 1, FSM_KIND_NONCE, 0), s->time, 30000);
    add(s, &c);
    c = with_ts(claim(g_scope, "ts-old-edge", 2, FSM_KIND_NONCE, 0),
                s->time - 30000, 30000);
    add(s, &c);
    c = with_ts(claim(g_scope, "ts-stale", 3, FSM_KIND_NONCE, 0),
                s->time - 30001, 30000);
    add(s, &c);
    c = with_ts(claim(g_scope, "ts-skew-edge", 4, FSM_KIND_NONCE, 0),
                s->time + 30000, 30000);
    add(s, &c);
    c = with_ts(claim(g_scope, "ts-future", 5, FSM_KIND_NONCE, 0),
                s->time + 30001, 30000);
    add(s, &c);
    c = with_ts(claim(g_scope, "ts-and-ttl", 6, FSM_KIND_NONCE, 3600000),
                s->time, 1);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "03-nonce-window");
}

/* 04: IDEMPOTENT claim, retry, IN_PROGRESS, complete, DUPLICATE. */
static void seed_idempotent_complete(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "pay-1", 1, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    end_batch(s);
    s->time += 100;
    c = claim(g_scope, "pay-1", 1, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    c = claim(g_scope, "pay-1", 2, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    c = complete("pay-1", tok(2, 0), "{\"status\":\"charged\"}");
    add(s, &c);
    c = complete("pay-1", tok(2, 0), "ignored");
    add(s, &c);
    c = claim(g_scope, "pay-1", 3, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    c = ident(FSM_CMD_LOOKUP, g_scope, "pay-1");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "04-idempotent-complete");
}

/* 05: release (not terminal), takeover, stale token NOT_OWNER. */
static void seed_release_takeover(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "job-a", 1, FSM_KIND_IDEMPOTENT, 600000);
    c.u.claim.lease_ms = 5000;
    add(s, &c);
    end_batch(s);
    s->time += 10;
    c = release("job-a", tok(2, 0), false, "");
    add(s, &c);
    c = release("job-a", tok(2, 0), false, "");
    add(s, &c);
    c = claim(g_scope, "job-a", 2, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    c = complete("job-a", tok(2, 0), "late");
    add(s, &c);
    c = complete("job-a", tok(3, 2), "done");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "05-release-takeover");
}

/* 06: terminal release: FAILED stored, later claims FAILED. */
static void seed_release_terminal(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "job-b", 1, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    c = release("job-b", tok(2, 0), true, "card declined");
    add(s, &c);
    c = release("job-b", tok(2, 0), true, "again");
    add(s, &c);
    c = claim(g_scope, "job-b", 9, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    c = complete("job-b", tok(2, 0), "too late");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "06-release-terminal");
}

/* 07: lease expiry: IN_PROGRESS, then a takeover after the lease. */
static void seed_lease_expiry(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "lease", 1, FSM_KIND_IDEMPOTENT, 600000);
    c.u.claim.lease_ms = 2000;
    add(s, &c);
    end_batch(s);
    s->time += 1000;
    c = claim(g_scope, "lease", 2, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    end_batch(s);
    s->time += 5000;
    c = claim(g_scope, "lease", 2, FSM_KIND_IDEMPOTENT, 600000);
    add(s, &c);
    c = complete("lease", tok(2, 0), "fenced");
    add(s, &c);
    c = complete("lease", tok(4, 0), "ok");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "07-lease-expiry");
}

/* 08: lookups and forgets, present and absent. */
static void seed_lookup_forget(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "k1", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    c = claim(g_scope, "k2", 2, FSM_KIND_IDEMPOTENT, 60000);
    add(s, &c);
    c = ident(FSM_CMD_LOOKUP, g_scope, "k1");
    add(s, &c);
    c = ident(FSM_CMD_LOOKUP, g_scope, "absent");
    add(s, &c);
    c = ident(FSM_CMD_FORGET, g_scope, "k1");
    add(s, &c);
    c = ident(FSM_CMD_FORGET, g_scope, "k1");
    add(s, &c);
    c = claim(g_scope, "k1", 3, FSM_KIND_NONCE, 60000);
    add(s, &c);
    c = ident(FSM_CMD_FORGET, g_scope, "k2");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "08-lookup-forget");
}

/* 09: settings: raise max_window (fence), a second raise refused, a
 * lowering, refused settings; claims across the fence. */
static void seed_settings_fence(struct seed *s, const char *dir)
{
    char key[32];
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = settings(600000, 30000, 604800000, 3600000, 1000, 1 << 20);
    add(s, &c);
    c = settings(900000, 30000, 604800000, 3600000, 1000, 1 << 20);
    add(s, &c);
    c = settings(0, 0, 0, 0, 0, 0);
    add(s, &c);
    c = with_ts(claim(g_scope, "fence-old", 1, FSM_KIND_NONCE, 0),
                s->time - 400000, 600000);
    add(s, &c);
    c = with_ts(claim(g_scope, "fence-new", 2, FSM_KIND_NONCE, 0),
                s->time + 20000, 600000);
    add(s, &c);
    end_batch(s);
    s->time += 700000;
    c = settings(60000, 1000, 86400000, 60000, 2, 8192);
    add(s, &c);
    for (unsigned i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "after-%u", i);
        c = claim(g_scope, key, i, FSM_KIND_NONCE, 60000);
        add(s, &c);
    }
    end_batch(s);
    seed_write(s, dir, "09-settings-fence");
}

/* 10: members: add, update, retire, re-add refused, retire again. */
static void seed_members(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = member(3, FSM_ROLE_STANDBY);
    add(s, &c);
    c = member(3, FSM_ROLE_VOTER);
    add(s, &c);
    c = member(4, FSM_ROLE_SPARE);
    add(s, &c);
    c = retire(3);
    add(s, &c);
    c = member(3, FSM_ROLE_VOTER);
    add(s, &c);
    c = retire(3);
    add(s, &c);
    c = retire(77);
    add(s, &c);
    c = member(0, FSM_ROLE_VOTER);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "10-members");
}

/* 11: schema: equal, lower, then newer (the node stops). */
static void seed_schema(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = schema(FSM_SCHEMA_VERSION);
    add(s, &c);
    c = schema(0);
    add(s, &c);
    c = claim(g_scope, "before-stop", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    c = schema(FSM_SCHEMA_VERSION + 1);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "11-schema");
}

/* 12: not bootstrapped: refused, then Bootstrap inside a batch, then a
 * second Bootstrap refused and claims accepted. */
static void seed_unbootstrapped(struct seed *s, const char *dir)
{
    static struct fsm_bootstrap boot;
    struct fsm_cmd c;

    seed_begin(s, NO_BOOT);
    c = claim(g_scope, "early", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    c = ident(FSM_CMD_LOOKUP, g_scope, "early");
    add(s, &c);
    end_batch(s);
    c = bootstrap_cmd(&boot);
    add(s, &c);
    add(s, &c);
    c = claim(g_scope, "early", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "12-unbootstrapped");
}

/* 13: max_records (16) reached: RESOURCE_EXHAUSTED. */
static void seed_max_records(struct seed *s, const char *dir)
{
    char key[32];
    struct fsm_cmd c;

    seed_begin(s, BOOT_SMALL_RECORDS);
    for (unsigned i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "r%u", i);
        c = claim(g_scope2, key, i, FSM_KIND_NONCE, 5000);
        add(s, &c);
    }
    end_batch(s);
    s->time += 7000;
    c = claim(g_scope2, "r19", 19, FSM_KIND_NONCE, 5000);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "13-max-records");
}

/* 14: max_bytes (4 KiB) reached with long identities and results. */
static void seed_max_bytes(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_SMALL_BYTES);
    {
        static char longkey[FSM_KEY_MAX + 1];
        static char longscope[FSM_SCOPE_MAX + 1];

        memset(longscope, 's', FSM_SCOPE_MAX);
        for (unsigned i = 0; i < 12; i++) {
            memset(longkey, 'a' + (int)i, FSM_KEY_MAX);
            c = claim(longscope, longkey, i, FSM_KIND_IDEMPOTENT, 60000);
            add(s, &c);
        }
    }
    end_batch(s);
    seed_write(s, dir, "14-max-bytes");
}

/* 15: tiny windows and leases (settings variant 2). */
static void seed_tiny_settings(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_TINY);
    c = with_ts(claim(g_scope, "tiny", 1, FSM_KIND_NONCE, 0), T0, 10);
    add(s, &c);
    c = claim(g_scope, "tiny-i", 2, FSM_KIND_IDEMPOTENT, 2000);
    c.u.claim.lease_ms = 100;
    add(s, &c);
    c = claim(g_scope, "over", 3, FSM_KIND_NONCE, 2001);
    add(s, &c);
    end_batch(s);
    s->time += 150;
    c = claim(g_scope, "tiny-i", 3, FSM_KIND_IDEMPOTENT, 2000);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "15-tiny-settings");
}

/* 16: malformed envelopes: schema 0, then garbage, then a good one. */
static void seed_malformed(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "m", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    end_batch_schema(s, 0);
    put_chunk(s, (const uint8_t *)"\x1a\xff\x01garbage", 10);
    c = claim(g_scope, "m", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "16-malformed");
}

/* 17: a batch of a newer schema (the node stops). */
static void seed_newer_schema(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "n", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    end_batch_schema(s, FSM_SCHEMA_VERSION + 1);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "17-newer-schema");
}

/* 18: invalid commands between good ones. */
static void seed_invalid_commands(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "ok-1", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    add_raw(s, (const uint8_t *)"\x0a\x05\x01", 3);
    c = claim(g_scope, "no-ttl", 2, FSM_KIND_NONCE, 0);
    add(s, &c);
    c = claim(g_scope, "nonce-lease", 3, FSM_KIND_NONCE, 60000);
    c.u.claim.lease_ms = 10;
    add(s, &c);
    c = claim(g_scope, "window-0", 4, FSM_KIND_NONCE, 0);
    c = with_ts(c, T0, 0);
    add(s, &c);
    add_raw(s, (const uint8_t *)"", 0);
    c = claim(g_scope, "ok-2", 5, FSM_KIND_IDEMPOTENT, 60000);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "18-invalid-commands");
}

/* 19: time: expiry and pruning across batches, a big jump, a stamp
 * from the past. */
static void seed_time(struct seed *s, const char *dir)
{
    char key[32];
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    for (unsigned i = 0; i < 8; i++) {
        snprintf(key, sizeof key, "t%u", i);
        c = claim(g_scope, key, i, i % 2 ? FSM_KIND_NONCE : FSM_KIND_IDEMPOTENT,
                  500 + 1000 * (uint64_t)i);
        add(s, &c);
    }
    end_batch(s);
    s->time += 3000;
    c = claim(g_scope, "t1", 50, FSM_KIND_NONCE, 1000);
    add(s, &c);
    end_batch(s);
    s->time -= 2000;
    c = ident(FSM_CMD_LOOKUP, g_scope, "t7");
    add(s, &c);
    end_batch(s);
    s->time += 30ull * 86400 * 1000;
    c = ident(FSM_CMD_LOOKUP, g_scope, "t7");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "19-time");
}

/* 20: conflicts: kind mismatch, payload hash mismatch, attempts ring. */
static void seed_conflicts(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    c = claim(g_scope, "x", 1, FSM_KIND_NONCE, 60000);
    add(s, &c);
    c = claim(g_scope, "y", 2, FSM_KIND_IDEMPOTENT, 60000);
    add(s, &c);
    c = claim(g_scope, "x", 3, FSM_KIND_IDEMPOTENT, 60000);
    add(s, &c);
    c = claim(g_scope, "y", 4, FSM_KIND_NONCE, 60000);
    add(s, &c);
    c = claim(g_scope, "y", 2, FSM_KIND_IDEMPOTENT, 60000);
    c.u.claim.payload_hash_len = 5;
    add(s, &c);
    for (unsigned i = 0; i < 7; i++) {
        c = claim(g_scope, "x", 10 + i, FSM_KIND_NONCE, 60000);
        add(s, &c);
    }
    c = complete("x", tok(2, 0), "nonce has no owner");
    add(s, &c);
    c = ident(FSM_CMD_LOOKUP, g_scope, "x");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "20-conflicts");
}

/* 21: max_records on default settings reached after a lowering, plus a
 * result of 2 KiB. */
static void seed_lowered_limits(struct seed *s, const char *dir)
{
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    {
        static char big[2049];

        memset(big, 'r', 2048);
        c = claim(g_scope, "big", 1, FSM_KIND_IDEMPOTENT, 60000);
        add(s, &c);
        c = complete("big", tok(2, 0), big);
        add(s, &c);
    }
    c = settings(300000, 30000, 604800000, 3600000, 1, 1 << 20);
    add(s, &c);
    c = claim(g_scope, "no-room", 2, FSM_KIND_NONCE, 60000);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "21-lowered-limits");
}

static struct fsm_cmd quota(const char *pattern,
                            uint64_t max_records,
                            uint64_t max_bytes,
                            bool remove)
{
    struct fsm_cmd c;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_QUOTA_SET;
    c.u.quota.pattern = (const uint8_t *)pattern;
    c.u.quota.pattern_len = strlen(pattern);
    c.u.quota.max_records = max_records;
    c.u.quota.max_bytes = max_bytes;
    c.u.quota.remove = remove;
    return c;
}

/* 22: quotas (schema 2): a prefix pattern on records, an exact one on
 * bytes, claims over both, a complete over the quota, refused patterns, a
 * remove (twice); then expiry frees the quota. */
static void seed_quotas(struct seed *s, const char *dir)
{
    struct fsm_cmd c;
    char key[32];

    seed_begin(s, BOOT_DEFAULTS);
    c = quota("o*", 3, 0, false); /* slot 0 */
    add(s, &c);
    c = quota("orders", 0, 150000, false);
    add(s, &c);
    c = quota("a*b", 1, 0, false);
    add(s, &c);
    c = quota("z", 0, 0, false);
    add(s, &c);
    for (unsigned i = 0; i < 5; i++) { /* slots 4..8: two refused */
        snprintf(key, sizeof key, "q-%u", i);
        c = claim("ops", key, i, FSM_KIND_NONCE, 5000);
        add(s, &c);
    }
    for (unsigned i = 0; i < 3; i++) { /* slots 9..11: one refused */
        snprintf(key, sizeof key, "i-%u", i);
        c = claim(g_scope, key, 10 + i, FSM_KIND_IDEMPOTENT, 5000);
        add(s, &c);
    }
    c = complete("i-0", tok(2, 9), "done");
    add(s, &c);
    end_batch(s);
    s->time += 10000;
    c = quota("orders", 0, 0, true);
    add(s, &c);
    c = quota("orders", 0, 0, true);
    add(s, &c);
    c = claim("ops", "after", 20, FSM_KIND_NONCE, 5000);
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "22-quotas");
}

/* 23: N-use nonces (uses, a retry, REPLAYED, CONFLICT, out of range) and a
 * sliding idempotency record renewed by a DUPLICATE (schema 3). */
static void seed_nuse(struct seed *s, const char *dir)
{
    static const unsigned rids[] = {1, 2, 1, 3, 4, 2};
    struct fsm_cmd c;

    seed_begin(s, BOOT_DEFAULTS);
    for (size_t i = 0; i < sizeof rids / sizeof rids[0]; i++) { /* 0..5 */
        c = claim("inv", "link", rids[i], FSM_KIND_NONCE, 60000);
        c.u.claim.max_uses = 3;
        add(s, &c);
    }
    c = claim("inv", "link", 5, FSM_KIND_NONCE, 60000); /* CONFLICT */
    c.u.claim.max_uses = 2;
    add(s, &c);
    c = claim("inv", "big", 6, FSM_KIND_NONCE, 60000); /* INVALID */
    c.u.claim.max_uses = FSM_MAX_USES + 1;
    add(s, &c);
    c = claim(g_scope, "pay-s", 10, FSM_KIND_IDEMPOTENT, 5000); /* slot 8 */
    c.u.claim.sliding = true;
    add(s, &c);
    c = complete("pay-s", tok(2, 8), "ok");
    add(s, &c);
    end_batch(s);
    s->time += 3000;
    c = claim(g_scope, "pay-s", 11, FSM_KIND_IDEMPOTENT, 5000);
    add(s, &c);
    c = ident(FSM_CMD_LOOKUP, "inv", "link");
    add(s, &c);
    end_batch(s);
    seed_write(s, dir, "23-nuse");
}

/* Every seed, in the order of their file names. */
static void (*const seeds[])(struct seed *, const char *) = {
    seed_empty_batch,
    seed_nonce_ttl,
    seed_nonce_window,
    seed_idempotent_complete,
    seed_release_takeover,
    seed_release_terminal,
    seed_lease_expiry,
    seed_lookup_forget,
    seed_settings_fence,
    seed_members,
    seed_schema,
    seed_unbootstrapped,
    seed_max_records,
    seed_max_bytes,
    seed_tiny_settings,
    seed_malformed,
    seed_newer_schema,
    seed_invalid_commands,
    seed_time,
    seed_conflicts,
    seed_lowered_limits,
    seed_quotas,
    seed_nuse,
};

int main(int argc, char **argv)
{
    static struct seed s;

    if (argc != 2) {
        fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        seeds[i](&s, argv[1]);
    return 0;
}
