/* tests/lib/fsm_helpers.h: helpers for the state machine tests, shared by
 * unit-fsm and the Raft fixture programs of tests/raft.
 *
 * A struct fh wraps one struct fsm and the log index the tests feed it: each
 * batch applied through these helpers uses the index after the previous one,
 * as the raft adapter does (last applied + 1). A batch goes either straight
 * to fsm_apply_cmds (FH_DIRECT) or through the log codec (FH_PROTOBUF:
 * command_encode + command_encode_batch + fsm_apply), so that one test body
 * can exercise both paths (run it as a Check loop test over _i = 0, 1).
 *
 * The outcome of every command is copied into a struct fh_res: the pointers
 * of a struct fsm_result are only valid while the emit callback runs, so the
 * result bytes, the stored error, the reason and the attempt list are copied
 * into fixed buffers.
 *
 * Every helper fails the running test (ck_assert) on an internal error, such
 * as an allocation failure or an encoding the caller did not expect to fail;
 * the outcomes under test are returned, never asserted, by the helpers. */
#ifndef ONCE_TESTS_UNIT_FSM_HELPERS_H_
#define ONCE_TESTS_UNIT_FSM_HELPERS_H_

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm/fsm.h"

/* Log time used by most tests: 2023-11-14, a realistic unix time in ms. */
#define FH_T0 1700000000000ull
/* Group id of the clusters made by fh_bootstrap_cmd (not 1, so that a token
 * built from a default is caught). */
#define FH_GROUP_ID 7u
/* Length of the reason copy kept in a struct fh_res. */
#define FH_REASON_MAX 160

/* Which path a batch takes into the state machine. */
enum fh_path {
    FH_DIRECT = 0,   /* fsm_apply_cmds with the struct fsm_cmd values */
    FH_PROTOBUF = 1, /* encode each command and the batch, then fsm_apply */
};

/* One state machine under test. */
struct fh
{
    struct fsm *f;
    enum fh_path path; /* may be changed between batches */
    uint64_t index;    /* index of the last batch applied (0: none yet) */
};

/* A copy of one struct fsm_result, valid for as long as the caller wants. */
struct fh_res
{
    bool emitted; /* the emit callback was called for this command */
    enum fsm_cmd_type cmd;
    enum fsm_outcome outcome;
    bool has_reason;
    char reason[FH_REASON_MAX]; /* "" when has_reason is false */
    bool retry;
    uint64_t log_time_ms; /* the log time the command was decided at */

    bool has_record;
    enum fsm_kind kind;
    enum fsm_state state;
    uint8_t first_request_id[FSM_REQUEST_ID_LEN];
    uint64_t first_index;
    uint64_t first_time_ms;
    uint64_t expires_ms;
    uint32_t attempts;
    uint32_t max_uses; /* NONCE: 1 unless N-use */
    uint32_t uses;
    bool sliding;

    struct fsm_token owner_token;
    uint32_t owner_attempt;
    uint64_t lease_expires_ms;
    uint64_t retry_after_ms;
    bool has_result; /* the result pointer was not NULL */
    size_t result_len;
    uint8_t result[FSM_RESULT_MAX];
    bool has_stored_error; /* the stored_error pointer was not NULL */
    size_t stored_error_len;
    uint8_t stored_error[FSM_ERROR_MAX];

    size_t n_attempt_list;
    struct fsm_attempt attempt_list[1 + FSM_ATTEMPTS_LAST];
};

/* ---- set-up -------------------------------------------------------------- */

/* Create an empty, unbootstrapped state machine whose batches take @path
 * (an int so that a loop test can pass _i). The first batch is at index 1. */
void fh_init(struct fh *h, int path);

/* Free the state machine. */
void fh_close(struct fh *h);

/* The settings most tests use, all explicit (none left to defaults):
 * max_window 300 s, max_skew 60 s, max_ttl FSM_MAX_TTL_CEIL (30 days),
 * max_lease 60 s, max_records 100000, max_bytes 64 MiB. */
void fh_settings(struct fsm_settings *s);

