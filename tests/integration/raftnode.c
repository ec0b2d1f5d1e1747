/* tests/integration/raftnode.c: a minimal node driver for process-level
 * tests, until the real onced exists.
 *
 *   raftnode --dir D --id N|auto --raft-addr 127.0.0.1:P --client-port Q
 *            [--peers 1@127.0.0.1:P1,2@127.0.0.1:P2,3@127.0.0.1:P3 |
 *             --bootstrap-self]
 *            [--snapshot-threshold T] [--snapshot-trailing R]
 *
 * --id auto takes the id from D/node-id (identity.h: random, persisted on
 * the first start); ids are then printed as 16 hex digits everywhere
 * (STATUS, ERR NOTLEADER, ID, logs). A directory with D/tombstone (a
 * removed node) is refused with exit code 3, with either form of --id.
 * Configuration of a pristine D: --peers bootstraps those voters,
 * --bootstrap-self a one-voter configuration of this node only; with
 * neither the node starts empty and waits to be added (ADD on the leader).
 *
 * One replica (src/raft/replica.h) over raft_uv with the raft_uv_tcp
 * transport, backend "uv" (the inner raft_uv serves network and storage, D
 * is its directory), auto-recovery off, election 1000 ms, heartbeat 100 ms,
 * small snapshot threshold so snapshots happen during tests. A pristine D is
 * bootstrapped with the --peers configuration (all voters); on restart
 * raft_bootstrap says RAFT_CANTBOOTSTRAP, which is normal. The first ready
 * leader that finds the FSM unbootstrapped submits its Bootstrap command.
 *
 * Client protocol: line-based TCP on 127.0.0.1:Q only. Requests on one
 * connection are answered in order (pipelining is fine):
 *   CLAIM <key> <rid-hex32>  -> OK <OUTCOME> <retry 0|1>
 *                               | ERR NOTLEADER <leader-id> | ERR UNKNOWN
 *                               | ERR <NAME>   (NAME: BUSY, SHUTDOWN, ...)
 *       a NONCE claim of (scope "raftnode", key), ttl 1 h;
 *   LOCAL <key>              -> OK FOUND | OK NOT_FOUND (fsm_lookup of the
 *                               local state, no barrier: tests only);
 *   STATUS                   -> STATUS id=<n> state=<...> term=<t>
 *                               applied=<idx> last=<idx> digest=<hex16>
 *                               leader=<id> [more key=value fields, among
 *                               them voters=<n> (raft configuration),
 *                               retired=<0|1>, log_first=<idx>]
 * Admin commands (membership runs on the ready leader only; ERR NOTLEADER
 * <leader-id> when refused before starting; otherwise the answer comes when
 * the operation finished: OK, or ERR <NAME> <message>; NAME as for CLAIM):
 *   ID                       -> ID <id>
 *   ADD <id> <raft_addr> <client_addr> [voter|standby]   (default voter)
 *   REMOVE <id>              (of the leader itself: ERR NOTLEADER <id>
 *                             <message> after the transfer: repeat it on
 *                             the new leader)
 *   TRANSFER [<id>]          (no id: any up-to-date voter)
 *   SNAPSHOT                 -> OK <snapshot-index> | ERR <NAME> <message>
 * Ids in admin commands are 16 hex digits (identity_parse).
 * Anything else, and lines over LINE_MAX bytes, get "ERR INVALID".
 * Ids are decimal unless --id auto is used, because the crash test passes
 * small ids.
 *
 * SIGTERM/SIGINT: stop cleanly (raft_close, then the uv io and transport,
 * then replica_close) and exit 0. Logs go to stderr. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "fsm/fsm.h"
#include "raft/identity.h"
#include "raft/replica.h"
#include "raft/uvio.h"
#include "raftnode.h"
#include "store/store.h"

/* --- state ---------------------------------------------------------------- */

struct raftnode g;

