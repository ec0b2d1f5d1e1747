/* store/store_format.h: the on-disk format of the "uring"/"pwrite" log store
 * (docs/store.md), as pure encode/decode functions. All integers are little
 * endian; every structure is checksummed with CRC-32C.
 *
 *   segment  seg-<first index %020>: a 64-byte header ("ONCESEG1", format,
 *            crc, first index), then records, then zeros to the end of the
 *            preallocated file.
 *   record   u32 magic | u32 crc | u64 index | u64 term | u16 type |
 *            u16 flags (0) | u32 len | payload | zero padding to 8. The crc
 *            covers everything after itself, padding included.
 *   meta     meta-a, meta-b: 64 bytes each ("ONCEMETA", format, crc, seq,
 *            term, vote, cut); written alternately, the valid one with the
 *            higher seq wins. cut: the index of a torn record load cut (0:
 *            none), kept until the log holds that index again, so that
 *            every start until then keeps the node from voting.
 *   snapshot snap-<term %020>-<index %020>: a 64-byte header ("ONCESNAP",
 *            format, crc over the rest of the file, term, index, conf index,
 *            conf length, data length), the configuration, the data.
 *
 * Pure; thread-safe. */
#ifndef ONCE_STORE_STORE_FORMAT_H_
#define ONCE_STORE_STORE_FORMAT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#define SF_FORMAT    1u
#define SF_SEG_HDR   64u
#define SF_REC_HDR   32u
#define SF_REC_MAGIC 0x31434552u /* "REC1" */
#define SF_META_SIZE 64u
#define SF_SNAP_HDR  64u
/* Bounds on what a file may claim, checked before anything is allocated. */
#define SF_REC_MAX  (64u << 20)
#define SF_CONF_MAX (1u << 20)
#define SF_SNAP_MAX (1ull << 34)

static inline size_t sf_pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static inline size_t sf_rec_size(size_t len)
{
    return SF_REC_HDR + sf_pad8(len);
}

void sf_seg_header(uint8_t out[SF_SEG_HDR], uint64_t first);
/* 0 and *first, or -EBADMSG when the header is not valid. */
int sf_seg_header_check(const uint8_t in[SF_SEG_HDR], uint64_t *first);

/* Write one record into @out (sf_rec_size(len) bytes, zero padded). */
void sf_rec_encode(uint8_t *out,
                   uint64_t index,
                   uint64_t term,
                   unsigned type,
                   const void *payload,
                   size_t len);

enum sf_rec_status {
    SF_REC_OK = 0,
    SF_REC_ZERO,    /* 32 zero bytes: the end of the records */
    SF_REC_BAD,     /* a header or checksum that does not hold */
    SF_REC_INDEX,   /* a valid record with an unexpected index */
    SF_REC_TOOLONG, /* a length past the end of the file or the bound */
};

struct sf_rec
{
    uint64_t index, term;
    unsigned type;
    size_t len;         /* payload bytes */
    const uint8_t *buf; /* payload, inside the input */
    size_t size;        /* bytes the record takes, header and padding */
};

/* Decode the record at @p (@avail bytes to the end of the file), which must
 * have index @expect. */
enum sf_rec_status sf_rec_decode(const uint8_t *p,
                                 size_t avail,
                                 uint64_t expect,
                                 struct sf_rec *r);

void sf_meta_encode(uint8_t out[SF_META_SIZE],
                    uint64_t seq,
                    uint64_t term,
                    uint64_t vote,
                    uint64_t cut);
/* 0 when valid, 1 when all zero (never written), -EBADMSG when bad. */
int sf_meta_decode(const uint8_t in[SF_META_SIZE],
                   uint64_t *seq,
                   uint64_t *term,
                   uint64_t *vote,
                   uint64_t *cut);

/* Size of the configuration's encoding. */
size_t sf_conf_size(const struct raft_configuration *c);
void sf_conf_encode(const struct raft_configuration *c, uint8_t *out);
/* Into an initialised @c; RAFT_CORRUPT or RAFT_NOMEM on failure. */
int sf_conf_decode(const uint8_t *in, size_t len, struct raft_configuration *c);

struct sf_snap_info
{
    uint64_t term, index, conf_index;
    uint64_t conf_len, data_len;
};

/* The header; the crc is computed by the caller over the rest (so the data
 * can be streamed) and passed in. */
void sf_snap_header(uint8_t out[SF_SNAP_HDR],
                    const struct sf_snap_info *info,
                    uint32_t crc);
/* The crc a header must carry: over header bytes 16..64, then the rest. */
uint32_t sf_snap_crc_start(const uint8_t hdr[SF_SNAP_HDR]);
/* Check magic, format and bounds against the file size; -EBADMSG if bad. */
int sf_snap_header_check(const uint8_t hdr[SF_SNAP_HDR],
                         uint64_t file_size,
                         struct sf_snap_info *info,
                         uint32_t *crc);

#endif /* ONCE_STORE_STORE_FORMAT_H_ */
