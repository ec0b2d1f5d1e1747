/* common/arena.h: a bump allocator that protobuf-c unpacks into.
 *
 * Decoding a command allocates a handful of small objects that all die
 * together; an arena turns those into pointer bumps and makes "free
 * everything" a reset. Chunks are kept across resets, so a decoder that has
 * warmed up allocates nothing. Not thread-safe.
 *
 * Out of memory inside the protobuf-c view aborts the process: a decoder
 * that reported it as a decoding failure would make one replica reject a
 * command its peers accept. Every message is bounded before it is decoded,
 * so this only fires when the machine is out of memory. */
#ifndef ONCE_COMMON_ARENA_H_
#define ONCE_COMMON_ARENA_H_

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

struct arena_chunk;

struct arena
{
    struct arena_chunk *head;  /* chunk being filled */
    struct arena_chunk *spare; /* emptied chunks kept for reuse */
    size_t used;               /* bytes used in head */
    ProtobufCAllocator pb;     /* allocator view for protobuf-c */
};

/* Initialise an empty arena. Allocates nothing. */
void arena_init(struct arena *a);

/* Free every chunk. The struct belongs to the caller. */
void arena_close(struct arena *a);

/* Return @size bytes aligned to 16, valid until the next reset or close; NULL
 * on OOM. */
void *arena_alloc(struct arena *a, size_t size);

/* Point the protobuf-c view back at @a after the struct was moved. */
void arena_rebind(struct arena *a);

/* Forget every allocation; keeps one chunk for reuse. */
void arena_reset(struct arena *a);

#endif /* ONCE_COMMON_ARENA_H_ */
