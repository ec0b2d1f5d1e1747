/* server/access: the access file's parser and certificate matching, with
 * certificates the openssl CLI makes (access_certs.c). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access_certs.h"
#include "server/access.h"

Suite *access_suite(void);

static const char example[] =
    "{\"identities\": [\n"
    "  {\"match\": \"uri:spiffe://example.org/ingress/tenant-a\", "
    "\"role\": \"client\", \"scopes\": [\"tenant-a\", \"tenant-a/*\"]},\n"
    "  {\"match\": \"dns:ops.example.org\", \"role\": \"admin\"},\n"
    "  {\"match\": \"dns:*.once.example.org\", \"role\": \"member\"},\n"
    "  {\"match\": \"cn:prometheus\", \"role\": \"monitor\"}\n"
    "]}";

static struct access *parse_ok(const char *json)
{
    struct access *a = NULL;
    char msg[ERR_MSG_SIZE] = "";

    ck_assert_msg(access_parse(json, strlen(json), &a, msg) == 0, "%s: %s",
                  json, msg);
    return a;
}

/* @json is refused with @code and a message containing @want. */
static void parse_bad(const char *json, int code, const char *want)
{
    struct access *a = (struct access *)1;
    char msg[ERR_MSG_SIZE] = "";

    ck_assert_int_eq(access_parse(json, strlen(json), &a, msg), code);
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(msg, want) != NULL, "\"%s\" not in \"%s\"", want, msg);
}

START_TEST(parses_the_example)
{
    struct access *a = parse_ok(example);

    ck_assert_uint_eq(a->n, 4);
    ck_assert_int_eq(a->ids[0].kind, ACCESS_MATCH_URI);
    ck_assert_str_eq(a->ids[0].value, "spiffe://example.org/ingress/tenant-a");
    ck_assert_int_eq(a->ids[0].role, ACCESS_ROLE_CLIENT);
    ck_assert_uint_eq(a->ids[0].n_scopes, 2);
    ck_assert_str_eq(a->ids[0].scopes[1], "tenant-a/*");
    ck_assert_int_eq(a->ids[1].kind, ACCESS_MATCH_DNS);
    ck_assert(!a->ids[1].wildcard);
    ck_assert_int_eq(a->ids[1].role, ACCESS_ROLE_ADMIN);
    ck_assert(a->ids[2].wildcard);
    ck_assert_int_eq(a->ids[2].role, ACCESS_ROLE_MEMBER);
    ck_assert_int_eq(a->ids[3].kind, ACCESS_MATCH_CN);
    ck_assert_str_eq(a->ids[3].text, "cn:prometheus");
    ck_assert_int_eq(a->ids[3].role, ACCESS_ROLE_MONITOR);
    ck_assert_uint_eq(a->ids[3].n_scopes, 0);
    access_free(a);
    a = parse_ok("{\"identities\": []}");
    ck_assert_uint_eq(a->n, 0);
    access_free(a);
}
END_TEST

