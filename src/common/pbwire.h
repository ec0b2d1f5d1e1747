/* common/pbwire.h: a protobuf wire writer for the hand-written encoders of
 * the hot messages (rpc/frame.c's Envelope, rpc/result_pack.c's Result, the
 * log's Claim command and Batch in fsm/command.c, server/batch_pack.c's
 * ClaimBatchItem and ClaimBatchRequest size).
 *
 * Why: protobuf-c's packer walks a descriptor per field, twice per message
 * (packed size, then pack); an encoder that knows its fields is several
 * times cheaper. The output must stay byte-identical to protobuf-c's (the
 * unit tests compare both on randomized messages), so these helpers follow
 * protobuf-c 1.4's proto3 rules exactly:
 *   - fields are written in field-number order (the caller's job);
 *   - a scalar field equal to 0 (false, enum 0) is left out, as are bytes of
 *     length 0 and a NULL or empty string (pbw_*_opt);
 *   - a present sub-message, and every element of a repeated field, is
 *     written even when empty (pbw_*_req);
 *   - an enum (int32) is a varint of its sign-extended 64-bit value, so a
 *     negative one takes 10 bytes; uint32 and uint64 are plain varints;
 *     bool is one byte, 0 or 1.
 *
 * Usage: an encoder sums pbw_size_* over its fields, the caller allocates
 * exactly that, then the encoder writes with pbw_put_*, each returning the
 * cursor after what it wrote. The writers do not check room: the caller
 * compares what was written with the size (ONCE_ASSERT) and never lets a
 * buffer be shorter than the size it measured. Field numbers must be
 * 1..2^29-1 (a tag fits 32 bits).
 *
 * The reader (pbr_*, pbwire.c) is the other half: a decoder of flat
 * messages (scalars and bytes, field numbers 1..n) into the very structs
 * protobuf-c's unpacker fills, for the hot messages a node reads (the
 * Envelope, a ClaimRequest, the log's Claim). It accepts only what it can
 * decode exactly as protobuf-c would and *declines* everything else (an
 * unknown field, a field seen twice, a wrong wire type, a value a field's
 * type would truncate, a truncated or over-long varint or length): the
 * caller then unpacks the same bytes with protobuf-c, so every input
 * protobuf-c refuses is still refused, by protobuf-c, with today's checks
 * and budget. tests/fuzz/fuzz_codec.c checks that whatever the reader
 * accepts, protobuf-c accepts with equal fields.
 *
 * The writers are header-only (inlined into each encoder); all of it is
 * pure and reentrant. */
#ifndef ONCE_COMMON_PBWIRE_H_
#define ONCE_COMMON_PBWIRE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

enum pbw_wire_type {
    PBW_VARINT = 0,
    PBW_FIXED64 = 1,
    PBW_LEN = 2,
    PBW_FIXED32 = 5,
};

/* --- sizes ------------------------------------------------------------ */

static inline size_t pbw_varint_size(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline size_t pbw_tag_size(uint32_t field)
{
    return pbw_varint_size((uint64_t)field << 3);
}

/* uint64, uint32 and bool fields: left out when 0. */
static inline size_t pbw_size_u64_opt(uint32_t field, uint64_t v)
{
    return v != 0 ? pbw_tag_size(field) + pbw_varint_size(v) : 0;
}

/* enum and int32 fields: left out when 0, sign-extended when negative. */
static inline size_t pbw_size_i32_opt(uint32_t field, int32_t v)
{
    return v != 0 ? pbw_tag_size(field) + pbw_varint_size((uint64_t)(int64_t)v)
                  : 0;
}

/* A length-delimited field that is always written (a present
 * sub-message, an element of a repeated bytes field). */
static inline size_t pbw_size_len_req(uint32_t field, size_t len)
{
    return pbw_tag_size(field) + pbw_varint_size(len) + len;
}

/* bytes and string fields: left out when empty. */
static inline size_t pbw_size_len_opt(uint32_t field, size_t len)
{
    return len != 0 ? pbw_size_len_req(field, len) : 0;
}

/* The unknown fields protobuf-c kept in @m from a decode, as its packer
 * counts them: each one's tag (field number and wire type) and its bytes
 * as kept (get_tag_size and unknown_field_get_packed_size in
 * protobuf-c.c). */
static inline size_t pbw_size_unknown(const ProtobufCMessage *m)
{
    size_t n = 0;

    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        n += pbw_tag_size(m->unknown_fields[i].tag) + m->unknown_fields[i].len;
    }
    return n;
}

/* --- writers ---------------------------------------------------------- */

static inline uint8_t *pbw_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *pbw_put_tag(uint8_t *p,
                                   uint32_t field,
                                   enum pbw_wire_type wt)
{
    return pbw_put_varint(p, (uint64_t)field << 3 | (uint64_t)wt);
}

