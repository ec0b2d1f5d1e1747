/* cli/argv.c: the command line of oncectl (see cli.h): global options
 * anywhere, the command word(s) (a group word and its subcommand), the
 * positionals and the --options, each value set through args.c's one
 * setter (cli_req_set), so argv and session lines take the same fields. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/text.h"

/* The words that take a subcommand, and what follows each. */
static const struct
{
    const char *word;
    const char *subs;
} groups[] = {
    {"members", " (list, add, remove, assign, transfer)"},
    {"snapshot", " (take, backup, verify)"},
    {"quota", " (set, remove, list)"},
    {"schema", " (upgrade)"},
};

/* The group word @w names, as a static string, or NULL. */
static const char *group_of(const char *w)
{
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (strcmp(w, groups[i].word) == 0) {
            return groups[i].word;
        }
    }
    return NULL;
}
enum global_opt {
    G_NONE,
    G_CLUSTER,
    G_JSON,
    G_TIMEOUT,
    G_CLUSTER_ID,
    G_TLS_CA,
    G_TLS_CERT,
    G_TLS_KEY,
    G_HELP,
};

static enum global_opt global_by_name(const char *name, size_t n)
{
    static const struct
    {
        const char *name;
        enum global_opt opt;
    } g[] = {{"cluster", G_CLUSTER}, {"json", G_JSON},
             {"timeout", G_TIMEOUT}, {"cluster-id", G_CLUSTER_ID},
             {"tls-ca", G_TLS_CA},   {"tls-cert", G_TLS_CERT},
             {"tls-key", G_TLS_KEY}, {"help", G_HELP}};

    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        if (strlen(g[i].name) == n && memcmp(g[i].name, name, n) == 0) {
            return g[i].opt;
        }
    }
    return G_NONE;
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

            if (o != G_NONE && o != G_JSON && o != G_HELP &&
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
        } else if (group_of(a) != NULL) {
            group = group_of(a);
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

/* A global option @o with its value @val (NULL: none given): 1 if @o is
 * one and was taken, 0 if @o is not a global option, or -EINVAL. */
static int argv_global(enum global_opt o,
                       const char *val,
                       struct cli_global *g,
                       char *err)
{
    uint64_t v;

    switch (o) {
        case G_CLUSTER:
            g->cluster = val;
            return 1;
        case G_JSON:
            if (val != NULL) {
                err_printf(err, "--json takes no value");
                return -EINVAL;
            }
            g->json = true;
            return 1;
        case G_TIMEOUT:
            if (!text_parse_duration_ms(val, CLI_TIMEOUT_MAX_MS, &v) ||
                v == 0) {
                err_printf(err,
                           "--timeout: bad value \"%.40s\" (want a "
                           "duration of 1ms..1h: an integer with ms, s, m "
                           "or h)",
                           val);
                return -EINVAL;
            }
            g->timeout_ms = (uint32_t)v;
            return 1;
        case G_CLUSTER_ID:
            if (!text_parse_hex(val, g->cluster_id, ONCE_ID_LEN)) {
                err_printf(err,
                           "--cluster-id: bad value \"%.40s\" (want 32 hex "
                           "digits)",
                           val);
                return -EINVAL;
            }
            g->pin_cluster_id = true;
            return 1;
        case G_TLS_CA:
        case G_TLS_CERT:
        case G_TLS_KEY:
            if (val[0] == '\0') {
                err_printf(err, "--tls-*: an empty file name");
                return -EINVAL;
            }
            *(o == G_TLS_CA     ? &g->tls_ca
              : o == G_TLS_CERT ? &g->tls_cert
                                : &g->tls_key) = val;
            return 1;
        case G_HELP:
        case G_NONE:
            break;
    }
    return 0;
}

/* The word argv[*i], "--name" or "--name=value": a global option or one of
 * q->cmd's. A value in the next word moves *i on. @group: a group word
 * seen without its subcommand yet (NULL: none). 0 or -EINVAL. */
static int argv_option(int argc,
                       char *const *argv,
                       int *i,
                       const char *group,
                       struct cli_global *g,
                       struct cli_req *q,
                       char *err)
{
    const char *name = argv[*i] + 2;
    const char *eq = strchr(name, '=');
    size_t n = eq != NULL ? (size_t)(eq - name) : strlen(name);
    const char *val = eq != NULL ? eq + 1 : NULL;
    enum global_opt o = global_by_name(name, n);
    char fname[32];
    int rv;

    if (o != G_NONE && o != G_JSON && val == NULL) {
        if (*i + 1 >= argc) {
            err_printf(err, "--%.*s needs a value", (int)n, name);
            return -EINVAL;
        }
        val = argv[++*i];
    }
    rv = argv_global(o, val, g, err);
    if (rv != 0) {
        return rv < 0 ? rv : 0;
    }
    if (q->cmd == 0) {
        err_printf(err, "unknown option --%.*s%s", (int)n, name,
                   group != NULL ? " (missing subcommand first?)" : "");
        return -EINVAL;
    }
    if (n >= sizeof fname) {
        err_printf(err, "%s: unknown option --%.*s", cli_cmd_name(q->cmd), 40,
                   name);
        return -EINVAL;
    }
    for (size_t k = 0; k < n; k++) {
        fname[k] = name[k] == '-' ? '_' : name[k];
    }
    fname[n] = '\0';
    /* Positional fields are not options (`--scope x` is refused). */
    if (!cli_req_accepts(q, fname) || cli_req_is_positional(q, fname)) {
        err_printf(err, "%s: unknown option --%.*s", cli_cmd_name(q->cmd),
                   (int)n, name);
        return -EINVAL;
    }
    if (!cli_field_is_flag(fname) && val == NULL) {
        if (*i + 1 >= argc) {
            err_printf(err, "%s: --%.*s needs a value", cli_cmd_name(q->cmd),
                       (int)n, name);
            return -EINVAL;
        }
        val = argv[++*i];
    }
    return cli_req_set(q, fname, val, val != NULL ? strlen(val) : 0, err);
}

static const char *subcommands(const char *group)
{
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (strcmp(group, groups[i].word) == 0) {
            return groups[i].subs;
        }
    }
    return "";
}

