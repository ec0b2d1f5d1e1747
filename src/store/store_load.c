/* store/store_load.c: load, bootstrap and recover (store_int.h): the I/O
 * around the load rules of docs/store.md. Listing the directory, reading
 * files, cutting a torn tail and removing a stale log are here; what a
 * segment's bytes mean (records, a torn tail to cut, or a refusal naming
 * file and offset) is decided by the pure store_scan_segment
 * (store_scan.h). Synchronous, loop thread (raft's contract). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_format.h"
#include "store/store_int.h"
#include "store/store_scan.h"

struct scan
{
    uint64_t *segs; /* first indexes from the names, sorted */
    size_t n_segs;
    struct snapref *snaps; /* newest first */
    size_t n_snaps;
    struct raft_entry *entries; /* raft's, handed over by load */
    size_t n_entries, cap_entries;
    /* The batch the next small entry's data goes into (LOAD_BATCH bytes,
     * raft_malloc'ed, shared with the entries already in it). */
    uint8_t *chunk;
    size_t chunk_used;
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

/* One directory entry: a segment or snapshot name is recorded, an
 * unfinished file removed. RAFT_NOMEM. */
static int list_one(struct slog *sl, struct scan *sc, const char *n)
{
    size_t len = strlen(n);
    uint64_t a, b;

    if (len == 24 && strncmp(n, "seg-", 4) == 0 && parse_u64(n + 4, 20, &a)) {
        uint64_t *g = realloc(sc->segs, (sc->n_segs + 1) * sizeof *g);
        if (g == NULL) {
            return RAFT_NOMEM;
        }
        sc->segs = g;
        sc->segs[sc->n_segs++] = a;
    } else if (len == 46 && strncmp(n, "snap-", 5) == 0 && n[25] == '-' &&
               parse_u64(n + 5, 20, &a) && parse_u64(n + 26, 20, &b)) {
        struct snapref *g = realloc(sc->snaps, (sc->n_snaps + 1) * sizeof *g);
        if (g == NULL) {
            return RAFT_NOMEM;
        }
        sc->snaps = g;
        sc->snaps[sc->n_snaps].term = a;
        sc->snaps[sc->n_snaps++].index = b;
    } else if (strncmp(n, "tmp-", 4) == 0 || strncmp(n, "prep-", 5) == 0) {
        /* Unfinished: never part of the log (renamed only when durable). */
        (void)sl->sys->unlinkat(sl->sys, sl->dirfd, n, 0);
    }
    return 0;
}

struct list_ctx
{
    struct slog *sl;
    struct scan *sc;
    int rv;
};

static int list_each(void *arg, const char *name)
{
    struct list_ctx *c = arg;

    c->rv = list_one(c->sl, c->sc, name);
    return c->rv;
}

static int list_dir(struct slog *sl, struct scan *sc)
{
    struct list_ctx c = {sl, sc, 0};
    int rv;

    if (sl->sys->list(sl->sys, sl->dirfd, list_each, &c) != 0) {
        err_printf(sl->s->errmsg, "list %s: %s", sl->dir, strerror(errno));
        return RAFT_IOERR;
    }
    rv = c.rv;
    if (rv != 0) {
        err_printf(sl->s->errmsg, "out of memory listing %s", sl->dir);
        return rv;
    }
    if (sc->n_segs > 1) {
        qsort(sc->segs, sc->n_segs, sizeof *sc->segs, cmp_u64);
    }
    if (sc->n_snaps > 1) {
        qsort(sc->snaps, sc->n_snaps, sizeof *sc->snaps, cmp_snap_desc);
    }
    return 0;
}

/* Each distinct batch once: the entries of a batch are contiguous. */
static void free_entries(struct scan *sc)
{
    void *batch = NULL;

    for (size_t i = 0; i < sc->n_entries; i++) {
        if (sc->entries[i].batch != batch) {
            batch = sc->entries[i].batch;
            raft_free(batch);
        }
    }
    raft_free(sc->entries);
    sc->entries = NULL;
    sc->n_entries = sc->cap_entries = 0;
    sc->chunk = NULL;
    sc->chunk_used = 0;
}

