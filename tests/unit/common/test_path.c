/* test_path: DIR/NAME, never cut (src/common/path.c). */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "common/path.h"

Suite *path_suite(void);

START_TEST(joins)
{
    char out[64];

    ck_assert_int_eq(path_join(out, sizeof out, "/var/lib/once", "node-id"), 0);
    ck_assert_str_eq(out, "/var/lib/once/node-id");
    ck_assert_int_eq(path_join(out, sizeof out, "d", "log/meta-a"), 0);
    ck_assert_str_eq(out, "d/log/meta-a");
    /* Taken as given: an empty part or a trailing slash stays. */
    ck_assert_int_eq(path_join(out, sizeof out, "", "x"), 0);
    ck_assert_str_eq(out, "/x");
    ck_assert_int_eq(path_join(out, sizeof out, "d/", "x"), 0);
    ck_assert_str_eq(out, "d//x");
    ck_assert_int_eq(path_join(out, sizeof out, "d", ""), 0);
    ck_assert_str_eq(out, "d/");
}
END_TEST

START_TEST(bounds)
{
    char out[8];

    /* "abc/def" is 7 bytes and the NUL: exactly fits. */
    memset(out, 'x', sizeof out);
    ck_assert_int_eq(path_join(out, sizeof out, "abc", "def"), 0);
    ck_assert_str_eq(out, "abc/def");
    /* One byte more in either part: refused, and nothing cut. */
    memset(out, 'x', sizeof out);
    ck_assert_int_eq(path_join(out, sizeof out, "abcd", "def"), -ENAMETOOLONG);
    ck_assert_str_eq(out, "");
    memset(out, 'x', sizeof out);
    ck_assert_int_eq(path_join(out, sizeof out, "abc", "defg"), -ENAMETOOLONG);
    ck_assert_str_eq(out, "");
    /* Each part alone filling or overflowing the buffer. */
    ck_assert_int_eq(path_join(out, sizeof out, "abcdefg", ""), -ENAMETOOLONG);
    ck_assert_int_eq(path_join(out, sizeof out, "abcdefgh", "x"),
                     -ENAMETOOLONG);
    ck_assert_int_eq(path_join(out, sizeof out, "", "abcdefg"), -ENAMETOOLONG);
    ck_assert_int_eq(path_join(out, sizeof out, "", "abcdef"), 0);
    ck_assert_str_eq(out, "/abcdef");
    ck_assert_int_eq(path_join(out, sizeof out, "abcdef", ""), 0);
    ck_assert_str_eq(out, "abcdef/");
    /* The smallest buffers: the separator and the NUL need two bytes. */
    ck_assert_int_eq(path_join(out, 2, "", ""), 0);
    ck_assert_str_eq(out, "/");
    memset(out, 'x', sizeof out);
    ck_assert_int_eq(path_join(out, 1, "", ""), -ENAMETOOLONG);
    ck_assert_int_eq(out[0], '\0');
    ck_assert_uint_eq((unsigned char)out[1], 'x');
    ck_assert_int_eq(path_join(NULL, 0, "a", "b"), -ENAMETOOLONG);
}
END_TEST

START_TEST(long_parts)
{
    static char dir[5000], out[4096];

    /* A directory near PATH_MAX: the join refuses instead of naming a
     * shorter, other file. */
    memset(dir, 'd', sizeof dir - 1);
    ck_assert_int_eq(path_join(out, sizeof out, dir, "node-id"), -ENAMETOOLONG);
    ck_assert_str_eq(out, "");
    dir[sizeof out - 1 - 8] = '\0'; /* room for "/node-id" and the NUL */
    ck_assert_int_eq(path_join(out, sizeof out, dir, "node-id"), 0);
    ck_assert_uint_eq(strlen(out), sizeof out - 1);
    ck_assert_str_eq(out + strlen(dir), "/node-id");
    dir[sizeof out - 1 - 8] = 'd'; /* one byte over */
    dir[sizeof out - 1 - 7] = '\0';
    ck_assert_int_eq(path_join(out, sizeof out, dir, "node-id"), -ENAMETOOLONG);
}
END_TEST

Suite *path_suite(void)
{
    Suite *s = suite_create("path");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, joins);
    tcase_add_test(tc, bounds);
    tcase_add_test(tc, long_parts);
    suite_add_tcase(s, tc);
    return s;
}
