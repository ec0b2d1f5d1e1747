/* raft/adapter.c: struct raft_fsm (version 3) over struct fsm.
 *
 * apply: the entry's index is last_applied + 1 (0.15 does not pass it, and
 * inside apply last_applied is still index - 1, B10). A business outcome is
 * never an error: raft would retry a failing entry for ever. An entry that
 * does not decode is the same bytes on every replica, so skipping it is
 * deterministic; it is logged loudly. An entry of a newer schema stops the
 * node (docs/design.md §3.3). Each command's outcome goes to the pipeline,
 * which hands it to the leader's caller if this entry is the batch in flight.
 *
 * snapshot: G5 refuses while a configuration change is uncommitted; G6
 * raises the trailing so the committed configuration entry stays in the
 * log. The snapshot is a small header (with the applied-entry digest, so
 * replicas stay comparable after an InstallSnapshot) and the fsm's
 * canonical, checksummed snapshot. It is taken the fsm v3 way (below):
 * frozen on the loop in bounded time, encoded off it on a thread of lower
 * CPU priority (replica_config.snapshot_nice), released on the loop. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/crc32c.h"
#include "common/le.h"
#include "raft/entry.h"
#include "raft/guard.h"
#include "raft/heap.h"
#include "raft/replica_int.h"

#define SNAP_MAGIC   0x534e4e4fu /* "ONNS" */
#define SNAP_VERSION 1
#define SNAP_HDR     24 /* magic, version, digest, fsm length */

/* The digest chains every applied entry: equal digests at equal applied
 * indexes mean the replicas applied the same commands. */
static uint64_t digest_next(uint64_t d,
                            raft_index index,
                            const void *buf,
                            size_t len)
{
    uint8_t idx[8];
    uint32_t lo, hi;

    le_put64(idx, index);
    lo = crc32c(crc32c((uint32_t)d, idx, sizeof idx), buf, len);
    hi = crc32c((uint32_t)(d >> 32) ^ 0x9e3779b9u, buf, len);
    hi = crc32c(hi, idx, sizeof idx);
    return (uint64_t)hi << 32 | lo;
}

struct apply_ctx
{
    struct replica *rep;
    raft_index index;
};

static void emit_cb(void *arg, size_t i, const struct fsm_result *res)
{
    struct apply_ctx *ctx = arg;
    pipeline_emit(ctx->rep, ctx->index, i, res);
}

static int adapter_apply(struct raft_fsm *rf,
                         const struct raft_buffer *buf,
                         void **result)
{
    struct replica *rep = rf->data;
    struct raft *r = rep->raft;
    struct apply_ctx ctx = {rep, r->last_applied + 1};
    const uint8_t *batch;
    size_t batch_len;
    int rv;

    *result = NULL;
    rep->cb_depth++;
    snap_policy_applied(&rep->snap.policy, buf->len);
    if (snap_policy_due(&rep->snap.policy) && rep->snap.view == NULL) {
        /* raft checks its threshold after this batch: due now. snapshot()
         * sets the next window's threshold. */
        raft_set_snapshot_threshold(r, 1);
    }
    rep->digest = digest_next(rep->digest, ctx.index, buf->base, buf->len);
    if (rep->hooks.applied != NULL) {
        rep->hooks.applied(rep->hooks.arg, ctx.index, buf->base, buf->len);
    }
    rv = entry_unwrap(buf->base, buf->len, &batch, &batch_len);
    if (rv == 0) {
        rv = fsm_apply(rep->fsm, ctx.index, batch, batch_len, emit_cb, &ctx);
    }
    if (rv == FSM_E_SCHEMA) {
        /* Never apply it differently from peers: stop, and discard what the
         * batch may already have changed in memory (fsm.h). */
        replica_fatal(rep, "apply", RAFT_MALFORMED,
                      "log entry of a newer schema than this node knows");
        rep->cb_depth--;
        return RAFT_MALFORMED; /* (test hook returned) raft retries it */
    }
    if (rv != 0) {
        rep->stats.malformed_entries++;
        replica_logf(rep, "error",
                     "entry %llu does not decode (%s): skipped on every "
                     "replica",
                     (unsigned long long)ctx.index,
                     err_str(rv)); /* an ENTRY_E_* or FSM_E_* code */
    }
    if (ctx.index > rep->live_from) {
        ltime_applied(&rep->ltime, fsm_now(rep->fsm),
                      rep->clock.mono_ms(rep->clock.arg));
    }
    if (!rep->retired && rep->id != 0 && fsm_is_retired(rep->fsm, rep->id)) {
        rep->retired = true;
        replica_logf(rep, "warn", "this node's id was retired (removed)");
        if (rep->hooks.retired != NULL) {
            rep->hooks.retired(rep->hooks.arg);
        }
    }
    rep->cb_depth--;
    return 0;
}

