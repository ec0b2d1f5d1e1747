/* tests/raft/random.c: seeded random schedules over the production Raft
 * layer on raft_fixture (tests/raft/cluster.h).
 *
 *   random-schedules [--seeds N] [--first S] [--steps-ms MS] [--off GUARDS]
 *                    [--no-fork] [-v]
 *
 * Each schedule is a function of its seed only (splitmix64, no rand()):
 * 3 or 5 voters, random network and disk latency, randomised election
 * timeouts, partitions (pairs and isolated servers), kills and revivals
 * (never more dead voters than a minority, never anything while the
 * fixture still names a killed leader: docs/raft-0.15.md §1.7),
 * membership changes (add a grown server as voter, remove a non-leader,
 * transfer) and a client workload of NONCE claims over 8 keys, with client
 * retries reusing the request id after an unknown (or not applied) outcome
 * and fresh request ids otherwise (replays).
 *
 * Checked at every fixture step: at most one leader per term (harness) and
 * the same entry at the same index on every server (incremental, plus
 * cl_same_applied now and then). After healing everything: a ready leader,
 * every member applied its last index, cl_same_applied, every acknowledged
 * ACCEPTED key present on every member, and per-key claim linearizability
 * over the history (jepsen/README.md, "Checker rules", R1-R4 with the request
 * id as the label and first_index as the winner's name), including a final
 * fresh probe of every key.
 *
 * Each schedule runs in a forked child (a harness ck_assert or a sanitizer
 * report then fails that seed only, and the parent names it).
 *
 * This file: the PRNG, the schedule's state, its main loop and the driver;
 * random.h lists the other parts. */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "raft/guard.h"
#include "random.h"

/* --- PRNG ------------------------------------------------------------------
 */

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

/* --- state of one schedule -------------------------------------------------
 */

struct cluster C;
struct hop *ops;
size_t n_ops;
uint64_t seq;
uint64_t next_rid;
bool verbose;
uint64_t cur_seed;
struct stats *st;

bool removed[CL_MAX]; /* removal committed: killed for good */
unsigned n_grown;
struct random_pair pairs[PAIRS_MAX];
unsigned n_pairs;
uint32_t *ref_applied; /* first checksum seen at each index */
raft_index seen_max[CL_MAX];
raft_term last_leader_term;

struct replica_member_req mreqs[MREQ_MAX];
bool mreq_busy[MREQ_MAX];
unsigned n_mreqs;
raft_id doomed; /* a removal that did not finish */

const char *const keys[N_KEYS] = {"k0", "k1", "k2", "k3",
                                  "k4", "k5", "k6", "k7"};

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

const char *cls_name(enum op_class c)
{
    switch (c) {
        case OC_ACCEPTED:
            return "ACCEPTED";
        case OC_REPLAYED:
            return "REPLAYED";
        case OC_UNKNOWN:
            return "unknown";
        case OC_FAIL:
            return "not-applied";
        default:
            return "pending";
    }
}

void print_op(const char *tag, const struct hop *h)
{
    fprintf(stderr,
            "  %s op#%zu key=%s rid=%llu server=%u%s%s inv=%llu(t=%llu) "
            "ret=%llu(t=%llu) status=%d outcome=%s retry=%d "
            "first_index=%llu\n",
            tag, (size_t)(h - ops), keys[h->key], (unsigned long long)h->rid,
            h->server + 1, h->client_retry ? " client-retry" : "",
            h->probe ? " probe" : "", (unsigned long long)h->inv_seq,
            (unsigned long long)h->op.t_invoke, (unsigned long long)h->ret_seq,
            (unsigned long long)h->op.t_done,
            h->submit_rv != 0 ? h->submit_rv : h->op.status,
            h->op.status == 0 && h->op.done ? fsm_outcome_name(h->op.outcome)
                                            : cls_name(h->cls),
            h->op.retry, (unsigned long long)h->op.first_index);
}

void report_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "FAIL seed %llu at t=%llu: ", (unsigned long long)cur_seed,
            (unsigned long long)raft_fixture_time(&C.f));
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* --- one schedule ----------------------------------------------------------
 */

