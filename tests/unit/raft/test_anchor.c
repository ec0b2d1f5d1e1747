/* tests/unit/raft/test_anchor.c: raft/anchor.h, the log-time anchor file. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raft/anchor.h"

Suite *anchor_suite(void);

#define BOOT  "0f3c2a4e-1b2d-4c5e-8f90-a1b2c3d4e5f6"
#define OTHER "9a8b7c6d-1b2d-4c5e-8f90-a1b2c3d4e5f6"

static char dir[PATH_MAX];

static void setup(void)
{
    const char *base = getenv("TMPDIR");

    snprintf(dir, sizeof dir, "%s/once-anchor-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char p[PATH_MAX + 32];

    snprintf(p, sizeof p, "%s/" ANCHOR_FILE, dir);
    unlink(p);
    rmdir(dir);
}

static void put(const char *text)
{
    char p[PATH_MAX + 32];
    FILE *f;

    snprintf(p, sizeof p, "%s/" ANCHOR_FILE, dir);
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* What is written is what the same boot loads; no file is no seed. */
START_TEST(round_trip)
{
    struct anchor a = {BOOT, 1796181439038ull, 123456}, b;
    char why[256];

    ck_assert_int_eq(anchor_load(dir, BOOT, 200000, &b, why, sizeof why), 0);
    ck_assert_int_eq(anchor_write(dir, &a, why, sizeof why), 0);
    ck_assert_int_eq(anchor_load(dir, BOOT, 200000, &b, why, sizeof why), 1);
    ck_assert_str_eq(b.boot_id, BOOT);
    ck_assert_uint_eq(b.log_ms, a.log_ms);
    ck_assert_uint_eq(b.mono_ms, a.mono_ms);
    /* rewritten in place */
    a.log_ms++;
    ck_assert_int_eq(anchor_write(dir, &a, why, sizeof why), 0);
    ck_assert_int_eq(anchor_load(dir, BOOT, 200000, &b, why, sizeof why), 1);
    ck_assert_uint_eq(b.log_ms, a.log_ms);
}
END_TEST

/* A pair from another boot, or with a monotonic time ahead of now, means
 * nothing in this boot's clock: refused, with the reason. */
START_TEST(other_boot_or_future_refused)
{
    struct anchor a = {BOOT, 5000, 123456}, b;
    char why[256];

    ck_assert_int_eq(anchor_write(dir, &a, why, sizeof why), 0);
    ck_assert_int_eq(anchor_load(dir, OTHER, 200000, &b, why, sizeof why),
                     -ESTALE);
    ck_assert_ptr_nonnull(strstr(why, "boot"));
    ck_assert_int_eq(anchor_load(dir, BOOT, 123455, &b, why, sizeof why),
                     -ERANGE);
    ck_assert_ptr_nonnull(strstr(why, "future"));
    ck_assert_int_eq(anchor_load(dir, BOOT, 123456, &b, why, sizeof why), 1);
}
END_TEST

/* Every malformed file is refused whole. */
START_TEST(malformed_refused)
{
    static const char *bad[] = {
        "",
        "once-ltime-anchor 2 " BOOT " 1 2\n",
        "once-ltime-anchor 1 " BOOT " 1 2", /* no newline */
        "once-ltime-anchor 1 " BOOT " 1 2\nx",
        "once-ltime-anchor 1 " BOOT " -1 2\n",
        "once-ltime-anchor 1 " BOOT " 1 18446744073709551616\n",
        "once-ltime-anchor 1 " BOOT "  1 2\n",
        "once-ltime-anchor 1 0F3C2A4E-1B2D-4C5E-8F90-A1B2C3D4E5F6 1 2\n",
        "once-ltime-anchor 1 0f3c2a4e1b2d-4c5e-8f90-a1b2c3d4e5f6aa 1 2\n",
        "once-ltime-anchor 1 " BOOT " 1\n",
        "once-ltime-anchor 1 " BOOT " 1 2 3\n",
        "once-ltime-anchor 1 " BOOT " 01 2\n", /* one spelling per pair */
    };
    /* fuzz_anchor found it: a NUL inside a number ended its C string */
    static const char nul[] = "once-ltime-anchor 1 " BOOT " 12\0\0B3 4\n";
    struct anchor b;
    char why[256];

    ck_assert_int_eq(anchor_parse(nul, sizeof nul - 1, &b, why, sizeof why),
                     -EBADMSG);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put(bad[i]);
        ck_assert_msg(anchor_load(dir, BOOT, 200000, &b, why, sizeof why) < 0,
                      "accepted: %s", bad[i]);
        ck_assert_msg(anchor_parse(bad[i], strlen(bad[i]), &b, why,
                                   sizeof why) == -EBADMSG,
                      "parsed: %s", bad[i]);
    }
}
END_TEST

/* The kernel's boot id parses; a file that is not a UUID does not. */
START_TEST(boot_id)
{
    char id[ANCHOR_BOOT_ID_LEN + 1], why[256], p[PATH_MAX + 32];
    FILE *f;

    if (access("/proc/sys/kernel/random/boot_id", R_OK) == 0) {
        ck_assert_int_eq(anchor_boot_id(NULL, id, why, sizeof why), 0);
        ck_assert_uint_eq(strlen(id), ANCHOR_BOOT_ID_LEN);
    }
    snprintf(p, sizeof p, "%s/" ANCHOR_FILE, dir);
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(BOOT "\n", f);
    fclose(f);
    ck_assert_int_eq(anchor_boot_id(p, id, why, sizeof why), 0);
    ck_assert_str_eq(id, BOOT);
    put("not-a-uuid\n");
    ck_assert_int_eq(anchor_boot_id(p, id, why, sizeof why), -EBADMSG);
}
END_TEST

Suite *anchor_suite(void)
{
    Suite *s = suite_create("anchor");
    TCase *tc = tcase_create("file");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, other_boot_or_future_refused);
    tcase_add_test(tc, malformed_refused);
    tcase_add_test(tc, boot_id);
    suite_add_tcase(s, tc);
    return s;
}
