/* tests/sim/sim_disk.c: see sim_disk.h. */
#include "sim_disk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/err.h"
#include "store/store_format.h"
#include "store/store_scan.h"

enum sd_kind { SD_APPEND, SD_TRUNCATE, SD_PUT, SD_GET };

struct sd_op
{
    enum sd_kind kind;
    raft_time due;
    bool done; /* its effect is on the disk (a crash kept it) */
    bool fail; /* an append whose fsync fails */
    struct sd_op *next;
    /* append: the records, encoded at submission */
    struct raft_io_append *req;
    raft_io_append_cb cb;
    raft_index index; /* append: first index; truncate: from here */
    unsigned n;
    uint8_t *bytes;
    size_t len;
    /* put */
    struct raft_io_snapshot_put *put;
    raft_io_snapshot_put_cb put_cb;
    const struct raft_snapshot *snapshot; /* raft's, valid until put_cb */
    unsigned trailing;
    /* get */
    struct raft_io_snapshot_get *get;
    raft_io_snapshot_get_cb get_cb;
};

static struct sim_disk *disk_of(struct store *s)
{
    return (struct sim_disk *)(void *)s; /* the store is the first member */
}

/* --- the segment ---------------------------------------------------------- */

/* Room for @extra more bytes after seg_len, zeros to seg_cap: a torn
 * record's claimed extent stays inside the file, as in the log store's
 * preallocated segments. */
static void seg_reserve(struct sim_disk *d, size_t extra)
{
    size_t want = d->seg_len + extra + 4096, cap = d->seg_cap;
    uint8_t *p;

    if (want <= cap) {
        return;
    }
    while (cap < want) {
        cap = cap == 0 ? 65536 : cap * 2;
    }
    p = realloc(d->seg, cap);
    ONCE_ASSERT(p != NULL, "out of memory growing a simulated segment");
    memset(p + d->seg_cap, 0, cap - d->seg_cap);
    d->seg = p;
    d->seg_cap = cap;
}

/* An empty segment starting at @first. */
static void seg_reset(struct sim_disk *d, raft_index first)
{
    seg_reserve(d, SF_SEG_HDR);
    memset(d->seg, 0, d->seg_cap);
    sf_seg_header(d->seg, first);
    d->seg_len = SF_SEG_HDR;
    d->first = first;
    d->n_recs = 0;
}

static void offs_push(struct sim_disk *d, size_t off)
{
    if (d->n_recs == d->offs_cap) {
        size_t cap = d->offs_cap == 0 ? 256 : d->offs_cap * 2;
        size_t *p = realloc(d->offs, cap * sizeof *p);
        ONCE_ASSERT(p != NULL, "out of memory growing record offsets");
        d->offs = p;
        d->offs_cap = cap;
    }
    d->offs[d->n_recs++] = off;
}

/* Write @len bytes of records starting at @index at the end of the log. A
 * partial write (@len short of the whole) leaves a torn record. */
static void seg_write(struct sim_disk *d,
                      raft_index index,
                      const uint8_t *bytes,
                      size_t len,
                      size_t whole)
{
    size_t off = 0;

    if (d->seg_len == 0) {
        seg_reset(d, index);
    }
    ONCE_ASSERTF(index == d->first + d->n_recs,
                 "append at %llu, the log ends at %llu",
                 (unsigned long long)index,
                 (unsigned long long)(d->first + d->n_recs - 1));
    seg_reserve(d, whole);
    memcpy(d->seg + d->seg_len, bytes, len);
    if (len < whole) {
        d->seg_len += len; /* the loader judges what it finds there */
        return;
    }
    while (off < len) {
        size_t rlen;

        /* u32 len at byte 28 of the record header (store_format.h) */
        rlen = (size_t)bytes[off + 28] | (size_t)bytes[off + 29] << 8 |
               (size_t)bytes[off + 30] << 16 | (size_t)bytes[off + 31] << 24;
        offs_push(d, d->seg_len + off);
        off += sf_rec_size(rlen);
    }
    d->seg_len += len;
}

/* Drop the records from @index on. */
static void seg_truncate(struct sim_disk *d, raft_index index)
{
    size_t end;

    if (d->seg_len == 0 || index >= d->first + d->n_recs) {
        return;
    }
    if (index <= d->first) {
        seg_reset(d, index);
        return;
    }
    end = d->offs[index - d->first];
    memset(d->seg + end, 0, d->seg_len - end);
    d->seg_len = end;
    d->n_recs = index - d->first;
}

