/* store/store_snapshot.c: snapshot put and get (store_int.h).
 *
 * A put is written to tmp-snap and synced, renamed to snap-<term>-<index>,
 * the directory synced; then the snapshots beyond the newest two and the
 * segments it makes unneeded are removed (each removal durable before the
 * next). For a snapshot raft took (trailing > 0) the file is written and
 * synced on the loop's thread pool before the op enters the queue: a
 * snapshot of a large table takes seconds to write, and appends queued
 * behind it would wait as long (every claim of the cluster stalls). The
 * queued part, rename and removals, is short. An installed snapshot
 * (trailing 0) replaces the log and is written whole in the queue. A get
 * opens the newest file on the loop and reads and checks it on the thread
 * pool, for the same reason (a leader reads it for every member it
 * installs); only when that cannot start (no snapshot, closing) does it
 * go through the queue. Queued, a put or get is the only op in flight
 * while it runs (sl->batch).
 * read_snapshot also serves load (store_load.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/crc32c.h"
#include "store/store_format.h"
#include "store/store_int.h"

/* A snapshot's data is written in steps of FLUSH_STEP bytes, each handed
 * to writeback as soon as it is written and the step before it waited for,
 * so the file never has more than two steps of dirty pages. Without it the
 * whole file (hundreds of MB at millions of records) is dirty until the
 * final fdatasync, and the log's own fdatasyncs, one per commit, queue
 * behind that writeback in the file system's journal: every claim of the
 * node waits for the snapshot's disk time. (RocksDB's bytes_per_sync and
 * PostgreSQL's *_flush_after do the same.) sync_file_range promises no
 * durability, only earlier writeback, so its errors only cost the pacing:
 * the fdatasync that follows is what makes the file durable and reports
 * any write error. */
#define FLUSH_STEP (8u << 20)

static void flush_step(const struct store_sys *sys, int fd, uint64_t step_end)
{
    uint64_t start = step_end - FLUSH_STEP;

    (void)sys->sync_file_range(sys, fd, (off_t)start, FLUSH_STEP,
                               SYNC_FILE_RANGE_WRITE);
    if (start >= FLUSH_STEP) {
        (void)sys->sync_file_range(
            sys, fd, (off_t)(start - FLUSH_STEP), FLUSH_STEP,
            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                SYNC_FILE_RANGE_WAIT_AFTER);
    }
}

/* Write @len bytes at *@off, pacing writeback at every FLUSH_STEP boundary
 * of the file crossed. */
static int write_paced(const struct store_sys *sys,
                       int fd,
                       const uint8_t *p,
                       size_t len,
                       uint64_t *off,
                       bool paced)
{
    if (!paced) {
        int err = store_write_all(sys, fd, p, len, *off);
        *off += len;
        return err;
    }
    while (len > 0) {
        uint64_t next = (*off / FLUSH_STEP + 1) * FLUSH_STEP;
        size_t n = len < next - *off ? len : (size_t)(next - *off);
        int err = store_write_all(sys, fd, p, n, *off);

        if (err != 0) {
            return err;
        }
        p += n;
        len -= n;
        *off += n;
        if (*off == next) {
            flush_step(sys, fd, next);
        }
    }
    return 0;
}

/* Write @sn's file (header, configuration, data) to @fd. */
static int write_snap_file(const struct store_sys *sys,
                           int fd,
                           const struct raft_snapshot *sn,
                           bool paced)
{
    struct sf_snap_info info;
    uint8_t hdr[SF_SNAP_HDR];
    uint8_t *conf;
    uint32_t crc;
    uint64_t off;
    int err;

    memset(&info, 0, sizeof info);
    info.term = sn->term;
    info.index = sn->index;
    info.conf_index = sn->configuration_index;
    info.conf_len = sf_conf_size(&sn->configuration);
    for (unsigned i = 0; i < sn->n_bufs; i++) {
        info.data_len += sn->bufs[i].len;
    }
    conf = malloc(info.conf_len);
    if (conf == NULL) {
        return -ENOMEM;
    }
    sf_conf_encode(&sn->configuration, conf);
    sf_snap_header(hdr, &info, 0);
    crc = sf_snap_crc_start(hdr);
    crc = crc32c(crc, conf, info.conf_len);
    for (unsigned i = 0; i < sn->n_bufs; i++) {
        crc = crc32c(crc, sn->bufs[i].base, sn->bufs[i].len);
    }
    sf_snap_header(hdr, &info, crc);
    err = store_write_all(sys, fd, hdr, sizeof hdr, 0);
    off = sizeof hdr;
    if (err == 0) {
        err = store_write_all(sys, fd, conf, info.conf_len, off);
        off += info.conf_len;
    }
    for (unsigned i = 0; err == 0 && i < sn->n_bufs; i++) {
        err = write_paced(sys, fd, sn->bufs[i].base, sn->bufs[i].len, &off,
                          paced);
    }
    free(conf);
    return err;
}

