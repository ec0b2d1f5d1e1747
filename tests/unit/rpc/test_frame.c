/* test_frame: frame headers, envelope round trips and validation
 * (src/rpc/frame.c). */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "once_rpc.pb-c.h"
#include "rpc/frame.h"

Suite *frame_suite(void);

#define MAX FRAME_MAX_DEFAULT

/* ------------------------------------------------------------------------
 * Header
 * ---------------------------------------------------------------------- */

START_TEST(header_needs_four_bytes)
{
    uint8_t b[4] = {0, 0, 0, 9};
    uint32_t n = 77;

    for (size_t len = 0; len < 4; len++) {
        ck_assert_int_eq(frame_decode_header(b, len, MAX, &n), 1);
        ck_assert_uint_eq(n, 77); /* untouched */
    }
    ck_assert_int_eq(frame_decode_header(b, 4, MAX, &n), 0);
    ck_assert_uint_eq(n, 9);
    /* Bytes after the header are not looked at. */
    ck_assert_int_eq(frame_decode_header(b, 4, MAX, &n), 0);
}
END_TEST

START_TEST(header_bounds)
{
    uint8_t zero[4] = {0, 0, 0, 0};
    uint8_t one[4] = {0, 0, 0, 1};
    uint8_t max[4] = {0x00, 0x10, 0x00, 0x00};  /* 1 MiB */
    uint8_t over[4] = {0x00, 0x10, 0x00, 0x01}; /* 1 MiB + 1 */
    uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
    uint8_t order[4] = {0x00, 0x01, 0x02, 0x03};
    uint32_t n = 0;

    ck_assert_int_eq(frame_decode_header(zero, 4, MAX, &n), RPC_E_EMPTY);
    ck_assert_int_eq(frame_decode_header(one, 4, MAX, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(frame_decode_header(max, 4, MAX, &n), 0);
    ck_assert_uint_eq(n, MAX);
    ck_assert_int_eq(frame_decode_header(over, 4, MAX, &n), RPC_E_TOOBIG);
    ck_assert_int_eq(frame_decode_header(huge, 4, MAX, &n), RPC_E_TOOBIG);
    ck_assert_int_eq(frame_decode_header(order, 4, MAX, &n), 0);
    ck_assert_uint_eq(n, 0x010203);
    /* The limit is a parameter. */
    ck_assert_int_eq(frame_decode_header(order, 4, 0x010202, &n), RPC_E_TOOBIG);
    ck_assert_int_eq(frame_decode_header(order, 4, 0x010203, &n), 0);
    ck_assert_int_eq(frame_decode_header(one, 4, 0, &n), RPC_E_LIMIT);
    ck_assert_int_eq(frame_decode_header(one, 4, FRAME_MAX_CEIL + 1, &n),
                     RPC_E_LIMIT);
    ck_assert_int_eq(frame_decode_header(one, 0, 0, &n), RPC_E_LIMIT);
}
END_TEST

START_TEST(header_encode)
{
    uint8_t b[4] = {0xaa, 0xaa, 0xaa, 0xaa};
    uint32_t n;

    ck_assert_int_eq(frame_encode_header(0, MAX, b), RPC_E_EMPTY);
    ck_assert_int_eq(frame_encode_header(MAX + 1, MAX, b), RPC_E_TOOBIG);
    ck_assert_int_eq(frame_encode_header(1, 0, b), RPC_E_LIMIT);
    ck_assert_uint_eq(b[0], 0xaa); /* untouched on failure */
    ck_assert_int_eq(frame_encode_header(MAX, MAX, b), 0);
    ck_assert_int_eq(frame_decode_header(b, 4, MAX, &n), 0);
    ck_assert_uint_eq(n, MAX);
    ck_assert_int_eq(frame_encode_header(0x01020304, FRAME_MAX_CEIL, b), 0);
    ck_assert_uint_eq(b[0], 1);
    ck_assert_uint_eq(b[1], 2);
    ck_assert_uint_eq(b[2], 3);
    ck_assert_uint_eq(b[3], 4);
}
END_TEST

/* ------------------------------------------------------------------------
 * Round trips
 * ---------------------------------------------------------------------- */

static const uint8_t cid[16] = {1, 2,  3,  4,  5,  6,  7,  8,
                                9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t bid[16] = {0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7,
                                0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf};

/* Pack a representative body for @m/@dir into a malloc'd buffer. */
static uint8_t *make_body(enum rpc_method m,
                          enum rpc_direction dir,
                          size_t *len)
{
    static uint8_t rid[16] = {0x11, 0x22};
    Once__Rpc__ClaimRequest claim = ONCE__RPC__CLAIM_REQUEST__INIT;
    Once__Rpc__Result result = ONCE__RPC__RESULT__INIT;
    Once__Rpc__ClaimResponse cresp = ONCE__RPC__CLAIM_RESPONSE__INIT;
    Once__Rpc__Member member = ONCE__RPC__MEMBER__INIT;
    Once__Rpc__MembersAddRequest add = ONCE__RPC__MEMBERS_ADD_REQUEST__INIT;
    Once__Rpc__TransferRequest tr = ONCE__RPC__TRANSFER_REQUEST__INIT;
    Once__Rpc__StatusResponse st = ONCE__RPC__STATUS_RESPONSE__INIT;
    Once__Rpc__Member *members[1] = {&member};
    Once__Rpc__LookupRequest lk = ONCE__RPC__LOOKUP_REQUEST__INIT;
    ProtobufCMessage *msg;
    const ProtobufCMessageDescriptor *d = envelope_body_descriptor(m, dir);
    ProtobufCMessage *generic = NULL;
    uint8_t *buf;

    ck_assert_ptr_nonnull(d);
    claim.scope.data = (uint8_t *)"payments";
    claim.scope.len = 8;
    claim.key.data = (uint8_t *)"nonce-1";
    claim.key.len = 7;
    claim.request_id.data = rid;
    claim.request_id.len = 16;
    claim.kind = ONCE__RPC__KIND__KIND_NONCE;
    claim.ttl_ms = 86400000;
    result.outcome = ONCE__RPC__OUTCOME__OUTCOME_REPLAYED;
    result.first_index = 42;
    cresp.result = &result;
    member.id = 3;
    member.raft_addr = "127.0.0.1:7003";
    member.client_addr = "127.0.0.1:7103";
    member.role = ONCE__RPC__ROLE__ROLE_VOTER;
    add.member = &member;
    tr.id = 2;
    st.role = ONCE__RPC__RAFT_ROLE__RAFT_ROLE_LEADER;
    st.term = 7;
    st.n_members = 1;
    st.members = members;
    lk.scope = claim.scope;
    lk.key = claim.key;
    if (d == &once__rpc__claim_request__descriptor) {
        msg = &claim.base;
    } else if (d == &once__rpc__claim_response__descriptor) {
        msg = &cresp.base;
    } else if (d == &once__rpc__members_add_request__descriptor) {
        msg = &add.base;
    } else if (d == &once__rpc__transfer_request__descriptor) {
        msg = &tr.base;
    } else if (d == &once__rpc__status_response__descriptor) {
        msg = &st.base;
    } else if (d == &once__rpc__lookup_request__descriptor ||
               d == &once__rpc__forget_request__descriptor) {
        lk.base.descriptor = d; /* same fields */
        msg = &lk.base;
    } else {
        /* Any other: an empty message of the right type. */
        generic = calloc(1, d->sizeof_message);
        ck_assert_ptr_nonnull(generic);
        d->message_init(generic);
        msg = generic;
    }
    *len = protobuf_c_message_get_packed_size(msg);
    buf = malloc(*len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(protobuf_c_message_pack(msg, buf), *len);
    free(generic);
    return buf;
}

static void assert_same(const struct envelope_view *a,
                        const struct envelope_view *b)
{
    ck_assert_uint_eq(a->call_id, b->call_id);
    ck_assert_int_eq(a->method, b->method);
    ck_assert_int_eq(a->direction, b->direction);
    ck_assert_uint_eq(a->deadline_ms, b->deadline_ms);
    ck_assert_int_eq(a->status, b->status);
    ck_assert_int_eq(a->applied, b->applied);
    ck_assert_uint_eq(a->error_len, b->error_len);
    ck_assert_mem_eq(a->error ? a->error : "", b->error ? b->error : "",
                     a->error_len);
    ck_assert_uint_eq(a->leader_hint_len, b->leader_hint_len);
    ck_assert_mem_eq(a->leader_hint ? a->leader_hint : "",
                     b->leader_hint ? b->leader_hint : "", a->leader_hint_len);
    ck_assert_int_eq(a->has_cluster_id, b->has_cluster_id);
    if (a->has_cluster_id) {
        ck_assert_mem_eq(a->cluster_id, b->cluster_id, 16);
    }
    ck_assert_uint_eq(a->node_id, b->node_id);
    ck_assert_int_eq(a->has_boot_id, b->has_boot_id);
    if (a->has_boot_id) {
        ck_assert_mem_eq(a->boot_id, b->boot_id, 16);
    }
    ck_assert_uint_eq(a->group_id, b->group_id);
    ck_assert_int_eq(a->forwarded, b->forwarded);
    ck_assert_uint_eq(a->caller_cert_len, b->caller_cert_len);
    if (a->caller_cert_len > 0) {
        ck_assert_mem_eq(a->caller_cert, b->caller_cert, a->caller_cert_len);
    }
    ck_assert_uint_eq(a->body_len, b->body_len);
    if (a->body_len > 0) {
        ck_assert_mem_eq(a->body, b->body, a->body_len);
    }
}

/* Encode @in (both ways), decode the frame, compare, unpack the body. */
static void round_trip(const struct envelope_view *in)
{
    struct envelope_view out;
    uint8_t buf[RPC_CALLER_CERT_MAX + 4096], *heap = NULL;
    size_t len, hlen;
    uint32_t env_len;
    ProtobufCMessage *body;
    char errmsg[ERR_MSG_SIZE];

    ck_assert_int_eq(envelope_encode(in, MAX, buf, sizeof buf, &len, errmsg),
                     0);
    ck_assert_uint_eq(len, FRAME_HEADER_LEN + envelope_packed_size(in));
    ck_assert_int_eq(envelope_encode_alloc(in, MAX, &heap, &hlen, errmsg), 0);
    ck_assert_uint_eq(hlen, len);
    ck_assert_mem_eq(heap, buf, len);
    free(heap);
    ck_assert_int_eq(frame_decode_header(buf, len, MAX, &env_len), 0);
    ck_assert_uint_eq(env_len, len - FRAME_HEADER_LEN);
    envelope_view_init(&out);
    ck_assert_int_eq(
        envelope_decode(buf + FRAME_HEADER_LEN, env_len, MAX, &out, errmsg), 0);
    assert_same(in, &out);
    ck_assert_uint_eq(out.error[out.error_len], '\0');
    ck_assert_uint_eq(out.leader_hint[out.leader_hint_len], '\0');
    if (out.method != RPC_METHOD_UNSPECIFIED) {
        ck_assert_int_eq(envelope_unpack_body(&out, &body, errmsg), 0);
        ck_assert_ptr_eq(body->descriptor,
                         envelope_body_descriptor(out.method, out.direction));
    } else {
        ck_assert_int_eq(envelope_unpack_body(&out, &body, errmsg), RPC_E_ENUM);
        ck_assert_ptr_null(body);
    }
    envelope_view_close(&out);
}

START_TEST(round_trip_every_method)
{
    for (int m = RPC_METHOD_CLAIM; m <= RPC_METHOD_LAST; m++) {
        for (int dir = RPC_REQUEST; dir <= RPC_RESPONSE; dir++) {
            struct envelope_view v;
            size_t body_len;
            uint8_t *body = make_body((enum rpc_method)m,
                                      (enum rpc_direction)dir, &body_len);

            memset(&v, 0, sizeof v);
            v.call_id = 1000u + (unsigned)m;
            v.method = (enum rpc_method)m;
            v.direction = (enum rpc_direction)dir;
            v.deadline_ms = dir == RPC_REQUEST ? 5000 : 0;
            v.has_cluster_id = true;
            memcpy(v.cluster_id, cid, 16);
            v.node_id = 3;
            v.has_boot_id = dir == RPC_RESPONSE;
            memcpy(v.boot_id, bid, 16);
            v.group_id = 1;
            v.body = body;
            v.body_len = body_len;
            round_trip(&v);
            free(body);
        }
    }
}
END_TEST

START_TEST(round_trip_errors_and_extremes)
{
    static char long_error[RPC_ERROR_MAX + 1];
    static char long_hint[RPC_ADDR_MAX + 1];
    struct envelope_view v;
    const enum rpc_status st[] = {
        RPC_STATUS_UNKNOWN,
        RPC_STATUS_INVALID_ARGUMENT,
        RPC_STATUS_DEADLINE_EXCEEDED,
        RPC_STATUS_PERMISSION_DENIED,
        RPC_STATUS_RESOURCE_EXHAUSTED,
        RPC_STATUS_FAILED_PRECONDITION,
        RPC_STATUS_UNAVAILABLE,
        RPC_STATUS_WRONG_GROUP,
        RPC_STATUS_MOVING,
    };

    memset(long_error, 'e', RPC_ERROR_MAX);
    memset(long_hint, '9', RPC_ADDR_MAX);
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        memset(&v, 0, sizeof v);
        v.call_id = UINT64_MAX;
        v.method = RPC_METHOD_CLAIM;
        v.direction = RPC_RESPONSE;
        v.status = st[i];
        v.applied = i % 2 ? RPC_APPLIED_FALSE : RPC_APPLIED_UNKNOWN;
        v.error = "no leader";
        v.error_len = 9;
        v.leader_hint = "127.0.0.1:7102";
        v.leader_hint_len = 14;
        v.node_id = UINT64_MAX;
        v.group_id = UINT32_MAX;
        ck_assert_str_ne(rpc_status_name(st[i]), "unknown");
        round_trip(&v);
    }
    /* Connection-level error answer: no method, no call id. */
    memset(&v, 0, sizeof v);
    v.direction = RPC_RESPONSE;
    v.status = RPC_STATUS_INVALID_ARGUMENT;
    v.applied = RPC_APPLIED_FALSE;
    v.error = long_error;
    v.error_len = RPC_ERROR_MAX;
    v.leader_hint = long_hint;
    v.leader_hint_len = RPC_ADDR_MAX;
    round_trip(&v);
    /* All defaults but the method: an empty-ish request. */
    memset(&v, 0, sizeof v);
    v.method = RPC_METHOD_STATUS;
    v.direction = RPC_REQUEST;
    v.deadline_ms = RPC_DEADLINE_MAX;
    round_trip(&v);
    /* A forwarded request; a response may not be marked forwarded. */
    v.forwarded = true;
    round_trip(&v);
    {
        uint8_t frame[64];
        size_t len;
        char errmsg[ERR_MSG_SIZE];

        v.direction = RPC_RESPONSE;
        ck_assert_int_eq(
            envelope_encode(&v, MAX, frame, sizeof frame, &len, errmsg),
            RPC_E_FIELDS);
    }
}
END_TEST

/* envelope_view_clear zeroes every public field (whatever was there) and
 * leaves the private part alone: a cleared view encodes exactly as a view
 * zeroed in full. */
START_TEST(clear_zeroes_the_public_fields)
{
    static struct envelope_view a, b;
    uint8_t fa[128], fb[128];
    size_t la, lb;
    char errmsg[ERR_MSG_SIZE];

    memset(&a, 0xa5, sizeof a);
    envelope_view_clear(&a);
    memset(&b, 0, sizeof b);
    ck_assert_int_eq(memcmp(&a, &b, offsetof(struct envelope_view, arena)), 0);
    ck_assert_uint_eq(a.caller_cert_len, 0);
    ck_assert_ptr_null(a.caller_cert);
    ck_assert(!a.forwarded);
    ck_assert_uint_eq((uint8_t)a.error_buf[0], 0xa5); /* private: untouched */
    a.call_id = b.call_id = 9;
    a.method = b.method = RPC_METHOD_CLAIM;
    a.direction = b.direction = RPC_RESPONSE;
    a.status = b.status = RPC_STATUS_OK;
    ck_assert_int_eq(envelope_encode(&a, MAX, fa, sizeof fa, &la, errmsg), 0);
    ck_assert_int_eq(envelope_encode(&b, MAX, fb, sizeof fb, &lb, errmsg), 0);
    ck_assert_uint_eq(la, lb);
    ck_assert_int_eq(memcmp(fa, fb, la), 0);
}
END_TEST

/* Envelope.caller_cert: only in a forwarded request, bounded. */
START_TEST(caller_cert_rules)
{
    static uint8_t der[RPC_CALLER_CERT_MAX + 1];
    struct envelope_view v;
    uint8_t frame[64];
    size_t len;
    char errmsg[ERR_MSG_SIZE];

    memset(der, 0x30, sizeof der);
    memset(&v, 0, sizeof v);
    v.method = RPC_METHOD_CLAIM;
    v.direction = RPC_REQUEST;
    v.forwarded = true;
    v.caller_cert = der;
    v.caller_cert_len = RPC_CALLER_CERT_MAX;
    round_trip(&v);
    v.caller_cert_len = RPC_CALLER_CERT_MAX + 1;
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_FIELDS);
    ck_assert_msg(strstr(errmsg, "caller_cert") != NULL, "%s", errmsg);
    v.caller_cert_len = 10;
    v.forwarded = false;
    ck_assert_int_eq(
        envelope_encode(&v, MAX, frame, sizeof frame, &len, errmsg),
        RPC_E_FIELDS);
    ck_assert_msg(strstr(errmsg, "not forwarded") != NULL, "%s", errmsg);
    v.direction = RPC_RESPONSE;
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_FIELDS);
    /* and on the wire: a request that is not forwarded is refused */
    {
        static const uint8_t wire[] = {0x10, 0x01, 0x18, 0x01,
                                       0x7a, 0x02, 0x30, 0x00};
        struct envelope_view d;

        envelope_view_init(&d);
        ck_assert_int_eq(envelope_decode(wire, sizeof wire, MAX, &d, errmsg),
                         RPC_E_FIELDS);
        envelope_view_close(&d);
    }
}
END_TEST

START_TEST(large_body_up_to_the_limit)
{
    struct envelope_view v, out;
    uint8_t *body = malloc(MAX);
    uint8_t *frame = NULL, small[64];
    size_t len, need;
    char errmsg[ERR_MSG_SIZE];

    ck_assert_ptr_nonnull(body);
    memset(body, 0x5a, MAX);
    memset(&v, 0, sizeof v);
    v.method = RPC_METHOD_COMPLETE;
    v.direction = RPC_REQUEST;
    v.body = body;
    v.body_len = MAX - 8; /* tag 0x6a + 4-byte varint length + body */
    ck_assert_int_eq(envelope_encode_alloc(&v, MAX, &frame, &len, errmsg), 0);
    ck_assert_uint_le(len - FRAME_HEADER_LEN, MAX);
    envelope_view_init(&out);
    ck_assert_int_eq(envelope_decode(frame + FRAME_HEADER_LEN,
                                     len - FRAME_HEADER_LEN, MAX, &out, errmsg),
                     0);
    assert_same(&v, &out);
    /* A smaller limit refuses the same frame, before decoding. */
    ck_assert_int_eq(
        envelope_decode(frame + FRAME_HEADER_LEN, len - FRAME_HEADER_LEN, 4096,
                        &out, errmsg),
        RPC_E_TOOBIG);
    envelope_view_close(&out);
    free(frame);
    /* Over the limit: refused at encode time. */
    v.body_len = MAX;
    ck_assert_int_eq(envelope_encode_alloc(&v, MAX, &frame, &len, errmsg),
                     RPC_E_TOOBIG);
    ck_assert_ptr_null(frame);
    ck_assert_int_eq(envelope_encode(&v, MAX, body, MAX, &len, errmsg),
                     RPC_E_TOOBIG);
    /* Buffer too small: size needed reported. */
    v.body_len = 100;
    ck_assert_int_eq(
        envelope_encode(&v, MAX, small, sizeof small, &need, errmsg),
        RPC_E_NOSPACE);
    ck_assert_uint_eq(need, FRAME_HEADER_LEN + envelope_packed_size(&v));
    free(body);
}
END_TEST

/* ------------------------------------------------------------------------
 * Validation: envelopes packed directly, bypassing envelope_check.
 * ---------------------------------------------------------------------- */

static void valid_request(Once__Rpc__Envelope *e)
{
    once__rpc__envelope__init(e);
    e->call_id = 5;
    e->method = ONCE__RPC__METHOD__METHOD_CLAIM;
    e->direction = ONCE__RPC__DIRECTION__DIRECTION_REQUEST;
}

static void valid_error(Once__Rpc__Envelope *e)
{
    once__rpc__envelope__init(e);
    e->call_id = 5;
    e->method = ONCE__RPC__METHOD__METHOD_CLAIM;
    e->direction = ONCE__RPC__DIRECTION__DIRECTION_RESPONSE;
    e->status = ONCE__RPC__STATUS__STATUS_UNAVAILABLE;
    e->applied = ONCE__RPC__APPLIED__APPLIED_FALSE;
    e->error.data = (uint8_t *)"no leader";
    e->error.len = 9;
}

/* Decode @e's encoding; return the code and check errmsg is set. */
static int decode_pb(const Once__Rpc__Envelope *e)
{
    uint8_t *buf = malloc(once__rpc__envelope__get_packed_size(e) + 1);
    size_t len = once__rpc__envelope__pack(e, buf);
    struct envelope_view v;
    char errmsg[ERR_MSG_SIZE] = "";
    int rv;

    envelope_view_init(&v);
    rv = envelope_decode(buf, len, MAX, &v, errmsg);
    if (rv != 0) {
        ck_assert_int_le(rv, -1500);
        ck_assert_uint_gt(strlen(errmsg), 0);
        ck_assert_str_ne(rpc_strerror(rv), "unknown error");
    }
    envelope_view_close(&v);
    free(buf);
    return rv;
}

START_TEST(refuses_bad_ids)
{
    static uint8_t id[17];
    Once__Rpc__Envelope e;

    for (size_t len = 1; len <= 17; len++) {
        valid_request(&e);
        e.cluster_id.data = id;
        e.cluster_id.len = len;
        ck_assert_int_eq(decode_pb(&e), len == 16 ? 0 : RPC_E_ID);
        valid_error(&e);
        e.boot_id.data = id;
        e.boot_id.len = len;
        ck_assert_int_eq(decode_pb(&e), len == 16 ? 0 : RPC_E_ID);
    }
}
END_TEST

START_TEST(refuses_bad_texts)
{
    static uint8_t text[RPC_ERROR_MAX + 2];
    Once__Rpc__Envelope e;

    memset(text, 'x', sizeof text);
    valid_error(&e);
    e.error.data = text;
    e.error.len = RPC_ERROR_MAX;
    ck_assert_int_eq(decode_pb(&e), 0);
    e.error.len = RPC_ERROR_MAX + 1;
    ck_assert_int_eq(decode_pb(&e), RPC_E_STRING);
    valid_error(&e);
    e.leader_hint.data = text;
    e.leader_hint.len = RPC_ADDR_MAX;
    ck_assert_int_eq(decode_pb(&e), 0);
    e.leader_hint.len = RPC_ADDR_MAX + 1;
    ck_assert_int_eq(decode_pb(&e), RPC_E_STRING);
    /* An embedded NUL is refused wherever it is. */
    valid_error(&e);
    e.error.data = (uint8_t *)"no\0leader";
    ck_assert_int_eq(decode_pb(&e), RPC_E_STRING);
    valid_error(&e);
    e.leader_hint.data = (uint8_t *)"127.0.0.1:7\0";
    e.leader_hint.len = 12;
    ck_assert_int_eq(decode_pb(&e), RPC_E_STRING);
}
END_TEST

START_TEST(refuses_bad_enums)
{
    const int bad_methods[] = {-1,   RPC_METHOD_LAST + 1, RPC_METHOD_LAST + 2,
                               1000, INT32_MAX,           INT32_MIN};
    const int bad_status[] = {1, 5, 6, 10, 13, 15, 99, 102, -3};
    Once__Rpc__Envelope e;

    for (size_t i = 0; i < sizeof bad_methods / sizeof bad_methods[0]; i++) {
        valid_request(&e);
        e.method = (Once__Rpc__Method)bad_methods[i];
        ck_assert_int_eq(decode_pb(&e), RPC_E_ENUM);
    }
    for (size_t i = 0; i < sizeof bad_status / sizeof bad_status[0]; i++) {
        valid_error(&e);
        e.status = (Once__Rpc__Status)bad_status[i];
        ck_assert_int_eq(decode_pb(&e), RPC_E_ENUM);
    }
    valid_request(&e);
    e.direction = ONCE__RPC__DIRECTION__DIRECTION_UNSPECIFIED;
    ck_assert_int_eq(decode_pb(&e), RPC_E_ENUM);
    e.direction = (Once__Rpc__Direction)3;
    ck_assert_int_eq(decode_pb(&e), RPC_E_ENUM);
    valid_error(&e);
    e.applied = (Once__Rpc__Applied)3;
    ck_assert_int_eq(decode_pb(&e), RPC_E_ENUM);
    e.applied = (Once__Rpc__Applied)-1;
    ck_assert_int_eq(decode_pb(&e), RPC_E_ENUM);
}
END_TEST

START_TEST(refuses_bad_deadline)
{
    Once__Rpc__Envelope e;

    valid_request(&e);
    e.deadline_ms = RPC_DEADLINE_MAX;
    ck_assert_int_eq(decode_pb(&e), 0);
    e.deadline_ms = RPC_DEADLINE_MAX + 1ull;
    ck_assert_int_eq(decode_pb(&e), RPC_E_DEADLINE);
    e.deadline_ms = UINT64_MAX;
    ck_assert_int_eq(decode_pb(&e), RPC_E_DEADLINE);
}
END_TEST

START_TEST(refuses_inconsistent_fields)
{
    Once__Rpc__Envelope e;

    /* Requests: a method, no status, no applied, no error, no hint. */
    valid_request(&e);
    e.method = ONCE__RPC__METHOD__METHOD_UNSPECIFIED;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS);
    valid_request(&e);
    e.status = ONCE__RPC__STATUS__STATUS_UNAVAILABLE;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS);
    valid_request(&e);
    e.applied = ONCE__RPC__APPLIED__APPLIED_FALSE;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS);
    valid_request(&e);
    e.error.data = (uint8_t *)"x";
    e.error.len = 1;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS);
    valid_request(&e);
    e.leader_hint.data = (uint8_t *)"127.0.0.1:1";
    e.leader_hint.len = 11;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS);
    /* OK answers: a method, no applied, no error. */
    valid_error(&e);
    e.status = ONCE__RPC__STATUS__STATUS_OK;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS); /* applied + error */
    e.applied = ONCE__RPC__APPLIED__APPLIED_UNSPECIFIED;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS); /* error */
    e.error.len = 0;
    ck_assert_int_eq(decode_pb(&e), 0);
    e.method = ONCE__RPC__METHOD__METHOD_UNSPECIFIED;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS);
    /* Error answers say whether the call was applied. */
    valid_error(&e);
    e.applied = ONCE__RPC__APPLIED__APPLIED_UNSPECIFIED;
    ck_assert_int_eq(decode_pb(&e), RPC_E_FIELDS);
    e.applied = ONCE__RPC__APPLIED__APPLIED_UNKNOWN;
    ck_assert_int_eq(decode_pb(&e), 0);
}
END_TEST

