/* raft/uvio.h: the raft_uv pieces of a node, set up the way once needs them.
 *
 *   - the Raft transport is once's own (raft/transport.h): TCP, TLS 1.3
 *     when the node has certificates, every message's size bounded as read
 *     from raft_uv's framing, raft handed a socketpair end per inbound or
 *     TLS connection (a plaintext outbound one: its socket, never read);
 *   - raft_uv itself, in @dir, with auto-recovery off (B8: with it on, a
 *     corrupt segment is renamed away and acknowledged entries vanish);
 *   - the "uv" store over that raft_uv (store.h).
 * The raft_uv instance is the decorator's inner io: replica_init(rep,
 * &u->io, &u->store, ...).
 *
 * Loop thread only. */
#ifndef ONCE_RAFT_UVIO_H_
#define ONCE_RAFT_UVIO_H_

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "raft/transport.h"
#include "store/store.h"

struct uvio
{
    struct raft_uv_transport transport; /* ours; what raft_uv sees */
    struct raft_io io;                  /* raft_uv */
    struct store store;
};

/* @dir must exist. @net: the transport's settings (copied; NULL:
 * plaintext with the default bounds). Returns 0, REPLICA_E_NOMEM or
 * REPLICA_E_START (raft_uv's code is named in @errmsg, ERR_MSG_SIZE
 * bytes). */
int uvio_init(struct uvio *u,
              uv_loop_t *loop,
              const char *dir,
              const struct transport_config *net,
              char *errmsg);

/* After raft_close's callback (and replica_close): release the memory. */
void uvio_close(struct uvio *u);

#endif /* ONCE_RAFT_UVIO_H_ */
