/* ingress/idem_config.c: the flags of --mode idempotency-key (idem.h).
 *
 * config.c owns the flag loop and the flags both modes share (--listen,
 * --cluster, --upstream, --scope, --lease, --max-body, ...); this file
 * holds the mode's own, each checked against its stated bound. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/text.h"
#include "ingress/idem.h"

#define SEC_MS  1000ull
#define HOUR_MS (3600 * SEC_MS)
#define DAY_MS  (24 * HOUR_MS)

const char *const idem_flag_names[] = {"--key-header",
                                       "--scope-header",
                                       "--methods",
                                       "--require-key",
                                       "--retention",
                                       "--wait",
                                       "--max-response",
                                       "--store-headers",
                                       "--fingerprint-headers",
                                       "--fail-on",
                                       "--pass-through-unavailable",
                                       "--tls-cert",
                                       "--tls-key",
                                       "--tls-client-ca",
                                       "--scope-from-cert"};
const size_t idem_flag_count =
    sizeof idem_flag_names / sizeof idem_flag_names[0];

static bool is_tchar(unsigned char ch)
{
    /* RFC 9110 token characters. */
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
           (ch >= 'A' && ch <= 'Z') || strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool is_token(const char *s, size_t n)
{
    if (n == 0 || n > IDEM_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\0' || !is_tchar((unsigned char)s[i])) {
            return false;
        }
    }
    return true;
}

/* A comma-separated list of tokens; "" or "none" is the empty list. */
static bool parse_names(struct idem_names *l, const char *v)
{
    const char *p = v;

    l->n = 0;
    if (strcmp(v, "none") == 0 || v[0] == '\0') {
        return true;
    }
    for (;;) {
        const char *e = strchr(p, ',');
        size_t n = e != NULL ? (size_t)(e - p) : strlen(p);

        if (!is_token(p, n) || l->n == IDEM_NAMES_MAX) {
            return false;
        }
        memcpy(l->name[l->n], p, n);
        l->name[l->n][n] = '\0';
        l->n++;
        if (e == NULL) {
            return true;
        }
        p = e + 1;
    }
}

static bool parse_bool(const char *v, bool *out)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 ||
        strcmp(v, "1") == 0) {
        *out = true;
        return true;
    }
    if (strcmp(v, "false") == 0 || strcmp(v, "no") == 0 ||
        strcmp(v, "0") == 0) {
        *out = false;
        return true;
    }
    return false;
}

/* "5xx,429,408": classes (Nxx, N in 1..5) and single codes (100..599). */
static bool parse_fail_on(struct idem_config *c, const char *v)
{
    struct idem_names l;

    memset(c->fail_status, 0, sizeof c->fail_status);
    if (!parse_names(&l, v)) {
        return false;
    }
    for (size_t i = 0; i < l.n; i++) {
        const char *s = l.name[i];
        uint64_t code;

        if (strlen(s) == 3 && s[0] >= '1' && s[0] <= '5' &&
            (s[1] == 'x' || s[1] == 'X') && (s[2] == 'x' || s[2] == 'X')) {
            unsigned base = (unsigned)(s[0] - '0') * 100;

            for (unsigned k = base; k < base + 100; k++) {
                c->fail_status[k] = true;
            }
        } else if (text_parse_u64(s, 599, &code) && code >= 100) {
            c->fail_status[code] = true;
        } else {
            return false;
        }
    }
    /* A 2xx is the effect having happened: never a failure. */
    for (unsigned k = 200; k < 300; k++) {
        if (c->fail_status[k]) {
            return false;
        }
    }
    return true;
}

/* Headers the proxy writes itself or that describe one hop: storing
 * them would replay a stale framing. */
static bool storable(const struct idem_names *l)
{
    static const char *const never[] = {"Content-Length",
                                        "Transfer-Encoding",
                                        "Connection",
                                        "Keep-Alive",
                                        "Idempotent-Replayed",
                                        "Once-Retention",
                                        "Once-Outcome",
                                        "Upgrade",
                                        "Trailer",
                                        "TE",
                                        "Proxy-Connection"};

    for (size_t i = 0; i < l->n; i++) {
        for (size_t k = 0; k < sizeof never / sizeof never[0]; k++) {
            if (strcasecmp(l->name[i], never[k]) == 0) {
                return false;
            }
        }
    }
    return true;
}

static int copy_path(char *dst, const char *v)
{
    size_t n = strlen(v);

    if (n == 0 || n > IDEM_PATH_MAX) {
        return -1;
    }
    memcpy(dst, v, n + 1);
    return 1;
}

static int apply_tls(struct idem_config *c, const char *name, const char *v)
{
    if (strcmp(name, "--tls-cert") == 0) {
        return copy_path(c->tls_cert, v);
    }
    if (strcmp(name, "--tls-key") == 0) {
        return copy_path(c->tls_key, v);
    }
    if (strcmp(name, "--tls-client-ca") == 0) {
        return copy_path(c->tls_client_ca, v);
    }
    return 0;
}

void idem_config_defaults(struct idem_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->key_header, sizeof c->key_header, "Idempotency-Key");
    parse_names(&c->methods, "POST,PATCH");
    parse_names(&c->store_headers, "Content-Type,Location");
    c->retention_ms = DAY_MS;
    c->max_response = IDEM_RESPONSE_MAX;
    parse_fail_on(c, "5xx");
}

