/* server/authz.h: who may call what (docs/server.md, "Authorization").
 *
 * One table of rights per method, decided from the caller's identity (the
 * access file's match of its verified certificate, access.h) and the
 * request:
 *
 *   Claim, Complete, Release, Lookup   client within its scopes; admin
 *   ClaimBatch                         client, admin; each item then as
 *                                      a Claim in its own scope
 *   Status                             client (no state digest), monitor,
 *                                      member, admin
 *   MembersList                        monitor, member, admin
 *   MembersAdd                         member (a joining node), admin
 *   Transfer                           member (a node handing leadership
 *                                      on before it stops), admin
 *   ReadIndex                          member (a follower's read barrier),
 *                                      admin
 *   Forget, MembersRemove, MembersAssign, SnapshotTake,
 *   BackupOpen/Read/Close, QuotaSet, QuotaList, SchemaUpgrade
 *                                      admin
 *   GET /metrics (the HTTP port)       monitor, admin
 *
 * The table itself is `rights[]` in authz.c; this list and docs/server.md
 * ("Authorization") follow it.
 *
 * Without TLS there are no identities: every caller is admin (the node
 * listens on loopback only then). With TLS a caller whose certificate no
 * identity matches may call nothing. A refusal is ACCESS_E_DENIED with a
 * message naming the right that is missing; the service answers it
 * PERMISSION_DENIED, applied FALSE. Every refusal counts in
 * authz_denied_total.
 *
 * Loop thread only (the counter is a plain integer). */
#ifndef ONCE_SERVER_AUTHZ_H_
#define ONCE_SERVER_AUTHZ_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/frame.h"
#include "server/access.h"

/* Who calls. */
struct authz_caller
{
    bool anonymous; /* no TLS: no identity, every caller is admin */
    /* With TLS: the identity its certificate matched (borrowed from the
     * access file in force), or NULL: no access at all. */
    const struct access_identity *id;
};

/* What is asked. */
struct authz_req
{
    enum rpc_method method;
    const uint8_t *scope; /* record methods: the record's scope */
    size_t scope_len;
    bool state_digest; /* Status: with the state digest */
};

/* Who calls @r, from what its connection presented: @tls says whether the
 * node has identities at all; @peer is the connection's verified
 * certificate (NULL without TLS); @der/@der_len the envelope's caller_cert
 * (a forwarded call's original caller). The caller is the peer, or, with
 * caller_cert, the certificate it carries: honoured only when the peer
 * itself has the role member. 0 and *@out (borrowing from @a), or
 * ACCESS_E_DENIED / ACCESS_E_CERT with @why (ERR_MSG_SIZE), counted. */
int authz_resolve(const struct access *a,
                  bool tls,
                  X509 *peer,
                  const uint8_t *der,
                  size_t der_len,
                  struct authz_caller *out,
                  char *why);

/* Whether @cert may be a member (the Raft port, joins, forwarded calls):
 * the first identity of @a it matches has the role member. 0, or
 * ACCESS_E_DENIED with @why (ERR_MSG_SIZE). Not counted: a refused peer
 * is refused at its handshake. */
int authz_member_check(const struct access *a, X509 *cert, char *why);

/* 0: allowed. ACCESS_E_DENIED: refused, @why (ERR_MSG_SIZE) says which
 * right is missing, and the refusal is counted. */
int authz_check(const struct authz_caller *c,
                const struct authz_req *r,
                char *why);

/* Whether @c may read GET /metrics on the HTTP port: as authz_check, for
 * the right "metrics" (monitor, admin). */
int authz_check_metrics(const struct authz_caller *c, char *why);

/* Refusals since the process started (authz_check's, and those the
 * service counts with authz_count_denied: a forwarded identity refused). */
uint64_t authz_denied_total(void);
void authz_count_denied(void);

#endif /* ONCE_SERVER_AUTHZ_H_ */
