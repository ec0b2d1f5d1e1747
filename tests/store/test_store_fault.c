/* tests/store/test_store_fault.c: the fault-injection sweep of the log
 * store (docs/store.md "Tests").
 *
 * The binary is linked with -Wl,--wrap for every allocation and system
 * call the store's append, truncate and snapshot paths make (the list is
 * in Makefile.am, STORE_FAULT_WRAP): the __wrap_
 * functions below count the calls made while the sweep is armed and make
 * the Nth fail (NULL/ENOMEM, -1/EIO, or -EIO for io_uring_submit). For each
 * engine and each operation, N runs 1, 2, ... until the operation completes
 * with no fault left to inject. After each run:
 *   - an operation reporting an error had a fault injected (never an error
 *     from nowhere); the store is then failed (fail-stop: the next append
 *     fails too), unless the fault was an allocation that refused the call
 *     before anything was queued (the call fails, the store goes on);
 *   - an operation reporting success may only have lost a best-effort step
 *     (preparing the next segment ahead of need); what it stored loads;
 *   - reopening the directory loads (no refusal), and gives back every
 *     entry acknowledged before, byte for byte, or the snapshot covering
 *     it.
 * The store's own worker runs the jobs, so a fault may land in a
 * preparation still running in the background; the checks hold either way.
 *
 * The test's own allocations happen before arming: nothing but the store
 * runs while armed (libuv, libraft and libc internals are shared libraries
 * and are not wrapped). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <liburing.h>

#include "store_helpers.h"

/* --- the shim ------------------------------------------------------------- */

static atomic_long calls;     /* counted while armed */
static atomic_long fail_at;   /* 0: disarmed */
static atomic_int fault_kind; /* what failed: 0 none, 1 alloc, 2 syscall */

static bool fault(int kind)
{
    long n;

    if (atomic_load(&fail_at) == 0) {
        return false;
    }
    n = atomic_fetch_add(&calls, 1) + 1;
    if (n != atomic_load(&fail_at)) {
        return false;
    }
    atomic_store(&fault_kind, kind);
    return true;
}

#define WRAP_ALLOC(ret, name, params, args) \
    ret __real_##name params;               \
    ret __wrap_##name params;               \
    ret __wrap_##name params                \
    {                                       \
        if (fault(1)) {                     \
            errno = ENOMEM;                 \
            return NULL;                    \
        }                                   \
        return __real_##name args;          \
    }

#define WRAP_SYS(ret, name, params, args) \
    ret __real_##name params;             \
    ret __wrap_##name params;             \
    ret __wrap_##name params              \
    {                                     \
        if (fault(2)) {                   \
            errno = EIO;                  \
            return -1;                    \
        }                                 \
        return __real_##name args;        \
    }

WRAP_ALLOC(void *, malloc, (size_t n), (n))
WRAP_ALLOC(void *, calloc, (size_t n, size_t m), (n, m))
WRAP_ALLOC(void *, realloc, (void *p, size_t n), (p, n))
WRAP_ALLOC(void *, aligned_alloc, (size_t a, size_t n), (a, n))
WRAP_ALLOC(void *, raft_malloc, (size_t n), (n))
WRAP_ALLOC(void *, raft_calloc, (size_t n, size_t m), (n, m))
WRAP_ALLOC(void *, raft_realloc, (void *p, size_t n), (p, n))
WRAP_SYS(int, openat, (int d, const char *p, int f, mode_t m), (d, p, f, m))
WRAP_SYS(ssize_t,
         pwrite,
         (int fd, const void *b, size_t n, off_t o),
         (fd, b, n, o))
WRAP_SYS(ssize_t,
         pwritev,
         (int fd, const struct iovec *v, int n, off_t o),
         (fd, v, n, o))
