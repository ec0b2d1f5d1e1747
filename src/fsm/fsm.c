/* The claim state machine: life cycle, apply and observers.
 * docs/state-machine.md is the rulebook this module implements; the work is
 * split by responsibility over fsm_int.h:
 *   fsm.c         life cycle, names, batch apply, observers;
 *   fsm_record.c  record storage: exts, attempts, detach, result facts;
 *   fsm_wheel.c   the timer wheel and pruning;
 *   fsm_claim.c   Claim, Complete, Release, Lookup, Forget;
 *   fsm_config.c  Bootstrap, settings, members, retired ids;
 *   fsm_quota.c   per scope pattern quotas (QuotaSet, usage);
 *   snapshot.c    the canonical snapshot (encoding);
 *   snapshot_read.c  restore (decoding).
 *
 * Layout: records are slab objects (fsm_int.h) indexed per virtual partition
 * by an ordered Robin Hood table (table.c) and chained, by expiry tick, into
 * a two-level timer wheel (fsm_wheel.c). Applying a batch first advances log
 * time, then frees the records of every wheel tick that has fully passed,
 * then applies the commands in order. */
#include "fsm/fsm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "fsm/fsm_int.h"

/* ------------------------------------------------------------------------
 * Names and settings
 * ---------------------------------------------------------------------- */

const char *fsm_outcome_name(enum fsm_outcome o)
{
    switch (o) {
        case FSM_ACCEPTED:
            return "ACCEPTED";
        case FSM_REPLAYED:
            return "REPLAYED";
        case FSM_DUPLICATE:
            return "DUPLICATE";
        case FSM_IN_PROGRESS:
            return "IN_PROGRESS";
        case FSM_CONFLICT:
            return "CONFLICT";
        case FSM_STALE:
            return "STALE";
        case FSM_FUTURE:
            return "FUTURE";
        case FSM_FAILED:
            return "FAILED";
        case FSM_NOT_OWNER:
            return "NOT_OWNER";
        case FSM_NOT_FOUND:
            return "NOT_FOUND";
        case FSM_COMPLETED:
            return "COMPLETED";
        case FSM_RELEASED:
            return "RELEASED";
        case FSM_RESOURCE_EXHAUSTED:
            return "RESOURCE_EXHAUSTED";
        case FSM_INVALID_ARGUMENT:
            return "INVALID_ARGUMENT";
        case FSM_FOUND:
            return "FOUND";
        case FSM_FORGOTTEN:
            return "FORGOTTEN";
        case FSM_OK:
            return "OK";
        case FSM_FAILED_PRECONDITION:
            return "FAILED_PRECONDITION";
    }
    return "UNKNOWN";
}

const char *fsm_state_name(enum fsm_state s)
{
    switch (s) {
        case FSM_STATE_SEEN:
            return "SEEN";
        case FSM_STATE_PENDING:
            return "PENDING";
        case FSM_STATE_COMPLETED:
            return "COMPLETED";
        case FSM_STATE_RELEASED:
            return "RELEASED";
        case FSM_STATE_FAILED:
            return "FAILED";
    }
    return "UNKNOWN";
}

const char *fsm_strerror(int rv)
{
    return err_str(rv);
}
/* ------------------------------------------------------------------------
 * Life cycle
 * ---------------------------------------------------------------------- */

_Noreturn void fsm_panic(const char *what)
{
    /* Only reachable on memory exhaustion: continuing would leave a
     * half-applied batch that raft would apply again. Stop; the node
     * restarts from its snapshot and log. */
    fprintf(stderr, "once fsm: fatal: %s\n", what);
    abort();
}

struct fsm *fsm_new(void)
{
    struct fsm *f = calloc(1, sizeof *f);

    if (f == NULL) {
        return NULL;
    }
    slab_init(&f->slab);
    for (size_t i = 0; i < FSM_N_VPS; i++) {
        table_init(&f->vps[i]);
    }
    command_decoder_init(&f->dec);
    fsm_settings_default(&f->settings);
    return f;
}

/* Release every record and ext (not the struct) in time proportional to
 * the memory held, never to the record count: results and errors are
 * listed in f->stored, records and exts live in slab pages. */
