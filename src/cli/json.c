/* cli/json.c: answers as JSON objects, exit codes, text output (cli.h).
 *
 * Every answer is first built as a jansson object; --json prints it
 * compact, the text mode renders the same object. One builder per kind of
 * answer keeps the two outputs saying the same thing. Fields appear "as
 * they apply" (docs/design.md §6): a record's facts only when there is a
 * record, owner_token only when the cluster gave it, and so on. */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_value.h"
#include "common/text.h"

/* jansson returns NULL only when out of memory (or for invalid UTF-8,
 * handled before): a CLI cannot answer anything useful then. */
json_t *cli_must(json_t *v)
{
    if (v == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    return v;
}

void cli_set(json_t *o, const char *key, json_t *v)
{
    if (json_object_set_new(o, key, cli_must(v)) != 0) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
}

/* The values oncectl and onced's HTTP API spell alike (json_value.h). */
json_t *cli_juint(uint64_t v)
{
    return json_value_uint(v);
}

static json_t *jhex(const uint8_t *b, size_t n)
{
    return json_value_hex(b, n);
}

static bool all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i] != 0) {
            return false;
        }
    }
    return true;
}

json_t *cli_jid(uint64_t id)
{
    return json_value_id(id);
}

/* Bytes that should be text (a stored error, an execution id): a JSON
 * string when they are valid UTF-8, else @key + "_b64" with base64, so
 * nothing is lost or mangled. */
static void set_text_bytes(json_t *o,
                           const char *key,
                           const uint8_t *b,
                           size_t n)
{
    json_t *s = json_stringn((const char *)b, n);
    char alt[40];
    char *enc;

    if (s != NULL) {
        cli_set(o, key, s);
        return;
    }
    snprintf(alt, sizeof alt, "%s_b64", key);
    enc = cli_b64_encode(b, n);
    cli_set(o, alt, json_string(enc != NULL ? enc : ""));
    free(enc);
}

static const char *kind_name(enum once_kind k)
{
    switch (k) {
        case ONCE_NONCE:
            return "NONCE";
        case ONCE_IDEMPOTENT:
            return "IDEMPOTENT";
    }
    return "UNKNOWN_VALUE";
}

void cli_json_origin(json_t *o,
                     const struct once_origin *origin,
                     const uint8_t *pinned)
{
    if (origin->has_cluster_id) {
        cli_set(o, "cluster_id", jhex(origin->cluster_id, ONCE_ID_LEN));
    } else if (pinned != NULL) {
        cli_set(o, "cluster_id", jhex(pinned, ONCE_ID_LEN));
    } else {
        cli_set(o, "cluster_id", json_string(""));
    }
    cli_set(o, "node_id", cli_jid(origin->node_id));
    if (origin->has_boot_id) {
        cli_set(o, "boot_id", jhex(origin->boot_id, ONCE_ID_LEN));
    } else {
        cli_set(o, "boot_id", json_string(""));
    }
}

json_t *cli_json_usage(const char *message)
{
    json_t *o = cli_must(json_object());
    json_t *msg;

    cli_set(o, "error",
            json_string(once_status_name(ONCE_STATUS_INVALID_ARGUMENT)));
    cli_set(o, "applied", json_string("false"));
    cli_set(o, "leader_hint", json_string(""));
    /* A message is our own text, but it may quote user bytes: never let
     * invalid UTF-8 lose the whole object. */
    msg = json_stringn(message, strlen(message));
    cli_set(o, "message", msg != NULL ? msg : json_string("invalid argument"));
    return o;
}

json_t *cli_json_error(const struct once_result *r)
{
    json_t *o = cli_must(json_object());
    json_t *msg;

    cli_set(o, "error", json_string(once_status_name(r->status)));
    cli_set(
        o, "applied",
        json_string(r->applied == ONCE_APPLIED_UNKNOWN ? "unknown" : "false"));
    msg = json_stringn(r->leader_hint, strnlen(r->leader_hint, ONCE_ADDR_MAX));
    cli_set(o, "leader_hint", msg != NULL ? msg : json_string(""));
    msg = json_stringn(r->error, strnlen(r->error, ONCE_ERROR_MAX));
    cli_set(o, "message", msg != NULL ? msg : json_string("(not UTF-8)"));
    /* The request id is what a retry after an unknown outcome needs. */
    if (!all_zero(r->request_id, ONCE_ID_LEN)) {
        cli_set(o, "request_id", jhex(r->request_id, ONCE_ID_LEN));
    }
    cli_json_origin(o, &r->origin, NULL);
    return o;
}

