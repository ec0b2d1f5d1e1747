/* raft/rframe.c: see rframe.h. Offsets are raft_uv 0.15's (uv_encoding.c):
 *
 *   AppendEntries header: term, prev index, prev term, commit (4 x 8), the
 *     entry count (8), then per entry term (8), type (1), unused (3),
 *     length (4); raft's encoder leaves 8 more bytes unused at the end;
 *   InstallSnapshot header: term, last index, last term, configuration
 *     index, configuration length (5 x 8), the configuration (format byte
 *     1, server count (8), per server id (8), address (NUL-terminated),
 *     role (1)), the data length (8);
 *   RequestVote 32 bytes (40 with its flags word), RequestVoteResult 16
 *   (24), AppendEntriesResult and TimeoutNow 24. */
#include "raft/rframe.h"

#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "common/assert.h"

enum { RF_PREAMBLE, RF_HEADER, RF_PAYLOAD };

#define FIXED_MAX     64u /* any fixed-size header, with room to grow */
#define AE_FIXED      40u /* AppendEntries: up to the first entry */
#define AE_ENTRY      16u
#define IS_FIXED      40u /* InstallSnapshot: up to the configuration */
#define CONF_FORMAT   1u
#define CONF_MIN      9u /* format byte and server count */
#define PREAMBLE_SIZE 16u

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

void rframe_init(struct rframe *f, const struct rframe_limits *lim)
{
    memset(f, 0, sizeof *f);
    f->lim = *lim;
    f->state = RF_PREAMBLE;
}

void rframe_free(struct rframe *f)
{
    free(f->hbuf);
    f->hbuf = NULL;
}

static const char *type_name(uint64_t type)
{
    switch (type) {
        case RAFT_IO_APPEND_ENTRIES:
            return "AppendEntries";
        case RAFT_IO_APPEND_ENTRIES_RESULT:
            return "AppendEntriesResult";
        case RAFT_IO_REQUEST_VOTE:
            return "RequestVote";
        case RAFT_IO_REQUEST_VOTE_RESULT:
            return "RequestVoteResult";
        case RAFT_IO_INSTALL_SNAPSHOT:
            return "InstallSnapshot";
        case RAFT_IO_TIMEOUT_NOW:
            return "TimeoutNow";
        default:
            return "unknown";
    }
}

/* The header lengths raft can decode safely for @type (raft reads a
 * version-2 word only when the header is longer than version 1's). */
static bool hlen_ok(const struct rframe *f, uint64_t type, uint64_t hlen)
{
    switch (type) {
        case RAFT_IO_APPEND_ENTRIES:
            return hlen >= AE_FIXED &&
                   hlen <= f->lim.message_max - PREAMBLE_SIZE;
        case RAFT_IO_APPEND_ENTRIES_RESULT:
        case RAFT_IO_TIMEOUT_NOW:
            return hlen >= 24 && hlen <= FIXED_MAX;
        case RAFT_IO_REQUEST_VOTE:
            return hlen == 32 || (hlen >= 40 && hlen <= FIXED_MAX);
        case RAFT_IO_REQUEST_VOTE_RESULT:
            return hlen == 16 || (hlen >= 24 && hlen <= FIXED_MAX);
        case RAFT_IO_INSTALL_SNAPSHOT:
            return hlen >= IS_FIXED + CONF_MIN + 8 &&
                   hlen <= RFRAME_SNAPSHOT_HEADER_MAX;
        default:
            return false;
    }
}

static int preamble_done(struct rframe *f, char *errmsg)
{
    f->type = le64(f->pre);
    f->hlen = le64(f->pre + 8);
    if (!hlen_ok(f, f->type, f->hlen)) {
        err_printf(
            errmsg, "message %llu: type %llu (%s) with a header of %llu bytes",
            (unsigned long long)f->messages + 1, (unsigned long long)f->type,
            type_name(f->type), (unsigned long long)f->hlen);
        return TLS_E_FRAME;
    }
    if (f->type == RAFT_IO_INSTALL_SNAPSHOT) {
        f->hbuf = malloc(f->hlen);
        if (f->hbuf == NULL) {
            err_printf(errmsg, "out of memory"); /* UNTESTED: malloc */
            return TLS_E_NOMEM;
        }
    }
    f->hpos = 0;
    f->field = 0;
    f->n_entries = 0;
    f->payload = 0;
    f->state = RF_HEADER;
    return 0;
}

/* One byte of an AppendEntries header, at f->hpos. */
static int ae_byte(struct rframe *f, uint8_t b, char *errmsg)
{
    uint64_t pos = f->hpos, rel, o;

    if (pos < 32) {
        return 0;
    }
    if (pos < AE_FIXED) {
        f->field |= (uint64_t)b << (8 * (pos - 32));
        if (pos == AE_FIXED - 1) {
            f->n_entries = f->field;
            if (f->n_entries > (f->hlen - AE_FIXED) / AE_ENTRY) {
                err_printf(errmsg,
                           "AppendEntries: %llu entries in a header of %llu "
                           "bytes",
                           (unsigned long long)f->n_entries,
                           (unsigned long long)f->hlen);
                return TLS_E_FRAME;
            }
        }
        return 0;
    }
    rel = pos - AE_FIXED;
    if (rel / AE_ENTRY >= f->n_entries) {
        return 0; /* raft's unused tail */
    }
    o = rel % AE_ENTRY;
    if (o == 0) {
        f->field = 0;
    } else if (o == 8 && b != RAFT_COMMAND && b != RAFT_BARRIER &&
               b != RAFT_CHANGE) {
        err_printf(errmsg, "AppendEntries: entry %llu has type %u",
                   (unsigned long long)(rel / AE_ENTRY), (unsigned)b);
        return TLS_E_FRAME;
    } else if (o >= 12) {
        f->field |= (uint64_t)b << (8 * (o - 12));
    }
    if (o != AE_ENTRY - 1) {
        return 0;
    }
    /* raft_uv places entry i + 1 at the next multiple of 8 after entry i,
     * but allocates only the sum of the lengths: an unpadded length
     * would make it point past its buffer. */
    if (f->field % 8 != 0) {
        err_printf(errmsg,
                   "AppendEntries: entry %llu is %llu bytes, not a "
                   "multiple of 8",
                   (unsigned long long)(rel / AE_ENTRY),
                   (unsigned long long)f->field);
        return TLS_E_FRAME;
    }
    f->payload += f->field; /* each <= 4 GiB, at most 2^60 of them */
    if (f->payload > f->lim.message_max - PREAMBLE_SIZE - f->hlen) {
        err_printf(errmsg, "AppendEntries over the message bound (%llu bytes)",
                   (unsigned long long)f->lim.message_max);
        return TLS_E_FRAME;
    }
    return 0;
}

