/* rpc/conn_int.h: the connection both sides of rpc/conn.h are built on,
 * private to src/rpc (as libuv's stream.c is under tcp.c).
 *
 * conn.c owns one struct conn per TCP stream: the read buffer and the
 * frames decoded from it, the cork and the write queue, backpressure and
 * the handles' close. What a frame means, and who keeps the connection, is
 * its side's: rpc_server.c (accepted connections, calls) or rpc_channel.c
 * (one outgoing connection, pending calls), reached through struct
 * conn_side. conn.c knows neither.
 *
 * Lifetime: a conn is allocated by its side, handed to conn_init, and freed
 * by conn.c once its handles have closed (conn_close) and no reference
 * counted in `refs` is left; side->freed runs just after the free, with the
 * owner, so the side can release what waited for it.
 *
 * Not thread-safe: one uv loop, as conn.h says. */
#ifndef ONCE_RPC_CONN_INT_H_
#define ONCE_RPC_CONN_INT_H_

#include "rpc/conn.h"
#include "tls/tls.h"

struct conn;

/* A side's part in a connection. Every callback may close @c (conn_close). */
struct conn_side
{
    /* A whole frame decoded into @v (the conn's view: valid during the
     * call only). */
    void (*frame)(struct conn *c, struct envelope_view *v);
    /* A frame that does not decode, or breaks the side's rules: @errmsg
     * says why. */
    void (*bad_frame)(struct conn *c, const char *errmsg);
    /* conn_close started: the side unlinks @c (runs once, before the
     * handles close). */
    void (*closing)(struct conn *c);
    /* @c was freed; @owner is what its union below pointed to. */
    void (*freed)(void *owner);
    /* Stop reading while more than out_max bytes are queued (a server: its
     * peer must read its answers before it sends more calls). */
    bool pause_reads;
    /* TLS only (conn_tls_start). ready: the handshake completed and the
     * peer's chain was verified (c->peer_cert is set when the peer sent
     * one); frames flow from now on. tls_failed: the handshake failed, its
     * deadline passed, or a record did not decode (@errmsg says which);
     * the conn closes right after. Either may be NULL. */
    void (*ready)(struct conn *c);
    void (*tls_failed)(struct conn *c, int rv, const char *errmsg);
    /* The memory account (struct conn.mem) went over its max because of
     * @c; NULL for a side without an account. Must not close anything
     * itself: it runs inside conn.c's reads and sends. */
    void (*over_memory)(struct conn *c);
};

/* Bytes held by a side's connections (rpc_server.c: one per server). */
struct conn_mem
{
    size_t used;
    size_t max; /* 0: no limit */
};

struct conn
{
    uv_tcp_t tcp;
    const struct conn_side *side;
    union {
        struct rpc_server *srv; /* rpc_server.c's connections */
        struct rpc_channel *ch; /* rpc_channel.c's */
        void *owner;            /* what conn.c passes to side->freed */
    };
    struct conn *prev, *next; /* the server's list (rpc_server.c) */
    const struct rpc_limits *lim;

    /* Reading (conn.c): unread bytes are rbuf[rpos..rlen). */
    uint8_t *rbuf;
    size_t rpos, rlen, rcap;
    struct envelope_view view;

