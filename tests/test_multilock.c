/* Multi-lock: all or nothing, waiting on a busy lock (woken by its release,
 * not polling), leases, the watchdog, release, reentry, mixed types, several
 * servers, lost answers, cancellation, Redisson's own scenarios
 * (RedissonMultiLockTest) and bad input. Every check reads Redis itself:
 * what a user would look at with redis-cli. RedLock: test_redlock.c. */
#include "multilock_common.h"

/* ------------------------------------------------------------ basics */

/* Writes to Redis by the calling thread's pooled connections and by the
 * client's io thread for its asynchronous round trips (a multi-lock's parts
 * go there, blocking call or not). */
static uint64_t writes(dlock_client *c)
{
    return dlock__roundtrips + atomic_load(&c->stats.n[DLOCK__ST_ACALL_WRITES]);
}

/* Redisson's testLockUnlock: three names, a lease, held by the caller, then
 * all gone. Uncontended, one round trip to take all three and one to release
 * them (the scripts of one server written together). */
static void test_lock_unlock(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-basic", l, n, 3);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    /* warm-up: the scripts are loaded, a pooled connection is open */
    assert_int_equal(dlock_multilock_acquire(ml, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);

    uint64_t rt0 = writes(cli[0]), own0 = dlock__roundtrips;
    long long e0 = evalsha_calls(0);
    assert_int_equal(dlock_multilock_acquire(ml, 10000), DLOCK_OK);
    assert_int_equal(writes(cli[0]) - rt0, 1);
    /* written by the caller itself: no io thread carries a round on one server */
    assert_int_equal(dlock__roundtrips - own0, 1);
    assert_int_equal(evalsha_calls(0) - e0, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(my_count(0, n[i]), 1);
        long long t = pttl(0, n[i]);
        assert_true(th_ttl_within(t, 10000, 2000));
    }
    rt0 = writes(cli[0]);
    own0 = dlock__roundtrips;
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(writes(cli[0]) - rt0, 1);
    assert_int_equal(dlock__roundtrips - own0, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(exists(0, n[i]), 0);
    /* an empty script cache (a restart, SCRIPT FLUSH): loaded, then sent again */
    freeReplyObject(th_cmd(&srv[0], "SCRIPT FLUSH"));
    assert_int_equal(dlock_multilock_acquire(ml, 10000), DLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(my_count(0, n[i]), 1);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    /* released already: every lock answers not held */
    assert_int_equal(dlock_multilock_release(ml), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), n[0]));
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* Reentrant as its locks: two acquires, two releases. */
static void test_reentry(void **state)
{
    (void)state;
    dlock_lock *l[2];
    char n[2][128];
    get_locks(cli[0], "ml-reentry", l, n, 2);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 2, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 0, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(my_count(0, n[0]), 2);
    assert_int_equal(my_count(0, n[1]), 2);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(my_count(0, n[0]), 1);
    assert_int_equal(my_count(0, n[1]), 1);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(exists(0, n[0]) + exists(0, n[1]), 0);
    assert_int_equal(dlock__watchdog_count(cli[0]->wd), 0);
    dlock_multilock_free(ml);
    free_locks(l, 2);
}

/* A lease is every lock's TTL, and every lock goes when it runs out. */
static void test_lease_on_every_lock(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-lease", l, n, 3);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    int64_t lease = 400 * th_slack();
    assert_int_equal(dlock_multilock_try(ml, 0, lease), DLOCK_OK);
    for (int i = 0; i < 3; i++) {
        long long t = pttl(0, n[i]);
        assert_true(t > 0 && t <= lease);
    }
    th_sleep_ms(lease + 200);
    for (int i = 0; i < 3; i++)
        assert_int_equal(exists(0, n[i]), 0);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_ENOTOWNER);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* With DLOCK_WATCHDOG each lock is renewed past the watchdog timeout, and the
 * release stops every renewal. */
static void test_watchdog_renews_every_lock(void **state)
{
    (void)state;
    dlock_client *c = th_client(&srv[1], 600);
    dlock_lock *l[3];
    char n[3][128];
    get_locks(c, "ml-wd", l, n, 3);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(c->wd), 3);
    th_sleep_ms(1500);   /* 2.5 watchdog timeouts */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(exists(1, n[i]), 1);
        assert_true(pttl(1, n[i]) > 0);
    }
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(c->wd), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(exists(1, n[i]), 0);
    dlock_multilock_free(ml);
    free_locks(l, 3);
    dlock_client_close(c);
}

