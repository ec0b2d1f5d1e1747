/* server/authz: the rights table, role by role and scope by scope, with
 * identities from an access file and certificates the openssl CLI makes:
 * what the service asks before it serves or forwards any call. */
#include <check.h>
#include <string.h>

#include "access_certs.h"
#include "server/authz.h"

Suite *authz_suite(void);

static const char file[] =
    "{\"identities\": ["
    "{\"match\": \"uri:spiffe://x/tenant-a\", \"role\": \"client\", "
    "\"scopes\": [\"tenant-a\", \"tenant-a/*\"]},"
    "{\"match\": \"uri:spiffe://x/tenant-b\", \"role\": \"client\", "
    "\"scopes\": [\"tenant-b\"]},"
    "{\"match\": \"dns:ops.example.org\", \"role\": \"admin\"},"
    "{\"match\": \"dns:*.once.example.org\", \"role\": \"member\"},"
    "{\"match\": \"cn:prometheus\", \"role\": \"monitor\"}]}";

static struct access *acc;

static void setup(void)
{
    char msg[ERR_MSG_SIZE];

    ck_assert_int_eq(access_parse(file, strlen(file), &acc, msg), 0);
}

static void teardown(void)
{
    access_free(acc);
    acc = NULL;
}

static const struct access_identity *ident(size_t i)
{
    return &acc->ids[i];
}
#define TENANT_A ident(0)
#define TENANT_B ident(1)
#define ADMIN    ident(2)
#define MEMBER   ident(3)
#define MONITOR  ident(4)

/* authz_check for @id calling @m on @scope ("" for none). */
static int check(const struct access_identity *id,
                 enum rpc_method m,
                 const char *scope,
                 char *why)
{
    struct authz_caller c = {.anonymous = false, .id = id};
    struct authz_req r = {.method = m,
                          .scope = (const uint8_t *)scope,
                          .scope_len = strlen(scope)};

    return authz_check(&c, &r, why);
}

static const enum rpc_method records[] = {RPC_METHOD_CLAIM, RPC_METHOD_COMPLETE,
                                          RPC_METHOD_RELEASE,
                                          RPC_METHOD_LOOKUP};
/* Not for a client, a monitor or a member (Transfer is admin's and a
 * member's: monitor_and_member). */
static const enum rpc_method admin_only[] = {
    RPC_METHOD_FORGET,         RPC_METHOD_MEMBERS_REMOVE,
    RPC_METHOD_MEMBERS_ASSIGN, RPC_METHOD_SNAPSHOT_TAKE,
    RPC_METHOD_BACKUP_OPEN,    RPC_METHOD_BACKUP_READ,
    RPC_METHOD_BACKUP_CLOSE,   RPC_METHOD_QUOTA_SET,
    RPC_METHOD_QUOTA_LIST,     RPC_METHOD_SCHEMA_UPGRADE};
#define N(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(tenant_within_its_scopes_only)
{
    char why[ERR_MSG_SIZE];

    for (size_t i = 0; i < N(records); i++) {
        ck_assert_int_eq(check(TENANT_A, records[i], "tenant-a", why), 0);
        ck_assert_int_eq(check(TENANT_A, records[i], "tenant-a/orders", why),
                         0);
        ck_assert_int_eq(check(TENANT_B, records[i], "tenant-b", why), 0);
        /* B's keys: no claim, lookup, complete or release by A */
        ck_assert_int_eq(check(TENANT_A, records[i], "tenant-b", why),
                         ACCESS_E_DENIED);
        ck_assert_msg(strstr(why, "in scope \"tenant-b\" is missing") != NULL,
                      "%s", why);
        ck_assert_int_eq(check(TENANT_B, records[i], "tenant-a/orders", why),
                         ACCESS_E_DENIED);
        ck_assert_int_eq(check(TENANT_A, records[i], "tenant-ab", why),
                         ACCESS_E_DENIED);
    }
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_CLAIM, "tenant-b", why),
                     ACCESS_E_DENIED);
    ck_assert_str_eq(why,
                     "permission denied: the right \"claim\" in scope "
                     "\"tenant-b\" is missing: identity "
                     "\"uri:spiffe://x/tenant-a\" is not given that "
                     "scope");
    ck_assert_msg(strstr(why, "identity \"uri:spiffe://x/tenant-a\"") != NULL,
                  "%s", why);
    /* an odd byte in a refused scope is escaped in the message */
    {
        struct authz_caller c = {.id = TENANT_A};
        struct authz_req r = {.method = RPC_METHOD_LOOKUP,
                              .scope = (const uint8_t *)"b\n\"",
                              .scope_len = 3};
        ck_assert_int_eq(authz_check(&c, &r, why), ACCESS_E_DENIED);
        ck_assert_msg(strstr(why, "\"b\\x0a\\x22\"") != NULL, "%s", why);
    }
}
END_TEST

