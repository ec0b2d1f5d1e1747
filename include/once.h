/* once.h: libonce, the client of a once cluster.
 *
 * A once cluster is a replicated replay authority: it answers "has this
 * (scope, key) been used before?" linearizably and durably (see the README).
 * This library talks to it over TCP, with TLS 1.3 when tls_ca is set (the RPC
 * of docs/design.md §5).
 *
 * Model
 *   - A client (once_client) is made from the client addresses of some or all
 *     nodes. It finds the leader, sends each call to it (any node would also
 *     forward), and fails over when a node goes away.
 *   - Every call gets a fresh random 128-bit request id (or the one given);
 *     the library reuses it only for its own retries of that call. A call
 *     that definitely did not apply (applied FALSE: no leader, refused
 *     before Raft, connection failed before sending) is retried on another
 *     node until the deadline; a call whose outcome is unknown (connection
 *     lost after sending, leader lost mid-commit) is retried with the SAME
 *     request id, which the state machine makes safe (the accepted request
 *     repeated gets ACCEPTED with retry set). Calls without a request id
 *     (forget, the admin calls) are not retried once their outcome is
 *     unknown: they end with applied UNKNOWN. Nothing else is retried.
 *   - Every call has a deadline (the call's timeout_ms, else the client's).
 *   - The client pins the cluster id of the first answer (or the one in its
 *     options) and refuses answers from any other cluster with
 *     ONCE_STATUS_FAILED_PRECONDITION, applied FALSE, error "cluster id
 *     mismatch ...": a client never trusts an amnesiac authority.
 *
 * Results
 *   Each call fills a struct once_result. `status` says whether the call got
 *   an answer: ONCE_STATUS_OK means `outcome` (ACCEPTED, REPLAYED, ...) is
 *   the cluster's decision; any other status is an error, and `applied`
 *   says whether it may have taken effect (ONCE_APPLIED_FALSE: certainly
 *   not; ONCE_APPLIED_UNKNOWN: perhaps). A result owns heap memory (the
 *   stored result bytes): release it with once_result_clear, which also
 *   makes it ready for reuse.
 *
 * Threads
 *   A client is not thread-safe: use it from one thread at a time (one
 *   client per thread is the intended pattern; clients share nothing).
 *   The asynchronous calls run their callbacks from inside once_run on the
 *   calling thread. Functions without a client are reentrant.
 *
 * Ownership
 *   Every pointer passed in is borrowed for the duration of the call (the
 *   library copies what it keeps). Pointers inside a result are owned by
 *   the result. */
#ifndef ONCE_H_
#define ONCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ONCE_ID_LEN           16 /* request id, cluster id, boot id */
#define ONCE_SCOPE_MAX        128
#define ONCE_KEY_MAX          256
#define ONCE_EXECUTION_ID_MAX 128
#define ONCE_PAYLOAD_HASH_MAX 64
#define ONCE_RESULT_MAX       65536
#define ONCE_ERROR_MAX        1024
#define ONCE_ADDR_MAX         64
#define ONCE_ATTEMPTS_MAX     5 /* the first and the last 4 */
/* Largest max_uses of an N-use NONCE claim (log schema 3). */
#define ONCE_MAX_USES    64
#define ONCE_MEMBERS_MAX 64
#define ONCE_ADDRS_MAX   64 /* addresses in once_options */

/* Call status: gRPC names and numbers (docs/design.md §5). */
enum once_status {
    ONCE_STATUS_OK = 0,
    ONCE_STATUS_UNKNOWN = 2, /* outcome unknown */
    ONCE_STATUS_INVALID_ARGUMENT = 3,
    ONCE_STATUS_DEADLINE_EXCEEDED = 4,
    ONCE_STATUS_PERMISSION_DENIED = 7,
    ONCE_STATUS_RESOURCE_EXHAUSTED = 8,
    ONCE_STATUS_FAILED_PRECONDITION = 9,
    ONCE_STATUS_UNAVAILABLE = 14,
};