/* Fill @b with a valid bootstrap: cluster id 0x01..0x10, hash key
 * 0xa0..0xaf, group FH_GROUP_ID, settings @s (copied; NULL: all zero, so the
 * defaults apply) and no members. */
void fh_bootstrap_cmd(struct fsm_bootstrap *b, const struct fsm_settings *s);

/* fh_init, then apply a Bootstrap (fh_bootstrap_cmd with @s) at log time
 * @time and assert it answered OK. */
void fh_init_booted(struct fh *h,
                    int path,
                    const struct fsm_settings *s,
                    uint64_t time);

/* ---- building commands --------------------------------------------------- */

/* A deterministic 16-byte request id for @n: the 8 bytes of @n big-endian,
 * then their complement, so that different @n never collide and no id is all
 * zero. */
void fh_rid(uint8_t out[FSM_REQUEST_ID_LEN], uint64_t n);

/* True if @id is fh_rid(@n). */
bool fh_rid_is(const uint8_t id[FSM_REQUEST_ID_LEN], uint64_t n);

/* A claim of (@scope, @key) (C strings, borrowed) of @kind with request id
 * fh_rid(@rid); everything else 0 (no ttl, no ts, no hash, default lease, no
 * execution id). The caller sets ttl or ts before applying it. */
void fh_claim(struct fsm_claim *c,
              enum fsm_kind kind,
              const char *scope,
              const char *key,
              uint64_t rid);

/* Set the ts binding of @c: has_ts, @ts, @window. */
void fh_claim_ts(struct fsm_claim *c, uint64_t ts, uint64_t window);

/* Set the payload hash of @c to the C string @hash (borrowed; NULL: none). */
void fh_claim_hash(struct fsm_claim *c, const char *hash);

/* Set the execution id of @c to the C string @exec (borrowed). */
void fh_claim_exec(struct fsm_claim *c, const char *exec);

/* Wrap a command body in a struct fsm_cmd. Pointers stay borrowed. */
struct fsm_cmd fh_cmd_claim(const struct fsm_claim *c);
struct fsm_cmd fh_cmd_complete(const char *scope,
                               const char *key,
                               struct fsm_token token,
                               const void *result,
                               size_t result_len);
struct fsm_cmd fh_cmd_release(const char *scope,
                              const char *key,
                              struct fsm_token token,
                              bool terminal,
                              const void *error,
                              size_t error_len);
struct fsm_cmd fh_cmd_lookup(const char *scope, const char *key);
struct fsm_cmd fh_cmd_forget(const char *scope, const char *key);
struct fsm_cmd fh_cmd_bootstrap(struct fsm_bootstrap *b);
struct fsm_cmd fh_cmd_settings(const struct fsm_settings *s);
/* SetMember with the given addresses (copied, must fit FSM_ADDR_MAX). */
struct fsm_cmd fh_cmd_member(uint64_t id,
                             const char *raft_addr,
                             const char *client_addr,
                             enum fsm_role role);
struct fsm_cmd fh_cmd_retire(uint64_t id);
struct fsm_cmd fh_cmd_schema(uint32_t version);
/* QuotaSet of the C string @pattern (borrowed). */
struct fsm_cmd fh_cmd_quota(const char *pattern,
                            uint64_t max_records,
                            uint64_t max_bytes,
                            bool remove);
/* A command that did not decode (FSM_CMD_INVALID). On the protobuf path it
 * is sent as bytes that do not decode as a Command. */
struct fsm_cmd fh_cmd_invalid(void);

/* A token value. */
struct fsm_token fh_token(uint32_t group_id, uint64_t index, uint32_t slot);
bool fh_token_eq(struct fsm_token a, struct fsm_token b);

/* ---- applying ------------------------------------------------------------ */

/* Apply @n commands as one batch at the next index, with log time @time and
 * schema FSM_SCHEMA_VERSION, on h->path. Copies the outcome of command i
 * into @out[i] (@out: @n entries, or NULL). Returns what fsm_apply or
 * fsm_apply_cmds returned. When it returns 0, asserts that every command was
 * emitted once, in order. */
int fh_apply(struct fh *h,
             uint64_t time,
             const struct fsm_cmd *cmds,
             size_t n,
             struct fh_res *out);

