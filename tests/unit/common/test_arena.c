#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/arena.h"

Suite *arena_suite(void);

START_TEST(alloc_is_aligned_and_distinct)
{
    struct arena a;
    uint8_t *p[100];

    arena_init(&a);
    for (int i = 0; i < 100; i++) {
        p[i] = arena_alloc(&a, (size_t)i * 37 + 1);
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq((uintptr_t)p[i] % 16, 0);
        memset(p[i], i, (size_t)i * 37 + 1);
    }
    for (int i = 0; i < 100; i++) {
        ck_assert_uint_eq(p[i][0], (uint8_t)i);
        ck_assert_uint_eq(p[i][(size_t)i * 37], (uint8_t)i);
    }
    arena_close(&a);
}
END_TEST

START_TEST(big_allocation_and_reuse_after_reset)
{
    struct arena a;
    void *big;

    arena_init(&a);
    big = arena_alloc(&a, 1 << 20); /* larger than a chunk */
    ck_assert_ptr_nonnull(big);
    memset(big, 1, 1 << 20);
    arena_reset(&a);
    for (int round = 0; round < 3; round++) {
        ck_assert_ptr_nonnull(arena_alloc(&a, 1000));
        ck_assert_ptr_nonnull(arena_alloc(&a, 1 << 20));
        arena_reset(&a);
    }
    ck_assert_ptr_null(arena_alloc(&a, SIZE_MAX));
    arena_close(&a);
}
END_TEST

START_TEST(protobuf_allocator_view)
{
    struct arena a;
    void *p;

    arena_init(&a);
    p = a.pb.alloc(a.pb.allocator_data, 64);
    ck_assert_ptr_nonnull(p);
    a.pb.free(a.pb.allocator_data, p); /* no-op, must not crash */
    arena_close(&a);
}
END_TEST

Suite *arena_suite(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("alloc");

    tcase_add_test(tc, alloc_is_aligned_and_distinct);
    tcase_add_test(tc, big_allocation_and_reuse_after_reset);
    tcase_add_test(tc, protobuf_allocator_view);
    suite_add_tcase(s, tc);
    return s;
}
