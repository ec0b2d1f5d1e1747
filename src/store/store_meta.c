/* store/store_meta.c: term and vote (store_int.h, store_format.h "meta").
 *
 * Two 64-byte copies, meta-a (even seq) and meta-b (odd), created at full
 * size once; an update writes seq + 1 into slot (seq + 1) % 2 and syncs it
 * before set_term/set_vote return, so a torn write can only hit the copy
 * being written while the other holds the previous state. At open the
 * valid copy with the higher seq wins; both bad refuses. Synchronous, loop
 * thread (raft's contract). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "store/store_format.h"
#include "store/store_int.h"

static const char *const meta_names[2] = {"meta-a", "meta-b"};

int store_meta_write(struct slog *sl, uint64_t term, uint64_t vote)
{
    uint8_t buf[SF_META_SIZE];
    uint64_t seq = sl->meta_seq + 1;
    int slot = (int)(seq % 2);
    int err;

    if (sl->failed != 0) {
        return sl->failed;
    }
    ONCE_ASSERT(sl->meta_fd[slot] >= 0, "store_meta_open opened both copies");
    sf_meta_encode(buf, seq, term, vote, sl->meta_cut);
    /* The other slot keeps the previous state: a torn write here loses
     * only this update, which has not been reported durable yet. */
    err = store_write_all(sl->sys, sl->meta_fd[slot], buf, sizeof buf, 0);
    if (err == 0 && sl->sys->fdatasync(sl->sys, sl->meta_fd[slot]) != 0) {
        err = -errno;
    }
    if (err != 0) {
        char msg[ERR_MSG_SIZE];
        err_printf(msg, "%s", strerror(-err));
        err_wrapf(msg, "write %s", meta_names[slot]);
        store_set_failed(sl, store_raft_code(err), msg);
        return sl->failed;
    }
    sl->meta_seq = seq;
    sl->term = term;
    sl->vote = vote;
    return 0;
}

int store_set_term(struct store *s, raft_term term)
{
    const struct slog *sl = s->impl;

    /* Raft's persisted term never goes back. */
    ONCE_ASSERTF(term >= sl->term, "term %" PRIu64 " after %" PRIu64,
                 (uint64_t)term, sl->term);
    return store_meta_write(s->impl, term, 0);
}

int store_set_vote(struct store *s, raft_id id)
{
    struct slog *sl = s->impl;
    return store_meta_write(sl, sl->term, id);
}

/* Open (creating it at full size) copy @i and decode it into @seq...;
 * returns RAFT_* with @errmsg, and *st the decode status. */
static int meta_open_one(struct slog *sl,
                         int i,
                         uint64_t v[4],
                         int *st,
                         bool *created,
                         char *errmsg)
{
    const struct store_sys *sys = sl->sys;
    uint8_t buf[SF_META_SIZE];
    struct stat sb;
    int fd, err;

    *st = -1; /* defined on every return, not only after a decode */
    fd = sys->openat(sys, sl->dirfd, meta_names[i],
                     O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || sys->fstat(sys, fd, &sb) != 0) {
        err_printf(errmsg, "open %s/%s: %s", sl->dir, meta_names[i],
                   strerror(errno));
        if (fd >= 0) {
            sys->close(sys, fd);
        }
        return RAFT_IOERR;
    }
    sl->meta_fd[i] = fd;
    memset(buf, 0, sizeof buf);
    if (sb.st_size < (off_t)SF_META_SIZE) {
        /* Allocated once, at full size, so an update never needs space. */
        err = store_write_all(sys, fd, buf, sizeof buf, 0);
        if (err == 0 && sys->fdatasync(sys, fd) != 0) {
            err = -errno;
        }
        if (err != 0) {
            err_printf(errmsg, "create %s/%s: %s", sl->dir, meta_names[i],
                       strerror(-err));
            return store_raft_code(err);
        }
        *created = true;
    } else if ((err = store_read_all(sys, fd, buf, sizeof buf, 0)) != 0) {
        err_printf(errmsg, "read %s/%s: %s", sl->dir, meta_names[i],
                   strerror(-err));
        return RAFT_IOERR;
    }
    *st = sf_meta_decode(buf, &v[0], &v[1], &v[2], &v[3]);
    return 0;
}

int store_meta_open(struct slog *sl, char *errmsg)
{
    uint64_t v[2][4] = {{0}}; /* seq, term, vote, cut */
    int st[2], best = -1, rv;
    bool created = false;

    for (int i = 0; i < 2; i++) {
        rv = meta_open_one(sl, i, v[i], &st[i], &created, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    if (created && store_fsync_dir(sl->sys, sl->dirfd) != 0) {
        err_printf(errmsg, "fsync %s: %s", sl->dir, strerror(errno));
        return RAFT_IOERR;
    }
    if (st[0] < 0 && st[1] < 0) {
        err_printf(errmsg,
                   "%s/meta-a and meta-b: both bad at offset 0 (checksum)",
                   sl->dir);
        return RAFT_CORRUPT;
    }
    for (int i = 0; i < 2; i++) {
        if (st[i] < 0) {
            /* The torn write of the latest update, which never returned. */
            store_notice(sl, "warn",
                         "%s/%s: bad record (a torn metadata write), using "
                         "the other copy",
                         sl->dir, meta_names[i]);
        }
        if (st[i] == 0 && (v[i][0] % 2) != (uint64_t)i) {
            err_printf(errmsg, "%s/%s: sequence %" PRIu64 " in the wrong slot",
                       sl->dir, meta_names[i], v[i][0]);
            return RAFT_CORRUPT;
        }
        if (st[i] == 0 && (best < 0 || v[i][0] > v[best][0])) {
            best = i;
        }
    }
    if (best >= 0) {
        sl->meta_seq = v[best][0];
        sl->term = v[best][1];
        sl->vote = v[best][2];
        sl->meta_cut = v[best][3];
    }
    return 0;
}
