/* server/authz.c: the rights table (authz.h). */
#include "server/authz.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Role bits of a right. */
#define R_CLIENT  (1u << ACCESS_ROLE_CLIENT)
#define R_ADMIN   (1u << ACCESS_ROLE_ADMIN)
#define R_MONITOR (1u << ACCESS_ROLE_MONITOR)
#define R_MEMBER  (1u << ACCESS_ROLE_MEMBER)

struct right
{
    enum rpc_method method;
    const char *name; /* as the refusal names it */
    unsigned roles;
    bool scoped; /* a client only within its scopes */
};

static const struct right rights[] = {
    {RPC_METHOD_CLAIM, "claim", R_CLIENT | R_ADMIN, true},
    {RPC_METHOD_COMPLETE, "complete", R_CLIENT | R_ADMIN, true},
    {RPC_METHOD_RELEASE, "release", R_CLIENT | R_ADMIN, true},
    {RPC_METHOD_LOOKUP, "lookup", R_CLIENT | R_ADMIN, true},
    {RPC_METHOD_FORGET, "forget", R_ADMIN, false},
    {RPC_METHOD_STATUS, "status", R_CLIENT | R_MONITOR | R_MEMBER | R_ADMIN,
     false},
    /* A member also lists the members and hands leadership on: what a node
     * does about itself with its own certificate (a container's entrypoint
     * reads the member list before it joins; its preStop transfers
     * leadership away). A member can disrupt the cluster through the Raft
     * port anyway; these add nothing it could not do there. */
    {RPC_METHOD_MEMBERS_LIST, "members list", R_MONITOR | R_MEMBER | R_ADMIN,
     false},
    {RPC_METHOD_MEMBERS_ADD, "members add", R_MEMBER | R_ADMIN, false},
    {RPC_METHOD_MEMBERS_REMOVE, "members remove", R_ADMIN, false},
    {RPC_METHOD_MEMBERS_ASSIGN, "members assign", R_ADMIN, false},
    {RPC_METHOD_TRANSFER, "transfer", R_MEMBER | R_ADMIN, false},
    {RPC_METHOD_SNAPSHOT_TAKE, "snapshot take", R_ADMIN, false},
    /* A backup holds every tenant's records: admin only. */
    {RPC_METHOD_BACKUP_OPEN, "snapshot backup", R_ADMIN, false},
    {RPC_METHOD_BACKUP_READ, "snapshot backup", R_ADMIN, false},
    {RPC_METHOD_BACKUP_CLOSE, "snapshot backup", R_ADMIN, false},
    /* Quotas name every tenant's scopes and their usage: admin only. */
    {RPC_METHOD_QUOTA_SET, "quota set", R_ADMIN, false},
    {RPC_METHOD_QUOTA_LIST, "quota list", R_ADMIN, false},
    {RPC_METHOD_SCHEMA_UPGRADE, "schema upgrade", R_ADMIN, false},
    /* A follower's read barrier: an index, nothing of any record. */
    {RPC_METHOD_READ_INDEX, "read index", R_MEMBER | R_ADMIN, false},
    /* The call itself; each item is then checked with the Claim right in
     * its own scope (service_batch.c), so one item out of scope is refused
     * alone. */
    {RPC_METHOD_CLAIM_BATCH, "claim batch", R_CLIENT | R_ADMIN, false},
};

/* Not a method: GET /metrics on the HTTP port with TLS. */
static const struct right metrics_right = {RPC_METHOD_UNSPECIFIED, "metrics",
                                           R_MONITOR | R_ADMIN, false};

static uint64_t denied_total;

uint64_t authz_denied_total(void)
{
    return denied_total;
}

void authz_count_denied(void)
{
    denied_total++;
}

static const struct right *right_of(enum rpc_method m)
{
    for (size_t i = 0; i < sizeof rights / sizeof rights[0]; i++) {
        if (rights[i].method == m) {
            return &rights[i];
        }
    }
    return NULL;
}

/* The roles of @mask as "client, admin". */
static const char *roles_text(unsigned mask, char *buf, size_t cap)
{
    static const enum access_role all[] = {
        ACCESS_ROLE_CLIENT, ACCESS_ROLE_MONITOR, ACCESS_ROLE_MEMBER,
        ACCESS_ROLE_ADMIN};
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (mask & (1u << all[i])) {
            int k = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "",
                             access_role_name(all[i]));
            o += k > 0 && (size_t)k < cap - o ? (size_t)k : 0;
        }
    }
    return buf;
}