static int run_schedule(uint64_t seed, unsigned steps_ms)
{
    unsigned voters, lat_every;
    uint64_t t_end, next_client, next_net, next_kill, next_member, next_lat;
    bool ok;

    cur_seed = seed;
    rng_state = seed;
    failed = false;
    n_ops = 0;
    seq = 0;
    next_rid = 1000;
    n_grown = 0;
    n_pairs = 0;
    n_mreqs = 0;
    doomed = 0;
    last_leader_term = 0;
    steps_since_full = 0;
    memset(removed, 0, sizeof removed);
    memset(seen_max, 0, sizeof seen_max);
    memset(mreq_busy, 0, sizeof mreq_busy);
    ops = calloc(OPS_MAX, sizeof *ops);
    ref_applied = calloc(CL_APPLY_MAX, sizeof *ref_applied);
    if (ops == NULL || ref_applied == NULL) {
        return 2;
    }

    voters = chance(50) ? 3 : 5;
    /* Half the schedules snapshot often, so InstallSnapshot, compaction
     * and G5/G6 run under faults too. */
    if (chance(50)) {
        cl_set_snapshot(&C, rnd_range(16, 64), 8);
    } else {
        cl_set_snapshot(&C, 1024, 2048);
    }
    C.quiet = !verbose;
    cl_init(&C, voters, voters);
    step_until(all_stored, NULL, 5000);
    for (unsigned i = 0; i < C.n; i++) {
        randomize_server(i);
    }
    vlog("seed %llu: %u voters", (unsigned long long)seed, voters);

    t_end = raft_fixture_time(&C.f) + steps_ms;
    next_client = raft_fixture_time(&C.f) + rnd_range(10, 100);
    next_net = raft_fixture_time(&C.f) + rnd_range(500, 4000);
    next_kill = raft_fixture_time(&C.f) + rnd_range(1000, 6000);
    next_member = raft_fixture_time(&C.f) + rnd_range(2000, 8000);
    lat_every = rnd_range(3000, 10000);
    next_lat = raft_fixture_time(&C.f) + lat_every;

    while (raft_fixture_time(&C.f) < t_end && !failed) {
        uint64_t now = raft_fixture_time(&C.f);

        if (now >= next_client) {
            client_event();
            if (chance(20)) { /* a burst: contention in one batch */
                client_event();
            }
            next_client = now + rnd_range(5, 150);
        }
        retry_events();
        if (now >= next_net) {
            partition_event();
            next_net = now + rnd_range(300, 4000);
        }
        if (now >= next_kill) {
            kill_event();
            next_kill = now + rnd_range(800, 6000);
        }
        if (now >= next_member) {
            member_event();
            next_member = now + rnd_range(2000, 9000);
        }
        if (now >= next_lat) {
            unsigned i = rnd_below(C.n);
            if (!removed[i]) {
                randomize_server(i);
            }
            next_lat = now + lat_every;
        }
        do_step();
    }
    ok = !failed && final_phase();
    if (ok && getenv("ONCE_RS_MUTATE") != NULL) {
        /* Checker self-test: a wrong history must be caught. 1: a REPLAYED
         * turned ACCEPTED; 2: a REPLAYED naming another winner. */
        int kind = atoi(getenv("ONCE_RS_MUTATE"));
        for (size_t k = 0; k < n_ops; k++) {
            if (ops[k].cls == OC_REPLAYED && !ops[k].probe) {
                if (kind == 1) {
                    ops[k].cls = OC_ACCEPTED;
                } else {
                    ops[k].op.first_index++;
                }
                break;
            }
        }
        ok = !check_history();
        fprintf(stderr, "self-test %d: %s\n", kind,
                ok ? "caught" : "NOT CAUGHT");
    }
    if (!ok && verbose) {
        for (size_t k = 0; k < n_ops; k++) {
            print_op("history", &ops[k]);
        }
    }
    for (unsigned i = 0; i < C.n; i++) {
        st->deferred_truncations += C.s[i].store.deferred_truncations;
        st->snapshots += C.s[i].rep.stats.snapshots_taken;
        st->snapshot_installs += C.s[i].rep.stats.snapshots_restored;
    }
    cl_close(&C);
    free(ops);
    free(ref_applied);
    ops = NULL;
    ref_applied = NULL;
    return ok ? 0 : 1;
}

/* --- Check plumbing --------------------------------------------------------
 * The harness uses ck_assert, which only works inside a Check runner: run
 * each schedule as a one-test suite in CK_NOFORK mode (we fork ourselves). */

static uint64_t ck_seed;
static unsigned ck_steps_ms;
static int ck_rc = 3;

