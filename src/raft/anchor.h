/* raft/anchor.h: the log-time anchor kept across a node's restarts
 * (docs/design.md §1.7, raft/ltime.h).
 *
 * A leader clamps its wall clock to est ± K, est being the log time of a
 * batch it applied live plus the monotonic time since. A node that restarts
 * has applied nothing live yet, and if it wins an election before the first
 * batch reaches it (a quick restart of the leader wins often: its log is as
 * long as anyone's) the wall clock was all it had: 5 minutes off moved log
 * time 5 minutes (tests/integration/once_skew.py caught it). A skip forward
 * expires TTL records that early; a skip back turns every fresh nonce
 * FUTURE until real time catches up.
 *
 * The pair (log time L was applied at monotonic M) stays true for as long
 * as M means the same clock: CLOCK_MONOTONIC is the host's, counted from its
 * boot, so it means the same across process restarts on one boot and
 * nothing after a reboot or on another host. The node writes the pair with
 * the kernel's boot id (/proc/sys/kernel/random/boot_id) to DIR/ltime-anchor
 * as soon as it has one, then once a minute (from the thread pool); at
 * start it seeds ltime
 * with it if the boot id is this boot's and M is not in the future. Any
 * older pair is as good as a new one (est counts the elapsed time itself),
 * so the file is not fsync'ed nor written at the stop: a crash may leave
 * an older pair, or none, never a wrong
 * one. After a reboot, on a new host or with no file, a restarted node is
 * back to the wall clock (ltime.h), which is why a cluster's clocks should
 * still be kept by NTP.
 *
 * The file: one line of at most ANCHOR_FILE_MAX bytes,
 *   "once-ltime-anchor 1 <boot id> <L> <M>\n"
 * (boot id: 36 characters, lowercase hex and dashes as the kernel prints
 * it; L, M: decimal ms without leading zeros). Anything else is
 * refused whole, with a reason, and the node starts without a seed.
 *
 * Pure functions over a directory path; blocking I/O of a few bytes, but a
 * rename may wait on the filesystem's journal behind other writes (seconds,
 * behind a snapshot's writeback), so the node never calls anchor_write on
 * its loop. Not thread-safe against another process in the same
 * directory. */
#ifndef ONCE_RAFT_ANCHOR_H_
#define ONCE_RAFT_ANCHOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ANCHOR_FILE        "ltime-anchor"
#define ANCHOR_FILE_MAX    128
#define ANCHOR_BOOT_ID_LEN 36

struct anchor
{
    char boot_id[ANCHOR_BOOT_ID_LEN + 1];
    uint64_t log_ms;
    uint64_t mono_ms;
};

/* This boot's id from @path (NULL: /proc/sys/kernel/random/boot_id) into
 * @out. Returns 0, or with @why (@cap bytes) set -ENOENT (no file),
 * -EBADMSG (not a UUID) or the -errno of the read. */
int anchor_boot_id(const char *path,
                   char out[ANCHOR_BOOT_ID_LEN + 1],
                   char *why,
                   size_t cap);

/* The file's line for @a into @buf (@cap bytes, NUL-terminated): its
 * length, or -ENOSPC if it does not fit. */
int anchor_format(const struct anchor *a, char *buf, size_t cap);

/* Parse one file's @len bytes (decimals without leading zeros: a line
 * that parses is exactly anchor_format's). Returns 0, or -EBADMSG with @why
 * set. */
int anchor_parse(const char *buf,
                 size_t len,
                 struct anchor *a,
                 char *why,
                 size_t cap);

/* The seed for this start: DIR/ltime-anchor if it parses, its boot id is
 * @boot_id and its M is at most @mono_now_ms. Returns 1 (seed in @a), 0 (no
 * file) or, the file refused with @why saying why, a negated errno: the
 * read's, -ENAMETOOLONG (DIR/ltime-anchor too long a path), -EBADMSG (does
 * not parse), -ESTALE (another boot's), -ERANGE (its M is in the future). */
int anchor_load(const char *dir,
                const char *boot_id,
                uint64_t mono_now_ms,
                struct anchor *a,
                char *why,
                size_t cap);

/* Write @a to DIR/ltime-anchor (temporary file, then rename; no fsync).
 * Returns 0, or the -errno of the failed call with @why set. */
int anchor_write(const char *dir,
                 const struct anchor *a,
                 char *why,
                 size_t cap);

#endif /* ONCE_RAFT_ANCHOR_H_ */
