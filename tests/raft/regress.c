/* tests/raft/regress.c: guard regressions on raft_fixture clusters running
 * the production Raft layer (rio decorator, adapter, pipeline) over the real
 * state machine. Each scenario reproduces one of libraft 0.15's bugs
 * (docs/raft-0.15.md §3) and checks a safety property; with the guard
 * that closes it switched off (test-only switches, raft/guard.h) the
 * property must break, with every guard on it must hold.
 *
 *   regress SCENARIO [--off LIST] [--raw] [--disk-ms N]
 *
 * Exit 0: the scenario ran and found no violation; 1: a violation (printed
 * as "VIOLATION: ..."), including a crash of the scenario (it runs in a
 * forked child, so a segfault inside libraft is reported as "crash: signal
 * N"); 2: usage or setup error (also: the scenario timed out).
 *
 * Scenarios:
 *   figure8     Raft Figure 8 (dissertation fig. 3.7, B1): an entry of an
 *               older term committed by counting replicas, then overwritten.
 *               Guards G1+G2. --disk-ms N slows the first leader's disk;
 *               --window (with --disk-ms 200) adds the partitions under
 *               which G1 alone is not enough and G2 is what closes it.
 *   rollback    B13 false match (G7) and B5 rollback NULL dereference (G6).
 *   stale-reply B13 through the reply to a write that completed after the
 *               term changed (G9): a false match, an acknowledged claim
 *               lost.
 *   install-rollback
 *               B5 after an InstallSnapshot (G6b, off with g6): the
 *               follower must fail-stop (the fatal hook; clean), not crash.
 *   starvation  B3 commit starvation under a command every 5 ms; the guard
 *               is the pipeline (one proposal in flight + batching):
 *               --raw bypasses it with one raft_apply per command.
 *
 * This file is the driver (options, the forked child, the summary) and the
 * helpers the scenarios share; each group of bugs has its own file
 * (regress.h lists them). */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "common/crc32c.h"
#include "fsm/command.h"
#include "fsm_helpers.h"
#include "raft/entry.h"
#include "raft/guard.h"
#include "regress.h"

struct opts O;
struct cluster C;
bool violated;
static char violation_msg[512];

void violation(const char *fmt, ...)
{
    va_list ap;

    if (violated) {
        return; /* keep the first one */
    }
    violated = true;
    va_start(ap, fmt);
    vsnprintf(violation_msg, sizeof violation_msg, fmt, ap);
    va_end(ap);
}

void setup_error(const char *what)
{
    printf("setup error: %s\n", what);
    fflush(stdout);
}

/* The summary line; @extra names the scenario's key numbers. */
int finish(const char *extra)
{
    if (violated) {
        printf("VIOLATION: %s\n", violation_msg);
    }
    printf("regress: scenario=%s off=%s%s result=%s %s\n", O.scenario,
           O.off_list, O.raw ? " mode=raw" : "",
           violated ? "VIOLATION" : "clean", extra);
    fflush(stdout);
    return violated ? EXIT_VIOLATION : EXIT_CLEAN;
}

uint64_t sum_g2(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < C.n; i++) {
        n += C.s[i].rep.rio.stats.g2_dropped;
    }
    return n;
}

uint64_t sum_g7(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < C.n; i++) {
        n += C.s[i].rep.rio.stats.g7_clamped;
    }
    return n;
}

/* Servers that applied different entries at the same index (crcs recorded
 * by the applied hook), including servers that are down now. */
void check_applied(void)
{
    for (unsigned i = 0; i < C.n; i++) {
        for (unsigned j = i + 1; j < C.n; j++) {
            raft_index m = C.s[i].applied_max < C.s[j].applied_max
                               ? C.s[i].applied_max
                               : C.s[j].applied_max;
            for (raft_index k = 1; k <= m; k++) {
                uint32_t a = C.s[i].applied[k], b = C.s[j].applied[k];
                if (a != 0 && b != 0 && a != b) {
                    violation(
                        "S%u and S%u applied different entries at "
                        "index %llu (crc %08x vs %08x)",
                        i + 1, j + 1, (unsigned long long)k, a, b);
                    return;
                }
            }
        }
    }
}

/* --- helpers of several scenarios ----------------------------------------- */

