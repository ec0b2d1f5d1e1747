/* test_client: libonce's pure parts (src/client/wire.c, names.c): the
 * retry decision table, argument checks, request bodies, answer conversion
 * (valid and malformed answers through a real envelope
 * encode/decode/unpack), names. The public API against scripted servers is
 * test_client_net.c. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"
#include "client_helpers.h"
#include "common/crc32c.h"
#include "once_rpc.pb-c.h"
#include "rpc/conn.h"
#include "rpc/frame.h"

/* ------------------------------------------------------------------------
 * Retry decisions
 * ---------------------------------------------------------------------- */

START_TEST(decide_table)
{
    static const struct
    {
        int rv;
        bool sent;
        enum rpc_status status;
        enum rpc_applied applied;
        bool final;
        bool maybe;
    } t[] = {
        /* No answer. */
        {RPC_E_CONNECT, false, 0, 0, false, false},
        {RPC_E_BUSY, false, 0, 0, false, false},
        {RPC_E_TIMEOUT, false, 0, 0, false, false},
        {RPC_E_TIMEOUT, true, 0, 0, false, true},
        {RPC_E_LOST, true, 0, 0, false, true},
        {RPC_E_PROTOCOL, true, 0, 0, false, true},
        {RPC_E_NOMEM, false, 0, 0, false, false},
        {RPC_E_CLOSED, false, 0, 0, true, false},
        {RPC_E_CLOSED, true, 0, 0, true, true},
        /* Answers. */
        {0, true, RPC_STATUS_OK, RPC_APPLIED_UNSPECIFIED, true, false},
        {0, true, RPC_STATUS_INVALID_ARGUMENT, RPC_APPLIED_FALSE, true, false},
        {0, true, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_FALSE, true,
         false},
        {0, true, RPC_STATUS_PERMISSION_DENIED, RPC_APPLIED_FALSE, true, false},
        {0, true, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE, false, false},
        {0, true, RPC_STATUS_RESOURCE_EXHAUSTED, RPC_APPLIED_FALSE, false,
         false},
        {0, true, RPC_STATUS_WRONG_GROUP, RPC_APPLIED_FALSE, false, false},
        {0, true, RPC_STATUS_MOVING, RPC_APPLIED_FALSE, false, false},
        {0, true, RPC_STATUS_UNKNOWN, RPC_APPLIED_UNKNOWN, false, true},
        /* A deadline is unknown even when the node says false (it may have
         * forwarded the call). */
        {0, true, RPC_STATUS_DEADLINE_EXCEEDED, RPC_APPLIED_UNKNOWN, false,
         true},
        {0, true, RPC_STATUS_DEADLINE_EXCEEDED, RPC_APPLIED_FALSE, false, true},
        /* The node's applied UNKNOWN is believed on any status. */
        {0, true, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_UNKNOWN, false, true},
        {0, true, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_UNKNOWN, true,
         true},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct client_decision d =
            client_decide(t[i].rv, t[i].sent, t[i].status, t[i].applied);

        ck_assert_msg(d.final == t[i].final, "row %zu: final %d", i, d.final);
        ck_assert_msg(d.maybe_applied == t[i].maybe, "row %zu: maybe %d", i,
                      d.maybe_applied);
    }
}
END_TEST

START_TEST(status_mapping)
{
    ck_assert_int_eq(client_status_from_rpc(RPC_STATUS_OK), ONCE_STATUS_OK);
    ck_assert_int_eq(client_status_from_rpc(RPC_STATUS_UNAVAILABLE),
                     ONCE_STATUS_UNAVAILABLE);
    ck_assert_int_eq(client_status_from_rpc(RPC_STATUS_DEADLINE_EXCEEDED),
                     ONCE_STATUS_DEADLINE_EXCEEDED);
    ck_assert_int_eq(client_status_from_rpc(RPC_STATUS_WRONG_GROUP),
                     ONCE_STATUS_UNAVAILABLE);
    ck_assert_int_eq(client_status_from_rpc(RPC_STATUS_MOVING),
                     ONCE_STATUS_UNAVAILABLE);
    ck_assert_int_eq(client_status_from_rpc((enum rpc_status)55),
                     ONCE_STATUS_UNKNOWN);
    /* Total: every status the wire names is a public status with a name. */
    for (int v = 0; v <= 200; v++) {
        if (strcmp(rpc_status_name((enum rpc_status)v), "unknown") != 0) {
            ck_assert_str_ne(
                once_status_name(client_status_from_rpc((enum rpc_status)v)),
                "UNKNOWN_VALUE");
        }
    }
    /* No answer at all: the code and whether it left. */
    ck_assert_int_eq(client_status_of_channel(RPC_E_TIMEOUT, true),
                     ONCE_STATUS_DEADLINE_EXCEEDED);
    ck_assert_int_eq(client_status_of_channel(RPC_E_LOST, true),
                     ONCE_STATUS_UNKNOWN);
    ck_assert_int_eq(client_status_of_channel(RPC_E_CONNECT, false),
                     ONCE_STATUS_UNAVAILABLE);
    ck_assert_int_eq(client_status_of_channel(-ENOMEM, false),
                     ONCE_STATUS_UNAVAILABLE);
}
END_TEST

START_TEST(backoff_and_budget)
{
    unsigned b = 0;
    static const unsigned want[] = {20, 40, 80, 160, 200, 200, 200};

    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        b = client_backoff_next(b);
        ck_assert_uint_eq(b, want[i]);
    }
    /* Whole budget when alone or when little is left. */
    ck_assert_uint_eq(client_attempt_budget(5000, false), 5000);
    ck_assert_uint_eq(client_attempt_budget(2000, true), 2000);
    ck_assert_uint_eq(client_attempt_budget(10, true), 10);
    /* Half of what remains, never under the minimum. */
    ck_assert_uint_eq(client_attempt_budget(5000, true), 2500);
    ck_assert_uint_eq(client_attempt_budget(2100, true), 1050);
    ck_assert_uint_eq(client_attempt_budget(2001, true), 1000);
}
END_TEST

/* ------------------------------------------------------------------------
 * Argument checks
 * ---------------------------------------------------------------------- */

START_TEST(options_checks)
{
    const char *good[] = {"127.0.0.1:7301", "10.0.0.2:1"};
    const char *bad[] = {"127.0.0.1:7301", "localhost:7301"};
    const char *nul[] = {NULL};
    const char *many[ONCE_ADDRS_MAX + 1];
    char longaddr[100];
    const char *lng[] = {longaddr};
    struct once_options o;
    char err[ERR_MSG_SIZE];

    for (size_t i = 0; i < ONCE_ADDRS_MAX + 1; i++) {
        many[i] = "127.0.0.1:7301";
    }
    memset(longaddr, '1', sizeof longaddr - 1);
    longaddr[sizeof longaddr - 1] = '\0';

    once_options_init(&o);
    ck_assert_uint_eq(o.timeout_ms, 5000);
    ck_assert_uint_eq(o.max_inflight, 1024);
    ck_assert(!client_check_options(NULL, err));
    ck_assert(!client_check_options(&o, err));
    ck_assert_str_eq(err, "addrs: no address given");
    o.addrs = good;
    o.n_addrs = 2;
    ck_assert(client_check_options(&o, err));
    o.addrs = bad;
    ck_assert(!client_check_options(&o, err));
    ck_assert_str_eq(err, "addrs[1]: \"localhost:7301\" is not IPv4 IP:PORT");
    o.addrs = nul;
    o.n_addrs = 1;
    ck_assert(!client_check_options(&o, err));
    ck_assert_str_eq(err, "addrs[0]: NULL");
    o.addrs = lng;
    ck_assert(!client_check_options(&o, err));
    ck_assert_str_eq(err, "addrs[0]: longer than 64 bytes");
    o.addrs = many;
    o.n_addrs = ONCE_ADDRS_MAX + 1;
    ck_assert(!client_check_options(&o, err));
    o.n_addrs = ONCE_ADDRS_MAX;
    ck_assert(client_check_options(&o, err));
    o.timeout_ms = RPC_DEADLINE_MAX + 1;
    ck_assert(!client_check_options(&o, err));
    ck_assert(strstr(err, "timeout_ms") == err);
    o.timeout_ms = RPC_DEADLINE_MAX;
    o.max_inflight = 1u << 30;
    ck_assert(!client_check_options(&o, err));
    ck_assert(strstr(err, "max_inflight") == err);
}
END_TEST

