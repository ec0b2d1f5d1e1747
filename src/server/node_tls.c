/* server/node_tls.c: see node_tls.h. */
#include "server/node_tls.h"

#include <string.h>

#include <arpa/inet.h>

#include "server/server.h"

/* The four contexts, made together so a reload swaps all or none. */
struct ctx_set
{
    SSL_CTX *client_port, *raft_in, *raft_out, *out;
    X509_STORE *peer_store;
};

static void set_free(struct ctx_set *c)
{
    SSL_CTX_free(c->client_port);
    SSL_CTX_free(c->raft_in);
    SSL_CTX_free(c->raft_out);
    SSL_CTX_free(c->out);
    X509_STORE_free(c->peer_store);
    memset(c, 0, sizeof *c);
}

static int set_load(const struct server_config *cfg,
                    struct ctx_set *c,
                    char *errmsg)
{
    const char *peer_ca =
        cfg->peer_tls_ca != NULL ? cfg->peer_tls_ca : cfg->tls_ca;
    struct tls_files both = {cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
                             cfg->peer_tls_ca};
    struct tls_files peers = {cfg->tls_cert, cfg->tls_key, peer_ca, NULL};
    int rv;

    memset(c, 0, sizeof *c);
    rv = tls_ctx_server(&c->client_port, &both, errmsg);
    if (rv == 0) {
        rv = tls_ctx_server(&c->raft_in, &peers, errmsg);
    }
    if (rv == 0) {
        rv = tls_ctx_client(&c->raft_out, &peers, errmsg);
    }
    if (rv == 0) {
        rv = tls_ctx_client(&c->out, &both, errmsg);
    }
    if (rv == 0) {
        rv = tls_store_load(&c->peer_store, peer_ca, errmsg);
    }
    if (rv != 0) {
        set_free(c);
    }
    return rv;
}

static void set_install(struct node_tls *t, struct ctx_set *c)
{
    tls_slot_set(&t->client_port, c->client_port);
    tls_slot_set(&t->raft_in, c->raft_in);
    tls_slot_set(&t->raft_out, c->raft_out);
    tls_slot_set(&t->out, c->out);
    X509_STORE_free(t->peer_store);
    t->peer_store = c->peer_store;
    memset(c, 0, sizeof *c); /* the slots own them now */
}

/* The hook's value until node.c installs the access file's check
 * (step_tls, before any port listens): every certificate from the peer CA
 * is a member (the transport and node_tls_peer_member have checked the
 * chain already). */
static int member_any(void *arg, X509 *cert, char *why)
{
    (void)arg;
    (void)cert;
    (void)why;
    return 0;
}

bool node_tls_loopback(const char *addr)
{
    char ip[INET_ADDRSTRLEN];
    const char *colon = strrchr(addr, ':');
    struct in_addr in;
    size_t n;

    if (colon == NULL || (n = (size_t)(colon - addr)) >= sizeof ip) {
        return false;
    }
    memcpy(ip, addr, n);
    ip[n] = '\0';
    return inet_pton(AF_INET, ip, &in) == 1 && (ntohl(in.s_addr) >> 24) == 127;
}

int node_tls_init(struct server *s, char *errmsg)
{
    struct node_tls *t = &s->tls;
    struct ctx_set c;
    int rv;

    memset(t, 0, sizeof *t);
    t->member_check = member_any;
    t->member_arg = s;
    t->insecure_public =
        s->cfg.tls_cert == NULL &&
        (!node_tls_loopback(s->cfg.client_addr) ||
         !node_tls_loopback(s->cfg.raft_addr) ||
         (s->cfg.client_listen != NULL &&
          !node_tls_loopback(s->cfg.client_listen)) ||
         (s->cfg.raft_listen != NULL &&
          !node_tls_loopback(s->cfg.raft_listen)) ||
         (s->cfg.http_addr != NULL && !node_tls_loopback(s->cfg.http_addr)));
    if (s->cfg.tls_cert == NULL) {
        return 0;
    }
    rv = set_load(&s->cfg, &c, errmsg);
    if (rv != 0) {
        return rv;
    }
    set_install(t, &c);
    t->on = true;
    t->peer_ca =
        s->cfg.peer_tls_ca != NULL ? s->cfg.peer_tls_ca : s->cfg.tls_ca;
    return 0;
}

int node_tls_reload(struct server *s, char *errmsg)
{
    struct ctx_set c;
    int rv;

    /* The access file reloads in the same SIGHUP (node_tick.c): the next
     * tick binds every Raft link again under whatever is in force then. */
    s->tls.rebind = true;
    if (!s->tls.on) {
        err_printf(errmsg, "no TLS: nothing to reload");
        return 0;
    }
    rv = set_load(&s->cfg, &c, errmsg);
    if (rv != 0) {
        return rv;
    }
    set_install(&s->tls, &c);
    err_printf(errmsg, "certificates reloaded from %s", s->cfg.tls_cert);
    return 0;
}

void node_tls_close(struct node_tls *t)
{
    tls_slot_set(&t->client_port, NULL);
    tls_slot_set(&t->raft_in, NULL);
    tls_slot_set(&t->raft_out, NULL);
    tls_slot_set(&t->out, NULL);
    X509_STORE_free(t->peer_store);
    t->peer_store = NULL;
}

