/* tests/store/test_store.c: the log store without raft, on one engine case
 * per program (STORE_TEST_ENGINE; the loop index _i is that case: 0 pwrite,
 * 1 uring with O_DIRECT, 2 uring buffered; sh_open asserts that the case's
 * engine, and O_DIRECT or not, is what runs). Round trips of append,
 * truncate, snapshots and metadata; a torn tail at every byte offset of the
 * last record; a bit flip in every byte of a record followed by data (must
 * refuse); resurrection after truncate and a shorter rewrite; running out
 * of space (fail-stop, nothing corrupt). */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_format.h"
#include "store_helpers.h"

#define SEG_SMALL 4096

static void path_of(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void seg_path(char *out, size_t n, const char *dir, uint64_t first)
{
    char name[64];
    snprintf(name, sizeof name, "seg-%020llu", (unsigned long long)first);
    path_of(out, n, dir, name);
}

static int count_prefix(const char *dir, const char *prefix)
{
    char cmd[600];
    FILE *p;
    int n = -1;

    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^%s' || true", dir, prefix);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

/* The snapshot beyond the newest two is removed after the put, on the
 * loop's thread pool: run the loop until @dir holds @want snapshots (or
 * 5 s have passed), then check. */
static void wait_snaps(struct sh *h, const char *dir, int want)
{
    for (int i = 0; i < 500 && count_prefix(dir, "snap-") != want; i++) {
        uv_run(&h->loop, UV_RUN_NOWAIT);
        usleep(10000);
    }
    ck_assert_int_eq(count_prefix(dir, "snap-"), want);
}

/* In calls of 10, so that small segments roll (one call is one batch). */
static void append_chunks(struct sh *h,
                          uint64_t first,
                          unsigned n,
                          uint64_t term)
{
    for (unsigned i = 0; i < n; i += 10) {
        ck_assert_int_eq(
            sh_append(h, first + i, n - i < 10 ? n - i : 10, term, 0), 0);
    }
}

START_TEST(empty_then_roundtrip)
{
    struct sh h;
    struct sh_loaded l;
    struct store_log_stats st;
    char dir[256];

    sh_mkdir(dir, sizeof dir, "rt");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_str_eq(h.s.name, _i == SH_PWRITE ? "pwrite" : "uring");
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.term, 0);
    ck_assert_uint_eq(l.n, 0);
    ck_assert_uint_eq(l.start, 1);
    ck_assert_ptr_null(l.snap);
    sh_loaded_free(&l);
    ck_assert_int_eq(h.s.ops->set_term(&h.s, 3), 0);
    ck_assert_int_eq(h.s.ops->set_vote(&h.s, 2), 0);
    for (unsigned i = 0; i < 30; i++) {
        ck_assert_int_eq(sh_append(&h, 1 + 10 * i, 10, 3, 0), 0);
    }
    store_log_stats(&h.s, &st);
    ck_assert_uint_eq(st.records, 300);
    ck_assert_uint_gt(st.rolls, 3); /* 4 KiB segments: several */
    sh_close(&h);

    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.term, 3);
    ck_assert_uint_eq(l.vote, 2);
    ck_assert_uint_eq(l.start, 1);
    ck_assert_uint_eq(l.n, 300);
    ck_assert_uint_eq(h.s.cut_index, 0);
    sh_check_range(&l, 1, 300, 3, 0);
    sh_loaded_free(&l);
    /* Appending goes on where it stopped. */
    ck_assert_int_eq(sh_append(&h, 301, 5, 4, 0), 0);
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, 305);
    sh_check_range(&l, 301, 305, 4, 0);
    sh_loaded_free(&l);
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

/* 64 appends queued before the loop runs: fewer writes than appends, and
 * the callbacks in order (sh_append asserts the order). */
START_TEST(group_commit)
{
    struct sh h;
    struct sh_loaded l;
    struct store_log_stats st;
    char dir[256];

    sh_mkdir(dir, sizeof dir, "gc");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 20), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    ck_assert_int_eq(sh_append(&h, 1, 64, 1, 4096), 0);
    store_log_stats(&h.s, &st);
    ck_assert_uint_eq(st.records, 64);
    ck_assert_uint_lt(st.batches, 64);
    ck_assert_uint_ge(st.batches, 1);
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 20), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, 64);
    sh_check_range(&l, 1, 64, 1, 4096);
    sh_loaded_free(&l);
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

