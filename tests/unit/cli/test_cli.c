/* test_cli: oncectl's argument parsing, owner tokens, base64, JSON answers
 * and exit codes (src/cli/args.c, help.c, value.c, json.c). */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"

Suite *cli_suite(void);

static struct cli_global g;
static struct cli_req *q;
static char err[ERR_MSG_SIZE];

static void setup(void)
{
    q = calloc(1, sizeof *q);
    ck_assert_ptr_nonnull(q);
    err[0] = '\0';
}

static void teardown(void)
{
    free(q);
}

/* Parse a NULL-terminated list of words. */
static int parse(const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    const char *w;

    va_start(ap, first);
    for (w = first; w != NULL && argc < 32; w = va_arg(ap, const char *)) {
        argv[argc++] = (char *)w;
    }
    va_end(ap);
    err[0] = '\0';
    return cli_parse_argv(argc, argv, &g, q, err);
}

#define OK(...)                                           \
    do {                                                  \
        int rv_ = parse(__VA_ARGS__, (const char *)NULL); \
        ck_assert_msg(rv_ == 0, "refused: %s", err);      \
    } while (0)
#define BAD(want, ...)                                           \
    do {                                                         \
        int rv_ = parse(__VA_ARGS__, (const char *)NULL);        \
        ck_assert_int_eq(rv_, -EINVAL);                          \
        ck_assert_msg(strstr(err, (want)) != NULL,               \
                      "error \"%s\" lacks \"%s\"", err, (want)); \
    } while (0)

START_TEST(claim_defaults)
{
    OK("claim", "s", "k");
    ck_assert_int_eq(q->cmd, CLI_CLAIM);
    ck_assert_uint_eq(q->scope_len, 1);
    ck_assert_int_eq(q->scope[0], 's');
    ck_assert_uint_eq(q->key_len, 1);
    ck_assert(q->has_ttl);
    ck_assert_uint_eq(q->ttl_ms, 86400000);
    ck_assert(!q->idempotent);
    ck_assert(!q->has_request_id);
    ck_assert(!g.json);
    ck_assert_uint_eq(g.timeout_ms, 5000);
    ck_assert_ptr_null(g.cluster);
}
END_TEST

START_TEST(claim_options)
{
    OK("--json", "claim", "--ttl=10m", "scope", "--timeout", "250ms", "key",
       "--request-id", "000102030405060708090a0b0c0d0e0F", "--execution-id",
       "pod-1", "--idempotent", "--payload-hash", "abcd", "--lease", "30s",
       "--cluster", "127.0.0.1:1,127.0.0.1:2");
    ck_assert(g.json);
    ck_assert_uint_eq(g.timeout_ms, 250);
    ck_assert_str_eq(g.cluster, "127.0.0.1:1,127.0.0.1:2");
    ck_assert_uint_eq(q->ttl_ms, 600000);
    ck_assert(q->has_request_id);
    ck_assert_int_eq(q->request_id[15], 0x0f);
    ck_assert_uint_eq(q->execution_id_len, 5);
    ck_assert(q->idempotent);
    ck_assert_uint_eq(q->payload_hash_len, 2);
    ck_assert_int_eq(q->payload_hash[0], 0xab);
    ck_assert_uint_eq(q->lease_ms, 30000);

    OK("claim", "s", "k", "--ts", "1700000000000", "--window", "5m");
    ck_assert(q->has_ts);
    ck_assert(!q->has_ttl); /* the default TTL only without --ts */
    ck_assert_uint_eq(q->ts_ms, 1700000000000u);
    ck_assert_uint_eq(q->window_ms, 300000);

    /* After `--` words are positionals, even with dashes. */
    OK("claim", "--", "--s", "-k");
    ck_assert_uint_eq(q->scope_len, 3);
    ck_assert_int_eq(q->key[0], '-');
}
END_TEST