int idem_config_apply(struct idem_config *c, const char *name, const char *v)
{
    uint64_t n;

    if (strcmp(name, "--key-header") == 0) {
        return is_token(v, strlen(v)) && !idem_hop_header(v, strlen(v))
                   ? (snprintf(c->key_header, sizeof c->key_header, "%s", v), 1)
                   : -1;
    }
    if (strcmp(name, "--scope-header") == 0) {
        return is_token(v, strlen(v)) && !idem_hop_header(v, strlen(v))
                   ? (snprintf(c->scope_header, sizeof c->scope_header, "%s",
                               v),
                      1)
                   : -1;
    }
    if (strcmp(name, "--methods") == 0) {
        return parse_names(&c->methods, v) && c->methods.n > 0 ? 1 : -1;
    }
    if (strcmp(name, "--store-headers") == 0) {
        return parse_names(&c->store_headers, v) && storable(&c->store_headers)
                   ? 1
                   : -1;
    }
    if (strcmp(name, "--fingerprint-headers") == 0) {
        return parse_names(&c->fingerprint_headers, v) ? 1 : -1;
    }
    if (strcmp(name, "--require-key") == 0) {
        return parse_bool(v, &c->require_key) ? 1 : -1;
    }
    if (strcmp(name, "--pass-through-unavailable") == 0) {
        return parse_bool(v, &c->fail_open) ? 1 : -1;
    }
    if (strcmp(name, "--retention") == 0) {
        return text_parse_duration_ms(v, 365 * DAY_MS, &c->retention_ms) &&
                       c->retention_ms >= SEC_MS
                   ? 1
                   : -1;
    }
    if (strcmp(name, "--wait") == 0) {
        return text_parse_duration_ms(v, HOUR_MS, &c->wait_ms) ? 1 : -1;
    }
    if (strcmp(name, "--max-response") == 0) {
        if (!text_parse_u64(v, IDEM_RESPONSE_MAX, &n) || n == 0) {
            return -1;
        }
        c->max_response = (size_t)n;
        return 1;
    }
    if (strcmp(name, "--fail-on") == 0) {
        return parse_fail_on(c, v) ? 1 : -1;
    }
    if (strcmp(name, "--scope-from-cert") == 0) {
        return parse_bool(v, &c->scope_from_cert) ? 1 : -1;
    }
    return apply_tls(c, name, v);
}

static const char idem_usage_text[] =
    "\n"
    "--mode idempotency-key: a reverse proxy that makes an HTTP API\n"
    "idempotent by its Idempotency-Key header (docs/ingress.md). Required:\n"
    "--listen, --cluster, --upstream http://HOST:PORT[/PREFIX] (the\n"
    "request's path and query are appended); no --scheme or secrets. Each\n"
    "covered request is claimed (scope, key) IDEMPOTENT with a SHA-256\n"
    "fingerprint of method, path, query, body (and --fingerprint-headers);\n"
    "the first is forwarded once (Once-Attempt: N) and its response stored;\n"
    "every later one gets it again with Idempotent-Replayed: true. Answers:\n"
    "the upstream's or the stored response; 400 bad or missing key; 409 in\n"
    "flight (Retry-After); 413 body over --max-body; 422 the key with\n"
    "another request; 502 the upstream did not answer, or its response was\n"
    "over --max-response (not stored: the request was processed); 503 no\n"
    "decision from the cluster (Retry-After, nothing forwarded). Every\n"
    "answer carries Once-Outcome and Once-Retention (seconds).\n"
    "  --mode webhook|idempotency-key  (default webhook)\n"
    "  --scope S               the scope of every key (default webhooks)\n"
    "  --scope-header NAME     the scope from this request header instead\n"
    "                          (missing or invalid: 400)\n"
    "  --key-header NAME       default Idempotency-Key\n"
    "  --methods LIST          covered methods (default POST,PATCH); others\n"
    "                          pass through untouched, with no claim\n"
    "  --require-key           a covered request without a key is 400 (by\n"
    "                          default it passes through)\n"
    "  --retention DUR         how long a key and its response live (default\n"
    "                          24h; the cluster's max_ttl bounds it)\n"
    "  --lease DUR             how long one forward owns a key (default 30s;\n"
    "                          above --upstream-timeout); a replica that\n"
    "                          dies holds it that long\n"
    "  --wait DUR              wait up to DUR for a key in flight instead of\n"
    "                          answering 409 (default 0)\n"
    "  --max-response BYTES    largest response body stored (default and\n"
    "                          most 61424); larger: stored without its body,\n"
    "                          answered 502 now and on every retry\n"
    "  --store-headers LIST    response headers stored and replayed (default\n"
    "                          Content-Type,Location; none: no header)\n"
    "  --fingerprint-headers LIST  request headers in the fingerprint\n"
    "                          (default none)\n"
    "  --fail-on LIST          upstream statuses that release the key for a\n"
    "                          retry: classes (5xx) and codes (429); default\n"
    "                          5xx. No answer (connection error, timeout)\n"
    "                          always does. Other statuses are stored\n"
    "  --max-attempts N        failed forwards before the failure is stored\n"
    "                          as the answer (default 5)\n"
    "  --tls-cert FILE --tls-key FILE  serve HTTPS on --listen (PEM)\n"
    "  --tls-client-ca FILE    ask clients for a certificate and verify it\n"
    "                          against this CA (PEM)\n"
    "  --scope-from-cert       the scope is the verified client\n"
    "                          certificate's CN (none or invalid: 403)\n"
    "  --pass-through-unavailable  when the cluster gives no decision,\n"
    "                          forward without a claim instead of 503. GIVES\n"
    "                          UP the guarantee: a retry may then be\n"
    "                          processed twice, and nothing is stored\n";

const char *idem_usage(void)
{
    return idem_usage_text;
}