START_TEST(encode_applies_the_same_rules)
{
    struct envelope_view v;
    uint8_t buf[256], *heap = (uint8_t *)&v;
    size_t len = 0;
    char errmsg[ERR_MSG_SIZE];

    memset(&v, 0, sizeof v);
    v.method = RPC_METHOD_CLAIM;
    v.direction = RPC_REQUEST;
    ck_assert_int_eq(envelope_check(&v, errmsg), 0);
    v.status = RPC_STATUS_UNAVAILABLE;
    ck_assert_int_eq(envelope_encode(&v, MAX, buf, sizeof buf, &len, errmsg),
                     RPC_E_FIELDS);
    ck_assert_int_eq(envelope_encode_alloc(&v, MAX, &heap, &len, errmsg),
                     RPC_E_FIELDS);
    ck_assert_ptr_null(heap);
    v.status = RPC_STATUS_OK;
    v.method = (enum rpc_method)99;
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_ENUM);
    v.method = RPC_METHOD_CLAIM;
    v.direction = (enum rpc_direction)0;
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_ENUM);
    v.direction = RPC_RESPONSE;
    v.status = (enum rpc_status)1;
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_ENUM);
    v.status = RPC_STATUS_OK;
    v.applied = (enum rpc_applied)7;
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_ENUM);
    v.applied = RPC_APPLIED_UNSPECIFIED;
    v.deadline_ms = RPC_DEADLINE_MAX + 1ull;
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_DEADLINE);
    v.deadline_ms = 0;
    v.error_len = 3; /* NULL text with a length */
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_STRING);
    v.error_len = 0;
    v.body_len = 3; /* NULL body with a length */
    ck_assert_int_eq(envelope_check(&v, errmsg), RPC_E_FIELDS);
    v.body_len = 0;
    ck_assert_int_eq(envelope_check(&v, NULL), 0);
    v.leader_hint = "a\0b";
    v.leader_hint_len = 3;
    ck_assert_int_eq(envelope_check(&v, NULL), RPC_E_STRING); /* no errmsg */
}
END_TEST

