/* server/main.c: onced's flags (docs/design.md §6) and main().
 *
 * Every flag takes its value as the next argument or after '='. A bad flag
 * prints one line naming it on stderr and exits 2; --help prints the whole
 * list on stdout and exits 0. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "server/server.h"

#define HOUR_MS (3600ull * 1000)
#define DAY_MS  (24 * HOUR_MS)

static const char usage_text[] =
    "usage: onced --data-dir DIR --raft-addr IP:PORT --client-addr IP:PORT\n"
    "             [--bootstrap | --join IP:PORT,... [--role voter|standby]]\n"
    "             [options]\n"
    "\n"
    "Runs one node of a once cluster. Durations are an integer with ms, s, m\n"
    "or h (250ms, 5s, 10m, 24h). Addresses are IPv4 literals.\n"
    "\n"
    "Node:\n"
    "  --data-dir DIR          data directory (made if missing); holds the\n"
    "                          node's id (node-id), the Raft log and\n"
    "                          snapshots\n"
    "  --raft-addr IP:PORT     Raft peer address (TLS with --tls-*; keep it\n"
    "                          on a private network all the same)\n"
    "  --client-addr IP:PORT   client and admin RPC address\n"
    "  --raft-listen IP:PORT   listen for Raft here instead of --raft-addr,\n"
    "                          which stays the address peers dial (e.g.\n"
    "                          0.0.0.0:PORT behind a stable Service IP)\n"
    "  --client-listen IP:PORT listen for clients here instead of\n"
    "                          --client-addr (the address other members\n"
    "                          forward to)\n"
    "  --http-addr IP:PORT     HTTP listener: GET /metrics (Prometheus text),\n"
    "                          /healthz (the node's loop answers) and\n"
    "                          /readyz (200 when a member that knows a\n"
    "                          leader and has applied within 64 entries of\n"
    "                          its commit, else 503 with the reason), and\n"
    "                          the JSON API: POST /v1/claim, /v1/claims,\n"
    "                          /v1/complete, /v1/release, GET\n"
    "                          /v1/records/SCOPE/KEY,\n"
    "                          /v1/status (docs/http-api.md). With --tls-*\n"
    "                          it is HTTPS with the node's certificate:\n"
    "                          /healthz and /readyz for anyone, /metrics\n"
    "                          for a monitor or admin certificate, /v1/\n"
    "                          authorized like the client port\n"
    "  --storage uring|pwrite|uv\n"
    "                          log store backend (default: uring when the\n"
    "                          kernel allows io_uring, else pwrite; a data\n"
    "                          directory that already holds a raft_uv log\n"
    "                          keeps uv). uring and pwrite share one format\n"
    "                          in DIR/log; uv is raft_uv's own storage\n"
    "  --bootstrap             start a new cluster with this node as its\n"
    "                          only voter (ignored, with a log line, when the\n"
    "                          data directory already holds a node)\n"
    "  --join IP:PORT,...      client addresses of members (up to 16; this\n"
    "                          node's own is skipped): a new node asks them,\n"
    "                          in turn, to add it; ignored when the node is\n"
    "                          already in a configuration\n"
    "  --role voter|standby    role to join as (default voter; with --join)\n"
    "  --restore FILE          with --bootstrap on an empty data directory:\n"
    "                          start the new cluster from this backup\n"
    "                          (oncectl snapshot backup; checked whole first)\n"
    "                          with a NEW cluster id and a replay fence:\n"
    "                          nonces with ts <= restore time + max_skew are\n"
    "                          STALE, and TTL-only and IDEMPOTENT claims of\n"
    "                          keys not in the backup are FAILED_PRECONDITION\n"
    "                          for max_ttl, because every claim accepted\n"
    "                          after the backup was taken is replayable.\n"
    "                          Settings come from the backup (settings flags\n"
    "                          are refused); the uv store is refused\n"
    "  --accept-replay-window  with --restore: do not refuse those TTL-only\n"
    "                          and IDEMPOTENT claims (the operator accepts\n"
    "                          that claims made after the backup may be\n"
    "                          accepted again); the nonce rule stays\n"
    "  --accept-cut-tail       on this start, clear the store's cut index\n"
    "                          (a torn tail cut at load) and vote and\n"
    "                          campaign at once instead of waiting for the\n"
    "                          log to hold that index again. The way out\n"
    "                          when a majority cut their tails and no\n"
    "                          leader can be elected (metric\n"
    "                          once_raft_no_vote; docs/operations.md): the\n"
    "                          operator accepts that an acknowledged entry\n"
    "                          at the cut index may be lost. Logs what it\n"
    "                          cleared, or that there was nothing to clear.\n"
    "                          Not with --restore or --storage uv\n"
    "  --access FILE           identities, roles and scopes (JSON, at most\n"
    "                          1 MiB; docs/server.md, \"Access file\"); read\n"
    "                          at start (a bad file refuses the start) and\n"
    "                          again on SIGHUP (a bad file is refused with a\n"
    "                          log line and the old one stays). Required\n"
    "                          with TLS; without TLS callers have no\n"
    "                          identities and every caller is admin\n"
    "  A restart needs neither --bootstrap nor --join.\n"
    "\n"
    "Raft:\n"
    "  --election-timeout DUR  election timeout (default 1s; 10ms..60s); a\n"
    "                          Raft link with bytes unacknowledged for twice\n"
    "                          that (at least 1s) is closed and redialed\n"
    "  --heartbeat DUR         heartbeat interval (default 100ms; below the\n"
    "                          election timeout)\n"
    "  --snapshot-threshold auto|N\n"
    "                          when to snapshot. auto (default): when the\n"
    "                          log since the last snapshot weighs half of\n"
    "                          it (at least 8 MiB, at most 256 MiB); N:\n"
    "                          every N entries (1..1073741824)\n"
    "  --snapshot-trailing auto|N\n"
    "                          log kept after a snapshot for followers\n"
    "                          that lag. auto (default): 1/8 of the\n"
    "                          snapshot (4 MiB..64 MiB); N: N entries\n"
    "                          (1..1073741824)\n"
    "  --snapshot-nice N       CPU nice value of the thread that encodes a\n"
    "                          snapshot off the event loop (default 10;\n"
    "                          0..19, 0: the node's own priority)\n"
    "\n"
    "Cluster settings (replicated; used only when this node proposes the\n"
    "cluster's bootstrap, i.e. with --bootstrap; later changes go through\n"
    "the log):\n"
    "  --max-window DUR        longest signature window (default 5m; ..168h)\n"
    "  --max-skew DUR          max clock skew K (default 30s; ..1h)\n"
    "  --max-ttl DUR           longest ttl (default 168h; ..720h)\n"
    "  --max-lease DUR         longest lease (default 1h; ..24h)\n"
    "  --max-records N         records in the table (default 20000000;\n"
    "                          1..268435456)\n"
    "  --max-bytes N           bytes of records (default 4294967296;\n"
    "                          4096..17179869184)\n"
    "\n"
    "RPC limits:\n"
    "  --max-frame N           largest frame in bytes (default 1048576;\n"
    "                          131072..67108864)\n"
    "  --max-conns N           client connections (default 4096; 1..65536)\n"
    "  --max-calls-per-conn N  calls in flight per connection (default\n"
    "                          1024; 1..65536)\n"
    "  --idle-timeout DUR      close a connection without calls in flight\n"
    "                          DUR after its last whole frame or answer\n"
    "                          (default 5m; 0ms: never; ..24h)\n"
    "  --frame-timeout DUR     close a connection that started a frame and\n"
    "                          did not finish it within DUR (default 10s;\n"
    "                          0ms: never; ..1h)\n"
    "  --max-conn-memory N     bytes all client connections may hold in\n"
    "                          read buffers and queued answers (default\n"
    "                          1073741824; 16777216..68719476736); past it\n"
    "                          the connection holding the most is closed\n"
    "  --backup-idle-timeout DUR\n"
    "                          remove a backup (oncectl snapshot backup)\n"
    "                          nobody read for DUR after it was encoded\n"
    "                          (default 1m; 1s..1h)\n"
    "\n"
    "TLS (every port; without it onced serves loopback addresses only):\n"
    "  --tls-cert FILE         this node's certificate chain (PEM); with\n"
    "                          --tls-key and --tls-ca\n"
    "  --tls-key FILE          its private key (PEM)\n"
    "  --tls-ca FILE           CA bundle: clients must present a certificate\n"
    "                          from it (or from --peer-tls-ca)\n"
    "  --peer-tls-ca FILE      CA bundle of the other nodes (Raft port and\n"
    "                          forwarded calls; default: --tls-ca)\n"
    "  --insecure              allow plaintext on non-loopback addresses\n"
    "                          (a warning is logged every minute)\n"
    "  SIGHUP reloads the certificate, key and CA files; a file that does\n"
    "  not load is refused with a log line and the old ones stay.\n"
    "\n"
    "Raft port bounds (every message is checked as it arrives):\n"
    "  --raft-message-max N    largest Raft message but a snapshot, in bytes\n"
    "                          (default 536870912; 1048576..17179869184)\n"
    "  --raft-snapshot-max N   largest InstallSnapshot data, in bytes\n"
    "                          (default 8589934592; 1048576..1099511627776)\n"
    "\n"
    "Logs:\n"
    "  --log-level LEVEL       debug, info, warn or error (default info);\n"
    "                          logfmt lines on stderr\n"
    "  -h, --help              this text\n"
    "\n"
    "Exit codes: 0 clean stop (SIGTERM/SIGINT, or this node was removed),\n"
    "1 could not start or stopped on an error, 2 a bad flag, 3 the data\n"
    "directory belongs to a removed node.\n";

void server_config_default(struct server_config *c)
{
    memset(c, 0, sizeof *c);
    c->role = FSM_ROLE_VOTER;
    fsm_settings_default(&c->settings);
    c->raft.election_ms = 1000;
    c->raft.heartbeat_ms = 100;
    c->raft.snapshot_threshold = 0; /* auto: raft/snap_policy.h */
    c->raft.snapshot_nice = 10;
    c->raft.snapshot_trailing = 0;
    c->raft.max_catch_up_rounds = 10;
    c->raft.max_catch_up_round_ms = 5000;
    rpc_limits_default(&c->limits);
    c->backup_idle_ms = BACKUP_IDLE_MS;
    c->log_level = LOG_INFO;
    c->raft_limits.message_max = RFRAME_MESSAGE_MAX_DEFAULT;
    c->raft_limits.snapshot_max = RFRAME_SNAPSHOT_MAX_DEFAULT;
}