/* Keep the records from @keep on (a snapshot covers those before). */
static void seg_compact(struct sim_disk *d, raft_index keep)
{
    size_t from, n;

    if (d->seg_len == 0 || keep <= d->first) {
        return;
    }
    if (keep >= d->first + d->n_recs) {
        seg_reset(d, keep);
        return;
    }
    from = d->offs[keep - d->first];
    n = d->seg_len - from;
    memmove(d->seg + SF_SEG_HDR, d->seg + from, n);
    memset(d->seg + SF_SEG_HDR + n, 0, d->seg_len - (SF_SEG_HDR + n));
    sf_seg_header(d->seg, keep);
    d->seg_len = SF_SEG_HDR + n;
    memmove(d->offs, d->offs + (keep - d->first),
            (d->n_recs - (keep - d->first)) * sizeof *d->offs);
    d->n_recs -= keep - d->first;
    for (size_t k = 0; k < d->n_recs; k++) {
        d->offs[k] -= from - SF_SEG_HDR;
    }
    d->first = keep;
}

/* --- snapshots ------------------------------------------------------------ */

static void snap_store(struct sim_disk *d, const struct raft_snapshot *sn)
{
    size_t len = 0, at = 0;

    for (unsigned k = 0; k < sn->n_bufs; k++) {
        len += sn->bufs[k].len;
    }
    free(d->snap_data);
    free(d->snap_conf);
    d->snap_data = malloc(len > 0 ? len : 1);
    d->snap_conf_len = sf_conf_size(&sn->configuration);
    d->snap_conf = malloc(d->snap_conf_len > 0 ? d->snap_conf_len : 1);
    ONCE_ASSERT(d->snap_data != NULL && d->snap_conf != NULL,
                "out of memory storing a simulated snapshot");
    for (unsigned k = 0; k < sn->n_bufs; k++) {
        memcpy(d->snap_data + at, sn->bufs[k].base, sn->bufs[k].len);
        at += sn->bufs[k].len;
    }
    d->snap_data_len = len;
    sf_conf_encode(&sn->configuration, d->snap_conf);
    d->has_snap = true;
    d->snap_term = sn->term;
    d->snap_index = sn->index;
    d->snap_conf_index = sn->configuration_index;
}

/* The stored snapshot as raft's (raft frees it: one buffer, raft_malloc'd).
 * NULL with *rv set on failure. */
static struct raft_snapshot *snap_load(struct sim_disk *d, int *rv)
{
    struct raft_snapshot *sn = raft_calloc(1, sizeof *sn);

    *rv = RAFT_NOMEM;
    if (sn == NULL) {
        return NULL;
    }
    sn->term = d->snap_term;
    sn->index = d->snap_index;
    sn->configuration_index = d->snap_conf_index;
    raft_configuration_init(&sn->configuration);
    *rv = sf_conf_decode(d->snap_conf, d->snap_conf_len, &sn->configuration);
    sn->bufs = raft_malloc(sizeof *sn->bufs);
    if (*rv == 0 && sn->bufs != NULL) {
        sn->n_bufs = 1;
        sn->bufs[0].len = d->snap_data_len;
        sn->bufs[0].base = raft_malloc(d->snap_data_len + 1);
        if (sn->bufs[0].base != NULL) {
            memcpy(sn->bufs[0].base, d->snap_data, d->snap_data_len);
            return sn;
        }
    }
    if (*rv == 0) {
        *rv = RAFT_NOMEM;
    }
    raft_configuration_close(&sn->configuration);
    if (sn->bufs != NULL) {
        raft_free(sn->bufs);
    }
    raft_free(sn);
    return NULL;
}

/* --- the queue ------------------------------------------------------------ */

static struct sd_op *op_new(struct sim_disk *d, enum sd_kind kind)
{
    struct sd_op *op = calloc(1, sizeof *op);

    ONCE_ASSERT(op != NULL, "out of memory queueing a simulated disk op");
    op->kind = kind;
    op->due = *d->now + d->latency_ms;
    if (d->tail != NULL) {
        d->tail->next = op;
        /* strictly in order, whatever the latency did meanwhile */
        if (op->due < d->tail->due) {
            op->due = d->tail->due;
        }
    } else {
        d->head = op;
    }
    d->tail = op;
    d->queued++;
    return op;
}

