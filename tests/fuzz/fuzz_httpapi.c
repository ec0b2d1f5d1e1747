/* fuzz_httpapi: the HTTP/JSON API's request parser and answer writer
 * (src/server/httpapi_parse.c, httpapi_json.c) on arbitrary bytes.
 *
 * The first byte picks what the rest is (mod 5): the body of POST
 * /v1/claim, /v1/complete or /v1/release, the path of GET
 * /v1/records/..., or the body of POST /v1/claims (a batch: its items
 * checked, its ClaimBatchRequest repacked the same way). A
 * parse either succeeds, and then its message packs and unpacks again
 * with the same size (what the node sends through its RPC path), or fails
 * with a message that names something; neither leaks or crashes. Every
 * input also goes through the answer writer as a Result's reason and
 * bytes, whose JSON must dump. Inputs over 1.1 MiB are cut (the body
 * bounds are 256 KiB, and 1 MiB for a batch). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/httpapi_json.h"
#include "server/httpapi_parse.h"

#define INPUT_MAX (1100u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void repack(const struct httpapi_req *q)
{
    const ProtobufCMessage *m = httpapi_req_message(q);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n + 1);
    ProtobufCMessage *back;

    if (buf == NULL) {
        return;
    }
    protobuf_c_message_pack(m, buf);
    back = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
    if (back == NULL || protobuf_c_message_get_packed_size(back) != n) {
        abort(); /* what the node would forward must decode */
    }
    protobuf_c_message_free_unpacked(back, NULL);
    free(buf);
}

static void answer(const uint8_t *data, size_t size)
{
    Once__Rpc__Result r = ONCE__RPC__RESULT__INIT;
    char *reason = malloc(size + 1);
    json_t *o;
    char *text;

    if (reason == NULL) {
        return;
    }
    memcpy(reason, data, size);
    reason[size] = '\0';
    r.outcome = size > 0 ? data[0] % 20 : 0;
    r.reason = reason;
    r.result.data = (uint8_t *)data;
    r.result.len = size;
    r.stored_error.data = (uint8_t *)data;
    r.stored_error.len = size;
    r.state = size > 1 ? data[1] % 7 : 0;
    o = httpapi_json_result(RPC_METHOD_LOOKUP, &r);
    if (o != NULL) {
        text = json_dumps(o, JSON_COMPACT);
        free(text);
        json_decref(o);
    }
    free(reason);
}

/* POST /v1/claims: a parsed batch has 1..RPC_CLAIM_BATCH_MAX claims, each
 * with a request id once bound, and its message repacks. */
static void batch(const uint8_t *data, size_t size)
{
    struct httpapi_batch b;
    char why[ERR_MSG_SIZE];
    int rv;

    why[0] = '\0';
    rv = httpapi_parse_batch(data, size, &b, why);
    if (rv == 0) {
        if (b.n < 1 || b.n > RPC_CLAIM_BATCH_MAX || b.msg.n_items != b.n) {
            abort();
        }
        for (size_t i = 0; i < b.n; i++) {
            if (b.items[i].method != RPC_METHOD_CLAIM) {
                abort();
            }
            httpapi_req_bind_request_id(&b.items[i]);
        }
        {
            size_t n = once__rpc__claim_batch_request__get_packed_size(&b.msg);
            uint8_t *buf = malloc(n + 1);
            Once__Rpc__ClaimBatchRequest *back;

            if (buf != NULL) {
                once__rpc__claim_batch_request__pack(&b.msg, buf);
                back = once__rpc__claim_batch_request__unpack(NULL, n, buf);
                if (back == NULL || back->n_items != b.n) {
                    abort();
                }
                once__rpc__claim_batch_request__free_unpacked(back, NULL);
                free(buf);
            }
        }
    } else if (rv == -EINVAL && why[0] == '\0') {
        abort(); /* a refusal always says why */
    }
    httpapi_batch_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum rpc_method methods[] = {
        RPC_METHOD_CLAIM, RPC_METHOD_COMPLETE, RPC_METHOD_RELEASE};
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];
    int rv;

    if (size < 1) {
        return 0;
    }
    if (size > INPUT_MAX) {
        size = INPUT_MAX;
    }
    why[0] = '\0';
    if (data[0] % 5 == 4) {
        batch(data + 1, size - 1);
        answer(data, size);
        return 0;
    }
    if (data[0] % 5 < 3) {
        rv = httpapi_parse_body(methods[data[0] % 5], data + 1, size - 1, &q,
                                why);
    } else {
        char *path = malloc(size);

        if (path == NULL) {
            return 0;
        }
        memcpy(path, data + 1, size - 1);
        path[size - 1] = '\0';
        rv = httpapi_parse_record_path(path, &q, why);
        free(path);
    }
    if (rv == 0) {
        httpapi_req_bind_request_id(&q);
        repack(&q);
    } else if (rv == -EINVAL && why[0] == '\0') {
        abort(); /* a refusal always says why */
    }
    httpapi_req_free(&q);
    answer(data, size);
    return 0;
}
