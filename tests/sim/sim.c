/* tests/sim/sim.c: the whole-node deterministic simulator (sim.h lists the
 * parts; tests/sim/README.md says what is modelled and what is not).
 *
 *   sim [--seeds N] [--first S] [--sim-ms MS] [--mutation NAME]
 *       [--history DIR] [--commit TEXT] [--no-fork] [--stop] [--trace]
 *       [--no-quick-checks] [--no-disk-faults] [--no-crashes] [--torn-any]
 *       [--power-loss PERCENT] [--no-slow-disks]
 *       [-v]
 *
 * Each seed is one run in a forked child: 3 or 5 nodes (the real state
 * machine and the real guarded Raft layer over raft_fixture), faults and a
 * client workload for --sim-ms of simulated time, then heal, probes and
 * the final checks. A failed run prints its seed, the commit and the line
 * that replays it; every run prints (with -v or --trace) its trace digest,
 * a hash over every state digest and answer it saw, so two runs of one
 * seed can be compared. --history DIR writes DIR/SEED.edn, the client
 * history that scripts/sim hands to jepsen/local/check. */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "raft/guard.h"
#include "sim.h"

#ifndef SIM_COMMIT
#define SIM_COMMIT "unknown"
#endif

enum sim_mutation once_sim_mutation; /* common/sim_mutation.h */

/* --- PRNG: splitmix64, the only source of choices ------------------------ */

static uint64_t rng_state;

uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

unsigned rnd_below(unsigned n)
{
    return n == 0 ? 0 : (unsigned)(rnd() % n);
}

unsigned rnd_range(unsigned lo, unsigned hi) /* inclusive */
{
    return lo + rnd_below(hi - lo + 1);
}

bool chance(unsigned percent)
{
    return rnd_below(100) < percent;
}

/* --- one run's state ----------------------------------------------------- */

struct cluster C;
uint64_t cur_seed;
struct sim_stats *st;
bool verbose, failed;
bool quick_checks = true;
bool disk_faults = true;
bool crash_faults = true;
bool torn_any;
unsigned power_loss_percent = 15;
bool slow_disks = true;
struct sop *ops;
size_t n_ops;
uint64_t next_rid;
bool removed[CL_MAX];
raft_id doomed;
struct sim_pair pairs[SIM_PAIRS_MAX];
unsigned n_pairs;
unsigned n_grown;
FILE *edn;
const char *const key_names[SIM_N_KEYS] = {"n0", "n1", "n2", "n3", "i0", "i1",
                                           "i2", "i3", "i4", "i5", "i6", "i7"};
static const char *commit_text = SIM_COMMIT;
static const char *mutation_name = "none";

