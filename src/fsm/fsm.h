/* fsm/fsm.h: the claim state machine (docs/design.md §3).
 *
 * The replicated table of (scope, key) records, NONCE and IDEMPOTENT, plus the
 * replicated cluster state beside it: cluster id and hash key, settings,
 * member directory, retired ids and the schema version in force.
 *
 * Pure: no I/O, no clock, no randomness, no environment. Every input comes
 * from the log entry (struct fsm_cmd values decoded from a batch) and from
 * the entry's index, which the raft adapter knows (last applied + 1) because
 * raft 0.15 does not pass it to apply. Two instances fed the same batches at
 * the same indexes end in byte-identical snapshots.
 *
 * Not thread-safe: one instance is used from one thread (the raft loop),
 * with two exceptions stated below: a frozen view is written by one other
 * thread (fsm_frozen_write), and fsm_restore_build runs on any thread.
 *
 * Memory: an allocation failure inside apply would leave a half-applied
 * batch, which raft would then re-apply; instead the fsm fails stop
 * (fsm_panic) with a message. Records are bounded by max_records/max_bytes. */
#ifndef ONCE_FSM_FSM_H_
#define ONCE_FSM_FSM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Highest log/snapshot schema this code applies. 2 added QuotaSet, 3 a
 * claim's max_uses and sliding. */
#define FSM_SCHEMA_VERSION 3
/* The first schema that applies QuotaSet. */
#define FSM_SCHEMA_QUOTAS 2
/* The first schema that applies a claim's max_uses and sliding: under an
 * older one apply ignores both, as a binary that cannot decode them does
 * (docs/state-machine.md, "N-use nonces"). */
#define FSM_SCHEMA_NUSE 3

#define FSM_SCOPE_MAX        128
#define FSM_KEY_MAX          256
#define FSM_REQUEST_ID_LEN   16
#define FSM_EXECUTION_ID_MAX 128
#define FSM_PAYLOAD_HASH_MAX 64
#define FSM_RESULT_MAX       65536
#define FSM_ERROR_MAX        1024
#define FSM_ADDR_MAX         64
#define FSM_CLUSTER_ID_LEN   16
#define FSM_HASH_KEY_LEN     16
/* Attempts kept per record: the first, the last FSM_ATTEMPTS_LAST, a count. */
#define FSM_ATTEMPTS_LAST 4
/* Uses of an N-use NONCE record: every accepted use's request id is kept
 * (exact retries), the first in the record, the others in one slab object
 * of 16 * (max_uses - 1) <= 1008 bytes, within SLAB_OBJ_MAX (1 KiB), so a
 * record of 64 uses costs at most ~1.3 KiB of max_bytes, charged in full
 * at its first claim. */
#define FSM_MAX_USES    64
#define FSM_MEMBERS_MAX 64
/* Quotas: at most 64 patterns, each an exact scope or a prefix then '*'. */
#define FSM_QUOTAS_MAX  64
#define FSM_PATTERN_MAX (FSM_SCOPE_MAX + 1)
#define FSM_RETIRED_MAX 65536
/* Virtual partitions = shards: vp = top 12 bits of the keyed hash. */
#define FSM_VP_BITS 12
#define FSM_N_VPS   (1u << FSM_VP_BITS)
/* Largest batch payload (docs/design.md §4) and commands per batch. */
#define FSM_BATCH_MAX          (1u << 20)
#define FSM_BATCH_COMMANDS_MAX 65536

/* Hard ceilings for settings: they keep every retention inside 49 days so a
 * NONCE record can store its lifetime in 32 bits (see fsm.c). */
#define FSM_MAX_TTL_CEIL    (30ull * 86400 * 1000)
#define FSM_MAX_WINDOW_CEIL (7ull * 86400 * 1000)
#define FSM_MAX_SKEW_CEIL   (3600ull * 1000)
#define FSM_MAX_LEASE_CEIL  (86400ull * 1000)
/* Log time is clamped to 48 bits of milliseconds (year 10889). */
#define FSM_TIME_MAX ((1ull << 48) - 1)
/* Most timer wheel visits (records freed or moved, ticks stepped) one
 * batch makes: a mass expiry is freed over several batches, never in one
 * stall. The count, never time, bounds it, and what is counted or
 * answered does not depend on what is already freed. */
#define FSM_PRUNE_BUDGET 4096u
/* Lease used when a claim leaves lease_ms at 0 (capped by max_lease). */
#define FSM_DEFAULT_LEASE_MS 30000