/* Release tries every lock and reports the first that was not held. */
static void test_release_all_first_error(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-relerr", l, n, 3);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, 10000), DLOCK_OK);
    freeReplyObject(th_cmd(&srv[0], "DEL %s", n[1]));   /* lost meanwhile */
    assert_int_equal(dlock_multilock_release(ml), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), n[1]));
    assert_int_equal(exists(0, n[0]) + exists(0, n[2]), 0);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* ---------------------------------------------------- all or nothing */

/* One lock held by another owner: the try fails, names it, and leaves nothing
 * held, with no wait and with one. */
static void test_all_or_nothing(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-aon", l, n, 3);
    dlock_lock *o = other(cli[0], n[1]);
    assert_int_equal(dlock_lock_acquire(o, 20000), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 0, 10000), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), n[1]));
    assert_non_null(strstr(dlock_last_error(), "held by another owner"));
    assert_int_equal(exists(0, n[0]) + exists(0, n[2]), 0);

    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_multilock_try(ml, 300, DLOCK_WATCHDOG), DLOCK_ETIMEDOUT);
    int64_t took = th_now_ms() - t0;
    assert_true(took >= 295 && took < 3000 * th_slack());
    assert_int_equal(exists(0, n[0]) + exists(0, n[2]), 0);
    assert_int_equal(dlock__watchdog_count(cli[0]->wd), 0);
    /* the other owner's hold is untouched */
    assert_int_equal(count_of(0, n[1], "other-owner:7"), 1);
    assert_int_equal(th_int(&srv[0], "HLEN %s", n[1]), 1);
    /* a lock the caller held before keeps its hold, and its renewal */
    assert_int_equal(dlock_lock_acquire(l[0], DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 0, 10000), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_multilock_try(ml, 200, DLOCK_WATCHDOG), DLOCK_ETIMEDOUT);
    assert_int_equal(my_count(0, n[0]), 1);
    assert_true(pttl(0, n[0]) > 20000);
    assert_int_equal(dlock__watchdog_count(cli[0]->wd), 1);
    assert_int_equal(dlock_lock_release(l[0]), DLOCK_OK);
    assert_int_equal(dlock__watchdog_count(cli[0]->wd), 0);
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    dlock_lock_free(o);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* Redisson's testWaitAndLeaseTimeouts: ten threads try (no wait, a lease) at
 * once; exactly one gets all three. */
typedef struct racer {
    dlock_multilock *ml;
    pthread_barrier_t *tried;
    int rc;
    pthread_t t;
} racer;

static void *racer_main(void *arg)
{
    racer *r = arg;
    r->rc = dlock_multilock_try(r->ml, 0, 10000);
    pthread_barrier_wait(r->tried);
    if (r->rc == DLOCK_OK)
        assert_int_equal(dlock_multilock_release(r->ml), DLOCK_OK);
    return NULL;
}

static void test_one_of_ten_wins(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-race", l, n, 3);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    enum { T = 10 };
    racer r[T];
    pthread_barrier_t tried;
    pthread_barrier_init(&tried, NULL, T);
    for (int i = 0; i < T; i++) {
        r[i] = (racer){ml, &tried, 1, 0};
        pthread_create(&r[i].t, NULL, racer_main, &r[i]);
    }
    int won = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(r[i].t, NULL);
        if (r[i].rc == DLOCK_OK)
            won++;
        else
            assert_int_equal(r[i].rc, DLOCK_ETIMEDOUT);
    }
    assert_int_equal(won, 1);
    pthread_barrier_destroy(&tried);
    for (int i = 0; i < 3; i++)
        assert_int_equal(exists(0, n[i]), 0);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* ------------------------------------------------------------ waiting */

/* Held by one owner that is not other-owner:7 (the waiting thread). */
static int held_by_waiter(void *arg)
{
    const char *name = arg;
    return th_int(&srv[0], "HLEN %s", name) == 1 &&
           th_int(&srv[0], "HEXISTS %s other-owner:7", name) == 0;
}

/* Waiting for the busy lock: nothing held meanwhile, and the holder's release
 * wakes the waiter (a handful of scripts in all, not a poll); then it holds
 * all three. */
