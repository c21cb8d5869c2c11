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

/* The RedLock released asynchronously (DLOCK_OK), no call left pending on
 * any client, then freed with its locks. */
static void rl_release_end(dlock_multilock *rl, dlock_lock **l, rl_cb *d)
{
    assert_int_equal(dlock_multilock_release_async(rl, rl_on_done, d), DLOCK_OK);
    assert_int_equal(rl_await(d), DLOCK_OK);
    for (int i = 0; i < NSRV; i++)
        assert_int_equal(dlock_client_async_pending(cli[i]), 0);
    dlock_multilock_free(rl);
    free_locks(l, NSRV);
}

/* A RedLock over one explicit-owner handle per server's client, the same
 * name and owner id on each (the asynchronous calls need explicit owners). */
static dlock_multilock *async_redlock_of(const char *prefix, char *name, char *owner,
                                         dlock_lock **l)
{
    th_name(name, 128, prefix);
    dlock_client_new_owner_id(cli[0], owner, DLOCK_OWNER_BUFSIZE);
    for (int i = 0; i < NSRV; i++)
        assert_int_equal(dlock_lock_get_as(cli[i], name, owner, &l[i]), DLOCK_OK);
    dlock_multilock *rl;
    assert_int_equal(dlock_redlock_new(l, NSRV, &rl), DLOCK_OK);
    return rl;
}

/* The RedLock asynchronously (explicit owners, one per server's client, the
 * same id): all up; a minority busy (held all the same); a majority busy (a
 * try holds nothing; a waiter takes it when one is released). Servers down:
 * test_redlock_async_servers_down. */
