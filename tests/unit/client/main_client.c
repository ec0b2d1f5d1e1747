/* unit-client: libonce's pure parts (argument checks, bodies, answer
 * conversion, retry decisions, names) and its retry rules against scripted
 * servers on loopback. */
#include <check.h>
#include <stdlib.h>

#include "client_helpers.h"

int main(void)
{
    SRunner *sr = srunner_create(client_pure_suite());
    int failed;

    srunner_add_suite(sr, client_net_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
