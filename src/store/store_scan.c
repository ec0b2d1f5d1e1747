/* store/store_scan.c: the pure load decisions over a segment's bytes
 * (store_scan.h). */
#include "store/store_scan.h"

#include <inttypes.h>
#include <string.h>

#include "common/le.h"

static bool zero_from(const uint8_t *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* The bad record at @p of a last segment of @size bytes is a torn tail if
 * nothing that could be a later record follows it: every byte after the
 * extent it claims is zero, and no record magic sits inside that extent. */
static bool torn_tail(const uint8_t *file, size_t size, size_t p, size_t *end)
{
    size_t e = p + SF_REC_HDR;

    if (size - p >= SF_REC_HDR) {
        size_t len = le_get32(file + p + 28);
        if (len <= SF_REC_MAX && sf_rec_size(len) <= size - p) {
            e = p + sf_rec_size(len);
        }
    } else {
        e = size;
    }
    *end = e;
    if (!zero_from(file, e, size)) {
        return false;
    }
    /* A valid record inside the extent means the length was damaged, not
     * torn: refuse. A bare magic is not enough (a payload may hold
     * "REC1" at an 8-aligned offset); its checksum must hold too. */
    for (size_t q = p + 8; q + 4 <= e; q += 8) {
        struct sf_rec r;
        enum sf_rec_status st;

        if (le_get32(file + q) != SF_REC_MAGIC) {
            continue;
        }
        st = sf_rec_decode(file + q, size - q, 0, &r);
        if (st == SF_REC_OK || st == SF_REC_INDEX) {
            return false;
        }
    }
    return true;
}

static void refuse(struct store_scan_result *out)
{
    out->verdict = STORE_SCAN_REFUSE;
}

/* The header; false (refused) when it does not check or match. */
static bool scan_header(const uint8_t *file,
                        size_t size,
                        const struct store_scan_in *in,
                        struct store_scan_result *out)
{
    uint64_t first;

    if (size < SF_SEG_HDR || sf_seg_header_check(file, &first) != 0 ||
        first != in->name_first) {
        err_printf(out->msg, "%s/%s: bad segment header at offset 0", in->dir,
                   in->name);
        refuse(out);
        return false;
    }
    if (!in->is_first && first != in->expect) {
        err_printf(out->msg,
                   "%s/%s: starts at index %" PRIu64
                   " but the log before it ends at %" PRIu64 " (a gap)",
                   in->dir, in->name, first, in->expect - 1);
        refuse(out);
        return false;
    }
    out->first = first;
    out->next = first;
    out->end = SF_SEG_HDR;
    return true;
}

void store_scan_segment(const uint8_t *file,
                        size_t size,
                        const struct store_scan_in *in,
                        store_scan_cb cb,
                        void *arg,
                        struct store_scan_result *out)
{
    size_t p = SF_SEG_HDR, end;

    memset(out, 0, sizeof *out);
    if (!scan_header(file, size, in, out)) {
        return;
    }
    for (;;) {
        struct sf_rec r;
        enum sf_rec_status st =
            sf_rec_decode(file + p, size - p, out->next, &r);

        if (st == SF_REC_OK) {
            if (cb != NULL && (out->cb_rv = cb(arg, &r, p)) != 0) {
                out->verdict = STORE_SCAN_STOPPED;
                return;
            }
            p += r.size;
            out->end = p;
            out->next++;
            out->n++;
            continue;
        }
        if (st == SF_REC_ZERO) {
            if (!zero_from(file, p, size)) {
                err_printf(out->msg,
                           "%s/%s: data after the end of the records at "
                           "offset %zu (index %" PRIu64 ")",
                           in->dir, in->name, p, out->next);
                refuse(out);
            }
            return;
        }
        if (st != SF_REC_INDEX && in->is_last &&
            torn_tail(file, size, p, &end)) {
            out->verdict = STORE_SCAN_CUT;
            out->cut_end = end;
            return;
        }
        err_printf(
            out->msg, "%s/%s: bad record at offset %zu (index %" PRIu64 ")%s",
            in->dir, in->name, p, out->next,
            st == SF_REC_INDEX ? ": unexpected index" : ", not a torn tail");
        refuse(out);
        return;
    }
}
