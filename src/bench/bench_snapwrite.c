/* bench/bench_snapwrite.c: what a large snapshot being written costs the
 * log's appends on the same disk (make bench-snapwrite).
 *
 * One store (store_log.h, the engine onced picks) takes appends of 128 B
 * records at queue depth 1, as a node does under one closed-loop client,
 * while a snapshot of SIZE MiB (a taken one: trailing > 0, written on the
 * thread pool) is put beside them. It reports the appends' latency while
 * the put is in flight and the put's duration, for the store's paced
 * writeback (the default, store_snapshot.c) and for the file written in
 * one go (store_log_options.no_snapshot_pacing), alternating the order
 * over the rounds, and the median ratios of the rounds.
 *
 * usage: bench-snapwrite [--dir DIR] [--size MIB] [--rounds N]
 *   DIR (default ./bench-snapwrite.tmp) is made and emptied: put it on the
 *   disk you want to measure. MIB: the snapshot (default 512). N: rounds
 *   (default 3). */
#include <errno.h>
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

#include "store/store_log.h"

#define MAX_SAMPLES (1u << 22)
#define ROUNDS_MAX  21
#define RECORD      128

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct outcome
{
    uint64_t appends; /* completed while the put was in flight */
    double p50_us, p99_us, max_us;
    double put_ms;
};

struct bench
{
    struct store s;
    uv_loop_t loop;
    uint8_t payload[RECORD];
    struct raft_entry e;
    struct raft_io_append req;
    uint64_t next;
    double t0;
    bool put_done, stop, inflight;
    int failed;
    double *lat;
    uint64_t n_lat;
    struct raft_io_snapshot_put put;
    struct raft_snapshot snap;
    struct raft_buffer buf;
    double put_t0, put_t1;
};

static void append_one(struct bench *b);

static void append_cb(struct raft_io_append *req, int status)
{
    struct bench *b = req->data;

    b->inflight = false;
    if (status != 0) {
        b->failed = status;
        return;
    }
    if (!b->put_done && b->put_t0 > 0 && b->n_lat < MAX_SAMPLES) {
        b->lat[b->n_lat++] = now_us() - b->t0;
    }
    if (!b->stop) {
        append_one(b);
    }
}

static void append_one(struct bench *b)
{
    b->e.term = 1;
    b->e.type = RAFT_COMMAND;
    b->e.buf.base = b->payload;
    b->e.buf.len = RECORD;
    b->req.data = b;
    b->t0 = now_us();
    b->inflight = true;
    if (b->s.ops->append(&b->s, &b->req, &b->e, 1, append_cb) != 0) {
        b->inflight = false;
        b->failed = -1;
    }
    b->next++;
}

static void put_cb(struct raft_io_snapshot_put *req, int status)
{
    struct bench *b = req->data;

    b->put_t1 = now_us();
    b->put_done = true;
    if (status != 0) {
        b->failed = status;
    }
}

static void start_put(struct bench *b, size_t bytes)
{
    memset(&b->snap, 0, sizeof b->snap);
    b->snap.term = 1;
    b->snap.index = b->next > 1 ? b->next - 1 : 1;
    b->snap.configuration_index = 1;
    raft_configuration_init(&b->snap.configuration);
    raft_configuration_add(&b->snap.configuration, 1, "127.0.0.1:9001",
                           RAFT_VOTER);
    b->buf.base = malloc(bytes);
    b->buf.len = bytes;
    for (size_t i = 0; i < bytes; i += 4096) {
        ((uint8_t *)b->buf.base)[i] = (uint8_t)(i >> 12); /* touch it */
    }
    b->snap.bufs = &b->buf;
    b->snap.n_bufs = 1;
    b->put.data = b;
    b->put_t0 = now_us();
    if (b->s.ops->snapshot_put(&b->s, 64, &b->put, &b->snap, put_cb) != 0) {
        b->failed = -1;
        b->put_done = true;
    }
}

static bool closed;

static void store_closed(struct store *s)
{
    (void)s;
    closed = true;
}

static void rm_rf(const char *dir)
{
    char cmd[4200];
    int w = snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);

    if (w > 0 && (size_t)w < sizeof cmd && strchr(dir, '\'') == NULL &&
        system(cmd) != 0) {
        fprintf(stderr, "bench-snapwrite: could not remove %s\n", dir);
    }
}

static int run_case(const char *dir,
                    bool paced,
                    size_t bytes,
                    double *lat,
                    struct outcome *out)
{
    struct bench *b = calloc(1, sizeof *b);
    struct store_log_options o;
    raft_term term;
    raft_id vote;
    struct raft_snapshot *snap;
    raft_index start;
    struct raft_entry *entries;
    size_t n;
    char err[256];
    double warm;
    int failed, rv;