/* A valid claim (test_client_net.c makes its calls from it too). */
struct once_claim good_claim(void)
{
    struct once_claim a;

    memset(&a, 0, sizeof a);
    a.scope = (const uint8_t *)"tenant";
    a.scope_len = 6;
    a.key = (const uint8_t *)"nonce";
    a.key_len = 5;
    a.kind = ONCE_NONCE;
    a.ttl_ms = 60000;
    return a;
}

START_TEST(claim_checks)
{
    static const uint8_t big[512];
    struct once_claim a = good_claim();
    char err[ERR_MSG_SIZE];

    ck_assert(client_check_claim(&a, err));
    ck_assert(!client_check_claim(NULL, err));

#define BAD(mutate, prefix)                                       \
    do {                                                          \
        a = good_claim();                                         \
        mutate;                                                   \
        ck_assert(!client_check_claim(&a, err));                  \
        ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0,  \
                      "got \"%s\", want \"%s...\"", err, prefix); \
    } while (0)
    BAD(a.scope_len = 0, "scope: 0 bytes");
    BAD(a.scope_len = 129, "scope: 129 bytes");
    BAD(a.scope = NULL, "scope: NULL");
    BAD(a.key_len = 0, "key: 0 bytes");
    BAD((a.key = big, a.key_len = 257), "key: 257 bytes");
    BAD((a.execution_id = big, a.execution_id_len = 129), "execution_id");
    BAD(a.execution_id_len = 3, "execution_id: NULL");
    BAD(a.kind = 0, "kind: 0");
    BAD(a.kind = 3, "kind: 3");
    BAD(a.ttl_ms = 0, "ttl_ms");
    BAD(a.has_ts = true, "window_ms");
    BAD(a.window_ms = 5, "ts_ms/window_ms");
    BAD((a.payload_hash = big, a.payload_hash_len = 32), "payload_hash");
    BAD(a.lease_ms = 1000, "lease_ms");
    BAD((a.kind = ONCE_IDEMPOTENT, a.payload_hash = big,
         a.payload_hash_len = 65),
        "payload_hash: 65 bytes");
    BAD(a.timeout_ms = RPC_DEADLINE_MAX + 1, "timeout_ms");
#undef BAD

    /* Limits themselves are fine. */
    a = good_claim();
    a.scope = big;
    a.scope_len = ONCE_SCOPE_MAX;
    a.key = big;
    a.key_len = ONCE_KEY_MAX;
    a.execution_id = big;
    a.execution_id_len = ONCE_EXECUTION_ID_MAX;
    a.kind = ONCE_IDEMPOTENT;
    a.payload_hash = big;
    a.payload_hash_len = ONCE_PAYLOAD_HASH_MAX;
    a.lease_ms = 1000;
    a.ttl_ms = 0;
    a.has_ts = true;
    a.ts_ms = 0; /* 0 is a valid time */
    a.window_ms = 1;
    ck_assert(client_check_claim(&a, err));
}
END_TEST

START_TEST(other_checks)
{
    static const uint8_t big[ONCE_RESULT_MAX + 1];
    struct once_complete co = {0};
    struct once_release re = {0};
    struct once_member m;
    char err[ERR_MSG_SIZE];

    co.scope = (const uint8_t *)"s";
    co.scope_len = 1;
    co.key = (const uint8_t *)"k";
    co.key_len = 1;
    co.result = big;
    co.result_len = ONCE_RESULT_MAX;
    ck_assert(client_check_complete(&co, err));
    co.result_len = ONCE_RESULT_MAX + 1;
    ck_assert(!client_check_complete(&co, err));
    ck_assert(strncmp(err, "result: 65537 bytes", 19) == 0);

    re.scope = co.scope;
    re.scope_len = 1;
    re.key = co.key;
    re.key_len = 1;
    ck_assert(client_check_release(&re, err));
    re.error = big;
    re.error_len = 10;
    ck_assert(!client_check_release(&re, err));
    ck_assert(strncmp(err, "error: only with terminal", 25) == 0);
    re.terminal = true;
    ck_assert(client_check_release(&re, err));
    re.error_len = ONCE_ERROR_MAX + 1;
    ck_assert(!client_check_release(&re, err));

    memset(&m, 0, sizeof m);
    ck_assert(!client_check_member(&m, err));
    ck_assert_str_eq(err, "id: must not be 0");
    m.id = 7;
    strcpy(m.raft_addr, "127.0.0.1:7311");
    strcpy(m.client_addr, "127.0.0.1:7301");
    m.role = ONCE_ROLE_VOTER;
    ck_assert(client_check_member(&m, err));
    strcpy(m.client_addr, "127.0.0.1");
    ck_assert(!client_check_member(&m, err));
    ck_assert(strncmp(err, "client_addr", 11) == 0);
    strcpy(m.client_addr, "127.0.0.1:7301");
    memset(m.raft_addr, 'x', sizeof m.raft_addr); /* no NUL */
    ck_assert(!client_check_member(&m, err));
    ck_assert(strncmp(err, "raft_addr: not NUL-terminated", 29) == 0);
    strcpy(m.raft_addr, "127.0.0.1:7311");
    m.role = ONCE_ROLE_NONE;
    ck_assert(!client_check_member(&m, err));
    ck_assert(client_check_role(ONCE_ROLE_SPARE, err));
    ck_assert(!client_check_role((enum once_role)4, err));
}
END_TEST

/* ------------------------------------------------------------------------
 * Request bodies
 * ---------------------------------------------------------------------- */

START_TEST(claim_body)
{
    struct once_claim a = good_claim();
    uint8_t rid[ONCE_ID_LEN];
    uint8_t *buf;
    size_t len;
    Once__Rpc__ClaimRequest *m;

    memset(rid, 0x5a, sizeof rid);
    a.kind = ONCE_IDEMPOTENT;
    a.execution_id = (const uint8_t *)"exec-1";
    a.execution_id_len = 6;
    a.payload_hash = (const uint8_t *)"\x01\x02";
    a.payload_hash_len = 2;
    a.lease_ms = 30000;
    a.has_ts = true;
    a.ts_ms = 1700000000000ull;
    a.window_ms = 300000;
    ck_assert_int_eq(client_pack_claim(&a, rid, &buf, &len), 0);
    m = once__rpc__claim_request__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->scope.len, 6);
    ck_assert(memcmp(m->scope.data, "tenant", 6) == 0);
    ck_assert_uint_eq(m->key.len, 5);
    ck_assert_uint_eq(m->request_id.len, 16);
    ck_assert(memcmp(m->request_id.data, rid, 16) == 0);
    ck_assert_uint_eq(m->execution_id.len, 6);
    ck_assert_int_eq(m->kind, ONCE__RPC__KIND__KIND_IDEMPOTENT);
    ck_assert_uint_eq(m->ttl_ms, 60000);
    ck_assert(m->has_ts);
    ck_assert_uint_eq(m->ts_ms, 1700000000000ull);
    ck_assert_uint_eq(m->window_ms, 300000);
    ck_assert_uint_eq(m->payload_hash.len, 2);
    ck_assert_uint_eq(m->lease_ms, 30000);
    once__rpc__claim_request__free_unpacked(m, NULL);
    free(buf);
}
END_TEST

/* client_pack_claim writes by hand what protobuf-c packs: the same bytes
 * for random claims, every field present or absent, with edge values. */