/* A word that is not an option: the command, its subcommand after the
 * group word *group, or the next positional. 0 or -EINVAL. */
static int argv_word(const char *a,
                     const char **group,
                     struct cli_req *q,
                     char *err)
{
    const char *field;

    if (q->cmd == 0) {
        if (*group != NULL) {
            char name[64];

            snprintf(name, sizeof name, "%s %.40s", *group, a);
            q->cmd = cli_cmd_from_name(name);
            if (q->cmd == 0) {
                err_printf(err, "%s: unknown subcommand \"%.40s\"%s", *group, a,
                           subcommands(*group));
                return -EINVAL;
            }
        } else if (group_of(a) != NULL) {
            *group = group_of(a);
        } else {
            q->cmd = cli_cmd_from_name(a);
            if (q->cmd == 0) {
                err_printf(err, "unknown command \"%.40s\"", a);
                return -EINVAL;
            }
        }
        return 0;
    }
    field = cli_req_next_positional(q);
    if (field == NULL) {
        err_printf(err, "%s: unexpected argument \"%.40s\"",
                   cli_cmd_name(q->cmd), a);
        return -EINVAL;
    }
    return cli_req_set(q, field, a, strlen(a), err);
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
        int rv;

        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = true;
            continue;
        }
        if (!opts_done && strncmp(a, "--", 2) == 0) {
            rv = argv_option(argc, argv, &i, group, g, q, err);
        } else {
            rv = argv_word(a, &group, q, err);
        }
        if (rv != 0) {
            return rv;
        }
    }
    if (q->cmd == 0) {
        if (group != NULL) {
            err_printf(err, "%s: missing subcommand%s", group,
                       subcommands(group));
        } else {
            err_printf(err, "missing command");
        }
        return -EINVAL;
    }
    return cli_req_check(q, err);
}