START_TEST(claim_refusals)
{
    BAD("--ts excludes --ttl", "claim", "s", "k", "--ts", "1", "--window", "1s",
        "--ttl", "1h");
    BAD("--ts requires --window", "claim", "s", "k", "--ts", "1");
    BAD("--window requires --ts", "claim", "s", "k", "--window", "1s");
    BAD("--payload-hash requires --idempotent", "claim", "s", "k",
        "--payload-hash", "00");
    BAD("--lease requires --idempotent", "claim", "s", "k", "--lease", "1s");
    BAD("missing KEY", "claim", "s");
    BAD("missing SCOPE", "claim");
    BAD("unexpected argument \"x\"", "claim", "s", "k", "x");
    BAD("--ttl: bad value \"5\"", "claim", "s", "k", "--ttl", "5");
    BAD("--ttl: bad value \"0s\"", "claim", "s", "k", "--ttl", "0s");
    BAD("--request-id: bad value", "claim", "s", "k", "--request-id", "abc");
    BAD("--payload-hash: bad value", "claim", "s", "k", "--idempotent",
        "--payload-hash", "abc");
    BAD("--ts: bad value \"-1\"", "claim", "s", "k", "--ts", "-1", "--window",
        "1s");
    BAD("unknown option --owner-token", "claim", "s", "k", "--owner-token",
        "0:1:1");
    BAD("unknown option --scope", "claim", "--scope", "s", "k");
    BAD("--ttl given twice", "claim", "s", "k", "--ttl", "1s", "--ttl", "2s");
    BAD("--idempotent takes no value", "claim", "s", "k", "--idempotent=1");
    BAD("--ttl needs a value", "claim", "s", "k", "--ttl");
    BAD("--timeout: bad value", "--timeout", "2h", "claim", "s", "k");
    BAD("--timeout: bad value", "--timeout", "0ms", "claim", "s", "k");
    BAD("--cluster-id: bad value", "--cluster-id", "12", "claim", "s", "k");
    BAD("unknown command \"clam\"", "clam", "s", "k");
    BAD("missing command", "--json");
    BAD("unknown option --bogus", "--bogus", "claim", "s", "k");
}
END_TEST

START_TEST(bounds)
{
    char scope[ONCE_SCOPE_MAX + 2];
    char key[ONCE_KEY_MAX + 2];

    memset(scope, 's', sizeof scope);
    scope[ONCE_SCOPE_MAX] = '\0';
    memset(key, 'k', sizeof key);
    key[ONCE_KEY_MAX] = '\0';
    OK("claim", scope, key);
    ck_assert_uint_eq(q->scope_len, ONCE_SCOPE_MAX);
    ck_assert_uint_eq(q->key_len, ONCE_KEY_MAX);
    scope[ONCE_SCOPE_MAX] = 's';
    scope[ONCE_SCOPE_MAX + 1] = '\0';
    BAD("SCOPE: bad value (want 1..128 bytes)", "claim", scope, "k");
    key[ONCE_KEY_MAX] = 'k';
    key[ONCE_KEY_MAX + 1] = '\0';
    BAD("KEY: bad value (want 1..256 bytes)", "claim", "s", key);
    BAD("SCOPE: bad value", "claim", "", "k");
}
END_TEST

START_TEST(complete_release)
{
    OK("complete", "s", "k", "--owner-token", "0:42:1", "--result", "done");
    ck_assert_int_eq(q->cmd, CLI_COMPLETE);
    ck_assert_uint_eq(q->owner_token.group_id, 0);
    ck_assert_uint_eq(q->owner_token.index, 42);
    ck_assert_uint_eq(q->owner_token.slot, 1);
    ck_assert_uint_eq(q->result_len, 4);
    OK("complete", "s", "k", "--owner-token", "1:2:3", "--result-b64", "AAEC");
    ck_assert_uint_eq(q->result_len, 3);
    ck_assert_int_eq(q->result[2], 2);
    BAD("missing --owner-token", "complete", "s", "k");
    BAD("--result-b64 excludes --result", "complete", "s", "k", "--owner-token",
        "1:2:3", "--result", "x", "--result-b64", "AAEC");
    BAD("--owner-token: bad value", "complete", "s", "k", "--owner-token",
        "1:2");

    OK("release", "s", "k", "--owner-token", "0:1:0", "--terminal", "--error",
       "card declined");
    ck_assert(q->terminal);
    ck_assert_uint_eq(q->error_len, 13);
    BAD("--error requires --terminal", "release", "s", "k", "--owner-token",
        "0:1:0", "--error", "x");
}
END_TEST