/* Loaded entries share batches (store_load.c: raft 0.15 scans its whole
 * log for every batch that leaves it, so one batch per entry made the
 * first snapshot after a restart quadratic): far fewer batches than
 * entries, each batch's entries contiguous, a large entry in a batch of
 * its own, every payload 8-aligned and intact. */
START_TEST(loaded_entries_share_batches)
{
    struct sh h;
    struct sh_loaded l;
    char dir[256];
    size_t batches = 0, big = 300 * 1024;

    sh_mkdir(dir, sizeof dir, "lb");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 8 << 20), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    for (unsigned i = 0; i < 200; i++) {
        ck_assert_int_eq(sh_append(&h, 1 + 10 * i, 10, 1, 64), 0);
    }
    ck_assert_int_eq(sh_append(&h, 2001, 1, 1, big), 0);
    for (unsigned i = 0; i < 100; i++) {
        ck_assert_int_eq(sh_append(&h, 2002 + 10 * i, 10, 1, 64), 0);
    }
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 8 << 20), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, 3001);
    sh_check_range(&l, 1, 2000, 1, 64);
    sh_check_range(&l, 2001, 2001, 1, big);
    sh_check_range(&l, 2002, 3001, 1, 64);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_ptr_nonnull(l.entries[i].batch);
        ck_assert_uint_eq((uintptr_t)l.entries[i].buf.base % 8, 0);
        if (i > 0 && l.entries[i].batch == l.entries[i - 1].batch) {
            continue;
        }
        batches++;
        for (size_t j = 0; j < i; j++) { /* contiguous: never seen before */
            ck_assert_ptr_ne(l.entries[j].batch, l.entries[i].batch);
        }
    }
    /* The large one alone; the small ones before and after it in a batch
     * each (3001 entries of 64 bytes fit in one 1 MiB batch). */
    ck_assert_ptr_eq(l.entries[2000].batch, l.entries[2000].buf.base);
    ck_assert_ptr_ne(l.entries[1999].batch, l.entries[2000].batch);
    ck_assert_ptr_ne(l.entries[2001].batch, l.entries[2000].batch);
    ck_assert_uint_eq(batches, 3);
    sh_loaded_free(&l);
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

START_TEST(truncate_roundtrip)
{
    struct sh h;
    struct sh_loaded l;
    char dir[256];

    sh_mkdir(dir, sizeof dir, "tr");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    append_chunks(&h, 1, 200, 1);
    /* Queued behind nothing; then appends queued behind it. */
    ck_assert_int_eq(sh_truncate(&h, 150), 0);
    ck_assert_int_eq(sh_append(&h, 150, 10, 2, 0), 0);
    /* A truncation in the middle of a segment, and one at a segment's
     * first index (found by walking the files: either is covered by one
     * of these). */
    ck_assert_int_eq(sh_truncate(&h, 155), 0);
    ck_assert_int_eq(sh_truncate(&h, 40), 0);
    ck_assert_int_eq(sh_append(&h, 40, 3, 3, 0), 0);
    sh_close(&h);

    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, 42);
    sh_check_range(&l, 1, 39, 1, 0);
    sh_check_range(&l, 40, 42, 3, 0);
    sh_loaded_free(&l);
    /* Truncate everything, then write again from 1. */
    ck_assert_int_eq(sh_truncate(&h, 1), 0);
    ck_assert_int_eq(sh_append(&h, 1, 2, 5, 0), 0);
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, 2);
    sh_check_range(&l, 1, 2, 5, 0);
    sh_loaded_free(&l);
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

/* Truncate, then a shorter rewrite: the old records after it must never
 * come back, whatever their terms (here the old ones have the higher). */
START_TEST(no_resurrection)
{
    struct sh h;
    struct sh_loaded l;
    char dir[256];

    sh_mkdir(dir, sizeof dir, "res");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 20), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    ck_assert_int_eq(sh_append(&h, 1, 50, 9, 64), 0);
    ck_assert_int_eq(sh_truncate(&h, 10), 0);
    ck_assert_int_eq(sh_append(&h, 10, 5, 2, 8), 0);
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 20), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, 14);
    sh_check_range(&l, 1, 9, 9, 64);
    sh_check_range(&l, 10, 14, 2, 8);
    sh_loaded_free(&l);
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

