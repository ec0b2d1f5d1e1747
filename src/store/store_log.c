/* store/store_log.c: the "uring" and "pwrite" backends (store_log.h).
 *
 * Happy path of an append: store_append encodes the entries into one buffer
 * (loop thread) and queues an op; kick() gathers every queued append into a
 * batch, rolls to a new segment first if the batch does not fit (worker),
 * then submits one write + one data sync (ring or worker). The completion
 * (eventfd or uv_async, on the loop) calls the batch's callbacks in order
 * and kicks the next batch, which holds whatever was queued meanwhile.
 *
 * Failure modes: any I/O error sets `failed`; the op in flight and every
 * later op fail with that status and the decorator stops the node (G4).
 * Nothing is retried except short writes and EAGAIN/EINTR. Load refuses a
 * log it cannot account for (a bad record not at the torn tail, a gap, a bad
 * snapshot) with the file and offset in errmsg; it cuts only a torn tail,
 * and says so through cut_index and the log hook. */
#include "store/store_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "store/store_format.h"

#define DEFAULT_SEGMENT (8u << 20)
#define MIN_SEGMENT     (4u << 10)
#define BATCH_MAX       (4u << 20)
#define NAME_LEN        64
#define ZERO_PAGE       4096u /* zero_range writes one page at a time */
#define RING_ENTRIES    16
#define BLOCK           4096u /* O_DIRECT alignment (fits 512 and 4096) */

/* Into a 256-byte errmsg; a long path is cut, which is fine for a
 * message. */