int store_write_tmp_snap(const struct slog *sl,
                         const struct raft_snapshot *sn,
                         const char **what)
{
    const struct store_sys *sys = sl->sys;
    int dirfd = sl->dirfd;
    int fd, err;

    *what = "create";
    fd = sys->openat(sys, dirfd, "tmp-snap",
                     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -errno;
    }
    *what = "write snapshot";
    err = write_snap_file(sys, fd, sn, !sl->o.no_snapshot_pacing);
    if (err == 0 && sys->fdatasync(sys, fd) != 0) {
        err = -errno;
    }
    sys->close(sys, fd);
    return err;
}

/* Worker thread. */
void store_run_put(struct job *j)
{
    const struct store_sys *sys = j->sl->sys;
    int dirfd = j->sl->dirfd;
    const char *what = "write snapshot";
    int err = 0;

    if (!j->u.put.written) {
        err = store_write_tmp_snap(j->sl, j->u.put.snap, &what);
        if (err == -ENOMEM) {
            j->rv = RAFT_NOMEM;
            err_printf(j->err, "out of memory");
            return;
        }
        if (err != 0) {
            store_job_err(
                j, err, what,
                strcmp(what, "create") == 0 ? "tmp-snap" : j->u.put.sname);
            return;
        }
    }
    if (sys->renameat(sys, dirfd, "tmp-snap", dirfd, j->u.put.sname) != 0) {
        err = -errno;
    }
    if (err == 0) {
        err = store_fsync_dir(sys, dirfd);
    }
    if (err != 0) {
        store_job_err(j, err, "write snapshot", j->u.put.sname);
        return;
    }
    store_run_unlinks(j); /* older snapshots, then segments below trailing */
}

static int snap_build(const struct sf_snap_info *info,
                      const uint8_t *conf,
                      void *data,
                      const char *name,
                      struct raft_snapshot **out,
                      char *err)
{
    struct raft_snapshot *sn = raft_calloc(1, sizeof *sn);
    int e;

    if (sn == NULL) {
        err_printf(err, "out of memory reading snapshot %s", name);
        return RAFT_NOMEM;
    }
    raft_configuration_init(&sn->configuration);
    e = sf_conf_decode(conf, info->conf_len, &sn->configuration);
    if (e != 0) {
        err_printf(err, "snapshot %s: bad configuration at offset %u", name,
                   SF_SNAP_HDR);
        goto err_conf;
    }
    sn->bufs = raft_malloc(sizeof *sn->bufs);
    if (sn->bufs == NULL) {
        err_printf(err, "out of memory reading snapshot %s", name);
        e = RAFT_NOMEM;
        goto err_conf;
    }
    sn->term = info->term;
    sn->index = info->index;
    sn->configuration_index = info->conf_index;
    sn->bufs[0].base = data;
    sn->bufs[0].len = info->data_len;
    sn->n_bufs = 1;
    *out = sn;
    return 0;
err_conf:
    raft_configuration_close(&sn->configuration);
    raft_free(sn);
    return e;
}

/* Read and check the snapshot file open at @fd (named @name in messages);
 * @fd stays open. */
