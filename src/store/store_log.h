/* store/store_log.h: the "uring" and "pwrite" store backends (store.h).
 *
 * One store logic (segments, metadata, snapshots, load rules; docs/store.md
 * and store_format.h) over two I/O engines for the hot path, chosen at
 * start:
 *   uring   appends are one O_DIRECT IORING_OP_WRITE with RWF_DSYNC per
 *           group-commit batch (the last partial block rewritten, into the
 *           pre-zeroed segment), or, where the file system has no O_DIRECT,
 *           one IORING_OP_WRITEV linked to one IORING_OP_FSYNC(DATASYNC);
 *           the ring's completions wake the libuv loop through an eventfd
 *           registered with the ring (uv_poll);
 *   pwrite  the same batch is one pwritev + fdatasync on the store's worker
 *           thread, whose completions reach the loop through a uv_async.
 * Both run segment preparation, rollover, truncation and snapshots on the
 * worker thread, so the loop thread does no blocking I/O for appends.
 * load, bootstrap, recover, set_term and set_vote are synchronous by raft's
 * contract and do their I/O on the calling (loop) thread; they are rare.
 *
 * One operation at a time: appends queued while a batch is being written
 * form the next batch (group commit); a truncation or snapshot waits behind
 * everything queued before it. Callbacks run on the loop, strictly in
 * order. After any I/O error the store fails every later call (fail-stop;
 * the decorator aborts the node).
 *
 * Loop thread only. */
#ifndef ONCE_STORE_STORE_LOG_H_
#define ONCE_STORE_STORE_LOG_H_

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "store/store.h"
#include "store/store_sys.h"

enum store_engine {
    STORE_ENGINE_AUTO = 0, /* uring when the kernel allows it, else pwrite */
    STORE_ENGINE_URING,
    STORE_ENGINE_PWRITE,
};

struct store_log_options
{
    enum store_engine engine;
    size_t segment_size; /* bytes per preallocated segment; 0: 8 MiB */
    /* uring only: never O_DIRECT (buffered write + linked fsync even where
     * the file system has O_DIRECT). For tests and measurements. */
    bool no_direct;
    /* Write snapshot files without pacing their writeback
     * (store_snapshot.c). For measurements of what it buys. */
    bool no_snapshot_pacing;
    /* Bytes an old snapshot file is cut down by per step before it is
     * unlinked (store_snapshot.c); 0: 32 MiB. Tests set it small. */
    size_t unlink_step;
    /* Notices worth an operator's attention (a torn tail cut at load, a
     * failed segment preparation). May be NULL. Loop thread. */
    void (*log)(void *arg, const char *level, const char *msg);
    void *log_arg;
    /* A batch of records is durable: @ns from handing it to the engine to
     * its completion (the write and its sync). For metrics; may be NULL.
     * Loop thread; @log_arg is its argument too. */
    void (*synced)(void *arg, uint64_t ns, size_t bytes);
    /* onced --accept-cut-tail: the first load of this open clears a
     * pending cut index (docs/store.md "Load" step 5) durably, logging at
     * error level what that accepts, so that the node votes again. Nothing
     * to clear is logged too. Later loads of the same open are as usual. */
    bool accept_cut_tail;
    /* The seams (store_sys.h), borrowed, outliving the store. NULL:
     * store_sys_posix and store_exec_threads (production). Anything but
     * store_sys_posix needs the "pwrite" engine ("auto" then picks it). */
    const struct store_sys *sys;
    const struct store_exec *exec;
};

/* Whether this process may use io_uring: sets up a ring and runs a NOP
 * through it. 0, or a negative errno with the reason in @why. */
int store_uring_probe(char *why, size_t n);

/* Open (creating it if needed) the store in directory @dir on @loop. The
 * store's name is the engine chosen: "uring" or "pwrite". Returns 0, or a
 * RAFT_* code with @errmsg (256 bytes) set; on failure nothing is left to
 * close. Close with s->ops->close (then @s may be freed). */
int store_log_init(struct store *s,
                   uv_loop_t *loop,
                   const char *dir,
                   const struct store_log_options *o,
                   char *errmsg);

/* Test hook: records written, segments rolled, batches (group commits). */
struct store_log_stats
{
    unsigned long long records, batches, rolls, truncations;
};
void store_log_stats(const struct store *s, struct store_log_stats *out);

/* Test hook: whether appends are O_DIRECT writes (the "uring" engine where
 * the directory's file system has O_DIRECT and no_direct is off), as chosen
 * at store_log_init. Tests assert it, so a case meant to run direct cannot
 * quietly run buffered. */
bool store_log_direct(const struct store *s);
/* Before start, on a store that holds nothing (RAFT_CANTBOOTSTRAP
 * otherwise): make @sn (borrowed) its only state, durable before return,
 * with the term of @sn. What `onced --restore` starts a new cluster from.
 * 0 or a RAFT_* code with s->errmsg. */
int store_log_seed(struct store *s, const struct raft_snapshot *sn);
/* Before start: 0 if the store holds nothing, RAFT_CANTBOOTSTRAP if it
 * holds state, another RAFT_* code if it cannot be read (s->errmsg). */
int store_log_pristine(struct store *s);

#endif /* ONCE_STORE_STORE_LOG_H_ */
