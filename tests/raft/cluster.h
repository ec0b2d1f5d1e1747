/* tests/raft/cluster.h: raft_fixture clusters running the production Raft
 * layer (decorator, guards, adapter, pipeline, membership) over the real
 * state machine. In-process and deterministic: time is the fixture's.
 *
 * Each server i (0-based, raft id i + 1, address "i+1") is a struct replica
 * adopted onto the fixture's server, with a fixture_store over the fixture's
 * io (fixture_store.h: it orders truncations behind appends in flight).
 * Its wall clock is fixture time + CL_WALL0 + wall_offset_ms (settable, to
 * give a leader a wrong clock); its monotonic clock is fixture time.
 *
 * The harness records, per server, a checksum of the command applied at each
 * index, and at every step the term of every entry each server applied (so
 * tests compare servers index by index, barriers and configuration changes
 * included) and counts fatal hooks
 * (G4) instead of aborting: a server that hit one is killed in the fixture
 * at the next step, as a fail-stopped node would be.
 *
 * 0.15 fixture quirks handled here (docs/raft-0.15.md §1.7): the
 * fixture is zeroed before raft_fixture_initialize; raft_fixture_elect is
 * never used (B14): cl_elect() lowers one server's election timeout
 * instead. Every test runs in its own forked Check test. */
#ifndef ONCE_TESTS_RAFT_CLUSTER_H_
#define ONCE_TESTS_RAFT_CLUSTER_H_

#include <raft.h>
#include <raft/fixture.h>
#include <stdbool.h>
#include <stdint.h>

#include "fixture_store.h"
#include "fsm/fsm.h"
#include "raft/replica_int.h"
#include "store/store.h"

#define CL_MAX       RAFT_FIXTURE_MAX_SERVERS
#define CL_WALL0     1700000000000ull
#define CL_SCOPE     "t"
#define CL_APPLY_MAX 65536

struct cl_server
{
    struct replica rep;
    struct fixture_store store;
    int64_t wall_offset_ms;
    bool used;
    bool started;
    unsigned fatal_hits;
    char fatal_what[32];
    char fatal_msg[256];
    bool retired_hook;
    /* crc of the entry applied at each index, 0 = none seen */
    uint32_t *applied;
    raft_index applied_max;
    raft_index applied_seen; /* the hook recorded terms up to here */
    size_t max_entry_len;    /* largest command entry applied */
};

struct cluster
{
    struct raft_fixture f;
    unsigned n;
    struct cl_server s[CL_MAX];
    bool quiet;
    /* invariants checked at every step by the fixture hook */
    raft_term leader_term[CL_MAX];
    /* The term of the entry applied at each index, as first seen on any
     * server: every entry type (barriers and configuration changes too,
     * which the applied checksums above do not see). */
    raft_term *applied_term;
    bool violation;
    char violation_msg[256];
};

/* A finished request's copy of its outcome. */
struct cl_op
{
    struct replica_req req;
    bool done;
    int status;
    enum fsm_outcome outcome;
    bool retry;
    uint64_t first_index;
    raft_index proposed_at;    /* unused by the harness; tests may set it */
    uint64_t t_invoke, t_done; /* fixture time */
    struct cluster *c;
};

/* Start @n_voters voting servers of @n_servers (the rest are started
 * unbootstrapped, not in the configuration) and submit the FSM Bootstrap
 * once a leader is ready. Fails the test on any error. */
void cl_init(struct cluster *c, unsigned n_voters, unsigned n_servers);
void cl_close(struct cluster *c);

/* Options before cl_init's start: snapshot threshold/trailing for all. */
void cl_set_snapshot(struct cluster *c, unsigned threshold, unsigned trailing);

/* Before cl_init: snapshots encoded on the loop inside raft's snapshot
 * call (fsm v2 timing) instead of on the fixture's work queue. The guard
 * regressions' kept seeds were found with that timing. */
void cl_set_sync_snapshots(bool on);

/* Grow one more (empty, unbootstrapped) server and start it; returns i. */
unsigned cl_grow(struct cluster *c);

/* Step helpers: true if the condition held within @ms of fixture time. */
bool cl_step_until(struct cluster *c,
                   bool (*cond)(struct cluster *c, void *arg),
                   void *arg,
                   unsigned ms);
