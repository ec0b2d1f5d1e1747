/* store/store_int.h: the log store's internals (store_log.h), shared by its
 * files and by nothing else.
 *
 *   store_log.c           setup (init as an unwind ladder), close, the ops
 *   store_queue.c         the op queue: batching, group commit, callbacks in
 *                         order, truncation, the worker's completions
 *   store_worker.c        the worker thread, segment jobs (prepare, roll,
 *                         truncate) and the blocking I/O helpers
 *   store_engine_uring.c  the write engines "uring direct" and "uring
 *                         buffered" (struct store_engine_ops)
 *   store_engine_pwrite.c the write engine "pwrite"
 *   store_meta.c          term/vote metadata (meta-a, meta-b)
 *   store_snapshot.c      snapshot put/get
 *   store_load.c          load, bootstrap, recover: I/O around the pure
 *                         decisions of store_scan.c (store_scan.h)
 *
 * Threads: everything runs on the loop thread except a job's run_* function,
 * which runs on the worker and touches only the job, sl->dirfd, sl->sys,
 * sl->seg_size, sl->direct and sl->prep_ok (worker-owned). Jobs cross
 * between the two under sl->mu only (store_exec_threads; another executor,
 * store_sys.h, runs them on the loop's own thread). Every file call goes
 * through sl->sys (store_sys.h).
 *
 * Error convention (common/err.h): helpers return 0 or a negated errno;
 * sl->failed, job rv and what the store_ops return are RAFT_* codes,
 * because raft reads them. */
#ifndef ONCE_STORE_STORE_INT_H_
#define ONCE_STORE_STORE_INT_H_

#include <liburing.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/err.h"
#include "store/store_log.h"
#include "store/store_sys.h"

#define DEFAULT_SEGMENT (8u << 20)
#define MIN_SEGMENT     (4u << 10)
#define BATCH_MAX       (4u << 20) /* group commit: bytes per batch */
#define NAME_LEN        64
#define ZERO_PAGE       4096u /* zero_range writes one page at a time */
#define RING_ENTRIES    16
#define BLOCK           4096u /* O_DIRECT alignment (fits 512 and 4096) */

struct slog;

/* --- ops: raft's calls, queued on the loop thread ------------------------ */

enum op_kind { OP_APPEND, OP_TRUNCATE, OP_PUT, OP_GET };

struct op_append
{
    struct raft_io_append *req; /* raft's, borrowed until the callback */
    raft_io_append_cb cb;
    uint8_t *buf;    /* the encoded records (in the op's allocation) */
    size_t bytes;    /* of buf */
    unsigned n;      /* records */
    uint64_t first;  /* index of the first record */
    uint32_t *sizes; /* per record, n of them (in the op's allocation) */
};

struct op_truncate
{
    uint64_t index; /* the first index dropped */
};

struct op_put
{
    unsigned trailing; /* 0: an installed snapshot replaces the log */
    struct raft_io_snapshot_put *req;
    const struct raft_snapshot *snap; /* raft's, borrowed until the cb */
    raft_io_snapshot_put_cb cb;
    /* A taken snapshot's file is written and synced as tmp-snap on the
     * loop's thread pool before the op is queued (store_snapshot.c), so
     * appends are not held behind it; the queued job then only renames
     * it and removes what it replaces. */
    bool written;
    struct slog *sl;
    uv_work_t work;
    int work_rv; /* RAFT_* */
    char work_err[ERR_MSG_SIZE];
};

struct op_get
{
    struct raft_io_snapshot_get *req;
    raft_io_snapshot_get_cb cb;
    /* The newest snapshot's file is opened on the loop and read and
     * checked on the loop's thread pool, off the queue (store_snapshot.c):
     * a leader reads a large snapshot for every member it installs, and
     * appends queued behind the read would wait as long. The descriptor
     * keeps the file readable if a later put removes its name meanwhile. */
    struct slog *sl;
    uv_work_t work;
    int fd;
    char sname[NAME_LEN];
    struct raft_snapshot *got; /* out of the work, handed to the cb */
    int work_rv;               /* RAFT_* */
    char work_err[ERR_MSG_SIZE];
};

/* One queued call. Freed with free() (an append is one allocation: the
 * op, then its sizes, then its records). */
