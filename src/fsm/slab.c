#include "fsm/slab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/assert.h"

#define UNITS_PER_PAGE (SLAB_PAGE_SIZE / 8)
/* Pages come in 2 MiB groups, aligned so the kernel can back each group with
 * one transparent huge page: a table of millions of records otherwise pays a
 * page fault per 4 KiB and a TLB miss per record touched. */
#define GROUP_SIZE  (2u << 20)
#define GROUP_PAGES (GROUP_SIZE / SLAB_PAGE_SIZE)

void slab_init(struct slab *s)
{
    memset(s, 0, sizeof *s);
    s->empty = SLAB_NONE;
    for (size_t i = 0; i < SLAB_N_CLASSES; i++) {
        s->partial[i] = SLAB_NONE;
    }
}

void slab_close(struct slab *s)
{
    for (uint32_t i = 0; i < s->n_groups; i++) {
        free(s->groups[i]);
    }
    free(s->groups);
    free(s->spare);
    free(s->pages);
    free(s->meta);
    slab_init(s);
}

/* Doubly linked lists of pages through meta prev/next. */
static void list_push(struct slab *s, uint32_t *head, uint32_t p)
{
    struct slab_page *m = &s->meta[p];

    ONCE_ASSERT(!m->in_list, "a page is on one list at a time");
    m->prev = SLAB_NONE;
    m->next = *head;
    if (*head != SLAB_NONE) {
        s->meta[*head].prev = p;
    }
    *head = p;
    m->in_list = true;
}

static void list_unlink(struct slab *s, uint32_t *head, uint32_t p)
{
    struct slab_page *m = &s->meta[p];

    ONCE_ASSERT(m->in_list, "unlinking a page that is on no list");
    if (m->prev != SLAB_NONE) {
        s->meta[m->prev].next = m->next;
    } else {
        *head = m->next;
    }
    if (m->next != SLAB_NONE) {
        s->meta[m->next].prev = m->prev;
    }
    m->in_list = false;
}

/* Memory for one page: a spare, or the next page of the last group, or a
 * new group. NULL when out of memory. */
static uint8_t *page_mem(struct slab *s)
{
    uint8_t *p;

    if (s->n_spare > 0) {
        return s->spare[--s->n_spare];
    }
    if (s->n_groups == 0 || s->group_used == GROUP_PAGES) {
        uint8_t **groups =
            realloc(s->groups, (s->n_groups + 1) * sizeof *groups);
        if (groups == NULL) {
            return NULL;
        }
        s->groups = groups;
        p = aligned_alloc(GROUP_SIZE, GROUP_SIZE);
        if (p == NULL) {
            return NULL;
        }
        /* A hint only: without THP the group is ordinary memory. */
        (void)madvise(p, GROUP_SIZE, MADV_HUGEPAGE);
        s->groups[s->n_groups++] = p;
        s->group_used = 0;
    }
    ONCE_ASSERT(s->group_used < GROUP_PAGES, "carving past the group's end");
    return s->groups[s->n_groups - 1] +
           (size_t)s->group_used++ * SLAB_PAGE_SIZE;
}

/* A fresh page in *@page: 0, -ENOSPC at SLAB_MAX_PAGES, or -ENOMEM. */
static int new_page(struct slab *s, uint32_t *page)
{
    uint8_t *p;

    if (s->n_pages == SLAB_MAX_PAGES) {
        return -ENOSPC;
    }
    if (s->n_pages == s->cap_pages) {
        uint32_t cap = s->cap_pages == 0 ? 64 : s->cap_pages * 2;
        uint8_t **pages = realloc(s->pages, cap * sizeof *pages);
        struct slab_page *meta;
        if (pages == NULL) {
            return -ENOMEM;
        }
        s->pages = pages;
        meta = realloc(s->meta, cap * sizeof *meta);
        if (meta == NULL) {
            return -ENOMEM;
        }
        s->meta = meta;
        s->cap_pages = cap;
    }
    p = page_mem(s);
    if (p == NULL) {
        return -ENOMEM;
    }
    *page = s->n_pages;
    s->pages[s->n_pages++] = p;
    memset(&s->meta[*page], 0, sizeof s->meta[*page]);
    return 0;
}

/* A page with room for class @c: from the class, the pool, or new. */
static uint32_t page_for(struct slab *s, size_t c)
{
    struct slab_page *m;
    uint32_t p = s->partial[c];

    if (p != SLAB_NONE) {
        return p;
    }
    if (s->empty != SLAB_NONE) {
        p = s->empty;
        list_unlink(s, &s->empty, p);
        s->n_empty--;
    } else if (new_page(s, &p) != 0) {
        return SLAB_NONE;
    }
    m = &s->meta[p];
    m->free_head = 0;
    m->live = 0;
    /* Offset 0 of page 0 would be handle 0, which means NULL. */
    m->bump = p == 0 ? 1 : 0;
    ONCE_ASSERT(m->cls == 0 && !m->in_list, "a pooled page has no class");
    m->cls = (uint8_t)(c + 1);
    list_push(s, &s->partial[c], p);
    return p;
}

