/* store/store_log.c: the "uring" and "pwrite" backends (store_log.h):
 * setup, the choice of the write engine, close, and the table of raft's
 * storage calls. The rest is in the files store_int.h lists.
 *
 * Happy path of an append: store_append encodes the entries into one buffer
 * (loop thread) and queues an op; the queue gathers every queued append
 * into a batch, rolls to a new segment first if it does not fit (worker),
 * then hands one write + one data sync to the engine (ring or worker). The
 * completion (eventfd or uv_async, on the loop) calls the batch's
 * callbacks in order and starts the next batch, which holds whatever was
 * queued meanwhile.
 *
 * Failure modes: any I/O error sets `failed`; the op in flight and every
 * later op fail with that status and the decorator stops the node (G4).
 * Nothing is retried except short writes and EAGAIN/EINTR. Load refuses a
 * log it cannot account for (a bad record not at the torn tail, a gap, a bad
 * snapshot) with the file and offset in errmsg; it cuts only a torn tail,
 * and says so through cut_index and the log hook. */
#include "store/store_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "store/store_int.h"

/* --- shutdown --------------------------------------------------------------
 */

static void free_state(struct slog *sl)
{
    store_close_current(sl);
    free(sl->dtail);
    for (int i = 0; i < 2; i++) {
        if (sl->meta_fd[i] >= 0) {
            sl->sys->close(sl->sys, sl->meta_fd[i]);
        }
    }
    if (sl->dirfd >= 0) {
        sl->sys->close(sl->sys, sl->dirfd);
    }
    free(sl->segs);
    free(sl->offs);
    free(sl);
}

/* Every handle is closed: release the rest and tell the closer. */
static void finish_close(struct slog *sl)
{
    struct store *s = sl->s;
    store_close_cb cb = sl->close_cb;

    sl->eng->release(sl);
    free_state(sl);
    s->impl = NULL;
    if (cb != NULL) {
        cb(s);
    }
}

void store_handle_closed(uv_handle_t *h)
{
    struct slog *sl = h->data;

    ONCE_ASSERT(sl->handles > 0, "one close callback per open handle");
    if (--sl->handles > 0) {
        return;
    }
    finish_close(sl);
}

void store_maybe_shutdown(struct slog *sl)
{
    int closing;

    if (!sl->closing || sl->busy || sl->head != NULL || sl->close_cb == NULL ||
        sl->stop || sl->pool_ops != 0) {
        return;
    }
    ONCE_ASSERT(sl->wjob == NULL && sl->batch == NULL,
                "nothing is in flight when the worker stops");
    closing = sl->exec->stop(sl->exec, sl);
    sl->stop = true; /* (the threads' executor set it for its worker) */
    closing += sl->eng->close(sl);
    /* The executor's handles and the engine's: every handle closes once. */
    ONCE_ASSERTF(closing == sl->handles, "closing %d handles of %d open",
                 closing, sl->handles);
    if (closing == 0) {
        finish_close(sl); /* an executor without loop handles */
    }
}

static void store_close(struct store *s, store_close_cb cb)
{
    struct slog *sl = s->impl;

    ONCE_ASSERT(!sl->closing, "a store is closed once");
    sl->closing = true;
    sl->close_cb = cb;
    /* Queued work finishes first: its callbacks still reach raft. */
    store_kick(sl);
    store_maybe_shutdown(sl);
}

static const struct store_ops store_log_ops = {
    .load = store_load,
    .bootstrap = store_bootstrap,
    .recover = store_recover,
    .set_term = store_set_term,
    .set_vote = store_set_vote,
    .append = store_append,
    .truncate = store_truncate,
    .snapshot_put = store_snapshot_put,
    .snapshot_get = store_snapshot_get,
    .close = store_close,
};

/* --- setup -----------------------------------------------------------------
 */

/* mkdir @dir; when it is new, sync its parent so that its name is durable
 * before anything in it is acknowledged. RAFT_* with @errmsg. */
static int make_dir(const struct store_sys *sys, const char *dir, char *errmsg)
{
    char parent[PATH_MAX];
    char *slash;
    int pfd;

    if (sys->mkdir(sys, dir, 0700) != 0) {
        if (errno == EEXIST) {
            return 0;
        }
        err_printf(errmsg, "mkdir %s: %s", dir, strerror(errno));
        return RAFT_IOERR;
    }
    snprintf(parent, sizeof parent, "%s", dir);
    slash = strrchr(parent, '/');
    if (slash == parent) {
        slash[1] = '\0';
    } else if (slash != NULL) {
        *slash = '\0';
    } else {
        snprintf(parent, sizeof parent, ".");
    }
    pfd = sys->openat(sys, AT_FDCWD, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                      0);
    if (pfd < 0 || sys->fsync(sys, pfd) != 0) {
        err_printf(errmsg, "fsync %s: %s", parent, strerror(errno));
        if (pfd >= 0) {
            sys->close(sys, pfd);
        }
        return RAFT_IOERR;
    }
    sys->close(sys, pfd);
    return 0;
}

/* The engine, as asked and as the kernel and file system allow (probed,
 * logged). RAFT_* with @errmsg when uring was asked and is refused. */
