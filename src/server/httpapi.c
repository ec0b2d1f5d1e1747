/* server/httpapi.c: the HTTP/JSON API's routes and calls (httpapi.h). */
#include "server/httpapi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "rpc/status.h"
#include "server/httpapi_json.h"
#include "server/httpapi_parse.h"
#include "server/server.h"

#define JSON_TYPE "application/json"

/* One call in flight: from the deferred HTTP request to its answer. */
struct api_call
{
    struct server *s;
    struct http_pending *pending;
    enum rpc_method method;
    bool has_request_id;
    uint8_t request_id[HTTPAPI_REQUEST_ID_LEN];
};

/* @o (taken) as the JSON answer with @status. */
static void answer_json(struct http_response *resp, unsigned status, json_t *o)
{
    char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

    json_decref(o);
    memset(resp, 0, sizeof *resp);
    if (text == NULL) {
        http_text(resp, 500, "out of memory writing the answer\n");
        return;
    }
    resp->status = status;
    resp->content_type = JSON_TYPE;
    resp->body = text;
    resp->body_len = strlen(text);
    /* A body ends with a newline, as oncectl --json prints one. */
    {
        char *b = realloc(text, resp->body_len + 2);

        if (b != NULL) {
            b[resp->body_len++] = '\n';
            b[resp->body_len] = '\0';
            resp->body = b;
        }
    }
    if (status == 503) {
        resp->retry_after_s = HTTPAPI_RETRY_AFTER_S;
    }
}

static void answer_error(struct server *s,
                         struct http_response *resp,
                         enum rpc_status status,
                         bool applied_unknown,
                         const char *hint,
                         const char *message,
                         const uint8_t *request_id)
{
    json_t *o =
        httpapi_json_error(status, applied_unknown, hint, message, request_id);

    if (o != NULL) {
        node_sync_ids(s);
        httpapi_json_origin(o, &s->ids);
    }
    answer_json(resp,
                rpc_status_http(status, applied_unknown ? RPC_APPLIED_UNKNOWN
                                                        : RPC_APPLIED_FALSE),
                o);
}

/* --- the answer of a local call ------------------------------------------- */

static const ProtobufCMessageDescriptor *response_of(enum rpc_method m)
{
    switch (m) {
        case RPC_METHOD_CLAIM:
            return &once__rpc__claim_response__descriptor;
        case RPC_METHOD_COMPLETE:
            return &once__rpc__complete_response__descriptor;
        case RPC_METHOD_RELEASE:
            return &once__rpc__release_response__descriptor;
        case RPC_METHOD_LOOKUP:
            return &once__rpc__lookup_response__descriptor;
        default:
            return &once__rpc__status_response__descriptor;
    }
}

/* The Result inside a record call's response message. */
static const Once__Rpc__Result *result_in(enum rpc_method m,
                                          const ProtobufCMessage *msg)
{
    switch (m) {
        case RPC_METHOD_CLAIM:
            return ((const Once__Rpc__ClaimResponse *)msg)->result;
        case RPC_METHOD_COMPLETE:
            return ((const Once__Rpc__CompleteResponse *)msg)->result;
        case RPC_METHOD_RELEASE:
            return ((const Once__Rpc__ReleaseResponse *)msg)->result;
        default:
            return ((const Once__Rpc__LookupResponse *)msg)->result;
    }
}

