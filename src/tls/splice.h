/* tls/splice.h: the copy between a TLS session on a network stream and a
 * plaintext local stream (our end of a socketpair), with its bounds.
 *
 * Two terminators hand a peer's TLS connection to a plaintext reader over
 * a socketpair: the Raft transport (raft/transport.c: raft_uv reads the
 * other end) and the HTTPS terminator (http/http_tls.c: MHD does). Both
 * read the two streams themselves (what they do with the bytes differs:
 * raft's handshake and frame checks, MHD's certificate hand-off), and
 * write through here:
 *
 *   to the peer   tls_splice_to_net seals plaintext into records and
 *                 queues them on the network stream; tls_splice_flush
 *                 queues what the session produced by itself (handshake
 *                 records, alerts, close_notify). Without a session
 *                 (tls NULL: the Raft port in plaintext) the bytes are
 *                 queued unchanged;
 *   to the local  tls_splice_to_local queues plaintext on the local end.
 *
 * Each write is first tried directly (uv_try_write): what the kernel takes
 * at once needs no copy, no request and no callback; only the rest is
 * copied and queued (uv_write), and while anything is queued that way a
 * direction's later bytes queue behind it, in order. So an error can come
 * back from the call itself (e.g. UV_EPIPE) as well as from a written
 * callback, and the written callback fires only for queued writes.
 *
 * Bounds: each direction counts the bytes queued (handed to uv_write and
 * not completed). Past queue_max queued towards one stream, the other
 * stream is not read (uv_read_stop) until its queue is at most half of it
 * again (tls_splice_resume, from the owner's written callback): the
 * hysteresis keeps a busy link from stopping and restarting its reads per
 * chunk. So a splice holds at most queue_max plus one read and its
 * sealing each way.
 *
 * Ownership: the splice borrows the two streams and the session (all the
 * owner's, usually in the same struct as the splice); each queued write is
 * a copy the splice owns until its completion. Lifetime: the splice must
 * outlive its writes. libuv calls every write's callback (UV_ECANCELED
 * when the stream closed) before the stream's close callback, so freeing
 * the struct in the last close callback is right.
 *
 * Invariants: net_queued and local_queued are the sums of the lengths of
 * the writes in flight each way; net_paused (local_paused) only while
 * reading the network (local) stream is stopped by the bound; a stream
 * marked done (tls_splice_net_done, tls_splice_local_done) is never read
 * again. Errors: 0 or a libuv code (UV_ENOMEM, uv_write's; UV_EPROTO when
 * sealing fails); after an error the owner closes its streams. Loop thread
 * only. */
#ifndef ONCE_TLS_SPLICE_H_
#define ONCE_TLS_SPLICE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "tls/tls.h"

struct tls_splice;

/* A write finished (@to_net: towards the peer; @status: libuv's, 0 or an
 * error such as UV_ECANCELED after a close). The counts are already down;
 * the owner decides what follows: close, or tls_splice_resume. */
typedef void (*tls_splice_written_cb)(struct tls_splice *sp,
                                      bool to_net,
                                      int status);

struct tls_splice
{
    /* Set by tls_splice_init / tls_splice_local, then read-only. */
    uv_stream_t *net;        /* the peer's stream (ciphertext with a tls) */
    uv_stream_t *local;      /* plaintext; NULL until tls_splice_local */
    struct tls_session *tls; /* NULL: no TLS, bytes pass unchanged */
    size_t queue_max;
    uv_alloc_cb net_alloc, local_alloc; /* to restart reading */
    uv_read_cb net_read, local_read;
    tls_splice_written_cb written;
    void *data; /* the owner's */

    /* State. */
    size_t net_queued, local_queued; /* bytes in flight each way */
    uint64_t net_written;          /* bytes completed (or taken at once) towards
                                      the peer */
    bool net_paused, local_paused; /* reading stopped by the bound */
    bool net_done, local_done;     /* never read again */
};

/* Start a splice on @net (being read with @alloc and @read), sealing with
 * @tls (NULL: none). No local stream yet. */
void tls_splice_init(struct tls_splice *sp,
                     uv_stream_t *net,
                     uv_alloc_cb alloc,
                     uv_read_cb read,
                     struct tls_session *tls,
                     size_t queue_max,
                     tls_splice_written_cb written,
                     void *data);

/* The local stream exists (the owner reads it with @alloc and @read). */
void tls_splice_local(struct tls_splice *sp,
                      uv_stream_t *local,
                      uv_alloc_cb alloc,
                      uv_read_cb read);

/* @n plaintext bytes to the peer (sealed with TLS). 0 or an error. */
int tls_splice_to_net(struct tls_splice *sp, const uint8_t *p, size_t n);
/* What the session has to send (nothing without TLS). 0 or an error. */
int tls_splice_flush(struct tls_splice *sp);
/* @n plaintext bytes to the local stream (which must exist). */
int tls_splice_to_local(struct tls_splice *sp, const uint8_t *p, size_t n);

/* Read again each stream its bound stopped, once the other way drained to
 * half of queue_max. 0 or uv_read_start's error. */
int tls_splice_resume(struct tls_splice *sp);

/* The peer's (local) side ended: stop reading it for good. */
void tls_splice_net_done(struct tls_splice *sp);
void tls_splice_local_done(struct tls_splice *sp);

#endif /* ONCE_TLS_SPLICE_H_ */
