/* unit-ingress: once-ingress's pure parts (src/ingress/ingress.h). */
#include <check.h>
#include <stdlib.h>

Suite *ingress_suite(void);
Suite *idem_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(ingress_suite());
    int failed;

    srunner_add_suite(sr, idem_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
