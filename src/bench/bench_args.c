/* bench/bench_args.c: once-bench's flags (bench.h). Every value is
 * checked here, before anything connects: a bad flag is one line naming it
 * and exit 2. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/addr.h"
#include "common/assert.h"
#include "common/text.h"

const char bench_usage[] =
    "usage: once-bench [--cluster IP:PORT,...] [--connections N]\n"
    "                  [--pipeline P] [--duration DUR] [--warmup DUR]\n"
    "                  [--keys unique|replay:PCT|hot:K]\n"
    "                  [--kind nonce|idempotent] [--rate R] [--ttl DUR]\n"
    "                  [--timeout DUR] [--gap DUR] [--scope S] [--json]\n"
    "                  [--plot FILE.png] [--count N] [--batch N]\n"
    "                  [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]\n"
    "                  [--op claim|lookup|lookup-leader] [--spread]\n"
    "\n"
    "Claims against a once cluster through libonce's pipelined interface\n"
    "(once_claim_async + once_run): N connections, one thread and one\n"
    "client each, every one keeping up to P claims in flight.\n"
    "\n"
    "  --cluster IP:PORT,...  client addresses, 1..64 (default the\n"
    "                         scripts/run cluster: 127.0.0.1:7101,7102,7103)\n"
    "  --connections N        clients (threads), 1..1024 (default 1)\n"
    "  --pipeline P           claims in flight per connection, 1..1024\n"
    "                         (default 1)\n"
    "  --duration DUR         measured time (default 10s; ms, s, m, h)\n"
    "  --warmup DUR           run first without measuring (default 0s)\n"
    "  --keys unique          every claim a new key (default): ACCEPTED\n"
    "  --keys replay:PCT      PCT % (0..100) of claims repeat a key this\n"
    "                         connection sent before: REPLAYED (or\n"
    "                         IN_PROGRESS for idempotent)\n"
    "  --keys hot:K           keys drawn uniformly from K (1..1e8) shared\n"
    "                         by all connections\n"
    "  --kind nonce|idempotent  record kind (default nonce)\n"
    "  --rate R               fixed rate: R claims/s over all connections\n"
    "                         (1..1e7), each sent at its scheduled time and\n"
    "                         its latency counted from that time, so a\n"
    "                         stall is not hidden (coordinated omission);\n"
    "                         a claim that finds P in flight waits, and\n"
    "                         its wait counts. Default: closed loop, each\n"
    "                         slot sends again as soon as it is answered\n"
    "  --ttl DUR              record ttl (default 10m)\n"
    "  --timeout DUR          per-claim deadline, libonce retries inside it\n"
    "                         (default 5s)\n"
    "  --gap DUR              list every window without a successful claim\n"
    "                         longer than DUR (default 200ms; failover)\n"
    "  --scope S              scope of the keys (default \"bench\")\n"
    "  --json                 one JSON object instead of text\n"
    "  --plot FILE.png        throughput and p50/p99 per second (gnuplot)\n"
    "  --tls-ca FILE          TLS 1.3 to the nodes (as oncectl; default\n"
    "                         $ONCE_TLS_CA, unset: plaintext)\n"
    "  --tls-cert FILE, --tls-key FILE\n"
    "                         the client certificate and key (default\n"
    "                         $ONCE_TLS_CERT, $ONCE_TLS_KEY)\n"
    "  --count N              stop once N claims (1..1e12) are answered OK\n"
    "                         in the measured time, then print the usual\n"
    "                         summary over the time it took (filling a\n"
    "                         cluster: many connections, a deep pipeline).\n"
    "                         No more than N are sent; a failed one is sent\n"
    "                         again (closed loop; with --rate, not once N\n"
    "                         were sent). --duration stays an upper bound\n"
    "                         (default with --count: 24h)\n"
    "  --op claim             what each call is (default claim)\n"
    "  --op lookup            a lookup of the next key: the node it reaches\n"
    "                         reads after a read barrier (FOUND or\n"
    "                         NOT_FOUND both count as answered)\n"
    "  --op lookup-leader     a lookup the leader reads (forwarded there)\n"
    "  --spread               connection i talks to the i-th address of\n"
    "                         --cluster only (mod their number), so the load\n"
    "                         is spread over the nodes; without it every\n"
    "                         connection gets every address\n"
    "  --batch N              send batch claims (once_claim_batch_async):\n"
    "                         N claims (1..4096) per call, each slot one\n"
    "                         call; every item is a claim in the figures\n"
    "                         (claims/s, outcomes, errors), its latency\n"
    "                         that of its call. Default: single claims\n"
    "                         (once_claim_async). Not with --rate,\n"
    "                         --count or --op lookup*\n"
    "  --help                 this text\n"
    "\n"
    "Prints ops/s (answered claims, status OK, per second of the measured\n"
    "time), latency p50/p90/p99/p99.9/max (HDR-style histogram, < 0.8 %\n"
    "error), outcome counts, errors by status, the longest window without\n"
    "a successful claim, and the CPU seconds of this process.\n"
    "SIGINT or SIGTERM ends the measured time at once (a second one kills):\n"
    "claims in flight are awaited, not counted, and the summary is over\n"
    "the time until the signal.\n"
    "Exit: 0 done, 1 could not run, no claim was answered in the measured\n"
    "time, or --count N was not reached (the figures are still printed),\n"
    "2 bad flag.\n";

/* An IPv4 literal and a port 1..65535. */
static bool check_addr(const char *s)
{
    return addr_parse_ipv4(s, ADDR_PORT_ZEROS, NULL);
}

