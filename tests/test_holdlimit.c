/* The hold limit (dlock_config_set_max_hold, dlock_lock_set_max_hold): a
 * watchdog hold is renewed up to its limit and no further, Redis lets the
 * lock go when the limit ends, and the holder is told (DLOCK_LOST_MAX_HOLD)
 * before that. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "sync/sync.h"

#define WD 1500   /* watchdog timeout: renewal every 500 ms, losses told 75 ms early */

typedef struct lost_log {
    pthread_mutex_t mu;
    int calls;
    dlock_lost_reason reason;
    int64_t at;
} lost_log;

#define LOST_LOG_INIT {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0}

static void on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud)
{
    (void)name;
    (void)owner;
    lost_log *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    g->reason = reason;
    g->at = th_now_ms();
    pthread_mutex_unlock(&g->mu);
}

static int calls(lost_log *g)
{
    pthread_mutex_lock(&g->mu);
    int n = g->calls;
    pthread_mutex_unlock(&g->mu);
    return n;
}

static dlock_client *client(lost_log *g, int64_t max_hold)
{
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, srv.url), DLOCK_OK);
    assert_int_equal(dlock_config_set_watchdog_timeout(cfg, WD), DLOCK_OK);
    assert_int_equal(dlock_config_set_max_hold(cfg, max_hold), DLOCK_OK);
    if (g)
        assert_int_equal(dlock_config_set_lost_callback(cfg, on_lost, g), DLOCK_OK);
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    return c;
}

/* Polls until the key is gone (or `within` ms pass); returns when, or 0. */
static int64_t await_gone(const char *name, int64_t within)
{
    int64_t until = th_now_ms() + within;
    while (th_now_ms() < until) {
        if (th_int(&srv, "EXISTS %s", name) == 0)
            return th_now_ms();
        th_sleep_ms(2);
    }
    return 0;
}

/* The holder keeps the lock past several renewals, up to the limit: then the
 * key expires (not renewed any more), the loss is reported once, before the
 * expiry, and the release answers DLOCK_ENOTOWNER. */
static void check_limit(int64_t limit)
{
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(&g, limit);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "limit"), &l), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    /* Held (and renewed, when the limit is past the timeout) until near it. */
    while (th_now_ms() < t0 + limit - 250) {
        assert_true(th_int(&srv, "PTTL %s", name) > 0);
        assert_int_equal(calls(&g), 0);
        th_sleep_ms(20);
    }
    int64_t gone = await_gone(name, 1000 + WD * th_slack());
    assert_true(gone > 0);
    /* Redis let it go when the limit ended (the last TTL set ran to it),
     * not a watchdog timeout later. */
    if (gone - t0 > limit + 200 * th_slack())
        fail_msg("the lock outlived its %lld ms limit by %lld ms", (long long)limit,
                 (long long)(gone - t0 - limit));
    th_sleep_ms(100);
    assert_int_equal(calls(&g), 1);
    assert_int_equal(g.reason, DLOCK_LOST_MAX_HOLD);
    if (g.at > gone)
        fail_msg("told %lld ms after Redis let the lock go", (long long)(g.at - gone));
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
    th_sleep_ms(WD / 2);
    assert_int_equal(calls(&g), 1);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void test_limit_shorter_than_timeout(void **state)
{
    (void)state;
    check_limit(1000);
}

static void test_limit_past_several_renewals(void **state)
{
    (void)state;
    check_limit(2600);
}

/* A release before the limit is no loss; a handle's own limit overrides the
 * client's, and DLOCK_MAX_HOLD_NONE lifts it. */