START_TEST(claim_body_is_protobuf_c)
{
    static const uint64_t u64s[] = {
        0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX - 1, UINT64_MAX};
    static uint8_t bytes[300];
    uint64_t seed = 88172645463325252ull;

    for (size_t i = 0; i < sizeof bytes; i++) {
        bytes[i] = (uint8_t)(i * 7 + 3);
    }
    for (int round = 0; round < 2000; round++) {
#define RND() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
#define U64() (RND() % 2 ? u64s[RND() % 9] : RND())
        struct once_claim a;
        Once__Rpc__ClaimRequest m = ONCE__RPC__CLAIM_REQUEST__INIT;
        uint8_t rid[ONCE_ID_LEN], *got, *want;
        size_t len, n;

        memset(&a, 0, sizeof a);
        memset(rid, (int)(RND() & 0xff), sizeof rid);
        a.scope_len = RND() % 65;
        a.scope = bytes;
        a.key_len = RND() % 257;
        a.key = bytes + 1;
        a.execution_id_len = RND() % 3 == 0 ? RND() % 129 : 0;
        a.execution_id = a.execution_id_len > 0 ? bytes + 2 : NULL;
        a.payload_hash_len = RND() % 3 == 0 ? RND() % 65 : 0;
        a.payload_hash = a.payload_hash_len > 0 ? bytes + 3 : NULL;
        a.kind = (enum once_kind)(RND() % 3);
        a.ttl_ms = U64();
        a.has_ts = RND() % 2;
        a.ts_ms = U64();
        a.window_ms = U64();
        a.lease_ms = U64();
        a.max_uses = (uint32_t)(RND() % 2 ? RND() % 3 : RND());
        a.sliding = RND() % 2;
        ck_assert_int_eq(client_pack_claim(&a, rid, &got, &len), 0);

        m.scope.len = a.scope_len;
        m.scope.data = (uint8_t *)(uintptr_t)a.scope;
        m.key.len = a.key_len;
        m.key.data = (uint8_t *)(uintptr_t)a.key;
        m.request_id.len = ONCE_ID_LEN;
        m.request_id.data = rid;
        m.execution_id.len = a.execution_id_len;
        m.execution_id.data = (uint8_t *)(uintptr_t)a.execution_id;
        m.kind = (Once__Rpc__Kind)a.kind;
        m.ttl_ms = a.ttl_ms;
        m.has_ts = a.has_ts;
        m.ts_ms = a.has_ts ? a.ts_ms : 0;
        m.window_ms = a.has_ts ? a.window_ms : 0;
        m.payload_hash.len = a.payload_hash_len;
        m.payload_hash.data = (uint8_t *)(uintptr_t)a.payload_hash;
        m.lease_ms = a.lease_ms;
        m.max_uses = a.max_uses > 1 ? a.max_uses : 0;
        m.sliding = a.sliding;
        n = once__rpc__claim_request__get_packed_size(&m);
        want = malloc(n + 1);
        ck_assert_ptr_nonnull(want);
        ck_assert_uint_eq(once__rpc__claim_request__pack(&m, want), n);
        ck_assert_uint_eq(len, n);
        ck_assert_int_eq(memcmp(got, want, n), 0);
        free(want);
        free(got);
#undef U64
#undef RND
    }
}
END_TEST

static void never_cb(void *arg, struct once_result *r)
{
    (void)arg;
    (void)r;
    ck_abort_msg("a refused lookup has no callback");
}

/* A lookup's body carries leader_only (ONCE_LOOKUP_LEADER); its answer's
 * served_by reaches once_result; unknown flags are refused before any
 * round trip. */
START_TEST(lookup_body_and_served_by)
{
    Once__Rpc__LookupRequest *m;
    Once__Rpc__LookupResponse resp = ONCE__RPC__LOOKUP_RESPONSE__INIT;
    Once__Rpc__Result res = ONCE__RPC__RESULT__INIT;
    struct once_result r;
    struct once_options o;
    const char *addrs[] = {"127.0.0.1:9"};
    once_client *c = NULL;
    char err[ERR_MSG_SIZE];
    uint8_t *buf;
    size_t len;

    for (int leader = 0; leader < 2; leader++) {
        ck_assert_int_eq(
            client_pack_lookup((const uint8_t *)"s", 1, (const uint8_t *)"k", 1,
                               leader == 1, &buf, &len),
            0);
        m = once__rpc__lookup_request__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(m);
        ck_assert_uint_eq(m->scope.len, 1);
        ck_assert_uint_eq(m->key.len, 1);
        ck_assert(m->leader_only == (leader == 1));
        once__rpc__lookup_request__free_unpacked(m, NULL);
        free(buf);
    }

    res.outcome = ONCE__RPC__OUTCOME__OUTCOME_NOT_FOUND;
    resp.result = &res;
    resp.served_by = 0x2f45eef2b79daa77ull;
    once_result_init(&r);
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_LOOKUP, &resp.base, &r, NULL, err), 0);
    ck_assert_int_eq(r.outcome, ONCE_NOT_FOUND);
    ck_assert_uint_eq(r.served_by, 0x2f45eef2b79daa77ull);
    once_result_clear(&r);

    once_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    ck_assert_int_eq(once_client_new(&o, &c, err, sizeof err), 0);
    once_result_init(&r);
    ck_assert_int_eq(once_lookup_flags(c, (const uint8_t *)"s", 1,
                                       (const uint8_t *)"k", 1, 2, 100, &r),
                     ONCE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(r.error, "flags: unknown bits");
    ck_assert_int_eq(
        once_lookup_async(c, (const uint8_t *)"s", 1, (const uint8_t *)"", 0, 0,
                          100, never_cb, NULL),
        -EINVAL);
    once_result_clear(&r);
    once_client_free(c);
}
END_TEST