START_TEST(admin_commands)
{
    OK("status", "--node", "127.0.0.1:7401");
    ck_assert_int_eq(q->cmd, CLI_STATUS);
    ck_assert_str_eq(q->node, "127.0.0.1:7401");
    BAD("--node: bad value", "status", "--node", "localhost");
    OK("members", "list");
    ck_assert_int_eq(q->cmd, CLI_MEMBERS_LIST);
    OK("members", "add", "0xabc", "127.0.0.1:7414", "127.0.0.1:7404");
    ck_assert_int_eq(q->cmd, CLI_MEMBERS_ADD);
    ck_assert_uint_eq(q->member_id, 0xabc);
    ck_assert_int_eq(q->role, ONCE_ROLE_VOTER);
    ck_assert_str_eq(q->raft_addr, "127.0.0.1:7414");
    OK("members", "add", "abc", "127.0.0.1:7414", "127.0.0.1:7404", "--role",
       "standby");
    ck_assert_int_eq(q->role, ONCE_ROLE_STANDBY);
    BAD("spare is a step", "members", "add", "abc", "127.0.0.1:7414",
        "127.0.0.1:7404", "--role", "spare");
    BAD("missing CLIENT_ADDR", "members", "add", "abc", "127.0.0.1:7414");
    BAD("ID: bad value \"0\"", "members", "remove", "0");
    OK("members", "assign", "ff", "SPARE");
    ck_assert_int_eq(q->role, ONCE_ROLE_SPARE);
    BAD("ROLE: bad value \"boss\"", "members", "assign", "ff", "boss");
    OK("transfer");
    ck_assert_int_eq(q->cmd, CLI_TRANSFER);
    ck_assert(!q->has_member_id);
    OK("members", "transfer", "12");
    ck_assert_int_eq(q->cmd, CLI_TRANSFER);
    ck_assert_uint_eq(q->member_id, 0x12);
    OK("snapshot", "take");
    ck_assert_int_eq(q->cmd, CLI_SNAPSHOT_TAKE);
    OK("quota", "set", "tenant-a*", "--max-records", "5", "--max-bytes=4096");
    ck_assert_int_eq(q->cmd, CLI_QUOTA_SET);
    ck_assert_uint_eq(q->pattern_len, 9);
    ck_assert(memcmp(q->pattern, "tenant-a*", 9) == 0);
    ck_assert_uint_eq(q->max_records, 5);
    ck_assert_uint_eq(q->max_bytes, 4096);
    BAD("--max-records: bad value", "quota", "set", "a", "--max-records", "-1");
    BAD("missing PATTERN", "quota", "set");
    OK("quota", "remove", "tenant-a*");
    ck_assert_int_eq(q->cmd, CLI_QUOTA_REMOVE);
    OK("quota", "list");
    ck_assert_int_eq(q->cmd, CLI_QUOTA_LIST);
    BAD("quota: unknown subcommand", "quota", "show");
    OK("schema", "upgrade", "--to", "2");
    ck_assert_int_eq(q->cmd, CLI_SCHEMA_UPGRADE);
    ck_assert_uint_eq(q->schema_to, 2);
    OK("snapshot", "backup", "/tmp/x.backup");
    ck_assert_int_eq(q->cmd, CLI_SNAPSHOT_BACKUP);
    ck_assert_str_eq(q->file, "/tmp/x.backup");
    OK("snapshot", "verify", "f");
    ck_assert_int_eq(q->cmd, CLI_SNAPSHOT_VERIFY);
    ck_assert_str_eq(q->file, "f");
    BAD("snapshot backup: missing FILE", "snapshot", "backup");
    BAD("unexpected argument", "snapshot", "verify", "a", "b");
    OK("leave");
    OK("session");
    BAD("members: missing subcommand", "members");
    BAD("members: unknown subcommand \"lst\"", "members", "lst");
    BAD("unexpected argument", "status", "x");
}
END_TEST

START_TEST(help)
{
    OK("--help");
    ck_assert(g.help);
    ck_assert_int_eq(q->cmd, 0);
    OK("claim", "--bogus", "--help");
    ck_assert(g.help);
    ck_assert_int_eq(q->cmd, CLI_CLAIM);
    OK("--cluster", "127.0.0.1:1", "members", "add", "-h");
    ck_assert_int_eq(q->cmd, CLI_MEMBERS_ADD);
    OK("members", "--help");
    ck_assert_int_eq(q->cmd, 0);
    ck_assert_str_eq(g.help_group, "members");
}
END_TEST

/* The help of each command names every field its parser takes: an option
 * as --name, a positional in capitals. */
static const enum cli_cmd all_cmds[] = {
    CLI_CLAIM,          CLI_COMPLETE,        CLI_RELEASE,
    CLI_LOOKUP,         CLI_FORGET,          CLI_STATUS,
    CLI_MEMBERS_LIST,   CLI_MEMBERS_ADD,     CLI_MEMBERS_REMOVE,
    CLI_MEMBERS_ASSIGN, CLI_TRANSFER,        CLI_LEAVE,
    CLI_SNAPSHOT_TAKE,  CLI_SNAPSHOT_BACKUP, CLI_SNAPSHOT_VERIFY,
    CLI_SESSION,        CLI_QUOTA_SET,       CLI_QUOTA_REMOVE,
    CLI_QUOTA_LIST,     CLI_SCHEMA_UPGRADE};
#define N_ALL_CMDS (sizeof all_cmds / sizeof all_cmds[0])

