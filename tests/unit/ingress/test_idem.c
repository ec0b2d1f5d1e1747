/* once-ingress --mode idempotency-key's pure parts: its flags, the request
 * parser (routes, keys, scopes, fingerprints) and the stored response's
 * encoding. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingress/ingress.h"

Suite *idem_suite(void);

static int parse(struct ingress_config *c, char *msg, ...)
{
    char *argv[40] = {"once-ingress"};
    int argc = 1;
    va_list ap;
    char *a;

    va_start(ap, msg);
    while ((a = va_arg(ap, char *)) != NULL && argc < 39) {
        argv[argc++] = a;
    }
    va_end(ap);
    return ingress_config_parse(c, argc, argv, msg);
}

#define IDEM                                                                \
    "--mode", "idempotency-key", "--listen", "127.0.0.1:8080", "--cluster", \
        "127.0.0.1:7101", "--upstream", "http://127.0.0.1:9000"

START_TEST(idem_flags)
{
    struct ingress_config *c = malloc(sizeof *c);
    char msg[ERR_MSG_SIZE];

    ck_assert_int_eq(parse(c, msg, IDEM, NULL), 0);
    ck_assert_int_eq(c->mode, INGRESS_MODE_IDEM);
    ck_assert_str_eq(c->idem.key_header, "Idempotency-Key");
    ck_assert_uint_eq(c->idem.methods.n, 2);
    ck_assert_str_eq(c->idem.methods.name[1], "PATCH");
    ck_assert_uint_eq(c->idem.store_headers.n, 2);
    ck_assert_uint_eq(c->idem.retention_ms, 86400000);
    ck_assert_uint_eq(c->idem.max_response, IDEM_RESPONSE_MAX);
    ck_assert(!c->idem.require_key);
    ck_assert(c->idem.fail_status[500] && c->idem.fail_status[599]);
    ck_assert(!c->idem.fail_status[429] && !c->idem.fail_status[404]);
    ck_assert_int_eq(
        parse(c, msg, IDEM, "--require-key", "--methods", "POST,PUT,DELETE",
              "--retention", "2h", "--wait", "5s", "--fail-on", "5xx,429",
              "--max-response", "1000", "--store-headers", "none",
              "--fingerprint-headers", "Authorization", "--scope-header",
              "X-Tenant", "--pass-through-unavailable", NULL),
        0);
    ck_assert(c->idem.require_key && c->idem.fail_open);
    ck_assert_uint_eq(c->idem.methods.n, 3);
    ck_assert_uint_eq(c->idem.retention_ms, 7200000);
    ck_assert_uint_eq(c->idem.wait_ms, 5000);
    ck_assert(c->idem.fail_status[429] && !c->idem.fail_status[428]);
    ck_assert_uint_eq(c->idem.max_response, 1000);
    ck_assert_uint_eq(c->idem.store_headers.n, 0);
    ck_assert_str_eq(c->idem.scope_header, "X-Tenant");
    ck_assert_ptr_nonnull(strstr(idem_usage(), "--pass-through-unavailable"));
    free(c);
}
END_TEST

START_TEST(idem_flag_refusals)
{
    struct ingress_config *c = malloc(sizeof *c);
    char msg[ERR_MSG_SIZE];
    char big[32];

    snprintf(big, sizeof big, "%d", IDEM_RESPONSE_MAX + 1);
    /* The mode's flags need the mode; the webhook's do not belong. */
    ck_assert_int_eq(
        parse(c, msg, "--listen", "127.0.0.1:8080", "--cluster",
              "127.0.0.1:7101", "--upstream", "http://h:1", "--scheme",
              "standard", "--secret-file", "/dev/null", "--require-key", NULL),
        INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--scheme", "standard", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--mode", "other", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--max-response", big, NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--max-response", "0", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--fail-on", "2xx", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--fail-on", "600", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--methods", "", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--methods", "PO ST", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(
        parse(c, msg, IDEM, "--store-headers", "Content-Length", NULL),
        INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--key-header", "Host", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--retention", "10ms", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, IDEM, "--lease", "1s", NULL),
                     INGRESS_E_CONFIG); /* below --upstream-timeout */
    ck_assert_int_eq(parse(c, msg, IDEM, "--tls-cert", "c.pem", NULL),
                     INGRESS_E_CONFIG); /* without --tls-key */
    ck_assert_int_eq(parse(c, msg, IDEM, "--tls-client-ca", "ca.pem", NULL),
                     INGRESS_E_CONFIG); /* without a certificate */
    ck_assert_int_eq(parse(c, msg, IDEM, "--tls-cert", "c.pem", "--tls-key",
                           "k.pem", "--scope-from-cert", NULL),
                     INGRESS_E_CONFIG); /* without --tls-client-ca */
    ck_assert_int_eq(parse(c, msg, IDEM, "--tls-cert", "c.pem", "--tls-key",
                           "k.pem", "--tls-client-ca", "ca.pem",
                           "--scope-from-cert", "--scope-header", "X-T", NULL),
                     INGRESS_E_CONFIG); /* two sources of the scope */
    ck_assert_int_eq(
        parse(c, msg, IDEM, "--tls-cert", "c.pem", "--tls-key", "k.pem",
              "--tls-client-ca", "ca.pem", "--scope-from-cert", NULL),
        0);
    ck_assert(c->idem.scope_from_cert);
    ck_assert_str_eq(c->idem.tls_client_ca, "ca.pem");
    ck_assert_int_eq(parse(c, msg, "--mode", "idempotency-key", "--listen",
                           "127.0.0.1:8080", "--cluster", "127.0.0.1:7101",
                           "--upstream", "http://h:1/x?y=1", NULL),
                     INGRESS_E_CONFIG);
    free(c);
}
END_TEST

