/* server/node.c: the life of one onced node (server.h).
 *
 * Start: the steps of start_steps[] below, in order, each recording what
 * it set up in s->up:
 *   1. the data directory (made if missing) and the node's id: random
 *      64-bit, made on the first start and kept in DIR/node-id; a directory
 *      with DIR/tombstone (a removed node) refuses to start;
 *   2. the TLS contexts (node_tls.h); the uv loop; uvio (raft_uv over
 *      once's own transport: TCP or TLS, bounded messages); the
 *      store chosen by --storage (open_store: "uring" or "pwrite" in
 *      DIR/log, or raft_uv's own "uv"); the fsm and the replica (guards,
 *      adapter, pipeline) over them; the raft settings;
 *   3. --bootstrap on a pristine directory bootstraps a one-voter
 *      configuration of this node (replica_bootstrap says when the
 *      directory already holds a node: logged and ignored);
 *      replica_start;
 *   4. the metrics registry; signals and the tick; the RPC server on the
 *      client address (service.c); with --http-addr the HTTP listener
 *      (http_front.c);
 *   5. with --join and an empty Raft configuration, Admin.MembersAdd of
 *      this node on the listed members until one answers (join.c).
 * A failing step logs why; node_unwind then releases exactly what exists
 * (raft closed through the loop, or the store alone, uvio, the replica or
 * the fsm, the loop), so a failed start leaks nothing.
 *
 * Then the node runs (node_tick.c): the tick every TICK_MS, the FSM
 * bootstrap, SIGHUP's reload, and node_stop; the loop ends once every
 * handle is closed; then node_unwind: uvio_close, replica_close,
 * uv_loop_close. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "common/err.h"
#include "common/path.h"
#include "raft/heap.h"
#include "raft/identity.h"
#include "server/authz.h"
#include "server/http_front.h"
#include "server/server.h"
#include "server/service.h"
#include "store/store_log.h"

#define TICK_MS 50

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

static enum log_level level_of(const char *level)
{
    enum log_level l;

    return level != NULL && log_level_parse(level, &l) == 0 ? l : LOG_ERROR;
}

static void hook_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    log_kv(level_of(level), msg, "component=raft");
}

static void store_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    log_kv(level_of(level), msg, "component=store");
}

/* The hooks that feed metrics.c (their @arg is the server). */
static void store_synced(void *arg, uint64_t ns, size_t bytes)
{
    (void)bytes;
    metrics_synced(&((struct server *)arg)->metrics, ns);
}

static void hook_batch(void *arg, size_t n, uint64_t ns)
{
    metrics_batch(&((struct server *)arg)->metrics, n, ns);
}

static void rpc_answered(void *arg,
                         const struct rpc_call *call,
                         enum rpc_status status)
{
    metrics_answered(&((struct server *)arg)->metrics, call, status);
}

/* Whether DIR/@name exists: 1 or 0, or -ENAMETOOLONG with @errmsg. */
static int file_exists(const char *dir, const char *name, char *errmsg)
{
    char p[4200];
    struct stat st;

    if (path_join(p, sizeof p, dir, name) != 0) {
        err_printf(errmsg, "data directory path too long: %.64s...", dir);
        return -ENAMETOOLONG;
    }
    return stat(p, &st) == 0;
}

static const char *storage_name(enum server_storage st)
{
    switch (st) {
        case SERVER_STORAGE_URING:
            return "uring";
        case SERVER_STORAGE_PWRITE:
            return "pwrite";
        case SERVER_STORAGE_UV:
            return "uv";
        case SERVER_STORAGE_AUTO:
            break;
    }
    return "auto";
}

/* --storage: replace uvio's "uv" pass-through with the log store in
 * DIR/log, unless uv is asked for or the directory already holds a
 * raft_uv log. The two formats never mix: a directory holding one is
 * refused by the other, so switching backends can never start a node on
 * an empty log that once acknowledged entries. *@opened: a log store was
 * opened (it must be closed if raft never takes it). Returns 0, -EINVAL
 * (the directory's format and the flag disagree), -ENAMETOOLONG (the
 * directory's path leaves no room for its files' names) or store_log_init's
 * code as a negative value, with @errmsg set. */