/* --- snapshots: fsm v3 ----------------------------------------------------
 *
 * snapshot (loop): G5, then freeze the state at last_applied (bounded time:
 * fsm_freeze copies no record) and decide the policy from its size.
 * snapshot_async (raft's pool): encode the frozen view; apply goes on
 * meanwhile on the loop. snapshot_finalize (loop, always called): free the
 * buffer, release the view. */

void adapter_policy_apply(struct replica *rep)
{
    struct raft *r = rep->raft;
    const struct snap_policy *p = &rep->snap.policy;

    rep->config.snapshot_threshold = p->threshold;
    rep->config.snapshot_trailing = p->trailing;
    raft_set_snapshot_threshold(r, p->threshold);
    raft_set_snapshot_trailing(r, guard_g6_trailing(r, p->trailing));
    if (rep->config.install_snapshot_timeout_ms == 0) {
        raft_set_install_snapshot_timeout(r, p->install_timeout_ms);
    }
}

/* Our header and the frozen view's snapshot into a new buffer at @b. */
static int snapshot_encode(struct replica *rep, struct raft_buffer *b)
{
    size_t fsm_len;
    uint8_t *p;

    ONCE_ASSERT(rep->snap.view != NULL, "snapshot() froze the view to encode");
    fsm_len = fsm_frozen_size(rep->snap.view);
    p = raft_malloc(SNAP_HDR + fsm_len);
    if (p == NULL) {
        return RAFT_NOMEM;
    }
    le_put32(p, SNAP_MAGIC);
    le_put32(p + 4, SNAP_VERSION);
    le_put64(p + 8, rep->snap.digest);
    le_put64(p + 16, fsm_len);
    fsm_frozen_write(rep->snap.view, p + SNAP_HDR, fsm_len);
    b->base = p;
    b->len = SNAP_HDR + fsm_len;
    return 0;
}

int adapter_snapshot_of(const struct fsm *f,
                        uint64_t digest,
                        struct raft_buffer *out)
{
    size_t fsm_len = fsm_snapshot_size(f);
    uint8_t *p = raft_malloc(SNAP_HDR + fsm_len);

    if (p == NULL) {
        return RAFT_NOMEM;
    }
    le_put32(p, SNAP_MAGIC);
    le_put32(p + 4, SNAP_VERSION);
    le_put64(p + 8, digest);
    le_put64(p + 16, fsm_len);
    fsm_snapshot_write(f, p + SNAP_HDR, fsm_len);
    out->base = p;
    out->len = SNAP_HDR + fsm_len;
    return 0;
}

