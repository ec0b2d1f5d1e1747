/* server/access.c: the access file and certificate matching (access.h).
 *
 * The file is parsed with jansson into a struct access of plain strings;
 * every bound is checked on the way, so matching a certificate never meets
 * a value it did not expect. A certificate is read once per match: its SAN
 * URIs and DNS names (one GENERAL_NAMES decode) and its subject CNs, each
 * as UTF-8 without an embedded NUL (a name with one is skipped: "a\0.evil"
 * must never compare equal to "a"). */
#include "server/access.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <openssl/x509v3.h>

#include "common/addr.h"

/* --- small checks ----------------------------------------------------------
 */

/* Printable ASCII, no space: what a URI (RFC 3986) may hold. */
static bool uri_ok(const char *s)
{
    const char *colon = strchr(s, ':');

    if (colon == NULL || colon == s) {
        return false;
    }
    for (const char *p = s; *p != '\0'; p++) {
        if (*p <= ' ' || *p > '~') {
            return false;
        }
    }
    return true;
}

static bool label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-';
}

/* Labels of 1..63 [A-Za-z0-9-], not starting or ending with '-'; the number
 * of labels into *@n. */
static bool dns_ok(const char *s, unsigned *n)
{
    size_t len = 0;

    *n = 0;
    if (strlen(s) > ACCESS_DNS_MAX || *s == '\0') {
        return false;
    }
    for (const char *p = s;; p++) {
        if (*p == '.' || *p == '\0') {
            if (len == 0 || len > 63 || p[-1] == '-' || p[-(long)len] == '-') {
                return false;
            }
            (*n)++;
            len = 0;
            if (*p == '\0') {
                return true;
            }
            continue;
        }
        if (!label_char(*p)) {
            return false;
        }
        len++;
    }
}

/* No control characters (UTF-8 beyond ASCII is allowed). */
static bool text_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p < ' ' || *p == 0x7f) {
            return false;
        }
    }
    return *s != '\0';
}

/* --- parsing -------------------------------------------------------------- */

static int invalid(char *errmsg, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int invalid(char *errmsg, const char *path, const char *fmt, ...)
{
    char why[ERR_MSG_SIZE];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    err_printf(errmsg, "%s: %s", path, why);
    return ACCESS_E_INVALID;
}

static int parse_match(struct access_identity *id,
                       const char *v,
                       const char *path,
                       char *errmsg)
{
    static const struct
    {
        const char *prefix;
        enum access_kind kind;
    } kinds[] = {{"uri:", ACCESS_MATCH_URI},
                 {"dns:", ACCESS_MATCH_DNS},
                 {"cn:", ACCESS_MATCH_CN}};
    const char *val = NULL;
    unsigned labels = 0;

    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].prefix);
        if (strncmp(v, kinds[i].prefix, n) == 0) {
            id->kind = kinds[i].kind;
            val = v + n;
        }
    }
    if (val == NULL) {
        return invalid(errmsg, path,
                       "want \"uri:...\", \"dns:...\" or "
                       "\"cn:...\"");
    }
    if (strlen(val) > ACCESS_MATCH_MAX) {
        return invalid(errmsg, path, "longer than %u bytes", ACCESS_MATCH_MAX);
    }
    switch (id->kind) {
        case ACCESS_MATCH_URI:
            if (!uri_ok(val)) {
                return invalid(errmsg, path,
                               "not a URI (scheme:rest, printable ASCII "
                               "without spaces)");
            }
            break;
        case ACCESS_MATCH_DNS:
            id->wildcard = strncmp(val, "*.", 2) == 0;
            if (!dns_ok(id->wildcard ? val + 2 : val, &labels) ||
                (id->wildcard && labels < 2)) {
                return invalid(errmsg, path,
                               "not a DNS name (labels of letters, digits "
                               "and '-'; at most one leading \"*.\" followed "
                               "by at least two labels)");
            }
            break;
        case ACCESS_MATCH_CN:
            if (!text_ok(val)) {
                return invalid(errmsg, path,
                               "empty or holds a control character");
            }
            break;
    }
    id->text = strdup(v);
    id->value = id->text != NULL ? id->text + (val - v) : NULL;
    return id->text != NULL ? 0 : ACCESS_E_NOMEM;
}

static int parse_role(struct access_identity *id,
                      const char *v,
                      const char *path,
                      char *errmsg)
{
    static const enum access_role roles[] = {
        ACCESS_ROLE_CLIENT, ACCESS_ROLE_ADMIN, ACCESS_ROLE_MONITOR,
        ACCESS_ROLE_MEMBER};

    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        if (strcmp(v, access_role_name(roles[i])) == 0) {
            id->role = roles[i];
            return 0;
        }
    }
    return invalid(errmsg, path, "want client, admin, monitor or member");
}