START_TEST(admin_bodies)
{
    struct once_member mem;
    uint8_t *buf;
    size_t len;
    Once__Rpc__MembersAddRequest *add;
    Once__Rpc__MembersAssignRequest *as;

    memset(&mem, 0, sizeof mem);
    mem.id = 0x1234;
    strcpy(mem.raft_addr, "127.0.0.1:7311");
    strcpy(mem.client_addr, "127.0.0.1:7301");
    mem.role = ONCE_ROLE_STANDBY;
    ck_assert_int_eq(client_pack_member_add(&mem, &buf, &len), 0);
    add = once__rpc__members_add_request__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(add);
    ck_assert_ptr_nonnull(add->member);
    ck_assert_uint_eq(add->member->id, 0x1234);
    ck_assert_str_eq(add->member->raft_addr, "127.0.0.1:7311");
    ck_assert_str_eq(add->member->client_addr, "127.0.0.1:7301");
    ck_assert_int_eq(add->member->role, ONCE__RPC__ROLE__ROLE_STANDBY);
    once__rpc__members_add_request__free_unpacked(add, NULL);
    free(buf);

    ck_assert_int_eq(client_pack_id(RPC_METHOD_MEMBERS_ASSIGN, 9,
                                    ONCE_ROLE_SPARE, false, &buf, &len),
                     0);
    as = once__rpc__members_assign_request__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(as);
    ck_assert_uint_eq(as->id, 9);
    ck_assert_int_eq(as->role, ONCE__RPC__ROLE__ROLE_SPARE);
    ck_assert(!as->force);
    once__rpc__members_assign_request__free_unpacked(as, NULL);
    free(buf);
    ck_assert_int_eq(client_pack_id(RPC_METHOD_MEMBERS_ASSIGN, 9,
                                    ONCE_ROLE_SPARE, true, &buf, &len),
                     0);
    as = once__rpc__members_assign_request__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(as);
    ck_assert(as->force);
    once__rpc__members_assign_request__free_unpacked(as, NULL);
    free(buf);
    {
        Once__Rpc__MembersRemoveRequest *rm;

        ck_assert_int_eq(client_pack_id(RPC_METHOD_MEMBERS_REMOVE, 7,
                                        ONCE_ROLE_NONE, true, &buf, &len),
                         0);
        rm = once__rpc__members_remove_request__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(rm);
        ck_assert_uint_eq(rm->id, 7);
        ck_assert(rm->force);
        once__rpc__members_remove_request__free_unpacked(rm, NULL);
        free(buf);
    }

    {
        Once__Rpc__StatusRequest *sr;

        ck_assert_int_eq(client_pack_status(true, &buf, &len), 0);
        sr = once__rpc__status_request__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(sr);
        ck_assert(sr->state_digest);
        once__rpc__status_request__free_unpacked(sr, NULL);
        free(buf);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * Answers: through a real envelope (encode, decode, unpack_body)
 * ---------------------------------------------------------------------- */

static uint8_t *pack_msg(const ProtobufCMessage *m, size_t *len)
{
    uint8_t *buf = malloc(protobuf_c_message_get_packed_size(m) + 1);

    ck_assert_ptr_nonnull(buf);
    *len = protobuf_c_message_pack(m, buf);
    return buf;
}

/* Decode @body as the OK answer of @method and convert it. */
static int read_answer(enum rpc_method method,
                       const uint8_t *body,
                       size_t body_len,
                       struct once_result *r,
                       const struct client_outputs *out,
                       char *err)
{
    struct envelope_view v;
    struct envelope_view d;
    uint8_t *frame;
    size_t frame_len;
    ProtobufCMessage *msg;
    int rv;

    memset(&v, 0, sizeof v);
    v.call_id = 1;
    v.method = method;
    v.direction = RPC_RESPONSE;
    v.status = RPC_STATUS_OK;
    v.has_cluster_id = true;
    memset(v.cluster_id, 0xcc, RPC_ID_LEN);
    v.body = body;
    v.body_len = body_len;
    ck_assert_int_eq(
        envelope_encode_alloc(&v, FRAME_MAX_DEFAULT, &frame, &frame_len, NULL),
        0);
    envelope_view_init(&d);
    ck_assert_int_eq(
        envelope_decode(frame + FRAME_HEADER_LEN, frame_len - FRAME_HEADER_LEN,
                        FRAME_MAX_DEFAULT, &d, NULL),
        0);
    ck_assert_int_eq(envelope_unpack_body(&d, &msg, NULL), 0);
    rv = client_read_body(method, msg, r, out, err);
    envelope_view_close(&d);
    free(frame);
    return rv;
}

/* A Result with every field set, and the storage it points into. */
struct full_result
{
    Once__Rpc__Result res;
    Once__Rpc__OwnerToken token;
    Once__Rpc__Attempt att[ONCE_ATTEMPTS_MAX + 1];
    Once__Rpc__Attempt *attp[ONCE_ATTEMPTS_MAX + 1];
    uint8_t rid[16], first[16], arid[16];
    uint8_t result[ONCE_RESULT_MAX + 1];
    uint8_t stored_error[ONCE_ERROR_MAX + 1];
    char reason[300];
};

static void full_result_init(struct full_result *f)
{
    Once__Rpc__Result res = ONCE__RPC__RESULT__INIT;
    Once__Rpc__OwnerToken tok = ONCE__RPC__OWNER_TOKEN__INIT;

    memset(f, 0, sizeof *f);
    memset(f->rid, 0x11, 16);
    memset(f->first, 0x22, 16);
    memset(f->arid, 0x33, 16);
    memset(f->result, 'r', sizeof f->result);
    memset(f->stored_error, 'e', sizeof f->stored_error);
    strcpy(f->reason, "because");
    f->res = res;
    f->token = tok;
    f->token.group_id = 1;
    f->token.index = 42;
    f->token.slot = 3;
    for (size_t i = 0; i < ONCE_ATTEMPTS_MAX + 1; i++) {
        Once__Rpc__Attempt a = ONCE__RPC__ATTEMPT__INIT;

        a.request_id.data = f->arid;
        a.request_id.len = 16;
        a.execution_id.data = (uint8_t *)"exec";
        a.execution_id.len = 4;
        a.index = 100 + i;
        a.time_ms = 1000 + i;
        a.outcome = ONCE__RPC__OUTCOME__OUTCOME_REPLAYED;
        a.retry = i == 1;
        f->att[i] = a;
        f->attp[i] = &f->att[i];
    }
    f->res.outcome = ONCE__RPC__OUTCOME__OUTCOME_DUPLICATE;
    f->res.retry = true;
    f->res.request_id.data = f->rid;
    f->res.request_id.len = 16;
    f->res.first_request_id.data = f->first;
    f->res.first_request_id.len = 16;
    f->res.first_index = 7;
    f->res.first_time_ms = 1700000000123ull;
    f->res.attempts_total = 12;
    f->res.n_attempts = ONCE_ATTEMPTS_MAX;
    f->res.attempts = f->attp;
    f->res.has_owner_token = true;
    f->res.owner_token = &f->token;
    f->res.result.data = f->result;
    f->res.result.len = ONCE_RESULT_MAX;
    f->res.stored_error.data = f->stored_error;
    f->res.stored_error.len = ONCE_ERROR_MAX;
    f->res.retry_after_ms = 1500;
    f->res.reason = f->reason;
    f->res.kind = ONCE__RPC__KIND__KIND_IDEMPOTENT;
    f->res.state = ONCE__RPC__STATE__STATE_COMPLETED;
    f->res.expires_ms = 99;
    f->res.lease_expires_ms = 98;
    f->res.owner_attempt = 4;
    f->res.log_time_ms = 1700000004567ull;
}

static int read_full(struct full_result *f, struct once_result *r, char *err)
{
    Once__Rpc__ClaimResponse cr = ONCE__RPC__CLAIM_RESPONSE__INIT;
    uint8_t *buf;
    size_t len;
    int rv;

    cr.result = &f->res;
    buf = pack_msg(&cr.base, &len);
    rv = read_answer(RPC_METHOD_CLAIM, buf, len, r, NULL, err);
    free(buf);
    return rv;
}

START_TEST(result_every_field)
{
    static struct full_result f;
    struct once_result r;
    char err[ERR_MSG_SIZE];

    full_result_init(&f);
    once_result_init(&r);
    ck_assert_int_eq(read_full(&f, &r, err), 0);
    ck_assert_int_eq(r.outcome, ONCE_DUPLICATE);
    ck_assert(r.retry);
    ck_assert(r.has_first);
    ck_assert(memcmp(r.first_request_id, f.first, 16) == 0);
    ck_assert_uint_eq(r.first_index, 7);
    ck_assert_uint_eq(r.first_time_ms, 1700000000123ull);
    ck_assert_uint_eq(r.attempts_total, 12);
    ck_assert_uint_eq(r.n_attempts, ONCE_ATTEMPTS_MAX);
    for (size_t i = 0; i < ONCE_ATTEMPTS_MAX; i++) {
        ck_assert(memcmp(r.attempts[i].request_id, f.arid, 16) == 0);
        ck_assert_uint_eq(r.attempts[i].execution_id_len, 4);
        ck_assert(memcmp(r.attempts[i].execution_id, "exec", 4) == 0);
        ck_assert_uint_eq(r.attempts[i].index, 100 + i);
        ck_assert_uint_eq(r.attempts[i].time_ms, 1000 + i);
        ck_assert_int_eq(r.attempts[i].outcome, ONCE_REPLAYED);
        ck_assert(r.attempts[i].retry == (i == 1));
    }
    ck_assert(r.has_owner_token);
    ck_assert_uint_eq(r.owner_token.group_id, 1);
    ck_assert_uint_eq(r.owner_token.index, 42);
    ck_assert_uint_eq(r.owner_token.slot, 3);
    ck_assert_uint_eq(r.result_len, ONCE_RESULT_MAX);
    ck_assert_ptr_nonnull(r.result);
    ck_assert_uint_eq(r.result[ONCE_RESULT_MAX - 1], 'r');
    ck_assert_uint_eq(r.stored_error_len, ONCE_ERROR_MAX);
    ck_assert_uint_eq(strlen(r.stored_error), ONCE_ERROR_MAX);
    ck_assert_uint_eq(r.retry_after_ms, 1500);
    ck_assert_str_eq(r.reason, "because");
    ck_assert_int_eq(r.kind, ONCE_IDEMPOTENT);
    ck_assert_int_eq(r.state, ONCE_STATE_COMPLETED);
    ck_assert_uint_eq(r.expires_ms, 99);
    ck_assert_uint_eq(r.lease_expires_ms, 98);
    ck_assert_uint_eq(r.owner_attempt, 4);
    ck_assert_uint_eq(r.log_time_ms, 1700000004567ull);
    once_result_clear(&r);
    ck_assert_ptr_null(r.result);
    ck_assert_uint_eq(r.result_len, 0);
    once_result_clear(NULL);

    /* Empty optional fields. */
    f.res.first_request_id.len = 0;
    f.res.n_attempts = 0;
    f.res.has_owner_token = false;
    f.res.owner_token = NULL;
    f.res.result.len = 0;
    f.res.stored_error.len = 0;
    ck_assert_int_eq(read_full(&f, &r, err), 0);
    ck_assert(!r.has_first);
    ck_assert(!r.has_owner_token);
    ck_assert_ptr_null(r.result);
    ck_assert_str_eq(r.stored_error, "");
    once_result_clear(&r);
}
END_TEST

START_TEST(result_malformed)
{
    static struct full_result f;
    struct once_result r;
    char err[ERR_MSG_SIZE];

#define BAD(mutate, prefix)                                       \
    do {                                                          \
        full_result_init(&f);                                     \
        mutate;                                                   \
        once_result_init(&r);                                     \
        ck_assert_int_eq(read_full(&f, &r, err), RPC_E_PROTOCOL); \
        ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0,  \
                      "got \"%s\", want \"%s...\"", err, prefix); \
        once_result_clear(&r);                                    \
    } while (0)
    BAD(f.res.outcome = 0, "result.outcome: unknown value 0");
    BAD(f.res.outcome = 19, "result.outcome: unknown value 19");
    BAD(f.res.request_id.len = 15, "result.request_id: 15 bytes");
    BAD(f.res.first_request_id.len = 17, "result.first_request_id");
    BAD(f.res.n_attempts = ONCE_ATTEMPTS_MAX + 1, "result.attempts: 6");
    BAD(f.att[2].request_id.len = 0, "result.attempts[2].request_id");
    BAD((f.att[0].execution_id.data = f.result,
         f.att[0].execution_id.len = 129),
        "result.attempts[0].execution_id");
    BAD(f.att[4].outcome = 77, "result.attempts[4].outcome");
    BAD(f.res.owner_token = NULL, "result.owner_token");
    BAD(f.res.result.len = ONCE_RESULT_MAX + 1, "result.result: 65537");
    BAD(f.res.stored_error.len = ONCE_ERROR_MAX + 1, "result.stored_error");
    BAD((memset(f.reason, 'x', 257), f.reason[257] = '\0'),
        "result.reason: longer than 256");
    BAD(f.res.kind = 3, "result.kind");
    BAD(f.res.state = 6, "result.state");
#undef BAD

    /* No result at all. */
    {
        Once__Rpc__ClaimResponse cr = ONCE__RPC__CLAIM_RESPONSE__INIT;
        uint8_t *buf;
        size_t len;

        buf = pack_msg(&cr.base, &len);
        once_result_init(&r);
        ck_assert_int_eq(read_answer(RPC_METHOD_CLAIM, buf, len, &r, NULL, err),
                         RPC_E_PROTOCOL);
        ck_assert_str_eq(err, "answer without a result");
        free(buf);
    }
}
END_TEST

START_TEST(status_answer)
{
    Once__Rpc__StatusResponse s = ONCE__RPC__STATUS_RESPONSE__INIT;
    Once__Rpc__Member m[2] = {ONCE__RPC__MEMBER__INIT, ONCE__RPC__MEMBER__INIT};
    Once__Rpc__Member *mp[2] = {&m[0], &m[1]};
    struct once_status_info info;
    struct client_outputs out = {0};
    struct once_result r;
    char err[ERR_MSG_SIZE];
    char longs[80];
    uint8_t *buf;
    size_t len;

    m[0].id = 1;
    m[0].raft_addr = "127.0.0.1:7311";
    m[0].client_addr = "127.0.0.1:7301";
    m[0].role = ONCE__RPC__ROLE__ROLE_VOTER;
    m[0].reachable = true;
    m[1].id = 2;
    m[1].raft_addr = "127.0.0.1:7312";
    m[1].client_addr = "127.0.0.1:7302";
    m[1].role = ONCE__RPC__ROLE__ROLE_STANDBY;
    s.role = ONCE__RPC__RAFT_ROLE__RAFT_ROLE_LEADER;
    s.term = 3;
    s.commit_index = 10;
    s.applied_index = 9;
    s.config_index = 2;
    s.leader_id = 1;
    s.leader_addr = "127.0.0.1:7301";
    s.store_backend = "uv";
    s.n_members = 2;
    s.members = mp;
    s.member_role = ONCE__RPC__ROLE__ROLE_VOTER;
    uint64_t voters[65] = {1, 2};
    s.n_config_voters = 2;
    s.config_voters = voters;
    s.state_digest = 0xfeed;
    out.status = &info;
    once_result_init(&r);
    buf = pack_msg(&s.base, &len);
    ck_assert_int_eq(read_answer(RPC_METHOD_STATUS, buf, len, &r, &out, err),
                     0);
    free(buf);
    ck_assert_int_eq(r.outcome, ONCE_OK);
    ck_assert_int_eq(info.role, ONCE_RAFT_LEADER);
    ck_assert_uint_eq(info.term, 3);
    ck_assert_uint_eq(info.commit_index, 10);
    ck_assert_uint_eq(info.applied_index, 9);
    ck_assert_uint_eq(info.config_index, 2);
    ck_assert_uint_eq(info.leader_id, 1);
    ck_assert_str_eq(info.leader_addr, "127.0.0.1:7301");
    ck_assert_str_eq(info.store_backend, "uv");
    ck_assert_int_eq(info.member_role, ONCE_ROLE_VOTER);
    ck_assert_uint_eq(info.n_members, 2);
    ck_assert_uint_eq(info.members[1].id, 2);
    ck_assert_str_eq(info.members[1].client_addr, "127.0.0.1:7302");
    ck_assert_int_eq(info.members[1].role, ONCE_ROLE_STANDBY);
    ck_assert(info.members[0].reachable);
    ck_assert(!info.members[1].reachable);
    ck_assert_uint_eq(info.n_config_voters, 2);
    ck_assert_uint_eq(info.state_digest, 0xfeed);
    ck_assert_uint_eq(info.config_voters[1], 2);

    /* More config voters than ONCE_MEMBERS_MAX: refused, named. */
    s.n_config_voters = 65;
    buf = pack_msg(&s.base, &len);
    ck_assert_int_eq(read_answer(RPC_METHOD_STATUS, buf, len, &r, &out, err),
                     RPC_E_PROTOCOL);
    free(buf);
    ck_assert_ptr_nonnull(strstr(err, "status.config_voters"));
    s.n_config_voters = 2;

    /* Bounds: an address over 64 bytes, a member id 0, a role 9. */
    memset(longs, '1', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    m[1].client_addr = longs;
    buf = pack_msg(&s.base, &len);
    ck_assert_int_eq(read_answer(RPC_METHOD_STATUS, buf, len, &r, &out, err),
                     RPC_E_PROTOCOL);
    ck_assert_str_eq(err,
                     "status.members[1].client_addr: longer than 64 bytes");
    free(buf);
    m[1].client_addr = "127.0.0.1:7302";
    m[0].id = 0;
    buf = pack_msg(&s.base, &len);
    ck_assert_int_eq(read_answer(RPC_METHOD_STATUS, buf, len, &r, &out, err),
                     RPC_E_PROTOCOL);
    ck_assert_str_eq(err, "status.members[0].id: 0");
    free(buf);
    m[0].id = 1;
    s.role = 9;
    buf = pack_msg(&s.base, &len);
    ck_assert_int_eq(read_answer(RPC_METHOD_STATUS, buf, len, &r, &out, err),
                     RPC_E_PROTOCOL);
    ck_assert_str_eq(err, "status.role: unknown value 9");
    free(buf);
}
END_TEST

START_TEST(config_answers)
{
    Once__Rpc__MembersAddResponse a = ONCE__RPC__MEMBERS_ADD_RESPONSE__INIT;
    Once__Rpc__ConfigResult cfg = ONCE__RPC__CONFIG_RESULT__INIT;
    Once__Rpc__TransferResponse t = ONCE__RPC__TRANSFER_RESPONSE__INIT;
    Once__Rpc__SnapshotTakeResponse sn =
        ONCE__RPC__SNAPSHOT_TAKE_RESPONSE__INIT;
    struct client_outputs out = {0};
    struct once_result r;
    char err[ERR_MSG_SIZE];
    uint64_t x = 0, y = 0;
    uint8_t *buf;
    size_t len;

    once_result_init(&r);
    cfg.outcome = ONCE__RPC__OUTCOME__OUTCOME_FAILED_PRECONDITION;
    cfg.reason = "id retired";
    a.result = &cfg;
    buf = pack_msg(&a.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_MEMBERS_ADD, buf, len, &r, NULL, err), 0);
    free(buf);
    ck_assert_int_eq(r.outcome, ONCE_FAILED_PRECONDITION);
    ck_assert_str_eq(r.reason, "id retired");
    a.result = NULL;
    buf = pack_msg(&a.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_MEMBERS_ADD, buf, len, &r, NULL, err),
        RPC_E_PROTOCOL);
    free(buf);

    t.leader_id = 77;
    out.u64_a = &x;
    buf = pack_msg(&t.base, &len);
    ck_assert_int_eq(read_answer(RPC_METHOD_TRANSFER, buf, len, &r, &out, err),
                     0);
    free(buf);
    ck_assert_uint_eq(x, 77);
    sn.index = 1000;
    sn.size_bytes = 4096;
    out.u64_b = &y;
    buf = pack_msg(&sn.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_SNAPSHOT_TAKE, buf, len, &r, &out, err), 0);
    free(buf);
    ck_assert_uint_eq(x, 1000);
    ck_assert_uint_eq(y, 4096);
    /* A body of another method is refused. */
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM, &sn.base, &r, &out, err),
        RPC_E_PROTOCOL);
    once_result_clear(&r);
}
END_TEST

