/* store/store_sys.h: the log store's two seams (docs/store.md, "Seams"):
 * the kernel calls it makes for files, and where its blocking work runs.
 *
 * Production uses store_sys_posix and store_exec_threads (the defaults of
 * store_log_options): each call of the table is the system call of the
 * same name, and jobs run on the store's worker thread, completing on the
 * loop through a uv_async, pool work on the loop's thread pool. The
 * deterministic simulator (tests/sim) passes a simulated file system and
 * an executor that runs each job at a seeded simulated time on the one
 * thread there is, so that the store's own logic (group commit, callback
 * order, truncation barrier, segment jobs, metadata, snapshots, load) runs
 * there unchanged. The "uring" engine talks to the kernel through its ring
 * and needs store_sys_posix (store_log_init refuses anything else); the
 * "pwrite" engine runs entirely through the table.
 *
 * Both tables are borrowed: they must outlive the store. The table's
 * functions are passed the table itself, so an implementation can embed it
 * and find its own state (a simulated disk per node). */
#ifndef ONCE_STORE_STORE_SYS_H_
#define ONCE_STORE_STORE_SYS_H_

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <uv.h>

/* --- files ----------------------------------------------------------------
 * POSIX conventions: -1 (or a negative count) with errno set on failure.
 * @dirfd may be AT_FDCWD for a path (the store's directory and its
 * parent). */
struct store_sys
{
    int (*openat)(const struct store_sys *sys,
                  int dirfd,
                  const char *name,
                  int flags,
                  mode_t mode);
    int (*close)(const struct store_sys *sys, int fd);
    ssize_t (*pwrite)(const struct store_sys *sys,
                      int fd,
                      const void *buf,
                      size_t len,
                      off_t off);
    ssize_t (*pwritev)(const struct store_sys *sys,
                       int fd,
                       const struct iovec *iov,
                       int n,
                       off_t off);
    ssize_t (*pread)(const struct store_sys *sys,
                     int fd,
                     void *buf,
                     size_t len,
                     off_t off);
    int (*fdatasync)(const struct store_sys *sys, int fd);
    int (*fsync)(const struct store_sys *sys, int fd);
    int (*ftruncate)(const struct store_sys *sys, int fd, off_t len);
    int (*fstat)(const struct store_sys *sys, int fd, struct stat *st);
    int (*renameat)(const struct store_sys *sys,
                    int olddirfd,
                    const char *oldname,
                    int newdirfd,
                    const char *newname);
    int (*unlinkat)(const struct store_sys *sys,
                    int dirfd,
                    const char *name,
                    int flags);
    int (*mkdir)(const struct store_sys *sys, const char *path, mode_t mode);
    /* Call @each with every name in the directory open at @dirfd (not "."
     * or ".."), stopping at the first nonzero return; @each may unlink the
     * name it is given. 0, or -1 with errno when the listing fails. */
    int (*list)(const struct store_sys *sys,
                int dirfd,
                int (*each)(void *arg, const char *name),
                void *arg);
    /* Hints (writeback pacing, page cache): errors are ignored. */
    int (*sync_file_range)(const struct store_sys *sys,
                           int fd,
                           off_t off,
                           off_t len,
                           unsigned flags);
    int (*fadvise)(const struct store_sys *sys,
                   int fd,
                   off_t off,
                   off_t len,
                   int advice);
};

extern const struct store_sys store_sys_posix;

/* --- execution -------------------------------------------------------------
 * A job is the store's unit of blocking work (store_int.h): a segment
 * preparation, roll, batch write, truncation, snapshot rename or read. The
 * executor runs the jobs of one store one at a time, in submission order,
 * off the loop (store_job_run), and then completes each on the loop
 * (store_job_complete), in the same order. Pool work (uv_work_t: a
 * snapshot file written or read, an old one removed) runs with the same
 * contract as uv_queue_work: @work off the loop, concurrently with jobs,
 * then @done on the loop with status 0, or UV_ECANCELED. */
struct slog;
struct job;

struct store_exec
{
    /* Before the first job: 0, or a RAFT_* code with @errmsg (then nothing
     * is left to undo). *@handles: the loop handles it opened. */
    int (*start)(const struct store_exec *x,
                 struct slog *sl,
                 int *handles,
                 char *errmsg);
    void (*submit)(const struct store_exec *x, struct slog *sl, struct job *j);
    /* Nothing is in flight or queued: stop, and close the handles start
     * opened, each calling store_handle_closed once; returns how many.
     * With 0 the store finishes closing before stop's caller returns. */
    int (*stop)(const struct store_exec *x, struct slog *sl);
    int (*queue_work)(const struct store_exec *x,
                      struct slog *sl,
                      uv_work_t *w,
                      uv_work_cb work,
                      uv_after_work_cb done);
};

extern const struct store_exec store_exec_threads;

/* For executors: a job's blocking work (off the loop), then its
 * completion on the loop (frees it; the store's next work may be
 * submitted from inside). store_job_cancel instead of the run: the job
 * completes as RAFT_CANCELED (the node is going away). A job's completion
 * never closes the store it belongs to from inside. */
void store_job_run(struct job *j);
void store_job_cancel(struct job *j);
void store_job_complete(struct job *j);

#endif /* ONCE_STORE_STORE_SYS_H_ */
