/* raft/identity.c: node-id and tombstone files (see identity.h).
 *
 * Durable write: DIR/<name>.tmp.<pid> is created, written in full and
 * fsync'ed, then moved to DIR/<name> and DIR is fsync'ed. node-id is moved
 * with link() + unlink() so an existing node-id is never replaced (another
 * process that got there first wins and we read its id); the tombstone is
 * moved with rename(), which replaces an older one. */
#include "raft/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NODE_ID_FILE   "node-id"
#define TOMBSTONE_FILE "tombstone"
#define NODE_ID_LEN    (IDENTITY_HEX_LEN + 1) /* digits + '\n' */
#define REASON_MAX     200

static int fail(char *errmsg, int rv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *errmsg, int rv, const char *fmt, ...)
{
    va_list ap;

    if (errmsg != NULL) {
        va_start(ap, fmt);
        if (vsnprintf(errmsg, IDENTITY_ERRMSG_SIZE, fmt, ap) >=
            IDENTITY_ERRMSG_SIZE) {
            /* Truncated: mark it so a reader knows. */
            memcpy(errmsg + IDENTITY_ERRMSG_SIZE - 4, "...", 4);
        }
        va_end(ap);
    }
    return rv;
}

char *identity_format(uint64_t id, char *buf)
{
    snprintf(buf, IDENTITY_HEX_LEN + 1, "%016" PRIx64, id);
    return buf;
}

int identity_parse(const char *s, uint64_t *id)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < IDENTITY_HEX_LEN; i++) {
        char c = s[i];
        unsigned d;

        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            d = (unsigned)(c - 'a' + 10);
        } else {
            return -1; /* also the NUL of a short string */
        }
        v = v << 4 | d;
    }
    if (s[IDENTITY_HEX_LEN] != '\0') {
        return -1;
    }
    *id = v;
    return 0;
}

/* DIR/name into @out (PATH_MAX). */
static int join(const char *dir, const char *name, char *out, char *errmsg)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);

    if (n < 0 || n >= PATH_MAX) {
        return fail(errmsg, IDENTITY_E_INVALID,
                    "data directory path too long: %.64s...", dir);
    }
    return 0;
}

/* 1: exists, 0: does not, else an error. */
static int exists(const char *path, char *errmsg)
{
    struct stat st;

    if (lstat(path, &st) == 0) {
        return 1;
    }
    if (errno == ENOENT) {
        return 0;
    }
    return fail(errmsg, IDENTITY_E_IO, "stat %s: %s", path, strerror(errno));
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int fsync_dir(const char *dir, char *errmsg)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0) {
        return fail(errmsg, IDENTITY_E_IO, "open directory %s: %s", dir,
                    strerror(errno));
    }
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        return fail(errmsg, IDENTITY_E_IO, "fsync directory %s: %s", dir,
                    strerror(e));
    }
    close(fd);
    return 0;
}

/* Write @buf to DIR/name durably. @replace: rename over an existing file;
 * else return 1 (and leave it) if DIR/name already exists. */
static int write_durable(const char *dir,
                         const char *name,
                         const void *buf,
                         size_t len,
                         bool replace,
                         char *errmsg)
{
    char tmp[PATH_MAX];
    char final[PATH_MAX];
    char tmpname[64];
    int fd, rv, e;

    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", name, (long)getpid());
    if ((rv = join(dir, tmpname, tmp, errmsg)) != 0 ||
        (rv = join(dir, name, final, errmsg)) != 0) {
        return rv;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        return fail(errmsg, IDENTITY_E_IO, "create %s: %s", tmp,
                    strerror(errno));
    }
    if (write_all(fd, buf, len) != 0) {
        e = errno;
        close(fd);
        unlink(tmp);
        return fail(errmsg, IDENTITY_E_IO, "write %s: %s", tmp, strerror(e));
    }
    if (fsync(fd) != 0) {
        e = errno;
        close(fd);
        unlink(tmp);
        return fail(errmsg, IDENTITY_E_IO, "fsync %s: %s", tmp, strerror(e));
    }
    if (close(fd) != 0) {
        e = errno;
        unlink(tmp);
        return fail(errmsg, IDENTITY_E_IO, "close %s: %s", tmp, strerror(e));
    }
    if (replace) {
        if (rename(tmp, final) != 0) {
            e = errno;
            unlink(tmp);
            return fail(errmsg, IDENTITY_E_IO, "rename %s to %s: %s", tmp,
                        final, strerror(e));
        }
    } else {
        if (link(tmp, final) != 0) {
            e = errno;
            unlink(tmp);
            if (e == EEXIST) {
                return 1;
            }
            return fail(errmsg, IDENTITY_E_IO, "link %s to %s: %s", tmp, final,
                        strerror(e));
        }
        if (unlink(tmp) != 0) {
            return fail(errmsg, IDENTITY_E_IO, "unlink %s: %s", tmp,
                        strerror(errno));
        }
    }
    return fsync_dir(dir, errmsg);
}