/* Loaded entries share batches of LOAD_BATCH bytes. raft 0.15 frees an
 * entry's batch when the entry leaves the log only after scanning every
 * entry still in the log for another one in the same batch
 * (isBatchReferenced in its log.c); with a batch per entry, the first
 * snapshot after a restart, which drops the loaded entries, cost
 * (entries dropped) x (entries kept) comparisons on the loop: 14-30 s at
 * 60,000 of each, with the node deaf meanwhile and a candidate after it
 * (bench/README.md). Shared batches cost one scan per batch. An entry
 * larger than a quarter batch gets a batch of its own, and closes the
 * current one, so that every batch's entries stay contiguous (raft's
 * entryBatchesDestroy, and free_entries above, free a batch where it
 * changes). */
#define LOAD_BATCH ((size_t)1 << 20)

static uint8_t *entry_memory(struct scan *sc, size_t len, void **batch)
{
    size_t need = (len + 7) & ~(size_t)7;
    uint8_t *p;

    if (need == 0) {
        need = 8;
    }
    if (need > LOAD_BATCH / 4) {
        sc->chunk = NULL;
        p = raft_malloc(need);
        *batch = p;
        return p;
    }
    if (sc->chunk == NULL || sc->chunk_used + need > LOAD_BATCH) {
        sc->chunk = raft_malloc(LOAD_BATCH);
        sc->chunk_used = 0;
        if (sc->chunk == NULL) {
            return NULL;
        }
    }
    p = sc->chunk + sc->chunk_used;
    sc->chunk_used += need;
    *batch = sc->chunk;
    return p;
}

struct load_ctx
{
    struct slog *sl;
    struct scan *sc;
};

/* store_scan_cb: the record as raft's entry, and its offset. RAFT_NOMEM. */
static int push_entry(void *arg, const struct sf_rec *r, size_t off)
{
    struct load_ctx *c = arg;
    struct scan *sc = c->sc;
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
    e->buf.base = entry_memory(sc, r->len, &e->batch);
    if (e->buf.base == NULL) {
        return RAFT_NOMEM;
    }
    memcpy(e->buf.base, r->buf, r->len);
    sc->n_entries++;
    sc->last_term = r->term;
    if (store_reserve_offs(c->sl, 1) != 0) {
        return RAFT_NOMEM;
    }
    c->sl->offs[c->sl->n_offs++] = off;
    return 0;
}

/* A torn tail at [res->end, res->cut_end) of @name: cut, durably, and keep
 * the node from voting until the log holds the index again: the record may
 * have been acknowledged (rio's no-vote state). The cut index goes into
 * the metadata first, so that every later start (a restart, a --bootstrap
 * that is then ignored) still knows it after the record is gone. */
static int cut_tail(struct slog *sl,
                    int fd,
                    const char *name,
                    const struct store_scan_result *res)
{
    int rv, err;

    if (res->next > sl->meta_cut) {
        sl->meta_cut = res->next;
        rv = store_meta_write(sl, sl->term, sl->vote);
        if (rv != 0) {
            return rv;
        }
    }
    err = store_zero_range(sl->sys, fd, res->end, res->cut_end);
    if (err == 0 && sl->sys->fdatasync(sl->sys, fd) != 0) {
        err = -errno;
    }
    if (err != 0) {
        err_printf(sl->s->errmsg, "cut torn tail of %s/%s: %s", sl->dir, name,
                   strerror(-err));
        return store_raft_code(err);
    }
    sl->s->cut_index = res->next;
    store_notice(sl, "warn",
                 "cut a torn record at the tail: %s/%s offset %zu (index "
                 "%" PRIu64 "); no votes until the log holds it again",
                 sl->dir, name, res->end, res->next);
    return 0;
}

/* The last segment becomes the current one, open at @end. */
static int keep_current(struct slog *sl,
                        int fd,
                        const char *name,
                        const uint8_t *file,
                        size_t size,
                        size_t end)
{
    sl->cur_fd = fd;
    sl->cur_end = end;
    sl->cur_cap = size;
    if (sl->direct) {
        uint64_t a = end / BLOCK * BLOCK;
        sl->cur_dfd = sl->sys->openat(sl->sys, sl->dirfd, name,
                                      O_RDWR | O_DIRECT | O_CLOEXEC, 0);
        if (sl->cur_dfd < 0 || size % BLOCK != 0) {
            err_printf(
                sl->s->errmsg, "open %s/%s with O_DIRECT: %s", sl->dir, name,
                sl->cur_dfd < 0 ? strerror(errno) : "size not in blocks");
            return RAFT_IOERR;
        }
        memset(sl->dtail, 0, BLOCK);
        memcpy(sl->dtail, file + a, (size_t)(end - a));
    }
    return 0;
}

