/* ingress/config.c: once-ingress's flags and secrets.
 *
 * Every flag takes its value as the next argument or after '='; each
 * value is checked against its stated bound here, so the rest of the
 * program trusts the struct. Secret text is never copied into a message. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "ingress/ingress.h"

#define SEC_MS  1000ull
#define MIN_MS  (60 * SEC_MS)
#define HOUR_MS (60 * MIN_MS)
#define DAY_MS  (24 * HOUR_MS)

static const char usage_text[] =
    "usage: once-ingress --listen IP:PORT --cluster IP:PORT,... --upstream "
    "URL\n"
    "                    --scheme standard|stripe (--secret-file FILE |\n"
    "                    --secret-env NAME) [options]\n"
    "\n"
    "A webhook receiver in front of URL that a replayed or retried message\n"
    "cannot get through twice. For each POST: verify the signature, claim the\n"
    "message id in the once cluster (IDEMPOTENT; payload hash = SHA-256 of "
    "the\n"
    "body; the signed timestamp and --tolerance as its window; --lease), "
    "forward\n"
    "it, then complete the record with the upstream's answer or release it.\n"
    "\n"
    "Answers: 200 delivered now (the upstream's body), or a replay of a\n"
    "delivered message (the stored body, no upstream call); 400 malformed,\n"
    "stale or future; 401 bad signature; 409 in flight elsewhere "
    "(Retry-After)\n"
    "or the same id with another body; 413 body too large; 422 refused for\n"
    "good (an upstream 4xx, or --max-attempts failures); 503 not now\n"
    "(Retry-After): the upstream failed, or the cluster gave no decision.\n"
    "Every answer carries Once-Outcome. Durations: an integer with ms, s, m, "
    "h.\n"
    "\n"
    "Required:\n"
    "  --listen IP:PORT        address the webhooks arrive on (IPv4)\n"
    "  --cluster IP:PORT,...   client addresses of once nodes (1..64)\n"
    "  --upstream URL          where verified, claimed messages are POSTed\n"
    "                          (http:// or https://)\n"
    "  --scheme standard|stripe\n"
    "                          standard: Standard Webhooks (webhook-id,\n"
    "                          webhook-timestamp, webhook-signature; secrets\n"
    "                          whsec_<base64>, Ed25519 keys whpk_<base64>);\n"
    "                          stripe: Stripe-Signature, the id from the body\n"
    "  --secret-file FILE      secrets, one per line ('#' comments); read at\n"
    "                          start and again on SIGHUP; several for "
    "rotation\n"
    "  --secret-env NAME       secrets from environment variable NAME\n"
    "                          (whitespace-separated), with or instead of the\n"
    "                          file. Secrets are never logged.\n"
    "\n"
    "Options:\n"
    "  --scope S               record scope: the tenant or channel (default\n"
    "                          webhooks; 1..128 bytes)\n"
    "  --tolerance DUR         signature timestamp window (default 5m; the\n"
    "                          cluster's max_window bounds it). The cluster\n"
    "                          judges it by its log time, not this host's "
    "clock\n"
    "  --lease DUR             how long one delivery owns a message (default\n"
    "                          30s); after it another replica may take over\n"
    "  --max-attempts N        failed deliveries before the message fails for\n"
    "                          good with 422 (default 5; 1..1000)\n"
    "  --upstream-timeout DUR  one delivery's limit (default 10s; below\n"
    "                          --lease)\n"
    "  --retry-after DUR       Retry-After of a 503 after an upstream failure\n"
    "                          (default 5s)\n"
    "  --timeout DUR           limit of one cluster call (default 3s)\n"
    "  --max-body BYTES        largest body accepted (default 1048576; up to\n"
    "                          16777216); larger: 413\n"
    "  --threads N             request threads (default 8; 1..256)\n"
    "  --max-connections N     open connections (default 4096; 1..65536)\n"
    "  --http-addr IP:PORT     serve /metrics, /healthz and /readyz here\n"
    "                          (default: on --listen)\n"
    "  --log-level L           debug|info|warn|error (default info)\n"
    "  --help                  this text\n"
    "\n"
    "Signals: SIGHUP reloads the secrets (the old set stays if the new one "
    "does\n"
    "not load); SIGTERM or SIGINT stops (exit 0). Exit 2: bad flags; 1: could\n"
    "not start.\n";

const char *ingress_usage(void)
{
    return usage_text;
}

static void defaults(struct ingress_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->scope, sizeof c->scope, "webhooks");
    c->tolerance_ms = 5 * MIN_MS;
    c->lease_ms = 30 * SEC_MS;
    c->max_attempts = 5;
    c->upstream_timeout_ms = 10 * SEC_MS;
    c->retry_after_ms = 5 * SEC_MS;
    c->timeout_ms = 3000;
    c->max_body = INGRESS_BODY_MAX_DEF;
    c->threads = 8;
    c->max_connections = 4096;
    c->log_level = LOG_INFO;
    idem_config_defaults(&c->idem);
}

static bool check_addr(const char *s)
{
    unsigned a, b, d, e, port;
    char tail;

    return strlen(s) <= ONCE_ADDR_MAX &&
           sscanf(s, "%3u.%3u.%3u.%3u:%5u%c", &a, &b, &d, &e, &port, &tail) ==
               5 &&
           a < 256 && b < 256 && d < 256 && e < 256 && port > 0 && port < 65536;
}

static bool copy(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= cap) {
        return false;
    }
    memcpy(dst, s, n + 1);
    return true;
}

static bool parse_cluster(struct ingress_config *c, const char *s)
{
    char *save = NULL;
    char *tok;

    if (!copy(c->cluster_text, sizeof c->cluster_text, s)) {
        return false;
    }
    c->n_cluster = 0;
    for (tok = strtok_r(c->cluster_text, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (c->n_cluster == ONCE_ADDRS_MAX || !check_addr(tok)) {
            return false;
        }
        c->cluster[c->n_cluster++] = tok;
    }
    return c->n_cluster > 0;
}

static bool parse_url(struct ingress_config *c, const char *s)
{
    if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) {
        return false;
    }
    for (const char *p = s; *p != '\0'; p++) {
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
            return false;
        }
    }
    return copy(c->upstream, sizeof c->upstream, s);
}

static bool parse_count(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    return text_parse_u64(s, hi, out) && *out >= lo;
}

/* One flag and its value; false if the value is refused. */
static bool apply(struct ingress_config *c, const char *name, const char *v)
{
    uint64_t n;
    enum log_level l;

    if (strcmp(name, "--listen") == 0) {
        return check_addr(v) && copy(c->listen, sizeof c->listen, v);
    }
    if (strcmp(name, "--http-addr") == 0) {
        return check_addr(v) && copy(c->http_addr, sizeof c->http_addr, v);
    }
    if (strcmp(name, "--cluster") == 0) {
        return parse_cluster(c, v);
    }
    if (strcmp(name, "--upstream") == 0) {
        return parse_url(c, v);
    }
    if (strcmp(name, "--scheme") == 0) {
        c->scheme = strcmp(v, "standard") == 0 ? ONCE_SCHEME_STANDARD
                    : strcmp(v, "stripe") == 0 ? ONCE_SCHEME_STRIPE
                                               : 0;
        return c->scheme != 0;
    }
    if (strcmp(name, "--secret-file") == 0) {
        return copy(c->secret_file, sizeof c->secret_file, v);
    }
    if (strcmp(name, "--secret-env") == 0) {
        return copy(c->secret_env, sizeof c->secret_env, v);
    }
    if (strcmp(name, "--scope") == 0) {
        return copy(c->scope, sizeof c->scope, v);
    }
    if (strcmp(name, "--tolerance") == 0) {
        return text_parse_duration_ms(v, 7 * DAY_MS, &c->tolerance_ms) &&
               c->tolerance_ms >= SEC_MS;
    }
    if (strcmp(name, "--lease") == 0) {
        return text_parse_duration_ms(v, DAY_MS, &c->lease_ms) &&
               c->lease_ms >= 100;
    }
    if (strcmp(name, "--upstream-timeout") == 0) {
        return text_parse_duration_ms(v, HOUR_MS, &c->upstream_timeout_ms) &&
               c->upstream_timeout_ms >= 10;
    }
    if (strcmp(name, "--retry-after") == 0) {
        return text_parse_duration_ms(v, DAY_MS, &c->retry_after_ms);
    }
    if (strcmp(name, "--timeout") == 0) {
        if (!text_parse_duration_ms(v, 10 * MIN_MS, &n) || n < 10) {
            return false;
        }
        c->timeout_ms = (uint32_t)n;
        return true;
    }
    if (strcmp(name, "--max-attempts") == 0) {
        if (!parse_count(v, 1, 1000, &n)) {
            return false;
        }
        c->max_attempts = (uint32_t)n;
        return true;
    }
    if (strcmp(name, "--max-body") == 0) {
        if (!parse_count(v, 1, INGRESS_BODY_MAX_MAX, &n)) {
            return false;
        }
        c->max_body = (size_t)n;
        return true;
    }
    if (strcmp(name, "--threads") == 0) {
        if (!parse_count(v, 1, 256, &n)) {
            return false;
        }
        c->threads = (unsigned)n;
        return true;
    }
    if (strcmp(name, "--max-connections") == 0) {
        if (!parse_count(v, 1, 65536, &n)) {
            return false;
        }
        c->max_connections = (unsigned)n;
        return true;
    }
    if (strcmp(name, "--mode") == 0) {
        if (strcmp(v, "webhook") != 0 && strcmp(v, "idempotency-key") != 0) {
            return false;
        }
        c->mode = v[0] == 'w' ? INGRESS_MODE_WEBHOOK : INGRESS_MODE_IDEM;
        return true;
    }
    switch (idem_config_apply(&c->idem, name, v)) {
        case 1:
            c->idem_flags = true;
            return true;
        case -1:
            return false;
        default:
            break;
    }
    if (strcmp(name, "--log-level") == 0) {
        if (log_level_parse(v, &l) != 0) {
            return false;
        }
        c->log_level = (int)l;
        return true;
    }
    return false;
}