START_TEST(help_is_complete)
{
    const enum cli_cmd *all = all_cmds;
    const char *overview = cli_help_overview();

    for (size_t i = 0; i < N_ALL_CMDS; i++) {
        const char *h = cli_help_command(all[i]);
        size_t n;
        const char *const *names = cli_cmd_fields(all[i], &n);
        const char *name = cli_cmd_name(all[i]);

        ck_assert_ptr_nonnull(h);
        ck_assert_msg(strstr(h, name) != NULL, "%s: help lacks its name", name);
        ck_assert_msg(strstr(overview, name) != NULL, "overview lacks %s",
                      name);
        for (size_t k = 0; k < n; k++) {
            char opt[40];
            char pos[40];
            size_t j;

            snprintf(opt, sizeof opt, "--%s", names[k]);
            for (j = 2; opt[j] != '\0'; j++) {
                opt[j] = opt[j] == '_' ? '-' : opt[j];
            }
            for (j = 0; names[k][j] != '\0'; j++) {
                char c = names[k][j];

                pos[j] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
            }
            pos[j] = '\0';
            ck_assert_msg(strstr(h, opt) != NULL || strstr(h, pos) != NULL,
                          "%s: help lacks %s", name, names[k]);
        }
    }
    /* Every exit code is explained in the overview. */
    for (int code = 0; code <= 4; code++) {
        char line[8];

        snprintf(line, sizeof line, "\n  %d  ", code);
        ck_assert_msg(strstr(overview, line) != NULL, "exit %d", code);
    }
}
END_TEST

START_TEST(every_field_bounded)
{
    /* Every row of the field table refuses a value over every bound: 65537
     * digits are longer than any field and no number, duration, id, token,
     * address, role, nor hex or base64 of a valid length. The message names
     * the field and says what it wants; a flag refuses any value. */
    static char big[ONCE_RESULT_MAX + 2];
    const size_t len = ONCE_RESULT_MAX + 1;
    char want[128];

    memset(big, '7', len);
    for (size_t i = 0; i < N_ALL_CMDS; i++) {
        size_t n;
        const char *const *names = cli_cmd_fields(all_cmds[i], &n);
        const char *cmd = cli_cmd_name(all_cmds[i]);

        for (size_t k = 0; k < n; k++) {
            bool flag = cli_field_is_flag(names[k]);

            cli_req_init(q, all_cmds[i]);
            q->session = true;
            ck_assert_int_eq(cli_req_set(q, names[k], big, flag ? 1 : len, err),
                             -EINVAL);
            snprintf(want, sizeof want, "%s: \"%s\"%s", cmd, names[k],
                     flag ? " takes no value" : ": bad value (want ");
            ck_assert_msg(strncmp(err, want, strlen(want)) == 0,
                          "\"%s\" is not \"%s...\"", err, want);
            ck_assert_msg(flag || strlen(err) > strlen(want) + 2,
                          "%s: %s: no \"want\" text", cmd, names[k]);
        }
    }
}
END_TEST

START_TEST(session_fields)
{
    /* The session's setter is the command line's: same names, same checks. */
    cli_req_init(q, CLI_CLAIM);
    q->session = true;
    ck_assert_int_eq(cli_req_set(q, "scope", "s\0x", 3, err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "NUL"));
    ck_assert_int_eq(cli_req_set(q, "scope", "s", 1, err), 0);
    ck_assert_int_eq(cli_req_set(q, "key", "k", 1, err), 0);
    ck_assert_int_eq(cli_req_set(q, "timeout", "2s", 2, err), 0);
    ck_assert_uint_eq(q->timeout_ms, 2000);
    ck_assert_int_eq(cli_req_set(q, "lease", "1s", 2, err), 0);
    ck_assert_int_eq(cli_req_check(q, err), -EINVAL);
    ck_assert_str_eq(err, "claim: \"lease\" requires \"idempotent\"");
    ck_assert_int_eq(cli_req_set(q, "bogus", "1", 1, err), -EINVAL);
    ck_assert_str_eq(err, "claim: unknown field \"bogus\"");
    ck_assert(cli_field_is_flag("idempotent"));
    ck_assert(!cli_field_is_flag("ttl"));
    ck_assert(cli_req_accepts(q, "timeout"));
    q->session = false;
    ck_assert(!cli_req_accepts(q, "timeout")); /* global on the line */
}
END_TEST