/* Read segment @name whole into *file (reallocated), its open fd in *@fd_out:
 * 0, or RAFT_IOERR / RAFT_NOMEM with sl->s->errmsg (raft reads the code). */
static int read_segment(struct slog *sl,
                        const char *name,
                        uint8_t **file,
                        size_t *size,
                        int *fd_out)
{
    const struct store_sys *sys = sl->sys;
    struct stat st;
    uint8_t *f;
    int fd, err, rv;

    fd = sys->openat(sys, sl->dirfd, name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0 || sys->fstat(sys, fd, &st) != 0) {
        err_printf(sl->s->errmsg, "open %s/%s: %s", sl->dir, name,
                   strerror(errno));
        rv = RAFT_IOERR;
        goto err;
    }
    *size = (size_t)st.st_size;
    free(*file);
    *file = f = malloc(*size > 0 ? *size : 1);
    if (f == NULL) {
        err_printf(sl->s->errmsg, "out of memory reading %s", name);
        rv = RAFT_NOMEM;
        goto err;
    }
    if ((err = store_read_all(sys, fd, f, *size, 0)) != 0) {
        err_printf(sl->s->errmsg, "read %s/%s: %s", sl->dir, name,
                   strerror(-err));
        rv = RAFT_IOERR;
        goto err;
    }
    *fd_out = fd;
    return 0;
err:
    if (fd >= 0) {
        sys->close(sys, fd);
    }
    return rv;
}

/* Read every segment into @sc and the store's bookkeeping. */
static int load_segments(struct slog *sl, struct scan *sc)
{
    struct load_ctx ctx = {sl, sc};
    struct store_scan_in in = {.dir = sl->dir, .is_first = true};
    uint8_t *file = NULL;
    int rv = 0;

    for (size_t k = 0; k < sc->n_segs && rv == 0; k++) {
        struct store_scan_result res;
        char name[NAME_LEN];
        size_t size = 0;
        int fd;

        store_seg_name(name, sc->segs[k]);
        rv = read_segment(sl, name, &file, &size, &fd);
        if (rv != 0) {
            break;
        }
        in.name = name;
        in.name_first = sc->segs[k];
        in.is_last = k + 1 == sc->n_segs;
        store_scan_segment(file, size, &in, push_entry, &ctx, &res);
        if (res.verdict == STORE_SCAN_REFUSE) {
            err_printf(sl->s->errmsg, "%s", res.msg);
            rv = RAFT_CORRUPT;
        } else if (res.verdict == STORE_SCAN_STOPPED) {
            err_printf(sl->s->errmsg, "out of memory loading %s", name);
            rv = res.cb_rv;
        } else if ((rv = store_push_seg(sl, res.first)) != 0) {
            err_printf(sl->s->errmsg, "out of memory");
        } else if (res.verdict == STORE_SCAN_CUT) {
            rv = cut_tail(sl, fd, name, &res);
        }
        if (k == 0) {
            sc->first = sl->base = res.first;
        }
        if (rv == 0 && in.is_last) {
            rv = keep_current(sl, fd, name, file, size, res.end);
        } else {
            sl->sys->close(sl->sys, fd);
        }
        in.is_first = false;
        in.expect = res.next;
    }
    free(file);
    return rv;
}

static void reset_state(struct slog *sl)
{
    store_close_current(sl);
    sl->cur_end = sl->cur_cap = 0;
    sl->n_segs = 0;
    sl->n_offs = 0;
    sl->base = 1;
    sl->next = 1;
    memset(sl->snaps, 0, sizeof sl->snaps);
    sl->s->cut_index = 0;
}

static void keep_snaps(struct slog *sl, const struct scan *sc)
{
    sl->snaps[0] = sc->snaps[0];
    if (sc->n_snaps > 1) {
        sl->snaps[1] = sc->snaps[1];
    }
}

/* The newest snapshot, checked (a bad one refuses: never a fall back to
 * the older one); those beyond the newest two are removed. */
static int load_snapshot(struct slog *sl,
                         struct scan *sc,
                         struct raft_snapshot **snapshot)
{
    char name[NAME_LEN];
    int rv;