/* Errors returned by fsm functions (0 is success). Business outcomes are
 * never errors; they are enum fsm_outcome values in a result. */
enum { ERR_FSM_CODES(ERR_ENUM) }; /* common/err.h */

enum fsm_outcome {
    FSM_ACCEPTED = 1,
    FSM_REPLAYED,
    FSM_DUPLICATE,
    FSM_IN_PROGRESS,
    FSM_CONFLICT,
    FSM_STALE,
    FSM_FUTURE,
    FSM_FAILED,
    FSM_NOT_OWNER,
    FSM_NOT_FOUND,
    FSM_COMPLETED,
    FSM_RELEASED,
    FSM_RESOURCE_EXHAUSTED,
    FSM_INVALID_ARGUMENT,
    FSM_FOUND,               /* Lookup of a live record */
    FSM_FORGOTTEN,           /* Forget removed a record */
    FSM_OK,                  /* configuration command applied */
    FSM_FAILED_PRECONDITION, /* configuration command refused */
};

enum fsm_kind {
    FSM_KIND_NONCE = 1,
    FSM_KIND_IDEMPOTENT = 2,
};

enum fsm_state {
    FSM_STATE_SEEN = 1, /* NONCE: claimed */
    FSM_STATE_PENDING,  /* IDEMPOTENT: owned, lease running */
    FSM_STATE_COMPLETED,
    FSM_STATE_RELEASED,
    FSM_STATE_FAILED,
};

enum fsm_role {
    FSM_ROLE_VOTER = 1,
    FSM_ROLE_STANDBY = 2,
    FSM_ROLE_SPARE = 3,
};

enum fsm_cmd_type {
    FSM_CMD_INVALID = 0, /* did not decode */
    FSM_CMD_CLAIM,
    FSM_CMD_COMPLETE,
    FSM_CMD_RELEASE,
    FSM_CMD_LOOKUP,
    FSM_CMD_FORGET,
    FSM_CMD_BOOTSTRAP,
    FSM_CMD_SET_SETTINGS,
    FSM_CMD_SET_MEMBER,
    FSM_CMD_RETIRE_MEMBER,
    FSM_CMD_SET_SCHEMA,
    FSM_CMD_QUOTA_SET,
};

/* Owner token of an IDEMPOTENT record: unique per accepted claim. */
struct fsm_token
{
    uint32_t group_id;
    uint64_t index;
    uint32_t slot; /* position of the accepting claim in its batch */
};

struct fsm_settings
{
    uint64_t max_window_ms;
    uint64_t max_skew_ms;
    uint64_t max_ttl_ms;
    uint64_t max_lease_ms;
    uint64_t max_records;
    uint64_t max_bytes;
};

struct fsm_member
{
    uint64_t id;
    char raft_addr[FSM_ADDR_MAX + 1];
    char client_addr[FSM_ADDR_MAX + 1];
    enum fsm_role role;
};

/* A later claim of an existing record, kept as evidence. */
struct fsm_attempt
{
    uint8_t request_id[FSM_REQUEST_ID_LEN];
    uint64_t index;
    uint64_t time_ms;
    enum fsm_outcome outcome;
    bool retry;
    uint8_t execution_id_len;
    uint8_t execution_id[FSM_EXECUTION_ID_MAX];
};

/* Decoded, size-checked commands. Pointers are borrowed from the decoded
 * message (or from the caller) for the duration of one apply. */
struct fsm_claim
{
    const uint8_t *scope;
    size_t scope_len;
    const uint8_t *key;
    size_t key_len;
    uint8_t request_id[FSM_REQUEST_ID_LEN];
    const uint8_t *execution_id;
    size_t execution_id_len;
    enum fsm_kind kind;
    uint64_t ttl_ms;
    bool has_ts;
    uint64_t ts_ms;
    uint64_t window_ms;
    const uint8_t *payload_hash;
    size_t payload_hash_len;
    uint64_t lease_ms;
    /* Schema 3 (FSM_SCHEMA_NUSE) on; ignored before. NONCE only: uses the
     * record allows, 0 or 1 = single use (today's claim), at most
     * FSM_MAX_USES; the first claim fixes it. */
    uint32_t max_uses;
    /* IDEMPOTENT only, with a ttl: every DUPLICATE, IN_PROGRESS or FAILED
     * answer moves the expiry to log time + ttl (the first claim's). */
    bool sliding;
};

