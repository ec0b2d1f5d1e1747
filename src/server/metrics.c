/* server/metrics.c: the node's metrics and readiness (metrics.h).
 *
 * Every family is registered in metrics_init, and every series that can
 * be known in advance is made there at 0 (claims by kind and outcome, the
 * per-method latency), so a rate() over them starts from a sample, not
 * from nothing. The families' names, help texts and units are the
 * reference docs/server.md's table follows. */
#include "server/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/http.h"
#include "server/authz.h"
#include "server/server.h"

#define NS_PER_S 1e9

static const double latency_bounds[] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10,
};
static const double fsync_bounds[] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
    0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1,
};
static const double batch_bounds[] = {
    1,   2,    4,    8,    16,   32,    64,    128,   256,
    512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
};
static const double snapshot_bounds[] = {
    0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
};
static const double loop_bounds[] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
};
static const double shard_quantiles[] = {0, 0.5, 0.9, 0.99, 1};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const enum rpc_status counted_status[METRICS_STATUS_N] = {
    RPC_STATUS_OK,
    RPC_STATUS_UNKNOWN,
    RPC_STATUS_INVALID_ARGUMENT,
    RPC_STATUS_DEADLINE_EXCEEDED,
    RPC_STATUS_PERMISSION_DENIED,
    RPC_STATUS_RESOURCE_EXHAUSTED,
    RPC_STATUS_FAILED_PRECONDITION,
    RPC_STATUS_UNAVAILABLE,
    RPC_STATUS_WRONG_GROUP, /* and everything else: "OTHER" */
};

/* The claim outcomes the fsm gives a Claim (state-machine.md). */
static const enum fsm_outcome claim_outcomes[] = {
    FSM_ACCEPTED,         FSM_REPLAYED, FSM_DUPLICATE,
    FSM_IN_PROGRESS,      FSM_CONFLICT, FSM_STALE,
    FSM_FUTURE,           FSM_FAILED,   FSM_RESOURCE_EXHAUSTED,
    FSM_INVALID_ARGUMENT,
};

/* --- registration --------------------------------------------------------- */

struct reg
{
    struct metrics *m;
    char *errmsg;
    bool failed;
};

static struct prom_family *fam(struct reg *g,
                               const char *name,
                               enum prom_type type,
                               const char *help,
                               const char *const *labels,
                               unsigned n_labels,
                               const double *bounds,
                               unsigned n_bounds)
{
    struct prom_family_def d = {name,     help,   type,    labels,
                                n_labels, bounds, n_bounds};
    struct prom_family *f;

    if (g->failed) {
        return NULL;
    }
    f = prom_family(g->m->reg, &d, g->errmsg);
    g->failed = f == NULL;
    return f;
}

/* A family without labels and its one series. */
static struct prom_series *one(struct reg *g,
                               const char *name,
                               enum prom_type type,
                               const char *help)
{
    struct prom_series *s =
        prom_series(fam(g, name, type, help, NULL, 0, NULL, 0), NULL);

    if (s == NULL && !g->failed) {
        err_printf(g->errmsg, "%s: out of memory", name);
        g->failed = true;
    }
    return s;
}

static struct prom_series *labelled(struct reg *g,
                                    struct prom_family *f,
                                    const char *const *values)
{
    struct prom_series *s = f != NULL ? prom_series(f, values) : NULL;

    if (s == NULL && !g->failed) {
        err_printf(g->errmsg, "out of memory making a series");
        g->failed = true;
    }
    return s;
}

static struct prom_series *hist(struct reg *g,
                                const char *name,
                                const char *help,
                                const double *bounds,
                                unsigned n)
{
    return labelled(g, fam(g, name, PROM_HISTOGRAM, help, NULL, 0, bounds, n),
                    NULL);
}

static void reg_info(struct reg *g)
{
    static const char *const build_labels[] = {"version"};
    static const char *const store_labels[] = {"backend"};
    const char *version[] = {PACKAGE_VERSION};
    struct server *s = g->m->s;
    const char *backend[] = {s->rep.store != NULL && s->rep.store->name != NULL
                                 ? s->rep.store->name
                                 : "none"};

    prom_set(labelled(g,
                      fam(g, "once_build_info", PROM_GAUGE,
                          "Always 1; the version of this onced as a label.",
                          build_labels, 1, NULL, 0),
                      version),
             1);
    prom_set(labelled(g,
                      fam(g, "once_store_info", PROM_GAUGE,
                          "Always 1; the log store backend chosen at start "
                          "(uring, pwrite or uv) as a label.",
                          store_labels, 1, NULL, 0),
                      backend),
             1);
}

