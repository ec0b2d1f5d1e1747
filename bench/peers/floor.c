/* floor: this machine's floor for one durable claim, for bench/peers/run.
 *
 *   floor DIR
 * measures (1) fdatasync after a 128-byte append to a file in DIR (the
 * disk the clusters' data is on), 2000 times, and (2) a 128-byte TCP
 * round trip over 127.0.0.1 between two threads, 20000 times; prints one
 * JSON object with the p50 and p99 of each in microseconds. A claim at one
 * client cannot beat one round trip plus two fdatasyncs in sequence (the
 * leader's and a follower's; they overlap in raft only partly).
 *
 * Built by bench/peers/run with `cc -O2 -pthread`; not part of the once
 * build. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SYNCS 2000
#define TRIPS 20000

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static uint64_t s_sync[SYNCS], s_trip[TRIPS];

static void *echo(void *arg)
{
    int fd = *(int *)arg;
    char buf[128];

    for (;;) {
        size_t got = 0;

        while (got < sizeof buf) {
            ssize_t n = read(fd, buf + got, sizeof buf - got);

            if (n <= 0) {
                return NULL;
            }
            got += (size_t)n;
        }
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
            return NULL;
        }
    }
}

int main(int argc, char **argv)
{
    char path[4096];
    char buf[128];
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    pthread_t t;
    int fd, ls, cs, as, one = 1, i;

    if (argc != 2 || snprintf(path, sizeof path, "%s/floor.dat", argv[1]) >=
                         (int)sizeof path) {
        fprintf(stderr, "usage: floor DIR\n");
        return 2;
    }
    memset(buf, 'x', sizeof buf);
    fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0600);
    if (fd < 0) {
        perror("floor: open");
        return 1;
    }
    for (i = 0; i < SYNCS; i++) {
        uint64_t t0 = now_ns();

        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf ||
            fdatasync(fd) != 0) {
            perror("floor: write/fdatasync");
            return 1;
        }
        s_sync[i] = now_ns() - t0;
    }
    close(fd);
    unlink(path);

    ls = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(ls, 1) != 0 || getsockname(ls, (struct sockaddr *)&sa, &sl)) {
        perror("floor: listen");
        return 1;
    }
    cs = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(cs, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror("floor: connect");
        return 1;
    }
    as = accept(ls, NULL, NULL);
    setsockopt(cs, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(as, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_create(&t, NULL, echo, &as);
    for (i = 0; i < TRIPS; i++) {
        uint64_t t0 = now_ns();
        size_t got = 0;

        if (write(cs, buf, sizeof buf) != (ssize_t)sizeof buf) {
            return 1;
        }
        while (got < sizeof buf) {
            ssize_t n = read(cs, buf + got, sizeof buf - got);

            if (n <= 0) {
                return 1;
            }
            got += (size_t)n;
        }
        s_trip[i] = now_ns() - t0;
    }
    close(cs);
    pthread_join(t, NULL);
    close(as);
    close(ls);
    qsort(s_sync, SYNCS, sizeof s_sync[0], cmp);
    qsort(s_trip, TRIPS, sizeof s_trip[0], cmp);
    printf(
        "{\"fdatasync_p50_us\":%.1f,\"fdatasync_p99_us\":%.1f,"
        "\"rtt_p50_us\":%.1f,\"rtt_p99_us\":%.1f}\n",
        (double)s_sync[SYNCS / 2] / 1e3, (double)s_sync[SYNCS * 99 / 100] / 1e3,
        (double)s_trip[TRIPS / 2] / 1e3,
        (double)s_trip[TRIPS * 99 / 100] / 1e3);
    return 0;
}
