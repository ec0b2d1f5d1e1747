/* fuzz_segment: libFuzzer target for the load decisions over one segment's
 * bytes (store_scan_segment, src/store/store_scan.h): what a node reads
 * back from DIR/log/seg-* at start, where a torn write, a flipped bit or a
 * stranger's file may sit.
 *
 * Input: one flags byte, then the segment file. Flags: bit 0 the last
 * segment (a torn tail may be cut), bit 1 the first segment (it may start
 * anywhere), bit 2 the log before it ends one index earlier than the
 * header says (a gap), bit 3 the file's name says another first index;
 * bits 4-7: the record at which a second run's callback stops. The name's
 * first index is the header's (bytes 16..24), 1 when shorter.
 *
 * Checked, besides "no crash, no leak, no UB, no read outside the input":
 *   - the verdict is one of OK, CUT, REFUSE; a refusal's message names the
 *     file and, except for a gap, the offset;
 *   - OK: records from offset 64 to `end`, zeros from there to the end;
 *   - CUT: only in the last segment; end < cut_end <= length, zeros after
 *     cut_end;
 *   - every record the callback sees has the next index, lies inside the
 *     input after the previous one, and their count is `n`;
 *   - the same bytes copied elsewhere give the same result (deterministic);
 *   - a callback that stops at record k (when there are more) gives STOPPED
 *     with its code after exactly k + 1 calls.
 *
 * Run: ./tests/fuzz/fuzz_segment -max_total_time=60 WORKDIR
 *      tests/fuzz/corpus/segment
 *
 * The seeds in tests/fuzz/corpus/segment are real segments (a few records,
 * torn at several places, a flipped bit, a gap, trailing data) written by
 * this file's own generator:
 *   cc -std=c11 -DFUZZ_SEGMENT_MAKE_CORPUS -I src tests/fuzz/fuzz_segment.c \
 *      src/store/store_scan.c src/store/store_format.c src/common/crc32c.c \
 *      src/common/err.c -lraft -o /tmp/mkseg
 *   /tmp/mkseg tests/fuzz/corpus/segment */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/le.h"
#include "store/store_scan.h"

#define CHECK(cond)                                                    \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "fuzz_segment: %s:%d: check failed: %s\n", \
                    __FILE__, __LINE__, #cond);                        \
            abort();                                                   \
        }                                                              \
    } while (0)

#define NAME "seg-fuzz"

struct seen
{
    const uint8_t *lo, *hi; /* the input */
    uint64_t next;          /* the index the next record must have */
    size_t off;             /* where the next record may start */
    size_t calls;
    size_t stop_at; /* stop at this call (SIZE_MAX: never) */
};

static int on_record(void *arg, const struct sf_rec *r, size_t off)
{
    struct seen *s = arg;

    CHECK(r->index == s->next);
    CHECK(off >= s->off);
    CHECK(r->size >= SF_REC_HDR && r->len <= r->size - SF_REC_HDR);
    CHECK(s->lo + off + r->size <= s->hi);
    CHECK(r->len == 0 || (r->buf >= s->lo && r->buf + r->len <= s->hi));
    s->next++;
    s->off = off + r->size;
    if (s->calls++ == s->stop_at) {
        return -12345;
    }
    return 0;
}

