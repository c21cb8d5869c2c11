/* RedLock over three servers: all up, busy locks (a minority, a majority,
 * waiting), servers down, a server that answers too late for the validity,
 * one that never answers, and Redisson's RedissonRedLockTest scenarios.
 * Every check reads each server itself. Bad input: test_multilock.c. */
#include "multilock_common.h"

/* ------------------------------------------------------------ RedLock */

/* One lock per server, the same name everywhere (as a RedLock is used). */
static dlock_multilock *redlock_of(dlock_client **cs, const char *prefix, char *name,
                                   dlock_lock **l)
{
    th_name(name, 128, prefix);
    for (int i = 0; i < NSRV; i++)
        assert_int_equal(dlock_lock_get(cs[i], name, &l[i]), DLOCK_OK);
    dlock_multilock *rl;
    assert_int_equal(dlock_redlock_new(l, NSRV, &rl), DLOCK_OK);
    return rl;
}

static long long held_on(const char *name)
{
    long long k = 0;
    for (int i = 0; i < NSRV; i++)
        if (srv[i].pid > 0)
            k += exists(i, name);
    return k;
}

static void test_redlock_all_up(void **state)
{
    (void)state;
    char name[128];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = redlock_of(cli, "rl-up", name, l);
    assert_int_equal(dlock_multilock_acquire(rl, 10000), DLOCK_OK);
    for (int i = 0; i < NSRV; i++) {
        assert_int_equal(my_count(i, name), 1);
        assert_true(pttl(i, name) > 8000);
    }
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    assert_int_equal(held_on(name), 0);
    /* watchdog holds, renewed on each server by its client */
    assert_int_equal(dlock_multilock_acquire(rl, DLOCK_WATCHDOG), DLOCK_OK);
    for (int i = 0; i < NSRV; i++)
        assert_int_equal(dlock__watchdog_count(cli[i]->wd), 1);
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    assert_int_equal(held_on(name), 0);
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
}

/* A minority busy: held all the same (the others' hold untouched); a
 * majority busy: not held, nothing left; waiting until one is released. */
static void test_redlock_busy(void **state)
{
    (void)state;
    char name[128];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = redlock_of(cli, "rl-busy", name, l);
    dlock_lock *o0 = other(cli[0], name), *o1 = other(cli[1], name);
    assert_int_equal(dlock_lock_acquire(o0, 20000), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(rl, 0, 10000), DLOCK_OK);
    assert_int_equal(my_count(1, name) + my_count(2, name), 2);
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    assert_int_equal(count_of(0, name, "other-owner:7"), 1);
    assert_int_equal(exists(1, name) + exists(2, name), 0);

    assert_int_equal(dlock_lock_acquire(o1, 20000), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(rl, 0, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "1 of 3 taken, 2 needed"));
    assert_int_equal(exists(2, name), 0);

    /* Either busy lock would do, and only one channel is listened to: the
     * waiter looks again every 50-100 ms (taking the free lock and giving it
     * back each time), and sooner when the lock it listens to is released. */
    mlthread m;
    start_mlthread(&m, rl, 10000, 10000, 0, NULL);
    th_sleep_ms(200);
    long long e0 = evalsha_calls(2);
    th_sleep_ms(500);
    long long polls = evalsha_calls(2) - e0;
    assert_int_equal(m.rc, 1);
    if (polls < 2 || polls > 2 * (500 / 50 + 1))
        fail_msg("%lld scripts on the free server in 500 ms", polls);
    assert_int_equal(dlock_lock_release(o0), DLOCK_OK);
    pthread_join(m.t, NULL);
    assert_int_equal(m.rc, DLOCK_OK);
    assert_int_equal(m.release_rc, DLOCK_OK);
    assert_int_equal(exists(0, name) + exists(2, name), 0);
    assert_int_equal(dlock_lock_release(o1), DLOCK_OK);
    dlock_lock_free(o0);
    dlock_lock_free(o1);
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
}

/* One server down: held on the other two, at once (no retries); two down:
 * fails at once, nothing left on the live one. */