void vlog(const char *fmt, ...)
{
    va_list ap;

    if (!verbose) {
        return;
    }
    va_start(ap, fmt);
    fprintf(stderr, "[%llu] ", (unsigned long long)raft_fixture_time(&C.f));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void sim_fail(const char *fmt, ...)
{
    va_list ap;

    if (failed) {
        return; /* the first violation is the one to read */
    }
    failed = true;
    fprintf(stderr, "FAIL seed %llu (commit %s, mutation %s) at t=%llu: ",
            (unsigned long long)cur_seed, commit_text, mutation_name,
            (unsigned long long)raft_fixture_time(&C.f));
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* FNV-1a style mix of 64-bit words: the replay proof's chain. */
void trace_mix(uint64_t v)
{
    for (int k = 0; k < 8; k++) {
        st->trace ^= (v >> (8 * k)) & 0xff;
        st->trace *= 0x100000001b3ull;
    }
}

/* --- one run ------------------------------------------------------------- */

static unsigned run_sim_ms = 30000;
static const char *history_dir;

static int sim_run(uint64_t seed)
{
    unsigned voters;
    uint64_t t_end, next_client, next_net, next_clock, next_pause, next_member,
        next_disk, next_lat, next_crash, t0;
    bool ok;
    char path[4096];

    cur_seed = seed;
    rng_state = seed;
    failed = false;
    n_ops = 0;
    next_rid = 1000;
    n_grown = 0;
    n_pairs = 0;
    doomed = 0;
    memset(removed, 0, sizeof removed);
    sim_world_reset();
    sim_client_reset();
    st->trace = 0xcbf29ce484222325ull;
    ops = calloc(SIM_OPS_MAX, sizeof *ops);
    if (ops == NULL) {
        return 2;
    }
    edn = NULL;
    if (history_dir != NULL) {
        snprintf(path, sizeof path, "%s/%llu.edn", history_dir,
                 (unsigned long long)seed);
        edn = fopen(path, "w");
        if (edn == NULL) {
            perror(path);
            return 2;
        }
    }

    voters = chance(50) ? 3 : 5;
    /* Most runs snapshot often, so InstallSnapshot and restores run under
     * faults (the forget-attempts mutation lives there). */
    if (chance(75)) {
        /* one draw per statement: argument order is unspecified */
        unsigned threshold = rnd_range(16, 64);
        unsigned trailing = rnd_range(4, 16);

        cl_set_snapshot(&C, threshold, trailing);
    } else {
        cl_set_snapshot(&C, 1024, 2048);
    }
    C.quiet = !verbose;
    sim_world_backend();
    cl_init(&C, voters, voters);
    check_init();
    for (unsigned i = 0; i < C.n; i++) {
        randomize_server(i);
        C.s[i].wall_offset_ms = (int64_t)rnd_range(0, 400) - 200;
    }
    edn_header();
    vlog("seed %llu: %u voters", (unsigned long long)seed, voters);

    t0 = raft_fixture_time(&C.f);
    t_end = t0 + run_sim_ms;
    next_client = t0 + rnd_range(5, 50);
    next_net = t0 + rnd_range(500, 3000);
    next_clock = t0 + rnd_range(1000, 5000);
    next_pause = t0 + rnd_range(1000, 6000);
    next_member = t0 + rnd_range(2000, 8000);
    next_disk = t0 + rnd_range(3000, 15000);
    next_lat = t0 + rnd_range(2000, 8000);
    next_crash = t0 + rnd_range(2000, 9000);

    while (raft_fixture_time(&C.f) < t_end && !failed) {
        uint64_t now = raft_fixture_time(&C.f);

        if (now >= next_client) {
            client_event();
            if (chance(25)) { /* contention inside one batch */
                client_event();
            }
            next_client = now + rnd_range(2, 60);
        }
        followup_events();
        if (now >= next_net) {
            net_event();
            next_net = now + rnd_range(300, 3000);
        }
        if (now >= next_clock) {
            clock_event();
            next_clock = now + rnd_range(1000, 6000);
        }
        if (now >= next_pause) {
            pause_event();
            next_pause = now + rnd_range(800, 6000);
        }
        if (now >= next_member) {
            member_event();
            next_member = now + rnd_range(2000, 9000);
        }
        if (now >= next_disk) {
            disk_event();
            next_disk = now + rnd_range(5000, 20000);
        }
        if (now >= next_crash) {
            crash_event();
            next_crash = now + rnd_range(2000, 9000);
        }
        if (now >= next_lat) {
            unsigned i = rnd_below(C.n);
            if (!removed[i]) {
                randomize_server(i);
            }
            next_lat = now + rnd_range(2000, 8000);
        }
        do_step();
    }
    ok = !failed && final_phase();
    st->sim_ms = raft_fixture_time(&C.f) - t0;
    edn_footer();
    if (edn != NULL) {
        fclose(edn);
        edn = NULL;
    }
    for (unsigned i = 0; i < C.n; i++) {
        st->snapshots += C.s[i].rep.stats.snapshots_taken;
        st->installs += C.s[i].rep.stats.snapshots_restored;
    }
    check_free();
    cl_close(&C);
    sim_world_free();
    free(ops);
    ops = NULL;
    return ok ? 0 : 1;
}

/* --- Check plumbing: the harness asserts with ck_assert, which needs a
 * runner; each run is a one-test suite in CK_NOFORK mode (we fork). ----- */

static uint64_t ck_seed;
static int ck_rc = 3;

START_TEST(one_run)
{
    ck_rc = sim_run(ck_seed);
}
END_TEST

static int run_checked(uint64_t seed)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("run");
    SRunner *sr;
    int nf;

    ck_seed = seed;
    ck_rc = 3;
    tcase_add_test(tc, one_run);
    tcase_set_timeout(tc, 0);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    nf = srunner_ntests_failed(sr);
    if (nf > 0) {
        TestResult **tr = srunner_failures(sr);
        for (int k = 0; k < nf; k++) {
            fprintf(stderr,
                    "FAIL seed %llu (commit %s, mutation %s): harness "
                    "assertion %s:%d: %s\n",
                    (unsigned long long)seed, commit_text, mutation_name,
                    tr_lfile(tr[k]), tr_lno(tr[k]), tr_msg(tr[k]));
        }
        free(tr);
        if (ck_rc == 0) {
            ck_rc = 3;
        }
    }
    srunner_free(sr);
    return ck_rc;
}

/* --- main ------------------------------------------------------------------
 */

static const struct
{
    const char *name;
    enum sim_mutation m;
    unsigned guards_off; /* raft/guard.h's test switches */
} mutations[] = {
    {"none", SIM_MUT_NONE, 0},
    {"expire-early", SIM_MUT_EXPIRE_EARLY, 0},
    {"forget-attempts", SIM_MUT_FORGET_ATTEMPTS, 0},
    {"stale-owner", SIM_MUT_STALE_OWNER, 0},
    {"ltime-no-clamp", SIM_MUT_LTIME_NO_CLAMP, 0},
    {"ack-before-fsync", SIM_MUT_ACK_BEFORE_FSYNC, 0},
    {"store-ack-early", SIM_MUT_STORE_ACK_EARLY, 0},
    {"skip-g1", SIM_MUT_NONE, GUARD_G1},
    {"skip-g2", SIM_MUT_NONE, GUARD_G2},
    {"skip-g4", SIM_MUT_NONE, GUARD_G4},
    {"skip-g5", SIM_MUT_NONE, GUARD_G5},
    {"skip-g6", SIM_MUT_NONE, GUARD_G6},
    {"skip-g7", SIM_MUT_NONE, GUARD_G7},
    {"skip-g9", SIM_MUT_NONE, GUARD_G9},
    {"skip-g10", SIM_MUT_NONE, GUARD_G10},
    {"skip-g11", SIM_MUT_NONE, GUARD_G11},
    {"skip-g12", SIM_MUT_NONE, GUARD_G12},
};

static void usage(void)
{
    fprintf(stderr,
            "usage: sim [--seeds N] [--first S] [--sim-ms MS] [--mutation "
            "NAME] [--history DIR] [--commit TEXT] [--no-fork] [--stop] "
            "[--no-quick-checks] [--no-disk-faults] [--no-crashes] "
            "[--torn-any] [--power-loss PERCENT] [--no-slow-disks] "
            "[--trace] "
            "[-v]\nmutations:");
    for (size_t k = 0; k < sizeof mutations / sizeof mutations[0]; k++) {
        fprintf(stderr, " %s", mutations[k].name);
    }
    fputc('\n', stderr);
    exit(2);
}

static void add_stats(struct sim_stats *t, const struct sim_stats *s)
{
    const uint64_t *a = &s->ops;
    uint64_t *b = &t->ops;

    /* every field up to sim_ms is a counter */
    for (size_t k = 0; &a[k] <= &s->sim_ms; k++) {
        b[k] += a[k];
    }
}

/* The flags a failed seed's replay line needs besides the mutation. */
static const char *replay_flags(void)
{
    static char buf[128];

    snprintf(
        buf, sizeof buf, "%s%s%s%s", !disk_faults ? " --no-disk-faults" : "",
        !crash_faults ? " --no-crashes" : "", torn_any ? " --torn-any" : "",
        !slow_disks ? " --no-slow-disks" : "");
    if (power_loss_percent != 15) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, " --power-loss %u",
                 power_loss_percent);
    }
    return buf;
}

