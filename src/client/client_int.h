/* client/client_int.h: the state of a libonce client, shared by the files
 * that make it (private to src/client and its tests):
 *
 *   - op.c: the engine of one call (struct op): nodes and the preferred
 *     one (leader discovery through hints), attempts over rpc_channel, the
 *     retry decision, backoff and deadlines, completion;
 *   - client.c: the client's lifetime and the data calls of once.h
 *     (claim, complete, release, lookup, forget; async claims, once_run);
 *   - admin.c: the admin calls of once.h (status, members, transfer,
 *     snapshot);
 *   - wire.c, wire_read.c, names.c: the pure parts (client.h).
 *
 * Ownership: a client owns its loop, its channels (one per node) and every
 * op it made; an op is freed when its result has been handed over (a
 * synchronous call's return, an async call's callback). Not thread-safe:
 * one client is used by one thread at a time, as once.h says. */
#ifndef ONCE_CLIENT_CLIENT_INT_H_
#define ONCE_CLIENT_CLIENT_INT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "client/client.h"
#include "rpc/conn.h"

#define DEFAULT_TIMEOUT_MS   5000u
#define DEFAULT_MAX_INFLIGHT 1024u

struct node
{
    char addr[ONCE_ADDR_MAX + 1];
    struct rpc_channel *ch;
};

struct op;

struct once_client
{
    uv_loop_t loop;
    uv_timer_t timer;     /* wakes ops waiting for their next attempt */
    uv_timer_t run_timer; /* wakes once_run at its timeout */
    struct rpc_limits limits;
    struct tls_slot tls; /* ctx NULL: plaintext */
    struct node nodes[ONCE_ADDRS_MAX];
    size_t n_nodes;
    size_t preferred; /* first node of a new call */
    uint32_t timeout_ms;
    uint32_t max_inflight;
    bool pinned;
    uint8_t cluster_id[ONCE_ID_LEN];
    unsigned outstanding; /* async ops whose callback has not run */
    struct op *waiting;   /* ops between attempts */
    struct op *done_head; /* async ops done, callback not yet run */
    struct op *done_tail;
    struct op *async_ops; /* every async op not yet delivered */
    bool closing;
    unsigned in_callback; /* depth of async callbacks running */
    bool free_pending;    /* once_client_free from inside a callback */
    char last_error[ERR_MSG_SIZE];
};

struct op
{
    struct once_client *c;
    enum rpc_method method;
    bool write;    /* may change state: an outcome may be unknown */
    bool one_node; /* status at a given address: never elsewhere */
    bool no_hint;  /* status: served by each node itself */
    uint8_t *body;
    size_t body_len;
    bool has_request_id;
    uint8_t request_id[ONCE_ID_LEN];
    uint32_t timeout_ms;
    uint64_t deadline; /* loop time, ms */
    size_t node;
    unsigned attempts;
    unsigned backoff_ms;
    unsigned hint_hops;
    bool maybe_applied; /* some attempt may have taken effect */
    bool done;
    uint64_t wake_at;
    struct op *wprev, *wnext; /* c->waiting */
    struct op *dnext;         /* c->done_head */
    struct op *aprev, *anext; /* c->async_ops */
    bool async;
    once_cb cb;
    void *arg;
    struct client_outputs out;
    struct once_result res; /* the latest attempt's, then the call's */
};

/* A new op of @m on @c (@write: it may change state); NULL if out of
 * memory. The caller packs op->body and sets what the call needs. */
struct op *op_new(struct once_client *c, enum rpc_method m, bool write);
void op_free(struct op *op);

/* Give @op its request id: @given (ONCE_ID_LEN bytes), or a fresh one.
 * 0, or -EIO if none could be made (once_request_id_new). */
int op_take_request_id(struct op *op, const uint8_t *given);

/* Start @op's first attempt, with its deadline @timeout_ms from now (0:
 * the client's default). */
void op_start(struct op *op, uint32_t timeout_ms);

/* As op_start, the first attempt @delay_ms from now (0: at once); the
 * deadline still counts from now. A batch's next round (batch.c). */
void op_start_after(struct op *op, uint32_t timeout_ms, uint64_t delay_ms);

/* The admission of an asynchronous call on @c (not NULL): -ESHUTDOWN if
 * the client is closing, -EBUSY at max_inflight (each with last_error
 * set), else 0. */
int client_async_admit(struct once_client *c);

/* Make @op an asynchronous call of @c with callback @cb(@arg): linked in
 * c->async_ops and counted in c->outstanding. The caller then starts it
 * (op_start or op_start_after). */
void client_async_link(struct once_client *c,
                       struct op *op,
                       once_cb cb,
                       void *arg);

/* Run @op to its end, move its result into @r (the caller's to clear),
 * free @op; returns r->status. */
int op_run_sync(struct op *op, uint32_t timeout_ms, struct once_result *r);

/* Take @op (between attempts) off the waiting list, and end it because
 * the client is closing (@sent: its last attempt may have reached a
 * node). */
void op_unwait(struct op *op);
void op_finish_closing(struct op *op, bool sent);

/* The index of node @addr (@len bytes, no NUL needed), added (with its
 * channel) if new and there is room; else -EINVAL (not a valid address),
 * -ENOSPC (the list is full) or rpc_channel_open's code (RPC_E_*). */
int client_node_find_or_add(struct once_client *c,
                            const char *addr,
                            size_t len);

/* A result made by the library itself (no round trip): @r is cleared and
 * filled with @status, applied FALSE and @msg; returns @status. */
int client_fail_local(struct once_result *r,
                      enum once_status status,
                      const char *msg);

/* Common checks of a synchronous call; false: @r is filled. */
bool client_sync_begin(once_client *c, struct once_result *r);

/* Messages are for people: truncated at their buffer's size, on purpose. */
void client_text_put(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* ONCE_CLIENT_CLIENT_INT_H_ */
