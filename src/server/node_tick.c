/* server/node_tick.c: the running node (server.h): the FSM bootstrap, the
 * tick, the stop and the SIGHUP reload; node.c starts the node and
 * unwinds it.
 *
 * The tick (every TICK_MS, started by node.c's step_handles) proposes the
 * FSM bootstrap command when this node is the ready leader and the fsm is
 * not bootstrapped (cluster id and hash key from RAND_bytes, settings from
 * the flags, this node as the only member); stamps the cluster id into
 * answers once it is known; logs leadership and membership changes; stops
 * the node after its retirement; and drives the other modules' ticks.
 *
 * SIGHUP runs the reload hooks (reload_hooks[] below) in order; each
 * either takes the new files or logs why not and keeps what it had.
 * SIGTERM and SIGINT call node_stop.
 *
 * Stop (SIGTERM, SIGINT, retirement, a fatal start error): the RPC server
 * closes, waiting admin calls are answered, forwarding and join channels
 * close, replica_stop (raft closed); the loop ends once every handle is
 * closed, and node_run unwinds what is left (node.c). Loop thread only. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "common/err.h"
#include "raft/identity.h"
#include "server/http_front.h"
#include "server/server.h"

/* --- FSM bootstrap ---------------------------------------------------------
 */

static void boot_cb(struct replica_req *req,
                    int status,
                    const struct fsm_result *res)
{
    struct server *s = req->data;
    char q[128];

    s->boot_inflight = false;
    if (status == 0 && res != NULL) {
        log_kv(res->outcome == FSM_OK ? LOG_INFO : LOG_WARN,
               "fsm bootstrap applied", "outcome=%s%s%s",
               fsm_outcome_name(res->outcome),
               res->reason != NULL ? " reason=" : "",
               res->reason != NULL ? log_quote(res->reason, q, sizeof q) : "");
    } else {
        log_kv(LOG_WARN, "fsm bootstrap failed, will retry", "error=%s",
               log_quote(replica_strerror(status), q, sizeof q));
    }
}

static void submit_bootstrap(struct server *s)
{
    struct fsm_bootstrap *b = calloc(1, sizeof *b);
    struct fsm_cmd cmd;
    char q[128];
    int rv;

    if (b == NULL) {
        return; /* next tick */
    }
    /* Randomness is the proposer's (docs/design.md §3.3): apply only copies it.
     */
    if (RAND_bytes(b->cluster_id, sizeof b->cluster_id) != 1 ||
        RAND_bytes(b->hash_key, sizeof b->hash_key) != 1) {
        log_kv(LOG_ERROR, "RAND_bytes failed: cannot make the cluster id",
               NULL);
        free(b);
        return;
    }
    b->group_id = 1;
    b->settings = s->cfg.settings;
    b->n_members = 1;
    b->members[0].id = s->id;
    snprintf(b->members[0].raft_addr, sizeof b->members[0].raft_addr, "%s",
             s->cfg.raft_addr);
    snprintf(b->members[0].client_addr, sizeof b->members[0].client_addr, "%s",
             s->cfg.client_addr);
    b->members[0].role = FSM_ROLE_VOTER;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = FSM_CMD_BOOTSTRAP;
    cmd.u.bootstrap = b;
    memset(&s->boot_req, 0, sizeof s->boot_req);
    s->boot_req.data = s;
    rv = replica_submit(&s->rep, &s->boot_req, &cmd, boot_cb);
    OPENSSL_cleanse(b->hash_key, sizeof b->hash_key);
    free(b);
    if (rv == 0) {
        s->boot_inflight = true;
        log_kv(LOG_INFO, "proposed the fsm bootstrap (new cluster id)",
               "max_window_ms=%" PRIu64 " max_skew_ms=%" PRIu64
               " max_ttl_ms=%" PRIu64 " max_lease_ms=%" PRIu64
               " max_records=%" PRIu64 " max_bytes=%" PRIu64,
               s->cfg.settings.max_window_ms, s->cfg.settings.max_skew_ms,
               s->cfg.settings.max_ttl_ms, s->cfg.settings.max_lease_ms,
               s->cfg.settings.max_records, s->cfg.settings.max_bytes);
    } else {
        log_kv(LOG_WARN, "fsm bootstrap not proposed", "error=%s",
               log_quote(replica_strerror(rv), q, sizeof q));
    }
}

