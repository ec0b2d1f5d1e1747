/* bench/bench_store.c: durable append throughput and latency of the log
 * store backends, in one run on one disk (make bench-store).
 *
 * For each record size (128 B, 4 KiB) and each mode:
 *   qd1   one append in flight: submit, wait for its callback, again;
 *   qd64  64 appends in flight (64 concurrent proposers, one entry each):
 *         each callback submits the next, so the store group-commits what
 *         queued behind the write in progress;
 * it runs the backends "uring", "pwrite" (store_log.h) and "uv" (raft_uv's
 * own storage through the same store interface; per_wr, the records per
 * write, is known for the first two), and two floors without
 * any store: "fdatasync" (pwrite + fdatasync of one record, in a loop) and
 * "fdatasync64" (64 records per pwrite + fdatasync). Latency is from the
 * append call to its callback. Everything is durable when counted.
 *
 * usage: bench-store [--dir DIR] [--seconds S] [--only BACKEND]
 *   DIR (default ./bench-store.tmp) is made and emptied; put it on the disk
 *   you want to measure. S: seconds per case (default 2). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <raft.h>
#include <uv.h>

#include "raft/uvio.h"
#include "store/store_log.h"

#define MAX_SAMPLES (4u << 20)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct result
{
    const char *backend;
    size_t size;
    unsigned qd;
    uint64_t ops;
    double secs;
    double mean, p50, p99, max;
    double per_write; /* records per write (group commit), 0: unknown */
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summarize(struct result *r, double *lat, uint64_t n, double secs)
{
    double sum = 0;

    r->ops = n;
    r->secs = secs;
    if (n == 0) {
        return;
    }
    qsort(lat, n, sizeof *lat, cmp_double);
    for (uint64_t i = 0; i < n; i++) {
        sum += lat[i];
    }
    r->mean = sum / (double)n;
    r->p50 = lat[n / 2];
    r->p99 = lat[(n * 99) / 100];
    r->max = lat[n - 1];
}

static void rm_rf(const char *dir)
{
    char cmd[4200];
    int w = snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);

    if (w > 0 && (size_t)w < sizeof cmd && strchr(dir, '\'') == NULL) {
        if (system(cmd) != 0) {
            fprintf(stderr, "bench-store: could not remove %s\n", dir);
        }
    }
}

/* --- the plain fdatasync loops ------------------------------------------ */

static int run_floor(const char *dir,
                     size_t size,
                     unsigned per_write,
                     double seconds,
                     double *lat,
                     struct result *r)
{
    char path[4200];
    size_t len = size * per_write;
    uint8_t *buf = malloc(len);
    uint64_t n = 0, off = 0;
    const uint64_t cap = 1ull << 30; /* preallocated and zeroed: 1 GiB */
    double start, end;
    int fd;

    snprintf(path, sizeof path, "%s/floor", dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || buf == NULL) {
        perror("floor");
        free(buf);
        return -1;
    }
    memset(buf, 0, len);
    /* Pre-zeroed, like the store's segments, so both measure overwrites
     * of allocated blocks (256 MiB is enough for the seconds asked). */
    for (uint64_t o = 0; o < (256u << 20); o += len) {
        if (pwrite(fd, buf, len, (off_t)o) != (ssize_t)len) {
            perror("floor prezero");
            close(fd);
            free(buf);
            return -1;
        }
    }
    fdatasync(fd);
    memset(buf, 0xab, len);
    start = now_us();
    end = start + seconds * 1e6;
    while (now_us() < end && n + per_write <= MAX_SAMPLES) {
        double t0 = now_us();
        if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len ||
            fdatasync(fd) != 0) {
            perror("floor write");
            break;
        }
        off += len;
        if (off + len > (256u << 20) || off >= cap) {
            off = 0;
        }
        for (unsigned i = 0; i < per_write; i++) {
            lat[n++] = now_us() - t0;
        }
    }
    summarize(r, lat, n, (now_us() - start) / 1e6);
    close(fd);
    unlink(path);
    free(buf);
    return 0;
}

/* --- the store backends -------------------------------------------------- */

struct run
{
    struct store *s;
    uv_loop_t *loop;
    size_t size;
    unsigned qd, inflight;
    uint64_t done;
    double end;
    double *lat;
    uint8_t *payload;
    bool stop;
    int failed;
};

struct breq
{
    struct raft_io_append req;
    struct raft_entry e; /* raft's contract: valid until the callback */
    struct run *run;
    double t0;
};

static void submit(struct run *run);

static void bench_cb(struct raft_io_append *req, int status)
{
    struct breq *b = req->data;
    struct run *run = b->run;

    if (status != 0 && run->failed == 0) {
        run->failed = status;
    }
    if (run->done < MAX_SAMPLES) {
        run->lat[run->done] = now_us() - b->t0;
    }
    run->done++;
    run->inflight--;
    free(b);
    if (now_us() >= run->end || run->done >= MAX_SAMPLES) {
        run->stop = true;
    }
    submit(run);
}

