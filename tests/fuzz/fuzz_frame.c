/* fuzz_frame: libFuzzer target for what a client connection reads: frame
 * headers, envelopes and bodies (src/rpc/frame.c).
 *
 * Input: the bytes of one frame as a peer would send them: a 4-byte
 * big-endian length, then the envelope. A header asking for more bytes than
 * the input has is decoded with what is there (a connection would wait; a
 * truncated envelope is the interesting case). tests/fuzz/corpus/frame holds
 * seeds of every method, both directions and error answers.
 *
 * Checked, besides "no crash, no leak, no UB":
 *   - frame_decode_header returns 1 only below 4 bytes, a length within
 *     1..FRAME_MAX_DEFAULT on 0, an RPC_E_* code otherwise;
 *   - envelope_decode returns 0 or an RPC_E_* code (<= -1500);
 *   - an accepted envelope passes envelope_check, re-encodes (into a caller
 *     buffer and a malloc'd one, byte-identical), and the re-encoding
 *     decodes to the same view and re-encodes to the same bytes;
 *   - its body, unpacked as the message the method and direction name,
 *     either is refused with an RPC_E_* code or re-packs to bytes that
 *     unpack again.
 *
 * Run: ./tests/fuzz/fuzz_frame -dict=tests/fuzz/frame.dict
 *      -max_total_time=60 WORKDIR tests/fuzz/corpus/frame */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_frame: %s:%d: check failed: %s\n", __FILE__, \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

static int same_text(const char *a, const char *b, size_t len)
{
    return len == 0 || memcmp(a, b, len) == 0;
}

static void check_same(const struct envelope_view *a,
                       const struct envelope_view *b)
{
    CHECK(a->call_id == b->call_id);
    CHECK(a->method == b->method);
    CHECK(a->direction == b->direction);
    CHECK(a->deadline_ms == b->deadline_ms);
    CHECK(a->status == b->status);
    CHECK(a->applied == b->applied);
    CHECK(a->error_len == b->error_len);
    CHECK(same_text(a->error, b->error, a->error_len));
    CHECK(a->leader_hint_len == b->leader_hint_len);
    CHECK(same_text(a->leader_hint, b->leader_hint, a->leader_hint_len));
    CHECK(a->has_cluster_id == b->has_cluster_id);
    CHECK(!a->has_cluster_id ||
          memcmp(a->cluster_id, b->cluster_id, RPC_ID_LEN) == 0);
    CHECK(a->node_id == b->node_id);
    CHECK(a->has_boot_id == b->has_boot_id);
    CHECK(!a->has_boot_id || memcmp(a->boot_id, b->boot_id, RPC_ID_LEN) == 0);
    CHECK(a->group_id == b->group_id);
    CHECK(a->forwarded == b->forwarded);
    CHECK(a->body_len == b->body_len);
    CHECK(a->body_len == 0 || memcmp(a->body, b->body, a->body_len) == 0);
}

static void check_body(struct envelope_view *v)
{
    ProtobufCMessage *m;
    const ProtobufCMessageDescriptor *d;
    uint8_t *re;
    size_t len;
    char errmsg[ERR_MSG_SIZE];
    int rv = envelope_unpack_body(v, &m, errmsg);

    if (rv != 0) {
        CHECK(rv <= -1500 && m == NULL);
        CHECK(rv != RPC_E_ENUM || v->method == RPC_METHOD_UNSPECIFIED);
        return;
    }
    d = envelope_body_descriptor(v->method, v->direction);
    CHECK(m != NULL && m->descriptor == d);
    len = protobuf_c_message_get_packed_size(m);
    re = malloc(len ? len : 1);
    CHECK(re != NULL);
    CHECK(protobuf_c_message_pack(m, re) == len);
    /* A re-packed body decodes again (unknown fields are kept). */
    m = protobuf_c_message_unpack(d, NULL, len, re);
    CHECK(m != NULL);
    CHECK(protobuf_c_message_get_packed_size(m) == len);
    protobuf_c_message_free_unpacked(m, NULL);
    free(re);
}

static void check_accepted(struct envelope_view *v)
{
    struct envelope_view w;
    uint8_t *f1 = NULL, *f2 = NULL, *f3;
    size_t l1, l2, l3;
    uint32_t env_len;
    char errmsg[ERR_MSG_SIZE];

    CHECK(envelope_check(v, errmsg) == 0);
    CHECK(v->error != NULL && v->error[v->error_len] == '\0');
    CHECK(v->leader_hint != NULL && v->leader_hint[v->leader_hint_len] == 0);
    CHECK(envelope_encode_alloc(v, FRAME_MAX_DEFAULT, &f1, &l1, errmsg) == 0);
    CHECK(l1 == FRAME_HEADER_LEN + envelope_packed_size(v));
    f3 = malloc(l1);
    CHECK(f3 != NULL);
    CHECK(envelope_encode(v, FRAME_MAX_DEFAULT, f3, l1 - 1, &l3, errmsg) ==
          RPC_E_NOSPACE);
    CHECK(l3 == l1);
    CHECK(envelope_encode(v, FRAME_MAX_DEFAULT, f3, l1, &l3, errmsg) == 0);
    CHECK(l3 == l1 && memcmp(f1, f3, l1) == 0);
    free(f3);
    CHECK(frame_decode_header(f1, l1, FRAME_MAX_DEFAULT, &env_len) == 0);
    CHECK(env_len == l1 - FRAME_HEADER_LEN);
    envelope_view_init(&w);
    CHECK(envelope_decode(f1 + FRAME_HEADER_LEN, env_len, FRAME_MAX_DEFAULT, &w,
                          errmsg) == 0);
    check_same(v, &w);
    CHECK(envelope_encode_alloc(&w, FRAME_MAX_DEFAULT, &f2, &l2, errmsg) == 0);
    CHECK(l1 == l2 && memcmp(f1, f2, l1) == 0);
    envelope_view_close(&w);
    free(f1);
    free(f2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct envelope_view v;
    uint32_t env_len = 0;
    uint8_t *copy;
    size_t len;
    char errmsg[ERR_MSG_SIZE];
    int rv = frame_decode_header(data, size, FRAME_MAX_DEFAULT, &env_len);

    if (rv == 1) {
        CHECK(size < FRAME_HEADER_LEN);
        return 0;
    }
    if (rv != 0) {
        CHECK(rv == RPC_E_EMPTY || rv == RPC_E_TOOBIG);
        return 0;
    }
    CHECK(env_len >= 1 && env_len <= FRAME_MAX_DEFAULT);
    len = size - FRAME_HEADER_LEN;
    if (env_len < len) {
        len = env_len;
    }
    /* An exact-size copy: reads past the envelope are caught. */
    copy = malloc(len ? len : 1);
    CHECK(copy != NULL);
    if (len > 0) {
        memcpy(copy, data + FRAME_HEADER_LEN, len);
    }
    envelope_view_init(&v);
    rv = envelope_decode(copy, len, FRAME_MAX_DEFAULT, &v, errmsg);
    if (rv == 0) {
        check_accepted(&v);
        check_body(&v);
    } else {
        CHECK(rv <= -1500 && rv > -1600);
        CHECK(len > 0 || rv == RPC_E_EMPTY);
        CHECK(errmsg[0] != '\0');
    }
    envelope_view_close(&v);
    free(copy);
    return 0;
}