START_TEST(snapshots)
{
    struct sh h;
    struct sh_loaded l;
    struct raft_snapshot *got = NULL;
    char dir[256];

    sh_mkdir(dir, sizeof dir, "snap");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    ck_assert_int_eq(sh_get(&h, &got), RAFT_NOTFOUND);
    append_chunks(&h, 1, 300, 1);
    ck_assert_int_eq(sh_put(&h, 20, 250, 1, 1000), 0);
    ck_assert_int_eq(sh_put(&h, 20, 260, 1, 1001), 0);
    ck_assert_int_eq(sh_put(&h, 20, 280, 1, 1002), 0);
    ck_assert_int_le(count_prefix(dir, "snap-"), 3); /* 250 maybe still */
    wait_snaps(&h, dir, 2);                          /* the last two */
    ck_assert_int_eq(sh_get(&h, &got), 0);
    ck_assert_uint_eq(got->index, 280);
    ck_assert_uint_eq(got->configuration.n, 2);
    ck_assert_uint_eq(got->configuration.servers[1].role, RAFT_SPARE);
    ck_assert_str_eq(got->configuration.servers[1].address, "127.0.0.1:9002");
    ck_assert_uint_eq(got->bufs[0].len, 1002);
    sh_snapshot_free(got);
    sh_close(&h);

    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_ptr_nonnull(l.snap);
    ck_assert_uint_eq(l.snap->index, 280);
    ck_assert_uint_eq(l.snap->configuration_index, 1);
    {
        uint8_t want[1002];
        sh_payload(want, sizeof want, 280, 1);
        ck_assert_uint_eq(l.snap->bufs[0].len, 1002);
        ck_assert_mem_eq(l.snap->bufs[0].base, want, sizeof want);
    }
    /* Segments wholly below 280 - 20 are gone; the trailing entries are
     * still there. */
    ck_assert_uint_le(l.start, 261);
    ck_assert_uint_gt(l.start, 1);
    ck_assert_uint_eq(l.start + l.n - 1, 300);
    sh_check_range(&l, l.start, 300, 1, 0);
    sh_loaded_free(&l);

    /* An installed snapshot (trailing 0) replaces the log. */
    ck_assert_int_eq(sh_put(&h, 0, 500, 4, 64), 0);
    ck_assert_int_eq(count_prefix(dir, "seg-"), 0);
    ck_assert_int_eq(sh_append(&h, 501, 3, 4, 0), 0);
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.snap->index, 500);
    ck_assert_uint_eq(l.snap->term, 4);
    ck_assert_uint_eq(l.start, 501);
    ck_assert_uint_eq(l.n, 3);
    sh_check_range(&l, 501, 503, 4, 0);
    sh_loaded_free(&l);
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

/* A get reads the newest snapshot off the queue: the file it opened stays
 * readable while later puts remove its name, and a close waits for it. */
START_TEST(get_beside_puts)
{
    struct sh h;
    struct sh_loaded l;
    struct sh_get g;
    struct raft_snapshot *got = NULL;
    uint8_t want[1000];
    char dir[256];

    sh_mkdir(dir, sizeof dir, "get");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    append_chunks(&h, 1, 300, 1);
    ck_assert_int_eq(sh_put(&h, 20, 250, 1, 1000), 0);
    sh_get_start(&h, &g);
    /* The second put removes snap-250 (only the newest two stay); while
     * the get is in flight it is unlinked whole, never cut down first. */
    ck_assert_int_eq(sh_put(&h, 20, 260, 1, 1001), 0);
    ck_assert_int_eq(sh_put(&h, 20, 280, 1, 1002), 0);
    ck_assert_int_eq(sh_append(&h, 301, 5, 1, 0), 0);
    ck_assert_int_eq(sh_get_wait(&h, &g, &got), 0);
    ck_assert_uint_eq(got->index, 250);
    sh_payload(want, sizeof want, 250, 1);
    ck_assert_uint_eq(got->bufs[0].len, sizeof want);
    ck_assert_mem_eq(got->bufs[0].base, want, sizeof want);
    sh_snapshot_free(got);

    /* Closing with a get in flight: its callback comes first. */
    sh_get_start(&h, &g);
    ck_assert_int_eq(g.rv, 0);
    sh_close(&h);
    ck_assert(g.done);
    if (g.status == 0) {
        ck_assert_uint_eq(g.s->index, 280);
        sh_snapshot_free(g.s);
    }
    sh_rmdir(dir);
}
END_TEST

/* A crash while an installed snapshot's segments were being removed: the
 * lower segments of the old log are still there, ending below it. */
