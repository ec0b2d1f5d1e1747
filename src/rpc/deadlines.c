/* rpc/deadlines.c: deadlines in order: a sorted list and a binary
 * min-heap (deadlines.h). */
#include "rpc/deadlines.h"

#include <errno.h>
#include <stdlib.h>

#include "common/assert.h"

/* The first array: enough for a few connections' calls before growing. */
#define DL_CAP_MIN 64

static bool before(const struct dl_node *a, const struct dl_node *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void place(struct dl_heap *h, size_t i, struct dl_node *x)
{
    h->v[i] = x;
    x->idx = i;
}

/* Move @x up from the hole at @i to where its parent is not after it. */
static void sift_up(struct dl_heap *h, size_t i, struct dl_node *x)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;

        if (!before(x, h->v[p])) {
            break;
        }
        place(h, i, h->v[p]);
        i = p;
    }
    place(h, i, x);
}

/* Move @x down from the hole at @i to where no child is before it. */
static void sift_down(struct dl_heap *h, size_t i, struct dl_node *x)
{
    for (;;) {
        size_t l = 2 * i + 1;
        size_t m;

        if (l >= h->n) {
            break;
        }
        m = l + 1 < h->n && before(h->v[l + 1], h->v[l]) ? l + 1 : l;
        if (!before(h->v[m], x)) {
            break;
        }
        place(h, i, h->v[m]);
        i = m;
    }
    place(h, i, x);
}

void dl_init(struct dl_heap *h)
{
    h->head = h->tail = NULL;
    h->v = NULL;
    h->n = 0;
    h->cap = 0;
    h->count = 0;
    h->next_seq = 0;
}

void dl_free(struct dl_heap *h)
{
    ONCE_ASSERT(h->count == 0 && h->n == 0 && h->head == NULL,
                "every node was removed before the queue is freed");
    free(h->v);
    h->v = NULL;
    h->cap = 0;
}

void dl_node_init(struct dl_node *x)
{
    x->at = 0;
    x->seq = 0;
    x->prev = x->next = NULL;
    x->idx = DL_NONE;
    x->where = DL_OUT;
}

static void list_append(struct dl_heap *h, struct dl_node *x)
{
    x->where = DL_LIST;
    x->next = NULL;
    x->prev = h->tail;
    if (h->tail != NULL) {
        h->tail->next = x;
    } else {
        h->head = x;
    }
    h->tail = x;
}

static void list_unlink(struct dl_heap *h, struct dl_node *x)
{
    if (x->prev != NULL) {
        x->prev->next = x->next;
    } else {
        h->head = x->next;
    }
    if (x->next != NULL) {
        x->next->prev = x->prev;
    } else {
        h->tail = x->prev;
    }
    x->prev = x->next = NULL;
}

static int heap_push(struct dl_heap *h, struct dl_node *x)
{
    if (h->n == h->cap) {
        size_t cap = h->cap > 0 ? h->cap * 2 : DL_CAP_MIN;
        struct dl_node **v;

        if (cap > SIZE_MAX / sizeof *v) {
            return -ENOMEM; /* UNTESTED: more calls than memory */
        }
        v = realloc(h->v, cap * sizeof *v);
        if (v == NULL) {
            return -ENOMEM; /* UNTESTED: malloc */
        }
        h->v = v;
        h->cap = cap;
    }
    x->where = DL_HEAP;
    h->n++;
    sift_up(h, h->n - 1, x);
    return 0;
}

static void heap_remove(struct dl_heap *h, struct dl_node *x)
{
    size_t i = x->idx;
    struct dl_node *last;

    ONCE_ASSERT(i < h->n && h->v[i] == x, "a heap node is where idx says");
    x->idx = DL_NONE;
    last = h->v[--h->n];
    if (last == x) {
        return; /* it was the last slot */
    }
    /* The last node fills the hole: up if it is before the hole's parent,
     * else down. */
    if (i > 0 && before(last, h->v[(i - 1) / 2])) {
        sift_up(h, i, last);
    } else {
        sift_down(h, i, last);
    }
}

int dl_push(struct dl_heap *h, struct dl_node *x, uint64_t at)
{
    ONCE_ASSERT(x->where == DL_OUT, "a node is queued once");
    x->at = at;
    x->seq = h->next_seq++;
    /* In order (not before the tail; equal deadlines are, by seq): the
     * list. Else the heap. */
    if (h->tail == NULL || !before(x, h->tail)) {
        list_append(h, x);
    } else {
        int rv = heap_push(h, x);

        if (rv != 0) {
            return rv; /* UNTESTED: malloc */
        }
    }
    h->count++;
    return 0;
}

void dl_remove(struct dl_heap *h, struct dl_node *x)
{
    switch (x->where) {
        case DL_OUT:
            return;
        case DL_LIST:
            list_unlink(h, x);
            break;
        case DL_HEAP:
            heap_remove(h, x);
            break;
    }
    x->where = DL_OUT;
    ONCE_ASSERT(h->count > 0, "count counts the queued nodes");
    h->count--;
}

struct dl_node *dl_peek(const struct dl_heap *h)
{
    struct dl_node *a = h->head;
    struct dl_node *b = h->n > 0 ? h->v[0] : NULL;

    if (a == NULL) {
        return b;
    }
    return b != NULL && before(b, a) ? b : a;
}

struct dl_node *dl_pop_due(struct dl_heap *h, uint64_t now)
{
    struct dl_node *x = dl_peek(h);

    if (x == NULL || x->at > now) {
        return NULL;
    }
    dl_remove(h, x);
    return x;
}
