/* raft/replica.h: one member of a Raft group, safe to stand on: the public
 * API of the Raft layer (src/raft), the one header above it uses.
 *
 * A replica composes, for one struct raft:
 *   - the raft_io decorator with its I/O guards (rio.h);
 *   - the FSM adapter (adapter.c): raft_fsm v3 over struct fsm (snapshots
 *     frozen on the loop, encoded on raft's thread pool); apply never fails
 *     for a business outcome; per-command results reach the leader's
 *     callers; snapshots with G5/G6;
 *   - the proposal pipeline (pipeline.c): at most one proposal in flight
 *     (raft_apply, barrier or configuration change), everything arriving
 *     meanwhile goes into the next batch entry (<= 1 MiB, group commit, and
 *     the workaround for 0.15's commit starvation, B3); G1 term-start
 *     barrier and the "ready" gate; replicated time stamping (ltime.h);
 *     leadership tracking; lookups ride the next barrier; snapshots on
 *     demand;
 *   - membership operations (member.c): add, remove, assign, transfer;
 *   - observers (replica.c): role, term, indexes, the configuration as a
 *     read-only list, the leader's view of its followers, in once's types.
 *
 * The layer is closed (docs/design.md, "Layers and allowed includes";
 * scripts/check-layers): src/server, src/http, src/cli, src/client and
 * src/ingress neither include <raft.h> nor call raft_* nor name a RAFT_*
 * constant, a raft_* type or struct raft's fields; they use the functions
 * below. What the files of src/raft share is replica_int.h. This header
 * still includes <raft.h>, because struct replica is embedded by value
 * (server.h) and holds raft's structs: its fields are private to src/raft
 * except where a comment says "read only".
 *
 * A newer libraft (past 0.17.1, where the 0.15 bugs are fixed and struct
 * raft is no longer public, docs/raft-0.15.md "Upgrading") touches src/raft
 * only: the guards go (guard.c/.h and their calls in rio.c, adapter.c,
 * pipeline.c), the observers in replica.c read the new library's accessors
 * instead of struct raft, the private fields of struct replica follow its
 * types; every prototype below stays. src/store (which implements raft's
 * I/O) and src/bench sit below the layer and follow the new raft_io.
 *
 * The same code runs in a node (over raft_uv, replica_init) and in the
 * raft_fixture tests (replica_adopt). Everything runs on the raft loop
 * thread; nothing here is thread-safe.
 *
 * Outcome semantics for callers (docs/design.md §5): every failure says whether
 * the request was applied. replica_status_applied() is "false" for
 * REPLICA_E_NOTLEADER, _BUSY, _SHUTDOWN, _TOOBIG, _INVALID, _NOMEM,
 * _PRECONDITION and "unknown" for REPLICA_E_UNKNOWN. */
#ifndef ONCE_RAFT_REPLICA_H_
#define ONCE_RAFT_REPLICA_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "common/err.h"
#include "fsm/fsm.h"
#include "raft/ltime.h"
#include "raft/rio.h"
#include "raft/snap_policy.h"

enum { ERR_REPLICA_CODES(ERR_ENUM) }; /* common/err.h */

/* Largest number of requests and bytes queued for the next batches. */
#define REPLICA_QUEUE_MAX       65536
#define REPLICA_QUEUE_BYTES_MAX (64u << 20)

/* err_str(rv) (common/err.h's table), but "ok" for 0. */
const char *replica_strerror(int rv);
/* "false", "unknown", or NULL for 0. */
const char *replica_status_applied(int rv);

/* Clocks are injected so tests can give a leader a wrong wall clock. */
struct replica_clock
{
    void *arg;
    uint64_t (*wall_ms)(void *arg); /* unix time, ms */
    uint64_t (*mono_ms)(void *arg); /* monotonic, ms */
};

struct replica;