/* A backup chunk reaches the caller's buffer only whole, within what was
 * asked, and with the leader's CRC-32C. */
START_TEST(backup_answers)
{
    Once__Rpc__BackupReadResponse m = ONCE__RPC__BACKUP_READ_RESPONSE__INIT;
    Once__Rpc__BackupOpenResponse o = ONCE__RPC__BACKUP_OPEN_RESPONSE__INIT;
    struct client_outputs out = {0};
    struct once_result r;
    char err[ERR_MSG_SIZE];
    uint8_t data[16] = "0123456789abcdef", got[16];
    uint64_t total = 0, id = 0;
    size_t n = 99;
    bool ready = false;
    uint8_t *buf;
    size_t len;

    once_result_init(&r);
    o.backup_id = 0x77;
    out.u64_a = &id;
    buf = pack_msg(&o.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_BACKUP_OPEN, buf, len, &r, &out, err), 0);
    free(buf);
    ck_assert_uint_eq(id, 0x77);
    out.u64_a = &total;
    out.buf = got;
    out.buf_cap = sizeof got;
    out.buf_n = &n;
    out.ready = &ready;
    m.ready = true;
    m.total_bytes = 1000;
    m.data.data = data;
    m.data.len = sizeof data;
    m.crc32c = crc32c(0, data, sizeof data);
    buf = pack_msg(&m.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_BACKUP_READ, buf, len, &r, &out, err), 0);
    free(buf);
    ck_assert(ready);
    ck_assert_uint_eq(total, 1000);
    ck_assert_uint_eq(n, sizeof data);
    ck_assert_mem_eq(got, data, sizeof data);
    m.crc32c ^= 1;
    buf = pack_msg(&m.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_BACKUP_READ, buf, len, &r, &out, err),
        RPC_E_PROTOCOL);
    ck_assert_str_eq(err, "backup chunk checksum mismatch");
    free(buf);
    m.crc32c ^= 1;
    out.buf_cap = 8; /* more than asked */
    buf = pack_msg(&m.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_BACKUP_READ, buf, len, &r, &out, err),
        RPC_E_PROTOCOL);
    free(buf);
    m.ready = false; /* data while not ready */
    out.buf_cap = sizeof got;
    buf = pack_msg(&m.base, &len);
    ck_assert_int_eq(
        read_answer(RPC_METHOD_BACKUP_READ, buf, len, &r, &out, err),
        RPC_E_PROTOCOL);
    free(buf);
    once_result_clear(&r);
}
END_TEST

