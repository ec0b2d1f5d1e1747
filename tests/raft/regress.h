/* tests/raft/regress.h: what the guard regression scenarios share
 * (regress.c is the driver; one file per group of libraft 0.15 bugs,
 * docs/raft-0.15.md §3):
 *
 *   regress_figure8.c     B1, Raft Figure 8 (G1, G2);
 *   regress_rollback.c    B13 false match (G7) and B5 rollback (G6, G6b):
 *                         rollback, install-rollback;
 *   regress_stale_reply.c B13 through the asynchronous append reply (G9);
 *   regress_starvation.c  B3 commit starvation (the pipeline).
 *
 * One scenario runs per process (a forked child): the cluster C, the
 * options O and the first violation are process globals. */
#ifndef ONCE_TESTS_RAFT_REGRESS_H_
#define ONCE_TESTS_RAFT_REGRESS_H_

#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "fsm/fsm.h"

#define EXIT_CLEAN     0
#define EXIT_VIOLATION 1
#define EXIT_SETUP     2

/* A scenario must finish well within this (wall clock, seconds). */
#define CHILD_TIMEOUT_S 50

struct opts
{
    const char *scenario;
    const char *off_list; /* as given, "none" if empty */
    unsigned off;
    bool raw;
    bool window;
    unsigned disk_ms;
};

extern struct opts O;
extern struct cluster C; /* one per process: each scenario is a child */
extern bool violated;    /* a violation was recorded */

/* Record a violation (the first one is kept and printed by finish). */
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void setup_error(const char *what);
/* The summary line; @extra names the scenario's key numbers. Returns the
 * exit code (EXIT_CLEAN or EXIT_VIOLATION). */
int finish(const char *extra);
uint64_t sum_g2(void);
uint64_t sum_g7(void);
/* Servers that applied different entries at the same index. */
void check_applied(void);

/* A framed log entry (entry_wrap over a batch) holding one command. */
int make_entry(const struct fsm_cmd *cmd,
               uint64_t time_ms,
               raft_term term,
               struct raft_entry *e);
/* Leader @l must not count follower @j as matching an entry @j does not
 * have (B13): a violation if it does. */
void rb_check_match(unsigned l, unsigned j);
/* Index of the first server of [from, to) in RAFT_LEADER within @ms, -1. */
int rb_wait_leader_among(unsigned from, unsigned to, unsigned ms);

/* The scenarios: each returns the process exit code. */
int scenario_figure8(void);
int scenario_rollback(void);
int scenario_stale_reply(void);
int scenario_install_rollback(void);
int scenario_starvation(void);

#endif /* ONCE_TESTS_RAFT_REGRESS_H_ */