static json_t *attempts_array(const struct once_result *r)
{
    json_t *a = cli_must(json_array());

    for (size_t i = 0; i < r->n_attempts && i < ONCE_ATTEMPTS_MAX; i++) {
        const struct once_attempt *at = &r->attempts[i];
        json_t *e = cli_must(json_object());

        cli_set(e, "request_id", jhex(at->request_id, ONCE_ID_LEN));
        set_text_bytes(e, "execution_id", at->execution_id,
                       at->execution_id_len <= ONCE_EXECUTION_ID_MAX
                           ? at->execution_id_len
                           : ONCE_EXECUTION_ID_MAX);
        cli_set(e, "index", cli_juint(at->index));
        cli_set(e, "time_ms", cli_juint(at->time_ms));
        cli_set(e, "outcome", json_string(once_outcome_name(at->outcome)));
        cli_set(e, "retry", json_boolean(at->retry));
        if (json_array_append_new(a, e) != 0) {
            abort();
        }
    }
    return a;
}

json_t *cli_json_result(enum cli_cmd cmd, const struct once_result *r)
{
    json_t *o;
    char tok[CLI_TOKEN_TEXT_MAX];

    if (r->status != ONCE_STATUS_OK) {
        return cli_json_error(r);
    }
    o = cli_must(json_object());
    cli_set(o, "outcome", json_string(once_outcome_name(r->outcome)));
    /* The state machine's refusals arrive as outcomes; they are errors to
     * a caller (nothing was decided about the key), so they carry the
     * error fields too and a script can test for "error" alone. */
    if (r->outcome == ONCE_OUT_OF_SPACE ||
        r->outcome == ONCE_REFUSED_ARGUMENT) {
        cli_set(
            o, "error",
            json_string(once_status_name(r->outcome == ONCE_OUT_OF_SPACE
                                             ? ONCE_STATUS_RESOURCE_EXHAUSTED
                                             : ONCE_STATUS_INVALID_ARGUMENT)));
        cli_set(o, "applied", json_string("false"));
        cli_set(o, "leader_hint", json_string(""));
        cli_set(o, "message",
                json_string(r->reason[0] != '\0' ? r->reason : "refused"));
    }
    if (cmd == CLI_CLAIM || cmd == CLI_COMPLETE || cmd == CLI_RELEASE ||
        r->retry) {
        cli_set(o, "retry", json_boolean(r->retry));
    }
    if (r->log_time_ms != 0) {
        cli_set(o, "log_time_ms", cli_juint(r->log_time_ms));
    }
    if (!all_zero(r->request_id, ONCE_ID_LEN)) {
        cli_set(o, "request_id", jhex(r->request_id, ONCE_ID_LEN));
    }
    if (r->has_first) {
        cli_set(o, "first_request_id", jhex(r->first_request_id, ONCE_ID_LEN));
        cli_set(o, "first_index", cli_juint(r->first_index));
        cli_set(o, "first_time_ms", cli_juint(r->first_time_ms));
        cli_set(o, "attempts_total", cli_juint(r->attempts_total));
    }
    if (r->n_attempts > 0 || (cmd == CLI_LOOKUP && r->has_first)) {
        cli_set(o, "attempts", attempts_array(r));
    }
    if (r->has_owner_token) {
        cli_set(o, "owner_token",
                json_string(cli_format_token(&r->owner_token, tok)));
    }
    if (r->owner_attempt != 0) {
        cli_set(o, "owner_attempt", cli_juint(r->owner_attempt));
    }
    if (r->max_uses != 0) { /* NONCE records, as the HTTP API */
        cli_set(o, "max_uses", cli_juint(r->max_uses));
        cli_set(o, "uses", cli_juint(r->uses));
        cli_set(o, "uses_left", cli_juint(r->uses_left));
    }
    if (r->sliding) {
        cli_set(o, "sliding", json_boolean(true));
    }
    /* An empty stored result or error is still an answer where the
     * outcome (or a lookup of such a record) implies one. */
    if (r->result_len > 0 || r->outcome == ONCE_DUPLICATE ||
        r->outcome == ONCE_COMPLETED ||
        (cmd == CLI_LOOKUP && r->state == ONCE_STATE_COMPLETED)) {
        char *enc = cli_b64_encode(r->result, r->result_len);

        cli_set(o, "result_b64", json_string(enc != NULL ? enc : ""));
        free(enc);
    }
    if (r->stored_error_len > 0 ||
        (r->outcome == ONCE_FAILED && cmd == CLI_CLAIM) ||
        (cmd == CLI_LOOKUP && r->state == ONCE_STATE_FAILED)) {
        set_text_bytes(o, "stored_error", (const uint8_t *)r->stored_error,
                       r->stored_error_len <= ONCE_ERROR_MAX
                           ? r->stored_error_len
                           : ONCE_ERROR_MAX);
    }
    if (r->outcome == ONCE_IN_PROGRESS || r->retry_after_ms != 0) {
        cli_set(o, "retry_after_ms", cli_juint(r->retry_after_ms));
    }
    if (r->reason[0] != '\0') {
        json_t *s = json_stringn(r->reason, strnlen(r->reason, 256));

        cli_set(o, "reason", s != NULL ? s : json_string("(not UTF-8)"));
    }
    if (r->kind != 0) {
        cli_set(o, "kind", json_string(kind_name(r->kind)));
    }
    if (cmd == CLI_LOOKUP && r->served_by != 0) {
        cli_set(o, "served_by", cli_jid(r->served_by));
    }
    if (r->state != ONCE_STATE_NONE) {
        cli_set(o, "state", json_string(once_state_name(r->state)));
    }
    if (r->expires_ms != 0) {
        cli_set(o, "expires_ms", cli_juint(r->expires_ms));
    }
    if (r->lease_expires_ms != 0) {
        cli_set(o, "lease_expires_ms", cli_juint(r->lease_expires_ms));
    }
    cli_json_origin(o, &r->origin, NULL);
    return o;
}