START_TEST(refuses_garbage_and_bad_lengths)
{
    static const uint8_t junk[][6] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, /* endless varint */
        {0x6a, 0x7f, 0x00, 0x00, 0x00, 0x00}, /* body longer than input */
        {0x07, 0x00, 0x00, 0x00, 0x00, 0x00}, /* wire type 7 */
        {0x00, 0x01, 0x00, 0x00, 0x00, 0x00}, /* field number 0 */
        {0x0b, 0x00, 0x00, 0x00, 0x00, 0x00}, /* start group, never ended */
    };
    struct envelope_view v;
    char errmsg[ERR_MSG_SIZE];

    envelope_view_init(&v);
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        ck_assert_int_eq(envelope_decode(junk[i], 6, MAX, &v, errmsg),
                         RPC_E_MALFORMED);
    }
    ck_assert_int_eq(envelope_decode(junk[0], 0, MAX, &v, errmsg), RPC_E_EMPTY);
    ck_assert_int_eq(envelope_decode(junk[0], 6, 5, &v, errmsg), RPC_E_TOOBIG);
    ck_assert_int_eq(envelope_decode(junk[0], 6, 0, &v, errmsg), RPC_E_LIMIT);
    /* A frame of defaults only: direction missing. */
    ck_assert_int_eq(
        envelope_decode((const uint8_t *)"\x08\x01", 2, MAX, &v, errmsg),
        RPC_E_ENUM);
    envelope_view_close(&v);
}
END_TEST