static int read_snapshot_fd(const struct store_sys *sys,
                            int fd,
                            const char *name,
                            struct raft_snapshot **out,
                            char *err)
{
    struct sf_snap_info info;
    uint8_t hdr[SF_SNAP_HDR];
    uint8_t *conf = NULL;
    void *data = NULL;
    struct stat st;
    uint32_t crc;
    int e, rv = RAFT_CORRUPT;

    if (sys->fstat(sys, fd, &st) != 0) {
        err_printf(err, "stat snapshot %s: %s", name, strerror(errno));
        return RAFT_IOERR;
    }
    if ((uint64_t)st.st_size < SF_SNAP_HDR ||
        store_read_all(sys, fd, hdr, sizeof hdr, 0) != 0 ||
        sf_snap_header_check(hdr, (uint64_t)st.st_size, &info, &crc) != 0) {
        err_printf(err, "snapshot %s: bad header at offset 0", name);
        goto out;
    }
    conf = malloc(info.conf_len > 0 ? info.conf_len : 1);
    data = raft_malloc(info.data_len > 0 ? info.data_len : 1);
    if (conf == NULL || data == NULL) {
        err_printf(err, "out of memory reading snapshot %s", name);
        rv = RAFT_NOMEM;
        goto out;
    }
    if ((e = store_read_all(sys, fd, conf, info.conf_len, SF_SNAP_HDR)) != 0 ||
        (e = store_read_all(sys, fd, data, info.data_len,
                            SF_SNAP_HDR + info.conf_len)) != 0) {
        err_printf(err, "read snapshot %s: %s", name, strerror(-e));
        rv = RAFT_IOERR;
        goto out;
    }
    if (crc32c(crc32c(sf_snap_crc_start(hdr), conf, info.conf_len), data,
               info.data_len) != crc) {
        err_printf(err, "snapshot %s: bad checksum (offset 12)", name);
        goto out;
    }
    rv = snap_build(&info, conf, data, name, out, err);
    if (rv == 0) {
        data = NULL;
    }
out:
    free(conf);
    raft_free(data);
    return rv;
}

int store_read_snapshot(const struct store_sys *sys,
                        int dirfd,
                        const char *name,
                        struct raft_snapshot **out,
                        char *err)
{
    int fd = sys->openat(sys, dirfd, name, O_RDONLY | O_CLOEXEC, 0);
    int rv;

    if (fd < 0) {
        err_printf(err, "open snapshot %s: %s", name, strerror(errno));
        return RAFT_IOERR;
    }
    rv = read_snapshot_fd(sys, fd, name, out, err);
    sys->close(sys, fd);
    return rv;
}

void store_snapshot_free(struct raft_snapshot *sn)
{
    if (sn != NULL) {
        raft_configuration_close(&sn->configuration);
        for (unsigned i = 0; i < sn->n_bufs; i++) {
            raft_free(sn->bufs[i].base);
        }
        raft_free(sn->bufs);
        raft_free(sn);
    }
}

void store_run_get(struct job *j)
{
    j->rv = store_read_snapshot(j->sl->sys, j->sl->dirfd, j->u.get.sname,
                                &j->u.get.got, j->err);
}

/* --- the loop side ---------------------------------------------------------
 */

/* What a put at @op removes, in order: segments (all, highest first, for
 * an installed snapshot; else those wholly below index - trailing, lowest
 * first, never the last). */
static int put_plan(struct slog *sl, struct job *j, const struct op_put *p)
{
    const struct raft_snapshot *sn = p->snap;
    char name[NAME_LEN];
    uint64_t keep_from;
    int rv = 0;

    /* The snapshot beyond the newest two goes after the put, off the
     * queue (store_put_done). */
    if (p->trailing == 0) {
        for (size_t i = sl->n_segs; rv == 0 && i-- > 0;) {
            store_seg_name(name, sl->segs[i].first);
            rv = store_job_add_unlink(j, name);
        }
        return rv;
    }
    keep_from = sn->index > p->trailing ? sn->index - p->trailing : 0;
    /* A crash midway leaves a contiguous suffix. */
    for (size_t i = 0; rv == 0 && i + 1 < sl->n_segs; i++) {
        if (sl->segs[i + 1].first > keep_from) {
            break;
        }
        store_seg_name(name, sl->segs[i].first);
        rv = store_job_add_unlink(j, name);
    }
    return rv;
}

void store_start_put(struct slog *sl, struct op *op)
{
    const struct raft_snapshot *sn = op->u.put.snap;
    struct job *j = store_job_new(sl, J_PUT);
    int rv;

    if (j == NULL) {
        store_set_failed(sl, RAFT_NOMEM, "out of memory storing a snapshot");
        store_op_done(sl, op, RAFT_NOMEM);
        return;
    }
    ONCE_ASSERT(!sl->busy && sl->batch == NULL, "one op in flight");
    j->u.put.snap = sn;
    j->u.put.written = op->u.put.written;
    store_snap_name(j->u.put.sname, sn->term, sn->index);
    rv = put_plan(sl, j, &op->u.put);
    if (rv != 0) {
        store_job_free(j);
        store_set_failed(sl, rv, "out of memory storing a snapshot");
        store_op_done(sl, op, rv);
        return;
    }
    sl->busy = true;
    sl->batch = op; /* held until the job completes */
    store_job_submit(sl, j);
}

