/* The HTTP/JSON API's pure parts: request bodies and record paths into
 * RPC messages (server/httpapi_parse.c), answers into JSON
 * (server/httpapi_json.c). once_http_api.py runs them in a real cluster. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/httpapi_json.h"
#include "server/httpapi_parse.h"

Suite *httpapi_suite(void);

static int parse(enum rpc_method m,
                 const char *body,
                 struct httpapi_req *q,
                 char *why)
{
    why[0] = '\0';
    return httpapi_parse_body(m, (const uint8_t *)body, strlen(body), q, why);
}

/* @body is refused with a message containing @want. */
static void refused(enum rpc_method m, const char *body, const char *want)
{
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];

    ck_assert_msg(parse(m, body, &q, why) == -EINVAL, "accepted: %s", body);
    ck_assert_msg(strstr(why, want) != NULL, "%s: \"%s\" lacks \"%s\"", body,
                  why, want);
    httpapi_req_free(&q);
}

static bool bin_is(ProtobufCBinaryData b, const char *s)
{
    return b.len == strlen(s) && memcmp(b.data, s, b.len) == 0;
}

START_TEST(claim_fields)
{
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];
    const Once__Rpc__ClaimRequest *c = &q.u.claim;

    ck_assert_int_eq(
        parse(RPC_METHOD_CLAIM,
              "{\"scope\":\"s\",\"key\":\"k\",\"idempotent\":true,"
              "\"payload_hash\":\"ab12\",\"lease\":\"30s\",\"ttl\":5000,"
              "\"ts\":\"123\",\"window\":\"5m\",\"execution_id\":\"e1\","
              "\"request_id\":\"00112233445566778899AABBCCDDEEFF\","
              "\"cluster_id\":\"0f0e0d0c0b0a09080706050403020100\","
              "\"timeout\":\"2s\"}",
              &q, why),
        0);
    ck_assert(bin_is(c->scope, "s") && bin_is(c->key, "k"));
    ck_assert_int_eq(c->kind, ONCE__RPC__KIND__KIND_IDEMPOTENT);
    ck_assert_uint_eq(c->payload_hash.len, 2);
    ck_assert_uint_eq(c->payload_hash.data[0], 0xab);
    ck_assert_uint_eq(c->lease_ms, 30000);
    ck_assert_uint_eq(c->ttl_ms, 5000);
    ck_assert(c->has_ts);
    ck_assert_uint_eq(c->ts_ms, 123);
    ck_assert_uint_eq(c->window_ms, 300000);
    ck_assert(bin_is(c->execution_id, "e1"));
    ck_assert(q.has_request_id);
    ck_assert_uint_eq(q.request_id[15], 0xff);
    ck_assert(q.has_cluster_id);
    ck_assert_uint_eq(q.cluster_id[0], 0x0f);
    ck_assert_uint_eq(q.cluster_id[15], 0x00);
    ck_assert_uint_eq(q.timeout_ms, 2000);
    ck_assert_uint_eq(c->request_id.len, 0); /* bound by the caller */
    httpapi_req_bind_request_id(&q);
    ck_assert_uint_eq(c->request_id.len, 16);
    ck_assert_ptr_eq(httpapi_req_message(&q), &c->base);
    httpapi_req_free(&q);

    /* The defaults: a NONCE kept 24 h; null is absent. */
    ck_assert_int_eq(parse(RPC_METHOD_CLAIM,
                           "{\"scope\":\"s\",\"key\":\"k\",\"ttl\":null,"
                           "\"request_id\":null}",
                           &q, why),
                     0);
    ck_assert_int_eq(q.u.claim.kind, ONCE__RPC__KIND__KIND_NONCE);
    ck_assert_uint_eq(q.u.claim.ttl_ms, HTTPAPI_TTL_DEFAULT_MS);
    ck_assert(!q.has_request_id);
    ck_assert(!q.has_cluster_id);
    httpapi_req_free(&q);
    /* With ts and no ttl: no default ttl (the window bounds it). */
    ck_assert_int_eq(parse(RPC_METHOD_CLAIM,
                           "{\"scope\":\"s\",\"key\":\"k\",\"ts\":0,"
                           "\"window\":1000}",
                           &q, why),
                     0);
    ck_assert_uint_eq(q.u.claim.ttl_ms, 0);
    ck_assert(q.u.claim.has_ts);
    httpapi_req_free(&q);
}
END_TEST