/* A scope pattern: 1..128 bytes of scope, then an optional '*'. */
static bool scope_pattern_ok(const char *p)
{
    size_t n = strlen(p);
    const char *star = strchr(p, '*');

    if (star != NULL && star != p + n - 1) {
        return false; /* '*' only at the end */
    }
    if (star != NULL) {
        n--;
    }
    return n <= ACCESS_SCOPE_MAX && (n > 0 || star != NULL) && text_ok(p);
}

static int parse_scopes(struct access_identity *id,
                        json_t *arr,
                        const char *path,
                        char *errmsg)
{
    char sub[192];
    char **scopes;
    size_t n;

    if (!json_is_array(arr)) {
        return invalid(errmsg, path, "want an array of strings");
    }
    n = json_array_size(arr);
    if (n == 0 || n > ACCESS_SCOPES_MAX) {
        return invalid(errmsg, path, "want 1..%u scopes (got %zu)",
                       ACCESS_SCOPES_MAX, n);
    }
    scopes = calloc(n, sizeof *scopes);
    if (scopes == NULL) {
        return ACCESS_E_NOMEM;
    }
    id->scopes = (const char *const *)scopes;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(arr, i);

        snprintf(sub, sizeof sub, "%.150s[%zu]", path, i);
        if (!json_is_string(s) || !scope_pattern_ok(json_string_value(s))) {
            return invalid(errmsg, sub,
                           "want a scope of 1..%u bytes without control "
                           "characters, optionally ending in '*' (no other "
                           "'*')",
                           ACCESS_SCOPE_MAX);
        }
        scopes[i] = strdup(json_string_value(s));
        if (scopes[i] == NULL) {
            return ACCESS_E_NOMEM;
        }
        id->n_scopes = i + 1;
    }
    return 0;
}

/* A member's Raft addresses: 1..ACCESS_RAFT_ADDRS_MAX of "IP:PORT" as the
 * member directory spells them (ADDR_PORT_CANONICAL), so that comparing
 * with a directory address is comparing bytes. */
static int parse_raft_addrs(struct access_identity *id,
                            json_t *arr,
                            const char *path,
                            char *errmsg)
{
    char sub[192];
    char **addrs;
    size_t n;

    if (!json_is_array(arr)) {
        return invalid(errmsg, path, "want an array of strings");
    }
    n = json_array_size(arr);
    if (n == 0 || n > ACCESS_RAFT_ADDRS_MAX) {
        return invalid(errmsg, path, "want 1..%u addresses (got %zu)",
                       ACCESS_RAFT_ADDRS_MAX, n);
    }
    addrs = calloc(n, sizeof *addrs);
    if (addrs == NULL) {
        return ACCESS_E_NOMEM;
    }
    id->raft_addrs = (const char *const *)addrs;
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(arr, i);
        const char *v = json_is_string(a) ? json_string_value(a) : NULL;

        snprintf(sub, sizeof sub, "%.150s[%zu]", path, i);
        if (v == NULL || strlen(v) > ACCESS_ADDR_MAX ||
            !addr_parse_ipv4(v, ADDR_PORT_CANONICAL, NULL)) {
            return invalid(errmsg, sub,
                           "want an IPv4 \"IP:PORT\" (port 1..65535, no "
                           "leading zero), as in the member directory");
        }
        addrs[i] = strdup(v);
        if (addrs[i] == NULL) {
            return ACCESS_E_NOMEM;
        }
        id->n_raft_addrs = i + 1;
    }
    return 0;
}

