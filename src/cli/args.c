/* cli/args.c: the command and field tables and the parsers of a request
 * (see cli.h); the command line's words are read by argv.c, which reaches
 * the tables only through the cli_req_* functions here.
 *
 * One table of fields and one of commands drive both the command line and
 * the session lines: a field is a positional or an option, and its name is
 * the same with '_' (session key) or '-' (--flag). Each field's row says
 * how its text is parsed, where in struct cli_req it lands and what a bad
 * value should have been, so cli_req_set is one generic path for every
 * field, with no code of its own per field. The help texts (help.c) list the
 * same names; a unit test checks that every field of every command appears in
 * that command's help, so the help cannot omit what the parser takes. */
#include "cli/cli.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "common/text.h"

enum field {
    F_SCOPE,
    F_KEY,
    F_REQUEST_ID,
    F_EXECUTION_ID,
    F_TTL,
    F_TS,
    F_WINDOW,
    F_IDEMPOTENT,
    F_PAYLOAD_HASH,
    F_LEASE,
    F_OWNER_TOKEN,
    F_RESULT,
    F_RESULT_B64,
    F_TERMINAL,
    F_ERROR,
    F_NODE,
    F_STATE_DIGEST,
    F_ID,
    F_RAFT_ADDR,
    F_CLIENT_ADDR,
    F_ROLE,
    F_FORCE,
    F_TIMEOUT,
    F_FILE,
    F_PATTERN,
    F_MAX_RECORDS,
    F_MAX_BYTES,
    F_TO,
    F_LEADER,
    F_MAX_USES,
    F_SLIDING,
    F_COUNT,
};

/* field_by_name's answer for a name no field has (a value, not an error). */
#define F_NONE (-1)

#define BIT(f) (UINT32_C(1) << (f))

struct field_def;

/* Parse @val (@len bytes, NUL-terminated, no NUL among them) into @q at
 * @fd's offsets, within @fd's bounds. True if the value is valid; on false
 * the destination may be partly written (the request is refused). */
typedef bool field_parser(const struct field_def *fd,
                          struct cli_req *q,
                          const char *val,
                          size_t len);

struct field_def
{
    const char *name;    /* session key; the option is "--" + '-' for '_' */
    field_parser *parse; /* NULL: a flag, which takes no value */
    size_t off;          /* offsetof the value in struct cli_req */
    size_t len_off;      /* offsetof its length (byte fields; else 0) */
    size_t has_off;      /* offsetof the bool "given and valid" (a flag:
                          * the flag itself) */
    uint64_t min, max;   /* bounds of the length or of the number */
    int excludes;        /* the field this one may not be given with; -1 */
    const char *want;    /* what a bad value should have been */
};

/* The destination of a row in @q. */
static void *at(struct cli_req *q, size_t off)
{
    return (char *)q + off;
}

/* Text of @min..@max bytes, copied as given. */
static bool parse_bytes(const struct field_def *fd,
                        struct cli_req *q,
                        const char *val,
                        size_t len)
{
    if (len < fd->min || len > fd->max) {
        return false;
    }
    if (len > 0) {
        memcpy(at(q, fd->off), val, len);
    }
    *(size_t *)at(q, fd->len_off) = len;
    return true;
}

/* Exactly @max bytes in hex. */
static bool parse_hex(const struct field_def *fd,
                      struct cli_req *q,
                      const char *val,
                      size_t len)
{
    (void)len;
    return text_parse_hex(val, at(q, fd->off), (size_t)fd->max);
}

/* 0..@max bytes in hex. */
static bool parse_hex_var(const struct field_def *fd,
                          struct cli_req *q,
                          const char *val,
                          size_t len)
{
    (void)len;
    return text_parse_hex_var(val, at(q, fd->off), (size_t)fd->max,
                              at(q, fd->len_off));
}

/* A decimal integer of 0..@max. */
static bool parse_u64(const struct field_def *fd,
                      struct cli_req *q,
                      const char *val,
                      size_t len)
{
    (void)len;
    return text_parse_u64(val, fd->max, at(q, fd->off));
}