START_TEST(refuses_costly_unknown_fields)
{
    /* A valid request followed by thousands of 2-byte unknown fields:
     * protobuf-c keeps each (~40 bytes), over the budget. */
    size_t n = 20000, len = 0;
    uint8_t *buf = malloc(6 + 3 * n);
    struct envelope_view v;
    char errmsg[ERR_MSG_SIZE];

    buf[len++] = 0x10; /* method = CLAIM */
    buf[len++] = 0x01;
    buf[len++] = 0x18; /* direction = REQUEST */
    buf[len++] = 0x01;
    for (size_t i = 0; i < n; i++) {
        buf[len++] = 0xc0; /* field 1000 (unknown), varint */
        buf[len++] = 0x3e;
        buf[len++] = 0x00; /* value 0 */
    }
    envelope_view_init(&v);
    ck_assert_int_eq(envelope_decode(buf, len, MAX, &v, errmsg), RPC_E_BUDGET);
    /* A few unknown fields (a newer peer) are fine. */
    ck_assert_int_eq(envelope_decode(buf, 4 + 3 * 10, MAX, &v, errmsg), 0);
    ck_assert_int_eq(v.method, RPC_METHOD_CLAIM);
    envelope_view_close(&v);
    free(buf);
}
END_TEST

START_TEST(bad_body_is_refused_separately)
{
    struct envelope_view in, out;
    uint8_t frame[64];
    size_t len;
    ProtobufCMessage *body = (ProtobufCMessage *)&in;
    char errmsg[ERR_MSG_SIZE];

    memset(&in, 0, sizeof in);
    in.method = RPC_METHOD_CLAIM;
    in.direction = RPC_REQUEST;
    in.body = (const uint8_t *)"\xff\xff\xff";
    in.body_len = 3;
    ck_assert_int_eq(
        envelope_encode(&in, MAX, frame, sizeof frame, &len, errmsg), 0);
    envelope_view_init(&out);
    ck_assert_int_eq(envelope_decode(frame + 4, len - 4, MAX, &out, errmsg), 0);
    ck_assert_int_eq(envelope_unpack_body(&out, &body, errmsg),
                     RPC_E_MALFORMED);
    ck_assert_ptr_null(body);
    ck_assert_ptr_null(
        envelope_body_descriptor(RPC_METHOD_UNSPECIFIED, RPC_REQUEST));
    ck_assert_ptr_null(
        envelope_body_descriptor((enum rpc_method)77, RPC_RESPONSE));
    envelope_view_close(&out);
}
END_TEST