/* fh_apply with an explicit batch schema version. */
int fh_apply_schema(struct fh *h,
                    uint32_t schema_version,
                    uint64_t time,
                    const struct fsm_cmd *cmds,
                    size_t n,
                    struct fh_res *out);

/* Apply one command (fh_apply with n = 1), assert the apply returned 0 and
 * return the command's outcome. @out may be NULL. */
enum fsm_outcome fh_do(struct fh *h,
                       uint64_t time,
                       const struct fsm_cmd *cmd,
                       struct fh_res *out);

/* Shorthands for fh_do. */
enum fsm_outcome fh_do_claim(struct fh *h,
                             uint64_t time,
                             const struct fsm_claim *c,
                             struct fh_res *out);
enum fsm_outcome fh_do_lookup(struct fh *h,
                              uint64_t time,
                              const char *scope,
                              const char *key,
                              struct fh_res *out);

/* Apply a batch with no command at log time @time: moves fsm_now and prunes
 * (it is a valid log entry, e.g. a leader's time tick). Asserts 0. */
void fh_tick(struct fh *h, uint64_t time);

/* Encode the batch envelope around already-encoded commands (@cmds, @lens
 * borrowed) with @schema_version and @time, and fsm_apply it at the next
 * index, copying outcomes into @out (n entries, or NULL). Returns what
 * fsm_apply returned. Lets a test put bytes of its choice in a batch. */
int fh_apply_encoded(struct fh *h,
                     uint32_t schema_version,
                     uint64_t time,
                     const uint8_t *const *cmds,
                     const size_t *lens,
                     size_t n,
                     struct fh_res *out);

/* fsm_apply raw batch bytes at the next index; outcomes into @out (@max
 * entries, or NULL). Returns what fsm_apply returned; *@n_emitted (may be
 * NULL) is the number of emit calls. */
int fh_apply_raw(struct fh *h,
                 const uint8_t *buf,
                 size_t len,
                 struct fh_res *out,
                 size_t max,
                 size_t *n_emitted);

/* command_encode @cmd, asserting success; the buffer is malloc'd. */
uint8_t *fh_encode(const struct fsm_cmd *cmd, size_t *len);

/* The read path: fsm_lookup (no batch, nothing recorded) copied into @out. */
void fh_lookup_read(struct fh *h,
                    const char *scope,
                    const char *key,
                    struct fh_res *out);

/* A calloc'd array of @n results (free with free()). */
struct fh_res *fh_res_array(size_t n);

/* The snapshot of @f (malloc'd, *@len bytes): two equal snapshots mean two
 * equal states, so tests use it to assert "nothing changed". */
uint8_t *fh_snapshot(const struct fsm *f, size_t *len);

/* Assert that the snapshot of h->f equals @snap (@len bytes). */
void fh_assert_snapshot(const struct fh *h, const uint8_t *snap, size_t len);

/* ---- assertions ---------------------------------------------------------- */

/* Assert that the struct fh_res *@r has outcome @want, naming both. */
#define fh_assert_outcome(r, want)                                 \
    ck_assert_msg((r)->outcome == (want),                          \
                  "%s: outcome %s (reason \"%s\"), "               \
                  "want %s",                                       \
                  #r, fsm_outcome_name((r)->outcome), (r)->reason, \
                  fsm_outcome_name(want))

/* Assert that an enum fsm_outcome value @got equals @want, naming both. */
#define fh_assert_is(got, want)                                     \
    ck_assert_msg((got) == (want), "%s: outcome %s, want %s", #got, \
                  fsm_outcome_name(got), fsm_outcome_name(want))

/* Assert that two tokens are equal, printing both. */
#define fh_assert_token(a, b)                                                  \
    ck_assert_msg(fh_token_eq((a), (b)), "token {%u,%llu,%u} != {%u,%llu,%u}", \
                  (a).group_id, (unsigned long long)(a).index, (a).slot,       \
                  (b).group_id, (unsigned long long)(b).index, (b).slot)

#endif /* ONCE_TESTS_UNIT_FSM_HELPERS_H_ */