START_TEST(client_cannot_administer)
{
    char why[ERR_MSG_SIZE];

    /* forget, even in its own scope, and every membership call */
    for (size_t i = 0; i < N(admin_only); i++) {
        ck_assert_int_eq(check(TENANT_A, admin_only[i], "tenant-a", why),
                         ACCESS_E_DENIED);
        ck_assert_msg(strstr(why, "is for admin") != NULL, "%s", why);
    }
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_FORGET, "tenant-a", why),
                     ACCESS_E_DENIED);
    ck_assert_str_eq(why,
                     "permission denied: the right \"forget\" is "
                     "missing: identity \"uri:spiffe://x/tenant-a\" has "
                     "role client; \"forget\" is for admin");
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_MEMBERS_ADD, "", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_MEMBERS_LIST, "", why),
                     ACCESS_E_DENIED);
    /* status, but not the state digest */
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_STATUS, "", why), 0);
    {
        struct authz_caller c = {.id = TENANT_A};
        struct authz_req r = {.method = RPC_METHOD_STATUS,
                              .state_digest = true};
        ck_assert_int_eq(authz_check(&c, &r, why), ACCESS_E_DENIED);
        ck_assert_msg(strstr(why, "status with the state digest") != NULL, "%s",
                      why);
    }
}
END_TEST

/* ClaimBatch: the call is a client's or an admin's whatever the scopes
 * (the scope of a batch is its items'); each item is then checked with the
 * Claim right in its own scope (service_batch.c), above. */
START_TEST(claim_batch_right)
{
    char why[ERR_MSG_SIZE];

    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_CLAIM_BATCH, "", why), 0);
    ck_assert_int_eq(check(TENANT_B, RPC_METHOD_CLAIM_BATCH, "", why), 0);
    ck_assert_int_eq(check(ADMIN, RPC_METHOD_CLAIM_BATCH, "", why), 0);
    ck_assert_int_eq(check(MONITOR, RPC_METHOD_CLAIM_BATCH, "", why),
                     ACCESS_E_DENIED);
    ck_assert_msg(strstr(why, "\"claim batch\"") != NULL, "%s", why);
    ck_assert_int_eq(check(MEMBER, RPC_METHOD_CLAIM_BATCH, "", why),
                     ACCESS_E_DENIED);
}
END_TEST

START_TEST(admin_can_everything)
{
    char why[ERR_MSG_SIZE];
    struct authz_caller c = {.id = ADMIN};
    struct authz_req r = {.method = RPC_METHOD_STATUS, .state_digest = true};

    for (int m = RPC_METHOD_CLAIM; m <= RPC_METHOD_LAST; m++) {
        ck_assert_int_eq(check(ADMIN, (enum rpc_method)m, "tenant-b", why), 0);
        ck_assert_int_eq(check(ADMIN, (enum rpc_method)m, "anything", why), 0);
    }
    ck_assert_int_eq(authz_check(&c, &r, why), 0);
}
END_TEST