enum once_applied {
    ONCE_APPLIED_NONE = 0,    /* status OK */
    ONCE_APPLIED_FALSE = 1,   /* certainly not applied */
    ONCE_APPLIED_UNKNOWN = 2, /* may have been applied */
};

/* The cluster's decision (status OK). Numbers are the wire's. */
enum once_outcome {
    ONCE_UNSPECIFIED = 0,
    ONCE_ACCEPTED = 1,
    ONCE_REPLAYED = 2,
    ONCE_DUPLICATE = 3,
    ONCE_IN_PROGRESS = 4,
    ONCE_CONFLICT = 5,
    ONCE_STALE = 6,
    ONCE_FUTURE = 7,
    ONCE_FAILED = 8,
    ONCE_NOT_OWNER = 9,
    ONCE_NOT_FOUND = 10,
    ONCE_COMPLETED = 11,
    ONCE_RELEASED = 12,
    ONCE_OUT_OF_SPACE = 13,     /* the table is full: a new record refused */
    ONCE_REFUSED_ARGUMENT = 14, /* the state machine refused a bound */
    ONCE_FOUND = 15,            /* lookup of a live record */
    ONCE_FORGOTTEN = 16,
    ONCE_OK = 17,                  /* configuration command applied */
    ONCE_FAILED_PRECONDITION = 18, /* configuration command refused */
};

enum once_kind {
    ONCE_NONCE = 1,
    ONCE_IDEMPOTENT = 2,
};

enum once_state {
    ONCE_STATE_NONE = 0,
    ONCE_STATE_SEEN = 1, /* NONCE */
    ONCE_STATE_PENDING = 2,
    ONCE_STATE_COMPLETED = 3,
    ONCE_STATE_RELEASED = 4,
    ONCE_STATE_FAILED = 5,
};

enum once_role {
    ONCE_ROLE_NONE = 0,
    ONCE_ROLE_VOTER = 1,
    ONCE_ROLE_STANDBY = 2,
    ONCE_ROLE_SPARE = 3,
};

struct once_token
{
    uint32_t group_id;
    uint64_t index;
    uint32_t slot;
};

struct once_attempt
{
    uint8_t request_id[ONCE_ID_LEN];
    uint8_t execution_id[ONCE_EXECUTION_ID_MAX];
    size_t execution_id_len;
    uint64_t index;
    uint64_t time_ms;
    enum once_outcome outcome;
    bool retry;
};

/* Who answered (every answer carries it). */
struct once_origin
{
    bool has_cluster_id;
    uint8_t cluster_id[ONCE_ID_LEN];
    uint64_t node_id;
    bool has_boot_id;
    uint8_t boot_id[ONCE_ID_LEN];
};

struct once_result
{
    /* Transport. */
    enum once_status status;
    enum once_applied applied;
    char error[ONCE_ERROR_MAX + 1];      /* "" when OK */
    char leader_hint[ONCE_ADDR_MAX + 1]; /* "" unless given */
    struct once_origin origin;

    /* Decision (status OK); fields set as they apply (docs/design.md §6). */
    enum once_outcome outcome;
    bool retry;
    /* The cluster's log time (ms) at which the state machine decided this
     * answer (the leader-stamped time in force at apply; for lookup, at the
     * read): what windows, leases and expiry were judged against. 0 from a
     * node that does not send it. */
    uint64_t log_time_ms;
    uint8_t request_id[ONCE_ID_LEN]; /* this call's */
    bool has_first;
    uint8_t first_request_id[ONCE_ID_LEN];
    uint64_t first_index;
    uint64_t first_time_ms;
    uint32_t attempts_total;
    size_t n_attempts;
    struct once_attempt attempts[ONCE_ATTEMPTS_MAX];
    bool has_owner_token;
    struct once_token owner_token;
    uint8_t *result; /* owned; NULL when result_len is 0 */
    size_t result_len;
    char stored_error[ONCE_ERROR_MAX + 1];
    size_t stored_error_len;
    uint64_t retry_after_ms;
    char reason[257];
    enum once_kind kind; /* of the record, when there is one */
    enum once_state state;
    uint64_t expires_ms;
    uint64_t lease_expires_ms;
    uint32_t owner_attempt;
    /* Lookup (appended last): the id of the node that read its table (the
     * node the call reached, after a read barrier, or the leader with
     * ONCE_LOOKUP_LEADER); 0 from a node that does not send it. */
    uint64_t served_by;
    /* NONCE records: uses allowed (1 unless N-use), accepted so far, left;
     * 0 for IDEMPOTENT or from a node that does not send them. */
    uint32_t max_uses;
    uint32_t uses;
    uint32_t uses_left;
    bool sliding; /* IDEMPOTENT: the record's retention slides */
};