START_TEST(tokens)
{
    struct once_token t;
    char buf[CLI_TOKEN_TEXT_MAX];

    ck_assert(cli_parse_token("0:42:1", &t));
    ck_assert_uint_eq(t.group_id, 0);
    ck_assert_uint_eq(t.index, 42);
    ck_assert_uint_eq(t.slot, 1);
    ck_assert_str_eq(cli_format_token(&t, buf), "0:42:1");
    ck_assert(
        cli_parse_token("4294967295:18446744073709551615:4294967295", &t));
    ck_assert_str_eq(cli_format_token(&t, buf),
                     "4294967295:18446744073709551615:4294967295");
    ck_assert(!cli_parse_token("4294967296:1:1", &t));
    ck_assert(!cli_parse_token("1:18446744073709551616:1", &t));
    ck_assert(!cli_parse_token("1:2", &t));
    ck_assert(!cli_parse_token("1:2:3:4", &t));
    ck_assert(!cli_parse_token("1::3", &t));
    ck_assert(!cli_parse_token(":1:2", &t));
    ck_assert(!cli_parse_token("1:2:", &t));
    ck_assert(!cli_parse_token("a:2:3", &t));
    ck_assert(!cli_parse_token(" 1:2:3", &t));
    ck_assert(!cli_parse_token("", &t));
    ck_assert(!cli_parse_token(NULL, &t));
}
END_TEST

START_TEST(base64)
{
    uint8_t out[8];
    size_t n = 99;
    char *s;

    ck_assert(cli_b64_decode("", 0, out, sizeof out, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert(cli_b64_decode("YQ==", 4, out, sizeof out, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(out[0], 'a');
    ck_assert(cli_b64_decode("YWI=", 4, out, sizeof out, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert(cli_b64_decode("YWJj", 4, out, sizeof out, &n));
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(memcmp(out, "abc", 3), 0);
    ck_assert(!cli_b64_decode("YQ=", 3, out, sizeof out, &n));
    ck_assert(!cli_b64_decode("Y===", 4, out, sizeof out, &n));
    ck_assert(!cli_b64_decode("YQ=a", 4, out, sizeof out, &n));
    ck_assert(!cli_b64_decode(" YWJ", 4, out, sizeof out, &n));
    ck_assert(!cli_b64_decode("YW\nJ", 4, out, sizeof out, &n));
    ck_assert(!cli_b64_decode("YWJjZGVmZ2hp", 12, out, sizeof out, &n));
    ck_assert(cli_b64_decode("YWJjZGVmZ2g=", 12, out, sizeof out, &n));
    ck_assert_uint_eq(n, 8);

    s = cli_b64_encode((const uint8_t *)"abcd", 4);
    ck_assert_str_eq(s, "YWJjZA==");
    free(s);
    s = cli_b64_encode(NULL, 0);
    ck_assert_str_eq(s, "");
    free(s);
}
END_TEST

START_TEST(addresses)
{
    char buf[256];
    const char *addrs[ONCE_ADDRS_MAX];

    ck_assert(cli_check_addr("127.0.0.1:7101"));
    ck_assert(!cli_check_addr("127.0.0.1"));
    ck_assert(!cli_check_addr("127.0.0.1:0"));
    ck_assert(!cli_check_addr("127.0.0.1:65536"));
    ck_assert(!cli_check_addr(":80"));
    ck_assert(!cli_check_addr("a b:80"));
    ck_assert(!cli_check_addr("localhost:80")); /* IPv4 literals only */
    ck_assert(!cli_check_addr("127.0.0.1:80:1"));
    ck_assert(!cli_check_addr("127.0.0.1: 80"));
    ck_assert(!cli_check_addr("[::1]:80"));
    ck_assert_int_eq(
        cli_parse_cluster(CLI_CLUSTER_DEFAULT, buf, sizeof buf, addrs, err), 3);
    ck_assert_str_eq(addrs[2], "127.0.0.1:7103");
    ck_assert_int_eq(cli_parse_cluster("127.0.0.1:1,,127.0.0.1:2", buf,
                                       sizeof buf, addrs, err),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "bad address"));
    ck_assert_int_eq(cli_parse_cluster("", buf, sizeof buf, addrs, err),
                     -EINVAL);
}
END_TEST

static const char *sget(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

START_TEST(json_claim)
{
    struct once_result r;
    json_t *o;

    memset(&r, 0, sizeof r); /* once_result_init: a zeroed result */
    r.status = ONCE_STATUS_OK;
    r.outcome = ONCE_ACCEPTED;
    memset(r.request_id, 0xab, ONCE_ID_LEN);
    r.has_first = true;
    memset(r.first_request_id, 0xab, ONCE_ID_LEN);
    r.first_index = 42;
    r.first_time_ms = 1700000000000u;
    r.has_owner_token = true;
    r.owner_token.group_id = 0;
    r.owner_token.index = 42;
    r.owner_token.slot = 1;
    r.kind = ONCE_IDEMPOTENT;
    r.state = ONCE_STATE_PENDING;
    r.expires_ms = 5;
    r.lease_expires_ms = 6;
    r.owner_attempt = 1;
    r.log_time_ms = 1700000000777u;
    r.origin.has_cluster_id = true;
    memset(r.origin.cluster_id, 0x01, ONCE_ID_LEN);
    r.origin.node_id = 0x1f;
    o = cli_json_result(CLI_CLAIM, &r);
    ck_assert_str_eq(sget(o, "outcome"), "ACCEPTED");
    ck_assert(json_is_false(json_object_get(o, "retry")));
    ck_assert_str_eq(sget(o, "request_id"), "abababababababababababababababab");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "first_index")), 42);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "log_time_ms")),
                     1700000000777);
    ck_assert_str_eq(sget(o, "owner_token"), "0:42:1");
    ck_assert_str_eq(sget(o, "kind"), "IDEMPOTENT");
    ck_assert_str_eq(sget(o, "state"), "PENDING");
    ck_assert_str_eq(sget(o, "cluster_id"), "01010101010101010101010101010101");
    ck_assert_str_eq(sget(o, "node_id"), "000000000000001f");
    ck_assert_str_eq(sget(o, "boot_id"), "");
    /* Not applicable: absent. */
    ck_assert_ptr_null(json_object_get(o, "result_b64"));
    ck_assert_ptr_null(json_object_get(o, "stored_error"));
    ck_assert_ptr_null(json_object_get(o, "retry_after_ms"));
    ck_assert_ptr_null(json_object_get(o, "error"));
    ck_assert_ptr_null(json_object_get(o, "attempts"));
    ck_assert_int_eq(cli_exit_code(CLI_CLAIM, false, &r), 0);
    json_decref(o);

    /* DUPLICATE with a stored result; IN_PROGRESS with retry_after_ms. */
    r.outcome = ONCE_DUPLICATE;
    r.has_owner_token = false;
    r.state = ONCE_STATE_COMPLETED;
    r.result = (uint8_t *)"ok";
    r.result_len = 2;
    o = cli_json_result(CLI_CLAIM, &r);
    ck_assert_str_eq(sget(o, "result_b64"), "b2s=");
    ck_assert_ptr_null(json_object_get(o, "owner_token"));
    ck_assert_int_eq(cli_exit_code(CLI_CLAIM, false, &r), 1);
    json_decref(o);
    r.result = NULL; /* not owned here: never freed */
    r.result_len = 0;
    r.outcome = ONCE_IN_PROGRESS;
    r.state = ONCE_STATE_PENDING;
    r.retry_after_ms = 0;
    o = cli_json_result(CLI_CLAIM, &r);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "retry_after_ms")),
                     0);
    json_decref(o);
    r.outcome = ONCE_FAILED;
    r.state = ONCE_STATE_FAILED;
    memcpy(r.stored_error, "card \xff", 6);
    r.stored_error_len = 6;
    o = cli_json_result(CLI_CLAIM, &r);
    /* Not UTF-8: kept as base64 rather than lost. */
    ck_assert_ptr_null(json_object_get(o, "stored_error"));
    ck_assert_str_eq(sget(o, "stored_error_b64"), "Y2FyZCD/");
    json_decref(o);
}
END_TEST