    for (size_t i = 2; i < sc->n_snaps; i++) {
        store_snap_name(name, sc->snaps[i].term, sc->snaps[i].index);
        /* older than the two kept */
        (void)sl->sys->unlinkat(sl->sys, sl->dirfd, name, 0);
    }
    if (sc->n_snaps == 0) {
        return 0;
    }
    store_snap_name(name, sc->snaps[0].term, sc->snaps[0].index);
    rv = store_read_snapshot(sl->sys, sl->dirfd, name, snapshot, sl->s->errmsg);
    if (rv != 0) {
        return rv;
    }
    if ((*snapshot)->term != sc->snaps[0].term ||
        (*snapshot)->index != sc->snaps[0].index) {
        err_printf(sl->s->errmsg, "%s/%s: header does not match its name",
                   sl->dir, name);
        return RAFT_CORRUPT;
    }
    keep_snaps(sl, sc);
    return 0;
}

/* A log left over from before an installed snapshot that replaced it (a
 * crash while its segments were being removed): everything up to the
 * snapshot is in it, so its segments go. */
static int drop_stale_log(struct slog *sl, struct scan *sc, uint64_t si)
{
    uint64_t last = sc->first + sc->n_entries - 1;

    store_notice(sl, "info",
                 "removing %zu log entries (%" PRIu64 "-%" PRIu64
                 ") replaced by the snapshot at %" PRIu64,
                 sc->n_entries, sc->first, last, si);
    for (size_t i = sl->n_segs; i-- > 0;) {
        char name[NAME_LEN];
        store_seg_name(name, sl->segs[i].first);
        if (sl->sys->unlinkat(sl->sys, sl->dirfd, name, 0) != 0) {
            err_printf(sl->s->errmsg, "unlink %s: %s", name, strerror(errno));
            return RAFT_IOERR;
        }
    }
    if (store_fsync_dir(sl->sys, sl->dirfd) != 0) {
        err_printf(sl->s->errmsg, "fsync %s", sl->dir);
        return RAFT_IOERR;
    }
    free_entries(sc);
    reset_state(sl);
    keep_snaps(sl, sc);
    return 0;
}