static int open_store(struct server *s, bool *opened, char *errmsg)
{
    const char *dir = s->cfg.data_dir;
    enum server_storage want = s->cfg.storage;
    int meta1 = file_exists(dir, "metadata1", errmsg);
    int meta2 = file_exists(dir, "metadata2", errmsg);
    int ours = file_exists(dir, "log/meta-a", errmsg);
    bool uv_log = meta1 > 0 || meta2 > 0;
    bool our_log = ours > 0;
    struct store_log_options o;
    char path[4200];
    int rv;

    if (meta1 < 0 || meta2 < 0 || ours < 0) {
        return -ENAMETOOLONG;
    }
    if (uv_log && our_log) {
        err_printf(errmsg,
                   "the data directory holds both a raft_uv log and DIR/log");
        return -EINVAL;
    }
    if (want == SERVER_STORAGE_UV && our_log) {
        err_printf(errmsg,
                   "--storage=uv, but the data directory holds a uring/pwrite "
                   "log (DIR/log): start with --storage=uring or pwrite");
        return -EINVAL;
    }
    if (want != SERVER_STORAGE_UV && want != SERVER_STORAGE_AUTO && uv_log) {
        err_printf(errmsg,
                   "--storage=%s, but the data directory holds a raft_uv log: "
                   "start with --storage=uv",
                   storage_name(want));
        return -EINVAL;
    }
    if (want == SERVER_STORAGE_UV || uv_log) {
        log_kv(LOG_INFO, "storage", "backend=uv reason=%s",
               want == SERVER_STORAGE_UV ? "flag" : "existing-raft_uv-log");
        if (s->cfg.accept_cut_tail) {
            log_kv(LOG_INFO,
                   "accept-cut-tail: nothing to do: the uv store keeps no "
                   "cut index",
                   "component=store");
        }
        return 0;
    }
    if (path_join(path, sizeof path, dir, "log") != 0) {
        err_printf(errmsg, "data directory path too long: %.64s...", dir);
        return -ENAMETOOLONG;
    }
    memset(&o, 0, sizeof o);
    o.engine = want == SERVER_STORAGE_URING    ? STORE_ENGINE_URING
               : want == SERVER_STORAGE_PWRITE ? STORE_ENGINE_PWRITE
                                               : STORE_ENGINE_AUTO;
    o.log = store_log;
    o.synced = store_synced;
    o.log_arg = s;
    o.accept_cut_tail = s->cfg.accept_cut_tail;
    /* A measurement switch, not an option (docs/store.md): uring with a
     * buffered write + linked fsync even where O_DIRECT works, to compare
     * the two in a whole cluster. */
    {
        const char *nd = getenv("ONCE_STORE_NO_DIRECT");
        o.no_direct = nd != NULL && strcmp(nd, "1") == 0;
    }
    rv = store_log_init(&s->uvio.store, &s->loop, path, &o, errmsg);
    if (rv != 0) {
        return rv < 0 ? rv : -EIO; /* a RAFT_* code from the store */
    }
    *opened = true;
    log_kv(LOG_INFO, "storage", "backend=%s reason=%s dir=%s",
           s->uvio.store.name, want == SERVER_STORAGE_AUTO ? "default" : "flag",
           log_quote(path, (char[300]){0}, 300));
    return 0;
}

/* Storage failed or an entry of a newer schema arrived (G4, docs/design.md
 * §3.3): fail-stop, never serve on. */
static void hook_fatal(void *arg, const char *what, int status, const char *msg)
{
    char q[300];

    (void)arg;
    log_kv(LOG_ERROR, "fatal: stopping at once", "what=%s status=%s detail=%s",
           log_quote(what, (char[64]){0}, 64),
           log_quote(replica_io_strerror(status), (char[64]){0}, 64),
           log_quote(msg != NULL ? msg : "", q, sizeof q));
    fflush(stderr);
    _exit(SERVER_EXIT_FAIL);
}

