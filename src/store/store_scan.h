/* store/store_scan.h: the load decisions over one segment's bytes, as a
 * pure function (no I/O, no allocation, no global state), so that the
 * loader (store_load.c) and the fuzz target tests/fuzz/fuzz_segment.c run
 * the very same rules (docs/store.md "Load rules" 4 and 5):
 *
 *   - the header must check and carry the first index the file's name
 *     says; a segment after the first must start where the log before it
 *     ended (else "a gap");
 *   - records must have exactly the next index and a valid checksum; the
 *     records end at 32 zero bytes, and every byte after them must be zero;
 *   - the first bad record is a torn tail only in the last segment, when
 *     every byte after the extent it claims is zero and no valid record
 *     sits inside that extent: then the caller cuts [end, cut_end);
 *   - anything else refuses, with file and offset in the message.
 *
 * Deterministic; reads only [bytes, bytes + len). Thread-safe. */
#ifndef ONCE_STORE_STORE_SCAN_H_
#define ONCE_STORE_STORE_SCAN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/store_format.h"

enum store_scan_verdict {
    STORE_SCAN_OK = 0, /* records, then zeros to the end */
    STORE_SCAN_CUT,    /* records, then a torn tail: cut it */
    STORE_SCAN_REFUSE, /* not a log we can account for: refuse to start */
    STORE_SCAN_STOPPED /* the record callback returned non-zero */
};

/* Where the bytes come from and what the log before them says. */
struct store_scan_in
{
    const char *dir, *name; /* for messages only */
    uint64_t name_first;    /* the first index in the file's name */
    bool is_first;          /* the first segment: it may start anywhere */
    uint64_t expect;        /* else: the index it must start at */
    bool is_last;           /* the last segment: a torn tail may be cut */
};

struct store_scan_result
{
    enum store_scan_verdict verdict;
    uint64_t first; /* the header's first index (valid unless REFUSE) */
    uint64_t next;  /* the index after the last good record */
    size_t n;       /* good records, each passed to the callback */
    size_t end;     /* the offset after the last good record */
    size_t cut_end; /* CUT: the torn record's extent, zero [end, cut_end) */
    int cb_rv;      /* STOPPED: what the callback returned */
    char msg[ERR_MSG_SIZE]; /* REFUSE: why, naming the file and offset */
};

/* Called for each good record in order, @off its offset in the segment;
 * @r->buf points into the bytes. Non-zero stops the scan (STOPPED). */
typedef int (*store_scan_cb)(void *arg, const struct sf_rec *r, size_t off);

/* Decide about the segment @bytes of @len bytes (its whole file). @cb may
 * be NULL. Always fills @out. */
void store_scan_segment(const uint8_t *bytes,
                        size_t len,
                        const struct store_scan_in *in,
                        store_scan_cb cb,
                        void *arg,
                        struct store_scan_result *out);

#endif /* ONCE_STORE_STORE_SCAN_H_ */
