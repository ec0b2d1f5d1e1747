/* unit-cli: oncectl's pure parts (src/cli/args.c, help.c, value.c, json.c). */
#include <check.h>
#include <stdlib.h>

Suite *cli_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(cli_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