/* Zero @r (no allocation). */
void once_result_init(struct once_result *r);
/* Free what @r owns and zero it. NULL-safe. */
void once_result_clear(struct once_result *r);

/* ------------------------------------------------------------------------
 * Client
 * ---------------------------------------------------------------------- */

typedef struct once_client once_client;

struct once_options
{
    const char *const *addrs; /* client addresses "IP:PORT", 1..64 */
    size_t n_addrs;
    uint32_t timeout_ms; /* default deadline per call; 0: 5000 */
    bool pin_cluster_id; /* true: accept only this cluster */
    uint8_t cluster_id[ONCE_ID_LEN];
    uint32_t max_inflight; /* async calls in flight; 0: 1024 */
    /* TLS (appended last; once_options_init zeroes them, so source that
     * sets only the older fields keeps plaintext when rebuilt; the struct
     * grew, so a program must be compiled against this header). tls_ca:
     * the CA bundle (PEM) the nodes' certificates must chain to; set, every
     * connection is TLS 1.3 and each node's certificate must carry the IP
     * of its address as an IP SAN. tls_cert/tls_key: this client's certificate
     * chain and key (PEM), both or neither; nodes with TLS refuse a client
     * without one. NULL: not given; the files are read by once_client_new. */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
};

/* Zero @o and set the defaults. */
void once_options_init(struct once_options *o);

/* Make a client. Connects lazily (nothing is sent here). Returns 0 and
 * *out, or a negated errno value with a message in @err (@errlen bytes):
 * -EINVAL for bad options (TLS files refused included), -ENOMEM, or the
 * system's error making the event loop.
 * If SIGPIPE still has its default disposition, it is set to SIG_IGN (a
 * node that resets a connection must not kill the process). */
int once_client_new(const struct once_options *o,
                    once_client **out,
                    char *err,
                    size_t errlen);

/* Close connections, fail outstanding async calls (their callbacks run
 * with status UNKNOWN / applied UNKNOWN if sent, UNAVAILABLE / FALSE if
 * not) and free. NULL-safe. Called from inside a callback, it takes
 * effect when the callback returns: once_run then fails the calls left as
 * above, frees the client and returns 0. */
void once_client_free(once_client *c);

/* The cluster id pinned so far (false: none yet). */
bool once_client_cluster_id(const once_client *c, uint8_t out[ONCE_ID_LEN]);

/* Fill @out with ONCE_ID_LEN random bytes (OpenSSL RAND_bytes, drawn in
 * blocks into a per-thread buffer that a fork discards). 0, or -EIO if the
 * generator failed. */
int once_request_id_new(uint8_t out[ONCE_ID_LEN]);

/* ------------------------------------------------------------------------
 * Calls. Each returns r->status (0 == ONCE_STATUS_OK) after filling @r
 * (which the caller has initialised; it is cleared first). Bad arguments
 * give ONCE_STATUS_INVALID_ARGUMENT, applied FALSE, without a round trip.
 * ---------------------------------------------------------------------- */

