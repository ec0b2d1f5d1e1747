/* cli/backup.c: `oncectl snapshot backup FILE` and `snapshot verify FILE`
 * (docs/oncectl.md, "snapshot backup | verify").
 *
 * backup: Admin.BackupOpen on the leader, then BackupRead in chunks until
 * the file is whole, into FILE.tmp-PID beside FILE (created exclusively);
 * fsync; the whole temporary file is verified as `verify` would (every
 * checksum, the structure); only then renamed to FILE and the directory
 * synced. Any failure removes the temporary file, so FILE is either absent
 * (or as it was) or a complete, verified backup. BackupClose removes the
 * leader's copy in every case.
 *
 * verify: map the file read-only and run backup_verify (fsm/backup_file.h)
 * over it: the first problem is reported with its byte offset. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/text.h"
#include "fsm/backup_file.h"

#define POLL_MS     100
#define PROGRESS_MS 250

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static json_t *hex_id(const uint8_t *id)
{
    char hex[2 * ONCE_ID_LEN + 1];

    text_format_hex(id, ONCE_ID_LEN, hex);
    return cli_must(json_string(hex));
}

/* What a backup holds, as JSON fields of @o. */
static void info_json(json_t *o, const struct backup_info *b, uint64_t size)
{
    json_t *st = cli_must(json_object());

    cli_set(o, "bytes", cli_juint(size));
    cli_set(o, "records", cli_juint(b->records));
    cli_set(o, "index", cli_juint(b->index));
    cli_set(o, "term", cli_juint(b->term));
    cli_set(o, "log_time_ms", cli_juint(b->log_time_ms));
    cli_set(o, "backup_cluster_id", hex_id(b->cluster_id));
    cli_set(o, "written_by", cli_jid(b->node_id));
    cli_set(o, "created_ms", cli_juint(b->created_ms));
    cli_set(st, "max_window_ms", cli_juint(b->settings.max_window_ms));
    cli_set(st, "max_skew_ms", cli_juint(b->settings.max_skew_ms));
    cli_set(st, "max_ttl_ms", cli_juint(b->settings.max_ttl_ms));
    cli_set(st, "max_lease_ms", cli_juint(b->settings.max_lease_ms));
    cli_set(st, "max_records", cli_juint(b->settings.max_records));
    cli_set(st, "max_bytes", cli_juint(b->settings.max_bytes));
    cli_set(o, "settings", st);
}

/* A local failure: an INVALID_ARGUMENT-shaped object, but named by @err
 * ("FAILED_PRECONDITION" for I/O). */
static int local_error(json_t **out,
                       const char *status,
                       int code,
                       const char *msg)
{
    *out = cli_json_usage(msg);
    cli_set(*out, "error", cli_must(json_string(status)));
    return code;
}

/* --- verify --------------------------------------------------------------
 */

/* Map @path read-only: 0 and *@map / *@len, or -errno (message in @err). */
static int map_file(const char *path, uint8_t **map, size_t *len, char *err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *map = NULL;
    *len = 0;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        err_printf(err, "%s: %s", path, strerror(e));
        if (fd >= 0) {
            close(fd);
        }
        return -e;
    }
    *len = (size_t)st.st_size;
    if (*len > 0) {
        void *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            err_printf(err, "map %s: %s", path, strerror(e));
            close(fd);
            return -e;
        }
        *map = p;
    }
    close(fd);
    return 0;
}

/* Verify @path into @o (OK) or a CORRUPT outcome; the exit code. */
static int verify_path(const char *path, json_t **out)
{
    struct backup_info info;
    uint8_t *map;
    size_t len;
    uint64_t bad_off;
    char err[ERR_MSG_SIZE];
    int rv;

    if (map_file(path, &map, &len, err) != 0) {
        return local_error(out, "FAILED_PRECONDITION", CLI_EXIT_NOT_APPLIED,
                           err);
    }
    rv = backup_verify(map, len, &info, NULL, &bad_off, err);
    if (map != NULL) {
        munmap(map, len);
    }
    *out = cli_must(json_object());
    cli_set(*out, "file", cli_must(json_string(path)));
    if (rv != 0) {
        cli_set(*out, "outcome", cli_must(json_string("CORRUPT")));
        cli_set(*out, "offset", cli_juint(bad_off));
        cli_set(*out, "reason", cli_must(json_string(err)));
        return CLI_EXIT_DENIED;
    }
    cli_set(*out, "outcome", cli_must(json_string("OK")));
    info_json(*out, &info, len);
    return CLI_EXIT_OK;
}

int cli_run_verify(const struct cli_req *q, json_t **out)
{
    return verify_path(q->file, out);
}

/* --- backup --------------------------------------------------------------
 */

struct dl
{
    const struct cli_ctx *x;
    uint32_t t;
    uint64_t id;
    int fd;
    char tmp[CLI_PATH_MAX + 32];
    uint64_t total, done;
    uint64_t t0, last_print;
    uint64_t t_open, wait_ms, transfer_ms, verify_ms;
    uint8_t *buf;
    struct once_result r;
};

static void progress(struct dl *d, bool last)
{
    uint64_t now = mono_ms(), el = now - d->t0;
    double rate, eta;

    if (!d->x->progress || (!last && now - d->last_print < PROGRESS_MS)) {
        return;
    }
    d->last_print = now;
    rate = el > 0 ? (double)d->done * 1000.0 / (double)el : 0.0;
    eta = rate > 0 && d->total > d->done ? (double)(d->total - d->done) / rate
                                         : 0.0;
    fprintf(stderr,
            "\r%" PRIu64 " / %" PRIu64
            " bytes (%.0f%%), %.1f MB/s, ETA %.0f s"
            "\033[K%s",
            d->done, d->total,
            d->total > 0 ? 100.0 * (double)d->done / (double)d->total : 0.0,
            rate / 1e6, eta, last ? "\n" : "");
    fflush(stderr);
}