START_TEST(claim_refusals)
{
    const enum rpc_method m = RPC_METHOD_CLAIM;

    refused(m, "", "not JSON");
    refused(m, "{\"scope\":", "not JSON");
    refused(m, "[1]", "want a JSON object");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"colour\":1}",
            "colour: unknown field");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":\"1:2:3\"}",
            "owner_token: unknown field"); /* not a claim's */
    refused(m, "{\"scope\":\"s\",\"scope\":\"t\",\"key\":\"k\"}", "not JSON");
    refused(m, "{\"key\":\"k\"}", "scope: missing");
    refused(m, "{\"scope\":\"s\"}", "key: missing");
    refused(m, "{\"scope\":1,\"key\":\"k\"}", "scope: want a string");
    refused(m, "{\"scope\":\"a\\u0000b\",\"key\":\"k\"}", "without NUL");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"idempotent\":\"yes\"}",
            "idempotent: want true or false");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"ts\":-1}", "ts:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"ts\":\"1e3\"}", "ts:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"ttl\":\"5x\"}", "ttl:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"ttl\":-5}", "ttl:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"ttl\":true}", "ttl:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"request_id\":\"abc\"}",
            "request_id: want 32 hex digits");
    refused(m,
            "{\"scope\":\"s\",\"key\":\"k\",\"request_id\":"
            "\"0011223344556677889900aabbccddeg\"}",
            "request_id");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"cluster_id\":\"00ff\"}",
            "cluster_id: want 32 hex digits");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"cluster_id\":7}",
            "cluster_id: want a string");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"payload_hash\":\"abc\"}",
            "payload_hash:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"timeout\":\"61s\"}",
            "timeout:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"timeout\":0}", "timeout:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"max_uses\":0}",
            "max_uses: want an integer 1..64");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"max_uses\":65}", "max_uses:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"max_uses\":\"3x\"}",
            "max_uses:");
    refused(m, "{\"scope\":\"s\",\"key\":\"k\",\"sliding\":1}",
            "sliding: want true or false");
    refused(RPC_METHOD_COMPLETE,
            "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":\"1:2:3\","
            "\"max_uses\":2}",
            "max_uses: unknown field");
    refused(RPC_METHOD_LOOKUP, "{}", "no JSON body");
}
END_TEST

static char *dump(json_t *o);

/* N-use and sliding (docs/state-machine.md): fields in, counts out. */
START_TEST(claim_nuse)
{
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];
    Once__Rpc__Result r = ONCE__RPC__RESULT__INIT;
    char *s;

    ck_assert_int_eq(
        parse(RPC_METHOD_CLAIM,
              "{\"scope\":\"s\",\"key\":\"k\",\"max_uses\":64}", &q, why),
        0);
    ck_assert_uint_eq(q.u.claim.max_uses, 64);
    ck_assert(!q.u.claim.sliding);
    httpapi_req_free(&q);
    ck_assert_int_eq(parse(RPC_METHOD_CLAIM,
                           "{\"scope\":\"s\",\"key\":\"k\",\"idempotent\":true,"
                           "\"sliding\":true,\"ttl\":\"1m\"}",
                           &q, why),
                     0);
    ck_assert(q.u.claim.sliding);
    ck_assert_uint_eq(q.u.claim.max_uses, 0);
    httpapi_req_free(&q);
    r.outcome = ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED;
    r.max_uses = 3;
    r.uses = 2;
    r.uses_left = 1;
    s = dump(httpapi_json_result(RPC_METHOD_CLAIM, &r));
    ck_assert_msg(strstr(s, "\"max_uses\":3,") != NULL, "%s", s);
    ck_assert_ptr_nonnull(strstr(s, "\"uses\":2,"));
    ck_assert_ptr_nonnull(strstr(s, "\"uses_left\":1"));
    ck_assert_ptr_null(strstr(s, "sliding"));
    free(s);
    r = (Once__Rpc__Result)ONCE__RPC__RESULT__INIT;
    r.outcome = ONCE__RPC__OUTCOME__OUTCOME_DUPLICATE;
    r.sliding = true;
    s = dump(httpapi_json_result(RPC_METHOD_CLAIM, &r));
    ck_assert_msg(strstr(s, "\"sliding\":true") != NULL, "%s", s);
    ck_assert_ptr_null(strstr(s, "uses"));
    free(s);
}
END_TEST

