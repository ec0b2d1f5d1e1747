/* common/sim_mutation.h: the seeded bugs of the deterministic simulator
 * (tests/sim/README.md, "Mutations"). They exist only in the simulator's
 * own build of src/fsm, src/raft and src/store (-DONCE_SIM_MUTATIONS,
 * Makefile.am's tests/sim/sim): there one of them is switched on at run time
 * (`sim --mutation NAME`) to show that the simulator's checks catch it.
 * In every other build SIM_MUTANT(m) is the constant 0 and the compiler
 * drops the mutant branch: no production program can turn one on. */
#ifndef ONCE_COMMON_SIM_MUTATION_H_
#define ONCE_COMMON_SIM_MUTATION_H_

enum sim_mutation {
    SIM_MUT_NONE = 0,
    SIM_MUT_EXPIRE_EARLY,    /* a record expires 1 ms before expires_ms */
    SIM_MUT_FORGET_ATTEMPTS, /* a restored snapshot drops the ledger total */
    SIM_MUT_STALE_OWNER,     /* an earlier owner's token still completes */
    SIM_MUT_LTIME_NO_CLAMP,  /* the leader stamps its raw wall clock */
    /* rio tells raft an append is stored when it hands it to the store */
    SIM_MUT_ACK_BEFORE_FSYNC,
    /* the log store calls an append's callback when its batch is handed
     * to the worker, before the write and its fdatasync (store_queue.c) */
    SIM_MUT_STORE_ACK_EARLY,
};

#ifdef ONCE_SIM_MUTATIONS
extern enum sim_mutation once_sim_mutation; /* tests/sim/sim.c */
#define SIM_MUTANT(m) (once_sim_mutation == (m))
#else
#define SIM_MUTANT(m) 0
#endif

#endif /* ONCE_COMMON_SIM_MUTATION_H_ */