/* CLOCK_MONOTONIC in ns: the snapshot's time breakdown in its log line. */
static uint64_t real_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int adapter_snapshot(struct raft_fsm *rf,
                            struct raft_buffer *bufs[],
                            unsigned *n_bufs)
{
    struct replica *rep = rf->data;
    struct raft *r = rep->raft;
    struct raft_buffer *b;
    struct fsm_frozen *z;
    uint64_t t0;
    int rv;

    rv = guard_g5_check(r);
    if (rv != 0) {
        rep->stats.snapshots_busy++;
        return rv;
    }
    b = raft_calloc(1, sizeof *b);
    if (b == NULL) {
        return RAFT_NOMEM; /* transient: raft tries again later */
    }
    ONCE_ASSERT(rep->snap.view == NULL, "raft takes one snapshot at a time");
    t0 = real_mono_ns();
    rv = fsm_freeze(rep->fsm, &z);
    if (rv != 0) {
        raft_free(b);
        /* FSM_E_BUSY: a state digest holds the one view; retried. */
        return rv == FSM_E_BUSY ? RAFT_BUSY : RAFT_NOMEM;
    }
    rep->snap.view = z;
    rep->snap.index = r->last_applied;
    rep->snap.digest = rep->digest;
    rep->snap.t0_ms = rep->clock.mono_ms(rep->clock.arg);
    rep->snap.freeze_ns = real_mono_ns();
    rep->snap.encode_begin_ns = rep->snap.encode_end_ns = 0;
    /* Threshold and trailing for what follows this snapshot; G6 raises the
     * trailing (read by raft after the put) so the committed configuration
     * entry stays in the log. */
    snap_policy_decide(&rep->snap.policy, SNAP_HDR + fsm_frozen_size(z));
    adapter_policy_apply(rep);
    rep->snap.freeze_loop_ns = real_mono_ns() - t0;
    *bufs = b; /* its base is written by snapshot_async */
    *n_bufs = 1;
    if (rf->snapshot_async == NULL) {
        /* Synchronous (adapter_set_async off): encode here, on the loop. A
         * failing snapshot() is not finalized by raft: undo it here. */
        rv = snapshot_encode(rep, b);
        if (rv != 0) {
            fsm_release(rep->fsm, z);
            rep->snap.view = NULL;
            raft_free(b);
            *bufs = NULL;
            *n_bufs = 0;
        }
        return rv;
    }
    return 0;
}

/* The encoder thread: at the configured nice value, so that encoding (the
 * whole table, seconds at 10 M records) yields the cores to the loops that
 * answer claims. A thread of its own, because a raised nice value cannot be
 * lowered again without privilege: raft's pool thread stays as it was. */
struct encode_job
{
    struct replica *rep;
    struct raft_buffer *buf;
    int rv;
};

/* snapshot_encode with its start and end noted (the pool's thread or the
 * encoder's). */
static int timed_encode(struct replica *rep, struct raft_buffer *b)
{
    int rv;

    rep->snap.encode_begin_ns = real_mono_ns();
    rv = snapshot_encode(rep, b);
    rep->snap.encode_end_ns = real_mono_ns();
    return rv;
}

/* The calling thread's nice value, as the stats report it. */
static int thread_nice(void)
{
    return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
}

static void *encode_main(void *arg)
{
    struct encode_job *j = arg;
    int nice = (int)j->rep->config.snapshot_nice;

    /* A refusal only costs the priority. */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
    j->rep->snap.encoded_nice = thread_nice();
    j->rv = timed_encode(j->rep, j->buf);
    return NULL;
}

/* Raft's thread pool: reads only the view and what snapshot() set. */
static int adapter_snapshot_async(struct raft_fsm *rf,
                                  struct raft_buffer *bufs[],
                                  /* cppcheck-suppress constParameter ;
                                   * raft_fsm's snapshot_async type */
                                  unsigned *n_bufs)
{
    struct replica *rep = rf->data;
    struct encode_job j = {rep, &(*bufs)[0], 0};
    pthread_t t;

    if (*n_bufs != 1) {
        return RAFT_INVALID;
    }
    if (rep->config.snapshot_nice == 0 ||
        pthread_create(&t, NULL, encode_main, &j) != 0) {
        rep->snap.encoded_nice = thread_nice();
        return timed_encode(rep, j.buf);
    }
    pthread_join(t, NULL);
    return j.rv;
}

