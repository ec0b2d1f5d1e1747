/* unit-loop: what keeps a node's event loop free, measured and tested
 * (raft/heap, server/loopwatch). */
#include <check.h>
#include <stdlib.h>

Suite *heap_suite(void);
Suite *loopwatch_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(heap_suite());
    int failed;

    srunner_add_suite(sr, loopwatch_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