/* An id as this driver prints it (see the header comment). */
const char *fmt_id(raft_id id, char buf[24])
{
    if (g.id_auto) {
        return identity_format(id, buf);
    }
    snprintf(buf, 24, "%llu", (unsigned long long)id);
    return buf;
}

void logf_(const char *level, const char *fmt, ...)
{
    char msg[600];
    char idb[24];
    struct timespec ts;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr, "%lld.%03ld raftnode id=%s level=%s %s\n",
            (long long)ts.tv_sec, ts.tv_nsec / 1000000, fmt_id(g.id, idb),
            level, msg);
}

/* --- clocks and hooks ----------------------------------------------------- */

static uint64_t clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t wall_ms(void *arg)
{
    (void)arg;
    return clock_ms(CLOCK_REALTIME);
}

static uint64_t mono_ms(void *arg)
{
    (void)arg;
    return clock_ms(CLOCK_MONOTONIC);
}

static void hook_fatal(void *arg, const char *what, int status, const char *msg)
{
    (void)arg;
    logf_("fatal", "stopping: %s failed: %s (%s)", what, raft_strerror(status),
          msg != NULL ? msg : "");
    abort();
}

static void hook_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    logf_(level, "%s", msg);
}

static void shutdown_node(const char *why);

static void hook_retired(void *arg)
{
    char errmsg[ERR_MSG_SIZE];

    (void)arg;
    /* Removed: leave a tombstone so this directory never starts again.
     * Written at once (durably); the stop itself is deferred to the
     * monitor timer, because this hook runs inside raft's apply callback
     * and raft_close from there would change raft's state in the middle of
     * its apply loop. */
    if (identity_tombstone(g.dir, "removed from the cluster (id retired)",
                           errmsg) != 0) {
        logf_("error", "%s", errmsg);
    }
    g.retire_pending = true;
}

/* --- FSM bootstrap and monitoring ----------------------------------------- */

static void boot_cb(struct replica_req *req,
                    int status,
                    const struct fsm_result *res)
{
    (void)req;
    g.boot_inflight = false;
    if (status == 0 && res != NULL) {
        logf_("info", "fsm bootstrap: %s%s%s", fsm_outcome_name(res->outcome),
              res->reason != NULL ? ": " : "",
              res->reason != NULL ? res->reason : "");
    } else {
        logf_("warn", "fsm bootstrap: %s (will retry)",
              replica_strerror(status));
    }
}

static void submit_bootstrap(void)
{
    struct fsm_bootstrap *b = calloc(1, sizeof *b);
    struct fsm_cmd cmd;
    unsigned i;
    int rv;

    if (b == NULL) {
        return;
    }
    if (getrandom(b->cluster_id, sizeof b->cluster_id, 0) !=
            (ssize_t)sizeof b->cluster_id ||
        getrandom(b->hash_key, sizeof b->hash_key, 0) !=
            (ssize_t)sizeof b->hash_key) {
        logf_("warn", "getrandom failed: %s", strerror(errno));
        free(b);
        return;
    }
    b->group_id = 1;
    fsm_settings_default(&b->settings);
    for (i = 0; i < g.n_peers && i < FSM_MEMBERS_MAX; i++) {
        b->members[i].id = g.peers[i].id;
        snprintf(b->members[i].raft_addr, sizeof b->members[i].raft_addr, "%s",
                 g.peers[i].addr);
        /* Client addresses of peers are not known to this driver (but our
         * own is, the only member with --bootstrap-self). */
        if (g.peers[i].id == g.id) {
            snprintf(b->members[i].client_addr,
                     sizeof b->members[i].client_addr, "127.0.0.1:%d",
                     g.client_port);
        } else {
            snprintf(b->members[i].client_addr,
                     sizeof b->members[i].client_addr, "%s", g.peers[i].addr);
        }
        b->members[i].role = FSM_ROLE_VOTER;
    }
    b->n_members = i;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_BOOTSTRAP;
    cmd.u.bootstrap = b;
    memset(&g.boot_req, 0, sizeof g.boot_req);
    rv = replica_submit(&g.rep, &g.boot_req, &cmd, boot_cb);
    free(b);
    if (rv == 0) {
        g.boot_inflight = true;
        logf_("info", "submitted fsm bootstrap");
    } else {
        logf_("warn", "fsm bootstrap submit: %s", replica_strerror(rv));
    }
}

