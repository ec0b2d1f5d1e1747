#include "fsm/slab.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define UNITS_PER_PAGE (SLAB_PAGE_SIZE / 8)
/* Pages come in 2 MiB groups, aligned so the kernel can back each group with
 * one transparent huge page: a table of millions of records otherwise pays a
 * page fault per 4 KiB and a TLB miss per record touched. */
#define GROUP_SIZE  (2u << 20)
#define GROUP_PAGES (GROUP_SIZE / SLAB_PAGE_SIZE)

void slab_init(struct slab *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < SLAB_N_CLASSES; i++) {
        s->classes[i].page = UINT32_MAX;
    }
}

void slab_close(struct slab *s)
{
    for (uint32_t i = 0; i < s->n_pages; i += GROUP_PAGES) {
        free(s->pages[i]); /* the first page of a group is its base */
    }
    free(s->pages);
    slab_init(s);
}

static int new_page(struct slab *s, uint32_t *page)
{
    uint8_t *p;

    if (s->n_pages == SLAB_MAX_PAGES) {
        return -1;
    }
    if (s->n_pages == s->cap_pages) {
        uint32_t cap = s->cap_pages == 0 ? 64 : s->cap_pages * 2;
        uint8_t **pages = realloc(s->pages, cap * sizeof *pages);
        if (pages == NULL) {
            return -1;
        }
        s->pages = pages;
        s->cap_pages = cap;
    }
    if (s->n_pages % GROUP_PAGES == 0) {
        p = aligned_alloc(GROUP_SIZE, GROUP_SIZE);
        if (p == NULL) {
            return -1;
        }
        /* A hint only: without THP the group is ordinary memory. */
        (void)madvise(p, GROUP_SIZE, MADV_HUGEPAGE);
    } else {
        p = s->pages[s->n_pages - 1] + SLAB_PAGE_SIZE;
    }
    *page = s->n_pages;
    s->pages[s->n_pages++] = p;
    return 0;
}

uint32_t slab_alloc(struct slab *s, size_t size)
{
    size_t units = slab_size(size) / 8;
    struct slab_class *c;
    uint32_t h;

    assert(size > 0 && size <= SLAB_OBJ_MAX);
    c = &s->classes[units - 1];
    if (c->free_head != 0) {
        h = c->free_head;
        memcpy(&c->free_head, slab_ptr(s, h), sizeof c->free_head);
    } else {
        if (c->page == UINT32_MAX || c->next_off + units > UNITS_PER_PAGE) {
            uint32_t page;
            if (new_page(s, &page) != 0) {
                return 0;
            }
            c->page = page;
            /* Offset 0 of page 0 would be handle 0, which means NULL. */
            c->next_off = page == 0 ? 1 : 0;
        }
        h = (c->page << SLAB_PAGE_SHIFT) | c->next_off;
        c->next_off += (uint32_t)units;
    }
    s->bytes_live += units * 8;
    return h;
}

void slab_free(struct slab *s, uint32_t h, size_t size)
{
    size_t units = slab_size(size) / 8;
    struct slab_class *c = &s->classes[units - 1];

    assert(h != 0);
    memcpy(slab_ptr(s, h), &c->free_head, sizeof c->free_head);
    c->free_head = h;
    s->bytes_live -= units * 8;
}
