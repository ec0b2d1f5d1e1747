/* bench-fsm: throughput and memory of the claim state machine (make
 * bench-fsm; BENCH_FSM_ARGS="--records 1000000 --json" make bench-fsm).
 *
 * Applies N NONCE claims (32-byte keys from a fixed generator, scope "b",
 * ttl 24 h) in batches through fsm_apply, the path the raft adapter uses:
 * batches are encoded ahead in chunks, outside the timed region, and the
 * timed region is decode + apply. Then it writes a snapshot, restores it
 * into a fresh instance and checks that the restored instance writes the
 * same bytes. Reports applies/s (wall and CPU time of one core), bytes per
 * live record (fsm_memory, and RSS growth for comparison), snapshot size and
 * time, and restore time. Single-threaded, like the raft loop, except for
 * the frozen view figures: fsm_freeze (the longest of --rounds), then
 * fsm_frozen_write on a second thread while the main thread applies
 * --during new claims (the longest single apply meanwhile, and the extra
 * bytes the view held by then), and the two steps of a restore
 * (fsm_restore_build, then fsm_restore_commit over a full instance). The
 * steady state also shows the longest single apply while pruning's
 * backlog (FSM_PRUNE_BUDGET visits per batch) is freed during the refill,
 * and what setting and removing a quota costs (each walks every record). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "fsm/command.h"
#include "fsm/fsm.h"

#define T0        1700000000000ull
#define TTL_MS    (24ull * 3600 * 1000)
#define KEY_LEN   32
#define CHUNK_MAX (1u << 20) /* claims encoded ahead at a time */

struct opts
{
    uint64_t records;
    size_t batch;
    bool json;
    uint64_t rounds; /* fsm_freeze rounds */
    uint64_t during; /* claims applied while the view is written */
};

static void usage(FILE *fp, const char *argv0)
{
    fprintf(fp,
            "usage: %s [--records N] [--batch N] [--rounds N] [--during N]\n"
            "       [--json] [--help]\n"
            "\n"
            "Applies N NONCE claims (32-byte keys, scope \"b\", ttl 24 h) in\n"
            "batches through fsm_apply, then snapshots and restores.\n"
            "\n"
            "  --records N  claims to apply (default 10000000)\n"
            "  --batch N    commands per batch, 1..%u (default 256)\n"
            "  --rounds N   fsm_freeze/fsm_release rounds (default 20)\n"
            "  --during N   claims applied during fsm_frozen_write\n"
            "               (default 1000000)\n"
            "  --json       print one JSON object instead of text\n"
            "  --help       this text\n",
            argv0, (unsigned)FSM_BATCH_COMMANDS_MAX);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s == '\0' || *s == '-') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

/* 0 to run, 1 after --help, 2 on a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    o->records = 10000000;
    o->batch = 256;
    o->json = false;
    o->rounds = 20;
    o->during = 1000000;
    for (int i = 1; i < argc; i++) {
        uint64_t v;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout, argv[0]);
            return 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            o->json = true;
        } else if (strcmp(argv[i], "--records") == 0) {
            if (!parse_u64(i + 1 < argc ? argv[++i] : NULL, &v) || v == 0 ||
                v > (1ull << 28)) {
                fprintf(stderr, "%s: --records needs 1..2^28\n", argv[0]);
                return 2;
            }
            o->records = v;
        } else if (strcmp(argv[i], "--rounds") == 0 ||
                   strcmp(argv[i], "--during") == 0) {
            bool rounds = strcmp(argv[i], "--rounds") == 0;
            if (!parse_u64(i + 1 < argc ? argv[++i] : NULL, &v) ||
                v > (1u << 28) || (rounds && v == 0)) {
                fprintf(stderr, "%s: %s needs %s..2^28\n", argv[0],
                        rounds ? "--rounds" : "--during", rounds ? "1" : "0");
                return 2;
            }
            if (rounds) {
                o->rounds = v;
            } else {
                o->during = v;
            }
        } else if (strcmp(argv[i], "--batch") == 0) {
            if (!parse_u64(i + 1 < argc ? argv[++i] : NULL, &v) || v == 0 ||
                v > FSM_BATCH_COMMANDS_MAX) {
                fprintf(stderr, "%s: --batch needs 1..%u\n", argv[0],
                        (unsigned)FSM_BATCH_COMMANDS_MAX);
                return 2;
            }
            o->batch = (size_t)v;
        } else {
            fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], argv[i]);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    return 0;
}

/* --- clocks and memory ---------------------------------------------------- */

