/* server/httpapi_parse.c: JSON request bodies and record paths of the
 * HTTP/JSON API into RPC request messages (httpapi_parse.h).
 *
 * Each method has a table of the fields it takes; a field's kind says how
 * its JSON value is read. Everything that is refused names the field. */
#include "server/httpapi_parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/assert.h"
#include "common/text.h"
#include "fsm/fsm.h"

/* How a duration field reads: the same units as oncectl (text.h). */
#define DURATION_MAX_MS (365ull * 24 * 3600 * 1000)

enum field_kind {
    K_BYTES,    /* a string, its bytes (no NUL) */
    K_HEX16,    /* request_id, cluster_id: 32 hex digits */
    K_HEXVAR,   /* payload_hash: 0..64 bytes in hex */
    K_DURATION, /* "30s" or integer ms */
    K_U64,      /* ts: integer or decimal string */
    K_FLAG,     /* boolean */
    K_TOKEN,    /* owner_token "GROUP:INDEX:SLOT" */
    K_B64,      /* result_b64 */
};

enum field_id {
    F_SCOPE,
    F_KEY,
    F_REQUEST_ID,
    F_EXECUTION_ID,
    F_TTL,
    F_TS,
    F_WINDOW,
    F_IDEMPOTENT,
    F_PAYLOAD_HASH,
    F_LEASE,
    F_TIMEOUT,
    F_OWNER_TOKEN,
    F_RESULT,
    F_RESULT_B64,
    F_TERMINAL,
    F_ERROR,
    F_CLUSTER_ID,
    F_MAX_USES,
    F_SLIDING,
    F_COUNT
};

static const struct
{
    const char *name;
    enum field_kind kind;
} fields[F_COUNT] = {
    [F_SCOPE] = {"scope", K_BYTES},
    [F_KEY] = {"key", K_BYTES},
    [F_REQUEST_ID] = {"request_id", K_HEX16},
    [F_EXECUTION_ID] = {"execution_id", K_BYTES},
    [F_TTL] = {"ttl", K_DURATION},
    [F_TS] = {"ts", K_U64},
    [F_WINDOW] = {"window", K_DURATION},
    [F_IDEMPOTENT] = {"idempotent", K_FLAG},
    [F_PAYLOAD_HASH] = {"payload_hash", K_HEXVAR},
    [F_LEASE] = {"lease", K_DURATION},
    [F_TIMEOUT] = {"timeout", K_DURATION},
    [F_OWNER_TOKEN] = {"owner_token", K_TOKEN},
    [F_RESULT] = {"result", K_BYTES},
    [F_RESULT_B64] = {"result_b64", K_B64},
    [F_TERMINAL] = {"terminal", K_FLAG},
    [F_ERROR] = {"error", K_BYTES},
    [F_CLUSTER_ID] = {"cluster_id", K_HEX16},
    [F_MAX_USES] = {"max_uses", K_U64},
    [F_SLIDING] = {"sliding", K_FLAG},
};

#define BIT(f) (1u << (f))

/* The fields each method takes. */
static unsigned method_fields(enum rpc_method m)
{
    switch (m) {
        case RPC_METHOD_CLAIM:
            return BIT(F_SCOPE) | BIT(F_KEY) | BIT(F_REQUEST_ID) |
                   BIT(F_EXECUTION_ID) | BIT(F_TTL) | BIT(F_TS) |
                   BIT(F_WINDOW) | BIT(F_IDEMPOTENT) | BIT(F_PAYLOAD_HASH) |
                   BIT(F_LEASE) | BIT(F_TIMEOUT) | BIT(F_CLUSTER_ID) |
                   BIT(F_MAX_USES) | BIT(F_SLIDING);
        case RPC_METHOD_COMPLETE:
            return BIT(F_SCOPE) | BIT(F_KEY) | BIT(F_REQUEST_ID) |
                   BIT(F_OWNER_TOKEN) | BIT(F_RESULT) | BIT(F_RESULT_B64) |
                   BIT(F_TIMEOUT) | BIT(F_CLUSTER_ID);
        case RPC_METHOD_RELEASE:
            return BIT(F_SCOPE) | BIT(F_KEY) | BIT(F_REQUEST_ID) |
                   BIT(F_OWNER_TOKEN) | BIT(F_TERMINAL) | BIT(F_ERROR) |
                   BIT(F_TIMEOUT) | BIT(F_CLUSTER_ID);
        default:
            return 0;
    }
}