struct fsm_complete
{
    const uint8_t *scope;
    size_t scope_len;
    const uint8_t *key;
    size_t key_len;
    struct fsm_token owner_token;
    const uint8_t *result;
    size_t result_len;
};

struct fsm_release
{
    const uint8_t *scope;
    size_t scope_len;
    const uint8_t *key;
    size_t key_len;
    struct fsm_token owner_token;
    bool terminal;
    const uint8_t *error;
    size_t error_len;
};

/* Lookup and Forget. */
struct fsm_ident
{
    const uint8_t *scope;
    size_t scope_len;
    const uint8_t *key;
    size_t key_len;
};

struct fsm_bootstrap
{
    uint8_t cluster_id[FSM_CLUSTER_ID_LEN];
    uint8_t hash_key[FSM_HASH_KEY_LEN];
    uint32_t group_id;
    struct fsm_settings settings;
    size_t n_members;
    struct fsm_member members[FSM_MEMBERS_MAX];
};

/* QuotaSet: set @pattern's limits (0: none on that dimension; not both
 * 0), or remove its quota. */
struct fsm_quota_set
{
    const uint8_t *pattern; /* borrowed */
    size_t pattern_len;
    uint64_t max_records;
    uint64_t max_bytes;
    bool remove;
};

struct fsm_cmd
{
    enum fsm_cmd_type type;
    const char *invalid_reason; /* FSM_CMD_INVALID: why (static text) */
    union {
        struct fsm_claim claim;
        struct fsm_complete complete;
        struct fsm_release release;
        struct fsm_ident ident; /* LOOKUP, FORGET */
        struct fsm_bootstrap *bootstrap;
        struct fsm_settings settings;
        struct fsm_member member;
        uint64_t retire_id;
        uint32_t schema_version;
        struct fsm_quota_set quota;
    } u;
};

/* The outcome of one command. Pointer fields are borrowed from the fsm and
 * valid only until the next call that changes it (for apply: until the emit
 * callback returns). */
struct fsm_result
{
    enum fsm_cmd_type cmd;
    enum fsm_outcome outcome;
    const char *reason; /* static text for refusals, or NULL */
    bool retry;         /* ACCEPTED/COMPLETED/...: same request repeated */
    /* The log time the command was decided at: fsm_now as the batch's
     * commands apply (the leader's stamp, never below the previous batch's),
     * or fsm_now when fsm_lookup reads. Every replica computes the same
     * value; clients use it to check time rules (windows, leases) against
     * the time the cluster itself used. */
    uint64_t log_time_ms;

    /* Record facts; valid when has_record. */
    bool has_record;
    enum fsm_kind kind;
    enum fsm_state state;
    uint8_t first_request_id[FSM_REQUEST_ID_LEN]; /* accepted request id */
    uint64_t first_index;
    uint64_t first_time_ms;
    uint64_t expires_ms;
    uint32_t attempts; /* later claims seen, total */
    /* NONCE: uses the record allows (1 unless N-use) and accepted so far;
     * 0 for IDEMPOTENT. */
    uint32_t max_uses;
    uint32_t uses;
    bool sliding; /* IDEMPOTENT: its expiry slides (the first claim's ttl) */

    /* IDEMPOTENT only. The owner token is given only to its owner (the
     * claim that was ACCEPTED, the Complete/Release that used it) and to
     * Lookup; a denied claimant never learns it, so a client cannot fence
     * out the owner with a token it did not earn. */
    bool has_owner_token;
    struct fsm_token owner_token;
    uint32_t owner_attempt; /* 1 for the first owner, +1 per takeover */
    uint64_t lease_expires_ms;
    uint64_t retry_after_ms; /* IN_PROGRESS */
    const uint8_t *result;
    size_t result_len;
    const uint8_t *stored_error;
    size_t stored_error_len;

    /* Lookup only: the kept attempts, oldest first. */
    size_t n_attempt_list;
    const struct fsm_attempt *attempt_list[1 + FSM_ATTEMPTS_LAST];
};

struct fsm;

/* Called once per command of a batch, in order; @r is borrowed. */
typedef void (*fsm_emit_cb)(void *arg, size_t i, const struct fsm_result *r);

/* Create an empty, unbootstrapped state machine. Returns NULL on OOM. */
struct fsm *fsm_new(void);

