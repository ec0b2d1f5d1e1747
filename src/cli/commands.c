/* cli/commands.c: one parsed command over libonce (cli.h).
 *
 * Each command is one libonce call whose result becomes one JSON object
 * (json.c) and one exit code. `leave` is the only sequence: status of the
 * node itself, a leadership transfer if it leads, a wait until it no
 * longer does, then the removal of its own id. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/text.h"

/* An answer that named no cluster (a local refusal, a connection that
 * never answered) still names the one this client pinned, if any. */
void cli_fill_cluster_id(const struct cli_ctx *x, json_t *o)
{
    const char *cid = json_string_value(json_object_get(o, "cluster_id"));
    uint8_t id[ONCE_ID_LEN];
    char hex[2 * ONCE_ID_LEN + 1];

    if (cid != NULL && *cid == '\0' && once_client_cluster_id(x->client, id)) {
        cli_set(o, "cluster_id",
                json_string(text_format_hex(id, ONCE_ID_LEN, hex)));
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

static int run_claim(const struct cli_ctx *x,
                     const struct cli_req *q,
                     uint32_t t,
                     json_t **out)
{
    struct once_claim a;
    struct once_result r;
    int code;

    memset(&a, 0, sizeof a);
    a.scope = q->scope;
    a.scope_len = q->scope_len;
    a.key = q->key;
    a.key_len = q->key_len;
    a.kind = q->idempotent ? ONCE_IDEMPOTENT : ONCE_NONCE;
    a.request_id = q->has_request_id ? q->request_id : NULL;
    a.execution_id = q->has_execution_id ? q->execution_id : NULL;
    a.execution_id_len = q->has_execution_id ? q->execution_id_len : 0;
    a.ttl_ms = q->has_ttl ? q->ttl_ms : 0;
    a.has_ts = q->has_ts;
    a.ts_ms = q->ts_ms;
    a.window_ms = q->has_window ? q->window_ms : 0;
    a.payload_hash = q->has_payload_hash ? q->payload_hash : NULL;
    a.payload_hash_len = q->has_payload_hash ? q->payload_hash_len : 0;
    a.lease_ms = q->has_lease ? q->lease_ms : 0;
    a.max_uses = q->has_max_uses ? (uint32_t)q->max_uses : 0;
    a.sliding = q->sliding;
    a.timeout_ms = t;
    once_result_init(&r);
    once_claim(x->client, &a, &r);
    *out = cli_json_result(CLI_CLAIM, &r);
    code = cli_exit_code(CLI_CLAIM, false, &r);
    once_result_clear(&r);
    return code;
}

static int run_complete(const struct cli_ctx *x,
                        const struct cli_req *q,
                        uint32_t t,
                        json_t **out)
{
    struct once_complete a;
    struct once_result r;
    int code;

    memset(&a, 0, sizeof a);
    a.scope = q->scope;
    a.scope_len = q->scope_len;
    a.key = q->key;
    a.key_len = q->key_len;
    a.owner_token = q->owner_token;
    a.result = q->result_len > 0 ? q->result : NULL;
    a.result_len = q->result_len;
    a.request_id = q->has_request_id ? q->request_id : NULL;
    a.timeout_ms = t;
    once_result_init(&r);
    once_complete(x->client, &a, &r);
    *out = cli_json_result(CLI_COMPLETE, &r);
    code = cli_exit_code(CLI_COMPLETE, false, &r);
    once_result_clear(&r);
    return code;
}

static int run_release(const struct cli_ctx *x,
                       const struct cli_req *q,
                       uint32_t t,
                       json_t **out)
{
    struct once_release a;
    struct once_result r;
    int code;

    memset(&a, 0, sizeof a);
    a.scope = q->scope;
    a.scope_len = q->scope_len;
    a.key = q->key;
    a.key_len = q->key_len;
    a.owner_token = q->owner_token;
    a.terminal = q->terminal;
    a.error = q->error_len > 0 ? q->error : NULL;
    a.error_len = q->error_len;
    a.request_id = q->has_request_id ? q->request_id : NULL;
    a.timeout_ms = t;
    once_result_init(&r);
    once_release(x->client, &a, &r);
    *out = cli_json_result(CLI_RELEASE, &r);
    code = cli_exit_code(CLI_RELEASE, q->terminal, &r);
    once_result_clear(&r);
    return code;
}

static int run_read(const struct cli_ctx *x,
                    const struct cli_req *q,
                    uint32_t t,
                    json_t **out)
{
    struct once_result r;
    int code;

    once_result_init(&r);
    if (q->cmd == CLI_LOOKUP) {
        once_lookup_flags(x->client, q->scope, q->scope_len, q->key, q->key_len,
                          q->leader_only ? ONCE_LOOKUP_LEADER : 0, t, &r);
    } else {
        once_forget(x->client, q->scope, q->scope_len, q->key, q->key_len, t,
                    &r);
    }
    *out = cli_json_result(q->cmd, &r);
    code = cli_exit_code(q->cmd, false, &r);
    once_result_clear(&r);
    return code;
}

static int run_status(const struct cli_ctx *x,
                      const struct cli_req *q,
                      uint32_t t,
                      json_t **out)
{
    struct once_status_info *s = calloc(1, sizeof *s);
    struct once_result r;
    int code;

    if (s == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    once_result_init(&r);
    (q->state_digest ? once_status_digest : once_status)(
        x->client, q->has_node ? q->node : NULL, t, s, &r);
    if (r.status == ONCE_STATUS_OK) {
        *out = cli_json_status(s);
        cli_json_origin(*out, &r.origin, NULL);
    } else {
        *out = cli_json_error(&r);
    }
    code = cli_exit_code(CLI_STATUS, false, &r);
    once_result_clear(&r);
    free(s);
    return code;
}

static int run_members_list(const struct cli_ctx *x, uint32_t t, json_t **out)
{
    struct once_member *m = calloc(ONCE_MEMBERS_MAX, sizeof *m);
    struct once_result r;
    size_t n = 0;
    int code;

    if (m == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    once_result_init(&r);
    once_members_list(x->client, t, m, &n, &r);
    *out = cli_json_admin(&r);
    if (r.status == ONCE_STATUS_OK) {
        cli_set(
            *out, "members",
            cli_json_members(m, n <= ONCE_MEMBERS_MAX ? n : ONCE_MEMBERS_MAX));
    }
    code = cli_exit_code(CLI_MEMBERS_LIST, false, &r);
    once_result_clear(&r);
    free(m);
    return code;
}

static int run_member_change(const struct cli_ctx *x,
                             const struct cli_req *q,
                             uint32_t t,
                             json_t **out)
{
    struct once_result r;
    int code;

    once_result_init(&r);
    if (q->cmd == CLI_MEMBERS_ADD) {
        struct once_member m;

        memset(&m, 0, sizeof m);
        m.id = q->member_id;
        memcpy(m.raft_addr, q->raft_addr, sizeof m.raft_addr);
        memcpy(m.client_addr, q->client_addr, sizeof m.client_addr);
        m.role = q->role;
        once_members_add(x->client, &m, t, &r);
    } else if (q->cmd == CLI_MEMBERS_REMOVE) {
        once_members_remove_flags(x->client, q->member_id,
                                  q->force ? ONCE_MEMBERS_FORCE : 0, t, &r);
    } else {
        once_members_assign_flags(x->client, q->member_id, q->role,
                                  q->force ? ONCE_MEMBERS_FORCE : 0, t, &r);
    }
    *out = cli_json_admin(&r);
    code = cli_exit_code(q->cmd, false, &r);
    once_result_clear(&r);
    return code;
}

static int run_transfer(const struct cli_ctx *x,
                        const struct cli_req *q,
                        uint32_t t,
                        json_t **out)
{
    struct once_result r;
    uint64_t leader = 0;
    int code;

    once_result_init(&r);
    once_transfer(x->client, q->has_member_id ? q->member_id : 0, t, &leader,
                  &r);
    *out = cli_json_admin(&r);
    if (r.status == ONCE_STATUS_OK) {
        cli_set(*out, "leader", cli_jid(leader));
    }
    code = cli_exit_code(CLI_TRANSFER, false, &r);
    once_result_clear(&r);
    return code;
}

static int run_quota_change(const struct cli_ctx *x,
                            const struct cli_req *q,
                            uint32_t t,
                            json_t **out)
{
    char pattern[ONCE_PATTERN_MAX + 1];
    struct once_result r;
    int code;

    memcpy(pattern, q->pattern, q->pattern_len);
    pattern[q->pattern_len] = '\0';
    once_result_init(&r);
    if (q->cmd == CLI_QUOTA_REMOVE) {
        once_quota_remove(x->client, pattern, t, &r);
    } else {
        once_quota_set(x->client, pattern,
                       q->has_max_records ? q->max_records : 0,
                       q->has_max_bytes ? q->max_bytes : 0, t, &r);
    }
    *out = cli_json_admin(&r);
    code = cli_exit_code(q->cmd, false, &r);
    once_result_clear(&r);
    return code;
}

static int run_quota_list(const struct cli_ctx *x, uint32_t t, json_t **out)
{
    struct once_quota *qs = calloc(ONCE_QUOTAS_MAX, sizeof *qs);
    struct once_result r;
    size_t n = 0;
    int code;

    if (qs == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    once_result_init(&r);
    once_quota_list(x->client, t, qs, &n, &r);
    *out = cli_json_admin(&r);
    if (r.status == ONCE_STATUS_OK) {
        json_t *arr = cli_must(json_array());
        for (size_t i = 0; i < n && i < ONCE_QUOTAS_MAX; i++) {
            json_t *o = cli_must(json_object());
            cli_set(o, "pattern", cli_must(json_string(qs[i].pattern)));
            cli_set(o, "max_records", cli_juint(qs[i].max_records));
            cli_set(o, "max_bytes", cli_juint(qs[i].max_bytes));
            cli_set(o, "records", cli_juint(qs[i].records));
            cli_set(o, "bytes", cli_juint(qs[i].bytes));
            json_array_append_new(arr, o);
        }
        cli_set(*out, "quotas", arr);
    }
    code = cli_exit_code(CLI_QUOTA_LIST, false, &r);
    once_result_clear(&r);
    free(qs);
    return code;
}

static int run_schema_upgrade(const struct cli_ctx *x,
                              const struct cli_req *q,
                              uint32_t t,
                              json_t **out)
{
    struct once_result r;
    uint32_t schema = 0;
    int code;

    once_result_init(&r);
    once_schema_upgrade(x->client,
                        q->has_schema_to ? (uint32_t)q->schema_to : 0, t,
                        &schema, &r);
    *out = cli_json_admin(&r);
    if (r.status == ONCE_STATUS_OK) {
        cli_set(*out, "schema", cli_juint(schema));
    }
    code = cli_exit_code(CLI_SCHEMA_UPGRADE, false, &r);
    once_result_clear(&r);
    return code;
}

static int run_snapshot_take(const struct cli_ctx *x, uint32_t t, json_t **out)
{
    struct once_result r;
    uint64_t index = 0;
    uint64_t size = 0;
    int code;

    once_result_init(&r);
    once_snapshot_take(x->client, t, &index, &size, &r);
    *out = cli_json_admin(&r);
    if (r.status == ONCE_STATUS_OK) {
        cli_set(*out, "index", cli_juint(index));
        cli_set(*out, "size_bytes", cli_juint(size));
    }
    code = cli_exit_code(CLI_SNAPSHOT_TAKE, false, &r);
    once_result_clear(&r);
    return code;
}

/* The node at the first --cluster address leaves: see help_leave. Each
 * step has the call's timeout; the wait for the transfer to take effect
 * has one more. */
static int run_leave(const struct cli_ctx *x, uint32_t t, json_t **out)
{
    struct once_status_info *s = calloc(1, sizeof *s);
    struct once_result r;
    uint64_t self;
    uint64_t leader = 0;
    bool transferred = false;
    int code;

    if (s == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    once_result_init(&r);
    once_status(x->client, x->first_addr, t, s, &r);
    if (r.status != ONCE_STATUS_OK) {
        goto answer_error;
    }
    self = r.origin.node_id;
    if (self == 0) {
        /* Without its id the node cannot be removed; say why rather than
         * guess. */
        *out = cli_json_usage("leave: the node did not say its id");
        cli_set(*out, "error",
                json_string(once_status_name(ONCE_STATUS_FAILED_PRECONDITION)));
        cli_json_origin(*out, &r.origin, NULL);
        code = CLI_EXIT_NOT_APPLIED;
        goto done;
    }
    if (s->role == ONCE_RAFT_LEADER) {
        uint64_t deadline;

        once_result_clear(&r);
        once_transfer(x->client, 0, t, &leader, &r);
        if (r.status != ONCE_STATUS_OK) {
            goto answer_error;
        }
        transferred = true;
        /* The transfer returns once asked; removal of a node that still
         * leads would be refused, so wait until it no longer does. */
        deadline = now_ms() + t;
        for (;;) {
            once_result_clear(&r);
            once_status(x->client, x->first_addr, t, s, &r);
            if (r.status == ONCE_STATUS_OK && s->role != ONCE_RAFT_LEADER) {
                if (leader == 0) {
                    leader = s->leader_id;
                }
                break;
            }
            if (now_ms() >= deadline && r.status != ONCE_STATUS_OK) {
                /* The node stopped answering: say what its last answer
                 * was rather than guess whether it still leads. */
                goto answer_error;
            }
            if (now_ms() >= deadline) {
                *out = cli_must(json_object());
                cli_set(
                    *out, "outcome",
                    json_string(once_outcome_name(ONCE_FAILED_PRECONDITION)));
                cli_set(*out, "reason",
                        json_string("still the leader after the transfer"));
                cli_set(*out, "member_id", cli_jid(self));
                cli_set(*out, "transferred", json_true());
                cli_set(*out, "leader", cli_jid(leader));
                cli_json_origin(*out, &r.origin, NULL);
                code = CLI_EXIT_DENIED;
                goto done;
            }
            sleep_ms(100);
        }
    }
    once_result_clear(&r);
    once_members_remove(x->client, self, t, &r);
    *out = cli_json_admin(&r);
    cli_set(*out, "member_id", cli_jid(self));
    cli_set(*out, "transferred", json_boolean(transferred));
    cli_set(*out, "leader", cli_jid(leader));
    code = cli_exit_code(CLI_LEAVE, false, &r);
    goto done;

answer_error:
    *out = cli_json_error(&r);
    code = cli_exit_code(CLI_LEAVE, false, &r);
done:
    once_result_clear(&r);
    free(s);
    return code;
}

int cli_run(const struct cli_ctx *x, const struct cli_req *q, json_t **out)
{
    uint32_t t = q->has_timeout ? q->timeout_ms : x->timeout_ms;
    int code;

    *out = NULL;
    switch (q->cmd) {
        case CLI_CLAIM:
            code = run_claim(x, q, t, out);
            break;
        case CLI_COMPLETE:
            code = run_complete(x, q, t, out);
            break;
        case CLI_RELEASE:
            code = run_release(x, q, t, out);
            break;
        case CLI_LOOKUP:
        case CLI_FORGET:
            code = run_read(x, q, t, out);
            break;
        case CLI_STATUS:
            code = run_status(x, q, t, out);
            break;
        case CLI_MEMBERS_LIST:
            code = run_members_list(x, t, out);
            break;
        case CLI_MEMBERS_ADD:
        case CLI_MEMBERS_REMOVE:
        case CLI_MEMBERS_ASSIGN:
            code = run_member_change(x, q, t, out);
            break;
        case CLI_TRANSFER:
            code = run_transfer(x, q, t, out);
            break;
        case CLI_LEAVE:
            code = run_leave(x, t, out);
            break;
        case CLI_SNAPSHOT_TAKE:
            code = run_snapshot_take(x, t, out);
            break;
        case CLI_SNAPSHOT_BACKUP:
            code = cli_run_backup(x, q, t, out);
            break;
        case CLI_SNAPSHOT_VERIFY:
            code = cli_run_verify(q, out);
            break;
        case CLI_QUOTA_SET:
        case CLI_QUOTA_REMOVE:
            code = run_quota_change(x, q, t, out);
            break;
        case CLI_QUOTA_LIST:
            code = run_quota_list(x, t, out);
            break;
        case CLI_SCHEMA_UPGRADE:
            code = run_schema_upgrade(x, q, t, out);
            break;
        case CLI_SESSION:
        default:
            *out = cli_json_usage("session: not a command inside a session");
            code = CLI_EXIT_USAGE;
            break;
    }
    if (json_object_get(*out, "cluster_id") == NULL) {
        static const struct once_origin none;

        cli_json_origin(*out, &none, NULL);
    }
    cli_fill_cluster_id(x, *out);
    return code;
}
