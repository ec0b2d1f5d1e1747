/* once-ingress's pure parts: flags, secrets, answers, stored results,
 * metrics text. */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ingress/ingress.h"

Suite *ingress_suite(void);

#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

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

#define BASE                                                                   \
    "--listen", "127.0.0.1:8080", "--cluster",                                 \
        "127.0.0.1:7101,127.0.0.1:7102", "--upstream",                         \
        "http://127.0.0.1:9000/hook", "--scheme", "standard", "--secret-file", \
        "/dev/null"

START_TEST(config_defaults_and_flags)
{
    struct ingress_config *c = malloc(sizeof *c);
    char msg[ERR_MSG_SIZE];

    ck_assert_int_eq(parse(c, msg, BASE, NULL), 0);
    ck_assert_uint_eq(c->n_cluster, 2);
    ck_assert_str_eq(c->cluster[1], "127.0.0.1:7102");
    ck_assert_uint_eq(c->tolerance_ms, 300000);
    ck_assert_uint_eq(c->lease_ms, 30000);
    ck_assert_uint_eq(c->max_attempts, 5);
    ck_assert_str_eq(c->scope, "webhooks");
    ck_assert_int_eq(parse(c, msg, BASE, "--tolerance=10m", "--lease", "2s",
                           "--upstream-timeout", "1s", "--max-attempts", "3",
                           "--scope", "tenant-a", "--scheme", "stripe",
                           "--http-addr", "127.0.0.1:8081", NULL),
                     0);
    ck_assert_uint_eq(c->tolerance_ms, 600000);
    ck_assert_uint_eq(c->lease_ms, 2000);
    ck_assert_uint_eq(c->max_attempts, 3);
    ck_assert_int_eq(c->scheme, ONCE_SCHEME_STRIPE);
    ck_assert_str_eq(c->http_addr, "127.0.0.1:8081");
    ck_assert_int_eq(parse(c, msg, "--help", NULL), 1);
    ck_assert_ptr_nonnull(strstr(ingress_usage(), "--max-attempts"));
    free(c);
}
END_TEST