/* Drop the bookkeeping of the segments the put removed from the front. */
static void put_forget_front(struct slog *sl, const struct job *j)
{
    size_t n_snap = j->n_unlink, dropped, gone;
    uint64_t new_base;

    for (size_t i = 0; i < j->n_unlink; i++) {
        if (strncmp(j->unlink[i], "seg-", 4) == 0) {
            n_snap = i;
            break;
        }
    }
    dropped = j->n_unlink - n_snap;
    if (dropped == 0) {
        return;
    }
    ONCE_ASSERTF(dropped < sl->n_segs, "%zu of %zu segments dropped", dropped,
                 sl->n_segs);
    new_base = sl->segs[dropped].first;
    gone = (size_t)(new_base - sl->base);
    if (gone > sl->n_offs) {
        gone = sl->n_offs;
    }
    memmove(sl->segs, sl->segs + dropped,
            (sl->n_segs - dropped) * sizeof *sl->segs);
    sl->n_segs -= dropped;
    memmove(sl->offs, sl->offs + gone, (sl->n_offs - gone) * sizeof *sl->offs);
    sl->n_offs -= gone;
    sl->base = new_base;
}

/* The put or get in flight is over: its op, or NULL when the job failed
 * (then the store is failed and the op completed with the error: a
 * snapshot we wrote that does not write or read back stops the store). */
static struct op *held_op_done(struct slog *sl, struct job *j)
{
    struct op *op = sl->batch;

    ONCE_ASSERT(sl->busy && op != NULL && op->next == NULL &&
                    (op->kind == (j->kind == J_PUT ? OP_PUT : OP_GET)),
                "a put or get job completes the one op held in flight");
    sl->batch = NULL;
    sl->busy = false;
    if (j->rv != 0) {
        store_set_failed(sl, j->rv, j->err);
        store_op_done(sl, op, j->rv);
        return NULL;
    }
    return op;
}

/* The old snapshot a put replaced, removed on the loop's thread pool.
 * Unlinking a file of hundreds of MB takes ext4 a few hundred ms (it frees
 * every extent), and in the queue every append would wait for it: at 10 M
 * records that was the longest window without a claim (355 ms, bench/scale).
 * Off the queue the journal still carries that work, so the file is first
 * cut down from its end in steps of UNLINK_STEP, with a pause after each,
 * the way RocksDB's delete scheduler does: the appends' own syncs get the
 * journal between steps. A file a pool get may still read (one was in
 * flight at the put) is unlinked whole instead, since a get's open
 * descriptor keeps an unlinked file readable but not a truncated one.
 * Nothing waits for the removal: the new snapshot is durable and the old
 * one is no longer named in the store's bookkeeping; if it fails or the
 * node stops first, the next load removes every snapshot beyond the
 * newest two (load_snapshot). The close waits for the work (pool_ops). */
#define UNLINK_STEP     ((off_t)32 << 20)
#define UNLINK_PAUSE_US 10000

struct bg_unlink
{
    uv_work_t work;
    struct slog *sl;
    off_t cut; /* step to cut it down by first; 0: a get may read it */
    char name[NAME_LEN];
};

static void cut_down(const struct store_sys *sys,
                     int dirfd,
                     const char *name,
                     off_t step)
{
    int fd = sys->openat(sys, dirfd, name, O_WRONLY | O_CLOEXEC, 0);
    struct stat st;

    if (fd < 0) {
        return;
    }
    if (sys->fstat(sys, fd, &st) == 0) {
        for (off_t size = st.st_size; size > step;) {
            size -= step;
            if (sys->ftruncate(sys, fd, size) != 0) {
                break; /* the unlink does the rest */
            }
            usleep(UNLINK_PAUSE_US);
        }
    }
    sys->close(sys, fd);
}

static void bg_unlink_work(uv_work_t *w)
{
    struct bg_unlink *u = w->data;

    const struct store_sys *sys = u->sl->sys;

    if (u->cut > 0) {
        cut_down(sys, u->sl->dirfd, u->name, u->cut);
    }
    (void)sys->unlinkat(sys, u->sl->dirfd, u->name, 0); /* else load does */
}

static void bg_unlink_done(uv_work_t *w, int status)
{
    struct bg_unlink *u = w->data;
    struct slog *sl = u->sl;

    (void)status;
    free(u);
    ONCE_ASSERT(sl->pool_ops > 0, "pool_ops counts the work queued");
    sl->pool_ops--;
    store_maybe_shutdown(sl);
}

