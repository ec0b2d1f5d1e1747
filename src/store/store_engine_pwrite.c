/* store/store_engine_pwrite.c: the "pwrite" write engine (store_int.h).
 *
 * The batch's J_WRITE job goes to the store's worker thread, which writes
 * it with pwritev (resubmitting short counts and EINTR/EAGAIN) and syncs it
 * with one fdatasync; the completion reaches the loop through the worker's
 * uv_async like every other job (store_queue.c). No loop handles or kernel
 * objects of its own, and every file call through sl->sys: the engine the
 * simulator runs (store_sys.h). */
#include <errno.h>
#include <limits.h>

#include "common/assert.h"
#include "store/store_int.h"

/* Worker thread. */
void store_run_write(struct job *j)
{
    const struct store_sys *sys = j->sl->sys;
    struct job_write *w = &j->u.write;
    struct iovec *iov = w->iov;
    unsigned n = w->n_iov;
    uint64_t off = w->off;

    while (n > 0) {
        ssize_t got = sys->pwritev(
            sys, w->fd, iov, (int)(n > IOV_MAX ? IOV_MAX : n), (off_t)off);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            store_job_err(j, -errno, "write", "segment");
            return;
        }
        off += (uint64_t)got;
        iov = store_iov_advance(iov, &n, (size_t)got);
    }
    ONCE_ASSERT(off == w->off + w->total, "the iovecs hold the batch's bytes");
    if (sys->fdatasync(sys, w->fd) != 0) {
        store_job_err(j, -errno, "fdatasync", "segment");
    }
}

static int pwrite_open(struct slog *sl, char *errmsg)
{
    (void)sl;
    (void)errmsg;
    return 0;
}

static int pwrite_start(struct slog *sl)
{
    (void)sl;
    return 0;
}

static int pwrite_submit(struct slog *sl, struct job *w, char *msg)
{
    (void)msg;
    ONCE_ASSERT(w == sl->wjob && w->kind == J_WRITE,
                "the engine writes the batch's job");
    store_job_submit(sl, w); /* completes in store_queue.c's job_done */
    return 0;
}

static void pwrite_release(struct slog *sl)
{
    (void)sl;
}

const struct store_engine_ops store_engine_pwrite = {
    .name = "pwrite",
    .direct = false,
    .open = pwrite_open,
    .start = pwrite_start,
    .submit = pwrite_submit,
    .close = pwrite_start, /* no handles to close either */
    .release = pwrite_release,
};
