/* store/store_format.c: see store_format.h. */
#include "store/store_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"

static const char seg_magic[8] = {'O', 'N', 'C', 'E', 'S', 'E', 'G', '1'};
static const char meta_magic[8] = {'O', 'N', 'C', 'E', 'M', 'E', 'T', 'A'};
static const char snap_magic[8] = {'O', 'N', 'C', 'E', 'S', 'N', 'A', 'P'};

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

void sf_seg_header(uint8_t out[SF_SEG_HDR], uint64_t first)
{
    memset(out, 0, SF_SEG_HDR);
    memcpy(out, seg_magic, 8);
    le_put32(out + 8, SF_FORMAT);
    le_put64(out + 16, first);
    le_put32(out + 12, crc32c(0, out + 16, SF_SEG_HDR - 16));
}

int sf_seg_header_check(const uint8_t in[SF_SEG_HDR], uint64_t *first)
{
    if (memcmp(in, seg_magic, 8) != 0 || le_get32(in + 8) != SF_FORMAT ||
        le_get32(in + 12) != crc32c(0, in + 16, SF_SEG_HDR - 16)) {
        return -EBADMSG;
    }
    *first = le_get64(in + 16);
    return *first == 0 ? -EBADMSG : 0;
}

void sf_rec_encode(uint8_t *out,
                   uint64_t index,
                   uint64_t term,
                   unsigned type,
                   const void *payload,
                   size_t len)
{
    size_t padded = sf_pad8(len);

    le_put32(out, SF_REC_MAGIC);
    le_put64(out + 8, index);
    le_put64(out + 16, term);
    out[24] = (uint8_t)type;
    out[25] = (uint8_t)(type >> 8);
    out[26] = 0;
    out[27] = 0;
    le_put32(out + 28, (uint32_t)len);
    if (len > 0) {
        memcpy(out + SF_REC_HDR, payload, len);
    }
    memset(out + SF_REC_HDR + len, 0, padded - len);
    le_put32(out + 4, crc32c(0, out + 8, SF_REC_HDR - 8 + padded));
}

enum sf_rec_status sf_rec_decode(const uint8_t *p,
                                 size_t avail,
                                 uint64_t expect,
                                 struct sf_rec *r)
{
    size_t len, padded;

    if (avail < SF_REC_HDR) {
        return all_zero(p, avail) ? SF_REC_ZERO : SF_REC_TOOLONG;
    }
    if (all_zero(p, SF_REC_HDR)) {
        return SF_REC_ZERO;
    }
    if (le_get32(p) != SF_REC_MAGIC || p[26] != 0 || p[27] != 0) {
        return SF_REC_BAD;
    }
    len = le_get32(p + 28);
    if (len > SF_REC_MAX || sf_rec_size(len) > avail) {
        return SF_REC_TOOLONG;
    }
    padded = sf_pad8(len);
    if (le_get32(p + 4) != crc32c(0, p + 8, SF_REC_HDR - 8 + padded)) {
        return SF_REC_BAD;
    }
    r->index = le_get64(p + 8);
    r->term = le_get64(p + 16);
    r->type = (unsigned)p[24] | (unsigned)p[25] << 8;
    r->len = len;
    r->buf = p + SF_REC_HDR;
    r->size = SF_REC_HDR + padded;
    if (r->index != expect) {
        return SF_REC_INDEX;
    }
    return SF_REC_OK;
}

void sf_meta_encode(uint8_t out[SF_META_SIZE],
                    uint64_t seq,
                    uint64_t term,
                    uint64_t vote,
                    uint64_t cut)
{
    memset(out, 0, SF_META_SIZE);
    memcpy(out, meta_magic, 8);
    le_put32(out + 8, SF_FORMAT);
    le_put64(out + 16, seq);
    le_put64(out + 24, term);
    le_put64(out + 32, vote);
    le_put64(out + 40, cut); /* zero in records written before it existed */
    le_put32(out + 12, crc32c(0, out + 16, SF_META_SIZE - 16));
}