static void test_waits_for_busy_lock(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-wait", l, n, 3);
    dlock_lock *o = other(cli[0], n[2]);
    assert_int_equal(dlock_lock_acquire(o, DLOCK_WATCHDOG), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    mlthread m;
    start_mlthread(&m, ml, DLOCK_WAIT_FOREVER, 60000, 300 * th_slack(), NULL);
    th_sleep_ms(300);
    assert_int_equal(m.rc, 1);   /* still waiting */
    assert_int_equal(exists(0, n[0]) + exists(0, n[1]), 0);   /* holding nothing */
    long long e0 = evalsha_calls(0);
    th_sleep_ms(500);
    assert_int_equal(evalsha_calls(0) - e0, 0);   /* asleep: not polling */
    int64_t released_at = th_now_ms();
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    assert_true(await_true(acquire_returned, &m, 3000));
    assert_int_equal(m.rc, DLOCK_OK);
    assert_true(m.acquired_at - released_at < 1000 * th_slack());
    for (int i = 0; i < 3; i++)
        assert_true(held_by_waiter(n[i]));
    /* the release, a wake-up, one round of three: nothing more */
    assert_true(evalsha_calls(0) - e0 <= 1 + 6);
    pthread_join(m.t, NULL);
    assert_int_equal(m.release_rc, DLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(exists(0, n[i]), 0);
    dlock_lock_free(o);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* Redisson's testMultiThreads: one thread holds the multi-lock for a while,
 * another waits for it and gets it after the release. */
static void test_multi_threads(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-threads", l, n, 3);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    mlthread a;
    start_mlthread(&a, ml, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 600, NULL);
    while (a.rc == 1)
        th_sleep_ms(5);
    assert_int_equal(a.rc, DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, DLOCK_WATCHDOG), DLOCK_OK);
    pthread_join(a.t, NULL);
    assert_int_equal(a.release_rc, DLOCK_OK);
    assert_true(th_now_ms() >= a.ended - 5);   /* not before a let go */
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* Threads taking overlapping multi-locks in opposite orders: each critical
 * section is alone (a read-modify-write with a pause in it loses nothing),
 * and nobody deadlocks, since nothing is held while waiting. */
typedef struct turner {
    dlock_multilock *ml;
    int rounds;
    pthread_t t;
} turner;

static int shared_counter;

static void *turner_main(void *arg)
{
    turner *t = arg;
    for (int i = 0; i < t->rounds; i++) {
        assert_int_equal(dlock_multilock_acquire(t->ml, DLOCK_WATCHDOG), DLOCK_OK);
        int v = shared_counter;
        th_sleep_ms(2);
        shared_counter = v + 1;
        assert_int_equal(dlock_multilock_release(t->ml), DLOCK_OK);
    }
    return NULL;
}

static void test_opposite_orders(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-orders", l, n, 3);
    dlock_lock *fwd[3] = {l[0], l[1], l[2]}, *back[3] = {l[2], l[1], l[0]};
    dlock_lock *pair[2] = {l[2], l[0]};
    dlock_multilock *ml[3];
    assert_int_equal(dlock_multilock_new(fwd, 3, &ml[0]), DLOCK_OK);
    assert_int_equal(dlock_multilock_new(back, 3, &ml[1]), DLOCK_OK);
    assert_int_equal(dlock_multilock_new(pair, 2, &ml[2]), DLOCK_OK);
    enum { T = 4, R = 15 };
    turner t[T];
    shared_counter = 0;
    for (int i = 0; i < T; i++) {
        t[i] = (turner){ml[i % 3], R, 0};
        pthread_create(&t[i].t, NULL, turner_main, &t[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i].t, NULL);
    assert_int_equal(shared_counter, T * R);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(exists(0, n[i]), 0);
        dlock_multilock_free(ml[i]);
    }
    free_locks(l, 3);
}

/* A wait cancelled from another thread ends promptly, holding nothing. */
static void test_cancel_mid_wait(void **state)
{
    (void)state;
    dlock_lock *l[3];
    char n[3][128];
    get_locks(cli[0], "ml-cancel", l, n, 3);
    dlock_lock *o = other(cli[0], n[0]);
    assert_int_equal(dlock_lock_acquire(o, DLOCK_WATCHDOG), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    dlock_cancel *cancel;
    assert_int_equal(dlock_cancel_new(&cancel), DLOCK_OK);
    mlthread m;
    start_mlthread(&m, ml, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0, cancel);
    th_sleep_ms(300);
    assert_int_equal(m.rc, 1);
    int64_t fired = th_now_ms();
    dlock_cancel_fire(cancel);
    pthread_join(m.t, NULL);
    assert_int_equal(m.rc, DLOCK_ECANCELED);
    assert_true(m.acquired_at - fired < 500 * th_slack());
    assert_int_equal(exists(0, n[1]) + exists(0, n[2]), 0);
    assert_int_equal(th_int(&srv[0], "HLEN %s", n[0]), 1);   /* still the other's */
    /* the reservation a long waiter takes is handed back */
    assert_int_equal(th_int(&srv[0], "EXISTS dlock_lock_next:{%s}", n[0]), 0);
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    dlock_cancel_free(cancel);
    dlock_lock_free(o);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* ------------------------------------------------------- mixed types */

/* A reentrant and a fair lock together. Waiting on the fair one queues the
 * caller in its queue (and a give-up leaves it); taking it empties it. */
static void test_reentrant_and_fair(void **state)
{
    (void)state;
    char base[100], rn[128], fn[128];
    th_name(base, sizeof(base), "ml-mixed");
    snprintf(rn, sizeof(rn), "%s-r", base);
    snprintf(fn, sizeof(fn), "%s-f", base);
    dlock_lock *l[2], *fo;
    assert_int_equal(dlock_lock_get(cli[0], rn, &l[0]), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get(cli[0], fn, &l[1]), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get_as(cli[0], fn, "other-owner:7", &fo), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 2, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, 10000), DLOCK_OK);
    assert_int_equal(my_count(0, rn), 1);
    assert_int_equal(my_count(0, fn), 1);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);

    assert_int_equal(dlock_lock_acquire(fo, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 0, 10000), DLOCK_ETIMEDOUT);
    assert_int_equal(th_int(&srv[0], "LLEN redisson_lock_queue:{%s}", fn), 0);   /* no wait: never queued */
    assert_int_equal(dlock_multilock_try(ml, 300, 10000), DLOCK_ETIMEDOUT);
    assert_int_equal(th_int(&srv[0], "LLEN redisson_lock_queue:{%s}", fn), 0);   /* left it */
    assert_int_equal(exists(0, rn), 0);

    mlthread m;
    start_mlthread(&m, ml, DLOCK_WAIT_FOREVER, 10000, 0, NULL);
    int64_t end = th_now_ms() + 5000 * th_slack();
    while (th_int(&srv[0], "LLEN redisson_lock_queue:{%s}", fn) != 1 && th_now_ms() < end)
        th_sleep_ms(5);
    assert_int_equal(th_int(&srv[0], "LLEN redisson_lock_queue:{%s}", fn), 1);   /* queued */
    /* The round that queued it took the reentrant lock too; the give-back
     * follows one round trip later: held by nobody while it waits. */
    while (exists(0, rn) != 0 && th_now_ms() < end)
        th_sleep_ms(5);
    assert_int_equal(exists(0, rn), 0);
    assert_int_equal(dlock_lock_release(fo), DLOCK_OK);
    pthread_join(m.t, NULL);
    assert_int_equal(m.rc, DLOCK_OK);
    assert_int_equal(m.release_rc, DLOCK_OK);
    assert_int_equal(th_int(&srv[0], "LLEN redisson_lock_queue:{%s}", fn), 0);
    assert_int_equal(exists(0, rn) + exists(0, fn), 0);
    dlock_lock_free(fo);
    dlock_multilock_free(ml);
    free_locks(l, 2);
}

/* Read and write handles in multi-locks: beside a fair lock; two owners'
 * multi-locks holding one read lock at once; a write lock busy with another
 * owner's read hold, waited for on the read-write lock's channel with nothing
 * held meanwhile and woken by the read release; the read and the write handle
 * of one name refused together. */
static void test_read_and_write_handles(void **state)
{
    (void)state;
    char base[100], rn[128], fn[128], wn[128], xn[128];
    th_name(base, sizeof(base), "ml-rw");
    snprintf(rn, sizeof(rn), "%s-r", base);
    snprintf(fn, sizeof(fn), "%s-f", base);
    snprintf(wn, sizeof(wn), "%s-w", base);
    snprintf(xn, sizeof(xn), "%s-x", base);
    dlock_lock *l[3];
    assert_int_equal(dlock_read_lock_get(cli[0], rn, &l[0]), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get(cli[0], fn, &l[1]), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get(cli[0], wn, &l[2]), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, 10000), DLOCK_OK);
    redisReply *r = th_cmd(&srv[0], "HGET %s mode", rn);
    assert_string_equal(r->str, "read");
    freeReplyObject(r);
    r = th_cmd(&srv[0], "HGET %s mode", wn);
    assert_string_equal(r->str, "write");
    freeReplyObject(r);
    int64_t n = 0;
    assert_int_equal(dlock_lock_hold_count(l[0], &n), DLOCK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(dlock_lock_hold_count(l[2], &n), DLOCK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(exists(0, rn) + exists(0, fn) + exists(0, wn), 0);
    dlock_multilock_free(ml);

    /* Two owners' multi-locks share the read lock. */
    dlock_lock *ra, *rb, *xa, *xb;
    assert_int_equal(dlock_read_lock_get_as(cli[0], rn, "reader-a:1", &ra), DLOCK_OK);
    assert_int_equal(dlock_read_lock_get_as(cli0b, rn, "reader-b:2", &rb), DLOCK_OK);
    assert_int_equal(dlock_lock_get_as(cli[0], xn, "reader-a:1", &xa), DLOCK_OK);
    assert_int_equal(dlock_fair_lock_get_as(cli0b, fn, "reader-b:2", &xb), DLOCK_OK);
    dlock_lock *la[2] = {ra, xa}, *lb[2] = {rb, xb};
    dlock_multilock *ma, *mb;
    assert_int_equal(dlock_multilock_new(la, 2, &ma), DLOCK_OK);
    assert_int_equal(dlock_multilock_new(lb, 2, &mb), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ma, 0, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(mb, 0, 10000), DLOCK_OK);
    assert_int_equal(th_int(&srv[0], "HLEN %s", rn), 3);   /* mode + two readers */
    assert_int_equal(dlock_multilock_release(ma), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(mb), DLOCK_OK);
    assert_int_equal(exists(0, rn), 0);

    /* A write lock busy with another owner's read hold. */
    dlock_lock *reader, *w[2];
    assert_int_equal(dlock_read_lock_get_as(cli0b, wn, "reader-c:3", &reader), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(reader, 20000), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get(cli[0], wn, &w[0]), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli[0], xn, &w[1]), DLOCK_OK);
    dlock_multilock *mw;
    assert_int_equal(dlock_multilock_new(w, 2, &mw), DLOCK_OK);
    mlthread m;
    start_mlthread(&m, mw, DLOCK_WAIT_FOREVER, 10000, 0, NULL);
    th_sleep_ms(300);
    long long before = evalsha_calls(0);
    th_sleep_ms(500);
    assert_true(evalsha_calls(0) - before <= 1);   /* asleep on the channel, not polling */
    assert_int_equal(exists(0, xn), 0);             /* holding nothing while it waits */
    assert_int_equal(atomic_load(&m.rc), 1);
    int64_t released = th_now_ms();
    assert_int_equal(dlock_lock_release(reader), DLOCK_OK);
    pthread_join(m.t, NULL);
    assert_int_equal(m.rc, DLOCK_OK);
    assert_true(m.acquired_at - released < 1000 * th_slack());
    assert_int_equal(m.release_rc, DLOCK_OK);
    assert_int_equal(exists(0, wn) + exists(0, xn), 0);
    dlock_multilock_free(mw);

    /* Both sides of one name in one multi-lock. */
    dlock_lock *both[2];
    assert_int_equal(dlock_read_lock_get(cli[0], base, &both[0]), DLOCK_OK);
    assert_int_equal(dlock_write_lock_get(cli[0], base, &both[1]), DLOCK_OK);
    dlock_multilock *bad = NULL;
    assert_int_equal(dlock_multilock_new(both, 2, &bad), DLOCK_EINVAL);
    assert_null(bad);
    assert_non_null(strstr(dlock_last_error(), base));
    free_locks(both, 2);
    free_locks(w, 2);
    dlock_lock_free(reader);
    dlock_multilock_free(ma);
    dlock_multilock_free(mb);
    dlock_lock_free(ra);
    dlock_lock_free(rb);
    dlock_lock_free(xa);
    dlock_lock_free(xb);
    free_locks(l, 3);
}

/* A key that is not a lock: DLOCK_EWRONGTYPE naming it, nothing held. */
static void test_wrong_type(void **state)
{
    (void)state;
    dlock_lock *l[2];
    char n[2][128];
    get_locks(cli[0], "ml-wrongtype", l, n, 2);
    freeReplyObject(th_cmd(&srv[0], "SET %s text", n[1]));
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 2, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 1000, 10000), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), n[1]));
    assert_int_equal(exists(0, n[0]), 0);
    freeReplyObject(th_cmd(&srv[0], "DEL %s", n[1]));
    dlock_multilock_free(ml);
    free_locks(l, 2);
}