START_TEST(config_refusals)
{
    struct ingress_config *c = malloc(sizeof *c);
    char msg[ERR_MSG_SIZE];

    ck_assert_int_eq(parse(c, msg, "--listen", "127.0.0.1:8080", NULL),
                     INGRESS_E_CONFIG); /* the rest is required */
    ck_assert_int_eq(parse(c, msg, BASE, "--bogus", "1", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_ptr_nonnull(strstr(msg, "--bogus"));
    ck_assert_int_eq(parse(c, msg, BASE, "--listen", "localhost:80", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, BASE, "--cluster", "127.0.0.1:0", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, BASE, "--upstream", "ftp://x/", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, BASE, "--scheme", "github", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, BASE, "--max-attempts", "0", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, BASE, "--tolerance", "8d", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, BASE, "--max-body", "16777217", NULL),
                     INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, BASE, "--lease", NULL), INGRESS_E_CONFIG);
    /* A delivery must end inside its lease. */
    ck_assert_int_eq(
        parse(c, msg, BASE, "--lease", "5s", "--upstream-timeout", "5s", NULL),
        INGRESS_E_CONFIG);
    ck_assert_int_eq(parse(c, msg, "--listen", "127.0.0.1:8080", "--cluster",
                           "127.0.0.1:7101", "--upstream", "http://a/",
                           "--scheme", "standard", NULL),
                     INGRESS_E_CONFIG); /* no secrets */
    free(c);
}
END_TEST

START_TEST(secrets_text)
{
    once_verifier *v;
    char msg[ERR_MSG_SIZE];
    const char *text =
        "# rotation: the new one first\n"
        "  whsec_c2VjcmV0LW51bWJlci10d28tMTIzNDU2Nzg=\r\n"
        "\n" SW_SECRET " # old, until Friday\n";
    const char *bad = SW_SECRET "\nwhsec_not*base64\n";

    ck_assert_int_eq(once_verifier_new(ONCE_SCHEME_STANDARD, &v, NULL, 0), 0);
    ck_assert_int_eq(ingress_parse_secrets(ONCE_SCHEME_STANDARD, text,
                                           strlen(text), "f", v, msg),
                     0);
    ck_assert_uint_eq(once_verifier_count(v), 2);
    once_verifier_free(v);
    ck_assert_int_eq(once_verifier_new(ONCE_SCHEME_STANDARD, &v, NULL, 0), 0);
    ck_assert_int_eq(ingress_parse_secrets(ONCE_SCHEME_STANDARD, bad,
                                           strlen(bad), "f", v, msg),
                     INGRESS_E_SECRETS);
    ck_assert_ptr_nonnull(strstr(msg, "f line 2"));
    ck_assert_ptr_null(strstr(msg, "not*base64"));
    once_verifier_free(v);
}
END_TEST

START_TEST(secrets_file_and_env)
{
    struct ingress_config *c = malloc(sizeof *c);
    char msg[ERR_MSG_SIZE];
    char path[] = "/tmp/once-ingress-test-XXXXXX";
    int fd = mkstemp(path);
    once_verifier *v;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, SW_SECRET "\n", strlen(SW_SECRET) + 1),
                     (ssize_t)strlen(SW_SECRET) + 1);
    close(fd);
    ck_assert_int_eq(parse(c, msg, BASE, "--secret-file", path, "--secret-env",
                           "ONCE_TEST_SECRETS", NULL),
                     0);
    setenv("ONCE_TEST_SECRETS",
           "whsec_c2VjcmV0LW51bWJlci10d28tMTIzNDU2Nzg=", 1);
    ck_assert_int_eq(ingress_load_secrets(c, &v, msg), 0);
    ck_assert_uint_eq(once_verifier_count(v), 2);
    once_verifier_free(v);
    unsetenv("ONCE_TEST_SECRETS");
    ck_assert_int_eq(ingress_load_secrets(c, &v, msg), INGRESS_E_SECRETS);
    unlink(path);
    ck_assert_int_eq(parse(c, msg, BASE, "--secret-file", path, NULL), 0);
    ck_assert_int_eq(ingress_load_secrets(c, &v, msg), INGRESS_E_SECRETS);
    ck_assert_ptr_nonnull(strstr(msg, path));
    ck_assert_int_eq(parse(c, msg, BASE, NULL), 0); /* /dev/null: empty */
    ck_assert_int_eq(ingress_load_secrets(c, &v, msg), INGRESS_E_SECRETS);
    free(c);
}
END_TEST

START_TEST(answers)
{
    struct ingress_answer a;

    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_DUPLICATE, 0, 0).http, 200);
    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_BAD_SIGNATURE, 0, 0).http,
                      401);
    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_MALFORMED, 0, 0).http, 400);
    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_STALE, 0, 0).http, 400);
    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_FUTURE, 0, 0).http, 400);
    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_FAILED, 0, 0).http, 422);
    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_CONFLICT, 0, 0).http, 409);
    ck_assert_uint_eq(ingress_answer_for(ONCE_VC_REFUSED, 0, 0).http, 500);
    a = ingress_answer_for(ONCE_VC_IN_PROGRESS, 1500, 0);
    ck_assert_uint_eq(a.http, 409);
    ck_assert_uint_eq(a.retry_after, 2);
    ck_assert_str_eq(a.outcome, "in_progress");
    a = ingress_answer_for(ONCE_VC_UNAVAILABLE, 0, 1000);
    ck_assert_uint_eq(a.http, 503);
    ck_assert_uint_eq(a.retry_after, 1);
    ck_assert_int_eq(ingress_upstream_class(204), UPSTREAM_OK);
    ck_assert_int_eq(ingress_upstream_class(404), UPSTREAM_TERMINAL);
    ck_assert_int_eq(ingress_upstream_class(429), UPSTREAM_RETRYABLE);
    ck_assert_int_eq(ingress_upstream_class(408), UPSTREAM_RETRYABLE);
    ck_assert_int_eq(ingress_upstream_class(500), UPSTREAM_RETRYABLE);
    ck_assert_int_eq(ingress_upstream_class(301), UPSTREAM_RETRYABLE);
}
END_TEST