struct once_claim
{
    const uint8_t *scope; /* 1..128 bytes */
    size_t scope_len;
    const uint8_t *key; /* 1..256 bytes */
    size_t key_len;
    enum once_kind kind;
    const uint8_t *request_id;   /* NULL: fresh random; else 16 bytes */
    const uint8_t *execution_id; /* NULL or 0..128 bytes, evidence */
    size_t execution_id_len;
    uint64_t ttl_ms; /* 0: none (then ts + window is required) */
    bool has_ts;
    uint64_t ts_ms;              /* signed timestamp, unix ms */
    uint64_t window_ms;          /* with has_ts */
    const uint8_t *payload_hash; /* IDEMPOTENT, 0..64 bytes */
    size_t payload_hash_len;
    uint64_t lease_ms;   /* IDEMPOTENT, 0: the cluster's default */
    uint32_t timeout_ms; /* 0: the client's */
    /* Log schema 3 (docs/state-machine.md, "N-use nonces"; a cluster of
     * an older schema answers FAILED_PRECONDITION). NONCE: uses the
     * record allows, 0 or 1 = one, at most ONCE_MAX_USES; the first claim
     * fixes it, another value is CONFLICT. */
    uint32_t max_uses;
    /* IDEMPOTENT with ttl_ms: DUPLICATE, IN_PROGRESS and FAILED answers
     * renew the retention to log time + ttl ("Sliding retention"). */
    bool sliding;
};

struct once_complete
{
    const uint8_t *scope;
    size_t scope_len;
    const uint8_t *key;
    size_t key_len;
    struct once_token owner_token;
    const uint8_t *result; /* 0..65536 bytes */
    size_t result_len;
    const uint8_t *request_id; /* NULL: fresh */
    uint32_t timeout_ms;
};

struct once_release
{
    const uint8_t *scope;
    size_t scope_len;
    const uint8_t *key;
    size_t key_len;
    struct once_token owner_token;
    bool terminal;        /* true: FAILED with @error, final */
    const uint8_t *error; /* 0..1024 bytes */
    size_t error_len;
    const uint8_t *request_id; /* NULL: fresh */
    uint32_t timeout_ms;
};

int once_claim(once_client *c,
               const struct once_claim *a,
               struct once_result *r);
int once_complete(once_client *c,
                  const struct once_complete *a,
                  struct once_result *r);
int once_release(once_client *c,
                 const struct once_release *a,
                 struct once_result *r);
/* Linearizable read of a record (FOUND or NOT_FOUND). */
int once_lookup(once_client *c,
                const uint8_t *scope,
                size_t scope_len,
                const uint8_t *key,
                size_t key_len,
                uint32_t timeout_ms,
                struct once_result *r);
/* once_lookup_flags: ONCE_LOOKUP_LEADER asks that the leader read (the
 * node the call reaches forwards it there), as every lookup did before
 * follower reads. Without it (once_lookup) the node the call reaches reads
 * its own table after a read barrier: it asks the leader for an index
 * proven current, waits until it applied it, then reads; as linearizable,
 * and r->served_by names the node. A node cut off from the leader answers
 * UNAVAILABLE within the deadline, never a stale read. */
#define ONCE_LOOKUP_LEADER 1u
int once_lookup_flags(once_client *c,
                      const uint8_t *scope,
                      size_t scope_len,
                      const uint8_t *key,
                      size_t key_len,
                      unsigned flags,
                      uint32_t timeout_ms,
                      struct once_result *r);
/* Admin: delete a record's business history (FORGOTTEN or NOT_FOUND). */
int once_forget(once_client *c,
                const uint8_t *scope,
                size_t scope_len,
                const uint8_t *key,
                size_t key_len,
                uint32_t timeout_ms,
                struct once_result *r);

/* ------------------------------------------------------------------------
 * Pipelined asynchronous calls (the benchmark's interface). Submit any
 * number up to max_inflight, then drive them with once_run. Each callback
 * runs exactly once, from inside once_run or once_client_free; @r is valid
 * only during it (the library clears it afterwards).
 * ---------------------------------------------------------------------- */

typedef void (*once_cb)(void *arg, struct once_result *r);

/* 0 if queued; else no callback runs, the reason is in the client's last
 * error, and the value is a negated errno: -EBUSY if max_inflight calls
 * are outstanding, -EINVAL if @a (or @c, @cb) is invalid, -ESHUTDOWN if
 * the client is closing, -ENOMEM, -EIO if no request id could be made. */