uint32_t slab_alloc(struct slab *s, size_t size)
{
    size_t units = slab_size(size) / 8;
    size_t c = units - 1;
    struct slab_page *m;
    uint32_t p, h;

    ONCE_ASSERTF(size > 0 && size <= SLAB_OBJ_MAX, "size %zu", size);
    p = page_for(s, c);
    if (p == SLAB_NONE) {
        return 0;
    }
    m = &s->meta[p];
    ONCE_ASSERT(m->cls == c + 1, "a partial page serves one class");
    if (m->free_head != 0) {
        h = m->free_head;
        memcpy(&m->free_head, slab_ptr(s, h), sizeof m->free_head);
    } else {
        h = (p << SLAB_PAGE_SHIFT) | m->bump;
        m->bump = (uint16_t)(m->bump + units);
    }
    ONCE_ASSERT(h != 0, "handle 0 means NULL");
    ONCE_ASSERT(m->bump <= UNITS_PER_PAGE, "object past the page end");
    m->live++;
    if (m->free_head == 0 && m->bump + units > UNITS_PER_PAGE) {
        list_unlink(s, &s->partial[c], p); /* full */
    }
    s->bytes_live += units * 8;
    return h;
}

void slab_free(struct slab *s, uint32_t h, size_t size)
{
    size_t units = slab_size(size) / 8;
    size_t c = units - 1;
    uint32_t p = h >> SLAB_PAGE_SHIFT;
    struct slab_page *m = &s->meta[p];

    ONCE_ASSERTF(h != 0 && p < s->n_pages, "handle %u of %u pages", h,
                 s->n_pages);
    ONCE_ASSERTF(m->cls == c + 1 && m->live > 0,
                 "freeing size %zu on a page of class %u with %u live", size,
                 m->cls, m->live);
    memcpy(slab_mut(s, h), &m->free_head, sizeof m->free_head);
    m->free_head = h;
    m->live--;
    s->bytes_live -= units * 8;
    if (m->live == 0) {
        /* Give the page to whichever class needs one next. */
        if (m->in_list) {
            list_unlink(s, &s->partial[c], p);
        }
        m->cls = 0;
        list_push(s, &s->empty, p);
        s->n_empty++;
    } else if (!m->in_list) {
        list_push(s, &s->partial[c], p); /* was full, has room again */
    }
}

/* ------------------------------------------------------------------------
 * Copy-on-write for frozen views
 * ---------------------------------------------------------------------- */

void slab_cow(struct slab *s, uint32_t p)
{
    uint8_t *copy;

    ONCE_ASSERT(p < s->n_pages && s->meta[p].frozen,
                "copying a page no view reads");
    copy = page_mem(s);
    if (copy == NULL) {
        fprintf(stderr, "once fsm: fatal: out of memory (page copy)\n");
        abort();
    }
    memcpy(copy, s->pages[p], SLAB_PAGE_SIZE);
    s->pages[p] = copy; /* the view keeps the original */
    s->meta[p].frozen = false;
    s->n_cow++;
}

uint8_t **slab_freeze(struct slab *s, uint32_t *n)
{
    uint8_t **pages = malloc((s->n_pages > 0 ? s->n_pages : 1) * sizeof *pages);

    if (pages == NULL) {
        return NULL;
    }
    if (s->n_pages > 0) { /* an empty slab has no page array yet */
        memcpy(pages, s->pages, s->n_pages * sizeof *pages);
    }
    /* A page without live objects holds nothing the view reads, so
     * allocating from it costs no copy. */
    for (uint32_t p = 0; p < s->n_pages; p++) {
        s->meta[p].frozen = s->meta[p].live > 0;
    }
    s->n_cow = 0;
    *n = s->n_pages;
    return pages;
}

void slab_thaw(struct slab *s, uint8_t **pages, uint32_t n)
{
    ONCE_ASSERTF(n <= s->n_pages, "a view of %u pages, the slab has %u", n,
                 s->n_pages);
    if (s->n_spare + s->n_cow > s->cap_spare) {
        uint32_t cap = s->n_spare + s->n_cow;
        uint8_t **spare = realloc(s->spare, cap * sizeof *spare);
        if (spare == NULL) {
            fprintf(stderr, "once fsm: fatal: out of memory (spare pages)\n");
            abort();
        }
        s->spare = spare;
        s->cap_spare = cap;
    }
    for (uint32_t p = 0; p < n; p++) {
        if (s->pages[p] != pages[p]) {
            s->spare[s->n_spare++] = pages[p];
        }
        s->meta[p].frozen = false;
    }
    s->n_cow = 0;
    free(pages);
}
