/* tests/sim/sim_fs.c: see sim_fs.h. */
#include "sim_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "store/store_format.h"

#define FD_BASE      100 /* descriptors are FD_BASE + index into fds */
#define NAME_MAX_SIM 64

struct sf_op
{
    bool trunc;   /* a truncation to @off; else a write of @len at @off */
    uint64_t off; /* (off_t is signed: sizes here never are) */
    size_t len;
    uint8_t *bytes;
};

struct sf_ino
{
    bool used;
    uint8_t *data; /* what reads see */
    size_t len, cap;
    uint8_t *dur; /* durable */
    size_t dur_len;
    struct sf_op *ops; /* since the last sync, in order */
    size_t n_ops, cap_ops;
    unsigned opens;
};

struct sf_dent
{
    char name[NAME_MAX_SIM];
    size_t ino;
};

enum sf_dirop_kind { DOP_CREATE, DOP_RENAME, DOP_UNLINK };

struct sf_dirop
{
    enum sf_dirop_kind kind;
    char name[NAME_MAX_SIM], to[NAME_MAX_SIM];
    size_t ino; /* create */
};

struct sf_fd
{
    bool used;
    bool dir;
    bool stale; /* opened before the last power cut */
    size_t ino;
};

static struct sim_fs *fs_of(const struct store_sys *sys)
{
    return (struct sim_fs *)(void *)sys; /* the table is the first member */
}

static int fail(int e)
{
    errno = e;
    return -1;
}

/* --- growing arrays --------------------------------------------------------
 */

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    size_t c = *cap == 0 ? 8 : *cap;

    if (need <= *cap) {
        return p;
    }
    while (c < need) {
        c *= 2;
    }
    p = realloc(p, c * size);
    ONCE_ASSERT(p != NULL, "out of memory in the simulated file system");
    *cap = c;
    return p;
}

static void bytes_reserve(uint8_t **p, size_t *cap, size_t need)
{
    size_t old = *cap;

    if (need <= old) {
        return;
    }
    *p = grow(*p, cap, need, 1);
    memset(*p + old, 0, *cap - old);
}

/* --- the directory ---------------------------------------------------------
 */

static struct sf_dent *dent_find(struct sf_dent *d, size_t n, const char *name)
{
    for (size_t k = 0; k < n; k++) {
        if (strcmp(d[k].name, name) == 0) {
            return &d[k];
        }
    }
    return NULL;
}

static void dent_remove(struct sf_dent *d, size_t *n, const char *name)
{
    struct sf_dent *e = dent_find(d, *n, name);

    if (e != NULL) {
        *e = d[--*n];
    }
}

/* Apply one directory operation to (@d, *@n, capacity *@cap). */
static void dirop_apply(struct sf_dent **d,
                        size_t *n,
                        size_t *cap,
                        const struct sf_dirop *op)
{
    struct sf_dent *e;

    switch (op->kind) {
        case DOP_CREATE:
            dent_remove(*d, n, op->name);
            *d = grow(*d, cap, *n + 1, sizeof **d);
            snprintf((*d)[*n].name, NAME_MAX_SIM, "%s", op->name);
            (*d)[(*n)++].ino = op->ino;
            break;
        case DOP_RENAME:
            e = dent_find(*d, *n, op->name);
            if (e != NULL) {
                size_t ino = e->ino;
                dent_remove(*d, n, op->name);
                dent_remove(*d, n, op->to);
                *d = grow(*d, cap, *n + 1, sizeof **d);
                snprintf((*d)[*n].name, NAME_MAX_SIM, "%s", op->to);
                (*d)[(*n)++].ino = ino;
            }
            break;
        case DOP_UNLINK:
            dent_remove(*d, n, op->name);
            break;
    }
}

static void dirop_log(struct sim_fs *fs, const struct sf_dirop *op)
{
    fs->dlog = grow(fs->dlog, &fs->cap_dlog, fs->n_dlog + 1, sizeof *fs->dlog);
    fs->dlog[fs->n_dlog++] = *op;
    dirop_apply(&fs->cur, &fs->n_cur, &fs->cap_cur, op);
}

static bool is_segment(const char *name)
{
    return strncmp(name, "seg-", 4) == 0;
}

/* --- inodes ----------------------------------------------------------------
 */

