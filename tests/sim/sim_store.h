/* tests/sim/sim_store.h: one simulated node's storage: the production log
 * store (store/store_log.h, engine "pwrite") over the node's simulated
 * file system (sim_fs.h), with its jobs run by a deterministic executor
 * (store/store_sys.h, struct store_exec).
 *
 * The executor: every job the store submits runs (store_job_run) and
 * completes (store_job_complete) at once at its due time, strictly in
 * submission order: due = max(the previous job's due, now) + latency_ms.
 * Pool work (a snapshot file written or read, an old one removed) runs and
 * completes at now + latency_ms, beside the jobs. sim_store_run() runs
 * what is due, from the fixture's step hook; nothing runs on another
 * thread.
 *
 * A crash (sim_store_crash, before the node's raft closes): the first
 * queued items, seeded (none half the time), ran before the power went
 * but the process never saw them complete (writes on disk raft was never
 * told about); the next one ran part way (a seeded budget of file calls);
 * then the file system's power is cut (sim_fs_power_cut) and the node's
 * close cancels everything still queued (RAFT_CANCELED, which rio takes
 * from a closing store). The file system survives; sim_store_open() starts
 * the next process's store on it.
 *
 * The struct store handed to the node is the log store's, its close and
 * append wrapped (the close drains the executor, so that it completes
 * inside raft_close as the fixture needs; the append keeps raft's
 * requests that G4 swallowed referenced for the leak checker).
 *
 * Single-threaded, deterministic: the clock is *now, every choice the
 * caller's draw. */
#ifndef ONCE_TESTS_SIM_SIM_STORE_H_
#define ONCE_TESTS_SIM_SIM_STORE_H_

#include <stdbool.h>
#include <stdint.h>

#include <raft.h>

#include "sim_fs.h"
#include "store/store.h"
#include "store/store_log.h"
#include "store/store_sys.h"

struct ss_item;

struct sim_store_stats
{
    uint64_t ran_at_crash, lost_at_crash, cuts;
};

struct sim_store
{
    struct store store; /* first: the wrapped ops find the sim_store */
    struct store_exec exec;
    struct store_ops ops;        /* the log store's, close/append wrapped */
    const struct store_ops *log; /* the log store's own */
    struct sim_fs fs;
    const raft_time *now;
    unsigned latency_ms;
    size_t segment_size;
    bool open;            /* a store is initialised on the fs */
    bool novote_pending;  /* crashed while in rio's no-vote (a cut) */
    struct ss_item *head; /* by due time, then submission */
    raft_time last_job_due;
    unsigned queued;
    struct sim_store_stats stats;
};

/* A fresh node's disk: an empty file system, no store open. */
void sim_store_init(struct sim_store *d,
                    const raft_time *now,
                    size_t segment_size);
/* Everything freed (after the node's raft closed). */
void sim_store_free(struct sim_store *d);

/* Open the log store on the file system (powering it on): the store the
 * node's rio gets. Fails the run on error (the simulator's setup). */
struct store *sim_store_open(struct sim_store *d);

/* Run and complete every queued item due at or before *now. */
void sim_store_run(struct sim_store *d);

/* The power goes (above); @torn_ok: a segment may be torn. */
void sim_store_crash(struct sim_store *d, uint64_t (*draw)(void), bool torn_ok);

#endif /* ONCE_TESTS_SIM_SIM_STORE_H_ */