static void reg_claims(struct reg *g)
{
    static const char *const labels[] = {"kind", "outcome"};
    static const char *const kinds[] = {"nonce", "idempotent"};
    struct prom_family *f = fam(
        g, "once_claims_total", PROM_COUNTER,
        "Claims decided while this node was the leader, by kind and outcome "
        "(sum over the nodes for the cluster).",
        labels, 2, NULL, 0);

    for (unsigned k = 0; k < 2; k++) {
        for (size_t i = 0; i < N_OF(claim_outcomes); i++) {
            const char *v[] = {kinds[k], fsm_outcome_name(claim_outcomes[i])};
            g->m->claims[k][claim_outcomes[i]] = labelled(g, f, v);
        }
    }
    g->m->takeovers =
        one(g, "once_lease_takeovers_total", PROM_COUNTER,
            "Idempotent claims ACCEPTED as a takeover (an expired lease or a "
            "released key), decided on this node as the leader.");
}

static void reg_requests(struct reg *g)
{
    static const char *const req_labels[] = {"method", "status"};
    static const char *const dur_labels[] = {"method"};
    struct metrics *m = g->m;
    struct prom_family *dur;

    m->requests = fam(g, "once_requests_total", PROM_COUNTER,
                      "RPC calls answered by this node, by method and status.",
                      req_labels, 2, NULL, 0);
    dur = fam(g, "once_request_duration_seconds", PROM_HISTOGRAM,
              "Time from a call's arrival at this node to its answer, by "
              "method (forwarded calls include the hop to the leader).",
              dur_labels, 1, latency_bounds, N_OF(latency_bounds));
    for (int me = RPC_METHOD_CLAIM; me <= RPC_METHOD_LAST; me++) {
        const char *v[] = {rpc_method_name((enum rpc_method)me)};
        m->req_dur[me] = labelled(g, dur, v);
    }
    m->commit_dur = hist(g, "once_commit_duration_seconds",
                         "Time from proposing a batch to its commit and apply "
                         "on this leader.",
                         latency_bounds, N_OF(latency_bounds));
    m->batch_size = hist(g, "once_batch_commands",
                         "Commands per committed batch (group commit).",
                         batch_bounds, N_OF(batch_bounds));
    m->fsync_dur = hist(g, "once_fsync_duration_seconds",
                        "Durable log writes (the write and its sync) of the "
                        "uring and pwrite stores.",
                        fsync_bounds, N_OF(fsync_bounds));
}

static void reg_raft(struct reg *g)
{
    struct metrics *m = g->m;

    m->term = one(g, "once_raft_term", PROM_GAUGE, "Current Raft term.");
    m->commit = one(g, "once_raft_commit_index", PROM_GAUGE,
                    "Highest log index known committed on this node.");
    m->applied = one(g, "once_raft_applied_index", PROM_GAUGE,
                     "Highest log index applied to the state machine.");
    m->last_index = one(g, "once_raft_last_index", PROM_GAUGE,
                        "Last index of this node's log.");
    m->leader_commit = one(g, "once_raft_leader_commit_index", PROM_GAUGE,
                           "The leader's commit index as this node last "
                           "heard it (its own on the leader).");
    m->is_leader = one(g, "once_raft_is_leader", PROM_GAUGE,
                       "1 if this node is the Raft leader.");
    m->leader_known = one(g, "once_raft_leader_known", PROM_GAUGE,
                          "1 if this node knows a leader.");
    m->ready = one(g, "once_ready", PROM_GAUGE,
                   "1 if /readyz answers 200 (member, leader known, applied "
                   "within 64 entries of the leader's commit).");
    m->leader_changes = one(g, "once_raft_leader_changes_total", PROM_COUNTER,
                            "Changes of the leader this node knows (to none "
                            "included).");
    m->config_changes = one(g, "once_membership_changes_total", PROM_COUNTER,
                            "Raft configuration entries this node has seen "
                            "committed since it started.");
    m->voters = one(g, "once_raft_voters", PROM_GAUGE,
                    "Voters in the Raft configuration.");
    m->members = one(g, "once_members", PROM_GAUGE,
                     "Members in the replicated member directory.");
    m->log_bytes = one(g, "once_raft_log_bytes", PROM_GAUGE,
                       "Bytes of log entries applied since the last snapshot "
                       "(what the snapshot rule weighs).");
    m->no_vote = one(g, "once_raft_no_vote", PROM_GAUGE,
                     "1 while this node neither votes nor campaigns because "
                     "its store cut a torn tail its log does not hold again "
                     "yet (docs/operations.md).");
    m->no_vote_cut_index =
        one(g, "once_raft_no_vote_cut_index", PROM_GAUGE,
            "The cut index a node in no-vote state waits for (0: none).");
    m->no_vote_dropped = one(g, "once_raft_no_vote_dropped_total", PROM_COUNTER,
                             "RequestVote and TimeoutNow messages dropped, "
                             "in or out, in no-vote state.");
}