static int bad(const char *flag, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int bad(const char *flag, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "onced: %s: ", flag);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see onced --help)\n");
    return -EINVAL;
}

/* @ms in its largest whole unit ("168h", "250ms"). */
static const char *fmt_dur(uint64_t ms, char buf[24])
{
    if (ms >= HOUR_MS && ms % HOUR_MS == 0) {
        snprintf(buf, 24, "%lluh", (unsigned long long)(ms / HOUR_MS));
    } else if (ms >= 60000 && ms % 60000 == 0) {
        snprintf(buf, 24, "%llum", (unsigned long long)(ms / 60000));
    } else if (ms >= 1000 && ms % 1000 == 0) {
        snprintf(buf, 24, "%llus", (unsigned long long)(ms / 1000));
    } else {
        snprintf(buf, 24, "%llums", (unsigned long long)ms);
    }
    return buf;
}

static int parse_dur(const char *flag,
                     const char *val,
                     uint64_t min_ms,
                     uint64_t max_ms,
                     uint64_t *out)
{
    char lo[24], hi[24];
    uint64_t v;

    if (!text_parse_duration_ms(val, max_ms, &v) || v < min_ms) {
        fprintf(stderr,
                "onced: %s: bad duration \"%s\": want an integer with ms, s, "
                "m or h, %s..%s (see onced --help)\n",
                flag, val, fmt_dur(min_ms, lo), fmt_dur(max_ms, hi));
        return -EINVAL;
    }
    *out = v;
    return 0;
}