/* Write all of @n bytes at the end of the temporary file. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read the leader's file into d->fd: 0, 1 (a call failed: d->r), or
 * -errno (a local write failed). */
static int download(struct dl *d)
{
    bool ready = false;
    size_t n;
    int rv;

    d->t0 = mono_ms();
    for (;;) {
        once_result_clear(&d->r);
        once_result_init(&d->r);
        if (once_backup_read(d->x->client, d->id, d->done, d->buf,
                             ONCE_BACKUP_READ_MAX, d->t, &ready, &d->total, &n,
                             &d->r) != ONCE_STATUS_OK) {
            return 1;
        }
        if (!ready) {
            sleep_ms(POLL_MS); /* the leader is still encoding */
            d->t0 = mono_ms();
            continue;
        }
        if (d->done == 0 && d->wait_ms == 0) {
            d->wait_ms = d->t0 - d->t_open;
        }
        if (n == 0) {
            break;
        }
        rv = write_all(d->fd, d->buf, n);
        if (rv != 0) {
            return rv;
        }
        d->done += n;
        progress(d, false);
        if (d->done >= d->total) {
            break;
        }
    }
    progress(d, true);
    d->transfer_ms = mono_ms() - d->t0;
    return d->done == d->total ? 0 : -EIO;
}

/* The directory of @path, synced after the rename. */
static int sync_dir_of(const char *path)
{
    char copy[CLI_PATH_MAX + 1];
    int fd, rv = 0;

    snprintf(copy, sizeof copy, "%s", path);
    fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        rv = -errno;
    }
    if (fd >= 0) {
        close(fd);
    }
    return rv;
}

/* Keep the temporary file only if it is whole and verifies. */
static int finish(struct dl *d, const char *file, json_t **out)
{
    char err[ERR_MSG_SIZE];
    json_t *v = NULL;
    int code;

    if (fsync(d->fd) != 0) {
        err_printf(err, "fsync %s: %s", d->tmp, strerror(errno));
        return local_error(out, "FAILED_PRECONDITION", CLI_EXIT_NOT_APPLIED,
                           err);
    }
    d->verify_ms = mono_ms();
    code = verify_path(d->tmp, &v);
    d->verify_ms = mono_ms() - d->verify_ms;
    if (code != CLI_EXIT_OK) {
        *out = v;
        cli_set(*out, "file", cli_must(json_string(file)));
        return CLI_EXIT_NOT_APPLIED;
    }
    if (rename(d->tmp, file) != 0 || sync_dir_of(file) != 0) {
        err_printf(err, "rename to %s: %s", file, strerror(errno));
        json_decref(v);
        return local_error(out, "FAILED_PRECONDITION", CLI_EXIT_NOT_APPLIED,
                           err);
    }
    d->tmp[0] = '\0';
    *out = v;
    cli_set(*out, "file", cli_must(json_string(file)));
    /* Where the time went: the leader's encoding (waited for), the
     * transfer, the local check. */
    cli_set(*out, "encode_wait_ms", cli_juint(d->wait_ms));
    cli_set(*out, "transfer_ms", cli_juint(d->transfer_ms));
    cli_set(*out, "verify_ms", cli_juint(d->verify_ms));
    return CLI_EXIT_OK;
}

static int backup_body(struct dl *d, const char *file, json_t **out)
{
    char err[ERR_MSG_SIZE];
    int rv;

    snprintf(d->tmp, sizeof d->tmp, "%s.tmp-%ld", file, (long)getpid());
    d->fd = open(d->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (d->fd < 0) {
        err_printf(err, "create %s: %s", d->tmp, strerror(errno));
        d->tmp[0] = '\0';
        return local_error(out, "FAILED_PRECONDITION", CLI_EXIT_NOT_APPLIED,
                           err);
    }
    rv = download(d);
    if (rv == 1) {
        *out = cli_json_error(&d->r);
        return cli_exit_code(CLI_SNAPSHOT_BACKUP, false, &d->r);
    }
    if (rv != 0) {
        err_printf(err, "write %s: %s", d->tmp, strerror(-rv));
        return local_error(out, "FAILED_PRECONDITION", CLI_EXIT_NOT_APPLIED,
                           err);
    }
    return finish(d, file, out);
}

int cli_run_backup(const struct cli_ctx *x,
                   const struct cli_req *q,
                   uint32_t timeout_ms,
                   json_t **out)
{
    struct dl d;
    struct once_result cr;
    int code;

    memset(&d, 0, sizeof d);
    d.x = x;
    d.t = timeout_ms;
    d.fd = -1;
    once_result_init(&d.r);
    d.t_open = mono_ms();
    d.buf = malloc(ONCE_BACKUP_READ_MAX);
    if (d.buf == NULL) {
        return local_error(out, "RESOURCE_EXHAUSTED", CLI_EXIT_NOT_APPLIED,
                           "out of memory");
    }
    if (once_backup_open(x->client, timeout_ms, &d.id, &d.r) !=
        ONCE_STATUS_OK) {
        *out = cli_json_error(&d.r);
        code = cli_exit_code(CLI_SNAPSHOT_BACKUP, false, &d.r);
    } else {
        code = backup_body(&d, q->file, out);
        once_result_init(&cr);
        once_backup_close(x->client, d.id, timeout_ms, &cr);
        once_result_clear(&cr);
    }
    if (d.fd >= 0) {
        close(d.fd);
    }
    if (d.tmp[0] != '\0') {
        unlink(d.tmp); /* never leave a partial file */
    }
    cli_json_origin(*out, &d.r.origin, NULL);
    once_result_clear(&d.r);
    free(d.buf);
    return code;
}