struct replica_hooks
{
    void *arg;
    /* Must not return in a node: storage failed, or an entry of a newer
     * schema arrived (G4, docs/design.md §3.3). NULL: log and abort. */
    void (*fatal)(void *arg, const char *what, int status, const char *msg);
    /* A log line (level: "info", "warn", "error"). NULL: stderr. */
    void (*log)(void *arg, const char *level, const char *msg);
    /* This replica's own id was retired (it was removed): the node writes
     * its tombstone and stops. May be NULL. */
    void (*retired)(void *arg);
    /* Tests: an entry was applied (its payload, borrowed). May be NULL. */
    void (*applied)(void *arg, raft_index index, const void *buf, size_t len);
    /* The leader's batch of @n commands committed and applied, @ns after
     * it was proposed (metrics). May be NULL. Last, so that the positional
     * initialisers of the tests stay valid. */
    void (*batch)(void *arg, size_t n, uint64_t ns);
};

struct replica_config
{
    unsigned election_ms;  /* default 1000 */
    unsigned heartbeat_ms; /* default 100; must be < election_ms */
    /* Entries between snapshots and kept after one; 0 (the node's
     * default): by bytes (raft/snap_policy.h). The replica rewrites these
     * two with its current decision, which pipeline.c and member.c read. */
    unsigned snapshot_threshold;
    unsigned snapshot_trailing;
    unsigned max_catch_up_rounds;
    unsigned max_catch_up_round_ms;
    /* How long the leader waits for an InstallSnapshot to be answered
     * before it sends it again (0: raft's 30 s). A lost InstallSnapshot
     * otherwise leaves a follower that far behind for that long. */
    unsigned install_snapshot_timeout_ms;
    /* The CPU nice value (0..19) of the thread that encodes a snapshot off
     * the loop (adapter.c); 0: the node's own. Every replica of a cluster
     * reaches its snapshot threshold at about the same index, so on a host
     * that runs several nodes (tests, benchmarks) their encoders otherwise
     * take the cores from every loop at once. */
    unsigned snapshot_nice;
};

/* --- pipeline requests -----------------------------------------------------
 */

struct replica_req;
/* @status 0: @res is the command's outcome (borrowed for the call). Else a
 * REPLICA_E_* code and @res is NULL. Called on the loop thread, never from
 * inside replica_submit/replica_lookup. */
typedef void (*replica_cb)(struct replica_req *req,
                           int status,
                           const struct fsm_result *res);

/* Bytes of a request's inline command: a claim with a short scope and key
 * and a 16-byte request id takes ~60-100. */
#define REPLICA_CMD_INLINE 160

struct replica_req
{
    void *data; /* the caller's */
    /* private */
    replica_cb cb;
    struct replica_req *next;
    uint8_t *cmd; /* encoded command (malloc'd, or cmd_inline) */
    size_t cmd_len;
    bool lookup;
    uint8_t scope[FSM_SCOPE_MAX];
    size_t scope_len;
    uint8_t key[FSM_KEY_MAX];
    size_t key_len;
    uint64_t read_at; /* replica_read_at: the index it waits for */
    /* A claim's encoded command when it fits (cmd then points here, and
     * is not freed): no malloc and free per claim. */
    uint8_t cmd_inline[REPLICA_CMD_INLINE];
};

/* A read index asked of the leader (replica_read_index). @status 0:
 * @index is an index this leader proved current after the request was
 * made; else REPLICA_E_NOTLEADER (leadership lost or never ready: nothing
 * applied, ask again) or REPLICA_E_SHUTDOWN. Called on the loop thread,
 * never from inside replica_read_index. */
struct replica_index_req;
typedef void (*replica_index_cb)(struct replica_index_req *req,
                                 int status,
                                 uint64_t index);

struct replica_index_req
{
    void *data; /* the caller's */
    /* private */
    replica_index_cb cb;
    struct replica_index_req *next;
};

/* --- membership operations ----------------------------------------------- */

enum replica_member_op {
    REPLICA_MEMBER_ADD = 1, /* spare -> standby -> catch up -> role */
    REPLICA_MEMBER_REMOVE,  /* retire the id, remove it from the config */
    REPLICA_MEMBER_ASSIGN,  /* change role */
    REPLICA_MEMBER_TRANSFER /* hand leadership to id (0: any voter) */
};

struct replica_member_req;
typedef void (*replica_member_cb)(struct replica_member_req *req,
                                  int status,
                                  const char *msg);

