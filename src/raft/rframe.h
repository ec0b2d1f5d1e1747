/* raft/rframe.h: raft_uv 0.15's message framing, checked as it streams by.
 *
 * raft_uv reads every message off the Raft port as a preamble (two
 * little-endian 64-bit words: the message type and the header length), a
 * header whose layout depends on the type, and, for AppendEntries and
 * InstallSnapshot, a payload whose length the header gives. It trusts all
 * of it: it mallocs the announced header and payload sizes, and its
 * decoders read fixed offsets without checking them against the header's
 * length (a short RequestVote header, a configuration whose server count
 * runs past its buffer, an entry length that is not a multiple of 8: each
 * is a read past a heap buffer). The transport (raft/transport.h) runs
 * every byte a peer sends through an rframe before raft sees it, and
 * closes the connection at the first message that:
 *
 *   - has an unknown type, or a header length outside the type's range
 *     (fixed-size messages: their exact sizes; InstallSnapshot: at most
 *     RFRAME_SNAPSHOT_HEADER_MAX; AppendEntries: at most the message
 *     bound);
 *   - is an AppendEntries whose entry count does not fit its header, whose
 *     entry type is not one raft knows, whose entry length is not a
 *     multiple of 8, or whose preamble + header + payload exceed
 *     limits.message_max;
 *   - is an InstallSnapshot whose configuration does not decode within its
 *     length, or whose snapshot data exceeds limits.snapshot_max.
 *
 * A message is checked before its last header byte is passed on (the
 * caller forwards a chunk only after rframe_feed accepted all of it), so
 * raft never allocates a payload this check refused; it does allocate the
 * header length announced by an accepted preamble, which the ranges above
 * bound.
 *
 * Pure: no I/O, no clock. One rframe per connection; not thread-safe. */
#ifndef ONCE_RAFT_RFRAME_H_
#define ONCE_RAFT_RFRAME_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls/tls.h" /* TLS_E_FRAME */

/* The largest InstallSnapshot header: the configuration (ids, addresses,
 * roles of every server) fits many times over. */
#define RFRAME_SNAPSHOT_HEADER_MAX (64u * 1024)

/* Defaults of the two bounds (onced --raft-message-max,
 * --raft-snapshot-max): a message must fit the log that a lagging follower
 * may be sent in one AppendEntries (the automatic snapshot threshold, at
 * most 256 MiB, plus the trailing entries, at most 64 MiB); a snapshot the
 * largest table (20 M records take about 1.5 GB). */
#define RFRAME_MESSAGE_MAX_DEFAULT  (512ull << 20)
#define RFRAME_SNAPSHOT_MAX_DEFAULT (8ull << 30)

struct rframe_limits
{
    uint64_t message_max;  /* every message but InstallSnapshot, whole */
    uint64_t snapshot_max; /* InstallSnapshot's data */
};

struct rframe
{
    struct rframe_limits lim;
    int state; /* rframe.c's */
    uint8_t pre[16];
    unsigned pre_n;
    uint64_t type, hlen, hpos;
    uint64_t field;     /* the little-endian field being read */
    uint64_t n_entries; /* AppendEntries */
    uint64_t payload;   /* announced so far */
    uint64_t pay_left;  /* payload bytes still to come */
    uint8_t *hbuf;      /* InstallSnapshot's header, while it is read */
    uint64_t messages;  /* accepted whole */
};

void rframe_init(struct rframe *f, const struct rframe_limits *lim);
void rframe_free(struct rframe *f);

/* Check @n more bytes of the stream. 0: all of them may be passed on; or
 * TLS_E_FRAME (with @errmsg: which message broke which rule; the stream is
 * dead: feed nothing more) or TLS_E_NOMEM. */
int rframe_feed(struct rframe *f, const uint8_t *p, size_t n, char *errmsg);

#endif /* ONCE_RAFT_RFRAME_H_ */
