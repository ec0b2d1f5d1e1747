/* cli/cli.h: oncectl, the operator CLI (docs/design.md §6, docs/oncectl.md).
 *
 * Layers, so that the pure parts can be unit-tested without a cluster:
 *   args.c     the command and field tables, parsing of session JSON
 *              fields and of argv's values into one struct cli_req, the
 *              checks that combine options.
 *   argv.c     the command line's words: global options, command words,
 *              positionals and --options, through args.c's setter.
 *   help.c     the help texts.
 *   value.c    owner tokens, base64, addresses, the --cluster list.
 *   json.c     JSON objects from filled libonce results, exit codes, the
 *              text rendering of those objects.
 *   commands.c runs one struct cli_req over a once_client.
 *   session.c  `oncectl session`: JSON lines in, JSON lines out.
 *   main.c     global options, the client, one command.
 *
 * Every command, on the command line or in a session, goes through the same
 * table (args.c): an argv word `--payload-hash X` and a session field
 * `"payload_hash":"X"` reach the same setter and the same checks, so the two
 * interfaces cannot drift apart. Single-threaded; nothing here is shared.
 *
 * Errors (common/err.h): a parser that fails returns -EINVAL and one line
 * naming the problem in @err, a buffer of ERR_MSG_SIZE bytes (NULL: no
 * text); the line is shown to the operator as is. */
#ifndef ONCE_CLI_CLI_H_
#define ONCE_CLI_CLI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "common/err.h"
#include "once.h"

/* Exit codes (docs/design.md §6). */
enum {
    CLI_EXIT_OK = 0,          /* ACCEPTED, or the command's success outcome */
    CLI_EXIT_DENIED = 1,      /* a definite non-accept outcome */
    CLI_EXIT_USAGE = 2,       /* usage, or INVALID_ARGUMENT */
    CLI_EXIT_NOT_APPLIED = 3, /* error, certainly not applied */
    CLI_EXIT_UNKNOWN = 4,     /* error, outcome unknown */
};

#define CLI_TIMEOUT_DEFAULT_MS 5000u
#define CLI_TIMEOUT_MAX_MS     3600000u /* the envelope's deadline bound */
#define CLI_TTL_DEFAULT_MS     86400000u
/* Durations other than --timeout: the cluster enforces its own maxima
 * (max_ttl, max_window, max_lease); this only keeps arithmetic finite. */
#define CLI_DURATION_MAX_MS (UINT64_C(1) << 53)
#define CLI_PATH_MAX        4095
#define CLI_LINE_MAX        (1u << 20) /* a session line, newline excluded */
/* base64 text of ONCE_RESULT_MAX bytes: 4 * ceil(65536 / 3). */
#define CLI_B64_MAX (4 * ((ONCE_RESULT_MAX + 2) / 3))

enum cli_cmd {
    CLI_CLAIM = 1,
    CLI_COMPLETE,
    CLI_RELEASE,
    CLI_LOOKUP,
    CLI_FORGET,
    CLI_STATUS,
    CLI_MEMBERS_LIST,
    CLI_MEMBERS_ADD,
    CLI_MEMBERS_REMOVE,
    CLI_MEMBERS_ASSIGN,
    CLI_TRANSFER,
    CLI_LEAVE,
    CLI_SNAPSHOT_TAKE,
    CLI_SNAPSHOT_BACKUP,
    CLI_SNAPSHOT_VERIFY,
    CLI_SESSION,
    CLI_QUOTA_SET,
    CLI_QUOTA_REMOVE,
    CLI_QUOTA_LIST,
    CLI_SCHEMA_UPGRADE,
};

/* One parsed command: everything a command line or a session line can
 * say. Byte fields hold exactly what was given (no NUL added); has_* says
 * whether an optional field was given at all. Large (a 64 KiB result
 * buffer): allocate it, do not put it on a small stack. */
struct cli_req
{
    enum cli_cmd cmd;
    bool session;          /* names fields as session keys in errors */
    unsigned n_positional; /* positionals given on the command line */
    uint32_t seen;         /* fields given, one bit each (args.c) */

    uint8_t scope[ONCE_SCOPE_MAX];
    size_t scope_len;
    bool has_scope;
    uint8_t key[ONCE_KEY_MAX];
    size_t key_len;
    bool has_key;

    bool has_request_id;
    uint8_t request_id[ONCE_ID_LEN];
    bool has_execution_id;
    uint8_t execution_id[ONCE_EXECUTION_ID_MAX];
    size_t execution_id_len;
    bool has_ttl;
    uint64_t ttl_ms;
    bool has_ts;
    uint64_t ts_ms;
    bool has_window;
    uint64_t window_ms;
    bool idempotent;
    bool has_payload_hash;
    uint8_t payload_hash[ONCE_PAYLOAD_HASH_MAX];
    size_t payload_hash_len;
    bool has_lease;
    uint64_t lease_ms;
    bool has_max_uses;
    uint64_t max_uses; /* 1..64 */
    bool sliding;