static void clear_records(struct fsm *f)
{
    for (size_t i = 0; i < f->n_stored; i++) {
        free(f->stored[i].p);
    }
    free(f->stored);
    f->stored = NULL;
    f->n_stored = 0;
    f->cap_stored = 0;
    for (size_t i = 0; i < FSM_N_VPS; i++) {
        table_close(&f->vps[i]);
    }
    slab_close(&f->slab);
    fsm_ticks_close(&f->ticks);
    fsm_ticks_close(&f->pending);
    f->wheel.n_l0 = 0; /* the lists are gone with the pages */
    f->wheel.n_l1 = 0;
    f->n_records = 0;
    f->bytes = 0;
    memset(f->vp_bytes, 0, sizeof f->vp_bytes);
    f->snap_rec_bytes = 0;
}

void fsm_free(struct fsm *f)
{
    if (f == NULL) {
        return;
    }
    if (f->frozen != NULL) {
        fsm_release(f, f->frozen);
    }
    clear_records(f);
    fsm_quota_clear(f);
    if (f->hash_ready) {
        hash_keyed_close(&f->hash);
    }
    command_decoder_close(&f->dec);
    free(f->retired);
    free(f->cmds);
    free(f->hashes);
    free(f->hashed);
    free(f);
}

/* ------------------------------------------------------------------------
 * Apply
 * ---------------------------------------------------------------------- */

static int apply_begin(struct fsm *f,
                       uint64_t index,
                       uint32_t schema_version,
                       uint64_t leader_time_ms)
{
    if (schema_version == 0) {
        return FSM_E_MALFORMED;
    }
    if (schema_version > FSM_SCHEMA_VERSION) {
        return FSM_E_SCHEMA;
    }
    if (leader_time_ms > FSM_TIME_MAX) {
        /* Records keep times in 48 bits (year 10889). A larger stamp can
         * only come from a broken clock; clamping is deterministic. */
        leader_time_ms = FSM_TIME_MAX;
    }
    if (leader_time_ms > f->now) {
        f->now = leader_time_ms;
    }
    if (f->fence_active && f->now > f->fence_until) {
        /* Forget the fence entirely: equal states must encode equally. */
        f->fence_active = false;
        f->fence_ts = 0;
        f->fence_prev_window = 0;
        f->fence_until = 0;
    }
    fsm_fence_expire(f);
    fsm_acct_pass(f, f->now >> WHEEL_TICK_SHIFT);
    fsm_wheel_advance(f);
    f->last_index = index;
    return 0;
}

/* Keep the owner token only in answers to its owner (and Lookup). */
static void scrub_token(struct fsm_result *res)
{
    bool owner;

    switch (res->cmd) {
        case FSM_CMD_CLAIM:
            owner = res->outcome == FSM_ACCEPTED;
            break;
        case FSM_CMD_COMPLETE:
            owner = res->outcome == FSM_COMPLETED;
            break;
        case FSM_CMD_RELEASE:
            owner = res->outcome == FSM_RELEASED || res->outcome == FSM_FAILED;
            break;
        case FSM_CMD_LOOKUP:
            owner = true;
            break;
        default:
            owner = false;
            break;
    }
    if (!owner) {
        res->has_owner_token = false;
        memset(&res->owner_token, 0, sizeof res->owner_token);
    }
}

static int apply_one(struct fsm *f,
                     uint64_t index,
                     uint32_t slot,
                     uint32_t schema_version,
                     const struct fsm_cmd *cmd,
                     const uint64_t *pre,
                     struct fsm_result *res)
{
    memset(res, 0, sizeof *res);
    res->cmd = cmd->type;
    if (cmd->type == FSM_CMD_INVALID) {
        res->outcome = FSM_INVALID_ARGUMENT;
        res->reason = cmd->invalid_reason != NULL ? cmd->invalid_reason
                                                  : "undecodable command";
        return 0;
    }
    if (cmd->type == FSM_CMD_BOOTSTRAP) {
        fsm_do_bootstrap(f, cmd->u.bootstrap, schema_version, res);
        return 0;
    }
    if (!f->bootstrapped) {
        res->outcome = FSM_FAILED_PRECONDITION;
        res->reason = "the cluster is not bootstrapped";
        return 0;
    }
    switch (cmd->type) {
        case FSM_CMD_CLAIM:
            fsm_do_claim(f, index, slot, &cmd->u.claim, pre, res);
            break;
        case FSM_CMD_COMPLETE:
            fsm_do_complete(f, &cmd->u.complete, pre, res);
            break;
        case FSM_CMD_RELEASE:
            fsm_do_release(f, &cmd->u.release, pre, res);
            break;
        case FSM_CMD_LOOKUP:
            fsm_do_lookup(f, &cmd->u.ident, pre, res);
            break;
        case FSM_CMD_FORGET:
            fsm_do_forget(f, &cmd->u.ident, pre, res);
            break;
        case FSM_CMD_SET_SETTINGS:
            fsm_do_set_settings(f, &cmd->u.settings, res);
            break;
        case FSM_CMD_SET_MEMBER:
            fsm_do_set_member(f, &cmd->u.member, res);
            break;
        case FSM_CMD_RETIRE_MEMBER:
            fsm_do_retire(f, cmd->u.retire_id, res);
            break;
        case FSM_CMD_SET_SCHEMA:
            if (cmd->u.schema_version > FSM_SCHEMA_VERSION) {
                return FSM_E_SCHEMA;
            }
            if (cmd->u.schema_version < f->schema_version) {
                res->outcome = FSM_INVALID_ARGUMENT;
                res->reason = "the schema version never goes down";
            } else {
                f->schema_version = cmd->u.schema_version;
                res->outcome = FSM_OK;
            }
            break;
        case FSM_CMD_QUOTA_SET:
            fsm_do_quota_set(f, &cmd->u.quota, res);
            break;
        default:
            res->outcome = FSM_INVALID_ARGUMENT;
            res->reason = "unknown command";
            break;
    }
    scrub_token(res);
    return 0;
}