static void on_monitor(uv_timer_t *t)
{
    struct raft *r = g.rep.raft;
    int st;

    (void)t;
    if (g.stopping) {
        return;
    }
    if (g.retire_pending) {
        shutdown_node("this node's id was retired");
        return;
    }
    st = raft_state(r);
    if (st != g.last_state || r->current_term != g.last_term) {
        logf_("info", "state=%s term=%llu applied=%llu last=%llu leader=%llu",
              state_name(st), (unsigned long long)r->current_term,
              (unsigned long long)raft_last_applied(r),
              (unsigned long long)raft_last_index(r),
              (unsigned long long)leader_id());
        g.last_state = st;
        g.last_term = r->current_term;
    }
    if (replica_ready(&g.rep) && !fsm_bootstrapped(g.rep.fsm) &&
        !g.boot_inflight) {
        submit_bootstrap();
    }
}

/* --- shutdown ------------------------------------------------------------- */

static void on_raft_closed(struct raft *r)
{
    (void)r;
    g.raft_closed = true;
    logf_("info", "raft closed");
    uv_close((uv_handle_t *)&g.sigterm, NULL);
    uv_close((uv_handle_t *)&g.sigint, NULL);
}

static void shutdown_node(const char *why)
{
    if (g.stopping) {
        return;
    }
    g.stopping = true;
    logf_("info", "stopping: %s", why);
    uv_timer_stop(&g.monitor);
    uv_close((uv_handle_t *)&g.monitor, NULL);
    uv_close((uv_handle_t *)&g.server, NULL);
    while (g.conns != NULL) {
        conn_close(g.conns);
    }
    replica_shutdown(&g.rep);
    raft_close(g.rep.raft, on_raft_closed);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    shutdown_node(signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* --- arguments ------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: raftnode --dir D --id N|auto --raft-addr 127.0.0.1:P "
            "--client-port Q [--peers 1@127.0.0.1:P1,2@127.0.0.1:P2,... | "
            "--bootstrap-self] "
            "[--snapshot-threshold T] [--snapshot-trailing R]\n");
}