struct replica_member_req
{
    void *data;
    enum replica_member_op op;
    raft_id id;
    char raft_addr[FSM_ADDR_MAX + 1];
    char client_addr[FSM_ADDR_MAX + 1];
    enum fsm_role role; /* ADD: final role (VOTER or STANDBY); ASSIGN */
    /* private */
    struct replica *rep;
    replica_member_cb cb;
    int step;      /* the next step */
    int after_dir; /* the step after the directory command in flight */
    bool busy;     /* a raft call or a directory command is in flight */
    bool retire_wait;
    bool progressed; /* a step committed */
    enum fsm_role final_role;
    raft_time wait_start;
    struct raft_change change;
    struct raft_transfer transfer;
    struct raft_barrier barrier;
    raft_index wait_index;
    struct replica_req pl;
    char msg[ERR_MSG_SIZE]; /* why it failed (common/err.h) */
};

/* --- work over a frozen view: state digests, backups (digest.c) ----------
 *
 * A request waits in a short queue until the state machine's one frozen
 * view is free (a snapshot or an install may hold it), is frozen on the
 * loop in bounded time (fsm_freeze), runs its work on raft's thread pool
 * over the view while the loop keeps applying, and is called back on the
 * loop after the view was released. The state digest is one such work;
 * server/backup.c's encoder is another. */

struct replica_digest_req;
/* @status 0: @req->index, term, applied_digest (and, for the digest,
 * state_digest) are set, all at one applied index. Else REPLICA_E_NOMEM,
 * REPLICA_E_SHUTDOWN, or the work's own negative code. On the loop thread.
 * Usually later, but a request that cannot start (fsm_freeze or the pool
 * out of memory: REPLICA_E_NOMEM) is called back at once, from inside
 * replica_state_digest / replica_view_work, which then still return 0: a
 * caller makes its request findable (listed) before the call, as the
 * callback may free it. */
typedef void (*replica_digest_cb)(struct replica_digest_req *req, int status);
/* Raft's thread pool: read @view (borrowed until the work returns) and
 * write only @req's caller's fields. 0 or a negative code for the cb. */
typedef int (*replica_view_fn)(struct replica_digest_req *req,
                               struct fsm_frozen *view);

struct replica_digest_req
{
    void *data;              /* the caller's */
    raft_index index;        /* out: the applied index of the view */
    raft_term term;          /* out: this node's term at the freeze */
    uint64_t applied_digest; /* out: the applied-entry chain there */
    uint64_t state_digest;   /* out: SHA-256 of the snapshot, first 8 B */
    /* private */
    replica_view_fn fn;
    int fn_rv;
    replica_digest_cb cb;
    struct replica *rep;
    struct fsm_frozen *view;
    struct raft_io_async_work work;
    struct replica_digest_req *next;
};

#define REPLICA_DIGEST_QUEUE_MAX 64

/* --- the replica --------------------------------------------------------- */

enum replica_inflight {
    INFLIGHT_NONE = 0,
    INFLIGHT_BATCH,    /* raft_apply of a batch */
    INFLIGHT_BARRIER,  /* lookups riding a barrier */
    INFLIGHT_G1,       /* the term-start barrier */
    INFLIGHT_SNAPSHOT, /* barrier that triggers an on-demand snapshot */
    INFLIGHT_CHANGE,   /* raft_add/assign/remove */
    INFLIGHT_TRANSFER, /* raft_transfer */
};

struct replica_stats
{
    uint64_t batches;
    uint64_t batch_commands;
    uint64_t barriers;
    uint64_t g1_barriers;
    uint64_t malformed_entries;
    uint64_t snapshots_taken;
    uint64_t snapshots_busy; /* refused by G5 */
    uint64_t snapshots_restored;
    uint64_t restores_prepared; /* installs restored off the loop */
    uint64_t snapshot_last_index;
    uint64_t snapshot_last_bytes;
    uint64_t snapshot_last_ms;   /* freeze to finalize */
    uint64_t snapshot_extra_max; /* most bytes a frozen view held */
    int snapshot_last_nice;      /* the nice value it was encoded at */
    uint64_t read_indexes;       /* read indexes answered (leader) */
    uint64_t reads_at;           /* replica_read_at reads served */
};

