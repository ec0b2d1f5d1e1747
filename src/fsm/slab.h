/* fsm/slab.h: the record store's allocator, addressed by 32-bit handles.
 *
 * Why not malloc: a live NONCE record is ~80 bytes, where glibc's 8-16 bytes
 * of chunk overhead and 16-byte rounding would cost 15-20 %, and pointers in
 * the hash table and timer wheel would cost 8 bytes each where a handle costs
 * 4. Objects are carved from 64 KiB pages (reserved 32 at a time, as one
 * huge-page-aligned 2 MiB group), one size class per 8 bytes up to
 * SLAB_OBJ_MAX. Each page serves one class at a time and keeps its own free
 * list and live count; a page whose last object is freed goes back to a
 * shared pool that any class reuses, so memory freed by one key length is
 * not stranded when traffic moves to another. Pages are returned to the
 * system only by slab_close.
 *
 * A handle is page << 13 | offset / 8; handle 0 is never returned (NULL).
 * Not thread-safe. */
#ifndef ONCE_FSM_SLAB_H_
#define ONCE_FSM_SLAB_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLAB_PAGE_SIZE  65536u
#define SLAB_PAGE_SHIFT 13 /* 8-byte units per page: 8192 */
#define SLAB_OBJ_MAX    1024u
#define SLAB_N_CLASSES  (SLAB_OBJ_MAX / 8)
#define SLAB_MAX_PAGES  (1u << (32 - SLAB_PAGE_SHIFT))
#define SLAB_NONE       UINT32_MAX

/* Per-page bookkeeping (kept apart from the pages, 20 bytes each). */
struct slab_page
{
    uint32_t free_head; /* freed objects of this page, 0 if none */
    uint32_t prev;      /* in its class's partial list, or the empty pool */
    uint32_t next;
    uint16_t live; /* objects handed out */
    uint16_t bump; /* next never-used offset, in 8-byte units */
    uint8_t cls;   /* size class + 1; 0 when in the empty pool */
    bool in_list;  /* on a partial list or in the empty pool */
};

struct slab
{
    uint8_t **pages;
    struct slab_page *meta;
    uint32_t n_pages;
    uint32_t cap_pages;
    uint32_t empty;                   /* pool of pages with no live object */
    uint32_t n_empty;                 /* pages in that pool */
    uint64_t bytes_live;              /* sum of rounded sizes of live objects */
    uint32_t partial[SLAB_N_CLASSES]; /* pages with room, per class */
};

void slab_init(struct slab *s);
void slab_close(struct slab *s);

/* Round @size (1..SLAB_OBJ_MAX) up to its class size. */
static inline size_t slab_size(size_t size)
{
    return (size + 7) & ~(size_t)7;
}

/* Allocate @size bytes (1..SLAB_OBJ_MAX), 8-byte aligned, contents
 * unspecified. Returns the handle, or 0 when out of memory or handles. */
uint32_t slab_alloc(struct slab *s, size_t size);

/* Free object @h that was allocated with @size. */
void slab_free(struct slab *s, uint32_t h, size_t size);

/* The object's memory. @h must be live and non-zero. */
static inline void *slab_ptr(const struct slab *s, uint32_t h)
{
    return s->pages[h >> SLAB_PAGE_SHIFT] +
           ((size_t)(h & ((1u << SLAB_PAGE_SHIFT) - 1)) << 3);
}

/* Bytes of pages held (what the store costs the process), empty pooled
 * pages included. Pages are reserved in 2 MiB groups, so up to 2 MiB more
 * is reserved but untouched. */
static inline uint64_t slab_memory(const struct slab *s)
{
    return (uint64_t)s->n_pages * SLAB_PAGE_SIZE;
}

#endif /* ONCE_FSM_SLAB_H_ */