void cl_step_ms(struct cluster *c, unsigned ms);
/* Wait for a ready leader (G1 applied); returns its index or -1. */
int cl_wait_ready(struct cluster *c, unsigned ms);
/* Wait until there is no leader at all. */
bool cl_wait_no_leader(struct cluster *c, unsigned ms);
/* Make server i leader without raft_fixture_elect (B14). */
bool cl_elect(struct cluster *c, unsigned i, unsigned ms);
int cl_leader(struct cluster *c); /* index of a server in RAFT_LEADER, -1 */

/* The FSM Bootstrap of a cluster whose voters are servers 1..@n_voters
 * (fh_settings, addresses "i" and "ci"); @b must live while the command is
 * used. */
struct fsm_cmd cl_bootstrap_cmd(struct fsm_bootstrap *b, unsigned n_voters);
/* A NONCE claim of (CL_SCOPE, @key) with request id @rid and a 1 h ttl; @cl
 * must live while the command is used. */
struct fsm_cmd cl_claim_cmd(struct fsm_claim *cl,
                            const char *key,
                            uint64_t rid);
/* Submit @cmd at server i; on 0, @op completes (its outcome is copied). */
int cl_submit(struct cluster *c,
              unsigned i,
              struct cl_op *op,
              const struct fsm_cmd *cmd);

/* Submit a NONCE claim of (CL_SCOPE, @key) with request id @rid and a 1 h
 * ttl at server i. Returns replica_submit's code; on 0, @op completes. */
int cl_claim(struct cluster *c,
             unsigned i,
             struct cl_op *op,
             const char *key,
             uint64_t rid);
int cl_lookup(struct cluster *c, unsigned i, struct cl_op *op, const char *key);
/* Step until @op is done (or @ms passes). */
bool cl_wait_op(struct cluster *c, struct cl_op *op, unsigned ms);

/* Every pair of alive servers applied the same entries at the indexes both
 * applied. Returns false and fills violation_msg otherwise. */
bool cl_same_applied(struct cluster *c);
/* Wait until every alive started server applied index @index. */
bool cl_wait_applied(struct cluster *c, raft_index index, unsigned ms);
/* Lookup on server i's state machine directly (no barrier): test checks
 * after the run. Returns the outcome. */
enum fsm_outcome cl_local_lookup(struct cluster *c,
                                 unsigned i,
                                 const char *key);

struct raft *cl_raft(struct cluster *c, unsigned i);
void cl_disconnect_all(struct cluster *c, unsigned i);
void cl_reconnect_all(struct cluster *c, unsigned i);

/* Before cl_init: a backend that gives each server its store instead of
 * a fixture_store. @adopt runs before replica_adopt (at cl_init, cl_grow
 * and after cl_crash); it may put a raft_io decorator of its own in r->io
 * (rio then wraps it) and returns the store (NULL: a fixture_store). NULL
 * @b: back to fixture_stores. */
struct cl_backend
{
    void *arg;
    struct store *(*adopt)(void *arg, unsigned i, struct raft *r);
    /* After every fixture step (from the fixture hook, before the
     * harness's checks): complete what the backend's stores have due. May
     * be NULL. */
    void (*step)(void *arg);
};
void cl_set_backend(const struct cl_backend *b);

/* Crash server i (needs a backend whose store outlives the process): the
 * fixture kills it, the replica shuts down, @before_close(@arg, i) runs
 * while raft is still open (the backend finishes what raft waits for),
 * raft closes, the replica and its state machine are freed; then a new
 * replica is prepared and raft_init'ed on the same slot and inner io and
 * adopted with the backend's store, not started. The harness's record of
 * applied entries is kept. */
void cl_crash(struct cluster *c,
              unsigned i,
              void (*before_close)(void *arg, unsigned i),
              void *arg);
/* Start a crashed server: it loads from its store. replica_start's code
 * (0: started; else @errmsg says why, and the server stays down). The
 * caller revives it in the fixture. */
int cl_restart(struct cluster *c, unsigned i, char *errmsg);

#endif /* ONCE_TESTS_RAFT_CLUSTER_H_ */
