#include "raft/anchor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/path.h"
#include "common/text.h"

#define MAGIC        "once-ltime-anchor 1 "
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/* Say why in @why (@cap bytes) and return @code (a negated errno). */
static int fail(int code,
                char *why,
                size_t cap,
                const char *msg,
                const char *detail)
{
    snprintf(why, cap, "%s%s%s", msg, detail != NULL ? ": " : "",
             detail != NULL ? detail : "");
    return code;
}

static bool boot_id_ok(const char *s, size_t len)
{
    if (len != ANCHOR_BOOT_ID_LEN) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;

        bool hex_lower = text_hex_digit(s[i]) != TEXT_NOT_HEX &&
                         !(s[i] >= 'A' && s[i] <= 'F');

        if (dash ? s[i] != '-' : !hex_lower) {
            return false;
        }
    }
    return true;
}

/* Read at most @cap - 1 bytes of @path into @buf (NUL-terminated); *len
 * is what was read. Returns 0, 1 (no such file) or -errno with @why. */
static int read_small(const char *path,
                      char *buf,
                      size_t cap,
                      size_t *len,
                      char *why,
                      size_t wcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    size_t got = 0;

    if (fd < 0) {
        if (errno == ENOENT) {
            return 1;
        }
        return fail(-errno, why, wcap, path, strerror(errno));
    }
    while (got < cap - 1) {
        n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            int e = errno;

            close(fd);
            return fail(-e, why, wcap, path, strerror(e));
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *len = got;
    return 0;
}

int anchor_boot_id(const char *path,
                   char out[ANCHOR_BOOT_ID_LEN + 1],
                   char *why,
                   size_t cap)
{
    char buf[64];
    size_t len = 0;
    int rv = read_small(path != NULL ? path : BOOT_ID_PATH, buf, sizeof buf,
                        &len, why, cap);

    if (rv == 1) {
        return fail(-ENOENT, why, cap, "no boot id",
                    path != NULL ? path : BOOT_ID_PATH);
    }
    if (rv != 0) {
        return rv;
    }
    if (len > 0 && buf[len - 1] == '\n') {
        len--;
    }
    if (!boot_id_ok(buf, len)) {
        return fail(-EBADMSG, why, cap, "the boot id is not a UUID", NULL);
    }
    memcpy(out, buf, ANCHOR_BOOT_ID_LEN);
    out[ANCHOR_BOOT_ID_LEN] = '\0';
    return 0;
}

/* Decimal without leading zeros: the file has one spelling of a pair. */
static bool decimal(const char *s, uint64_t *out)
{
    return (s[0] != '0' || s[1] == '\0') && text_parse_u64(s, UINT64_MAX, out);
}

/* The next space-terminated field of [*p, end) into @out (@cap bytes). */
static bool field(const char **p,
                  const char *end,
                  char sep,
                  char *out,
                  size_t cap)
{
    const char *q = memchr(*p, sep, (size_t)(end - *p));
    size_t n;

    if (q == NULL || q == *p || (size_t)(q - *p) >= cap) {
        return false;
    }
    n = (size_t)(q - *p);
    if (memchr(*p, '\0', n) != NULL) {
        return false; /* the C string would end early: "12\0 34" is not 12 */
    }
    memcpy(out, *p, n);
    out[n] = '\0';
    *p = q + 1;
    return true;
}

int anchor_parse(const char *buf,
                 size_t len,
                 struct anchor *a,
                 char *why,
                 size_t cap)
{
    const char *p = buf, *end = buf + len;
    char id[ANCHOR_BOOT_ID_LEN + 2], num[24];

    if (len > ANCHOR_FILE_MAX) {
        return fail(-EBADMSG, why, cap, "longer than an anchor line", NULL);
    }
    if (len < sizeof MAGIC - 1 || memcmp(buf, MAGIC, sizeof MAGIC - 1) != 0) {
        return fail(-EBADMSG, why, cap,
                    "not an anchor file (or another version)", NULL);
    }
    p += sizeof MAGIC - 1;
    if (!field(&p, end, ' ', id, sizeof id) || !boot_id_ok(id, strlen(id))) {
        return fail(-EBADMSG, why, cap, "bad boot id", NULL);
    }
    memcpy(a->boot_id, id, sizeof a->boot_id);
    if (!field(&p, end, ' ', num, sizeof num) || !decimal(num, &a->log_ms)) {
        return fail(-EBADMSG, why, cap, "bad log time", NULL);
    }
    if (!field(&p, end, '\n', num, sizeof num) || !decimal(num, &a->mono_ms)) {
        return fail(-EBADMSG, why, cap, "bad monotonic time", NULL);
    }
    if (p != end) {
        return fail(-EBADMSG, why, cap, "bytes after the line", NULL);
    }
    return 0;
}

int anchor_load(const char *dir,
                const char *boot_id,
                uint64_t mono_now_ms,
                struct anchor *a,
                char *why,
                size_t cap)
{
    char path[4096], buf[ANCHOR_FILE_MAX + 2], reason[128];
    size_t len = 0;
    int rv;

    if (path_join(path, sizeof path, dir, ANCHOR_FILE) != 0) {
        return fail(-ENAMETOOLONG, why, cap, "data directory path too long",
                    NULL);
    }
    rv = read_small(path, buf, sizeof buf, &len, why, cap);
    if (rv != 0) {
        return rv == 1 ? 0 : rv;
    }
    rv = anchor_parse(buf, len, a, reason, sizeof reason);
    if (rv != 0) {
        return fail(rv, why, cap, path, reason);
    }
    if (strcmp(a->boot_id, boot_id) != 0) {
        return fail(-ESTALE, why, cap, "written before the host's last boot",
                    NULL);
    }
    if (a->mono_ms > mono_now_ms) {
        return fail(-ERANGE, why, cap, "its monotonic time is in the future",
                    NULL);
    }
    return 1;
}

int anchor_format(const struct anchor *a, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, MAGIC "%s %" PRIu64 " %" PRIu64 "\n", a->boot_id,
                     a->log_ms, a->mono_ms);

    return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

int anchor_write(const char *dir, const struct anchor *a, char *why, size_t cap)
{
    char path[4096], tmp[4100], line[ANCHOR_FILE_MAX + 1];
    int fd, n;
    ssize_t w;

    n = anchor_format(a, line, sizeof line);
    if (n < 0) {
        return fail(n, why, cap, "anchor line too long", NULL);
    }
    if (path_join(path, sizeof path, dir, ANCHOR_FILE) != 0) {
        return fail(-ENAMETOOLONG, why, cap, "data directory path too long",
                    NULL);
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return fail(-errno, why, cap, tmp, strerror(errno));
    }
    do {
        w = write(fd, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
    if (w != n) {
        int e = w < 0 ? errno : EIO;

        close(fd);
        unlink(tmp);
        return fail(-e, why, cap, tmp, strerror(e));
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;

        unlink(tmp);
        return fail(-e, why, cap, path, strerror(e));
    }
    return 0;
}
