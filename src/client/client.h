/* client/client.h: the pure parts of libonce, shared by the library and
 * its tests.
 *
 * client.c, op.c and admin.c (client_int.h) own the loop, the channels and
 * the calls in flight; wire.c (checks, bodies, the decision) and
 * wire_read.c (answers) hold the pure parts they are built from, each
 * testable without a socket:
 *
 *   - argument checks: every bound of once.h is checked before a round trip
 *     (INVALID_ARGUMENT with a message naming the field);
 *   - request bodies: the arguments packed as <Method>Request;
 *   - answer conversion: a decoded <Method>Response (or its Result) checked
 *     against once.h's bounds and copied into once_result / the admin
 *     outputs. A malformed answer is refused whole: the caller decides what
 *     it means (unknown for a write, unavailable for a read);
 *   - the retry decision after one attempt (client_decide).
 *
 * None of these is exported from libonce.so (only once_* is). */
#ifndef ONCE_CLIENT_CLIENT_H_
#define ONCE_CLIENT_CLIENT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "once.h"
#include "once_rpc.pb-c.h"
#include "rpc/frame.h"

/* The messages the library makes itself (argument checks, answer checks)
 * are ERR_MSG_SIZE bytes (common/err.h); results' error[] holds
 * ONCE_ERROR_MAX + 1. */

/* Attempts whose deadline budget is longer than this are split: one
 * attempt waits at most half of what remains (but at least this long), so
 * a node that swallows requests (a black-holed connection) cannot take a
 * call's whole deadline when other nodes could answer. */
#define CLIENT_ATTEMPT_MIN_MS 1000u

/* Backoff between attempts: doubles from the first to the cap. */
#define CLIENT_BACKOFF_FIRST_MS 20u
#define CLIENT_BACKOFF_MAX_MS   200u

/* What one attempt means for its call. */
struct client_decision
{
    bool final;         /* this attempt's result is the call's */
    bool maybe_applied; /* this attempt may have taken effect */
};

/* The decision after one attempt:
 *   @rv < 0: the channel gave no answer (RPC_E_*), @sent as conn.h says;
 *   @rv == 0: an answer with @status and @applied (status OK is final).
 * Retried (final false): UNAVAILABLE, RESOURCE_EXHAUSTED, UNKNOWN,
 * DEADLINE_EXCEEDED, WRONG_GROUP, MOVING and every channel error but
 * RPC_E_CLOSED (the client is closing). Final: OK, INVALID_ARGUMENT,
 * FAILED_PRECONDITION, PERMISSION_DENIED. maybe_applied: a channel error
 * after sending, status UNKNOWN or DEADLINE_EXCEEDED (whatever the node
 * says: it may have forwarded the call before its deadline passed), or
 * an answer that says applied UNKNOWN. */
struct client_decision client_decide(int rv,
                                     bool sent,
                                     enum rpc_status status,
                                     enum rpc_applied applied);

/* The public status for a wire status (WRONG_GROUP and MOVING, reserved
 * for several groups, are UNAVAILABLE to this client). */
enum once_status client_status_from_rpc(enum rpc_status s);

/* The public status when the channel gave no answer (@rv < 0, RPC_E_* or
 * -errno; @sent as conn.h says): DEADLINE_EXCEEDED for RPC_E_TIMEOUT, else
 * UNKNOWN if the request may have left, UNAVAILABLE if it surely did not. */
enum once_status client_status_of_channel(int rv, bool sent);

/* Backoff after @prev_ms (0: the first one). */
unsigned client_backoff_next(unsigned prev_ms);

/* Budget of the next attempt when @remaining_ms of the deadline are left
 * (see CLIENT_ATTEMPT_MIN_MS); @split false: all of it. */
uint64_t client_attempt_budget(uint64_t remaining_ms, bool split);

/* ------------------------------------------------------------------------
 * Argument checks: true if valid, else false with a message naming the
 * field in @err (ERR_MSG_SIZE bytes).
 * ---------------------------------------------------------------------- */

bool client_check_options(const struct once_options *o, char *err);
bool client_check_timeout(uint32_t timeout_ms, char *err);
bool client_check_record(const uint8_t *scope,
                         size_t scope_len,
                         const uint8_t *key,
                         size_t key_len,
                         char *err);
bool client_check_claim(const struct once_claim *a, char *err);
bool client_check_complete(const struct once_complete *a, char *err);
bool client_check_release(const struct once_release *a, char *err);
bool client_check_member(const struct once_member *m, char *err);
bool client_check_role(enum once_role role, char *err);

/* ------------------------------------------------------------------------
 * Request bodies: 0 and a malloc'd *out (*out_len bytes; free()), or
 * -ENOMEM. The arguments must have passed their check.
 * ---------------------------------------------------------------------- */

int client_pack_claim(const struct once_claim *a,
                      const uint8_t request_id[ONCE_ID_LEN],
                      uint8_t **out,
                      size_t *out_len);
int client_pack_complete(const struct once_complete *a,
                         const uint8_t request_id[ONCE_ID_LEN],
                         uint8_t **out,
                         size_t *out_len);
int client_pack_release(const struct once_release *a,
                        const uint8_t request_id[ONCE_ID_LEN],
                        uint8_t **out,
                        size_t *out_len);
/* Lookup and Forget take the same fields. */
int client_pack_record(enum rpc_method method,
                       const uint8_t *scope,
                       size_t scope_len,
                       const uint8_t *key,
                       size_t key_len,
                       uint8_t **out,
                       size_t *out_len);