static void ops_clear(struct sf_ino *in)
{
    for (size_t k = 0; k < in->n_ops; k++) {
        free(in->ops[k].bytes);
    }
    in->n_ops = 0;
}

static bool ino_referenced(const struct sim_fs *fs, size_t ino)
{
    if (fs->inos[ino].opens > 0) {
        return true;
    }
    for (size_t k = 0; k < fs->n_cur; k++) {
        if (fs->cur[k].ino == ino) {
            return true;
        }
    }
    for (size_t k = 0; k < fs->n_dur; k++) {
        if (fs->dur[k].ino == ino) {
            return true;
        }
    }
    for (size_t k = 0; k < fs->n_dlog; k++) {
        if (fs->dlog[k].kind == DOP_CREATE && fs->dlog[k].ino == ino) {
            return true;
        }
    }
    return false;
}

static void ino_release(struct sf_ino *in)
{
    ops_clear(in);
    free(in->ops);
    free(in->data);
    free(in->dur);
    memset(in, 0, sizeof *in);
}

static void ino_gc(struct sim_fs *fs, size_t ino)
{
    if (fs->inos[ino].used && !ino_referenced(fs, ino)) {
        ino_release(&fs->inos[ino]);
    }
}

static size_t ino_new(struct sim_fs *fs)
{
    size_t k;

    for (k = 0; k < fs->n_inos && fs->inos[k].used; k++) {
    }
    if (k == fs->n_inos) {
        size_t cap = fs->n_inos;
        fs->inos = grow(fs->inos, &cap, fs->n_inos + 1, sizeof *fs->inos);
        memset(&fs->inos[fs->n_inos], 0, (cap - fs->n_inos) * sizeof *fs->inos);
        fs->n_inos = cap;
    }
    fs->inos[k].used = true;
    return k;
}

/* A write at @off of @len bytes to what reads see. */
static void data_write(uint8_t **p,
                       size_t *len,
                       size_t *cap,
                       uint64_t off,
                       const uint8_t *b,
                       size_t n)
{
    size_t end = (size_t)off + n;

    bytes_reserve(p, cap, end);
    if (off > *len) {
        memset(*p + *len, 0, (size_t)off - *len);
    }
    memcpy(*p + off, b, n);
    if (end > *len) {
        *len = end;
    }
}

static void data_trunc(uint8_t **p, size_t *len, size_t *cap, uint64_t size)
{
    bytes_reserve(p, cap, (size_t)size);
    if (size > *len) {
        memset(*p + *len, 0, (size_t)size - *len);
    }
    *len = (size_t)size;
}

static void op_log(struct sf_ino *in, const struct sf_op *op)
{
    in->ops = grow(in->ops, &in->cap_ops, in->n_ops + 1, sizeof *in->ops);
    in->ops[in->n_ops++] = *op;
}

static void ino_sync(struct sf_ino *in)
{
    free(in->dur);
    in->dur = malloc(in->len > 0 ? in->len : 1);
    ONCE_ASSERT(in->dur != NULL, "out of memory syncing a simulated file");
    memcpy(in->dur, in->data, in->len);
    in->dur_len = in->len;
    ops_clear(in);
}

/* --- descriptors -----------------------------------------------------------
 */

static struct sf_fd *fd_get(struct sim_fs *fs, int fd)
{
    size_t k;

    if (fd < FD_BASE) {
        return NULL;
    }
    k = (size_t)(fd - FD_BASE);
    return k < fs->n_fds && fs->fds[k].used ? &fs->fds[k] : NULL;
}

static int fd_new(struct sim_fs *fs, bool dir, size_t ino)
{
    size_t k;

    for (k = 0; k < fs->n_fds && fs->fds[k].used; k++) {
    }
    if (k == fs->n_fds) {
        size_t cap = fs->n_fds;
        fs->fds = grow(fs->fds, &cap, fs->n_fds + 1, sizeof *fs->fds);
        memset(&fs->fds[fs->n_fds], 0, (cap - fs->n_fds) * sizeof *fs->fds);
        fs->n_fds = cap;
    }
    fs->fds[k].used = true;
    fs->fds[k].dir = dir;
    fs->fds[k].stale = false;
    fs->fds[k].ino = ino;
    if (!dir) {
        fs->inos[ino].opens++;
    }
    return FD_BASE + (int)k;
}