START_TEST(stale_log_below_installed_snapshot)
{
    struct sh h;
    struct sh_loaded l;
    char dir[256], save[256], p[512];

    sh_mkdir(dir, sizeof dir, "inst");
    sh_mkdir(save, sizeof save, "inst-save");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    append_chunks(&h, 1, 100, 1);
    sh_copy_dir(dir, save);
    ck_assert_int_eq(sh_put(&h, 0, 500, 4, 64), 0);
    sh_close(&h);
    /* Put back the first segment of the old log. */
    seg_path(p, sizeof p, save, 1);
    {
        size_t len;
        uint8_t *b = sh_read_file(p, &len);
        seg_path(p, sizeof p, dir, 1);
        sh_write_file(p, b, len);
        free(b);
    }
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.snap->index, 500);
    ck_assert_uint_eq(l.n, 0);
    ck_assert_uint_eq(l.start, 501);
    sh_loaded_free(&l);
    ck_assert_int_eq(count_prefix(dir, "seg-"), 0);
    sh_close(&h);
    sh_rmdir(dir);
    sh_rmdir(save);
}
END_TEST

START_TEST(metadata_double_record)
{
    struct sh h;
    struct sh_loaded l;
    char dir[256], p[512];
    uint8_t *b;
    size_t len;

    sh_mkdir(dir, sizeof dir, "meta");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    for (unsigned t = 1; t <= 7; t++) {
        ck_assert_int_eq(h.s.ops->set_term(&h.s, t), 0);
    }
    ck_assert_int_eq(h.s.ops->set_vote(&h.s, 5), 0); /* seq 8: meta-a */
    sh_close(&h);
    /* A torn write of the latest (meta-a): the previous state survives. */
    path_of(p, sizeof p, dir, "meta-a");
    b = sh_read_file(p, &len);
    ck_assert_uint_eq(len, SF_META_SIZE);
    b[30] ^= 0x10;
    sh_write_file(p, b, len);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.term, 7);
    ck_assert_uint_eq(l.vote, 0);
    sh_loaded_free(&l);
    /* The next update goes to meta-a again and wins. */
    ck_assert_int_eq(h.s.ops->set_vote(&h.s, 3), 0);
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.term, 7);
    ck_assert_uint_eq(l.vote, 3);
    sh_loaded_free(&l);
    sh_close(&h);
    /* Both copies bad: refuse. */
    b[30] ^= 0x10;
    b[40] ^= 0x01;
    sh_write_file(p, b, len);
    free(b);
    path_of(p, sizeof p, dir, "meta-b");
    b = sh_read_file(p, &len);
    b[20] ^= 0x01;
    sh_write_file(p, b, len);
    free(b);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), RAFT_CORRUPT);
    sh_rmdir(dir);
}
END_TEST

START_TEST(bootstrap_once)
{
    struct sh h;
    struct sh_loaded l;
    struct raft_configuration c;
    char dir[256];

    sh_mkdir(dir, sizeof dir, "boot");
    raft_configuration_init(&c);
    ck_assert_int_eq(raft_configuration_add(&c, 7, "127.0.0.1:9", RAFT_VOTER),
                     0);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(h.s.ops->bootstrap(&h.s, &c), 0);
    ck_assert_int_eq(h.s.ops->bootstrap(&h.s, &c), RAFT_CANTBOOTSTRAP);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.term, 1);
    ck_assert_uint_eq(l.n, 1);
    ck_assert_uint_eq(l.entries[0].type, RAFT_CHANGE);
    ck_assert_uint_eq(l.entries[0].term, 1);
    sh_loaded_free(&l);
    ck_assert_int_eq(sh_append(&h, 2, 3, 1, 0), 0);
    sh_close(&h);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(h.s.ops->recover(&h.s, &c), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, 5);
    ck_assert_uint_eq(l.entries[4].type, RAFT_CHANGE);
    ck_assert_uint_eq(l.entries[4].term, 1);
    sh_loaded_free(&l);
    sh_close(&h);
    raft_configuration_close(&c);
    sh_rmdir(dir);
}
END_TEST

/* Build a one-segment log of @n entries; return the offset and size of
 * the last record. */