int sf_meta_decode(const uint8_t in[SF_META_SIZE],
                   uint64_t *seq,
                   uint64_t *term,
                   uint64_t *vote,
                   uint64_t *cut)
{
    if (all_zero(in, SF_META_SIZE)) {
        return 1;
    }
    if (memcmp(in, meta_magic, 8) != 0 || le_get32(in + 8) != SF_FORMAT ||
        le_get32(in + 12) != crc32c(0, in + 16, SF_META_SIZE - 16)) {
        return -EBADMSG;
    }
    *seq = le_get64(in + 16);
    *term = le_get64(in + 24);
    *vote = le_get64(in + 32);
    *cut = le_get64(in + 40);
    return 0;
}

/* u64 n, then per server: u64 id | u32 role | u32 address length |
 * address padded to 8. */
size_t sf_conf_size(const struct raft_configuration *c)
{
    size_t n = 8;

    for (unsigned i = 0; i < c->n; i++) {
        n += 16 + sf_pad8(strlen(c->servers[i].address));
    }
    return n;
}

void sf_conf_encode(const struct raft_configuration *c, uint8_t *out)
{
    uint8_t *p = out;

    le_put64(p, c->n);
    p += 8;
    for (unsigned i = 0; i < c->n; i++) {
        size_t len = strlen(c->servers[i].address);

        le_put64(p, c->servers[i].id);
        le_put32(p + 8, (uint32_t)c->servers[i].role);
        le_put32(p + 12, (uint32_t)len);
        memcpy(p + 16, c->servers[i].address, len);
        memset(p + 16 + len, 0, sf_pad8(len) - len);
        p += 16 + sf_pad8(len);
    }
}

int sf_conf_decode(const uint8_t *in, size_t len, struct raft_configuration *c)
{
    size_t off = 8;
    uint64_t n;
    char addr[256];

    if (len < 8) {
        return RAFT_CORRUPT;
    }
    n = le_get64(in);
    if (n > 1024) {
        return RAFT_CORRUPT;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id;
        uint32_t role, alen;
        int rv;

        if (len - off < 16) {
            return RAFT_CORRUPT;
        }
        id = le_get64(in + off);
        role = le_get32(in + off + 8);
        alen = le_get32(in + off + 12);
        off += 16;
        if (alen >= sizeof addr || sf_pad8(alen) > len - off) {
            return RAFT_CORRUPT;
        }
        memcpy(addr, in + off, alen);
        addr[alen] = '\0';
        if (strlen(addr) != alen) {
            return RAFT_CORRUPT;
        }
        off += sf_pad8(alen);
        rv = raft_configuration_add(c, id, addr, (int)role);
        if (rv != 0) {
            return rv == RAFT_NOMEM ? RAFT_NOMEM : RAFT_CORRUPT;
        }
    }
    return off == len ? 0 : RAFT_CORRUPT;
}

void sf_snap_header(uint8_t out[SF_SNAP_HDR],
                    const struct sf_snap_info *info,
                    uint32_t crc)
{
    memset(out, 0, SF_SNAP_HDR);
    memcpy(out, snap_magic, 8);
    le_put32(out + 8, SF_FORMAT);
    le_put64(out + 16, info->term);
    le_put64(out + 24, info->index);
    le_put64(out + 32, info->conf_index);
    le_put64(out + 40, info->conf_len);
    le_put64(out + 48, info->data_len);
    le_put32(out + 12, crc);
}

uint32_t sf_snap_crc_start(const uint8_t hdr[SF_SNAP_HDR])
{
    return crc32c(0, hdr + 16, SF_SNAP_HDR - 16);
}

int sf_snap_header_check(const uint8_t hdr[SF_SNAP_HDR],
                         uint64_t file_size,
                         struct sf_snap_info *info,
                         uint32_t *crc)
{
    if (memcmp(hdr, snap_magic, 8) != 0 || le_get32(hdr + 8) != SF_FORMAT) {
        return -EBADMSG;
    }
    info->term = le_get64(hdr + 16);
    info->index = le_get64(hdr + 24);
    info->conf_index = le_get64(hdr + 32);
    info->conf_len = le_get64(hdr + 40);
    info->data_len = le_get64(hdr + 48);
    *crc = le_get32(hdr + 12);
    if (info->index == 0 || info->term == 0 || info->conf_len > SF_CONF_MAX ||
        info->conf_len % 8 != 0 || info->data_len > SF_SNAP_MAX ||
        file_size != SF_SNAP_HDR + info->conf_len + info->data_len) {
        return -EBADMSG;
    }
    return 0;
}