static struct sd_op *op_pop(struct sim_disk *d)
{
    struct sd_op *op = d->head;

    d->head = op->next;
    if (d->head == NULL) {
        d->tail = NULL;
    }
    d->queued--;
    return op;
}

/* The op's effect on the durable state. */
static void op_apply(struct sim_disk *d, struct sd_op *op)
{
    switch (op->kind) {
        case SD_APPEND:
            seg_write(d, op->index, op->bytes, op->len, op->len);
            break;
        case SD_TRUNCATE:
            seg_truncate(d, op->index);
            break;
        case SD_PUT:
            snap_store(d, op->snapshot);
            if (op->trailing == 0) {
                seg_reset(d, op->snapshot->index + 1); /* an install */
            } else if (op->snapshot->index > op->trailing) {
                seg_compact(d, op->snapshot->index - op->trailing + 1);
            }
            break;
        case SD_GET:
            break;
    }
    op->done = true;
}

static void op_free(struct sd_op *op)
{
    free(op->bytes);
    free(op);
}

/* The op's callback with @status (a get builds the snapshot on 0). */
static void op_complete(struct sim_disk *d, struct sd_op *op, int status)
{
    struct raft_snapshot *sn = NULL;
    int rv;

    switch (op->kind) {
        case SD_APPEND:
            op->cb(op->req, status);
            break;
        case SD_PUT:
            op->put_cb(op->put, status);
            break;
        case SD_GET:
            if (status == 0) {
                if (!d->has_snap) {
                    status = RAFT_NOTFOUND;
                } else if ((sn = snap_load(d, &rv)) == NULL) {
                    status = rv;
                }
            }
            op->get_cb(op->get, sn, status);
            break;
        case SD_TRUNCATE:
            break;
    }
}

/* An append whose fsync failed never completes to raft: rio's G4 stops the
 * node there (a node aborts; the harness's hook returns, and the request
 * stays with rio, docs in rio.h). raft's request for it then outlives the
 * node, and the leak checker at the child's exit would blame raft for it.
 * The bytes at the start of what the store was handed (rio's request: its
 * struct raft_io_append, then the pointer to raft's) are kept here, so
 * that raft's request stays referenced until exit. Conservative like the
 * checker itself; one run per process, never cleared. */
#define SD_STUCK_MAX 64
static uint8_t stuck[SD_STUCK_MAX]
                    [sizeof(struct raft_io_append) + sizeof(void *)];
static unsigned n_stuck;

void sim_disk_run(struct sim_disk *d)
{
    while (!d->stopped && !d->hung && d->head != NULL &&
           d->head->due <= *d->now) {
        struct sd_op *op = op_pop(d);
        int status = 0;

        if (op->fail) {
            /* The write reached the page cache, the fsync failed: what
             * is on the platter is unknown, so nothing of it counts. */
            status = RAFT_IOERR;
            err_printf(d->store.errmsg,
                       "fsync: input/output error "
                       "(simulated)");
            d->stats.failed_fsyncs++;
            /* Nothing after it completes: the node fail-stops on it, and
             * the crash cancels the rest. */
            d->hung = true;
            if (n_stuck < SD_STUCK_MAX) {
                memcpy(stuck[n_stuck++], op->req, sizeof stuck[0]);
            }
        } else {
            op_apply(d, op);
        }
        op_complete(d, op, status);
        op_free(op);
    }
}

/* --- store ops ------------------------------------------------------------ */