static void build_log(const char *dir,
                      int engine,
                      unsigned n,
                      size_t *last_off,
                      size_t *last_size)
{
    struct sh h;
    struct sh_loaded l;
    size_t off = SF_SEG_HDR;

    ck_assert_int_eq(sh_open(&h, dir, sh_engine(engine), 1 << 16), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    ck_assert_int_eq(h.s.ops->set_term(&h.s, 2), 0);
    ck_assert_int_eq(sh_append(&h, 1, n, 2, 0), 0);
    sh_close(&h);
    for (unsigned i = 1; i < n; i++) {
        off += sf_rec_size(sh_len(i));
    }
    *last_off = off;
    *last_size = sf_rec_size(sh_len(n));
}

/* Every prefix of the last record (the rest zero) is a torn tail: cut,
 * cut_index set, and the log writable again from there. */
START_TEST(torn_tail_every_offset)
{
    char src[256], dir[256], p[512];
    size_t off, size, len;
    uint8_t *orig;
    const unsigned n = 12; /* sh_len(12) = 88: a 120-byte record */

    sh_mkdir(src, sizeof src, "torn-src");
    build_log(src, _i, n, &off, &size);
    ck_assert_uint_ge(size, 64);
    seg_path(p, sizeof p, src, 1);
    orig = sh_read_file(p, &len);
    for (size_t k = 0; k < size; k++) {
        struct sh h;
        struct sh_loaded l;
        uint8_t *b = malloc(len);

        ck_assert_ptr_nonnull(b);
        memcpy(b, orig, len);
        memset(b + off + k, 0, size - k);
        sh_mkdir(dir, sizeof dir, "torn");
        sh_copy_dir(src, dir);
        seg_path(p, sizeof p, dir, 1);
        sh_write_file(p, b, len);
        free(b);
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
        ck_assert_int_eq(sh_load(&h, &l), 0);
        ck_assert_uint_eq(l.n, n - 1);
        sh_check_range(&l, 1, n - 1, 2, 0);
        /* k == 0: nothing of it is there, nothing was cut. */
        ck_assert_uint_eq(h.s.cut_index, k == 0 ? 0 : n);
        ck_assert_int_eq(h.cut_notices, k == 0 ? 0 : 1);
        sh_loaded_free(&l);
        /* A restart before the log holds index n again: the record is gone
         * from the disk, the no-vote state is not (it is in the
         * metadata). A --bootstrap restart, which raft refuses here,
         * scans first and must not lose it either. */
        sh_close(&h);
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
        {
            struct raft_configuration c;

            raft_configuration_init(&c);
            ck_assert_int_eq(
                raft_configuration_add(&c, 7, "127.0.0.1:9", RAFT_VOTER), 0);
            ck_assert_int_eq(h.s.ops->bootstrap(&h.s, &c), RAFT_CANTBOOTSTRAP);
            raft_configuration_close(&c);
        }
        ck_assert_int_eq(sh_load(&h, &l), 0);
        ck_assert_uint_eq(l.n, n - 1);
        ck_assert_uint_eq(h.s.cut_index, k == 0 ? 0 : n);
        sh_loaded_free(&l);
        ck_assert_int_eq(sh_append(&h, n, 2, 3, 0), 0);
        sh_close(&h);
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
        ck_assert_int_eq(sh_load(&h, &l), 0);
        ck_assert_uint_eq(l.n, n + 1);
        ck_assert_uint_eq(h.s.cut_index, 0);
        sh_check_range(&l, n, n + 1, 3, 0);
        sh_loaded_free(&l);
        sh_close(&h);
        sh_rmdir(dir);
    }
    free(orig);
    sh_rmdir(src);
}
END_TEST

/* Open @dir (accepting the cut when @accept), load, and check the cut index
 * load reports, the log's last index and the term the metadata kept. */
static void load_expect(const char *dir,
                        int engine,
                        bool accept,
                        uint64_t cut,
                        unsigned last,
                        struct sh *h)
{
    struct sh_loaded l;

    ck_assert_int_eq(accept ? sh_open_accept(h, dir, sh_engine(engine), 1 << 16)
                            : sh_open(h, dir, sh_engine(engine), 1 << 16),
                     0);
    ck_assert_int_eq(sh_load(h, &l), 0);
    ck_assert_uint_eq(h->s.cut_index, cut);
    ck_assert_uint_eq(l.n, last);
    ck_assert_uint_eq(l.term, 2);
    sh_loaded_free(&l);
    sh_close(h);
}

/* onced --accept-cut-tail: the cut index is cleared durably (a later plain
 * load reports none), at error level; whether the cut is from an earlier
 * start or from this very load; and with no cut pending it says it had
 * nothing to do and changes nothing. */
START_TEST(accept_cut_tail_clears_durably)
{
    char dir[256], p[512];
    size_t off, size, len;
    uint8_t *b;
    const unsigned n = 12;
    struct sh h;

    for (int same_load = 0; same_load < 2; same_load++) {
        sh_mkdir(dir, sizeof dir, "accept-cut");
        build_log(dir, _i, n, &off, &size);
        seg_path(p, sizeof p, dir, 1);
        b = sh_read_file(p, &len);
        memset(b + off + size / 2, 0, size - size / 2); /* torn */
        sh_write_file(p, b, len);
        free(b);
        if (!same_load) {
            /* Cut at one start, still pending at the next. */
            load_expect(dir, _i, false, n, n - 1, &h);
            ck_assert_int_eq(h.cut_notices, 1);
            load_expect(dir, _i, false, n, n - 1, &h);
        }
        load_expect(dir, _i, true, 0, n - 1, &h);
        ck_assert_int_eq(h.cut_notices, same_load ? 1 : 0);
        ck_assert_int_eq(h.accept_notices, 1);
        ck_assert_int_eq(h.nothing_notices, 0);
        /* Durable: a plain start finds no cut... */
        load_expect(dir, _i, false, 0, n - 1, &h);
        ck_assert_int_eq(h.accept_notices, 0);
        /* ...and the flag again has nothing to do. */
        load_expect(dir, _i, true, 0, n - 1, &h);
        ck_assert_int_eq(h.accept_notices, 0);
        ck_assert_int_eq(h.nothing_notices, 1);
        /* The log takes index n (another entry) from there. */
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
        {
            struct sh_loaded l;

            ck_assert_int_eq(sh_load(&h, &l), 0);
            sh_loaded_free(&l);
        }
        ck_assert_int_eq(sh_append(&h, n, 1, 3, 0), 0);
        sh_close(&h);
        load_expect(dir, _i, false, 0, n, &h);
        sh_rmdir(dir);
    }
}
END_TEST

/* A torn last record whose payload holds the record magic at an 8-aligned
 * offset is still a torn tail (the magic alone is no later record). */
START_TEST(torn_tail_magic_in_payload)
{
    char dir[256], p[512];
    size_t off, size, len;
    uint8_t *b;
    const unsigned n = 12;
    struct sh h;
    struct sh_loaded l;

    sh_mkdir(dir, sizeof dir, "torn-magic");
    build_log(dir, _i, n, &off, &size);
    seg_path(p, sizeof p, dir, 1);
    b = sh_read_file(p, &len);
    memcpy(b + off + 32, "REC1", 4);  /* payload start: 8-aligned */
    memset(b + off + size - 8, 0, 8); /* and its end never landed */
    sh_write_file(p, b, len);
    free(b);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_eq(l.n, n - 1);
    ck_assert_uint_eq(h.s.cut_index, n);
    sh_loaded_free(&l);
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

/* One flipped bit in any byte of a record that has a record after it:
 * refuse to start, naming the file and the offset. */
START_TEST(bit_flip_refused)
{
    char src[256], dir[256], p[512];
    size_t off, size, len, prev_off, prev_size;
    uint8_t *orig;
    const unsigned n = 12;

    sh_mkdir(src, sizeof src, "flip-src");
    build_log(src, _i, n, &off, &size);
    prev_size = sf_rec_size(sh_len(n - 1));
    prev_off = off - prev_size;
    seg_path(p, sizeof p, src, 1);
    orig = sh_read_file(p, &len);
    for (size_t k = 0; k < prev_size; k++) {
        struct sh h;
        struct sh_loaded l;
        uint8_t *b = malloc(len);
        char want[64];

        ck_assert_ptr_nonnull(b);
        memcpy(b, orig, len);
        b[prev_off + k] ^= (uint8_t)(1u << (k % 8));
        sh_mkdir(dir, sizeof dir, "flip");
        sh_copy_dir(src, dir);
        seg_path(p, sizeof p, dir, 1);
        sh_write_file(p, b, len);
        free(b);
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
        ck_assert_int_eq(sh_load(&h, &l), RAFT_CORRUPT);
        snprintf(want, sizeof want, "offset %zu", prev_off);
        ck_assert_msg(strstr(h.s.errmsg, "seg-00000000000000000001") != NULL &&
                          strstr(h.s.errmsg, want) != NULL,
                      "flip at %zu: %s", k, h.s.errmsg);
        sh_close(&h);
        sh_rmdir(dir);
    }
    /* The segment header too. */
    for (size_t k = 0; k < 24; k++) {
        struct sh h;
        struct sh_loaded l;
        uint8_t *b = malloc(len);

        memcpy(b, orig, len);
        b[k] ^= 0x04;
        sh_mkdir(dir, sizeof dir, "flip");
        sh_copy_dir(src, dir);
        seg_path(p, sizeof p, dir, 1);
        sh_write_file(p, b, len);
        free(b);
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
        ck_assert_int_eq(sh_load(&h, &l), RAFT_CORRUPT);
        sh_close(&h);
        sh_rmdir(dir);
    }
    /* Data after the end of the records (a stray byte). */
    {
        struct sh h;
        struct sh_loaded l;
        uint8_t *b = malloc(len);

        memcpy(b, orig, len);
        b[off + size + 200] = 1;
        sh_mkdir(dir, sizeof dir, "flip");
        sh_copy_dir(src, dir);
        seg_path(p, sizeof p, dir, 1);
        sh_write_file(p, b, len);
        free(b);
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 1 << 16), 0);
        ck_assert_int_eq(sh_load(&h, &l), RAFT_CORRUPT);
        sh_close(&h);
        sh_rmdir(dir);
    }
    free(orig);
    sh_rmdir(src);
}
END_TEST