/* A ClaimBatch answer: item k into rs[idx[k]]; an item's own error with
 * its applied; refused whole when it breaks a bound. */
START_TEST(batch_answers)
{
    Once__Rpc__ClaimBatchResponse m = ONCE__RPC__CLAIM_BATCH_RESPONSE__INIT;
    Once__Rpc__ClaimBatchItem it[3], *ip[3];
    Once__Rpc__Result res = ONCE__RPC__RESULT__INIT;
    struct once_result rs[4], r;
    const size_t idx[3] = {3, 0, 2};
    struct client_batch_out bo = {rs, idx, 3};
    struct client_outputs out;
    char err[ERR_MSG_SIZE];

    memset(&out, 0, sizeof out);
    out.batch = &bo;
    for (int i = 0; i < 4; i++) {
        once_result_init(&rs[i]);
    }
    once_result_init(&r);
    for (int i = 0; i < 3; i++) {
        once__rpc__claim_batch_item__init(&it[i]);
        ip[i] = &it[i];
    }
    res.outcome = ONCE__RPC__OUTCOME__OUTCOME_REPLAYED;
    it[0].result = &res;
    it[1].status = ONCE__RPC__STATUS__STATUS_PERMISSION_DENIED;
    it[1].applied = ONCE__RPC__APPLIED__APPLIED_FALSE;
    it[1].error = (ProtobufCBinaryData){6, (uint8_t *)"denied"};
    it[2].status = ONCE__RPC__STATUS__STATUS_UNKNOWN;
    it[2].applied = ONCE__RPC__APPLIED__APPLIED_UNKNOWN;
    m.n_items = 3;
    m.items = ip;
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM_BATCH, &m.base, &r, &out, err), 0);
    ck_assert_int_eq(rs[3].status, ONCE_STATUS_OK);
    ck_assert_int_eq(rs[3].outcome, ONCE_REPLAYED);
    ck_assert_int_eq(rs[0].status, ONCE_STATUS_PERMISSION_DENIED);
    ck_assert_int_eq(rs[0].applied, ONCE_APPLIED_FALSE);
    ck_assert_str_eq(rs[0].error, "denied");
    ck_assert_int_eq(rs[2].status, ONCE_STATUS_UNKNOWN);
    ck_assert_int_eq(rs[2].applied, ONCE_APPLIED_UNKNOWN);
    ck_assert_int_eq(rs[1].status, ONCE_STATUS_OK); /* not sent: untouched */
    ck_assert_int_eq(rs[1].outcome, ONCE_UNSPECIFIED);

    /* fewer items than sent */
    m.n_items = 2;
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM_BATCH, &m.base, &r, &out, err),
        RPC_E_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(err, "2 answered for 3 sent"));
    m.n_items = 3;
    /* OK without a result */
    it[0].result = NULL;
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM_BATCH, &m.base, &r, &out, err),
        RPC_E_PROTOCOL);
    it[0].result = &res;
    /* an error without applied, an unknown status, a NUL in the text */
    it[1].applied = ONCE__RPC__APPLIED__APPLIED_UNSPECIFIED;
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM_BATCH, &m.base, &r, &out, err),
        RPC_E_PROTOCOL);
    it[1].applied = ONCE__RPC__APPLIED__APPLIED_FALSE;
    it[1].status = (Once__Rpc__Status)55;
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM_BATCH, &m.base, &r, &out, err),
        RPC_E_PROTOCOL);
    it[1].status = ONCE__RPC__STATUS__STATUS_PERMISSION_DENIED;
    it[1].error = (ProtobufCBinaryData){3, (uint8_t *)"a\0b"};
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM_BATCH, &m.base, &r, &out, err),
        RPC_E_PROTOCOL);
    /* no place for the items */
    out.batch = NULL;
    ck_assert_int_eq(
        client_read_body(RPC_METHOD_CLAIM_BATCH, &m.base, &r, &out, err),
        -EINVAL);
    for (int i = 0; i < 4; i++) {
        once_result_clear(&rs[i]);
    }
    once_result_clear(&r);
}
END_TEST

/* ------------------------------------------------------------------------
 * The hand reader of answers (answer_read.c) against protobuf-c: random
 * messages packed by protobuf-c are read back by hand with equal fields
 * (the reader's struct re-packs to the same bytes), and give the same
 * once_result as protobuf-c's unpack with client_read_body.
 * ---------------------------------------------------------------------- */

static uint64_t ar_x = 0x2545f4914f6cdd1dull;

static uint64_t ar_rand(void)
{
    ar_x ^= ar_x << 13;
    ar_x ^= ar_x >> 7;
    ar_x ^= ar_x << 17;
    return ar_x;
}

/* 0, small, or any 64-bit value (varints of every length). */
static uint64_t ar_value(void)
{
    switch (ar_rand() % 4) {
        case 0:
            return 0;
        case 1:
            return ar_rand() % 200;
        default:
            return ar_rand() >> (ar_rand() % 64);
    }
}

static uint8_t ar_bytes[4][300];

static ProtobufCBinaryData ar_blob(int slot, size_t max)
{
    size_t n = ar_rand() % 3 == 0 ? 0 : ar_rand() % (max + 1);

    if (ar_rand() % 2 == 0 && max >= ONCE_ID_LEN) {
        n = ONCE_ID_LEN; /* the ids' valid length, most of the time */
    }
    for (size_t i = 0; i < n; i++) {
        ar_bytes[slot][i] = (uint8_t)ar_rand();
    }
    return (ProtobufCBinaryData){n, n > 0 ? ar_bytes[slot] : NULL};
}