static int grow_scratch(struct fsm *f, size_t n)
{
    size_t cap = f->cap_cmds == 0 ? 256 : f->cap_cmds;
    struct fsm_cmd *cmds;
    uint64_t *hashes;
    bool *hashed;

    if (n <= f->cap_cmds) {
        return 0;
    }
    while (cap < n) {
        cap *= 2;
    }
    cmds = realloc(f->cmds, cap * sizeof *cmds);
    if (cmds == NULL) {
        fsm_panic("out of memory (batch)");
    }
    f->cmds = cmds;
    hashes = realloc(f->hashes, cap * sizeof *hashes);
    if (hashes == NULL) {
        fsm_panic("out of memory (batch)");
    }
    f->hashes = hashes;
    hashed = realloc(f->hashed, cap * sizeof *hashed);
    if (hashed == NULL) {
        fsm_panic("out of memory (batch)");
    }
    f->hashed = hashed;
    f->cap_cmds = cap;
    return 0;
}

/* The identity a command names, if it names a valid one. */
static const struct fsm_ident *cmd_ident(const struct fsm_cmd *cmd,
                                         struct fsm_ident *tmp)
{
    switch (cmd->type) {
        case FSM_CMD_CLAIM:
            *tmp =
                (struct fsm_ident){cmd->u.claim.scope, cmd->u.claim.scope_len,
                                   cmd->u.claim.key, cmd->u.claim.key_len};
            break;
        case FSM_CMD_COMPLETE:
            *tmp = (struct fsm_ident){
                cmd->u.complete.scope, cmd->u.complete.scope_len,
                cmd->u.complete.key, cmd->u.complete.key_len};
            break;
        case FSM_CMD_RELEASE:
            *tmp = (struct fsm_ident){
                cmd->u.release.scope, cmd->u.release.scope_len,
                cmd->u.release.key, cmd->u.release.key_len};
            break;
        case FSM_CMD_LOOKUP:
        case FSM_CMD_FORGET:
            *tmp = cmd->u.ident;
            break;
        default:
            return NULL;
    }
    if (fsm_check_ident(tmp->scope_len, tmp->key_len) != NULL) {
        return NULL;
    }
    return tmp;
}

/* Apply decoded commands. Hashing every identity first and prefetching its
 * table slot overlaps the cache misses of a whole batch instead of paying
 * them one command at a time. The hash key only changes at bootstrap, so
 * hashes computed before the batch stay right for all of it. */
