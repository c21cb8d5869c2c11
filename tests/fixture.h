/* The group fixture most test programs share: one server for the whole
 * program (the deployment of DLOCK_TEST_DEPLOY, in the harness's TLS or ACL
 * mode when asked: th_redis_start) and a client on it with the default
 * watchdog. For cmocka_run_group_tests(tests, th_setup, th_teardown); a
 * program with more to set up calls these from its own.
 *
 * The names are the ones the tests have always used, and only files that
 * include this header see them (a test with servers of its own keeps its own
 * names). */
#ifndef DLOCK_TEST_FIXTURE_H
#define DLOCK_TEST_FIXTURE_H

#include "harness.h"

extern th_redis srv;      /* the fixture's server */
extern dlock_client *cli; /* a client on srv (th_setup), else NULL */

/* Starts srv and opens cli; -1 when the server does not start (cmocka then
 * fails the group). */
int th_setup(void **state);
/* Starts srv only; cli stays NULL. */
int th_setup_server(void **state);
/* Closes cli (if any) and stops and removes srv. */
int th_teardown(void **state);

#endif