/* The adapter's snapshot state (fsm v3: snapshot freezes on the loop,
 * snapshot_async encodes the view on raft's thread pool, finalize releases
 * the view on the loop), and an InstallSnapshot's state machine built on the
 * pool while the store writes the snapshot (rio's install_work). The pool
 * thread reads view/digest and writes the prepared fields only between
 * the loop's hand-over and the work's completion callback. */
struct replica_snap
{
    struct snap_policy policy;
    bool fixed_threshold; /* the operator gave an entry count */
    bool fixed_trailing;
    struct fsm_frozen *view; /* from snapshot() to snapshot_finalize */
    raft_index index;
    uint64_t digest; /* the applied-entry digest at the freeze */
    uint64_t t0_ms;
    /* Where the time from freeze to finalize went (CLOCK_MONOTONIC ns, the
     * real clock whatever rep->clock is: read on the pool thread too, and
     * only logged): the freeze, the encoder's start and end. The encoder
     * writes its two before the work's completion, which the loop reads
     * after. */
    uint64_t freeze_ns, encode_begin_ns, encode_end_ns;
    uint64_t freeze_loop_ns; /* the loop's time in snapshot() */
    int encoded_nice;        /* written by the encoder (snapshot_async) */

    struct fsm *prepared;      /* owned; NULL if none */
    const void *prepared_base; /* the snapshot buffer it was built from */
    int prepared_rv;
    uint64_t prepared_digest;
    char prepared_msg[ERR_MSG_SIZE];
};

/* Embedded by value (server.h), so defined here; private to src/raft
 * except the fields marked "read only", which the node reads for its
 * status and metrics (never writes). */
struct replica
{
    struct raft *raft; /* &own_raft in a node; the fixture's in tests */
    struct raft own_raft;
    struct raft_fsm raft_fsm;
    struct rio rio;      /* read only: seen_leader_* (metrics.c) */
    struct store *store; /* read only */
    struct fsm *fsm;     /* read only: the applied state */
    raft_id id;
    struct replica_clock clock; /* read only */
    struct replica_hooks hooks; /* read only */
    struct replica_config config;
    struct replica_stats stats; /* read only */
    bool started;
    bool closing;
    bool retired;
    unsigned cb_depth; /* inside one of our callbacks from raft */
    /* replica_stop: called once raft and its io have closed */
    void (*stop_cb)(void *arg);
    void *stop_arg;

    /* adapter */
    raft_index live_from;     /* entries above this index are applied live */
    uint64_t digest;          /* read only: chain over every applied entry */
    struct replica_snap snap; /* read only: policy's byte counts, view */

    /* state digests (digest.c): waiting requests, and whether one holds
     * the view */
    struct replica_digest_req *digest_head, *digest_tail;
    unsigned digest_n;
    bool digest_running;

    /* pipeline: queue for the next batch */
    struct replica_req *q_head, *q_tail;
    size_t q_n;
    size_t q_bytes;
    size_t q_lookups;

    /* pipeline: the one proposal in flight */
    enum replica_inflight inflight;
    struct raft_apply apply_req;
    struct raft_barrier barrier_req;
    struct replica_req **fl_reqs; /* requests of the batch or barrier */
    const uint8_t **fl_cmds;      /* their commands, while encoding */
    size_t *fl_lens;
    size_t fl_n;
    size_t fl_cap;
    raft_index fl_index;
    uint64_t fl_t0_ns; /* uv_hrtime() when the batch was proposed */
    size_t fl_batch_n; /* its commands */

    /* read indexes (leader): waiting for the next proposal, and riding
     * the one in flight; answered with its index once it applied */
    struct replica_index_req *ri_head, *ri_tail, *ri_fl;
    size_t ri_n;
    /* reads at an index (any node): waiting until applied >= read_at,
     * sorted by read_at */
    struct replica_req *rd_head;
    size_t rd_n;

    /* leadership */
    bool leader;
    raft_term term;
    bool ready; /* G1 barrier of this term applied */
    bool g1_due;
    struct ltime ltime;