START_TEST(json_lookup_attempts)
{
    struct once_result r;
    json_t *o;
    json_t *a;

    memset(&r, 0, sizeof r); /* once_result_init: a zeroed result */
    r.status = ONCE_STATUS_OK;
    r.outcome = ONCE_FOUND;
    r.has_first = true;
    r.attempts_total = 7;
    r.n_attempts = 2;
    r.attempts[0].outcome = ONCE_REPLAYED;
    r.attempts[0].index = 9;
    memcpy(r.attempts[0].execution_id, "job-1", 5);
    r.attempts[0].execution_id_len = 5;
    r.attempts[1].outcome = ONCE_ACCEPTED;
    r.attempts[1].retry = true;
    o = cli_json_result(CLI_LOOKUP, &r);
    ck_assert_ptr_null(json_object_get(o, "retry"));
    /* A node that does not send the log time: no field, not a 0. */
    ck_assert_ptr_null(json_object_get(o, "log_time_ms"));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "attempts_total")),
                     7);
    a = json_object_get(o, "attempts");
    ck_assert_uint_eq(json_array_size(a), 2);
    ck_assert_str_eq(sget(json_array_get(a, 0), "execution_id"), "job-1");
    ck_assert_str_eq(sget(json_array_get(a, 0), "outcome"), "REPLAYED");
    ck_assert(json_is_true(json_object_get(json_array_get(a, 1), "retry")));
    ck_assert_int_eq(cli_exit_code(CLI_LOOKUP, false, &r), 0);
    json_decref(o);
    r.outcome = ONCE_NOT_FOUND;
    ck_assert_int_eq(cli_exit_code(CLI_LOOKUP, false, &r), 1);
    ck_assert_int_eq(cli_exit_code(CLI_FORGET, false, &r), 1);
    r.outcome = ONCE_FORGOTTEN;
    ck_assert_int_eq(cli_exit_code(CLI_FORGET, false, &r), 0);
}
END_TEST