START_TEST(complete_and_release)
{
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];

    ck_assert_int_eq(parse(RPC_METHOD_COMPLETE,
                           "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":"
                           "\"1:73:2\",\"result_b64\":\"aGk=\"}",
                           &q, why),
                     0);
    ck_assert_ptr_nonnull(q.u.complete.owner_token);
    ck_assert_uint_eq(q.u.complete.owner_token->group_id, 1);
    ck_assert_uint_eq(q.u.complete.owner_token->index, 73);
    ck_assert_uint_eq(q.u.complete.owner_token->slot, 2);
    ck_assert(bin_is(q.u.complete.result, "hi"));
    httpapi_req_free(&q);
    ck_assert_int_eq(parse(RPC_METHOD_COMPLETE,
                           "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":"
                           "\"1:73:0\",\"result_b64\":\"\"}",
                           &q, why),
                     0);
    ck_assert_uint_eq(q.u.complete.result.len, 0);
    httpapi_req_free(&q);
    ck_assert_int_eq(parse(RPC_METHOD_RELEASE,
                           "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":"
                           "\"1:73:0\",\"terminal\":true,\"error\":\"no\"}",
                           &q, why),
                     0);
    ck_assert(q.u.release.terminal);
    ck_assert(bin_is(q.u.release.error, "no"));
    httpapi_req_free(&q);

    refused(RPC_METHOD_COMPLETE, "{\"scope\":\"s\",\"key\":\"k\"}",
            "owner_token: missing");
    refused(RPC_METHOD_RELEASE, "{\"scope\":\"s\",\"key\":\"k\"}",
            "owner_token: missing");
    const char *bad_tokens[] = {"1:2",  "a:b:c", "1:2:3:4", "4294967296:1:0",
                                "1::0", ":1:0",  "1:2:"};
    for (size_t i = 0; i < sizeof bad_tokens / sizeof bad_tokens[0]; i++) {
        char body[128];

        snprintf(body, sizeof body,
                 "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":\"%s\"}",
                 bad_tokens[i]);
        refused(RPC_METHOD_COMPLETE, body, "owner_token: want");
    }
    refused(RPC_METHOD_COMPLETE,
            "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":\"1:2:0\","
            "\"result\":\"a\",\"result_b64\":\"YQ==\"}",
            "result_b64: not with result");
    const char *bad_b64[] = {"aGk", "a=bc", "aG=k", "a===", "aGk!"};
    for (size_t i = 0; i < sizeof bad_b64 / sizeof bad_b64[0]; i++) {
        char body[128];

        snprintf(body, sizeof body,
                 "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":\"1:2:0\","
                 "\"result_b64\":\"%s\"}",
                 bad_b64[i]);
        refused(RPC_METHOD_COMPLETE, body, "result_b64: want");
    }
    refused(RPC_METHOD_RELEASE,
            "{\"scope\":\"s\",\"key\":\"k\",\"owner_token\":\"1:2:0\","
            "\"result\":\"a\"}",
            "result: unknown field");
}
END_TEST

