/* tests/lib/fsm_helpers.c: see fsm_helpers.h. */
#include "fsm_helpers.h"

#include <stdlib.h>
#include <string.h>

#include "fsm/command.h"

/* Bytes that do not decode as a Command: a field tag whose varint never
 * ends. */
static const uint8_t fh_garbage_cmd[] = {0xff, 0xff, 0xff};

/* What the emit callback writes into. */
struct fh_sink
{
    struct fh_res *out; /* NULL: count only */
    size_t max;         /* entries in out */
    size_t n_emitted;   /* emit calls so far */
    bool in_order;      /* every call had i == n_emitted */
};

void fh_init(struct fh *h, int path)
{
    ck_assert(path == FH_DIRECT || path == FH_PROTOBUF);
    h->f = fsm_new();
    ck_assert_ptr_nonnull(h->f);
    h->path = (enum fh_path)path;
    h->index = 0;
}

void fh_close(struct fh *h)
{
    fsm_free(h->f);
    h->f = NULL;
}

void fh_settings(struct fsm_settings *s)
{
    memset(s, 0, sizeof(*s));
    s->max_window_ms = 300000;
    s->max_skew_ms = 60000;
    s->max_ttl_ms = FSM_MAX_TTL_CEIL;
    s->max_lease_ms = 60000;
    s->max_records = 100000;
    s->max_bytes = 64ull << 20;
}

void fh_bootstrap_cmd(struct fsm_bootstrap *b, const struct fsm_settings *s)
{
    size_t i;

    memset(b, 0, sizeof(*b));
    for (i = 0; i < FSM_CLUSTER_ID_LEN; i++) {
        b->cluster_id[i] = (uint8_t)(i + 1);
    }
    for (i = 0; i < FSM_HASH_KEY_LEN; i++) {
        b->hash_key[i] = (uint8_t)(0xa0 + i);
    }
    b->group_id = FH_GROUP_ID;
    if (s != NULL) {
        b->settings = *s;
    }
    b->n_members = 0;
}

void fh_init_booted(struct fh *h,
                    int path,
                    const struct fsm_settings *s,
                    uint64_t time)
{
    struct fsm_bootstrap *b = malloc(sizeof(*b));
    struct fsm_cmd cmd;
    struct fh_res *r = fh_res_array(1);

    ck_assert_ptr_nonnull(b);
    fh_init(h, path);
    fh_bootstrap_cmd(b, s);
    cmd = fh_cmd_bootstrap(b);
    fh_do(h, time, &cmd, r);
    fh_assert_outcome(r, FSM_OK);
    ck_assert(fsm_bootstrapped(h->f));
    free(r);
    free(b);
}

void fh_rid(uint8_t out[FSM_REQUEST_ID_LEN], uint64_t n)
{
    int i;

    for (i = 0; i < 8; i++) {
        out[i] = (uint8_t)(n >> (56 - 8 * i));
        out[8 + i] = (uint8_t)~out[i];
    }
}

bool fh_rid_is(const uint8_t id[FSM_REQUEST_ID_LEN], uint64_t n)
{
    uint8_t want[FSM_REQUEST_ID_LEN];

    fh_rid(want, n);
    return memcmp(id, want, sizeof(want)) == 0;
}

void fh_claim(struct fsm_claim *c,
              enum fsm_kind kind,
              const char *scope,
              const char *key,
              uint64_t rid)
{
    memset(c, 0, sizeof(*c));
    c->scope = (const uint8_t *)scope;
    c->scope_len = strlen(scope);
    c->key = (const uint8_t *)key;
    c->key_len = strlen(key);
    fh_rid(c->request_id, rid);
    c->kind = kind;
}

void fh_claim_ts(struct fsm_claim *c, uint64_t ts, uint64_t window)
{
    c->has_ts = true;
    c->ts_ms = ts;
    c->window_ms = window;
}

void fh_claim_hash(struct fsm_claim *c, const char *hash)
{
    c->payload_hash = (const uint8_t *)hash;
    c->payload_hash_len = hash != NULL ? strlen(hash) : 0;
}

void fh_claim_exec(struct fsm_claim *c, const char *exec)
{
    c->execution_id = (const uint8_t *)exec;
    c->execution_id_len = strlen(exec);
}

struct fsm_cmd fh_cmd_claim(const struct fsm_claim *c)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_CLAIM;
    cmd.u.claim = *c;
    return cmd;
}

struct fsm_cmd fh_cmd_complete(const char *scope,
                               const char *key,
                               struct fsm_token token,
                               const void *result,
                               size_t result_len)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_COMPLETE;
    cmd.u.complete.scope = (const uint8_t *)scope;
    cmd.u.complete.scope_len = strlen(scope);
    cmd.u.complete.key = (const uint8_t *)key;
    cmd.u.complete.key_len = strlen(key);
    cmd.u.complete.owner_token = token;
    cmd.u.complete.result = result;
    cmd.u.complete.result_len = result_len;
    return cmd;
}