/* A LookupRequest; @leader_only: the leader reads (ONCE_LOOKUP_LEADER). */
int client_pack_lookup(const uint8_t *scope,
                       size_t scope_len,
                       const uint8_t *key,
                       size_t key_len,
                       bool leader_only,
                       uint8_t **out,
                       size_t *out_len);
int client_pack_member_add(const struct once_member *m,
                           uint8_t **out,
                           size_t *out_len);
/* BackupRead (offset, max bytes) and BackupClose (offset, max unused). */
int client_pack_backup(enum rpc_method method,
                       uint64_t backup_id,
                       uint64_t offset,
                       uint32_t max_bytes,
                       uint8_t **out,
                       size_t *out_len);
/* MembersRemove, MembersAssign (with @force: ONCE_MEMBERS_FORCE) or
 * Transfer of @id. */
int client_pack_id(enum rpc_method method,
                   uint64_t id,
                   enum once_role role,
                   bool force,
                   uint8_t **out,
                   size_t *out_len);
/* QuotaSet (@pattern of @len bytes) and SchemaUpgrade. */
int client_pack_quota_set(const char *pattern,
                          size_t len,
                          uint64_t max_records,
                          uint64_t max_bytes,
                          bool remove,
                          uint8_t **out,
                          size_t *out_len);
int client_pack_schema_upgrade(uint32_t target, uint8_t **out, size_t *out_len);
/* Status with state_digest set (without it the request is empty). */
int client_pack_status(bool state_digest, uint8_t **out, size_t *out_len);
/* Status, MembersList, SnapshotTake: empty requests (NULL, 0). */

/* ------------------------------------------------------------------------
 * Answers: 0 after filling the outputs, or with the reason in @err
 * RPC_E_PROTOCOL (the answer breaks a bound), RPC_E_NOMEM, or -EINVAL (a
 * BackupRead without its buffer). Outputs are then partly written: the
 * caller discards them, and @r's owned memory stays consistent for
 * once_result_clear.
 * ---------------------------------------------------------------------- */

/* The decision of Claim/Complete/Release/Lookup/Forget. @r's transport
 * fields and request_id are the caller's; @res may be NULL (malformed). */
int client_read_result(const Once__Rpc__Result *res,
                       struct once_result *r,
                       char *err);
/* The body of a decoded OK answer of @method, into @r (and the outputs
 * the method has: @status_out, @members_out + @n_members_out,
 * @u64_a (transfer: new leader; snapshot: index), @u64_b (snapshot: size);
 * each may be NULL when @method has no such output). */
/* ClaimBatch: where each answered item goes: item k of the answer into
 * rs[idx[k]], for k < n (the items sent, in order). */
struct client_batch_out
{
    struct once_result *rs;
    const size_t *idx;
    size_t n;
};

struct client_outputs
{
    struct once_status_info *status;
    struct once_member *members; /* ONCE_MEMBERS_MAX */
    size_t *n_members;
    struct once_quota *quotas; /* ONCE_QUOTAS_MAX */
    size_t *n_quotas;
    uint32_t *schema; /* SchemaUpgrade */
    uint64_t *u64_a;
    uint64_t *u64_b;
    /* BackupRead: where the data goes (@buf_cap bytes) and its facts. */
    uint8_t *buf;
    size_t buf_cap;
    size_t *buf_n;
    bool *ready;
    struct client_batch_out *batch; /* ClaimBatch */
};
int client_read_body(enum rpc_method method,
                     const ProtobufCMessage *body,
                     struct once_result *r,
                     const struct client_outputs *out,
                     char *err);

/* ------------------------------------------------------------------------
 * The hand reader of the hot answers (answer_read.c): their bytes into the
 * protobuf-c structs above without protobuf-c's unpacker, declining (false,
 * or 1) whatever it cannot decode exactly as protobuf-c would, which the
 * caller then unpacks with protobuf-c. Byte fields borrow from the input.
 * ---------------------------------------------------------------------- */

/* A Result, with room for what it points to. */
struct client_pb_result
{
    Once__Rpc__Result res;
    Once__Rpc__OwnerToken token;
    Once__Rpc__Attempt attempts[ONCE_ATTEMPTS_MAX];
    Once__Rpc__Attempt *attempt_ptrs[ONCE_ATTEMPTS_MAX];
    char reason[sizeof(((struct once_result *)0)->reason)];
};
bool client_pb_result(const uint8_t *buf,
                      size_t len,
                      struct client_pb_result *out);

/* A ClaimBatchItem and its Result. */
struct client_pb_item
{
    Once__Rpc__ClaimBatchItem item;
    struct client_pb_result result;
};
bool client_pb_item(const uint8_t *buf, size_t len, struct client_pb_item *out);

/* The readers of Attempt and OwnerToken (flat), for the fuzz target. */
extern const struct pbr_spec client_attempt_pbr_spec;
extern const struct pbr_spec client_owner_token_pbr_spec;

/* client_read_body of an OK answer's @len body bytes at @body, read by
 * the hand reader (wire_read.c): Claim, Complete, Release, Forget, ClaimBatch.
 * 1 if declined (any other method, or bytes the reader declines): the caller
 * unpacks the body with protobuf-c and calls client_read_body; else
 * client_read_body's return for these very fields. */
int client_read_body_fast(enum rpc_method method,
                          const uint8_t *body,
                          size_t len,
                          struct once_result *r,
                          const struct client_outputs *out,
                          char *err);

/* One ClaimBatch answer item @k into @r (cleared first): 0 or
 * RPC_E_PROTOCOL (wire_read.c). */
int client_read_batch_item(size_t k,
                           const Once__Rpc__ClaimBatchItem *it,
                           struct once_result *r,
                           char *err);

#endif /* ONCE_CLIENT_CLIENT_H_ */
