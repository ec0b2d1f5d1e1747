/* cli/session.c: `oncectl session`, JSON lines over one client (cli.h).
 *
 * Each line of stdin is one request object; each answer is one line on
 * stdout, flushed, in order. A bad line (not JSON, over CLI_LINE_MAX, not
 * an object, a wrong field) gets an INVALID_ARGUMENT answer and the
 * session goes on: a harness must be able to probe the edges without
 * restarting. Fields go through cli_req_set, the same setter as argv. */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static void set(json_t *o, const char *key, json_t *v)
{
    if (v == NULL || json_object_set_new(o, key, v) != 0) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
}

/* Read one line into @buf (at most CLI_LINE_MAX bytes, newline dropped).
 * Returns 1 for a line, 0 at EOF with nothing read, -EMSGSIZE for a line
 * too long (consumed up to its newline). */
static int read_line(FILE *in, char *buf, size_t *len)
{
    size_t n = 0;
    bool over = false;
    int c;

    while ((c = getc(in)) != EOF && c != '\n') {
        if (n < CLI_LINE_MAX) {
            buf[n++] = (char)c;
        } else {
            over = true;
        }
    }
    if (c == EOF && n == 0 && !over) {
        return 0;
    }
    *len = n;
    return over ? -EMSGSIZE : 1;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') {
            return false;
        }
    }
    return true;
}

/* One JSON value into field @name of @q. 0, or -EINVAL with @err. */
static int set_field(struct cli_req *q, const char *name, json_t *v, char *err)
{
    char num[24];

    switch (json_typeof(v)) {
        case JSON_STRING:
            return cli_req_set(q, name, json_string_value(v),
                               json_string_length(v), err);
        case JSON_TRUE:
            return cli_req_set(q, name, NULL, 0, err);
        case JSON_FALSE:
            if (!cli_req_accepts(q, name)) {
                return cli_req_set(q, name, NULL, 0, err);
            }
            if (!cli_field_is_flag(name)) {
                err_printf(err, "%s: \"%s\": false is not a value",
                           cli_cmd_name(q->cmd), name);
                return -EINVAL;
            }
            return 0; /* a flag left off */
        case JSON_NULL:
            if (!cli_req_accepts(q, name)) {
                return cli_req_set(q, name, NULL, 0, err);
            }
            return 0; /* absent */
        case JSON_INTEGER:
            if (json_integer_value(v) < 0) {
                err_printf(err, "%s: \"%s\": negative", cli_cmd_name(q->cmd),
                           name);
                return -EINVAL;
            }
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
            return cli_req_set(q, name, num, strlen(num), err);
        default:
            if (!cli_req_accepts(q, name)) {
                return cli_req_set(q, name, NULL, 0, err);
            }
            err_printf(err, "%s: \"%s\": want a string%s", cli_cmd_name(q->cmd),
                       name, cli_field_is_flag(name) ? " or a boolean" : "");
            return -EINVAL;
    }
}

/* Fill @q from request object @req. 0, or -EINVAL with @err. */
static int parse_request(json_t *req, struct cli_req *q, char *err)
{
    json_t *cmd = json_object_get(req, "cmd");
    json_t *member_id = json_object_get(req, "member_id");
    enum cli_cmd c;
    const char *k;
    json_t *v;

    if (!json_is_string(cmd)) {
        err_printf(err, "missing \"cmd\" (a command name)");
        return -EINVAL;
    }
    c = cli_cmd_from_name(json_string_value(cmd));
    if (c == 0 || c == CLI_SESSION) {
        err_printf(err, "unknown command \"%.40s\"", json_string_value(cmd));
        return -EINVAL;
    }
    cli_req_init(q, c);
    q->session = true;
    if (member_id != NULL) {
        if (!cli_req_accepts(q, "id")) {
            err_printf(err, "%s: unknown field \"member_id\"", cli_cmd_name(c));
            return -EINVAL;
        }
        if (set_field(q, "id", member_id, err) != 0) {
            return -EINVAL;
        }
    }
    json_object_foreach(req, k, v)
    {
        if (strcmp(k, "cmd") == 0 || strcmp(k, "member_id") == 0) {
            continue;
        }
        if (strcmp(k, "id") == 0) {
            /* Always echoed; the member id only for member commands
             * without member_id, and only as a hex string. */
            if (member_id == NULL && cli_req_accepts(q, "id") &&
                json_is_string(v) && set_field(q, "id", v, err) != 0) {
                return -EINVAL;
            }
            continue;
        }
        if (set_field(q, k, v, err) != 0) {
            return -EINVAL;
        }
    }
    return cli_req_check(q, err);
}