static void test_redlock_servers_down(void **state)
{
    (void)state;
    char name[128];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = redlock_of(cli, "rl-down", name, l);
    th_redis_stop(&srv[2]);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_multilock_try(rl, 0, 10000), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());   /* the retry delay is 1.5 s */
    assert_int_equal(my_count(0, name) + my_count(1, name), 2);
    t0 = th_now_ms();
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_int_equal(exists(0, name) + exists(1, name), 0);
    /* a waiting acquire works the same */
    assert_int_equal(dlock_multilock_acquire(rl, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);

    th_redis_stop(&srv[1]);
    t0 = th_now_ms();
    assert_int_equal(dlock_multilock_try(rl, 5000, 10000), DLOCK_ECONN);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());   /* no waiting for a lost cause */
    assert_non_null(strstr(dlock_last_error(), "2 of 3 servers failed"));
    assert_int_equal(exists(0, name), 0);
    assert_int_equal(dlock__watchdog_count(cli[0]->wd), 0);
    assert_int_equal(th_redis_restart(&srv[1]), 0);
    assert_int_equal(th_redis_restart(&srv[2]), 0);
    assert_int_equal(dlock_multilock_try(rl, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
}

/* A majority taken, but too late: one server answers after the lease has
 * mostly run out (CLIENT PAUSE). Not held, and released everywhere, the late
 * server included (its hold would have outlived the others'). */
static void test_redlock_validity(void **state)
{
    (void)state;
    char name[128];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = redlock_of(cli, "rl-late", name, l);
    assert_int_equal(dlock_multilock_try(rl, 0, 600), DLOCK_OK);   /* warm: scripts loaded */
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    freeReplyObject(th_cmd(&srv[2], "CLIENT PAUSE 800 ALL"));
    freeReplyObject(th_cmd(&srv[1], "CLIENT PAUSE 800 ALL"));
    assert_int_equal(dlock_multilock_try(rl, 0, 600), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "past its validity"));
    assert_int_equal(held_on(name), 0);
    assert_int_equal(dlock__watchdog_count(cli[1]->wd), 0);
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
}

/* A server that accepts and never answers costs one command timeout, and the
 * RedLock holds with the other two. */
static void test_redlock_silent_server(void **state)
{
    (void)state;
    th_proxy *p = th_proxy_start(srv[2].port);
    assert_non_null(p);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(p));
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_command_timeout(cfg, 300), DLOCK_OK);
    assert_int_equal(dlock_config_set_connect_timeout(cfg, 300), DLOCK_OK);
    dlock_client *silent;
    assert_int_equal(dlock_client_open(&silent, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    dlock_client *cs[NSRV] = {cli[0], cli[1], silent};
    char name[128];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = redlock_of(cs, "rl-silent", name, l);
    th_proxy_blackhole(p, 1);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_multilock_try(rl, 0, 10000), DLOCK_OK);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 290 && took < 1500 * th_slack());
    assert_int_equal(my_count(0, name) + my_count(1, name), 2);
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    assert_int_equal(exists(0, name) + exists(1, name), 0);
    th_proxy_blackhole(p, 0);
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
    dlock_client_close(silent);
    th_proxy_stop(p);
    freeReplyObject(th_cmd(&srv[2], "DEL %s", name));
}

/* Redisson's RedLock testLockSuccess / testLockFailed, scaled: a lock held
 * on one server and force-released while a RedLock waits. */
static void test_redlock_redisson_scenarios(void **state)
{
    (void)state;
    char name[128];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = redlock_of(cli, "rl-redisson", name, l);
    for (int first = 0; first < NSRV; first++) {
        dlock_lock *o = other(cli[first], name);
        dlock_lock *o2 = other(cli[(first + 1) % NSRV], name);
        assert_int_equal(dlock_lock_acquire(o, DLOCK_WATCHDOG), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(o2, DLOCK_WATCHDOG), DLOCK_OK);
        mlthread m;
        start_mlthread(&m, rl, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 100, NULL);
        th_sleep_ms(200);
        assert_int_equal(m.rc, 1);   /* testLockFailed: two of three held elsewhere */
        int was = 0;
        assert_int_equal(dlock_lock_force_release(o, &was), DLOCK_OK);
        assert_int_equal(was, 1);
        pthread_join(m.t, NULL);
        assert_int_equal(m.rc, DLOCK_OK);
        assert_int_equal(m.release_rc, DLOCK_OK);
        assert_int_equal(dlock_lock_release(o2), DLOCK_OK);
        assert_int_equal(held_on(name), 0);
        dlock_lock_free(o);
        dlock_lock_free(o2);
    }
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
}

