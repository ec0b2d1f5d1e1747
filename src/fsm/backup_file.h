/* fsm/backup_file.h: the backup file (oncectl snapshot backup / verify,
 * onced --restore; docs/oncectl.md, "Backup files").
 *
 * A backup is one state machine snapshot (the canonical encoding of
 * snapshot.c, at one applied index of the leader) between a header that
 * says what it holds and a trailer of checksums. Little-endian:
 *
 *   header (BACKUP_HDR_LEN bytes):
 *     "ONCEBKUP" u32 format(1) u32 header_len cluster_id[16] u64 index
 *     u64 term u64 log_time_ms u64 records settings(6 x u64)
 *     u64 snapshot_len u32 chunk_size u32 n_chunks u64 node_id
 *     u64 created_ms u32 crc32c(header before it)
 *   body: snapshot_len bytes, the fsm snapshot
 *   trailer: n_chunks x u32 crc32c (chunk i: body bytes
 *     [i * chunk_size, min((i + 1) * chunk_size, snapshot_len)))
 *     sha256[32] of everything before it, "ONCEBEND",
 *     u32 crc32c(trailer before it)
 *
 * So a flipped byte is found in its chunk (reported with the chunk's
 * offset in the file), a truncated file by its length, and a file whose
 * checksums all agree is still parsed whole (fsm_restore_build) and its
 * header compared with what the snapshot holds.
 *
 * Pure: no I/O. Thread-safe (no shared state); the caller owns buffers. */
#ifndef ONCE_FSM_BACKUP_FILE_H_
#define ONCE_FSM_BACKUP_FILE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm/fsm.h"

#define BACKUP_MAGIC     "ONCEBKUP"
#define BACKUP_END_MAGIC "ONCEBEND"
#define BACKUP_FORMAT    1u
#define BACKUP_HDR_LEN   148
#define BACKUP_SHA_LEN   32
#define BACKUP_CHUNK     (1u << 20) /* what the writer uses */
#define BACKUP_CHUNK_MIN 4096u
#define BACKUP_CHUNK_MAX (16u << 20)
/* The largest backup read or written: the fsm's records are bounded by
 * max_bytes (16 GiB at most) and a snapshot is within a small factor. */
#define BACKUP_SNAPSHOT_MAX (64ull << 30)

/* What a backup says it holds (the header). */
struct backup_info
{
    uint8_t cluster_id[FSM_CLUSTER_ID_LEN];
    uint64_t index;       /* last applied index the snapshot includes */
    uint64_t term;        /* the leader's term when it was taken */
    uint64_t log_time_ms; /* fsm_now at that index */
    uint64_t records;
    struct fsm_settings settings;
    uint64_t snapshot_len;
    uint32_t chunk_size;
    uint32_t n_chunks;
    uint64_t node_id;    /* the leader that wrote it */
    uint64_t created_ms; /* its wall clock then (information only) */
};

/* Fill the header fields of @info (but snapshot_len, chunk_size, n_chunks,
 * node_id, term, created_ms: the caller's) from a snapshot's state @f. */
void backup_info_from(const struct fsm *f, struct backup_info *info);

/* Bytes of the whole file for @snapshot_len bytes of snapshot in chunks of
 * @chunk_size; sets info->n_chunks. */
uint64_t backup_file_size(struct backup_info *info);

/* Encode the header (BACKUP_HDR_LEN bytes) into @out. */
void backup_header_encode(const struct backup_info *info, uint8_t *out);

/* Write the trailer for the @len bytes at @file (header and body, as they
 * are in the file) into @out (backup_file_size - len bytes). */
void backup_trailer_encode(const struct backup_info *info,
                           const uint8_t *file,
                           uint64_t len,
                           uint8_t *out);

/* Check a whole backup file in memory: header, length, every chunk
 * checksum, the whole-file SHA-256, the trailer, then the snapshot's own
 * structure and that the header agrees with it. 0 and *@info, or
 * FSM_E_MALFORMED / FSM_E_CHECKSUM / FSM_E_SCHEMA (-ENOMEM: out of memory)
 * with *@bad_off the byte offset in the file where it goes wrong and
 * @errmsg (ERR_MSG_SIZE) why. With @out non-NULL the parsed state is
 * handed over (the caller frees it) instead of freed. */
int backup_verify(const uint8_t *buf,
                  size_t len,
                  struct backup_info *info,
                  struct fsm **out,
                  uint64_t *bad_off,
                  char *errmsg);

#endif /* ONCE_FSM_BACKUP_FILE_H_ */