int make_entry(const struct fsm_cmd *cmd,
               uint64_t time_ms,
               raft_term term,
               struct raft_entry *e)
{
    uint8_t *enc = NULL, *batch = NULL;
    size_t enc_len, batch_len;
    const uint8_t *cmds[1];
    int rv;

    rv = command_encode(cmd, &enc, &enc_len);
    if (rv == 0) {
        cmds[0] = enc;
        rv = command_encode_batch(FSM_SCHEMA_VERSION, time_ms, cmds, &enc_len,
                                  1, &batch, &batch_len);
    }
    if (rv == 0) {
        rv = entry_wrap(batch, batch_len, &e->buf);
    }
    free(enc);
    free(batch);
    e->term = term;
    e->type = RAFT_COMMAND;
    e->batch = NULL;
    return rv;
}

void rb_check_match(unsigned l, unsigned j)
{
    struct raft *lr = cl_raft(&C, l), *fr = cl_raft(&C, j);
    raft_index m, k, from;

    if (lr->state != RAFT_LEADER || !C.f.servers[j].alive) {
        return;
    }
    m = lr->leader_state.progress[j].match_index;
    if (m > raft_last_index(fr)) {
        violation(
            "leader S%u counts S%u as matching up to index %llu, "
            "beyond S%u's last index %llu",
            l + 1, j + 1, (unsigned long long)m, j + 1,
            (unsigned long long)raft_last_index(fr));
        return;
    }
    from = lr->log.offset > fr->log.offset ? lr->log.offset : fr->log.offset;
    for (k = from + 1; k <= m; k++) {
        raft_term tl = guard_term_of(lr, k), tf = guard_term_of(fr, k);
        if (tl != 0 && tf != 0 && tl != tf) {
            violation(
                "false match: leader S%u counts S%u as matching up to "
                "index %llu, but S%u's entry %llu is of term %llu, "
                "the leader's of term %llu",
                l + 1, j + 1, (unsigned long long)m, j + 1,
                (unsigned long long)k, (unsigned long long)tf,
                (unsigned long long)tl);
            return;
        }
    }
}

int rb_wait_leader_among(unsigned from, unsigned to, unsigned ms)
{
    raft_time end = raft_fixture_time(&C.f) + ms;

    while (raft_fixture_time(&C.f) < end) {
        for (unsigned i = from; i < to; i++) {
            if (C.f.servers[i].alive &&
                raft_state(cl_raft(&C, i)) == RAFT_LEADER) {
                return (int)i;
            }
        }
        raft_fixture_step(&C.f);
    }
    return -1;
}

/* --- driver ------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: regress SCENARIO [--off LIST] [--raw] [--disk-ms N] "
            "[--window]\n"
            "  SCENARIO    figure8 | rollback | stale-reply | "
            "install-rollback |\n"
            "              starvation\n"
            "  --off LIST  guards to switch off, e.g. g1,g2 (g1 g2 g4 g5 g6 "
            "g7 g8 g9)\n"
            "  --raw       starvation: one raft_apply per command, bypassing "
            "the\n"
            "              pipeline (the guard against B3 is the pipeline)\n"
            "  --disk-ms N figure8: disk latency of the first leader S1\n"
            "  --window    figure8: the schedule where G1 alone is not "
            "enough\n"
            "              (use with --disk-ms 200): S4 cut off from S1, S2 "
            "cut\n"
            "              off right after S1's first heartbeat\n"
            "exit: 0 no violation, 1 violation (or crash), 2 usage/setup "
            "error\n");
}

static int scenario_rc = EXIT_SETUP;

static int run_scenario(void)
{
    if (strcmp(O.scenario, "figure8") == 0) {
        return scenario_figure8();
    }
    if (strcmp(O.scenario, "rollback") == 0) {
        return scenario_rollback();
    }
    if (strcmp(O.scenario, "stale-reply") == 0) {
        return scenario_stale_reply();
    }
    if (strcmp(O.scenario, "install-rollback") == 0) {
        return scenario_install_rollback();
    }
    return scenario_starvation();
}

START_TEST(scenario_test)
{
    scenario_rc = run_scenario();
}
END_TEST

/* cluster.c asserts with Check (even a passing ck_assert reports to the
 * runner), so the scenario runs as a Check test, in this (already forked)
 * process: CK_NOFORK. A failing harness assertion is a setup error. */
