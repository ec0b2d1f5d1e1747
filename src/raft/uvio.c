/* raft/uvio.c: see uvio.h. */
#include "raft/uvio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "raft/replica.h"

int uvio_init(struct uvio *u,
              uv_loop_t *loop,
              const char *dir,
              const struct transport_config *net,
              char *errmsg)
{
    struct transport_config plain;
    int rv;

    memset(u, 0, sizeof *u);
    if (net == NULL) {
        memset(&plain, 0, sizeof plain);
        plain.limits.message_max = RFRAME_MESSAGE_MAX_DEFAULT;
        plain.limits.snapshot_max = RFRAME_SNAPSHOT_MAX_DEFAULT;
        net = &plain;
    }
    rv = transport_init(&u->transport, loop, net);
    if (rv != 0) {
        err_printf(errmsg, "transport: %s", raft_strerror(rv));
        return REPLICA_E_NOMEM; /* UNTESTED: malloc */
    }
    rv = raft_uv_init(&u->io, loop, dir, &u->transport);
    if (rv != 0) {
        err_printf(errmsg, "raft_uv_init: %.200s", u->io.errmsg);
        transport_free(&u->transport);
        return rv == RAFT_NOMEM ? REPLICA_E_NOMEM : REPLICA_E_START;
    }
    raft_uv_set_auto_recovery(&u->io, false);
    store_io_init(&u->store, &u->io);
    return 0;
}

void uvio_close(struct uvio *u)
{
    raft_uv_close(&u->io);
    transport_free(&u->transport);
}