static void test_release_in_time_and_overrides(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(&g, 800);
    char a[128], b[128];
    dlock_lock *la, *lb;
    assert_int_equal(dlock_lock_get(c, th_name(a, sizeof(a), "in-time"), &la), DLOCK_OK);
    assert_int_equal(dlock_lock_get(c, th_name(b, sizeof(b), "unlimited"), &lb), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);

    assert_int_equal(dlock_lock_set_max_hold(lb, DLOCK_MAX_HOLD_NONE), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lb, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(2 * WD);
    assert_true(th_int(&srv, "PTTL %s", b) > 0);
    assert_int_equal(calls(&g), 0);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);

    /* Back to the client's (0), then one of its own, longer. */
    assert_int_equal(dlock_lock_set_max_hold(lb, 0), DLOCK_OK);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_acquire(lb, DLOCK_WATCHDOG), DLOCK_OK);
    assert_true(await_gone(b, 2000 * th_slack()) > 0);
    assert_int_equal(calls(&g), 1);
    assert_int_equal(dlock_lock_set_max_hold(lb, 1300), DLOCK_OK);
    t0 = th_now_ms();
    assert_int_equal(dlock_lock_acquire(lb, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(1000);
    assert_true(th_int(&srv, "PTTL %s", b) > 0);   /* past the client's 800 ms */
    int64_t gone = await_gone(b, 2000 * th_slack());
    assert_true(gone > 0 && gone - t0 <= 1300 + 200 * th_slack());
    th_sleep_ms(100);
    assert_int_equal(calls(&g), 2);
    assert_int_equal(g.reason, DLOCK_LOST_MAX_HOLD);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
}

/* Reentries count as the same hold: they neither extend the limit nor set a
 * TTL past it; that holds for a write lock too, whose reentry adds its lease
 * to the TTL (as Redisson's), and for a reentry with a lease. */
static void check_reentry(dlock_lock *l, const char *name, int64_t reentry_lease)
{
    lost_log g = LOST_LOG_INIT;
    dlock_lock_set_lost_callback(l, on_lost, &g);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    th_sleep_ms(500);
    assert_int_equal(dlock_lock_acquire(l, reentry_lease), DLOCK_OK);
    int64_t gone = await_gone(name, 3000 * th_slack());
    assert_true(gone > 0);
    if (gone - t0 > 1200 + 200 * th_slack())
        fail_msg("a reentry kept the lock %lld ms past its limit", (long long)(gone - t0 - 1200));
    th_sleep_ms(100);
    assert_int_equal(calls(&g), 1);
    assert_int_equal(g.reason, DLOCK_LOST_MAX_HOLD);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTOWNER);
}

static void test_reentry_does_not_extend(void **state)
{
    (void)state;
    dlock_client *c = client(NULL, 1200);
    char name[128];
    dlock_lock *l, *w;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "reenter"), &l), DLOCK_OK);
    check_reentry(l, name, DLOCK_WATCHDOG);
    check_reentry(l, name, 60000);
    assert_int_equal(dlock_write_lock_get(c, th_name(name, sizeof(name), "reenter-w"), &w),
                     DLOCK_OK);
    check_reentry(w, name, DLOCK_WATCHDOG);
    dlock_lock_free(l);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* A lease acquisition ends with its lease: the limit is for watchdog holds. */
static void test_lease_hold_is_not_limited(void **state)
{
    (void)state;
    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(&g, 300);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "lease"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 2000), DLOCK_OK);
    th_sleep_ms(800);
    assert_true(th_int(&srv, "PTTL %s", name) > 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(calls(&g), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Bad limits are refused with DLOCK_EINVAL and change nothing. */
static void test_bad_limits(void **state)
{
    (void)state;
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_max_hold(NULL, 1000), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_max_hold(cfg, -1), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "hold limit"));
    assert_int_equal(dlock_config_set_max_hold(cfg, 366LL * 24 * 3600 * 1000), DLOCK_EINVAL);
    assert_int_equal(dlock_config_set_max_hold(cfg, 365LL * 24 * 3600 * 1000), DLOCK_OK);
    assert_int_equal(dlock_config_set_max_hold(cfg, 0), DLOCK_OK);
    dlock_config_free(cfg);

    lost_log g = LOST_LOG_INIT;
    dlock_client *c = client(&g, 0);
    char name[128];
    dlock_lock *l;
    assert_int_equal(dlock_lock_get(c, th_name(name, sizeof(name), "bad"), &l), DLOCK_OK);
    assert_int_equal(dlock_lock_set_max_hold(NULL, 1000), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_set_max_hold(l, 500), DLOCK_OK);
    assert_int_equal(dlock_lock_set_max_hold(l, -2), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_set_max_hold(l, 366LL * 24 * 3600 * 1000), DLOCK_EINVAL);
    /* The refused values left the 500 ms limit in place. */
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WATCHDOG), DLOCK_OK);
    assert_true(await_gone(name, 1500 * th_slack()) > 0);
    th_sleep_ms(100);
    assert_int_equal(calls(&g), 1);
    assert_int_equal(g.reason, DLOCK_LOST_MAX_HOLD);
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_shorter_than_timeout),
        cmocka_unit_test(test_limit_past_several_renewals),
        cmocka_unit_test(test_release_in_time_and_overrides),
        cmocka_unit_test(test_reentry_does_not_extend),
        cmocka_unit_test(test_lease_hold_is_not_limited),
        cmocka_unit_test(test_bad_limits),
    };
    return cmocka_run_group_tests(tests, th_setup_server, th_teardown);
}