static void remove_old_snapshot(struct slog *sl, uint64_t term, uint64_t index)
{
    struct bg_unlink *u;

    if (index == 0 || sl->closing || (u = calloc(1, sizeof *u)) == NULL) {
        return; /* the next load removes it */
    }
    u->sl = sl;
    u->work.data = u;
    if (sl->pool_gets == 0) {
        u->cut =
            sl->o.unlink_step != 0 ? (off_t)sl->o.unlink_step : UNLINK_STEP;
    }
    store_snap_name(u->name, term, index);
    if (sl->exec->queue_work(sl->exec, sl, &u->work, bg_unlink_work,
                             bg_unlink_done) != 0) {
        free(u);
        return;
    }
    sl->pool_ops++;
}

void store_put_done(struct slog *sl, struct job *j)
{
    struct op *op = held_op_done(sl, j);
    const struct raft_snapshot *sn;

    if (op == NULL) {
        return;
    }
    sn = op->u.put.snap;
    if (!(sl->snaps[0].term == sn->term && sl->snaps[0].index == sn->index)) {
        if (!(sl->snaps[1].term == sn->term &&
              sl->snaps[1].index == sn->index)) {
            remove_old_snapshot(sl, sl->snaps[1].term, sl->snaps[1].index);
        }
        sl->snaps[1] = sl->snaps[0];
    }
    sl->snaps[0].term = sn->term;
    sl->snaps[0].index = sn->index;
    if (op->u.put.trailing == 0) {
        store_close_current(sl);
        sl->cur_end = sl->cur_cap = 0;
        sl->n_segs = 0;
        sl->base = sn->index + 1;
        sl->n_offs = 0;
    } else {
        put_forget_front(sl, j);
    }
    sl->in_cb = true;
    store_op_done(sl, op, 0);
    sl->in_cb = false;
}

void store_start_get(struct slog *sl, struct op *op)
{
    struct job *j;

    if (sl->snaps[0].index == 0) {
        err_printf(sl->s->errmsg, "no snapshot");
        store_op_done(sl, op, RAFT_NOTFOUND);
        return;
    }
    j = store_job_new(sl, J_GET);
    if (j == NULL) {
        store_op_done(sl, op, RAFT_NOMEM);
        return;
    }
    store_snap_name(j->u.get.sname, sl->snaps[0].term, sl->snaps[0].index);
    ONCE_ASSERT(!sl->busy && sl->batch == NULL, "one op in flight");
    sl->busy = true;
    sl->batch = op;
    store_job_submit(sl, j);
}

void store_get_done(struct slog *sl, struct job *j)
{
    struct op *op = held_op_done(sl, j);

    if (op == NULL) {
        return;
    }
    sl->in_cb = true;
    op->u.get.cb(op->u.get.req, j->u.get.got, 0);
    sl->in_cb = false;
    free(op);
}

/* The loop's thread pool: the file of a taken snapshot. Reads only the
 * op's snapshot (raft's, held until the put's callback) and the store's
 * directory descriptor, which stays open until the store is closed, and
 * the close waits for this work (store_maybe_shutdown). */
static void prewrite_work(uv_work_t *w)
{
    struct op *op = w->data;
    const struct slog *sl = op->u.put.sl;
    const char *what;
    /* In the thread's own I/O class, not the idle class: mq-deadline
     * holds idle writes up to prio_aging_expire (10 s) behind other
     * writes, at each writeback step, and raft 0.15 ignores AppendEntries
     * while a put is in flight (docs/store.md). */
    int err = store_write_tmp_snap(sl, op->u.put.snap, &what);

    op->u.put.work_rv = 0;
    if (err == -ENOMEM) {
        op->u.put.work_rv = RAFT_NOMEM;
        err_printf(op->u.put.work_err, "out of memory");
    } else if (err != 0) {
        op->u.put.work_rv = store_raft_code(err);
        err_printf(op->u.put.work_err, "%s", strerror(-err));
        err_wrapf(op->u.put.work_err, "%s tmp-snap", what);
    }
}

/* The loop: queue the rename, or fail the store as a failed put would. */
static void prewrite_done(uv_work_t *w, int status)
{
    struct op *op = w->data;
    struct slog *sl = op->u.put.sl;
    int rv = status != 0 ? RAFT_CANCELED : op->u.put.work_rv;

    ONCE_ASSERT(sl->pool_ops > 0, "pool_ops counts the work queued");
    sl->pool_ops--;
    if (rv != 0) {
        store_set_failed(
            sl, rv, rv == RAFT_CANCELED ? "cancelled" : op->u.put.work_err);
        store_op_done(sl, op, rv);
    } else {
        op->u.put.written = true;
        store_enqueue(sl, op);
    }
    store_kick(sl);
    store_maybe_shutdown(sl);
}

