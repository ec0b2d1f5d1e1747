/* unit-access: the access file, certificate matching and the rights table
 * (src/server/access.h, authz.h). */
#include <check.h>
#include <stdlib.h>

Suite *access_suite(void);
Suite *authz_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(access_suite());
    int failed;

    srunner_add_suite(sr, authz_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
