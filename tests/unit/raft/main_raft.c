/* unit-raft: the pure parts of the raft layer. */
#include <check.h>
#include <stdlib.h>

Suite *entry_suite(void);
Suite *ltime_suite(void);
Suite *anchor_suite(void);
Suite *identity_suite(void);
Suite *snap_policy_suite(void);
Suite *rframe_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(entry_suite());
    int failed;

    srunner_add_suite(sr, ltime_suite());
    srunner_add_suite(sr, anchor_suite());
    srunner_add_suite(sr, identity_suite());
    srunner_add_suite(sr, snap_policy_suite());
    srunner_add_suite(sr, rframe_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