/* A duration of @min..@max ms into a uint64_t. */
static bool parse_ms(const struct field_def *fd,
                     struct cli_req *q,
                     const char *val,
                     size_t len)
{
    uint64_t *out = at(q, fd->off);

    (void)len;
    return text_parse_duration_ms(val, fd->max, out) && *out >= fd->min;
}

/* The same into a uint32_t (@max fits in one). */
static bool parse_ms32(const struct field_def *fd,
                       struct cli_req *q,
                       const char *val,
                       size_t len)
{
    uint64_t v;

    (void)len;
    if (!text_parse_duration_ms(val, fd->max, &v) || v < fd->min) {
        return false;
    }
    *(uint32_t *)at(q, fd->off) = (uint32_t)v;
    return true;
}

static bool parse_token(const struct field_def *fd,
                        struct cli_req *q,
                        const char *val,
                        size_t len)
{
    (void)len;
    return cli_parse_token(val, at(q, fd->off));
}

/* Base64 of 0..@max bytes; also marks the result as given in base64, for
 * the text output (the one field with a second effect). */
static bool parse_b64(const struct field_def *fd,
                      struct cli_req *q,
                      const char *val,
                      size_t len)
{
    q->result_from_b64 = cli_b64_decode(val, len, at(q, fd->off),
                                        (size_t)fd->max, at(q, fd->len_off));
    return q->result_from_b64;
}

/* An IPv4 IP:PORT into a char[ONCE_ADDR_MAX + 1]. */
static bool parse_addr(const struct field_def *fd,
                       struct cli_req *q,
                       const char *val,
                       size_t len)
{
    if (!cli_check_addr(val)) {
        return false;
    }
    memcpy(at(q, fd->off), val, len + 1);
    return true;
}

/* A node id: 1..16 hex digits, not 0. */
static bool parse_id(const struct field_def *fd,
                     struct cli_req *q,
                     const char *val,
                     size_t len)
{
    (void)len;
    return text_parse_id(val, at(q, fd->off));
}

static bool parse_role(const struct field_def *fd,
                       struct cli_req *q,
                       const char *val,
                       size_t len)
{
    enum once_role *out = at(q, fd->off);

    (void)len;
    if (strcasecmp(val, "voter") == 0) {
        *out = ONCE_ROLE_VOTER;
    } else if (strcasecmp(val, "standby") == 0) {
        *out = ONCE_ROLE_STANDBY;
    } else if (strcasecmp(val, "spare") == 0) {
        *out = ONCE_ROLE_SPARE;
    } else {
        return false;
    }
    return true;
}

/* A file path: 1..@max bytes. */
static bool parse_path(const struct field_def *fd,
                       struct cli_req *q,
                       const char *val,
                       size_t len)
{
    if (len < 1 || len > fd->max) {
        return false;
    }
    memcpy(at(q, fd->off), val, len);
    ((char *)at(q, fd->off))[len] = '\0';
    return true;
}

/* offsetof @member of struct cli_req, which must be of @type (an array
 * as a pointer to its first element): each row names the type its parser
 * writes, so a member whose type changes under its row fails to compile. */
#define OFF(member, type)               \
    (offsetof(struct cli_req, member) + \
     0 * sizeof(_Generic(((struct cli_req *)0)->member, type : 1)))
#define LEN(member)   OFF(member, size_t)
#define HAS(member)   OFF(member, bool)
#define BYTES(member) OFF(member, uint8_t *)
#define U64(member)   OFF(member, uint64_t)
#define ADDR(member)  OFF(member, char *)
#define DURATION      "(an integer with ms, s, m or h)"

/* One row per field: name, parser, value, length (byte fields), given,
 * min, max, the field it excludes, the "want" text. */