static void submit(struct run *run)
{
    while (!run->stop && run->failed == 0 && run->inflight < run->qd) {
        struct breq *b = calloc(1, sizeof *b);
        int rv;

        b->e.term = 1;
        b->e.type = RAFT_COMMAND;
        b->e.buf.base = run->payload;
        b->e.buf.len = run->size;
        b->req.data = b;
        b->run = run;
        b->t0 = now_us();
        run->inflight++;
        rv = run->s->ops->append(run->s, &b->req, &b->e, 1, bench_cb);
        if (rv != 0) {
            run->inflight--;
            run->failed = rv;
            free(b);
        }
    }
}

static bool closed;

static void store_closed(struct store *s)
{
    (void)s;
    closed = true;
}

static void uv_closed(struct raft_io *io)
{
    (void)io;
    closed = true;
}

static int run_store(const char *dir,
                     const char *backend,
                     size_t size,
                     unsigned qd,
                     double seconds,
                     double *lat,
                     struct result *r)
{
    uv_loop_t loop;
    struct store ls, *s;
    struct uvio *u = NULL;
    struct run run;
    raft_term term;
    raft_id vote;
    struct raft_snapshot *snap;
    raft_index start;
    struct raft_entry *entries;
    size_t n;
    char err[256];
    double t0;
    int rv;