/* A status OK answer's body as JSON, and its HTTP status. */
static json_t *decided(const struct api_call *k,
                       const struct rpc_reply *r,
                       unsigned *status)
{
    ProtobufCMessage *msg = protobuf_c_message_unpack(
        response_of(k->method), NULL, r->body_len, r->body);
    const Once__Rpc__Result *res;
    json_t *o = NULL;

    *status = 200;
    if (msg == NULL) {
        return NULL;
    }
    if (k->method == RPC_METHOD_STATUS) {
        o = httpapi_json_status((const Once__Rpc__StatusResponse *)msg);
    } else if ((res = result_in(k->method, msg)) != NULL) {
        o = httpapi_json_result(k->method, res);
        if (o != NULL && k->method == RPC_METHOD_LOOKUP) {
            httpapi_json_served_by(
                o, ((const Once__Rpc__LookupResponse *)msg)->served_by);
        }
        /* The state machine's refusals: nothing was decided. A full
         * table or quota, a restored cluster's replay window and a field
         * the log's schema cannot apply yet are "not applied" (503, with
         * Retry-After), as the same statuses are for a call. */
        if (res->outcome == ONCE__RPC__OUTCOME__OUTCOME_INVALID_ARGUMENT) {
            *status = 400;
        } else if (res->outcome ==
                       ONCE__RPC__OUTCOME__OUTCOME_RESOURCE_EXHAUSTED ||
                   res->outcome ==
                       ONCE__RPC__OUTCOME__OUTCOME_FAILED_PRECONDITION) {
            *status = 503;
        }
    }
    protobuf_c_message_free_unpacked(msg, NULL);
    return o;
}

static void on_answer(void *arg,
                      const struct rpc_call *call,
                      const struct rpc_reply *r)
{
    struct api_call *k = arg;
    struct http_response resp;
    const uint8_t *rid = k->has_request_id ? k->request_id : NULL;

    (void)call;
    memset(&resp, 0, sizeof resp);
    if (r->status == RPC_STATUS_OK) {
        unsigned status;
        json_t *o = decided(k, r, &status);

        if (o == NULL) {
            /* The call was decided; its answer is lost here only. */
            answer_error(k->s, &resp, RPC_STATUS_UNKNOWN, true, NULL,
                         "the answer could not be decoded", rid);
        } else {
            node_sync_ids(k->s);
            httpapi_json_origin(o, &k->s->ids);
            answer_json(&resp, status, o);
        }
    } else {
        answer_error(k->s, &resp, r->status, r->applied == RPC_APPLIED_UNKNOWN,
                     r->leader_hint, r->error, rid);
    }
    http_answer(k->pending, &resp);
    free(k);
}

/* --- calls ---------------------------------------------------------------- */

/* Serve @body (@len bytes, an encoded request of @m; the caller frees it)
 * as a local RPC call with the caller's certificate, its deadline and its
 * cluster-id pin: 0 (@cb will run), or RPC_E_CLOSED / RPC_E_NOMEM. */
static int call_local(struct server *s,
                      const struct http_request *req,
                      enum rpc_method m,
                      uint32_t timeout_ms,
                      bool has_pin,
                      const uint8_t pin[RPC_ID_LEN],
                      const uint8_t *body,
                      size_t len,
                      rpc_local_fn cb,
                      void *arg)
{
    struct envelope_view v;
    int rv;

    envelope_view_init(&v);
    v.method = m;
    v.direction = RPC_REQUEST;
    v.deadline_ms = timeout_ms;
    v.has_cluster_id = has_pin; /* the caller's pin, if given */
    memcpy(v.cluster_id, pin, RPC_ID_LEN);
    v.body = body;
    v.body_len = len;
    /* The caller's certificate, authorized by the service exactly as a
     * client-port connection's (authz.h). */
    rv = s->rpc != NULL ? rpc_server_call_local(s->rpc, &v, req->peer, cb, arg)
                        : RPC_E_CLOSED;
    envelope_view_close(&v);
    return rv;
}

/* Serve @q (parsed) as a local RPC call, answering the HTTP request later. */
static void start_call(struct server *s,
                       const struct http_request *req,
                       struct httpapi_req *q,
                       struct http_response *resp)
{
    const ProtobufCMessage *msg = httpapi_req_message(q);
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *body = malloc(len > 0 ? len : 1);
    struct api_call *k = calloc(1, sizeof *k);
    int rv;