struct op
{
    enum op_kind kind;
    struct op *next; /* in sl's queue, or in a batch */
    union {
        struct op_append append;
        struct op_truncate truncate;
        struct op_put put;
        struct op_get get;
    } u;
};

/* --- jobs: blocking work, run on the worker (or on the ring) ------------- */

enum job_kind { J_PREP, J_ROLL, J_WRITE, J_TRUNC, J_PUT, J_GET };

struct job_roll
{
    uint64_t first;   /* the new segment's first index */
    size_t need;      /* header + the batch: the file must hold it */
    int fd_out;       /* out: the new segment, open for writing */
    int dfd_out;      /* out: its O_DIRECT descriptor (direct), else -1 */
    uint64_t cap_out; /* out: its size */
};

struct job_write
{
    int fd;                /* the current segment */
    uint64_t off;          /* where the (rest of the) write goes */
    struct iovec *iov;     /* advanced past what was written */
    struct iovec *iov_mem; /* the allocation iov points into */
    unsigned n_iov;
    size_t total;  /* bytes still to write */
    uint8_t *dbuf; /* direct: the aligned buffer written at d_base */
    uint64_t d_base;
    size_t d_used;    /* bytes of dbuf that are records (the rest zeros) */
    unsigned retries; /* direct: short writes resubmitted so far */
};

struct job_trunc
{
    uint64_t index;       /* the first index dropped */
    char zname[NAME_LEN]; /* the segment zeroed from zfrom; "": none */
    uint64_t zfrom, zto;  /* [zfrom, zto) zeroed; zto clamped to the file */
    int fd_out;           /* out: zname, open, the new current segment */
    int dfd_out;          /* out: direct: its O_DIRECT descriptor */
    uint8_t *tail_out;    /* out: direct: the block holding zfrom */
};

struct job_put
{
    const struct raft_snapshot *snap; /* the op's, borrowed */
    char sname[NAME_LEN];             /* snap-<term>-<index> */
    bool written;                     /* tmp-snap is written and synced */
};

struct job_get
{
    char sname[NAME_LEN];
    struct raft_snapshot *got; /* out: raft's, handed to the callback */
};

struct job
{
    enum job_kind kind;
    struct job *next; /* in the worker's queue or its done queue */
    struct slog *sl;
    int rv;                   /* RAFT_*, 0: done */
    char err[ERR_MSG_SIZE];   /* why, when rv != 0 */
    char (*unlink)[NAME_LEN]; /* trunc, put: names removed, in order */
    size_t n_unlink;
    union {
        struct job_roll roll;
        struct job_write write;
        struct job_trunc trunc;
        struct job_put put;
        struct job_get get;
    } u;
};

/* --- the write engine ------------------------------------------------------
 *
 * What differs between uring direct, uring buffered and pwrite: how the
 * batch's one write + one data sync is issued and completed. The queue
 * builds the batch (a J_WRITE job of iovecs at the segment's end) and calls
 * submit; the engine calls store_write_done exactly once per submit that
 * returned 0 (then store_queue_resume if it completed outside the worker's
 * completion path). */
struct store_engine_ops
{
    const char *name; /* the store's name: "uring" or "pwrite" */
    bool direct;      /* segments also open O_DIRECT, tail block kept */
    /* Kernel objects the engine needs (the ring). RAFT_* with @errmsg;
     * nothing is left to undo on failure. */
    int (*open)(struct slog *sl, char *errmsg);
    /* Once the store's own handles are up: start the engine's loop
     * handles; returns how many it opened. Cannot fail. */
    int (*start)(struct slog *sl);
    /* Start writing sl->wjob. 0, or a RAFT_* code with @msg set (then the
     * job is the caller's and no completion comes). */
    int (*submit)(struct slog *sl, struct job *w, char *msg);
    /* Close the engine's loop handles with store_handle_closed; returns
     * how many it closes. */
    int (*close)(struct slog *sl);
    /* After the last handle closed, or when init fails after open: the
     * rest (ring, eventfd). */
    void (*release)(struct slog *sl);
};

extern const struct store_engine_ops store_engine_uring_direct;
extern const struct store_engine_ops store_engine_uring_buffered;
extern const struct store_engine_ops store_engine_pwrite;

