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
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/path.h"

#define NODE_ID_FILE   "node-id"
#define TOMBSTONE_FILE "tombstone"
#define NODE_ID_LEN    (IDENTITY_HEX_LEN + 1) /* digits + '\n' */
#define REASON_MAX     200

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
            return IDENTITY_E_INVALID; /* also the NUL of a short string */
        }
        v = v << 4 | d;
    }
    if (s[IDENTITY_HEX_LEN] != '\0') {
        return IDENTITY_E_INVALID;
    }
    *id = v;
    return 0;
}

/* DIR/name into @out (PATH_MAX). */
static int join(const char *dir, const char *name, char *out, char *errmsg)
{
    if (path_join(out, PATH_MAX, dir, name) != 0) {
        err_printf(errmsg, "data directory path too long: %.64s...", dir);
        return IDENTITY_E_INVALID;
    }
    return 0;
}

/* *@found: whether @path exists; 0, or an error. */
static int exists(const char *path, bool *found, char *errmsg)
{
    struct stat st;

    *found = lstat(path, &st) == 0;
    if (*found || errno == ENOENT) {
        return 0;
    }
    err_printf(errmsg, "stat %s: %s", path, strerror(errno));
    return IDENTITY_E_IO;
}

/* Write all @len bytes: 0, or -errno of the failed write. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
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
        err_printf(errmsg, "open directory %s: %s", dir, strerror(errno));
        return IDENTITY_E_IO;
    }
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        err_printf(errmsg, "fsync directory %s: %s", dir, strerror(e));
        return IDENTITY_E_IO;
    }
    close(fd);
    return 0;
}

/* Write @buf to DIR/name durably. @replace: rename over an existing file;
 * else return -EEXIST (and leave it, no message) if DIR/name already
 * exists. */
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
        err_printf(errmsg, "create %s: %s", tmp, strerror(errno));
        return IDENTITY_E_IO;
    }
    e = -write_all(fd, buf, len);
    if (e != 0) {
        close(fd);
        unlink(tmp);
        err_printf(errmsg, "write %s: %s", tmp, strerror(e));
        return IDENTITY_E_IO;
    }
    if (fsync(fd) != 0) {
        e = errno;
        close(fd);
        unlink(tmp);
        err_printf(errmsg, "fsync %s: %s", tmp, strerror(e));
        return IDENTITY_E_IO;
    }
    if (close(fd) != 0) {
        e = errno;
        unlink(tmp);
        err_printf(errmsg, "close %s: %s", tmp, strerror(e));
        return IDENTITY_E_IO;
    }
    if (replace) {
        if (rename(tmp, final) != 0) {
            e = errno;
            unlink(tmp);
            err_printf(errmsg, "rename %s to %s: %s", tmp, final, strerror(e));
            return IDENTITY_E_IO;
        }
    } else {
        if (link(tmp, final) != 0) {
            e = errno;
            unlink(tmp);
            if (e == EEXIST) {
                return -EEXIST;
            }
            err_printf(errmsg, "link %s to %s: %s", tmp, final, strerror(e));
            return IDENTITY_E_IO;
        }
        if (unlink(tmp) != 0) {
            err_printf(errmsg, "unlink %s: %s", tmp, strerror(errno));
            return IDENTITY_E_IO;
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
        err_printf(errmsg, "open %s: %s", path, strerror(errno));
        return IDENTITY_E_IO;
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
            err_printf(errmsg, "read %s: %s", path, strerror(e));
            return IDENTITY_E_IO;
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (got != NODE_ID_LEN || buf[IDENTITY_HEX_LEN] != '\n') {
        err_printf(errmsg,
                   "%s is corrupt: want exactly 16 lowercase hex digits and "
                   "a newline (%zu bytes read)",
                   path, got);
        return IDENTITY_E_CORRUPT;
    }
    buf[IDENTITY_HEX_LEN] = '\0';
    if (identity_parse(buf, &v) != 0) {
        err_printf(errmsg, "%s is corrupt: not 16 lowercase hex digits", path);
        return IDENTITY_E_CORRUPT;
    }
    if (v == 0 || v == UINT64_MAX) {
        err_printf(errmsg, "%s is corrupt: the id %s is reserved", path,
                   v == 0 ? "0" : "ffffffffffffffff");
        return IDENTITY_E_CORRUPT;
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
            err_printf(errmsg, "getrandom: %s",
                       n < 0 ? strerror(errno) : "short read");
            return IDENTITY_E_IO;
        }
    }
    *id = v;
    return 0;
}

static int check_dir(const char *dir, char *errmsg)
{
    struct stat st;

    if (dir == NULL || dir[0] == '\0') {
        err_printf(errmsg, "no data directory given");
        return IDENTITY_E_INVALID;
    }
    if (stat(dir, &st) != 0) {
        err_printf(errmsg, "data directory %s: %s", dir, strerror(errno));
        return IDENTITY_E_IO;
    }
    if (!S_ISDIR(st.st_mode)) {
        err_printf(errmsg, "data directory %s is not a directory", dir);
        return IDENTITY_E_INVALID;
    }
    return 0;
}

int identity_check_tombstone(const char *dir, char *errmsg)
{
    char path[PATH_MAX];
    bool found;
    int rv;

    if ((rv = check_dir(dir, errmsg)) != 0) {
        return rv;
    }
    if ((rv = join(dir, TOMBSTONE_FILE, path, errmsg)) != 0) {
        return rv;
    }
    if ((rv = exists(path, &found, errmsg)) != 0) {
        return rv;
    }
    if (found) {
        err_printf(errmsg,
                   "%s exists: this data directory belongs to a node that "
                   "was removed from its cluster and its id is retired; "
                   "start the node with a fresh, empty data directory",
                   path);
        return IDENTITY_E_TOMBSTONE;
    }
    return 0;
}

int identity_open(const char *dir, uint64_t *id, char *errmsg)
{
    char path[PATH_MAX];
    char line[NODE_ID_LEN + 1];
    uint64_t v = 0;
    bool found;
    int rv, attempt;

    if (id == NULL) {
        err_printf(errmsg, "no id to fill in");
        return IDENTITY_E_INVALID;
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
        if ((rv = exists(path, &found, errmsg)) != 0) {
            return rv;
        }
        if (found) {
            return read_id(path, id, errmsg);
        }
        if ((rv = random_id(&v, errmsg)) != 0) {
            return rv;
        }
        identity_format(v, line);
        line[IDENTITY_HEX_LEN] = '\n';
        rv = write_durable(dir, NODE_ID_FILE, line, NODE_ID_LEN, false, errmsg);
        if (rv == 0) {
            *id = v;
            return 0;
        }
        if (rv != -EEXIST) {
            return rv;
        }
    }
    err_printf(errmsg, "%s: created and removed concurrently", path);
    return IDENTITY_E_IO;
}

int identity_tombstone(const char *dir, const char *reason, char *errmsg)
{
    char path[PATH_MAX];
    char text[512];
    char clean[REASON_MAX + 1];
    char hex[IDENTITY_HEX_LEN + 1];
    char ignored[ERR_MSG_SIZE];
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
        err_printf(errmsg, "tombstone text too long");
        return IDENTITY_E_INVALID;
    }
    return write_durable(dir, TOMBSTONE_FILE, text, (size_t)n, true, errmsg);
}