static void reg_snapshots(struct reg *g)
{
    struct metrics *m = g->m;

    m->snaps = one(g, "once_snapshots_total", PROM_COUNTER,
                   "Snapshots this node took.");
    m->snap_dur = hist(g, "once_snapshot_duration_seconds",
                       "Snapshots taken, from the freeze to the stored file.",
                       snapshot_bounds, N_OF(snapshot_bounds));
    m->snap_bytes = one(g, "once_snapshot_bytes", PROM_GAUGE,
                        "Size of the last snapshot taken or installed.");
    m->snap_installs = one(g, "once_snapshots_installed_total", PROM_COUNTER,
                           "Snapshots received from the leader and "
                           "installed.");
    m->snap_running = one(g, "once_snapshot_in_progress", PROM_GAUGE,
                          "1 while a snapshot this node takes is being "
                          "encoded or written (off the loop).");
}

/* loopwatch's hook: every loop iteration's busy time. */
static void observe_loop(void *arg, uint64_t busy_ns)
{
    struct metrics *m = arg;

    prom_observe(m->loop_busy, (double)busy_ns / NS_PER_S);
}

static void reg_loop(struct reg *g)
{
    struct metrics *m = g->m;

    m->loop_busy = hist(g, "once_loop_busy_seconds",
                        "Event loop iterations by the time they kept the "
                        "loop busy (from one wait for events to the next): "
                        "the node answers nothing meanwhile.",
                        loop_bounds, N_OF(loop_bounds));
    m->loop_busy_max = one(g, "once_loop_busy_max_seconds", PROM_GAUGE,
                           "The longest busy iteration of the event loop "
                           "since the node started.");
    if (m->loop_busy != NULL && m->s->loopwatch.on) {
        m->s->loopwatch.observe = observe_loop;
        m->s->loopwatch.observe_arg = m;
    }
}

static void reg_state(struct reg *g)
{
    struct metrics *m = g->m;

    m->records = one(g, "once_records", PROM_GAUGE,
                     "Live records (counted against max_records).");
    m->record_bytes = one(g, "once_record_bytes", PROM_GAUGE,
                          "Bytes of live records (counted against "
                          "max_bytes).");
    m->backlog = one(g, "once_records_expired_unfreed", PROM_GAUGE,
                     "Expired records budgeted pruning has not freed yet.");
    m->pending = one(g, "once_idempotent_pending", PROM_GAUGE,
                     "Idempotent records PENDING (claimed, neither completed "
                     "nor released).");
    m->pending_age =
        one(g, "once_idempotent_pending_oldest_age_seconds", PROM_GAUGE,
            "Age of the oldest PENDING record, counted from its "
            "first claim (0 when there is none).");
    m->shard_records =
        labelled(g,
                 fam(g, "once_shard_records", PROM_SUMMARY,
                     "Records per virtual partition (4096 shards), the pruning "
                     "backlog included: quantiles over the shards.",
                     NULL, 0, shard_quantiles, N_OF(shard_quantiles)),
                 NULL);
    m->shard_bytes =
        labelled(g,
                 fam(g, "once_shard_bytes", PROM_SUMMARY,
                     "Record bytes per virtual partition (4096 shards), the "
                     "pruning backlog included: quantiles over the shards.",
                     NULL, 0, shard_quantiles, N_OF(shard_quantiles)),
                 NULL);
}

