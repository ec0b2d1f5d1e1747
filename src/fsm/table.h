/* fsm/table.h: one virtual partition's index, (scope, key) -> record handle.
 *
 * Open addressing with Robin Hood linear probing, ordered: entries with the
 * same home slot are kept sorted by (hash, bytes). That makes the layout a
 * function of the set of keys and the capacity alone (history independent),
 * and a walk of the table (unwrapping the one cluster that crosses the end)
 * yields entries sorted by (hash, bytes): the canonical snapshot order costs
 * no sort. A slot is 8 bytes: 32 hash bits above the record's slab handle,
 * so probes compare hashes without touching records and resizing never
 * rehashes. Load stays between 1/8 and 7/8. Not thread-safe. */
#ifndef ONCE_FSM_TABLE_H_
#define ONCE_FSM_TABLE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm/slab.h"

struct table
{
    uint64_t *slots; /* hash32 << 32 | handle; 0 is empty */
    uint32_t cap;    /* 0 or a power of two >= 8 */
    uint32_t n;
};

/* The identity being looked up or inserted. */
struct table_key
{
    uint32_t hash;
    const uint8_t *scope;
    size_t scope_len;
    const uint8_t *key;
    size_t key_len;
};

void table_init(struct table *t);
void table_close(struct table *t);

/* Make room for @n entries without resizing. Returns 0 or -ENOMEM. */
int table_reserve(struct table *t, const struct slab *s, uint32_t n);

/* Handle of the record for @k, or 0. */
uint32_t table_find(const struct table *t,
                    const struct slab *s,
                    const struct table_key *k);

/* Insert record @h (not present) with hash @hash. Returns 0 or -ENOMEM
 * (the table is then unchanged). */
int table_insert(struct table *t,
                 const struct slab *s,
                 uint32_t hash,
                 uint32_t h);

/* Remove record @h with hash @hash. Returns true if it was there. */
bool table_remove(struct table *t,
                  const struct slab *s,
                  uint32_t hash,
                  uint32_t h);

/* Write the t->n handles into @out in canonical (hash, bytes) order. */
void table_walk_sorted(const struct table *t, uint32_t *out);

/* Hint the cache about the slot a lookup of @hash starts at. */
static inline void table_prefetch(const struct table *t, uint32_t hash)
{
    if (t->cap != 0) {
        uint32_t shift = 32u - (uint32_t)__builtin_ctz(t->cap);
        __builtin_prefetch(&t->slots[(uint64_t)hash >> shift]);
    }
}

/* Bytes held by the slot array. */
static inline uint64_t table_memory(const struct table *t)
{
    return (uint64_t)t->cap * sizeof *t->slots;
}

#endif /* ONCE_FSM_TABLE_H_ */
