/* server/node_tls.h: TLS for one onced node (docs/rpc.md, docs/raft.md).
 *
 * With --tls-cert/--tls-key/--tls-ca the node holds four contexts, each in
 * a slot (tls/tls.h) that the ports read when a connection starts:
 *
 *   client_port  the client port's server side: the node's certificate;
 *                callers must present one from --tls-ca or --peer-tls-ca;
 *   raft_in      the Raft port's server side: peers from the peer CA only;
 *   raft_out     Raft connections to peers: the node's certificate, the
 *                peer's checked against the peer CA and its address's IP;
 *   out          forwarding and --join channels to other nodes' client
 *                ports: the node's certificate, theirs checked against
 *                either CA and the IP.
 *
 * The peer CA is --peer-tls-ca, or --tls-ca when it is not given.
 *
 * A member is a peer whose certificate chains to the peer CA and that the
 * member hook accepts (member_check). node.c sets the hook to the access
 * file's check (the first identity the certificate matches has the role
 * member, authz_member_check); TLS without an access file refuses to
 * start, so member_any below is only the value before that. It is asked for
 * each Raft link (both directions) and once per client-port connection (the
 * answer decides whether that connection may make forwarded calls).
 *
 * A member is also bound to its certificate (docs/security.md, "A member
 * is bound to its certificate"): node_tls_bind, the Raft transport's bind
 * hook, lets a member's certificate speak only as the member whose Raft id
 * and address the directory (or the Raft configuration) pairs and whose
 * address the certificate names (access_member_claim). It is asked when a
 * peer names its id (inbound) or raft dials one (outbound), and again for
 * every open link when the directory, the Raft configuration or the files
 * change (node_tls_tick notices; transport_recheck closes what it refuses
 * now). node_tls_bind_join applies the same rule to a member's MembersAdd.
 *
 * node_tls_reload (SIGHUP) makes all four contexts from the same files
 * again and swaps them in only if every one of them loaded: new
 * connections use the new certificates, established ones keep theirs.
 *
 * Loop thread only. */
#ifndef ONCE_SERVER_NODE_TLS_H_
#define ONCE_SERVER_NODE_TLS_H_

#include <stdbool.h>
#include <stdint.h>

#include "fsm/fsm.h"
#include "tls/tls.h"

struct server;

/* How often a node serving plaintext off loopback says so. */
#define NODE_TLS_WARN_MS 60000u

struct node_tls
{
    bool on; /* --tls-* given */
    struct tls_slot client_port;
    struct tls_slot raft_in;
    struct tls_slot raft_out;
    struct tls_slot out;
    const char *peer_ca;    /* the file members chain to */
    X509_STORE *peer_store; /* that file, loaded (owned; swapped on reload) */
    /* The member hook (see the top): 0, or a negative code with @why. */
    int (*member_check)(void *arg, X509 *cert, char *why);
    void *member_arg;
    bool insecure_public; /* plaintext on a non-loopback address */
    uint64_t bind_sig;    /* the directory and configuration last bound */
    bool rebind;          /* the files were reloaded: bind the links again */
    uint64_t warned_ms;   /* when that was last said (monotonic) */
};

/* Make the contexts from the flags (nothing without TLS). 0, or
 * TLS_E_CONFIG / TLS_E_NOMEM with @errmsg. */
int node_tls_init(struct server *s, char *errmsg);

/* Load the files again and swap the contexts in (the SIGHUP hook). 0, or
 * an error with @errmsg and the old contexts kept. */
int node_tls_reload(struct server *s, char *errmsg);

/* Drop the node's references (live sessions keep their own). */
void node_tls_close(struct node_tls *t);

/* Is @cert a member (peer CA, then the hook)? For rpc_server_config's
 * peer_member; @arg is the server. */
bool node_tls_peer_member(void *arg, X509 *cert, STACK_OF(X509) * chain);

/* The member hook as the Raft transport calls it; @arg is the server. */
int node_tls_member(void *arg, X509 *cert, char *why);

/* The bind hook as the Raft transport calls it (@arg is the server): may
 * @cert speak as Raft id @id at Raft address @addr? A certificate whose
 * identity is no longer a member is refused; then access_member_claim
 * decides over the members of the directory and the configuration. 0, or
 * ACCESS_E_DENIED with @why. */
int node_tls_bind(void *arg,
                  X509 *cert,
                  uint64_t id,
                  const char *addr,
                  char *why);

/* A MembersAdd from @cert (the caller's certificate: the peer's, or the
 * forwarded caller_cert), which has the role member, for @m: as
 * node_tls_bind for its id and Raft address, and the certificate names
 * the IP of its client address. An admin's add is not bound. 0, or
 * ACCESS_E_DENIED with @why (ERR_MSG_SIZE). */
int node_tls_bind_join(struct server *s,
                       X509 *cert,
                       const struct fsm_member *m,
                       char *why);

/* Is @addr ("IP:PORT") on 127.0.0.0/8? */
bool node_tls_loopback(const char *addr);

/* From the tick: the warning of a node serving plaintext off loopback,
 * every NODE_TLS_WARN_MS; and, when the directory, the configuration or
 * the files changed, the Raft links bound again (transport_recheck). */
void node_tls_tick(struct server *s, uint64_t now_ms);

#endif /* ONCE_SERVER_NODE_TLS_H_ */