/* A file descriptor usable for I/O, or NULL with errno set. */
static struct sf_ino *file_of(struct sim_fs *fs, int fd)
{
    struct sf_fd *f = fd_get(fs, fd);

    if (f == NULL) {
        errno = EBADF;
        return NULL;
    }
    if (f->stale || fs->off) {
        errno = EIO;
        return NULL;
    }
    if (f->dir) {
        errno = EISDIR;
        return NULL;
    }
    return &fs->inos[f->ino];
}

/* One more mutating call: false (EIO) when the power is, or goes, off. */
static bool spend(struct sim_fs *fs)
{
    if (!fs->off && fs->budget == 0) {
        fs->off = true; /* the power went before this call */
    }
    if (fs->off) {
        errno = EIO;
        return false;
    }
    if (fs->budget > 0) {
        fs->budget--;
    }
    return true;
}

/* --- the table -------------------------------------------------------------
 */

static int s_openat(const struct store_sys *sys,
                    int dirfd,
                    const char *name,
                    int flags,
                    mode_t mode)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_dent *e;
    struct sf_fd *d;
    size_t ino;

    (void)mode;
    if (fs->off) {
        return fail(EIO);
    }
    if ((flags & O_DIRECTORY) != 0) {
        return fd_new(fs, true, 0); /* the one directory */
    }
    if ((flags & O_DIRECT) != 0) {
        return fail(EINVAL); /* not modelled: the pwrite engine */
    }
    d = fd_get(fs, dirfd);
    if (d == NULL || !d->dir || strlen(name) >= NAME_MAX_SIM) {
        return fail(d == NULL ? EBADF : ENOENT);
    }
    e = dent_find(fs->cur, fs->n_cur, name);
    if (e == NULL) {
        struct sf_dirop op = {.kind = DOP_CREATE};
        if ((flags & O_CREAT) == 0) {
            return fail(ENOENT);
        }
        if (!spend(fs)) {
            return -1;
        }
        ino = ino_new(fs);
        snprintf(op.name, sizeof op.name, "%s", name);
        op.ino = ino;
        dirop_log(fs, &op);
    } else {
        ino = e->ino;
        if ((flags & O_TRUNC) != 0 && fs->inos[ino].len > 0) {
            struct sf_op op = {.trunc = true, .off = 0};
            if (!spend(fs)) {
                return -1;
            }
            fs->inos[ino].len = 0;
            op_log(&fs->inos[ino], &op);
        }
    }
    return fd_new(fs, false, ino);
}

static int s_close(const struct store_sys *sys, int fd)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_fd *f = fd_get(fs, fd);

    if (f == NULL) {
        return fail(EBADF);
    }
    f->used = false;
    if (!f->dir && !f->stale) {
        ONCE_ASSERT(fs->inos[f->ino].opens > 0, "an open file counts its fds");
        fs->inos[f->ino].opens--;
        ino_gc(fs, f->ino);
    }
    return 0;
}

static ssize_t write_at(struct sim_fs *fs,
                        struct sf_ino *in,
                        const uint8_t *b,
                        size_t n,
                        off_t off)
{
    struct sf_op op = {.trunc = false, .off = (uint64_t)off, .len = n};

    if (off < 0) {
        return fail(EINVAL);
    }
    if (!spend(fs)) {
        return -1;
    }
    op.bytes = malloc(n > 0 ? n : 1);
    ONCE_ASSERT(op.bytes != NULL, "out of memory writing a simulated file");
    memcpy(op.bytes, b, n);
    data_write(&in->data, &in->len, &in->cap, (uint64_t)off, b, n);
    op_log(in, &op);
    return (ssize_t)n;
}

static ssize_t s_pwrite(const struct store_sys *sys,
                        int fd,
                        const void *buf,
                        size_t len,
                        off_t off)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_ino *in = file_of(fs, fd);

    return in == NULL ? -1 : write_at(fs, in, buf, len, off);
}

/* One call, one logged write: a tear cuts the gathered bytes. */
static ssize_t s_pwritev(const struct store_sys *sys,
                         int fd,
                         const struct iovec *iov,
                         int n,
                         off_t off)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_ino *in = file_of(fs, fd);
    size_t total = 0, at = 0;
    uint8_t *b;
    ssize_t rv;

    if (in == NULL) {
        return -1;
    }
    for (int k = 0; k < n; k++) {
        total += iov[k].iov_len;
    }
    b = malloc(total > 0 ? total : 1);
    ONCE_ASSERT(b != NULL, "out of memory writing a simulated file");
    for (int k = 0; k < n; k++) {
        memcpy(b + at, iov[k].iov_base, iov[k].iov_len);
        at += iov[k].iov_len;
    }
    rv = write_at(fs, in, b, total, off);
    free(b);
    return rv;
}