START_TEST(record_paths)
{
    struct httpapi_req q;
    char why[ERR_MSG_SIZE];
    char path[600];

    ck_assert_int_eq(httpapi_parse_record_path("/v1/records/s/k", &q, why), 0);
    ck_assert(bin_is(q.u.lookup.scope, "s") && bin_is(q.u.lookup.key, "k"));
    ck_assert_int_eq(q.method, RPC_METHOD_LOOKUP);
    httpapi_req_free(&q);
    ck_assert_int_eq(
        httpapi_parse_record_path("/v1/records/a%2fb/c%2Fd%20e", &q, why), 0);
    ck_assert(bin_is(q.u.lookup.scope, "a/b"));
    ck_assert(bin_is(q.u.lookup.key, "c/d e"));
    httpapi_req_free(&q);
    ck_assert_int_eq(httpapi_parse_record_path("/v1/records/s", &q, why),
                     -ENOENT);
    ck_assert_int_eq(httpapi_parse_record_path("/v1/records/s/k/x", &q, why),
                     -ENOENT);
    ck_assert_int_eq(httpapi_parse_record_path("/v2/records/s/k", &q, why),
                     -ENOENT);
    ck_assert_int_eq(httpapi_parse_record_path("/v1/records//k", &q, why),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "scope: must be 1..128"));
    ck_assert_int_eq(httpapi_parse_record_path("/v1/records/s/", &q, why),
                     -EINVAL);
    ck_assert_int_eq(httpapi_parse_record_path("/v1/records/s/a%00", &q, why),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "NUL"));
    ck_assert_int_eq(httpapi_parse_record_path("/v1/records/s/a%4", &q, why),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "key: bad percent-encoding"));
    ck_assert_int_eq(httpapi_parse_record_path("/v1/records/s/%zz", &q, why),
                     -EINVAL);
    /* Bounds after decoding: 128 bytes of scope as %41 pass, 129 not. */
    strcpy(path, "/v1/records/");
    for (int i = 0; i < 128; i++) {
        strcat(path, "%41");
    }
    strcat(path, "/k");
    ck_assert_int_eq(httpapi_parse_record_path(path, &q, why), 0);
    ck_assert_uint_eq(q.u.lookup.scope.len, 128);
    httpapi_req_free(&q);
    strcpy(path, "/v1/records/");
    for (int i = 0; i < 129; i++) {
        strcat(path, "A");
    }
    strcat(path, "/k");
    ck_assert_int_eq(httpapi_parse_record_path(path, &q, why), -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "scope"));
}
END_TEST

static char *dump(json_t *o)
{
    char *s;

    ck_assert_ptr_nonnull(o);
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    ck_assert_ptr_nonnull(s);
    return s;
}

static int parse_batch(const char *body, struct httpapi_batch *b, char *why)
{
    why[0] = '\0';
    return httpapi_parse_batch((const uint8_t *)body, strlen(body), b, why);
}

static void batch_refused(const char *body, const char *want)
{
    struct httpapi_batch b;
    char why[ERR_MSG_SIZE];

    ck_assert_msg(parse_batch(body, &b, why) == -EINVAL, "accepted: %s", body);
    ck_assert_msg(strstr(why, want) != NULL, "%s: \"%s\" lacks \"%s\"", body,
                  why, want);
    httpapi_batch_free(&b);
}

/* POST /v1/claims: an array or an object with items, each item a claim
 * body without the call's fields, in order; a bad item names its index. */
