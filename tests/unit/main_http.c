/* unit-http: the HTTP listener (http/http.c) over socketpairs. */
#include <check.h>
#include <stdlib.h>

Suite *http_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
