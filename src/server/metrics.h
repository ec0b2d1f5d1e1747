/* server/metrics.h: onced's metrics (Prometheus text, common/prom.h) and
 * its readiness rule, served by the HTTP listener (http_front.h) as
 * /metrics and /readyz (docs/server.md, "The HTTP listener").
 *
 * Two kinds of figures:
 *   - events, counted where they happen by the hooks below (a claim's
 *     outcome, an answered call and its latency, a batch committed, a
 *     durable write of the store): each is a few additions on a series
 *     pointer made at start;
 *   - state, read when a scrape is written, on the loop: Raft's indexes and
 *     term, the fsm's record and byte counters (kept by every mutation:
 *     no walk of the records; the PENDING records by first-claim tick,
 *     fsm_pending.c), the RPC server's and forwarder's counters.
 *     The per-shard summary reads the 4096 virtual partitions' entry
 *     counts (O(shards), not O(records)).
 *   The tick (metrics_tick, every 50 ms) turns changes it sees into
 *   counters: leader changes, committed configuration changes, snapshots
 *   taken (with their duration).
 *
 * Readiness (metrics_unready): a member (voter or standby in the Raft
 * configuration) of a bootstrapped cluster that knows a leader and whose
 * applied index is at most METRICS_READY_LAG entries behind the leader's
 * commit index. The leader knows its own; a follower takes the one carried
 * by the leader's last AppendEntries (heartbeats included: rio.h,
 * seen_leader_commit), which must have arrived within the election timeout.
 * A node that is not ready and is in no-vote (rio.h) says that first.
 *
 * Ownership: struct metrics lives in struct server; metrics_init makes the
 * registry, metrics_free frees it. The listener is not ours (s->http,
 * http_front.c): a scrape reads its counters when there is one. Loop
 * thread only. */
#ifndef ONCE_SERVER_METRICS_H_
#define ONCE_SERVER_METRICS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/prom.h"
#include "fsm/fsm.h"
#include "rpc/conn.h"

/* Entries a ready node's applied index may trail the leader's commit by:
 * the catch-up bound a joining member must meet to become a voter
 * (docs/design.md §4), so "ready" means what the leader calls caught up. */
#define METRICS_READY_LAG 64

/* Outcomes of a claim (enum fsm_outcome values up to this one). */
#define METRICS_OUTCOME_MAX FSM_FAILED_PRECONDITION
/* RPC statuses counted by name; others count as "OTHER". */
#define METRICS_STATUS_N 9

struct server;

struct metrics
{
    struct prom_registry *reg;
    struct server *s; /* borrowed */

    /* events */
    struct prom_series *claims[2][METRICS_OUTCOME_MAX + 1]; /* [kind-1] */
    struct prom_series *takeovers;
    struct prom_family *requests; /* method, status: series made on use */
    struct prom_series *req_by[RPC_METHOD_LAST + 1][METRICS_STATUS_N];
    struct prom_series *req_dur[RPC_METHOD_LAST + 1];
    struct prom_series *commit_dur, *batch_size;
    struct prom_series *fsync_dur;
    struct prom_series *snap_dur;
    struct prom_series *loop_busy; /* loopwatch's iterations */

    /* state, set at each scrape */
    struct prom_series *term, *commit, *applied, *last_index, *is_leader,
        *leader_known, *leader_commit, *ready, *log_bytes;
    struct prom_series *leader_changes, *config_changes, *voters, *members;
    struct prom_series *no_vote, *no_vote_cut_index, *no_vote_dropped;
    struct prom_series *snaps, *snap_installs, *snap_bytes, *snap_running;
    struct prom_series *loop_busy_max;
    struct prom_series *records, *record_bytes, *backlog, *shard_records,
        *shard_bytes;
    struct prom_series *pending, *pending_age;
    struct prom_series *forwarded, *forward_errors;
    /* readindex.c: lookups read here, ReadIndex calls asked and served,
     * reads given up (UNAVAILABLE) */
    struct prom_series *reads_local, *read_index_asks, *read_index_served,
        *reads_unavailable;
    struct prom_series *conns, *conns_accepted, *conns_refused, *frames_bad,
        *calls_refused;
    struct prom_series *permission_denied;
    struct prom_series *http_tls_refused, *rpc_tls_refused, *http_conns;
    struct prom_series *raft_member_refused;

    /* what the tick saw last */
    bool seen;
    uint64_t last_leader;
    uint64_t last_config_index;
    uint64_t last_snapshots;
};

/* Make the registry and every family. 0, or -ENOMEM / -EINVAL with
 * @errmsg (ERR_MSG_SIZE). */
int metrics_init(struct metrics *m, struct server *s, char *errmsg);
void metrics_free(struct metrics *m);

/* A scrape: read the state figures now, then append every family's text
 * to @b. 0, or prom_write's -ENOSPC (over b->max) or -ENOMEM. */
int metrics_text(struct metrics *m, struct prom_buf *b);

/* The node's tick. */
void metrics_tick(struct metrics *m);

/* A record command's result on the ready leader (@kind: the claim's). */
void metrics_result(struct metrics *m,
                    enum rpc_method method,
                    enum fsm_kind kind,
                    const struct fsm_result *res);

/* What the hooks of node.c pass on: rpc_server_config.answered,
 * replica_hooks.batch, store_log_options.synced. */
void metrics_answered(struct metrics *m,
                      const struct rpc_call *call,
                      enum rpc_status status);
void metrics_batch(struct metrics *m, size_t n, uint64_t ns);
void metrics_synced(struct metrics *m, uint64_t ns);

/* An HTTP request refused for its caller's certificate (httpapi.c, and
 * /metrics here): counted as a refusal (authz_count_denied) and in
 * once_permission_denied_total, like a PERMISSION_DENIED answer. */
void metrics_denied(struct metrics *m);

/* A ClaimBatch item refused for its scope (service_batch.c; authz_check
 * counted the refusal): in once_permission_denied_total, like a
 * PERMISSION_DENIED answer. */
void metrics_item_denied(struct metrics *m);

/* NULL if the node is ready (above), else why not, in @buf (@n bytes). */
const char *metrics_unready(struct server *s, char *buf, size_t n);

#endif /* ONCE_SERVER_METRICS_H_ */
