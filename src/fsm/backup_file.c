/* The backup file: header, trailer and the whole-file check
 * (backup_file.h has the layout). */
#include "fsm/backup_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/crc32c.h"
#include "common/le.h"

#define TRAILER_TAIL (BACKUP_SHA_LEN + 8 + 4)

void backup_info_from(const struct fsm *f, struct backup_info *info)
{
    memcpy(info->cluster_id, fsm_cluster_id(f), FSM_CLUSTER_ID_LEN);
    info->index = fsm_last_index(f);
    info->log_time_ms = fsm_now(f);
    info->records = fsm_n_records(f);
    info->settings = *fsm_settings(f);
}

uint64_t backup_file_size(struct backup_info *info)
{
    uint64_t n = (info->snapshot_len + info->chunk_size - 1) / info->chunk_size;

    info->n_chunks = (uint32_t)n;
    return BACKUP_HDR_LEN + info->snapshot_len + 4 * n + TRAILER_TAIL;
}

void backup_header_encode(const struct backup_info *info, uint8_t *out)
{
    const struct fsm_settings *s = &info->settings;
    uint8_t *p = out;

    memcpy(p, BACKUP_MAGIC, 8);
    le_put32(p + 8, BACKUP_FORMAT);
    le_put32(p + 12, BACKUP_HDR_LEN);
    memcpy(p + 16, info->cluster_id, FSM_CLUSTER_ID_LEN);
    le_put64(p + 32, info->index);
    le_put64(p + 40, info->term);
    le_put64(p + 48, info->log_time_ms);
    le_put64(p + 56, info->records);
    le_put64(p + 64, s->max_window_ms);
    le_put64(p + 72, s->max_skew_ms);
    le_put64(p + 80, s->max_ttl_ms);
    le_put64(p + 88, s->max_lease_ms);
    le_put64(p + 96, s->max_records);
    le_put64(p + 104, s->max_bytes);
    le_put64(p + 112, info->snapshot_len);
    le_put32(p + 120, info->chunk_size);
    le_put32(p + 124, info->n_chunks);
    le_put64(p + 128, info->node_id);
    le_put64(p + 136, info->created_ms);
    le_put32(p + 144, crc32c(0, p, 144));
}

static uint32_t chunk_crc(const struct backup_info *info,
                          const uint8_t *body,
                          uint32_t i)
{
    uint64_t off = (uint64_t)i * info->chunk_size;
    uint64_t n = info->snapshot_len - off;

    if (n > info->chunk_size) {
        n = info->chunk_size;
    }
    return crc32c(0, body + off, (size_t)n);
}

/* 0, or -ENOMEM: EVP_Digest fails only allocating its context. */
static int sha256(const uint8_t *p, size_t n, uint8_t md[BACKUP_SHA_LEN])
{
    return EVP_Digest(p, n, md, NULL, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
}

void backup_trailer_encode(const struct backup_info *info,
                           const uint8_t *file,
                           uint64_t len,
                           uint8_t *out)
{
    const uint8_t *body = file + BACKUP_HDR_LEN;
    uint8_t *p = out;
    uint8_t md[BACKUP_SHA_LEN];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned mdlen = 0;

    for (uint32_t i = 0; i < info->n_chunks; i++) {
        le_put32(p + 4 * (size_t)i, chunk_crc(info, body, i));
    }
    p += 4 * (size_t)info->n_chunks;
    /* The hash covers the header, the body and the chunk table. */
    memset(md, 0, sizeof md);
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, file, (size_t)len) != 1 ||
        EVP_DigestUpdate(ctx, out, (size_t)(p - out)) != 1 ||
        EVP_DigestFinal_ex(ctx, md, &mdlen) != 1) {
        /* Only out of memory: a zero hash, which verify refuses. */
        memset(md, 0, sizeof md);
    }
    EVP_MD_CTX_free(ctx);
    memcpy(p, md, BACKUP_SHA_LEN);
    memcpy(p + BACKUP_SHA_LEN, BACKUP_END_MAGIC, 8);
    p += BACKUP_SHA_LEN + 8;
    le_put32(p, crc32c(0, out, (size_t)(p - out)));
}