    /* snapshots on demand */
    bool snap_wanted;
    raft_index snap_barrier_index;
    void (*snap_cb)(struct replica *rep, int status);

    /* membership: one operation at a time */
    struct replica_member_req *member;
    /* the leader's own operations: finishing an interrupted removal, and
     * refreshing the configuration entry so G6 does not pin the log */
    struct replica_member_req internal;
    uint64_t reconcile_removals;
    uint64_t config_refreshes;

    /* replica_submit_hold: submissions of one group still to come */
    unsigned held;
};

/* Node use: set up @rep over @inner (an uninitialised-by-raft raft_io such as
 * raft_uv's) and @store, then raft_init its own struct raft with @id and
 * @address. On success @fsm is owned by the replica (freed by
 * replica_close); on failure the caller still owns it. Returns 0,
 * REPLICA_E_NOMEM or REPLICA_E_START (raft_init's code is named in
 * @errmsg, ERR_MSG_SIZE bytes). */
int replica_init(struct replica *rep,
                 struct raft_io *inner,
                 struct store *store,
                 struct fsm *fsm,
                 raft_id id,
                 const char *address,
                 const struct replica_clock *clock,
                 const struct replica_hooks *hooks,
                 char *errmsg);

/* Fixture use: the fsm adapter to hand to raft_fixture_grow(); then
 * replica_adopt() once the fixture has raft_init'ed server @r. */
void replica_prepare(struct replica *rep,
                     struct fsm *fsm,
                     const struct replica_clock *clock,
                     const struct replica_hooks *hooks);
void replica_adopt(struct replica *rep, struct raft *r, struct store *store);

/* Apply @config (timeouts, snapshots) and the fixed settings (pre-vote on).
 * Returns 0 or REPLICA_E_INVALID with @errmsg set (heartbeat >= election). */
int replica_configure(struct replica *rep,
                      const struct replica_config *config,
                      char *errmsg);

/* raft_start, then note what was loaded (entries up to here are replayed,
 * not live: ltime.h). Returns 0, REPLICA_E_NOMEM or REPLICA_E_START
 * (raft_start's code is named in @errmsg). */
int replica_start(struct replica *rep, char *errmsg);

/* Stop serving before raft_close (or raft_fixture_close): queued requests
 * fail "shutting down" (not applied), nothing new is proposed, and raft's
 * own transition to unavailable while closing is not taken for a failure.
 * What raft holds is failed by raft_close ("outcome unknown"). */
void replica_shutdown(struct replica *rep);

/* Node use: replica_shutdown, then close raft and its io (files, sockets,
 * the store) through the loop; @cb(@arg) once they have closed, on the
 * loop. Call once; then replica_close. */
void replica_stop(struct replica *rep, void (*cb)(void *arg), void *arg);

/* After replica_stop's callback (or raft_fixture_close): free what the
 * replica owns. */
void replica_close(struct replica *rep);

/* Node use, --bootstrap, after replica_init and before replica_start: a
 * one-voter configuration of this node at its raft address, written to a
 * pristine data directory. 0 (*@existed false: bootstrapped; true: the
 * directory already holds a node, nothing written, not an error) or
 * REPLICA_E_START with @errmsg (ERR_MSG_SIZE bytes) set. */
int replica_bootstrap(struct replica *rep, bool *existed, char *errmsg);

/* --restore (server/restore.c), before replica_init: a new cluster's first
 * state written into log store @st (not "uv"), from which replica_start
 * then loads it like any snapshot. In seed.c, linked by onced only
 * (libonce_raft_seed, with the log store).
 *
 * Whether @st holds nothing yet: 0 and *@pristine, or REPLICA_E_START (the
 * store's message in st->errmsg). */
int replica_seed_pristine(struct store *st, bool *pristine);
/* Write @state (read only) as pristine @st's only content: the adapter's
 * snapshot of it at @index, term 1, applied-entry digest 0, with a
 * one-voter configuration of @id at raft address @address. 0,
 * REPLICA_E_NOMEM (encoding the state) or REPLICA_E_START (the store's
 * message in st->errmsg). */
int replica_seed(struct store *st,
                 uint64_t id,
                 const char *address,
                 uint64_t index,
                 const struct fsm *state);

