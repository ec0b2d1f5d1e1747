/* common/assert: ONCE_ASSERT aborts with where and why, in every build. */
#ifndef NDEBUG
#define NDEBUG 1 /* as a release build: the checks must stay */
#endif

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/assert.h"

Suite *assert_suite(void);

/* The child: stderr into the pipe, the line of the assertion it is about to
 * trip (so the parent knows what to expect), then a false assertion. */
static void trip(int fd, int formatted)
{
    int limit = 4;
    int used = 5;

    dup2(fd, STDERR_FILENO);
    if (formatted) {
        dprintf(fd, "%d\n", __LINE__ + 1);
        ONCE_ASSERTF(used <= limit, "slot %d of %d", used, limit);
    } else {
        dprintf(fd, "%d\n", __LINE__ + 1);
        ONCE_ASSERT(used <= limit, "one proposal in flight");
    }
    _exit(0); /* not reached when the assertion works */
}

/* Runs trip() in a child, checks it died of SIGABRT; returns what it wrote
 * after the line number, and "test_assert.c:LINE: trip: " in where. */
static void run_child(int formatted,
                      char *out,
                      size_t cap,
                      char *where,
                      size_t where_cap)
{
    int p[2];
    int status;
    ssize_t n;
    size_t got = 0;
    pid_t pid;
    int line;

    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        trip(p[1], formatted);
    }
    close(p[1]);
    while (got + 1 < cap && (n = read(p[0], out + got, cap - 1 - got)) > 0) {
        got += (size_t)n;
    }
    out[got] = '\0';
    close(p[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status), "child exited instead of aborting");
    ck_assert_int_eq(WTERMSIG(status), SIGABRT);
    ck_assert_int_eq(sscanf(out, "%d", &line), 1);
    snprintf(where, where_cap, "test_assert.c:%d: trip: ", line);
}

START_TEST(false_assertion_aborts_with_location)
{
    char out[1024];
    char where[64];

    run_child(0, out, sizeof out, where, sizeof where);
    ck_assert_msg(strstr(out, where) != NULL, "no location in: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "`used <= limit'"));
    ck_assert_ptr_nonnull(strstr(out, "one proposal in flight"));
}
END_TEST

START_TEST(formatted_message_is_printed)
{
    char out[1024];
    char where[64];

    run_child(1, out, sizeof out, where, sizeof where);
    ck_assert_msg(strstr(out, where) != NULL, "no location in: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "slot 5 of 4"));
}
END_TEST

START_TEST(true_assertion_is_silent_and_evaluates_once)
{
    int evaluated = 0;
    int p[2];
    int saved;
    char buf[16];
    ssize_t n;

    /* Capture stderr in the test process itself: nothing may be written. */
    ck_assert_int_eq(pipe(p), 0);
    saved = dup(STDERR_FILENO);
    dup2(p[1], STDERR_FILENO);
    ONCE_ASSERT(++evaluated == 1, "evaluated once");
    ONCE_ASSERTF(evaluated == 1, "evaluated %d times", evaluated);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    n = read(p[0], buf, sizeof buf);
    close(p[0]);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(evaluated, 1);
}
END_TEST

Suite *assert_suite(void)
{
    Suite *s = suite_create("assert");
    TCase *tc = tcase_create("assert");

    tcase_add_test(tc, false_assertion_aborts_with_location);
    tcase_add_test(tc, formatted_message_is_printed);
    tcase_add_test(tc, true_assertion_is_silent_and_evaluates_once);
    suite_add_tcase(s, tc);
    return s;
}
