/* store/store_queue.c: the log store's op queue (store_int.h).
 *
 * raft's calls become ops queued in order. One op is in flight at a time:
 * every append queued when the previous write completed forms the next
 * batch (group commit, up to BATCH_MAX bytes), which rolls to a new segment
 * first if it does not fit, then goes to the write engine as one J_WRITE
 * job (one write + one data sync, however the engine does it). A
 * truncation, snapshot put or get waits behind everything queued before it.
 * Callbacks run on the loop, strictly in order, and after the first I/O
 * error every op fails with that status (fail-stop). Loop thread only. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/sim_mutation.h"
#include "store/store_format.h"
#include "store/store_int.h"

void store_set_failed(struct slog *sl, int rv, const char *msg)
{
    if (sl->failed == 0) {
        sl->failed = rv;
        err_printf(sl->s->errmsg, "%s", msg);
        store_notice(sl, "error", "store failed: %s", msg);
    }
}

/* Complete @op with @status (loop thread). */
void store_op_done(struct slog *sl, struct op *op, int status)
{
    (void)sl;
    switch (op->kind) {
        case OP_APPEND:
            op->u.append.cb(op->u.append.req, status);
            break;
        case OP_PUT:
            op->u.put.cb(op->u.put.req, status);
            break;
        case OP_GET:
            op->u.get.cb(op->u.get.req, NULL, status);
            break;
        case OP_TRUNCATE:
            break;
    }
    free(op);
}