START_TEST(stored_results)
{
    uint8_t *buf = malloc(ONCE_RESULT_MAX);
    uint8_t *big = malloc(ONCE_RESULT_MAX + 10);
    char ct[INGRESS_CTYPE_MAX + 1];
    const uint8_t *body;
    size_t len;
    size_t n;
    long st;

    n = ingress_result_encode(201, "application/json", (const uint8_t *)"{}", 2,
                              buf, ONCE_RESULT_MAX);
    ck_assert(ingress_result_decode(buf, n, &st, ct, &body, &len));
    ck_assert_int_eq(st, 201);
    ck_assert_str_eq(ct, "application/json");
    ck_assert_uint_eq(len, 2);
    ck_assert_int_eq(memcmp(body, "{}", 2), 0);
    /* Cut to fit; a control byte in the type cannot become a header. */
    memset(big, 'x', ONCE_RESULT_MAX + 10);
    n = ingress_result_encode(200, "text/plain\r\nX: y", big,
                              ONCE_RESULT_MAX + 10, buf, ONCE_RESULT_MAX);
    ck_assert_uint_eq(n, ONCE_RESULT_MAX);
    ck_assert(ingress_result_decode(buf, n, &st, ct, &body, &len));
    ck_assert_ptr_null(strchr(ct, '\r'));
    /* Not ours. */
    ck_assert(!ingress_result_decode((const uint8_t *)"{\"id\":7}", 8, &st, ct,
                                     &body, &len));
    ck_assert(!ingress_result_decode((const uint8_t *)"once-ingress/1 20 x\n",
                                     20, &st, ct, &body, &len));
    ck_assert(!ingress_result_decode(NULL, 0, &st, ct, &body, &len));
    free(buf);
    free(big);
}
END_TEST

START_TEST(metrics_text)
{
    struct ingress_metrics *m = calloc(1, sizeof *m);
    char *buf = malloc(16384);
    size_t n;

    atomic_fetch_add(&m->outcome[ONCE_VC_ACCEPTED], 3);
    ingress_metrics_answer(m, 200, 700);
    ingress_metrics_answer(m, 503, 2000000);
    n = ingress_metrics_text(m, buf, 16384);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_ptr_nonnull(
        strstr(buf, "once_ingress_outcomes_total{outcome=\"ACCEPTED\"} 3\n"));
    ck_assert_ptr_nonnull(
        strstr(buf, "once_ingress_responses_total{class=\"5xx\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(buf, "once_ingress_answer_seconds_bucket{le=\"0.001\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(buf, "once_ingress_answer_seconds_bucket{le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(buf, "once_ingress_answer_seconds_count 2\n"));
    /* Cut, never overflowed. */
    ck_assert_uint_lt(ingress_metrics_text(m, buf, 100), 100);
    free(buf);
    free(m);
}
END_TEST

START_TEST(keyring_swaps)
{
    struct keyring k;
    once_verifier *a;
    once_verifier *b;
    struct keyset *held;

    ck_assert_int_eq(once_verifier_new(ONCE_SCHEME_STRIPE, &a, NULL, 0), 0);
    ck_assert_int_eq(once_verifier_new(ONCE_SCHEME_STRIPE, &b, NULL, 0), 0);
    ck_assert_int_eq(keyring_init(&k, a), 0);
    held = keyring_get(&k);
    ck_assert_ptr_eq(held->v, a);
    ck_assert_int_eq(keyring_swap(&k, b), 0);
    /* A reader of the old set keeps it until it lets go (ASan would see
     * a use after free otherwise). */
    ck_assert_int_eq(once_verifier_scheme(held->v), ONCE_SCHEME_STRIPE);
    keyring_put(&k, held);
    held = keyring_get(&k);
    ck_assert_ptr_eq(held->v, b);
    keyring_put(&k, held);
    keyring_destroy(&k);
}
END_TEST

Suite *ingress_suite(void)
{
    Suite *s = suite_create("ingress");
    TCase *tc = tcase_create("ingress");

    tcase_add_test(tc, config_defaults_and_flags);
    tcase_add_test(tc, config_refusals);
    tcase_add_test(tc, secrets_text);
    tcase_add_test(tc, secrets_file_and_env);
    tcase_add_test(tc, answers);
    tcase_add_test(tc, stored_results);
    tcase_add_test(tc, metrics_text);
    tcase_add_test(tc, keyring_swaps);
    suite_add_tcase(s, tc);
    return s;
}
