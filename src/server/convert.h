/* server/convert.h: wire messages (once_rpc.proto) <-> fsm values.
 *
 * Requests: a decoded <Method>Request becomes a struct fsm_cmd whose
 * pointers borrow from the message (valid while the message is: for a
 * server, during the serve callback; the Raft layer copies the command when
 * it is submitted). Every field bound of docs/design.md §3 is checked here, so
 * a request the node accepts is one the fsm's decoder would accept: scope
 * 1..128, key 1..256, request id exactly 16 bytes, execution id <= 128,
 * payload hash <= 64 (IDEMPOTENT only), result <= 64 KiB, error <= 1 KiB,
 * kind known, a ttl or a timestamp with its window, no lease or payload
 * hash on a NONCE claim. The rules that depend on the cluster's settings
 * (ttl <= max_ttl, window <= max_window, lease <= max_lease) are checked
 * separately (convert_check_claim_settings) by the node that proposes,
 * against its applied settings; the fsm checks them again at apply.
 * A refusal returns -EINVAL and writes into @why (ERR_MSG_SIZE bytes,
 * common/err.h) a message that names the field, e.g. "key: must be 1..256
 * bytes".
 *
 * Results: convert_result_out fills a Once__Rpc__Result from a struct
 * fsm_result (pointers borrowed from the fsm result and from the caller's
 * struct convert_result_buf: pack it before either changes);
 * convert_result_in is the reverse for a decoded answer, bounds checked.
 * Commands can also be turned back into requests (convert_*_out), which is
 * what a client or a test needs to speak to a node with fsm values.
 *
 * Pure: no I/O, no allocation. Reentrant. */
#ifndef ONCE_SERVER_CONVERT_H_
#define ONCE_SERVER_CONVERT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "fsm/fsm.h"
#include "once_rpc.pb-c.h"

/* The size of @why: the one message size. The name stays for the callers
 * (service.c, admin.c, tests/fuzz/fuzz_body.c). */
#define CONVERT_WHY_SIZE ERR_MSG_SIZE

/* The request's own bytes; fills out->u.claim and out->type. */
int convert_claim_in(const Once__Rpc__ClaimRequest *in,
                     struct fsm_cmd *out,
                     char *why);
int convert_complete_in(const Once__Rpc__CompleteRequest *in,
                        struct fsm_cmd *out,
                        char *why);
int convert_release_in(const Once__Rpc__ReleaseRequest *in,
                       struct fsm_cmd *out,
                       char *why);
/* LookupRequest and ForgetRequest: @type is FSM_CMD_LOOKUP or _FORGET. */
int convert_ident_in(const ProtobufCBinaryData *scope,
                     const ProtobufCBinaryData *key,
                     enum fsm_cmd_type type,
                     struct fsm_cmd *out,
                     char *why);

/* The settings-dependent rules of a claim (see above). */
int convert_check_claim_settings(const struct fsm_claim *c,
                                 const struct fsm_settings *s,
                                 char *why);

/* A claim asking max_uses > 1 or sliding while schema @schema (the one in
 * force) is older than FSM_SCHEMA_NUSE: apply would ignore the fields, so
 * the proposing node refuses it instead. 0, or -EPERM with @res filled as
 * the FAILED_PRECONDITION answer (static reason). */
int convert_check_claim_schema(const struct fsm_claim *c,
                               uint32_t schema,
                               struct fsm_result *res);

/* A Member of MembersAdd: id non-zero, both addresses IPv4 IP:PORT of
 * 1..64 bytes, role VOTER or STANDBY (@for_add) or any known role. */
int convert_member_in(const Once__Rpc__Member *in,
                      bool for_add,
                      struct fsm_member *out,
                      char *why);
/* Role enums; 0 for an unknown value. */
enum fsm_role convert_role_in(Once__Rpc__Role r);
Once__Rpc__Role convert_role_out(enum fsm_role r);

/* @out borrows @m's strings. */
void convert_member_out(const struct fsm_member *m,
                        bool reachable,
                        Once__Rpc__Member *out);

/* A configuration answer (a ConfigResult: outcome and reason, the reason
 * cut to the wire's 256 bytes). @b holds what @out points at. */
struct convert_config_buf
{
    char reason[257];
};
void convert_config_out(enum fsm_outcome outcome,
                        const char *reason,
                        Once__Rpc__ConfigResult *out,
                        struct convert_config_buf *b);

/* Storage for one converted result (no allocation). */
struct convert_result_buf
{
    Once__Rpc__Result res;
    Once__Rpc__OwnerToken token;
    Once__Rpc__Attempt attempts[1 + FSM_ATTEMPTS_LAST];
    Once__Rpc__Attempt *attempt_ptrs[1 + FSM_ATTEMPTS_LAST];
    uint8_t request_id[FSM_REQUEST_ID_LEN];
};

/* Fill @b->res from @r; @request_id (16 bytes, copied) is this call's, or
 * NULL for calls without one (Lookup, Forget). Every field of docs/design.md §6
 * is set as it applies: outcome, retry, log_time_ms, request_id,
 * first_request_id, first_index, first_time_ms (record facts, when there is
 * a record),
 * attempts (total, and the kept list for Lookup), owner token (when the fsm
 * gives it), result, stored_error, retry_after_ms, reason, kind, state,
 * expires, lease. */
void convert_result_out(const struct fsm_result *r,
                        const uint8_t *request_id,
                        struct convert_result_buf *b);

/* The reverse of convert_result_out for a decoded answer: @out borrows from
 * @in, @attempts holds the kept attempts. -EINVAL with @why if a field is out
 * of its bound or an enum unknown. */
int convert_result_in(const Once__Rpc__Result *in,
                      struct fsm_result *out,
                      struct fsm_attempt attempts[1 + FSM_ATTEMPTS_LAST],
                      char *why);

/* A ClaimBatchRequest's own bounds (not its items'): 1..RPC_CLAIM_BATCH_MAX
 * items, at most RPC_CLAIM_BATCH_BYTES_MAX bytes encoded. Each item is
 * then a ClaimRequest for convert_claim_in, answered alone. */
int convert_claim_batch_check(const Once__Rpc__ClaimBatchRequest *in,
                              char *why);

/* fsm command -> request (pointers borrowed from @c). */
void convert_claim_out(const struct fsm_claim *c, Once__Rpc__ClaimRequest *out);
void convert_complete_out(const struct fsm_complete *c,
                          const uint8_t request_id[FSM_REQUEST_ID_LEN],
                          Once__Rpc__CompleteRequest *out,
                          Once__Rpc__OwnerToken *token);
void convert_release_out(const struct fsm_release *c,
                         const uint8_t request_id[FSM_REQUEST_ID_LEN],
                         Once__Rpc__ReleaseRequest *out,
                         Once__Rpc__OwnerToken *token);

#endif /* ONCE_SERVER_CONVERT_H_ */
