/* unit-verify: libonce's webhook verification (include/once_verify.h),
 * alone and through once_verify_and_claim against a scripted server. */
#include <check.h>
#include <stdlib.h>

Suite *verify_suite(void);
Suite *verify_net_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(verify_suite());
    int failed;

    srunner_add_suite(sr, verify_net_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