static int choose_engine(struct slog *sl, char *errmsg)
{
    enum store_engine e = sl->o.engine;
    char why[128];
    int t;

    if (sl->sys != &store_sys_posix) {
        /* The ring writes to the kernel itself: not through the table. */
        if (e == STORE_ENGINE_URING) {
            err_printf(errmsg, "the uring engine needs the POSIX file calls");
            return RAFT_INVALID;
        }
        e = STORE_ENGINE_PWRITE;
    }
    if (e == STORE_ENGINE_AUTO || e == STORE_ENGINE_URING) {
        int p = store_uring_probe(why, sizeof why);
        if (p != 0 && e == STORE_ENGINE_URING) {
            err_printf(errmsg, "io_uring unavailable: %s", why);
            return RAFT_IOERR;
        }
        e = p == 0 ? STORE_ENGINE_URING : STORE_ENGINE_PWRITE;
        if (p != 0) {
            store_notice(sl, "info", "io_uring unavailable (%s): using pwrite",
                         why);
        }
    }
    if (e == STORE_ENGINE_PWRITE) {
        sl->eng = &store_engine_pwrite;
        return 0;
    }
    sl->eng = &store_engine_uring_buffered;
    if (sl->o.no_direct) {
        return 0;
    }
    /* O_DIRECT where the file system has it: a direct RWF_DSYNC write
     * completes without io_uring's worker threads (the buffered write's
     * linked fsync always runs on one). */
    t = sl->sys->openat(sl->sys, sl->dirfd, "meta-a",
                        O_RDONLY | O_DIRECT | O_CLOEXEC, 0);
    if (t >= 0) {
        sl->eng = &store_engine_uring_direct;
        sl->sys->close(sl->sys, t);
        store_notice(sl, "info",
                     "uring appends: O_DIRECT writes with RWF_DSYNC");
    } else {
        store_notice(sl, "info",
                     "O_DIRECT unavailable in %s (%s): buffered writes with "
                     "a linked fsync",
                     sl->dir, strerror(errno));
    }
    return 0;
}

/* The state before any file is touched; NULL when out of memory. */
static struct slog *slog_new(struct store *s,
                             uv_loop_t *loop,
                             const char *dir,
                             const struct store_log_options *o)
{
    struct slog *sl = calloc(1, sizeof *sl);

    if (sl == NULL) {
        return NULL;
    }
    sl->dtail = aligned_alloc(BLOCK, BLOCK);
    if (sl->dtail == NULL) {
        free(sl);
        return NULL;
    }
    memset(sl->dtail, 0, BLOCK);
    sl->s = s;
    sl->loop = loop;
    snprintf(sl->dir, sizeof sl->dir, "%s", dir);
    sl->o = *o;
    sl->sys = o->sys != NULL ? o->sys : &store_sys_posix;
    sl->exec = o->exec != NULL ? o->exec : &store_exec_threads;
    sl->seg_size = o->segment_size == 0 ? DEFAULT_SEGMENT : o->segment_size;
    if (sl->seg_size < MIN_SEGMENT) {
        sl->seg_size = MIN_SEGMENT;
    }
    sl->seg_size = (sl->seg_size + BLOCK - 1) / BLOCK * BLOCK;
    sl->cur_fd = sl->cur_dfd = -1;
    sl->meta_fd[0] = sl->meta_fd[1] = -1;
    sl->dirfd = -1;
    sl->efd = -1;
    sl->base = sl->next = 1;
    return sl;
}

int store_log_init(struct store *s,
                   uv_loop_t *loop,
                   const char *dir,
                   const struct store_log_options *o,
                   char *errmsg)
{
    struct slog *sl;
    int rv;

    memset(s, 0, sizeof *s);
    if (strlen(dir) >= PATH_MAX - NAME_LEN) {
        err_printf(errmsg, "store directory name too long");
        return RAFT_NAMETOOLONG;
    }
    sl = slog_new(s, loop, dir, o);
    if (sl == NULL) {
        err_printf(errmsg, "out of memory");
        return RAFT_NOMEM;
    }
    s->impl = sl;
    if ((rv = make_dir(sl->sys, dir, errmsg)) != 0) {
        goto err_state;
    }
    sl->dirfd = sl->sys->openat(sl->sys, AT_FDCWD, dir,
                                O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (sl->dirfd < 0) {
        err_printf(errmsg, "open %s: %s", dir, strerror(errno));
        rv = RAFT_IOERR;
        goto err_state;
    }
    if ((rv = store_meta_open(sl, errmsg)) != 0 ||
        (rv = choose_engine(sl, errmsg)) != 0) {
        goto err_state;
    }
    sl->direct = sl->eng->direct;
    if ((rv = sl->eng->open(sl, errmsg)) != 0) {
        goto err_state;
    }
    if ((rv = sl->exec->start(sl->exec, sl, &sl->handles, errmsg)) != 0) {
        goto err_eng;
    }
    sl->handles += sl->eng->start(sl);
    s->ops = &store_log_ops;
    s->name = sl->eng->name;
    return 0;

err_eng:
    sl->eng->release(sl);
err_state:
    free_state(sl);
    s->impl = NULL;
    return rv;
}

void store_log_stats(const struct store *s, struct store_log_stats *out)
{
    const struct slog *sl = s->impl;
    *out = sl->stats;
}

bool store_log_direct(const struct store *s)
{
    const struct slog *sl = s->impl;
    return sl->direct;
}