static void errf(char *dst, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void errf(char *dst, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(dst, RAFT_ERRMSG_BUF_SIZE, fmt, ap);
    va_end(ap);
}

/* --- small blocking helpers (worker thread, or loop for sync calls) ------ */

static int raft_code(int err)
{
    return err == ENOSPC || err == EDQUOT ? RAFT_NOSPACE : RAFT_IOERR;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        if (n == 0) {
            return EIO; /* shorter than its size said */
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int zero_range(int fd, uint64_t from, uint64_t to)
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
        err = write_all(fd, zeros, (size_t)(to - lo), lo);
        if (err != 0) {
            return err;
        }
        to = lo;
    }
    return 0;
}

/* Advance @iov past @done bytes; returns the new start. */
static struct iovec *iov_advance(struct iovec *iov, unsigned *n, size_t done)
{
    while (*n > 0 && done >= iov->iov_len) {
        done -= iov->iov_len;
        iov++;
        (*n)--;
    }
    if (*n > 0) {
        iov->iov_base = (uint8_t *)iov->iov_base + done;
        iov->iov_len -= done;
    }
    return iov;
}

static void seg_name(char out[NAME_LEN], uint64_t first)
{
    snprintf(out, NAME_LEN, "seg-%020" PRIu64, first);
}

static void snap_name(char out[NAME_LEN], uint64_t term, uint64_t index)
{
    snprintf(out, NAME_LEN, "snap-%020" PRIu64 "-%020" PRIu64, term, index);
}

/* --- state ---------------------------------------------------------------- */

enum op_kind { OP_APPEND, OP_TRUNCATE, OP_PUT, OP_GET };

struct op
{
    enum op_kind kind;
    struct op *next;
    /* append */
    struct raft_io_append *req;
    raft_io_append_cb cb;
    uint8_t *buf; /* encoded records */
    size_t bytes;
    unsigned n;
    uint64_t first_index;
    uint32_t *sizes;  /* per record */
    bool inline_bufs; /* buf and sizes live in the op's own allocation */
    /* truncate */
    uint64_t index;
    /* snapshot put/get */
    unsigned trailing;
    struct raft_io_snapshot_put *put;
    const struct raft_snapshot *snap;
    raft_io_snapshot_put_cb put_cb;
    struct raft_io_snapshot_get *get;
    raft_io_snapshot_get_cb get_cb;
};

struct seg
{
    uint64_t first;
};

struct snapref
{
    uint64_t term, index;
};

enum job_kind { J_PREP, J_ROLL, J_WRITE, J_TRUNC, J_PUT, J_GET };

struct slog;

struct job
{
    enum job_kind kind;
    struct job *next;
    struct slog *sl;
    int rv; /* RAFT_* */
    char err[RAFT_ERRMSG_BUF_SIZE];
    /* roll */
    uint64_t first;
    size_t need;
    int fd_out;
    int dfd_out; /* O_DIRECT descriptor of the same file, or -1 */
    uint64_t cap_out;
    uint8_t *tail_out; /* trunc: the block holding the new end */
    /* write */
    int fd;
    uint64_t off;
    struct iovec *iov; /* advanced past what was written */
    struct iovec *iov_mem;
    uint8_t *dbuf; /* direct: the aligned buffer written at d_base */
    uint64_t d_base;
    size_t d_used; /* bytes of dbuf that are records (the rest zeros) */
    unsigned retries;
    unsigned n_iov;
    size_t total;
    /* trunc/put: names to unlink, in order; zero range */
    char (*unlink)[NAME_LEN];
    size_t n_unlink;
    char zname[NAME_LEN];
    uint64_t zfrom, zto;
    /* put/get */
    const struct raft_snapshot *snap;
    char sname[NAME_LEN];
    struct raft_snapshot *got;
};

struct slog
{
    struct store *s;
    uv_loop_t *loop;
    char dir[PATH_MAX];
    int dirfd;
    enum store_engine engine;
    size_t seg_size;
    struct store_log_options o;

    int meta_fd[2];
    uint64_t meta_seq, term, vote;
    uint64_t meta_cut; /* persisted cut index (store_format.h "meta") */

    struct seg *segs;
    size_t n_segs, cap_segs;
    int cur_fd;       /* the last segment, -1 when there is none */
    int cur_dfd;      /* uring with O_DIRECT: the same file, else -1 */
    bool direct;      /* uring appends as O_DIRECT + RWF_DSYNC writes */
    uint8_t *dtail;   /* direct: the block holding cur_end (BLOCK bytes) */
    uint64_t cur_end; /* its write offset */
    uint64_t cur_cap; /* its size */
    uint64_t *offs;   /* record offsets of [base, base + n_offs) */
    uint64_t base;
    size_t n_offs, cap_offs;
    uint64_t next; /* the next index raft will append (submission order) */

    struct snapref snaps[2]; /* newest first; index 0: none */
    bool loaded;

    struct op *head, *tail;
    bool busy;  /* an op is in flight */
    int failed; /* RAFT_* after an I/O error, else 0 */
    bool in_cb; /* callbacks running: kick once at the end */
    struct op *batch;
    unsigned batch_n;
    struct job *wjob; /* the batch's write (both engines) */

    /* worker thread */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *jq_head, *jq_tail, *dq_head, *dq_tail;
    bool stop;
    bool prep_ok; /* worker only: prep-next is ready */
    uv_async_t async;

    /* uring engine */
    struct io_uring ring;
    int efd;
    uv_poll_t poll;
    int cqes_pending;
    int wres, fres; /* results of the write and the sync */

    bool closing;
    int handles;
    store_close_cb close_cb;
    struct store_log_stats stats;
};

static struct slog *sl_of(struct store *s)
{
    return s->impl;
}

static void notice(struct slog *sl, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void notice(struct slog *sl, const char *level, const char *fmt, ...)
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

static int fail_msg(struct store *s, int rv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_msg(struct store *s, int rv, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
    va_end(ap);
    return rv;
}

static int job_err(struct job *j, int err, const char *what, const char *name)
{
    snprintf(j->err, sizeof j->err, "%s %s: %s", what, name, strerror(err));
    j->rv = raft_code(err);
    return j->rv;
}

static int fsync_dir(int dirfd)
{
    return fsync(dirfd) == 0 ? 0 : errno;
}

/* --- worker jobs (worker thread; touch only the job and dirfd) ----------- */

static void run_prep(struct job *j)
{
    struct slog *sl = j->sl;
    int fd, err;

    sl->prep_ok = false;
    fd = openat(sl->dirfd, "prep-next", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
                0600);
    if (fd < 0) {
        job_err(j, errno, "create", "prep-next");
        return;
    }
    /* Zeros written, not fallocated: a later write into unwritten extents
     * costs a metadata update per sync (docs/raft-0.15.md §4.2). */
    err = zero_range(fd, 0, sl->seg_size);
    if (err == 0 && fdatasync(fd) != 0) {
        err = errno;
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
        job_err(j, err, "prepare", "prep-next");
        return;
    }
    sl->prep_ok = true;
}

static void run_roll(struct job *j)
{
    struct slog *sl = j->sl;
    uint8_t hdr[SF_SEG_HDR];
    char name[NAME_LEN];
    const char *src = "prep-next";
    uint64_t cap = sl->seg_size;
    int fd, err = 0;

    seg_name(name, j->first);
    j->fd_out = -1;
    j->dfd_out = -1;
    if (sl->prep_ok && j->need <= sl->seg_size) {
        fd = openat(sl->dirfd, src, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            job_err(j, errno, "open", src);
            return;
        }
    } else {
        src = "tmp-roll";
        if (j->need > cap) {
            cap = (j->need + BLOCK - 1) / BLOCK * BLOCK;
        }
        fd = openat(sl->dirfd, src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0600);
        if (fd < 0) {
            job_err(j, errno, "create", src);
            return;
        }
        err = zero_range(fd, 0, cap);
    }
    sl->prep_ok = false;
    sf_seg_header(hdr, j->first);
    if (err == 0) {
        err = write_all(fd, hdr, sizeof hdr, 0);
    }
    if (err == 0 && fdatasync(fd) != 0) {
        err = errno;
    }
    /* The header is durable before the name appears, so a segment file
     * with a bad header is corruption, never a crash. */
    if (err == 0 && renameat(sl->dirfd, src, sl->dirfd, name) != 0) {
        err = errno;
    }
    if (err == 0) {
        err = fsync_dir(sl->dirfd);
    }
    if (err != 0) {
        close(fd);
        job_err(j, err, "roll to", name);
        return;
    }
    if (sl->direct) {
        j->dfd_out = openat(sl->dirfd, name, O_RDWR | O_DIRECT | O_CLOEXEC);
        if (j->dfd_out < 0) {
            close(fd);
            job_err(j, errno, "open (O_DIRECT)", name);
            return;
        }
    }
    j->fd_out = fd;
    j->cap_out = cap;
}

static void run_write(struct job *j)
{
    struct iovec *iov = j->iov;
    unsigned n = j->n_iov;
    uint64_t off = j->off;

    while (n > 0) {
        ssize_t w =
            pwritev(j->fd, iov, (int)(n > IOV_MAX ? IOV_MAX : n), (off_t)off);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            job_err(j, errno, "write", "segment");
            return;
        }
        off += (uint64_t)w;
        iov = iov_advance(iov, &n, (size_t)w);
    }
    if (fdatasync(j->fd) != 0) {
        job_err(j, errno, "fdatasync", "segment");
    }
}

/* In the order given, each durable before the next: the order is what
 * keeps the log contiguous if the node crashes midway. */
static void run_unlinks(struct job *j)
{
    int err;

    for (size_t i = 0; i < j->n_unlink; i++) {
        if (unlinkat(j->sl->dirfd, j->unlink[i], 0) != 0 && errno != ENOENT) {
            job_err(j, errno, "unlink", j->unlink[i]);
            return;
        }
        err = fsync_dir(j->sl->dirfd);
        if (err != 0) {
            job_err(j, err, "fsync", "directory");
            return;
        }
    }
}

static void run_trunc(struct job *j)
{
    struct stat st;
    int fd, err;

    run_unlinks(j);
    if (j->rv != 0 || j->zname[0] == '\0') {
        return;
    }
    fd = openat(j->sl->dirfd, j->zname, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        job_err(j, errno, "open", j->zname);
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    if (j->zto > (uint64_t)st.st_size) {
        j->zto = (uint64_t)st.st_size; /* a closed segment: to its end */
    }
    /* Zeroed, durably: a shorter rewrite must never let an old record after
     * it be read back (resurrection). */
    err = zero_range(fd, j->zfrom, j->zto);
    if (err == 0 && fdatasync(fd) != 0) {
        err = errno;
    }
    if (err != 0) {
        close(fd);
        job_err(j, err, "zero the tail of", j->zname);
        return;
    }
    if (j->sl->direct) {
        /* The block holding the new end: direct writes rewrite it. */
        uint64_t a = j->zfrom / BLOCK * BLOCK;
        ssize_t got;

        j->tail_out = calloc(1, BLOCK);
        j->dfd_out =
            openat(j->sl->dirfd, j->zname, O_RDWR | O_DIRECT | O_CLOEXEC);
        if (j->tail_out == NULL || j->dfd_out < 0) {
            close(fd);
            job_err(j, j->tail_out == NULL ? ENOMEM : errno, "open (O_DIRECT)",
                    j->zname);
            return;
        }
        got = pread(fd, j->tail_out, (size_t)(j->zfrom - a), (off_t)a);
        if (got != (ssize_t)(j->zfrom - a)) {
            close(fd);
            job_err(j, got < 0 ? errno : EIO, "read the tail of", j->zname);
            return;
        }
    }
    j->fd_out = fd;
}

static void run_put(struct job *j)
{
    const struct raft_snapshot *sn = j->snap;
    struct sf_snap_info info;
    uint8_t hdr[SF_SNAP_HDR];
    uint8_t *conf;
    uint32_t crc;
    uint64_t off;
    int fd, err = 0;

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
        j->rv = RAFT_NOMEM;
        snprintf(j->err, sizeof j->err, "out of memory");
        return;
    }
    sf_conf_encode(&sn->configuration, conf);
    sf_snap_header(hdr, &info, 0);
    crc = sf_snap_crc_start(hdr);
    crc = crc32c(crc, conf, info.conf_len);
    for (unsigned i = 0; i < sn->n_bufs; i++) {
        crc = crc32c(crc, sn->bufs[i].base, sn->bufs[i].len);
    }
    sf_snap_header(hdr, &info, crc);
    fd = openat(j->sl->dirfd, "tmp-snap",
                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(conf);
        job_err(j, errno, "create", "tmp-snap");
        return;
    }
    err = write_all(fd, hdr, sizeof hdr, 0);
    off = sizeof hdr;
    if (err == 0) {
        err = write_all(fd, conf, info.conf_len, off);
        off += info.conf_len;
    }
    for (unsigned i = 0; err == 0 && i < sn->n_bufs; i++) {
        err = write_all(fd, sn->bufs[i].base, sn->bufs[i].len, off);
        off += sn->bufs[i].len;
    }
    free(conf);
    if (err == 0 && fdatasync(fd) != 0) {
        err = errno;
    }
    close(fd);
    if (err == 0 &&
        renameat(j->sl->dirfd, "tmp-snap", j->sl->dirfd, j->sname) != 0) {
        err = errno;
    }
    if (err == 0) {
        err = fsync_dir(j->sl->dirfd);
    }
    if (err != 0) {
        job_err(j, err, "write snapshot", j->sname);
        return;
    }
    run_unlinks(j); /* older snapshots, then segments below the trailing */
}

/* Read and check snapshot @name in @dirfd; on success *out is raft's. */
static int read_snapshot(int dirfd,
                         const char *name,
                         struct raft_snapshot **out,
                         char *err,
                         size_t errlen)
{
    struct sf_snap_info info;
    uint8_t hdr[SF_SNAP_HDR];
    struct raft_snapshot *sn = NULL;
    uint8_t *conf = NULL;
    void *data = NULL;
    struct stat st;
    uint32_t crc;
    int fd, e, rv = RAFT_CORRUPT;

    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "open snapshot %s: %s", name, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return RAFT_IOERR;
    }
    if ((uint64_t)st.st_size < SF_SNAP_HDR ||
        (e = read_all(fd, hdr, sizeof hdr, 0)) != 0 ||
        sf_snap_header_check(hdr, (uint64_t)st.st_size, &info, &crc) != 0) {
        snprintf(err, errlen, "snapshot %s: bad header at offset 0", name);
        goto out;
    }
    conf = malloc(info.conf_len > 0 ? info.conf_len : 1);
    data = raft_malloc(info.data_len > 0 ? info.data_len : 1);
    sn = raft_calloc(1, sizeof *sn);
    if (conf == NULL || data == NULL || sn == NULL) {
        snprintf(err, errlen, "out of memory reading snapshot %s", name);
        rv = RAFT_NOMEM;
        goto out;
    }
    if ((e = read_all(fd, conf, info.conf_len, SF_SNAP_HDR)) != 0 ||
        (e = read_all(fd, data, info.data_len, SF_SNAP_HDR + info.conf_len)) !=
            0) {
        snprintf(err, errlen, "read snapshot %s: %s", name, strerror(e));
        rv = RAFT_IOERR;
        goto out;
    }
    if (crc32c(crc32c(sf_snap_crc_start(hdr), conf, info.conf_len), data,
               info.data_len) != crc) {
        snprintf(err, errlen, "snapshot %s: bad checksum (offset 12)", name);
        goto out;
    }
    raft_configuration_init(&sn->configuration);
    e = sf_conf_decode(conf, info.conf_len, &sn->configuration);
    if (e != 0) {
        raft_configuration_close(&sn->configuration);
        snprintf(err, errlen, "snapshot %s: bad configuration at offset %u",
                 name, SF_SNAP_HDR);
        rv = e;
        goto out;
    }
    sn->bufs = raft_malloc(sizeof *sn->bufs);
    if (sn->bufs == NULL) {
        raft_configuration_close(&sn->configuration);
        snprintf(err, errlen, "out of memory reading snapshot %s", name);
        rv = RAFT_NOMEM;
        goto out;
    }
    sn->term = info.term;
    sn->index = info.index;
    sn->configuration_index = info.conf_index;
    sn->bufs[0].base = data;
    sn->bufs[0].len = info.data_len;
    sn->n_bufs = 1;
    *out = sn;
    sn = NULL;
    data = NULL;
    rv = 0;
out:
    close(fd);
    free(conf);
    raft_free(data);
    raft_free(sn);
    return rv;
}

static void run_get(struct job *j)
{
    j->rv =
        read_snapshot(j->sl->dirfd, j->sname, &j->got, j->err, sizeof j->err);
}

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
        switch (j->kind) {
            case J_PREP:
                run_prep(j);
                break;
            case J_ROLL:
                run_roll(j);
                break;
            case J_WRITE:
                run_write(j);
                break;
            case J_TRUNC:
                run_trunc(j);
                break;
            case J_PUT:
                run_put(j);
                break;
            case J_GET:
                run_get(j);
                break;
        }
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

static struct job *job_new(struct slog *sl, enum job_kind kind)
{
    struct job *j = calloc(1, sizeof *j);

    if (j != NULL) {
        j->kind = kind;
        j->sl = sl;
        j->fd = -1;
        j->fd_out = -1;
        j->dfd_out = -1;
    }
    return j;
}

static void job_free(struct job *j)
{
    free(j->dbuf);
    free(j->tail_out);
    free(j->unlink);
    free(j->iov_mem);
    free(j);
}

static void job_submit(struct slog *sl, struct job *j)
{
    pthread_mutex_lock(&sl->mu);
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

static int add_unlink(struct job *j, const char *name)
{
    char(*u)[NAME_LEN] = realloc(j->unlink, (j->n_unlink + 1) * NAME_LEN);

    if (u == NULL) {
        return RAFT_NOMEM;
    }
    j->unlink = u;
    snprintf(j->unlink[j->n_unlink++], NAME_LEN, "%s", name);
    return 0;
}

/* --- the op queue (loop thread) -------------------------------------------
 */

static void kick(struct slog *sl);
static void maybe_shutdown(struct slog *sl);

static void set_failed(struct slog *sl, int rv, const char *msg)
{
    if (sl->failed == 0) {
        sl->failed = rv;
        snprintf(sl->s->errmsg, sizeof sl->s->errmsg, "%s", msg);
        notice(sl, "error", "store failed: %s", msg);
    }
}

static void op_free(struct op *op)
{
    if (!op->inline_bufs) {
        free(op->buf);
        free(op->sizes);
    }
    free(op);
}

/* Complete @op with @status (loop thread). */
static void op_done(struct slog *sl, struct op *op, int status)
{
    (void)sl;
    switch (op->kind) {
        case OP_APPEND:
            op->cb(op->req, status);
            break;
        case OP_PUT:
            op->put_cb(op->put, status);
            break;
        case OP_GET:
            op->get_cb(op->get, NULL, status);
            break;
        case OP_TRUNCATE:
            break;
    }
    op_free(op);
}

static void enqueue(struct slog *sl, struct op *op)
{
    op->next = NULL;
    if (sl->tail != NULL) {
        sl->tail->next = op;
    } else {
        sl->head = op;
    }
    sl->tail = op;
    kick(sl);
}

static struct op *dequeue(struct slog *sl)
{
    struct op *op = sl->head;

    if (op != NULL) {
        sl->head = op->next;
        if (sl->head == NULL) {
            sl->tail = NULL;
        }
        op->next = NULL;
    }
    return op;
}

static int reserve_offs(struct slog *sl, size_t more)
{
    if (sl->n_offs + more > sl->cap_offs) {
        size_t cap = sl->cap_offs == 0 ? 1024 : sl->cap_offs;
        uint64_t *o;

        while (cap < sl->n_offs + more) {
            cap *= 2;
        }
        o = realloc(sl->offs, cap * sizeof *o);
        if (o == NULL) {
            return RAFT_NOMEM;
        }
        sl->offs = o;
        sl->cap_offs = cap;
    }
    return 0;
}

static int push_seg(struct slog *sl, uint64_t first)
{
    if (sl->n_segs == sl->cap_segs) {
        size_t cap = sl->cap_segs == 0 ? 16 : sl->cap_segs * 2;
        struct seg *g = realloc(sl->segs, cap * sizeof *g);
        if (g == NULL) {
            return RAFT_NOMEM;
        }
        sl->segs = g;
        sl->cap_segs = cap;
    }
    sl->segs[sl->n_segs++].first = first;
    return 0;
}

static uint64_t written(const struct slog *sl)
{
    return sl->base + sl->n_offs;
}

/* Index of the segment holding @index (which is in [base, written)). */
static size_t seg_of(const struct slog *sl, uint64_t index)
{
    size_t lo = 0, hi = sl->n_segs;

    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (sl->segs[mid].first <= index) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static void close_current(struct slog *sl)
{
    if (sl->cur_fd >= 0) {
        close(sl->cur_fd);
    }
    if (sl->cur_dfd >= 0) {
        close(sl->cur_dfd);
    }
    sl->cur_fd = sl->cur_dfd = -1;
}

static void finish_batch(struct slog *sl, int status)
{
    struct op *op = sl->batch;

    sl->batch = NULL;
    sl->busy = false;
    sl->in_cb = true;
    while (op != NULL) {
        struct op *next = op->next;
        op_done(sl, op, status);
        op = next;
    }
    sl->in_cb = false;
}

/* The batch's records are on disk: account for them, then call back. */
static void batch_written(struct slog *sl)
{
    uint64_t off = sl->cur_end;
    int rv = 0;

    for (struct op *op = sl->batch; op != NULL && rv == 0; op = op->next) {
        rv = reserve_offs(sl, op->n);
        for (unsigned i = 0; rv == 0 && i < op->n; i++) {
            sl->offs[sl->n_offs++] = off;
            off += op->sizes[i];
            sl->stats.records++;
        }
    }
    if (rv != 0) {
        set_failed(sl, rv, "out of memory recording written records");
        finish_batch(sl, rv);
        return;
    }
    sl->cur_end = off;
    sl->stats.batches++;
    finish_batch(sl, 0);
}

/* Submit the @want SQEs just queued. All must go in: an SQE left behind
 * would leave cqes_pending above 0 for ever. The kernel takes what is
 * queued unless it fails; a short count is retried, and if it stays short
 * the store fails (fail-stop) rather than hang. */
static int submit_all(struct slog *sl, int want)
{
    int rv, in = 0, tries = 0;

    do {
        rv = io_uring_submit(&sl->ring);
        if (rv > 0) {
            in += rv;
        }
    } while ((rv == -EINTR || rv == -EAGAIN || (rv >= 0 && in < want)) &&
             ++tries < 100);
    if (rv < 0) {
        return rv;
    }
    return in >= want ? 0 : -EIO;
}

/* uring engine: submit the batch's write (from @done bytes) and sync. */
static int uring_submit(struct slog *sl)
{
    struct job *w = sl->wjob;
    struct io_uring_sqe *sqe;

    sqe = io_uring_get_sqe(&sl->ring);
    if (sqe == NULL) {
        return -EBUSY;
    }
    if (w->dbuf != NULL) {
        /* One O_DIRECT write, durable by itself (RWF_DSYNC): into
         * pre-zeroed, written blocks it needs no metadata, and the kernel
         * issues it without a worker thread. */
        io_uring_prep_write(sqe, sl->cur_dfd, w->dbuf, (unsigned)w->total,
                            w->off);
        sqe->rw_flags = RWF_DSYNC;
        io_uring_sqe_set_data64(sqe, 1);
        sl->cqes_pending = 1;
        sl->wres = 0;
        sl->fres = 0;
        return submit_all(sl, 1);
    }
    io_uring_prep_writev(sqe, w->fd, w->iov,
                         w->n_iov > IOV_MAX ? IOV_MAX : w->n_iov, w->off);
    sqe->flags |= IOSQE_IO_LINK;
    io_uring_sqe_set_data64(sqe, 1);
    sqe = io_uring_get_sqe(&sl->ring);
    if (sqe == NULL) {
        return -EBUSY;
    }
    io_uring_prep_fsync(sqe, w->fd, IORING_FSYNC_DATASYNC);
    io_uring_sqe_set_data64(sqe, 2);
    sl->cqes_pending = 2;
    sl->wres = 0;
    sl->fres = 0;
    return submit_all(sl, 2);
}

static void uring_batch_done(struct slog *sl)
{
    struct job *w = sl->wjob;
    char msg[RAFT_ERRMSG_BUF_SIZE];
    int wr = sl->wres, fr = sl->fres, err = 0;

    if (wr == -EAGAIN || wr == -EINTR ||
        (wr >= 0 && (size_t)wr == w->total &&
         (fr == -EAGAIN || fr == -EINTR))) {
        err = -uring_submit(sl); /* the same write and sync, again */
    } else if (wr < 0) {
        err = -wr;
    } else if ((size_t)wr < w->total && w->dbuf != NULL) {
        /* A short direct write: the whole aligned buffer again (the same
         * bytes at the same place), a few times at most. */
        err = ++w->retries > 8 ? EIO : -uring_submit(sl);
    } else if ((size_t)wr < w->total) {
        /* Short write (the linked sync was cancelled): the rest, again. */
        w->off += (uint64_t)wr;
        w->total -= (size_t)wr;
        w->iov = iov_advance(w->iov, &w->n_iov, (size_t)wr);
        err = -uring_submit(sl);
    } else if (fr < 0) {
        err = -fr;
    } else {
        sl->wjob = NULL;
        if (w->dbuf != NULL) {
            /* The block holding the new end, for the next write. */
            uint64_t end = w->d_base + w->d_used;
            uint64_t a = end / BLOCK * BLOCK;
            memset(sl->dtail, 0, BLOCK);
            memcpy(sl->dtail, w->dbuf + (a - w->d_base), (size_t)(end - a));
        }
        job_free(w);
        batch_written(sl);
        kick(sl);
        maybe_shutdown(sl);
        return;
    }
    if (err == 0) {
        return; /* resubmitted */
    }
    sl->wjob = NULL;
    snprintf(msg, sizeof msg,
             "io_uring write/sync of segment %" PRIu64 " at offset %" PRIu64
             ": %s",
             sl->segs[sl->n_segs - 1].first, w->off, strerror(err));
    job_free(w);
    set_failed(sl, raft_code(err), msg);
    finish_batch(sl, sl->failed);
    kick(sl);
    maybe_shutdown(sl);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct slog *sl = h->data;
    struct io_uring_cqe *cqe;
    uint64_t v;

    (void)status;
    (void)events;
    while (read(sl->efd, &v, sizeof v) > 0) {
    }
    while (io_uring_peek_cqe(&sl->ring, &cqe) == 0) {
        uint64_t tag = io_uring_cqe_get_data64(cqe);
        if (tag == 1) {
            sl->wres = cqe->res;
        } else {
            sl->fres = cqe->res;
        }
        io_uring_cqe_seen(&sl->ring, cqe);
        if (--sl->cqes_pending == 0 && sl->wjob != NULL) {
            uring_batch_done(sl);
            if (sl->stop) {
                return; /* it finished the close: the handles are closing */
            }
        }
    }
}

static void start_write(struct slog *sl)
{
    struct job *w = job_new(sl, J_WRITE);
    unsigned i = 0;
    int rv;

    if (w == NULL ||
        (w->iov = w->iov_mem = calloc(sl->batch_n, sizeof *w->iov)) == NULL) {
        free(w);
        set_failed(sl, RAFT_NOMEM, "out of memory starting a write");
        finish_batch(sl, RAFT_NOMEM);
        return;
    }
    for (struct op *op = sl->batch; op != NULL; op = op->next, i++) {
        w->iov[i].iov_base = op->buf;
        w->iov[i].iov_len = op->bytes;
        w->total += op->bytes;
    }
    w->n_iov = i;
    w->fd = sl->cur_fd;
    w->off = sl->cur_end;
    if (sl->engine == STORE_ENGINE_URING && sl->direct) {
        uint64_t a = sl->cur_end / BLOCK * BLOCK;
        size_t head = (size_t)(sl->cur_end - a);
        size_t len = (head + w->total + BLOCK - 1) / BLOCK * BLOCK;
        uint8_t *p;

        w->dbuf = aligned_alloc(BLOCK, len);
        if (w->dbuf == NULL) {
            job_free(w);
            set_failed(sl, RAFT_NOMEM, "out of memory starting a write");
            finish_batch(sl, RAFT_NOMEM);
            return;
        }
        /* The start of the last block is rewritten with what it holds;
         * after the records, zeros, which the pre-zeroed file holds too. */
        memcpy(w->dbuf, sl->dtail, head);
        p = w->dbuf + head;
        for (unsigned k = 0; k < w->n_iov; k++) {
            memcpy(p, w->iov[k].iov_base, w->iov[k].iov_len);
            p += w->iov[k].iov_len;
        }
        memset(p, 0, len - head - w->total);
        w->d_base = a;
        w->d_used = head + w->total;
        w->off = a;
        w->total = len;
    }
    sl->wjob = w;
    if (sl->engine == STORE_ENGINE_URING) {
        rv = uring_submit(sl);
        if (rv != 0) {
            char msg[RAFT_ERRMSG_BUF_SIZE];
            snprintf(msg, sizeof msg, "io_uring_submit: %s", strerror(-rv));
            sl->wjob = NULL;
            job_free(w);
            set_failed(sl, RAFT_IOERR, msg);
            finish_batch(sl, RAFT_IOERR);
        }
        return;
    }
    job_submit(sl, w);
}

static void start_prep(struct slog *sl)
{
    struct job *j = job_new(sl, J_PREP);

    if (j != NULL) {
        job_submit(sl, j); /* best effort: a roll prepares its own file */
    }
}

/* Start the batch at the head of the queue: roll first if needed. */
static void start_batch(struct slog *sl)
{
    size_t total = 0;
    struct op **pp = &sl->batch;

    sl->batch_n = 0;
    while (sl->head != NULL && sl->head->kind == OP_APPEND &&
           (sl->batch_n == 0 || total + sl->head->bytes <= BATCH_MAX) &&
           sl->batch_n < IOV_MAX) {
        struct op *op = dequeue(sl);
        total += op->bytes;
        *pp = op;
        pp = &op->next;
        sl->batch_n++;
    }
    sl->busy = true;
    if (sl->cur_fd < 0 || sl->cur_end + total > sl->cur_cap) {
        struct job *j = job_new(sl, J_ROLL);
        if (j == NULL) {
            set_failed(sl, RAFT_NOMEM, "out of memory rolling a segment");
            finish_batch(sl, RAFT_NOMEM);
            return;
        }
        j->first = written(sl);
        j->need = SF_SEG_HDR + total;
        job_submit(sl, j);
        return;
    }
    start_write(sl);
}

static void start_truncate(struct slog *sl, struct op *op)
{
    uint64_t index = op->index;
    struct job *j;
    size_t k;

    op_free(op);
    if (index >= written(sl)) {
        return; /* nothing on disk at or after it */
    }
    j = job_new(sl, J_TRUNC);
    if (j == NULL) {
        set_failed(sl, RAFT_NOMEM, "out of memory truncating");
        return;
    }
    j->first = index;
    /* Later segments go first, highest first: a crash midway leaves a
     * contiguous log. Then the segment holding @index is zeroed from it. */
    k = index < sl->segs[0].first ? 0 : seg_of(sl, index);
    for (size_t i = sl->n_segs; i-- > k + 1;) {
        char name[NAME_LEN];
        seg_name(name, sl->segs[i].first);
        if (add_unlink(j, name) != 0) {
            job_free(j);
            set_failed(sl, RAFT_NOMEM, "out of memory truncating");
            return;
        }
    }
    if (index <= sl->segs[k].first) {
        /* The whole segment goes: its name says where it starts. */
        char name[NAME_LEN];
        seg_name(name, sl->segs[k].first);
        if (add_unlink(j, name) != 0) {
            job_free(j);
            set_failed(sl, RAFT_NOMEM, "out of memory truncating");
            return;
        }
        j->zname[0] = '\0';
    } else {
        seg_name(j->zname, sl->segs[k].first);
        j->zfrom = sl->offs[index - sl->base];
        j->zto = k == sl->n_segs - 1 ? sl->cur_end : UINT64_MAX;
    }
    sl->busy = true;
    job_submit(sl, j);
}

static void trunc_done(struct slog *sl, struct job *j)
{
    uint64_t index = j->first;
    size_t k = index < sl->segs[0].first ? 0 : seg_of(sl, index);

    if (j->rv != 0) {
        set_failed(sl, j->rv, j->err);
        return;
    }
    close_current(sl);
    if (j->zname[0] == '\0') {
        /* The next append starts a new segment at @index: the previous
         * one (if any) ends right before it. */
        sl->n_segs = k;
        sl->cur_cap = 0;
        sl->cur_end = 0;
    } else {
        struct stat st;
        sl->n_segs = k + 1;
        sl->cur_fd = j->fd_out;
        sl->cur_dfd = j->dfd_out;
        j->fd_out = j->dfd_out = -1;
        if (j->tail_out != NULL) {
            memcpy(sl->dtail, j->tail_out, BLOCK);
        }
        sl->cur_end = j->zfrom;
        sl->cur_cap =
            fstat(sl->cur_fd, &st) == 0 ? (uint64_t)st.st_size : j->zfrom;
    }
    if (index < sl->base) {
        sl->base = index;
        sl->n_offs = 0;
    } else {
        sl->n_offs = index - sl->base;
    }
    sl->stats.truncations++;
}

static void start_put(struct slog *sl, struct op *op)
{
    const struct raft_snapshot *sn = op->snap;
    struct job *j = job_new(sl, J_PUT);
    uint64_t keep_from;
    int rv = 0;

    if (j == NULL) {
        set_failed(sl, RAFT_NOMEM, "out of memory storing a snapshot");
        op_done(sl, op, RAFT_NOMEM);
        return;
    }
    j->snap = sn;
    snap_name(j->sname, sn->term, sn->index);
    /* Keep the newest two: the new one and the previous newest. */
    if (sl->snaps[1].index != 0) {
        char name[NAME_LEN];
        snap_name(name, sl->snaps[1].term, sl->snaps[1].index);
        if (strcmp(name, j->sname) != 0) {
            rv = add_unlink(j, name);
        }
    }
    if (op->trailing == 0) {
        /* An installed snapshot replaces the log: highest first. */
        for (size_t i = sl->n_segs; rv == 0 && i-- > 0;) {
            char name[NAME_LEN];
            seg_name(name, sl->segs[i].first);
            rv = add_unlink(j, name);
        }
    } else {
        keep_from = sn->index > op->trailing ? sn->index - op->trailing : 0;
        /* Lowest first, never the last: a crash midway leaves a
         * contiguous suffix. */
        for (size_t i = 0; rv == 0 && i + 1 < sl->n_segs; i++) {
            if (sl->segs[i + 1].first > keep_from) {
                break;
            }
            char name[NAME_LEN];
            seg_name(name, sl->segs[i].first);
            rv = add_unlink(j, name);
        }
    }
    if (rv != 0) {
        job_free(j);
        set_failed(sl, rv, "out of memory storing a snapshot");
        op_done(sl, op, rv);
        return;
    }
    j->first = op->trailing;
    sl->busy = true;
    sl->batch = op; /* held until the job completes */
    job_submit(sl, j);
}

static void put_done(struct slog *sl, struct job *j)
{
    struct op *op = sl->batch;
    const struct raft_snapshot *sn = op->snap;
    size_t dropped = 0;

    sl->batch = NULL;
    sl->busy = false;
    if (j->rv != 0) {
        set_failed(sl, j->rv, j->err);
        op_done(sl, op, j->rv);
        return;
    }
    if (!(sl->snaps[0].term == sn->term && sl->snaps[0].index == sn->index)) {
        sl->snaps[1] = sl->snaps[0];
    }
    sl->snaps[0].term = sn->term;
    sl->snaps[0].index = sn->index;
    if (op->trailing == 0) {
        close_current(sl);
        sl->cur_end = sl->cur_cap = 0;
        sl->n_segs = 0;
        sl->base = sn->index + 1;
        sl->n_offs = 0;
    } else {
        /* Segments removed from the front (j counted them after the
         * snapshot names). */
        size_t n_snap = j->n_unlink;
        for (size_t i = 0; i < j->n_unlink; i++) {
            if (strncmp(j->unlink[i], "seg-", 4) == 0) {
                n_snap = i;
                break;
            }
        }
        dropped = j->n_unlink - n_snap;
        if (dropped > 0) {
            uint64_t new_base = sl->segs[dropped].first;
            size_t gone = (size_t)(new_base - sl->base);
            if (gone > sl->n_offs) {
                gone = sl->n_offs;
            }
            memmove(sl->segs, sl->segs + dropped,
                    (sl->n_segs - dropped) * sizeof *sl->segs);
            sl->n_segs -= dropped;
            memmove(sl->offs, sl->offs + gone,
                    (sl->n_offs - gone) * sizeof *sl->offs);
            sl->n_offs -= gone;
            sl->base = new_base;
        }
    }
    sl->in_cb = true;
    op_done(sl, op, 0);
    sl->in_cb = false;
}

static void start_get(struct slog *sl, struct op *op)
{
    struct job *j;

    if (sl->snaps[0].index == 0) {
        snprintf(sl->s->errmsg, sizeof sl->s->errmsg, "no snapshot");
        op_done(sl, op, RAFT_NOTFOUND);
        return;
    }
    j = job_new(sl, J_GET);
    if (j == NULL) {
        op_done(sl, op, RAFT_NOMEM);
        return;
    }
    snap_name(j->sname, sl->snaps[0].term, sl->snaps[0].index);
    sl->busy = true;
    sl->batch = op;
    job_submit(sl, j);
}

static void kick(struct slog *sl)
{
    while (!sl->busy && !sl->in_cb && sl->head != NULL) {
        struct op *op;

        if (sl->failed != 0) {
            sl->in_cb = true;
            while ((op = dequeue(sl)) != NULL) {
                op_done(sl, op, sl->failed);
            }
            sl->in_cb = false;
            continue;
        }
        switch (sl->head->kind) {
            case OP_APPEND:
                start_batch(sl);
                break;
            case OP_TRUNCATE:
                start_truncate(sl, dequeue(sl));
                break;
            case OP_PUT:
                start_put(sl, dequeue(sl));
                break;
            case OP_GET:
                start_get(sl, dequeue(sl));
                break;
        }
    }
}

static void job_done(struct slog *sl, struct job *j)
{
    switch (j->kind) {
        case J_PREP:
            if (j->rv != 0) {
                notice(sl, "warn", "segment preparation failed: %s", j->err);
            }
            break;
        case J_ROLL:
            if (j->rv != 0) {
                set_failed(sl, j->rv, j->err);
                finish_batch(sl, sl->failed);
                break;
            }
            close_current(sl);
            if (push_seg(sl, j->first) != 0) {
                close(j->fd_out);
                if (j->dfd_out >= 0) {
                    close(j->dfd_out);
                }
                set_failed(sl, RAFT_NOMEM, "out of memory rolling a segment");
                finish_batch(sl, RAFT_NOMEM);
                break;
            }
            sl->cur_fd = j->fd_out;
            sl->cur_dfd = j->dfd_out;
            memset(sl->dtail, 0, BLOCK);
            sf_seg_header(sl->dtail, j->first);
            sl->cur_end = SF_SEG_HDR;
            sl->cur_cap = j->cap_out;
            if (sl->n_offs == 0) {
                sl->base = j->first;
            }
            sl->stats.rolls++;
            if (sl->failed == 0) {
                start_write(sl);
            } else {
                /* The store failed while the roll ran (set_term, ...):
                 * the batch must still get its callbacks. */
                finish_batch(sl, sl->failed);
            }
            start_prep(sl); /* the next one, ahead of need, after the write */
            break;
        case J_WRITE:
            sl->wjob = NULL;
            if (j->rv != 0) {
                set_failed(sl, j->rv, j->err);
                finish_batch(sl, sl->failed);
            } else {
                batch_written(sl);
            }
            break;
        case J_TRUNC:
            sl->busy = false;
            trunc_done(sl, j);
            break;
        case J_PUT:
            put_done(sl, j);
            break;
        case J_GET: {
            struct op *op = sl->batch;
            sl->batch = NULL;
            sl->busy = false;
            if (j->rv != 0) {
                /* A snapshot we wrote reads back wrong: stop. */
                set_failed(sl, j->rv, j->err);
                op_done(sl, op, j->rv);
            } else {
                sl->in_cb = true;
                op->get_cb(op->get, j->got, 0);
                sl->in_cb = false;
                op_free(op);
            }
            break;
        }
    }
    job_free(j);
}

static void async_cb(uv_async_t *h)
{
    struct slog *sl = h->data;

    for (;;) {
        struct job *j;

        pthread_mutex_lock(&sl->mu);
        j = sl->dq_head;
        if (j != NULL) {
            sl->dq_head = j->next;
            if (sl->dq_head == NULL) {
                sl->dq_tail = NULL;
            }
        }
        pthread_mutex_unlock(&sl->mu);
        if (j == NULL) {
            break;
        }
        job_done(sl, j);
        if (sl->stop) {
            /* A callback in job_done closed the store: the worker is gone
             * and mu destroyed; the handles are closing. */
            return;
        }
        kick(sl);
    }
    maybe_shutdown(sl);
}

/* --- shutdown --------------------------------------------------------------
 */

static void free_state(struct slog *sl)
{
    close_current(sl);
    free(sl->dtail);
    for (int i = 0; i < 2; i++) {
        if (sl->meta_fd[i] >= 0) {
            close(sl->meta_fd[i]);
        }
    }
    if (sl->dirfd >= 0) {
        close(sl->dirfd);
    }
    free(sl->segs);
    free(sl->offs);
    free(sl);
}

static void handle_closed(uv_handle_t *h)
{
    struct slog *sl = h->data;
    struct store *s = sl->s;
    store_close_cb cb = sl->close_cb;

    if (--sl->handles > 0) {
        return;
    }
    if (sl->engine == STORE_ENGINE_URING) {
        /* Here, not in maybe_shutdown: that may run inside poll_cb (a
         * batch's completion), whose loop reads the ring again. */
        io_uring_queue_exit(&sl->ring);
        close(sl->efd);
    }
    free_state(sl);
    s->impl = NULL;
    if (cb != NULL) {
        cb(s);
    }
}

static void stop_worker(struct slog *sl)
{
    pthread_mutex_lock(&sl->mu);
    sl->stop = true;
    pthread_cond_signal(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
    pthread_join(sl->th, NULL);
    /* Only background preparations can be left: nothing waits for them. */
    while (sl->dq_head != NULL) {
        struct job *j = sl->dq_head;
        sl->dq_head = j->next;
        job_free(j);
    }
    sl->dq_tail = NULL;
    pthread_mutex_destroy(&sl->mu);
    pthread_cond_destroy(&sl->cv);
}

static void maybe_shutdown(struct slog *sl)
{
    if (!sl->closing || sl->busy || sl->head != NULL || sl->close_cb == NULL ||
        sl->handles == 0 || sl->stop) {
        return;
    }
    stop_worker(sl);
    uv_close((uv_handle_t *)&sl->async, handle_closed);
    if (sl->engine == STORE_ENGINE_URING) {
        /* The ring and its eventfd go in handle_closed, after the last
         * callback of this loop turn. */
        uv_close((uv_handle_t *)&sl->poll, handle_closed);
    }
}

static void store_close(struct store *s, store_close_cb cb)
{
    struct slog *sl = sl_of(s);

    sl->closing = true;
    sl->close_cb = cb;
    /* Queued work finishes first: its callbacks still reach raft. */
    kick(sl);
    maybe_shutdown(sl);
}

/* --- metadata (synchronous) ------------------------------------------------
 */

static int meta_write(struct slog *sl, uint64_t term, uint64_t vote)
{
    uint8_t buf[SF_META_SIZE];
    uint64_t seq = sl->meta_seq + 1;
    int slot = (int)(seq % 2);
    int err;

    if (sl->failed != 0) {
        return sl->failed;
    }
    sf_meta_encode(buf, seq, term, vote, sl->meta_cut);
    /* The other slot keeps the previous state: a torn write here loses
     * only this update, which has not been reported durable yet. */
    err = write_all(sl->meta_fd[slot], buf, sizeof buf, 0);
    if (err == 0 && fdatasync(sl->meta_fd[slot]) != 0) {
        err = errno;
    }
    if (err != 0) {
        char msg[RAFT_ERRMSG_BUF_SIZE];
        snprintf(msg, sizeof msg, "write meta-%c: %s", slot == 0 ? 'a' : 'b',
                 strerror(err));
        set_failed(sl, raft_code(err), msg);
        return sl->failed;
    }
    sl->meta_seq = seq;
    sl->term = term;
    sl->vote = vote;
    return 0;
}

static int store_set_term(struct store *s, raft_term term)
{
    struct slog *sl = sl_of(s);
    return meta_write(sl, term, 0);
}

static int store_set_vote(struct store *s, raft_id id)
{
    struct slog *sl = sl_of(s);
    return meta_write(sl, sl->term, id);
}

static int meta_open(struct slog *sl, char *errmsg)
{
    static const char *names[2] = {"meta-a", "meta-b"};
    uint64_t seq[2] = {0, 0}, term[2] = {0, 0}, vote[2] = {0, 0};
    uint64_t cut[2] = {0, 0};
    int st[2];
    bool created = false;

    for (int i = 0; i < 2; i++) {
        uint8_t buf[SF_META_SIZE];
        struct stat sb;
        int fd, err;

        fd = openat(sl->dirfd, names[i], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0 || fstat(fd, &sb) != 0) {
            errf(errmsg, "open %s/%s: %s", sl->dir, names[i], strerror(errno));
            return RAFT_IOERR;
        }
        sl->meta_fd[i] = fd;
        memset(buf, 0, sizeof buf);
        if (sb.st_size < (off_t)SF_META_SIZE) {
            /* Allocated once, at full size, so an update never needs
             * space. */
            err = write_all(fd, buf, sizeof buf, 0);
            if (err == 0 && fdatasync(fd) != 0) {
                err = errno;
            }
            if (err != 0) {
                errf(errmsg, "create %s/%s: %s", sl->dir, names[i],
                     strerror(err));
                return raft_code(err);
            }
            created = true;
        } else if ((err = read_all(fd, buf, sizeof buf, 0)) != 0) {
            errf(errmsg, "read %s/%s: %s", sl->dir, names[i], strerror(err));
            return RAFT_IOERR;
        }
        st[i] = sf_meta_decode(buf, &seq[i], &term[i], &vote[i], &cut[i]);
    }
    if (created && fsync_dir(sl->dirfd) != 0) {
        errf(errmsg, "fsync %s: %s", sl->dir, strerror(errno));
        return RAFT_IOERR;
    }
    if (st[0] < 0 && st[1] < 0) {
        errf(errmsg, "%s/meta-a and meta-b: both bad at offset 0 (checksum)",
             sl->dir);
        return RAFT_CORRUPT;
    }
    for (int i = 0; i < 2; i++) {
        if (st[i] < 0) {
            /* The torn write of the latest update, which never returned. */
            notice(sl, "warn",
                   "%s/%s: bad record (a torn metadata write), using the "
                   "other copy",
                   sl->dir, names[i]);
        }
        if (st[i] == 0 && (seq[i] % 2) != (uint64_t)i) {
            errf(errmsg,
                 "%s/%s: sequence %" PRIu64
                 " in the wrong "
                 "slot",
                 sl->dir, names[i], seq[i]);
            return RAFT_CORRUPT;
        }
    }
    int best = -1;
    for (int i = 0; i < 2; i++) {
        if (st[i] == 0 && (best < 0 || seq[i] > seq[best])) {
            best = i;
        }
    }
    if (best >= 0) {
        sl->meta_seq = seq[best];
        sl->term = term[best];
        sl->vote = vote[best];
        sl->meta_cut = cut[best];
    }
    return 0;
}

/* --- load (synchronous) ----------------------------------------------------
 */

struct scan
{
    uint64_t *segs;
    size_t n_segs;
    struct snapref *snaps;
    size_t n_snaps;
    struct raft_entry *entries;
    size_t n_entries, cap_entries;
    uint64_t first; /* index of entries[0] */
    uint64_t last_term;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_snap_desc(const void *a, const void *b)
{
    const struct snapref *x = a, *y = b;
    if (x->index != y->index) {
        return x->index < y->index ? 1 : -1;
    }
    return x->term < y->term ? 1 : x->term > y->term ? -1 : 0;
}

static bool parse_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;

    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10) {
            return false;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return true;
}

static int list_dir(struct slog *sl, struct scan *sc)
{
    DIR *d;
    struct dirent *e;
    int fd = dup(sl->dirfd);
    int rv = 0;

    if (fd < 0 || (d = fdopendir(fd)) == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        return fail_msg(sl->s, RAFT_IOERR, "list %s: %s", sl->dir,
                        strerror(errno));
    }
    rewinddir(d);
    while (rv == 0 && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        uint64_t a, b;

        if (len == 24 && strncmp(n, "seg-", 4) == 0 &&
            parse_u64(n + 4, 20, &a)) {
            uint64_t *g = realloc(sc->segs, (sc->n_segs + 1) * sizeof *g);
            if (g == NULL) {
                rv = RAFT_NOMEM;
                break;
            }
            sc->segs = g;
            sc->segs[sc->n_segs++] = a;
        } else if (len == 46 && strncmp(n, "snap-", 5) == 0 && n[25] == '-' &&
                   parse_u64(n + 5, 20, &a) && parse_u64(n + 26, 20, &b)) {
            struct snapref *g =
                realloc(sc->snaps, (sc->n_snaps + 1) * sizeof *g);
            if (g == NULL) {
                rv = RAFT_NOMEM;
                break;
            }
            sc->snaps = g;
            sc->snaps[sc->n_snaps].term = a;
            sc->snaps[sc->n_snaps++].index = b;
        } else if (strncmp(n, "tmp-", 4) == 0 || strncmp(n, "prep-", 5) == 0) {
            /* Unfinished: never part of the log (renamed only when
             * durable). */
            (void)unlinkat(sl->dirfd, n, 0);
        }
    }
    closedir(d);
    if (rv != 0) {
        return fail_msg(sl->s, rv, "out of memory listing %s", sl->dir);
    }
    if (sc->n_segs > 1) {
        qsort(sc->segs, sc->n_segs, sizeof *sc->segs, cmp_u64);
    }
    if (sc->n_snaps > 1) {
        qsort(sc->snaps, sc->n_snaps, sizeof *sc->snaps, cmp_snap_desc);
    }
    return 0;
}

static bool zero_from(const uint8_t *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* The bad record at @p of a last segment of @size bytes is a torn tail if
 * nothing that could be a later record follows it: every byte after the
 * extent it claims is zero, and no record magic sits inside that extent. */
static bool torn_tail(const uint8_t *file, size_t size, size_t p, size_t *end)
{
    size_t e = p + SF_REC_HDR;

    if (size - p >= SF_REC_HDR) {
        size_t len = le_get32(file + p + 28);
        if (len <= SF_REC_MAX && sf_rec_size(len) <= size - p) {
            e = p + sf_rec_size(len);
        }
    } else {
        e = size;
    }
    *end = e;
    if (!zero_from(file, e, size)) {
        return false;
    }
    /* A valid record inside the extent means the length was damaged, not
     * torn: refuse. A bare magic is not enough (a payload may hold
     * "REC1" at an 8-aligned offset); its checksum must hold too. */
    for (size_t q = p + 8; q + 4 <= e; q += 8) {
        struct sf_rec r;
        enum sf_rec_status st;

        if (le_get32(file + q) != SF_REC_MAGIC) {
            continue;
        }
        st = sf_rec_decode(file + q, size - q, 0, &r);
        if (st == SF_REC_OK || st == SF_REC_INDEX) {
            return false;
        }
    }
    return true;
}

static int push_entry(struct scan *sc, const struct sf_rec *r)
{
    struct raft_entry *e;

    if (sc->n_entries == sc->cap_entries) {
        size_t cap = sc->cap_entries == 0 ? 1024 : sc->cap_entries * 2;
        struct raft_entry *g = raft_realloc(sc->entries, cap * sizeof *g);
        if (g == NULL) {
            return RAFT_NOMEM;
        }
        sc->entries = g;
        sc->cap_entries = cap;
    }
    e = &sc->entries[sc->n_entries];
    memset(e, 0, sizeof *e);
    e->term = r->term;
    e->type = (unsigned short)r->type;
    e->buf.len = r->len;
    e->buf.base = raft_malloc(r->len > 0 ? r->len : 8);
    if (e->buf.base == NULL) {
        return RAFT_NOMEM;
    }
    memcpy(e->buf.base, r->buf, r->len);
    e->batch = e->buf.base; /* raft frees each batch once */
    sc->n_entries++;
    sc->last_term = r->term;
    return 0;
}

static void free_entries(struct scan *sc)
{
    for (size_t i = 0; i < sc->n_entries; i++) {
        raft_free(sc->entries[i].buf.base);
    }
    raft_free(sc->entries);
    sc->entries = NULL;
    sc->n_entries = sc->cap_entries = 0;
}

/* Read every segment into @sc and the store's bookkeeping. */
static int load_segments(struct slog *sl, struct scan *sc)
{
    uint64_t expect = 0;
    uint8_t *file = NULL;
    int rv = 0;

    for (size_t k = 0; k < sc->n_segs && rv == 0; k++) {
        char name[NAME_LEN];
        struct stat st;
        uint64_t first;
        size_t size, p;
        bool last = k + 1 == sc->n_segs;
        int fd, err;

        seg_name(name, sc->segs[k]);
        fd = openat(sl->dirfd, name, O_RDWR | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0) {
            rv = fail_msg(sl->s, RAFT_IOERR, "open %s/%s: %s", sl->dir, name,
                          strerror(errno));
            if (fd >= 0) {
                close(fd);
            }
            break;
        }
        size = (size_t)st.st_size;
        free(file);
        file = malloc(size > 0 ? size : 1);
        if (file == NULL) {
            close(fd);
            rv = fail_msg(sl->s, RAFT_NOMEM, "out of memory reading %s", name);
            break;
        }
        if ((err = read_all(fd, file, size, 0)) != 0) {
            close(fd);
            rv = fail_msg(sl->s, RAFT_IOERR, "read %s/%s: %s", sl->dir, name,
                          strerror(err));
            break;
        }
        if (size < SF_SEG_HDR || sf_seg_header_check(file, &first) != 0 ||
            first != sc->segs[k]) {
            close(fd);
            rv = fail_msg(sl->s, RAFT_CORRUPT,
                          "%s/%s: bad segment header at offset 0", sl->dir,
                          name);
            break;
        }
        if (k == 0) {
            expect = first;
            sc->first = first;
            sl->base = first;
        } else if (first != expect) {
            close(fd);
            rv = fail_msg(sl->s, RAFT_CORRUPT,
                          "%s/%s: starts at index %" PRIu64
                          " but the log before it ends at %" PRIu64 " (a gap)",
                          sl->dir, name, first, expect - 1);
            break;
        }
        if ((rv = push_seg(sl, first)) != 0) {
            close(fd);
            fail_msg(sl->s, rv, "out of memory");
            break;
        }
        p = SF_SEG_HDR;
        for (;;) {
            struct sf_rec r;
            enum sf_rec_status stt =
                sf_rec_decode(file + p, size - p, expect, &r);
            size_t end;

            if (stt == SF_REC_OK) {
                if ((rv = push_entry(sc, &r)) != 0 ||
                    (rv = reserve_offs(sl, 1)) != 0) {
                    fail_msg(sl->s, rv, "out of memory loading %s", name);
                    break;
                }
                sl->offs[sl->n_offs++] = p;
                p += r.size;
                expect++;
                continue;
            }
            if (stt == SF_REC_ZERO) {
                if (!zero_from(file, p, size)) {
                    rv = fail_msg(sl->s, RAFT_CORRUPT,
                                  "%s/%s: data after the end of the records "
                                  "at offset %zu (index %" PRIu64 ")",
                                  sl->dir, name, p, expect);
                }
                break;
            }
            if (stt != SF_REC_INDEX && last && torn_tail(file, size, p, &end)) {
                /* Cut, durably, and keep the node from voting until the
                 * log holds this index again: the record may have been
                 * acknowledged (rio's no-vote state). The cut index goes
                 * into the metadata first, so that every later start (a
                 * restart, a --bootstrap that is then ignored) still
                 * knows it after the record is gone. */
                if (expect > sl->meta_cut) {
                    sl->meta_cut = expect;
                    rv = meta_write(sl, sl->term, sl->vote);
                    if (rv != 0) {
                        break;
                    }
                }
                err = zero_range(fd, p, end);
                if (err == 0 && fdatasync(fd) != 0) {
                    err = errno;
                }
                if (err != 0) {
                    rv = fail_msg(sl->s, raft_code(err),
                                  "cut torn tail of %s/%s: %s", sl->dir, name,
                                  strerror(err));
                    break;
                }
                sl->s->cut_index = expect;
                notice(sl, "warn",
                       "cut a torn record at the tail: %s/%s offset %zu "
                       "(index %" PRIu64
                       "); no votes until the log holds "
                       "it again",
                       sl->dir, name, p, expect);
                break;
            }
            rv = fail_msg(sl->s, RAFT_CORRUPT,
                          "%s/%s: bad record at offset %zu (index %" PRIu64
                          ")%s",
                          sl->dir, name, p, expect,
                          stt == SF_REC_INDEX ? ": unexpected index"
                                              : ", not a torn tail");
            break;
        }
        if (rv != 0) {
            close(fd);
            break;
        }
        if (last) {
            sl->cur_fd = fd;
            sl->cur_end = p;
            sl->cur_cap = size;
            if (sl->direct) {
                uint64_t a = p / BLOCK * BLOCK;
                sl->cur_dfd =
                    openat(sl->dirfd, name, O_RDWR | O_DIRECT | O_CLOEXEC);
                if (sl->cur_dfd < 0 || size % BLOCK != 0) {
                    rv = fail_msg(sl->s, RAFT_IOERR,
                                  "open %s/%s with O_DIRECT: %s", sl->dir, name,
                                  sl->cur_dfd < 0 ? strerror(errno)
                                                  : "size not in blocks");
                    break;
                }
                memset(sl->dtail, 0, BLOCK);
                memcpy(sl->dtail, file + a, (size_t)(p - a));
            }
        } else {
            close(fd);
        }
    }
    free(file);
    return rv;
}

static void reset_state(struct slog *sl)
{
    close_current(sl);
    sl->cur_end = sl->cur_cap = 0;
    sl->n_segs = 0;
    sl->n_offs = 0;
    sl->base = 1;
    sl->next = 1;
    memset(sl->snaps, 0, sizeof sl->snaps);
    sl->s->cut_index = 0;
}

/* The whole state: snapshot, entries, bookkeeping. */
static int scan_all(struct slog *sl,
                    struct scan *sc,
                    struct raft_snapshot **snapshot)
{
    int rv;

    reset_state(sl);
    memset(sc, 0, sizeof *sc);
    *snapshot = NULL;
    rv = list_dir(sl, sc);
    if (rv != 0) {
        return rv;
    }
    for (size_t i = 2; i < sc->n_snaps; i++) {
        char name[NAME_LEN];
        snap_name(name, sc->snaps[i].term, sc->snaps[i].index);
        (void)unlinkat(sl->dirfd, name, 0); /* older than the two kept */
    }
    if (sc->n_snaps > 0) {
        char name[NAME_LEN];
        snap_name(name, sc->snaps[0].term, sc->snaps[0].index);
        rv = read_snapshot(sl->dirfd, name, snapshot, sl->s->errmsg,
                           sizeof sl->s->errmsg);
        if (rv != 0) {
            return rv; /* a bad snapshot: refuse, never fall back */
        }
        if ((*snapshot)->term != sc->snaps[0].term ||
            (*snapshot)->index != sc->snaps[0].index) {
            return fail_msg(sl->s, RAFT_CORRUPT,
                            "%s/%s: header does not match its name", sl->dir,
                            name);
        }
        sl->snaps[0] = sc->snaps[0];
        if (sc->n_snaps > 1) {
            sl->snaps[1] = sc->snaps[1];
        }
    }
    rv = load_segments(sl, sc);
    if (rv != 0) {
        return rv;
    }
    if (sc->n_entries == 0 && sl->n_segs > 0) {
        /* Only a segment rolled right before a crash can be empty, and it
         * starts where the log does. */
        uint64_t want = *snapshot != NULL ? (*snapshot)->index + 1 : 1;
        if (sl->segs[0].first != want) {
            return fail_msg(sl->s, RAFT_CORRUPT,
                            "%s/seg-%020" PRIu64
                            ": an empty segment where "
                            "the log should start at %" PRIu64 " (a gap)",
                            sl->dir, sl->segs[0].first, want);
        }
    }
    if (*snapshot != NULL) {
        uint64_t si = (*snapshot)->index, st = (*snapshot)->term;
        uint64_t last = sc->first + sc->n_entries - 1;
        bool drop = false;

        if (sc->n_entries > 0 && sc->first > si + 1) {
            return fail_msg(sl->s, RAFT_CORRUPT,
                            "the log starts at index %" PRIu64
                            " but the snapshot ends at %" PRIu64 " (a gap)",
                            sc->first, si);
        }
        if (sc->n_entries > 0 &&
            (last < si ||
             (sc->first <= si && sc->entries[si - sc->first].term != st))) {
            /* Left over from before an installed snapshot that replaced
             * the log (a crash while its segments were being removed):
             * everything up to the snapshot is in it. */
            drop = true;
        }
        if (drop) {
            notice(sl, "info",
                   "removing %zu log entries (%" PRIu64 "-%" PRIu64
                   ") replaced by the snapshot at %" PRIu64,
                   sc->n_entries, sc->first, last, si);
            for (size_t i = sl->n_segs; i-- > 0;) {
                char name[NAME_LEN];
                seg_name(name, sl->segs[i].first);
                if (unlinkat(sl->dirfd, name, 0) != 0) {
                    return fail_msg(sl->s, RAFT_IOERR, "unlink %s: %s", name,
                                    strerror(errno));
                }
            }
            if (fsync_dir(sl->dirfd) != 0) {
                return fail_msg(sl->s, RAFT_IOERR, "fsync %s", sl->dir);
            }
            free_entries(sc);
            reset_state(sl);
            sl->snaps[0] = sc->snaps[0];
            if (sc->n_snaps > 1) {
                sl->snaps[1] = sc->snaps[1];
            }
        }
        if (sc->n_entries == 0) {
            sc->first = si + 1;
            sl->base = si + 1;
        }
        if (sc->last_term == 0) {
            sc->last_term = st;
        }
    } else if (sc->n_entries > 0 && sc->first != 1) {
        return fail_msg(sl->s, RAFT_CORRUPT,
                        "the log starts at index %" PRIu64
                        " and there is no snapshot",
                        sc->first);
    } else if (sc->n_entries == 0) {
        sc->first = 1;
        sl->base = 1;
    }
    sl->next = sc->first + sc->n_entries;
    return 0;
}

static void scan_free(struct scan *sc)
{
    free(sc->segs);
    free(sc->snaps);
}

static int store_load(struct store *s,
                      raft_term *term,
                      raft_id *voted_for,
                      struct raft_snapshot **snapshot,
                      raft_index *start_index,
                      struct raft_entry *entries[],
                      size_t *n_entries)
{
    struct slog *sl = sl_of(s);
    struct scan sc;
    int rv;

    rv = scan_all(sl, &sc, snapshot);
    if (rv != 0) {
        if (*snapshot != NULL) {
            raft_configuration_close(&(*snapshot)->configuration);
            raft_free((*snapshot)->bufs[0].base);
            raft_free((*snapshot)->bufs);
            raft_free(*snapshot);
            *snapshot = NULL;
        }
        free_entries(&sc);
        scan_free(&sc);
        reset_state(sl);
        return rv;
    }
    {
        uint64_t last = sc.n_entries > 0    ? sc.first + sc.n_entries - 1
                        : *snapshot != NULL ? (*snapshot)->index
                                            : 0;

        if (sl->meta_cut > last) {
            /* A cut of this start or of an earlier one: the log does not
             * hold that index yet, so no votes until it does. */
            if (s->cut_index == 0) {
                notice(sl, "warn",
                       "no votes until the log holds index %" PRIu64
                       " again (cut at an earlier start; the log ends at "
                       "%" PRIu64 ")",
                       sl->meta_cut, last);
            }
            s->cut_index = sl->meta_cut;
        } else {
            s->cut_index = 0;
            sl->meta_cut = 0; /* done: cleared at the next metadata write */
        }
    }
    *term = sl->term;
    *voted_for = sl->vote;
    *start_index = sc.first;
    *entries = sc.entries;
    *n_entries = sc.n_entries;
    scan_free(&sc);
    sl->loaded = true;
    start_prep(sl);
    return 0;
}

/* Write one record synchronously (bootstrap, recover: before start). */
static int write_sync(struct slog *sl,
                      uint64_t index,
                      uint64_t term,
                      unsigned type,
                      const struct raft_buffer *buf)
{
    size_t size = sf_rec_size(buf->len);
    uint8_t *rec = malloc(size);
    int err;

    if (rec == NULL) {
        return fail_msg(sl->s, RAFT_NOMEM, "out of memory");
    }
    sf_rec_encode(rec, index, term, type, buf->base, buf->len);
    if (sl->cur_fd < 0 || sl->cur_end + size > sl->cur_cap) {
        struct job j;
        memset(&j, 0, sizeof j);
        j.fd_out = j.dfd_out = -1;
        j.sl = sl;
        j.first = index;
        j.need = SF_SEG_HDR + size;
        sl->prep_ok = false; /* no worker job runs before load */
        run_roll(&j);
        if (j.rv != 0) {
            free(rec);
            return fail_msg(sl->s, j.rv, "%s", j.err);
        }
        close_current(sl);
        sl->cur_fd = j.fd_out;
        sl->cur_dfd = j.dfd_out; /* (unused here; closed with it) */
        sl->cur_end = SF_SEG_HDR;
        sl->cur_cap = j.cap_out;
    }
    err = write_all(sl->cur_fd, rec, size, sl->cur_end);
    free(rec);
    if (err == 0 && fdatasync(sl->cur_fd) != 0) {
        err = errno;
    }
    if (err != 0) {
        return fail_msg(sl->s, raft_code(err), "write record %" PRIu64 ": %s",
                        index, strerror(err));
    }
    sl->cur_end += size;
    return 0;
}

static void snapshot_free(struct raft_snapshot *sn)
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

static int store_bootstrap(struct store *s,
                           const struct raft_configuration *conf)
{
    struct slog *sl = sl_of(s);
    struct raft_snapshot *sn = NULL;
    struct raft_buffer buf;
    struct scan sc;
    int rv;

    if (sl->loaded) {
        return fail_msg(s, RAFT_CANTBOOTSTRAP, "already started");
    }
    rv = scan_all(sl, &sc, &sn);
    if (rv == 0 && (sl->term != 0 || sc.n_entries > 0 || sn != NULL)) {
        rv = fail_msg(s, RAFT_CANTBOOTSTRAP, "the store holds state");
    }
    snapshot_free(sn);
    free_entries(&sc);
    scan_free(&sc);
    if (rv != 0) {
        reset_state(sl);
        return rv;
    }
    rv = raft_configuration_encode(conf, &buf);
    if (rv != 0) {
        return fail_msg(s, rv, "encode configuration");
    }
    /* The entry first, then the term: a crash between leaves an entry
     * and term 0, which the next bootstrap refuses (the log holds state)
     * rather than losing. */
    rv = write_sync(sl, 1, 1, RAFT_CHANGE, &buf);
    raft_free(buf.base);
    if (rv == 0) {
        rv = meta_write(sl, 1, 0);
    }
    reset_state(sl);
    return rv;
}

static int store_recover(struct store *s, const struct raft_configuration *conf)
{
    struct slog *sl = sl_of(s);
    struct raft_snapshot *sn = NULL;
    struct raft_buffer buf;
    struct scan sc;
    uint64_t term;
    int rv;

    if (sl->loaded) {
        return fail_msg(s, RAFT_INVALID, "recover after start");
    }
    rv = scan_all(sl, &sc, &sn);
    term = sc.last_term != 0 ? sc.last_term : 1;
    snapshot_free(sn);
    free_entries(&sc);
    scan_free(&sc);
    if (rv == 0) {
        rv = raft_configuration_encode(conf, &buf);
        if (rv == 0) {
            /* At the next index, with the last entry's term (raft_uv uses
             * term 1, docs/raft-0.15.md §2.3.5). */
            rv = write_sync(sl, sl->next, term, RAFT_CHANGE, &buf);
            raft_free(buf.base);
        }
    }
    reset_state(sl);
    return rv;
}

/* --- asynchronous calls ----------------------------------------------------
 */

static int store_append(struct store *s,
                        struct raft_io_append *req,
                        const struct raft_entry entries[],
                        unsigned n,
                        raft_io_append_cb cb)
{
    struct slog *sl = sl_of(s);
    struct op *op;
    size_t bytes = 0;
    uint8_t *p;

    if (sl->failed != 0) {
        return sl->failed;
    }
    for (unsigned i = 0; i < n; i++) {
        if (entries[i].buf.len > SF_REC_MAX) {
            return fail_msg(s, RAFT_TOOBIG, "entry of %zu bytes",
                            entries[i].buf.len);
        }
        bytes += sf_rec_size(entries[i].buf.len);
    }
    /* One allocation: the op, then the record sizes, then the records
     * (8-aligned: sizeof(struct op) and n * 4 rounded up). */
    {
        size_t head = sf_pad8(sizeof *op) + sf_pad8((size_t)n * 4);
        uint8_t *mem = calloc(1, head + bytes);

        if (mem == NULL) {
            return fail_msg(s, RAFT_NOMEM, "out of memory");
        }
        op = (struct op *)(void *)mem;
        op->sizes = (uint32_t *)(void *)(mem + sf_pad8(sizeof *op));
        op->buf = mem + head;
        op->inline_bufs = true;
    }
    op->kind = OP_APPEND;
    op->req = req;
    op->cb = cb;
    op->n = n;
    op->bytes = bytes;
    op->first_index = sl->next;
    /* Encoded now, on the loop: the batch is then plain buffers. */
    p = op->buf;
    for (unsigned i = 0; i < n; i++) {
        size_t size = sf_rec_size(entries[i].buf.len);
        sf_rec_encode(p, sl->next + i, entries[i].term, entries[i].type,
                      entries[i].buf.base, entries[i].buf.len);
        op->sizes[i] = (uint32_t)size;
        p += size;
    }
    sl->next += n;
    enqueue(sl, op);
    return 0;
}

/* A queued op of @kind, or NULL with s->errmsg set (a failed store, or
 * out of memory); *rv is then the code to return. */
static struct op *op_alloc(struct slog *sl, enum op_kind kind, int *rv)
{
    struct op *op;

    if (sl->failed != 0) {
        *rv = sl->failed;
        return NULL;
    }
    op = calloc(1, sizeof *op);
    if (op == NULL) {
        *rv = fail_msg(sl->s, RAFT_NOMEM, "out of memory");
        return NULL;
    }
    op->kind = kind;
    return op;
}

static int store_truncate(struct store *s, raft_index index)
{
    struct slog *sl = sl_of(s);
    struct op *op;
    int rv = 0;

    op = op_alloc(sl, OP_TRUNCATE, &rv);
    if (op == NULL) {
        return rv;
    }
    op->index = index;
    if (index < sl->next) {
        sl->next = index;
    }
    /* Behind every append queued before it, like raft_uv's barrier;
     * appends after it wait for it. */
    enqueue(sl, op);
    return 0;
}

static int store_snapshot_put(struct store *s,
                              unsigned trailing,
                              struct raft_io_snapshot_put *req,
                              const struct raft_snapshot *snapshot,
                              raft_io_snapshot_put_cb cb)
{
    struct slog *sl = sl_of(s);
    struct op *op;
    int rv = 0;

    op = op_alloc(sl, OP_PUT, &rv);
    if (op == NULL) {
        return rv;
    }
    op->trailing = trailing;
    op->put = req;
    op->snap = snapshot;
    op->put_cb = cb;
    if (trailing == 0) {
        sl->next = snapshot->index + 1; /* the log restarts after it */
    }
    enqueue(sl, op);
    return 0;
}

static int store_snapshot_get(struct store *s,
                              struct raft_io_snapshot_get *req,
                              raft_io_snapshot_get_cb cb)
{
    struct slog *sl = sl_of(s);
    struct op *op;
    int rv = 0;

    op = op_alloc(sl, OP_GET, &rv);
    if (op == NULL) {
        return rv;
    }
    op->get = req;
    op->get_cb = cb;
    enqueue(sl, op);
    return 0;
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

int store_uring_probe(char *why, size_t n)
{
    struct io_uring ring;
    struct io_uring_sqe *sqe;
    struct io_uring_cqe *cqe;
    int rv;

    rv = io_uring_queue_init(2, &ring, 0);
    if (rv < 0) {
        snprintf(why, n, "io_uring_queue_init: %s", strerror(-rv));
        return rv;
    }
    /* Set up is not enough: a seccomp filter may allow it and block
     * io_uring_enter. */
    sqe = io_uring_get_sqe(&ring);
    if (sqe == NULL) {
        io_uring_queue_exit(&ring);
        snprintf(why, n, "io_uring: no submission entry");
        return -EBUSY;
    }
    io_uring_prep_nop(sqe);
    rv = io_uring_submit_and_wait(&ring, 1);
    if (rv >= 0) {
        rv = io_uring_peek_cqe(&ring, &cqe);
        if (rv == 0) {
            rv = cqe->res;
            io_uring_cqe_seen(&ring, cqe);
        }
    }
    io_uring_queue_exit(&ring);
    if (rv < 0) {
        snprintf(why, n, "io_uring NOP: %s", strerror(-rv));
        return rv;
    }
    snprintf(why, n, "ok");
    return 0;
}

static int setup_ring(struct slog *sl, char *errmsg)
{
    int rv = io_uring_queue_init(RING_ENTRIES, &sl->ring, 0);

    if (rv < 0) {
        errf(errmsg, "io_uring_queue_init: %s", strerror(-rv));
        return RAFT_IOERR;
    }
    sl->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sl->efd < 0) {
        errf(errmsg, "eventfd: %s", strerror(errno));
        io_uring_queue_exit(&sl->ring);
        return RAFT_IOERR;
    }
    rv = io_uring_register_eventfd(&sl->ring, sl->efd);
    if (rv < 0) {
        errf(errmsg, "io_uring_register_eventfd: %s", strerror(-rv));
        close(sl->efd);
        io_uring_queue_exit(&sl->ring);
        return RAFT_IOERR;
    }
    return 0;
}

int store_log_init(struct store *s,
                   uv_loop_t *loop,
                   const char *dir,
                   const struct store_log_options *o,
                   char *errmsg)
{
    struct slog *sl;
    char why[128];
    int rv;

    memset(s, 0, sizeof *s);
    if (strlen(dir) >= PATH_MAX - NAME_LEN) {
        errf(errmsg, "store directory name too long");
        return RAFT_NAMETOOLONG;
    }
    sl = calloc(1, sizeof *sl);
    if (sl == NULL) {
        errf(errmsg, "out of memory");
        return RAFT_NOMEM;
    }
    sl->s = s;
    sl->loop = loop;
    snprintf(sl->dir, sizeof sl->dir, "%s", dir);
    sl->o = *o;
    sl->seg_size = o->segment_size == 0 ? DEFAULT_SEGMENT : o->segment_size;
    if (sl->seg_size < MIN_SEGMENT) {
        sl->seg_size = MIN_SEGMENT;
    }
    sl->cur_fd = sl->cur_dfd = -1;
    sl->meta_fd[0] = sl->meta_fd[1] = -1;
    sl->seg_size = (sl->seg_size + BLOCK - 1) / BLOCK * BLOCK;
    sl->dtail = aligned_alloc(BLOCK, BLOCK);
    if (sl->dtail == NULL) {
        errf(errmsg, "out of memory");
        free(sl);
        return RAFT_NOMEM;
    }
    memset(sl->dtail, 0, BLOCK);
    sl->efd = -1;
    sl->base = sl->next = 1;
    if (mkdir(dir, 0700) == 0) {
        /* The new directory's name must be durable before anything in it
         * is acknowledged. */
        char parent[PATH_MAX];
        char *slash;
        int pfd;

        snprintf(parent, sizeof parent, "%s", dir);
        slash = strrchr(parent, '/');
        if (slash == parent) {
            slash[1] = '\0';
        } else if (slash != NULL) {
            *slash = '\0';
        } else {
            snprintf(parent, sizeof parent, ".");
        }
        pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0 || fsync(pfd) != 0) {
            errf(errmsg, "fsync %s: %s", parent, strerror(errno));
            if (pfd >= 0) {
                close(pfd);
            }
            free(sl->dtail);
            free(sl);
            return RAFT_IOERR;
        }
        close(pfd);
    } else if (errno != EEXIST) {
        errf(errmsg, "mkdir %s: %s", dir, strerror(errno));
        free(sl->dtail);
        free(sl);
        return RAFT_IOERR;
    }
    sl->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sl->dirfd < 0) {
        errf(errmsg, "open %s: %s", dir, strerror(errno));
        free(sl->dtail);
        free(sl);
        return RAFT_IOERR;
    }
    s->impl = sl;
    rv = meta_open(sl, errmsg);
    if (rv != 0) {
        free_state(sl);
        return rv;
    }
    sl->engine = o->engine;
    if (sl->engine == STORE_ENGINE_AUTO || sl->engine == STORE_ENGINE_URING) {
        int p = store_uring_probe(why, sizeof why);
        if (p != 0 && sl->engine == STORE_ENGINE_URING) {
            errf(errmsg, "io_uring unavailable: %s", why);
            free_state(sl);
            return RAFT_IOERR;
        }
        sl->engine = p == 0 ? STORE_ENGINE_URING : STORE_ENGINE_PWRITE;
        if (p != 0) {
            notice(sl, "info", "io_uring unavailable (%s): using pwrite", why);
        }
    }
    if (sl->engine == STORE_ENGINE_URING && !o->no_direct) {
        /* O_DIRECT where the file system has it: a direct RWF_DSYNC write
         * completes without io_uring's worker threads (the buffered write's
         * linked fsync always runs on one). */
        int t = openat(sl->dirfd, "meta-a", O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (t >= 0) {
            sl->direct = true;
            close(t);
            notice(sl, "info", "uring appends: O_DIRECT writes with RWF_DSYNC");
        } else {
            notice(sl, "info",
                   "O_DIRECT unavailable in %s (%s): buffered writes with "
                   "a linked fsync",
                   dir, strerror(errno));
        }
    }
    if (sl->engine == STORE_ENGINE_URING &&
        (rv = setup_ring(sl, errmsg)) != 0) {
        free_state(sl);
        return rv;
    }
    pthread_mutex_init(&sl->mu, NULL);
    pthread_cond_init(&sl->cv, NULL);
    uv_async_init(loop, &sl->async, async_cb);
    sl->async.data = sl;
    sl->handles = 1;
    if (pthread_create(&sl->th, NULL, worker_main, sl) != 0) {
        errf(errmsg, "cannot start the store's worker thread");
        /* (unwinding the async handle needs the loop: run it once) */
        sl->stop = true;
        uv_close((uv_handle_t *)&sl->async, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        if (sl->engine == STORE_ENGINE_URING) {
            io_uring_queue_exit(&sl->ring);
            close(sl->efd);
        }
        free_state(sl);
        return RAFT_IOERR;
    }
    if (sl->engine == STORE_ENGINE_URING) {
        uv_poll_init(loop, &sl->poll, sl->efd);
        sl->poll.data = sl;
        uv_poll_start(&sl->poll, UV_READABLE, poll_cb);
        sl->handles++;
    }
    s->ops = &store_log_ops;
    s->name = sl->engine == STORE_ENGINE_URING ? "uring" : "pwrite";
    return 0;
}

void store_log_stats(const struct store *s, struct store_log_stats *out)
{
    const struct slog *sl = s->impl;
    *out = sl->stats;
}
