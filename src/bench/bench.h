/* bench/bench.h: once-bench's configuration and its flag parser (pure, so
 * tests/unit/bench/test_bench.c can check every refusal). */
#ifndef ONCE_BENCH_BENCH_H_
#define ONCE_BENCH_BENCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "once.h"

#define BENCH_CONNECTIONS_MAX 1024u
#define BENCH_PIPELINE_MAX    1024u /* libonce's default max_inflight */
#define BENCH_DURATION_MAX_MS (24ull * 3600 * 1000)
#define BENCH_RATE_MAX        10000000u
#define BENCH_HOT_MAX         100000000u
#define BENCH_COUNT_MAX       1000000000000ull

enum bench_keys {
    BENCH_KEYS_UNIQUE = 1, /* every claim a new key: ACCEPTED */
    BENCH_KEYS_REPLAY = 2, /* PCT % repeat a key claimed before */
    BENCH_KEYS_HOT = 3,    /* uniformly from K keys shared by all */
};

enum bench_op {
    BENCH_OP_CLAIM = 0,         /* once_claim_async (the default) */
    BENCH_OP_LOOKUP = 1,        /* once_lookup_async: the node reached reads */
    BENCH_OP_LOOKUP_LEADER = 2, /* ... with ONCE_LOOKUP_LEADER */
};

struct bench_cfg
{
    const char *addrs[ONCE_ADDRS_MAX];
    size_t n_addrs;
    char cluster_buf[ONCE_ADDRS_MAX * (ONCE_ADDR_MAX + 1)];
    uint32_t connections;
    uint32_t pipeline;
    uint64_t duration_ms;
    uint64_t warmup_ms;
    enum bench_keys keys;
    uint32_t replay_pct; /* BENCH_KEYS_REPLAY */
    uint64_t hot_keys;   /* BENCH_KEYS_HOT */
    enum once_kind kind;
    uint64_t rate; /* claims/s over all connections; 0: closed loop */
    uint64_t ttl_ms;
    uint32_t timeout_ms;
    uint64_t gap_ms; /* report windows without a success longer than this */
    /* --count: stop once this many claims are answered OK in the measured
     * time (0: run for duration_ms). With it and no --duration, the
     * duration is BENCH_DURATION_MAX_MS, an upper bound only. */
    uint64_t count;
    bool json;
    /* --batch: claims per call through once_claim_batch_async (0: single
     * claims through once_claim_async). */
    uint32_t batch;
    const char *plot; /* PNG path, or NULL */
    /* --tls-ca/--tls-cert/--tls-key (argv's; NULL: $ONCE_TLS_CA, ...,
     * read by once_bench.c, or plaintext). */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    char scope[ONCE_SCOPE_MAX + 1];
    enum bench_op op; /* --op */
    /* --spread: connection i talks to address i mod n_addrs only (its
     * client is given that one address), so the load is spread over the
     * nodes; else every connection gets every address. */
    bool spread;
};

/* Parse argv into @cfg (defaults first). 0: run; 1: --help asked;
 * -EINVAL: a bad flag, with one line naming it in @err (ERR_MSG_SIZE bytes,
 * or NULL). @argv stays referenced (cfg->plot). */
int bench_parse(int argc,
                char **argv,
                struct bench_cfg *cfg,
                char err[ERR_MSG_SIZE]);

/* The --help text. */
extern const char bench_usage[];

/* once-bench's keys (bench_key.c), NUL-terminated into @buf, which holds
 * at least BENCH_KEY_MAX + 1 bytes: a unique or replayed key,
 * "%016" PRIx64 "-%u-%" PRIu64 of (@run_id, @idx, @n), and a hot key,
 * "%016" PRIx64 "-hot-%" PRIu64 of (@run_id, @n). */
#define BENCH_KEY_MAX (16 + 1 + 10 + 1 + 20)
void bench_key_unique(char *buf, uint64_t run_id, unsigned idx, uint64_t n);
void bench_key_hot(char *buf, uint64_t run_id, uint64_t n);

#endif /* ONCE_BENCH_BENCH_H_ */
