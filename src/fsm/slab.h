/* fsm/slab.h: the record store's allocator, addressed by 32-bit handles.
 *
 * Why not malloc: a live NONCE record is ~80 bytes, where glibc's 8-16 bytes
 * of chunk overhead and 16-byte rounding would cost 15-20 %, and pointers in
 * the hash table and timer wheel would cost 8 bytes each where a handle costs
 * 4. Objects are carved from 64 KiB pages, one size class per 8 bytes up to
 * SLAB_OBJ_MAX; freed objects go to their class's free list and are reused.
 * Pages are returned to the system only by slab_close (a table that shrank
 * keeps its pages for the next growth).
 *
 * A handle is page << 13 | offset / 8; handle 0 is never returned (NULL).
 * Not thread-safe. */
#ifndef ONCE_FSM_SLAB_H_
#define ONCE_FSM_SLAB_H_

#include <stddef.h>
#include <stdint.h>

#define SLAB_PAGE_SIZE  65536u
#define SLAB_PAGE_SHIFT 13 /* 8-byte units per page: 8192 */
#define SLAB_OBJ_MAX    1024u
#define SLAB_N_CLASSES  (SLAB_OBJ_MAX / 8)
#define SLAB_MAX_PAGES  (1u << (32 - SLAB_PAGE_SHIFT))

struct slab_class
{
    uint32_t free_head; /* handle of the first free object, 0 if none */
    uint32_t page;      /* page being carved, or UINT32_MAX */
    uint32_t next_off;  /* next free offset in that page, in 8-byte units */
};

struct slab
{
    uint8_t **pages;
    uint32_t n_pages;
    uint32_t cap_pages;
    uint64_t bytes_live; /* sum of rounded sizes of live objects */
    struct slab_class classes[SLAB_N_CLASSES];
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

/* Bytes of pages handed out (what the records cost). Pages are reserved in
 * 2 MiB groups, so up to 2 MiB more is reserved but untouched. */
static inline uint64_t slab_memory(const struct slab *s)
{
    return (uint64_t)s->n_pages * SLAB_PAGE_SIZE;
}

#endif /* ONCE_FSM_SLAB_H_ */