static int parse_num(const char *flag,
                     const char *val,
                     uint64_t min,
                     uint64_t max,
                     uint64_t *out)
{
    uint64_t v;

    if (!text_parse_u64(val, max, &v) || v < min) {
        fprintf(stderr,
                "onced: %s: bad number \"%s\": want a decimal integer "
                "%llu..%llu (see onced --help)\n",
                flag, val, (unsigned long long)min, (unsigned long long)max);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

static int parse_addr(const char *flag, const char *val)
{
    struct sockaddr_in sa;

    if (strlen(val) > RPC_ADDR_MAX || rpc_addr_parse(val, &sa) != 0) {
        return bad(flag, "bad address \"%s\": want IPv4 IP:PORT", val);
    }
    return 0;
}

static int parse_join(struct server_config *c, const char *val)
{
    const char *p = val;

    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);

        if (n == 0 || n > RPC_ADDR_MAX) {
            return bad("--join", "bad list \"%s\": want IP:PORT,IP:PORT,...",
                       val);
        }
        if (c->n_join == SERVER_JOIN_MAX) {
            return bad("--join", "too many addresses in \"%s\" (at most 16)",
                       val);
        }
        memcpy(c->join[c->n_join], p, n);
        c->join[c->n_join][n] = '\0';
        if (parse_addr("--join", c->join[c->n_join]) != 0) {
            return -EINVAL;
        }
        c->n_join++;
        p += n;
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                return bad("--join",
                           "bad list \"%s\": want IP:PORT,IP:PORT,...", val);
            }
        }
    }
    if (c->n_join == 0) {
        return bad("--join", "bad list \"%s\": want IP:PORT,IP:PORT,...", val);
    }
    return 0;
}