static int parse_cluster(struct bench_cfg *cfg,
                         const char *s,
                         char err[ERR_MSG_SIZE])
{
    size_t len = strlen(s);
    char *p;

    if (len == 0 || len >= sizeof cfg->cluster_buf) {
        err_printf(err, "--cluster: %s", len == 0 ? "empty" : "too long");
        return -EINVAL;
    }
    memcpy(cfg->cluster_buf, s, len + 1);
    cfg->n_addrs = 0;
    p = cfg->cluster_buf;
    for (;;) {
        char *comma = strchr(p, ',');

        if (comma != NULL) {
            *comma = '\0';
        }
        if (cfg->n_addrs == ONCE_ADDRS_MAX) {
            err_printf(err, "--cluster: more than %u addresses",
                       (unsigned)ONCE_ADDRS_MAX);
            return -EINVAL;
        }
        if (strlen(p) > ONCE_ADDR_MAX || !check_addr(p)) {
            err_printf(
                err, "--cluster: bad address \"%.64s\" (want an IPv4 IP:PORT)",
                p);
            return -EINVAL;
        }
        cfg->addrs[cfg->n_addrs++] = p;
        if (comma == NULL) {
            return 0;
        }
        p = comma + 1;
    }
}

static int parse_keys(struct bench_cfg *cfg,
                      const char *s,
                      char err[ERR_MSG_SIZE])
{
    uint64_t v;

    if (strcmp(s, "unique") == 0) {
        cfg->keys = BENCH_KEYS_UNIQUE;
        return 0;
    }
    if (strncmp(s, "replay:", 7) == 0) {
        if (!text_parse_u64(s + 7, 100, &v)) {
            err_printf(err,
                       "--keys: replay:PCT wants PCT 0..100, got \"%.32s\"",
                       s + 7);
            return -EINVAL;
        }
        cfg->keys = BENCH_KEYS_REPLAY;
        cfg->replay_pct = (uint32_t)v;
        return 0;
    }
    if (strncmp(s, "hot:", 4) == 0) {
        if (!text_parse_u64(s + 4, BENCH_HOT_MAX, &v) || v == 0) {
            err_printf(err, "--keys: hot:K wants K 1..%u, got \"%.32s\"",
                       BENCH_HOT_MAX, s + 4);
            return -EINVAL;
        }
        cfg->keys = BENCH_KEYS_HOT;
        cfg->hot_keys = v;
        return 0;
    }
    err_printf(err, "--keys: want unique, replay:PCT or hot:K, got \"%.32s\"",
               s);
    return -EINVAL;
}

static void defaults(struct bench_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    (void)parse_cluster(cfg, "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103",
                        NULL);
    cfg->connections = 1;
    cfg->pipeline = 1;
    cfg->duration_ms = 10000;
    cfg->keys = BENCH_KEYS_UNIQUE;
    cfg->kind = ONCE_NONCE;
    cfg->ttl_ms = 10ull * 60 * 1000;
    cfg->timeout_ms = 5000;
    cfg->gap_ms = 200;
    memcpy(cfg->scope, "bench", sizeof "bench");
}

/* "--flag VALUE" or "--flag=VALUE": the value, or NULL if @arg is not
 * @name. *i moves past a separate value. */
static const char *value_of(int argc,
                            char **argv,
                            int *i,
                            const char *name,
                            bool *missing)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);

    *missing = false;
    if (strncmp(arg, name, n) != 0) {
        return NULL;
    }
    if (arg[n] == '=') {
        return arg + n + 1;
    }
    if (arg[n] != '\0') {
        return NULL;
    }
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    (*i)++;
    ONCE_ASSERT(argv[*i] != NULL, "argv[0..argc) are strings (C11 5.1.2.2.1)");
    return argv[*i];
}

