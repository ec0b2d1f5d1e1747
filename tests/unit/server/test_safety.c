/* server/safety: which membership changes the leader refuses without
 * force. */
#include <check.h>
#include <string.h>

#include "common/err.h"
#include "server/safety.h"

Suite *safety_suite(void);

START_TEST(single_voter_refused)
{
    struct safety_voter two[] = {{1, true}, {2, true}};
    struct safety_voter three[] = {{1, true}, {2, true}, {3, true}};
    char why[ERR_MSG_SIZE];

    /* 3 -> 2 is how a node is replaced: allowed */
    ck_assert_int_eq(SAFETY_OK, safety_refuses(three, 3, 3, why));
    ck_assert_int_eq(SAFETY_OK, safety_refuses(three, 3, 1, why));
    /* 2 -> 1: the last copy on one disk */
    ck_assert_int_eq(SAFETY_SINGLE, safety_refuses(two, 2, 2, why));
    ck_assert_msg(strstr(why, "single voter (2 -> 1)") != NULL, "%s", why);
    ck_assert_int_eq(SAFETY_SINGLE, safety_refuses(two, 2, 1, why));
    /* not a voter: nothing to refuse */
    ck_assert_int_eq(SAFETY_OK, safety_refuses(two, 2, 9, why));
    ck_assert_int_eq(SAFETY_OK, safety_refuses(two, 1, 9, why));
    /* a one-voter cluster removing itself is not this rule's business
     * (raft refuses an empty configuration) */
    ck_assert_int_eq(SAFETY_OK, safety_refuses(two, 1, 1, why));
}
END_TEST

START_TEST(unreachable_majority_refused)
{
    struct safety_voter v3[] = {{1, true}, {2, true}, {3, false}};
    struct safety_voter v5[] = {
        {1, true}, {2, true}, {3, false}, {4, false}, {5, true}};
    char why[ERR_MSG_SIZE];

    /* the dead one may go: both that remain are reachable */
    ck_assert_int_eq(SAFETY_OK, safety_refuses(v3, 3, 3, why));
    /* a live one may not: 1 of the 2 that remain answers */
    ck_assert_int_eq(SAFETY_UNREACHABLE, safety_refuses(v3, 3, 2, why));
    ck_assert_msg(
        strstr(why, "only 1 of the 2 voters that would remain") != NULL, "%s",
        why);
    /* 5 voters, 2 dead: removing a dead one leaves 3 of 4 (fine), a live
     * one 2 of 4 (no majority) */
    ck_assert_int_eq(SAFETY_OK, safety_refuses(v5, 5, 3, why));
    ck_assert_int_eq(SAFETY_UNREACHABLE, safety_refuses(v5, 5, 2, why));
    ck_assert_msg(strstr(why, "a majority is 3") != NULL, "%s", why);
}
END_TEST

Suite *safety_suite(void)
{
    Suite *s = suite_create("safety");
    TCase *tc = tcase_create("safety");

    tcase_add_test(tc, single_voter_refused);
    tcase_add_test(tc, unreachable_majority_refused);
    suite_add_tcase(s, tc);
    return s;
}
