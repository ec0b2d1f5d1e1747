/* raft/identity.h: a node's Raft id, kept in its data directory (docs/design.md
 * §4).
 *
 * Files in the data directory DIR:
 *   DIR/node-id    exactly 16 lowercase hex digits and a newline (17 bytes):
 *                  the node's random 64-bit Raft id, never 0 and never all
 *                  ones (reserved: REPLICA_REFRESH_ID). Written once,
 *                  on the first start, and never changed.
 *   DIR/tombstone  present once the node was removed from its cluster: its id
 *                  is retired for ever, and the directory must not start a
 *                  node again. Contents are informational text (id, time,
 *                  reason); only its existence matters.
 *
 * Both files are written durably: a temporary file in DIR, written and
 * fsync'ed, renamed over the final name, then DIR fsync'ed. A crash leaves
 * either no file or the whole file (a stray "*.tmp" may remain; it is
 * ignored and replaced next time).
 *
 * Ids are printed as 16 hex digits ("%016" PRIx64), everywhere.
 *
 * Errors (common/err.h): every function returns 0 or one of IDENTITY_E_* and
 * then writes a message (ERR_MSG_SIZE bytes, err_printf) into @errmsg,
 * naming the file and what to do. Not thread-safe against another process
 * using the same directory (the node is expected to hold the directory). */
#ifndef ONCE_RAFT_IDENTITY_H_
#define ONCE_RAFT_IDENTITY_H_

#include <stdint.h>

#include "common/err.h"

/* Length of a printed id, without the NUL. */
#define IDENTITY_HEX_LEN 16

enum { ERR_IDENTITY_CODES(ERR_ENUM) }; /* common/err.h */

/* Open the identity of the data directory @dir (must exist):
 *  - DIR/tombstone exists: IDENTITY_E_TOMBSTONE, the message says the
 *    directory belongs to a removed node and to start with a fresh one;
 *  - DIR/node-id exists: read it and validate it strictly (exactly 16
 *    lowercase hex digits + '\n', nothing else, not all zero); *@id is set,
 *    or IDENTITY_E_CORRUPT naming the file;
 *  - neither: make a random non-zero id (getrandom), write DIR/node-id
 *    durably and set *@id.
 * *@id is only written on success. */
int identity_open(const char *dir, uint64_t *id, char *errmsg);

/* Only the first check of identity_open: IDENTITY_E_TOMBSTONE (with the
 * same message) if DIR/tombstone exists, else 0. For a node given its id
 * some other way. */
int identity_check_tombstone(const char *dir, char *errmsg);

/* Write DIR/tombstone durably, with @reason (may be NULL; a single line is
 * best) and the id from DIR/node-id if readable. Idempotent: an existing
 * tombstone is replaced. After it returns 0, identity_open(@dir) refuses. */
int identity_tombstone(const char *dir, const char *reason, char *errmsg);

/* Format @id as 16 lowercase hex digits into @buf (at least 17 bytes);
 * returns @buf. */
char *identity_format(uint64_t id, char *buf);

/* Parse the C string @s, which must be exactly 16 lowercase hex digits (no
 * prefix, no sign, no white space). Returns 0 and sets *@id, or
 * IDENTITY_E_INVALID. Zero
 * parses: the caller decides whether it is acceptable. */
int identity_parse(const char *s, uint64_t *id);

#endif /* ONCE_RAFT_IDENTITY_H_ */