static ssize_t s_pread(const struct store_sys *sys,
                       int fd,
                       void *buf,
                       size_t len,
                       off_t off)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_ino *in = file_of(fs, fd);
    size_t n;

    if (in == NULL) {
        return -1;
    }
    if (off < 0) {
        return fail(EINVAL);
    }
    if ((size_t)off >= in->len) {
        return 0;
    }
    n = in->len - (size_t)off < len ? in->len - (size_t)off : len;
    memcpy(buf, in->data + off, n);
    return (ssize_t)n;
}

/* The segment file @ino is named as now (for the failed-fsync fault). */
static bool named_segment(const struct sim_fs *fs, size_t ino)
{
    for (size_t k = 0; k < fs->n_cur; k++) {
        if (fs->cur[k].ino == ino && is_segment(fs->cur[k].name)) {
            return true;
        }
    }
    return false;
}

static int s_fsync(const struct store_sys *sys, int fd)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_fd *f = fd_get(fs, fd);

    if (f == NULL) {
        return fail(EBADF);
    }
    if (f->stale || !spend(fs)) {
        return fail(EIO);
    }
    if (f->dir) {
        /* The entries as they are now are durable. */
        fs->dur = grow(fs->dur, &fs->cap_dur, fs->n_cur, sizeof *fs->dur);
        memcpy(fs->dur, fs->cur, fs->n_cur * sizeof *fs->cur);
        fs->n_dur = fs->n_cur;
        fs->n_dlog = 0;
        for (size_t k = 0; k < fs->n_inos; k++) {
            ino_gc(fs, k);
        }
        return 0;
    }
    if (fs->fail_countdown >= 0 && named_segment(fs, f->ino) &&
        fs->fail_countdown-- == 0) {
        /* The device reported an error: what it holds of these writes
         * is unknown, so nothing of them becomes durable. */
        fs->failed_fsync = true;
        return fail(EIO);
    }
    ino_sync(&fs->inos[f->ino]);
    return 0;
}

static int s_ftruncate(const struct store_sys *sys, int fd, off_t len)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_ino *in = file_of(fs, fd);
    struct sf_op op = {.trunc = true};

    if (in == NULL) {
        return -1;
    }
    if (len < 0) {
        return fail(EINVAL);
    }
    if (!spend(fs)) {
        return -1;
    }
    op.off = (uint64_t)len;
    data_trunc(&in->data, &in->len, &in->cap, (uint64_t)len);
    op_log(in, &op);
    return 0;
}

static int s_fstat(const struct store_sys *sys, int fd, struct stat *st)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_fd *f = fd_get(fs, fd);

    if (f == NULL) {
        return fail(EBADF);
    }
    if (f->stale || fs->off) {
        return fail(EIO);
    }
    memset(st, 0, sizeof *st);
    st->st_mode = f->dir ? S_IFDIR | 0700 : S_IFREG | 0600;
    st->st_size = f->dir ? 0 : (off_t)fs->inos[f->ino].len;
    return 0;
}

static int s_renameat(const struct store_sys *sys,
                      int olddirfd,
                      const char *oldname,
                      int newdirfd,
                      const char *newname)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_dirop op = {.kind = DOP_RENAME};
    struct sf_dent *old;

    (void)olddirfd;
    (void)newdirfd;
    if (fs->off) {
        return fail(EIO);
    }
    old = dent_find(fs->cur, fs->n_cur, oldname);
    if (old == NULL || strlen(newname) >= NAME_MAX_SIM) {
        return fail(ENOENT);
    }
    if (!spend(fs)) {
        return -1;
    }
    snprintf(op.name, sizeof op.name, "%s", oldname);
    snprintf(op.to, sizeof op.to, "%s", newname);
    dirop_log(fs, &op);
    return 0;
}