static int sd_append(struct store *s,
                     struct raft_io_append *req,
                     const struct raft_entry entries[],
                     unsigned n,
                     raft_io_append_cb cb)
{
    struct sim_disk *d = disk_of(s);
    struct sd_op *op;
    raft_index index;
    size_t len = 0, at = 0;
    const struct sd_op *last = NULL;

    /* The index: after what is queued, else after the log. */
    for (const struct sd_op *o = d->head; o != NULL; o = o->next) {
        if (o->kind == SD_APPEND || o->kind == SD_TRUNCATE ||
            (o->kind == SD_PUT && o->trailing == 0)) {
            last = o;
        }
    }
    if (last == NULL) {
        index = d->seg_len == 0 ? (d->has_snap ? d->snap_index + 1 : 1)
                                : d->first + d->n_recs;
    } else if (last->kind == SD_APPEND) {
        index = last->index + last->n;
    } else if (last->kind == SD_TRUNCATE) {
        index = last->index;
    } else {
        index = last->snapshot->index + 1;
    }
    for (unsigned k = 0; k < n; k++) {
        len += sf_rec_size(entries[k].buf.len);
    }
    op = op_new(d, SD_APPEND);
    op->req = req;
    op->cb = cb;
    op->index = index;
    op->n = n;
    op->len = len;
    op->bytes = malloc(len > 0 ? len : 1);
    ONCE_ASSERT(op->bytes != NULL, "out of memory encoding records");
    for (unsigned k = 0; k < n; k++) {
        sf_rec_encode(op->bytes + at, index + k, entries[k].term,
                      entries[k].type, entries[k].buf.base, entries[k].buf.len);
        at += sf_rec_size(entries[k].buf.len);
    }
    if (d->fail_countdown >= 0 && d->fail_countdown-- == 0) {
        op->fail = true;
    }
    d->stats.appends++;
    return 0;
}

static int sd_truncate(struct store *s, raft_index index)
{
    struct sim_disk *d = disk_of(s);

    if (d->head == NULL && !d->stopped) {
        seg_truncate(d, index);
    } else {
        op_new(d, SD_TRUNCATE)->index = index; /* behind the appends */
    }
    d->stats.truncations++;
    return 0;
}

static int sd_snapshot_put(struct store *s,
                           unsigned trailing,
                           struct raft_io_snapshot_put *req,
                           const struct raft_snapshot *snapshot,
                           raft_io_snapshot_put_cb cb)
{
    struct sim_disk *d = disk_of(s);
    struct sd_op *op = op_new(d, SD_PUT);

    op->put = req;
    op->put_cb = cb;
    op->snapshot = snapshot;
    op->trailing = trailing;
    d->stats.puts++;
    return 0;
}

static int sd_snapshot_get(struct store *s,
                           struct raft_io_snapshot_get *req,
                           raft_io_snapshot_get_cb cb)
{
    struct sd_op *op = op_new(disk_of(s), SD_GET);

    op->get = req;
    op->get_cb = cb;
    return 0;
}

static int sd_set_term(struct store *s, raft_term term)
{
    struct sim_disk *d = disk_of(s);

    d->term = term;
    d->vote = 0;
    return 0;
}

static int sd_set_vote(struct store *s, raft_id id)
{
    disk_of(s)->vote = id;
    return 0;
}

static int sd_bootstrap(struct store *s, const struct raft_configuration *conf)
{
    struct sim_disk *d = disk_of(s);
    struct raft_buffer buf;
    uint8_t *rec;
    int rv;

    if (d->term != 0 || d->seg_len != 0 || d->has_snap) {
        err_printf(s->errmsg, "the store holds state");
        return RAFT_CANTBOOTSTRAP;
    }
    rv = raft_configuration_encode(conf, &buf);
    if (rv != 0) {
        err_printf(s->errmsg, "encode configuration");
        return rv;
    }
    rec = malloc(sf_rec_size(buf.len));
    ONCE_ASSERT(rec != NULL, "out of memory bootstrapping");
    sf_rec_encode(rec, 1, 1, RAFT_CHANGE, buf.base, buf.len);
    seg_write(d, 1, rec, sf_rec_size(buf.len), sf_rec_size(buf.len));
    free(rec);
    raft_free(buf.base);
    d->term = 1;
    d->vote = 0;
    return 0;
}

static int sd_recover(struct store *s, const struct raft_configuration *conf)
{
    (void)conf;
    err_printf(s->errmsg, "recover is not simulated");
    return RAFT_INVALID;
}

/* --- load ----------------------------------------------------------------- */

struct load_ctx
{
    struct sim_disk *d;
    struct raft_entry *entries;
    size_t n, cap;
};