static void reg_rpc(struct reg *g)
{
    struct metrics *m = g->m;

    m->forwarded = one(g, "once_forwarded_calls_total", PROM_COUNTER,
                       "Calls this node forwarded to the leader.");
    m->forward_errors = one(g, "once_forward_errors_total", PROM_COUNTER,
                            "Forwarded calls that failed on the channel to "
                            "the leader.");
    m->reads_local = one(g, "once_reads_local_total", PROM_COUNTER,
                         "Lookups this node answered from its own table "
                         "after a read barrier.");
    m->read_index_asks = one(g, "once_read_index_asks_total", PROM_COUNTER,
                             "ReadIndex calls this node sent to the leader "
                             "(each shared by every read waiting).");
    m->read_index_served = one(g, "once_read_index_served_total", PROM_COUNTER,
                               "ReadIndex calls this node answered as the "
                               "leader.");
    m->reads_unavailable = one(g, "once_reads_unavailable_total", PROM_COUNTER,
                               "Lookups read here that were answered "
                               "UNAVAILABLE (no read index, or not applied, "
                               "in time).");
    m->conns =
        one(g, "once_connections", PROM_GAUGE, "Open client connections.");
    m->conns_accepted = one(g, "once_connections_accepted_total", PROM_COUNTER,
                            "Client connections accepted.");
    m->conns_refused = one(g, "once_connections_refused_total", PROM_COUNTER,
                           "Client connections refused over --max-conns.");
    m->frames_bad = one(g, "once_rejected_frames_total", PROM_COUNTER,
                        "Frames that did not decode (their connection was "
                        "closed).");
    m->calls_refused = one(g, "once_calls_refused_total", PROM_COUNTER,
                           "Calls refused over --max-calls-per-conn.");
    m->permission_denied = one(g, "once_permission_denied_total", PROM_COUNTER,
                               "Calls answered PERMISSION_DENIED (admin "
                               "authorization), counted from every answer, "
                               "and HTTP requests refused for their "
                               "certificate.");
    m->http_tls_refused = one(g, "once_http_tls_refused_total", PROM_COUNTER,
                              "HTTPS connections refused at the handshake: "
                              "not TLS, a certificate that does not verify, "
                              "or not finished in time (logged at most 100 "
                              "times per 10 s).");
    m->http_conns = one(g, "once_http_connections", PROM_GAUGE,
                        "Open connections on the HTTP port (with TLS: "
                        "handshaking ones included), against its limit of "
                        "64.");
    m->rpc_tls_refused = one(g, "once_rpc_tls_refused_total", PROM_COUNTER,
                             "Client-port connections refused at the TLS "
                             "handshake (not TLS, a certificate that does "
                             "not verify, or too slow; logged at most 100 "
                             "times per 10 s).");
    m->raft_member_refused =
        one(g, "once_raft_member_refused_total", PROM_COUNTER,
            "Raft links closed because a member's certificate named a "
            "Raft id or address that is not its own (at the handshake, or "
            "when the directory or the access file changed).");
}

int metrics_init(struct metrics *m, struct server *s, char *errmsg)
{
    struct reg g = {m, errmsg, false};

    memset(m, 0, sizeof *m);
    m->s = s;
    m->reg = prom_new();
    if (m->reg == NULL) {
        err_printf(errmsg, "out of memory");
        return -ENOMEM;
    }
    reg_info(&g);
    reg_claims(&g);
    reg_requests(&g);
    reg_raft(&g);
    reg_snapshots(&g);
    reg_loop(&g);
    reg_state(&g);
    reg_rpc(&g);
    if (g.failed) {
        metrics_free(m);
        return -EINVAL;
    }
    return 0;
}

void metrics_free(struct metrics *m)
{
    if (m->s != NULL && m->s->loopwatch.observe_arg == m) {
        m->s->loopwatch.observe = NULL;
    }
    prom_free(m->reg);
    m->reg = NULL;
}

/* --- events --------------------------------------------------------------- */

void metrics_result(struct metrics *m,
                    enum rpc_method method,
                    enum fsm_kind kind,
                    const struct fsm_result *res)
{
    unsigned k = kind == FSM_KIND_IDEMPOTENT ? 1 : 0;

    if (m->reg == NULL || method != RPC_METHOD_CLAIM ||
        res->outcome > METRICS_OUTCOME_MAX) {
        return;
    }
    prom_inc(m->claims[k][res->outcome]); /* NULL-safe: not a claim's */
    if (k == 1 && res->outcome == FSM_ACCEPTED && !res->retry &&
        res->owner_attempt > 1) {
        prom_inc(m->takeovers);
    }
}

