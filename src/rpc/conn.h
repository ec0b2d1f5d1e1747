/* rpc/conn.h: framed RPC connections over libuv TCP (docs/design.md §5).
 *
 * Two sides share one connection (struct conn: conn_int.h and conn.c,
 * private to src/rpc), each side in its own file:
 *
 *   - rpc_server (rpc_server.c): listens on one address, accepts up to
 *     conns_max connections, decodes every frame with rpc/frame.h and hands
 *     each valid request to the serve callback as a struct rpc_call. The
 *     handler answers each call exactly once with rpc_call_reply, now or
 *     later, in any order (many calls in flight per connection, answered
 *     out of order).
 *   - rpc_channel (rpc_channel.c): one outgoing connection to one address,
 *     connected on the first call and again after a loss. Each call gets an
 *     answer callback exactly once: the decoded answer, or an error saying
 *     whether the request may have reached the server. libonce talks to
 *     each node through a channel; a follower forwards to the leader
 *     through one.
 *
 * Limits (struct rpc_limits, defaults from docs/design.md §5) bound everything
 * a peer controls:
 *   - frame size;
 *   - calls in flight per connection: over it a request is answered
 *     RESOURCE_EXHAUSTED, applied FALSE, without reaching the handler; a
 *     call counts until the handler has replied to it;
 *   - connections per server: over it a new connection gets an error frame
 *     and is closed;
 *   - bytes queued for writing: over it the connection stops reading until
 *     the queue drains;
 *   - idle time: a server connection with no call in flight that received
 *     no complete frame and gave no answer for idle_ms is closed (bytes of
 *     an unfinished frame do not count: a peer cannot keep a connection by
 *     dribbling), and so is one whose answers have not drained for idle_ms
 *     (a peer that does not read);
 *   - frame time: a server connection that started a frame and has not
 *     finished it within frame_ms is closed;
 *   - memory: what all of a server's connections hold in read buffers and
 *     queued answers is at most mem_max (plus what one loop iteration
 *     adds): past it the connection holding the most is closed, with a
 *     log line.
 * A frame that does not decode closes its connection after an error frame
 * (call id 0, method UNSPECIFIED, INVALID_ARGUMENT, applied FALSE, the
 * decoder's message). A request whose body the handler cannot decode is the
 * handler's to answer INVALID_ARGUMENT; the connection stays.
 *
 * Every stream gets TCP_NODELAY. With a TLS slot (tls/tls.h) a server or
 * channel speaks TLS 1.3 on every connection: conn.c seals and opens every
 * byte, frames flow only after a verified handshake, and a handshake not
 * completed within handshake_ms closes the connection. A server requires a
 * client certificate; a channel checks the server's certificate against
 * the IP of its address.
 *
 * Not thread-safe: every object here belongs to one uv loop and is used from
 * that loop's thread only. */
#ifndef ONCE_RPC_CONN_H_
#define ONCE_RPC_CONN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>
#include <uv.h>

#include "rpc/frame.h"
#include "tls/tls.h"

/* Errors of this layer: RPC_E_ADDR..RPC_E_PROTOCOL (common/err.h). */

struct rpc_limits
{
    size_t frame_max;   /* largest envelope, FRAME_MAX_DEFAULT (1 MiB) */
    unsigned calls_max; /* in flight per connection, 1024 */
    unsigned conns_max; /* per server, 4096 */
    unsigned idle_ms;   /* server connections, 300000 (5 min); 0: never */
    size_t out_max;     /* queued write bytes before reads pause, 8 MiB */
    /* server: a frame whose first byte arrived must be complete within
     * frame_ms, 10000 (10 s); 0: no limit. */
    unsigned frame_ms;
    /* server: bytes all its connections may hold in read buffers (the
     * frame in hand) and queued answers, 1 GiB; past it the connection
     * holding the most is closed. 0: no limit. */
    size_t mem_max;
    /* server: the deadline of a request that gives none (deadline_ms 0),
     * 5000; 0: no deadline then. Channels ignore it. */
    uint64_t deadline_ms;
};

void rpc_limits_default(struct rpc_limits *l);

/* Parse "A.B.C.D:PORT" (PORT 1..65535) into @out. 0 or RPC_E_ADDR. */
int rpc_addr_parse(const char *addr, struct sockaddr_in *out);

/* What every answer of a server carries (the envelope's identity fields). */
struct rpc_ids
{
    bool has_cluster_id; /* false until the cluster id is known */
    uint8_t cluster_id[RPC_ID_LEN];
    uint64_t node_id;
    uint8_t boot_id[RPC_ID_LEN];
};

/* ------------------------------------------------------------------------
 * Server side
 * ---------------------------------------------------------------------- */

struct rpc_server;

/* One received request. The public fields are read-only for the handler;
 * `user` is the handler's. The struct stays valid until rpc_call_reply. */
