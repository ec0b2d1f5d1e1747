/* unit-fsm: the claim state machine and its log codec. */
#include <check.h>
#include <stdlib.h>

Suite *nonce_suite(void);
Suite *idempotent_suite(void);
Suite *config_suite(void);
Suite *limits_suite(void);
Suite *snapshot_suite(void);
Suite *model_suite(void);
Suite *command_suite(void);
Suite *regress_suite(void);
Suite *frozen_suite(void);
Suite *prune_suite(void);
Suite *log_time_suite(void);
Suite *pending_suite(void);
Suite *fence_suite(void);
Suite *backup_file_suite(void);
Suite *bytes_suite(void);
Suite *quota_suite(void);
Suite *nuse_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(nonce_suite());
    int failed;

    srunner_add_suite(sr, idempotent_suite());
    srunner_add_suite(sr, config_suite());
    srunner_add_suite(sr, limits_suite());
    srunner_add_suite(sr, snapshot_suite());
    srunner_add_suite(sr, model_suite());
    srunner_add_suite(sr, command_suite());
    srunner_add_suite(sr, regress_suite());
    srunner_add_suite(sr, frozen_suite());
    srunner_add_suite(sr, prune_suite());
    srunner_add_suite(sr, log_time_suite());
    srunner_add_suite(sr, pending_suite());
    srunner_add_suite(sr, fence_suite());
    srunner_add_suite(sr, backup_file_suite());
    srunner_add_suite(sr, bytes_suite());
    srunner_add_suite(sr, quota_suite());
    srunner_add_suite(sr, nuse_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