/* --- the tick --------------------------------------------------------------
 */

static const char *state_name(enum replica_role st)
{
    switch (st) {
        case REPLICA_ROLE_LEADER:
            return "leader";
        case REPLICA_ROLE_FOLLOWER:
            return "follower";
        case REPLICA_ROLE_CANDIDATE:
            return "candidate";
        default:
            return "unavailable";
    }
}

static const char *role_name(enum fsm_role r)
{
    switch (r) {
        case FSM_ROLE_VOTER:
            return "voter";
        case FSM_ROLE_STANDBY:
            return "standby";
        case FSM_ROLE_SPARE:
            return "spare";
    }
    return "unknown";
}

static void log_leadership(struct server *s)
{
    enum replica_role st = replica_role(&s->rep);
    uint64_t term = replica_term(&s->rep);
    bool ready = replica_ready(&s->rep);
    uint64_t lid = 0;
    const char *laddr = NULL;
    char lidb[IDENTITY_HEX_LEN + 1];

    replica_leader(&s->rep, &lid, &laddr);
    if (st == s->last_state && term == s->last_term && lid == s->last_leader &&
        ready == s->last_ready) {
        return;
    }
    log_kv(LOG_INFO,
           ready ? "leader ready (term-start barrier applied)"
           : st == REPLICA_ROLE_LEADER ? "became leader"
           : lid != 0                  ? "following a leader"
                                       : "no known leader",
           "role=%s term=%llu leader=%s applied=%llu", state_name(st),
           (unsigned long long)term,
           lid != 0 ? identity_format(lid, lidb) : "none",
           (unsigned long long)replica_last_applied(&s->rep));
    s->last_state = st;
    s->last_term = term;
    s->last_leader = lid;
    s->last_ready = ready;
}

static void log_membership(struct server *s)
{
    const struct fsm *f = s->rep.fsm;
    unsigned conf_n = replica_conf_n(&s->rep);
    uint64_t sig = 1469598103934665603ull;
    size_t n = fsm_n_members(f), i;
    char list[FSM_MEMBERS_MAX * 26 + 1], idb[IDENTITY_HEX_LEN + 1];
    size_t o = 0;

    for (i = 0; i < n; i++) {
        const struct fsm_member *m = fsm_member(f, i);
        sig = (sig ^ m->id) * 1099511628211ull;
        sig = (sig ^ (uint64_t)m->role) * 1099511628211ull;
    }
    sig ^= n;
    if (sig == s->last_dir_sig && conf_n == s->last_conf_n) {
        return;
    }
    s->last_dir_sig = sig;
    s->last_conf_n = conf_n;
    list[0] = '\0';
    for (i = 0; i < n && o + 26 < sizeof list; i++) {
        const struct fsm_member *m = fsm_member(f, i);
        int k = snprintf(list + o, sizeof list - o, "%s%s:%s", i ? "," : "",
                         identity_format(m->id, idb), role_name(m->role));
        o += k > 0 ? (size_t)k : 0;
    }
    log_kv(LOG_INFO, "membership", "directory=%zu raft_servers=%u members=%s",
           n, conf_n, n > 0 ? list : "none");
}

/* Stamp the cluster id into answers (and so into the RPC layer's check of
 * pinned requests) as soon as the bootstrap command has applied. Called
 * from the tick and before each request is served, so no request is
 * served by a bootstrapped node that does not yet refuse other clusters. */
void node_sync_ids(struct server *s)
{
    char hex[2 * FSM_CLUSTER_ID_LEN + 1];

    if (s->ids_have_cluster || !fsm_bootstrapped(s->rep.fsm)) {
        return;
    }
    memcpy(s->ids.cluster_id, fsm_cluster_id(s->rep.fsm), RPC_ID_LEN);
    s->ids.has_cluster_id = true;
    s->ids_have_cluster = true;
    rpc_server_set_ids(s->rpc, &s->ids);
    for (size_t i = 0; i < FSM_CLUSTER_ID_LEN; i++) {
        snprintf(hex + 2 * i, 3, "%02x", s->ids.cluster_id[i]);
    }
    log_kv(LOG_INFO, "cluster id known", "cluster_id=%s", hex);
}

