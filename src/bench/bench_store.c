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
 * write, is known for the first two), and three floors without
 * any store: "fdatasync" (pwrite + fdatasync of one record, in a loop),
 * "fdatasync+hop" (the same on a worker thread, handed over from a libuv
 * loop and back: what keeping blocking I/O off the loop costs by itself)
 * and "fdatasync64" (64 records per pwrite + fdatasync). Latency is from
 * the append call to its callback. Everything is durable when counted.
 *
 * usage: bench-store [--dir DIR] [--seconds S] [--rounds N] [--only BACKEND]
 *   DIR (default ./bench-store.tmp) is made and emptied; put it on the disk
 *   you want to measure. S: seconds per case (default 2). N: how many times
 *   every case runs (default 1); the ratios of the aims are printed per
 *   round and as the median over the rounds, since on a shared machine one
 *   round's cases can see very different neighbours. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#define ROUNDS_MAX  50

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

#define FLOOR_SPAN (256u << 20) /* pre-zeroed bytes the floors cycle over */

/* The floors' file: pre-zeroed, like the store's segments, so every floor
 * measures overwrites of allocated blocks. Its fd, or -errno. */
static int floor_open(const char *dir, size_t len, uint8_t **buf)
{
    char path[4200];
    int fd;

    snprintf(path, sizeof path, "%s/floor", dir);
    *buf = malloc(len);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || *buf == NULL) {
        int e = fd < 0 ? errno : ENOMEM;

        perror("floor");
        free(*buf);
        if (fd >= 0) {
            close(fd);
        }
        return -e;
    }
    unlink(path); /* gone at close */
    memset(*buf, 0, len);
    for (uint64_t o = 0; o < FLOOR_SPAN; o += len) {
        ssize_t w = pwrite(fd, *buf, len, (off_t)o);

        if (w != (ssize_t)len) {
            int e = w < 0 ? errno : EIO; /* a short write sets none */

            perror("floor prezero");
            close(fd);
            free(*buf);
            return -e;
        }
    }
    fdatasync(fd);
    memset(*buf, 0xab, len);
    return fd;
}

/* One write and sync: 0, or -errno. */
static int floor_write(int fd, const uint8_t *buf, size_t len, uint64_t *off)
{
    ssize_t w = pwrite(fd, buf, len, (off_t)*off);

    if (w != (ssize_t)len || fdatasync(fd) != 0) {
        int e = w >= 0 && w != (ssize_t)len ? EIO : errno; /* short: none */

        perror("floor write");
        return -e;
    }
    *off += len;
    if (*off + len > FLOOR_SPAN) {
        *off = 0;
    }
    return 0;
}

/* "fdatasync", "fdatasync64": the loop thread itself writes and syncs. */
static int run_floor(const char *dir,
                     size_t size,
                     unsigned per_write,
                     double seconds,
                     double *lat,
                     struct result *r)
{
    size_t len = size * per_write;
    uint8_t *buf;
    uint64_t n = 0, off = 0;
    double start, end;
    int fd = floor_open(dir, len, &buf);

    if (fd < 0) {
        return fd;
    }
    start = now_us();
    end = start + seconds * 1e6;
    while (now_us() < end && n + per_write <= MAX_SAMPLES) {
        double t0 = now_us();
        if (floor_write(fd, buf, len, &off) != 0) {
            break;
        }
        for (unsigned i = 0; i < per_write; i++) {
            lat[n++] = now_us() - t0;
        }
    }
    summarize(r, lat, n, (now_us() - start) / 1e6);
    close(fd);
    free(buf);
    return 0;
}

/* "fdatasync+hop": the same write and sync on a worker thread, handed over
 * from a libuv loop and back through a uv_async: the least any store that
 * keeps blocking I/O off the loop thread can cost at queue depth 1 (two
 * thread wake-ups more than "fdatasync"). */
struct hop
{
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go, quit;
    int fd, err;
    const uint8_t *buf;
    size_t len;
    uint64_t off, n;
    double t0, end, *lat;
    uv_async_t done;
};

