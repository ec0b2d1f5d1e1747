/* tls/tls.c: see tls.h. */
#include "tls/tls.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "common/assert.h"

#define TLS_RECORD_HANDSHAKE 0x16 /* the content type of a ClientHello */

/* OpenSSL's first queued reason (or @fallback) into @errmsg; the queue is
 * cleared, so a later failure does not report this one. */
static void ssl_reason(char *errmsg, const char *what, const char *fallback)
{
    unsigned long e = ERR_get_error();
    char buf[200];

    if (e != 0) {
        ERR_error_string_n(e, buf, sizeof buf);
        err_printf(errmsg, "%s: %s", what, buf);
    } else {
        err_printf(errmsg, "%s: %s", what, fallback);
    }
    ERR_clear_error();
}

static int ctx_common(SSL_CTX *ctx,
                      const struct tls_files *f,
                      bool need_cert,
                      char *errmsg)
{
    /* TLS 1.3 only: no renegotiation, no legacy ciphers to configure. */
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) {
        ssl_reason(errmsg, "TLS 1.3", "not available"); /* UNTESTED */
        return TLS_E_CONFIG;
    }
    /* Buffers are released while a connection is idle (thousands of
     * client connections). */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (need_cert && (f->cert == NULL || f->key == NULL)) {
        err_printf(errmsg, "a certificate and its key are required");
        return TLS_E_CONFIG;
    }
    if ((f->cert == NULL) != (f->key == NULL)) {
        err_printf(errmsg,
                   "a certificate needs its key, and a key its "
                   "certificate");
        return TLS_E_CONFIG;
    }
    if (f->cert != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1) {
            ssl_reason(errmsg, f->cert, "cannot load the certificate");
            return TLS_E_CONFIG;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1) {
            ssl_reason(errmsg, f->key, "cannot load the key");
            return TLS_E_CONFIG;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            ssl_reason(errmsg, f->key, "does not match the certificate");
            return TLS_E_CONFIG;
        }
    }
    if (f->ca == NULL) {
        err_printf(errmsg, "a CA file is required");
        return TLS_E_CONFIG;
    }
    if (SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1) {
        ssl_reason(errmsg, f->ca, "cannot load the CA file");
        return TLS_E_CONFIG;
    }
    if (f->peer_ca != NULL && strcmp(f->peer_ca, f->ca) != 0 &&
        SSL_CTX_load_verify_locations(ctx, f->peer_ca, NULL) != 1) {
        ssl_reason(errmsg, f->peer_ca, "cannot load the CA file");
        return TLS_E_CONFIG;
    }
    return 0;
}

/* A client's session got the server's ticket: the server accepted our
 * certificate (it sends the ticket only after verifying it). Not kept. */
static int on_ticket(SSL *ssl, SSL_SESSION *sess)
{
    struct tls_session *t = SSL_get_app_data(ssl);

    (void)sess;
    if (t != NULL) {
        t->confirmed = true;
    }
    return 0; /* we did not take a reference on @sess */
}

