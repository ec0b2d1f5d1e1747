#include "fsm/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "fsm/fsm_int.h"

#define TABLE_MIN_CAP 8u

static inline uint32_t slot_hash(uint64_t slot)
{
    return (uint32_t)(slot >> 32);
}

static inline uint32_t slot_handle(uint64_t slot)
{
    return (uint32_t)slot;
}

static inline uint32_t cap_shift(uint32_t cap)
{
    return 32u - (uint32_t)__builtin_ctz(cap);
}

/* The home slot is the top bits of the hash, so the table order is the hash
 * order (which is what makes the walk sorted). */
static inline uint32_t home_of(uint32_t hash, uint32_t shift)
{
    return (uint32_t)((uint64_t)hash >> shift);
}

static inline uint32_t dist(uint32_t pos, uint32_t home, uint32_t mask)
{
    return (pos - home) & mask;
}

void table_init(struct table *t)
{
    t->slots = NULL;
    t->cap = 0;
    t->n = 0;
}

void table_close(struct table *t)
{
    free(t->slots);
    table_init(t);
}

/* Is entry @a (hash ha, record ra) ordered before entry @b? */
static bool entry_less(const struct slab *s, uint64_t a, uint64_t b)
{
    if (slot_hash(a) != slot_hash(b)) {
        return slot_hash(a) < slot_hash(b);
    }
    return rec_id_cmp(slab_ptr(s, slot_handle(a)),
                      slab_ptr(s, slot_handle(b))) < 0;
}

static void place(uint64_t *slots,
                  uint32_t cap,
                  const struct slab *s,
                  uint64_t e)
{
    uint32_t mask = cap - 1;
    uint32_t shift = cap_shift(cap);
    uint32_t pos = home_of(slot_hash(e), shift);
    uint32_t d = 0;

    for (;;) {
        uint64_t occ = slots[pos];
        uint32_t d_occ;

        ONCE_ASSERT(d < cap, "a full table: the load bound failed");
        if (occ == 0) {
            slots[pos] = e;
            return;
        }
        d_occ = dist(pos, home_of(slot_hash(occ), shift), mask);
        /* Robin Hood: the entry with the earlier home takes the slot; with
         * equal homes, the smaller (hash, bytes) does. */
        if (d_occ < d || (d_occ == d && entry_less(s, e, occ))) {
            slots[pos] = e;
            e = occ;
            d = d_occ;
        }
        pos = (pos + 1) & mask;
        d++;
    }
}

