/* common/pbwire.c: the reader half of the protobuf wire code (pbwire.h).
 *
 * What protobuf-c 1.4 does on each path this reader accepts, so the two
 * agree (the fuzz target checks it):
 *   - a tag is a varint of at most 5 bytes; field number = tag >> 3;
 *   - varint fields: uint64 takes the whole value (at most 10 bytes);
 *     uint32 and enums take its low 32 bits, so only values that fit are
 *     accepted here; bool is true iff any payload bit is set (value != 0);
 *   - a length prefix has at most 5 bytes, is at most INT_MAX and the data
 *     must fit; empty bytes leave data NULL;
 *   - a field seen again replaces the first (last wins). Declined here
 *     instead: protobuf-c allocates per occurrence, which can hit the
 *     decode budget of rpc/frame.c, so repeats stay on its path. */
#include "common/pbwire.h"

#include <limits.h>

#include "common/assert.h"

/* Read a varint of at most @max bytes (<= 10). Returns its length, or 0
 * if it is unterminated within @max bytes or @len, or over 64 bits. */
static inline size_t read_varint(const uint8_t *p,
                                 size_t len,
                                 size_t max,
                                 uint64_t *out)
{
    uint64_t v = 0;

    /* Tags, lengths and small values are one byte: the common case. */
    if (len > 0 && p[0] < 0x80) {
        *out = p[0];
        return 1;
    }
    if (max > len) {
        max = len;
    }
    for (size_t i = 0; i < max; i++) {
        uint64_t b = p[i];

        v |= (b & 0x7f) << (7 * i);
        if (b < 0x80) {
            if (i == 9 && b > 1) {
                return 0; /* bits past 64 */
            }
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

/* A length-delimited payload at @p: returns the prefix length and sets
 * *n, or 0 if it does not pass protobuf-c's rules above. */
static size_t read_len(const uint8_t *p, size_t len, uint64_t *n)
{
    size_t h = read_varint(p, len, 5, n);

    if (h == 0 || *n > INT_MAX || *n > len - h) {
        return 0;
    }
    return h;
}

/* Store the varint @v into @base by @f: false (decline) if @f is a bytes
 * field or the value would not fit its type. */
static inline bool store_varint(const struct pbr_field *f,
                                uint64_t v,
                                char *base)
{
    switch (f->kind) {
        case PBR_U64:
            memcpy(base + f->offset, &v, sizeof v);
            return true;
        case PBR_U32: {
            uint32_t u = (uint32_t)v;

            if (v > UINT32_MAX) {
                return false;
            }
            memcpy(base + f->offset, &u, sizeof u);
            return true;
        }
        case PBR_ENUM: {
            int e = (int)v;

            if (v > INT32_MAX) {
                return false;
            }
            memcpy(base + f->offset, &e, sizeof e);
            return true;
        }
        case PBR_BOOL: {
            protobuf_c_boolean b = v != 0;

            memcpy(base + f->offset, &b, sizeof b);
            return true;
        }
        default: /* PBR_BYTES */
            return false;
    }
}

/* One pass, one byte at a time where the byte is a whole varint (every
 * tag of fields 1..15, every length under 128, every small value): the
 * hot messages are mostly that, and this runs three times per claim on
 * the leader. A length prefix is read as a varint of up to 10 bytes and
 * declined past 5, which is read_len's rule: a prefix unterminated within
 * 5 bytes is declined either way. */
bool pbr_parse(const struct pbr_spec *spec,
               const uint8_t *buf,
               size_t len,
               void *msg)
{
    const uint8_t *p = buf, *end = buf + len;
    char *base = msg;
    uint32_t seen = 0;

    ONCE_ASSERT(spec->n >= 1 && spec->n <= 32,
                "a spec's fields fit the 32 bits of seen");
    while (p < end) {
        const struct pbr_field *f;
        uint64_t tag, number, v;
        uint32_t bit;
        size_t h;

        if (*p < 0x80) {
            tag = *p++;
        } else if ((h = read_varint(p, (size_t)(end - p), 5, &tag)) != 0) {
            p += h;
        } else {
            return false;
        }
        number = tag >> 3;
        if (number - 1 >= spec->n) {
            return false; /* unknown, or field 0 (wraps) */
        }
        bit = UINT32_C(1) << (number - 1);
        if ((seen & bit) != 0) {
            return false; /* a repeat */
        }
        seen |= bit;
        f = &spec->fields[number - 1];
        h = 1;
        if (p < end && *p < 0x80) {
            v = *p++;
        } else if ((h = read_varint(p, (size_t)(end - p), 10, &v)) != 0) {
            p += h;
        } else {
            return false;
        }
        switch (tag & 7) {
            case PBW_VARINT:
                if (!store_varint(f, v, base)) {
                    return false;
                }
                break;
            case PBW_LEN: {
                ProtobufCBinaryData b;

                if (f->kind != PBR_BYTES || h > 5 || v > INT_MAX ||
                    v > (uint64_t)(end - p)) {
                    return false;
                }
                b.len = (size_t)v;
                b.data = v > 0 ? (uint8_t *)(uintptr_t)p : NULL;
                memcpy(base + f->offset, &b, sizeof b);
                p += v;
                break;
            }
            default:
                return false;
        }
    }
    return true;
}

bool pbr_only_field(const uint8_t *buf,
                    size_t len,
                    uint32_t field,
                    const uint8_t **inner,
                    size_t *inner_len)
{
    uint64_t tag, n;
    size_t h = read_varint(buf, len, 5, &tag), l;

    if (h == 0 || tag != ((uint64_t)field << 3 | PBW_LEN)) {
        return false;
    }
    l = read_len(buf + h, len - h, &n);
    if (l == 0 || h + l + n != len) {
        return false;
    }
    *inner = buf + h + l;
    *inner_len = (size_t)n;
    return true;
}

size_t pbr_field(const uint8_t *buf,
                 size_t len,
                 uint32_t *number,
                 unsigned *wire,
                 uint64_t *value,
                 const uint8_t **data)
{
    uint64_t tag;
    size_t h = read_varint(buf, len, 5, &tag), l;

    /* Field numbers are at most 2^29 - 1. */
    if (h == 0 || (tag >> 3) < 1 || (tag >> 3) > (UINT32_C(1) << 29) - 1) {
        return 0;
    }
    *number = (uint32_t)(tag >> 3);
    *wire = (unsigned)(tag & 7);
    if (*wire == PBW_VARINT) {
        l = read_varint(buf + h, len - h, 10, value);
        *data = NULL;
        return l == 0 ? 0 : h + l;
    }
    if (*wire != PBW_LEN || (l = read_len(buf + h, len - h, value)) == 0) {
        return 0;
    }
    *data = *value > 0 ? buf + h + l : NULL;
    return h + l + (size_t)*value;
}

bool pbr_store(const struct pbr_field *f,
               unsigned wire,
               uint64_t value,
               const uint8_t *data,
               void *msg)
{
    if (f->kind == PBR_BYTES) {
        ProtobufCBinaryData b;

        if (wire != PBW_LEN) {
            return false;
        }
        /* pbr_field checked the length (<= INT_MAX, within its input). */
        b.len = (size_t)value;
        b.data = value > 0 ? (uint8_t *)(uintptr_t)data : NULL;
        memcpy((char *)msg + f->offset, &b, sizeof b);
        return true;
    }
    return wire == PBW_VARINT && store_varint(f, value, msg);
}
