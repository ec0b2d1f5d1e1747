/* common/spare.h: a bounded free list of equal-sized blocks, for
 * structures allocated and released once per call on a hot path (at 256
 * calls in flight glibc's per-thread cache, 7 blocks a size, overflows
 * and every calloc/free pair goes through _int_malloc and _int_free:
 * ~440 instructions per claim, bench/cpu/run).
 *
 * spare_get gives a zeroed block, from the list or calloc; spare_put
 * keeps a block on the list, or frees it past @max. A block on the list
 * is poisoned under ASan (common/asan.h), so a use after its release is
 * reported as a use after free would be; the list's link is kept in the
 * block's first bytes. Every block of one list has the list's @size.
 * Not thread-safe: the owner's loop thread. */
#ifndef ONCE_COMMON_SPARE_H_
#define ONCE_COMMON_SPARE_H_

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/asan.h"

struct spare
{
    void *head;  /* the newest kept block */
    size_t n;    /* blocks kept */
    size_t max;  /* kept at most */
    size_t size; /* of each block: at least a pointer */
};

static inline void spare_init(struct spare *l, size_t size, size_t max)
{
    l->head = NULL;
    l->n = 0;
    l->max = max;
    l->size = size < sizeof(void *) ? sizeof(void *) : size;
}

/* A zeroed block: a kept one, or a new one. NULL: out of memory. */
static inline void *spare_get(struct spare *l)
{
    void *p = l->head;

    if (p == NULL) {
        return calloc(1, l->size);
    }
    ONCE_UNPOISON(p, l->size);
    memcpy(&l->head, p, sizeof l->head);
    l->n--;
    memset(p, 0, l->size);
    return p;
}

/* Give @p (from spare_get of this list) back. */
static inline void spare_put(struct spare *l, void *p)
{
    if (l->n >= l->max) {
        free(p);
        return;
    }
    memcpy(p, &l->head, sizeof l->head);
    l->head = p;
    l->n++;
    ONCE_POISON(p, l->size);
}

/* Free every kept block. */
static inline void spare_drain(struct spare *l)
{
    while (l->head != NULL) {
        void *p = l->head;

        ONCE_UNPOISON(p, l->size);
        memcpy(&l->head, p, sizeof l->head);
        free(p);
    }
    l->n = 0;
}

#endif /* ONCE_COMMON_SPARE_H_ */