/* The configuration raft's configurationDecode will read, in bounds. */
static bool conf_ok(const uint8_t *c, uint64_t len)
{
    uint64_t n, pos = CONF_MIN;

    if (len < CONF_MIN || c[0] != CONF_FORMAT) {
        return false;
    }
    n = le64(c + 1);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *nul;

        if (len - pos < 8) {
            return false;
        }
        pos += 8; /* id */
        nul = memchr(c + pos, '\0', len - pos);
        if (nul == NULL) {
            return false;
        }
        pos = (uint64_t)(nul - c) + 1;
        if (pos >= len) {
            return false; /* no role byte */
        }
        pos++;
    }
    return true;
}

static int snapshot_header_done(struct rframe *f, char *errmsg)
{
    uint64_t conf_len;

    /* preamble_done allocated it; header_done frees it once, and a stream
     * that failed is fed nothing more (rframe.h). */
    ONCE_ASSERT(f->hbuf != NULL, "an InstallSnapshot header is buffered");
    conf_len = le64(f->hbuf + 32);

    if (conf_len > f->hlen - IS_FIXED - 8 ||
        !conf_ok(f->hbuf + IS_FIXED, conf_len)) {
        err_printf(errmsg,
                   "InstallSnapshot: the configuration (%llu bytes) "
                   "does not decode",
                   (unsigned long long)conf_len);
        return TLS_E_FRAME;
    }
    f->payload = le64(f->hbuf + IS_FIXED + conf_len);
    if (f->payload > f->lim.snapshot_max) {
        err_printf(errmsg,
                   "InstallSnapshot of %llu bytes, over the snapshot bound "
                   "(%llu)",
                   (unsigned long long)f->payload,
                   (unsigned long long)f->lim.snapshot_max);
        return TLS_E_FRAME;
    }
    return 0;
}

static void message_done(struct rframe *f)
{
    f->messages++;
    f->pre_n = 0;
    f->state = RF_PREAMBLE;
}

static int header_done(struct rframe *f, char *errmsg)
{
    if (f->type == RAFT_IO_INSTALL_SNAPSHOT) {
        int rv = snapshot_header_done(f, errmsg);

        free(f->hbuf);
        f->hbuf = NULL;
        if (rv != 0) {
            return rv;
        }
    }
    f->pay_left = f->payload;
    if (f->pay_left == 0) {
        message_done(f);
    } else {
        f->state = RF_PAYLOAD;
    }
    return 0;
}

/* Header bytes: AppendEntries byte by byte (its header grows with the
 * entries), the others copied whole. Returns bytes used or an error. */
static int header_bytes(struct rframe *f,
                        const uint8_t *p,
                        size_t n,
                        size_t *used,
                        char *errmsg)
{
    uint64_t want;
    size_t k;
    int rv;

    ONCE_ASSERT(f->hpos <= f->hlen, "the position stays inside the header");
    want = f->hlen - f->hpos;
    k = n < want ? n : (size_t)want;
    if (f->type == RAFT_IO_APPEND_ENTRIES) {
        for (size_t i = 0; i < k; i++, f->hpos++) {
            rv = ae_byte(f, p[i], errmsg);
            if (rv != 0) {
                return rv;
            }
        }
    } else {
        if (f->hbuf != NULL) {
            memcpy(f->hbuf + f->hpos, p, k);
        }
        f->hpos += k;
    }
    *used = k;
    return f->hpos == f->hlen ? header_done(f, errmsg) : 0;
}

int rframe_feed(struct rframe *f, const uint8_t *p, size_t n, char *errmsg)
{
    while (n > 0) {
        size_t k;
        int rv = 0;

        switch (f->state) {
            case RF_PREAMBLE:
                k = PREAMBLE_SIZE - f->pre_n < n ? PREAMBLE_SIZE - f->pre_n : n;
                memcpy(f->pre + f->pre_n, p, k);
                f->pre_n += (unsigned)k;
                if (f->pre_n == PREAMBLE_SIZE) {
                    rv = preamble_done(f, errmsg);
                }
                break;
            case RF_HEADER:
                rv = header_bytes(f, p, n, &k, errmsg);
                break;
            default: /* RF_PAYLOAD: raft's to read */
                k = f->pay_left < n ? (size_t)f->pay_left : n;
                f->pay_left -= k;
                if (f->pay_left == 0) {
                    message_done(f);
                }
                break;
        }
        if (rv != 0) {
            return rv;
        }
        p += k;
        n -= k;
    }
    return 0;
}
