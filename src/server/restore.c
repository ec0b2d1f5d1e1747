/* server/restore.c: `onced --restore FILE --bootstrap` (server.h,
 * node_restore; docs/server.md, "Restore").
 *
 * A restored cluster starts from the backup's state as its first raft
 * snapshot, not from a log: the backup is checked whole (backup_verify,
 * the same check as `oncectl snapshot verify`), rebased into the first
 * state of a new cluster (fsm_rebase: a new cluster id drawn here, this
 * node as the only voter, log time moved to this node's clock, the replay
 * fence set), encoded as the adapter's snapshot at the backup's last index
 * with term 1 and a one-voter configuration, and written as the store's
 * only state (replica_seed, raft/replica.h). raft_start then loads it like any
 * snapshot; members that join later receive it (or a later one) by
 * InstallSnapshot, so every replica holds the same fence. New log indexes
 * continue after the backup's, so no owner token of the backup can be issued
 * again.
 *
 * A data directory that already holds a node ignores --restore with a log
 * line, as it ignores --bootstrap: a restart with the same flags must not
 * start another cluster (and must not need the file any more). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "common/assert.h"
#include "common/text.h"
#include "fsm/backup_file.h"
#include "server/server.h"

static uint64_t wall_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The backup at @path, checked whole, as a state: 0 and *@out, or (logged)
 * the -errno of reading it, -ENODATA for an empty file, or backup_verify's
 * code. */
static int load_backup(const char *path,
                       struct backup_info *info,
                       struct fsm **out)
{
    char err[ERR_MSG_SIZE], q[300];
    uint64_t off = 0;
    struct stat st;
    void *map = MAP_FAILED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    const char *why = NULL;
    int rv = 0;

    if (fd < 0 || fstat(fd, &st) != 0) {
        rv = -errno;
        why = strerror(errno);
    } else if (st.st_size == 0) {
        rv = -ENODATA;
        why = "the file is empty";
    } else {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            rv = -errno;
            why = strerror(errno);
        }
    }
    if (map == MAP_FAILED) {
        ONCE_ASSERT(rv < 0, "open, fstat and mmap set errno when they fail");
        log_kv(LOG_ERROR, "refusing to restore: cannot read the backup",
               "file=%s error=%s", log_quote(path, q, sizeof q),
               log_quote(why, (char[80]){0}, 80));
        if (fd >= 0) {
            close(fd);
        }
        return rv;
    }
    close(fd);
    rv = backup_verify(map, (size_t)st.st_size, info, out, &off, err);
    if (rv != 0) {
        log_kv(LOG_ERROR, "refusing to restore: the backup does not verify",
               "file=%s offset=%" PRIu64 " error=%s",
               log_quote(path, q, sizeof q), off,
               log_quote(err, (char[300]){0}, 300));
    }
    munmap(map, (size_t)st.st_size);
    return rv;
}

/* @g as the new cluster's first state. 0, -EIO (no random cluster id:
 * OpenSSL's random source failed) or fsm_rebase's FSM_E_MALFORMED; logged. */
static int rebase(struct server *s, struct fsm *g)
{
    struct fsm_rebase rb;
    char err[ERR_MSG_SIZE];
    int rv;

    memset(&rb, 0, sizeof rb);
    if (RAND_bytes(rb.cluster_id, sizeof rb.cluster_id) != 1) {
        log_kv(LOG_ERROR, "RAND_bytes failed: cannot make the cluster id",
               NULL);
        return -EIO;
    }
    rb.member.id = s->id;
    snprintf(rb.member.raft_addr, sizeof rb.member.raft_addr, "%s",
             s->cfg.raft_addr);
    snprintf(rb.member.client_addr, sizeof rb.member.client_addr, "%s",
             s->cfg.client_addr);
    rb.member.role = FSM_ROLE_VOTER;
    rb.time_ms = wall_now_ms();
    rb.accept_replay_window = s->cfg.accept_replay_window;
    if ((rv = fsm_rebase(g, &rb, err)) != 0) {
        log_kv(LOG_ERROR, "refusing to restore", "error=%s",
               log_quote(err, (char[300]){0}, 300));
        return rv;
    }
    return 0;
}

/* Write @g as the store's first snapshot at @index. 0, or replica_seed's
 * REPLICA_E_NOMEM / REPLICA_E_START; logged. */
static int seed(struct server *s, uint64_t index, const struct fsm *g)
{
    int rv = replica_seed(&s->uvio.store, s->id, s->cfg.raft_addr, index, g);

    if (rv == REPLICA_E_NOMEM) {
        log_kv(LOG_ERROR, "out of memory encoding the restored state", NULL);
        return rv;
    }
    if (rv != 0) {
        log_kv(LOG_ERROR, "cannot write the restored state", "error=%s",
               log_quote(s->uvio.store.errmsg, (char[300]){0}, 300));
        return rv;
    }
    return 0;
}

static void log_restored(const struct server *s,
                         const struct backup_info *info,
                         const struct fsm *g)
{
    struct fsm_fence_info fi;
    char from[33], to[33];

    fsm_fence(g, &fi);
    text_format_hex(info->cluster_id, FSM_CLUSTER_ID_LEN, from);
    text_format_hex(fsm_cluster_id(g), FSM_CLUSTER_ID_LEN, to);
    log_kv(LOG_WARN, "restored a new cluster from a backup",
           "cluster_id=%s from_cluster_id=%s index=%" PRIu64 " records=%" PRIu64
           " restore_time_ms=%" PRIu64 " stale_ts_ms=%" PRIu64
           " replay_window_until_ms=%" PRIu64 " accept_replay_window=%d",
           to, from, info->index, fsm_n_records(g), fi.restore_time_ms,
           fi.stale_ts_ms, fi.until_ms, s->cfg.accept_replay_window ? 1 : 0);
}

int node_restore(struct server *s)
{
    struct backup_info info;
    struct fsm *g = NULL;
    bool pristine;
    int rv;

    if (s->uvio.store.name != NULL && strcmp(s->uvio.store.name, "uv") == 0) {
        log_kv(LOG_INFO,
               "--restore ignored: the data directory already holds a node "
               "(raft_uv)",
               NULL);
        return 0;
    }
    rv = replica_seed_pristine(&s->uvio.store, &pristine);
    if (rv == 0 && !pristine) {
        log_kv(LOG_INFO,
               "--restore ignored: the data directory already holds a node",
               NULL);
        return 0;
    }
    if (rv != 0) {
        log_kv(LOG_ERROR, "refusing to restore: storage", "error=%s",
               log_quote(s->uvio.store.errmsg, (char[300]){0}, 300));
        return SERVER_EXIT_FAIL;
    }
    if (load_backup(s->cfg.restore, &info, &g) != 0) {
        return SERVER_EXIT_FAIL;
    }
    rv = rebase(s, g);
    if (rv == 0) {
        rv = seed(s, info.index, g);
    }
    if (rv == 0) {
        log_restored(s, &info, g);
    }
    fsm_free(g);
    return rv == 0 ? 0 : SERVER_EXIT_FAIL;
}