static const struct field_def fields[F_COUNT] = {
    [F_SCOPE] = {"scope", parse_bytes, BYTES(scope), LEN(scope_len),
                 HAS(has_scope), 1, ONCE_SCOPE_MAX, -1, "1..128 bytes"},
    [F_KEY] = {"key", parse_bytes, BYTES(key), LEN(key_len), HAS(has_key), 1,
               ONCE_KEY_MAX, -1, "1..256 bytes"},
    [F_REQUEST_ID] = {"request_id", parse_hex, BYTES(request_id), 0,
                      HAS(has_request_id), ONCE_ID_LEN, ONCE_ID_LEN, -1,
                      "32 hex digits"},
    [F_EXECUTION_ID] = {"execution_id", parse_bytes, BYTES(execution_id),
                        LEN(execution_id_len), HAS(has_execution_id), 0,
                        ONCE_EXECUTION_ID_MAX, -1, "0..128 bytes"},
    [F_TTL] = {"ttl", parse_ms, U64(ttl_ms), 0, HAS(has_ttl), 1,
               CLI_DURATION_MAX_MS, -1, "a duration over 0 " DURATION},
    [F_TS] = {"ts", parse_u64, U64(ts_ms), 0, HAS(has_ts), 0, UINT64_MAX, -1,
              "unix milliseconds (a decimal integer)"},
    [F_WINDOW] = {"window", parse_ms, U64(window_ms), 0, HAS(has_window), 1,
                  CLI_DURATION_MAX_MS, -1, "a duration over 0 " DURATION},
    [F_IDEMPOTENT] = {"idempotent", NULL, 0, 0, HAS(idempotent), 0, 0, -1, ""},
    [F_PAYLOAD_HASH] = {"payload_hash", parse_hex_var, BYTES(payload_hash),
                        LEN(payload_hash_len), HAS(has_payload_hash), 0,
                        ONCE_PAYLOAD_HASH_MAX, -1,
                        "0..64 bytes in hex (an even number of digits)"},
    [F_LEASE] = {"lease", parse_ms, U64(lease_ms), 0, HAS(has_lease), 0,
                 CLI_DURATION_MAX_MS, -1, "a duration " DURATION},
    [F_OWNER_TOKEN] = {"owner_token", parse_token,
                       OFF(owner_token, struct once_token), 0,
                       HAS(has_owner_token), 0, 0, -1,
                       "GROUP:INDEX:SLOT in decimal"},
    [F_RESULT] = {"result", parse_bytes, BYTES(result), LEN(result_len),
                  HAS(has_result), 0, ONCE_RESULT_MAX, F_RESULT_B64,
                  "0..65536 bytes"},
    [F_RESULT_B64] = {"result_b64", parse_b64, BYTES(result), LEN(result_len),
                      HAS(has_result), 0, ONCE_RESULT_MAX, F_RESULT,
                      "standard base64 with padding, of 0..65536 bytes"},
    [F_TERMINAL] = {"terminal", NULL, 0, 0, HAS(terminal), 0, 0, -1, ""},
    [F_ERROR] = {"error", parse_bytes, BYTES(error), LEN(error_len),
                 HAS(has_error), 0, ONCE_ERROR_MAX, -1, "0..1024 bytes"},
    [F_NODE] = {"node", parse_addr, ADDR(node), 0, HAS(has_node), 0, 0, -1,
                "an IPv4 IP:PORT"},
    [F_STATE_DIGEST] = {"state_digest", NULL, 0, 0, HAS(state_digest), 0, 0, -1,
                        ""},
    [F_ID] = {"id", parse_id, U64(member_id), 0, HAS(has_member_id), 0, 0, -1,
              "a node id: 1..16 hex digits, not 0"},
    [F_RAFT_ADDR] = {"raft_addr", parse_addr, ADDR(raft_addr), 0,
                     HAS(has_raft_addr), 0, 0, -1, "an IPv4 IP:PORT"},
    [F_CLIENT_ADDR] = {"client_addr", parse_addr, ADDR(client_addr), 0,
                       HAS(has_client_addr), 0, 0, -1, "an IPv4 IP:PORT"},
    [F_ROLE] = {"role", parse_role, OFF(role, enum once_role), 0, HAS(has_role),
                0, 0, -1, "voter, standby or spare"},
    [F_FORCE] = {"force", NULL, 0, 0, HAS(force), 0, 0, -1, ""},
    [F_TIMEOUT] = {"timeout", parse_ms32, OFF(timeout_ms, uint32_t), 0,
                   HAS(has_timeout), 1, CLI_TIMEOUT_MAX_MS, -1,
                   "a duration of 1ms..1h " DURATION},
    [F_FILE] = {"file", parse_path, ADDR(file), 0, HAS(has_file), 1,
                CLI_PATH_MAX, -1, "a path of 1..4095 bytes"},
    [F_PATTERN] = {"pattern", parse_bytes, BYTES(pattern), LEN(pattern_len),
                   HAS(has_pattern), 1, ONCE_PATTERN_MAX, -1,
                   "a scope, or a prefix then '*' (1..129 bytes)"},
    [F_MAX_RECORDS] = {"max_records", parse_u64, U64(max_records), 0,
                       HAS(has_max_records), 0, UINT64_MAX, -1,
                       "a decimal integer (0: no limit)"},
    [F_MAX_BYTES] = {"max_bytes", parse_u64, U64(max_bytes), 0,
                     HAS(has_max_bytes), 0, UINT64_MAX, -1,
                     "a decimal integer of bytes (0: no limit)"},
    [F_LEADER] = {"leader", NULL, 0, 0, HAS(leader_only), 0, 0, -1, ""},
    [F_TO] = {"to", parse_u64, U64(schema_to), 0, HAS(has_schema_to), 0,
              UINT32_MAX, -1, "a schema version (a decimal integer)"},
    [F_MAX_USES] = {"max_uses", parse_u64, U64(max_uses), 0, HAS(has_max_uses),
                    1, ONCE_MAX_USES, -1, "an integer 1..64"},
    [F_SLIDING] = {"sliding", NULL, 0, 0, HAS(sliding), 0, 0, -1, ""},
};
_Static_assert(F_COUNT <= 32, "struct cli_req.seen has one bit per field");