static void snapshot_release(struct replica *rep, bool encoded)
{
    uint64_t extra = fsm_frozen_extra_bytes(rep->fsm);
    uint64_t ms = rep->clock.mono_ms(rep->clock.arg) - rep->snap.t0_ms;
    uint64_t now = real_mono_ns(), rel_ns;

    fsm_release_with(rep->fsm, rep->snap.view, heap_bg_free_later);
    rep->snap.view = NULL;
    rel_ns = real_mono_ns() - now;

    if (extra > rep->stats.snapshot_extra_max) {
        rep->stats.snapshot_extra_max = extra;
    }
    if (encoded) {
        rep->stats.snapshots_taken++;
        rep->stats.snapshot_last_index = rep->snap.index;
        rep->stats.snapshot_last_bytes = rep->snap.policy.snapshot_bytes;
        rep->stats.snapshot_last_ms = ms;
        rep->stats.snapshot_last_nice = rep->snap.encoded_nice;
        uint64_t f = rep->snap.freeze_ns;
        uint64_t b = rep->snap.encode_begin_ns, e = rep->snap.encode_end_ns;

        if (b < f || e < b || now < e) { /* not through timed_encode */
            b = e = f;
        }
        replica_logf(rep, "info",
                     "snapshot at index %llu: %llu bytes in %llu ms off the "
                     "loop at nice %d (%llu ms waiting for a pool thread, "
                     "%llu ms encoding, %llu ms writing; %llu bytes copied "
                     "meanwhile; on the loop %llu us to freeze, %llu us to "
                     "release); next after %u entries, keeping %u",
                     (unsigned long long)rep->snap.index,
                     (unsigned long long)rep->snap.policy.snapshot_bytes,
                     (unsigned long long)ms, rep->snap.encoded_nice,
                     (unsigned long long)((b - f) / 1000000u),
                     (unsigned long long)((e - b) / 1000000u),
                     (unsigned long long)((now - e) / 1000000u),
                     (unsigned long long)extra,
                     (unsigned long long)(rep->snap.freeze_loop_ns / 1000u),
                     (unsigned long long)(rel_ns / 1000u),
                     rep->snap.policy.threshold, rep->snap.policy.trailing);
    }
}

static int adapter_snapshot_finalize(struct raft_fsm *rf,
                                     struct raft_buffer *bufs[],
                                     unsigned *n_bufs)
{
    struct replica *rep = rf->data;
    bool encoded = false;

    if (*bufs != NULL) {
        for (unsigned i = 0; i < *n_bufs; i++) {
            encoded = encoded || (*bufs)[i].base != NULL;
            raft_free((*bufs)[i].base);
        }
        raft_free(*bufs);
    }
    *bufs = NULL;
    *n_bufs = 0;
    if (rep->snap.view != NULL) {
        snapshot_release(rep, encoded);
    }
    return 0;
}

/* --- restore ---------------------------------------------------------------
 */

/* Our header around the fsm's snapshot: 0 and the fsm part, or an FSM_E_*
 * code with @errmsg set. */
static int parse_snapshot(const struct raft_buffer *buf,
                          const uint8_t **fsm_part,
                          size_t *fsm_len,
                          uint64_t *digest,
                          char *errmsg)
{
    const uint8_t *p = buf->base;

    if (buf->len < SNAP_HDR || le_get32(p) != SNAP_MAGIC) {
        err_printf(errmsg, "not a snapshot of ours");
        return FSM_E_MALFORMED;
    }
    if (le_get32(p + 4) != SNAP_VERSION) {
        err_printf(errmsg, "snapshot format %u is unknown", le_get32(p + 4));
        return FSM_E_SCHEMA;
    }
    if (le_get64(p + 16) != buf->len - SNAP_HDR) {
        err_printf(errmsg, "snapshot length mismatch");
        return FSM_E_MALFORMED;
    }
    *fsm_part = p + SNAP_HDR;
    *fsm_len = buf->len - SNAP_HDR;
    *digest = le_get64(p + 8);
    return 0;
}

int adapter_install_work(void *arg, const struct raft_snapshot *snap)
{
    struct replica *rep = arg;
    struct replica_snap *s = &rep->snap;
    const uint8_t *fsm_part;
    size_t fsm_len;

    if (s->prepared != NULL) {
        /* Built for an install that raft discarded (its put failed). */
        fsm_free(s->prepared);
        s->prepared = NULL;
    }
    s->prepared_base = snap->bufs[0].base;
    s->prepared_msg[0] = '\0';
    s->prepared_rv = parse_snapshot(&snap->bufs[0], &fsm_part, &fsm_len,
                                    &s->prepared_digest, s->prepared_msg);
    if (s->prepared_rv == 0) {
        s->prepared_rv =
            fsm_restore_build(fsm_part, fsm_len, &s->prepared, s->prepared_msg);
    }
    return s->prepared_rv == 0 ? 0 : RAFT_MALFORMED;
}