START_TEST(one_schedule)
{
    ck_rc = run_schedule(ck_seed, ck_steps_ms);
}
END_TEST

static int run_checked(uint64_t seed, unsigned steps_ms)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("schedule");
    SRunner *sr;
    int nf;

    ck_seed = seed;
    ck_steps_ms = steps_ms;
    ck_rc = 3;
    tcase_add_test(tc, one_schedule);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    nf = srunner_ntests_failed(sr);
    if (nf > 0) {
        TestResult **tr = srunner_failures(sr);
        for (int k = 0; k < nf; k++) {
            fprintf(stderr, "FAIL seed %llu: harness assertion %s:%d: %s\n",
                    (unsigned long long)seed, tr_lfile(tr[k]), tr_lno(tr[k]),
                    tr_msg(tr[k]));
        }
        free(tr);
        if (ck_rc == 0) {
            ck_rc = 3;
        }
    }
    srunner_free(sr);
    return ck_rc;
}

/* --- main -------------------------------------------------------------------
 */

static void usage(void)
{
    fprintf(stderr,
            "usage: random-schedules [--seeds N] [--first S] [--steps-ms MS] "
            "[--off GUARDS] [--sync-snapshots] [--no-fork] [-v]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    unsigned long long n_seeds = 20, first = 1;
    unsigned steps_ms = 25000;
    bool do_fork = true;
    struct timespec t0, t1;
    struct stats *shared;
    struct stats total;
    unsigned long long failures = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            n_seeds = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--steps-ms") == 0 && i + 1 < argc) {
            steps_ms = (unsigned)strtoul(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--off") == 0 && i + 1 < argc) {
            unsigned mask;

            /* Test-only guard switches (raft/guard.h): a kept failing seed
             * shows what a guard prevents. */
            if (guard_test_parse(argv[++i], &mask) != 0) {
                usage();
            }
            guard_test_set_off(mask);
        } else if (strcmp(argv[i], "--sync-snapshots") == 0) {
            /* fsm v2 timing: the kept guard seeds were found with it. */
            cl_set_sync_snapshots(true);
        } else if (strcmp(argv[i], "--no-fork") == 0) {
            do_fork = false;
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = true;
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
                exit(run_checked(seed, steps_ms));
            }
            while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
            }
            rc = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
        } else {
            rc = run_checked(seed, steps_ms);
        }
        total.seeds++;
        total.ops += shared->ops;
        total.acked += shared->acked;
        total.unknown += shared->unknown;
        total.refused += shared->refused;
        total.elections += shared->elections;
        total.kills += shared->kills;
        total.partitions += shared->partitions;
        total.members += shared->members;
        total.members_ok += shared->members_ok;
        total.steps += shared->steps;
        total.deferred_truncations += shared->deferred_truncations;
        total.snapshots += shared->snapshots;
        total.snapshot_installs += shared->snapshot_installs;
        if (rc != 0) {
            failures++;
            fprintf(stderr,
                    "seed %llu FAILED (exit %d); reproduce: random-schedules "
                    "--seeds 1 --first %llu --steps-ms %u -v\n",
                    (unsigned long long)seed, rc, (unsigned long long)seed,
                    steps_ms);
        } else if (verbose) {
            fprintf(stderr, "seed %llu ok\n", (unsigned long long)seed);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf(
        "random-schedules: seeds %llu (first %llu), failed %llu, ops %llu, "
        "acked %llu, unknown %llu, refused %llu, elections %llu, kills "
        "%llu, partitions %llu, membership changes %llu (%llu ok), steps "
        "%llu, deferred truncations %llu, snapshots %llu (installed %llu), "
        "elapsed %.1f s\n",
        (unsigned long long)total.seeds, first, failures,
        (unsigned long long)total.ops, (unsigned long long)total.acked,
        (unsigned long long)total.unknown, (unsigned long long)total.refused,
        (unsigned long long)total.elections, (unsigned long long)total.kills,
        (unsigned long long)total.partitions, (unsigned long long)total.members,
        (unsigned long long)total.members_ok, (unsigned long long)total.steps,
        (unsigned long long)total.deferred_truncations,
        (unsigned long long)total.snapshots,
        (unsigned long long)total.snapshot_installs,
        (double)(t1.tv_sec - t0.tv_sec) +
            (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    munmap(shared, sizeof *shared);
    return failures == 0 ? 0 : 1;
}