#define POS_MAX 3

struct cmd_def
{
    enum cli_cmd cmd;
    const char *name;
    int pos[POS_MAX]; /* positional fields, in order; -1 ends */
    unsigned n_required;
    uint32_t options; /* fields given as --options (command line) */
};

#define OPT_CLAIM                                                             \
    (BIT(F_REQUEST_ID) | BIT(F_EXECUTION_ID) | BIT(F_TTL) | BIT(F_TS) |       \
     BIT(F_WINDOW) | BIT(F_IDEMPOTENT) | BIT(F_PAYLOAD_HASH) | BIT(F_LEASE) | \
     BIT(F_MAX_USES) | BIT(F_SLIDING))

static const struct cmd_def cmds[] = {
    {CLI_CLAIM, "claim", {F_SCOPE, F_KEY, -1}, 2, OPT_CLAIM},
    {CLI_COMPLETE,
     "complete",
     {F_SCOPE, F_KEY, -1},
     2,
     BIT(F_OWNER_TOKEN) | BIT(F_RESULT) | BIT(F_RESULT_B64) |
         BIT(F_REQUEST_ID)},
    {CLI_RELEASE,
     "release",
     {F_SCOPE, F_KEY, -1},
     2,
     BIT(F_OWNER_TOKEN) | BIT(F_TERMINAL) | BIT(F_ERROR) | BIT(F_REQUEST_ID)},
    {CLI_LOOKUP, "lookup", {F_SCOPE, F_KEY, -1}, 2, BIT(F_LEADER)},
    {CLI_FORGET, "forget", {F_SCOPE, F_KEY, -1}, 2, 0},
    {CLI_STATUS, "status", {-1, -1, -1}, 0, BIT(F_NODE) | BIT(F_STATE_DIGEST)},
    {CLI_MEMBERS_LIST, "members list", {-1, -1, -1}, 0, 0},
    {CLI_MEMBERS_ADD,
     "members add",
     {F_ID, F_RAFT_ADDR, F_CLIENT_ADDR},
     3,
     BIT(F_ROLE)},
    {CLI_MEMBERS_REMOVE, "members remove", {F_ID, -1}, 1, BIT(F_FORCE)},
    {CLI_MEMBERS_ASSIGN, "members assign", {F_ID, F_ROLE, -1}, 2, BIT(F_FORCE)},
    {CLI_TRANSFER, "members transfer", {F_ID, -1}, 0, 0},
    {CLI_LEAVE, "leave", {-1, -1, -1}, 0, 0},
    {CLI_SNAPSHOT_TAKE, "snapshot take", {-1, -1, -1}, 0, 0},
    {CLI_SNAPSHOT_BACKUP, "snapshot backup", {F_FILE, -1, -1}, 1, 0},
    {CLI_SNAPSHOT_VERIFY, "snapshot verify", {F_FILE, -1, -1}, 1, 0},
    {CLI_SESSION, "session", {-1, -1, -1}, 0, 0},
    {CLI_QUOTA_SET,
     "quota set",
     {F_PATTERN, -1, -1},
     1,
     BIT(F_MAX_RECORDS) | BIT(F_MAX_BYTES)},
    {CLI_QUOTA_REMOVE, "quota remove", {F_PATTERN, -1, -1}, 1, 0},
    {CLI_QUOTA_LIST, "quota list", {-1, -1, -1}, 0, 0},
    {CLI_SCHEMA_UPGRADE, "schema upgrade", {-1, -1, -1}, 0, BIT(F_TO)},
};