int once_claim_async(once_client *c,
                     const struct once_claim *a,
                     once_cb cb,
                     void *arg);

/* A lookup (as once_lookup_flags), pipelined; the same return convention
 * as once_claim_async. */
int once_lookup_async(once_client *c,
                      const uint8_t *scope,
                      size_t scope_len,
                      const uint8_t *key,
                      size_t key_len,
                      unsigned flags,
                      uint32_t timeout_ms,
                      once_cb cb,
                      void *arg);

/* Run I/O and callbacks until no call is outstanding or @timeout_ms passed
 * (-1: no limit; 0: only what is ready now). Returns the number of calls
 * still outstanding. */
int once_run(once_client *c, int timeout_ms);

/* Text of the last error once_client_new/once_claim_async gave. */
const char *once_client_last_error(const once_client *c);

/* ------------------------------------------------------------------------
 * Batch claims: up to ONCE_BATCH_MAX claims in one call, one round trip
 * and one consensus round for all of them (docs/design.md §5, ClaimBatch).
 *
 * Each item is a struct once_claim as once_claim takes it (its timeout_ms
 * is ignored: the batch has one deadline, @timeout_ms, 0: the client's)
 * and gets its own request id (given, or fresh). The cluster applies the
 * items in order, as consecutive claims, so @rs[i] is exactly what
 * once_claim would have answered at that point (a key twice in one batch:
 * ACCEPTED, then REPLAYED). Each result has its own status: an item the
 * cluster refused alone (a bound, PERMISSION_DENIED for its scope, a full
 * queue) says so in its @rs[i], never in the others'. Items whose outcome
 * is unknown or that were refused "not now" (UNAVAILABLE, RESOURCE_EXHAUSTED)
 * are sent again, alone, with their request ids, until the deadline; a
 * call-level failure (no leader, connection lost) is retried for all of
 * the items left, likewise. An item argument the library refuses makes
 * the whole call INVALID_ARGUMENT without a round trip (the caller's bug).
 *
 * The encoded items are bounded too: ONCE_BATCH_BYTES_MAX bytes (about
 * 1,600 claims of the largest size; 4,096 of up to ~240 bytes each).
 * ---------------------------------------------------------------------- */

#define ONCE_BATCH_MAX       4096
#define ONCE_BATCH_BYTES_MAX 1015808 /* 992 KiB of encoded ClaimRequests */

/* @rs: @n results the caller has initialised (once_result_init); each is
 * cleared and filled. Returns ONCE_STATUS_OK if every item got a decision
 * (status OK), else the status of the first item that did not. */
int once_claim_batch(once_client *c,
                     const struct once_claim *items,
                     size_t n,
                     uint32_t timeout_ms,
                     struct once_result *rs);

/* @rs[0..n) valid only during the callback (the library clears them);
 * @status as once_claim_batch returns it. */
typedef void (*once_batch_cb)(void *arg,
                              int status,
                              struct once_result *rs,
                              size_t n);

/* As once_claim_async, for a batch (it counts as one call against
 * max_inflight): 0 if queued, else a negated errno and no callback. */
int once_claim_batch_async(once_client *c,
                           const struct once_claim *items,
                           size_t n,
                           uint32_t timeout_ms,
                           once_batch_cb cb,
                           void *arg);

/* ------------------------------------------------------------------------
 * Admin
 * ---------------------------------------------------------------------- */

struct once_member
{
    uint64_t id;
    char raft_addr[ONCE_ADDR_MAX + 1];
    char client_addr[ONCE_ADDR_MAX + 1];
    enum once_role role;
    bool reachable;
};

enum once_raft_role {
    ONCE_RAFT_NONE = 0,
    ONCE_RAFT_FOLLOWER = 1,
    ONCE_RAFT_CANDIDATE = 2,
    ONCE_RAFT_LEADER = 3,
    ONCE_RAFT_UNAVAILABLE = 4,
};