/* --------------------------------------------------- several servers */

/* Locks on two servers through two clients: one round trip each, in parallel;
 * a busy one on one server leaves nothing on the other. Redisson's test():
 * while held, another thread's tries fail, twice. */
static void *try_twice(void *arg)
{
    dlock_multilock *ml = arg;
    intptr_t fails = 0;
    for (int i = 0; i < 2; i++)
        fails += dlock_multilock_try(ml, 0, DLOCK_WATCHDOG) == DLOCK_ETIMEDOUT;
    return (void *)fails;
}

static void test_two_servers(void **state)
{
    (void)state;
    char base[100], a[128], b[128], c[128];
    th_name(base, sizeof(base), "ml-servers");
    snprintf(a, sizeof(a), "%s-a", base);
    snprintf(b, sizeof(b), "%s-b", base);
    snprintf(c, sizeof(c), "%s-c", base);
    dlock_lock *l[3];
    assert_int_equal(dlock_lock_get(cli[0], a, &l[0]), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli[1], b, &l[1]), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli[0], c, &l[2]), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_acquire(ml, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(my_count(0, a), 1);
    assert_int_equal(my_count(1, b), 1);
    assert_int_equal(my_count(0, c), 1);
    pthread_t t;
    void *fails;
    pthread_create(&t, NULL, try_twice, ml);
    pthread_join(t, &fails);
    assert_int_equal((intptr_t)fails, 2);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(exists(0, a) + exists(1, b) + exists(0, c), 0);

    dlock_lock *o = other(cli[1], b);
    assert_int_equal(dlock_lock_acquire(o, 10000), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 0, DLOCK_WATCHDOG), DLOCK_ETIMEDOUT);
    assert_int_equal(exists(0, a) + exists(0, c), 0);
    /* the same name through another client on the same server is a duplicate;
     * on another server it is another lock */
    dlock_lock *dup, *elsewhere;
    assert_int_equal(dlock_lock_get(cli0b, a, &dup), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli[2], a, &elsewhere), DLOCK_OK);
    dlock_lock *l2[2] = {l[0], dup}, *l3[2] = {l[0], elsewhere};
    dlock_multilock *ml2 = (dlock_multilock *)1;
    assert_int_equal(dlock_multilock_new(l2, 2, &ml2), DLOCK_EINVAL);
    assert_null(ml2);
    assert_non_null(strstr(dlock_last_error(), "both name"));
    assert_int_equal(dlock_multilock_new(l3, 2, &ml2), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml2, 0, 5000), DLOCK_OK);
    assert_int_equal(my_count(0, a) + my_count(2, a), 2);
    assert_int_equal(dlock_multilock_release(ml2), DLOCK_OK);
    dlock_multilock_free(ml2);
    dlock_lock_free(dup);
    dlock_lock_free(elsewhere);
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    dlock_lock_free(o);
    dlock_multilock_free(ml);
    free_locks(l, 3);
}

