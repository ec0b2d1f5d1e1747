/* tests/raft/random.h: what the parts of the random schedules share
 * (random.c):
 *
 *   random.c        the PRNG, the state of one schedule, reporting, the
 *                   schedule's main loop, the forked child and main();
 *   random_world.c  the servers, stepping with the per-step checks, the
 *                   client workload and the nemesis (partitions, kills,
 *                   membership changes);
 *   random_check.c  the final phase (heal, probes) and the history checker.
 *
 * One schedule runs per process (a forked child): its state is process
 * globals, reset by run_schedule. */
#ifndef ONCE_TESTS_RAFT_RANDOM_H_
#define ONCE_TESTS_RAFT_RANDOM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

#define N_KEYS    8
#define OPS_MAX   4096
#define MREQ_MAX  64
#define PAIRS_MAX 64

enum op_class { OC_PENDING, OC_ACCEPTED, OC_REPLAYED, OC_UNKNOWN, OC_FAIL };

struct hop
{
    struct cl_op op; /* the harness's request and its outcome */
    unsigned server;
    unsigned key;
    uint64_t rid;
    bool client_retry; /* reuses the request id of an earlier op */
    bool probe;        /* final probe */
    int submit_rv;     /* replica_submit's code (not 0: refused) */
    uint64_t inv_seq, ret_seq;
    bool seen_done;
    enum op_class cls;
    unsigned retries_left;
    uint64_t retry_at; /* fixture time of a scheduled retry, 0 = none */
};

struct stats
{
    uint64_t deferred_truncations;
    uint64_t snapshots;         /* taken, all servers */
    uint64_t snapshot_installs; /* restored from a leader's snapshot */
    uint64_t seeds, ops, acked, unknown, refused, elections, kills, partitions,
        members, members_ok, steps;
    int failed_seed_rc;
};

struct random_pair
{
    unsigned a, b;
};

/* --- state of one schedule (random.c) --------------------------------------
 */

extern struct cluster C;
extern uint64_t cur_seed;
extern raft_id doomed;
extern const char *const keys[N_KEYS];
extern raft_term last_leader_term;
extern bool mreq_busy[MREQ_MAX];
extern struct replica_member_req mreqs[MREQ_MAX];
extern unsigned n_grown;
extern unsigned n_mreqs;
extern size_t n_ops;
extern unsigned n_pairs;
extern uint64_t next_rid;
extern struct hop *ops;
extern uint32_t *ref_applied;
extern bool removed[CL_MAX];
extern raft_index seen_max[CL_MAX];
extern uint64_t seq;
extern struct stats *st;
extern bool verbose;
extern struct random_pair pairs[PAIRS_MAX];
extern bool failed;
extern unsigned steps_since_full;

/* random.c */
bool chance(unsigned percent);
const char *cls_name(enum op_class c);
void print_op(const char *tag, const struct hop *h);
void report_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t rnd(void);
unsigned rnd_below(unsigned n);
unsigned rnd_range(unsigned lo, unsigned hi);
void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* random_world.c */
bool alive(unsigned i);
bool all_stored(void *arg);
void client_event(void);
int config_role(const struct raft_configuration *conf, unsigned i);
void do_step(void);
struct hop *invoke(unsigned server,
                   unsigned key,
                   uint64_t rid,
                   bool retry,
                   bool probe);
void kill_event(void);
bool member_event(void);
const struct raft_configuration *newest_config(void);
void partition_event(void);
void randomize_server(unsigned i);
int ready_leader(void);
void retry_events(void);
void revive(unsigned i);
void scan_completions(void);
void step_ms(unsigned ms);
bool step_until(bool (*cond)(void *), void *arg, unsigned ms);

/* random_check.c */
bool check_history(void);
void dump_servers(void);
bool final_phase(void);
void heal(void);

#endif /* ONCE_TESTS_RAFT_RANDOM_H_ */