/* Rehash into @cap slots: 0, or -ENOMEM (the table is then unchanged). */
static int resize(struct table *t, const struct slab *s, uint32_t cap)
{
    uint64_t *slots;

    ONCE_ASSERTF(cap >= TABLE_MIN_CAP && (cap & (cap - 1)) == 0 &&
                     (uint64_t)t->n * 8 <= (uint64_t)cap * 7,
                 "%u entries in a table of %u", t->n, cap);
    slots = calloc(cap, sizeof *slots);
    if (slots == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < t->cap; i++) {
        if (t->slots[i] != 0) {
            place(slots, cap, s, t->slots[i]);
        }
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

int table_reserve(struct table *t, const struct slab *s, uint32_t n)
{
    uint32_t cap = TABLE_MIN_CAP;

    while ((uint64_t)n * 8 > (uint64_t)cap * 7) {
        cap *= 2;
    }
    return cap > t->cap ? resize(t, s, cap) : 0;
}

static bool id_equal(const struct rec *r, const struct table_key *k)
{
    return r->scope_len == k->scope_len && r->key_len == k->key_len &&
           memcmp(r->id, k->scope, k->scope_len) == 0 &&
           memcmp(r->id + k->scope_len, k->key, k->key_len) == 0;
}

uint32_t table_find(const struct table *t,
                    const struct slab *s,
                    const struct table_key *k)
{
    uint32_t mask, shift, pos, d;

    if (t->n == 0) {
        return 0;
    }
    mask = t->cap - 1;
    shift = cap_shift(t->cap);
    pos = home_of(k->hash, shift);
    for (d = 0;; d++) {
        uint64_t occ = t->slots[pos];

        if (occ == 0 || dist(pos, home_of(slot_hash(occ), shift), mask) < d) {
            return 0;
        }
        if (slot_hash(occ) == k->hash &&
            id_equal(slab_ptr(s, slot_handle(occ)), k)) {
            return slot_handle(occ);
        }
        pos = (pos + 1) & mask;
    }
}

int table_insert(struct table *t,
                 const struct slab *s,
                 uint32_t hash,
                 uint32_t h)
{
    if (t->cap == 0 || ((uint64_t)t->n + 1) * 8 > (uint64_t)t->cap * 7) {
        uint32_t cap = t->cap == 0 ? TABLE_MIN_CAP : t->cap * 2;
        if (cap == 0) {
            return -ENOMEM; /* the capacity would wrap: no room to make */
        }
        if (resize(t, s, cap) != 0) {
            return -ENOMEM;
        }
    }
    ONCE_ASSERT(h != 0, "handle 0 marks an empty slot");
    place(t->slots, t->cap, s, ((uint64_t)hash << 32) | h);
    t->n++;
    return 0;
}

static uint32_t find_handle(const struct table *t, uint32_t hash, uint32_t h)
{
    uint32_t mask = t->cap - 1;
    uint32_t pos = home_of(hash, cap_shift(t->cap));
    uint64_t want = ((uint64_t)hash << 32) | h;

    for (uint32_t i = 0; i < t->cap; i++) {
        if (t->slots[pos] == want) {
            return pos;
        }
        if (t->slots[pos] == 0) {
            break;
        }
        pos = (pos + 1) & mask;
    }
    return UINT32_MAX;
}

bool table_remove(struct table *t,
                  const struct slab *s,
                  uint32_t hash,
                  uint32_t h)
{
    uint32_t mask, shift, pos;

    if (t->n == 0) {
        return false;
    }
    pos = find_handle(t, hash, h);
    if (pos == UINT32_MAX) {
        return false;
    }
    mask = t->cap - 1;
    shift = cap_shift(t->cap);
    /* Backward shift: pull displaced successors one slot back. A pure shift
     * keeps the (hash, bytes) order, so no tombstones are needed. */
    for (;;) {
        uint32_t next = (pos + 1) & mask;
        uint64_t e = t->slots[next];
        if (e == 0 || dist(next, home_of(slot_hash(e), shift), mask) == 0) {
            t->slots[pos] = 0;
            break;
        }
        t->slots[pos] = e;
        pos = next;
    }
    t->n--;
    if (t->n == 0) {
        table_close(t);
    } else if (t->cap > TABLE_MIN_CAP && (uint64_t)t->n * 8 < t->cap) {
        /* Shrink failures are harmless: keep the bigger table. */
        (void)resize(t, s, t->cap / 2);
    }
    return true;
}

void table_walk_sorted(const struct table *t, uint32_t *out)
{
    uint32_t shift, pos, n = 0, wrapped = 0;

    if (t->n == 0) {
        return;
    }
    shift = cap_shift(t->cap);
    /* Entries at the start whose home lies after them wrapped around the
     * end: they belong last. Robin Hood keeps them before any entry that
     * is at or after its home, so they form a prefix. */
    while (wrapped < t->cap && t->slots[wrapped] != 0 &&
           home_of(slot_hash(t->slots[wrapped]), shift) > wrapped) {
        wrapped++;
    }
    for (pos = wrapped; pos < t->cap; pos++) {
        if (t->slots[pos] != 0) {
            out[n++] = slot_handle(t->slots[pos]);
        }
    }
    for (pos = 0; pos < wrapped; pos++) {
        out[n++] = slot_handle(t->slots[pos]);
    }
    ONCE_ASSERTF(n == t->n, "walked %u of %u entries", n, t->n);
}
