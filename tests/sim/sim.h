/* tests/sim/sim.h: what the parts of the whole-node simulator share.
 *
 *   sim.c         the PRNG, one run's state, the run's main loop, the
 *                 forked child per seed, main() and the summary line;
 *   sim_world.c   stepping with the per-step checks and the nemesis
 *                 (network, clocks, pauses, crashes and restarts, power
 *                 loss, disk faults, membership);
 *   sim_store.c   each node's storage: the production log store over
 *                 sim_fs.c, its jobs run by a deterministic executor;
 *   sim_fs.c      each node's simulated file system (crash semantics);
 *   sim_net.c     each node's raft_io over the fixture's, which lets a
 *                 node crash and start again in its slot;
 *   sim_client.c  the client workload (claims, retries, completes,
 *                 releases, takeovers) and the EDN history it writes;
 *   sim_check.c   the continuous checks (state digests, log time,
 *                 durability) and the final phase (heal, probes).
 *
 * A run is a function of its seed only: every choice comes from rnd()
 * (splitmix64), time is raft_fixture's, and the nodes are the production
 * state machine (src/fsm) and Raft layer (src/raft: guards, adapter,
 * proposal pipeline, membership) on tests/raft/cluster.h's harness. One run
 * per forked child: its state is process globals, reset by sim_run. */
#ifndef ONCE_TESTS_SIM_SIM_H_
#define ONCE_TESTS_SIM_SIM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "common/sim_mutation.h"

#define SIM_N_NONCE     4 /* keys n0..n3: NONCE claims */
#define SIM_N_IDEM      8 /* keys i0..i7: IDEMPOTENT claims */
#define SIM_N_KEYS      (SIM_N_NONCE + SIM_N_IDEM)
#define SIM_OPS_MAX     8192
#define SIM_MREQ_MAX    64
#define SIM_PAIRS_MAX   64
#define SIM_MAX_SKEW_MS 60000 /* fh_settings' max_skew */

enum sim_f { SF_CLAIM, SF_COMPLETE, SF_RELEASE, SF_LOOKUP };
enum sim_type { ST_PENDING, ST_OK, ST_FAIL, ST_INFO };

/* One client call: what was sent and what came back (copied out of the
 * struct fsm_result, whose pointers live only for the callback). */
struct sop
{
    struct replica_req req;
    enum sim_f f;
    unsigned key;
    unsigned server;
    uint64_t rid;
    bool retry_of_rid; /* reuses an earlier call's request id */
    bool probe;
    uint64_t ttl_ms, lease_ms;
    struct fsm_token token; /* complete/release: the token sent */
    uint64_t result_val;    /* complete: the 8-byte result sent */
    enum sim_type type;
    int status;
    struct fsm_result res; /* pointers cleared */
    uint8_t got_result[FSM_RESULT_MAX > 64 ? 64 : FSM_RESULT_MAX];
    size_t got_result_len;
    bool has_got_result;
    uint64_t t_invoke, t_done;
    bool seen_done;
    unsigned retries_left;
    uint64_t retry_at;
    uint64_t follow_at; /* an owner's complete/release, 0 = none */
    enum sim_f follow_f;
    uint64_t follow_rid; /* the request id the follow-up will carry */
    size_t n_in_history; /* its process number in the EDN */
};

struct sim_stats
{
    uint64_t ops, ok, fail, info, accepted, expiries_seen, completes, takeovers,
        stale_owner_tries, pauses, partitions, losses, clock_jumps, member_ops,
        member_ok, io_faults, snapshots, installs, digests_compared,
        unanchored_jumps, g6b_stops, g8_stops, crashes, restarts, refused,
        power_losses, fsync_stops, torn, cuts, corruptions, kept_unsynced,
        lost_unsynced, duplicated, steps, sim_ms;
    uint64_t trace; /* the run's digest chain (replay proof) */
    int fail_rc;
};

struct sim_pair
{
    unsigned a, b;
};

/* --- one run's state (sim.c) --------------------------------------------- */
extern struct cluster C;
extern uint64_t cur_seed;
extern struct sim_stats *st;
extern bool verbose, failed;
extern bool disk_faults;  /* failed fsyncs (off: --no-disk-faults) */
extern bool crash_faults; /* crashes, power losses (off: --no-crashes) */
extern bool torn_any;     /* --torn-any: torn tails on any number of nodes */
extern unsigned power_loss_percent; /* of crash events (--power-loss P) */
extern bool slow_disks;   /* a quarter of disk latencies 60-300 ms (off:
                           * --no-slow-disks) */
extern bool quick_checks; /* C1, C2 (sim_client.c); off: the model only */
extern struct sop *ops;
extern size_t n_ops;
extern uint64_t next_rid;
extern bool removed[CL_MAX];
extern raft_id doomed;
extern struct sim_pair pairs[SIM_PAIRS_MAX];
extern unsigned n_pairs;
extern unsigned n_grown;
extern FILE *edn;
extern const char *const key_names[SIM_N_KEYS];

uint64_t rnd(void);
unsigned rnd_below(unsigned n);
unsigned rnd_range(unsigned lo, unsigned hi);
bool chance(unsigned percent);
void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void trace_mix(uint64_t v);

/* --- sim_world.c ---------------------------------------------------------- */
bool alive(unsigned i);
bool member_live(unsigned i);
int ready_leader(void);
int random_live_server(void);
void randomize_server(unsigned i);
void do_step(void);
void step_ms(unsigned ms);
bool step_until(bool (*cond)(void *), void *arg, unsigned ms);
void net_event(void);
void clock_event(void);
void pause_event(void);
bool member_event(void);
void disk_event(void);
void crash_event(void);
void sim_world_backend(void); /* before cl_init: sim_store + sim_net */
void sim_world_free(void);    /* after cl_close */
void heal(void);
void revive(unsigned i);
const struct raft_configuration *newest_config(void);
bool sim_disk_doomed(unsigned i);
void sim_world_reset(void);
int config_role(const struct raft_configuration *conf, unsigned i);

/* --- sim_client.c --------------------------------------------------------- */
void client_event(void);
void followup_events(void);
struct sop *sim_invoke_claim(unsigned server,
                             unsigned key,
                             uint64_t rid,
                             bool retry,
                             bool probe,
                             uint64_t ttl_ms,
                             uint64_t lease_ms);
void scan_completions(void);
void sim_client_reset(void);
void edn_header(void);
void edn_footer(void);

/* --- sim_check.c ---------------------------------------------------------- */
void check_init(void);
void check_free(void);
void check_step(void);
void check_restarted(unsigned i); /* its log time starts again */
bool final_phase(void);
void dump_servers(void);

#endif /* ONCE_TESTS_SIM_SIM_H_ */