/* Release everything. NULL-safe. */
void fsm_free(struct fsm *f);

/* Apply one batch (the payload of one log entry, borrowed) at log @index.
 * Calls @emit (may be NULL) once per command with its outcome. Returns 0, or:
 *   FSM_E_SCHEMA    the batch is of a newer schema: nothing changed, and the
 *                   node must stop (never apply it differently from peers);
 *   FSM_E_MALFORMED the batch envelope does not decode: nothing changed. All
 *                   replicas see the same bytes, so skipping is deterministic;
 *                   the caller logs it loudly.
 * A command that does not decode or is out of range gets INVALID_ARGUMENT and
 * the rest of the batch applies. */
int fsm_apply(struct fsm *f,
              uint64_t index,
              const uint8_t *buf,
              size_t len,
              fsm_emit_cb emit,
              void *arg);

/* Apply already-decoded commands (what fsm_apply does after decoding). Used
 * by tests and benchmarks that bypass protobuf. @cmds are borrowed. */
int fsm_apply_cmds(struct fsm *f,
                   uint64_t index,
                   uint32_t schema_version,
                   uint64_t leader_time_ms,
                   const struct fsm_cmd *cmds,
                   size_t n_cmds,
                   fsm_emit_cb emit,
                   void *arg);

/* Linearizable only when called after a barrier (docs/design.md §4): read the
 * record of (scope, key) as of fsm_now. Fills @out (borrowed pointers). */
void fsm_lookup(struct fsm *f,
                const struct fsm_ident *id,
                struct fsm_result *out);

/* Snapshot: fsm_snapshot_size() bytes, written by fsm_snapshot_write into a
 * caller-provided buffer of exactly that size. The encoding is canonical:
 * equal states give equal bytes, whatever history led to them. */
size_t fsm_snapshot_size(const struct fsm *f);
void fsm_snapshot_write(const struct fsm *f, uint8_t *buf, size_t len);

/* Replace the whole state with the snapshot in @buf (borrowed). Validates
 * everything first; on error the state is unchanged, @errmsg (ERR_MSG_SIZE
 * bytes, may be NULL) says why, and the return is FSM_E_MALFORMED,
 * FSM_E_CHECKSUM, FSM_E_SCHEMA, or FSM_E_BUSY while a frozen view lives. */
int fsm_restore(struct fsm *f, const uint8_t *buf, size_t len, char *errmsg);

/* fsm_restore in two steps, so the parse can run off the owner's thread.
 *
 * fsm_restore_build: any thread, touches nothing shared: parse and validate
 * @buf (borrowed) into a new instance *@out (the caller's: commit it or
 * fsm_free it). 0, or what fsm_restore returns, with @errmsg (ERR_MSG_SIZE
 * bytes, may be NULL) set and *@out NULL.
 *
 * fsm_restore_commit: the owner's thread: replace @f's whole state by
 * @fresh's, which is consumed and freed. It swaps the instances' internals
 * and never walks @fresh's records; the old state is freed in time
 * proportional to its memory (pages, slot arrays, stored results), not its
 * record count. FSM_E_BUSY while a view of @f is live: nothing changes and
 * @fresh stays the caller's. */
int fsm_restore_build(const uint8_t *buf,
                      size_t len,
                      struct fsm **out,
                      char *errmsg);
int fsm_restore_commit(struct fsm *f, struct fsm *fresh);

/* Frozen views: a snapshot taken off the owner's thread.
 *
 * fsm_freeze captures the state at the last applied index in bounded time
 * (no walk of the records: it copies the page pointer array, the table
 * headers and the header fields). Afterwards apply keeps running: every
 * write to memory the view can see copies it first (a 64 KiB slab page, a
 * vp's slot array) and frees of what the view can see wait for
 * fsm_release, so the view never changes. Extra memory is what apply
 * copies while the view lives, at most one copy of the store.
 *
 * Threads: fsm_freeze, fsm_release and fsm_frozen_extra_bytes on the
 * owner's thread only (between applies); fsm_frozen_size and
 * fsm_frozen_write on any ONE other thread, concurrently with the owner's
 * fsm_apply, fsm_lookup and the accessors. Ownership: the view belongs to
 * @f; it is ended by fsm_release (after fsm_frozen_write returned, or
 * instead of it), or by fsm_free(f) when the writer is not running. */
struct fsm_frozen;