static double now_s(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Resident set size in bytes, from /proc/self/statm (0 if unavailable). */
static uint64_t rss_bytes(void)
{
    unsigned long long size, resident;
    FILE *fp = fopen("/proc/self/statm", "r");
    int n;

    if (fp == NULL) {
        return 0;
    }
    n = fscanf(fp, "%llu %llu", &size, &resident);
    fclose(fp);
    if (n != 2) {
        return 0;
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* --- workload ------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Key and request id of claim @i: random-looking, distinct, reproducible. */
static void claim_bytes(uint64_t i,
                        uint8_t key[KEY_LEN],
                        uint8_t rid[FSM_REQUEST_ID_LEN])
{
    uint64_t s = i * 0x632be59bd9b4e019ull + 1;

    for (int w = 0; w < KEY_LEN / 8; w++) {
        uint64_t v = splitmix64(&s);
        memcpy(key + 8 * w, &v, 8);
    }
    /* The last 8 bytes are the index itself: keys never collide. */
    memcpy(key + KEY_LEN - 8, &i, 8);
    for (int w = 0; w < FSM_REQUEST_ID_LEN / 8; w++) {
        uint64_t v = splitmix64(&s);
        memcpy(rid + 8 * w, &v, 8);
    }
}

struct chunk
{
    size_t n_batches;
    uint8_t **bufs;
    size_t *lens;
};

static void die(const char *what, int rv)
{
    fprintf(stderr, "bench-fsm: %s: %d (%s)\n", what, rv, fsm_strerror(rv));
    exit(1);
}

/* Encode claims [first, first + n) as batches of @batch commands; batch k
 * of the run (global numbering from @first_batch) is stamped T0 + k ms. */
static void encode_chunk(struct chunk *c,
                         uint64_t first,
                         uint64_t n,
                         size_t batch,
                         uint64_t t_base,
                         uint64_t first_batch)
{
    uint8_t **cmds = malloc(batch * sizeof *cmds);
    size_t *cmd_lens = malloc(batch * sizeof *cmd_lens);
    uint8_t key[KEY_LEN];
    struct fsm_cmd cmd;
    uint64_t done = 0;

    c->n_batches = (size_t)((n + batch - 1) / batch);
    c->bufs = malloc(c->n_batches * sizeof *c->bufs);
    c->lens = malloc(c->n_batches * sizeof *c->lens);
    if (cmds == NULL || cmd_lens == NULL || c->bufs == NULL ||
        c->lens == NULL) {
        die("out of memory", -ENOMEM);
    }
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_CLAIM;
    cmd.u.claim.scope = (const uint8_t *)"b";
    cmd.u.claim.scope_len = 1;
    cmd.u.claim.key = key;
    cmd.u.claim.key_len = KEY_LEN;
    cmd.u.claim.kind = FSM_KIND_NONCE;
    cmd.u.claim.ttl_ms = TTL_MS;
    for (size_t b = 0; b < c->n_batches; b++) {
        size_t k = 0;
        int rv;

        for (; k < batch && done < n; k++, done++) {
            claim_bytes(first + done, key, cmd.u.claim.request_id);
            rv = command_encode(&cmd, &cmds[k], &cmd_lens[k]);
            if (rv != 0) {
                die("command_encode", rv);
            }
        }
        rv = command_encode_batch(FSM_SCHEMA_VERSION, t_base + first_batch + b,
                                  (const uint8_t *const *)cmds, cmd_lens, k,
                                  &c->bufs[b], &c->lens[b]);
        if (rv != 0) {
            die("command_encode_batch", rv);
        }
        for (size_t j = 0; j < k; j++) {
            free(cmds[j]);
        }
    }
    free(cmds);
    free(cmd_lens);
}

static void free_chunk(struct chunk *c)
{
    for (size_t b = 0; b < c->n_batches; b++) {
        free(c->bufs[b]);
    }
    free(c->bufs);
    free(c->lens);
}

struct counts;
static void count_cb(void *arg, size_t i, const struct fsm_result *r);

/* Apply @records claims, keys from @first_key, batch k stamped
 * @t_base + k ms; adds the time spent in fsm_apply to *wall and *cpu, and
 * keeps the longest single apply in *@max_apply (may be NULL). Returns the
 * number of batches. */
static uint64_t run_claims(struct fsm *f,
                           const struct opts *o,
                           uint64_t records,
                           double *max_apply,
                           uint64_t first_key,
                           uint64_t t_base,
                           uint64_t *index,
                           struct counts *counts,
                           double *wall,
                           double *cpu)
{
    uint64_t done = 0, n_batches = 0;

    while (done < records) {
        struct chunk c;
        uint64_t n = records - done;
        double t0, c0;

        if (n > CHUNK_MAX) {
            n = CHUNK_MAX - CHUNK_MAX % o->batch;
        }
        encode_chunk(&c, first_key + done, n, o->batch, t_base, n_batches);
        t0 = now_s(CLOCK_MONOTONIC);
        c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
        for (size_t b = 0; b < c.n_batches; b++) {
            double a0 = max_apply != NULL ? now_s(CLOCK_MONOTONIC) : 0;
            int rv = fsm_apply(f, (*index)++, c.bufs[b], c.lens[b], count_cb,
                               counts);
            if (rv != 0) {
                die("fsm_apply", rv);
            }
            if (max_apply != NULL && now_s(CLOCK_MONOTONIC) - a0 > *max_apply) {
                *max_apply = now_s(CLOCK_MONOTONIC) - a0;
            }
        }
        *wall += now_s(CLOCK_MONOTONIC) - t0;
        *cpu += now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        n_batches += c.n_batches;
        done += n;
        free_chunk(&c);
    }
    return n_batches;
}

struct counts
{
    uint64_t accepted;
    uint64_t other;
    enum fsm_outcome first_other;
};

static void count_cb(void *arg, size_t i, const struct fsm_result *r)
{
    struct counts *c = arg;

    (void)i;
    if (r->outcome == FSM_ACCEPTED) {
        c->accepted++;
    } else if (c->other++ == 0) {
        c->first_other = r->outcome;
    }
}

static void bootstrap(struct fsm *f, uint64_t records)
{
    static struct fsm_bootstrap b;
    struct fsm_cmd c;
    struct counts n = {0};
    int rv;

    memset(&b, 0, sizeof b);
    for (int i = 0; i < FSM_CLUSTER_ID_LEN; i++) {
        b.cluster_id[i] = (uint8_t)(i + 1);
        b.hash_key[i] = (uint8_t)(0x3c ^ (i * 7));
    }
    b.group_id = 1;
    fsm_settings_default(&b.settings);
    if (b.settings.max_records < records) {
        b.settings.max_records = records;
    }
    b.settings.max_bytes = 16ull << 30; /* the ceiling: never the limit */
    b.n_members = 1;
    b.members[0].id = 1;
    strcpy(b.members[0].raft_addr, "127.0.0.1:7000");
    strcpy(b.members[0].client_addr, "127.0.0.1:7001");
    b.members[0].role = FSM_ROLE_VOTER;
    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_BOOTSTRAP;
    c.u.bootstrap = &b;
    rv = fsm_apply_cmds(f, 1, FSM_SCHEMA_VERSION, T0, &c, 1, count_cb, &n);
    if (rv != 0 || n.other != 1 || n.first_other != FSM_OK) {
        die("bootstrap", rv);
    }
}

/* --- frozen views and two-step restore ------------------------------------ */

struct view_figs
{
    double freeze_max_s;
    double release_max_s;
    double frozen_write_s;
    double during_wall_s;
    double during_apply_max_s;
    uint64_t extra_bytes;
    bool frozen_same;
    double build_s;
    double commit_s;
};

struct writer
{
    struct fsm_frozen *z;
    uint8_t *buf;
    size_t len;
    double s;
};

static void *write_view(void *arg)
{
    struct writer *w = arg;
    double t0 = now_s(CLOCK_MONOTONIC);

    fsm_frozen_write(w->z, w->buf, w->len);
    w->s = now_s(CLOCK_MONOTONIC) - t0;
    return NULL;
}

/* Freeze @f (whose snapshot is @snap) --rounds times, then write a view on
 * a thread while --during claims (keys from @first_key, stamped from
 * @t_base) are applied. */
static void bench_views(struct fsm *f,
                        const struct opts *o,
                        const uint8_t *snap,
                        size_t snap_len,
                        uint64_t first_key,
                        uint64_t t_base,
                        uint64_t *index,
                        struct view_figs *v)
{
    struct counts counts = {0};
    struct writer w;
    pthread_t t;
    double t0, cpu = 0;
    uint64_t extra;
    int rv;

    for (uint64_t r = 0; r < o->rounds; r++) {
        t0 = now_s(CLOCK_MONOTONIC);
        rv = fsm_freeze(f, &w.z);
        if (rv != 0) {
            die("fsm_freeze", rv);
        }
        if (now_s(CLOCK_MONOTONIC) - t0 > v->freeze_max_s) {
            v->freeze_max_s = now_s(CLOCK_MONOTONIC) - t0;
        }
        t0 = now_s(CLOCK_MONOTONIC);
        fsm_release(f, w.z);
        if (now_s(CLOCK_MONOTONIC) - t0 > v->release_max_s) {
            v->release_max_s = now_s(CLOCK_MONOTONIC) - t0;
        }
    }
    rv = fsm_freeze(f, &w.z);
    if (rv != 0) {
        die("fsm_freeze", rv);
    }
    w.len = fsm_frozen_size(w.z);
    w.buf = malloc(w.len);
    if (w.buf == NULL || w.len != snap_len) {
        die("frozen view buffer", -ENOMEM);
    }
    memset(w.buf, 0, w.len); /* resident, as a reused buffer would be */
    if (pthread_create(&t, NULL, write_view, &w) != 0) {
        die("pthread_create", -EAGAIN);
    }
    (void)run_claims(f, o, o->during, &v->during_apply_max_s, first_key, t_base,
                     index, &counts, &v->during_wall_s, &cpu);
    extra = fsm_frozen_extra_bytes(f);
    if (pthread_join(t, NULL) != 0) {
        die("pthread_join", -EINVAL);
    }
    v->extra_bytes = extra;
    v->frozen_write_s = w.s;
    v->frozen_same = memcmp(w.buf, snap, snap_len) == 0;
    fsm_release(f, w.z);
    free(w.buf);
    if (counts.other != 0) {
        die("claims during the view: not ACCEPTED", 0);
    }
}

/* Restore @snap in two steps over @g, a full instance. */
static void bench_restore_steps(struct fsm *g,
                                const uint8_t *snap,
                                size_t snap_len,
                                struct view_figs *v)
{
    char errmsg[ERR_MSG_SIZE];
    struct fsm *fresh;
    double t0 = now_s(CLOCK_MONOTONIC);
    int rv = fsm_restore_build(snap, snap_len, &fresh, errmsg);

    v->build_s = now_s(CLOCK_MONOTONIC) - t0;
    if (rv != 0) {
        fprintf(stderr, "bench-fsm: restore build: %s\n", errmsg);
        exit(1);
    }
    t0 = now_s(CLOCK_MONOTONIC);
    rv = fsm_restore_commit(g, fresh);
    v->commit_s = now_s(CLOCK_MONOTONIC) - t0;
    if (rv != 0) {
        die("fsm_restore_commit", rv);
    }
}

/* --- main ----------------------------------------------------------------- */

/* Every figure main reports. */
struct figs
{
    uint64_t n_batches;
    double wall, cpu; /* the first fill, in fsm_apply */
    uint64_t rss0, rss1, n_records, memory, bytes;
    double snap_size_s, snap_write_s, snap_warm_s, restore_s;
    size_t snap_len;
    bool same; /* the restored instance writes the same bytes */
    struct view_figs views;
    uint64_t pruned;
    double prune_s;
    double wall2, cpu2, refill_max; /* the refill */
    uint64_t backlog_left, memory2;
    double quota_set_s, quota_remove_s; /* each walks every record */
    uint64_t quota_records;             /* the quota's usage after its set */
};

/* Fill @f with --records claims and measure it. Returns 0, or 1 when a
 * claim was not ACCEPTED (said on stderr). */
static int fill(struct fsm *f,
                const struct opts *o,
                uint64_t *index,
                struct figs *r)
{
    struct counts counts = {0};

    r->n_batches = run_claims(f, o, o->records, NULL, 0, T0, index, &counts,
                              &r->wall, &r->cpu);
    if (counts.other != 0) {
        fprintf(stderr,
                "bench-fsm: %" PRIu64 " claims not ACCEPTED (first: %s)\n",
                counts.other, fsm_outcome_name(counts.first_other));
        return 1;
    }
#ifdef __GLIBC__
    malloc_trim(0); /* hand back what the encoded batches used */
#endif
    r->rss1 = rss_bytes();
    r->n_records = fsm_n_records(f);
    r->memory = fsm_memory(f);
    r->bytes = fsm_bytes(f);
    return 0;
}

/* Write @f's snapshot into *@snap (the caller frees it), twice. */
static void snapshot(struct fsm *f, uint8_t **snap, struct figs *r)
{
    double t0 = now_s(CLOCK_MONOTONIC);

    r->snap_len = fsm_snapshot_size(f);
    r->snap_size_s = now_s(CLOCK_MONOTONIC) - t0;
    *snap = malloc(r->snap_len);
    if (*snap == NULL) {
        die("out of memory (snapshot)", -ENOMEM);
    }
    t0 = now_s(CLOCK_MONOTONIC);
    fsm_snapshot_write(f, *snap, r->snap_len);
    r->snap_write_s = now_s(CLOCK_MONOTONIC) - t0;
    /* Again into the same, now resident, buffer: what a node that keeps its
     * snapshot buffer between snapshots pays (the first write also pays the
     * kernel for every fresh page of the buffer). */
    t0 = now_s(CLOCK_MONOTONIC);
    fsm_snapshot_write(f, *snap, r->snap_len);
    r->snap_warm_s = now_s(CLOCK_MONOTONIC) - t0;
}

/* Restore @snap into a fresh instance, check it writes the same bytes,
 * then time the two-step restore over it. Returns 0, or 1 when the
 * restore failed (said on stderr). */
static int restore(const uint8_t *snap, struct figs *r)
{
    char errmsg[ERR_MSG_SIZE];
    struct fsm *g = fsm_new();
    uint8_t *snap2;
    size_t snap2_len;
    double t0;
    int rv;

    if (g == NULL) {
        die("fsm_new", -ENOMEM);
    }
    t0 = now_s(CLOCK_MONOTONIC);
    rv = fsm_restore(g, snap, r->snap_len, errmsg);
    r->restore_s = now_s(CLOCK_MONOTONIC) - t0;
    if (rv != 0) {
        fprintf(stderr, "bench-fsm: restore: %s (%s)\n", fsm_strerror(rv),
                errmsg);
        return 1;
    }
    snap2_len = fsm_snapshot_size(g);
    snap2 = malloc(snap2_len);
    if (snap2 == NULL) {
        die("out of memory (snapshot)", -ENOMEM);
    }
    fsm_snapshot_write(g, snap2, snap2_len);
    r->same = snap2_len == r->snap_len &&
              memcmp(snap, snap2, r->snap_len) == 0 &&
              fsm_n_records(g) == r->n_records;
    bench_restore_steps(g, snap, r->snap_len, &r->views);
    fsm_free(g);
    free(snap2);
    return 0;
}

/* Steady state: let every record expire (one empty batch past their ttl
 * uncounts them all and starts freeing them, FSM_PRUNE_BUDGET per batch),
 * then apply as many new claims, which finish the freeing and reuse the
 * memory, as a long-running node does. */
/* One QuotaSet of "b*" (every record's scope) at log time @t, timed. */
static double quota_cmd(struct fsm *f, uint64_t *index, uint64_t t, bool rm)
{
    struct fsm_cmd c;
    struct counts n = {0};
    double t0;
    int rv;

    memset(&c, 0, sizeof c);
    c.type = FSM_CMD_QUOTA_SET;
    c.u.quota.pattern = (const uint8_t *)"b*";
    c.u.quota.pattern_len = 2;
    c.u.quota.max_records = rm ? 0 : UINT64_MAX;
    c.u.quota.remove = rm;
    t0 = now_s(CLOCK_MONOTONIC);
    rv = fsm_apply_cmds(f, (*index)++, FSM_SCHEMA_VERSION, t, &c, 1, count_cb,
                        &n);
    t0 = now_s(CLOCK_MONOTONIC) - t0;
    if (rv != 0 || n.other != 1 || n.first_other != FSM_OK) {
        die("quota set", rv);
    }
    return t0;
}

/* Setting and removing a quota rebuild every quota's usage: a walk over
 * all the records (docs/state-machine.md, "Quotas"). */
static void bench_quota(struct fsm *f, uint64_t *index, struct figs *r)
{
    struct fsm_quota_info q;
    uint64_t t = T0 + r->n_batches + 1000;

    r->quota_set_s = quota_cmd(f, index, t, false);
    if (!fsm_quota(f, 0, &q)) {
        die("quota list", 0);
    }
    r->quota_records = q.records;
    r->quota_remove_s = quota_cmd(f, index, t, true);
}

static void refill(struct fsm *f,
                   const struct opts *o,
                   uint64_t *index,
                   struct figs *r)
{
    uint64_t t_refill = T0 + TTL_MS + r->n_batches + 60000;
    struct counts counts2 = {0};
    uint8_t *empty;
    size_t empty_len;
    double t0;
    int rv;

    rv = command_encode_batch(FSM_SCHEMA_VERSION, t_refill, NULL, NULL, 0,
                              &empty, &empty_len);
    if (rv != 0) {
        die("command_encode_batch", rv);
    }
    r->pruned = fsm_n_records(f);
    t0 = now_s(CLOCK_MONOTONIC);
    rv = fsm_apply(f, (*index)++, empty, empty_len, NULL, NULL);
    r->prune_s = now_s(CLOCK_MONOTONIC) - t0;
    free(empty);
    if (rv != 0 || fsm_n_records(f) != 0) {
        die("prune", rv);
    }
    (void)run_claims(f, o, o->records, &r->refill_max, o->records, t_refill + 1,
                     index, &counts2, &r->wall2, &r->cpu2);
    r->backlog_left = fsm_prune_backlog(f);
    if (counts2.other != 0) {
        die("refill: claims not ACCEPTED", 0);
    }
    r->memory2 = fsm_memory(f);
}

static void print_json(const struct opts *o, const struct figs *r)
{
    printf("{\"records\":%" PRIu64 ",\"batch\":%zu,\"batches\":%" PRIu64
           ",\"apply_wall_s\":%.6f,\"apply_cpu_s\":%.6f"
           ",\"applies_per_s_wall\":%.0f,\"applies_per_s_cpu\":%.0f"
           ",\"live_records\":%" PRIu64 ",\"fsm_memory_bytes\":%" PRIu64
           ",\"fsm_bytes\":%" PRIu64
           ",\"bytes_per_record_memory\":%.2f"
           ",\"bytes_per_record_counted\":%.2f"
           ",\"rss_growth_bytes\":%" PRIu64
           ",\"bytes_per_record_rss\":%.2f"
           ",\"snapshot_bytes\":%zu,\"snapshot_size_s\":%.6f"
           ",\"snapshot_write_s\":%.6f,\"snapshot_write_warm_s\":%.6f"
           ",\"restore_s\":%.6f"
           ",\"restore_identical\":%s,\"prune_all_s\":%.6f"
           ",\"refill_applies_per_s_wall\":%.0f"
           ",\"refill_fsm_memory_bytes\":%" PRIu64
           ",\"restore_build_s\":%.6f,\"restore_commit_s\":%.6f"
           ",\"freeze_max_s\":%.6f,\"release_max_s\":%.6f"
           ",\"frozen_write_s\":%.6f,\"during_claims\":%" PRIu64
           ",\"during_apply_max_s\":%.6f"
           ",\"frozen_extra_bytes\":%" PRIu64
           ",\"frozen_identical\":%s"
           ",\"refill_apply_max_s\":%.6f,\"backlog_left\":%" PRIu64
           ",\"quota_set_s\":%.6f,\"quota_remove_s\":%.6f"
           ",\"quota_records\":%" PRIu64 "}\n",
           o->records, o->batch, r->n_batches, r->wall, r->cpu,
           (double)o->records / r->wall, (double)o->records / r->cpu,
           r->n_records, r->memory, r->bytes,
           (double)r->memory / (double)r->n_records,
           (double)r->bytes / (double)r->n_records,
           r->rss1 > r->rss0 ? r->rss1 - r->rss0 : 0,
           (double)(r->rss1 > r->rss0 ? r->rss1 - r->rss0 : 0) /
               (double)r->n_records,
           r->snap_len, r->snap_size_s, r->snap_write_s, r->snap_warm_s,
           r->restore_s, r->same ? "true" : "false", r->prune_s,
           (double)o->records / r->wall2, r->memory2, r->views.build_s,
           r->views.commit_s, r->views.freeze_max_s, r->views.release_max_s,
           r->views.frozen_write_s, o->during, r->views.during_apply_max_s,
           r->views.extra_bytes, r->views.frozen_same ? "true" : "false",
           r->refill_max, r->backlog_left, r->quota_set_s, r->quota_remove_s,
           r->quota_records);
}

static void print_text(const struct opts *o, const struct figs *r)
{
    printf("bench-fsm: %" PRIu64
           " NONCE claims, 32-byte keys, scope "
           "\"b\", ttl 24 h, batches of %zu (%" PRIu64 " batches)\n",
           o->records, o->batch, r->n_batches);
    printf("  apply (decode + apply, one core)\n");
    printf("    wall %10.3f s   %12.0f applies/s\n", r->wall,
           (double)o->records / r->wall);
    printf("    cpu  %10.3f s   %12.0f applies/s\n", r->cpu,
           (double)o->records / r->cpu);
    printf("  memory\n");
    printf("    live records       %12" PRIu64 "\n", r->n_records);
    printf("    fsm_memory         %12" PRIu64 " bytes   %8.2f B/record\n",
           r->memory, (double)r->memory / (double)r->n_records);
    printf("    fsm_bytes          %12" PRIu64
           " bytes   %8.2f B/record (counted against max_bytes)\n",
           r->bytes, (double)r->bytes / (double)r->n_records);
    printf("    RSS growth         %12" PRIu64 " bytes   %8.2f B/record\n",
           r->rss1 > r->rss0 ? r->rss1 - r->rss0 : 0,
           (double)(r->rss1 > r->rss0 ? r->rss1 - r->rss0 : 0) /
               (double)r->n_records);
    printf("  snapshot\n");
    printf("    size               %12zu bytes   %8.2f B/record\n", r->snap_len,
           (double)r->snap_len / (double)r->n_records);
    printf("    fsm_snapshot_size  %10.3f s\n", r->snap_size_s);
    printf("    fsm_snapshot_write %10.3f s   %8.1f MB/s (fresh buffer)\n",
           r->snap_write_s, (double)r->snap_len / 1e6 / r->snap_write_s);
    printf("    fsm_snapshot_write %10.3f s   %8.1f MB/s (reused buffer)\n",
           r->snap_warm_s, (double)r->snap_len / 1e6 / r->snap_warm_s);
    printf("  restore\n");
    printf("    fsm_restore        %10.3f s   %8.1f MB/s\n", r->restore_s,
           (double)r->snap_len / 1e6 / r->restore_s);
    printf("    restored snapshot identical: %s\n", r->same ? "yes" : "NO");
    printf("    fsm_restore_build  %10.3f s   (any thread)\n",
           r->views.build_s);
    printf("    fsm_restore_commit %10.3f s   (over a full instance)\n",
           r->views.commit_s);
    printf("  frozen view\n");
    printf("    fsm_freeze         %10.6f s   (max of %" PRIu64 " rounds)\n",
           r->views.freeze_max_s, o->rounds);
    printf("    fsm_release        %10.6f s   (max, nothing copied)\n",
           r->views.release_max_s);
    printf("    fsm_frozen_write   %10.3f s   (thread, %" PRIu64
           " claims applied meanwhile)\n",
           r->views.frozen_write_s, o->during);
    printf("    claims meanwhile   %10.3f s   longest apply %.6f s\n",
           r->views.during_wall_s, r->views.during_apply_max_s);
    printf("    extra bytes        %12" PRIu64 " bytes   %.2f x fsm_memory\n",
           r->views.extra_bytes,
           (double)r->views.extra_bytes / (double)r->memory);
    printf("    frozen snapshot identical: %s\n",
           r->views.frozen_same ? "yes" : "NO");
    printf("  steady state (all expired, then refilled)\n");
    printf("    expire %" PRIu64
           " at once %7.3f s   (the batch that passes"
           " their tick)\n",
           r->pruned, r->prune_s);
    printf("    refill apply       %10.3f s   %12.0f applies/s\n", r->wall2,
           (double)o->records / r->wall2);
    printf(
        "    longest apply      %10.6f s   (refill, freeing the backlog;"
        " %" PRIu64 " left)\n",
        r->refill_max, r->backlog_left);
    printf("    fsm_memory after   %12" PRIu64 " bytes (pages reused)\n",
           r->memory2);
    printf("  quotas (each change walks every record)\n");
    printf("    quota set \"b*\"     %10.3f s   (%" PRIu64
           " records charged)\n",
           r->quota_set_s, r->quota_records);
    printf("    quota remove       %10.3f s\n", r->quota_remove_s);
}

int main(int argc, char **argv)
{
    struct opts o;
    struct fsm *f;
    struct figs figs = {0};
    uint64_t index = 2;
    uint8_t *snap;
    int rv;

    rv = parse_args(argc, argv, &o);
    if (rv != 0) {
        return rv == 1 ? 0 : 2;
    }
    figs.rss0 = rss_bytes();
    f = fsm_new();
    if (f == NULL) {
        die("fsm_new", -ENOMEM);
    }
    bootstrap(f, o.records);
    if (fill(f, &o, &index, &figs) != 0) {
        return 1;
    }
    snapshot(f, &snap, &figs);
    if (restore(snap, &figs) != 0) {
        return 1;
    }
    bench_views(f, &o, snap, figs.snap_len, 2 * o.records, T0 + figs.n_batches,
                &index, &figs.views);
    bench_quota(f, &index, &figs);
    refill(f, &o, &index, &figs);
    if (o.json) {
        print_json(&o, &figs);
    } else {
        print_text(&o, &figs);
    }
    free(snap);
    fsm_free(f);
    return figs.same && figs.views.frozen_same ? 0 : 1;
}
