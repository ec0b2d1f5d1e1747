/* tls/tls: contexts and memory-BIO sessions, two sessions wired back to
 * back in memory (no sockets). The certificates are made once per suite
 * with scripts/make-certs.sh (the openssl CLI) in a temporary directory:
 * a CA with a node certificate (IP SAN 127.0.0.1) and a client, a second
 * CA with a client, an expired node certificate. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cert_dir.h"
#include "tls/tls.h"

Suite *tls_suite(void);

static void setup(void)
{
    cert_dir_open("tls");
    cert_dir_make("ca", "ca %s", cert_dir());
    cert_dir_make("ca", "node %s n1 127.0.0.1 n1.once.test", cert_dir());
    cert_dir_make("ca", "client %s ops", cert_dir());
    cert_dir_make("ca", "expired %s old 127.0.0.1", cert_dir());
    cert_dir_make("ca2", "ca %s ca2", cert_dir());
    cert_dir_make("ca2", "client %s intruder", cert_dir());
}

static void teardown(void)
{
    cert_dir_close();
}

static SSL_CTX *server_ctx(const char *cert)
{
    char c[64], k[64];
    struct tls_files f;
    SSL_CTX *ctx = NULL;
    char errmsg[ERR_MSG_SIZE];

    snprintf(c, sizeof c, "%s.pem", cert);
    snprintf(k, sizeof k, "%s.key", cert);
    f.cert = cert_dir_path(c);
    f.key = cert_dir_path(k);
    f.ca = cert_dir_path("ca.pem");
    f.peer_ca = NULL;
    ck_assert_int_eq(tls_ctx_server(&ctx, &f, errmsg), 0);
    return ctx;
}

static SSL_CTX *client_ctx(const char *ca, const char *cert)
{
    char c[64], k[64], a[64];
    struct tls_files f = {NULL, NULL, NULL, NULL};
    SSL_CTX *ctx = NULL;
    char errmsg[ERR_MSG_SIZE];

    snprintf(a, sizeof a, "%s.pem", ca);
    f.ca = cert_dir_path(a);
    if (cert != NULL) {
        snprintf(c, sizeof c, "%s.pem", cert);
        snprintf(k, sizeof k, "%s.key", cert);
        f.cert = cert_dir_path(c);
        f.key = cert_dir_path(k);
    }
    ck_assert_int_eq(tls_ctx_client(&ctx, &f, errmsg), 0);
    return ctx;
}

/* Move what @from wrote into @to. The feed's result. */
static int pump(struct tls_session *from, struct tls_session *to, char *err)
{
    uint8_t buf[TLS_FEED_MAX];
    size_t n;
    int rv = 0;

    while (rv == 0 && (n = tls_session_take(from, buf, sizeof buf)) > 0) {
        rv = tls_session_feed(to, buf, n, err);
    }
    return rv;
}

/* Run a handshake to its end: 0, or the first error (*who: 's'erver or
 * 'c'lient). */
static int handshake(struct tls_session *s, struct tls_session *c, char *who)
{
    char err[ERR_MSG_SIZE];

    for (int i = 0; i < 10 && !(s->done && c->done); i++) {
        int rv = pump(c, s, err);

        if (rv != 0) {
            *who = 's';
            (void)pump(s, c, err); /* the alert */
            return rv;
        }
        rv = pump(s, c, err);
        if (rv != 0) {
            *who = 'c';
            return rv;
        }
    }
    return s->done && c->done ? 0 : TLS_E_HANDSHAKE;
}