static void drop_prepared(struct replica *rep)
{
    if (rep->snap.prepared != NULL) {
        fsm_free(rep->snap.prepared);
    }
    rep->snap.prepared = NULL;
    rep->snap.prepared_base = NULL;
}

/* The state of @buf into the fsm: the one built off the loop for this very
 * buffer if there is one, else built here. */
static int restore_state(struct replica *rep,
                         const struct raft_buffer *buf,
                         uint64_t *digest,
                         char *errmsg)
{
    struct replica_snap *s = &rep->snap;
    const uint8_t *fsm_part;
    size_t fsm_len;
    int rv;

    if (s->prepared_base != NULL && s->prepared_base == buf->base) {
        rv = s->prepared_rv;
        memcpy(errmsg, s->prepared_msg, ERR_MSG_SIZE);
        *digest = s->prepared_digest;
        if (rv == 0) {
            rv = fsm_restore_commit(rep->fsm, s->prepared);
        }
        if (rv == 0) {
            s->prepared = NULL; /* consumed */
            rep->stats.restores_prepared++;
        }
        drop_prepared(rep); /* FSM_E_BUSY leaves it ours */
        return rv;
    }
    drop_prepared(rep); /* of an install that was discarded */
    rv = parse_snapshot(buf, &fsm_part, &fsm_len, digest, errmsg);
    if (rv == 0) {
        rv = fsm_restore(rep->fsm, fsm_part, fsm_len, errmsg);
    }
    return rv;
}

static int adapter_restore(struct raft_fsm *rf, struct raft_buffer *buf)
{
    struct replica *rep = rf->data;
    char errmsg[ERR_MSG_SIZE] = "";
    uint64_t digest = 0;
    int rv;

    rv = restore_state(rep, buf, &digest, errmsg);
    if (rv != 0) {
        /* At start raft_start fails and the node refuses to start; a bad
         * snapshot from the leader is corruption: stop. */
        replica_logf(rep, "error", "snapshot restore refused: %s", errmsg);
        if (rep->started) {
            replica_fatal(rep, "restore", RAFT_MALFORMED, errmsg);
        }
        return RAFT_MALFORMED;
    }
    rep->digest = digest;
    rep->stats.snapshots_restored++;
    snap_policy_decide(&rep->snap.policy, buf->len);
    adapter_policy_apply(rep);
    raft_free(buf->base); /* restore owns the buffer on success */
    /* The snapshot may carry this node's own retirement: a node removed
     * while it lagged gets it by InstallSnapshot (the removal's barrier
     * wait is satisfied by a snapshot index past the barrier, and then raft
     * sends it nothing more), or restarts from such a snapshot with no
     * entry after it. apply's check would never run: check here too, else
     * the node lingers as a zombie without a tombstone. (At raft_start the
     * hook runs inside replica_start.) */
    if (!rep->retired && rep->id != 0 && fsm_is_retired(rep->fsm, rep->id)) {
        rep->retired = true;
        replica_logf(rep, "warn",
                     "this node's id was retired (removed): from a snapshot");
        if (rep->hooks.retired != NULL) {
            rep->hooks.retired(rep->hooks.arg);
        }
    }
    return 0;
}

void adapter_close(struct replica *rep)
{
    /* raft closed: no pool work is left that could read these. */
    if (rep->snap.view != NULL) {
        fsm_release(rep->fsm, rep->snap.view);
        rep->snap.view = NULL;
    }
    drop_prepared(rep);
}

void adapter_set_async(struct replica *rep, bool on)
{
    rep->raft_fsm.snapshot_async = on ? adapter_snapshot_async : NULL;
}

void adapter_setup(struct replica *rep)
{
    struct raft_fsm *f = &rep->raft_fsm;

    memset(f, 0, sizeof *f);
    f->version = 3;
    f->data = rep;
    f->apply = adapter_apply;
    f->snapshot = adapter_snapshot;
    f->restore = adapter_restore;
    f->snapshot_finalize = adapter_snapshot_finalize;
    f->snapshot_async = adapter_snapshot_async;
}
