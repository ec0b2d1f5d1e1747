/* server/access.h: the access file (--access FILE) and the identity of a
 * verified certificate (docs/server.md, "Access file").
 *
 * The file is JSON:
 *
 *   {"identities": [
 *     {"match": "uri:spiffe://example.org/ingress/tenant-a", "role": "client",
 *      "scopes": ["tenant-a", "tenant-a-*"]},
 *     {"match": "dns:ops.example.org", "role": "admin"},
 *     {"match": "dns:*.once.example.org", "role": "member"},
 *     {"match": "cn:prometheus", "role": "monitor"}
 *   ]}
 *
 * `match` names a certificate's SAN URI ("uri:"), SAN DNS name ("dns:",
 * with at most one leading "*." that stands for exactly one label) or
 * subject CN ("cn:"). The identities are tried in file order: the first
 * that matches the certificate is the caller's; none is no access.
 * `scopes` (role client only, required there) are exact scope names or a
 * prefix followed by one trailing '*'. `raft_addrs` (role member only,
 * optional: {"match": "dns:n1.x.org", "role": "member", "raft_addrs":
 * ["10.0.0.1:7102"]}) are the Raft addresses ("IP:PORT", the member
 * directory's spelling) of the members this identity may speak as
 * (access_member_bind); without it, the certificate's IP SANs decide.
 *
 * Everything is bounded (ACCESS_* below) and checked when the file is
 * read: an unknown key, a bad value or a limit passed refuses the whole
 * file with a message naming its JSON path ("identities[2].scopes[0]: ...").
 *
 * Ownership: access_load/access_parse make a struct access owned by the
 * caller until access_free; the identities access_match returns are
 * borrowed from it. Pure (no loop): any thread, one struct per thread. */
#ifndef ONCE_SERVER_ACCESS_H_
#define ONCE_SERVER_ACCESS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "common/err.h"
#include "rpc/frame.h"

enum { ERR_ACCESS_CODES(ERR_ENUM) }; /* common/err.h */

#define ACCESS_FILE_MAX       (1u << 20) /* bytes of the file */
#define ACCESS_IDENTITIES_MAX 1024
#define ACCESS_SCOPES_MAX     256 /* per identity */
#define ACCESS_MATCH_MAX      512 /* bytes of a match value, after "uri:" */
#define ACCESS_DNS_MAX        253 /* a DNS name */
#define ACCESS_SCOPE_MAX      128 /* a scope (fsm's bound); +1 for '*' */
#define ACCESS_RAFT_ADDRS_MAX 64  /* per identity: the member directory's */
#define ACCESS_ADDR_MAX       64  /* bytes of an "IP:PORT" (the directory's) */
/* The DER of a forwarded caller's certificate (Envelope.caller_cert). */
#define ACCESS_CERT_DER_MAX RPC_CALLER_CERT_MAX

enum access_role {
    ACCESS_ROLE_CLIENT = 1, /* records within its scopes, Status */
    ACCESS_ROLE_ADMIN,      /* everything */
    ACCESS_ROLE_MONITOR,    /* Status, MembersList */
    ACCESS_ROLE_MEMBER,     /* the Raft port, joins, forwarded calls */
};

enum access_kind {
    ACCESS_MATCH_URI = 1,
    ACCESS_MATCH_DNS,
    ACCESS_MATCH_CN,
};

struct access_identity
{
    const char *text; /* the file's match string, e.g. "dns:*.x.org" */
    enum access_kind kind;
    const char *value; /* text after the "uri:"/"dns:"/"cn:" prefix */
    bool wildcard;     /* dns: value starts with "*." */
    enum access_role role;
    size_t n_scopes;
    const char *const *scopes; /* client: exact names or "prefix*" */
    size_t n_raft_addrs;
    const char *const *raft_addrs; /* member: "IP:PORT", canonical */
};

struct access
{
    size_t n;
    struct access_identity *ids;
};

/* Parse @len bytes of JSON at @json. 0 and *@out (owned), or
 * ACCESS_E_TOOBIG / ACCESS_E_SYNTAX / ACCESS_E_INVALID / ACCESS_E_NOMEM
 * with @errmsg (ERR_MSG_SIZE) naming the JSON path. */
int access_parse(const char *json,
                 size_t len,
                 struct access **out,
                 char *errmsg);

/* Read and parse @path (at most ACCESS_FILE_MAX bytes). As access_parse,
 * plus ACCESS_E_IO. @errmsg starts with the path. */
int access_load(const char *path, struct access **out, char *errmsg);

void access_free(struct access *a);

/* The first identity of @a that @cert (a verified certificate, borrowed)
 * matches, or NULL: no access. */
const struct access_identity *access_match(const struct access *a, X509 *cert);

/* Decode @len bytes of DER (at most ACCESS_CERT_DER_MAX) into a new X509
 * (the caller's to X509_free). 0, or ACCESS_E_CERT with @errmsg. */
int access_cert_from_der(const uint8_t *der,
                         size_t len,
                         X509 **out,
                         char *errmsg);

/* Whether @id (role client) may use scope @scope (@len bytes). */
bool access_scope_allowed(const struct access_identity *id,
                          const uint8_t *scope,
                          size_t len);

const char *access_role_name(enum access_role r);

/* Whether @cert (verified, borrowed) names the IP of @addr ("IP:PORT") in
 * an IP SAN: what a node that dials @addr checks at the TLS handshake.
 * 0, or ACCESS_E_DENIED with @why (ERR_MSG_SIZE). */
int access_cert_ip(X509 *cert, const char *addr, char *why);

/* Whether @cert, whose first matching identity is @id (role member), may
 * speak as the member whose Raft address is @raft_addr: the certificate
 * names its IP (access_cert_ip), and if @id lists raft_addrs, @raft_addr
 * is one of them, byte for byte (docs/security.md, "A member is bound to
 * its certificate"). 0, or ACCESS_E_DENIED with @why (ERR_MSG_SIZE). */
int access_member_bind(const struct access_identity *id,
                       X509 *cert,
                       const char *raft_addr,
                       char *why);

/* A member this node knows: from the member directory or the Raft
 * configuration (borrowed strings). */
struct access_member
{
    uint64_t id;
    const char *raft_addr;
};

/* Whether @cert (identity @id) may speak as Raft id @rid at Raft address
 * @raft_addr, given the @n members this node knows (@known): refused for
 * id 0, for an id @known pairs with another address, for an id @known
 * does not hold at the address of one it does, and as access_member_bind.
 * 0, or ACCESS_E_DENIED with @why (ERR_MSG_SIZE). */
int access_member_claim(const struct access_identity *id,
                        X509 *cert,
                        const struct access_member *known,
                        size_t n,
                        uint64_t rid,
                        const char *raft_addr,
                        char *why);

#endif /* ONCE_SERVER_ACCESS_H_ */
