/* unit-server: onced's pure parts: the access file, certificate matching,
 * the rights table, membership safety and the batch answer's encoder
 * (src/server/access.h, authz.h, safety.h, batch_pack.h). */
#include <check.h>
#include <stdlib.h>

Suite *access_suite(void);
Suite *authz_suite(void);
Suite *safety_suite(void);
Suite *batch_pack_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(access_suite());
    int failed;

    srunner_add_suite(sr, authz_suite());
    srunner_add_suite(sr, safety_suite());
    srunner_add_suite(sr, batch_pack_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