static int s_unlinkat(const struct store_sys *sys,
                      int dirfd,
                      const char *name,
                      int flags)
{
    struct sim_fs *fs = fs_of(sys);
    struct sf_dirop op = {.kind = DOP_UNLINK};
    struct sf_dent *e;
    size_t ino;

    (void)dirfd;
    (void)flags;
    if (fs->off) {
        return fail(EIO);
    }
    e = dent_find(fs->cur, fs->n_cur, name);
    if (e == NULL) {
        return fail(ENOENT);
    }
    if (!spend(fs)) {
        return -1;
    }
    ino = e->ino;
    snprintf(op.name, sizeof op.name, "%s", name);
    dirop_log(fs, &op);
    ino_gc(fs, ino);
    return 0;
}

static int s_mkdir(const struct store_sys *sys, const char *path, mode_t mode)
{
    (void)sys;
    (void)path;
    (void)mode;
    return fail(EEXIST); /* the store's directory is always there */
}

static int s_list(const struct store_sys *sys,
                  int dirfd,
                  int (*each)(void *arg, const char *name),
                  void *arg)
{
    struct sim_fs *fs = fs_of(sys);
    char(*names)[NAME_MAX_SIM];
    size_t n = fs->n_cur;
    struct sf_fd *d = fd_get(fs, dirfd);

    if (d == NULL || !d->dir) {
        return fail(EBADF);
    }
    if (fs->off || d->stale) {
        return fail(EIO);
    }
    /* A copy: @each may unlink the name it is given. */
    names = malloc((n > 0 ? n : 1) * sizeof *names);
    ONCE_ASSERT(names != NULL, "out of memory listing a simulated directory");
    for (size_t k = 0; k < n; k++) {
        memcpy(names[k], fs->cur[k].name, NAME_MAX_SIM);
    }
    for (size_t k = 0; k < n; k++) {
        if (each(arg, names[k]) != 0) {
            break;
        }
    }
    free(names);
    return 0;
}

static int s_hint(const struct store_sys *sys,
                  int fd,
                  off_t off,
                  off_t len,
                  unsigned flags)
{
    (void)sys;
    (void)fd;
    (void)off;
    (void)len;
    (void)flags;
    return 0; /* no page cache to pace */
}

static int s_fadvise(const struct store_sys *sys,
                     int fd,
                     off_t off,
                     off_t len,
                     int advice)
{
    (void)advice;
    return s_hint(sys, fd, off, len, 0);
}

/* --- power -----------------------------------------------------------------
 */

/* What of @in's logged operations reached the disk. */
static void ino_crash(struct sim_fs *fs,
                      struct sf_ino *in,
                      bool segment,
                      uint64_t (*draw)(void),
                      bool torn_ok)
{
    size_t keep = 0, len = in->dur_len, cap = in->dur_len + 1;
    uint8_t *d = calloc(1, cap);
    bool torn = false;
    unsigned mode;

    ONCE_ASSERT(d != NULL, "out of memory in a simulated crash");
    if (in->dur_len > 0) {
        memcpy(d, in->dur, in->dur_len);
    }
    /* None (half the time), a prefix, or a prefix and a tear. */
    mode = (unsigned)(draw() % 4);

    if (mode == 2) {
        keep = (size_t)(draw() % (in->n_ops + 1));
    } else if (mode == 3) {
        keep = (size_t)(draw() % in->n_ops);
        torn = true;
    }
    for (size_t k = 0; k < keep; k++) {
        const struct sf_op *op = &in->ops[k];
        if (op->trunc) {
            data_trunc(&d, &len, &cap, op->off);
        } else {
            data_write(&d, &len, &cap, op->off, op->bytes, op->len);
        }
    }
    if (torn && !in->ops[keep].trunc && in->ops[keep].len > 1 &&
        (torn_ok || !segment)) {
        const struct sf_op *op = &in->ops[keep];
        size_t part = 1 + (size_t)(draw() % (op->len - 1));
        data_write(&d, &len, &cap, op->off, op->bytes, part);
        fs->stats.torn++;
        if (segment) {
            fs->torn_pending = true;
        }
    }
    ops_clear(in);
    free(in->data);
    in->data = d;
    in->len = len;
    in->cap = cap;
    ino_sync(in);
}