/* An over-long tag (0x80 0x00) is field number 0: protobuf-c would keep it
 * as an unknown field and re-encode it as 0x00, which nothing decodes. Found
 * by fuzz_frame; refused in the body, in a nested message and in the
 * envelope itself. */
START_TEST(field_number_zero_is_refused)
{
    struct envelope_view in, out;
    uint8_t frame[64];
    size_t len;
    ProtobufCMessage *body = NULL;
    char errmsg[ERR_MSG_SIZE];
    /* ClaimRequest{scope "s", field 0 varint 5}; then one whose field 0
     * sits in a nested message: MembersListResponse{members {field 0}}. */
    static const uint8_t flat[] = {0x0a, 0x01, 's', 0x80, 0x00, 0x05};
    static const uint8_t ok[] = {0x0a, 0x01, 's'};
    static const uint8_t nested[] = {0x0a, 0x03, 0x80, 0x00, 0x05};
    /* Envelope{call_id 1, method CLAIM, direction REQUEST, field 0}. */
    static const uint8_t env[] = {0x08, 0x01, 0x10, 0x01, 0x18,
                                  0x01, 0x80, 0x00, 0x05};

    memset(&in, 0, sizeof in);
    in.method = RPC_METHOD_CLAIM;
    in.direction = RPC_REQUEST;
    in.body = flat;
    in.body_len = sizeof flat;
    ck_assert_int_eq(
        envelope_encode(&in, MAX, frame, sizeof frame, &len, errmsg), 0);
    envelope_view_init(&out);
    ck_assert_int_eq(envelope_decode(frame + 4, len - 4, MAX, &out, errmsg), 0);
    ck_assert_int_eq(envelope_unpack_body(&out, &body, errmsg),
                     RPC_E_MALFORMED);
    ck_assert_ptr_null(body);
    ck_assert_ptr_nonnull(strstr(errmsg, "field number 0"));
    envelope_view_close(&out);

    in.body = ok;
    in.body_len = sizeof ok;
    ck_assert_int_eq(
        envelope_encode(&in, MAX, frame, sizeof frame, &len, errmsg), 0);
    envelope_view_init(&out);
    ck_assert_int_eq(envelope_decode(frame + 4, len - 4, MAX, &out, errmsg), 0);
    ck_assert_int_eq(envelope_unpack_body(&out, &body, errmsg), 0);
    ck_assert_ptr_nonnull(body);
    envelope_view_close(&out);

    in.method = RPC_METHOD_MEMBERS_LIST;
    in.direction = RPC_RESPONSE;
    in.body = nested;
    in.body_len = sizeof nested;
    ck_assert_int_eq(
        envelope_encode(&in, MAX, frame, sizeof frame, &len, errmsg), 0);
    envelope_view_init(&out);
    ck_assert_int_eq(envelope_decode(frame + 4, len - 4, MAX, &out, errmsg), 0);
    ck_assert_int_eq(envelope_unpack_body(&out, &body, errmsg),
                     RPC_E_MALFORMED);
    envelope_view_close(&out);

    envelope_view_init(&out);
    ck_assert_int_eq(envelope_decode(env, sizeof env, MAX, &out, errmsg),
                     RPC_E_MALFORMED);
    ck_assert_ptr_nonnull(strstr(errmsg, "field number 0"));
    envelope_view_close(&out);
}
END_TEST