int node_tls_member(void *arg, X509 *cert, char *why)
{
    struct server *s = arg;

    return s->tls.member_check(s->tls.member_arg, cert, why);
}

bool node_tls_peer_member(void *arg, X509 *cert, STACK_OF(X509) * chain)
{
    struct server *s = arg;
    char why[ERR_MSG_SIZE], name[128];

    if (!s->tls.on ||
        tls_verify_against(s->tls.peer_store, cert, chain, why) != 0 ||
        node_tls_member(s, cert, why) != 0) {
        log_kv(LOG_DEBUG, "client-port peer is not a member", "peer=%s",
               tls_cert_name(cert, name, sizeof name));
        return false;
    }
    return true;
}

/* --- a member bound to its certificate ------------------------------------
 */

/* The fsm the node reads: its own until replica_init takes it. */
static const struct fsm *dir_fsm(const struct server *s)
{
    return s->rep.fsm != NULL ? s->rep.fsm : s->fsm;
}

/* The members this node knows, into @out (at most @max): the directory's,
 * then the configuration's (it holds an id before this node has applied
 * its SetMember). Returns how many, or more than @max if they do not fit. */
static size_t known_members(const struct server *s,
                            struct access_member *out,
                            size_t max)
{
    const struct fsm *f = dir_fsm(s);
    struct replica_server sv;
    size_t n = 0;

    for (size_t i = 0; f != NULL && i < fsm_n_members(f); i++, n++) {
        if (n < max) {
            out[n].id = fsm_member(f, i)->id;
            out[n].raft_addr = fsm_member(f, i)->raft_addr;
        }
    }
    for (unsigned i = 0; i < replica_conf_n(&s->rep); i++, n++) {
        replica_conf_server(&s->rep, i, &sv);
        if (n < max) {
            out[n].id = sv.id;
            out[n].raft_addr = sv.address;
        }
    }
    return n;
}

int node_tls_bind(void *arg,
                  X509 *cert,
                  uint64_t id,
                  const char *addr,
                  char *why)
{
    struct server *s = arg;
    const struct access_identity *ident = access_match(s->access, cert);
    /* The directory's members, the configuration's servers (one refresh
     * spare beyond them, docs/raft.md) and room to spare. */
    struct access_member known[2 * FSM_MEMBERS_MAX + 2];
    size_t n = known_members(s, known, sizeof known / sizeof known[0]);

    if (ident == NULL || ident->role != ACCESS_ROLE_MEMBER) {
        /* Only after a reload: the member hook let it in. */
        err_printf(why,
                   "its certificate is not a member's in the access "
                   "file in force");
        return ACCESS_E_DENIED;
    }
    if (n > sizeof known / sizeof known[0]) {
        /* UNTESTED: a configuration is never this far from the directory;
         * fail closed rather than bind against part of it. */
        err_printf(why, "%zu members known, more than can be bound", n);
        return ACCESS_E_DENIED;
    }
    /* A retired id is not refused: the leader still sends it the barrier
     * that tells it it was removed (docs/raft.md, "Membership"), and its
     * address stays in the configuration until raft_remove. */
    return access_member_claim(ident, cert, known, n, id, addr, why);
}

int node_tls_bind_join(struct server *s,
                       X509 *cert,
                       const struct fsm_member *m,
                       char *why)
{
    int rv = node_tls_bind(s, cert, m->id, m->raft_addr, why);

    if (rv == 0) {
        rv = access_cert_ip(cert, m->client_addr, why);
    }
    return rv;
}

/* FNV-1a of what the bind hook reads: the directory's and the
 * configuration's ids and Raft addresses. */
static uint64_t bind_sig(const struct server *s)
{
    const struct fsm *f = dir_fsm(s);
    struct replica_server sv;
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; f != NULL && i < fsm_n_members(f); i++) {
        h = (h ^ fsm_member(f, i)->id) * 1099511628211ull;
        for (const char *p = fsm_member(f, i)->raft_addr; *p != '\0'; p++) {
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        }
    }
    for (unsigned i = 0; i < replica_conf_n(&s->rep); i++) {
        replica_conf_server(&s->rep, i, &sv);
        h = (h ^ sv.id) * 1099511628211ull;
        for (const char *p = sv.address; *p != '\0'; p++) {
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        }
    }
    return h;
}

static void rebind_tick(struct server *s)
{
    struct node_tls *t = &s->tls;
    uint64_t sig;

    if (!t->on || !(s->up & SERVER_UP_UVIO) || s->uvio.transport.impl == NULL) {
        return;
    }
    sig = bind_sig(s);
    if (sig == t->bind_sig && !t->rebind) {
        return;
    }
    t->bind_sig = sig;
    t->rebind = false;
    transport_recheck(&s->uvio.transport);
}

void node_tls_tick(struct server *s, uint64_t now_ms)
{
    struct node_tls *t = &s->tls;

    rebind_tick(s);
    if (!t->insecure_public) {
        return;
    }
    if (t->warned_ms != 0 && now_ms - t->warned_ms < NODE_TLS_WARN_MS) {
        return;
    }
    t->warned_ms = now_ms;
    log_kv(LOG_WARN,
           "serving without TLS on a non-loopback address (--insecure): "
           "anyone who reaches these ports can read and change the cluster",
           "client_addr=%s raft_addr=%s", s->cfg.client_addr, s->cfg.raft_addr);
}
