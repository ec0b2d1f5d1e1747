/* cli/args.c: the command table and the parsers (see cli.h).
 *
 * One table of fields and one of commands drive both the command line and
 * the session lines: a field is a positional or an option, and its name is
 * the same with '_' (session key) or '-' (--flag). The help texts (help.c)
 * list the same names; a unit test checks that every field of every
 * command appears in that command's help, so the help cannot omit what the
 * parser takes. */
#include "cli/cli.h"

#include <errno.h>
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
    F_TIMEOUT,
    F_COUNT,
};

#define BIT(f) (UINT32_C(1) << (f))

struct field_def
{
    const char *name; /* session key; the option is "--" + '-' for '_' */
    bool flag;        /* takes no value */
};

static const struct field_def fields[F_COUNT] = {
    [F_SCOPE] = {"scope", false},
    [F_KEY] = {"key", false},
    [F_REQUEST_ID] = {"request_id", false},
    [F_EXECUTION_ID] = {"execution_id", false},
    [F_TTL] = {"ttl", false},
    [F_TS] = {"ts", false},
    [F_WINDOW] = {"window", false},
    [F_IDEMPOTENT] = {"idempotent", true},
    [F_PAYLOAD_HASH] = {"payload_hash", false},
    [F_LEASE] = {"lease", false},
    [F_OWNER_TOKEN] = {"owner_token", false},
    [F_RESULT] = {"result", false},
    [F_RESULT_B64] = {"result_b64", false},
    [F_TERMINAL] = {"terminal", true},
    [F_ERROR] = {"error", false},
    [F_NODE] = {"node", false},
    [F_STATE_DIGEST] = {"state_digest", true},
    [F_ID] = {"id", false},
    [F_RAFT_ADDR] = {"raft_addr", false},
    [F_CLIENT_ADDR] = {"client_addr", false},
    [F_ROLE] = {"role", false},
    [F_TIMEOUT] = {"timeout", false},
};

#define POS_MAX 3

struct cmd_def
{
    enum cli_cmd cmd;
    const char *name;
    int pos[POS_MAX]; /* positional fields, in order; -1 ends */
    unsigned n_required;
    uint32_t options; /* fields given as --options (command line) */
};

#define OPT_CLAIM                                                       \
    (BIT(F_REQUEST_ID) | BIT(F_EXECUTION_ID) | BIT(F_TTL) | BIT(F_TS) | \
     BIT(F_WINDOW) | BIT(F_IDEMPOTENT) | BIT(F_PAYLOAD_HASH) | BIT(F_LEASE))

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
    {CLI_LOOKUP, "lookup", {F_SCOPE, F_KEY, -1}, 2, 0},
    {CLI_FORGET, "forget", {F_SCOPE, F_KEY, -1}, 2, 0},
    {CLI_STATUS, "status", {-1, -1, -1}, 0, BIT(F_NODE) | BIT(F_STATE_DIGEST)},
    {CLI_MEMBERS_LIST, "members list", {-1, -1, -1}, 0, 0},
    {CLI_MEMBERS_ADD,
     "members add",
     {F_ID, F_RAFT_ADDR, F_CLIENT_ADDR},
     3,
     BIT(F_ROLE)},
    {CLI_MEMBERS_REMOVE, "members remove", {F_ID, -1}, 1, 0},
    {CLI_MEMBERS_ASSIGN, "members assign", {F_ID, F_ROLE, -1}, 2, 0},
    {CLI_TRANSFER, "members transfer", {F_ID, -1}, 0, 0},
    {CLI_LEAVE, "leave", {-1, -1, -1}, 0, 0},
    {CLI_SNAPSHOT_TAKE, "snapshot take", {-1, -1, -1}, 0, 0},
    {CLI_SNAPSHOT_BACKUP, "snapshot backup", {-1, -1, -1}, 0, 0},
    {CLI_SNAPSHOT_VERIFY, "snapshot verify", {-1, -1, -1}, 0, 0},
    {CLI_SESSION, "session", {-1, -1, -1}, 0, 0},
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

