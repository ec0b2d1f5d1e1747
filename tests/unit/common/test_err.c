/* common/err: the code table, texts and message helpers. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "client/verify_int.h"
#include "common/err.h"
#include "fsm/fsm.h"
#include "ingress/ingress.h"
#include "raft/entry.h"
#include "raft/identity.h"
#include "raft/replica.h"
#include "rpc/conn.h"
#include "rpc/status.h"
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

    /* Every code of every module, walked from the one table: its name, its
     * module (the range it sits in), a text of its own, a unique value. */
    static int seen[512];
static size_t n_seen;

static void check_row(const char *module,
                      const char *name,
                      int value,
                      const char *text)
{
    char prefix[32];
    size_t n = strlen(module);

    ck_assert_ptr_nonnull(err_name(value));
    ck_assert_str_eq(err_name(value), name);
    ck_assert_ptr_nonnull(err_module(value));
    ck_assert_str_eq(err_module(value), module);
    ck_assert_str_eq(err_str(value), text);
    ck_assert_uint_gt(strlen(text), 0);
    ck_assert_str_ne(text, "unknown error");
    ck_assert_int_le(value, -1100);
    ck_assert_int_ge(value, -2199);
    /* FSM_E_..., REPLICA_E_...: the name says its module. */
    ck_assert_uint_lt(n + 3, sizeof prefix);
    for (size_t i = 0; i < n; i++) {
        prefix[i] = (char)(module[i] - 'a' + 'A');
    }
    memcpy(prefix + n, "_E_", 4);
    ck_assert_msg(strncmp(name, prefix, n + 3) == 0, "%s not %s*", name,
                  prefix);
    for (size_t i = 0; i < n_seen; i++) {
        ck_assert_int_ne(seen[i], value);
    }
    ck_assert_uint_lt(n_seen, sizeof seen / sizeof seen[0]);
    seen[n_seen++] = value;
}

#define WALK(name, value, text) check_row(module, #name, (value), (text));

START_TEST(every_module_walked)
{
    const char *module;
    size_t n_all = 0;

#define COUNT(name, value, text) n_all++;
    ERR_CODES(COUNT)
#undef COUNT
    n_seen = 0;
    module = "fsm";
    ERR_FSM_CODES(WALK)
    module = "entry";
    ERR_ENTRY_CODES(WALK)
    module = "replica";
    ERR_REPLICA_CODES(WALK)
    module = "identity";
    ERR_IDENTITY_CODES(WALK)
    module = "rpc";
    ERR_RPC_CODES(WALK)
    module = "tls";
    ERR_TLS_CODES(WALK)
    module = "access";
    ERR_ACCESS_CODES(WALK)
    module = "http";
    ERR_HTTP_CODES(WALK)
    module = "verify";
    ERR_VERIFY_CODES(WALK)
    module = "ingress";
    ERR_INGRESS_CODES(WALK)
    /* ERR_CODES names every module above, no more, no fewer. */
    ck_assert_uint_eq(n_seen, n_all);
    /* The texts the modules' own *_strerror give are the table's. */
    ck_assert_str_eq(fsm_strerror(FSM_E_BUSY), err_str(FSM_E_BUSY));
    ck_assert_str_eq(rpc_strerror(RPC_E_ENUM), err_str(RPC_E_ENUM));
}
END_TEST

static bool status_defined(enum rpc_status s)
{
    return strcmp(rpc_status_name(s), "unknown") != 0;
}

/* Module code -> RPC status: every code lands on a defined status with a
 * defined applied flag; the Raft layer's codes each on their own row,
 * whether or not the request left. */