static unsigned status_slot(enum rpc_status st)
{
    for (unsigned i = 0; i + 1 < METRICS_STATUS_N; i++) {
        if (counted_status[i] == st) {
            return i;
        }
    }
    return METRICS_STATUS_N - 1;
}

void metrics_answered(struct metrics *m,
                      const struct rpc_call *call,
                      enum rpc_status status)
{
    unsigned me = (unsigned)call->method, si = status_slot(status);

    if (m->reg == NULL || me > RPC_METHOD_LAST) {
        return;
    }
    if (m->req_by[me][si] == NULL) {
        const char *v[] = {
            rpc_method_name(call->method),
            si == METRICS_STATUS_N - 1 ? "OTHER" : rpc_status_name(status)};
        m->req_by[me][si] = prom_series(m->requests, v);
    }
    prom_inc(m->req_by[me][si]);
    if (status == RPC_STATUS_PERMISSION_DENIED) {
        prom_inc(m->permission_denied); /* whoever refused it */
    }
    prom_observe(m->req_dur[me],
                 (double)(uv_hrtime() - call->received_ns) / NS_PER_S);
}

void metrics_batch(struct metrics *m, size_t n, uint64_t ns)
{
    if (m->reg != NULL) {
        prom_observe(m->commit_dur, (double)ns / NS_PER_S);
        prom_observe(m->batch_size, (double)n);
    }
}

void metrics_synced(struct metrics *m, uint64_t ns)
{
    if (m->reg != NULL) {
        prom_observe(m->fsync_dur, (double)ns / NS_PER_S);
    }
}

void metrics_tick(struct metrics *m)
{
    struct server *s = m->s;
    const struct replica_stats *st = &s->rep.stats;
    uint64_t lid = 0;
    const char *addr = NULL;

    if (m->reg == NULL || !replica_has_raft(&s->rep)) {
        return;
    }
    replica_leader(&s->rep, &lid, &addr);
    if (m->seen && lid != m->last_leader) {
        prom_inc(m->leader_changes);
    }
    if (m->seen && replica_conf_index(&s->rep) != m->last_config_index) {
        prom_inc(m->config_changes);
    }
    if (st->snapshots_taken != m->last_snapshots) {
        /* At most one snapshot is taken at a time, minutes apart: the
         * tick sees each one. */
        prom_observe(m->snap_dur, (double)st->snapshot_last_ms / 1000.0);
    }
    m->seen = true;
    m->last_leader = lid;
    m->last_config_index = replica_conf_index(&s->rep);
    m->last_snapshots = st->snapshots_taken;
}

/* --- readiness ------------------------------------------------------------ */

/* conf_role's answer for a node outside the configuration: no enum
 * fsm_role is 0 (they start at 1). */
#define CONF_ROLE_NONE 0

/* This node's role in the Raft configuration (enum fsm_role), or
 * CONF_ROLE_NONE if it is not in it. */
static int conf_role(const struct server *s)
{
    struct replica_server sv;

    for (unsigned i = 0; i < replica_conf_n(&s->rep); i++) {
        replica_conf_server(&s->rep, i, &sv);
        if (sv.id == s->id) {
            return (int)sv.role;
        }
    }
    return CONF_ROLE_NONE;
}

/* The leader's commit index as this node knows it, or false with why not.
 */
static bool leader_commit(struct server *s,
                          uint64_t lid,
                          uint64_t *out,
                          char *buf,
                          size_t n)
{
    const struct rio *rio = &s->rep.rio;
    uint64_t now, age;

    if (lid == s->id) {
        if (!replica_ready(&s->rep)) {
            snprintf(buf, n,
                     "leader, but its term-start barrier has not "
                     "applied yet");
            return false;
        }
        *out = replica_commit_index(&s->rep);
        return true;
    }
    now = replica_time_ms(&s->rep);
    age = now >= rio->seen_leader_ms ? now - rio->seen_leader_ms : 0;
    if (rio->seen_leader_id != lid || age > s->cfg.raft.election_ms) {
        snprintf(buf, n,
                 "no word from the leader within the election "
                 "timeout");
        return false;
    }
    *out = rio->seen_leader_commit;
    return true;
}