/* --- "claim batch": once_claim_batch over the items' claim fields --------
 *
 * {"cmd":"claim batch","items":[{claim fields}, ...],"timeout":"2s"}: each
 * item takes exactly the fields of a "claim" request (no cmd, no id),
 * checked by the same parser; the answer is {"items":[one claim answer
 * per item, in order, each with its own "exit"], "exit": 0 if every item
 * got a decision, else the first other item's exit}. */

/* One item's bytes, kept while the batch call runs (struct cli_req is too
 * large to keep one per item). */
struct batch_item
{
    uint8_t scope[ONCE_SCOPE_MAX];
    uint8_t key[ONCE_KEY_MAX];
    uint8_t request_id[ONCE_ID_LEN];
    uint8_t execution_id[ONCE_EXECUTION_ID_MAX];
    uint8_t payload_hash[ONCE_PAYLOAD_HASH_MAX];
};

/* @q (a checked claim) into @a, its bytes copied into @b. The mapping is
 * run_claim's (commands.c): a field added there is added here. */
static void batch_claim_of(const struct cli_req *q,
                           struct batch_item *b,
                           struct once_claim *a)
{
    memset(a, 0, sizeof *a);
    memcpy(b->scope, q->scope, q->scope_len);
    memcpy(b->key, q->key, q->key_len);
    a->scope = b->scope;
    a->scope_len = q->scope_len;
    a->key = b->key;
    a->key_len = q->key_len;
    a->kind = q->idempotent ? ONCE_IDEMPOTENT : ONCE_NONCE;
    if (q->has_request_id) {
        memcpy(b->request_id, q->request_id, ONCE_ID_LEN);
        a->request_id = b->request_id;
    }
    if (q->has_execution_id) {
        memcpy(b->execution_id, q->execution_id, q->execution_id_len);
        a->execution_id = b->execution_id;
        a->execution_id_len = q->execution_id_len;
    }
    a->ttl_ms = q->has_ttl ? q->ttl_ms : 0;
    a->has_ts = q->has_ts;
    a->ts_ms = q->ts_ms;
    a->window_ms = q->has_window ? q->window_ms : 0;
    if (q->has_payload_hash) {
        memcpy(b->payload_hash, q->payload_hash, q->payload_hash_len);
        a->payload_hash = b->payload_hash;
        a->payload_hash_len = q->payload_hash_len;
    }
    a->lease_ms = q->has_lease ? q->lease_ms : 0;
    a->max_uses = q->has_max_uses ? (uint32_t)q->max_uses : 0;
    a->sliding = q->sliding;
}

/* Item @i of the request: a claim request object without "cmd". */
static int batch_parse_item(json_t *item,
                            size_t i,
                            struct cli_req *q,
                            char *err)
{
    char why[ERR_MSG_SIZE];
    const char *k;
    json_t *v;

    if (!json_is_object(item)) {
        err_printf(err, "items[%zu]: want an object", i);
        return -EINVAL;
    }
    cli_req_init(q, CLI_CLAIM);
    q->session = true;
    json_object_foreach(item, k, v)
    {
        if (strcmp(k, "cmd") == 0 || strcmp(k, "id") == 0 ||
            strcmp(k, "timeout") == 0) {
            err_printf(err, "items[%zu]: \"%s\" belongs to the batch", i, k);
            return -EINVAL;
        }
        if (set_field(q, k, v, why) != 0) {
            err_printf(err, "items[%zu]: %s", i, why);
            return -EINVAL;
        }
    }
    if (cli_req_check(q, why) != 0) {
        err_printf(err, "items[%zu]: %s", i, why);
        return -EINVAL;
    }
    return 0;
}

/* The batch's own fields: "items" (1..ONCE_BATCH_MAX) and "timeout". */
static int batch_parse(json_t *req, struct cli_req *q, uint32_t *t, char *err)
{
    json_t *items = json_object_get(req, "items");
    const char *k;
    json_t *v;

    json_object_foreach(req, k, v)
    {
        if (strcmp(k, "cmd") != 0 && strcmp(k, "id") != 0 &&
            strcmp(k, "items") != 0 && strcmp(k, "timeout") != 0) {
            err_printf(err, "claim batch: unknown field \"%.40s\"", k);
            return -EINVAL;
        }
    }
    if (!json_is_array(items) || json_array_size(items) < 1 ||
        json_array_size(items) > ONCE_BATCH_MAX) {
        err_printf(err, "claim batch: \"items\": want an array of 1..%d claims",
                   ONCE_BATCH_MAX);
        return -EINVAL;
    }
    *t = 0;
    v = json_object_get(req, "timeout");
    if (v != NULL && !json_is_null(v)) {
        /* The timeout's syntax and bound are a claim's. */
        cli_req_init(q, CLI_CLAIM);
        q->session = true;
        if (set_field(q, "timeout", v, err) != 0) {
            return -EINVAL;
        }
        *t = q->timeout_ms;
    }
    return 0;
}

