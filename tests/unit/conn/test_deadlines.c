/* test_deadlines: the deadline queue of the RPC server (rpc/deadlines.h:
 * a sorted list for calls in order, a heap for the others) against a plain
 * array searched in full, over random pushes, removals and pops with equal
 * deadlines among them (the tie-break is push order). */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "conn_helpers.h"
#include "rpc/deadlines.h"

enum { NODES = 300, OPS = 20000 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd_below(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

/* The reference: the queued node that is due first, or NULL. */
static struct dl_node *ref_min(struct dl_node *nodes, const bool *in)
{
    struct dl_node *m = NULL;

    for (size_t i = 0; i < NODES; i++) {
        if (in[i] && (m == NULL || nodes[i].at < m->at ||
                      (nodes[i].at == m->at && nodes[i].seq < m->seq))) {
            m = &nodes[i];
        }
    }
    return m;
}

START_TEST(heap_matches_a_scan)
{
    static struct dl_node nodes[NODES];
    static bool in[NODES];
    struct dl_heap h;
    uint64_t now = 0;
    size_t queued = 0, popped = 0, removed = 0, in_heap = 0, in_list = 0;

    dl_init(&h);
    for (size_t i = 0; i < NODES; i++) {
        dl_node_init(&nodes[i]);
        in[i] = false;
    }
    for (unsigned op = 0; op < OPS; op++) {
        size_t i = (size_t)rnd_below(NODES);
        uint64_t r = rnd_below(10);

        if (r < 5 && !in[i]) {
            /* Mostly in order (now + a fixed budget), some not, and
             * often equal to another's. */
            uint64_t at = now + (rnd_below(3) == 0 ? rnd_below(50) : 40);

            ck_assert_int_eq(dl_push(&h, &nodes[i], at), 0);
            ck_assert(dl_queued(&nodes[i]));
            ck_assert_uint_eq(nodes[i].at, at);
            in_heap += nodes[i].where == DL_HEAP;
            in_list += nodes[i].where == DL_LIST;
            in[i] = true;
            queued++;
        } else if (r < 7) {
            /* A removal, also of a node that is not queued (no-op). */
            if (in[i]) {
                removed++;
            }
            dl_remove(&h, &nodes[i]);
            ck_assert(!dl_queued(&nodes[i]));
            in[i] = false;
        } else {
            struct dl_node *want, *got;

            now += rnd_below(8);
            want = ref_min(nodes, in);
            ck_assert_ptr_eq(dl_peek(&h), want);
            got = dl_pop_due(&h, now);
            if (want == NULL || want->at > now) {
                ck_assert_ptr_null(got);
            } else {
                ck_assert_ptr_eq(got, want);
                ck_assert(!dl_queued(got));
                in[got - nodes] = false;
                popped++;
            }
        }
        ck_assert_uint_eq(h.count, queued - popped - removed);
        ck_assert_uint_le(h.n, h.count);
    }
    /* Drain: everything comes out in (at, seq) order. */
    for (;;) {
        struct dl_node *want = ref_min(nodes, in);
        struct dl_node *got = dl_pop_due(&h, UINT64_MAX);

        ck_assert_ptr_eq(got, want);
        if (got == NULL) {
            break;
        }
        in[got - nodes] = false;
    }
    ck_assert_uint_eq(h.count, 0);
    ck_assert_uint_eq(h.n, 0);
    ck_assert_ptr_null(h.head);
    /* Enough of each kind happened for the comparison to mean something. */
    ck_assert_uint_gt(popped, OPS / 20);
    ck_assert_uint_gt(removed, OPS / 20);
    ck_assert_uint_gt(in_heap, OPS / 50);
    ck_assert_uint_gt(in_list, OPS / 50);
    dl_free(&h);
}
END_TEST

START_TEST(equal_deadlines_in_push_order)
{
    struct dl_node n[5];
    struct dl_heap h;

    dl_init(&h);
    for (size_t i = 0; i < 5; i++) {
        dl_node_init(&n[i]);
        ck_assert_int_eq(dl_push(&h, &n[i], i == 2 ? 5 : 10), 0);
    }
    /* 2 came out of order: the heap; the others in order: the list. */
    ck_assert_int_eq(n[2].where, DL_HEAP);
    ck_assert_int_eq(n[3].where, DL_LIST);
    ck_assert_ptr_null(dl_pop_due(&h, 4));
    ck_assert_ptr_eq(dl_pop_due(&h, 10), &n[2]);
    dl_remove(&h, &n[1]);
    ck_assert_ptr_eq(dl_pop_due(&h, 10), &n[0]);
    ck_assert_ptr_eq(dl_pop_due(&h, 10), &n[3]);
    ck_assert_ptr_eq(dl_pop_due(&h, 10), &n[4]);
    ck_assert_ptr_null(dl_pop_due(&h, 10));
    dl_free(&h);
}
END_TEST

Suite *deadlines_suite(void)
{
    Suite *s = suite_create("deadlines");
    TCase *tc = tcase_create("heap");

    tcase_add_test(tc, heap_matches_a_scan);
    tcase_add_test(tc, equal_deadlines_in_push_order);
    suite_add_tcase(s, tc);
    return s;
}