static const char *const known[] = {"--listen",           "--http-addr",
                                    "--cluster",          "--upstream",
                                    "--scheme",           "--secret-file",
                                    "--secret-env",       "--scope",
                                    "--tolerance",        "--lease",
                                    "--upstream-timeout", "--retry-after",
                                    "--timeout",          "--max-attempts",
                                    "--max-body",         "--threads",
                                    "--max-connections",  "--log-level"};

static bool is_known(const char *name)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(known[i], name) == 0) {
            return true;
        }
    }
    if (strcmp(name, "--mode") == 0) {
        return true;
    }
    for (size_t i = 0; i < idem_flag_count; i++) {
        if (strcmp(idem_flag_names[i], name) == 0) {
            return true;
        }
    }
    return false;
}

/* The mode's switches may stand alone ("--require-key"). */
static bool is_switch(const char *name)
{
    return strcmp(name, "--require-key") == 0 ||
           strcmp(name, "--pass-through-unavailable") == 0 ||
           strcmp(name, "--scope-from-cert") == 0;
}

static int check_idem_tls(const struct idem_config *t, char *msg)
{
    if ((t->tls_cert[0] == '\0') != (t->tls_key[0] == '\0')) {
        err_printf(msg, "--tls-cert and --tls-key go together");
        return INGRESS_E_CONFIG;
    }
    if (t->tls_client_ca[0] != '\0' && t->tls_cert[0] == '\0') {
        err_printf(msg, "--tls-client-ca needs --tls-cert and --tls-key");
        return INGRESS_E_CONFIG;
    }
    if (t->scope_from_cert &&
        (t->tls_client_ca[0] == '\0' || t->scope_header[0] != '\0')) {
        err_printf(msg,
                   "--scope-from-cert needs --tls-client-ca and excludes "
                   "--scope-header");
        return INGRESS_E_CONFIG;
    }
    return 0;
}

