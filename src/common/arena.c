#include "common/arena.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ARENA_CHUNK_MIN (64u * 1024)

struct arena_chunk
{
    struct arena_chunk *next;
    size_t size; /* usable bytes after the header */
    _Alignas(16) unsigned char data[];
};

static void *pb_alloc(void *data, size_t size)
{
    void *p = arena_alloc(data, size);

    if (p == NULL) {
        /* protobuf-c would report this as "does not decode", which the
         * state machine would turn into INVALID_ARGUMENT on this replica
         * only. Out of memory must stop the node instead. */
        fprintf(stderr, "once: fatal: out of memory decoding a message\n");
        abort();
    }
    return p;
}

static void pb_free(void *data, void *ptr)
{
    /* Released wholesale by arena_reset. */
    (void)data;
    (void)ptr;
}

void arena_init(struct arena *a)
{
    a->head = NULL;
    a->spare = NULL;
    a->used = 0;
    a->pb.alloc = pb_alloc;
    a->pb.free = pb_free;
    a->pb.allocator_data = a;
}

static void free_list(struct arena_chunk *c)
{
    while (c != NULL) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
}

void arena_close(struct arena *a)
{
    free_list(a->head);
    free_list(a->spare);
    a->head = NULL;
    a->spare = NULL;
    a->used = 0;
}

void *arena_alloc(struct arena *a, size_t size)
{
    struct arena_chunk *c;
    size_t need;
    void *p;

    if (size > SIZE_MAX / 2) {
        return NULL;
    }
    need = (size + 15) & ~(size_t)15;
    if (need == 0) {
        need = 16;
    }
    if (a->head == NULL || a->head->size - a->used < need) {
        if (a->spare != NULL && a->spare->size >= need) {
            c = a->spare;
            a->spare = c->next;
        } else {
            size_t sz = need > ARENA_CHUNK_MIN ? need : ARENA_CHUNK_MIN;
            c = malloc(sizeof *c + sz);
            if (c == NULL) {
                return NULL;
            }
            c->size = sz;
        }
        c->next = a->head;
        a->head = c;
        a->used = 0;
    }
    p = a->head->data + a->used;
    a->used += need;
    return p;
}

void arena_reset(struct arena *a)
{
    struct arena_chunk *c;

    /* Keep the chunks for reuse: a decoder in steady state never mallocs. */
    while (a->head != NULL) {
        c = a->head;
        a->head = c->next;
        c->next = a->spare;
        a->spare = c;
    }
    a->used = 0;
}

void arena_rebind(struct arena *a)
{
    a->pb.allocator_data = a;
}