static void hook_retired(void *arg)
{
    struct server *s = arg;
    char errmsg[ERR_MSG_SIZE];

    /* Written now (durably) so the directory never starts again; the stop
     * itself waits for the tick, because this runs inside raft's apply (or
     * raft_start) and raft_close from here would change raft's state in the
     * middle of its loop. */
    if (identity_tombstone(s->cfg.data_dir,
                           "removed from the cluster (id retired)",
                           errmsg) != 0) {
        log_kv(LOG_ERROR, "cannot write the tombstone", "error=%s",
               log_quote(errmsg, (char[300]){0}, 300));
    }
    log_kv(LOG_WARN,
           "this node was removed from the cluster: tombstone "
           "written, stopping",
           NULL);
    s->retire_pending = true;
}

static void rpc_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    log_kv(level_of(level), msg, "component=rpc");
}

/* --- start steps -----------------------------------------------------------
 *
 * Each step sets up one thing and records it in s->up; it returns 0, or
 * the process exit code (SERVER_EXIT_*) after logging why. node_run runs
 * them in order and, at the first failure or after the loop ended, calls
 * node_unwind, which releases exactly what s->up says exists. */

static int step_identity(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], idb[IDENTITY_HEX_LEN + 1], q[300];
    int rv;

    s->last_state = -1;
    if (mkdir(s->cfg.data_dir, 0700) != 0 && errno != EEXIST) {
        log_kv(LOG_ERROR, "cannot make the data directory", "dir=%s error=%s",
               log_quote(s->cfg.data_dir, q, sizeof q),
               log_quote(strerror(errno), (char[80]){0}, 80));
        return SERVER_EXIT_FAIL;
    }
    rv = identity_open(s->cfg.data_dir, &s->id, errmsg);
    if (rv != 0) {
        log_kv(LOG_ERROR,
               rv == IDENTITY_E_TOMBSTONE
                   ? "refusing to start: this data directory belongs to a "
                     "node that was removed from its cluster"
                   : "refusing to start: node identity",
               "error=%s", log_quote(errmsg, q, sizeof q));
        return rv == IDENTITY_E_TOMBSTONE ? SERVER_EXIT_TOMBSTONE
                                          : SERVER_EXIT_FAIL;
    }
    log_set_node(s->id);
    log_kv(LOG_INFO, "starting", "id=%s raft_addr=%s client_addr=%s dir=%s",
           identity_format(s->id, idb), s->cfg.raft_addr, s->cfg.client_addr,
           log_quote(s->cfg.data_dir, q, sizeof q));
    if (s->cfg.settings_given && !s->cfg.bootstrap) {
        log_kv(LOG_WARN,
               "cluster settings flags only matter when this node proposes "
               "the fsm bootstrap (--bootstrap)",
               NULL);
    }
    return 0;
}

/* --access: read once before anything listens, so a node never serves a
 * moment without the identities it was given. */
static int step_access(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];

    if (s->cfg.access_path == NULL) {
        return 0;
    }
    if (access_load(s->cfg.access_path, &s->access, errmsg) != 0) {
        log_kv(LOG_ERROR, "refusing to start: access file", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_FAIL;
    }
    log_kv(LOG_INFO, "access file", "identities=%zu file=%s", s->access->n,
           log_quote(s->cfg.access_path, q, sizeof q));
    return 0;
}

/* The member hook of both ports (node_tls.h): a peer is a member when the
 * first identity of the access file its certificate matches has the role
 * member. */
static int access_member(void *arg, X509 *cert, char *why)
{
    struct server *s = arg;

    return authz_member_check(s->access, cert, why);
}

static int step_loop(struct server *s)
{
    if (uv_loop_init(&s->loop) != 0) {
        log_kv(LOG_ERROR, "uv_loop_init failed", NULL);
        return SERVER_EXIT_FAIL;
    }
    s->up |= SERVER_UP_LOOP;
    if (heap_bg_start() != 0) {
        /* Only the loop's time is lost: large frees happen where called. */
        log_kv(LOG_WARN, "snapshot buffers freed on the event loop", NULL);
    }
    if (loopwatch_init(&s->loopwatch, &s->loop) != 0) {
        /* Only the figure is lost (libuv without idle-time metrics). */
        log_kv(LOG_WARN, "event loop busy time not measured", NULL);
    }
    return 0;
}

