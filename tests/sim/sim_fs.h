/* tests/sim/sim_fs.h: a simulated file system for one node of the
 * whole-node simulator: the log store's file calls (store/store_sys.h)
 * over memory, surviving the node's crash, with the crash semantics of a
 * disk behind a page cache.
 *
 * What is modelled:
 *   - one directory, the store's (mkdir finds it there; opening any path
 *     as a directory opens it). Names are directory entries to inodes;
 *     creating, renaming and unlinking a name changes the entries at once,
 *     durable only when the directory is fsynced (fsync on its
 *     descriptor); until then they are a log of directory operations, of
 *     which a crash keeps a seeded prefix (none half the time);
 *   - each inode's bytes: what reads see, and what is durable. A write,
 *     a truncation (ftruncate, O_TRUNC) changes what reads see at once and
 *     is logged; fdatasync or fsync of the file makes all of it durable.
 *     At a crash each inode a durable name reaches keeps its durable bytes
 *     and, seeded, none (half the time), a prefix of its logged operations,
 *     or such a prefix and a torn prefix (1 byte .. all but 1) of the next
 *     write; with @torn_ok false, segment files (seg-*) are never torn;
 *   - faults: a failed fsync (fail_countdown: the n-th next fdatasync or
 *     fsync of a segment file returns EIO and makes nothing durable), a
 *     crash in the middle of a job (budget: the power goes after that many
 *     more mutating calls; every call then fails with EIO), and a corrupted
 *     byte of a durable segment (sim_fs_corrupt).
 * Not modelled: O_DIRECT (EINVAL: the simulator runs the "pwrite"
 * engine), tears that are not a prefix of one write, writes of one file
 * reaching the disk out of order, a disk that lies about fsync, more than
 * one directory, space limits.
 *
 * Powered off (after sim_fs_power_cut, or a spent budget) every call fails
 * with EIO except close, which releases the descriptor: the node's process
 * is gone and its store is only being torn down. sim_fs_power_on starts
 * the next process on what survived.
 *
 * Single-threaded, deterministic: no clock, no randomness except the
 * draws the caller passes in. */
#ifndef ONCE_TESTS_SIM_SIM_FS_H_
#define ONCE_TESTS_SIM_SIM_FS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store_sys.h"

struct sf_ino;
struct sf_dent;
struct sf_dirop;
struct sf_fd;

struct sim_fs_stats
{
    uint64_t torn; /* crashes that left a torn write */
};

struct sim_fs
{
    struct store_sys sys; /* first: the table's calls find the fs from it */
    /* Fsyncs of segment files until one fails with EIO (0: the next);
     * -1: none armed. */
    int fail_countdown;
    bool failed_fsync; /* one failed since the last power on */
    /* Mutating calls left before the power goes; -1: no limit. */
    long budget;
    bool off;          /* powered off: every call but close fails */
    bool torn_pending; /* the last power cut tore a segment's tail */

    struct sf_ino *inos;
    size_t n_inos;
    struct sf_dent *cur, *dur; /* the directory as seen, and durable */
    size_t n_cur, n_dur, cap_cur, cap_dur;
    struct sf_dirop *dlog; /* directory operations since its last fsync */
    size_t n_dlog, cap_dlog;
    struct sf_fd *fds;
    size_t n_fds;
    struct sim_fs_stats stats;
};

/* An empty directory; powered on. */
void sim_fs_init(struct sim_fs *fs);
/* Everything freed (the end of a run). */
void sim_fs_free(struct sim_fs *fs);

/* The power goes: what survives is decided (above) with @draw, and the fs
 * is off. Every open descriptor is stale from now on (close releases it). */
void sim_fs_power_cut(struct sim_fs *fs, uint64_t (*draw)(void), bool torn_ok);
/* The next process starts: no descriptor may still be open. */
void sim_fs_power_on(struct sim_fs *fs);

/* Flip one byte of a durable segment's records (at @pick modulo their
 * bytes, header excluded). False when no segment holds a record. */
bool sim_fs_corrupt(struct sim_fs *fs, uint64_t pick);

#endif /* ONCE_TESTS_SIM_SIM_FS_H_ */