START_TEST(refusals_name_the_json_path)
{
    parse_bad("{\"identities\": [", ACCESS_E_SYNTAX, "line 1");
    parse_bad("[]", ACCESS_E_INVALID, "(root): want an object");
    parse_bad("{}", ACCESS_E_INVALID, "identities: required");
    parse_bad("{\"identities\": [], \"x\": 1}", ACCESS_E_INVALID,
              "x: unknown key");
    parse_bad("{\"identities\": [], \"identities\": []}", ACCESS_E_SYNTAX,
              "duplicate");
    parse_bad("{\"identities\": [1]}", ACCESS_E_INVALID,
              "identities[0]: want an object");
    parse_bad("{\"identities\": [{\"role\": \"admin\"}]}", ACCESS_E_INVALID,
              "identities[0].match: required");
    parse_bad("{\"identities\": [{\"match\": \"dns:a.b\"}]}", ACCESS_E_INVALID,
              "identities[0].role: required");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": \"root\"}]}",
        ACCESS_E_INVALID, "identities[0].role: want client");
    parse_bad(
        "{\"identities\": [{\"match\": \"ip:1.2.3.4\", \"role\": "
        "\"admin\"}]}",
        ACCESS_E_INVALID, "identities[0].match: want \"uri:");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"admin\", \"scope\": [\"x\"]}]}",
        ACCESS_E_INVALID, "identities[0].scope: unknown key");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"admin\", \"scopes\": [\"x\"]}]}",
        ACCESS_E_INVALID, "identities[0].scopes: only for role client");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"client\"}]}",
        ACCESS_E_INVALID, "identities[0].scopes: required");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"client\", \"scopes\": []}]}",
        ACCESS_E_INVALID, "identities[0].scopes: want 1..256");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"admin\"}, {\"match\": \"dns:c.d\", \"role\": \"client\", "
        "\"scopes\": [\"ok\", \"a*b\"]}]}",
        ACCESS_E_INVALID, "identities[1].scopes[1]: want a scope");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:c.d\", \"role\": "
        "\"client\", \"scopes\": [\"\"]}]}",
        ACCESS_E_INVALID, "identities[0].scopes[0]");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:c.d\", \"role\": "
        "\"client\", \"scopes\": [\"a\\u0001\"]}]}",
        ACCESS_E_INVALID, "identities[0].scopes[0]");
    parse_bad(
        "{\"identities\": [{\"match\": \"uri:a\\u0000b\", \"role\": "
        "\"admin\"}]}",
        ACCESS_E_SYNTAX, "");
}
END_TEST

START_TEST(match_values_are_checked)
{
    static const char *const bad_dns[] = {
        "dns:*.org",  "dns:*.*.a.org", "dns:a.*.org", "dns:a..org",
        "dns:-a.org", "dns:a-.org",    "dns:a_b.org", "dns:",
        "dns:a.org.", "dns:*a.b.org",  "dns:a b.org",
    };
    char json[600];

    for (size_t i = 0; i < sizeof bad_dns / sizeof bad_dns[0]; i++) {
        snprintf(json, sizeof json,
                 "{\"identities\": [{\"match\": \"%s\", \"role\": "
                 "\"admin\"}]}",
                 bad_dns[i]);
        parse_bad(json, ACCESS_E_INVALID, "not a DNS name");
    }
    parse_bad(
        "{\"identities\": [{\"match\": \"uri:no-scheme\", \"role\": "
        "\"admin\"}]}",
        ACCESS_E_INVALID, "not a URI");
    parse_bad(
        "{\"identities\": [{\"match\": \"uri:a:b c\", \"role\": "
        "\"admin\"}]}",
        ACCESS_E_INVALID, "not a URI");
    parse_bad(
        "{\"identities\": [{\"match\": \"cn:\", \"role\": "
        "\"admin\"}]}",
        ACCESS_E_INVALID, "empty");
}
END_TEST

START_TEST(limits)
{
    size_t cap = ACCESS_FILE_MAX + 64;
    char *big = malloc(cap);
    size_t o;

    /* identities over the count */
    o = (size_t)snprintf(big, cap, "{\"identities\": [");
    for (unsigned i = 0; i <= ACCESS_IDENTITIES_MAX; i++) {
        o += (size_t)snprintf(big + o, cap - o,
                              "%s{\"match\": \"cn:n%u\", \"role\": "
                              "\"monitor\"}",
                              i ? "," : "", i);
    }
    snprintf(big + o, cap - o, "]}");
    parse_bad(big, ACCESS_E_INVALID, "more than 1024 identities");
    /* a match value over its length */
    o = (size_t)snprintf(big, cap, "{\"identities\": [{\"match\": \"uri:a:");
    memset(big + o, 'x', ACCESS_MATCH_MAX);
    o += ACCESS_MATCH_MAX;
    snprintf(big + o, cap - o, "\", \"role\": \"admin\"}]}");
    parse_bad(big, ACCESS_E_INVALID, "longer than 512 bytes");
    /* a scope over 128 bytes (129 with the star is fine) */
    o = (size_t)snprintf(big, cap,
                         "{\"identities\": [{\"match\": \"cn:a\", \"role\": "
                         "\"client\", \"scopes\": [\"");
    memset(big + o, 's', ACCESS_SCOPE_MAX);
    o += ACCESS_SCOPE_MAX;
    snprintf(big + o, cap - o, "*\"]}]}");
    access_free(parse_ok(big));
    snprintf(big + o, cap - o, "s\"]}]}");
    parse_bad(big, ACCESS_E_INVALID, "scopes[0]");
    /* the file over its size */
    memset(big, ' ', cap);
    parse_bad("", ACCESS_E_SYNTAX, "");
    {
        struct access *a = NULL;
        char msg[ERR_MSG_SIZE];
        ck_assert_int_eq(access_parse(big, ACCESS_FILE_MAX + 1, &a, msg),
                         ACCESS_E_TOOBIG);
    }
    free(big);
}
END_TEST