static struct idem_config cfg(void)
{
    struct idem_config c;

    idem_config_defaults(&c);
    return c;
}

static void run_scoped(const struct idem_config *c,
                       const char *scope,
                       const char *key,
                       struct idem_parsed *out)
{
    struct idem_header h = {"Idempotency-Key", 15, key, strlen(key)};
    struct idem_http_request rq = {"POST", "/p", NULL, &h, 1, NULL, 0};

    idem_parse(c, scope, &rq, out);
}

static void run(const struct idem_config *c,
                const char *method,
                const char *path,
                const char *query,
                const char *key,
                const char *body,
                struct idem_parsed *out)
{
    struct idem_header h[3] = {
        {"Content-Type", 12, "application/json", 16},
        {"Idempotency-Key", 15, key, key != NULL ? strlen(key) : 0},
        {"X-Tenant", 8, "acme", 4}};
    struct idem_http_request rq = {
        method,      path, query, h, key != NULL ? 3 : 1, (const uint8_t *)body,
        strlen(body)};

    if (key == NULL) {
        h[1] = h[2];
        rq.n_headers = 2;
    }
    idem_parse(c, "payments", &rq, out);
}

START_TEST(idem_routes_and_keys)
{
    struct idem_config c = cfg();
    struct idem_parsed p;
    char long_key[300];

    run(&c, "POST", "/p", NULL, "abc-123", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_CLAIM);
    ck_assert_str_eq(p.key, "abc-123");
    ck_assert_str_eq(p.scope, "payments");
    run(&c, "GET", "/p", NULL, "abc-123", "", &p);
    ck_assert_int_eq(p.route, IDEM_PASS);
    run(&c, "POST", "/p", NULL, NULL, "{}", &p);
    ck_assert_int_eq(p.route, IDEM_PASS); /* no --require-key */
    c.require_key = true;
    run(&c, "POST", "/p", NULL, NULL, "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    ck_assert_uint_eq(p.status, 400);
    run(&c, "POST", "/p", NULL, "", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    run(&c, "POST", "/p", NULL, "a b", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    run(&c, "POST", "/p", NULL, "caf\xc3\xa9", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    memset(long_key, 'k', 255);
    long_key[255] = '\0';
    run(&c, "POST", "/p", NULL, long_key, "{}", &p);
    ck_assert_int_eq(p.route, IDEM_CLAIM);
    long_key[255] = 'k';
    long_key[256] = '\0';
    run(&c, "POST", "/p", NULL, long_key, "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    /* The draft's form: a Structured Fields string. */
    run(&c, "POST", "/p", NULL, "\"8e03978e 40d5\"", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_CLAIM);
    ck_assert_str_eq(p.key, "8e03978e 40d5");
    run(&c, "POST", "/p", NULL, "\"a\\\"b\"", "{}", &p);
    ck_assert_str_eq(p.key, "a\"b");
    run(&c, "POST", "/p", NULL, "\"a\\nb\"", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    run(&c, "POST", "/p", NULL, "\"\"", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    run(&c, "POST", "/p", NULL, "\"open", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    run(&c, "POST", "/p q", NULL, "k", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    snprintf(c.scope_header, sizeof c.scope_header, "x-tenant");
    run(&c, "POST", "/p", NULL, "k", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_CLAIM);
    ck_assert_str_eq(p.scope, "acme");
    snprintf(c.scope_header, sizeof c.scope_header, "X-Missing");
    run(&c, "POST", "/p", NULL, "k", "{}", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    /* --scope-from-cert without a verified certificate: no scope, 403. */
    c.scope_header[0] = '\0';
    run_scoped(&c, NULL, "k", &p);
    ck_assert_int_eq(p.route, IDEM_REFUSE);
    ck_assert_uint_eq(p.status, 403);
    run_scoped(&c, "acme", "k", &p);
    ck_assert_int_eq(p.route, IDEM_CLAIM);
    ck_assert_str_eq(p.scope, "acme");
}
END_TEST

START_TEST(idem_fingerprints)
{
    struct idem_config c = cfg();
    struct idem_parsed a, b;

    run(&c, "POST", "/p", "x=1", "k", "{}", &a);
    run(&c, "POST", "/p", "x=1", "k", "{}", &b);
    ck_assert_mem_eq(a.fingerprint, b.fingerprint, IDEM_FINGERPRINT_LEN);
    run(&c, "POST", "/p", "x=2", "k", "{}", &b);
    ck_assert(memcmp(a.fingerprint, b.fingerprint, 32) != 0);
    run(&c, "POST", "/p", NULL, "k", "{}", &b);
    ck_assert(memcmp(a.fingerprint, b.fingerprint, 32) != 0);
    run(&c, "POST", "/p", "", "k", "{}", &b);
    ck_assert(memcmp(a.fingerprint, b.fingerprint, 32) != 0);
    run(&c, "PATCH", "/p", "x=1", "k", "{}", &b);
    ck_assert(memcmp(a.fingerprint, b.fingerprint, 32) != 0);
    run(&c, "POST", "/p", "x=1", "k", "{} ", &b);
    ck_assert(memcmp(a.fingerprint, b.fingerprint, 32) != 0);
    /* Moving a byte between fields changes it (length prefixes). */
    run(&c, "POST", "/px", "=1", "k", "{}", &b);
    ck_assert(memcmp(a.fingerprint, b.fingerprint, 32) != 0);
    /* The key is not part of it: the record is keyed by it. */
    run(&c, "POST", "/p", "x=1", "other", "{}", &b);
    ck_assert_mem_eq(a.fingerprint, b.fingerprint, IDEM_FINGERPRINT_LEN);
    c.fingerprint_headers.n = 1;
    snprintf(c.fingerprint_headers.name[0], IDEM_NAME_MAX, "X-Tenant");
    run(&c, "POST", "/p", "x=1", "k", "{}", &b);
    ck_assert(memcmp(a.fingerprint, b.fingerprint, 32) != 0);
}
END_TEST

START_TEST(idem_store_round_trip)
{
    uint8_t *buf = malloc(ONCE_RESULT_MAX);
    uint8_t *body = calloc(1, IDEM_RESPONSE_MAX);
    struct idem_stored s = {0}, d;
    struct idem_names allow;
    const char raw[] =
        "Content-Type: application/json\n"
        "X-Other: no\nlocation: /p/1 \r\n";
    size_t n;

    memset(&allow, 0, sizeof allow);
    allow.n = 2;
    snprintf(allow.name[0], IDEM_NAME_MAX, "Content-Type");
    snprintf(allow.name[1], IDEM_NAME_MAX, "Location");
    ck_assert(idem_store_pick_headers(&allow, raw, sizeof raw - 1, &s));
    ck_assert_uint_eq(s.n_headers, 2);
    s.status = 201;
    s.body = (const uint8_t *)"{\"id\":1}";
    s.body_len = 8;
    n = idem_store_encode(&s, buf, ONCE_RESULT_MAX);
    ck_assert_uint_gt(n, 0);
    ck_assert(idem_store_decode(buf, n, &d));
    ck_assert_uint_eq(d.status, 201);
    ck_assert_uint_eq(d.n_headers, 2);
    ck_assert_uint_eq(d.headers[1].value_len, 4);
    ck_assert_mem_eq(d.headers[1].value, "/p/1", 4);
    ck_assert_uint_eq(d.body_len, 8);
    ck_assert_mem_eq(d.body, "{\"id\":1}", 8);
    /* Exactly one encoding: a byte more, a byte less, another magic. */
    ck_assert(!idem_store_decode(buf, n - 1, &d));
    buf[n] = 0;
    ck_assert(!idem_store_decode(buf, n + 1, &d));
    buf[0] = 'X';
    ck_assert(!idem_store_decode(buf, n, &d));
    /* The largest body with the largest headers fits the record. */
    s.body = body;
    s.body_len = IDEM_RESPONSE_MAX;
    ck_assert_uint_le(idem_store_encode(&s, buf, ONCE_RESULT_MAX),
                      ONCE_RESULT_MAX);
    ck_assert_uint_gt(idem_store_encode(&s, buf, ONCE_RESULT_MAX), 0);
    /* A value with CR is refused, never stored. */
    s.headers[0].value = "a\rb";
    s.headers[0].value_len = 3;
    ck_assert_uint_eq(idem_store_encode(&s, buf, ONCE_RESULT_MAX), 0);
    s.status = 99;
    ck_assert_uint_eq(idem_store_encode(&s, buf, ONCE_RESULT_MAX), 0);
    free(body);
    free(buf);
}
END_TEST

START_TEST(idem_problem_json)
{
    char buf[256];
    size_t n = idem_problem(422, "Unprocessable Content", "a \"b\"\n", buf,
                            sizeof buf);

    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf,
                     "{\"type\":\"about:blank\",\"title\":"
                     "\"Unprocessable Content\",\"status\":422,"
                     "\"detail\":\"a \\\"b\\\"\\u000a\"}\n");
}
END_TEST

Suite *idem_suite(void)
{
    Suite *s = suite_create("idem");
    TCase *tc = tcase_create("pure");

    tcase_add_test(tc, idem_flags);
    tcase_add_test(tc, idem_flag_refusals);
    tcase_add_test(tc, idem_routes_and_keys);
    tcase_add_test(tc, idem_fingerprints);
    tcase_add_test(tc, idem_store_round_trip);
    tcase_add_test(tc, idem_problem_json);
    suite_add_tcase(s, tc);
    return s;
}