WRAP_SYS(ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
WRAP_SYS(int, fdatasync, (int fd), (fd))
WRAP_SYS(int, fsync, (int fd), (fd))
WRAP_SYS(int,
         renameat,
         (int a, const char *p, int b, const char *q),
         (a, p, b, q))
WRAP_SYS(int, unlinkat, (int d, const char *p, int f), (d, p, f))
WRAP_SYS(int, fstat, (int fd, struct stat *st), (fd, st))

int __real_io_uring_submit(struct io_uring *r);
int __wrap_io_uring_submit(struct io_uring *r);
int __wrap_io_uring_submit(struct io_uring *r)
{
    return fault(2) ? -EIO : __real_io_uring_submit(r);
}

static void arm(long n)
{
    atomic_store(&calls, 0);
    atomic_store(&fault_kind, 0);
    atomic_store(&fail_at, n);
}

/* Whether the armed fault fired. */
static bool disarm(void)
{
    atomic_store(&fail_at, 0);
    return atomic_load(&fault_kind) != 0;
}

/* --- operations, with everything allocated before arming ----------------- */

#define SEG        (16u << 10)
#define BASE_N     10 /* entries 1..10, term 1, acknowledged in setup */
#define CHUNK      12 /* entries per append call */
#define LEN        600
#define SNAP_AT    8
#define PROBE_TERM 9 /* the fail-stop probe's entries (after the op's) */
#define TRUNC_AT   9 /* above the snapshot, as raft truncates */

struct areq
{
    struct raft_io_append req;
    int *pending, *status;
};

static void append_cb(struct raft_io_append *req, int status)
{
    struct areq *a = req->data;

    (*a->pending)--;
    if (status != 0 && *a->status == 0) {
        *a->status = status;
    }
}

/* CHUNK appends of entries first.., term @term, LEN bytes; the first
 * failing status. */
static int append_chunk(struct sh *h, uint64_t first, uint64_t term)
{
    static struct areq reqs[CHUNK];
    static uint8_t bufs[CHUNK][LEN];
    int pending = 0, status = 0;

    for (unsigned i = 0; i < CHUNK; i++) {
        sh_payload(bufs[i], LEN, first + i, term);
    }
    for (unsigned i = 0; i < CHUNK; i++) {
        struct raft_entry e;
        int rv;

        memset(&e, 0, sizeof e);
        e.term = term;
        e.type = RAFT_COMMAND;
        e.buf.base = bufs[i];
        e.buf.len = LEN;
        reqs[i].req.data = &reqs[i];
        reqs[i].pending = &pending;
        reqs[i].status = &status;
        rv = h->s.ops->append(&h->s, &reqs[i].req, &e, 1, append_cb);
        if (rv != 0) {
            /* Refused: raft would not go on with the next index. */
            if (status == 0) {
                status = rv;
            }
            break;
        }
        pending++;
    }
    while (pending > 0) {
        uv_run(&h->loop, UV_RUN_ONCE);
    }
    return status;
}

static uint8_t snap_data[3000];

static void snap_init(struct raft_snapshot *s,
                      struct raft_buffer *buf,
                      uint64_t index)
{
    memset(s, 0, sizeof *s);
    s->term = 1;
    s->index = index;
    s->configuration_index = 1;
    raft_configuration_init(&s->configuration);
    ck_assert_int_eq(raft_configuration_add(&s->configuration, 1,
                                            "127.0.0.1:9001", RAFT_VOTER),
                     0);
    sh_payload(snap_data, sizeof snap_data, index, 1);
    buf->base = snap_data;
    buf->len = sizeof snap_data;
    s->bufs = buf;
    s->n_bufs = 1;
}

/* --- the sweep ------------------------------------------------------------ */

enum op { OP_APPEND, OP_TRUNCATE, OP_PUT, OP_GET };

/* What the directory must give back after the run. */
struct expect
{
    uint64_t chunks; /* CHUNKs of term 1 after BASE_N, acknowledged */
    bool truncated;  /* from TRUNC_AT, CHUNK entries of term 2, acknowledged */
    bool snap;       /* the put at BASE_N was acknowledged */
};

/* Let background work (the preparation queued at load or after a roll)
 * finish before arming, so that it rarely takes the fault. */
static void settle(struct sh *h)
{
    for (int i = 0; i < 2; i++) {
        usleep(3000);
        uv_run(&h->loop, UV_RUN_NOWAIT);
    }
}

static void setup(struct sh *h, const char *dir, enum store_engine e)
{
    struct sh_loaded l;
    struct raft_snapshot s;
    struct raft_buffer b;

    ck_assert_int_eq(sh_open(h, dir, e, SEG), 0);
    ck_assert_int_eq(sh_load(h, &l), 0);
    sh_loaded_free(&l);
    ck_assert_int_eq(sh_append(h, 1, BASE_N, 1, 0), 0);
    snap_init(&s, &b, SNAP_AT);
    ck_assert_int_eq(sh_put_snapshot(h, 100, &s), 0);
    raft_configuration_close(&s.configuration);
    settle(h);
}

/* Run @op armed at @n; returns its status, *fired whether the fault
 * fired, and fills @x with what was acknowledged. */
static int run_op(struct sh *h,
                  enum op op,
                  long n,
                  bool *fired,
                  struct expect *x)
{
    struct raft_snapshot s, *got = NULL;
    struct raft_buffer b;
    int rv = 0;

    memset(x, 0, sizeof *x);
    snap_init(&s, &b, BASE_N);
    arm(n);
    switch (op) {
        case OP_APPEND: /* two batches; the second rolls */
            rv = append_chunk(h, BASE_N + 1, 1);
            x->chunks = rv == 0;
            if (rv == 0) {
                rv = append_chunk(h, BASE_N + 1 + CHUNK, 1);
                x->chunks += rv == 0;
            }
            break;
        case OP_TRUNCATE: /* seen through the append behind it */
            rv = h->s.ops->truncate(&h->s, TRUNC_AT);
            if (rv == 0) {
                rv = append_chunk(h, TRUNC_AT, 2);
                x->truncated = rv == 0;
            }
            break;
        case OP_PUT:
            rv = sh_put_snapshot(h, 2, &s);
            x->snap = rv == 0;
            break;
        case OP_GET:
            rv = sh_get(h, &got);
            break;
    }
    *fired = disarm();
    raft_configuration_close(&s.configuration);
    if (got != NULL) {
        ck_assert_uint_eq(got->index, SNAP_AT);
        ck_assert_uint_eq(got->bufs[0].len, sizeof snap_data);
        sh_snapshot_free(got);
    }
    return rv;
}

/* Entry @i of @l is the one written with @term (and @len, 0: sh_len). */
static bool entry_is(const struct sh_loaded *l,
                     uint64_t i,
                     uint64_t term,
                     size_t len)
{
    static uint8_t want[8192];
    const struct raft_entry *e;
    size_t wl = len != 0 ? len : sh_len(i);

    if (i < l->start || i - l->start >= l->n) {
        return false;
    }
    e = &l->entries[i - l->start];
    sh_payload(want, wl, i, term);
    return e->term == term && e->buf.len == wl &&
           (wl == 0 || memcmp(e->buf.base, want, wl) == 0);
}

/* Every acknowledged entry is in @l (or below its snapshot), byte for
 * byte; whatever else is there is an entry the run wrote. */
static void check_loaded(const struct sh_loaded *l,
                         const struct expect *x,
                         enum op op)
{
    uint64_t covered = l->snap != NULL ? l->snap->index : 0;
    /* (a truncation is raft's to ask: it may have dropped TRUNC_AT..) */
    uint64_t acked = x->truncated        ? TRUNC_AT + CHUNK - 1
                     : op == OP_TRUNCATE ? TRUNC_AT - 1
                                         : BASE_N + x->chunks * CHUNK;
    uint64_t end = l->start + l->n; /* one past the last loaded */

    ck_assert_ptr_nonnull(l->snap); /* setup's, at least */
    ck_assert_uint_le(l->start, covered + 1);
    if (x->snap) {
        ck_assert_uint_ge(covered, BASE_N);
    }
    ck_assert_msg(end > acked || covered >= acked,
                  "acknowledged up to %llu, loaded up to %llu",
                  (unsigned long long)acked, (unsigned long long)end - 1);
    for (uint64_t i = covered + 1 > l->start ? covered + 1 : l->start; i < end;
         i++) {
        bool old = i <= BASE_N ? entry_is(l, i, 1, 0) : entry_is(l, i, 1, LEN);
        bool new = op == OP_TRUNCATE &&i >= TRUNC_AT &&entry_is(l, i, 2, LEN);
        bool probe = (i > acked || (op == OP_TRUNCATE && i >= TRUNC_AT)) &&
                     l->entries[i - l->start].term == PROBE_TERM;

        if (x->truncated) {
            ck_assert_msg(i < TRUNC_AT ? old : new || probe, "entry %llu",
                          (unsigned long long)i);
        } else {
            ck_assert_msg(old || new || probe,
                          "entry %llu: term %llu len %zu (acked %llu)",
                          (unsigned long long)i,
                          (unsigned long long)l->entries[i - l->start].term,
                          l->entries[i - l->start].buf.len,
                          (unsigned long long)acked);
        }
    }
}

static void sweep(enum store_engine e, enum op op)
{
    long n;

    for (n = 1; n < 500; n++) {
        char dir[256];
        struct sh h;
        struct sh_loaded l;
        struct expect x;
        bool fired;
        int rv, after;

        sh_mkdir(dir, sizeof dir, "fault");
        setup(&h, dir, e);
        rv = run_op(&h, op, n, &fired, &x);
        if (getenv("STORE_TEST_VERBOSE") != NULL) {
            fprintf(stderr, "# op %d fault %ld: rv %d fired %d kind %d\n", op,
                    n, rv, fired, atomic_load(&fault_kind));
        }
        if (rv != 0) {
            ck_assert_msg(fired, "op %d failed (%d) without a fault", op, rv);
            /* Fail-stop, unless an allocation refused the call itself. */
            after = append_chunk(&h, 1000, PROBE_TERM);
            ck_assert_msg(after != 0 || atomic_load(&fault_kind) == 1,
                          "op %d fault %ld: failed (%d) but the store "
                          "goes on",
                          op, n, rv);
        }
        sh_close(&h);
        ck_assert_int_eq(sh_open(&h, dir, e, SEG), 0);
        ck_assert_int_eq(sh_load(&h, &l), 0);
        check_loaded(&l, &x, op);
        sh_loaded_free(&l);
        sh_close(&h);
        sh_rmdir(dir);
        if (!fired) {
            ck_assert_int_eq(rv, 0);
            break;
        }
    }
    ck_assert_int_lt(n, 500);
    fprintf(stderr, "# fault sweep: engine %d op %d: %ld faults\n", (int)e, op,
            n - 1);
}

START_TEST(fault_append)
{
    sweep(sh_engine(_i), OP_APPEND);
}
END_TEST

START_TEST(fault_truncate)
{
    sweep(sh_engine(_i), OP_TRUNCATE);
}
END_TEST

START_TEST(fault_snapshot_put)
{
    sweep(sh_engine(_i), OP_PUT);
}
END_TEST

START_TEST(fault_snapshot_get)
{
    sweep(sh_engine(_i), OP_GET);
}
END_TEST

int main(void)
{
    int c = sh_engine_case(), e = c + 1;
    Suite *s;
    TCase *tc;
    SRunner *sr;
    int failed;

    if (c < 0) {
        return EXIT_SUCCESS; /* a SKIP, printed by sh_engine_case */
    }
    s = suite_create("store-fault");
    tc = tcase_create("sweep");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, fault_append, c, e);
    tcase_add_loop_test(tc, fault_truncate, c, e);
    tcase_add_loop_test(tc, fault_snapshot_put, c, e);
    tcase_add_loop_test(tc, fault_snapshot_get, c, e);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