START_TEST(load_from_a_file)
{
    char path[] = "/tmp/once-access-file-XXXXXX";
    int fd = mkstemp(path);
    struct access *a = NULL;
    char msg[ERR_MSG_SIZE];

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, example, strlen(example)),
                     (ssize_t)strlen(example));
    close(fd);
    ck_assert_int_eq(access_load(path, &a, msg), 0);
    ck_assert_uint_eq(a->n, 4);
    access_free(a);
    fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_eq(write(fd, "{\"identities\": 3}", 17), 17);
    close(fd);
    ck_assert_int_eq(access_load(path, &a, msg), ACCESS_E_INVALID);
    ck_assert_msg(strncmp(msg, path, strlen(path)) == 0, "%s", msg);
    unlink(path);
    ck_assert_int_eq(access_load(path, &a, msg), ACCESS_E_IO);
    ck_assert_ptr_null(a);
}
END_TEST

static const struct access_identity *match(const struct access *a,
                                           const char *cn,
                                           const char *san)
{
    X509 *x = test_cert(cn, san);
    const struct access_identity *id = access_match(a, x);

    X509_free(x);
    return id;
}

START_TEST(match_san_uri_dns_and_cn)
{
    struct access *a = parse_ok(example);

    ck_assert_ptr_eq(match(a, "t", "URI:spiffe://example.org/ingress/tenant-a"),
                     &a->ids[0]);
    /* a URI must be equal, not a prefix */
    ck_assert_ptr_null(
        match(a, "t", "URI:spiffe://example.org/ingress/tenant-ab"));
    ck_assert_ptr_eq(match(a, "t", "DNS:ops.example.org"), &a->ids[1]);
    ck_assert_ptr_eq(match(a, "t", "DNS:OPS.Example.ORG"), &a->ids[1]);
    /* one label for the wildcard, no more, no fewer */
    ck_assert_ptr_eq(match(a, "t", "DNS:n1.once.example.org"), &a->ids[2]);
    ck_assert_ptr_null(match(a, "t", "DNS:a.n1.once.example.org"));
    ck_assert_ptr_null(match(a, "t", "DNS:once.example.org"));
    /* a wildcard certificate names no one */
    ck_assert_ptr_null(match(a, "t", "DNS:*.once.example.org"));
    ck_assert_ptr_eq(match(a, "prometheus", NULL), &a->ids[3]);
    ck_assert_ptr_null(match(a, "prometheus2", NULL));
    /* the CN of a DNS identity is not its SAN */
    ck_assert_ptr_null(match(a, "ops.example.org", NULL));
    /* no match: no access */
    ck_assert_ptr_null(match(a, "nobody", "DNS:x.example.org,URI:a:b"));
    ck_assert_ptr_null(access_match(a, NULL));
    ck_assert_ptr_null(access_match(NULL, NULL));
    access_free(a);
}
END_TEST