static const char *unready(struct server *s, char *buf, size_t n)
{
    uint64_t lid = 0;
    const char *addr = NULL;
    uint64_t commit = 0, applied;
    int role;

    if (s->stopping || s->raft_closed || !replica_has_raft(&s->rep) ||
        replica_role(&s->rep) == REPLICA_ROLE_UNAVAILABLE) {
        snprintf(buf, n, "not running (starting or stopping)");
        return buf;
    }
    role = conf_role(s);
    if (role != FSM_ROLE_VOTER && role != FSM_ROLE_STANDBY) {
        snprintf(buf, n, "not a member (%s)",
                 role == CONF_ROLE_NONE ? "not in the Raft configuration"
                                        : "a spare still catching up");
        return buf;
    }
    if (!fsm_bootstrapped(s->rep.fsm)) {
        snprintf(buf, n, "the cluster is not bootstrapped yet");
        return buf;
    }
    replica_leader(&s->rep, &lid, &addr);
    if (lid == 0) {
        snprintf(buf, n, "no known leader");
        return buf;
    }
    if (!leader_commit(s, lid, &commit, buf, n)) {
        return buf;
    }
    applied = replica_last_applied(&s->rep);
    if (applied + METRICS_READY_LAG < commit) {
        snprintf(buf, n,
                 "applied index %" PRIu64 " is %" PRIu64
                 " entries behind the leader's commit %" PRIu64 " (bound %d)",
                 (uint64_t)applied, (uint64_t)(commit - applied),
                 (uint64_t)commit, METRICS_READY_LAG);
        return buf;
    }
    return NULL;
}

const char *metrics_unready(struct server *s, char *buf, size_t n)
{
    const char *no = unready(s, buf, n);
    uint64_t cut = rio_novote_index(&s->rep.rio);
    char why[160];

    /* A node in no-vote is not ready for some other reason too (no
     * leader, nothing applied): its own state comes first, being what the
     * operator acts on (docs/operations.md). A ready node may still wait
     * for its cut index: the leader is bringing it. */
    if (no == NULL || cut == 0) {
        return no;
    }
    snprintf(why, sizeof why, "%s", no);
    snprintf(buf, n,
             "this node neither votes nor campaigns until its log holds "
             "index %" PRIu64 " (a torn tail cut at load); %s",
             cut, why);
    return buf;
}

/* --- a scrape --------------------------------------------------------------
 */

/* Quantiles of the shards' entry counts and bytes: a counting pass and two
 * sorts of 4096 numbers, on the loop (about 0.2 ms). */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Publish the quantiles of @n (FSM_N_VPS figures, sorted here) and @sum. */
static void shard_summary(struct prom_series *s, uint64_t *n, double sum)
{
    double q[N_OF(shard_quantiles)];

    qsort(n, FSM_N_VPS, sizeof n[0], cmp_u64);
    for (size_t i = 0; i < N_OF(shard_quantiles); i++) {
        size_t at = (size_t)(shard_quantiles[i] * (FSM_N_VPS - 1) + 0.5);
        q[i] = (double)n[at];
    }
    prom_summary_set(s, q, sum, FSM_N_VPS);
}

static void collect_shards(struct metrics *m, const struct fsm *f)
{
    static uint64_t n[FSM_N_VPS], b[FSM_N_VPS];
    double sum_n = 0, sum_b = 0;

    for (uint32_t v = 0; v < FSM_N_VPS; v++) {
        n[v] = fsm_vp_records(f, v);
        b[v] = fsm_vp_bytes(f, v);
        sum_n += (double)n[v];
        sum_b += (double)b[v];
    }
    shard_summary(m->shard_records, n, sum_n);
    shard_summary(m->shard_bytes, b, sum_b);
}

/* The age in wall time: the first claim's log time was the leader's clock
 * (within max_skew), and an idle cluster's log time does not move. */
static void collect_pending(struct metrics *m, struct fsm *f)
{
    uint64_t first = 0, now = (uint64_t)time(NULL) * 1000;

    prom_set(m->pending, (double)fsm_n_pending(f));
    prom_set(m->pending_age, fsm_pending_oldest_ms(f, &first) && now > first
                                 ? (double)(now - first) / 1000.0
                                 : 0);
}