/* A bad record in a segment that is not the last, a missing middle
 * segment, a bad snapshot: all refuse. */
START_TEST(refuse_gaps_and_bad_snapshots)
{
    struct sh h;
    struct sh_loaded l;
    char dir[256], p[512], name[64];
    uint8_t *b;
    size_t len;
    uint64_t second = 0;

    sh_mkdir(dir, sizeof dir, "gap");
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    append_chunks(&h, 1, 300, 1);
    ck_assert_int_eq(sh_put(&h, 200, 250, 1, 100), 0);
    sh_close(&h);
    /* The first segment's tail: not the last segment, so never torn. */
    {
        FILE *f;
        char cmd[600];
        unsigned long long v;
        snprintf(cmd, sizeof cmd, "ls %s | grep '^seg-' | sed -n 1p", dir);
        f = popen(cmd, "r");
        ck_assert_int_eq(fscanf(f, "seg-%llu", &v), 1);
        pclose(f);
        seg_path(p, sizeof p, dir, v);
    }
    b = sh_read_file(p, &len);
    {
        uint8_t *c = malloc(len);
        size_t off = SF_SEG_HDR;
        memcpy(c, b, len);
        while (off + SF_REC_HDR <= len && c[off] != 0) {
            size_t l2 = (size_t)c[off + 28] | (size_t)c[off + 29] << 8;
            off += sf_rec_size(l2);
        }
        ck_assert_uint_gt(off, SF_SEG_HDR);
        /* A flipped byte in its last record, zeros after it: torn-looking,
         * but later segments exist. */
        c[off - 8] ^= 0xff;
        sh_write_file(p, c, len);
        ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
        ck_assert_int_eq(sh_load(&h, &l), RAFT_CORRUPT);
        ck_assert_ptr_nonnull(strstr(h.s.errmsg, "not a torn tail"));
        sh_close(&h);
        free(c);
    }
    sh_write_file(p, b, len);
    free(b);
    /* A missing middle segment: find the second one by listing. */
    {
        FILE *f;
        char cmd[600];
        unsigned long long v;
        snprintf(cmd, sizeof cmd, "ls %s | grep '^seg-' | sed -n 2p", dir);
        f = popen(cmd, "r");
        ck_assert_int_eq(fscanf(f, "seg-%llu", &v), 1);
        pclose(f);
        second = v;
    }
    seg_path(p, sizeof p, dir, second);
    b = sh_read_file(p, &len);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), RAFT_CORRUPT);
    ck_assert_ptr_nonnull(strstr(h.s.errmsg, "gap"));
    sh_close(&h);
    sh_write_file(p, b, len);
    free(b);
    /* A bad snapshot. */
    snprintf(name, sizeof name, "snap-%020d-%020d", 1, 250);
    path_of(p, sizeof p, dir, name);
    b = sh_read_file(p, &len);
    b[len - 3] ^= 0x20;
    sh_write_file(p, b, len);
    free(b);
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), SEG_SMALL), 0);
    ck_assert_int_eq(sh_load(&h, &l), RAFT_CORRUPT);
    ck_assert_ptr_nonnull(strstr(h.s.errmsg, "snapshot"));
    sh_close(&h);
    sh_rmdir(dir);
}
END_TEST

