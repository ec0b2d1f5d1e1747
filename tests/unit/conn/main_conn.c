/* unit-conn: the RPC transport (src/rpc: conn.c, rpc_server.c,
 * rpc_channel.c) over loopback sockets, and the server's deadline heap
 * (deadlines.c, test_deadlines.c). */
#include <check.h>
#include <stdlib.h>

#include "conn_helpers.h"

int main(void)
{
    SRunner *sr = srunner_create(conn_suite());
    int failed;

    srunner_add_suite(sr, conn_server_suite());
    srunner_add_suite(sr, conn_channel_suite());
    srunner_add_suite(sr, deadlines_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