START_TEST(batch_bodies)
{
    struct httpapi_batch b;
    char why[ERR_MSG_SIZE];
    static char big[(RPC_CLAIM_BATCH_MAX + 1) * 24 + 16];
    size_t o = 0;

    ck_assert_int_eq(
        parse_batch("[{\"scope\":\"s\",\"key\":\"k1\",\"ttl\":\"1h\"},"
                    "{\"scope\":\"s\",\"key\":\"k2\",\"idempotent\":true,"
                    "\"request_id\":\"00112233445566778899aabbccddeeff\"}]",
                    &b, why),
        0);
    ck_assert_uint_eq(b.n, 2);
    ck_assert_uint_eq(b.msg.n_items, 2);
    ck_assert_ptr_eq(b.msg.items[1], &b.items[1].u.claim);
    ck_assert(bin_is(b.items[0].u.claim.key, "k1"));
    ck_assert_uint_eq(b.items[0].u.claim.ttl_ms, 3600000);
    ck_assert(!b.items[0].has_request_id);
    ck_assert(bin_is(b.items[1].u.claim.key, "k2"));
    ck_assert_int_eq(b.items[1].u.claim.kind, ONCE__RPC__KIND__KIND_IDEMPOTENT);
    /* a claim's default ttl, as /v1/claim */
    ck_assert_uint_eq(b.items[1].u.claim.ttl_ms, HTTPAPI_TTL_DEFAULT_MS);
    ck_assert(b.items[1].has_request_id);
    ck_assert_uint_eq(b.items[1].request_id[15], 0xff);
    ck_assert_uint_eq(b.timeout_ms, 0);
    httpapi_batch_free(&b);

    ck_assert_int_eq(
        parse_batch("{\"items\":[{\"scope\":\"s\",\"key\":\"k\"}],"
                    "\"timeout\":\"2s\","
                    "\"cluster_id\":\"0f0e0d0c0b0a09080706050403020100\"}",
                    &b, why),
        0);
    ck_assert_uint_eq(b.n, 1);
    ck_assert_uint_eq(b.timeout_ms, 2000);
    ck_assert(b.has_cluster_id);
    ck_assert_uint_eq(b.cluster_id[0], 0x0f);
    httpapi_batch_free(&b);

    batch_refused("[]", "items: want an array of 1..4096");
    batch_refused("{}", "items: want an array");
    batch_refused("{\"items\":[{\"scope\":\"s\",\"key\":\"k\"}],\"x\":1}",
                  "x: unknown field");
    batch_refused("\"s\"", "body: ");
    batch_refused("[", "not JSON");
    batch_refused("[{\"scope\":\"s\",\"key\":\"k\"},{\"scope\":\"s\"}]",
                  "items[1]: key: missing");
    batch_refused("[{\"scope\":\"s\",\"key\":\"k\"},7]",
                  "items[1]: want a JSON object");
    batch_refused("[{\"scope\":\"s\",\"key\":\"k\",\"timeout\":\"1s\"}]",
                  "items[0]: timeout: unknown field in an item");
    batch_refused("[{\"scope\":\"s\",\"key\":\"k\",\"ttl\":\"x\"}]",
                  "items[0]: ttl: want a duration");
    batch_refused("[{\"scope\":\"s\",\"key\":\"k\",\"result\":\"x\"}]",
                  "items[0]: result: unknown field");
    /* 4,097 items: refused whole; 4,096 pass */
    big[o++] = '[';
    for (unsigned i = 0; i <= RPC_CLAIM_BATCH_MAX; i++) {
        o +=
            (size_t)snprintf(big + o, sizeof big - o,
                             "%s{\"scope\":\"s\",\"key\":\"k\"}", i ? "," : "");
    }
    big[o++] = ']';
    big[o] = '\0';
    batch_refused(big, "1..4096");
    /* drop the last item: its comma, object and the closing bracket */
    o = strlen(big) - 1 - strlen(",{\"scope\":\"s\",\"key\":\"k\"}");
    big[o++] = ']';
    big[o] = '\0';
    ck_assert_msg(parse_batch(big, &b, why) == 0, "%s", why);
    ck_assert_uint_eq(b.n, RPC_CLAIM_BATCH_MAX);
    httpapi_batch_free(&b);
}
END_TEST