/* Run out of space: appends fail (fail-stop: every later call fails too),
 * and what was acknowledged loads back intact. On a small tmpfs when this
 * process may mount one, else under RLIMIT_FSIZE (EFBIG). */
static char mounted_dir[256];

/* A failed assertion exits the test's process: do not leave the mount. */
static void unmount_at_exit(void)
{
    if (mounted_dir[0] != '\0') {
        (void)umount(mounted_dir);
        (void)rmdir(mounted_dir);
    }
}

START_TEST(out_of_space)
{
    struct sh h;
    struct sh_loaded l;
    char dir[256];
    bool mounted = false;
    uint64_t acked = 0;
    int rv = 0;

    sh_mkdir(dir, sizeof dir, "nospc");
    if (getenv("STORE_TEST_NO_TMPFS") == NULL &&
        mount("tmpfs", dir, "tmpfs", 0, "size=256k") == 0) {
        mounted = true;
        snprintf(mounted_dir, sizeof mounted_dir, "%s", dir);
        atexit(unmount_at_exit);
    } else {
        struct rlimit r = {.rlim_cur = 96 << 10, .rlim_max = RLIM_INFINITY};
        signal(SIGXFSZ, SIG_IGN);
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &r), 0);
    }
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 32 << 10), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    sh_loaded_free(&l);
    for (unsigned i = 0; i < 10000 && rv == 0; i++) {
        /* Under the rlimit (per file), a batch larger than a segment
         * needs a file over the limit. */
        unsigned cnt = !mounted && i >= 4 ? 120 : 8;
        rv = sh_append(&h, acked + 1, cnt, 1, 1024);
        if (rv == 0) {
            acked += cnt;
        }
    }
    ck_assert_int_ne(rv, 0);
    ck_assert_int_eq(rv, mounted ? RAFT_NOSPACE : RAFT_IOERR);
    ck_assert_uint_gt(acked, 0);
    /* Fail-stop: nothing is accepted afterwards. */
    ck_assert_int_ne(sh_append(&h, acked + 1, 1, 1, 8), 0);
    ck_assert_int_ne(h.s.ops->set_term(&h.s, 9), 0);
    sh_close(&h);
    if (!mounted) {
        struct rlimit r = {.rlim_cur = RLIM_INFINITY,
                           .rlim_max = RLIM_INFINITY};
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &r), 0);
    }
    ck_assert_int_eq(sh_open(&h, dir, sh_engine(_i), 32 << 10), 0);
    ck_assert_int_eq(sh_load(&h, &l), 0);
    ck_assert_uint_ge(l.n, acked);
    sh_check_range(&l, 1, acked, 1, 1024);
    sh_loaded_free(&l);
    sh_close(&h);
    if (mounted) {
        ck_assert_int_eq(umount(dir), 0);
        mounted_dir[0] = '\0';
    }
    sh_rmdir(dir);
}
END_TEST

