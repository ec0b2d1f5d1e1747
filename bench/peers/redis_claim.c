/* redis_claim: the claim workload against Redis, for bench/peers/run.
 *
 * A claim is `SET key 1 NX EX ttl`: "+OK" is a first use (ACCEPTED), a nil
 * reply a replay (REPLAYED). One thread, epoll, N connections, each with
 * one claim in flight (a client that waits for its answer, as once-bench
 * and the etcd driver do per slot). Latency from send to the whole reply;
 * percentiles from the sorted samples (exact).
 *
 *   redis_claim --addr IP:PORT --clients N --duration SEC
 *               [--keys unique|replay:PCT] [--ttl SEC]
 * prints one JSON object: ops_per_sec, p50_ms, p99_ms, p999_ms, outcomes,
 * errors, cpu_user_s, cpu_sys_s.
 *
 * Built by bench/peers/run with `cc -O2`; not part of the once build. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CLIENTS_MAX 4096

struct conn
{
    int fd;
    unsigned idx;
    uint64_t seq;
    uint64_t sent_ns;
    char out[256];
    size_t out_len, out_off;
    char in[512];
    size_t in_len;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static unsigned replay_pct; /* 0: unique keys */
static unsigned ttl_s = 600;
static uint64_t run_id;
static uint64_t *samples;
static size_t n_samples, cap_samples;
static uint64_t accepted, replayed, errors;

static void build(struct conn *c)
{
    char key[80];
    uint64_t n;
    int klen, tlen;
    char ttl[16];

    if (replay_pct > 0 && c->seq > 0 && rnd() % 100 < replay_pct) {
        n = rnd() % c->seq;
    } else {
        n = c->seq++;
    }
    klen = snprintf(key, sizeof key, "%016" PRIx64 "-%u-%" PRIu64, run_id,
                    c->idx, n);
    tlen = snprintf(ttl, sizeof ttl, "%u", ttl_s);
    c->out_len = (size_t)snprintf(
        c->out, sizeof c->out,
        "*6\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n1\r\n$2\r\nNX\r\n$2\r\nEX\r\n"
        "$%d\r\n%s\r\n",
        klen, key, tlen, ttl);
    c->out_off = 0;
}

static int flush(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);

        if (n < 0) {
            return errno == EAGAIN ? 0 : -1;
        }
        c->out_off += (size_t)n;
    }
    return 0;
}

static void record(uint64_t ns)
{
    if (n_samples == cap_samples) {
        cap_samples = cap_samples ? cap_samples * 2 : 1 << 20;
        samples = realloc(samples, cap_samples * sizeof *samples);
        if (samples == NULL) {
            fprintf(stderr, "redis_claim: out of memory\n");
            exit(1);
        }
    }
    samples[n_samples++] = ns;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static double q_ms(double q)
{
    size_t i;

    if (n_samples == 0) {
        return 0;
    }
    i = (size_t)(q * (double)n_samples);
    if (i >= n_samples) {
        i = n_samples - 1;
    }
    return (double)samples[i] / 1e6;
}

int main(int argc, char **argv)
{
    const char *addr = "127.0.0.1:6379";
    unsigned clients = 1;
    double duration = 10;
    struct sockaddr_in sa;
    struct conn *cs;
    struct rusage r0, r1;
    uint64_t end;
    char ip[64];
    const char *colon;
    int ep, i;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--addr") == 0) {
            addr = argv[i + 1];
        } else if (strcmp(argv[i], "--clients") == 0) {
            clients = (unsigned)strtoul(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--duration") == 0) {
            duration = strtod(argv[i + 1], NULL);
        } else if (strcmp(argv[i], "--ttl") == 0) {
            ttl_s = (unsigned)strtoul(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--keys") == 0) {
            if (strncmp(argv[i + 1], "replay:", 7) == 0) {
                replay_pct = (unsigned)strtoul(argv[i + 1] + 7, NULL, 10);
            } else if (strcmp(argv[i + 1], "unique") != 0) {
                fprintf(stderr, "redis_claim: --keys unique|replay:PCT\n");
                return 2;
            }
        } else {
            fprintf(stderr, "redis_claim: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    if (i != argc || clients == 0 || clients > CLIENTS_MAX || duration <= 0 ||
        replay_pct > 100 || ttl_s == 0) {
        fprintf(stderr,
                "usage: redis_claim --addr IP:PORT --clients 1..%d "
                "--duration SEC [--keys unique|replay:PCT] [--ttl S]\n",
                CLIENTS_MAX);
        return 2;
    }
    colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof ip) {
        fprintf(stderr, "redis_claim: bad --addr\n");
        return 2;
    }
    memcpy(ip, addr, (size_t)(colon - addr));
    ip[colon - addr] = '\0';
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        fprintf(stderr, "redis_claim: bad --addr\n");
        return 2;
    }
    run_id = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    rng ^= run_id;
    cs = calloc(clients, sizeof *cs);
    ep = epoll_create1(0);
    if (cs == NULL || ep < 0) {
        return 1;
    }
    for (unsigned k = 0; k < clients; k++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[k]};
        int one = 1;

        cs[k].idx = k;
        cs[k].fd = socket(AF_INET, SOCK_STREAM, 0);
        if (cs[k].fd < 0 ||
            connect(cs[k].fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            fprintf(stderr, "redis_claim: connect %s: %s\n", addr,
                    strerror(errno));
            return 1;
        }
        setsockopt(cs[k].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(cs[k].fd, F_SETFL, O_NONBLOCK);
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[k].fd, &ev);
    }
    getrusage(RUSAGE_SELF, &r0);
    end = now_ns() + (uint64_t)(duration * 1e9);
    for (unsigned k = 0; k < clients; k++) {
        build(&cs[k]);
        cs[k].sent_ns = now_ns();
        if (flush(&cs[k]) != 0) {
            return 1;
        }
    }
    for (;;) {
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, 100);
        uint64_t now = now_ns();

        if (now >= end) {
            break;
        }
        for (int e = 0; e < n; e++) {
            struct conn *c = evs[e].data.ptr;
            ssize_t got =
                read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
            char *nl;

            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) {
                    continue;
                }
                fprintf(stderr, "redis_claim: connection lost\n");
                return 1;
            }
            c->in_len += (size_t)got;
            /* One request in flight: the reply is one line. */
            nl = memchr(c->in, '\n', c->in_len);
            if (nl == NULL) {
                continue;
            }
            now = now_ns();
            record(now - c->sent_ns);
            if (c->in[0] == '+') {
                accepted++;
            } else if (c->in[0] == '$' && c->in[1] == '-') {
                replayed++;
            } else {
                errors++;
            }
            c->in_len = 0;
            build(c);
            c->sent_ns = now;
            if (flush(c) != 0) {
                return 1;
            }
        }
    }
    getrusage(RUSAGE_SELF, &r1);
    qsort(samples, n_samples, sizeof *samples, cmp_u64);
    printf(
        "{\"ops_per_sec\":%.1f,\"ops\":%zu,\"p50_ms\":%.3f,"
        "\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"outcomes\":{\"ACCEPTED\":%" PRIu64
        ",\"REPLAYED\":%" PRIu64 "},\"errors\":{\"ERR\":%" PRIu64
        "},"
        "\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f}\n",
        (double)(accepted + replayed) / duration, n_samples, q_ms(0.5),
        q_ms(0.99), q_ms(0.999), accepted, replayed, errors,
        (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
            (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6,
        (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
            (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6);
    return 0;
}