struct once_status_info
{
    enum once_raft_role role;
    uint64_t term;
    uint64_t commit_index;
    uint64_t applied_index;
    /* Digest chained over every entry applied, at applied_index: equal on
     * every node at the same applied index. */
    uint64_t applied_digest;
    uint64_t config_index;
    uint64_t leader_id;
    char leader_addr[ONCE_ADDR_MAX + 1];
    char store_backend[33];
    enum once_role member_role;
    size_t n_members;
    struct once_member members[ONCE_MEMBERS_MAX];
    /* The voters of the Raft configuration at config_index (raft's view;
     * the directory above is the state machine's). */
    size_t n_config_voters;
    uint64_t config_voters[ONCE_MEMBERS_MAX];
    /* once_status_digest only (else 0): a digest of the whole state machine
     * at applied_index, equal on nodes at the same applied_index. */
    uint64_t state_digest;
    /* A cluster restored from a backup, while its restore fence stands
     * (else restored false and the rest 0): the backup's cluster id, the
     * log time of the restore, until when TTL-only and IDEMPOTENT claims of
     * new keys are refused (0: the operator accepted the replay window),
     * and the ts at or before which a nonce is STALE. */
    bool restored;
    uint8_t restored_from[ONCE_ID_LEN];
    uint64_t restore_time_ms;
    uint64_t replay_window_until_ms;
    uint64_t restore_stale_ts_ms;
    /* Backups the node is serving (Admin.BackupOpen). */
    unsigned backups_open;
    /* The log schema in force (0 before the bootstrap) and the highest the
     * node's binary applies (oncectl schema upgrade). */
    uint32_t schema;
    uint32_t schema_max;
    /* Non-zero while the node neither votes nor campaigns: its store cut a
     * torn tail at this index at load, and it waits until its log holds the
     * index again (docs/operations.md, "A cluster that elects no leader
     * after a power loss"). 0: it votes. */
    uint64_t no_vote_cut_index;
};

/* Admin answers: r->status as above; the configuration outcome (ONCE_OK or
 * ONCE_FAILED_PRECONDITION with r->reason) in r->outcome. */

/* Status of one node: the one at @addr (must be one of the client's
 * addresses), or NULL: the first that answers. Served by that node itself,
 * never forwarded. */
int once_status(once_client *c,
                const char *addr,
                uint32_t timeout_ms,
                struct once_status_info *out,
                struct once_result *r);

/* As once_status, and the node also hashes its whole state machine (the
 * canonical snapshot bytes) into out->state_digest: O(state) work on that
 * node, for tests and audits, not for frequent monitoring. */
int once_status_digest(once_client *c,
                       const char *addr,
                       uint32_t timeout_ms,
                       struct once_status_info *out,
                       struct once_result *r);
int once_members_list(once_client *c,
                      uint32_t timeout_ms,
                      struct once_member *out, /* ONCE_MEMBERS_MAX */
                      size_t *n_out,
                      struct once_result *r);
int once_members_add(once_client *c,
                     const struct once_member *m,
                     uint32_t timeout_ms,
                     struct once_result *r);
int once_members_remove(once_client *c,
                        uint64_t id,
                        uint32_t timeout_ms,
                        struct once_result *r);
int once_members_assign(once_client *c,
                        uint64_t id,
                        enum once_role role,
                        uint32_t timeout_ms,
                        struct once_result *r);
/* With ONCE_MEMBERS_FORCE the leader skips its safety checks: a removal
 * or demotion that would leave a single voter, or that removes a voter
 * while most of the remaining voters are unreachable, is otherwise
 * refused with ONCE_FAILED_PRECONDITION and a reason. */
#define ONCE_MEMBERS_FORCE 1u
int once_members_remove_flags(once_client *c,
                              uint64_t id,
                              unsigned flags,
                              uint32_t timeout_ms,
                              struct once_result *r);
int once_members_assign_flags(once_client *c,
                              uint64_t id,
                              enum once_role role,
                              unsigned flags,
                              uint32_t timeout_ms,
                              struct once_result *r);
/* Transfer leadership to @id (0: the leader chooses). *new_leader: the new
 * leader's id when known, else 0. */