/* The cases of engine case @c (sh_engine_case): one loop index each. */
static Suite *store_suite(int c)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    int e = c + 1;

    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, empty_then_roundtrip, c, e);
    tcase_add_loop_test(tc, group_commit, c, e);
    tcase_add_loop_test(tc, loaded_entries_share_batches, c, e);
    tcase_add_loop_test(tc, truncate_roundtrip, c, e);
    tcase_add_loop_test(tc, no_resurrection, c, e);
    tcase_add_loop_test(tc, snapshots, c, e);
    tcase_add_loop_test(tc, get_beside_puts, c, e);
    tcase_add_loop_test(tc, stale_log_below_installed_snapshot, c, e);
    tcase_add_loop_test(tc, metadata_double_record, c, e);
    tcase_add_loop_test(tc, bootstrap_once, c, e);
    tcase_add_loop_test(tc, torn_tail_every_offset, c, e);
    tcase_add_loop_test(tc, torn_tail_magic_in_payload, c, e);
    tcase_add_loop_test(tc, accept_cut_tail_clears_durably, c, e);
    tcase_add_loop_test(tc, bit_flip_refused, c, e);
    tcase_add_loop_test(tc, refuse_gaps_and_bad_snapshots, c, e);
    tcase_add_loop_test(tc, out_of_space, c, e);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int c = sh_engine_case();
    SRunner *sr;
    int failed;

    if (c < 0) {
        return EXIT_SUCCESS; /* a SKIP, printed by sh_engine_case */
    }
    sr = srunner_create(store_suite(c));
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
