/* The backup file (fsm/backup_file.h): a file made of a real snapshot
 * verifies; every kind of damage is refused with the offset where it is. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "fsm/backup_file.h"
#include "fsm_helpers.h"

Suite *backup_file_suite(void);

#define N_RECORDS 30000 /* a snapshot of a few chunks */

/* A booted state with @n nonces. */
static struct fsm *filled(struct fh *h, unsigned n)
{
    struct fsm_settings s;

    fh_settings(&s);
    fh_init_booted(h, FH_DIRECT, &s, FH_T0);
    for (unsigned i = 0; i < n; i += 500) {
        struct fsm_claim c[500];
        struct fsm_cmd cmds[500];
        char keys[500][16];
        unsigned m = n - i < 500 ? n - i : 500;

        for (unsigned j = 0; j < m; j++) {
            snprintf(keys[j], sizeof keys[j], "k%u", i + j);
            fh_claim(&c[j], FSM_KIND_NONCE, "scope", keys[j], i + j + 1);
            c[j].ttl_ms = 3600000;
            cmds[j] = fh_cmd_claim(&c[j]);
        }
        ck_assert_int_eq(fh_apply(h, FH_T0 + 1000, cmds, m, NULL), 0);
    }
    return h->f;
}

/* The file for state @f, with @chunk bytes per chunk: malloc'd. */
static uint8_t *make_file(const struct fsm *f, uint32_t chunk, size_t *len)
{
    struct backup_info info;
    uint64_t size;
    uint8_t *p;

    memset(&info, 0, sizeof info);
    backup_info_from(f, &info);
    info.term = 3;
    info.node_id = 0x42;
    info.created_ms = 1234;
    info.snapshot_len = fsm_snapshot_size(f);
    info.chunk_size = chunk;
    size = backup_file_size(&info);
    p = malloc(size);
    ck_assert_ptr_nonnull(p);
    backup_header_encode(&info, p);
    fsm_snapshot_write(f, p + BACKUP_HDR_LEN, info.snapshot_len);
    backup_trailer_encode(&info, p, BACKUP_HDR_LEN + info.snapshot_len,
                          p + BACKUP_HDR_LEN + info.snapshot_len);
    *len = size;
    return p;
}

static int verify(const uint8_t *p, size_t len, uint64_t *off, char *err)
{
    struct backup_info info;

    return backup_verify(p, len, &info, NULL, off, err);
}

START_TEST(test_backup_roundtrip)
{
    struct fh h;
    struct backup_info info;
    struct fsm *g = NULL;
    char err[ERR_MSG_SIZE];
    uint64_t off;
    size_t len, slen;
    uint8_t *file = make_file(filled(&h, N_RECORDS), BACKUP_CHUNK_MIN, &len);
    uint8_t *snap;

    ck_assert_msg(backup_verify(file, len, &info, &g, &off, err) == 0, "%s",
                  err);
    ck_assert_uint_eq(info.records, N_RECORDS);
    ck_assert_uint_eq(info.index, fsm_last_index(h.f));
    ck_assert_uint_eq(info.log_time_ms, FH_T0 + 1000);
    ck_assert_uint_eq(info.term, 3);
    ck_assert_uint_eq(info.node_id, 0x42);
    ck_assert_mem_eq(info.cluster_id, fsm_cluster_id(h.f), FSM_CLUSTER_ID_LEN);
    ck_assert_uint_gt(info.n_chunks, 100);
    /* The state handed over is the source's, byte for byte. */
    snap = fh_snapshot(g, &slen);
    fh_assert_snapshot(&h, snap, slen);
    free(snap);
    fsm_free(g);
    free(file);
    fh_close(&h);
}
END_TEST

/* A flipped byte anywhere is refused, at an offset at or before it and in
 * the same chunk (or the header / trailer field it hit). */