#define N_CMDS (sizeof cmds / sizeof cmds[0])

static const struct cmd_def *cmd_def(enum cli_cmd cmd)
{
    for (size_t i = 0; i < N_CMDS; i++) {
        if (cmds[i].cmd == cmd) {
            return &cmds[i];
        }
    }
    return NULL;
}

enum cli_cmd cli_cmd_from_name(const char *name)
{
    if (name == NULL) {
        return 0;
    }
    if (strcmp(name, "transfer") == 0) {
        return CLI_TRANSFER;
    }
    for (size_t i = 0; i < N_CMDS; i++) {
        if (strcmp(cmds[i].name, name) == 0) {
            return cmds[i].cmd;
        }
    }
    return 0;
}

const char *cli_cmd_name(enum cli_cmd cmd)
{
    const struct cmd_def *d = cmd_def(cmd);

    return d != NULL ? d->name : "?";
}

const char *const *cli_cmd_fields(enum cli_cmd cmd, size_t *n)
{
    static const char *names[F_COUNT];
    const struct cmd_def *d = cmd_def(cmd);
    size_t k = 0;

    *n = 0;
    if (d == NULL) {
        return names;
    }
    for (int f = 0; f < F_COUNT; f++) {
        bool pos = false;

        for (int i = 0; i < POS_MAX && d->pos[i] >= 0; i++) {
            pos = pos || d->pos[i] == f;
        }
        if (pos || (d->options & BIT(f)) != 0) {
            names[k++] = fields[f].name;
        }
    }
    *n = k;
    return names;
}

void cli_req_init(struct cli_req *q, enum cli_cmd cmd)
{
    memset(q, 0, sizeof *q);
    q->cmd = cmd;
}

/* The index of the field called @name in fields[], or F_NONE. */
static int field_by_name(const char *name)
{
    for (int f = 0; f < F_COUNT; f++) {
        if (strcmp(fields[f].name, name) == 0) {
            return f;
        }
    }
    return F_NONE;
}

static bool is_positional(const struct cmd_def *d, int f)
{
    for (int i = 0; i < POS_MAX && d->pos[i] >= 0; i++) {
        if (d->pos[i] == f) {
            return true;
        }
    }
    return false;
}

/* How a field is called in messages: `--ttl` / `KEY` on the command line,
 * "ttl" in a session. Static storage, valid until the next call. */