/* A taken snapshot: write its file off the queue. False if the work could
 * not be queued (then the put runs whole in the queue, as an install). */
static bool prewrite_start(struct slog *sl, struct op *op)
{
    if (sl->closing) {
        return false;
    }
    op->u.put.sl = sl;
    op->u.put.work.data = op;
    if (sl->exec->queue_work(sl->exec, sl, &op->u.put.work, prewrite_work,
                             prewrite_done) != 0) {
        return false;
    }
    sl->pool_ops++;
    return true;
}

int store_snapshot_put(struct store *s,
                       unsigned trailing,
                       struct raft_io_snapshot_put *req,
                       const struct raft_snapshot *snapshot,
                       raft_io_snapshot_put_cb cb)
{
    struct slog *sl = s->impl;
    int rv = 0;
    struct op *op = store_op_alloc(sl, OP_PUT, &rv);

    if (op == NULL) {
        return rv;
    }
    op->u.put.trailing = trailing;
    op->u.put.req = req;
    op->u.put.snap = snapshot;
    op->u.put.cb = cb;
    if (trailing == 0) {
        sl->next = snapshot->index + 1; /* the log restarts after it */
    } else if (prewrite_start(sl, op)) {
        return 0; /* queued once its file is written */
    }
    store_enqueue(sl, op);
    return 0;
}

/* The loop's thread pool: read and check the file open at the op's fd
 * (opened on the loop, closed here). */
static void get_work(uv_work_t *w)
{
    struct op *op = w->data;

    const struct store_sys *sys = op->u.get.sl->sys;

    op->u.get.work_rv = read_snapshot_fd(sys, op->u.get.fd, op->u.get.sname,
                                         &op->u.get.got, op->u.get.work_err);
    sys->close(sys, op->u.get.fd);
}

/* The loop: hand the snapshot to raft. A snapshot we wrote that does not
 * read back stops the store, as in the queue. */
static void get_done(uv_work_t *w, int status)
{
    struct op *op = w->data;
    struct slog *sl = op->u.get.sl;
    int rv = status != 0 ? RAFT_CANCELED : op->u.get.work_rv;

    ONCE_ASSERT(
        sl->pool_ops > 0 && sl->pool_gets > 0 && sl->pool_gets <= sl->pool_ops,
        "pool_gets counts the gets among pool_ops");
    sl->pool_ops--;
    sl->pool_gets--;
    if (rv != 0) {
        store_snapshot_free(op->u.get.got);
        store_set_failed(
            sl, rv, rv == RAFT_CANCELED ? "cancelled" : op->u.get.work_err);
        store_op_done(sl, op, rv);
    } else {
        sl->in_cb = true;
        op->u.get.cb(op->u.get.req, op->u.get.got, 0);
        sl->in_cb = false;
        free(op);
    }
    store_kick(sl);
    store_maybe_shutdown(sl);
}

/* Read the newest snapshot off the queue. False if there is none or the
 * work could not be started (then the get goes through the queue). */
static bool get_start(struct slog *sl, struct op *op)
{
    struct op_get *g = &op->u.get;

    if (sl->closing || sl->snaps[0].index == 0) {
        return false;
    }
    store_snap_name(g->sname, sl->snaps[0].term, sl->snaps[0].index);
    g->fd =
        sl->sys->openat(sl->sys, sl->dirfd, g->sname, O_RDONLY | O_CLOEXEC, 0);
    if (g->fd < 0) {
        return false;
    }
    g->sl = sl;
    g->work.data = op;
    if (sl->exec->queue_work(sl->exec, sl, &g->work, get_work, get_done) != 0) {
        sl->sys->close(sl->sys, g->fd);
        return false;
    }
    sl->pool_ops++;
    sl->pool_gets++;
    return true;
}

int store_snapshot_get(struct store *s,
                       struct raft_io_snapshot_get *req,
                       raft_io_snapshot_get_cb cb)
{
    struct slog *sl = s->impl;
    int rv = 0;
    struct op *op = store_op_alloc(sl, OP_GET, &rv);

    if (op != NULL) {
        op->u.get.req = req;
        op->u.get.cb = cb;
        if (!get_start(sl, op)) {
            store_enqueue(sl, op);
        }
    }
    return rv;
}
