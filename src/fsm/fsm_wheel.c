/* The timer wheel: when records expire and are freed.
 *
 * Level 0 has one list per 1.024 s tick of the current block of 65536 ticks
 * (~18.6 h); level 1 has one list per block, 4096 blocks ahead. Entering a
 * block moves (cascades) its level-1 list into level 0, so each record is
 * touched at most twice before it expires: pruning costs what expires, never
 * a scan. Lists are singly linked through rec.next and are never searched: a
 * record that must leave early (Forget, or an expired record replaced by a
 * new claim) is marked DETACHED, removed from its table, and freed when the
 * wheel reaches it; a record whose expiry moved later (an IDEMPOTENT
 * takeover) is simply placed again when its old tick comes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "fsm/fsm_int.h"

#define L0_MASK (WHEEL_L0_SIZE - 1)
#define L1_MASK (WHEEL_L1_SIZE - 1)

void fsm_wheel_place(struct fsm *f, uint32_t h)
{
    struct wheel *w = &f->wheel;
    struct rec *r = rec_mut(f, h);
    uint64_t t = fsm_rec_expires(f, r) >> WHEEL_TICK_SHIFT;
    uint64_t cur_block = w->cur >> WHEEL_L0_BITS;
    uint64_t block;

    if (t < w->cur) {
        t = w->cur; /* already due: the next processed tick frees it */
    }
    ONCE_ASSERT(!(r->flags & REC_F_DETACHED),
                "a detached record is freed, never placed");
    block = t >> WHEEL_L0_BITS;
    if (block == cur_block) {
        r->next = w->l0[t & L0_MASK];
        w->l0[t & L0_MASK] = h;
        w->n_l0++;
        return;
    }
    if (block - cur_block >= WHEEL_L1_SIZE) {
        /* Beyond the horizon (only after a huge time jump): park it in the
         * farthest block; its cascade places it again. */
        block = cur_block + WHEEL_L1_SIZE - 1;
    }
    r->next = w->l1[block & L1_MASK];
    w->l1[block & L1_MASK] = h;
    w->n_l1++;
}

/* Free @h if it is detached or expired, else place it again. */
static void wheel_visit(struct fsm *f, uint32_t h)
{
    const struct rec *r = rec_at(f, h);

    if (r->flags & REC_F_DETACHED) {
        fsm_rec_free(f, h);
        return;
    }
    /* Free by tick, never by millisecond: the tick being processed has
     * ended (cur < passed), so such a record has expired and is already
     * uncounted (fsm_acct.c); freeing it changes no answer. A record whose
     * expiry moved later (takeover) is placed again. */
    if ((fsm_rec_expires(f, r) >> WHEEL_TICK_SHIFT) <= f->wheel.cur) {
        uint64_t hash =
            fsm_hash(f, r->id, r->scope_len, r->id + r->scope_len, r->key_len);
        fsm_detach(f, hash, h);
        fsm_rec_free(f, h);
        return;
    }
    fsm_wheel_place(f, h);
}

/* Visit records of the list at @head while *@budget lasts; true when the
 * list is empty. A visit never puts a record back on the list it came
 * from: it frees it, or places it at a later tick or block. */
static bool wheel_take(struct fsm *f,
                       uint32_t *head,
                       uint64_t *count,
                       uint32_t *budget)
{
    while (*head != 0 && *budget > 0) {
        uint32_t h = *head;
        *head = rec_at(f, h)->next;
        ONCE_ASSERT(*count > 0, "the wheel's count of records in a list");
        (*count)--;
        (*budget)--;
        wheel_visit(f, h);
    }
    return *head == 0;
}

/* Process ticks up to log time (wheel.passed), at most FSM_PRUNE_BUDGET
 * visits and tick steps per batch; the rest waits for the next batches.
 * What is counted and answered never depends on how far this got
 * (fsm_acct.c), so replicas may lag differently. */
void fsm_wheel_advance(struct fsm *f)
{
    struct wheel *w = &f->wheel;
    uint64_t target = w->passed;
    uint32_t budget = FSM_PRUNE_BUDGET;

    ONCE_ASSERTF(w->cur <= w->passed, "wheel at tick %llu past log time %llu",
                 (unsigned long long)w->cur, (unsigned long long)w->passed);
    while (w->cur < target && budget > 0) {
        if (w->n_l0 == 0 && w->n_l1 == 0) {
            w->cur = target;
            break;
        }
        if ((w->cur & L0_MASK) == 0 &&
            !wheel_take(f, &w->l1[(w->cur >> WHEEL_L0_BITS) & L1_MASK],
                        &w->n_l1, &budget)) {
            break; /* the cascade goes on in the next batch */
        }
        if (w->n_l0 == 0) {
            /* Nothing in this block: jump to the next block's start. */
            uint64_t next = ((w->cur >> WHEEL_L0_BITS) + 1) << WHEEL_L0_BITS;
            w->cur = next < target ? next : target;
            continue;
        }
        if (!wheel_take(f, &w->l0[w->cur & L0_MASK], &w->n_l0, &budget)) {
            break;
        }
        w->cur++;
        if (budget > 0) {
            budget--;
        }
    }
}