static int apply_tls_flag(struct server_config *c, const char *k, const char *v)
{
    if (v[0] == '\0' || strlen(v) > 4000) {
        return bad(k, "bad file name \"%s\"", v);
    }
    if (strcmp(k, "--tls-cert") == 0) {
        c->tls_cert = v;
    } else if (strcmp(k, "--tls-key") == 0) {
        c->tls_key = v;
    } else if (strcmp(k, "--tls-ca") == 0) {
        c->tls_ca = v;
    } else {
        c->peer_tls_ca = v;
    }
    return 0;
}

/* TLS is all or nothing; without it, only loopback addresses unless
 * --insecure (secure by default). */
static int check_tls(const struct server_config *c)
{
    bool any = c->tls_cert != NULL || c->tls_key != NULL || c->tls_ca != NULL;

    if (any &&
        (c->tls_cert == NULL || c->tls_key == NULL || c->tls_ca == NULL)) {
        return bad("--tls-cert",
                   "--tls-cert, --tls-key and --tls-ca go "
                   "together");
    }
    if (c->peer_tls_ca != NULL && !any) {
        return bad("--peer-tls-ca",
                   "only with --tls-cert, --tls-key and "
                   "--tls-ca");
    }
    if (!any && !c->insecure) {
        /* The listen addresses too: 0.0.0.0 is not loopback. */
        const char *names[] = {"--client-addr", "--raft-addr",
                               "--client-listen", "--raft-listen",
                               "--http-addr"};
        const char *addrs[] = {c->client_addr, c->raft_addr, c->client_listen,
                               c->raft_listen, c->http_addr};
        const char *off = NULL, *name = NULL;

        for (unsigned i = 0; i < sizeof addrs / sizeof addrs[0] && off == NULL;
             i++) {
            if (addrs[i] != NULL && !node_tls_loopback(addrs[i])) {
                off = addrs[i];
                name = names[i];
            }
        }
        if (off != NULL) {
            return bad(name,
                       "%s is not a loopback address: refusing to serve it "
                       "without TLS (give --tls-cert, --tls-key and --tls-ca, "
                       "or --insecure)",
                       off);
        }
    }
    return 0;
}

