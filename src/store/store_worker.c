/* store/store_worker.c: the store's worker thread, the segment jobs it runs
 * (prepare the next segment, roll, truncate) and the blocking I/O helpers
 * every part of the store uses (store_int.h).
 *
 * Jobs run where sl->exec puts them (store_sys.h): in production on the
 * worker thread of store_exec_threads, defined here, which completes them
 * on the loop through store_queue.c. A job's run function touches only
 * the job, sl->dirfd, sl->sys, sl->seg_size, sl->direct and sl->prep_ok,
 * and makes every file call through sl->sys. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "store/store_format.h"
#include "store/store_int.h"

int store_raft_code(int neg_errno)
{
    return neg_errno == -ENOSPC || neg_errno == -EDQUOT ? RAFT_NOSPACE
                                                        : RAFT_IOERR;
}

int store_write_all(const struct store_sys *sys,
                    int fd,
                    const void *buf,
                    size_t len,
                    uint64_t off)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = sys->pwrite(sys, fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int store_read_all(const struct store_sys *sys,
                   int fd,
                   void *buf,
                   size_t len,
                   uint64_t off)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = sys->pread(sys, fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (n == 0) {
            return -EIO; /* shorter than its size said */
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int store_zero_range(const struct store_sys *sys,
                     int fd,
                     uint64_t from,
                     uint64_t to)
{
    /* From the end backwards, one page per write: a kill part way leaves
     * the old records' prefix and zeros after it (a shorter log, or a torn
     * record that load cuts), never zeros with old records after them,
     * which load must refuse (docs/store.md). A page is the unit a
     * buffered write lands in, so one write leaves no hole of its own. */
    static const uint8_t zeros[ZERO_PAGE];

    while (to > from) {
        uint64_t lo = (to - 1) & ~(uint64_t)(ZERO_PAGE - 1);
        int err;

        if (lo < from) {
            lo = from;
        }
        err = store_write_all(sys, fd, zeros, (size_t)(to - lo), lo);
        if (err != 0) {
            return err;
        }
        to = lo;
    }
    return 0;
}

int store_fsync_dir(const struct store_sys *sys, int dirfd)
{
    return sys->fsync(sys, dirfd) == 0 ? 0 : -errno;
}

struct iovec *store_iov_advance(struct iovec *iov, unsigned *n, size_t done)
{
    while (*n > 0 && done >= iov->iov_len) {
        done -= iov->iov_len;
        iov++;
        (*n)--;
    }
    ONCE_ASSERTF(*n > 0 || done == 0,
                 "%zu bytes done past the end of the iovecs", done);
    if (*n > 0) {
        iov->iov_base = (uint8_t *)iov->iov_base + done;
        iov->iov_len -= done;
    }
    return iov;
}

void store_seg_name(char out[NAME_LEN], uint64_t first)
{
    snprintf(out, NAME_LEN, "seg-%020" PRIu64, first);
}

void store_snap_name(char out[NAME_LEN], uint64_t term, uint64_t index)
{
    snprintf(out, NAME_LEN, "snap-%020" PRIu64 "-%020" PRIu64, term, index);
}