struct fsm_cmd fh_cmd_release(const char *scope,
                              const char *key,
                              struct fsm_token token,
                              bool terminal,
                              const void *error,
                              size_t error_len)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_RELEASE;
    cmd.u.release.scope = (const uint8_t *)scope;
    cmd.u.release.scope_len = strlen(scope);
    cmd.u.release.key = (const uint8_t *)key;
    cmd.u.release.key_len = strlen(key);
    cmd.u.release.owner_token = token;
    cmd.u.release.terminal = terminal;
    cmd.u.release.error = error;
    cmd.u.release.error_len = error_len;
    return cmd;
}

static struct fsm_cmd fh_cmd_ident(enum fsm_cmd_type type,
                                   const char *scope,
                                   const char *key)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = type;
    cmd.u.ident.scope = (const uint8_t *)scope;
    cmd.u.ident.scope_len = strlen(scope);
    cmd.u.ident.key = (const uint8_t *)key;
    cmd.u.ident.key_len = strlen(key);
    return cmd;
}

struct fsm_cmd fh_cmd_lookup(const char *scope, const char *key)
{
    return fh_cmd_ident(FSM_CMD_LOOKUP, scope, key);
}

struct fsm_cmd fh_cmd_forget(const char *scope, const char *key)
{
    return fh_cmd_ident(FSM_CMD_FORGET, scope, key);
}

struct fsm_cmd fh_cmd_bootstrap(struct fsm_bootstrap *b)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_BOOTSTRAP;
    cmd.u.bootstrap = b;
    return cmd;
}

struct fsm_cmd fh_cmd_settings(const struct fsm_settings *s)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_SET_SETTINGS;
    cmd.u.settings = *s;
    return cmd;
}

struct fsm_cmd fh_cmd_member(uint64_t id,
                             const char *raft_addr,
                             const char *client_addr,
                             enum fsm_role role)
{
    struct fsm_cmd cmd;

    ck_assert_uint_le(strlen(raft_addr), FSM_ADDR_MAX);
    ck_assert_uint_le(strlen(client_addr), FSM_ADDR_MAX);
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_SET_MEMBER;
    cmd.u.member.id = id;
    memcpy(cmd.u.member.raft_addr, raft_addr, strlen(raft_addr) + 1);
    memcpy(cmd.u.member.client_addr, client_addr, strlen(client_addr) + 1);
    cmd.u.member.role = role;
    return cmd;
}

struct fsm_cmd fh_cmd_retire(uint64_t id)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_RETIRE_MEMBER;
    cmd.u.retire_id = id;
    return cmd;
}

struct fsm_cmd fh_cmd_schema(uint32_t version)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_SET_SCHEMA;
    cmd.u.schema_version = version;
    return cmd;
}

struct fsm_cmd fh_cmd_quota(const char *pattern,
                            uint64_t max_records,
                            uint64_t max_bytes,
                            bool remove)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_QUOTA_SET;
    cmd.u.quota.pattern = (const uint8_t *)pattern;
    cmd.u.quota.pattern_len = strlen(pattern);
    cmd.u.quota.max_records = max_records;
    cmd.u.quota.max_bytes = max_bytes;
    cmd.u.quota.remove = remove;
    return cmd;
}

struct fsm_cmd fh_cmd_invalid(void)
{
    struct fsm_cmd cmd;

    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FSM_CMD_INVALID;
    cmd.invalid_reason = "test: undecodable command";
    return cmd;
}

struct fsm_token fh_token(uint32_t group_id, uint64_t index, uint32_t slot)
{
    struct fsm_token t;

    memset(&t, 0, sizeof(t));
    t.group_id = group_id;
    t.index = index;
    t.slot = slot;
    return t;
}

bool fh_token_eq(struct fsm_token a, struct fsm_token b)
{
    return a.group_id == b.group_id && a.index == b.index && a.slot == b.slot;
}