void node_tick_cb(uv_timer_t *t)
{
    struct server *s = t->data;

    if (s->stopping) {
        return;
    }
    if (s->retire_pending) {
        node_stop(s, "this node's id was retired", SERVER_EXIT_OK);
        return;
    }
    log_leadership(s);
    log_membership(s);
    if (replica_ready(&s->rep) && !fsm_bootstrapped(s->rep.fsm) &&
        !s->boot_inflight) {
        submit_bootstrap(s);
    }
    node_sync_ids(s);
    forward_tick(&s->fwd);
    readindex_tick(&s->reads);
    metrics_tick(&s->metrics);
    admin_tick(s);
    node_tls_tick(s, uv_now(&s->loop));
    notify_tick(&s->notify, s, uv_now(&s->loop));
    node_anchor_tick(s, uv_now(&s->loop));
}

/* --- stop ------------------------------------------------------------------
 */

static void on_raft_closed(void *arg)
{
    struct server *s = arg;

    s->raft_closed = true;
    log_kv(LOG_INFO, "raft closed", NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sighup, NULL);
}

static void on_rpc_closed(void *arg)
{
    struct server *s = arg;

    s->rpc = NULL;
    log_kv(LOG_DEBUG, "rpc server closed", NULL);
}

void node_stop(struct server *s, const char *why, int exit_code)
{
    if (s->stopping) {
        return;
    }
    s->stopping = true;
    s->exit_code = exit_code;
    log_kv(exit_code == 0 ? LOG_INFO : LOG_WARN, "stopping", "reason=%s",
           log_quote(why, (char[128]){0}, 128));
    notify_stopping(&s->notify);
    uv_timer_stop(&s->tick);
    uv_close((uv_handle_t *)&s->tick, NULL);
    loopwatch_close(&s->loopwatch);
    join_stop(&s->join);
    http_front_close(s);
    /* Before the Raft layer closes: answer the admin operations still
     * waiting (outcome unknown) and close every forwarding channel. */
    admin_shutdown(&s->admin);
    backups_close(&s->backups); /* encodings end with their work */
    readindex_close(&s->reads); /* before its channel's callbacks run */
    forward_close(&s->fwd);
    if (s->rpc != NULL) {
        rpc_server_close(s->rpc, on_rpc_closed, s);
    }
    replica_stop(&s->rep, on_raft_closed, s);
}

/* --access: read the file again; a file that does not parse is refused
 * and the identities in force stay: a typo in an edit must neither lock
 * every caller out nor let anyone in. Established connections are judged
 * by the new file from their next call on. */
static int reload_access(struct server *s, char *errmsg)
{
    struct access *a;
    int rv;

    if (s->cfg.access_path == NULL) {
        err_printf(errmsg, "no --access: nothing to reload");
        return 0;
    }
    rv = access_load(s->cfg.access_path, &a, errmsg);
    if (rv != 0) {
        return rv;
    }
    access_free(s->access);
    s->access = a;
    err_printf(errmsg, "identities=%zu file=%s", a->n, s->cfg.access_path);
    return 0;
}

/* What SIGHUP reloads, in order. Each hook takes its new files whole or
 * returns an error (its message says why) and keeps what it had. */
static const struct
{
    const char *what;
    int (*reload)(struct server *s, char *errmsg);
} reload_hooks[] = {
    {"certificates", node_tls_reload},
    {"access", reload_access},
};

static void node_reload(struct server *s)
{
    for (size_t i = 0; i < sizeof reload_hooks / sizeof reload_hooks[0]; i++) {
        char errmsg[ERR_MSG_SIZE], q[300];

        errmsg[0] = '\0';
        if (reload_hooks[i].reload(s, errmsg) != 0) {
            log_kv(LOG_WARN, "SIGHUP: reload refused, keeping the old one",
                   "what=%s error=%s", reload_hooks[i].what,
                   log_quote(errmsg, q, sizeof q));
        } else {
            log_kv(LOG_INFO, "SIGHUP: reloaded", "what=%s detail=%s",
                   reload_hooks[i].what, log_quote(errmsg, q, sizeof q));
        }
    }
}

void node_on_signal(uv_signal_t *h, int signum)
{
    if (signum == SIGHUP) {
        node_reload(h->data);
        return;
    }
    node_stop(h->data, signum == SIGTERM ? "SIGTERM" : "SIGINT",
              SERVER_EXIT_OK);
}