static void transport_log(void *arg, const char *level, const char *msg)
{
    (void)arg;
    log_kv(level_of(level), msg, "component=raft-transport");
}

static int step_tls(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];

    if (node_tls_init(s, errmsg) != 0) {
        log_kv(LOG_ERROR, "refusing to start: TLS", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_FAIL;
    }
    if (s->tls.on && s->access == NULL) {
        /* With TLS every caller is judged by the access file: without one
         * no certificate has a role, not even a member's. */
        log_kv(LOG_ERROR,
               "refusing to start: TLS needs --access FILE (the roles of "
               "the certificates)",
               NULL);
        return SERVER_EXIT_FAIL;
    }
    if (s->tls.on) {
        s->tls.member_check = access_member;
        s->tls.member_arg = s;
        log_kv(LOG_INFO, "TLS on both ports", "cert=%s ca=%s peer_ca=%s",
               s->cfg.tls_cert, s->cfg.tls_ca, s->tls.peer_ca);
    } else if (s->access != NULL) {
        log_kv(LOG_WARN,
               "without TLS callers have no identities: every caller is "
               "admin and the access file is not applied",
               NULL);
    }
    node_tls_tick(s, mono_ms(NULL));
    return 0;
}

static int step_uvio(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];
    struct transport_config net;

    memset(&net, 0, sizeof net);
    if (s->tls.on) {
        net.server = &s->tls.raft_in;
        net.client = &s->tls.raft_out;
        net.member = node_tls_member;
        net.bind = node_tls_bind;
    }
    net.arg = s;
    net.limits = s->cfg.raft_limits;
    net.listen = s->cfg.raft_listen;
    net.log = transport_log;
    /* A link that delivered nothing for two election timeouts has already
     * cost an election (followers time out in [T, 2T)): closing it costs
     * only a redial. The floor leaves TCP a few retransmissions (RTO is at
     * least 200 ms) with short election timeouts. */
    net.user_timeout_ms = 2 * s->cfg.raft.election_ms;
    if (net.user_timeout_ms < TRANSPORT_USER_TIMEOUT_MIN_MS) {
        net.user_timeout_ms = TRANSPORT_USER_TIMEOUT_MIN_MS;
    }
    if (uvio_init(&s->uvio, &s->loop, s->cfg.data_dir, &net, errmsg) != 0) {
        log_kv(LOG_ERROR, "cannot set up raft io", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_FAIL;
    }
    s->up |= SERVER_UP_UVIO;
    return 0;
}

static int step_store(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];
    bool opened = false;

    if (open_store(s, &opened, errmsg) != 0) {
        log_kv(LOG_ERROR, "refusing to start: storage", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_FAIL;
    }
    if (opened) {
        s->up |= SERVER_UP_STORE;
    }
    return 0;
}