START_TEST(json_errors_and_exit_codes)
{
    struct once_result r;
    json_t *o;

    memset(&r, 0, sizeof r); /* once_result_init: a zeroed result */
    r.status = ONCE_STATUS_UNAVAILABLE;
    r.applied = ONCE_APPLIED_FALSE;
    strcpy(r.error, "no leader");
    strcpy(r.leader_hint, "127.0.0.1:7402");
    o = cli_json_result(CLI_CLAIM, &r);
    ck_assert_str_eq(sget(o, "error"), "UNAVAILABLE");
    ck_assert_str_eq(sget(o, "applied"), "false");
    ck_assert_str_eq(sget(o, "leader_hint"), "127.0.0.1:7402");
    ck_assert_str_eq(sget(o, "message"), "no leader");
    ck_assert_ptr_null(json_object_get(o, "outcome"));
    ck_assert_str_eq(sget(o, "node_id"), "");
    ck_assert_int_eq(cli_exit_code(CLI_CLAIM, false, &r), 3);
    json_decref(o);

    r.status = ONCE_STATUS_UNKNOWN;
    r.applied = ONCE_APPLIED_UNKNOWN;
    o = cli_json_error(&r);
    ck_assert_str_eq(sget(o, "applied"), "unknown");
    ck_assert_int_eq(cli_exit_code(CLI_CLAIM, false, &r), 4);
    json_decref(o);
    r.status = ONCE_STATUS_DEADLINE_EXCEEDED;
    ck_assert_int_eq(cli_exit_code(CLI_COMPLETE, false, &r), 4);
    r.applied = ONCE_APPLIED_FALSE;
    ck_assert_int_eq(cli_exit_code(CLI_COMPLETE, false, &r), 3);
    r.status = ONCE_STATUS_INVALID_ARGUMENT;
    ck_assert_int_eq(cli_exit_code(CLI_CLAIM, false, &r), 2);
    r.status = ONCE_STATUS_FAILED_PRECONDITION; /* cluster id mismatch */
    ck_assert_int_eq(cli_exit_code(CLI_STATUS, false, &r), 3);

    /* The state machine's refusals are errors with their outcome. */
    r.status = ONCE_STATUS_OK;
    r.applied = ONCE_APPLIED_NONE;
    r.outcome = ONCE_OUT_OF_SPACE;
    o = cli_json_result(CLI_CLAIM, &r);
    ck_assert_str_eq(sget(o, "error"), "RESOURCE_EXHAUSTED");
    ck_assert_str_eq(sget(o, "applied"), "false");
    ck_assert_int_eq(cli_exit_code(CLI_CLAIM, false, &r), 3);
    json_decref(o);
    r.outcome = ONCE_REFUSED_ARGUMENT;
    ck_assert_int_eq(cli_exit_code(CLI_CLAIM, false, &r), 2);

    /* Each command's success. */
    static const struct
    {
        enum cli_cmd cmd;
        bool terminal;
        enum once_outcome outcome;
        int code;
    } table[] = {
        {CLI_CLAIM, false, ONCE_ACCEPTED, 0},
        {CLI_CLAIM, false, ONCE_REPLAYED, 1},
        {CLI_CLAIM, false, ONCE_CONFLICT, 1},
        {CLI_CLAIM, false, ONCE_STALE, 1},
        {CLI_CLAIM, false, ONCE_FUTURE, 1},
        {CLI_CLAIM, false, ONCE_FAILED, 1},
        {CLI_COMPLETE, false, ONCE_COMPLETED, 0},
        {CLI_COMPLETE, false, ONCE_NOT_OWNER, 1},
        {CLI_RELEASE, false, ONCE_RELEASED, 0},
        {CLI_RELEASE, false, ONCE_FAILED, 1},
        {CLI_RELEASE, true, ONCE_FAILED, 0},
        {CLI_RELEASE, true, ONCE_RELEASED, 1},
        {CLI_MEMBERS_ADD, false, ONCE_OK, 0},
        {CLI_MEMBERS_ADD, false, ONCE_FAILED_PRECONDITION, 1},
        {CLI_LEAVE, false, ONCE_FAILED_PRECONDITION, 1},
        {CLI_MEMBERS_LIST, false, ONCE_UNSPECIFIED, 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        r.outcome = table[i].outcome;
        ck_assert_msg(
            cli_exit_code(table[i].cmd, table[i].terminal, &r) == table[i].code,
            "row %zu", i);
    }
}
END_TEST

START_TEST(json_admin_status)
{
    struct once_result r;
    struct once_status_info *s = calloc(1, sizeof *s);
    json_t *o;
    json_t *m;

    ck_assert_ptr_nonnull(s);
    memset(&r, 0, sizeof r); /* once_result_init: a zeroed result */
    r.status = ONCE_STATUS_OK;
    r.outcome = ONCE_FAILED_PRECONDITION;
    strcpy(r.reason, "id retired");
    o = cli_json_admin(&r);
    ck_assert_str_eq(sget(o, "outcome"), "FAILED_PRECONDITION");
    ck_assert_str_eq(sget(o, "reason"), "id retired");
    json_decref(o);
    r.outcome = ONCE_UNSPECIFIED;
    r.reason[0] = '\0';
    o = cli_json_admin(&r);
    ck_assert_str_eq(sget(o, "outcome"), "OK");
    ck_assert_ptr_null(json_object_get(o, "reason"));
    json_decref(o);

    s->role = ONCE_RAFT_LEADER;
    s->member_role = ONCE_ROLE_VOTER;
    s->term = 3;
    s->commit_index = 10;
    s->leader_id = 0xabc;
    strcpy(s->leader_addr, "127.0.0.1:7401");
    strcpy(s->store_backend, "sync_io");
    s->n_members = 1;
    s->members[0].id = 0xabc;
    strcpy(s->members[0].raft_addr, "127.0.0.1:7411");
    strcpy(s->members[0].client_addr, "127.0.0.1:7401");
    s->members[0].role = ONCE_ROLE_VOTER;
    s->members[0].reachable = true;
    o = cli_json_status(s);
    ck_assert_str_eq(sget(o, "role"), "LEADER");
    ck_assert_str_eq(sget(o, "leader"), "0000000000000abc");
    ck_assert_str_eq(sget(o, "store_backend"), "sync_io");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 3);
    m = json_array_get(json_object_get(o, "members"), 0);
    ck_assert_str_eq(sget(m, "id"), "0000000000000abc");
    ck_assert_str_eq(sget(m, "role"), "VOTER");
    ck_assert(json_is_true(json_object_get(m, "reachable")));
    json_decref(o);
    free(s);
}
END_TEST

