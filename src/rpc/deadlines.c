/* rpc/deadlines.c: a binary min-heap of deadlines (deadlines.h). */
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
    h->v = NULL;
    h->n = 0;
    h->cap = 0;
    h->next_seq = 0;
}

void dl_free(struct dl_heap *h)
{
    ONCE_ASSERT(h->n == 0, "every node was removed before the heap is freed");
    free(h->v);
    h->v = NULL;
    h->cap = 0;
}

void dl_node_init(struct dl_node *x)
{
    x->at = 0;
    x->seq = 0;
    x->idx = DL_NONE;
}

int dl_push(struct dl_heap *h, struct dl_node *x, uint64_t at)
{
    ONCE_ASSERT(x->idx == DL_NONE, "a node is queued once");
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
    x->at = at;
    x->seq = h->next_seq++;
    h->n++;
    sift_up(h, h->n - 1, x);
    return 0;
}

void dl_remove(struct dl_heap *h, struct dl_node *x)
{
    size_t i = x->idx;
    struct dl_node *last;

    if (i == DL_NONE) {
        return;
    }
    ONCE_ASSERT(i < h->n && h->v[i] == x, "a queued node is where idx says");
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

struct dl_node *dl_pop_due(struct dl_heap *h, uint64_t now)
{
    struct dl_node *x = dl_peek(h);

    if (x == NULL || x->at > now) {
        return NULL;
    }
    dl_remove(h, x);
    return x;
}