static bool u64_in(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;

    if (!text_parse_u64(s, hi, &v) || v < lo) {
        return false;
    }
    *out = v;
    return true;
}

/* A number flag: @v in lo..hi, else "NAME: want LO..HI[UNIT], got V". */
static int number(const char *name,
                  const char *v,
                  uint64_t lo,
                  uint64_t hi,
                  const char *unit,
                  uint64_t *out,
                  char err[ERR_MSG_SIZE])
{
    if (!u64_in(v, lo, hi, out)) {
        err_printf(err, "%s: want %llu..%llu%s, got \"%.32s\"", name,
                   (unsigned long long)lo, (unsigned long long)hi, unit, v);
        return -EINVAL;
    }
    return 0;
}

/* A duration flag: at most @max_ms, 0 allowed only if @zero_ok; else
 * "NAME: want a duration RANGE, got V". */
static int duration(const char *name,
                    const char *v,
                    bool zero_ok,
                    uint64_t max_ms,
                    const char *range,
                    uint64_t *out,
                    char err[ERR_MSG_SIZE])
{
    if (!text_parse_duration_ms(v, max_ms, out) || (!zero_ok && *out == 0)) {
        err_printf(err, "%s: want a duration %s, got \"%.32s\"", name, range,
                   v);
        return -EINVAL;
    }
    return 0;
}

static int parse_op(struct bench_cfg *cfg,
                    const char *v,
                    char err[ERR_MSG_SIZE])
{
    if (strcmp(v, "claim") == 0) {
        cfg->op = BENCH_OP_CLAIM;
    } else if (strcmp(v, "lookup") == 0) {
        cfg->op = BENCH_OP_LOOKUP;
    } else if (strcmp(v, "lookup-leader") == 0) {
        cfg->op = BENCH_OP_LOOKUP_LEADER;
    } else {
        err_printf(
            err, "--op: want claim, lookup or lookup-leader, got \"%.32s\"", v);
        return -EINVAL;
    }
    return 0;
}

static int parse_kind(struct bench_cfg *cfg,
                      const char *v,
                      char err[ERR_MSG_SIZE])
{
    if (strcmp(v, "nonce") == 0) {
        cfg->kind = ONCE_NONCE;
    } else if (strcmp(v, "idempotent") == 0) {
        cfg->kind = ONCE_IDEMPOTENT;
    } else {
        err_printf(err, "--kind: want nonce or idempotent, got \"%.32s\"", v);
        return -EINVAL;
    }
    return 0;
}

/* The flags that take a value, in the order they are tried. */
static const char *const value_flags[] = {
    "--cluster",  "--connections", "--pipeline", "--duration", "--warmup",
    "--keys",     "--kind",        "--rate",     "--ttl",      "--timeout",
    "--gap",      "--scope",       "--count",    "--plot",     "--tls-ca",
    "--tls-cert", "--tls-key",     "--op",       "--batch",
};

