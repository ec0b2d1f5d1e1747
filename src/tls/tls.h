/* tls/tls.h: TLS 1.3 for once's ports, OpenSSL 3 over memory BIOs.
 *
 * Its own folder because four layers use it: the RPC ports (rpc/conn.c),
 * the Raft transport (raft/transport.c), the HTTPS terminator
 * (http/http_tls.c) and libonce. It depends on common/ only.
 *
 * Two parts, neither of which touches a socket:
 *
 *   - contexts (struct tls_slot): made from PEM files at once by
 *     tls_ctx_server / tls_ctx_client, TLS 1.3 only, the peer's chain
 *     verified against the given CA files. A slot holds the current
 *     context of one role; tls_slot_set swaps it (SIGHUP reload). Each
 *     session holds its own reference on the context it started with
 *     (SSL_new takes one), so swapping never disturbs an established
 *     session and the old context is freed with its last session.
 *   - sessions (struct tls_session): one TLS session whose network side is
 *     a pair of memory BIOs. The owner (conn.c for RPC connections,
 *     raft/transport.c for the Raft port) reads ciphertext from its libuv
 *     stream and feeds it in (tls_session_feed), takes the plaintext out
 *     (tls_session_read), seals plaintext into ciphertext to write
 *     (tls_session_seal) and writes what the session produced
 *     (tls_session_take: handshake records, alerts). Nothing blocks.
 *
 * Bounds: the session keeps no more ciphertext than one feed (the owner
 * feeds at most one socket read, TLS_FEED_MAX bytes, and drains the
 * plaintext before feeding again) and no more output than one seal (the
 * owner takes it right away). Plaintext waits inside OpenSSL only up to
 * one record (16 KiB) beyond what the owner asked for.
 *
 * A server session refuses a peer whose first byte is not a TLS handshake
 * record (TLS_E_NOT_TLS): plaintext on a TLS port closes at once.
 *
 * Errors: TLS_E_* (common/err.h), with OpenSSL's reason in @errmsg
 * (ERR_MSG_SIZE; NULL allowed). The OpenSSL error queue is cleared by each
 * call that fails.
 *
 * Threads: contexts are immutable once made and may be shared; a session
 * and a slot belong to one thread (the loop's). */
#ifndef ONCE_TLS_TLS_H_
#define ONCE_TLS_TLS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/err.h"

enum { ERR_TLS_CODES(ERR_ENUM) };

/* Most ciphertext fed in one call. */
#define TLS_FEED_MAX (64u * 1024)

/* The default handshake deadline of every port, ms. */
#define TLS_HANDSHAKE_MS_DEFAULT 10000u

/* The files of one side. cert and key: this side's chain and key (PEM);
 * ca: the CA bundle peers are verified against; peer_ca: a second bundle
 * trusted too (NULL: none). */
struct tls_files
{
    const char *cert;
    const char *key;
    const char *ca;
    const char *peer_ca;
};

/* A server context: presents files->cert, requires a client certificate
 * that chains to files->ca or files->peer_ca (a peer without one fails the
 * handshake). 0 and *out (one reference, the caller's), or TLS_E_CONFIG /
 * TLS_E_NOMEM with @errmsg naming the file. */
int tls_ctx_server(SSL_CTX **out, const struct tls_files *files, char *errmsg);

/* A client context: verifies the server's chain against files->ca (and
 * files->peer_ca); presents files->cert/key when given (both or neither).
 * The server's name is checked per session (tls_session_init's @host). */
int tls_ctx_client(SSL_CTX **out, const struct tls_files *files, char *errmsg);

/* The current context of one role. ctx NULL: TLS off. */
struct tls_slot
{
    SSL_CTX *ctx;
};

/* Replace the slot's context with @ctx (the slot takes the caller's
 * reference) and drop its own reference on the old one. */
void tls_slot_set(struct tls_slot *s, SSL_CTX *ctx);

