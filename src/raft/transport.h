/* raft/transport.h: the Raft port, terminated by once (a struct
 * raft_uv_transport of our own in place of raft_uv_tcp).
 *
 * raft_uv reads and writes a libuv stream per peer connection, and lets the
 * transport make those streams (raft_uv_transport's listen and connect).
 * raft_uv_tcp hands it raw TCP sockets: no TLS, no authentication, and the
 * sizes a peer announces go straight to malloc. Here every connection is a
 * link with two ends:
 *
 *   network  TCP (+ TLS 1.3: tls/tls.h) to the peer, run by us;
 *   raft     one end of a socketpair, given to raft_uv as a uv_pipe_t; we
 *            keep the other end and copy between the two.
 *
 * Except one kind: a plaintext outbound link ("direct") hands raft the TCP
 * socket itself once our handshake is written, with no socketpair and no
 * copy. raft_uv 0.15 only writes to the streams it dialled (src/uv_send.c:
 * uv_write and uv_close; uv_read_start is only in src/uv_recv.c, on
 * accepted streams), and we do not read it either, so no byte a peer sends
 * on it reaches anything: it waits in the socket's receive buffer, shrunk
 * to the kernel's least. Raft learns of a dead direct link from a failed
 * write (the dead-link bound below still applies), as with raft_uv_tcp.
 *
 * Inbound (listen): accept; with TLS, a handshake in which the peer must
 * present a certificate from the peer CA and pass the member hook; then
 * raft_uv_tcp's own handshake (protocol 1, the peer's id, its address),
 * read and checked by us; then the socketpair is made and raft gets its
 * end through the accept callback. Every byte the peer sends after that
 * goes through a raft/rframe.h check before it is copied to raft: a message
 * over its bound or that breaks raft's framing closes the link, and raft
 * only sees its stream end. Outbound (connect): TCP, TLS (the peer's
 * certificate checked against the IP of its address, the peer CA and the
 * member hook), our raft handshake, then raft's end goes to the connect
 * callback. raft_uv never reads an outbound stream; what a peer sends on a
 * TLS one is decrypted (key updates, alerts) and dropped, on a plaintext
 * one it is never read (above).
 *
 * With TLS and a bind hook, a member's certificate is also bound to the
 * member it speaks as: inbound, once raft's handshake named the peer's id
 * and address (before raft gets its end); outbound, for the id and address
 * raft dials (before our handshake). A TLS link keeps its peer's
 * certificate, and transport_recheck asks the bind hook again for every
 * open link (the directory or the access file changed).
 *
 * Every link has a handshake deadline (TLS and raft handshake together).
 * Copies are bounded both ways (tls/splice.h, shared with the HTTPS
 * terminator): past LINK_QUEUE_MAX bytes queued towards one end, the other
 * end is not read until half of it drained.
 *
 * Lifetimes: the transport lives inside struct uvio (raft/uvio.h); raft's
 * end of a link is raft's once handed (raft_uv closes and raft_free()s it),
 * and so is a direct link's TCP handle (raft_malloc'd for that); everything
 * else is ours and is released when the link closes (a direct link closes
 * as it is handed). Loop thread only. */
#ifndef ONCE_RAFT_TRANSPORT_H_
#define ONCE_RAFT_TRANSPORT_H_

#include <stdbool.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "raft/rframe.h"
#include "tls/tls.h"

#define LINK_QUEUE_MAX (8u << 20)
/* The least user_timeout_ms onced sets (see struct transport_config). */
#define TRANSPORT_USER_TIMEOUT_MIN_MS 1000u

struct transport_config
{
    /* TLS: the contexts of the two directions (borrowed; they outlive the
     * transport; read when a link starts, so a swapped context is used by
     * the next link). server: inbound, trusting the peer CA only; client:
     * outbound, with this node's certificate. NULL or empty: plaintext. */
    struct tls_slot *server;
    struct tls_slot *client;
    /* TLS: may this verified certificate speak Raft with us? (the member
     * role). 0, or a negative code with @why (ERR_MSG_SIZE). NULL: every
     * certificate from the peer CA may. */
    int (*member)(void *arg, X509 *cert, char *why);
    /* TLS: may this member's certificate speak as Raft id @id at Raft
     * address @address (inbound: what its handshake names; outbound: what
     * raft dials)? 0, or a negative code with @why (ERR_MSG_SIZE); a
     * refusal counts in bind_refused. NULL: any member may name any id. */
    int (*bind)(void *arg,
                X509 *cert,
                uint64_t id,
                const char *address,
                char *why);
    void *arg;
    struct rframe_limits limits;
    /* "IP:PORT" to listen on when it is not the node's Raft address (the
     * address in the configuration, which peers dial and the handshake
     * names): e.g. a Kubernetes pod listening on its pod IP behind a
     * stable per-pod Service address. Borrowed, outlives the transport.
     * NULL: listen on the Raft address. */
    const char *listen;
    unsigned handshake_ms; /* 0: TLS_HANDSHAKE_MS_DEFAULT */
    /* Dead-link bound, ms (TCP_USER_TIMEOUT on every link, with keepalive
     * probes after as many whole seconds idle): a link whose bytes or SYN
     * go unacknowledged that long, or whose idle peer stops answering
     * probes, is closed, and raft_uv dials again after its retry delay.
     * Without it a link cut and then healed stays silent until TCP's next
     * retransmission, seconds after the heal (the backoff doubles), and a
     * peer that is gone is noticed after ~15 min. 0: the kernel's. */
    unsigned user_timeout_ms;
    /* Log hook ("info"|"warn"|"error"); NULL: silent. */
    void (*log)(void *arg, const char *level, const char *msg);
};

struct transport_stats
{
    uint64_t accepted;  /* inbound links handed to raft */
    uint64_t connected; /* outbound links handed to raft (direct too) */
    uint64_t refused;   /* links closed for a handshake, TLS, the member
                           hook or a framing/size check */
    uint64_t messages;  /* inbound messages checked whole */
    /* Of refused: the bind hook said no (a member's certificate naming a
     * Raft id or address not its own). */
    uint64_t bind_refused;
};

struct transport;

/* Make the transport and fill @t (the raft_uv_transport raft_uv_init
 * takes: our init/listen/connect/close, impl = the transport).
 * @cfg is copied. 0, or RAFT_NOMEM. */
int transport_init(struct raft_uv_transport *t,
                   uv_loop_t *loop,
                   const struct transport_config *cfg);

/* After raft_uv_close and the transport's close callback: free it. */
void transport_free(struct raft_uv_transport *t);

void transport_stats(const struct raft_uv_transport *t,
                     struct transport_stats *st);

/* Ask the bind hook again for every open TLS link, with the id and address
 * it was opened with; close (and count in bind_refused) those it refuses
 * now. Never from inside a raft callback (it may close raft's streams). */
void transport_recheck(struct raft_uv_transport *t);

#endif /* ONCE_RAFT_TRANSPORT_H_ */
