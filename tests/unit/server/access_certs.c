/* access_certs.c: certificates made with the openssl CLI (access_certs.h).
 * One EC key for every certificate, made once per process. */
#include "access_certs.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/pem.h>

static char dir[64];

static void remove_dir(void)
{
    char p[128];

    snprintf(p, sizeof p, "%s/k.pem", dir);
    unlink(p);
    rmdir(dir);
}

static void make_dir(void)
{
    char cmd[256];

    if (dir[0] != '\0') {
        return;
    }
    snprintf(dir, sizeof dir, "/tmp/once-access-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    atexit(remove_dir);
    snprintf(cmd, sizeof cmd,
             "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 "
             "-out %s/k.pem 2>/dev/null",
             dir);
    ck_assert_int_eq(system(cmd), 0);
}

X509 *test_cert(const char *cn, const char *san)
{
    static unsigned seq;
    char cmd[1024], path[128], ext[600];
    X509 *x;
    FILE *f;

    make_dir();
    snprintf(path, sizeof path, "%s/c%u.pem", dir, seq++);
    ext[0] = '\0';
    if (san != NULL) {
        snprintf(ext, sizeof ext, "-addext 'subjectAltName=%s'", san);
    }
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -new -key %s/k.pem -days 1 -subj '/CN=%s' %s "
             "-out %s 2>/dev/null",
             dir, cn != NULL ? cn : "x", ext, path);
    ck_assert_msg(system(cmd) == 0, "openssl failed: %s", cmd);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    unlink(path);
    ck_assert_ptr_nonnull(x);
    return x;
}
