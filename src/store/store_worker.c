/* store/store_worker.c: the store's worker thread, the segment jobs it runs
 * (prepare the next segment, roll, truncate) and the blocking I/O helpers
 * every part of the store uses (store_int.h).
 *
 * The worker takes jobs in order from sl's job queue, runs them and puts
 * them on the done queue, then wakes the loop (uv_async); the loop
 * completes them in store_queue.c. A job's run function touches only the
 * job, sl->dirfd, sl->seg_size, sl->direct and sl->prep_ok. */
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

int store_write_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
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

int store_read_all(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)off);
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

int store_zero_range(int fd, uint64_t from, uint64_t to)
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
        err = store_write_all(fd, zeros, (size_t)(to - lo), lo);
        if (err != 0) {
            return err;
        }
        to = lo;
    }
    return 0;
}

int store_fsync_dir(int dirfd)
{
    return fsync(dirfd) == 0 ? 0 : -errno;
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

static void close_if_open(int fd)
{
    if (fd >= 0) {
        close(fd);
    }
}

/* Descriptors still in the job were not taken over: a failed job's. */
void store_job_free(struct job *j)
{
    if (j->kind == J_WRITE) {
        free(j->u.write.dbuf);
        free(j->u.write.iov_mem);
    } else if (j->kind == J_ROLL) {
        close_if_open(j->u.roll.fd_out);
        close_if_open(j->u.roll.dfd_out);
    } else if (j->kind == J_TRUNC) {
        close_if_open(j->u.trunc.fd_out);
        close_if_open(j->u.trunc.dfd_out);
        free(j->u.trunc.tail_out);
    }
    free(j->unlink);
    free(j);
}

void store_job_submit(struct slog *sl, struct job *j)
{
    pthread_mutex_lock(&sl->mu);
    ONCE_ASSERT(!sl->stop, "no job is submitted once the worker stops");
    j->next = NULL;
    if (sl->jq_tail != NULL) {
        sl->jq_tail->next = j;
    } else {
        sl->jq_head = j;
    }
    sl->jq_tail = j;
    pthread_cond_signal(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
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

static void run_job(struct job *j)
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

void *store_worker_main(void *arg)
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
        run_job(j);
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

/* --- segment jobs (worker thread) ------------------------------------------
 */

void store_run_prep(struct job *j)
{
    struct slog *sl = j->sl;
    int fd, err;

    sl->prep_ok = false;
    fd = openat(sl->dirfd, "prep-next", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
                0600);
    if (fd < 0) {
        store_job_err(j, -errno, "create", "prep-next");
        return;
    }
    /* Zeros written, not fallocated: a later write into unwritten extents
     * costs a metadata update per sync (docs/raft-0.15.md §4.2). */
    err = store_zero_range(fd, 0, sl->seg_size);
    if (err == 0 && fdatasync(fd) != 0) {
        err = -errno;
    }
    if (err == 0 && sl->direct) {
        /* The zeros are on disk: drop their (clean) pages, or every direct
         * write into them first has to invalidate what it covers. Buffered
         * engines keep them: a partial-page write into an uncached page
         * would read it first. */
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    close(fd);
    if (err != 0) {
        (void)unlinkat(sl->dirfd, "prep-next", 0);
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
        fd = openat(sl->dirfd, *src, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            store_job_err(j, -errno, "open", *src);
        }
        return fd;
    }
    *src = "tmp-roll";
    if (j->u.roll.need > *cap) {
        *cap = (j->u.roll.need + BLOCK - 1) / BLOCK * BLOCK;
    }
    fd = openat(sl->dirfd, *src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        store_job_err(j, -errno, "create", *src);
    }
    return fd;
}

void store_run_roll(struct job *j)
{
    struct slog *sl = j->sl;
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
        err = store_zero_range(fd, 0, cap);
    }
    sl->prep_ok = false;
    sf_seg_header(hdr, r->first);
    if (err == 0) {
        err = store_write_all(fd, hdr, sizeof hdr, 0);
    }
    if (err == 0 && fdatasync(fd) != 0) {
        err = -errno;
    }
    /* The header is durable before the name appears, so a segment file
     * with a bad header is corruption, never a crash. */
    if (err == 0 && renameat(sl->dirfd, src, sl->dirfd, name) != 0) {
        err = -errno;
    }
    if (err == 0) {
        err = store_fsync_dir(sl->dirfd);
    }
    if (err != 0) {
        close(fd);
        store_job_err(j, err, "roll to", name);
        return;
    }
    if (sl->direct) {
        r->dfd_out = openat(sl->dirfd, name, O_RDWR | O_DIRECT | O_CLOEXEC);
        if (r->dfd_out < 0) {
            close(fd);
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
    int err;

    for (size_t i = 0; i < j->n_unlink; i++) {
        if (unlinkat(j->sl->dirfd, j->unlink[i], 0) != 0 && errno != ENOENT) {
            store_job_err(j, -errno, "unlink", j->unlink[i]);
            return;
        }
        err = store_fsync_dir(j->sl->dirfd);
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
    struct job_trunc *t = &j->u.trunc;
    uint64_t a = t->zfrom / BLOCK * BLOCK;
    ssize_t got;

    t->tail_out = calloc(1, BLOCK);
    t->dfd_out = openat(j->sl->dirfd, t->zname, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (t->tail_out == NULL || t->dfd_out < 0) {
        store_job_err(j, t->tail_out == NULL ? -ENOMEM : -errno,
                      "open (O_DIRECT)", t->zname);
        return;
    }
    got = pread(fd, t->tail_out, (size_t)(t->zfrom - a), (off_t)a);
    if (got != (ssize_t)(t->zfrom - a)) {
        store_job_err(j, got < 0 ? -errno : -EIO, "read the tail of", t->zname);
    }
}

void store_run_trunc(struct job *j)
{
    struct job_trunc *t = &j->u.trunc;
    struct stat st;
    int fd, err;

    store_run_unlinks(j);
    if (j->rv != 0 || t->zname[0] == '\0') {
        return;
    }
    fd = openat(j->sl->dirfd, t->zname, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        store_job_err(j, -errno, "open", t->zname);
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    if (t->zto > (uint64_t)st.st_size) {
        t->zto = (uint64_t)st.st_size; /* a closed segment: to its end */
    }
    /* Zeroed, durably: a shorter rewrite must never let an old record after
     * it be read back (resurrection). */
    err = store_zero_range(fd, t->zfrom, t->zto);
    if (err == 0 && fdatasync(fd) != 0) {
        err = -errno;
    }
    if (err != 0) {
        close(fd);
        store_job_err(j, err, "zero the tail of", t->zname);
        return;
    }
    if (j->sl->direct) {
        trunc_direct_tail(j, fd);
        if (j->rv != 0) {
            close(fd);
            return;
        }
    }
    t->fd_out = fd;
}