static void collect_raft(struct metrics *m)
{
    struct server *s = m->s;
    const struct replica *rep = &s->rep;
    struct replica_server sv;
    uint64_t lid = 0;
    const char *addr = NULL;
    uint64_t lc = 0;
    unsigned voters = 0;
    char why[160];

    replica_leader(rep, &lid, &addr);
    prom_set(m->term, (double)replica_term(rep));
    prom_set(m->commit, (double)replica_commit_index(rep));
    prom_set(m->applied, (double)replica_last_applied(rep));
    prom_set(m->last_index, (double)replica_last_index(rep));
    prom_set(m->is_leader, replica_role(rep) == REPLICA_ROLE_LEADER ? 1 : 0);
    prom_set(m->leader_known, lid != 0 ? 1 : 0);
    if (lid != 0 && leader_commit(s, lid, &lc, why, sizeof why)) {
        prom_set(m->leader_commit, (double)lc);
    }
    prom_set(m->ready, metrics_unready(s, why, sizeof why) == NULL ? 1 : 0);
    for (unsigned i = 0; i < replica_conf_n(rep); i++) {
        replica_conf_server(rep, i, &sv);
        voters += sv.role == FSM_ROLE_VOTER;
    }
    prom_set(m->voters, voters);
    prom_set(m->members, (double)fsm_n_members(s->rep.fsm));
    prom_set(m->log_bytes, (double)s->rep.snap.policy.log_bytes);
    {
        uint64_t cut = rio_novote_index(&s->rep.rio);

        prom_set(m->no_vote, cut != 0 ? 1 : 0);
        prom_set(m->no_vote_cut_index, (double)cut);
        prom_set(m->no_vote_dropped, (double)s->rep.rio.stats.novote_dropped);
    }
    prom_set(m->snaps, (double)s->rep.stats.snapshots_taken);
    prom_set(m->snap_installs, (double)s->rep.stats.snapshots_restored);
    prom_set(m->snap_bytes, (double)s->rep.snap.policy.snapshot_bytes);
    prom_set(m->snap_running, s->rep.snap.view != NULL ? 1 : 0);
    prom_set(m->loop_busy_max, (double)s->loopwatch.max_ns / NS_PER_S);
}

static void collect(struct metrics *m)
{
    struct server *s = m->s;
    const struct fsm *f = s->rep.fsm;
    struct rpc_server_stats rs;

    collect_raft(m);
    prom_set(m->records, (double)fsm_n_records(f));
    prom_set(m->record_bytes, (double)fsm_bytes(f));
    prom_set(m->backlog, (double)fsm_prune_backlog(f));
    collect_pending(m, s->rep.fsm);
    collect_shards(m, f);
    prom_set(m->forwarded, (double)s->fwd.forwarded);
    prom_set(m->forward_errors, (double)s->fwd.errors);
    if ((s->up & SERVER_UP_UVIO) && s->uvio.transport.impl != NULL) {
        struct transport_stats ts;

        transport_stats(&s->uvio.transport, &ts);
        prom_set(m->raft_member_refused, (double)ts.bind_refused);
    }
    prom_set(m->reads_local, (double)s->reads.reads);
    prom_set(m->read_index_asks, (double)s->reads.asks);
    prom_set(m->read_index_served, (double)s->reads.served_index);
    prom_set(m->reads_unavailable, (double)s->reads.unavailable);
    if (s->rpc != NULL) {
        rpc_server_stats(s->rpc, &rs);
        prom_set(m->conns, (double)rs.conns_open);
        prom_set(m->conns_accepted, (double)rs.conns_accepted);
        prom_set(m->conns_refused, (double)rs.conns_refused);
        prom_set(m->frames_bad, (double)rs.frames_malformed);
        prom_set(m->calls_refused, (double)rs.calls_busy);
        prom_set(m->rpc_tls_refused, (double)rs.tls_refused);
    }
    if (s->http != NULL) {
        struct http_stats hs;

        http_stats(s->http, &hs);
        prom_set(m->http_tls_refused, (double)hs.tls_refused);
        /* A TLS connection is one of tls_open from its accept, and one of
         * conns_open as well once MHD has it. */
        prom_set(m->http_conns, (double)(hs.tls ? hs.tls_open : hs.conns_open));
    }
}

/* --- the scrape and refusals --------------------------------------------- */

int metrics_text(struct metrics *m, struct prom_buf *b)
{
    collect(m);
    return prom_write(m->reg, b);
}

void metrics_denied(struct metrics *m)
{
    authz_count_denied();
    metrics_item_denied(m);
}

void metrics_item_denied(struct metrics *m)
{
    if (m->reg != NULL) {
        prom_inc(m->permission_denied);
    }
}