/* field_of's answer for a name no field has (a value, not an error). */
#define F_NONE (-1)

/* The index of the field called @name in fields[], or F_NONE. */
static int field_of(const char *name)
{
    for (int i = 0; i < F_COUNT; i++) {
        if (strcmp(fields[i].name, name) == 0) {
            return i;
        }
    }
    return F_NONE;
}

/* One parsed value, before it is stored into the message. */
struct value
{
    const char *s; /* strings: borrowed from the document */
    size_t len;
    uint64_t u;
    bool flag;
};

static int want(const char *name, const char *what, char *why)
{
    err_printf(why, "%s: want %s", name, what);
    return -EINVAL;
}

static int read_string(json_t *v,
                       const char *name,
                       struct value *out,
                       char *why)
{
    if (!json_is_string(v)) {
        return want(name, "a string", why);
    }
    out->s = json_string_value(v);
    out->len = json_string_length(v);
    if (memchr(out->s, '\0', out->len) != NULL) {
        return want(name, "a string without NUL", why);
    }
    return 0;
}

/* A duration: "30s" (text.h units) or an integer of milliseconds. */
static int read_duration(json_t *v,
                         const char *name,
                         struct value *out,
                         char *why)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > DURATION_MAX_MS) {
            return want(name, "milliseconds 0..365 days", why);
        }
        out->u = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v) ||
        !text_parse_duration_ms(json_string_value(v), DURATION_MAX_MS,
                                &out->u)) {
        return want(name,
                    "a duration (\"250ms\", \"30s\", \"10m\", \"24h\") or "
                    "integer milliseconds",
                    why);
    }
    return 0;
}

static int read_u64(json_t *v, const char *name, struct value *out, char *why)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0) {
            return want(name, "a non-negative integer", why);
        }
        out->u = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v) ||
        !text_parse_u64(json_string_value(v), UINT64_MAX, &out->u)) {
        return want(name, "unix milliseconds (an integer or decimal string)",
                    why);
    }
    return 0;
}

static bool parse_token(const char *s, Once__Rpc__OwnerToken *t)
{
    char part[3][24];
    uint64_t v[3];
    const char *p = s;

    for (int i = 0; i < 3; i++) {
        const char *end = i < 2 ? strchr(p, ':') : p + strlen(p);
        size_t n = end != NULL ? (size_t)(end - p) : 0;

        if (end == NULL || n == 0 || n >= sizeof part[i]) {
            return false;
        }
        memcpy(part[i], p, n);
        part[i][n] = '\0';
        if (!text_parse_u64(part[i], i == 1 ? UINT64_MAX : UINT32_MAX, &v[i])) {
            return false;
        }
        p = end + (i < 2 ? 1 : 0);
    }
    once__rpc__owner_token__init(t);
    t->group_id = (uint32_t)v[0];
    t->index = v[1];
    t->slot = (uint32_t)v[2];
    return true;
}

/* Standard base64 with padding into a malloc'd buffer of at most
 * HTTPAPI_RESULT_MAX bytes. */
static int read_b64(const char *s,
                    size_t len,
                    struct httpapi_req *r,
                    size_t *out_len)
{
    size_t pad = 0;
    int n;

    if (len % 4 != 0 || len / 4 * 3 > HTTPAPI_RESULT_MAX + 2) {
        return -EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                  (c >= '0' && c <= '9') || c == '+' || c == '/';

        if (c == '=' && i >= len - 2) {
            pad++;
            continue;
        }
        if (!ok || pad > 0) {
            return -EINVAL;
        }
    }
    free(r->result);
    r->result = malloc(len / 4 * 3 + 1);
    if (r->result == NULL) {
        return -ENOMEM;
    }
    n = len > 0 ? EVP_DecodeBlock(r->result, (const unsigned char *)s, (int)len)
                : 0;
    if (n < 0 || (size_t)n < pad || (size_t)n - pad > HTTPAPI_RESULT_MAX) {
        return -EINVAL;
    }
    *out_len = (size_t)n - pad;
    return 0;
}

