/* server/backup.c: backups served by the leader (backup.h). */
#include "server/backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "common/crc32c.h"
#include "common/path.h"
#include "fsm/backup_file.h"
#include "once_rpc.pb-c.h"
#include "server/reply.h"
#include "server/server.h"

#define BACKUP_PREFIX  "backup-"
#define BACKUP_SUFFIX  ".tmp"
#define BACKUP_TICK_MS 1000

enum sess_state {
    SESS_ENCODING = 1, /* the view work runs */
    SESS_READY,        /* the file is complete */
    SESS_FAILED,       /* encoding failed: err says why */
};

struct backup_sess
{
    struct backups *owner;
    struct backup_sess *next;
    uint64_t id;
    enum sess_state state;
    bool closed; /* closed while encoding: the work's callback frees it */
    char path[4096];
    int fd;
    uint64_t size;
    uint64_t last_used; /* uv_now of the last read, or of the encoding end */
    struct backup_info info;
    uint64_t node_id;
    uint64_t created_ms;
    struct replica_digest_req req; /* req.data = this */
    char err[ERR_MSG_SIZE];
};

/* --- the encoder: raft's thread pool ------------------------------------- */

static int encode_into(struct backup_sess *x,
                       struct fsm_frozen *view,
                       uint8_t *map)
{
    size_t snap_len = (size_t)x->info.snapshot_len;

    backup_header_encode(&x->info, map);
    fsm_frozen_write(view, map + BACKUP_HDR_LEN, snap_len);
    backup_trailer_encode(&x->info, map, BACKUP_HDR_LEN + snap_len,
                          map + BACKUP_HDR_LEN + snap_len);
    return 0;
}

static int encode_fn(struct replica_digest_req *req, struct fsm_frozen *view)
{
    struct backup_sess *x = req->data;
    const struct fsm *st = fsm_frozen_state(view);
    uint8_t *map;
    int fd, rv;

    backup_info_from(st, &x->info);
    x->info.term = req->term;
    x->info.snapshot_len = fsm_frozen_size(view);
    x->info.chunk_size = BACKUP_CHUNK;
    x->info.node_id = x->node_id;
    x->info.created_ms = x->created_ms;
    x->size = backup_file_size(&x->info);
    fd = open(x->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        rv = -errno;
        err_printf(x->err, "create %s: %s", x->path, strerror(-rv));
        return rv;
    }
    /* Blocks first: writing a hole of a full disk through the mapping
     * would be a SIGBUS of the whole node. */
    rv = posix_fallocate(fd, 0, (off_t)x->size);
    if (rv != 0) {
        err_printf(x->err, "reserve %" PRIu64 " bytes for %s: %s", x->size,
                   x->path, strerror(rv));
        close(fd);
        return -rv;
    }
    map =
        mmap(NULL, (size_t)x->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        rv = -errno;
        err_printf(x->err, "map %s: %s", x->path, strerror(-rv));
        close(fd);
        return rv;
    }
    rv = encode_into(x, view, map);
    munmap(map, (size_t)x->size);
    x->fd = fd;
    return rv;
}

/* --- sessions on the loop ------------------------------------------------- */

static void sess_unlink(struct backups *b, struct backup_sess *x)
{
    struct backup_sess **pp = &b->head;

    while (*pp != NULL && *pp != x) {
        pp = &(*pp)->next;
    }
    if (*pp == x) {
        *pp = x->next;
        b->n--;
    }
}

/* Remove the file and free (the session is off the list). */
static void sess_free(struct backup_sess *x)
{
    if (x->fd >= 0) {
        close(x->fd);
    }
    if (unlink(x->path) != 0 && errno != ENOENT) {
        log_kv(LOG_WARN, "cannot remove a backup file", "path=%s error=%s",
               log_quote(x->path, (char[300]){0}, 300),
               log_quote(strerror(errno), (char[80]){0}, 80));
    }
    free(x);
}

/* Closed, timed out or stopping: gone now, or when its encoding ends. */
static void sess_drop(struct backups *b, struct backup_sess *x)
{
    sess_unlink(b, x);
    if (x->state == SESS_ENCODING) {
        x->closed = true;
        return;
    }
    sess_free(x);
}