struct ar_msg
{
    Once__Rpc__Result res;
    Once__Rpc__OwnerToken tok;
    Once__Rpc__Attempt at[ONCE_ATTEMPTS_MAX];
    Once__Rpc__Attempt *atp[ONCE_ATTEMPTS_MAX];
    uint8_t at_bytes[ONCE_ATTEMPTS_MAX][2][130];
    char reason[258];
};

static void ar_result(struct ar_msg *m)
{
    Once__Rpc__Result *r = &m->res;
    size_t n;

    once__rpc__result__init(r);
    r->outcome = (Once__Rpc__Outcome)(ar_rand() % 10 == 0 ? ar_rand() % 20
                                                          : ar_rand() % 6);
    r->retry = ar_rand() % 2;
    r->request_id = ar_blob(0, 20);
    r->first_request_id = ar_blob(1, 20);
    r->first_index = ar_value();
    r->first_time_ms = ar_value();
    r->attempts_total = (uint32_t)ar_value();
    r->n_attempts = ar_rand() % (ONCE_ATTEMPTS_MAX + 1);
    r->attempts = r->n_attempts > 0 ? m->atp : NULL;
    for (size_t i = 0; i < r->n_attempts; i++) {
        Once__Rpc__Attempt *a = &m->at[i];

        once__rpc__attempt__init(a);
        a->request_id.len = ar_rand() % 4 == 0 ? ar_rand() % 20 : ONCE_ID_LEN;
        a->request_id.data = a->request_id.len > 0 ? m->at_bytes[i][0] : NULL;
        a->execution_id.len = ar_rand() % 130;
        a->execution_id.data =
            a->execution_id.len > 0 ? m->at_bytes[i][1] : NULL;
        memset(m->at_bytes[i][0], (int)i + 1, sizeof m->at_bytes[i][0]);
        memset(m->at_bytes[i][1], 'e', sizeof m->at_bytes[i][1]);
        a->index = ar_value();
        a->time_ms = ar_value();
        a->outcome = (Once__Rpc__Outcome)(ar_rand() % 6);
        a->retry = ar_rand() % 2;
        m->atp[i] = a;
    }
    r->has_owner_token = ar_rand() % 2;
    if (ar_rand() % 2 == 0) {
        once__rpc__owner_token__init(&m->tok);
        m->tok.group_id = (uint32_t)ar_value();
        m->tok.index = ar_value();
        m->tok.slot = (uint32_t)ar_value();
        r->owner_token = &m->tok;
    }
    r->result = ar_blob(2, 300);
    r->stored_error = ar_blob(3, 300);
    r->retry_after_ms = ar_value();
    n = ar_rand() % 3 == 0 ? ar_rand() % 258 : 0;
    memset(m->reason, 'r', n);
    m->reason[n] = '\0';
    r->reason = m->reason;
    r->kind = (Once__Rpc__Kind)(ar_rand() % 3);
    r->state = (Once__Rpc__State)(ar_rand() % 5);
    r->expires_ms = ar_value();
    r->lease_expires_ms = ar_value();
    r->owner_attempt = (uint32_t)ar_value();
    r->log_time_ms = ar_value();
    r->max_uses = (uint32_t)(ar_rand() % 4);
    r->uses = (uint32_t)(ar_rand() % 4);
    r->uses_left = (uint32_t)(ar_rand() % 4);
    r->sliding = ar_rand() % 2;
}

/* Two results equal, the result bytes by contents. */
static void ar_same(struct once_result *a, struct once_result *b)
{
    uint8_t *pa = a->result, *pb = b->result;

    ck_assert_uint_eq(a->result_len, b->result_len);
    ck_assert(a->result_len == 0 || memcmp(pa, pb, a->result_len) == 0);
    a->result = b->result = NULL;
    ck_assert(memcmp(a, b, sizeof *a) == 0);
    a->result = pa;
    b->result = pb;
}

START_TEST(answer_reader_is_protobuf_c)
{
    static struct ar_msg m;
    uint8_t buf[4096], again[4096];
    char err1[ERR_MSG_SIZE], err2[ERR_MSG_SIZE];
    struct once_result r1, r2;

    for (int i = 0; i < 3000; i++) {
        Once__Rpc__ClaimResponse cr = ONCE__RPC__CLAIM_RESPONSE__INIT;
        struct client_pb_result fast;
        Once__Rpc__ClaimResponse *ref;
        size_t n, inner;
        int rv1, rv2;
        bool over;

        ar_result(&m);
        /* A reason over once.h's bound is declined (protobuf-c's path
         * then refuses it); everything else is read. */
        over = strlen(m.reason) > 256;
        inner = once__rpc__result__pack(&m.res, buf);
        ck_assert(client_pb_result(buf, inner, &fast) == !over);
        if (!over) {
            ck_assert_uint_eq(once__rpc__result__pack(&fast.res, again), inner);
            ck_assert(memcmp(buf, again, inner) == 0);
        }

        cr.result = &m.res;
        n = once__rpc__claim_response__pack(&cr, buf);
        once_result_init(&r1);
        once_result_init(&r2);
        rv1 = client_read_body_fast(RPC_METHOD_CLAIM, buf, n, &r1, NULL, err1);
        ref = once__rpc__claim_response__unpack(NULL, n, buf);
        ck_assert_ptr_nonnull(ref);
        rv2 = client_read_body(RPC_METHOD_CLAIM, &ref->base, &r2, NULL, err2);
        if (over) {
            ck_assert_int_eq(rv1, 1);
            ck_assert_int_ne(rv2, 0);
        } else {
            ck_assert_int_eq(rv1, rv2);
            if (rv1 == 0) {
                ar_same(&r1, &r2);
            } else {
                ck_assert_str_eq(err1, err2);
            }
        }
        once__rpc__claim_response__free_unpacked(ref, NULL);
        once_result_clear(&r1);
        once_result_clear(&r2);
    }
}
END_TEST

/* What the reader declines; protobuf-c's path then decides. */
START_TEST(answer_reader_declines)
{
    static struct ar_msg m;
    struct client_pb_result fast;
    uint8_t buf[4096];
    size_t n;

    ar_x = 7;
    ar_result(&m);
    m.res.outcome = ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED;
    m.res.reason = m.reason;
    m.reason[0] = '\0';
    n = once__rpc__result__pack(&m.res, buf);
    ck_assert(client_pb_result(buf, n, &fast));
    /* an unknown field (99, varint 1) */
    buf[n] = ((99 << 3) & 0x7f) | 0x80;
    buf[n + 1] = 99 >> 4;
    buf[n + 2] = 1;
    ck_assert(!client_pb_result(buf, n + 3, &fast));
    /* a singular field twice (outcome) */
    buf[n] = 1 << 3;
    buf[n + 1] = 1;
    ck_assert(!client_pb_result(buf, n + 2, &fast));
    /* truncated */
    ck_assert(!client_pb_result(buf, n - 1, &fast));
    /* more attempts than once.h keeps; a reason over its bound */
    m.res.n_attempts = ONCE_ATTEMPTS_MAX;
    m.res.attempts = m.atp;
    for (size_t i = 0; i < ONCE_ATTEMPTS_MAX; i++) {
        once__rpc__attempt__init(&m.at[i]);
        m.atp[i] = &m.at[i];
    }
    n = once__rpc__result__pack(&m.res, buf);
    ck_assert(client_pb_result(buf, n, &fast));
    buf[n] = (8 << 3) | 2; /* one more, empty */
    buf[n + 1] = 0;
    ck_assert(!client_pb_result(buf, n + 2, &fast));
    memset(m.reason, 'x', 257);
    m.reason[257] = '\0';
    n = once__rpc__result__pack(&m.res, buf);
    ck_assert(!client_pb_result(buf, n, &fast));
    m.reason[256] = '\0';
    n = once__rpc__result__pack(&m.res, buf);
    ck_assert(client_pb_result(buf, n, &fast));
    ck_assert_uint_eq(strlen(fast.res.reason), 256);
    /* methods it does not read */
    ck_assert_int_eq(
        client_read_body_fast(RPC_METHOD_LOOKUP, buf, 0, NULL, NULL, NULL), 1);
}
END_TEST