static int parse_identity(struct access_identity *id,
                          json_t *o,
                          size_t idx,
                          char *errmsg)
{
    char path[64], sub[192];
    json_t *match, *role, *scopes, *raft_addrs;
    const char *key;
    json_t *val;
    int rv;

    snprintf(path, sizeof path, "identities[%zu]", idx);
    if (!json_is_object(o)) {
        return invalid(errmsg, path, "want an object");
    }
    json_object_foreach(o, key, val)
    {
        (void)val;
        if (strcmp(key, "match") != 0 && strcmp(key, "role") != 0 &&
            strcmp(key, "scopes") != 0 && strcmp(key, "raft_addrs") != 0) {
            snprintf(sub, sizeof sub, "%s.%.40s", path, key);
            return invalid(errmsg, sub,
                           "unknown key (want match, role, scopes, "
                           "raft_addrs)");
        }
    }
    match = json_object_get(o, "match");
    role = json_object_get(o, "role");
    scopes = json_object_get(o, "scopes");
    raft_addrs = json_object_get(o, "raft_addrs");
    snprintf(sub, sizeof sub, "%s.match", path);
    if (!json_is_string(match)) {
        return invalid(errmsg, sub, "required, a string");
    }
    if ((rv = parse_match(id, json_string_value(match), sub, errmsg)) != 0) {
        return rv;
    }
    snprintf(sub, sizeof sub, "%s.role", path);
    if (!json_is_string(role)) {
        return invalid(errmsg, sub, "required, a string");
    }
    if ((rv = parse_role(id, json_string_value(role), sub, errmsg)) != 0) {
        return rv;
    }
    snprintf(sub, sizeof sub, "%s.raft_addrs", path);
    if (raft_addrs != NULL) {
        if (id->role != ACCESS_ROLE_MEMBER) {
            return invalid(errmsg, sub,
                           "only for role member (role %s speaks for no "
                           "member)",
                           access_role_name(id->role));
        }
        rv = parse_raft_addrs(id, raft_addrs, sub, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    snprintf(sub, sizeof sub, "%s.scopes", path);
    if (id->role != ACCESS_ROLE_CLIENT) {
        return scopes == NULL ? 0
                              : invalid(errmsg, sub,
                                        "only for role client (role %s "
                                        "has no scopes)",
                                        access_role_name(id->role));
    }
    if (scopes == NULL) {
        return invalid(errmsg, sub, "required for role client");
    }
    return parse_scopes(id, scopes, sub, errmsg);
}

static int parse_root(struct access *a, json_t *root, char *errmsg)
{
    json_t *ids;
    const char *key;
    json_t *val;
    int rv;

    if (!json_is_object(root)) {
        return invalid(errmsg, "(root)", "want an object");
    }
    json_object_foreach(root, key, val)
    {
        (void)val;
        if (strcmp(key, "identities") != 0) {
            char sub[64];
            snprintf(sub, sizeof sub, "%.40s", key);
            return invalid(errmsg, sub, "unknown key (want identities)");
        }
    }
    ids = json_object_get(root, "identities");
    if (!json_is_array(ids)) {
        return invalid(errmsg, "identities", "required, an array");
    }
    if (json_array_size(ids) > ACCESS_IDENTITIES_MAX) {
        return invalid(errmsg, "identities", "more than %u identities",
                       ACCESS_IDENTITIES_MAX);
    }
    a->ids = calloc(json_array_size(ids) + 1, sizeof *a->ids);
    if (a->ids == NULL) {
        return ACCESS_E_NOMEM;
    }
    for (size_t i = 0; i < json_array_size(ids); i++) {
        a->n = i + 1; /* access_free frees what this one holds, too */
        rv = parse_identity(&a->ids[i], json_array_get(ids, i), i, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

int access_parse(const char *json,
                 size_t len,
                 struct access **out,
                 char *errmsg)
{
    struct access *a;
    json_error_t jerr;
    json_t *root;
    int rv;

    *out = NULL;
    if (len > ACCESS_FILE_MAX) {
        err_printf(errmsg, "%zu bytes, over the limit of %u", len,
                   ACCESS_FILE_MAX);
        return ACCESS_E_TOOBIG;
    }
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        err_printf(errmsg, "line %d column %d: %s", jerr.line, jerr.column,
                   jerr.text);
        return ACCESS_E_SYNTAX;
    }
    a = calloc(1, sizeof *a);
    if (a == NULL) {
        json_decref(root);
        return ACCESS_E_NOMEM;
    }
    rv = parse_root(a, root, errmsg);
    json_decref(root);
    if (rv != 0) {
        if (rv == ACCESS_E_NOMEM) {
            err_printf(errmsg, "out of memory");
        }
        access_free(a);
        return rv;
    }
    *out = a;
    return 0;
}

int access_load(const char *path, struct access **out, char *errmsg)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;
    int rv;

    *out = NULL;
    if (f == NULL) {
        err_printf(errmsg, "%s: %s", path, strerror(errno));
        return ACCESS_E_IO;
    }
    /* One byte over the limit tells "too big" from "exactly the limit". */
    buf = malloc(ACCESS_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(f);
        err_printf(errmsg, "%s: out of memory", path);
        return ACCESS_E_NOMEM;
    }
    n = fread(buf, 1, ACCESS_FILE_MAX + 1, f);
    if (ferror(f)) {
        err_printf(errmsg, "%s: read error", path);
        rv = ACCESS_E_IO;
    } else {
        rv = access_parse(buf, n, out, errmsg);
        if (rv != 0) {
            err_wrapf(errmsg, "%s", path);
        }
    }
    fclose(f);
    free(buf);
    return rv;
}

void access_free(struct access *a)
{
    if (a == NULL) {
        return;
    }
    for (size_t i = 0; a->ids != NULL && i < a->n; i++) {
        struct access_identity *id = &a->ids[i];

        for (size_t j = 0; j < id->n_scopes; j++) {
            free((char *)id->scopes[j]);
        }
        free((void *)id->scopes);
        for (size_t j = 0; j < id->n_raft_addrs; j++) {
            free((char *)id->raft_addrs[j]);
        }
        free((void *)id->raft_addrs);
        free((char *)id->text);
    }
    free(a->ids);
    free(a);
}

const char *access_role_name(enum access_role r)
{
    switch (r) {
        case ACCESS_ROLE_CLIENT:
            return "client";
        case ACCESS_ROLE_ADMIN:
            return "admin";
        case ACCESS_ROLE_MONITOR:
            return "monitor";
        case ACCESS_ROLE_MEMBER:
            return "member";
    }
    return "unknown";
}

/* --- matching ------------------------------------------------------------- */

/* An ASN1 string as C text, or NULL if it holds a NUL (then it names
 * nothing). Borrowed from @s. */
static const char *asn1_text(const ASN1_STRING *s)
{
    const char *d = (const char *)ASN1_STRING_get0_data(s);
    int n = ASN1_STRING_length(s);

    if (d == NULL || n <= 0 || memchr(d, '\0', (size_t)n) != NULL) {
        return NULL;
    }
    /* IA5String data is NUL-terminated by OpenSSL. */
    return strlen(d) == (size_t)n ? d : NULL;
}

/* @name (a certificate's DNS SAN) against @id's dns value. A name holding
 * '*' is a wildcard certificate: it names no single identity and matches
 * nothing. */
static bool dns_matches(const struct access_identity *id, const char *name)
{
    const char *dot;

    if (strchr(name, '*') != NULL) {
        return false;
    }
    if (!id->wildcard) {
        return strcasecmp(name, id->value) == 0;
    }
    dot = strchr(name, '.');
    /* "*.x.org" is one label, then exactly "x.org". */
    return dot != NULL && dot != name &&
           strcasecmp(dot + 1, id->value + 2) == 0;
}

static bool san_matches(const struct access_identity *id,
                        const GENERAL_NAMES *sans)
{
    for (int i = 0; sans != NULL && i < sk_GENERAL_NAME_num(sans); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
        const char *t;

        if (id->kind == ACCESS_MATCH_URI && g->type == GEN_URI) {
            t = asn1_text(g->d.uniformResourceIdentifier);
            if (t != NULL && strcmp(t, id->value) == 0) {
                return true;
            }
        } else if (id->kind == ACCESS_MATCH_DNS && g->type == GEN_DNS) {
            t = asn1_text(g->d.dNSName);
            if (t != NULL && dns_matches(id, t)) {
                return true;
            }
        }
    }
    return false;
}

static bool cn_matches(const struct access_identity *id, X509 *cert)
{
    const X509_NAME *subj = X509_get_subject_name(cert);
    int i = -1;

    while (subj != NULL &&
           (i = X509_NAME_get_index_by_NID(subj, NID_commonName, i)) >= 0) {
        const ASN1_STRING *d =
            X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, i));
        unsigned char *utf8 = NULL;
        int n = ASN1_STRING_to_UTF8(&utf8, d);
        bool eq = n > 0 && (size_t)n == strlen(id->value) &&
                  memcmp(utf8, id->value, (size_t)n) == 0;

        OPENSSL_free(utf8);
        if (eq) {
            return true;
        }
    }
    return false;
}

const struct access_identity *access_match(const struct access *a, X509 *cert)
{
    GENERAL_NAMES *sans;
    const struct access_identity *hit = NULL;

    if (a == NULL || cert == NULL) {
        return NULL;
    }
    sans = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    for (size_t i = 0; i < a->n && hit == NULL; i++) {
        const struct access_identity *id = &a->ids[i];

        if (id->kind == ACCESS_MATCH_CN ? cn_matches(id, cert)
                                        : san_matches(id, sans)) {
            hit = id;
        }
    }
    GENERAL_NAMES_free(sans);
    return hit;
}

int access_cert_from_der(const uint8_t *der,
                         size_t len,
                         X509 **out,
                         char *errmsg)
{
    const unsigned char *p = der;
    X509 *x;

    *out = NULL;
    if (len == 0 || len > ACCESS_CERT_DER_MAX) {
        err_printf(errmsg, "caller_cert: want 1..%u bytes of DER (got %zu)",
                   ACCESS_CERT_DER_MAX, len);
        return ACCESS_E_CERT;
    }
    x = d2i_X509(NULL, &p, (long)len);
    if (x == NULL || p != der + len) {
        X509_free(x);
        err_printf(errmsg, "caller_cert: not one DER certificate");
        return ACCESS_E_CERT;
    }
    *out = x;
    return 0;
}

bool access_scope_allowed(const struct access_identity *id,
                          const uint8_t *scope,
                          size_t len)
{
    for (size_t i = 0; i < id->n_scopes; i++) {
        const char *p = id->scopes[i];
        size_t n = strlen(p);

        if (n > 0 && p[n - 1] == '*') {
            if (len >= n - 1 && memcmp(scope, p, n - 1) == 0) {
                return true;
            }
        } else if (len == n && memcmp(scope, p, n) == 0) {
            return true;
        }
    }
    return false;
}

/* --- a member and its certificate ----------------------------------------- */

int access_cert_ip(X509 *cert, const char *addr, char *why)
{
    struct sockaddr_in sa;
    char ip[INET_ADDRSTRLEN];

    /* The transport's own rule: raft_uv hands us what peers announce. */
    if (addr == NULL || !addr_parse_ipv4(addr, ADDR_PORT_STRTOUL, &sa)) {
        err_printf(why, "\"%.80s\" is not an IPv4 IP:PORT address",
                   addr != NULL ? addr : "");
        return ACCESS_E_DENIED;
    }
    if (X509_check_ip(cert, (const unsigned char *)&sa.sin_addr.s_addr,
                      sizeof sa.sin_addr.s_addr, 0) != 1) {
        (void)inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
        err_printf(why, "its certificate does not name %s (no IP SAN %s)", addr,
                   ip);
        return ACCESS_E_DENIED;
    }
    return 0;
}

int access_member_bind(const struct access_identity *id,
                       X509 *cert,
                       const char *raft_addr,
                       char *why)
{
    int rv;

    if (id == NULL || id->role != ACCESS_ROLE_MEMBER) {
        err_printf(why, "its certificate has no member identity");
        return ACCESS_E_DENIED;
    }
    if ((rv = access_cert_ip(cert, raft_addr, why)) != 0) {
        return rv;
    }
    if (id->n_raft_addrs == 0) {
        return 0;
    }
    for (size_t i = 0; i < id->n_raft_addrs; i++) {
        if (strcmp(id->raft_addrs[i], raft_addr) == 0) {
            return 0;
        }
    }
    err_printf(why,
               "identity \"%.80s\" may speak for the members at %zu Raft "
               "address(es) of the access file; %.80s is not one of them",
               id->text, id->n_raft_addrs, raft_addr);
    return ACCESS_E_DENIED;
}

int access_member_claim(const struct access_identity *id,
                        X509 *cert,
                        const struct access_member *known,
                        size_t n,
                        uint64_t rid,
                        const char *raft_addr,
                        char *why)
{
    const struct access_member *same_id = NULL, *same_addr = NULL;

    if (rid == 0) {
        err_printf(why, "id 0 is not a member id");
        return ACCESS_E_DENIED;
    }
    for (size_t i = 0; i < n; i++) {
        if (same_id == NULL && known[i].id == rid) {
            same_id = &known[i];
        }
        if (same_addr == NULL && strcmp(known[i].raft_addr, raft_addr) == 0) {
            same_addr = &known[i];
        }
    }
    if (same_id != NULL && strcmp(same_id->raft_addr, raft_addr) != 0) {
        err_printf(why, "the member directory pairs id %016llx with %.80s",
                   (unsigned long long)rid, same_id->raft_addr);
        return ACCESS_E_DENIED;
    }
    /* A node that does not know the id yet (it is new, or it lags) still
     * refuses a known member's address under another id. */
    if (same_id == NULL && same_addr != NULL) {
        err_printf(why, "%.80s is the Raft address of member %016llx",
                   raft_addr, (unsigned long long)same_addr->id);
        return ACCESS_E_DENIED;
    }
    return access_member_bind(id, cert, raft_addr, why);
}