    bool has_owner_token;
    struct once_token owner_token;
    bool has_result; /* --result or --result-b64 (not both) */
    bool result_from_b64;
    uint8_t result[ONCE_RESULT_MAX];
    size_t result_len;
    bool terminal;
    bool has_error;
    uint8_t error[ONCE_ERROR_MAX];
    size_t error_len;

    bool has_timeout;
    uint32_t timeout_ms;

    bool has_node;
    char node[ONCE_ADDR_MAX + 1];
    bool state_digest; /* status --state-digest */
    bool has_member_id;
    uint64_t member_id;
    bool force; /* members remove/assign --force */
    bool has_raft_addr;
    char raft_addr[ONCE_ADDR_MAX + 1];
    bool has_client_addr;
    char client_addr[ONCE_ADDR_MAX + 1];
    bool has_role;
    enum once_role role;
    bool has_file; /* snapshot backup / verify */
    char file[CLI_PATH_MAX + 1];
    bool has_pattern; /* quota set / remove */
    uint8_t pattern[ONCE_PATTERN_MAX];
    size_t pattern_len;
    bool has_max_records;
    uint64_t max_records;
    bool has_max_bytes;
    uint64_t max_bytes;
    bool has_schema_to; /* schema upgrade --to */
    uint64_t schema_to;
    bool leader_only; /* lookup --leader */
};

/* ------------------------------------------------------------------------
 * args.c, value.c, help.c: pure parsing and the help texts
 * ---------------------------------------------------------------------- */

/* Global options of the command line. */
struct cli_global
{
    const char *cluster; /* borrowed from argv/env; NULL: the default */
    bool json;
    uint32_t timeout_ms;
    bool pin_cluster_id;
    uint8_t cluster_id[ONCE_ID_LEN];
    /* --tls-ca/--tls-cert/--tls-key (borrowed from argv; NULL: not given,
     * then main.c reads $ONCE_TLS_CA/$ONCE_TLS_CERT/$ONCE_TLS_KEY). */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    bool help;              /* --help / -h seen */
    const char *help_group; /* a group word without subcommand (argv.c) */
};

#define CLI_CLUSTER_DEFAULT "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"

/* Zero @q and set the command. */
void cli_req_init(struct cli_req *q, enum cli_cmd cmd);

/* The command a name denotes ("claim", "members add", "transfer", ...);
 * 0 if none. */
enum cli_cmd cli_cmd_from_name(const char *name);
/* The canonical name ("members transfer" for CLI_TRANSFER). */
const char *cli_cmd_name(enum cli_cmd cmd);

/* Parse a whole command line (argv[0] excluded): global options anywhere,
 * the command word(s), its positionals and options. `--` ends options;
 * `--name=value` and `--name value` are both accepted. Returns 0, or
 * -EINVAL with one line in @err naming the problem. On 0 with g->help set the
 * caller prints help (for q->cmd if non-zero, else the overview) and
 * q may be only partly filled. cli_req_check has been run on 0. */
int cli_parse_argv(int argc,
                   char *const *argv,
                   struct cli_global *g,
                   struct cli_req *q,
                   char *err);

/* Set field @name (a session key, or an option name with '-' for '_')
 * from @val (@len bytes; NULL for a bare flag) as the command line would.
 * Returns 0, or -EINVAL with @err. */
int cli_req_set(struct cli_req *q,
                const char *name,
                const char *val,
                size_t len,
                char *err);

/* Whether field @name is a flag (takes no value). */
bool cli_field_is_flag(const char *name);

/* Whether @name is a field of q->cmd (option or positional). */
bool cli_req_accepts(const struct cli_req *q, const char *name);
/* Whether @name is one of q->cmd's positional fields (argv.c: those are
 * not options). */
bool cli_req_is_positional(const struct cli_req *q, const char *name);
/* The name of q->cmd's next positional field, counted in q->n_positional,
 * or NULL when it takes no more (argv.c). */
const char *cli_req_next_positional(struct cli_req *q);

/* Check combinations and requirements and fill defaults (claim's 24h
 * TTL). Returns 0, or -EINVAL with @err. */
int cli_req_check(struct cli_req *q, char *err);

/* Parse "--cluster" text into @addrs (pointers into @buf, which receives a
 * copy of @s). Returns the count (1..ONCE_ADDRS_MAX) or -EINVAL with
 * @err. */
int cli_parse_cluster(const char *s,
                      char *buf,
                      size_t buflen,
                      const char **addrs,
                      char *err);