/* store_scan_cb: the record as raft's entry (a batch each). */
static int push_entry(void *arg, const struct sf_rec *r, size_t off)
{
    struct load_ctx *c = arg;
    struct raft_entry *e;

    if (c->n == c->cap) {
        size_t cap = c->cap == 0 ? 256 : c->cap * 2;
        struct raft_entry *g = raft_realloc(c->entries, cap * sizeof *g);
        if (g == NULL) {
            return RAFT_NOMEM;
        }
        c->entries = g;
        c->cap = cap;
    }
    e = &c->entries[c->n];
    memset(e, 0, sizeof *e);
    e->term = r->term;
    e->type = (unsigned short)r->type;
    e->buf.len = r->len;
    e->buf.base = raft_malloc(r->len > 0 ? r->len : 8);
    if (e->buf.base == NULL) {
        return RAFT_NOMEM;
    }
    memcpy(e->buf.base, r->buf, r->len);
    e->batch = e->buf.base;
    c->n++;
    offs_push(c->d, off);
    return 0;
}

static void entries_free(struct load_ctx *c)
{
    for (size_t k = 0; k < c->n; k++) {
        raft_free(c->entries[k].batch);
    }
    raft_free(c->entries);
    c->entries = NULL;
    c->n = c->cap = 0;
}

/* The segment, judged by the production loader's rules (store_scan.h). */
static int load_segment(struct sim_disk *d, struct load_ctx *c)
{
    struct store_scan_in in = {.dir = "sim",
                               .name = "seg",
                               .name_first = d->first,
                               .is_first = true,
                               .is_last = true};
    struct store_scan_result res;

    d->n_recs = 0;
    if (d->seg_len == 0) {
        return 0;
    }
    store_scan_segment(d->seg, d->seg_cap, &in, push_entry, c, &res);
    if (res.verdict == STORE_SCAN_REFUSE) {
        err_printf(d->store.errmsg, "%s", res.msg);
        d->stats.refusals++;
        return RAFT_CORRUPT;
    }
    if (res.verdict == STORE_SCAN_STOPPED) {
        err_printf(d->store.errmsg, "out of memory loading");
        return res.cb_rv;
    }
    if (res.verdict == STORE_SCAN_CUT) {
        /* As store_load.c's cut_tail: the cut index first, then zeros. */
        if (res.next > d->meta_cut) {
            d->meta_cut = res.next;
        }
        memset(d->seg + res.end, 0, res.cut_end - res.end);
        d->store.cut_index = res.next;
        d->stats.cuts++;
    }
    d->seg_len = res.end;
    return 0;
}

/* store_load.c's rule 6: the log against the snapshot. */
static int fit_snapshot(struct sim_disk *d, struct load_ctx *c)
{
    raft_index si = d->snap_index, last = d->first + c->n - 1;

    if (c->n > 0 && d->first > si + 1) {
        err_printf(d->store.errmsg,
                   "the log starts at index %llu but the snapshot ends at "
                   "%llu (a gap)",
                   (unsigned long long)d->first, (unsigned long long)si);
        return RAFT_CORRUPT;
    }
    if (c->n > 0 &&
        (last < si ||
         (d->first <= si && c->entries[si - d->first].term != d->snap_term))) {
        entries_free(c); /* a log the snapshot replaced */
        seg_reset(d, si + 1);
    }
    return 0;
}

static int sd_load(struct store *s,
                   raft_term *term,
                   raft_id *voted_for,
                   struct raft_snapshot **snapshot,
                   raft_index *start_index,
                   struct raft_entry *entries[],
                   size_t *n_entries)
{
    struct sim_disk *d = disk_of(s);
    struct load_ctx c = {d, NULL, 0, 0};
    raft_index last;
    int rv;

    ONCE_ASSERT(d->head == NULL, "a disk loads with nothing queued");
    d->stopped = false;
    d->hung = false;
    d->torn_pending = false;
    s->cut_index = 0;
    *snapshot = NULL;
    rv = load_segment(d, &c);
    if (rv == 0 && d->has_snap) {
        rv = fit_snapshot(d, &c);
    } else if (rv == 0 && c.n > 0 && d->first != 1) {
        err_printf(s->errmsg,
                   "the log starts at index %llu and there is "
                   "no snapshot",
                   (unsigned long long)d->first);
        rv = RAFT_CORRUPT;
    }
    if (rv == 0 && d->has_snap && (*snapshot = snap_load(d, &rv)) == NULL) {
        err_printf(s->errmsg, "snapshot: %s", raft_strerror(rv));
    }
    if (rv != 0) {
        entries_free(&c);
        d->stopped = true;
        return rv;
    }
    /* store_load.c's report_cut: no votes while the log ends below a cut
     * made at this start or an earlier one. */
    last = c.n > 0 ? d->first + c.n - 1 : d->has_snap ? d->snap_index : 0;
    if (d->meta_cut > last) {
        s->cut_index = d->meta_cut;
    } else {
        s->cut_index = 0;
        d->meta_cut = 0;
    }
    *term = d->term;
    *voted_for = d->vote;
    *start_index = c.n > 0 ? d->first : d->has_snap ? d->snap_index + 1 : 1;
    *entries = c.entries;
    *n_entries = c.n;
    return 0;
}

