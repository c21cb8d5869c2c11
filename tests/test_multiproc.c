/* 4 processes x 4 threads increment a Redis counter with a non-atomic
 * GET + SET under one lock: only mutual exclusion gives the exact total, and
 * only wake-ups that are never lost keep every wait short. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define PROCS 4
#define THREADS "4"
#define ITERS 150

static void test_counter_is_exact(void **state)
{
    (void)state;
    th_redis srv;
    assert_int_equal(th_redis_start(&srv, NULL), 0);
    char name[128], counter[160];
    th_name(name, sizeof(name), "counter-lock");
    snprintf(counter, sizeof(counter), "%s:value", name);
    char iters[16];
    snprintf(iters, sizeof(iters), "%d", ITERS);
    pid_t pids[PROCS];
    int fds[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = th_spawn(&fds[i], DLOCK_TEST_WORKER, "count", srv.url, name, counter, THREADS,
                           iters, NULL);
        assert_true(pids[i] > 0);
    }
    long long worst = 0;
    for (int i = 0; i < PROCS; i++) {
        char line[64];
        long long waited = -1;
        assert_int_equal(th_read_line(fds[i], line, sizeof(line), 120000), 0);
        assert_int_equal(sscanf(line, "done %lld", &waited), 1);
        if (waited > worst)
            worst = waited;
        assert_int_equal(th_wait(pids[i], 10000), 0);
        close(fds[i]);
    }
    /* No wake-up lost: a lost one sleeps out the holder's 30 s lease. Each
     * acquire waits for at most 15 others' short holds. */
    if (worst > 10000)
        fail_msg("an acquire waited %lld ms: a lost wake-up", worst);
    redisReply *r = th_cmd(&srv, "GET %s", counter);
    assert_non_null(r);
    assert_int_equal(atoll(r->str), PROCS * atoi(THREADS) * ITERS);
    freeReplyObject(r);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);   /* nobody left holding it */
    r = th_cmd(&srv, "PUBSUB CHANNELS *");
    assert_int_equal(r->elements, 0);
    freeReplyObject(r);
    th_redis_destroy(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_is_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