static bool zeros(const uint8_t *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

static void check_result(const uint8_t *seg,
                         size_t len,
                         const struct store_scan_in *in,
                         const struct store_scan_result *r,
                         const struct seen *s)
{
    CHECK(r->verdict == STORE_SCAN_OK || r->verdict == STORE_SCAN_CUT ||
          r->verdict == STORE_SCAN_REFUSE);
    if (r->verdict == STORE_SCAN_REFUSE) {
        CHECK(strstr(r->msg, NAME) != NULL);
        CHECK(strstr(r->msg, "offset") != NULL ||
              strstr(r->msg, "(a gap)") != NULL);
        return;
    }
    if (r->verdict == STORE_SCAN_CUT) {
        CHECK(in->is_last);
        CHECK(r->end < r->cut_end && r->cut_end <= len);
        CHECK(zeros(seg, r->cut_end, len));
    } else {
        CHECK(zeros(seg, r->end, len));
    }
    CHECK(r->end >= SF_SEG_HDR && r->end <= len);
    CHECK(r->first == in->name_first);
    CHECK(r->next - r->first == r->n);
    CHECK(s->calls == r->n);
    CHECK(r->n == 0 || s->off == r->end);
}

static void run(const uint8_t *seg,
                size_t len,
                const struct store_scan_in *in,
                size_t stop_at,
                struct store_scan_result *r,
                struct seen *s)
{
    memset(s, 0, sizeof *s);
    s->lo = seg;
    s->hi = seg + len;
    s->next = in->name_first;
    s->off = SF_SEG_HDR;
    s->stop_at = stop_at;
    store_scan_segment(seg, len, in, on_record, s, r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_scan_in in = {.dir = "fuzz", .name = NAME};
    struct store_scan_result r1, r2, r3;
    struct seen s1, s2, s3;
    const uint8_t *seg;
    uint8_t *copy;
    size_t len, stop;
    uint8_t f;

    if (size < 1) {
        return 0;
    }
    f = data[0];
    seg = data + 1;
    len = size - 1;
    in.is_last = (f & 1) != 0;
    in.is_first = (f & 2) != 0;
    in.name_first = len >= 24 ? le_get64(seg + 16) : 1;
    in.expect = in.name_first + ((f & 4) != 0);
    if (f & 8) {
        in.name_first++;
    }
    run(seg, len, &in, SIZE_MAX, &r1, &s1);
    check_result(seg, len, &in, &r1, &s1);

    copy = malloc(len > 0 ? len : 1);
    CHECK(copy != NULL);
    if (len > 0) {
        memcpy(copy, seg, len);
    }
    run(copy, len, &in, SIZE_MAX, &r2, &s2);
    CHECK(r1.verdict == r2.verdict && r1.n == r2.n && r1.end == r2.end &&
          r1.cut_end == r2.cut_end && r1.next == r2.next);
    CHECK(strcmp(r1.msg, r2.msg) == 0);

    stop = (size_t)(f >> 4);
    run(copy, len, &in, stop, &r3, &s3);
    if (r1.n > stop) { /* (a refusal too: after its good records) */
        CHECK(r3.verdict == STORE_SCAN_STOPPED && r3.cb_rv == -12345);
        CHECK(s3.calls == stop + 1);
    } else {
        CHECK(r3.verdict == r1.verdict && r3.n == r1.n);
    }
    free(copy);
    return 0;
}

#ifdef FUZZ_SEGMENT_MAKE_CORPUS
/* The seed generator (see the opening comment). */
static size_t make_segment(uint8_t *out, uint64_t first, unsigned n, size_t pad)
{
    size_t p = SF_SEG_HDR;

    sf_seg_header(out, first);
    for (unsigned i = 0; i < n; i++) {
        uint8_t payload[40];
        size_t plen = 8 + 8 * (i % 4);
        for (size_t k = 0; k < plen; k++) {
            payload[k] = (uint8_t)(first + i + k);
        }
        sf_rec_encode(out + p, first + i, 1 + i / 3, 1, payload, plen);
        p += sf_rec_size(plen);
    }
    memset(out + p, 0, pad);
    return p + pad;
}

static void seed(const char *dir,
                 const char *name,
                 uint8_t flags,
                 const uint8_t *seg,
                 size_t len)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(&flags, 1, 1, f) != 1 ||
        fwrite(seg, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    static uint8_t seg[4096], t[4096];
    size_t len, end;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    len = make_segment(seg, 1, 6, 128);
    end = len - 128;
    seed(argv[1], "ok-first-last", 3, seg, len);
    seed(argv[1], "ok-middle", 0, seg, len);
    seed(argv[1], "stop-at-2", 0x23, seg, len);
    seed(argv[1], "empty", 3, seg, make_segment(seg, 1, 0, 64));
    len = make_segment(seg, 1, 6, 128);
    for (size_t cut = end - 40; cut < end; cut += 13) {
        char name[32];
        memcpy(t, seg, len);
        memset(t + cut, 0, len - cut);
        snprintf(name, sizeof name, "torn-%zu", cut);
        seed(argv[1], name, 3, t, len);
    }
    memcpy(t, seg, len);
    t[SF_SEG_HDR + 40] ^= 0x10;
    seed(argv[1], "bit-flip", 3, t, len);
    memcpy(t, seg, len);
    t[len - 3] = 7;
    seed(argv[1], "trailing-data", 3, t, len);
    seed(argv[1], "gap", 4 | 1, seg, len);
    seed(argv[1], "name-mismatch", 8 | 3, seg, len);
    len = make_segment(seg, 1000, 3, 32);
    seed(argv[1], "later-segment", 1, seg, len);
    return 0;
}
#endif