static bool parse_u64(const char *s, unsigned long long max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_peers(char *s)
{
    char *save = NULL, *tok;
    uint64_t id;

    for (tok = strtok_r(s, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *at = strchr(tok, '@');
        if (at == NULL || g.n_peers == PEERS_MAX) {
            return false;
        }
        *at = '\0';
        if (!parse_u64(tok, UINT64_MAX, &id) || id == 0 || strlen(at + 1) < 1 ||
            strlen(at + 1) > FSM_ADDR_MAX) {
            return false;
        }
        g.peers[g.n_peers].id = id;
        snprintf(g.peers[g.n_peers].addr, sizeof g.peers[g.n_peers].addr, "%s",
                 at + 1);
        g.n_peers++;
    }
    return g.n_peers > 0;
}

static bool parse_args(int argc, char **argv)
{
    uint64_t v;
    int i;

    g.snap_threshold = 64;
    g.snap_trailing = 128;
    for (i = 1; i < argc; i += 2) {
        const char *k = argv[i];
        const char *val;

        if (strcmp(k, "--bootstrap-self") == 0) {
            g.bootstrap_self = true;
            i--; /* no value */
            continue;
        }
        if (i + 1 >= argc) {
            return false;
        }
        val = argv[i + 1];
        if (strcmp(k, "--dir") == 0) {
            g.dir = val;
        } else if (strcmp(k, "--id") == 0 && strcmp(val, "auto") == 0) {
            g.id_auto = true;
        } else if (strcmp(k, "--id") == 0) {
            if (!parse_u64(val, UINT64_MAX, &v) || v == 0) {
                return false;
            }
            g.id = v;
        } else if (strcmp(k, "--raft-addr") == 0) {
            g.raft_addr = val;
        } else if (strcmp(k, "--client-port") == 0) {
            if (!parse_u64(val, 65535, &v) || v == 0) {
                return false;
            }
            g.client_port = (int)v;
        } else if (strcmp(k, "--peers") == 0) {
            /* Parse a copy: strtok_r would mangle what ps shows. */
            char copy[PEERS_MAX * (FSM_ADDR_MAX + 24)];
            if (strlen(val) >= sizeof copy) {
                return false;
            }
            memcpy(copy, val, strlen(val) + 1);
            if (!parse_peers(copy)) {
                return false;
            }
        } else if (strcmp(k, "--snapshot-threshold") == 0) {
            if (!parse_u64(val, 1u << 30, &v) || v == 0) {
                return false;
            }
            g.snap_threshold = (unsigned)v;
        } else if (strcmp(k, "--snapshot-trailing") == 0) {
            if (!parse_u64(val, 1u << 30, &v)) {
                return false;
            }
            g.snap_trailing = (unsigned)v;
        } else {
            return false;
        }
    }
    return i == argc && g.dir != NULL && (g.id != 0 || g.id_auto) &&
           !(g.id != 0 && g.id_auto) && g.raft_addr != NULL &&
           strlen(g.raft_addr) <= FSM_ADDR_MAX && g.client_port != 0 &&
           !(g.n_peers > 0 && g.bootstrap_self);
}

/* --- main ----------------------------------------------------------------- */

/* The data directory, the id (a tombstone refuses: EXIT_TOMBSTONE) and the
 * replica over raft_uv, bootstrapped on a pristine directory and started.
 * Returns 0 or the exit code. */
static int start_node(void)
{
    struct raft_configuration conf;
    struct replica_config rc;
    struct replica_clock clock = {NULL, wall_ms, mono_ms};
    struct replica_hooks hooks;
    struct fsm *fsm;
    char errmsg[256];
    unsigned i;
    int rv;

    if (mkdir(g.dir, 0755) != 0 && errno != EEXIST) {
        logf_("error", "mkdir %s: %s", g.dir, strerror(errno));
        return 1;
    }
    g.last_state = -1;
    uv_loop_init(&g.loop);
    /* A removed node's directory never starts again (docs/design.md §4). */
    if (g.id_auto) {
        uint64_t id = 0;
        rv = identity_open(g.dir, &id, errmsg);
        if (rv == 0) {
            g.id = id;
        }
    } else {
        rv = identity_check_tombstone(g.dir, errmsg);
    }
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return rv == IDENTITY_E_TOMBSTONE ? EXIT_TOMBSTONE : 1;
    }
    if (g.bootstrap_self) {
        /* The one voter of the new cluster is this node; the FSM bootstrap
         * (submit_bootstrap) lists it with its client address. */
        g.peers[0].id = g.id;
        snprintf(g.peers[0].addr, sizeof g.peers[0].addr, "%s", g.raft_addr);
        g.n_peers = 1;
    }
    rv = uvio_init(&g.uvio, &g.loop, g.dir, NULL, errmsg);
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return 1;
    }
    fsm = fsm_new();
    if (fsm == NULL) {
        logf_("error", "out of memory");
        return 1;
    }
    memset(&hooks, 0, sizeof hooks);
    hooks.fatal = hook_fatal;
    hooks.log = hook_log;
    hooks.retired = hook_retired;
    rv = replica_init(&g.rep, &g.uvio.io, &g.uvio.store, fsm, g.id, g.raft_addr,
                      &clock, &hooks, errmsg);
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return 1;
    }
    memset(&rc, 0, sizeof rc);
    rc.election_ms = 1000;
    rc.heartbeat_ms = 100;
    rc.snapshot_threshold = g.snap_threshold;
    rc.snapshot_trailing = g.snap_trailing;
    rc.max_catch_up_rounds = 10;
    rc.max_catch_up_round_ms = 5000;
    rv = replica_configure(&g.rep, &rc, errmsg);
    if (rv != 0) {
        logf_("error", "%s", errmsg);
        return 1;
    }
    raft_configuration_init(&conf);
    for (i = 0; i < g.n_peers; i++) {
        rv = raft_configuration_add(&conf, g.peers[i].id, g.peers[i].addr,
                                    RAFT_VOTER);
        if (rv != 0) {
            logf_("error", "bad --peers: %s", raft_strerror(rv));
            return 1;
        }
    }
    /* Without a configuration the node starts empty: it waits to be added
     * by a leader (raft_add, then the log or a snapshot arrives). */
    rv = g.n_peers > 0 ? raft_bootstrap(g.rep.raft, &conf) : RAFT_CANTBOOTSTRAP;
    raft_configuration_close(&conf);
    if (rv == 0) {
        logf_("info", "bootstrapped %u voters in %s", g.n_peers, g.dir);
    } else if (rv != RAFT_CANTBOOTSTRAP) {
        logf_("error", "raft_bootstrap: %s", raft_errmsg(g.rep.raft));
        return 1;
    }
    rv = replica_start(&g.rep, errmsg);
    if (rv != 0) {
        /* raft_uv does not pass the transport's message on (listen). */
        logf_("error", "%s (raft address %s)%s%s", errmsg, g.raft_addr,
              g.uvio.transport.errmsg[0] ? ": " : "", g.uvio.transport.errmsg);
        return 1;
    }
    logf_("info", "started: raft=%s last=%llu applied=%llu", g.raft_addr,
          (unsigned long long)raft_last_index(g.rep.raft),
          (unsigned long long)raft_last_applied(g.rep.raft));
    return 0;
}