/* One view at a time: FSM_E_BUSY if one is live, -ENOMEM on allocation
 * failure (nothing changed), else 0 and *@out. */
int fsm_freeze(struct fsm *f, struct fsm_frozen **out);
/* Exact length of the view's snapshot (fsm_snapshot_size at the freeze). */
size_t fsm_frozen_size(const struct fsm_frozen *z);
/* Write the canonical snapshot of the view into @buf (exactly
 * fsm_frozen_size bytes): byte-identical to fsm_snapshot_write called at
 * the freeze point. */
void fsm_frozen_write(struct fsm_frozen *z, uint8_t *buf, size_t len);
/* The view's replicated header as a read-only state for the observers
 * fsm_now, fsm_last_index, fsm_cluster_id, fsm_settings, fsm_n_records and
 * fsm_bootstrapped only (the writer's thread may call them: the view never
 * changes). Borrowed until fsm_release. */
const struct fsm *fsm_frozen_state(const struct fsm_frozen *z);
/* End the view and free what it kept. */
void fsm_release(struct fsm *f, struct fsm_frozen *z);
/* The same, with what only the view still used (the originals of the slot
 * arrays apply copied, deferred frees, the view's own arrays) handed to
 * @free_fn, each a block from malloc, for the caller to free where it
 * likes: at 10 M records a snapshot's view ends with ~4,000 slot arrays
 * (~120 MB), 5 ms of free() on the caller's thread. */
void fsm_release_with(struct fsm *f,
                      struct fsm_frozen *z,
                      void (*free_fn)(void *));
/* Bytes held only because a view is live (the view's own arrays, copied
 * pages and slot arrays, deferred frees); 0 with no view. */
uint64_t fsm_frozen_extra_bytes(const struct fsm *f);

/* Restored clusters (docs/state-machine.md, "Restored clusters").
 *
 * Every claim the backed-up cluster accepted after its backup was taken is
 * unknown to a cluster restored from it, so it could be accepted again. The
 * restore fence closes that window: while it lives, a claim that would be a
 * new acceptance (an absent key, or an IDEMPOTENT takeover) is
 *   - STALE if it carries a signed ts <= restore_time + max_skew (no such
 *     nonce is younger than the backup's cluster could have accepted);
 *   - otherwise, if it has no ts (TTL-only) or is IDEMPOTENT, while log time
 *     <= restore_until: FAILED_PRECONDITION, "restored cluster: replay
 *     window open until T". restore_until is restore_time plus the longest
 *     retention the settings allow (max_ttl, or max_window + 2 max_skew, or
 *     max_lease if longer), or 0 when the operator accepted the window.
 * Claims of live records (the backup's) keep their answers. The fence is
 * replicated state in the snapshot and is dropped entirely once log time
 * passed restore_lift (the later of restore_until and the time after which
 * the window rule alone makes those nonces STALE). */
struct fsm_rebase
{
    uint8_t cluster_id[FSM_CLUSTER_ID_LEN]; /* the new cluster's, not zero */
    struct fsm_member member;               /* the only member, a voter */
    uint64_t time_ms; /* the restoring node's clock: log time moves to it */
    bool accept_replay_window;
};

/* Turn @f (restored from a backup's snapshot, not frozen, bootstrapped)
 * into the first state of a new cluster: new cluster id, @rb->member as the
 * only member, no retired ids, log time max(now, time_ms), the fence set.
 * The hash key, group, settings, records and last index stay (new log
 * indexes continue after the backup's, so owner tokens never repeat).
 * Returns 0, or FSM_E_MALFORMED with @errmsg set (nothing changed). */
int fsm_rebase(struct fsm *f, const struct fsm_rebase *rb, char *errmsg);

/* The fence as it stands (all zero when there is none). */
struct fsm_fence_info
{
    bool active;
    uint8_t source_cluster_id[FSM_CLUSTER_ID_LEN];
    uint64_t source_index;
    uint64_t restore_time_ms;
    uint64_t stale_ts_ms; /* nonces with ts <= this are STALE */
    uint64_t until_ms;    /* TTL-only/IDEMPOTENT refused until then; 0 none */
    uint64_t lift_ms;
};
void fsm_fence(const struct fsm *f, struct fsm_fence_info *out);