START_TEST(handshake_and_records_both_ways)
{
    SSL_CTX *sc = server_ctx("n1"), *cc = client_ctx("ca", "ops");
    struct tls_session s, c;
    char who = 0, err[ERR_MSG_SIZE], name[64];
    static uint8_t big[200000], got[200000];
    size_t have = 0;
    X509 *peer;

    ck_assert_int_eq(tls_session_init(&s, sc, true, NULL, err), 0);
    ck_assert_int_eq(tls_session_init(&c, cc, false, "127.0.0.1", err), 0);
    ck_assert_int_eq(handshake(&s, &c, &who), 0);
    ck_assert(c.confirmed); /* the server's ticket came */
    peer = tls_session_peer(&s);
    ck_assert_str_eq(tls_cert_name(peer, name, sizeof name), "ops");
    X509_free(peer);
    /* A large record train, client to server, in feed-sized pieces. */
    for (size_t i = 0; i < sizeof big; i++) {
        big[i] = (uint8_t)(i * 7);
    }
    ck_assert_int_eq(tls_session_seal(&c, big, sizeof big), 0);
    while (tls_session_pending(&c) > 0) {
        int n;

        ck_assert_int_eq(pump(&c, &s, err), 0);
        while ((n = tls_session_read(&s, got + have, sizeof got - have, err)) >
               0) {
            have += (size_t)n;
        }
        ck_assert_int_ge(n, 0);
    }
    ck_assert_uint_eq(have, sizeof big);
    ck_assert(memcmp(big, got, sizeof big) == 0);
    /* And back. */
    ck_assert_int_eq(tls_session_seal(&s, (const uint8_t *)"pong", 4), 0);
    ck_assert_int_eq(pump(&s, &c, err), 0);
    ck_assert_int_eq(tls_session_read(&c, got, sizeof got, err), 4);
    ck_assert(memcmp(got, "pong", 4) == 0);
    tls_session_free(&s);
    tls_session_free(&c);
    SSL_CTX_free(sc);
    SSL_CTX_free(cc);
}
END_TEST

/* The client's view of each refusal, and never "done" before it. */
static void refused(const char *ca,
                    const char *cert,
                    const char *host,
                    char want_who)
{
    SSL_CTX *sc = server_ctx("n1"), *cc = client_ctx(ca, cert);
    struct tls_session s, c;
    char who = 0, err[ERR_MSG_SIZE];

    ck_assert_int_eq(tls_session_init(&s, sc, true, NULL, err), 0);
    ck_assert_int_eq(tls_session_init(&c, cc, false, host, err), 0);
    ck_assert_int_eq(handshake(&s, &c, &who), TLS_E_HANDSHAKE);
    ck_assert_int_eq(who, want_who);
    /* A refused client must never think it may send. */
    ck_assert(!c.done);
    tls_session_free(&s);
    tls_session_free(&c);
    SSL_CTX_free(sc);
    SSL_CTX_free(cc);
}

START_TEST(refusals)
{
    refused("ca", "intruder", "127.0.0.1", 's'); /* another CA */
    refused("ca", NULL, "127.0.0.1", 's');       /* no certificate */
    refused("ca", "old", "127.0.0.1", 's');      /* expired */
    refused("ca2", "ops", "127.0.0.1", 'c');     /* server not trusted */
    refused("ca", "ops", "127.0.0.2", 'c');      /* not the server's IP */
    refused("ca", "ops", "n2.once.test", 'c');   /* not its name */
}
END_TEST

/* The HTTP port's sessions (tls_session_cert_optional): a client without
 * a certificate is served with no peer; one with a certificate is served
 * with it; one whose certificate does not verify is still refused. */
static int optional_handshake(const char *cert, X509 **peer)
{
    SSL_CTX *sc = server_ctx("n1"), *cc = client_ctx("ca", cert);
    struct tls_session s, c;
    char who = 0, err[ERR_MSG_SIZE];
    int rv;

    ck_assert_int_eq(tls_session_init(&s, sc, true, NULL, err), 0);
    tls_session_cert_optional(&s);
    ck_assert_int_eq(tls_session_init(&c, cc, false, "127.0.0.1", err), 0);
    rv = handshake(&s, &c, &who);
    *peer = rv == 0 ? tls_session_peer(&s) : NULL;
    if (rv == 0) {
        /* And the orderly end: the client reads the close_notify. */
        uint8_t b[16];

        tls_session_close_notify(&s);
        ck_assert_int_eq(pump(&s, &c, err), 0);
        ck_assert_int_eq(tls_session_read(&c, b, sizeof b, err), TLS_E_CLOSED);
    } else {
        ck_assert_int_eq(who, 's');
    }
    tls_session_free(&s);
    tls_session_free(&c);
    SSL_CTX_free(sc);
    SSL_CTX_free(cc);
    return rv;
}