/* --- the store -------------------------------------------------------------
 */

struct seg
{
    uint64_t first; /* the segment's first index, as in its name */
};

struct snapref
{
    uint64_t term, index; /* index 0: none */
};

struct slog
{
    struct store *s; /* the public half; s->impl points back */
    uv_loop_t *loop;
    char dir[PATH_MAX];
    int dirfd;
    const struct store_sys *sys;        /* file calls (store_sys.h) */
    const struct store_exec *exec;      /* where jobs run (store_sys.h) */
    const struct store_engine_ops *eng; /* chosen at init, fixed */
    bool direct;                        /* eng->direct, read by the worker */
    size_t seg_size;                    /* bytes per preallocated segment */
    struct store_log_options o;
    uint64_t write_t0;  /* uv_hrtime() at the write job's submission */
    size_t write_bytes; /* and its size (for o.synced) */

    int meta_fd[2];                /* meta-a, meta-b */
    uint64_t meta_seq, term, vote; /* the newest valid metadata */
    uint64_t meta_cut; /* persisted cut index (store_format.h "meta") */

    struct seg *segs; /* the segments, by first index */
    size_t n_segs, cap_segs;
    int cur_fd;       /* the last segment, -1 when there is none */
    int cur_dfd;      /* direct: the same file opened O_DIRECT, else -1 */
    uint8_t *dtail;   /* direct: the block holding cur_end (BLOCK bytes) */
    uint64_t cur_end; /* its write offset */
    uint64_t cur_cap; /* its size */
    uint64_t *offs;   /* record offsets of [base, base + n_offs) */
    uint64_t base;
    size_t n_offs, cap_offs;
    uint64_t next; /* the next index raft will append (submission order) */

    struct snapref snaps[2]; /* newest first */
    bool loaded;             /* load ran: no more bootstrap/recover */

    struct op *head, *tail; /* queued, not started */
    bool busy;              /* an op (or batch) is in flight */
    unsigned pool_ops;      /* snapshot files written (put) or read (get) on the
                               loop's thread pool: close waits for them */
    unsigned pool_gets;     /* of those, gets (each holds a snapshot open) */
    int failed;             /* RAFT_* after an I/O error, else 0 */
    bool in_cb;             /* callbacks running: kick once at the end */
    struct op *batch;       /* in flight: appends, or the one put/get */
    unsigned batch_n;
    struct job *wjob; /* the batch's write (every engine) */

    /* worker thread */
    pthread_t th;
    pthread_mutex_t mu; /* guards the two job queues and stop */
    pthread_cond_t cv;
    struct job *jq_head, *jq_tail, *dq_head, *dq_tail;
    bool stop;
    bool prep_ok;     /* worker only: prep-next is ready */
    uv_async_t async; /* the worker's completions wake the loop */

    /* uring engines */
    struct io_uring ring;
    int efd;          /* eventfd registered with the ring, or -1 */
    uv_poll_t poll;   /* on efd */
    int cqes_pending; /* completions still due for wjob */
    int wres, fres;   /* results of the write and the sync */

    bool closing;
    int handles; /* loop handles still open */
    store_close_cb close_cb;
    struct store_log_stats stats;
};

/* --- helpers (store_worker.c) --------------------------------------------- */

/* RAFT_NOSPACE for -ENOSPC/-EDQUOT, else RAFT_IOERR. */
int store_raft_code(int neg_errno);
/* 0 or a negated errno; retried on EINTR (and short counts). */
int store_write_all(const struct store_sys *sys,
                    int fd,
                    const void *buf,
                    size_t len,
                    uint64_t off);
int store_read_all(const struct store_sys *sys,
                   int fd,
                   void *buf,
                   size_t len,
                   uint64_t off);
/* [from, to) zeroed, from the end backwards one page per write. */
int store_zero_range(const struct store_sys *sys,
                     int fd,
                     uint64_t from,
                     uint64_t to);
