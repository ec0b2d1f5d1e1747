/* raft/uvio.h: the raft_uv pieces of a node, set up the way once needs them.
 *
 *   - the Raft transport is raft_uv's TCP transport with TCP_NODELAY on
 *     every stream, accepted and connected (0.15 sets none: each small
 *     AppendEntries would wait for Nagle);
 *   - raft_uv itself, in @dir, with auto-recovery off (B8: with it on, a
 *     corrupt segment is renamed away and acknowledged entries vanish);
 *   - the "uv" store over that raft_uv (store.h).
 * The raft_uv instance is the decorator's inner io: replica_init(rep,
 * &u->io, &u->store, ...).
 *
 * 0.15's TCP transport takes IPv4 literals only, has no authentication and
 * no message size limit: keep the Raft port on a private network.
 * Loop thread only. */
#ifndef ONCE_RAFT_UVIO_H_
#define ONCE_RAFT_UVIO_H_

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "store/store.h"

struct uvio
{
    struct raft_uv_transport transport; /* what raft_uv sees */
    struct raft_uv_transport tcp;       /* raft_uv_tcp underneath */
    raft_uv_accept_cb accept_cb;
    raft_uv_transport_close_cb close_cb;
    struct raft_io io; /* raft_uv */
    struct store store;
};

/* @dir must exist. Returns 0, REPLICA_E_NOMEM or REPLICA_E_START (raft_uv's
 * code is named in @errmsg, ERR_MSG_SIZE bytes). */
int uvio_init(struct uvio *u, uv_loop_t *loop, const char *dir, char *errmsg);

/* After raft_close's callback (and replica_close): release the memory. */
void uvio_close(struct uvio *u);

#endif /* ONCE_RAFT_UVIO_H_ */