    rm_rf(dir);
    if (mkdir(dir, 0700) != 0) {
        perror(dir);
        return -1;
    }
    uv_loop_init(&loop);
    if (strcmp(backend, "uv") == 0) {
        u = calloc(1, sizeof *u);
        rv = uvio_init(u, &loop, dir, err);
        if (rv == 0) {
            rv = u->io.init(&u->io, 1, "127.0.0.1:9");
            if (rv != 0) {
                snprintf(err, sizeof err, "%s", u->io.errmsg);
            }
        }
        s = &u->store;
    } else {
        struct store_log_options o;
        memset(&o, 0, sizeof o);
        o.engine = strcmp(backend, "uring") == 0 ? STORE_ENGINE_URING
                                                 : STORE_ENGINE_PWRITE;
        rv = store_log_init(&ls, &loop, dir, &o, err);
        s = &ls;
    }
    if (rv != 0) {
        fprintf(stderr, "bench-store: %s: %s\n", backend, err);
        return -1;
    }
    rv = s->ops->load(s, &term, &vote, &snap, &start, &entries, &n);
    if (rv != 0) {
        fprintf(stderr, "bench-store: %s load: %s\n", backend, s->errmsg);
        return -1;
    }
    raft_free(entries);
    memset(&run, 0, sizeof run);
    run.s = s;
    run.loop = &loop;
    run.size = size;
    run.qd = qd;
    run.lat = lat;
    run.payload = malloc(size);
    memset(run.payload, 0x5a, size);
    /* A short warm-up is not counted: the first segment's preparation. */
    uv_sleep(200);
    t0 = now_us();
    run.end = t0 + seconds * 1e6;
    submit(&run);
    while (run.inflight > 0) {
        uv_run(&loop, UV_RUN_ONCE);
    }
    summarize(r, lat, run.done < MAX_SAMPLES ? run.done : MAX_SAMPLES,
              (now_us() - t0) / 1e6);
    if (run.failed != 0) {
        fprintf(stderr, "bench-store: %s append failed: %s\n", backend,
                s->errmsg);
    }
    if (u == NULL) {
        struct store_log_stats stt;
        store_log_stats(s, &stt);
        r->per_write =
            stt.batches > 0 ? (double)stt.records / (double)stt.batches : 0;
    } else if (qd == 1) {
        r->per_write = 1;
    }
    closed = false;
    s->ops->close(s, store_closed);
    while (!closed) {
        uv_run(&loop, UV_RUN_ONCE);
    }
    if (u != NULL) {
        closed = false;
        u->io.close(&u->io, uv_closed);
        while (!closed) {
            uv_run(&loop, UV_RUN_ONCE);
        }
        uvio_close(u);
        free(u);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(run.payload);
    rm_rf(dir);
    return run.failed == 0 ? 0 : -1;
}

static void print_row(const struct result *r)
{
    char pw[16];

    if (r->per_write > 0) {
        snprintf(pw, sizeof pw, "%.1f", r->per_write);
    } else {
        snprintf(pw, sizeof pw, "-");
    }
    printf("%-11s %5zu %4u %9llu %10.0f %8.1f %9.1f %9.1f %9.1f %9.1f %7s\n",
           r->backend, r->size, r->qd, (unsigned long long)r->ops,
           r->secs > 0 ? (double)r->ops / r->secs : 0,
           r->secs > 0 ? (double)r->ops * (double)r->size / r->secs / 1e6 : 0,
           r->mean, r->p50, r->p99, r->max, pw);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *dir = "bench-store.tmp", *only = NULL;
    static const size_t sizes[] = {128, 4096};
    static const char *backends[] = {"uring", "pwrite", "uv"};
    double seconds = 2;
    char sub[4200], why[128];
    struct result res[2][2][3]; /* size, qd1/qd64, backend */
    struct result floor1[2], floor64[2];
    bool have_uring;
    double *lat;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: bench-store [--dir DIR] [--seconds S] "
                    "[--only uring|pwrite|uv|fdatasync]\n");
            return 2;
        }
    }
    if (seconds <= 0 || seconds > 600 || strlen(dir) > 4000) {
        fprintf(stderr, "bench-store: bad --seconds or --dir\n");
        return 2;
    }
    lat = malloc(MAX_SAMPLES * sizeof *lat);
    if (lat == NULL) {
        return 1;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    have_uring = store_uring_probe(why, sizeof why) == 0;
    memset(res, 0, sizeof res);
    memset(floor1, 0, sizeof floor1);
    memset(floor64, 0, sizeof floor64);
    printf("# bench-store: dir=%s seconds=%.1f io_uring=%s\n", dir, seconds,
           have_uring ? "yes" : why);
    printf("%-11s %5s %4s %9s %10s %8s %9s %9s %9s %9s %7s\n", "backend",
           "size", "qd", "ops", "ops/s", "MB/s", "mean_us", "p50_us", "p99_us",
           "max_us", "per_wr");
    for (int si = 0; si < 2; si++) {
        if (only == NULL || strcmp(only, "fdatasync") == 0) {
            floor1[si].backend = "fdatasync";
            floor1[si].size = sizes[si];
            floor1[si].qd = 1;
            floor1[si].per_write = 1;
            if (run_floor(dir, sizes[si], 1, seconds, lat, &floor1[si]) == 0) {
                print_row(&floor1[si]);
            }
            floor64[si].backend = "fdatasync64";
            floor64[si].size = sizes[si];
            floor64[si].qd = 64;
            floor64[si].per_write = 64;
            if (run_floor(dir, sizes[si], 64, seconds, lat, &floor64[si]) ==
                0) {
                print_row(&floor64[si]);
            }
        }
        for (int qi = 0; qi < 2; qi++) {
            for (int bi = 0; bi < 3; bi++) {
                struct result *r = &res[si][qi][bi];
                if (only != NULL && strcmp(only, backends[bi]) != 0) {
                    continue;
                }
                if (bi == 0 && !have_uring) {
                    continue;
                }
                r->backend = backends[bi];
                r->size = sizes[si];
                r->qd = qi == 0 ? 1 : 64;
                snprintf(sub, sizeof sub, "%s/%s", dir, backends[bi]);
                if (run_store(sub, backends[bi], sizes[si], r->qd, seconds, lat,
                              r) == 0) {
                    print_row(r);
                }
            }
        }
    }
    printf(
        "# ratios (aims: uring qd1 latency <= 1.2x fdatasync; uring qd64 "
        "throughput >= 3x uv)\n");
    for (int si = 0; si < 2; si++) {
        const struct result *u1 = &res[si][0][0], *u64 = &res[si][1][0],
                            *v64 = &res[si][1][2], *p1 = &res[si][0][1],
                            *p64 = &res[si][1][1];
        if (u1->ops > 0 && floor1[si].ops > 0) {
            printf(
                "size %4zu: uring qd1 p50/fdatasync p50 = %.2f, "
                "mean/mean = %.2f\n",
                sizes[si], u1->p50 / floor1[si].p50,
                u1->mean / floor1[si].mean);
        }
        if (p1->ops > 0 && floor1[si].ops > 0) {
            printf("size %4zu: pwrite qd1 p50/fdatasync p50 = %.2f\n",
                   sizes[si], p1->p50 / floor1[si].p50);
        }
        if (u64->ops > 0 && v64->ops > 0) {
            printf("size %4zu: uring qd64 ops/s / uv qd64 ops/s = %.2f\n",
                   sizes[si],
                   ((double)u64->ops / u64->secs) /
                       ((double)v64->ops / v64->secs));
        }
        if (p64->ops > 0 && v64->ops > 0) {
            printf("size %4zu: pwrite qd64 ops/s / uv qd64 ops/s = %.2f\n",
                   sizes[si],
                   ((double)p64->ops / p64->secs) /
                       ((double)v64->ops / v64->secs));
        }
    }
    free(lat);
    rmdir(dir);
    return 0;
}
