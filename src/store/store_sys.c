/* store/store_sys.c: store_sys_posix, the file-system table of production
 * (store_sys.h): each entry is the system call of its name. One indirect
 * call per system call is all the seam costs. */
#include "store/store_sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int px_openat(const struct store_sys *sys,
                     int dirfd,
                     const char *name,
                     int flags,
                     mode_t mode)
{
    (void)sys;
    return openat(dirfd, name, flags, mode);
}

static int px_close(const struct store_sys *sys, int fd)
{
    (void)sys;
    return close(fd);
}

static ssize_t px_pwrite(const struct store_sys *sys,
                         int fd,
                         const void *buf,
                         size_t len,
                         off_t off)
{
    (void)sys;
    return pwrite(fd, buf, len, off);
}

static ssize_t px_pwritev(const struct store_sys *sys,
                          int fd,
                          const struct iovec *iov,
                          int n,
                          off_t off)
{
    (void)sys;
    return pwritev(fd, iov, n, off);
}

static ssize_t px_pread(const struct store_sys *sys,
                        int fd,
                        void *buf,
                        size_t len,
                        off_t off)
{
    (void)sys;
    return pread(fd, buf, len, off);
}

static int px_fdatasync(const struct store_sys *sys, int fd)
{
    (void)sys;
    return fdatasync(fd);
}

static int px_fsync(const struct store_sys *sys, int fd)
{
    (void)sys;
    return fsync(fd);
}

static int px_ftruncate(const struct store_sys *sys, int fd, off_t len)
{
    (void)sys;
    return ftruncate(fd, len);
}

static int px_fstat(const struct store_sys *sys, int fd, struct stat *st)
{
    (void)sys;
    return fstat(fd, st);
}

static int px_renameat(const struct store_sys *sys,
                       int olddirfd,
                       const char *oldname,
                       int newdirfd,
                       const char *newname)
{
    (void)sys;
    return renameat(olddirfd, oldname, newdirfd, newname);
}

static int px_unlinkat(const struct store_sys *sys,
                       int dirfd,
                       const char *name,
                       int flags)
{
    (void)sys;
    return unlinkat(dirfd, name, flags);
}

static int px_mkdir(const struct store_sys *sys, const char *path, mode_t mode)
{
    (void)sys;
    return mkdir(path, mode);
}

/* readdir on a duplicate of @dirfd (closedir closes it), from the start. */
static int px_list(const struct store_sys *sys,
                   int dirfd,
                   int (*each)(void *arg, const char *name),
                   void *arg)
{
    int fd = dup(dirfd);
    struct dirent *e;
    DIR *d;

    (void)sys;
    if (fd < 0) {
        return -1;
    }
    d = fdopendir(fd);
    if (d == NULL) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    rewinddir(d);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (each(arg, e->d_name) != 0) {
            break;
        }
    }
    closedir(d);
    return 0;
}

static int px_sync_file_range(const struct store_sys *sys,
                              int fd,
                              off_t off,
                              off_t len,
                              unsigned flags)
{
    (void)sys;
    return sync_file_range(fd, off, len, flags);
}

static int px_fadvise(const struct store_sys *sys,
                      int fd,
                      off_t off,
                      off_t len,
                      int advice)
{
    (void)sys;
    return posix_fadvise(fd, off, len, advice);
}

const struct store_sys store_sys_posix = {
    .openat = px_openat,
    .close = px_close,
    .pwrite = px_pwrite,
    .pwritev = px_pwritev,
    .pread = px_pread,
    .fdatasync = px_fdatasync,
    .fsync = px_fsync,
    .ftruncate = px_ftruncate,
    .fstat = px_fstat,
    .renameat = px_renameat,
    .unlinkat = px_unlinkat,
    .mkdir = px_mkdir,
    .list = px_list,
    .sync_file_range = px_sync_file_range,
    .fadvise = px_fadvise,
};