START_TEST(monitor_and_member)
{
    char why[ERR_MSG_SIZE];
    struct authz_caller c = {.id = MONITOR};
    struct authz_req r = {.method = RPC_METHOD_STATUS, .state_digest = true};

    ck_assert_int_eq(check(MONITOR, RPC_METHOD_STATUS, "", why), 0);
    ck_assert_int_eq(authz_check(&c, &r, why), 0);
    ck_assert_int_eq(check(MONITOR, RPC_METHOD_MEMBERS_LIST, "", why), 0);
    ck_assert_int_eq(check(MONITOR, RPC_METHOD_CLAIM, "tenant-a", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(check(MONITOR, RPC_METHOD_MEMBERS_ADD, "", why),
                     ACCESS_E_DENIED);
    /* a member joins (MembersAdd), reads status and the member list and
     * hands leadership on (its own operations); nothing else */
    ck_assert_int_eq(check(MEMBER, RPC_METHOD_MEMBERS_ADD, "", why), 0);
    ck_assert_int_eq(check(MEMBER, RPC_METHOD_STATUS, "", why), 0);
    ck_assert_int_eq(check(MEMBER, RPC_METHOD_MEMBERS_LIST, "", why), 0);
    ck_assert_int_eq(check(MEMBER, RPC_METHOD_TRANSFER, "", why), 0);
    /* a follower asks the leader for a read index; nobody else needs to */
    ck_assert_int_eq(check(MEMBER, RPC_METHOD_READ_INDEX, "", why), 0);
    ck_assert_int_eq(check(MONITOR, RPC_METHOD_READ_INDEX, "", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_READ_INDEX, "", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(check(MONITOR, RPC_METHOD_TRANSFER, "", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_TRANSFER, "", why),
                     ACCESS_E_DENIED);
    for (size_t i = 0; i < N(records); i++) {
        ck_assert_int_eq(check(MEMBER, records[i], "tenant-a", why),
                         ACCESS_E_DENIED);
    }
    for (size_t i = 0; i < N(admin_only); i++) {
        ck_assert_int_eq(check(MEMBER, admin_only[i], "", why),
                         ACCESS_E_DENIED);
        ck_assert_int_eq(check(MONITOR, admin_only[i], "", why),
                         ACCESS_E_DENIED);
    }
}
END_TEST

START_TEST(no_identity_no_access_no_tls_all_access)
{
    char why[ERR_MSG_SIZE];
    struct authz_caller anon = {.anonymous = true};
    struct authz_req r = {.method = RPC_METHOD_FORGET};

    for (int m = RPC_METHOD_CLAIM; m <= RPC_METHOD_LAST; m++) {
        ck_assert_int_eq(check(NULL, (enum rpc_method)m, "tenant-a", why),
                         ACCESS_E_DENIED);
        r.method = (enum rpc_method)m;
        ck_assert_int_eq(authz_check(&anon, &r, why), 0);
    }
    ck_assert_int_eq(check(NULL, RPC_METHOD_STATUS, "", why), ACCESS_E_DENIED);
    ck_assert_msg(strstr(why, "no identity of the access file") != NULL, "%s",
                  why);
}
END_TEST

START_TEST(refusals_are_counted)
{
    char why[ERR_MSG_SIZE];
    uint64_t before = authz_denied_total();

    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_CLAIM, "tenant-a", why), 0);
    ck_assert_uint_eq(authz_denied_total(), before);
    ck_assert_int_eq(check(TENANT_A, RPC_METHOD_CLAIM, "tenant-b", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(check(MONITOR, RPC_METHOD_FORGET, "", why),
                     ACCESS_E_DENIED);
    ck_assert_uint_eq(authz_denied_total(), before + 2);
}
END_TEST

/* authz_resolve: the caller's identity from the connection's certificate,
 * or from the caller_cert a member forwards. */
static unsigned char *der_of(X509 *x, size_t *len)
{
    unsigned char *der = NULL;
    int n = i2d_X509(x, &der);

    ck_assert_int_gt(n, 0);
    *len = (size_t)n;
    return der;
}

START_TEST(forwarded_identity)
{
    X509 *member = test_cert("node", "DNS:n1.once.example.org");
    X509 *tenant = test_cert("t", "URI:spiffe://x/tenant-a");
    X509 *nobody = test_cert("nobody", NULL);
    struct authz_caller who;
    char why[ERR_MSG_SIZE];
    size_t tlen, mlen;
    unsigned char *tder = der_of(tenant, &tlen);
    unsigned char *mder = der_of(member, &mlen);
    uint64_t before = authz_denied_total();

    /* a direct call: the peer is the caller */
    ck_assert_int_eq(authz_resolve(acc, true, tenant, NULL, 0, &who, why), 0);
    ck_assert_ptr_eq(who.id, TENANT_A);
    ck_assert(!who.anonymous);
    ck_assert_int_eq(authz_resolve(acc, true, nobody, NULL, 0, &who, why), 0);
    ck_assert_ptr_null(who.id);
    /* forwarded by a member: authorized as the original caller, never as
     * the member */
    ck_assert_int_eq(authz_resolve(acc, true, member, tder, tlen, &who, why),
                     0);
    ck_assert_ptr_eq(who.id, TENANT_A);
    ck_assert_int_eq(check(who.id, RPC_METHOD_CLAIM, "tenant-b", why),
                     ACCESS_E_DENIED);
    /* a member forwarding a join of another member */
    ck_assert_int_eq(authz_resolve(acc, true, member, mder, mlen, &who, why),
                     0);
    ck_assert_ptr_eq(who.id, MEMBER);
    /* caller_cert from anyone but a member is refused: a tenant cannot
     * claim to speak for the admin */
    ck_assert_int_eq(authz_resolve(acc, true, tenant, mder, mlen, &who, why),
                     ACCESS_E_DENIED);
    ck_assert_msg(strstr(why,
                         "only from a connection whose peer has the "
                         "role member") != NULL,
                  "%s", why);
    ck_assert_int_eq(authz_resolve(acc, true, nobody, tder, tlen, &who, why),
                     ACCESS_E_DENIED);
    /* without TLS nobody is a member either */
    ck_assert_int_eq(authz_resolve(acc, false, NULL, tder, tlen, &who, why),
                     ACCESS_E_DENIED);
    /* a member sending garbage */
    ck_assert_int_eq(
        authz_resolve(acc, true, member, (const uint8_t *)"xx", 2, &who, why),
        ACCESS_E_CERT);
    ck_assert_uint_eq(authz_denied_total(), before + 5);
    /* without TLS: anonymous admin */
    ck_assert_int_eq(authz_resolve(acc, false, NULL, NULL, 0, &who, why), 0);
    ck_assert(who.anonymous);
    ck_assert_int_eq(authz_resolve(NULL, false, NULL, NULL, 0, &who, why), 0);
    ck_assert(who.anonymous);
    OPENSSL_free(tder);
    OPENSSL_free(mder);
    X509_free(member);
    X509_free(tenant);
    X509_free(nobody);
}
END_TEST

Suite *authz_suite(void)
{
    Suite *s = suite_create("authz");
    TCase *tc = tcase_create("authz");

    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, tenant_within_its_scopes_only);
    tcase_add_test(tc, client_cannot_administer);
    tcase_add_test(tc, admin_can_everything);
    tcase_add_test(tc, claim_batch_right);
    tcase_add_test(tc, monitor_and_member);
    tcase_add_test(tc, no_identity_no_access_no_tls_all_access);
    tcase_add_test(tc, refusals_are_counted);
    tcase_add_test(tc, forwarded_identity);
    suite_add_tcase(s, tc);
    return s;
}