static ProtobufCBinaryData bin(const void *p, size_t n)
{
    ProtobufCBinaryData b = {n, (uint8_t *)p};

    return b;
}

/* Store field @f's JSON value @v into @r's message. */
static int store(struct httpapi_req *r, enum field_id f, json_t *v, char *why)
{
    const char *name = fields[f].name;
    Once__Rpc__ClaimRequest *c = &r->u.claim;
    struct value x;
    size_t n;

    memset(&x, 0, sizeof x);
    switch (fields[f].kind) {
        case K_BYTES:
        case K_HEX16:
        case K_HEXVAR:
        case K_TOKEN:
        case K_B64:
            if (read_string(v, name, &x, why) != 0) {
                return -EINVAL;
            }
            break;
        case K_DURATION:
            if (read_duration(v, name, &x, why) != 0) {
                return -EINVAL;
            }
            break;
        case K_U64:
            if (read_u64(v, name, &x, why) != 0) {
                return -EINVAL;
            }
            break;
        case K_FLAG:
            if (!json_is_boolean(v)) {
                return want(name, "true or false", why);
            }
            x.flag = json_is_true(v);
            break;
    }
    switch (f) {
        case F_SCOPE:
        case F_KEY: {
            ProtobufCBinaryData *dst;

            /* scope and key are the first two fields of every request. */
            if (r->method == RPC_METHOD_CLAIM) {
                dst = f == F_SCOPE ? &c->scope : &c->key;
            } else if (r->method == RPC_METHOD_COMPLETE) {
                dst = f == F_SCOPE ? &r->u.complete.scope : &r->u.complete.key;
            } else {
                dst = f == F_SCOPE ? &r->u.release.scope : &r->u.release.key;
            }
            *dst = bin(x.s, x.len);
            return 0;
        }
        case F_REQUEST_ID:
            if (x.len != 2 * HTTPAPI_REQUEST_ID_LEN ||
                !text_parse_hex(x.s, r->request_id, HTTPAPI_REQUEST_ID_LEN)) {
                return want(name, "32 hex digits (16 bytes)", why);
            }
            r->has_request_id = true;
            return 0;
        case F_CLUSTER_ID:
            if (x.len != 2 * RPC_ID_LEN ||
                !text_parse_hex(x.s, r->cluster_id, RPC_ID_LEN)) {
                return want(name, "32 hex digits (16 bytes)", why);
            }
            r->has_cluster_id = true;
            return 0;
        case F_EXECUTION_ID:
            c->execution_id = bin(x.s, x.len);
            return 0;
        case F_TTL:
            c->ttl_ms = x.u;
            return 0;
        case F_TS:
            c->has_ts = true;
            c->ts_ms = x.u;
            return 0;
        case F_WINDOW:
            c->window_ms = x.u;
            return 0;
        case F_IDEMPOTENT:
            c->kind = x.flag ? ONCE__RPC__KIND__KIND_IDEMPOTENT
                             : ONCE__RPC__KIND__KIND_NONCE;
            return 0;
        case F_PAYLOAD_HASH:
            if (!text_parse_hex_var(x.s, r->payload_hash,
                                    sizeof r->payload_hash, &n)) {
                return want(
                    name, "0..64 bytes in hex (an even number of digits)", why);
            }
            c->payload_hash = bin(r->payload_hash, n);
            return 0;
        case F_LEASE:
            c->lease_ms = x.u;
            return 0;
        case F_MAX_USES:
            if (x.u < 1 || x.u > FSM_MAX_USES) {
                return want(name, "an integer 1..64", why);
            }
            c->max_uses = (uint32_t)x.u;
            return 0;
        case F_SLIDING:
            c->sliding = x.flag;
            return 0;
        case F_TIMEOUT:
            if (x.u == 0 || x.u > HTTPAPI_TIMEOUT_MAX_MS) {
                return want(name, "a duration of 1 ms..60 s", why);
            }
            r->timeout_ms = x.u;
            return 0;
        case F_OWNER_TOKEN:
            ONCE_ASSERT(x.s != NULL,
                        "owner_token is a K_TOKEN: read_string set it");
            if (!parse_token(x.s, &r->token)) {
                return want(name, "GROUP:INDEX:SLOT in decimal", why);
            }
            if (r->method == RPC_METHOD_COMPLETE) {
                r->u.complete.owner_token = &r->token;
            } else {
                r->u.release.owner_token = &r->token;
            }
            return 0;
        case F_RESULT:
            r->u.complete.result = bin(x.s, x.len);
            return 0;
        case F_RESULT_B64:
            if (read_b64(x.s, x.len, r, &n) != 0) {
                return want(name,
                            "standard base64 with padding, of 0..65536 bytes",
                            why);
            }
            r->u.complete.result = bin(r->result, n);
            return 0;
        case F_TERMINAL:
            r->u.release.terminal = x.flag;
            return 0;
        case F_ERROR:
            r->u.release.error = bin(x.s, x.len);
            return 0;
        case F_COUNT:
            break;
    }
    return want(name, "a known field", why); /* not reached */
}