START_TEST(test_backup_flips)
{
    struct fh h;
    char err[ERR_MSG_SIZE];
    uint64_t off;
    size_t len;
    uint8_t *file = make_file(filled(&h, 2000), BACKUP_CHUNK_MIN, &len);
    const size_t at[] = {0,        9,        20,         143,
                         144,      148,      148 + 4096, len / 2,
                         len - 60, len - 40, len - 10,   len - 1};
    const size_t body_end = BACKUP_HDR_LEN + (size_t)le_get64(file + 112);

    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        file[at[i]] ^= 0x01;
        ck_assert_int_ne(verify(file, len, &off, err), 0);
        if (at[i] < BACKUP_HDR_LEN) { /* the header's own checksum */
            ck_assert_msg(off < BACKUP_HDR_LEN, "flip at %zu: %llu (%s)", at[i],
                          (unsigned long long)off, err);
        } else if (at[i] < body_end) { /* the chunk that holds it */
            ck_assert_msg(off <= at[i] && at[i] - off < BACKUP_CHUNK_MIN,
                          "flip at %zu: %llu (%s)", at[i],
                          (unsigned long long)off, err);
        } else { /* a trailer field */
            ck_assert_msg(off >= body_end, "flip at %zu: %llu (%s)", at[i],
                          (unsigned long long)off, err);
        }
        file[at[i]] ^= 0x01;
    }
    ck_assert_int_eq(verify(file, len, &off, err), 0);
    free(file);
    fh_close(&h);
}
END_TEST

START_TEST(test_backup_truncated)
{
    struct fh h;
    char err[ERR_MSG_SIZE];
    uint64_t off;
    size_t len;
    uint8_t *file = make_file(filled(&h, 500), BACKUP_CHUNK_MIN, &len);
    const size_t cut[] = {0, 7, 100, 147, 148, 1000, len - 1};

    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        ck_assert_int_eq(verify(file, cut[i], &off, err), FSM_E_MALFORMED);
        ck_assert_msg(off == cut[i], "cut at %zu reported at %llu (%s)", cut[i],
                      (unsigned long long)off, err);
    }
    ck_assert_int_eq(verify(file, len, &off, err), 0);
    free(file);
    fh_close(&h);
}
END_TEST

/* Checksums that agree over a header that lies: refused by the
 * comparison with the snapshot. */
START_TEST(test_backup_header_lies)
{
    struct fh h;
    struct backup_info info;
    char err[ERR_MSG_SIZE];
    uint64_t off;
    size_t len;
    struct fsm *f = filled(&h, 300);
    uint8_t *file = make_file(f, BACKUP_CHUNK_MIN, &len);
    uint64_t snap_len = le_get64(file + 112);

    le_put64(file + 56, 299); /* records */
    le_put32(file + 144, crc32c(0, file, 144));
    memset(&info, 0, sizeof info);
    backup_info_from(f, &info);
    info.records = 299;
    info.snapshot_len = snap_len;
    info.chunk_size = BACKUP_CHUNK_MIN;
    info.term = 3;
    info.node_id = 0x42;
    info.created_ms = 1234;
    backup_file_size(&info);
    backup_trailer_encode(&info, file, BACKUP_HDR_LEN + snap_len,
                          file + BACKUP_HDR_LEN + snap_len);
    ck_assert_int_eq(verify(file, len, &off, err), FSM_E_MALFORMED);
    ck_assert_uint_eq(off, 32);
    ck_assert_msg(strstr(err, "not the snapshot's") != NULL, "%s", err);
    free(file);
    fh_close(&h);
}
END_TEST

Suite *backup_file_suite(void)
{
    Suite *s = suite_create("backup_file");
    TCase *tc = tcase_create("backup_file");

    tcase_add_test(tc, test_backup_roundtrip);
    tcase_add_test(tc, test_backup_flips);
    tcase_add_test(tc, test_backup_truncated);
    tcase_add_test(tc, test_backup_header_lies);
    suite_add_tcase(s, tc);
    return s;
}