START_TEST(code_to_status_is_total)
{
    static const int errnos[] = {-ENOMEM, -EIO, -EINVAL, -ECONNREFUSED};
    enum rpc_applied ap;
    enum rpc_status st;

#define TOTAL(name, value, text)                                         \
    for (int sent = 0; sent <= 1; sent++) {                              \
        st = rpc_status_of((value), sent, &ap);                          \
        ck_assert_msg(status_defined(st), "%s: status %d", #name, st);   \
        ck_assert_msg(st != RPC_STATUS_OK, "%s: OK", #name);             \
        ck_assert(ap == RPC_APPLIED_FALSE || ap == RPC_APPLIED_UNKNOWN); \
        ck_assert_uint_ne(rpc_status_http(st, ap), 200);                 \
    }
    ERR_CODES(TOTAL)
#undef TOTAL
    for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++) {
        ck_assert_int_eq(rpc_status_of(errnos[i], false, &ap),
                         RPC_STATUS_UNAVAILABLE);
        ck_assert_int_eq(ap, RPC_APPLIED_FALSE);
        ck_assert_int_eq(rpc_status_of(errnos[i], true, &ap),
                         RPC_STATUS_UNKNOWN);
        ck_assert_int_eq(ap, RPC_APPLIED_UNKNOWN);
    }
    /* The Raft layer decides, whatever @sent says. */
    for (int sent = 0; sent <= 1; sent++) {
        ck_assert_int_eq(rpc_status_of(REPLICA_E_NOTLEADER, sent, &ap),
                         RPC_STATUS_UNAVAILABLE);
        ck_assert_int_eq(ap, RPC_APPLIED_FALSE);
        ck_assert_int_eq(rpc_status_of(REPLICA_E_START, sent, &ap),
                         RPC_STATUS_UNAVAILABLE);
        ck_assert_int_eq(rpc_status_of(REPLICA_E_UNKNOWN, sent, &ap),
                         RPC_STATUS_UNKNOWN);
        ck_assert_int_eq(ap, RPC_APPLIED_UNKNOWN);
        ck_assert_int_eq(rpc_status_of(REPLICA_E_PRECONDITION, sent, &ap),
                         RPC_STATUS_FAILED_PRECONDITION);
        ck_assert_int_eq(rpc_status_of(REPLICA_E_BUSY, sent, &ap),
                         RPC_STATUS_RESOURCE_EXHAUSTED);
        ck_assert_int_eq(rpc_status_of(REPLICA_E_INVALID, sent, &ap),
                         RPC_STATUS_INVALID_ARGUMENT);
        ck_assert_int_eq(rpc_status_of(REPLICA_E_TOOBIG, sent, &ap),
                         RPC_STATUS_INVALID_ARGUMENT);
        ck_assert_int_eq(ap, RPC_APPLIED_FALSE);
    }
}
END_TEST

/* RPC status -> HTTP status: every status has its row (docs/http-api.md). */
START_TEST(status_to_http_is_total)
{
    static const struct
    {
        enum rpc_status st;
        unsigned http;
    } rows[] = {
        {RPC_STATUS_OK, 200},
        {RPC_STATUS_UNKNOWN, 504},
        {RPC_STATUS_INVALID_ARGUMENT, 400},
        {RPC_STATUS_DEADLINE_EXCEEDED, 503},
        {RPC_STATUS_PERMISSION_DENIED, 403},
        {RPC_STATUS_RESOURCE_EXHAUSTED, 503},
        {RPC_STATUS_FAILED_PRECONDITION, 503},
        {RPC_STATUS_UNAVAILABLE, 503},
        {RPC_STATUS_WRONG_GROUP, 503},
        {RPC_STATUS_MOVING, 503},
    };

    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ck_assert(status_defined(rows[i].st));
        ck_assert_uint_eq(rpc_status_http(rows[i].st, RPC_APPLIED_FALSE),
                          rows[i].http);
        /* Applied unknown is 504 whatever the status. */
        ck_assert_uint_eq(rpc_status_http(rows[i].st, RPC_APPLIED_UNKNOWN),
                          504);
    }
    /* Every number rpc_status_name knows is a row above. */
    for (int v = 0; v <= 200; v++) {
        bool listed = false;

        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            listed = listed || (int)rows[i].st == v;
        }
        ck_assert_msg(listed || !status_defined((enum rpc_status)v),
                      "status %d has no HTTP row in this test", v);
    }
}
END_TEST

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
    tcase_add_test(tc, every_module_walked);
    tcase_add_test(tc, code_to_status_is_total);
    tcase_add_test(tc, status_to_http_is_total);
    tcase_add_test(tc, modules_and_kinds);
    tcase_add_test(tc, printf_and_wrap);
    suite_add_tcase(s, tc);
    return s;
}
