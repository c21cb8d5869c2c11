/* Sentinels found, not only given (issue 23): a URL that names one sentinel
 * of three; the client learns the other two (SENTINEL SENTINELS), so when
 * the one it was given is stopped and then the primary is killed, the
 * failover is still followed: the hold is renewed on the new primary and
 * new acquisitions land there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define MASTER "discmaster"

static th_replset rs;
static th_sentinels ss;

static int setup(void **state)
{
    (void)state;
    return th_sentinel_deploy_start(&rs, &ss, MASTER);
}

static int teardown(void **state)
{
    (void)state;
    th_sentinel_deploy_destroy(&rs, &ss);
    return 0;
}

static void test_failover_followed_through_learnt_sentinels(void **state)
{
    (void)state;
    if (th_tls_mode()) {
        skip();
        return;
    }
    int64_t slack = th_slack(), wd = 6000 * slack;
    char url[128];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d#%s", ss.s[0].port, MASTER);
    dlock_client *c = th_client_url(url, wd);
    char held[64], fresh[64];
    dlock_lock *lh, *lf;
    assert_int_equal(dlock_lock_get(c, th_name(held, sizeof(held), "sd-held"), &lh), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(fresh, sizeof(fresh), "sd-fresh"), &lf),
                     DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lh, DLOCK_WATCHDOG), DLOCK_OK);
    th_redis *old = th_sentinel_primary(&rs, &ss.s[1], MASTER);
    assert_non_null(old);
    redisContext *ac = th_admin(old);   /* every replica has the hold */
    assert_non_null(ac);
    redisReply *r = redisCommand(ac, "INCR sd-barrier");
    freeReplyObject(r);
    r = redisCommand(ac, "WAIT %d %d", TH_REPLICAS, (int)(5000 * slack));
    assert_int_equal(r->integer, TH_REPLICAS);
    freeReplyObject(r);
    redisFree(ac);

    /* The only sentinel the URL names goes away, then the primary. */
    th_redis_stop(&ss.s[0]);
    th_redis_stop(old);
    int64_t t_switch = -1;
    for (int64_t until = th_now_ms() + 30000 * slack; th_now_ms() < until; th_sleep_ms(20)) {
        th_redis *p = th_sentinel_primary(&rs, &ss.s[1], MASTER);
        if (p && p != old) {
            t_switch = th_now_ms();
            break;
        }
    }
    assert_true(t_switch > 0);
    th_redis *np = th_sentinel_primary(&rs, &ss.s[1], MASTER);
    int64_t first_ok = -1;
    while (th_now_ms() - t_switch < 15000 * slack) {
        if (dlock_lock_try(lf, 0, 30000) == DLOCK_OK) {
            first_ok = th_now_ms();
            break;
        }
        th_sleep_ms(20);
    }
    if (first_ok < 0)
        th_client_log_dump(c);
    assert_true(first_ok > 0);
    printf("# switch seen by the test -> first acquisition: %lld ms\n",
           (long long)(first_ok - t_switch));
    assert_int_equal(th_int(np, "EXISTS %s", fresh), 1);
    assert_int_equal(dlock_lock_release(lf), DLOCK_OK);
    /* The hold, renewed on the new primary, outlives a whole lease there. */
    th_sleep_ms(wd + 500);
    assert_true(th_int(np, "PTTL %s", held) > 0);
    assert_int_equal(dlock_lock_release(lh), DLOCK_OK);
    assert_int_equal(th_int(np, "EXISTS %s", held), 0);
    dlock_lock_free(lh);
    dlock_lock_free(lf);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failover_followed_through_learnt_sentinels),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