int once_transfer(once_client *c,
                  uint64_t id,
                  uint32_t timeout_ms,
                  uint64_t *new_leader,
                  struct once_result *r);
/* Quotas (docs/state-machine.md, "Quotas"): at most ONCE_QUOTAS_MAX
 * patterns, each an exact scope or a prefix then '*' (1..129 bytes). */
#define ONCE_QUOTAS_MAX  64
#define ONCE_PATTERN_MAX 129
struct once_quota
{
    char pattern[ONCE_PATTERN_MAX + 1];
    uint64_t max_records; /* 0: no limit */
    uint64_t max_bytes;   /* 0: no limit */
    uint64_t records;     /* usage, as of the leader's applied state */
    uint64_t bytes;
};
/* Set @pattern's quota (not both limits 0), or remove it. r->outcome:
 * ONCE_OK, or a refusal with r->reason (ONCE_FAILED_PRECONDITION: schema
 * 2 not in force, or 64 quotas already; ONCE_INVALID_ARGUMENT;
 * ONCE_NOT_FOUND: no such quota to remove). */
int once_quota_set(once_client *c,
                   const char *pattern,
                   uint64_t max_records,
                   uint64_t max_bytes,
                   uint32_t timeout_ms,
                   struct once_result *r);
int once_quota_remove(once_client *c,
                      const char *pattern,
                      uint32_t timeout_ms,
                      struct once_result *r);
/* The quotas, sorted by pattern, with their usage. */
int once_quota_list(once_client *c,
                    uint32_t timeout_ms,
                    struct once_quota *out, /* ONCE_QUOTAS_MAX */
                    size_t *n_out,
                    struct once_result *r);
/* Raise the log schema in force to @target (0: the leader's newest): the
 * leader proposes it only when every voter reports supporting it, else
 * ONCE_FAILED_PRECONDITION naming those that do not. *@schema (may be
 * NULL): the schema in force after the call. */
int once_schema_upgrade(once_client *c,
                        uint32_t target,
                        uint32_t timeout_ms,
                        uint32_t *schema,
                        struct once_result *r);

/* Take a snapshot on the leader now. */
int once_snapshot_take(once_client *c,
                       uint32_t timeout_ms,
                       uint64_t *index,
                       uint64_t *size_bytes,
                       struct once_result *r);

/* Backups, from the leader (oncectl snapshot backup; docs/oncectl.md).
 * once_backup_open freezes the leader's state and starts encoding it into a
 * file there; *backup_id names it. once_backup_read reads up to @cap bytes
 * (1..ONCE_BACKUP_READ_MAX) at @offset into @buf: *ready false while the
 * leader is still encoding (ask again later), else *total its length and
 * *n the bytes read (0 at the end), checked against the leader's CRC-32C
 * (a mismatch is ONCE_STATUS_UNKNOWN). once_backup_close removes it (the
 * leader also removes one nobody read for --backup-idle-timeout, a minute
 * by default). A leader change
 * loses the backup: a read then gets FAILED_PRECONDITION. */
#define ONCE_BACKUP_READ_MAX (256u << 10)
int once_backup_open(once_client *c,
                     uint32_t timeout_ms,
                     uint64_t *backup_id,
                     struct once_result *r);
int once_backup_read(once_client *c,
                     uint64_t backup_id,
                     uint64_t offset,
                     uint8_t *buf,
                     size_t cap,
                     uint32_t timeout_ms,
                     bool *ready,
                     uint64_t *total,
                     size_t *n,
                     struct once_result *r);
int once_backup_close(once_client *c,
                      uint64_t backup_id,
                      uint32_t timeout_ms,
                      struct once_result *r);

/* Names: "ACCEPTED", "UNAVAILABLE", "false"/"unknown", "VOTER", ...;
 * "UNKNOWN_VALUE" for a number out of range. Static strings. */
const char *once_outcome_name(enum once_outcome o);
const char *once_status_name(enum once_status s);
const char *once_applied_name(enum once_applied a);
const char *once_role_name(enum once_role r);
const char *once_raft_role_name(enum once_raft_role r);
const char *once_state_name(enum once_state s);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_H_ */
