/* unit-http: the HTTP listener (http/http.c) over socketpairs, and its
 * TLS terminator (http/http_tls.c) on a loopback port. */
#include <check.h>
#include <stdlib.h>

Suite *http_suite(void);
Suite *http_tls_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    int failed;

    srunner_add_suite(sr, http_tls_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