    size_t out_bytes; /* queued and corked, not yet written */
    bool paused;      /* reading stopped for backpressure */
    bool closing;     /* uv_close called or pending after a last write */
    /* Close once out_bytes drains; no frame is read meanwhile. Set by a
     * side with the last frame it sends. */
    bool close_after_write;
    bool handle_closed;    /* every handle below has closed */
    unsigned open_handles; /* tcp, and flush when corking */
    /* Frames of this iteration, written by the flush prepare handle. */
    bool corking;
    uv_prepare_t flush;
    uint8_t *cbuf;
    size_t clen, ccap;
    /* Where the next cork starts (0: 4 KiB, no flush yet): twice the
     * last flush's length rounded up to a power of two, 256 B..64 KiB.
     * Growing from 4 KiB by realloc after every flush copied ~230
     * instructions per answer at 256 calls in flight, and a lone answer's
     * 4 KiB missed glibc's per-thread cache (~700 at one call in flight;
     * bench/cpu/run). Bounded, so one burst does not make every cork big. */
    size_t chint;
    unsigned calls; /* server: unanswered calls */
    unsigned refs;  /* server: rpc_calls pointing here (answered or not) */
    uint64_t last_active_ms;   /* a whole frame received (or, server:
                                * answered) */
    uint64_t partial_since_ms; /* the unfinished frame in rbuf started; 0:
                                * none */
    struct conn_mem *mem;      /* the side's account, or NULL */
    size_t mem_held;           /* what this conn counts in *mem */
    uint64_t last_write_ms;    /* last write completion, or queue start */
    /* uv_hrtime() when the frames being handed to the side were read: one
     * clock read per conn_parse, not per frame (a read holds many under
     * load); a server call's received_ns. Valid during side->frame. */
    uint64_t frame_ns;

    /* TLS (conn_tls_start; all zero for plaintext). Frames wait in the
     * cork until the handshake completed; every write is sealed first. */
    bool tls_on;
    struct tls_session tls;
    uv_timer_t hs_timer; /* the handshake deadline; a handle while tls_on */
    /* The verified peer certificate, owned (X509_free with the conn): set
     * once the handshake completed; NULL without TLS. */
    X509 *peer_cert;
    bool peer_member; /* server: what rpc_server_config.peer_member said */
};

/* Zero @c and make its TCP handle on @loop, for @side and @owner, with the
 * limits @l (borrowed: the owner's, which outlive @c). 0, or libuv's error
 * (then @c holds no handle and is the caller's to free). */
int conn_init(struct conn *c,
              uv_loop_t *loop,
              const struct rpc_limits *l,
              const struct conn_side *side,
              void *owner);

/* Cork @c's frames (see conn.c). Call once, after conn_init. */
void conn_cork_init(struct conn *c, uv_loop_t *loop);

/* Make @c a TLS connection on @ctx (server or client side; @host as
 * tls_session_init's), with a handshake deadline of @handshake_ms (0: none).
 * Call after conn_cork_init and before conn_read_start; a client's first
 * flight is written here. 0, or a TLS_E_* code with @errmsg (then @c is
 * unchanged and the caller closes it). */
int conn_tls_start(struct conn *c,
                   SSL_CTX *ctx,
                   bool server,
                   const char *host,
                   unsigned handshake_ms,
                   char *errmsg);

/* Start reading frames (after accept or connect). 0 or libuv's error. */
int conn_read_start(struct conn *c);

/* Encode @v and queue it (corked if corking). 0, or a negative error
 * with @errmsg (ERR_MSG_SIZE; NULL allowed), and then nothing is queued:
 * an encode error, RPC_E_NOMEM, or RPC_E_LOST for a conn that is closing or
 * whose write failed at once (which closes it). */
int conn_send(struct conn *c, const struct envelope_view *v, char *errmsg);

/* Queue a copy of @len bytes of whole, encoded frames. 0, RPC_E_NOMEM, or
 * RPC_E_LOST if the write failed at once; on error nothing is queued and
 * @c stays open (the caller settles what it sent, then closes it). */
int conn_send_copy(struct conn *c, const uint8_t *frames, size_t len);

/* Close @c once: side->closing, then the handles; corked frames are
 * dropped, as uv_close cancels queued writes. Freed later (see the top). */
void conn_close(struct conn *c);

/* Close a conn its side never linked (an accept that failed): the handle
 * only, no side->closing. */
void conn_discard(struct conn *c);

/* Count what @c holds now (read buffer capacity and queued bytes; 0 once
 * closing) in its side's account. */
void conn_account(struct conn *c);

/* Free @c if its handles have closed and refs is 0 (a side that dropped a
 * reference calls it). */
void conn_maybe_free(struct conn *c);

#endif /* ONCE_RPC_CONN_INT_H_ */