/* --- verify --------------------------------------------------------------
 */

#define FAIL(code, off, ...)             \
    do {                                 \
        *bad_off = (off);                \
        err_printf(errmsg, __VA_ARGS__); \
        return (code);                   \
    } while (0)

static int parse_header(const uint8_t *p,
                        size_t len,
                        struct backup_info *info,
                        uint64_t *bad_off,
                        char *errmsg)
{
    struct fsm_settings *s = &info->settings;
    uint64_t want;

    if (len < BACKUP_HDR_LEN) {
        FAIL(FSM_E_MALFORMED, len, "truncated in the header (%zu bytes)", len);
    }
    if (memcmp(p, BACKUP_MAGIC, 8) != 0) {
        FAIL(FSM_E_MALFORMED, 0, "not a once backup file (bad magic)");
    }
    if (le_get32(p + 8) != BACKUP_FORMAT) {
        FAIL(le_get32(p + 8) > BACKUP_FORMAT ? FSM_E_SCHEMA : FSM_E_MALFORMED,
             8, "backup format %" PRIu32 " is not known", le_get32(p + 8));
    }
    if (le_get32(p + 144) != crc32c(0, p, 144)) {
        FAIL(FSM_E_CHECKSUM, 144, "header checksum mismatch");
    }
    memcpy(info->cluster_id, p + 16, FSM_CLUSTER_ID_LEN);
    info->index = le_get64(p + 32);
    info->term = le_get64(p + 40);
    info->log_time_ms = le_get64(p + 48);
    info->records = le_get64(p + 56);
    s->max_window_ms = le_get64(p + 64);
    s->max_skew_ms = le_get64(p + 72);
    s->max_ttl_ms = le_get64(p + 80);
    s->max_lease_ms = le_get64(p + 88);
    s->max_records = le_get64(p + 96);
    s->max_bytes = le_get64(p + 104);
    info->snapshot_len = le_get64(p + 112);
    info->chunk_size = le_get32(p + 120);
    info->n_chunks = le_get32(p + 124);
    info->node_id = le_get64(p + 128);
    info->created_ms = le_get64(p + 136);
    if (le_get32(p + 12) != BACKUP_HDR_LEN) {
        FAIL(FSM_E_MALFORMED, 12, "bad header length");
    }
    if (info->snapshot_len == 0 || info->snapshot_len > BACKUP_SNAPSHOT_MAX ||
        info->chunk_size < BACKUP_CHUNK_MIN ||
        info->chunk_size > BACKUP_CHUNK_MAX) {
        FAIL(FSM_E_MALFORMED, 112, "bad snapshot or chunk size");
    }
    want = info->n_chunks;
    if (backup_file_size(info) == 0 || info->n_chunks != want) {
        FAIL(FSM_E_MALFORMED, 124, "chunk count does not match the size");
    }
    return 0;
}

/* Chunks, hash and trailer of a file whose header and length are right. */
static int check_sums(const uint8_t *buf,
                      uint64_t total,
                      const struct backup_info *info,
                      uint64_t *bad_off,
                      char *errmsg)
{
    const uint8_t *body = buf + BACKUP_HDR_LEN;
    uint64_t tab = BACKUP_HDR_LEN + info->snapshot_len;
    uint64_t tail = tab + 4 * (uint64_t)info->n_chunks;
    uint8_t md[BACKUP_SHA_LEN];
    int rv;

    if (le_get32(buf + total - 4) != crc32c(0, buf + tab, total - 4 - tab)) {
        FAIL(FSM_E_CHECKSUM, total - 4, "trailer checksum mismatch");
    }
    if (memcmp(buf + tail + BACKUP_SHA_LEN, BACKUP_END_MAGIC, 8) != 0) {
        FAIL(FSM_E_MALFORMED, tail + BACKUP_SHA_LEN, "bad trailer magic");
    }
    for (uint32_t i = 0; i < info->n_chunks; i++) {
        if (chunk_crc(info, body, i) != le_get32(buf + tab + 4 * (size_t)i)) {
            uint64_t off = BACKUP_HDR_LEN + (uint64_t)i * info->chunk_size;
            FAIL(FSM_E_CHECKSUM, off,
                 "chunk %" PRIu32 " (bytes %" PRIu64 "..%" PRIu64
                 ") checksum mismatch",
                 i, off,
                 off +
                     (info->snapshot_len - (off - BACKUP_HDR_LEN) <
                              info->chunk_size
                          ? info->snapshot_len - (off - BACKUP_HDR_LEN)
                          : info->chunk_size) -
                     1);
        }
    }
    rv = sha256(buf, (size_t)tail, md);
    if (rv != 0) {
        FAIL(rv, tail, "out of memory (SHA-256)");
    }
    if (memcmp(md, buf + tail, BACKUP_SHA_LEN) != 0) {
        FAIL(FSM_E_CHECKSUM, tail, "SHA-256 of the file mismatch");
    }
    return 0;
}