static void test_redlock_async(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = async_redlock_of("rl-async", name, owner, l);
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

/* A server down costs the asynchronous RedLock one connection attempt, not
 * the client's connect budget ((10 s + 1.5 s) x 4 here): with one of three
 * stopped it is taken (and released) by the other two at once; with two
 * stopped it fails with DLOCK_ECONN at once, holding nothing. */
static void test_redlock_async_servers_down(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = async_redlock_of("rl-async-down", name, owner, l);
    static rl_cb d;   /* static: a callback that comes after a failed check */
    dlock_wait_opts once = {.lease_ms = 10000};
    /* warm: every async connection open */
    assert_int_equal(dlock_multilock_acquire_async(rl, &once, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_int_equal(dlock_multilock_release_async(rl, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);

    const int64_t bound = 1000 * th_slack();   /* the connect budget is 46 s */
    th_redis_stop(&srv[2]);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_multilock_acquire_async(rl, &once, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    int64_t took = th_now_ms() - t0;
    assert_true(took < bound);
    assert_int_equal(count_of(0, name, owner) + count_of(1, name, owner), 2);
    t0 = th_now_ms();
    assert_int_equal(dlock_multilock_release_async(rl, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_true(th_now_ms() - t0 < bound);
    assert_int_equal(exists(0, name) + exists(1, name), 0);
    /* a waiting acquire the same */
    dlock_wait_opts waitw = {.wait_ms = 5000, .lease_ms = 10000};
    t0 = th_now_ms();
    assert_int_equal(dlock_multilock_acquire_async(rl, &waitw, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    assert_true(th_now_ms() - t0 < bound);
    assert_int_equal(dlock_multilock_release_async(rl, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);

    th_redis_stop(&srv[1]);
    t0 = th_now_ms();
    assert_int_equal(dlock_multilock_acquire_async(rl, &waitw, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_ECONN);
    assert_true(th_now_ms() - t0 < bound);   /* no waiting for a lost cause */
    assert_int_equal(exists(0, name), 0);
    assert_int_equal(dlock__watchdog_count(cli[0]->wd), 0);

    assert_int_equal(th_redis_restart(&srv[1]), 0);
    assert_int_equal(th_redis_restart(&srv[2]), 0);
    /* back: the next round reaches all three (a reconnection per server) */
    int rc = -1;
    for (int64_t until = th_now_ms() + 10000 * th_slack(); rc != DLOCK_OK && th_now_ms() < until;)
        if (dlock_multilock_acquire_async(rl, &once, rl_on_done, &d) == DLOCK_OK &&
            (rc = rl_await(&d)) != DLOCK_OK)
            th_sleep_ms(50);
    assert_int_equal(rc, DLOCK_OK);
    rl_release_end(rl, l, &d);
}

/* Chained from the callbacks, as an event-loop program runs it: each
 * callback starts the next call (acquire, release, acquire ...), so every
 * call starts on an io thread and each round's end (on whichever server's
 * client answered last) decides it. Every acquire and release succeeds, the
 * lock is held between them on all three servers, and nothing is left. */
typedef struct chain {
    dlock_multilock *rl;
    int left, failed;   /* calls still to end; failures */
    atomic_int done;
} chain;

static void chain_step(const dlock_async_result *res, void *ud);

static void chain_next(chain *c, int acquire)
{
    static const dlock_wait_opts once = {.lease_ms = 10000};
    int rc = acquire ? dlock_multilock_acquire_async(c->rl, &once, chain_step, c)
                     : dlock_multilock_release_async(c->rl, chain_step, c);
    if (rc != DLOCK_OK) {
        c->failed++;
        atomic_store(&c->done, 1);
    }
}

static void chain_step(const dlock_async_result *res, void *ud)
{
    chain *c = ud;
    int acquired = c->left % 2 == 0;   /* even: an acquire ended */
    if (dlock_async_status(res) != DLOCK_OK)
        c->failed++;
    if (--c->left == 0 || c->failed) {
        atomic_store(&c->done, 1);
        return;
    }
    chain_next(c, !acquired);
}

static void test_redlock_async_chained(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    dlock_lock *l[NSRV];
    dlock_multilock *rl = async_redlock_of("rl-chain", name, owner, l);
    chain c = {.rl = rl, .left = 400};
    chain_next(&c, 1);
    int64_t end = th_now_ms() + 30000 * th_slack();
    while (!atomic_load(&c.done) && th_now_ms() < end)
        th_sleep_ms(5);
    assert_int_equal(atomic_load(&c.done), 1);
    assert_int_equal(c.failed, 0);
    assert_int_equal(c.left, 0);
    assert_int_equal(held_on(name), 0);
    /* and the hold between: one more acquire, seen on every server */
    rl_cb d = {0};
    dlock_wait_opts once = {.lease_ms = 10000};
    assert_int_equal(dlock_multilock_acquire_async(rl, &once, rl_on_done, &d), DLOCK_OK);
    assert_int_equal(rl_await(&d), DLOCK_OK);
    for (int i = 0; i < NSRV; i++)
        assert_int_equal(count_of(i, name, owner), 1);
    rl_release_end(rl, l, &d);
}

/* A call's callback may run on another of its clients' io threads (the one
 * whose answer came last): a program whose release callback tells the main
 * thread, which closes every client at once while the callback still runs
 * (it lingers 30 ms), closes cleanly (close waits for that callback, as it
 * does for one on the client's own io thread), and nothing stays held.
 * Repeated, with fresh clients, under ASan in the sanitizer run. */
typedef struct signal_cb {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status;
    int linger_ms;   /* the callback goes on this long after telling */
} signal_cb;

static void signal_done(const dlock_async_result *res, void *ud)
{
    signal_cb *s = ud;
    pthread_mutex_lock(&s->mu);
    s->status = dlock_async_status(res);
    s->done = 1;
    int linger = s->linger_ms;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (linger > 0)
        th_sleep_ms(linger);
}

static int signal_await(signal_cb *s)
{
    pthread_mutex_lock(&s->mu);
    while (!s->done)
        pthread_cond_wait(&s->cv, &s->mu);
    s->done = 0;
    int rc = s->status;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void test_redlock_async_close_after_callback(void **state)
{
    (void)state;
    char name[128], owner[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rl-close");
    signal_cb s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    dlock_wait_opts once = {.lease_ms = 10000};
    for (int round = 0; round < 20; round++) {
        dlock_client *c[NSRV];
        dlock_lock *l[NSRV];
        for (int i = 0; i < NSRV; i++)
            c[i] = th_client(&srv[i], 0);
        dlock_client_new_owner_id(c[0], owner, sizeof(owner));
        for (int i = 0; i < NSRV; i++)
            assert_int_equal(dlock_lock_get_as(c[i], name, owner, &l[i]), DLOCK_OK);
        dlock_multilock *rl;
        assert_int_equal(dlock_redlock_new(l, NSRV, &rl), DLOCK_OK);
        assert_int_equal(dlock_multilock_acquire_async(rl, &once, signal_done, &s), DLOCK_OK);
        assert_int_equal(signal_await(&s), DLOCK_OK);
        s.linger_ms = 30;
        assert_int_equal(dlock_multilock_release_async(rl, signal_done, &s), DLOCK_OK);
        assert_int_equal(signal_await(&s), DLOCK_OK);
        s.linger_ms = 0;   /* read by the callback before it told */
        dlock_multilock_free(rl);
        free_locks(l, NSRV);
        for (int i = 0; i < NSRV; i++)   /* at once: the call's own client first */
            dlock_client_close(c[i]);
        assert_int_equal(held_on(name), 0);
    }
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
        cmocka_unit_test(test_redlock_async_servers_down),
        cmocka_unit_test(test_redlock_async_chained),
        cmocka_unit_test(test_redlock_async_close_after_callback),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