START_TEST(optional_client_certificate)
{
    X509 *peer = NULL;
    char name[64];

    ck_assert_int_eq(optional_handshake(NULL, &peer), 0);
    ck_assert_ptr_null(peer);
    ck_assert_int_eq(optional_handshake("ops", &peer), 0);
    ck_assert_ptr_nonnull(peer);
    ck_assert_str_eq(tls_cert_name(peer, name, sizeof name), "ops");
    X509_free(peer);
    ck_assert_int_eq(optional_handshake("intruder", &peer), TLS_E_HANDSHAKE);
    ck_assert_int_eq(optional_handshake("old", &peer), TLS_E_HANDSHAKE);
}
END_TEST

START_TEST(plaintext_on_a_tls_port)
{
    SSL_CTX *sc = server_ctx("n1");
    struct tls_session s;
    char err[ERR_MSG_SIZE];
    static const uint8_t frame[] = {0, 0, 0, 4, 8, 1, 16, 6};

    ck_assert_int_eq(tls_session_init(&s, sc, true, NULL, err), 0);
    ck_assert_int_eq(tls_session_feed(&s, frame, sizeof frame, err),
                     TLS_E_NOT_TLS);
    ck_assert(strstr(err, "not a TLS handshake") != NULL);
    tls_session_free(&s);
    SSL_CTX_free(sc);
}
END_TEST

START_TEST(bad_files_are_refused)
{
    struct tls_files f = {cert_dir_path("n1.pem"), cert_dir_path("ops.key"),
                          cert_dir_path("ca.pem"), NULL};
    SSL_CTX *ctx = NULL;
    char err[ERR_MSG_SIZE];
    X509_STORE *st = NULL;

    ck_assert_int_eq(tls_ctx_server(&ctx, &f, err), TLS_E_CONFIG);
    ck_assert_msg(strstr(err, "key") != NULL, "%s", err);
    f.key = cert_dir_path("n1.key");
    f.ca = cert_dir_path("missing.pem");
    ck_assert_int_eq(tls_ctx_server(&ctx, &f, err), TLS_E_CONFIG);
    f.ca = cert_dir_path("ca.pem");
    f.cert = NULL;
    ck_assert_int_eq(tls_ctx_server(&ctx, &f, err), TLS_E_CONFIG);
    ck_assert_ptr_null(ctx);
    ck_assert_int_eq(tls_store_load(&st, cert_dir_path("nope.pem"), err),
                     TLS_E_CONFIG);
    ck_assert_ptr_null(st);
}
END_TEST

START_TEST(verify_against_a_store)
{
    SSL_CTX *sc = server_ctx("n1"), *cc = client_ctx("ca", "intruder");
    X509_STORE *ca = NULL, *ca2 = NULL;
    char err[ERR_MSG_SIZE];
    struct tls_slot slot = {NULL};
    SSL *probe;

    ck_assert_int_eq(tls_store_load(&ca, cert_dir_path("ca.pem"), err), 0);
    ck_assert_int_eq(tls_store_load(&ca2, cert_dir_path("ca2.pem"), err), 0);
    probe = SSL_new(cc);
    ck_assert_int_eq(
        tls_verify_against(ca2, SSL_get_certificate(probe), NULL, err), 0);
    ck_assert_int_eq(
        tls_verify_against(ca, SSL_get_certificate(probe), NULL, err),
        TLS_E_PEER);
    SSL_free(probe);
    /* A slot drops its reference on the old context when swapped. */
    SSL_CTX_up_ref(sc);
    tls_slot_set(&slot, sc);
    tls_slot_set(&slot, NULL);
    X509_STORE_free(ca);
    X509_STORE_free(ca2);
    SSL_CTX_free(sc);
    SSL_CTX_free(cc);
}
END_TEST

Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");

    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, handshake_and_records_both_ways);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, optional_client_certificate);
    tcase_add_test(tc, plaintext_on_a_tls_port);
    tcase_add_test(tc, bad_files_are_refused);
    tcase_add_test(tc, verify_against_a_store);
    suite_add_tcase(s, tc);
    return s;
}