/* A "claim batch" line: *@out its answer; the exit code. */
static int session_batch(const struct cli_ctx *x,
                         json_t *req,
                         struct cli_req *q,
                         json_t **out)
{
    json_t *items = json_object_get(req, "items");
    struct batch_item *bufs = NULL;
    struct once_claim *claims = NULL;
    struct once_result *rs = NULL;
    char err[ERR_MSG_SIZE];
    json_t *arr;
    uint32_t t;
    size_t n;
    int code = CLI_EXIT_OK;

    if (batch_parse(req, q, &t, err) != 0) {
        *out = cli_json_usage(err);
        return CLI_EXIT_USAGE;
    }
    n = json_array_size(items);
    bufs = calloc(n, sizeof *bufs);
    claims = calloc(n, sizeof *claims);
    rs = calloc(n, sizeof *rs);
    if (bufs == NULL || claims == NULL || rs == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        if (batch_parse_item(json_array_get(items, i), i, q, err) != 0) {
            *out = cli_json_usage(err);
            free(bufs);
            free(claims);
            free(rs);
            return CLI_EXIT_USAGE;
        }
        batch_claim_of(q, &bufs[i], &claims[i]);
        once_result_init(&rs[i]);
    }
    (void)once_claim_batch(x->client, claims, n, t != 0 ? t : x->timeout_ms,
                           rs);
    arr = cli_must(json_array());
    for (size_t i = 0; i < n; i++) {
        json_t *o = cli_json_result(CLI_CLAIM, &rs[i]);
        int c = cli_exit_code(CLI_CLAIM, false, &rs[i]);

        set(o, "exit", json_integer(c));
        if (rs[i].status != ONCE_STATUS_OK && code == CLI_EXIT_OK) {
            code = c;
        }
        if (json_array_append_new(arr, o) != 0) {
            fputs("oncectl: out of memory\n", stderr);
            abort();
        }
        once_result_clear(&rs[i]);
    }
    *out = cli_must(json_object());
    set(*out, "items", arr);
    free(bufs);
    free(claims);
    free(rs);
    return code;
}

static bool is_batch(json_t *req)
{
    json_t *cmd = json_object_get(req, "cmd");

    return json_is_string(cmd) &&
           strcmp(json_string_value(cmd), "claim batch") == 0;
}

int cli_session(const struct cli_ctx *x, FILE *in, FILE *out)
{
    char *buf = malloc(CLI_LINE_MAX + 1);
    struct cli_req *q = malloc(sizeof *q);
    int rv = CLI_EXIT_OK;

    if (buf == NULL || q == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        abort();
    }
    for (;;) {
        char err[ERR_MSG_SIZE];
        json_t *req = NULL;
        json_t *ans = NULL;
        json_error_t je;
        size_t len = 0;
        int code;
        int got = read_line(in, buf, &len);

        if (got == 0) {
            break;
        }
        if (got < 0) {
            err_printf(err, "line over %u bytes", CLI_LINE_MAX);
            ans = cli_json_usage(err);
            code = CLI_EXIT_USAGE;
        } else if (blank(buf, len)) {
            continue;
        } else if ((req = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je)) ==
                   NULL) {
            err_printf(err, "not JSON: %s (column %d)", je.text, je.column);
            ans = cli_json_usage(err);
            code = CLI_EXIT_USAGE;
        } else if (!json_is_object(req)) {
            ans = cli_json_usage("a request is a JSON object");
            code = CLI_EXIT_USAGE;
        } else if (is_batch(req)) {
            code = session_batch(x, req, q, &ans);
        } else if (parse_request(req, q, err) != 0) {
            ans = cli_json_usage(err);
            code = CLI_EXIT_USAGE;
        } else {
            code = cli_run(x, q, &ans);
        }
        if (json_object_get(ans, "cluster_id") == NULL) {
            static const struct once_origin none;

            cli_json_origin(ans, &none, NULL);
        }
        cli_fill_cluster_id(x, ans);
        set(ans, "exit", json_integer(code));
        if (req != NULL && json_is_object(req) &&
            json_object_get(req, "id") != NULL) {
            set(ans, "id", json_incref(json_object_get(req, "id")));
        }
        if (cli_print_json(out, ans) != 0) {
            /* Nobody reads the answers any more: stop, and say so. */
            fputs("oncectl: session: stdout closed\n", stderr);
            rv = CLI_EXIT_NOT_APPLIED;
            json_decref(ans);
            json_decref(req);
            break;
        }
        json_decref(ans);
        json_decref(req);
    }
    if (ferror(in)) {
        fputs("oncectl: session: read error on stdin\n", stderr);
        rv = CLI_EXIT_NOT_APPLIED;
    }
    free(q);
    free(buf);
    return rv;
}