    if (body == NULL || k == NULL || (k->pending = http_defer(req)) == NULL) {
        free(body);
        free(k);
        answer_error(s, resp, RPC_STATUS_UNAVAILABLE, false, NULL,
                     "out of memory", NULL);
        return;
    }
    protobuf_c_message_pack(msg, body);
    k->s = s;
    k->method = q->method;
    if (q->method == RPC_METHOD_CLAIM || q->method == RPC_METHOD_COMPLETE ||
        q->method == RPC_METHOD_RELEASE) {
        k->has_request_id = true;
        memcpy(k->request_id, q->request_id, sizeof k->request_id);
    }
    rv = call_local(s, req, q->method, q->timeout_ms, q->has_cluster_id,
                    q->cluster_id, body, len, on_answer, k);
    free(body);
    if (rv != 0) {
        struct http_response r;

        memset(&r, 0, sizeof r);
        answer_error(
            s, &r, RPC_STATUS_UNAVAILABLE, false, NULL,
            rv == RPC_E_CLOSED ? "node shutting down" : "out of memory",
            k->has_request_id ? k->request_id : NULL);
        http_answer(k->pending, &r);
        free(k);
    }
}

/* The refusals every route shares; true if @resp was answered. */
static bool refused(struct server *s,
                    const struct http_request *req,
                    struct http_response *resp)
{
    if (s->stopping) {
        answer_error(s, resp, RPC_STATUS_UNAVAILABLE, false, NULL,
                     "node shutting down", NULL);
        return true;
    }
    if (s->tls.on && (!req->tls || req->peer == NULL)) {
        /* The listener is HTTPS and asks for a client certificate without
         * requiring one (probes have none): a caller without one has no
         * identity, so no right here. A certificate is authorized by the
         * service, call by call, like the client port's. */
        metrics_denied(&s->metrics);
        answer_error(s, resp, RPC_STATUS_PERMISSION_DENIED, false, NULL,
                     "permission denied: the HTTP API needs a client "
                     "certificate with TLS (an identity of the access file)",
                     NULL);
        return true;
    }
    return false;
}

/* application/json, with parameters or not (charset=utf-8). */
static bool json_content_type(const char *ct)
{
    size_t n = strlen(JSON_TYPE);

    return ct != NULL && strncasecmp(ct, JSON_TYPE, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static void post_record(struct server *s,
                        enum rpc_method m,
                        const struct http_request *req,
                        struct http_response *resp)
{
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];

    if (refused(s, req, resp)) {
        return;
    }
    if (!json_content_type(req->content_type)) {
        answer_error(s, resp, RPC_STATUS_INVALID_ARGUMENT, false, NULL,
                     "Content-Type: want application/json", NULL);
        resp->status = 415;
        return;
    }
    if (httpapi_parse_body(m, req->body, req->body_len, &q, why) != 0) {
        answer_error(s, resp, RPC_STATUS_INVALID_ARGUMENT, false, NULL, why,
                     q.has_request_id ? q.request_id : NULL);
        httpapi_req_free(&q);
        return;
    }
    if (!q.has_request_id &&
        RAND_bytes(q.request_id, sizeof q.request_id) != 1) {
        answer_error(s, resp, RPC_STATUS_UNAVAILABLE, false, NULL,
                     "no random bytes for a request id", NULL);
        httpapi_req_free(&q);
        return;
    }
    httpapi_req_bind_request_id(&q);
    start_call(s, req, &q, resp);
    httpapi_req_free(&q);
}

static void post_claim(void *arg,
                       const struct http_request *req,
                       struct http_response *resp)
{
    post_record(arg, RPC_METHOD_CLAIM, req, resp);
}

static void post_complete(void *arg,
                          const struct http_request *req,
                          struct http_response *resp)
{
    post_record(arg, RPC_METHOD_COMPLETE, req, resp);
}

static void post_release(void *arg,
                         const struct http_request *req,
                         struct http_response *resp)
{
    post_record(arg, RPC_METHOD_RELEASE, req, resp);
}

static void get_record(void *arg,
                       const struct http_request *req,
                       struct http_response *resp)
{
    struct server *s = arg;
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];
    int rv;

    if (refused(s, req, resp)) {
        return;
    }
    rv = httpapi_parse_record_path(req->path, &q, why);
    if (rv == -ENOENT) {
        http_text(resp, 404, "not found: want /v1/records/{scope}/{key}\n");
        return;
    }
    if (rv != 0) {
        answer_error(s, resp, RPC_STATUS_INVALID_ARGUMENT, false, NULL, why,
                     NULL);
        return;
    }
    start_call(s, req, &q, resp);
    httpapi_req_free(&q);
}