static void encode_cb(struct replica_digest_req *req, int status)
{
    struct backup_sess *x = req->data;
    struct backups *b = x->owner;

    if (x->closed) {
        sess_free(x);
        return;
    }
    x->last_used = uv_now(&b->s->loop);
    if (status != 0) {
        x->state = SESS_FAILED;
        if (x->err[0] == '\0') {
            err_printf(x->err, "%s", replica_strerror(status));
        }
        log_kv(LOG_WARN, "backup failed", "backup_id=%016" PRIx64 " error=%s",
               x->id, log_quote(x->err, (char[300]){0}, 300));
        return;
    }
    x->state = SESS_READY;
    log_kv(LOG_INFO, "backup encoded",
           "backup_id=%016" PRIx64 " index=%" PRIu64 " records=%" PRIu64
           " bytes=%" PRIu64,
           x->id, x->info.index, x->info.records, x->size);
}

static struct backup_sess *sess_find(struct backups *b, uint64_t id)
{
    for (struct backup_sess *x = b->head; x != NULL; x = x->next) {
        if (x->id == id) {
            return x;
        }
    }
    return NULL;
}

static void tick_cb(uv_timer_t *t)
{
    struct backups *b = t->data;
    uint64_t now = uv_now(t->loop);
    struct backup_sess *x = b->head, *next;

    for (; x != NULL; x = next) {
        next = x->next;
        if (x->state != SESS_ENCODING &&
            now - x->last_used >= b->s->cfg.backup_idle_ms) {
            log_kv(LOG_INFO, "backup abandoned: removed",
                   "backup_id=%016" PRIx64 " idle_ms=%" PRIu64, x->id,
                   now - x->last_used);
            sess_drop(b, x);
        }
    }
}

/* Files a crash left behind: nothing reads them any more. */
static void remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, BACKUP_PREFIX, strlen(BACKUP_PREFIX)) != 0 ||
            n < strlen(BACKUP_SUFFIX) ||
            strcmp(e->d_name + n - strlen(BACKUP_SUFFIX), BACKUP_SUFFIX) != 0) {
            continue;
        }
        if (path_join(path, sizeof path, dir, e->d_name) != 0) {
            log_kv(LOG_WARN, "a stale backup file left: its path is too long",
                   "name=%s", log_quote(e->d_name, (char[300]){0}, 300));
            continue;
        }
        if (unlink(path) == 0) {
            log_kv(LOG_INFO, "removed a stale backup file", "path=%s",
                   log_quote(path, (char[300]){0}, 300));
        }
    }
    closedir(d);
}

void backups_init(struct backups *b, struct server *s)
{
    memset(b, 0, sizeof *b);
    b->s = s;
    remove_stale(s->cfg.data_dir);
    uv_timer_init(&s->loop, &b->timer);
    b->timer.data = b;
    uv_timer_start(&b->timer, tick_cb, BACKUP_TICK_MS, BACKUP_TICK_MS);
    b->timer_up = true;
}

void backups_close(struct backups *b)
{
    while (b->head != NULL) {
        sess_drop(b, b->head);
    }
    if (b->timer_up) {
        uv_timer_stop(&b->timer);
        uv_close((uv_handle_t *)&b->timer, NULL);
        b->timer_up = false;
    }
}

unsigned backups_open(const struct backups *b)
{
    return b->n;
}

/* --- the methods ---------------------------------------------------------- */

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct backup_sess *sess_new(struct server *s)
{
    struct backup_sess *x = calloc(1, sizeof *x);

    if (x == NULL) {
        return NULL;
    }
    do {
        if (RAND_bytes((unsigned char *)&x->id, sizeof x->id) != 1) {
            free(x);
            return NULL;
        }
    } while (x->id == 0 || sess_find(&s->backups, x->id) != NULL);
    x->owner = &s->backups;
    x->fd = -1;
    x->state = SESS_ENCODING;
    x->node_id = s->id;
    x->created_ms = wall_ms();
    snprintf(x->path, sizeof x->path,
             "%s/" BACKUP_PREFIX "%016" PRIx64 BACKUP_SUFFIX, s->cfg.data_dir,
             x->id);
    x->req.data = x;
    return x;
}