/* The CA bundle @ca_file as a store for tls_verify_against (one reference,
 * the caller's: X509_STORE_free). 0, or TLS_E_CONFIG / TLS_E_NOMEM. */
int tls_store_load(X509_STORE **out, const char *ca_file, char *errmsg);

/* Is @cert's chain (@chain: the rest the peer sent, may be NULL) valid
 * against @store? 0, or TLS_E_PEER / TLS_E_NOMEM with @errmsg. For a second
 * check after the handshake, e.g. that a forwarding node's certificate
 * comes from the peer CA. */
int tls_verify_against(X509_STORE *store,
                       X509 *cert,
                       STACK_OF(X509) * chain,
                       char *errmsg);

/* One session. Zeroed it is "none" (tls_session_free is a no-op). */
struct tls_session
{
    SSL *ssl;
    BIO *in;  /* network -> OpenSSL (owned by ssl) */
    BIO *out; /* OpenSSL -> network (owned by ssl) */
    bool server;
    bool saw_first;  /* server: the first byte was checked */
    bool handshaken; /* SSL_do_handshake completed */
    bool confirmed;  /* client: the server's ticket came (it accepted us) */
    /* The handshake is over and the peer verified; a client's also means
     * the server accepted the client's certificate (its post-handshake
     * ticket arrived), so a refused client never sends a byte of data. */
    bool done;
};

/* Start a session on @ctx (server or client side). @host: client side only,
 * the name the server's certificate must carry (an IPv4 literal is matched
 * against its IP SANs, a name against its DNS SANs); NULL: not checked.
 * The client's first flight is produced here: tls_session_take it. 0, or
 * TLS_E_NOMEM / TLS_E_CONFIG (a bad host). */
int tls_session_init(struct tls_session *t,
                     SSL_CTX *ctx,
                     bool server,
                     const char *host,
                     char *errmsg);

void tls_session_free(struct tls_session *t);

/* Server side, right after tls_session_init: ask for a client certificate
 * but do not require one (the HTTP port: probes come without). One that is
 * sent must still verify against the context's CA files, or the handshake
 * fails; none leaves tls_session_peer NULL. */
void tls_session_cert_optional(struct tls_session *t);

/* Queue a close_notify alert (for tls_session_take): the orderly end of a
 * session whose owner has nothing more to send. After the handshake. */
void tls_session_close_notify(struct tls_session *t);

/* Feed @n (<= TLS_FEED_MAX) bytes of ciphertext and advance the handshake.
 * 0 (t->done says whether it completed), or TLS_E_NOT_TLS,
 * TLS_E_HANDSHAKE (verification included), TLS_E_NOMEM. */
int tls_session_feed(struct tls_session *t,
                     const uint8_t *p,
                     size_t n,
                     char *errmsg);

/* Plaintext received: up to @cap bytes into @buf. The count (> 0), 0 when
 * nothing more is available, or TLS_E_CLOSED (the peer's close_notify) /
 * TLS_E_IO. After the handshake only. */
int tls_session_read(struct tls_session *t,
                     uint8_t *buf,
                     size_t cap,
                     char *errmsg);

/* Encrypt @n bytes of plaintext; the records are queued for
 * tls_session_take. 0, TLS_E_IO or TLS_E_NOMEM. After the handshake only. */
int tls_session_seal(struct tls_session *t, const uint8_t *p, size_t n);

/* Bytes waiting to be written to the network. */
size_t tls_session_pending(const struct tls_session *t);

/* Move up to @cap waiting bytes into @buf; returns how many. */
size_t tls_session_take(struct tls_session *t, uint8_t *buf, size_t cap);

/* The verified peer certificate, one reference for the caller (X509_free),
 * or NULL (no handshake yet, or a client side whose server sent none). */
X509 *tls_session_peer(const struct tls_session *t);

/* The certificate's subject CN into @buf (@cap bytes), for log lines; "-"
 * when it has none. */
const char *tls_cert_name(X509 *cert, char *buf, size_t cap);

#endif /* ONCE_TLS_TLS_H_ */