static void get_status(void *arg,
                       const struct http_request *req,
                       struct http_response *resp)
{
    struct server *s = arg;
    struct httpapi_req q;

    if (refused(s, req, resp)) {
        return;
    }
    httpapi_req_status(&q);
    start_call(s, req, &q, resp);
    httpapi_req_free(&q);
}

/* --- POST /v1/claims: a batch ------------------------------------------- */

/* One item of a ClaimBatch answer as its JSON object (NULL: no memory or
 * a malformed item, which the caller turns into an UNKNOWN). */
static json_t *batch_item_json(struct server *s,
                               const Once__Rpc__ClaimBatchItem *it,
                               const uint8_t *request_id)
{
    char msg[RPC_ERROR_MAX + 1];
    json_t *o;

    if (it == NULL) {
        return NULL;
    }
    if (it->status == ONCE__RPC__STATUS__STATUS_OK) {
        o = it->result != NULL
                ? httpapi_json_result(RPC_METHOD_CLAIM, it->result)
                : NULL;
    } else {
        size_t n =
            it->error.len < RPC_ERROR_MAX ? it->error.len : RPC_ERROR_MAX;

        if (n > 0) {
            memcpy(msg, it->error.data, n);
        }
        msg[n] = '\0';
        o = httpapi_json_error(
            (enum rpc_status)it->status,
            it->applied == ONCE__RPC__APPLIED__APPLIED_UNKNOWN, NULL, msg,
            request_id);
    }
    if (o != NULL) {
        httpapi_json_origin(o, &s->ids);
    }
    return o;
}

/* One batch call in flight: the items' request ids, for error answers. */
struct api_batch
{
    struct server *s;
    struct http_pending *pending;
    size_t n;
    uint8_t (*rid)[HTTPAPI_REQUEST_ID_LEN];
};