/* ------------------------------------------------------ asynchronously */

typedef struct rl_cb {
    atomic_int done, status;
} rl_cb;

static void rl_on_done(const dlock_async_result *res, void *ud)
{
    rl_cb *d = ud;
    atomic_store(&d->status, dlock_async_status(res));
    atomic_store(&d->done, 1);
}

static int rl_await(rl_cb *d)
{
    int64_t end = th_now_ms() + 10000 * th_slack();
    while (!atomic_load(&d->done) && th_now_ms() < end)
        th_sleep_ms(2);
    int rc = atomic_load(&d->done) ? atomic_load(&d->status) : -1000;
    atomic_store(&d->done, 0);
    return rc;
}

/* The RedLock asynchronously (explicit owners, one per server's client, the
 * same id): all up; a minority busy (held all the same); a majority busy (a
 * try holds nothing; a waiter takes it when one is released). A server
 * down is not tested here: its round trips take the client's connect budget
 * (see async.h). */
static void test_redlock_async(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rl-async");
    dlock_client_new_owner_id(cli[0], owner, sizeof(owner));
    dlock_lock *l[NSRV];
    for (int i = 0; i < NSRV; i++)
        assert_int_equal(dlock_lock_get_as(cli[i], name, owner, &l[i]), DLOCK_OK);
    dlock_multilock *rl;
    assert_int_equal(dlock_redlock_new(l, NSRV, &rl), DLOCK_OK);
    rl_cb d = {0};
    dlock_wait_opts once = {.lease_ms = 10000};
    assert_int_equal(dlock_multilock_acquire_async(rl, &once, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    for (int i = 0; i < NSRV; i++) {
        assert_int_equal(count_of(i, name, owner), 1);
        assert_true(pttl(i, name) > 8000);
    }
    assert_int_equal(dlock_multilock_release_async(rl, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_int_equal(held_on(name), 0);

    dlock_lock *o0 = other(cli[0], name), *o1 = other(cli[1], name);
    assert_int_equal(dlock_lock_acquire(o0, 20000), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire_async(rl, &once, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_int_equal(count_of(1, name, owner) + count_of(2, name, owner), 2);
    assert_int_equal(dlock_multilock_release_async(rl, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_int_equal(count_of(0, name, "other-owner:7"), 1);
    assert_int_equal(exists(1, name) + exists(2, name), 0);

    assert_int_equal(dlock_lock_acquire(o1, 20000), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire_async(rl, &once, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_ETIMEDOUT);
    assert_int_equal(exists(2, name), 0);
    dlock_wait_opts waitw = {.wait_ms = 8000 * th_slack(), .lease_ms = 10000};
    assert_int_equal(dlock_multilock_acquire_async(rl, &waitw, rl_on_done, &d), DLOCK_OK);
    th_sleep_ms(300);
    assert_int_equal(atomic_load(&d.done), 0);
    assert_int_equal(dlock_lock_release(o1), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_int_equal(count_of(1, name, owner) + count_of(2, name, owner), 2);
    assert_int_equal(dlock_multilock_release_async(rl, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_int_equal(dlock_lock_release(o0), DLOCK_OK);
    assert_int_equal(held_on(name), 0);

    assert_int_equal(dlock_multilock_try(rl, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(rl), DLOCK_OK);
    for (int i = 0; i < NSRV; i++)
        assert_int_equal(dlock_client_async_pending(cli[i]), 0);
    dlock_lock_free(o0);
    dlock_lock_free(o1);
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redlock_all_up),
        cmocka_unit_test(test_redlock_busy),
        cmocka_unit_test(test_redlock_servers_down),
        cmocka_unit_test(test_redlock_validity),
        cmocka_unit_test(test_redlock_silent_server),
        cmocka_unit_test(test_redlock_redisson_scenarios),
        cmocka_unit_test(test_redlock_async),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
