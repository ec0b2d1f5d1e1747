/* unit-httpapi: the HTTP/JSON API's parser and answers. */
#include <check.h>
#include <stdlib.h>

Suite *httpapi_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(httpapi_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