static int field_by_name(const char *name)
{
    for (int f = 0; f < F_COUNT; f++) {
        if (strcmp(fields[f].name, name) == 0) {
            return f;
        }
    }
    return -1;
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
        for (i = 0; fields[f].name[i] != '\0' && i < cap - 1; i++) {
            char c = fields[f].name[i];

            buf[i] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
        }
        buf[i] = '\0';
        return buf;
    }
    buf[0] = '-';
    buf[1] = '-';
    for (i = 0; fields[f].name[i] != '\0' && i < cap - 3; i++) {
        buf[i + 2] = fields[f].name[i] == '_' ? '-' : fields[f].name[i];
    }
    buf[i + 2] = '\0';
    return buf;
}

bool cli_field_is_flag(const char *name)
{
    int f = field_by_name(name);

    return f >= 0 && fields[f].flag;
}

bool cli_req_accepts(const struct cli_req *q, const char *name)
{
    const struct cmd_def *d = cmd_def(q->cmd);
    int f = field_by_name(name);

    if (d == NULL || f < 0) {
        return false;
    }
    if (f == F_TIMEOUT) {
        return q->session; /* on the command line --timeout is global */
    }
    return is_positional(d, f) || (d->options & BIT(f)) != 0;
}

static bool parse_role(const char *s, enum once_role *out)
{
    if (strcasecmp(s, "voter") == 0) {
        *out = ONCE_ROLE_VOTER;
    } else if (strcasecmp(s, "standby") == 0) {
        *out = ONCE_ROLE_STANDBY;
    } else if (strcasecmp(s, "spare") == 0) {
        *out = ONCE_ROLE_SPARE;
    } else {
        return false;
    }
    return true;
}

/* Copy @len bytes of text into a fixed field; false if over @cap. */
static bool set_bytes(uint8_t *dst,
                      size_t *dst_len,
                      size_t cap,
                      const char *val,
                      size_t len)
{
    if (len > cap) {
        return false;
    }
    if (len > 0) {
        memcpy(dst, val, len);
    }
    *dst_len = len;
    return true;
}

static bool set_addr(char *dst, const char *val)
{
    if (!cli_check_addr(val)) {
        return false;
    }
    memcpy(dst, val, strlen(val) + 1);
    return true;
}