/* Load rule 6: the log against the snapshot at (si, st). */
static int fit_snapshot(struct slog *sl,
                        struct scan *sc,
                        const struct raft_snapshot *sn)
{
    uint64_t si = sn->index, st = sn->term;
    uint64_t last = sc->first + sc->n_entries - 1;
    int rv;

    if (sc->n_entries > 0 && sc->first > si + 1) {
        err_printf(sl->s->errmsg,
                   "the log starts at index %" PRIu64
                   " but the snapshot ends at %" PRIu64 " (a gap)",
                   sc->first, si);
        return RAFT_CORRUPT;
    }
    if (sc->n_entries > 0 &&
        (last < si ||
         (sc->first <= si && sc->entries[si - sc->first].term != st))) {
        rv = drop_stale_log(sl, sc, si);
        if (rv != 0) {
            return rv;
        }
    }
    if (sc->n_entries == 0) {
        sc->first = si + 1;
        sl->base = si + 1;
    }
    if (sc->last_term == 0) {
        sc->last_term = st;
    }
    return 0;
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
    if ((rv = list_dir(sl, sc)) != 0 ||
        (rv = load_snapshot(sl, sc, snapshot)) != 0 ||
        (rv = load_segments(sl, sc)) != 0) {
        return rv;
    }
    if (sc->n_entries == 0 && sl->n_segs > 0) {
        /* Only a segment rolled right before a crash can be empty, and it
         * starts where the log does. */
        uint64_t want = *snapshot != NULL ? (*snapshot)->index + 1 : 1;
        if (sl->segs[0].first != want) {
            err_printf(sl->s->errmsg,
                       "%s/seg-%020" PRIu64
                       ": an empty segment where the log should "
                       "start at %" PRIu64 " (a gap)",
                       sl->dir, sl->segs[0].first, want);
            return RAFT_CORRUPT;
        }
    }
    if (*snapshot != NULL) {
        rv = fit_snapshot(sl, sc, *snapshot);
        if (rv != 0) {
            return rv;
        }
    } else if (sc->n_entries > 0 && sc->first != 1) {
        err_printf(sl->s->errmsg,
                   "the log starts at index %" PRIu64
                   " and there is no snapshot",
                   sc->first);
        return RAFT_CORRUPT;
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

/* The cut index of this start or of an earlier one (meta_cut): while the
 * log ends below it, no votes; once it holds it, none. */
static void report_cut(struct slog *sl, uint64_t last)
{
    struct store *s = sl->s;

    if (sl->meta_cut > last) {
        if (s->cut_index == 0) {
            store_notice(sl, "warn",
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

/* --accept-cut-tail: the operator takes the log as it ends at @last and
 * gives up the cut index, durably (a crash after this write finds no cut),
 * so that the node votes and campaigns again. What that gives up is said
 * at error level: if a majority of voters cut the same entry, an
 * acknowledged claim may be gone. */
static int accept_cut(struct slog *sl, uint64_t last)
{
    uint64_t cut = sl->meta_cut;
    int rv;

    if (cut <= last) {
        store_notice(sl, "info",
                     "accept-cut-tail: nothing to do: no cut index is pending "
                     "(the log ends at %" PRIu64 ")",
                     last);
        return 0;
    }
    sl->meta_cut = 0;
    rv = store_meta_write(sl, sl->term, sl->vote);
    if (rv != 0) {
        sl->meta_cut = cut;
        return rv;
    }
    store_notice(sl, "error",
                 "accept-cut-tail: cleared the cut index %" PRIu64
                 " (the log ends at %" PRIu64
                 "): this node votes and campaigns again. Accepted by the "
                 "operator: if a majority of voters cut index %" PRIu64
                 ", an acknowledged entry at that index may be lost",
                 cut, last, cut);
    return 0;
}

/* Load returns @rv: nothing it scanned is kept. */
static int load_failed(struct slog *sl,
                       struct scan *sc,
                       struct raft_snapshot **snapshot,
                       int rv)
{
    store_snapshot_free(*snapshot);
    *snapshot = NULL;
    free_entries(sc);
    scan_free(sc);
    reset_state(sl);
    return rv;
}

int store_load(struct store *s,
               raft_term *term,
               raft_id *voted_for,
               struct raft_snapshot **snapshot,
               raft_index *start_index,
               struct raft_entry *entries[],
               size_t *n_entries)
{
    struct slog *sl = s->impl;
    struct scan sc;
    uint64_t last;
    int rv;

    rv = scan_all(sl, &sc, snapshot);
    if (rv != 0) {
        return load_failed(sl, &sc, snapshot, rv);
    }
    last = sc.n_entries > 0    ? sc.first + sc.n_entries - 1
           : *snapshot != NULL ? (*snapshot)->index
                               : 0;
    if (sl->o.accept_cut_tail) {
        sl->o.accept_cut_tail = false; /* this start's first load only */
        rv = accept_cut(sl, last);
        if (rv != 0) {
            return load_failed(sl, &sc, snapshot, rv);
        }
    }
    report_cut(sl, last);
    *term = sl->term;
    *voted_for = sl->vote;
    *start_index = sc.first;
    *entries = sc.entries;
    *n_entries = sc.n_entries;
    scan_free(&sc);
    sl->loaded = true;
    store_start_prep(sl);
    return 0;
}

/* A segment for a synchronous write at @index (bootstrap, recover: no
 * worker job runs before load). */
static int roll_sync(struct slog *sl, uint64_t index, size_t size)
{
    struct job j;

    memset(&j, 0, sizeof j);
    j.kind = J_ROLL;
    j.sl = sl;
    j.u.roll.first = index;
    j.u.roll.need = SF_SEG_HDR + size;
    sl->prep_ok = false;
    store_run_roll(&j);
    if (j.rv != 0) {
        err_printf(sl->s->errmsg, "%s", j.err);
        return j.rv;
    }
    store_close_current(sl);
    sl->cur_fd = j.u.roll.fd_out;
    sl->cur_dfd = j.u.roll.dfd_out; /* (unused here; closed with it) */
    sl->cur_end = SF_SEG_HDR;
    sl->cur_cap = j.u.roll.cap_out;
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
        err_printf(sl->s->errmsg, "out of memory");
        return RAFT_NOMEM;
    }
    sf_rec_encode(rec, index, term, type, buf->base, buf->len);
    if (sl->cur_fd < 0 || sl->cur_end + size > sl->cur_cap) {
        int rv = roll_sync(sl, index, size);
        if (rv != 0) {
            free(rec);
            return rv;
        }
    }
    err = store_write_all(sl->sys, sl->cur_fd, rec, size, sl->cur_end);
    free(rec);
    if (err == 0 && sl->sys->fdatasync(sl->sys, sl->cur_fd) != 0) {
        err = -errno;
    }
    if (err != 0) {
        err_printf(sl->s->errmsg, "write record %" PRIu64 ": %s", index,
                   strerror(-err));
        return store_raft_code(err);
    }
    sl->cur_end += size;
    return 0;
}

int store_bootstrap(struct store *s, const struct raft_configuration *conf)
{
    struct slog *sl = s->impl;
    struct raft_snapshot *sn = NULL;
    struct raft_buffer buf;
    struct scan sc;
    int rv;

    if (sl->loaded) {
        err_printf(s->errmsg, "already started");
        return RAFT_CANTBOOTSTRAP;
    }
    rv = scan_all(sl, &sc, &sn);
    if (rv == 0 && (sl->term != 0 || sc.n_entries > 0 || sn != NULL)) {
        err_printf(s->errmsg, "the store holds state");
        rv = RAFT_CANTBOOTSTRAP;
    }
    store_snapshot_free(sn);
    free_entries(&sc);
    scan_free(&sc);
    if (rv != 0) {
        reset_state(sl);
        return rv;
    }
    rv = raft_configuration_encode(conf, &buf);
    if (rv != 0) {
        err_printf(s->errmsg, "encode configuration");
        return rv;
    }
    /* The entry first, then the term: a crash between leaves an entry
     * and term 0, which the next bootstrap refuses (the log holds state)
     * rather than losing. */
    rv = write_sync(sl, 1, 1, RAFT_CHANGE, &buf);
    raft_free(buf.base);
    if (rv == 0) {
        rv = store_meta_write(sl, 1, 0);
    }
    reset_state(sl);
    return rv;
}

int store_log_pristine(struct store *s)
{
    struct slog *sl = s->impl;
    struct raft_snapshot *old = NULL;
    struct scan sc;
    int rv;

    if (sl->loaded) {
        err_printf(s->errmsg, "already started");
        return RAFT_CANTBOOTSTRAP;
    }
    rv = scan_all(sl, &sc, &old);
    if (rv == 0 && (sl->term != 0 || sc.n_entries > 0 || old != NULL)) {
        err_printf(s->errmsg, "the store holds state");
        rv = RAFT_CANTBOOTSTRAP;
    }
    store_snapshot_free(old);
    free_entries(&sc);
    scan_free(&sc);
    reset_state(sl);
    return rv;
}

int store_log_seed(struct store *s, const struct raft_snapshot *sn)
{
    struct slog *sl = s->impl;
    char name[NAME_LEN];
    const char *what = "write";
    int rv, err;

    rv = store_log_pristine(s);
    if (rv != 0) {
        return rv;
    }
    /* The snapshot first, then the term: a crash between leaves a
     * snapshot and term 0, which the next start refuses to seed again
     * (the store holds state) rather than losing. */
    err = store_write_tmp_snap(sl, sn, &what);
    store_snap_name(name, sn->term, sn->index);
    if (err == 0 && sl->sys->renameat(sl->sys, sl->dirfd, "tmp-snap", sl->dirfd,
                                      name) != 0) {
        err = -errno;
        what = "rename";
    }
    if (err == 0) {
        err = store_fsync_dir(sl->sys, sl->dirfd);
        what = "fsync the directory of";
    }
    if (err != 0) {
        err_printf(s->errmsg, "%s %s/%s: %s", what, sl->dir, name,
                   strerror(-err));
        return store_raft_code(err);
    }
    rv = store_meta_write(sl, sn->term, 0);
    reset_state(sl);
    return rv;
}

int store_recover(struct store *s, const struct raft_configuration *conf)
{
    struct slog *sl = s->impl;
    struct raft_snapshot *sn = NULL;
    struct raft_buffer buf;
    struct scan sc;
    uint64_t term;
    int rv;

    if (sl->loaded) {
        err_printf(s->errmsg, "recover after start");
        return RAFT_INVALID;
    }
    rv = scan_all(sl, &sc, &sn);
    term = sc.last_term != 0 ? sc.last_term : 1;
    store_snapshot_free(sn);
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
