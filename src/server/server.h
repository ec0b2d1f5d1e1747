/* server/server.h: onced, one member of a once cluster (docs/design.md §2, §5,
 * §6; docs/server.md).
 *
 * The files of src/server/ and what each is for are listed in one place,
 * docs/design.md ("Code map"), which scripts/check-codemap keeps complete.
 * This header is struct server, the node: node.c owns it (the start steps
 * with one unwind path), node_tick.c runs it (the tick, signals, the clean
 * stop) and each part
 * keeps its own state in it as the member its comment names (struct admin,
 * struct backups, struct forwarder, struct join, struct metrics, struct
 * node_tls, struct notify, struct loopwatch); main.c fills struct
 * server_config from the flags.
 *
 * Everything runs on one uv loop thread (the Raft layer, the fsm, the RPC
 * server and channels); nothing here is thread-safe. */
#ifndef ONCE_SERVER_SERVER_H_
#define ONCE_SERVER_SERVER_H_

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "common/log.h"
#include "common/spare.h"
#include "fsm/fsm.h"
#include "raft/anchor.h"
#include "raft/replica.h"
#include "raft/uvio.h"
#include "rpc/conn.h"
#include "server/access.h"
#include "server/admin.h"
#include "server/backup.h"
#include "server/forward.h"
#include "server/join.h"
#include "server/loopwatch.h"
#include "server/metrics.h"
#include "server/node_tls.h"
#include "server/notify.h"
#include "server/readindex.h"

#define SERVER_JOIN_MAX 16 /* addresses in --join */

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
    /* Where to listen, when it is not the address above (which the member
     * directory and the Raft configuration hold): NULL, the same. */
    const char *raft_listen;
    const char *client_listen;
    const char *http_addr; /* NULL: no HTTP listener */
    bool bootstrap;
    const char *restore;       /* --restore FILE (with --bootstrap) */
    bool accept_replay_window; /* --accept-replay-window */
    bool accept_cut_tail;      /* --accept-cut-tail (docs/store.md) */
    unsigned n_join;
    char join[SERVER_JOIN_MAX][RPC_ADDR_MAX + 1];
    enum fsm_role role;  /* with --join: VOTER or STANDBY */
    bool settings_given; /* a settings flag was given */
    struct fsm_settings settings;
    struct replica_config raft;
    struct rpc_limits limits;
    unsigned backup_idle_ms; /* --backup-idle-timeout */
    enum log_level log_level;
    const char *access_path; /* --access FILE, or NULL */
    /* TLS (--tls-cert/--tls-key/--tls-ca, --peer-tls-ca): all NULL, or the
     * first three given; peer_ca NULL: the same as ca. */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;
    const char *peer_tls_ca;
    bool insecure; /* --insecure: plaintext allowed off loopback */
    struct rframe_limits raft_limits; /* --raft-message-max, -snapshot-max */
};

/* Defaults of every flag (docs/design.md §5, §6; the fsm's settings). */
void server_config_default(struct server_config *c);

/* What node_run has set up so far (struct server.up): the unwind releases
 * exactly these, in reverse. */
enum {
    SERVER_UP_LOOP = 1u << 0,      /* uv_loop_init */
    SERVER_UP_UVIO = 1u << 1,      /* uvio_init */
    SERVER_UP_STORE = 1u << 2,     /* a log store opened (not "uv") */
    SERVER_UP_FSM = 1u << 3,       /* fsm_new: owned here until replica_init */
    SERVER_UP_REPLICA = 1u << 4,   /* replica_init: owns the fsm and store */
    SERVER_UP_RAFT_OPEN = 1u << 5, /* raft not closed yet */
    SERVER_UP_HANDLES = 1u << 6,   /* signals, tick: stops go by node_stop */
    SERVER_UP_METRICS = 1u << 7,   /* metrics_init: the registry */
};

struct http;

struct server
{
    struct server_config cfg;
    uint64_t id;
    uv_loop_t loop;
    struct uvio uvio;
    struct fsm *fsm; /* until replica_init takes it */
    struct replica rep;
    struct rpc_server *rpc;
    struct rpc_ids ids;
    struct node_tls tls; /* node_tls.c */
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t tick;
    struct loopwatch loopwatch; /* loopwatch.c: the loop's busy time */
    unsigned up;                /* SERVER_UP_* */

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
    enum replica_role last_state;
    uint64_t last_term;
    uint64_t last_leader;
    bool last_ready;
    uint64_t last_dir_sig;
    unsigned last_conf_n;

    /* --access: the identities in force (owned; replaced whole by a
     * SIGHUP reload that parses, never edited). NULL: no file. */
    struct access *access;

    struct forwarder fwd;   /* forward.c */
    struct admin admin;     /* admin.c */
    struct backups backups; /* backup.c */
    struct join join;       /* join.c */
    struct metrics metrics; /* metrics.c */
    struct http *http;      /* http_front.c: --http-addr's listener */
    struct notify notify;   /* notify.c */
    struct readindex reads; /* readindex.c: lookups served here */

    /* The log-time anchor (node_anchor.c, raft/anchor.h): this boot's id
     * ("" if unknown: no anchor) and the pair last written, at loop time
     * anchor_at_ms (0: none written yet). */
    struct anchor anchor;
    uint64_t anchor_at_ms;
    bool anchor_failed; /* the last write failed (logged once) */
    /* The write in flight on the pool (anchor_busy): its pair, and what
     * anchor_write answered (read by the loop after the work's end). */
    bool anchor_busy;
    uv_work_t anchor_work;
    struct anchor anchor_next;
    int anchor_rv;
    char anchor_why[256];

    /* Record commands' ops freed for the next ones (service.c), at most
     * SERVICE_OP_SPARE_MAX; set up by service_init, freed by
     * service_close. */
    struct spare op_spare;
};

/* node.c: run the node until it stops; returns the process exit code. */
int node_run(struct server *s);
/* node_tick.c: start the clean stop (idempotent). */
void node_stop(struct server *s, const char *why, int exit_code);
/* restore.c: --restore with --bootstrap, before raft starts: 0 (restored,
 * or ignored on a directory that holds a node) or an exit code. */
int node_restore(struct server *s);
/* node_tick.c: learn the cluster id once the bootstrap applied. */
void node_sync_ids(struct server *s);
/* node_tick.c: the tick's timer callback (every TICK_MS of node.c) and the
 * signals' callback (SIGTERM, SIGINT: node_stop; SIGHUP: the reload
 * hooks); node.c's step_handles starts both, s in the handles' data. */
void node_tick_cb(uv_timer_t *t);
void node_on_signal(uv_signal_t *h, int signum);
/* node_anchor.c: seed the replica's log time from this boot's anchor file
 * (before replica_start); write the newest pair (from the tick, the first
 * at once and then at most once a minute, on the thread pool). */
void node_anchor_load(struct server *s);
void node_anchor_tick(struct server *s, uint64_t now_ms);

#endif /* ONCE_SERVER_SERVER_H_ */