/* Batch answers: random items, by hand and by protobuf-c, equal results. */
START_TEST(answer_reader_batch)
{
    static struct ar_msg ms[8];
    Once__Rpc__ClaimBatchItem it[8], *ip[8];
    struct once_result rs1[8], rs2[8], r1, r2;
    static uint8_t buf[65536];
    size_t idx[8];
    char err1[ERR_MSG_SIZE], err2[ERR_MSG_SIZE];

    for (int round = 0; round < 500; round++) {
        Once__Rpc__ClaimBatchResponse m = ONCE__RPC__CLAIM_BATCH_RESPONSE__INIT;
        Once__Rpc__ClaimBatchResponse *ref;
        size_t k = 1 + ar_rand() % 8, sent = k, n;
        struct client_batch_out b1 = {rs1, idx, 0}, b2 = {rs2, idx, 0};
        struct client_outputs o1, o2;
        int rv1, rv2;

        if (ar_rand() % 10 == 0) {
            sent = 1 + ar_rand() % 8; /* a count that may differ */
        }
        for (size_t i = 0; i < 8; i++) {
            idx[i] = 7 - i;
            once_result_init(&rs1[i]);
            once_result_init(&rs2[i]);
        }
        for (size_t i = 0; i < k; i++) {
            once__rpc__claim_batch_item__init(&it[i]);
            ip[i] = &it[i];
            if (ar_rand() % 3 != 0) {
                ar_result(&ms[i]);
                ms[i].res.outcome = (Once__Rpc__Outcome)(ar_rand() % 3 + 1);
                it[i].result = &ms[i].res;
            } else {
                it[i].status = (Once__Rpc__Status)(ar_rand() % 16);
                it[i].applied = (Once__Rpc__Applied)(ar_rand() % 3);
                it[i].error.len = ar_rand() % 40;
                it[i].error.data = it[i].error.len > 0 ? buf : NULL;
                if (ar_rand() % 4 == 0) {
                    ar_result(&ms[i]);
                    it[i].result = &ms[i].res;
                }
            }
            if (it[i].result != NULL) {
                ms[i].reason[256] = '\0'; /* else declined, see above */
            }
        }
        memset(buf, 'e', 64);
        m.n_items = k;
        m.items = ip;
        n = once__rpc__claim_batch_response__pack(&m, buf + 64);
        memset(&o1, 0, sizeof o1);
        memset(&o2, 0, sizeof o2);
        b1.n = b2.n = sent;
        o1.batch = &b1;
        o2.batch = &b2;
        once_result_init(&r1);
        once_result_init(&r2);
        rv1 = client_read_body_fast(RPC_METHOD_CLAIM_BATCH, buf + 64, n, &r1,
                                    &o1, err1);
        ref = once__rpc__claim_batch_response__unpack(NULL, n, buf + 64);
        ck_assert_ptr_nonnull(ref);
        rv2 = client_read_body(RPC_METHOD_CLAIM_BATCH, &ref->base, &r2, &o2,
                               err2);
        if (rv1 == 1) {
            /* declined: the caller's protobuf-c path decides */
            ck_assert_int_ne(rv2, 0);
        } else {
            ck_assert_int_eq(rv1, 0);
            ck_assert_int_eq(rv2, 0);
            ar_same(&r1, &r2);
            for (size_t i = 0; i < 8; i++) {
                ar_same(&rs1[i], &rs2[i]);
            }
        }
        once__rpc__claim_batch_response__free_unpacked(ref, NULL);
        for (size_t i = 0; i < 8; i++) {
            once_result_clear(&rs1[i]);
            once_result_clear(&rs2[i]);
        }
        once_result_clear(&r1);
        once_result_clear(&r2);
    }
}
END_TEST

/* Request ids come from a per-thread buffer (client.c): a forked child
 * must not hand out the ids its parent has yet to use, else two processes
 * send one id (a repeat reads as a retry of the other's call). */
START_TEST(request_ids_after_fork)
{
    uint8_t first[ONCE_ID_LEN], mine[ONCE_ID_LEN], childs[ONCE_ID_LEN];
    int fds[2], status;
    pid_t pid;

    ck_assert_int_eq(once_request_id_new(first), 0); /* the buffer filled */
    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        uint8_t id[ONCE_ID_LEN];

        if (once_request_id_new(id) != 0 ||
            write(fds[1], id, sizeof id) != (ssize_t)sizeof id) {
            _exit(1);
        }
        _exit(0);
    }
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], childs, sizeof childs),
                     (ssize_t)sizeof childs);
    close(fds[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(once_request_id_new(mine), 0);
    ck_assert(memcmp(mine, childs, ONCE_ID_LEN) != 0);
    ck_assert(memcmp(mine, first, ONCE_ID_LEN) != 0);
    /* Many in a row (past a refill) are all distinct from their neighbour. */
    for (int i = 0; i < 1000; i++) {
        memcpy(first, mine, ONCE_ID_LEN);
        ck_assert_int_eq(once_request_id_new(mine), 0);
        ck_assert(memcmp(mine, first, ONCE_ID_LEN) != 0);
    }
}
END_TEST

START_TEST(names)
{
    ck_assert_str_eq(once_outcome_name(ONCE_ACCEPTED), "ACCEPTED");
    ck_assert_str_eq(once_outcome_name(ONCE_NOT_OWNER), "NOT_OWNER");
    ck_assert_str_eq(once_outcome_name(ONCE_OUT_OF_SPACE),
                     "RESOURCE_EXHAUSTED");
    ck_assert_str_eq(once_outcome_name(ONCE_REFUSED_ARGUMENT),
                     "INVALID_ARGUMENT");
    ck_assert_str_eq(once_outcome_name(ONCE_FAILED_PRECONDITION),
                     "FAILED_PRECONDITION");
    ck_assert_str_eq(once_outcome_name((enum once_outcome)19), "UNKNOWN_VALUE");
    ck_assert_str_eq(once_status_name(ONCE_STATUS_UNAVAILABLE), "UNAVAILABLE");
    ck_assert_str_eq(once_status_name(ONCE_STATUS_DEADLINE_EXCEEDED),
                     "DEADLINE_EXCEEDED");
    ck_assert_str_eq(once_status_name((enum once_status)1), "UNKNOWN_VALUE");
    ck_assert_str_eq(once_applied_name(ONCE_APPLIED_FALSE), "false");
    ck_assert_str_eq(once_applied_name(ONCE_APPLIED_UNKNOWN), "unknown");
    ck_assert_str_eq(once_applied_name((enum once_applied)3), "UNKNOWN_VALUE");
    ck_assert_str_eq(once_role_name(ONCE_ROLE_VOTER), "VOTER");
    ck_assert_str_eq(once_role_name(ONCE_ROLE_STANDBY), "STANDBY");
    ck_assert_str_eq(once_role_name(ONCE_ROLE_SPARE), "SPARE");
    ck_assert_str_eq(once_raft_role_name(ONCE_RAFT_LEADER), "LEADER");
    ck_assert_str_eq(once_raft_role_name((enum once_raft_role)5),
                     "UNKNOWN_VALUE");
    ck_assert_str_eq(once_state_name(ONCE_STATE_PENDING), "PENDING");
    ck_assert_str_eq(once_state_name((enum once_state)6), "UNKNOWN_VALUE");
    for (int i = 0; i <= ONCE_FAILED_PRECONDITION; i++) {
        ck_assert_str_ne(once_outcome_name((enum once_outcome)i),
                         "UNKNOWN_VALUE");
    }
}
END_TEST

Suite *client_pure_suite(void)
{
    Suite *s = suite_create("client-pure");
    TCase *tc = tcase_create("pure");

    tcase_add_test(tc, decide_table);
    tcase_add_test(tc, status_mapping);
    tcase_add_test(tc, backoff_and_budget);
    tcase_add_test(tc, options_checks);
    tcase_add_test(tc, claim_checks);
    tcase_add_test(tc, other_checks);
    tcase_add_test(tc, claim_body);
    tcase_add_test(tc, claim_body_is_protobuf_c);
    tcase_add_test(tc, lookup_body_and_served_by);
    tcase_add_test(tc, admin_bodies);
    tcase_add_test(tc, result_every_field);
    tcase_add_test(tc, result_malformed);
    tcase_add_test(tc, status_answer);
    tcase_add_test(tc, config_answers);
    tcase_add_test(tc, backup_answers);
    tcase_add_test(tc, names);
    tcase_add_test(tc, batch_answers);
    tcase_add_test(tc, answer_reader_is_protobuf_c);
    tcase_add_test(tc, answer_reader_declines);
    tcase_add_test(tc, answer_reader_batch);
    tcase_add_test(tc, request_ids_after_fork);
    suite_add_tcase(s, tc);
    return s;
}