/* An attempt written and never answered (the proxy swallows the replies):
 * DLOCK_EUNKNOWN naming that lock, as a single acquire would answer, never
 * sent again; the lock taken on the other server is given back. */
static void test_lost_answer(void **state)
{
    (void)state;
    th_proxy *p = th_proxy_start(srv[1].port);
    assert_non_null(p);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_proxy_port(p));
    dlock_config *cfg = dlock_config_new();
    assert_int_equal(dlock_config_set_url(cfg, url), DLOCK_OK);
    assert_int_equal(dlock_config_set_command_timeout(cfg, 300), DLOCK_OK);
    assert_int_equal(dlock_config_set_retry(cfg, 3, 100), DLOCK_OK);
    dlock_client *pc;
    assert_int_equal(dlock_client_open(&pc, cfg), DLOCK_OK);
    dlock_config_free(cfg);
    char base[100], a[128], b[128];
    th_name(base, sizeof(base), "ml-lost");
    snprintf(a, sizeof(a), "%s-a", base);
    snprintf(b, sizeof(b), "%s-b", base);
    dlock_lock *l[2];
    assert_int_equal(dlock_lock_get(cli[0], a, &l[0]), DLOCK_OK);
    assert_int_equal(dlock_lock_get(pc, b, &l[1]), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 2, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 0, 5000), DLOCK_OK);   /* scripts loaded */
    assert_int_equal(dlock_multilock_try(ml, 0, 5000), DLOCK_OK);   /* held twice */
    /* A release whose answer is lost is sent again (its latch makes the
     * second run answer as the first): one hold less, not two. */
    th_proxy_swallow_replies(p);
    long long e0 = evalsha_calls(1);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(evalsha_calls(1) - e0, 2);
    assert_int_equal(my_count(0, a), 1);
    char owner[DLOCK_OWNER_BUFSIZE];
    dlock_client_owner_id(pc, owner, sizeof(owner));
    assert_int_equal(count_of(1, b, owner), 1);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    assert_int_equal(exists(0, a) + exists(1, b), 0);
    /* An acquire whose answer is lost is not. */
    th_proxy_swallow_replies(p);
    e0 = evalsha_calls(1);
    assert_int_equal(dlock_multilock_try(ml, 0, 5000), DLOCK_EUNKNOWN);
    assert_non_null(strstr(dlock_last_error(), b));
    assert_non_null(strstr(dlock_last_error(), "may be held"));
    assert_int_equal(exists(0, a), 0);              /* given back */
    assert_int_equal(evalsha_calls(1) - e0, 1);     /* sent once, not again */
    assert_int_equal(exists(1, b), 1);              /* it ran: held until its lease */
    assert_true(pttl(1, b) <= 5000);
    dlock_multilock_free(ml);
    free_locks(l, 2);
    dlock_client_close(pc);
    th_proxy_stop(p);
    freeReplyObject(th_cmd(&srv[1], "DEL %s", b));
}

