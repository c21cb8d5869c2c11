/* The read-write lock with others: the wake-ups of each release, sharing a
 * lock with Redisson's side (played here with Redis commands in Redisson's
 * layout and channel), force release per side, the other calls (fenced, run,
 * cancellable, TTL), and bad input. */
#include "rwlock_util.h"

/* ------------------------------------------------------------- wake-ups */

/* A write release ("1") wakes every waiting reader at once: they all get in
 * long before the writer's TTL (30 s), each with few attempts
 * (RedissonReadWriteLockTest.testWriteRead, 8 readers holding 200 ms). */
static void test_write_release_wakes_all_readers(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-wake1");
    dlock_lock *w = wr(cli, name, NULL), *r = rd(cli, name, NULL);
    assert_int_equal(dlock_lock_acquire(w, DLOCK_WATCHDOG), DLOCK_OK);
    enum { N = 8 };
    taker k[N];
    for (int i = 0; i < N; i++)
        start_taker(&k[i], r, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 200);
    assert_true(await_waiters(cli, name, N, 5000));
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(k[i].t, NULL);
        assert_int_equal(k[i].rc, DLOCK_OK);
        assert_int_equal(k[i].release_rc, DLOCK_OK);
        assert_true(k[i].acquired_at - t0 < 1000 * th_slack());
        if (k[i].attempts > 3)
            fail_msg("reader %d made %llu attempts", i, (unsigned long long)k[i].attempts);
    }
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(w);
    dlock_lock_free(r);
}

/* Beyond Redisson: a writer that keeps read holds lets the readers in when
 * its last write hold goes (mode read), and its "1" wakes them at once
 * instead of at its TTL (30 s). */
static void test_writer_keeping_read_wakes_readers(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-down");
    dlock_lock *w = wr(cli, name, NULL), *r = rd(cli, name, NULL), *o = rd(cli, name, NULL);
    assert_int_equal(dlock_lock_acquire(w, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, DLOCK_WATCHDOG), DLOCK_OK);
    taker k;
    start_taker(&k, o, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0);
    assert_true(await_waiters(cli, name, 1, 5000));
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    pthread_join(k.t, NULL);
    assert_int_equal(k.rc, DLOCK_OK);
    assert_true(k.acquired_at - t0 < 1000 * th_slack());
    assert_int_equal(th_int(&srv, "HLEN %s", name), 2);   /* mode, this thread's field */
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(w);
    dlock_lock_free(r);
    dlock_lock_free(o);
}

/* The last read release ("0") wakes a waiting writer at once; a read release
 * that leaves other readers wakes nobody. */
static void test_read_release_wakes_writer(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-wake0");
    dlock_lock *r1 = rd(cli, name, "r:1"), *r2 = rd(cli, name, "r:2"), *w = wr(cli, name, NULL);
    assert_int_equal(dlock_lock_acquire(r1, DLOCK_WATCHDOG), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r2, DLOCK_WATCHDOG), DLOCK_OK);
    taker k;
    start_taker(&k, w, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 0);
    assert_true(await_waiters(cli, name, 1, 5000));
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    th_sleep_ms(200);
    assert_int_equal(k.acquired_at, 0);
    int64_t t0 = th_now_ms();
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    pthread_join(k.t, NULL);
    assert_int_equal(k.rc, DLOCK_OK);
    assert_true(k.acquired_at - t0 < 1000 * th_slack());
    assert_true(k.attempts <= 3);   /* never woken by r1's release */
    assert_int_equal(k.release_rc, DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
}

/* ------------------------------------------------------------- Redisson */

static void test_dlock_side_as_redisson_sees_it(void **state)
{
    (void)state;
    char name[128], me[DLOCK_OWNER_BUFSIZE], wfield[DLOCK_OWNER_BUFSIZE + 8], v[64], m[16];
    th_name(name, sizeof(name), "rw-layout");
    assert_int_equal(dlock_client_owner_id(cli, me, sizeof(me)), DLOCK_OK);
    snprintf(wfield, sizeof(wfield), "%s:write", me);
    redisContext *sub = th_admin(&srv);
    freeReplyObject(redisCommand(sub, "SUBSCRIBE redisson_rwlock:{%s}", name));
    dlock_lock *w = wr(cli, name, NULL), *r = rd(cli, name, NULL), *o = rd(cli, name, "rid:7");

    assert_int_equal(dlock_lock_acquire(w, 10000), DLOCK_OK);
    assert_string_equal(hget(name, "mode", v, sizeof(v)), "write");
    assert_string_equal(hget(name, wfield, v, sizeof(v)), "1");
    assert_int_equal(th_int(&srv, "HLEN %s", name), 2);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_string_equal(next_message(sub, m, sizeof(m)), "1");

    assert_int_equal(dlock_lock_acquire(r, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(o, 10000), DLOCK_OK);
    assert_string_equal(hget(name, "mode", v, sizeof(v)), "read");
    assert_string_equal(hget(name, me, v, sizeof(v)), "1");
    assert_int_equal(th_int(&srv, "EXISTS {%s}:%s:rwlock_timeout:1", name, me), 1);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);   /* o still reads: no message */
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    assert_string_equal(next_message(sub, m, sizeof(m)), "0");
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    redisFree(sub);
    dlock_lock_free(w);
    dlock_lock_free(r);
    dlock_lock_free(o);
}