/* ------------------------------------------------------------------------
 * Truncated and bit-flipped frames
 * ---------------------------------------------------------------------- */

static size_t full_frame(uint8_t *buf, size_t cap)
{
    struct envelope_view v;
    size_t len;

    memset(&v, 0, sizeof v);
    v.call_id = 0x0102030405060708ull;
    v.method = RPC_METHOD_RELEASE;
    v.direction = RPC_RESPONSE;
    v.status = RPC_STATUS_UNKNOWN;
    v.applied = RPC_APPLIED_UNKNOWN;
    v.error = "leader lost during apply";
    v.error_len = strlen(v.error);
    v.leader_hint = "10.0.0.2:7102";
    v.leader_hint_len = strlen(v.leader_hint);
    v.has_cluster_id = true;
    memcpy(v.cluster_id, cid, 16);
    v.node_id = 2;
    v.has_boot_id = true;
    memcpy(v.boot_id, bid, 16);
    v.group_id = 1;
    v.deadline_ms = 1234;
    v.body = (const uint8_t *)"\x0a\x02\x08\x0c";
    v.body_len = 4;
    ck_assert_int_eq(envelope_encode(&v, MAX, buf, cap, &len, NULL), 0);
    return len;
}

/* Decode @len bytes; if accepted, it must re-encode to a frame that
 * decodes to the same view. */