static json_t *batch_json(struct api_batch *k, const struct rpc_reply *r)
{
    Once__Rpc__ClaimBatchResponse *m =
        once__rpc__claim_batch_response__unpack(NULL, r->body_len, r->body);
    json_t *arr = m != NULL ? json_array() : NULL;

    if (arr != NULL && m->n_items != k->n) {
        json_decref(arr);
        arr = NULL;
    }
    node_sync_ids(k->s);
    for (size_t i = 0; arr != NULL && i < k->n; i++) {
        json_t *o = batch_item_json(k->s, m->items[i], k->rid[i]);

        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (m != NULL) {
        once__rpc__claim_batch_response__free_unpacked(m, NULL);
    }
    return arr;
}

static void on_batch_answer(void *arg,
                            const struct rpc_call *call,
                            const struct rpc_reply *r)
{
    struct api_batch *k = arg;
    struct http_response resp;

    (void)call;
    memset(&resp, 0, sizeof resp);
    if (r->status == RPC_STATUS_OK) {
        json_t *o = batch_json(k, r);

        if (o == NULL) {
            /* The items were decided; their answers are lost here only. */
            answer_error(k->s, &resp, RPC_STATUS_UNKNOWN, true, NULL,
                         "the answer could not be decoded", NULL);
        } else {
            answer_json(&resp, 200, o);
        }
    } else {
        answer_error(k->s, &resp, r->status, r->applied == RPC_APPLIED_UNKNOWN,
                     r->leader_hint, r->error, NULL);
    }
    http_answer(k->pending, &resp);
    free(k->rid);
    free(k);
}

/* Every item's request id: given, or fresh; false if no random bytes. */
static bool batch_request_ids(struct httpapi_batch *q, struct api_batch *k)
{
    for (size_t i = 0; i < q->n; i++) {
        struct httpapi_req *it = &q->items[i];

        if (!it->has_request_id &&
            RAND_bytes(it->request_id, sizeof it->request_id) != 1) {
            return false;
        }
        httpapi_req_bind_request_id(it);
        memcpy(k->rid[i], it->request_id, sizeof k->rid[i]);
    }
    return true;
}

/* Serve @q as a local ClaimBatch call, answering the HTTP request later. */
static void start_batch(struct server *s,
                        const struct http_request *req,
                        struct httpapi_batch *q,
                        struct http_response *resp)
{
    struct api_batch *k = calloc(1, sizeof *k);
    uint8_t *body = NULL;
    size_t len;
    int rv;

    if (k == NULL || (k->rid = calloc(q->n, sizeof *k->rid)) == NULL) {
        free(k);
        answer_error(s, resp, RPC_STATUS_UNAVAILABLE, false, NULL,
                     "out of memory", NULL);
        return;
    }
    k->s = s;
    k->n = q->n;
    if (!batch_request_ids(q, k)) {
        free(k->rid);
        free(k);
        answer_error(s, resp, RPC_STATUS_UNAVAILABLE, false, NULL,
                     "no random bytes for a request id", NULL);
        return;
    }
    len = once__rpc__claim_batch_request__get_packed_size(&q->msg);
    body = malloc(len > 0 ? len : 1);
    if (body == NULL || (k->pending = http_defer(req)) == NULL) {
        free(body);
        free(k->rid);
        free(k);
        answer_error(s, resp, RPC_STATUS_UNAVAILABLE, false, NULL,
                     "out of memory", NULL);
        return;
    }
    once__rpc__claim_batch_request__pack(&q->msg, body);
    rv = call_local(s, req, RPC_METHOD_CLAIM_BATCH, q->timeout_ms,
                    q->has_cluster_id, q->cluster_id, body, len,
                    on_batch_answer, k);
    free(body);
    if (rv != 0) {
        struct http_response r;

        memset(&r, 0, sizeof r);
        answer_error(
            s, &r, RPC_STATUS_UNAVAILABLE, false, NULL,
            rv == RPC_E_CLOSED ? "node shutting down" : "out of memory", NULL);
        http_answer(k->pending, &r);
        free(k->rid);
        free(k);
    }
}

static void post_claims(void *arg,
                        const struct http_request *req,
                        struct http_response *resp)
{
    struct server *s = arg;
    struct httpapi_batch q;
    char why[ERR_MSG_SIZE];

    if (refused(s, req, resp)) {
        return;
    }
    if (!json_content_type(req->content_type)) {
        answer_error(s, resp, RPC_STATUS_INVALID_ARGUMENT, false, NULL,
                     "Content-Type: want application/json", NULL);
        resp->status = 415;
        return;
    }
    if (httpapi_parse_batch(req->body, req->body_len, &q, why) != 0) {
        answer_error(s, resp, RPC_STATUS_INVALID_ARGUMENT, false, NULL, why,
                     NULL);
        httpapi_batch_free(&q);
        return;
    }
    start_batch(s, req, &q, resp);
    httpapi_batch_free(&q);
}

void httpapi_routes(struct server *s, struct http_route *out)
{
    out[0] = (struct http_route){"/v1/claim", post_claim, s, HTTP_POST,
                                 HTTPAPI_BODY_MAX};
    out[1] = (struct http_route){"/v1/complete", post_complete, s, HTTP_POST,
                                 HTTPAPI_BODY_MAX};
    out[2] = (struct http_route){"/v1/release", post_release, s, HTTP_POST,
                                 HTTPAPI_BODY_MAX};
    out[3] = (struct http_route){"/v1/records/", get_record, s, HTTP_GET, 0};
    out[4] = (struct http_route){"/v1/status", get_status, s, HTTP_GET, 0};
    out[5] = (struct http_route){"/v1/claims", post_claims, s, HTTP_POST,
                                 HTTPAPI_BATCH_BODY_MAX};
}
