/* unit-conn: the RPC transport (src/rpc/conn.c) over loopback sockets. */
#include <check.h>
#include <stdlib.h>

Suite *conn_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(conn_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
