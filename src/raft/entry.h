/* raft/entry.h: the payload of one raft log entry that carries a batch.
 *
 * Layout: u32 magic "ONCB" | u32 batch length | batch bytes | zero padding to
 * a multiple of 8. The length is needed because protobuf cannot skip padding,
 * and the padding because Debian's libraft 0.15 (built with NDEBUG) writes a
 * payload whose length is not a multiple of 8 as an unreadable segment
 * (docs/raft-0.15.md, B8). Pure: no I/O; thread-safe. */
#ifndef ONCE_RAFT_ENTRY_H_
#define ONCE_RAFT_ENTRY_H_

#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "common/err.h"

#define ENTRY_MAGIC    0x42434e4fu /* "ONCB" little-endian */
#define ENTRY_HDR_SIZE 8
/* A batch is at most FSM_BATCH_MAX bytes; the entry adds header and pad. */
#define ENTRY_MAX (ENTRY_HDR_SIZE + (1u << 20) + 7)

enum { ERR_ENTRY_CODES(ERR_ENUM) }; /* common/err.h */

/* Size of the entry for a batch of @batch_len bytes (a multiple of 8). */
static inline size_t entry_size(size_t batch_len)
{
    return (ENTRY_HDR_SIZE + batch_len + 7) & ~(size_t)7;
}

/* Wrap @batch (borrowed) into a raft_malloc'd buffer, as raft_apply needs.
 * On success *out owns the memory (ownership passes to raft with the
 * apply). Returns 0, ENTRY_E_TOOBIG or ENTRY_E_NOMEM. */
int entry_wrap(const uint8_t *batch, size_t batch_len, struct raft_buffer *out);

/* Allocate the entry for a batch of @batch_len bytes with raft_malloc, write
 * its header and zero padding, and return where the batch goes (the caller
 * writes exactly @batch_len bytes there). *out owns the memory as with
 * entry_wrap. NULL if the batch is over 1 MiB or memory is short. */
uint8_t *entry_alloc(size_t batch_len, struct raft_buffer *out);

/* Find the batch inside an entry payload (borrowed). Checks the magic, the
 * length against the buffer and that the padding is zero. Returns 0 with
 * *batch pointing into @buf, or ENTRY_E_MALFORMED. */
int entry_unwrap(const void *buf,
                 size_t len,
                 const uint8_t **batch,
                 size_t *batch_len);

#endif /* ONCE_RAFT_ENTRY_H_ */
