/* unit-common: building blocks with no dependency on the rest of once. */
#include <check.h>
#include <stdlib.h>

Suite *addr_suite(void);
Suite *arena_suite(void);
Suite *assert_suite(void);
Suite *crc32c_suite(void);
Suite *err_suite(void);
Suite *hash_suite(void);
Suite *path_suite(void);
Suite *prom_suite(void);
Suite *ratelimit_suite(void);
Suite *text_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(arena_suite());
    int failed;

    srunner_add_suite(sr, addr_suite());
    srunner_add_suite(sr, assert_suite());
    srunner_add_suite(sr, crc32c_suite());
    srunner_add_suite(sr, err_suite());
    srunner_add_suite(sr, hash_suite());
    srunner_add_suite(sr, path_suite());
    srunner_add_suite(sr, prom_suite());
    srunner_add_suite(sr, ratelimit_suite());
    srunner_add_suite(sr, text_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
