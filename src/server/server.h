/* server/server.h: onced, one member of a once cluster (docs/design.md §2, §5,
 * §6).
 *
 * Pieces:
 *   main.c     flags (docs/design.md §6) into struct server_config, --help;
 *   node.c     the node's life: data directory and id (raft/identity.h),
 *              the Raft layer (raft/replica.h over raft/uvio.h), --bootstrap
 *              and the FSM bootstrap command, --join through Admin.MembersAdd,
 *              the RPC server, a periodic tick (leadership and membership
 *              changes, cluster id on answers, retirement), signals and the
 *              clean stop;
 *   service.c  the RPC methods: validation and conversion (convert.h), the
 *              ready leader's path into the Raft layer, forwarding from a
 *              follower to the leader (one hop), Status;
 *   convert.c  wire messages <-> fsm values;
 *   log.c      logfmt lines on stderr.
 *
 * Everything runs on one uv loop thread (the Raft layer, the fsm, the RPC
 * server and channels); nothing here is thread-safe. */
#ifndef ONCE_SERVER_SERVER_H_
#define ONCE_SERVER_SERVER_H_

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "fsm/fsm.h"
#include "raft/replica.h"
#include "raft/uvio.h"
#include "rpc/conn.h"
#include "server/log.h"

#define SERVER_JOIN_MAX  16 /* addresses in --join */
#define SERVER_DRAIN_MAX 8  /* old forwarding channels still answering */

/* Exit codes of onced. */
enum {
    SERVER_EXIT_OK = 0,    /* clean stop (signal, or this node was removed) */
    SERVER_EXIT_FAIL = 1,  /* could not start, or stopped on an error */
    SERVER_EXIT_USAGE = 2, /* a bad flag */
    SERVER_EXIT_TOMBSTONE = 3, /* the data directory belongs to a removed
                                * node */
};

/* --storage: the log store backend (docs/store.md). */
enum server_storage {
    SERVER_STORAGE_AUTO = 0, /* uring if io_uring works, else pwrite; uv for
                              * a data directory raft_uv already holds */
    SERVER_STORAGE_URING,
    SERVER_STORAGE_PWRITE,
    SERVER_STORAGE_UV,
};

struct server_config
{
    const char *data_dir;
    enum server_storage storage;
    const char *raft_addr;
    const char *client_addr;
    bool bootstrap;
    unsigned n_join;
    char join[SERVER_JOIN_MAX][RPC_ADDR_MAX + 1];
    enum fsm_role role;  /* with --join: VOTER or STANDBY */
    bool settings_given; /* a settings flag was given */
    struct fsm_settings settings;
    struct replica_config raft;
    struct rpc_limits limits;
    enum log_level log_level;
};

/* Defaults of every flag (docs/design.md §5, §6; the fsm's settings). */
void server_config_default(struct server_config *c);

struct service_op;

struct server
{
    struct server_config cfg;
    uint64_t id;
    uv_loop_t loop;
    struct uvio uvio;
    struct replica rep;
    struct rpc_server *rpc;
    struct rpc_ids ids;
    uv_signal_t sigterm, sigint;
    uv_timer_t tick;

    bool stopping;
    bool raft_closed;
    int exit_code;
    bool retire_pending; /* removed: stop from the tick, not from apply */

    /* FSM bootstrap command, proposed by a ready leader that finds the fsm
     * unbootstrapped. */
    bool boot_inflight;
    struct replica_req boot_req;
    bool ids_have_cluster;

    /* What the tick last logged. */
    int last_state;
    uint64_t last_term;
    uint64_t last_leader;
    bool last_ready;
    uint64_t last_dir_sig;
    unsigned last_conf_n;

    /* Forwarding: one channel to the current leader's client address, and
     * the previous ones until their calls are answered. */
    struct rpc_channel *fwd;
    struct rpc_channel *drain[SERVER_DRAIN_MAX];
    unsigned n_drain;
    uint64_t fwd_log_ms; /* rate limit of forwarding error lines */
    unsigned fwd_log_suppressed;

    /* Admin operations waiting for the Raft layer (one of each at most:
     * replica_member and replica_snapshot run one at a time). */
    struct service_op *member_op;
    struct service_op *snap_op;

    /* --join */
    bool join_active;
    bool join_inflight;
    unsigned join_next;  /* index into cfg.join */
    unsigned join_round; /* full passes over the list */
    uint64_t join_backoff_ms;
    struct rpc_channel *join_ch;
    uv_timer_t join_timer;
    bool join_timer_init;
};

/* node.c: run the node until it stops; returns the process exit code. */
int node_run(struct server *s);
/* Start the clean stop (idempotent). */
void node_stop(struct server *s, const char *why, int exit_code);
/* Learn the cluster id once the bootstrap applied (node.c). */
void node_sync_ids(struct server *s);

/* service.c */
void service_serve(void *arg, struct rpc_call *call, struct envelope_view *req);
/* The client address of the current leader into @buf (RPC_ADDR_MAX + 1)
 * and its id in *@id: true if known (from the fsm's member directory, or
 * this node's own flags). */
bool service_leader_addr(struct server *s, uint64_t *id, char *buf);
/* Close forwarding channels whose calls have all been answered. */
void service_tick(struct server *s);
/* Before the Raft layer closes: answer the admin operations still waiting
 * (outcome unknown) and close every forwarding channel. */
void service_shutdown(struct server *s);

#endif /* ONCE_SERVER_SERVER_H_ */
