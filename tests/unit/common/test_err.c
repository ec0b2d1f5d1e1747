/* common/err: the code table, texts and message helpers. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "client/verify_int.h"
#include "common/err.h"
#include "fsm/fsm.h"
#include "ingress/ingress.h"
#include "raft/entry.h"
#include "raft/identity.h"
#include "raft/replica.h"
#include "rpc/conn.h"
#include "server/access.h"
#include "tls/tls.h"

enum { ERR_HTTP_CODES(ERR_ENUM) }; /* as http/http.h declares them */

Suite *err_suite(void);

#define ROW_CHECK(name, value, text)          \
    ck_assert_int_eq((name), (value));        \
    ck_assert_str_eq(err_name(value), #name); \
    ck_assert_str_eq(err_str(value), (text)); \
    ck_assert_int_lt((value), 0);             \
    ck_assert_ptr_nonnull(err_module(value));

START_TEST(every_code_has_its_row){
    ERR_FSM_CODES(ROW_CHECK) ERR_ENTRY_CODES(ROW_CHECK)
        ERR_REPLICA_CODES(ROW_CHECK) ERR_IDENTITY_CODES(ROW_CHECK)
            ERR_RPC_CODES(ROW_CHECK) ERR_TLS_CODES(ROW_CHECK)
                ERR_HTTP_CODES(ROW_CHECK) ERR_VERIFY_CODES(ROW_CHECK)
                    ERR_INGRESS_CODES(ROW_CHECK)
                        ERR_ACCESS_CODES(ROW_CHECK)} END_TEST

    START_TEST(modules_and_kinds)
{
    ck_assert_str_eq(err_module(FSM_E_MALFORMED), "fsm");
    ck_assert_str_eq(err_module(ENTRY_E_TOOBIG), "entry");
    ck_assert_str_eq(err_module(REPLICA_E_BUSY), "replica");
    ck_assert_str_eq(err_module(IDENTITY_E_IO), "identity");
    ck_assert_str_eq(err_module(RPC_E_PROTOCOL), "rpc");
    ck_assert_str_eq(err_module(TLS_E_HANDSHAKE), "tls");
    ck_assert_str_eq(err_module(HTTP_E_MHD), "http");
    ck_assert_str_eq(err_module(VERIFY_E_HEADER), "verify");
    ck_assert_str_eq(err_module(INGRESS_E_CONFIG), "ingress");
    ck_assert_str_eq(err_module(ACCESS_E_DENIED), "access");
    ck_assert_str_eq(err_module(-ENOENT), "errno");
    ck_assert_str_eq(err_module(3), "raft");
    ck_assert_ptr_null(err_module(0));
    ck_assert_ptr_null(err_module(-2500));
    ck_assert_ptr_null(err_name(-ENOENT));
    ck_assert_str_eq(err_str(-ENOENT), strerror(ENOENT));
    ck_assert_str_eq(err_str(-1199), "unknown error");
    ck_assert_str_eq(err_str(0), "success");
}
END_TEST

START_TEST(printf_and_wrap)
{
    char msg[ERR_MSG_SIZE];
    char longer[2 * ERR_MSG_SIZE];

    err_printf(msg, "bad %s at %d", "record", 42);
    ck_assert_str_eq(msg, "bad record at 42");
    err_wrapf(msg, "load %s", "seg-1");
    ck_assert_str_eq(msg, "load seg-1: bad record at 42");
    /* NULL buffers are allowed and ignored. */
    err_printf(NULL, "x");
    err_wrapf(NULL, "x");
    /* A long message is cut at ERR_MSG_SIZE - 1 characters. */
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    err_printf(msg, "%s", longer);
    ck_assert_uint_eq(strlen(msg), ERR_MSG_SIZE - 1);
    err_wrapf(msg, "ctx");
    ck_assert_uint_eq(strlen(msg), ERR_MSG_SIZE - 1);
    ck_assert(strncmp(msg, "ctx: aaa", 8) == 0);
}
END_TEST

Suite *err_suite(void)
{
    Suite *s = suite_create("err");
    TCase *tc = tcase_create("err");

    tcase_add_test(tc, every_code_has_its_row);
    tcase_add_test(tc, modules_and_kinds);
    tcase_add_test(tc, printf_and_wrap);
    suite_add_tcase(s, tc);
    return s;
}
