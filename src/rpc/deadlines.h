/* rpc/deadlines.h: the calls' deadlines, earliest first (a binary min-heap).
 *
 * rpc_server.c keeps one of these per server under a single libuv timer
 * armed for the earliest deadline, instead of a timer handle per call: a
 * call costs a push when it arrives and a removal when it is answered,
 * with no handle to init, stop and close (a close callback through the
 * loop) per call. Calls of one connection mostly arrive in deadline order
 * (the same default deadline, received later), so a push is usually a
 * store at the end with one comparison; out of order it is O(log n).
 *
 * Order: by `at`, then by push order (seq), so calls with the same
 * deadline expire in the order they arrived, as libuv's timers do.
 *
 * Ownership: the heap owns its array of pointers; the nodes are the
 * caller's, embedded in what they time (struct call). A node is queued
 * from dl_push until dl_remove or dl_pop_due; the caller must remove a
 * node before freeing it. Not thread-safe (the server's loop thread). */
#ifndef ONCE_RPC_DEADLINES_H_
#define ONCE_RPC_DEADLINES_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* idx of a node that is not in a heap. */
#define DL_NONE SIZE_MAX

struct dl_node
{
    uint64_t at;  /* the deadline, in the caller's clock (uv_now ms) */
    uint64_t seq; /* push order: the tie-break */
    size_t idx;   /* position in the heap's array, or DL_NONE */
};

struct dl_heap
{
    struct dl_node **v; /* v[0] the earliest; n used of cap */
    size_t n;
    size_t cap;
    uint64_t next_seq;
};

/* An empty heap (allocates nothing). */
void dl_init(struct dl_heap *h);

/* Free the array. The heap must be empty: the nodes are the caller's. */
void dl_free(struct dl_heap *h);

/* A node that is in no heap: dl_queued is false. */
void dl_node_init(struct dl_node *x);

static inline bool dl_queued(const struct dl_node *x)
{
    return x->idx != DL_NONE;
}

/* Queue @x (not queued) for @at. 0, or -ENOMEM (the array could not grow:
 * @x stays unqueued). */
int dl_push(struct dl_heap *h, struct dl_node *x, uint64_t at);

/* Take @x out of @h; nothing if it is not queued. */
void dl_remove(struct dl_heap *h, struct dl_node *x);

/* The earliest node, or NULL when empty. Stays queued. */
static inline struct dl_node *dl_peek(const struct dl_heap *h)
{
    return h->n > 0 ? h->v[0] : NULL;
}

/* The earliest node if its deadline is at or before @now, taken out of
 * the heap; NULL if none is due. */
struct dl_node *dl_pop_due(struct dl_heap *h, uint64_t now);

#endif