/* The flags that take a value, in --help order; "seen" catches repeats. */
static const char *const value_flags[] = {
    "--data-dir",
    "--raft-addr",
    "--client-addr",
    "--raft-listen",
    "--client-listen",
    "--http-addr",
    "--storage",
    "--join",
    "--role",
    "--restore",
    "--access",
    "--election-timeout",
    "--heartbeat",
    "--snapshot-threshold",
    "--snapshot-trailing",
    "--snapshot-nice",
    "--max-window",
    "--max-skew",
    "--max-ttl",
    "--max-lease",
    "--max-records",
    "--max-bytes",
    "--max-frame",
    "--max-conns",
    "--max-calls-per-conn",
    "--idle-timeout",
    "--backup-idle-timeout",
    "--frame-timeout",
    "--max-conn-memory",
    "--tls-cert",
    "--tls-key",
    "--tls-ca",
    "--peer-tls-ca",
    "--raft-message-max",
    "--raft-snapshot-max",
    "--log-level",
};
#define N_VALUE_FLAGS (sizeof value_flags / sizeof value_flags[0])

static int apply_flag(struct server_config *c, const char *k, const char *v)
{
    uint64_t n;

    if (strcmp(k, "--data-dir") == 0) {
        if (v[0] == '\0' || strlen(v) > 4000) {
            return bad(k, "bad directory \"%s\"", v);
        }
        c->data_dir = v;
    } else if (strcmp(k, "--raft-addr") == 0) {
        if (parse_addr(k, v) != 0) {
            return -EINVAL;
        }
        c->raft_addr = v;
    } else if (strcmp(k, "--client-addr") == 0) {
        if (parse_addr(k, v) != 0) {
            return -EINVAL;
        }
        c->client_addr = v;
    } else if (strcmp(k, "--raft-listen") == 0) {
        if (parse_addr(k, v) != 0) {
            return -EINVAL;
        }
        c->raft_listen = v;
    } else if (strcmp(k, "--client-listen") == 0) {
        if (parse_addr(k, v) != 0) {
            return -EINVAL;
        }
        c->client_listen = v;
    } else if (strcmp(k, "--http-addr") == 0) {
        if (parse_addr(k, v) != 0) {
            return -EINVAL;
        }
        c->http_addr = v;
    } else if (strcmp(k, "--join") == 0) {
        return parse_join(c, v);
    } else if (strcmp(k, "--restore") == 0) {
        if (v[0] == '\0' || strlen(v) > 4000) {
            return bad(k, "bad file \"%s\"", v);
        }
        c->restore = v;
    } else if (strcmp(k, "--role") == 0) {
        if (strcmp(v, "voter") == 0) {
            c->role = FSM_ROLE_VOTER;
        } else if (strcmp(v, "standby") == 0) {
            c->role = FSM_ROLE_STANDBY;
        } else {
            return bad(k, "bad role \"%s\": want voter or standby", v);
        }
    } else if (strcmp(k, "--access") == 0) {
        if (v[0] == '\0' || strlen(v) > 4000) {
            return bad(k, "bad file name \"%s\"", v);
        }
        c->access_path = v;
    } else if (strcmp(k, "--election-timeout") == 0) {
        if (parse_dur(k, v, 10, 60000, &n) != 0) {
            return -EINVAL;
        }
        c->raft.election_ms = (unsigned)n;
    } else if (strcmp(k, "--heartbeat") == 0) {
        if (parse_dur(k, v, 1, 60000, &n) != 0) {
            return -EINVAL;
        }
        c->raft.heartbeat_ms = (unsigned)n;
    } else if (strcmp(k, "--snapshot-threshold") == 0 ||
               strcmp(k, "--snapshot-trailing") == 0) {
        unsigned *dst = strcmp(k, "--snapshot-threshold") == 0
                            ? &c->raft.snapshot_threshold
                            : &c->raft.snapshot_trailing;

        /* 0 stands for auto in replica_config. */
        if (strcmp(v, "auto") == 0) {
            *dst = 0;
        } else if (!text_parse_u64(v, 1u << 30, &n) || n == 0) {
            return bad(k,
                       "bad value \"%s\": want auto or an integer "
                       "1..1073741824",
                       v);
        } else {
            *dst = (unsigned)n;
        }
    } else if (strcmp(k, "--snapshot-nice") == 0) {
        if (!text_parse_u64(v, 19, &n)) {
            return bad(k, "bad value \"%s\": want an integer 0..19", v);
        }
        c->raft.snapshot_nice = (unsigned)n;
    } else if (strcmp(k, "--max-window") == 0) {
        c->settings_given = true;
        return parse_dur(k, v, 1, FSM_MAX_WINDOW_CEIL,
                         &c->settings.max_window_ms);
    } else if (strcmp(k, "--max-skew") == 0) {
        c->settings_given = true;
        return parse_dur(k, v, 1, FSM_MAX_SKEW_CEIL, &c->settings.max_skew_ms);
    } else if (strcmp(k, "--max-ttl") == 0) {
        c->settings_given = true;
        return parse_dur(k, v, 1, FSM_MAX_TTL_CEIL, &c->settings.max_ttl_ms);
    } else if (strcmp(k, "--max-lease") == 0) {
        c->settings_given = true;
        return parse_dur(k, v, 1, FSM_MAX_LEASE_CEIL,
                         &c->settings.max_lease_ms);
    } else if (strcmp(k, "--max-records") == 0) {
        c->settings_given = true;
        return parse_num(k, v, 1, 1ull << 28, &c->settings.max_records);
    } else if (strcmp(k, "--max-bytes") == 0) {
        c->settings_given = true;
        return parse_num(k, v, 4096, 16ull << 30, &c->settings.max_bytes);
    } else if (strcmp(k, "--max-frame") == 0) {
        if (parse_num(k, v, 128u << 10, FRAME_MAX_CEIL, &n) != 0) {
            return -EINVAL;
        }
        c->limits.frame_max = (size_t)n;
    } else if (strcmp(k, "--max-conns") == 0) {
        if (parse_num(k, v, 1, 65536, &n) != 0) {
            return -EINVAL;
        }
        c->limits.conns_max = (unsigned)n;
    } else if (strcmp(k, "--max-calls-per-conn") == 0) {
        if (parse_num(k, v, 1, 65536, &n) != 0) {
            return -EINVAL;
        }
        c->limits.calls_max = (unsigned)n;
    } else if (strcmp(k, "--idle-timeout") == 0) {
        if (parse_dur(k, v, 0, DAY_MS, &n) != 0) {
            return -EINVAL;
        }
        c->limits.idle_ms = (unsigned)n;
    } else if (strcmp(k, "--backup-idle-timeout") == 0) {
        if (parse_dur(k, v, 1000, HOUR_MS, &n) != 0) {
            return -EINVAL;
        }
        c->backup_idle_ms = (unsigned)n;
    } else if (strcmp(k, "--frame-timeout") == 0) {
        if (parse_dur(k, v, 0, HOUR_MS, &n) != 0) {
            return -EINVAL;
        }
        c->limits.frame_ms = (unsigned)n;
    } else if (strcmp(k, "--max-conn-memory") == 0) {
        if (parse_num(k, v, 16u << 20, 64ull << 30, &n) != 0) {
            return -EINVAL;
        }
        c->limits.mem_max = (size_t)n;
    } else if (strcmp(k, "--tls-cert") == 0 || strcmp(k, "--tls-key") == 0 ||
               strcmp(k, "--tls-ca") == 0 || strcmp(k, "--peer-tls-ca") == 0) {
        return apply_tls_flag(c, k, v);
    } else if (strcmp(k, "--raft-message-max") == 0) {
        return parse_num(k, v, 1u << 20, 16ull << 30,
                         &c->raft_limits.message_max);
    } else if (strcmp(k, "--raft-snapshot-max") == 0) {
        return parse_num(k, v, 1u << 20, 1ull << 40,
                         &c->raft_limits.snapshot_max);
    } else if (strcmp(k, "--storage") == 0) {
        if (strcmp(v, "uring") == 0) {
            c->storage = SERVER_STORAGE_URING;
        } else if (strcmp(v, "pwrite") == 0) {
            c->storage = SERVER_STORAGE_PWRITE;
        } else if (strcmp(v, "uv") == 0) {
            c->storage = SERVER_STORAGE_UV;
        } else {
            return bad(k, "bad backend \"%s\": want uring, pwrite or uv", v);
        }
    } else if (strcmp(k, "--log-level") == 0) {
        if (log_level_parse(v, &c->log_level) != 0) {
            return bad(k, "bad level \"%s\": want debug, info, warn or error",
                       v);
        }
    } else {
        return bad(k, "unknown flag");
    }
    return 0;
}

