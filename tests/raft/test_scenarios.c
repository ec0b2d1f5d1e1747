/* tests/raft/test_scenarios.c: fixture scenarios (to be written). */
#include <check.h>

#include "cluster.h"

Suite *scenarios_suite(void);
Suite *scenarios_suite(void)
{
    Suite *s = suite_create("scenarios");
    return s;
}
