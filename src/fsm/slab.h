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
 *
 * Copy-on-write for frozen views (fsm_freeze): slab_freeze hands out a copy
 * of the page pointer array and marks every page holding a live object
 * frozen. From then on the pages the view sees never change: every write to
 * an object goes through slab_mut (or slab_alloc/slab_free), which first
 * copies a frozen page into a spare one and repoints the live pages[p]. So
 * a pointer from slab_ptr is for reading only, and must not be kept across
 * a slab_mut/slab_alloc/slab_free of the same page (it may then point at
 * the frozen original); take the pointer from slab_mut before changing an
 * object instead. slab_thaw ends the view: the originals of copied pages
 * join the spare pool, which new pages and later copies draw from.
 *
 * Not thread-safe, except that while a view is live one other thread may
 * read the frozen pages (through the array slab_freeze returned) while the
 * owner keeps using the slab. */
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
    bool frozen;   /* a live view reads this page: copy before writing */
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

    /* Page memory: 2 MiB groups carved into pages, plus spare pages (the
     * originals of pages copied for a view), reused before carving. */
    uint8_t **groups;
    uint32_t n_groups;
    uint32_t group_used; /* pages carved from the last group */
    uint8_t **spare;
    uint32_t n_spare;
    uint32_t cap_spare;
    uint32_t n_cow; /* pages copied since slab_freeze */
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

/* The object's memory, for reading. @h must be live and non-zero. */
static inline const void *slab_ptr(const struct slab *s, uint32_t h)
{
    return s->pages[h >> SLAB_PAGE_SHIFT] +
           ((size_t)(h & ((1u << SLAB_PAGE_SHIFT) - 1)) << 3);
}

/* Copy frozen page @p for writing (slab_mut's slow path). Aborts when out
 * of memory: a write cannot be refused halfway through an apply. */
void slab_cow(struct slab *s, uint32_t p);

/* The object's memory, for writing: copies its page first if frozen. */
static inline void *slab_mut(struct slab *s, uint32_t h)
{
    uint32_t p = h >> SLAB_PAGE_SHIFT;

    if (__builtin_expect(s->meta[p].frozen, 0)) {
        slab_cow(s, p);
    }
    return s->pages[p] + ((size_t)(h & ((1u << SLAB_PAGE_SHIFT) - 1)) << 3);
}

/* Start a view: a copy of pages[0..n_pages) (malloc'd, the caller's until
 * slab_thaw), with every page holding a live object marked frozen. NULL on
 * allocation failure (nothing changed). *@n gets the number of pages. */
uint8_t **slab_freeze(struct slab *s, uint32_t *n);

/* End the view started by slab_freeze (@pages, @n as it returned): pages
 * still frozen are thawed, copied pages' originals become spares, @pages
 * is freed. */
void slab_thaw(struct slab *s, uint8_t **pages, uint32_t n);

/* Bytes of page copies made for the live view. */
static inline uint64_t slab_cow_bytes(const struct slab *s)
{
    return (uint64_t)s->n_cow * SLAB_PAGE_SIZE;
}

/* Bytes of pages held (what the store costs the process), empty pooled
 * pages and spares included. Pages are reserved in 2 MiB groups, so up to 2 MiB
 * more is reserved but untouched. */
static inline uint64_t slab_memory(const struct slab *s)
{
    return ((uint64_t)s->n_pages + s->n_spare) * SLAB_PAGE_SIZE;
}

#endif /* ONCE_FSM_SLAB_H_ */