START_TEST(first_match_wins)
{
    struct access *a = parse_ok(
        "{\"identities\": ["
        "{\"match\": \"cn:svc\", \"role\": \"monitor\"},"
        "{\"match\": \"dns:svc.example.org\", \"role\": \"admin\"}]}");

    /* both match: the first in the file is the caller */
    ck_assert_ptr_eq(match(a, "svc", "DNS:svc.example.org"), &a->ids[0]);
    ck_assert_ptr_eq(match(a, "other", "DNS:svc.example.org"), &a->ids[1]);
    access_free(a);
}
END_TEST

START_TEST(der_round_trip)
{
    X509 *x = test_cert("svc", "URI:spiffe://x/y");
    X509 *y = NULL;
    unsigned char *der = NULL;
    int n = i2d_X509(x, &der);
    uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t *more;
    char msg[ERR_MSG_SIZE];

    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(access_cert_from_der(der, (size_t)n, &y, msg), 0);
    ck_assert_int_eq(X509_cmp(x, y), 0);
    X509_free(y);
    ck_assert_int_eq(access_cert_from_der(junk, sizeof junk, &y, msg),
                     ACCESS_E_CERT);
    ck_assert_ptr_null(y);
    ck_assert_int_eq(access_cert_from_der(der, 0, &y, msg), ACCESS_E_CERT);
    ck_assert_int_eq(
        access_cert_from_der(der, ACCESS_CERT_DER_MAX + 1, &y, msg),
        ACCESS_E_CERT);
    /* trailing bytes after the certificate */
    more = malloc((size_t)n + 1);
    memcpy(more, der, (size_t)n);
    more[n] = 0;
    ck_assert_int_eq(access_cert_from_der(more, (size_t)n + 1, &y, msg),
                     ACCESS_E_CERT);
    free(more);
    OPENSSL_free(der);
    X509_free(x);
}
END_TEST

START_TEST(scopes_exact_and_prefix)
{
    struct access *a = parse_ok(example);
    const struct access_identity *id = &a->ids[0];

#define ALLOWED(s) access_scope_allowed(id, (const uint8_t *)(s), strlen(s))
    ck_assert(ALLOWED("tenant-a"));
    ck_assert(ALLOWED("tenant-a/orders"));
    ck_assert(ALLOWED("tenant-a/"));
    ck_assert(!ALLOWED("tenant-ab"));
    ck_assert(!ALLOWED("tenant-a-x"));
    ck_assert(!ALLOWED("tenant-b"));
    ck_assert(!ALLOWED("tenant-"));
    ck_assert(!ALLOWED("Tenant-a"));
    /* a NUL inside a scope is part of it */
    ck_assert(!access_scope_allowed(id, (const uint8_t *)"tenant-a\0x", 10));
#undef ALLOWED
    access_free(a);
}
END_TEST

START_TEST(raft_addrs_parse)
{
    struct access *a = parse_ok(
        "{\"identities\": [{\"match\": \"dns:n1.x.org\", \"role\": "
        "\"member\", \"raft_addrs\": [\"10.0.0.1:7102\", "
        "\"10.0.0.1:7202\"]}, {\"match\": \"dns:*.x.org\", "
        "\"role\": \"member\"}]}");

    ck_assert_uint_eq(a->ids[0].n_raft_addrs, 2);
    ck_assert_str_eq(a->ids[0].raft_addrs[1], "10.0.0.1:7202");
    ck_assert_uint_eq(a->ids[1].n_raft_addrs, 0);
    access_free(a);
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"admin\", \"raft_addrs\": [\"10.0.0.1:7102\"]}]}",
        ACCESS_E_INVALID,
        "identities[0].raft_addrs: only for role "
        "member");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"member\", \"raft_addrs\": []}]}",
        ACCESS_E_INVALID, "identities[0].raft_addrs: want 1..64");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"member\", \"raft_addrs\": \"10.0.0.1:7102\"}]}",
        ACCESS_E_INVALID, "identities[0].raft_addrs: want an array");
    /* one spelling: the directory's (no leading zero, no name) */
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"member\", \"raft_addrs\": [\"10.0.0.1:7102\", "
        "\"10.0.0.1:07102\"]}]}",
        ACCESS_E_INVALID, "identities[0].raft_addrs[1]: want an IPv4");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"member\", \"raft_addrs\": [\"n1.x.org:7102\"]}]}",
        ACCESS_E_INVALID, "identities[0].raft_addrs[0]: want an IPv4");
    parse_bad(
        "{\"identities\": [{\"match\": \"dns:a.b\", \"role\": "
        "\"member\", \"raft_addrs\": [7102]}]}",
        ACCESS_E_INVALID, "identities[0].raft_addrs[0]: want an IPv4");
}
END_TEST