void admin_backup_open(struct server *s,
                       struct rpc_call *call,
                       const ProtobufCMessage *msg,
                       const struct service_in *in)
{
    Once__Rpc__BackupOpenResponse r = ONCE__RPC__BACKUP_OPEN_RESPONSE__INIT;
    struct backups *b = &s->backups;
    struct backup_sess *x;
    int rv;

    (void)msg;
    (void)in;
    if (b->n >= BACKUP_OPEN_MAX) {
        reply_error(call, RPC_STATUS_RESOURCE_EXHAUSTED, RPC_APPLIED_FALSE,
                    "too many backups at once: wait for one to finish", NULL);
        return;
    }
    x = sess_new(s);
    if (x == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    /* Listed first: a view work that cannot start calls back at once. */
    x->next = b->head;
    b->head = x;
    b->n++;
    rv = replica_view_work(&s->rep, &x->req, encode_fn, encode_cb);
    if (rv != 0) {
        sess_unlink(b, x);
        free(x);
        reply_replica_error(s, call, rv, NULL);
        return;
    }
    log_kv(LOG_INFO, "backup opened", "backup_id=%016" PRIx64, x->id);
    r.backup_id = x->id;
    reply_msg(call, &r.base);
}

static struct backup_sess *sess_of(struct server *s,
                                   struct rpc_call *call,
                                   uint64_t id)
{
    struct backup_sess *x = sess_find(&s->backups, id);

    if (x == NULL) {
        reply_error(call, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_FALSE,
                    "unknown backup id: closed, abandoned, or opened on "
                    "another leader",
                    NULL);
    }
    return x;
}

/* A chunk of the file, answered with its checksum. */
static void read_chunk(struct server *s,
                       struct rpc_call *call,
                       struct backup_sess *x,
                       const Once__Rpc__BackupReadRequest *q)
{
    Once__Rpc__BackupReadResponse r = ONCE__RPC__BACKUP_READ_RESPONSE__INIT;
    size_t cap =
        s->cfg.limits.frame_max > 4096 ? s->cfg.limits.frame_max - 4096 : 0;
    uint64_t n = x->size - q->offset;
    uint8_t *buf;
    ssize_t got;

    if (n > q->max_bytes) {
        n = q->max_bytes;
    }
    if (n > cap) {
        n = cap;
    }
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL) {
        reply_replica_error(s, call, REPLICA_E_NOMEM, NULL);
        return;
    }
    got = n > 0 ? pread(x->fd, buf, (size_t)n, (off_t)q->offset) : 0;
    if (got < 0 || (uint64_t)got != n) {
        char e[ERR_MSG_SIZE];
        err_printf(e, "read %s: %s", x->path,
                   got < 0 ? strerror(errno) : "short read");
        free(buf);
        reply_error(call, RPC_STATUS_UNAVAILABLE, RPC_APPLIED_FALSE, e, NULL);
        return;
    }
    r.ready = true;
    r.total_bytes = x->size;
    r.data.data = buf;
    r.data.len = (size_t)n;
    r.crc32c = crc32c(0, buf, (size_t)n);
    x->last_used = uv_now(&s->loop);
    reply_msg(call, &r.base);
    free(buf);
}

void admin_backup_read(struct server *s,
                       struct rpc_call *call,
                       const ProtobufCMessage *msg,
                       const struct service_in *in)
{
    const Once__Rpc__BackupReadRequest *q = (const void *)msg;
    Once__Rpc__BackupReadResponse r = ONCE__RPC__BACKUP_READ_RESPONSE__INIT;
    struct backup_sess *x = sess_of(s, call, q->backup_id);

    (void)in;
    if (x == NULL) {
        return;
    }
    switch (x->state) {
        case SESS_ENCODING:
            reply_msg(call, &r.base); /* ready false: ask again */
            return;
        case SESS_FAILED:
            reply_error(call, RPC_STATUS_FAILED_PRECONDITION, RPC_APPLIED_FALSE,
                        x->err, NULL);
            return;
        case SESS_READY:
            break;
    }
    if (q->offset > x->size) {
        reply_invalid(call, "offset: beyond the end of the backup");
        return;
    }
    read_chunk(s, call, x, q);
}

void admin_backup_close(struct server *s,
                        struct rpc_call *call,
                        const ProtobufCMessage *msg,
                        const struct service_in *in)
{
    const Once__Rpc__BackupCloseRequest *q = (const void *)msg;
    Once__Rpc__BackupCloseResponse r = ONCE__RPC__BACKUP_CLOSE_RESPONSE__INIT;
    struct backup_sess *x = sess_of(s, call, q->backup_id);

    (void)in;
    if (x == NULL) {
        return;
    }
    log_kv(LOG_INFO, "backup closed", "backup_id=%016" PRIx64, x->id);
    sess_drop(&s->backups, x);
    reply_msg(call, &r.base);
}