void sim_fs_power_cut(struct sim_fs *fs, uint64_t (*draw)(void), bool torn_ok)
{
    size_t keep = 0;

    /* The directory: the durable entries and a prefix of what followed. */
    if (fs->n_dlog > 0 && draw() % 2 == 1) {
        keep = (size_t)(draw() % (fs->n_dlog + 1));
    }
    for (size_t k = 0; k < keep; k++) {
        dirop_apply(&fs->dur, &fs->n_dur, &fs->cap_dur, &fs->dlog[k]);
    }
    fs->n_dlog = 0;
    fs->cur = grow(fs->cur, &fs->cap_cur, fs->n_dur, sizeof *fs->cur);
    memcpy(fs->cur, fs->dur, fs->n_dur * sizeof *fs->dur);
    fs->n_cur = fs->n_dur;
    /* The process is gone: its descriptors hold nothing open. */
    for (size_t k = 0; k < fs->n_fds; k++) {
        if (fs->fds[k].used && !fs->fds[k].dir && !fs->fds[k].stale) {
            fs->inos[fs->fds[k].ino].opens--;
        }
        fs->fds[k].stale = true;
    }
    /* Each file a durable name reaches: durable bytes and some of what
     * followed; in the order of the entries (deterministic). */
    for (size_t k = 0; k < fs->n_dur; k++) {
        struct sf_ino *in = &fs->inos[fs->dur[k].ino];
        if (in->n_ops > 0) {
            ino_crash(fs, in, is_segment(fs->dur[k].name), draw, torn_ok);
        }
    }
    for (size_t k = 0; k < fs->n_inos; k++) {
        ino_gc(fs, k);
    }
    fs->off = true;
    fs->budget = -1;
}

void sim_fs_power_on(struct sim_fs *fs)
{
    for (size_t k = 0; k < fs->n_fds; k++) {
        ONCE_ASSERT(!fs->fds[k].used,
                    "the crashed process closed every descriptor");
    }
    fs->off = false;
    fs->budget = -1;
    fs->failed_fsync = false;
}

bool sim_fs_corrupt(struct sim_fs *fs, uint64_t pick)
{
    size_t span = 0;

    ONCE_ASSERT(fs->n_dlog == 0, "corruption hits a disk at rest");
    /* The records' bytes of every segment: header to the last nonzero. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < fs->n_dur; k++) {
            struct sf_ino *in = &fs->inos[fs->dur[k].ino];
            size_t end = in->dur_len;

            if (!is_segment(fs->dur[k].name)) {
                continue;
            }
            while (end > SF_SEG_HDR && in->dur[end - 1] == 0) {
                end--;
            }
            if (end <= SF_SEG_HDR) {
                continue;
            }
            if (pass == 0) {
                span += end - SF_SEG_HDR;
            } else if (pick < end - SF_SEG_HDR) {
                in->dur[SF_SEG_HDR + pick] ^= 0x5a;
                ONCE_ASSERT(in->n_ops == 0 && in->len == in->dur_len,
                            "a file at rest reads what is durable");
                in->data[SF_SEG_HDR + pick] ^= 0x5a;
                return true;
            } else {
                pick -= end - SF_SEG_HDR;
            }
        }
        if (span == 0) {
            return false;
        }
        pick %= span;
    }
    return false;
}

/* --- life ------------------------------------------------------------------
 */

void sim_fs_init(struct sim_fs *fs)
{
    static const struct store_sys table = {
        .openat = s_openat,
        .close = s_close,
        .pwrite = s_pwrite,
        .pwritev = s_pwritev,
        .pread = s_pread,
        .fdatasync = s_fsync,
        .fsync = s_fsync,
        .ftruncate = s_ftruncate,
        .fstat = s_fstat,
        .renameat = s_renameat,
        .unlinkat = s_unlinkat,
        .mkdir = s_mkdir,
        .list = s_list,
        .sync_file_range = s_hint,
        .fadvise = s_fadvise,
    };

    memset(fs, 0, sizeof *fs);
    fs->sys = table;
    fs->fail_countdown = -1;
    fs->budget = -1;
}

void sim_fs_free(struct sim_fs *fs)
{
    for (size_t k = 0; k < fs->n_inos; k++) {
        if (fs->inos[k].used) {
            ino_release(&fs->inos[k]);
        }
    }
    free(fs->inos);
    free(fs->cur);
    free(fs->dur);
    free(fs->dlog);
    free(fs->fds);
    memset(fs, 0, sizeof *fs);
}