static double secs(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) +
           (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

int main(int argc, char **argv)
{
    unsigned long long n_seeds = 10, first = 1, failures = 0;
    bool do_fork = true, trace = false, stop = false;
    struct timespec t0, t1, tp;
    struct sim_stats *shared, total;
    double wall;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            n_seeds = strtoull(argv[++i], NULL, 0);
        } else if ((strcmp(argv[i], "--first") == 0 ||
                    strcmp(argv[i], "--seed") == 0) &&
                   i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 0);
            if (strcmp(argv[i - 1], "--seed") == 0) {
                n_seeds = 1;
            }
        } else if (strcmp(argv[i], "--sim-ms") == 0 && i + 1 < argc) {
            run_sim_ms = (unsigned)strtoul(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--mutation") == 0 && i + 1 < argc) {
            size_t k, n = sizeof mutations / sizeof mutations[0];
            const char *name = argv[++i];

            for (k = 0; k < n && strcmp(mutations[k].name, name) != 0; k++) {
            }
            if (k == n) {
                fprintf(stderr, "sim: no mutation named %s\n", name);
                usage();
            }
            mutation_name = mutations[k].name;
            once_sim_mutation = mutations[k].m;
            guard_test_set_off(mutations[k].guards_off);
        } else if (strcmp(argv[i], "--history") == 0 && i + 1 < argc) {
            history_dir = argv[++i];
        } else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc) {
            commit_text = argv[++i];
        } else if (strcmp(argv[i], "--no-fork") == 0) {
            do_fork = false;
        } else if (strcmp(argv[i], "--disk-faults") == 0) {
            disk_faults = true; /* the default now; kept for old lines */
        } else if (strcmp(argv[i], "--no-disk-faults") == 0) {
            disk_faults = false;
        } else if (strcmp(argv[i], "--no-crashes") == 0) {
            crash_faults = false;
        } else if (strcmp(argv[i], "--power-loss") == 0 && i + 1 < argc) {
            power_loss_percent = (unsigned)strtoul(argv[++i], NULL, 10);
            if (power_loss_percent > 100) {
                usage();
            }
        } else if (strcmp(argv[i], "--no-slow-disks") == 0) {
            slow_disks = false;
        } else if (strcmp(argv[i], "--torn-any") == 0) {
            torn_any = true; /* README "Found": may stall for good */
        } else if (strcmp(argv[i], "--no-quick-checks") == 0) {
            quick_checks = false; /* leave C1 and C2 to the model */
        } else if (strcmp(argv[i], "--stop") == 0) {
            stop = true; /* at the first failed seed (mutation checks) */
        } else if (strcmp(argv[i], "--trace") == 0) {
            trace = true;
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = true;
            trace = true;
        } else {
            usage();
        }
    }
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memset(&total, 0, sizeof total);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tp = t0;
    for (unsigned long long k = 0; k < n_seeds; k++) {
        uint64_t seed = first + k;
        int rc;

        memset(shared, 0, sizeof *shared);
        st = shared;
        if (do_fork) {
            pid_t pid;
            int wst;

            fflush(stdout);
            fflush(stderr);
            pid = fork();
            if (pid < 0) {
                perror("fork");
                return 2;
            }
            if (pid == 0) {
                exit(run_checked(seed));
            }
            while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
            }
            rc = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
        } else {
            rc = run_checked(seed);
        }
        add_stats(&total, shared);
        if (trace) {
            printf("seed %llu trace %016llx ops %llu sim_ms %llu\n",
                   (unsigned long long)seed, (unsigned long long)shared->trace,
                   (unsigned long long)shared->ops,
                   (unsigned long long)shared->sim_ms);
        }
        if (rc != 0) {
            failures++;
            printf(
                "seed %llu FAILED (exit %d, commit %s, mutation %s); "
                "replay: scripts/sim --seed %llu%s%s%s\n",
                (unsigned long long)seed, rc, commit_text, mutation_name,
                (unsigned long long)seed,
                strcmp(mutation_name, "none") != 0 ? " --mutation " : "",
                strcmp(mutation_name, "none") != 0 ? mutation_name : "",
                replay_flags());
            if (stop) {
                n_seeds = k + 1; /* the first failure is enough */
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (secs(&tp, &t1) >= 10.0 && k + 1 < n_seeds) {
            wall = secs(&t0, &t1);
            fprintf(stderr,
                    "sim: progress %llu/%llu seeds, %llu violations, %.0f "
                    "simulated s per wall s\n",
                    k + 1, n_seeds, failures,
                    wall > 0 ? (double)total.sim_ms / 1000.0 / wall : 0.0);
            tp = t1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    wall = secs(&t0, &t1);
    printf(
        "sim: details: ops %llu (ok %llu, fail %llu, info %llu), accepted "
        "%llu, completes %llu, takeovers %llu, stale-owner tries %llu, "
        "pauses %llu, partitions %llu, lossy links %llu, clock jumps "
        "%llu, membership %llu (%llu ok), io faults %llu, snapshots %llu "
        "(installed %llu), state digests compared %llu, log time pushed "
        "ahead by an unanchored leader %llu, G6b fail-stops %llu, G8 "
        "fail-stops %llu, crashes "
        "%llu (restarts %llu, refused %llu), power losses %llu, failed "
        "fsyncs %llu, store jobs lost at crashes %llu (ran unseen %llu), "
        "torn writes %llu (tails cut at load %llu), corrupted disks %llu, "
        "duplicated "
        "messages %llu, simulated %.1f s in %.1f s\n",
        (unsigned long long)total.ops, (unsigned long long)total.ok,
        (unsigned long long)total.fail, (unsigned long long)total.info,
        (unsigned long long)total.accepted, (unsigned long long)total.completes,
        (unsigned long long)total.takeovers,
        (unsigned long long)total.stale_owner_tries,
        (unsigned long long)total.pauses, (unsigned long long)total.partitions,
        (unsigned long long)total.losses, (unsigned long long)total.clock_jumps,
        (unsigned long long)total.member_ops,
        (unsigned long long)total.member_ok,
        (unsigned long long)total.io_faults,
        (unsigned long long)total.snapshots, (unsigned long long)total.installs,
        (unsigned long long)total.digests_compared,
        (unsigned long long)total.unanchored_jumps,
        (unsigned long long)total.g6b_stops, (unsigned long long)total.g8_stops,
        (unsigned long long)total.crashes, (unsigned long long)total.restarts,
        (unsigned long long)total.refused,
        (unsigned long long)total.power_losses,
        (unsigned long long)total.fsync_stops,
        (unsigned long long)total.lost_unsynced,
        (unsigned long long)total.kept_unsynced, (unsigned long long)total.torn,
        (unsigned long long)total.cuts, (unsigned long long)total.corruptions,
        (unsigned long long)total.duplicated, (double)total.sim_ms / 1000.0,
        wall);
    {
        struct rusage ru, rc;
        double cpu;

        getrusage(RUSAGE_SELF, &ru);
        getrusage(RUSAGE_CHILDREN, &rc);
        cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                       rc.ru_utime.tv_sec + rc.ru_stime.tv_sec) +
              (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec +
                       rc.ru_utime.tv_usec + rc.ru_stime.tv_usec) /
                  1e6;
        /* One run uses one core: simulated time per CPU second is the
         * per-core figure on a shared machine. */
        printf("sim: %.1f simulated s per CPU s (%.1f CPU s)\n",
               cpu > 0 ? (double)total.sim_ms / 1000.0 / cpu : 0.0, cpu);
    }
    printf("sim: %llu seeds, %llu violations, %.1f simulated s per wall s\n",
           n_seeds, failures,
           wall > 0 ? (double)total.sim_ms / 1000.0 / wall : 0.0);
    munmap(shared, sizeof *shared);
    return failures == 0 ? 0 : 1;
}