/* The node closes (the end of a run, or after a crash): what is queued is
 * canceled. A crash already decided what reached the disk. */
static void sd_close(struct store *s, store_close_cb cb)
{
    struct sim_disk *d = disk_of(s);

    d->stopped = true;
    while (d->head != NULL) {
        struct sd_op *op = op_pop(d);

        op_complete(d, op, RAFT_CANCELED);
        op_free(op);
    }
    cb(s);
}

/* --- crash, corruption ---------------------------------------------------- */

size_t sim_disk_pending_bytes(const struct sim_disk *d, unsigned keep)
{
    const struct sd_op *op = d->head;

    for (unsigned k = 0; k < keep && op != NULL; k++) {
        op = op->next;
    }
    return op != NULL && op->kind == SD_APPEND && !op->fail ? op->len : 0;
}

void sim_disk_crash(struct sim_disk *d,
                    unsigned keep,
                    bool torn,
                    size_t torn_bytes)
{
    struct sd_op *op = d->head;
    unsigned k;

    d->stats.crashes++;
    if (d->hung) {
        keep = 0; /* behind a failed write, nothing counts */
        torn = false;
    }
    /* What hit the platter before the power went: never past a write
     * whose fsync was to fail (nothing after it counts). */
    for (k = 0; k < keep && op != NULL && !op->fail; k++, op = op->next) {
        if (op->kind != SD_GET) {
            op_apply(d, op);
            d->stats.kept_unsynced += op->kind == SD_APPEND;
        }
    }
    if (torn && op != NULL && op->kind == SD_APPEND && !op->fail &&
        torn_bytes > 0 && torn_bytes < op->len) {
        seg_write(d, op->index, op->bytes, torn_bytes, op->len);
        d->torn_pending = true;
        d->stats.torn++;
    }
    for (; op != NULL; op = op->next) {
        d->stats.lost_unsynced += op->kind == SD_APPEND;
    }
    /* Nothing more reaches the disk; the queue waits for the close to
     * cancel it (raft frees its requests in the callbacks). */
    d->stopped = true;
    for (op = d->head; op != NULL; op = op->next) {
        op->done = true;
    }
}

bool sim_disk_corrupt(struct sim_disk *d, uint64_t pick)
{
    size_t span;

    if (d->seg_len <= SF_SEG_HDR || d->n_recs == 0) {
        return false;
    }
    span = d->seg_len - SF_SEG_HDR;
    d->seg[SF_SEG_HDR + (size_t)(pick % span)] ^= 0x5a;
    d->stats.corrupted++;
    return true;
}

/* --- life ----------------------------------------------------------------- */

void sim_disk_init(struct sim_disk *d, const raft_time *now)
{
    static const struct store_ops ops = {
        .load = sd_load,
        .bootstrap = sd_bootstrap,
        .recover = sd_recover,
        .set_term = sd_set_term,
        .set_vote = sd_set_vote,
        .append = sd_append,
        .truncate = sd_truncate,
        .snapshot_put = sd_snapshot_put,
        .snapshot_get = sd_snapshot_get,
        .close = sd_close,
    };

    memset(d, 0, sizeof *d);
    d->store.ops = &ops;
    d->store.name = "sim";
    d->store.impl = d;
    d->now = now;
    d->latency_ms = 10;
    d->fail_countdown = -1;
}

void sim_disk_free(struct sim_disk *d)
{
    while (d->head != NULL) {
        op_free(op_pop(d));
    }
    free(d->seg);
    free(d->offs);
    free(d->snap_conf);
    free(d->snap_data);
    memset(d, 0, sizeof *d);
}
