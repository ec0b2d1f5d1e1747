/* raft/seed.c: a new cluster's first state written into a log store
 * (replica_seed, replica_seed_pristine: replica.h), what `onced --restore`
 * starts from. Apart from replica.c because it is the layer's one use of
 * the log store (store/store_log.h): only onced links it, with
 * libonce_store, and the layer's tests need neither. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <raft.h>

#include "raft/replica.h"
#include "raft/replica_int.h"
#include "store/store_log.h"

int replica_seed_pristine(struct store *st, bool *pristine)
{
    int rv = store_log_pristine(st);

    *pristine = rv == 0;
    return rv == 0 || rv == RAFT_CANTBOOTSTRAP ? 0 : REPLICA_E_START;
}

int replica_seed(struct store *st,
                 uint64_t id,
                 const char *address,
                 uint64_t index,
                 const struct fsm *state)
{
    struct raft_buffer buf = {NULL, 0};
    struct raft_snapshot sn;
    int rv;

    if (adapter_snapshot_of(state, 0, &buf) != 0) {
        return REPLICA_E_NOMEM;
    }
    memset(&sn, 0, sizeof sn);
    raft_configuration_init(&sn.configuration);
    rv = raft_configuration_add(&sn.configuration, id, address, RAFT_VOTER);
    sn.index = index;
    sn.term = 1;
    sn.configuration_index = index;
    sn.bufs = &buf;
    sn.n_bufs = 1;
    if (rv == 0) {
        rv = store_log_seed(st, &sn);
    }
    raft_configuration_close(&sn.configuration);
    raft_free(buf.base);
    return rv == 0 ? 0 : REPLICA_E_START;
}