/* 0: run; 1: --help printed; -EINVAL: bad flags (message printed). */
static int parse_args(struct server_config *c, int argc, char **argv)
{
    bool seen[N_VALUE_FLAGS] = {false};
    bool seen_bootstrap = false, seen_role = false;
    char key[64];

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = NULL, *eq;
        size_t j;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (strcmp(arg, "--accept-replay-window") == 0) {
            if (c->accept_replay_window) {
                return bad(arg, "given twice");
            }
            c->accept_replay_window = true;
            continue;
        }
        if (strcmp(arg, "--accept-cut-tail") == 0) {
            if (c->accept_cut_tail) {
                return bad(arg, "given twice");
            }
            c->accept_cut_tail = true;
            continue;
        }
        if (strcmp(arg, "--insecure") == 0) {
            if (c->insecure) {
                return bad(arg, "given twice");
            }
            c->insecure = true;
            continue;
        }
        if (strcmp(arg, "--bootstrap") == 0) {
            if (seen_bootstrap) {
                return bad(arg, "given twice");
            }
            seen_bootstrap = true;
            c->bootstrap = true;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr,
                    "onced: unexpected argument \"%s\" (see onced --help)\n",
                    arg);
            return -EINVAL;
        }
        eq = strchr(arg, '=');
        if (eq != NULL) {
            size_t n = (size_t)(eq - arg);
            if (n >= sizeof key) {
                return bad(arg, "unknown flag");
            }
            memcpy(key, arg, n);
            key[n] = '\0';
            val = eq + 1;
        } else {
            snprintf(key, sizeof key, "%s", arg);
        }
        for (j = 0; j < N_VALUE_FLAGS; j++) {
            if (strcmp(key, value_flags[j]) == 0) {
                break;
            }
        }
        if (j == N_VALUE_FLAGS) {
            return bad(key, "unknown flag");
        }
        if (seen[j]) {
            return bad(key, "given twice");
        }
        seen[j] = true;
        if (val == NULL) {
            if (i + 1 >= argc) {
                return bad(key, "needs a value");
            }
            val = argv[++i];
        }
        if (strcmp(key, "--role") == 0) {
            seen_role = true;
        }
        if (apply_flag(c, key, val) != 0) {
            return -EINVAL;
        }
    }
    if (c->data_dir == NULL) {
        return bad("--data-dir", "required");
    }
    if (c->raft_addr == NULL) {
        return bad("--raft-addr", "required");
    }
    if (c->client_addr == NULL) {
        return bad("--client-addr", "required");
    }
    if (strcmp(c->raft_addr, c->client_addr) == 0) {
        return bad("--client-addr", "must differ from --raft-addr (\"%s\")",
                   c->client_addr);
    }
    if (strcmp(c->raft_listen != NULL ? c->raft_listen : c->raft_addr,
               c->client_listen != NULL ? c->client_listen : c->client_addr) ==
        0) {
        return bad("--client-listen", "must differ from --raft-listen");
    }
    if (c->http_addr != NULL &&
        (strcmp(c->http_addr, c->raft_addr) == 0 ||
         strcmp(c->http_addr, c->client_addr) == 0 ||
         (c->raft_listen != NULL &&
          strcmp(c->http_addr, c->raft_listen) == 0) ||
         (c->client_listen != NULL &&
          strcmp(c->http_addr, c->client_listen) == 0))) {
        return bad("--http-addr",
                   "must differ from the Raft and client addresses, "
                   "advertised and listened on (\"%s\")",
                   c->http_addr);
    }
    if (check_tls(c) != 0) {
        return -EINVAL;
    }
    if (c->n_join > 0) {
        /* The same list may be given to every node: this node's own
         * address is dropped (asking itself would never succeed). */
        unsigned kept = 0;

        for (unsigned i = 0; i < c->n_join; i++) {
            if (strcmp(c->join[i], c->client_addr) != 0) {
                memmove(c->join[kept++], c->join[i], sizeof c->join[i]);
            }
        }
        if (kept == 0) {
            return bad("--join",
                       "lists only this node's own --client-addr "
                       "(%s)",
                       c->client_addr);
        }
        c->n_join = kept;
    }
    if (c->bootstrap && c->n_join > 0) {
        return bad("--join", "cannot be used with --bootstrap");
    }
    if (c->restore != NULL && !c->bootstrap) {
        return bad("--restore", "only with --bootstrap (a new cluster)");
    }
    if (c->restore != NULL && c->settings_given) {
        return bad("--restore",
                   "the settings come from the backup: no --max-* flags");
    }
    if (c->restore != NULL && c->storage == SERVER_STORAGE_UV) {
        return bad("--restore", "not with --storage uv");
    }
    if (c->accept_replay_window && c->restore == NULL) {
        return bad("--accept-replay-window", "only with --restore");
    }
    /* A new store (--restore) has no cut to accept, and the uv store
     * keeps none: the flag there would only hide a mistake. */
    if (c->accept_cut_tail && c->restore != NULL) {
        return bad("--accept-cut-tail",
                   "not with --restore (a new store has no cut)");
    }
    if (c->accept_cut_tail && c->storage == SERVER_STORAGE_UV) {
        return bad("--accept-cut-tail",
                   "not with --storage uv (it keeps no cut index)");
    }
    if (seen_role && c->n_join == 0) {
        return bad("--role", "only with --join");
    }
    if (c->raft.heartbeat_ms >= c->raft.election_ms) {
        fprintf(stderr,
                "onced: --heartbeat: %u ms must be below the election "
                "timeout (%u ms) (see onced --help)\n",
                c->raft.heartbeat_ms, c->raft.election_ms);
        return -EINVAL;
    }
    if (fsm_settings_check(&c->settings) != NULL) {
        /* Every field was range-checked with its flag; kept as a guard
         * against the two drifting apart. */
        return bad("--max-window", "settings refused: %s",
                   fsm_settings_check(&c->settings));
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct server s; /* large (the replica); one per process */
    int rv;

    signal(SIGPIPE, SIG_IGN);
    server_config_default(&s.cfg);
    rv = parse_args(&s.cfg, argc, argv);
    if (rv != 0) {
        return rv > 0 ? SERVER_EXIT_OK : SERVER_EXIT_USAGE;
    }
    log_set_level(s.cfg.log_level);
    return node_run(&s);
}