/* snapshot.c ends every message with "at offset N" (of the snapshot). */
static uint64_t snapshot_offset(const char *msg)
{
    const char *at = msg != NULL ? strstr(msg, "at offset ") : NULL;

    return at != NULL ? strtoull(at + 10, NULL, 10) : 0;
}

/* The header must say what the snapshot holds. */
static int check_agrees(const struct fsm *g,
                        const struct backup_info *info,
                        uint64_t *bad_off,
                        char *errmsg)
{
    struct backup_info got;

    backup_info_from(g, &got);
    if (memcmp(got.cluster_id, info->cluster_id, FSM_CLUSTER_ID_LEN) != 0) {
        FAIL(FSM_E_MALFORMED, 16, "header cluster id is not the snapshot's");
    }
    if (got.index != info->index || got.log_time_ms != info->log_time_ms ||
        got.records != info->records) {
        FAIL(FSM_E_MALFORMED, 32,
             "header index/time/records (%" PRIu64 "/%" PRIu64 "/%" PRIu64
             ") are not the snapshot's (%" PRIu64 "/%" PRIu64 "/%" PRIu64 ")",
             info->index, info->log_time_ms, info->records, got.index,
             got.log_time_ms, got.records);
    }
    if (memcmp(&got.settings, &info->settings, sizeof got.settings) != 0) {
        FAIL(FSM_E_MALFORMED, 64, "header settings are not the snapshot's");
    }
    if (!fsm_bootstrapped(g)) {
        FAIL(FSM_E_MALFORMED, BACKUP_HDR_LEN, "the snapshot holds no cluster");
    }
    return 0;
}

int backup_verify(const uint8_t *buf,
                  size_t len,
                  struct backup_info *info,
                  struct fsm **out,
                  uint64_t *bad_off,
                  char *errmsg)
{
    struct fsm *g = NULL;
    char msg[ERR_MSG_SIZE] = "";
    uint64_t total;
    int rv;

    *bad_off = 0;
    if (out != NULL) {
        *out = NULL;
    }
    memset(info, 0, sizeof *info);
    rv = parse_header(buf, len, info, bad_off, errmsg);
    if (rv != 0) {
        return rv;
    }
    total = backup_file_size(info);
    if (len < total) {
        FAIL(FSM_E_MALFORMED, len,
             "truncated at offset %zu: the header announces %" PRIu64 " bytes",
             len, total);
    }
    if (len > total) {
        FAIL(FSM_E_MALFORMED, total, "trailing bytes after offset %" PRIu64,
             total);
    }
    rv = check_sums(buf, total, info, bad_off, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = fsm_restore_build(buf + BACKUP_HDR_LEN, (size_t)info->snapshot_len, &g,
                           msg);
    if (rv != 0) {
        FAIL(rv, BACKUP_HDR_LEN + snapshot_offset(msg), "%s", msg);
    }
    rv = check_agrees(g, info, bad_off, errmsg);
    if (rv != 0 || out == NULL) {
        fsm_free(g);
    } else {
        *out = g;
    }
    return rv;
}