START_TEST(text_output)
{
    struct once_result r;
    json_t *o;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    memset(&r, 0, sizeof r); /* once_result_init: a zeroed result */
    r.status = ONCE_STATUS_OK;
    r.outcome = ONCE_ACCEPTED;
    r.has_first = true;
    r.first_index = 42;
    strcpy(r.reason, "two words");
    o = cli_json_result(CLI_CLAIM, &r);
    cli_print_text(f, f, CLI_CLAIM, o);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "ACCEPTED retry=false"));
    ck_assert_ptr_nonnull(strstr(buf, " first_index=42"));
    ck_assert_ptr_nonnull(strstr(buf, " reason=\"two words\""));
    ck_assert_ptr_null(strstr(buf, "cluster_id"));
    ck_assert_int_eq(buf[strlen(buf) - 1], '\n');
    /* One line. */
    ck_assert_ptr_eq(strchr(buf, '\n'), buf + strlen(buf) - 1);
    json_decref(o);
    free(buf);
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, claim_defaults);
    tcase_add_test(tc, claim_options);
    tcase_add_test(tc, claim_refusals);
    tcase_add_test(tc, bounds);
    tcase_add_test(tc, complete_release);
    tcase_add_test(tc, admin_commands);
    tcase_add_test(tc, help);
    tcase_add_test(tc, help_is_complete);
    tcase_add_test(tc, every_field_bounded);
    tcase_add_test(tc, session_fields);
    tcase_add_test(tc, tokens);
    tcase_add_test(tc, base64);
    tcase_add_test(tc, addresses);
    tcase_add_test(tc, json_claim);
    tcase_add_test(tc, json_lookup_attempts);
    tcase_add_test(tc, json_errors_and_exit_codes);
    tcase_add_test(tc, json_admin_status);
    tcase_add_test(tc, text_output);
    suite_add_tcase(s, tc);
    return s;
}