static int check_idem(const struct ingress_config *c, char *msg)
{
    if (c->listen[0] == '\0' || c->n_cluster == 0 || c->upstream[0] == '\0') {
        err_printf(msg,
                   "--listen, --cluster and --upstream are required "
                   "(see --help)");
        return INGRESS_E_CONFIG;
    }
    if (c->scheme != 0 || c->secret_file[0] != '\0' ||
        c->secret_env[0] != '\0') {
        err_printf(msg, "--scheme and secrets belong to the webhook mode");
        return INGRESS_E_CONFIG;
    }
    if (strchr(c->upstream + 8, '?') != NULL ||
        strchr(c->upstream + 8, '#') != NULL) {
        err_printf(msg,
                   "--upstream: the request's path and query are "
                   "appended; give http://HOST:PORT[/PREFIX]");
        return INGRESS_E_CONFIG;
    }
    if (c->upstream_timeout_ms >= c->lease_ms) {
        err_printf(msg, "--upstream-timeout must be below --lease");
        return INGRESS_E_CONFIG;
    }
    if (c->http_addr[0] != '\0' && strcmp(c->http_addr, c->listen) == 0) {
        err_printf(msg, "--http-addr must differ from --listen");
        return INGRESS_E_CONFIG;
    }
    return check_idem_tls(&c->idem, msg);
}