/* A Redisson writer (HSET mode write, <rid>:write 1, PEXPIRE) blocks dlock's
 * readers; its release (DEL, PUBLISH "1") wakes them all at once, not at its
 * TTL. A Redisson reader (its field and timeout key) lets dlock's readers in
 * and keeps dlock's writer out; a dlock read release that leaves it sets the
 * lock's TTL to its timeout key's. */
static void test_redisson_side_with_dlock(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-redisson");
    const char *rid = "9b2f0c3e-0000-4000-8000-000000000001:7";
    freeReplyObject(th_cmd(&srv, "HSET %s mode write %s:write 1", name, rid));
    freeReplyObject(th_cmd(&srv, "PEXPIRE %s 30000", name));
    dlock_lock *r = rd(cli, name, NULL), *w = wr(cli, name, NULL);
    assert_false(locked(r));
    assert_true(locked(w));
    enum { N = 3 };
    taker k[N];
    for (int i = 0; i < N; i++)
        start_taker(&k[i], r, DLOCK_WAIT_FOREVER, DLOCK_WATCHDOG, 50);
    assert_true(await_waiters(cli, name, N, 5000));
    th_sleep_ms(100);
    for (int i = 0; i < N; i++)
        assert_int_equal(k[i].acquired_at, 0);
    int64_t t0 = th_now_ms();
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    freeReplyObject(th_cmd(&srv, "PUBLISH redisson_rwlock:{%s} 1", name));
    for (int i = 0; i < N; i++) {
        pthread_join(k[i].t, NULL);
        assert_int_equal(k[i].rc, DLOCK_OK);
        assert_true(k[i].acquired_at - t0 < 1000 * th_slack());
    }

    /* A Redisson reader with a 20 s lease. */
    freeReplyObject(th_cmd(&srv, "HSET %s mode read %s 1", name, rid));
    freeReplyObject(th_cmd(&srv, "SET {%s}:%s:rwlock_timeout:1 1 PX 20000", name, rid));
    freeReplyObject(th_cmd(&srv, "PEXPIRE %s 20000", name));
    assert_int_equal(dlock_lock_try(r, 0, 2000), DLOCK_OK);
    assert_int_equal(try_elsewhere(w), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    long long ttl = th_int(&srv, "PTTL %s", name);
    assert_true(th_ttl_within(ttl, 20000, 5000));
    /* Its release as Redisson does it (the last reader): DEL, "0". */
    freeReplyObject(th_cmd(&srv, "DEL %s {%s}:%s:rwlock_timeout:1", name, name, rid));
    freeReplyObject(th_cmd(&srv, "PUBLISH redisson_rwlock:{%s} 0", name));
    assert_int_equal(dlock_lock_try(w, 0, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
}

/* ------------------------------------------------------- force, queries */

/* RedissonReadWriteLockTest.testForceUnlock: each side deletes the lock only
 * in its own mode; testMultiRead's forceUnlock of a free lock is 0. */
static void test_force_release_per_side(void **state)
{
    (void)state;
    char name[128], m[16];
    th_name(name, sizeof(name), "rw-force");
    redisContext *sub = th_admin(&srv);
    freeReplyObject(redisCommand(sub, "SUBSCRIBE redisson_rwlock:{%s}", name));
    dlock_lock *r = rd(cli, name, NULL), *w = wr(cli, name, NULL);
    int was = -1;
    assert_int_equal(dlock_lock_force_release(r, &was), DLOCK_OK);
    assert_int_equal(was, 0);
    assert_int_equal(dlock_lock_acquire(r, DLOCK_WATCHDOG), DLOCK_OK);
    assert_true(locked(r));
    assert_int_equal(dlock_lock_force_release(w, &was), DLOCK_OK);
    assert_int_equal(was, 0);
    assert_true(locked(r));
    assert_int_equal(dlock_lock_force_release(r, &was), DLOCK_OK);
    assert_int_equal(was, 1);
    assert_string_equal(next_message(sub, m, sizeof(m)), "0");
    assert_false(locked(r));
    assert_int_equal(dlock__watchdog_count(cli->wd), 0);   /* its renewal stopped */

    assert_int_equal(dlock_lock_acquire(w, DLOCK_WATCHDOG), DLOCK_OK);
    assert_true(locked(w));
    assert_int_equal(dlock_lock_force_release(r, &was), DLOCK_OK);
    assert_int_equal(was, 0);
    assert_true(locked(w));
    assert_int_equal(dlock_lock_force_release(w, &was), DLOCK_OK);
    assert_int_equal(was, 1);
    assert_string_equal(next_message(sub, m, sizeof(m)), "1");
    assert_false(locked(w));
    assert_false(locked(r));
    assert_int_equal(dlock__watchdog_count(cli->wd), 0);
    redisFree(sub);
    dlock_lock_free(r);
    dlock_lock_free(w);
}

/* Fenced acquisitions on both sides share the name's token counter; run,
 * cancellable and TTL work on both handles. */
static int ran(void *ud)
{
    dlock_lock *l = ud;
    return (int)count(l) * 10 + held(l);
}

static void test_other_calls(void **state)
{
    (void)state;
    char name[128];
    th_name(name, sizeof(name), "rw-calls");
    dlock_lock *r = rd(cli, name, NULL), *w = wr(cli, name, NULL), *o = rd(cli, name, "o:1");
    uint64_t t1 = 0, t2 = 0, t3 = 0;
    assert_int_equal(dlock_lock_acquire_opts(w, &(dlock_wait_opts){.lease_ms = 5000, .token = &t1}),
                     DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_opts(r, &(dlock_wait_opts){.lease_ms = 5000, .token = &t2}),
                     DLOCK_OK);
    assert_true(t2 > t1);
    /* A snapshot: a read-write lock, write mode, the writer twice (writes,
     * and reads). */
    char me[DLOCK_OWNER_BUFSIZE];
    assert_int_equal(dlock_client_owner_id(cli, me, sizeof(me)), DLOCK_OK);
    dlock_info *info = NULL;
    assert_int_equal(dlock_lock_inspect(r, &info), DLOCK_OK);
    assert_int_equal(dlock_info_kind(info), DLOCK_KIND_RWLOCK);
    assert_string_equal(dlock_info_mode(info), "write");
    assert_int_equal(dlock_info_holders(info), 2);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(dlock_info_owner(info, i), me);
    assert_int_equal(dlock_info_holder_writes(info, 0) + dlock_info_holder_writes(info, 1), 1);
    dlock_info_free(info);
    int64_t ttl = 0;
    assert_int_equal(dlock_lock_ttl(r, &ttl), DLOCK_OK);
    assert_true(th_ttl_within(ttl, 5000, 1000));
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_ttl(w, &ttl), DLOCK_OK);
    assert_int_equal(ttl, -2);
    assert_int_equal(dlock_lock_acquire_opts(o, &(dlock_wait_opts){.lease_ms = 5000, .token = &t3}),
                     DLOCK_OK);
    assert_true(t3 > t2);
    int res = 0;
    /* reads with o */
    assert_int_equal(dlock_lock_run(r, &(dlock_wait_opts){.lease_ms = 5000}, ran, r, &res),
                     DLOCK_OK);
    assert_int_equal(res, 11);
    assert_int_equal(
        dlock_lock_run(w, &(dlock_wait_opts){.wait_ms = 100, .lease_ms = 5000}, ran, w, &res),
        DLOCK_ETIMEDOUT);
    dlock_cancel *cancel;
    assert_int_equal(dlock_cancel_new(&cancel), DLOCK_OK);
    int64_t t0 = th_now_ms();
    dlock_cancel_fire(cancel);
    assert_int_equal(dlock_lock_acquire_opts(w, &(dlock_wait_opts){.wait_ms = DLOCK_WAIT_FOREVER,
                                                                   .lease_ms = 5000,
                                                                   .cancel = cancel}),
                     DLOCK_ECANCELED);
    assert_true(th_now_ms() - t0 < 1000 * th_slack());
    assert_false(held(w));
    dlock_cancel_free(cancel);
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    assert_int_equal(dlock_lock_run(w, &(dlock_wait_opts){.lease_ms = 5000}, ran, w, &res),
                     DLOCK_OK);
    assert_int_equal(res, 11);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_lock_free(o);
}

/* ------------------------------------------------------------ bad input */

/* Names holding other data, or another lock type: DLOCK_EWRONGTYPE from every
 * call, nothing written, nothing left held; a reentrant lock handle refuses a
 * read-write lock. Owner ids without ':' and NULL ones are refused. A release
 * through the side the owner does not hold says which side it holds. */
static void test_bad_input(void **state)
{
    (void)state;
    char name[128], me[DLOCK_OWNER_BUFSIZE];
    th_name(name, sizeof(name), "rw-bad");
    assert_int_equal(dlock_client_owner_id(cli, me, sizeof(me)), DLOCK_OK);
    dlock_lock *r = rd(cli, name, NULL), *w = wr(cli, name, NULL), *l = NULL;
    int v = 0;
    int64_t n = 0;
    freeReplyObject(th_cmd(&srv, "SET %s plain", name));
    assert_int_equal(dlock_lock_try(r, 100, 1000), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), "read lock"));
    assert_int_equal(dlock_lock_try(w, 100, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_force_release(w, &v), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_is_locked(r, &v), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_release(r), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_hold_count(w, &n), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "EXISTS {%s}:%s:rwlock_timeout:1", name, me), 0);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));

    /* A reentrant lock's hash (Redisson's RLock), and somebody's hash. */
    freeReplyObject(th_cmd(&srv, "HSET %s 9b2f0c3e-0000-4000-8000-000000000001:7 1", name));
    assert_int_equal(dlock_lock_try(r, 100, 1000), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), "without a read-write lock mode"));
    assert_int_equal(dlock_lock_acquire(w, DLOCK_WATCHDOG), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_force_release(r, &v), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_is_locked(w, &v), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 1);
    assert_int_equal(th_int(&srv, "EXISTS {%s}:%s:rwlock_timeout:1", name, me), 0);
    freeReplyObject(th_cmd(&srv, "HSET %s mode sideways", name));
    assert_int_equal(dlock_lock_try(r, 0, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_try(w, 0, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(th_int(&srv, "HLEN %s", name), 2);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
    assert_int_equal(dlock__watchdog_count(cli->wd), 0);

    /* A reentrant lock (and a fair lock) refuse a read-write lock's hash. */
    assert_int_equal(dlock_lock_acquire(r, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 1000), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_last_error(), "read-write lock"));
    assert_int_equal(dlock_lock_release(l), DLOCK_EWRONGTYPE);   /* not the read hold */
    dlock_lock_free(l);
    assert_int_equal(dlock_fair_lock_get(cli, name, &l), DLOCK_OK);
    assert_int_equal(dlock_lock_try(l, 0, 1000), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_release(l), DLOCK_EWRONGTYPE);
    dlock_lock_free(l);

    /* The wrong side's release: nothing changes, the message says why. */
    assert_int_equal(dlock_lock_release(w), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "holds the read lock only"));
    assert_int_equal(count(r), 1);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_last_error(), "which holds the write lock"));
    assert_int_equal(count(w), 1);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_ENOTOWNER);
    assert_int_equal(th_int(&srv, "EXISTS %s", name), 0);

    /* Getters. */
    assert_int_equal(dlock_read_lock_get_as(cli, name, "no-colon", &l), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_write_lock_get_as(cli, name, NULL, &l), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_write_lock_get(cli, "", &l), DLOCK_EINVAL);
    assert_int_equal(dlock_read_lock_get(NULL, name, &l), DLOCK_EINVAL);
    assert_int_equal(dlock_read_lock_get(cli, name, NULL), DLOCK_EINVAL);
    assert_string_equal(dlock_errname(DLOCK_EDEADLK), "DLOCK_EDEADLK");
    assert_string_not_equal(dlock_strerror(DLOCK_EDEADLK), "unknown dlock status");
    dlock_lock_free(r);
    dlock_lock_free(w);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_release_wakes_all_readers),
        cmocka_unit_test(test_read_release_wakes_writer),
        cmocka_unit_test(test_writer_keeping_read_wakes_readers),
        cmocka_unit_test(test_dlock_side_as_redisson_sees_it),
        cmocka_unit_test(test_redisson_side_with_dlock),
        cmocka_unit_test(test_force_release_per_side),
        cmocka_unit_test(test_other_calls),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, th_setup, th_teardown);
}