/* "GROUP:INDEX:SLOT", decimal, each within its type. */
bool cli_parse_token(const char *s, struct once_token *t);
/* Print a token; @buf has CLI_TOKEN_TEXT_MAX bytes. Returns @buf. */
#define CLI_TOKEN_TEXT_MAX 44
char *cli_format_token(const struct once_token *t,
                       char buf[CLI_TOKEN_TEXT_MAX]);

/* Standard base64 with padding (RFC 4648 §4), no whitespace. Decodes into
 * @out (@cap bytes). False if malformed or over @cap. */
bool cli_b64_decode(const char *s,
                    size_t len,
                    uint8_t *out,
                    size_t cap,
                    size_t *out_len);
/* Encode @len bytes; returns a malloc'd NUL-terminated string or NULL. */
char *cli_b64_encode(const uint8_t *in, size_t len);

/* "IP:PORT": an IPv4 literal and a port 1..65535, at most 64 bytes. */
bool cli_check_addr(const char *s);

/* help.c: the overview, and one command's help text (NULL if unknown). */
const char *cli_help_overview(void);
const char *cli_help_command(enum cli_cmd cmd);
/* Every field name q->cmd accepts, for tests: *n receives the count. */
const char *const *cli_cmd_fields(enum cli_cmd cmd, size_t *n);

/* ------------------------------------------------------------------------
 * json.c: answers as JSON objects, exit codes, text
 * ---------------------------------------------------------------------- */

/* Who answered: cluster_id, node_id, boot_id (hex; "" when not known).
 * @pinned: the client's pinned cluster id, used when the answer had none
 * (NULL: none). */
void cli_json_origin(json_t *o,
                     const struct once_origin *origin,
                     const uint8_t *pinned);

/* The object for a data command (claim ... forget) from @r. */
json_t *cli_json_result(enum cli_cmd cmd, const struct once_result *r);
/* jansson returns NULL only when out of memory: oncectl aborts with a
 * message then (json.c). cli_set adds @v to @o under @key (stolen). */
json_t *cli_must(json_t *v);
void cli_set(json_t *o, const char *key, json_t *v);
/* A node id as 16 hex digits, "" for 0. */
json_t *cli_jid(uint64_t id);
/* JSON integers are signed 64-bit: past INT64_MAX a decimal string, never
 * a wrapped negative number. */
json_t *cli_juint(uint64_t v);
/* An error object (status not OK) from @r. */
json_t *cli_json_error(const struct once_result *r);
/* An INVALID_ARGUMENT object for a local problem (usage, bad line). */
json_t *cli_json_usage(const char *message);
/* An admin answer: {"outcome": OK | FAILED_PRECONDITION, "reason"?} and
 * the origin, or the error object. */
json_t *cli_json_admin(const struct once_result *r);
/* Member directory rows. */
json_t *cli_json_members(const struct once_member *m, size_t n);
/* The status command's object (status OK). */
json_t *cli_json_status(const struct once_status_info *s);

/* The exit code for command @cmd answered with @r (release: @terminal). */
int cli_exit_code(enum cli_cmd cmd, bool terminal, const struct once_result *r);

/* Print @o readably on @out (answers) or @errout (errors): one line per
 * answer, tables for status and members. */
void cli_print_text(FILE *out, FILE *errout, enum cli_cmd cmd, json_t *o);

/* Print @o compact on one line, and flush. 0, or -errno (write failed). */
int cli_print_json(FILE *out, json_t *o);

/* ------------------------------------------------------------------------
 * commands.c / session.c
 * ---------------------------------------------------------------------- */

/* What a command runs against. */
struct cli_ctx
{
    once_client *client;
    const char *first_addr; /* the first --cluster address (leave) */
    uint32_t timeout_ms;    /* default deadline per call */
    bool progress;          /* backup: progress lines on stderr */
};

/* Run @q; *out receives the answer object (never NULL: an allocation
 * failure aborts). Returns the exit code. */
int cli_run(const struct cli_ctx *x, const struct cli_req *q, json_t **out);

/* Set an empty "cluster_id" of @o to the client's pinned id, if any. */
void cli_fill_cluster_id(const struct cli_ctx *x, json_t *o);

/* backup.c: `snapshot backup FILE` and `snapshot verify FILE`. */
int cli_run_backup(const struct cli_ctx *x,
                   const struct cli_req *q,
                   uint32_t timeout_ms,
                   json_t **out);
int cli_run_verify(const struct cli_req *q, json_t **out);

/* The session loop over @in/@out. Returns the process exit code. */
int cli_session(const struct cli_ctx *x, FILE *in, FILE *out);

#endif /* ONCE_CLI_CLI_H_ */
