/* unit-cluster: the guarded Raft layer on raft_fixture clusters. Each test
 * is forked by Check (0.15 fixture misuse corrupts memory silently, B14). */
#include <check.h>
#include <stdlib.h>

Suite *cluster_suite(void);
Suite *scenarios_suite(void);
Suite *guards_suite(void);
Suite *snapshot_async_suite(void);
Suite *reads_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(cluster_suite());
    int failed;

    srunner_add_suite(sr, scenarios_suite());
    srunner_add_suite(sr, guards_suite());
    srunner_add_suite(sr, snapshot_async_suite());
    srunner_add_suite(sr, reads_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