/* All taken, but the round took longer than the lease (one server answers
 * late): the first lock may have expired before the last was taken, so it
 * is not held, and the late one is given back. */
static void test_round_longer_than_lease(void **state)
{
    (void)state;
    char base[100], a[128], b[128];
    th_name(base, sizeof(base), "ml-slow");
    snprintf(a, sizeof(a), "%s-a", base);
    snprintf(b, sizeof(b), "%s-b", base);
    dlock_lock *l[2];
    assert_int_equal(dlock_lock_get(cli[0], a, &l[0]), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli[1], b, &l[1]), DLOCK_OK);
    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 2, &ml), DLOCK_OK);
    assert_int_equal(dlock_multilock_try(ml, 0, 300), DLOCK_OK);
    assert_int_equal(dlock_multilock_release(ml), DLOCK_OK);
    freeReplyObject(th_cmd(&srv[1], "CLIENT PAUSE 500 ALL"));
    assert_int_equal(dlock_multilock_try(ml, 0, 300), DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_last_error(), "not within their lease"));
    assert_int_equal(exists(0, a) + exists(1, b), 0);
    dlock_multilock_free(ml);
    free_locks(l, 2);
}

/* ------------------------------------------------------ from a callback */

/* A blocking multi-lock of no wait works inside a dlock callback, on the io
 * thread, with locks on another client too; a wait is refused on the io
 * thread of one of its locks' clients. Two
 * such callbacks at once, each on its own client's io thread and each over
 * the other's locks, end: neither waits for the other's io thread. */