struct rpc_call
{
    uint64_t call_id;
    enum rpc_method method;
    uint32_t group_id;
    uint64_t deadline_ms;      /* the request's budget, or the server's
                                  default; 0: none */
    uint64_t received_mono_ms; /* uv_now() of the loop at receipt */
    uint64_t received_ns;      /* uv_hrtime() of the read that completed
                                  its frame, or of a local call's start
                                  (latency) */
    bool forwarded;            /* a node forwarded it: never forward again */
    /* The cluster the caller pinned (forwarders pass it on). A request
     * whose id differs from the server's is refused by the layer with
     * FAILED_PRECONDITION, applied FALSE; the handler never sees it. */
    bool has_cluster_id;
    uint8_t cluster_id[RPC_ID_LEN];
    /* TLS: the caller's verified certificate (borrowed: valid until
     * rpc_call_reply; NULL without TLS), and what the server's peer_member
     * hook said of it at the handshake (false without TLS). */
    X509 *peer_cert;
    bool peer_member;
    void *user;
};

/* Called for each valid request. @req (and anything decoded from it, e.g.
 * by envelope_unpack_body on the const-cast view) is valid only during the
 * callback: the handler copies or converts what it needs before it returns.
 * It must eventually call rpc_call_reply(@call, ...) exactly once. */
typedef void (*rpc_serve_fn)(void *arg,
                             struct rpc_call *call,
                             struct envelope_view *req);

struct rpc_server_config
{
    const char *addr; /* "IP:PORT" to listen on */
    struct rpc_limits limits;
    rpc_serve_fn serve;
    void *arg;
    struct rpc_ids ids;
    /* Log hook (level "info"|"warn"|"error", one logfmt-ready message);
     * NULL: silent. */
    void (*log)(void *arg, const char *level, const char *msg);
    /* A call was answered with @status, by its handler or by the layer
     * (its deadline); for metrics. May be NULL. */
    void (*answered)(void *arg,
                     const struct rpc_call *call,
                     enum rpc_status status);
    /* TLS: the slot of the server context (borrowed; outlives the server;
     * a context swapped into it serves the connections accepted after);
     * NULL: plaintext. */
    struct tls_slot *tls;
    unsigned handshake_ms; /* 0: TLS_HANDSHAKE_MS_DEFAULT */
    /* TLS: asked once per connection after the handshake with the peer's
     * certificate and the chain it sent: may it make forwarded calls (is it
     * a member)? NULL: no one may. */
    bool (*peer_member)(void *arg, X509 *cert, STACK_OF(X509) * chain);
};

/* Bind, listen and start accepting on @loop. 0 and *out, or RPC_E_ADDR /
 * RPC_E_LISTEN / RPC_E_LIMIT (a limit out of range) / RPC_E_NOMEM with
 * @errmsg (ERR_MSG_SIZE). */
int rpc_server_start(struct rpc_server **out,
                     uv_loop_t *loop,
                     const struct rpc_server_config *cfg,
                     char *errmsg);

/* Replace the identity stamped into answers from now on (the cluster id is
 * learned when the bootstrap command applies). */
void rpc_server_set_ids(struct rpc_server *s, const struct rpc_ids *ids);

/* Counters for status and metrics. */
struct rpc_server_stats
{
    uint64_t conns_open;
    uint64_t conns_accepted;
    uint64_t conns_refused; /* over conns_max */
    uint64_t calls_in_flight;
    uint64_t calls_served;
    uint64_t calls_busy;        /* answered RESOURCE_EXHAUSTED by the layer */
    uint64_t calls_expired;     /* answered DEADLINE_EXCEEDED by the layer */
    uint64_t frames_malformed;  /* connections closed for a bad frame */
    uint64_t frames_timed_out;  /* closed: a frame not finished in time */
    uint64_t conns_over_memory; /* closed: over mem_max */
    uint64_t mem_used;          /* bytes held now (see mem_max) */
    uint64_t tls_refused;       /* handshakes failed, refused or too slow */
};
void rpc_server_stats(const struct rpc_server *s, struct rpc_server_stats *st);

/* Stop listening and close every connection. Calls still in flight stay
 * valid until their handler replies (the reply is then dropped). @cb runs
 * once every handle has closed and the last call was replied; the server is
 * freed just before it. */
void rpc_server_close(struct rpc_server *s, void (*cb)(void *arg), void *arg);

/* A local call's answer (rpc_server_call_local): @r and its fields are
 * borrowed for the callback only; @call is freed right after it. Runs
 * exactly once, from rpc_call_reply or from the deadline. */
struct rpc_reply;
typedef void (*rpc_local_fn)(void *arg,
                             const struct rpc_call *call,
                             const struct rpc_reply *r);

/* Serve @req (a request built in this process, e.g. by the HTTP API; its
 * method, deadline_ms (0: the server's default), group_id, cluster id pin
 * (has_cluster_id: the service refuses a call for another cluster before
 * proposing it) and body are used) through the server's own serve
 * callback, exactly like a call from a connection: the same handler, the
 * same deadline timer and the same answered hook, not forwarded. @peer: the
 * caller's verified certificate, as a connection's would be (the call's
 * peer_cert; the call takes its own reference), or NULL: none. The answer
 * goes to @cb instead of a connection, exactly once, possibly before this
 * returns (a request refused at once). @req need stay valid only during this
 * call. Returns 0, or RPC_E_CLOSED (the server is closing) / RPC_E_NOMEM, and
 * then @cb never runs. A local call holds the server open like any call. */