/* Two member certificates: each speaks for the address it names, never
 * for the other's; a pin narrows it to the exact address. */
START_TEST(member_bound_to_its_certificate)
{
    struct access *a = parse_ok(
        "{\"identities\": ["
        "{\"match\": \"dns:n1.x.org\", \"role\": \"member\", "
        "\"raft_addrs\": [\"127.0.0.1:7102\"]},"
        "{\"match\": \"dns:*.x.org\", \"role\": \"member\"},"
        "{\"match\": \"dns:ops\", \"role\": \"admin\"}]}");
    X509 *n1 = test_cert("n1", "DNS:n1.x.org,IP:127.0.0.1");
    X509 *n2 = test_cert("n2", "DNS:n2.x.org,IP:127.0.0.2");
    X509 *ops = test_cert("ops", "DNS:ops,IP:127.0.0.2");
    const struct access_identity *i1 = access_match(a, n1);
    const struct access_identity *i2 = access_match(a, n2);
    char why[ERR_MSG_SIZE];

    ck_assert_ptr_eq(i1, &a->ids[0]);
    ck_assert_ptr_eq(i2, &a->ids[1]);
    /* each as itself */
    ck_assert_int_eq(access_member_bind(i1, n1, "127.0.0.1:7102", why), 0);
    ck_assert_int_eq(access_member_bind(i2, n2, "127.0.0.2:7102", why), 0);
    ck_assert_int_eq(access_member_bind(i2, n2, "127.0.0.2:9", why), 0);
    /* n2 naming n1's address: its certificate does not name that IP */
    ck_assert_int_eq(access_member_bind(i2, n2, "127.0.0.1:7102", why),
                     ACCESS_E_DENIED);
    ck_assert_msg(strstr(why, "no IP SAN 127.0.0.1") != NULL, "%s", why);
    ck_assert_int_eq(access_member_bind(i1, n1, "127.0.0.2:7102", why),
                     ACCESS_E_DENIED);
    /* n1 is pinned: the right IP at another port is not n1 */
    ck_assert_int_eq(access_member_bind(i1, n1, "127.0.0.1:7202", why),
                     ACCESS_E_DENIED);
    ck_assert_msg(strstr(why, "is not one of them") != NULL, "%s", why);
    /* not a member identity, or not an address */
    ck_assert_int_eq(
        access_member_bind(access_match(a, ops), ops, "127.0.0.2:7102", why),
        ACCESS_E_DENIED);
    ck_assert_int_eq(access_member_bind(NULL, n2, "127.0.0.2:7102", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(access_member_bind(i2, n2, "n2.x.org:7102", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(access_member_bind(i2, n2, "127.0.0.2", why),
                     ACCESS_E_DENIED);
    /* the client address of a join: its IP only */
    ck_assert_int_eq(access_cert_ip(n2, "127.0.0.2:7101", why), 0);
    ck_assert_int_eq(access_cert_ip(n2, "127.0.0.1:7101", why),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(access_cert_ip(n2, NULL, why), ACCESS_E_DENIED);
    X509_free(n1);
    X509_free(n2);
    X509_free(ops);
    access_free(a);
}
END_TEST

/* The whole rule of node_tls_bind over the members a node knows: member
 * b's certificate speaks as b and never as c, by c's address or by its
 * own; a new id may not take b's address. */
START_TEST(member_claims_with_two_certificates)
{
    struct access *a = parse_ok(
        "{\"identities\": [{\"match\": "
        "\"dns:*.x.org\", \"role\": \"member\"}]}");
    X509 *cb = test_cert("b", "DNS:b.x.org,IP:127.0.0.2");
    X509 *cc = test_cert("c", "DNS:c.x.org,IP:127.0.0.3");
    const struct access_identity *ib = access_match(a, cb);
    const struct access_identity *ic = access_match(a, cc);
    const struct access_member known[] = {{0xa, "127.0.0.1:7102"},
                                          {0xb, "127.0.0.2:7102"},
                                          {0xc, "127.0.0.3:7102"}};
    char why[ERR_MSG_SIZE];

#define CLAIM(id, cert, k, n, rid, addr) \
    access_member_claim(id, cert, k, n, rid, addr, why)
    ck_assert_ptr_nonnull(ib);
    ck_assert_int_eq(CLAIM(ib, cb, known, 3, 0xb, "127.0.0.2:7102"), 0);
    ck_assert_int_eq(CLAIM(ic, cc, known, 3, 0xc, "127.0.0.3:7102"), 0);
    /* b as c, at c's address: b's certificate does not name it */
    ck_assert_int_eq(CLAIM(ib, cb, known, 3, 0xc, "127.0.0.3:7102"),
                     ACCESS_E_DENIED);
    ck_assert_msg(strstr(why, "no IP SAN 127.0.0.3") != NULL, "%s", why);
    /* b as c, at its own address: the directory pairs c with another */
    ck_assert_int_eq(CLAIM(ib, cb, known, 3, 0xc, "127.0.0.2:7102"),
                     ACCESS_E_DENIED);
    ck_assert_msg(strstr(why,
                         "pairs id 000000000000000c with "
                         "127.0.0.3:7102") != NULL,
                  "%s", why);
    /* c as b, either way */
    ck_assert_int_eq(CLAIM(ic, cc, known, 3, 0xb, "127.0.0.2:7102"),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(CLAIM(ic, cc, known, 3, 0xb, "127.0.0.3:7102"),
                     ACCESS_E_DENIED);
    /* a new id at member b's address */
    ck_assert_int_eq(CLAIM(ib, cb, known, 3, 0xd, "127.0.0.2:7102"),
                     ACCESS_E_DENIED);
    ck_assert_msg(strstr(why,
                         "is the Raft address of member "
                         "000000000000000b") != NULL,
                  "%s", why);
    ck_assert_int_eq(CLAIM(ib, cb, known, 3, 0, "127.0.0.2:7102"),
                     ACCESS_E_DENIED);
    /* a new id at a new address its certificate names: a joining node */
    ck_assert_int_eq(CLAIM(ib, cb, known, 3, 0xd, "127.0.0.2:7202"), 0);
    /* a node that knows no one yet binds by the IP SAN alone */
    ck_assert_int_eq(CLAIM(ib, cb, NULL, 0, 0xc, "127.0.0.3:7102"),
                     ACCESS_E_DENIED);
    ck_assert_int_eq(CLAIM(ib, cb, NULL, 0, 0xb, "127.0.0.2:7102"), 0);
#undef CLAIM
    X509_free(cb);
    X509_free(cc);
    access_free(a);
}
END_TEST

Suite *access_suite(void)
{
    Suite *s = suite_create("access");
    TCase *tc = tcase_create("access");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, parses_the_example);
    tcase_add_test(tc, refusals_name_the_json_path);
    tcase_add_test(tc, match_values_are_checked);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, load_from_a_file);
    tcase_add_test(tc, match_san_uri_dns_and_cn);
    tcase_add_test(tc, first_match_wins);
    tcase_add_test(tc, der_round_trip);
    tcase_add_test(tc, scopes_exact_and_prefix);
    tcase_add_test(tc, raft_addrs_parse);
    tcase_add_test(tc, member_bound_to_its_certificate);
    tcase_add_test(tc, member_claims_with_two_certificates);
    suite_add_tcase(s, tc);
    return s;
}