static const char *shown(const struct cli_req *q, int f)
{
    /* Two names can appear in one message: alternate two buffers. */
    static char bufs[2][40];
    static unsigned turn;
    char *buf = bufs[turn++ % 2];
    const size_t cap = sizeof bufs[0];
    const struct cmd_def *d = cmd_def(q->cmd);
    size_t i;

    if (q->session) {
        snprintf(buf, cap, "\"%s\"", fields[f].name);
        return buf;
    }
    if (d != NULL && is_positional(d, f)) {
        for (i = 0; i < cap - 1 && fields[f].name[i] != '\0'; i++) {
            char c = fields[f].name[i];

            buf[i] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
        }
        buf[i] = '\0';
        return buf;
    }
    buf[0] = '-';
    buf[1] = '-';
    for (i = 0; i < cap - 3 && fields[f].name[i] != '\0'; i++) {
        buf[i + 2] = fields[f].name[i] == '_' ? '-' : fields[f].name[i];
    }
    buf[i + 2] = '\0';
    return buf;
}

bool cli_field_is_flag(const char *name)
{
    int f = field_by_name(name);

    return f != F_NONE && fields[f].parse == NULL;
}

bool cli_req_accepts(const struct cli_req *q, const char *name)
{
    const struct cmd_def *d = cmd_def(q->cmd);
    int f = field_by_name(name);

    if (d == NULL || f == F_NONE) {
        return false;
    }
    if (f == F_TIMEOUT) {
        return q->session; /* on the command line --timeout is global */
    }
    return is_positional(d, f) || (d->options & BIT(f)) != 0;
}

bool cli_req_is_positional(const struct cli_req *q, const char *name)
{
    const struct cmd_def *d = cmd_def(q->cmd);
    int f = field_by_name(name);

    return d != NULL && f != F_NONE && is_positional(d, f);
}

const char *cli_req_next_positional(struct cli_req *q)
{
    const struct cmd_def *d = cmd_def(q->cmd);

    if (d == NULL || q->n_positional >= POS_MAX ||
        d->pos[q->n_positional] < 0) {
        return NULL;
    }
    return fields[d->pos[q->n_positional++]].name;
}

/* The message for a value field @f does not take. Only printable values are
 * echoed back: a bad value can be binary or huge. */
static int bad_value(const struct cli_req *q,
                     int f,
                     const char *val,
                     size_t len,
                     char *err)
{
    const char *cmd = cli_cmd_name(q->cmd);
    bool printable = len <= 64;

    for (size_t i = 0; printable && i < len; i++) {
        printable = val[i] >= ' ' && val[i] <= '~' && val[i] != '"';
    }
    if (printable) {
        err_printf(err, "%s: %s: bad value \"%.*s\" (want %s)", cmd,
                   shown(q, f), (int)len, val, fields[f].want);
    } else {
        err_printf(err, "%s: %s: bad value (want %s)", cmd, shown(q, f),
                   fields[f].want);
    }
    return -EINVAL;
}

int cli_req_set(struct cli_req *q,
                const char *name,
                const char *val,
                size_t len,
                char *err)
{
    const char *cmd = cli_cmd_name(q->cmd);
    int f = field_by_name(name);
    const struct field_def *fd;
    bool ok;

    if (f == F_NONE || !cli_req_accepts(q, name)) {
        if (q->session) {
            err_printf(err, "%s: unknown field \"%s\"", cmd, name);
        } else {
            err_printf(err, "%s: unknown option --%s", cmd, name);
        }
        return -EINVAL;
    }
    fd = &fields[f];
    if ((q->seen & BIT(f)) != 0) {
        err_printf(err, "%s: %s given twice", cmd, shown(q, f));
        return -EINVAL;
    }
    if (fd->parse == NULL) {
        if (val != NULL) {
            err_printf(err, "%s: %s takes no value", cmd, shown(q, f));
            return -EINVAL;
        }
    } else if (val == NULL) {
        err_printf(err, "%s: %s needs a value", cmd, shown(q, f));
        return -EINVAL;
    } else if (memchr(val, '\0', len) != NULL) {
        /* Text fields are C strings below (addresses, numbers) or would
         * be truncated by a shell; a session's \u0000 is refused too. */
        err_printf(err, "%s: %s contains a NUL byte", cmd, shown(q, f));
        return -EINVAL;
    }
    q->seen |= BIT(f);
    if (fd->excludes >= 0 && (q->seen & BIT(fd->excludes)) != 0) {
        err_printf(err, "%s: %s excludes %s", cmd, shown(q, f),
                   shown(q, fd->excludes));
        return -EINVAL;
    }
    ok = fd->parse == NULL || fd->parse(fd, q, val, len);
    *(bool *)at(q, fd->has_off) = ok;
    return ok ? 0 : bad_value(q, f, val, len, err);
}

