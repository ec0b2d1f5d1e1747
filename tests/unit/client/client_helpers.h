/* client_helpers.h: what the unit-client test files share (test_client.c,
 * test_client_net.c, main_client.c). */
#ifndef ONCE_TESTS_UNIT_CLIENT_HELPERS_H_
#define ONCE_TESTS_UNIT_CLIENT_HELPERS_H_

#include <check.h>

#include "once.h"

/* A claim that passes every argument check (test_client.c). */
struct once_claim good_claim(void);

Suite *client_pure_suite(void);
Suite *client_net_suite(void);

#endif /* ONCE_TESTS_UNIT_CLIENT_HELPERS_H_ */
