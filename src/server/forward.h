/* server/forward.h: a follower's one hop to the leader (docs/server.md,
 * "Forwarding").
 *
 * A node that is not the ready leader sends the request body unchanged to
 * the leader's client address, marked forwarded, over one kept
 * rpc_channel, and relays the leader's answer as it is. When the leader
 * changes, a new channel opens and the previous one drains: it is closed
 * once its calls are answered (forward_tick), at most FORWARD_DRAIN_MAX of
 * them; past that the oldest closes and its sent calls become "unknown".
 *
 * Owns: the channels, and the rate limit of its warn lines. Each forwarded
 * call owns a small record freed by its channel's callback; closing a
 * channel (forward_close) calls those callbacks, which answer the calls.
 * Loop thread only. */
#ifndef ONCE_SERVER_FORWARD_H_
#define ONCE_SERVER_FORWARD_H_

#include <stdint.h>

#include <uv.h>

#include "rpc/conn.h"

#define FORWARD_DRAIN_MAX 8 /* old channels still answering */

struct server;

struct forwarder
{
    uv_loop_t *loop;
    const struct rpc_limits *limits; /* borrowed: the node's --max-frame ... */
    struct tls_slot *tls;   /* borrowed: the node's "out" slot, or NULL */
    struct rpc_channel *ch; /* to the current leader, or NULL */
    struct rpc_channel *drain[FORWARD_DRAIN_MAX];
    unsigned n_drain;
    uint64_t log_ms; /* when the last error line was written */
    unsigned log_suppressed;
    uint64_t forwarded; /* calls sent to the leader (metrics) */
    uint64_t errors;    /* channel errors (forward_log's) */
};

void forward_init(struct forwarder *f,
                  uv_loop_t *loop,
                  const struct rpc_limits *limits,
                  struct tls_slot *tls);

/* Forward @call (a validated request, @req its envelope) to the leader, or
 * answer it at once when it cannot go: already forwarded (one hop), no
 * known leader or its address, this node the leader but not ready, the
 * caller's deadline passed. */
void forward_call(struct server *s,
                  struct rpc_call *call,
                  const struct envelope_view *req);

/* The kept channel to the leader at @addr, opened if the leader changed
 * (the previous one drains), or NULL (logged): for the node's own calls
 * to the leader (readindex.c's ReadIndex), which the channel's callback
 * answers like any forwarded call's. */
struct rpc_channel *forward_channel(struct forwarder *f, const char *addr);

/* Close the draining channels whose calls have all been answered. */
void forward_tick(struct forwarder *f);

/* Close every channel (their calls are answered by the callbacks). */
void forward_close(struct forwarder *f);

#endif /* ONCE_SERVER_FORWARD_H_ */