/* Set flag @name (one of value_flags) from @v. 0, or -EINVAL with @err. */
static int set_flag(struct bench_cfg *cfg,
                    const char *name,
                    const char *v,
                    bool *have_duration,
                    char err[ERR_MSG_SIZE])
{
    uint64_t n;
    int rv = 0;

    if (strcmp(name, "--cluster") == 0) {
        return parse_cluster(cfg, v, err);
    } else if (strcmp(name, "--keys") == 0) {
        return parse_keys(cfg, v, err);
    } else if (strcmp(name, "--kind") == 0) {
        return parse_kind(cfg, v, err);
    } else if (strcmp(name, "--op") == 0) {
        return parse_op(cfg, v, err);
    } else if (strcmp(name, "--connections") == 0) {
        rv = number(name, v, 1, BENCH_CONNECTIONS_MAX, "", &n, err);
        cfg->connections = rv == 0 ? (uint32_t)n : cfg->connections;
    } else if (strcmp(name, "--pipeline") == 0) {
        rv = number(name, v, 1, BENCH_PIPELINE_MAX, "", &n, err);
        cfg->pipeline = rv == 0 ? (uint32_t)n : cfg->pipeline;
    } else if (strcmp(name, "--batch") == 0) {
        rv = number(name, v, 1, ONCE_BATCH_MAX, " claims", &n, err);
        cfg->batch = rv == 0 ? (uint32_t)n : cfg->batch;
    } else if (strcmp(name, "--rate") == 0) {
        rv = number(name, v, 1, BENCH_RATE_MAX, " claims/s", &n, err);
        cfg->rate = rv == 0 ? n : cfg->rate;
    } else if (strcmp(name, "--count") == 0) {
        rv = number(name, v, 1, BENCH_COUNT_MAX, " claims", &n, err);
        cfg->count = rv == 0 ? n : cfg->count;
    } else if (strcmp(name, "--duration") == 0) {
        rv = duration(name, v, false, BENCH_DURATION_MAX_MS,
                      "1ms..24h (e.g. 10s)", &n, err);
        cfg->duration_ms = rv == 0 ? n : cfg->duration_ms;
        *have_duration = *have_duration || rv == 0;
    } else if (strcmp(name, "--warmup") == 0) {
        rv =
            duration(name, v, true, BENCH_DURATION_MAX_MS, "0ms..24h", &n, err);
        cfg->warmup_ms = rv == 0 ? n : cfg->warmup_ms;
    } else if (strcmp(name, "--ttl") == 0) {
        /* 168h: the cluster's default max_ttl. */
        rv = duration(name, v, false, 168ull * 3600 * 1000, "1ms..168h", &n,
                      err);
        cfg->ttl_ms = rv == 0 ? n : cfg->ttl_ms;
    } else if (strcmp(name, "--timeout") == 0) {
        rv = duration(name, v, false, 3600 * 1000, "1ms..1h", &n, err);
        cfg->timeout_ms = rv == 0 ? (uint32_t)n : cfg->timeout_ms;
    } else if (strcmp(name, "--gap") == 0) {
        rv = duration(name, v, false, BENCH_DURATION_MAX_MS, "1ms..24h", &n,
                      err);
        cfg->gap_ms = rv == 0 ? n : cfg->gap_ms;
    } else if (strcmp(name, "--scope") == 0) {
        size_t len = strlen(v);

        if (len == 0 || len > ONCE_SCOPE_MAX) {
            err_printf(err, "--scope: want 1..%u bytes",
                       (unsigned)ONCE_SCOPE_MAX);
            return -EINVAL;
        }
        memcpy(cfg->scope, v, len + 1);
    } else if (strncmp(name, "--tls-", 6) == 0) {
        if (v[0] == '\0') {
            err_printf(err, "%s: want a file name", name);
            return -EINVAL;
        }
        *(strcmp(name, "--tls-ca") == 0     ? &cfg->tls_ca
          : strcmp(name, "--tls-cert") == 0 ? &cfg->tls_cert
                                            : &cfg->tls_key) = v;
    } else { /* --plot */
        if (v[0] == '\0') {
            err_printf(err, "--plot: want a file name");
            return -EINVAL;
        }
        cfg->plot = v;
    }
    return rv;
}

int bench_parse(int argc,
                char **argv,
                struct bench_cfg *cfg,
                char err[ERR_MSG_SIZE])
{
    bool have_duration = false;
    int i;

    defaults(cfg);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        bool missing = false;
        size_t k;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            return 1;
        }
        if (strcmp(a, "--json") == 0) {
            cfg->json = true;
            continue;
        }
        if (strcmp(a, "--spread") == 0) {
            cfg->spread = true;
            continue;
        }
        for (k = 0; k < sizeof value_flags / sizeof value_flags[0]; k++) {
            v = value_of(argc, argv, &i, value_flags[k], &missing);
            if (v != NULL || missing) {
                break;
            }
        }
        if (missing) {
            err_printf(err, "%s: needs a value", value_flags[k]);
            return -EINVAL;
        }
        if (v == NULL) {
            err_printf(err, "unknown flag \"%.64s\" (see --help)", a);
            return -EINVAL;
        }
        if (set_flag(cfg, value_flags[k], v, &have_duration, err) != 0) {
            return -EINVAL;
        }
    }
    if (cfg->rate != 0 && cfg->rate < cfg->connections) {
        err_printf(err,
                   "--rate: %llu claims/s is less than one per connection (%u)",
                   (unsigned long long)cfg->rate, cfg->connections);
        return -EINVAL;
    }
    if (cfg->batch != 0 && (cfg->rate != 0 || cfg->count != 0)) {
        err_printf(err, "--batch: not with --rate or --count");
        return -EINVAL;
    }
    if (cfg->batch != 0 && cfg->op != BENCH_OP_CLAIM) {
        err_printf(err, "--batch: claims only, not with --op lookup");
        return -EINVAL;
    }
    if (cfg->count != 0 && !have_duration) {
        cfg->duration_ms = BENCH_DURATION_MAX_MS;
    }
    return 0;
}