int cli_req_set(struct cli_req *q,
                const char *name,
                const char *val,
                size_t len,
                char *err)
{
    const char *cmd = cli_cmd_name(q->cmd);
    int f = field_by_name(name);
    uint64_t v;
    bool ok = true;
    const char *want = "";

    if (f < 0 || !cli_req_accepts(q, name)) {
        if (q->session) {
            err_printf(err, "%s: unknown field \"%s\"", cmd, name);
        } else {
            err_printf(err, "%s: unknown option --%s", cmd, name);
        }
        return -EINVAL;
    }
    if ((q->seen & BIT(f)) != 0) {
        err_printf(err, "%s: %s given twice", cmd, shown(q, f));
        return -EINVAL;
    }
    if (fields[f].flag) {
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
    switch ((enum field)f) {
        case F_SCOPE:
            ok = len >= 1 &&
                 set_bytes(q->scope, &q->scope_len, ONCE_SCOPE_MAX, val, len);
            q->has_scope = ok;
            want = "1..128 bytes";
            break;
        case F_KEY:
            ok = len >= 1 &&
                 set_bytes(q->key, &q->key_len, ONCE_KEY_MAX, val, len);
            q->has_key = ok;
            want = "1..256 bytes";
            break;
        case F_REQUEST_ID:
            ok = text_parse_hex(val, q->request_id, ONCE_ID_LEN);
            q->has_request_id = ok;
            want = "32 hex digits";
            break;
        case F_EXECUTION_ID:
            ok = set_bytes(q->execution_id, &q->execution_id_len,
                           ONCE_EXECUTION_ID_MAX, val, len);
            q->has_execution_id = ok;
            want = "0..128 bytes";
            break;
        case F_TTL:
            ok = text_parse_duration_ms(val, CLI_DURATION_MAX_MS, &q->ttl_ms) &&
                 q->ttl_ms > 0;
            q->has_ttl = ok;
            want = "a duration over 0 (an integer with ms, s, m or h)";
            break;
        case F_TS:
            ok = text_parse_u64(val, UINT64_MAX, &q->ts_ms);
            q->has_ts = ok;
            want = "unix milliseconds (a decimal integer)";
            break;
        case F_WINDOW:
            ok = text_parse_duration_ms(val, CLI_DURATION_MAX_MS,
                                        &q->window_ms) &&
                 q->window_ms > 0;
            q->has_window = ok;
            want = "a duration over 0 (an integer with ms, s, m or h)";
            break;
        case F_IDEMPOTENT:
            q->idempotent = true;
            break;
        case F_PAYLOAD_HASH:
            ok = text_parse_hex_var(val, q->payload_hash, ONCE_PAYLOAD_HASH_MAX,
                                    &q->payload_hash_len);
            q->has_payload_hash = ok;
            want = "0..64 bytes in hex (an even number of digits)";
            break;
        case F_LEASE:
            ok = text_parse_duration_ms(val, CLI_DURATION_MAX_MS, &q->lease_ms);
            q->has_lease = ok;
            want = "a duration (an integer with ms, s, m or h)";
            break;
        case F_OWNER_TOKEN:
            ok = cli_parse_token(val, &q->owner_token);
            q->has_owner_token = ok;
            want = "GROUP:INDEX:SLOT in decimal";
            break;
        case F_RESULT:
            if ((q->seen & BIT(F_RESULT_B64)) != 0) {
                err_printf(err, "%s: %s excludes %s", cmd, shown(q, f),
                           shown(q, F_RESULT_B64));
                return -EINVAL;
            }
            ok =
                set_bytes(q->result, &q->result_len, ONCE_RESULT_MAX, val, len);
            q->has_result = ok;
            want = "0..65536 bytes";
            break;
        case F_RESULT_B64:
            if ((q->seen & BIT(F_RESULT)) != 0) {
                err_printf(err, "%s: %s excludes %s", cmd, shown(q, f),
                           shown(q, F_RESULT));
                return -EINVAL;
            }
            ok = cli_b64_decode(val, len, q->result, ONCE_RESULT_MAX,
                                &q->result_len);
            q->has_result = ok;
            q->result_from_b64 = ok;
            want = "standard base64 with padding, of 0..65536 bytes";
            break;
        case F_TERMINAL:
            q->terminal = true;
            break;
        case F_STATE_DIGEST:
            q->state_digest = true;
            break;
        case F_ERROR:
            ok = set_bytes(q->error, &q->error_len, ONCE_ERROR_MAX, val, len);
            q->has_error = ok;
            want = "0..1024 bytes";
            break;
        case F_NODE:
            ok = set_addr(q->node, val);
            q->has_node = ok;
            want = "an IPv4 IP:PORT";
            break;
        case F_ID:
            ok = text_parse_id(val, &q->member_id);
            q->has_member_id = ok;
            want = "a node id: 1..16 hex digits, not 0";
            break;
        case F_RAFT_ADDR:
            ok = set_addr(q->raft_addr, val);
            q->has_raft_addr = ok;
            want = "an IPv4 IP:PORT";
            break;
        case F_CLIENT_ADDR:
            ok = set_addr(q->client_addr, val);
            q->has_client_addr = ok;
            want = "an IPv4 IP:PORT";
            break;
        case F_ROLE:
            ok = parse_role(val, &q->role);
            q->has_role = ok;
            want = "voter, standby or spare";
            break;
        case F_TIMEOUT:
            ok = text_parse_duration_ms(val, CLI_TIMEOUT_MAX_MS, &v) && v > 0;
            if (ok) {
                q->timeout_ms = (uint32_t)v;
            }
            q->has_timeout = ok;
            want = "a duration of 1ms..1h (an integer with ms, s, m or h)";
            break;
        case F_COUNT:
            ok = false;
            break;
    }
    if (!ok) {
        /* Only printable values are echoed back; a bad value can be binary
         * or huge. */
        bool printable = len <= 64;

        for (size_t i = 0; printable && i < len; i++) {
            printable = val[i] >= ' ' && val[i] <= '~' && val[i] != '"';
        }
        if (printable) {
            err_printf(err, "%s: %s: bad value \"%.*s\" (want %s)", cmd,
                       shown(q, f), (int)len, val, want);
        } else {
            err_printf(err, "%s: %s: bad value (want %s)", cmd, shown(q, f),
                       want);
        }
        return -EINVAL;
    }
    return 0;
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

/* ------------------------------------------------------------------------
 * The command line
 * ---------------------------------------------------------------------- */

enum global_opt {
    G_NONE,
    G_CLUSTER,
    G_JSON,
    G_TIMEOUT,
    G_CLUSTER_ID,
    G_HELP,
};

static enum global_opt global_by_name(const char *name, size_t n)
{
    static const struct
    {
        const char *name;
        enum global_opt opt;
    } g[] = {{"cluster", G_CLUSTER},
             {"json", G_JSON},
             {"timeout", G_TIMEOUT},
             {"cluster-id", G_CLUSTER_ID},
             {"help", G_HELP}};

    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        if (strlen(g[i].name) == n && memcmp(g[i].name, name, n) == 0) {
            return g[i].opt;
        }
    }
    return G_NONE;
}

static bool is_group(const char *w)
{
    return strcmp(w, "members") == 0 || strcmp(w, "snapshot") == 0;
}

/* --help anywhere before `--`: find the command it is about, without
 * judging the rest of the line. */
static void scan_help(int argc,
                      char *const *argv,
                      struct cli_global *g,
                      struct cli_req *q)
{
    const char *group = NULL;
    bool words = true;
    enum cli_cmd cmd = 0;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--") == 0) {
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            g->help = true;
            continue;
        }
        if (strncmp(a, "--", 2) == 0) {
            enum global_opt o = global_by_name(a + 2, strlen(a + 2));

            if ((o == G_CLUSTER || o == G_TIMEOUT || o == G_CLUSTER_ID) &&
                strchr(a, '=') == NULL) {
                i++; /* its value */
            }
            continue;
        }
        if (!words) {
            continue;
        }
        if (group != NULL) {
            char name[64];

            snprintf(name, sizeof name, "%s %.40s", group, a);
            cmd = cli_cmd_from_name(name);
            words = false;
        } else if (is_group(a)) {
            group = strcmp(a, "members") == 0 ? "members" : "snapshot";
        } else {
            cmd = cli_cmd_from_name(a);
            words = false;
        }
    }
    if (!g->help) {
        return;
    }
    q->cmd = cmd;
    if (cmd == 0 && group != NULL) {
        g->help_group = group;
    }
}