static void decode_or_refuse(const uint8_t *env, size_t len)
{
    struct envelope_view a, b;
    uint8_t *copy = malloc(len ? len : 1), *re = NULL;
    size_t re_len;
    char errmsg[ERR_MSG_SIZE];
    int rv;

    memcpy(copy, env, len); /* exact size: overreads are caught */
    envelope_view_init(&a);
    envelope_view_init(&b);
    rv = envelope_decode(copy, len, MAX, &a, errmsg);
    if (rv == 0) {
        ck_assert_int_eq(envelope_encode_alloc(&a, MAX, &re, &re_len, errmsg),
                         0);
        ck_assert_int_eq(envelope_decode(re + 4, re_len - 4, MAX, &b, errmsg),
                         0);
        assert_same(&a, &b);
        free(re);
    } else {
        ck_assert_int_le(rv, -1500);
    }
    envelope_view_close(&a);
    envelope_view_close(&b);
    free(copy);
}

START_TEST(truncated_frames)
{
    uint8_t buf[512];
    size_t len = full_frame(buf, sizeof buf);
    uint32_t env_len;
    int refused = 0;

    for (size_t cut = 0; cut < len; cut++) {
        int rv = frame_decode_header(buf, cut, MAX, &env_len);

        ck_assert_int_eq(rv, cut < 4 ? 1 : 0);
        if (cut > 4) {
            struct envelope_view v;

            envelope_view_init(&v);
            if (envelope_decode(buf + 4, cut - 4, MAX, &v, NULL) != 0) {
                refused++;
            }
            envelope_view_close(&v);
            decode_or_refuse(buf + 4, cut - 4);
        }
    }
    /* Most cuts land inside a field. */
    ck_assert_int_gt(refused, (int)(len - 4) / 2);
}
END_TEST