void store_enqueue(struct slog *sl, struct op *op)
{
    ONCE_ASSERT((sl->head == NULL) == (sl->tail == NULL),
                "queue head and tail agree");
    op->next = NULL;
    if (sl->tail != NULL) {
        sl->tail->next = op;
    } else {
        sl->head = op;
    }
    sl->tail = op;
    store_kick(sl);
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

int store_reserve_offs(struct slog *sl, size_t more)
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

int store_push_seg(struct slog *sl, uint64_t first)
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

uint64_t store_written(const struct slog *sl)
{
    return sl->base + sl->n_offs;
}

/* Index of the segment holding @index (which is in [base, written)). */
static size_t seg_of(const struct slog *sl, uint64_t index)
{
    size_t lo = 0, hi = sl->n_segs;

    ONCE_ASSERTF(sl->n_segs > 0 && index >= sl->segs[0].first,
                 "index %" PRIu64 " below every segment", index);
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

void store_close_current(struct slog *sl)
{
    if (sl->cur_fd >= 0) {
        sl->sys->close(sl->sys, sl->cur_fd);
    }
    if (sl->cur_dfd >= 0) {
        sl->sys->close(sl->sys, sl->cur_dfd);
    }
    sl->cur_fd = sl->cur_dfd = -1;
}

static void finish_batch(struct slog *sl, int status)
{
    struct op *op = sl->batch;

    ONCE_ASSERT(sl->busy && !sl->in_cb,
                "one batch in flight; its callbacks do not nest");
    sl->batch = NULL;
    sl->busy = false;
    sl->in_cb = true;
    while (op != NULL) {
        struct op *next = op->next;
        store_op_done(sl, op, status);
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
        const struct op_append *a = &op->u.append;

        rv = store_reserve_offs(sl, a->n);
        for (unsigned i = 0; rv == 0 && i < a->n; i++) {
            sl->offs[sl->n_offs++] = off;
            off += a->sizes[i];
            sl->stats.records++;
        }
    }
    if (rv != 0) {
        store_set_failed(sl, rv, "out of memory recording written records");
        finish_batch(sl, rv);
        return;
    }
    ONCE_ASSERTF(off <= sl->cur_cap,
                 "batch written to %" PRIu64 " of a %" PRIu64
                 "-byte segment: start_batch rolls first",
                 off, sl->cur_cap);
    sl->cur_end = off;
    sl->stats.batches++;
    finish_batch(sl, 0);
}

void store_write_done(struct slog *sl, int rv, const char *msg)
{
    struct job *w = sl->wjob;

    ONCE_ASSERT(w != NULL, "a write completes once per submit");
    sl->wjob = NULL;
    if (rv != 0) {
        store_set_failed(sl, rv, msg); /* (msg may be the job's) */
        store_job_free(w);
        finish_batch(sl, sl->failed);
        return;
    }
    if (sl->o.synced != NULL) {
        sl->o.synced(sl->o.log_arg, uv_hrtime() - sl->write_t0,
                     sl->write_bytes);
    }
    store_job_free(w);
    batch_written(sl);
}

void store_queue_resume(struct slog *sl)
{
    store_kick(sl);
    store_maybe_shutdown(sl);
}

/* The batch, as one J_WRITE job of iovecs at the current end, to the
 * engine. */
static void start_write(struct slog *sl)
{
    struct job *w = store_job_new(sl, J_WRITE);
    struct job_write *wr;
    char msg[ERR_MSG_SIZE];
    unsigned i = 0;
    int rv;

    if (w == NULL || (w->u.write.iov_mem =
                          calloc(sl->batch_n, sizeof(struct iovec))) == NULL) {
        free(w);
        store_set_failed(sl, RAFT_NOMEM, "out of memory starting a write");
        finish_batch(sl, RAFT_NOMEM);
        return;
    }
    wr = &w->u.write;
    wr->iov = wr->iov_mem;
    for (struct op *op = sl->batch; op != NULL; op = op->next, i++) {
        wr->iov[i].iov_base = op->u.append.buf;
        wr->iov[i].iov_len = op->u.append.bytes;
        wr->total += op->u.append.bytes;
    }
    ONCE_ASSERT(i == sl->batch_n, "the write is the batch start_batch took");
    wr->n_iov = i;
    wr->fd = sl->cur_fd;
    wr->off = sl->cur_end;
    ONCE_ASSERT(sl->wjob == NULL, "one write in flight");
    sl->wjob = w;
    sl->write_t0 = uv_hrtime();
    sl->write_bytes = wr->total;
    rv = sl->eng->submit(sl, w, msg);
    if (rv != 0) {
        sl->wjob = NULL;
        store_job_free(w);
        store_set_failed(sl, rv, msg);
        finish_batch(sl, rv);
    }
}

void store_start_prep(struct slog *sl)
{
    struct job *j = store_job_new(sl, J_PREP);

    if (j != NULL) {
        store_job_submit(sl, j); /* best effort: a roll prepares its own */
    }
}

/* The simulator's seeded bug "store-ack-early" (common/sim_mutation.h,
 * tests/sim/README.md): the batch's callbacks run as it is handed to the
 * worker, before its write and fdatasync; the real completion then finds
 * nothing to tell. A crash before the sync loses entries raft was told
 * are durable. */
static void ack_noop(struct raft_io_append *req, int status)
{
    (void)req;
    (void)status;
}

static bool in_append; /* the mutant's only: inside store_append */

/* Tell raft of every op of the batch in flight not told yet. */
static void ack_batch(struct slog *sl)
{
    sl->in_cb = true; /* (what the callbacks queue waits for this batch) */
    for (struct op *op = sl->batch; op != NULL; op = op->next) {
        raft_io_append_cb cb = op->u.append.cb;
        if (op->kind != OP_APPEND || cb == ack_noop) {
            continue;
        }
        op->u.append.cb = ack_noop;
        cb(op->u.append.req, 0);
    }
    sl->in_cb = false;
}

static void ack_early(struct slog *sl)
{
    if (in_append) {
        /* Not inside raft's own append call: a completion there makes
         * rio's event loop propose and append again inside it, without
         * end (and acknowledging it at the next append instead made
         * libraft leak). Batches formed while a write is in flight
         * (group commit, the usual case under load) start from a
         * completion. */
        return;
    }
    ack_batch(sl);
}

/* Start the batch at the head of the queue: roll first if needed. */
static void start_batch(struct slog *sl)
{
    size_t total = 0;
    struct op **pp = &sl->batch;

    sl->batch_n = 0;
    while (
        sl->head != NULL && sl->head->kind == OP_APPEND &&
        (sl->batch_n == 0 || total + sl->head->u.append.bytes <= BATCH_MAX) &&
        sl->batch_n < IOV_MAX) {
        struct op *op = dequeue(sl);
        total += op->u.append.bytes;
        *pp = op;
        pp = &op->next;
        sl->batch_n++;
    }
    ONCE_ASSERT(sl->batch_n > 0, "start_batch runs with an append at the head");
    sl->busy = true;
    if (SIM_MUTANT(SIM_MUT_STORE_ACK_EARLY)) {
        ack_early(sl);
    }
    if (sl->cur_fd < 0 || sl->cur_end + total > sl->cur_cap) {
        struct job *j = store_job_new(sl, J_ROLL);
        if (j == NULL) {
            store_set_failed(sl, RAFT_NOMEM, "out of memory rolling a segment");
            finish_batch(sl, RAFT_NOMEM);
            return;
        }
        j->u.roll.first = store_written(sl);
        j->u.roll.need = SF_SEG_HDR + total;
        store_job_submit(sl, j);
        return;
    }
    start_write(sl);
}

static void roll_done(struct slog *sl, struct job *j)
{
    struct job_roll *r = &j->u.roll;

    if (j->rv != 0) {
        store_set_failed(sl, j->rv, j->err);
        finish_batch(sl, sl->failed);
        return;
    }
    ONCE_ASSERT(r->first == store_written(sl) && r->cap_out >= r->need,
                "the new segment starts where the log ends and holds the "
                "batch");
    store_close_current(sl);
    if (store_push_seg(sl, r->first) != 0) {
        store_set_failed(sl, RAFT_NOMEM, "out of memory rolling a segment");
        finish_batch(sl, RAFT_NOMEM);
        return; /* (the job's descriptors close with it) */
    }
    sl->cur_fd = r->fd_out;
    sl->cur_dfd = r->dfd_out;
    r->fd_out = r->dfd_out = -1;
    memset(sl->dtail, 0, BLOCK);
    sf_seg_header(sl->dtail, r->first);
    sl->cur_end = SF_SEG_HDR;
    sl->cur_cap = r->cap_out;
    if (sl->n_offs == 0) {
        sl->base = r->first;
    }
    sl->stats.rolls++;
    if (sl->failed == 0) {
        start_write(sl);
    } else {
        /* The store failed while the roll ran (set_term, ...): the batch
         * must still get its callbacks. */
        finish_batch(sl, sl->failed);
    }
    store_start_prep(sl); /* the next one, ahead of need, after the write */
}

/* The names a truncation at @index removes, highest first, and the range
 * it zeroes; RAFT_NOMEM. */
static int trunc_plan(struct slog *sl, struct job *j, uint64_t index)
{
    struct job_trunc *t = &j->u.trunc;
    char name[NAME_LEN];
    size_t k = index < sl->segs[0].first ? 0 : seg_of(sl, index);

    /* Later segments go first, highest first: a crash midway leaves a
     * contiguous log. Then the segment holding @index is zeroed from it. */
    for (size_t i = sl->n_segs; i-- > k + 1;) {
        store_seg_name(name, sl->segs[i].first);
        if (store_job_add_unlink(j, name) != 0) {
            return RAFT_NOMEM;
        }
    }
    if (index <= sl->segs[k].first) {
        /* The whole segment goes: its name says where it starts. */
        store_seg_name(name, sl->segs[k].first);
        t->zname[0] = '\0';
        return store_job_add_unlink(j, name);
    }
    store_seg_name(t->zname, sl->segs[k].first);
    ONCE_ASSERTF(index >= sl->base && index - sl->base < sl->n_offs,
                 "cutting at %" PRIu64 ", records are %" PRIu64 "..+%zu", index,
                 sl->base, sl->n_offs);
    t->zfrom = sl->offs[index - sl->base];
    t->zto = k == sl->n_segs - 1 ? sl->cur_end : UINT64_MAX;
    return 0;
}

static void start_truncate(struct slog *sl, struct op *op)
{
    uint64_t index = op->u.truncate.index;
    struct job *j;

    free(op);
    if (index >= store_written(sl)) {
        return; /* nothing on disk at or after it */
    }
    j = store_job_new(sl, J_TRUNC);
    if (j == NULL) {
        store_set_failed(sl, RAFT_NOMEM, "out of memory truncating");
        return;
    }
    j->u.trunc.index = index;
    if (trunc_plan(sl, j, index) != 0) {
        store_job_free(j);
        store_set_failed(sl, RAFT_NOMEM, "out of memory truncating");
        return;
    }
    sl->busy = true;
    store_job_submit(sl, j);
}

static void trunc_done(struct slog *sl, struct job *j)
{
    struct job_trunc *t = &j->u.trunc;
    uint64_t index = t->index;
    size_t k = index < sl->segs[0].first ? 0 : seg_of(sl, index);

    if (j->rv != 0) {
        store_set_failed(sl, j->rv, j->err);
        return;
    }
    store_close_current(sl);
    if (t->zname[0] == '\0') {
        /* The next append starts a new segment at @index: the previous
         * one (if any) ends right before it. */
        sl->n_segs = k;
        sl->cur_cap = 0;
        sl->cur_end = 0;
    } else {
        struct stat st;
        sl->n_segs = k + 1;
        sl->cur_fd = t->fd_out;
        sl->cur_dfd = t->dfd_out;
        t->fd_out = t->dfd_out = -1;
        if (t->tail_out != NULL) {
            memcpy(sl->dtail, t->tail_out, BLOCK);
        }
        sl->cur_end = t->zfrom;
        sl->cur_cap = sl->sys->fstat(sl->sys, sl->cur_fd, &st) == 0
                          ? (uint64_t)st.st_size
                          : t->zfrom;
    }
    if (index < sl->base) {
        sl->base = index;
        sl->n_offs = 0;
    } else {
        sl->n_offs = index - sl->base;
    }
    sl->stats.truncations++;
}

void store_kick(struct slog *sl)
{
    while (!sl->busy && !sl->in_cb && sl->head != NULL) {
        struct op *op;

        if (sl->failed != 0) {
            sl->in_cb = true;
            while ((op = dequeue(sl)) != NULL) {
                store_op_done(sl, op, sl->failed);
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
                store_start_put(sl, dequeue(sl));
                break;
            case OP_GET:
                store_start_get(sl, dequeue(sl));
                break;
        }
    }
}

static void job_done(struct slog *sl, struct job *j)
{
    switch (j->kind) {
        case J_PREP:
            if (j->rv != 0) {
                store_notice(sl, "warn", "segment preparation failed: %s",
                             j->err);
            }
            break;
        case J_ROLL:
            roll_done(sl, j);
            break;
        case J_WRITE:
            store_write_done(sl, j->rv, j->err); /* frees it */
            return;
        case J_TRUNC:
            ONCE_ASSERT(sl->busy, "a truncation runs as the op in flight");
            sl->busy = false;
            trunc_done(sl, j);
            break;
        case J_PUT:
            store_put_done(sl, j);
            break;
        case J_GET:
            store_get_done(sl, j);
            break;
    }
    store_job_free(j);
}

/* One job's completion and what it lets start. False when a callback in
 * job_done closed the store: the worker is gone and mu destroyed, the
 * handles are closing, and nothing of the store may be touched. */
static bool complete_one(struct slog *sl, struct job *j)
{
    job_done(sl, j);
    if (sl->stop) {
        return false;
    }
    store_kick(sl);
    return true;
}

void store_async_cb(uv_async_t *h)
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
        if (!complete_one(sl, j)) {
            return;
        }
    }
    store_maybe_shutdown(sl);
}

/* store_sys.h: one job's completion, for executors other than the
 * threads' (whose store_async_cb above drains its done queue). */
void store_job_complete(struct job *j)
{
    struct slog *sl = j->sl;

    if (complete_one(sl, j)) {
        store_maybe_shutdown(sl);
    }
}

/* --- raft's asynchronous calls -------------------------------------------- */

int store_append(struct store *s,
                 struct raft_io_append *req,
                 const struct raft_entry entries[],
                 unsigned n,
                 raft_io_append_cb cb)
{
    struct slog *sl = s->impl;
    struct op *op;
    struct op_append *a;
    size_t bytes = 0, head;
    uint8_t *mem, *p;

    if (sl->failed != 0) {
        return sl->failed;
    }
    for (unsigned i = 0; i < n; i++) {
        if (entries[i].buf.len > SF_REC_MAX) {
            err_printf(s->errmsg, "entry of %zu bytes", entries[i].buf.len);
            return RAFT_TOOBIG;
        }
        bytes += sf_rec_size(entries[i].buf.len);
    }
    /* One allocation: the op, then the record sizes, then the records
     * (8-aligned: sizeof(struct op) and n * 4 rounded up). */
    head = sf_pad8(sizeof *op) + sf_pad8((size_t)n * 4);
    mem = calloc(1, head + bytes);
    if (mem == NULL) {
        err_printf(s->errmsg, "out of memory");
        return RAFT_NOMEM;
    }
    op = (struct op *)(void *)mem;
    op->kind = OP_APPEND;
    a = &op->u.append;
    a->sizes = (uint32_t *)(void *)(mem + sf_pad8(sizeof *op));
    a->buf = mem + head;
    a->req = req;
    a->cb = cb;
    a->n = n;
    a->bytes = bytes;
    a->first = sl->next;
    /* Encoded now, on the loop: the batch is then plain buffers. */
    p = a->buf;
    for (unsigned i = 0; i < n; i++) {
        size_t size = sf_rec_size(entries[i].buf.len);
        sf_rec_encode(p, sl->next + i, entries[i].term, entries[i].type,
                      entries[i].buf.base, entries[i].buf.len);
        a->sizes[i] = (uint32_t)size;
        p += size;
    }
    ONCE_ASSERT(p == a->buf + bytes, "the records fill the op's buffer");
    sl->next += n;
    if (SIM_MUTANT(SIM_MUT_STORE_ACK_EARLY)) {
        in_append = true;
    }
    store_enqueue(sl, op);
    if (SIM_MUTANT(SIM_MUT_STORE_ACK_EARLY)) {
        in_append = false;
    }
    return 0;
}

struct op *store_op_alloc(struct slog *sl, enum op_kind kind, int *rv)
{
    struct op *op;

    if (sl->failed != 0) {
        *rv = sl->failed;
        return NULL;
    }
    op = calloc(1, sizeof *op);
    if (op == NULL) {
        err_printf(sl->s->errmsg, "out of memory");
        *rv = RAFT_NOMEM;
        return NULL;
    }
    op->kind = kind;
    return op;
}

int store_truncate(struct store *s, raft_index index)
{
    struct slog *sl = s->impl;
    struct op *op;
    int rv = 0;

    op = store_op_alloc(sl, OP_TRUNCATE, &rv);
    if (op == NULL) {
        return rv;
    }
    op->u.truncate.index = index;
    if (index < sl->next) {
        sl->next = index;
    }
    /* Behind every append queued before it, like raft_uv's barrier;
     * appends after it wait for it. */
    store_enqueue(sl, op);
    return 0;
}