/* Copy @r (borrowed pointers included) into @out. */
static void fh_copy(struct fh_res *out, const struct fsm_result *r)
{
    size_t i;

    memset(out, 0, sizeof(*out));
    out->emitted = true;
    out->cmd = r->cmd;
    out->outcome = r->outcome;
    if (r->reason != NULL) {
        size_t n = strlen(r->reason);

        if (n >= sizeof(out->reason)) {
            n = sizeof(out->reason) - 1;
        }
        out->has_reason = true;
        memcpy(out->reason, r->reason, n);
        out->reason[n] = '\0';
    }
    out->retry = r->retry;
    out->log_time_ms = r->log_time_ms;
    out->has_record = r->has_record;
    out->kind = r->kind;
    out->state = r->state;
    memcpy(out->first_request_id, r->first_request_id,
           sizeof(out->first_request_id));
    out->first_index = r->first_index;
    out->first_time_ms = r->first_time_ms;
    out->expires_ms = r->expires_ms;
    out->attempts = r->attempts;
    out->max_uses = r->max_uses;
    out->uses = r->uses;
    out->sliding = r->sliding;
    out->owner_token = r->owner_token;
    out->owner_attempt = r->owner_attempt;
    out->lease_expires_ms = r->lease_expires_ms;
    out->retry_after_ms = r->retry_after_ms;
    ck_assert_uint_le(r->result_len, FSM_RESULT_MAX);
    ck_assert_uint_le(r->stored_error_len, FSM_ERROR_MAX);
    out->has_result = r->result != NULL;
    out->result_len = r->result_len;
    if (r->result_len > 0) {
        ck_assert_ptr_nonnull(r->result);
        memcpy(out->result, r->result, r->result_len);
    }
    out->has_stored_error = r->stored_error != NULL;
    out->stored_error_len = r->stored_error_len;
    if (r->stored_error_len > 0) {
        ck_assert_ptr_nonnull(r->stored_error);
        memcpy(out->stored_error, r->stored_error, r->stored_error_len);
    }
    ck_assert_uint_le(r->n_attempt_list, 1 + FSM_ATTEMPTS_LAST);
    out->n_attempt_list = r->n_attempt_list;
    for (i = 0; i < r->n_attempt_list; i++) {
        ck_assert_ptr_nonnull(r->attempt_list[i]);
        out->attempt_list[i] = *r->attempt_list[i];
    }
}

static void fh_emit(void *arg, size_t i, const struct fsm_result *r)
{
    struct fh_sink *sink = arg;

    ck_assert_ptr_nonnull(r);
    if (i != sink->n_emitted) {
        sink->in_order = false;
    }
    sink->n_emitted++;
    if (sink->out != NULL) {
        ck_assert_msg(i < sink->max, "emit for command %zu of %zu", i,
                      sink->max);
        fh_copy(&sink->out[i], r);
    }
}

static void fh_sink_init(struct fh_sink *sink, struct fh_res *out, size_t max)
{
    size_t i;

    sink->out = out;
    sink->max = max;
    sink->n_emitted = 0;
    sink->in_order = true;
    for (i = 0; out != NULL && i < max; i++) {
        memset(&out[i], 0, sizeof(out[i]));
    }
}

uint8_t *fh_encode(const struct fsm_cmd *cmd, size_t *len)
{
    uint8_t *buf = NULL;
    int rv = command_encode(cmd, &buf, len);

    ck_assert_msg(rv == 0, "command_encode(type %d): %d (%s)", (int)cmd->type,
                  rv, fsm_strerror(rv));
    ck_assert_ptr_nonnull(buf);
    return buf;
}

int fh_apply_raw(struct fh *h,
                 const uint8_t *buf,
                 size_t len,
                 struct fh_res *out,
                 size_t max,
                 size_t *n_emitted)
{
    struct fh_sink sink;
    int rv;

    fh_sink_init(&sink, out, max);
    h->index++;
    rv = fsm_apply(h->f, h->index, buf, len, fh_emit, &sink);
    ck_assert(sink.in_order);
    if (n_emitted != NULL) {
        *n_emitted = sink.n_emitted;
    }
    return rv;
}

int fh_apply_encoded(struct fh *h,
                     uint32_t schema_version,
                     uint64_t time,
                     const uint8_t *const *cmds,
                     const size_t *lens,
                     size_t n,
                     struct fh_res *out)
{
    static const uint8_t none = 0;
    const uint8_t *const no_cmds[1] = {&none};
    const size_t no_lens[1] = {0};
    uint8_t *batch = NULL;
    size_t batch_len = 0;
    size_t n_emitted;
    int rv;

    if (n == 0) {
        cmds = no_cmds;
        lens = no_lens;
    }
    rv = command_encode_batch(schema_version, time, cmds, lens, n, &batch,
                              &batch_len);
    ck_assert_msg(rv == 0, "command_encode_batch: %d (%s)", rv,
                  fsm_strerror(rv));
    rv = fh_apply_raw(h, batch, batch_len, out, n, &n_emitted);
    if (rv == 0) {
        ck_assert_uint_eq(n_emitted, n);
    } else {
        ck_assert_uint_le(n_emitted, n);
    }
    free(batch);
    return rv;
}

static int fh_apply_protobuf(struct fh *h,
                             uint32_t schema_version,
                             uint64_t time,
                             const struct fsm_cmd *cmds,
                             size_t n,
                             struct fh_res *out)
{
    uint8_t **bufs = calloc(n + 1, sizeof(*bufs));
    size_t *lens = calloc(n + 1, sizeof(*lens));
    size_t i;
    int rv;