static inline uint8_t *pbw_put_u64_opt(uint8_t *p, uint32_t field, uint64_t v)
{
    if (v == 0) {
        return p;
    }
    p = pbw_put_tag(p, field, PBW_VARINT);
    return pbw_put_varint(p, v);
}

static inline uint8_t *pbw_put_bool_opt(uint8_t *p, uint32_t field, bool v)
{
    return pbw_put_u64_opt(p, field, v ? 1 : 0);
}

static inline uint8_t *pbw_put_i32_opt(uint8_t *p, uint32_t field, int32_t v)
{
    return pbw_put_u64_opt(p, field, (uint64_t)(int64_t)v);
}

/* The tag and length of a length-delimited field whose @len bytes the
 * caller writes next (a sub-message). */
static inline uint8_t *pbw_put_len_head(uint8_t *p, uint32_t field, size_t len)
{
    p = pbw_put_tag(p, field, PBW_LEN);
    return pbw_put_varint(p, len);
}

static inline uint8_t *pbw_put_len_req(uint8_t *p,
                                       uint32_t field,
                                       const void *data,
                                       size_t len)
{
    p = pbw_put_len_head(p, field, len);
    if (len > 0) {
        memcpy(p, data, len);
    }
    return p + len;
}

static inline uint8_t *pbw_put_len_opt(uint8_t *p,
                                       uint32_t field,
                                       const void *data,
                                       size_t len)
{
    return len != 0 ? pbw_put_len_req(p, field, data, len) : p;
}

/* --- the reader ------------------------------------------------------- */

/* How a field is stored in its protobuf-c struct. */
enum pbr_kind {
    PBR_U64,   /* uint64_t, varint */
    PBR_U32,   /* uint32_t, varint <= UINT32_MAX (else declined) */
    PBR_ENUM,  /* a C enum (int), varint <= INT32_MAX (else declined) */
    PBR_BOOL,  /* protobuf_c_boolean, any varint: != 0 */
    PBR_BYTES, /* ProtobufCBinaryData, length-delimited; points into the
                * input (data NULL when empty, as protobuf-c leaves it) */
};

struct pbr_field
{
    enum pbr_kind kind;
    size_t offset; /* in the message struct */
};

/* A flat message: field number i (1..n) is fields[i - 1]. */
struct pbr_spec
{
    const struct pbr_field *fields;
    uint32_t n; /* 1..32 */
};

/* Decode the @len bytes at @buf into @msg (a struct the message's
 * protobuf-c __init filled, so absent fields keep their defaults) by
 * @spec. Returns true if every field was decoded; false if the reader
 * declines (see above), and then @msg's fields are unspecified: the caller
 * re-initialises it or uses protobuf-c's unpacker instead. Byte fields
 * borrow from @buf. Reads nothing past @buf + @len. */
bool pbr_parse(const struct pbr_spec *spec,
               const uint8_t *buf,
               size_t len,
               void *msg);

/* If the @len bytes at @buf are exactly one length-delimited field
 * numbered @field (a message with one sub-message, the log's Command
 * around a Claim), stores its contents in *@inner, *@inner_len and returns
 * true; false (decline) for anything else. */
bool pbr_only_field(const uint8_t *buf,
                    size_t len,
                    uint32_t field,
                    const uint8_t **inner,
                    size_t *inner_len);

/* The one field at the start of the @len bytes at @buf, for readers of
 * messages with repeated fields, which pbr_parse declines (a
 * ClaimBatchRequest's items, the log Batch's commands): its number, its
 * wire type (PBW_VARINT or PBW_LEN only), and for a varint its value in
 * *@value, for a length-delimited field its length in *@value and its
 * contents in *@data (borrowed from @buf; NULL when empty, as protobuf-c
 * leaves repeated bytes). Returns the bytes the field takes, or 0
 * (decline) if it is malformed by the rules above, is field 0 or has
 * another wire type. The caller declines the numbers it does not know and
 * the repeats of its singular fields, as pbr_parse does. */
size_t pbr_field(const uint8_t *buf,
                 size_t len,
                 uint32_t *number,
                 unsigned *wire,
                 uint64_t *value,
                 const uint8_t **data);

/* Store into @msg, by @f, the value of one field pbr_field read (@wire,
 * @value, @data as it returned them), by pbr_parse's rules: true if
 * stored; false (decline) for a wire type the kind does not take or a
 * value it would truncate. For readers that walk a message with
 * pbr_field because it has fields pbr_parse declines (sub-messages,
 * strings, repeated fields) and store its flat fields through a spec. */
bool pbr_store(const struct pbr_field *f,
               unsigned wire,
               uint64_t value,
               const uint8_t *data,
               void *msg);

#endif /* ONCE_COMMON_PBWIRE_H_ */
