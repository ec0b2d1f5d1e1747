/* raft/heap: large frees handed to a thread (heap.h). LeakSanitizer, on in
 * scripts/test, fails the run if a handed block is never freed. */
#include <check.h>
#include <raft.h>
#include <stdlib.h>

#include "raft/heap.h"

Suite *heap_suite(void);

START_TEST(without_the_thread_frees_at_once)
{
    unsigned long n0 = heap_bg_handed();

    heap_bg_free_later(malloc(64));
    heap_bg_free_later(NULL);
    raft_free(raft_malloc(HEAP_BG_MIN)); /* libraft's default heap */
    ck_assert_uint_eq(heap_bg_handed(), n0);
}
END_TEST

START_TEST(large_blocks_go_to_the_thread)
{
    unsigned long n0;
    void *small, *large;

    ck_assert_int_eq(heap_bg_start(), 0);
    ck_assert_int_eq(heap_bg_start(), 0); /* once */
    n0 = heap_bg_handed();
    small = raft_malloc(4096);
    large = raft_malloc(HEAP_BG_MIN);
    ck_assert_ptr_nonnull(small);
    ck_assert_ptr_nonnull(large);
    raft_free(small); /* below HEAP_BG_MIN: at once */
    ck_assert_uint_eq(heap_bg_handed(), n0);
    raft_free(large);
    ck_assert_uint_eq(heap_bg_handed(), n0 + 1);
    raft_free(NULL);
    heap_bg_free_later(malloc(16)); /* any size when asked */
    ck_assert_uint_eq(heap_bg_handed(), n0 + 2);
    for (int i = 0; i < 100; i++) {
        raft_free(raft_calloc(1, HEAP_BG_MIN));
    }
    ck_assert_uint_eq(heap_bg_handed(), n0 + 102);
    heap_bg_stop(); /* frees what is still queued */
    heap_bg_stop();
    /* Back on libraft's default heap. */
    raft_free(raft_malloc(HEAP_BG_MIN));
    heap_bg_free_later(malloc(16));
    ck_assert_uint_eq(heap_bg_handed(), n0 + 102);
}
END_TEST

START_TEST(restarts)
{
    unsigned long n0 = heap_bg_handed();

    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(heap_bg_start(), 0);
        raft_free(raft_malloc(HEAP_BG_MIN));
        heap_bg_stop();
    }
    ck_assert_uint_eq(heap_bg_handed(), n0 + 3);
}
END_TEST

Suite *heap_suite(void)
{
    Suite *s = suite_create("heap");
    TCase *tc = tcase_create("heap");

    tcase_add_test(tc, without_the_thread_frees_at_once);
    tcase_add_test(tc, large_blocks_go_to_the_thread);
    tcase_add_test(tc, restarts);
    suite_add_tcase(s, tc);
    return s;
}