json_t *cli_json_admin(const struct once_result *r)
{
    json_t *o;

    if (r->status != ONCE_STATUS_OK) {
        return cli_json_error(r);
    }
    o = cli_must(json_object());
    /* Calls without a configuration outcome (list, transfer, snapshot)
     * leave it unspecified: they succeeded. */
    cli_set(o, "outcome",
            json_string(once_outcome_name(
                r->outcome == ONCE_UNSPECIFIED ? ONCE_OK : r->outcome)));
    if (r->reason[0] != '\0') {
        json_t *s = json_stringn(r->reason, strnlen(r->reason, 256));

        cli_set(o, "reason", s != NULL ? s : json_string("(not UTF-8)"));
    }
    cli_json_origin(o, &r->origin, NULL);
    return o;
}

json_t *cli_json_members(const struct once_member *m, size_t n)
{
    json_t *a = cli_must(json_array());

    for (size_t i = 0; i < n && i < ONCE_MEMBERS_MAX; i++) {
        json_t *e = cli_must(json_object());
        json_t *ra = json_stringn(m[i].raft_addr,
                                  strnlen(m[i].raft_addr, ONCE_ADDR_MAX));
        json_t *ca = json_stringn(m[i].client_addr,
                                  strnlen(m[i].client_addr, ONCE_ADDR_MAX));

        cli_set(e, "id", cli_jid(m[i].id));
        cli_set(e, "raft_addr", ra != NULL ? ra : json_string(""));
        cli_set(e, "client_addr", ca != NULL ? ca : json_string(""));
        cli_set(e, "role", json_string(once_role_name(m[i].role)));
        cli_set(e, "reachable", json_boolean(m[i].reachable));
        if (json_array_append_new(a, e) != 0) {
            abort();
        }
    }
    return a;
}

