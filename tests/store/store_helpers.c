/* tests/store/store_helpers.c: see store_helpers.h. */
#include "store_helpers.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef STORE_TEST_ENGINE
#error \
    "STORE_TEST_ENGINE (0 pwrite, 1 uring direct, 2 uring buffered) must be set"
#endif

static bool no_direct;
/* Old snapshots are cut down in steps this small before their unlink, so
 * that the tests' small snapshot files take that path (store_snapshot.c). */
#define SH_UNLINK_STEP 256
static bool want_direct;

/* Whether TMPDIR's (or /tmp's) file system accepts O_DIRECT, probed in a
 * fresh directory there as the tests' own directories are (sh_mkdir).
 * Runs before check runs any test, so it cannot ck_assert: a probe that
 * cannot even create its file bails out (TAP) and exits. */
static bool tmp_has_direct(char *dir, size_t n)
{
    const char *t = getenv("TMPDIR");
    char p[512];
    int fd, err;

    snprintf(dir, n, "%s/once-store-probe-XXXXXX",
             t != NULL && t[0] != '\0' ? t : "/tmp");
    if (mkdtemp(dir) == NULL) {
        printf("Bail out! mkdtemp %s: %s\n", dir, strerror(errno));
        exit(EXIT_FAILURE);
    }
    snprintf(p, sizeof p, "%s/direct-probe", dir);
    fd = open(p, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    err = errno;
    if (fd >= 0) {
        close(fd);
        unlink(p);
    }
    rmdir(dir);
    if (fd < 0 && err != EINVAL) {
        printf("Bail out! open %s with O_DIRECT: %s\n", p, strerror(err));
        exit(EXIT_FAILURE);
    }
    return fd >= 0;
}

int sh_engine_case(void)
{
    char why[128], dir[256];

    if (STORE_TEST_ENGINE == SH_PWRITE) {
        return SH_PWRITE;
    }
    if (store_uring_probe(why, sizeof why) != 0) {
        printf("1..0 # SKIP io_uring unavailable: %s\n", why);
        return -1;
    }
    if (STORE_TEST_ENGINE == SH_URING_DIRECT &&
        !tmp_has_direct(dir, sizeof dir)) {
        printf("1..0 # SKIP no O_DIRECT in TMPDIR's file system (%s)\n", dir);
        return -1;
    }
    return STORE_TEST_ENGINE;
}

enum store_engine sh_engine(int i)
{
    no_direct = i == SH_URING_BUFFERED;
    want_direct = i == SH_URING_DIRECT;
    return i == SH_PWRITE ? STORE_ENGINE_PWRITE : STORE_ENGINE_URING;
}

void sh_mkdir(char *out, size_t n, const char *tag)
{
    const char *t = getenv("TMPDIR");
    int w = snprintf(out, n, "%s/once-store-%s-XXXXXX",
                     t != NULL && t[0] != '\0' ? t : "/tmp", tag);

    ck_assert(w > 0 && (size_t)w < n);
    ck_assert_ptr_nonnull(mkdtemp(out));
}

void sh_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void on_log(void *arg, const char *level, const char *msg)
{
    struct sh *h = arg;

    if (strstr(msg, "torn") != NULL) {
        h->cut_notices++;
    }
    if (strstr(msg, "accept-cut-tail: cleared") != NULL &&
        strcmp(level, "error") == 0) {
        h->accept_notices++;
    }
    if (strstr(msg, "accept-cut-tail: nothing to do") != NULL) {
        h->nothing_notices++;
    }
    if (getenv("STORE_TEST_VERBOSE") != NULL) {
        fprintf(stderr, "# store %s: %s\n", level, msg);
    }
}

static int open_opts(struct sh *h,
                     const char *dir,
                     enum store_engine e,
                     size_t seg,
                     bool accept_cut_tail)
{
    struct store_log_options o;
    char err[256];
    int rv;

    memset(h, 0, sizeof *h);
    ck_assert_int_eq(uv_loop_init(&h->loop), 0);
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    h->engine = e;
    h->seg = seg;
    memset(&o, 0, sizeof o);
    o.engine = e;
    o.segment_size = seg;
    o.no_direct = no_direct;
    o.unlink_step = SH_UNLINK_STEP;
    o.log = on_log;
    o.log_arg = h;
    o.accept_cut_tail = accept_cut_tail;
    rv = store_log_init(&h->s, &h->loop, dir, &o, err);
    if (rv != 0) {
        fprintf(stderr, "# store_log_init: %s\n", err);
        uv_loop_close(&h->loop);
        return rv;
    }
    h->open = true;
    /* the engine that runs is the one the case asked for */
    ck_assert_str_eq(h->s.name, e == STORE_ENGINE_PWRITE ? "pwrite" : "uring");
    ck_assert_msg(
        store_log_direct(&h->s) == (e == STORE_ENGINE_URING && want_direct),
        "store %s: O_DIRECT appends %s, expected %s", h->s.name,
        store_log_direct(&h->s) ? "on" : "off",
        e == STORE_ENGINE_URING && want_direct ? "on" : "off");
    return 0;
}

int sh_open(struct sh *h, const char *dir, enum store_engine e, size_t seg)
{
    return open_opts(h, dir, e, seg, false);
}

int sh_open_accept(struct sh *h,
                   const char *dir,
                   enum store_engine e,
                   size_t seg)
{
    return open_opts(h, dir, e, seg, true);
}

static void closed_cb(struct store *s)
{
    s->impl = (void *)1; /* (marker: closed) */
}

void sh_close(struct sh *h)
{
    if (!h->open) {
        return;
    }
    h->s.ops->close(&h->s, closed_cb);
    while (h->s.impl != (void *)1) {
        uv_run(&h->loop, UV_RUN_ONCE);
    }
    h->s.impl = NULL;
    ck_assert_int_eq(uv_loop_close(&h->loop), 0);
    h->open = false;
}

size_t sh_len(uint64_t index)
{
    return (size_t)((index * 37) % 97) / 8 * 8; /* 0..96, multiples of 8 */
}

void sh_payload(uint8_t *out, size_t len, uint64_t index, uint64_t term)
{
    for (size_t i = 0; i < len; i++) {
        out[i] = (uint8_t)(index * 131 + term * 7 + i * 13 + 1);
    }
}

struct areq
{
    struct raft_io_append req;
    int *pending;
    int *status;
    unsigned *order;
    unsigned seq;
};

static unsigned order_next;

static void append_cb(struct raft_io_append *req, int status)
{
    struct areq *a = req->data;

    (*a->pending)--;
    if (status != 0 && *a->status == 0) {
        *a->status = status;
    }
    /* Strictly in submission order. */
    ck_assert_uint_eq(a->seq, order_next);
    order_next++;
    free(a);
}

int sh_append(struct sh *h,
              uint64_t first,
              unsigned n,
              uint64_t term,
              size_t len)
{
    int pending = 0, status = 0;

    order_next = 0;
    for (unsigned i = 0; i < n; i++) {
        struct raft_entry e;
        struct areq *a = calloc(1, sizeof *a);
        size_t l = len != 0 ? len : sh_len(first + i);
        uint8_t *buf = malloc(l > 0 ? l : 1);
        int rv;

        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(buf);
        sh_payload(buf, l, first + i, term);
        memset(&e, 0, sizeof e);
        e.term = term;
        e.type = RAFT_COMMAND;
        e.buf.base = buf;
        e.buf.len = l;
        a->req.data = a;
        a->pending = &pending;
        a->status = &status;
        a->seq = i;
        rv = h->s.ops->append(&h->s, &a->req, &e, 1, append_cb);
        free(buf); /* the store encodes at once (it may not rely on it) */
        if (rv != 0) {
            free(a);
            if (status == 0) {
                status = rv;
            }
            order_next++; /* (no callback for a refused call) */
            continue;
        }
        pending++;
    }
    while (pending > 0) {
        uv_run(&h->loop, UV_RUN_ONCE);
    }
    return status;
}

int sh_load(struct sh *h, struct sh_loaded *l)
{
    memset(l, 0, sizeof *l);
    return h->s.ops->load(&h->s, &l->term, &l->vote, &l->snap, &l->start,
                          &l->entries, &l->n);
}

void sh_snapshot_free(struct raft_snapshot *s)
{
    if (s == NULL) {
        return;
    }
    raft_configuration_close(&s->configuration);
    for (unsigned i = 0; i < s->n_bufs; i++) {
        raft_free(s->bufs[i].base);
    }
    raft_free(s->bufs);
    raft_free(s);
}

void sh_loaded_free(struct sh_loaded *l)
{
    for (size_t i = 0; i < l->n; i++) { /* a batch's entries are contiguous */
        if (i == 0 || l->entries[i].batch != l->entries[i - 1].batch) {
            raft_free(l->entries[i].batch);
        }
    }
    raft_free(l->entries);
    sh_snapshot_free(l->snap);
    memset(l, 0, sizeof *l);
}

void sh_check_range(const struct sh_loaded *l,
                    uint64_t from,
                    uint64_t to,
                    uint64_t term,
                    size_t len)
{
    /* Up to the large entries of loaded_entries_share_batches. */
    static uint8_t want[512 * 1024];

    ck_assert_uint_ge(from, l->start);
    ck_assert_uint_lt(to - l->start, l->n);
    for (uint64_t i = from; i <= to; i++) {
        const struct raft_entry *e = &l->entries[i - l->start];
        size_t wl = len != 0 ? len : sh_len(i);

        ck_assert_uint_eq(e->term, term);
        ck_assert_uint_eq(e->type, RAFT_COMMAND);
        ck_assert_uint_eq(e->buf.len, wl);
        ck_assert(wl <= sizeof want);
        sh_payload(want, wl, i, term);
        ck_assert(wl == 0 || memcmp(e->buf.base, want, wl) == 0);
    }
}

int sh_truncate(struct sh *h, uint64_t index)
{
    int rv = h->s.ops->truncate(&h->s, index);

    /* Runs behind what was queued; let it finish. */
    uv_run(&h->loop, UV_RUN_NOWAIT);
    return rv;
}

struct preq
{
    struct raft_io_snapshot_put req;
    bool done;
    int status;
};

static void put_cb(struct raft_io_snapshot_put *req, int status)
{
    struct preq *p = req->data;
    p->done = true;
    p->status = status;
}

int sh_put_snapshot(struct sh *h,
                    unsigned trailing,
                    const struct raft_snapshot *s)
{
    struct preq p;
    int rv;

    memset(&p, 0, sizeof p);
    p.req.data = &p;
    rv = h->s.ops->snapshot_put(&h->s, trailing, &p.req, s, put_cb);
    if (rv != 0) {
        return rv;
    }
    while (!p.done) {
        uv_run(&h->loop, UV_RUN_ONCE);
    }
    return p.status;
}

int sh_put(struct sh *h,
           unsigned trailing,
           uint64_t index,
           uint64_t term,
           size_t len)
{
    struct raft_snapshot s;
    struct raft_buffer bufs[2];
    uint8_t *data = malloc(len + 1);
    int rv;

    ck_assert_ptr_nonnull(data);
    sh_payload(data, len, index, term);
    memset(&s, 0, sizeof s);
    s.term = term;
    s.index = index;
    s.configuration_index = 1;
    raft_configuration_init(&s.configuration);
    ck_assert_int_eq(raft_configuration_add(&s.configuration, 1,
                                            "127.0.0.1:9001", RAFT_VOTER),
                     0);
    ck_assert_int_eq(raft_configuration_add(&s.configuration, 2,
                                            "127.0.0.1:9002", RAFT_SPARE),
                     0);
    /* Two buffers: the store must concatenate them. */
    bufs[0].base = data;
    bufs[0].len = len / 2;
    bufs[1].base = data + len / 2;
    bufs[1].len = len - len / 2;
    s.bufs = bufs;
    s.n_bufs = 2;
    rv = sh_put_snapshot(h, trailing, &s);
    raft_configuration_close(&s.configuration);
    free(data);
    return rv;
}

static void get_cb(struct raft_io_snapshot_get *req,
                   struct raft_snapshot *s,
                   int status)
{
    struct sh_get *g = req->data;
    g->done = true;
    g->status = status;
    g->s = s;
}

void sh_get_start(struct sh *h, struct sh_get *g)
{
    memset(g, 0, sizeof *g);
    g->req.data = g;
    g->rv = h->s.ops->snapshot_get(&h->s, &g->req, get_cb);
    if (g->rv != 0) { /* refused: no callback will come */
        g->done = true;
        g->status = g->rv;
    }
}

int sh_get_wait(struct sh *h, struct sh_get *g, struct raft_snapshot **out)
{
    while (!g->done) {
        uv_run(&h->loop, UV_RUN_ONCE);
    }
    *out = g->s;
    return g->status;
}

int sh_get(struct sh *h, struct raft_snapshot **out)
{
    struct sh_get g;

    sh_get_start(h, &g);
    return sh_get_wait(h, &g, out);
}

uint8_t *sh_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

void sh_write_file(const char *path, const uint8_t *buf, size_t len)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

void sh_copy_dir(const char *from, const char *to)
{
    DIR *d = opendir(from);
    struct dirent *e;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        char a[512], b[512];
        uint8_t *buf;
        size_t len;

        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        buf = sh_read_file(a, &len);
        sh_write_file(b, buf, len);
        free(buf);
    }
    closedir(d);
}