/* Observers. */
uint64_t fsm_now(const struct fsm *f);
uint64_t fsm_last_index(const struct fsm *f);
bool fsm_bootstrapped(const struct fsm *f);
const uint8_t *fsm_cluster_id(const struct fsm *f); /* 16 bytes */
uint32_t fsm_group_id(const struct fsm *f);
uint32_t fsm_schema_version(const struct fsm *f);
const struct fsm_settings *fsm_settings(const struct fsm *f);
size_t fsm_n_members(const struct fsm *f);
const struct fsm_member *fsm_member(const struct fsm *f, size_t i);
bool fsm_is_retired(const struct fsm *f, uint64_t id);
size_t fsm_n_retired(const struct fsm *f);
/* Counted records and their bytes as counted against max_bytes: every
 * record whose expiry tick (1.024 s) has not passed, so expired ones of the
 * current tick included, those waiting in the pruning backlog not. The
 * bytes include each PENDING or RELEASED record's result reservation
 * (FSM_RESULT_MAX; docs/state-machine.md, "Memory"). */
uint64_t fsm_n_records(const struct fsm *f);
uint64_t fsm_bytes(const struct fsm *f);
/* Records past their expiry tick, not counted any more, that budgeted
 * pruning has not freed yet (for status and metrics; not replicated). */
uint64_t fsm_prune_backlog(const struct fsm *f);
/* PENDING idempotent records (the pruning backlog included), and the log
 * time of the first claim of the oldest of them (1.024 s ticks; false if
 * none). Observers for metrics, never read by apply; the second may look
 * for the new oldest after the old one left (fsm_pending.c), so it is not
 * const: call it on the owner's thread, between applies. */
uint64_t fsm_n_pending(const struct fsm *f);
bool fsm_pending_oldest_ms(struct fsm *f, uint64_t *ms);
/* Records in virtual partition @v's index (0 for v >= FSM_N_VPS), the
 * pruning backlog included: the per-shard figure of metrics. O(1). */
uint32_t fsm_vp_records(const struct fsm *f, uint32_t v);
/* Record bytes of virtual partition @v (0 for v >= FSM_N_VPS): the storage
 * fsm_bytes counts (records, exts, attempts, stored results and errors),
 * without the result reservations of PENDING/RELEASED records (they are
 * counted, never allocated), and physical like fsm_vp_records: the pruning
 * backlog included. O(1). */
uint64_t fsm_vp_bytes(const struct fsm *f, uint32_t v);
/* Memory held by the record store: arena pages plus hash tables. */
uint64_t fsm_memory(const struct fsm *f);

/* Quotas (docs/state-machine.md, "Quotas"): per scope pattern limits on
 * counted records and bytes, replicated, in the snapshot. A record is
 * charged to one quota: its scope's exact pattern if there is one, else
 * the longest matching prefix pattern; scopes matching none are bound by
 * the cluster's limits only. Usage counts like fsm_n_records/fsm_bytes
 * (a record counts while its expiry tick has not passed), so it does not
 * depend on pruning. */
struct fsm_quota_info
{
    char pattern[FSM_PATTERN_MAX + 1]; /* NUL-terminated */
    uint64_t max_records;              /* 0: no limit */
    uint64_t max_bytes;                /* 0: no limit */
    uint64_t records;                  /* counted usage */
    uint64_t bytes;
};
/* Number of quotas, and quota @i (0..n-1, sorted by pattern bytes) into
 * @out; false if @i is out of range. */
size_t fsm_n_quotas(const struct fsm *f);
bool fsm_quota(const struct fsm *f, size_t i, struct fsm_quota_info *out);
/* NULL if @p (@len bytes) is a valid pattern: 1..128 scope bytes, or 0..128
 * then a final '*', no other '*', no control characters; else why not. */
const char *fsm_pattern_check(const uint8_t *p, size_t len);

/* Names for logs, JSON and tests. */
const char *fsm_outcome_name(enum fsm_outcome o);
const char *fsm_state_name(enum fsm_state s);
/* err_str(rv): kept so callers name the module they call. */
const char *fsm_strerror(int rv);

/* NULL if the lengths are a valid identity (scope 1..128, key 1..256),
 * else static text saying why not. Shared by the decoder and apply. */
const char *fsm_check_ident(size_t scope_len, size_t key_len);

/* Settings used when a bootstrap leaves a field at 0. */
void fsm_settings_default(struct fsm_settings *s);
/* NULL if @s is acceptable, else static text saying why not. */
const char *fsm_settings_check(const struct fsm_settings *s);

#endif /* ONCE_FSM_FSM_H_ */