/* Read and validate DIR/node-id. */
static int read_id(const char *path, uint64_t *id, char *errmsg)
{
    char buf[NODE_ID_LEN + 2];
    size_t got = 0;
    ssize_t n;
    uint64_t v = 0;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return fail(errmsg, IDENTITY_E_IO, "open %s: %s", path,
                    strerror(errno));
    }
    /* Read one byte more than valid so a longer file is detected. */
    while (got < NODE_ID_LEN + 1) {
        n = read(fd, buf + got, NODE_ID_LEN + 1 - got);
        if (n < 0) {
            int e = errno;
            if (e == EINTR) {
                continue;
            }
            close(fd);
            return fail(errmsg, IDENTITY_E_IO, "read %s: %s", path,
                        strerror(e));
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (got != NODE_ID_LEN || buf[IDENTITY_HEX_LEN] != '\n') {
        return fail(errmsg, IDENTITY_E_CORRUPT,
                    "%s is corrupt: want exactly 16 lowercase hex digits and "
                    "a newline (%zu bytes read)",
                    path, got);
    }
    buf[IDENTITY_HEX_LEN] = '\0';
    if (identity_parse(buf, &v) != 0) {
        return fail(errmsg, IDENTITY_E_CORRUPT,
                    "%s is corrupt: not 16 lowercase hex digits", path);
    }
    if (v == 0 || v == UINT64_MAX) {
        return fail(errmsg, IDENTITY_E_CORRUPT,
                    "%s is corrupt: the id %s is reserved", path,
                    v == 0 ? "0" : "ffffffffffffffff");
    }
    *id = v;
    return 0;
}

static int random_id(uint64_t *id, char *errmsg)
{
    uint64_t v = 0;

    /* 0 is no id in raft; all ones is the spare the leader adds and removes
     * to refresh the configuration (REPLICA_REFRESH_ID in replica.h). */
    while (v == 0 || v == UINT64_MAX) {
        ssize_t n = getrandom(&v, sizeof v, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n != (ssize_t)sizeof v) {
            return fail(errmsg, IDENTITY_E_IO, "getrandom: %s",
                        n < 0 ? strerror(errno) : "short read");
        }
    }
    *id = v;
    return 0;
}

static int check_dir(const char *dir, char *errmsg)
{
    struct stat st;

    if (dir == NULL || dir[0] == '\0') {
        return fail(errmsg, IDENTITY_E_INVALID, "no data directory given");
    }
    if (stat(dir, &st) != 0) {
        return fail(errmsg, IDENTITY_E_IO, "data directory %s: %s", dir,
                    strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        return fail(errmsg, IDENTITY_E_INVALID,
                    "data directory %s is not a directory", dir);
    }
    return 0;
}

int identity_check_tombstone(const char *dir, char *errmsg)
{
    char path[PATH_MAX];
    int rv;

    if ((rv = check_dir(dir, errmsg)) != 0) {
        return rv;
    }
    if ((rv = join(dir, TOMBSTONE_FILE, path, errmsg)) != 0) {
        return rv;
    }
    rv = exists(path, errmsg);
    if (rv < 0) {
        return rv;
    }
    if (rv == 1) {
        return fail(errmsg, IDENTITY_E_TOMBSTONE,
                    "%s exists: this data directory belongs to a node that "
                    "was removed from its cluster and its id is retired; "
                    "start the node with a fresh, empty data directory",
                    path);
    }
    return 0;
}

int identity_open(const char *dir, uint64_t *id, char *errmsg)
{
    char path[PATH_MAX];
    char line[NODE_ID_LEN + 1];
    uint64_t v = 0;
    int rv, attempt;

    if (id == NULL) {
        return fail(errmsg, IDENTITY_E_INVALID, "no id to fill in");
    }
    if ((rv = identity_check_tombstone(dir, errmsg)) != 0) {
        return rv;
    }
    if ((rv = join(dir, NODE_ID_FILE, path, errmsg)) != 0) {
        return rv;
    }
    /* Two rounds at most: if another process creates node-id between our
     * check and our link, read its id. */
    for (attempt = 0; attempt < 2; attempt++) {
        rv = exists(path, errmsg);
        if (rv < 0) {
            return rv;
        }
        if (rv == 1) {
            return read_id(path, id, errmsg);
        }
        if ((rv = random_id(&v, errmsg)) != 0) {
            return rv;
        }
        identity_format(v, line);
        line[IDENTITY_HEX_LEN] = '\n';
        rv = write_durable(dir, NODE_ID_FILE, line, NODE_ID_LEN, false, errmsg);
        if (rv < 0) {
            return rv;
        }
        if (rv == 0) {
            *id = v;
            return 0;
        }
    }
    return fail(errmsg, IDENTITY_E_IO, "%s: created and removed concurrently",
                path);
}

int identity_tombstone(const char *dir, const char *reason, char *errmsg)
{
    char path[PATH_MAX];
    char text[512];
    char clean[REASON_MAX + 1];
    char hex[IDENTITY_HEX_LEN + 1];
    char ignored[IDENTITY_ERRMSG_SIZE];
    uint64_t id = 0;
    size_t i;
    int rv, n;

    if ((rv = check_dir(dir, errmsg)) != 0) {
        return rv;
    }
    if ((rv = join(dir, NODE_ID_FILE, path, errmsg)) != 0) {
        return rv;
    }
    /* The id is informational here: a missing or bad node-id must not stop
     * the tombstone from being written. */
    if (read_id(path, &id, ignored) != 0) {
        id = 0;
    }
    if (reason == NULL) {
        reason = "";
    }
    for (i = 0; i < REASON_MAX && reason[i] != '\0'; i++) {
        unsigned char c = (unsigned char)reason[i];
        clean[i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    clean[i] = '\0';
    n = snprintf(text, sizeof text,
                 "removed node: do not start a node from this directory\n"
                 "id=%s\ntime=%lld\nreason=%s\n",
                 id != 0 ? identity_format(id, hex) : "unknown",
                 (long long)time(NULL), clean);
    if (n < 0 || (size_t)n >= sizeof text) {
        return fail(errmsg, IDENTITY_E_INVALID, "tombstone text too long");
    }
    return write_durable(dir, TOMBSTONE_FILE, text, (size_t)n, true, errmsg);
}