static int check_whole(const struct ingress_config *c, char *msg)
{
    if (c->mode == INGRESS_MODE_IDEM) {
        return check_idem(c, msg);
    }
    if (c->idem_flags) {
        err_printf(msg, "that flag needs --mode idempotency-key");
        return INGRESS_E_CONFIG;
    }
    if (c->listen[0] == '\0' || c->n_cluster == 0 || c->upstream[0] == '\0' ||
        c->scheme == 0) {
        err_printf(msg,
                   "--listen, --cluster, --upstream and --scheme are "
                   "required (see --help)");
        return INGRESS_E_CONFIG;
    }
    if (c->secret_file[0] == '\0' && c->secret_env[0] == '\0') {
        err_printf(msg, "no secrets: give --secret-file or --secret-env");
        return INGRESS_E_CONFIG;
    }
    /* A delivery that outlives its lease could run beside the takeover's:
     * the lease must cover the whole upstream call. */
    if (c->upstream_timeout_ms >= c->lease_ms) {
        err_printf(msg, "--upstream-timeout must be below --lease");
        return INGRESS_E_CONFIG;
    }
    if (c->http_addr[0] != '\0' && strcmp(c->http_addr, c->listen) == 0) {
        err_printf(msg, "--http-addr must differ from --listen");
        return INGRESS_E_CONFIG;
    }
    return 0;
}

int ingress_config_parse(struct ingress_config *c,
                         int argc,
                         char **argv,
                         char *msg)
{
    defaults(c);
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        const char *val;
        size_t nlen = eq != NULL ? (size_t)(eq - arg) : strlen(arg);

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            return 1;
        }
        if (nlen >= sizeof name) {
            err_printf(msg, "unknown flag (see --help)");
            return INGRESS_E_CONFIG;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        if (!is_known(name)) {
            err_printf(msg, "unknown flag %.60s (see --help)", name);
            return INGRESS_E_CONFIG;
        }
        if (eq != NULL) {
            val = eq + 1;
        } else if (is_switch(name)) {
            val = "true";
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            err_printf(msg, "%s needs a value", name);
            return INGRESS_E_CONFIG;
        }
        if (!apply(c, name, val)) {
            err_printf(msg, "%s: invalid value (see --help)", name);
            return INGRESS_E_CONFIG;
        }
    }
    return check_whole(c, msg);
}

