/* tests/unit/raft/test_identity.c: raft/identity.h on real temporary dirs. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raft/identity.h"

Suite *identity_suite(void);

static char dir[PATH_MAX];

static void mkdir_tmp(char *out)
{
    const char *base = getenv("TMPDIR");

    snprintf(out, PATH_MAX, "%s/once-identity-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(out));
}

static void rm_tmp(const char *d)
{
    DIR *dp = opendir(d);
    struct dirent *e;
    char p[PATH_MAX + 300];

    if (dp == NULL) {
        return;
    }
    while ((e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        unlink(p);
    }
    closedir(dp);
    rmdir(d);
}

static void setup(void)
{
    mkdir_tmp(dir);
}

static void teardown(void)
{
    rm_tmp(dir);
}

static void put_file(const char *d,
                     const char *name,
                     const void *buf,
                     size_t len)
{
    char p[PATH_MAX + 64];
    int fd;

    snprintf(p, sizeof p, "%s/%s", d, name);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

static size_t get_file(const char *d, const char *name, char *buf, size_t max)
{
    char p[PATH_MAX + 64];
    ssize_t n;
    int fd;

    snprintf(p, sizeof p, "%s/%s", d, name);
    fd = open(p, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    n = read(fd, buf, max);
    ck_assert_int_ge(n, 0);
    close(fd);
    return (size_t)n;
}

/* Only node-id (and no temp file) is left in the directory. */
static unsigned count_entries(const char *d)
{
    DIR *dp = opendir(d);
    struct dirent *e;
    unsigned n = 0;

    ck_assert_ptr_nonnull(dp);
    while ((e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            n++;
        }
    }
    closedir(dp);
    return n;
}

START_TEST(test_fresh_create)
{
    char errmsg[ERR_MSG_SIZE];
    char buf[64];
    char hex[IDENTITY_HEX_LEN + 1];
    uint64_t id = 0;
    size_t n;

    ck_assert_int_eq(identity_open(dir, &id, errmsg), 0);
    ck_assert(id != 0);
    n = get_file(dir, "node-id", buf, sizeof buf);
    ck_assert_uint_eq(n, 17);
    ck_assert_int_eq(buf[16], '\n');
    identity_format(id, hex);
    ck_assert_int_eq(memcmp(buf, hex, 16), 0);
    ck_assert_uint_eq(count_entries(dir), 1);
}
END_TEST

START_TEST(test_reopen_same_id)
{
    char errmsg[ERR_MSG_SIZE];
    uint64_t a = 0, b = 0, c = 0;

    ck_assert_int_eq(identity_open(dir, &a, errmsg), 0);
    ck_assert_int_eq(identity_open(dir, &b, errmsg), 0);
    ck_assert_int_eq(identity_open(dir, &c, errmsg), 0);
    ck_assert(a != 0);
    ck_assert(a == b && b == c);
}
END_TEST

START_TEST(test_existing_file_read)
{
    char errmsg[ERR_MSG_SIZE];
    uint64_t id = 0;

    put_file(dir, "node-id", "00000000deadbeef\n", 17);
    ck_assert_int_eq(identity_open(dir, &id, errmsg), 0);
    ck_assert(id == 0xdeadbeefull);
}
END_TEST

static const char *const corrupt_cases[] = {
    "",                     /* empty */
    "0123456789abcdef",     /* no newline */
    "0123456789abcdef\n\n", /* trailing byte */
    "0123456789ABCDEF\n",   /* upper case */
    "0123456789abcdeg\n",   /* not hex */
    "0x23456789abcdef\n",   /* prefix */
    " 123456789abcdef\n",   /* space */
    "0123456789abcde\n",    /* 15 digits */
    "0000000000000000\n",   /* zero id */
    "ffffffffffffffff\n",   /* reserved: the refresh spare's id */
    "0123456789abcdef\r",   /* wrong terminator */
    "0123456789abcdef0\n",  /* 17 digits */
};

START_TEST(test_corrupt_refused)
{
    const char *text = corrupt_cases[_i];
    char errmsg[ERR_MSG_SIZE];
    uint64_t id = 0x1234;

    put_file(dir, "node-id", text, strlen(text));
    errmsg[0] = '\0';
    ck_assert_int_eq(identity_open(dir, &id, errmsg), IDENTITY_E_CORRUPT);
    ck_assert_msg(strstr(errmsg, "node-id") != NULL,
                  "message does not name the file: %s", errmsg);
    ck_assert(id == 0x1234); /* untouched */
    /* Refused, not replaced: the bad file is still there. */
    ck_assert_int_eq(identity_open(dir, &id, errmsg), IDENTITY_E_CORRUPT);
}
END_TEST