START_TEST(answers)
{
    Once__Rpc__Result r = ONCE__RPC__RESULT__INIT;
    uint8_t rid[16] = {0xab}, first[16] = {1};
    char *s;

    r.outcome = ONCE__RPC__OUTCOME__OUTCOME_DUPLICATE;
    r.request_id.data = rid;
    r.request_id.len = 16;
    r.first_request_id.data = first;
    r.first_request_id.len = 16;
    r.first_index = UINT64_MAX; /* over INT64_MAX: a decimal string */
    r.result.data = (uint8_t *)"hi";
    r.result.len = 2;
    r.kind = ONCE__RPC__KIND__KIND_IDEMPOTENT;
    r.state = ONCE__RPC__STATE__STATE_COMPLETED;
    s = dump(httpapi_json_result(RPC_METHOD_CLAIM, &r));
    ck_assert_msg(strstr(s, "\"outcome\":\"DUPLICATE\"") != NULL, "%s", s);
    ck_assert_ptr_nonnull(strstr(s, "\"result_b64\":\"aGk=\""));
    ck_assert_ptr_nonnull(
        strstr(s, "\"first_index\":\"18446744073709551615\""));
    ck_assert_ptr_nonnull(strstr(s, "\"kind\":\"IDEMPOTENT\""));
    ck_assert_ptr_nonnull(strstr(s, "\"state\":\"COMPLETED\""));
    ck_assert_ptr_nonnull(strstr(s, "\"retry\":false"));
    ck_assert_ptr_nonnull(
        strstr(s, "\"request_id\":\"ab000000000000000000000000000000\""));
    free(s);
    /* A refusal of the state machine carries the error fields too. */
    r = (Once__Rpc__Result)ONCE__RPC__RESULT__INIT;
    r.outcome = ONCE__RPC__OUTCOME__OUTCOME_INVALID_ARGUMENT;
    r.reason = "ttl_ms: over max_ttl";
    s = dump(httpapi_json_result(RPC_METHOD_CLAIM, &r));
    ck_assert_msg(strstr(s, "\"error\":\"INVALID_ARGUMENT\"") != NULL, "%s", s);
    ck_assert_ptr_nonnull(strstr(s, "\"applied\":\"false\""));
    ck_assert_ptr_nonnull(strstr(s, "\"message\":\"ttl_ms: over max_ttl\""));
    free(s);
    /* An execution id that is not UTF-8 comes as base64. */
    {
        Once__Rpc__Attempt at = ONCE__RPC__ATTEMPT__INIT;
        Once__Rpc__Attempt *ats[1] = {&at};

        r = (Once__Rpc__Result)ONCE__RPC__RESULT__INIT;
        r.outcome = ONCE__RPC__OUTCOME__OUTCOME_FOUND;
        at.execution_id.data = (uint8_t *)"\xff\xfe";
        at.execution_id.len = 2;
        at.outcome = ONCE__RPC__OUTCOME__OUTCOME_REPLAYED;
        r.n_attempts = 1;
        r.attempts = ats;
        s = dump(httpapi_json_result(RPC_METHOD_LOOKUP, &r));
        ck_assert_msg(strstr(s, "\"execution_id_b64\":\"//4=\"") != NULL, "%s",
                      s);
        ck_assert_ptr_nonnull(strstr(s, "\"outcome\":\"REPLAYED\""));
        ck_assert_ptr_null(strstr(s, "\"retry\":false,\"state"));
        free(s);
    }
    s = dump(httpapi_json_error(RPC_STATUS_DEADLINE_EXCEEDED, true,
                                "127.0.0.1:1", "late", rid));
    ck_assert_msg(strstr(s, "\"applied\":\"unknown\"") != NULL, "%s", s);
    ck_assert_ptr_nonnull(strstr(s, "\"error\":\"DEADLINE_EXCEEDED\""));
    ck_assert_ptr_nonnull(strstr(s, "\"leader_hint\":\"127.0.0.1:1\""));
    free(s);
    s = dump(
        httpapi_json_error(RPC_STATUS_UNAVAILABLE, false, NULL, NULL, NULL));
    ck_assert_msg(strstr(s, "\"applied\":\"false\"") != NULL, "%s", s);
    ck_assert_ptr_null(strstr(s, "request_id"));
    free(s);
    ck_assert_str_eq(
        httpapi_enum_name(&once__rpc__outcome__descriptor, 999, "OUTCOME_"),
        "UNKNOWN_VALUE");
}
END_TEST

Suite *httpapi_suite(void)
{
    Suite *s = suite_create("httpapi");
    TCase *tc = tcase_create("httpapi");

    tcase_add_test(tc, claim_fields);
    tcase_add_test(tc, claim_refusals);
    tcase_add_test(tc, claim_nuse);
    tcase_add_test(tc, complete_and_release);
    tcase_add_test(tc, record_paths);
    tcase_add_test(tc, answers);
    tcase_add_test(tc, batch_bodies);
    suite_add_tcase(s, tc);
    return s;
}