void store_notice(struct slog *sl, const char *level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (sl->o.log == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sl->o.log(sl->o.log_arg, level, msg);
}

void store_job_err(struct job *j,
                   int neg_errno,
                   const char *what,
                   const char *name)
{
    ONCE_ASSERTF(neg_errno < 0, "not a negated errno: %d", neg_errno);
    err_printf(j->err, "%s", strerror(-neg_errno));
    err_wrapf(j->err, "%s %s", what, name);
    j->rv = store_raft_code(neg_errno);
}

/* --- jobs ----------------------------------------------------------------- */

struct job *store_job_new(struct slog *sl, enum job_kind kind)
{
    struct job *j = calloc(1, sizeof *j);

    if (j == NULL) {
        return NULL;
    }
    j->kind = kind;
    j->sl = sl;
    switch (kind) {
        case J_ROLL:
            j->u.roll.fd_out = j->u.roll.dfd_out = -1;
            break;
        case J_WRITE:
            j->u.write.fd = -1;
            break;
        case J_TRUNC:
            j->u.trunc.fd_out = j->u.trunc.dfd_out = -1;
            break;
        default:
            break;
    }
    return j;
}

static void close_if_open(const struct store_sys *sys, int fd)
{
    if (fd >= 0) {
        sys->close(sys, fd);
    }
}

/* Descriptors still in the job were not taken over: a failed job's. */
void store_job_free(struct job *j)
{
    if (j->kind == J_WRITE) {
        free(j->u.write.dbuf);
        free(j->u.write.iov_mem);
    } else if (j->kind == J_ROLL) {
        close_if_open(j->sl->sys, j->u.roll.fd_out);
        close_if_open(j->sl->sys, j->u.roll.dfd_out);
    } else if (j->kind == J_TRUNC) {
        close_if_open(j->sl->sys, j->u.trunc.fd_out);
        close_if_open(j->sl->sys, j->u.trunc.dfd_out);
        free(j->u.trunc.tail_out);
    }
    free(j->unlink);
    free(j);
}

void store_job_submit(struct slog *sl, struct job *j)
{
    ONCE_ASSERT(!sl->stop, "no job is submitted once the worker stops");
    j->next = NULL;
    sl->exec->submit(sl->exec, sl, j);
}

int store_job_add_unlink(struct job *j, const char *name)
{
    char(*u)[NAME_LEN];

    /* Every name is one the store built (store_seg_name, _snap_name). */
    ONCE_ASSERT(strlen(name) < NAME_LEN, "a store file name fits NAME_LEN");
    u = realloc(j->unlink, (j->n_unlink + 1) * NAME_LEN);
    if (u == NULL) {
        return RAFT_NOMEM;
    }
    j->unlink = u;
    snprintf(j->unlink[j->n_unlink++], NAME_LEN, "%s", name);
    return 0;
}

void store_job_run(struct job *j)
{
    switch (j->kind) {
        case J_PREP:
            store_run_prep(j);
            break;
        case J_ROLL:
            store_run_roll(j);
            break;
        case J_WRITE:
            store_run_write(j);
            break;
        case J_TRUNC:
            store_run_trunc(j);
            break;
        case J_PUT:
            store_run_put(j);
            break;
        case J_GET:
            store_run_get(j);
            break;
    }
}

void store_job_cancel(struct job *j)
{
    j->rv = RAFT_CANCELED;
    err_printf(j->err, "cancelled");
}

/* --- store_exec_threads: the worker thread (store_sys.h) ------------------
 * The worker takes jobs in order from sl's job queue, runs them and puts
 * them on the done queue, then wakes the loop (uv_async, store_async_cb in
 * store_queue.c). */

static void *worker_main(void *arg)
{
    struct slog *sl = arg;

    pthread_mutex_lock(&sl->mu);
    for (;;) {
        struct job *j;

        while (sl->jq_head == NULL && !sl->stop) {
            pthread_cond_wait(&sl->cv, &sl->mu);
        }
        if (sl->jq_head == NULL) {
            break;
        }
        j = sl->jq_head;
        sl->jq_head = j->next;
        if (sl->jq_head == NULL) {
            sl->jq_tail = NULL;
        }
        pthread_mutex_unlock(&sl->mu);
        store_job_run(j);
        pthread_mutex_lock(&sl->mu);
        j->next = NULL;
        if (sl->dq_tail != NULL) {
            sl->dq_tail->next = j;
        } else {
            sl->dq_head = j;
        }
        sl->dq_tail = j;
        pthread_mutex_unlock(&sl->mu);
        uv_async_send(&sl->async);
        pthread_mutex_lock(&sl->mu);
    }
    pthread_mutex_unlock(&sl->mu);
    return NULL;
}

static int threads_start(const struct store_exec *x,
                         struct slog *sl,
                         int *handles,
                         char *errmsg)
{
    (void)x;
    pthread_mutex_init(&sl->mu, NULL);
    pthread_cond_init(&sl->cv, NULL);
    uv_async_init(sl->loop, &sl->async, store_async_cb);
    sl->async.data = sl;
    if (pthread_create(&sl->th, NULL, worker_main, sl) != 0) {
        err_printf(errmsg, "cannot start the store's worker thread");
        /* (unwinding the async handle needs the loop: run it once) */
        sl->stop = true;
        uv_close((uv_handle_t *)&sl->async, NULL);
        uv_run(sl->loop, UV_RUN_NOWAIT);
        pthread_mutex_destroy(&sl->mu);
        pthread_cond_destroy(&sl->cv);
        return RAFT_IOERR;
    }
    *handles = 1;
    return 0;
}

static void threads_submit(const struct store_exec *x,
                           struct slog *sl,
                           struct job *j)
{
    (void)x;
    pthread_mutex_lock(&sl->mu);
    if (sl->jq_tail != NULL) {
        sl->jq_tail->next = j;
    } else {
        sl->jq_head = j;
    }
    sl->jq_tail = j;
    pthread_cond_signal(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
}

static int threads_stop(const struct store_exec *x, struct slog *sl)
{
    (void)x;
    pthread_mutex_lock(&sl->mu);
    sl->stop = true;
    pthread_cond_signal(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
    pthread_join(sl->th, NULL);
    /* Only background preparations can be left: nothing waits for them. */
    while (sl->dq_head != NULL) {
        struct job *j = sl->dq_head;
        sl->dq_head = j->next;
        store_job_free(j);
    }
    sl->dq_tail = NULL;
    pthread_mutex_destroy(&sl->mu);
    pthread_cond_destroy(&sl->cv);
    uv_close((uv_handle_t *)&sl->async, store_handle_closed);
    return 1;
}

static int threads_queue_work(const struct store_exec *x,
                              struct slog *sl,
                              uv_work_t *w,
                              uv_work_cb work,
                              uv_after_work_cb done)
{
    (void)x;
    return uv_queue_work(sl->loop, w, work, done);
}

const struct store_exec store_exec_threads = {
    .start = threads_start,
    .submit = threads_submit,
    .stop = threads_stop,
    .queue_work = threads_queue_work,
};

/* --- segment jobs (worker thread) ------------------------------------------
 */

void store_run_prep(struct job *j)
{
    struct slog *sl = j->sl;
    const struct store_sys *sys = sl->sys;
    int fd, err;

    sl->prep_ok = false;
    fd = sys->openat(sys, sl->dirfd, "prep-next",
                     O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        store_job_err(j, -errno, "create", "prep-next");
        return;
    }
    /* Zeros written, not fallocated: a later write into unwritten extents
     * costs a metadata update per sync (docs/raft-0.15.md §4.2). */
    err = store_zero_range(sys, fd, 0, sl->seg_size);
    if (err == 0 && sys->fdatasync(sys, fd) != 0) {
        err = -errno;
    }
    if (err == 0 && sl->direct) {
        /* The zeros are on disk: drop their (clean) pages, or every direct
         * write into them first has to invalidate what it covers. Buffered
         * engines keep them: a partial-page write into an uncached page
         * would read it first. */
        (void)sys->fadvise(sys, fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    sys->close(sys, fd);
    if (err != 0) {
        (void)sys->unlinkat(sys, sl->dirfd, "prep-next", 0);
        store_job_err(j, err, "prepare", "prep-next");
        return;
    }
    sl->prep_ok = true;
}

/* The file a roll renames into place: prep-next when it is ready and big
 * enough, else a new tmp-roll (which the caller zeroes). -1 with the
 * job's error set. */
static int roll_source(struct job *j, const char **src, uint64_t *cap)
{
    struct slog *sl = j->sl;
    int fd;

    if (sl->prep_ok && j->u.roll.need <= sl->seg_size) {
        *src = "prep-next";
        fd = sl->sys->openat(sl->sys, sl->dirfd, *src, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0) {
            store_job_err(j, -errno, "open", *src);
        }
        return fd;
    }
    *src = "tmp-roll";
    if (j->u.roll.need > *cap) {
        *cap = (j->u.roll.need + BLOCK - 1) / BLOCK * BLOCK;
    }
    fd = sl->sys->openat(sl->sys, sl->dirfd, *src,
                         O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        store_job_err(j, -errno, "create", *src);
    }
    return fd;
}

void store_run_roll(struct job *j)
{
    struct slog *sl = j->sl;
    const struct store_sys *sys = sl->sys;
    struct job_roll *r = &j->u.roll;
    uint8_t hdr[SF_SEG_HDR];
    char name[NAME_LEN];
    const char *src;
    uint64_t cap = sl->seg_size;
    int fd, err = 0;

    store_seg_name(name, r->first);
    r->fd_out = r->dfd_out = -1;
    fd = roll_source(j, &src, &cap);
    if (fd < 0) {
        return;
    }
    if (strcmp(src, "tmp-roll") == 0) {
        err = store_zero_range(sys, fd, 0, cap);
    }
    sl->prep_ok = false;
    sf_seg_header(hdr, r->first);
    if (err == 0) {
        err = store_write_all(sys, fd, hdr, sizeof hdr, 0);
    }
    if (err == 0 && sys->fdatasync(sys, fd) != 0) {
        err = -errno;
    }
    /* The header is durable before the name appears, so a segment file
     * with a bad header is corruption, never a crash. */
    if (err == 0 && sys->renameat(sys, sl->dirfd, src, sl->dirfd, name) != 0) {
        err = -errno;
    }
    if (err == 0) {
        err = store_fsync_dir(sys, sl->dirfd);
    }
    if (err != 0) {
        sys->close(sys, fd);
        store_job_err(j, err, "roll to", name);
        return;
    }
    if (sl->direct) {
        r->dfd_out =
            sys->openat(sys, sl->dirfd, name, O_RDWR | O_DIRECT | O_CLOEXEC, 0);
        if (r->dfd_out < 0) {
            sys->close(sys, fd);
            store_job_err(j, -errno, "open (O_DIRECT)", name);
            return;
        }
    }
    r->fd_out = fd;
    r->cap_out = cap;
}

/* In the order given, each durable before the next: the order is what
 * keeps the log contiguous if the node crashes midway. */
void store_run_unlinks(struct job *j)
{
    const struct store_sys *sys = j->sl->sys;
    int err;

    for (size_t i = 0; i < j->n_unlink; i++) {
        if (sys->unlinkat(sys, j->sl->dirfd, j->unlink[i], 0) != 0 &&
            errno != ENOENT) {
            store_job_err(j, -errno, "unlink", j->unlink[i]);
            return;
        }
        err = store_fsync_dir(sys, j->sl->dirfd);
        if (err != 0) {
            store_job_err(j, err, "fsync", "directory");
            return;
        }
    }
}

/* Direct: the O_DIRECT descriptor of the truncated segment and the block
 * holding its new end, which the next direct write rewrites. */
static void trunc_direct_tail(struct job *j, int fd)
{
    const struct store_sys *sys = j->sl->sys;
    struct job_trunc *t = &j->u.trunc;
    uint64_t a = t->zfrom / BLOCK * BLOCK;
    ssize_t got;

    t->tail_out = calloc(1, BLOCK);
    t->dfd_out = sys->openat(sys, j->sl->dirfd, t->zname,
                             O_RDWR | O_DIRECT | O_CLOEXEC, 0);
    if (t->tail_out == NULL || t->dfd_out < 0) {
        store_job_err(j, t->tail_out == NULL ? -ENOMEM : -errno,
                      "open (O_DIRECT)", t->zname);
        return;
    }
    got = sys->pread(sys, fd, t->tail_out, (size_t)(t->zfrom - a), (off_t)a);
    if (got != (ssize_t)(t->zfrom - a)) {
        store_job_err(j, got < 0 ? -errno : -EIO, "read the tail of", t->zname);
    }
}

void store_run_trunc(struct job *j)
{
    const struct store_sys *sys = j->sl->sys;
    struct job_trunc *t = &j->u.trunc;
    struct stat st;
    int fd, err;

    store_run_unlinks(j);
    if (j->rv != 0 || t->zname[0] == '\0') {
        return;
    }
    fd = sys->openat(sys, j->sl->dirfd, t->zname, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0 || sys->fstat(sys, fd, &st) != 0) {
        store_job_err(j, -errno, "open", t->zname);
        if (fd >= 0) {
            sys->close(sys, fd);
        }
        return;
    }
    if (t->zto > (uint64_t)st.st_size) {
        t->zto = (uint64_t)st.st_size; /* a closed segment: to its end */
    }
    /* Zeroed, durably: a shorter rewrite must never let an old record after
     * it be read back (resurrection). */
    err = store_zero_range(sys, fd, t->zfrom, t->zto);
    if (err == 0 && sys->fdatasync(sys, fd) != 0) {
        err = -errno;
    }
    if (err != 0) {
        sys->close(sys, fd);
        store_job_err(j, err, "zero the tail of", t->zname);
        return;
    }
    if (j->sl->direct) {
        trunc_direct_tail(j, fd);
        if (j->rv != 0) {
            sys->close(sys, fd);
            return;
        }
    }
    t->fd_out = fd;
}