    rm_rf(dir);
    if (b == NULL) {
        return -ENOMEM;
    }
    if (mkdir(dir, 0700) != 0) {
        int e = errno;

        perror(dir);
        free(b);
        return -e;
    }
    memset(&o, 0, sizeof o);
    o.no_snapshot_pacing = !paced;
    uv_loop_init(&b->loop);
    rv = store_log_init(&b->s, &b->loop, dir, &o, err);
    if (rv == 0) {
        rv = b->s.ops->load(&b->s, &term, &vote, &snap, &start, &entries, &n);
    }
    if (rv != 0) {
        fprintf(stderr, "bench-snapwrite: %s\n", err);
        return rv;
    }
    raft_free(entries);
    memset(b->payload, 0x5a, sizeof b->payload);
    b->lat = lat;
    b->next = 1;
    append_one(b);
    warm = now_us() + 500e3; /* appends alone first: the segment is ready */
    while (now_us() < warm && b->failed == 0) {
        uv_run(&b->loop, UV_RUN_ONCE);
    }
    start_put(b, bytes);
    while (!b->put_done && b->failed == 0) {
        uv_run(&b->loop, UV_RUN_ONCE);
    }
    b->stop = true;
    while (b->inflight) {
        uv_run(&b->loop, UV_RUN_ONCE);
    }
    closed = false;
    b->s.ops->close(&b->s, store_closed);
    while (!closed) {
        uv_run(&b->loop, UV_RUN_ONCE);
    }
    uv_run(&b->loop, UV_RUN_DEFAULT);
    uv_loop_close(&b->loop);
    raft_configuration_close(&b->snap.configuration);
    free(b->buf.base);
    memset(out, 0, sizeof *out);
    out->put_ms = (b->put_t1 - b->put_t0) / 1e3;
    out->appends = b->n_lat;
    if (b->n_lat > 0) {
        qsort(lat, b->n_lat, sizeof *lat, cmp_double);
        out->p50_us = lat[b->n_lat / 2];
        out->p99_us = lat[(b->n_lat * 99) / 100];
        out->max_us = lat[b->n_lat - 1];
    }
    failed = b->failed;
    free(b);
    rm_rf(dir);
    return failed; /* 0, or the store's RAFT_* status */
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_case(int round, const char *mode, const struct outcome *o)
{
    printf("%5d  %-8s %9llu %9.0f %9.0f %9.0f %9.0f\n", round, mode,
           (unsigned long long)o->appends, o->p50_us, o->p99_us, o->max_us,
           o->put_ms);
}

int main(int argc, char **argv)
{
    const char *dir = "./bench-snapwrite.tmp";
    long mib = 512, rounds = 3;
    double r99[ROUNDS_MAX], rmax[ROUNDS_MAX], rput[ROUNDS_MAX];
    double *lat;

    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            mib = strtol(argv[++i], &end, 10);
            if (*end != '\0' || mib < 8 || mib > 8192) {
                fprintf(stderr, "bench-snapwrite: --size: 8..8192 MiB\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = strtol(argv[++i], &end, 10);
            if (*end != '\0' || rounds < 1 || rounds > ROUNDS_MAX) {
                fprintf(stderr, "bench-snapwrite: --rounds: 1..%d\n",
                        ROUNDS_MAX);
                return 2;
            }
        } else {
            fprintf(stderr,
                    "usage: bench-snapwrite [--dir DIR] [--size MIB] "
                    "[--rounds N]\n");
            return 2;
        }
    }
    lat = malloc(MAX_SAMPLES * sizeof *lat);
    if (lat == NULL) {
        return 1;
    }
    printf(
        "# appends of %d B at queue depth 1 while a %ld MiB snapshot is "
        "put; latency in us, put in ms\n",
        RECORD, mib);
    printf(
        "round  mode       appends       p50       p99       max    put_ms\n");
    for (int r = 0; r < rounds; r++) {
        struct outcome paced, flat;
        bool paced_first = r % 2 == 0;
        int n_failed = 0;

        if (paced_first) {
            n_failed +=
                run_case(dir, true, (size_t)mib << 20, lat, &paced) != 0;
        }
        n_failed += run_case(dir, false, (size_t)mib << 20, lat, &flat) != 0;
        if (!paced_first) {
            n_failed +=
                run_case(dir, true, (size_t)mib << 20, lat, &paced) != 0;
        }
        if (n_failed != 0) {
            fprintf(stderr, "bench-snapwrite: a case failed\n");
            free(lat);
            return 1;
        }
        print_case(r + 1, "paced", &paced);
        print_case(r + 1, "unpaced", &flat);
        r99[r] = paced.p99_us / (flat.p99_us > 0 ? flat.p99_us : 1);
        rmax[r] = paced.max_us / (flat.max_us > 0 ? flat.max_us : 1);
        rput[r] = paced.put_ms / (flat.put_ms > 0 ? flat.put_ms : 1);
    }
    printf(
        "median ratio paced/unpaced over %ld rounds: append p99 %.2fx, "
        "append max %.2fx, put time %.2fx\n",
        rounds, median(r99, (int)rounds), median(rmax, (int)rounds),
        median(rput, (int)rounds));
    free(lat);
    return 0;
}
