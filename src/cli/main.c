/* cli/main.c: oncectl's entry point (cli.h, docs/oncectl.md).
 *
 * Parse the line, make one client, run one command (or a session), print
 * its object as JSON or text, exit with its code. Usage errors never reach
 * the network. */
#include "cli/cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"

/* Whether --json was on the line, for a usage error found before it. */
static bool wants_json(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            return false;
        }
        if (strcmp(argv[i], "--json") == 0) {
            return true;
        }
    }
    return false;
}

static int usage_error(bool json, const char *msg)
{
    fprintf(stderr, "oncectl: %s; see oncectl --help\n", msg);
    if (json) {
        json_t *o = cli_json_usage(msg);
        static const struct once_origin none;

        cli_json_origin(o, &none, NULL);
        cli_print_json(stdout, o);
        json_decref(o);
    }
    return CLI_EXIT_USAGE;
}

static void print_help(const struct cli_global *g, const struct cli_req *q)
{
    if (q->cmd != 0) {
        fputs(cli_help_command(q->cmd), stdout);
    } else if (g->help_group != NULL) {
        /* Every command of the group: their names start with its word. */
        size_t len = strlen(g->help_group);
        bool first = true;

        for (int c = CLI_CLAIM; c <= CLI_SCHEMA_UPGRADE; c++) {
            const char *name = cli_cmd_name((enum cli_cmd)c);
            if (strncmp(name, g->help_group, len) != 0 || name[len] != ' ' ||
                cli_help_command((enum cli_cmd)c) == NULL) {
                continue;
            }
            if (!first) {
                fputc('\n', stdout);
            }
            first = false;
            fputs(cli_help_command((enum cli_cmd)c), stdout);
        }
    } else {
        fputs(cli_help_overview(), stdout);
    }
}

/* A --tls-* flag, else its environment variable (empty: unset). */
static const char *flag_or_env(const char *flag, const char *env)
{
    const char *v = flag != NULL ? flag : getenv(env);

    return v != NULL && *v != '\0' ? v : NULL;
}

int main(int argc, char **argv)
{
    struct cli_global g;
    struct cli_req *q = malloc(sizeof *q);
    char err[ERR_MSG_SIZE];
    char cluster_buf[ONCE_ADDRS_MAX * (ONCE_ADDR_MAX + 1) + 1];
    const char *addrs[ONCE_ADDRS_MAX];
    const char *cluster;
    struct once_options o;
    struct cli_ctx x;
    once_client *c = NULL;
    json_t *ans = NULL;
    int n;
    int code;

    /* A closed stdout (a harness gone) is a write error to report, not a
     * signal that kills the process mid-line. */
    signal(SIGPIPE, SIG_IGN);
    if (q == NULL) {
        fputs("oncectl: out of memory\n", stderr);
        return CLI_EXIT_NOT_APPLIED;
    }
    if (cli_parse_argv(argc - 1, argv + 1, &g, q, err) != 0) {
        code = usage_error(wants_json(argc, argv), err);
        free(q);
        return code;
    }
    if (g.help) {
        print_help(&g, q);
        free(q);
        return CLI_EXIT_OK;
    }
    cluster = g.cluster;
    if (cluster == NULL) {
        cluster = getenv("ONCE_CLUSTER");
        if (cluster == NULL || *cluster == '\0') {
            cluster = CLI_CLUSTER_DEFAULT;
        }
    }
    n = cli_parse_cluster(cluster, cluster_buf, sizeof cluster_buf, addrs, err);
    if (n < 0) {
        code = usage_error(g.json, err);
        free(q);
        return code;
    }
    if (q->cmd == CLI_STATUS && q->has_node) {
        /* once_status asks only one of the client's addresses. */
        bool found = false;

        for (int i = 0; i < n; i++) {
            found = found || strcmp(addrs[i], q->node) == 0;
        }
        if (!found) {
            if (n == ONCE_ADDRS_MAX) {
                code = usage_error(g.json,
                                   "status: --node is not in --cluster, "
                                   "which is full");
                free(q);
                return code;
            }
            addrs[n++] = q->node;
        }
    }
    once_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = (size_t)n;
    o.timeout_ms = g.timeout_ms;
    o.pin_cluster_id = g.pin_cluster_id;
    memcpy(o.cluster_id, g.cluster_id, ONCE_ID_LEN);
    o.tls_ca = flag_or_env(g.tls_ca, "ONCE_TLS_CA");
    o.tls_cert = flag_or_env(g.tls_cert, "ONCE_TLS_CERT");
    o.tls_key = flag_or_env(g.tls_key, "ONCE_TLS_KEY");
    if (once_client_new(&o, &c, err, sizeof err) != 0) {
        code = usage_error(g.json, err);
        free(q);
        return code;
    }
    x.client = c;
    x.first_addr = addrs[0];
    x.timeout_ms = g.timeout_ms;
    /* Progress only for a person watching: never into a pipe, a file or
     * JSON a program reads. */
    x.progress = !g.json && q->cmd != CLI_SESSION && isatty(STDOUT_FILENO) &&
                 isatty(STDERR_FILENO);
    if (q->cmd == CLI_SESSION) {
        code = cli_session(&x, stdin, stdout);
    } else {
        code = cli_run(&x, q, &ans);
        if (g.json) {
            if (cli_print_json(stdout, ans) != 0) {
                fputs("oncectl: write error on stdout\n", stderr);
            }
        } else {
            cli_print_text(stdout, stderr, q->cmd, ans);
            fflush(stdout);
        }
        json_decref(ans);
    }
    once_client_free(c);
    free(q);
    return code;
}