json_t *cli_json_status(const struct once_status_info *s)
{
    json_t *o = cli_must(json_object());
    json_t *v;

    cli_set(o, "outcome", json_string(once_outcome_name(ONCE_OK)));
    cli_set(o, "role", json_string(once_raft_role_name(s->role)));
    cli_set(o, "member_role", json_string(once_role_name(s->member_role)));
    cli_set(o, "term", cli_juint(s->term));
    cli_set(o, "commit_index", cli_juint(s->commit_index));
    cli_set(o, "applied_index", cli_juint(s->applied_index));
    {
        char d[17]; /* always 16 digits: a digest of 0 is a digest */

        cli_set(o, "applied_digest",
                json_string(text_format_id(s->applied_digest, d)));
        if (s->restored) {
            char h[2 * ONCE_ID_LEN + 1];

            cli_set(
                o, "restored_from",
                json_string(text_format_hex(s->restored_from, ONCE_ID_LEN, h)));
            cli_set(o, "restore_time_ms", cli_juint(s->restore_time_ms));
            cli_set(o, "replay_window_until_ms",
                    cli_juint(s->replay_window_until_ms));
            cli_set(o, "restore_stale_ts_ms",
                    cli_juint(s->restore_stale_ts_ms));
        }
        if (s->backups_open != 0) {
            cli_set(o, "backups_open", cli_juint(s->backups_open));
        }
        if (s->no_vote_cut_index != 0) {
            cli_set(o, "no_vote_cut_index", cli_juint(s->no_vote_cut_index));
        }
        if (s->state_digest != 0) {
            cli_set(o, "state_digest",
                    json_string(text_format_id(s->state_digest, d)));
        }
    }
    cli_set(o, "schema", cli_juint(s->schema));
    cli_set(o, "schema_max", cli_juint(s->schema_max));
    cli_set(o, "config_index", cli_juint(s->config_index));
    v = cli_must(json_array());
    for (size_t i = 0; i < s->n_config_voters && i < ONCE_MEMBERS_MAX; i++) {
        if (json_array_append_new(v, cli_jid(s->config_voters[i])) != 0) {
            abort();
        }
    }
    cli_set(o, "config_voters", v);
    cli_set(o, "leader", cli_jid(s->leader_id));
    v = json_stringn(s->leader_addr, strnlen(s->leader_addr, ONCE_ADDR_MAX));
    cli_set(o, "leader_addr", v != NULL ? v : json_string(""));
    v = json_stringn(s->store_backend,
                     strnlen(s->store_backend, sizeof s->store_backend - 1));
    cli_set(o, "store_backend", v != NULL ? v : json_string(""));
    cli_set(o, "members",
            cli_json_members(s->members, s->n_members <= ONCE_MEMBERS_MAX
                                             ? s->n_members
                                             : ONCE_MEMBERS_MAX));
    return o;
}

int cli_exit_code(enum cli_cmd cmd, bool terminal, const struct once_result *r)
{
    enum once_outcome want;

    if (r->status != ONCE_STATUS_OK) {
        if (r->status == ONCE_STATUS_INVALID_ARGUMENT) {
            return CLI_EXIT_USAGE;
        }
        return r->applied == ONCE_APPLIED_UNKNOWN ? CLI_EXIT_UNKNOWN
                                                  : CLI_EXIT_NOT_APPLIED;
    }
    if (r->outcome == ONCE_REFUSED_ARGUMENT) {
        return CLI_EXIT_USAGE;
    }
    if (r->outcome == ONCE_OUT_OF_SPACE) {
        return CLI_EXIT_NOT_APPLIED;
    }
    switch (cmd) {
        case CLI_CLAIM:
            want = ONCE_ACCEPTED;
            break;
        case CLI_COMPLETE:
            want = ONCE_COMPLETED;
            break;
        case CLI_RELEASE:
            want = terminal ? ONCE_FAILED : ONCE_RELEASED;
            break;
        case CLI_LOOKUP:
            want = ONCE_FOUND;
            break;
        case CLI_FORGET:
            want = ONCE_FORGOTTEN;
            break;
        case CLI_QUOTA_SET:
        case CLI_QUOTA_REMOVE:
        case CLI_SCHEMA_UPGRADE:
            want = ONCE_OK;
            break;
        default:
            /* Admin: the configuration outcome when there is one; calls
             * without one (status, list, transfer, snapshot) succeeded. */
            return r->outcome == ONCE_FAILED_PRECONDITION ? CLI_EXIT_DENIED
                                                          : CLI_EXIT_OK;
    }
    return r->outcome == want ? CLI_EXIT_OK : CLI_EXIT_DENIED;
}

int cli_print_json(FILE *out, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    int rv = 0;

    if (s == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    errno = 0;
    if (fputs(s, out) == EOF || fputc('\n', out) == EOF || fflush(out) != 0) {
        rv = errno != 0 ? -errno : -EIO; /* stdio sets errno, C does not say */
    }
    free(s);
    return rv;
}

/* ------------------------------------------------------------------------
 * Text
 * ---------------------------------------------------------------------- */

static bool plain(const char *s)
{
    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        char c = *s;

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("._:/+=-", c) != NULL)) {
            return false;
        }
    }
    return true;
}