typedef struct incb {
    dlock_multilock *ml;
    pthread_barrier_t *both;   /* NULL: alone */
    int rc, rel, waited;
    atomic_int done;
} incb;

static void in_callback(const dlock_async_result *res, void *ud)
{
    (void)res;
    incb *x = ud;
    if (x->both)
        pthread_barrier_wait(x->both);   /* the other callback is running too */
    x->rc = dlock_multilock_try(x->ml, 0, 10000);
    x->rel = x->rc == DLOCK_OK ? dlock_multilock_release(x->ml) : -1;
    x->waited = dlock_multilock_try(x->ml, 100, 10000);
    if (x->waited == DLOCK_OK)   /* a wait on another client's io thread is allowed */
        dlock_multilock_release(x->ml);
    atomic_store(&x->done, 1);
}

static int incb_done(void *arg) { return atomic_load(&((incb *)arg)->done); }

static void test_from_a_callback(void **state)
{
    (void)state;
    char base[100], n[4][128];
    th_name(base, sizeof(base), "ml-cb");
    dlock_lock *l[4], *trigger[2];
    for (int i = 0; i < 4; i++) {
        snprintf(n[i], sizeof(n[i]), "%s-%d", base, i);
        assert_int_equal(dlock_lock_get(cli[i % 2], n[i], &l[i]), DLOCK_OK);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(dlock_lock_get_as(cli[i], n[i], "trigger:1", &trigger[i]), DLOCK_OK);
    /* ab: a lock on each client; on1, on0: the other client's locks only */
    dlock_lock *ab[2] = {l[0], l[1]}, *on1[2] = {l[1], l[3]}, *on0[2] = {l[0], l[2]};
    dlock_multilock *mab, *m1, *m0;
    assert_int_equal(dlock_multilock_new(ab, 2, &mab), DLOCK_OK);
    assert_int_equal(dlock_multilock_new(on1, 2, &m1), DLOCK_OK);
    assert_int_equal(dlock_multilock_new(on0, 2, &m0), DLOCK_OK);

    incb x = {.ml = mab};
    assert_int_equal(dlock_lock_is_locked_async(trigger[0], in_callback, &x), DLOCK_OK);
    assert_true(await_true(incb_done, &x, 10000));
    assert_int_equal(x.rc, DLOCK_OK);
    assert_int_equal(x.rel, DLOCK_OK);
    assert_int_equal(x.waited, DLOCK_EINVAL);
    assert_int_equal(exists(0, n[0]) + exists(1, n[1]), 0);

    pthread_barrier_t both;
    pthread_barrier_init(&both, NULL, 2);
    incb y0 = {.ml = m1, .both = &both}, y1 = {.ml = m0, .both = &both};
    assert_int_equal(dlock_lock_is_locked_async(trigger[0], in_callback, &y0), DLOCK_OK);
    assert_int_equal(dlock_lock_is_locked_async(trigger[1], in_callback, &y1), DLOCK_OK);
    assert_true(await_true(incb_done, &y0, 10000));
    assert_true(await_true(incb_done, &y1, 10000));
    assert_int_equal(y0.rc, DLOCK_OK);
    assert_int_equal(y0.rel, DLOCK_OK);
    assert_int_equal(y1.rc, DLOCK_OK);
    assert_int_equal(y1.rel, DLOCK_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(exists(i % 2, n[i]), 0);
    pthread_barrier_destroy(&both);
    dlock_multilock_free(mab);
    dlock_multilock_free(m1);
    dlock_multilock_free(m0);
    free_locks(l, 4);
    free_locks(trigger, 2);
}

/* ---------------------------------------------------------- bad input */

static void test_bad_input(void **state)
{
    (void)state;
    dlock_lock *l[3], *dup;
    char n[3][128];
    get_locks(cli[0], "ml-bad", l, n, 3);
    assert_int_equal(dlock_lock_get(cli[0], n[0], &dup), DLOCK_OK);
    dlock_lock *with_null[2] = {l[0], NULL};
    dlock_lock *twice[3] = {l[0], l[1], l[0]};
    dlock_lock *same_name[2] = {l[0], dup};
    dlock_lock *rl_two[2] = {l[0], l[1]};
    dlock_lock *rl_one_client[3] = {l[0], l[1], l[2]};
    dlock_lock *rb, *rc2;
    assert_int_equal(dlock_lock_get(cli0b, "rl-bad-b", &rb), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli[2], "rl-bad-c", &rc2), DLOCK_OK);
    dlock_lock *rl_one_server[3] = {l[0], rb, rc2};   /* cli[0] and cli0b: one server */
    struct {
        int red;
        dlock_lock *const *locks;
        size_t n;
        const char *says;
    } cases[] = {
        {0, NULL, 3, "no locks"},
        {0, l, 0, "no locks"},
        {0, with_null, 2, "locks[1] is NULL"},
        {0, twice, 3, "locks[0] and locks[2] are the same handle"},
        {0, same_name, 2, "both name"},
        {1, NULL, 0, "no locks"},
        {1, rl_two, 2, "at least 3"},
        {1, rl_one_client, 3, "same client"},
        {1, rl_one_server, 3, "both on"},
    };
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(cases); i++) {
        dlock_multilock *ml = (dlock_multilock *)1;
        int rc = cases[i].red ? dlock_redlock_new(cases[i].locks, cases[i].n, &ml)
                              : dlock_multilock_new(cases[i].locks, cases[i].n, &ml);
        if (rc != DLOCK_EINVAL || ml != NULL || !strstr(dlock_last_error(), cases[i].says))
            fail_msg("case %zu: rc %d, message '%s'", i, rc, dlock_last_error());
    }
    assert_int_equal(dlock_multilock_new(l, 3, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_acquire(NULL, 1000), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_try(NULL, 0, 1000), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_release(NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "NULL"));
    dlock_multilock_free(NULL);

    dlock_multilock *ml;
    assert_int_equal(dlock_multilock_new(l, 3, &ml), DLOCK_OK);
    long long e0 = evalsha_calls(0);
    /* -1 was DLOCK_WATCHDOG before 0.2.0 */
    assert_int_equal(dlock_multilock_acquire(ml, -1), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "lease"));
    assert_int_equal(dlock_multilock_try(ml, -7, 1000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_last_error(), "wait"));
    assert_int_equal(dlock_multilock_try(ml, 0, -3), DLOCK_EINVAL);
    assert_int_equal(evalsha_calls(0), e0);   /* nothing was sent */
    for (int i = 0; i < 3; i++)
        assert_int_equal(exists(0, n[i]), 0);
    dlock_multilock_free(ml);
    dlock_lock_free(dup);
    dlock_lock_free(rb);
    dlock_lock_free(rc2);
    free_locks(l, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_unlock),
        cmocka_unit_test(test_reentry),
        cmocka_unit_test(test_lease_on_every_lock),
        cmocka_unit_test(test_watchdog_renews_every_lock),
        cmocka_unit_test(test_release_all_first_error),
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_one_of_ten_wins),
        cmocka_unit_test(test_waits_for_busy_lock),
        cmocka_unit_test(test_multi_threads),
        cmocka_unit_test(test_opposite_orders),
        cmocka_unit_test(test_cancel_mid_wait),
        cmocka_unit_test(test_reentrant_and_fair),
        cmocka_unit_test(test_read_and_write_handles),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_two_servers),
        cmocka_unit_test(test_lost_answer),
        cmocka_unit_test(test_round_longer_than_lease),
        cmocka_unit_test(test_from_a_callback),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