int rpc_server_call_local(struct rpc_server *s,
                          struct envelope_view *req,
                          X509 *peer,
                          rpc_local_fn cb,
                          void *arg);

/* From now on, if the call's deadline passes before the handler replies,
 * the layer answers DEADLINE_EXCEEDED with applied UNKNOWN (before this:
 * applied FALSE). Call it just before handing the request to Raft. */
void rpc_call_mark_sent(struct rpc_call *call);

struct rpc_reply
{
    enum rpc_status status;   /* OK, or an error status */
    enum rpc_applied applied; /* UNSPECIFIED iff status OK */
    const char *error;        /* NULL or text (no NUL, <= RPC_ERROR_MAX) */
    const char *leader_hint;  /* NULL or "IP:PORT" */
    const uint8_t *body;      /* encoded <Method>Response (status OK) */
    size_t body_len;
};

/* Answer @call (borrowed fields; copied) and free it. Exactly once per
 * call. If the connection is gone, or the layer already answered for an
 * expired deadline, only the free happens. A reply that cannot be encoded
 * (too big, a rule broken) is replaced by status UNKNOWN with applied
 * UNKNOWN (the handler may have acted) and logged. */
void rpc_call_reply(struct rpc_call *call, const struct rpc_reply *r);

/* ------------------------------------------------------------------------
 * Client side
 * ---------------------------------------------------------------------- */

struct rpc_channel;

/* The answer to one rpc_channel_call, exactly once.
 *   rv == 0: @ans is the decoded answer envelope (its status may be an
 *            error); valid only during the callback.
 *   rv  < 0: no answer; @ans is NULL. @sent says whether the request may
 *            have reached the server (its bytes were handed to the socket):
 *            false means definitely not applied (RPC_E_CONNECT, also when
 *            the server refused the connection over its conns_max;
 *            RPC_E_BUSY; RPC_E_CLOSED before sending), true means the outcome
 * is unknown (RPC_E_LOST, RPC_E_TIMEOUT, RPC_E_CLOSED, RPC_E_PROTOCOL after
 * sending). */
typedef void (*rpc_answer_fn)(void *arg,
                              int rv,
                              bool sent,
                              struct envelope_view *ans);

/* A channel to @addr on @loop; connects lazily. 0 and *out, or RPC_E_ADDR /
 * RPC_E_NOMEM. */
int rpc_channel_open(struct rpc_channel **out,
                     uv_loop_t *loop,
                     const char *addr,
                     const struct rpc_limits *limits,
                     char *errmsg);

const char *rpc_channel_addr(const struct rpc_channel *ch);

/* Speak TLS on every connection made from now on: the context in @slot
 * (borrowed; outlives the channel; read at each connect, so a swapped
 * context is used by the next connection), the server's certificate
 * checked against the IP of the channel's address. A handshake that fails
 * fails the calls waiting for it with RPC_E_CONNECT (not sent); the reason
 * is in rpc_channel_last_error. */
void rpc_channel_set_tls(struct rpc_channel *ch, struct tls_slot *slot);

/* Why the last connection of @ch failed before any call was written
 * (a refused TLS handshake, say), or "" if none did. */
const char *rpc_channel_last_error(const struct rpc_channel *ch);

/* Send one request: @req's method, deadline_ms, group_id, forwarded,
 * caller_cert, cluster id (the caller's pin: the server refuses the call if it
 * belongs to another cluster) and body are used (borrowed, copied before
 * return); the call id and direction are the channel's. @timeout_ms > 0 bounds
 * the wait for the answer from now (connect included); it is also sent as the
 * envelope's deadline when @req->deadline_ms is 0. @cb runs exactly once,
 * never from inside this function. Returns 0, or a negative error before
 * anything was queued (RPC_E_NOMEM; an envelope_check error for a bad
 * @req): then @cb never runs. */
int rpc_channel_call(struct rpc_channel *ch,
                     const struct envelope_view *req,
                     uint64_t timeout_ms,
                     rpc_answer_fn cb,
                     void *arg);

/* Calls in flight (queued or sent, not yet answered). */
unsigned rpc_channel_pending(const struct rpc_channel *ch);

/* Fail every pending call with RPC_E_CLOSED and close the connection; the
 * channel is freed once its handles have closed (run the loop). */
void rpc_channel_close(struct rpc_channel *ch);

/* The verified peer certificate of a connection (borrowed, valid while the
 * connection lives; NULL without TLS or before its handshake completed).
 * struct conn is private to src/rpc (conn_int.h); servers hand it to their
 * handlers through rpc_call.peer_cert. */
struct conn;
X509 *conn_peer_cert(const struct conn *c);

/* Text for an RPC_E_* code of either header: err_str(rv). */
const char *rpc_conn_strerror(int rv);

#endif /* ONCE_RPC_CONN_H_ */
