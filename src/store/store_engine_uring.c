/* store/store_engine_uring.c: the write engines "uring direct" and "uring
 * buffered" (store_int.h), and the io_uring probe (store_log.h).
 *
 * direct    the batch is copied into one BLOCK-aligned buffer that starts
 *           with the block holding the segment's end (sl->dtail, its bytes
 *           rewritten as they are) and ends with zeros up to the next block
 *           boundary (the file is pre-zeroed there anyway), and written
 *           with one IORING_OP_WRITE with RWF_DSYNC on the segment's
 *           O_DIRECT descriptor: durable by itself, issued inline at
 *           submit (docs/store.md "How it writes");
 *   buffered  one IORING_OP_WRITEV linked (IOSQE_IO_LINK) to one
 *           IORING_OP_FSYNC with IORING_FSYNC_DATASYNC.
 * Either way the ring's eventfd wakes the loop (uv_poll), which reaps the
 * completions here: EAGAIN/EINTR and short writes are resubmitted (a short
 * direct write at most 8 times, as the whole buffer), anything else fails
 * the store through store_write_done. Loop thread only. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/assert.h"
#include "store/store_int.h"

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

static int uring_open(struct slog *sl, char *errmsg)
{
    int rv = io_uring_queue_init(RING_ENTRIES, &sl->ring, 0);

    if (rv < 0) {
        err_printf(errmsg, "io_uring_queue_init: %s", strerror(-rv));
        return RAFT_IOERR;
    }
    sl->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sl->efd < 0) {
        err_printf(errmsg, "eventfd: %s", strerror(errno));
        goto err_ring;
    }
    rv = io_uring_register_eventfd(&sl->ring, sl->efd);
    if (rv < 0) {
        err_printf(errmsg, "io_uring_register_eventfd: %s", strerror(-rv));
        goto err_efd;
    }
    return 0;
err_efd:
    close(sl->efd);
    sl->efd = -1;
err_ring:
    io_uring_queue_exit(&sl->ring);
    return RAFT_IOERR;
}

/* Submit the @want SQEs just queued. All must go in: an SQE left behind
 * would leave cqes_pending above 0 for ever. The kernel takes what is
 * queued unless it fails; a short count is retried, and if it stays short
 * the store fails (fail-stop) rather than hang. 0 or a negated errno. */
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

/* Queue the write (and for buffered the linked sync) of sl->wjob from where
 * it stands, and submit. 0 or a negated errno. */