/* The newest log schema this node applies and bootstraps at:
 * FSM_SCHEMA_VERSION, or in debug builds a lower ONCE_TEST_SCHEMA_MAX
 * (1..9) from the environment (a test hook; never in release builds). */
uint32_t replica_schema_max(void);

/* Propose @cmd (borrowed) in the next batch. Returns 0 (then @cb reports
 * the outcome) or a REPLICA_E_* error, not applied (no callback). */
int replica_submit(struct replica *rep,
                   struct replica_req *req,
                   const struct fsm_cmd *cmd,
                   replica_cb cb);

/* A group of submissions that must share a proposal (a ClaimBatch's items):
 * between replica_submit_hold and replica_submit_release nothing is
 * proposed, so the group's commands queue up together and go into the
 * next batch entry (or consecutive ones) in order, instead of the first
 * going alone when nothing is in flight and the rest waiting for its
 * commit. Release proposes at once if it can. Holds nest; loop thread
 * only, in one loop turn (no raft callback runs in between). */
void replica_submit_hold(struct replica *rep);
void replica_submit_release(struct replica *rep);

/* Linearizable read of (scope, key): rides the next barrier (or the next
 * batch, as a Lookup command). Same return convention. */
int replica_lookup(struct replica *rep,
                   struct replica_req *req,
                   const struct fsm_ident *ident,
                   replica_cb cb);

/* --- reads served by any node (docs/raft.md, "Reads on any node") ------
 *
 * libraft 0.15 has no ReadIndex: the leader proves an index current with
 * the next barrier (or batch) it proposes after the request, shared by
 * every read index and lookup waiting at that moment, and answers its
 * index once applied. That entry committed in this leader's term, so when
 * it did this node still led a majority, and every write acknowledged
 * before the request was made has a lower index. A node that then
 * applied that index and reads its own state machine gives a
 * linearizable answer. No leases, no clocks. */

/* Leader (ready or not: a request made before G1 applied waits for it):
 * queue @req for the next proposal. 0 (then @cb), or REPLICA_E_NOTLEADER,
 * _SHUTDOWN, _BUSY (REPLICA_QUEUE_MAX waiting) without callback. */
int replica_read_index(struct replica *rep,
                       struct replica_index_req *req,
                       replica_index_cb cb);

/* Read (scope, key) from this node's state machine once it has applied
 * @index. 1: already applied, *@res holds the read now (no callback; its
 * borrowed fields live until the next apply). 0: @req waits, @cb gets the
 * read when applied reaches @index (or REPLICA_E_SHUTDOWN). Else
 * REPLICA_E_INVALID (a bad identity), _BUSY (REPLICA_QUEUE_MAX waiting) or
 * _SHUTDOWN, without callback. A caller that stops waiting (its
 * deadline) withdraws @req with replica_read_cancel. */
int replica_read_at(struct replica *rep,
                    struct replica_req *req,
                    const struct fsm_ident *ident,
                    uint64_t index,
                    struct fsm_result *res,
                    replica_cb cb);

/* Withdraw @req if it still waits in replica_read_at's list (no
 * callback); a no-op otherwise. */
void replica_read_cancel(struct replica *rep, struct replica_req *req);

/* Take a snapshot now (0.15 has no call for it): lower the threshold to 1,
 * propose a barrier, restore the threshold. @cb gets 0, REPLICA_E_BUSY (G5
 * refused it: a configuration change is uncommitted), or another error. */
int replica_snapshot(struct replica *rep,
                     void (*cb)(struct replica *rep, int status));

/* The state digest at the current applied index, computed on raft's
 * thread pool over a frozen view (digest.c). 0: @cb reports later;
 * REPLICA_E_BUSY (REPLICA_DIGEST_QUEUE_MAX waiting) or REPLICA_E_SHUTDOWN:
 * no callback. @req stays the caller's, untouched until the callback. */
int replica_state_digest(struct replica *rep,
                         struct replica_digest_req *req,
                         replica_digest_cb cb);
/* Run @fn over a frozen view of the current applied state (see above);
 * the same queue, bound and return convention as replica_state_digest. */