/* A value as text: numbers and plain words as they are, other strings
 * quoted and escaped as JSON (so a line stays one line). */
static void print_value(FILE *f, json_t *v)
{
    if (json_is_string(v) && plain(json_string_value(v))) {
        fputs(json_string_value(v), f);
    } else if (json_is_integer(v)) {
        fprintf(f, "%lld", (long long)json_integer_value(v));
    } else {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

        fputs(s != NULL ? s : "?", f);
        free(s);
    }
}

static bool skip_key(const char *k)
{
    static const char *const skip[] = {"outcome",     "error",   "applied",
                                       "leader_hint", "message", "cluster_id",
                                       "node_id",     "boot_id"};

    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++) {
        if (strcmp(k, skip[i]) == 0) {
            return true;
        }
    }
    return false;
}

static void print_pairs(FILE *f, json_t *o)
{
    const char *k;
    json_t *v;

    json_object_foreach(o, k, v)
    {
        if (skip_key(k) || json_is_array(v) || json_is_object(v)) {
            continue;
        }
        fprintf(f, " %s=", k);
        print_value(f, v);
    }
}

static void print_members(FILE *f, json_t *members)
{
    size_t i;
    json_t *m;

    fprintf(f, "%-16s  %-21s  %-21s  %-7s  %s\n", "ID", "RAFT_ADDR",
            "CLIENT_ADDR", "ROLE", "REACHABLE");
    json_array_foreach(members, i, m)
    {
        fprintf(f, "%-16s  %-21s  %-21s  %-7s  %s\n",
                json_string_value(json_object_get(m, "id")),
                json_string_value(json_object_get(m, "raft_addr")),
                json_string_value(json_object_get(m, "client_addr")),
                json_string_value(json_object_get(m, "role")),
                json_is_true(json_object_get(m, "reachable")) ? "yes" : "no");
    }
}

static const char *str_or(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s != NULL && *s != '\0' ? s : dflt;
}

void cli_print_text(FILE *out, FILE *errout, enum cli_cmd cmd, json_t *o)
{
    json_t *err = json_object_get(o, "error");
    json_t *arr;

    if (err != NULL) {
        fprintf(errout, "oncectl: %s (applied %s", json_string_value(err),
                str_or(o, "applied", "false"));
        if (json_object_get(o, "outcome") != NULL) {
            fprintf(errout, ", outcome %s", str_or(o, "outcome", "?"));
        }
        if (*str_or(o, "leader_hint", "") != '\0') {
            fprintf(errout, ", leader_hint %s", str_or(o, "leader_hint", ""));
        }
        if (*str_or(o, "request_id", "") != '\0') {
            fprintf(errout, ", request_id %s", str_or(o, "request_id", ""));
        }
        fprintf(errout, "): %s\n", str_or(o, "message", "(no message)"));
        return;
    }
    if (cmd == CLI_STATUS) {
        fputs("OK", out);
        print_pairs(out, o);
        fprintf(out, "\nnode_id=%s cluster_id=%s boot_id=%s\n",
                str_or(o, "node_id", "-"), str_or(o, "cluster_id", "-"),
                str_or(o, "boot_id", "-"));
        arr = json_object_get(o, "members");
        if (arr != NULL) {
            print_members(out, arr);
        }
        return;
    }
    if (cmd == CLI_MEMBERS_LIST) {
        arr = json_object_get(o, "members");
        if (arr != NULL) {
            print_members(out, arr);
        }
        return;
    }
    fputs(str_or(o, "outcome", "?"), out);
    print_pairs(out, o);
    fputc('\n', out);
    arr = json_object_get(o, "attempts");
    if (arr != NULL) {
        size_t i;
        json_t *a;

        json_array_foreach(arr, i, a)
        {
            fprintf(out, "  attempt %s", str_or(a, "outcome", "?"));
            print_pairs(out, a);
            fputc('\n', out);
        }
    }
    arr = json_object_get(o, "quotas");
    if (arr != NULL) {
        size_t i;
        json_t *a;

        json_array_foreach(arr, i, a)
        {
            fputs("  quota", out);
            print_pairs(out, a);
            fputc('\n', out);
        }
    }
}