/* A scope for a message: printable ASCII kept, the rest as \xNN, cut. */
static const char *scope_text(const uint8_t *s, size_t n, char *buf, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (s[i] >= ' ' && s[i] < 0x7f && s[i] != '"' && s[i] != '\\') {
            buf[o++] = (char)s[i];
        } else {
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", s[i]);
        }
    }
    buf[o] = '\0';
    return buf;
}

static int deny(char *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int deny(char *why, const char *fmt, ...)
{
    va_list ap;

    denied_total++;
    if (why != NULL) {
        va_start(ap, fmt);
        vsnprintf(why, ERR_MSG_SIZE, fmt, ap);
        va_end(ap);
    }
    return ACCESS_E_DENIED;
}

int authz_resolve(const struct access *a,
                  bool tls,
                  X509 *peer,
                  const uint8_t *der,
                  size_t der_len,
                  struct authz_caller *out,
                  char *why)
{
    const struct access_identity *pid;
    X509 *orig = NULL;
    int rv;

    memset(out, 0, sizeof *out);
    pid = tls ? access_match(a, peer) : NULL;
    if (der_len > 0 && (pid == NULL || pid->role != ACCESS_ROLE_MEMBER)) {
        /* Only a member may speak for someone else: anyone else could name
         * any certificate it has seen. */
        return deny(why,
                    "permission denied: caller_cert is honoured only "
                    "from a connection whose peer has the role member");
    }
    if (!tls) {
        out->anonymous = true;
        return 0;
    }
    if (der_len == 0) {
        out->id = pid;
        return 0;
    }
    rv = access_cert_from_der(der, der_len, &orig, why);
    if (rv != 0) {
        denied_total++;
        return rv;
    }
    out->id = access_match(a, orig);
    X509_free(orig);
    return 0;
}

int authz_member_check(const struct access *a, X509 *cert, char *why)
{
    const struct access_identity *id = access_match(a, cert);

    if (id == NULL) {
        err_printf(why,
                   "no identity of the access file matches its "
                   "certificate");
        return ACCESS_E_DENIED;
    }
    if (id->role != ACCESS_ROLE_MEMBER) {
        err_printf(why, "identity \"%.80s\" has role %s, not member", id->text,
                   access_role_name(id->role));
        return ACCESS_E_DENIED;
    }
    return 0;
}

static int no_identity(char *why)
{
    return deny(why,
                "permission denied: no identity of the access file "
                "matches the caller's certificate (no rights at all)");
}

/* Does @id's role have the right @rt? */
static int role_allows(const struct access_identity *id,
                       const struct right *rt,
                       char *why)
{
    char roles[64];

    if (!(rt->roles & (1u << id->role))) {
        return deny(why,
                    "permission denied: the right \"%s\" is missing: "
                    "identity \"%.80s\" has role %s; \"%s\" is for %s",
                    rt->name, id->text, access_role_name(id->role), rt->name,
                    roles_text(rt->roles, roles, sizeof roles));
    }
    return 0;
}

int authz_check_metrics(const struct authz_caller *c, char *why)
{
    if (c->anonymous) {
        return 0; /* no TLS: every caller is admin */
    }
    return c->id == NULL ? no_identity(why)
                         : role_allows(c->id, &metrics_right, why);
}

int authz_check(const struct authz_caller *c,
                const struct authz_req *r,
                char *why)
{
    const struct right *rt = right_of(r->method);
    const struct access_identity *id = c->id;
    char sc[96];

    if (c->anonymous) {
        return 0; /* no TLS: every caller is admin */
    }
    if (id == NULL) {
        return no_identity(why);
    }
    if (rt == NULL) {
        return deny(why, "permission denied: method %s has no right",
                    rpc_method_name(r->method));
    }
    if (role_allows(id, rt, why) != 0) {
        return ACCESS_E_DENIED;
    }
    if (id->role == ACCESS_ROLE_CLIENT && r->method == RPC_METHOD_STATUS &&
        r->state_digest) {
        return deny(why,
                    "permission denied: the right \"status with the state "
                    "digest\" is missing: identity \"%.80s\" has role "
                    "client; it is for monitor, member, admin",
                    id->text);
    }
    if (rt->scoped && id->role == ACCESS_ROLE_CLIENT &&
        !access_scope_allowed(id, r->scope, r->scope_len)) {
        return deny(why,
                    "permission denied: the right \"%s\" in scope \"%s\" is "
                    "missing: identity \"%.80s\" is not given that scope",
                    rt->name, scope_text(r->scope, r->scope_len, sc, sizeof sc),
                    id->text);
    }
    return 0;
}