int replica_view_work(struct replica *rep,
                      struct replica_digest_req *req,
                      replica_view_fn fn,
                      replica_digest_cb cb);

/* Start a membership operation (leader only, after G1, one at a time).
 * Returns 0 (then @cb reports) or an error (no callback; @req->msg says
 * why when it is not empty). An add that raft would refuse (its address
 * already a member's, in the configuration or the directory) is refused
 * here, before anything is proposed. */
int replica_member(struct replica *rep,
                   struct replica_member_req *req,
                   replica_member_cb cb);

/* --- observers ------------------------------------------------------------
 *
 * What the Raft layer knows, in once's own types, for the node's status,
 * metrics, logs and membership checks. Loop thread; each answer is true
 * for the current loop turn. Before replica_init/replica_adopt
 * (replica_has_raft false) they answer "unavailable", 0 and empty. */

enum replica_role {
    REPLICA_ROLE_UNAVAILABLE = 0, /* not started, or closing */
    REPLICA_ROLE_FOLLOWER,
    REPLICA_ROLE_CANDIDATE,
    REPLICA_ROLE_LEADER,
};

/* A server of the Raft configuration (not the member directory of the
 * fsm, which also holds client addresses). */
struct replica_server
{
    uint64_t id;
    const char *address; /* borrowed: valid until the configuration changes */
    enum fsm_role role;  /* VOTER, STANDBY or SPARE */
};

/* replica_init or replica_adopt has run (until the memory is reused). */
bool replica_has_raft(const struct replica *rep);
enum replica_role replica_role(const struct replica *rep);
bool replica_is_leader(const struct replica *rep);
bool replica_ready(const struct replica *rep); /* leader and G1 applied */
/* The current leader's id and raft address if known (0/NULL if not). */
void replica_leader(const struct replica *rep, uint64_t *id, const char **addr);
uint64_t replica_term(const struct replica *rep);
uint64_t replica_commit_index(const struct replica *rep);
uint64_t replica_last_applied(const struct replica *rep);
uint64_t replica_last_index(const struct replica *rep);
/* raft's io clock, ms (what raft times elections with). */
uint64_t replica_time_ms(const struct replica *rep);
/* The last error message raft set ("" if none). */
const char *replica_errmsg(const struct replica *rep);
/* The name of a status code the fatal hook (struct replica_hooks) reports:
 * raft's, from the store or the decorator. */
const char *replica_io_strerror(int status);

/* The configuration in force: replica_conf_n servers, in raft's order
 * (0 before a node was bootstrapped or added). */
unsigned replica_conf_n(const struct replica *rep);
/* Server @i < replica_conf_n() into *@out. */
void replica_conf_server(const struct replica *rep,
                         unsigned i,
                         struct replica_server *out);
/* The index of the committed configuration entry (0: none yet). */
uint64_t replica_conf_index(const struct replica *rep);
/* The index of the entry the configuration in force comes from: the
 * uncommitted one while there is one (raft takes a configuration in force
 * when it is appended), else the committed one. */
uint64_t replica_conf_latest_index(const struct replica *rep);

/* The leader's view of its followers: whether this node is the leader and
 * has one (from its first tick as leader on). */
bool replica_progress_known(const struct replica *rep);
/* Leader only: raft heard from configuration server @i within the last
 * election timeout; false while replica_progress_known() is false. */
bool replica_progress_recent(const struct replica *rep, unsigned i);

/* The index of the newest snapshot: stored, or still being stored (the
 * store writes it asynchronously: then only the one in progress has it).
 * 0: none. */
uint64_t replica_snapshot_index(const struct replica *rep);

/* Log time across restarts (raft/anchor.h). Seed: before replica_start,
 * a pair (log time @log_ms applied at monotonic @mono_ms) kept from earlier
 * in this boot, the base of a term that begins before any batch is applied
 * live. Last: the newest such pair, live or seeded; false if none. */
void replica_ltime_seed(struct replica *rep, uint64_t log_ms, uint64_t mono_ms);
bool replica_ltime_last(const struct replica *rep,
                        uint64_t *log_ms,
                        uint64_t *mono_ms);

#endif /* ONCE_RAFT_REPLICA_H_ */