static int ctx_make(SSL_CTX **out,
                    const struct tls_files *f,
                    bool server,
                    char *errmsg)
{
    SSL_CTX *ctx;
    int rv;

    *out = NULL;
    ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (ctx == NULL) {
        ssl_reason(errmsg, "SSL_CTX_new", "out of memory"); /* UNTESTED */
        return TLS_E_NOMEM;
    }
    rv = ctx_common(ctx, f, server, errmsg);
    if (rv != 0) {
        SSL_CTX_free(ctx);
        return rv;
    }
    if (server) {
        /* A client without a certificate has no identity: refused at the
         * handshake rather than served anonymously. One ticket, sent once
         * the client's certificate passed: the client's proof that it was
         * accepted (see tls_session.done); nothing ever resumes with it. */
        SSL_CTX_set_verify(
            ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        SSL_CTX_set_num_tickets(ctx, 1);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_session_cache_mode(
            ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
        SSL_CTX_sess_set_new_cb(ctx, on_ticket);
    }
    *out = ctx;
    return 0;
}

int tls_ctx_server(SSL_CTX **out, const struct tls_files *files, char *errmsg)
{
    return ctx_make(out, files, true, errmsg);
}

int tls_ctx_client(SSL_CTX **out, const struct tls_files *files, char *errmsg)
{
    return ctx_make(out, files, false, errmsg);
}

void tls_slot_set(struct tls_slot *s, SSL_CTX *ctx)
{
    SSL_CTX *old = s->ctx;

    /* The slot takes a reference it does not hold yet: the same context
     * again would be freed below while installed. */
    ONCE_ASSERT(ctx == NULL || ctx != old, "a slot gets a new reference");
    s->ctx = ctx;
    SSL_CTX_free(old); /* NULL-safe; live sessions keep their own ref */
}

int tls_store_load(X509_STORE **out, const char *ca_file, char *errmsg)
{
    X509_STORE *st = X509_STORE_new();

    *out = NULL;
    if (st == NULL) {
        err_printf(errmsg, "out of memory"); /* UNTESTED: malloc */
        return TLS_E_NOMEM;
    }
    if (X509_STORE_load_file(st, ca_file) != 1) {
        ssl_reason(errmsg, ca_file, "cannot load the CA file");
        X509_STORE_free(st);
        return TLS_E_CONFIG;
    }
    *out = st;
    return 0;
}

int tls_verify_against(X509_STORE *store,
                       X509 *cert,
                       STACK_OF(X509) * chain,
                       char *errmsg)
{
    X509_STORE_CTX *sc = X509_STORE_CTX_new();
    int rv = TLS_E_NOMEM;

    if (sc == NULL) {
        err_printf(errmsg, "out of memory"); /* UNTESTED: malloc */
        return rv;
    }
    if (X509_STORE_CTX_init(sc, store, cert, chain) != 1) {
        ssl_reason(errmsg, "verify", "cannot start"); /* UNTESTED */
        goto out;
    }
    if (X509_verify_cert(sc) != 1) {
        err_printf(errmsg, "not from the CA: %s",
                   X509_verify_cert_error_string(X509_STORE_CTX_get_error(sc)));
        ERR_clear_error();
        rv = TLS_E_PEER;
        goto out;
    }
    rv = 0;
out:
    X509_STORE_CTX_free(sc);
    return rv;
}

int tls_session_init(struct tls_session *t,
                     SSL_CTX *ctx,
                     bool server,
                     const char *host,
                     char *errmsg)
{
    memset(t, 0, sizeof *t);
    t->server = server;
    t->ssl = SSL_new(ctx);
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->in == NULL || t->out == NULL) {
        /* UNTESTED: malloc */
        ssl_reason(errmsg, "SSL_new", "out of memory");
        BIO_free(t->in);
        BIO_free(t->out);
        SSL_free(t->ssl);
        memset(t, 0, sizeof *t);
        return TLS_E_NOMEM;
    }
    /* An empty input BIO means "wait for more", not end of file. */
    BIO_set_mem_eof_return(t->in, -1);
    BIO_set_mem_eof_return(t->out, -1);
    SSL_set_bio(t->ssl, t->in, t->out);
    SSL_set_app_data(t->ssl, t);
    if (server) {
        SSL_set_accept_state(t->ssl);
        return 0;
    }
    SSL_set_connect_state(t->ssl);
    if (host != NULL) {
        struct in_addr ip;

        /* SSL_set1_host takes an IP literal as an IP SAN to match. */
        if (SSL_set1_host(t->ssl, host) != 1 ||
            (inet_pton(AF_INET, host, &ip) != 1 &&
             SSL_set_tlsext_host_name(t->ssl, host) != 1)) {
            ssl_reason(errmsg, host, "not a usable server name");
            tls_session_free(t);
            return TLS_E_CONFIG;
        }
    }
    (void)SSL_do_handshake(t->ssl); /* the ClientHello, into t->out */
    ERR_clear_error();
    return 0;
}

void tls_session_free(struct tls_session *t)
{
    SSL_free(t->ssl); /* and both BIOs */
    memset(t, 0, sizeof *t);
}

void tls_session_cert_optional(struct tls_session *t)
{
    SSL_set_verify(t->ssl, SSL_VERIFY_PEER, NULL);
}

void tls_session_close_notify(struct tls_session *t)
{
    if (t->ssl != NULL && t->handshaken) {
        (void)SSL_shutdown(t->ssl); /* 0: sent, the peer's not yet seen */
        ERR_clear_error();
    }
}

/* Why the handshake failed: the chain's verdict if that was it. */
static void handshake_reason(struct tls_session *t, char *errmsg)
{
    long v = SSL_get_verify_result(t->ssl);

    if (v != X509_V_OK) {
        err_printf(errmsg, "peer certificate refused: %s",
                   X509_verify_cert_error_string(v));
        ERR_clear_error();
        return;
    }
    ssl_reason(errmsg, "handshake", "the peer broke off");
}

static int handshake_error(struct tls_session *t, int rv, char *errmsg);
static int client_confirm(struct tls_session *t, char *errmsg);

int tls_session_feed(struct tls_session *t,
                     const uint8_t *p,
                     size_t n,
                     char *errmsg)
{
    int rv;

    if (n == 0) {
        return 0;
    }
    if (t->server && !t->saw_first) {
        t->saw_first = true;
        if (p[0] != TLS_RECORD_HANDSHAKE) {
            err_printf(errmsg,
                       "the first byte is 0x%02x, not a TLS "
                       "handshake (plaintext on a TLS port?)",
                       p[0]);
            return TLS_E_NOT_TLS;
        }
    }
    if (n > TLS_FEED_MAX || BIO_write(t->in, p, (int)n) != (int)n) {
        err_printf(errmsg, "cannot buffer %zu bytes", n); /* UNTESTED */
        return TLS_E_NOMEM;
    }
    if (t->done) {
        return 0;
    }
    if (!t->handshaken) {
        rv = SSL_do_handshake(t->ssl);
        if (rv != 1) {
            return handshake_error(t, rv, errmsg);
        }
        t->handshaken = true;
    }
    if (t->server) {
        t->done = true;
        return 0;
    }
    return client_confirm(t, errmsg);
}

/* A TLS 1.3 client finishes before the server has seen its certificate:
 * wait for the server's ticket (on_ticket), so that a refused certificate
 * fails the handshake before anything was sent. SSL_peek reads the ticket
 * record without consuming application data (none comes before it). */
static int client_confirm(struct tls_session *t, char *errmsg)
{
    uint8_t b;
    int rv;

    ONCE_ASSERT(!t->server && t->handshaken,
                "only a client waits for the ticket, after its handshake");
    rv = SSL_peek(t->ssl, &b, 1);

    if (t->confirmed || rv > 0) {
        t->done = true;
        return 0;
    }
    return handshake_error(t, rv, errmsg);
}

static int handshake_error(struct tls_session *t, int rv, char *errmsg)
{
    switch (SSL_get_error(t->ssl, rv)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
            return 0;
        default:
            handshake_reason(t, errmsg);
            return TLS_E_HANDSHAKE;
    }
}

int tls_session_read(struct tls_session *t,
                     uint8_t *buf,
                     size_t cap,
                     char *errmsg)
{
    int rv;

    ONCE_ASSERT(t->done, "plaintext is read after the handshake only");
    if (cap == 0) {
        return 0;
    }
    rv = SSL_read(t->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    if (rv > 0) {
        return rv;
    }
    switch (SSL_get_error(t->ssl, rv)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
            return 0;
        case SSL_ERROR_ZERO_RETURN:
            err_printf(errmsg, "the peer closed the TLS session");
            return TLS_E_CLOSED;
        default:
            ssl_reason(errmsg, "read", "record error");
            return TLS_E_IO;
    }
}

int tls_session_seal(struct tls_session *t, const uint8_t *p, size_t n)
{
    ONCE_ASSERT(t->ssl != NULL, "sealing needs a live session");
    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        int rv = SSL_write(t->ssl, p, chunk);

        if (rv <= 0) {
            ERR_clear_error();
            return TLS_E_IO;
        }
        p += rv;
        n -= (size_t)rv;
    }
    return 0;
}

size_t tls_session_pending(const struct tls_session *t)
{
    return t->out != NULL ? BIO_ctrl_pending(t->out) : 0;
}

size_t tls_session_take(struct tls_session *t, uint8_t *buf, size_t cap)
{
    int rv;

    if (cap == 0 || t->out == NULL) {
        return 0;
    }
    rv = BIO_read(t->out, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    return rv > 0 ? (size_t)rv : 0;
}

X509 *tls_session_peer(const struct tls_session *t)
{
    if (t->ssl == NULL || !t->done) {
        return NULL;
    }
    return SSL_get1_peer_certificate(t->ssl);
}

const char *tls_cert_name(X509 *cert, char *buf, size_t cap)
{
    X509_NAME *name;

    snprintf(buf, cap, "-");
    if (cert == NULL) {
        return buf;
    }
    name = X509_get_subject_name(cert);
    if (name != NULL &&
        X509_NAME_get_text_by_NID(name, NID_commonName, buf, (int)cap) > 0) {
        return buf;
    }
    snprintf(buf, cap, "-");
    return buf;
}