static int run_child(void)
{
    Suite *s;
    TCase *tc;
    SRunner *sr;
    int failed;

    guard_test_set_off(O.off);
    alarm(CHILD_TIMEOUT_S);
    /* No TAP/log output from this inner runner (the test environment sets
     * CK_TAP_LOG_FILE_NAME=-, which would print TAP to stdout). */
    unsetenv("CK_TAP_LOG_FILE_NAME");
    unsetenv("CK_LOG_FILE_NAME");
    unsetenv("CK_XML_LOG_FILE_NAME");
    unsetenv("CK_VERBOSITY");
    s = suite_create("regress");
    tc = tcase_create(O.scenario);
    tcase_add_test(tc, scenario_test);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    failed = srunner_ntests_failed(sr);
    if (failed > 0) {
        TestResult **tr = srunner_failures(sr);
        printf("setup error: harness assertion failed: %s:%d: %s\n",
               tr_lfile(tr[0]), tr_lno(tr[0]), tr_msg(tr[0]));
        fflush(stdout);
        free(tr);
        scenario_rc = EXIT_SETUP;
    }
    srunner_free(sr);
    return scenario_rc;
}

int main(int argc, char **argv)
{
    int status, rc;
    pid_t pid;

    O.off_list = "none";
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--off") == 0 && a + 1 < argc) {
            O.off_list = argv[++a];
            if (guard_test_parse(O.off_list, &O.off) != 0) {
                fprintf(stderr, "regress: unknown guard in \"%s\"\n",
                        O.off_list);
                return EXIT_SETUP;
            }
        } else if (strcmp(argv[a], "--raw") == 0) {
            O.raw = true;
        } else if (strcmp(argv[a], "--window") == 0) {
            O.window = true;
        } else if (strcmp(argv[a], "--disk-ms") == 0 && a + 1 < argc) {
            O.disk_ms = (unsigned)strtoul(argv[++a], NULL, 10);
        } else if (strcmp(argv[a], "--help") == 0 ||
                   strcmp(argv[a], "-h") == 0) {
            usage(stdout);
            return EXIT_CLEAN;
        } else if (argv[a][0] != '-' && O.scenario == NULL) {
            O.scenario = argv[a];
        } else {
            usage(stderr);
            return EXIT_SETUP;
        }
    }
    if (O.scenario == NULL || (strcmp(O.scenario, "figure8") != 0 &&
                               strcmp(O.scenario, "rollback") != 0 &&
                               strcmp(O.scenario, "stale-reply") != 0 &&
                               strcmp(O.scenario, "install-rollback") != 0 &&
                               strcmp(O.scenario, "starvation") != 0)) {
        usage(stderr);
        return EXIT_SETUP;
    }
    if (O.off_list[0] == '\0') {
        O.off_list = "none";
    }

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        perror("regress: fork");
        return EXIT_SETUP;
    }
    if (pid == 0) {
        /* exit(), not _exit(): the sanitizers' leak check runs at exit. */
        exit(run_child());
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("regress: waitpid");
            return EXIT_SETUP;
        }
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (sig == SIGALRM) {
            printf("regress: scenario=%s off=%s result=TIMEOUT (over %d s)\n",
                   O.scenario, O.off_list, CHILD_TIMEOUT_S);
            return EXIT_SETUP;
        }
        /* Under ASan a SIGSEGV is reported by its handler, which aborts
         * (abort_on_error=1): signal 6 then stands for the segfault. */
        printf("VIOLATION: crash: signal %d (%s)\n", sig, strsignal(sig));
        printf("regress: scenario=%s off=%s%s result=VIOLATION crash=%d\n",
               O.scenario, O.off_list, O.raw ? " mode=raw" : "", sig);
        return EXIT_VIOLATION;
    }
    rc = WEXITSTATUS(status);
    if (rc != EXIT_CLEAN && rc != EXIT_VIOLATION) {
        printf("regress: scenario=%s off=%s result=ERROR exit=%d\n", O.scenario,
               O.off_list, rc);
        return EXIT_SETUP;
    }
    return rc;
}
