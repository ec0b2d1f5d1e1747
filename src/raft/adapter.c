/* raft/adapter.c: struct raft_fsm (version 2) over struct fsm.
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
 * canonical, checksummed snapshot. It is taken synchronously on the loop
 * (v2): at 1M records that is ~0.1 s, at 10M ~3.7 s (README figures); an
 * asynchronous v3 snapshot needs a frozen copy of the table first. */
#include <stdio.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "raft/entry.h"
#include "raft/guard.h"
#include "raft/replica.h"

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
        replica_logf(
            rep, "error",
            "entry %llu does not decode (%s): skipped on every "
            "replica",
            (unsigned long long)ctx.index,
            rv == ENTRY_E_MALFORMED ? "bad entry framing" : fsm_strerror(rv));
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

static int adapter_snapshot(struct raft_fsm *rf,
                            struct raft_buffer *bufs[],
                            unsigned *n_bufs)
{
    struct replica *rep = rf->data;
    struct raft *r = rep->raft;
    struct raft_buffer *b;
    size_t fsm_len;
    uint8_t *p;
    int rv;

    rv = guard_g5_check(r);
    if (rv != 0) {
        rep->stats.snapshots_busy++;
        return rv;
    }
    /* G6: read by raft after this returns (putSnapshot, takeSnapshotCb). */
    raft_set_snapshot_trailing(
        r, guard_g6_trailing(r, rep->config.snapshot_trailing));

    fsm_len = fsm_snapshot_size(rep->fsm);
    b = raft_malloc(sizeof *b);
    p = raft_malloc(SNAP_HDR + fsm_len);
    if (b == NULL || p == NULL) {
        raft_free(b);
        raft_free(p);
        return RAFT_NOMEM; /* transient: raft tries again later */
    }
    le_put32(p, SNAP_MAGIC);
    le_put32(p + 4, SNAP_VERSION);
    le_put64(p + 8, rep->digest);
    le_put64(p + 16, fsm_len);
    fsm_snapshot_write(rep->fsm, p + SNAP_HDR, fsm_len);
    b->base = p;
    b->len = SNAP_HDR + fsm_len;
    *bufs = b;
    *n_bufs = 1;
    rep->stats.snapshots_taken++;
    return 0;
}

/* Version 2: raft no longer frees snapshot buffers; this is always called. */
static int adapter_snapshot_finalize(struct raft_fsm *rf,
                                     struct raft_buffer *bufs[],
                                     unsigned *n_bufs)
{
    (void)rf;
    if (*bufs != NULL) {
        for (unsigned i = 0; i < *n_bufs; i++) {
            raft_free((*bufs)[i].base);
        }
        raft_free(*bufs);
    }
    *bufs = NULL;
    *n_bufs = 0;
    return 0;
}

static int adapter_restore(struct raft_fsm *rf, struct raft_buffer *buf)
{
    struct replica *rep = rf->data;
    char errmsg[256] = "";
    const uint8_t *p = buf->base;
    uint64_t fsm_len;
    int rv;

    if (buf->len < SNAP_HDR || le_get32(p) != SNAP_MAGIC) {
        snprintf(errmsg, sizeof errmsg, "not a snapshot of ours");
        rv = FSM_E_MALFORMED;
    } else if (le_get32(p + 4) != SNAP_VERSION) {
        snprintf(errmsg, sizeof errmsg, "snapshot format %u is unknown",
                 le_get32(p + 4));
        rv = FSM_E_SCHEMA;
    } else if ((fsm_len = le_get64(p + 16)) != buf->len - SNAP_HDR) {
        snprintf(errmsg, sizeof errmsg, "snapshot length mismatch");
        rv = FSM_E_MALFORMED;
    } else {
        rv = fsm_restore(rep->fsm, p + SNAP_HDR, fsm_len, errmsg);
    }
    if (rv != 0) {
        /* At start raft_start fails and the node refuses to start; a bad
         * snapshot from the leader is corruption: stop. */
        replica_logf(rep, "error", "snapshot restore refused: %s", errmsg);
        if (rep->started) {
            replica_fatal(rep, "restore", RAFT_MALFORMED, errmsg);
        }
        return RAFT_MALFORMED;
    }
    rep->digest = le_get64(p + 8);
    rep->stats.snapshots_restored++;
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

void adapter_setup(struct replica *rep)
{
    struct raft_fsm *f = &rep->raft_fsm;

    memset(f, 0, sizeof *f);
    f->version = 2;
    f->data = rep;
    f->apply = adapter_apply;
    f->snapshot = adapter_snapshot;
    f->restore = adapter_restore;
    f->snapshot_finalize = adapter_snapshot_finalize;
}