START_TEST(bit_flipped_frames)
{
    uint8_t buf[512];
    size_t len = full_frame(buf, sizeof buf);

    for (size_t bit = 0; bit < (len - 4) * 8; bit++) {
        buf[4 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
        decode_or_refuse(buf + 4, len - 4);
        buf[4 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    /* And the untouched frame still decodes. */
    decode_or_refuse(buf + 4, len - 4);
}
END_TEST

/* A ClaimBatch of @n items of small claims, packed as a @dir body, through
 * a whole frame: 0 if the body unpacked (with @n items), else the code. */
static int batch_frame(size_t n, enum rpc_direction dir, size_t *body_len)
{
    Once__Rpc__ClaimBatchRequest req = ONCE__RPC__CLAIM_BATCH_REQUEST__INIT;
    Once__Rpc__ClaimBatchResponse resp = ONCE__RPC__CLAIM_BATCH_RESPONSE__INIT;
    Once__Rpc__ClaimRequest *items = calloc(n, sizeof *items);
    Once__Rpc__ClaimRequest **ip = calloc(n, sizeof *ip);
    Once__Rpc__ClaimBatchItem *answers = calloc(n, sizeof *answers);
    Once__Rpc__ClaimBatchItem **ap = calloc(n, sizeof *ap);
    Once__Rpc__Result *results = calloc(n, sizeof *results);
    static uint8_t rid[16] = {1, 2, 3};
    const ProtobufCMessage *msg;
    struct envelope_view v, out;
    ProtobufCMessage *body = NULL;
    char errmsg[ERR_MSG_SIZE];
    uint8_t *frame = NULL, *packed;
    size_t flen;
    uint32_t env_len;
    int rv;

    ck_assert(items && ip && answers && ap && results);
    for (size_t i = 0; i < n; i++) {
        once__rpc__claim_request__init(&items[i]);
        items[i].scope = (ProtobufCBinaryData){1, (uint8_t *)"s"};
        items[i].key = (ProtobufCBinaryData){1, (uint8_t *)"k"};
        items[i].request_id = (ProtobufCBinaryData){16, rid};
        items[i].kind = ONCE__RPC__KIND__KIND_NONCE;
        items[i].ttl_ms = 1;
        ip[i] = &items[i];
        once__rpc__claim_batch_item__init(&answers[i]);
        once__rpc__result__init(&results[i]);
        results[i].outcome = ONCE__RPC__OUTCOME__OUTCOME_ACCEPTED;
        answers[i].result = &results[i];
        ap[i] = &answers[i];
    }
    req.n_items = resp.n_items = n;
    req.items = ip;
    resp.items = ap;
    msg = dir == RPC_REQUEST ? &req.base : &resp.base;
    *body_len = protobuf_c_message_get_packed_size(msg);
    packed = malloc(*body_len + 1);
    ck_assert_ptr_nonnull(packed);
    protobuf_c_message_pack(msg, packed);
    memset(&v, 0, sizeof v);
    v.call_id = 7;
    v.method = RPC_METHOD_CLAIM_BATCH;
    v.direction = dir;
    v.has_cluster_id = dir == RPC_RESPONSE;
    memcpy(v.cluster_id, cid, 16);
    v.body = packed;
    v.body_len = *body_len;
    ck_assert_int_eq(
        envelope_encode_alloc(&v, FRAME_MAX_DEFAULT, &frame, &flen, errmsg), 0);
    ck_assert_int_eq(
        frame_decode_header(frame, flen, FRAME_MAX_DEFAULT, &env_len), 0);
    envelope_view_init(&out);
    ck_assert_int_eq(envelope_decode(frame + FRAME_HEADER_LEN, env_len,
                                     FRAME_MAX_DEFAULT, &out, errmsg),
                     0);
    rv = envelope_unpack_body(&out, &body, errmsg);
    if (rv == 0) {
        size_t got =
            dir == RPC_REQUEST
                ? ((Once__Rpc__ClaimBatchRequest *)(void *)body)->n_items
                : ((Once__Rpc__ClaimBatchResponse *)(void *)body)->n_items;

        ck_assert_uint_eq(got, n);
    }
    envelope_view_close(&out);
    free(frame);
    free(packed);
    free(items);
    free(ip);
    free(answers);
    free(ap);
    free(results);
    return rv;
}

/* The largest batch of the smallest items, whose unpacked structs are many
 * times their bytes, still unpacks within the decode budget (frame.c's
 * batch_budget), both ways; so do its bounds' neighbours. */
START_TEST(claim_batch_within_budget)
{
    size_t len;

    ck_assert_int_eq(batch_frame(RPC_CLAIM_BATCH_MAX, RPC_REQUEST, &len), 0);
    ck_assert_uint_le(len, RPC_CLAIM_BATCH_BYTES_MAX);
    ck_assert_int_eq(batch_frame(RPC_CLAIM_BATCH_MAX, RPC_RESPONSE, &len), 0);
    ck_assert_int_eq(batch_frame(1, RPC_REQUEST, &len), 0);
    /* The check of the count is the service's (service_batch.c): the
     * frame layer decodes what fits its budget. */
    ck_assert_int_eq(batch_frame(RPC_CLAIM_BATCH_MAX + 1, RPC_REQUEST, &len),
                     0);
    /* The byte bound leaves room for a forwarded envelope's caller
     * certificate within the default frame. */
    ck_assert_uint_le(RPC_CLAIM_BATCH_BYTES_MAX + RPC_CALLER_CERT_MAX + 1024,
                      FRAME_MAX_DEFAULT);
}
END_TEST

START_TEST(names)
{
    ck_assert_str_eq(rpc_method_name(RPC_METHOD_CLAIM), "CLAIM");
    ck_assert_str_eq(rpc_method_name(RPC_METHOD_SNAPSHOT_TAKE),
                     "SNAPSHOT_TAKE");
    ck_assert_str_eq(rpc_method_name(RPC_METHOD_BACKUP_CLOSE), "BACKUP_CLOSE");
    ck_assert_str_eq(rpc_method_name(RPC_METHOD_QUOTA_SET), "QUOTA_SET");
    ck_assert_str_eq(rpc_method_name(RPC_METHOD_SCHEMA_UPGRADE),
                     "SCHEMA_UPGRADE");
    ck_assert_str_eq(rpc_method_name(RPC_METHOD_READ_INDEX), "READ_INDEX");
    ck_assert_str_eq(rpc_method_name(RPC_METHOD_CLAIM_BATCH), "CLAIM_BATCH");
    ck_assert_str_eq(rpc_method_name((enum rpc_method)(RPC_METHOD_LAST + 1)),
                     "unknown");
    ck_assert_str_eq(rpc_status_name(RPC_STATUS_UNAVAILABLE), "UNAVAILABLE");
    ck_assert_str_eq(rpc_status_name((enum rpc_status)1), "unknown");
    ck_assert_str_eq(rpc_applied_name(RPC_APPLIED_FALSE), "false");
    ck_assert_str_eq(rpc_applied_name(RPC_APPLIED_UNKNOWN), "unknown");
    ck_assert_str_eq(rpc_strerror(0), "success");
    for (int rv = RPC_E_EMPTY; rv >= RPC_E_NOMEM; rv--) {
        ck_assert_str_ne(rpc_strerror(rv), "unknown error");
    }
    /* -1 is -EPERM under common/err.h; a number in no table is unknown. */
    ck_assert_str_eq(rpc_strerror(RPC_E_NOMEM - 50), "unknown error");
}
END_TEST

Suite *frame_suite(void)
{
    Suite *s = suite_create("frame");
    TCase *tc = tcase_create("frame");

    tcase_add_test(tc, header_needs_four_bytes);
    tcase_add_test(tc, header_bounds);
    tcase_add_test(tc, header_encode);
    tcase_add_test(tc, round_trip_every_method);
    tcase_add_test(tc, round_trip_errors_and_extremes);
    tcase_add_test(tc, caller_cert_rules);
    tcase_add_test(tc, clear_zeroes_the_public_fields);
    tcase_add_test(tc, large_body_up_to_the_limit);
    tcase_add_test(tc, refuses_bad_ids);
    tcase_add_test(tc, refuses_bad_texts);
    tcase_add_test(tc, refuses_bad_enums);
    tcase_add_test(tc, refuses_bad_deadline);
    tcase_add_test(tc, refuses_inconsistent_fields);
    tcase_add_test(tc, encode_applies_the_same_rules);
    tcase_add_test(tc, field_number_zero_is_refused);
    tcase_add_test(tc, refuses_garbage_and_bad_lengths);
    tcase_add_test(tc, refuses_costly_unknown_fields);
    tcase_add_test(tc, bad_body_is_refused_separately);
    tcase_add_test(tc, truncated_frames);
    tcase_add_test(tc, bit_flipped_frames);
    tcase_add_test(tc, names);
    tcase_add_test(tc, claim_batch_within_budget);
    suite_add_tcase(s, tc);
    return s;
}