/* The client port, signals and the monitor; the loop until the stop.
 * Returns the exit code. */
static int serve(void)
{
    struct sockaddr_in sa;
    int rv;

    uv_tcp_init(&g.loop, &g.server);
    uv_ip4_addr("127.0.0.1", g.client_port, &sa);
    rv = uv_tcp_bind(&g.server, (const struct sockaddr *)&sa, 0);
    if (rv == 0) {
        rv = uv_listen((uv_stream_t *)&g.server, 128, on_connection);
    }
    if (rv != 0) {
        logf_("error", "client port 127.0.0.1:%d: %s", g.client_port,
              uv_strerror(rv));
        /* Stop through the normal path so raft closes its files. */
        uv_signal_init(&g.loop, &g.sigterm);
        uv_signal_init(&g.loop, &g.sigint);
        uv_timer_init(&g.loop, &g.monitor);
        shutdown_node("cannot listen");
        uv_run(&g.loop, UV_RUN_DEFAULT);
        uvio_close(&g.uvio);
        replica_close(&g.rep);
        uv_loop_close(&g.loop);
        return 1;
    }
    uv_signal_init(&g.loop, &g.sigterm);
    uv_signal_start(&g.sigterm, on_signal, SIGTERM);
    uv_signal_init(&g.loop, &g.sigint);
    uv_signal_start(&g.sigint, on_signal, SIGINT);
    uv_timer_init(&g.loop, &g.monitor);
    uv_timer_start(&g.monitor, on_monitor, MONITOR_MS, MONITOR_MS);

    uv_run(&g.loop, UV_RUN_DEFAULT);

    /* raft_close's callback has run and every handle is closed. */
    uvio_close(&g.uvio);
    replica_close(&g.rep);
    rv = uv_loop_close(&g.loop);
    if (rv != 0) {
        logf_("warn", "uv_loop_close: %s", uv_strerror(rv));
    }
    logf_("info", "stopped");
    return 0;
}

int main(int argc, char **argv)
{
    int rv;

    signal(SIGPIPE, SIG_IGN);
    if (!parse_args(argc, argv)) {
        usage();
        return 2;
    }
    rv = start_node();
    if (rv != 0) {
        return rv;
    }
    return serve();
}