static void init_message(struct httpapi_req *r, enum rpc_method m)
{
    memset(r, 0, sizeof *r);
    r->method = m;
    switch (m) {
        case RPC_METHOD_CLAIM:
            once__rpc__claim_request__init(&r->u.claim);
            r->u.claim.kind = ONCE__RPC__KIND__KIND_NONCE;
            break;
        case RPC_METHOD_COMPLETE:
            once__rpc__complete_request__init(&r->u.complete);
            break;
        case RPC_METHOD_RELEASE:
            once__rpc__release_request__init(&r->u.release);
            break;
        case RPC_METHOD_STATUS:
            once__rpc__status_request__init(&r->u.status);
            break;
        default:
            once__rpc__lookup_request__init(&r->u.lookup);
            break;
    }
}

void httpapi_req_status(struct httpapi_req *out)
{
    init_message(out, RPC_METHOD_STATUS);
}

/* The rules between fields that only this API adds: the required ones. */
static int check_required(const struct httpapi_req *r, unsigned seen, char *why)
{
    if ((seen & BIT(F_SCOPE)) == 0) {
        err_printf(why, "scope: missing");
        return -EINVAL;
    }
    if ((seen & BIT(F_KEY)) == 0) {
        err_printf(why, "key: missing");
        return -EINVAL;
    }
    if (r->method != RPC_METHOD_CLAIM && (seen & BIT(F_OWNER_TOKEN)) == 0) {
        err_printf(why, "owner_token: missing");
        return -EINVAL;
    }
    if ((seen & BIT(F_RESULT)) && (seen & BIT(F_RESULT_B64))) {
        err_printf(why, "result_b64: not with result");
        return -EINVAL;
    }
    return 0;
}

int httpapi_parse_body(enum rpc_method method,
                       const uint8_t *body,
                       size_t len,
                       struct httpapi_req *out,
                       char *why)
{
    unsigned allowed = method_fields(method), seen = 0;
    json_error_t jerr;
    const char *k;
    json_t *v;

    init_message(out, method);
    if (allowed == 0) {
        err_printf(why, "method: no JSON body");
        return -EINVAL;
    }
    if (len > HTTPAPI_BODY_MAX) {
        err_printf(why, "body: over %u bytes", HTTPAPI_BODY_MAX);
        return -EINVAL;
    }
    out->doc = json_loadb((const char *)body, len,
                          JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (out->doc == NULL) {
        err_printf(why, "body: not JSON: %.80s (line %d, column %d)", jerr.text,
                   jerr.line, jerr.column);
        return -EINVAL;
    }
    if (!json_is_object(out->doc)) {
        err_printf(why, "body: want a JSON object");
        return -EINVAL;
    }
    json_object_foreach(out->doc, k, v)
    {
        int f = field_of(k);

        if (f == F_NONE || (allowed & BIT(f)) == 0) {
            err_printf(why, "%.64s: unknown field", k);
            return -EINVAL;
        }
        if (json_is_null(v)) {
            continue; /* absent */
        }
        if (store(out, (enum field_id)f, v, why) != 0) {
            return -EINVAL;
        }
        seen |= BIT(f);
    }
    if (method == RPC_METHOD_CLAIM && (seen & (BIT(F_TS) | BIT(F_TTL))) == 0) {
        out->u.claim.ttl_ms = HTTPAPI_TTL_DEFAULT_MS; /* oncectl's default */
    }
    return check_required(out, seen, why);
}

/* Percent-decode the @n bytes at @s into @out (at most @cap bytes). */
static int decode_part(const char *s,
                       size_t n,
                       uint8_t *out,
                       size_t cap,
                       size_t *out_len,
                       const char *name,
                       char *why)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];

        if (c == '%') {
            int hi = i + 2 < n ? text_hex_digit(s[i + 1]) : TEXT_NOT_HEX;
            int lo = i + 2 < n ? text_hex_digit(s[i + 2]) : TEXT_NOT_HEX;

            if (hi == TEXT_NOT_HEX || lo == TEXT_NOT_HEX) {
                err_printf(why, "%s: bad percent-encoding", name);
                return -EINVAL;
            }
            c = hi * 16 + lo;
            i += 2;
        }
        if (c == 0) {
            err_printf(why, "%s: NUL byte", name);
            return -EINVAL;
        }
        if (o >= cap) {
            err_printf(why, "%s: must be 1..%zu bytes", name, cap);
            return -EINVAL;
        }
        out[o++] = (uint8_t)c;
    }
    if (o == 0) {
        err_printf(why, "%s: must be 1..%zu bytes", name, cap);
        return -EINVAL;
    }
    *out_len = o;
    return 0;
}

