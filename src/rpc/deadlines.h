/* rpc/deadlines.h: the calls' deadlines, earliest first.
 *
 * rpc_server.c keeps one of these per server under a single libuv timer
 * armed for the earliest deadline, instead of a timer handle per call: a
 * call costs a push when it arrives and a removal when it is answered,
 * with no handle to init, stop and close (a close callback through the
 * loop) per call.
 *
 * Two parts: calls mostly arrive in deadline order (the same default
 * deadline or the same client budget, received later), and those go to
 * the tail of a sorted intrusive list: a push and a removal in O(1). A
 * call whose deadline is before the list's tail (a shorter budget than
 * the ones before it) goes to a binary min-heap instead, O(log n) for
 * the few of them. The earliest is the first of the list's head and the
 * heap's root. A heap alone cost ~230 instructions per removal at 256
 * calls in flight (callgrind, bench/cpu/run): the answers come in
 * arrival order, so nearly every removal was of the root.
 *
 * Order: by `at`, then by push order (seq), so calls with the same
 * deadline expire in the order they arrived, as libuv's timers do.
 *
 * Ownership: the queue owns its heap array; the nodes are the caller's,
 * embedded in what they time (struct call). A node is queued from dl_push
 * until dl_remove or dl_pop_due; the caller must remove a node before
 * freeing it. Not thread-safe (the server's loop thread). */
#ifndef ONCE_RPC_DEADLINES_H_
#define ONCE_RPC_DEADLINES_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* idx of a node that is not in the heap (out, or in the list). */
#define DL_NONE SIZE_MAX

enum dl_where {
    DL_OUT = 0, /* not queued */
    DL_LIST,
    DL_HEAP,
};

struct dl_node
{
    uint64_t at;  /* the deadline, in the caller's clock (uv_now ms) */
    uint64_t seq; /* push order: the tie-break */
    struct dl_node *prev, *next; /* DL_LIST */
    size_t idx;                  /* DL_HEAP: position in the array */
    enum dl_where where;
};

struct dl_heap
{
    /* The list: sorted by (at, seq), head the earliest. */
    struct dl_node *head, *tail;
    /* The heap: v[0] the earliest; n used of cap. */
    struct dl_node **v;
    size_t n;
    size_t cap;
    size_t count; /* queued in both */
    uint64_t next_seq;
};

/* An empty queue (allocates nothing). */
void dl_init(struct dl_heap *h);

/* Free the array. The queue must be empty: the nodes are the caller's. */
void dl_free(struct dl_heap *h);

/* A node that is in no queue: dl_queued is false. */
void dl_node_init(struct dl_node *x);

static inline bool dl_queued(const struct dl_node *x)
{
    return x->where != DL_OUT;
}

/* Queue @x (not queued) for @at. 0, or -ENOMEM (the heap's array could not
 * grow: @x stays unqueued). */
int dl_push(struct dl_heap *h, struct dl_node *x, uint64_t at);

/* Take @x out of @h; nothing if it is not queued. */
void dl_remove(struct dl_heap *h, struct dl_node *x);

/* The earliest node, or NULL when empty. Stays queued. */
struct dl_node *dl_peek(const struct dl_heap *h);

/* The earliest node if its deadline is at or before @now, taken out of
 * the queue; NULL if none is due. */
struct dl_node *dl_pop_due(struct dl_heap *h, uint64_t now);

#endif