static int ring_submit(struct slog *sl)
{
    struct job_write *w = &sl->wjob->u.write;
    struct io_uring_sqe *sqe;

    ONCE_ASSERT(sl->cqes_pending == 0,
                "a write is submitted after its last completion");
    sqe = io_uring_get_sqe(&sl->ring);
    if (sqe == NULL) {
        return -EBUSY;
    }
    sl->wres = 0;
    sl->fres = 0;
    if (w->dbuf != NULL) {
        /* One O_DIRECT write, durable by itself (RWF_DSYNC): into
         * pre-zeroed, written blocks it needs no metadata, and the kernel
         * issues it without a worker thread. */
        io_uring_prep_write(sqe, sl->cur_dfd, w->dbuf, (unsigned)w->total,
                            w->off);
        sqe->rw_flags = RWF_DSYNC;
        io_uring_sqe_set_data64(sqe, 1);
        sl->cqes_pending = 1;
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
    return submit_all(sl, 2);
}

static int submit_failed(int neg_errno, char *msg)
{
    err_printf(msg, "io_uring_submit: %s", strerror(-neg_errno));
    return RAFT_IOERR;
}

static int buffered_submit(struct slog *sl, struct job *w, char *msg)
{
    int rv;

    (void)w;
    rv = ring_submit(sl);
    return rv == 0 ? 0 : submit_failed(rv, msg);
}

static int direct_submit(struct slog *sl, struct job *j, char *msg)
{
    struct job_write *w = &j->u.write;
    uint64_t a = sl->cur_end / BLOCK * BLOCK;
    size_t head = (size_t)(sl->cur_end - a);
    size_t len = (head + w->total + BLOCK - 1) / BLOCK * BLOCK;
    uint8_t *p;
    int rv;

    w->dbuf = aligned_alloc(BLOCK, len);
    if (w->dbuf == NULL) {
        err_printf(msg, "out of memory starting a write");
        return RAFT_NOMEM;
    }
    /* The start of the last block is rewritten with what it holds; after
     * the records, zeros, which the pre-zeroed file holds too. */
    memcpy(w->dbuf, sl->dtail, head);
    p = w->dbuf + head;
    for (unsigned k = 0; k < w->n_iov; k++) {
        memcpy(p, w->iov[k].iov_base, w->iov[k].iov_len);
        p += w->iov[k].iov_len;
    }
    ONCE_ASSERT((size_t)(p - w->dbuf) == head + w->total,
                "the iovecs hold the batch's bytes");
    memset(p, 0, len - head - w->total);
    w->d_base = a;
    w->d_used = head + w->total;
    w->off = a;
    w->total = len;
    rv = ring_submit(sl);
    return rv == 0 ? 0 : submit_failed(rv, msg);
}

static int resubmit(struct slog *sl)
{
    int rv = ring_submit(sl);

    return rv == 0 ? 1 : rv;
}

/* What the completions of sl->wjob ask for: 1 resubmitted, 0 done, or a
 * negated errno. */
static int batch_next(struct slog *sl)
{
    struct job_write *w = &sl->wjob->u.write;
    int wr = sl->wres, fr = sl->fres;

    if (wr == -EAGAIN || wr == -EINTR ||
        (wr >= 0 && (size_t)wr == w->total &&
         (fr == -EAGAIN || fr == -EINTR))) {
        return resubmit(sl); /* the same write and sync, again */
    }
    if (wr < 0) {
        return wr;
    }
    if ((size_t)wr < w->total && w->dbuf != NULL) {
        /* A short direct write: the whole aligned buffer again (the same
         * bytes at the same place), a few times at most. */
        return ++w->retries > 8 ? -EIO : resubmit(sl);
    }
    if ((size_t)wr < w->total) {
        /* Short write (the linked sync was cancelled): the rest, again. */
        w->off += (uint64_t)wr;
        w->total -= (size_t)wr;
        w->iov = store_iov_advance(w->iov, &w->n_iov, (size_t)wr);
        return resubmit(sl);
    }
    return fr < 0 ? fr : 0;
}

static void batch_done(struct slog *sl)
{
    struct job_write *w = &sl->wjob->u.write;
    char msg[ERR_MSG_SIZE];
    int err = batch_next(sl);

    if (err == 1) {
        return; /* resubmitted */
    }
    if (err == 0) {
        if (w->dbuf != NULL) {
            /* The block holding the new end, for the next write. */
            uint64_t end = w->d_base + w->d_used;
            uint64_t a = end / BLOCK * BLOCK;
            memset(sl->dtail, 0, BLOCK);
            memcpy(sl->dtail, w->dbuf + (a - w->d_base), (size_t)(end - a));
        }
        store_write_done(sl, 0, NULL);
    } else {
        err_printf(msg,
                   "io_uring write/sync of segment %" PRIu64
                   " at offset %" PRIu64 ": %s",
                   sl->segs[sl->n_segs - 1].first, w->off, strerror(-err));
        store_write_done(sl, store_raft_code(err), msg);
    }
    store_queue_resume(sl);
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
            batch_done(sl);
            if (sl->stop) {
                return; /* it finished the close: the handles are closing */
            }
        }
    }
}

static int uring_start(struct slog *sl)
{
    uv_poll_init(sl->loop, &sl->poll, sl->efd);
    sl->poll.data = sl;
    uv_poll_start(&sl->poll, UV_READABLE, poll_cb);
    return 1;
}

static int uring_close(struct slog *sl)
{
    /* The ring and its eventfd go in uring_release, after the last
     * callback of this loop turn. */
    uv_close((uv_handle_t *)&sl->poll, store_handle_closed);
    return 1;
}

static void uring_release(struct slog *sl)
{
    /* Here, not in uring_close: that may run inside poll_cb (a batch's
     * completion), whose loop reads the ring again. */
    io_uring_queue_exit(&sl->ring);
    close(sl->efd);
    sl->efd = -1;
}

const struct store_engine_ops store_engine_uring_direct = {
    .name = "uring",
    .direct = true,
    .open = uring_open,
    .start = uring_start,
    .submit = direct_submit,
    .close = uring_close,
    .release = uring_release,
};

const struct store_engine_ops store_engine_uring_buffered = {
    .name = "uring",
    .direct = false,
    .open = uring_open,
    .start = uring_start,
    .submit = buffered_submit,
    .close = uring_close,
    .release = uring_release,
};