/* ------------------------------------------------------------------------
 * Secrets
 * ---------------------------------------------------------------------- */

int ingress_parse_secrets(enum once_scheme scheme,
                          const char *text,
                          size_t len,
                          const char *origin,
                          once_verifier *v,
                          char *msg)
{
    size_t i = 0;
    unsigned line = 1;

    (void)scheme;
    while (i < len) {
        size_t start = i;
        size_t end;

        while (i < len && text[i] != '\n' && text[i] != ' ' &&
               text[i] != '\t' && text[i] != '\r') {
            i++;
        }
        end = i;
        if (end > start && text[start] == '#') {
            while (i < len && text[i] != '\n') {
                i++; /* a comment runs to the end of its line */
            }
        } else if (end > start) {
            char why[160];

            if (once_verifier_add(v, text + start, end - start, why,
                                  sizeof why) != 0) {
                err_printf(msg, "%s line %u: %s", origin, line, why);
                return INGRESS_E_SECRETS;
            }
        }
        if (i < len && text[i] == '\n') {
            line++;
        }
        i += i < len ? 1 : 0;
    }
    return 0;
}

static int read_file(const char *path,
                     char *buf,
                     size_t cap,
                     size_t *len,
                     char *msg)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;

    if (fd < 0) {
        err_printf(msg, "secret file %s: %s", path, strerror(errno));
        return INGRESS_E_SECRETS;
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            err_printf(msg, "secret file %s: %s", path, strerror(errno));
            close(fd);
            return INGRESS_E_SECRETS;
        }
        if (r == 0) {
            break;
        }
        n += (size_t)r;
        if (n == cap) {
            err_printf(msg, "secret file %s: over %d bytes", path,
                       INGRESS_SECRET_FILE_MAX - 1);
            close(fd);
            return INGRESS_E_SECRETS;
        }
    }
    close(fd);
    *len = n;
    return 0;
}

int ingress_load_secrets(const struct ingress_config *c,
                         once_verifier **out,
                         char *msg)
{
    once_verifier *v;
    char why[160];
    char *buf = NULL;
    size_t len = 0;
    int rv = 0;

    if (once_verifier_new(c->scheme, &v, why, sizeof why) != 0) {
        err_printf(msg, "%s", why);
        return INGRESS_E_SECRETS;
    }
    if (c->secret_file[0] != '\0') {
        buf = malloc(INGRESS_SECRET_FILE_MAX);
        rv = buf == NULL ? INGRESS_E_NOMEM
                         : read_file(c->secret_file, buf,
                                     INGRESS_SECRET_FILE_MAX, &len, msg);
        if (rv == 0) {
            rv = ingress_parse_secrets(c->scheme, buf, len, c->secret_file, v,
                                       msg);
        }
        if (buf != NULL) {
            explicit_bzero(buf, INGRESS_SECRET_FILE_MAX);
            free(buf);
        }
    }
    if (rv == 0 && c->secret_env[0] != '\0') {
        const char *e = getenv(c->secret_env);

        if (e == NULL) {
            err_printf(msg, "environment variable %s is not set",
                       c->secret_env);
            rv = INGRESS_E_SECRETS;
        } else {
            rv = ingress_parse_secrets(c->scheme, e, strlen(e), c->secret_env,
                                       v, msg);
        }
    }
    if (rv == 0 && once_verifier_count(v) == 0) {
        err_printf(msg, "no secret found");
        rv = INGRESS_E_SECRETS;
    }
    if (rv != 0) {
        once_verifier_free(v);
        return rv == INGRESS_E_NOMEM ? rv : INGRESS_E_SECRETS;
    }
    *out = v;
    return 0;
}