    ck_assert_ptr_nonnull(bufs);
    ck_assert_ptr_nonnull(lens);
    for (i = 0; i < n; i++) {
        if (cmds[i].type == FSM_CMD_INVALID) {
            bufs[i] = malloc(sizeof(fh_garbage_cmd));
            ck_assert_ptr_nonnull(bufs[i]);
            memcpy(bufs[i], fh_garbage_cmd, sizeof(fh_garbage_cmd));
            lens[i] = sizeof(fh_garbage_cmd);
        } else {
            bufs[i] = fh_encode(&cmds[i], &lens[i]);
        }
    }
    rv = fh_apply_encoded(h, schema_version, time, (const uint8_t *const *)bufs,
                          lens, n, out);
    for (i = 0; i < n; i++) {
        free(bufs[i]);
    }
    free(bufs);
    free(lens);
    return rv;
}

int fh_apply_schema(struct fh *h,
                    uint32_t schema_version,
                    uint64_t time,
                    const struct fsm_cmd *cmds,
                    size_t n,
                    struct fh_res *out)
{
    struct fh_sink sink;
    int rv;

    if (h->path == FH_PROTOBUF) {
        return fh_apply_protobuf(h, schema_version, time, cmds, n, out);
    }
    fh_sink_init(&sink, out, n);
    h->index++;
    rv = fsm_apply_cmds(h->f, h->index, schema_version, time, cmds, n, fh_emit,
                        &sink);
    ck_assert(sink.in_order);
    if (rv == 0) {
        ck_assert_uint_eq(sink.n_emitted, n);
    } else {
        ck_assert_uint_le(sink.n_emitted, n);
    }
    return rv;
}

int fh_apply(struct fh *h,
             uint64_t time,
             const struct fsm_cmd *cmds,
             size_t n,
             struct fh_res *out)
{
    return fh_apply_schema(h, FSM_SCHEMA_VERSION, time, cmds, n, out);
}

enum fsm_outcome fh_do(struct fh *h,
                       uint64_t time,
                       const struct fsm_cmd *cmd,
                       struct fh_res *out)
{
    struct fh_res *tmp = NULL;
    enum fsm_outcome o;
    int rv;

    if (out == NULL) {
        tmp = fh_res_array(1);
        out = tmp;
    }
    rv = fh_apply(h, time, cmd, 1, out);
    ck_assert_msg(rv == 0, "apply: %d (%s)", rv, fsm_strerror(rv));
    ck_assert(out->emitted);
    o = out->outcome;
    free(tmp);
    return o;
}

enum fsm_outcome fh_do_claim(struct fh *h,
                             uint64_t time,
                             const struct fsm_claim *c,
                             struct fh_res *out)
{
    struct fsm_cmd cmd = fh_cmd_claim(c);

    return fh_do(h, time, &cmd, out);
}

enum fsm_outcome fh_do_lookup(struct fh *h,
                              uint64_t time,
                              const char *scope,
                              const char *key,
                              struct fh_res *out)
{
    struct fsm_cmd cmd = fh_cmd_lookup(scope, key);

    return fh_do(h, time, &cmd, out);
}

void fh_tick(struct fh *h, uint64_t time)
{
    int rv = fh_apply(h, time, NULL, 0, NULL);

    ck_assert_msg(rv == 0, "empty batch: %d (%s)", rv, fsm_strerror(rv));
}

void fh_lookup_read(struct fh *h,
                    const char *scope,
                    const char *key,
                    struct fh_res *out)
{
    struct fsm_ident id;
    struct fsm_result r;

    memset(&id, 0, sizeof(id));
    id.scope = (const uint8_t *)scope;
    id.scope_len = strlen(scope);
    id.key = (const uint8_t *)key;
    id.key_len = strlen(key);
    memset(&r, 0, sizeof(r));
    fsm_lookup(h->f, &id, &r);
    fh_copy(out, &r);
}

struct fh_res *fh_res_array(size_t n)
{
    struct fh_res *r = calloc(n > 0 ? n : 1, sizeof(*r));

    ck_assert_ptr_nonnull(r);
    return r;
}

uint8_t *fh_snapshot(const struct fsm *f, size_t *len)
{
    size_t n = fsm_snapshot_size(f);
    uint8_t *buf = malloc(n > 0 ? n : 1);

    ck_assert_ptr_nonnull(buf);
    fsm_snapshot_write(f, buf, n);
    *len = n;
    return buf;
}

void fh_assert_snapshot(const struct fh *h, const uint8_t *snap, size_t len)
{
    size_t n;
    uint8_t *now = fh_snapshot(h->f, &n);

    ck_assert_msg(n == len && memcmp(now, snap, len) == 0,
                  "state changed: snapshot of %zu bytes, was %zu", n, len);
    free(now);
}
