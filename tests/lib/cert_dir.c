/* tests/lib/cert_dir.c: see cert_dir.h. */
#include "cert_dir.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

void cert_dir_open(const char *tag)
{
    snprintf(dir, sizeof dir, "/tmp/once-test-%s.XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

const char *cert_dir(void)
{
    return dir;
}

const char *cert_dir_path(const char *name)
{
    static char buf[8][128];
    static unsigned k;
    char *p = buf[k++ % 8];

    snprintf(p, 128, "%s/%s", dir, name);
    return p;
}

void cert_dir_make(const char *ca, const char *args_fmt, ...)
{
    /* make check sets top_srcdir; run by hand from build/debug, the
     * source tree is two levels up. */
    const char *top = getenv("top_srcdir");
    char args[256], cmd[512];
    va_list ap;

    if (top == NULL) {
        top = access("scripts/make-certs.sh", R_OK) == 0 ? "." : "../..";
    }
    va_start(ap, args_fmt);
    vsnprintf(args, sizeof args, args_fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "CA=%s sh %s/scripts/make-certs.sh %s >/dev/null",
             ca, top, args);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

void cert_dir_close(void)
{
    char cmd[128];

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)system(cmd);
}