static int step_replica(struct server *s)
{
    struct replica_clock clock = {NULL, wall_ms, mono_ms};
    struct replica_hooks hooks;
    char errmsg[ERR_MSG_SIZE], q[300];

    s->fsm = fsm_new();
    if (s->fsm == NULL) {
        log_kv(LOG_ERROR, "out of memory", NULL);
        return SERVER_EXIT_FAIL;
    }
    s->up |= SERVER_UP_FSM;
    memset(&hooks, 0, sizeof hooks);
    hooks.arg = s;
    hooks.fatal = hook_fatal;
    hooks.log = hook_log;
    hooks.retired = hook_retired;
    hooks.batch = hook_batch;
    if (replica_init(&s->rep, &s->uvio.io, &s->uvio.store, s->fsm, s->id,
                     s->cfg.raft_addr, &clock, &hooks, errmsg) != 0) {
        log_kv(LOG_ERROR, "cannot set up raft", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_FAIL;
    }
    /* The replica owns the fsm now, and raft_close closes the store. */
    s->fsm = NULL;
    s->up &= ~(unsigned)(SERVER_UP_FSM | SERVER_UP_STORE);
    s->up |= SERVER_UP_REPLICA | SERVER_UP_RAFT_OPEN;
    return 0;
}

static int step_configure(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];

    if (replica_configure(&s->rep, &s->cfg.raft, errmsg) != 0) {
        log_kv(LOG_ERROR, "bad raft settings", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_USAGE;
    }
    return 0;
}

/* --bootstrap on a pristine directory: a one-voter configuration of this
 * node; a directory that already holds a node ignores it. */
static int step_bootstrap(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];
    bool existed;
    int rv;

    if (!s->cfg.bootstrap) {
        return 0;
    }
    if (s->cfg.restore != NULL) {
        return node_restore(s); /* restore.c: a first snapshot, no entry */
    }
    rv = replica_bootstrap(&s->rep, &existed, errmsg);
    if (rv == 0 && !existed) {
        log_kv(LOG_INFO, "bootstrapped a new one-voter configuration", NULL);
    } else if (rv == 0) {
        log_kv(LOG_INFO,
               "--bootstrap ignored: the data directory already holds a "
               "node",
               NULL);
    } else {
        log_kv(LOG_ERROR, "raft_bootstrap failed", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_FAIL;
    }
    return 0;
}

static void on_raft_closed_early(void *arg)
{
    (void)arg;
}

/* Before the handles exist: raft closes its io (files, sockets, the store)
 * through the loop. */
static void close_raft_early(struct server *s)
{
    replica_stop(&s->rep, on_raft_closed_early, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    s->up &= ~(unsigned)SERVER_UP_RAFT_OPEN;
}

/* Why the Raft address cannot be listened on, if that is the reason raft
 * failed to start: raft_uv's transport does not pass its message on. */
static const char *probe_raft_addr(const char *addr, char *buf, size_t cap)
{
    struct sockaddr_in sa;
    uv_loop_t loop;
    uv_tcp_t tcp;
    int rv;

    snprintf(buf, cap, "%s", "");
    if (rpc_addr_parse(addr, &sa) != 0 || uv_loop_init(&loop) != 0) {
        return buf;
    }
    uv_tcp_init(&loop, &tcp);
    rv = uv_tcp_bind(&tcp, (const struct sockaddr *)&sa, 0);
    if (rv == 0) {
        rv = uv_listen((uv_stream_t *)&tcp, 1, NULL);
    }
    if (rv != 0) {
        snprintf(buf, cap, "listen on %s: %s", addr, uv_strerror(rv));
    }
    uv_close((uv_handle_t *)&tcp, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return buf;
}

static int step_raft_start(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], why[sizeof s->uvio.transport.errmsg + 1], q[300];

    node_anchor_load(s); /* before a one-voter start can lead */
    if (replica_start(&s->rep, errmsg) != 0) {
        /* Probe only once raft has closed its own sockets. */
        close_raft_early(s);
        if (s->uvio.transport.errmsg[0] == '\0') {
            probe_raft_addr(s->cfg.raft_listen != NULL ? s->cfg.raft_listen
                                                       : s->cfg.raft_addr,
                            why, sizeof why);
        } else {
            snprintf(why, sizeof why, "%s", s->uvio.transport.errmsg);
        }
        log_kv(LOG_ERROR, "cannot start raft",
               "error=%s raft_addr=%s detail=%s",
               log_quote(errmsg, q, sizeof q), s->cfg.raft_addr,
               log_quote(why, (char[300]){0}, 300));
        return SERVER_EXIT_FAIL;
    }
    log_kv(LOG_INFO, "raft started",
           "last_index=%llu applied=%llu raft_servers=%u no_vote_until=%llu",
           (unsigned long long)replica_last_index(&s->rep),
           (unsigned long long)replica_last_applied(&s->rep),
           replica_conf_n(&s->rep),
           (unsigned long long)rio_novote_index(&s->rep.rio));
    return 0;
}

/* From here every stop goes through node_stop and the loop. */
static int step_handles(struct server *s)
{
    uv_signal_init(&s->loop, &s->sigterm);
    s->sigterm.data = s;
    uv_signal_init(&s->loop, &s->sigint);
    s->sigint.data = s;
    uv_signal_init(&s->loop, &s->sighup);
    s->sighup.data = s;
    uv_timer_init(&s->loop, &s->tick);
    s->tick.data = s;
    forward_init(&s->fwd, &s->loop, &s->cfg.limits,
                 s->tls.on ? &s->tls.out : NULL);
    readindex_init(&s->reads, s);
    backups_init(&s->backups, s);
    s->up |= SERVER_UP_HANDLES;
    return 0;
}

static int step_rpc(struct server *s)
{
    struct rpc_server_config rc;
    char errmsg[ERR_MSG_SIZE], q[300];

    if (RAND_bytes(s->ids.boot_id, sizeof s->ids.boot_id) != 1) {
        log_kv(LOG_ERROR, "RAND_bytes failed: no boot id", NULL);
        node_stop(s, "no randomness", SERVER_EXIT_FAIL);
        return SERVER_EXIT_FAIL;
    }
    s->ids.node_id = s->id;
    s->ids.has_cluster_id = false;
    service_init(s);
    memset(&rc, 0, sizeof rc);
    rc.addr = s->cfg.client_listen != NULL ? s->cfg.client_listen
                                           : s->cfg.client_addr;
    rc.limits = s->cfg.limits;
    rc.serve = service_serve;
    rc.arg = s;
    rc.ids = s->ids;
    rc.log = rpc_log;
    rc.answered = rpc_answered;
    if (s->tls.on) {
        rc.tls = &s->tls.client_port;
        rc.peer_member = node_tls_peer_member;
    }
    if (rpc_server_start(&s->rpc, &s->loop, &rc, errmsg) != 0) {
        s->rpc = NULL;
        log_kv(LOG_ERROR, "cannot serve the client address",
               "client_addr=%s error=%s", s->cfg.client_addr,
               log_quote(errmsg, q, sizeof q));
        node_stop(s, "cannot listen", SERVER_EXIT_FAIL);
        return SERVER_EXIT_FAIL;
    }
    uv_signal_start(&s->sigterm, node_on_signal, SIGTERM);
    uv_signal_start(&s->sigint, node_on_signal, SIGINT);
    uv_signal_start(&s->sighup, node_on_signal, SIGHUP);
    notify_init(&s->notify);
    uv_timer_start(&s->tick, node_tick_cb, TICK_MS, TICK_MS);
    log_kv(LOG_INFO, "serving", "client_addr=%s listen=%s", s->cfg.client_addr,
           rc.addr);
    return 0;
}

/* The metrics registry (after the store is chosen: its name is a label). */
static int step_metrics(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];

    if (metrics_init(&s->metrics, s, errmsg) != 0) {
        log_kv(LOG_ERROR, "cannot set up metrics", "error=%s",
               log_quote(errmsg, q, sizeof q));
        return SERVER_EXIT_FAIL;
    }
    s->up |= SERVER_UP_METRICS;
    return 0;
}

/* --http-addr: /metrics, /healthz, /readyz and /v1 on the loop
 * (http_front.h). */
static int step_http(struct server *s)
{
    char errmsg[ERR_MSG_SIZE], q[300];

    if (s->cfg.http_addr == NULL) {
        return 0;
    }
    if (http_front_start(s, s->cfg.http_addr, errmsg) != 0) {
        log_kv(LOG_ERROR, "cannot serve the HTTP address",
               "http_addr=%s error=%s", s->cfg.http_addr,
               log_quote(errmsg, q, sizeof q));
        node_stop(s, "cannot listen", SERVER_EXIT_FAIL);
        return SERVER_EXIT_FAIL;
    }
    log_kv(LOG_INFO, "serving http", "http_addr=%s", s->cfg.http_addr);
    return 0;
}

/* --join with an empty configuration, or a hint how to add this node. */
static int step_join(struct server *s)
{
    char idb[IDENTITY_HEX_LEN + 1];

    if (s->retire_pending) {
        /* Retired while loading (a snapshot carried it): the tick stops. */
    } else if (s->cfg.n_join > 0) {
        if (replica_conf_n(&s->rep) > 0) {
            log_kv(LOG_INFO,
                   "--join ignored: this node is already in a configuration",
                   NULL);
        } else {
            join_start(&s->join, s);
        }
    } else if (replica_conf_n(&s->rep) == 0) {
        log_kv(LOG_WARN,
               "empty configuration: waiting to be added (oncectl members "
               "add ID RAFT_ADDR CLIENT_ADDR on the leader)",
               "id=%s", identity_format(s->id, idb));
    }
    return 0;
}

static void on_store_closed_early(struct store *st)
{
    (void)st;
}

/* Release what s->up says exists, in reverse order of the steps; @code is
 * returned. Runs the loop until raft (or the store alone) has closed, so
 * that nothing is left on it for uv_loop_close. */
static int node_unwind(struct server *s, int code)
{
    int rv;

    if (s->up & SERVER_UP_HANDLES) {
        node_stop(s, "start failed", code); /* nothing if already stopping */
        uv_run(&s->loop, UV_RUN_DEFAULT);
        s->up &= ~(unsigned)SERVER_UP_RAFT_OPEN;
    } else if (s->up & SERVER_UP_RAFT_OPEN) {
        close_raft_early(s);
    } else if (s->up & SERVER_UP_STORE) {
        s->uvio.store.ops->close(&s->uvio.store, on_store_closed_early);
        uv_run(&s->loop, UV_RUN_DEFAULT);
    }
    if (s->up & SERVER_UP_UVIO) {
        uvio_close(&s->uvio);
    }
    if (s->up & SERVER_UP_REPLICA) {
        replica_close(&s->rep); /* frees the fsm */
    }
    service_close(s); /* after replica_close: no op is left */
    if (s->up & SERVER_UP_FSM) {
        fsm_free(s->fsm);
        s->fsm = NULL;
    }
    if (s->up & SERVER_UP_METRICS) {
        metrics_free(&s->metrics);
    }
    node_tls_close(&s->tls);
    if (s->up & SERVER_UP_LOOP) {
        loopwatch_close(&s->loopwatch); /* a start that failed early */
        uv_run(&s->loop, UV_RUN_NOWAIT);
        heap_bg_stop(); /* raft is closed: nothing frees through it */
        rv = uv_loop_close(&s->loop);
        if (rv != 0) {
            log_kv(LOG_WARN, "uv_loop_close", "error=%s", uv_err_name(rv));
        }
    }
    access_free(s->access);
    s->access = NULL;
    s->up = 0;
    return code;
}

static const struct
{
    // cppcheck-suppress unusedStructMember ; documentation: each step named
    const char *name; /* for the reader: the order is the table's */
    int (*run)(struct server *s);
} start_steps[] = {
    {"data directory and identity", step_identity},
    {"access file (--access)", step_access},
    {"TLS contexts", step_tls},
    {"uv loop", step_loop},
    {"raft io (raft_uv, our transport)", step_uvio},
    {"log store (--storage)", step_store},
    {"fsm and the Raft layer", step_replica},
    {"metrics registry", step_metrics},
    {"raft settings", step_configure},
    {"--bootstrap", step_bootstrap},
    {"raft start", step_raft_start},
    {"signals and tick", step_handles},
    {"rpc server", step_rpc},
    {"http listener (--http-addr)", step_http},
    {"--join", step_join},
};

int node_run(struct server *s)
{
    int rv;

    for (size_t i = 0; i < sizeof start_steps / sizeof start_steps[0]; i++) {
        rv = start_steps[i].run(s);
        if (rv != 0) {
            return node_unwind(s, rv);
        }
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    rv = node_unwind(s, s->exit_code);
    log_kv(LOG_INFO, "stopped", "exit=%d", rv);
    return rv;
}
