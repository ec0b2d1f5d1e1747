/* tests/store/store_helpers.h: driving a log store (store_log.h) without
 * raft: open on a private loop, call, run the loop until the callbacks
 * came. Entries carry a payload derived from their index and term, so a
 * loaded log can be checked entry by entry. */
#ifndef ONCE_TESTS_STORE_HELPERS_H_
#define ONCE_TESTS_STORE_HELPERS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "store/store_log.h"

struct sh
{
    uv_loop_t loop;
    struct store s;
    bool open;
    char dir[256];
    enum store_engine engine;
    size_t seg;
    int cut_notices;
    int accept_notices;  /* "accept-cut-tail: cleared ..." (error level) */
    int nothing_notices; /* "accept-cut-tail: nothing to do ..." */
};

/* The engine cases: 0 pwrite, 1 uring with O_DIRECT writes, 2 uring with
 * buffered writes and a linked fsync. Each store test program runs one
 * (STORE_TEST_ENGINE, set by Makefile.am: unit-store-pwrite, -uring,
 * -uring-buffered), never another in its place. */
#define SH_PWRITE         0
#define SH_URING_DIRECT   1
#define SH_URING_BUFFERED 2

/* The case this program runs, as its loop index; or -1 after printing
 * TAP's "1..0 # SKIP why" when this machine cannot run it (the kernel
 * refuses io_uring, or TMPDIR's file system has no O_DIRECT): the program
 * then exits 0, make check counts a SKIP, and scripts/test fails on it
 * unless tests/allowed-skips lists it with its reason. */
int sh_engine_case(void);

/* The engine of case @i; sets what the next sh_open uses and asserts: the
 * store it opens must report that engine ("pwrite" or "uring") and, for
 * case 1 only, O_DIRECT appends (store_log_direct). */
enum store_engine sh_engine(int i);

/* A fresh directory under $TMPDIR (or /tmp). */
void sh_mkdir(char *out, size_t n, const char *tag);
void sh_rmdir(const char *dir);

/* ck_assert on failure when @must (else returns the RAFT_* code). */
int sh_open(struct sh *h, const char *dir, enum store_engine e, size_t seg);
void sh_close(struct sh *h);
/* sh_open with store_log_options.accept_cut_tail set (onced
 * --accept-cut-tail). */
int sh_open_accept(struct sh *h,
                   const char *dir,
                   enum store_engine e,
                   size_t seg);

/* Payload of entry @index/@term of length @len. */
void sh_payload(uint8_t *out, size_t len, uint64_t index, uint64_t term);
size_t sh_len(uint64_t index); /* the length tests use for @index */

/* Append entries [first, first + n) of @term (lengths sh_len or @len when
 * nonzero); run the loop until every callback came; returns the first
 * failing status (0: all stored). */
int sh_append(struct sh *h,
              uint64_t first,
              unsigned n,
              uint64_t term,
              size_t len);

struct sh_loaded
{
    raft_term term;
    raft_id vote;
    struct raft_snapshot *snap;
    raft_index start;
    struct raft_entry *entries;
    size_t n;
};
int sh_load(struct sh *h, struct sh_loaded *l);
void sh_loaded_free(struct sh_loaded *l);
/* Entries [from, to] of @l are the ones sh_append wrote with @term (and
 * @len when nonzero). */
void sh_check_range(const struct sh_loaded *l,
                    uint64_t from,
                    uint64_t to,
                    uint64_t term,
                    size_t len);

int sh_truncate(struct sh *h, uint64_t index);
/* Snapshot of @len bytes at @index/@term with a 2-server configuration. */
int sh_put(struct sh *h,
           unsigned trailing,
           uint64_t index,
           uint64_t term,
           size_t len);
/* Put @s (the caller's, kept until it returns); allocates nothing. */
int sh_put_snapshot(struct sh *h,
                    unsigned trailing,
                    const struct raft_snapshot *s);
/* Allocates nothing itself (the store allocates what it returns). */
int sh_get(struct sh *h, struct raft_snapshot **out);
/* The same in two steps: start the get (its rv, if refused, becomes its
 * status), run other calls, then wait for its callback. */
struct sh_get
{
    struct raft_io_snapshot_get req;
    bool done;
    int rv;
    int status;
    struct raft_snapshot *s;
};
void sh_get_start(struct sh *h, struct sh_get *g);
int sh_get_wait(struct sh *h, struct sh_get *g, struct raft_snapshot **out);
void sh_snapshot_free(struct raft_snapshot *s);

/* Copy a directory's regular files. */
void sh_copy_dir(const char *from, const char *to);
/* Read/write a whole file. */
uint8_t *sh_read_file(const char *path, size_t *len);
void sh_write_file(const char *path, const uint8_t *buf, size_t len);

#endif /* ONCE_TESTS_STORE_HELPERS_H_ */