int store_fsync_dir(const struct store_sys *sys, int dirfd);
struct iovec *store_iov_advance(struct iovec *iov, unsigned *n, size_t done);
void store_seg_name(char out[NAME_LEN], uint64_t first);
void store_snap_name(char out[NAME_LEN], uint64_t term, uint64_t index);
void store_notice(struct slog *sl, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* j->err = "@what @name: strerror", j->rv = its RAFT_* code. */
void store_job_err(struct job *j,
                   int neg_errno,
                   const char *what,
                   const char *name);

struct job *store_job_new(struct slog *sl, enum job_kind kind);
void store_job_free(struct job *j);
void store_job_submit(struct slog *sl, struct job *j); /* to sl->exec */
int store_job_add_unlink(struct job *j, const char *name);
void store_run_prep(struct job *j);
void store_run_roll(struct job *j);
void store_run_unlinks(struct job *j);
void store_run_trunc(struct job *j);
void store_run_write(struct job *j); /* store_engine_pwrite.c */
void store_run_put(struct job *j);   /* store_snapshot.c */
void store_run_get(struct job *j);   /* store_snapshot.c */

/* --- the queue (store_queue.c) -------------------------------------------- */

void store_set_failed(struct slog *sl, int rv, const char *msg);
void store_enqueue(struct slog *sl, struct op *op);
void store_op_done(struct slog *sl, struct op *op, int status);
void store_kick(struct slog *sl);
void store_start_prep(struct slog *sl);
void store_close_current(struct slog *sl);
int store_reserve_offs(struct slog *sl, size_t more);
int store_push_seg(struct slog *sl, uint64_t first);
uint64_t store_written(const struct slog *sl);
/* The batch's write finished: 0, or RAFT_* with @msg. Frees the job. */
void store_write_done(struct slog *sl, int rv, const char *msg);
/* Start what is queued; close if closing and idle. */
void store_queue_resume(struct slog *sl);
void store_async_cb(uv_async_t *h); /* store_exec_threads' completions */
/* A queued op of @kind, or NULL with *rv the code to return (a failed
 * store, or out of memory with s->errmsg set). */
struct op *store_op_alloc(struct slog *sl, enum op_kind kind, int *rv);
int store_append(struct store *s,
                 struct raft_io_append *req,
                 const struct raft_entry entries[],
                 unsigned n,
                 raft_io_append_cb cb);
int store_truncate(struct store *s, raft_index index);

/* --- the rest ------------------------------------------------------------- */

int store_snapshot_put(struct store *s,
                       unsigned trailing,
                       struct raft_io_snapshot_put *req,
                       const struct raft_snapshot *snapshot,
                       raft_io_snapshot_put_cb cb); /* store_snapshot.c */
int store_snapshot_get(struct store *s,
                       struct raft_io_snapshot_get *req,
                       raft_io_snapshot_get_cb cb);
void store_start_put(struct slog *sl, struct op *op);
void store_put_done(struct slog *sl, struct job *j);
void store_start_get(struct slog *sl, struct op *op);
void store_get_done(struct slog *sl, struct job *j);
/* Read and check snapshot @name; 0 with *out raft's, or RAFT_* + @err. */
int store_read_snapshot(const struct store_sys *sys,
                        int dirfd,
                        const char *name,
                        struct raft_snapshot **out,
                        char *err);
void store_snapshot_free(struct raft_snapshot *sn);

int store_meta_open(struct slog *sl, char *errmsg); /* store_meta.c */
int store_meta_write(struct slog *sl, uint64_t term, uint64_t vote);
int store_set_term(struct store *s, raft_term term);
int store_set_vote(struct store *s, raft_id id);

int store_load(struct store *s,
               raft_term *term,
               raft_id *voted_for,
               struct raft_snapshot **snapshot,
               raft_index *start_index,
               struct raft_entry *entries[],
               size_t *n_entries);
int store_bootstrap(struct store *s, const struct raft_configuration *conf);
int store_recover(struct store *s, const struct raft_configuration *conf);

void store_maybe_shutdown(struct slog *sl); /* store_log.c */
void store_handle_closed(uv_handle_t *h);

/* store_snapshot.c: create tmp-snap in the store's directory and write (paced,
 * unless no_snapshot_pacing) and sync @sn into it: 0, or a negated errno
 * (-ENOMEM: out of memory) with @what naming the step. */
int store_write_tmp_snap(const struct slog *sl,
                         const struct raft_snapshot *sn,
                         const char **what);

#endif /* ONCE_STORE_STORE_INT_H_ */
