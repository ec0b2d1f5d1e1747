/* unit-server: onced's pure parts: the access file, certificate matching,
 * the rights table and membership safety (src/server/access.h, authz.h,
 * safety.h). */
#include <check.h>
#include <stdlib.h>

Suite *access_suite(void);
Suite *authz_suite(void);
Suite *safety_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(access_suite());
    int failed;

    srunner_add_suite(sr, authz_suite());
    srunner_add_suite(sr, safety_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