int cli_req_check(struct cli_req *q, char *err)
{
    const struct cmd_def *d = cmd_def(q->cmd);
    const char *cmd = cli_cmd_name(q->cmd);

    if (d == NULL) {
        err_printf(err, "no command");
        return -EINVAL;
    }
    for (unsigned i = 0; i < d->n_required; i++) {
        if ((q->seen & BIT(d->pos[i])) == 0) {
            err_printf(err, "%s: missing %s", cmd, shown(q, d->pos[i]));
            return -EINVAL;
        }
    }
    switch (q->cmd) {
        case CLI_CLAIM:
            if (q->has_ts && q->has_ttl) {
                err_printf(err, "%s: %s excludes %s", cmd, shown(q, F_TS),
                           shown(q, F_TTL));
                return -EINVAL;
            }
            if (q->has_ts && !q->has_window) {
                err_printf(err, "%s: %s requires %s", cmd, shown(q, F_TS),
                           shown(q, F_WINDOW));
                return -EINVAL;
            }
            if (q->has_window && !q->has_ts) {
                err_printf(err, "%s: %s requires %s", cmd, shown(q, F_WINDOW),
                           shown(q, F_TS));
                return -EINVAL;
            }
            if (!q->idempotent && (q->has_payload_hash || q->has_lease)) {
                err_printf(
                    err, "%s: %s requires %s", cmd,
                    shown(q, q->has_payload_hash ? F_PAYLOAD_HASH : F_LEASE),
                    shown(q, F_IDEMPOTENT));
                return -EINVAL;
            }
            if (q->idempotent && q->has_max_uses && q->max_uses > 1) {
                err_printf(err, "%s: %s is for nonces, not with %s", cmd,
                           shown(q, F_MAX_USES), shown(q, F_IDEMPOTENT));
                return -EINVAL;
            }
            if (!q->idempotent && q->sliding) {
                err_printf(err, "%s: %s requires %s", cmd, shown(q, F_SLIDING),
                           shown(q, F_IDEMPOTENT));
                return -EINVAL;
            }
            if (q->sliding && !q->has_ttl && q->has_ts) {
                err_printf(err, "%s: %s requires %s", cmd, shown(q, F_SLIDING),
                           shown(q, F_TTL));
                return -EINVAL;
            }
            if (!q->has_ts && !q->has_ttl) {
                q->has_ttl = true;
                q->ttl_ms = CLI_TTL_DEFAULT_MS;
            }
            break;
        case CLI_COMPLETE:
            if (!q->has_owner_token) {
                err_printf(err, "%s: missing %s", cmd, shown(q, F_OWNER_TOKEN));
                return -EINVAL;
            }
            break;
        case CLI_RELEASE:
            if (!q->has_owner_token) {
                err_printf(err, "%s: missing %s", cmd, shown(q, F_OWNER_TOKEN));
                return -EINVAL;
            }
            if (q->has_error && !q->terminal) {
                err_printf(err, "%s: %s requires %s", cmd, shown(q, F_ERROR),
                           shown(q, F_TERMINAL));
                return -EINVAL;
            }
            break;
        case CLI_MEMBERS_ADD:
            if (!q->has_role) {
                q->has_role = true;
                q->role = ONCE_ROLE_VOTER;
            } else if (q->role == ONCE_ROLE_SPARE) {
                err_printf(err,
                           "%s: %s: a member is added as voter or "
                           "standby (spare is a step of the add)",
                           cmd, shown(q, F_ROLE));
                return -EINVAL;
            }
            break;
        default:
            break;
    }
    return 0;
}
