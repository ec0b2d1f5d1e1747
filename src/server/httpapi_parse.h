/* server/httpapi_parse.h: the HTTP/JSON API's request bodies
 * (docs/http-api.md) into the RPC's request messages.
 *
 * A POST body of /v1/claim, /v1/complete or /v1/release is one JSON
 * object with the field names of `oncectl session` (docs/oncectl.md):
 * strings, except the flags (`idempotent`, `terminal`: booleans) and `ts`
 * (an integer or a decimal string); durations (`ttl`, `window`, `lease`,
 * `timeout`) are strings such as "250ms", "30s", "24h", or integers in
 * milliseconds; `null` is an absent field. An unknown field, a wrong type
 * or a malformed value is refused with a message naming the field. Bounds
 * that the node checks for every caller (scope 1..128 bytes, key 1..256,
 * ...) are left to the RPC's own checks (convert.h), which this request
 * then goes through: one place for them. The lookup's scope and key come
 * percent-encoded in the path (httpapi_parse_record_path).
 *
 * Ownership: struct httpapi_req keeps the parsed JSON document; the
 * message's pointers borrow from it and from the struct itself, valid until
 * httpapi_req_free. The struct must not be moved once parsed. Pure: no I/O,
 * no clock, no randomness (the caller makes a missing request id). */
#ifndef ONCE_SERVER_HTTPAPI_PARSE_H_
#define ONCE_SERVER_HTTPAPI_PARSE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "once_rpc.pb-c.h"
#include "rpc/frame.h"

#define HTTPAPI_BODY_MAX       (256u << 10) /* largest POST body */
#define HTTPAPI_TIMEOUT_MAX_MS 60000u       /* largest `timeout` */
#define HTTPAPI_REQUEST_ID_LEN 16
#define HTTPAPI_SCOPE_MAX      128
#define HTTPAPI_KEY_MAX        256
#define HTTPAPI_RESULT_MAX     (64u << 10)
/* A claim with neither `ttl` nor `ts` keeps its record 24 h (oncectl's
 * default). */
#define HTTPAPI_TTL_DEFAULT_MS 86400000u

struct httpapi_req
{
    enum rpc_method method; /* CLAIM, COMPLETE, RELEASE, LOOKUP, STATUS */
    uint64_t timeout_ms;    /* `timeout`; 0: the node's default */
    bool has_request_id;    /* given; else the caller fills request_id */
    uint8_t request_id[HTTPAPI_REQUEST_ID_LEN];
    bool has_cluster_id; /* `cluster_id`: the caller's pin (POSTs only) */
    uint8_t cluster_id[RPC_ID_LEN];
    union {
        Once__Rpc__ClaimRequest claim;
        Once__Rpc__CompleteRequest complete;
        Once__Rpc__ReleaseRequest release;
        Once__Rpc__LookupRequest lookup;
        Once__Rpc__StatusRequest status;
    } u;
    Once__Rpc__OwnerToken token;
    uint8_t payload_hash[64];
    uint8_t *result;                      /* decoded result_b64 (malloc'd) */
    uint8_t scope[HTTPAPI_SCOPE_MAX + 1]; /* lookup: decoded from the path */
    uint8_t key[HTTPAPI_KEY_MAX + 1];
    json_t *doc;
};

/* Parse @len bytes at @body as the request of @method (CLAIM, COMPLETE or
 * RELEASE). 0, or -EINVAL with @why (ERR_MSG_SIZE) naming the field; the
 * struct is then still to be freed. */
int httpapi_parse_body(enum rpc_method method,
                       const uint8_t *body,
                       size_t len,
                       struct httpapi_req *out,
                       char *why);

/* The lookup of @path "/v1/records/{scope}/{key}": each part percent-
 * decoded ("%2F" is a '/' inside a part), 1..HTTPAPI_SCOPE_MAX and
 * 1..HTTPAPI_KEY_MAX bytes, no NUL. 0, or -EINVAL with @why; -ENOENT for
 * a path of another shape (a 404). */
int httpapi_parse_record_path(const char *path,
                              struct httpapi_req *out,
                              char *why);

/* GET /v1/status: an empty StatusRequest. */
void httpapi_req_status(struct httpapi_req *out);

/* Point the message's request_id at out->request_id (given or filled by
 * the caller). CLAIM, COMPLETE, RELEASE; a no-op for LOOKUP. */
void httpapi_req_bind_request_id(struct httpapi_req *r);

/* The message to pack (the union member of r->method). */
const ProtobufCMessage *httpapi_req_message(const struct httpapi_req *r);

void httpapi_req_free(struct httpapi_req *r);

/* --- POST /v1/claims: a batch of claims (ClaimBatch) ---------------------
 *
 * The body is a JSON array of claim objects (each exactly a /v1/claim body
 * without `timeout` and `cluster_id`), or an object {"items": that array,
 * "timeout": ..., "cluster_id": ...} for the call's own options. 1..
 * RPC_CLAIM_BATCH_MAX items; the body at most HTTPAPI_BATCH_BODY_MAX bytes
 * (the HTTP listener's ceiling: 1 MiB holds 4,096 claims of ~250 bytes of
 * JSON each). A malformed item refuses the whole body, naming it
 * ("items[3]: key: missing"): the bounds the node checks per item (convert.h)
 * are then answered per item by the RPC. Ownership as struct httpapi_req:
 * the items keep the document, valid until httpapi_batch_free. */
#define HTTPAPI_BATCH_BODY_MAX (1u << 20)

struct httpapi_batch
{
    uint64_t timeout_ms; /* 0: the node's default */
    bool has_cluster_id;
    uint8_t cluster_id[RPC_ID_LEN];
    size_t n;
    struct httpapi_req *items;     /* [n]: each a CLAIM */
    Once__Rpc__ClaimRequest **ptr; /* [n]: &items[i].u.claim */
    Once__Rpc__ClaimBatchRequest msg;
    json_t *doc;
};

/* 0, or -EINVAL with @why (ERR_MSG_SIZE), or -ENOMEM; @out is then still
 * to be freed. Items without a request_id have has_request_id false: the
 * caller fills request_id and binds it (httpapi_req_bind_request_id). */
int httpapi_parse_batch(const uint8_t *body,
                        size_t len,
                        struct httpapi_batch *out,
                        char *why);
void httpapi_batch_free(struct httpapi_batch *b);

#endif /* ONCE_SERVER_HTTPAPI_PARSE_H_ */