int httpapi_parse_record_path(const char *path,
                              struct httpapi_req *out,
                              char *why)
{
    static const char prefix[] = "/v1/records/";
    const char *p, *slash;
    size_t sn, kn;

    init_message(out, RPC_METHOD_LOOKUP);
    if (strncmp(path, prefix, sizeof prefix - 1) != 0) {
        return -ENOENT;
    }
    p = path + sizeof prefix - 1;
    slash = strchr(p, '/');
    if (slash == NULL || strchr(slash + 1, '/') != NULL) {
        return -ENOENT;
    }
    if (decode_part(p, (size_t)(slash - p), out->scope, HTTPAPI_SCOPE_MAX, &sn,
                    "scope", why) != 0 ||
        decode_part(slash + 1, strlen(slash + 1), out->key, HTTPAPI_KEY_MAX,
                    &kn, "key", why) != 0) {
        return -EINVAL;
    }
    out->u.lookup.scope = bin(out->scope, sn);
    out->u.lookup.key = bin(out->key, kn);
    return 0;
}

void httpapi_req_bind_request_id(struct httpapi_req *r)
{
    ProtobufCBinaryData id = bin(r->request_id, HTTPAPI_REQUEST_ID_LEN);

    switch (r->method) {
        case RPC_METHOD_CLAIM:
            r->u.claim.request_id = id;
            break;
        case RPC_METHOD_COMPLETE:
            r->u.complete.request_id = id;
            break;
        case RPC_METHOD_RELEASE:
            r->u.release.request_id = id;
            break;
        default:
            break;
    }
}

const ProtobufCMessage *httpapi_req_message(const struct httpapi_req *r)
{
    switch (r->method) {
        case RPC_METHOD_CLAIM:
            return &r->u.claim.base;
        case RPC_METHOD_COMPLETE:
            return &r->u.complete.base;
        case RPC_METHOD_RELEASE:
            return &r->u.release.base;
        case RPC_METHOD_STATUS:
            return &r->u.status.base;
        default:
            return &r->u.lookup.base;
    }
}

void httpapi_req_free(struct httpapi_req *r)
{
    if (r->doc != NULL) {
        json_decref(r->doc);
        r->doc = NULL;
    }
    free(r->result);
    r->result = NULL;
}

/* --- POST /v1/claims ------------------------------------------------------ */

/* Item @i (a JSON object) into @r, as a /v1/claim body without the call's
 * own fields. */