static void *hop_worker(void *arg)
{
    struct hop *h = arg;

    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->go && !h->quit) {
            pthread_cond_wait(&h->cv, &h->mu);
        }
        if (h->quit) {
            break;
        }
        h->go = false;
        pthread_mutex_unlock(&h->mu);
        h->err = floor_write(h->fd, h->buf, h->len, &h->off);
        uv_async_send(&h->done);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void hop_kick(struct hop *h)
{
    h->t0 = now_us();
    pthread_mutex_lock(&h->mu);
    h->go = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void hop_done(uv_async_t *a)
{
    struct hop *h = a->data;

    h->lat[h->n++] = now_us() - h->t0;
    if (h->err == 0 && now_us() < h->end && h->n < MAX_SAMPLES) {
        hop_kick(h);
    } else {
        uv_close((uv_handle_t *)a, NULL);
    }
}

static int run_floor_hop(const char *dir,
                         size_t size,
                         double seconds,
                         double *lat,
                         struct result *r)
{
    struct hop h;
    uv_loop_t loop;
    pthread_t th;
    uint8_t *buf;
    double start;
    int rv;
    int fd = floor_open(dir, size, &buf);

    if (fd < 0) {
        return fd;
    }
    memset(&h, 0, sizeof h);
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    h.fd = fd;
    h.buf = buf;
    h.len = size;
    h.lat = lat;
    uv_loop_init(&loop);
    uv_async_init(&loop, &h.done, hop_done);
    h.done.data = &h;
    rv = pthread_create(&th, NULL, hop_worker, &h);
    if (rv != 0) {
        fprintf(stderr, "floor thread: %s\n", strerror(rv));
        close(fd);
        free(buf);
        return -rv;
    }
    start = now_us();
    h.end = start + seconds * 1e6;
    hop_kick(&h);
    uv_run(&loop, UV_RUN_DEFAULT);
    summarize(r, lat, h.n, (now_us() - start) / 1e6);
    pthread_mutex_lock(&h.mu);
    h.quit = true;
    pthread_cond_signal(&h.cv);
    pthread_mutex_unlock(&h.mu);
    pthread_join(th, NULL);
    uv_loop_close(&loop);
    close(fd);
    free(buf);
    return h.err;
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
        int e = errno;

        perror(dir);
        return -e;
    }
    uv_loop_init(&loop);
    if (strcmp(backend, "uv") == 0) {
        u = calloc(1, sizeof *u);
        rv = uvio_init(u, &loop, dir, NULL, err);
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
        return rv;
    }
    rv = s->ops->load(s, &term, &vote, &snap, &start, &entries, &n);
    if (rv != 0) {
        fprintf(stderr, "bench-store: %s load: %s\n", backend, s->errmsg);
        return rv;
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
    return run.failed; /* 0, or the store's RAFT_* status */
}

static void print_row(const struct result *r)
{
    char pw[16];

    if (r->per_write > 0) {
        snprintf(pw, sizeof pw, "%.1f", r->per_write);
    } else {
        snprintf(pw, sizeof pw, "-");
    }
    printf("%-13s %5zu %4u %9llu %10.0f %8.1f %9.1f %9.1f %9.1f %9.1f %7s\n",
           r->backend, r->size, r->qd, (unsigned long long)r->ops,
           r->secs > 0 ? (double)r->ops / r->secs : 0,
           r->secs > 0 ? (double)r->ops * (double)r->size / r->secs / 1e6 : 0,
           r->mean, r->p50, r->p99, r->max, pw);
    fflush(stdout);
}

/* One round: every case once. */
struct round
{
    struct result res[2][2][3]; /* size, qd1/qd64, backend */
    struct result floor1[2], floorhop[2], floor64[2];
};

static const size_t sizes[] = {128, 4096};
static const char *backends[] = {"uring", "pwrite", "uv"};

static void floor_case(struct result *r,
                       const char *name,
                       size_t size,
                       unsigned qd,
                       int rv)
{
    r->backend = name;
    r->size = size;
    r->qd = qd;
    r->per_write = qd;
    if (rv == 0) {
        print_row(r);
    } else {
        r->ops = 0;
    }
}

static void run_round(struct round *rd,
                      const char *dir,
                      const char *only,
                      bool have_uring,
                      double seconds,
                      double *lat)
{
    char sub[4200];

    memset(rd, 0, sizeof *rd);
    for (int si = 0; si < 2; si++) {
        size_t sz = sizes[si];

        if (only == NULL || strcmp(only, "fdatasync") == 0) {
            floor_case(&rd->floor1[si], "fdatasync", sz, 1,
                       run_floor(dir, sz, 1, seconds, lat, &rd->floor1[si]));
            floor_case(&rd->floorhop[si], "fdatasync+hop", sz, 1,
                       run_floor_hop(dir, sz, seconds, lat, &rd->floorhop[si]));
            floor_case(&rd->floor64[si], "fdatasync64", sz, 64,
                       run_floor(dir, sz, 64, seconds, lat, &rd->floor64[si]));
        }
        for (int qi = 0; qi < 2; qi++) {
            for (int bi = 0; bi < 3; bi++) {
                struct result *r = &rd->res[si][qi][bi];
                if ((only != NULL && strcmp(only, backends[bi]) != 0) ||
                    (bi == 0 && !have_uring)) {
                    continue;
                }
                r->backend = backends[bi];
                r->size = sz;
                r->qd = qi == 0 ? 1 : 64;
                snprintf(sub, sizeof sub, "%s/%s", dir, backends[bi]);
                if (run_store(sub, backends[bi], sz, r->qd, seconds, lat, r) ==
                    0) {
                    print_row(r);
                } else {
                    r->ops = 0;
                }
            }
        }
    }
}

/* The ratios the aims are about, of one round; 0 where a case is missing. */
enum {
    R_U1_F1,   /* uring qd1 p50 / fdatasync p50 */
    R_U1_HOP,  /* uring qd1 p50 / fdatasync+hop p50 */
    R_HOP_F1,  /* fdatasync+hop p50 / fdatasync p50 */
    R_P1_F1,   /* pwrite qd1 p50 / fdatasync p50 */
    R_U64_V64, /* uring qd64 ops/s / uv qd64 ops/s */
    R_P64_V64, /* pwrite qd64 ops/s / uv qd64 ops/s */
    R_N
};

static const char *ratio_names[R_N] = {
    "uring qd1 p50 / fdatasync p50 (aim <= 1.2)",
    "uring qd1 p50 / fdatasync+hop p50",
    "fdatasync+hop p50 / fdatasync p50",
    "pwrite qd1 p50 / fdatasync p50",
    "uring qd64 ops/s / uv qd64 ops/s (aim >= 3)",
    "pwrite qd64 ops/s / uv qd64 ops/s",
};

static double rate(const struct result *r)
{
    return r->ops > 0 && r->secs > 0 ? (double)r->ops / r->secs : 0;
}

static double quot(double a, double b)
{
    return a > 0 && b > 0 ? a / b : 0;
}

static void ratios(const struct round *rd, int si, double out[R_N])
{
    const struct result *u1 = &rd->res[si][0][0], *p1 = &rd->res[si][0][1];
    const struct result *f1 = &rd->floor1[si], *hop = &rd->floorhop[si];

    out[R_U1_F1] = u1->ops > 0 && f1->ops > 0 ? quot(u1->p50, f1->p50) : 0;
    out[R_U1_HOP] = u1->ops > 0 && hop->ops > 0 ? quot(u1->p50, hop->p50) : 0;
    out[R_HOP_F1] = hop->ops > 0 && f1->ops > 0 ? quot(hop->p50, f1->p50) : 0;
    out[R_P1_F1] = p1->ops > 0 && f1->ops > 0 ? quot(p1->p50, f1->p50) : 0;
    out[R_U64_V64] = quot(rate(&rd->res[si][1][0]), rate(&rd->res[si][1][2]));
    out[R_P64_V64] = quot(rate(&rd->res[si][1][1]), rate(&rd->res[si][1][2]));
}

int main(int argc, char **argv)
{
    const char *dir = "bench-store.tmp", *only = NULL;
    double seconds = 2;
    int rounds = 1;
    char why[128];
    static double rat[2][R_N][ROUNDS_MAX]; /* size, ratio, round */
    struct round rd;
    bool have_uring;
    double *lat;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: bench-store [--dir DIR] [--seconds S] "
                    "[--rounds N] [--only uring|pwrite|uv|fdatasync]\n");
            return 2;
        }
    }
    if (seconds <= 0 || seconds > 600 || strlen(dir) > 4000 || rounds < 1 ||
        rounds > ROUNDS_MAX) {
        fprintf(stderr,
                "bench-store: bad --seconds, --rounds (1..%d) or "
                "--dir\n",
                ROUNDS_MAX);
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
    printf("# bench-store: dir=%s seconds=%.1f rounds=%d io_uring=%s\n", dir,
           seconds, rounds, have_uring ? "yes" : why);
    for (int k = 0; k < rounds; k++) {
        printf("# round %d\n", k + 1);
        printf("%-13s %5s %4s %9s %10s %8s %9s %9s %9s %9s %7s\n", "backend",
               "size", "qd", "ops", "ops/s", "MB/s", "mean_us", "p50_us",
               "p99_us", "max_us", "per_wr");
        run_round(&rd, dir, only, have_uring, seconds, lat);
        for (int si = 0; si < 2; si++) {
            double out[R_N];
            ratios(&rd, si, out);
            for (int q = 0; q < R_N; q++) {
                rat[si][q][k] = out[q];
                if (out[q] > 0) {
                    printf("# round %d, size %4zu: %s = %.2f\n", k + 1,
                           sizes[si], ratio_names[q], out[q]);
                }
            }
        }
    }
    /* Each ratio is of two cases measured a few seconds apart; the median
     * over rounds keeps one noisy round from deciding. */
    printf("# median over %d round%s\n", rounds, rounds > 1 ? "s" : "");
    for (int si = 0; si < 2; si++) {
        for (int q = 0; q < R_N; q++) {
            double v[ROUNDS_MAX];
            int n = 0;
            for (int k = 0; k < rounds; k++) {
                if (rat[si][q][k] > 0) {
                    v[n++] = rat[si][q][k];
                }
            }
            if (n == 0) {
                continue;
            }
            qsort(v, (size_t)n, sizeof *v, cmp_double);
            printf("size %4zu: %s = %.2f (rounds: %.2f..%.2f)\n", sizes[si],
                   ratio_names[q],
                   n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0],
                   v[n - 1]);
        }
    }
    free(lat);
    rmdir(dir);
    return 0;
}