int cli_parse_argv(int argc,
                   char *const *argv,
                   struct cli_global *g,
                   struct cli_req *q,
                   char *err)
{
    const char *group = NULL;
    bool opts_done = false;

    memset(g, 0, sizeof *g);
    g->timeout_ms = CLI_TIMEOUT_DEFAULT_MS;
    cli_req_init(q, 0);
    scan_help(argc, argv, g, q);
    if (g->help) {
        return 0;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];

        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = true;
            continue;
        }
        if (!opts_done && strncmp(a, "--", 2) == 0) {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t n = eq != NULL ? (size_t)(eq - name) : strlen(name);
            const char *val = eq != NULL ? eq + 1 : NULL;
            enum global_opt o = global_by_name(name, n);
            char fname[32];
            int f;

            if (o != G_NONE && o != G_JSON && val == NULL) {
                if (i + 1 >= argc) {
                    err_printf(err, "--%.*s needs a value", (int)n, name);
                    return -EINVAL;
                }
                val = argv[++i];
            }
            switch (o) {
                case G_CLUSTER:
                    g->cluster = val;
                    continue;
                case G_JSON:
                    if (val != NULL) {
                        err_printf(err, "--json takes no value");
                        return -EINVAL;
                    }
                    g->json = true;
                    continue;
                case G_TIMEOUT: {
                    uint64_t v;

                    if (!text_parse_duration_ms(val, CLI_TIMEOUT_MAX_MS, &v) ||
                        v == 0) {
                        err_printf(
                            err,
                            "--timeout: bad value \"%.40s\" (want a "
                            "duration of 1ms..1h: an integer with ms, s, m "
                            "or h)",
                            val);
                        return -EINVAL;
                    }
                    g->timeout_ms = (uint32_t)v;
                    continue;
                }
                case G_CLUSTER_ID:
                    if (!text_parse_hex(val, g->cluster_id, ONCE_ID_LEN)) {
                        err_printf(
                            err,
                            "--cluster-id: bad value \"%.40s\" (want 32 hex "
                            "digits)",
                            val);
                        return -EINVAL;
                    }
                    g->pin_cluster_id = true;
                    continue;
                case G_HELP:
                case G_NONE:
                    break;
            }
            if (q->cmd == 0) {
                err_printf(err, "unknown option --%.*s%s", (int)n, name,
                           group != NULL ? " (missing subcommand first?)" : "");
                return -EINVAL;
            }
            if (n >= sizeof fname) {
                err_printf(err, "%s: unknown option --%.*s",
                           cli_cmd_name(q->cmd), 40, name);
                return -EINVAL;
            }
            for (size_t k = 0; k < n; k++) {
                fname[k] = name[k] == '-' ? '_' : name[k];
            }
            fname[n] = '\0';
            f = field_by_name(fname);
            /* Positional fields are not options (`--scope x` is refused). */
            if (f < 0 || !cli_req_accepts(q, fname) ||
                is_positional(cmd_def(q->cmd), f)) {
                err_printf(err, "%s: unknown option --%.*s",
                           cli_cmd_name(q->cmd), (int)n, name);
                return -EINVAL;
            }
            if (!fields[f].flag && val == NULL) {
                if (i + 1 >= argc) {
                    err_printf(err, "%s: --%.*s needs a value",
                               cli_cmd_name(q->cmd), (int)n, name);
                    return -EINVAL;
                }
                val = argv[++i];
            }
            if (cli_req_set(q, fname, val, val != NULL ? strlen(val) : 0,
                            err) != 0) {
                return -EINVAL;
            }
            continue;
        }
        /* A word: the command, its subcommand, or a positional. */
        if (q->cmd == 0) {
            if (group != NULL) {
                char name[64];

                snprintf(name, sizeof name, "%s %.40s", group, a);
                q->cmd = cli_cmd_from_name(name);
                if (q->cmd == 0) {
                    err_printf(err, "%s: unknown subcommand \"%.40s\"%s", group,
                               a,
                               strcmp(group, "members") == 0
                                   ? " (list, add, remove, assign, transfer)"
                                   : " (take, backup, verify)");
                    return -EINVAL;
                }
            } else if (is_group(a)) {
                group = strcmp(a, "members") == 0 ? "members" : "snapshot";
            } else {
                q->cmd = cli_cmd_from_name(a);
                if (q->cmd == 0) {
                    err_printf(err, "unknown command \"%.40s\"", a);
                    return -EINVAL;
                }
            }
            continue;
        }
        {
            const struct cmd_def *d = cmd_def(q->cmd);
            int f;

            if (q->n_positional >= POS_MAX || d->pos[q->n_positional] < 0) {
                err_printf(err, "%s: unexpected argument \"%.40s\"", d->name,
                           a);
                return -EINVAL;
            }
            f = d->pos[q->n_positional++];
            if (cli_req_set(q, fields[f].name, a, strlen(a), err) != 0) {
                return -EINVAL;
            }
        }
    }
    if (q->cmd == 0) {
        if (group != NULL) {
            err_printf(err, "%s: missing subcommand%s", group,
                       strcmp(group, "members") == 0
                           ? " (list, add, remove, assign, transfer)"
                           : " (take, backup, verify)");
        } else {
            err_printf(err, "missing command");
        }
        return -EINVAL;
    }
    return cli_req_check(q, err);
}