static int apply_batch(struct fsm *f,
                       uint64_t index,
                       uint32_t schema_version,
                       uint64_t leader_time_ms,
                       const struct fsm_cmd *cmds,
                       size_t n,
                       fsm_emit_cb emit,
                       void *arg)
{
    struct fsm_result res;
    struct fsm_ident tmp;
    bool pre = f->bootstrapped;
    int rv;

    rv = apply_begin(f, index, schema_version, leader_time_ms);
    if (rv != 0) {
        return rv;
    }
    if (pre) {
        ONCE_ASSERT(f->hash_ready, "a bootstrapped fsm has its hash key");
        grow_scratch(f, n);
        for (size_t i = 0; i < n; i++) {
            const struct fsm_ident *id = cmd_ident(&cmds[i], &tmp);
            f->hashed[i] = id != NULL;
            if (id != NULL) {
                uint64_t h =
                    fsm_hash(f, id->scope, id->scope_len, id->key, id->key_len);
                f->hashes[i] = h;
                table_prefetch(&f->vps[vp_of(h)], (uint32_t)h);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        // cppcheck-suppress knownConditionTrueFalse ; cppcheck 2.10 takes
        // ONCE_ASSERT's _Noreturn call in a ?: arm for the end of the if (pre)
        // block above
        const uint64_t *h = pre && f->hashed[i] ? &f->hashes[i] : NULL;
        rv =
            apply_one(f, index, (uint32_t)i, schema_version, &cmds[i], h, &res);
        if (rv != 0) {
            return rv;
        }
        res.log_time_ms = f->now; /* constant within a batch */
        if (emit != NULL) {
            emit(arg, i, &res);
        }
    }
    return 0;
}

int fsm_apply_cmds(struct fsm *f,
                   uint64_t index,
                   uint32_t schema_version,
                   uint64_t leader_time_ms,
                   const struct fsm_cmd *cmds,
                   size_t n_cmds,
                   fsm_emit_cb emit,
                   void *arg)
{
    if (n_cmds > FSM_BATCH_COMMANDS_MAX) {
        return FSM_E_TOOBIG;
    }
    return apply_batch(f, index, schema_version, leader_time_ms, cmds, n_cmds,
                       emit, arg);
}

int fsm_apply(struct fsm *f,
              uint64_t index,
              const uint8_t *buf,
              size_t len,
              fsm_emit_cb emit,
              void *arg)
{
    struct command_batch batch;
    int rv;

    rv = command_decode_batch(&f->dec, buf, len, &batch);
    if (rv == -ENOMEM) {
        fsm_panic("out of memory (batch)");
    }
    if (rv != 0) {
        return FSM_E_MALFORMED;
    }
    if (batch.schema_version == 0) {
        return FSM_E_MALFORMED;
    }
    if (batch.schema_version > FSM_SCHEMA_VERSION) {
        return FSM_E_SCHEMA; /* before decoding what we cannot know */
    }
    grow_scratch(f, batch.n_commands);
    command_decoder_reset(&f->dec);
    for (size_t i = 0; i < batch.n_commands; i++) {
        command_decode(&f->dec, batch.commands[i], batch.command_lens[i],
                       &f->cmds[i]);
    }
    return apply_batch(f, index, batch.schema_version, batch.leader_time_ms,
                       f->cmds, batch.n_commands, emit, arg);
}

/* ------------------------------------------------------------------------
 * Observers
 * ---------------------------------------------------------------------- */

uint64_t fsm_now(const struct fsm *f)
{
    return f->now;
}

uint64_t fsm_last_index(const struct fsm *f)
{
    return f->last_index;
}

bool fsm_bootstrapped(const struct fsm *f)
{
    return f->bootstrapped;
}

const uint8_t *fsm_cluster_id(const struct fsm *f)
{
    return f->cluster_id;
}

uint32_t fsm_group_id(const struct fsm *f)
{
    return f->group_id;
}

uint32_t fsm_schema_version(const struct fsm *f)
{
    return f->schema_version;
}

const struct fsm_settings *fsm_settings(const struct fsm *f)
{
    return &f->settings;
}

size_t fsm_n_members(const struct fsm *f)
{
    return f->n_members;
}

const struct fsm_member *fsm_member(const struct fsm *f, size_t i)
{
    return i < f->n_members ? &f->members[i] : NULL;
}

size_t fsm_n_retired(const struct fsm *f)
{
    return f->n_retired;
}

uint64_t fsm_n_records(const struct fsm *f)
{
    return fsm_live_n(f);
}

uint64_t fsm_bytes(const struct fsm *f)
{
    return fsm_live_bytes(f);
}

uint64_t fsm_prune_backlog(const struct fsm *f)
{
    return f->backlog.n;
}

uint32_t fsm_vp_records(const struct fsm *f, uint32_t v)
{
    return v < FSM_N_VPS ? f->vps[v].n : 0;
}

uint64_t fsm_vp_bytes(const struct fsm *f, uint32_t v)
{
    return v < FSM_N_VPS ? f->vp_bytes[v] : 0;
}

uint64_t fsm_memory(const struct fsm *f)
{
    uint64_t m = slab_memory(&f->slab);

    for (size_t i = 0; i < FSM_N_VPS; i++) {
        m += table_memory(&f->vps[i]);
    }
    return m;
}