static int parse_item(json_t *obj, size_t i, struct httpapi_req *r, char *why)
{
    unsigned allowed =
        method_fields(RPC_METHOD_CLAIM) & ~(BIT(F_TIMEOUT) | BIT(F_CLUSTER_ID));
    unsigned seen = 0;
    char w[ERR_MSG_SIZE];
    const char *k;
    json_t *v;

    init_message(r, RPC_METHOD_CLAIM);
    if (!json_is_object(obj)) {
        err_printf(why, "items[%zu]: want a JSON object", i);
        return -EINVAL;
    }
    json_object_foreach(obj, k, v)
    {
        int f = field_of(k);

        if (f == F_NONE || (allowed & BIT(f)) == 0) {
            err_printf(
                why, "items[%zu]: %.64s: unknown field%s", i, k,
                f == F_TIMEOUT || f == F_CLUSTER_ID ? " in an item" : "");
            return -EINVAL;
        }
        if (json_is_null(v)) {
            continue;
        }
        if (store(r, (enum field_id)f, v, w) != 0) {
            err_printf(why, "items[%zu]: %s", i, w);
            return -EINVAL;
        }
        seen |= BIT(f);
    }
    if ((seen & (BIT(F_TS) | BIT(F_TTL))) == 0) {
        r->u.claim.ttl_ms = HTTPAPI_TTL_DEFAULT_MS;
    }
    if (check_required(r, seen, w) != 0) {
        err_printf(why, "items[%zu]: %s", i, w);
        return -EINVAL;
    }
    return 0;
}

/* The object form's own fields; *@items its array. */
static int parse_batch_options(struct httpapi_batch *b,
                               json_t **items,
                               char *why)
{
    struct httpapi_req opt;
    const char *k;
    json_t *v;

    init_message(&opt, RPC_METHOD_CLAIM);
    json_object_foreach(b->doc, k, v)
    {
        if (strcmp(k, "items") == 0) {
            *items = v;
        } else if (json_is_null(v)) {
            continue;
        } else if (strcmp(k, "timeout") == 0) {
            if (store(&opt, F_TIMEOUT, v, why) != 0) {
                return -EINVAL;
            }
            b->timeout_ms = opt.timeout_ms;
        } else if (strcmp(k, "cluster_id") == 0) {
            if (store(&opt, F_CLUSTER_ID, v, why) != 0) {
                return -EINVAL;
            }
            b->has_cluster_id = true;
            memcpy(b->cluster_id, opt.cluster_id, RPC_ID_LEN);
        } else {
            err_printf(why, "%.64s: unknown field", k);
            return -EINVAL;
        }
    }
    return 0;
}

int httpapi_parse_batch(const uint8_t *body,
                        size_t len,
                        struct httpapi_batch *out,
                        char *why)
{
    json_error_t jerr;
    json_t *items = NULL;

    memset(out, 0, sizeof *out);
    once__rpc__claim_batch_request__init(&out->msg);
    if (len > HTTPAPI_BATCH_BODY_MAX) {
        err_printf(why, "body: over %u bytes", HTTPAPI_BATCH_BODY_MAX);
        return -EINVAL;
    }
    out->doc = json_loadb((const char *)body, len,
                          JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (out->doc == NULL) {
        err_printf(why, "body: not JSON: %.80s (line %d, column %d)", jerr.text,
                   jerr.line, jerr.column);
        return -EINVAL;
    }
    if (json_is_array(out->doc)) {
        items = out->doc;
    } else if (!json_is_object(out->doc)) {
        err_printf(why,
                   "body: want a JSON array of claims, or an object "
                   "with \"items\"");
        return -EINVAL;
    } else if (parse_batch_options(out, &items, why) != 0) {
        return -EINVAL;
    }
    if (!json_is_array(items) || json_array_size(items) < 1 ||
        json_array_size(items) > RPC_CLAIM_BATCH_MAX) {
        err_printf(why, "items: want an array of 1..%u claims",
                   RPC_CLAIM_BATCH_MAX);
        return -EINVAL;
    }
    out->n = json_array_size(items);
    out->items = calloc(out->n, sizeof *out->items);
    out->ptr = calloc(out->n, sizeof *out->ptr);
    if (out->items == NULL || out->ptr == NULL) {
        err_printf(why, "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < out->n; i++) {
        if (parse_item(json_array_get(items, i), i, &out->items[i], why) != 0) {
            return -EINVAL;
        }
        out->ptr[i] = &out->items[i].u.claim;
    }
    out->msg.n_items = out->n;
    out->msg.items = out->ptr;
    return 0;
}

void httpapi_batch_free(struct httpapi_batch *b)
{
    if (b->items != NULL) {
        for (size_t i = 0; i < b->n; i++) {
            httpapi_req_free(&b->items[i]);
        }
    }
    free(b->items);
    free(b->ptr);
    b->items = NULL;
    b->ptr = NULL;
    if (b->doc != NULL) {
        json_decref(b->doc);
        b->doc = NULL;
    }
}