START_TEST(test_corrupt_nul_byte)
{
    char errmsg[ERR_MSG_SIZE];
    uint64_t id = 0;

    put_file(dir, "node-id", "0123456789abcd\0f\n", 17);
    ck_assert_int_eq(identity_open(dir, &id, errmsg), IDENTITY_E_CORRUPT);
}
END_TEST

START_TEST(test_tombstone_refused)
{
    char errmsg[ERR_MSG_SIZE];
    char buf[600];
    char hex[IDENTITY_HEX_LEN + 1];
    uint64_t id = 0, id2 = 0;
    size_t n;

    ck_assert_int_eq(identity_open(dir, &id, errmsg), 0);
    ck_assert_int_eq(identity_tombstone(dir, "removed by\ntest", errmsg), 0);
    errmsg[0] = '\0';
    ck_assert_int_eq(identity_open(dir, &id2, errmsg), IDENTITY_E_TOMBSTONE);
    ck_assert(id2 == 0);
    ck_assert_msg(
        strstr(errmsg, "removed") != NULL && strstr(errmsg, "fresh") != NULL,
        "message: %s", errmsg);
    n = get_file(dir, "tombstone", buf, sizeof buf - 1);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, identity_format(id, hex)));
    ck_assert_ptr_nonnull(strstr(buf, "reason=removed by test\n"));
    /* Idempotent. */
    ck_assert_int_eq(identity_tombstone(dir, NULL, errmsg), 0);
    ck_assert_int_eq(identity_open(dir, &id2, errmsg), IDENTITY_E_TOMBSTONE);
    ck_assert_uint_eq(count_entries(dir), 2);
}
END_TEST

START_TEST(test_tombstone_without_id)
{
    char errmsg[ERR_MSG_SIZE];
    uint64_t id = 0;

    ck_assert_int_eq(identity_tombstone(dir, "x", errmsg), 0);
    ck_assert_int_eq(identity_open(dir, &id, errmsg), IDENTITY_E_TOMBSTONE);
    /* No node-id was created by the refused open. */
    ck_assert_uint_eq(count_entries(dir), 1);
}
END_TEST

START_TEST(test_ids_differ)
{
    char errmsg[ERR_MSG_SIZE];
    char other[PATH_MAX];
    uint64_t a = 0, b = 0;

    mkdir_tmp(other);
    ck_assert_int_eq(identity_open(dir, &a, errmsg), 0);
    ck_assert_int_eq(identity_open(other, &b, errmsg), 0);
    rm_tmp(other);
    ck_assert(a != 0 && b != 0);
    ck_assert(a != b);
}
END_TEST

START_TEST(test_missing_dir)
{
    char errmsg[ERR_MSG_SIZE];
    char p[PATH_MAX + 16];
    uint64_t id = 0;

    snprintf(p, sizeof p, "%s/nope", dir);
    ck_assert_int_eq(identity_open(p, &id, errmsg), IDENTITY_E_IO);
    ck_assert_int_eq(identity_open("", &id, errmsg), IDENTITY_E_INVALID);
    ck_assert_int_eq(identity_open(NULL, &id, errmsg), IDENTITY_E_INVALID);
}
END_TEST

START_TEST(test_format_parse)
{
    char hex[IDENTITY_HEX_LEN + 1];
    uint64_t v = 0;

    ck_assert_str_eq(identity_format(0xabcull, hex), "0000000000000abc");
    ck_assert_str_eq(identity_format(UINT64_MAX, hex), "ffffffffffffffff");
    ck_assert_int_eq(identity_parse("ffffffffffffffff", &v), 0);
    ck_assert(v == UINT64_MAX);
    ck_assert_int_eq(identity_parse("fffffffffffffff", &v), IDENTITY_E_INVALID);
    ck_assert_int_eq(identity_parse("ffffffffffffffff0", &v),
                     IDENTITY_E_INVALID);
    ck_assert_int_eq(identity_parse("FFFFFFFFFFFFFFFF", &v),
                     IDENTITY_E_INVALID);
}
END_TEST

Suite *identity_suite(void)
{
    Suite *s = suite_create("identity");
    TCase *tc = tcase_create("files");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fresh_create);
    tcase_add_test(tc, test_reopen_same_id);
    tcase_add_test(tc, test_existing_file_read);
    tcase_add_loop_test(tc, test_corrupt_refused, 0,
                        (int)(sizeof corrupt_cases / sizeof corrupt_cases[0]));
    tcase_add_test(tc, test_corrupt_nul_byte);
    tcase_add_test(tc, test_tombstone_refused);
    tcase_add_test(tc, test_tombstone_without_id);
    tcase_add_test(tc, test_ids_differ);
    tcase_add_test(tc, test_missing_dir);
    tcase_add_test(tc, test_format_parse);
    suite_add_tcase(s, tc);
    return s;
}
