/* unit-bench: once-bench's pure parts (src/bench/hist.c, bench_args.c). */
#include <check.h>
#include <stdlib.h>

Suite *bench_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(bench_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
